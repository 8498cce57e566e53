//! Incremental saves of long sessions: the journal beside the session file. A save of a
//! long session appends what the question added; the file is rewritten (folded) now and
//! then; a kill at any moment leaves the previous or the new question, whole; a file
//! another program rewrote keeps the journal aside instead of applying it; another
//! writer's append is noticed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use groundwork::session::{Policy, Session, SessionError, journal_path};
use serde_json::{Value, json};

/// Journal from the first byte, folding when the journal passes a quarter of the file.
const EAGER: Policy = Policy {
    journal_from: 0,
    fold_ratio: 4,
};

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
    assert_eq!(
        s.state["rag"]["citation_index"].as_object().unwrap().len(),
        n
    );
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

#[test]
fn saves_append_to_the_journal_fold_it_now_and_then_and_read_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let mut s = session_of(3);
    s.save_with(&path, EAGER).unwrap();
    assert!(
        !journal_path(&path).exists(),
        "the first save writes the file whole"
    );
    let first = std::fs::read(&path).unwrap();

    let mut folds = 0;
    let mut appends = 0;
    for n in 3..40 {
        add_question(&mut s, n);
        let before = std::fs::metadata(&path).unwrap().modified().unwrap();
        let file_len = std::fs::metadata(&path).unwrap().len();
        s.save_with(&path, EAGER).unwrap();
        if journal_path(&path).exists() {
            appends += 1;
            let journal = std::fs::metadata(journal_path(&path)).unwrap().len();
            assert!(journal <= file_len / 4, "the journal stays under a quarter");
            assert_eq!(
                std::fs::metadata(&path).unwrap().modified().unwrap(),
                before,
                "an append leaves the file alone"
            );
        } else {
            folds += 1;
        }
        let read = Session::load(&path).unwrap();
        assert_eq!(read, s, "question {n} reads back exactly");
        assert_eq!(questions_in(&read), n + 1);
    }

    assert!(
        folds >= 2 && appends > folds,
        "{appends} appends, {folds} folds"
    );
    assert_ne!(std::fs::read(&path).unwrap(), first);

    // Saving a session loaded from the file continues the same journal.
    let mut again = Session::load(&path).unwrap();
    add_question(&mut again, 40);
    again.save_with(&path, EAGER).unwrap();
    assert_eq!(questions_in(&Session::load(&path).unwrap()), 41);

    // Folding makes the file complete for other programs, and removes the journal.
    again.fold(&path).unwrap();
    assert!(!journal_path(&path).exists());
    let text = std::fs::read_to_string(&path).unwrap();
    let whole: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(whole["messages"].as_array().unwrap().len(), 82);
    assert_eq!(whole["state"]["rag"]["question"], json!(41));
    assert_eq!(names(dir.path()), ["s.json"], "nothing else is left");
}

#[test]
fn a_long_session_read_with_its_journal_on_two_threads_reads_back_exactly() {
    // Over a MiB: the file's section and the journal are read beside the history.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let mut s = session_of(1000);
    s.save_with(&path, EAGER).unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() > 1 << 20);
    for n in 1000..1004 {
        add_question(&mut s, n);
        s.save_with(&path, EAGER).unwrap();
        assert!(journal_path(&path).exists(), "question {n} is appended");
        assert_eq!(Session::load(&path).unwrap(), s, "question {n} reads back");
    }
    let committed = s.clone();
    // A torn last record, as a kill halfway through an append leaves it.
    add_question(&mut s, 1004);
    let whole = std::fs::read(journal_path(&path)).unwrap();
    s.save_with(&path, EAGER).unwrap();
    let longer = std::fs::read(journal_path(&path)).unwrap();
    std::fs::write(journal_path(&path), &longer[..whole.len() + 10]).unwrap();
    let read = Session::load(&path).unwrap();
    assert_eq!(read, committed, "the previous question, whole");
    assert_eq!(questions_in(&read), 1004);
    // A record broken before the last is refused, naming the journal and the record.
    let mut broken = whole.clone();
    let second = broken.iter().position(|b| *b == b'\n').unwrap() + 1;
    broken[second] = b'#';
    std::fs::write(journal_path(&path), &broken).unwrap();
    let err = Session::load(&path).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "corrupt session journal {} (record 1): ",
            journal_path(&path).display()
        )),
        "{err}"
    );
}

#[test]
fn the_default_policy_rewrites_short_sessions_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let mut s = session_of(3);
    s.save(&path).unwrap();
    for n in 3..10 {
        add_question(&mut s, n);
        s.save(&path).unwrap();
        assert!(
            !journal_path(&path).exists(),
            "a short session has no journal"
        );
    }
    assert_eq!(Session::load(&path).unwrap(), s);
}

#[test]
fn a_torn_last_record_is_ignored_and_cut_off_by_the_next_save() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let mut s = session_of(30);
    s.save_with(&path, EAGER).unwrap();
    add_question(&mut s, 30);
    s.save_with(&path, EAGER).unwrap();
    let committed = s.clone();
    // A kill halfway through the next append.
    add_question(&mut s, 31);
    let whole = std::fs::read(journal_path(&path)).unwrap();
    s.save_with(&path, EAGER).unwrap();
    let longer = std::fs::read(journal_path(&path)).unwrap();
    let torn = &longer[..whole.len() + (longer.len() - whole.len()) / 2];
    std::fs::write(journal_path(&path), torn).unwrap();

    let mut read = Session::load(&path).unwrap();
    assert_eq!(read, committed, "the previous question, whole");
    add_question(&mut read, 31);
    read.save_with(&path, EAGER).unwrap();
    let read = Session::load(&path).unwrap();
    assert_eq!(questions_in(&read), 32);
    assert_eq!(read, s);
}

