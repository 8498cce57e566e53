//! The model client against the scripted server: retries, clear errors for a down,
//! garbage-speaking or stalled endpoint, non-streaming mode, and
//! the API key staying out of everything but the Authorization header.

use std::time::Duration;

use crate::support::scripted_server::{Reply, ScriptedServer};
use crate::support::{TEST_API_KEY, agent_for, drain, events, test_config};
use groundwork::config::ModelConfig;
use groundwork::engine::agent::{RunError, RunInput, RunOutput};
use groundwork::engine::cancel::CancelToken;
use groundwork::engine::chat::ModelError;
use groundwork::model::OpenAiModel;
use groundwork::session::Session;
use serde_json::json;

async fn ask(config: ModelConfig) -> Result<RunOutput, RunError> {
    let agent = agent_for(config).build().unwrap();
    agent
        .run(RunInput::prompt("hi"), None, CancelToken::new())
        .await
        .map(|r| r.output)
}

#[tokio::test]
async fn a_429_is_retried_then_succeeds() {
    let server =
        ScriptedServer::start(vec![Reply::status(429, "slow down"), Reply::text("ok")]).await;
    let out = ask(test_config(&server.base_url())).await.unwrap();
    assert_eq!(out, RunOutput::Text("ok".into()));
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn persistent_5xx_exhausts_the_retries() {
    let server = ScriptedServer::start(vec![
        Reply::status(502, "boom"),
        Reply::status(504, "boom"),
        Reply::status(503, "still boom"),
        Reply::text("never reached"),
    ])
    .await;
    let err = ask(test_config(&server.base_url())).await.unwrap_err();
    assert!(
        matches!(&err, RunError::Model(ModelError::Http { status: 503, .. })),
        "{err}"
    );
    assert!(err.to_string().contains("still boom"), "{err}");
    assert_eq!(
        server.requests().len(),
        3,
        "one attempt plus max_retries = 2"
    );
}

#[tokio::test]
async fn a_400_is_not_retried() {
    let server = ScriptedServer::start(vec![
        Reply::status(400, "bad tool schema"),
        Reply::text("x"),
    ])
    .await;
    let err = ask(test_config(&server.base_url())).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("HTTP 400") && text.contains("bad tool schema"),
        "{text}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn an_endpoint_that_is_down_gives_a_clear_error() {
    // A port that was free a moment ago.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/v1");
    let mut config = test_config(&url);
    config.max_retries = 1;
    let err = ask(config).await.unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("cannot reach model endpoint at {url}: ")),
        "{err}"
    );
    assert!(!err.contains(TEST_API_KEY));
}

#[tokio::test]
async fn garbage_answers_give_clear_errors() {
    let server = ScriptedServer::start(vec![
        Reply::raw("application/json", "<html>gateway says hi</html>"),
        Reply::raw(
            "application/json",
            r#"{"id": "x", "object": "chat.completion"}"#,
        ),
        Reply::sse_raw(vec!["{not json".into()]),
        Reply::raw("text/plain", "no events in here"),
    ])
    .await;
    let mut plain = test_config(&server.base_url());
    plain.stream = false;
    let err = ask(plain.clone()).await.unwrap_err().to_string();
    assert!(
        err.contains("returned a malformed response") && err.contains("gateway says hi"),
        "{err}"
    );
    let err = ask(plain).await.unwrap_err().to_string();
    assert!(
        err.contains("malformed") && err.contains("choices"),
        "{err}"
    );
    let err = ask(test_config(&server.base_url()))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("malformed") && err.contains("{not json"),
        "{err}"
    );
    let err = ask(test_config(&server.base_url()))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("malformed") && err.contains("no events") && err.contains("no events in here"),
        "{err}"
    );
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn a_stalled_endpoint_times_out() {
    let server = ScriptedServer::start(vec![
        Reply::text("late").delay(Duration::from_secs(20)),
        Reply::text("stalls mid-stream").chunk_delay(Duration::from_secs(20)),
    ])
    .await;
    let mut config = test_config(&server.base_url());
    config.timeout_secs = 1;
    config.max_retries = 0;
    let started = std::time::Instant::now();
    let err = ask(config.clone()).await.unwrap_err();
    assert!(
        matches!(err, RunError::Model(ModelError::Timeout { secs: 1, .. })),
        "{err}"
    );
    assert!(err.to_string().contains("sent nothing for 1 s"), "{err}");
    // A stream that stalls after its first delta is not retried (the delta was shown).
    config.max_retries = 3;
    let err = ask(config).await.unwrap_err();
    assert!(
        matches!(err, RunError::Model(ModelError::Timeout { .. })),
        "{err}"
    );
    assert_eq!(server.requests().len(), 2);
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn non_streaming_mode_handles_tool_calls() {
    let server = ScriptedServer::start(vec![
        Reply::tool_call("load_capability", json!({"id": "nothing"}))
            .and_text("checking")
            .with_thinking("hmm"),
        Reply::text("plain answer"),
    ])
    .await;
    let mut config = test_config(&server.base_url());
    config.stream = false;
    let agent = agent_for(config).build().unwrap();
    let result = agent
        .run(RunInput::prompt("hi"), None, CancelToken::new())
        .await
        .unwrap();
    assert_eq!(result.output, RunOutput::Text("plain answer".into()));
    assert!(server.requests()[0].get("stream").is_none());
    let first = result.messages[1].as_response().unwrap();
    assert_eq!(first.text(), "checking");
    assert_eq!(first.tool_calls().count(), 1);
    assert_eq!(first.finish_reason.as_deref(), Some("tool_call"));
    assert_eq!(first.usage.input_tokens, 11);
    assert_eq!(first.provider_response_id.as_deref(), Some("chatcmpl-1"));
}

#[tokio::test]
async fn the_api_key_is_sent_but_never_shown_or_saved() {
    let server = ScriptedServer::start(vec![Reply::text("fine"), Reply::status(400, "nope")]).await;
    let config = test_config(&server.base_url());
    let model = OpenAiModel::new(config.clone()).unwrap();
    let agent = agent_for(config.clone()).build().unwrap();
    let (tx, mut rx) = events();
    let result = agent
        .run(RunInput::prompt("hi"), tx.clone(), CancelToken::new())
        .await;
    let err = agent
        .run(RunInput::prompt("again"), tx, CancelToken::new())
        .await
        .unwrap_err();

    assert_eq!(
        server.recorded()[0].authorization.as_deref(),
        Some(format!("Bearer {TEST_API_KEY}").as_str())
    );
    let mut session = Session::new(config.model.clone());
    assert!(session.commit_run(&result));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    session.save(&path).unwrap();
    let db = dir.path().join("s.sqlite");
    session.save(&db).unwrap();
    let saved = std::fs::read_to_string(&path).unwrap()
        + &String::from_utf8_lossy(&std::fs::read(&db).unwrap());
    let events_dbg = format!("{:?}", drain(&mut rx));
    for shown in [
        format!("{config:?}"),
        format!("{model:?}"),
        format!("{agent:?}"),
        format!("{result:?}"),
        format!("{err:?} {err}"),
        events_dbg,
        saved,
    ] {
        assert!(!shown.contains(TEST_API_KEY), "key leaked into: {shown}");
        assert!(!shown.contains("SECRET"), "key leaked into: {shown}");
    }
}
