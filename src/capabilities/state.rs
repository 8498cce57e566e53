//! The evidence state a capability keeps under its namespace (`state["rag"]`,
//! `state["analysis"]`), the evidence record ("ledger") inside it, citation status and
//! the policy's violation list (SPEC §2–§4, §10.2).
//!
//! Everything here is pure data and bookkeeping: no I/O, no agent loop. The JSON is a
//! compatibility surface with haiku.rag 0.75+ hosts: keys and nesting are fixed, key
//! order is not, missing keys take defaults and unknown keys are ignored.

use std::collections::HashSet;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::engine::messages::{ModelMessage, ModelRequestPart, ModelResponsePart};
use crate::store::types::SearchResult;

/// State namespace of the RAG capability.
pub const RAG_NAMESPACE: &str = "rag";
/// State namespace of the analysis capability.
pub const ANALYSIS_NAMESPACE: &str = "analysis";
/// State key of the citation policy.
pub const POLICY_NAMESPACE: &str = "citation_policy";
/// The `searches` bucket that collects in-code `search()` results (SPEC §2.1).
pub const SANDBOX_BUCKET: &str = "_sandbox";
/// Prefix of picture item references (`#/pictures/0`); its home is the store.
pub use crate::store::docling::PICTURE_REF_PREFIX;

/// Errors of the state model. Each message contains the fragment the SPEC names
/// (`already answered`, `append-only`, `question identity`,
/// `no stored question identity`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// `begin_question` with an identity not past the recorded one (SPEC §3.2).
    #[error(
        "a question at message count {identity} does not come after question {question}, \
         which is already answered: question identities must strictly increase"
    )]
    AlreadyAnswered { identity: u64, question: u64 },
    /// An epoch below one already recorded (SPEC §3.4).
    #[error(
        "{what} at message count {count} is older than message count {recorded}, which is \
         already recorded: the message history must be append-only for question \
         identities and epochs to hold"
    )]
    Regression {
        what: &'static str,
        count: u64,
        recorded: u64,
    },
    /// `declare` before any run set the question identity (SPEC §3.6).
    #[error("citations cannot be declared before a run has set the question identity")]
    NoQuestion,
    /// A resumption with no recorded question (SPEC §3.1).
    #[error(
        "The {namespace} capability is resuming a question with no stored question identity. \
         The history awaits the model, but the host did not carry this capability's state \
         (state[\"{namespace}\"]) from the run that started the question."
    )]
    NoStoredIdentity { namespace: String },
    /// The stored state does not validate.
    #[error("the stored {namespace} state is invalid: {message}")]
    Invalid { namespace: String, message: String },
}

// ---------------------------------------------------------------------------------
// Insertion-ordered map
// ---------------------------------------------------------------------------------

/// A string-keyed map that keeps insertion order, serialised as a JSON object.
///
/// Python dicts keep insertion order and `citation_index`, `occurrences` and
/// `searches` rely on it (numbering, display). The maps are small, so lookups are
/// linear. A duplicate key in the input keeps the last value at the first position,
/// as Python's `json` does.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderedMap<V> {
    entries: Vec<(String, V)>,
}

impl<V> Default for OrderedMap<V> {
    fn default() -> Self {
        OrderedMap {
            entries: Vec::new(),
        }
    }
}

impl<V> OrderedMap<V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The value under `key`, mutably.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` to `value`: in place if present (order kept), appended otherwise.
    /// Returns the previous value.
    pub fn insert(&mut self, key: impl Into<String>, value: V) -> Option<V> {
        let key = key.into();
        match self.get_mut(&key) {
            Some(slot) => Some(std::mem::replace(slot, value)),
            None => {
                self.entries.push((key, value));
                None
            }
        }
    }

    /// The value under `key`, inserted from `make` (appended) when absent.
    pub fn get_or_insert_with(&mut self, key: &str, make: impl FnOnce() -> V) -> &mut V {
        let position = match self.entries.iter().position(|(k, _)| k == key) {
            Some(position) => position,
            None => {
                self.entries.push((key.to_string(), make()));
                self.entries.len() - 1
            }
        };
        &mut self.entries[position].1
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Keys in insertion order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    /// Values in insertion order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|(_, v)| v)
    }
}

impl<V> FromIterator<(String, V)> for OrderedMap<V> {
    fn from_iter<I: IntoIterator<Item = (String, V)>>(iter: I) -> Self {
        let mut map = OrderedMap::new();
        for (k, v) in iter {
            map.insert(k, v);
        }
        map
    }
}

impl<V: Serialize> Serialize for OrderedMap<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.entries.len()))?;
        for (k, v) in &self.entries {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for OrderedMap<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OrderedVisitor<V>(PhantomData<V>);

        impl<'de, V: Deserialize<'de>> Visitor<'de> for OrderedVisitor<V> {
            type Value = OrderedMap<V>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut map = OrderedMap::new();
                while let Some((k, v)) = access.next_entry::<String, V>()? {
                    map.insert(k, v);
                }
                Ok(map)
            }

            // `null` reads as an empty map, as a missing key does.
            fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(OrderedMap::new())
            }
        }

        deserializer.deserialize_any(OrderedVisitor(PhantomData))
    }
}

// ---------------------------------------------------------------------------------
// Persisted types
// ---------------------------------------------------------------------------------

/// A resolved citation (SPEC §2.1), stored in `citation_index`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Citation {
    /// Display number, or null.
    #[serde(default)]
    pub index: Option<i64>,
    #[serde(default)]
    pub document_id: String,
    #[serde(default)]
    pub chunk_id: String,
    /// Every chunk merged into the cited result; always includes `chunk_id`.
    #[serde(default)]
    pub chunk_ids: Vec<String>,
    /// The anchor chunk's raw metadata.
    #[serde(default)]
    pub chunk_meta: Map<String, Value>,
    /// `""` when unknown.
    #[serde(default)]
    pub document_uri: String,
    #[serde(default)]
    pub document_title: Option<String>,
    #[serde(default)]
    pub document_meta: Map<String, Value>,
    #[serde(default)]
    pub page_numbers: Vec<i64>,
    #[serde(default)]
    pub headings: Option<Vec<String>>,
    /// The exact text the model saw.
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub doc_item_refs: Vec<String>,
    /// The `doc_item_refs` that start with `#/pictures/`.
    #[serde(default)]
    pub picture_refs: Vec<String>,
    /// The collection (database) the citation came from, when a capability covers
    /// several. Not a haiku.rag 0.77 field; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collection: Option<String>,
}

