//! `groundwork inspect`: the model requests of a saved session, the stored (raw) history
//! beside what was actually sent (compacted), message by message.
//!
//! Sessions written by Groundwork carry a snapshot of every request. A session recorded by a
//! haiku.rag host has only `messages` and `state`; its requests are reconstructed from the
//! history (one per request message that the model answered), and their sent side is marked
//! as not recorded.

use serde::Serialize;
use serde_json::Value;

use crate::engine::events::{RequestSnapshot, TokenCounts};
use crate::engine::messages::ModelMessage;
use crate::engine::session::Session;

/// One request as `inspect` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct InspectedRequest {
    /// 1-based, over the whole session.
    pub number: usize,
    /// Whether the session recorded what was sent (false: reconstructed from history).
    pub recorded: bool,
    #[serde(flatten)]
    pub snapshot: RequestSnapshot,
}

/// The requests of a session, recorded or reconstructed.
pub fn requests(session: &Session) -> Vec<InspectedRequest> {
    if !session.groundwork.requests.is_empty() {
        return session
            .groundwork
            .requests
            .iter()
            .enumerate()
            .map(|(i, s)| InspectedRequest {
                number: i + 1,
                recorded: true,
                snapshot: s.clone(),
            })
            .collect();
    }
    let mut out = Vec::new();
    let msgs = &session.messages;
    for (i, m) in msgs.iter().enumerate() {
        let ModelMessage::Request(req) = m else {
            continue;
        };
        // A request the model answered is followed by a response.
        if !matches!(msgs.get(i + 1), Some(ModelMessage::Response(_))) {
            continue;
        }
        let history = msgs[..=i].to_vec();
        let instructions = req.instructions.clone().unwrap_or_default();
        let tokens = TokenCounts::estimate(&instructions, &history);
        let run_id = serde_json::to_value(req)
            .ok()
            .and_then(|v| v.get("run_id").and_then(Value::as_str).map(String::from))
            .unwrap_or_default();
        out.push(InspectedRequest {
            number: out.len() + 1,
            recorded: false,
            snapshot: RequestSnapshot {
                run_id,
                request: out.len() + 1,
                raw: history.clone(),
                compacted: history,
                tools: Vec::new(),
                instructions,
                raw_tokens: tokens.clone(),
                compacted_tokens: tokens,
            },
        });
    }
    out
}

/// A one-line description of every part of a message, e.g.
/// `request: user-prompt "What is…" | tool-return rag_search (812 chars)`.
pub fn describe_message(m: &ModelMessage) -> Vec<String> {
    let v = serde_json::to_value(m).unwrap_or(Value::Null);
    let parts = v
        .get("parts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    parts.iter().map(describe_part).collect()
}

fn short(s: &str, n: usize) -> String {
    let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= n {
        one_line
    } else {
        format!("{}…", one_line.chars().take(n).collect::<String>())
    }
}

fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => s.clone(),
                Value::Object(o) => format!(
                    "[{}]",
                    o.get("media_type")
                        .and_then(Value::as_str)
                        .unwrap_or("item")
                ),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(" "),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn describe_part(p: &Value) -> String {
    let kind = p.get("part_kind").and_then(Value::as_str).unwrap_or("?");
    let content = p.get("content").map(content_text).unwrap_or_default();
    let tool = p.get("tool_name").and_then(Value::as_str).unwrap_or("");
    match kind {
        "tool-return" => format!(
            "tool-return {tool} ({} chars) {}",
            content.chars().count(),
            short(&content, 48)
        ),
        "tool-call" => {
            let args = p.get("args").map(|a| match a {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            format!("tool-call {tool} {}", short(&args.unwrap_or_default(), 48))
        }
        "retry-prompt" => format!("retry-prompt {tool} {}", short(&content, 48)),
        _ => format!("{kind} {}", short(&content, 60)),
    }
}

/// The session overview: one line per request.
pub fn render_overview(reqs: &[InspectedRequest]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:>4}  {:>8}  {:>9}  {:>9}  {:>7}  {:>5}\n",
        "req", "messages", "raw tok", "sent tok", "saved", "tools"
    ));
    for r in reqs {
        let s = &r.snapshot;
        let saved = s.raw_tokens.total as i64 - s.compacted_tokens.total as i64;
        out.push_str(&format!(
            "{:>4}  {:>8}  {:>9}  {:>9}  {:>7}  {:>5}{}\n",
            r.number,
            s.raw.len(),
            s.raw_tokens.total,
            if r.recorded {
                s.compacted_tokens.total.to_string()
            } else {
                "-".into()
            },
            if r.recorded {
                saved.to_string()
            } else {
                "-".into()
            },
            s.tools.len(),
            if r.recorded {
                ""
            } else {
                "  (sent side not recorded)"
            },
        ));
    }
    out
}

/// One request in detail: instructions, tools, then raw beside sent, message by message,
/// with `≠` marking messages the compaction rewrote.
pub fn render_request(r: &InspectedRequest, width: usize) -> String {
    let s = &r.snapshot;
    let mut out = String::new();
    out.push_str(&format!(
        "request {} (run {}, request {} of its run){}\n",
        r.number,
        s.run_id,
        s.request,
        if r.recorded {
            ""
        } else {
            " - reconstructed from history; what was sent was not recorded"
        }
    ));
    let saved = s.raw_tokens.total as i64 - s.compacted_tokens.total as i64;
    out.push_str(&format!(
        "tokens: raw {} / sent {} / saved {saved}\n",
        s.raw_tokens.total, s.compacted_tokens.total
    ));
    let tools: Vec<&str> = s.tools.iter().map(|t| t.name.as_str()).collect();
    out.push_str(&format!(
        "tools: {}\n",
        if tools.is_empty() {
            "-".into()
        } else {
            tools.join(", ")
        }
    ));
    out.push_str("instructions:\n");
    for line in s.instructions.lines() {
        out.push_str(&format!("  {line}\n"));
    }
    let col = width.saturating_sub(12) / 2;
    out.push_str(&format!(
        "{:>3}   {:<col$} │ {}\n",
        "#", "raw (stored history)", "sent"
    ));
    let n = s.raw.len().max(s.compacted.len());
    for i in 0..n {
        let raw = s.raw.get(i);
        let sent = s.compacted.get(i);
        let differs = raw != sent;
        let left = raw.map(describe_message).unwrap_or_default();
        let right = sent.map(describe_message).unwrap_or_default();
        let rows = left.len().max(right.len()).max(1);
        for k in 0..rows {
            let l = left.get(k).map(|t| short(t, col)).unwrap_or_default();
            let rr = right.get(k).map(|t| short(t, col)).unwrap_or_default();
            let mark = if differs && k == 0 { "≠" } else { " " };
            let idx = if k == 0 { i.to_string() } else { String::new() };
            out.push_str(&format!("{idx:>3} {mark} {l:<col$} │ {rr}\n"));
        }
    }
    out
}
