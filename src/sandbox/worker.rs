//! The worker side: one Monty REPL session, driven over stdin/stdout (see the module
//! docs of [`crate::sandbox`]). Synchronous, single-threaded, no async runtime.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use monty::{MontyRepl, ReplProgress};
use monty_types::{
    CompileOptions, ExcType, ExtFunctionResult, MontyException, MontyFileHandle, MontyObject,
    NameLookupResult, OsFunctionCall, PrintWriter, ResourceLimits, ResourceTracker, dir_stat,
    file_stat,
};
use serde_json::{Map, Value};

use super::{ExecLimits, HostMessage, ReplyError, WorkerMessage, normalize_path, truncate_output};

/// The host function that searches the knowledge base.
pub const SEARCH_FUNCTION: &str = "search";
/// The host function that lists the documents.
pub const LIST_DOCUMENTS_FUNCTION: &str = "list_documents";
/// The host functions code may call (SPEC §9.3: exactly two).
pub const HOST_FUNCTIONS: &[&str] = &[SEARCH_FUNCTION, LIST_DOCUMENTS_FUNCTION];

/// Headroom above the soft memory limit before the allocator refuses outright.
const HARD_CAP_HEADROOM: usize = 64 << 20;

/// Entry point of `groundwork __sandbox-worker`.
pub fn run() -> ExitCode {
    super::alloc::arm(usize::MAX);
    let stdout = std::io::stdout();
    let mut io = Pipe {
        input: stdin_lines(),
        output: stdout.lock(),
        next_id: 0,
    };
    let mut session: Option<MontyRepl> = None;
    loop {
        let msg = match io.read() {
            Some(m) => m,
            None => return ExitCode::SUCCESS,
        };
        match msg {
            HostMessage::Exec { code, limits } => {
                let done = execute(&mut session, &mut io, &code, &limits);
                if io.write(&done).is_err() {
                    return ExitCode::FAILURE;
                }
            }
            HostMessage::Reply { .. } => {
                // A reply nobody asked for: the protocol is broken.
                return ExitCode::FAILURE;
            }
        }
    }
}

/// The host's lines, read on a thread of their own that ends the process the moment
/// stdin closes, even while a program computes: a host that died (killed, crashed)
/// closes the pipe, and its worker must not outlive it.
fn stdin_lines() -> Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
        // `_exit`: no atexit handlers or stdout flushing racing the busy main thread.
        #[cfg(unix)]
        // SAFETY: `_exit` ends the process at once and touches no Rust state.
        unsafe {
            libc::_exit(0)
        }
        #[cfg(not(unix))]
        std::process::exit(0)
    });
    rx
}

struct Pipe<W> {
    input: Receiver<String>,
    output: W,
    next_id: u64,
}

impl<W: Write> Pipe<W> {
    fn read(&mut self) -> Option<HostMessage> {
        loop {
            let line = self.input.recv().ok()?;
            if line.trim().is_empty() {
                continue;
            }
            return serde_json::from_str(&line).ok();
        }
    }

    fn write(&mut self, msg: &WorkerMessage) -> std::io::Result<()> {
        let line = serde_json::to_string(msg).map_err(std::io::Error::other)?;
        self.output.write_all(line.as_bytes())?;
        self.output.write_all(b"\n")?;
        self.output.flush()
    }

    /// Sends a request and waits for its reply. `Err` is a Python exception to raise.
    fn ask(&mut self, make: impl FnOnce(u64) -> WorkerMessage) -> Result<Value, ReplyError> {
        self.next_id += 1;
        let id = self.next_id;
        let broken = |what: &str| ReplyError {
            kind: "RuntimeError".into(),
            message: format!("sandbox host {what}"),
        };
        self.write(&make(id)).map_err(|_| broken("is gone"))?;
        match self.read() {
            Some(HostMessage::Reply { id: got, ok, error }) if got == id => match error {
                Some(e) => Err(e),
                None => Ok(ok.unwrap_or(Value::Null)),
            },
            _ => Err(broken("sent an unexpected message")),
        }
    }
}

fn exception(e: ReplyError) -> MontyException {
    let kind = e.kind.parse::<ExcType>().unwrap_or(ExcType::RuntimeError);
    MontyException::new(kind, Some(e.message))
}

fn new_session(limits: &ExecLimits) -> MontyRepl {
    let limits = ResourceLimits::default()
        .max_duration(Duration::from_millis(limits.time_limit_ms))
        .max_recursion_depth(limits.max_recursion as usize)
        .max_memory(limits.max_memory as usize);
    MontyRepl::new(
        "analysis.py",
        ResourceTracker::new(limits),
        CompileOptions::default(),
    )
}

