//! Rerankers (issue 15 part 2): search with `[search.reranker]` / `--reranker-url` against
//! the scripted `/rerank` server on 127.0.0.1, which reorders deterministically (the last
//! fused candidate first). Asserted: the candidates sent (`limit * 10`, the fused order,
//! their contents), `top_n`, the model and the bearer key; the final order and scores;
//! both scores in `groundwork search --json` and the text output; the agent's search
//! tool using the reranker, with the report in the tool return's metadata (never on the
//! wire) and the inspector's note; and the degradation path: a reranker that is down,
//! answers 500, answers something that is not a rerank result, or is too slow keeps the
//! fused order with a one-line warning, never a failed search or question.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use crate::support::hashembed::{self, EmbedServer};
use crate::support::kb::{agent, chunk, document, returns_of, run, store_at, text_output};
use crate::support::rerank_server::{Behaviour, RerankServer, closed_url, reverse_score};
use crate::support::scripted_server::{Reply, ScriptedServer};
use groundwork::capabilities::rag::RagCapability;
use groundwork::config::{ApiKey, AppConfig, RerankerConfig};
use groundwork::embed::{self, EmbedderSpec};
use groundwork::engine::agent::RunInput;
use groundwork::engine::messages::{ModelMessage, ModelRequestPart};
use groundwork::host::inspect::part_notes;
use groundwork::store::rerank::{FUSED_ORDER_NOTE, RerankReport};
use groundwork::store::search::SearchMode;
use groundwork::store::{SearchResult, Store};
use serde_json::{Value, json};

const QUERY: &str = "zebra grazing";
const MODEL: &str = "scripted-reranker";
const KEY: &str = "rk-test-SECRET-31337";

/// 30 one-chunk documents that all match the query, so a search for 2 results has 20
/// fused candidates to rerank.
async fn corpus(dir: &Path, embed: &EmbedServer) -> String {
    let docs: Vec<_> = (0..30)
        .map(|i| {
            let text = format!(
                "Field note {i:02}: the zebra herd was grazing near waterhole {}; {} foals.",
                i % 7,
                i % 5
            );
            (
                "note",
                document(
                    Some(&format!("file:///notes/{i:02}.md")),
                    Some(&format!("Note {i:02}")),
                    vec![],
                    vec![chunk(0, &[], &[], &text)],
                ),
            )
        })
        .collect();
    let path = dir.join("kb.lancedb");
    let _ = store_at(&path, &embed.url, docs).await;
    path.to_string_lossy().into_owned()
}

fn reranker(url: &str) -> RerankerConfig {
    RerankerConfig {
        model: MODEL.into(),
        api_key: Some(ApiKey::new(KEY)),
        ..RerankerConfig::new(url)
    }
}

/// The store at `uri` with the hashembed embedder and `reranker`.
async fn open(uri: &str, embed: &EmbedServer, reranker: Option<RerankerConfig>) -> Store {
    let mut store = Store::open(uri).await.unwrap();
    let spec = EmbedderSpec {
        provider: "openai".into(),
        name: hashembed::MODEL.into(),
        vector_dim: hashembed::DIM,
        base_url: Some(embed.url.clone()),
    };
    store
        .set_embedder(embed::build(&spec, &Default::default()).unwrap())
        .unwrap();
    let mut config = AppConfig::default().search;
    config.reranker = reranker;
    store.set_search_config(config);
    store
}

/// The fused order without a reranker: the first `n` results (a reranked search for
/// `n / 10` results fetches the same `n` candidates).
async fn fused(uri: &str, embed: &EmbedServer, n: usize) -> Vec<SearchResult> {
    open(uri, embed, None)
        .await
        .search(QUERY, Some(n), None)
        .await
        .unwrap()
}

fn ids(results: &[SearchResult]) -> Vec<String> {
    results
        .iter()
        .map(|r| r.chunk_id.clone().unwrap())
        .collect()
}

