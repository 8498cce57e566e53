//! SCENARIOS.md section G (evidence compaction), run through the real agent loop
//! against the scripted server: what the model receives for earlier questions. The
//! function-level tests of the same scenarios live in `src/capabilities/compaction.rs`;
//! scenarios 52, 58, 65 and 67 (deferred resumption) also in `tests/engine/rag_capability.rs`.

use std::sync::{Arc, Mutex};

use crate::support::caps::TestCap;
use crate::support::kb::*;
use crate::support::scripted_server::{Reply, ScriptedServer, wire_messages};
use groundwork::capabilities::compaction::hook::EvidenceCompactionCapability;
use groundwork::capabilities::compaction::{
    RETRIEVED_IMAGE_TAG, capsule_header, group_label, receipt,
};
use groundwork::capabilities::state::{EvidenceState, StateKind};
use groundwork::engine::agent::{DeferredResults, RunInput, RunResult};
use groundwork::engine::capability::{Capability, ToolOutcome, ToolOutput};
use groundwork::engine::messages::{ModelMessage, UserContent};
use serde_json::{Value, json};

fn compacting(kb: &Kb) -> Vec<Arc<dyn Capability>> {
    vec![
        Arc::new(rag(kb)),
        Arc::new(EvidenceCompactionCapability::new()),
    ]
}

fn search(query: &str, limit: usize) -> Reply {
    Reply::tool_call("rag_search", json!({"query": query, "limit": limit}))
}

fn cite(ids: &[&str]) -> Reply {
    Reply::tool_call("rag_cite", json!({ "chunk_ids": ids }))
}

/// The next question over `previous`, through `server`.
async fn follow_up(
    server: &ScriptedServer,
    caps: Vec<Arc<dyn Capability>>,
    question: &str,
    previous: &RunResult,
) -> RunResult {
    run(
        &agent(server, caps),
        RunInput::prompt(question)
            .with_history(previous.messages.clone())
            .with_state(previous.state.clone()),
    )
    .await
    .unwrap()
}

/// The one owned return that carries the capsule.
fn capsule_of(body: &Value) -> String {
    let found: Vec<String> = ["rag_search", "analysis_search", "analysis_execute_code"]
        .iter()
        .flat_map(|t| returns_of(body, t))
        .filter(|r| r.starts_with(capsule_header()))
        .collect();
    assert_eq!(found.len(), 1, "exactly one capsule: {found:?}");
    found[0].clone()
}

// ----- G. Evidence compaction ----------------------------------------------------------------

/// Scenario 51: in the first question (boundary 0) the compactor sends the history
/// unchanged; a later run leaves the caller's messages, and the original evidence in
/// them, untouched.
#[tokio::test]
async fn scenario_51_boundary_zero_sends_everything_and_nothing_is_mutated() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![
        search("Gradient", 1),
        Reply::text("first answer"),
        Reply::text("second answer"),
    ])
    .await;
    let q1 = run(&agent(&server, compacting(&kb)), RunInput::prompt("first"))
        .await
        .unwrap();
    let original = stored_returns(&q1.messages, "rag_search");
    assert_eq!(original.len(), 1);
    assert!(original[0].contains("[rank 1 of 1]"));
    assert_eq!(
        returns_of(&server.requests()[1], "rag_search"),
        original,
        "boundary 0: word for word"
    );
    let history = q1.messages.clone();
    let q2 = follow_up(&server, compacting(&kb), "second", &q1).await;
    assert_eq!(returns_of(&server.requests()[2], "rag_search"), [receipt()]);
    assert_eq!(q1.messages, history, "the caller's list is untouched");
    assert_eq!(&q2.messages[..history.len()], &history[..]);
    assert_eq!(stored_returns(&q2.messages, "rag_search"), original);
}

