//! What the two evidence capabilities (RAG and analysis) share: the request budget
//! with its citation grace ([`budget`]), the search tool's arguments, schema and
//! output ([`search`]), the retrieved pictures attached to search returns
//! ([`pictures`]), and the per-run state round trip (this file).
//!
//! Each capability keeps only what is its own: its ids and tool names, its store
//! handling, its extra tools and its budget counters.

pub mod budget;
pub mod pictures;
pub mod search;

use crate::capabilities::state::{EvidenceState, StateKind, awaits_the_model, settle_for_run};
use crate::config::AppConfig;
use crate::engine::capability::{ForRunContext, RunContext};

pub use budget::{CITATION_GRACE_REQUESTS, RequestBudget};
pub use pictures::{RETRIEVED_IMAGE_TAG, picture_content, search_picture_label};

/// The packaged instructions `text`, with the domain preamble first when set (SPEC §1.1).
pub fn with_preamble(config: &AppConfig, text: &str) -> String {
    let preamble = config.prompts.domain_preamble.trim();
    if preamble.is_empty() {
        text.to_string()
    } else {
        format!("{}\n\n{}", config.prompts.domain_preamble, text)
    }
}

/// Python's `repr` of a list of strings: `['a', 'b']`.
pub fn py_list(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|s| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")))
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// Settles the state under `namespace` for a new run (SPEC §2.3) and writes the settled
/// record back; returns it and whether a record with a question was carried over.
pub fn settle_state(
    ctx: &mut ForRunContext<'_>,
    kind: StateKind,
    namespace: &str,
) -> anyhow::Result<(EvidenceState, bool)> {
    let awaits = awaits_the_model(ctx.history);
    let (state, carried) =
        settle_for_run(kind, ctx.state.get(namespace), ctx.history_len(), awaits)?;
    ctx.state.insert(namespace.to_string(), state.to_value());
    Ok((state, carried))
}

/// Writes `state` back under `namespace` of the run's state.
pub fn write_back(ctx: &mut RunContext, namespace: &str, state: &EvidenceState) {
    ctx.state.insert(namespace.to_string(), state.to_value());
}
