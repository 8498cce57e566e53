//! Every popup of the workbench (`tui::app::Popup`: help, palette, document filter,
//! database info, the path prompt for each purpose, chunk detail), opened by its keys on
//! the headless app and snapshotted over the whole screen at 80×24 and 160×48.
//! The store-backed popups read the demo corpus in a temporary LanceDB store.

use std::path::Path;
use std::time::Duration;

use crate::support::workbench::*;
use crossterm::event::{KeyCode, KeyModifiers};
use groundwork::tui::Runtime;
use groundwork::tui::app::{App, Pane, PathPurpose, Popup};

/// The whole screen at both sizes, as `<name>_80x24` and `<name>_160x48`.
fn snapshot_both(app: &mut App, name: &str) {
    let settings = redactions();
    let _guard = settings.bind_to_scope();
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), screen(app, w, h));
    }
}

/// An app with no database: the popups that need none.
fn offline() -> (tempfile::TempDir, Runtime, App) {
    let dir = tempfile::tempdir().unwrap();
    let app = new_app(dir.path());
    let rt = Runtime::new(groundwork::tui::Services::new(
        None,
        None,
        groundwork::config::AppConfig::default(),
        vec![],
        false,
    ));
    (dir, rt, app)
}

#[tokio::test]
async fn help() {
    let (_dir, mut rt, mut app) = offline();
    press(&mut rt, &mut app, KeyCode::F(1));
    assert!(matches!(app.popup, Some(Popup::Help { .. })));
    snapshot_both(&mut app, "help");
}

#[tokio::test]
async fn palette() {
    let (_dir, mut rt, mut app) = offline();
    press_mod(&mut rt, &mut app, KeyCode::Char('p'), KeyModifiers::CONTROL);
    assert!(matches!(app.popup, Some(Popup::Palette { .. })));
    snapshot_both(&mut app, "palette");
    // Typing filters the commands; the selection moves.
    type_text(&mut rt, &mut app, "export");
    press(&mut rt, &mut app, KeyCode::Down);
    snapshot_both(&mut app, "palette_query");
}

/// Each command's row of the palette at `w` columns: its keys whole, after at least two
/// spaces, and its name (whole when `whole`, else at least its first words) before them.
fn palette_rows_hold(app: &mut App, w: u16, whole: bool) {
    let text = screen(app, w, 40);
    let lines: Vec<&str> = text.lines().collect();
    let top = lines
        .iter()
        .position(|l| l.contains("│> "))
        .expect("the query line");
    for (k, a) in app.palette_entries("").iter().enumerate() {
        let (name, hint) = (a.description(), app.keymap.hint(*a));
        let row = lines[top + 1 + k];
        let shown = if whole {
            name
        } else {
            &name[..name.len().min(10)]
        };
        let at = row
            .find(shown)
            .unwrap_or_else(|| panic!("{name:?} at {w}: {row}"));
        let after = &row[at + shown.len()..];
        let gap = after
            .find(&format!("  {hint}"))
            .unwrap_or_else(|| panic!("no gap before {hint:?} at {w}: {row}"));
        // The rest of the name, or its start cut with `…`, then only spaces.
        let rest = after[..gap].trim_end();
        let cut = rest.strip_suffix('…');
        let fits = match cut {
            Some(start) => name[shown.len()..].starts_with(start) && !whole,
            None => rest.is_empty() || (!whole && name[shown.len()..] == *rest),
        };
        assert!(fits, "{name:?} at {w}: {row}");
    }
}

#[tokio::test]
async fn palette_keys_are_never_run_into_or_cut() {
    let (_dir, mut rt, mut app) = offline();
    press_mod(&mut rt, &mut app, KeyCode::Char('p'), KeyModifiers::CONTROL);
    // The longest name fits at 80 columns; at 50 the names are cut, never the keys.
    palette_rows_hold(&mut app, 80, true);
    palette_rows_hold(&mut app, 160, true);
    palette_rows_hold(&mut app, 50, false);
    let narrow = screen(&mut app, 50, 40);
    assert!(narrow.contains('…'), "{narrow}");
}