#[test]
fn a_journal_whose_file_another_program_rewrote_is_kept_aside_not_applied() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let mut s = session_of(30);
    s.save_with(&path, EAGER).unwrap();
    add_question(&mut s, 30);
    s.save_with(&path, EAGER).unwrap();
    assert!(journal_path(&path).exists());

    // haiku.rag continues the file as it reads it (messages and state) and writes it back.
    let mut file: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let theirs = json!({"messages": file["messages"].take(), "state": file["state"].take()});
    std::fs::write(&path, serde_json::to_vec(&theirs).unwrap()).unwrap();

    let read = Session::load(&path).unwrap();
    assert_eq!(questions_in(&read), 30, "their file, as they wrote it");
    assert!(!journal_path(&path).exists());
    let aside: Vec<String> = names(dir.path())
        .into_iter()
        .filter(|n| n.starts_with("s.json.journal.orphaned-"))
        .collect();
    assert_eq!(aside.len(), 1, "{:?}", names(dir.path()));
}

#[test]
fn another_writers_append_is_noticed_and_the_answer_kept_beside() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let mut s = session_of(30);
    s.save_with(&path, EAGER).unwrap();
    add_question(&mut s, 30);
    s.save_with(&path, EAGER).unwrap();

    // Another process adds question 31 to the journal meanwhile.
    let status = helper(&path).env(ONCE, "1").status().unwrap();
    assert!(status.success());

    // This process's own question 31 does not overwrite it: it is kept beside.
    add_question(&mut s, 31);
    let e = s.save_with(&path, EAGER).unwrap_err();
    assert!(matches!(e, SessionError::Changed { .. }), "{e}");
    let saved = s.save_or_keep(&path, false).unwrap();
    assert_ne!(saved.path, path);
    assert!(saved.note.unwrap().contains("kept in"));
    assert_eq!(questions_in(&Session::load(&saved.path).unwrap()), 32);
    assert_eq!(questions_in(&Session::load(&path).unwrap()), 32);
}

const HELPER: &str = "GROUNDWORK_TEST_JOURNAL_LOOP";
const ONCE: &str = "GROUNDWORK_TEST_JOURNAL_ONCE";

/// This test binary again, as the writer.
fn helper(path: &Path) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        "session_journal::journal_loop_helper",
        "--ignored",
        "--nocapture",
    ])
    .env(HELPER, path)
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    c
}

/// Not a test: the writer the kill test starts (this test binary again) and kills. Like
/// `groundwork ask` run question after question, it loads the session, adds a question
/// and saves, over and over.
#[test]
#[ignore = "a helper process of a_kill_at_any_moment_leaves_whole_questions"]
fn journal_loop_helper() {
    let Some(path) = std::env::var_os(HELPER) else {
        return;
    };
    let path = PathBuf::from(path);
    loop {
        let mut s = Session::load(&path).unwrap();
        let n = s.messages.len() / 2;
        add_question(&mut s, n);
        s.save_with(&path, EAGER).unwrap();
        if std::env::var_os(ONCE).is_some() {
            return;
        }
    }
}

#[test]
fn a_kill_at_any_moment_leaves_whole_questions_and_no_stray_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    session_of(20).save_with(&path, EAGER).unwrap();
    let mut last = 20;
    let mut grew = 0;
    for round in 0..12u64 {
        let mut child = helper(&path).spawn().unwrap();
        // Kill it at a different moment each round: some land mid-append, mid-fold.
        std::thread::sleep(Duration::from_millis(40 + (round * 37) % 90));
        child.kill().unwrap();
        child.wait().unwrap();
        let read = Session::load(&path).expect("always loads");
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
            .filter(|f| f != "s.json" && f != "s.json.journal")
            .collect();
        assert_eq!(stray, Vec::<String>::new(), "round {round}");
    }
    assert!(grew >= 6, "the writer made progress in {grew} rounds only");
}

#[test]
fn closing_folds_the_journal_unless_another_process_holds_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let mut s = session_of(30);
    s.save_with(&path, EAGER).unwrap();
    assert!(!s.fold_journal(&path).unwrap(), "nothing to fold");
    add_question(&mut s, 30);
    s.save_with(&path, EAGER).unwrap();
    assert!(journal_path(&path).exists());

    let held = groundwork::session::SessionLock::acquire(&path).unwrap();
    assert!(
        !s.fold_journal(&path).unwrap(),
        "the holder's session is left alone"
    );
    assert!(journal_path(&path).exists());
    drop(held);

    assert!(s.fold_journal(&path).unwrap());
    assert!(!journal_path(&path).exists());
    let whole: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(whole["messages"].as_array().unwrap().len(), 62);
    assert_eq!(Session::load(&path).unwrap(), s);
}
