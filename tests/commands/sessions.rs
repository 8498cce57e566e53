//! The pydantic-ai message fixture round trip and session files.

use std::path::{Path, PathBuf};

use crate::support::caps::TestCap;
use crate::support::scripted_server::{Reply, ScriptedServer};
use crate::support::{agent_for, test_config};
use groundwork::engine::agent::RunInput;
use groundwork::engine::cancel::CancelToken;
use groundwork::engine::messages::{
    BinaryContent, ModelMessage, ModelRequestPart, ModelResponsePart, UserContent,
    UserContentValue, messages_from_json,
};
use groundwork::session::{Session, SessionError};
use serde_json::{Value, json};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pydantic_ai")
}

fn fixture_text() -> String {
    std::fs::read_to_string(fixture_dir().join("messages.json")).unwrap()
}

#[test]
fn pydantic_ai_fixture_round_trips_exactly() {
    let text = fixture_text();
    let original: Value = serde_json::from_str(&text).unwrap();
    let messages = messages_from_json(&text).unwrap();
    let back = serde_json::to_value(&messages).unwrap();
    assert_eq!(back, original);
    // Same key order and list order: identical compact serializations.
    assert_eq!(
        serde_json::to_string(&back).unwrap(),
        serde_json::to_string(&original).unwrap()
    );

    // Every part kind is understood (none fell back to `Other`).
    let mut kinds = std::collections::BTreeSet::new();
    for m in &messages {
        match m {
            ModelMessage::Request(r) => {
                for p in &r.parts {
                    kinds.insert(match p {
                        ModelRequestPart::SystemPrompt(_) => "system-prompt",
                        ModelRequestPart::UserPrompt(u) => match &u.content {
                            UserContentValue::Items(items) => {
                                assert!(items.iter().any(|i| matches!(i, UserContent::Binary(b) if b.media_type == "image/png")));
                                "user-prompt-items"
                            }
                            UserContentValue::Text(_) => "user-prompt-text",
                        },
                        ModelRequestPart::ToolReturn(t) if t.is_failed() => "tool-return-failed",
                        ModelRequestPart::ToolReturn(t) if t.tool_kind.as_deref() == Some("capability-load") => "capability-load-return",
                        ModelRequestPart::ToolReturn(_) => "tool-return",
                        ModelRequestPart::RetryPrompt(r) => match &r.content {
                            groundwork::engine::messages::RetryContent::Text(_) => "retry-text",
                            groundwork::engine::messages::RetryContent::Errors(_) => "retry-errors",
                        },
                        ModelRequestPart::Other(o) => panic!("unexpected unknown part {o:?}"),
                    });
                }
            }
            ModelMessage::Response(r) => {
                for p in &r.parts {
                    kinds.insert(match p {
                        ModelResponsePart::Text(_) => "text",
                        ModelResponsePart::ToolCall(c)
                            if matches!(
                                c.args,
                                Some(groundwork::engine::messages::ToolArgs::Json(_))
                            ) =>
                        {
                            "tool-call-string-args"
                        }
                        ModelResponsePart::ToolCall(_) => "tool-call-object-args",
                        ModelResponsePart::Thinking(_) => "thinking",
                        ModelResponsePart::Other(o) => panic!("unexpected unknown part {o:?}"),
                    });
                }
            }
        }
    }
    let expected = [
        "capability-load-return",
        "retry-errors",
        "retry-text",
        "system-prompt",
        "text",
        "thinking",
        "tool-call-object-args",
        "tool-call-string-args",
        "tool-return",
        "tool-return-failed",
        "user-prompt-items",
        "user-prompt-text",
    ];
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), expected);
}

#[test]
fn session_save_and_load_are_atomic_and_lossless() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/session.json");
    let mut session = Session::new("m");
    session.messages = messages_from_json(&fixture_text()).unwrap();
    session.state.insert(
        "rag".into(),
        json!({"citations": ["c1"], "document_filter": null}),
    );
    session.groundwork.scripted_demo = true;
    session
        .groundwork
        .labels
        .insert("topic".into(), json!("zebras"));
    session.save(&path).unwrap();
    assert_eq!(Session::load(&path).unwrap(), session);

    // Overwrite in place; no temporary files are left behind.
    session.state.insert("extra".into(), json!(1));
    session.save(&path).unwrap();
    assert_eq!(Session::load(&path).unwrap().state["extra"], json!(1));
    let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, vec![std::ffi::OsString::from("session.json")]);

    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let keys: Vec<&String> = saved.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["messages", "state", "groundwork"]);
}

