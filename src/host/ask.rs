//! One question, headless: what `groundwork ask` prints ([`AskOutcome`], made by
//! [`outcome_of`]; the question is asked and committed by
//! [`super::conversation::Conversation::ask`]). [`summarise`] reads the answer's citations, ledger status and violation from the
//! state. Composition lives in [`super::compose`]; its options are re-exported here.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::capabilities::state::{self, EvidenceState, StateKind};
use crate::engine::agent::{RunOutput, RunResult};
use crate::engine::events::{RequestSnapshot, RunUsage};

pub use super::compose::{
    AskOptions, CapabilityChoice, ComposeError, Settings, agent_preamble, build_agent,
    driving_vision,
};

#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("the question is empty; nothing was sent to the model")]
    EmptyQuestion,
    #[error("{0}")]
    Agent(String),
    #[error("the question failed: {0}")]
    Run(String),
}

impl From<ComposeError> for AskError {
    fn from(e: ComposeError) -> Self {
        AskError::Agent(e.0)
    }
}

/// What `ask --json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct AskOutcome {
    pub answer: String,
    /// The citations of this question, in first-cited order, with their display numbers.
    pub citations: Vec<Value>,
    /// `grounded`, `ungrounded` or `missing`.
    pub status: String,
    /// Whether the citation policy recorded a violation for this question.
    pub violation: bool,
    /// The question's identity (SPEC §0.2).
    pub question: Option<u64>,
    /// Whether the answer was cut off at the model's token limit (finish reason
    /// `length`, e.g. from `max_tokens`).
    pub cut_off: bool,
    /// Whether the citation policy redirected the question.
    pub redirected: bool,
    /// The answer the policy caught before its redirect (the answer above came after).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caught: Option<String>,
    /// The warnings of the run's tools (a reranker that failed: the search went on in
    /// the fused order), one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// What cut it off, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_off_note: Option<String>,
    /// Every model request of the run: raw and compacted messages, tools, instructions.
    pub requests: Vec<RequestSnapshot>,
    /// Requests, tool calls and the token counts the endpoint reported.
    pub usage: RunUsage,
}

/// What a finished run tells its asker: the answer, the ledger view of its state, its
/// requests and usage, and whether the answer was cut off.
pub fn outcome_of(result: &RunResult) -> AskOutcome {
    let answer = match &result.output {
        RunOutput::Text(t) => t.clone(),
        RunOutput::Tool { args, .. } => args.to_string(),
        other => format!("{other:?}"),
    };
    let last = result.messages.iter().rev().find_map(|m| m.as_response());
    let mut outcome = summarise(answer, &result.state, result.requests.clone());
    outcome.cut_off = last.is_some_and(|r| r.is_cut_off());
    outcome.cut_off_note = last.and_then(|r| r.cut_off_note());
    let new = &result.messages[result.new_message_index.min(result.messages.len())..];
    let mut turn = crate::host::transcript::Turn::new(0, String::new());
    crate::host::transcript::fill_turn(&mut turn, new);
    outcome.redirected = turn.redirected;
    outcome.caught = turn.caught;
    outcome.warnings = new
        .iter()
        .flat_map(crate::host::inspect::part_notes)
        .flatten()
        .filter(|n| n.starts_with("warning: "))
        .collect();
    outcome.usage = result.usage.clone();
    outcome
}

/// The ledger view of a state after a question: its citations, status and violation.
pub fn summarise(
    answer: String,
    state: &Map<String, Value>,
    requests: Vec<RequestSnapshot>,
) -> AskOutcome {
    let mut records = Vec::new();
    let mut citations = Vec::new();
    for kind in [StateKind::Rag, StateKind::Analysis] {
        if let Some(raw) = state.get(kind.namespace())
            && let Ok(s) = EvidenceState::load(kind, raw)
        {
            for id in &s.citations {
                if let Some(c) = s.citation_index.get(id) {
                    let mut v = serde_json::to_value(c).unwrap_or(Value::Null);
                    if let Value::Object(m) = &mut v {
                        m.insert("capability".into(), Value::String(kind.namespace().into()));
                    }
                    citations.push(v);
                }
            }
            records.push(s);
        }
    }
    let refs: Vec<_> = records.iter().map(|s| &s.evidence).collect();
    let status = state::citation_status(&refs).as_str().to_string();
    let question = refs.iter().filter_map(|r| r.question).max();
    let violation = question.is_some_and(|q| state::violations(state).contains(&q));
    AskOutcome {
        answer,
        citations,
        status,
        violation,
        question,
        cut_off: false,
        cut_off_note: None,
        warnings: Vec::new(),
        redirected: false,
        caught: None,
        requests,
        usage: RunUsage::default(),
    }
}
