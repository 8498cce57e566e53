//! Finding a model when none is configured: the usual local servers are asked for
//! `/v1/models`; the first that answers is used and named; when none answers, `ask` says
//! in one line how to configure one, naming the servers it asked. A server that is still
//! loading its model (HTTP 503, as llama.cpp answers before `/health` is ok) is waited for.

use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::scripted_server::{Reply, ScriptedServer};
use crate::support::workbench::{demo_kb, hit};
use groundwork::config::ModelOverrides;
use groundwork::engine::discover::{
    Discovery, ModelChoice, choose_model, choose_model_with, discover, discover_waiting,
};
use serde_json::json;

fn closed_port() -> String {
    // Bind and drop: nothing listens there afterwards.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}/v1", l.local_addr().unwrap())
}

#[tokio::test]
async fn the_first_server_that_answers_wins_and_lists_its_models() {
    let server = ScriptedServer::start(vec![]).await;
    let candidates = vec![
        ("Down".to_string(), closed_port()),
        ("Scripted".to_string(), server.base_url()),
    ];
    let found = discover(&candidates, Duration::from_millis(500))
        .await
        .unwrap();
    assert_eq!(found.server, "Scripted");
    assert_eq!(found.base_url, server.base_url());
    assert_eq!(found.models, ["scripted-model"]);
    let none = discover(&candidates[..1], Duration::from_millis(300)).await;
    assert!(none.is_none());
}

#[tokio::test]
async fn configured_beats_discovered_and_nothing_gives_the_hint() {
    let server = ScriptedServer::start(vec![]).await;
    let candidates = vec![("Scripted".to_string(), server.base_url())];
    let mut env = std::collections::HashMap::new();
    let none = ModelOverrides::default();
    // Nothing configured: discovered, with the server's first model.
    match choose_model(None, &env, &none, &candidates).await.unwrap() {
        ModelChoice::Discovered(c, f) => {
            assert_eq!(c.base_url, server.base_url());
            assert_eq!(c.model, "scripted-model");
            assert_eq!(f.server, "Scripted");
        }
        other => panic!("expected discovery, got {other:?}"),
    }
    // A configured endpoint is used as is, without probing.
    env.insert(
        "GROUNDWORK_MODEL_URL".to_string(),
        "http://elsewhere/v1".to_string(),
    );
    assert!(matches!(
        choose_model(None, &env, &none, &candidates).await.unwrap(),
        ModelChoice::Configured(c) if c.base_url == "http://elsewhere/v1"
    ));
    // Nothing answers: the hint.
    env.clear();
    let down = vec![("Down".to_string(), closed_port())];
    match choose_model(None, &env, &none, &down).await.unwrap() {
        ModelChoice::None(hint) => assert!(hint.contains("GROUNDWORK_MODEL_URL=")),
        other => panic!("expected none, got {other:?}"),
    }
}

/// A server that answers `GET /v1/models` like llama-server while it loads: HTTP 503
/// `{"error":{"code":503,"message":"Loading model",...}}` for the first `loading_for`
/// requests, then its model list. Counts the requests.
struct LoadingServer {
    addr: std::net::SocketAddr,
    hits: Arc<AtomicUsize>,
}

