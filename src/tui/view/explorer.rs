//! The knowledge-base explorer, drawn over the whole frame: a header, the screen of the
//! current view (documents | chunks over details; a chunk; search; agent context) and a
//! footer with its keys (or the latest notice or error).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, List, ListItem, ListState, Paragraph, Wrap};

use super::explore_text::{chunk_lines, chunk_row, context_lines, document_lines, result_row};
use crate::host::explore::document_label;
use crate::tui::app::{App, Explorer, ExplorerView, SearchView};
use crate::tui::wrap::truncate;

/// At least this wide, the search screen puts the details beside the results.
const SIDE_BY_SIDE: u16 = 120;

fn block<'a>(app: &App, title: String, focused: bool) -> Block<'a> {
    let t = &app.theme;
    Block::default()
        .borders(Borders::ALL)
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Rounded
        })
        .border_style(if focused { t.border_focus } else { t.border })
        .title(Line::styled(format!(" {title} "), t.title))
}

/// A list of `rows` with `selected` highlighted (kept in view).
fn list(
    app: &App,
    frame: &mut Frame,
    area: Rect,
    block: Block<'_>,
    rows: Vec<String>,
    selected: Option<usize>,
    focused: bool,
) {
    let t = &app.theme;
    let width = block.inner(area).width as usize;
    let items: Vec<ListItem> = rows
        .into_iter()
        .map(|r| ListItem::new(Line::styled(truncate(&r, width.saturating_sub(1)), t.text)))
        .collect();
    let mut state = ListState::default().with_selected(selected);
    let highlight = if focused {
        t.selected
    } else {
        t.dim.add_modifier(ratatui::style::Modifier::REVERSED)
    };
    frame.render_stateful_widget(
        List::new(items)
            .block(block)
            .highlight_style(highlight)
            .highlight_symbol("▸"),
        area,
        &mut state,
    );
}

fn text(
    app: &App,
    frame: &mut Frame,
    area: Rect,
    block: Block<'_>,
    lines: Vec<Line<'static>>,
    scroll: u16,
) {
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0)),
        area,
    );
    let _ = app;
}

fn dim_line(app: &App, s: &str) -> Vec<Line<'static>> {
    vec![Line::styled(s.to_string(), app.theme.dim)]
}

pub fn render(app: &App, ex: &Explorer, frame: &mut Frame) {
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let t = &app.theme;
    let n = ex.docs.len();
    let docs = format!(
        "{n} document{}{}",
        if n == 1 { "" } else { "s" },
        if ex.docs_done { "" } else { " loaded" }
    );
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(" Knowledge base ", t.title),
            Span::styled(
                truncate(
                    &match &ex.collection {
                        Some(c) => format!(
                            "collection {c} ({} open, C next) · {docs}",
                            app.host.collections.len()
                        ),
                        None => format!("{} · {docs}", app.host.db),
                    },
                    header.width as usize,
                ),
                t.dim,
            ),
        ])),
        header,
    );
    let keys = match &ex.view {
        ExplorerView::Main if ex.editing_filter => "type to filter · Enter/Esc done",
        ExplorerView::Main => {
            "↑↓ Tab Enter · / search · c agent context · f filter · v grounding · Esc close"
        }
        ExplorerView::Chunk { .. } => "↑↓ scroll · c agent context · v grounding · Esc back",
        ExplorerView::Search(s) if s.in_results => {
            "↑↓ · Enter go to chunk · c agent context · / query · ^F scope · Esc back"
        }
        ExplorerView::Search(_) => {
            "type a query · Enter search · Tab results · ^F scope · Esc back"
        }
        ExplorerView::Context { .. } => "↑↓ scroll · Esc back",
    };
    let (foot, style) = match (&app.error, &app.notice) {
        (Some(e), _) => (e.as_str(), t.error),
        (None, Some(n)) => (n.as_str(), t.status),
        _ => (keys, t.dim),
    };
    frame.render_widget(
        Paragraph::new(Line::styled(truncate(foot, footer.width as usize), style)),
        footer,
    );
    match &ex.view {
        ExplorerView::Main => main_screen(app, ex, frame, body),
        ExplorerView::Chunk { scroll } => {
            let lines = match ex.highlighted_chunk() {
                Some(c) => chunk_lines(app, c, None, true),
                None => dim_line(app, "No chunk is highlighted."),
            };
            text(
                app,
                frame,
                body,
                block(app, "Chunk".into(), true),
                lines,
                *scroll,
            );
        }
        ExplorerView::Search(s) => search_screen(app, s, frame, body),
        ExplorerView::Context {
            chunk_id,
            context,
            scroll,
            ..
        } => {
            let (title, lines) = match context {
                None => (
                    format!("Agent context · {chunk_id}"),
                    dim_line(app, "Expanding the chunk as a search would…"),
                ),
                Some(Err(e)) => (
                    format!("Agent context · {chunk_id}"),
                    vec![Line::styled(e.clone(), t.error)],
                ),
                Some(Ok(c)) => (
                    format!("Agent context · {chunk_id} · ~{} tokens", c.tokens),
                    context_lines(t, c),
                ),
            };
            text(app, frame, body, block(app, title, true), lines, *scroll);
        }
    }
}

