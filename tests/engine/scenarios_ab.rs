//! SCENARIOS.md sections A (state model) and B (question identity, epochs,
//! resumption), run through the real agent loop against the scripted server. The
//! state-level tests of the same scenarios live in `src/capabilities/state.rs`.

use std::sync::{Arc, Mutex};

use crate::support::caps::TestCap;
use crate::support::kb::*;
use crate::support::scripted_server::{Reply, ScriptedServer, wire_messages};
use groundwork::capabilities::state::{
    CitationRef, CitationStatus, EvidenceState, StateKind, citation_status,
};
use groundwork::engine::agent::{DeferredResults, RunInput, RunOutput};
use groundwork::engine::cancel::CancelToken;
use groundwork::engine::capability::{ToolOutcome, ToolOutput};
use groundwork::engine::events::CoreEvent;
use serde_json::{Value, json};

/// The empty RAG state with `evidence.question = 0`, as JSON.
fn settled_at_zero() -> Value {
    let mut expected = EvidenceState::empty(StateKind::Rag).to_value();
    expected["evidence"]["question"] = json!(0);
    expected
}

/// The `rag` state published before the first model request of a run.
fn first_published(events: Vec<CoreEvent>) -> EvidenceState {
    events
        .into_iter()
        .find_map(|e| match e {
            CoreEvent::StateChanged {
                request: 0, state, ..
            } => Some(rag_state(&state)),
            _ => None,
        })
        .expect("state published before the first request")
}

// ----- A. State model -------------------------------------------------------------------

/// Scenario 1: an empty host state and a text answer leave exactly the empty RAG state
/// except `question: 0` (in_progress false, epoch 0, no declaration).
#[tokio::test]
async fn scenario_01_text_run_leaves_the_empty_state_at_question_zero() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![Reply::text("Hello!")]).await;
    let result = run(
        &agent(&server, vec![Arc::new(rag(&kb))]),
        RunInput::prompt("hi"),
    )
    .await
    .unwrap();
    assert_eq!(text_output(&result), "Hello!");
    assert_eq!(result.state["rag"], settled_at_zero());
    let evidence = &result.state["rag"]["evidence"];
    assert_eq!(evidence["in_progress"], json!(false));
    assert_eq!(evidence["latest_evidence_epoch"], json!(0));
    assert_eq!(evidence["declaration"], Value::Null);
}

// ----- B. Identity, epochs, resumption -----------------------------------------------------

/// Scenario 7: a run resumed with the deferred result of `external_tool` keeps the
/// stored question 7 (it is not a new question at identity 4).
#[tokio::test]
async fn scenario_07_deferred_resumption_keeps_the_stored_identity() {
    let kb = kb().await;
    let trace = Arc::new(Mutex::new(Vec::new()));
    let external = TestCap::new("ext", &trace)
        .tool("external_tool")
        .handler(|_, _, _| ToolOutcome::Deferred)
        .arc();
    let mut stored = EvidenceState::empty(StateKind::Rag);
    stored.evidence.question = Some(7);
    stored.evidence.in_progress = true;
    let history = vec![
        prompt("q"),
        call("rag_search", json!({"query": "q"}), "call-1"),
        tool_return("rag_search", "call-1", "EVIDENCE"),
        call("external_tool", json!({"q": "approve?"}), "call-2"),
    ];
    let server = ScriptedServer::start(vec![Reply::text("resumed answer")]).await;
    let (tx, mut rx) = crate::support::events();
    let result = agent(&server, vec![Arc::new(rag(&kb)), external])
        .run(
            RunInput {
                prompt: None,
                history,
                state: rag_host_state(&stored),
                deferred_results: Some(
                    DeferredResults::default()
                        .with("call-2", ToolOutcome::Ok(ToolOutput::text("approved"))),
                ),
                run_id: None,
                earlier: None,
            },
            tx,
            CancelToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(text_output(&result), "resumed answer");
    let before = first_published(crate::support::drain(&mut rx));
    assert_eq!(before.evidence.question, Some(7));
    assert!(before.evidence.in_progress);
    let st = rag_state(&result.state);
    assert_eq!(st.evidence.question, Some(7));
    assert!(!st.evidence.in_progress);
    // The model saw the deferred result.
    let wire = wire_messages(&server.requests()[0]);
    assert!(wire.iter().any(|m| m["content"] == "approved"));
}

/// Scenario 9: a run with no prompt and no history is question 0; a run with no
/// prompt over a single user request and a seeded empty RAG state is a new question
/// with identity 1.
#[tokio::test]
async fn scenario_09_promptless_runs_are_new_questions() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![Reply::text("first"), Reply::text("second")]).await;
    let agent = agent(&server, vec![Arc::new(rag(&kb))]);
    let result = run(&agent, RunInput::default()).await.unwrap();
    assert_eq!(text_output(&result), "first");
    let st = rag_state(&result.state);
    assert_eq!(st.evidence.question, Some(0));
    assert!(!st.evidence.in_progress);

    let seeded = EvidenceState::empty(StateKind::Rag);
    let result = run(
        &agent,
        RunInput {
            history: vec![prompt("hello")],
            state: rag_host_state(&seeded),
            ..RunInput::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(text_output(&result), "second");
    let st = rag_state(&result.state);
    assert_eq!(st.evidence.question, Some(1));
    assert!(!st.evidence.in_progress);
    // The history's request was sent as it was, once.
    let (texts, _) = user_texts(&server.requests()[1]);
    assert_eq!(texts, ["hello"]);
}

/// Scenario 10: a promptless run over a history ending in a tool return continues the
/// stored question 3.
#[tokio::test]
async fn scenario_10_trailing_tool_return_continues_question_3() {
    let kb = kb().await;
    let mut stored = EvidenceState::empty(StateKind::Rag);
    stored.evidence.question = Some(3);
    stored.evidence.in_progress = true;
    let history = vec![
        prompt("a"),
        answer("b"),
        prompt("q"),
        call("rag_search", json!({"query": "q"}), "c"),
        tool_return("rag_search", "c", "E"),
    ];
    let server = ScriptedServer::start(vec![Reply::text("continued")]).await;
    let (tx, mut rx) = crate::support::events();
    let result = agent(&server, vec![Arc::new(rag(&kb))])
        .run(
            RunInput {
                history,
                state: rag_host_state(&stored),
                ..RunInput::default()
            },
            tx,
            CancelToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(text_output(&result), "continued");
    assert_eq!(
        first_published(crate::support::drain(&mut rx))
            .evidence
            .question,
        Some(3)
    );
    let st = rag_state(&result.state);
    assert_eq!(st.evidence.question, Some(3));
    assert!(!st.evidence.in_progress);
    // No new request was added: the history's last request went out as it was.
    assert_eq!(result.messages.len(), 6);
    assert_eq!(returns_of(&server.requests()[0], "rag_search"), ["E"]);
}

/// Scenario 12: a model that searches and then answers with text leaves question 0
/// closed (in_progress false).
#[tokio::test]
async fn scenario_12_text_answer_closes_question_zero() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "Gradient", "limit": 1})),
        Reply::text("the answer"),
    ])
    .await;
    let result = run(
        &agent(&server, vec![Arc::new(rag(&kb))]),
        RunInput::prompt("q"),
    )
    .await
    .unwrap();
    assert_eq!(text_output(&result), "the answer");
    let st = rag_state(&result.state);
    assert_eq!(st.evidence.question, Some(0));
    assert!(!st.evidence.in_progress);
    assert_eq!(st.evidence.latest_evidence_epoch, 1);
}

