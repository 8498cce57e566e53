//! SCENARIOS.md sections I (analysis sandbox), K (factory surface) and L (chat host),
//! run through the real agent loop against the scripted server. The other scenarios of
//! these sections are in `tests/engine/analysis_capability.rs`, `tests/engine/rag_capability.rs`,
//! `src/sandbox/vfs.rs`, `src/capabilities/spec.rs` and `src/tui/app.rs`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::caps::TestCap;
use crate::support::kb::*;
use crate::support::scripted_server::{Reply, ScriptedServer};
use groundwork::capabilities::evidence::as_evidence;
use groundwork::capabilities::rag::CAPABILITY_ID as RAG_ID;
use groundwork::capabilities::state::{EvidenceState, StateKind};
use groundwork::engine::agent::{RunError, RunInput};
use groundwork::engine::cancel::CancelToken;
use groundwork::engine::capability::{Capability, ToolOutcome, ToolOutput};
use groundwork::engine::events::CoreEvent;
use groundwork::session::Session;
use serde_json::{Map, Value, json};

// ----- I. Analysis sandbox -----------------------------------------------------------------

/// Every key of every object in `v`, recursively.
fn all_keys(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                out.push(k.clone());
                all_keys(child, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| all_keys(i, out)),
        _ => {}
    }
}

fn node<'a>(v: &'a Value, title: &str) -> &'a Value {
    v.as_array()
        .unwrap()
        .iter()
        .find(|n| n["title"] == title)
        .unwrap_or_else(|| panic!("no node {title} in {v}"))
}

/// Scenario 85: `toc.json` read by code in the sandbox nests the headers by level with
/// half-open item ranges, carries `doc_id` and `title`, and no node has `position`.
#[tokio::test]
async fn scenario_85_toc_nesting_through_the_sandbox() {
    let mut items = Vec::new();
    for (pos, (title, level)) in [
        ("Intro", 1),
        ("Background", 2),
        ("Prior Work", 3),
        ("Approach", 2),
        ("Methods", 1),
    ]
    .into_iter()
    .enumerate()
    {
        let pos = 2 * pos as i64;
        items.push(item(
            pos,
            &format!("#/texts/{pos}"),
            "section_header",
            level,
            title,
        ));
        items.push(item(
            pos + 1,
            &format!("#/texts/{}", pos + 1),
            "text",
            0,
            &format!("Paragraph under {title}."),
        ));
    }
    let paper = document(
        Some("test://paper"),
        Some("Paper"),
        items,
        vec![chunk(
            0,
            &[],
            &["#/texts/1", "#/texts/3"],
            "Paragraph under Intro.",
        )],
    );
    let kb = kb_with(vec![("Paper", paper)]).await;
    let doc = kb.doc_ids["Paper"].clone();
    let server = ScriptedServer::start(vec![
        Reply::tool_call(
            "analysis_execute_code",
            json!({"code": format!(
                "from pathlib import Path\nprint(Path('/documents/{doc}/toc.json').read_text())"
            )}),
        ),
        Reply::text("done"),
    ])
    .await;
    let result = run(
        &agent(&server, vec![Arc::new(analysis(&kb))]),
        RunInput::prompt("q"),
    )
    .await
    .unwrap();
    assert_eq!(text_output(&result), "done");
    let out = returns_of(&server.requests()[1], "analysis_execute_code")[0].clone();
    let toc: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(toc["doc_id"], json!(doc));
    assert_eq!(toc["title"], json!("Paper"));
    let roots = &toc["tree"];
    assert_eq!(roots.as_array().unwrap().len(), 2, "{roots}");
    let intro = node(roots, "Intro");
    let methods = node(roots, "Methods");
    assert_eq!(intro["item_range"], json!([0, 8]));
    assert_eq!(methods["item_range"], json!([8, 10]));
    let children = &intro["children"];
    assert_eq!(children.as_array().unwrap().len(), 2);
    let background = node(children, "Background");
    let approach = node(children, "Approach");
    assert_eq!(background["item_range"], json!([2, 6]));
    assert_eq!(approach["item_range"], json!([6, 8]));
    let prior = node(&background["children"], "Prior Work");
    assert_eq!(prior["item_range"], json!([4, 6]));
    let mut keys = Vec::new();
    all_keys(&toc, &mut keys);
    assert!(!keys.iter().any(|k| k == "position"), "{keys:?}");
}

// ----- K. Factory surface --------------------------------------------------------------------

