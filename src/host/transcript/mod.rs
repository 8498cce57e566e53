//! The conversation and the citation ledger as data, derived from a session's committed
//! history and state. The TUI renders these; `export` writes them as Markdown or JSON.
//!
//! A question starts at a request whose user prompt is not a citation redirect; its
//! identity is that message's index in the history (SPEC §0.2: the message count before
//! the question). Everything up to the next question belongs to it.

mod export;
mod filter;
mod ledger;
mod tools;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::capabilities::state::{
    self, CapabilityEvidenceRecord, Citation, EvidenceState, StateKind,
};
use crate::capabilities::{analysis, rag};

/// The citation verdict of a question; re-exported so the screen reads it from the host.
pub use crate::capabilities::state::CitationStatus;
use crate::engine::messages::{
    ModelMessage, ModelRequestPart, ModelResponsePart, UserContent, UserContentValue,
};

/// The tag that marks the policy's redirect message (SPEC §10).
pub use crate::capabilities::policy::REDIRECT_TAG;

pub use export::{to_json, to_markdown};
pub use filter::{
    apply_collection_filter, apply_document_filter, collection_label, document_filter,
    document_filter_sql, set_document_filter,
};
pub use ledger::{LedgerChunk, LedgerRow};
use ledger::{ledger_row, past_status};
pub use tools::{ToolKind, result_ids, tool_kind, tool_summary};

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Still running (live runs only).
    Running,
    /// Returned successfully.
    Ok,
    /// Returned a failure, or asked the model to retry.
    Failed,
}

/// One tool call of a question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolStep {
    pub call_id: String,
    pub name: String,
    /// One line: the query, the first line of code, the chunk ids, or the arguments.
    pub summary: String,
    pub status: StepStatus,
    /// The full arguments as sent.
    pub args: String,
}

/// A citation as the conversation shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CitationView {
    /// Display number, continuing across the conversation.
    pub index: i64,
    /// `rag` or `analysis`.
    pub capability: String,
    pub chunk_id: String,
    pub document_id: String,
    /// Title, else URI.
    pub source: String,
    pub document_uri: String,
    pub pages: Vec<i64>,
    pub headings: Vec<String>,
    pub content: String,
    pub picture_refs: Vec<String>,
    pub collection: Option<String>,
}

impl CitationView {
    fn from_citation(capability: &str, c: &Citation) -> Self {
        CitationView {
            index: c.index.unwrap_or(0),
            capability: capability.to_string(),
            chunk_id: c.chunk_id.clone(),
            document_id: c.document_id.clone(),
            source: c
                .document_title
                .clone()
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| c.document_uri.clone()),
            document_uri: c.document_uri.clone(),
            pages: c.page_numbers.clone(),
            headings: c.headings.clone().unwrap_or_default(),
            content: c.content.clone(),
            picture_refs: c.picture_refs.clone(),
            collection: c.collection.clone(),
        }
    }

    /// `[n] Source (p.1, 2, 3...)`, as haiku.rag titles a citation.
    pub fn title(&self) -> String {
        let mut t = format!("[{}] {}", self.index, self.source);
        if !self.pages.is_empty() {
            let shown: Vec<String> = self.pages.iter().take(3).map(|p| p.to_string()).collect();
            let more = if self.pages.len() > 3 { "..." } else { "" };
            t.push_str(&format!(" (p.{}{more})", shown.join(", ")));
        }
        t
    }
}

/// One question and everything that answered it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Turn {
    /// The question's identity (its message index).
    pub question: u64,
    /// The prompt text (images as `[Image #N]`).
    pub prompt: String,
    /// Tool calls in order.
    pub steps: Vec<ToolStep>,
    /// The final answer (the last response's text).
    pub answer: String,
    /// Cited chunks, by display number.
    pub citations: Vec<CitationView>,
    /// The last successful analysis program.
    pub program: Option<String>,
    /// Whether the policy redirected this question.
    pub redirected: bool,
    /// The answer the citation policy caught: the text the model gave, citing nothing,
    /// before the redirect (the final answer came after it).
    pub caught: Option<String>,
    /// Model requests made for this question.
    pub requests: usize,
    /// Chunks its searches returned: (capability, chunk id, source line).
    pub retrieved: Vec<(String, String, Option<String>)>,
    /// Whether the question's last model answer was cut off at the token limit
    /// (finish reason `length`).
    pub cut_off: bool,
    /// What cut it off, in words ([`ModelResponse::cut_off_note`]).
    pub cut_off_note: Option<String>,
}

