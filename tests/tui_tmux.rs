//! The real binary in a real terminal (tmux): start the workbench against the scripted
//! OpenAI-compatible server, ask a question, see the answer and the ledger row, quit, and
//! find the terminal restored (cooked mode, main screen).

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use support::scripted_server::{Reply, ScriptedServer};
use support::workbench::{demo_kb, hit};

struct Tmux {
    socket: String,
    session: String,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]);
        c
    }

    fn capture(&self) -> String {
        let o = self
            .cmd()
            .args(["capture-pane", "-p", "-t", &self.session])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn send(&self, keys: &[&str]) {
        let status = self
            .cmd()
            .args(["send-keys", "-t", &self.session])
            .args(keys)
            .status()
            .expect("tmux send-keys");
        assert!(status.success());
    }

    /// Polls the screen until `pred` holds.
    async fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if pred(&screen) {
                return screen;
            }
            if start.elapsed() > Duration::from_secs(60) {
                panic!("timed out waiting for {what}; screen:\n{screen}");
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

#[tokio::test]
async fn start_ask_see_answer_and_ledger_quit_and_terminal_is_restored() {
    assert!(
        Command::new("tmux").arg("-V").output().is_ok(),
        "tmux is required for this test (.ci/setup installs it)"
    );
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
    let tmux = Tmux {
        socket: format!("gw-e2e-{}", std::process::id()),
        session: "gw".into(),
    };
    let script = format!(
        "env -u GROUNDWORK_MODEL_URL -u GROUNDWORK_MODEL HOME={home} XDG_DATA_HOME={home}/data \
         XDG_CONFIG_HOME={home}/config OPENAI_API_KEY=sk-e2e-SECRET \
         {bin} --db {db} --session {session} --model-url {url} --model scripted-model; \
         echo GW_EXIT=$?; stty -a | tr ' ' '\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; \
         echo; sleep 60",
        home = home.path().display(),
        bin = env!("CARGO_BIN_EXE_groundwork"),
        db = kb.db,
        session = session.display(),
        url = server.base_url(),
    );
    let status = tmux
        .cmd()
        .args([
            "new-session", "-d", "-s", &tmux.session, "-x", "160", "-y", "48", "sh", "-c", &script,
        ])
        .status()
        .expect("tmux new-session");
    assert!(status.success());

    // First frame: the panes and the input.
    tmux.wait_for("the first frame", |s| {
        s.contains("Conversation") && s.contains("Citation ledger") && s.contains("Question")
    })
    .await;
    tmux.send(&["How much did the array produce in July?"]);
    tmux.send(&["Enter"]);
    let screen = tmux
        .wait_for("the answer", |s| s.contains("The array peaked in July at 61 MWh."))
        .await;
    assert!(screen.contains("rag_search"), "{screen}");
    // The ledger row of the question.
    let screen = tmux
        .wait_for("the ledger row", |s| {
            s.lines()
                .any(|l| l.contains("How much") && l.contains("grounded"))
        })
        .await;
    assert!(screen.contains("Sources (1)"), "{screen}");
    // The session was saved, without the API key.
    let saved = std::fs::read_to_string(&session).unwrap();
    assert!(saved.contains("61 MWh"));
    assert!(!saved.contains("sk-e2e-SECRET"));

    tmux.send(&["C-q"]);
    let screen = tmux.wait_for("the exit", |s| s.contains("GW_EXIT=")).await;
    assert!(screen.contains("GW_EXIT=0"), "{screen}");
    // Cooked mode and echo are back, and the alternate screen is gone.
    let modes = screen
        .lines()
        .find(|l| l.contains("icanon"))
        .unwrap_or_default()
        .to_string();
    assert!(
        modes.split_whitespace().any(|m| m == "icanon") && modes.contains("echo"),
        "terminal left in raw mode: {modes:?}\n{screen}"
    );
    assert!(!modes.contains("-icanon") && !modes.contains("-echo"), "{modes}");
    assert!(!screen.contains("Citation ledger"), "{screen}");
}
