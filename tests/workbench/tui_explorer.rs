//! The knowledge-base explorer (F6): documents in batches with a filter box, a document's
//! details and chunks, a chunk's every field, search over the base with Enter going to the
//! chunk, the agent context (what the search tool hands the model) and the questions of
//! the session that retrieved and cited a chunk. Driven by keys on the headless app over
//! real LanceDB stores (the demo corpus; a generated base of 60 documents), snapshotted at
//! 80×24 and 160×48.

use std::time::Duration;

use crate::support::kb::{chunk, document, kb_with, stored_returns};
use crate::support::scripted_server::ScriptedServer;
use crate::support::workbench::*;
use crossterm::event::{KeyCode, KeyModifiers};
use groundwork::config::AppConfig;
use groundwork::host::explore::{ChunkUse, chunk_uses};
use groundwork::tui::app::{App, Explorer, ExplorerView, GroundingState};
use groundwork::tui::{Runtime, Services};

/// The whole screen at both sizes, as `<name>_80x24` and `<name>_160x48`.
fn snapshot_both(app: &mut App, name: &str) {
    let mut settings = redactions();
    settings.add_filter(
        r"\d{4}-\d{2}-\d{2}[T ][0-9:.]+(Z|[+-]\d{2}:?\d{2})?",
        "<time>",
    );
    let _guard = settings.bind_to_scope();
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), screen(app, w, h));
    }
}

fn ex(app: &App) -> &Explorer {
    app.explorer.as_ref().expect("the explorer is open")
}

/// Runs background messages until `done` holds (10 s at most), failing with `what`.
async fn wait(rt: &mut Runtime, app: &mut App, what: &str, done: impl Fn(&App) -> bool) {
    assert!(
        rt.until(app, Duration::from_secs(10), done).await,
        "waiting for {what}: notice {:?}, error {:?}",
        app.notice,
        app.error
    );
}

/// Opens the explorer with F6 and waits for the first batch and the first document.
async fn open(rt: &mut Runtime, app: &mut App) {
    press(rt, app, KeyCode::F(6));
    assert!(app.explorer.is_some(), "F6 opens the explorer");
    wait(rt, app, "the first document's details", |a| {
        a.explorer
            .as_ref()
            .is_some_and(|e| !e.docs_loading && e.detail.is_some())
    })
    .await;
}

/// `/`, the query, Enter, and the results.
async fn search(rt: &mut Runtime, app: &mut App, query: &str) {
    press(rt, app, KeyCode::Char('/'));
    assert!(matches!(ex(app).view, ExplorerView::Search(_)));
    type_text(rt, app, query);
    press(rt, app, KeyCode::Enter);
    wait(
        rt,
        app,
        "the search results",
        |a| matches!(&ex(a).view, ExplorerView::Search(s) if !s.running),
    )
    .await;
}

fn search_results(app: &App) -> Vec<groundwork::store::SearchResult> {
    match &ex(app).view {
        ExplorerView::Search(s) => s.results.clone().expect("the search succeeded"),
        _ => panic!("not on the search screen"),
    }
}

#[tokio::test]
async fn documents_details_chunks_and_a_chunk_with_every_field() {
    let kb = demo_kb().await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&kb.store, "http://127.0.0.1:9/v1"));
    open(&mut rt, &mut app).await;
    let all = kb.store.list_documents(None).await.unwrap();
    assert_eq!(
        ex(&app).docs.len(),
        all.len(),
        "every demo document is listed"
    );
    assert!(ex(&app).docs_done, "a short base is loaded in one batch");
    let first = ex(&app).detail.clone().unwrap().unwrap();
    assert_eq!(first.meta.id, ex(&app).docs[0].id);
    let stored = kb.store.chunks_of(&first.meta.id).await.unwrap();
    assert_eq!(
        first.chunks.len(),
        stored.len(),
        "the details count its chunks"
    );
    snapshot_both(&mut app, "explorer_documents");

    // The PDF: pages and pictures are counted.
    let pdf = ex(&app)
        .docs
        .iter()
        .position(|d| d.uri.as_deref().is_some_and(|u| u.ends_with(".pdf")))
        .expect("the demo corpus has a PDF");
    for _ in 0..pdf {
        press(&mut rt, &mut app, KeyCode::Down);
    }
    wait(
        &mut rt,
        &mut app,
        "the PDF's details",
        |a| matches!(&ex(a).detail, Some(Ok(d)) if d.meta.id == ex(a).docs[pdf].id),
    )
    .await;
    let detail = ex(&app).detail.clone().unwrap().unwrap();
    assert!(!detail.pages.is_empty(), "the PDF's chunks lie on pages");
    assert!(detail.pictures > 0, "the PDF's figure is counted");
    snapshot_both(&mut app, "explorer_pdf");

    // Tab: the chunks, in order, and the highlighted chunk's fields.
    press(&mut rt, &mut app, KeyCode::Tab);
    assert!(ex(&app).in_chunks);
    let orders: Vec<i64> = ex(&app).chunks().iter().map(|c| c.order).collect();
    let mut sorted = orders.clone();
    sorted.sort();
    assert_eq!(orders, sorted, "chunks are listed in order");
    press(&mut rt, &mut app, KeyCode::Down);
    assert_eq!(ex(&app).chunk, 1);
    snapshot_both(&mut app, "explorer_chunks");

    // Enter: every field of the chunk.
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(matches!(ex(&app).view, ExplorerView::Chunk { .. }));
    let s = screen(&mut app, 160, 48);
    for field in [
        "ID:",
        "Document ID:",
        "Order:",
        "Page(s):",
        "Section:",
        "Labels:",
        "DocItem Refs:",
        "In this session:",
    ] {
        assert!(s.contains(field), "{field} missing:\n{s}");
    }
    snapshot_both(&mut app, "explorer_chunk");
    // Esc back to the lists; Esc twice closes the explorer and the panes return.
    press(&mut rt, &mut app, KeyCode::Esc);
    assert!(matches!(ex(&app).view, ExplorerView::Main));
    press(&mut rt, &mut app, KeyCode::Esc);
    press(&mut rt, &mut app, KeyCode::Esc);
    assert!(app.explorer.is_none());
    assert!(screen(&mut app, 160, 48).contains("Citation ledger"));
}

