//! SCENARIOS.md sections C (citation status and the ledger), D (search) and F
//! (budgets), run through the real agent loop against the scripted server. The
//! record-level tests of section C live in `src/capabilities/state.rs`; the existing
//! run-level ones of D and F in `tests/engine/rag_capability.rs`.

use std::sync::{Arc, Mutex};

use crate::support::caps::TestCap;
use crate::support::kb::*;
use crate::support::scripted_server::{Reply, ScriptedServer, system_text, tool_names};
use groundwork::capabilities::state::{
    CitationRef, CitationStatus, EvidenceState, StateKind, citation_status,
};
use groundwork::engine::agent::RunInput;
use groundwork::engine::capability::Capability;
use serde_json::json;

fn search(query: &str) -> Reply {
    Reply::tool_call("rag_search", json!({"query": query, "limit": 1}))
}

fn cite(ids: &[&str]) -> Reply {
    Reply::tool_call("rag_cite", json!({ "chunk_ids": ids }))
}

fn refs(st: &EvidenceState) -> Vec<String> {
    st.evidence
        .declaration
        .as_ref()
        .expect("a declaration")
        .refs
        .iter()
        .map(|r| r.chunk_id.clone())
        .collect()
}

/// Runs `script` in one question with RAG only and returns the RAG state.
async fn rag_run(kb: &Kb, script: Vec<Reply>) -> EvidenceState {
    let server = ScriptedServer::start(script).await;
    let result = run(
        &agent(&server, vec![Arc::new(rag(kb))]),
        RunInput::prompt("q"),
    )
    .await
    .unwrap();
    rag_state(&result.state)
}

// ----- C. Citation status and the ledger -------------------------------------------------

/// Scenario 19: RAG evidence at 1 and its declaration at 3, then analysis evidence at 5
/// in the same question: the RAG record alone is grounded, both together are missing.
#[tokio::test]
async fn scenario_19_a_later_analysis_search_makes_the_pair_missing() {
    let kb = kb().await;
    let ai = kb.chunk("AI Overview", 0);
    let server = ScriptedServer::start(vec![
        search("agents perceive"),
        cite(&[&ai]),
        Reply::tool_call("analysis_search", json!({"query": "gradient"})),
        Reply::text("answer"),
    ])
    .await;
    let caps: Vec<Arc<dyn Capability>> = vec![Arc::new(rag(&kb)), Arc::new(analysis(&kb))];
    let result = run(&agent(&server, caps), RunInput::prompt("q"))
        .await
        .unwrap();
    let rag = rag_state(&result.state);
    let analysis = analysis_state(&result.state);
    assert_eq!(rag.evidence.latest_evidence_epoch, 1);
    assert_eq!(rag.evidence.declaration.as_ref().unwrap().epoch, 3);
    assert_eq!(analysis.evidence.latest_evidence_epoch, 5);
    assert_eq!(analysis.evidence.question, rag.evidence.question);
    assert_eq!(citation_status(&[&rag.evidence]), CitationStatus::Grounded);
    assert_eq!(
        citation_status(&[&rag.evidence, &analysis.evidence]),
        CitationStatus::Missing
    );
}

/// Scenario 20: cites of [c1], [c2] and [c1] in one response (epoch 3) merge into
/// [c1, c2], in order, without duplicates.
#[tokio::test]
async fn scenario_20_same_epoch_cites_merge_in_order_without_duplicates() {
    let kb = kb().await;
    let c1 = kb.chunk("ML Basics", 0);
    let c2 = kb.chunk("ML Basics", 1);
    let st = rag_run(
        &kb,
        vec![
            search("Gradient"),
            cite(&[&c1])
                .and_tool_call("rag_cite", json!({"chunk_ids": [c2]}))
                .and_tool_call("rag_cite", json!({"chunk_ids": [c1]})),
            Reply::text("answer"),
        ],
    )
    .await;
    assert_eq!(refs(&st), [c1.clone(), c2.clone()]);
    assert_eq!(st.evidence.declaration.as_ref().unwrap().epoch, 3);
    assert_eq!(citation_status(&[&st.evidence]), CitationStatus::Grounded);
    assert_eq!(st.citations, [c1, c2]);
}

/// Scenario 21: an empty cite never narrows a grounded declaration, whether it comes
/// after [c1] in the same response, before it, or in a later response with no evidence
/// in between (the refs stay [c1]).
#[tokio::test]
async fn scenario_21_an_empty_cite_never_narrows() {
    let kb = kb().await;
    let c1 = kb.chunk("ML Basics", 0);
    let cases = vec![
        vec![
            search("Gradient"),
            cite(&[&c1]).and_tool_call("rag_cite", json!({"chunk_ids": []})),
            Reply::text("answer"),
        ],
        vec![
            search("Gradient"),
            cite(&[]).and_tool_call("rag_cite", json!({"chunk_ids": [c1]})),
            Reply::text("answer"),
        ],
        vec![
            search("Gradient"),
            cite(&[&c1]),
            cite(&[]),
            Reply::text("answer"),
        ],
    ];
    let mut last = None;
    for script in cases {
        let st = rag_run(&kb, script).await;
        assert_eq!(citation_status(&[&st.evidence]), CitationStatus::Grounded);
        assert_eq!(refs(&st), std::slice::from_ref(&c1));
        last = Some(st);
    }
    // The later empty cite moved the declaration to its own epoch.
    assert_eq!(
        last.unwrap().evidence.declaration.as_ref().unwrap().epoch,
        5
    );
}