#[tokio::test]
async fn search_reranks_ten_times_the_limit_and_keeps_the_rerankers_order_and_scores() {
    let embed = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let uri = corpus(dir.path(), &embed).await;
    let plain = fused(&uri, &embed, 20).await;
    assert_eq!(plain.len(), 20);
    let server = RerankServer::start(Behaviour::Reverse).await;
    let store = open(&uri, &embed, Some(reranker(&server.url))).await;
    assert_eq!(
        store.reranker().map(|r| r.endpoint().to_string()),
        Some(format!("{}/rerank", server.url))
    );

    let (results, report) = store
        .search_reported(QUERY, Some(2), None, SearchMode::Hybrid)
        .await
        .unwrap();

    // One request: the 20 fused candidates in fused order, top_n 2, the model, the key.
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let body = &requests[0];
    assert_eq!(body["top_n"], json!(2));
    assert_eq!(body["model"], json!(MODEL));
    assert_eq!(body["query"], json!(QUERY));
    let contents: Vec<String> = plain.iter().map(|r| r.content.clone()).collect();
    assert_eq!(server.documents(0), contents);
    assert_eq!(server.authorizations(), [Some(format!("Bearer {KEY}"))]);

    // The reranker's order (the last candidates first) and its scores.
    assert_eq!(
        ids(&results),
        [ids(&plain)[19].clone(), ids(&plain)[18].clone()]
    );
    let scores: Vec<f64> = results.iter().map(|r| r.score).collect();
    assert_eq!(scores, [reverse_score(19, 20), reverse_score(18, 20)]);
    let report = report.expect("a report with a reranker");
    assert_eq!((report.candidates, report.warning.as_deref()), (20, None));
    assert_eq!(report.moved(), [(1, 20), (2, 19)]);
    let first = report.hit(&ids(&results)[0]).unwrap();
    assert_eq!(first.fused_score, plain[19].score);
    assert_eq!(first.rerank_score, Some(reverse_score(19, 20)));

    // The plain search API reranks too (the sandbox and every other caller use it).
    let again = store.search(QUERY, Some(3), None).await.unwrap();
    assert_eq!(server.documents(1).len(), 30);
    assert_eq!(again.len(), 3);
    // Without a reranker nothing is reported and the limit is fetched as it is.
    let (_, none) = open(&uri, &embed, None)
        .await
        .search_reported(QUERY, Some(2), None, SearchMode::Hybrid)
        .await
        .unwrap();
    assert_eq!(none, None);
}

#[tokio::test]
async fn a_failing_reranker_keeps_the_fused_order_with_a_one_line_warning() {
    let embed = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let uri = corpus(dir.path(), &embed).await;
    // The fused order of the 20 candidates, cut to the limit.
    let mut plain = fused(&uri, &embed, 20).await;
    plain.truncate(2);

    let down = closed_url();
    let status = RerankServer::start(Behaviour::Status(
        500,
        r#"{"error": {"code": 500, "message": "model overloaded"}}"#.into(),
    ))
    .await;
    let garbage = RerankServer::start(Behaviour::Raw("<html>proxy error</html>".into())).await;
    let wrong_index = RerankServer::start(Behaviour::Raw(
        r#"{"results": [{"index": 99, "relevance_score": 1.0}]}"#.into(),
    ))
    .await;
    let slow = RerankServer::start(Behaviour::Delay(Duration::from_secs(5))).await;
    let cases = [
        (down.clone(), "cannot connect"),
        (status.url.clone(), "HTTP 500: model overloaded"),
        (garbage.url.clone(), "the answer is not a rerank result"),
        (
            wrong_index.url.clone(),
            "the answer names document 99 of 20",
        ),
        (slow.url.clone(), "no answer within 1 s"),
    ];
    for (url, expected) in cases {
        let mut config = reranker(&url);
        config.timeout_secs = 1;
        let store = open(&uri, &embed, Some(config)).await;
        let started = std::time::Instant::now();
        let (results, report) = store
            .search_reported(QUERY, Some(2), None, SearchMode::Hybrid)
            .await
            .unwrap_or_else(|e| panic!("{url}: the search failed: {e}"));
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{url}: waited too long"
        );
        assert_eq!(ids(&results), ids(&plain), "{url}: not the fused order");
        let scores: Vec<f64> = results.iter().map(|r| r.score).collect();
        let fused_scores: Vec<f64> = plain.iter().map(|r| r.score).collect();
        assert_eq!(scores, fused_scores, "{url}");
        let report = report.unwrap();
        let warning = report.warning.clone().unwrap();
        assert!(
            warning.starts_with(&format!("reranker {url}/rerank: ")),
            "{warning}"
        );
        assert!(
            warning.contains(expected),
            "{expected:?} not in {warning:?}"
        );
        assert!(warning.ends_with(FUSED_ORDER_NOTE), "{warning}");
        assert!(
            !warning.contains('\n') && !warning.contains(KEY),
            "{warning}"
        );
        assert!(report.moved().is_empty());
        assert!(
            report.note().starts_with("warning: reranker "),
            "{}",
            report.note()
        );
    }
    // Each live server was asked once (the down one could not be).
    for s in [&status, &garbage, &wrong_index, &slow] {
        assert_eq!(s.requests().len(), 1);
    }
}

