//! The explorer's text: a document's details, a chunk's every field (haiku.rag's
//! inspector's fields plus where the session retrieved and cited it), a search row and
//! the agent context, as styled lines.

use ratatui::text::{Line, Span};

use crate::engine::chat::IMAGE_TOKEN_ESTIMATE;
use crate::host::explore::{AgentContext, ChunkUse, DocumentDetail, chunk_uses};
use crate::store::SearchResult;
use crate::tui::app::App;
use crate::tui::theme::Theme;
use crate::tui::wrap::truncate;

/// Chunk metadata keys every chunk has (the others are shown as extra metadata).
const STANDARD_KEYS: [&str; 4] = ["doc_item_refs", "headings", "labels", "page_numbers"];

/// DocItem refs shown before `... (+N more)`.
const REFS_SHOWN: usize = 5;

fn field(t: &Theme, name: &str, value: String) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("{name}: "), t.key),
        Span::styled(value, t.text),
    ])
}

fn json_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Pages as `1, 2, 3` (none: `-`).
pub fn pages(p: &[i64]) -> String {
    if p.is_empty() {
        return "-".into();
    }
    p.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

/// The first line of `text`, without surrounding blanks.
pub fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

/// A chunks-list row: `[order] first line`.
pub fn chunk_row(c: &SearchResult) -> String {
    format!("[{}] {}", c.order, first_line(&c.content))
}

/// A search-result row: `[score] (p.pages) first 60 chars of the first line`.
pub fn result_row(r: &SearchResult) -> String {
    let p: Vec<String> = r.page_numbers.iter().take(3).map(i64::to_string).collect();
    let pages = if p.is_empty() {
        String::new()
    } else {
        format!("(p.{}) ", p.join(","))
    };
    format!(
        "[{:.2}] {} {pages}· {}",
        r.score,
        truncate(&short_label(&r.source_label()), 28),
        truncate(first_line(&r.content), 60)
    )
}

/// A document label short enough for a result row: a URI's last path segment (the file
/// name), a title as it is.
fn short_label(label: &str) -> String {
    if label.contains("://") {
        let path = label.trim_end_matches('/');
        path.rsplit('/').next().unwrap_or(path).to_string()
    } else {
        label.to_string()
    }
}

/// The selected document's details.
pub fn document_lines(t: &Theme, d: &DocumentDetail) -> Vec<Line<'static>> {
    let m = &d.meta;
    let mut out = vec![
        Line::styled(
            m.title
                .clone()
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| "(untitled)".into()),
            t.title,
        ),
        field(t, "ID", m.id.clone()),
        field(t, "URI", m.uri.clone().unwrap_or_else(|| "-".into())),
    ];
    for (k, v) in &m.metadata {
        out.push(field(t, k, json_value(v)));
    }
    out.push(field(t, "Created", m.created_at.clone()));
    out.push(field(t, "Updated", m.updated_at.clone()));
    out.push(field(
        t,
        "Pages",
        if d.pages.is_empty() {
            "-".into()
        } else {
            format!("{} ({})", d.pages.len(), pages(&d.pages))
        },
    ));
    out.push(field(t, "Chunks", d.chunks.len().to_string()));
    out.push(field(t, "Pictures", d.pictures.to_string()));
    out
}

/// `In this session: cited in Q1 · retrieved in Q2, Q3` (or `never retrieved`).
fn uses_line(t: &Theme, uses: &[ChunkUse]) -> Line<'static> {
    let list = |cited: bool| -> Vec<String> {
        uses.iter()
            .filter(|u| u.cited == cited)
            .map(|u| format!("Q{}", u.question))
            .collect()
    };
    let (cited, retrieved) = (list(true), list(false));
    let mut spans = vec![Span::styled("In this session: ", t.key)];
    if uses.is_empty() {
        spans.push(Span::styled("never retrieved", t.dim));
    }
    if !cited.is_empty() {
        spans.push(Span::styled(
            format!("cited in {}", cited.join(", ")),
            t.grounded,
        ));
    }
    if !retrieved.is_empty() {
        if !cited.is_empty() {
            spans.push(Span::styled(" · ", t.dim));
        }
        spans.push(Span::styled(
            format!("retrieved, not cited, in {}", retrieved.join(", ")),
            t.text,
        ));
    }
    Line::from(spans)
}

