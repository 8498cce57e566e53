//! The command line, the face of `groundwork [--db PATH] <command>`: [`args`] parses,
//! [`run`] dispatches to one file per command (or family of commands), [`context`] holds
//! what they share, [`logging`] starts the log. Questions are composed and committed by
//! the host (`crate::host`), not here.

pub mod args;
mod ask;
pub mod collections;
pub mod context;
mod db;
mod eval;
mod ingest;
mod inspect;
pub mod logging;
mod replay;
mod workbench;

use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::paths::Env;

pub use args::{
    ArmFlags, AskArgs, AskFlags, Cli, Command, DeleteArgs, EvalArgs, GlobalArgs, InfoArgs,
    IngestArgs, InspectArgs, ListArgs, OpenArgs, ReplayArgs, SearchArgs, WorkbenchArgs,
};
pub use context::{CmdContext, choose_model, prepare_embedder};
pub use ingest::ensure_demo_db;
pub use logging::init_logging;
pub use replay::workbench_changes;

/// Runs the parsed command line; the exit code says how it went.
pub async fn run(cli: Cli, env: Env) -> Result<ExitCode> {
    let cli = merge_workbench_flags(cli)?;
    let ctx = CmdContext::new(&cli.global, env)?;
    match cli.command {
        None => {
            let open = OpenArgs {
                session: String::new(),
                capabilities: cli.workbench.capabilities.clone(),
                eager: cli.workbench.eager,
            };
            workbench::workbench(&ctx, &cli.global, Some(open)).await
        }
        Some(Command::Open(a)) => workbench::workbench(&ctx, &cli.global, Some(a)).await,
        Some(Command::Ingest(a)) => ingest::ingest(&ctx, a).await,
        Some(Command::Search(a)) => db::search(&ctx, a).await,
        Some(Command::Info(a)) => db::info(&ctx, a).await,
        Some(Command::Delete(a)) => db::delete(&ctx, a).await,
        Some(Command::List(a)) => db::list(&ctx, a).await,
        Some(Command::Inspect(a)) => inspect::inspect(a),
        Some(Command::Ask(a)) => ask::ask(&ctx, &cli.global, a).await,
        Some(Command::Eval(a)) => eval::eval(&ctx, &cli.global, a).await,
        Some(Command::Replay(a)) => replay::replay(&ctx, &cli.global, a).await,
    }
}

/// `--capability` and `--eager` given before the command (`groundwork --capability
/// analysis ask Q`) apply to `ask` and `open` as if given after it; any other command
/// refuses them instead of ignoring them.
pub fn merge_workbench_flags(mut cli: Cli) -> Result<Cli> {
    let before = std::mem::take(&mut cli.workbench);
    if before.capabilities.is_empty() && !before.eager {
        return Ok(cli);
    }
    match &mut cli.command {
        None => cli.workbench = before,
        Some(Command::Ask(a)) => {
            a.flags.capabilities.extend(before.capabilities);
            a.flags.eager |= before.eager;
        }
        Some(Command::Open(a)) => {
            a.capabilities.extend(before.capabilities);
            a.eager |= before.eager;
        }
        Some(other) => bail!(
            "--capability and --eager apply to the workbench, `open` and `ask`, not to `{}`",
            command_name(other)
        ),
    }
    Ok(cli)
}

fn command_name(c: &Command) -> &'static str {
    match c {
        Command::Ingest(_) => "ingest",
        Command::Search(_) => "search",
        Command::Info(_) => "info",
        Command::Delete(_) => "delete",
        Command::List(_) => "list",
        Command::Inspect(_) => "inspect",
        Command::Ask(_) => "ask",
        Command::Eval(_) => "eval",
        Command::Replay(_) => "replay",
        Command::Open(_) => "open",
    }
}

/// Cancels `cancel` on Ctrl-C (a headless run ends cleanly, the question in flight not
/// recorded); abort the task when the run is over.
fn cancel_on_ctrl_c(cancel: &crate::engine::cancel::CancelToken) -> tokio::task::JoinHandle<()> {
    let cancel = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    })
}