fn execute<W: Write>(
    session: &mut Option<MontyRepl>,
    io: &mut Pipe<W>,
    code: &str,
    limits: &ExecLimits,
) -> WorkerMessage {
    super::alloc::arm_cap(
        (limits.max_memory as usize)
            .saturating_add(HARD_CAP_HEADROOM)
            .saturating_add(super::alloc::live()),
    );
    let mut repl = session.take().unwrap_or_else(|| new_session(limits));
    // Monty's clock is the session's cumulative bytecode time: this execution may add
    // `budget` to what earlier ones used.
    let budget = Duration::from_millis(limits.time_limit_ms.min(limits.session_remaining_ms));
    let used_before = repl.tracker().elapsed();
    repl.tracker_mut().set_max_duration(used_before + budget);
    let mut out = String::new();
    let mut pending: HashMap<u32, ExtFunctionResult> = HashMap::new();
    let mut progress = repl.feed_start(code, vec![], PrintWriter::CollectString(&mut out, None));
    let outcome: Result<(), MontyException> = loop {
        let step = match progress {
            Err(e) => {
                *session = Some(e.repl);
                break Err(e.error);
            }
            Ok(ReplProgress::Complete { repl, value }) => {
                *session = Some(repl);
                if !matches!(value, MontyObject::None) {
                    out.push_str(&value.to_string());
                }
                break Ok(());
            }
            Ok(ReplProgress::NameLookup(lookup)) => {
                let result = if HOST_FUNCTIONS.contains(&lookup.name.as_str()) {
                    NameLookupResult::Value(MontyObject::Function {
                        name: lookup.name.clone(),
                        docstring: None,
                    })
                } else {
                    NameLookupResult::Undefined
                };
                lookup.resume(result, PrintWriter::CollectString(&mut out, None))
            }
            Ok(ReplProgress::FunctionCall(call)) => {
                if !HOST_FUNCTIONS.contains(&call.function_name.as_str()) {
                    let name = call.function_name.clone();
                    call.resume(
                        ExtFunctionResult::NotFound(name),
                        PrintWriter::CollectString(&mut out, None),
                    )
                } else {
                    let args: Vec<Value> = call.args.iter().map(monty_to_json).collect();
                    let kwargs: Map<String, Value> = call
                        .kwargs
                        .iter()
                        .map(|(k, v)| (k.to_string(), monty_to_json(v)))
                        .collect();
                    let function = call.function_name.clone();
                    match io.ask(|id| WorkerMessage::Call {
                        id,
                        function,
                        args,
                        kwargs,
                    }) {
                        Ok(v) => {
                            pending
                                .insert(call.call_id, ExtFunctionResult::Return(json_to_monty(&v)));
                            call.resume_pending(PrintWriter::CollectString(&mut out, None))
                        }
                        // An exception in a host function fails the execution (SPEC §9.3).
                        Err(e) => {
                            call.abort(exception(e), PrintWriter::CollectString(&mut out, None))
                        }
                    }
                }
            }
            Ok(ReplProgress::ResolveFutures(futures)) => {
                let results: Vec<(u32, ExtFunctionResult)> = futures
                    .pending_call_ids()
                    .iter()
                    .filter_map(|id| pending.remove(id).map(|r| (*id, r)))
                    .collect();
                futures.resume(results, PrintWriter::CollectString(&mut out, None))
            }
            Ok(ReplProgress::OsCall(call)) => match os_call(io, call.function_call.clone()) {
                OsAnswer::Result(r) => call.resume(r, PrintWriter::CollectString(&mut out, None)),
                OsAnswer::Abort(e) => call.abort(e, PrintWriter::CollectString(&mut out, None)),
            },
        };
        progress = step;
    };
    let max = limits.max_output_chars as usize;
    match outcome {
        Ok(()) => WorkerMessage::Done {
            success: true,
            stdout: truncate_output(&out, max),
            stderr: String::new(),
            reset: false,
        },
        Err(e) => {
            let stopped_at_limit = e.exc_type() == ExcType::TimeoutError
                && session
                    .as_ref()
                    .is_some_and(|r| r.tracker().check_time().is_err());
            // A forced stop at the compute limit throws the session away (SPEC §9.2,
            // §9.5), and what a memory error leaves behind would fail every later
            // snippet.
            let reset = stopped_at_limit || e.exc_type() == ExcType::MemoryError;
            if reset {
                *session = None;
            }
            let stderr = if stopped_at_limit {
                super::time_limit_message(budget)
            } else {
                match internal_detail(&e) {
                    Some(detail) => super::unsupported_message(detail, code),
                    None => e.to_string(),
                }
            };
            WorkerMessage::Done {
                success: false,
                stdout: truncate_output(&out, max),
                stderr,
                reset,
            }
        }
    }
}

