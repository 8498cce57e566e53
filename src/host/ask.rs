//! One question, headless: the host that `groundwork ask` is (and that the TUI will drive
//! through the same engine). It composes the capabilities, runs the agent over the session's
//! history and state, and commits both to the session only when the run succeeds
//! (SPEC §2.5): a failed or cancelled question leaves the session as it was.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::capabilities::analysis::AnalysisCapability;
use crate::capabilities::compaction::hook::EvidenceCompactionCapability;
use crate::capabilities::policy::CitationPolicyCapability;
use crate::capabilities::rag::RagCapability;
use crate::capabilities::state::{self, EvidenceState, StateKind};
use crate::config::AppConfig;
use crate::engine::agent::{Agent, RunInput, RunOutput};
use crate::engine::cancel::CancelToken;
use crate::engine::capability::Capability;
use crate::engine::chat::ChatModel;
use crate::engine::events::{CoreEvent, RequestSnapshot};
use crate::session::Session;
use crate::store::Store;

/// The host's own system preamble (SPEC §1.1 `AGENT_PREAMBLE`), in our words.
pub fn agent_preamble() -> &'static str {
    include_str!("../../assets/prompts/agent_preamble.md")
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapabilityChoice {
    Rag,
    Analysis,
}

impl std::str::FromStr for CapabilityChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "rag" => Ok(Self::Rag),
            "analysis" => Ok(Self::Analysis),
            other => Err(format!("unknown capability '{other}' (rag, analysis)")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct AskOptions {
    /// Evidence capabilities to register; empty means RAG.
    pub capabilities: Vec<CapabilityChoice>,
    /// Register them eagerly even when there are several (otherwise several are deferred).
    pub eager: bool,
    pub compaction: bool,
    pub policy: bool,
    /// The analysis sandbox worker executable (default: `$GROUNDWORK_SANDBOX_WORKER`,
    /// else this executable).
    pub sandbox_worker: Option<std::path::PathBuf>,
}

impl Default for AskOptions {
    fn default() -> Self {
        Self {
            capabilities: Vec::new(),
            eager: false,
            compaction: true,
            policy: true,
            sandbox_worker: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("the question is empty; nothing was sent to the model")]
    EmptyQuestion,
    #[error("{0}")]
    Agent(String),
    #[error("the question failed: {0}")]
    Run(String),
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
    /// Every model request of the run: raw and compacted messages, tools, instructions.
    pub requests: Vec<RequestSnapshot>,
}

/// Builds the agent for a question.
pub fn build_agent(
    model: Arc<dyn ChatModel>,
    store: Arc<Store>,
    config: &AppConfig,
    opts: &AskOptions,
) -> Result<Agent, AskError> {
    let mut choices = opts.capabilities.clone();
    if choices.is_empty() {
        choices.push(CapabilityChoice::Rag);
    }
    choices.dedup();
    let deferred = choices.len() > 1 && !opts.eager;
    let vision = driving_vision(config, &choices);
    let mut caps: Vec<Arc<dyn Capability>> = Vec::new();
    for c in &choices {
        match c {
            CapabilityChoice::Rag => caps.push(Arc::new(
                RagCapability::new(store.clone(), config.clone())
                    .defer_loading(deferred)
                    .vision(Some(vision)),
            )),
            CapabilityChoice::Analysis => {
                let mut analysis = AnalysisCapability::new(store.clone(), config.clone())
                    .defer_loading(deferred)
                    .vision(Some(vision));
                if let Some(worker) = &opts.sandbox_worker {
                    analysis = analysis.worker(worker.clone());
                }
                caps.push(Arc::new(analysis))
            }
        }
    }
    if opts.compaction {
        caps.push(Arc::new(EvidenceCompactionCapability::new()));
    }
    if opts.policy {
        caps.push(Arc::new(CitationPolicyCapability::new()));
    }
    let mut builder = Agent::builder(model).instructions(agent_preamble());
    for c in caps {
        builder = builder.capability(c);
    }
    builder.build().map_err(|e| AskError::Agent(e.to_string()))
}

/// The driving model's vision (haiku.rag's chat host): `analysis.model` (falling back
/// to `qa.model`) when Analysis is the only capability, `qa.model` otherwise. Every
/// capability of the agent follows it, since one model reads every tool result.
pub fn driving_vision(config: &AppConfig, choices: &[CapabilityChoice]) -> bool {
    if choices == [CapabilityChoice::Analysis] {
        config
            .analysis
            .model
            .as_ref()
            .unwrap_or(&config.qa.model)
            .vision
    } else {
        config.qa.model.vision
    }
}

/// Runs one question over `session` and commits it on success.
pub async fn ask(
    agent: &Agent,
    session: &mut Session,
    question: &str,
    events: Option<tokio::sync::mpsc::UnboundedSender<CoreEvent>>,
    cancel: CancelToken,
) -> Result<AskOutcome, AskError> {
    if question.trim().is_empty() {
        return Err(AskError::EmptyQuestion);
    }
    let input = RunInput::prompt(question)
        .with_history(session.messages.clone())
        .with_state(session.state.clone());
    let outcome = agent.run(input, events, cancel).await;
    let result = match &outcome {
        Ok(r) => r.clone(),
        Err(e) => return Err(AskError::Run(e.to_string())),
    };
    session.commit_run(&outcome);
    let answer = match &result.output {
        RunOutput::Text(t) => t.clone(),
        RunOutput::Tool { args, .. } => args.to_string(),
        other => format!("{other:?}"),
    };
    let cut_off = result
        .messages
        .iter()
        .rev()
        .find_map(|m| m.as_response())
        .is_some_and(|r| r.is_cut_off());
    let mut outcome = summarise(answer, &result.state, result.requests);
    outcome.cut_off = cut_off;
    Ok(outcome)
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
        requests,
    }
}
