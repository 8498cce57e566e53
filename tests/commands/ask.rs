//! `groundwork ask` end to end: the real binary, the real async-openai client against the
//! scripted OpenAI-compatible server, a real LanceDB store; the session it writes is read
//! back by `inspect` and by pydantic-ai itself, and a failed question commits nothing.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::hashembed;
use crate::support::scripted_server::{Reply, ScriptedServer, system_text, tool_names};
use serde_json::{Value, json};

struct Home(tempfile::TempDir);

impl Home {
    async fn run(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
        cmd.args(args)
            .env("HOME", self.0.path())
            .env("XDG_DATA_HOME", self.0.path().join("data"))
            .env("XDG_CONFIG_HOME", self.0.path().join("config"))
            .env("OPENAI_API_KEY", "sk-ask-test-SECRET")
            // Hermetic: a model server running on this machine is never found.
            .env("GROUNDWORK_DISCOVER", "off")
            .env_remove("HAIKU_RAG_DB")
            .env_remove("GROUNDWORK_MODEL_URL")
            .env_remove("GROUNDWORK_MODEL")
            .env_remove("GROUNDWORK_EMBED_URL")
            .env_remove("GROUNDWORK_EMBED_MODEL");
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap()
    }
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[tokio::test]
async fn ask_answers_cites_saves_and_continues() {
    let embed = hashembed::start().await;
    let home = Home(tempfile::tempdir().unwrap());
    let db = home.0.path().join("kb.lancedb");
    let db = db.to_str().unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ingest/sample.md");
    let o = home
        .run(&[
            "--db",
            db,
            "ingest",
            sample.to_str().unwrap(),
            "--embed-url",
            &embed.url,
            "--embed-model",
            hashembed::MODEL,
        ])
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let o = home
        .run(&[
            "--db",
            db,
            "search",
            "fires on hills",
            "--json",
            "--limit",
            "1",
        ])
        .await;
    let hits: Value = serde_json::from_str(&out(&o)).unwrap();
    let chunk = hits[0]["chunk_id"].as_str().unwrap().to_string();

    // Question 1: search, cite, answer.
    let model = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "fires on hills"})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [chunk]})),
        Reply::text("The first towers were fires on hills."),
    ])
    .await;
    let session = home.0.path().join("s.sqlite");
    let session = session.to_str().unwrap();
    let url = model.base_url();
    let ask = |q: &'static str| {
        vec![
            "--db".to_string(),
            db.to_string(),
            "--session".into(),
            session.to_string(),
            "--model-url".into(),
            url.clone(),
            "--model".into(),
            "scripted".into(),
            "ask".into(),
            q.into(),
            "--json".into(),
        ]
    };
    let args = ask("How did lighthouses start?");
    let o = home
        .run(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let v: Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["answer"], "The first towers were fires on hills.");
    assert_eq!(v["status"], "grounded");
    assert_eq!(v["violation"], false);
    assert_eq!(v["question"], 0);
    assert_eq!(v["citations"][0]["chunk_id"], chunk.as_str());
    assert_eq!(v["citations"][0]["index"], 1);
    assert_eq!(v["requests"].as_array().unwrap().len(), 3);
    // The RAG capability is eager for a single capability: its tools on the first request,
    // the host preamble and the RAG instructions in the system text.
    let first = &model.requests()[0];
    assert!(tool_names(first).contains(&"rag_search".to_string()));
    assert!(system_text(first).contains("# RAG"));

    // The session holds the question; the key is nowhere in it.
    assert!(!String::from_utf8_lossy(&std::fs::read(session).unwrap()).contains("SECRET"));
    let text = out(&home.run(&["export", session]).await);
    assert!(!text.contains("SECRET"));
    let saved: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(saved["messages"].as_array().unwrap().len(), 6);
    assert_eq!(saved["state"]["rag"]["evidence"]["in_progress"], false);
    assert_eq!(saved["state"]["citation_policy"]["violations"], json!([]));

    // pydantic-ai reads it. Never a silent pass: .ci/setup-tests makes the checker's venv.
    let py = home_python();
    assert!(
        py.exists(),
        "the pydantic-ai check needs {}: run .ci/setup-tests",
        py.display()
    );
    let checker =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pydantic_ai/check_session.py");
    // Its JSON export, which is what other programs read.
    let exported = home.0.path().join("exported.json");
    let o = home
        .run(&["export", session, "--out", exported.to_str().unwrap()])
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let o = Command::new(py)
        .arg(checker)
        .arg(&exported)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));

    // inspect shows its three requests.
    let o = home.run(&["inspect", session]).await;
    assert!(out(&o).contains("3 request(s)"), "{}", out(&o));

    // Question 2 continues the session: identity 6, an empty cite makes it ungrounded.
    model.push(Reply::tool_call("rag_cite", json!({"chunk_ids": []})));
    model.push(Reply::text("I could not find that in the knowledge base."));
    let args = ask("Who painted the towers?");
    let o = home
        .run(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let v: Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["question"], 6);
    assert_eq!(v["status"], "ungrounded");
    let saved: Value = serde_json::from_str(&out(&home.run(&["export", session]).await)).unwrap();
    assert_eq!(saved["messages"].as_array().unwrap().len(), 10);

    // Question 3 in text: its sources under the answer, numbered as its marker and named
    // and located as every face names them (title, else URI; the innermost section).
    model.push(Reply::tool_call(
        "rag_search",
        json!({"query": "fires on hills"}),
    ));
    model.push(Reply::tool_call("rag_cite", json!({"chunk_ids": [chunk]})));
    model.push(Reply::text("Fires on hills [1]."));
    let mut args = ask("How did they start, again?");
    args.pop();
    let o = home
        .run(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let title = hits[0]["document_title"]
        .as_str()
        .filter(|t| !t.trim().is_empty())
        .or(hits[0]["document_uri"].as_str())
        .unwrap();
    let section = hits[0]["headings"]
        .as_array()
        .and_then(|h| h.last())
        .and_then(Value::as_str)
        .map(|s| format!(", §{s}"))
        .unwrap_or_default();
    assert_eq!(
        out(&o),
        format!("Fires on hills [1].\n\nSources:\n  [1] {title}{section}\n")
    );

    // A failed question (endpoint down) exits non-zero and commits nothing.
    let before = groundwork::session::Session::load(Path::new(session)).unwrap();
    let o = home
        .run(&[
            "--db",
            db,
            "--session",
            session,
            "--model-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "ask",
            "Anything?",
        ])
        .await;
    assert!(!o.status.success());
    assert!(
        err(&o).contains("cannot reach model endpoint"),
        "{}",
        err(&o)
    );
    assert_eq!(
        groundwork::session::Session::load(Path::new(session)).unwrap(),
        before
    );
}

