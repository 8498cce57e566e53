//! The HTTP transport under async-openai (its `middleware` escape hatch): a plain
//! reqwest call per attempt, no retry layer (the retry policy is ours), plus what
//! async-openai does not tell its caller:
//!
//! * an error status is read here, with its `Retry-After` header and the server's own
//!   message from a body of any shape (async-openai wants `{"error": {"code": "…"}}`
//!   and drops the headers); it reaches the client as a boxed [`HttpFailure`];
//! * every received chunk is recorded on the attempt's [`Probe`] (found through a task
//!   local set by the client): when bytes last arrived (the idle timeout), how many,
//!   the body's first and last bytes (async-openai ends a stream silently both on
//!   `[DONE]` and on a clean close; the tail tells them apart), and a byte cap for
//!   non-streamed bodies.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::SystemTime;

use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use futures::StreamExt;
use tokio::time::Instant;

use super::error::{HttpFailure, error_body_message, parse_retry_after};

/// Bytes of an error body read for its message.
const ERROR_BODY_LIMIT: usize = 64 * 1024;
/// Bytes of the body start kept for error messages.
const HEAD_BYTES: usize = 200;
/// Bytes of the body end kept to recognise `[DONE]`.
const TAIL_BYTES: usize = 32;

tokio::task_local! {
    /// The probe of the attempt being made on this task.
    pub(super) static PROBE: Arc<Probe>;
}

/// What one attempt's response looked like on the wire.
#[derive(Debug)]
pub(super) struct Probe {
    state: Mutex<ProbeState>,
    /// Cap for a body that is not an event stream.
    raw_limit: u64,
}

#[derive(Debug)]
struct ProbeState {
    last_activity: Instant,
    bytes: u64,
    head: Vec<u8>,
    tail: Vec<u8>,
    too_large: bool,
}

impl Probe {
    pub(super) fn new(raw_limit: u64) -> Self {
        Probe {
            state: Mutex::new(ProbeState {
                last_activity: Instant::now(),
                bytes: 0,
                head: Vec::new(),
                tail: Vec::new(),
                too_large: false,
            }),
            raw_limit,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ProbeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Something arrived.
    pub(super) fn touch(&self) {
        self.lock().last_activity = Instant::now();
    }

    /// When something last arrived (the attempt's start before anything did).
    pub(super) fn last_activity(&self) -> Instant {
        self.lock().last_activity
    }

    /// Records a body chunk; false once the body exceeds `limit`.
    fn record(&self, chunk: &[u8], limit: u64) -> bool {
        let mut s = self.lock();
        s.last_activity = Instant::now();
        s.bytes += chunk.len() as u64;
        if s.head.len() < HEAD_BYTES {
            let take = (HEAD_BYTES - s.head.len()).min(chunk.len());
            s.head.extend_from_slice(&chunk[..take]);
        }
        s.tail.extend_from_slice(chunk);
        if s.tail.len() > TAIL_BYTES {
            let cut = s.tail.len() - TAIL_BYTES;
            s.tail.drain(..cut);
        }
        if s.bytes > limit {
            s.too_large = true;
        }
        !s.too_large
    }

    /// Body bytes received.
    pub(super) fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    /// The body's first bytes, as text.
    pub(super) fn head(&self) -> String {
        String::from_utf8_lossy(&self.lock().head).into_owned()
    }

    /// Whether the body ended with the `[DONE]` event.
    pub(super) fn saw_done(&self) -> bool {
        let s = self.lock();
        String::from_utf8_lossy(&s.tail)
            .trim_end()
            .ends_with("[DONE]")
    }

    /// Whether the body was cut at the byte cap.
    pub(super) fn too_large(&self) -> bool {
        self.lock().too_large
    }
}

/// The cut at the byte cap, as the body stream's error.
#[derive(Debug)]
struct BodyTooLarge;

impl std::fmt::Display for BodyTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("response body too large")
    }
}

impl std::error::Error for BodyTooLarge {}

/// The tower service async-openai sends every request through.
#[derive(Debug, Clone)]
pub(super) struct Transport {
    http: reqwest::Client,
}

impl Transport {
    pub(super) fn new(http: reqwest::Client) -> Self {
        Transport { http }
    }
}

type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send + 'static>>;

impl tower_service::Service<HttpRequestFactory> for Transport {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let http = self.http.clone();
        let probe = PROBE.try_with(Arc::clone).ok();
        Box::pin(async move {
            let request = factory.build().await?;
            let response = http.execute(request).await.map_err(OpenAIError::Reqwest)?;
            if let Some(p) = &probe {
                p.touch();
            }
            let status = response.status();
            if !status.is_success() {
                return Err(OpenAIError::Boxed(Box::new(
                    read_failure(response, probe.as_deref()).await,
                )));
            }
            Ok(match probe {
                Some(p) => watch(response, p),
                None => response,
            })
        })
    }
}

/// Reads an error response: status, `Retry-After`, the server's message.
async fn read_failure(mut response: reqwest::Response, probe: Option<&Probe>) -> HttpFailure {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, SystemTime::now()));
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_LIMIT {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if let Some(p) = probe {
                    p.touch();
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) | Err(_) => break,
        }
    }
    body.truncate(ERROR_BODY_LIMIT);
    HttpFailure {
        status,
        message: error_body_message(&body, status),
        retry_after,
    }
}

/// The same response with its body passing through `probe`.
fn watch(response: reqwest::Response, probe: Arc<Probe>) -> reqwest::Response {
    let is_sse = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("event-stream"));
    // An event stream is capped by the answer it carries (the client counts it);
    // other bodies are read whole, so they are capped here.
    let limit = if is_sse { u64::MAX } else { probe.raw_limit };
    let mut builder = http::Response::builder()
        .status(response.status())
        .version(response.version());
    if let Some(headers) = builder.headers_mut() {
        *headers = response.headers().clone();
    }
    let body = response.bytes_stream().map(move |item| match item {
        Ok(chunk) => {
            if probe.record(&chunk, limit) {
                Ok(chunk)
            } else {
                Err(Box::new(BodyTooLarge) as Box<dyn std::error::Error + Send + Sync>)
            }
        }
        Err(e) => Err(Box::new(e) as Box<dyn std::error::Error + Send + Sync>),
    });
    let rebuilt = builder
        .body(reqwest::Body::wrap_stream(body))
        .expect("status, version and headers come from a valid response");
    reqwest::Response::from(rebuilt)
}
