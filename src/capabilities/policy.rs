//! The citation policy (`haiku-rag-citation-policy`, SPEC §10): one redirect per
//! question when an answer ends without a current citation declaration, and a
//! violation record when the model cannot or does not cite.

use serde_json::Value;

use crate::capabilities::evidence::{EvidenceSource, discover};
use crate::capabilities::state::{
    CapabilityEvidenceRecord, CitationStatus, citation_status_for, current_question,
    ensure_policy_state, record_violation,
};
use crate::engine::capability::{
    BoxFuture, Capability, CapabilityRun, Enqueued, ForRunContext, LOAD_CAPABILITY_TOOL,
    RunContext, RunOutcomeView,
};
use crate::engine::messages::{ModelMessage, ModelRequestPart, ModelResponse, UserContentValue};

/// Fixed id of the policy capability.
pub const CAPABILITY_ID: &str = "haiku-rag-citation-policy";
/// Marks the redirect message (machine literal).
pub const REDIRECT_TAG: &str = "[haiku.rag/citation-redirect]";

/// The redirect the model receives (ours); ends with [`REDIRECT_TAG`].
pub fn redirect_text() -> &'static str {
    static TEXT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        crate::template::fill(
            include_str!("../../assets/prompts/capabilities/citation_redirect.txt").trim_end(),
            &[("tag", REDIRECT_TAG)],
        )
    });
    &TEXT
}

/// The policy as registered. Takes no configuration.
#[derive(Debug, Clone, Default)]
pub struct CitationPolicyCapability;

impl CitationPolicyCapability {
    /// The policy.
    pub fn new() -> Self {
        CitationPolicyCapability
    }

    /// `CitationPolicyCapability.from_spec()`: accepts nothing but `null` or `{}`.
    pub fn from_spec(args: &Value) -> anyhow::Result<Self> {
        match args {
            Value::Null => Ok(Self),
            Value::Object(m) if m.is_empty() => Ok(Self),
            other => anyhow::bail!("CitationPolicyCapability takes no arguments, found {other}"),
        }
    }
}

impl Capability for CitationPolicyCapability {
    fn id(&self) -> &str {
        CAPABILITY_ID
    }

    fn for_run(&self, _ctx: &mut ForRunContext<'_>) -> anyhow::Result<Box<dyn CapabilityRun>> {
        Ok(Box::new(PolicyRun))
    }
}

/// The per-run copy (stateless: everything is read from the registry and history).
#[derive(Debug)]
pub struct PolicyRun;

fn records<'a>(evidence: &[&'a dyn EvidenceSource]) -> Vec<&'a CapabilityEvidenceRecord> {
    evidence
        .iter()
        .map(|e| &e.evidence_state().evidence)
        .collect()
}

/// An evidence outcome in this question, or anything cited earlier (SPEC §10.1).
fn has_evidence_to_declare(records: &[&CapabilityEvidenceRecord], question: u64) -> bool {
    records
        .iter()
        .any(|r| r.latest_evidence_epoch > question || !r.occurrences.is_empty())
}

/// Whether a tagged redirect already sits in `messages[question..]`.
fn already_asked(messages: &[ModelMessage], question: u64) -> bool {
    messages
        .iter()
        .skip(question as usize)
        .filter_map(ModelMessage::as_request)
        .flat_map(|r| r.parts.iter())
        .any(|p| match p {
            ModelRequestPart::UserPrompt(u) => {
                matches!(&u.content, UserContentValue::Text(s) if s.contains(REDIRECT_TAG))
            }
            _ => false,
        })
}

/// No tool calls, or a call to an output tool. In this engine every function tool is
/// offered by an active capability (or is `load_capability`), so a call no active
/// capability offers is an output tool.
fn ends_the_question(ctx: &RunContext, response: &ModelResponse) -> bool {
    let calls: Vec<&str> = response
        .tool_calls()
        .map(|c| c.tool_name.as_str())
        .collect();
    if calls.is_empty() {
        return true;
    }
    let offered: Vec<String> = ctx
        .capability_ids()
        .filter(|id| ctx.is_active(id))
        .filter_map(|id| ctx.capability(id))
        .flat_map(|run| run.tools(ctx))
        .map(|t| t.name)
        .collect();
    calls
        .iter()
        .any(|name| *name != LOAD_CAPABILITY_TOOL && !offered.iter().any(|o| o == name))
}

fn status(evidence: &[&dyn EvidenceSource]) -> (u64, bool, CitationStatus) {
    let recs = records(evidence);
    let question = current_question(&recs);
    (
        question,
        has_evidence_to_declare(&recs, question),
        citation_status_for(&recs, question),
    )
}

impl CapabilityRun for PolicyRun {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn before_run<'a>(&'a mut self, ctx: &'a mut RunContext) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            ensure_policy_state(&mut ctx.state);
            Ok(())
        })
    }

    fn after_model_request<'a>(
        &'a mut self,
        ctx: &'a mut RunContext,
        response: &'a ModelResponse,
    ) -> BoxFuture<'a, anyhow::Result<Vec<Enqueued>>> {
        Box::pin(async move {
            if !ends_the_question(ctx, response) {
                return Ok(Vec::new());
            }
            let evidence = discover(ctx);
            let (question, enforce, status) = status(&evidence);
            if !enforce || status != CitationStatus::Missing {
                return Ok(Vec::new());
            }
            // The question's messages are in the run's window (a question in progress
            // starts at or after it).
            let from = question.saturating_sub(ctx.earlier_len() as u64);
            if already_asked(&ctx.messages, from) {
                return Ok(Vec::new());
            }
            if evidence.iter().any(|e| e.cite_available()) {
                return Ok(vec![Enqueued::when_idle(redirect_text().to_string())]);
            }
            record_violation(&mut ctx.state, question);
            Ok(Vec::new())
        })
    }

    fn after_run<'a>(
        &'a mut self,
        ctx: &'a mut RunContext,
        _result: &'a RunOutcomeView<'a>,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            let evidence = discover(ctx);
            let (question, enforce, status) = status(&evidence);
            if enforce && status == CitationStatus::Missing {
                record_violation(&mut ctx.state, question);
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_redirect_ends_with_its_tag_and_has_no_placeholder_left() {
        let text = redirect_text();
        assert!(text.ends_with(&format!(". {REDIRECT_TAG}")), "{text}");
        assert!(!text.contains('{'), "{text}");
    }
}
