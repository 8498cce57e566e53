//! The chat-completions wire format: the request body built from our messages, and
//! lenient types for what servers send back (every field optional, so one server's
//! omissions are not "malformed").
//!
//! The instructions become a leading system message, system-prompt parts system
//! messages, user prompts user messages (images as `data:` URLs), tool returns tool
//! messages, retry prompts a tool message (with the call id) or a user message, and
//! responses assistant messages with their tool calls (arguments see
//! [`wire_arguments`]). Thinking parts are never sent.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::config::ModelConfig;
use crate::engine::chat::ModelRequestParams;
use crate::engine::messages::{
    ModelMessage, ModelRequestPart, ModelResponse, ToolArgs, ToolCallPart, UserContent,
    UserContentValue,
};
use crate::engine::prompts;

/// The chat-completions JSON body for `params`: `model`, `messages`, `tools` when any,
/// `max_tokens` when configured, and `stream` with usage when streaming.
pub(super) fn build_request_body(config: &ModelConfig, params: ModelRequestParams<'_>) -> Value {
    let mut messages = Vec::new();
    if !params.instructions.trim().is_empty() {
        messages.push(json!({"role": "system", "content": params.instructions}));
    }
    for message in params.messages {
        match message {
            ModelMessage::Request(request) => {
                for part in &request.parts {
                    if let Some(m) = request_part_to_wire(part) {
                        messages.push(m);
                    }
                }
            }
            ModelMessage::Response(response) => messages.push(response_to_wire(response)),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(config.model));
    body.insert("messages".into(), Value::Array(messages));
    if !params.tools.is_empty() {
        let tools: Vec<Value> = params
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters,
                }})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(n) = config.max_tokens {
        body.insert("max_tokens".into(), json!(n));
    }
    if config.stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Value::Object(body)
}

fn request_part_to_wire(part: &ModelRequestPart) -> Option<Value> {
    match part {
        ModelRequestPart::SystemPrompt(p) => Some(json!({"role": "system", "content": p.content})),
        ModelRequestPart::UserPrompt(p) => {
            Some(json!({"role": "user", "content": user_content_to_wire(&p.content)}))
        }
        ModelRequestPart::ToolReturn(p) => Some(json!({
            "role": "tool", "tool_call_id": p.tool_call_id, "content": p.content_text(),
        })),
        ModelRequestPart::RetryPrompt(p) => {
            let text = prompts::fill(prompts::retry_suffix(), &[("content", &p.content.text())]);
            Some(match &p.tool_name {
                Some(_) => json!({"role": "tool", "tool_call_id": p.tool_call_id, "content": text}),
                None => json!({"role": "user", "content": text}),
            })
        }
        ModelRequestPart::Other(m) => {
            tracing::debug!(part_kind = ?m.get("part_kind"), "request part not sent: unknown kind");
            None
        }
    }
}

fn user_content_to_wire(content: &UserContentValue) -> Value {
    match content {
        UserContentValue::Text(s) => json!(s),
        UserContentValue::Items(items) => {
            let parts: Vec<Value> = items
                .iter()
                .filter_map(|item| match item {
                    UserContent::Text(s) => Some(json!({"type": "text", "text": s})),
                    UserContent::Binary(b) if b.is_image() => {
                        Some(json!({"type": "image_url", "image_url": {"url": b.data_url()}}))
                    }
                    UserContent::Binary(b) => {
                        tracing::debug!(media_type = %b.media_type, "binary item not sent: not an image");
                        None
                    }
                    UserContent::Other(m) => match (m.get("kind").and_then(Value::as_str), m.get("url")) {
                        (Some("image-url"), Some(url)) => {
                            Some(json!({"type": "image_url", "image_url": {"url": url}}))
                        }
                        _ => None,
                    },
                })
                .collect();
            Value::Array(parts)
        }
    }
}

fn response_to_wire(response: &ModelResponse) -> Value {
    let text = response.text();
    let calls: Vec<Value> = response
        .tool_calls()
        .map(|c| {
            json!({"id": c.tool_call_id, "type": "function", "function": {
                "name": c.tool_name, "arguments": wire_arguments(c),
            }})
        })
        .collect();
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    m.insert(
        "content".into(),
        if text.is_empty() && !calls.is_empty() {
            Value::Null
        } else {
            json!(text)
        },
    );
    if !calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(m)
}

