//! The real binary in a real terminal (tmux): start the workbench against the scripted
//! OpenAI-compatible server, ask a question, see the answer and the ledger row, quit, and
//! find the terminal restored (cooked mode, main screen).

use crate::support::scripted_server::{Reply, ScriptedServer};
use crate::support::tmux::{EXIT_SUFFIX, Tmux, assert_restored};
use crate::support::workbench::{demo_kb, hit};
use serde_json::json;

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
    let session = home.path().join("e2e-session.sqlite");
    // tmux takes OSC 52 from the programs in it into its paste buffer.
    let tmux = Tmux::with_config("e2e", "set -g set-clipboard on\n");
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
                .any(|l| l.contains("1   grounded") && l.contains("How much"))
        })
        .await;
    assert!(screen.contains("Sources (1)"), "{screen}");
    // `y` on the selected source copies it with its reference, through the terminal.
    tmux.send(&["F2"]);
    tmux.send(&["Right"]);
    tmux.send(&["y"]);
    tmux.wait_for("the copy notice", 30, |s| s.contains("copied source [1]"))
        .await;
    let buffer = tmux.cmd().args(["show-buffer"]).output().unwrap();
    let buffer = String::from_utf8_lossy(&buffer.stdout);
    assert!(buffer.contains(&format!("(chunk {chunk})")), "{buffer:?}");
    assert!(buffer.contains("— "), "{buffer:?}");
    // The session was saved, without the API key.
    let saved = crate::support::session_text(&session);
    assert!(saved.contains("61 MWh"));
    assert!(!saved.contains("sk-e2e-SECRET"));
    assert!(!String::from_utf8_lossy(&std::fs::read(&session).unwrap()).contains("sk-e2e-SECRET"));

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
    // The whole frame, status bar included (a capture can catch a frame half drawn).
    let screen = tmux
        .wait_for("the recorded conversation", 60, |s| {
            s.contains("Solar Panel Installation Manual")
                && s.contains("Citation ledger")
                && s.contains("model none configured")
        })
        .await;
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

/// The workbench over the recorded haiku.rag session (no model, no embedding), in a tmux
/// server configured with `tmux_config`, with `config_toml` as Groundwork's config file.
fn open_fixture_in(tmux: &Tmux, home: &std::path::Path, config_toml: Option<&str>, redirect: &str) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    if let Some(c) = config_toml {
        std::fs::create_dir_all(home.join("config/groundwork")).unwrap();
        std::fs::write(home.join("config/groundwork/config.toml"), c).unwrap();
    }
    let script = format!(
        "env -u GROUNDWORK_MODEL_URL -u GROUNDWORK_MODEL HOME={home} XDG_DATA_HOME={home}/data \
         XDG_CONFIG_HOME={home}/config GROUNDWORK_DISCOVER=off \
         {bin} --db {db} open {session} {redirect}; {EXIT_SUFFIX}",
        home = home.display(),
        bin = env!("CARGO_BIN_EXE_groundwork"),
        db = root.join("tests/fixtures/haiku/db.lancedb").display(),
        session = root
            .join("tests/fixtures/haiku_session/session.json")
            .display(),
    );
    tmux.start(&script, 160, 48);
}

/// The light theme's status bar background, and the dark theme's, as `capture-pane -e`
/// shows them (the themes' `Color::Rgb` values).
const LIGHT_STATUS: &str = "48;2;225;225;232";
const DARK_STATUS: &str = "48;2;30;30;40";

