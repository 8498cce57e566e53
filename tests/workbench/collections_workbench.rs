//! The workbench over two collections (`tests/support/collections.rs`): the status bar
//! names the open collections, each source and ledger chunk its collection (TestBackend
//! snapshots at 80x24 and 160x48), and the inspector each capsule entry's `Collection:`.

use crate::support::collections::{search_properties, two_collections};
use crate::support::scripted_server::{Reply, ScriptedServer};
use crate::support::workbench::{ask, new_app, redactions, screen, services, settle};
use groundwork::host::transcript::Evidence;
use groundwork::tui::Runtime;
use groundwork::tui::app::GroundingState;
use serde_json::json;

#[tokio::test]
async fn the_workbench_shows_the_open_collections_and_each_citations_collection() {
    let two = two_collections().await;
    let papers_handbook = two.chunk("papers", "handbook");
    let model = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "inverter bolt torque"})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [papers_handbook]})),
        Reply::text("Twelve newton metres."),
    ])
    .await;
    let services = services(&two.manuals_store, &model.base_url()).with_collections(vec![
        ("manuals".into(), two.manuals_store.clone()),
        ("papers".into(), two.papers_store.clone()),
    ]);
    let mut rt = Runtime::new(services);
    let work = tempfile::tempdir().unwrap();
    let mut app = new_app(work.path());
    app.host.collections = vec!["manuals".into(), "papers".into()];
    app.host.db = format!("manuals={}, papers={}", two.manuals, two.papers);
    ask(&mut rt, &mut app, "How tight are the bolts?").await;
    assert_eq!(app.error, None);
    // The model was offered both collections.
    let sources = &search_properties(&model.requests()[0])["sources"];
    assert_eq!(
        sources["anyOf"][0]["items"]["enum"],
        json!(["manuals", "papers"])
    );
    let small = screen(&mut app, 80, 24);
    assert!(small.contains("collections manuals+papers"), "{small}");
    assert!(small.contains("[1] Handbook (p.1) · papers"), "{small}");
    let wide = screen(&mut app, 160, 48);
    assert!(
        wide.contains("papers: Handbook"),
        "the ledger chunk's collection: {wide}"
    );
    // Visual grounding reads the cited chunk from the collection its citation recorded
    // (papers, not the first one), and when the evidence does not say (a haiku.rag
    // host's session) from the collection that holds it: found either way, and being
    // Markdown it has no boxes.
    assert_eq!(
        app.collection_of(&papers_handbook).as_deref(),
        Some("papers")
    );
    for collection in [app.collection_of(&papers_handbook), None] {
        let effects = app.open_grounding(Evidence {
            chunk_id: papers_handbook.clone(),
            source: "Handbook".into(),
            collection,
            ..Evidence::default()
        });
        rt.carry_out(&mut app, effects);
        settle(&mut rt, &mut app).await;
        match app.grounding.view.as_ref().map(|v| &v.state) {
            Some(GroundingState::Failed(why)) => assert!(why.starts_with("no boxes"), "{why}"),
            _ => panic!("grounding should have answered with its one line"),
        }
        app.grounding.view = None;
    }
    let mut settings = redactions();
    // The page images pane titles its document by a short id.
    settings.add_filter(r"Handbook · [0-9a-f]{6}", "Handbook · <id>");
    settings.bind(|| {
        insta::assert_snapshot!("collections_80x24", small);
        insta::assert_snapshot!("collections_160x48", wide);
    });
}

