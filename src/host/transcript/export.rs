//! The conversation as an export: Markdown for reading, JSON with the raw session.

use serde_json::{Map, Value};

use crate::engine::messages::ModelMessage;

use super::{CitationView, StepStatus, Transcript, Turn};

/// The conversation as Markdown: questions, answers, tool calls and sources.
pub fn to_markdown(t: &Transcript, title: &str) -> String {
    to_markdown_marked(t, title, &Default::default(), &Default::default())
}

/// [`to_markdown`] with a reviewer's marks on the answers and the checks of their claims
/// (both by question), each under its answer's citation status.
pub fn to_markdown_marked(
    t: &Transcript,
    title: &str,
    marks: &std::collections::BTreeMap<u64, crate::session::marks::AnswerMark>,
    checks: &std::collections::BTreeMap<u64, crate::session::verdicts::Verification>,
) -> String {
    let mut out = format!("# {title}\n\n");
    for (turn, row) in t.turns.iter().zip(&t.ledger) {
        out.push_str(&format!("## Question\n\n{}\n\n", turn.prompt.trim()));
        if !turn.steps.is_empty() {
            out.push_str("**Tool calls**\n\n");
            for s in &turn.steps {
                let mark = match s.status {
                    StepStatus::Ok => "✓",
                    StepStatus::Failed => "✗",
                    StepStatus::Running => "…",
                };
                out.push_str(&format!("- {mark} `{}` {}\n", s.name, s.summary));
            }
            out.push('\n');
        }
        if let Some(caught) = &turn.caught {
            out.push_str("## First answer, caught by the citation policy\n\n");
            for line in caught.trim().lines() {
                out.push_str(&format!("> ~~{line}~~\n").replace("~~~~", ""));
            }
            out.push_str(&format!("\n*{}.*\n\n", upper_first(super::REDIRECT_NOTE)));
        }
        out.push_str(&format!("## Answer\n\n{}\n\n", turn.answer.trim()));
        if let Some(note) = &turn.cut_off_note {
            out.push_str(&format!("*The answer was {note}.*\n\n"));
        }
        out.push_str(&format!(
            "*Citation status: {}{}{}*\n\n",
            row.status.as_str(),
            if row.redirected { ", redirected" } else { "" },
            if row.violation {
                ", violation recorded"
            } else {
                ""
            }
        ));
        if let Some(m) = marks.get(&turn.question) {
            out.push_str(&format!(
                "*Review: marked {}{}*\n\n",
                m.mark,
                m.note
                    .as_deref()
                    .map(|n| format!(" — {n}"))
                    .unwrap_or_default()
            ));
        }
        if let Some(v) = checks.get(&turn.question) {
            out.push_str(&format!(
                "*Claims checked (judge {}): {}*\n\n",
                v.judge,
                v.counts().summary()
            ));
            for c in &v.claims {
                out.push_str(&format!(
                    "- {} {}: {} — {}\n",
                    c.verdict.glyph(),
                    c.verdict.label(),
                    c.sentence,
                    c.reason
                ));
            }
            out.push('\n');
        }
        if let Some(code) = &turn.program {
            out.push_str(&format!(
                "**Program**\n\n```python\n{}\n```\n\n",
                code.trim_end()
            ));
        }
        if !turn.citations.is_empty() {
            out.push_str(&format!("**Sources ({})**\n\n", turn.citations.len()));
            for c in &turn.citations {
                let session = if c.number == c.index {
                    String::new()
                } else {
                    format!(" (source #{} of the session)", c.index)
                };
                out.push_str(&format!(
                    "- {} `{}`{session}\n",
                    c.title(),
                    c.evidence.chunk_id
                ));
                match &c.passage {
                    // The cited chunk itself, whole, with a page-precise reference.
                    Some(p) => {
                        out.push_str(&format!("  {}\n", c.reference()));
                        if p.as_cited {
                            out.push_str(
                                "  *source changed since cited: not in the knowledge base now; quoted as the question read it*\n",
                            );
                        }
                        for line in p.text.lines().filter(|l| !l.trim().is_empty()) {
                            out.push_str(&format!("  > {line}\n"));
                        }
                    }
                    None => {
                        if !c.evidence.headings.is_empty() {
                            out.push_str(&format!(
                                "  Section: {}\n",
                                c.evidence.headings.join(" > ")
                            ));
                        }
                        out.push_str(
                            "  (the cited chunk was not read; the context the model saw:)\n",
                        );
                        let excerpt: String = c.content.chars().take(500).collect();
                        for line in excerpt.lines() {
                            out.push_str(&format!("  > {line}\n"));
                        }
                    }
                }
            }
            out.push('\n');
        }
    }
    out
}

/// A source for the clipboard: the cited passage (the context the model saw when the
/// chunk itself was not read) and the reference a reader can follow, with the chunk id.
pub fn clip_source(c: &CitationView) -> String {
    let (text, reference) = match &c.passage {
        Some(p) => (p.text.trim(), c.reference()),
        None => (c.content.trim(), c.title()),
    };
    format!("{text}\n\n— {reference} (chunk {})\n", c.evidence.chunk_id)
}

/// An answer for the clipboard: its text, then its sources numbered as its markers are,
/// each with its reference and chunk id.
pub fn clip_answer(turn: &Turn) -> String {
    let mut out = format!("{}\n", turn.answer.trim());
    if !turn.citations.is_empty() {
        out.push_str("\nSources:\n");
        for c in &turn.citations {
            let reference = match &c.passage {
                Some(_) => format!("[{}] {}", c.number, c.reference()),
                None => c.title(),
            };
            out.push_str(&format!("{reference} (chunk {})\n", c.evidence.chunk_id));
        }
    }
    out
}

/// `text` with its first letter in upper case.
fn upper_first(text: &str) -> String {
    let mut c = text.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// The JSON export: the transcript plus the session's raw messages and state.
pub fn to_json(t: &Transcript, messages: &[ModelMessage], state: &Map<String, Value>) -> Value {
    serde_json::json!({
        "turns": t.turns,
        "ledger": t.ledger,
        "messages": messages,
        "state": state,
    })
}