/// Scenario 54: the current question's own search return stays live next to the
/// capsule; an earlier `other_tool` return and the earlier cite acknowledgement go out
/// unchanged.
#[tokio::test]
async fn scenario_54_live_evidence_other_tools_and_acks_are_untouched() {
    let kb = kb().await;
    let ai = kb.chunk("AI Overview", 0);
    let trace = Arc::new(Mutex::new(Vec::new()));
    let other = TestCap::new("other", &trace)
        .tool("other_tool")
        .handler(|_, _, _| ToolOutcome::Ok(ToolOutput::text("NOT OURS")))
        .arc();
    let caps = || -> Vec<Arc<dyn Capability>> {
        let mut caps = compacting(&kb);
        caps.push(other.clone());
        caps
    };
    let server = ScriptedServer::start(vec![
        search("agents perceive", 1).and_tool_call("other_tool", json!({"q": "x"})),
        cite(&[&ai]),
        Reply::text("first answer"),
        search("Gradient", 1),
        Reply::text("second answer"),
    ])
    .await;
    let q1 = run(&agent(&server, caps()), RunInput::prompt("first"))
        .await
        .unwrap();
    let q2 = follow_up(&server, caps(), "second", &q1).await;
    let live = stored_returns(&q2.messages, "rag_search")[1].clone();
    let body = server.requests().last().unwrap().clone();
    let searches = returns_of(&body, "rag_search");
    assert_eq!(searches.len(), 2);
    assert!(searches[0].starts_with(capsule_header()), "{}", searches[0]);
    assert!(searches[0].contains(&format!("[{ai}] Source: ")));
    assert_eq!(searches[1], live, "the live return goes out as it is");
    assert_eq!(returns_of(&body, "other_tool"), ["NOT OURS"]);
    assert_eq!(returns_of(&body, "rag_cite"), ["Registered 1 citation(s)."]);
}

/// Scenario 56: in earlier questions, a user's own untagged text + image stays, a
/// tagged label followed by text keeps both strings, and a message made only of our
/// label + image pair goes out as it was (never an empty message).
#[tokio::test]
async fn scenario_56_only_our_tagged_pairs_are_removed() {
    let kb = kb().await;
    let users_text = "Here is a page image retrieved from the knowledge base for my report";
    let tagged = format!("Page image 1 of 1 [x] (#/pictures/0). {RETRIEVED_IMAGE_TAG}");
    let history = vec![
        prompt_items(vec![UserContent::Text(tagged.clone()), image(&png())]),
        answer("ok"),
        prompt_items(vec![UserContent::Text(users_text.into()), image(&png())]),
        answer("ok"),
        prompt_items(vec![
            UserContent::Text(tagged.clone()),
            UserContent::Text("and more".into()),
        ]),
        call("rag_search", json!({"query": "q"}), "call-1"),
        tool_return("rag_search", "call-1", "EVIDENCE"),
        answer("an answer"),
    ];
    let mut carried = EvidenceState::empty(StateKind::Rag);
    carried.evidence.question = Some(4);
    let server = ScriptedServer::start(vec![Reply::text("now answered")]).await;
    let result = run(
        &agent(&server, compacting(&kb)),
        RunInput::prompt("now")
            .with_history(history)
            .with_state(rag_host_state(&carried)),
    )
    .await
    .unwrap();
    assert_eq!(text_output(&result), "now answered");
    let body = &server.requests()[0];
    assert_eq!(returns_of(body, "rag_search"), [receipt()]);
    let users: Vec<(Vec<String>, usize)> = wire_messages(body)
        .iter()
        .filter(|m| m["role"] == "user")
        .map(user_message_items)
        .collect();
    assert_eq!(users.len(), 4, "every user message is still there");
    assert_eq!(
        users[0],
        (vec![tagged.clone()], 1),
        "our lone pair as it was"
    );
    assert_eq!(users[1], (vec![users_text.to_string()], 1));
    assert_eq!(users[2], (vec![tagged, "and more".to_string()], 0));
    assert_eq!(users[3], (vec!["now".to_string()], 0));
}

