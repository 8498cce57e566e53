//! What the agent loop needs from a model, and nothing about how it is reached: the
//! [`ChatModel`] trait, its request parameters, the streamed increments it reports, its
//! error type, and the chars/4 token estimates the request views use.
//!
//! `crate::model::OpenAiModel` implements the trait over HTTP; tests implement it in
//! memory (`tests/support/memory_model.rs`). Nothing here does I/O.

use std::pin::Pin;
use std::time::Duration;

use futures::Future;

use super::cancel::CancelToken;
use super::capability::ToolDef;
use super::messages::{ModelMessage, ModelResponse};

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
    /// Everything streamed so far is void: the stream broke off and the request is being
    /// made again (once), so its deltas will come anew.
    Restart,
    /// An attempt was sent and is waiting for its first bytes: it ends with an idle
    /// timeout after `idle_timeout_secs` of silence, and a silent server is asked
    /// `retries_left` more times.
    Waiting {
        /// The idle timeout.
        idle_timeout_secs: u64,
        /// Attempts left after this one when it times out.
        retries_left: u32,
    },
}

/// How long a question has waited for a silent model, for every face: "waiting for the
/// model: 35 s (idle timeout 120 s, will try once more)".
pub fn waiting_note(waited_secs: u64, idle_timeout_secs: u64, retries_left: u32) -> String {
    let then = match retries_left {
        0 => "the last try".to_string(),
        1 => "will try once more".to_string(),
        n => format!("will try {n} more times"),
    };
    format!("waiting for the model: {waited_secs} s (idle timeout {idle_timeout_secs} s, {then})")
}

/// After how many seconds of silence a face shows [`waiting_note`].
pub const WAITING_SHOWN_AFTER_SECS: u64 = 10;

/// What one model request needs.
#[derive(Debug, Clone, Copy)]
pub struct ModelRequestParams<'a> {
    /// Instructions for this request (sent as the leading system message).
    pub instructions: &'a str,
    /// The wire text of the messages before `messages`, sent as written after the
    /// instructions (see [`crate::engine::agent::Earlier`]); only for a model whose
    /// [`ChatModel::sends_earlier`] says so.
    pub earlier: Option<&'a str>,
    /// The messages to send (already rewritten by `wrap_model_request`).
    pub messages: &'a [ModelMessage],
    /// The tools offered.
    pub tools: &'a [ToolDef],
}

/// Something that answers model requests. `crate::model::OpenAiModel` is the real one;
/// tests may provide others.
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

    /// `messages` in the wire form [`ModelRequestParams::earlier`] takes, for a model
    /// that sends earlier messages as written; `None` for one that needs the whole
    /// history (a run over a history window refuses it).
    fn wire_text(&self, messages: &[ModelMessage]) -> Option<String> {
        let _ = messages;
        None
    }
}

