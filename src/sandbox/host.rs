//! The host side of the worker protocol: starts the worker, sends executions, answers
//! its requests from a [`Corpus`], and kills it when it stops answering.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::vfs::Corpus;
use super::{ExecLimits, HostMessage, WORKER_ARG, WORKER_ENV, WorkerMessage};

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
    /// Starts `worker __sandbox-worker`. The process is killed when the sandbox drops.
    pub async fn spawn(worker: &Path) -> std::io::Result<Self> {
        let mut child = Command::new(worker)
            .arg(WORKER_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
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

    /// Runs `code` in the session. `watchdog` bounds the time the worker may compute
    /// without a word (time spent answering its requests does not count). A lost
    /// worker has been killed; drop this sandbox and start another.
    pub async fn exec(
        &mut self,
        code: &str,
        limits: &ExecLimits,
        corpus: &mut Corpus,
        watchdog: Duration,
    ) -> Result<ExecResult, SandboxLost> {
        self.send(&HostMessage::Exec {
            code: code.to_string(),
            limits: limits.clone(),
        })
        .await?;
        loop {
            let started = Instant::now();
            let line = match tokio::time::timeout(watchdog, self.lines.next_line()).await {
                Err(_) => {
                    let _ = self.child.kill().await;
                    return Err(SandboxLost(format!(
                        "The sandbox worker was stopped after {:.0}s without finishing.",
                        started.elapsed().as_secs_f64()
                    )));
                }
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
                } => (id, corpus.call(&function, &args, &kwargs).await),
                WorkerMessage::Os { id, op, path } => (id, corpus.os(&op, &path).await),
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
