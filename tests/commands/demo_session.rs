//! The demo session (`sessions/demo.json`): recorded by Groundwork itself (the workbench's
//! app model and engine, the real async-openai client) against the scripted
//! OpenAI-compatible server, over the demo corpus ingested exactly as the first run ingests
//! it (so its chunk ids exist in every demo database). It is labelled a scripted
//! demonstration in its metadata and in the UI.
//!
//! This test records it again and fails if the committed file is stale (timestamps, run
//! ids and durations aside). To re-record after a deliberate change:
//!
//!     GROUNDWORK_RECORD_DEMO=1 cargo test --test commands demo_session::

use std::path::Path;

use crate::support::scripted_server::{Reply, ScriptedServer};
use crate::support::workbench::{ask, demo_kb, hit, host, services};
use groundwork::host::ask::CapabilityChoice;
use groundwork::session::Session;
use groundwork::tui::Runtime;
use groundwork::tui::app::App;
use serde_json::{Value, json};

const LABEL: &str = "Scripted demonstration: every model turn in this session was scripted for \
the demo and replayed through Groundwork's engine against a scripted OpenAI-compatible server; \
no language model wrote it.";

/// Keys whose values change from one recording to the next.
const VOLATILE: &[&str] = &[
    "timestamp",
    "created_at",
    "started_at",
    "duration_ms",
    "run_id",
    "provider_url",
];

fn normalise(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if VOLATILE.contains(&k.as_str()) {
                    *x = Value::String("<volatile>".into());
                } else {
                    normalise(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(normalise),
        _ => {}
    }
}

/// The first place two JSON values differ, for the failure message.
fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()) {
                let (p, q) = (x.get(k), y.get(k));
                match (p, q) {
                    (Some(p), Some(q)) => {
                        if let Some(d) = first_difference(p, q, &format!("{path}.{k}")) {
                            return Some(d);
                        }
                    }
                    _ => return Some(format!("{path}.{k}: only on one side")),
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Some(format!("{path}: {} vs {} items", x.len(), y.len()));
            }
            x.iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (p, q))| first_difference(p, q, &format!("{path}[{i}]")))
        }
        _ if a != b => Some(format!("{path}: {a} vs {b}")),
        _ => None,
    }
}

async fn record() -> Session {
    let kb = demo_kb().await;
    let figure = hit(&kb.store, "monthly solar output rooftop array", |r| {
        r.doc_item_refs.iter().any(|x| x.contains("pictures"))
            && r.document_uri
                .as_deref()
                .is_some_and(|u| u.ends_with(".pdf"))
    })
    .await
    .chunk_id
    .unwrap();
    let battery = hit(
        &kb.store,
        "battery banks full equivalent cycles capacity",
        |r| r.chunk_id.as_deref() != Some(&figure),
    )
    .await
    .chunk_id
    .unwrap();
    let log = hit(
        &kb.store,
        "state of charge fell percent islanding test",
        |r| {
            r.document_uri
                .as_deref()
                .is_some_and(|u| u.ends_with("operator-log-excerpts.txt"))
        },
    )
    .await
    .chunk_id
    .unwrap();
    let program = "docs = await list_documents()\n\
        log = [d for d in docs if 'log' in (d['title'] or '').lower()][0]\n\
        text = open('/documents/' + log['id'] + '/content.txt').read()\n\
        entries = [e.strip() for e in text.split('\\n\\n') if e.strip()][1:]\n\
        soc = [e for e in entries if 'state of charge' in e]\n\
        print(len(entries), 'entries,', len(soc), 'mention the state of charge:')\n\
        for e in soc:\n    \
            print('-', e.split('.')[0], '|', e[e.index('state of charge'):])";
    let server = ScriptedServer::start(vec![
        // 1. Two searches, a cited chunk with a figure, a grounded answer.
        Reply::tool_call(
            "rag_search",
            json!({"query": "rooftop solar array annual output 2026"}),
        ),
        Reply::tool_call(
            "rag_search",
            json!({"query": "monthly solar output peak month"}),
        ),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [figure]})),
        Reply::text(
            "The 420 kW rooftop array produced **512 MWh** in 2026. Output peaked in **July at \
             61 MWh** and was lowest in December at 17 MWh; Figure 1 of the field report shows \
             the whole year [1].",
        ),
        // 2. A follow-up: earlier evidence travels as the capsule, old results as receipts.
        Reply::tool_call(
            "rag_search",
            json!({"query": "battery banks cycles capacity fade"}),
        ),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [battery]})),
        Reply::text(
            "The two lithium iron phosphate banks completed 301 full equivalent cycles, and \
             measured capacity fell from 1,000 kWh to 978 kWh, inside the warranty curve [2].",
        ),
        // 3. An uncited answer: the policy redirects once; the model searches, finds
        //    nothing that supports a name, and declares the answer ungrounded.
        Reply::text("The inverter was made by a large European manufacturer."),
        Reply::tool_call(
            "rag_search",
            json!({"query": "inverter manufacturer brand"}),
        ),
        Reply::tool_call("rag_cite", json!({"chunk_ids": []})),
        Reply::text(
            "The knowledge base does not name the inverter's manufacturer; it only describes \
             a 250 kW grid-forming inverter. My earlier claim is not supported by any document.",
        ),
        // 4. Analysis: a program counts over the operator log in the sandbox.
        Reply::tool_call(
            "analysis_search",
            json!({"query": "operator log state of charge percent"}),
        ),
        Reply::tool_call("analysis_execute_code", json!({"code": program})),
        Reply::tool_call("analysis_cite", json!({"chunk_ids": [log]})),
        Reply::text(
            "Two of the five operator log entries record the state of charge: **58 percent** \
             when the non-critical feeders were switched off during the 14 March storm, and a \
             fall from **81 to 79 percent** during the 18 December islanding test.",
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = App::new(
        Session::new("scripted-model"),
        Some(dir.path().join("demo.json")),
        host(),
    );
    let mut services = services(&kb.store, &server.base_url());
    services.capabilities = vec![CapabilityChoice::Rag, CapabilityChoice::Analysis];
    services.eager = true;
    services.sandbox_worker = Some(env!("CARGO_BIN_EXE_groundwork").into());
    let mut rt = Runtime::new(services);
    ask(
        &mut rt,
        &mut app,
        "How much energy did the rooftop array produce in 2026, and when did it peak?",
    )
    .await;
    ask(
        &mut rt,
        &mut app,
        "How did the battery banks hold up over the year?",
    )
    .await;
    ask(&mut rt, &mut app, "Who manufactured the inverter?").await;
    ask(
        &mut rt,
        &mut app,
        "How many operator log entries record the state of charge, and at what values?",
    )
    .await;
    assert_eq!(server.remaining(), 0, "the whole script was used");
    let mut session = (*app.session).clone();
    session.groundwork.scripted_demo = true;
    session
        .groundwork
        .labels
        .insert("demo".into(), Value::String(LABEL.into()));
    session
}

