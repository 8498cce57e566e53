//! The request side of the message model: `ModelRequest` and its parts (system and
//! user prompts, user content and binaries, tool returns, retry prompts).

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::fields::{Fields, MessageFields};
use super::*;

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
    pub instructions: Option<SharedText>,
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

    /// This request with other `parts` (everything else copied, the old parts not).
    pub fn with_parts(&self, parts: Vec<ModelRequestPart>) -> Self {
        ModelRequest {
            parts,
            timestamp: self.timestamp.clone(),
            instructions: self.instructions.clone(),
            kind: RequestKind,
            run_id: self.run_id.clone(),
            conversation_id: self.conversation_id.clone(),
            metadata: self.metadata.clone(),
            state: self.state.clone(),
            extra: self.extra.clone(),
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
        ModelRequestPart::from_fields(Fields::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

impl ModelRequestPart {
    /// Reads a part from its fields. Tool returns and user prompts (a long history's
    /// bulk) are taken field by field; the rarer kinds go through their derived readers.
    pub(super) fn from_fields(fields: Fields) -> serde_json::Result<Self> {
        Ok(match fields.str("part_kind") {
            Some(ToolReturnKind::VALUE) => {
                ModelRequestPart::ToolReturn(ToolReturnPart::from_fields(fields)?)
            }
            Some(UserPromptKind::VALUE) => {
                ModelRequestPart::UserPrompt(UserPromptPart::from_fields(fields)?)
            }
            Some(SystemPromptKind::VALUE) => ModelRequestPart::SystemPrompt(
                serde_json::from_value(Value::Object(fields.into_map()))?,
            ),
            Some(RetryPromptKind::VALUE) => ModelRequestPart::RetryPrompt(serde_json::from_value(
                Value::Object(fields.into_map()),
            )?),
            Some(_) => ModelRequestPart::Other(fields.into_map()),
            None => {
                return Err(serde_json::Error::custom(
                    "request part has no \"part_kind\"",
                ));
            }
        })
    }
}

impl ModelRequest {
    /// Reads a request from its fields as the derived reader would.
    pub(super) fn from_fields(message: MessageFields) -> serde_json::Result<Self> {
        let parts = message
            .parts
            .ok_or_else(|| serde_json::Error::missing_field("parts"))?
            .into_iter()
            .map(ModelRequestPart::from_fields)
            .collect::<serde_json::Result<Vec<_>>>()?;
        let instructions = message.instructions.flatten();
        let mut f = message.rest;
        Ok(ModelRequest {
            parts,
            timestamp: f.optional("timestamp")?,
            instructions,
            kind: f.take("kind")?.unwrap_or_default(),
            run_id: f.optional("run_id")?,
            conversation_id: f.optional("conversation_id")?,
            metadata: f.optional("metadata")?,
            state: f.take("state")?.unwrap_or_else(complete),
            extra: f.into_map(),
        })
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
    /// Reads a user prompt from its fields as the derived reader would.
    fn from_fields(mut f: Fields) -> serde_json::Result<Self> {
        Ok(UserPromptPart {
            content: f.required("content")?,
            timestamp: f.take("timestamp")?.unwrap_or_default(),
            part_kind: f.take("part_kind")?.unwrap_or_default(),
            extra: f.into_map(),
        })
    }

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
    /// Reads a tool return from its fields as the derived reader would.
    fn from_fields(mut f: Fields) -> serde_json::Result<Self> {
        Ok(ToolReturnPart {
            tool_name: f.required("tool_name")?,
            content: f.required("content")?,
            tool_call_id: f.required("tool_call_id")?,
            tool_kind: f.optional("tool_kind")?,
            metadata: f.optional("metadata")?,
            timestamp: f.take("timestamp")?.unwrap_or_default(),
            outcome: f.take("outcome")?.unwrap_or_else(success),
            part_kind: f.take("part_kind")?.unwrap_or_default(),
            extra: f.into_map(),
        })
    }

    /// This return with other `content` (everything else copied, the old content not).
    pub fn with_content(&self, content: Value) -> Self {
        ToolReturnPart {
            tool_name: self.tool_name.clone(),
            content,
            tool_call_id: self.tool_call_id.clone(),
            tool_kind: self.tool_kind.clone(),
            metadata: self.metadata.clone(),
            timestamp: self.timestamp.clone(),
            outcome: self.outcome.clone(),
            part_kind: ToolReturnKind,
            extra: self.extra.clone(),
        }
    }

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
        self.content_str().into_owned()
    }

    /// [`ToolReturnPart::content_text`] without copying a string content.
    pub fn content_str(&self) -> std::borrow::Cow<'_, str> {
        match &self.content {
            Value::String(s) => std::borrow::Cow::Borrowed(s),
            other => std::borrow::Cow::Owned(other.to_string()),
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