/// Scenario 96: a capability built over a borrowed open store: the run copy uses that
/// very store (already open, no connection of its own), searches through it, and
/// after the run the store is released by the copy and still usable.
#[tokio::test]
async fn scenario_96_run_copy_uses_the_borrowed_store() {
    let kb = kb().await;
    let baseline = Arc::strong_count(&kb.store);
    let seen: Arc<Mutex<Vec<(bool, bool)>>> = Arc::new(Mutex::new(Vec::new()));
    let trace = Arc::new(Mutex::new(Vec::new()));
    let probe = {
        let seen = seen.clone();
        let borrowed = kb.store.clone();
        TestCap::new("probe", &trace)
            .tool("probe_tool")
            .handler(move |_, _, ctx| {
                let rag = ctx
                    .capability(RAG_ID)
                    .and_then(as_evidence)
                    .expect("the rag run copy");
                let handle = rag.picture_store("any");
                let open = handle.is_open();
                let store = futures::executor::block_on(handle.get()).unwrap();
                seen.lock()
                    .unwrap()
                    .push((open, Arc::ptr_eq(&store, &borrowed)));
                ToolOutcome::Ok(ToolOutput::text("probed"))
            })
            .arc()
    };
    let server = ScriptedServer::start(vec![
        Reply::tool_call("probe_tool", json!({"q": "before"})),
        Reply::tool_call("rag_search", json!({"query": "Gradient", "limit": 1})),
        Reply::tool_call("probe_tool", json!({"q": "after"})),
        Reply::text("done"),
    ])
    .await;
    let caps: Vec<Arc<dyn Capability>> = vec![Arc::new(rag(&kb)), probe];
    let agent = agent(&server, caps);
    let result = run(&agent, RunInput::prompt("q")).await.unwrap();
    assert_eq!(text_output(&result), "done");
    assert_eq!(
        *seen.lock().unwrap(),
        [(true, true), (true, true)],
        "open before any use, and the borrowed store itself"
    );
    let ret = returns_of(&server.requests()[2], "rag_search")[0].clone();
    assert!(ret.contains("[rank 1 of 1]"), "{ret}");
    drop(agent);
    drop(result);
    assert_eq!(
        Arc::strong_count(&kb.store),
        baseline,
        "the run copy let go of it"
    );
    let hits = kb.store.search("Gradient", Some(1), None).await.unwrap();
    assert_eq!(hits.len(), 1, "still usable afterwards");
}

// ----- L. Chat host ------------------------------------------------------------------------

/// Scenario 99: committed chat state at question 0; a second run writes evidence into
/// its own state copy and is cancelled mid-answer: the committed state and messages
/// are unchanged.
#[tokio::test]
async fn scenario_99_cancelled_run_leaves_the_committed_session_unchanged() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "Gradient", "limit": 1})),
        Reply::text("first answer"),
        Reply::tool_call("rag_search", json!({"query": "boosting", "limit": 1})),
        Reply::text("this answer streams very slowly").chunk_delay(Duration::from_secs(30)),
    ])
    .await;
    let agent = Arc::new(agent(&server, vec![Arc::new(rag(&kb))]));
    let mut session = Session::new("scripted-model");
    let first = run(&agent, RunInput::prompt("one")).await;
    assert!(session.commit_run(&first));
    let committed = session.clone();
    let at_commit = EvidenceState::load(StateKind::Rag, &committed.state["rag"]).unwrap();
    assert_eq!(at_commit.evidence.question, Some(0));
    assert_eq!(at_commit.evidence.latest_evidence_epoch, 1);

    let (tx, mut rx) = crate::support::events();
    let cancel = CancelToken::new();
    let input = RunInput::prompt("two")
        .with_history(session.messages.clone())
        .with_state(session.state.clone());
    let handle = tokio::spawn({
        let agent = agent.clone();
        let cancel = cancel.clone();
        async move { agent.run(input, tx, cancel).await }
    });
    let mut copy_epoch = 0;
    loop {
        let e = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("events keep coming")
            .expect("the run is still going");
        if let CoreEvent::StateChanged { state, .. } = &e {
            let st: Map<String, Value> = state.clone();
            copy_epoch = rag_state(&st).evidence.latest_evidence_epoch;
        }
        if matches!(e, CoreEvent::TextDelta { .. }) {
            break;
        }
    }
    assert_eq!(copy_epoch, 5, "the run's copy holds the new evidence");
    cancel.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(5), handle)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(outcome, Err(RunError::Cancelled)), "{outcome:?}");
    assert!(!session.commit_run(&outcome));
    assert_eq!(session, committed);
    let st = EvidenceState::load(StateKind::Rag, &session.state["rag"]).unwrap();
    assert_eq!(st.evidence.question, Some(0));
    assert_eq!(st.evidence.latest_evidence_epoch, 1);
    assert_eq!(session.messages.len(), 4);
}
