//! Reviewing an experiment in the workbench (`groundwork open DIR`): an experiment made by
//! the real `groundwork eval` against the scripted server (the policy arm and the
//! no-policy arm differ on two unanswerable questions), shown as the review table at
//! 80x24 and 160x48, filtered, a cell opened read-only into the usual panes, marked with
//! keys and a note; the marks survive reopening, the report counts them, and the session
//! file is byte-identical afterwards.

use std::path::Path;
use std::time::Duration;

use crate::support::home::{Home, err};
use crate::support::researcher::{self, Study};
use crate::support::scripted_server::ScriptedServer;
use crate::support::workbench::{host, press, press_mod, redactions, screen, settle, type_text};
use crossterm::event::{KeyCode, KeyModifiers};
use groundwork::config::AppConfig;
use groundwork::eval::ReviewTable;
use groundwork::session::Session;
use groundwork::tui::app::{App, Pane};
use groundwork::tui::{Runtime, Services};
use serde_json::Value;

const SET: &str = r#"{"id": "a1", "question": "How did lighthouses start, and who kept the first lights burning through the long winter nights?", "label": "answerable"}
{"id": "a2", "question": "Which lenses do lighthouse towers use?", "label": "answerable"}
{"id": "u1", "question": "Who painted the towers?", "label": "unanswerable", "expect": "a declaration: the guide names no painter"}
{"id": "u2", "question": "What did the keeper eat?", "label": "unanswerable"}
{"id": "u3", "question": "How tall was the tallest lighthouse in 1700?", "label": "unanswerable"}
"#;

/// Cites for questions about lighthouses; searches the rest and answers them uncited.
fn researches(q: &str) -> Study {
    if q.to_lowercase().contains("lighthouse") {
        Study::Cite
    } else {
        Study::Uncited
    }
}

/// An experiment folder made by `groundwork eval` (one job: a stable order).
async fn experiment() -> (Home, ScriptedServer) {
    let home = Home::new().await;
    let model = ScriptedServer::responding(researcher::researcher(researches)).await;
    std::fs::write(home.path("set.jsonl"), SET).unwrap();
    let url = model.base_url();
    let o = home
        .run(&[
            "--model-url",
            &url,
            "--model",
            "scripted",
            "eval",
            "set.jsonl",
            "--arm",
            "base: --no-policy",
            "--arm",
            "policy:",
            "--out",
            "exp",
            "--jobs",
            "1",
        ])
        .await;
    assert!(o.status.success(), "{}", err(&o));
    (home, model)
}

fn review_app(dir: &Path) -> (App, Runtime) {
    let table = ReviewTable::load(dir).unwrap();
    let mut h = host();
    h.model_ready = false;
    let app = App::new(Session::new(""), None, h).with_review(table);
    let rt = Runtime::new(Services::new(
        None,
        None,
        AppConfig::default(),
        vec![],
        false,
    ));
    (app, rt)
}

/// The screen with the temporary folder hidden.
fn shown(app: &mut App, w: u16, h: u16) -> String {
    screen(app, w, h)
}

