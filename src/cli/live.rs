//! `ask` on a terminal, as it happens: the answer's text on stdout as it streams, each
//! tool call as a short row on stderr, and while the model says nothing a status line
//! on stderr (when stderr is a terminal) with the time waited and the tokens sent, and
//! after 10 s the wait as every face says it ([`waiting_note`]). Pipes and `--json` get
//! the whole answer at once instead (see `ask`).

use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedReceiver;

use crate::engine::chat::{WAITING_SHOWN_AFTER_SECS, waiting_note};
use crate::engine::events::{CoreEvent, ToolCallStatus};
use crate::terminal_text::strip_controls;

/// What the terminal was shown of the run.
#[derive(Debug, Default)]
pub struct Shown {
    /// The text streamed for the run's last request (the answer, when it was streamed).
    pub last_text: String,
    /// Whether the cursor stands at the start of a line on stdout.
    pub at_line_start: bool,
}

/// The wait being shown on the status line.
struct Wait {
    since: Instant,
    idle_timeout_secs: u64,
    retries_left: u32,
}

struct Printer {
    status_on_stderr: bool,
    /// Whether a status line is drawn on stderr now (to clear before anything else).
    status_drawn: bool,
    started: Instant,
    request: usize,
    sent_tokens: usize,
    last_event: Instant,
    wait: Option<Wait>,
    shown: Shown,
    /// Streamed text not printed yet: an escape sequence whose end has not arrived (it
    /// is stripped whole once it has).
    held: String,
}

/// How much of `s` can be printed now: all of it, unless it ends inside an escape
/// sequence (then up to its ESC).
fn printable(s: &str) -> usize {
    if let Some(i) = s.rfind('\x1b') {
        let tail = &s[i + 1..];
        let complete = match tail.chars().next() {
            None => false,
            Some('[') => tail[1..].chars().any(|c| ('@'..='~').contains(&c)),
            Some(']') => tail.contains('\x07'),
            Some(_) => true,
        };
        if !complete && tail.len() < 256 {
            return i;
        }
    }
    s.len()
}

impl Printer {
    fn clear_status(&mut self) {
        if self.status_drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.status_drawn = false;
        }
    }

    fn end_text_line(&mut self) {
        if !self.shown.at_line_start {
            let mut out = crate::errors::stdout();
            let _ = writeln!(out);
            self.shown.at_line_start = true;
        }
    }

    fn text(&mut self, text: &str) {
        self.shown.last_text.push_str(text);
        self.held.push_str(text);
        let upto = printable(&self.held);
        let ready: String = self.held.drain(..upto).collect();
        self.print(&ready);
    }

    /// Prints what is held back, whatever it is (the request or the run is over).
    fn release(&mut self) {
        let rest = std::mem::take(&mut self.held);
        self.print(&rest);
    }

    fn print(&mut self, text: &str) {
        let clean = strip_controls(text);
        if clean.is_empty() {
            return;
        }
        self.clear_status();
        let mut out = crate::errors::stdout();
        let _ = write!(out, "{clean}");
        let _ = out.flush();
        if let Some(c) = clean.chars().last() {
            self.shown.at_line_start = c == '\n';
        }
    }

    fn row(&mut self, line: &str) {
        self.release();
        self.clear_status();
        self.end_text_line();
        crate::errors::say!("{}", strip_controls(line));
    }

    /// The status line: "⋯ 12 s · request 2 · 1,234 tokens sent", or the wait for a
    /// silent model once it lasted 10 s.
    fn draw_status(&mut self) {
        if !self.status_on_stderr || !self.shown.at_line_start {
            return;
        }
        let silent = self.last_event.elapsed();
        if silent < Duration::from_secs(1) && self.wait.is_none() {
            return;
        }
        let line = match &self.wait {
            Some(w) if w.since.elapsed().as_secs() >= WAITING_SHOWN_AFTER_SECS => waiting_note(
                w.since.elapsed().as_secs(),
                w.idle_timeout_secs,
                w.retries_left,
            ),
            _ => format!(
                "⋯ {} s · request {} · {} tokens sent",
                self.started.elapsed().as_secs(),
                self.request.max(1),
                self.sent_tokens
            ),
        };
        let mut err = crate::errors::stderr();
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
        self.status_drawn = true;
    }

    fn on(&mut self, ev: CoreEvent) {
        self.last_event = Instant::now();
        if !matches!(
            ev,
            CoreEvent::StateChanged { .. } | CoreEvent::ModelWaiting { .. }
        ) {
            self.wait = None;
        }
        match ev {
            CoreEvent::RequestBuilt {
                request, snapshot, ..
            } => {
                self.request = request;
                self.sent_tokens = snapshot.compacted_tokens.total;
                // The text before was not the answer (tools followed, or it was asked
                // again): it stays on screen, and the next request's text starts anew.
                self.release();
                if !self.shown.last_text.is_empty() {
                    self.clear_status();
                    self.end_text_line();
                }
                self.shown.last_text.clear();
            }
            CoreEvent::ModelWaiting {
                idle_timeout_secs,
                retries_left,
                ..
            } => {
                self.wait = Some(Wait {
                    since: Instant::now(),
                    idle_timeout_secs,
                    retries_left,
                });
            }
            CoreEvent::ResponseRestarted { .. } => {
                self.row("(the answer broke off; asked again)");
                self.shown.last_text.clear();
            }
            CoreEvent::TextDelta { text, .. } => self.text(&text),
            CoreEvent::ToolCallStarted { name, args, .. } => {
                let summary = crate::host::transcript::tool_summary(&name, &args);
                self.row(&format!("  ↳ {name} {summary}"));
            }
            CoreEvent::ToolCallFinished {
                outcome: ToolCallStatus::Failed | ToolCallStatus::Retry,
                summary,
                ..
            } => {
                let first = summary.lines().next().unwrap_or_default();
                self.row(&format!("    ✗ {first}"));
            }
            _ => {}
        }
    }
}

/// Whether `ask` streams to this terminal: stdout is one, and no `--json`.
pub fn streams(json: bool) -> bool {
    !json && std::io::stdout().is_terminal()
}

/// Prints the run's events as they come until the run ends (every sender dropped).
pub async fn print(mut events: UnboundedReceiver<CoreEvent>) -> Shown {
    let now = Instant::now();
    let mut p = Printer {
        status_on_stderr: std::io::stderr().is_terminal(),
        status_drawn: false,
        started: now,
        request: 0,
        sent_tokens: 0,
        last_event: now,
        wait: None,
        shown: Shown {
            last_text: String::new(),
            at_line_start: true,
        },
        held: String::new(),
    };
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Some(ev) => p.on(ev),
                None => break,
            },
            _ = tick.tick() => p.draw_status(),
        }
    }
    p.release();
    p.clear_status();
    p.shown
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn an_escape_sequence_cut_between_deltas_is_held_until_it_ends() {
        assert_eq!(printable("plain text"), 10);
        assert_eq!(printable("Safe\x1b["), 4);
        assert_eq!(printable("Safe\x1b[2"), 4);
        assert_eq!(printable("Safe\x1b[2J ans"), 12);
        assert_eq!(printable("a\x1b]0;pwn"), 1);
        assert_eq!(printable("a\x1b]0;pwned\x07 b"), 13);
        assert_eq!(printable("a\x1b"), 1);
    }
}
