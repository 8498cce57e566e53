//! The analysis capability through the real agent loop and async-openai client against
//! the scripted server, over a real LanceDB store with the hashembed server, with code
//! running in the real sandbox worker (`groundwork __sandbox-worker`). Test names carry
//! the SCENARIOS.md numbers.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::caps::TestCap;
use crate::support::kb::*;
use crate::support::scripted_server::{
    Reply, ScriptedServer, system_text, tool_names, wire_messages,
};
use crate::support::test_config;
use groundwork::capabilities::analysis::{AnalysisCapability, CAPABILITY_ID};
use groundwork::capabilities::policy::{CitationPolicyCapability, REDIRECT_TAG};
use groundwork::capabilities::rag::RagCapability;
use groundwork::capabilities::spec::capabilities_from_spec;
use groundwork::capabilities::state::{EvidenceState, StateKind};
use groundwork::config::AppConfig;
use groundwork::engine::agent::{RunInput, RunResult};
use groundwork::engine::capability::{ToolOutcome, ToolOutput};
use groundwork::sandbox::ExecLimits;
use groundwork::sandbox::host::Sandbox;
use groundwork::sandbox::vfs::Corpus;
use groundwork::store::NewDocument;
use serde_json::{Map, Value, json};

// ----- fixtures -----------------------------------------------------------------------

/// "Test Document" (`test://doc1`): H1@0, a paragraph @1, H2@2, a picture @3.
fn test_document() -> NewDocument {
    NewDocument {
        content: "Solar panels convert sunlight.\nBatteries store energy.".into(),
        ..document(
            Some("test://doc1"),
            Some("Test Document"),
            vec![
                item(0, "#/texts/0", "section_header", 1, "Solar"),
                item(1, "#/texts/1", "text", 0, "Solar panels convert sunlight."),
                item(2, "#/texts/2", "section_header", 2, "Storage"),
                item(3, "#/pictures/0", "picture", 0, "A battery rack"),
            ],
            vec![
                chunk(
                    0,
                    &[],
                    &["#/texts/0", "#/texts/1"],
                    "Solar panels convert sunlight.",
                ),
                chunk(
                    1,
                    &[],
                    &["#/texts/2", "#/pictures/0"],
                    "Batteries store energy.",
                ),
            ],
        )
    }
}

/// "Secret" (`private://secret`): one paragraph.
fn private_document() -> NewDocument {
    let text = "Private notes about solar panels.";
    document(
        Some("private://secret"),
        Some("Secret"),
        vec![item(0, "#/texts/0", "text", 0, text)],
        vec![chunk(0, &[], &["#/texts/0"], text)],
    )
}

/// The name of `test_document` in the store.
const TEST_DOCUMENT: &str = "Test Document";

/// The store of this file's tests: "Test Document" and "Secret".
async fn kb() -> Kb {
    kb_with(vec![
        (TEST_DOCUMENT, test_document()),
        ("Secret", private_document()),
    ])
    .await
}

fn code_returns(body: &Value) -> Vec<String> {
    returns_of(body, "analysis_execute_code")
}

fn exec(code: &str) -> Reply {
    Reply::tool_call("analysis_execute_code", json!({"code": code}))
}

/// Runs the codes in one run (then answers "done") and returns the code tool returns
/// seen by the last request, plus the run result.
async fn run_codes(
    cap: AnalysisCapability,
    codes: &[&str],
    state: Map<String, Value>,
) -> (Vec<String>, RunResult) {
    let mut replies: Vec<Reply> = codes.iter().map(|c| exec(c)).collect();
    replies.push(Reply::text("done"));
    let server = ScriptedServer::start(replies).await;
    let result = run(
        &agent(&server, vec![Arc::new(cap)]),
        RunInput::prompt("q").with_state(state),
    )
    .await
    .unwrap();
    let requests = server.requests();
    (code_returns(requests.last().unwrap()), result)
}

// ----- I. Sandbox -----------------------------------------------------------------------

