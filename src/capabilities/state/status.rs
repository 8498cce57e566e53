//! Citation status of the current question (SPEC §4), derived and never stored, and
//! the citation policy's violation list (SPEC §2.3, §10.2).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{CapabilityEvidenceRecord, CitationDeclaration, POLICY_NAMESPACE};

/// Derived status of the current question; never stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CitationStatus {
    /// A current declaration cites something.
    Grounded,
    /// Current declarations exist and all are empty.
    Ungrounded,
    /// No declaration follows the newest evidence.
    Missing,
}

impl CitationStatus {
    /// `grounded` / `ungrounded` / `missing`.
    pub fn as_str(self) -> &'static str {
        match self {
            CitationStatus::Grounded => "grounded",
            CitationStatus::Ungrounded => "ungrounded",
            CitationStatus::Missing => "missing",
        }
    }

    /// The one grounded / ungrounded decision (SPEC §4), over a question's current
    /// declarations, each given as whether it cites anything: none is missing, one
    /// that cites something grounds the answer, only empty ones leave it ungrounded.
    pub fn of_declarations(cites: impl IntoIterator<Item = bool>) -> Self {
        cites
            .into_iter()
            .fold(CitationStatus::Missing, |status, cites| {
                match (status, cites) {
                    (CitationStatus::Grounded, _) | (_, true) => CitationStatus::Grounded,
                    _ => CitationStatus::Ungrounded,
                }
            })
    }
}

/// The current question over records: the maximum identity, 0 when none has one.
pub fn current_question(records: &[&CapabilityEvidenceRecord]) -> u64 {
    records
        .iter()
        .map(|r| r.question.unwrap_or(0))
        .max()
        .unwrap_or(0)
}

/// The status over every record of the run, for the question [`current_question`].
pub fn citation_status(records: &[&CapabilityEvidenceRecord]) -> CitationStatus {
    citation_status_for(records, current_question(records))
}

/// The status for an explicit question (SPEC §4): a declaration is current when it
/// belongs to `question` and is strictly later than the newest evidence of *any*
/// record.
pub fn citation_status_for(records: &[&CapabilityEvidenceRecord], question: u64) -> CitationStatus {
    let horizon = records
        .iter()
        .map(|r| r.latest_evidence_epoch)
        .max()
        .unwrap_or(0);
    CitationStatus::of_declarations(
        records
            .iter()
            .filter_map(|r| r.declaration.as_ref())
            .filter(|d: &&CitationDeclaration| d.question == question && d.epoch > horizon)
            .map(|d| !d.refs.is_empty()),
    )
}

/// The key of the violation list in `state["citation_policy"]` (machine literal).
pub const VIOLATIONS_KEY: &str = "violations";

/// `before_run` of the policy: publishes `{"violations": []}` when the key is absent.
/// A malformed value (not an object, or `violations` not a list) is replaced.
pub fn ensure_policy_state(state: &mut Map<String, Value>) {
    let entry = state
        .entry(POLICY_NAMESPACE)
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    let policy = entry.as_object_mut().expect("made an object above");
    let violations = policy
        .entry(VIOLATIONS_KEY)
        .or_insert_with(|| Value::Array(Vec::new()));
    if !violations.is_array() {
        *violations = Value::Array(Vec::new());
    }
}

/// Records a violation of `question` in `state["citation_policy"]["violations"]`,
/// at most once per question. Returns whether it was newly recorded.
pub fn record_violation(state: &mut Map<String, Value>, question: u64) -> bool {
    ensure_policy_state(state);
    let violations = state[POLICY_NAMESPACE][VIOLATIONS_KEY]
        .as_array_mut()
        .expect("ensured above");
    if violations.iter().any(|v| v.as_u64() == Some(question)) {
        return false;
    }
    violations.push(Value::from(question));
    true
}

/// The recorded violations (empty when the policy never ran).
pub fn violations(state: &Map<String, Value>) -> Vec<u64> {
    state
        .get(POLICY_NAMESPACE)
        .and_then(|p| p.get(VIOLATIONS_KEY))
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}
