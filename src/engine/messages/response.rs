//! The response side of the message model: `ModelResponse` and its parts (text,
//! thinking, tool calls with their arguments) and the request usage.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::fields::{Fields, MessageFields};
use super::*;

/// A response from the model (pydantic-ai `ModelResponse`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// The parts, in order.
    pub parts: Vec<ModelResponsePart>,
    /// Token usage of this request.
    #[serde(default)]
    pub usage: RequestUsage,
    /// The model that answered.
    #[serde(default)]
    pub model_name: Option<String>,
    /// When the response was received.
    #[serde(default)]
    pub timestamp: Timestamp,
    /// Always `"response"`.
    #[serde(default)]
    pub kind: ResponseKind,
    /// Provider name (`"openai"` for OpenAI-compatible endpoints).
    #[serde(default)]
    pub provider_name: Option<String>,
    /// Base URL of the provider.
    #[serde(default)]
    pub provider_url: Option<String>,
    /// Provider-specific details.
    #[serde(default)]
    pub provider_details: Option<Value>,
    /// The provider's id for the response.
    #[serde(default)]
    pub provider_response_id: Option<String>,
    /// `"stop"`, `"length"`, `"content_filter"`, `"tool_call"` or `"error"`.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Id of the run that produced the message.
    #[serde(default)]
    pub run_id: Option<String>,
    /// Id shared by the runs of one conversation.
    #[serde(default)]
    pub conversation_id: Option<String>,
    /// Free-form metadata.
    #[serde(default)]
    pub metadata: Option<Value>,
    /// `"complete"` for every message the engine stores.
    #[serde(default = "complete")]
    pub state: String,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ModelResponse {
    /// A response holding `parts`, stamped now, with empty usage.
    pub fn new(parts: Vec<ModelResponsePart>) -> Self {
        ModelResponse {
            parts,
            usage: RequestUsage::default(),
            model_name: None,
            timestamp: Timestamp::now(),
            kind: ResponseKind,
            provider_name: None,
            provider_url: None,
            provider_details: None,
            provider_response_id: None,
            finish_reason: None,
            run_id: None,
            conversation_id: None,
            metadata: None,
            state: complete(),
            extra: Map::new(),
        }
    }

    /// Whether the answer was cut off at the token limit (finish reason `length`).
    pub fn is_cut_off(&self) -> bool {
        self.finish_reason.as_deref() == Some("length")
    }

    /// What cut the answer off, said once for every face, when it was cut off: our
    /// `max_tokens` when the request carried one (the model client records it in
    /// `provider_details`), else the server's own output or context length limit.
    pub fn cut_off_note(&self) -> Option<String> {
        if !self.is_cut_off() {
            return None;
        }
        let sent = self
            .provider_details
            .as_ref()
            .and_then(|d| d.get("max_tokens"))
            .and_then(Value::as_u64);
        Some(cut_off_note(sent))
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCallPart> {
        self.parts.iter().filter_map(|p| match p {
            ModelResponsePart::ToolCall(c) => Some(c),
            _ => None,
        })
    }

    /// All text parts concatenated.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                ModelResponsePart::Text(t) => Some(t.content.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// The cause of a cut-off answer in words: `max_tokens`, the limit we sent, if any.
pub fn cut_off_note(max_tokens: Option<u64>) -> String {
    match max_tokens {
        Some(n) => format!("cut off at the max_tokens limit of {n} that we set"),
        None => "cut off by the server's own output or context length limit (we set no max_tokens)"
            .to_string(),
    }
}

/// Token usage of one request (pydantic-ai `RequestUsage`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestUsage {
    /// Prompt tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Tokens written to the provider's cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Tokens read from the provider's cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Audio prompt tokens.
    #[serde(default)]
    pub input_audio_tokens: u64,
    /// Audio tokens read from cache.
    #[serde(default)]
    pub cache_audio_read_tokens: u64,
    /// Audio completion tokens.
    #[serde(default)]
    pub output_audio_tokens: u64,
    /// Provider-specific counters.
    #[serde(default)]
    pub details: Map<String, Value>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl RequestUsage {
    /// Adds another request's counters to this one.
    pub fn add(&mut self, other: &RequestUsage) {
        self.input_tokens += other.input_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.output_tokens += other.output_tokens;
        self.input_audio_tokens += other.input_audio_tokens;
        self.cache_audio_read_tokens += other.cache_audio_read_tokens;
        self.output_audio_tokens += other.output_audio_tokens;
    }
}

/// A part of a response.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelResponsePart {
    /// `text`.
    Text(TextPart),
    /// `tool-call`.
    ToolCall(ToolCallPart),
    /// `thinking`.
    Thinking(ThinkingPart),
    /// A part kind this version does not know, kept verbatim.
    Other(Map<String, Value>),
}

impl Serialize for ModelResponsePart {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ModelResponsePart::Text(p) => p.serialize(serializer),
            ModelResponsePart::ToolCall(p) => p.serialize(serializer),
            ModelResponsePart::Thinking(p) => p.serialize(serializer),
            ModelResponsePart::Other(m) => m.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ModelResponsePart {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        ModelResponsePart::from_fields(Fields::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

impl ModelResponsePart {
    /// Reads a part from its fields as the derived readers would.
    pub(super) fn from_fields(mut f: Fields) -> serde_json::Result<Self> {
        Ok(match f.str("part_kind") {
            Some(TextKind::VALUE) => ModelResponsePart::Text(TextPart {
                content: f.required("content")?,
                id: f.optional("id")?,
                provider_name: f.optional("provider_name")?,
                provider_details: f.optional("provider_details")?,
                part_kind: f.take("part_kind")?.unwrap_or_default(),
                extra: f.into_map(),
            }),
            Some(ToolCallKind::VALUE) => ModelResponsePart::ToolCall(ToolCallPart {
                tool_name: f.required("tool_name")?,
                args: f.optional("args")?,
                tool_call_id: f.required("tool_call_id")?,
                tool_kind: f.optional("tool_kind")?,
                id: f.optional("id")?,
                provider_name: f.optional("provider_name")?,
                provider_details: f.optional("provider_details")?,
                part_kind: f.take("part_kind")?.unwrap_or_default(),
                extra: f.into_map(),
            }),
            Some(ThinkingKind::VALUE) => ModelResponsePart::Thinking(ThinkingPart {
                content: f.required("content")?,
                id: f.optional("id")?,
                signature: f.optional("signature")?,
                provider_name: f.optional("provider_name")?,
                provider_details: f.optional("provider_details")?,
                part_kind: f.take("part_kind")?.unwrap_or_default(),
                extra: f.into_map(),
            }),
            Some(_) => ModelResponsePart::Other(f.into_map()),
            None => {
                return Err(serde_json::Error::custom(
                    "response part has no \"part_kind\"",
                ));
            }
        })
    }
}

impl ModelResponse {
    /// Reads a response from its fields as the derived reader would.
    pub(super) fn from_fields(mut message: MessageFields) -> serde_json::Result<Self> {
        let parts = message
            .parts
            .take()
            .ok_or_else(|| serde_json::Error::missing_field("parts"))?
            .into_iter()
            .map(ModelResponsePart::from_fields)
            .collect::<serde_json::Result<Vec<_>>>()?;
        let mut f = message.rest_with_instructions();
        Ok(ModelResponse {
            parts,
            usage: f.take("usage")?.unwrap_or_default(),
            model_name: f.optional("model_name")?,
            timestamp: f.take("timestamp")?.unwrap_or_default(),
            kind: f.take("kind")?.unwrap_or_default(),
            provider_name: f.optional("provider_name")?,
            provider_url: f.optional("provider_url")?,
            provider_details: f.optional("provider_details")?,
            provider_response_id: f.optional("provider_response_id")?,
            finish_reason: f.optional("finish_reason")?,
            run_id: f.optional("run_id")?,
            conversation_id: f.optional("conversation_id")?,
            metadata: f.optional("metadata")?,
            state: f.take("state")?.unwrap_or_else(complete),
            extra: f.into_map(),
        })
    }
}

/// Text from the model (pydantic-ai `TextPart`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextPart {
    /// The text.
    pub content: String,
    /// Provider part id.
    #[serde(default)]
    pub id: Option<String>,
    /// Provider name.
    #[serde(default)]
    pub provider_name: Option<String>,
    /// Provider details.
    #[serde(default)]
    pub provider_details: Option<Value>,
    /// Always `"text"`.
    #[serde(default)]
    pub part_kind: TextKind,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl TextPart {
    /// A text part.
    pub fn new(content: impl Into<String>) -> Self {
        TextPart {
            content: content.into(),
            id: None,
            provider_name: None,
            provider_details: None,
            part_kind: TextKind,
            extra: Map::new(),
        }
    }
}

/// Reasoning text from the model (pydantic-ai `ThinkingPart`). Never sent back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThinkingPart {
    /// The reasoning text.
    pub content: String,
    /// Provider part id.
    #[serde(default)]
    pub id: Option<String>,
    /// Provider signature.
    #[serde(default)]
    pub signature: Option<String>,
    /// Provider name.
    #[serde(default)]
    pub provider_name: Option<String>,
    /// Provider details.
    #[serde(default)]
    pub provider_details: Option<Value>,
    /// Always `"thinking"`.
    #[serde(default)]
    pub part_kind: ThinkingKind,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ThinkingPart {
    /// A thinking part.
    pub fn new(content: impl Into<String>) -> Self {
        ThinkingPart {
            content: content.into(),
            id: None,
            signature: None,
            provider_name: None,
            provider_details: None,
            part_kind: ThinkingKind,
            extra: Map::new(),
        }
    }
}

/// A tool call from the model (pydantic-ai `ToolCallPart`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallPart {
    /// The tool to call.
    pub tool_name: String,
    /// Arguments: a JSON string as the model sent it, or an object.
    #[serde(default)]
    pub args: Option<ToolArgs>,
    /// Call id, answered by the tool return or retry prompt.
    pub tool_call_id: String,
    /// Typed-part discriminator (`"capability-load"` for `load_capability`).
    #[serde(default)]
    pub tool_kind: Option<String>,
    /// Provider part id.
    #[serde(default)]
    pub id: Option<String>,
    /// Provider name.
    #[serde(default)]
    pub provider_name: Option<String>,
    /// Provider details.
    #[serde(default)]
    pub provider_details: Option<Value>,
    /// Always `"tool-call"`.
    #[serde(default)]
    pub part_kind: ToolCallKind,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ToolCallPart {
    /// A call with string arguments (as models send them).
    pub fn new(
        tool_name: impl Into<String>,
        args: impl Into<String>,
        tool_call_id: impl Into<String>,
    ) -> Self {
        ToolCallPart {
            tool_name: tool_name.into(),
            args: Some(ToolArgs::Json(args.into())),
            tool_call_id: tool_call_id.into(),
            tool_kind: None,
            id: None,
            provider_name: None,
            provider_details: None,
            part_kind: ToolCallKind,
            extra: Map::new(),
        }
    }

    /// The arguments as an object. A missing or empty argument string is `{}`.
    pub fn args_as_object(&self) -> Result<Map<String, Value>, String> {
        match &self.args {
            None => Ok(Map::new()),
            Some(ToolArgs::Object(m)) => Ok(m.clone()),
            Some(ToolArgs::Json(s)) if s.trim().is_empty() => Ok(Map::new()),
            Some(ToolArgs::Json(s)) => match serde_json::from_str::<Value>(s) {
                Ok(Value::Object(m)) => Ok(m),
                Ok(other) => Err(format!("arguments must be a JSON object, got {other}")),
                Err(e) => Err(format!("arguments are not valid JSON: {e}")),
            },
        }
    }

    /// The arguments as a JSON string (for the wire).
    pub fn args_as_json(&self) -> String {
        match &self.args {
            None => "{}".to_string(),
            Some(ToolArgs::Json(s)) => s.clone(),
            Some(ToolArgs::Object(m)) => Value::Object(m.clone()).to_string(),
        }
    }
}

/// Tool-call arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolArgs {
    /// A JSON string, exactly as the model produced it.
    Json(String),
    /// An already parsed object.
    Object(Map<String, Value>),
}