/// Scenario 57: one earlier request holding two search returns: the returns go out as
/// [RECEIPT, capsule] and the cited picture once, as a user message of that same
/// request (right after its tool messages).
#[tokio::test]
async fn scenario_57_one_carrier_and_its_picture_once() {
    let kb = kb().await;
    let inverter = kb.chunk("Inverter", 0);
    let server = ScriptedServer::start(vec![
        search("wiring diagram inverter", 1)
            .and_tool_call("rag_search", json!({"query": "Gradient", "limit": 1})),
        cite(&[&inverter]),
        Reply::text("first answer"),
        Reply::text("second answer"),
    ])
    .await;
    let q1 = run(&agent(&server, compacting(&kb)), RunInput::prompt("first"))
        .await
        .unwrap();
    follow_up(&server, compacting(&kb), "second", &q1).await;
    let body = server.requests().last().unwrap().clone();
    let searches = returns_of(&body, "rag_search");
    assert_eq!(searches.len(), 2);
    assert_eq!(searches[0], receipt());
    assert!(searches[1].starts_with(capsule_header()));
    assert!(searches[1].contains(&format!("[{inverter}] Source: \"Inverter\"")));
    assert_eq!(user_texts(&body).1, 1, "the picture appears once");
    let wire = wire_messages(&body);
    let second_return = wire
        .iter()
        .enumerate()
        .filter(|(_, m)| m["role"] == "tool" && m["content"] == json!(searches[1]))
        .map(|(i, _)| i)
        .next()
        .unwrap();
    let pictures = &wire[second_return + 1];
    assert_eq!(pictures["role"], "user");
    let (texts, images) = user_message_items(pictures);
    assert_eq!(images, 1);
    assert!(texts[0].contains(&format!("[{inverter}]")) && texts[0].ends_with(RETRIEVED_IMAGE_TAG));
}

/// Scenario 60: citations from two questions: one header, group 1 (the newer question)
/// before group 2, the newer citation before the older, evidence cited in both once,
/// in group 1.
#[tokio::test]
async fn scenario_60_groups_newest_first_and_each_id_once() {
    let kb = kb().await;
    let old = kb.chunk("ML Basics", 0);
    let new = kb.chunk("ML Basics", 1);
    let reused = kb.chunk("ML Basics", 2);
    let server = ScriptedServer::start(vec![
        search("Gradient", 1),
        cite(&[&old, &reused]),
        Reply::text("first answer"),
        cite(&[&new, &reused]),
        Reply::text("second answer"),
        Reply::text("third answer"),
    ])
    .await;
    let q1 = run(&agent(&server, compacting(&kb)), RunInput::prompt("first"))
        .await
        .unwrap();
    let q2 = follow_up(&server, compacting(&kb), "second", &q1).await;
    follow_up(&server, compacting(&kb), "third", &q2).await;
    let capsule = capsule_of(server.requests().last().unwrap());
    assert_eq!(capsule.matches(capsule_header()).count(), 1);
    let g1 = capsule.find(&group_label(1)).unwrap();
    let g2 = capsule.find(&group_label(2)).unwrap();
    assert!(g1 < g2);
    let at = |id: &str| capsule.find(&format!("[{id}] Source: ")).unwrap();
    assert!(g1 < at(&new) && at(&new) < g2 && at(&old) > g2);
    assert_eq!(capsule.matches(&format!("[{reused}] Source: ")).count(), 1);
    assert!(g1 < at(&reused) && at(&reused) < g2);
}

/// Scenario 60 (second part): a RAG citation in one question and an analysis citation
/// in a later one share one capsule, on the last owned return.
#[tokio::test]
async fn scenario_60_rag_and_analysis_citations_share_one_capsule() {
    let kb = kb().await;
    let ai = kb.chunk("AI Overview", 0);
    let ml = kb.chunk("ML Basics", 0);
    let caps = || -> Vec<Arc<dyn Capability>> {
        vec![
            Arc::new(rag(&kb)),
            Arc::new(analysis(&kb)),
            Arc::new(EvidenceCompactionCapability::new()),
        ]
    };
    let server = ScriptedServer::start(vec![
        search("agents perceive", 1),
        cite(&[&ai]),
        Reply::text("first answer"),
        Reply::tool_call("analysis_search", json!({"query": "gradient descent"})),
        Reply::tool_call("analysis_cite", json!({"chunk_ids": [ml]})),
        Reply::text("second answer"),
        Reply::text("third answer"),
    ])
    .await;
    let q1 = run(&agent(&server, caps()), RunInput::prompt("first"))
        .await
        .unwrap();
    let q2 = follow_up(&server, caps(), "second", &q1).await;
    follow_up(&server, caps(), "third", &q2).await;
    let body = server.requests().last().unwrap().clone();
    assert_eq!(returns_of(&body, "rag_search"), [receipt()]);
    let capsule = capsule_of(&body);
    assert_eq!(
        returns_of(&body, "analysis_search"),
        std::slice::from_ref(&capsule)
    );
    let g1 = capsule.find(&group_label(1)).unwrap();
    let g2 = capsule.find(&group_label(2)).unwrap();
    let at = |id: &str| capsule.find(&format!("[{id}] Source: ")).unwrap();
    assert!(g1 < at(&ml) && at(&ml) < g2 && g2 < at(&ai), "{capsule}");
}

