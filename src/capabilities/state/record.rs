//! The persisted types of the evidence state (SPEC §2.1, §2.2): citations, the
//! evidence record ("ledger") with its occurrences and declaration, executions, and
//! `state[ns]` itself.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{ANALYSIS_NAMESPACE, OrderedMap, PICTURE_REF_PREFIX, RAG_NAMESPACE, StateError};
use crate::store::types::SearchResult;

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
    /// Groundwork's document filter per collection (collection → SQL WHERE), when several
    /// are open and the user chose documents of some: a search then covers only those
    /// collections, each with its own filter. Not a haiku.rag 0.77 key; omitted when empty.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub collection_filters: std::collections::BTreeMap<String, String>,
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