#[tokio::test]
async fn the_filter_box_narrows_the_documents_by_title_or_uri() {
    let kb = demo_kb().await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&kb.store, "http://127.0.0.1:9/v1"));
    open(&mut rt, &mut app).await;
    let before = ex(&app).docs.len();
    press(&mut rt, &mut app, KeyCode::Char('f'));
    assert!(ex(&app).editing_filter);
    type_text(&mut rt, &mut app, "BATTERY");
    wait(&mut rt, &mut app, "the filtered batch", |a| {
        !ex(a).docs_loading && ex(a).detail.is_some()
    })
    .await;
    let docs = &ex(&app).docs;
    let docs_len = docs.len();
    assert!(!docs.is_empty() && docs.len() < before, "{docs:?}");
    for d in docs {
        let label = format!("{:?} {:?}", d.title, d.uri).to_lowercase();
        assert!(label.contains("battery"), "{label}");
    }
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(!ex(&app).editing_filter);
    snapshot_both(&mut app, "explorer_filter");
    // A filter nothing matches says so.
    press(&mut rt, &mut app, KeyCode::Char('f'));
    type_text(&mut rt, &mut app, "zzz");
    wait(&mut rt, &mut app, "the empty batch", |a| {
        !ex(a).docs_loading
    })
    .await;
    assert!(ex(&app).docs.is_empty());
    assert!(screen(&mut app, 80, 24).contains("No title or URI matches."));
    // A quote is text, not SQL.
    type_text(&mut rt, &mut app, "'");
    wait(&mut rt, &mut app, "the quoted batch", |a| {
        !ex(a).docs_loading
    })
    .await;
    assert_eq!(ex(&app).docs_error, None);
    assert!(ex(&app).docs.is_empty());
    // The rows are matched in memory, read once per version of the table: a document
    // written since is found by the next key, in the order the documents were added.
    for _ in 0..ex(&app).filter.len() {
        press(&mut rt, &mut app, KeyCode::Backspace);
    }
    kb.store
        .add_document(
            document(
                Some("test://battery-late"),
                Some("A late battery note"),
                vec![],
                vec![chunk(0, &[], &[], "A battery note written after opening.")],
            ),
            None,
        )
        .await
        .unwrap();
    type_text(&mut rt, &mut app, "battery");
    wait(&mut rt, &mut app, "the batch with the new document", |a| {
        !ex(a).docs_loading
    })
    .await;
    let titles: Vec<Option<String>> = ex(&app).docs.iter().map(|d| d.title.clone()).collect();
    assert_eq!(
        titles.last(),
        Some(&Some("A late battery note".to_string()))
    );
    assert_eq!(titles.len(), docs_len + 1, "{titles:?}");
}