/// The inspector shows the capsule of a question over two cited collections, each
/// entry with its `Collection:` line.
#[tokio::test]
async fn the_inspector_shows_each_capsule_entrys_collection() {
    let two = two_collections().await;
    let (m, p) = (
        two.chunk("manuals", "handbook"),
        two.chunk("papers", "handbook"),
    );
    let model = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "inverter bolt torque"})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [m, p]})),
        Reply::text("Twelve newton metres."),
        Reply::tool_call("rag_search", json!({"query": "reset button"})),
        Reply::tool_call(
            "rag_cite",
            json!({"chunk_ids": [two.chunk("manuals", "reset")]}),
        ),
        Reply::text("Hold it for ten seconds."),
    ])
    .await;
    let services = services(&two.manuals_store, &model.base_url()).with_collections(vec![
        ("manuals".into(), two.manuals_store.clone()),
        ("papers".into(), two.papers_store.clone()),
    ]);
    let mut rt = Runtime::new(services);
    let work = tempfile::tempdir().unwrap();
    let mut app = new_app(work.path());
    app.host.collections = vec!["manuals".into(), "papers".into()];
    ask(&mut rt, &mut app, "How tight are the bolts?").await;
    ask(&mut rt, &mut app, "How do I reset it?").await;
    assert_eq!(app.error, None);
    // Question 2's first request (the 4th) is the compacted one.
    app.inspector.selected = Some(3);
    app.inspector.diff = false;
    let shown =
        crate::support::workbench::pane(&mut app, groundwork::tui::app::Pane::Inspector, 100, 60);
    for coll in ["manuals", "papers"] {
        assert!(shown.contains(&format!("Collection: {coll}")), "{shown}");
    }
}

/// The document filter lists each collection's documents as `NAME: title`; choosing the
/// papers' Handbook searches the papers alone, and only that document in it.
#[tokio::test]
async fn the_document_filter_is_per_collection() {
    use crate::support::workbench::{press, press_mod, settle, type_text};
    use crossterm::event::{KeyCode, KeyModifiers};
    use groundwork::tui::app::Popup;
    let two = two_collections().await;
    let model = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "inverter bolt torque"})),
        Reply::tool_call(
            "rag_cite",
            json!({"chunk_ids": [two.chunk("papers", "handbook")]}),
        ),
        Reply::text("Twelve newton metres."),
    ])
    .await;
    let services = services(&two.manuals_store, &model.base_url()).with_collections(vec![
        ("manuals".into(), two.manuals_store.clone()),
        ("papers".into(), two.papers_store.clone()),
    ]);
    let mut rt = Runtime::new(services);
    let work = tempfile::tempdir().unwrap();
    let mut app = new_app(work.path());
    app.host.collections = vec!["manuals".into(), "papers".into()];
    press_mod(&mut rt, &mut app, KeyCode::Char('p'), KeyModifiers::CONTROL);
    type_text(&mut rt, &mut app, "filter");
    press(&mut rt, &mut app, KeyCode::Enter);
    settle(&mut rt, &mut app).await;
    let Some(Popup::Filter { all: Some(all), .. }) = &app.popup else {
        panic!("the filter modal lists the documents: {:?}", app.error)
    };
    let mut listed = all.clone();
    listed.sort();
    assert_eq!(
        listed,
        [
            "manuals: Handbook",
            "manuals: Reset Guide",
            "papers: Bolt Study",
            "papers: Handbook"
        ]
    );
    type_text(&mut rt, &mut app, "papers: handbook");
    press(&mut rt, &mut app, KeyCode::Char(' '));
    press(&mut rt, &mut app, KeyCode::Enter);
    assert_eq!(app.error, None);
    let rag = &app.session.state["rag"];
    assert_eq!(
        rag["collection_filters"].as_object().unwrap().len(),
        1,
        "{rag:#}"
    );
    assert!(
        rag["collection_filters"]["papers"]
            .as_str()
            .unwrap()
            .contains("Handbook")
    );

    ask(&mut rt, &mut app, "How tight are the bolts?").await;
    assert_eq!(app.error, None);
    let returned = serde_json::to_string(&model.requests()[1]).unwrap();
    assert!(
        returned.contains(&two.chunk("papers", "handbook")),
        "{returned}"
    );
    for (coll, doc) in [
        ("manuals", "handbook"),
        ("manuals", "reset"),
        ("papers", "study"),
    ] {
        assert!(
            !returned.contains(&two.chunk(coll, doc)),
            "{coll} {doc}: {returned}"
        );
    }
}