/// The stored tool returns of `tool` with their metadata.
fn stored_returns(messages: &[ModelMessage], tool: &str) -> Vec<(String, Option<Value>)> {
    let mut out = Vec::new();
    for m in messages {
        if let ModelMessage::Request(r) = m {
            for p in &r.parts {
                if let ModelRequestPart::ToolReturn(t) = p
                    && t.tool_name == tool
                {
                    out.push((t.content_text(), t.metadata.clone()));
                }
            }
        }
    }
    out
}

/// The inspector's notes of every message.
fn notes(messages: &[ModelMessage]) -> Vec<String> {
    messages.iter().flat_map(part_notes).flatten().collect()
}

#[tokio::test]
async fn the_agents_search_tool_reranks_and_the_inspector_shows_what_moved() {
    let embed = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let uri = corpus(dir.path(), &embed).await;
    let plain = fused(&uri, &embed, 20).await;
    let server = RerankServer::start(Behaviour::Reverse).await;
    let store = Arc::new(open(&uri, &embed, Some(reranker(&server.url))).await);
    let chat = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": QUERY, "limit": 2})),
        Reply::text("Zebras graze."),
    ])
    .await;
    let cap = RagCapability::new(store, AppConfig::default());
    let agent = agent(&chat, vec![Arc::new(cap)]);
    let result = run(&agent, RunInput::prompt("Where do zebras graze?"))
        .await
        .unwrap();
    assert_eq!(text_output(&result), "Zebras graze.");

    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.documents(0).len(), 20);
    // The model reads the reranked results, best first, and nothing of the report.
    let wire = &chat.requests()[1];
    let returned = returns_of(wire, "rag_search");
    let text = &returned[0];
    let best = text.find(&plain[19].content).expect("the reranked best");
    let second = text.find(&plain[18].content).expect("the reranked second");
    assert!(best < second, "{text}");
    assert!(!text.contains(&plain[0].content), "{text}");
    assert!(
        !wire.to_string().contains("fused_rank"),
        "the report reached the model"
    );

    // The report is kept in the tool return's metadata; the inspector's note names it.
    let stored = stored_returns(&result.messages, "rag_search");
    let report = RerankReport::from_metadata(stored[0].1.as_ref().unwrap()).unwrap();
    assert_eq!(report.moved(), [(1, 20), (2, 19)]);
    assert_eq!(
        notes(&result.messages),
        [format!(
            "reranked 20 candidates with {MODEL}: 2 of 2 results reordered \
             (#1 was fused #20, #2 was fused #19)"
        )]
    );
}

