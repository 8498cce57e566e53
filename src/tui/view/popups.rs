//! Popups: help, command palette, document filter, database info, paths, chunk detail.

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};

use crate::tui::app::{App, PathPurpose, Popup};
use crate::tui::wrap::{truncate, width, wrap_line};

/// `text` as lines, the bytes in `span` in `mark` and the rest in `rest`.
fn highlighted(
    text: &str,
    span: Option<std::ops::Range<usize>>,
    rest: ratatui::style::Style,
    mark: ratatui::style::Style,
) -> Vec<Line<'static>> {
    let span = span
        .filter(|s| {
            s.end <= text.len() && text.is_char_boundary(s.start) && text.is_char_boundary(s.end)
        })
        .unwrap_or(0..0);
    let pieces = [
        (&text[..span.start], rest),
        (&text[span.clone()], mark),
        (&text[span.end..], rest),
    ];
    let mut lines: Vec<Line<'static>> = vec![Line::default()];
    for (piece, style) in pieces {
        for (k, part) in piece.split('\n').enumerate() {
            if k > 0 {
                lines.push(Line::default());
            }
            if !part.is_empty() {
                lines
                    .last_mut()
                    .expect("one line at least")
                    .spans
                    .push(Span::styled(part.to_string(), style));
            }
        }
    }
    lines
}

/// A `w`×`h` rectangle in the middle of `area` (smaller when `area` is).
pub(super) fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let [r] = Layout::horizontal([Constraint::Length(w.min(area.width))])
        .flex(Flex::Center)
        .areas(area);
    let [r] = Layout::vertical([Constraint::Length(h.min(area.height))])
        .flex(Flex::Center)
        .areas(r);
    r
}

fn frame_block<'a>(app: &App, title: &'a str, footer: &'a str) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(app.theme.border_focus)
        .title(Line::styled(format!(" {title} "), app.theme.title))
        .title_bottom(Line::styled(format!(" {footer} "), app.theme.dim))
}

