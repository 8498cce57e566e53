//! Visual grounding end to end: the host outlines a chunk's items on the right pages of
//! the demo corpus's PDF and of the haiku.rag fixture database (real LanceDB stores), and
//! the workbench shows them — the page-images pane with the cited items outlined, and the
//! grounding view opened with `V` from the conversation's citation, the ledger chunk and
//! the page-images pane (TestBackend + insta snapshots at 80×24 and 160×48).

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use crate::support::scripted_server::{Reply, ScriptedServer};
use crate::support::workbench::*;
use crossterm::event::{KeyCode, KeyModifiers};
use groundwork::host::grounding::{GroundingError, ground_chunk};
use groundwork::store::grounding::{MATCHED_COLOUR, Origin, item_boxes, pixel_rect, whole_page};
use groundwork::store::{Chunk, Store};
use groundwork::tui::app::{App, GroundingState, ImageState, Pane};
use serde_json::Value;

fn refs(c: &Chunk) -> Vec<String> {
    c.metadata
        .get("doc_item_refs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Grounds every chunk of `document_id` and checks each against the docling document's
/// own boxes: the pages returned are exactly the pages (with rasters) where the chunk's
/// items have a positioned box, and the orange outline lies on the first box's corner.
/// Returns (chunks grounded, chunks answered "no page images", context boxes seen).
async fn check_document(store: &Store, document_id: &str) -> (usize, usize, usize) {
    let docling = store.docling_document(document_id).await.unwrap().unwrap();
    let sizes = store.page_sizes(document_id, Some(&docling)).await.unwrap();
    let rasters = store.page_images(document_id).await.unwrap();
    let (mut grounded, mut no_images, mut context) = (0, 0, 0);
    for chunk in store.chunks_of(document_id).await.unwrap() {
        let boxes: Vec<_> = refs(&chunk)
            .iter()
            .flat_map(|r| item_boxes(&docling, r))
            .filter(|b| !whole_page(b, sizes[&b.page_no]))
            .collect();
        let pages: BTreeSet<i64> = boxes.iter().map(|b| b.page_no).collect();
        let want: BTreeSet<i64> = pages
            .iter()
            .copied()
            .filter(|p| rasters.contains_key(p))
            .collect();
        let plain = ground_chunk(store, &chunk.id, false).await;
        match (&plain, boxes.is_empty(), want.is_empty()) {
            (Err(GroundingError::NoBoxes), true, _) => continue,
            (Err(GroundingError::NoPageImages), false, true) => {
                no_images += 1;
                continue;
            }
            (Ok(_), false, false) => {}
            (other, _, _) => panic!(
                "chunk {} (boxes on {pages:?}, rasters {:?}): {:?}",
                chunk.order,
                rasters.keys().collect::<Vec<_>>(),
                other.as_ref().map(|g| g.pages.len())
            ),
        }
        let g = plain.unwrap();
        let got: BTreeSet<i64> = g.pages.iter().map(|p| p.page_no).collect();
        assert_eq!(got, want, "chunk {} is outlined on its pages", chunk.order);
        let chunk_pages: Vec<i64> = chunk.metadata["page_numbers"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default();
        for page in &g.pages {
            assert!(chunk_pages.contains(&page.page_no), "page {}", page.page_no);
            assert_eq!(page.context, 0, "no context asked");
            let on_page: Vec<_> = boxes.iter().filter(|b| b.page_no == page.page_no).collect();
            assert_eq!(page.matched, on_page.len());
            let (w, h) = page.image.dimensions();
            let drawn = on_page
                .iter()
                .filter_map(|b| pixel_rect(b, sizes[&page.page_no], (w, h)))
                .collect::<Vec<_>>();
            let (x0, _, y0, _) = drawn[0];
            assert_eq!(*page.image.get_pixel(x0, y0), MATCHED_COLOUR);
        }
        grounded += 1;
        let with = ground_chunk(store, &chunk.id, true).await.unwrap();
        assert!(with.pages.len() >= g.pages.len());
        context += with.pages.iter().map(|p| p.context).sum::<usize>();
    }
    (grounded, no_images, context)
}

#[tokio::test]
async fn demo_pdf_chunks_are_outlined_on_their_pages() {
    let kb = demo_kb().await;
    let docs = kb.store.list_documents(None).await.unwrap();
    let pdf = docs
        .iter()
        .find(|d| d.uri.as_deref().is_some_and(|u| u.ends_with(".pdf")))
        .expect("the demo corpus has a PDF");
    let (grounded, _, context) = check_document(&kb.store, &pdf.id).await;
    assert!(grounded >= 2, "several PDF chunks grounded: {grounded}");
    assert!(context > 0, "expansion adds context boxes");
    // A Markdown document keeps no positions: one clear reason, nothing drawn.
    let md = docs
        .iter()
        .find(|d| d.uri.as_deref().is_some_and(|u| u.ends_with(".md")))
        .unwrap();
    let chunk = &kb.store.chunks_of(&md.id).await.unwrap()[0];
    let err = ground_chunk(&kb.store, &chunk.id, true).await.unwrap_err();
    assert_eq!(err, GroundingError::NoBoxes);
    assert!(!err.to_string().contains('\n'));
    let err = ground_chunk(&kb.store, "no-such-chunk", true)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "chunk no-such-chunk is not in the knowledge base"
    );
}

#[tokio::test]
async fn the_haiku_rag_fixture_is_outlined_where_it_has_page_images() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.lancedb");
    crate::support::copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/haiku/db.lancedb"),
        &db,
    );
    let store = Store::open(&db.to_string_lossy()).await.unwrap();
    let docs = store.list_documents(None).await.unwrap();
    let manual = docs
        .iter()
        .find(|d| d.uri.as_deref() == Some("test://solar-manual"))
        .unwrap();
    let (grounded, no_images, _) = check_document(&store, &manual.id).await;
    // Page 1 has a raster, page 2 none (haiku.rag stored `image: null`).
    assert!(grounded >= 1, "page-1 chunks grounded");
    assert!(
        no_images >= 1,
        "page-2-only chunks say there are no page images"
    );
    // The outlines land where the text is: the fixture writes PDF-style boxes
    // (`BOTTOMLEFT`, t > b), its page-1 items one under the other from 82 points below
    // the top edge, in reading order. So the chunks of page 1, in order, are outlined
    // from the top of the raster downwards, the first (the title's) in its top eighth.
    let docling = store.docling_document(&manual.id).await.unwrap().unwrap();
    let sizes = store.page_sizes(&manual.id, Some(&docling)).await.unwrap();
    let raster = &store.page_images(&manual.id).await.unwrap()[&1];
    let (w, h) = image::GenericImageView::dimensions(&image::load_from_memory(raster).unwrap());
    let mut tops = Vec::new();
    for chunk in store.chunks_of(&manual.id).await.unwrap() {
        let first = refs(&chunk)
            .iter()
            .flat_map(|r| item_boxes(&docling, r))
            .find(|b| b.page_no == 1);
        if let Some(b) = first {
            assert_eq!(b.origin, Origin::BottomLeft, "{b:?}");
            assert!(b.t > b.b, "{b:?}");
            let (_, _, y0, _) = pixel_rect(&b, sizes[&1], (w, h)).unwrap();
            tops.push(y0);
        }
    }
    assert!(tops.len() >= 2, "{tops:?}");
    assert!(
        tops[0] * 8 <= h,
        "the title is outlined at the top: {tops:?} of {h}"
    );
    assert!(
        tops.windows(2).all(|p| p[0] <= p[1]),
        "page 1 is outlined top to bottom in reading order: {tops:?}"
    );
}