impl Citation {
    /// A citation built from a search result (SPEC §6 step 4): `chunk_ids` falls back
    /// to `[chunk_id]`, `picture_refs` are the picture refs among `doc_item_refs`.
    pub fn from_result(chunk_id: &str, result: &SearchResult) -> Self {
        Citation {
            index: None,
            document_id: result.document_id.clone().unwrap_or_default(),
            chunk_id: chunk_id.to_string(),
            chunk_ids: if result.chunk_ids.is_empty() {
                vec![chunk_id.to_string()]
            } else {
                result.chunk_ids.clone()
            },
            chunk_meta: result.chunk_meta.clone(),
            document_uri: result.document_uri.clone().unwrap_or_default(),
            document_title: result.document_title.clone(),
            document_meta: result.document_meta.clone(),
            page_numbers: result.page_numbers.clone(),
            headings: result.headings.clone(),
            content: result.content.clone(),
            doc_item_refs: result.doc_item_refs.clone(),
            picture_refs: result
                .doc_item_refs
                .iter()
                .filter(|r| r.starts_with(PICTURE_REF_PREFIX))
                .cloned()
                .collect(),
            collection: result.collection.clone(),
        }
    }
}

/// One piece of evidence, identified by its owner and its chunk (`{capability, chunk_id}`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CitationRef {
    pub capability: String,
    pub chunk_id: String,
}

impl CitationRef {
    pub fn new(capability: impl Into<String>, chunk_id: impl Into<String>) -> Self {
        CitationRef {
            capability: capability.into(),
            chunk_id: chunk_id.into(),
        }
    }
}

/// Which questions retrieved a piece of evidence and which cited it (SPEC §2.2).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvidenceOccurrence {
    #[serde(default)]
    pub capability: String,
    #[serde(default)]
    pub chunk_id: String,
    #[serde(default)]
    pub retrieved_in_questions: Vec<u64>,
    #[serde(default)]
    pub cited_in_questions: Vec<u64>,
}

/// What a question declared as its grounding, and when (SPEC §2.2).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CitationDeclaration {
    #[serde(default)]
    pub question: u64,
    #[serde(default)]
    pub epoch: u64,
    #[serde(default)]
    pub refs: Vec<CitationRef>,
}

/// One capability's evidence ledger, `state[ns].evidence` (SPEC §2.2, §3).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CapabilityEvidenceRecord {
    /// Keyed by chunk id; persists for the conversation.
    #[serde(default)]
    pub occurrences: OrderedMap<EvidenceOccurrence>,
    /// Identity of the current/last question; `None` = never through a run.
    #[serde(default)]
    pub question: Option<u64>,
    /// The only authority on whether `question` is unfinished.
    #[serde(default)]
    pub in_progress: bool,
    /// Newest evidence outcome of the current question; 0 = none.
    #[serde(default)]
    pub latest_evidence_epoch: u64,
    /// The current question's declaration.
    #[serde(default)]
    pub declaration: Option<CitationDeclaration>,
}

impl CapabilityEvidenceRecord {
    /// The newest message count already recorded (SPEC §3.4).
    fn recorded(&self) -> u64 {
        let declared = self.declaration.as_ref().map_or(0, |d| d.epoch);
        self.question
            .unwrap_or(0)
            .max(self.latest_evidence_epoch)
            .max(declared)
    }

    fn reject_regression(&self, count: u64, what: &'static str) -> Result<(), StateError> {
        let recorded = self.recorded();
        if count < recorded {
            return Err(StateError::Regression {
                what,
                count,
                recorded,
            });
        }
        Ok(())
    }

    /// Takes the identity of a newly arrived question (SPEC §3.2). Refuses an
    /// identity not strictly past the recorded one; epochs of the previous question
    /// are not compared.
    pub fn begin_question(&mut self, identity: u64) -> Result<(), StateError> {
        if let Some(question) = self.question
            && identity <= question
        {
            return Err(StateError::AlreadyAnswered { identity, question });
        }
        self.question = Some(identity);
        self.in_progress = true;
        self.latest_evidence_epoch = 0;
        self.declaration = None;
        Ok(())
    }

    /// Marks the question answered (SPEC §3.3).
    pub fn end_question(&mut self) {
        self.in_progress = false;
    }

    /// Records an evidence outcome at `epoch` (SPEC §3.5).
    pub fn note_evidence(&mut self, epoch: u64) -> Result<(), StateError> {
        self.reject_regression(epoch, "evidence")?;
        self.latest_evidence_epoch = epoch;
        Ok(())
    }

    /// Records validated citations for the current question (SPEC §3.6): merges into
    /// a declaration of this question that no evidence has followed, replaces it
    /// otherwise, and updates the occurrences.
    pub fn declare(
        &mut self,
        refs: &[CitationRef],
        epoch: u64,
        retrieved_now: &HashSet<String>,
    ) -> Result<(), StateError> {
        let Some(question) = self.question else {
            return Err(StateError::NoQuestion);
        };
        self.reject_regression(epoch, "a declaration")?;
        let latest = self.latest_evidence_epoch;
        match &mut self.declaration {
            Some(current) if current.question == question && latest <= current.epoch => {
                for r in refs {
                    if !current.refs.contains(r) {
                        current.refs.push(r.clone());
                    }
                }
                current.epoch = current.epoch.max(epoch);
            }
            slot => {
                // Refs of a fresh declaration are kept as given (SPEC §14 quirk 1).
                *slot = Some(CitationDeclaration {
                    question,
                    epoch,
                    refs: refs.to_vec(),
                });
            }
        }
        for r in refs {
            let occurrence =
                self.occurrences
                    .get_or_insert_with(&r.chunk_id, || EvidenceOccurrence {
                        capability: r.capability.clone(),
                        chunk_id: r.chunk_id.clone(),
                        ..EvidenceOccurrence::default()
                    });
            if !occurrence.cited_in_questions.contains(&question) {
                occurrence.cited_in_questions.push(question);
            }
            if retrieved_now.contains(&r.chunk_id)
                && !occurrence.retrieved_in_questions.contains(&question)
            {
                occurrence.retrieved_in_questions.push(question);
            }
        }
        Ok(())
    }
}