/// Scenario 22: [first]@3, evidence@5, then [second]@7 replaces the refs with
/// [second]; with [] in place of [second] the status is ungrounded.
#[tokio::test]
async fn scenario_22_newer_evidence_makes_the_next_cite_replace() {
    let kb = kb().await;
    let first = kb.chunk("ML Basics", 0);
    let second = kb.chunk("ML Basics", 1);
    let st = rag_run(
        &kb,
        vec![
            search("Gradient"),
            cite(&[&first]),
            search("boosting"),
            cite(&[&second]),
            Reply::text("answer"),
        ],
    )
    .await;
    assert_eq!(refs(&st), std::slice::from_ref(&second));
    assert_eq!(st.evidence.declaration.as_ref().unwrap().epoch, 7);
    assert_eq!(citation_status(&[&st.evidence]), CitationStatus::Grounded);

    let st = rag_run(
        &kb,
        vec![
            search("Gradient"),
            cite(&[&first]),
            search("boosting"),
            cite(&[]),
            Reply::text("answer"),
        ],
    )
    .await;
    assert_eq!(citation_status(&[&st.evidence]), CitationStatus::Ungrounded);
}

/// Scenario 23: c1 retrieved and cited in question 2, cited again without retrieval in
/// question 8: cited in [2, 8], retrieved in [2]. The same id cited by RAG and by
/// analysis has an occurrence in each record, carrying its own capability name.
#[tokio::test]
async fn scenario_23_occurrences_across_questions_and_capabilities() {
    let kb = kb().await;
    let c1 = kb.chunk("AI Overview", 0);
    let mut seeded = EvidenceState::empty(StateKind::Rag);
    seeded.document_filter = Some("uri = 'test://ai-overview'".into());
    let server = ScriptedServer::start(vec![
        Reply::text("hello"),
        search("agents perceive"),
        cite(&[&c1]),
        Reply::text("cited answer"),
        cite(&[&c1]),
        Reply::text("cited again"),
    ])
    .await;
    let agent = agent(&server, vec![Arc::new(rag(&kb))]);
    let q0 = run(
        &agent,
        RunInput::prompt("hi").with_state(rag_host_state(&seeded)),
    )
    .await
    .unwrap();
    let q2 = run(
        &agent,
        RunInput::prompt("what are agents?")
            .with_history(q0.messages.clone())
            .with_state(q0.state.clone()),
    )
    .await
    .unwrap();
    assert_eq!(rag_state(&q2.state).evidence.question, Some(2));
    let q8 = run(
        &agent,
        RunInput::prompt("and again?")
            .with_history(q2.messages.clone())
            .with_state(q2.state.clone()),
    )
    .await
    .unwrap();
    let st = rag_state(&q8.state);
    assert_eq!(st.evidence.question, Some(8));
    let occurrence = st.evidence.occurrences.get(&c1).unwrap();
    assert_eq!(occurrence.cited_in_questions, [2, 8]);
    assert_eq!(occurrence.retrieved_in_questions, [2]);
    assert_eq!(occurrence.capability, "rag");

    // One id declared by both capabilities.
    let server = ScriptedServer::start(vec![
        cite(&[&c1]),
        Reply::tool_call("analysis_cite", json!({"chunk_ids": [c1]})),
        Reply::text("answer"),
    ])
    .await;
    let caps: Vec<Arc<dyn Capability>> = vec![Arc::new(rag(&kb)), Arc::new(analysis(&kb))];
    let result = run(&self::agent(&server, caps), RunInput::prompt("q"))
        .await
        .unwrap();
    let rag = rag_state(&result.state);
    let analysis = analysis_state(&result.state);
    assert_eq!(rag.evidence.occurrences.get(&c1).unwrap().capability, "rag");
    assert_eq!(
        analysis.evidence.occurrences.get(&c1).unwrap().capability,
        "analysis"
    );
    assert_eq!(
        analysis.evidence.declaration.as_ref().unwrap().refs,
        [CitationRef::new("analysis", c1.clone())]
    );
    assert_eq!(
        rag.evidence.declaration.as_ref().unwrap().refs,
        [CitationRef::new("rag", c1)]
    );
}

