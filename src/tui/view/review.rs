//! The review table of an experiment: a header (folder, counts, filters), questions ×
//! arms with each outcome, the selected cell in full, the keys; and the note prompt,
//! drawn over the table or over the opened session.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};

use crate::eval::review::Cell;
use crate::tui::app::{App, MARK_KEYS, ReviewState};
use crate::tui::theme::Theme;
use crate::tui::wrap::truncate;

/// Width of one arm's column.
const ARM_WIDTH: usize = 19;

/// The cell as the table shows it: outcome, `↻` redirected, `!` violation, the mark.
pub fn cell_text(c: &Cell) -> String {
    let mut s = c.status.clone().unwrap_or_else(|| "—".into());
    if c.redirected {
        s.push_str(" ↻");
    }
    if c.violation {
        s.push_str(" !");
    }
    if let Some(m) = &c.mark {
        let short = MARK_KEYS
            .iter()
            .find(|(_, name, _)| name == m)
            .map_or(m.as_str(), |(.., short)| short);
        s.push(' ');
        s.push_str(short);
        if c.note.is_some() {
            s.push('*');
        }
    }
    s
}

fn status_style(t: &Theme, c: &Cell) -> Style {
    match c.status.as_deref() {
        Some("grounded") => t.grounded,
        Some("ungrounded") => t.ungrounded,
        Some("missing") => t.missing,
        Some("failed") => t.error,
        _ => t.dim,
    }
}