/// Issue 14 item 7: tmux (3.3) answers the OSC 11 query with the pane's configured
/// background; on a light one the workbench picks the light theme, on a dark one the
/// dark theme, and a theme set in the config wins. Without an answer (tmux knows no
/// background here) the dark theme paints its own black background.
#[tokio::test]
async fn the_theme_follows_the_background_the_terminal_reports() {
    let cases = [
        (
            "light",
            "set -g window-style bg=colour231\n",
            None,
            LIGHT_STATUS,
        ),
        (
            "dark",
            "set -g window-style bg=colour16\n",
            None,
            DARK_STATUS,
        ),
        (
            "forced",
            "set -g window-style bg=colour231\n",
            Some("[tui]\ntheme = \"dark\"\n"),
            DARK_STATUS,
        ),
        ("unknown", "", None, DARK_STATUS),
    ];
    for (name, tmux_config, config_toml, status_bg) in cases {
        let home = tempfile::tempdir().unwrap();
        let tmux = Tmux::with_config(&format!("bg-{name}"), tmux_config);
        open_fixture_in(&tmux, home.path(), config_toml, "");
        tmux.wait_for("the first frame", 60, |s| {
            s.contains("Citation ledger") && s.contains("model none configured")
        })
        .await;
        let styled = tmux.capture_styled();
        assert!(
            styled.contains(status_bg),
            "{name}: the status bar should have {status_bg}:\n{styled}"
        );
        let other = if status_bg == LIGHT_STATUS {
            DARK_STATUS
        } else {
            LIGHT_STATUS
        };
        assert!(!styled.contains(other), "{name}:\n{styled}");
        if name == "forced" || name == "unknown" {
            // The dark theme on a light or unknown background paints black under the
            // header and the panes (ANSI colour 0).
            let header = styled.lines().next().unwrap_or_default();
            assert!(
                header.contains("[40m") || header.contains("48;5;0m"),
                "{name}: header not on the theme's background: {header:?}"
            );
        }
        // The query's answer did not leak into the input as typed text.
        let screen = tmux.capture();
        assert!(!screen.contains("rgb:"), "{name}:\n{screen}");
        assert!(!screen.contains("11;"), "{name}:\n{screen}");
        tmux.send(&["C-q"]);
        let screen = tmux.wait_exit().await;
        assert_restored(&screen, "Citation ledger");
    }
}

/// Issue 14 item 17: with stdin a terminal but stdout redirected to a file, the workbench
/// refuses in one line (on stderr) and exits non-zero, drawing nothing into the file.
#[tokio::test]
async fn the_workbench_with_stdout_redirected_refuses_in_one_line() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("out.txt");
    let tmux = Tmux::new("redirect");
    open_fixture_in(&tmux, home.path(), None, &format!("> {}", out.display()));
    let screen = tmux.wait_exit().await;
    assert!(screen.contains("GW_EXIT=1"), "{screen}");
    assert!(
        screen.contains("error: the workbench needs a terminal"),
        "{screen}"
    );
    assert!(screen.contains("groundwork inspect SESSION"), "{screen}");
    assert!(!screen.contains("os error"), "{screen}");
    assert_eq!(
        std::fs::read(&out).unwrap(),
        b"",
        "nothing drawn into the file"
    );
}

/// Issue 41: a session remembers the knowledge base its questions ran against. `ask`
/// records it; `open SESSION` without `--db` reopens it (not the default database), so
/// its sources are read from it; once the database is moved, `open` says so in one line
/// and names `--db`. A haiku.rag host's session, which records none, says so.
#[tokio::test]
async fn a_session_reopens_the_knowledge_base_it_ran_against() {
    let kb = demo_kb().await;
    let chunk = hit(&kb.store, "monthly solar output", |_| true)
        .await
        .chunk_id
        .unwrap();
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "solar output July"})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [chunk.clone()]})),
        Reply::text("The array peaked in July at 61 MWh."),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let session = home.path().join("s.sqlite");
    let env = |cmd: &mut std::process::Command| {
        cmd.env("HOME", home.path())
            .env("XDG_DATA_HOME", home.path().join("data"))
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .env("GROUNDWORK_DISCOVER", "off")
            .env("OPENAI_API_KEY", "sk-kb-SECRET")
            .env_remove("HAIKU_RAG_DB")
            .env_remove("GROUNDWORK_MODEL_URL")
            .env_remove("GROUNDWORK_MODEL");
    };
    let mut ask = std::process::Command::new(env!("CARGO_BIN_EXE_groundwork"));
    ask.args([
        "--db",
        &kb.db,
        "--model-url",
        &server.base_url(),
        "ask",
        "--session",
    ])
    .arg(&session)
    .arg("How much in July?");
    env(&mut ask);
    let o = tokio::task::spawn_blocking(move || ask.output().unwrap())
        .await
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let saved = crate::support::session_json(&session);
    let recorded = &saved["groundwork"]["knowledge_bases"];
    assert_eq!(recorded[0]["location"], kb.db.as_str(), "{recorded}");
    assert_eq!(recorded[0]["questions"], json!([0]));
    assert!(
        recorded[0]["embedder"]
            .as_str()
            .unwrap()
            .contains("hashembed")
    );

    // Reopened without --db: the status bar names the recorded database, and the source
    // is the cited chunk as that database holds it.
    let tmux = Tmux::new("reopen");
    let script = format!(
        "env -u GROUNDWORK_MODEL_URL -u GROUNDWORK_MODEL -u HAIKU_RAG_DB HOME={home} \
         XDG_DATA_HOME={home}/data XDG_CONFIG_HOME={home}/config GROUNDWORK_DISCOVER=off \
         {bin} open {session}; {EXIT_SUFFIX}",
        home = home.path().display(),
        bin = env!("CARGO_BIN_EXE_groundwork"),
        session = session.display(),
    );
    tmux.start(&script, 160, 48);
    let stored = kb.store.get_chunk(&chunk).await.unwrap().unwrap().content;
    let first_line = stored.lines().next().unwrap().to_string();
    let screen = tmux
        .wait_for("the session over its own database", 60, |s| {
            s.contains("The array peaked in July") && s.contains(&format!("│ {first_line}"))
        })
        .await;
    assert!(screen.contains("demo.lancedb"), "{screen}");
    assert!(
        !screen.contains("haiku.rag.lancedb"),
        "not the default: {screen}"
    );
    tmux.send(&["C-q"]);
    tmux.wait_exit().await;

    // The database moved: one line, naming --db.
    let moved = kb.dir.path().join("moved.lancedb");
    std::fs::rename(&kb.db, &moved).unwrap();
    let tmux = Tmux::new("reopen-gone");
    tmux.start(&script, 160, 48);
    let screen = tmux.wait_exit().await;
    // The line as printed (the terminal wrapped it, where a space at a line's end is lost).
    let squeezed = |t: &str| t.split_whitespace().collect::<String>();
    assert!(
        squeezed(&screen).contains(&squeezed(&format!(
            "error: {} ran against the knowledge base {}, which is not there any more; give --db PATH to open it where it is now",
            session.display(),
            kb.db
        ))),
        "{screen}"
    );
    assert!(screen.contains("GW_EXIT=1"), "{screen}");
    std::fs::rename(&moved, &kb.db).unwrap();
}

