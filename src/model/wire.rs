//! The chat-completions wire format: the request body built from our messages, and
//! lenient types for what servers send back (every field optional, so one server's
//! omissions are not "malformed").
//!
//! The instructions become a leading system message, system-prompt parts system
//! messages, user prompts user messages (images as `data:` URLs), tool returns tool
//! messages, retry prompts a tool message (with the call id) or a user message, and
//! responses assistant messages with their tool calls (arguments see
//! [`wire_arguments`]). Thinking parts are never sent.

use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::ModelConfig;
use crate::engine::capability::ToolDef;
use crate::engine::chat::ModelRequestParams;
use crate::engine::messages::{
    ModelMessage, ModelRequestPart, ModelResponse, ToolArgs, ToolCallPart, UserContent,
    UserContentValue,
};
use crate::engine::prompts;

/// The chat-completions JSON body for `params` (see [`WireMemo::body`]), its messages
/// written afresh.
#[cfg(test)]
pub(super) fn build_request_body(
    config: &ModelConfig,
    params: ModelRequestParams<'_>,
) -> serde_json::Result<WireBody> {
    WireMemo::default().body(config, params)
}

/// A request body as [`WireMemo::body`] wrote it: sent as it is, shared by the memo and
/// every attempt. It serialises as the raw JSON it holds, as `serde_json`'s own
/// `RawValue` does (through the same marker), without reading it through again to check
/// it: the writer made it from serialised parts, and a long history's body is 1.7 MB.
#[derive(Debug, Clone)]
pub struct WireBody(std::sync::Arc<String>);

/// The struct name `serde_json`'s serializer writes out verbatim (its `RawValue`).
const RAW_MARKER: &str = "$serde_json::private::RawValue";

impl WireBody {
    /// The body's JSON.
    pub fn get(&self) -> &str {
        &self.0
    }
}

impl Serialize for WireBody {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut raw = s.serialize_struct(RAW_MARKER, 1)?;
        raw.serialize_field(RAW_MARKER, self.get())?;
        raw.end()
    }
}

/// The wire form of the messages of a model's latest request. A request's history is
/// mostly the one the request before sent (the same messages, compaction's rewrites
/// included), so each of a run's later requests writes only what is new and copies the
/// rest from the body before. Holds the messages it wrote, so no other message takes
/// their addresses, and only those of the latest request.
#[derive(Default)]
pub(super) struct WireMemo {
    /// The latest request's messages in order, each with where its wire messages are in
    /// `body`: each wire message followed by one separator byte (`,`, or the list's `]`
    /// after the last).
    messages: Vec<(ModelMessage, std::ops::Range<usize>)>,
    /// The latest request's body.
    body: Option<WireBody>,
}

