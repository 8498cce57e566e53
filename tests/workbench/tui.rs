//! The workbench TUI, headless: the app model and its render functions driven by keys and
//! by the engine's events from real runs (the real async-openai client against the
//! scripted OpenAI-compatible server, a real LanceDB store of the demo corpus).

use std::time::Duration;

use crate::support::scripted_server::{Reply, ScriptedServer};
use crate::support::workbench::*;
use crossterm::event::{KeyCode, KeyModifiers};
use groundwork::host::transcript::CitationStatus;
use groundwork::session::Session;
use groundwork::tui::Runtime;
use groundwork::tui::app::{App, Ended, ImageState, Pane, Popup};

struct Fixture {
    _kb: DemoKb,
    server: ScriptedServer,
    rt: Runtime,
    app: App,
    dir: tempfile::TempDir,
    figure_chunk: String,
    /// What `y` copied, newest last.
    clip: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

/// Three questions asked through the app: grounded with a figure, a compacted grounded
/// follow-up, and an uncited answer that is redirected and then recorded as a violation.
async fn three_questions_asked() -> Fixture {
    let kb = demo_kb().await;
    let figure = hit(&kb.store, "monthly solar output", |r| {
        r.doc_item_refs.iter().any(|x| x.contains("pictures"))
    })
    .await;
    let figure_chunk = figure.chunk_id.clone().unwrap();
    let second = hit(&kb.store, "battery state of charge summer day", |r| {
        r.chunk_id.as_deref() != Some(&figure_chunk)
    })
    .await;
    let server = ScriptedServer::start(three_questions(
        &figure_chunk,
        second.chunk_id.as_deref().unwrap(),
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let clip = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut s = services(&kb.store, &server.base_url());
    s.clipboard = groundwork::tui::Clipboard::Kept(clip.clone());
    let mut rt = Runtime::new(s);
    ask(&mut rt, &mut app, "How much did the array produce in July?").await;
    ask(&mut rt, &mut app, "And the battery state of charge?").await;
    ask(&mut rt, &mut app, "Say something nice about microgrids").await;
    Fixture {
        _kb: kb,
        server,
        rt,
        app,
        dir,
        figure_chunk,
        clip,
    }
}

/// The conversation's reading keys: `{`/`}` between questions, `/` with `n`/`N` to find,
/// `y` to copy the selected source (else the answer in view) with its reference.
#[tokio::test]
async fn questions_are_a_key_apart_text_is_found_and_sources_copy_with_their_reference() {
    let mut f = three_questions_asked().await;
    let app = &mut f.app;
    app.focus = Pane::Conversation;
    app.conversation.scroll = None;
    app.conversation.selected_citation = None;
    // The pane's own width and height, for the keys and for what is drawn alike.
    pane(app, Pane::Conversation, 80, 24);
    let lines_at_top = |app: &mut App| -> Vec<String> {
        pane(app, Pane::Conversation, 80, 24)
            .lines()
            .skip(1)
            .take(2)
            .map(str::to_string)
            .collect()
    };
    // From the bottom, `{` goes up a question at a time until the first.
    for _ in 0..3 {
        press(&mut f.rt, app, KeyCode::Char('{'));
    }
    let top = lines_at_top(app);
    assert!(
        top[0].contains("You:") && top[1].contains("How much did the array"),
        "{top:?}"
    );
    press(&mut f.rt, app, KeyCode::Char('{'));
    assert_eq!(app.notice.as_deref(), Some("no question above"));
    press(&mut f.rt, app, KeyCode::Char('}'));
    let top = lines_at_top(app);
    assert!(
        top[0].contains("You:") && top[1].contains("And the battery"),
        "{top:?}"
    );
    press(&mut f.rt, app, KeyCode::Char('{'));
    assert!(lines_at_top(app)[1].contains("How much did the array"));
    press(&mut f.rt, app, KeyCode::Char('}'));
    press(&mut f.rt, app, KeyCode::Char('}'));
    assert!(pane(app, Pane::Conversation, 80, 24).contains("Say something nice"));
    press(&mut f.rt, app, KeyCode::Char('}'));
    assert_eq!(app.notice.as_deref(), Some("no question below"));

    // `/` finds text; `n` and `N` go on and back, round the ends.
    press(&mut f.rt, app, KeyCode::Char('/'));
    assert!(matches!(app.popup, Some(Popup::Find { .. })));
    type_text(&mut f.rt, app, "nea");
    {
        let _guard = redactions().bind_to_scope();
        insta::assert_snapshot!("find_popup_80x24", screen(app, 80, 24));
        insta::assert_snapshot!("find_popup_160x48", screen(app, 160, 48));
    }
    press(&mut f.rt, app, KeyCode::Backspace);
    press(&mut f.rt, app, KeyCode::Backspace);
    press(&mut f.rt, app, KeyCode::Backspace);
    assert!(screen(app, 80, 24).contains("Find in the conversation"));
    pane(app, Pane::Conversation, 80, 24);
    app.conversation.scroll = Some(0);
    type_text(&mut f.rt, app, "neat");
    press(&mut f.rt, app, KeyCode::Enter);
    assert!(app.popup.is_none());
    let notice = app.notice.clone().unwrap();
    assert!(notice.starts_with("\"neat\": line 1 of 2"), "{notice}");
    let shown = pane(app, Pane::Conversation, 80, 24);
    assert!(shown.contains("Microgrids are neat."), "{shown}");
    assert!(shown.contains("/neat n/N"), "{shown}");
    press(&mut f.rt, app, KeyCode::Char('n'));
    assert!(
        app.notice
            .as_deref()
            .unwrap()
            .starts_with("\"neat\": line 2 of 2")
    );
    assert!(pane(app, Pane::Conversation, 80, 24).contains("Microgrids are still neat."));
    press(&mut f.rt, app, KeyCode::Char('n'));
    assert_eq!(
        app.notice.as_deref(),
        Some("\"neat\": line 1 of 2 (from the other end)")
    );
    press(&mut f.rt, app, KeyCode::Char('N'));
    assert!(
        app.notice
            .as_deref()
            .unwrap()
            .starts_with("\"neat\": line 2 of 2")
    );
    press(&mut f.rt, app, KeyCode::Char('/'));
    for _ in 0.."neat".len() {
        press(&mut f.rt, app, KeyCode::Backspace);
    }
    type_text(&mut f.rt, app, "zebra");
    press(&mut f.rt, app, KeyCode::Enter);
    assert_eq!(
        app.notice.as_deref(),
        Some("no line of the conversation holds \"zebra\"")
    );

    // `y` on a selected source: the cited passage and its reference, with the chunk id.
    app.conversation.selected_citation = Some((0, 0));
    press(&mut f.rt, app, KeyCode::Char('y'));
    let copied = f.clip.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        copied,
        format!(
            "Figure 1: Monthly solar output, January to December 2026.\n\n\
             — Harbor Point Microgrid: Field Report 2026, p. 1, §Solar output (chunk {})\n",
            f.figure_chunk
        )
    );
    assert!(
        app.notice
            .as_deref()
            .unwrap()
            .starts_with("copied source [1] (")
    );
    // Enter on it: the chunk whole, then the context the model saw with the chunk marked.
    screen(app, 80, 24);
    press(&mut f.rt, app, KeyCode::Enter);
    settle(&mut f.rt, app).await;
    let Some(Popup::ChunkDetail {
        context: Some((context, Some(span))),
        ..
    }) = &app.popup
    else {
        panic!("the chunk detail with its context");
    };
    assert_eq!(
        &context[span.clone()],
        "Figure 1: Monthly solar output, January to December 2026."
    );
    // Where the chunk sits further down that context than the popup reaches, it opens
    // there, not at the context's first line.
    let Some(Popup::ChunkDetail { scroll, .. }) = &app.popup else {
        unreachable!()
    };
    assert!(
        *scroll > 0,
        "at 80×24 the caption is below the popup's last row"
    );
    let detail = screen(app, 160, 48);
    {
        let _guard = redactions().bind_to_scope();
        insta::assert_snapshot!("chunk_detail_context_160x48", detail.clone());
        insta::assert_snapshot!("chunk_detail_context_80x24", screen(app, 80, 24));
    }
    // From the top: the chunk, then the heading of the context.
    if let Some(Popup::ChunkDetail { scroll, .. }) = &mut app.popup {
        *scroll = 0;
    }
    let top = screen(app, 160, 48);
    assert!(
        top.contains("The context the model saw (expanded around the chunk; the chunk's own text highlighted):"),
        "{top}"
    );
    app.popup = None;
    // A secret in what is copied does not reach the clipboard.
    groundwork::errors::register_secret("sk-copied-SECRET-4711");
    let turn = &mut app.transcript.turns[1];
    turn.citations[0].passage.as_mut().unwrap().text =
        "The key is sk-copied-SECRET-4711 here.".into();
    app.conversation.selected_citation = Some((1, 0));
    press(&mut f.rt, app, KeyCode::Char('y'));
    let copied = f.clip.lock().unwrap().last().cloned().unwrap();
    assert!(
        copied.starts_with("The key is <redacted> here."),
        "{copied}"
    );
    // Without a selection: the answer in view with its sources.
    app.conversation.selected_citation = None;
    app.conversation.scroll = Some(0);
    press(&mut f.rt, app, KeyCode::Char('y'));
    let copied = f.clip.lock().unwrap().last().cloned().unwrap();
    assert!(
        copied.starts_with("July was the strongest month for the array"),
        "{copied}"
    );
    assert!(
        copied.contains(&format!(
            "\nSources:\n[1] Harbor Point Microgrid: Field Report 2026, p. 1, §Solar output (chunk {})\n",
            f.figure_chunk
        )),
        "{copied}"
    );
}

#[tokio::test]
async fn three_questions_fill_conversation_ledger_and_inspector() {
    let mut f = three_questions_asked().await;
    let app = &mut f.app;
    assert_eq!(f.server.remaining(), 0, "every scripted reply was used");
    // The ledger: grounded, grounded, then a redirected violation.
    let ledger = &app.transcript.ledger;
    assert_eq!(ledger.len(), 3);
    assert_eq!(ledger[0].status, CitationStatus::Grounded);
    assert_eq!(ledger[0].cited[0].evidence.chunk_id, f.figure_chunk);
    assert_eq!(ledger[1].status, CitationStatus::Grounded);
    assert!(ledger[2].redirected);
    assert!(ledger[2].violation);
    assert_ne!(ledger[2].status, CitationStatus::Grounded);
    assert!(!ledger[0].violation && !ledger[0].redirected);
    assert_eq!(ledger[0].searches, 2);
    assert!(!ledger[0].uncited.is_empty(), "retrieved but not cited");
    // The conversation: answers, tool rows and numbered sources across questions.
    let turns = &app.transcript.turns;
    assert!(turns[0].answer.contains("July was the strongest month"));
    assert_eq!(
        turns[0]
            .steps
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["rag_search", "rag_search", "rag_cite"]
    );
    assert_eq!(turns[0].steps[0].summary, "\"monthly solar output July\"");
    assert_eq!(turns[0].citations[0].index, 1);
    assert_eq!(turns[1].citations[0].index, 2);
    assert!(
        !turns[0].citations[0].evidence.picture_refs.is_empty(),
        "a cited figure"
    );
    // Every request is inspectable; the follow-up's first request carries the capsule.
    let reqs = app.requests();
    assert_eq!(reqs.len(), 9);
    let follow_up = &reqs[4].snapshot;
    let rows = groundwork::host::inspect::align(follow_up);
    let marks: Vec<_> = rows
        .iter()
        .flat_map(|r| r.parts.iter().map(|p| p.mark))
        .collect();
    assert!(
        marks.contains(&groundwork::host::inspect::PartMark::Capsule)
            && marks.contains(&groundwork::host::inspect::PartMark::Receipt),
        "{marks:?}"
    );
    assert!(follow_up.compacted_tokens.total < follow_up.raw_tokens.total);
    // The redirect is a marked part of the third question's second request.
    let redirect = &reqs[8].snapshot;
    let marks: Vec<_> = groundwork::host::inspect::align(redirect)
        .iter()
        .flat_map(|r| r.parts.iter().map(|p| p.mark))
        .collect();
    assert!(
        marks.contains(&groundwork::host::inspect::PartMark::Redirect),
        "{marks:?}"
    );
    // The session was saved after each question, and reloads to the same transcript.
    let saved = Session::load(&f.dir.path().join("session.json")).unwrap();
    assert_eq!(saved.messages, app.session.messages);
    assert_eq!(saved.groundwork.requests.len(), 9);
    let mut reloaded = App::new(saved, None, host());
    // The passages are read from the knowledge base, not the session: the reloaded app
    // (with no store here) has none until given the same.
    for (id, p) in &app.passages {
        reloaded.update(groundwork::tui::app::Msg::Passages(vec![(
            id.clone(),
            p.clone(),
        )]));
    }
    assert_eq!(reloaded.transcript, app.transcript);
    // Issue 41: each source is the cited chunk itself, as the store has it.
    for c in app.transcript.turns.iter().flat_map(|t| &t.citations) {
        let stored = f
            ._kb
            .store
            .get_chunk(&c.evidence.chunk_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            c.passage.as_ref().unwrap().text,
            stored.content,
            "{}",
            c.evidence.chunk_id
        );
        assert_ne!(
            c.content, stored.content,
            "the context the model saw is wider"
        );
    }
    // Markers and Sources agree: the second answer's only source is its [1].
    assert_eq!(
        (
            app.transcript.turns[1].citations[0].number,
            app.transcript.turns[1].citations[0].index
        ),
        (1, 2)
    );
    // Issue 41: what the policy caught is kept beside the answer that followed.
    assert_eq!(
        app.transcript.turns[2].caught.as_deref(),
        Some("Microgrids are neat.")
    );
    assert_eq!(app.transcript.turns[2].answer, "Microgrids are still neat.");
    app.conversation.scroll = None;
    let shown = pane(app, Pane::Conversation, 160, 48);
    let caught = shown
        .find("caught by the citation policy")
        .expect("the caught answer");
    let first = shown.find("Microgrids are neat.").expect("shown");
    let redirect = shown
        .find("redirected: this answer cited nothing")
        .expect("the redirect");
    let last = shown
        .find("Microgrids are still neat.")
        .expect("the answer");
    assert!(
        caught < first && first < redirect && redirect < last,
        "{shown}"
    );
    let md = groundwork::host::transcript::to_markdown(&app.transcript, "t");
    // The export quotes the cited passage, with its page and section.
    assert!(
        md.contains("  Harbor Point Microgrid: Field Report 2026, p. 1, §Solar output\n  > Figure 1: Monthly solar output, January to December 2026.\n"),
        "{md}"
    );
    assert!(
        md.contains("- [1] Harbor Point Microgrid Operator Handbook `"),
        "{md}"
    );
    assert!(md.contains("(source #2 of the session)"), "{md}");
    // ←/→ bring the selected source into view: from the bottom, back to question 1's.
    app.popup = None;
    app.focus = Pane::Conversation;
    app.conversation.scroll = None;
    app.conversation.selected_citation = None;
    screen(app, 80, 24);
    press(&mut f.rt, app, KeyCode::Right);
    press(&mut f.rt, app, KeyCode::Left);
    assert_eq!(app.conversation.selected_citation, Some((0, 0)));
    let shown = pane(app, Pane::Conversation, 80, 24);
    assert!(
        shown.contains("▶ [1] Harbor Point Microgrid: Field Report"),
        "{shown}"
    );
    // Enter on a selected source opens the cited chunk whole.
    app.focus = Pane::Conversation;
    app.conversation.selected_citation = Some((0, 0));
    press(&mut f.rt, app, KeyCode::Enter);
    assert!(
        matches!(&app.popup, Some(Popup::ChunkDetail { chunk_id, .. }) if *chunk_id == f.figure_chunk),
        "{:?}",
        app.popup.is_some()
    );
    assert!(
        md.contains("## First answer, caught by the citation policy\n\n> ~~Microgrids are neat.~~\n\n*Redirected: this answer cited nothing"),
        "{md}"
    );
}

#[tokio::test]
async fn pane_and_app_snapshots() {
    let mut f = three_questions_asked().await;
    let settings = redactions();
    let _guard = settings.bind_to_scope();
    let app = &mut f.app;
    // Select the first citation (it has a figure) so the images pane has something.
    app.focus = Pane::Conversation;
    press(&mut f.rt, app, KeyCode::Char('g'));
    app.conversation.selected_citation = None;
    press(&mut f.rt, app, KeyCode::Char('h'));
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        // The images of the selected evidence are made for the pane's size.
        app.areas.images = ratatui::layout::Rect::new(0, 0, w, h);
        f.rt.handle(app, groundwork::tui::app::Msg::Resize);
        let loaded =
            f.rt.until(app, Duration::from_secs(60), |a| {
                a.images.listed
                    && a.images
                        .items
                        .iter()
                        .all(|i| !matches!(i.state, ImageState::Loading))
            })
            .await;
        assert!(loaded, "images loaded");
        let size = format!("{w}x{h}");
        app.conversation.scroll = Some(0);
        insta::assert_snapshot!(
            format!("conversation_top_{size}"),
            pane(app, Pane::Conversation, w, h)
        );
        app.conversation.scroll = None;
        insta::assert_snapshot!(
            format!("conversation_bottom_{size}"),
            pane(app, Pane::Conversation, w, h)
        );
        app.inspector.selected = Some(4);
        insta::assert_snapshot!(
            format!("inspector_capsule_{size}"),
            pane(app, Pane::Inspector, w, h)
        );
        app.inspector.diff = true;
        insta::assert_snapshot!(
            format!("inspector_diff_{size}"),
            pane(app, Pane::Inspector, w, h)
        );
        app.inspector.diff = false;
        app.inspector.selected = Some(8);
        insta::assert_snapshot!(
            format!("inspector_redirect_{size}"),
            pane(app, Pane::Inspector, w, h)
        );
        app.ledger.selected = 0;
        app.ledger.in_chunks = true;
        insta::assert_snapshot!(format!("ledger_{size}"), pane(app, Pane::Ledger, w, h));
        app.ledger.in_chunks = false;
        insta::assert_snapshot!(format!("images_{size}"), pane(app, Pane::Images, w, h));
        app.focus = Pane::Inspector;
        insta::assert_snapshot!(format!("app_{size}"), screen(app, w, h));
        app.focus = Pane::Conversation;
    }
}

#[tokio::test]
async fn whole_app_keys_two_questions_inspector_ledger_and_cancel() {
    let kb = demo_kb().await;
    let chunk = hit(&kb.store, "battery", |_| true).await.chunk_id.unwrap();
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", serde_json::json!({"query": "battery"})),
        Reply::tool_call("rag_cite", serde_json::json!({"chunk_ids": [chunk]})),
        Reply::text("Batteries are checked monthly."),
        Reply::tool_call("rag_search", serde_json::json!({"query": "inverter"})),
        Reply::tool_call("rag_cite", serde_json::json!({"chunk_ids": []})),
        Reply::text("Nothing in the knowledge base covers that."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&kb.store, &server.base_url()));
    // Lay the app out once, as the loop does before reading keys.
    screen(&mut app, 160, 48);

