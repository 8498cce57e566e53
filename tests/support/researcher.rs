//! A scripted researcher for [`ScriptedServer::responding`]: it answers each request
//! from what the request carries, so concurrent questions get the right replies in any
//! order. What it does with a question is its [`Study`]: search, cite the first result
//! and answer; search and answer without citing (an invented answer); or answer at once.
//! The citation policy's redirect is answered with an empty citation and then a
//! declaration that the knowledge base does not say.
//!
//! [`ScriptedServer::responding`]: super::scripted_server::ScriptedServer::responding

use groundwork::capabilities::policy::REDIRECT_TAG;
use groundwork::host::transcript::result_ids;
use serde_json::{Value, json};

use super::scripted_server::Reply;

/// The answer after a cited chunk.
pub const GROUNDED: &str = "According to the knowledge base, it is so [1].";
/// The answer to a question it does not research.
pub const INVENTED: &str = "It was painted by a famous artist.";
/// The answer after an empty citation.
pub const DECLINED: &str = "The knowledge base does not say.";

/// The text of a wire message's content (a string or parts).
pub fn content_text(m: &Value) -> String {
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The questions of a request: its user messages that are not the redirect.
pub fn asked(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(content_text)
        .filter(|t| !t.contains(REDIRECT_TAG))
        .collect()
}

/// What the researcher does with a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Study {
    /// Search, cite the first result, answer.
    Cite,
    /// Search, then answer without citing.
    Uncited,
    /// Answer at once, without searching or citing.
    Answer,
}

/// The researcher: `study(question)` says what it does with each question.
pub fn researcher(
    study: impl Fn(&str) -> Study + Send + Sync + 'static,
) -> impl Fn(&Value) -> Reply + Send + Sync + 'static {
    move |body: &Value| {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let Some(last) = messages.last() else {
            return Reply::status(400, "no messages");
        };
        match last["role"].as_str() {
            Some("tool") => {
                let id = last["tool_call_id"].as_str().unwrap_or("");
                let call = messages
                    .iter()
                    .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
                    .find(|c| c["id"] == id)
                    .unwrap_or(Value::Null);
                let args: Value = call["function"]["arguments"]
                    .as_str()
                    .and_then(|a| serde_json::from_str(a).ok())
                    .unwrap_or(Value::Null);
                let question = asked(body).last().cloned().unwrap_or_default();
                match call["function"]["name"].as_str() {
                    Some("rag_search") if study(&question) == Study::Uncited => {
                        Reply::text(INVENTED)
                    }
                    Some("rag_search") => {
                        let ids: Vec<String> = result_ids(&content_text(last))
                            .into_iter()
                            .map(|(id, _)| id)
                            .take(1)
                            .collect();
                        Reply::tool_call("rag_cite", json!({ "chunk_ids": ids }))
                    }
                    _ if args["chunk_ids"].as_array().is_some_and(|a| a.is_empty()) => {
                        Reply::text(DECLINED)
                    }
                    _ => Reply::text(GROUNDED),
                }
            }
            _ => {
                let text = content_text(last);
                if text.contains(REDIRECT_TAG) {
                    Reply::tool_call("rag_cite", json!({"chunk_ids": []}))
                } else if study(&text) == Study::Answer {
                    Reply::text(INVENTED)
                } else {
                    Reply::tool_call("rag_search", json!({ "query": text }))
                }
            }
        }
    }
}
