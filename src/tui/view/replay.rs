//! The replay's screens: the popup choosing the changes, the progress while it runs, and
//! the two runs side by side (outcome, requests, tokens, latency, answers) over the
//! scrollable diff of what was sent.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};

use crate::host::replay::{Comparison, RunFigures, outcome};
use crate::tui::app::{App, REPLAY_TOGGLES, ReplayState};
use crate::tui::wrap::truncate;

use super::SPINNER;
use super::popups::centered;

fn block<'a>(app: &App, title: String, footer: &'a str) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(app.theme.border_focus)
        .title(Line::styled(format!(" {title} "), app.theme.title))
        .title_bottom(Line::styled(format!(" {footer} "), app.theme.dim))
}

/// Whether the replay covers the whole screen (its result).
pub fn full_screen(app: &App) -> bool {
    matches!(app.replay, Some(ReplayState::Shown { .. }))
}

/// The popup or the progress over the panes, or the result over everything.
pub fn render(app: &App, frame: &mut Frame) {
    let Some(state) = &app.replay else {
        return;
    };
    let t = &app.theme;
    let full = frame.area();
    match state {
        ReplayState::Choosing {
            question,
            prompt,
            flags,
        } => {
            let area = centered(full, 76, 12);
            let inner = area.width.saturating_sub(4) as usize;
            let mut toggles = vec![Vec::new(), Vec::new()];
            for (i, (k, flag)) in REPLAY_TOGGLES.iter().enumerate() {
                let on = format!(" {flags} ").contains(&format!(" {flag} "));
                let spans = &mut toggles[i / 2];
                spans.push(Span::styled(format!("alt-{k} "), t.key));
                spans.push(Span::styled(
                    format!("{}{flag:<24}", if on { "■ " } else { "□ " }),
                    if on { t.selected } else { t.text },
                ));
            }
            let [first, second] = [toggles.remove(0), toggles.remove(0)];
            let lines = vec![
                Line::styled(truncate(prompt, inner), t.user),
                Line::default(),
                Line::styled(
                    "Changes: ask's flags (--no-policy, --no-compaction, --eager,",
                    t.dim,
                ),
                Line::styled(
                    "--capability NAME, --model M, --model-url URL, --search-limit N)",
                    t.dim,
                ),
                Line::from(vec![
                    Span::styled("> ", t.key),
                    Span::styled(flags.clone(), t.text),
                    Span::styled("█", t.dim),
                ]),
                Line::default(),
                Line::from(first),
                Line::from(second),
                Line::default(),
                Line::styled(
                    "Runs again from the state it started from; the session stays as it is.",
                    t.dim,
                ),
            ];
            frame.render_widget(Clear, area);
            frame.render_widget(
                Paragraph::new(lines)
                    .wrap(Wrap { trim: false })
                    .block(block(
                        app,
                        format!("Replay question {question}"),
                        "Enter runs · ctrl-u clears · Esc closes",
                    )),
                area,
            );
        }
        ReplayState::Running {
            question, flags, ..
        } => {
            let area = centered(full, 64, 5);
            let changes = if flags.is_empty() {
                "no changes"
            } else {
                flags
            };
            let lines = vec![
                Line::from(vec![
                    Span::styled(
                        format!("{} ", SPINNER[app.spinner % SPINNER.len()]),
                        t.running,
                    ),
                    Span::styled(format!("replaying question {question}"), t.text),
                ]),
                Line::styled(
                    truncate(&format!("with {changes}"), area.width as usize - 4),
                    t.dim,
                ),
            ];
            frame.render_widget(Clear, area);
            frame.render_widget(
                Paragraph::new(lines).block(block(app, "Replay".into(), "Esc cancels")),
                area,
            );
        }
        ReplayState::Shown {
            replayed,
            diff_lines,
            scroll,
            saved,
            saving,
        } => shown(
            app,
            frame,
            &replayed.comparison,
            (*scroll, *diff_lines),
            saved.as_deref(),
            *saving,
        ),
    }
}

fn outcome_style(app: &App, f: &RunFigures) -> Style {
    match f.outcome.as_str() {
        "grounded" => app.theme.grounded,
        "ungrounded" => app.theme.ungrounded,
        _ => app.theme.missing,
    }
}