/// Scenario 25 (first case): search → cite([chunk]) → search → text leaves the status
/// missing (the citation predates the latest evidence).
#[tokio::test]
async fn scenario_25_search_after_the_cite_leaves_the_status_missing() {
    let kb = kb().await;
    let ai = kb.chunk("AI Overview", 0);
    let st = rag_run(
        &kb,
        vec![
            search("agents perceive"),
            cite(&[&ai]),
            search("Gradient"),
            Reply::text("answer"),
        ],
    )
    .await;
    assert_eq!(st.evidence.declaration.as_ref().unwrap().epoch, 3);
    assert_eq!(st.evidence.latest_evidence_epoch, 5);
    assert_eq!(citation_status(&[&st.evidence]), CitationStatus::Missing);
}

// ----- D. Search --------------------------------------------------------------------------

/// Scenario 33: two chunks of one document whose expansion ranges overlap come back
/// from `rag_search` as one result under the better chunk, holding both chunk ids and
/// the better score.
#[tokio::test]
async fn scenario_33_overlapping_expansions_are_one_result() {
    let kb = kb().await;
    let filter = "uri = 'test://handbook'";
    let query = "handbook torque values bolts";
    let alpha = kb.chunk("Handbook", 0);
    let beta = kb.chunk("Handbook", 1);
    let raw = kb.store.search(query, Some(2), Some(filter)).await.unwrap();
    assert_eq!(raw.len(), 2, "both chunks match before expansion");
    let best = raw
        .iter()
        .max_by(|a, b| a.score.total_cmp(&b.score))
        .unwrap()
        .clone();

    let mut seeded = EvidenceState::empty(StateKind::Rag);
    seeded.document_filter = Some(filter.into());
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": query, "limit": 2})),
        Reply::text("answer"),
    ])
    .await;
    let result = run(
        &agent(&server, vec![Arc::new(rag(&kb))]),
        RunInput::prompt("q").with_state(rag_host_state(&seeded)),
    )
    .await
    .unwrap();
    let text = returns_of(&server.requests()[1], "rag_search")[0].clone();
    assert_eq!(text.split("\n\n---\n\n").count(), 1, "{text}");
    assert!(
        text.starts_with("[") && text.contains("[rank 1 of 1]"),
        "{text}"
    );
    let st = rag_state(&result.state);
    let results = st.searches.get(query).unwrap();
    assert_eq!(results.len(), 1);
    let merged = &results[0];
    assert!(merged.chunk_ids.contains(&alpha) && merged.chunk_ids.contains(&beta));
    assert_eq!(merged.score, best.score);
    if raw[0].score != raw[1].score {
        assert_eq!(merged.id(), best.id());
    }
}

// ----- F. Budgets -------------------------------------------------------------------------

/// Scenario 47: over its request limit, RAG's grace counter moves only when the latest
/// response called one of its own tools. With `request_limit = 0`: no response yet, a
/// text-only response, an `analysis_search` turn (also after an earlier `rag_cite`)
/// leave it alone, so `rag_cite` stays offered until the second `rag_cite` turn has been
/// counted (tools are prepared with the counts before that request's own increment).
#[tokio::test]
async fn scenario_47_grace_moves_only_after_own_tool_turns() {
    let kb = kb().await;
    let trace = Arc::new(Mutex::new(Vec::new()));
    let nudge = TestCap::new("host", &trace)
        .enqueue_once("Please go on.")
        .arc();
    let server = ScriptedServer::start(vec![
        Reply::text("a first thought"),
        Reply::tool_call("analysis_search", json!({"query": "gradient"})),
        cite(&[]),
        Reply::tool_call("analysis_search", json!({"query": "agents"})),
        cite(&[]),
        Reply::tool_call("analysis_search", json!({"query": "boosting"})),
        Reply::text("final"),
    ])
    .await;
    let caps: Vec<Arc<dyn Capability>> = vec![
        Arc::new(rag(&kb).request_limit(Some(0))),
        Arc::new(analysis(&kb)),
        nudge,
    ];
    let result = run(&agent(&server, caps), RunInput::prompt("q"))
        .await
        .unwrap();
    assert_eq!(text_output(&result), "final");
    let requests = server.requests();
    assert_eq!(requests.len(), 7);
    // Request 2 is the nudge after the text-only response.
    assert!(user_texts(&requests[1]).0.contains(&"Please go on.".into()));
    for (i, r) in requests[..6].iter().enumerate() {
        let tools = tool_names(r);
        assert!(
            tools.contains(&"rag_cite".to_string()),
            "request {}: {tools:?}",
            i + 1
        );
        assert!(!tools.contains(&"rag_search".to_string()));
        assert!(tools.contains(&"analysis_search".to_string()));
        assert!(
            system_text(r).contains("rag capability has reached its request limit"),
            "request {}",
            i + 1
        );
    }
    // The grace spent by the second `rag_cite` turn (counted when request 6 was sent)
    // withdraws the tool from the request after it.
    let last = tool_names(&requests[6]);
    assert!(!last.iter().any(|t| t.starts_with("rag_")), "{last:?}");
    assert!(last.contains(&"analysis_search".to_string()));
    assert!(system_text(&requests[6]).contains("no longer available"));
}