/// One analysis code run, `state.analysis.executions[]` (SPEC §2.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Execution {
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub stdout: String,
    #[serde(default)]
    pub stderr: String,
    #[serde(default = "default_true")]
    pub success: bool,
}

fn default_true() -> bool {
    true
}

/// Which capability's state this is: decides whether `executions` exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKind {
    /// `state["rag"]`: no `executions` key.
    Rag,
    /// `state["analysis"]`: with `executions`.
    Analysis,
}

impl StateKind {
    /// The state namespace (`rag` / `analysis`).
    pub fn namespace(self) -> &'static str {
        match self {
            StateKind::Rag => RAG_NAMESPACE,
            StateKind::Analysis => ANALYSIS_NAMESPACE,
        }
    }
}

/// `state[ns]` of an evidence capability (SPEC §2.1).
///
/// `executions` is `None` for RAG (the key is not written) and `Some` for analysis.
/// Use [`EvidenceState::load`] / [`EvidenceState::empty`] so the kind decides it;
/// plain deserialisation keeps whatever the JSON had.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvidenceState {
    /// chunk id → citation; persists across questions, numbering continues.
    #[serde(default)]
    pub citation_index: OrderedMap<Citation>,
    /// This question's cited ids, first-cited order.
    #[serde(default)]
    pub citations: Vec<String>,
    /// SQL WHERE over `document_meta`; persists.
    #[serde(default)]
    pub document_filter: Option<String>,
    /// The ledger; persists.
    #[serde(default)]
    pub evidence: CapabilityEvidenceRecord,
    /// query → results retrieved in this question (`_sandbox` for in-code searches).
    #[serde(default)]
    pub searches: OrderedMap<Vec<SearchResult>>,
    /// Analysis only: this question's code runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executions: Option<Vec<Execution>>,
}

impl EvidenceState {
    /// The empty state of a capability kind.
    pub fn empty(kind: StateKind) -> Self {
        EvidenceState {
            executions: match kind {
                StateKind::Rag => None,
                StateKind::Analysis => Some(Vec::new()),
            },
            ..EvidenceState::default()
        }
    }

    /// Validates stored JSON by key: missing keys (and `null`) take defaults, unknown
    /// keys are dropped. RAG state never carries `executions`; analysis state always
    /// does.
    pub fn load(kind: StateKind, raw: &Value) -> Result<Self, StateError> {
        let invalid = |message: String| StateError::Invalid {
            namespace: kind.namespace().to_string(),
            message,
        };
        let mut state: EvidenceState = match raw {
            Value::Null => EvidenceState::default(),
            Value::Object(_) => {
                serde_json::from_value(raw.clone()).map_err(|e| invalid(e.to_string()))?
            }
            other => return Err(invalid(format!("expected an object, found {other}"))),
        };
        match kind {
            StateKind::Rag => state.executions = None,
            StateKind::Analysis => {
                state.executions.get_or_insert_with(Vec::new);
            }
        }
        Ok(state)
    }

    /// The state as JSON, for writing back into the host's state dict.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("evidence state serialises")
    }

    /// Starts a new question's invocation: clears `citations`, `searches` and
    /// `executions`. Keeps `citation_index`, `document_filter` and the record.
    pub fn begin_invocation(&mut self) {
        self.citations.clear();
        self.searches.clear();
        if let Some(executions) = &mut self.executions {
            executions.clear();
        }
    }

    /// Every chunk id in `searches`, all buckets including `_sandbox`.
    pub fn retrieved_ids(&self) -> HashSet<String> {
        self.searches
            .values()
            .flatten()
            .filter_map(|r| r.chunk_id.clone())
            .collect()
    }

    /// [`CapabilityEvidenceRecord::declare`] with `retrieved_now` taken from
    /// `searches`, as the cite tool does (SPEC §6 step 7).
    pub fn declare(&mut self, refs: &[CitationRef], epoch: u64) -> Result<(), StateError> {
        let retrieved = self.retrieved_ids();
        self.evidence.declare(refs, epoch, &retrieved)
    }
}

// ---------------------------------------------------------------------------------
// Run settlement (SPEC §3.1)
// ---------------------------------------------------------------------------------

/// Whether the history clearly waits on the model: its last message is a response
/// with a tool call, or a request with a retry prompt. A trailing tool return and an
/// empty history do not count (SPEC §3.1).
pub fn awaits_the_model(history: &[ModelMessage]) -> bool {
    match history.last() {
        Some(ModelMessage::Response(response)) => response
            .parts
            .iter()
            .any(|p| matches!(p, ModelResponsePart::ToolCall(_))),
        Some(ModelMessage::Request(request)) => request
            .parts
            .iter()
            .any(|p| matches!(p, ModelRequestPart::RetryPrompt(_))),
        None => false,
    }
}

/// The `for_run` decision (SPEC §3.1): validates the stored state, then either
/// continues the recorded question (`in_progress`) or starts a new one with identity
/// `history_len` (clearing the per-question fields).
///
/// Returns the settled state and `state_carried` (the stored record had a question).
/// `raw_state` is `host_state.get(ns)`; `None`, `null` and `{}` all mean "nothing
/// stored". `awaits` is [`awaits_the_model`] of the history handed to the run.
///
/// Refuses with `no stored question identity` when the history awaits the model but
/// no question is in progress, and also when a record claims a question in progress
/// without an identity (a host-seeded record that no run has stamped).
pub fn settle_for_run(
    kind: StateKind,
    raw_state: Option<&Value>,
    history_len: usize,
    awaits: bool,
) -> Result<(EvidenceState, bool), StateError> {
    let mut state = match raw_state {
        Some(raw) => EvidenceState::load(kind, raw)?,
        None => EvidenceState::empty(kind),
    };
    let record = &state.evidence;
    let continuing = record.in_progress;
    let state_carried = record.question.is_some();
    let no_identity = || StateError::NoStoredIdentity {
        namespace: kind.namespace().to_string(),
    };
    if continuing && record.question.is_none() {
        return Err(no_identity());
    }
    if !continuing && awaits {
        return Err(no_identity());
    }
    if !continuing {
        state.begin_invocation();
        state.evidence.begin_question(history_len as u64)?;
    }
    Ok((state, state_carried))
}