impl WireMemo {
    /// The chat-completions JSON body for `params`, in wire order: `model`, `messages`
    /// (the instructions first as a system message), `tools` when any, `max_tokens` when
    /// configured, and `stream` with usage when streaming. A message this memo holds
    /// from the request before is copied as written then (found at its position, or else
    /// by its identity); the others are written here. Everything goes into one text,
    /// sized after the body before: a long history is neither copied into a JSON tree
    /// nor written into allocations of its own, and a short-lived process pays for every
    /// fresh page it touches.
    pub(super) fn body(
        &mut self,
        config: &ModelConfig,
        params: ModelRequestParams<'_>,
    ) -> serde_json::Result<WireBody> {
        let earlier = std::mem::take(&mut self.messages);
        let earlier_body = self.body.take();
        let old = earlier_body
            .as_ref()
            .map_or(&b""[..], |b| b.get().as_bytes());
        let mut by_identity: Option<std::collections::HashMap<usize, usize>> = None;
        let earlier_len = params.earlier.map_or(0, str::len);
        let mut text =
            Vec::with_capacity(old.len().max(earlier_len) + params.instructions.len() + 4096);
        text.extend_from_slice(br#"{"model":"#);
        serde_json::to_writer(&mut text, &config.model)?;
        text.extend_from_slice(br#","messages":["#);
        if !params.instructions.trim().is_empty() {
            serde_json::to_writer(&mut text, &Role("system", params.instructions))?;
            text.push(b',');
        }
        // The earlier messages' wire text, each wire message followed by its comma.
        if let Some(earlier) = params.earlier {
            text.extend_from_slice(earlier.as_bytes());
        }
        let mut messages = Vec::with_capacity(params.messages.len());
        for (i, message) in params.messages.iter().enumerate() {
            let identity = message.identity();
            let same = match earlier.get(i) {
                Some((m, _)) if m.identity() == identity => Some(i),
                _ => by_identity
                    .get_or_insert_with(|| {
                        earlier
                            .iter()
                            .enumerate()
                            .map(|(j, (m, _))| (m.identity(), j))
                            .collect()
                    })
                    .get(&identity)
                    .copied(),
            };
            let start = text.len();
            match same.map(|j| earlier[j].1.clone()) {
                // Its wire messages as written, the last one's separator made a comma.
                Some(range) if !range.is_empty() => {
                    text.extend_from_slice(&old[range.start..range.end - 1]);
                    text.push(b',');
                }
                Some(_) => {}
                None => write_wire(message, &mut text)?,
            }
            messages.push((message.clone(), start..text.len()));
        }
        // The last separator (after the last message or the instructions) ends the list.
        match text.last_mut() {
            Some(last) if *last == b',' => *last = b']',
            _ => text.push(b']'),
        }
        if !params.tools.is_empty() {
            text.extend_from_slice(br#","tools":"#);
            let tools: Vec<_> = params.tools.iter().map(WireTool).collect();
            serde_json::to_writer(&mut text, &tools)?;
        }
        if let Some(n) = config.max_tokens {
            text.extend_from_slice(br#","max_tokens":"#);
            serde_json::to_writer(&mut text, &n)?;
        }
        if config.stream {
            text.extend_from_slice(br#","stream":true,"stream_options":{"include_usage":true}"#);
        }
        text.push(b'}');
        drop(earlier_body);
        let body = WireBody(std::sync::Arc::new(
            String::from_utf8(text).map_err(serde::ser::Error::custom)?,
        ));
        self.messages = messages;
        self.body = Some(body.clone());
        Ok(body)
    }
}

/// The wire messages of `messages` as a request body holds them, each followed by a
/// comma: what [`crate::engine::agent::Earlier::wire`] holds for messages a host keeps as
/// wire text.
pub(super) fn wire_text(messages: &[ModelMessage]) -> serde_json::Result<String> {
    let mut out = Vec::new();
    for message in messages {
        write_wire(message, &mut out)?;
    }
    String::from_utf8(out).map_err(serde::ser::Error::custom)
}

/// A message's wire messages, each followed by a comma: one per request part (parts of
/// an unknown kind are not sent), or the response's assistant message.
fn write_wire(message: &ModelMessage, out: &mut Vec<u8>) -> serde_json::Result<()> {
    match message {
        ModelMessage::Request(request) => {
            for part in &request.parts {
                if let ModelRequestPart::Other(m) = part {
                    tracing::debug!(part_kind = ?m.get("part_kind"), "request part not sent: unknown kind");
                    continue;
                }
                serde_json::to_writer(&mut *out, &WirePart(part))?;
                out.push(b',');
            }
        }
        ModelMessage::Response(response) => {
            serde_json::to_writer(&mut *out, &WireResponse(response))?;
            out.push(b',');
        }
    }
    Ok(())
}

struct WireTool<'a>(&'a ToolDef);

impl Serialize for WireTool<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Function<'a>(&'a ToolDef);
        impl Serialize for Function<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("name", &self.0.name)?;
                m.serialize_entry("description", &self.0.description)?;
                m.serialize_entry("parameters", &self.0.parameters)?;
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "function")?;
        m.serialize_entry("function", &Function(self.0))?;
        m.end()
    }
}

