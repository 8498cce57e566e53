//! Message model, byte-compatible with pydantic-ai's `ModelMessagesTypeAdapter` JSON
//! (pydantic-ai-slim 2.18.0, the version haiku.rag-slim 0.77.0 runs on).
//!
//! A conversation is an append-only list of [`ModelMessage`]s: requests sent to the model
//! and responses it produced. Every struct declares its fields in the order pydantic-ai
//! dumps them and always writes them (as `null` where unset), so a history written by
//! pydantic-ai survives a load/save round trip unchanged, key order included. Fields a
//! later pydantic-ai version adds land in each value's `extra` map and are written back
//! after the known ones; part kinds this module does not know are kept verbatim as
//! [`ModelRequestPart::Other`] / [`ModelResponsePart::Other`].
//!
//! Timestamps are kept as the exact strings pydantic-ai wrote ([`Timestamp`]); new ones
//! are produced in the same RFC 3339 UTC format.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Declares a zero-sized marker that serializes as one fixed string and only
/// deserializes from it. Used for the `kind` / `part_kind` discriminators so they are
/// written at the position pydantic-ai writes them.
macro_rules! tag {
    ($(#[$meta:meta])* $name:ident = $value:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name;

        impl $name {
            /// The literal this marker stands for.
            pub const VALUE: &'static str = $value;
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str($value)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let s = String::deserialize(deserializer)?;
                if s == $value {
                    Ok($name)
                } else {
                    Err(D::Error::custom(format!(
                        "expected {:?}, found {:?}",
                        $value, s
                    )))
                }
            }
        }
    };
}

tag!(
    /// `kind: "request"`.
    RequestKind = "request"
);
tag!(
    /// `kind: "response"`.
    ResponseKind = "response"
);
tag!(
    /// `part_kind: "system-prompt"`.
    SystemPromptKind = "system-prompt"
);
tag!(
    /// `part_kind: "user-prompt"`.
    UserPromptKind = "user-prompt"
);
tag!(
    /// `part_kind: "tool-return"`.
    ToolReturnKind = "tool-return"
);
tag!(
    /// `part_kind: "retry-prompt"`.
    RetryPromptKind = "retry-prompt"
);
tag!(
    /// `part_kind: "text"`.
    TextKind = "text"
);
tag!(
    /// `part_kind: "tool-call"`.
    ToolCallKind = "tool-call"
);
tag!(
    /// `part_kind: "thinking"`.
    ThinkingKind = "thinking"
);
tag!(
    /// `kind: "binary"` on user content items.
    BinaryKind = "binary"
);

/// `tool_kind` pydantic-ai stamps on `load_capability` calls and returns.
pub const CAPABILITY_LOAD_TOOL_KIND: &str = "capability-load";

/// A timestamp exactly as written in the JSON (RFC 3339, UTC, `Z` suffix).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(pub String);

impl Timestamp {
    /// The current time in pydantic-ai's format (`2026-01-02T03:04:05.123456Z`).
    pub fn now() -> Self {
        Timestamp(
            chrono::Utc::now()
                .format("%Y-%m-%dT%H:%M:%S%.6fZ")
                .to_string(),
        )
    }
}

impl Default for Timestamp {
    fn default() -> Self {
        Timestamp::now()
    }
}

fn complete() -> String {
    "complete".to_string()
}

fn success() -> String {
    "success".to_string()
}

/// One message in a conversation.
// Both variants are several hundred bytes; boxing one would complicate every match
// and every constructor for no measurable gain in a list of messages.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ModelMessage {
    /// Sent to the model.
    Request(ModelRequest),
    /// Produced by the model.
    Response(ModelResponse),
}

impl ModelMessage {
    /// The request, if this is one.
    pub fn as_request(&self) -> Option<&ModelRequest> {
        match self {
            ModelMessage::Request(r) => Some(r),
            ModelMessage::Response(_) => None,
        }
    }

