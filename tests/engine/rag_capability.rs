//! The RAG, evidence-compaction and citation-policy capabilities through the real
//! agent loop and async-openai client against the scripted server, over a real
//! LanceDB store built in a temp dir with the hashembed server. Test names carry the
//! SCENARIOS.md numbers.

use std::sync::{Arc, Mutex};

use crate::support::caps::TestCap;
use crate::support::hashembed;
use crate::support::kb::*;
use crate::support::scripted_server::{Reply, ScriptedServer, system_text, tool_names};
use crate::support::{agent_for, test_config};
use groundwork::capabilities::compaction::hook::EvidenceCompactionCapability;
use groundwork::capabilities::compaction::{RETRIEVED_IMAGE_TAG, receipt};
use groundwork::capabilities::policy::{CitationPolicyCapability, REDIRECT_TAG};
use groundwork::capabilities::rag::{RagCapability, SPEC_PARAMETERS};
use groundwork::capabilities::state::{
    CitationStatus, EvidenceState, StateKind, citation_status, violations,
};
use groundwork::config::AppConfig;
use groundwork::embed::{self, EmbedderSpec};
use groundwork::engine::agent::{RunInput, RunOutput, RunResult};
use groundwork::engine::cancel::CancelToken;
use groundwork::engine::capability::{Capability, ToolOutcome, ToolOutput};
use groundwork::engine::messages::{ModelMessage, ModelRequestPart};
use groundwork::store::{NewDocument, SearchResult, Store};
use serde_json::{Map, Value, json};

// ----- fixtures -----------------------------------------------------------------------

fn ai_overview() -> NewDocument {
    let text = "Artificial intelligence studies agents that perceive their environment and act.";
    NewDocument {
        metadata: Map::from_iter([("topic".to_string(), json!("ai"))]),
        content: "AI Overview".into(),
        ..document(
            Some("test://ai-overview"),
            Some("AI Overview"),
            vec![item(0, "#/texts/0", "text", 0, text)],
            vec![chunk(0, &["Intro", "Details"], &["#/texts/0"], text)],
        )
    }
}

fn ml_basics() -> NewDocument {
    NewDocument {
        content: "ML Basics".into(),
        // No refs: results pass expansion unchanged, one per chunk.
        ..document(
            Some("test://ml-basics"),
            Some("ML Basics"),
            vec![],
            vec![
                chunk(
                    0,
                    &[],
                    &[],
                    "Gradient descent minimises a loss function step by step.",
                ),
                chunk(
                    1,
                    &[],
                    &[],
                    "Gradient boosting combines weak learners into a strong one.",
                ),
                chunk(
                    2,
                    &[],
                    &[],
                    "Gradient clipping keeps exploding gradients in check.",
                ),
            ],
        )
    }
}

fn untitled() -> NewDocument {
    NewDocument {
        content: "zebra".into(),
        ..document(
            None,
            None,
            vec![],
            vec![chunk_labelled(
                0,
                &[],
                &[],
                &[],
                "Zebra stripes confuse biting flies.",
            )],
        )
    }
}

fn figures(with_bytes: bool) -> NewDocument {
    let (uri, title, text) = if with_bytes {
        (
            "test://inverter",
            "Inverter",
            "Wiring diagram of the inverter",
        )
    } else {
        (
            "test://turbine",
            "Turbine",
            "Cutaway drawing of the turbine nacelle",
        )
    };
    let figure = if with_bytes {
        picture(0, "#/pictures/0", text, png())
    } else {
        item(0, "#/pictures/0", "picture", 0, text)
    };
    document(
        Some(uri),
        Some(title),
        vec![figure],
        vec![chunk_labelled(
            0,
            &[],
            &["#/pictures/0"],
            &["picture"],
            text,
        )],
    )
}

/// The store of this file's tests: AI Overview, ML Basics, an untitled document and
/// two figures (Inverter with picture bytes, Turbine without).
async fn kb() -> Kb {
    kb_with(vec![
        ("AI Overview", ai_overview()),
        ("ML Basics", ml_basics()),
        ("untitled", untitled()),
        ("Inverter", figures(true)),
        ("Turbine", figures(false)),
    ])
    .await
}

// ----- D. Search ------------------------------------------------------------------------

#[tokio::test]
async fn scenario_27_no_results_is_evidence_at_the_request_epoch() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "   "})),
        Reply::tool_call("rag_search", json!({"query": "gradient"})),
        Reply::text("Nothing found."),
    ])
    .await;
    let agent = agent(&server, vec![Arc::new(rag(&kb))]);
    // A filter that matches no document.
    let mut seeded = EvidenceState::empty(StateKind::Rag);
    seeded.document_filter = Some("uri = 'test://nothing-here'".into());
    let state = Map::from_iter([("rag".to_string(), seeded.to_value())]);
    let result = run(&agent, RunInput::prompt("q").with_state(state))
        .await
        .unwrap();
    let requests = server.requests();
    assert_eq!(
        returns_of(&requests[2], "rag_search"),
        ["No results found.", "No results found."]
    );
    let st = rag_state(&result.state);
    // The second search answered request 2, whose epoch is 3.
    assert_eq!(st.evidence.latest_evidence_epoch, 3);
    assert_eq!(
        st.document_filter.as_deref(),
        Some("uri = 'test://nothing-here'")
    );
    assert_eq!(st.searches.len(), 2);
    assert!(st.searches.values().all(Vec::is_empty));
}

#[tokio::test]
async fn scenario_28_repeat_search_merges_without_dropping() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "Gradient", "limit": 3})),
        Reply::tool_call("rag_search", json!({"query": "Gradient"})),
        Reply::text("done"),
    ])
    .await;
    let agent = agent(
        &server,
        vec![Arc::new(rag_with(&kb, |c| c.search.limit = 1))],
    );
    let result = run(&agent, RunInput::prompt("q")).await.unwrap();
    let st = rag_state(&result.state);
    let first = returns_of(&server.requests()[1], "rag_search")[0].clone();
    assert_eq!(first.matches("[rank ").count(), 3, "{first}");
    let second = returns_of(&server.requests()[2], "rag_search")[1].clone();
    assert_eq!(second.matches("[rank ").count(), 1, "{second}");
    let ids: Vec<&str> = st
        .searches
        .get("Gradient")
        .unwrap()
        .iter()
        .map(|r| r.id())
        .collect();
    assert_eq!(ids.len(), 3, "the narrower repeat dropped nothing");
    let shown: Vec<&str> = first
        .split("\n\n---\n\n")
        .map(|b| &b[1..b.find(']').unwrap()])
        .collect();
    assert_eq!(ids, shown, "kept in the first search's order");
}

