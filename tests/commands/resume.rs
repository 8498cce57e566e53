//! A session asked through its resume row (issue 10, on SQLite since issue 42): the
//! real binary against the scripted server, search → cite → answer with compaction and
//! the policy on, as a user asks. The same questions are asked of two sessions, one
//! keeping its resume row and one whose row is removed before every `ask` (so it is read
//! whole every time): the model must be sent the same bodies, and both files must read
//! back the same conversation, requests and recorded starts. Also: a question over the
//! resume row reads no history (a message row is spoiled and the question still runs),
//! a row the session no longer matches is not used, and a question that cannot run over
//! the window leaves no row for the commit it made.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::scripted_server::{Reply, ScriptedServer};
use crate::support::{hashembed, home};
use groundwork::session::Session;
use serde_json::{Value, json};

struct Home {
    dir: tempfile::TempDir,
    db: String,
    embed: hashembed::EmbedServer,
    chunks: Vec<String>,
}

impl Home {
    async fn new() -> Home {
        let embed = hashembed::start().await;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("kb.lancedb").to_str().unwrap().to_string();
        let mut home = Home {
            dir,
            db,
            embed,
            chunks: Vec::new(),
        };
        let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ingest/sample.md");
        let o = home.run(&["ingest", sample.to_str().unwrap()]).await;
        assert!(o.status.success(), "{}", err(&o));
        let found = home
            .run(&["search", "the operator log", "--limit", "5", "--json"])
            .await;
        let found: Value = serde_json::from_slice(&found.stdout).unwrap();
        home.chunks = found
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["chunk_id"].as_str().map(str::to_string))
            .collect();
        assert!(!home.chunks.is_empty());
        home
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
        cmd.args(["--db", &self.db, "--embed-url", &self.embed.url])
            .args(["--embed-model", hashembed::MODEL])
            .args(args)
            .env("OPENAI_API_KEY", "sk-test")
            .env("GROUNDWORK_LOG", "warn,groundwork::host::resume=debug");
        home::hermetic(&mut cmd, self.dir.path());
        cmd
    }

    async fn run(&self, args: &[&str]) -> Output {
        let mut cmd = self.command(args);
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap()
    }

    /// Question `q` (its text padded by `pad` bytes, a pasted document say) asked of
    /// `session`: the server searches, cites one chunk and answers.
    async fn ask(&self, server: &ScriptedServer, session: &Path, q: usize, pad: usize) -> Output {
        let chunk = &self.chunks[q % self.chunks.len()];
        server.push(Reply::tool_call(
            "rag_search",
            json!({"query": format!("question {q}: the operator log"), "limit": 3}),
        ));
        server.push(Reply::tool_call("rag_cite", json!({"chunk_ids": [chunk]})));
        server.push(Reply::text(format!(
            "Answer {q}: the log says so [{chunk}]."
        )));
        let question = format!(
            "Question {q}: what does the operator log say?{}",
            " pasted".repeat(pad / 7)
        );
        self.ask_as(server, session, "scripted", &question, &[])
            .await
    }

    /// `question` asked of `session` by `model` at `server` (its replies pushed), with
    /// `extra` options.
    async fn ask_as(
        &self,
        server: &ScriptedServer,
        session: &Path,
        model: &str,
        question: &str,
        extra: &[&str],
    ) -> Output {
        let url = server.base_url();
        let mut args = vec![
            "--session",
            session.to_str().unwrap(),
            "--model-url",
            &url,
            "--model",
            model,
            "ask",
            question,
        ];
        args.extend_from_slice(extra);
        self.run(&args).await
    }

    /// How many questions the log says were asked over a resume file.
    fn resumed(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("data/groundwork/logs/groundwork.log"))
            .or_else(|_| std::fs::read_to_string(self.log_path()))
            .unwrap_or_default()
            .matches("asked over the resume row")
            .count()
    }

    fn log_path(&self) -> PathBuf {
        let logs = walk(self.dir.path())
            .into_iter()
            .find(|p| p.file_name().is_some_and(|n| n == "groundwork.log"));
        logs.unwrap_or_else(|| self.dir.path().join("no-log"))
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Whether the session has a resume row for its last commit.
fn has_resume(session: &Path) -> bool {
    let c =
        rusqlite::Connection::open_with_flags(session, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    c.query_row(
        "SELECT count(*) FROM resume WHERE generation = (SELECT max(seq) FROM commits)",
        [],
        |r| r.get::<_, i64>(0),
    )
    .unwrap()
        > 0
}

/// Runs `sql` on the session's file, as another program would.
fn sql(session: &Path, sql: &str) {
    rusqlite::Connection::open(session)
        .unwrap()
        .execute_batch(sql)
        .unwrap();
}

/// `v` without what differs between two runs of the same conversation: run ids,
/// timestamps, durations and the server's address.
fn normalized(mut v: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                for k in [
                    "run_id",
                    "timestamp",
                    "started_at",
                    "duration_ms",
                    "provider_url",
                ] {
                    m.remove(k);
                }
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

/// A session as read back: its messages, state, every request whole and every
/// question's recorded start, normalized.
fn read_back(path: &Path) -> Value {
    let s = Session::load(path).unwrap();
    let requests: Vec<Value> = s
        .requests()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    let starts: Vec<Value> = s
        .groundwork
        .timings
        .iter()
        .map(|t| serde_json::to_value(&t.start).unwrap())
        .collect();
    normalized(json!({
        "messages": s.messages,
        "state": s.state,
        "requests": requests,
        "starts": starts,
    }))
}

/// (question, padding): padded questions (a pasted document each), plain ones, padded
/// ones again, and plain ones after them.
fn plan() -> Vec<(usize, usize)> {
    let mut p: Vec<(usize, usize)> = (0..9).map(|q| (q, 120_000)).collect();
    p.extend((9..13).map(|q| (q, 0)));
    p.extend((13..16).map(|q| (q, 120_000)));
    p.extend((16..19).map(|q| (q, 0)));
    p
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_session_asked_through_its_resume_row_reads_back_as_asked_whole() {
    let home = Home::new().await;
    let resumed = home.dir.path().join("resumed.sqlite");
    let whole = home.dir.path().join("whole.sqlite");
    let (a, b) = (
        ScriptedServer::start(Vec::new()).await,
        ScriptedServer::start(Vec::new()).await,
    );
    let mut over_resume = 0;
    for (q, pad) in plan() {
        let before = home.resumed();
        let o = home.ask(&a, &resumed, q, pad).await;
        assert!(o.status.success(), "question {q}: {}", err(&o));
        let used = home.resumed() > before;
        over_resume += usize::from(used);
        // The whole arm never has a resume row when it asks.
        if whole.exists() {
            sql(&whole, "DELETE FROM resume");
        }
        let before = home.resumed();
        let o = home.ask(&b, &whole, q, pad).await;
        assert!(o.status.success(), "question {q} (whole): {}", err(&o));
        assert_eq!(home.resumed(), before, "question {q} (whole) was resumed");
        if q == 0 {
            assert!(!used, "a new session has no resume row");
        } else {
            assert!(used, "question {q} was not asked over the resume row");
        }
        assert!(has_resume(&resumed), "question {q} wrote the resume row");
    }
    assert_eq!(over_resume, plan().len() - 1);

    // The model was sent the same bodies, request by request.
    let (sent_a, sent_b) = (a.requests(), b.requests());
    assert_eq!(sent_a.len(), sent_b.len());
    for (i, (x, y)) in sent_a.iter().zip(&sent_b).enumerate() {
        assert!(x == y, "request {i} differs between the two arms");
    }
    // Both files read back the same conversation, requests and starts.
    let (x, y) = (read_back(&resumed), read_back(&whole));
    for key in ["messages", "starts", "requests"] {
        let (p, q) = (x[key].as_array().unwrap(), y[key].as_array().unwrap());
        assert_eq!(p.len(), q.len(), "{key}");
        for (i, (a, b)) in p.iter().zip(q).enumerate() {
            assert!(a == b, "{key} {i} reads back otherwise");
        }
    }
    assert!(x["state"] == y["state"], "the state reads back otherwise");
    let o = home
        .run(&["inspect", resumed.to_str().unwrap(), "--request", "1"])
        .await;
    assert!(o.status.success(), "{}", err(&o));

    // A question over the resume row reads no history: with the first message's row
    // spoiled (reading the session whole refuses it), it still runs.
    sql(
        &resumed,
        "UPDATE messages SET body = '{\"spoiled\": 1}' WHERE seq = 0",
    );
    assert!(Session::load(&resumed).is_err());
    let before = home.resumed();
    let o = home.ask(&a, &resumed, 19, 0).await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(home.resumed(), before + 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resume_row_the_session_no_longer_matches_is_not_used() {
    let home = Home::new().await;
    let session = home.dir.path().join("s.sqlite");
    let server = ScriptedServer::start(Vec::new()).await;
    for q in 0..10 {
        let o = home.ask(&server, &session, q, 20_000).await;
        assert!(o.status.success(), "{}", err(&o));
    }
    assert!(has_resume(&session));
    // Another program commits to the session: the resume row no longer matches it, and
    // the next question reads the session whole.
    let mut other = Session::load(&session).unwrap();
    other
        .state
        .insert("written_by".into(), json!("another host"));
    other.save(&session).unwrap();
    assert!(!has_resume(&session));
    let before = home.resumed();
    let o = home.ask(&server, &session, 10, 0).await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(home.resumed(), before, "the stale resume row was used");
    let s = Session::load(&session).unwrap();
    assert_eq!(s.state["written_by"], json!("another host"));
    assert!(has_resume(&session), "written anew after the save");
    // Asked over it now, the question keeps the other host's state too.
    let o = home.ask(&server, &session, 11, 0).await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(home.resumed(), before + 1);
    let s = Session::load(&session).unwrap();
    assert_eq!(s.state["written_by"], json!("another host"));
    assert_eq!(
        s.messages.len(),
        12 * 6,
        "every question's six messages are there"
    );

    // A resume row whose wire text is cut short is not used.
    sql(
        &session,
        "UPDATE wire SET body = substr(body, 1, length(body) - 10) \
         WHERE start = (SELECT max(start) FROM wire)",
    );
    let o = home.ask(&server, &session, 12, 0).await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(home.resumed(), before + 1);
    // Nor one whose text does not match its checksum.
    sql(
        &session,
        "UPDATE wire SET body = replace(body, 'e', 'E') WHERE start = 0",
    );
    let o = home.ask(&server, &session, 13, 0).await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(home.resumed(), before + 1, "a spoiled resume row was used");
    let s = Session::load(&session).unwrap();
    assert_eq!(s.messages.len(), 14 * 6);

    // A model counted by a real tokenizer (tiktoken knows `gpt-4o` by name) must count every
    // message, so its question reads the session whole, commits it all, and leaves no
    // resume row for its commit (what it would hold are estimates, not that tokenizer's
    // counts).
    assert!(has_resume(&session));
    let chunk = &home.chunks[0];
    server.push(Reply::tool_call(
        "rag_search",
        json!({"query": "the operator log", "limit": 3}),
    ));
    server.push(Reply::tool_call("rag_cite", json!({"chunk_ids": [chunk]})));
    server.push(Reply::text(format!("Counted answer [{chunk}].")));
    let o = home
        .ask_as(&server, &session, "gpt-4o", "Counted question?", &[])
        .await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(
        home.resumed(),
        before + 1,
        "a tokenizer's question was resumed"
    );
    assert!(!has_resume(&session));
    let s = Session::load(&session).unwrap();
    assert_eq!(s.messages.len(), 15 * 6);

    // The next question reads it whole and writes the resume row again.
    let o = home.ask(&server, &session, 15, 0).await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(home.resumed(), before + 1);
    assert!(has_resume(&session));

    // A question composed otherwise (no compaction, no policy) reads the session whole
    // and leaves no row for its commit, which would not describe what its requests sent.
    server.push(Reply::text("Plain answer."));
    let o = home
        .ask_as(
            &server,
            &session,
            "scripted",
            "Plain question?",
            &["--no-compaction", "--no-policy"],
        )
        .await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(!has_resume(&session));
    assert_eq!(home.resumed(), before + 1);
}
