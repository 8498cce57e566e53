//! The conversation pane: questions, tool rows, streamed answers, sources, programs.

use std::rc::Rc;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{SPINNER, markdown, pane_block, plain, title};
use crate::host::transcript::CitationStatus;
use crate::host::transcript::{LedgerRow, Passage, StepStatus, ToolStep, Turn};
use crate::tui::app::{App, Ended, Pane};
use crate::tui::theme::Theme;
use crate::tui::wrap::wrap_lines;

fn step_line(t: &Theme, s: &ToolStep, spinner: usize) -> Line<'static> {
    let (mark, style) = match s.status {
        StepStatus::Running => (SPINNER[spinner % SPINNER.len()], t.running),
        StepStatus::Ok => ("✓", t.ok),
        StepStatus::Failed => ("✗", t.failed),
    };
    Line::from(vec![
        Span::styled(format!("  {mark} "), style),
        Span::styled(s.name.clone(), style.add_modifier(Modifier::BOLD)),
        Span::raw(" "),
        Span::styled(s.summary.clone(), t.dim),
    ])
}

/// Lines of a caught answer shown before the fold.
const CAUGHT_SHOWN: usize = 6;

/// The answer the citation policy caught, struck through and dimmed (its first lines;
/// the export has it whole), and the redirect that followed.
fn caught_lines(t: &Theme, caught: &str, out: &mut Vec<Line<'static>>) {
    out.push(Line::styled(
        "Assistant, first (caught by the citation policy):",
        t.ungrounded,
    ));
    let lines: Vec<&str> = caught.lines().filter(|l| !l.trim().is_empty()).collect();
    let struck = t.dim.add_modifier(Modifier::CROSSED_OUT);
    for l in lines.iter().take(CAUGHT_SHOWN) {
        out.push(Line::from(vec![
            Span::styled("  ", t.dim),
            Span::styled(l.to_string(), struck),
        ]));
    }
    if lines.len() > CAUGHT_SHOWN {
        out.push(Line::styled(
            format!(
                "  … {} more lines (the export has the whole answer)",
                lines.len() - CAUGHT_SHOWN
            ),
            t.dim,
        ));
    }
    out.push(Line::styled(
        format!("  ↳ {}", crate::host::transcript::REDIRECT_NOTE),
        t.ungrounded,
    ));
    out.push(Line::raw(""));
}

fn status_span(t: &Theme, row: &LedgerRow) -> Span<'static> {
    let label = match row.status {
        CitationStatus::Missing => "citations missing",
        other => other.as_str(),
    };
    Span::styled(label, t.status(row.status))
}