#[tokio::test]
async fn scenario_29_result_blocks_and_separator() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![
        Reply::tool_call(
            "rag_search",
            json!({"query": "agents perceive environment zebra stripes", "limit": 2}),
        ),
        Reply::text("done"),
    ])
    .await;
    let agent = agent(&server, vec![Arc::new(rag(&kb))]);
    // Only the AI Overview and the untitled document.
    let mut seeded = EvidenceState::empty(StateKind::Rag);
    seeded.document_filter = Some("uri = 'test://ai-overview' OR uri IS NULL".into());
    let state = Map::from_iter([("rag".to_string(), seeded.to_value())]);
    run(&agent, RunInput::prompt("q").with_state(state))
        .await
        .unwrap();
    let text = returns_of(&server.requests()[1], "rag_search")[0].clone();
    let blocks: Vec<&str> = text.split("\n\n---\n\n").collect();
    assert_eq!(blocks.len(), 2, "{text}");
    let ai = kb.chunk("AI Overview", 0);
    let zebra = kb.chunk("untitled", 0);
    let ai_block = blocks.iter().find(|b| b.contains(&ai)).unwrap();
    let zebra_block = blocks.iter().find(|b| b.contains(&zebra)).unwrap();
    let ai_rank = if blocks[0] == *ai_block { 1 } else { 2 };
    assert_eq!(
        *ai_block,
        format!(
            "[{ai}] [rank {ai_rank} of 2]\nSource: \"AI Overview\" > Intro > Details\nType: text\nContent:\nArtificial intelligence studies agents that perceive their environment and act."
        )
    );
    assert_eq!(
        *zebra_block,
        format!(
            "[{zebra}] [rank {} of 2]\nContent:\nZebra stripes confuse biting flies.",
            3 - ai_rank
        )
    );
}

#[tokio::test]
async fn scenario_31_vision_attaches_one_labelled_picture() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![
        Reply::tool_call(
            "rag_search",
            json!({"query": "wiring diagram inverter", "limit": 1}),
        ),
        Reply::text("done"),
    ])
    .await;
    let vision = rag(&kb).vision(Some(true));
    let agent_on = agent(&server, vec![Arc::new(vision)]);
    let result = run(&agent_on, RunInput::prompt("q")).await.unwrap();
    let inverter = kb.chunk("Inverter", 0);
    let (texts, images) = user_texts(&server.requests()[1]);
    assert_eq!(images, 1);
    let label = format!(
        "Page image 1 of 1, retrieved from the knowledge base for search result [{inverter}] (#/pictures/0). Not provided by the user. {RETRIEVED_IMAGE_TAG}"
    );
    assert!(texts.contains(&label), "{texts:?}");
    // The picture is in the stored history as a user part of the same request.
    let req = result.messages[2].as_request().unwrap();
    assert!(matches!(req.parts[0], ModelRequestPart::ToolReturn(_)));
    assert!(matches!(req.parts[1], ModelRequestPart::UserPrompt(_)));

    // Vision off: the bytes are still in the state, but nothing is attached.
    let server2 = ScriptedServer::start(vec![
        Reply::tool_call(
            "rag_search",
            json!({"query": "wiring diagram inverter", "limit": 1}),
        ),
        Reply::text("done"),
    ])
    .await;
    let agent_off = agent(&server2, vec![Arc::new(rag(&kb))]);
    let result = run(&agent_off, RunInput::prompt("q")).await.unwrap();
    assert_eq!(user_texts(&server2.requests()[1]).1, 0);
    let st = rag_state(&result.state);
    assert!(
        st.searches
            .values()
            .flatten()
            .any(|r| r.image_data.is_some()),
        "picture bytes are fetched regardless of the gate"
    );
}

/// Scenario 31, two results: two collections hold the same document (same document id)
/// and each returns a different chunk of it that carries `#/pictures/0` with decodable
/// bytes; the search output gets exactly one label/image pair, naming the first result.
#[tokio::test]
async fn scenario_31_two_results_of_one_document_attach_one_picture() {
    let server = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let spec = EmbedderSpec {
        provider: "openai".into(),
        name: hashembed::MODEL.into(),
        vector_dim: hashembed::DIM,
        base_url: Some(server.url.clone()),
    };
    // The same seed gives the same document id in both stores; chunk ids follow their
    // position, so the two stores' picture chunks (position 0 vs 1) differ.
    let seed = "test://inverter-shared";
    let mut stores = Vec::new();
    for (name, lead) in [("a", None), ("b", Some("Preface to the inverter manual"))] {
        let uri = dir.path().join(format!("{name}.lancedb"));
        let mut store = Store::create(&uri.to_string_lossy(), &spec).await.unwrap();
        store
            .set_embedder(embed::build(&spec, &Default::default()).unwrap())
            .unwrap();
        let mut doc = figures(true);
        if let Some(text) = lead {
            doc.items.insert(0, item(0, "#/texts/0", "text", 0, text));
            doc.chunks = vec![
                chunk(0, &[], &["#/texts/0"], text),
                chunk_labelled(
                    1,
                    &[],
                    &["#/pictures/0"],
                    &["picture"],
                    "Wiring diagram of the inverter",
                ),
            ];
        }
        let meta = store
            .add_document_seeded(doc, None, Some(seed))
            .await
            .unwrap();
        store.ensure_indexes().await.unwrap();
        stores.push((name.to_string(), Arc::new(store), meta.id));
    }
    assert_eq!(
        stores[0].2, stores[1].2,
        "one document id in both collections"
    );
    let model = ScriptedServer::start(vec![
        Reply::tool_call(
            "rag_search",
            json!({"query": "wiring diagram inverter", "limit": 4}),
        ),
        Reply::text("done"),
    ])
    .await;
    let rag = RagCapability::with_collections(
        stores
            .iter()
            .map(|(n, s, _)| (n.clone(), s.clone()))
            .collect(),
        AppConfig::default(),
    )
    .unwrap()
    .vision(Some(true));
    let result = run(&agent(&model, vec![Arc::new(rag)]), RunInput::prompt("q"))
        .await
        .unwrap();
    let st = rag_state(&result.state);
    let results: Vec<&SearchResult> = st.searches.values().flatten().collect();
    let with_picture: Vec<&&SearchResult> = results
        .iter()
        .filter(|r| {
            r.image_data
                .as_ref()
                .is_some_and(|m| m.contains_key("#/pictures/0"))
        })
        .collect();
    let seen: Vec<_> = results
        .iter()
        .map(|r| {
            (
                r.chunk_id.clone(),
                r.collection.clone(),
                r.doc_item_refs.clone(),
                r.image_data
                    .as_ref()
                    .map(|m| m.keys().cloned().collect::<Vec<_>>()),
            )
        })
        .collect();
    assert_eq!(
        with_picture.len(),
        2,
        "two results of one document carry the picture: {seen:?}"
    );
    assert_ne!(with_picture[0].chunk_id, with_picture[1].chunk_id);
    let (texts, images) = user_texts(&model.requests()[1]);
    assert_eq!(images, 1, "exactly one label/image pair");
    let first = with_picture[0].chunk_id.clone().unwrap();
    let label = format!(
        "Page image 1 of 1, retrieved from the knowledge base for search result [{first}] (#/pictures/0). Not provided by the user. {RETRIEVED_IMAGE_TAG}"
    );
    assert!(texts.contains(&label), "{texts:?}");
}

// ----- E. Cite --------------------------------------------------------------------------

