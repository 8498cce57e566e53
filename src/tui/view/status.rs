//! The header line, the question input and the status bar.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use crate::engine::tokens::{signed, thousands};
use crate::tui::app::{App, Pane};
use crate::tui::keymap::Action;
use crate::tui::wrap::{truncate, truncate_middle, truncate_start, width};

pub fn header(app: &App, frame: &mut Frame, area: Rect, zoomed: bool) {
    let t = &app.theme;
    let reviewed = app
        .review
        .as_ref()
        .filter(|r| !r.showing_table)
        .and_then(|r| {
            let (row, arm) = r.opened?;
            Some(format!(
                "review: {} in arm '{}'",
                r.table.rows.get(row)?.id,
                r.table.arms.get(arm)?
            ))
        });
    let session = reviewed.unwrap_or_else(|| {
        app.session_path
            .as_ref()
            .and_then(|p| p.file_name())
            .map(|f| f.to_string_lossy().to_string())
            .unwrap_or_else(|| "unsaved session".into())
    });
    // Full titles when they fit, else short ones, else without the help hint, else
    // without the session's name: every tab stays whole (at 80 columns the row was cut
    // after "Ci").
    let row = |short: bool, hint: bool, name: bool| {
        let mut spans = vec![Span::styled(" Groundwork ", t.title)];
        if name {
            spans.push(Span::styled(format!("· {session} "), t.dim));
        }
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
                let title = if short { p.short_title() } else { p.title() };
                spans.push(Span::styled(
                    format!(" {title} "),
                    if shown { t.selected } else { t.dim },
                ));
            }
        }
        if hint {
            spans.push(Span::styled(
                format!(
                    " {} help · {} commands",
                    app.keymap.hint(Action::Help),
                    app.keymap.hint(Action::Palette)
                ),
                t.dim,
            ));
        }
        Line::from(spans)
    };
    let fits = |l: &Line| l.width() <= area.width as usize;
    let line = [
        (false, true, true),
        (true, true, true),
        (true, false, true),
        (true, false, false),
    ]
    .into_iter()
    .map(|(short, hint, name)| row(short, hint, name))
    .find(fits)
    .unwrap_or_else(|| row(true, false, false));
    frame.render_widget(Paragraph::new(line), area);
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

/// How a field's text is shortened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// Keep the end (a path's file name).
    Start,
    /// A URL: its `host:port` when the whole does not fit, cut in the middle after that.
    Url,
    /// Keep the start.
    End,
    /// Keep whole `+`-joined items from the start (`rag+…`).
    Items,
}

/// One field of the status bar: `joiner` (the separator before it, or how it attaches
/// to the field before), a fixed `label`, and a `body` that may be shortened.
struct Field {
    joiner: &'static str,
    label: &'static str,
    body: String,
    style: ratatui::style::Style,
    cut: Cut,
    /// Columns the body gets.
    width: usize,
    shown: bool,
}

impl Field {
    fn new(
        joiner: &'static str,
        label: &'static str,
        body: String,
        style: ratatui::style::Style,
        cut: Cut,
    ) -> Self {
        Field {
            width: width(&body),
            joiner,
            label,
            body,
            style,
            cut,
            shown: true,
        }
    }

    fn text(&self) -> String {
        format!("{}{}", self.label, self.cut_body())
    }

    /// The body cut to `width` (cuts may come out narrower).
    fn cut_body(&self) -> String {
        match self.cut {
            Cut::Start => truncate_start(&self.body, self.width),
            Cut::Url => {
                let host = url_host(&self.body);
                if width(&self.body) <= self.width || width(host) > self.width {
                    truncate_middle(&self.body, self.width)
                } else {
                    host.to_string()
                }
            }
            Cut::End => truncate(&self.body, self.width),
            Cut::Items => cut_items(&self.body, self.width),
        }
    }
}

const SEP: &str = " │ ";