/// The update function alone: one batch read at a time. Keys typed into the filter while
/// a read runs ask for nothing; when it returns (for an older filter) the current
/// filter's first batch is asked, once.
#[test]
fn typing_a_filter_queues_one_read_not_one_per_key() {
    use groundwork::tui::app::{Effect, ExploreRequest, Explored, Msg};
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let reads = |effects: &[Effect]| -> Vec<(u64, String, usize)> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Explore(ExploreRequest::Documents {
                    generation,
                    filter,
                    offset,
                }) => Some((*generation, filter.clone(), *offset)),
                _ => None,
            })
            .collect()
    };
    let opened = app.update(key_event(KeyCode::F(6), KeyModifiers::NONE));
    assert_eq!(reads(&opened), vec![(1, String::new(), 0)]);
    app.update(key_event(KeyCode::Char('f'), KeyModifiers::NONE));
    for c in "bat".chars() {
        let e = app.update(key_event(KeyCode::Char(c), KeyModifiers::NONE));
        assert!(reads(&e).is_empty(), "{c}: the first read is still running");
    }
    let again = app.update(Msg::Explored(Explored::Documents {
        generation: 1,
        offset: 0,
        result: Ok(Vec::new()),
    }));
    assert_eq!(reads(&again), vec![(4, "bat".to_string(), 0)]);
    assert!(ex(&app).docs.is_empty() && ex(&app).docs_loading);
    let done = app.update(Msg::Explored(Explored::Documents {
        generation: 4,
        offset: 0,
        result: Ok(Vec::new()),
    }));
    assert!(reads(&done).is_empty());
    assert!(!ex(&app).docs_loading && ex(&app).docs_done);
}

/// When the first batch arrives the store is asked, once, to read ahead the rows the
/// title filter matches, so the first key typed in the filter box finds them read; a
/// filtered first batch asks nothing.
#[test]
fn the_first_batch_reads_ahead_for_the_filter_once() {
    use groundwork::tui::app::{Effect, ExploreRequest, Explored, Msg};
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let warms = |effects: &[Effect]| {
        effects
            .iter()
            .filter(|e| matches!(e, Effect::Explore(ExploreRequest::WarmFilter)))
            .count()
    };
    let doc = |i: usize| groundwork::store::DocumentMeta {
        id: format!("doc-{i}"),
        uri: None,
        title: Some(format!("Manual {i}")),
        metadata: Default::default(),
        created_at: String::new(),
        updated_at: String::new(),
    };
    let opened = app.update(key_event(KeyCode::F(6), KeyModifiers::NONE));
    assert_eq!(warms(&opened), 0, "the first batch goes first");
    let first = app.update(Msg::Explored(Explored::Documents {
        generation: 1,
        offset: 0,
        result: Ok((0..50).map(doc).collect()),
    }));
    assert_eq!(warms(&first), 1);
    assert!(ex(&app).filter_warmed);
    let next = app.update(Msg::Explored(Explored::Documents {
        generation: 1,
        offset: 50,
        result: Ok((50..60).map(doc).collect()),
    }));
    assert_eq!(warms(&next), 0, "once");
    assert!(app.update(Msg::Explored(Explored::FilterWarmed)).is_empty());
}

#[tokio::test]
async fn documents_load_in_batches_of_fifty_as_the_highlight_nears_the_end() {
    let docs = (0..60)
        .map(|i| {
            let title = format!("Report {i:02}");
            (
                "doc",
                document(
                    Some(&format!("file:///reports/{i:02}.md")),
                    Some(&title),
                    vec![],
                    vec![chunk(
                        0,
                        &[],
                        &[],
                        &format!("Report number {i} on the array."),
                    )],
                ),
            )
        })
        .collect();
    let kb = kb_with(docs).await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(Services::new(
        Some(kb.store.clone()),
        None,
        AppConfig::default(),
        vec![],
        false,
    ));
    // From the palette this time.
    press_mod(&mut rt, &mut app, KeyCode::Char('p'), KeyModifiers::CONTROL);
    type_text(&mut rt, &mut app, "explore");
    press(&mut rt, &mut app, KeyCode::Enter);
    assert!(app.explorer.is_some(), "the palette opens the explorer");
    wait(&mut rt, &mut app, "the first batch", |a| {
        !ex(a).docs_loading && ex(a).detail.is_some()
    })
    .await;
    assert_eq!(ex(&app).docs.len(), 50, "one batch of 50 first");
    assert!(!ex(&app).docs_done);
    assert_eq!(ex(&app).docs[0].title.as_deref(), Some("Report 00"));
    // Moving down to within ten rows of the end loads the next batch.
    for _ in 0..39 {
        press(&mut rt, &mut app, KeyCode::Down);
    }
    assert!(
        !ex(&app).docs_loading,
        "39 rows down is not yet near the end"
    );
    press(&mut rt, &mut app, KeyCode::Down);
    assert!(
        ex(&app).docs_loading,
        "row 40 of 50 asks for the next batch"
    );
    wait(&mut rt, &mut app, "the second batch", |a| ex(a).docs_done).await;
    let titles: Vec<String> = ex(&app)
        .docs
        .iter()
        .map(|d| d.title.clone().unwrap_or_default())
        .collect();
    let want: Vec<String> = (0..60).map(|i| format!("Report {i:02}")).collect();
    assert_eq!(titles, want, "all 60, in order, none twice");
}