/// The arguments of a stored tool call as sent back to the server: the model's own
/// text when it is a JSON object, else `{}`. Arguments that are not a JSON object
/// (cut off by `max_tokens`, or invented by a weak model) are kept verbatim in the
/// session, but servers refuse them in a request (llama.cpp answers HTTP 500 "Failed
/// to parse tool call arguments as JSON"), and the model learns what went wrong from
/// the retry prompt that answers the call.
pub(super) fn wire_arguments(call: &ToolCallPart) -> String {
    match (call.args_as_object(), &call.args) {
        (Ok(_), Some(ToolArgs::Json(s))) if !s.trim().is_empty() => s.clone(),
        (Ok(m), _) => Value::Object(m).to_string(),
        (Err(_), _) => "{}".to_string(),
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub(super) prompt_tokens: u64,
    #[serde(default)]
    pub(super) completion_tokens: u64,
    #[serde(default)]
    pub(super) prompt_tokens_details: Option<WirePromptDetails>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct WirePromptDetails {
    #[serde(default)]
    pub(super) cached_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct WireFunction {
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) arguments: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct WireToolCall {
    #[serde(default)]
    pub(super) index: Option<usize>,
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(default)]
    pub(super) function: Option<WireFunction>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct WireMessage {
    #[serde(default)]
    pub(super) content: Option<String>,
    #[serde(default)]
    pub(super) reasoning_content: Option<String>,
    #[serde(default)]
    pub(super) reasoning: Option<String>,
    #[serde(default)]
    pub(super) tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct WireChoice {
    #[serde(default)]
    pub(super) message: Option<WireMessage>,
    #[serde(default)]
    pub(super) finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ChatCompletion {
    /// An error reported with a 200 status.
    #[serde(default)]
    pub(super) error: Option<Value>,
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(default)]
    pub(super) model: Option<String>,
    #[serde(default)]
    pub(super) choices: Option<Vec<WireChoice>>,
    #[serde(default)]
    pub(super) usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
pub(super) struct WireChunkChoice {
    #[serde(default)]
    pub(super) delta: Option<WireMessage>,
    #[serde(default)]
    pub(super) finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ChatChunk {
    /// An error reported inside a 200 stream (llama.cpp does this).
    #[serde(default)]
    pub(super) error: Option<Value>,
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(default)]
    pub(super) model: Option<String>,
    #[serde(default)]
    pub(super) choices: Option<Vec<WireChunkChoice>>,
    #[serde(default)]
    pub(super) usage: Option<WireUsage>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::messages::{
        BinaryContent, ModelRequest, ModelResponsePart, RetryPromptPart, TextPart, ThinkingPart,
        ToolReturnPart, UserContent, UserPromptPart,
    };

    #[test]
    fn body_maps_every_part_kind() {
        let mut resp = ModelResponse::new(vec![
            ModelResponsePart::Thinking(ThinkingPart::new("secret reasoning")),
            ModelResponsePart::Text(TextPart::new("calling")),
            ModelResponsePart::ToolCall(ToolCallPart::new("search", r#"{"q":"x"}"#, "c1")),
        ]);
        resp.model_name = Some("m".into());
        let image = BinaryContent::from_bytes(b"png", "image/png");
        let messages = vec![
            ModelMessage::from(ModelRequest::new(vec![ModelRequestPart::UserPrompt(
                UserPromptPart::new(vec![
                    UserContent::Text("look".into()),
                    UserContent::Binary(image),
                ]),
            )])),
            ModelMessage::from(resp),
            ModelMessage::from(ModelRequest::new(vec![
                ModelRequestPart::ToolReturn(ToolReturnPart::new("search", json!("found"), "c1")),
                ModelRequestPart::RetryPrompt(RetryPromptPart::for_tool("search", "c2", "bad")),
            ])),
        ];
        let config = ModelConfig {
            model: "m".into(),
            ..ModelConfig::default()
        };
        let body = build_request_body(
            &config,
            ModelRequestParams {
                instructions: "be brief",
                messages: &messages,
                tools: &[],
            },
        );
        let wire = body["messages"].as_array().unwrap();
        assert_eq!(wire[0], json!({"role": "system", "content": "be brief"}));
        assert_eq!(
            wire[1]["content"][1]["image_url"]["url"],
            json!("data:image/png;base64,cG5n")
        );
        assert_eq!(
            wire[2]["tool_calls"][0]["function"]["arguments"],
            json!(r#"{"q":"x"}"#)
        );
        assert!(!body.to_string().contains("secret reasoning"));
        assert_eq!(
            wire[3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "found"})
        );
        assert_eq!(wire[4]["tool_call_id"], json!("c2"));
        assert!(wire[4]["content"].as_str().unwrap().starts_with("bad"));
        assert!(body.get("tools").is_none());
        assert_eq!(body["stream"], json!(true));
        assert!(body.get("max_tokens").is_none());
    }

    #[test]
    fn max_tokens_is_sent_when_set() {
        let config = ModelConfig {
            max_tokens: Some(64),
            stream: false,
            ..ModelConfig::default()
        };
        let params = ModelRequestParams {
            instructions: "",
            messages: &[],
            tools: &[],
        };
        let body = build_request_body(&config, params);
        assert_eq!(body["max_tokens"], json!(64));
        assert!(body.get("stream").is_none());
    }

    #[test]
    fn broken_tool_arguments_go_out_as_an_empty_object() {
        let call = |args: &str| ToolCallPart::new("search", args, "c1");
        assert_eq!(wire_arguments(&call(r#"{"q": "x"}"#)), r#"{"q": "x"}"#);
        assert_eq!(wire_arguments(&call(r#"{"q": "unterminated"#)), "{}");
        assert_eq!(wire_arguments(&call("[1, 2]")), "{}");
        assert_eq!(wire_arguments(&call("")), "{}");
        let mut resp = ModelResponse::new(vec![ModelResponsePart::ToolCall(call(r#"{"q": "cut"#))]);
        resp.finish_reason = Some("length".into());
        let messages = vec![ModelMessage::from(resp)];
        let body = build_request_body(
            &ModelConfig::default(),
            ModelRequestParams {
                instructions: "",
                messages: &messages,
                tools: &[],
            },
        );
        assert_eq!(
            body["messages"][0]["tool_calls"][0]["function"]["arguments"],
            json!("{}")
        );
        // The stored call keeps what the model sent.
        let ModelMessage::Response(r) = &messages[0] else {
            unreachable!()
        };
        assert_eq!(
            r.tool_calls().next().unwrap().args_as_json(),
            r#"{"q": "cut"#
        );
    }
}