/// `{"role": role, "content": content}`.
struct Role<'a, C: Serialize + ?Sized>(&'static str, &'a C);

impl<C: Serialize + ?Sized> Serialize for Role<'_, C> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("role", self.0)?;
        m.serialize_entry("content", self.1)?;
        m.end()
    }
}

/// `{"role": "tool", "tool_call_id": id, "content": content}`.
fn tool_message<S: Serializer>(s: S, id: &str, content: &str) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(3))?;
    m.serialize_entry("role", "tool")?;
    m.serialize_entry("tool_call_id", id)?;
    m.serialize_entry("content", content)?;
    m.end()
}

/// A request part other than an unknown kind.
struct WirePart<'a>(&'a ModelRequestPart);

impl Serialize for WirePart<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            ModelRequestPart::SystemPrompt(p) => Role("system", &p.content).serialize(s),
            ModelRequestPart::UserPrompt(p) => {
                Role("user", &WireUserContent(&p.content)).serialize(s)
            }
            ModelRequestPart::ToolReturn(p) => tool_message(s, &p.tool_call_id, &p.content_str()),
            ModelRequestPart::RetryPrompt(p) => {
                let text =
                    prompts::fill(prompts::retry_suffix(), &[("content", &p.content.text())]);
                match &p.tool_name {
                    Some(_) => tool_message(s, &p.tool_call_id, &text),
                    None => Role("user", &text).serialize(s),
                }
            }
            ModelRequestPart::Other(_) => s.serialize_none(),
        }
    }
}

/// A user prompt's content: its text, or its items (images as `data:` URLs).
struct WireUserContent<'a>(&'a UserContentValue);

/// `{"type": "text", "text": text}`.
struct TextItem<'a>(&'a str);

impl Serialize for TextItem<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "text")?;
        m.serialize_entry("text", self.0)?;
        m.end()
    }
}

/// `{"type": "image_url", "image_url": {"url": url}}`.
struct ImageItem<'a, U: Serialize + ?Sized>(&'a U);

impl<U: Serialize + ?Sized> Serialize for ImageItem<'_, U> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Url<'a, U: Serialize + ?Sized>(&'a U);
        impl<U: Serialize + ?Sized> Serialize for Url<'_, U> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("url", self.0)?;
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "image_url")?;
        m.serialize_entry("image_url", &Url(self.0))?;
        m.end()
    }
}

impl Serialize for WireUserContent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let items = match self.0 {
            UserContentValue::Text(t) => return s.serialize_str(t),
            UserContentValue::Items(items) => items,
        };
        let mut seq = s.serialize_seq(None)?;
        for item in items {
            match item {
                UserContent::Text(t) => seq.serialize_element(&TextItem(t))?,
                UserContent::Binary(b) if b.is_image() => {
                    seq.serialize_element(&ImageItem(&b.data_url()))?
                }
                UserContent::Binary(b) => {
                    tracing::debug!(media_type = %b.media_type, "binary item not sent: not an image");
                }
                UserContent::Other(m) => {
                    if let (Some("image-url"), Some(url)) =
                        (m.get("kind").and_then(Value::as_str), m.get("url"))
                    {
                        seq.serialize_element(&ImageItem(url))?;
                    }
                }
            }
        }
        seq.end()
    }
}

/// `{"id": id, "type": "function", "function": {"name": name, "arguments": text}}`.
struct WireCall<'a>(&'a ToolCallPart);

impl Serialize for WireCall<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Function<'a>(&'a ToolCallPart);
        impl Serialize for Function<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("name", &self.0.tool_name)?;
                m.serialize_entry("arguments", &wire_arguments(self.0))?;
                m.end()
            }
        }
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("id", &self.0.tool_call_id)?;
        m.serialize_entry("type", "function")?;
        m.serialize_entry("function", &Function(self.0))?;
        m.end()
    }
}