    ask(&mut rt, &mut app, "How often are batteries checked?").await;
    ask(&mut rt, &mut app, "What about the inverter?").await;
    let s = screen(&mut app, 160, 48);
    assert!(s.contains("Batteries are checked monthly."), "{s}");
    assert!(
        s.contains("Nothing in the knowledge base covers that."),
        "{s}"
    );
    assert_eq!(app.transcript.ledger[1].status, CitationStatus::Ungrounded);

    // Inspector: F3 focuses it; `[` steps back, `]` forward, `d` shows the diff.
    press(&mut rt, &mut app, KeyCode::F(3));
    assert_eq!(app.focus, Pane::Inspector);
    assert_eq!(app.selected_request(), Some(5));
    press(&mut rt, &mut app, KeyCode::Char('['));
    press(&mut rt, &mut app, KeyCode::Char('['));
    assert_eq!(app.selected_request(), Some(3));
    let s = screen(&mut app, 160, 48);
    assert!(s.contains("request 4/6"), "{s}");
    press(&mut rt, &mut app, KeyCode::Char(']'));
    assert_eq!(app.selected_request(), Some(4));
    press(&mut rt, &mut app, KeyCode::Char('d'));
    assert!(app.inspector.diff);
    let s = screen(&mut app, 160, 48);
    assert!(s.contains("+++ sent"), "{s}");

