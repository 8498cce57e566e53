//! A scripted OpenAI-compatible server on `127.0.0.1:0` for tests.
//!
//! Each `POST /v1/chat/completions` takes the next [`Reply`] from a queue and records
//! the request body (parsed JSON) and its `Authorization` header. A reply is a text
//! answer, one or more tool calls, or both (optionally with reasoning text), sent as
//! plain JSON or as SSE depending on the request's `"stream"` flag (or forced with
//! [`Reply::force_sse`] / [`Reply::force_json`]); an HTTP error status with a body; or
//! malformed output (a raw body, SSE lines of garbage). [`ScriptedServer::responding`]
//! chooses each reply from the request instead (concurrent clients). Any reply can be delayed
//! before the headers ([`Reply::delay`]) and between SSE chunks after the first delta
//! ([`Reply::chunk_delay`]). Text is streamed in chunks of [`Reply::chunk_chars`]
//! characters and tool arguments in fragments of the same size, so tests see real
//! deltas. An exhausted script answers HTTP 500 `script exhausted`.
//!
//! Faults: an error status with any body ([`Reply::status_body`], e.g. llama.cpp's
//! integer `code`), extra response headers ([`Reply::header`], e.g. `Retry-After`), a
//! stream that closes cleanly after N events without a finish reason or `[DONE]`
//! ([`Reply::cut_after`]), one whose connection breaks after N events
//! ([`Reply::reset_after`]); [`silent_listener`] accepts and never answers and
//! [`closing_listener`] accepts and closes at once.
//!
//! `GET /v1/models` lists one model; `POST /v1/embeddings` answers with vectors from a
//! plug-in closure (default: a deterministic 8-dimensional hash embedding).
//!
//! ```ignore
//! let server = ScriptedServer::start(vec![
//!     Reply::tool_call("search", json!({"query": "zebra"})),
//!     Reply::text("Found it."),
//! ]).await;
//! let config = support::test_config(&server.base_url()); // ModelConfig for the server
//! // ... run the agent ...
//! assert_eq!(server.requests().len(), 2);
//! assert!(tool_names(&server.requests()[0]).contains(&"search".to_string()));
//! ```

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

/// Computes an embedding for one input text.
pub type EmbedFn = Arc<dyn Fn(&str) -> Vec<f32> + Send + Sync>;

/// Chooses the reply to a chat request from its body, once the queue is empty (for
/// concurrent clients, whose requests arrive in no fixed order).
pub type ResponderFn = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    kind: ReplyKind,
    delay: Option<Duration>,
    chunk_delay: Option<Duration>,
    chunk_chars: usize,
    force_stream: Option<bool>,
    finish_reason: Option<String>,
    headers: Vec<(String, String)>,
    cut: Option<Cut>,
    /// The `usage` reported (prompt, completion); default 11 and 7.
    usage: (u64, u64),
}

/// How a streamed answer is cut short.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// Send the role chunk and N more events, then end the body cleanly.
    Close(usize),
    /// Send the role chunk and N more events, then break the connection.
    Reset(usize),
}

#[derive(Debug, Clone)]
enum ReplyKind {
    Answer {
        thinking: Option<String>,
        text: Option<String>,
        calls: Vec<(String, String)>,
    },
    Status {
        status: u16,
        body: String,
    },
    Raw {
        content_type: String,
        body: String,
    },
    SseRaw(Vec<String>),
}

impl Reply {
    fn new(kind: ReplyKind) -> Self {
        Reply {
            kind,
            delay: None,
            chunk_delay: None,
            chunk_chars: 4,
            force_stream: None,
            finish_reason: None,
            headers: Vec::new(),
            cut: None,
            usage: (11, 7),
        }
    }

    /// Reports `prompt` and `completion` tokens in the answer's `usage`.
    pub fn usage(mut self, prompt: u64, completion: u64) -> Self {
        self.usage = (prompt, completion);
        self
    }

