//! The request inspector: the stored history beside what was sent, message by message,
//! with rewritten parts marked; or a unified diff.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{pane_block, title};
use crate::engine::events::RequestSnapshot;
use crate::engine::tokens::{TokenReport, signed, thousands};
use crate::host::inspect::{PartMark, align, unified_diff};
use crate::tui::app::{App, Pane};
use crate::tui::keymap::Action;
use crate::tui::theme::Theme;
use crate::tui::wrap::{truncate, wrap_line};

/// Lines shown per unchanged part before it is cut (capsules are never cut).
const PART_LINES: usize = 6;

fn mark_style(t: &Theme, m: PartMark) -> Style {
    match m {
        PartMark::Same => t.dim,
        PartMark::Capsule => t.capsule,
        PartMark::Receipt => t.receipt,
        PartMark::StrippedPicture => t.stripped,
        PartMark::Redirect => t.redirect,
        PartMark::Changed | PartMark::Added | PartMark::Removed => t.changed,
    }
}

/// Marks the selected capsule entry's first line (`selected_entry_line` finds it).
const ENTRY_MARK: &str = "▶";

/// Whether `raw` is the first line of the capsule entry of chunk `id`.
fn is_entry_line(raw: &str, id: Option<&str>) -> bool {
    id.is_some_and(|id| {
        raw.strip_prefix('[')
            .and_then(|r| r.strip_prefix(id))
            .is_some_and(|r| r.starts_with("] Source: "))
    })
}

/// A part's text as wrapped lines of `width`, cut after `max` lines. In a capsule, the
/// first line of the entry of chunk `selected` is marked.
fn part_lines(
    t: &Theme,
    text: &str,
    width: u16,
    max: usize,
    capsule: bool,
    selected: Option<&str>,
) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    for raw in text.lines() {
        if capsule && is_entry_line(raw, selected) {
            out.extend(wrap_line(
                &Line::from(Span::styled(format!("{ENTRY_MARK}{raw}"), t.selected)),
                width,
            ));
            continue;
        }
        // In a capsule, chunk-id headers and group labels stand out.
        let style = if capsule
            && (raw.starts_with('[') || raw.starts_with("##") || raw.starts_with("Group"))
        {
            t.key
        } else {
            t.text
        };
        out.extend(wrap_line(&Line::styled(raw.to_string(), style), width));
    }
    if out.len() > max {
        let more = out.len() - max;
        out.truncate(max);
        out.push(Line::styled(format!("… (+{more} lines)"), t.dim));
    }
    out
}

/// What the provider reported for a request beside the counted figure.
fn provider_line(t: &Theme, k: &TokenReport) -> Line<'static> {
    match (k.provider_prompt, k.provider_completion, k.difference) {
        (Some(p), Some(c), Some(d)) => Line::from(vec![
            Span::styled("provider ", t.dim),
            Span::styled(format!("{} in", thousands(p)), t.text),
            Span::styled(" · ", t.dim),
            Span::styled(format!("{} out", thousands(c)), t.text),
            Span::styled(
                format!(
                    "  diff {} ({:+.0}%) vs counted",
                    signed(d),
                    k.difference_pct().unwrap_or(0.0)
                ),
                t.dim,
            ),
        ]),
        _ => Line::styled("provider: no usage reported (yet)", t.dim),
    }
}

