//! `groundwork ask`: one question through the host's [`crate::host::resume::Opened`],
//! printed as text (the answer and its sources) or as JSON; the session is saved after a
//! successful run.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::capabilities::state::Citation;
use crate::host::compose::Composer;
use crate::host::transcript::Evidence;
use crate::paths;

use super::args::{AskArgs, GlobalArgs};
use super::context::{CmdContext, choose_model};

/// The model over every open database (one store, or the named collections), and what
/// the session records of them.
async fn composer(
    ctx: &CmdContext,
    model: std::sync::Arc<dyn crate::engine::chat::ChatModel>,
    app: crate::config::AppConfig,
) -> Result<(Composer, Vec<crate::session::knowledge::KnowledgeBase>)> {
    let opened = ctx.open_collections(None).await?;
    let kbs = super::context::knowledge_bases_of(&opened).await;
    Ok((super::context::composer_over(Some(model), opened, app), kbs))
}

pub(super) async fn ask(ctx: &CmdContext, global: &GlobalArgs, a: AskArgs) -> Result<ExitCode> {
    if a.question.trim().is_empty() {
        bail!(crate::host::ask::AskError::EmptyQuestion);
    }
    let settings = a.flags.settings();
    let options = settings.options().map_err(|e| anyhow::anyhow!(e))?;
    let model_config = match choose_model(ctx).await? {
        crate::engine::discover::ModelChoice::None(hint) => bail!("{hint}"),
        crate::engine::discover::ModelChoice::Discovered(c, found) => {
            crate::errors::say!(
                "using {} at {} (found {})",
                c.model,
                c.base_url,
                found.server
            );
            c
        }
        crate::engine::discover::ModelChoice::Configured(c) => c,
    };
    let model_name = model_config.model.clone();
    let path = match &global.session {
        Some(p) => p.clone(),
        None => crate::session::new_session_path(&paths::data_dir(&ctx.env).join("sessions")),
    };
    // One writer from loading to committing: a second `ask` on this session is refused.
    // A long session is read on another thread while the knowledge base is opened and
    // the agent built, through its resume row when it has one for this composition
    // (`--json` prints every request whole, so it reads the session whole).
    let owned = if a.json {
        None
    } else {
        crate::host::compose::compacted_tools(&options)
    };
    let opening = {
        let (model_name, owned) = (model_name.clone(), owned.clone());
        tokio::task::spawn_blocking(move || {
            crate::host::resume::open_for_question(path, &model_name, owned.as_deref())
        })
    };
    let model: std::sync::Arc<dyn crate::engine::chat::ChatModel> =
        std::sync::Arc::new(crate::model::OpenAiModel::new(model_config)?);
    let app = settings.apply(ctx.config.app.clone());
    let counter =
        crate::host::compose::token_counter(&model_name, ctx.config.model.tokenizer.as_ref())?;
    let (composer, knowledge_bases) = composer(ctx, model, app).await?;
    let stores = composer.stores();
    let agent = composer.with_counter(Some(counter)).agent(&options)?;
    crate::timing::mark("ask: agent built");
    let opened = opening
        .await
        .map_err(|e| anyhow::anyhow!("reading the session stopped: {e}"))??;
    let mut held = opened.for_agent(&agent, &model_name)?;
    crate::timing::mark("ask: session opened");
    let cancel = crate::engine::cancel::CancelToken::new();
    // On a terminal the answer streams as it comes (pipes and --json get it whole).
    let (events, printer) = if super::live::streams(a.json) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (Some(tx), Some(tokio::spawn(super::live::print(rx))))
    } else {
        (None, None)
    };
    // The answer is printed whatever the save does, and a failed save is reported after
    // it: a full disk or a read-only folder must not cost the user the answer. Never over
    // another writer's work: then the answer is kept beside.
    let asked = held.ask(&agent, &a.question, events, cancel).await;
    // The run is over (its events sender dropped): the printer has shown everything.
    let shown = match printer {
        Some(p) => Some(p.await?),
        None => None,
    };
    let outcome = asked?;
    if let Some(q) = outcome.question {
        held.record_knowledge_bases(&knowledge_bases, q);
    }
    crate::timing::mark("ask: answered and committed");
    let saved = held.save(&agent, owned.as_deref());
    crate::timing::mark("ask: saved");
    let path = saved
        .as_ref()
        .map_or_else(|_| held.path().to_path_buf(), |s| s.path.clone());
    // As `search` says it: the question went on without what failed.
    for w in &outcome.warnings {
        crate::errors::say!("{w}");
    }
    // Each source named and located as every face names it: by the cited chunk's own
    // pages and section, read from the knowledge base (the citation's span the context
    // the model saw), else the citation's.
    let mut references = Vec::new();
    if !a.json {
        for c in &outcome.citations {
            let Ok(c) = serde_json::from_value::<Citation>(c.clone()) else {
                references.push(String::new());
                continue;
            };
            let e = Evidence::cited("", &c);
            let passage =
                crate::host::explore::find_passage(&stores, e.collection.as_deref(), &e.chunk_id)
                    .await
                    .ok();
            references.push(match passage {
                Some(p) => e.reference(&p.pages, &p.headings),
                None => e.reference(&e.pages, &e.headings),
            });
        }
    }
    let mut out = crate::errors::stdout();
    let to_terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let clean = |s: &str| -> String {
        if to_terminal {
            crate::terminal_text::strip_controls(s).into_owned()
        } else {
            s.to_string()
        }
    };
    // Printed in one piece: a reader that closed the pipe (`| head`) does not keep the
    // session from being closed or a failed save from being reported.
    let printed = (|| -> Result<()> {
        if a.json {
            let mut v = serde_json::to_value(&outcome)?;
            if let serde_json::Value::Object(m) = &mut v {
                m.insert(
                    "session".into(),
                    serde_json::Value::String(path.display().to_string()),
                );
            }
            serde_json::to_writer_pretty(&mut out, &v)?;
            writeln!(out)?;
        } else {
            match &shown {
                // Streamed already: only the end of its line.
                Some(s) if s.last_text.trim() == outcome.answer.trim() => {
                    if !s.at_line_start {
                        writeln!(out)?;
                    }
                }
                Some(s) => {
                    if !s.at_line_start {
                        writeln!(out)?;
                    }
                    writeln!(out, "{}", clean(&outcome.answer))?;
                }
                None => writeln!(out, "{}", clean(&outcome.answer))?,
            }
            if outcome.redirected {
                crate::errors::say!("{}", crate::host::transcript::REDIRECT_NOTE);
                if let Some(caught) = &outcome.caught {
                    crate::errors::say!("the caught answer: {}", clean(&one_line(caught)));
                }
            }
            if !outcome.citations.is_empty() {
                writeln!(out)?;
                writeln!(out, "Sources:")?;
                let indexes: Vec<i64> = outcome
                    .citations
                    .iter()
                    .map(|c| c["index"].as_i64().unwrap_or(0))
                    .collect();
                let numbers = crate::host::transcript::source_numbers(&outcome.answer, &indexes);
                for (reference, number) in references.iter().zip(numbers) {
                    writeln!(out, "  [{number}] {}", clean(reference))?;
                }
            }
            let cut = outcome
                .cut_off_note
                .as_ref()
                .map(|n| format!("; the answer was {n}"))
                .unwrap_or_default();
            if let Some(note) = held.continued_note()
                && saved.is_ok()
            {
                crate::errors::say!("{note}");
            }
            if matches!(&saved, Ok(s) if s.note.is_none()) {
                crate::errors::say!(
                    "({}{cut}; session saved to {})",
                    outcome.status,
                    path.display()
                );
            }
        }
        out.flush()?;
        Ok(())
    })();
    drop(out);
    held.close_for_exit();
    match saved {
        Err(e) => {
            crate::errors::say!(
                "error: the answer above was not saved: the session could not be written to {}: {}",
                path.display(),
                crate::errors::render(&e)
            );
            Ok(ExitCode::FAILURE)
        }
        Ok(crate::session::Saved {
            note: Some(note), ..
        }) => bail!("{note}"),
        Ok(_) => printed.map(|()| ExitCode::SUCCESS),
    }
}

/// `text` on one line, cut at 200 characters.
fn one_line(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match joined.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &joined[..at]),
        None => joined,
    }
}