    // Ledger: F4, Enter opens the row's chunks, Enter opens a chunk's full text.
    press(&mut rt, &mut app, KeyCode::F(4));
    press(&mut rt, &mut app, KeyCode::Char('g'));
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(app.ledger.in_chunks);
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(matches!(app.popup, Some(Popup::ChunkDetail { .. })));
    settle(&mut rt, &mut app).await;
    let Some(Popup::ChunkDetail {
        text: Some(text),
        chunk_id,
        ..
    }) = &app.popup
    else {
        panic!("chunk detail loaded")
    };
    assert_eq!(chunk_id, &chunk);
    assert!(text.contains("Document:"), "{text}");
    let s = screen(&mut app, 160, 48);
    assert!(s.contains(&format!("Chunk {chunk}")), "{s}");
    press(&mut rt, &mut app, KeyCode::Esc);
    assert!(app.popup.is_none());
    // The chunk's images were requested for the images pane.
    assert_eq!(
        app.images.target.as_ref().map(|t| t.chunk_id.as_str()),
        Some(chunk.as_str())
    );

    // A slow answer is cancelled with Esc: nothing is committed, the session file too.
    let before = app.session.messages.len();
    server.push(Reply::text("too late").delay(Duration::from_secs(20)));
    app.focus = Pane::Input;
    type_text(&mut rt, &mut app, "A slow one");
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(app.running());
    assert!(
        rt.until(&mut app, Duration::from_secs(10), |a| {
            a.live.as_ref().is_some_and(|l| !l.requests.is_empty())
        })
        .await
    );
    let s = screen(&mut app, 160, 48);
    assert!(s.contains("waiting for the model"), "{s}");
    assert!(!s.contains("Executing tasks"), "{s}");
    press(&mut rt, &mut app, KeyCode::Esc);
    assert!(
        rt.until(&mut app, Duration::from_secs(10), |a| !a.running())
            .await
    );
    assert_eq!(app.ended, Some(Ended::Cancelled("A slow one".into())));
    assert_eq!(app.session.messages.len(), before);
    settle(&mut rt, &mut app).await;
    let saved = Session::load(&dir.path().join("session.json")).unwrap();
    assert_eq!(saved.messages.len(), before);
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("Cancelled"), "{s}");

    // With nothing running, Ctrl-C quits.
    press_mod(&mut rt, &mut app, KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert!(app.quit);
}