impl LoadingServer {
    async fn start(loading_for: usize) -> Self {
        use axum::http::StatusCode;
        use axum::response::IntoResponse;
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        let app = axum::Router::new().route(
            "/v1/models",
            axum::routing::get(move || {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    if n < loading_for {
                        (
                            StatusCode::SERVICE_UNAVAILABLE,
                            [("content-type", "application/json")],
                            r#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#,
                        )
                            .into_response()
                    } else {
                        axum::Json(json!({"object": "list", "data": [{"id": "smol", "object": "model"}]}))
                            .into_response()
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        LoadingServer { addr, hits }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

#[tokio::test]
async fn a_loading_server_is_waited_for_and_then_used() {
    let server = LoadingServer::start(3).await;
    let candidates = vec![
        ("Down".to_string(), closed_port()),
        ("llama.cpp".to_string(), server.base_url()),
    ];
    let notes = std::sync::Mutex::new(Vec::<String>::new());
    let on_wait = |n: &str| notes.lock().unwrap().push(n.to_string());
    let env = std::collections::HashMap::from([(
        "GROUNDWORK_DISCOVER_WAIT".to_string(),
        "20".to_string(),
    )]);
    match choose_model_with(
        None,
        &env,
        &ModelOverrides::default(),
        &candidates,
        &on_wait,
    )
    .await
    .unwrap()
    {
        ModelChoice::Discovered(c, f) => {
            assert_eq!(c.base_url, server.base_url());
            assert_eq!(c.model, "smol");
            assert_eq!(f.server, "llama.cpp");
        }
        other => panic!("expected the loading server once ready, got {other:?}"),
    }
    // Three 503s, then the list: asked exactly four times.
    assert_eq!(server.hits(), 4);
    let notes = notes.into_inner().unwrap();
    assert_eq!(notes.len(), 1, "told once: {notes:?}");
    let port = server.addr.port();
    assert_eq!(
        notes[0],
        format!("llama.cpp on 127.0.0.1:{port} is loading the model; waiting up to 20 s")
    );
}

#[tokio::test]
async fn a_server_still_loading_after_the_wait_is_named_as_loading() {
    let server = LoadingServer::start(usize::MAX).await;
    let candidates = vec![("llama.cpp".to_string(), server.base_url())];
    let got = discover_waiting(
        &candidates,
        Duration::from_millis(400),
        Duration::from_millis(600),
        &|_| {},
    )
    .await;
    match got {
        Discovery::Loading(l) => {
            assert_eq!(l.len(), 1);
            assert_eq!(l[0].message, "Loading model");
            assert_eq!(l[0].base_url, server.base_url());
        }
        other => panic!("expected loading, got {other:?}"),
    }
    assert!(server.hits() >= 2, "asked again while waiting");
    // Without waiting, a loading server is not taken for a ready one.
    assert!(
        discover(&candidates, Duration::from_millis(400))
            .await
            .is_none()
    );
    // A ready server elsewhere wins at once over one that is loading.
    let ready = ScriptedServer::start(vec![]).await;
    let both = vec![
        ("llama.cpp".to_string(), server.base_url()),
        ("Scripted".to_string(), ready.base_url()),
    ];
    let before = server.hits();
    match discover_waiting(
        &both,
        Duration::from_millis(400),
        Duration::from_secs(30),
        &|_| {},
    )
    .await
    {
        Discovery::Found(f) => assert_eq!(f.server, "Scripted"),
        other => panic!("expected the ready server, got {other:?}"),
    }
    assert_eq!(server.hits(), before + 1, "no waiting when one is ready");
}

#[tokio::test]
async fn ask_says_which_server_is_loading() {
    let server = LoadingServer::start(usize::MAX).await;
    let home = tempfile::tempdir().unwrap();
    let (url, h) = (server.base_url(), home.path().to_path_buf());
    let o = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_groundwork"))
            .args(["--db", &h.join("kb").to_string_lossy(), "ask", "Anyone?"])
            .env("HOME", &h)
            .env("XDG_DATA_HOME", h.join("data"))
            .env("XDG_CONFIG_HOME", h.join("config"))
            .env("GROUNDWORK_DISCOVER", &url)
            .env("GROUNDWORK_DISCOVER_WAIT", "0.5")
            .env_remove("GROUNDWORK_MODEL_URL")
            .env_remove("GROUNDWORK_MODEL")
            .env_remove("HAIKU_RAG_DB")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{stderr}");
    let bare = server.base_url().trim_start_matches("http://").to_string();
    let last = stderr.trim().lines().last().unwrap_or("");
    assert!(
        last.contains(&format!(
            "{bare} is loading the model (still HTTP 503 \"Loading model\" after 0.5 s)"
        )),
        "{stderr}"
    );
    assert!(
        last.contains("GROUNDWORK_DISCOVER_WAIT=SECONDS"),
        "{stderr}"
    );
    // The wait was announced once, before the error.
    assert_eq!(
        stderr
            .matches("is loading the model; waiting up to")
            .count(),
        1,
        "{stderr}"
    );
}

#[tokio::test]
async fn the_no_model_message_names_the_servers_probed() {
    let (a, b) = (closed_port(), closed_port());
    let home = tempfile::tempdir().unwrap();
    let (list, h) = (format!("{a},{b}"), home.path().to_path_buf());
    let o = tokio::task::spawn_blocking(move || {
        run(
            &h,
            &["--db", &h.join("kb").to_string_lossy(), "ask", "Q?"],
            &list,
        )
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    let strip = |u: &str| u.trim_start_matches("http://").to_string();
    assert!(
        stderr.contains(&format!("none found at {}, {}.", strip(&a), strip(&b))),
        "{stderr}"
    );
    for default in ["11434", ":8080", ":1234", ":8000"] {
        assert!(
            !stderr.contains(default),
            "default {default} named: {stderr}"
        );
    }
}

fn run(home: &std::path::Path, args: &[&str], discover: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_groundwork"))
        .args(args)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("GROUNDWORK_DISCOVER", discover)
        .env_remove("GROUNDWORK_MODEL_URL")
        .env_remove("GROUNDWORK_MODEL")
        .env_remove("HAIKU_RAG_DB")
        .output()
        .unwrap()
}

#[tokio::test]
async fn ask_uses_a_discovered_server_or_explains_how_to_configure_one() {
    let kb = demo_kb().await;
    let chunk = hit(&kb.store, "battery", |_| true).await.chunk_id.unwrap();
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "battery"})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [chunk]})),
        Reply::text("Found it."),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let url = server.base_url();
    let (db, h) = (kb.db.clone(), home.path().to_path_buf());
    let o = tokio::task::spawn_blocking(move || {
        run(
            &h,
            &["--db", &db, "ask", "Batteries?"],
            &format!("{},{url}", closed_port()),
        )
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("Found it."));
    assert!(stderr.contains("using scripted-model at"), "{stderr}");

    let (db, h) = (kb.db.clone(), home.path().to_path_buf());
    let o = tokio::task::spawn_blocking(move || run(&h, &["--db", &db, "ask", "Anyone?"], "off"))
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("GROUNDWORK_MODEL_URL=http://HOST:PORT/v1"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
}
