//! Long sessions and their files, end to end with the real binary against the scripted
//! OpenAI-compatible server: two writers on one session file never lose a question, new
//! sessions get unique names, and a save killed midway leaves the previous or the new
//! file (never a torn one) and no temporary file after the next save.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::support::scripted_server::{Reply, ScriptedServer};
use crate::support::{hashembed, home};
use groundwork::session::Session;
use serde_json::{Value, json};

struct Home {
    dir: tempfile::TempDir,
    db: String,
    _embed: hashembed::EmbedServer,
}

impl Home {
    /// A home with a small knowledge base.
    async fn new() -> Home {
        let embed = hashembed::start().await;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("kb.lancedb").to_str().unwrap().to_string();
        let home = Home {
            dir,
            db,
            _embed: embed,
        };
        let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ingest/sample.md");
        let url = home._embed.url.clone();
        let o = home
            .run(&[
                "--db",
                &home.db.clone(),
                "ingest",
                sample.to_str().unwrap(),
                "--embed-url",
                &url,
                "--embed-model",
                hashembed::MODEL,
            ])
            .await;
        assert!(o.status.success(), "{}", err(&o));
        home
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
        cmd.args(args).env("OPENAI_API_KEY", "sk-test");
        home::hermetic(&mut cmd, self.dir.path());
        cmd
    }

    async fn run(&self, args: &[&str]) -> Output {
        let mut cmd = self.command(args);
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap()
    }

    /// `ask QUESTION` with a plain text answer expected (no policy, no compaction).
    fn ask_args(&self, server: &ScriptedServer, session: Option<&Path>, q: &str) -> Vec<String> {
        let mut v = vec!["--db".to_string(), self.db.clone()];
        if let Some(s) = session {
            v.extend(["--session".to_string(), s.to_str().unwrap().to_string()]);
        }
        v.extend(
            [
                "--model-url",
                &server.base_url(),
                "--model",
                "scripted",
                "ask",
                q,
                "--no-policy",
                "--no-compaction",
            ]
            .map(String::from),
        );
        v
    }