/// The explorer browses one collection at a time: the first one open, then `C` moves to
/// the next; its documents, and its search, come from that collection's store alone.
#[tokio::test]
async fn the_explorer_browses_each_collection_in_turn() {
    use crate::support::workbench::{press, type_text};
    use crossterm::event::KeyCode;
    use groundwork::tui::app::ExplorerView;
    use std::time::Duration;

    let two = two_collections().await;
    let services = services(&two.manuals_store, "http://127.0.0.1:9/v1").with_collections(vec![
        ("manuals".into(), two.manuals_store.clone()),
        ("papers".into(), two.papers_store.clone()),
    ]);
    let mut rt = Runtime::new(services);
    let work = tempfile::tempdir().unwrap();
    let mut app = new_app(work.path());
    app.host.collections = vec!["manuals".into(), "papers".into()];
    let loaded = |a: &groundwork::tui::app::App| {
        a.explorer
            .as_ref()
            .is_some_and(|e| e.docs_done && !e.docs_loading && !e.docs_in_flight)
    };
    let titles = |a: &groundwork::tui::app::App| {
        let mut t: Vec<String> = a
            .explorer
            .as_ref()
            .unwrap()
            .docs
            .iter()
            .map(|d| d.title.clone().unwrap_or_default())
            .collect();
        t.sort();
        t
    };
    let ids_of = |docs: Vec<groundwork::store::DocumentMeta>| {
        let mut ids: Vec<String> = docs.into_iter().map(|d| d.id).collect();
        ids.sort();
        ids
    };
    let papers_ids = ids_of(two.papers_store.list_documents(None).await.unwrap());

    press(&mut rt, &mut app, KeyCode::F(6));
    assert_eq!(
        app.explorer.as_ref().unwrap().collection.as_deref(),
        Some("manuals")
    );
    assert!(rt.until(&mut app, Duration::from_secs(10), loaded).await);
    assert_eq!(titles(&app), ["Handbook", "Reset Guide"]);
    let top = screen(&mut app, 80, 24);
    assert!(top.contains("collection manuals (2 open, C next)"), "{top}");

    press(&mut rt, &mut app, KeyCode::Char('C'));
    assert_eq!(
        app.explorer.as_ref().unwrap().collection.as_deref(),
        Some("papers")
    );
    assert!(rt.until(&mut app, Duration::from_secs(10), loaded).await);
    assert_eq!(titles(&app), ["Bolt Study", "Handbook"]);
    let mut shown: Vec<String> = app
        .explorer
        .as_ref()
        .unwrap()
        .docs
        .iter()
        .map(|d| d.id.clone())
        .collect();
    shown.sort();
    assert_eq!(shown, papers_ids, "the papers store's own documents");

    // Search covers the browsed collection only.
    press(&mut rt, &mut app, KeyCode::Char('/'));
    type_text(&mut rt, &mut app, "inverter bolt torque");
    press(&mut rt, &mut app, KeyCode::Enter);
    let searched = |a: &groundwork::tui::app::App| {
        matches!(&a.explorer.as_ref().unwrap().view,
            ExplorerView::Search(s) if s.searched.is_some() && !s.running)
    };
    assert!(rt.until(&mut app, Duration::from_secs(10), searched).await);
    let ExplorerView::Search(s) = &app.explorer.as_ref().unwrap().view else {
        unreachable!()
    };
    let hits = s.results.as_ref().expect("the search ran");
    assert!(!hits.is_empty());
    for h in hits {
        let doc = h.document_id.clone().unwrap_or_default();
        assert!(papers_ids.contains(&doc), "{doc} is not a papers document");
    }

    // And back round to the first.
    press(&mut rt, &mut app, KeyCode::Esc);
    press(&mut rt, &mut app, KeyCode::Char('C'));
    assert_eq!(
        app.explorer.as_ref().unwrap().collection.as_deref(),
        Some("manuals")
    );
    assert!(rt.until(&mut app, Duration::from_secs(10), loaded).await);
    assert_eq!(titles(&app), ["Handbook", "Reset Guide"]);
}
