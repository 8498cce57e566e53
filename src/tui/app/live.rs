//! The question being answered: its phase for the spinner line, the live turn and
//! requests built from the engine's `CoreEvent`s, and the commit when the run finishes.

use crate::engine::cancel::CancelToken;
use crate::engine::events::{CoreEvent, RequestSnapshot, ToolCallStatus};
use crate::host::transcript::{StepStatus, ToolKind, ToolStep, Turn, tool_kind, tool_summary};

use super::{App, Effect};

/// What a running question is doing, from the engine's events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Asked; the first request is not built yet.
    Starting,
    /// Request N was sent; nothing has come back yet (the model reads the prompt, or
    /// writes a tool call, which streams no event).
    Waiting(usize),
    /// Reasoning text streams.
    Thinking,
    /// Answer text streams.
    Writing,
    /// These tools run.
    Tools(Vec<String>),
    /// The tool calls ended; the next request is being built.
    NextRequest,
    /// The run finished; the answer is being committed.
    Saving,
}

impl Phase {
    /// The label next to the spinner.
    pub fn label(&self) -> String {
        match self {
            Phase::Starting => "starting…".into(),
            Phase::Waiting(1) => "waiting for the model (it reads the prompt first)…".into(),
            Phase::Waiting(n) => format!("waiting for the model (request {n})…"),
            Phase::Thinking => "the model is thinking…".into(),
            Phase::Writing => "writing the answer…".into(),
            Phase::Tools(names) => {
                let mut what: Vec<&str> = names.iter().map(|n| tool_activity(n)).collect();
                what.dedup();
                format!("{}…", what.join(", "))
            }
            Phase::NextRequest => "preparing the next request…".into(),
            Phase::Saving => "committing the answer…".into(),
        }
    }
}

/// What a running tool is doing, for the spinner line.
fn tool_activity(name: &str) -> &'static str {
    match tool_kind(name) {
        ToolKind::Search => "running search",
        ToolKind::Cite => "checking citations",
        ToolKind::Execute => "running the program",
        ToolKind::Other => "running a tool",
    }
}

/// A question being answered.
pub struct LiveRun {
    pub run_id: String,
    pub cancel: CancelToken,
    pub turn: Turn,
    pub requests: Vec<RequestSnapshot>,
    /// What it is doing now.
    pub phase: Phase,
    pub started: std::time::Instant,
    /// The model attempt waiting for its first bytes, when nothing came since.
    pub waiting: Option<Waiting>,
}

/// An attempt sent and not answered yet ([`CoreEvent::ModelWaiting`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Waiting {
    pub since: std::time::Instant,
    pub idle_timeout_secs: u64,
    pub retries_left: u32,
}

impl LiveRun {
    /// "waiting for the model: 35 s (idle timeout 120 s, will try once more)", once the
    /// model has been silent for [`WAITING_SHOWN_AFTER_SECS`](crate::engine::chat::WAITING_SHOWN_AFTER_SECS).
    pub fn waiting_note(&self) -> Option<String> {
        let w = self.waiting?;
        let waited = w.since.elapsed().as_secs();
        (waited >= crate::engine::chat::WAITING_SHOWN_AFTER_SECS)
            .then(|| crate::engine::chat::waiting_note(waited, w.idle_timeout_secs, w.retries_left))
    }
}

/// How the last question ended when it did not commit.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    Cancelled(String),
    Failed(String, String),
}

impl App {
    /// The conversation's owner committed the running question: `session` is the
    /// conversation with it, shown from now on.
    pub(super) fn committed(
        &mut self,
        run_id: String,
        session: std::sync::Arc<crate::session::Session>,
        deferred: bool,
    ) -> Vec<Effect> {
        self.session = session;
        if self.live.as_ref().is_some_and(|l| l.run_id == run_id) {
            self.live = None;
        }
        if deferred {
            self.notice = Some("the run paused for deferred tool calls".into());
        }
        self.rebuild();
        self.inspector.selected = None;
        self.ledger.selected = self.transcript.ledger.len().saturating_sub(1);
        self.ledger.in_chunks = false;
        self.select_latest_citation()
    }