    /// The response, if this is one.
    pub fn as_response(&self) -> Option<&ModelResponse> {
        match self {
            ModelMessage::Response(r) => Some(r),
            ModelMessage::Request(_) => None,
        }
    }
}

impl Serialize for ModelMessage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ModelMessage::Request(r) => r.serialize(serializer),
            ModelMessage::Response(r) => r.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ModelMessage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = Map::<String, Value>::deserialize(deserializer)?;
        match map.get("kind").and_then(Value::as_str) {
            Some(RequestKind::VALUE) => serde_json::from_value(Value::Object(map))
                .map(ModelMessage::Request)
                .map_err(D::Error::custom),
            Some(ResponseKind::VALUE) => serde_json::from_value(Value::Object(map))
                .map(ModelMessage::Response)
                .map_err(D::Error::custom),
            Some(other) => Err(D::Error::custom(format!(
                "unknown message kind {other:?} (expected \"request\" or \"response\")"
            ))),
            None => Err(D::Error::custom("message has no \"kind\"")),
        }
    }
}

/// A request to the model (pydantic-ai `ModelRequest`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The parts, in order.
    pub parts: Vec<ModelRequestPart>,
    /// When the request was made.
    #[serde(default)]
    pub timestamp: Option<Timestamp>,
    /// The instructions sent with this request (not a part).
    #[serde(default)]
    pub instructions: Option<String>,
    /// Always `"request"`.
    #[serde(default)]
    pub kind: RequestKind,
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
    /// Fields this version does not know, kept for the round trip.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ModelRequest {
    /// A request holding `parts`, stamped now.
    pub fn new(parts: Vec<ModelRequestPart>) -> Self {
        ModelRequest {
            parts,
            timestamp: Some(Timestamp::now()),
            instructions: None,
            kind: RequestKind,
            run_id: None,
            conversation_id: None,
            metadata: None,
            state: complete(),
            extra: Map::new(),
        }
    }

    /// A request with a single user prompt.
    pub fn user(content: impl Into<UserContentValue>) -> Self {
        ModelRequest::new(vec![ModelRequestPart::UserPrompt(UserPromptPart::new(
            content,
        ))])
    }
}

/// A part of a request.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelRequestPart {
    /// `system-prompt`.
    SystemPrompt(SystemPromptPart),
    /// `user-prompt`.
    UserPrompt(UserPromptPart),
    /// `tool-return`.
    ToolReturn(ToolReturnPart),
    /// `retry-prompt`.
    RetryPrompt(RetryPromptPart),
    /// A part kind this version does not know, kept verbatim.
    Other(Map<String, Value>),
}

impl Serialize for ModelRequestPart {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ModelRequestPart::SystemPrompt(p) => p.serialize(serializer),
            ModelRequestPart::UserPrompt(p) => p.serialize(serializer),
            ModelRequestPart::ToolReturn(p) => p.serialize(serializer),
            ModelRequestPart::RetryPrompt(p) => p.serialize(serializer),
            ModelRequestPart::Other(m) => m.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ModelRequestPart {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = Map::<String, Value>::deserialize(deserializer)?;
        let kind = map
            .get("part_kind")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let value = Value::Object(map);
        let part = match kind.as_deref() {
            Some(SystemPromptKind::VALUE) => ModelRequestPart::SystemPrompt(
                serde_json::from_value(value).map_err(D::Error::custom)?,
            ),
            Some(UserPromptKind::VALUE) => ModelRequestPart::UserPrompt(
                serde_json::from_value(value).map_err(D::Error::custom)?,
            ),
            Some(ToolReturnKind::VALUE) => ModelRequestPart::ToolReturn(
                serde_json::from_value(value).map_err(D::Error::custom)?,
            ),
            Some(RetryPromptKind::VALUE) => ModelRequestPart::RetryPrompt(
                serde_json::from_value(value).map_err(D::Error::custom)?,
            ),
            Some(_) => match value {
                Value::Object(m) => ModelRequestPart::Other(m),
                _ => unreachable!("built from a map"),
            },
            None => return Err(D::Error::custom("request part has no \"part_kind\"")),
        };
        Ok(part)
    }
}

