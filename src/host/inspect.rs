//! `groundwork inspect`: the model requests of a saved session, the stored (raw) history
//! beside what was actually sent (compacted), message by message.
//!
//! Sessions written by Groundwork carry a snapshot of every request. A session recorded by a
//! haiku.rag host has only `messages` and `state`; its requests are reconstructed from the
//! history (one per request message that the model answered), and their sent side is marked
//! as not recorded.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use crate::engine::events::RequestSnapshot;
use crate::engine::messages::{
    ModelMessage, ModelRequestPart, ModelResponsePart, RetryContent, ToolArgs, UserContent,
    UserContentValue,
};
use crate::engine::tokens::{TokenReport, signed};
use crate::session::Session;

use super::inspect_tokens as tokens;
pub use super::inspect_tokens::token_lines;
pub use crate::capabilities::compaction::CapsuleEntryRef;
use crate::session::linear::{self, LinearRequest, Piece, RawRef, Tables};

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

/// The requests of a session as `inspect` and the inspector see them: the recorded ones,
/// or for a session without (a haiku.rag host's) one per request message the model
/// answered. Each is rebuilt on demand, in time proportional to the session file.
pub struct SessionRequests<'a> {
    session: &'a Session,
    reconstructed: Option<(Vec<LinearRequest>, Tables)>,
}

impl<'a> SessionRequests<'a> {
    /// The requests of `session`.
    pub fn of(session: &'a Session) -> Self {
        if session.request_count() > 0 {
            return SessionRequests {
                session,
                reconstructed: None,
            };
        }
        let mut tables = Tables::default();
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
            let instructions = req.instructions.as_deref().unwrap_or_default().to_string();
            let run_id = serde_json::to_value(req)
                .ok()
                .and_then(|v| v.get("run_id").and_then(Value::as_str).map(String::from))
                .unwrap_or_default();
            let index = |t: &mut Vec<String>| match t.iter().rposition(|x| *x == instructions) {
                Some(k) => k,
                None => {
                    t.push(instructions.clone());
                    t.len() - 1
                }
            };
            if tables.tool_sets.is_empty() {
                tables.tool_sets.push(Vec::new());
            }
            out.push(LinearRequest {
                run_id,
                request: out.len() + 1,
                raw: RawRef {
                    upto: i + 1,
                    patches: Vec::new(),
                    extra: Vec::new(),
                },
                keep: 0,
                tail: vec![Piece::Raw(0, i + 1)],
                instructions: index(&mut tables.instructions),
                tools: 0,
                raw_tokens: None,
                sent_tokens: None,
                tokens: None,
            });
        }
        SessionRequests {
            session,
            reconstructed: Some((out, tables)),
        }
    }

    fn parts(&self) -> (&[LinearRequest], &Tables) {
        match &self.reconstructed {
            Some((r, t)) => (r, t),
            None => (
                &self.session.groundwork.requests,
                &self.session.groundwork.tables,
            ),
        }
    }

    /// Whether the session recorded what was sent.
    pub fn recorded(&self) -> bool {
        self.reconstructed.is_none()
    }

    /// How many requests there are.
    pub fn len(&self) -> usize {
        self.parts().0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Request `number` (1-based over the session).
    pub fn get(&self, number: usize) -> Option<InspectedRequest> {
        let (reqs, tables) = self.parts();
        let mut snapshot =
            linear::snapshot(reqs, number.checked_sub(1)?, &self.session.messages, tables)?;
        tokens::fill_tokens(&mut snapshot, &reqs[number - 1], &self.session.messages);
        Some(InspectedRequest {
            number,
            recorded: self.recorded(),
            snapshot,
        })
    }

    /// Every request, in one pass.
    pub fn all(&self) -> Vec<InspectedRequest> {
        let (reqs, tables) = self.parts();
        let recorded = self.recorded();
        linear::snapshots(reqs, &self.session.messages, tables)
            .enumerate()
            .map(|(i, mut snapshot)| {
                tokens::fill_tokens(&mut snapshot, &reqs[i], &self.session.messages);
                InspectedRequest {
                    number: i + 1,
                    recorded,
                    snapshot,
                }
            })
            .collect()
    }

    /// One overview row per request, without rebuilding any.
    pub fn overview(&self) -> Vec<OverviewRow> {
        let (reqs, tables) = self.parts();
        let recorded = self.recorded();
        linear::totals(reqs, &self.session.messages, tables)
            .into_iter()
            .zip(reqs)
            .enumerate()
            .map(|(i, (t, r))| OverviewRow {
                number: i + 1,
                recorded,
                messages: t.raw_messages,
                raw_tokens: t.raw_tokens,
                sent_tokens: t.sent_tokens,
                tools: t.tools,
                tokens: tokens::overview_tokens(r, &t, recorded, tables, &self.session.messages),
            })
            .collect()
    }
}