#[tokio::test]
async fn scenario_34_cite_through_the_store_fallback() {
    let kb = kb().await;
    let ai = kb.chunk("AI Overview", 0);
    let ml = kb.chunk("ML Basics", 0);
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_cite", json!({"chunk_ids": [format!("[{ai}]"), ml]})),
        Reply::text("answer"),
    ])
    .await;
    let agent = agent(&server, vec![Arc::new(rag(&kb))]);
    let result = run(&agent, RunInput::prompt("q")).await.unwrap();
    assert_eq!(
        returns_of(&server.requests()[1], "rag_cite"),
        ["Registered 2 citation(s)."]
    );
    let st = rag_state(&result.state);
    assert_eq!(st.citations, [ai.clone(), ml.clone()]);
    assert_eq!(st.citation_index.get(&ai).unwrap().index, Some(1));
    assert_eq!(st.citation_index.get(&ml).unwrap().index, Some(2));
    let c = st.citation_index.get(&ai).unwrap();
    assert_eq!(
        c.document_meta,
        Map::from_iter([("topic".to_string(), json!("ai"))])
    );
    assert_eq!(c.document_uri, "test://ai-overview");
    assert_eq!(c.document_title.as_deref(), Some("AI Overview"));
    assert_eq!(c.document_id, kb.doc_ids["AI Overview"]);
    assert_eq!(c.chunk_ids, std::slice::from_ref(&ai));
    // A direct cite in the first request counts as grounded.
    assert_eq!(citation_status(&[&st.evidence]), CitationStatus::Grounded);
}

/// Scenario 34, same document: two chunks of one document cited through the store
/// fallback fetch that document exactly once.
#[tokio::test]
async fn scenario_34_two_chunks_of_one_document_fetch_it_once() {
    let kb = kb().await;
    let (a, b) = (kb.chunk("ML Basics", 0), kb.chunk("ML Basics", 1));
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_cite", json!({"chunk_ids": [a, b]})),
        Reply::text("answer"),
    ])
    .await;
    let agent = agent(&server, vec![Arc::new(rag(&kb))]);
    let before = kb.store.document_reads();
    let result = run(&agent, RunInput::prompt("q")).await.unwrap();
    assert_eq!(
        kb.store.document_reads() - before,
        1,
        "the document was read once"
    );
    assert_eq!(
        returns_of(&server.requests()[1], "rag_cite"),
        ["Registered 2 citation(s)."]
    );
    let st = rag_state(&result.state);
    assert_eq!(st.citations, [a.clone(), b.clone()]);
    assert_eq!(st.citation_index.get(&b).unwrap().index, Some(2));
    assert_eq!(
        st.citation_index.get(&a).unwrap().document_id,
        kb.doc_ids["ML Basics"]
    );
}

#[tokio::test]
async fn scenario_35_partial_cite_lists_ignored_ids() {
    let kb = kb().await;
    let ai = kb.chunk("AI Overview", 0);
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_cite", json!({"chunk_ids": [ai, "6.43", "6.51.2"]})),
        Reply::text("answer"),
    ])
    .await;
    let agent = agent(&server, vec![Arc::new(rag(&kb))]);
    let result = run(&agent, RunInput::prompt("q")).await.unwrap();
    let reply = returns_of(&server.requests()[1], "rag_cite")[0].clone();
    assert!(reply.contains("Registered 1 citation(s)"), "{reply}");
    assert!(
        reply.contains("6.43") && reply.contains("6.51.2"),
        "{reply}"
    );
    assert!(!reply.to_lowercase().contains("again"), "{reply}");
    assert_eq!(rag_state(&result.state).citations, [ai]);
}

#[tokio::test]
async fn cite_repairs_a_mangled_id_and_keeps_numbering() {
    let kb = kb().await;
    let ml: Vec<String> = (0..3).map(|i| kb.chunk("ML Basics", i)).collect();
    let mangled = ml[1].replacen('-', "", 1);
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "Gradient", "limit": 3})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [mangled]})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [ml[0], ml[1]]})),
        Reply::text("answer"),
    ])
    .await;
    let agent = agent(&server, vec![Arc::new(rag(&kb))]);
    let result = run(&agent, RunInput::prompt("q")).await.unwrap();
    let st = rag_state(&result.state);
    assert_eq!(st.citations, [ml[1].clone(), ml[0].clone()]);
    assert_eq!(st.citation_index.get(&ml[1]).unwrap().index, Some(1));
    assert_eq!(st.citation_index.get(&ml[0]).unwrap().index, Some(2));
    // Resolved from the search, so the content is the expanded result's.
    assert!(!st.citation_index.get(&ml[1]).unwrap().content.is_empty());
    assert_eq!(
        st.evidence.declaration.as_ref().unwrap().refs.len(),
        2,
        "the second cite merged into the first declaration"
    );
}

#[tokio::test]
async fn scenario_37_empty_cite_is_ungrounded() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "Gradient"})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": []})),
        Reply::text("I cannot find this in the knowledge base."),
    ])
    .await;
    let agent = agent(&server, vec![Arc::new(rag(&kb))]);
    let result = run(&agent, RunInput::prompt("q")).await.unwrap();
    let st = rag_state(&result.state);
    let declaration = st.evidence.declaration.as_ref().unwrap();
    assert!(declaration.refs.is_empty());
    assert_eq!(declaration.epoch, 3);
    assert_eq!(citation_status(&[&st.evidence]), CitationStatus::Ungrounded);
    assert!(st.citations.is_empty() && st.citation_index.is_empty());
    let reply = returns_of(&server.requests()[2], "rag_cite")[0].clone();
    assert!(!reply.starts_with("Registered"), "{reply}");
}

#[tokio::test]
async fn scenario_39_unresolvable_ids_are_a_retry() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_cite", json!({"chunk_ids": ["nope"]})),
        Reply::text("answer"),
    ])
    .await;
    let agent = agent(&server, vec![Arc::new(rag(&kb))]);
    let result = run(&agent, RunInput::prompt("q")).await.unwrap();
    let retry = result.messages[2]
        .as_request()
        .unwrap()
        .parts
        .iter()
        .find_map(|p| match p {
            ModelRequestPart::RetryPrompt(r) => Some(r.content.text()),
            _ => None,
        })
        .expect("a retry prompt, not a failed return");
    assert!(
        retry.contains("None of the supplied chunk_ids ['nope']"),
        "{retry}"
    );
    let body = returns_of(&server.requests()[1], "rag_cite")[0].clone();
    assert!(body.starts_with("None of the supplied chunk_ids"), "{body}");
    assert!(
        body.contains("Copy chunk_ids verbatim from search results."),
        "{body}"
    );
    let st = rag_state(&result.state);
    assert!(st.evidence.declaration.is_none());
}

// ----- F. Budgets -----------------------------------------------------------------------

#[tokio::test]
async fn scenario_41_search_limit_fails_and_notice_appears() {
    let kb = kb().await;
    // max_searches = 0: a failed return, then the answer.
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "Gradient"})),
        Reply::text("the answer"),
    ])
    .await;
    let agent0 = agent(
        &server,
        vec![Arc::new(rag_with(&kb, |c| c.qa.max_searches = 0))],
    );
    let result = run(&agent0, RunInput::prompt("q")).await.unwrap();
    assert_eq!(text_output(&result), "the answer");
    let ret = match &result.messages[2].as_request().unwrap().parts[0] {
        ModelRequestPart::ToolReturn(t) => t.clone(),
        other => panic!("{other:?}"),
    };
    assert!(ret.is_failed());
    assert!(ret.content_text().contains("Search limit reached"));
    let st = rag_state(&result.state);
    assert_eq!(st.evidence.latest_evidence_epoch, 0, "no evidence noted");
    assert!(st.searches.is_empty());

    // max_searches = 1: request 2 still offers both tools and carries the notice.
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "Gradient"})),
        Reply::text("the answer"),
    ])
    .await;
    let agent1 = agent(
        &server,
        vec![Arc::new(rag_with(&kb, |c| c.qa.max_searches = 1))],
    );
    run(&agent1, RunInput::prompt("q")).await.unwrap();
    let requests = server.requests();
    assert!(!system_text(&requests[0]).contains("spent its budget"));
    assert_eq!(tool_names(&requests[1]), ["rag_search", "rag_cite"]);
    assert!(system_text(&requests[1]).contains("spent its budget for rag_search"));
}