#[tokio::test]
async fn help_shows_every_description_whole_at_80_columns() {
    let (_dir, mut rt, mut app) = offline();
    press(&mut rt, &mut app, KeyCode::F(1));
    let rows = app.keymap.help_rows();
    // Tall enough for every row: what is cut shows as missing words.
    let text = screen(&mut app, 80, rows.len() as u16 * 2 + 4);
    // The popup's inside: the columns between its corners, on the rows below its top.
    let lines: Vec<Vec<char>> = text.lines().map(|l| l.chars().collect()).collect();
    let top = lines
        .iter()
        .position(|l| l.iter().collect::<String>().contains("╭ Keys"))
        .expect("the help popup");
    let left = lines[top].iter().position(|c| *c == '╭').unwrap();
    let right = left
        + 1
        + lines[top][left + 1..]
            .iter()
            .position(|c| *c == '╮')
            .unwrap();
    let inside: String = lines[top + 1..]
        .iter()
        .filter(|l| l.len() > right)
        .map(|l| l[left + 1..right].iter().collect::<String>())
        .collect::<Vec<_>>()
        .join(" ");
    let words: Vec<&str> = inside.split_whitespace().collect();
    let joined = words.join(" ");
    for (_, desc) in rows {
        let desc = desc.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            joined.contains(&desc),
            "{desc:?} is not shown whole:\n{text}"
        );
    }
}

#[tokio::test]
async fn document_filter() {
    let kb = demo_kb().await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&kb.store, "http://127.0.0.1:9/v1"));
    press_mod(&mut rt, &mut app, KeyCode::Char('p'), KeyModifiers::CONTROL);
    type_text(&mut rt, &mut app, "filter");
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(matches!(app.popup, Some(Popup::Filter { all: None, .. })));
    snapshot_both(&mut app, "filter_loading");
    assert!(
        rt.until(&mut app, Duration::from_secs(10), |a| {
            matches!(a.popup, Some(Popup::Filter { all: Some(_), .. }))
        })
        .await
    );
    press(&mut rt, &mut app, KeyCode::Down);
    press(&mut rt, &mut app, KeyCode::Char(' '));
    snapshot_both(&mut app, "filter");
}

#[tokio::test]
async fn database_info() {
    let kb = demo_kb().await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&kb.store, "http://127.0.0.1:9/v1"));
    app.focus = Pane::Ledger;
    press(&mut rt, &mut app, KeyCode::Char('I'));
    assert!(matches!(app.popup, Some(Popup::Info(None))));
    assert!(
        rt.until(&mut app, Duration::from_secs(10), |a| {
            matches!(a.popup, Some(Popup::Info(Some(_))))
        })
        .await
    );
    snapshot_both(&mut app, "info");
}

/// A folder with a sub-folder, a session, an image and a file neither lists.
fn fixture_dir(dir: &Path) {
    std::fs::create_dir(dir.join("older")).unwrap();
    std::fs::write(dir.join("session.json"), "{}").unwrap();
    std::fs::write(dir.join("notes.txt"), "hello").unwrap();
    image::RgbImage::from_pixel(4, 4, image::Rgb([200, 10, 10]))
        .save(dir.join("chart.png"))
        .unwrap();
}

/// Opens the path prompt for `purpose` by its key and waits for its completions.
async fn path_prompt(rt: &mut Runtime, app: &mut App, purpose: PathPurpose) {
    match purpose {
        PathPurpose::AttachImage => press_mod(rt, app, KeyCode::Char('o'), KeyModifiers::CONTROL),
        PathPurpose::SaveAs => press_mod(rt, app, KeyCode::Char('s'), KeyModifiers::CONTROL),
        PathPurpose::Open => {
            app.focus = Pane::Conversation;
            press(rt, app, KeyCode::Char('o'));
        }
    }
    assert!(matches!(app.popup, Some(Popup::Path { purpose: p, .. }) if p == purpose));
    assert!(
        rt.until(app, Duration::from_secs(10), |a| {
            matches!(&a.popup, Some(Popup::Path { entries, .. }) if !entries.is_empty())
        })
        .await,
        "the prompt lists its completions"
    );
}

