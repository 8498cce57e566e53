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
mod live;
pub mod logging;
mod replay;
mod verify;
mod workbench;

use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::paths::Env;

pub use args::{
    ArmFlags, AskArgs, AskFlags, Cli, Command, DeleteArgs, EvalArgs, ExportArgs, GlobalArgs,
    InfoArgs, IngestArgs, InspectArgs, ListArgs, OpenArgs, ReplayArgs, SearchArgs, WorkbenchArgs,
};
pub use context::{CmdContext, choose_model, prepare_embedder};
pub use ingest::ensure_demo_db;
pub use logging::init_logging;
pub use replay::workbench_changes;

/// Runs the parsed command line; the exit code says how it went.
/// What a command line clap refused prints: help and version as clap prints them, and any
/// other error in one line, its tips folded in and the command's `--help` named
/// (`error: invalid value '-1' for '--question <N>': questions are numbered from 1 (see
/// 'groundwork replay --help')`). Exit status 2, as clap's own.
pub fn usage_error(e: clap::Error) -> ExitCode {
    use clap::CommandFactory;
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
    }
    let cli = Cli::command();
    let sub = std::env::args().skip(1).find(|a| {
        cli.get_subcommands()
            .any(|c| c.get_name() == a || c.get_all_aliases().any(|x| x == a))
    });
    let command = match sub {
        Some(sub) => format!("groundwork {sub}"),
        None => "groundwork".to_string(),
    };
    crate::errors::say!(
        "{}",
        one_line_usage_error(&e.render().to_string(), &command)
    );
    ExitCode::from(2)
}

/// clap's rendered error (a first line, tips, a usage block, a pointer to `--help`) in one
/// line that names `command`'s help.
fn one_line_usage_error(rendered: &str, command: &str) -> String {
    let mut lines = rendered.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("error: invalid command line");
    let mut notes: Vec<String> = lines
        .filter_map(|l| l.strip_prefix("tip:"))
        .map(|tip| tip.trim().to_string())
        .collect();
    notes.push(format!("see '{command} --help'"));
    let first = if first.starts_with("error:") {
        first.to_string()
    } else {
        format!("error: {first}")
    };
    format!("{first} ({})", notes.join("; "))
}

pub async fn run(cli: Cli, env: Env) -> Result<ExitCode> {
    let cli = merge_workbench_flags(cli)?;
    // `eval` and `replay` take Ctrl-C as "stop and report"; for every other command it
    // ends the process like SIGTERM, leaving nothing behind.
    crate::exit::install(!matches!(
        cli.command,
        Some(Command::Eval(_) | Command::Replay(_))
    ));
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
        Some(Command::Export(a)) => inspect::export(&ctx, &cli.global, a).await,
        Some(Command::Ask(a)) => ask::ask(&ctx, &cli.global, a).await,
        Some(Command::Eval(a)) => eval::eval(&ctx, &cli.global, a).await,
        Some(Command::Replay(a)) => replay::replay(&ctx, &cli.global, a).await,
        Some(Command::Tag(cmd)) => db::tag(&ctx, cmd).await,
        Some(Command::Verify(a)) => verify::verify(&ctx, &cli.global, a).await,
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
        Command::Export(_) => "export",
        Command::Ask(_) => "ask",
        Command::Eval(_) => "eval",
        Command::Replay(_) => "replay",
        Command::Open(_) => "open",
        Command::Tag(_) => "tag",
        Command::Verify(_) => "verify",
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

#[cfg(test)]
mod usage_tests {
    use super::one_line_usage_error;

    #[test]
    fn a_clap_error_is_one_line_with_its_tip_and_the_commands_help() {
        let rendered = "error: unexpected argument '--frob' found\n\n  tip: a similar argument \
                        exists: '--from'\n\nUsage: groundwork replay [OPTIONS] --question <N> \
                        <SESSION>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line_usage_error(rendered, "groundwork replay"),
            "error: unexpected argument '--frob' found (a similar argument exists: '--from'; \
             see 'groundwork replay --help')"
        );
        assert_eq!(
            one_line_usage_error("error: bad\n", "groundwork"),
            "error: bad (see 'groundwork --help')"
        );
    }
}
