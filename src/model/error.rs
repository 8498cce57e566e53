//! How an HTTP failure becomes a [`ModelError`] (the engine's error type, with its
//! retry policy, lives in `crate::engine::chat`), and the server's own words from an
//! error body.
//!
//! [`ModelError`]: crate::engine::chat::ModelError
//!
//! Error bodies are read leniently: `{"error": {"code": 400 | "400", "message": …}}`
//! (OpenAI, llama.cpp, vLLM), `{"error": "text"}` (Ollama), `{"message": …}`,
//! `{"detail": …}` (FastAPI servers) and plain text all give the server's message.

use std::time::{Duration, SystemTime};

use serde_json::Value;

/// The longest `Retry-After` wait honoured; a server asking for more is not retried.
pub(super) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Longest server message kept in an error.
const MESSAGE_LIMIT: usize = 500;

/// An error status as the transport saw it (carried through async-openai boxed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HttpFailure {
    pub status: u16,
    pub message: String,
    pub retry_after: Option<Duration>,
}

impl std::fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}: {}", self.status, self.message)
    }
}

impl std::error::Error for HttpFailure {}

/// The server's message from an error body: JSON in any of the usual shapes, else the
/// text itself; an empty body gives the status's reason phrase.
pub(crate) fn error_body_message(body: &[u8], status: u16) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let message = match serde_json::from_str::<Value>(text) {
        Ok(v) => json_error_message(&v).unwrap_or_else(|| v.to_string()),
        Err(_) => text.split_whitespace().collect::<Vec<_>>().join(" "),
    };
    if message.trim().is_empty() {
        return reason_phrase(status).to_string();
    }
    truncate(&message, MESSAGE_LIMIT)
}

/// The message inside a JSON error value, if it has one.
pub(super) fn json_error_message(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(m) => {
            if let Some(e) = m.get("error").filter(|e| !e.is_null()) {
                return json_error_message(e).or_else(|| Some(e.to_string()));
            }
            for key in ["message", "detail", "msg", "error_message"] {
                if let Some(found) = m.get(key).and_then(json_error_message) {
                    return Some(found);
                }
            }
            None
        }
        // FastAPI validation errors: `detail: [{"msg": …}, …]`.
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().filter_map(json_error_message).collect();
            (!parts.is_empty()).then(|| parts.join("; "))
        }
        _ => None,
    }
}

/// The numeric `code` of a JSON error value (`400` or `"400"`), if any.
pub(super) fn json_error_code(v: &Value) -> Option<u16> {
    let code = v.get("error").unwrap_or(v).get("code")?;
    match code {
        Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A `Retry-After` value: delay seconds, or an HTTP date (past dates wait zero).
pub(super) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if let Ok(secs) = value.parse::<f64>()
        && secs.is_finite()
        && secs >= 0.0
    {
        return Some(Duration::from_secs_f64(secs.min(1e9)));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let at = SystemTime::from(date);
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

fn reason_phrase(status: u16) -> &'static str {
    reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("no message")
}

/// What went wrong below HTTP, from a reqwest error.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum TransportFailure {
    /// The TLS handshake failed.
    Tls(String),
    /// The TCP connection could not be made.
    Connect(String),
    /// The connection could not be made within the connect timeout.
    ConnectTimeout,
    /// The connection closed or broke while the body was being read.
    Body(String),
    /// The connection closed before the response headers.
    Closed(String),
    /// A redirect was not followed (to https from a client without TLS roots).
    Redirect(String),
}

pub(super) fn classify_reqwest(e: &reqwest::Error) -> TransportFailure {
    let chain = crate::errors::chain(e);
    let root = root_cause(e);
    if e.is_redirect() {
        return TransportFailure::Redirect(root);
    }
    if looks_like_tls(&chain) {
        return TransportFailure::Tls(root);
    }
    if e.is_connect() {
        if e.is_timeout() {
            return TransportFailure::ConnectTimeout;
        }
        return TransportFailure::Connect(root);
    }
    if e.is_body() || e.is_decode() {
        return TransportFailure::Body(root);
    }
    TransportFailure::Closed(root)
}

fn looks_like_tls(chain: &str) -> bool {
    let lower = chain.to_ascii_lowercase();
    [
        "tls",
        "ssl",
        "certificate",
        "invalidcontenttype",
        "corrupt message",
        "handshake",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// The innermost cause's text (the one that says what happened).
fn root_cause(e: &dyn std::error::Error) -> String {
    let mut last = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        last = s.to_string();
        source = s.source();
    }
    last
}

pub(super) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let cut: String = s.chars().take(max).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_in_every_shape() {
        let llama = br#"{"error":{"code":400,"message":"request (15254 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":15254,"n_ctx":8192}}"#;
        assert!(
            error_body_message(llama, 400)
                .starts_with("request (15254 tokens) exceeds the available context size")
        );
        let not_found =
            br#"{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}"#;
        assert_eq!(error_body_message(not_found, 404), "File Not Found");
        assert_eq!(
            error_body_message(br#"{"error":{"code":"400","message":"m"}}"#, 400),
            "m"
        );
        assert_eq!(
            error_body_message(br#"{"error":"model 'x' not found"}"#, 404),
            "model 'x' not found"
        );
        assert_eq!(error_body_message(br#"{"message":"m2"}"#, 400), "m2");
        assert_eq!(
            error_body_message(br#"{"detail":"Not authenticated"}"#, 401),
            "Not authenticated"
        );
        assert_eq!(
            error_body_message(
                br#"{"detail":[{"loc":["body"],"msg":"field required"}]}"#,
                422
            ),
            "field required"
        );
        assert_eq!(
            error_body_message(b"  File Not Found\n", 404),
            "File Not Found"
        );
        assert_eq!(error_body_message(b"", 404), "Not Found");
        assert_eq!(
            error_body_message(br#"{"error":{"code":500}}"#, 500),
            r#"{"code":500}"#
        );
        assert!(
            error_body_message("x".repeat(5000).as_bytes(), 500)
                .chars()
                .count()
                <= 501
        );
        assert_eq!(
            json_error_code(&serde_json::json!({"error": {"code": 503}})),
            Some(503)
        );
        assert_eq!(
            json_error_code(&serde_json::json!({"error": {"code": "429"}})),
            Some(429)
        );
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_470);
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("1.5", now),
            Some(Duration::from_millis(1500))
        );
        // 2015-10-21T07:28:00Z is 10 s after `now`.
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