/// A fresh workbench on `kb` with the explorer's search for `query` done: the results,
/// and the index of the first in another document than the one shown.
async fn searched(
    kb: &DemoKb,
    dir: &std::path::Path,
    query: &str,
) -> (App, Runtime, Vec<groundwork::store::SearchResult>, usize) {
    let mut app = new_app(dir);
    let mut rt = Runtime::new(services(&kb.store, "http://127.0.0.1:9/v1"));
    open(&mut rt, &mut app).await;
    search(&mut rt, &mut app, query).await;
    let results = search_results(&app);
    let shown = ex(&app).detail_for.clone();
    let i = results
        .iter()
        .position(|r| r.document_id != shown)
        .expect("a result in another document than the one shown");
    (app, rt, results, i)
}

/// Down to result `i` and Enter: its document is being read.
fn jump(rt: &mut Runtime, app: &mut App, i: usize) {
    for _ in 0..i {
        press(rt, app, KeyCode::Down);
    }
    press(rt, app, KeyCode::Enter);
    assert!(ex(app).pending_chunk.is_some() && ex(app).detail.is_none());
}

/// A key pressed right after Enter on a result, while its document is still being read,
/// acts on that result's chunk (a fast user, or keys typed ahead in a terminal).
#[tokio::test]
async fn keys_pressed_while_the_jumped_to_document_is_read_act_on_its_chunk() {
    let kb = demo_kb().await;
    let dir = tempfile::tempdir().unwrap();
    let query = "rooftop array produced MWh over the year";
    let (mut app, mut rt, results, i) = searched(&kb, dir.path(), query).await;
    // `c`: the chunk's agent context, before the document has arrived.
    jump(&mut rt, &mut app, i);
    press(&mut rt, &mut app, KeyCode::Char('c'));
    assert_eq!(app.notice, None);
    match &ex(&app).view {
        ExplorerView::Context { chunk_id, .. } => assert_eq!(chunk_id, results[i].id()),
        other => panic!("not the chunk's context: {other:?}"),
    }
    // Esc goes back to the documents, where the chunk is highlighted once it arrives.
    press(&mut rt, &mut app, KeyCode::Esc);
    wait(&mut rt, &mut app, "the chunk's document", |a| {
        ex(a).pending_chunk.is_none() && matches!(ex(a).detail, Some(Ok(_)))
    })
    .await;
    assert_eq!(
        ex(&app).highlighted_chunk().map(|c| c.id()),
        Some(results[i].id())
    );
    // Afresh, the same jump, then `v`: that chunk's visual grounding.
    let (mut app, mut rt, _, _) = searched(&kb, dir.path(), query).await;
    jump(&mut rt, &mut app, i);
    press(&mut rt, &mut app, KeyCode::Char('v'));
    assert_eq!(app.notice, None);
    let target = app.grounding.view.as_ref().map(|v| v.target.clone());
    let target = target.expect("the grounding view opened");
    assert_eq!(target.chunk_id, results[i].id());
    assert_eq!(
        Some(target.source),
        results[i]
            .document_title
            .clone()
            .filter(|t| !t.is_empty())
            .or_else(|| results[i].document_uri.clone())
    );
}