fn turn_lines(app: &App, turn: &Turn, index: usize, out: &mut Vec<Line<'static>>) {
    let t = &app.theme;
    out.push(Line::styled("You:", t.user));
    out.extend(markdown(&turn.prompt));
    out.push(Line::raw(""));
    for s in &turn.steps {
        out.push(step_line(t, s, 0));
    }
    if !turn.steps.is_empty() {
        out.push(Line::raw(""));
    }
    if let Some(caught) = &turn.caught {
        caught_lines(t, caught, out);
    }
    out.push(Line::styled("Assistant:", t.assistant));
    let check = app.checks.get(&turn.question);
    match check {
        // Each checked sentence's verdict on its last marker.
        Some(v) => {
            let tag = VERDICT_TAG.to_string();
            let marked = crate::host::verify::with_verdicts(&turn.answer, v, &tag);
            out.extend(paint_verdicts(t, markdown(&marked)));
        }
        None => out.extend(markdown(&turn.answer)),
    }
    if let Some(note) = &turn.cut_off_note {
        out.push(Line::styled(
            format!("[{note}]"),
            t.ungrounded.add_modifier(Modifier::BOLD),
        ));
    }
    if let Some(row) = app.transcript.ledger.get(index) {
        let mut spans = vec![Span::styled("  ledger: ", t.dim), status_span(t, row)];
        if row.redirected {
            spans.push(Span::styled(" · redirected", t.ungrounded));
        }
        if row.violation {
            spans.push(Span::styled(" · violation recorded", t.missing));
        }
        if let Some(m) = app.marks.get(&turn.question) {
            spans.push(Span::styled(format!(" · marked {}", m.mark), t.title));
            if let Some(n) = &m.note {
                spans.push(Span::styled(format!(": {n}"), t.dim));
            }
        }
        out.push(Line::from(spans));
    }
    let collapsed = app.conversation.collapsed.contains(&turn.question);
    if let Some(v) = check {
        claim_lines(t, v, collapsed, out);
    }
    if let Some(code) = &turn.program {
        out.push(Line::styled(
            if collapsed {
                "▸ Program"
            } else {
                "▾ Program"
            },
            t.title,
        ));
        if !collapsed {
            for l in code.lines() {
                out.push(Line::from(vec![
                    Span::styled("  │ ", t.dim),
                    Span::styled(l.to_string(), t.running),
                ]));
            }
        }
    }
    if !turn.citations.is_empty() {
        out.push(Line::styled(
            format!(
                "{} Sources ({})",
                if collapsed { "▸" } else { "▾" },
                turn.citations.len()
            ),
            t.title,
        ));
        for (k, c) in turn.citations.iter().enumerate() {
            let selected = app.conversation.selected_citation == Some((index, k));
            let style = if selected { t.selected } else { t.key };
            out.push(Line::from(vec![
                Span::styled(if selected { "  ▶ " } else { "    " }, style),
                Span::styled(c.title(), style),
                Span::styled(
                    if c.number == c.index {
                        String::new()
                    } else {
                        format!(" · source #{} of the session", c.index)
                    },
                    t.dim,
                ),
                Span::styled(
                    c.evidence
                        .collection
                        .as_deref()
                        .map(|n| format!(" · {n}"))
                        .unwrap_or_default(),
                    t.dim,
                ),
            ]));
            if collapsed {
                continue;
            }
            match &c.passage {
                Some(p) => passage_lines(t, p, c.reference(), out),
                None => {
                    let why = match app.passages.get(&c.evidence.chunk_id) {
                        Some(Err(e)) => format!("{e}; the context the model saw:"),
                        _ => "reading the cited passage…; the context the model saw:".into(),
                    };
                    out.push(Line::styled(format!("      ({why})"), t.dim));
                    let mut excerpt: String = c.content.chars().take(500).collect();
                    if c.content.chars().count() > 500 {
                        excerpt.push_str("...");
                    }
                    for l in excerpt.lines().filter(|l| !l.trim().is_empty()) {
                        out.push(Line::from(vec![
                            Span::styled("      ", t.dim),
                            Span::styled(l.to_string(), t.dim),
                        ]));
                    }
                }
            }
            for r in &c.evidence.picture_refs {
                out.push(Line::styled(
                    format!("      ▣ figure {r} (page images pane)"),
                    t.running,
                ));
            }
            if c.passage.is_none() && !c.evidence.headings.is_empty() {
                let hs: Vec<&str> = c
                    .evidence
                    .headings
                    .iter()
                    .take(3)
                    .map(String::as_str)
                    .collect();
                out.push(Line::styled(
                    format!("      Section: {}", hs.join(" > ")),
                    t.dim,
                ));
            }
            out.push(Line::styled(
                format!("      Source: {}", c.evidence.document_uri),
                t.dim,
            ));
        }
    }
    out.push(Line::raw(""));
}

/// Marks a verdict glyph in an answer's text until [`paint_verdicts`] styles it (a
/// private-use character: never in an answer, passed through by the Markdown renderer).
const VERDICT_TAG: char = '\u{E000}';

