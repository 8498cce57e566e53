//! The model client against servers that misbehave the way real ones do (issue 14):
//! llama.cpp's error bodies, broken tool-call arguments, Retry-After, idle and total
//! timeouts, streams cut or reset mid-answer, a server that never answers, TLS to a
//! plain-HTTP port, `max_tokens` and answers cut off by it, oversized answers. The real
//! async-openai client talks to scripted servers on 127.0.0.1.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::caps::TestCap;
use crate::support::scripted_server::{
    Reply, ScriptedServer, closing_listener, silent_listener, wire_messages,
};
use crate::support::{agent_for, drain, events, test_config};
use groundwork::config::ModelConfig;
use groundwork::engine::agent::{RunError, RunInput, RunOutput, RunResult};
use groundwork::engine::cancel::CancelToken;
use groundwork::engine::capability::ToolOutcome;
use groundwork::engine::chat::ModelError;
use groundwork::engine::events::CoreEvent;
use serde_json::{Value, json};

async fn run(config: ModelConfig) -> Result<RunResult, RunError> {
    agent_for(config)
        .build()
        .unwrap()
        .run(RunInput::prompt("hi"), None, CancelToken::new())
        .await
}

async fn fail(config: ModelConfig) -> ModelError {
    match run(config).await {
        Err(RunError::Model(e)) => e,
        other => panic!("expected a model error, got {other:?}"),
    }
}

// ---- item 1: error bodies ----

