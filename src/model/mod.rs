//! Model client: our messages in, a [`ModelResponse`] out, over any OpenAI-compatible
//! chat-completions endpoint, through async-openai (its `byot` methods with our own
//! lenient response types, and its `middleware` hook for our own transport).
//!
//! One job per file: [`wire`] builds the request body and holds the response types,
//! [`stream`] folds chunks into a response, [`error`] says what failed (and reads the
//! server's message from any error body), `transport` is the HTTP layer under
//! async-openai; this file is the client and its retry policy.
//!
//! * Streaming (SSE) text, thinking and tool-call deltas go to a callback as they
//!   arrive. A stream is complete when it carried a finish reason or ended with
//!   `[DONE]`; one that closes before that is a failed attempt ("the connection closed
//!   mid-answer"; before any event: "the connection closed before the server
//!   answered"), never a shorter answer.
//! * Limits (`[model]` keys): `connect_timeout_secs` for the TCP/TLS connection;
//!   `timeout_secs`, the idle timeout: the longest wait for the response headers and
//!   between body bytes (so a long answer that keeps streaming is never cut);
//!   `total_timeout_secs` (unset: none) for the whole request, retries included;
//!   `max_response_bytes` for the answer (text, reasoning and tool calls; a
//!   non-streamed body is also cut at four times that plus 1 MiB). `max_tokens` is
//!   sent when set; an answer that ended on it has finish reason `length`
//!   ([`ModelResponse::is_cut_off`]).
//! * Retries (see [`ModelError::retry_limit`]): connection failures and HTTP 408, 429,
//!   502, 503, 504 up to `max_retries` times, with exponential backoff (base delay
//!   doubling, capped at 8 s) or the server's `Retry-After` (seconds or an HTTP date)
//!   when that is longer; a `Retry-After` over 60 s is not waited for. An idle timeout
//!   and a stream cut before it finished are retried once. Nothing else is retried
//!   (other 4xx and 500 answers repeat), and no attempt is repeated once its deltas
//!   were handed out. Waits are cancellable.
//! * The API key is sent as a bearer token and appears nowhere else.

mod error;
mod stream;
mod transport;
mod wire;

/// The server's own words from an error body (shared with the reranker client).
pub(crate) use error::error_body_message;

use std::sync::Arc;
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::{OpenAIError, StreamError};
use futures::StreamExt;
use serde_json::Value;

use crate::config::ModelConfig;
use crate::engine::cancel::CancelToken;
use crate::engine::messages::ModelResponse;

// The engine's model interface, implemented here (kept reachable under `crate::model`).
pub use crate::engine::chat::{BoxFuture, ChatModel, ModelError, ModelRequestParams, StreamDelta};

use error::{
    HttpFailure, MAX_RETRY_AFTER, TransportFailure, classify_reqwest, json_error_code,
    json_error_message,
};
use stream::StreamAccumulator;
use transport::{PROBE, Probe, Transport};
use wire::{ChatChunk, ChatCompletion, WireBody, WireMemo};

/// A client for an OpenAI-compatible chat-completions endpoint.
#[derive(Clone)]
pub struct OpenAiModel {
    client: Client<OpenAIConfig>,
    config: ModelConfig,
    /// The latest request's messages as written (shared by the copies).
    written: Arc<std::sync::Mutex<WireMemo>>,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Where an attempt stood when it failed.
struct Progress<'a> {
    acc: &'a StreamAccumulator,
    shown: bool,
    probe: &'a Probe,
}

