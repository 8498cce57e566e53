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
use super::eval::{arm_composer, arm_model, parse_flags};

pub(super) async fn replay(
    ctx: &CmdContext,
    global: &GlobalArgs,
    a: ReplayArgs,
) -> Result<ExitCode> {
    let settings = parse_flags("replay", &a.arm).map_err(anyhow::Error::msg)?;
    let options = settings.options().map_err(|e| anyhow!("replay: {e}"))?;
    let session = crate::session::load_named(&a.session)?;
    // Refused before any model is asked when the question cannot be replayed.
    let prepared = replay::prepare(&session, a.question)
        .map_err(|e| anyhow!("{}: {e}", a.session.display()))?;
    // The knowledge base that question ran against, unless --db says otherwise; by
    // default as that question read it (the versions of its tables the session recorded).
    let recorded = crate::host::transcript::question_starts(&session.messages)
        .get(a.question.saturating_sub(1))
        .map(|&q| crate::session::knowledge::for_question(&session.groundwork.extra, q as u64))
        .unwrap_or_default();
    let ctx = &ctx.reopening(global, &a.session, &recorded)?;
    let store = Arc::new(ctx.open_store().await?);
    let (mut composer, _) = arm_composer(ctx, global, "replay", &settings, &store).await?;
    let knowledge_base = match (&ctx.at, a.kb.as_str()) {
        (Some(at), _) => format!("as it was at '{at}' (--at)"),
        (None, "now") => "as it is now (--kb now)".to_string(),
        (None, _) => replay::pin_to_question(&mut composer, &session, a.question)
            .await
            .map_err(|e| anyhow!("{e}; --kb now replays over the knowledge base as it is now"))?,
    };
    let agent = composer.agent(&options)?;
    let cancel = CancelToken::new();
    let on_ctrl_c = super::cancel_on_ctrl_c(&cancel);
    let outcome = prepared.start(agent, None, None, cancel).outcome().await;
    on_ctrl_c.abort();
    let mut replayed = prepared.finish(outcome, &a.arm)?;
    replayed.comparison.knowledge_base = Some(knowledge_base);
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
    let mut out = crate::errors::stdout();
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
        Some(p) => crate::errors::say!("replay saved to {}", p.display()),
        None => {
            crate::errors::say!("the replay was not saved (--save writes it beside the session)")
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How the workbench reads a replay's changes: `ask`'s flags over the workbench's own
/// composition (its model, databases and configuration), with another model built as
/// every command builds one when the flags name a model, an endpoint, a timeout or a
/// token limit (`base`: the command line's model flags).
pub fn workbench_changes(
    env: crate::paths::Env,
    base: crate::config::ModelOverrides,
) -> crate::tui::ReplayChanges {
    Arc::new(
        move |flags: String, mut composer: crate::host::compose::Composer| {
            let (env, base) = (env.clone(), base.clone());
            Box::pin(async move {
                let settings = parse_flags("replay", &flags)?;
                let options = settings.options().map_err(|e| format!("replay: {e}"))?;
                composer.config = settings.apply(composer.config);
                let other_model = settings.model.is_some()
                    || settings.model_url.is_some()
                    || settings.timeout.is_some()
                    || settings.max_tokens.is_some();
                if other_model {
                    let (model, name, config) = arm_model(&env, &base, "replay", &settings)
                        .await
                        .map_err(|e| crate::errors::render(&e))?;
                    composer.model = Some(model);
                    composer.counter = Some(
                        crate::host::compose::token_counter(&name, config.model.tokenizer.as_ref())
                            .map_err(|e| e.0)?,
                    );
                }
                Ok((composer, options))
            })
        },
    )
}