/// The requests of a session, recorded or reconstructed, each in full.
pub fn requests(session: &Session) -> Vec<InspectedRequest> {
    SessionRequests::of(session).all()
}

/// One line of the overview.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverviewRow {
    /// 1-based, over the whole session.
    pub number: usize,
    /// Whether the session recorded what was sent.
    pub recorded: bool,
    /// Messages in the stored history.
    pub messages: usize,
    /// Raw token estimate.
    pub raw_tokens: usize,
    /// Sent token estimate.
    pub sent_tokens: usize,
    /// Tools offered.
    pub tools: usize,
    /// Counted and provider-reported figures, when known.
    pub tokens: Option<TokenReport>,
}

impl From<&InspectedRequest> for OverviewRow {
    fn from(r: &InspectedRequest) -> Self {
        OverviewRow {
            number: r.number,
            recorded: r.recorded,
            messages: r.snapshot.raw.len(),
            raw_tokens: r.snapshot.raw_tokens.total,
            sent_tokens: r.snapshot.compacted_tokens.total,
            tools: r.snapshot.tools.len(),
            tokens: r.snapshot.tokens.clone(),
        }
    }
}

/// A one-line description of every part of a message, e.g.
/// `request: user-prompt "What is…" | tool-return rag_search (812 chars)`.
pub fn describe_message(m: &ModelMessage) -> Vec<String> {
    // Read from the typed parts, as their JSON would read (nothing is serialized but an
    // unusual content value): a request of a long session holds every tool result.
    match m {
        ModelMessage::Request(r) => r.parts.iter().map(describe_request_part).collect(),
        ModelMessage::Response(r) => r.parts.iter().map(describe_response_part).collect(),
    }
}

fn describe_request_part(p: &ModelRequestPart) -> String {
    match p {
        ModelRequestPart::SystemPrompt(s) => describe("system-prompt", &s.content, ""),
        ModelRequestPart::UserPrompt(u) => {
            let content: Cow<'_, str> = match &u.content {
                UserContentValue::Text(s) => Cow::Borrowed(s),
                UserContentValue::Items(items) => Cow::Owned(
                    items
                        .iter()
                        .map(|i| match i {
                            UserContent::Text(s) => Cow::Borrowed(s.as_str()),
                            UserContent::Binary(b) => Cow::Owned(format!("[{}]", b.media_type)),
                            UserContent::Other(o) => Cow::Owned(format!(
                                "[{}]",
                                o.get("media_type")
                                    .and_then(Value::as_str)
                                    .unwrap_or("item")
                            )),
                        })
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
            };
            describe("user-prompt", &content, "")
        }
        ModelRequestPart::ToolReturn(t) => {
            describe("tool-return", &content_text(&t.content), &t.tool_name)
        }
        ModelRequestPart::RetryPrompt(r) => {
            let content = match &r.content {
                RetryContent::Text(s) => Cow::Borrowed(s.as_str()),
                RetryContent::Errors(errors) => Cow::Owned(items_text(errors)),
            };
            describe(
                "retry-prompt",
                &content,
                r.tool_name.as_deref().unwrap_or(""),
            )
        }
        ModelRequestPart::Other(m) => describe_part(&Value::Object(m.clone())),
    }
}

