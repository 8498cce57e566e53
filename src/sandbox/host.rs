//! The host side of the worker protocol: starts the worker, sends executions, answers
//! its requests from a [`Corpus`], and kills it when it stops answering.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::vfs::Corpus;
use super::{ExecLimits, HostMessage, WORKER_ARG, WORKER_ENV, WorkerMessage, time_limit_message};

/// How long past an execution's time limit the worker may take to report that it
/// stopped itself before the host kills it.
pub const WATCHDOG_SLACK: Duration = Duration::from_secs(2);

/// What one execution produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecResult {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
    /// The worker threw its session away (earlier variables are gone).
    pub reset: bool,
}

/// The worker is gone (killed, crashed, hung, or spoke nonsense); its session is lost.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct SandboxLost(pub String);

/// The worker executable: `$GROUNDWORK_SANDBOX_WORKER`, else this executable.
pub fn default_worker() -> std::io::Result<PathBuf> {
    match std::env::var_os(WORKER_ENV) {
        Some(p) if !p.is_empty() => Ok(PathBuf::from(p)),
        _ => std::env::current_exe(),
    }
}

/// One worker process holding one REPL session.
pub struct Sandbox {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("pid", &self.child.id())
            .finish_non_exhaustive()
    }
}

impl Sandbox {
    /// Starts `worker __sandbox-worker` with an empty environment. The process is
    /// killed when the sandbox drops, when this process dies (Linux), and exits by
    /// itself when its stdin closes.
    pub async fn spawn(worker: &Path) -> std::io::Result<Self> {
        let mut command = Command::new(worker);
        command
            .arg(WORKER_ARG)
            // Nothing of ours (API keys, tokens) reaches sandboxed code's process.
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        #[cfg(target_os = "linux")]
        {
            let parent = std::process::id() as libc::pid_t;
            // SAFETY: between fork and exec the closure makes only async-signal-safe
            // calls (`prctl`, `getppid`, `_exit`) and allocates nothing.
            unsafe {
                command.pre_exec(move || {
                    // Note: the signal follows the *thread* that spawned the worker;
                    // runs spawn it from runtime threads, which live as long as the
                    // process. Stdin EOF in the worker is the second line of defence.
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // The parent died before the request took effect.
                    if libc::getppid() != parent {
                        libc::_exit(1);
                    }
                    Ok(())
                });
            }
        }
        let mut child = command.spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        Ok(Sandbox {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
        })
    }

    /// The worker's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    async fn send(&mut self, msg: &HostMessage) -> Result<(), SandboxLost> {
        let mut line = serde_json::to_string(msg).map_err(|e| SandboxLost(e.to_string()))?;
        line.push('\n');
        let sent = async {
            self.stdin.write_all(line.as_bytes()).await?;
            self.stdin.flush().await
        };
        match sent.await {
            Ok(()) => Ok(()),
            Err(_) => Err(self.gone().await),
        }
    }

    /// Why the worker is gone, once it is.
    async fn gone(&mut self) -> SandboxLost {
        let status = tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await;
        let how = match status {
            Ok(Ok(s)) => describe_exit(s),
            _ => {
                let _ = self.child.kill().await;
                "stopped answering".to_string()
            }
        };
        SandboxLost(format!("The sandbox worker {how}."))
    }

    /// Runs `code` in the session within `time_limit` of wall-clock time, host calls
    /// included: a host-function call after the limit, or one still unanswered at it,
    /// stops the program, and a worker that has not finished [`WATCHDOG_SLACK`] after
    /// the limit is killed (a worker stops pure computation itself, at its Monty
    /// budget). A lost worker has been killed; drop this sandbox and start another.
    pub async fn exec(
        &mut self,
        code: &str,
        limits: &ExecLimits,
        corpus: &mut Corpus,
        time_limit: Duration,
    ) -> Result<ExecResult, SandboxLost> {
        let deadline = tokio::time::Instant::now() + time_limit;
        let kill_at = deadline + WATCHDOG_SLACK;
        self.send(&HostMessage::Exec {
            code: code.to_string(),
            limits: limits.clone(),
        })
        .await?;
        loop {
            let line = match tokio::time::timeout_at(kill_at, self.lines.next_line()).await {
                Err(_) => return Err(self.stop_at_limit(time_limit).await),
                Ok(Ok(Some(line))) => line,
                Ok(_) => return Err(self.gone().await),
            };
            let msg: WorkerMessage = match serde_json::from_str(&line) {
                Ok(m) => m,
                Err(_) => {
                    let _ = self.child.kill().await;
                    return Err(SandboxLost(
                        "The sandbox worker broke the protocol.".to_string(),
                    ));
                }
            };
            let (id, answer) = match msg {
                WorkerMessage::Done {
                    success,
                    stdout,
                    stderr,
                    reset,
                } => {
                    return Ok(ExecResult {
                        success,
                        stdout,
                        stderr,
                        reset,
                    });
                }
                WorkerMessage::Call {
                    id,
                    function,
                    args,
                    kwargs,
                } => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(self.stop_at_limit(time_limit).await);
                    }
                    let call = corpus.call(&function, &args, &kwargs);
                    match tokio::time::timeout_at(deadline, call).await {
                        Ok(answer) => (id, answer),
                        Err(_) => return Err(self.stop_at_limit(time_limit).await),
                    }
                }
                // Reads past the deadline fail with SPEC's `TimeoutError` (the corpus
                // checks); one that hangs is cut off with the worker.
                WorkerMessage::Os { id, op, path } => {
                    match tokio::time::timeout_at(kill_at, corpus.os(&op, &path)).await {
                        Ok(answer) => (id, answer),
                        Err(_) => return Err(self.stop_at_limit(time_limit).await),
                    }
                }
            };
            let reply = match answer {
                Ok(v) => HostMessage::Reply {
                    id,
                    ok: Some(v),
                    error: None,
                },
                Err(e) => HostMessage::Reply {
                    id,
                    ok: None,
                    error: Some(e),
                },
            };
            self.send(&reply).await?;
        }
    }

    /// Kills the worker of an execution that ran out of time.
    async fn stop_at_limit(&mut self, time_limit: Duration) -> SandboxLost {
        let _ = self.child.kill().await;
        SandboxLost(time_limit_message(time_limit))
    }

    /// Stops the worker.
    pub async fn close(mut self) {
        let _ = self.child.kill().await;
    }
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            // SIGABRT: the allocator refused memory beyond the hard cap.
            return if sig == 6 {
                "ran out of memory and was stopped".to_string()
            } else if sig == 9 {
                "was killed".to_string()
            } else {
                format!("died (signal {sig})")
            };
        }
    }
    match status.code() {
        Some(code) if code == monty_types::OOM_EXIT_CODE => {
            "ran out of memory and was stopped".to_string()
        }
        Some(code) => format!("exited (status {code})"),
        None => "exited".to_string(),
    }
}