impl OpenAiModel {
    /// A client for `config`.
    pub fn new(config: ModelConfig) -> Result<Self, ModelError> {
        let http = crate::http::builder_for([config.base_url.as_str()])
            .connect_timeout(Duration::from_secs(config.connect_timeout_secs))
            .build()
            .map_err(|e| ModelError::Setup(crate::errors::chain(&e)))?;
        let openai = OpenAIConfig::new()
            .with_api_base(config.base_url.trim_end_matches('/'))
            .with_api_key(config.api_key.as_ref().map_or("", |k| k.expose()));
        // `Client::build`, not `with_config`: that one builds a default HTTP client of
        // its own first (loading the TLS roots), only to have it replaced.
        let client = Client::build(http.clone(), openai).with_http_service(Transport::new(http));
        Ok(OpenAiModel {
            client,
            config,
            written: Arc::default(),
        })
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

    fn too_large(&self) -> ModelError {
        ModelError::TooLarge {
            url: self.url(),
            limit: self.config.max_response_bytes,
        }
    }

    /// The byte cap for a body that is not an event stream.
    fn raw_limit(&self) -> u64 {
        self.config
            .max_response_bytes
            .saturating_mul(4)
            .saturating_add(1 << 20)
    }

    /// An error reported in the body of a 200 answer.
    fn error_in_body(&self, error: &Value) -> ModelError {
        let status = json_error_code(error)
            .filter(|s| (400..600).contains(s))
            .unwrap_or(500);
        ModelError::Http {
            url: self.url(),
            status,
            message: error::truncate(
                &json_error_message(error).unwrap_or_else(|| error.to_string()),
                500,
            ),
            retry_after: None,
        }
    }

    /// What the connection closing means at this point of the attempt.
    fn closed(&self, progress: Option<&Progress<'_>>, how: &str) -> ModelError {
        match progress {
            Some(p) if p.acc.saw_event || p.shown => ModelError::Interrupted {
                url: self.url(),
                detail: how.to_string(),
                shown: p.shown,
            },
            _ => ModelError::Unreachable {
                url: self.url(),
                detail: "the connection closed before the server answered".into(),
            },
        }
    }

    fn map_error(&self, e: OpenAIError, progress: Option<&Progress<'_>>) -> ModelError {
        if progress.is_some_and(|p| p.probe.too_large()) {
            return self.too_large();
        }
        match e {
            OpenAIError::Reqwest(e) => match classify_reqwest(&e) {
                TransportFailure::Tls(detail) => ModelError::Tls {
                    url: self.url(),
                    detail,
                },
                TransportFailure::Connect(detail) => ModelError::Unreachable {
                    url: self.url(),
                    detail: format!("could not connect ({detail})"),
                },
                TransportFailure::ConnectTimeout => ModelError::Unreachable {
                    url: self.url(),
                    detail: format!(
                        "could not connect within {} s (connect_timeout_secs)",
                        self.config.connect_timeout_secs
                    ),
                },
                TransportFailure::Body(_) => match progress {
                    // A non-streamed body: nothing was shown, another attempt is fine.
                    Some(p) => ModelError::Interrupted {
                        url: self.url(),
                        detail: format!("after {} bytes", p.probe.bytes()),
                        shown: p.shown,
                    },
                    None => self.closed(None, "the body broke off"),
                },
                TransportFailure::Redirect(detail) => ModelError::Redirected {
                    url: self.url(),
                    detail,
                },
                TransportFailure::Closed(detail) => ModelError::Unreachable {
                    url: self.url(),
                    detail: if detail.contains("closed") {
                        "the connection closed before the server answered".to_string()
                    } else {
                        format!("the connection closed before the server answered ({detail})")
                    },
                },
            },
            OpenAIError::Boxed(b) => match b.downcast::<HttpFailure>() {
                Ok(f) => ModelError::Http {
                    url: self.url(),
                    status: f.status,
                    message: f.message,
                    retry_after: f.retry_after,
                },
                Err(other) => ModelError::Unreachable {
                    url: self.url(),
                    detail: other.to_string(),
                },
            },
            OpenAIError::ApiError(api) => ModelError::Http {
                url: self.url(),
                status: api.status_code.as_u16(),
                message: error::truncate(&api.api_error.message, 500),
                retry_after: None,
            },
            OpenAIError::JSONDeserialize(err, body) => self.malformed(format!(
                "{err}; body starts with {:?}",
                error::truncate(&body, 200)
            )),
            OpenAIError::StreamError(err) => match *err {
                // eventsource-stream's wording for a body that broke off.
                StreamError::EventStream(msg) if msg.starts_with("Transport error") => {
                    self.closed(progress, "connection lost")
                }
                other => self.malformed(format!("bad event stream: {other}")),
            },
            other => self.malformed(other.to_string()),
        }
    }

    /// One attempt under the idle timeout, with its own probe.
    async fn attempt(
        &self,
        body: &WireBody,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
        emitted: &mut bool,
    ) -> Result<ModelResponse, ModelError> {
        let probe = Arc::new(Probe::new(self.raw_limit()));
        let work = PROBE.scope(probe.clone(), self.send(body, on_delta, emitted, &probe));
        let idle = Duration::from_secs(self.config.timeout_secs);
        tokio::pin!(work);
        loop {
            let deadline = probe.last_activity() + idle;
            tokio::select! {
                out = &mut work => return out,
                _ = tokio::time::sleep_until(deadline) => {
                    if probe.last_activity() + idle <= tokio::time::Instant::now() {
                        return Err(ModelError::Timeout {
                            url: self.url(),
                            secs: self.config.timeout_secs,
                        });
                    }
                }
            }
        }
    }

    /// Send, read (streaming or not), convert.
    async fn send(
        &self,
        body: &WireBody,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
        emitted: &mut bool,
        probe: &Probe,
    ) -> Result<ModelResponse, ModelError> {
        let empty = StreamAccumulator::default();
        if !self.config.stream {
            let progress = Progress {
                acc: &empty,
                shown: false,
                probe,
            };
            let out: ChatCompletion = self
                .client
                .chat()
                .create_byot(body)
                .await
                .map_err(|e| self.map_error(e, Some(&progress)))?;
            if let Some(e) = &out.error {
                return Err(self.error_in_body(e));
            }
            let acc = stream::from_completion(out).map_err(|d| self.malformed(d))?;
            if acc.content_bytes() > self.config.max_response_bytes {
                return Err(self.too_large());
            }
            return Ok(self.noted(acc.into_response(&self.config.model, &self.config.base_url)));
        }
        let mut stream = self
            .client
            .chat()
            .create_stream_byot::<_, ChatChunk>(body)
            .await
            .map_err(|e| {
                let progress = Progress {
                    acc: &empty,
                    shown: false,
                    probe,
                };
                self.map_error(e, Some(&progress))
            })?;
        let mut acc = StreamAccumulator::default();
        while let Some(item) = stream.next().await {
            let chunk = match item {
                Ok(chunk) => chunk,
                Err(e) => {
                    let progress = Progress {
                        acc: &acc,
                        shown: *emitted,
                        probe,
                    };
                    return Err(self.map_error(e, Some(&progress)));
                }
            };
            if let Some(e) = &chunk.error {
                return Err(self.error_in_body(e));
            }
            for delta in acc.push(chunk) {
                *emitted = true;
                on_delta(delta);
            }
            if acc.content_bytes() > self.config.max_response_bytes {
                return Err(self.too_large());
            }
        }
        // An answer is whole only when the server said why it ended: a stream that closes,
        // or sends `[DONE]`, without a finish reason is a cut one (asked once more, then a
        // clear failure; nothing incomplete is committed as an answer).
        if !acc.finished() {
            if !acc.saw_event && !probe.saw_done() {
                return Err(if probe.bytes() == 0 {
                    self.closed(None, "")
                } else {
                    self.malformed(format!(
                        "the stream carried no events; body starts with {:?}",
                        probe.head()
                    ))
                });
            }
            return Err(ModelError::Interrupted {
                url: self.url(),
                detail: if probe.saw_done() {
                    "the stream ended with [DONE] but without a finish reason".into()
                } else {
                    "the stream ended without a finish reason or [DONE]".into()
                },
                shown: *emitted,
            });
        }
        if !acc.saw_choice {
            return Err(self.malformed("the stream carried no choices"));
        }
        Ok(self.noted(acc.into_response(&self.config.model, &self.config.base_url)))
    }

    /// `response`, recording in `provider_details` the `max_tokens` this client sent when
    /// the answer was cut off (so the cause can be named: ours, or the server's limit).
    fn noted(&self, mut response: ModelResponse) -> ModelResponse {
        if response.is_cut_off()
            && let Some(n) = self.config.max_tokens
            && let Some(serde_json::Value::Object(details)) = &mut response.provider_details
        {
            details.insert("max_tokens".into(), n.into());
        }
        response
    }

    /// Attempts until one succeeds or the failure allows no more (see the module docs).
    async fn with_retries(
        &self,
        body: &WireBody,
        on_delta: &(dyn Fn(StreamDelta) + Send + Sync),
    ) -> Result<ModelResponse, ModelError> {
        let mut retries = 0u32;
        // A stream that broke off after its deltas were shown is made again once; if that
        // fails too, the error says both.
        let mut broke_off: Option<ModelError> = None;
        loop {
            let mut emitted = false;
            // A silent server's idle timeout is retried once (see `retry_limit`).
            on_delta(StreamDelta::Waiting {
                idle_timeout_secs: self.config.timeout_secs,
                retries_left: self.config.max_retries.min(1).saturating_sub(retries),
            });
            let e = match self.attempt(body, on_delta, &mut emitted).await {
                Ok(response) => return Ok(response),
                Err(e) => e,
            };
            let e = match broke_off.take() {
                Some(ModelError::Interrupted { url, detail, .. }) => {
                    return Err(ModelError::Interrupted {
                        url,
                        detail: format!("{detail}; tried once more: {e}"),
                        shown: true,
                    });
                }
                _ => e,
            };
            if emitted {
                if matches!(e, ModelError::Interrupted { shown: true, .. }) && retries == 0 {
                    on_delta(StreamDelta::Restart);
                    tracing::warn!(error = %e, "the answer broke off mid-stream; asking again once");
                    broke_off = Some(e);
                    retries += 1;
                    continue;
                }
                return Err(e);
            }
            if retries >= e.retry_limit(self.config.max_retries) {
                return Err(e);
            }
            let mut delay = backoff_delay(self.config.retry_base_delay_ms, retries);
            let asked = match &e {
                ModelError::Http {
                    retry_after: Some(wait),
                    ..
                } => Some(*wait),
                _ => None,
            };
            if let Some(wait) = asked {
                if wait > MAX_RETRY_AFTER {
                    return Err(match e {
                        ModelError::Http {
                            url,
                            status,
                            message,
                            retry_after,
                        } => ModelError::Http {
                            url,
                            status,
                            message: format!(
                                "{message} (the server asks to retry after {} s)",
                                wait.as_secs()
                            ),
                            retry_after,
                        },
                        other => other,
                    });
                }
                delay = delay.max(wait);
            }
            tracing::warn!(error = %e, attempt = retries + 1, ?delay, "model request failed; retrying");
            retries += 1;
            tokio::time::sleep(delay).await;
        }
    }
}

impl ChatModel for OpenAiModel {
    fn model_name(&self) -> &str {
        &self.config.model
    }

