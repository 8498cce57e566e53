//! Run settlement (SPEC §3.1): whether a history awaits the model, and the `for_run`
//! decision to continue the recorded question or start a new one.

use serde_json::Value;

use super::{EvidenceState, StateError, StateKind};
use crate::engine::messages::{ModelMessage, ModelRequestPart, ModelResponsePart};

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

/// The state as a new question's run sees it once settled: the per-question fields
/// (`citations`, `searches`, `executions`) of every evidence state whose question is
/// answered are emptied, since [`settle_for_run`] clears them before the run reads them;
/// everything else is kept as it is, key order included. A host records this as the
/// state a question started from, so recording it costs what the question added to the
/// lasting record, not the previous question's search results again.
pub fn as_a_new_question_sees_it(
    state: &serde_json::Map<String, Value>,
) -> serde_json::Map<String, Value> {
    let mut out = state.clone();
    for kind in [StateKind::Rag, StateKind::Analysis] {
        let Some(Value::Object(ns)) = out.get_mut(kind.namespace()) else {
            continue;
        };
        let in_progress = ns
            .get("evidence")
            .and_then(|e| e.get("in_progress"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if in_progress {
            continue;
        }
        for (key, empty) in [
            ("citations", Value::Array(Vec::new())),
            ("searches", Value::Object(Default::default())),
            ("executions", Value::Array(Vec::new())),
        ] {
            if let Some(v) = ns.get_mut(key)
                && !v.is_null()
            {
                *v = empty;
            }
        }
    }
    out
}