#[tokio::test]
async fn llama_cpp_error_bodies_read_like_the_server() {
    let overflow = r#"{"error":{"code":400,"message":"request (15254 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":15254,"n_ctx":8192}}"#;
    let not_found = r#"{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}"#;
    let server = ScriptedServer::start(vec![
        Reply::status_body(400, overflow),
        Reply::status_body(404, not_found),
        Reply::status_body(404, r#"{"error":"model 'qwen' not found"}"#),
        Reply::status_body(
            422,
            r#"{"detail":[{"loc":["body","messages"],"msg":"field required"}]}"#,
        ),
        Reply::status_body(404, "404 page not found\n"),
    ])
    .await;
    let config = test_config(&server.base_url());
    let url = server.base_url();
    let e = fail(config.clone()).await.to_string();
    assert_eq!(
        e,
        format!(
            "model endpoint {url} returned HTTP 400: request (15254 tokens) exceeds the available context size (8192 tokens), try increasing it"
        )
    );
    let e = fail(config.clone()).await;
    assert!(matches!(e, ModelError::Http { status: 404, .. }), "{e}");
    assert!(
        e.to_string().ends_with("returned HTTP 404: File Not Found"),
        "{e}"
    );
    let e = fail(config.clone()).await.to_string();
    assert!(e.ends_with("HTTP 404: model 'qwen' not found"), "{e}");
    let e = fail(config.clone()).await.to_string();
    assert!(e.ends_with("HTTP 422: field required"), "{e}");
    let e = fail(config).await.to_string();
    assert!(e.ends_with("HTTP 404: 404 page not found"), "{e}");
    // None of them was retried: each consumed one scripted reply.
    assert_eq!(server.requests().len(), 5);
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn a_500_that_will_repeat_is_not_retried() {
    let server = ScriptedServer::start(vec![
        Reply::status_body(
            500,
            r#"{"error":{"code":500,"message":"Failed to parse tool call arguments as JSON","type":"server_error"}}"#,
        ),
        Reply::text("never reached"),
    ])
    .await;
    let e = fail(test_config(&server.base_url())).await.to_string();
    assert!(
        e.ends_with("HTTP 500: Failed to parse tool call arguments as JSON"),
        "{e}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn an_error_event_inside_a_stream_is_the_servers_error() {
    let server = ScriptedServer::start(vec![Reply::sse_raw(vec![
        json!({"error": {"code": 400, "message": "tool schema rejected", "type": "invalid_request_error"}})
            .to_string(),
    ])])
    .await;
    let e = fail(test_config(&server.base_url())).await;
    assert!(matches!(e, ModelError::Http { status: 400, .. }), "{e}");
    assert!(
        e.to_string().ends_with("HTTP 400: tool schema rejected"),
        "{e}"
    );
}

// ---- item 2: broken tool-call arguments ----

#[tokio::test]
async fn broken_tool_arguments_reach_the_model_as_a_retry_prompt() {
    let trace = Arc::new(Mutex::new(Vec::new()));
    let calls = Arc::new(Mutex::new(Vec::new()));
    let seen = calls.clone();
    let cap = TestCap::new("t", &trace)
        .tool("search")
        .handler(move |_, args, _| {
            seen.lock().unwrap().push(Value::Object(args.clone()));
            ToolOutcome::Failed("unused".into())
        });
    let broken = r#"{"q": "light"#;
    let server = ScriptedServer::start(vec![
        Reply::tool_call_raw("search", broken).finish_reason("length"),
        Reply::text("Sorry, here is the answer."),
    ])
    .await;
    // Like llama.cpp: a request carrying the broken arguments would get HTTP 500.
    server.reject_invalid_tool_args();
    let result = agent_for(test_config(&server.base_url()))
        .capability(cap.arc())
        .build()
        .unwrap()
        .run(RunInput::prompt("hi"), None, CancelToken::new())
        .await
        .unwrap();
    assert_eq!(
        result.output,
        RunOutput::Text("Sorry, here is the answer.".into())
    );
    assert!(calls.lock().unwrap().is_empty(), "the tool never ran");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let wire = wire_messages(&requests[1]);
    let assistant = wire.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["tool_calls"][0]["function"]["arguments"], "{}");
    let id = assistant["tool_calls"][0]["id"].clone();
    let retry = wire
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .expect("the retry prompt answers the call");
    let text = retry["content"].as_str().unwrap();
    assert!(text.contains("not valid JSON"), "{text}");
    assert!(text.contains("try again"), "{text}");
    // The stored message keeps what the model sent (for the session and the inspector),
    // and the cut-off answer is marked.
    let first = result.messages[1].as_response().unwrap();
    assert_eq!(first.tool_calls().next().unwrap().args_as_json(), broken);
    assert!(first.is_cut_off());
}

// ---- item 3: timeouts and Retry-After ----

#[tokio::test]
async fn a_long_stream_outlives_the_idle_timeout() {
    let text = "a healthy server streaming a long answer";
    let server = ScriptedServer::start(vec![
        Reply::text(text)
            .chunk_chars(4)
            .chunk_delay(Duration::from_millis(300)),
    ])
    .await;
    let mut config = test_config(&server.base_url());
    config.timeout_secs = 1;
    let started = Instant::now();
    let result = run(config).await.unwrap();
    assert_eq!(result.output, RunOutput::Text(text.into()));
    // Longer than the idle timeout as a whole, never idle for that long.
    assert!(started.elapsed() > Duration::from_secs(2));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn the_total_timeout_ends_a_request_that_keeps_streaming() {
    let server = ScriptedServer::start(vec![
        Reply::text("this answer takes far too long to finish")
            .chunk_chars(2)
            .chunk_delay(Duration::from_millis(200)),
    ])
    .await;
    let mut config = test_config(&server.base_url());
    config.total_timeout_secs = Some(1);
    let e = fail(config).await;
    assert!(matches!(e, ModelError::TotalTimeout { secs: 1, .. }), "{e}");
    assert!(
        e.to_string()
            .ends_with("did not finish answering within 1 s (the total_timeout_secs limit)"),
        "{e}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_server_that_never_answers_is_retried_once() {
    let (url, accepted, _task) = silent_listener().await;
    let mut config = test_config(&url);
    config.timeout_secs = 1;
    config.max_retries = 5;
    let started = Instant::now();
    let e = fail(config).await;
    assert!(matches!(e, ModelError::Timeout { secs: 1, .. }), "{e}");
    assert_eq!(
        e.to_string(),
        format!("model endpoint {url} sent nothing for 1 s (the timeout_secs limit)")
    );
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "one attempt and one retry"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_connection_closed_before_any_response_is_a_connection_error() {
    let (url, accepted, _task) = closing_listener().await;
    let e = fail(test_config(&url)).await;
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "cannot reach model endpoint at {url}: the connection closed before the server answered"
        )),
        "{text}"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 3, "max_retries = 2");
}

#[tokio::test]
async fn https_to_a_plain_http_port_says_tls() {
    let server = ScriptedServer::start(vec![Reply::text("never")]).await;
    let url = server.base_url().replace("http://", "https://");
    let e = fail(test_config(&url)).await;
    let text = e.to_string();
    assert!(matches!(e, ModelError::Tls { .. }), "{text}");
    assert!(
        text.starts_with(&format!("TLS handshake with model endpoint {url} failed")),
        "{text}"
    );
    assert!(text.contains("plain HTTP"), "{text}");
    assert!(!text.contains("did not finish"), "{text}");
    assert_eq!(server.remaining(), 1);
}

#[tokio::test]
async fn a_refused_connection_says_could_not_connect() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/v1");
    let mut config = test_config(&url);
    config.max_retries = 0;
    let text = fail(config).await.to_string();
    assert!(
        text.starts_with(&format!(
            "cannot reach model endpoint at {url}: could not connect ("
        )),
        "{text}"
    );
    assert!(text.to_lowercase().contains("refused"), "{text}");
}

#[tokio::test]
async fn retry_after_is_honoured_on_429_and_503() {
    let server = ScriptedServer::start(vec![
        Reply::status(429, "slow down").header("Retry-After", "1"),
        Reply::status(503, "Loading model").header("retry-after", "1"),
        Reply::text("ok"),
    ])
    .await;
    let started = Instant::now();
    let result = run(test_config(&server.base_url())).await.unwrap();
    assert_eq!(result.output, RunOutput::Text("ok".into()));
    assert_eq!(server.requests().len(), 3);
    // The backoff alone is 10 ms + 20 ms; the server asked for a second each time.
    assert!(started.elapsed() >= Duration::from_millis(1900));
}

#[tokio::test]
async fn a_retry_after_beyond_the_cap_is_not_waited_for() {
    let server = ScriptedServer::start(vec![
        Reply::status(429, "quota exceeded").header("Retry-After", "3600"),
        Reply::text("never reached"),
    ])
    .await;
    let e = fail(test_config(&server.base_url())).await.to_string();
    assert!(
        e.ends_with("HTTP 429: quota exceeded (the server asks to retry after 3600 s)"),
        "{e}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_retry_after_wait_is_cancellable() {
    let server = ScriptedServer::start(vec![
        Reply::status(503, "busy").header("Retry-After", "50"),
        Reply::text("never reached"),
    ])
    .await;
    let agent = agent_for(test_config(&server.base_url())).build().unwrap();
    let cancel = CancelToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let err = agent
        .run(RunInput::prompt("hi"), None, cancel)
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::Cancelled), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(server.requests().len(), 1);
}

// ---- item 9a: streams that end early ----

#[tokio::test]
async fn a_stream_cut_mid_answer_is_a_failure_not_an_answer() {
    // Cut twice: the one retry breaks off too, and the run fails saying both.
    let cut = || {
        Reply::text("The answer is 42, as everyone knows.")
            .chunk_chars(5)
            .cut_after(3)
    };
    let server = ScriptedServer::start(vec![cut(), cut(), Reply::text("never reached")]).await;
    let (tx, mut rx) = events();
    let err = agent_for(test_config(&server.base_url()))
        .build()
        .unwrap()
        .run(RunInput::prompt("hi"), tx, CancelToken::new())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(
            &err,
            RunError::Model(ModelError::Interrupted { shown: true, .. })
        ),
        "{text}"
    );
    assert!(text.contains("the connection closed mid-answer"), "{text}");
    assert!(text.contains("tried once more"), "{text}");
    // Retried once, not more.
    assert_eq!(server.requests().len(), 2);
    let events = drain(&mut rx);
    let restarts = events
        .iter()
        .filter(|e| matches!(e, CoreEvent::ResponseRestarted { .. }))
        .count();
    assert_eq!(restarts, 1, "the shown deltas are declared void once");
}