impl Turn {
    pub fn new(question: u64, prompt: String) -> Self {
        Turn {
            question,
            prompt,
            steps: Vec::new(),
            answer: String::new(),
            citations: Vec::new(),
            program: None,
            redirected: false,
            caught: None,
            requests: 0,
            retrieved: Vec::new(),
            cut_off: false,
            cut_off_note: None,
        }
    }
}

/// The whole conversation.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Transcript {
    pub turns: Vec<Turn>,
    pub ledger: Vec<LedgerRow>,
}

/// What a reader is told of a redirect, in every face (the conversation, the export,
/// `ask`): why the policy stepped in and what it asked for.
pub const REDIRECT_NOTE: &str = "redirected: this answer cited nothing, so the citation policy \
     asked the model to cite what grounds it (or declare that nothing does) and to answer again";

/// Whether a user prompt is the policy's redirect.
pub fn is_redirect(text: &str) -> bool {
    text.contains(REDIRECT_TAG)
}

/// The text of a user prompt, images as `[Image #N]`.
pub fn prompt_text(content: &UserContentValue) -> String {
    match content {
        UserContentValue::Text(t) => t.clone(),
        UserContentValue::Items(items) => {
            let mut out = String::new();
            let mut image = 0;
            for it in items {
                match it {
                    UserContent::Text(t) => out.push_str(t),
                    UserContent::Binary(_) | UserContent::Other(_) => {
                        image += 1;
                        out.push_str(&format!("[Image #{image}]"));
                    }
                }
            }
            out
        }
    }
}

/// The user prompt of a request, if it has one.
fn user_prompt(m: &ModelMessage) -> Option<String> {
    let req = m.as_request()?;
    let texts: Vec<String> = req
        .parts
        .iter()
        .filter_map(|p| match p {
            ModelRequestPart::UserPrompt(u) => Some(prompt_text(&u.content)),
            _ => None,
        })
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// The tag of pictures attached to search results (SPEC §5).
pub use crate::capabilities::kit::RETRIEVED_IMAGE_TAG;

/// The question start indices of a history: requests with a user prompt that is neither
/// the policy's redirect nor pictures attached to tool results.
pub fn question_starts(messages: &[ModelMessage]) -> Vec<usize> {
    messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let req = m.as_request()?;
            let with_results = req.parts.iter().any(|p| {
                matches!(
                    p,
                    ModelRequestPart::ToolReturn(_) | ModelRequestPart::RetryPrompt(_)
                )
            });
            match user_prompt(m) {
                Some(text)
                    if !is_redirect(&text)
                        && !with_results
                        && !text.contains(RETRIEVED_IMAGE_TAG) =>
                {
                    Some(i)
                }
                _ => None,
            }
        })
        .collect()
}

fn evidence_states(state: &Map<String, Value>) -> Vec<EvidenceState> {
    [StateKind::Rag, StateKind::Analysis]
        .into_iter()
        .filter_map(|kind| {
            state
                .get(kind.namespace())
                .and_then(|raw| EvidenceState::load(kind, raw).ok())
        })
        .collect()
}

