//! Secrets by construction (issue 46): servers that echo the credentials they were sent
//! in their error bodies (the model, the embedder and the reranker), keys in the
//! environment and a password in a URL. Every command a user runs against them, and then
//! every byte Groundwork wrote (stdout, stderr, the log, session files, eval results and
//! reports), is searched for each secret.

use std::path::Path;
use std::process::Output;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use serde_json::{Value, json};

use crate::support::hashembed;
use crate::support::home::{Home, err};
use crate::support::scripted_server::{Reply, ScriptedServer};

const MODEL_KEY: &str = "sk-echo-model-KEY-1a2b3c";
const EMBED_KEY: &str = "ek-echo-embed-KEY-4d5e6f";
const RERANK_KEY: &str = "rr-echo-rerank-KEY-7a8b9c";
const URL_PASSWORD: &str = "urlpass-SECRET-0d1e2f";

/// base64 of `u:urlpass-SECRET-0d1e2f`, what an HTTP client sends for the URL's userinfo.
const URL_BASIC: &str = "dTp1cmxwYXNzLVNFQ1JFVC0wZDFlMmY=";

/// A server that answers every request with `status` and an error body quoting the
/// credentials it was sent, as some providers do ("Incorrect API key provided: …").
async fn echo_server(status: u16) -> (String, tokio::task::JoinHandle<()>) {
    let app = Router::new().fallback(move |headers: HeaderMap| async move {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        let message = format!(
            "Incorrect API key provided: {}; Authorization: {}; api-key: {}",
            header("authorization"),
            header("authorization"),
            header("api-key"),
        );
        let body = json!({"error": {"message": message, "type": "invalid_request_error"}});
        (
            StatusCode::from_u16(status).unwrap(),
            [("content-type", "application/json")],
            body.to_string(),
        )
            .into_response()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, task)
}

/// `url` with `u:URL_PASSWORD` as its userinfo.
fn with_password(url: &str) -> String {
    url.replacen("http://", &format!("http://u:{URL_PASSWORD}@"), 1)
}

/// Runs `args` in `home` with every key in the environment.
async fn run(home: &Home, args: &[&str]) -> Output {
    let mut cmd = home.command(args);
    cmd.env("OPENAI_API_KEY", MODEL_KEY)
        .env("GROUNDWORK_EMBED_API_KEY", EMBED_KEY)
        .env("GROUNDWORK_RERANKER_API_KEY", RERANK_KEY)
        .env("GROUNDWORK_LOG", "debug")
        .stdin(std::process::Stdio::null());
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// Fails naming the secret and where it was found.
fn assert_clean(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for secret in [MODEL_KEY, EMBED_KEY, RERANK_KEY, URL_PASSWORD, URL_BASIC] {
        assert!(
            !text.contains(secret),
            "{what} holds the secret {secret}:\n{text}"
        );
    }
}

fn assert_output_clean(what: &str, o: &Output) {
    assert_clean(&format!("{what}: stdout"), &o.stdout);
    assert_clean(&format!("{what}: stderr"), &o.stderr);
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[tokio::test]
async fn no_secret_reaches_any_output_or_file() {
    let home = Home::new().await;
    let (reranker, _r) = echo_server(401).await;
    let (failing_model, _m) = echo_server(401).await;
    let (failing_embedder, _e) = echo_server(500).await;
    let reranker = with_password(&reranker);
    let embed = hashembed::start().await;

    // search: the reranker's 401 is a warning on stderr, and the search goes on.
    let o = run(
        &home,
        &[
            "--embed-url",
            &embed.url,
            "--embed-model",
            hashembed::MODEL,
            "--reranker-url",
            &reranker,
            "search",
            "What is the lamp?",
        ],
    )
    .await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(err(&o).contains("warning: reranker"), "{}", err(&o));
    assert!(err(&o).contains("<redacted>"), "{}", err(&o));
    assert_output_clean("search", &o);

    // search --json, the embedder failing: an error line.
    let o = run(
        &home,
        &[
            "--embed-url",
            &with_password(&failing_embedder),
            "--embed-model",
            hashembed::MODEL,
            "search",
            "What is the lamp?",
            "--json",
        ],
    )
    .await;
    assert!(!o.status.success());
    assert!(err(&o).contains("<redacted>"), "{}", err(&o));
    assert_output_clean("search with a failing embedder", &o);

    // info names the reranker's URL, without its password.
    let o = run(&home, &["--reranker-url", &reranker, "info"]).await;
    assert!(o.status.success(), "{}", err(&o));
    assert_output_clean("info", &o);

    // ask --json with a session: the reranker's warning travels in the tool return's
    // metadata, printed and saved.
    let model = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "lamp"})),
        Reply::text("The lamp is electric."),
    ])
    .await;
    let url = model.base_url();
    let ask = |json: bool| {
        let mut args = vec![
            "--embed-url",
            embed.url.as_str(),
            "--embed-model",
            hashembed::MODEL,
            "--reranker-url",
            reranker.as_str(),
            "--model-url",
            url.as_str(),
            "ask",
            "--no-policy",
            "--session",
            "s.sqlite",
            "What is the lamp?",
        ];
        if json {
            args.push("--json");
        }
        args
    };
    let o = run(&home, &ask(true)).await;
    assert!(o.status.success(), "{}", err(&o));
    let printed: Value = serde_json::from_slice(&o.stdout).expect("ask --json prints JSON");
    assert!(printed.to_string().contains("<redacted>"), "{printed}");
    assert_output_clean("ask --json", &o);
    let saved =
        String::from_utf8_lossy(&std::fs::read(home.path("s.sqlite")).unwrap()).into_owned();
    assert!(
        saved.contains("<redacted>"),
        "the warning is kept, redacted"
    );
    // And the model saw what the session says it saw (the warning is in metadata only).
    let requests = model.requests();
    assert_clean(
        "the requests sent to the model",
        requests_text(&requests).as_bytes(),
    );

    // ask in text: the reranker's warning on stderr, as `search` prints it.
    model.push(Reply::tool_call("rag_search", json!({"query": "lamp"})));
    model.push(Reply::text("Still electric."));
    let o = run(&home, &ask(false)).await;
    assert!(o.status.success(), "{}", err(&o));
    let warning: Vec<&str> = err(&o)
        .lines()
        .filter(|l| l.starts_with("warning: reranker"))
        .map(|_| "")
        .collect();
    assert_eq!(warning.len(), 1, "one warning line: {}", err(&o));
    assert_output_clean("ask", &o);

    // inspect's text view of the request that carried the search shows the warning.
    let o = run(&home, &["inspect", "s.sqlite", "--request", "2"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("↳ warning: reranker"), "{text}");

    // inspect and replay of that session.
    for args in [
        vec!["inspect", "s.sqlite"],
        vec!["inspect", "s.sqlite", "--request", "2"],
        vec!["inspect", "s.sqlite", "--request", "2", "--json"],
    ] {
        let o = run(&home, &args).await;
        assert!(o.status.success(), "{args:?}: {}", err(&o));
        assert_output_clean(&format!("{args:?}"), &o);
    }

    // eval against a model that echoes its key: every question fails, and its error is
    // written into results.jsonl and the report.
    std::fs::write(
        home.path("set.jsonl"),
        "{\"id\": \"q1\", \"question\": \"What is the lamp?\"}\n",
    )
    .unwrap();
    let failing = with_password(&failing_model);
    let over = |rest: &[&'static str]| {
        let mut args = vec![
            "--embed-url".to_string(),
            embed.url.clone(),
            "--embed-model".into(),
            hashembed::MODEL.into(),
            "--model-url".into(),
            failing.clone(),
        ];
        args.extend(rest.iter().map(|a| a.to_string()));
        args
    };
    let o = run(
        &home,
        &over(&["eval", "set.jsonl", "--arm", "base:", "--out", "exp"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    )
    .await;
    assert_output_clean("eval", &o);
    let results = std::fs::read_to_string(home.path("exp/results.jsonl")).unwrap();
    assert!(results.contains("<redacted>"), "{results}");
    for line in results.lines() {
        serde_json::from_str::<Value>(line).expect("results.jsonl stays JSON lines");
    }

    // ask against the failing model: the error line.
    let o = run(
        &home,
        &over(&["ask", "What is the lamp?"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    )
    .await;
    assert!(!o.status.success());
    assert_output_clean("ask against a failing model", &o);

    // Every file Groundwork wrote: the log, sessions, results, reports.
    let all = files(home.dir.path());
    assert!(
        all.iter().any(|p| p.ends_with("groundwork.log")),
        "the log was written: {all:?}"
    );
    for path in all {
        let bytes = std::fs::read(&path).unwrap();
        assert_clean(&path.display().to_string(), &bytes);
    }
}

fn requests_text(requests: &[Value]) -> String {
    requests.iter().map(Value::to_string).collect()
}