#[tokio::test]
async fn scenario_45_request_limit_withdraws_search_then_cite() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "Gradient"})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": []})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": []})),
        Reply::text("the answer"),
    ])
    .await;
    let agent = agent(&server, vec![Arc::new(rag(&kb).request_limit(Some(1)))]);
    let result = run(&agent, RunInput::prompt("q")).await.unwrap();
    assert_eq!(text_output(&result), "the answer");
    let requests = server.requests();
    assert_eq!(tool_names(&requests[0]), ["rag_search", "rag_cite"]);
    assert_eq!(tool_names(&requests[1]), ["rag_cite"]);
    assert_eq!(tool_names(&requests[2]), ["rag_cite"]);
    assert!(tool_names(&requests[3]).is_empty());
    for r in &requests[1..3] {
        let s = system_text(r);
        assert!(
            s.contains("rag capability has reached its request limit"),
            "{s}"
        );
        assert!(s.contains("rag_cite"));
    }
    let last = system_text(&requests[3]);
    assert!(last.contains("no longer available"), "{last}");
    // The packaged instructions mention the tool; the notice itself must not.
    let notice = last.split("\n\n").last().unwrap();
    assert!(notice.contains("no longer available") && !notice.contains("rag_cite"));
}

#[tokio::test]
async fn scenario_47_grace_counts_only_own_tool_turns() {
    let kb = kb().await;
    let trace = Arc::new(Mutex::new(Vec::new()));
    let host = TestCap::new("host", &trace)
        .tool("host_tool")
        .handler(|_, _, _| ToolOutcome::Ok(ToolOutput::text("host ok")))
        .arc();
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "Gradient"})),
        Reply::tool_call("host_tool", json!({"q": "x"})),
        Reply::tool_call("host_tool", json!({"q": "x"})),
        Reply::tool_call("host_tool", json!({"q": "x"})),
        Reply::text("the answer"),
    ])
    .await;
    let agent = agent(
        &server,
        vec![Arc::new(rag(&kb).request_limit(Some(1))), host],
    );
    run(&agent, RunInput::prompt("q")).await.unwrap();
    let requests = server.requests();
    // Request 2 follows an own tool turn (grace 1); the host turns do not count.
    for r in &requests[1..] {
        assert_eq!(tool_names(r), ["rag_cite", "host_tool"]);
    }
}

// ----- G. Compaction --------------------------------------------------------------------

async fn first_question(kb: &Kb, caps: &dyn Fn() -> Vec<Arc<dyn Capability>>) -> RunResult {
    let ai = kb.chunk("AI Overview", 0);
    let server = ScriptedServer::start(vec![
        Reply::tool_call(
            "rag_search",
            json!({"query": "agents perceive", "limit": 1}),
        ),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [ai]})),
        Reply::text("first answer"),
    ])
    .await;
    let agent = agent(&server, caps());
    run(&agent, RunInput::prompt("first")).await.unwrap()
}

#[tokio::test]
async fn scenario_52_capsule_replaces_the_earlier_return() {
    let kb = kb().await;
    let ai = kb.chunk("AI Overview", 0);
    let store = kb.store.clone();
    let with = move || -> Vec<Arc<dyn Capability>> {
        vec![
            Arc::new(RagCapability::new(store.clone(), AppConfig::default())),
            Arc::new(EvidenceCompactionCapability::new()),
        ]
    };
    let q1 = first_question(&kb, &with).await;
    let original = match &q1.messages[2].as_request().unwrap().parts[0] {
        ModelRequestPart::ToolReturn(t) => t.content_text(),
        other => panic!("{other:?}"),
    };
    let server = ScriptedServer::start(vec![Reply::text("second answer")]).await;
    let agent = agent(&server, with());
    let q2 = run(
        &agent,
        RunInput::prompt("second")
            .with_history(q1.messages.clone())
            .with_state(q1.state.clone()),
    )
    .await
    .unwrap();
    let body = &server.requests()[0];
    let searches = returns_of(body, "rag_search");
    assert_eq!(searches.len(), 1);
    assert!(
        searches[0].contains("[Cited evidence group 1]"),
        "{}",
        searches[0]
    );
    assert!(searches[0].contains(&format!(
        "[{ai}] Source: \"AI Overview\" (test://ai-overview)"
    )));
    assert_ne!(searches[0], original);
    // The cite acknowledgement is untouched; stored history keeps the original.
    assert_eq!(returns_of(body, "rag_cite"), ["Registered 1 citation(s)."]);
    match &q2.messages[2].as_request().unwrap().parts[0] {
        ModelRequestPart::ToolReturn(t) => assert_eq!(t.content_text(), original),
        other => panic!("{other:?}"),
    }
    assert_eq!(rag_state(&q2.state).evidence.question, Some(6));

    // Without compaction the model sees the earlier return word for word.
    let server = ScriptedServer::start(vec![Reply::text("second answer")]).await;
    let plain = agent_for(test_config(&server.base_url()))
        .capability(Arc::new(rag(&kb)))
        .build()
        .unwrap();
    run(
        &plain,
        RunInput::prompt("second")
            .with_history(q1.messages.clone())
            .with_state(q1.state.clone()),
    )
    .await
    .unwrap();
    assert_eq!(returns_of(&server.requests()[0], "rag_search"), [original]);
}

#[tokio::test]
async fn scenario_58_refuses_without_carried_state_and_receipts_otherwise() {
    let kb = kb().await;
    let ml = kb.chunk("ML Basics", 0);
    // answered("an earlier question", "EVIDENCE TO LOSE") built by a run without state.
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "Gradient", "limit": 1})),
        Reply::text("an answer"),
    ])
    .await;
    let plain = agent(&server, vec![Arc::new(rag(&kb))]);
    let q1 = run(&plain, RunInput::prompt("an earlier question"))
        .await
        .unwrap();
    let history = q1.messages.clone();
    let caps = || -> Vec<Arc<dyn Capability>> {
        vec![
            Arc::new(rag(&kb)),
            Arc::new(EvidenceCompactionCapability::new()),
        ]
    };
    let server = ScriptedServer::start(vec![Reply::text("second")]).await;
    let err = run(
        &agent(&server, caps()),
        RunInput::prompt("follow-up").with_history(history.clone()),
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("carry the capability state"),
        "{err}"
    );
    assert!(server.requests().is_empty());

    // Carried, nothing cited: the earlier return becomes the receipt.
    let mut carried = EvidenceState::empty(StateKind::Rag);
    carried.evidence.question = Some(0);
    let state = Map::from_iter([("rag".to_string(), carried.to_value())]);
    let server = ScriptedServer::start(vec![Reply::text("second")]).await;
    run(
        &agent(&server, caps()),
        RunInput::prompt("follow-up")
            .with_history(history)
            .with_state(state),
    )
    .await
    .unwrap();
    assert_eq!(returns_of(&server.requests()[0], "rag_search"), [receipt()]);
    assert!(!format!("{}", server.requests()[0]).contains(&ml));
}

