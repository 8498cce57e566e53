//! Sessions on SQLite: a kill at any moment of a run of commits loses no committed
//! question; two writers are serialised; the journals earlier Groundwork versions kept
//! beside JSON sessions are read, never written, moved or removed, and one that cannot
//! be applied whole refuses the session in one line instead of losing what it holds.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use groundwork::session::{Session, journal_path, store::Lease};
use serde_json::{Value, json};

/// Question `i` and its answer, with some bulk.
fn question(i: usize) -> Vec<Value> {
    let filler = "lorem ipsum dolor sit amet ".repeat(20);
    vec![
        json!({"kind": "request", "parts": [
            {"part_kind": "user-prompt", "content": format!("Question {i}? {filler}"),
             "timestamp": "2026-01-01T00:00:00Z"}]}),
        json!({"kind": "response", "parts": [
            {"part_kind": "text", "content": format!("Answer {i}. {filler}")}],
            "timestamp": "2026-01-01T00:00:00Z"}),
    ]
}

/// A session of `n` questions whose state counts them and cites one chunk per question.
fn session_of(n: usize) -> Session {
    let messages: Vec<Value> = (0..n).flat_map(question).collect();
    let text = serde_json::to_string(&json!({"messages": messages, "state": {}})).unwrap();
    let mut s = Session::from_json(&text, Path::new("s.json")).unwrap();
    set_state(&mut s, n);
    s
}

fn set_state(s: &mut Session, n: usize) {
    let citations: serde_json::Map<String, Value> = (0..n)
        .map(|i| {
            (
                format!("chunk-{i}"),
                json!({"content": format!("cited by {i}")}),
            )
        })
        .collect();
    s.state.insert(
        "rag".into(),
        json!({"citation_index": citations, "question": n, "citations": [format!("chunk-{n}")]}),
    );
}

/// Adds question `n` (0-based) the way a run does: the history replaced by a longer one.
fn add_question(s: &mut Session, n: usize) {
    let mut messages = s.messages.clone();
    for m in question(n) {
        messages.push(serde_json::from_value(m).unwrap());
    }
    s.set_messages(messages);
    set_state(s, n + 1);
}

fn questions_in(s: &Session) -> usize {
    assert_eq!(s.messages.len() % 2, 0, "whole questions only");
    let n = s.messages.len() / 2;
    assert_eq!(
        s.state["rag"]["question"],
        json!(n),
        "state and history agree"
    );
    for (i, m) in s.messages.chunks(2).enumerate() {
        let text = serde_json::to_string(&m[0]).unwrap();
        assert!(
            text.contains(&format!("Question {i}?")),
            "question {i} in place"
        );
    }
    n
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Every file in `dir` with its bytes.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    names(dir)
        .into_iter()
        .map(|n| {
            let bytes = std::fs::read(dir.join(&n)).unwrap();
            (n, bytes)
        })
        .collect()
}

const HELPER: &str = "GROUNDWORK_TEST_STORE_LOOP";
const ROUNDS: &str = "GROUNDWORK_TEST_STORE_ROUNDS";

/// This test binary again, as a writer.
fn helper(path: &Path) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        "session_store::store_writer_helper",
        "--ignored",
        "--nocapture",
    ])
    .env(HELPER, path)
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    c
}

/// Not a test: the writer the kill and concurrency tests start (this test binary
/// again). Like `groundwork ask` run question after question, it takes the session's
/// lease (waiting while another writer holds it), loads the session, adds a question and
/// commits, over and over (or `ROUNDS` times).
#[test]
#[ignore = "a helper process of the kill and concurrency tests"]
fn store_writer_helper() {
    let Some(path) = std::env::var_os(HELPER) else {
        return;
    };
    let path = PathBuf::from(path);
    let rounds: Option<usize> = std::env::var(ROUNDS).ok().and_then(|r| r.parse().ok());
    let mut done = 0;
    while rounds.is_none_or(|r| done < r) {
        let lease = loop {
            match Lease::acquire(&path) {
                Ok(l) => break l,
                Err(groundwork::session::SessionError::Busy { .. }) => {
                    std::thread::sleep(Duration::from_millis(2))
                }
                Err(e) => panic!("{e}"),
            }
        };
        let mut s = Session::load(&path).unwrap();
        let n = s.messages.len() / 2;
        add_question(&mut s, n);
        s.save(&path).unwrap();
        drop(lease);
        done += 1;
    }
}