pub fn render(app: &App, frame: &mut Frame) {
    let Some(popup) = &app.popup else {
        return;
    };
    let t = &app.theme;
    let full = frame.area();
    match popup {
        Popup::Help { scroll } => {
            let rows = app.keymap.help_rows();
            // Keys in a column of their own; a description too long for the screen goes
            // on under itself rather than being cut.
            const KEYS: usize = 22;
            let longest = rows.iter().map(|(_, d)| width(d)).max().unwrap_or(0);
            let inner = (KEYS + longest)
                .max(74)
                .min(usize::from(full.width.saturating_sub(2)));
            let desc_w = inner.saturating_sub(KEYS).max(1) as u16;
            let mut lines: Vec<Line> = Vec::new();
            for (keys, desc) in rows {
                let pieces = wrap_line(&Line::styled(desc, t.text), desc_w);
                for (k, piece) in pieces.into_iter().enumerate() {
                    let keys = if k == 0 {
                        truncate(&keys, KEYS - 1)
                    } else {
                        String::new()
                    };
                    let mut spans = vec![Span::styled(format!("{keys:<KEYS$}"), t.key)];
                    spans.extend(piece.spans);
                    lines.push(Line::from(spans));
                }
            }
            let area = centered(full, inner as u16 + 2, lines.len() as u16 + 2);
            let max_scroll = (lines.len() as u16 + 2).saturating_sub(area.height);
            frame.render_widget(Clear, area);
            frame.render_widget(
                Paragraph::new(lines)
                    .scroll(((*scroll).min(max_scroll), 0))
                    .block(frame_block(app, "Keys", "↑/↓ scroll · Esc closes")),
                area,
            );
        }
        Popup::Palette { query, selected } => {
            let entries = app.palette_entries(query);
            // The names, two spaces, the keys and a space: as wide as the longest of each
            // over every command (so the keys stay put while the list is filtered), or the
            // screen (the names are cut first; a key is never run into or cut).
            let every = app.palette_entries("");
            let keys_w = every
                .iter()
                .map(|a| width(&app.keymap.hint(*a)))
                .max()
                .unwrap_or(0);
            let names_w = every
                .iter()
                .map(|a| width(a.description()))
                .max()
                .unwrap_or(0);
            let inner = (names_w + keys_w + 3)
                .max(62)
                .min(usize::from(full.width.saturating_sub(2)));
            let names_w = names_w.min(inner.saturating_sub(keys_w + 3)).max(1);
            let area = centered(full, inner as u16 + 2, entries.len() as u16 + 4);
            let mut lines = vec![Line::from(vec![
                Span::styled("> ", t.key),
                Span::styled(query.clone(), t.text),
            ])];
            let sel = (*selected).min(entries.len().saturating_sub(1));
            for (k, a) in entries.iter().enumerate() {
                let style = if k == sel { t.selected } else { t.text };
                let name = truncate(a.description(), names_w);
                let pad = names_w.saturating_sub(width(&name)) + 2;
                lines.push(Line::from(vec![
                    Span::styled(format!("{name}{:pad$}", ""), style),
                    Span::styled(app.keymap.hint(*a), t.dim),
                ]));
            }
            frame.render_widget(Clear, area);
            frame.render_widget(
                Paragraph::new(lines).block(frame_block(
                    app,
                    "Commands",
                    "type to filter · Enter runs · Esc closes",
                )),
                area,
            );
        }
        Popup::Filter {
            all,
            query,
            cursor,
            chosen,
        } => {
            let area = centered(full, 70, 18);
            let mut lines = vec![Line::from(vec![
                Span::styled("Search documents... ", t.dim),
                Span::styled(query.clone(), t.text),
            ])];
            match all {
                None => lines.push(Line::styled("Loading...", t.dim)),
                Some(all) => {
                    let matches = App::filter_matches(all, query);
                    let skip = cursor.saturating_sub(12);
                    for (k, d) in matches.iter().enumerate().skip(skip).take(13) {
                        let on = chosen.contains(d);
                        let style = if k == *cursor { t.selected } else { t.text };
                        lines.push(Line::styled(
                            truncate(&format!("[{}] {d}", if on { "x" } else { " " }), 66),
                            style,
                        ));
                    }
                }
            }
            let footer = if chosen.is_empty() {
                "No filter (all documents)".to_string()
            } else {
                format!("{} document(s) selected", chosen.len())
            };
            lines.push(Line::styled(footer, t.running));
            frame.render_widget(Clear, area);
            frame.render_widget(
                Paragraph::new(lines).block(frame_block(
                    app,
                    "Filter Documents",
                    "Space toggles · Enter applies · Esc cancels",
                )),
                area,
            );
        }
        Popup::Mark {
            turn,
            question,
            note,
        } => {
            let area = centered(full, 64, 9);
            frame.render_widget(Clear, area);
            let current = app.marks.get(question);
            let block = frame_block(
                app,
                "Mark the answer",
                if note.is_some() {
                    "Enter saves the note · Esc back"
                } else {
                    "Esc closes"
                },
            );
            let inner = block.inner(area);
            frame.render_widget(block, area);
            let prompt = app
                .transcript
                .turns
                .get(*turn)
                .map(|t| t.prompt.split_whitespace().collect::<Vec<_>>().join(" "))
                .unwrap_or_default();
            let mut lines = vec![
                Line::styled(
                    truncate(&format!("{} · {prompt}", turn + 1), inner.width as usize),
                    t.title,
                ),
                Line::styled(
                    match current {
                        Some(m) => format!(
                            "now: marked {}{}",
                            m.mark,
                            m.note
                                .as_deref()
                                .map(|n| format!(" — {n}"))
                                .unwrap_or_default()
                        ),
                        None => "now: not marked".to_string(),
                    },
                    t.dim,
                ),
                Line::raw(""),
            ];
            if note.is_none() {
                lines.push(Line::from(vec![
                    Span::styled("s", t.key),
                    Span::raw(" supported  "),
                    Span::styled("u", t.key),
                    Span::raw(" unsupported  "),
                    Span::styled("i", t.key),
                    Span::raw(" invented  "),
                    Span::styled("w", t.key),
                    Span::raw(" wrong"),
                ]));
                lines.push(Line::from(vec![
                    Span::styled("n", t.key),
                    Span::raw(" a note on the mark  "),
                    Span::styled("x", t.key),
                    Span::raw(" clear the mark"),
                ]));
                frame.render_widget(Paragraph::new(lines), inner);
            } else if let Some(input) = note {
                lines.push(Line::styled("Note:", t.title));
                let [text, field] = Layout::vertical([
                    Constraint::Length(lines.len() as u16),
                    Constraint::Length(1),
                ])
                .areas(inner);
                frame.render_widget(Paragraph::new(lines), text);
                frame.render_widget(input.as_ref(), field);
            }
        }
        Popup::Find { query } => {
            // Over the conversation's last lines, where the eye already is.
            let area = app.areas.conversation;
            let w = area.width.min(full.width).max(20);
            let y = (area.y + area.height).saturating_sub(3).max(full.y);
            let area = Rect::new(area.x, y, w, 3).intersection(full);
            frame.render_widget(Clear, area);
            frame.render_widget(
                Paragraph::new(Line::from(vec![
                    Span::styled("/", t.key),
                    Span::styled(query.clone(), t.text),
                    Span::styled("█", t.dim),
                ]))
                .block(frame_block(
                    app,
                    "Find in the conversation",
                    "Enter finds · Esc closes",
                )),
                area,
            );
        }
        Popup::Info(text) => {
            let area = centered(full, 90, 20);
            let body = text.clone().unwrap_or_else(|| "Loading...".into());
            frame.render_widget(Clear, area);
            frame.render_widget(
                Paragraph::new(body)
                    .style(t.text)
                    .wrap(Wrap { trim: false })
                    .block(frame_block(app, "Database info", "Esc closes")),
                area,
            );
        }
        Popup::Path {
            purpose,
            input,
            entries,
            selected,
        } => {
            let title = match purpose {
                PathPurpose::SaveAs => "Save session as",
                PathPurpose::Open => "Open session",
                PathPurpose::AttachImage => "Attach image",
            };
            let area = centered(full, 80, 16);
            frame.render_widget(Clear, area);
            let block = frame_block(app, title, "Tab completes · Enter chooses · Esc cancels");
            let inner = block.inner(area);
            frame.render_widget(block, area);
            let [field, list] =
                Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(inner);
            frame.render_widget(input.as_ref(), field);
            let skip = selected.saturating_sub(list.height.saturating_sub(1) as usize);
            let lines: Vec<Line> = entries
                .iter()
                .enumerate()
                .skip(skip)
                .take(list.height as usize)
                .map(|(k, e)| {
                    Line::styled(
                        truncate(e, list.width as usize),
                        if k == *selected { t.selected } else { t.text },
                    )
                })
                .collect();
            frame.render_widget(Paragraph::new(lines), list);
        }
        Popup::ChunkDetail {
            chunk_id,
            text,
            scroll,
            context,
        } => {
            let area = centered(
                full,
                full.width.saturating_sub(8),
                full.height.saturating_sub(4),
            );
            let body = text.clone().unwrap_or_else(|| "Loading...".into());
            let mut lines: Vec<Line> = body.lines().map(|l| Line::raw(l.to_string())).collect();
            if let Some((context, span)) = context {
                lines.push(Line::raw(""));
                lines.push(Line::styled(
                    match span {
                        Some(_) => crate::tui::app::CONTEXT_HEADING_MARKED,
                        None => crate::tui::app::CONTEXT_HEADING_UNMARKED,
                    },
                    t.title,
                ));
                lines.extend(highlighted(context, span.clone(), t.dim, t.selected));
            }
            let title = format!("Chunk {chunk_id}");
            frame.render_widget(Clear, area);
            frame.render_widget(
                Paragraph::new(lines)
                    .style(t.text)
                    .wrap(Wrap { trim: false })
                    .scroll((*scroll, 0))
                    .block(frame_block(
                        app,
                        &title,
                        "↑/↓ scroll · Esc closes · its images are in the page images pane",
                    )),
                area,
            );
        }
    }
}