#[tokio::test]
async fn scenario_65_cited_picture_is_rehydrated_from_the_store() {
    let kb = kb().await;
    let inverter = kb.chunk("Inverter", 0);
    let turbine = kb.chunk("Turbine", 0);
    let store = kb.store.clone();
    let caps = move || -> Vec<Arc<dyn Capability>> {
        vec![
            Arc::new(RagCapability::new(store.clone(), AppConfig::default())),
            Arc::new(EvidenceCompactionCapability::new()),
        ]
    };
    // Question 1 cites both picture chunks (the turbine's picture has no bytes).
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_cite", json!({"chunk_ids": [inverter, turbine]})),
        Reply::text("first answer"),
    ])
    .await;
    let q1 = run(&agent(&server, caps()), RunInput::prompt("first"))
        .await
        .unwrap();
    let st = rag_state(&q1.state);
    assert_eq!(
        st.citation_index.get(&inverter).unwrap().picture_refs,
        ["#/pictures/0"]
    );
    // The history of question 1 needs an owned return for the capsule to ride on.
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "wiring diagram", "limit": 1})),
        Reply::text("second answer"),
        Reply::text("third answer"),
    ])
    .await;
    let q2 = run(
        &agent(&server, caps()),
        RunInput::prompt("second")
            .with_history(q1.messages.clone())
            .with_state(q1.state.clone()),
    )
    .await
    .unwrap();
    assert_eq!(text_output(&q2), "second answer");
    let q3 = run(
        &agent(&server, caps()),
        RunInput::prompt("third")
            .with_history(q2.messages.clone())
            .with_state(q2.state.clone()),
    )
    .await
    .unwrap();
    assert_eq!(text_output(&q3), "third answer");
    let body = server.requests().last().unwrap().clone();
    let (texts, images) = user_texts(&body);
    assert_eq!(images, 1, "one picture: the turbine's fetch found nothing");
    let label = format!(
        "Figure from the knowledge base, attached again for previously cited evidence [{inverter}] (#/pictures/0). It was retrieved by search; the user did not supply it. {RETRIEVED_IMAGE_TAG}"
    );
    assert!(texts.contains(&label), "{texts:?}");
    assert!(
        !texts
            .iter()
            .any(|t| t.contains(&turbine) && t.contains(RETRIEVED_IMAGE_TAG))
    );
}

/// RAG over `kb` with evidence compaction, and a host tool `drop_inverter` that deletes
/// the Inverter document from the store while a run goes on.
fn caps_that_can_drop_the_inverter(kb: &Kb) -> impl Fn() -> Vec<Arc<dyn Capability>> + use<> {
    let store = kb.store.clone();
    let trace = Arc::new(Mutex::new(Vec::new()));
    let dropped = store.clone();
    let drop_inverter = TestCap::new("host", &trace)
        .tool("drop_inverter")
        .handler(move |_, _, _| {
            let store = dropped.clone();
            std::thread::spawn(move || {
                tokio::runtime::Runtime::new().unwrap().block_on(async {
                    let docs = store.list_documents(None).await.unwrap();
                    let doc = docs.iter().find(|d| d.title.as_deref() == Some("Inverter"));
                    store
                        .delete_document(doc.unwrap().id.as_str())
                        .await
                        .unwrap();
                })
            })
            .join()
            .unwrap();
            ToolOutcome::Ok(ToolOutput::text("dropped"))
        })
        .arc();
    move || -> Vec<Arc<dyn Capability>> {
        vec![
            Arc::new(RagCapability::new(store.clone(), AppConfig::default())),
            Arc::new(EvidenceCompactionCapability::new()),
            drop_inverter.clone(),
        ]
    }
}

/// Question 1 cites the inverter and the turbine, question 2 searches, question 3 drops
/// the inverter's document, then makes the calls in `then` and answers.
fn inverter_script(inverter: &str, turbine: &str, then: Vec<Reply>) -> Vec<Reply> {
    let mut script = vec![
        Reply::tool_call("rag_cite", json!({"chunk_ids": [inverter, turbine]})),
        Reply::text("first answer"),
        Reply::tool_call("rag_search", json!({"query": "wiring diagram", "limit": 1})),
        Reply::text("second answer"),
        Reply::tool_call("drop_inverter", json!({"query": "x"})),
    ];
    script.extend(then);
    script.push(Reply::text("third answer"));
    script
}

/// Asks "first", "second" and "third" in one conversation over `server`.
async fn three_questions(
    server: &ScriptedServer,
    caps: &dyn Fn() -> Vec<Arc<dyn Capability>>,
) -> RunResult {
    let mut done: Option<RunResult> = None;
    for question in ["first", "second", "third"] {
        let mut input = RunInput::prompt(question);
        if let Some(before) = done.take() {
            input = input.with_history(before.messages).with_state(before.state);
        }
        done = Some(run(&agent(server, caps()), input).await.unwrap());
    }
    done.unwrap()
}

/// Each of `requests` carries the inverter's picture with its label, though the
/// Inverter document has left the store.
async fn the_inverter_stays_attached(kb: &Kb, requests: &[Value], inverter: &str) {
    let label = format!(
        "Figure from the knowledge base, attached again for previously cited evidence [{inverter}] (#/pictures/0). It was retrieved by search; the user did not supply it. {RETRIEVED_IMAGE_TAG}"
    );
    for body in requests {
        let (texts, images) = user_texts(body);
        assert_eq!(
            images, 1,
            "the inverter's picture, in every request: {texts:?}"
        );
        assert!(texts.contains(&label), "{texts:?}");
    }
    let docs = kb.store.list_documents(None).await.unwrap();
    assert!(docs.iter().all(|d| d.title.as_deref() != Some("Inverter")));
}

/// A cited picture the store does not have is not asked for at every request of a run:
/// once a request's capsule has every picture's answer (found, or not there), the run's
/// later requests reuse it. Here the inverter's document leaves the store after the
/// first request of question 3: the second request still carries the picture the first
/// fetched (fetched again, it would be gone), beside the turbine's, which was never there.
#[tokio::test]
async fn a_picture_the_store_does_not_have_is_not_fetched_again_within_a_run() {
    let kb = kb().await;
    let inverter = kb.chunk("Inverter", 0);
    let turbine = kb.chunk("Turbine", 0);
    let caps = caps_that_can_drop_the_inverter(&kb);
    let server = ScriptedServer::start(inverter_script(&inverter, &turbine, vec![])).await;
    let done = three_questions(&server, &caps).await;
    assert_eq!(text_output(&done), "third answer");
    the_inverter_stays_attached(&kb, &server.requests()[4..], &inverter).await;
}