/// Scenario 61: a citation whose title and uri are equal names the source once;
/// distinct ones read `"Title" (uri)`.
#[tokio::test]
async fn scenario_61_source_lines() {
    let kb = kb().await;
    let arxiv = kb.chunk("arxiv", 0);
    let ai = kb.chunk("AI Overview", 0);
    let server = ScriptedServer::start(vec![
        search("Gradient", 1),
        cite(&[&arxiv, &ai]),
        Reply::text("first answer"),
        Reply::text("second answer"),
    ])
    .await;
    let q1 = run(&agent(&server, compacting(&kb)), RunInput::prompt("first"))
        .await
        .unwrap();
    follow_up(&server, compacting(&kb), "second", &q1).await;
    let capsule = capsule_of(server.requests().last().unwrap());
    assert!(
        capsule.contains(&format!("[{arxiv}] Source: \"2410.11843v5\"\n")),
        "{capsule}"
    );
    assert!(!capsule.contains("2410.11843v5)"));
    assert!(capsule.contains(&format!(
        "[{ai}] Source: \"AI Overview\" (test://ai-overview)\n"
    )));
}

/// Scenario 63: evidence that was only retrieved is left out of the capsule with its
/// pictures; cited content of 20 000 characters is kept whole.
#[tokio::test]
async fn scenario_63_retrieved_only_is_dropped_and_cited_content_is_whole() {
    let kb = kb().await;
    let long = kb.chunk("Long Report", 0);
    let server = ScriptedServer::start(vec![
        search("wiring diagram inverter gradient", 10),
        cite(&[&long]),
        Reply::text("first answer"),
        Reply::text("second answer"),
    ])
    .await;
    let q1 = run(&agent(&server, compacting(&kb)), RunInput::prompt("first"))
        .await
        .unwrap();
    let retrieved: Vec<String> = rag_state(&q1.state)
        .searches
        .values()
        .flatten()
        .flat_map(|r| r.chunk_ids.clone())
        .filter(|id| *id != long)
        .collect();
    assert!(
        retrieved.contains(&kb.chunk("Inverter", 0)),
        "{retrieved:?}"
    );
    follow_up(&server, compacting(&kb), "second", &q1).await;
    let body = server.requests().last().unwrap().clone();
    let capsule = capsule_of(&body);
    assert!(capsule.contains(&format!("[{long}] Source: \"Long Report\" (test://long)\n")));
    assert!(capsule.contains(&long_content()), "cited content is whole");
    for id in &retrieved {
        assert!(!capsule.contains(id.as_str()), "{id} was only retrieved");
    }
    assert_eq!(
        user_texts(&body).1,
        0,
        "no picture of retrieved-only evidence"
    );
}

/// Scenario 65 (undecodable bytes): a cited picture whose stored bytes do not decode
/// is left out together with its label, and the run still answers.
#[tokio::test]
async fn scenario_65_undecodable_picture_is_left_out_with_its_label() {
    let kb = kb().await;
    let controller = kb.chunk("Controller", 0);
    let server = ScriptedServer::start(vec![
        search("Gradient", 1),
        cite(&[&controller]),
        Reply::text("first answer"),
        Reply::text("second answer"),
    ])
    .await;
    let q1 = run(&agent(&server, compacting(&kb)), RunInput::prompt("first"))
        .await
        .unwrap();
    assert_eq!(
        rag_state(&q1.state)
            .citation_index
            .get(&controller)
            .unwrap()
            .picture_refs,
        ["#/pictures/0"]
    );
    let q2 = follow_up(&server, compacting(&kb), "second", &q1).await;
    assert_eq!(text_output(&q2), "second answer");
    let body = server.requests().last().unwrap().clone();
    assert!(capsule_of(&body).contains(&format!("[{controller}] Source: ")));
    let (texts, images) = user_texts(&body);
    assert_eq!(images, 0);
    assert!(
        !texts.iter().any(|t| t.contains(RETRIEVED_IMAGE_TAG)),
        "{texts:?}"
    );
}