/// `lines` with each tagged verdict glyph in its verdict's style, the tag dropped.
fn paint_verdicts(t: &Theme, lines: Vec<Line<'static>>) -> Vec<Line<'static>> {
    use crate::session::verdicts::Verdict;
    lines
        .into_iter()
        .map(|line| {
            if !line.spans.iter().any(|s| s.content.contains(VERDICT_TAG)) {
                return line;
            }
            let Line {
                style,
                alignment,
                spans: old,
            } = line;
            let mut spans = Vec::new();
            for s in old {
                let mut rest: &str = &s.content;
                while let Some(at) = rest.find(VERDICT_TAG) {
                    if at > 0 {
                        spans.push(Span::styled(rest[..at].to_string(), s.style));
                    }
                    rest = &rest[at + VERDICT_TAG.len_utf8()..];
                    let glyph = rest.chars().next().unwrap_or(' ');
                    if let Some(v) = Verdict::ALL
                        .into_iter()
                        .find(|v| v.glyph().starts_with(glyph))
                    {
                        spans.push(Span::styled(
                            v.glyph(),
                            t.verdict(v).add_modifier(Modifier::BOLD),
                        ));
                        rest = &rest[glyph.len_utf8()..];
                    }
                }
                if !rest.is_empty() {
                    spans.push(Span::styled(rest.to_string(), s.style));
                }
            }
            Line {
                style,
                alignment,
                spans,
            }
        })
        .collect()
}

/// The judge's check of an answer: the counts, then (unless folded) each claim's verdict
/// and reason with the sentence under it.
fn claim_lines(
    t: &Theme,
    v: &crate::session::verdicts::Verification,
    collapsed: bool,
    out: &mut Vec<Line<'static>>,
) {
    out.push(Line::from(vec![
        Span::styled(
            format!(
                "{} Claims checked ({})",
                if collapsed { "▸" } else { "▾" },
                v.counts().summary()
            ),
            t.title,
        ),
        Span::styled(format!(" · judge {}", v.judge), t.dim),
    ]));
    if collapsed {
        return;
    }
    for c in &v.claims {
        out.push(Line::from(vec![
            Span::styled(
                format!("    {} {}", c.verdict.glyph(), c.verdict.label()),
                t.verdict(c.verdict),
            ),
            Span::styled(format!(" — {}", c.reason), t.text),
        ]));
        out.push(Line::styled(format!("      “{}”", c.sentence), t.dim));
    }
    if !v.from_context.is_empty() {
        out.push(Line::styled(
            format!(
                "      ({} cited chunk(s) were not in the knowledge base: the judge read the context the model saw)",
                v.from_context.len()
            ),
            t.dim,
        ));
    }
}

/// Lines of a cited passage shown before the fold (the chunk detail has it whole).
const PASSAGE_SHOWN: usize = 12;

/// The cited chunk's own text under a quote bar, folded after [`PASSAGE_SHOWN`] lines,
/// then its reference (source, pages, section).
fn passage_lines(t: &Theme, p: &Passage, reference: String, out: &mut Vec<Line<'static>>) {
    let lines: Vec<&str> = p.text.lines().filter(|l| !l.trim().is_empty()).collect();
    for l in lines.iter().take(PASSAGE_SHOWN) {
        out.push(Line::from(vec![
            Span::styled("      │ ", t.dim),
            Span::styled(l.to_string(), t.text),
        ]));
    }
    if lines.len() > PASSAGE_SHOWN {
        out.push(Line::styled(
            format!(
                "      │ … {} more lines (Enter on the source shows the whole chunk)",
                lines.len() - PASSAGE_SHOWN
            ),
            t.dim,
        ));
    }
    out.push(Line::styled(format!("      {reference}"), t.dim));
    if p.as_cited {
        out.push(Line::styled(format!("      {AS_CITED}"), t.error));
    }
}

/// Under a passage read at the versions its question read: the chunk is gone now.
pub const AS_CITED: &str =
    "source changed since cited: not in the knowledge base now; shown as the question read it";

/// Whether question `index`'s answer (its last response) was cut off at the token limit
/// (the transcript's flag, from the response's `finish_reason`).
pub fn cut_off(app: &App, index: usize) -> bool {
    app.transcript.turns.get(index).is_some_and(|t| t.cut_off)
}

/// The committed conversation, wrapped to `width`, cached by (width, version).
pub fn committed_lines(app: &App, width: u16) -> Rc<Vec<Line<'static>>> {
    if let Some((w, v, lines)) = app.wrap_cache.borrow().as_ref()
        && *w == width
        && *v == app.version
    {
        return lines.clone();
    }
    let mut out = Vec::new();
    if app.scripted_demo() {
        out.push(Line::styled(
            "Scripted demonstration: these answers were scripted for the demo, not written by a model.",
            app.theme.ungrounded.add_modifier(Modifier::BOLD),
        ));
        out.push(Line::raw(""));
    }
    for (i, turn) in app.transcript.turns.iter().enumerate() {
        turn_lines(app, turn, i, &mut out);
    }
    let lines = Rc::new(wrap_lines(&out, width));
    *app.wrap_cache.borrow_mut() = Some((width, app.version, lines.clone()));
    lines
}

/// The running question (or how the last one ended), wrapped to `width`.
pub fn live_lines(app: &App, width: u16) -> Vec<Line<'static>> {
    let t = &app.theme;
    let mut out = Vec::new();
    // Not cached with the committed lines: it goes as soon as a question is asked.
    if app.transcript.turns.is_empty() && app.live.is_none() && app.ended.is_none() {
        out.push(Line::styled(
            "No questions yet. Type one below and press Enter.",
            t.dim,
        ));
    }
    if let Some(live) = &app.live {
        out.push(Line::styled("You:", t.user));
        out.extend(plain(&live.turn.prompt, t.text));
        out.push(Line::raw(""));
        for s in &live.turn.steps {
            out.push(step_line(t, s, app.spinner));
        }
        if !live.turn.answer.is_empty() {
            out.push(Line::styled("Assistant:", t.assistant));
            out.extend(markdown(&live.turn.answer));
        }
        out.push(Line::styled(
            format!(
                "{} {}",
                SPINNER[app.spinner % SPINNER.len()],
                live.waiting_note().unwrap_or_else(|| live.phase.label())
            ),
            t.running,
        ));
    } else if let Some(ended) = &app.ended {
        match ended {
            Ended::Cancelled(prompt) => {
                out.push(Line::styled("You:", t.user));
                out.extend(plain(prompt, t.text));
                out.push(Line::styled("Assistant:", t.assistant));
                out.push(Line::styled("*Cancelled* (nothing was committed)", t.dim));
            }
            Ended::Failed(prompt, error) => {
                out.push(Line::styled("You:", t.user));
                out.extend(plain(prompt, t.text));
                out.push(Line::styled(format!("Error: {error}"), t.error));
            }
        }
    }
    if app.live.is_none()
        && !matches!(app.ended, Some(Ended::Failed(..)))
        && let Some(e) = &app.error
    {
        out.push(Line::raw(""));
        out.push(Line::styled(format!("⚠ {e}"), t.error));
    }
    wrap_lines(&out, width)
}

