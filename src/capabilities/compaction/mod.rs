//! Evidence compaction (SPEC §8). The pure core: the capsule of cited evidence, the
//! cited pictures to re-attach, the rewriting of earlier questions' evidence returns
//! on the outgoing copy of the history, and the refusal when state was not carried.
//!
//! The engine's `wrap_model_request` hook orchestrates it (§8.1):
//!
//! 1. build one [`EvidenceView`] per discovered evidence capability, sorted by ns;
//! 2. `boundary = question_in_progress(views)`; stop when it is 0;
//! 3. [`require_records`]`(views, outgoing, boundary)?`;
//! 4. once per (run id, run step): [`build_capsule`], fetch each
//!    [`Capsule::pictures`] entry's bytes through its owning capability, then
//!    [`capsule_images`];
//! 5. `outgoing = `[`compact_history`]`(outgoing, boundary, owned_tools(views), ...)`.
//!
//! Stored history is never touched: every function here takes `&[ModelMessage]`.
//!
//! The parts: [`capsule`] builds the capsule of cited evidence and its pictures (and the
//! [`CapsuleKey`] that tells when a built capsule still holds); [`rewrite`] rewrites the
//! outgoing copy of the history; [`hook`] is the capability whose `wrap_model_request`
//! runs the steps above. This file holds the literals and the error type.

pub mod capsule;
pub mod hook;
pub mod rewrite;
#[cfg(test)]
mod tests;

pub use capsule::*;
pub use rewrite::*;

use crate::template::fill;

/// Fixed id of the compaction capability.
pub const CAPABILITY_ID: &str = "haiku-rag-evidence-compaction";

/// Marks a picture label we attached (SPEC §5.6, §8.4); its home is the kit.
pub use crate::capabilities::kit::RETRIEVED_IMAGE_TAG;

/// Separator between capsule pieces.
pub const ENTRY_SEPARATOR: &str = "\n\n";

const CAPSULE_HEADER: &str =
    include_str!("../../../assets/prompts/capabilities/capsule_header.txt");
const RECEIPT: &str = include_str!("../../../assets/prompts/capabilities/receipt.txt");
const PICTURE_LABEL: &str =
    include_str!("../../../assets/prompts/capabilities/capsule_picture_label.txt");

/// The capsule's header line (ours).
pub fn capsule_header() -> &'static str {
    CAPSULE_HEADER.trim_end()
}

/// The note that replaces an earlier question's evidence return (ours, §8.3).
pub fn receipt() -> &'static str {
    RECEIPT.trim_end()
}

/// `[Cited evidence group <k>]`: k counts the groups, newest first (§8.2).
pub fn group_label(position: usize) -> String {
    format!("[Cited evidence group {position}]")
}

/// The label that precedes a re-attached cited picture (ours, §8.5). It names
/// `[<chunk_id>]` and `(<self_ref>)` and ends with [`RETRIEVED_IMAGE_TAG`].
pub fn picture_label(chunk_id: &str, self_ref: &str) -> String {
    let text = fill(
        PICTURE_LABEL.trim_end(),
        &[("chunk_id", chunk_id), ("self_ref", self_ref)],
    );
    format!("{text} {RETRIEVED_IMAGE_TAG}")
}

/// Errors of compaction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactionError {
    /// A cited occurrence without its `citation_index` entry (§8.2).
    #[error(
        "the {capability} capability cited chunk {chunk_id} in question(s) {questions:?} but \
         has no citation record for it, so its content cannot be kept"
    )]
    MissingCitation {
        capability: String,
        chunk_id: String,
        questions: Vec<u64>,
    },
    /// Earlier evidence of a capability whose state was not carried (§8.6).
    #[error(
        "evidence compaction cannot summarise earlier evidence of the {capability} capability: \
         the host did not carry the capability state (state[\"{capability}\"]) between runs, \
         so there is no record to build the capsule from. Pass the same state on every run, \
         or remove evidence compaction."
    )]
    StateNotCarried { capability: String },
}