/// A stream cut mid-answer is asked for once more; the second, whole answer is the one
/// committed, and the deltas shown before the cut are declared void first.
#[tokio::test]
async fn a_stream_cut_mid_answer_is_retried_once_and_the_whole_answer_kept() {
    let server = ScriptedServer::start(vec![
        Reply::text("The answer is 42, as everyone knows.")
            .chunk_chars(5)
            .cut_after(3),
        Reply::text("The answer is 42.").chunk_chars(5),
    ])
    .await;
    let (tx, mut rx) = events();
    let result = agent_for(test_config(&server.base_url()))
        .build()
        .unwrap()
        .run(RunInput::prompt("hi"), tx, CancelToken::new())
        .await
        .unwrap();
    match &result.output {
        groundwork::engine::agent::RunOutput::Text(t) => assert_eq!(t, "The answer is 42."),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), 2);
    // What a viewer shows: the text after the last restart is the answer.
    let mut shown = String::new();
    for e in drain(&mut rx) {
        match e {
            CoreEvent::ResponseRestarted { .. } => shown.clear(),
            CoreEvent::TextDelta { text, .. } => shown.push_str(&text),
            _ => {}
        }
    }
    assert_eq!(shown, "The answer is 42.");
}

#[tokio::test]
async fn a_connection_reset_mid_answer_says_so() {
    let server = ScriptedServer::start(vec![
        Reply::text("The answer is 42, as everyone knows.")
            .chunk_chars(5)
            .reset_after(3),
    ])
    .await;
    let e = fail(test_config(&server.base_url())).await;
    let text = e.to_string();
    assert!(text.contains("the connection closed mid-answer"), "{text}");
    for internal in ["EventStream", "Transport error", "decoding"] {
        assert!(!text.contains(internal), "{text}");
    }
    // Asked once more (the script has nothing left: the second failure is named too).
    assert_eq!(server.requests().len(), 2);
    assert!(text.contains("tried once more"), "{text}");
}