#[test]
fn a_kill_at_any_moment_of_thirty_commits_loses_no_committed_question() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sqlite");
    session_of(20).save(&path).unwrap();
    let mut last = 20;
    let mut grew = 0;
    for round in 0..30u64 {
        let mut child = helper(&path).spawn().unwrap();
        // Kill it at a different moment each round: some land mid-commit.
        std::thread::sleep(Duration::from_millis(30 + (round * 37) % 90));
        child.kill().unwrap();
        child.wait().unwrap();
        // Reading changes nothing, even with the journal a kill left behind.
        let before = snapshot(dir.path());
        let read = Session::load(&path).expect("always loads");
        assert_eq!(snapshot(dir.path()), before, "round {round}: reading wrote");
        let n = questions_in(&read);
        assert!(
            n >= last,
            "question {n} after {last}: a committed question was lost"
        );
        if n > last {
            grew += 1;
        }
        last = n;
        let stray: Vec<String> = names(dir.path())
            .into_iter()
            .filter(|f| f != "s.sqlite" && f != "s.sqlite-journal")
            .collect();
        assert_eq!(stray, Vec::<String>::new(), "round {round}");
    }
    assert!(grew >= 15, "the writer made progress in {grew} rounds only");
}

#[test]
fn two_writers_are_serialised_and_every_question_of_both_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sqlite");
    session_of(1).save(&path).unwrap();
    let children: Vec<_> = (0..2)
        .map(|_| helper(&path).env(ROUNDS, "15").spawn().unwrap())
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let read = Session::load(&path).unwrap();
    assert_eq!(questions_in(&read), 31);
}

/// A JSON session as an earlier Groundwork saved it, with the journal it kept beside
/// it holding `added` more questions (one record each).
fn legacy_pair(dir: &Path, first: usize, added: usize) -> PathBuf {
    let path = dir.join("s.json");
    let mut doc = serde_json::to_value(session_of(first)).unwrap();
    doc["groundwork"]["snapshot"] = json!("snap-1");
    let text = serde_json::to_vec(&doc).unwrap();
    std::fs::write(&path, &text).unwrap();
    let mut journal = serde_json::to_string(
        &json!({"groundwork_journal": 1, "snapshot": "snap-1", "bytes": text.len()}),
    )
    .unwrap();
    journal.push('\n');
    let meta = json!({"model": "m", "created_at": "2026-01-01T00:00:00Z",
        "scripted_demo": false, "labels": {}, "extra": {}});
    let mut s = session_of(first);
    for k in 0..added {
        let n = first + k;
        let base = s.messages.len();
        add_question(&mut s, n);
        let empty = |b: usize| json!({"base": b, "keep": b, "add": []});
        let record = json!({
            "seq": k + 1,
            "messages": {"base": base, "keep": base, "add": question(n)},
            "requests": empty(0), "instructions": empty(0), "tool_sets": empty(0),
            "texts": empty(0), "timings": empty(0),
            "state": [[["rag"], {"set": s.state["rag"].clone()}]],
            "meta": meta, "extra": {}
        });
        journal.push_str(&serde_json::to_string(&record).unwrap());
        journal.push('\n');
    }
    std::fs::write(journal_path(&path), journal).unwrap();
    path
}

#[test]
fn an_earlier_versions_journal_is_applied_and_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = legacy_pair(dir.path(), 4, 3);
    let before = snapshot(dir.path());
    let s = Session::load(&path).unwrap();
    assert_eq!(questions_in(&s), 7);
    assert_eq!(snapshot(dir.path()), before);
    // A torn last line (that save never returned) is left out.
    let journal = journal_path(&path);
    let mut bytes = std::fs::read(&journal).unwrap();
    bytes.truncate(bytes.len() - 10);
    std::fs::write(&journal, &bytes).unwrap();
    assert_eq!(questions_in(&Session::load(&path).unwrap()), 6);
}