    /// A text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Reply::new(ReplyKind::Answer {
            thinking: None,
            text: Some(text.into()),
            calls: Vec::new(),
        })
    }

    /// One tool call (id `call_<n>` where n is its position in the script's reply).
    pub fn tool_call(name: impl Into<String>, args: Value) -> Self {
        Reply::tool_call_raw(name, args.to_string())
    }

    /// One tool call whose argument string is sent verbatim (may be invalid JSON).
    pub fn tool_call_raw(name: impl Into<String>, args: impl Into<String>) -> Self {
        Reply::new(ReplyKind::Answer {
            thinking: None,
            text: None,
            calls: vec![(name.into(), args.into())],
        })
    }

    /// Adds another tool call to this reply.
    pub fn and_tool_call(mut self, name: impl Into<String>, args: Value) -> Self {
        if let ReplyKind::Answer { calls, .. } = &mut self.kind {
            calls.push((name.into(), args.to_string()));
        }
        self
    }

    /// Adds text to this reply (a mix of text and tool calls).
    pub fn and_text(mut self, t: impl Into<String>) -> Self {
        if let ReplyKind::Answer { text, .. } = &mut self.kind {
            *text = Some(t.into());
        }
        self
    }

    /// Adds reasoning text (`reasoning_content`, as llama-server sends it).
    pub fn with_thinking(mut self, t: impl Into<String>) -> Self {
        if let ReplyKind::Answer { thinking, .. } = &mut self.kind {
            *thinking = Some(t.into());
        }
        self
    }

    /// An HTTP error status with a JSON error body carrying `message`.
    pub fn status(status: u16, message: impl Into<String>) -> Self {
        let body = json!({"error": {"message": message.into(), "type": "scripted_error", "param": null, "code": null}});
        Reply::new(ReplyKind::Status {
            status,
            body: body.to_string(),
        })
    }

    /// An HTTP error status with this exact body (JSON or not: the content type is
    /// `application/json` when it parses, else `text/plain`).
    pub fn status_body(status: u16, body: impl Into<String>) -> Self {
        Reply::new(ReplyKind::Status {
            status,
            body: body.into(),
        })
    }

    /// A 200 answer with this exact body and content type.
    pub fn raw(content_type: impl Into<String>, body: impl Into<String>) -> Self {
        Reply::new(ReplyKind::Raw {
            content_type: content_type.into(),
            body: body.into(),
        })
    }

    /// An SSE answer whose `data:` payloads are these strings, verbatim.
    pub fn sse_raw(events: Vec<String>) -> Self {
        Reply::new(ReplyKind::SseRaw(events))
    }

    /// Waits this long before sending anything.
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = Some(d);
        self
    }

    /// Waits this long before each SSE chunk after the first two (the role chunk and
    /// the first content chunk), so a test sees a delta and then a stall.
    pub fn chunk_delay(mut self, d: Duration) -> Self {
        self.chunk_delay = Some(d);
        self
    }

    /// Chunk size for streamed text and argument fragments (default 4).
    pub fn chunk_chars(mut self, n: usize) -> Self {
        self.chunk_chars = n.max(1);
        self
    }

    /// Answer with SSE even if the request did not ask for streaming.
    pub fn force_sse(mut self) -> Self {
        self.force_stream = Some(true);
        self
    }

    /// Answer with plain JSON even if the request asked for streaming.
    pub fn force_json(mut self) -> Self {
        self.force_stream = Some(false);
        self
    }

    /// Adds a response header (e.g. `Retry-After`).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Streams the role chunk and `n` more events, then ends the body cleanly: no
    /// finish reason, no usage, no `[DONE]`.
    pub fn cut_after(mut self, n: usize) -> Self {
        self.cut = Some(Cut::Close(n));
        self.force_stream = Some(true);
        self
    }

    /// Streams the role chunk and `n` more events, then breaks the connection (the
    /// chunked body is never terminated).
    pub fn reset_after(mut self, n: usize) -> Self {
        self.cut = Some(Cut::Reset(n));
        self.force_stream = Some(true);
        self
    }

    /// Overrides the finish reason (default `stop`, or `tool_calls` with calls).
    pub fn finish_reason(mut self, r: impl Into<String>) -> Self {
        self.finish_reason = Some(r.into());
        self
    }
}