/// Draws the review table over the whole frame.
pub fn render(app: &App, frame: &mut Frame) {
    let Some(r) = &app.review else {
        return;
    };
    let t = &app.theme;
    let [header, body, detail, keys, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(7),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let visible = r.visible();
    let filters = r.filter_text();
    let head = vec![
        Span::styled(" Review ", t.title),
        Span::styled(
            truncate(
                &r.table.dir.display().to_string(),
                (header.width as usize / 2).max(10),
            ),
            t.text,
        ),
        Span::styled(
            format!(
                "  {}/{} questions × {} arms  filters: {}",
                visible.len(),
                r.table.rows.len(),
                r.table.arms.len(),
                if filters.is_empty() { "none" } else { &filters }
            ),
            t.dim,
        ),
    ];
    frame.render_widget(Paragraph::new(Line::from(head)), header);
    table(app, r, &visible, frame, body);
    frame.render_widget(
        Paragraph::new(detail_lines(t, r))
            .wrap(Wrap { trim: true })
            .block(
                Block::default()
                    .borders(Borders::TOP)
                    .border_style(t.border),
            ),
        detail,
    );
    let hint = "↑↓←→ move · Enter open · s supported · u unsupported · i invented · w wrong · x clear · n note · d differing · v violations · m unmarked · f label · q quit";
    frame.render_widget(
        Paragraph::new(Span::styled(truncate(hint, keys.width as usize), t.key)),
        keys,
    );
    let line = match (&app.error, &app.notice) {
        (Some(e), _) => Span::styled(truncate(e, status.width as usize), t.error),
        (None, Some(n)) => Span::styled(truncate(n, status.width as usize), t.status),
        _ => Span::styled(
            "read-only: reviewing never changes a session; marks go to reviews.jsonl",
            t.dim,
        ),
    };
    frame.render_widget(Paragraph::new(line), status);
    note(app, frame);
    app.theme.paint_base(frame.buffer_mut());
}

fn table(app: &App, r: &ReviewState, visible: &[usize], frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let id_w = r
        .table
        .rows
        .iter()
        .map(|row| row.id.chars().count())
        .max()
        .unwrap_or(2)
        .clamp(2, 12);
    let arms_w = r.table.arms.len() * (ARM_WIDTH + 1);
    let question_w = (area.width as usize)
        .saturating_sub(id_w + 2 + arms_w)
        .max(8);
    let mut lines = Vec::new();
    let mut head = vec![
        Span::styled(format!(" {:<id_w$} ", "id"), t.title),
        Span::styled(format!("{:<question_w$}", "question"), t.title),
    ];
    for (i, arm) in r.table.arms.iter().enumerate() {
        let style = if i == r.arm {
            t.title.add_modifier(Modifier::UNDERLINED)
        } else {
            t.title
        };
        head.push(Span::raw(" "));
        head.push(Span::styled(
            format!("{:<ARM_WIDTH$}", truncate(arm, ARM_WIDTH)),
            style,
        ));
    }
    lines.push(Line::from(head));
    let rows_h = (area.height as usize).saturating_sub(1).max(1);
    let mut scroll = r.scroll.get().min(visible.len().saturating_sub(1));
    if r.row < scroll {
        scroll = r.row;
    } else if r.row >= scroll + rows_h {
        scroll = r.row + 1 - rows_h;
    }
    r.scroll.set(scroll);
    for (pos, &ri) in visible.iter().enumerate().skip(scroll).take(rows_h) {
        let row = &r.table.rows[ri];
        let here = pos == r.row;
        let base = if here {
            t.text.add_modifier(Modifier::BOLD)
        } else {
            t.text
        };
        let mut spans = vec![
            Span::styled(
                format!(
                    "{}{:<id_w$} ",
                    if here { "▸" } else { " " },
                    truncate(&row.id, id_w)
                ),
                base,
            ),
            Span::styled(
                format!(
                    "{:<question_w$}",
                    truncate(&row.question.replace('\n', " "), question_w)
                ),
                if here { base } else { t.dim },
            ),
        ];
        for (ai, c) in row.cells.iter().enumerate() {
            let style = if here && ai == r.arm {
                t.selected
            } else {
                status_style(t, c)
            };
            spans.push(Span::raw(" "));
            spans.push(Span::styled(
                format!("{:<ARM_WIDTH$}", truncate(&cell_text(c), ARM_WIDTH)),
                style,
            ));
        }
        lines.push(Line::from(spans));
    }
    if visible.is_empty() {
        lines.push(Line::styled(
            "  no question passes the filters (d v m f change them)",
            t.dim,
        ));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

fn detail_lines(t: &Theme, r: &ReviewState) -> Vec<Line<'static>> {
    let Some((ri, ai)) = r.selected() else {
        return Vec::new();
    };
    let row = &r.table.rows[ri];
    let c = &row.cells[ai];
    let label = row
        .label
        .as_ref()
        .map(|l| format!(" ({l})"))
        .unwrap_or_default();
    let mut what = vec![c.status.clone().unwrap_or_else(|| "not run yet".into())];
    if c.redirected {
        what.push("redirected".into());
    }
    if c.violation {
        what.push("violation".into());
    }
    match &c.mark {
        Some(m) => what.push(format!("marked {m}")),
        None => what.push("not marked".into()),
    }
    let mut second = vec![
        Span::styled(format!("{}: ", r.table.arms[ai]), t.title),
        Span::styled(what.join(", "), t.text),
    ];
    if let Some(n) = &c.note {
        second.push(Span::styled(format!(" — note: {n}"), t.dim));
    }
    let mut lines = vec![
        Line::from(vec![
            Span::styled(format!("{}{label}: ", row.id), t.title),
            Span::styled(row.question.replace('\n', " "), t.text),
        ]),
        Line::from(second),
    ];
    if let Some(e) = &row.expect {
        lines.push(Line::from(vec![
            Span::styled("expected: ", t.title),
            Span::styled(e.replace('\n', " "), t.text),
        ]));
    }
    // The answer's first lines, so the cell can be judged without opening it.
    if let Some(a) = c.answer.as_deref().filter(|a| !a.trim().is_empty()) {
        let text: Vec<&str> = a.lines().filter(|l| !l.trim().is_empty()).collect();
        lines.push(Line::from(vec![
            Span::styled("answer: ", t.title),
            Span::styled(text.join(" "), t.text),
        ]));
    }
    lines
}

/// The note prompt, when one is open.
pub fn note(app: &App, frame: &mut Frame) {
    let Some(input) = app.review.as_ref().and_then(|r| r.note.as_ref()) else {
        return;
    };
    let full = frame.area();
    let w = full.width.clamp(20, 72);
    let area = Rect::new(
        full.x + (full.width - w) / 2,
        full.y + full.height.saturating_sub(3) / 2,
        w,
        3.min(full.height),
    );
    frame.render_widget(Clear, area);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(app.theme.border_focus)
        .title(Span::styled(" Note ", app.theme.title))
        .title_bottom(Span::styled(" Enter saves · Esc cancels ", app.theme.dim));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    frame.render_widget(input, inner);
}