    /// One engine event of the running question; events of other runs are dropped.
    pub(super) fn on_core(&mut self, ev: CoreEvent) -> Vec<Effect> {
        let Some(live) = &mut self.live else {
            return Vec::new();
        };
        if ev.run_id() != live.run_id {
            // A run we cancelled or replaced: newest wins.
            self.dirty = false;
            return Vec::new();
        }
        // Anything the run did ends a wait for the model.
        if !matches!(ev, CoreEvent::StateChanged { .. }) {
            live.waiting = None;
        }
        match ev {
            CoreEvent::ModelWaiting {
                idle_timeout_secs,
                retries_left,
                ..
            } => {
                live.waiting = Some(Waiting {
                    since: std::time::Instant::now(),
                    idle_timeout_secs,
                    retries_left,
                });
            }
            CoreEvent::RequestBuilt {
                snapshot, request, ..
            } => {
                live.phase = Phase::Waiting(request);
                live.turn.requests += 1;
                // What the reranker did for the search just answered: a failure stays
                // on the status bar until a search is reranked again (the inspector's
                // note on the tool return says more).
                if let Some(note) = snapshot
                    .raw
                    .last()
                    .into_iter()
                    .flat_map(crate::host::inspect::part_notes)
                    .flatten()
                    .last()
                {
                    self.rerank_warning = note.strip_prefix("warning: ").map(str::to_string);
                }
                live.requests.push(*snapshot);
                // The answer is the last request's text.
                live.turn.answer.clear();
                self.bump();
            }
            CoreEvent::ResponseReceived {
                request, tokens, ..
            } => {
                if let Some(s) = live.requests.iter_mut().rfind(|s| s.request == request) {
                    s.tokens = Some(tokens);
                }
                // The request's header changed: its inspector lines are drawn again.
                *self.inspector_cache.borrow_mut() = None;
                self.dirty = true;
            }
            CoreEvent::ResponseRestarted { request, .. } => {
                // The broken-off stream is asked for again: what it showed is void.
                live.turn.answer.clear();
                live.phase = Phase::Waiting(request);
                self.bump();
            }
            CoreEvent::TextDelta { text, .. } => {
                live.turn.answer.push_str(&text);
                live.phase = Phase::Writing;
                self.bump();
            }
            CoreEvent::ThinkingDelta { .. } => {
                if live.phase != Phase::Thinking {
                    live.phase = Phase::Thinking;
                    self.bump();
                } else {
                    self.dirty = false;
                }
            }
            CoreEvent::StateChanged { .. } => {}
            CoreEvent::ToolCallStarted {
                name,
                args,
                call_id,
                ..
            } => {
                match &mut live.phase {
                    Phase::Tools(names) => names.push(name.clone()),
                    phase => *phase = Phase::Tools(vec![name.clone()]),
                }
                live.turn.steps.push(ToolStep {
                    summary: tool_summary(&name, &args),
                    call_id,
                    name,
                    status: StepStatus::Running,
                    args,
                });
                self.bump();
            }
            CoreEvent::ToolCallFinished {
                call_id, outcome, ..
            } => {
                if let Some(step) = live.turn.steps.iter_mut().find(|s| s.call_id == call_id) {
                    step.status = match outcome {
                        ToolCallStatus::Ok | ToolCallStatus::Deferred => StepStatus::Ok,
                        ToolCallStatus::Failed | ToolCallStatus::Retry => StepStatus::Failed,
                    };
                    if let Phase::Tools(names) = &mut live.phase
                        && let Some(i) = names.iter().position(|n| *n == step.name)
                    {
                        names.remove(i);
                        if names.is_empty() {
                            live.phase = Phase::NextRequest;
                        }
                    }
                }
                self.bump();
            }
            // The conversation's owner commits the outcome and sends it (`committed`);
            // until then the answer stays on screen as it streamed.
            CoreEvent::RunFinished { .. } => {
                live.phase = Phase::Saving;
                self.bump();
            }
            CoreEvent::RunFailed { error, .. } => {
                let live = self.live.take().expect("checked above");
                self.error = Some(error.clone());
                self.ended = Some(Ended::Failed(live.turn.prompt, error));
                self.bump();
            }
            CoreEvent::RunCancelled { .. } => {
                let live = self.live.take().expect("checked above");
                self.ended = Some(Ended::Cancelled(live.turn.prompt));
                self.notice = Some("cancelled; nothing was committed".into());
                self.bump();
            }
        }
        Vec::new()
    }
}
