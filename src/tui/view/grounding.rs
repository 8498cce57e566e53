//! The visual grounding view: the selected evidence's page rasters with its items
//! outlined (matched items in orange, expansion context in yellow), one page at a time.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};

use crate::host::grounding::NO_PAGE_IMAGES;
use crate::tui::app::{App, GroundingState};
use crate::tui::wrap::truncate;

pub fn render(app: &App, frame: &mut Frame, area: Rect) {
    let Some(view) = &app.grounding.view else {
        return;
    };
    let t = &app.theme;
    let uri = match &view.state {
        GroundingState::Ready(p) => p.document_uri.as_str(),
        _ => view.target.source.as_str(),
    };
    let title = truncate(
        &format!(" Visual Grounding - {uri} "),
        area.width.saturating_sub(4) as usize,
    );
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Thick)
        .border_style(t.border_focus)
        .title(Line::styled(title, t.title));
    let inner = block.inner(area);
    frame.render_widget(Clear, area);
    frame.render_widget(block, area);
    let [status_area, image_area] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(inner);
    let width = status_area.width as usize;
    match &view.state {
        GroundingState::Loading => frame.render_widget(
            Paragraph::new(Line::styled(
                truncate(
                    &format!(
                        "{} outlining the items of chunk {} on its pages… {} s",
                        super::SPINNER[app.spinner % super::SPINNER.len()],
                        view.target.chunk_id,
                        view.started.elapsed().as_secs()
                    ),
                    width,
                ),
                t.running,
            )),
            status_area,
        ),
        GroundingState::Failed(e) => {
            let lines = if let Some(rest) = e.strip_prefix(&format!("{NO_PAGE_IMAGES}: ")) {
                vec![
                    Line::styled(NO_PAGE_IMAGES, t.error),
                    Line::styled(truncate(rest, width), t.text),
                ]
            } else {
                vec![Line::styled(e.clone(), t.error)]
            };
            frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: true }), inner);
        }
        GroundingState::Ready(p) => {
            let n = p.pages.len();
            let i = view.page.min(n.saturating_sub(1));
            let Some(page) = p.pages.get(i) else {
                return;
            };
            let status = Line::from(vec![
                Span::styled(format!("Page {}/{n} - Use ←/→ to navigate", i + 1), t.text),
                Span::styled(
                    truncate(
                        &format!(
                            " · page {} · {} matched (orange, tinted) · {} · {} next match · {} {}{} · Esc closes",
                            page.page_no,
                            page.matched,
                            if view.context {
                                format!(
                                    "{} context (yellow, {} hides)",
                                    page.context,
                                    app.keymap.hint(crate::tui::keymap::Action::ToggleContext)
                                )
                            } else {
                                format!(
                                    "context hidden ({} shows)",
                                    app.keymap.hint(crate::tui::keymap::Action::ToggleContext)
                                )
                            },
                            app.keymap.hint(crate::tui::keymap::Action::NextMatch),
                            app.keymap.hint(crate::tui::keymap::Action::Zoom),
                            view.zoom.label(),
                            if view.zoom == crate::tui::app::Zoom::Page {
                                ""
                            } else {
                                ", ↑/↓ scroll"
                            },
                        ),
                        width.saturating_sub(32),
                    ),
                    t.dim,
                ),
            ]);
            frame.render_widget(Paragraph::new(status), status_area);
            // Zoomed in: the page drawn so, once drawn; the whole page until then.
            let drawn = view
                .zoomed
                .as_ref()
                .filter(|z| z.at == (i, view.zoom, view.step))
                .map(|z| z.drawn.as_ref());
            frame.render_widget(
                ratatui_image::Image::new(drawn.unwrap_or(page.protocol.as_ref())),
                image_area,
            );
        }
    }
}