#[tokio::test]
async fn scenario_79_basic_execution_results_and_errors() {
    let kb = kb_with(vec![]).await;
    let (returns, result) = run_codes(
        analysis(&kb),
        &[
            "print('hello world')",
            "1 + 2",
            "print('hello')\n42",
            "x = 1/0",
            "print(undefined_variable)",
            "def foo(",
            "import json, string",
            "import json\nprint(json.dumps({'a': 1}))",
        ],
        Map::new(),
    )
    .await;
    assert_eq!(text_output(&result), "done");
    assert_eq!(returns[0], "hello world\n");
    assert_eq!(returns[1], "3");
    assert_eq!(returns[2], "hello\n42");
    assert!(returns[3].contains("ZeroDivisionError"), "{}", returns[3]);
    assert!(returns[4].contains("NameError"), "{}", returns[4]);
    assert_eq!(returns[7], "{\"a\": 1}\n");
    let st = analysis_state(&result.state);
    let ex = st.executions.unwrap();
    assert_eq!(ex.len(), 8);
    assert!(ex[0].success && ex[0].stderr.is_empty());
    assert!(ex[0].stdout.contains("hello world"));
    for e in &ex[3..7] {
        assert!(!e.success && !e.stderr.is_empty(), "{e:?}");
    }
    assert!(ex[7].success);
}

#[tokio::test]
async fn scenario_81_filtered_documents_and_files() {
    let kb = kb().await;
    let doc = &kb.doc_ids[TEST_DOCUMENT];
    let mut seeded = EvidenceState::empty(StateKind::Analysis);
    seeded.document_filter = Some("uri LIKE 'test://%'".into());
    let state = Map::from_iter([("analysis".to_string(), seeded.to_value())]);
    let listing = "from pathlib import Path\n\
                   docs = await list_documents()\n\
                   print(len(docs), docs[0]['title'], docs[0]['uri'])\n\
                   for p in Path('/documents').iterdir():\n    print(p)";
    let metadata = format!(
        "import json\nfrom pathlib import Path\n\
         m = json.loads(Path('/documents/{doc}/metadata.json').read_text())\n\
         print(m['title'], m['uri'], sorted(m.keys()))"
    );
    let content =
        format!("from pathlib import Path\nPath('/documents/{doc}/content.txt').read_text()");
    let with_open = format!(
        "with open('/documents/{doc}/content.txt') as f:\n    lines = f.readlines()\nprint(len(lines), lines[1])"
    );
    let looping = format!("for line in open('/documents/{doc}/content.txt'):\n    print(line)");
    let hidden = format!(
        "from pathlib import Path\nprint(Path('/documents/{}/content.txt').exists())",
        kb.doc_ids["Secret"]
    );
    let (returns, result) = run_codes(
        analysis(&kb),
        &[listing, &metadata, &content, &with_open, &looping, &hidden],
        state,
    )
    .await;
    assert_eq!(
        returns[0],
        format!("1 Test Document test://doc1\n/documents/{doc}\n")
    );
    assert_eq!(
        returns[1],
        "Test Document test://doc1 ['created_at', 'id', 'title', 'uri']\n"
    );
    assert_eq!(
        returns[2],
        "Solar panels convert sunlight.\nBatteries store energy."
    );
    assert_eq!(returns[3], "2 Batteries store energy.\n");
    assert!(returns[4].contains("not iterable"), "{}", returns[4]);
    assert!(
        returns[4].contains(".readlines()"),
        "the hint: {}",
        returns[4]
    );
    assert_eq!(returns[5], "False\n", "the private document is invisible");
    assert_eq!(analysis_state(&result.state).executions.unwrap().len(), 6);
}

#[tokio::test]
async fn scenario_82_search_dicts_and_only_two_host_functions() {
    let kb = kb().await;
    let (returns, result) = run_codes(
        analysis(&kb),
        &[
            "rs = await search('batteries store energy', limit=5)\n\
             for r in rs:\n    print(r['chunk_id'], r['picture_refs'], 'image_data' in r, sorted(r.keys()))",
            "fetch('x')",
        ],
        Map::new(),
    )
    .await;
    let lines: Vec<&str> = returns[0].lines().collect();
    assert!(!lines.is_empty());
    let battery = kb.chunk(TEST_DOCUMENT, 1);
    let line = lines.iter().find(|l| l.starts_with(&battery)).unwrap();
    assert!(line.contains("['#/pictures/0'] False"), "{line}");
    assert!(line.contains(
        "['chunk_id', 'content', 'doc_item_refs', 'document_id', 'document_title', \
         'document_uri', 'headings', 'labels', 'page_numbers', 'picture_refs', 'score']"
    ));
    let solar = kb.chunk(TEST_DOCUMENT, 0);
    if let Some(l) = lines.iter().find(|l| l.starts_with(&solar)) {
        assert!(l.contains(" [] False"), "{l}");
    }
    assert!(returns[1].contains("NameError"), "{}", returns[1]);
    // In-code results are kept for citation in the `_sandbox` bucket.
    let st = analysis_state(&result.state);
    assert!(
        st.searches
            .get("_sandbox")
            .unwrap()
            .iter()
            .any(|r| r.id() == battery)
    );
}

