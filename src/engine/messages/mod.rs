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
//! are produced in the same RFC 3339 UTC format.//!
//! The request side (prompts, user content, tool returns, retries) is in `request`, the
//! response side (text, thinking, tool calls, usage) in `response`; this file holds the
//! message envelope, the discriminator tags and timestamps.

use std::sync::Arc;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

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

mod fields;
mod request;
mod response;
mod shared;

pub use request::{
    BinaryContent, ModelRequest, ModelRequestPart, RetryContent, RetryPromptPart, SystemPromptPart,
    ToolReturnPart, UserContent, UserContentValue, UserPromptPart,
};
pub use response::{
    ModelResponse, ModelResponsePart, RequestUsage, TextPart, ThinkingPart, ToolArgs, ToolCallPart,
};
pub use shared::SharedText;

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
///
/// Each message is shared behind an [`Arc`]: a history is copied for every request's
/// snapshot (raw and sent), for the run's result and for the commit, and with shared
/// messages each copy costs a pointer per message instead of every string and JSON value
/// again. A message that is changed is copied then (`Arc::make_mut`), the others stay
/// shared; equality looks at the pointers first.
#[derive(Debug, Clone)]
pub enum ModelMessage {
    /// Sent to the model.
    Request(Arc<ModelRequest>),
    /// Produced by the model.
    Response(Arc<ModelResponse>),
}

impl PartialEq for ModelMessage {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ModelMessage::Request(a), ModelMessage::Request(b)) => Arc::ptr_eq(a, b) || a == b,
            (ModelMessage::Response(a), ModelMessage::Response(b)) => Arc::ptr_eq(a, b) || a == b,
            _ => false,
        }
    }
}

impl From<ModelRequest> for ModelMessage {
    fn from(r: ModelRequest) -> Self {
        ModelMessage::Request(Arc::new(r))
    }
}

impl From<ModelResponse> for ModelMessage {
    fn from(r: ModelResponse) -> Self {
        ModelMessage::Response(Arc::new(r))
    }
}

impl ModelMessage {
    /// The message's allocation, shared by its copies: equal for two copies of one
    /// message, different for messages that coexist apart.
    pub fn identity(&self) -> usize {
        match self {
            ModelMessage::Request(a) => Arc::as_ptr(a) as *const () as usize,
            ModelMessage::Response(a) => Arc::as_ptr(a) as *const () as usize,
        }
    }

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