#[tokio::test]
async fn search_shows_scores_and_pages_and_enter_goes_to_the_chunk() {
    let kb = demo_kb().await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&kb.store, "http://127.0.0.1:9/v1"));
    open(&mut rt, &mut app).await;
    press(&mut rt, &mut app, KeyCode::Char('/'));
    snapshot_both(&mut app, "explorer_search_empty");
    type_text(&mut rt, &mut app, "monthly solar output July");
    press(&mut rt, &mut app, KeyCode::Enter);
    wait(
        &mut rt,
        &mut app,
        "the search results",
        |a| matches!(&ex(a).view, ExplorerView::Search(s) if !s.running),
    )
    .await;
    let results = search_results(&app);
    let want = kb
        .store
        .search("monthly solar output July", Some(50), None)
        .await
        .unwrap();
    assert_eq!(
        results.iter().map(|r| r.id()).collect::<Vec<_>>(),
        want.iter().map(|r| r.id()).collect::<Vec<_>>(),
        "the store's hybrid search, limit 50"
    );
    let s = screen(&mut app, 160, 48);
    assert!(
        s.contains(&format!("Found {} results", results.len())),
        "{s}"
    );
    assert!(s.contains(&format!("[{:.2}]", results[0].score)), "{s}");
    snapshot_both(&mut app, "explorer_search");
    // The result on a page of the PDF, then Enter: its document and chunk are highlighted.
    let i = results
        .iter()
        .position(|r| !r.page_numbers.is_empty())
        .expect("a hit with pages");
    assert!(
        s.contains(&format!("(p.{})", results[i].page_numbers[0])),
        "{s}"
    );
    for _ in 0..i {
        press(&mut rt, &mut app, KeyCode::Down);
    }
    press(&mut rt, &mut app, KeyCode::Enter);
    wait(&mut rt, &mut app, "the chunk's document", |a| {
        ex(a).pending_chunk.is_none() && matches!(ex(a).detail, Some(Ok(_)))
    })
    .await;
    let e = ex(&app);
    assert!(matches!(e.view, ExplorerView::Main));
    assert_eq!(e.highlighted_chunk().map(|c| c.id()), Some(results[i].id()));
    assert_eq!(
        e.docs[e.doc].id,
        results[i].document_id.clone().unwrap(),
        "the result's document is highlighted"
    );
    snapshot_both(&mut app, "explorer_search_jump");
    // `v` opens visual grounding for exactly that chunk (its pages with boxes, outlined);
    // Esc closes it and the explorer is still there.
    press(&mut rt, &mut app, KeyCode::Char('v'));
    let target = app
        .grounding
        .view
        .as_ref()
        .map(|v| v.target.chunk_id.clone());
    assert_eq!(target.as_deref(), Some(results[i].id()));
    wait(&mut rt, &mut app, "the outlined pages", |a| {
        !matches!(
            a.grounding.view.as_ref().map(|v| &v.state),
            Some(GroundingState::Loading)
        )
    })
    .await;
    match app.grounding.view.as_ref().map(|v| &v.state) {
        Some(GroundingState::Ready(pages)) => assert!(!pages.pages.is_empty()),
        Some(GroundingState::Failed(why)) => panic!("grounding failed: {why}"),
        _ => panic!("the grounding view closed"),
    }
    assert!(screen(&mut app, 80, 24).contains("Visual Grounding"));
    press(&mut rt, &mut app, KeyCode::Esc);
    assert!(app.grounding.view.is_none());
    assert!(app.explorer.is_some());
}

/// With a document filter set in the session, search covers those documents; Ctrl-F
/// switches to the whole base (and runs the query again), and back.
#[tokio::test]
async fn search_follows_the_document_filter_and_ctrl_f_widens_it() {
    let kb = demo_kb().await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(services(&kb.store, "http://127.0.0.1:9/v1"));
    // The filter is the conversation's: asked of its owner, shown in the next snapshot.
    rt.carry_out(
        &mut app,
        vec![groundwork::tui::app::Effect::Filter(vec![
            "Battery Maintenance Guide".to_string(),
        ])],
    );
    assert!(app.document_filter().is_some());
    open(&mut rt, &mut app).await;
    let battery = kb
        .store
        .list_documents(None)
        .await
        .unwrap()
        .into_iter()
        .find(|d| d.title.as_deref() == Some("Battery Maintenance Guide"))
        .unwrap()
        .id;
    search(&mut rt, &mut app, "state of charge").await;
    let results = search_results(&app);
    assert!(!results.is_empty());
    assert!(
        results
            .iter()
            .all(|r| r.document_id.as_deref() == Some(battery.as_str())),
        "only the filtered document"
    );
    assert!(screen(&mut app, 80, 24).contains("Search the document filter"));
    press_mod(&mut rt, &mut app, KeyCode::Char('f'), KeyModifiers::CONTROL);
    wait(
        &mut rt,
        &mut app,
        "the whole-base results",
        |a| matches!(&ex(a).view, ExplorerView::Search(s) if !s.running),
    )
    .await;
    let wide = search_results(&app);
    assert!(
        wide.iter()
            .any(|r| r.document_id.as_deref() != Some(battery.as_str())),
        "other documents too"
    );
    assert!(screen(&mut app, 80, 24).contains("Search the whole base"));
}