/// Everything a chat request carried.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// The parsed JSON body (`Value::Null` if it was not JSON).
    pub body: Value,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
}

struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<RecordedRequest>>,
    embed: EmbedFn,
    model_id: String,
    served: Mutex<usize>,
    strict_tool_args: std::sync::atomic::AtomicBool,
    /// Whether each chat request's body is kept for [`ScriptedServer::requests`].
    keep_requests: std::sync::atomic::AtomicBool,
    responder: Mutex<Option<ResponderFn>>,
}

/// The running server. Dropping it stops the server.
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Deterministic 8-dimensional embedding from the bytes of `text`.
pub fn hash_embedding(text: &str) -> Vec<f32> {
    let mut v = [0f32; 8];
    for (i, b) in text.bytes().enumerate() {
        v[i % 8] += f32::from(b) / 255.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.iter().map(|x| x / norm).collect()
}

impl ScriptedServer {
    /// Starts a server answering with `replies`, in order.
    pub async fn start(replies: Vec<Reply>) -> Self {
        ScriptedServer::start_with(replies, Arc::new(hash_embedding)).await
    }

    /// Starts a server with a custom embedding function.
    pub async fn start_with(replies: Vec<Reply>, embed: EmbedFn) -> Self {
        let shared = Arc::new(Shared {
            replies: Mutex::new(replies.into()),
            requests: Mutex::new(Vec::new()),
            embed,
            model_id: "scripted-model".into(),
            served: Mutex::new(0),
            strict_tool_args: std::sync::atomic::AtomicBool::new(false),
            keep_requests: std::sync::atomic::AtomicBool::new(true),
            responder: Mutex::new(None),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/models", get(models))
            .route("/v1/embeddings", post(embeddings))
            // A model server reads the conversation however long it is (axum's 2 MB
            // default would refuse the benches' 5,000-question sessions).
            .layer(axum::extract::DefaultBodyLimit::disable())
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        // Each write goes out at once, as real servers send their stream: with Nagle's
        // algorithm on, a streamed reply on a reused connection waits ~40 ms for the
        // client's delayed acknowledgement before its next chunk.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        ScriptedServer { addr, shared, task }
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Answers like llama.cpp from now on: a request whose assistant messages carry
    /// tool-call arguments that are not a JSON object gets HTTP 500 "Failed to parse
    /// tool call arguments as JSON" (the scripted reply is not used).
    pub fn reject_invalid_tool_args(&self) {
        self.shared
            .strict_tool_args
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Stops keeping the chat requests' bodies (a benchmark that sends thousands of long
    /// histories reads none of them back; a real server keeps none either). Without a
    /// responder or the tool-argument check, a body is then only read through for its
    /// `stream` flag, not built as a JSON tree.
    pub fn forget_requests(&self) {
        self.shared
            .keep_requests
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Starts a server that answers every request with `respond(body)`.
    pub async fn responding(respond: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> Self {
        let server = ScriptedServer::start(Vec::new()).await;
        *server.shared.responder.lock().unwrap() = Some(Arc::new(respond));
        server
    }

    /// Queues another reply.
    pub fn push(&self, reply: Reply) {
        self.shared.replies.lock().unwrap().push_back(reply);
    }

    /// Replies not yet used.
    pub fn remaining(&self) -> usize {
        self.shared.replies.lock().unwrap().len()
    }

    /// Chat request bodies received so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared
            .requests
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.body.clone())
            .collect()
    }

    /// Chat requests with headers.
    pub fn recorded(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().unwrap().clone()
    }
}

/// The system message text of a recorded request (the instructions).
pub fn system_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "system")
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The tool names offered in a recorded request.
pub fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// The messages of a recorded request.
pub fn wire_messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

async fn models(State(shared): State<Arc<Shared>>) -> Response {
    axum::Json(json!({"object": "list", "data": [
        {"id": shared.model_id, "object": "model", "created": 0, "owned_by": "scripted"}
    ]}))
    .into_response()
}

async fn embeddings(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let inputs: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": (shared.embed)(t)}))
        .collect();
    axum::Json(
        json!({"object": "list", "data": data, "model": body["model"],
        "usage": {"prompt_tokens": 0, "total_tokens": 0}}),
    )
    .into_response()
}

async fn chat(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let respond = shared.responder.lock().unwrap().clone();
    let keep = shared
        .keep_requests
        .load(std::sync::atomic::Ordering::SeqCst);
    let strict = shared
        .strict_tool_args
        .load(std::sync::atomic::Ordering::SeqCst);
    // A body nothing reads back is read through (its JSON checked) for `stream` alone,
    // without building it as a tree, as a server that only answers would.
    let body: Value = if keep || strict || respond.is_some() {
        serde_json::from_slice(&body).unwrap_or(Value::Null)
    } else {
        #[derive(serde::Deserialize)]
        struct Head {
            #[serde(default)]
            stream: bool,
        }
        serde_json::from_slice::<Head>(&body).map_or(Value::Null, |h| json!({"stream": h.stream}))
    };
    let wants_stream = body["stream"] == Value::Bool(true);
    let responded = respond.map(|r| r(&body));
    let rejected = strict && has_invalid_tool_args(&body);
    if keep {
        shared.requests.lock().unwrap().push(RecordedRequest {
            body,
            authorization: headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        });
    }
    if rejected {
        return Response::builder()
            .status(500)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(
                json!({"error": {"code": 500, "message": "Failed to parse tool call arguments as JSON", "type": "server_error"}})
                    .to_string(),
            ))
            .unwrap();
    }
    let reply = shared.replies.lock().unwrap().pop_front().or(responded);
    let Some(reply) = reply else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "script exhausted").into_response();
    };
    let serial = {
        let mut served = shared.served.lock().unwrap();
        *served += 1;
        *served
    };
    if let Some(d) = reply.delay {
        tokio::time::sleep(d).await;
    }
    let stream = reply.force_stream.unwrap_or(wants_stream);
    let mut response = answer(&shared, &reply, stream, serial);
    for (name, value) in &reply.headers {
        response.headers_mut().insert(
            header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            header::HeaderValue::from_str(value).unwrap(),
        );
    }
    response
}

fn answer(shared: &Shared, reply: &Reply, stream: bool, serial: usize) -> Response {
    match reply.kind.clone() {
        ReplyKind::Status { status, body } => Response::builder()
            .status(status)
            .header(
                header::CONTENT_TYPE,
                if serde_json::from_str::<Value>(&body).is_ok() {
                    "application/json"
                } else {
                    "text/plain"
                },
            )
            .body(Body::from(body))
            .unwrap(),
        ReplyKind::Raw { content_type, body } => Response::builder()
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from(body))
            .unwrap(),
        ReplyKind::SseRaw(events) => sse_response(events, reply.chunk_delay, reply.cut),
        ReplyKind::Answer {
            thinking,
            text,
            calls,
        } => {
            let id = format!("chatcmpl-{serial}");
            let model = shared.model_id.clone();
            let finish = reply.finish_reason.clone().unwrap_or_else(|| {
                if calls.is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                }
                .to_string()
            });
            if stream {
                let events = sse_answer(
                    &id,
                    &model,
                    thinking,
                    text,
                    &calls,
                    &finish,
                    reply.chunk_chars,
                    serial,
                    reply.usage,
                );
                sse_response(events, reply.chunk_delay, reply.cut)
            } else {
                let tool_calls: Vec<Value> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, (n, a))| {
                        json!({"id": format!("call_{serial}_{i}"), "type": "function",
                        "function": {"name": n, "arguments": a}})
                    })
                    .collect();
                let mut message = json!({"role": "assistant", "content": text});
                if let Some(t) = thinking {
                    message["reasoning_content"] = json!(t);
                }
                if !tool_calls.is_empty() {
                    message["tool_calls"] = Value::Array(tool_calls);
                }
                axum::Json(json!({
                    "id": id, "object": "chat.completion", "created": 0, "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": {"prompt_tokens": reply.usage.0, "completion_tokens": reply.usage.1,
                        "total_tokens": reply.usage.0 + reply.usage.1},
                }))
                .into_response()
            }
        }
    }
}

