//! The one event enum that flows from the engine to the UI (STYLE §2.1, §2.3).
//!
//! Events go out through a `tokio::sync::mpsc::UnboundedSender<CoreEvent>` the host
//! passes in, so the engine never waits for the UI. A closed receiver is ignored.
//! Every event carries the run id and the index of the model request it belongs to
//! (1-based; 0 for events before the first request), so a UI can drop events of runs
//! it has cancelled or replaced.

use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::mpsc::UnboundedSender;

use super::capability::ToolDef;
use super::chat::{estimate_message_tokens, estimate_tokens};
use super::messages::{ModelMessage, RequestUsage};
use super::tokens::TokenReport;

/// Token estimate (chars/4, see [`estimate_tokens`]) of one message list.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct TokenCounts {
    /// Sum of the messages plus the instructions.
    pub total: usize,
    /// The instructions alone.
    pub instructions: usize,
    /// One entry per message.
    pub per_message: Vec<usize>,
}

impl TokenCounts {
    /// Estimates `messages` sent with `instructions`.
    pub fn estimate(instructions: &str, messages: &[ModelMessage]) -> Self {
        let per_message = messages.iter().map(estimate_message_tokens).collect();
        TokenCounts::of(estimate_tokens(instructions), per_message)
    }

    /// The counts of instructions of `instructions` tokens and messages of `per_message`.
    pub fn of(instructions: usize, per_message: Vec<usize>) -> Self {
        TokenCounts {
            total: instructions + per_message.iter().sum::<usize>(),
            instructions,
            per_message,
        }
    }
}

/// The estimates of one run's requests, remembered message by message: each request
/// sends the history before it again. A message is known by its allocation, which the
/// memory holds on to, so a message changed in place (copy on write) is a new one.
#[derive(Debug, Default)]
pub struct EstimateMemo(std::collections::HashMap<usize, (ModelMessage, usize)>);

impl EstimateMemo {
    /// [`TokenCounts::estimate`], estimating only the messages not seen before.
    pub fn estimate(&mut self, instructions: &str, messages: &[ModelMessage]) -> TokenCounts {
        let per_message: Vec<usize> = messages
            .iter()
            .map(|m| {
                self.0
                    .entry(m.identity())
                    .or_insert_with(|| (m.clone(), estimate_message_tokens(m)))
                    .1
            })
            .collect();
        TokenCounts::of(estimate_tokens(instructions), per_message)
    }

    /// The estimate of `message` when this memory made it (of that very allocation,
    /// which the memory holds, so no other message can be taken for it).
    pub fn get(&self, message: &ModelMessage) -> Option<usize> {
        self.0
            .get(&message.identity())
            .filter(|(kept, _)| kept.identity() == message.identity())
            .map(|(_, estimate)| *estimate)
    }
}

/// Everything about one model request: what the history held (`raw`) and what was
/// actually sent after `wrap_model_request` (`compacted`).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct RequestSnapshot {
    /// The run.
    pub run_id: String,
    /// 1-based request index within the run.
    pub request: usize,
    /// The stored history at this request.
    pub raw: Vec<ModelMessage>,
    /// The messages sent.
    pub compacted: Vec<ModelMessage>,
    /// The tools offered.
    pub tools: Vec<ToolDef>,
    /// The instructions sent.
    pub instructions: String,
    /// Estimate for `raw`.
    pub raw_tokens: TokenCounts,
    /// Estimate for `compacted`.
    pub compacted_tokens: TokenCounts,
    /// Counted by the agent's token counter (instructions, tool schemas and messages)
    /// and, once answered, what the provider reported; `None` in sessions written before
    /// counting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenReport>,
}

/// Usage summed over a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct RunUsage {
    /// Model requests made.
    pub requests: usize,
    /// Tool calls executed.
    pub tool_calls: usize,
    /// Summed token counters as the endpoint reported them.
    pub tokens: RequestUsage,
}

/// How a tool call ended, for display.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    /// Success.
    Ok,
    /// Terminal failure (tool return with outcome `failed`).
    Failed,
    /// Retry prompt.
    Retry,
    /// Deferred to a later run.
    Deferred,
}

/// The run's output, for display.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputSummary {
    /// A text answer.
    Text {
        /// The answer.
        text: String,
    },
    /// An output tool's arguments.
    Tool {
        /// The tool.
        tool_name: String,
        /// Its arguments.
        args: Value,
    },
    /// Paused for deferred tool calls.
    Deferred {
        /// The call ids waiting for results.
        call_ids: Vec<String>,
    },
}

