//! The evidence state a capability keeps under its namespace (`state["rag"]`,
//! `state["analysis"]`), the evidence record ("ledger") inside it, citation status and
//! the policy's violation list (SPEC §2–§4, §10.2).
//!
//! Everything here is pure data and bookkeeping: no I/O, no agent loop. The JSON is a
//! compatibility surface with haiku.rag 0.75+ hosts: keys and nesting are fixed, key
//! order is not, missing keys take defaults and unknown keys are ignored.
//!
//! One file per job: `ordered` (the insertion-ordered map the JSON needs),
//! `record` (the persisted types), `settle` (the `for_run` decision), `status`
//! (citation status and the policy's violations).

mod ordered;
mod record;
mod settle;
mod status;

pub use ordered::OrderedMap;
pub use record::{
    CapabilityEvidenceRecord, Citation, CitationDeclaration, CitationRef, EvidenceOccurrence,
    EvidenceState, Execution, StateKind,
};
pub use settle::{as_a_new_question_sees_it, awaits_the_model, settle_for_run};
pub use status::{
    CitationStatus, VIOLATIONS_KEY, citation_status, citation_status_for, current_question,
    ensure_policy_state, record_violation, violations,
};

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

#[cfg(test)]
mod tests;