#[tokio::test]
async fn a_question_survives_a_failing_reranker_and_the_inspector_shows_the_warning() {
    let embed = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let uri = corpus(dir.path(), &embed).await;
    let plain = fused(&uri, &embed, 20).await;
    let server = RerankServer::start(Behaviour::Status(503, "warming up".into())).await;
    let store = Arc::new(open(&uri, &embed, Some(reranker(&server.url))).await);
    let chat = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": QUERY, "limit": 2})),
        Reply::text("Zebras graze."),
    ])
    .await;
    let agent = agent(
        &chat,
        vec![Arc::new(RagCapability::new(store, AppConfig::default()))],
    );
    let result = run(&agent, RunInput::prompt("q")).await.unwrap();
    assert_eq!(text_output(&result), "Zebras graze.");
    let text = &returns_of(&chat.requests()[1], "rag_search")[0];
    let first = text.find(&plain[0].content).expect("the fused best");
    let second = text.find(&plain[1].content).expect("the fused second");
    assert!(first < second, "{text}");
    assert_eq!(
        notes(&result.messages),
        [format!(
            "warning: reranker {}/rerank: HTTP 503: warming up; {FUSED_ORDER_NOTE}",
            server.url
        )]
    );
}

// ----- the command line -----------------------------------------------------------------

fn command(home: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
    cmd.args(args)
        .current_dir(home)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("GROUNDWORK_DISCOVER", "off")
        .env("GROUNDWORK_RERANKER_API_KEY", KEY)
        .env_remove("HAIKU_RAG_DB")
        .env_remove("GROUNDWORK_CONFIG")
        .env_remove("GROUNDWORK_RERANKER_URL")
        .env_remove("GROUNDWORK_RERANKER_MODEL")
        .env_remove("GROUNDWORK_EMBED_URL")
        .env_remove("GROUNDWORK_EMBED_MODEL");
    cmd
}

/// Runs `cmd` off the runtime (the servers it talks to live on it).
async fn output(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// A score printed as JSON and read back is the score (to the last bits of an f64).
fn assert_close(printed: &Value, score: f64) {
    let got = printed.as_f64().unwrap();
    assert!((got - score).abs() < 1e-12, "{got} != {score}");
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groundwork_search_shows_the_fused_and_the_reranked_score() {
    let embed = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let uri = corpus(dir.path(), &embed).await;
    let plain = fused(&uri, &embed, 20).await;
    let server = RerankServer::start(Behaviour::Reverse).await;
    let args = [
        "--db",
        &uri,
        "--reranker-url",
        &server.url,
        "--reranker-model",
        MODEL,
        "search",
        QUERY,
        "-l",
        "2",
        "--no-expand",
    ];
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let o = output(command(dir.path(), &json_args)).await;
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(!out.contains(KEY) && !err.contains(KEY));
    let body = &server.requests()[0];
    assert_eq!(
        (body["top_n"].clone(), body["model"].clone()),
        (json!(2), json!(MODEL))
    );
    assert_eq!(server.documents(0).len(), 20);
    assert_eq!(server.authorizations()[0], Some(format!("Bearer {KEY}")));
    let results: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(results.len(), 2);
    for (r, fused_rank) in results.iter().zip([20, 19]) {
        let plain = &plain[fused_rank - 1];
        assert_eq!(r["chunk_id"], json!(plain.chunk_id));
        assert_eq!(r["fused_rank"], json!(fused_rank));
        assert_close(&r["fused_score"], plain.score);
        assert_eq!(r["rerank_score"], json!(reverse_score(fused_rank - 1, 20)));
        assert_eq!(r["score"], r["rerank_score"]);
    }

    // `info` names the reranker in use.
    let o = output(command(
        dir.path(),
        &["--db", &uri, "--reranker-url", &server.url, "info"],
    ))
    .await;
    let info = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let line = format!(
        "reranker   default at {}/rerank (10x candidates)",
        server.url
    );
    assert!(info.contains(&line), "{line:?} not in\n{info}");

    let o = output(command(dir.path(), &args)).await;
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some(
            format!(
                "reranked 20 candidates with {MODEL}: 2 of 2 results reordered \
                 (#1 was fused #20, #2 was fused #19)"
            )
            .as_str()
        )
    );
    let expected = format!(
        "score 1.0000 (reranked; fused {:.4}, fused #20)  file:///notes/",
        plain[19].score
    );
    assert!(out.contains(&expected), "{expected:?} not in\n{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groundwork_search_warns_and_keeps_the_fused_order_when_the_configured_reranker_fails() {
    let embed = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let uri = corpus(dir.path(), &embed).await;
    let plain = fused(&uri, &embed, 20).await;
    let server = RerankServer::start(Behaviour::Status(500, "out of memory".into())).await;
    let config = dir.path().join("config/groundwork/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        format!(
            "[search.reranker]\nurl = \"{}\"\nmodel = \"{MODEL}\"\ntimeout_secs = 5\n",
            server.url
        ),
    )
    .unwrap();
    let o = output(command(
        dir.path(),
        &[
            "--db",
            &uri,
            "search",
            QUERY,
            "-l",
            "2",
            "--no-expand",
            "--json",
        ],
    ))
    .await;
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    let warning = format!(
        "warning: reranker {}/rerank: HTTP 500: out of memory; {FUSED_ORDER_NOTE}",
        server.url
    );
    assert_eq!(err.lines().collect::<Vec<_>>(), [warning.as_str()], "{err}");
    assert_eq!(server.requests().len(), 1);
    let results: Vec<Value> = serde_json::from_str(&out).unwrap();
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r["chunk_id"], json!(plain[i].chunk_id));
        assert_eq!(r["fused_rank"], json!(i + 1));
        assert_eq!(r["rerank_score"], Value::Null);
        assert_close(&r["score"], plain[i].score);
    }
    let log = std::fs::read_to_string(dir.path().join("data/groundwork/logs/groundwork.log"))
        .unwrap_or_default();
    assert!(log.contains(FUSED_ORDER_NOTE), "not logged:\n{log}");
}

