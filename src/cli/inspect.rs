//! `groundwork inspect`: a saved session's model requests, as an overview, one request
//! in detail, or JSON.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, bail};

use super::args::{ExportArgs, InspectArgs};

/// `groundwork export`: the session as JSON (the file format pydantic-ai and haiku.rag
/// read) or Markdown, to standard output or a file; the session itself is only read.
pub(super) async fn export(
    ctx: &super::context::CmdContext,
    global: &super::args::GlobalArgs,
    a: ExportArgs,
) -> Result<ExitCode> {
    let session = crate::session::load_named(&a.session)?;
    let text = match a.format.as_str() {
        "md" => {
            // A web-app session is titled as the app titles it; a file by its name.
            let title = crate::session::app_store::title_of(&a.session).unwrap_or_else(|| {
                a.session
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "session".into())
            });
            let mut t =
                crate::host::transcript::Transcript::build(&session.messages, &session.state);
            quote_cited(
                ctx,
                global,
                &a.session,
                &session,
                &mut t,
                "their sources quote",
            )
            .await;
            crate::host::transcript::to_markdown_marked(
                &t,
                &title,
                &crate::session::marks::marks(&session.groundwork.extra),
                &crate::session::verdicts::verifications(&session.groundwork.extra),
            )
            .into_bytes()
        }
        _ => session.to_json()?,
    };
    match &a.out {
        Some(out) => {
            if out.exists() && crate::session::same_file(out, &a.session) {
                bail!(
                    "{} is the session itself: export to another file",
                    out.display()
                );
            }
            crate::session::write_atomic(out, &text)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", out.display()))?;
        }
        None => {
            let mut stdout = crate::errors::stdout();
            stdout.write_all(&text)?;
            stdout.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads the chunks `t`'s answers cite from the knowledge base the session's questions
/// ran against (or `--db`), as each question read it; without one, or for a chunk that is
/// not there, warns on stderr that `what` the context the model saw instead.
pub(super) async fn quote_cited(
    ctx: &super::context::CmdContext,
    global: &super::args::GlobalArgs,
    path: &std::path::Path,
    session: &crate::session::Session,
    t: &mut crate::host::transcript::Transcript,
    what: &str,
) {
    let recorded = crate::session::knowledge::latest(&session.groundwork.extra);
    if recorded.is_empty() && !ctx.db_named {
        return;
    }
    let opened = match ctx.reopening(global, path, &recorded) {
        Ok(ctx) => ctx.open_collections(None).await,
        Err(e) => Err(e),
    };
    match opened {
        Ok(opened) => {
            let stores: Vec<_> = opened
                .into_iter()
                .map(|(n, s)| (n, std::sync::Arc::new(s)))
                .collect();
            let unread =
                crate::host::explore::read_passages(t, &stores, &session.groundwork.extra).await;
            if unread > 0 {
                crate::errors::say!(
                    "warning: {unread} cited chunk(s) are not in the knowledge base; {what} the context the model saw"
                );
            }
        }
        Err(e) => crate::errors::say!("warning: {e:#}; {what} the context the model saw"),
    }
}

pub(super) fn inspect(a: InspectArgs) -> Result<ExitCode> {
    if crate::session::app_store::is_app_store(&a.session) {
        if a.request.is_some() {
            bail!(
                "{} is haiku.rag's web-app session store: name one of its sessions as {}#ID to see its requests",
                a.session.display(),
                a.session.display()
            );
        }
        return list_app_sessions(&a);
    }
    let session = crate::session::load_named(&a.session)?;
    let shown = show(&a, &session);
    // The process ends here: freeing a long session's every string and JSON value one by
    // one would cost more than reading it did.
    std::mem::forget(session);
    shown
}

/// The judge's requests of the session's claim checks (`groundwork verify`), numbered on
/// from `after` (the model's requests), with the question number, the claim's verdict and
/// sentence.
fn judge_requests(
    session: &crate::session::Session,
    after: usize,
) -> Vec<(crate::host::inspect::InspectedRequest, String)> {
    let questions = crate::host::transcript::question_starts(&session.messages);
    let mut out = Vec::new();
    for v in crate::session::verdicts::verifications(&session.groundwork.extra).values() {
        let number = questions
            .iter()
            .position(|&q| q as u64 == v.question)
            .map_or_else(|| "?".to_string(), |k| (k + 1).to_string());
        for k in 0..v.requests.len() {
            let Some(snapshot) = crate::host::verify::judge_snapshot(v, k) else {
                continue;
            };
            let claim = v.claims.iter().find(|c| c.request == Some(k));
            let line = format!(
                "judge {}, question {number}: {}",
                v.judge,
                claim.map_or_else(String::new, |c| format!(
                    "{} {} — {}",
                    c.verdict.glyph(),
                    c.verdict.label(),
                    c.sentence
                ))
            );
            let request = crate::host::inspect::InspectedRequest {
                number: after + out.len() + 1,
                recorded: true,
                snapshot,
            };
            out.push((request, line));
        }
    }
    out
}

fn show(a: &InspectArgs, session: &crate::session::Session) -> Result<ExitCode> {
    // Only what is shown is rebuilt: one request, or the overview's figures.
    let reqs = crate::host::inspect::SessionRequests::of(session);
    let judged = judge_requests(session, reqs.len());
    let selected: Vec<_> = match a.request {
        Some(n) if n > reqs.len() && n <= reqs.len() + judged.len() => {
            vec![judged[n - reqs.len() - 1].0.clone()]
        }
        Some(n) => {
            let Some(r) = reqs.get(n) else {
                bail!(
                    "{} has {} request(s); there is no request {n}",
                    a.session.display(),
                    reqs.len() + judged.len()
                );
            };
            vec![r]
        }
        None if a.json => {
            let mut all = reqs.all();
            all.extend(judged.iter().map(|(r, _)| r.clone()));
            all
        }
        None => Vec::new(),
    };
    let mut out = crate::errors::stdout();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &selected)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if session.groundwork.scripted_demo {
        writeln!(out, "(a scripted demonstration, not a model's work)")?;
    }
    match a.request {
        Some(_) => write!(
            out,
            "{}",
            crate::host::inspect::render_request(&selected[0], 120)
        )?,
        None => {
            writeln!(
                out,
                "{}: {} messages, {} request(s)",
                a.session.display(),
                session.messages.len(),
                reqs.len()
            )?;
            write!(
                out,
                "{}",
                crate::host::inspect::render_overview_rows(&reqs.overview())
            )?;
            if !judged.is_empty() {
                writeln!(
                    out,
                    "\n{} judge request(s) of claim checks (groundwork verify):",
                    judged.len()
                )?;
                for (r, line) in &judged {
                    writeln!(out, "  {:>4}  {line}", r.number)?;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `inspect STORE` of haiku.rag's web-app session store: its sessions, one a line (id,
/// title, when made and last changed, questions), and how to open one.
fn list_app_sessions(a: &InspectArgs) -> Result<ExitCode> {
    let sessions = crate::session::app_store::list(&a.session)?;
    let questions = |s: &crate::session::app_store::Listed| {
        s.prompts
            .iter()
            .filter(|p| !crate::host::transcript::is_redirect(p))
            .count()
    };
    let mut out = crate::errors::stdout();
    if a.json {
        let rows: Vec<serde_json::Value> = sessions
            .iter()
            .map(|s| {
                serde_json::json!({
                    "id": s.id,
                    "address": format!("{}#{}", a.session.display(), s.id),
                    "title": s.title,
                    "created_at": s.created_at,
                    "updated_at": s.updated_at,
                    "questions": questions(s),
                })
            })
            .collect();
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let clean = |s: &str| crate::terminal_text::strip_controls(s).into_owned();
    writeln!(
        out,
        "{}: haiku.rag's web-app session store, {} session(s)",
        a.session.display(),
        sessions.len()
    )?;
    for s in &sessions {
        let title = if s.title.trim().is_empty() {
            "(untitled)".to_string()
        } else {
            clean(&s.title)
        };
        writeln!(
            out,
            "  {}  {title} · {} question(s) · created {} · updated {}",
            clean(&s.id),
            questions(s),
            clean(&s.created_at),
            clean(&s.updated_at)
        )?;
    }
    if let Some(first) = sessions.first() {
        writeln!(
            out,
            "open one with: groundwork open '{}#{}'",
            a.session.display(),
            clean(&first.id)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