/// A system prompt (pydantic-ai `SystemPromptPart`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemPromptPart {
    /// The prompt text.
    pub content: String,
    /// When it was written.
    #[serde(default)]
    pub timestamp: Timestamp,
    /// Reference to a dynamic system prompt function (pydantic-ai only).
    #[serde(default)]
    pub dynamic_ref: Option<String>,
    /// Always `"system-prompt"`.
    #[serde(default)]
    pub part_kind: SystemPromptKind,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SystemPromptPart {
    /// A system prompt stamped now.
    pub fn new(content: impl Into<String>) -> Self {
        SystemPromptPart {
            content: content.into(),
            timestamp: Timestamp::now(),
            dynamic_ref: None,
            part_kind: SystemPromptKind,
            extra: Map::new(),
        }
    }
}

/// A user prompt (pydantic-ai `UserPromptPart`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserPromptPart {
    /// A string, or a list of strings and binary items.
    pub content: UserContentValue,
    /// When it was written.
    #[serde(default)]
    pub timestamp: Timestamp,
    /// Always `"user-prompt"`.
    #[serde(default)]
    pub part_kind: UserPromptKind,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl UserPromptPart {
    /// A user prompt stamped now.
    pub fn new(content: impl Into<UserContentValue>) -> Self {
        UserPromptPart {
            content: content.into(),
            timestamp: Timestamp::now(),
            part_kind: UserPromptKind,
            extra: Map::new(),
        }
    }
}

/// The content of a user prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserContentValue {
    /// Plain text.
    Text(String),
    /// Mixed text and binary items.
    Items(Vec<UserContent>),
}

impl From<String> for UserContentValue {
    fn from(s: String) -> Self {
        UserContentValue::Text(s)
    }
}

impl From<&str> for UserContentValue {
    fn from(s: &str) -> Self {
        UserContentValue::Text(s.to_string())
    }
}

impl From<Vec<UserContent>> for UserContentValue {
    fn from(items: Vec<UserContent>) -> Self {
        UserContentValue::Items(items)
    }
}