// ----- the workbench --------------------------------------------------------------------

#[tokio::test]
async fn the_workbench_inspector_marks_reordered_results_and_the_status_bar_warns() {
    use crate::support::workbench::{ask, new_app, pane, redactions, screen, services, status_bar};
    use groundwork::tui::Runtime;
    use groundwork::tui::app::Pane;

    let embed = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let uri = corpus(dir.path(), &embed).await;
    // Search, answer without citing, be redirected by the citation policy, answer again.
    let answers = || {
        vec![
            Reply::tool_call("rag_search", json!({"query": QUERY, "limit": 2})),
            Reply::text("Zebras graze."),
            Reply::text("Zebras graze, uncited."),
        ]
    };

    // A working reranker: the search's tool return carries the note.
    let server = RerankServer::start(Behaviour::Reverse).await;
    let store = Arc::new(open(&uri, &embed, Some(reranker(&server.url))).await);
    let chat = ScriptedServer::start(answers()).await;
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&store, &chat.base_url()));
    screen(&mut app, 160, 48);
    ask(&mut rt, &mut app, "Zebras?").await;
    assert_eq!(app.request_count(), 3, "{:?}", app.error);
    app.inspector.selected = Some(1);
    let s = pane(&mut app, Pane::Inspector, 160, 48);
    // Under the tool return's badge, wrapped to the column.
    let note = format!(
        "↻ reranked 20 candidates with {MODEL}: 2 of 2 results reordered (#1 was fused #20, \
         #2 was fused #19)"
    );
    let shown: String = s
        .lines()
        .map(|l| l.trim_matches('│').split('│').next().unwrap_or("").trim())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(shown.contains(&note), "{s}");
    redactions().bind(|| insta::assert_snapshot!("inspector_reranked_search", s));
    assert!(!status_bar(&mut app, 160).contains("⚠"));

    // A failing one: the answer still comes, the status bar and the inspector warn.
    let down = closed_url();
    let store = Arc::new(open(&uri, &embed, Some(reranker(&down))).await);
    let chat = ScriptedServer::start(answers()).await;
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&store, &chat.base_url()));
    screen(&mut app, 160, 48);
    ask(&mut rt, &mut app, "Zebras?").await;
    assert_eq!(app.request_count(), 3, "{:?}", app.error);
    assert_eq!(app.error, None);
    let bar = status_bar(&mut app, 320);
    assert!(
        bar.contains(&format!("│ ⚠ reranker {down}/rerank: cannot connect")),
        "{bar}"
    );
    assert!(bar.trim_end().ends_with(FUSED_ORDER_NOTE), "{bar}");
    // Cut, not dropped, on a narrower bar.
    assert!(status_bar(&mut app, 160).contains("│ ⚠ reranker"));
    app.inspector.selected = Some(1);
    let s = pane(&mut app, Pane::Inspector, 160, 48);
    let shown: String = s
        .lines()
        .map(|l| l.trim_matches('│').split('│').next().unwrap_or("").trim())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        shown.contains(&format!(
            "↻ warning: reranker {down}/rerank: cannot connect"
        )),
        "{s}"
    );
}