/// The workbench never commits a session of its own: the conversation the runtime holds
/// commits each answer once and saves it, and the app is sent snapshots that never
/// change afterwards. An answer cancelled after it finished, before its commit, is not
/// committed, as the app says.
#[tokio::test]
async fn the_conversation_owner_commits_and_the_app_is_sent_snapshots() {
    let kb = demo_kb().await;
    let server = ScriptedServer::start(vec![
        Reply::text("Batteries are checked monthly."),
        Reply::text("Too late to keep."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.json");
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&kb.store, &server.base_url()));
    let shown = app.session.clone();
    ask(&mut rt, &mut app, "How often are batteries checked?").await;
    assert!(
        shown.messages.is_empty(),
        "a snapshot once shown never changes"
    );
    assert_eq!(app.session.messages.len(), 2);
    assert_eq!(&Session::load(&path).unwrap(), &*app.session);
    let committed = app.session.clone();

    app.focus = Pane::Input;
    type_text(&mut rt, &mut app, "And the inverter?");
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(
        rt.until(&mut app, Duration::from_secs(30), |a| a
            .live
            .as_ref()
            .is_some_and(|l| l.phase == groundwork::tui::app::Phase::Saving))
            .await,
        "the run finished and waits for its commit"
    );
    assert!(screen(&mut app, 80, 24).contains("committing the answer"));
    press(&mut rt, &mut app, KeyCode::Esc);
    settle(&mut rt, &mut app).await;
    assert_eq!(
        app.ended,
        Some(Ended::Cancelled("And the inverter?".into()))
    );
    assert!(
        std::sync::Arc::ptr_eq(&app.session, &committed),
        "nothing new was shown"
    );
    assert_eq!(Session::load(&path).unwrap().messages.len(), 2, "nor saved");
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn no_model_shows_how_to_configure_and_an_endpoint_that_is_down_is_reported() {
    let kb = demo_kb().await;
    let dir = tempfile::tempdir().unwrap();
    // No model: asking explains in one line how to set one; the question stays typed.
    let mut host = host();
    host.model_ready = false;
    host.model_help = groundwork::engine::discover::configure_hint();
    let mut app = App::new(Session::new(""), None, host);
    let mut rt = Runtime::new(services(&kb.store, "http://127.0.0.1:9/v1"));
    type_text(&mut rt, &mut app, "Anyone there?");
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(!app.running());
    assert!(
        app.error
            .as_deref()
            .unwrap()
            .contains("GROUNDWORK_MODEL_URL=")
    );
    assert_eq!(app.input.lines().join(""), "Anyone there?");
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("GROUNDWORK_MODEL_URL"), "{s}");

    // An endpoint that is down: the question fails with a clear error, nothing is
    // committed, and the app keeps working.
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&kb.store, "http://127.0.0.1:9/v1"));
    type_text(&mut rt, &mut app, "Hello?");
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(
        rt.until(&mut app, Duration::from_secs(30), |a| !a.running())
            .await
    );
    assert!(
        matches!(app.ended, Some(Ended::Failed(..))),
        "{:?}",
        app.ended
    );
    assert!(app.session.messages.is_empty());
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("Error:"), "{s}");
    press(&mut rt, &mut app, KeyCode::Tab);
    assert_eq!(app.focus, Pane::Conversation);
}

#[tokio::test]
async fn palette_filter_export_and_attachments() {
    let kb = demo_kb().await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&kb.store, "http://127.0.0.1:9/v1"));
    screen(&mut app, 120, 40);

    // The palette lists commands; typing filters; Enter runs one.
    press_mod(&mut rt, &mut app, KeyCode::Char('p'), KeyModifiers::CONTROL);
    type_text(&mut rt, &mut app, "filter");
    let s = screen(&mut app, 120, 40);
    assert!(s.contains("document filter"), "{s}");
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(matches!(app.popup, Some(Popup::Filter { .. })));
    settle(&mut rt, &mut app).await;
    // The filter modal: search, toggle, apply → document_filter in the rag state.
    type_text(&mut rt, &mut app, "battery");
    press(&mut rt, &mut app, KeyCode::Char(' '));
    let s = screen(&mut app, 120, 40);
    assert!(s.contains("1 document(s) selected"), "{s}");
    press(&mut rt, &mut app, KeyCode::Enter);
    let filter = app.document_filter().expect("a filter");
    assert!(filter.to_lowercase().contains("battery"), "{filter}");
    // Clearing it again gives no filter.
    press_mod(&mut rt, &mut app, KeyCode::Char('p'), KeyModifiers::CONTROL);
    type_text(&mut rt, &mut app, "filter");
    press(&mut rt, &mut app, KeyCode::Enter);
    settle(&mut rt, &mut app).await;
    if let Some(Popup::Filter { chosen, .. }) = &app.popup {
        assert_eq!(chosen.len(), 1, "the modal remembers the selection");
    }
    type_text(&mut rt, &mut app, "battery");
    press(&mut rt, &mut app, KeyCode::Char(' '));
    press(&mut rt, &mut app, KeyCode::Enter);
    assert_eq!(app.document_filter(), None);

    // Database info.
    app.focus = Pane::Ledger;
    press(&mut rt, &mut app, KeyCode::Char('I'));
    settle(&mut rt, &mut app).await;
    let s = screen(&mut app, 120, 40);
    assert!(s.contains("Documents: 5"), "{s}");
    press(&mut rt, &mut app, KeyCode::Esc);

    // Export to Markdown and JSON next to the session file.
    press(&mut rt, &mut app, KeyCode::Char('e'));
    press(&mut rt, &mut app, KeyCode::Char('E'));
    settle(&mut rt, &mut app).await;
    assert!(dir.path().join("session.md").exists());
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("session.export.json")).unwrap(),
    )
    .unwrap();
    assert!(json["turns"].is_array() && json["messages"].is_array());

    // Attaching an image inserts an [Image #1] token; Backspace deletes it whole.
    let png = dir.path().join("pic.png");
    image::RgbImage::from_pixel(4, 4, image::Rgb([200, 10, 10]))
        .save(&png)
        .unwrap();
    app.focus = Pane::Input;
    press_mod(&mut rt, &mut app, KeyCode::Char('o'), KeyModifiers::CONTROL);
    assert!(matches!(app.popup, Some(Popup::Path { .. })));
    if let Some(Popup::Path { input, .. }) = &mut app.popup {
        input.select_all();
        input.cut();
        input.insert_str(png.to_string_lossy());
    }
    press(&mut rt, &mut app, KeyCode::Enter);
    // The Runtime resolves the path and reads the image off the UI task.
    assert!(
        rt.until(&mut app, Duration::from_secs(10), |a| !a
            .attachments
            .is_empty())
            .await,
        "the image was attached: {:?}",
        app.error
    );
    assert!(app.popup.is_none());
    assert_eq!(app.attachments.len(), 1);
    assert_eq!(app.input.lines().join(""), "[Image #1]");
    press(&mut rt, &mut app, KeyCode::Backspace);
    assert_eq!(app.input.lines().join(""), "");
    // A file that is not an image is refused with a message.
    let txt = dir.path().join("notes.txt");
    std::fs::write(&txt, "hello").unwrap();
    press_mod(&mut rt, &mut app, KeyCode::Char('o'), KeyModifiers::CONTROL);
    if let Some(Popup::Path { input, .. }) = &mut app.popup {
        input.select_all();
        input.cut();
        input.insert_str(txt.to_string_lossy());
    }
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(
        rt.until(&mut app, Duration::from_secs(10), |a| a.error.is_some())
            .await
    );
    assert!(app.popup.is_none());
    assert!(app.error.as_deref().unwrap().contains("not an image"));
}