fn describe_response_part(p: &ModelResponsePart) -> String {
    match p {
        ModelResponsePart::Text(t) => describe("text", &t.content, ""),
        ModelResponsePart::ToolCall(c) => {
            let args = match &c.args {
                Some(ToolArgs::Json(s)) => Cow::Borrowed(s.as_str()),
                Some(ToolArgs::Object(m)) => Cow::Owned(Value::Object(m.clone()).to_string()),
                None => Cow::Borrowed("null"),
            };
            describe("tool-call", &args, &c.tool_name)
        }
        ModelResponsePart::Thinking(t) => describe("thinking", &t.content, ""),
        ModelResponsePart::Other(m) => describe_part(&Value::Object(m.clone())),
    }
}

/// One part's line from its kind, content text and tool name.
fn describe(kind: &str, content: &str, tool: &str) -> String {
    match kind {
        "tool-return" => format!(
            "tool-return {tool} ({} chars) {}",
            content.chars().count(),
            short(content, 48)
        ),
        "tool-call" => format!("tool-call {tool} {}", short(content, 48)),
        "retry-prompt" => format!("retry-prompt {tool} {}", short(content, 48)),
        _ => format!("{kind} {}", short(content, 60)),
    }
}

/// The first `n` characters of `s` with its whitespace squeezed to single spaces, `…`
/// when cut (reading only as far as that).
fn short(s: &str, n: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    'words: for (i, word) in s.split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
            count += 1;
            if count > n {
                break;
            }
        }
        for ch in word.chars() {
            out.push(ch);
            count += 1;
            if count > n {
                break 'words;
            }
        }
    }
    if count <= n {
        out
    } else {
        let cut: String = out.chars().take(n).collect();
        format!("{cut}…")
    }
}

fn content_text(v: &Value) -> Cow<'_, str> {
    match v {
        Value::String(s) => Cow::Borrowed(s),
        Value::Array(items) => Cow::Owned(items_text(items)),
        Value::Null => Cow::Borrowed(""),
        other => Cow::Owned(other.to_string()),
    }
}

/// List content as text: strings as they are, objects by their media type.
fn items_text(items: &[Value]) -> String {
    items
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
        .join(" ")
}

fn describe_part(p: &Value) -> String {
    let kind = p.get("part_kind").and_then(Value::as_str).unwrap_or("?");
    let content = p.get("content").map(content_text).unwrap_or_default();
    let tool = p.get("tool_name").and_then(Value::as_str).unwrap_or("");
    if kind == "tool-call" {
        let args = match p.get("args") {
            Some(Value::String(s)) => Cow::Borrowed(s.as_str()),
            Some(other) => Cow::Owned(other.to_string()),
            None => Cow::Borrowed(""),
        };
        return describe(kind, &args, tool);
    }
    describe(kind, &content, tool)
}

/// The session overview: one line per request.
pub fn render_overview(reqs: &[InspectedRequest]) -> String {
    render_overview_rows(&reqs.iter().map(OverviewRow::from).collect::<Vec<_>>())
}