#[tokio::test]
async fn path_prompts() {
    let (dir, mut rt, mut app) = offline();
    fixture_dir(dir.path());
    app.start_dir = format!("{}/", dir.path().display());

    path_prompt(&mut rt, &mut app, PathPurpose::AttachImage).await;
    snapshot_both(&mut app, "path_attach_image");
    press(&mut rt, &mut app, KeyCode::Esc);

    path_prompt(&mut rt, &mut app, PathPurpose::SaveAs).await;
    snapshot_both(&mut app, "path_save_as");
    press(&mut rt, &mut app, KeyCode::Esc);

    path_prompt(&mut rt, &mut app, PathPurpose::Open).await;
    snapshot_both(&mut app, "path_open");
    // Typing narrows the completions (listed by the Runtime, newest wins); Tab takes the
    // highlighted one; Enter on a folder goes into it.
    type_text(&mut rt, &mut app, "o");
    assert!(
        rt.until(&mut app, Duration::from_secs(10), |a| {
            matches!(&a.popup, Some(Popup::Path { entries, .. }) if entries.len() == 1)
        })
        .await
    );
    press(&mut rt, &mut app, KeyCode::Tab);
    let older = format!("{}/older/", dir.path().display());
    let Some(Popup::Path { input, .. }) = &app.popup else {
        panic!("the prompt stays open")
    };
    assert_eq!(input.lines().join(""), older);
    settle(&mut rt, &mut app).await;
    press(&mut rt, &mut app, KeyCode::Esc);
    assert!(app.popup.is_none());
}

#[tokio::test]
async fn path_prompt_enter_goes_into_a_folder_and_opens_a_session() {
    let (dir, mut rt, mut app) = offline();
    fixture_dir(dir.path());
    let session = groundwork::session::Session::new("scripted-model");
    session.save(&dir.path().join("older/kept.json")).unwrap();
    app.start_dir = format!("{}/", dir.path().display());
    path_prompt(&mut rt, &mut app, PathPurpose::Open).await;
    // The typed text is a folder: Enter takes the highlighted entry, `older/`, and enters it.
    let older = format!("{}/older/", dir.path().display());
    assert!(
        matches!(&app.popup, Some(Popup::Path { entries, selected: 0, .. }) if entries[0] == older)
    );
    press(&mut rt, &mut app, KeyCode::Enter);
    let kept = format!("{older}kept.json");
    assert!(
        rt.until(&mut app, Duration::from_secs(10), |a| {
            matches!(&a.popup, Some(Popup::Path { entries, .. }) if entries == std::slice::from_ref(&kept))
        })
        .await,
        "the prompt moved into the folder"
    );
    // Enter on the highlighted session opens it; a JSON session is continued in the
    // SQLite file beside it, and the notice says so.
    press(&mut rt, &mut app, KeyCode::Enter);
    let continued = format!("{older}kept.sqlite");
    assert!(
        rt.until(&mut app, Duration::from_secs(10), |a| a.popup.is_none()
            && a.session_path.as_deref() == Some(Path::new(&continued))
            && a.notice.as_deref()
                == Some(
                    format!("{kept} is kept as it was; the session continues in {continued}")
                        .as_str()
                ))
        .await,
        "the session was opened: {:?}",
        app.error
    );
}

#[tokio::test]
async fn chunk_detail() {
    let kb = demo_kb().await;
    let session = groundwork::host::demo::session()
        .expect("this build has the demo session")
        .unwrap();
    let mut app = App::new(session, None, host());
    let mut rt = Runtime::new(services(&kb.store, "http://127.0.0.1:9/v1"));
    screen(&mut app, 160, 48);
    press(&mut rt, &mut app, KeyCode::F(4));
    press(&mut rt, &mut app, KeyCode::Char('g'));
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(app.ledger.in_chunks);
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(matches!(
        app.popup,
        Some(Popup::ChunkDetail { text: None, .. })
    ));
    assert!(
        rt.until(&mut app, Duration::from_secs(10), |a| {
            matches!(a.popup, Some(Popup::ChunkDetail { text: Some(_), .. }))
        })
        .await
    );
    settle(&mut rt, &mut app).await;
    snapshot_both(&mut app, "chunk_detail");
}