#[tokio::test]
async fn the_committed_demo_session_is_what_groundwork_records_today() {
    let session = record().await;
    // What the panes show: searches, a cited figure, a compacted follow-up, a redirect,
    // an explicitly ungrounded answer.
    let app = App::new(session.clone(), None, host());
    let ledger = &app.transcript.ledger;
    assert_eq!(ledger.len(), 4);
    assert_eq!(ledger[0].status.as_str(), "grounded");
    assert!(
        !app.transcript.turns[0].citations[0]
            .evidence
            .picture_refs
            .is_empty()
    );
    assert_eq!(ledger[1].status.as_str(), "grounded");
    assert!(ledger[2].redirected);
    assert_eq!(ledger[2].status.as_str(), "ungrounded");
    let capsule = app.requests().iter().any(|r| {
        groundwork::host::inspect::align(&r.snapshot)
            .iter()
            .flat_map(|m| m.parts.iter())
            .any(|p| p.mark == groundwork::host::inspect::PartMark::Capsule)
    });
    assert!(capsule, "a compacted follow-up");
    let program = app.transcript.turns[3]
        .program
        .as_deref()
        .unwrap_or_default();
    assert!(program.contains("list_documents"), "the analysis program");
    assert_eq!(ledger[3].status.as_str(), "grounded");
    assert_eq!(ledger[3].executions, 1);
    let executions = &session.state["analysis"]["executions"];
    assert_eq!(executions[0]["success"], true, "{executions}");
    assert!(
        executions[0]["stdout"]
            .as_str()
            .unwrap()
            .starts_with("5 entries, 2 mention the state of charge:"),
        "{executions}"
    );

    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions/demo.json");
    if std::env::var("GROUNDWORK_RECORD_DEMO").is_ok_and(|v| v == "1") {
        session.save(&path).unwrap();
        return;
    }
    let committed = Session::load(&path).unwrap_or_else(|e| {
        panic!(
            "{e}; record it with GROUNDWORK_RECORD_DEMO=1 cargo test --test commands demo_session::"
        )
    });
    assert!(committed.groundwork.scripted_demo);
    let mut want = serde_json::to_value(&committed).unwrap();
    let mut got = serde_json::to_value(&session).unwrap();
    normalise(&mut want);
    normalise(&mut got);
    if let Some(d) = first_difference(&got, &want, "") {
        panic!(
            "sessions/demo.json is stale (first difference at {d}); re-record it with \
             GROUNDWORK_RECORD_DEMO=1 cargo test --test commands demo_session::"
        );
    }
    // The binary carries the same file.
    assert_eq!(
        groundwork::host::demo::SESSION_JSON.map(str::trim),
        Some(std::fs::read_to_string(&path).unwrap().trim())
    );
}