/// [`render_overview`] from overview rows. `raw tok` and `sent tok` are the chars/4
/// estimates of the messages and instructions; `counted` is what was sent by the
/// request's counter (named last), tool schemas included; `provider` and `out` are the
/// prompt and completion tokens the provider reported, and `diff` provider minus counted.
pub fn render_overview_rows(rows: &[OverviewRow]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:>4}  {:>8}  {:>9}  {:>9}  {:>7}  {:>5}  {:>9}  {:>9}  {:>7}  {:>8}  {}\n",
        "req",
        "messages",
        "raw tok",
        "sent tok",
        "saved",
        "tools",
        "counted",
        "provider",
        "out",
        "diff",
        "counter"
    ));
    let dash = || "-".to_string();
    for r in rows {
        let saved = r.raw_tokens as i64 - r.sent_tokens as i64;
        let t = r.tokens.as_ref();
        out.push_str(&format!(
            "{:>4}  {:>8}  {:>9}  {:>9}  {:>7}  {:>5}  {:>9}  {:>9}  {:>7}  {:>8}  {}{}\n",
            r.number,
            r.messages,
            r.raw_tokens,
            if r.recorded {
                r.sent_tokens.to_string()
            } else {
                "-".into()
            },
            if r.recorded {
                saved.to_string()
            } else {
                "-".into()
            },
            r.tools,
            t.map_or_else(dash, |t| t.sent.to_string()),
            t.and_then(|t| t.provider_prompt)
                .map_or_else(dash, |n| n.to_string()),
            t.and_then(|t| t.provider_completion)
                .map_or_else(dash, |n| n.to_string()),
            t.and_then(|t| t.difference).map_or_else(dash, signed),
            t.map_or_else(dash, |t| t.counter.clone()),
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
        "tokens: raw {} / sent {} / saved {saved} (≈ chars/4 of messages and instructions)\n",
        s.raw_tokens.total, s.compacted_tokens.total
    ));
    if let Some(t) = &s.tokens {
        for line in token_lines(t) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    let balance = CompactionBalance::of(s);
    if r.recorded && !balance.is_empty() {
        out.push_str(&balance.explain());
        out.push('\n');
    }
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
        // What the reranker did for a search in this message (a warning when it failed).
        for note in raw
            .or(sent)
            .map(part_notes)
            .unwrap_or_default()
            .into_iter()
            .flatten()
        {
            out.push_str(&format!("      ↳ {note}\n"));
        }
    }
    out
}

/// How a part of the sent request relates to the stored one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PartMark {
    /// Sent as stored.
    Same,
    /// The capsule of earlier cited evidence.
    Capsule,
    /// A tool result replaced by the receipt.
    Receipt,
    /// Our tagged pictures were stripped from it.
    StrippedPicture,
    /// The citation policy's redirect.
    Redirect,
    /// Rewritten in another way.
    Changed,
    /// Only in the sent request.
    Added,
    /// Only in the stored history.
    Removed,
}

impl PartMark {
    /// A short label for the mark.
    pub fn label(self) -> &'static str {
        match self {
            PartMark::Same => "",
            PartMark::Capsule => "capsule",
            PartMark::Receipt => "receipt",
            PartMark::StrippedPicture => "picture stripped",
            PartMark::Redirect => "redirect",
            PartMark::Changed => "rewritten",
            PartMark::Added => "added",
            PartMark::Removed => "removed",
        }
    }
}

/// One part of a request, stored beside sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartRow {
    /// `user-prompt`, `tool-return rag_search`, `text`, ...
    pub kind: String,
    /// The stored part's full text.
    pub raw: Option<String>,
    /// The sent part's full text.
    pub sent: Option<String>,
    pub mark: PartMark,
    /// What the reranker did for a search tool's return (from its metadata).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One message of a request, stored beside sent, part by part.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageRow {
    /// Index in the request.
    pub index: usize,
    /// `request` or `response`.
    pub role: &'static str,
    pub raw_tokens: Option<usize>,
    pub sent_tokens: Option<usize>,
    pub parts: Vec<PartRow>,
}

/// For each part of a message, the reranker's note when it is a search tool's return
/// whose metadata holds a [`RerankReport`](crate::store::rerank::RerankReport).
pub fn part_notes(m: &ModelMessage) -> Vec<Option<String>> {
    let ModelMessage::Request(r) = m else {
        return Vec::new();
    };
    r.parts
        .iter()
        .map(|p| match p {
            ModelRequestPart::ToolReturn(t) => t
                .metadata
                .as_ref()
                .and_then(crate::store::rerank::RerankReport::from_metadata)
                .map(|report| report.note()),
            _ => None,
        })
        .collect()
}

