//! An in-memory [`ChatModel`]: scripted turns (text, thinking, tool calls with any
//! argument string, finish reasons, stream deltas, errors, a turn that waits for
//! cancellation), and a record of every request it received. Tests of the agent loop
//! use it instead of the scripted HTTP server, so they exercise the loop and nothing
//! of the client.
//!
//! Tool-call ids are `call_<turn>_<i>` (turn 1-based, `i` the call's position), as the
//! scripted server makes them; every turn reports 11 input and 7 output tokens.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use groundwork::engine::agent::{Agent, AgentBuilder};
use groundwork::engine::cancel::CancelToken;
use groundwork::engine::capability::ToolDef;
use groundwork::engine::chat::{BoxFuture, ChatModel, ModelError, ModelRequestParams, StreamDelta};
use groundwork::engine::messages::{
    ModelMessage, ModelResponse, ModelResponsePart, RequestUsage, TextPart, ThinkingPart,
    ToolCallPart,
};
use serde_json::Value;

/// The model name the memory model reports.
pub const MEMORY_MODEL: &str = "memory-model";

/// One scripted answer.
#[derive(Debug)]
pub struct Turn {
    kind: TurnKind,
    deltas: Option<Vec<StreamDelta>>,
    finish_reason: Option<String>,
    delay: Option<Duration>,
}

#[derive(Debug)]
enum TurnKind {
    Answer {
        thinking: Option<String>,
        text: Option<String>,
        calls: Vec<(String, String)>,
    },
    Fail(ModelError),
    /// Streams the deltas, then waits until the run is cancelled.
    Hang,
}

impl Turn {
    fn answer(text: Option<String>, calls: Vec<(String, String)>) -> Self {
        Turn {
            kind: TurnKind::Answer {
                thinking: None,
                text,
                calls,
            },
            deltas: None,
            finish_reason: None,
            delay: None,
        }
    }

    /// A text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Turn::answer(Some(text.into()), Vec::new())
    }

    /// One tool call with JSON arguments.
    pub fn tool_call(name: impl Into<String>, args: Value) -> Self {
        Turn::tool_call_raw(name, args.to_string())
    }

    /// One tool call whose argument string is kept verbatim (may be invalid JSON).
    pub fn tool_call_raw(name: impl Into<String>, args: impl Into<String>) -> Self {
        Turn::answer(None, vec![(name.into(), args.into())])
    }

    /// A failed request.
    pub fn error(error: ModelError) -> Self {
        Turn {
            kind: TurnKind::Fail(error),
            ..Turn::text("")
        }
    }

    /// A request that streams its deltas (see [`Turn::deltas`]) and then waits until
    /// the run is cancelled.
    pub fn hang() -> Self {
        Turn {
            kind: TurnKind::Hang,
            ..Turn::text("")
        }
    }

    /// Adds another tool call (JSON arguments).
    pub fn and_tool_call(self, name: impl Into<String>, args: Value) -> Self {
        self.and_tool_call_raw(name, args.to_string())
    }

    /// Adds another tool call with a verbatim argument string.
    pub fn and_tool_call_raw(mut self, name: impl Into<String>, args: impl Into<String>) -> Self {
        if let TurnKind::Answer { calls, .. } = &mut self.kind {
            calls.push((name.into(), args.into()));
        }
        self
    }

    /// Sets the answer text (a mix of text and tool calls).
    pub fn and_text(mut self, t: impl Into<String>) -> Self {
        if let TurnKind::Answer { text, .. } = &mut self.kind {
            *text = Some(t.into());
        }
        self
    }

    /// Adds reasoning text.
    pub fn with_thinking(mut self, t: impl Into<String>) -> Self {
        if let TurnKind::Answer { thinking, .. } = &mut self.kind {
            *thinking = Some(t.into());
        }
        self
    }

    /// The finish reason (`"length"` marks a cut-off answer).
    pub fn finish_reason(mut self, reason: impl Into<String>) -> Self {
        self.finish_reason = Some(reason.into());
        self
    }

    /// The stream deltas to report (default: thinking, then text, in pieces of four
    /// characters, then one delta per tool call).
    pub fn deltas(mut self, deltas: Vec<StreamDelta>) -> Self {
        self.deltas = Some(deltas);
        self
    }

    /// Waits this long before answering.
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = Some(d);
        self
    }
}

/// What one request carried.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The instructions.
    pub instructions: String,
    /// The messages sent (after `wrap_model_request`).
    pub messages: Vec<ModelMessage>,
    /// The tools offered.
    pub tools: Vec<ToolDef>,
}

impl Recorded {
    /// The names of the tools offered.
    pub fn tool_names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name.clone()).collect()
    }
}

#[derive(Debug, Default)]
struct Inner {
    turns: VecDeque<Turn>,
    requests: Vec<Recorded>,
}