#[tokio::test]
async fn scenario_83_items_and_toc_through_the_sandbox() {
    let kb = kb().await;
    let doc = &kb.doc_ids[TEST_DOCUMENT];
    let code = format!(
        "import json\nfrom pathlib import Path\n\
         rows = [json.loads(l) for l in Path('/documents/{doc}/items.jsonl').read_text().split('\\n')]\n\
         print(len(rows), [r['heading_level'] for r in rows], list(rows[0].keys()))\n\
         print(rows[1]['chunk_ids'])\n\
         toc = json.loads(Path('/documents/{doc}/toc.json').read_text())\n\
         print(toc['doc_id'] == '{doc}', toc['title'], [(n['title'], n['item_range']) for n in toc['tree']])\n\
         print([(c['title'], c['item_range'], c['chunk_ids']) for c in toc['tree'][0]['children']])"
    );
    let (returns, _) = run_codes(analysis(&kb), &[&code], Map::new()).await;
    let c = &kb.chunks[TEST_DOCUMENT];
    assert_eq!(
        returns[0],
        format!(
            "4 [1, 0, 2, 0] ['self_ref', 'label', 'text', 'page_numbers', 'heading_level', 'chunk_ids']\n\
             ['{}']\n\
             True Test Document [('Solar', [0, 4])]\n\
             [('Storage', [2, 4], ['{}'])]\n",
            c[0], c[1]
        )
    );
}

#[tokio::test]
async fn scenario_87_structure_is_fetched_once_per_document() {
    let kb = kb().await;
    let doc = &kb.doc_ids[TEST_DOCUMENT];
    let mut corpus = Corpus::new(kb.store.clone(), None);
    for file in ["items.jsonl", "toc.json", "items.jsonl", "toc.json"] {
        let text = corpus
            .os("Path.read_text", &format!("/documents/{doc}/{file}"))
            .await
            .unwrap();
        assert!(text.as_str().is_some_and(|t| !t.is_empty()));
    }
    assert_eq!(corpus.structure_fetches, 1);
    // content.txt and metadata.json are not structure reads; writes never reach the host.
    assert!(
        corpus
            .os("Path.read_text", "/documents/nope/content.txt")
            .await
            .is_err()
    );
    assert_eq!(
        corpus
            .os("Path.is_dir", &format!("/documents/{doc}"))
            .await
            .unwrap(),
        json!(true)
    );
}

#[tokio::test]
async fn writes_are_refused() {
    let kb = kb().await;
    let doc = &kb.doc_ids[TEST_DOCUMENT];
    let (returns, result) = run_codes(
        analysis(&kb),
        &[
            &format!("from pathlib import Path\nPath('/documents/{doc}/content.txt').write_text('x')"),
            &format!("open('/documents/{doc}/notes.txt', 'w')"),
            &format!("from pathlib import Path\nprint(Path('/documents/{doc}/content.txt').read_text()[:5])"),
        ],
        Map::new(),
    )
    .await;
    assert!(
        returns[0].contains(&format!(
            "PermissionError: Document files are read-only: /documents/{doc}/content.txt"
        )),
        "{}",
        returns[0]
    );
    assert!(
        returns[1].contains("Document files are read-only"),
        "{}",
        returns[1]
    );
    assert_eq!(returns[2], "Solar\n", "the file is unchanged");
    let ex = analysis_state(&result.state).executions.unwrap();
    assert!(!ex[0].success && !ex[1].success && ex[2].success);
}

