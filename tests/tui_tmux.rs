//! The real binary in a real terminal (tmux): start the workbench against the scripted
//! OpenAI-compatible server, ask a question, see the answer and the ledger row, quit, and
//! find the terminal restored (cooked mode, main screen).

mod support;

use serde_json::json;
use support::scripted_server::{Reply, ScriptedServer};
use support::tmux::{EXIT_SUFFIX, Tmux, assert_restored};
use support::workbench::{demo_kb, hit};

#[tokio::test]
async fn start_ask_see_answer_and_ledger_quit_and_terminal_is_restored() {
    let kb = demo_kb().await;
    let chunk = hit(&kb.store, "monthly solar output", |_| true)
        .await
        .chunk_id
        .unwrap();
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "solar output July"})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [chunk]})),
        Reply::text("The array peaked in July at 61 MWh."),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let session = home.path().join("e2e-session.json");
    let tmux = Tmux::new("e2e");
    let script = format!(
        "env -u GROUNDWORK_MODEL_URL -u GROUNDWORK_MODEL HOME={home} XDG_DATA_HOME={home}/data \
         XDG_CONFIG_HOME={home}/config OPENAI_API_KEY=sk-e2e-SECRET \
         {bin} --db {db} --session {session} --model-url {url} --model scripted-model; {EXIT_SUFFIX}",
        home = home.path().display(),
        bin = env!("CARGO_BIN_EXE_groundwork"),
        db = kb.db,
        session = session.display(),
        url = server.base_url(),
    );
    tmux.start(&script, 160, 48);

    // First frame: the panes and the input.
    tmux.wait_for("the first frame", 60, |s| {
        s.contains("Conversation") && s.contains("Citation ledger") && s.contains("Question")
    })
    .await;
    tmux.send(&["How much did the array produce in July?"]);
    tmux.send(&["Enter"]);
    let screen = tmux
        .wait_for("the answer", 60, |s| {
            s.contains("The array peaked in July at 61 MWh.")
        })
        .await;
    assert!(screen.contains("rag_search"), "{screen}");
    // The ledger row of the question.
    let screen = tmux
        .wait_for("the ledger row", 60, |s| {
            s.lines()
                .any(|l| l.contains("1   How") && l.contains("grounded"))
        })
        .await;
    assert!(screen.contains("Sources (1)"), "{screen}");
    // The session was saved, without the API key.
    let saved = std::fs::read_to_string(&session).unwrap();
    assert!(saved.contains("61 MWh"));
    assert!(!saved.contains("sk-e2e-SECRET"));

    tmux.send(&["C-q"]);
    let screen = tmux.wait_exit().await;
    assert_restored(&screen, "Citation ledger");
}

/// `groundwork open` on a conversation recorded by a haiku.rag host, with its database and
/// no model: conversation, ledger and inspector are all there.
#[tokio::test]
async fn open_a_haiku_rag_session_without_a_model() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let home = tempfile::tempdir().unwrap();
    let tmux = Tmux::new("open");
    let script = format!(
        "env -u GROUNDWORK_MODEL_URL -u GROUNDWORK_MODEL HOME={home} XDG_DATA_HOME={home}/data \
         XDG_CONFIG_HOME={home}/config GROUNDWORK_DISCOVER=off \
         {bin} --db {db} open {session}; {EXIT_SUFFIX}",
        home = home.path().display(),
        bin = env!("CARGO_BIN_EXE_groundwork"),
        db = root.join("tests/fixtures/haiku/db.lancedb").display(),
        session = root
            .join("tests/fixtures/haiku_session/session.json")
            .display(),
    );
    tmux.start(&script, 160, 48);
    let screen = tmux
        .wait_for("the recorded conversation", 60, |s| {
            s.contains("Solar Panel Installation Manual") && s.contains("Citation ledger")
        })
        .await;
    assert!(screen.contains("model none configured"), "{screen}");
    assert!(
        screen.contains("sent side not recorded") || screen.contains("not recorded"),
        "{screen}"
    );
    tmux.send(&["C-q"]);
    let screen = tmux.wait_exit().await;
    assert_restored(&screen, "Citation ledger");
}

/// A panic inside the UI still restores the terminal (the panic hook restores first, then
/// the message is printed on the main screen).
#[tokio::test]
async fn a_panic_restores_the_terminal() {
    let kb = demo_kb().await;
    let home = tempfile::tempdir().unwrap();
    let tmux = Tmux::new("panic");
    let script = format!(
        "env HOME={home} XDG_DATA_HOME={home}/data XDG_CONFIG_HOME={home}/config \
         RUST_BACKTRACE=0 GROUNDWORK_DISCOVER=off GROUNDWORK_TEST_PANIC=1 {bin} --db {db}; {EXIT_SUFFIX}",
        home = home.path().display(),
        bin = env!("CARGO_BIN_EXE_groundwork"),
        db = kb.db,
    );
    tmux.start(&script, 120, 40);
    let screen = tmux.wait_exit().await;
    assert!(screen.contains("GROUNDWORK_TEST_PANIC is set"), "{screen}");
    assert!(
        !screen.contains("GW_EXIT=0"),
        "a panic is a failure exit: {screen}"
    );
    let modes = screen
        .lines()
        .find(|l| l.contains("icanon"))
        .unwrap_or_default();
    let words: Vec<&str> = modes.split_whitespace().collect();
    assert!(
        words.contains(&"icanon") && words.contains(&"echo"),
        "raw mode left: {modes:?}"
    );
    assert!(!screen.contains("Citation ledger"), "{screen}");
}
