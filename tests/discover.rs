//! Finding a model when none is configured: the usual local servers are asked for
//! `/v1/models`; the first that answers is used and named; when none answers, `ask` says
//! in one line how to configure one.

mod support;

use std::process::{Command, Output};
use std::time::Duration;

use groundwork::engine::config::ModelOverrides;
use groundwork::engine::discover::{ModelChoice, choose_model, discover};
use serde_json::json;
use support::scripted_server::{Reply, ScriptedServer};
use support::workbench::{demo_kb, hit};

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