/// Every way the journal can be damaged that would once have lost its questions
/// silently is refused in one line naming the journal, and leaves both files as they
/// were.
#[test]
fn a_journal_that_cannot_be_applied_whole_refuses_the_session_and_is_left_alone() {
    type Spoil = fn(&mut Vec<u8>, &mut Vec<u8>);
    let cases: Vec<(&str, Spoil)> = vec![
        ("a flipped byte in its header", |_, j| j[5] ^= 0x20),
        ("an unreadable last record", |_, j| {
            let n = j.len();
            j[n - 3] = b'#';
        }),
        ("a snapshot another program re-saved", |f, _| {
            let at = f.len() - 3;
            f.insert(at, b' ');
        }),
        ("a journal cut inside its header", |_, j| j.truncate(20)),
        ("a zero-filled journal", |_, j| {
            j.iter_mut().for_each(|b| *b = 0)
        }),
        ("zeros over a record", |_, j| {
            let n = j.len();
            j[n / 2..n / 2 + 40].iter_mut().for_each(|b| *b = 0)
        }),
    ];
    for (what, spoil) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = legacy_pair(dir.path(), 4, 3);
        let journal = journal_path(&path);
        let (mut f, mut j) = (
            std::fs::read(&path).unwrap(),
            std::fs::read(&journal).unwrap(),
        );
        spoil(&mut f, &mut j);
        std::fs::write(&path, &f).unwrap();
        std::fs::write(&journal, &j).unwrap();
        let before = snapshot(dir.path());
        let e = Session::load(&path).expect_err(what).to_string();
        assert!(!e.contains('\n'), "{what}: {e}");
        assert!(
            e.contains(&journal.display().to_string()),
            "{what}: the message names the journal: {e}"
        );
        assert_eq!(snapshot(dir.path()), before, "{what}: files left alone");
    }
}

#[test]
fn continuing_a_json_session_writes_the_database_beside_it_and_leaves_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = legacy_pair(dir.path(), 2, 1);
    let at = groundwork::session::continue_at(&path);
    assert_eq!(at.read.as_deref(), Some(path.as_path()));
    assert_eq!(at.write, dir.path().join("s.sqlite"));
    assert_eq!(
        at.note.as_deref(),
        Some(
            format!(
                "{} is kept as it was; the session continues in {}",
                path.display(),
                at.write.display()
            )
            .as_str()
        )
    );
    let before = (
        std::fs::read(&path).unwrap(),
        std::fs::read(journal_path(&path)).unwrap(),
    );
    let mut s = Session::load(&path).unwrap();
    add_question(&mut s, 3);
    s.save(&at.write).unwrap();
    assert_eq!(
        (
            std::fs::read(&path).unwrap(),
            std::fs::read(journal_path(&path)).unwrap()
        ),
        before
    );
    assert_eq!(questions_in(&Session::load(&at.write).unwrap()), 4);
    // From then on, the database continues it.
    let again = groundwork::session::continue_at(&path);
    assert_eq!(again.read.as_deref(), Some(at.write.as_path()));
    assert_eq!(again.write, at.write);
}