/// Issue 41's acceptance on a real PDF: libtasn1-doc's manual ingested through the CLI
/// (the hashembed embedder), two questions asked in the workbench against a scripted
/// model. The source under the answer is the cited chunk's own text as the store holds
/// it, numbered as the answer's marker; the redirected answer and its redirect are on the
/// screen; visual grounding opens on a page of the cited chunk with its item matched; and
/// the session opened again without `--db` reopens the manual's database.
#[tokio::test]
async fn a_session_over_the_libtasn1_manual_shows_the_evidence_itself() {
    use crate::support::hashembed;
    use crate::support::home::hermetic;
    let manual = std::path::Path::new("/usr/share/doc/libtasn1-doc/libtasn1.pdf");
    assert!(
        manual.is_file(),
        "{} is missing: install libtasn1-doc (.ci/setup-tests does)",
        manual.display()
    );
    let embed = hashembed::start().await;
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join("manual.lancedb").display().to_string();
    let bin = env!("CARGO_BIN_EXE_groundwork");
    let mut ingest = std::process::Command::new(bin);
    ingest.args(["--db", &db, "ingest"]).arg(manual).args([
        "--embed-url",
        &embed.url,
        "--embed-model",
        hashembed::MODEL,
    ]);
    hermetic(&mut ingest, home.path());
    let o = tokio::task::spawn_blocking(move || ingest.output().unwrap())
        .await
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // The chunk that answers "which options does asn1Parser take", as the store holds it.
    let store = groundwork::store::Store::open(&db).await.unwrap();
    let doc = store.list_documents(None).await.unwrap().remove(0);
    let cited = store
        .chunks_of(&doc.id)
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.content.contains("asn1Parser [OPTION]"))
        .expect("the chunk with asn1Parser's usage");
    let stored = store.result_for_chunk(&cited.id).await.unwrap().unwrap();
    let first_line = cited
        .content
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap()
        .trim()
        .chars()
        // What fits on the pane's first line of the passage.
        .take(40)
        .collect::<String>();
    assert!(
        first_line.starts_with("Usage: asn1Parser [OPTION]"),
        "{first_line}"
    );

    let server = ScriptedServer::start(vec![
        Reply::tool_call(
            "rag_search",
            json!({"query": "Usage: asn1Parser [OPTION] FILE"}),
        ),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [cited.id.clone()]})),
        Reply::text("asn1Parser reads an ASN.1 definitions file and writes it as a C array [1]."),
        Reply::text("It was written by Fabio Fiorina in 2001."),
        Reply::tool_call("rag_cite", json!({"chunk_ids": []})),
        Reply::text(
            "The manual does not say who wrote the tool; my earlier answer is not supported.",
        ),
    ])
    .await;
    let session = home.path().join("manual-session.sqlite");
    // tmux takes OSC 52 from the programs in it into its paste buffer (`y` below).
    let tmux = Tmux::with_config("libtasn1", "set -g set-clipboard on\n");
    let env = format!(
        "env -u GROUNDWORK_MODEL_URL -u GROUNDWORK_MODEL -u HAIKU_RAG_DB HOME={home} \
         XDG_DATA_HOME={home}/data XDG_CONFIG_HOME={home}/config GROUNDWORK_DISCOVER=off \
         GROUNDWORK_EMBED_URL={embed}",
        home = home.path().display(),
        embed = embed.url,
    );
    tmux.start(
        &format!(
            "{env} {bin} --db {db} --session {session} --model-url {url} --model scripted-model; {EXIT_SUFFIX}",
            session = session.display(),
            url = server.base_url(),
        ),
        160,
        48,
    );
    tmux.wait_for("the first frame", 60, |s| s.contains("Ask a question"))
        .await;
    tmux.send(&["What does asn1Parser do, and which options does it take?"]);
    tmux.send(&["Enter"]);
    let screen = tmux
        .wait_for("the cited passage under the answer", 60, |s| {
            s.contains("writes it as a C array [1].") && s.contains(&format!("│ {first_line}"))
        })
        .await;
    // The marker [1] and the source [1] are the same chunk: the one source listed.
    assert!(screen.contains("Sources (1)"), "{screen}");
    assert!(screen.contains("▶ [1] Libtasn1 (p."), "{screen}");
    // Its reference: the page and section the chunk itself is on.
    assert!(
        screen.contains(&format!("Libtasn1, p. {}, §", stored.page_numbers[0])),
        "{screen}"
    );
    tmux.send(&["Who wrote asn1Parser?"]);
    tmux.send(&["Enter"]);
    let screen = tmux
        .wait_for("the redirect trail", 60, |s| {
            s.contains("The manual does not say who wrote the tool")
                && s.contains("Assistant, first (caught by the citation policy):")
                && s.contains("It was written by Fabio Fiorina in 2001.")
                && s.contains("↳ redirected: this answer cited nothing")
        })
        .await;
    assert!(screen.contains("ungrounded · redirected"), "{screen}");
    // The conversation as a reviewer reads it (the pane's 80 columns of the 160).
    let conversation: String = screen
        .lines()
        .take_while(|l| !l.contains("Ask a question"))
        .map(|l| l.chars().take(80).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n");
    let settings = crate::support::workbench::redactions();
    settings.bind(|| insta::assert_snapshot!("libtasn1_conversation_160x48", conversation));

    // Visual grounding of the first question's source: a page of the chunk, matched.
    tmux.send(&["F2"]);
    tmux.send(&["Right"]);
    tmux.send(&["V"]);
    let screen = tmux
        .wait_for("the grounding page", 90, |s| {
            s.contains("Visual Grounding") && s.contains("matched (orange")
        })
        .await;
    let status = screen
        .lines()
        .find(|l| l.contains("matched (orange"))
        .unwrap();
    let page: i64 = status
        .split(" · page ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a page number in {status:?}"));
    assert!(
        stored.page_numbers.contains(&page),
        "page {page} is one of the chunk's pages {:?}: {status}",
        stored.page_numbers
    );
    assert!(!status.contains(" 0 matched"), "{status}");
    tmux.send(&["Escape"]);
    // Closed before the next key: an Escape and a key that follow each other closely read
    // as Alt and the key.
    tmux.wait_for("the grounding closed", 30, |s| {
        !s.contains("Visual Grounding")
    })
    .await;

    // Reading it: `y` copies the selected source with its page-precise reference.
    let reference = format!(
        "Libtasn1, p. {}, §3.1 Invoking asn1Parser",
        stored.page_numbers[0]
    );
    tmux.send(&["y"]);
    tmux.wait_for("the copy notice", 30, |s| s.contains("copied source [1]"))
        .await;
    let buffer = tmux.cmd().args(["show-buffer"]).output().unwrap();
    let buffer = String::from_utf8_lossy(&buffer.stdout).into_owned();
    assert!(
        buffer.starts_with("Usage: asn1Parser [OPTION] FILE"),
        "{buffer:?}"
    );
    assert!(buffer.contains(&reference), "{buffer:?}");
    assert!(
        buffer.contains(&format!("(chunk {})", cited.id)),
        "{buffer:?}"
    );
    // `/` finds text of the conversation: the redirected answer's.
    tmux.send(&["/"]);
    tmux.send(&["Fabio Fiorina"]);
    tmux.send(&["Enter"]);
    tmux.wait_for("the find notice", 30, |s| {
        s.contains("\"Fabio Fiorina\": line 1 of 1")
    })
    .await;

    // Reviewing it: the first answer marked supported from its source, the redirected one
    // invented from the ledger, with a note; both kept in the session file at once.
    tmux.send(&["m"]);
    tmux.send(&["s"]);
    tmux.wait_for("the first mark", 30, |s| {
        s.contains("ledger: grounded · marked supported")
    })
    .await;
    tmux.send(&["F4"]);
    tmux.send(&["m"]);
    tmux.send(&["i"]);
    tmux.wait_for("the second mark", 30, |s| s.contains("marked invented"))
        .await;
    tmux.send(&["m"]);
    tmux.send(&["n"]);
    tmux.send(&["the manual names no author"]);
    tmux.send(&["Enter"]);
    // A question's identity is the index of the message that asked it.
    let second = |saved: &serde_json::Value| {
        saved["messages"].as_array().unwrap().iter().position(|m| {
            m["parts"]
                .as_array()
                .is_some_and(|p| p.iter().any(|p| p["content"] == "Who wrote asn1Parser?"))
        })
    };
    let want = |q: usize| {
        json!([
            {"question": 0, "mark": "supported"},
            {"question": q, "mark": "invented", "note": "the manual names no author"}
        ])
    };
    // The marks are saved as they are made (the save is the workbench's, off its UI task).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let saved = crate::support::session_json(&session);
        let q = second(&saved).expect("the second question in the session");
        if saved["groundwork"]["reviews"] == want(q) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the marks in the file: {}",
            saved["groundwork"]["reviews"]
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    tmux.send(&["C-q"]);
    let screen = tmux.wait_exit().await;
    assert_restored(&screen, "Ask a question about the knowledge base");
    // The export quotes the cited passage with its reference, and carries the marks.
    let mut export = std::process::Command::new(bin);
    export
        .args(["export"])
        .arg(&session)
        .args(["--format", "md"]);
    hermetic(&mut export, home.path());
    let o = export.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(md.contains("Usage: asn1Parser [OPTION] FILE"), "{md}");
    assert!(md.contains(&reference), "{md}");
    assert!(md.contains("*Review: marked supported"), "{md}");
    assert!(
        md.contains("*Review: marked invented") && md.contains("the manual names no author"),
        "{md}"
    );

    // Opened again without --db: the manual's database, and the same passage.
    let tmux = Tmux::new("libtasn1-reopen");
    tmux.start(
        &format!(
            "{env} {bin} open {session}; {EXIT_SUFFIX}",
            session = session.display()
        ),
        160,
        48,
    );
    let screen = tmux
        .wait_for("the session over the manual", 60, |s| {
            s.contains("manual.lancedb") && s.contains(&format!("│ {first_line}"))
        })
        .await;
    assert!(!screen.contains("haiku.rag.lancedb"), "{screen}");
    tmux.send(&["C-q"]);
    tmux.wait_exit().await;

    // The manual deleted from the database since: opened again, the cited passage is
    // still quoted, as the question read it, and the ledger says what changed.
    let mut delete = std::process::Command::new(bin);
    delete.args(["--db", &db, "delete", &doc.id]);
    hermetic(&mut delete, home.path());
    let o = delete.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tmux = Tmux::new("libtasn1-deleted");
    tmux.start(
        &format!(
            "{env} {bin} open {session}; {EXIT_SUFFIX}",
            session = session.display()
        ),
        160,
        48,
    );
    tmux.wait_for("the passage as the question read it", 60, |s| {
        s.contains(&format!("│ {first_line}"))
            && s.contains("source changed since cited: not in the knowledge base now")
    })
    .await;
    tmux.send(&["F4"]);
    tmux.send(&["Up"]);
    tmux.wait_for("what changed since", 30, |s| {
        s.contains("knowledge base: 1 document deleted since")
    })
    .await;
    tmux.send(&["C-q"]);
    tmux.wait_exit().await;
}