/// Scenario 13: after question 4, runs whose new question would have identity 4 or 3
/// are refused with `already answered` before any model request; the host's record
/// stays at 4.
#[tokio::test]
async fn scenario_13_old_identities_are_refused_already_answered() {
    let kb = kb().await;
    let mut stored = EvidenceState::empty(StateKind::Rag);
    stored.evidence.question = Some(4);
    stored.evidence.in_progress = false;
    let state = rag_host_state(&stored);
    let server = ScriptedServer::start(vec![Reply::text("never sent")]).await;
    let agent = agent(&server, vec![Arc::new(rag(&kb))]);
    let four = answered("earlier", "EVIDENCE");
    let three = four[..3].to_vec();
    for history in [four, three] {
        let err = run(
            &agent,
            RunInput::prompt("again")
                .with_history(history)
                .with_state(state.clone()),
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("already answered"), "{err}");
    }
    assert!(server.requests().is_empty());
    assert_eq!(rag_state(&state).evidence.question, Some(4));
}

/// Scenario 15: a record in question 0 with evidence at epoch 6 and a declaration at
/// epoch 7 accepts a new question with identity 4; the epoch and declaration are reset
/// and the status of question 4 is `missing`.
#[tokio::test]
async fn scenario_15_new_identity_below_the_old_epochs_is_accepted() {
    let kb = kb().await;
    let mut stored = EvidenceState::empty(StateKind::Rag);
    stored.evidence.begin_question(0).unwrap();
    stored.evidence.note_evidence(6).unwrap();
    stored
        .evidence
        .declare(
            &[CitationRef::new("rag", "c1")],
            7,
            &std::collections::HashSet::new(),
        )
        .unwrap();
    stored.evidence.end_question();
    let server = ScriptedServer::start(vec![Reply::text("hello")]).await;
    let (tx, mut rx) = crate::support::events();
    let result = agent(&server, vec![Arc::new(rag(&kb))])
        .run(
            RunInput::prompt("next")
                .with_history(answered("earlier", "EVIDENCE"))
                .with_state(rag_host_state(&stored)),
            tx,
            CancelToken::new(),
        )
        .await
        .unwrap();
    let before = first_published(crate::support::drain(&mut rx));
    assert_eq!(before.evidence.question, Some(4));
    assert_eq!(before.evidence.latest_evidence_epoch, 0);
    assert_eq!(before.evidence.declaration, None);
    let st = rag_state(&result.state);
    assert_eq!(st.evidence.question, Some(4));
    assert_eq!(st.evidence.latest_evidence_epoch, 0);
    assert_eq!(st.evidence.declaration, None);
    assert_eq!(result.state["rag"]["evidence"]["declaration"], Value::Null);
    assert_eq!(citation_status(&[&st.evidence]), CitationStatus::Missing);
    // The occurrence of the earlier question is kept.
    assert_eq!(
        st.evidence
            .occurrences
            .get("c1")
            .unwrap()
            .cited_in_questions,
        [0]
    );
    assert!(matches!(result.output, RunOutput::Text(_)));
}
