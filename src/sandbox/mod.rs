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
    /// Compute budget of this call (Monty bytecode time), milliseconds.
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
}
