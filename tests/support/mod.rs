//! Shared test support, the one tree every test binary includes with `mod support;`: the
//! scripted OpenAI-compatible server (`scripted_server`), a recording test capability
//! (`caps`), the hashing embedder server (`hashembed`), the binary in a temporary home with
//! a database (`home`), the knowledge base, agent and wire helpers of the capability tests
//! (`kb`), the scripted rerank server (`rerank_server`), the real llama.cpp server
//! (`llama`), scripted researcher answers (`researcher`), tmux driving (`tmux`), the
//! workbench harness (`workbench`), the local S3 server and the `cloud` binary (`s3`) and
//! the small helpers below.
#![allow(dead_code)] // each test binary uses a different subset

pub mod caps;
pub mod collections;
pub mod hashembed;
pub mod home;
pub mod kb;
pub mod llama;
pub mod memory_model;
pub mod rerank_server;
pub mod researcher;
pub mod s3;
pub mod scripted_server;
pub mod tmux;
pub mod workbench;

use std::sync::Arc;

use groundwork::config::{ApiKey, ModelConfig};
use groundwork::engine::agent::{Agent, AgentBuilder};
use groundwork::engine::events::CoreEvent;
use groundwork::model::OpenAiModel;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// The API key every test client sends; tests assert it leaks nowhere.
pub const TEST_API_KEY: &str = "sk-test-SECRET-0123456789";

/// A config for the scripted server: streaming, short timeouts, fast retries.
pub fn test_config(base_url: &str) -> ModelConfig {
    ModelConfig {
        base_url: base_url.to_string(),
        model: "scripted-model".into(),
        api_key: Some(ApiKey::new(TEST_API_KEY)),
        timeout_secs: 10,
        connect_timeout_secs: 2,
        max_retries: 2,
        retry_base_delay_ms: 10,
        stream: true,
        ..ModelConfig::default()
    }
}

/// An agent builder over the real async-openai client.
pub fn agent_for(config: ModelConfig) -> AgentBuilder {
    Agent::builder(Arc::new(OpenAiModel::new(config).expect("client")))
}

/// An event channel.
pub fn events() -> (UnboundedSender<CoreEvent>, UnboundedReceiver<CoreEvent>) {
    unbounded_channel()
}

/// Every event received so far.
pub fn drain(rx: &mut UnboundedReceiver<CoreEvent>) -> Vec<CoreEvent> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

/// The names of the entries of `dir`, sorted (what a read-only command must leave as it was).
pub fn file_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Copies a directory tree (a LanceDB database, a model folder).
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A saved session (an SQLite session file, or JSON) as the JSON Groundwork exports:
/// `messages`, `state` and Groundwork's section.
pub fn session_json(path: &std::path::Path) -> serde_json::Value {
    let s = groundwork::session::Session::load(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::to_value(&s).unwrap()
}

/// [`session_json`] as text.
pub fn session_text(path: &std::path::Path) -> String {
    session_json(path).to_string()
}

/// Runs one of the scripts under `tests/fixtures/` (`haiku/tags.py`) with haiku.rag 0.77
/// in its pinned venv (`.ci/setup-tests` builds it with `tests/fixtures/haiku/venv.sh`;
/// never a silent pass without it) and returns its last line of output as JSON.
pub fn run_haiku_script(script: &str, args: &[&str]) -> serde_json::Value {
    run_in_venv(
        "FIXTURE_VENV",
        "groundwork-fixture-venv",
        "haiku",
        script,
        args,
    )
}

/// [`run_haiku_script`] with haiku.rag 0.101.1 in its pinned venv (`.ci/setup-tests`
/// builds it with `tests/fixtures/haiku101/venv.sh`).
pub fn run_haiku101_script(script: &str, args: &[&str]) -> serde_json::Value {
    run_in_venv(
        "HAIKU101_VENV",
        "groundwork-haiku101-venv",
        "haiku101",
        script,
        args,
    )
}

fn run_in_venv(
    var: &str,
    default: &str,
    fixture: &str,
    script: &str,
    args: &[&str],
) -> serde_json::Value {
    let venv = std::env::var(var)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::Path::new(&std::env::var("HOME").unwrap_or_default())
                .join(".cache")
                .join(default)
        });
    let python = venv.join("bin/python");
    assert!(
        python.exists() && venv.join(".groundwork-lock.sha256").exists(),
        "haiku.rag's venv is missing at {}: run .ci/setup-tests (or bash tests/fixtures/{fixture}/venv.sh)",
        venv.display()
    );
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(script);
    let out = std::process::Command::new(python)
        .arg(&script)
        .args(args)
        .env("LOGFIRE_IGNORE_NO_CONFIG", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} {args:?} failed: {}\n{stdout}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap()
}