// ---------------------------------------------------------------------------------
// Citation status (SPEC §4)
// ---------------------------------------------------------------------------------

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
    let current: Vec<&CitationDeclaration> = records
        .iter()
        .filter_map(|r| r.declaration.as_ref())
        .filter(|d| d.question == question && d.epoch > horizon)
        .collect();
    if current.is_empty() {
        CitationStatus::Missing
    } else if current.iter().any(|d| !d.refs.is_empty()) {
        CitationStatus::Grounded
    } else {
        CitationStatus::Ungrounded
    }
}

// ---------------------------------------------------------------------------------
// Policy state (SPEC §2.3, §10.2)
// ---------------------------------------------------------------------------------

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
        .entry("violations")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !violations.is_array() {
        *violations = Value::Array(Vec::new());
    }
}

/// Records a violation of `question` in `state["citation_policy"]["violations"]`,
/// at most once per question. Returns whether it was newly recorded.
pub fn record_violation(state: &mut Map<String, Value>, question: u64) -> bool {
    ensure_policy_state(state);
    let violations = state[POLICY_NAMESPACE]["violations"]
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
        .and_then(|p| p.get("violations"))
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::messages::{
        ModelRequest, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart,
    };
    use serde_json::json;

    const EMPTY_RAG: &str = r#"{"citation_index":{}, "citations":[], "document_filter":null, "evidence":{"declaration":null, "in_progress":false, "latest_evidence_epoch":0, "occurrences":{}, "question":null}, "searches":{}}"#;

    fn r(chunk: &str) -> CitationRef {
        CitationRef::new("rag", chunk)
    }

    fn record_at(question: u64) -> CapabilityEvidenceRecord {
        let mut record = CapabilityEvidenceRecord::default();
        record.begin_question(question).unwrap();
        record
    }

    fn none() -> HashSet<String> {
        HashSet::new()
    }

    fn result(chunk: &str) -> SearchResult {
        serde_json::from_value(json!({"content": "evidence", "score": 1.0, "chunk_id": chunk}))
            .unwrap()
    }

    fn prompt(text: &str) -> ModelMessage {
        ModelMessage::Request(ModelRequest::user(text))
    }

    fn call(tool: &str, id: &str) -> ModelMessage {
        ModelMessage::Response(ModelResponse::new(vec![ModelResponsePart::ToolCall(
            ToolCallPart::new(tool, "{}", id),
        )]))
    }

    fn tool_return(tool: &str, id: &str, content: &str) -> ModelMessage {
        ModelMessage::Request(ModelRequest::new(vec![ModelRequestPart::ToolReturn(
            ToolReturnPart::new(tool, json!(content), id),
        )]))
    }

    fn text(content: &str) -> ModelMessage {
        ModelMessage::Response(ModelResponse::new(vec![ModelResponsePart::Text(
            TextPart::new(content),
        )]))
    }

    /// Scenario 4: the 0.75 host's empty RAG state round-trips to equal JSON, and
    /// the RAG state has no `executions` key.
    #[test]
    fn scenario_4_empty_rag_state_round_trips() {
        let raw: Value = serde_json::from_str(EMPTY_RAG).unwrap();
        let state = EvidenceState::load(StateKind::Rag, &raw).unwrap();
        assert_eq!(state, EvidenceState::empty(StateKind::Rag));
        let back = state.to_value();
        assert_eq!(back, raw);
        assert!(back.get("executions").is_none());
        // The default state serialises to exactly the literal as well.
        assert_eq!(EvidenceState::empty(StateKind::Rag).to_value(), raw);
    }

    /// Scenario 4: an analysis state with keys in another order (and full contents)
    /// round-trips key for key; an empty analysis state writes `executions: []`.
    #[test]
    fn scenario_4_analysis_state_round_trips_in_any_key_order() {
        let raw = json!({
            "searches": {"q": [{
                "content": "c", "score": 0.5, "chunk_id": "c1", "chunk_ids": ["c1"],
                "chunk_meta": {"labels": ["text"]}, "document_id": "d1",
                "document_uri": "test://a", "document_title": "A",
                "document_meta": {"topic": "ai"}, "order": 3,
                "doc_item_refs": ["#/texts/0"], "page_numbers": [1], "headings": ["H"],
                "labels": ["text"], "image_data": null, "picture_captions": {}
            }], "_sandbox": []},
            "executions": [{"stdout": "42", "code": "print(42)", "success": true, "stderr": ""}],
            "evidence": {
                "question": 2, "in_progress": true, "latest_evidence_epoch": 5,
                "occurrences": {"c1": {"cited_in_questions": [2], "capability": "analysis",
                    "retrieved_in_questions": [2], "chunk_id": "c1"}},
                "declaration": {"refs": [{"chunk_id": "c1", "capability": "analysis"}],
                    "epoch": 5, "question": 2}
            },
            "document_filter": "uri = 'a'",
            "citations": ["c1"],
            "citation_index": {"c1": {
                "picture_refs": [], "doc_item_refs": ["#/texts/0"], "content": "c",
                "headings": null, "page_numbers": [1], "document_meta": {},
                "document_title": null, "document_uri": "", "chunk_meta": {},
                "chunk_ids": ["c1"], "chunk_id": "c1", "document_id": "d1", "index": 1
            }}
        });
        let state = EvidenceState::load(StateKind::Analysis, &raw).unwrap();
        assert_eq!(state.to_value(), raw);
        assert_eq!(state.executions.as_ref().unwrap()[0].stdout, "42");
        let empty = EvidenceState::empty(StateKind::Analysis).to_value();
        assert_eq!(empty["executions"], json!([]));
    }

    /// Missing keys take defaults, unknown keys are tolerated (and dropped), a RAG
    /// state never writes `executions` even if the input had one.
    #[test]
    fn load_is_lenient_and_kind_decides_executions() {
        let raw = json!({"future_key": 1, "evidence": {"question": 3, "extra": true},
                         "executions": [{"code": "x"}]});
        let rag = EvidenceState::load(StateKind::Rag, &raw).unwrap();
        assert_eq!(rag.evidence.question, Some(3));
        let out = rag.to_value();
        assert!(out.get("executions").is_none() && out.get("future_key").is_none());
        let analysis = EvidenceState::load(StateKind::Analysis, &raw).unwrap();
        let execution = &analysis.executions.as_ref().unwrap()[0];
        assert_eq!((execution.stderr.as_str(), execution.success), ("", true));
        assert_eq!(
            EvidenceState::load(StateKind::Rag, &Value::Null).unwrap(),
            EvidenceState::empty(StateKind::Rag)
        );
        let err = EvidenceState::load(StateKind::Rag, &json!({"citations": 5})).unwrap_err();
        assert!(matches!(err, StateError::Invalid { .. }), "{err}");
        assert!(EvidenceState::load(StateKind::Rag, &json!([1])).is_err());
    }

    /// Key order of `citation_index` (numbering order) survives a round trip.
    #[test]
    fn citation_index_keeps_insertion_order() {
        let raw = json!({"citation_index": {"z": {"chunk_id": "z"}, "a": {"chunk_id": "a"},
                                            "m": {"chunk_id": "m"}}});
        let state = EvidenceState::load(StateKind::Rag, &raw).unwrap();
        assert_eq!(
            state.citation_index.keys().collect::<Vec<_>>(),
            ["z", "a", "m"]
        );
        let text = serde_json::to_string(&state.to_value()["citation_index"]).unwrap();
        assert!(text.find("\"z\"").unwrap() < text.find("\"a\"").unwrap());
        assert!(text.find("\"a\"").unwrap() < text.find("\"m\"").unwrap());
    }

    /// Scenario 1 (state level): a first run with an empty host state and a text
    /// answer leaves the empty state except `question: 0`, `in_progress: false`.
    #[test]
    fn scenario_1_first_run_stamps_question_zero() {
        let host = json!({});
        let (mut state, carried) =
            settle_for_run(StateKind::Rag, host.get("rag"), 0, false).unwrap();
        assert!(!carried);
        assert!(state.evidence.in_progress);
        state.evidence.end_question();
        let mut expected: Value = serde_json::from_str(EMPTY_RAG).unwrap();
        expected["evidence"]["question"] = json!(0);
        assert_eq!(state.to_value(), expected);
    }

    /// Scenario 2: a new question keeps the filter and clears citations/searches.
    #[test]
    fn scenario_2_new_question_keeps_filter_clears_question_fields() {
        let raw = json!({
            "document_filter": "uri = 'manual.pdf'", "citations": ["old"],
            "searches": {"old": []},
            "evidence": {"question": 0, "in_progress": false},
            "citation_index": {"old": {"chunk_id": "old", "index": 1}}
        });
        let (state, carried) = settle_for_run(StateKind::Rag, Some(&raw), 2, false).unwrap();
        assert!(carried);
        assert_eq!(state.document_filter.as_deref(), Some("uri = 'manual.pdf'"));
        assert!(state.citations.is_empty() && state.searches.is_empty());
        assert!(state.citation_index.contains_key("old"));
        assert_eq!(state.evidence.question, Some(2));
    }

    /// Analysis executions are cleared by a new question and kept by a resumption.
    #[test]
    fn executions_cleared_on_new_question_kept_on_resumption() {
        let raw = json!({"executions": [{"code": "x", "stdout": "", "stderr": "", "success": true}],
                         "evidence": {"question": 0, "in_progress": false}});
        let (state, _) = settle_for_run(StateKind::Analysis, Some(&raw), 2, false).unwrap();
        assert_eq!(state.executions, Some(vec![]));
        let raw = json!({"executions": [{"code": "x"}], "searches": {"q": []},
                         "citations": ["c"], "evidence": {"question": 0, "in_progress": true,
                         "latest_evidence_epoch": 1}});
        let (state, _) = settle_for_run(StateKind::Analysis, Some(&raw), 2, true).unwrap();
        assert_eq!(state.executions.as_ref().unwrap().len(), 1);
        assert_eq!(state.citations, ["c"]);
        assert!(state.searches.contains_key("q"));
        assert_eq!(state.evidence.latest_evidence_epoch, 1);
    }

    /// Scenario 6 (state level): identities 0 then 2 for rag and analysis alike.
    #[test]
    fn scenario_6_identities_follow_history_length() {
        let mut host = Map::new();
        for kind in [StateKind::Rag, StateKind::Analysis] {
            let (mut state, _) =
                settle_for_run(kind, host.get(kind.namespace()), 0, false).unwrap();
            assert_eq!(state.evidence.question, Some(0));
            state.evidence.end_question();
            host.insert(kind.namespace().into(), state.to_value());
        }
        let history = [prompt("first"), text("answer")];
        for kind in [StateKind::Rag, StateKind::Analysis] {
            let (state, carried) = settle_for_run(
                kind,
                host.get(kind.namespace()),
                history.len(),
                awaits_the_model(&history),
            )
            .unwrap();
            assert!(carried);
            assert_eq!(state.evidence.question, Some(2));
        }
    }

    /// Scenario 7: a resumption after a deferred call keeps question 7.
    #[test]
    fn scenario_7_deferred_resumption_keeps_identity() {
        let raw = json!({"evidence": {"question": 7, "in_progress": true}});
        let history = [
            prompt("q"),
            call("rag_search", "call-1"),
            tool_return("rag_search", "call-1", "EVIDENCE"),
            call("external_tool", "call-2"),
        ];
        assert!(awaits_the_model(&history));
        let (state, carried) =
            settle_for_run(StateKind::Rag, Some(&raw), history.len(), true).unwrap();
        assert!(carried);
        assert_eq!(state.evidence.question, Some(7));
        assert!(state.evidence.in_progress);
    }

    /// Scenario 9: no prompt and no history → identity 0; no prompt with a single
    /// user request on a seeded empty state → a new question with identity 1.
    #[test]
    fn scenario_9_promptless_runs_are_new_questions() {
        let (state, carried) = settle_for_run(StateKind::Rag, None, 0, false).unwrap();
        assert_eq!((state.evidence.question, carried), (Some(0), false));
        let history = [prompt("hello")];
        assert!(!awaits_the_model(&history));
        let seeded: Value = serde_json::from_str(EMPTY_RAG).unwrap();
        let (state, carried) =
            settle_for_run(StateKind::Rag, Some(&seeded), history.len(), false).unwrap();
        assert_eq!((state.evidence.question, carried), (Some(1), false));
        assert!(state.evidence.in_progress);
    }

    /// Scenario 10: a history ending in a tool return with `in_progress` carried
    /// continues question 3.
    #[test]
    fn scenario_10_trailing_tool_return_continues_recorded_question() {
        let raw =
            json!({"evidence": {"question": 3, "in_progress": true, "latest_evidence_epoch": 4}});
        let history = [
            prompt("a"),
            text("b"),
            prompt("q"),
            call("rag_search", "c"),
            tool_return("rag_search", "c", "E"),
        ];
        assert!(!awaits_the_model(&history));
        let (state, _) = settle_for_run(StateKind::Rag, Some(&raw), history.len(), false).unwrap();
        assert_eq!(state.evidence.question, Some(3));
        assert_eq!(state.evidence.latest_evidence_epoch, 4);
    }

    /// Scenario 12: a text answer ends the question at 0.
    #[test]
    fn scenario_12_end_question_clears_in_progress() {
        let (mut state, _) = settle_for_run(StateKind::Rag, None, 0, false).unwrap();
        state.evidence.end_question();
        assert_eq!(state.evidence.question, Some(0));
        assert!(!state.evidence.in_progress);
    }

    /// §3.1: a history awaiting the model with no carried question is refused, as is
    /// a host-seeded record whose question is null.
    #[test]
    fn resumption_without_stored_identity_is_refused() {
        let history = [prompt("q"), call("rag_search", "c")];
        assert!(awaits_the_model(&history));
        let err = settle_for_run(StateKind::Rag, None, 2, true).unwrap_err();
        assert!(
            err.to_string().contains("no stored question identity"),
            "{err}"
        );
        assert!(err.to_string().contains("rag"));
        let seeded: Value = serde_json::from_str(EMPTY_RAG).unwrap();
        let err = settle_for_run(StateKind::Analysis, Some(&seeded), 2, true).unwrap_err();
        assert!(err.to_string().contains("no stored question identity"));
        assert!(err.to_string().contains("analysis"));
        // A settled record plus an awaiting history is refused too.
        let settled = json!({"evidence": {"question": 0, "in_progress": false}});
        assert!(settle_for_run(StateKind::Rag, Some(&settled), 2, true).is_err());
        // A record claiming a question in progress with no identity is refused.
        let incoherent = json!({"evidence": {"in_progress": true}});
        let err = settle_for_run(StateKind::Rag, Some(&incoherent), 2, false).unwrap_err();
        assert!(err.to_string().contains("no stored question identity"));
    }

    /// §3.1: only a trailing tool call or retry prompt awaits the model.
    #[test]
    fn awaits_the_model_cases() {
        assert!(!awaits_the_model(&[]));
        assert!(!awaits_the_model(&[prompt("q")]));
        assert!(!awaits_the_model(&[prompt("q"), text("a")]));
        assert!(awaits_the_model(&[prompt("q"), call("t", "c")]));
        assert!(!awaits_the_model(&[
            prompt("q"),
            call("t", "c"),
            tool_return("t", "c", "x")
        ]));
        let retry = ModelMessage::Request(ModelRequest::new(vec![ModelRequestPart::RetryPrompt(
            RetryPromptPart::for_tool("t", "c", "again"),
        )]));
        assert!(awaits_the_model(&[prompt("q"), call("t", "c"), retry]));
    }

    /// A settled question whose identity equals the new history length is refused by
    /// `settle_for_run` through `begin_question`.
    #[test]
    fn settle_refuses_a_non_increasing_identity() {
        let raw = json!({"evidence": {"question": 4, "in_progress": false}});
        let err = settle_for_run(StateKind::Rag, Some(&raw), 4, false).unwrap_err();
        assert!(err.to_string().contains("already answered"), "{err}");
    }

    /// Scenario 13: identities 4 and 3 after question 4 are refused; question stays 4.
    #[test]
    fn scenario_13_begin_question_refuses_old_identities() {
        let mut record = record_at(4);
        for identity in [4, 3] {
            let err = record.begin_question(identity).unwrap_err();
            assert!(err.to_string().contains("already answered"), "{err}");
            assert_eq!(record.question, Some(4));
        }
        record.begin_question(5).unwrap();
        assert_eq!(record.question, Some(5));
    }

    /// Scenario 15: a new identity below the old epochs is accepted and resets.
    #[test]
    fn scenario_15_new_identity_below_old_epochs_is_accepted() {
        let mut record = record_at(0);
        record.note_evidence(6).unwrap();
        record.declare(&[r("c1")], 7, &none()).unwrap();
        record.end_question();
        record.begin_question(4).unwrap();
        assert_eq!(record.latest_evidence_epoch, 0);
        assert_eq!(record.declaration, None);
        assert_eq!(citation_status_for(&[&record], 4), CitationStatus::Missing);
        assert_eq!(citation_status(&[&record]), CitationStatus::Missing);
    }

    /// §3.4: epochs below the recorded ones are refused ("append-only"); equal is fine.
    #[test]
    fn regression_is_refused_append_only() {
        let mut record = record_at(4);
        let err = record.note_evidence(3).unwrap_err();
        assert!(err.to_string().contains("append-only"), "{err}");
        record.note_evidence(4).unwrap();
        record.note_evidence(6).unwrap();
        let err = record.declare(&[r("c1")], 5, &none()).unwrap_err();
        assert!(err.to_string().contains("append-only"));
        assert_eq!(record.declaration, None);
        record.declare(&[r("c1")], 6, &none()).unwrap();
        record.declare(&[r("c2")], 8, &none()).unwrap();
        let err = record.note_evidence(7).unwrap_err();
        assert!(err.to_string().contains("append-only"));
        assert_eq!(record.latest_evidence_epoch, 6);
    }

    /// §3.6: declaring before any question is refused, naming the question identity.
    #[test]
    fn declare_without_question_is_refused() {
        let mut record = CapabilityEvidenceRecord::default();
        let err = record.declare(&[r("c1")], 1, &none()).unwrap_err();
        assert!(err.to_string().contains("question identity"), "{err}");
        assert!(record.occurrences.is_empty());
    }

    /// Scenario 17: no records / no declaration → missing; `[c1]@1` grounded; `[]@1`
    /// ungrounded.
    #[test]
    fn scenario_17_basic_statuses() {
        assert_eq!(citation_status(&[]), CitationStatus::Missing);
        let record = record_at(0);
        assert_eq!(citation_status(&[&record]), CitationStatus::Missing);
        let mut grounded = record_at(0);
        grounded.declare(&[r("c1")], 1, &none()).unwrap();
        assert_eq!(citation_status(&[&grounded]), CitationStatus::Grounded);
        let mut ungrounded = record_at(0);
        ungrounded.declare(&[], 1, &none()).unwrap();
        assert_eq!(citation_status(&[&ungrounded]), CitationStatus::Ungrounded);
        assert_eq!(CitationStatus::Ungrounded.as_str(), "ungrounded");
        assert_eq!(json!(CitationStatus::Grounded), json!("grounded"));
    }

    /// Scenario 19: the horizon is global across records.
    #[test]
    fn scenario_19_horizon_is_global() {
        let mut rag = record_at(0);
        rag.note_evidence(3).unwrap();
        rag.declare(&[r("c1")], 5, &none()).unwrap();
        let mut analysis = record_at(0);
        analysis.note_evidence(7).unwrap();
        assert_eq!(citation_status(&[&rag]), CitationStatus::Grounded);
        assert_eq!(citation_status(&[&rag, &analysis]), CitationStatus::Missing);
    }

    /// Scenario 20: merged refs keep order without duplicates.
    #[test]
    fn scenario_20_merge_dedups_in_order() {
        let mut record = record_at(0);
        for chunk in ["c1", "c2", "c1"] {
            record.declare(&[r(chunk)], 3, &none()).unwrap();
        }
        let declaration = record.declaration.as_ref().unwrap();
        assert_eq!(declaration.refs, vec![r("c1"), r("c2")]);
        assert_eq!(declaration.epoch, 3);
    }

    /// §3.6: evidence at the declaration's own epoch (same response) is not "after"
    /// it, so the next call still merges; evidence one epoch later replaces.
    #[test]
    fn merge_boundary_is_inclusive() {
        let mut record = record_at(0);
        record.declare(&[r("c1")], 3, &none()).unwrap();
        record.note_evidence(3).unwrap();
        record.declare(&[r("c2")], 3, &none()).unwrap();
        assert_eq!(
            record.declaration.as_ref().unwrap().refs,
            vec![r("c1"), r("c2")]
        );
        record.note_evidence(4).unwrap();
        record.declare(&[r("c3")], 5, &none()).unwrap();
        assert_eq!(record.declaration.as_ref().unwrap().refs, vec![r("c3")]);
        assert_eq!(record.declaration.as_ref().unwrap().question, 0);
    }

    /// Quirk 1: a fresh declaration keeps its refs as given.
    #[test]
    fn fresh_declaration_is_not_deduplicated() {
        let mut record = record_at(0);
        record.declare(&[r("c1"), r("c1")], 3, &none()).unwrap();
        assert_eq!(record.declaration.as_ref().unwrap().refs.len(), 2);
        assert_eq!(record.occurrences.len(), 1);
        assert_eq!(
            record.occurrences.get("c1").unwrap().cited_in_questions,
            vec![0]
        );
    }

    /// Scenario 21: an empty second call never narrows a grounded declaration.
    #[test]
    fn scenario_21_empty_call_never_narrows() {
        let mut a = record_at(0);
        a.declare(&[r("c1")], 3, &none()).unwrap();
        a.declare(&[], 3, &none()).unwrap();
        let mut b = record_at(0);
        b.declare(&[], 3, &none()).unwrap();
        b.declare(&[r("c1")], 3, &none()).unwrap();
        let mut c = record_at(0);
        c.declare(&[r("c1")], 3, &none()).unwrap();
        c.declare(&[], 5, &none()).unwrap();
        for record in [&a, &b, &c] {
            assert_eq!(citation_status(&[record]), CitationStatus::Grounded);
        }
        let last = c.declaration.as_ref().unwrap();
        assert_eq!(last.refs, vec![r("c1")]);
        assert_eq!(last.epoch, 5);
    }

    /// Scenario 22: newer evidence makes the next declaration replace the old one.
    #[test]
    fn scenario_22_newer_evidence_replaces() {
        let mut record = record_at(0);
        record.declare(&[r("first")], 3, &none()).unwrap();
        record.note_evidence(4).unwrap();
        record.declare(&[r("second")], 5, &none()).unwrap();
        assert_eq!(record.declaration.as_ref().unwrap().refs, vec![r("second")]);
        assert_eq!(citation_status(&[&record]), CitationStatus::Grounded);

        let mut record = record_at(0);
        record.declare(&[r("first")], 3, &none()).unwrap();
        record.note_evidence(4).unwrap();
        record.declare(&[], 5, &none()).unwrap();
        assert_eq!(citation_status(&[&record]), CitationStatus::Ungrounded);
    }

    /// Scenario 23: occurrence bookkeeping across questions and capabilities.
    #[test]
    fn scenario_23_occurrence_bookkeeping() {
        let mut rag = EvidenceState::empty(StateKind::Rag);
        rag.evidence.begin_question(2).unwrap();
        rag.searches.insert("q", vec![result("c1")]);
        rag.declare(&[r("c1")], 3).unwrap();
        rag.evidence.end_question();
        rag.begin_invocation();
        rag.evidence.begin_question(8).unwrap();
        assert!(rag.retrieved_ids().is_empty());
        rag.declare(&[r("c1")], 9).unwrap();
        let occurrence = rag.evidence.occurrences.get("c1").unwrap();
        assert_eq!(occurrence.cited_in_questions, vec![2, 8]);
        assert_eq!(occurrence.retrieved_in_questions, vec![2]);
        assert_eq!(occurrence.capability, "rag");

        let mut analysis = EvidenceState::empty(StateKind::Analysis);
        analysis.evidence.begin_question(8).unwrap();
        analysis
            .declare(&[CitationRef::new("analysis", "c1")], 9)
            .unwrap();
        let other = analysis.evidence.occurrences.get("c1").unwrap();
        assert_eq!(other.capability, "analysis");
        assert_eq!(other.cited_in_questions, vec![8]);
        assert!(other.retrieved_in_questions.is_empty());
    }

    /// `retrieved_ids` covers every bucket, `_sandbox` included.
    #[test]
    fn retrieved_ids_include_sandbox_bucket() {
        let mut state = EvidenceState::empty(StateKind::Analysis);
        state.searches.insert("q", vec![result("c1"), result("c2")]);
        state.searches.insert(SANDBOX_BUCKET, vec![result("c3")]);
        let ids = state.retrieved_ids();
        let expected: HashSet<String> = ["c1", "c2", "c3"].map(String::from).into();
        assert_eq!(ids, expected);
    }

    /// Scenario 25: search@1, cite@3, search@5 → missing; search and cite in one
    /// response (same epoch) → missing, with `declaration.epoch == latest_evidence_epoch`.
    #[test]
    fn scenario_25_citation_before_later_evidence_is_missing() {
        let mut record = record_at(0);
        record.note_evidence(1).unwrap();
        record.declare(&[r("chunk-1")], 3, &none()).unwrap();
        record.note_evidence(5).unwrap();
        assert_eq!(citation_status(&[&record]), CitationStatus::Missing);

        let mut record = record_at(0);
        record.note_evidence(1).unwrap();
        record.declare(&[r("chunk-1")], 1, &none()).unwrap();
        assert_eq!(citation_status(&[&record]), CitationStatus::Missing);
        assert_eq!(
            record.declaration.as_ref().unwrap().epoch,
            record.latest_evidence_epoch
        );
    }

    /// A declaration of an earlier question never counts for the current one.
    #[test]
    fn declaration_of_another_question_is_missing() {
        let mut record = record_at(0);
        record.declare(&[r("c1")], 3, &none()).unwrap();
        assert_eq!(citation_status_for(&[&record], 6), CitationStatus::Missing);
        assert_eq!(citation_status_for(&[&record], 0), CitationStatus::Grounded);
    }

    /// §10.2: a violation is recorded at most once per question; malformed policy
    /// state is repaired; `ensure_policy_state` publishes the empty list.
    #[test]
    fn violations_are_recorded_once_per_question() {
        let mut state = Map::new();
        ensure_policy_state(&mut state);
        assert_eq!(
            Value::Object(state.clone()),
            json!({"citation_policy": {"violations": []}})
        );
        assert!(record_violation(&mut state, 0));
        assert!(!record_violation(&mut state, 0));
        assert!(record_violation(&mut state, 6));
        assert_eq!(state["citation_policy"], json!({"violations": [0, 6]}));
        assert_eq!(violations(&state), vec![0, 6]);

        let mut fresh = Map::new();
        assert!(record_violation(&mut fresh, 2));
        assert_eq!(fresh["citation_policy"]["violations"], json!([2]));

        let mut broken = Map::new();
        broken.insert(
            "citation_policy".into(),
            json!({"violations": "x", "other": 1}),
        );
        record_violation(&mut broken, 1);
        assert_eq!(
            broken["citation_policy"],
            json!({"violations": [1], "other": 1})
        );
        assert!(violations(&Map::new()).is_empty());
    }

    #[test]
    fn ordered_map_semantics() {
        let mut map: OrderedMap<i32> = OrderedMap::new();
        assert_eq!(map.insert("b", 1), None);
        map.insert("a", 2);
        assert_eq!(map.insert("b", 3), Some(1));
        assert_eq!(map.keys().collect::<Vec<_>>(), ["b", "a"]);
        *map.get_or_insert_with("c", || 0) += 5;
        *map.get_or_insert_with("a", || 0) += 5;
        assert_eq!(
            map.iter().collect::<Vec<_>>(),
            [("b", &3), ("a", &7), ("c", &5)]
        );
        let parsed: OrderedMap<i32> = serde_json::from_str(r#"{"x":1,"y":2,"x":3}"#).unwrap();
        assert_eq!(parsed.iter().collect::<Vec<_>>(), [("x", &3), ("y", &2)]);
        let null: OrderedMap<i32> = serde_json::from_str("null").unwrap();
        assert!(null.is_empty());
    }

    /// `Citation::from_result` follows §6 step 4.
    #[test]
    fn citation_from_result() {
        let mut res = result("c1");
        res.doc_item_refs = vec!["#/texts/1".into(), "#/pictures/0".into()];
        res.document_uri = None;
        let citation = Citation::from_result("c1", &res);
        assert_eq!(citation.chunk_ids, vec!["c1"]);
        assert_eq!(citation.picture_refs, vec!["#/pictures/0"]);
        assert_eq!(citation.document_uri, "");
        let v = serde_json::to_value(&citation).unwrap();
        assert!(v.get("collection").is_none());
    }
}
