//! Rendering: pure functions of `&App` (plus the frame). The only state written is the
//! wrap cache and nothing the app depends on; layout rectangles come from `layout`.

pub mod conversation;
pub mod explore_text;
pub mod explorer;
pub mod grounding;
pub mod images;
pub mod inspector;
pub mod ledger;
pub mod popups;
pub mod replay;
pub mod review;
pub mod status;

use ratatui::Frame;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders};

use super::app::{App, Areas, Pane};
use super::theme::Theme;

/// Below this width only the focused pane is shown (with a tab bar).
pub const WIDE: u16 = 140;

/// Where everything goes in a frame of `area`.
pub fn layout(app: &App, area: Rect) -> (Rect, Areas, Rect, Option<Rect>) {
    let input_h = (app.input.lines().len() as u16).clamp(1, 6) + 2;
    let [header, body, input, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(input_h),
        Constraint::Length(1),
    ])
    .areas(area);
    let mut areas = Areas {
        input,
        ..Areas::default()
    };
    let zoomed = app.zoom || area.width < WIDE;
    if zoomed {
        let shown = match app.focus {
            Pane::Input => Pane::Conversation,
            p => p,
        };
        match shown {
            Pane::Conversation | Pane::Input => areas.conversation = body,
            Pane::Inspector => areas.inspector = body,
            Pane::Ledger => areas.ledger = body,
            Pane::Images => areas.images = body,
        }
        return (header, areas, status, Some(body));
    }
    let [left, right] = Layout::horizontal([
        Constraint::Percentage(app.split),
        Constraint::Percentage(100 - app.split),
    ])
    .areas(body);
    let [top, bottom] =
        Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(right);
    let [ledger, images] = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Percentage(60), Constraint::Percentage(40)])
        .areas(bottom);
    areas.conversation = left;
    areas.inspector = top;
    areas.ledger = ledger;
    areas.images = images;
    (header, areas, status, None)
}

/// Draws the whole app. Call `layout` first and store its areas in the app. Every secret
/// the redactor knows is masked on the screen, wherever a pane put it.
pub fn render(app: &App, frame: &mut Frame) {
    render_panes(app, frame);
    mask_secrets(frame.buffer_mut());
}

/// Overwrites every secret [`crate::errors::secret_spans`] finds on the screen with
/// `<redacted>` (cut or padded with `*` to the secret's width): on each row, and across
/// each break where a pane's text wrapped onto the next row (between the same borders),
/// so a wrapped `Bearer …` is found too.
pub fn mask_secrets(buf: &mut ratatui::buffer::Buffer) {
    let area = buf.area;
    let row = |y: u16| -> Vec<(u16, u16)> { (area.left()..area.right()).map(|x| (x, y)).collect() };
    for y in area.top()..area.bottom() {
        mask_cells(buf, &row(y));
    }
    // A wrapped line: a run of cells between borders, continued by the same run below.
    for y in area.top()..area.bottom().saturating_sub(1) {
        for (x0, x1) in runs(buf, y) {
            if !runs(buf, y + 1).contains(&(x0, x1)) {
                continue;
            }
            let mut cells: Vec<(u16, u16)> = Vec::new();
            let upper: Vec<(u16, u16)> = (x0..x1).map(|x| (x, y)).collect();
            let keep = upper
                .iter()
                .rposition(|&c| !buf[c].symbol().trim().is_empty())
                .map_or(0, |i| i + 1);
            cells.extend(&upper[..keep]);
            let lower: Vec<(u16, u16)> = (x0..x1).map(|x| (x, y + 1)).collect();
            let skip = lower
                .iter()
                .position(|&c| !buf[c].symbol().trim().is_empty())
                .unwrap_or(lower.len());
            let split = cells.len();
            cells.extend(&lower[skip..]);
            for joint in [" ", ""] {
                mask_joined(buf, &cells, split, joint);
            }
        }
    }
}