#[tokio::test]
async fn a_stream_cut_before_any_delta_is_retried_once() {
    let server = ScriptedServer::start(vec![
        Reply::text("first").cut_after(0),
        Reply::text("second try").cut_after(0),
        Reply::text("never reached"),
    ])
    .await;
    let mut config = test_config(&server.base_url());
    config.max_retries = 5;
    let e = fail(config.clone()).await;
    assert!(
        matches!(e, ModelError::Interrupted { shown: false, .. }),
        "{e}"
    );
    assert_eq!(server.requests().len(), 2, "one attempt and one retry");
    // A single cut is healed by the retry.
    let server = ScriptedServer::start(vec![
        Reply::text("whole").cut_after(0),
        Reply::text("whole answer"),
    ])
    .await;
    let result = run(test_config(&server.base_url())).await.unwrap();
    assert_eq!(result.output, RunOutput::Text("whole answer".into()));
}

#[tokio::test]
async fn a_stream_closed_before_any_event_is_a_connection_error() {
    let server = ScriptedServer::start(vec![
        Reply::sse_raw(Vec::new()),
        Reply::sse_raw(Vec::new()).reset_after(0),
        Reply::sse_raw(Vec::new()),
    ])
    .await;
    let e = fail(test_config(&server.base_url())).await;
    assert!(matches!(e, ModelError::Unreachable { .. }), "{e}");
    assert!(
        e.to_string()
            .ends_with(": the connection closed before the server answered"),
        "{e}"
    );
    assert_eq!(
        server.requests().len(),
        3,
        "connection errors use max_retries"
    );

    server.push(Reply::sse_raw(Vec::new()));
    server.push(Reply::text("ok"));
    let result = run(test_config(&server.base_url())).await.unwrap();
    assert_eq!(result.output, RunOutput::Text("ok".into()));
}

