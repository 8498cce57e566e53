//! The deterministic "hashembed-64" embedder (byte for byte the one in
//! `tests/fixtures/haiku/hashembed.py`, which built the haiku.rag fixture database) served as
//! an OpenAI-compatible `/v1/embeddings` endpoint on 127.0.0.1, so tests drive the real
//! async-openai embedder over HTTP.

#![allow(dead_code)]

use axum::{Json, Router, extract::State, http::StatusCode, routing::post};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex};

pub const MODEL: &str = "hashembed-64";
pub const DIM: usize = 64;

/// sha256 per `[a-z0-9]+` token of the lowercased text, bucket by the first four bytes
/// (little endian) mod 64, sign by the low bit of the fifth; L2-normalised in f64, then f32.
pub fn hashembed_dim(text: &str, dim: usize) -> Vec<f32> {
    let lower = text.to_lowercase();
    let mut v = vec![0.0f64; dim];
    let mut token = String::new();
    let flush = |token: &mut String, v: &mut Vec<f64>| {
        if token.is_empty() {
            return;
        }
        let h = Sha256::digest(token.as_bytes());
        let idx = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize % dim;
        let sign = if h[4] & 1 == 0 { 1.0 } else { -1.0 };
        v[idx] += sign;
        token.clear();
    };
    for c in lower.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            token.push(c);
        } else {
            flush(&mut token, &mut v);
        }
    }
    flush(&mut token, &mut v);
    if v.iter().all(|x| *x == 0.0) {
        v[0] = 1.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    v.iter().map(|x| (x / norm) as f32).collect()
}

pub fn hashembed(text: &str) -> Vec<f32> {
    hashembed_dim(text, DIM)
}

#[derive(Clone, Default)]
pub struct Served {
    /// Every input text received, in order.
    pub inputs: Arc<Mutex<Vec<String>>>,
}

/// A running embeddings server. Dropping it stops the server.
pub struct EmbedServer {
    pub url: String,
    pub served: Served,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for EmbedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct AppState {
    dim: usize,
    served: Served,
}

async fn embeddings(
    State(state): State<AppState>,
    Json(req): Json<Value>,
) -> Result<Json<Value>, (StatusCode, String)> {
    let inputs: Vec<String> = match req.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map(String::from))
            .collect::<Option<Vec<_>>>()
            .ok_or((StatusCode::BAD_REQUEST, "input must be strings".into()))?,
        _ => return Err((StatusCode::BAD_REQUEST, "missing input".into())),
    };
    state
        .served
        .inputs
        .lock()
        .unwrap()
        .extend(inputs.iter().cloned());
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": hashembed_dim(t, state.dim)}))
        .collect();
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "model": req.get("model").cloned().unwrap_or(Value::Null),
        "usage": {"prompt_tokens": 0, "total_tokens": 0},
    })))
}

/// Starts a hashembed server of the given dimension on 127.0.0.1 (random port). The URL
/// ends in `/v1`.
pub async fn start_dim(dim: usize) -> EmbedServer {
    let served = Served::default();
    let app = Router::new()
        .route("/v1/embeddings", post(embeddings))
        .with_state(AppState {
            dim,
            served: served.clone(),
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
    EmbedServer {
        url: format!("http://{addr}/v1"),
        served,
        task,
    }
}

pub async fn start() -> EmbedServer {
    start_dim(DIM).await
}
