//! Model client: our messages in, a [`ModelResponse`] out, over any OpenAI-compatible
//! chat-completions endpoint (through async-openai).
//!
//! * The request body is built here ([`build_request_body`]): the request's
//!   instructions become a leading system message, system-prompt parts system
//!   messages, user prompts user messages (images as `data:` URLs), tool returns tool
//!   messages, retry prompts a tool message (with the call id) or a user message,
//!   and responses assistant messages with their tool calls. Thinking parts are never
//!   sent.
//! * Responses are read with lenient types of our own (async-openai's `byot`), which
//!   also picks up `reasoning_content` deltas as thinking.
//! * Streaming (SSE) text, thinking and tool-call deltas go to a callback as they
//!   arrive.
//! * Each attempt has a connect timeout and an overall timeout. 429, 5xx, connection
//!   errors and timeouts are retried up to `max_retries` times with exponential
//!   backoff (base delay doubling, capped at 8 s), unless deltas of that attempt were
//!   already handed out (a retry would repeat them). async-openai's own retry layer
//!   is replaced by a plain transport so the count is ours.
//! * The API key is sent as a bearer token and appears nowhere else.

use std::pin::Pin;
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::ReqwestService;
use futures::{Future, StreamExt};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::cancel::CancelToken;
use super::capability::ToolDef;
use super::config::ModelConfig;
use super::messages::{
    ModelMessage, ModelRequestPart, ModelResponse, ModelResponsePart, RequestUsage, TextPart,
    ThinkingPart, ToolCallPart, UserContent, UserContentValue,
};
use super::prompts;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One streamed increment of a response.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamDelta {
    /// Answer text.
    Text(String),
    /// Reasoning text.
    Thinking(String),
    /// A fragment of tool call number `index`.
    ToolCall {
        /// Position of the call in the response.
        index: usize,
        /// The call id, when this fragment carries it.
        id: Option<String>,
        /// The tool name, when this fragment carries it.
        name: Option<String>,
        /// A fragment of the JSON arguments.
        args: Option<String>,
    },
}

/// What one model request needs.
#[derive(Debug, Clone, Copy)]
pub struct ModelRequestParams<'a> {
    /// Instructions for this request (sent as the leading system message).
    pub instructions: &'a str,
    /// The messages to send (already rewritten by `wrap_model_request`).
    pub messages: &'a [ModelMessage],
    /// The tools offered.
    pub tools: &'a [ToolDef],
}

/// Why a model request failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// No connection could be made, or it broke.
    #[error("cannot reach model endpoint at {url}: {detail}")]
    Unreachable {
        /// The endpoint base URL.
        url: String,
        /// What went wrong.
        detail: String,
    },
    /// The endpoint answered with an error status.
    #[error("model endpoint {url} returned HTTP {status}: {message}")]
    Http {
        /// The endpoint base URL.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The error message from the body.
        message: String,
    },
    /// The endpoint answered something that is not a chat completion.
    #[error("model endpoint {url} returned a malformed response: {detail}")]
    Malformed {
        /// The endpoint base URL.
        url: String,
        /// What was wrong, with a prefix of the body.
        detail: String,
    },
    /// The attempt took longer than the configured timeout.
    #[error("model endpoint {url} did not finish answering within {secs} s")]
    Timeout {
        /// The endpoint base URL.
        url: String,
        /// The timeout.
        secs: u64,
    },
    /// The run was cancelled while waiting for the model.
    #[error("model request cancelled")]
    Cancelled,
    /// The client could not be set up.
    #[error("cannot set up the model client: {0}")]
    Setup(String),
}

