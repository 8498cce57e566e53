//! Unit tests of the evidence state: JSON round trips, ledger rules, settlement,
//! citation status and policy state.
//!
//! Kept in one file because the cases share the JSON fixtures and message builders below
//! and exercise one state object whose rules interlock.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::*;
use crate::engine::messages::{
    ModelMessage, ModelRequest, ModelRequestPart, ModelResponse, ModelResponsePart,
    RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart,
};
use crate::store::types::SearchResult;

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
    serde_json::from_value(json!({"content": "evidence", "score": 1.0, "chunk_id": chunk})).unwrap()
}

fn prompt(text: &str) -> ModelMessage {
    ModelMessage::from(ModelRequest::user(text))
}

fn call(tool: &str, id: &str) -> ModelMessage {
    ModelMessage::from(ModelResponse::new(vec![ModelResponsePart::ToolCall(
        ToolCallPart::new(tool, "{}", id),
    )]))
}

fn tool_return(tool: &str, id: &str, content: &str) -> ModelMessage {
    ModelMessage::from(ModelRequest::new(vec![ModelRequestPart::ToolReturn(
        ToolReturnPart::new(tool, json!(content), id),
    )]))
}

fn text(content: &str) -> ModelMessage {
    ModelMessage::from(ModelResponse::new(vec![ModelResponsePart::Text(
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
    let (mut state, carried) = settle_for_run(StateKind::Rag, host.get("rag"), 0, false).unwrap();
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
        let (mut state, _) = settle_for_run(kind, host.get(kind.namespace()), 0, false).unwrap();
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
    let (state, carried) = settle_for_run(StateKind::Rag, Some(&raw), history.len(), true).unwrap();
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
    let raw = json!({"evidence": {"question": 3, "in_progress": true, "latest_evidence_epoch": 4}});
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
    let retry = ModelMessage::from(ModelRequest::new(vec![ModelRequestPart::RetryPrompt(
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

/// The one decision both a live question (its declarations in the state) and a past one
/// (its citations and cite calls in the history) are judged by.
#[test]
fn one_decision_reads_every_declaration() {
    use CitationStatus::*;
    assert_eq!(CitationStatus::of_declarations([]), Missing);
    assert_eq!(CitationStatus::of_declarations([false]), Ungrounded);
    assert_eq!(CitationStatus::of_declarations([false, false]), Ungrounded);
    assert_eq!(CitationStatus::of_declarations([true]), Grounded);
    // Any declaration that cites something grounds the answer, before or after empty ones.
    assert_eq!(CitationStatus::of_declarations([false, true]), Grounded);
    assert_eq!(CitationStatus::of_declarations([true, false]), Grounded);
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

#[test]
fn a_new_question_sees_answered_questions_without_their_per_question_fields() {
    let state = json!({
        "rag": {"citation_index": {"c1": {}}, "citations": ["c1"], "searches": {"q": []},
                "evidence": {"in_progress": false, "question": 0}},
        "analysis": {"citations": ["c2"], "searches": {"q": []}, "executions": [],
                     "evidence": {"in_progress": true, "question": 4}},
        "citation_policy": {"violations": [0]}
    });
    let seen = as_a_new_question_sees_it(state.as_object().unwrap());
    assert_eq!(
        Value::Object(seen.clone()),
        json!({
            "rag": {"citation_index": {"c1": {}}, "citations": [], "searches": {},
                    "evidence": {"in_progress": false, "question": 0}},
            // A question in progress is continued: nothing is cleared.
            "analysis": state["analysis"].clone(),
            "citation_policy": {"violations": [0]}
        })
    );
    // What settlement makes of it is what it makes of the state as committed.
    for kind in [StateKind::Rag, StateKind::Analysis] {
        let a = settle_for_run(kind, state.get(kind.namespace()), 6, false);
        let b = settle_for_run(kind, seen.get(kind.namespace()), 6, false);
        assert_eq!(
            a.map(|(s, c)| (s.to_value(), c)),
            b.map(|(s, c)| (s.to_value(), c))
        );
    }
}