fn main_screen(app: &App, ex: &Explorer, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(38), Constraint::Percentage(62)]).areas(area);
    // Documents: the filter box, then the list.
    let [filter_area, docs_area] =
        Layout::vertical([Constraint::Length(3), Constraint::Min(2)]).areas(left);
    let filter_line = if ex.filter.is_empty() && !ex.editing_filter {
        Line::styled("f: title or URI", t.dim)
    } else {
        let cursor = if ex.editing_filter { "▏" } else { "" };
        Line::styled(format!("{}{cursor}", ex.filter), t.text)
    };
    frame.render_widget(
        Paragraph::new(filter_line).block(block(app, "Filter".into(), ex.editing_filter)),
        filter_area,
    );
    let more = if ex.docs_loading {
        " (loading…)"
    } else if !ex.docs_done {
        " (more below)"
    } else {
        ""
    };
    let docs_title = format!("Documents {}{more}", ex.docs.len());
    let docs_block = block(app, docs_title, !ex.in_chunks && !ex.editing_filter);
    if let Some(e) = &ex.docs_error {
        text(
            app,
            frame,
            docs_area,
            docs_block,
            vec![Line::styled(e.clone(), t.error)],
            0,
        );
    } else if ex.docs.is_empty() {
        let msg = if ex.docs_loading {
            "Loading documents…"
        } else if ex.filter.is_empty() {
            "The knowledge base holds no documents."
        } else {
            "No title or URI matches."
        };
        text(app, frame, docs_area, docs_block, dim_line(app, msg), 0);
    } else {
        let rows = ex.docs.iter().map(document_label).collect();
        list(
            app,
            frame,
            docs_area,
            docs_block,
            rows,
            Some(ex.doc),
            !ex.in_chunks && !ex.editing_filter,
        );
    }
    // Chunks over the details.
    let [chunks_area, detail_area] =
        Layout::vertical([Constraint::Percentage(40), Constraint::Percentage(60)]).areas(right);
    let chunks = ex.chunks();
    let chunks_title = match &ex.detail {
        Some(Ok(d)) => format!("Chunks {} · {}", d.chunks.len(), document_label(&d.meta)),
        _ => "Chunks".into(),
    };
    let chunks_block = block(
        app,
        truncate(&chunks_title, chunks_area.width.saturating_sub(4) as usize),
        ex.in_chunks,
    );
    match &ex.detail {
        None if ex.detail_for.is_some() => text(
            app,
            frame,
            chunks_area,
            chunks_block,
            dim_line(app, "Loading…"),
            0,
        ),
        None => text(app, frame, chunks_area, chunks_block, Vec::new(), 0),
        Some(Err(e)) => text(
            app,
            frame,
            chunks_area,
            chunks_block,
            vec![Line::styled(e.clone(), t.error)],
            0,
        ),
        Some(Ok(_)) if chunks.is_empty() => text(
            app,
            frame,
            chunks_area,
            chunks_block,
            dim_line(app, "This document has no chunks."),
            0,
        ),
        Some(Ok(_)) => list(
            app,
            frame,
            chunks_area,
            chunks_block,
            chunks.iter().map(chunk_row).collect(),
            Some(ex.chunk),
            ex.in_chunks,
        ),
    }
    let (title, lines) = match (ex.highlighted_chunk(), &ex.detail) {
        (Some(c), _) => ("Details".to_string(), chunk_lines(app, c, None, false)),
        (None, Some(Ok(d))) => ("Details".to_string(), document_lines(t, d)),
        _ => ("Details".to_string(), Vec::new()),
    };
    text(app, frame, detail_area, block(app, title, false), lines, 0);
}