impl ModelError {
    /// Whether another attempt may succeed (429, 5xx, connection errors, timeouts).
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Unreachable { .. } | ModelError::Timeout { .. } => true,
            ModelError::Http { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

/// Something that answers model requests. [`OpenAiModel`] is the real one; tests may
/// provide others.
pub trait ChatModel: Send + Sync {
    /// The model name (for snapshots and responses).
    fn model_name(&self) -> &str;

    /// Makes one request. Streamed increments go to `on_delta` as they arrive.
    fn request<'a>(
        &'a self,
        params: ModelRequestParams<'a>,
        on_delta: &'a (dyn Fn(StreamDelta) + Send + Sync),
        cancel: &'a CancelToken,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>>;
}

/// A client for an OpenAI-compatible chat-completions endpoint.
#[derive(Clone)]
pub struct OpenAiModel {
    client: Client<OpenAIConfig>,
    config: ModelConfig,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OpenAiModel {
    /// A client for `config`.
    pub fn new(config: ModelConfig) -> Result<Self, ModelError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(config.connect_timeout_secs))
            .build()
            .map_err(|e| ModelError::Setup(e.to_string()))?;
        let openai = OpenAIConfig::new()
            .with_api_base(config.base_url.trim_end_matches('/'))
            .with_api_key(config.api_key.as_ref().map_or("", |k| k.expose()));
        let client = Client::with_config(openai).with_http_service(ReqwestService::new(http));
        Ok(OpenAiModel { client, config })
    }

    /// The configuration in use.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The model ids the endpoint lists (`GET /models`).
    pub async fn list_models(&self) -> Result<Vec<String>, ModelError> {
        let list: ModelList = self
            .client
            .models()
            .list_byot()
            .await
            .map_err(|e| self.map_error(e))?;
        Ok(list.data.into_iter().map(|m| m.id).collect())
    }

    /// Embeds `texts` with `model` (`POST /embeddings`), in input order.
    pub async fn embed(&self, model: &str, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        let body = json!({"model": model, "input": texts});
        let mut out: EmbeddingList = self
            .client
            .embeddings()
            .create_byot(body)
            .await
            .map_err(|e| self.map_error(e))?;
        out.data.sort_by_key(|d| d.index);
        if out.data.len() != texts.len() {
            return Err(self.malformed(format!(
                "{} embeddings for {} inputs",
                out.data.len(),
                texts.len()
            )));
        }
        Ok(out.data.into_iter().map(|d| d.embedding).collect())
    }

    fn url(&self) -> String {
        self.config.base_url.clone()
    }

    fn malformed(&self, detail: impl Into<String>) -> ModelError {
        ModelError::Malformed {
            url: self.url(),
            detail: detail.into(),
        }
    }

    fn map_error(&self, e: OpenAIError) -> ModelError {
        match e {
            OpenAIError::Reqwest(e) => {
                if let Some(status) = e.status() {
                    ModelError::Http {
                        url: self.url(),
                        status: status.as_u16(),
                        message: e.to_string(),
                    }
                } else if e.is_timeout() {
                    ModelError::Timeout {
                        url: self.url(),
                        secs: self.config.timeout_secs,
                    }
                } else {
                    ModelError::Unreachable {
                        url: self.url(),
                        detail: error_chain(&e),
                    }
                }
            }
            OpenAIError::ApiError(api) => ModelError::Http {
                url: self.url(),
                status: api.status_code.as_u16(),
                message: truncate(&api.api_error.message, 500),
            },
            OpenAIError::JSONDeserialize(err, body) => self.malformed(format!(
                "{err}; body starts with {:?}",
                truncate(&body, 200)
            )),
            OpenAIError::StreamError(err) => ModelError::Unreachable {
                url: self.url(),
                detail: format!("stream broke: {err}"),
            },
            other => self.malformed(other.to_string()),
        }
    }

    /// One attempt: send, read (streaming or not), convert.
    async fn attempt(
        &self,
        body: &Value,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
        emitted: &mut bool,
    ) -> Result<ModelResponse, ModelError> {
        if !self.config.stream {
            let out: ChatCompletion = self
                .client
                .chat()
                .create_byot(body)
                .await
                .map_err(|e| self.map_error(e))?;
            return self.completion_to_response(out);
        }
        let mut stream = self
            .client
            .chat()
            .create_stream_byot::<_, ChatChunk>(body)
            .await
            .map_err(|e| self.map_error(e))?;
        let mut acc = StreamAccumulator::default();
        while let Some(item) = stream.next().await {
            let chunk = item.map_err(|e| self.map_error(e))?;
            for delta in acc.push(chunk) {
                *emitted = true;
                on_delta(delta);
            }
        }
        if !acc.saw_choice {
            return Err(self.malformed("the stream carried no choices"));
        }
        Ok(self.finish(acc))
    }

    fn completion_to_response(&self, out: ChatCompletion) -> Result<ModelResponse, ModelError> {
        let choices = out
            .choices
            .ok_or_else(|| self.malformed("the JSON has no \"choices\""))?;
        let choice = choices
            .into_iter()
            .next()
            .ok_or_else(|| self.malformed("\"choices\" is empty"))?;
        let message = choice.message.unwrap_or_default();
        let mut acc = StreamAccumulator {
            id: out.id,
            model: out.model,
            usage: out.usage,
            finish_reason: choice.finish_reason,
            saw_choice: true,
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
        Ok(self.finish(acc))
    }

    fn finish(&self, acc: StreamAccumulator) -> ModelResponse {
        let mut parts = Vec::new();
        if !acc.thinking.is_empty() {
            parts.push(ModelResponsePart::Thinking(ThinkingPart::new(acc.thinking)));
        }
        if !acc.text.is_empty() {
            parts.push(ModelResponsePart::Text(TextPart::new(acc.text)));
        }
        let mut calls = acc.calls;
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
        if let Some(u) = acc.usage {
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
        response.model_name = Some(acc.model.unwrap_or_else(|| self.config.model.clone()));
        response.provider_name = Some("openai".to_string());
        response.provider_url = Some(self.config.base_url.clone());
        response.provider_response_id = acc.id;
        if let Some(raw) = acc.finish_reason {
            response.finish_reason = map_finish_reason(&raw).map(str::to_string);
            response.provider_details = Some(json!({ "finish_reason": raw }));
        }
        response
    }
}

impl ChatModel for OpenAiModel {
    fn model_name(&self) -> &str {
        &self.config.model
    }

    fn request<'a>(
        &'a self,
        params: ModelRequestParams<'a>,
        on_delta: &'a (dyn Fn(StreamDelta) + Send + Sync),
        cancel: &'a CancelToken,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let body = build_request_body(&self.config.model, params, self.config.stream);
            let timeout = Duration::from_secs(self.config.timeout_secs);
            let mut attempt_no = 0u32;
            loop {
                let mut emitted = false;
                let result = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => return Err(ModelError::Cancelled),
                    r = tokio::time::timeout(timeout, self.attempt(&body, on_delta, &mut emitted)) => {
                        r.unwrap_or_else(|_| Err(ModelError::Timeout {
                            url: self.url(),
                            secs: self.config.timeout_secs,
                        }))
                    }
                };
                match result {
                    Ok(response) => return Ok(response),
                    Err(e)
                        if e.is_retryable() && !emitted && attempt_no < self.config.max_retries =>
                    {
                        let delay = backoff_delay(self.config.retry_base_delay_ms, attempt_no);
                        tracing::warn!(error = %e, attempt = attempt_no + 1, ?delay, "model request failed; retrying");
                        attempt_no += 1;
                        tokio::select! {
                            biased;
                            _ = cancel.cancelled() => return Err(ModelError::Cancelled),
                            _ = tokio::time::sleep(delay) => {}
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        })
    }
}

/// Delay before retry number `attempt` (0-based): `base * 2^attempt`, capped at 8 s.
pub fn backoff_delay(base_ms: u64, attempt: u32) -> Duration {
    let ms = base_ms.saturating_mul(1u64 << attempt.min(20));
    Duration::from_millis(ms.min(8_000))
}

/// pydantic-ai's name for an OpenAI finish reason.
pub fn map_finish_reason(raw: &str) -> Option<&'static str> {
    match raw {
        "stop" => Some("stop"),
        "length" => Some("length"),
        "tool_calls" | "function_call" => Some("tool_call"),
        "content_filter" => Some("content_filter"),
        _ => None,
    }
}

/// The chat-completions JSON body for `params`.
pub fn build_request_body(model: &str, params: ModelRequestParams<'_>, stream: bool) -> Value {
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
    body.insert("model".into(), json!(model));
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
    if stream {
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
                "name": c.tool_name, "arguments": c.args_as_json(),
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

/// Rough token estimate: a quarter of the characters, rounded up. Good enough to
/// compare the raw and compacted request views; not a tokenizer.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// Tokens assumed for one image (a mid-size picture in OpenAI's tiling scheme).
pub const IMAGE_TOKEN_ESTIMATE: usize = 765;

/// Estimated tokens of one message: text, tool arguments and tool results at
/// chars/4, each image at [`IMAGE_TOKEN_ESTIMATE`], thinking not counted (not sent).
pub fn estimate_message_tokens(message: &ModelMessage) -> usize {
    match message {
        ModelMessage::Request(r) => r
            .parts
            .iter()
            .map(|p| match p {
                ModelRequestPart::SystemPrompt(s) => estimate_tokens(&s.content),
                ModelRequestPart::UserPrompt(u) => match &u.content {
                    UserContentValue::Text(s) => estimate_tokens(s),
                    UserContentValue::Items(items) => items
                        .iter()
                        .map(|i| match i {
                            UserContent::Text(s) => estimate_tokens(s),
                            UserContent::Binary(_) => IMAGE_TOKEN_ESTIMATE,
                            UserContent::Other(_) => 0,
                        })
                        .sum(),
                },
                ModelRequestPart::ToolReturn(t) => estimate_tokens(&t.content_text()),
                ModelRequestPart::RetryPrompt(rp) => estimate_tokens(&rp.content.text()),
                ModelRequestPart::Other(_) => 0,
            })
            .sum(),
        ModelMessage::Response(r) => r
            .parts
            .iter()
            .map(|p| match p {
                ModelResponsePart::Text(t) => estimate_tokens(&t.content),
                ModelResponsePart::ToolCall(c) => {
                    estimate_tokens(&c.tool_name) + estimate_tokens(&c.args_as_json())
                }
                ModelResponsePart::Thinking(_) | ModelResponsePart::Other(_) => 0,
            })
            .sum(),
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let cut: String = s.chars().take(max).collect();
        format!("{cut}…")
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

// ---- lenient wire types for responses ----

#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<WirePromptDetails>,
}

#[derive(Debug, Default, Deserialize)]
struct WirePromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Debug, Default, Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Debug, Deserialize)]
struct WireChoice {
    #[serde(default)]
    message: Option<WireMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ChatCompletion {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Option<Vec<WireChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct WireChunkChoice {
    #[serde(default)]
    delta: Option<WireMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ChatChunk {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Option<Vec<WireChunkChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct ModelList {
    data: Vec<ModelEntry>,
}

#[derive(Debug, Deserialize)]
struct ModelEntry {
    id: String,
}

#[derive(Debug, Deserialize)]
struct EmbeddingList {
    data: Vec<EmbeddingEntry>,
}

#[derive(Debug, Deserialize)]
struct EmbeddingEntry {
    #[serde(default)]
    index: usize,
    embedding: Vec<f32>,
}

#[derive(Debug, Default)]
struct PendingCall {
    index: usize,
    id: String,
    name: String,
    args: String,
}

/// Folds stream chunks into one response.
#[derive(Debug, Default)]
struct StreamAccumulator {
    id: Option<String>,
    model: Option<String>,
    text: String,
    thinking: String,
    calls: Vec<PendingCall>,
    usage: Option<WireUsage>,
    finish_reason: Option<String>,
    saw_choice: bool,
}

impl StreamAccumulator {
    /// Adds a chunk; returns the deltas it carried.
    fn push(&mut self, chunk: ChatChunk) -> Vec<StreamDelta> {
        let mut deltas = Vec::new();
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::messages::{ModelRequest, RetryPromptPart, ToolReturnPart, UserPromptPart};

    #[test]
    fn body_maps_every_part_kind() {
        let mut resp = ModelResponse::new(vec![
            ModelResponsePart::Thinking(ThinkingPart::new("secret reasoning")),
            ModelResponsePart::Text(TextPart::new("calling")),
            ModelResponsePart::ToolCall(ToolCallPart::new("search", r#"{"q":"x"}"#, "c1")),
        ]);
        resp.model_name = Some("m".into());
        let image = crate::engine::messages::BinaryContent::from_bytes(b"png", "image/png");
        let messages = vec![
            ModelMessage::Request(ModelRequest::new(vec![ModelRequestPart::UserPrompt(
                UserPromptPart::new(vec![
                    UserContent::Text("look".into()),
                    UserContent::Binary(image),
                ]),
            )])),
            ModelMessage::Response(resp),
            ModelMessage::Request(ModelRequest::new(vec![
                ModelRequestPart::ToolReturn(ToolReturnPart::new("search", json!("found"), "c1")),
                ModelRequestPart::RetryPrompt(RetryPromptPart::for_tool("search", "c2", "bad")),
            ])),
        ];
        let body = build_request_body(
            "m",
            ModelRequestParams {
                instructions: "be brief",
                messages: &messages,
                tools: &[],
            },
            true,
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
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff_delay(100, 0), Duration::from_millis(100));
        assert_eq!(backoff_delay(100, 3), Duration::from_millis(800));
        assert_eq!(backoff_delay(100, 30), Duration::from_secs(8));
    }

    #[test]
    fn estimate_is_quarter_chars() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcde"), 2);
    }
}
