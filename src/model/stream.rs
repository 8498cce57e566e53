//! Folding a streamed (or whole) chat completion into one [`ModelResponse`]: text,
//! reasoning (`reasoning_content` / `reasoning`) and tool-call fragments by index,
//! usage, the response id and the finish reason.

use serde_json::json;

use super::wire::{ChatChunk, WireUsage};
use crate::engine::chat::StreamDelta;
use crate::engine::messages::{
    ModelResponse, ModelResponsePart, RequestUsage, TextPart, ThinkingPart, ToolCallPart,
};

#[derive(Debug, Default)]
pub(super) struct PendingCall {
    pub(super) index: usize,
    pub(super) id: String,
    pub(super) name: String,
    pub(super) args: String,
}

/// Folds stream chunks into one response.
#[derive(Debug, Default)]
pub(super) struct StreamAccumulator {
    pub(super) id: Option<String>,
    pub(super) model: Option<String>,
    pub(super) text: String,
    pub(super) thinking: String,
    pub(super) calls: Vec<PendingCall>,
    pub(super) usage: Option<WireUsage>,
    pub(super) finish_reason: Option<String>,
    /// A chunk with `choices` (possibly empty) arrived.
    pub(super) saw_choice: bool,
    /// Any chunk arrived.
    pub(super) saw_event: bool,
}

impl StreamAccumulator {
    /// Adds a chunk; returns the deltas it carried.
    pub(super) fn push(&mut self, chunk: ChatChunk) -> Vec<StreamDelta> {
        let mut deltas = Vec::new();
        self.saw_event = true;
        if chunk.id.is_some() {
            self.id = chunk.id;
        }
        if chunk.model.is_some() {
            self.model = chunk.model;
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        let Some(choices) = chunk.choices else {
            return deltas;
        };
        // A usage-only chunk has `choices: []`; it still counts as a chat stream.
        self.saw_choice = true;
        for choice in choices {
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(r) = delta
                .reasoning_content
                .or(delta.reasoning)
                .filter(|r| !r.is_empty())
            {
                self.thinking.push_str(&r);
                deltas.push(StreamDelta::Thinking(r));
            }
            if let Some(t) = delta.content.filter(|t| !t.is_empty()) {
                self.text.push_str(&t);
                deltas.push(StreamDelta::Text(t));
            }
            for (pos, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                let index = call.index.unwrap_or(pos);
                let f = call.function.unwrap_or_default();
                let slot = match self.calls.iter_mut().position(|c| c.index == index) {
                    Some(i) => &mut self.calls[i],
                    None => {
                        self.calls.push(PendingCall {
                            index,
                            ..Default::default()
                        });
                        self.calls.last_mut().expect("just pushed")
                    }
                };
                if let Some(id) = &call.id {
                    slot.id.clone_from(id);
                }
                if let Some(n) = &f.name {
                    slot.name.push_str(n);
                }
                if let Some(a) = &f.arguments {
                    slot.args.push_str(a);
                }
                deltas.push(StreamDelta::ToolCall {
                    index,
                    id: call.id,
                    name: f.name,
                    args: f.arguments,
                });
            }
        }
        deltas
    }

    /// Bytes of answer text, reasoning and tool-call names and arguments so far.
    pub(super) fn content_bytes(&self) -> u64 {
        let calls: usize = self.calls.iter().map(|c| c.name.len() + c.args.len()).sum();
        (self.text.len() + self.thinking.len() + calls) as u64
    }

    /// Whether the server said why the answer ended.
    pub(super) fn finished(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// The accumulated answer as a response; `model` and `base_url` fill in what the
    /// server did not say.
    pub(super) fn into_response(self, model: &str, base_url: &str) -> ModelResponse {
        let mut parts = Vec::new();
        if !self.thinking.is_empty() {
            parts.push(ModelResponsePart::Thinking(ThinkingPart::new(
                self.thinking,
            )));
        }
        if !self.text.is_empty() {
            parts.push(ModelResponsePart::Text(TextPart::new(self.text)));
        }
        let mut calls = self.calls;
        calls.sort_by_key(|c| c.index);
        for c in calls {
            let id = if c.id.is_empty() {
                format!("call_{}", uuid::Uuid::new_v4().simple())
            } else {
                c.id
            };
            parts.push(ModelResponsePart::ToolCall(ToolCallPart::new(
                c.name, c.args, id,
            )));
        }
        let mut response = ModelResponse::new(parts);
        if let Some(u) = self.usage {
            response.usage = RequestUsage {
                input_tokens: u.prompt_tokens,
                output_tokens: u.completion_tokens,
                cache_read_tokens: u
                    .prompt_tokens_details
                    .and_then(|d| d.cached_tokens)
                    .unwrap_or(0),
                ..RequestUsage::default()
            };
        }
        response.model_name = Some(self.model.unwrap_or_else(|| model.to_string()));
        response.provider_name = Some("openai".to_string());
        response.provider_url = Some(base_url.to_string());
        response.provider_response_id = self.id;
        if let Some(raw) = self.finish_reason {
            response.finish_reason = map_finish_reason(&raw).map(str::to_string);
            response.provider_details = Some(json!({ "finish_reason": raw }));
        }
        response
    }
}

/// The accumulator for a non-streamed completion.
pub(super) fn from_completion(
    out: super::wire::ChatCompletion,
) -> Result<StreamAccumulator, &'static str> {
    let choices = out.choices.ok_or("the JSON has no \"choices\"")?;
    let choice = choices.into_iter().next().ok_or("\"choices\" is empty")?;
    let message = choice.message.unwrap_or_default();
    let mut acc = StreamAccumulator {
        id: out.id,
        model: out.model,
        usage: out.usage,
        finish_reason: choice.finish_reason,
        saw_choice: true,
        saw_event: true,
        ..Default::default()
    };
    if let Some(r) = message.reasoning_content.or(message.reasoning) {
        acc.thinking = r;
    }
    acc.text = message.content.unwrap_or_default();
    for (i, call) in message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let f = call.function.unwrap_or_default();
        acc.calls.push(PendingCall {
            index: i,
            id: call.id.unwrap_or_default(),
            name: f.name.unwrap_or_default(),
            args: f.arguments.unwrap_or_default(),
        });
    }
    Ok(acc)
}

/// pydantic-ai's name for an OpenAI finish reason.
pub(super) fn map_finish_reason(raw: &str) -> Option<&'static str> {
    match raw {
        "stop" => Some("stop"),
        "length" => Some("length"),
        "tool_calls" | "function_call" => Some("tool_call"),
        "content_filter" => Some("content_filter"),
        _ => None,
    }
}