/// The in-memory model. Clones share the script and the record.
#[derive(Debug, Clone, Default)]
pub struct MemoryModel {
    inner: Arc<Mutex<Inner>>,
}

impl MemoryModel {
    /// A model answering with `turns`, in order; once they run out, requests fail.
    pub fn new(turns: Vec<Turn>) -> Self {
        let model = MemoryModel::default();
        model.inner.lock().unwrap().turns = turns.into();
        model
    }

    /// Appends a turn to the script.
    pub fn push(&self, turn: Turn) {
        self.inner.lock().unwrap().turns.push_back(turn);
    }

    /// Turns not yet used.
    pub fn remaining(&self) -> usize {
        self.inner.lock().unwrap().turns.len()
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.lock().unwrap().requests.clone()
    }

    /// An agent builder over this model.
    pub fn agent(&self) -> AgentBuilder {
        Agent::builder(Arc::new(self.clone()))
    }
}

/// The response for `turn` (number `serial`), and its default deltas.
fn respond(
    serial: usize,
    thinking: Option<String>,
    text: Option<String>,
    calls: Vec<(String, String)>,
    finish_reason: Option<String>,
) -> (ModelResponse, Vec<StreamDelta>) {
    let mut parts = Vec::new();
    let mut deltas = Vec::new();
    let pieces = |s: &str| -> Vec<String> {
        let chars: Vec<char> = s.chars().collect();
        chars.chunks(4).map(|c| c.iter().collect()).collect()
    };
    if let Some(t) = thinking.filter(|t| !t.is_empty()) {
        deltas.extend(pieces(&t).into_iter().map(StreamDelta::Thinking));
        parts.push(ModelResponsePart::Thinking(ThinkingPart::new(t)));
    }
    if let Some(t) = text.filter(|t| !t.is_empty()) {
        deltas.extend(pieces(&t).into_iter().map(StreamDelta::Text));
        parts.push(ModelResponsePart::Text(TextPart::new(t)));
    }
    let has_calls = !calls.is_empty();
    for (i, (name, args)) in calls.into_iter().enumerate() {
        let id = format!("call_{serial}_{i}");
        deltas.push(StreamDelta::ToolCall {
            index: i,
            id: Some(id.clone()),
            name: Some(name.clone()),
            args: Some(args.clone()),
        });
        parts.push(ModelResponsePart::ToolCall(ToolCallPart::new(
            name, args, id,
        )));
    }
    let mut response = ModelResponse::new(parts);
    response.usage = RequestUsage {
        input_tokens: 11,
        output_tokens: 7,
        ..RequestUsage::default()
    };
    response.model_name = Some(MEMORY_MODEL.to_string());
    response.provider_name = Some("memory".to_string());
    response.provider_response_id = Some(format!("memory-{serial}"));
    response.finish_reason = Some(
        finish_reason.unwrap_or_else(|| if has_calls { "tool_call" } else { "stop" }.to_string()),
    );
    (response, deltas)
}

impl ChatModel for MemoryModel {
    fn model_name(&self) -> &str {
        MEMORY_MODEL
    }

    fn request<'a>(
        &'a self,
        params: ModelRequestParams<'a>,
        on_delta: &'a (dyn Fn(StreamDelta) + Send + Sync),
        cancel: &'a CancelToken,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let (turn, serial) = {
                let mut inner = self.inner.lock().unwrap();
                inner.requests.push(Recorded {
                    instructions: params.instructions.to_string(),
                    messages: params.messages.to_vec(),
                    tools: params.tools.to_vec(),
                });
                (inner.turns.pop_front(), inner.requests.len())
            };
            let Some(turn) = turn else {
                return Err(ModelError::Http {
                    url: "memory://".into(),
                    status: 500,
                    message: "script exhausted".into(),
                    retry_after: None,
                });
            };
            if let Some(d) = turn.delay {
                tokio::select! {
                    biased;
                    _ = cancel.cancelled() => return Err(ModelError::Cancelled),
                    _ = tokio::time::sleep(d) => {}
                }
            }
            match turn.kind {
                TurnKind::Fail(e) => Err(e),
                TurnKind::Hang => {
                    for d in turn.deltas.unwrap_or_default() {
                        on_delta(d);
                    }
                    cancel.cancelled().await;
                    Err(ModelError::Cancelled)
                }
                TurnKind::Answer {
                    thinking,
                    text,
                    calls,
                } => {
                    let (response, deltas) =
                        respond(serial, thinking, text, calls, turn.finish_reason);
                    for d in turn.deltas.unwrap_or(deltas) {
                        if cancel.is_cancelled() {
                            return Err(ModelError::Cancelled);
                        }
                        on_delta(d);
                    }
                    Ok(response)
                }
            }
        })
    }
}