/// A response as an assistant message with its tool calls (thinking is never sent).
struct WireResponse<'a>(&'a ModelResponse);

impl Serialize for WireResponse<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Calls<'a>(&'a ModelResponse);
        impl Serialize for Calls<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut seq = s.serialize_seq(None)?;
                for c in self.0.tool_calls() {
                    seq.serialize_element(&WireCall(c))?;
                }
                seq.end()
            }
        }
        let response = self.0;
        let text = response.text();
        let has_calls = response.tool_calls().next().is_some();
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("role", "assistant")?;
        if text.is_empty() && has_calls {
            m.serialize_entry("content", &Value::Null)?;
        } else {
            m.serialize_entry("content", &text)?;
        }
        if has_calls {
            m.serialize_entry("tool_calls", &Calls(response))?;
        }
        m.end()
    }
}

/// The arguments of a stored tool call as sent back to the server: the model's own
/// text when it is a JSON object, else `{}`. Arguments that are not a JSON object
/// (cut off by `max_tokens`, or invented by a weak model) are kept verbatim in the
/// session, but servers refuse them in a request (llama.cpp answers HTTP 500 "Failed
/// to parse tool call arguments as JSON"), and the model learns what went wrong from
/// the retry prompt that answers the call.
pub(super) fn wire_arguments(call: &ToolCallPart) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    match &call.args {
        Some(ToolArgs::Json(s)) if is_json_object(s) => Cow::Borrowed(s),
        Some(ToolArgs::Object(m)) => Cow::Owned(serde_json::to_string(m).unwrap_or_default()),
        _ => Cow::Borrowed("{}"),
    }
}