fn groundwork(home: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
    cmd.args(args);
    crate::support::home::hermetic(&mut cmd, home);
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "groundwork {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// A JSON session of every format Groundwork has written (the demo, version 4; the
/// version-1 demo) and a haiku.rag host's, continued into a database: `inspect --json`
/// shows every request of the database exactly as of the JSON it came from; `export`
/// writes back the session it holds; reading, inspecting and exporting change no file.
#[test]
fn a_json_session_continued_into_a_database_shows_every_request_as_before() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let home = tempfile::tempdir().unwrap();
    let v1 = zstd::decode_all(
        std::fs::read(root.join("tests/fixtures/sessions/demo_v1.json.zst"))
            .unwrap()
            .as_slice(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("demo_v1.json"), v1).unwrap();
    std::fs::copy(
        root.join("sessions/demo.json"),
        dir.path().join("demo.json"),
    )
    .unwrap();
    std::fs::copy(
        root.join("tests/fixtures/haiku_session/session.json"),
        dir.path().join("haiku.json"),
    )
    .unwrap();
    for name in ["demo", "demo_v1", "haiku"] {
        let json = dir.path().join(format!("{name}.json"));
        let db = dir.path().join(format!("{name}.sqlite"));
        let session = Session::load(&json).unwrap();
        session.save(&db).unwrap();
        let before = snapshot(dir.path());
        let count = session.request_count();
        // Every request at once (a haiku.rag host's session records none: they are
        // rebuilt from its history), then one by one.
        let all =
            |p: &Path| groundwork(home.path(), &["inspect", p.to_str().unwrap(), "--json"]).stdout;
        let shown = all(&json);
        assert!(shown.len() > 100, "{name}: requests to compare");
        assert!(shown == all(&db), "{name}: the requests show otherwise");
        let inspect = |p: &Path, n: usize| {
            let n = n.to_string();
            groundwork(
                home.path(),
                &["inspect", p.to_str().unwrap(), "--request", &n, "--json"],
            )
            .stdout
        };
        for n in 1..=count {
            assert!(
                inspect(&json, n) == inspect(&db, n),
                "{name}: request {n} shows otherwise from its database"
            );
        }
        let overview = |p: &Path| groundwork(home.path(), &["inspect", p.to_str().unwrap()]).stdout;
        assert_eq!(
            String::from_utf8_lossy(&overview(&json)),
            String::from_utf8_lossy(&overview(&db)).replace(".sqlite", ".json"),
            "{name}: the overview"
        );
        // The export is the session: read back, it is the one saved.
        let exported: Value = serde_json::from_slice(
            &groundwork(home.path(), &["export", db.to_str().unwrap()]).stdout,
        )
        .unwrap();
        let back = Session::from_json(&exported.to_string(), &db).unwrap();
        assert_eq!(back, Session::load(&db).unwrap(), "{name}: the export");
        assert_eq!(
            exported["messages"],
            serde_json::to_value(&session.messages).unwrap()
        );
        assert_eq!(snapshot(dir.path()), before, "{name}: reading wrote");
        // An export never overwrites the session it reads.
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
        cmd.args([
            "export",
            db.to_str().unwrap(),
            "--out",
            db.to_str().unwrap(),
        ]);
        crate::support::home::hermetic(&mut cmd, home.path());
        let o = cmd.output().unwrap();
        assert!(!o.status.success());
        assert_eq!(snapshot(dir.path()), before, "{name}: export over itself");
    }
}

/// `inspect` and `export` (read-only commands) over damaged session files: each either
/// shows every question or refuses in one line naming the file, and no file changes.
#[test]
fn read_only_commands_over_damaged_files_refuse_in_one_line_and_write_nothing() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.sqlite");
    let mut s = session_of(6);
    s.save(&good).unwrap();
    add_question(&mut s, 6);
    s.save(&good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    for case in 0..12 {
        let mut spoiled = bytes.clone();
        let at = next(spoiled.len());
        match case % 3 {
            0 => spoiled[at] ^= 0x40,
            1 => spoiled.truncate(at),
            _ => spoiled[at..(at + 512).min(bytes.len())].fill(0),
        }
        let path = dir.path().join(format!("d{case}.sqlite"));
        std::fs::write(&path, &spoiled).unwrap();
        let before = snapshot(dir.path());
        for args in [vec!["inspect"], vec!["export"]] {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
            cmd.args(&args).arg(&path);
            crate::support::home::hermetic(&mut cmd, home.path());
            let o = cmd.output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            if o.status.success() {
                if args[0] == "export" {
                    let back: Value = serde_json::from_slice(&o.stdout).unwrap();
                    assert_eq!(
                        back["messages"].as_array().unwrap().len(),
                        14,
                        "case {case}"
                    );
                }
            } else {
                assert_eq!(err.trim().lines().count(), 1, "case {case} {args:?}: {err}");
                assert!(
                    err.contains(&path.display().to_string()),
                    "case {case}: {err}"
                );
            }
            assert_eq!(snapshot(dir.path()), before, "case {case} {args:?} wrote");
        }
    }
}