/// The questions themselves (the full chunk view lists them under the fields).
fn use_lines(t: &Theme, uses: &[ChunkUse]) -> Vec<Line<'static>> {
    uses.iter()
        .map(|u| {
            Line::from(vec![
                Span::styled(format!("  Q{} ", u.question), t.key),
                Span::styled(truncate(first_line(&u.prompt), 70), t.text),
            ])
        })
        .collect()
}

/// Every field of a chunk, as haiku.rag's inspector shows it, with the questions of the
/// session that retrieved or cited it (listed when `questions`), then its content.
pub fn chunk_lines(
    app: &App,
    c: &SearchResult,
    score: Option<f64>,
    questions: bool,
) -> Vec<Line<'static>> {
    let t = &app.theme;
    let uses = chunk_uses(&app.transcript, c.id());
    let mut out = vec![Line::styled(format!("Chunk {}", c.order), t.title)];
    out.push(uses_line(t, &uses));
    if questions {
        out.extend(use_lines(t, &uses));
    }
    out.push(field(t, "ID", c.id().to_string()));
    out.push(field(
        t,
        "Document ID",
        c.document_id.clone().unwrap_or_else(|| "-".into()),
    ));
    if let Some(title) = c.document_title.as_ref().filter(|t| !t.is_empty()) {
        out.push(field(t, "Document", title.clone()));
    }
    if let Some(uri) = &c.document_uri {
        out.push(field(t, "URI", uri.clone()));
    }
    if let Some(s) = score {
        out.push(field(t, "Score", format!("{s:.4}")));
    }
    out.push(field(t, "Order", c.order.to_string()));
    out.push(field(t, "Page(s)", pages(&c.page_numbers)));
    out.push(field(
        t,
        "Section",
        c.headings
            .as_ref()
            .filter(|h| !h.is_empty())
            .map(|h| h.join(" > "))
            .unwrap_or_else(|| "-".into()),
    ));
    out.push(field(
        t,
        "Labels",
        if c.labels.is_empty() {
            "-".into()
        } else {
            c.labels.join(", ")
        },
    ));
    let refs = &c.doc_item_refs;
    let mut shown = refs
        .iter()
        .take(REFS_SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if refs.len() > REFS_SHOWN {
        shown.push_str(&format!(" ... (+{} more)", refs.len() - REFS_SHOWN));
    }
    out.push(field(
        t,
        "DocItem Refs",
        if shown.is_empty() { "-".into() } else { shown },
    ));
    for (k, v) in c
        .chunk_meta
        .iter()
        .filter(|(k, _)| !STANDARD_KEYS.contains(&k.as_str()))
    {
        out.push(field(t, k, json_value(v)));
    }
    out.push(Line::styled("─".repeat(20), t.dim));
    out.extend(
        c.content
            .lines()
            .map(|l| Line::styled(l.to_string(), t.text)),
    );
    out
}

/// The agent context: the vision preface, the token count, then the text itself.
pub fn context_lines(t: &Theme, c: &AgentContext) -> Vec<Line<'static>> {
    let mut out = vec![
        Line::styled(c.preface(), t.key),
        Line::styled(
            format!(
                "About {} tokens (text at 4 characters a token{}).",
                c.tokens,
                if c.vision && !c.pictures.is_empty() {
                    format!(", each picture at {IMAGE_TOKEN_ESTIMATE}")
                } else {
                    String::new()
                }
            ),
            t.dim,
        ),
        Line::styled("─".repeat(20), t.dim),
    ];
    out.extend(c.text.lines().map(|l| Line::styled(l.to_string(), t.text)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_row_names_its_document_by_title_else_file_name() {
        let mut r: SearchResult = serde_json::from_value(serde_json::json!({
            "content": "Usage: asn1Parser [OPTION] FILE\nmore",
            "score": 0.5,
            "page_numbers": [8],
            "document_uri": "file:///usr/share/doc/libtasn1-doc/libtasn1.pdf",
        }))
        .unwrap();
        assert_eq!(
            result_row(&r),
            "[0.50] libtasn1.pdf (p.8) · Usage: asn1Parser [OPTION] FILE"
        );
        r.document_title = Some("GNU Libtasn1".into());
        assert!(result_row(&r).starts_with("[0.50] GNU Libtasn1 (p.8) · "));
    }
}