/// The header of a request: numbers, tokens and saving, tools, instructions.
fn header(
    app: &App,
    i: usize,
    n: usize,
    recorded: bool,
    s: &RequestSnapshot,
    balance: &crate::host::inspect::CompactionBalance,
    width: u16,
) -> Vec<Line<'static>> {
    let t = &app.theme;
    // The counted figures (instructions and tool schemas included) when the request was
    // counted; the chars/4 estimate of messages and instructions otherwise.
    let (raw, sent, counter) = match &s.tokens {
        Some(k) => (k.raw, k.sent, format!(" tok ({})", k.counter)),
        None => (s.raw_tokens.total, s.compacted_tokens.total, String::new()),
    };
    let saved = raw as i64 - sent as i64;
    let pct = if raw > 0 {
        saved as f64 * 100.0 / raw as f64
    } else {
        0.0
    };
    // A judge's request: which question's claims it checked, and the verdict it gave.
    let judged = s
        .run_id
        .strip_prefix("verify:")
        .and_then(|q| q.parse::<u64>().ok());
    let run = match judged {
        Some(q) => {
            let number = app
                .transcript
                .turns
                .iter()
                .position(|t| t.question == q)
                .map_or_else(|| "?".into(), |k| (k + 1).to_string());
            let model = app.checks.get(&q).map_or("", |v| v.judge.as_str());
            format!(
                "  judge {model} · claims of question {number}, #{} of the check",
                s.request
            )
        }
        None => format!(
            "  run {} · #{} of its run",
            s.run_id.chars().take(8).collect::<String>(),
            s.request
        ),
    };
    let mut lines = vec![Line::from(vec![
        Span::styled(format!("request {}/{n}", i + 1), t.title),
        Span::styled(run, t.dim),
    ])];
    if let Some(claim) = judged.and_then(|q| {
        let v = app.checks.get(&q)?;
        v.claims.iter().find(|c| c.request == Some(s.request - 1))
    }) {
        lines.extend(wrap_line(
            &Line::from(vec![
                Span::styled("verdict ", t.dim),
                Span::styled(
                    format!("{} {}", claim.verdict.glyph(), claim.verdict.label()),
                    t.verdict(claim.verdict),
                ),
                Span::styled(format!(" — {}", claim.reason), t.text),
            ]),
            width,
        ));
    }
    // The knowledge base its question read has changed since (documents added, replaced,
    // deleted): a replay or a grounding now reads another one.
    let question = match judged {
        Some(_) => None,
        None => crate::host::transcript::question_starts(&s.raw)
            .last()
            .copied(),
    };
    if let Some(c) = question.and_then(|q| app.kb_changes.get(&(q as u64))) {
        lines.push(Line::styled(
            format!("knowledge base changed since this question: {c}"),
            t.ungrounded,
        ));
    }
    if recorded {
        lines.push(Line::from(vec![
            Span::styled("tokens ", t.dim),
            Span::styled(format!("raw {}", thousands(raw as u64)), t.text),
            Span::styled(" → ", t.dim),
            Span::styled(format!("sent {}", thousands(sent as u64)), t.text),
            Span::styled(counter, t.dim),
            if saved >= 0 {
                Span::styled(
                    format!("  saved {} ({pct:.0}%)", thousands_signed(saved)),
                    if saved > 0 { t.ok } else { t.dim },
                )
            } else {
                // Compaction made this request larger than the history it stands for.
                Span::styled(
                    format!("  grew by {} (+{:.0}%)", thousands_signed(-saved), -pct),
                    t.ungrounded,
                )
            },
        ]));
        if !balance.is_empty() {
            let style = if saved < 0 { t.ungrounded } else { t.dim };
            for l in crate::tui::wrap::wrap_line(&Line::styled(balance.explain(), style), width) {
                lines.push(l);
            }
        }
    } else {
        lines.push(Line::styled(
            format!("tokens raw {raw}; reconstructed from history: what was sent was not recorded"),
            t.ungrounded,
        ));
    }
    if let Some(k) = &s.tokens {
        lines.push(provider_line(t, k));
    }
    let tools: Vec<&str> = s.tools.iter().map(|x| x.name.as_str()).collect();
    let tools_label = match &s.tokens {
        Some(k) if !tools.is_empty() => format!("tools ({} tok) ", thousands(k.tools as u64)),
        _ => "tools ".to_string(),
    };
    lines.push(Line::from(vec![
        Span::styled(tools_label, t.dim),
        Span::styled(
            truncate(
                &if tools.is_empty() {
                    "-".to_string()
                } else {
                    tools.join(", ")
                },
                width as usize,
            ),
            t.text,
        ),
    ]));
    let first = s
        .instructions
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("-");
    lines.push(Line::from(vec![
        Span::styled(
            format!(
                "instructions ({} tok) ",
                s.tokens
                    .as_ref()
                    .map_or(s.compacted_tokens.instructions, |k| k.instructions)
            ),
            t.dim,
        ),
        Span::styled(truncate(first, (width as usize).saturating_sub(22)), t.text),
    ]));
    // Notices injected for this request only stand out, whether or not the
    // instructions are shown in full.
    for line in s.instructions.lines() {
        let Some(at) = line.find("Notice:") else {
            continue;
        };
        let l = Line::from(vec![
            Span::styled(" notice ", t.receipt),
            Span::raw(" "),
            Span::styled(line[at..].to_string(), t.text),
        ]);
        lines.extend(wrap_line(&l, width));
    }
    if app.inspector.instructions {
        for raw in s.instructions.lines() {
            let style = if raw.contains("Notice:") {
                t.running
            } else {
                t.dim
            };
            lines.extend(wrap_line(&Line::styled(format!("  {raw}"), style), width));
        }
    } else {
        lines.push(Line::styled(
            format!(
                "  ({} lines of instructions; {} shows them)",
                s.instructions.lines().count(),
                app.keymap
                    .hint(crate::tui::keymap::Action::ToggleInstructions)
            ),
            t.dim,
        ));
    }
    lines
}