#[tokio::test]
async fn scenario_88_session_persists_within_a_run_and_restarts_after_a_kill() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![
        exec("x = 1"),
        exec("print(x)"),
        // The test kills the worker while this reply is delayed.
        exec("print(x)").delay(Duration::from_millis(1500)),
        exec("print('fresh')"),
        exec("print(x)"),
        Reply::text("done"),
    ])
    .await;
    // A worker path of its own, so that workers of tests running alongside are left alone.
    let dir = tempfile::tempdir().unwrap();
    let own_worker = dir.path().join("worker-of-scenario-88");
    std::os::unix::fs::symlink(WORKER, &own_worker).unwrap();
    let marker = own_worker.to_string_lossy().into_owned();
    let agent = agent(&server, vec![Arc::new(analysis(&kb).worker(&own_worker))]);
    let runner = tokio::spawn(async move {
        let r = run(&agent, RunInput::prompt("q")).await.unwrap();
        (r, agent)
    });
    // Find our worker child once it exists and kill it.
    let me = std::process::id();
    let started = Instant::now();
    let pid = loop {
        if let Some(pid) = worker_children(me, &marker).first() {
            break *pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no worker appeared"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let status = std::process::Command::new("kill")
        .arg("-9")
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let (result, agent) = runner.await.unwrap();
    let returns = code_returns(server.requests().last().unwrap());
    assert_eq!(returns[0], "No output.");
    assert_eq!(returns[1], "1\n");
    assert!(returns[2].contains("restarted"), "{}", returns[2]);
    assert_eq!(returns[3], "fresh\n");
    assert!(returns[4].contains("NameError"), "{}", returns[4]);
    let ex = analysis_state(&result.state).executions.unwrap();
    assert!(ex[2].stderr.contains("restarted") && !ex[2].success);
    // The worker is stopped at run end.
    assert!(
        worker_children(me, &marker).is_empty() || {
            tokio::time::sleep(Duration::from_millis(300)).await;
            worker_children(me, &marker).is_empty()
        }
    );

    // A new run starts with an empty session.
    server.push(exec("print(x)"));
    server.push(Reply::text("done"));
    let result = run(
        &agent,
        RunInput::prompt("again")
            .with_history(result.messages.clone())
            .with_state(result.state.clone()),
    )
    .await
    .unwrap();
    let ex = analysis_state(&result.state).executions.unwrap();
    assert_eq!(ex.len(), 1, "a new question clears the log");
    assert!(ex[0].stderr.contains("NameError"));
}

/// Pids of live `__sandbox-worker` children of `parent` started from `marker`.
fn worker_children(parent: u32, marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let after = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or("");
        let mut fields = after.split_whitespace();
        let state = fields.next().unwrap_or("");
        let ppid: u32 = fields.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if ppid != parent || state == "Z" {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.contains("__sandbox-worker") && cmdline.contains(marker) {
            out.push(pid);
        }
    }
    out
}

#[tokio::test]
async fn a_program_that_loops_forever_is_stopped() {
    let kb = kb().await;
    let started = Instant::now();
    let (returns, result) = run_codes(
        analysis_with(&kb, |c| c.analysis.code_timeout = 1.0),
        &["x = 5\nwhile True:\n    pass", "print(x)"],
        Map::new(),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(returns[0].contains("TimeoutError"), "{}", returns[0]);
    // The compute limit is a forced stop: the session is thrown away and the model told
    // so (SPEC §9.2, §9.5).
    assert!(returns[0].contains("restarted"), "{}", returns[0]);
    assert!(returns[1].contains("NameError"), "{}", returns[1]);
    assert_eq!(text_output(&result), "done");
}

#[tokio::test]
async fn the_watchdog_kills_a_worker_that_stops_answering() {
    let kb = kb().await;
    let mut sandbox = Sandbox::spawn(std::path::Path::new(WORKER)).await.unwrap();
    let mut corpus = Corpus::new(kb.store.clone(), None);
    let limits = ExecLimits {
        time_limit_ms: 60_000,
        session_remaining_ms: 60_000,
        max_memory: 64 << 20,
        max_recursion: 200,
        max_output_chars: 1000,
    };
    let started = Instant::now();
    let lost = sandbox
        .exec(
            "while True:\n    pass",
            &limits,
            &mut corpus,
            Duration::from_millis(500),
        )
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(lost.0.contains("stopped"), "{lost}");
    assert_eq!(sandbox.pid(), None, "the worker was killed and reaped");
}

#[tokio::test]
async fn a_program_that_allocates_without_end_is_stopped() {
    let kb = kb().await;
    let started = Instant::now();
    let (returns, result) = run_codes(
        analysis_with(&kb, |c| c.analysis.max_memory_mb = 32),
        &[
            "x = 5",
            "y = []\nwhile True:\n    y.append('a' * 1000)",
            "print('still here')",
            "print(x)",
        ],
        Map::new(),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(returns[1].contains("MemoryError"), "{}", returns[1]);
    assert!(returns[1].contains("restarted"), "{}", returns[1]);
    assert_eq!(returns[2], "still here\n");
    assert!(
        returns[3].contains("NameError"),
        "the session was reset: {}",
        returns[3]
    );
    assert_eq!(text_output(&result), "done");
}

#[tokio::test]
async fn long_output_is_truncated() {
    let kb = kb().await;
    let (returns, result) = run_codes(
        analysis_with(&kb, |c| c.analysis.max_output_chars = 10),
        &["print('x' * 100)", "print('y' * 100)\nz = 1/0"],
        Map::new(),
    )
    .await;
    assert_eq!(returns[0], "xxxxxxxxxx\n... (output truncated)");
    assert!(
        returns[1].ends_with("Output: yyyyyyyyyy\n... (output truncated)"),
        "{}",
        returns[1]
    );
    let ex = analysis_state(&result.state).executions.unwrap();
    assert_eq!(ex[1].stdout, "yyyyyyyyyy\n... (output truncated)");
}

// ----- E / F. Cite, budgets and evidence --------------------------------------------------

#[tokio::test]
async fn scenario_40_sandbox_bucket_merges_and_cites_without_a_store_lookup() {
    let kb = kb().await;
    let c1 = kb.chunk(TEST_DOCUMENT, 0);
    let c2 = kb.chunk(TEST_DOCUMENT, 1);
    // Seed `_sandbox` with chunk-1 under a marker content only the state has.
    let mut seeded = EvidenceState::empty(StateKind::Analysis);
    let mut first: groundwork::store::SearchResult = serde_json::from_value(json!({
        "content": "SEEDED", "score": 1.0, "chunk_id": c1, "document_id": kb.doc_ids[TEST_DOCUMENT]
    }))
    .unwrap();
    first.chunk_ids = vec![c1.clone()];
    seeded.searches.insert("_sandbox", vec![first]);
    // Carried state with the question in progress keeps `searches` (it continues).
    seeded.evidence.begin_question(0).unwrap();
    let history = vec![];
    let state = Map::from_iter([("analysis".to_string(), seeded.to_value())]);
    let server = ScriptedServer::start(vec![
        exec(
            "rs = await search('solar panels sunlight batteries energy', limit=5)\nprint(len(rs))",
        ),
        Reply::tool_call("analysis_cite", json!({"chunk_ids": [c2.clone()]})),
        Reply::text("done"),
    ])
    .await;
    let result = run(
        &agent(&server, vec![Arc::new(analysis(&kb))]),
        RunInput::prompt("q")
            .with_history(history)
            .with_state(state),
    )
    .await;
    let result = result.unwrap();
    let st = analysis_state(&result.state);
    let bucket = st.searches.get("_sandbox").unwrap();
    let ids: Vec<&str> = bucket.iter().map(|r| r.id()).collect();
    assert_eq!(ids[0], c1, "the stored result stays first: {ids:?}");
    assert_eq!(bucket[0].content, "SEEDED");
    assert_eq!(
        ids.iter().filter(|i| **i == c1).count(),
        1,
        "dedup by chunk id"
    );
    assert_eq!(ids.iter().filter(|i| **i == c2).count(), 1, "{ids:?}");
    assert_eq!(st.citations, [c2.as_str()]);
    let cited = st.citation_index.get(&c2).unwrap();
    // Resolved from the bucket (the expanded search result), not from the raw chunk.
    let from_bucket = bucket.iter().find(|r| r.id() == c2).unwrap();
    assert_eq!(cited.content, from_bucket.content);
}

#[tokio::test]
async fn scenario_43_execution_budget_and_evidence_epochs() {
    let kb = kb().await;
    // max_executions = 0: a failed return, no log, no evidence.
    let (returns, result) = run_codes(
        analysis_with(&kb, |c| c.analysis.max_executions = 0),
        &["print(42)"],
        Map::new(),
    )
    .await;
    assert!(returns[0].contains("Code-execution limit reached"));
    let st = analysis_state(&result.state);
    assert!(st.executions.unwrap().is_empty());
    assert_eq!(st.evidence.latest_evidence_epoch, 0);

    // (a) success printing, (b) success silent, (c) failure after printing, (d) silent failure.
    for (code, epoch) in [
        ("print(42)", 1),
        ("x = 1", 1),
        ("print(42)\n1/0", 1),
        ("1/0", 0),
    ] {
        let (_, result) = run_codes(analysis(&kb), &[code], Map::new()).await;
        let st = analysis_state(&result.state);
        assert_eq!(st.evidence.latest_evidence_epoch, epoch, "{code}");
        assert_eq!(st.executions.unwrap().len(), 1);
    }
}

#[tokio::test]
async fn scenario_43_notice_once_the_last_execution_is_spent() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![
        exec("print(1)"),
        exec("print(2)"),
        Reply::text("done"),
    ])
    .await;
    let cap = analysis_with(&kb, |c| c.analysis.max_executions = 1);
    let result = run(&agent(&server, vec![Arc::new(cap)]), RunInput::prompt("q"))
        .await
        .unwrap();
    let requests = server.requests();
    assert!(!system_text(&requests[0]).contains("spent its budget"));
    let notice = system_text(&requests[1]);
    assert!(
        notice.contains("spent its budget for analysis_execute_code"),
        "{notice}"
    );
    assert!(
        tool_names(&requests[1]).contains(&"analysis_execute_code".to_string()),
        "a spent tool stays declared"
    );
    let returns = code_returns(&requests[2]);
    assert!(returns[1].contains("Code-execution limit reached"));
    assert_eq!(analysis_state(&result.state).executions.unwrap().len(), 1);
}

#[tokio::test]
async fn scenario_50_failed_execution_reports_stderr_and_output() {
    let kb = kb().await;
    let (returns, result) = run_codes(
        analysis(&kb),
        &["print('partial', end='')\nundefined"],
        Map::new(),
    )
    .await;
    assert!(returns[0].contains("NameError"), "{}", returns[0]);
    assert!(
        returns[0].ends_with("\n\nOutput: partial"),
        "{}",
        returns[0]
    );
    let ex = analysis_state(&result.state).executions.unwrap();
    let last = ex.last().unwrap();
    assert_eq!(last.code, "print('partial', end='')\nundefined");
    assert!(!last.success);
    assert_eq!(last.stdout, "partial");
    // The failed return is marked failed in history.
    let failed = result.messages.iter().filter_map(|m| m.as_request()).flat_map(|r| r.parts.iter()).any(|p| {
        matches!(p, groundwork::engine::messages::ModelRequestPart::ToolReturn(t) if t.is_failed())
    });
    assert!(failed);
}

#[tokio::test]
async fn cite_resolves_ids_from_items_through_the_store_and_repairs_near_misses() {
    let kb = kb().await;
    let c0 = kb.chunk(TEST_DOCUMENT, 0);
    let c1 = kb.chunk(TEST_DOCUMENT, 1);
    let mut mangled = c1.clone();
    mangled.remove(5);
    let server = ScriptedServer::start(vec![
        Reply::tool_call(
            "analysis_search",
            json!({"query": "batteries store energy"}),
        ),
        Reply::tool_call(
            "analysis_cite",
            json!({"chunk_ids": [format!("[{c0}]"), mangled, "6.43"]}),
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
    let st = analysis_state(&result.state);
    assert!(
        st.citations.contains(&c0) && st.citations.contains(&c1),
        "{:?}",
        st.citations
    );
    let reply = &tool_returns(server.requests().last().unwrap())[1].1;
    assert!(
        reply.starts_with("Registered 2 citation(s)")
            && reply.contains("6.43")
            && !reply.contains("again"),
        "{reply}"
    );
    let refs = &st.evidence.declaration.unwrap().refs;
    assert!(refs.iter().all(|r| r.capability == "analysis"));
}

// ----- F. Request limits with both capabilities ---------------------------------------------

#[tokio::test]
async fn scenario_46_analysis_request_limit_keeps_cite_and_other_tools() {
    let kb = kb().await;
    let trace = Arc::new(Mutex::new(Vec::new()));
    let host = TestCap::new("host", &trace)
        .tool("host_tool")
        .handler(|_, _, _| ToolOutcome::Ok(ToolOutput::text("host ok")))
        .arc();
    let server = ScriptedServer::start(vec![
        Reply::tool_call("host_tool", json!({"q": "x"})),
        Reply::text("first"),
    ])
    .await;
    let agent = agent(
        &server,
        vec![
            Arc::new(RagCapability::new(kb.store.clone(), AppConfig::default())),
            Arc::new(analysis(&kb).request_limit(Some(1))),
            host,
        ],
    );
    let first = run(&agent, RunInput::prompt("q1")).await.unwrap();
    server.push(Reply::tool_call("host_tool", json!({"q": "y"})));
    server.push(Reply::text("second"));
    run(
        &agent,
        RunInput::prompt("q2")
            .with_history(first.messages.clone())
            .with_state(first.state.clone()),
    )
    .await
    .unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for pair in requests.chunks(2) {
        let one = tool_names(&pair[0]);
        for t in ["analysis_search", "analysis_execute_code", "analysis_cite"] {
            assert!(one.contains(&t.to_string()), "{one:?}");
        }
        let two = tool_names(&pair[1]);
        assert!(!two.contains(&"analysis_search".to_string()));
        assert!(!two.contains(&"analysis_execute_code".to_string()));
        for t in ["analysis_cite", "rag_search", "rag_cite", "host_tool"] {
            assert!(two.contains(&t.to_string()), "{two:?}");
        }
        assert!(
            system_text(&pair[1]).contains("analysis capability has reached its request limit")
        );
    }
}

#[tokio::test]
async fn scenario_48_deferred_analysis_counts_from_its_load() {
    let kb = kb().await;
    let trace = Arc::new(Mutex::new(Vec::new()));
    let host = TestCap::new("host", &trace)
        .tool("host_tool")
        .handler(|_, _, _| ToolOutcome::Ok(ToolOutput::text("host ok")))
        .arc();
    let server = ScriptedServer::start(vec![
        Reply::tool_call("load_capability", json!({"id": CAPABILITY_ID})),
        Reply::tool_call("host_tool", json!({"q": "x"})),
        Reply::text("answer"),
    ])
    .await;
    let cap = analysis(&kb).defer_loading(true).request_limit(Some(1));
    run(
        &agent(&server, vec![Arc::new(cap), host]),
        RunInput::prompt("q"),
    )
    .await
    .unwrap();
    let requests = server.requests();
    assert!(tool_names(&requests[0]).contains(&"load_capability".to_string()));
    assert!(!tool_names(&requests[0]).contains(&"analysis_search".to_string()));
    assert!(system_text(&requests[0]).contains("- haiku-rag-analysis: "));
    let loaded = &tool_returns(&requests[1])[0].1;
    assert!(
        loaded.contains("# Analysis") && loaded.contains("analysis_execute_code"),
        "{loaded}"
    );
    assert!(tool_names(&requests[1]).contains(&"analysis_search".to_string()));
    assert!(!tool_names(&requests[2]).contains(&"analysis_search".to_string()));
    assert!(
        system_text(&requests[2]).contains("analysis capability has reached its request limit")
    );
}

// ----- B / H / J / K with both capabilities -------------------------------------------------

#[tokio::test]
async fn scenario_6_rag_and_analysis_share_question_identities() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![Reply::text("one"), Reply::text("two")]).await;
    let agent = agent(
        &server,
        vec![
            Arc::new(RagCapability::new(kb.store.clone(), AppConfig::default())),
            Arc::new(analysis(&kb)),
        ],
    );
    let first = run(&agent, RunInput::prompt("q1")).await.unwrap();
    let rag = EvidenceState::load(StateKind::Rag, &first.state["rag"]).unwrap();
    assert_eq!(rag.evidence.question, Some(0));
    assert_eq!(analysis_state(&first.state).evidence.question, Some(0));
    let second = run(
        &agent,
        RunInput::prompt("q2")
            .with_history(first.messages.clone())
            .with_state(first.state.clone()),
    )
    .await
    .unwrap();
    let rag = EvidenceState::load(StateKind::Rag, &second.state["rag"]).unwrap();
    assert_eq!(rag.evidence.question, Some(2));
    assert_eq!(analysis_state(&second.state).evidence.question, Some(2));
    assert!(!analysis_state(&second.state).evidence.in_progress);
}

#[tokio::test]
async fn scenario_72_one_redirect_with_rag_and_analysis() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![
        Reply::tool_call("analysis_search", json!({"query": "solar"})),
        Reply::text("uncited"),
        Reply::text("still uncited"),
    ])
    .await;
    let agent = agent(
        &server,
        vec![
            Arc::new(RagCapability::new(kb.store.clone(), AppConfig::default())),
            Arc::new(analysis(&kb)),
            Arc::new(CitationPolicyCapability::new()),
        ],
    );
    let result = run(&agent, RunInput::prompt("q")).await.unwrap();
    let requests = server.requests();
    let last = requests.last().unwrap();
    let redirects = wire_messages(last)
        .iter()
        .filter(|m| m["role"] == "user" && m["content"].to_string().contains(REDIRECT_TAG))
        .count();
    assert_eq!(redirects, 1);
    assert_eq!(
        groundwork::capabilities::state::violations(&result.state),
        [0]
    );
}