#[tokio::test]
async fn help_is_generated_from_the_keymap_and_themes_switch() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        "[tui]\ntheme = \"light\"\n[tui.keys]\nhelp = [\"f10\"]\n",
    )
    .unwrap();
    let (theme, keymap) = groundwork::tui::load_tui_config(&cfg).unwrap();
    let mut app = new_app(dir.path()).with_keymap(keymap).with_theme(theme);
    assert_eq!(app.theme.name, groundwork::tui::theme::ThemeName::Light);
    let mut rt = Runtime::new(groundwork::tui::Services::new(
        None,
        None,
        Default::default(),
        vec![],
        false,
    ));
    press(&mut rt, &mut app, KeyCode::F(10));
    let s = screen(&mut app, 100, 60);
    assert!(s.contains("f10"), "{s}");
    assert!(s.contains("request inspector"), "{s}");
    press(&mut rt, &mut app, KeyCode::Esc);
    press_mod(&mut rt, &mut app, KeyCode::Char('t'), KeyModifiers::ALT);
    assert_eq!(app.theme.name, groundwork::tui::theme::ThemeName::Dark);

    // A conflict is reported with the file and the key, before any terminal set-up.
    std::fs::write(&cfg, "[tui.keys]\nquit = [\"ctrl-p\"]\n").unwrap();
    let err = groundwork::tui::load_tui_config(&cfg)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&cfg.display().to_string()), "{err}");
    assert!(err.contains("ctrl-p"), "{err}");
    std::fs::write(&cfg, "[tui]\nthem = 1\n").unwrap();
    let err = groundwork::tui::load_tui_config(&cfg)
        .unwrap_err()
        .to_string();
    assert!(err.contains("config.toml") && err.contains("them"), "{err}");
}