fn side_by_side(
    app: &App,
    rows: Vec<crate::host::inspect::MessageRow>,
    width: u16,
) -> Vec<Line<'static>> {
    let t = &app.theme;
    let selected = app.selected_capsule_entry().map(|e| e.chunk_id);
    let col = (width.saturating_sub(3) / 2).max(8);
    let mut out = vec![Line::from(vec![
        Span::styled(
            format!("{:<w$}", "stored history", w = col as usize),
            t.title,
        ),
        Span::styled(" │ ", t.border),
        Span::styled("sent to the model", t.title),
    ])];
    for row in rows {
        let head = |tok: Option<usize>| match tok {
            Some(n) => format!("#{} {} · {n} tok", row.index, row.role),
            None => format!("#{} —", row.index),
        };
        let differs = row.parts.iter().any(|p| p.mark != PartMark::Same);
        let hs = if differs { t.running } else { t.dim };
        out.push(Line::from(vec![
            Span::styled(
                format!(
                    "{:<w$}",
                    truncate(&head(row.raw_tokens), col as usize),
                    w = col as usize
                ),
                hs,
            ),
            Span::styled(" │ ", t.border),
            Span::styled(head(row.sent_tokens), hs),
        ]));
        for p in &row.parts {
            let capsule = p.mark == PartMark::Capsule;
            let max = if capsule { usize::MAX } else { PART_LINES };
            let badge = |side: &str| -> Line<'static> {
                let mut spans = vec![Span::styled(
                    format!(" {} ", truncate(&p.kind, col as usize - 2)),
                    t.dim.add_modifier(Modifier::BOLD),
                )];
                if side == "sent" && p.mark != PartMark::Same {
                    spans.push(Span::styled(
                        format!(" {} ", p.mark.label()),
                        mark_style(t, p.mark),
                    ));
                }
                Line::from(spans)
            };
            let mut left = p
                .raw
                .as_ref()
                .map(|x| {
                    let mut v = vec![badge("raw")];
                    if let Some(note) = &p.note {
                        // What the reranker did for this search (tool return metadata).
                        let style = if note.starts_with("warning:") {
                            t.failed
                        } else {
                            t.key
                        };
                        v.extend(wrap_line(&Line::styled(format!("↻ {note}"), style), col));
                    }
                    v.extend(part_lines(
                        t,
                        x,
                        col,
                        max.min(if capsule { PART_LINES } else { max }),
                        false,
                        None,
                    ));
                    v
                })
                .unwrap_or_default();
            let mut right = p
                .sent
                .as_ref()
                .map(|x| {
                    let mut v = vec![badge("sent")];
                    v.extend(part_lines(t, x, col, max, capsule, selected.as_deref()));
                    v
                })
                .unwrap_or_default();
            let h = left.len().max(right.len());
            left.resize(h, Line::raw(""));
            right.resize(h, Line::raw(""));
            let edge = mark_style(t, p.mark);
            for (l, r) in left.into_iter().zip(right) {
                let lw = l.width();
                let mut spans: Vec<Span<'static>> = l.spans;
                spans.push(Span::raw(" ".repeat((col as usize).saturating_sub(lw))));
                spans.push(Span::styled(
                    if p.mark == PartMark::Same {
                        " │ "
                    } else {
                        " ┃ "
                    },
                    if p.mark == PartMark::Same {
                        t.border
                    } else {
                        edge
                    },
                ));
                spans.extend(r.spans);
                out.push(Line::from(spans));
            }
        }
    }
    out
}

fn diff_lines(app: &App, s: &RequestSnapshot, width: u16) -> Vec<Line<'static>> {
    let t = &app.theme;
    let selected = app.selected_capsule_entry().map(|e| e.chunk_id);
    unified_diff(s)
        .lines()
        .flat_map(|l| {
            // A sent line `+    [<id>] Source: ...` opens the selected capsule entry.
            if let Some(rest) = l.strip_prefix("+    ")
                && is_entry_line(rest, selected.as_deref())
            {
                return wrap_line(
                    &Line::from(Span::styled(format!("{ENTRY_MARK}{l}"), t.selected)),
                    width,
                );
            }
            let style = if l.starts_with("+++") || l.starts_with("---") {
                t.title
            } else if l.starts_with('+') {
                t.ok
            } else if l.starts_with('-') {
                t.failed
            } else if l.starts_with("@@") {
                t.key
            } else {
                t.dim
            };
            wrap_line(&Line::styled(l.to_string(), style), width)
        })
        .collect()
}