/// Issue 46: `[DONE]` with no finish reason before it is a cut stream, not a whole answer
/// (it used to commit the fragment "Every 200 operating " as the answer): asked once more,
/// then a clear failure.
#[tokio::test]
async fn done_without_a_finish_reason_is_a_cut_stream() {
    let chunk = |delta: Value| {
        json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
        .to_string()
    };
    let cut = || {
        Reply::sse_raw(vec![
            chunk(json!({"role": "assistant", "content": "Every 200 operating "})),
            "[DONE]".to_string(),
        ])
    };
    // Once: the answer asked again is the one kept.
    let server =
        ScriptedServer::start(vec![cut(), Reply::text("Every 200 operating hours.")]).await;
    let result = run(test_config(&server.base_url())).await.unwrap();
    assert_eq!(
        result.output,
        RunOutput::Text("Every 200 operating hours.".into())
    );
    assert_eq!(server.requests().len(), 2);
    // Twice: a failure that says so, no answer.
    let server = ScriptedServer::start(vec![cut(), cut(), Reply::text("never reached")]).await;
    let e = fail(test_config(&server.base_url())).await;
    assert!(matches!(e, ModelError::Interrupted { .. }), "{e}");
    assert!(
        e.to_string().contains("[DONE] but without a finish reason"),
        "{e}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_finish_reason_without_done_is_a_whole_answer() {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
    };
    let server = ScriptedServer::start(vec![Reply::sse_raw(vec![
        chunk(json!({"role": "assistant", "content": "done"}), Value::Null),
        chunk(json!({}), json!("stop")),
    ])])
    .await;
    let result = run(test_config(&server.base_url())).await.unwrap();
    assert_eq!(result.output, RunOutput::Text("done".into()));
}

// ---- item 4: max_tokens ----

#[tokio::test]
async fn max_tokens_is_sent_and_a_length_finish_is_marked_cut_off() {
    let server = ScriptedServer::start(vec![
        Reply::text("The lighthouse was built in").finish_reason("length"),
        Reply::text("Whole."),
    ])
    .await;
    let mut config = test_config(&server.base_url());
    config.max_tokens = Some(7);
    let result = run(config.clone()).await.unwrap();
    assert_eq!(server.requests()[0]["max_tokens"], 7);
    let response = result.messages.last().unwrap().as_response().unwrap();
    assert_eq!(response.finish_reason.as_deref(), Some("length"));
    assert!(response.is_cut_off());
    let t = groundwork::host::transcript::Transcript::build(&result.messages, &result.state);
    assert!(t.turns[0].cut_off);
    assert!(t.ledger[0].cut_off);
    assert!(
        groundwork::host::transcript::to_markdown(&t, "x")
            .contains("*The answer was cut off at the max_tokens limit of 7 that we set.*")
    );

    config.max_tokens = None;
    let result = run(config).await.unwrap();
    assert!(server.requests()[1].get("max_tokens").is_none());
    assert!(
        !result
            .messages
            .last()
            .unwrap()
            .as_response()
            .unwrap()
            .is_cut_off()
    );
}

