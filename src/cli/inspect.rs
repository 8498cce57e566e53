//! `groundwork inspect`: a saved session's model requests, as an overview, one request
//! in detail, or JSON.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, bail};

use super::args::InspectArgs;

pub(super) fn inspect(a: InspectArgs) -> Result<ExitCode> {
    let session = crate::session::Session::load(&a.session)?;
    let shown = show(&a, &session);
    // The process ends here: freeing a long session's every string and JSON value one by
    // one would cost more than reading it did.
    std::mem::forget(session);
    shown
}

fn show(a: &InspectArgs, session: &crate::session::Session) -> Result<ExitCode> {
    // Only what is shown is rebuilt: one request, or the overview's figures.
    let reqs = crate::host::inspect::SessionRequests::of(session);
    let selected: Vec<_> = match a.request {
        Some(n) => {
            let Some(r) = reqs.get(n) else {
                bail!(
                    "{} has {} request(s); there is no request {n}",
                    a.session.display(),
                    reqs.len()
                );
            };
            vec![r]
        }
        None if a.json => reqs.all(),
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
        }
    }
    Ok(ExitCode::SUCCESS)
}
