//! `groundwork replay SESSION --question N --arm 'FLAGS'`: one question of a saved
//! session run again from the committed state it started from, with an arm's changes
//! (`ask`'s flags, parsed as `eval` parses an arm), and the two runs printed side by side
//! with a diff of what was sent. The session file is only read; `--save` writes the
//! replay to a new file beside it.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Result, anyhow};

use crate::engine::cancel::CancelToken;
use crate::host::replay;

use super::args::{GlobalArgs, ReplayArgs};
use super::context::CmdContext;
use super::eval::{arm_composer, parse_flags};

pub(super) async fn replay(
    ctx: &CmdContext,
    global: &GlobalArgs,
    a: ReplayArgs,
) -> Result<ExitCode> {
    let settings = parse_flags("replay", &a.arm).map_err(anyhow::Error::msg)?;
    let options = settings.options().map_err(|e| anyhow!("replay: {e}"))?;
    let session = crate::session::Session::load(&a.session)?;
    // Refused before any model is asked when the question cannot be replayed.
    let prepared = replay::prepare(&session, a.question)
        .map_err(|e| anyhow!("{}: {e}", a.session.display()))?;
    let store = Arc::new(ctx.open_store().await?);
    let (composer, _) = arm_composer(ctx, global, "replay", &settings, &store).await?;
    let agent = composer.agent(&options)?;
    let cancel = CancelToken::new();
    let on_ctrl_c = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                cancel.cancel();
            }
        })
    };
    let outcome = prepared.start(agent, None, None, cancel).outcome().await;
    on_ctrl_c.abort();
    let replayed = prepared.finish(outcome, &a.arm)?;
    let saved = match &a.save {
        None => None,
        Some(p) => {
            let path = if p.is_empty() {
                replay::beside_path(&a.session, a.question, &a.arm)
            } else {
                std::path::PathBuf::from(p)
            };
            replay::save_beside(&replayed.session, &path)?;
            Some(path)
        }
    };
    let mut out = std::io::stdout().lock();
    if a.json {
        let mut v = serde_json::to_value(&replayed.comparison)?;
        v["saved"] = saved
            .as_ref()
            .map_or(serde_json::Value::Null, |p| p.display().to_string().into());
        serde_json::to_writer_pretty(&mut out, &v)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", replay::render(&replayed.comparison))?;
    }
    match saved {
        Some(p) => eprintln!("replay saved to {}", p.display()),
        None => eprintln!("the replay was not saved (--save writes it beside the session)"),
    }
    Ok(ExitCode::SUCCESS)
}