impl Transcript {
    /// Builds the conversation and the ledger of a committed history and state.
    pub fn build(messages: &[ModelMessage], state: &Map<String, Value>) -> Self {
        let states = evidence_states(state);
        let violations = state::violations(state);
        let starts = question_starts(messages);
        let mut turns = Vec::with_capacity(starts.len());
        let mut ledger = Vec::with_capacity(starts.len());
        let last_question = starts.last().map(|&s| s as u64);
        for (k, &start) in starts.iter().enumerate() {
            let end = starts.get(k + 1).copied().unwrap_or(messages.len());
            let q = start as u64;
            let mut turn = Turn::new(q, user_prompt(&messages[start]).unwrap_or_default());
            fill_turn(&mut turn, &messages[start..end]);
            // Citations of this question, by display number.
            let mut citations = Vec::new();
            for s in &states {
                let ns = s.kind_namespace();
                for (id, occ) in s.evidence.occurrences.iter() {
                    if occ.cited_in_questions.contains(&q)
                        && let Some(c) = s.citation_index.get(id)
                    {
                        citations.push(CitationView::from_citation(ns, c));
                    }
                }
            }
            citations.sort_by_key(|c| c.index);
            turn.citations = citations;
            let status = if Some(q) == last_question {
                let records: Vec<&CapabilityEvidenceRecord> =
                    states.iter().map(|s| &s.evidence).collect();
                state::citation_status_for(&records, q)
            } else {
                past_status(&turn)
            };
            ledger.push(ledger_row(&turn, &states, status, violations.contains(&q)));
            turns.push(turn);
        }
        Transcript { turns, ledger }
    }
}

/// Fills steps, answer, program, redirect and request count from a question's messages.
pub fn fill_turn(turn: &mut Turn, messages: &[ModelMessage]) {
    let mut last_code: Option<(String, String)> = None;
    for m in messages {
        match m {
            ModelMessage::Response(r) => {
                turn.requests += 1;
                turn.cut_off = r.is_cut_off();
                turn.cut_off_note = r.cut_off_note();
                let text: String = r
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        ModelResponsePart::Text(t) => Some(t.content.as_str()),
                        _ => None,
                    })
                    .collect();
                if !text.trim().is_empty() {
                    turn.answer = text;
                }
                for p in &r.parts {
                    if let ModelResponsePart::ToolCall(c) = p {
                        let args = c.args_as_json();
                        if c.tool_name == analysis::EXECUTE_TOOL {
                            last_code = serde_json::from_str::<Map<String, Value>>(&args)
                                .ok()
                                .and_then(|m| {
                                    m.get("code").and_then(Value::as_str).map(String::from)
                                })
                                .map(|code| (c.tool_call_id.clone(), code));
                        }
                        turn.steps.push(ToolStep {
                            call_id: c.tool_call_id.clone(),
                            name: c.tool_name.clone(),
                            summary: tool_summary(&c.tool_name, &args),
                            status: StepStatus::Running,
                            args,
                        });
                    }
                }
            }
            ModelMessage::Request(req) => {
                for p in &req.parts {
                    if let ModelRequestPart::ToolReturn(t) = p
                        && !t.is_failed()
                        && let Some(cap) = match t.tool_name.as_str() {
                            rag::SEARCH_TOOL => Some(state::RAG_NAMESPACE),
                            analysis::SEARCH_TOOL => Some(state::ANALYSIS_NAMESPACE),
                            _ => None,
                        }
                    {
                        for (id, source) in result_ids(&t.content_text()) {
                            if !turn.retrieved.iter().any(|r| r.1 == id) {
                                turn.retrieved.push((cap.to_string(), id, source));
                            }
                        }
                    }
                    let (id, ok) = match p {
                        ModelRequestPart::ToolReturn(t) => (&t.tool_call_id, !t.is_failed()),
                        ModelRequestPart::RetryPrompt(r) => (&r.tool_call_id, false),
                        ModelRequestPart::UserPrompt(u) => {
                            if is_redirect(&prompt_text(&u.content)) {
                                turn.redirected = true;
                                if turn.caught.is_none() && !turn.answer.trim().is_empty() {
                                    turn.caught = Some(std::mem::take(&mut turn.answer));
                                }
                            }
                            continue;
                        }
                        _ => continue,
                    };
                    if let Some(step) = turn.steps.iter_mut().find(|s| &s.call_id == id) {
                        step.status = if ok {
                            StepStatus::Ok
                        } else {
                            StepStatus::Failed
                        };
                    }
                    if ok
                        && let Some((call, code)) = &last_code
                        && call == id
                    {
                        turn.program = Some(code.clone());
                    }
                }
            }
        }
    }
}

trait Namespace {
    fn kind_namespace(&self) -> &'static str;
}

impl Namespace for EvidenceState {
    fn kind_namespace(&self) -> &'static str {
        if self.executions.is_some() {
            StateKind::Analysis.namespace()
        } else {
            StateKind::Rag.namespace()
        }
    }
}