#[test]
fn a_corrupt_session_names_the_file_and_position() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.json");
    std::fs::write(&path, "{\n  \"messages\": [],\n  \"state\": {oops}\n}\n").unwrap();
    let err = Session::load(&path).unwrap_err();
    assert!(
        matches!(err, SessionError::Corrupt { line: 3, .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&path.display().to_string()) && text.contains("line 3"),
        "{text}"
    );

    let missing = Session::load(&dir.path().join("none.json"))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("none.json"), "{missing}");
}

#[test]
fn a_haiku_rag_host_session_loads() {
    let text = format!(
        r#"{{"messages": {}, "state": {{"rag": {{"citation_index": {{}}, "citations": [], "document_filter": null,
        "evidence": {{"declaration": null, "in_progress": false, "latest_evidence_epoch": 0, "occurrences": {{}}, "question": null}},
        "searches": {{}}}}}}}}"#,
        fixture_text()
    );
    let session = Session::from_json(&text, Path::new("host.json")).unwrap();
    assert_eq!(
        session.groundwork.version,
        groundwork::session::SESSION_FORMAT_VERSION
    );
    assert!(!session.groundwork.scripted_demo);
    let original: Value = serde_json::from_str(&text).unwrap();
    let back = serde_json::to_value(&session).unwrap();
    assert_eq!(back["messages"], original["messages"]);
    assert_eq!(back["state"], original["state"]);
}

/// Our own sessions (a real run with a tool call, a failure, an image and deferred
/// loading) validate with pydantic-ai. Needs the venv `.ci/setup-tests` creates; without it
/// the test fails, saying so.
#[tokio::test]
async fn pydantic_ai_accepts_our_sessions() {
    let python = dirs::home_dir()
        .unwrap()
        .join(".cache/groundwork-pai-venv/bin/python");
    let server = ScriptedServer::start(vec![
        Reply::tool_call("load_capability", serde_json::json!({"id": "notes"}))
            .with_thinking("load it"),
        Reply::tool_call("notes_read", serde_json::json!({"q": "x"}))
            .and_tool_call("notes_read", serde_json::json!({"q": "fail"})),
        Reply::tool_call("notes_read", serde_json::json!({"q": "retry"})),
        Reply::text("done"),
    ])
    .await;
    let t = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let agent = agent_for(test_config(&server.base_url()))
        .instructions("Base.")
        .capability(
            TestCap::new("notes", &t)
                .tool("notes_read")
                .instructions("# Notes")
                .deferred("Reads notes.")
                .handler(|_, args, _| match args.get("q").and_then(Value::as_str) {
                    Some("fail") => {
                        groundwork::engine::capability::ToolOutcome::Failed("offline".into())
                    }
                    Some("retry") => {
                        groundwork::engine::capability::ToolOutcome::Retry("shorter".into())
                    }
                    _ => groundwork::engine::capability::ToolOutcome::Ok(
                        groundwork::engine::capability::ToolOutput::text("a note").with_extra(
                            vec![UserContent::Binary(BinaryContent::from_bytes(
                                b"\x89PNG",
                                "image/png",
                            ))],
                        ),
                    ),
                })
                .arc(),
        )
        .build()
        .unwrap();
    let image = BinaryContent::from_bytes(b"\x89PNGfake", "image/png");
    let prompt = UserContentValue::Items(vec![
        UserContent::Text("look".into()),
        UserContent::Binary(image),
    ]);
    let result = agent
        .run(
            RunInput {
                prompt: Some(prompt),
                ..RunInput::default()
            },
            None,
            CancelToken::new(),
        )
        .await;
    let mut session = Session::new("scripted-model");
    assert!(session.commit_run(&result));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ours.json");
    session.save(&path).unwrap();
    // Never a silent pass: .ci/setup-tests makes the venv.
    assert!(
        python.exists(),
        "the pydantic-ai check needs {}: run .ci/setup-tests",
        python.display()
    );
    let out = std::process::Command::new(&python)
        .arg(fixture_dir().join("check_session.py"))
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pydantic-ai rejected our session: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // And a broken one is rejected (the checker can fail).
    std::fs::write(
        &path,
        r#"{"messages": [{"kind": "request", "parts": [{"part_kind": "nonsense"}]}], "state": {}}"#,
    )
    .unwrap();
    let out = std::process::Command::new(&python)
        .arg(fixture_dir().join("check_session.py"))
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}
