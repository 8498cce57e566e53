//! Logging: `tracing` into a file under the data folder, through the redacting writer,
//! never to the terminal.

use crate::paths::{self, Env};

/// Logs go to `<data dir>/logs/groundwork.log`, never to the terminal (a TUI owns it).
pub fn init_logging(env: &Env) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    let dir = paths::data_dir(env).join("logs");
    std::fs::create_dir_all(&dir).ok()?;
    let appender = tracing_appender::rolling::never(&dir, "groundwork.log");
    let (writer, guard) = tracing_appender::non_blocking(crate::errors::RedactingWriter(appender));
    let filter = tracing_subscriber::EnvFilter::try_from_env("GROUNDWORK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,lance=warn,lancedb=warn"));
    tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init()
        .ok()?;
    Some(guard)
}
