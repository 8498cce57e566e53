//! `groundwork inspect` on a session recorded by a real engine run (against the scripted
//! OpenAI-compatible server, with a capability that rewrites the outgoing request), and on a
//! session in the shape a haiku.rag host writes (messages and state only).

use std::process::Command;

use crate::support::caps::{TestCap, Trace};
use crate::support::scripted_server::{Reply, ScriptedServer};
use crate::support::{agent_for, test_config};
use groundwork::engine::agent::RunInput;
use groundwork::engine::cancel::CancelToken;
use groundwork::engine::messages::{ModelRequestPart, UserContentValue};
use groundwork::session::Session;
use serde_json::{Value, json};

fn inspect(args: &[&str]) -> (bool, String, String) {
    let home = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_groundwork"))
        .arg("inspect")
        .args(args)
        .env("HOME", home.path())
        .env("XDG_DATA_HOME", home.path().join("data"))
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        // Hermetic: a model server running on this machine is never found.
        .env("GROUNDWORK_DISCOVER", "off")
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_recorded_session_shows_raw_beside_sent() {
    let server = ScriptedServer::start(vec![
        Reply::tool_call("lookup", json!({"q": "tides"})),
        Reply::text("High tide is at noon."),
    ])
    .await;
    let trace = Trace::default();
    let agent = agent_for(test_config(&server.base_url()))
        .capability(
            TestCap::new("squeezer", &trace)
                .tool("lookup")
                .rewrite(|mut msgs| {
                    for m in &mut msgs {
                        if let Some(r) = m.as_request_mut() {
                            for p in &mut r.parts {
                                if let ModelRequestPart::UserPrompt(u) = p {
                                    u.content = UserContentValue::Text("[squeezed]".into());
                                }
                            }
                        }
                    }
                    msgs
                })
                .arc(),
        )
        .build()
        .unwrap();
    let prompt = "When is high tide in the harbour today? ".repeat(10);
    let outcome = agent
        .run(RunInput::prompt(prompt.as_str()), None, CancelToken::new())
        .await;
    let mut session = Session::new("scripted-model");
    assert!(session.commit_run(&outcome));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    session.save(&path).unwrap();
    let path = path.to_str().unwrap();

    let (ok, out, err) = inspect(&[path]);
    assert!(ok, "{err}");
    assert!(out.contains("2 request(s)"), "{out}");
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.trim_start().starts_with(['1', '2']))
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(!out.contains("not recorded"));

    let (ok, out, _) = inspect(&[path, "--request", "2"]);
    assert!(ok);
    assert!(out.contains("≠"), "the rewritten prompt is marked: {out}");
    assert!(out.contains("[squeezed]"), "{out}");
    assert!(out.contains("When is high tide"), "{out}");
    assert!(out.contains("tool-return lookup"), "{out}");
    assert!(out.contains("tools: lookup"), "{out}");

    let (ok, out, _) = inspect(&[path, "--json"]);
    assert!(ok);
    let v: Value = serde_json::from_str(&out).unwrap();
    let reqs = v.as_array().unwrap();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1]["raw"].as_array().unwrap().len(), 3);
    assert_ne!(reqs[1]["raw"], reqs[1]["compacted"]);
    assert!(
        reqs[0]["raw_tokens"]["total"].as_u64().unwrap()
            > reqs[0]["compacted_tokens"]["total"].as_u64().unwrap()
    );

    let (ok, _, err) = inspect(&[path, "--request", "9"]);
    assert!(!ok);
    assert!(err.contains("no request 9"), "{err}");
}

#[tokio::test]
async fn a_haiku_rag_host_session_is_reconstructed_from_history() {
    // pydantic-ai's own messages (written by pydantic-ai) in a haiku.rag host's file shape.
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/pydantic_ai/messages.json");
    let messages: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let n_responses = messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["kind"] == "response")
        .count();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("haiku.json");
    std::fs::write(
        &path,
        json!({"messages": messages, "state": {"rag": {"citations": []}}}).to_string(),
    )
    .unwrap();
    let (ok, out, err) = inspect(&[path.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("(sent side not recorded)"), "{out}");
    assert!(out.contains(&format!("{n_responses} request(s)")), "{out}");

    // A corrupt session is a clear error naming the file.
    std::fs::write(&path, "{\"messages\": [").unwrap();
    let (ok, _, err) = inspect(&[path.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("haiku.json"), "{err}");
}