/// Scenario 67: a question resumed with no prompt, or with empty deferred results,
/// over answered("an earlier question", ...) and an in-flight question whose search
/// return is live: the model receives [RECEIPT, live evidence].
#[tokio::test]
async fn scenario_67_promptless_and_empty_deferred_resumptions_keep_live_evidence() {
    let kb = kb().await;
    let mut history = answered("an earlier question", "EVIDENCE FOR THE OLD TURN");
    history.extend([
        prompt("the live question"),
        call("rag_search", json!({"query": "live"}), "call-2"),
        tool_return("rag_search", "call-2", "EVIDENCE FOR THE LIVE TURN"),
    ]);
    let mut carried = EvidenceState::empty(StateKind::Rag);
    carried.evidence.question = Some(4);
    carried.evidence.in_progress = true;
    let server = ScriptedServer::start(vec![
        Reply::text("resumed answer"),
        Reply::text("resumed answer"),
    ])
    .await;
    for deferred_results in [None, Some(DeferredResults::default())] {
        let result = run(
            &agent(&server, compacting(&kb)),
            RunInput {
                history: history.clone(),
                state: rag_host_state(&carried),
                deferred_results,
                ..RunInput::default()
            },
        )
        .await
        .unwrap();
        assert_eq!(text_output(&result), "resumed answer");
        let body = server.requests().last().unwrap().clone();
        assert_eq!(
            returns_of(&body, "rag_search"),
            [receipt(), "EVIDENCE FOR THE LIVE TURN"]
        );
        let st = rag_state(&result.state);
        assert_eq!(st.evidence.question, Some(4));
        assert!(!st.evidence.in_progress);
        assert!(matches!(
            result.messages.last(),
            Some(ModelMessage::Response(_))
        ));
    }
}

/// Scenario 65 (raising fetch): the owner's connection fails when the picture is
/// fetched (its database is gone by the next question): the picture and its label are
/// left out and the run still answers.
#[tokio::test]
async fn scenario_65_raising_fetch_is_left_out_and_the_run_answers() {
    use groundwork::capabilities::rag::RagCapability;
    let kb = kb().await;
    let inverter = kb.chunk("Inverter", 0);
    let path_backed = || -> Vec<Arc<dyn Capability>> {
        vec![
            Arc::new(
                RagCapability::from_spec(
                    &json!({"db_path": kb.store.uri(), "defer_loading": false}),
                )
                .unwrap(),
            ),
            Arc::new(EvidenceCompactionCapability::new()),
        ]
    };
    let server = ScriptedServer::start(vec![
        search("Gradient", 1),
        cite(&[&inverter]),
        Reply::text("first answer"),
        Reply::text("second answer"),
    ])
    .await;
    let q1 = run(&agent(&server, path_backed()), RunInput::prompt("first"))
        .await
        .unwrap();
    assert_eq!(
        rag_state(&q1.state)
            .citation_index
            .get(&inverter)
            .unwrap()
            .picture_refs,
        ["#/pictures/0"]
    );
    std::fs::remove_dir_all(kb.store.uri()).unwrap();
    let q2 = follow_up(&server, path_backed(), "second", &q1).await;
    assert_eq!(text_output(&q2), "second answer");
    let body = server.requests().last().unwrap().clone();
    assert!(capsule_of(&body).contains(&format!("[{inverter}] Source: ")));
    let (texts, images) = user_texts(&body);
    assert_eq!(images, 0);
    assert!(
        !texts.iter().any(|t| t.contains(RETRIEVED_IMAGE_TAG)),
        "{texts:?}"
    );
}