fn has_invalid_tool_args(body: &Value) -> bool {
    wire_messages(body).iter().any(|m| {
        m["tool_calls"].as_array().into_iter().flatten().any(|c| {
            !matches!(
                c["function"]["arguments"]
                    .as_str()
                    .map(serde_json::from_str::<Value>),
                Some(Ok(Value::Object(_)))
            )
        })
    })
}

fn chunks(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

#[allow(clippy::too_many_arguments)]
fn sse_answer(
    id: &str,
    model: &str,
    thinking: Option<String>,
    text: Option<String>,
    calls: &[(String, String)],
    finish: &str,
    n: usize,
    serial: usize,
    usage: (u64, u64),
) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for piece in thinking
        .as_deref()
        .map(|t| chunks(t, n))
        .unwrap_or_default()
    {
        events.push(chunk(json!({"reasoning_content": piece}), Value::Null));
    }
    for piece in text.as_deref().map(|t| chunks(t, n)).unwrap_or_default() {
        events.push(chunk(json!({"content": piece}), Value::Null));
    }
    for (i, (name, args)) in calls.iter().enumerate() {
        events.push(chunk(
            json!({"tool_calls": [{"index": i, "id": format!("call_{serial}_{i}"), "type": "function",
                "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        ));
        for piece in chunks(args, n) {
            events.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
        }
    }
    events.push(chunk(json!({}), json!(finish)));
    events.push(
        json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [],
            "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1,
                "total_tokens": usage.0 + usage.1}})
        .to_string(),
    );
    events.push("[DONE]".to_string());
    events
}

fn sse_response(
    mut events: Vec<String>,
    chunk_delay: Option<Duration>,
    cut: Option<Cut>,
) -> Response {
    let reset = match cut {
        Some(Cut::Close(n)) => {
            events.truncate(n + 1);
            false
        }
        Some(Cut::Reset(n)) => {
            events.truncate(n + 1);
            true
        }
        None => false,
    };
    let mut items: Vec<Option<String>> = events.into_iter().map(Some).collect();
    if reset {
        items.push(None);
    }
    let stream =
        futures::stream::iter(items.into_iter().enumerate()).then(move |(i, e)| async move {
            // The role chunk and the first content chunk go out at once.
            if i > 1
                && let Some(d) = chunk_delay
            {
                tokio::time::sleep(d).await;
            }
            match e {
                Some(e) => Ok(Bytes::from(format!("data: {e}\n\n"))),
                None => {
                    // Let the events before the break reach the client first.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Err(std::io::Error::other("scripted connection reset"))
                }
            }
        });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// A listener on `127.0.0.1:0` that accepts connections and never answers (it reads
/// and discards what is sent). Returns `http://127.0.0.1:PORT/v1` and how many
/// connections it accepted.
pub async fn silent_listener() -> (
    String,
    Arc<std::sync::atomic::AtomicUsize>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(tokio::spawn(async move {
                use tokio::io::AsyncReadExt as _;
                let mut buf = [0u8; 4096];
                while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {}
                std::future::pending::<()>().await;
            }));
        }
    });
    (url, count, task)
}

/// A listener on `127.0.0.1:0` that accepts each connection and closes it at once,
/// before any response. Returns the base URL and how many connections it accepted.
pub async fn closing_listener() -> (
    String,
    Arc<std::sync::atomic::AtomicUsize>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    let task = tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(socket);
        }
    });
    (url, count, task)
}

use futures::StreamExt as _;
