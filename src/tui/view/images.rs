//! Page images: the figures and page rasters of the selected evidence.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{pane_block, title};
use crate::tui::app::{App, ImageState, Pane};
use crate::tui::wrap::truncate;

/// Whether the figure or page `meta` went to the model in the selected request.
pub fn sent_in_selected(app: &App, chunk_id: &str, self_ref: Option<&str>) -> bool {
    let Some(i) = app.selected_request() else {
        return false;
    };
    let Some((_, s)) = app.request_at(i) else {
        return false;
    };
    let Some(self_ref) = self_ref else {
        return false;
    };
    let needle = format!("[{chunk_id}] ({self_ref})");
    s.compacted.iter().any(|m| {
        crate::host::inspect::part_texts(m)
            .iter()
            .any(|(_, text)| text.contains(&needle))
    })
}

pub fn render(app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let extra = app
        .images
        .target
        .as_ref()
        .map(|x| x.caption())
        .unwrap_or_default();
    let block = pane_block(
        app,
        Pane::Images,
        title(app, Pane::Images, truncate(&extra, 40)),
    );
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if app.images.target.is_none() {
        frame.render_widget(
            Paragraph::new(vec![
                Line::styled("Select a citation (conversation: ←/→)", t.dim),
                Line::styled("or a chunk (ledger: Enter) to see its", t.dim),
                Line::styled("figures and pages here.", t.dim),
            ]),
            inner,
        );
        return;
    }
    if app.images.items.is_empty() {
        let lines = if app.images.listed {
            vec![
                Line::styled("No figures or page images for this evidence", t.dim),
                Line::styled("(its document was stored without pictures).", t.dim),
            ]
        } else {
            vec![Line::styled("Loading the figures and pages…", t.dim)]
        };
        frame.render_widget(
            Paragraph::new(lines).wrap(ratatui::widgets::Wrap { trim: false }),
            inner,
        );
        return;
    }
    let list_h = (app.images.items.len() as u16)
        .min(3)
        .min(inner.height / 3)
        .max(1);
    let [list_area, image_area] =
        Layout::vertical([Constraint::Length(list_h), Constraint::Min(1)]).areas(inner);
    let sel = app.images.selected.min(app.images.items.len() - 1);
    let skip = sel.saturating_sub(list_h as usize - 1);
    let lines: Vec<Line> = app
        .images
        .items
        .iter()
        .enumerate()
        .skip(skip)
        .take(list_h as usize)
        .map(|(k, item)| {
            let sent = sent_in_selected(app, &item.meta.chunk_id, item.meta.self_ref.as_deref());
            let style = if k == sel { t.selected } else { t.text };
            let mut spans = vec![Span::styled(
                truncate(
                    &format!("{} {}", if k == sel { "▶" } else { " " }, item.meta.caption),
                    list_area.width.saturating_sub(8) as usize,
                ),
                style,
            )];
            if sent {
                spans.push(Span::styled(" sent", t.ok));
            }
            Line::from(spans)
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), list_area);
    let item = &app.images.items[sel];
    match &item.state {
        ImageState::Ready(p) => {
            frame.render_widget(ratatui_image::Image::new(p.as_ref()), image_area);
        }
        ImageState::Loading => frame.render_widget(
            Paragraph::new(Line::styled(
                format!("loading {}…", item.meta.caption),
                t.dim,
            )),
            image_area,
        ),
        ImageState::Failed(e) => frame.render_widget(
            Paragraph::new(vec![
                Line::styled(format!("[{}]", item.meta.caption), t.text),
                Line::styled(format!("cannot show this image: {e}"), t.error),
            ]),
            image_area,
        ),
    }
}