    /// The request to change, if this is one (copied first when it is shared).
    pub fn as_request_mut(&mut self) -> Option<&mut ModelRequest> {
        match self {
            ModelMessage::Request(r) => Some(Arc::make_mut(r)),
            ModelMessage::Response(_) => None,
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
        let message = fields::MessageFields::deserialize(deserializer)?;
        match message.rest.str("kind") {
            Some(RequestKind::VALUE) => ModelRequest::from_fields(message)
                .map(ModelMessage::from)
                .map_err(D::Error::custom),
            Some(ResponseKind::VALUE) => ModelResponse::from_fields(message)
                .map(ModelMessage::from)
                .map_err(D::Error::custom),
            Some(other) => Err(D::Error::custom(format!(
                "unknown message kind {other:?} (expected \"request\" or \"response\")"
            ))),
            None => Err(D::Error::custom("message has no \"kind\"")),
        }
    }
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
    use serde_json::Value;

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

    /// Every part kind, unknown fields in their places, an unknown part kind with its
    /// keys in their order, and a response carrying `instructions` (not one of its
    /// fields): read field by field and written back, the text is the same.
    #[test]
    fn messages_read_field_by_field_are_written_back_unchanged() {
        let json = concat!(
            r#"[{"parts":[{"content":"sys","timestamp":"2026-01-01T00:00:00Z","dynamic_ref":null,"part_kind":"system-prompt"},"#,
            r#"{"content":["look",{"data":"-_8=","media_type":"image/png","vendor_metadata":null,"kind":"binary","identifier":"abc"}],"timestamp":"2026-01-01T00:00:00Z","part_kind":"user-prompt","later":1},"#,
            r#"{"tool_name":"t","content":{"rows":[1,2]},"tool_call_id":"c1","tool_kind":null,"metadata":{"k":"v"},"timestamp":"2026-01-01T00:00:00Z","outcome":"failed","part_kind":"tool-return"},"#,
            r#"{"content":[{"type":"x","loc":["a"],"msg":"m","input":1}],"tool_name":"t","tool_call_id":"c2","timestamp":"2026-01-01T00:00:00Z","part_kind":"retry-prompt"},"#,
            r#"{"zeta":1,"part_kind":"new-kind","alpha":{"b":2,"a":1}}],"#,
            r#""timestamp":"2026-01-01T00:00:00Z","instructions":"Be brief.","kind":"request","run_id":"r","conversation_id":null,"metadata":null,"state":"complete","x_new":[1]},"#,
            r#"{"parts":[{"content":"hm","id":null,"signature":"s","provider_name":null,"provider_details":null,"part_kind":"thinking"},"#,
            r#"{"tool_name":"t","args":{"q":1},"tool_call_id":"c3","tool_kind":null,"id":"i","provider_name":null,"provider_details":{"a":1},"part_kind":"tool-call"},"#,
            r#"{"content":"done","id":null,"provider_name":null,"provider_details":null,"part_kind":"text"}],"#,
            r#""usage":{"input_tokens":3,"cache_write_tokens":0,"cache_read_tokens":0,"output_tokens":2,"input_audio_tokens":0,"cache_audio_read_tokens":0,"output_audio_tokens":0,"details":{}},"#,
            r#""model_name":"m","timestamp":"2026-01-01T00:00:01Z","kind":"response","provider_name":"openai","provider_url":null,"provider_details":null,"#,
            r#""provider_response_id":null,"finish_reason":"stop","run_id":"r","conversation_id":null,"metadata":null,"state":"complete","z":1,"instructions":"odd","y":2}]"#
        );
        let messages = messages_from_json(json).unwrap();
        assert_eq!(messages_to_json(&messages).unwrap(), json);
        let request = messages[0].as_request().unwrap();
        assert!(matches!(request.parts[4], ModelRequestPart::Other(_)));
        assert_eq!(request.instructions.as_deref(), Some("Be brief."));
        assert!(matches!(
            &request.parts[2],
            ModelRequestPart::ToolReturn(t) if t.is_failed() && t.content["rows"][1] == 2
        ));
        let response = messages[1].as_response().unwrap();
        assert_eq!(response.extra["instructions"], "odd");
        assert_eq!(response.usage.input_tokens, 3);
        // A part read on its own goes through the same reader.
        let part: ModelResponsePart = serde_json::from_str(
            r#"{"tool_name":"t","args":"{}","tool_call_id":"c","part_kind":"tool-call"}"#,
        )
        .unwrap();
        assert!(
            matches!(part, ModelResponsePart::ToolCall(c) if c.args == Some(ToolArgs::Json("{}".into())))
        );
    }

    /// What the derived readers refused is refused, with their reasons.
    #[test]
    fn malformed_messages_are_refused_with_the_reason() {
        for (json, reason) in [
            (r#"[{"kind":"request"}]"#, "missing field `parts`"),
            (r#"[{"parts":[]}]"#, r#"message has no "kind""#),
            (
                r#"[{"parts":[{"content":"x"}],"kind":"request"}]"#,
                r#"request part has no "part_kind""#,
            ),
            (
                r#"[{"parts":[{"content":"x"}],"kind":"response"}]"#,
                r#"response part has no "part_kind""#,
            ),
            (
                r#"[{"parts":[{"tool_name":5,"content":"x","tool_call_id":"c","part_kind":"tool-return"}],"kind":"request"}]"#,
                "invalid type: integer `5`, expected a string",
            ),
            (
                r#"[{"parts":[{"content":"x","part_kind":"tool-return","tool_call_id":"c"}],"kind":"request"}]"#,
                "missing field `tool_name`",
            ),
            (
                r#"[{"parts":[{"content":"x","timestamp":null,"part_kind":"user-prompt"}],"kind":"request"}]"#,
                "invalid type: null, expected a string",
            ),
            (
                r#"[{"parts":"x","kind":"request"}]"#,
                "invalid type: string",
            ),
            (
                r#"[{"parts":[],"usage":null,"kind":"response"}]"#,
                "invalid type: null",
            ),
        ] {
            let err = messages_from_json(json).expect_err(json).to_string();
            assert!(err.contains(reason), "{json}: {err}");
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