impl UserContentValue {
    /// All text in the content, items joined with newlines (binary items skipped).
    pub fn text(&self) -> String {
        match self {
            UserContentValue::Text(s) => s.clone(),
            UserContentValue::Items(items) => items
                .iter()
                .filter_map(|i| match i {
                    UserContent::Text(s) => Some(s.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// One item of a list-valued user prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserContent {
    /// A string.
    Text(String),
    /// Inline bytes (`kind: "binary"`), e.g. an image.
    Binary(BinaryContent),
    /// Anything else pydantic-ai allows (URLs, cache points, ...), kept verbatim.
    Other(Map<String, Value>),
}

/// Inline bytes in a user prompt (pydantic-ai `BinaryContent`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BinaryContent {
    /// Base64 of the bytes, as pydantic-ai writes it.
    pub data: String,
    /// MIME type, e.g. `image/png`.
    pub media_type: String,
    /// Provider-specific metadata.
    #[serde(default)]
    pub vendor_metadata: Option<Value>,
    /// Always `"binary"`.
    #[serde(default)]
    pub kind: BinaryKind,
    /// Short identifier the model can refer to.
    #[serde(default)]
    pub identifier: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl BinaryContent {
    /// Wraps raw bytes, base64-encoded with the URL-safe alphabet as pydantic-ai writes
    /// `data` (so a haiku.rag host reads it back unchanged). The identifier is 6 hex digits
    /// derived from the bytes: a
    /// stable FNV-1a hash (pydantic-ai uses SHA-1 for the same purpose; the value only
    /// needs to be short and deterministic, and any string validates).
    pub fn from_bytes(bytes: &[u8], media_type: impl Into<String>) -> Self {
        use base64::Engine as _;
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        BinaryContent {
            data: base64::engine::general_purpose::URL_SAFE.encode(bytes),
            media_type: media_type.into(),
            vendor_metadata: None,
            kind: BinaryKind,
            identifier: Some(format!("{:06x}", hash & 0xff_ffff)),
            extra: Map::new(),
        }
    }

    /// Whether this is an image.
    pub fn is_image(&self) -> bool {
        self.media_type.starts_with("image/")
    }

    /// A `data:` URL for the bytes. `data:` URLs take the standard base64 alphabet;
    /// `data` may hold either (pydantic-ai writes URL-safe).
    pub fn data_url(&self) -> String {
        let standard: String = self
            .data
            .chars()
            .map(|c| match c {
                '-' => '+',
                '_' => '/',
                c => c,
            })
            .collect();
        format!("data:{};base64,{standard}", self.media_type)
    }
}

/// A tool's result (pydantic-ai `ToolReturnPart`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolReturnPart {
    /// The tool that was called.
    pub tool_name: String,
    /// The result: any JSON value (usually a string).
    pub content: Value,
    /// The call this answers.
    pub tool_call_id: String,
    /// Typed-part discriminator (`"capability-load"` for `load_capability`).
    #[serde(default)]
    pub tool_kind: Option<String>,
    /// Metadata not sent to the model.
    #[serde(default)]
    pub metadata: Option<Value>,
    /// When the tool finished.
    #[serde(default)]
    pub timestamp: Timestamp,
    /// `"success"`, `"failed"`, `"denied"` or `"interrupted"`.
    #[serde(default = "success")]
    pub outcome: String,
    /// Always `"tool-return"`.
    #[serde(default)]
    pub part_kind: ToolReturnKind,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ToolReturnPart {
    /// A successful return stamped now.
    pub fn new(
        tool_name: impl Into<String>,
        content: Value,
        tool_call_id: impl Into<String>,
    ) -> Self {
        ToolReturnPart {
            tool_name: tool_name.into(),
            content,
            tool_call_id: tool_call_id.into(),
            tool_kind: None,
            metadata: None,
            timestamp: Timestamp::now(),
            outcome: success(),
            part_kind: ToolReturnKind,
            extra: Map::new(),
        }
    }

    /// Whether the outcome is `failed`.
    pub fn is_failed(&self) -> bool {
        self.outcome == "failed"
    }

    /// The content as the model sees it: strings as-is, anything else as JSON.
    pub fn content_text(&self) -> String {
        match &self.content {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

/// A request to the model to try again (pydantic-ai `RetryPromptPart`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryPromptPart {
    /// The reason: text, or pydantic validation error dicts.
    pub content: RetryContent,
    /// The tool concerned, or `None` for a retry of a plain text answer.
    #[serde(default)]
    pub tool_name: Option<String>,
    /// The call concerned.
    pub tool_call_id: String,
    /// When it was written.
    #[serde(default)]
    pub timestamp: Timestamp,
    /// Always `"retry-prompt"`.
    #[serde(default)]
    pub part_kind: RetryPromptKind,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl RetryPromptPart {
    /// A retry for a tool call, stamped now.
    pub fn for_tool(
        tool_name: impl Into<String>,
        tool_call_id: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        RetryPromptPart {
            content: RetryContent::Text(content.into()),
            tool_name: Some(tool_name.into()),
            tool_call_id: tool_call_id.into(),
            timestamp: Timestamp::now(),
            part_kind: RetryPromptKind,
            extra: Map::new(),
        }
    }
}

/// The content of a retry prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RetryContent {
    /// A message.
    Text(String),
    /// Validation errors (`{"type", "loc", "msg", "input", ...}` dicts).
    Errors(Vec<Value>),
}

impl RetryContent {
    /// The content as one text: the message, or one line per error.
    pub fn text(&self) -> String {
        match self {
            RetryContent::Text(s) => s.clone(),
            RetryContent::Errors(errors) => errors
                .iter()
                .map(|e| {
                    let loc = e.get("loc").map(|l| l.to_string()).unwrap_or_default();
                    let msg = e.get("msg").and_then(Value::as_str).unwrap_or_default();
                    format!("{loc}: {msg}")
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

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
        let map = Map::<String, Value>::deserialize(deserializer)?;
        let kind = map
            .get("part_kind")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let value = Value::Object(map);
        let part = match kind.as_deref() {
            Some(TextKind::VALUE) => {
                ModelResponsePart::Text(serde_json::from_value(value).map_err(D::Error::custom)?)
            }
            Some(ToolCallKind::VALUE) => ModelResponsePart::ToolCall(
                serde_json::from_value(value).map_err(D::Error::custom)?,
            ),
            Some(ThinkingKind::VALUE) => ModelResponsePart::Thinking(
                serde_json::from_value(value).map_err(D::Error::custom)?,
            ),
            Some(_) => match value {
                Value::Object(m) => ModelResponsePart::Other(m),
                _ => unreachable!("built from a map"),
            },
            None => return Err(D::Error::custom("response part has no \"part_kind\"")),
        };
        Ok(part)
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

/// Parses a JSON message list (pydantic-ai `ModelMessagesTypeAdapter.dump_json` output).
pub fn messages_from_json(json: &str) -> serde_json::Result<Vec<ModelMessage>> {
    serde_json::from_str(json)
}

/// Writes a message list as pydantic-ai's JSON.
pub fn messages_to_json(messages: &[ModelMessage]) -> serde_json::Result<String> {
    serde_json::to_string(messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `data` is written with pydantic-ai's URL-safe alphabet; `data:` URLs get the
    /// standard one.
    #[test]
    fn binary_data_is_url_safe_and_data_urls_are_standard() {
        let b = BinaryContent::from_bytes(&[0xfb, 0xff], "image/png");
        assert_eq!(b.data, "-_8=");
        assert_eq!(b.data_url(), "data:image/png;base64,+/8=");
    }

    #[test]
    fn unknown_part_kind_and_fields_survive() {
        let json = r#"[{"parts":[{"content":"hi","timestamp":"t","part_kind":"user-prompt","future":1},
            {"part_kind":"instruction-x","a":[1,2]}],"timestamp":null,"instructions":null,"kind":"request",
            "run_id":null,"conversation_id":null,"metadata":null,"state":"complete","new_field":{"b":true}}]"#;
        let msgs = messages_from_json(json).unwrap();
        let back: Value = serde_json::to_value(&msgs).unwrap();
        let orig: Value = serde_json::from_str(json).unwrap();
        assert_eq!(back, orig);
        match &msgs[0] {
            ModelMessage::Request(r) => {
                assert!(matches!(r.parts[1], ModelRequestPart::Other(_)));
                assert_eq!(r.extra["new_field"]["b"], Value::Bool(true));
            }
            ModelMessage::Response(_) => panic!("expected a request"),
        }
    }

    #[test]
    fn wrong_kind_is_rejected() {
        let err = messages_from_json(r#"[{"parts":[],"kind":"nonsense"}]"#).unwrap_err();
        assert!(err.to_string().contains("unknown message kind"), "{err}");
    }

    #[test]
    fn tool_args_parse() {
        let call = ToolCallPart::new("t", "", "c");
        assert!(call.args_as_object().unwrap().is_empty());
        let call = ToolCallPart::new("t", "[1]", "c");
        assert!(call.args_as_object().is_err());
        let call = ToolCallPart::new("t", r#"{"a":1}"#, "c");
        assert_eq!(call.args_as_object().unwrap()["a"], 1);
    }
}