/// Text and kind of every part of a message, images as `[image: media/type]`.
pub fn part_texts(m: &ModelMessage) -> Vec<(String, String)> {
    let v = serde_json::to_value(m).unwrap_or(Value::Null);
    let parts = v
        .get("parts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    parts
        .iter()
        .map(|p| {
            let kind = p.get("part_kind").and_then(Value::as_str).unwrap_or("?");
            let tool = p.get("tool_name").and_then(Value::as_str).unwrap_or("");
            let label = if tool.is_empty() {
                kind.to_string()
            } else {
                format!("{kind} {tool}")
            };
            let text = match kind {
                "tool-call" => p
                    .get("args")
                    .map(|a| match a {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .unwrap_or_default(),
                "user-prompt" => match p.get("content") {
                    Some(Value::Array(items)) => items
                        .iter()
                        .map(|i| match i {
                            Value::String(s) => s.clone(),
                            Value::Object(o) => format!(
                                "[image: {}]",
                                o.get("media_type").and_then(Value::as_str).unwrap_or("?")
                            ),
                            other => other.to_string(),
                        })
                        .collect::<Vec<_>>()
                        .join("\n"),
                    Some(other) => content_text(other).into_owned(),
                    None => String::new(),
                },
                _ => p
                    .get("content")
                    .map(|c| content_text(c).into_owned())
                    .unwrap_or_default(),
            };
            (label, text)
        })
        .collect()
}

fn classify(raw: Option<&str>, sent: Option<&str>) -> PartMark {
    use crate::capabilities::compaction::{capsule_header, receipt};
    let capsule_first = capsule_header().lines().next().unwrap_or_default();
    match (raw, sent) {
        (Some(r), Some(s)) if r == s => {
            if s.contains(crate::host::transcript::REDIRECT_TAG) {
                PartMark::Redirect
            } else {
                PartMark::Same
            }
        }
        (_, Some(s)) if s.trim() == receipt().trim() => PartMark::Receipt,
        (_, Some(s)) if !capsule_first.is_empty() && s.contains(capsule_first) => PartMark::Capsule,
        (Some(r), Some(s)) if r.matches("[image:").count() > s.matches("[image:").count() => {
            PartMark::StrippedPicture
        }
        (None, Some(s)) if s.contains(crate::host::transcript::REDIRECT_TAG) => PartMark::Redirect,
        (Some(_), Some(_)) => PartMark::Changed,
        (None, Some(_)) => PartMark::Added,
        (Some(_), None) => PartMark::Removed,
        (None, None) => PartMark::Same,
    }
}

/// A request's stored and sent messages aligned message by message and part by part,
/// each sent part marked with what compaction (or the policy) did to it.
pub fn align(s: &RequestSnapshot) -> Vec<MessageRow> {
    let n = s.raw.len().max(s.compacted.len());
    (0..n)
        .map(|i| {
            let raw = s.raw.get(i);
            let sent = s.compacted.get(i);
            let role = match raw.or(sent) {
                Some(ModelMessage::Response(_)) => "response",
                _ => "request",
            };
            let rp = raw.map(part_texts).unwrap_or_default();
            let sp = sent.map(part_texts).unwrap_or_default();
            let notes = raw.or(sent).map(part_notes).unwrap_or_default();
            let parts = (0..rp.len().max(sp.len()))
                .map(|k| {
                    let r = rp.get(k);
                    let sn = sp.get(k);
                    PartRow {
                        kind: sn.or(r).map(|p| p.0.clone()).unwrap_or_default(),
                        mark: classify(r.map(|p| p.1.as_str()), sn.map(|p| p.1.as_str())),
                        raw: r.map(|p| p.1.clone()),
                        sent: sn.map(|p| p.1.clone()),
                        note: notes.get(k).cloned().flatten(),
                    }
                })
                .collect();
            MessageRow {
                index: i,
                role,
                raw_tokens: s
                    .raw_tokens
                    .per_message
                    .get(i)
                    .copied()
                    .filter(|_| raw.is_some()),
                sent_tokens: s
                    .compacted_tokens
                    .per_message
                    .get(i)
                    .copied()
                    .filter(|_| sent.is_some()),
                parts,
            }
        })
        .collect()
}

/// What compaction did to a request, in estimated tokens (chars/4 of the parts' text):
/// the capsule it added, the earlier results it replaced with receipts, the pictures it
/// stripped. Why a request was sent smaller, or larger, than it was stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CompactionBalance {
    /// Tokens of the capsule parts sent, how many capsule entries they carry, and the
    /// stored tokens of the parts the capsule stands in place of (an earlier result it
    /// replaced where it was).
    pub capsule: usize,
    pub capsule_entries: usize,
    pub capsule_replaced: usize,
    /// Results replaced by receipts: how many, their stored tokens, the receipts' tokens.
    pub receipts: usize,
    pub receipts_stored: usize,
    pub receipts_sent: usize,
    /// Parts whose pictures were stripped: stored and sent tokens.
    pub stripped_stored: usize,
    pub stripped_sent: usize,
}

impl CompactionBalance {
    /// Reads the balance off a request's aligned parts.
    pub fn of(s: &RequestSnapshot) -> Self {
        Self::from_rows(&align(s), capsule_entries(s).len())
    }

    /// Reads the balance off parts already aligned ([`align`]), the request carrying
    /// `capsule_entries` capsule entries.
    pub fn from_rows(rows: &[MessageRow], capsule_entries: usize) -> Self {
        let est = |t: &Option<String>| t.as_deref().map_or(0, crate::engine::chat::estimate_tokens);
        let mut b = CompactionBalance {
            capsule_entries,
            ..Default::default()
        };
        for part in rows.iter().flat_map(|m| m.parts.iter()) {
            match part.mark {
                PartMark::Capsule => {
                    b.capsule += est(&part.sent);
                    b.capsule_replaced += est(&part.raw);
                }
                PartMark::Receipt => {
                    b.receipts += 1;
                    b.receipts_stored += est(&part.raw);
                    b.receipts_sent += est(&part.sent);
                }
                PartMark::StrippedPicture => {
                    b.stripped_stored += est(&part.raw);
                    b.stripped_sent += est(&part.sent);
                }
                _ => {}
            }
        }
        b
    }

    /// Whether compaction touched the request at all.
    pub fn is_empty(&self) -> bool {
        self.capsule == 0 && self.receipts == 0 && self.stripped_stored == self.stripped_sent
    }

    /// One line for a reader: what was added, what was saved, and which weighs more.
    pub fn explain(&self) -> String {
        let saved_by_receipts = self.receipts_stored.saturating_sub(self.receipts_sent);
        let saved_by_stripping = self.stripped_stored.saturating_sub(self.stripped_sent);
        let saved = saved_by_receipts + saved_by_stripping + self.capsule_replaced;
        let mut parts = Vec::new();
        if self.capsule > 0 {
            parts.push(format!(
                "the capsule adds ≈{} tok ({} entr{}){}",
                thousands_plain(self.capsule),
                self.capsule_entries,
                if self.capsule_entries == 1 {
                    "y"
                } else {
                    "ies"
                },
                if self.capsule_replaced > 0 {
                    format!(
                        " in place of ≈{} tok of an earlier result",
                        thousands_plain(self.capsule_replaced)
                    )
                } else {
                    String::new()
                }
            ));
        }
        if self.receipts > 0 {
            parts.push(format!(
                "{} {} ≈{} tok of earlier results (−{})",
                self.receipts,
                if self.receipts == 1 {
                    "receipt replaces"
                } else {
                    "receipts replace"
                },
                thousands_plain(self.receipts_stored),
                thousands_plain(saved_by_receipts)
            ));
        }
        if saved_by_stripping > 0 {
            parts.push(format!(
                "stripped pictures save ≈{} tok",
                thousands_plain(saved_by_stripping)
            ));
        }
        let verdict = if self.capsule > 0 && saved == 0 {
            "; nothing earlier was replaced, so the request grows by it".to_string()
        } else if self.capsule > saved {
            format!(
                ": the capsule outweighs what was saved by ≈{} tok",
                thousands_plain(self.capsule - saved)
            )
        } else {
            String::new()
        };
        format!("compaction: {}{verdict}", parts.join(" · "))
    }
}

fn thousands_plain(n: usize) -> String {
    crate::engine::tokens::thousands(n as u64)
}

/// The capsule entries of what request `s` sent (none when it carried no capsule), in
/// capsule order: the cited chunks the inspector lets one select and ground.
pub fn capsule_entries(s: &RequestSnapshot) -> Vec<CapsuleEntryRef> {
    use crate::capabilities::compaction::{capsule_entry_refs, capsule_header};
    let first = capsule_header().lines().next().unwrap_or_default();
    let mut out: Vec<CapsuleEntryRef> = Vec::new();
    if first.is_empty() {
        return out;
    }
    for m in &s.compacted {
        for (_, text) in part_texts(m) {
            if !text.contains(first) {
                continue;
            }
            for e in capsule_entry_refs(&text) {
                if !out.iter().any(|o| o.chunk_id == e.chunk_id) {
                    out.push(e);
                }
            }
        }
    }
    out
}

/// A unified diff of the stored and sent request, one block per message.
pub fn unified_diff(s: &RequestSnapshot) -> String {
    let flatten = |msgs: &[ModelMessage]| {
        let mut out = String::new();
        for (i, m) in msgs.iter().enumerate() {
            for (kind, text) in part_texts(m) {
                out.push_str(&format!("#{i} {kind}\n"));
                for line in text.lines() {
                    out.push_str(&format!("    {line}\n"));
                }
            }
        }
        out
    };
    let raw = flatten(&s.raw);
    let sent = flatten(&s.compacted);
    similar::TextDiff::from_lines(&raw, &sent)
        .unified_diff()
        .context_radius(2)
        .header("stored history", "sent")
        .to_string()
}

#[cfg(test)]
mod balance_tests {
    use super::*;

    #[test]
    fn the_balance_says_which_side_weighs_more() {
        let grew = CompactionBalance {
            capsule: 5000,
            capsule_entries: 4,
            receipts: 2,
            receipts_stored: 1200,
            receipts_sent: 100,
            ..Default::default()
        };
        assert_eq!(
            grew.explain(),
            "compaction: the capsule adds ≈5,000 tok (4 entries) · 2 receipts replace ≈1,200 tok of earlier results (−1,100): the capsule outweighs what was saved by ≈3,900 tok"
        );
        let in_place = CompactionBalance {
            capsule: 700,
            capsule_entries: 1,
            capsule_replaced: 250,
            ..Default::default()
        };
        assert_eq!(
            in_place.explain(),
            "compaction: the capsule adds ≈700 tok (1 entry) in place of ≈250 tok of an earlier result: the capsule outweighs what was saved by ≈450 tok"
        );
        let shrank = CompactionBalance {
            capsule: 300,
            capsule_entries: 1,
            capsule_replaced: 0,
            receipts: 1,
            receipts_stored: 1200,
            receipts_sent: 100,
            stripped_stored: 900,
            stripped_sent: 20,
        };
        assert_eq!(
            shrank.explain(),
            "compaction: the capsule adds ≈300 tok (1 entry) · 1 receipt replaces ≈1,200 tok of earlier results (−1,100) · stripped pictures save ≈880 tok"
        );
        assert!(CompactionBalance::default().is_empty());
        let first = CompactionBalance {
            capsule: 420,
            capsule_entries: 1,
            ..Default::default()
        };
        assert_eq!(
            first.explain(),
            "compaction: the capsule adds ≈420 tok (1 entry); nothing earlier was replaced, so the request grows by it"
        );
    }

    #[test]
    fn the_demo_sessions_last_request_is_read_part_by_part() {
        let session = crate::host::demo::session()
            .expect("a demo session")
            .unwrap();
        let requests = SessionRequests::of(&session);
        let last = requests.get(requests.len()).unwrap();
        let b = CompactionBalance::of(&last.snapshot);
        assert_eq!(b.capsule_entries, capsule_entries(&last.snapshot).len());
        assert!(b.capsule_entries > 0 && b.capsule > 0, "{b:?}");
        assert!(
            b.receipts > 0 && b.receipts_stored > b.receipts_sent,
            "{b:?}"
        );
        assert!(render_request(&last, 120).contains(&b.explain()));
    }
}