/// The explorer's search (F6, `/`) goes through the reranker too: its status line carries
/// the reranker's note and the selected result both scores; a reranker that is down leaves
/// the fused order and says so there.
#[tokio::test]
async fn the_explorer_search_shows_the_reranked_and_the_fused_score() {
    use crate::support::workbench::{new_app, press, screen, services, type_text};
    use crossterm::event::KeyCode;
    use groundwork::tui::Runtime;
    use groundwork::tui::app::{App, ExplorerView};

    let embed = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let uri = corpus(dir.path(), &embed).await;
    let searched = |a: &App| {
        matches!(&a.explorer.as_ref().unwrap().view,
            ExplorerView::Search(s) if s.searched.is_some() && !s.running)
    };
    let search = async |rt: &mut Runtime, app: &mut App| {
        press(rt, app, KeyCode::F(6));
        press(rt, app, KeyCode::Char('/'));
        type_text(rt, app, QUERY);
        press(rt, app, KeyCode::Enter);
        assert!(rt.until(app, Duration::from_secs(20), searched).await);
    };

    let server = RerankServer::start(Behaviour::Reverse).await;
    let store = Arc::new(open(&uri, &embed, Some(reranker(&server.url))).await);
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&store, "http://127.0.0.1:9/v1"));
    search(&mut rt, &mut app).await;
    assert_eq!(server.requests().len(), 1, "one rerank request");
    let ExplorerView::Search(s) = &app.explorer.as_ref().unwrap().view else {
        unreachable!()
    };
    let report = s.rerank.clone().expect("the reranker was asked");
    assert_eq!(report.warning, None);
    let first = s.results.as_ref().unwrap()[0].clone();
    let hit = report
        .hit(first.id())
        .expect("the first result was reranked")
        .clone();
    assert_ne!(
        hit.fused_rank, 1,
        "the scripted reranker reverses the fused order"
    );
    let shown = screen(&mut app, 160, 48);
    assert!(
        shown.contains(&format!(
            "reranked {} candidates with {MODEL}",
            report.candidates
        )),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "reranked {:.4} · fused {:.4} (fused #{})",
            hit.rerank_score.unwrap(),
            hit.fused_score,
            hit.fused_rank
        )),
        "{shown}"
    );

    // Down: the search still answers, in the fused order, with the warning.
    let down = closed_url();
    let store = Arc::new(open(&uri, &embed, Some(reranker(&down))).await);
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&store, "http://127.0.0.1:9/v1"));
    search(&mut rt, &mut app).await;
    let ExplorerView::Search(s) = &app.explorer.as_ref().unwrap().view else {
        unreachable!()
    };
    assert!(!s.results.as_ref().unwrap().is_empty());
    let report = s.rerank.clone().expect("the reranker was asked");
    assert!(report.warning.is_some());
    let shown = screen(&mut app, 160, 48);
    assert!(shown.contains("warning: reranker"), "{shown}");
}