fn search_screen(app: &App, s: &SearchView, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let [query_area, status_area, results_area] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(1),
        Constraint::Min(3),
    ])
    .areas(area);
    let scope = match (s.whole_base, app.document_filter()) {
        (false, Some(_)) => "the document filter",
        _ => "the whole base",
    };
    let query = if s.query.is_empty() && !s.in_results {
        Line::styled("Enter search query...", t.dim)
    } else {
        let cursor = if s.in_results { "" } else { "▏" };
        Line::styled(format!("{}{cursor}", s.query), t.text)
    };
    frame.render_widget(
        Paragraph::new(query).block(block(app, format!("Search {scope}"), !s.in_results)),
        query_area,
    );
    let (status, style): (String, Style) = match (&s.results, s.running, &s.searched) {
        (_, true, _) => ("Searching...".into(), t.running),
        (Err(e), _, _) => (format!("Error: {e}"), t.error),
        (Ok(r), _, Some(_)) => match &s.rerank {
            // The reranker's note: what it reordered, or why the fused order was kept.
            Some(rr) if rr.warning.is_some() => (
                format!("Found {} results · {}", r.len(), rr.note()),
                t.error,
            ),
            Some(rr) => (
                format!("Found {} results · {}", r.len(), rr.note()),
                t.status,
            ),
            None => (format!("Found {} results", r.len()), t.status),
        },
        _ => ("Type query and press Enter to search".into(), t.dim),
    };
    frame.render_widget(Paragraph::new(Line::styled(status, style)), status_area);
    let results = s.results.as_ref().map(|r| r.as_slice()).unwrap_or(&[]);
    let (list_area, detail_area) = if area.width >= SIDE_BY_SIDE {
        let [a, b] = Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
            .areas(results_area);
        (a, b)
    } else {
        let [a, b] = Layout::vertical([Constraint::Percentage(45), Constraint::Percentage(55)])
            .areas(results_area);
        (a, b)
    };
    list(
        app,
        frame,
        list_area,
        block(app, "Results".into(), s.in_results),
        results.iter().map(result_row).collect(),
        (!results.is_empty()).then_some(s.selected),
        s.in_results,
    );
    let mut lines = results
        .get(s.selected)
        .map(|r| chunk_lines(app, r, Some(r.score), false))
        .unwrap_or_default();
    // Both scores of a reranked result: the reranker's (the result's score) and the fused one.
    if let Some(hit) = results
        .get(s.selected)
        .and_then(|r| s.rerank.as_ref()?.hit(r.id()))
    {
        let line = match hit.rerank_score {
            Some(score) => format!(
                "reranked {score:.4} · fused {:.4} (fused #{})",
                hit.fused_score, hit.fused_rank
            ),
            None => format!("fused {:.4} (not reranked)", hit.fused_score),
        };
        lines.insert(0, Line::styled(line, t.status));
    }
    text(
        app,
        frame,
        detail_area,
        block(app, "Result".into(), false),
        lines,
        0,
    );
}