/// A picture fetched once in a run is not fetched again when a later request of the run
/// rebuilds the capsule (a citation changed it): the rebuilt capsule takes it from what
/// the run already fetched. Here the inverter's document leaves the store after the
/// first request of question 3, and the question then cites the turbine again, which
/// rebuilds the capsule: the inverter's picture is still attached (fetched again, it
/// would be gone).
#[tokio::test]
async fn a_rebuilt_capsule_takes_the_pictures_the_run_already_fetched() {
    let kb = kb().await;
    let inverter = kb.chunk("Inverter", 0);
    let turbine = kb.chunk("Turbine", 0);
    let caps = caps_that_can_drop_the_inverter(&kb);
    let server = ScriptedServer::start(inverter_script(
        &inverter,
        &turbine,
        vec![Reply::tool_call(
            "rag_cite",
            json!({"chunk_ids": [turbine]}),
        )],
    ))
    .await;
    let done = three_questions(&server, &caps).await;
    assert_eq!(text_output(&done), "third answer");
    // The citation of question 3 is recorded: the capsule's key changed after it.
    let cited = done.state["rag"]["evidence"]["occurrences"][&turbine]["cited_in_questions"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(cited, 2, "{}", done.state["rag"]["evidence"]);
    let requests = server.requests();
    assert_eq!(requests.len(), 7);
    the_inverter_stays_attached(&kb, &requests[4..], &inverter).await;
}

#[tokio::test]
async fn scenario_67_resumed_question_keeps_live_evidence() {
    let kb = kb().await;
    let trace = Arc::new(Mutex::new(Vec::new()));
    let external = TestCap::new("ext", &trace)
        .tool("external_tool")
        .handler(|_, _, _| ToolOutcome::Deferred)
        .arc();
    let caps = || -> Vec<Arc<dyn Capability>> {
        vec![
            Arc::new(rag(&kb)),
            Arc::new(EvidenceCompactionCapability::new()),
            external.clone(),
        ]
    };
    // Question 0 answered without citing, then question 4 searches and pauses.
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "Gradient", "limit": 1})),
        Reply::text("old answer"),
        Reply::tool_call(
            "rag_search",
            json!({"query": "agents perceive", "limit": 1}),
        ),
        Reply::tool_call("external_tool", json!({"q": "x"})),
        Reply::text("final"),
    ])
    .await;
    let q0 = run(
        &agent(&server, caps()),
        RunInput::prompt("an earlier question"),
    )
    .await
    .unwrap();
    let paused = run(
        &agent(&server, caps()),
        RunInput::prompt("live")
            .with_history(q0.messages.clone())
            .with_state(q0.state.clone()),
    )
    .await
    .unwrap();
    assert!(matches!(paused.output, RunOutput::Deferred(_)));
    let st = rag_state(&paused.state);
    assert_eq!(st.evidence.question, Some(4));
    assert!(st.evidence.in_progress, "a pause leaves the question open");
    let live = returns_of(&server.requests()[3], "rag_search")[1].clone();
    let call_id = match paused.messages.last().unwrap() {
        ModelMessage::Response(r) => r.tool_calls().next().unwrap().tool_call_id.clone(),
        other => panic!("{other:?}"),
    };
    let resumed = run(
        &agent(&server, caps()),
        RunInput {
            prompt: None,
            history: paused.messages.clone(),
            state: paused.state.clone(),
            deferred_results: Some(
                groundwork::engine::agent::DeferredResults::default()
                    .with(call_id, ToolOutcome::Ok(ToolOutput::text("external done"))),
            ),
            run_id: None,
            earlier: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(text_output(&resumed), "final");
    let body = server.requests().last().unwrap().clone();
    assert_eq!(
        returns_of(&body, "rag_search"),
        [receipt().to_string(), live]
    );
    let st = rag_state(&resumed.state);
    assert_eq!(st.evidence.question, Some(4));
    assert!(!st.evidence.in_progress);
}

// ----- H. Citation policy ---------------------------------------------------------------

fn with_policy(kb: &Kb) -> Vec<Arc<dyn Capability>> {
    vec![Arc::new(rag(kb)), Arc::new(CitationPolicyCapability::new())]
}

#[tokio::test]
async fn scenario_68_uncited_answer_is_redirected_once() {
    let kb = kb().await;
    let ai = kb.chunk("AI Overview", 0);
    let server = ScriptedServer::start(vec![
        Reply::tool_call(
            "rag_search",
            json!({"query": "agents perceive", "limit": 1}),
        ),
        Reply::text("uncited answer"),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [ai]})),
        Reply::text("cited answer"),
    ])
    .await;
    let result = run(&agent(&server, with_policy(&kb)), RunInput::prompt("q"))
        .await
        .unwrap();
    assert_eq!(text_output(&result), "cited answer");
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(redirects(&requests[3]), 1);
    assert_eq!(redirects(&requests[1]), 0);
    let st = rag_state(&result.state);
    assert_eq!(st.citations, [ai]);
    assert_eq!(violations(&result.state), Vec::<u64>::new());
}

#[tokio::test]
async fn scenario_69_cited_empty_cited_and_greeting_need_no_redirect() {
    let kb = kb().await;
    let ai = kb.chunk("AI Overview", 0);
    let cases = vec![
        vec![
            Reply::tool_call("rag_search", json!({"query": "agents", "limit": 1})),
            Reply::tool_call("rag_cite", json!({"chunk_ids": [ai]})),
            Reply::text("answer"),
        ],
        vec![
            Reply::tool_call("rag_search", json!({"query": "agents", "limit": 1})),
            Reply::tool_call("rag_cite", json!({"chunk_ids": []})),
            Reply::text("I cannot find this in the knowledge base"),
        ],
        vec![Reply::text("Hello!")],
    ];
    for script in cases {
        let n = script.len();
        let server = ScriptedServer::start(script).await;
        let result = run(&agent(&server, with_policy(&kb)), RunInput::prompt("q"))
            .await
            .unwrap();
        let requests = server.requests();
        assert_eq!(requests.len(), n);
        assert!(requests.iter().all(|r| redirects(r) == 0));
        assert_eq!(violations(&result.state), Vec::<u64>::new());
    }
}

#[tokio::test]
async fn scenario_71_policy_state_only_when_registered() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "agents", "limit": 1})),
        Reply::text("uncited"),
    ])
    .await;
    let result = run(
        &agent(&server, vec![Arc::new(rag(&kb))]),
        RunInput::prompt("q"),
    )
    .await
    .unwrap();
    assert_eq!(server.requests().len(), 2, "no redirect without the policy");
    assert!(!result.state.contains_key("citation_policy"));

    let server = ScriptedServer::start(vec![Reply::text("Hello!")]).await;
    let result = run(&agent(&server, with_policy(&kb)), RunInput::prompt("hi"))
        .await
        .unwrap();
    assert_eq!(result.state["citation_policy"], json!({"violations": []}));
}

#[tokio::test]
async fn scenario_74_later_question_is_enforced_after_any_citation() {
    let kb = kb().await;
    let ai = kb.chunk("AI Overview", 0);
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "agents", "limit": 1})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [ai]})),
        Reply::text("first"),
        Reply::text("second, uncited"),
        Reply::tool_call("rag_cite", json!({"chunk_ids": []})),
        Reply::text("second again"),
    ])
    .await;
    let q1 = run(&agent(&server, with_policy(&kb)), RunInput::prompt("one"))
        .await
        .unwrap();
    let q2 = run(
        &agent(&server, with_policy(&kb)),
        RunInput::prompt("two")
            .with_history(q1.messages.clone())
            .with_state(q1.state.clone()),
    )
    .await
    .unwrap();
    assert_eq!(text_output(&q2), "second again");
    let requests = server.requests();
    assert_eq!(redirects(&requests[4]), 1);
    let st = rag_state(&q2.state);
    assert_eq!(citation_status(&[&st.evidence]), CitationStatus::Ungrounded);
}