/// Why a model request failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// No connection could be made, or it closed before the server answered.
    #[error("cannot reach model endpoint at {url}: {detail}")]
    Unreachable {
        /// The endpoint base URL.
        url: String,
        /// What went wrong.
        detail: String,
    },
    /// The TLS handshake failed (typically `https://` to a plain-HTTP port).
    #[error(
        "TLS handshake with model endpoint {url} failed ({detail}); is the server plain HTTP? Then use an http:// URL"
    )]
    Tls {
        /// The endpoint base URL.
        url: String,
        /// What the TLS layer said.
        detail: String,
    },
    /// A plain-http endpoint redirected to https, which its client does not follow
    /// ([`crate::http::RedirectedToHttps`]).
    #[error("model endpoint {url}: {detail}")]
    Redirected {
        /// The endpoint base URL.
        url: String,
        /// Where it redirected, and what to do.
        detail: String,
    },
    /// The endpoint answered with an error status.
    #[error("model endpoint {url} returned HTTP {status}: {message}")]
    Http {
        /// The endpoint base URL.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The server's own error message, from the body.
        message: String,
        /// The wait the server asked for (`Retry-After`), if any.
        retry_after: Option<Duration>,
    },
    /// The endpoint answered something that is not a chat completion.
    #[error("model endpoint {url} returned a malformed response: {detail}")]
    Malformed {
        /// The endpoint base URL.
        url: String,
        /// What was wrong, with a prefix of the body.
        detail: String,
    },
    /// Nothing arrived for `timeout_secs` (before the headers, or between stream events).
    #[error("model endpoint {url} sent nothing for {secs} s (the timeout_secs limit)")]
    Timeout {
        /// The endpoint base URL.
        url: String,
        /// The idle timeout.
        secs: u64,
    },
    /// The whole request (retries included) took longer than `total_timeout_secs`.
    #[error(
        "model endpoint {url} did not finish answering within {secs} s (the total_timeout_secs limit)"
    )]
    TotalTimeout {
        /// The endpoint base URL.
        url: String,
        /// The limit.
        secs: u64,
    },
    /// The answer started but the connection closed before it was complete.
    #[error("model endpoint {url}: the connection closed mid-answer ({detail})")]
    Interrupted {
        /// The endpoint base URL.
        url: String,
        /// How it ended.
        detail: String,
        /// Whether deltas of the attempt had already been handed out.
        shown: bool,
    },
    /// The answer exceeded `max_response_bytes`.
    #[error(
        "model endpoint {url} sent an answer larger than {limit} bytes (the max_response_bytes limit)"
    )]
    TooLarge {
        /// The endpoint base URL.
        url: String,
        /// The limit.
        limit: u64,
    },
    /// The run was cancelled while waiting for the model.
    #[error("model request cancelled")]
    Cancelled,
    /// The client could not be set up.
    #[error("cannot set up the model client: {0}")]
    Setup(String),
}

impl ModelError {
    /// How many further attempts this failure allows, given `[model] max_retries`:
    ///
    /// * a connection that could not be made or closed before the server answered, and
    ///   HTTP 408, 429, 502, 503, 504: `max_retries` (after `Retry-After` when given);
    /// * an idle timeout, and a stream cut before it finished (nothing shown yet): one;
    /// * everything else: none. Other 4xx and 500, 501, 505+ answers repeat for the same
    ///   request (llama.cpp's 500 "Failed to parse tool call arguments as JSON", a
    ///   context overflow); so do TLS failures, malformed and oversized answers. The
    ///   total timeout and cancellation end the request.
    ///
    /// The caller also never retries once deltas were handed out (they would repeat).
    pub fn retry_limit(&self, max_retries: u32) -> u32 {
        match self {
            ModelError::Unreachable { .. } => max_retries,
            ModelError::Http { status, .. } if is_transient_status(*status) => max_retries,
            ModelError::Timeout { .. } => max_retries.min(1),
            ModelError::Interrupted { shown: false, .. } => max_retries.min(1),
            _ => 0,
        }
    }

    /// Whether another attempt may succeed (see [`ModelError::retry_limit`]).
    pub fn is_retryable(&self) -> bool {
        self.retry_limit(u32::MAX) > 0
    }
}

/// HTTP statuses worth another attempt: the request itself was fine.
pub fn is_transient_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 502 | 503 | 504)
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
    super::tokens::message_tokens(message, &estimate_tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_transient_failures_are_retried() {
        let http = |status| ModelError::Http {
            url: "u".into(),
            status,
            message: "m".into(),
            retry_after: None,
        };
        for s in [408, 429, 502, 503, 504] {
            assert_eq!(http(s).retry_limit(2), 2, "{s}");
        }
        for s in [400, 401, 404, 413, 422, 500, 501, 505] {
            assert_eq!(http(s).retry_limit(2), 0, "{s}");
        }
        let timeout = ModelError::Timeout {
            url: "u".into(),
            secs: 1,
        };
        assert_eq!(timeout.retry_limit(5), 1);
        assert_eq!(timeout.retry_limit(0), 0);
        let cut = |shown| ModelError::Interrupted {
            url: "u".into(),
            detail: "d".into(),
            shown,
        };
        assert_eq!(cut(false).retry_limit(3), 1);
        assert_eq!(cut(true).retry_limit(3), 0);
        let tls = ModelError::Tls {
            url: "u".into(),
            detail: "d".into(),
        };
        assert!(!tls.is_retryable());
    }

    #[test]
    fn estimate_is_quarter_chars() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcde"), 2);
    }
}