/// Engine → UI.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum CoreEvent {
    /// A request is about to be sent.
    RequestBuilt {
        /// The run.
        run_id: String,
        /// 1-based request index.
        request: usize,
        /// Raw vs. sent messages, tools, instructions and token estimates.
        snapshot: Box<RequestSnapshot>,
    },
    /// The response being streamed broke off and is asked for again: the text and
    /// reasoning streamed so far for this request are void.
    ResponseRestarted {
        /// The run.
        run_id: String,
        /// Request index.
        request: usize,
    },
    /// An attempt of request `request` was sent; nothing has come back yet. Faces show
    /// the wait ([`crate::engine::chat::waiting_note`]) until the next event of the run.
    ModelWaiting {
        /// The run.
        run_id: String,
        /// Request index.
        request: usize,
        /// The idle timeout that ends the attempt.
        idle_timeout_secs: u64,
        /// Attempts left after this one if it times out.
        retries_left: u32,
    },
    /// A response arrived: the request's token figures with the provider's usage.
    ResponseReceived {
        /// The run.
        run_id: String,
        /// Request index.
        request: usize,
        /// The figures.
        tokens: TokenReport,
    },
    /// Streamed answer text.
    TextDelta {
        /// The run.
        run_id: String,
        /// Request index.
        request: usize,
        /// The new text.
        text: String,
    },
    /// Streamed reasoning text.
    ThinkingDelta {
        /// The run.
        run_id: String,
        /// Request index.
        request: usize,
        /// The new text.
        text: String,
    },
    /// A tool call starts.
    ToolCallStarted {
        /// The run.
        run_id: String,
        /// Request index whose response asked for the call.
        request: usize,
        /// Tool name.
        name: String,
        /// Arguments as sent by the model.
        args: String,
        /// Call id.
        call_id: String,
    },
    /// A tool call finished.
    ToolCallFinished {
        /// The run.
        run_id: String,
        /// Request index whose response asked for the call.
        request: usize,
        /// Call id.
        call_id: String,
        /// How it ended.
        outcome: ToolCallStatus,
        /// The first 200 characters of the result or message.
        summary: String,
    },
    /// The run's state copy changed (after `for_run`, after each tool call, after
    /// `after_run`).
    StateChanged {
        /// The run.
        run_id: String,
        /// Request index.
        request: usize,
        /// The state.
        state: Map<String, Value>,
    },
    /// The run ended with a result.
    RunFinished {
        /// The run.
        run_id: String,
        /// Requests made.
        request: usize,
        /// The output.
        output: OutputSummary,
        /// The full history after the run.
        messages: Vec<ModelMessage>,
        /// The state after the run.
        state: Map<String, Value>,
        /// Usage.
        usage: Box<RunUsage>,
    },
    /// The run failed; the caller's history and state are untouched.
    RunFailed {
        /// The run.
        run_id: String,
        /// Requests made.
        request: usize,
        /// The error.
        error: String,
    },
    /// The run was cancelled; the caller's history and state are untouched.
    RunCancelled {
        /// The run.
        run_id: String,
        /// Requests made.
        request: usize,
    },
}

impl CoreEvent {
    /// The run the event belongs to.
    pub fn run_id(&self) -> &str {
        match self {
            CoreEvent::RequestBuilt { run_id, .. }
            | CoreEvent::TextDelta { run_id, .. }
            | CoreEvent::ResponseReceived { run_id, .. }
            | CoreEvent::ResponseRestarted { run_id, .. }
            | CoreEvent::ModelWaiting { run_id, .. }
            | CoreEvent::ThinkingDelta { run_id, .. }
            | CoreEvent::ToolCallStarted { run_id, .. }
            | CoreEvent::ToolCallFinished { run_id, .. }
            | CoreEvent::StateChanged { run_id, .. }
            | CoreEvent::RunFinished { run_id, .. }
            | CoreEvent::RunFailed { run_id, .. }
            | CoreEvent::RunCancelled { run_id, .. } => run_id,
        }
    }

    /// The request index the event belongs to.
    pub fn request(&self) -> usize {
        match self {
            CoreEvent::RequestBuilt { request, .. }
            | CoreEvent::TextDelta { request, .. }
            | CoreEvent::ResponseReceived { request, .. }
            | CoreEvent::ResponseRestarted { request, .. }
            | CoreEvent::ModelWaiting { request, .. }
            | CoreEvent::ThinkingDelta { request, .. }
            | CoreEvent::ToolCallStarted { request, .. }
            | CoreEvent::ToolCallFinished { request, .. }
            | CoreEvent::StateChanged { request, .. }
            | CoreEvent::RunFinished { request, .. }
            | CoreEvent::RunFailed { request, .. }
            | CoreEvent::RunCancelled { request, .. } => *request,
        }
    }
}

/// An optional event sender that never blocks and ignores a closed receiver.
#[derive(Debug, Clone, Default)]
pub struct EventSink(Option<UnboundedSender<CoreEvent>>);

impl EventSink {
    /// Sends to `tx`.
    pub fn new(tx: UnboundedSender<CoreEvent>) -> Self {
        EventSink(Some(tx))
    }

    /// Drops every event.
    pub fn none() -> Self {
        EventSink(None)
    }

    /// Sends one event.
    pub fn emit(&self, event: CoreEvent) {
        if let Some(tx) = &self.0 {
            let _ = tx.send(event);
        }
    }
}

impl From<UnboundedSender<CoreEvent>> for EventSink {
    fn from(tx: UnboundedSender<CoreEvent>) -> Self {
        EventSink::new(tx)
    }
}

impl From<Option<UnboundedSender<CoreEvent>>> for EventSink {
    fn from(tx: Option<UnboundedSender<CoreEvent>>) -> Self {
        EventSink(tx)
    }
}

/// Shortens `text` to `max` characters for summaries.
pub(crate) fn summarize(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut s: String = text.chars().take(max).collect();
        s.push('…');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::messages::{ModelRequest, ModelRequestPart, SystemPromptPart};

    #[test]
    fn remembered_estimates_follow_a_message_changed_in_place() {
        let mut history = vec![ModelMessage::from(ModelRequest::user("short"))];
        let mut memo = EstimateMemo::default();
        let first = memo.estimate("", &history);
        assert_eq!(first, TokenCounts::estimate("", &history));
        // Changed in place (copy on write while the memory holds it): estimated again.
        history[0]
            .as_request_mut()
            .unwrap()
            .parts
            .push(ModelRequestPart::SystemPrompt(SystemPromptPart::new(
                "a much longer system prompt than the question before it",
            )));
        let second = memo.estimate("be brief", &history);
        assert_eq!(second, TokenCounts::estimate("be brief", &history));
        assert!(second.per_message[0] > first.per_message[0]);
    }
}