#[tokio::test]
async fn scenario_76_quoted_wording_without_tag_does_not_count() {
    let kb = kb().await;
    let wording = groundwork::capabilities::policy::redirect_text().replace(REDIRECT_TAG, "");
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "agents", "limit": 1})),
        Reply::text("uncited"),
        Reply::text("still uncited"),
    ])
    .await;
    let result = run(
        &agent(&server, with_policy(&kb)),
        RunInput::prompt(format!("Please note: {wording}")),
    )
    .await
    .unwrap();
    assert_eq!(text_output(&result), "still uncited");
    assert_eq!(redirects(&server.requests()[2]), 1);
}

#[tokio::test]
async fn scenario_78_violations_are_recorded() {
    let kb = kb().await;
    // Redirected once, still uncited: violation recorded by the backstop, no 2nd redirect.
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "agents", "limit": 1})),
        Reply::text("uncited"),
        Reply::text("still uncited"),
    ])
    .await;
    let result = run(&agent(&server, with_policy(&kb)), RunInput::prompt("q"))
        .await
        .unwrap();
    assert_eq!(server.requests().len(), 3);
    assert_eq!(violations(&result.state), [0]);

    // The cite tool is gone (grace spent): no redirect, a violation, no error.
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "agents", "limit": 1})),
        Reply::tool_call("rag_search", json!({"query": "agents", "limit": 1})),
        Reply::text("an answer with no citation"),
    ])
    .await;
    let caps: Vec<Arc<dyn Capability>> = vec![
        Arc::new(rag(&kb).request_limit(Some(1))),
        Arc::new(CitationPolicyCapability::new()),
    ];
    let result = run(&agent(&server, caps), RunInput::prompt("q"))
        .await
        .unwrap();
    assert_eq!(text_output(&result), "an answer with no citation");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    // Request 3 was prepared with one grace request used; counting it spent the grace.
    assert_eq!(tool_names(&requests[2]), ["rag_cite"]);
    assert_eq!(redirects(&requests[2]), 0);
    assert_eq!(violations(&result.state), [0]);
}

// ----- K. Factory -----------------------------------------------------------------------

#[tokio::test]
async fn scenario_93_from_spec_surface() {
    let kb = kb().await;
    let cap = RagCapability::from_spec(&json!({"db_path": kb.store.uri()})).unwrap();
    assert_eq!(cap.id(), "haiku-rag");
    assert_eq!(cap.db_path(), kb.store.uri());
    assert_eq!(cap.configured_request_limit(), Some(20));
    assert!(Capability::defer_loading(&cap));
    assert!(!cap.vision_enabled());
    assert_eq!(
        SPEC_PARAMETERS,
        [
            "config",
            "db_path",
            "defer_loading",
            "request_limit",
            "vision"
        ]
    );
    let custom = RagCapability::from_spec(&json!({
        "db_path": kb.store.uri(), "defer_loading": false, "request_limit": null,
        "vision": true, "config": {"qa": {"max_searches": 2}}
    }))
    .unwrap();
    assert!(!Capability::defer_loading(&custom));
    assert_eq!(custom.configured_request_limit(), None);
    assert!(custom.vision_enabled());
    assert_eq!(custom.config().qa.max_searches, 2);
    assert_eq!(
        custom.config().search.limit,
        5,
        "omitted keys take defaults"
    );
    assert!(RagCapability::from_spec(&json!({"sources": ["a"]})).is_err());
    assert!(EvidenceCompactionCapability::from_spec(&json!({})).is_ok());
    assert!(EvidenceCompactionCapability::from_spec(&json!({"x": 1})).is_err());
    assert!(CitationPolicyCapability::from_spec(&Value::Null).is_ok());

    // A path-backed capability opens the database itself and searches it.
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "Gradient", "limit": 1})),
        Reply::text("done"),
    ])
    .await;
    let cap = RagCapability::from_spec(&json!({"db_path": kb.store.uri(), "defer_loading": false}))
        .unwrap();
    run(&agent(&server, vec![Arc::new(cap)]), RunInput::prompt("q"))
        .await
        .unwrap();
    let ret = returns_of(&server.requests()[1], "rag_search")[0].clone();
    assert!(ret.contains("[rank 1 of 1]"), "{ret}");
}

#[tokio::test]
async fn scenario_95_duplicate_ids_are_rejected() {
    let server = ScriptedServer::start(vec![]).await;
    for cap in [
        Arc::new(CitationPolicyCapability::new()) as Arc<dyn Capability>,
        Arc::new(EvidenceCompactionCapability::new()),
    ] {
        let Err(err) = agent_for(test_config(&server.base_url()))
            .capability(cap.clone())
            .capability(cap.clone())
            .build()
        else {
            panic!("duplicate ids are refused");
        };
        let msg = err.to_string();
        assert!(
            msg.contains(cap.id()) && msg.contains("unique within a run"),
            "{msg}"
        );
    }
}

// ----- J. Instructions ------------------------------------------------------------------

#[tokio::test]
async fn scenario_92_domain_preamble_once_before_the_heading() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![Reply::text("hi")]).await;
    let preamble = "The corpus contains solar manuals.";
    let cap = rag_with(&kb, |c| c.prompts.domain_preamble = preamble.into());
    run(&agent(&server, vec![Arc::new(cap)]), RunInput::prompt("hi"))
        .await
        .unwrap();
    let s = system_text(&server.requests()[0]);
    assert_eq!(s.matches(preamble).count(), 1);
    assert_eq!(s.matches("# RAG").count(), 1);
    assert!(s.contains(&format!("{preamble}\n\n# RAG\n")), "{s}");
}

#[tokio::test]
async fn scenario_90_deferred_rag_loads_through_load_capability() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![
        Reply::tool_call("load_capability", json!({"id": "haiku-rag"})),
        Reply::text("answer"),
    ])
    .await;
    let cap = rag(&kb).defer_loading(true);
    let result = run(&agent(&server, vec![Arc::new(cap)]), RunInput::prompt("q"))
        .await
        .unwrap();
    let requests = server.requests();
    assert!(!system_text(&requests[0]).contains("# RAG"));
    assert_eq!(tool_names(&requests[0]), ["load_capability"]);
    assert!(system_text(&requests[0]).contains("- haiku-rag: "));
    let loaded = returns_of(&requests[1], "load_capability")[0].clone();
    assert!(
        loaded.contains("# RAG") && loaded.contains("rag_search"),
        "{loaded}"
    );
    assert!(tool_names(&requests[1]).contains(&"rag_search".to_string()));
    // The question is closed at the end of the run.
    let st = rag_state(&result.state);
    assert_eq!(st.evidence.question, Some(0));
    assert!(!st.evidence.in_progress);
}

// ----- A–C through the loop ---------------------------------------------------------------