/// A conversation recorded by a haiku.rag 0.77 host (its own capability code, see
/// tests/fixtures/haiku_session/README.md) opens in the workbench without a model: the
/// conversation, the citations and the ledger match what haiku.rag computed.
#[tokio::test]
async fn a_haiku_rag_session_opens_fully_inspectable_without_a_model() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/haiku_session");
    let raw = std::fs::read_to_string(dir.join("session.json")).unwrap();
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let session = Session::load(&dir.join("session.json")).unwrap();
    assert_eq!(
        session.messages.len() as u64,
        expected["n_messages"].as_u64().unwrap()
    );
    // Nothing of what haiku.rag wrote is lost on the way through Groundwork.
    let original: serde_json::Value = serde_json::from_str(&raw).unwrap();
    let again = serde_json::to_value(&session).unwrap();
    assert_eq!(again["messages"], original["messages"]);
    assert_eq!(again["state"], original["state"]);

    let mut host = host();
    host.model_ready = false;
    host.model_help = groundwork::engine::discover::configure_hint();
    let mut app = App::new(session, None, host);
    let questions = expected["questions"].as_array().unwrap();
    assert_eq!(app.transcript.turns.len(), questions.len());
    for (q, (turn, row)) in questions
        .iter()
        .zip(app.transcript.turns.iter().zip(&app.transcript.ledger))
    {
        assert_eq!(turn.question, q["identity"].as_u64().unwrap());
        assert_eq!(turn.prompt, q["user_prompt"].as_str().unwrap());
        assert_eq!(turn.answer, q["final_answer"].as_str().unwrap());
        let tools: Vec<&str> = turn.steps.iter().map(|s| s.name.as_str()).collect();
        let want: Vec<&str> = q["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert_eq!(tools, want, "question {}", turn.question);
        let cited: Vec<(String, i64)> = turn
            .citations
            .iter()
            .map(|c| (c.evidence.chunk_id.clone(), c.index))
            .collect();
        let want: Vec<(String, i64)> = q["cited"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["chunk_id"].as_str().unwrap().to_string(),
                    c["index"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(cited, want, "question {}", turn.question);
        for (c, w) in turn.citations.iter().zip(q["cited"].as_array().unwrap()) {
            assert_eq!(c.evidence.source, w["document_title"].as_str().unwrap());
        }
        assert_eq!(
            row.status.as_str(),
            q["citation_status"].as_str().unwrap(),
            "question {}",
            turn.question
        );
        assert_eq!(row.redirected, q["redirect_sent"].as_bool().unwrap());
        assert_eq!(row.violation, q["violation_recorded"].as_bool().unwrap());
    }
    // Every model request is inspectable (reconstructed: the host recorded no snapshots).
    assert_eq!(
        app.request_count(),
        expected["model_requests"].as_array().unwrap().len()
    );
    app.inspector.selected = Some(0);
    let s = pane(&mut app, Pane::Inspector, 160, 48);
    assert!(s.contains("not recorded"), "{s}");
    let s = screen(&mut app, 160, 48);
    assert!(s.contains("Solar Panel Installation Manual"), "{s}");
    assert!(s.contains("ungrounded"), "{s}");
}

/// A notice injected into one request's instructions (here: the search budget is spent)
/// is marked in the inspector; `t` shows the instructions in full.
#[tokio::test]
async fn injected_notices_are_marked_in_the_inspector() {
    let kb = demo_kb().await;
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", serde_json::json!({"query": "battery"})),
        Reply::tool_call("rag_cite", serde_json::json!({"chunk_ids": []})),
        Reply::text("Done."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut services = services(&kb.store, &server.base_url());
    services.config.qa.max_searches = 1;
    let mut rt = Runtime::new(services);
    screen(&mut app, 160, 48);
    ask(&mut rt, &mut app, "Batteries?").await;
    assert_eq!(app.request_count(), 3, "{:?} {:?}", app.ended, app.error);
    let (_, second) = app.request_at(1).unwrap();
    assert!(
        second.instructions.contains("Notice:"),
        "a budget notice was sent"
    );
    app.inspector.selected = Some(1);
    let s = pane(&mut app, Pane::Inspector, 160, 48);
    assert!(s.contains(" notice  Notice:"), "{s}");
    assert!(s.contains("lines of instructions"), "{s}");
    app.focus = Pane::Inspector;
    press(&mut rt, &mut app, KeyCode::Char('t'));
    let s = pane(&mut app, Pane::Inspector, 160, 48);
    assert!(!s.contains("lines of instructions"), "{s}");
    // The first request had no notice.
    app.inspector.selected = Some(0);
    let s = pane(&mut app, Pane::Inspector, 160, 48);
    assert!(!s.contains(" notice "), "{s}");
}

/// Issue 14 item 7: the status bar gives its fields their natural width and only cuts
/// when the whole bar does not fit, keeping the model's name and where it was found.
#[test]
fn status_bar_is_laid_out_by_content() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    app.host.db = "/home/someone/.local/share/groundwork/demo.lancedb".into();
    app.host.model = "smollm2 @ http://127.0.0.1:8080/v1 (found llama.cpp)".into();
    let wide = status_bar(&mut app, 160);
    insta::assert_snapshot!("status_bar_160", wide);
    // Everything fits at 160: nothing is cut.
    assert!(
        wide.contains("model smollm2 @ http://127.0.0.1:8080/v1 (found llama.cpp)"),
        "{wide}"
    );
    assert!(
        wide.contains("db /home/someone/.local/share/groundwork/demo.lancedb"),
        "{wide}"
    );
    assert!(!wide.contains('…'), "{wide}");
    let narrow = status_bar(&mut app, 80);
    insta::assert_snapshot!("status_bar_80", narrow);
    // The URL goes before the model's name and where it was found.
    assert!(
        narrow.contains("model smollm2 (found llama.cpp) │"),
        "{narrow}"
    );
    assert!(narrow.contains("searches 0/5"), "{narrow}");
    assert!(narrow.contains("demo.lancedb"), "{narrow}");
    assert!(narrow.trim_end().chars().count() <= 80);
    // A URL too long for the bar is cut in its middle; the discovery note stays.
    app.host.model =
        "smollm2 @ http://gpu-box.lab.example.org:8080/v1/a/long/path/to/the/server (found llama.cpp)"
            .into();
    let s = status_bar(&mut app, 160);
    assert!(
        s.contains("model smollm2 @ gpu-box.lab.example.org:8080 (found llama.cpp) │"),
        "{s}"
    );
    assert!(s.contains("searches 0/5"), "{s}");
    // Between the two: the URL's host and port.
    app.host.model = "smollm2 @ http://127.0.0.1:8080/v1 (found llama.cpp)".into();
    let s = status_bar(&mut app, 100);
    assert!(
        s.contains("model smollm2 @ 127.0.0.1:8080 (found llama.cpp) │"),
        "{s}"
    );
    // Very narrow: the model's name and the discovery note stay longest.
    let tiny = status_bar(&mut app, 40);
    assert!(tiny.contains("smollm2 (found llama.cpp)"), "{tiny}");
    // An error takes the room of the less useful fields, not of the model.
    app.error = Some("the model server at http://127.0.0.1:8080/v1 closed the connection".into());
    let with_error = status_bar(&mut app, 120);
    assert!(with_error.contains("smollm2"), "{with_error}");
    assert!(with_error.contains("(found llama.cpp)"), "{with_error}");
    assert!(
        with_error.contains("the model server at http://127.0.0.1:8080/v1 closed"),
        "{with_error}"
    );
    // A configured model (no discovery note) and no model at all.
    app.error = None;
    app.host.model = "gpt-4o-mini @ https://api.openai.com/v1".into();
    let s = status_bar(&mut app, 80);
    assert!(s.contains("model gpt-4o-mini @ api.openai.com │"), "{s}");
    app.host.model = "none configured".into();
    let s = status_bar(&mut app, 80);
    assert!(s.contains("model none configured │"), "{s}");
}

/// Issue 14 item 7: "No questions yet" goes as soon as a question is asked (also when the
/// conversation was drawn before, which cached it), and does not come back with the answer.
#[tokio::test]
async fn the_empty_hint_goes_once_a_question_is_asked() {
    let kb = demo_kb().await;
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_cite", serde_json::json!({"chunk_ids": []}))
            .delay(Duration::from_millis(300)),
        Reply::text("An answer."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&kb.store, &server.base_url()));
    let s = screen(&mut app, 160, 48);
    assert!(s.contains("No questions yet"), "{s}");
    type_text(&mut rt, &mut app, "First question?");
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(app.running());
    let s = screen(&mut app, 160, 48);
    assert!(!s.contains("No questions yet"), "pending:\n{s}");
    assert!(s.contains("First question?"), "{s}");
    assert!(
        rt.until(&mut app, Duration::from_secs(30), |a| !a.running())
            .await
    );
    let s = screen(&mut app, 160, 48);
    assert!(!s.contains("No questions yet"), "committed:\n{s}");
    assert!(s.contains("An answer."), "{s}");
    // A question that failed was asked too.
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&kb.store, "http://127.0.0.1:9/v1"));
    screen(&mut app, 80, 24);
    type_text(&mut rt, &mut app, "Hello?");
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(
        rt.until(&mut app, Duration::from_secs(30), |a| !a.running())
            .await
    );
    let s = screen(&mut app, 80, 24);
    assert!(!s.contains("No questions yet"), "failed:\n{s}");
}

fn snapshot(run_id: &str, request: usize) -> Box<groundwork::engine::events::RequestSnapshot> {
    Box::new(groundwork::engine::events::RequestSnapshot {
        run_id: run_id.into(),
        request,
        raw: vec![],
        compacted: vec![],
        tools: vec![],
        instructions: String::new(),
        raw_tokens: Default::default(),
        compacted_tokens: Default::default(),
        tokens: None,
    })
}

/// Issue 14 item 7: the spinner line says what the run is doing, from the engine's
/// events: waiting for the model until something streams, running a tool only while
/// one runs, writing while answer text streams.
#[test]
fn the_spinner_line_follows_the_run() {
    use groundwork::engine::events::{CoreEvent, ToolCallStatus};
    use groundwork::tui::app::Msg;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    // `update` alone: the Ask effect is not carried out; events are fed by hand.
    for c in "Q?".chars() {
        app.update(key_event(KeyCode::Char(c), KeyModifiers::SHIFT));
    }
    let effects = app.update(key_event(KeyCode::Enter, KeyModifiers::NONE));
    assert_eq!(effects.len(), 1);
    let run = app.live.as_ref().unwrap().run_id.clone();
    let line = |app: &mut App, ev: Option<CoreEvent>| {
        if let Some(ev) = ev {
            app.update(Msg::Core(ev));
        }
        let s = pane(app, Pane::Conversation, 100, 20);
        assert!(!s.contains("Executing tasks"), "{s}");
        s
    };
    assert!(line(&mut app, None).contains("starting…"));
    let s = line(
        &mut app,
        Some(CoreEvent::RequestBuilt {
            run_id: run.clone(),
            request: 1,
            snapshot: snapshot(&run, 1),
        }),
    );
    assert!(
        s.contains("waiting for the model (it reads the prompt first)…"),
        "{s}"
    );
    let s = line(
        &mut app,
        Some(CoreEvent::ToolCallStarted {
            run_id: run.clone(),
            request: 1,
            name: "rag_search".into(),
            args: r#"{"query":"x"}"#.into(),
            call_id: "c1".into(),
        }),
    );
    assert!(s.contains("running search…"), "{s}");
    let s = line(
        &mut app,
        Some(CoreEvent::ToolCallFinished {
            run_id: run.clone(),
            request: 1,
            call_id: "c1".into(),
            outcome: ToolCallStatus::Ok,
            summary: String::new(),
        }),
    );
    assert!(s.contains("preparing the next request…"), "{s}");
    assert!(!s.contains("running search"), "{s}");
    let s = line(
        &mut app,
        Some(CoreEvent::RequestBuilt {
            run_id: run.clone(),
            request: 2,
            snapshot: snapshot(&run, 2),
        }),
    );
    assert!(s.contains("waiting for the model (request 2)…"), "{s}");
    let s = line(
        &mut app,
        Some(CoreEvent::ThinkingDelta {
            run_id: run.clone(),
            request: 2,
            text: "hmm".into(),
        }),
    );
    assert!(s.contains("the model is thinking…"), "{s}");
    let s = line(
        &mut app,
        Some(CoreEvent::TextDelta {
            run_id: run.clone(),
            request: 2,
            text: "The answer so far".into(),
        }),
    );
    assert!(s.contains("The answer so far"), "{s}");
    assert!(s.contains("writing the answer…"), "{s}");
    // The stream broke off and is asked for again: what it showed goes.
    let s = line(
        &mut app,
        Some(CoreEvent::ResponseRestarted {
            run_id: run.clone(),
            request: 2,
        }),
    );
    assert!(!s.contains("The answer so far"), "{s}");
    assert!(s.contains("waiting for the model"), "{s}");
    let s = line(
        &mut app,
        Some(CoreEvent::TextDelta {
            run_id: run.clone(),
            request: 2,
            text: "The whole answer".into(),
        }),
    );
    assert!(s.contains("The whole answer"), "{s}");
}

