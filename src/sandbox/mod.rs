//! The analysis sandbox (SPEC §9): Python (Monty) run in a worker subprocess.
//!
//! The worker is this very binary started as `groundwork __sandbox-worker` (see
//! [`WORKER_ARG`]). Host and worker speak line-delimited JSON over the worker's
//! stdin/stdout ([`HostMessage`], [`WorkerMessage`]):
//!
//! ```text
//! host  -> {"type":"exec","code":..,"limits":{..}}
//! worker-> {"type":"call","id":1,"function":"search","args":["q"],"kwargs":{"limit":3}}
//! host  -> {"type":"reply","id":1,"ok":[{..}]}
//! worker-> {"type":"os","id":2,"op":"Path.read_text","path":"/documents/d/content.txt"}
//! host  -> {"type":"reply","id":2,"error":{"kind":"FileNotFoundError","message":".."}}
//! worker-> {"type":"done","success":true,"stdout":"..","stderr":""}
//! ```
//!
//! The worker keeps one Monty REPL session for its lifetime, so variables persist
//! between executions of a run; the host starts one worker per run. A worker that
//! dies (memory cap, watchdog, crash) loses its session; the host reports that and
//! starts a fresh one on the next call.
//!
//! Time (SPEC §9.5): an execution may take `min(time_limit_ms, session_remaining_ms)`
//! of wall-clock time, host calls included. The worker stops pure computation itself
//! at that much Monty bytecode time; the host refuses host-function calls once the
//! time is up and kills a worker that has not finished [`host::WATCHDOG_SLACK`] later.
//! Every such forced stop throws the session away (`reset`), and the model is told
//! that the sandbox restarted (SPEC §9.2). A document read after the deadline is
//! SPEC's ordinary `TimeoutError` instead, which leaves the session alone.
//!
//! Process hygiene: the worker starts with an empty environment (it needs none: Monty
//! reads no variables, `os.getenv` in code sees nothing, and the host answers every
//! file and search request), is sent `SIGKILL` when the process that started it dies
//! (Linux `PR_SET_PDEATHSIG`), and exits by itself when its stdin closes, which also
//! covers a parent killed on other systems.

pub mod alloc;
pub mod host;
pub mod vfs;
pub mod worker;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The first command-line argument that turns the binary into a sandbox worker.
pub const WORKER_ARG: &str = "__sandbox-worker";

/// Environment variable naming the worker executable (overrides `current_exe`).
pub const WORKER_ENV: &str = "GROUNDWORK_SANDBOX_WORKER";

/// Limits for one execution, sent with every `exec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecLimits {
    /// Time budget of this call, milliseconds: Monty bytecode time in the worker,
    /// wall-clock time with host calls at the host (see the module docs).
    pub time_limit_ms: u64,
    /// What is left of the session's total compute budget, milliseconds.
    pub session_remaining_ms: u64,
    /// Soft memory limit (Monty raises `MemoryError`), bytes.
    pub max_memory: u64,
    /// Maximum Python recursion depth.
    pub max_recursion: u64,
    /// Characters of output kept before the truncation marker.
    pub max_output_chars: u64,
}

/// Host to worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HostMessage {
    /// Run a snippet in the session.
    Exec { code: String, limits: ExecLimits },
    /// The answer to a `call` or `os` request.
    Reply {
        id: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ok: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ReplyError>,
    },
}

/// A Python exception the host raises at a suspended call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyError {
    /// Exception type name (`PermissionError`, `FileNotFoundError`, `TimeoutError`...).
    pub kind: String,
    pub message: String,
}

/// Worker to host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WorkerMessage {
    /// A host function call (`search`, `list_documents`).
    Call {
        id: u64,
        function: String,
        #[serde(default)]
        args: Vec<Value>,
        #[serde(default)]
        kwargs: Map<String, Value>,
    },
    /// A read-only filesystem operation (`Path.read_text`, `Path.iterdir`, `open`...).
    Os { id: u64, op: String, path: String },
    /// The snippet finished.
    Done {
        success: bool,
        stdout: String,
        stderr: String,
        /// The session was thrown away (a memory error leaves it unusable).
        #[serde(default)]
        reset: bool,
    },
}

macro_rules! text {
    ($name:ident, $file:literal) => {
        fn $name() -> &'static str {
            include_str!(concat!("../../assets/prompts/sandbox/", $file)).trim_end()
        }
    };
}

text!(time_limit_text, "time_limit.txt");
text!(session_budget_text, "session_budget_spent.txt");
text!(system_exit_text, "system_exit.txt");
text!(exception_argument_text, "exception_argument.txt");
text!(unsupported_text, "unsupported_construct.txt");