/// The `+`-joined items of `s` that fit `columns` with a closing `+…`.
fn cut_items(s: &str, columns: usize) -> String {
    if width(s) <= columns {
        return s.to_string();
    }
    let mut out = String::new();
    for item in s.split('+') {
        let next = if out.is_empty() {
            item.to_string()
        } else {
            format!("{out}+{item}")
        };
        if width(&next) + 2 > columns {
            break;
        }
        out = next;
    }
    if out.is_empty() {
        truncate(s, columns)
    } else {
        format!("{out}+…")
    }
}

/// `127.0.0.1:8080` of `http://127.0.0.1:8080/v1`.
fn url_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split('/').next().unwrap_or(rest)
}

/// `name @ url (found server)` (as `ModelChoice::describe` writes it) in its parts.
fn model_parts(model: &str) -> (&str, Option<&str>, Option<&str>) {
    let (rest, found) = match model.rfind(" (found ") {
        Some(i) if model.ends_with(')') => (&model[..i], Some(&model[i + 1..])),
        _ => (model, None),
    };
    match rest.split_once(" @ ") {
        Some((name, url)) => (name, Some(url), found),
        None => (rest, None, found),
    }
}

/// The status bar's spans for `columns` columns. Every field gets its natural width when
/// the bar fits; otherwise the less useful ones shrink or go first (request tokens,
/// notice, the model's URL, the database path, ...), and the model's name and where it
/// was found stay.
pub fn status_spans(app: &App, columns: usize) -> Vec<Span<'static>> {
    let t = &app.theme;
    let mut caps = app.host.capabilities.clone();
    if app.options.compaction {
        caps.push("compaction".into());
    }
    if app.options.policy {
        caps.push("policy".into());
    }
    let (searches, execs) = app.budget_use();
    let model_style = if app.host.model_ready {
        t.status
    } else {
        t.ungrounded
    };
    let (name, url, found) = model_parts(&app.host.model);
    let mut budget = format!("searches {searches}/{}", app.host.max_searches);
    if execs > 0 {
        budget.push_str(&format!(" exec {execs}/{}", app.host.max_executions));
    }
    // Indices into `fields`, for the shrinking order below.
    const DB: usize = 0;
    const MODEL: usize = 1;
    const URL: usize = 2;
    const FOUND: usize = 3;
    const CAPS: usize = 4;
    const BUDGET: usize = 5;
    const FILTER: usize = 6;
    const REQ: usize = 7;
    const MSG: usize = 8;
    const RERANK: usize = 9;
    let mut fields = vec![
        if app.host.collections.is_empty() {
            Field::new("", "db ", app.host.db.clone(), t.status, Cut::Start)
        } else {
            Field::new(
                "",
                "collections ",
                app.host.collections.join("+"),
                t.status,
                Cut::Items,
            )
        },
        Field::new(SEP, "model ", name.to_string(), model_style, Cut::End),
        Field::new(
            " @ ",
            "",
            url.unwrap_or_default().to_string(),
            model_style,
            Cut::Url,
        ),
        Field::new(
            " ",
            "",
            found.unwrap_or_default().to_string(),
            model_style,
            Cut::End,
        ),
        Field::new(SEP, "", caps.join("+"), t.status, Cut::Items),
        Field::new(SEP, "", budget, t.status, Cut::End),
        Field::new(
            SEP,
            "filter ",
            app.document_filter().unwrap_or_default(),
            t.running,
            Cut::End,
        ),
        Field::new(SEP, "", String::new(), t.status, Cut::End),
        Field::new(SEP, "", String::new(), t.error, Cut::End),
        Field::new(
            SEP,
            "⚠ ",
            app.rerank_warning.clone().unwrap_or_default(),
            t.error,
            Cut::End,
        ),
    ];
    fields[RERANK].shown = app.rerank_warning.is_some();
    fields[URL].shown = url.is_some();
    fields[FOUND].shown = found.is_some();
    fields[FILTER].shown = !fields[FILTER].body.is_empty();
    // The request field's short form: its columns without the provider's figure (and one
    // for the ellipsis); the whole field when it has none.
    let mut req_short = None;
    if let Some(i) = app
        .selected_request()
        .or(app.request_count().checked_sub(1))
        && let Some((_, s)) = app.request_at(i)
    {
        fields[REQ].body = match &s.tokens {
            // Counted (with its counter) beside what the provider reported.
            Some(k) => {
                let mut body = format!(
                    "req {} tok {}→{} ({})",
                    i + 1,
                    thousands(k.raw as u64),
                    thousands(k.sent as u64),
                    k.counter
                );
                if let (Some(p), Some(d)) = (k.provider_prompt, k.difference) {
                    req_short = Some(width(&body) + 1);
                    body.push_str(&format!(" provider {} ({})", thousands(p), signed(d)));
                }
                body
            }
            None => format!(
                "req {} tok {}→{}",
                i + 1,
                s.raw_tokens.total,
                s.compacted_tokens.total
            ),
        };
    }
    fields[REQ].width = width(&fields[REQ].body);
    fields[REQ].shown = !fields[REQ].body.is_empty();
    let is_error = app.error.is_some();
    if let Some(m) = app.error.clone().or(app.notice.clone()) {
        fields[MSG].body = m.replace('\n', " ");
        fields[MSG].width = width(&fields[MSG].body);
        if !is_error {
            fields[MSG].style = t.running;
        }
    } else if let Some(note) = app.live.as_ref().and_then(|l| l.waiting_note()) {
        fields[MSG].body = note;
        fields[MSG].width = width(&fields[MSG].body);
        fields[MSG].style = t.running;
    } else {
        fields[MSG].shown = false;
    }

    enum Step {
        /// Shorten the body down to this many columns (never below).
        Shrink(usize, usize),
        /// Cut the body to exactly this many columns (its short form).
        Compact(usize, usize),
        Drop(usize),
    }
    // A notice answers what the user just did, so the request's token figures (in the
    // inspector too) lose the provider's figure, then go, before it does.
    let req_short = req_short.unwrap_or(fields[REQ].width);
    let mut steps = vec![
        Step::Shrink(RERANK, 24),
        Step::Compact(REQ, req_short),
        Step::Drop(REQ),
    ];
    if !is_error {
        steps.extend([Step::Shrink(MSG, 12), Step::Drop(MSG)]);
    }
    steps.extend([
        Step::Shrink(URL, 14),
        Step::Shrink(DB, 14),
        Step::Shrink(FILTER, 10),
        Step::Shrink(CAPS, 5),
        Step::Drop(URL),
        Step::Drop(BUDGET),
        Step::Drop(FILTER),
        Step::Drop(CAPS),
        Step::Drop(RERANK),
        Step::Shrink(MSG, 16),
        Step::Drop(DB),
        Step::Shrink(MODEL, 8),
    ]);
    // The bar starts with one space.
    let total = |fields: &[Field]| -> usize {
        1 + fields
            .iter()
            .filter(|f| f.shown)
            .map(|f| width(f.joiner) + width(f.label) + f.width)
            .sum::<usize>()
    };
    for step in steps {
        let used = total(&fields);
        if used <= columns {
            break;
        }
        match step {
            Step::Shrink(i, min) => {
                let f = &mut fields[i];
                f.width = f.width.saturating_sub(used - columns).max(min.min(f.width));
                f.width = width(&f.cut_body());
            }
            Step::Compact(i, w) => {
                let f = &mut fields[i];
                f.width = w.min(f.width);
                f.width = width(&f.cut_body());
            }
            Step::Drop(i) => fields[i].shown = false,
        }
    }
    let mut spans = vec![Span::styled(" ", t.status)];
    let mut first = true;
    for f in fields.iter().filter(|f| f.shown) {
        if !first {
            spans.push(Span::styled(
                f.joiner,
                if f.joiner == SEP { t.dim } else { f.style },
            ));
        }
        first = false;
        spans.push(Span::styled(f.text(), f.style));
    }
    spans
}

pub fn status_bar(app: &App, frame: &mut Frame, area: Rect) {
    let spans = status_spans(app, area.width as usize);
    frame.render_widget(
        Paragraph::new(Line::from(spans)).style(app.theme.status),
        area,
    );
}