/// Issue 46: the screen is a sink like any other. A secret the redactor knows (a key
/// from the environment) or recognises (a bearer token a server echoed) never reaches a
/// cell, whichever pane holds it.
#[test]
fn no_secret_reaches_the_screen() {
    groundwork::errors::register_secret("sk-screen-registered-4711");
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    app.error = Some(
        "reranker: HTTP 401: key sk-screen-registered-4711 refused (Bearer rr-screen-echo-99)"
            .into(),
    );
    for (w, h) in [(80, 24), (160, 48)] {
        let text = screen(&mut app, w, h);
        assert!(!text.contains("sk-screen-registered-4711"), "{text}");
        assert!(!text.contains("rr-screen-echo-99"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
    }
}

/// Issue 46: a model that accepts the request and says nothing shows the wait, in the
/// conversation's spinner line and on the status bar, once it has lasted 10 s: how long,
/// the idle timeout that ends the attempt, and whether it will be tried again. The first
/// byte of an answer ends it.
#[tokio::test]
async fn a_silent_model_shows_how_long_the_question_has_waited() {
    use crate::support::scripted_server::{Reply, ScriptedServer};
    let kb = demo_kb().await;
    let server = ScriptedServer::start(vec![
        Reply::text("Late but whole.").delay(Duration::from_secs(2)),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&kb.store, &server.base_url()));
    app.focus = Pane::Input;
    type_text(&mut rt, &mut app, "Anyone there?");
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(
        rt.until(&mut app, Duration::from_secs(10), |a| {
            a.live.as_ref().is_some_and(|l| l.waiting.is_some())
        })
        .await,
        "the attempt was announced"
    );
    // Nothing shown before 10 s.
    assert!(!status_bar(&mut app, 160).contains("waiting for the model:"));
    let live = app.live.as_mut().unwrap();
    let waiting = live.waiting.as_mut().unwrap();
    assert_eq!((waiting.idle_timeout_secs, waiting.retries_left), (10, 1));
    waiting.since -= Duration::from_secs(35);
    let note = "waiting for the model: 35 s (idle timeout 10 s, will try once more)";
    assert!(
        status_bar(&mut app, 200).contains(note),
        "{}",
        status_bar(&mut app, 200)
    );
    assert!(
        status_bar(&mut app, 160).contains("waiting for the model: 35 s (idle timeout 10 s"),
        "{}",
        status_bar(&mut app, 160)
    );
    let conversation = pane(&mut app, Pane::Conversation, 100, 20);
    assert!(conversation.contains(note), "{conversation}");
    assert!(
        rt.until(&mut app, Duration::from_secs(20), |a| !a.running())
            .await,
        "the answer came"
    );
    assert!(!status_bar(&mut app, 160).contains("waiting for the model:"));
}

/// Issue 41: a question asked in the workbench records the knowledge bases it ran
/// against in the session, as `ask` does.
#[tokio::test]
async fn a_workbench_question_records_its_knowledge_base() {
    use crate::support::scripted_server::{Reply, ScriptedServer};
    use groundwork::session::knowledge::{KnowledgeBase, recorded};
    let kb = demo_kb().await;
    let server = ScriptedServer::start(vec![Reply::text("Hello.")]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    // The versions of its tables the open store reads: each question records them.
    let versions = kb.store.table_versions().await.unwrap();
    let open = KnowledgeBase {
        name: None,
        location: kb.db.clone(),
        embedder: Some("openai:hashembed (64)".into()),
        reading: Some(versions.clone()),
        ..Default::default()
    };
    app.host.knowledge_bases = vec![open.clone()];
    let mut rt = Runtime::new(services(&kb.store, &server.base_url()));
    ask(&mut rt, &mut app, "Hi?").await;
    let saved = groundwork::session::Session::load(&dir.path().join("session.json")).unwrap();
    assert_eq!(
        recorded(&saved.groundwork.extra),
        [KnowledgeBase {
            questions: vec![0],
            versions: [(0, versions)].into(),
            reading: None,
            ..open
        }]
    );
}

/// Issue 44 §1: a cited chunk whose document was deleted since is shown as the question
/// read it (from the table versions the session recorded), saying its source changed
/// since it was cited; the Markdown export says so too.
#[tokio::test]
async fn a_source_deleted_since_it_was_cited_is_shown_as_the_question_read_it() {
    use crate::support::scripted_server::{Reply, ScriptedServer};
    let kb = demo_kb().await;
    let cited = hit(&kb.store, "battery state of charge", |r| {
        r.chunk_id.is_some()
    })
    .await;
    let chunk = cited.chunk_id.clone().unwrap();
    let server = ScriptedServer::start(vec![
        Reply::tool_call(
            "rag_search",
            serde_json::json!({"query": "battery state of charge"}),
        ),
        Reply::tool_call(
            "rag_cite",
            serde_json::json!({"chunk_ids": [chunk.clone()]}),
        ),
        Reply::text("The battery is kept between bounds [1]."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    app.host.knowledge_bases = vec![kb.recording().await];
    let mut rt = Runtime::new(services(&kb.store, &server.base_url()));
    ask(&mut rt, &mut app, "How is the battery kept?").await;
    let text = app.transcript.turns[0].citations[0]
        .passage
        .as_ref()
        .expect("the passage, read from the knowledge base as it is")
        .text
        .clone();
    let first_line: String = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap()
        .chars()
        .take(40)
        .collect();

    // Later, the cited document is deleted, and the session opened again.
    kb.store
        .delete_document(cited.document_id.as_deref().unwrap())
        .await
        .unwrap();
    let fresh = kb.reopened().await;
    assert!(
        fresh.result_for_chunk(&chunk).await.unwrap().is_none(),
        "gone now"
    );
    let saved = groundwork::session::Session::load(&dir.path().join("session.json")).unwrap();
    let mut app = App::new(saved, None, host());
    let mut rt = Runtime::new(services(&fresh, &server.base_url()));
    rt.handle(&mut app, groundwork::tui::app::Msg::Started);
    assert!(
        rt.until(&mut app, Duration::from_secs(30), |a| {
            a.transcript.turns[0].citations[0].passage.is_some()
        })
        .await,
        "the passage, as the question read it"
    );
    let passage = app.transcript.turns[0].citations[0]
        .passage
        .clone()
        .unwrap();
    assert_eq!(passage.text, text);
    assert!(passage.as_cited, "read at the recorded versions");
    let screen = screen(&mut app, 160, 48);
    assert!(
        screen.contains("source changed since cited: not in the knowledge base now"),
        "{screen}"
    );
    assert!(screen.contains(&first_line), "{screen}");
    let md = groundwork::host::transcript::to_markdown(&app.transcript, "s");
    assert!(md.contains("source changed since cited"), "{md}");
    // The ledger says what changed in the knowledge base since the question read it.
    assert!(
        rt.until(&mut app, Duration::from_secs(30), |a| a
            .kb_changes
            .contains_key(&0))
            .await,
        "the knowledge base compared"
    );
    assert_eq!(app.kb_changes[&0], "1 document deleted");
    let ledger = pane(&mut app, Pane::Ledger, 160, 48);
    assert!(
        ledger.contains("knowledge base: 1 document deleted since"),
        "{ledger}"
    );
    // And the inspector, on the question's requests.
    let inspector = pane(&mut app, Pane::Inspector, 160, 48);
    assert!(
        inspector.contains("knowledge base changed since this question: 1 document deleted"),
        "{inspector}"
    );
}

/// Issue 41: `q` asks before quitting when a question is typed (or running); a second
/// `q` quits, another key keeps the workbench. At 80 columns the tab row names every pane
/// whole.
#[tokio::test]
async fn q_asks_before_losing_a_typed_question_and_the_tab_row_fits_80_columns() {
    let dir = tempfile::tempdir().unwrap();
    let kb = demo_kb().await;
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&kb.store, "http://127.0.0.1:9/v1"));
    app.focus = Pane::Input;
    type_text(&mut rt, &mut app, "half a question");
    app.focus = Pane::Ledger;
    press(&mut rt, &mut app, KeyCode::Char('q'));
    assert!(!app.quit, "asked first");
    assert_eq!(
        app.notice.as_deref(),
        Some("the question input holds text: press q again to quit, any other key to stay")
    );
    press(&mut rt, &mut app, KeyCode::Char('j'));
    press(&mut rt, &mut app, KeyCode::Char('q'));
    assert!(!app.quit, "another key disarmed it");
    press(&mut rt, &mut app, KeyCode::Char('q'));
    assert!(app.quit, "the second q quits");

    let mut app = new_app(dir.path());
    app.zoom = true;
    app.focus = Pane::Ledger;
    let top = screen(&mut app, 80, 24);
    let row = top.lines().next().unwrap();
    for tab in ["Conversation", "Inspector", "Ledger", "Images"] {
        assert!(row.split_whitespace().any(|w| w == tab), "{row}");
    }
    // With nothing typed, q quits at once.
    press(&mut rt, &mut app, KeyCode::Char('q'));
    assert!(app.quit);
}