/// `c` on a chunk with a figure: the expanded block is what `rag_search` returned to the
/// model (after the rank line), vision off suppresses the picture, vision on attaches it.
#[tokio::test]
async fn agent_context_is_what_the_search_tool_returned_with_the_vision_preface() {
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
    let mut rt = Runtime::new(services(&kb.store, &server.base_url()));
    ask(&mut rt, &mut app, "How much did the array produce in July?").await;
    ask(&mut rt, &mut app, "And the battery state of charge?").await;

    // The block the model received for the figure chunk in question 1.
    let returned = stored_returns(&app.session.messages, "rag_search")
        .into_iter()
        .flat_map(|r| {
            r.split("\n\n---\n\n")
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .find(|b| b.starts_with(&format!("[{figure_chunk}]")))
        .expect("the figure chunk was in a search return");

    // Go to it by search, then `c`.
    open(&mut rt, &mut app).await;
    search(&mut rt, &mut app, "monthly solar output").await;
    let results = search_results(&app);
    let i = results.iter().position(|r| r.id() == figure_chunk).unwrap();
    for _ in 0..i {
        press(&mut rt, &mut app, KeyCode::Down);
    }
    press(&mut rt, &mut app, KeyCode::Enter);
    wait(&mut rt, &mut app, "the chunk", |a| {
        ex(a).highlighted_chunk().map(|c| c.id().to_string()) == Some(figure_chunk.clone())
    })
    .await;
    press(&mut rt, &mut app, KeyCode::Char('c'));
    wait(&mut rt, &mut app, "the agent context", |a| {
        matches!(
            &ex(a).view,
            ExplorerView::Context {
                context: Some(_),
                ..
            }
        )
    })
    .await;
    let context = match &ex(&app).view {
        ExplorerView::Context {
            context: Some(Ok(c)),
            ..
        } => c.clone(),
        _ => panic!("no agent context"),
    };
    let body = |s: &str| s.split_once('\n').map(|(_, b)| b.to_string()).unwrap();
    assert_eq!(
        context.text.lines().next().unwrap(),
        format!("[{figure_chunk}] [rank 1 of 1]")
    );
    // The same expanded content and figure caption. (In a search the chunk came with a
    // neighbour that expansion merged into it, adding that one's heading to the Source
    // line; alone, only its own headings are there.)
    let after = |s: &str, from: &str| s.split_once(from).map(|(_, b)| b.to_string()).unwrap();
    assert_eq!(
        after(&context.text, "Type: "),
        after(&returned, "Type: "),
        "the same expanded block"
    );
    let source = |s: &str| body(s).lines().next().unwrap().to_string();
    assert!(
        source(&returned).starts_with(&source(&context.text)),
        "{} / {}",
        source(&context.text),
        source(&returned)
    );
    assert!(!context.vision);
    assert_eq!(context.pictures.len(), 1, "{context:?}");
    assert!(
        context.preface().contains("1 picture(s) are suppressed"),
        "{}",
        context.preface()
    );
    assert_eq!(context.tokens, context.text.chars().count().div_ceil(4));
    snapshot_both(&mut app, "explorer_context");

    // The chunk's uses in the session: retrieved and cited in question 1.
    press(&mut rt, &mut app, KeyCode::Esc);
    let uses = chunk_uses(&app.transcript, &figure_chunk);
    assert_eq!(
        uses.first(),
        Some(&ChunkUse {
            question: 1,
            prompt: "How much did the array produce in July?".into(),
            cited: true,
        })
    );
    let s = screen(&mut app, 160, 48);
    assert!(s.contains("In this session: cited in Q1"), "{s}");
    snapshot_both(&mut app, "explorer_chunk_uses");

    // Vision on: the picture is attached and counted.
    let mut config = AppConfig::default();
    config.qa.model.vision = true;
    let mut rt = Runtime::new(Services::new(
        Some(kb.store.clone()),
        None,
        config,
        vec![],
        false,
    ));
    press(&mut rt, &mut app, KeyCode::Char('c'));
    wait(&mut rt, &mut app, "the agent context with vision", |a| {
        matches!(
            &ex(a).view,
            ExplorerView::Context {
                context: Some(_),
                ..
            }
        )
    })
    .await;
    let with_vision = match &ex(&app).view {
        ExplorerView::Context {
            context: Some(Ok(c)),
            ..
        } => c.clone(),
        _ => panic!("no agent context"),
    };
    assert!(with_vision.vision);
    assert!(
        with_vision.preface().contains("1 picture(s) are attached"),
        "{}",
        with_vision.preface()
    );
    assert!(
        with_vision.tokens > context.tokens + groundwork::engine::chat::IMAGE_TOKEN_ESTIMATE - 1
    );
}

/// A database written by haiku.rag 0.77 itself: its documents, their details and a
/// chunk's docling fields (labels, DocItem refs, section) read as haiku.rag wrote them.
#[tokio::test]
async fn a_haiku_rag_database_is_browsed_with_its_docling_fields() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.lancedb");
    crate::support::copy_dir(&root.join("tests/fixtures/haiku/db.lancedb"), &db);
    let store = std::sync::Arc::new(
        groundwork::store::Store::open(&db.to_string_lossy())
            .await
            .unwrap(),
    );
    let want = store.list_documents(None).await.unwrap();
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(Services::new(
        Some(store.clone()),
        None,
        AppConfig::default(),
        vec![],
        false,
    ));
    open(&mut rt, &mut app).await;
    let mut got: Vec<String> = ex(&app).docs.iter().map(|d| d.id.clone()).collect();
    let mut ids: Vec<String> = want.iter().map(|d| d.id.clone()).collect();
    got.sort();
    ids.sort();
    assert_eq!(got, ids, "every document haiku.rag wrote");
    // The first document with a chunk that has a section.
    let mut found = false;
    for i in 0..ex(&app).docs.len() {
        wait(
            &mut rt,
            &mut app,
            "the document's details",
            |a| matches!(&ex(a).detail, Some(Ok(d)) if d.meta.id == ex(a).docs[i].id),
        )
        .await;
        if let Some(k) = ex(&app)
            .chunks()
            .iter()
            .position(|c| c.headings.as_ref().is_some_and(|h| !h.is_empty()))
        {
            press(&mut rt, &mut app, KeyCode::Tab);
            for _ in 0..k {
                press(&mut rt, &mut app, KeyCode::Down);
            }
            found = true;
            break;
        }
        press(&mut rt, &mut app, KeyCode::Down);
    }
    assert!(found, "a haiku.rag chunk with headings");
    let c = ex(&app).highlighted_chunk().cloned().unwrap();
    let stored = store.get_chunk(c.id()).await.unwrap().unwrap();
    assert_eq!(
        c.doc_item_refs,
        stored.metadata["doc_item_refs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    );
    press(&mut rt, &mut app, KeyCode::Enter);
    let s = screen(&mut app, 160, 48);
    let section = c.headings.clone().unwrap().join(" > ");
    assert!(s.contains(&format!("Section: {section}")), "{s}");
    assert!(
        s.contains(&format!("Labels: {}", c.labels.join(", "))),
        "{s}"
    );
    snapshot_both(&mut app, "explorer_haiku_chunk");
}

#[tokio::test]
async fn without_a_database_the_explorer_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut rt = Runtime::new(Services::new(
        None,
        None,
        AppConfig::default(),
        vec![],
        false,
    ));
    press(&mut rt, &mut app, KeyCode::F(6));
    wait(&mut rt, &mut app, "the first batch", |a| {
        !ex(a).docs_loading
    })
    .await;
    assert_eq!(ex(&app).docs_error.as_deref(), Some("no database is open"));
    assert!(screen(&mut app, 80, 24).contains("no database is open"));
    // `v` with no chunk highlighted says what to highlight.
    press(&mut rt, &mut app, KeyCode::Char('v'));
    assert!(app.grounding.view.is_none());
    assert!(
        app.notice
            .as_deref()
            .unwrap_or("")
            .contains("highlight a chunk first")
    );
    // F6 again closes it.
    press(&mut rt, &mut app, KeyCode::F(6));
    assert!(app.explorer.is_none());
}

/// The real binary in tmux at 80×24: F6 opens the explorer, `/` searches, Enter goes to
/// the hit's chunk, Enter opens its every field, `c` its agent context; Esc closes it all,
/// and the terminal is restored on quit.
#[tokio::test]
async fn tmux_open_the_explorer_search_and_open_a_chunk() {
    use crate::support::tmux::{EXIT_SUFFIX, Tmux, assert_restored};
    let kb = demo_kb().await;
    let home = tempfile::tempdir().unwrap();
    let tmux = Tmux::new("explorer");
    let script = format!(
        "env -u GROUNDWORK_MODEL_URL -u GROUNDWORK_MODEL HOME={home} XDG_DATA_HOME={home}/data \
         XDG_CONFIG_HOME={home}/config GROUNDWORK_DISCOVER=off \
         {bin} --db {db}; {EXIT_SUFFIX}",
        home = home.path().display(),
        bin = env!("CARGO_BIN_EXE_groundwork"),
        db = kb.db,
    );
    tmux.start(&script, 80, 24);
    tmux.wait_for("the first frame", 60, |s| s.contains("Question"))
        .await;
    tmux.send(&["F6"]);
    tmux.wait_for("the documents", 30, |s| {
        s.contains("Knowledge base") && s.contains("Battery Maintenance Guide")
    })
    .await;
    tmux.send(&["/"]);
    tmux.wait_for("the search screen", 30, |s| {
        s.contains("Type query and press Enter to search")
    })
    .await;
    tmux.send(&["-l", "islanding test"]);
    tmux.send(&["Enter"]);
    let screen = tmux
        .wait_for("the results", 30, |s| {
            s.contains("Found ") && s.contains("results")
        })
        .await;
    assert!(
        screen.contains("▸[0."),
        "the first result is highlighted:\n{screen}"
    );
    tmux.send(&["Enter"]);
    tmux.wait_for("the chunk in its document", 30, |s| {
        s.contains("Chunks ") && s.contains("In this session: never retrieved")
    })
    .await;
    tmux.send(&["Enter"]);
    let screen = tmux
        .wait_for("every field of the chunk", 30, |s| {
            s.contains("DocItem Refs:") && s.contains("Esc back")
        })
        .await;
    assert!(screen.to_lowercase().contains("islanding"), "{screen}");
    tmux.send(&["c"]);
    tmux.wait_for("the agent context", 30, |s| {
        s.contains("Agent context") && s.contains("tokens") && s.contains("[rank 1 of 1]")
    })
    .await;
    // Esc: the chunk, the lists, the documents list, the panes. One at a time: two ESC
    // bytes read together are one Alt-Esc to the terminal reader, and a step is lost.
    for _ in 0..4 {
        tmux.send(&["Escape"]);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tmux.wait_for("the panes again", 30, |s| {
        s.contains("Question") && !s.contains("Knowledge base")
    })
    .await;
    tmux.send(&["C-q"]);
    let screen = tmux.wait_exit().await;
    assert_restored(&screen, "Knowledge base");
}

/// The real binary in tmux at 80×24, on a session whose question cited a PDF chunk (the
/// scripted server): F6 opens the explorer, `/` searches, Enter goes to the cited chunk
/// (the ledger says so), `v` shows its visual grounding — the frame names the chunk's
/// document, its first outlined page and the legend — and Esc goes back to the explorer.
#[tokio::test]
async fn tmux_search_a_cited_chunk_and_open_its_visual_grounding() {
    use crate::support::scripted_server::Reply;
    use crate::support::tmux::{EXIT_SUFFIX, Tmux, assert_restored};
    use groundwork::host::grounding::ground_chunk;
    use serde_json::json;
    let kb = demo_kb().await;
    let query = "rooftop array produced MWh over the year";
    let cited = hit(&kb.store, query, |r| {
        r.document_uri
            .as_deref()
            .is_some_and(|u| u.ends_with(".pdf"))
    })
    .await
    .chunk_id
    .unwrap();
    // Where the explorer's search (the store's hybrid search, limit 50) lists it.
    let rank = kb
        .store
        .search(query, Some(50), None)
        .await
        .unwrap()
        .iter()
        .position(|r| r.id() == cited)
        .expect("the explorer's search finds the cited chunk");
    // What the grounding screen must show: the chunk's pages with boxes.
    let grounded = ground_chunk(&kb.store, &cited, true).await.unwrap();
    let first_page = grounded.pages[0].page_no;
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": query})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [cited]})),
        Reply::text("The array produced 512 MWh over the year."),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let tmux = Tmux::new("explorer-grounding");
    let script = format!(
        "env -u GROUNDWORK_MODEL_URL -u GROUNDWORK_MODEL HOME={home} XDG_DATA_HOME={home}/data \
         XDG_CONFIG_HOME={home}/config GROUNDWORK_DISCOVER=off \
         {bin} --db {db} --session {home}/s.json --model-url {url} --model scripted-model; \
         {EXIT_SUFFIX}",
        home = home.path().display(),
        bin = env!("CARGO_BIN_EXE_groundwork"),
        db = kb.db,
        url = server.base_url(),
    );
    tmux.start(&script, 80, 24);
    tmux.wait_for("the first frame", 60, |s| s.contains("Question"))
        .await;
    tmux.send(&["-l", "How much did the array produce?"]);
    tmux.send(&["Enter"]);
    tmux.wait_for("the answer", 60, |s| s.contains("512 MWh over the year."))
        .await;
    tmux.send(&["F6"]);
    tmux.wait_for("the documents", 30, |s| s.contains("Knowledge base"))
        .await;
    tmux.send(&["/"]);
    tmux.wait_for("the search screen", 30, |s| {
        s.contains("Type query and press Enter to search")
    })
    .await;
    tmux.send(&["-l", query]);
    tmux.send(&["Enter"]);
    tmux.wait_for("the results", 30, |s| s.contains("Found "))
        .await;
    for _ in 0..rank {
        tmux.send(&["Down"]);
    }
    tmux.send(&["Enter"]);
    tmux.wait_for("the cited chunk in its document", 30, |s| {
        s.contains("Chunks ") && s.contains("In this session: cited in Q1")
    })
    .await;
    tmux.send(&["v"]);
    let screen = tmux
        .wait_for("the grounding screen", 60, |s| {
            s.contains("Visual Grounding") && s.contains("matched (orange")
        })
        .await;
    assert!(
        screen.contains("Visual Grounding - groundwork-demo:///harbor-point-field-report-2026.pdf"),
        "the cited chunk's document:\n{screen}"
    );
    assert!(
        screen.contains(&format!(
            "Page 1/{} - Use ←/→ to navigate",
            grounded.pages.len()
        )),
        "{screen}"
    );
    assert!(
        screen.contains(&format!("· page {first_page} ·")),
        "its first outlined page:\n{screen}"
    );
    tmux.send(&["Escape"]);
    tmux.wait_for("the explorer again", 30, |s| {
        s.contains("Knowledge base") && !s.contains("Visual Grounding")
    })
    .await;
    tmux.send(&["F6"]);
    tmux.wait_for("the panes again", 30, |s| {
        s.contains("Question") && !s.contains("Knowledge base")
    })
    .await;
    tmux.send(&["C-q"]);
    let screen = tmux.wait_exit().await;
    assert_restored(&screen, "Knowledge base");
}
