//! `groundwork verify SESSION [--question N]`: each sentence of an answer that carries a
//! citation marker is checked by a judge model against the passages it cites
//! ([`crate::host::verify`]); the verdicts are saved with the session, question by
//! question, and printed.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use super::args::{GlobalArgs, VerifyArgs};
use super::context::CmdContext;
use crate::host::conversation::Conversation;
use crate::host::transcript::Transcript;
use crate::session::verdicts::Verification;

pub(super) async fn verify(
    ctx: &CmdContext,
    global: &GlobalArgs,
    a: VerifyArgs,
) -> Result<ExitCode> {
    if !a.session.exists() {
        bail!("{}: no such session", a.session.display());
    }
    let mut conversation = Conversation::open_locked(a.session.clone(), "")
        .with_context(|| format!("cannot open {}", a.session.display()))?;
    if let Some(note) = conversation.continued_note() {
        crate::errors::say!("{note}");
    }
    let session = conversation.snapshot();
    let all = Transcript::build(&session.messages, &session.state);
    if all.turns.is_empty() {
        bail!("{} has no questions to check", a.session.display());
    }
    let chosen: Vec<usize> = match a.question {
        Some(n) if n == 0 || n > all.turns.len() => bail!(
            "{} has {} question(s); there is no question {n}",
            a.session.display(),
            all.turns.len()
        ),
        Some(n) => vec![n - 1],
        None => (0..all.turns.len()).collect(),
    };
    let mut t = Transcript {
        turns: chosen.iter().map(|&i| all.turns[i].clone()).collect(),
        ledger: Vec::new(),
    };
    super::inspect::quote_cited(ctx, global, &a.session, &session, &mut t, "the judge reads").await;
    let config = ctx.config.judge.endpoint(
        &ctx.config.model,
        a.judge_url.as_deref(),
        a.judge_model.as_deref(),
        session.groundwork.model.as_deref(),
    )?;
    let judge = crate::model::OpenAiModel::new(config)?;
    let cancel = crate::engine::cancel::CancelToken::new();
    let mut out = crate::errors::stdout();
    let mut checked = Vec::new();
    for (turn, &i) in t.turns.iter().zip(&chosen) {
        let n = i + 1;
        if crate::host::verify::claims(turn).is_empty() {
            if !a.json {
                writeln!(
                    out,
                    "question {n}: no sentence of the answer carries a citation marker; nothing to check"
                )?;
            }
            continue;
        }
        let progress = |k: usize, of: usize| {
            crate::errors::say!("question {n}: checking claim {k} of {of}…");
        };
        let v = crate::host::verify::check_turn(&judge, turn, &cancel, &progress)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "question {n}: the judge failed: {e}; nothing was stored for this question{}",
                    if checked.is_empty() {
                        String::new()
                    } else {
                        "; the checks before it are saved".into()
                    }
                )
            })?;
        conversation.set_verification(&v);
        conversation.save()?;
        if !a.json {
            print_check(&mut out, n, &turn.prompt, &v)?;
        }
        checked.push(v);
    }
    if a.json {
        serde_json::to_writer_pretty(&mut out, &checked)?;
        writeln!(out)?;
    }
    out.flush()?;
    conversation.close_for_exit();
    Ok(ExitCode::SUCCESS)
}

/// One question's verdicts: a line per claim (verdict, sentence) with the judge's reason
/// under it, then the counts. What a model wrote reaches the terminal without its control
/// characters.
fn print_check(out: &mut impl Write, n: usize, prompt: &str, v: &Verification) -> Result<()> {
    use crate::terminal_text::strip_controls as clean;
    let mut prompt: String = clean(prompt)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if prompt.chars().count() > 100 {
        prompt = prompt.chars().take(99).chain(['…']).collect();
    }
    writeln!(out, "question {n}: {prompt}")?;
    for c in &v.claims {
        writeln!(
            out,
            "  {} {:<16} {}",
            c.verdict.glyph(),
            c.verdict.label(),
            clean(&c.sentence)
        )?;
        writeln!(out, "    {}", clean(&c.reason))?;
    }
    if !v.from_context.is_empty() {
        writeln!(
            out,
            "  ({} cited chunk(s) not in the knowledge base: the judge read the context the model saw)",
            v.from_context.len()
        )?;
    }
    writeln!(out, "  {} (judge {})", v.counts().summary(), v.judge)?;
    Ok(())
}
