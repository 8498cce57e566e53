//! A scripted rerank server on `127.0.0.1:0`: `POST /v1/rerank` speaks the common rerank
//! API (vLLM, llama.cpp `--reranking`, Cohere, Jina, Voyage) and records every request
//! body and its `Authorization` header.
//!
//! [`Behaviour::Reverse`] reorders deterministically: document `i` of `n` scores
//! `(i + 1) / n`, so the last candidate comes first; the answer lists every document (in
//! request order, as vLLM does) and leaves the `top_n` cut to the client. The faults: an
//! error status with a body, a body that is not a rerank answer, and a delay before
//! answering. [`closed_url`] is an address nobody listens on.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// How the server answers.
#[derive(Debug, Clone)]
pub enum Behaviour {
    /// Scores document `i` of `n` as `(i + 1) / n`.
    Reverse,
    /// An HTTP error with this body.
    Status(u16, String),
    /// HTTP 200 with this body (not a rerank answer).
    Raw(String),
    /// [`Behaviour::Reverse`] after this delay.
    Delay(Duration),
}

/// Each request's body and `Authorization` header.
type Received = Arc<Mutex<Vec<(Value, Option<String>)>>>;

#[derive(Clone)]
struct AppState {
    behaviour: Arc<Mutex<Behaviour>>,
    requests: Received,
}

pub struct RerankServer {
    /// The base URL, ending in `/v1`; the endpoint is `{url}/rerank`.
    pub url: String,
    state: AppState,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RerankServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RerankServer {
    pub async fn start(behaviour: Behaviour) -> Self {
        let state = AppState {
            behaviour: Arc::new(Mutex::new(behaviour)),
            requests: Arc::default(),
        };
        let app = Router::new()
            .route("/v1/rerank", post(rerank))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.ok();
        });
        RerankServer {
            url: format!("http://{addr}/v1"),
            state,
            task,
        }
    }

    /// The request bodies received, in order.
    pub fn requests(&self) -> Vec<Value> {
        let r = self.state.requests.lock().unwrap();
        r.iter().map(|(b, _)| b.clone()).collect()
    }

    /// The `Authorization` headers received, in order.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        let r = self.state.requests.lock().unwrap();
        r.iter().map(|(_, a)| a.clone()).collect()
    }

    /// The documents of request `i`.
    pub fn documents(&self, i: usize) -> Vec<String> {
        self.requests()[i]["documents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap().to_string())
            .collect()
    }
}

/// The score [`Behaviour::Reverse`] gives document `i` of `n`.
pub fn reverse_score(i: usize, n: usize) -> f64 {
    (i + 1) as f64 / n as f64
}

async fn rerank(State(state): State<AppState>, headers: HeaderMap, body: String) -> Response {
    let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    state.requests.lock().unwrap().push((parsed.clone(), auth));
    let behaviour = state.behaviour.lock().unwrap().clone();
    match behaviour {
        Behaviour::Status(code, body) => {
            (StatusCode::from_u16(code).unwrap(), body).into_response()
        }
        Behaviour::Raw(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Behaviour::Delay(d) => {
            tokio::time::sleep(d).await;
            reverse(&parsed)
        }
        Behaviour::Reverse => reverse(&parsed),
    }
}

fn reverse(request: &Value) -> Response {
    let n = request["documents"].as_array().map_or(0, Vec::len);
    let results: Vec<Value> = (0..n)
        .map(|i| json!({"index": i, "relevance_score": reverse_score(i, n)}))
        .collect();
    axum::Json(json!({
        "id": "rerank-scripted",
        "model": request["model"],
        "results": results,
        "usage": {"total_tokens": 0},
    }))
    .into_response()
}

/// A base URL on 127.0.0.1 where nothing listens (the port was bound, then freed).
pub fn closed_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}/v1")
}