/// `groundwork ask --capability analysis` over the demo corpus: the scripted model runs a
/// program that counts documents in the sandbox worker, and the answer uses the number the
/// program printed.
#[tokio::test]
async fn ask_analysis_counts_over_the_demo_corpus() {
    let embed = hashembed::start().await;
    let home = Home(tempfile::tempdir().unwrap());
    let db = home.0.path().join("demo.lancedb");
    let db = db.to_str().unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo");
    let o = home
        .run(&[
            "--db",
            db,
            "ingest",
            demo.to_str().unwrap(),
            "--embed-url",
            &embed.url,
            "--embed-model",
            hashembed::MODEL,
        ])
        .await;
    assert!(o.status.success(), "{}", err(&o));

    // The expected count, computed outside the sandbox from the store itself.
    let needle = "state of charge";
    let mut store = groundwork::store::Store::open(db).await.unwrap();
    store
        .set_embedder(groundwork::embed::build(store.embedder_spec(), &Default::default()).unwrap())
        .unwrap();
    let docs = store.list_documents(None).await.unwrap();
    assert_eq!(docs.len(), 5);
    let mut expected = 0;
    for d in &docs {
        let text = store
            .document_content(&d.id)
            .await
            .unwrap()
            .unwrap_or_default();
        if text.to_lowercase().contains(needle) {
            expected += 1;
        }
    }
    assert!(
        expected > 0 && expected < 5,
        "a count that says something: {expected}"
    );

    let program = format!(
        "from pathlib import Path\n\
         docs = await list_documents()\n\
         n = 0\n\
         for d in docs:\n    \
             text = Path('/documents/' + d['id'] + '/content.txt').read_text()\n    \
             if '{needle}' in text.lower():\n        \
                 n += 1\n\
         print(n)"
    );
    let answer = format!("{expected} of the 5 documents mention the state of charge.");
    let model = ScriptedServer::start(vec![
        Reply::tool_call("analysis_execute_code", json!({"code": program})),
        Reply::tool_call("analysis_cite", json!({"chunk_ids": []})),
        Reply::text(answer.clone()),
    ])
    .await;
    let session = home.0.path().join("s.sqlite");
    let session = session.to_str().unwrap();
    let o = home
        .run(&[
            "--db",
            db,
            "--session",
            session,
            "--model-url",
            &model.base_url(),
            "--model",
            "scripted",
            "ask",
            "How many documents mention the state of charge?",
            "--capability",
            "analysis",
            "--json",
        ])
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let v: Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["answer"], answer.as_str());
    assert_eq!(v["status"], "ungrounded");
    assert_eq!(v["violation"], false);

    // The analysis capability is eager on its own; the program's output reached the model.
    let requests = model.requests();
    assert!(tool_names(&requests[0]).contains(&"analysis_execute_code".to_string()));
    assert!(system_text(&requests[0]).contains("# Analysis"));
    let printed = crate::support::scripted_server::wire_messages(&requests[1])
        .into_iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .clone();
    assert_eq!(printed, json!(format!("{expected}\n")));

    // The execution is logged in the saved session state.
    let saved: Value = serde_json::from_str(&out(&home.run(&["export", session]).await)).unwrap();
    let executions = &saved["state"]["analysis"]["executions"];
    assert_eq!(executions.as_array().unwrap().len(), 1);
    assert_eq!(executions[0]["success"], true);
    assert_eq!(executions[0]["stdout"], format!("{expected}\n"));
    assert_eq!(saved["state"]["analysis"]["evidence"]["in_progress"], false);
}

/// The python of the pydantic-ai checker's venv, which `.ci/setup-tests` makes.
fn home_python() -> std::path::PathBuf {
    Path::new(&std::env::var("HOME").unwrap_or_default())
        .join(".cache/groundwork-pai-venv/bin/python")
}