/// Inner width of the pane for `area` width.
fn inner_width(width: u16) -> u16 {
    width.saturating_sub(2).max(1)
}

/// The wrapped line of the selected source's title (marked `▶`), at pane width `width`.
pub fn selected_source_line(app: &App, width: u16) -> Option<usize> {
    committed_lines(app, inner_width(width))
        .iter()
        .position(|l| {
            let text: String = l.spans.iter().map(|s| s.content.as_ref()).collect();
            text.starts_with("  ▶ [")
        })
}

/// The plain text of a wrapped line.
fn line_text(l: &Line<'_>) -> String {
    l.spans.iter().map(|s| s.content.as_ref()).collect()
}

/// The wrapped lines (committed, then live) that open a question, at pane width `width`.
pub fn question_lines(app: &App, width: u16) -> Vec<usize> {
    let w = inner_width(width);
    let user = app.theme.user;
    committed_lines(app, w)
        .iter()
        .chain(live_lines(app, w).iter())
        .enumerate()
        .filter(|(_, l)| {
            line_text(l) == "You:"
                && (l.style == user || l.spans.first().is_some_and(|s| s.style == user))
        })
        .map(|(i, _)| i)
        .collect()
}

/// The wrapped lines holding `needle` (case does not matter), at pane width `width`.
pub fn find_lines(app: &App, width: u16, needle: &str) -> Vec<usize> {
    let w = inner_width(width);
    let needle = needle.to_lowercase();
    committed_lines(app, w)
        .iter()
        .chain(live_lines(app, w).iter())
        .enumerate()
        .filter(|(_, l)| line_text(l).to_lowercase().contains(&needle))
        .map(|(i, _)| i)
        .collect()
}

/// Total wrapped lines at pane width `width`.
pub fn line_count(app: &App, width: u16) -> usize {
    let w = inner_width(width);
    committed_lines(app, w).len() + live_lines(app, w).len()
}

pub fn render(app: &App, frame: &mut Frame, area: Rect) {
    let w = inner_width(area.width);
    let committed = committed_lines(app, w);
    let live = live_lines(app, w);
    let total = committed.len() + live.len();
    let height = area.height.saturating_sub(2) as usize;
    let max_top = total.saturating_sub(height);
    let top = app.conversation.scroll.unwrap_or(max_top).min(max_top);
    let found = app.conversation.find_line;
    let visible: Vec<Line<'static>> = committed
        .iter()
        .chain(live.iter())
        .enumerate()
        .skip(top)
        .take(height)
        .map(|(i, l)| {
            if Some(i) == found {
                // The line `/` went to stands out.
                l.clone().patch_style(Modifier::REVERSED)
            } else {
                l.clone()
            }
        })
        .collect();
    let mut extra = if total > height {
        format!("{}–{} of {}", top + 1, (top + height).min(total), total)
    } else {
        String::new()
    };
    if let Some(needle) = &app.conversation.find {
        if !extra.is_empty() {
            extra.push_str(" · ");
        }
        extra.push_str(&format!(
            "/{} {}/{}",
            crate::tui::wrap::truncate(needle, 20),
            app.keymap.hint(crate::tui::keymap::Action::NextMatch),
            app.keymap.hint(crate::tui::keymap::Action::PrevMatch)
        ));
    }
    let mut block = pane_block(
        app,
        Pane::Conversation,
        title(app, Pane::Conversation, extra),
    );
    if app.conversation.scroll.is_some() && app.conversation.new_below {
        block = block.title_bottom(Line::styled(
            format!(
                " ↓ new content below ({}) ",
                app.keymap.hint(crate::tui::keymap::Action::Bottom)
            ),
            app.theme.running,
        ));
    }
    frame.render_widget(Paragraph::new(visible).block(block), area);
}