fn report(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

fn arm_reviews(report: &Value, arm: &str) -> Value {
    report["arms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == arm)
        .unwrap()["reviews"]
        .clone()
}

/// Presses a mark key (or Enter in the note prompt) and waits until the mark is saved.
async fn mark(rt: &mut Runtime, app: &mut App, code: KeyCode) {
    app.notice = None;
    app.error = None;
    press(rt, app, code);
    assert!(
        rt.until(app, Duration::from_secs(10), |a| a
            .notice
            .as_deref()
            .is_some_and(|n| n.starts_with("marked"))
            || a.error.is_some())
            .await,
        "the mark was saved"
    );
    assert_eq!(app.error, None);
}

#[tokio::test]
async fn the_review_table_filters_opens_read_only_marks_and_the_report_counts_them() {
    let (home, _model) = experiment().await;
    let dir = home.path("exp");
    let (mut app, mut rt) = review_app(&dir);
    let settings = redactions();
    let _guard = settings.bind_to_scope();

    // The table at both sizes: every question × both arms, outcomes and markers.
    let small = shown(&mut app, 80, 24);
    insta::assert_snapshot!("review_table_80x24", small);
    let large = shown(&mut app, 160, 48);
    insta::assert_snapshot!("review_table_160x48", large);
    assert!(large.contains("How did lighthouses start, and who kept the first lights"));
    let a1 = small.lines().find(|l| l.contains("a1 How did")).unwrap();
    assert!(
        a1.contains("… grounded") && a1.ends_with("grounded"),
        "truncated at 80 columns: {a1}"
    );

    // Filters: differing (u1, u2: missing without the policy, declarations with it),
    // violations (none here: the policy turned both into declarations), one label; shown
    // in the header.
    press(&mut rt, &mut app, KeyCode::Char('d'));
    let differing = shown(&mut app, 80, 24);
    insta::assert_snapshot!("review_differing", differing);
    assert!(differing.contains("filters: differing"));
    assert!(differing.contains("2/5 questions") && differing.contains("u1 Who painted"));
    assert!(differing.contains("u2 What did"));
    assert!(
        !["a1 ", "a2 ", "u3 "]
            .iter()
            .any(|id| differing.contains(id))
    );
    press(&mut rt, &mut app, KeyCode::Char('d'));
    press(&mut rt, &mut app, KeyCode::Char('v'));
    let violations = shown(&mut app, 80, 24);
    assert!(violations.contains("filters: violations"), "{violations}");
    assert!(violations.contains("0/5 questions"), "{violations}");
    assert!(violations.contains("no question passes the filters"));
    press(&mut rt, &mut app, KeyCode::Char('v'));
    press(&mut rt, &mut app, KeyCode::Char('f'));
    let labelled = shown(&mut app, 80, 24);
    insta::assert_snapshot!("review_label_answerable", labelled);
    assert!(labelled.contains("label=answerable"));
    press(&mut rt, &mut app, KeyCode::Char('f'));
    assert!(shown(&mut app, 80, 24).contains("label=unanswerable"));
    press(&mut rt, &mut app, KeyCode::Char('f'));
    assert!(shown(&mut app, 80, 24).contains("filters: none"));

    // Mark u1 in base (row 3, arm 0) invented, with a note, on the table.
    press(&mut rt, &mut app, KeyCode::Down);
    press(&mut rt, &mut app, KeyCode::Down);
    let session = dir.join("sessions/base/u1.json");
    assert_eq!(
        app.review.as_ref().unwrap().selected(),
        Some((2, 0)),
        "u1, base"
    );
    let before = std::fs::read(&session).unwrap();
    press(&mut rt, &mut app, KeyCode::Char('n'));
    assert!(
        app.error
            .as_deref()
            .unwrap()
            .contains("mark the answer first")
    );
    mark(&mut rt, &mut app, KeyCode::Char('i')).await;
    press(&mut rt, &mut app, KeyCode::Char('n'));
    type_text(&mut rt, &mut app, "no such painter");
    let with_note = shown(&mut app, 80, 24);
    assert!(with_note.contains("Note") && with_note.contains("no such painter"));
    mark(&mut rt, &mut app, KeyCode::Enter).await;
    assert!(shown(&mut app, 80, 24).contains("note: no such painter"));

    // Enter opens its session in the usual panes, read-only.
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(
        rt.until(&mut app, Duration::from_secs(10), |a| !a
            .review
            .as_ref()
            .unwrap()
            .showing_table)
            .await,
        "the session opened: {:?}",
        app.error
    );
    settle(&mut rt, &mut app).await;
    assert!(app.read_only && app.focus == Pane::Conversation);
    assert_eq!(app.transcript.turns.len(), 1);
    assert_eq!(app.transcript.turns[0].prompt, "Who painted the towers?");
    let panes = shown(&mut app, 160, 48);
    assert!(panes.contains("Conversation") && panes.contains("Citation ledger"));
    assert!(panes.contains("Who painted the towers?"), "{panes}");
    assert!(
        panes.contains("reviewing u1 in arm 'base' (read-only)"),
        "{panes}"
    );
    // The header names the question and the arm for as long as the session is open.
    assert!(
        panes
            .lines()
            .next()
            .unwrap()
            .contains("review: u1 in arm 'base'"),
        "{panes}"
    );
    // Asking and saving are refused with one line; nothing is written.
    app.focus = Pane::Input;
    app.input.insert_str("Ask something more");
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(!app.running());
    assert!(app.notice.as_deref().unwrap().starts_with("read-only"));
    press_mod(&mut rt, &mut app, KeyCode::Char('s'), KeyModifiers::CONTROL);
    assert!(app.notice.as_deref().unwrap().starts_with("read-only"));
    assert!(app.popup.is_none());
    // So is a claim check: the command line's `verify` does it, on a file of its own.
    press_mod(&mut rt, &mut app, KeyCode::Char('v'), KeyModifiers::ALT);
    assert!(
        app.notice
            .as_deref()
            .unwrap()
            .starts_with("read-only: reviewing never changes the session; `groundwork verify")
    );
    assert!(app.verifying.is_none());
    // A mark inside the session replaces the table's (the note is kept).
    mark(&mut rt, &mut app, KeyCode::Char('w')).await;
    // With the visual grounding open, the keys are its own: `x` hides the context there
    // and the mark stays; Esc closes the grounding, not the session.
    let effects = app.open_grounding(groundwork::host::transcript::Evidence {
        chunk_id: "no-such-chunk".into(),
        source: "Lighthouse Guide".into(),
        ..Default::default()
    });
    rt.carry_out(&mut app, effects);
    press(&mut rt, &mut app, KeyCode::Char('x'));
    assert!(!app.grounding.view.as_ref().unwrap().context);
    assert_eq!(
        app.review.as_ref().unwrap().table.rows[2].cells[0]
            .mark
            .as_deref(),
        Some("wrong")
    );
    press(&mut rt, &mut app, KeyCode::Esc);
    assert!(app.grounding.view.is_none());
    assert!(!app.review.as_ref().unwrap().showing_table);
    settle(&mut rt, &mut app).await;
    press(&mut rt, &mut app, KeyCode::Esc);
    assert!(app.review.as_ref().unwrap().showing_table);
    let back = shown(&mut app, 80, 24);
    assert!(back.contains("marked wrong") && back.contains("note: no such painter"));

    // Mark a2 in policy supported.
    press(&mut rt, &mut app, KeyCode::Up);
    press(&mut rt, &mut app, KeyCode::Right);
    mark(&mut rt, &mut app, KeyCode::Char('s')).await;
    press(&mut rt, &mut app, KeyCode::Char('q'));
    assert!(app.quit);
    settle(&mut rt, &mut app).await;

    assert_eq!(std::fs::read(&session).unwrap(), before, "byte-identical");
    let r = report(&dir);
    assert_eq!(arm_reviews(&r, "base")["wrong"], 1);
    assert_eq!(arm_reviews(&r, "base")["invented"], 0, "the last mark wins");
    assert_eq!(arm_reviews(&r, "policy")["supported"], 1);
    assert_eq!(
        (r["reviewed"].clone(), r["questions"].clone()),
        (2.into(), 5.into())
    );
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("wrong"), "{md}");

    // Reopening shows the marks.
    let (mut again, _rt) = review_app(&dir);
    let reopened = shown(&mut again, 160, 48);
    insta::assert_snapshot!("review_reopened_160x48", reopened);
    let t = &again.review.as_ref().unwrap().table;
    assert_eq!(t.rows[2].cells[0].mark.as_deref(), Some("wrong"));
    assert_eq!(t.rows[2].cells[0].note.as_deref(), Some("no such painter"));
    assert_eq!(t.rows[1].cells[1].mark.as_deref(), Some("supported"));

    // The selected cell shows what the set expects and the answer's first lines.
    let answer = t.rows[2].cells[0].answer.clone().unwrap();
    let mut rt = _rt;
    press(&mut rt, &mut again, KeyCode::Down);
    press(&mut rt, &mut again, KeyCode::Down);
    let u1 = shown(&mut again, 160, 48);
    assert!(
        u1.contains("expected: a declaration: the guide names no painter"),
        "{u1}"
    );
    let first = answer.lines().find(|l| !l.trim().is_empty()).unwrap();
    assert!(
        u1.contains(&format!("answer: {}", &first[..first.len().min(40)])),
        "{u1}"
    );
    // `m` keeps the questions with an answer not marked yet: every one but a2 (marked in
    // policy only) has one; u1 has base marked and policy not.
    press(&mut rt, &mut again, KeyCode::Char('m'));
    let unmarked = shown(&mut again, 80, 24);
    assert!(unmarked.contains("filters: unmarked"), "{unmarked}");
    assert!(unmarked.contains("5/5 questions"), "{unmarked}");
    press(&mut rt, &mut again, KeyCode::Char('m'));
    // `x` takes u1's base mark and note back; the line stays in reviews.jsonl.
    again.review.as_mut().unwrap().row = 2;
    again.review.as_mut().unwrap().arm = 0;
    press(&mut rt, &mut again, KeyCode::Char('x'));
    assert!(
        rt.until(&mut again, Duration::from_secs(10), |a| a
            .notice
            .as_deref()
            .is_some_and(|n| n.starts_with("cleared")))
            .await,
        "the mark was cleared: {:?}",
        again.error
    );
    assert_eq!(
        again.notice.as_deref(),
        Some("cleared the mark of u1 in arm 'base'")
    );
    let t = &again.review.as_ref().unwrap().table;
    assert_eq!(t.rows[2].cells[0].mark, None);
    assert_eq!(t.rows[2].cells[0].note, None);
    press(&mut rt, &mut again, KeyCode::Char('x'));
    assert_eq!(
        again.notice.as_deref(),
        Some("this answer has no mark to clear")
    );
    let reviews = std::fs::read_to_string(dir.join("reviews.jsonl")).unwrap();
    assert!(
        reviews
            .trim_end()
            .ends_with(r#"{"arm":"base","id":"u1","mark":"cleared"}"#),
        "{reviews}"
    );
    let (reread, _) = review_app(&dir);
    let t = &reread.review.as_ref().unwrap().table;
    assert_eq!(t.rows[2].cells[0].mark, None, "cleared on reading too");
    assert_eq!(t.rows[1].cells[1].mark.as_deref(), Some("supported"));
    settle(&mut rt, &mut again).await;
}

/// One line of `results.jsonl` as `groundwork eval` writes it.
fn record(arm: &str, id: &str, status: &str, violation: bool) -> String {
    serde_json::json!({
        "arm": arm, "id": id, "label": "answerable", "question": format!("Question {id}?"),
        "status": status, "error": null, "redirected": violation, "violation": violation,
        "cut_off": false, "cited": [], "searches": 1, "executions": 0, "requests": 2,
        "raw_tokens": 10, "sent_tokens": 10, "usage": {"input_tokens": 1, "output_tokens": 1},
        "latency_ms": 1, "answer": "x", "session": format!("sessions/{arm}/{id}.json")
    })
    .to_string()
}

#[tokio::test]
async fn violations_filter_unrun_cells_missing_sessions_and_bad_folders() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("arms.json"), "{\"a\": \"\", \"b\": \"\"}").unwrap();
    let lines = [
        record("a", "q1", "grounded", false),
        record("b", "q1", "missing", true),
        record("a", "q2", "grounded", false),
    ];
    std::fs::write(dir.path().join("results.jsonl"), lines.join("\n") + "\n").unwrap();
    let (mut app, mut rt) = review_app(dir.path());
    let settings = redactions();
    let _guard = settings.bind_to_scope();
    press(&mut rt, &mut app, KeyCode::Char('v'));
    let violations = shown(&mut app, 80, 24);
    insta::assert_snapshot!("review_violations", violations);
    assert!(violations.contains("1/2 questions") && violations.contains("missing ↻ !"));
    assert!(!violations.contains("q2 "));
    // Its session file is gone: opening says so in one line and the table stays.
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(
        rt.until(&mut app, Duration::from_secs(10), |a| a.error.is_some())
            .await
    );
    let e = app.error.clone().unwrap();
    assert!(
        e.starts_with("cannot open the session") && !e.contains('\n'),
        "{e}"
    );
    assert!(app.review.as_ref().unwrap().showing_table);
    // q2 was not run in arm b: nothing to open, nothing to mark.
    press(&mut rt, &mut app, KeyCode::Char('v'));
    press(&mut rt, &mut app, KeyCode::Down);
    press(&mut rt, &mut app, KeyCode::Right);
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(app.notice.as_deref().unwrap().contains("no answer"));
    press(&mut rt, &mut app, KeyCode::Char('s'));
    assert!(app.error.as_deref().unwrap().contains("no answer"));
    settle(&mut rt, &mut app).await;
    assert!(!std::fs::exists(dir.path().join("reviews.jsonl")).unwrap());
    let e = ReviewTable::load(&dir.path().join("missing"))
        .unwrap_err()
        .0;
    assert!(
        e.contains("is not an experiment") && !e.contains('\n'),
        "{e}"
    );
}