/// The detail of an internal interpreter error (Monty reports them as a
/// `RuntimeError` whose message starts with [`super::MONTY_INTERNAL_PREFIX`]).
fn internal_detail(e: &MontyException) -> Option<&str> {
    if e.exc_type() != ExcType::RuntimeError {
        return None;
    }
    e.message()?.strip_prefix(super::MONTY_INTERNAL_PREFIX)
}

enum OsAnswer {
    Result(ExtFunctionResult),
    Abort(MontyException),
}

fn os_call<W: Write>(io: &mut Pipe<W>, call: OsFunctionCall) -> OsAnswer {
    let op = call.name();
    let Some(raw) = call.fs_primary_path() else {
        return match call {
            OsFunctionCall::Getenv(_) => {
                OsAnswer::Result(ExtFunctionResult::Return(MontyObject::None))
            }
            OsFunctionCall::GetEnviron => {
                OsAnswer::Result(ExtFunctionResult::Return(MontyObject::dict(Vec::new())))
            }
            other => OsAnswer::Result(ExtFunctionResult::Error(MontyException::new(
                ExcType::OSError,
                Some(format!("{} is not available in the sandbox", other.name())),
            ))),
        };
    };
    let path = normalize_path(raw);
    if call.is_write() {
        return OsAnswer::Result(ExtFunctionResult::Error(MontyException::new(
            ExcType::PermissionError,
            Some(format!("Document files are read-only: {path}")),
        )));
    }
    match &call {
        OsFunctionCall::Resolve(_) | OsFunctionCall::Absolute(_) => {
            return OsAnswer::Result(ExtFunctionResult::Return(MontyObject::Path(path)));
        }
        OsFunctionCall::IsSymlink(_) => {
            return OsAnswer::Result(ExtFunctionResult::Return(MontyObject::Bool(false)));
        }
        _ => {}
    }
    let reply = io.ask(|id| WorkerMessage::Os {
        id,
        op: op.to_string(),
        path: path.clone(),
    });
    let value = match reply {
        Ok(v) => v,
        // Reads past the deadline fail the execution (SPEC §9.5).
        Err(e) if e.kind == "TimeoutError" => return OsAnswer::Abort(exception(e)),
        Err(e) => return OsAnswer::Result(ExtFunctionResult::Error(exception(e))),
    };
    let object = match call {
        OsFunctionCall::Open(args) => MontyObject::FileHandle(MontyFileHandle {
            path,
            mode: args.mode,
            position: 0,
        }),
        OsFunctionCall::Iterdir(_) => MontyObject::List(
            value
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|s| MontyObject::Path(s.to_string()))
                        .collect()
                })
                .unwrap_or_default(),
        ),
        OsFunctionCall::Stat(_) => {
            if value["is_dir"].as_bool().unwrap_or(false) {
                dir_stat(0o555, 0.0)
            } else {
                file_stat(0o444, value["size"].as_i64().unwrap_or(0), 0.0)
            }
        }
        OsFunctionCall::ReadBytes(_) => {
            MontyObject::Bytes(value.as_str().unwrap_or_default().as_bytes().to_vec())
        }
        _ => json_to_monty(&value),
    };
    OsAnswer::Result(ExtFunctionResult::Return(object))
}

/// JSON to a Python value: objects become dicts, arrays lists.
pub fn json_to_monty(v: &Value) -> MontyObject {
    match v {
        Value::Null => MontyObject::None,
        Value::Bool(b) => MontyObject::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => MontyObject::Int(i),
            None => MontyObject::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => MontyObject::String(s.clone()),
        Value::Array(items) => MontyObject::List(items.iter().map(json_to_monty).collect()),
        Value::Object(map) => MontyObject::dict(
            map.iter()
                .map(|(k, v)| (MontyObject::String(k.clone()), json_to_monty(v)))
                .collect::<Vec<_>>(),
        ),
    }
}

/// A Python value to JSON (arguments of host functions).
pub fn monty_to_json(v: &MontyObject) -> Value {
    match v {
        MontyObject::None => Value::Null,
        MontyObject::Bool(b) => Value::Bool(*b),
        MontyObject::Int(i) => Value::from(*i),
        MontyObject::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        MontyObject::String(s) | MontyObject::Path(s) => Value::String(s.clone()),
        MontyObject::List(items)
        | MontyObject::Tuple(items)
        | MontyObject::Set(items)
        | MontyObject::FrozenSet(items) => Value::Array(items.iter().map(monty_to_json).collect()),
        MontyObject::Dict(pairs) => Value::Object(
            pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), monty_to_json(v)))
                .collect(),
        ),
        other => Value::String(other.to_string()),
    }
}