#[tokio::test]
async fn scenario_92_domain_preamble_once_before_the_analysis_heading() {
    let kb = kb().await;
    let server = ScriptedServer::start(vec![Reply::text("hi")]).await;
    let preamble = "The corpus contains solar manuals.";
    let cap = analysis_with(&kb, |c| c.prompts.domain_preamble = preamble.into());
    run(&agent(&server, vec![Arc::new(cap)]), RunInput::prompt("hi"))
        .await
        .unwrap();
    let s = system_text(&server.requests()[0]);
    assert_eq!(s.matches(preamble).count(), 1);
    assert_eq!(s.matches("# Analysis").count(), 1);
    assert!(s.contains(&format!("{preamble}\n\n# Analysis\n")), "{s}");
}

#[tokio::test]
async fn scenario_93_analysis_from_spec() {
    let caps = capabilities_from_spec(&json!({"capabilities": [
        {"AnalysisCapability": {"db_path": "/tmp/kb.lancedb"}}
    ]}))
    .unwrap();
    assert_eq!(caps[0].id(), "haiku-rag-analysis");
    assert!(caps[0].defer_loading());
    let cap = AnalysisCapability::from_spec(&json!({"db_path": "/tmp/kb.lancedb"})).unwrap();
    assert_eq!(cap.db_path(), "/tmp/kb.lancedb");
    assert_eq!(cap.configured_request_limit(), Some(30));
    let cap = AnalysisCapability::from_spec(
        &json!({"request_limit": null, "defer_loading": false, "vision": true}),
    )
    .unwrap();
    assert_eq!(cap.configured_request_limit(), None);
    assert!(cap.vision_enabled());
    assert!(AnalysisCapability::from_spec(&json!({"sources": 1})).is_err());
    let err = capabilities_from_spec(
        &json!({"capabilities": ["AnalysisCapability", "AnalysisCapability"]}),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("haiku-rag-analysis") && err.contains("unique within a run"));
}