/// The runs of cells on row `y` between box-drawing characters (pane borders).
fn runs(buf: &ratatui::buffer::Buffer, y: u16) -> Vec<(u16, u16)> {
    let area = buf.area;
    let is_border = |x: u16| {
        buf[(x, y)]
            .symbol()
            .chars()
            .next()
            .is_some_and(|c| ('\u{2500}'..='\u{257f}').contains(&c))
    };
    let mut out = Vec::new();
    let mut start = None;
    for x in area.left()..=area.right() {
        let border = x == area.right() || is_border(x);
        match (start, border) {
            (None, false) => start = Some(x),
            (Some(s), true) => {
                if x - s > 1 {
                    out.push((s, x));
                }
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Masks the secrets in the text of `cells`, `joint` inserted before cell `split`.
fn mask_joined(buf: &mut ratatui::buffer::Buffer, cells: &[(u16, u16)], split: usize, joint: &str) {
    let mut text = String::new();
    let mut starts = Vec::with_capacity(cells.len());
    for (i, &c) in cells.iter().enumerate() {
        if i == split {
            text.push_str(joint);
        }
        starts.push(text.len());
        text.push_str(buf[c].symbol());
    }
    mask_spans(buf, cells, &text, &starts);
}

/// Masks the secrets in the text of `cells` (one row).
fn mask_cells(buf: &mut ratatui::buffer::Buffer, cells: &[(u16, u16)]) {
    let mut text = String::new();
    let mut starts = Vec::with_capacity(cells.len());
    for &c in cells {
        starts.push(text.len());
        text.push_str(buf[c].symbol());
    }
    mask_spans(buf, cells, &text, &starts);
}

/// Masks each secret in `text`, cell `i` of `cells` starting at byte `starts[i]`. (A
/// secret already masked reads `<redacted>…` and is not found again.)
fn mask_spans(
    buf: &mut ratatui::buffer::Buffer,
    cells: &[(u16, u16)],
    text: &str,
    starts: &[usize],
) {
    for span in crate::errors::secret_spans(text) {
        let mask = crate::errors::REDACTED
            .chars()
            .chain(std::iter::repeat('*'));
        let hit = (0..cells.len()).filter(|&i| span.contains(&starts[i]));
        for (i, ch) in hit.zip(mask) {
            buf[cells[i]].set_char(ch);
        }
    }
}

fn render_panes(app: &App, frame: &mut Frame) {
    if replay::full_screen(app) {
        replay::render(app, frame);
        app.theme.paint_base(frame.buffer_mut());
        return;
    }
    if app.review.as_ref().is_some_and(|r| r.showing_table) {
        review::render(app, frame);
        return;
    }
    if let Some(ex) = &app.explorer {
        explorer::render(app, ex, frame);
        popups::render(app, frame);
        replay::render(app, frame);
        if app.grounding.view.is_some() {
            grounding::render(app, frame, frame.area());
        }
        app.theme.paint_base(frame.buffer_mut());
        return;
    }
    let (header, areas, status_area, zoomed) = layout(app, frame.area());
    status::header(app, frame, header, zoomed.is_some());
    if areas.conversation.area() > 0 {
        conversation::render(app, frame, areas.conversation);
    }
    if areas.inspector.area() > 0 {
        inspector::render(app, frame, areas.inspector);
    }
    if areas.ledger.area() > 0 {
        ledger::render(app, frame, areas.ledger);
    }
    if areas.images.area() > 0 {
        images::render(app, frame, areas.images);
    }
    status::input(app, frame, areas.input);
    status::status_bar(app, frame, status_area);
    popups::render(app, frame);
    replay::render(app, frame);
    review::note(app, frame);
    if app.grounding.view.is_some() {
        grounding::render(app, frame, frame.area());
    }
    // The theme's colours assume its own background: paint it wherever none is set.
    app.theme.paint_base(frame.buffer_mut());
}

/// A pane's block: rounded border, highlighted when focused, title with a key hint.
pub fn pane_block<'a>(app: &App, pane: Pane, title: Line<'a>) -> Block<'a> {
    let focused = app.focus == pane;
    let t: &Theme = &app.theme;
    Block::default()
        .borders(Borders::ALL)
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Rounded
        })
        .border_style(if focused { t.border_focus } else { t.border })
        .title(title)
}

/// `Title` plus dim extra text.
pub fn title<'a>(app: &App, pane: Pane, extra: String) -> Line<'a> {
    let mut spans = vec![Span::styled(format!(" {} ", pane.title()), app.theme.title)];
    if !extra.is_empty() {
        spans.push(Span::styled(format!("{extra} "), app.theme.dim));
    }
    Line::from(spans)
}

/// Owns a line of borrowed text.
pub fn owned(line: Line<'_>) -> Line<'static> {
    let mut l = Line::from(
        line.spans
            .into_iter()
            .map(|s| Span::styled(s.content.into_owned(), s.style))
            .collect::<Vec<_>>(),
    );
    l.style = line.style;
    l
}

/// Markdown as styled lines (tui-markdown), owned.
pub fn markdown(text: &str) -> Vec<Line<'static>> {
    tui_markdown::from_str(text)
        .lines
        .into_iter()
        .map(owned)
        .collect()
}

/// Plain text lines in one style.
pub fn plain(text: &str, style: Style) -> Vec<Line<'static>> {
    text.lines()
        .map(|l| Line::styled(l.to_string(), style))
        .collect()
}

pub const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