/// Whether `text` is one JSON object (read through, nothing kept).
fn is_json_object(text: &str) -> bool {
    struct Object;
    impl<'de> Deserialize<'de> for Object {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Object;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut m: A,
                ) -> Result<Object, A::Error> {
                    while m
                        .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                        .is_some()
                    {}
                    Ok(Object)
                }
            }
            d.deserialize_map(V)
        }
    }
    serde_json::from_str::<Object>(text).is_ok()
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
    use serde_json::json;

    fn body_value(config: &ModelConfig, params: ModelRequestParams<'_>) -> Value {
        serde_json::from_str(build_request_body(config, params).unwrap().get()).unwrap()
    }

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
        let body = body_value(
            &config,
            ModelRequestParams {
                earlier: None,
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

    /// A later request takes the messages the one before wrote and writes the others:
    /// its body is the one written afresh, and only the latest request's messages are
    /// kept.
    #[test]
    fn a_later_request_writes_only_its_new_messages() {
        let config = ModelConfig::default();
        let question = ModelMessage::from(ModelRequest::user("first"));
        let call = ModelMessage::from(ModelResponse::new(vec![ModelResponsePart::ToolCall(
            ToolCallPart::new("search", r#"{"q":"x"}"#, "c1"),
        )]));
        let mut history = vec![question.clone(), call];
        let mut memo = WireMemo::default();
        fn params(messages: &[ModelMessage]) -> ModelRequestParams<'_> {
            ModelRequestParams {
                earlier: None,
                instructions: "be brief",
                messages,
                tools: &[],
            }
        }
        let first = memo.body(&config, params(&history)).unwrap();
        assert_eq!(
            first.get(),
            build_request_body(&config, params(&history)).unwrap().get()
        );
        history.push(ModelMessage::from(ModelRequest::new(vec![
            ModelRequestPart::ToolReturn(ToolReturnPart::new("search", json!("hits"), "c1")),
        ])));
        // The question changed in place (a new message with other content).
        history[0] = ModelMessage::from(ModelRequest::user("first, reworded"));
        let second = memo.body(&config, params(&history)).unwrap();
        assert_eq!(
            second.get(),
            build_request_body(&config, params(&history)).unwrap().get()
        );
        assert!(
            second.get().contains("first, reworded")
                && second.get().contains(r#""content":"hits""#)
        );
        assert_eq!(memo.messages.len(), 3);
        assert!(
            memo.messages
                .iter()
                .all(|(m, _)| m.identity() != question.identity())
        );
        // A message dropped in front: the others are found by identity, not position.
        history.remove(1);
        let third = memo.body(&config, params(&history)).unwrap();
        assert_eq!(
            third.get(),
            build_request_body(&config, params(&history)).unwrap().get()
        );
        assert!(!third.get().contains("tool_calls"));
    }

    /// Earlier messages given as their wire text (a run over a history window) make
    /// the body the whole history makes, byte for byte, for every request of a run.
    #[test]
    fn earlier_wire_text_makes_the_body_of_the_whole_history() {
        let config = ModelConfig::default();
        let history = [
            ModelMessage::from(ModelRequest::user("first")),
            ModelMessage::from(ModelResponse::new(vec![ModelResponsePart::ToolCall(
                ToolCallPart::new("search", r#"{"q":"x"}"#, "c1"),
            )])),
            ModelMessage::from(ModelRequest::new(vec![ModelRequestPart::ToolReturn(
                ToolReturnPart::new("search", json!("hits"), "c1"),
            )])),
            ModelMessage::from(ModelResponse::new(vec![ModelResponsePart::Text(
                TextPart::new("answer"),
            )])),
            ModelMessage::from(ModelRequest::user("second")),
        ];
        let wire = wire_text(&history[..3]).unwrap();
        assert!(wire.ends_with(','), "each wire message ends with its comma");
        let (mut whole, mut split) = (WireMemo::default(), WireMemo::default());
        for end in [4, 5] {
            let full = whole
                .body(
                    &config,
                    ModelRequestParams {
                        earlier: None,
                        instructions: "be brief",
                        messages: &history[..end],
                        tools: &[],
                    },
                )
                .unwrap();
            let windowed = split
                .body(
                    &config,
                    ModelRequestParams {
                        earlier: Some(&wire),
                        instructions: "be brief",
                        messages: &history[3..end],
                        tools: &[],
                    },
                )
                .unwrap();
            assert_eq!(windowed.get(), full.get());
        }
        // Nothing after the earlier messages: the list still closes.
        let only = build_request_body(
            &config,
            ModelRequestParams {
                earlier: Some(&wire),
                instructions: "",
                messages: &[],
                tools: &[],
            },
        )
        .unwrap();
        let v: Value = serde_json::from_str(only.get()).unwrap();
        assert_eq!(v["messages"].as_array().unwrap().len(), 3);
    }

    /// What the client sends is the body as written, byte for byte: serialised the way
    /// async-openai serialises a request (`serde_json::to_vec`), the body is not quoted
    /// as a string or re-encoded. A `serde_json` that stopped writing its marker verbatim
    /// fails here.
    #[test]
    fn the_body_is_sent_as_written() {
        let messages = vec![ModelMessage::from(ModelRequest::user("say \"hi\"\nthen é"))];
        let body = build_request_body(
            &ModelConfig::default(),
            ModelRequestParams {
                earlier: None,
                instructions: "be brief",
                messages: &messages,
                tools: &[],
            },
        )
        .unwrap();
        let sent = serde_json::to_vec(&body).unwrap();
        assert_eq!(std::str::from_utf8(&sent).unwrap(), body.get());
        let parsed: Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(
            parsed["messages"][1]["content"],
            json!("say \"hi\"\nthen é")
        );
        // Inside another value too.
        let nested: Value =
            serde_json::from_str(&serde_json::to_string(&[&body, &body]).unwrap()).unwrap();
        assert_eq!(nested[1], parsed);
    }

    /// No messages, with or without instructions: the list is still well formed.
    #[test]
    fn an_empty_history_is_an_empty_or_system_only_list() {
        let config = ModelConfig {
            model: "m".into(),
            stream: false,
            ..ModelConfig::default()
        };
        for (instructions, messages) in [
            ("", r#""messages":[]"#),
            ("  ", r#""messages":[]"#),
            (
                "be brief",
                r#""messages":[{"role":"system","content":"be brief"}]"#,
            ),
        ] {
            let body = build_request_body(
                &config,
                ModelRequestParams {
                    earlier: None,
                    instructions,
                    messages: &[],
                    tools: &[],
                },
            )
            .unwrap();
            assert_eq!(body.get(), format!(r#"{{"model":"m",{messages}}}"#));
        }
    }

    #[test]
    fn the_body_is_written_in_wire_order() {
        let messages = vec![
            ModelMessage::from(ModelRequest::new(vec![ModelRequestPart::UserPrompt(
                UserPromptPart::new(vec![
                    UserContent::Text("look".into()),
                    UserContent::Binary(BinaryContent::from_bytes(b"png", "image/png")),
                ]),
            )])),
            ModelMessage::from(ModelResponse::new(vec![ModelResponsePart::ToolCall(
                ToolCallPart::new("search", r#"{"q":"x"}"#, "c1"),
            )])),
            ModelMessage::from(ModelRequest::new(vec![ModelRequestPart::ToolReturn(
                ToolReturnPart::new("search", json!({"hits": [1]}), "c1"),
            )])),
            ModelMessage::from(ModelResponse::new(vec![ModelResponsePart::Text(
                TextPart::new("done \"quoted\""),
            )])),
        ];
        let tools = vec![ToolDef {
            name: "search".into(),
            description: "Finds.".into(),
            parameters: json!({"type": "object"}),
            capability_id: None,
            kind: Default::default(),
        }];
        let config = ModelConfig {
            model: "m".into(),
            max_tokens: Some(8),
            ..ModelConfig::default()
        };
        let params = ModelRequestParams {
            earlier: None,
            instructions: "be brief",
            messages: &messages,
            tools: &tools,
        };
        let text = build_request_body(&config, params)
            .unwrap()
            .get()
            .to_string();
        assert_eq!(
            text,
            concat!(
                r#"{"model":"m","messages":["#,
                r#"{"role":"system","content":"be brief"},"#,
                r#"{"role":"user","content":[{"type":"text","text":"look"},"#,
                r#"{"type":"image_url","image_url":{"url":"data:image/png;base64,cG5n"}}]},"#,
                r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","#,
                r#""function":{"name":"search","arguments":"{\"q\":\"x\"}"}}]},"#,
                r#"{"role":"tool","tool_call_id":"c1","content":"{\"hits\":[1]}"},"#,
                r#"{"role":"assistant","content":"done \"quoted\""}],"#,
                r#""tools":[{"type":"function","function":{"name":"search","description":"Finds.","#,
                r#""parameters":{"type":"object"}}}],"max_tokens":8,"#,
                r#""stream":true,"stream_options":{"include_usage":true}}"#,
            )
        );
    }

    #[test]
    fn max_tokens_is_sent_when_set() {
        let config = ModelConfig {
            max_tokens: Some(64),
            stream: false,
            ..ModelConfig::default()
        };
        let params = ModelRequestParams {
            earlier: None,
            instructions: "",
            messages: &[],
            tools: &[],
        };
        let body = body_value(&config, params);
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
        assert_eq!(wire_arguments(&call(" {\"q\": 1}\n")), " {\"q\": 1}\n");
        assert_eq!(wire_arguments(&call(r#"{"q": 1} {"#)), "{}");
        let mut resp = ModelResponse::new(vec![ModelResponsePart::ToolCall(call(r#"{"q": "cut"#))]);
        resp.finish_reason = Some("length".into());
        let messages = vec![ModelMessage::from(resp)];
        let body = body_value(
            &ModelConfig::default(),
            ModelRequestParams {
                earlier: None,
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