/// Issue 46: with no `max_tokens` sent, a `length` finish is the server's own limit, and
/// says so (it was marked "max_tokens reached" before).
#[tokio::test]
async fn a_length_finish_without_max_tokens_names_the_servers_limit() {
    let server = ScriptedServer::start(vec![
        Reply::text("Every 200 operating").finish_reason("length"),
    ])
    .await;
    let mut config = test_config(&server.base_url());
    config.max_tokens = None;
    let result = run(config).await.unwrap();
    assert!(server.requests()[0].get("max_tokens").is_none());
    let response = result.messages.last().unwrap().as_response().unwrap();
    assert_eq!(
        response.cut_off_note().as_deref(),
        Some("cut off by the server's own output or context length limit (we set no max_tokens)")
    );
    let t = groundwork::host::transcript::Transcript::build(&result.messages, &result.state);
    let md = groundwork::host::transcript::to_markdown(&t, "x");
    assert!(
        md.contains("by the server's own output or context length limit"),
        "{md}"
    );
    assert!(!md.contains("max_tokens limit of"), "{md}");
}

// ---- item 9b: size cap ----

#[tokio::test]
async fn an_oversized_answer_is_refused() {
    let big = "x".repeat(5000);
    let server = ScriptedServer::start(vec![
        Reply::text(big.clone()).chunk_chars(500),
        Reply::tool_call_raw("search", format!("{{\"q\": \"{big}\"}}")).chunk_chars(500),
        Reply::text(big.clone()),
        Reply::raw("application/json", " ".repeat(2 << 20)),
        Reply::text("never reached"),
    ])
    .await;
    let mut config = test_config(&server.base_url());
    config.max_response_bytes = 1000;
    for _ in 0..2 {
        let e = fail(config.clone()).await;
        assert!(matches!(e, ModelError::TooLarge { limit: 1000, .. }), "{e}");
        assert!(
            e.to_string()
                .ends_with("sent an answer larger than 1000 bytes (the max_response_bytes limit)"),
            "{e}"
        );
    }
    config.stream = false;
    for _ in 0..2 {
        let e = fail(config.clone()).await;
        assert!(matches!(e, ModelError::TooLarge { .. }), "{e}");
    }
    assert_eq!(server.requests().len(), 4, "not retried");
}

// ---- items 3 and 4 through `groundwork ask` ----

struct Home(tempfile::TempDir);

impl Home {
    async fn run(&self, args: &[&str]) -> std::process::Output {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_groundwork"));
        cmd.args(args)
            .env("HOME", self.0.path())
            .env("XDG_DATA_HOME", self.0.path().join("data"))
            .env("XDG_CONFIG_HOME", self.0.path().join("config"))
            .env("OPENAI_API_KEY", "sk-faults-test-SECRET")
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

#[tokio::test]
async fn ask_sends_max_tokens_and_reports_a_cut_off_answer() {
    let embed = crate::support::hashembed::start().await;
    let home = Home(tempfile::tempdir().unwrap());
    let db = home.0.path().join("kb.lancedb");
    let db = db.to_str().unwrap();
    let sample =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ingest/sample.md");
    let o = home
        .run(&[
            "--db",
            db,
            "ingest",
            sample.to_str().unwrap(),
            "--embed-url",
            &embed.url,
            "--embed-model",
            crate::support::hashembed::MODEL,
        ])
        .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let model = ScriptedServer::start(vec![
        Reply::text("The first towers were").finish_reason("length"),
        Reply::text("The first towers were").finish_reason("length"),
    ])
    .await;
    let url = model.base_url();
    let session = home.0.path().join("s.sqlite");
    let session = session.to_str().unwrap();
    let args = |json: bool| {
        let mut a = vec![
            "--db",
            db,
            "--session",
            session,
            "--model-url",
            &url,
            "--max-tokens",
            "7",
            "--timeout",
            "30",
            "ask",
            "How did lighthouses start?",
        ];
        if json {
            a.push("--json");
        }
        a
    };
    let o = home.run(&args(true)).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["answer"], "The first towers were");
    assert_eq!(v["cut_off"], true);
    assert_eq!(model.requests()[0]["max_tokens"], 7);

    let o = home.run(&args(false)).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("the answer was cut off at the max_tokens limit of 7 that we set"),
        "{stderr}"
    );

    let o = home
        .run(&["--timeout", "0", "--model-url", &url, "ask", "x"])
        .await;
    assert!(!o.status.success());
}