/// Every line of the inspector for the selected request at inner width `width`.
pub fn lines(app: &App, width: u16) -> Vec<Line<'static>> {
    let n = app.request_count();
    let Some(i) = app.selected_request() else {
        return vec![Line::styled(
            "No model requests yet. Ask a question, or open a session.",
            app.theme.dim,
        )];
    };
    let Some((recorded, s)) = app.request_at(i) else {
        return Vec::new();
    };
    // Aligned once: the header's compaction balance and the side-by-side view read it.
    let rows = align(s);
    let balance =
        crate::host::inspect::CompactionBalance::from_rows(&rows, app.capsule_entries().len());
    let mut out = header(app, i, n, recorded, s, &balance, width);
    out.push(Line::raw(""));
    if app.inspector.diff {
        out.extend(diff_lines(app, s, width));
    } else {
        out.extend(side_by_side(app, rows, width));
    }
    out
}

/// [`lines`], cached: a request's snapshot never changes once recorded (its provider
/// figures arrive with its response, which clears the cache).
pub fn cached_lines(app: &App, width: u16) -> std::rc::Rc<Vec<Line<'static>>> {
    let Some(i) = app.selected_request() else {
        return std::rc::Rc::new(lines(app, width));
    };
    let key = (
        i,
        width,
        app.inspector.diff,
        app.inspector.instructions,
        app.theme.name,
        app.inspector.entry,
    );
    if let Some((k, l)) = app.inspector_cache.borrow().as_ref()
        && *k == key
    {
        return l.clone();
    }
    let l = std::rc::Rc::new(lines(app, width));
    *app.inspector_cache.borrow_mut() = Some((key, l.clone()));
    l
}

/// The index, among the inspector's lines at `width`, of the selected capsule entry's
/// first line.
pub fn selected_entry_line(app: &App, width: u16) -> Option<usize> {
    app.inspector.entry?;
    let t = &app.theme;
    cached_lines(app, width).iter().position(|l| {
        l.spans
            .iter()
            .any(|s| s.style == t.selected && s.content.starts_with(ENTRY_MARK))
    })
}

pub fn render(app: &App, frame: &mut Frame, area: Rect) {
    let w = area.width.saturating_sub(2).max(1);
    let all = cached_lines(app, w);
    let height = area.height.saturating_sub(2) as usize;
    let top = app.inspector.scroll.min(all.len().saturating_sub(height));
    let visible: Vec<Line<'static>> = all.iter().skip(top).take(height).cloned().collect();
    let mode = if app.inspector.diff {
        "diff"
    } else {
        "side by side"
    };
    let k = |a| app.keymap.hint(a);
    let hint = format!(
        "{mode} · {}/{} requests · {} toggles",
        k(Action::PrevRequest),
        k(Action::NextRequest),
        k(Action::ToggleDiff)
    );
    let mut block = pane_block(app, Pane::Inspector, title(app, Pane::Inspector, hint));
    // The footer: the capsule's entries, and what the keys do with the selected one.
    let entries = app.capsule_entries();
    let footer = match app.inspector.entry {
        Some(e) if e < entries.len() => Some(format!(
            " capsule entry {}/{} · {} grounding · {} chunk · {}/{} entries · {} unselect ",
            e + 1,
            entries.len(),
            k(Action::VisualGrounding),
            k(Action::Select),
            k(Action::NextCapsuleEntry),
            k(Action::PrevCapsuleEntry),
            k(Action::Back)
        )),
        _ if !entries.is_empty() => Some(format!(
            " capsule: {} {} · {}/{} select one ",
            entries.len(),
            if entries.len() == 1 {
                "entry"
            } else {
                "entries"
            },
            k(Action::NextCapsuleEntry),
            k(Action::PrevCapsuleEntry)
        )),
        _ => None,
    };
    if let Some(f) = footer {
        block = block.title_bottom(Line::styled(
            truncate(&f, area.width.saturating_sub(2) as usize),
            app.theme.dim,
        ));
    }
    frame.render_widget(Paragraph::new(visible).block(block), area);
}

/// `saved` with thousands separators, a minus when negative.
fn thousands_signed(n: i64) -> String {
    if n < 0 {
        format!("-{}", thousands(n.unsigned_abs()))
    } else {
        thousands(n as u64)
    }
}