    fn spawn(&self, args: &[String]) -> Child {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.command(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    async fn ask(&self, server: &ScriptedServer, session: Option<&Path>, q: &str) -> Output {
        let args = self.ask_args(server, session, q);
        self.run(&args.iter().map(String::as_str).collect::<Vec<_>>())
            .await
    }
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

async fn wait_child(child: Child) -> Output {
    tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap()
}

/// Waits (bounded) until the server has received `n` chat requests.
async fn until_requests(server: &ScriptedServer, n: usize) {
    for _ in 0..6000 {
        if server.requests().len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the server never received {n} request(s)");
}

/// The user prompts of a session file, in order.
fn prompts(path: &Path) -> Vec<String> {
    let v = serde_json::to_value(Session::load(path).unwrap()).unwrap();
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["parts"].as_array().unwrap().iter())
        .filter(|p| p["part_kind"] == "user-prompt")
        .map(|p| p["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Everything in `dir` apart from the session files named.
fn others(dir: &Path, sessions: &[&Path]) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| {
            !sessions
                .iter()
                .any(|s| s.file_name().unwrap() == n.as_str())
        })
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_second_ask_on_a_session_being_written_is_refused_and_neither_question_is_lost() {
    let home = Home::new().await;
    let sessions = home.dir.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let session = sessions.join("s.sqlite");
    let server = ScriptedServer::start(vec![Reply::text("Answer zero.")]).await;
    let o = home.ask(&server, Some(&session), "Question zero?").await;
    assert!(o.status.success(), "{}", err(&o));
    // The first answer takes a while, so the second `ask` starts while the first runs.
    server.push(Reply::text("Answer one.").delay(Duration::from_secs(10)));
    let first = home.spawn(&home.ask_args(&server, Some(&session), "Question one?"));
    let first_pid = first.id();
    until_requests(&server, 2).await;

    let o = home.ask(&server, Some(&session), "Question two?").await;
    assert!(!o.status.success(), "the second ask is refused");
    assert_eq!(
        err(&o).trim(),
        format!(
            "error: session {} is being written by another groundwork process (pid {first_pid})",
            session.display()
        ),
        "one clear line"
    );
    assert_eq!(
        server.requests().len(),
        2,
        "the refused question asked nothing"
    );

    let o = wait_child(first).await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o).trim(), "Answer one.");
    assert_eq!(prompts(&session), ["Question zero?", "Question one?"]);

    // Asked again once the first has finished, it continues the same conversation.
    server.push(Reply::text("Answer two."));
    let o = home.ask(&server, Some(&session), "Question two?").await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(
        prompts(&session),
        ["Question zero?", "Question one?", "Question two?"]
    );
    assert_eq!(
        others(&sessions, &[&session]),
        Vec::<String>::new(),
        "no lock or temporary file is left"
    );
}

/// The same for a session file that is not there yet: the first `ask` claims it while its
/// question runs, so the second is refused before it asks anything (not at its save, after
/// a whole run), and no claim is left behind.
#[tokio::test]
async fn a_second_ask_on_a_new_session_is_refused_before_it_asks() {
    let home = Home::new().await;
    let sessions = home.dir.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let session = sessions.join("new.sqlite");
    let server = ScriptedServer::start(vec![
        Reply::text("Answer one.").delay(Duration::from_secs(10)),
    ])
    .await;
    let first = home.spawn(&home.ask_args(&server, Some(&session), "Question one?"));
    let first_pid = first.id();
    until_requests(&server, 1).await;
    assert!(!session.exists(), "nothing is committed yet");

    let o = home.ask(&server, Some(&session), "Question two?").await;
    assert!(!o.status.success(), "the second ask is refused");
    assert_eq!(
        err(&o).trim(),
        format!(
            "error: session {} is being written by another groundwork process (pid {first_pid})",
            session.display()
        )
    );
    assert_eq!(
        server.requests().len(),
        1,
        "the refused question asked nothing"
    );

    let o = wait_child(first).await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(prompts(&session), ["Question one?"]);
    assert_eq!(
        others(&sessions, &[&session]),
        Vec::<String>::new(),
        "no claim is left"
    );
}

#[tokio::test]
async fn an_answer_is_kept_beside_a_session_another_program_changed_meanwhile() {
    let home = Home::new().await;
    let sessions = home.dir.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let session = sessions.join("s.sqlite");
    let server = ScriptedServer::start(vec![Reply::text("Answer one.")]).await;
    assert!(
        home.ask(&server, Some(&session), "Question one?")
            .await
            .status
            .success()
    );

    server.push(Reply::text("Answer two.").delay(Duration::from_secs(3)));
    let asking = home.spawn(&home.ask_args(&server, Some(&session), "Question two?"));
    until_requests(&server, 2).await;
    // Meanwhile another program that takes no lease commits to the session.
    let mut other = Session::load(&session).unwrap();
    other
        .state
        .insert("written_by".into(), json!("another host"));
    other.save(&session).unwrap();

    let o = wait_child(asking).await;
    assert!(
        !o.status.success(),
        "the session was not updated: {}",
        out(&o)
    );
    assert_eq!(out(&o).trim(), "Answer two.", "the answer is printed");
    let line = err(&o);
    let kept = line
        .trim()
        .rsplit_once("your answer is kept in ")
        .map(|(_, p)| PathBuf::from(p))
        .unwrap_or_else(|| panic!("{line}"));
    assert_eq!(
        line.trim(),
        format!(
            "error: {} changed on disk since this question started (another program wrote it); \
             your answer is kept in {}",
            session.display(),
            kept.display()
        )
    );
    // The other writer's file is untouched; the kept file holds the whole conversation.
    assert_eq!(Session::load(&session).unwrap(), other);
    assert_eq!(prompts(&kept), ["Question one?", "Question two?"]);
    let kept_session = Session::load(&kept).unwrap();
    assert_eq!(kept_session.messages.len(), 4);
}

#[tokio::test]
async fn two_new_sessions_started_together_get_two_files() {
    let home = Home::new().await;
    let server = ScriptedServer::start(vec![
        Reply::text("Answer A.").delay(Duration::from_millis(300)),
        Reply::text("Answer B.").delay(Duration::from_millis(300)),
    ])
    .await;
    let a = home.spawn(&home.ask_args(&server, None, "Question A?"));
    let b = home.spawn(&home.ask_args(&server, None, "Question B?"));
    let (a, b) = (wait_child(a).await, wait_child(b).await);
    assert!(a.status.success(), "{}", err(&a));
    assert!(b.status.success(), "{}", err(&b));
    let dir = home.dir.path().join("data/groundwork/sessions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    let mut all: Vec<String> = files.iter().flat_map(|f| prompts(f)).collect();
    all.sort();
    assert_eq!(all, ["Question A?", "Question B?"], "one question in each");
}

/// Issue 42: asking over a JSON session (the demo, as an earlier Groundwork or a haiku.rag
/// host left one) never writes it: the question goes to `NAME.sqlite` beside it, which
/// holds the whole conversation and continues it from then on, and stderr says so.
#[tokio::test]
async fn asking_over_a_json_session_continues_it_beside_and_leaves_it_as_it_was() {
    let home = Home::new().await;
    let dir = home.dir.path().join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("old.json");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions/demo.json"),
        &json,
    )
    .unwrap();
    let before = std::fs::read(&json).unwrap();
    let demo = Session::load(&json).unwrap();
    let server = ScriptedServer::start(vec![Reply::text("Answer one.")]).await;
    let o = home.ask(&server, Some(&json), "Question one?").await;
    assert!(o.status.success(), "{}", err(&o));
    let db = dir.join("old.sqlite");
    assert!(
        err(&o).contains(&format!(
            "{} is kept as it was; the session continues in {}",
            json.display(),
            db.display()
        )),
        "{}",
        err(&o)
    );
    assert!(
        std::fs::read(&json).unwrap() == before,
        "the JSON is as it was"
    );
    let continued = Session::load(&db).unwrap();
    assert_eq!(continued.messages[..demo.messages.len()], demo.messages[..]);
    assert_eq!(continued.messages.len(), demo.messages.len() + 2);

    // Named the same way again, the database continues it.
    server.push(Reply::text("Answer two."));
    let o = home.ask(&server, Some(&json), "Question two?").await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(std::fs::read(&json).unwrap() == before);
    assert_eq!(
        Session::load(&db).unwrap().messages.len(),
        demo.messages.len() + 4
    );
    let last = prompts(&db);
    assert_eq!(last[last.len() - 2..], ["Question one?", "Question two?"]);
}

/// A session of about 10 MB, so that writing it takes long enough to be killed midway.
fn big_session() -> Session {
    let filler = "lorem ipsum dolor sit amet ".repeat(500);
    let mut messages = Vec::new();
    for i in 0..400 {
        messages.push(json!({"kind": "request", "parts": [
            {"part_kind": "user-prompt", "content": format!("Question {i}? {filler}"),
             "timestamp": "2026-01-01T00:00:00Z"}]}));
        messages.push(json!({"kind": "response", "parts": [
            {"part_kind": "text", "content": format!("Answer {i}. {filler}")}],
            "timestamp": "2026-01-01T00:00:00Z"}));
    }
    let text = serde_json::to_string(&json!({"messages": messages, "state": {}})).unwrap();
    Session::from_json(&text, Path::new("big.json")).unwrap()
}

fn temps(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

const SAVE_LOOP: &str = "GROUNDWORK_TEST_SAVE_LOOP";

/// Not a test: the process the kill-during-save test starts (this test binary again) and
/// kills. It saves the big session to `$GROUNDWORK_TEST_SAVE_LOOP` over and over, the
/// state's `n` counting the saves.
#[test]
#[ignore = "a helper process of a_save_killed_midway_leaves_a_whole_file_and_no_temp"]
fn save_loop_helper() {
    let Some(path) = std::env::var_os(SAVE_LOOP) else {
        return;
    };
    let path = PathBuf::from(path);
    let mut session = big_session();
    for n in 1.. {
        session.state.insert("n".into(), json!(n));
        session.save(&path).unwrap();
    }
}

#[test]
fn a_save_killed_midway_leaves_a_whole_file_and_no_temp() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.json");
    let mut session = big_session();
    session.state.insert("n".into(), json!(0));
    session.save(&path).unwrap();
    let messages = session.messages.len();

    let mut kills_mid_write = 0;
    for _ in 0..5 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "long_sessions::save_loop_helper",
                "--ignored",
                "--nocapture",
            ])
            .env(SAVE_LOOP, &path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Kill it the moment a temporary file appears: a save is writing.
        let mut seen = false;
        for _ in 0..2_000_000 {
            if !temps(dir.path()).is_empty() {
                seen = true;
                break;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(seen, "the helper never saved");
        // The file is a whole session, the previous or the next one (parsed without
        // loading, which would clean up).
        let text = std::fs::read_to_string(&path).unwrap();
        let s = Session::from_json(&text, &path).expect("never a torn file");
        assert_eq!(s.messages.len(), messages);
        assert!(s.state["n"].as_u64().is_some());
        if !temps(dir.path()).is_empty() {
            kills_mid_write += 1;
            // Reading the session removes nothing; the next save removes the dead
            // writer's temporary file.
            let left = temps(dir.path());
            Session::load(&path).unwrap();
            assert_eq!(temps(dir.path()), left, "reading removed a file");
            session.save(&path).unwrap();
            assert_eq!(temps(dir.path()), Vec::<String>::new(), "removed by a save");
        }
    }
    assert!(
        kills_mid_write > 0,
        "no kill landed while a save was writing"
    );

    // And the next save removes one as well.
    loop {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "long_sessions::save_loop_helper",
                "--ignored",
                "--nocapture",
            ])
            .env(SAVE_LOOP, &path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        while temps(dir.path()).is_empty() {
            std::thread::sleep(Duration::from_micros(50));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        if !temps(dir.path()).is_empty() {
            break;
        }
    }
    groundwork::session::write_atomic(&path, &session.to_json().unwrap()).unwrap();
    assert_eq!(
        temps(dir.path()),
        Vec::<String>::new(),
        "no temporary file remains"
    );
    assert_eq!(Session::load(&path).unwrap().state["n"], json!(0));
}

// ---------------------------------------------------------------------------------
// The linear format: every request shows exactly what a full copy showed.

use groundwork::engine::events::RequestSnapshot;
use groundwork::engine::messages::ModelMessage;

fn demo_v1() -> String {
    let zst = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sessions/demo_v1.json.zst"),
    )
    .unwrap();
    String::from_utf8(zstd::decode_all(zst.as_slice()).unwrap()).unwrap()
}

/// Everything `inspect` and the inspector show of a request.
fn shown(number: usize, s: &RequestSnapshot) -> String {
    let r = groundwork::host::inspect::InspectedRequest {
        number,
        recorded: true,
        snapshot: s.clone(),
    };
    format!(
        "{}\n{:?}\n{}",
        groundwork::host::inspect::render_request(&r, 120),
        groundwork::host::inspect::align(s),
        groundwork::host::inspect::unified_diff(s)
    )
}

fn assert_same_requests(session: &Session, full: &[RequestSnapshot], what: &str) {
    assert_eq!(session.request_count(), full.len(), "{what}: request count");
    let all: Vec<RequestSnapshot> = session.requests().collect();
    for (i, want) in full.iter().enumerate() {
        let one = session.request(i).unwrap();
        assert!(one == *want, "{what}: request {} differs", i + 1);
        assert!(
            all[i] == *want,
            "{what}: request {} differs (all at once)",
            i + 1
        );
        assert_eq!(
            shown(i + 1, &one),
            shown(i + 1, want),
            "{what}: request {}",
            i + 1
        );
    }
    // The overview's figures, computed without rebuilding requests.
    let inspected = groundwork::host::inspect::requests(session);
    assert_eq!(
        groundwork::host::inspect::render_overview_rows(
            &groundwork::host::inspect::SessionRequests::of(session).overview()
        ),
        groundwork::host::inspect::render_overview(&inspected),
        "{what}: overview"
    );
}

#[test]
fn the_version_1_demo_session_converts_to_linear_form_with_every_request_unchanged() {
    let text = demo_v1();
    let v1: Value = serde_json::from_str(&text).unwrap();
    let full: Vec<RequestSnapshot> =
        serde_json::from_value(v1["groundwork"]["requests"].clone()).unwrap();
    assert_eq!(full.len(), 15);
    let session = Session::from_json(&text, Path::new("demo.json")).unwrap();
    assert_same_requests(&session, &full, "converted");

    // Written in the new form and read back: the same again, and linear in size.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.json");
    session.save(&path).unwrap();
    let written = std::fs::read_to_string(&path).unwrap();
    let v2: Value = serde_json::from_str(&written).unwrap();
    assert_eq!(
        v2["groundwork"]["version"],
        groundwork::session::SESSION_FORMAT_VERSION
    );
    assert_eq!(
        v2["messages"], v1["messages"],
        "messages as pydantic-ai wrote them"
    );
    assert_eq!(v2["state"], v1["state"]);
    let reloaded = Session::load(&path).unwrap();
    assert_same_requests(&reloaded, &full, "written and read back");
    // The same in the session's database.
    let db = dir.path().join("s.sqlite");
    let mut growing = Session::new("m");
    growing.commit(session.messages.clone(), Map::new(), full.iter().cloned());
    growing.save(&db).unwrap();
    assert_same_requests(&Session::load(&db).unwrap(), &full, "in its database");
    let base = serde_json::to_vec(&json!({"messages": v1["messages"], "state": v1["state"]}))
        .unwrap()
        .len();
    assert!(
        written.len() * 2 <= base * 3,
        "{} bytes for {base} bytes of messages and state",
        written.len()
    );
}

fn msg(v: Value) -> ModelMessage {
    serde_json::from_value(v).unwrap()
}

fn request(parts: Vec<Value>, instructions: &str) -> ModelMessage {
    msg(
        json!({"kind": "request", "parts": parts, "instructions": instructions,
               "timestamp": "2026-01-01T00:00:00Z"}),
    )
}

fn response(parts: Vec<Value>) -> ModelMessage {
    msg(json!({"kind": "response", "parts": parts, "timestamp": "2026-01-01T00:00:00Z"}))
}

fn tool(name: &str) -> groundwork::engine::capability::ToolDef {
    serde_json::from_value(json!({"name": name, "description": "d", "parameters": {},
                                  "capability_id": null}))
    .unwrap()
}

/// What compaction does, by hand: earlier search results become receipts, a capsule
/// rides on the question, a redirect is added, a picture is stripped.
fn sent_for(raw: &[ModelMessage], question_start: usize, q: usize) -> Vec<ModelMessage> {
    let mut sent = Vec::new();
    for (i, m) in raw.iter().enumerate() {
        let v = serde_json::to_value(m).unwrap();
        let is_search_return = v["parts"][0]["part_kind"] == "tool-return"
            && v["parts"][0]["tool_name"] == "rag_search";
        if is_search_return && i < question_start {
            let mut r = v.clone();
            r["parts"][0]["content"] = json!("[receipt: evidence no longer needed]");
            sent.push(msg(r));
        } else if i == question_start && q > 0 {
            let mut c = v.clone();
            c["parts"].as_array_mut().unwrap().insert(
                0,
                json!({"part_kind": "user-prompt", "content": format!("[capsule of {q} questions]"),
                                   "timestamp": "2026-01-01T00:00:00Z"}),
            );
            sent.push(msg(c));
        } else {
            sent.push(m.clone());
        }
    }
    if q % 3 == 2 {
        sent.push(request(
            vec![
                json!({"part_kind": "user-prompt", "content": "[redirect] cite your sources",
                        "timestamp": "2026-01-01T00:00:00Z"}),
            ],
            "i",
        ));
    }
    sent
}

#[test]
fn requests_committed_question_by_question_read_back_exactly_and_the_file_stays_linear() {
    let mut session = Session::new("m");
    let mut full: Vec<RequestSnapshot> = Vec::new();
    let big = "result text ".repeat(200);
    for q in 0..40 {
        let instructions = if q < 20 {
            "instructions A"
        } else {
            "instructions B"
        };
        let tools = if q % 10 == 9 {
            vec![tool("rag_search")]
        } else {
            vec![tool("rag_search"), tool("rag_cite")]
        };
        let mut messages = session.messages.clone();
        let start = messages.len();
        let mut snaps = Vec::new();
        messages.push(request(
            vec![
                json!({"part_kind": "user-prompt", "content": format!("Question {q}?"),
                        "timestamp": "2026-01-01T00:00:00Z"}),
            ],
            instructions,
        ));
        let steps = [
            ("rag_search", format!("{big} {q}")),
            ("rag_cite", format!("cited {q}")),
        ];
        for (k, (name, content)) in steps.iter().enumerate() {
            let raw = messages.clone();
            snaps.push(snapshot(
                &raw,
                sent_for(&raw, start, q),
                instructions,
                &tools,
                k + 1,
            ));
            messages.push(response(vec![
                json!({"part_kind": "tool-call", "tool_name": name,
                "args": "{}", "tool_call_id": format!("c{q}{k}")}),
            ]));
            messages.push(request(
                vec![json!({"part_kind": "tool-return", "tool_name": name, "content": content,
                            "tool_call_id": format!("c{q}{k}"), "timestamp": "2026-01-01T00:00:00Z"})],
                instructions,
            ));
        }
        let raw = messages.clone();
        snaps.push(snapshot(
            &raw,
            sent_for(&raw, start, q),
            instructions,
            &tools,
            3,
        ));
        messages.push(response(vec![
            json!({"part_kind": "text", "content": format!("Answer {q}.")}),
        ]));
        if q == 30 {
            // A host that rewrote an early message (the history is not an extension).
            let mut v = serde_json::to_value(&messages[1]).unwrap();
            v["parts"][0]["args"] = json!("{\"rewritten\": true}");
            messages[1] = msg(v);
        }
        full.extend(snaps.iter().cloned());
        session.commit(messages, Map::new(), snaps);
    }
    assert_same_requests(&session, &full, "committed");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    session.save(&path).unwrap();
    let reloaded = Session::load(&path).unwrap();
    assert_same_requests(&reloaded, &full, "written and read back");
    // The same in the session's database.
    let db = dir.path().join("s.sqlite");
    let mut growing = Session::new("m");
    growing.commit(session.messages.clone(), Map::new(), full.iter().cloned());
    growing.save(&db).unwrap();
    assert_same_requests(&Session::load(&db).unwrap(), &full, "in its database");

    // Linear: the requests of the second 20 questions take about as much room as those
    // of the first 20 (full copies take three times as much), and far less than copies.
    let size = |r: &[groundwork::session::LinearRequest]| serde_json::to_vec(r).unwrap().len();
    let reqs = &session.groundwork.requests;
    let (first, second) = (size(&reqs[..60]), size(&reqs[60..]));
    assert!(second * 2 < first * 3, "{first} bytes, then {second}");
    let written = std::fs::metadata(&path).unwrap().len() as usize;
    let v1 = serde_json::to_vec(&full).unwrap().len();
    assert!(
        written * 10 < v1,
        "{written} bytes against {v1} for full copies"
    );
}

use serde_json::Map;

fn snapshot(
    raw: &[ModelMessage],
    sent: Vec<ModelMessage>,
    instructions: &str,
    tools: &[groundwork::engine::capability::ToolDef],
    request: usize,
) -> RequestSnapshot {
    use groundwork::engine::events::TokenCounts;
    RequestSnapshot {
        run_id: "run".into(),
        request,
        raw_tokens: TokenCounts::estimate(instructions, raw),
        compacted_tokens: TokenCounts::estimate(instructions, &sent),
        tokens: None,
        raw: raw.to_vec(),
        compacted: sent,
        tools: tools.to_vec(),
        instructions: instructions.into(),
    }
}
