//! The workbench's claim check (`alt-v`): the selected answer's cited sentences go to the
//! judge (a scripted server), through the conversation's owner into the session file; the
//! verdicts show on the markers and under the answer, in the ledger (a column when wide, a
//! count on the status when narrow) and the judge's requests in the inspector; an answer
//! without markers and a judge that fails each get one line and change nothing.

use crate::support::scripted_server::{Reply, ScriptedServer};
use crate::support::workbench::*;
use crossterm::event::{KeyCode, KeyModifiers};
use groundwork::session::Session;
use groundwork::session::verdicts::Verdict;
use groundwork::tui::Runtime;
use groundwork::tui::app::Pane;
use serde_json::json;

const ANSWER: &str =
    "The array produced the most in July [1]. It was installed by Tesla in 1850 [1].";

#[tokio::test]
async fn alt_v_checks_the_selected_answers_claims_and_every_pane_shows_the_verdicts() {
    let kb = demo_kb().await;
    let chunk = hit(&kb.store, "monthly solar output", |_| true)
        .await
        .chunk_id
        .unwrap();
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "monthly solar output July"})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [chunk]})),
        Reply::text(ANSWER),
        Reply::text("Hello."),
        // The citation policy's redirect, answered with an empty citation.
        Reply::tool_call("rag_cite", json!({"chunk_ids": []})),
        Reply::text("Hello; the knowledge base has nothing to cite for a greeting."),
        // The judge, one request per cited sentence.
        Reply::text(r#"{"verdict": "supported", "reason": "The figure shows July highest."}"#),
        Reply::text(
            r#"{"verdict": "not_supported", "reason": "The passage names no installer or year."}"#,
        ),
        // A judge that fails.
        Reply::status(500, "judge crashed"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.json");
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&kb.store, &server.base_url()));
    ask(&mut rt, &mut app, "How much did the array produce in July?").await;
    ask(&mut rt, &mut app, "Hi").await;
    let asked = server.requests().len();

    // The second answer cites nothing: nothing to check, nothing sent.
    app.focus = Pane::Ledger;
    app.ledger.selected = 1;
    press_mod(&mut rt, &mut app, KeyCode::Char('v'), KeyModifiers::ALT);
    assert_eq!(
        app.notice.as_deref(),
        Some("question 2: no sentence of the answer carries a citation marker; nothing to check")
    );
    assert_eq!(server.requests().len(), asked);

    app.ledger.selected = 0;
    press_mod(&mut rt, &mut app, KeyCode::Char('v'), KeyModifiers::ALT);
    assert_eq!(
        app.notice.as_deref(),
        Some("question 1: the judge is checking 2 claims…")
    );
    settle(&mut rt, &mut app).await;
    assert_eq!(
        app.notice.as_deref(),
        Some(
            "question 1: 2 claims: 1 supported · 1 not supported (judge scripted-model); saved session.json"
        )
    );
    let q1 = app.transcript.turns[0].question;
    let verdicts: Vec<Verdict> = app.checks[&q1].claims.iter().map(|c| c.verdict).collect();
    assert_eq!(verdicts, [Verdict::Supported, Verdict::NotSupported]);
    // Kept in the session file by the conversation's owner.
    let saved = Session::load(&path).unwrap();
    assert_eq!(
        saved.groundwork.extra["verifications"][0]["claims"][1]["reason"],
        "The passage names no installer or year."
    );
    // The judge was sent the cited chunk itself, as the conversation quotes it.
    let judged = &server.requests()[asked];
    let prompt = judged["messages"][1]["content"].as_str().unwrap();
    assert!(
        prompt.starts_with(
            "Claim:\nThe array produced the most in July [1].\n\nCited passages:\n\n[1] "
        ),
        "{prompt}"
    );

    let _guard = redactions().bind_to_scope();
    app.focus = Pane::Conversation;
    app.conversation.scroll = None;
    app.conversation.selected_citation = None;
    let shown = pane(&mut app, Pane::Conversation, 160, 48);
    assert!(
        shown.contains("in July [1]✓. It was installed by Tesla in 1850 [1]✗."),
        "{shown}"
    );
    assert!(
        shown.contains(
            "▾ Claims checked (2 claims: 1 supported · 1 not supported) · judge scripted-model"
        ),
        "{shown}"
    );
    assert!(
        shown.contains("✗ not supported — The passage names no installer or year."),
        "{shown}"
    );
    insta::assert_snapshot!("verify_conversation_160x48", screen(&mut app, 160, 48));
    // At 80×24 from the top: the first question's answer and its check.
    screen(&mut app, 80, 24);
    press(&mut rt, &mut app, KeyCode::Char('g'));
    insta::assert_snapshot!("verify_conversation_80x24", screen(&mut app, 80, 24));

    app.focus = Pane::Ledger;
    let wide = pane(&mut app, Pane::Ledger, 160, 48);
    assert!(wide.contains("claims") && wide.contains("✓1 ✗1"), "{wide}");
    // Zoomed, the ledger is wide: a claims column.
    press(&mut rt, &mut app, KeyCode::Char('z'));
    insta::assert_snapshot!("verify_ledger_160x48", screen(&mut app, 160, 48));
    press(&mut rt, &mut app, KeyCode::Char('z'));
    let narrow = pane(&mut app, Pane::Ledger, 60, 24);
    assert!(narrow.contains("grounded ✗1"), "{narrow}");
    insta::assert_snapshot!("verify_ledger_80x24", screen(&mut app, 80, 24));

    // The judge's requests follow the model's in the inspector, with their verdicts.
    app.focus = Pane::Inspector;
    let n = app.request_count();
    app.inspector.selected = Some(n - 1);
    let inspected = pane(&mut app, Pane::Inspector, 160, 48);
    assert!(
        inspected.contains(&format!("request {n}/{n}"))
            && inspected.contains("judge scripted-model · claims of question 1, #2 of the check")
            && inspected
                .contains("verdict ✗ not supported — The passage names no installer or year.")
            && inspected.contains("It was installed by Tesla in 1850 [1]."),
        "{inspected}"
    );
    insta::assert_snapshot!("verify_inspector_160x48", screen(&mut app, 160, 48));
    insta::assert_snapshot!("verify_inspector_80x24", screen(&mut app, 80, 24));

    // A judge that fails: one line, the earlier check kept as it was.
    app.focus = Pane::Ledger;
    press_mod(&mut rt, &mut app, KeyCode::Char('v'), KeyModifiers::ALT);
    settle(&mut rt, &mut app).await;
    let notice = app.notice.clone().unwrap();
    assert!(
        notice.starts_with("question 1: the judge failed: ")
            && notice.contains("judge crashed")
            && notice.ends_with("; nothing was stored"),
        "{notice}"
    );
    assert_eq!(
        Session::load(&path).unwrap().groundwork.extra,
        saved.groundwork.extra
    );

    // A check that comes back once another session is open is not kept in that one.
    server.push(Reply::text(
        r#"{"verdict": "supported", "reason": "Fine."}"#,
    ));
    server.push(Reply::text(
        r#"{"verdict": "supported", "reason": "Fine."}"#,
    ));
    press_mod(&mut rt, &mut app, KeyCode::Char('v'), KeyModifiers::ALT);
    press_mod(&mut rt, &mut app, KeyCode::Char('n'), KeyModifiers::CONTROL);
    settle(&mut rt, &mut app).await;
    assert!(app.transcript.turns.is_empty(), "the new session");
    assert!(app.checks.is_empty(), "nothing kept in it");
    assert_eq!(
        app.notice.as_deref(),
        Some(
            "question 1: the session whose question 1 it checked is no longer open (2 claims); nothing was stored"
        )
    );
    assert_eq!(
        Session::load(&path).unwrap().groundwork.extra,
        saved.groundwork.extra
    );
}