#[tokio::test]
async fn ask_registers_analysis_eagerly_alone_and_defers_both_together() {
    use groundwork::host::ask::{AskOptions, CapabilityChoice, build_agent};
    use groundwork::model::OpenAiModel;
    let kb = kb().await;
    let server = ScriptedServer::start(vec![Reply::text("one"), Reply::text("two")]).await;
    let model = Arc::new(OpenAiModel::new(test_config(&server.base_url())).unwrap());
    let alone = AskOptions {
        capabilities: vec![CapabilityChoice::Analysis],
        sandbox_worker: Some(WORKER.into()),
        ..AskOptions::default()
    };
    let agent = build_agent(
        model.clone(),
        kb.store.clone(),
        &AppConfig::default(),
        &alone,
    )
    .unwrap();
    run(&agent, RunInput::prompt("q")).await.unwrap();
    let both = AskOptions {
        capabilities: vec![CapabilityChoice::Rag, CapabilityChoice::Analysis],
        ..alone
    };
    let agent = build_agent(model, kb.store.clone(), &AppConfig::default(), &both).unwrap();
    run(&agent, RunInput::prompt("q")).await.unwrap();
    let requests = server.requests();
    let eager = tool_names(&requests[0]);
    assert!(
        eager.contains(&"analysis_execute_code".to_string())
            && !eager.contains(&"load_capability".to_string())
    );
    assert!(system_text(&requests[0]).contains("# Analysis"));
    assert_eq!(tool_names(&requests[1]), ["load_capability"]);
    let catalogue = system_text(&requests[1]);
    assert!(catalogue.contains("- haiku-rag: ") && catalogue.contains("- haiku-rag-analysis: "));
    assert!(!catalogue.contains("# Analysis"));
}