/// Issue 14 items 4 and 7: an answer that ended on `finish_reason: length` is marked as
/// cut off in the conversation; a complete one is not.
#[tokio::test]
async fn an_answer_cut_off_at_max_tokens_is_marked() {
    let kb = demo_kb().await;
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_cite", serde_json::json!({"chunk_ids": []})),
        Reply::text("A complete answer."),
        Reply::tool_call("rag_cite", serde_json::json!({"chunk_ids": []})),
        Reply::text("The array produced sixty-one megawatt hours in").finish_reason("length"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&kb.store, &server.base_url()));
    ask(&mut rt, &mut app, "Short one?").await;
    let s = pane(&mut app, Pane::Conversation, 80, 24);
    assert!(s.contains("A complete answer."), "{s}");
    assert!(!s.contains("cut off"), "{s}");
    ask(&mut rt, &mut app, "How much in July?").await;
    assert_eq!(app.transcript.turns.len(), 2, "{:?}", app.ended);
    app.conversation.scroll = None;
    let s = pane(&mut app, Pane::Conversation, 80, 24);
    // No max_tokens was sent: the server's own limit cut it.
    assert!(s.contains("[cut off by the server's own output or"), "{s}");
    assert_eq!(
        s.matches("cut off").count(),
        1,
        "only the second answer: {s}"
    );
    let settings = redactions();
    let _guard = settings.bind_to_scope();
    insta::assert_snapshot!("conversation_cut_off_80x24", s);
    // The ledger row says so too.
    let s = pane(&mut app, Pane::Ledger, 100, 12);
    let rows: Vec<&str> = s.lines().filter(|l| l.contains("ungrounded")).collect();
    assert_eq!(rows.len(), 2, "{s}");
    assert!(!rows[0].contains("cut off"), "{s}");
    assert!(rows[1].contains("cut off How much in July?"), "{s}");
}

fn is_light(c: ratatui::style::Color) -> bool {
    use ratatui::style::Color;
    matches!(c, Color::White | Color::Gray)
        || matches!(c, Color::Rgb(r, g, b) if r as u16 + g as u16 + b as u16 > 500)
}

/// Issue 14 item 7: the theme follows the terminal's background unless the config names
/// one, and each theme paints its own background wherever the terminal's is not of its
/// kind: the dark theme's white titles are never drawn on a white terminal.
#[test]
fn the_theme_follows_the_terminal_background_and_paints_its_own() {
    use groundwork::tui::background::Background;
    use groundwork::tui::theme::ThemeName;
    use ratatui::style::Color;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    // No theme in the config: auto.
    let (theme, _) = groundwork::tui::load_tui_config(&cfg).unwrap();
    assert_eq!(theme, ThemeName::Auto);
    std::fs::write(&cfg, "[tui]\ntheme = \"auto\"\n").unwrap();
    assert_eq!(
        groundwork::tui::load_tui_config(&cfg).unwrap().0,
        ThemeName::Auto
    );
    let mut app = new_app(dir.path()).with_theme(ThemeName::Auto);
    app.set_terminal_background(Some(Background::Light));
    assert_eq!(app.theme.name, ThemeName::Light);
    app.set_terminal_background(Some(Background::Dark));
    assert_eq!(app.theme.name, ThemeName::Dark);
    app.set_terminal_background(None);
    assert_eq!(app.theme.name, ThemeName::Dark);
    // A theme the user set wins over the background.
    let mut forced = new_app(dir.path()).with_theme(ThemeName::Dark);
    forced.set_terminal_background(Some(Background::Light));
    assert_eq!(forced.theme.name, ThemeName::Dark);

    // The dark theme on a light (or unknown) terminal paints every cell's background,
    // dark; the header title is white on it.
    for bg in [Some(Background::Light), None] {
        forced.set_terminal_background(bg);
        let buf = screen_buffer(&mut forced, 160, 48);
        for cell in buf.content.iter() {
            assert_ne!(cell.bg, Color::Reset, "unpainted cell {cell:?} ({bg:?})");
        }
        let title = &buf[(1, 0)];
        assert_eq!(title.symbol(), "G");
        assert_eq!(title.fg, Color::White);
        assert!(!is_light(title.bg), "{title:?}");
        // A pane title.
        let row = (0..160).map(|x| buf[(x, 1)].symbol()).collect::<String>();
        let x = row.find("Conversation").unwrap() as u16;
        let cell = &buf[(x, 1)];
        assert!(!is_light(cell.bg) && cell.fg != cell.bg, "{cell:?}");
    }
    // On a dark terminal the dark theme leaves the terminal's own background.
    forced.set_terminal_background(Some(Background::Dark));
    let buf = screen_buffer(&mut forced, 160, 48);
    assert_eq!(buf[(1, 0)].bg, Color::Reset);
    // The light theme on a dark terminal paints its own light background.
    let mut light = new_app(dir.path()).with_theme(ThemeName::Light);
    light.set_terminal_background(Some(Background::Dark));
    let buf = screen_buffer(&mut light, 160, 48);
    for cell in buf.content.iter() {
        assert_ne!(cell.bg, Color::Reset, "unpainted cell {cell:?}");
    }
    assert!(is_light(buf[(1, 0)].bg));
    assert_eq!(buf[(1, 0)].fg, Color::Black);
    // Alt-T switches to the other theme, which then paints its own background.
    let mut rt = Runtime::new(groundwork::tui::Services::new(
        None,
        None,
        Default::default(),
        vec![],
        false,
    ));
    app.set_terminal_background(Some(Background::Light));
    press_mod(&mut rt, &mut app, KeyCode::Char('t'), KeyModifiers::ALT);
    assert_eq!(app.theme.name, ThemeName::Dark);
    let buf = screen_buffer(&mut app, 120, 40);
    assert!(!is_light(buf[(1, 0)].bg));

    // A recorded conversation drawn in one theme is drawn in the other's colours after
    // Alt-T (its wrapped lines are cached).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/haiku_session");
    let session = Session::load(&dir.join("session.json")).unwrap();
    let mut app = App::new(session, None, host()).with_theme(ThemeName::Light);
    app.focus = Pane::Conversation;
    app.conversation.scroll = Some(0);
    let you = |app: &mut App| {
        let buf = screen_buffer(app, 160, 48);
        let row = (0..160).map(|x| buf[(x, 2)].symbol()).collect::<String>();
        assert_eq!(
            row.chars().skip(1).take(4).collect::<String>(),
            "You:",
            "{row}"
        );
        buf[(1, 2)].fg
    };
    assert_eq!(Some(you(&mut app)), app.theme.user.fg);
    press_mod(&mut rt, &mut app, KeyCode::Char('t'), KeyModifiers::ALT);
    assert_eq!(app.theme.name, ThemeName::Dark);
    assert_eq!(Some(you(&mut app)), app.theme.user.fg);
    assert_ne!(
        app.theme.user.fg,
        groundwork::tui::theme::Theme::light().user.fg
    );
}

