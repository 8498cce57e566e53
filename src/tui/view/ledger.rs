//! The citation ledger: one row per question, and the chunks of the selected row.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};

use super::{pane_block, title};
use crate::engine::tokens::{TokenTotals, signed, thousands};
use crate::host::transcript::CitationStatus;
use crate::tui::app::{App, Pane};
use crate::tui::keymap::Action;
use crate::tui::wrap::{truncate, wrap_line};

fn status_cell(app: &App, s: CitationStatus, marks: &str) -> Cell<'static> {
    let t = &app.theme;
    Cell::from(Line::from(vec![
        Span::styled(s.as_str(), t.status(s)),
        Span::styled(marks.to_string(), t.missing),
    ]))
}

/// The judge's verdicts on a question's claims, a glyph and a count each (`✓2 ✗1`); `-`
/// when they were not checked.
fn claims_cell(app: &App, question: u64) -> Cell<'static> {
    let t = &app.theme;
    let Some(v) = app.checks.get(&question) else {
        return Cell::from(Span::styled("-", t.dim));
    };
    let counts = v.counts();
    // The same figures as `VerdictCounts::glyphs`, each in its verdict's colour.
    let mut spans = Vec::new();
    for verdict in crate::session::verdicts::Verdict::ALL {
        let n = counts.get(verdict);
        if n > 0 {
            if !spans.is_empty() {
                spans.push(Span::raw(" "));
            }
            spans.push(Span::styled(
                format!("{}{n}", verdict.glyph()),
                t.verdict(verdict),
            ));
        }
    }
    Cell::from(Line::from(spans))
}

/// The selected question whole, then its figures spelled out: status, redirect,
/// violation, citations, searches, executions and the tokens its requests counted (raw →
/// sent). Up to three lines of `width`.
fn detail_lines(app: &App, i: usize, width: u16) -> Vec<Line<'static>> {
    let t = &app.theme;
    let r = &app.transcript.ledger[i];
    let prompt = r.prompt.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut lines = wrap_line(
        &Line::styled(format!("▸ {} · {prompt}", i + 1), t.title),
        width,
    );
    if lines.len() > 2 {
        // Two lines of the question at most: the rest is marked, not silently lost.
        lines.truncate(2);
        let last = lines[1].to_string();
        lines[1] = Line::styled(
            truncate(&format!("{}…", last.trim_end()), width as usize),
            t.title,
        );
    }
    let mut facts = vec![Span::styled(r.status.as_str(), t.status(r.status))];
    let mut more = Vec::new();
    if r.redirected {
        more.push("↻ redirected".to_string());
    }
    if r.violation {
        more.push("⚑ violation recorded".to_string());
    }
    more.push(format!("{} cited", r.cited.len()));
    more.push(format!("searches {}/{}", r.searches, app.host.max_searches));
    if r.executions > 0 {
        more.push(format!(
            "executions {}/{}",
            r.executions, app.host.max_executions
        ));
    }
    if let Some(m) = app.marks.get(&r.question) {
        more.push(format!("marked {}", m.mark));
    }
    if let Some(v) = app.checks.get(&r.question) {
        more.push(format!("claims {}", v.counts().glyphs()));
    }
    if let Some((raw, sent, n)) = app.question_tokens(r.question) {
        more.push(format!(
            "tokens raw {} → sent {} in {n} request{}",
            thousands(raw as u64),
            thousands(sent as u64),
            if n == 1 { "" } else { "s" }
        ));
    }
    facts.push(Span::styled(format!(" · {}", more.join(" · ")), t.dim));
    let room = 3usize.saturating_sub(lines.len()).max(1);
    let mut tail = wrap_line(&Line::from(facts), width);
    tail.truncate(room);
    lines.extend(tail);
    // A line of its own: the figures above are cut to their room, this must not be.
    if let Some(c) = app.kb_changes.get(&r.question) {
        lines.push(Line::styled(
            truncate(&format!("knowledge base: {c} since"), width as usize),
            t.ungrounded,
        ));
    }
    lines
}