#[tokio::test]
async fn scenario_2_host_sees_the_settled_state_before_the_first_request() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![Reply::text("hello")]).await;
    let mut stored = EvidenceState::empty(StateKind::Rag);
    stored.document_filter = Some("uri = 'manual.pdf'".into());
    stored.citations = vec!["old".into()];
    stored.searches.insert("old", Vec::new());
    stored.evidence.question = Some(0);
    let state = Map::from_iter([("rag".to_string(), stored.to_value())]);
    let history = vec![
        ModelMessage::from(groundwork::engine::messages::ModelRequest::user("hi")),
        ModelMessage::from(groundwork::engine::messages::ModelResponse::new(vec![
            groundwork::engine::messages::ModelResponsePart::Text(
                groundwork::engine::messages::TextPart::new("hello"),
            ),
        ])),
    ];
    let (tx, mut rx) = crate::support::events();
    let agent = agent(&server, vec![Arc::new(rag(&kb))]);
    agent
        .run(
            RunInput::prompt("again")
                .with_history(history)
                .with_state(state),
            tx,
            CancelToken::new(),
        )
        .await
        .unwrap();
    let first = crate::support::drain(&mut rx)
        .into_iter()
        .find_map(|e| match e {
            groundwork::engine::events::CoreEvent::StateChanged {
                request: 0, state, ..
            } => Some(state),
            _ => None,
        })
        .expect("state published before the first request");
    let st = rag_state(&first);
    assert_eq!(st.document_filter.as_deref(), Some("uri = 'manual.pdf'"));
    assert!(st.citations.is_empty() && st.searches.is_empty());
    assert_eq!(st.evidence.question, Some(2));
    assert!(st.evidence.in_progress);
}

#[tokio::test]
async fn scenario_25_cite_in_the_same_response_as_a_search_is_missing() {
    let kb = kb().await;
    let ai = kb.chunk("AI Overview", 0);
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "agents", "limit": 1}))
            .and_tool_call("rag_cite", json!({"chunk_ids": [ai]})),
        Reply::text("answer"),
    ])
    .await;
    let result = run(
        &agent(&server, vec![Arc::new(rag(&kb))]),
        RunInput::prompt("q"),
    )
    .await
    .unwrap();
    let st = rag_state(&result.state);
    assert_eq!(citation_status(&[&st.evidence]), CitationStatus::Missing);
    assert_eq!(
        st.evidence.declaration.as_ref().unwrap().epoch,
        st.evidence.latest_evidence_epoch
    );
    assert_eq!(st.evidence.latest_evidence_epoch, 1);
    let occurrence = st.evidence.occurrences.get(&ai).unwrap();
    assert_eq!(occurrence.retrieved_in_questions, [0]);
    assert_eq!(occurrence.cited_in_questions, [0]);
}

#[tokio::test]
async fn unloaded_deferred_rag_still_closes_its_question() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![Reply::text("hi"), Reply::text("hi again")]).await;
    let agent = agent(&server, vec![Arc::new(rag(&kb).defer_loading(true))]);
    let q1 = run(&agent, RunInput::prompt("hello")).await.unwrap();
    let st = rag_state(&q1.state);
    assert_eq!(st.evidence.question, Some(0));
    assert!(!st.evidence.in_progress);
    // The next run is a new question, not a continuation.
    let q2 = run(
        &agent,
        RunInput::prompt("again")
            .with_history(q1.messages.clone())
            .with_state(q1.state.clone()),
    )
    .await
    .unwrap();
    assert_eq!(rag_state(&q2.state).evidence.question, Some(2));
}

// ----- Collections (several named stores) ------------------------------------------------

/// A store at `dir` holding `docs`, and their chunk ids in order.
async fn store_with(
    dir: &std::path::Path,
    url: &str,
    docs: Vec<NewDocument>,
) -> (Arc<Store>, Vec<String>) {
    let names: Vec<String> = (0..docs.len()).map(|i| format!("doc {i}")).collect();
    let named = names.iter().map(String::as_str).zip(docs).collect();
    let (store, mut chunks, _) = store_at(dir, url, named).await;
    let ids = names
        .iter()
        .flat_map(|n| chunks.remove(n).unwrap())
        .collect();
    (Arc::new(store), ids)
}

#[tokio::test]
async fn collections_search_select_cite_and_capsule() {
    let embed_server = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (alpha, alpha_ids) = store_with(
        &dir.path().join("alpha.lancedb"),
        &embed_server.url,
        vec![ai_overview()],
    )
    .await;
    let (beta, beta_ids) = store_with(
        &dir.path().join("beta.lancedb"),
        &embed_server.url,
        vec![ml_basics()],
    )
    .await;
    let caps = || -> Vec<Arc<dyn Capability>> {
        vec![
            Arc::new(
                RagCapability::with_collections(
                    vec![
                        ("alpha".into(), alpha.clone()),
                        ("beta".into(), beta.clone()),
                    ],
                    AppConfig::default(),
                )
                .unwrap(),
            ),
            Arc::new(EvidenceCompactionCapability::new()),
        ]
    };
    let server = ScriptedServer::start(vec![
        Reply::tool_call(
            "rag_search",
            json!({"query": "agents gradient", "limit": 10}),
        ),
        Reply::tool_call(
            "rag_search",
            json!({"query": "gradient only beta", "sources": ["beta"]}),
        ),
        Reply::tool_call("rag_search", json!({"query": "x", "sources": ["gamma"]})),
        Reply::tool_call(
            "rag_cite",
            json!({"chunk_ids": [alpha_ids[0], beta_ids[2]]}),
        ),
        Reply::text("first answer"),
        Reply::text("second answer"),
    ])
    .await;
    let q1 = run(&agent(&server, caps()), RunInput::prompt("q"))
        .await
        .unwrap();
    let requests = server.requests();
    // The search tool offers the collection names.
    let tools = requests[0]["tools"].as_array().unwrap();
    let search = tools
        .iter()
        .find(|t| t["function"]["name"] == "rag_search")
        .unwrap();
    assert_eq!(
        search["function"]["parameters"]["properties"]["sources"]["anyOf"][0]["items"]["enum"],
        json!(["alpha", "beta"])
    );
    let st = rag_state(&q1.state);
    let both = st.searches.get("agents gradient").unwrap();
    assert_eq!(both.len(), 4, "every collection searched");
    assert!(both.windows(2).all(|w| w[0].score >= w[1].score));
    let collections: std::collections::HashSet<_> =
        both.iter().map(|r| r.collection.clone().unwrap()).collect();
    assert_eq!(collections.len(), 2);
    let only_beta = st.searches.get("gradient only beta").unwrap();
    assert!(!only_beta.is_empty());
    assert!(
        only_beta
            .iter()
            .all(|r| r.collection.as_deref() == Some("beta"))
    );
    // An unknown collection is a retry that names the real ones.
    let retry = returns_of(&requests[3], "rag_search")[2].clone();
    assert!(
        retry.contains("gamma") && retry.contains("alpha, beta"),
        "{retry}"
    );
    assert_eq!(
        st.citation_index
            .get(&alpha_ids[0])
            .unwrap()
            .collection
            .as_deref(),
        Some("alpha")
    );
    assert_eq!(
        st.citation_index
            .get(&beta_ids[2])
            .unwrap()
            .collection
            .as_deref(),
        Some("beta")
    );
    // The next question's capsule names each entry's collection.
    run(
        &agent(&server, caps()),
        RunInput::prompt("next")
            .with_history(q1.messages.clone())
            .with_state(q1.state.clone()),
    )
    .await
    .unwrap();
    let body = server.requests().last().unwrap().clone();
    let capsule = returns_of(&body, "rag_search")
        .into_iter()
        .find(|r| r.contains("[Cited evidence group 1]"))
        .expect("a capsule");
    assert!(capsule.contains("Collection: alpha") && capsule.contains("Collection: beta"));
}