/// Issue 14 item 17: the workbench without a terminal says so in one line and points to
/// `inspect`, instead of "No such device or address (os error 6)".
#[test]
fn the_workbench_without_a_terminal_says_it_needs_one() {
    let home = tempfile::tempdir().unwrap();
    let session = home.path().join("s.json");
    std::fs::write(&session, "{}").unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_groundwork"))
            .args(args)
            .env("HOME", home.path())
            .env("XDG_DATA_HOME", home.path().join("data"))
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .env("GROUNDWORK_DISCOVER", "off")
            .env_remove("GROUNDWORK_MODEL_URL")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap()
    };
    let session = session.to_string_lossy().into_owned();
    for args in [vec!["open", session.as_str()], vec![]] {
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {stderr}");
        assert!(
            stderr.contains("the workbench needs a terminal"),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains("groundwork inspect SESSION"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("os error"), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "nothing drawn: {:?}", out.stdout);
        // Nothing was set up: no demo database, no session file.
        let data = home.path().join("data/groundwork");
        assert!(!data.join("haiku.rag.lancedb").exists(), "{args:?}");
        assert!(!data.join("sessions").exists(), "{args:?}");
    }
}

/// The screen goes through the host: nothing under `src/tui/` names the capabilities.
#[test]
fn the_screen_reads_the_host_never_the_capabilities() {
    fn visit(dir: &std::path::Path, offenders: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                visit(&path, offenders);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for (n, line) in text.lines().enumerate() {
                    let code = line.split("//").next().unwrap_or("");
                    if code.contains("capabilities::") {
                        offenders.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
    let mut offenders = Vec::new();
    visit(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tui"),
        &mut offenders,
    );
    assert!(offenders.is_empty(), "{}", offenders.join("\n"));
}

/// An ordinary session's answers take a reviewer's marks and notes (`m`), kept in the
/// session file, shown in the conversation and the ledger, exported; an experiment's
/// opened session (read-only) refuses them in one line.
#[tokio::test]
async fn answers_are_marked_in_the_session_shown_and_exported() {
    let mut f = three_questions_asked().await;
    let app = &mut f.app;
    let path = f.dir.path().join("session.json");
    let q3 = app.transcript.turns[2].question;
    app.focus = Pane::Ledger;
    app.ledger.selected = 2;
    screen(app, 160, 48);
    press(&mut f.rt, app, KeyCode::Char('m'));
    assert!(matches!(app.popup, Some(Popup::Mark { turn: 2, .. })));
    let popup = screen(app, 160, 48);
    {
        let _guard = redactions().bind_to_scope();
        insta::assert_snapshot!("mark_popup_160x48", popup.clone());
        insta::assert_snapshot!("mark_popup_80x24", screen(app, 80, 24));
    }
    assert!(
        popup.contains("Mark the answer") && popup.contains("now: not marked"),
        "{popup}"
    );
    // A note needs a mark first.
    press(&mut f.rt, app, KeyCode::Char('n'));
    assert!(
        app.notice
            .as_deref()
            .unwrap()
            .starts_with("mark the answer first")
    );
    press(&mut f.rt, app, KeyCode::Char('i'));
    assert!(app.popup.is_none());
    assert_eq!(
        app.notice.as_deref(),
        Some("marked the answer to question 3 invented")
    );
    settle(&mut f.rt, app).await;
    press(&mut f.rt, app, KeyCode::Char('m'));
    press(&mut f.rt, app, KeyCode::Char('n'));
    type_text(&mut f.rt, app, "the guide says nothing of the sort");
    press(&mut f.rt, app, KeyCode::Enter);
    assert!(app.popup.is_none());
    settle(&mut f.rt, app).await;
    let saved = Session::load(&path).unwrap();
    assert_eq!(
        saved.groundwork.extra["reviews"],
        serde_json::json!([{"question": q3, "mark": "invented", "note": "the guide says nothing of the sort"}])
    );
    let ledger = pane(app, Pane::Ledger, 160, 48);
    assert!(ledger.contains("marked invented"), "{ledger}");
    app.focus = Pane::Conversation;
    let shown = pane(app, Pane::Conversation, 160, 48);
    assert!(
        shown.contains("· marked invented: the guide says nothing of the sort"),
        "{shown}"
    );
    let md = groundwork::host::transcript::to_markdown_marked(
        &app.transcript,
        "t",
        &app.marks,
        &app.checks,
    );
    assert!(
        md.contains("*Review: marked invented — the guide says nothing of the sort*"),
        "{md}"
    );
    // A new mark keeps the note; `x` takes both back, and the key leaves the file.
    app.focus = Pane::Ledger;
    press(&mut f.rt, app, KeyCode::Char('m'));
    press(&mut f.rt, app, KeyCode::Char('w'));
    assert_eq!(app.marks[&q3].mark, "wrong");
    assert_eq!(
        app.marks[&q3].note.as_deref(),
        Some("the guide says nothing of the sort")
    );
    press(&mut f.rt, app, KeyCode::Char('m'));
    press(&mut f.rt, app, KeyCode::Char('x'));
    assert_eq!(
        app.notice.as_deref(),
        Some("cleared the mark of the answer to question 3")
    );
    settle(&mut f.rt, app).await;
    let saved = Session::load(&path).unwrap();
    assert!(!saved.groundwork.extra.contains_key("reviews"));
    // While a question runs (its commit is due): refused in one line.
    app.focus = Pane::Input;
    type_text(&mut f.rt, app, "One more?");
    press(&mut f.rt, app, KeyCode::Enter);
    assert!(app.running());
    app.focus = Pane::Ledger;
    press(&mut f.rt, app, KeyCode::Char('m'));
    assert!(app.popup.is_none());
    assert_eq!(
        app.notice.as_deref(),
        Some("a question is running: mark its answers when it ends")
    );
    press_mod(&mut f.rt, app, KeyCode::Char('c'), KeyModifiers::CONTROL);
    settle(&mut f.rt, app).await;
    // Read-only (an experiment's session): refused in one line.
    app.read_only = true;
    press(&mut f.rt, app, KeyCode::Char('m'));
    assert!(app.popup.is_none());
    assert!(app.notice.as_deref().unwrap().starts_with("read-only"));
}
