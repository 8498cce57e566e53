//! The header line, the question input and the status bar.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use crate::tui::app::{App, Pane};
use crate::tui::keymap::Action;
use crate::tui::wrap::truncate;

pub fn header(app: &App, frame: &mut Frame, area: Rect, zoomed: bool) {
    let t = &app.theme;
    let session = app
        .session_path
        .as_ref()
        .and_then(|p| p.file_name())
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_else(|| "unsaved session".into());
    let mut spans = vec![
        Span::styled(" Groundwork ", t.title),
        Span::styled(format!("· {session} "), t.dim),
    ];
    if app.scripted_demo() {
        spans.push(Span::styled(" SCRIPTED DEMO ", t.receipt));
        spans.push(Span::raw(" "));
    }
    if zoomed {
        for p in [
            Pane::Conversation,
            Pane::Inspector,
            Pane::Ledger,
            Pane::Images,
        ] {
            let shown = app.focus == p || (app.focus == Pane::Input && p == Pane::Conversation);
            spans.push(Span::styled(
                format!(" {} ", p.title()),
                if shown { t.selected } else { t.dim },
            ));
        }
    }
    spans.push(Span::styled(
        format!(
            " {} help · {} commands",
            app.keymap.hint(Action::Help),
            app.keymap.hint(Action::Palette)
        ),
        t.dim,
    ));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

pub fn input(app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let focused = app.focus == Pane::Input && app.popup.is_none();
    let mut hints = format!(
        " Enter sends · Ctrl-J newline · {} attach image ",
        app.keymap.hint(Action::AttachImage)
    );
    if !app.attachments.is_empty() {
        hints.push_str(&format!("· {} attached ", app.attachments.len()));
    }
    if app.running() {
        hints = format!(
            " answering… {} cancels ",
            app.keymap.hint(Action::Interrupt)
        );
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(if focused { t.border_focus } else { t.border })
        .title(Line::styled(" ❯ Question ", t.title))
        .title_bottom(Line::styled(hints, t.dim));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    frame.render_widget(&app.input, inner);
    if focused {
        let c = app.input.screen_cursor();
        frame.set_cursor_position((
            inner.x + (c.col as u16).min(inner.width.saturating_sub(1)),
            inner.y + (c.row as u16).min(inner.height.saturating_sub(1)),
        ));
    }
}

pub fn status_bar(app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let sep = Span::styled(" │ ", t.dim);
    let mut caps = app.host.capabilities.clone();
    if app.options.compaction {
        caps.push("compaction".into());
    }
    if app.options.policy {
        caps.push("policy".into());
    }
    let (searches, execs) = app.budget_use();
    let mut spans = vec![
        Span::styled(format!(" db {}", truncate(&app.host.db, 28)), t.status),
        sep.clone(),
        Span::styled(
            format!("model {}", truncate(&app.host.model, 30)),
            if app.host.model_ready {
                t.status
            } else {
                t.ungrounded
            },
        ),
        sep.clone(),
        Span::styled(caps.join("+"), t.status),
        sep.clone(),
        Span::styled(
            format!("searches {searches}/{}", app.host.max_searches),
            t.status,
        ),
    ];
    if execs > 0 {
        spans.push(Span::styled(
            format!(" exec {execs}/{}", app.host.max_executions),
            t.status,
        ));
    }
    if let Some(filter) = app.document_filter() {
        spans.push(sep.clone());
        spans.push(Span::styled(
            format!("filter {}", truncate(&filter, 20)),
            t.running,
        ));
    }
    if let Some(i) = app
        .selected_request()
        .or(app.request_count().checked_sub(1))
        && let Some((_, s)) = app.request_at(i)
    {
        spans.push(sep.clone());
        spans.push(Span::styled(
            format!(
                "req {} tok {}→{}",
                i + 1,
                s.raw_tokens.total,
                s.compacted_tokens.total
            ),
            t.status,
        ));
    }
    if let Some(e) = &app.error {
        spans.push(sep.clone());
        spans.push(Span::styled(e.replace('\n', " "), t.error));
    } else if let Some(n) = &app.notice {
        spans.push(sep);
        spans.push(Span::styled(n.clone(), t.running));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)).style(t.status), area);
}