    fn wire_text(&self, messages: &[crate::engine::messages::ModelMessage]) -> Option<String> {
        wire::wire_text(messages).ok()
    }

    fn request<'a>(
        &'a self,
        params: ModelRequestParams<'a>,
        on_delta: &'a (dyn Fn(StreamDelta) + Send + Sync),
        cancel: &'a CancelToken,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            // Written once, sent as is by every attempt.
            let body = self
                .written
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .body(&self.config, params)
                .map_err(|e| ModelError::Setup(format!("cannot write the request: {e}")))?;
            crate::timing::mark("request: body written");
            let total = async {
                match self.config.total_timeout_secs {
                    Some(secs) => tokio::time::sleep(Duration::from_secs(secs)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(ModelError::Cancelled),
                _ = total => Err(ModelError::TotalTimeout {
                    url: self.url(),
                    secs: self.config.total_timeout_secs.unwrap_or_default(),
                }),
                r = self.with_retries(&body, on_delta) => r,
            }
        })
    }
}

/// Delay before retry number `attempt` (0-based): `base * 2^attempt`, capped at 8 s.
fn backoff_delay(base_ms: u64, attempt: u32) -> Duration {
    let ms = base_ms.saturating_mul(1u64 << attempt.min(20));
    Duration::from_millis(ms.min(8_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff_delay(100, 0), Duration::from_millis(100));
        assert_eq!(backoff_delay(100, 3), Duration::from_millis(800));
        assert_eq!(backoff_delay(100, 30), Duration::from_secs(8));
    }
}