/// The session's token totals: what the provider reported, the counted figure (by
/// which counter) and the difference; a shorter form when `width` is narrow.
fn totals_text(k: &TokenTotals, width: usize) -> String {
    let counted = format!("counted {} ({})", thousands(k.sent as u64), k.counter);
    let Some(d) = k.difference() else {
        return format!(
            "tokens: {counted} in {} requests · provider: no usage reported",
            k.requests
        );
    };
    let pct = if k.sent_reported > 0 {
        d as f64 * 100.0 / k.sent_reported as f64
    } else {
        0.0
    };
    let partly = if k.reported < k.requests {
        format!(" ({} of {} requests reported)", k.reported, k.requests)
    } else {
        String::new()
    };
    let (p, c) = (
        thousands(k.provider_prompt),
        thousands(k.provider_completion),
    );
    let long = format!(
        "tokens: provider {p} in / {c} out · {counted} · diff {} ({pct:+.0}%) in {} requests{partly}",
        signed(d),
        k.requests
    );
    if long.chars().count() <= width {
        return long;
    }
    format!("tok {p} in/{c} out · {counted} · {}", signed(d))
}

pub fn render(app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let rows_idx = app.visible_ledger();
    let total = app.transcript.ledger.len();
    let extra = if app.ledger.violations_only {
        format!("violations only: {} of {total}", rows_idx.len())
    } else {
        let v = app.transcript.ledger.iter().filter(|r| r.violation).count();
        format!(
            "{total} questions, {v} violations · {} filters",
            app.keymap.hint(Action::ViolationsOnly)
        )
    };
    let block = pane_block(app, Pane::Ledger, title(app, Pane::Ledger, extra));
    let mut inner = block.inner(area);
    frame.render_widget(block, area);
    let totals = app.token_totals();
    if totals.requests > 0 && inner.height > 1 {
        let [line, rest] =
            Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(inner);
        frame.render_widget(
            Paragraph::new(Line::styled(
                truncate(
                    &totals_text(&totals, line.width as usize),
                    line.width as usize,
                ),
                t.dim,
            )),
            line,
        );
        inner = rest;
    }
    if rows_idx.is_empty() {
        let msg = if total == 0 && app.live.is_some() {
            "No answered questions yet; the running one's row comes when it ends."
        } else if total == 0 && app.ended.is_some() {
            "No answered questions yet."
        } else if total == 0 {
            "No questions yet."
        } else {
            "No question has a violation."
        };
        frame.render_widget(Paragraph::new(Line::styled(msg, t.dim)), inner);
        return;
    }
    let roomy = inner.height >= 10;
    let chunk_h = if roomy { inner.height / 2 } else { 0 };
    // Three lines, and one more when the knowledge base changed since the question.
    let selected_question = rows_idx
        .get(app.ledger.selected.min(rows_idx.len() - 1))
        .and_then(|&i| app.transcript.ledger.get(i))
        .map(|r| r.question);
    let changed = selected_question.is_some_and(|q| app.kb_changes.contains_key(&q));
    let detail_h = if roomy { 3 + u16::from(changed) } else { 0 };
    let [table_area, detail_area, chunks_area] = Layout::vertical([
        Constraint::Min(3),
        Constraint::Length(detail_h),
        Constraint::Length(chunk_h),
    ])
    .areas(inner);
    let budget = app.host.max_searches;
    // Wide enough for every figure in its own, spelled-out column; otherwise the status
    // carries ↻ (redirected) and ⚑ (violation) and the line under the table spells out the
    // selected question's figures.
    let wide = table_area.width >= 100;
    // Only the rows in view are built: the window keeps the selection visible.
    let view_h = table_area.height.saturating_sub(1).max(1) as usize;
    let selected = app.ledger.selected.min(rows_idx.len() - 1);
    let first = selected.saturating_sub(view_h - 1);
    let question_cell = |i: usize, width: usize| -> Cell<'static> {
        let prompt = app.transcript.ledger[i].prompt.lines().next().unwrap_or("");
        if crate::tui::view::conversation::cut_off(app, i) {
            // The answer ended at the token limit (`finish_reason: length`).
            Cell::from(Line::from(vec![
                Span::styled("cut off ", t.ungrounded),
                Span::raw(truncate(prompt, width.saturating_sub(8).max(4))),
            ]))
        } else {
            Cell::from(truncate(prompt, width))
        }
    };
    let (header, widths): (Vec<&str>, Vec<Constraint>) = if wide {
        (
            vec![
                "#",
                "question",
                "status",
                "redirected",
                "violation",
                "cited",
                "searches",
                "executions",
                "claims",
            ],
            vec![
                Constraint::Length(3),
                Constraint::Min(8),
                Constraint::Length(10),
                Constraint::Length(10),
                Constraint::Length(9),
                Constraint::Length(5),
                Constraint::Length(8),
                Constraint::Length(10),
                Constraint::Length(11),
            ],
        )
    } else {
        (
            vec!["#", "status", "cited", "question"],
            vec![
                Constraint::Length(3),
                Constraint::Length(14),
                Constraint::Length(5),
                Constraint::Min(8),
            ],
        )
    };
    let fixed: u16 = widths
        .iter()
        .map(|c| match c {
            Constraint::Length(n) => n + 1,
            _ => 1,
        })
        .sum();
    let q_width = table_area.width.saturating_sub(fixed).max(8) as usize;
    let rows: Vec<Row> = rows_idx
        .iter()
        .skip(first)
        .take(view_h)
        .map(|&i| {
            let r = &app.transcript.ledger[i];
            let number = Cell::from((i + 1).to_string());
            if wide {
                Row::new(vec![
                    number,
                    question_cell(i, q_width),
                    status_cell(app, r.status, ""),
                    Cell::from(if r.redirected { "yes" } else { "-" }),
                    Cell::from(Span::styled(
                        if r.violation { "yes" } else { "-" },
                        if r.violation { t.missing } else { t.dim },
                    )),
                    Cell::from(r.cited.len().to_string()),
                    Cell::from(format!("{}/{budget}", r.searches)),
                    Cell::from(if r.executions > 0 {
                        format!("{}/{}", r.executions, app.host.max_executions)
                    } else {
                        "-".into()
                    }),
                    claims_cell(app, r.question),
                ])
            } else {
                let not_supported = app.checks.get(&r.question).map_or(0, |v| {
                    v.counts()
                        .get(crate::session::verdicts::Verdict::NotSupported)
                });
                let marks = format!(
                    "{}{}{}",
                    if r.redirected { " ↻" } else { "" },
                    if r.violation { " ⚑" } else { "" },
                    if not_supported > 0 {
                        format!(" ✗{not_supported}")
                    } else {
                        String::new()
                    }
                );
                Row::new(vec![
                    number,
                    status_cell(app, r.status, &marks),
                    Cell::from(r.cited.len().to_string()),
                    question_cell(i, q_width),
                ])
            }
        })
        .collect();
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(t.title))
        .row_highlight_style(if app.ledger.in_chunks {
            t.dim
        } else {
            t.selected
        });
    let mut state = TableState::default().with_selected(Some(selected - first));
    frame.render_stateful_widget(table, table_area, &mut state);
    if detail_area.height > 0 {
        let lines = detail_lines(app, rows_idx[selected], detail_area.width);
        frame.render_widget(Paragraph::new(lines), detail_area);
    }
    if chunks_area.height == 0 {
        return;
    }
    let chunks = app.ledger_chunks();
    let mut lines = vec![Line::styled(
        format!(
            "chunks: {} cited, {} retrieved but not cited · Enter opens",
            chunks.iter().filter(|c| c.1).count(),
            chunks.iter().filter(|c| !c.1).count()
        ),
        t.dim,
    )];
    let w = chunks_area.width as usize;
    let skip = app
        .ledger
        .chunk
        .saturating_sub(chunks_area.height.saturating_sub(2) as usize);
    for (k, (c, cited)) in chunks.iter().enumerate().skip(skip) {
        let selected = app.ledger.in_chunks && k == app.ledger.chunk;
        let pages = if c.evidence.pages.is_empty() {
            String::new()
        } else {
            format!(
                " p.{}",
                c.evidence
                    .pages
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )
        };
        let text = format!(
            "{} {} {}{}{} ({}) {}",
            if *cited { "✓" } else { "·" },
            c.index
                .map(|n| format!("[{n}]"))
                .unwrap_or_else(|| "   ".into()),
            c.evidence
                .collection
                .as_deref()
                .map(|n| format!("{n}: "))
                .unwrap_or_default(),
            c.evidence.source_or_unknown(),
            pages,
            c.evidence.capability,
            c.evidence.chunk_id,
        );
        let style = if selected {
            t.selected
        } else if *cited {
            t.text
        } else {
            t.dim
        };
        lines.push(Line::styled(truncate(&text, w), style));
    }
    frame.render_widget(Paragraph::new(lines), chunks_area);
}