fn seconds(d: std::time::Duration) -> String {
    vfs::seconds_text((d.as_millis() as f64) / 1000.0)
}

/// The stderr of an execution stopped at its time limit (the restart note is added by
/// the capability).
pub fn time_limit_message(limit: std::time::Duration) -> String {
    crate::template::fill(time_limit_text(), &[("seconds", &seconds(limit))])
}

/// The stderr of an execution refused because the session's total budget is spent.
pub fn session_budget_message(total: std::time::Duration) -> String {
    crate::template::fill(session_budget_text(), &[("seconds", &seconds(total))])
}

/// The prefix Monty gives its internal errors (`RuntimeError` with no traceback).
pub const MONTY_INTERNAL_PREFIX: &str = "Internal error in monty: ";

/// What an internal interpreter error `detail` (without [`MONTY_INTERNAL_PREFIX`])
/// reads as: an ordinary failure naming the construct `code` used that the sandbox
/// does not support.
pub fn unsupported_message(detail: &str, code: &str) -> String {
    use crate::template::fill;
    if detail.contains("exceptions can only be called with") {
        return match exception_with_argument(code) {
            Some(name) if name == "SystemExit" => system_exit_text().to_string(),
            Some(name) => fill(
                exception_argument_text(),
                &[(
                    "construct",
                    &format!("{name}(...) with a non-string argument"),
                )],
            ),
            None => fill(
                exception_argument_text(),
                &[("construct", "an exception with a non-string argument")],
            ),
        };
    }
    fill(unsupported_text(), &[("detail", detail.trim())])
}

/// The first exception class `code` calls with an argument that is not a string
/// literal (`SystemExit(1)`, `ValueError(x)`), by name.
fn exception_with_argument(code: &str) -> Option<String> {
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if !(c.is_ascii_alphabetic() || c == b'_') || (i > 0 && is_ident(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_ident(bytes[i]) {
            i += 1;
        }
        let name = &code[start..i];
        if bytes.get(i) != Some(&b'(') || name.parse::<monty_types::ExcType>().is_err() {
            continue;
        }
        let rest = code[i + 1..].trim_start();
        let literal = rest.starts_with(['"', '\'', ')'])
            || (rest.len() > 1
                && rest.as_bytes()[0].is_ascii_alphabetic()
                && rest[1..].starts_with(['"', '\'']));
        if !literal {
            return Some(name.to_string());
        }
    }
    None
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The host-side marker appended to long output (SPEC §9.2).
pub const TRUNCATION_MARKER: &str = "\n... (output truncated)";

/// Keeps the first `max` characters of `text` and appends the truncation marker
/// when anything was cut.
pub fn truncate_output(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((at, _)) => format!("{}{TRUNCATION_MARKER}", &text[..at]),
    }
}

/// Normalises a sandbox path: absolute, no `.`/`..`/empty segments, no trailing `/`.
pub fn normalize_path(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_and_paths() {
        assert_eq!(truncate_output("abc", 3), "abc");
        assert_eq!(truncate_output("abcd", 3), "abc\n... (output truncated)");
        assert_eq!(truncate_output("ééé", 2), "éé\n... (output truncated)");
        assert_eq!(normalize_path("documents/x/"), "/documents/x");
        assert_eq!(normalize_path("/documents/./x/../y"), "/documents/y");
        assert_eq!(normalize_path("/"), "/");
        assert!(time_limit_message(std::time::Duration::from_millis(2500)).contains("2.5s"));
        let m: HostMessage = serde_json::from_str(r#"{"type":"reply","id":3,"ok":true}"#).unwrap();
        assert_eq!(
            m,
            HostMessage::Reply {
                id: 3,
                ok: Some(Value::Bool(true)),
                error: None
            }
        );
    }

    #[test]
    fn internal_errors_name_the_construct() {
        let exit = unsupported_message(
            "exceptions can only be called with zero or one string argument",
            "print(1)\nraise SystemExit(1)",
        );
        assert!(
            exit.contains("SystemExit is not supported in the sandbox"),
            "{exit}"
        );
        let value = unsupported_message(
            "exceptions can only be called with zero or one string argument",
            "raise ValueError('ok')\nraise KeyError(3)",
        );
        assert!(
            value.starts_with("NotImplementedError: KeyError(...)"),
            "{value}"
        );
        let other = unsupported_message("ForIter: expected iterator ref on stack", "x");
        assert!(
            !other.contains("monty") && other.contains("ForIter"),
            "{other}"
        );
    }
}