/// The two runs side by side over the diff.
fn shown(
    app: &App,
    frame: &mut Frame,
    c: &Comparison,
    (scroll, total): (usize, usize),
    saved: Option<&std::path::Path>,
    saving: bool,
) {
    let t = &app.theme;
    let area = frame.area();
    frame.render_widget(Clear, area);
    let answers_h = if area.height >= 40 { 8 } else { 4 };
    let [head, table, answers, diff, foot] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(8),
        Constraint::Length(answers_h),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    let w = area.width as usize;
    let changes = if c.changes.is_empty() {
        "no changes"
    } else {
        &c.changes
    };
    frame.render_widget(
        Paragraph::new(vec![
            Line::from(vec![
                Span::styled(format!(" Replay of question {} ", c.question), t.title),
                Span::styled(
                    truncate(&format!("with {changes}"), w.saturating_sub(24)),
                    t.key,
                ),
            ]),
            Line::from(vec![
                Span::styled(truncate(&format!(" {}", c.prompt), w), t.user),
                Span::styled(
                    c.knowledge_base
                        .as_deref()
                        .map(|kb| {
                            truncate(
                                &format!(" · knowledge base {kb}"),
                                w.saturating_sub(c.prompt.chars().count() + 1),
                            )
                        })
                        .unwrap_or_default(),
                    t.dim,
                ),
            ]),
        ]),
        head,
    );
    let (o, r) = (&c.original, &c.replay);
    let col = (w.saturating_sub(14)) / 2;
    let row = |name: &str, a: String, b: String, sa: Style, sb: Style| {
        Line::from(vec![
            Span::styled(format!(" {name:<13}"), t.dim),
            Span::styled(format!("{:<col$}", truncate(&a, col.saturating_sub(1))), sa),
            Span::styled(truncate(&b, col), sb),
        ])
    };
    let differs = |a: &str, b: &str| if a == b { t.text } else { t.changed };
    let mut lines = vec![row(
        "",
        "original".into(),
        "replay".into(),
        t.title,
        t.title,
    )];
    lines.push(row(
        "outcome",
        outcome(o),
        outcome(r),
        outcome_style(app, o),
        outcome_style(app, r),
    ));
    let figures: [(&str, String, String); 5] = [
        ("requests", o.requests.to_string(), r.requests.to_string()),
        (
            "tokens sent",
            format!("{} (raw {})", o.sent_tokens, o.raw_tokens),
            format!("{} (raw {})", r.sent_tokens, r.raw_tokens),
        ),
        (
            "provider in",
            o.input_tokens.to_string(),
            r.input_tokens.to_string(),
        ),
        (
            "provider out",
            o.output_tokens.to_string(),
            r.output_tokens.to_string(),
        ),
        (
            "latency",
            format!("{} ms", o.latency_ms),
            format!("{} ms", r.latency_ms),
        ),
    ];
    for (name, a, b) in figures {
        let s = differs(&a, &b);
        let latency = name == "latency";
        lines.push(row(name, a, b, t.text, if latency { t.text } else { s }));
    }
    frame.render_widget(Paragraph::new(lines), table);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(answers);
    for (rect, title, text) in [
        (left, "original answer", &o.answer),
        (right, "replay answer", &r.answer),
    ] {
        frame.render_widget(
            Paragraph::new(text.as_str())
                .style(t.assistant)
                .wrap(Wrap { trim: false })
                .block(
                    Block::default()
                        .borders(Borders::TOP)
                        .border_style(t.border)
                        .title(Line::styled(format!(" {title} "), t.dim)),
                ),
            rect,
        );
    }
    let diff_lines: Vec<Line> = if c.diff.is_empty() {
        vec![Line::styled("both runs sent the same", t.dim)]
    } else {
        c.diff
            .lines()
            .skip(scroll)
            .take(diff.height as usize)
            .map(|l| {
                let style = if l.starts_with("@@") {
                    t.key
                } else if l.starts_with('+') {
                    t.grounded
                } else if l.starts_with('-') {
                    t.failed
                } else {
                    t.text
                };
                Line::styled(l.to_string(), style)
            })
            .collect()
    };
    frame.render_widget(
        Paragraph::new(diff_lines).block(
            Block::default()
                .borders(Borders::TOP)
                .border_style(t.border)
                .title(Line::styled(
                    format!(
                        " what was sent (original → replay) · line {}/{} ",
                        (scroll + 1).min(total),
                        total
                    ),
                    t.dim,
                )),
        ),
        diff,
    );
    let footer = match (saved, saving) {
        (Some(p), _) => format!(" saved to {} · Esc closes", p.display()),
        (None, true) => " saving… ".into(),
        (None, false) => " s save beside the session · d/Esc discard · ↑/↓ PgUp/PgDn scroll".into(),
    };
    let line = match (&app.error, saved) {
        (Some(e), None) => Line::styled(truncate(&format!(" {e}"), w), t.error),
        _ => Line::styled(truncate(&footer, w), t.status),
    };
    frame.render_widget(Paragraph::new(line), foot);
}