/// A question citing a PDF chunk, asked through the workbench.
async fn cited_pdf_chunk() -> (
    DemoKb,
    ScriptedServer,
    groundwork::tui::Runtime,
    groundwork::tui::app::App,
    tempfile::TempDir,
) {
    let kb = demo_kb().await;
    let cited = hit(&kb.store, "rooftop array produced MWh over the year", |r| {
        r.document_uri
            .as_deref()
            .is_some_and(|u| u.ends_with(".pdf"))
    })
    .await;
    let server = ScriptedServer::start(vec![
        Reply::tool_call(
            "rag_search",
            serde_json::json!({"query": "rooftop array produced MWh over the year"}),
        ),
        Reply::tool_call(
            "rag_cite",
            serde_json::json!({"chunk_ids": [cited.chunk_id.clone().unwrap()]}),
        ),
        Reply::text("The array produced 512 MWh over the year."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut rt = groundwork::tui::Runtime::new(services(&kb.store, &server.base_url()));
    ask(&mut rt, &mut app, "How much did the array produce?").await;
    (kb, server, rt, app, dir)
}

#[tokio::test]
async fn the_page_images_pane_and_the_grounding_view_outline_the_cited_items() {
    let (_kb, _server, mut rt, mut app, _dir) = cited_pdf_chunk().await;
    let settings = redactions();
    let _guard = settings.bind_to_scope();
    assert!(
        app.images.target.is_some(),
        "the citation is the pane's evidence"
    );
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        let size = format!("{w}x{h}");
        // The page-images pane: the page comes outlined, and says how many items.
        app.areas.images = ratatui::layout::Rect::new(0, 0, w, h);
        rt.handle(&mut app, groundwork::tui::app::Msg::Resize);
        assert!(
            rt.until(&mut app, Duration::from_secs(60), |a| {
                a.images.listed
                    && a.images
                        .items
                        .iter()
                        .all(|i| !matches!(i.state, ImageState::Loading))
            })
            .await
        );
        let page = app
            .images
            .items
            .iter()
            .find(|i| i.meta.page.is_some())
            .expect("the cited chunk has a page");
        assert!(
            page.meta.caption.contains("outlined"),
            "{}",
            page.meta.caption
        );
        assert!(matches!(page.state, ImageState::Ready(_)));
        app.images.selected = app
            .images
            .items
            .iter()
            .position(|i| i.meta.page.is_some())
            .unwrap();
        insta::assert_snapshot!(
            format!("images_outlined_{size}"),
            pane(&mut app, Pane::Images, w, h)
        );

        // `V` from each place the evidence appears opens the view on the same chunk.
        let chunk = app.images.target.as_ref().unwrap().chunk_id.clone();
        for from in [Pane::Images, Pane::Conversation, Pane::Ledger] {
            app.focus = from;
            if from == Pane::Ledger {
                app.ledger.selected = 0;
                app.ledger.in_chunks = true;
                app.ledger.chunk = 0;
            }
            screen(&mut app, w, h);
            press_mod(&mut rt, &mut app, KeyCode::Char('V'), KeyModifiers::SHIFT);
            let view = app
                .grounding
                .view
                .as_ref()
                .expect("V opens visual grounding");
            assert_eq!(view.target.chunk_id, chunk, "from {from:?}");
            assert!(
                rt.until(&mut app, Duration::from_secs(60), |a| {
                    !matches!(
                        a.grounding.view.as_ref().unwrap().state,
                        GroundingState::Loading
                    )
                })
                .await
            );
            let GroundingState::Ready(p) = &app.grounding.view.as_ref().unwrap().state else {
                panic!("the cited PDF chunk is grounded");
            };
            let n = p.pages.len();
            assert!(n > 0);
            if from == Pane::Images {
                insta::assert_snapshot!(format!("grounding_{size}"), screen(&mut app, w, h));
                press(&mut rt, &mut app, KeyCode::Right);
                let at = app.grounding.view.as_ref().unwrap().page;
                assert_eq!(at, 1.min(n - 1), "→ pages on, never past the last page");
                press(&mut rt, &mut app, KeyCode::Left);
                assert_eq!(app.grounding.view.as_ref().unwrap().page, 0);
            }
            press(&mut rt, &mut app, KeyCode::Esc);
            assert!(app.grounding.view.is_none(), "Esc closes");
        }
        app.ledger.in_chunks = false;
    }
}

#[tokio::test]
async fn without_selected_evidence_v_says_what_to_select_and_boxless_evidence_says_why() {
    let (_kb, _server, mut rt, mut app, _dir) = cited_pdf_chunk().await;
    app.focus = Pane::Ledger;
    press_mod(&mut rt, &mut app, KeyCode::Char('V'), KeyModifiers::SHIFT);
    assert!(app.grounding.view.is_none());
    assert!(app.notice.as_deref().unwrap().contains("select a citation"));
    // In the inspector, the evidence is a capsule entry, and none is selected yet.
    app.focus = Pane::Inspector;
    press_mod(&mut rt, &mut app, KeyCode::Char('V'), KeyModifiers::SHIFT);
    assert!(app.grounding.view.is_none());
    assert_eq!(
        app.notice.as_deref(),
        Some("visual grounding: select a capsule entry first (c / C in the inspector)")
    );
    // A chunk of a Markdown document: the view opens and says there are no boxes.
    let md = _kb
        .store
        .list_documents(None)
        .await
        .unwrap()
        .into_iter()
        .find(|d| d.uri.as_deref().is_some_and(|u| u.ends_with(".md")))
        .unwrap();
    let chunk = _kb.store.chunks_of(&md.id).await.unwrap()[0].id.clone();
    screen(&mut app, 80, 24);
    let effects = app.open_grounding(groundwork::host::transcript::Evidence {
        chunk_id: chunk,
        source: md.title.clone().unwrap_or_default(),
        ..Default::default()
    });
    assert_eq!(effects.len(), 1);
    rt.carry_out(&mut app, effects);
    assert!(
        rt.until(&mut app, Duration::from_secs(60), |a| {
            !matches!(
                a.grounding.view.as_ref().unwrap().state,
                GroundingState::Loading
            )
        })
        .await
    );
    let text = screen(&mut app, 80, 24);
    assert!(text.contains("no positions"), "{text}");
    let settings = redactions();
    let _guard = settings.bind_to_scope();
    insta::assert_snapshot!("grounding_no_boxes_80x24", text);
    // A document converted without page images says so in haiku.rag's words.
    app.grounding.view.as_mut().unwrap().state =
        GroundingState::Failed(GroundingError::NoPageImages.to_string());
    let text = screen(&mut app, 80, 24);
    assert!(text.contains("No page images available"), "{text}");
    assert!(text.contains("This document was converted without page images."));
    insta::assert_snapshot!("grounding_no_page_images_80x24", text);
}

/// Waits until the grounding view has loaded and returns the pages where it outlines
/// matched items (expansion context may outline others).
async fn grounded_pages(rt: &mut groundwork::tui::Runtime, app: &mut App) -> Vec<i64> {
    assert!(
        rt.until(app, Duration::from_secs(60), |a| {
            !matches!(
                a.grounding.view.as_ref().unwrap().state,
                GroundingState::Loading
            )
        })
        .await
    );
    match &app.grounding.view.as_ref().unwrap().state {
        GroundingState::Ready(p) => p
            .pages
            .iter()
            .filter(|p| p.matched > 0)
            .map(|p| p.page_no)
            .collect(),
        GroundingState::Failed(e) => panic!("grounding failed: {e}"),
        GroundingState::Loading => unreachable!(),
    }
}

/// A follow-up whose requests carry the capsule of question 1's cited PDF chunk. In the
/// inspector `c` selects the capsule's entry (marked, scrolled to, the footer says which
/// and what the keys do), `V` opens visual grounding for exactly that chunk and Enter its
/// chunk detail; `C` steps back, Backspace unselects, a new request clears the choice, a
/// request without a capsule says so, and the keys come from `[tui.keys]`.
#[tokio::test]
async fn a_capsule_entry_in_the_inspector_opens_its_visual_grounding_and_chunk() {
    let kb = demo_kb().await;
    let pdf = |r: &groundwork::store::SearchResult| {
        r.document_uri
            .as_deref()
            .is_some_and(|u| u.ends_with(".pdf"))
    };
    let cited = hit(&kb.store, "rooftop array produced MWh over the year", pdf)
        .await
        .chunk_id
        .unwrap();
    let second = hit(&kb.store, "battery banks state of charge", |r| {
        r.chunk_id.as_deref() != Some(cited.as_str())
    })
    .await
    .chunk_id
    .unwrap();
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", serde_json::json!({"query": "rooftop array"})),
        Reply::tool_call("rag_cite", serde_json::json!({"chunk_ids": [cited]})),
        Reply::text("The array produced 512 MWh over the year."),
        Reply::tool_call("rag_search", serde_json::json!({"query": "battery banks"})),
        Reply::tool_call("rag_cite", serde_json::json!({"chunk_ids": [second]})),
        Reply::text("The banks held up."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut rt = groundwork::tui::Runtime::new(services(&kb.store, &server.base_url()));
    ask(&mut rt, &mut app, "How much did the array produce?").await;
    ask(&mut rt, &mut app, "How did the batteries hold up?").await;
    app.focus = Pane::Inspector;

    // Question 1's requests carry no capsule: `c` says so and selects nothing.
    app.inspector.selected = Some(0);
    screen(&mut app, 80, 24);
    press(&mut rt, &mut app, KeyCode::Char('c'));
    assert_eq!(app.inspector.entry, None);
    assert_eq!(
        app.notice.as_deref(),
        Some("this request sent no capsule of cited evidence")
    );
    // The follow-up's first request: its capsule holds question 1's citation alone.
    let with_capsule = (0..app.request_count())
        .find(|&i| {
            app.inspector.selected = Some(i);
            !app.capsule_entries().is_empty()
        })
        .expect("the follow-up sends a capsule");
    let ids: Vec<String> = app
        .capsule_entries()
        .iter()
        .map(|e| e.chunk_id.clone())
        .collect();
    assert_eq!(ids, std::slice::from_ref(&cited));

    let settings = redactions();
    let _guard = settings.bind_to_scope();
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        let size = format!("{w}x{h}");
        app.inspector.selected = Some(with_capsule);
        app.inspector.entry = None;
        app.inspector.scroll = 0;
        let before = screen(&mut app, w, h);
        assert!(
            before.contains("capsule: 1 entry · c/C select one"),
            "{before}"
        );
        press(&mut rt, &mut app, KeyCode::Char('c'));
        assert_eq!(app.inspector.entry, Some(0));
        let text = screen(&mut app, w, h);
        assert!(text.contains("capsule entry 1/1 · V grounding"), "{text}");
        assert!(
            text.contains("▶["),
            "the entry is marked and scrolled to:\n{text}"
        );
        insta::assert_snapshot!(format!("inspector_capsule_entry_{size}"), text);
        // The images pane follows the selected entry.
        assert_eq!(app.images.target.as_ref().unwrap().chunk_id, cited);

        // `V`: visual grounding of exactly that chunk, on its PDF's pages.
        press_mod(&mut rt, &mut app, KeyCode::Char('V'), KeyModifiers::SHIFT);
        let view = app
            .grounding
            .view
            .as_ref()
            .expect("V opens visual grounding");
        assert_eq!(view.target.chunk_id, cited);
        assert_eq!(
            view.target.source,
            "Harbor Point Microgrid: Field Report 2026"
        );
        let pages = grounded_pages(&mut rt, &mut app).await;
        let chunk = kb.store.get_chunk(&cited).await.unwrap().unwrap();
        let chunk_pages: Vec<i64> = chunk.metadata["page_numbers"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_i64)
            .collect();
        assert!(!pages.is_empty());
        assert!(pages.iter().all(|p| chunk_pages.contains(p)), "{pages:?}");
        let text = screen(&mut app, w, h);
        assert!(
            text.contains("harbor-point-field-report-2026.pdf"),
            "{text}"
        );
        press(&mut rt, &mut app, KeyCode::Esc);
        assert!(app.grounding.view.is_none());
        assert_eq!(app.inspector.entry, Some(0), "closing keeps the entry");

        // Enter: the entry's chunk, every field, as the ledger's chunk viewer shows it.
        press(&mut rt, &mut app, KeyCode::Enter);
        match &app.popup {
            Some(groundwork::tui::app::Popup::ChunkDetail { chunk_id, .. }) => {
                assert_eq!(chunk_id, &cited)
            }
            _ => panic!("Enter opens the entry's chunk"),
        }
        assert!(
            !app.inspector.diff,
            "Enter on an entry does not toggle the diff"
        );
        press(&mut rt, &mut app, KeyCode::Esc);
        assert!(app.popup.is_none());

        // `C` stays on the only entry; Backspace unselects; Enter toggles the diff again.
        press_mod(&mut rt, &mut app, KeyCode::Char('C'), KeyModifiers::SHIFT);
        assert_eq!(app.inspector.entry, Some(0));
        press(&mut rt, &mut app, KeyCode::Backspace);
        assert_eq!(app.inspector.entry, None);
        press(&mut rt, &mut app, KeyCode::Enter);
        assert!(app.inspector.diff);
        // In the diff, the selected entry is marked too.
        press(&mut rt, &mut app, KeyCode::Char('c'));
        let text = screen(&mut app, w, h);
        assert!(text.contains("▶+"), "{text}");
        press(&mut rt, &mut app, KeyCode::Enter);
        press(&mut rt, &mut app, KeyCode::Esc);
        press(&mut rt, &mut app, KeyCode::Backspace);
        press(&mut rt, &mut app, KeyCode::Char('d'));
        assert!(!app.inspector.diff);
        // Another request forgets the entry.
        press(&mut rt, &mut app, KeyCode::Char('c'));
        press(&mut rt, &mut app, KeyCode::Char('['));
        assert_eq!(app.inspector.entry, None);
    }

    // The keys are `[tui.keys]` actions like any other.
    let mut keys = std::collections::BTreeMap::new();
    keys.insert("next_capsule_entry".to_string(), vec!["X".to_string()]);
    app.keymap =
        groundwork::tui::keymap::Keymap::with_overrides(&keys, Path::new("config.toml")).unwrap();
    app.inspector.selected = Some(with_capsule);
    press(&mut rt, &mut app, KeyCode::Char('c'));
    assert_eq!(app.inspector.entry, None, "c is no longer bound");
    press(&mut rt, &mut app, KeyCode::Char('X'));
    assert_eq!(app.inspector.entry, Some(0));
    let text = screen(&mut app, 160, 48);
    assert!(text.contains("X/C entries"), "{text}");
}

/// Issue 41: visual grounding opens on the page of the matched item, not on the first
/// page of the expanded context; `n` / `N` go to the next / previous page with a match.
#[tokio::test]
async fn grounding_opens_on_the_page_of_the_matched_item() {
    let kb = demo_kb().await;
    let found = hit(
        &kb.store,
        "Outage one storm tripped the feeder breaker",
        |r| r.content.contains("a storm tripped the feeder breaker"),
    )
    .await;
    let id = found.chunk_id.clone().unwrap();
    // The chunk as stored: its own pages (the hit's span its expanded context).
    let cited = kb.store.result_for_chunk(&id).await.unwrap().unwrap();
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", serde_json::json!({"query": "storm outage"})),
        Reply::tool_call("rag_cite", serde_json::json!({"chunk_ids": [id.clone()]})),
        Reply::text("A storm tripped the feeder breaker."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut rt = groundwork::tui::Runtime::new(services(&kb.store, &server.base_url()));
    ask(&mut rt, &mut app, "What happened in March?").await;
    let citation = &app.transcript.turns[0].citations[0];
    assert_eq!(citation.evidence.chunk_id, id);
    assert!(
        citation.evidence.pages.first() < cited.page_numbers.first(),
        "the expanded context starts on an earlier page: {:?} vs {:?}",
        citation.evidence.pages,
        cited.page_numbers
    );
    // The page-images pane opens on the matched page too, not the context's first.
    screen(&mut app, 160, 48);
    settle(&mut rt, &mut app).await;
    assert!(app.images.listed, "the pane's images were listed");
    let item = &app.images.items[app.images.selected];
    assert!(item.meta.matched > 0, "{}", item.meta.caption);
    assert!(cited.page_numbers.contains(&item.meta.page.unwrap()));
    let first_page = app.images.items.iter().position(|i| i.meta.page.is_some());
    assert!(
        Some(app.images.selected) > first_page,
        "not the context's first page"
    );
    app.focus = Pane::Conversation;
    app.conversation.selected_citation = Some((0, 0));
    screen(&mut app, 160, 48);
    press_mod(&mut rt, &mut app, KeyCode::Char('V'), KeyModifiers::SHIFT);
    // While the pages are drawn: a spinner and the seconds waited.
    let loading = screen(&mut app, 160, 48);
    assert!(
        loading.contains("outlining the items of chunk") && loading.contains(" s"),
        "{loading}"
    );
    assert!(app.animating(), "the loading line ticks");
    assert!(
        rt.until(&mut app, Duration::from_secs(60), |a| {
            !matches!(
                a.grounding.view.as_ref().unwrap().state,
                GroundingState::Loading
            )
        })
        .await
    );
    let view = app.grounding.view.as_ref().unwrap();
    let GroundingState::Ready(p) = &view.state else {
        panic!("grounded");
    };
    let at = &p.pages[view.page];
    assert!(view.page > 0, "not the first page of the context");
    assert!(at.matched > 0, "the page shown has the matched item");
    assert!(cited.page_numbers.contains(&at.page_no), "{}", at.page_no);
    assert!(p.pages[..view.page].iter().all(|pg| pg.matched == 0));
    let (first, page_no) = (view.page, at.page_no);
    let shown = screen(&mut app, 160, 48);
    assert!(shown.contains(&format!("page {page_no} · ")), "{shown}");
    assert!(shown.contains("n next match"), "{shown}");
    // `N` from here: no earlier match, said so; Home then `n` comes back.
    press_mod(&mut rt, &mut app, KeyCode::Char('N'), KeyModifiers::SHIFT);
    assert_eq!(app.grounding.view.as_ref().unwrap().page, first);
    assert_eq!(
        app.notice.as_deref(),
        Some("no matched item on an earlier page")
    );
    press(&mut rt, &mut app, KeyCode::Home);
    assert_eq!(app.grounding.view.as_ref().unwrap().page, 0);
    press(&mut rt, &mut app, KeyCode::Char('n'));
    assert_eq!(app.grounding.view.as_ref().unwrap().page, first);
    // `x` hides the context's outlines (drawn again, on the same page), and shows them.
    let ready = |a: &App| {
        !matches!(
            a.grounding.view.as_ref().unwrap().state,
            GroundingState::Loading
        )
    };
    press(&mut rt, &mut app, KeyCode::Char('x'));
    assert!(rt.until(&mut app, Duration::from_secs(60), ready).await);
    let view = app.grounding.view.as_ref().unwrap();
    let GroundingState::Ready(p) = &view.state else {
        panic!("grounded");
    };
    assert!(p.pages.iter().all(|pg| pg.context == 0));
    assert_eq!(p.pages[view.page].page_no, page_no, "the same page");
    let shown = screen(&mut app, 160, 48);
    assert!(shown.contains("context hidden (x shows)"), "{shown}");
    press(&mut rt, &mut app, KeyCode::Char('x'));
    assert!(rt.until(&mut app, Duration::from_secs(60), ready).await);
    let shown = screen(&mut app, 160, 48);
    assert!(shown.contains("context (yellow, x hides)"), "{shown}");
    assert!(shown.contains("z fit page"), "{shown}");
    // `z`: the page's width across the view, drawn off the UI task; ↓ scrolls a quarter
    // view; `z` twice more is the whole page again.
    use groundwork::tui::app::Zoom;
    let drawn = |a: &App, step: u32| {
        let v = a.grounding.view.as_ref().unwrap();
        v.zoomed
            .as_ref()
            .is_some_and(|z| z.at == (v.page, Zoom::Width, step))
    };
    press(&mut rt, &mut app, KeyCode::Char('z'));
    assert_eq!(app.notice.as_deref(), Some("zoom: fit width"));
    assert!(
        rt.until(&mut app, Duration::from_secs(30), |a| drawn(a, 0))
            .await
    );
    let shown = screen(&mut app, 160, 48);
    assert!(shown.contains("z fit width, ↑/↓ scroll"), "{shown}");
    press(&mut rt, &mut app, KeyCode::Down);
    assert_eq!(app.grounding.view.as_ref().unwrap().step, 1);
    assert!(
        rt.until(&mut app, Duration::from_secs(30), |a| drawn(a, 1))
            .await
    );
    assert_eq!(
        app.grounding.view.as_ref().unwrap().page,
        first,
        "↓ scrolls, not pages"
    );
    press(&mut rt, &mut app, KeyCode::Char('z'));
    press(&mut rt, &mut app, KeyCode::Char('z'));
    let v = app.grounding.view.as_ref().unwrap();
    assert_eq!((v.zoom, v.step), (Zoom::Page, 0));
}

/// Issue 44 §1: a cited chunk whose document was deleted since is still grounded on its
/// pages, read from the knowledge base as the question read it (the table versions the
/// session recorded).
#[tokio::test]
async fn a_chunk_deleted_since_it_was_cited_is_still_grounded_as_it_was() {
    let kb = demo_kb().await;
    let found = hit(
        &kb.store,
        "Outage one storm tripped the feeder breaker",
        |r| r.content.contains("a storm tripped the feeder breaker"),
    )
    .await;
    let id = found.chunk_id.clone().unwrap();
    let cited = kb.store.result_for_chunk(&id).await.unwrap().unwrap();
    let server = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", serde_json::json!({"query": "storm outage"})),
        Reply::tool_call("rag_cite", serde_json::json!({"chunk_ids": [id.clone()]})),
        Reply::text("A storm tripped the feeder breaker [1]."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    app.host.knowledge_bases = vec![kb.recording().await];
    let mut rt = groundwork::tui::Runtime::new(services(&kb.store, &server.base_url()));
    ask(&mut rt, &mut app, "What happened in March?").await;

    // The document is deleted; the session is opened again over the database as it is.
    kb.store
        .delete_document(found.document_id.as_deref().unwrap())
        .await
        .unwrap();
    let fresh = kb.reopened().await;
    assert!(fresh.get_chunk(&id).await.unwrap().is_none(), "gone now");
    let saved = groundwork::session::Session::load(&dir.path().join("session.json")).unwrap();
    let mut app = App::new(saved, None, host());
    let mut rt = groundwork::tui::Runtime::new(services(&fresh, &server.base_url()));
    screen(&mut app, 160, 48);
    settle(&mut rt, &mut app).await;
    app.focus = Pane::Conversation;
    app.conversation.selected_citation = Some((0, 0));
    screen(&mut app, 160, 48);
    press_mod(&mut rt, &mut app, KeyCode::Char('V'), KeyModifiers::SHIFT);
    assert!(
        rt.until(&mut app, Duration::from_secs(60), |a| {
            !matches!(
                a.grounding.view.as_ref().unwrap().state,
                GroundingState::Loading
            )
        })
        .await
    );
    let view = app.grounding.view.as_ref().unwrap();
    let p = match &view.state {
        GroundingState::Ready(p) => p,
        GroundingState::Failed(why) => panic!("not grounded: {why}"),
        _ => unreachable!(),
    };
    let at = &p.pages[view.page];
    assert!(at.matched > 0, "the page shown has the matched item");
    assert!(cited.page_numbers.contains(&at.page_no), "{}", at.page_no);
}
