//! Ingestion end to end: real files (Markdown, HTML, text, PDF) parsed, chunked, embedded
//! over HTTP and written to LanceDB; re-ingesting, replacing and failing files.

use std::path::Path;

use crate::support::hashembed;
use groundwork::embed::{self, EmbedderSpec};
use groundwork::ingest::pipeline::{self, Outcome};
use groundwork::store::Store;

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ingest")
        .join(name)
}

async fn store_at(dir: &Path, url: &str) -> Store {
    let spec = EmbedderSpec {
        provider: "openai".into(),
        name: hashembed::MODEL.into(),
        vector_dim: hashembed::DIM,
        base_url: Some(url.into()),
    };
    let uri = dir.join("kb.lancedb").to_string_lossy().into_owned();
    let mut store = Store::open_or_create(&uri, &spec).await.unwrap();
    store
        .set_embedder(embed::build(&spec, &Default::default()).unwrap())
        .unwrap();
    store
}

fn outcome_of<'a>(report: &'a pipeline::IngestReport, name: &str) -> &'a Outcome {
    &report
        .files
        .iter()
        .find(|f| f.path.file_name().unwrap() == name)
        .unwrap_or_else(|| panic!("{name} not in report"))
        .outcome
}

#[tokio::test]
async fn a_folder_is_ingested_reingested_and_updated() {
    let server = hashembed::start().await;
    let work = tempfile::tempdir().unwrap();
    let docs = work.path().join("docs");
    std::fs::create_dir_all(docs.join("nested")).unwrap();
    for f in ["sample.md", "red.png", "sample.pdf"] {
        std::fs::copy(fixture(f), docs.join(f)).unwrap();
    }
    std::fs::copy(fixture("sample.html"), docs.join("nested/sample.html")).unwrap();
    std::fs::copy(fixture("red.png"), docs.join("nested/red.png")).unwrap();
    std::fs::write(
        docs.join("notes.txt"),
        "Keepers logged the weather every hour.\n\nThe logbook survives in the museum.",
    )
    .unwrap();
    std::fs::write(
        docs.join("broken.pdf"),
        b"%PDF-1.7 this is not really a pdf",
    )
    .unwrap();
    std::fs::write(
        docs.join("ignored.xyz"),
        b"not picked up by the folder walk",
    )
    .unwrap();

    let store = store_at(work.path(), &server.url).await;
    let report = pipeline::ingest_paths(&store, std::slice::from_ref(&docs), &())
        .await
        .unwrap();
    assert_eq!(report.files.len(), 5, "{:?}", report.files);
    assert_eq!(report.count(|o| matches!(o, Outcome::Added { .. })), 4);
    match outcome_of(&report, "broken.pdf") {
        Outcome::Failed { error } => assert!(error.contains("broken.pdf"), "{error}"),
        other => panic!("broken.pdf: {other:?}"),
    }
    assert_eq!(store.count_documents().await.unwrap(), 4);

    // Titles, items and pictures made it into the tables.
    let docs_meta = store.list_documents(None).await.unwrap();
    let md = docs_meta
        .iter()
        .find(|d| d.uri.as_deref().unwrap().ends_with("/sample.md"))
        .unwrap();
    assert_eq!(md.title.as_deref(), Some("Lighthouse Guide"));
    assert!(md.uri.as_deref().unwrap().starts_with("file:///"));
    let items = store.items_of(&md.id, None).await.unwrap();
    assert!(
        items
            .iter()
            .any(|i| i.label == "section_header" && i.text == "History")
    );
    let picture = items.iter().find(|i| i.label == "picture").unwrap();
    assert!(
        store
            .picture(&md.id, &picture.self_ref)
            .await
            .unwrap()
            .is_some()
    );

    let pdf = docs_meta
        .iter()
        .find(|d| d.uri.as_deref().unwrap().ends_with("/sample.pdf"))
        .unwrap();
    let pages = store.page_images(&pdf.id).await.unwrap();
    assert_eq!(pages.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
    let png = image::load_from_memory(&pages[&1]).unwrap();
    assert!(png.width() > 100 && png.height() > 100);
    let pdf_items = store.items_of(&pdf.id, None).await.unwrap();
    assert!(pdf_items.iter().any(|i| i.page_numbers == vec![2]));

    // Search finds content from each kind of file, with headings in context.
    let hits = store.search("fires on hills", Some(3), None).await.unwrap();
    assert!(hits[0].content.contains("fires on hills"), "{hits:?}");
    let hits = store.search("logbook museum", Some(1), None).await.unwrap();
    assert!(
        hits[0]
            .document_uri
            .as_deref()
            .unwrap()
            .ends_with("notes.txt")
    );
    let hits = store
        .search("dangerous coasts", Some(1), None)
        .await
        .unwrap();
    assert_eq!(hits[0].document_id.as_deref(), Some(pdf.id.as_str()));
    assert_eq!(hits[0].page_numbers, vec![1]);

    // Re-ingesting unchanged files is a no-op.
    let chunks_before = store.count_chunks().await.unwrap();
    let again = pipeline::ingest_paths(&store, std::slice::from_ref(&docs), &())
        .await
        .unwrap();
    assert_eq!(again.count(|o| matches!(o, Outcome::Unchanged { .. })), 4);
    assert_eq!(store.count_chunks().await.unwrap(), chunks_before);
    assert_eq!(
        store.list_documents(None).await.unwrap(),
        docs_meta,
        "nothing rewritten"
    );

    // A changed file replaces its document.
    let md_chunks = store.chunks_of(&md.id).await.unwrap();
    let mut other_chunks = std::collections::HashMap::new();
    for d in docs_meta.iter().filter(|d| d.id != md.id) {
        other_chunks.insert(d.id.clone(), store.chunks_of(&d.id).await.unwrap());
    }
    let text = std::fs::read_to_string(docs.join("sample.md")).unwrap();
    std::fs::write(
        docs.join("sample.md"),
        text.replace("fires on hills", "bonfires on cliffs"),
    )
    .unwrap();
    let changed = pipeline::ingest_paths(&store, &[docs.join("sample.md")], &())
        .await
        .unwrap();
    let Outcome::Replaced { id, .. } = outcome_of(&changed, "sample.md").clone() else {
        panic!("{changed:?}");
    };
    assert_eq!(id, md.id, "the document keeps its id");
    let md2 = store.get_document(&md.id).await.unwrap().unwrap();
    assert_eq!(md2.created_at, md.created_at, "and its creation time");
    assert!(md2.updated_at > md.updated_at, "{md2:?}");
    assert_ne!(
        md2.metadata[pipeline::HASH_KEY],
        md.metadata[pipeline::HASH_KEY]
    );
    let chunks = store.chunks_of(&md.id).await.unwrap();
    assert!(
        chunks
            .iter()
            .any(|c| c.content.contains("bonfires on cliffs"))
    );
    assert!(chunks.iter().all(|c| !c.content.contains("fires on hills")));
    for old in &md_chunks {
        assert!(store.get_chunk(&old.id).await.unwrap().is_none(), "{old:?}");
    }
    let hits = store
        .search("bonfires cliffs", Some(1), None)
        .await
        .unwrap();
    assert_eq!(hits[0].document_id.as_deref(), Some(md.id.as_str()));
    assert!(hits[0].content.contains("bonfires on cliffs"));
    // Nothing else was touched.
    let now = store.list_documents(None).await.unwrap();
    assert_eq!(now.len(), 4);
    assert_eq!(
        now.iter().filter(|d| d.id != md.id).collect::<Vec<_>>(),
        docs_meta
            .iter()
            .filter(|d| d.id != md.id)
            .collect::<Vec<_>>()
    );
    for d in docs_meta.iter().filter(|d| d.id != md.id) {
        assert_eq!(store.chunks_of(&d.id).await.unwrap(), other_chunks[&d.id]);
    }
    assert_eq!(
        store.count_chunks().await.unwrap(),
        chunks_before - md_chunks.len() + chunks.len()
    );
    assert!(matches!(
        outcome_of(
            &pipeline::ingest_paths(&store, &[docs.join("sample.md")], &())
                .await
                .unwrap(),
            "sample.md"
        ),
        Outcome::Unchanged { id } if *id == md.id
    ));

    // A stored file that becomes unparseable is reported and its stored version kept.
    let html = store
        .find_by_uri(&pipeline::file_uri(&docs.join("nested/sample.html")))
        .await
        .unwrap()
        .unwrap();
    std::fs::write(docs.join("nested/sample.html"), [0xffu8, 0xfe, 0x00, 0x80]).unwrap();
    let broken = pipeline::ingest_paths(&store, std::slice::from_ref(&docs), &())
        .await
        .unwrap();
    assert!(matches!(
        outcome_of(&broken, "sample.html"),
        Outcome::Failed { .. }
    ));
    assert!(store.get_document(&html.id).await.unwrap().is_some());
    assert!(!store.chunks_of(&html.id).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_missing_path_is_an_error_naming_it() {
    let server = hashembed::start().await;
    let work = tempfile::tempdir().unwrap();
    let store = store_at(work.path(), &server.url).await;
    let err = pipeline::ingest_paths(&store, &[work.path().join("nope")], &())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
    // A file with an unsupported extension named directly is reported, not fatal.
    let odd = work.path().join("data.bin");
    std::fs::write(&odd, b"\x00\x01").unwrap();
    let report = pipeline::ingest_paths(&store, &[odd], &()).await.unwrap();
    assert!(matches!(
        &report.files[0].outcome,
        Outcome::Failed { error } if error.contains("data.bin")
    ));
}

/// A PDF stored by an older parser (no parser version in its metadata) is parsed again on
/// the next ingest although its bytes did not change; after that it is unchanged.
#[tokio::test]
async fn a_pdf_from_an_older_parser_is_parsed_again() {
    let server = hashembed::start().await;
    let work = tempfile::tempdir().unwrap();
    let store = store_at(work.path(), &server.url).await;
    let pdf = work.path().join("structured.pdf");
    std::fs::copy(fixture("structured.pdf"), &pdf).unwrap();
    // The old state: the same bytes, stored without a parser version.
    let bytes = std::fs::read(&pdf).unwrap();
    let parsed = groundwork::ingest::parse_file(&pdf).unwrap();
    let uri = pipeline::file_uri(&pdf);
    let mut old = pipeline::new_document(
        parsed,
        "structured.pdf",
        uri.clone(),
        pipeline::content_hash(&bytes),
        None,
    );
    assert!(old.metadata.get(pipeline::PARSER_KEY).is_none());
    old.metadata.remove(pipeline::PARSER_KEY);
    let old_meta = store.add_document_seeded(old, None, None).await.unwrap();

    let outcome = pipeline::ingest_file(&store, &pdf).await.unwrap();
    let Outcome::Replaced { id, .. } = outcome else {
        panic!("expected a replacement, got {outcome:?}");
    };
    assert_eq!(id, old_meta.id, "the document keeps its id");
    let now = store.find_by_uri(&uri).await.unwrap().unwrap();
    assert_eq!(now.id, old_meta.id);
    assert_eq!(now.created_at, old_meta.created_at);
    // Its old chunks are gone, the new ones are all there is.
    let chunks = store.chunks_of(&id).await.unwrap();
    assert!(!chunks.is_empty());
    assert_eq!(store.count_chunks().await.unwrap(), chunks.len());
    assert_eq!(
        now.metadata[pipeline::PARSER_KEY],
        serde_json::json!(pipeline::parser_version(&pdf).unwrap())
    );
    assert_eq!(
        store.list_documents(None).await.unwrap().len(),
        1,
        "the old one is gone"
    );
    // Parsed by today's parser: unchanged from now on.
    let again = pipeline::ingest_file(&store, &pdf).await.unwrap();
    assert!(matches!(again, Outcome::Unchanged { .. }), "{again:?}");
    // Other kinds carry no parser version and stay unchanged as before.
    assert_eq!(pipeline::parser_version(Path::new("a.md")), None);
}

/// Runs `groundwork ingest PATH` against the database in `dir` with a private HOME and the
/// hashembed server, `extra` added to its environment (off the runtime's thread, which
/// serves the embedder).
async fn ingest_with_binary(
    dir: &Path,
    url: &str,
    path: &Path,
    extra: &[(&str, &str)],
) -> std::process::Output {
    let home = dir.join("home");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_groundwork"));
    cmd.arg("ingest")
        .arg(path)
        .arg("--db")
        .arg(dir.join("kb.lancedb"))
        .args(["--embed-url", url, "--embed-model", hashembed::MODEL])
        .env("HOME", &home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("GROUNDWORK_DISCOVER", "off")
        .env_remove("HAIKU_RAG_DB")
        .env_remove("GROUNDWORK_EMBED_URL")
        .env_remove("GROUNDWORK_EMBED_MODEL")
        .env_remove("GROUNDWORK_CONFIG");
    for (k, v) in extra {
        cmd.env(k, v);
    }
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// A re-ingest killed at each step of the replacement (the process ends there, no cleanup
/// runs) leaves one complete version of the document visible, old or new, and the other
/// documents as they were; the next ingest converges to one document with the original id
/// and creation time and nothing of the temporary replacement.
#[tokio::test]
async fn a_reingest_killed_at_any_step_leaves_a_complete_version_and_a_rerun_converges() {
    use groundwork::store::replace::{KILL_ENV, replacement_id};
    let server = hashembed::start().await;
    // Each step, and how many versions of the file a kill there leaves visible.
    for (step, versions) in [
        ("replacement-written", 2),
        ("original-removed", 1),
        ("original-rewritten", 2),
    ] {
        let work = tempfile::tempdir().unwrap();
        let docs = work.path().join("docs");
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::copy(fixture("sample.md"), docs.join("sample.md")).unwrap();
        std::fs::write(
            docs.join("notes.txt"),
            "Keepers logged the weather every hour.\n\nThe logbook survives in the museum.",
        )
        .unwrap();
        let store = store_at(work.path(), &server.url).await;
        pipeline::ingest_paths(&store, std::slice::from_ref(&docs), &())
            .await
            .unwrap();
        let uri = pipeline::file_uri(&docs.join("sample.md"));
        let md = store.find_by_uri(&uri).await.unwrap().unwrap();
        let notes = store
            .find_by_uri(&pipeline::file_uri(&docs.join("notes.txt")))
            .await
            .unwrap()
            .unwrap();
        let notes_chunks = store.chunks_of(&notes.id).await.unwrap();
        drop(store);
        let text = std::fs::read_to_string(docs.join("sample.md")).unwrap();
        std::fs::write(
            docs.join("sample.md"),
            text.replace("fires on hills", "bonfires on cliffs"),
        )
        .unwrap();

        let killed = ingest_with_binary(
            work.path(),
            &server.url,
            &docs.join("sample.md"),
            &[(KILL_ENV, step)],
        )
        .await;
        let err = String::from_utf8_lossy(&killed.stderr);
        assert!(!killed.status.success(), "{step}: {err}");
        assert!(err.contains(step), "{step}: {err}");

        // What the kill left, seen by a fresh handle: every visible version of the file is
        // complete and wholly old or wholly new; the other document is as it was.
        let store = store_at(work.path(), &server.url).await;
        let visible = store
            .list_documents(Some(&format!("uri = '{uri}'")))
            .await
            .unwrap();
        assert_eq!(visible.len(), versions, "{step}: {visible:?}");
        for v in &visible {
            let chunks = store.chunks_of(&v.id).await.unwrap();
            let all: String = chunks.iter().map(|c| c.content.as_str()).collect();
            let old = all.contains("fires on hills") && !all.contains("bonfires");
            let new = all.contains("bonfires on cliffs");
            assert!(old ^ new, "{step}: a torn version: {all}");
            assert!(!store.items_of(&v.id, None).await.unwrap().is_empty());
            assert!(store.document_content(&v.id).await.unwrap().is_some());
            assert_eq!(v.created_at, md.created_at, "{step}");
        }
        assert_eq!(
            store.get_document(&notes.id).await.unwrap(),
            Some(notes.clone())
        );
        assert_eq!(store.chunks_of(&notes.id).await.unwrap(), notes_chunks);

        // The rerun converges: one document with the original id, the new content.
        let rerun = pipeline::ingest_paths(&store, std::slice::from_ref(&docs), &())
            .await
            .unwrap();
        assert!(
            matches!(
                outcome_of(&rerun, "sample.md"),
                Outcome::Replaced { id, .. } | Outcome::Unchanged { id } if *id == md.id
            ),
            "{step}: {rerun:?}"
        );
        assert!(matches!(
            outcome_of(&rerun, "notes.txt"),
            Outcome::Unchanged { .. }
        ));
        let all = store.list_documents(None).await.unwrap();
        assert_eq!(all.len(), 2, "{step}: {all:?}");
        let now = store.find_by_uri(&uri).await.unwrap().unwrap();
        assert_eq!(now.id, md.id, "{step}");
        assert_eq!(now.created_at, md.created_at, "{step}");
        assert!(now.updated_at > md.updated_at, "{step}");
        assert!(
            now.metadata
                .get(groundwork::store::replace::REPLACES_KEY)
                .is_none()
        );
        let chunks = store.chunks_of(&md.id).await.unwrap();
        assert!(
            chunks
                .iter()
                .any(|c| c.content.contains("bonfires on cliffs"))
        );
        let temp = replacement_id(&md.id);
        assert!(store.chunks_of(&temp).await.unwrap().is_empty(), "{step}");
        assert!(
            store.items_of(&temp, None).await.unwrap().is_empty(),
            "{step}"
        );
        assert!(
            store.document_content(&temp).await.unwrap().is_none(),
            "{step}"
        );
        assert_eq!(
            store.count_chunks().await.unwrap(),
            chunks.len() + notes_chunks.len(),
            "{step}: only the two documents' chunks are left"
        );
        assert_eq!(
            store.get_document(&notes.id).await.unwrap(),
            Some(notes.clone())
        );
        let hits = store
            .search("bonfires cliffs", Some(1), None)
            .await
            .unwrap();
        assert_eq!(hits[0].document_id.as_deref(), Some(md.id.as_str()));
        // And from then on nothing changes.
        let again = pipeline::ingest_paths(&store, std::slice::from_ref(&docs), &())
            .await
            .unwrap();
        assert_eq!(again.count(|o| matches!(o, Outcome::Unchanged { .. })), 2);
    }
}

/// Visual grounding draws pages sharper than the 72 dpi rasters a database stores when the
/// document's source PDF is at hand: rendered again at the resolution the view needs,
/// kept in a cache (so a moved or deleted source still shows the page sharp), and the
/// stored raster otherwise.
#[tokio::test]
async fn grounding_pages_are_rendered_sharper_from_the_source_pdf_and_cached() {
    use groundwork::host::grounding::{Sharpen, ground_chunk, ground_chunk_sharp};
    let server = hashembed::start().await;
    let work = tempfile::tempdir().unwrap();
    let pdf = work.path().join("sample.pdf");
    std::fs::copy(fixture("sample.pdf"), &pdf).unwrap();
    let store = store_at(work.path(), &server.url).await;
    pipeline::ingest_paths(&store, std::slice::from_ref(&pdf), &())
        .await
        .unwrap();
    let doc = store.list_documents(None).await.unwrap().remove(0);
    let mut chunk = None;
    for c in store.chunks_of(&doc.id).await.unwrap() {
        if ground_chunk(&store, &c.id, false).await.is_ok() {
            chunk = Some(c.id);
            break;
        }
    }
    let chunk = chunk.expect("a chunk with boxes");
    let stored = ground_chunk(&store, &chunk, false).await.unwrap();
    assert_eq!(
        stored.pages[0].image.height(),
        792,
        "72 dpi, one pixel per point"
    );

    let cache = work.path().join("cache");
    let sharpen = Sharpen {
        min_height: 1500,
        cache: cache.clone(),
    };
    // 72 × 1500 / 792 = 136.4 dpi, in steps of 24: 144 dpi, a 1584-pixel page.
    assert_eq!(sharpen.dpi_for(792), Some(144));
    assert_eq!(sharpen.dpi_for(1600), None);
    let sharp = ground_chunk_sharp(&store, &chunk, false, Some(&sharpen))
        .await
        .unwrap();
    let page = &sharp.pages[0];
    assert_eq!((page.image.width(), page.image.height()), (1224, 1584));
    assert_eq!(page.matched, stored.pages[0].matched);
    let cached: Vec<std::path::PathBuf> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(cached.len(), 1, "one page at one resolution: {cached:?}");
    let name = cached[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        name.ends_with(&format!("-p{}-144dpi.png", page.page_no)),
        "{name}"
    );
    // The next view reads the cache, not pdftoppm: what the cache holds is what is shown.
    let marker = image::RgbaImage::from_pixel(612, 1000, image::Rgba([255, 255, 255, 255]));
    marker.save(&cached[0]).unwrap();
    let again = ground_chunk_sharp(&store, &chunk, false, Some(&sharpen))
        .await
        .unwrap();
    assert_eq!(again.pages[0].image.height(), 1000, "read from the cache");
    // The source gone: the stored raster, as before.
    std::fs::remove_file(&pdf).unwrap();
    let finer = Sharpen {
        min_height: 2400,
        cache,
    };
    let fallback = ground_chunk_sharp(&store, &chunk, false, Some(&finer))
        .await
        .unwrap();
    assert_eq!(fallback.pages[0].image.height(), 792);
}

/// What a folder's ingest tells its progress, in order.
#[derive(Default)]
struct Recorded(std::sync::Mutex<Vec<String>>);

impl pipeline::Progress for Recorded {
    fn start(&self, total: usize) {
        self.0.lock().unwrap().push(format!("start {total}"));
    }
    fn stage(&self, file: &Path, stage: pipeline::Stage) {
        let name = file.file_name().unwrap().to_string_lossy();
        self.0.lock().unwrap().push(format!("{name} {stage:?}"));
    }
    fn file_done(&self, f: &pipeline::FileOutcome) {
        let name = f.path.file_name().unwrap().to_string_lossy();
        self.0.lock().unwrap().push(format!("{name} done"));
    }
    fn indexing(&self) {
        self.0.lock().unwrap().push("indexing".into());
    }
}

/// Progress that tells the truth (issue 45): each file says when it is parsed, how many
/// of its chunks are embedded as the embedding goes (in slices, so a long document moves)
/// and when it is written, before it is done; the indexes come last, once; a file that did
/// not change is done without being parsed, and nothing is indexed when nothing was written.
#[tokio::test]
async fn ingest_progress_names_each_stage_of_each_file() {
    let server = hashembed::start().await;
    let work = tempfile::tempdir().unwrap();
    let docs = work.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::copy(fixture("sample.md"), docs.join("a.md")).unwrap();
    // 300 paragraphs: 300 chunks, embedded in slices.
    let long: String = (0..300)
        .map(|i| format!("Paragraph {i} of the long notes.\n\n"))
        .collect();
    std::fs::write(docs.join("b.md"), long).unwrap();
    let store = store_at(work.path(), &server.url).await;
    let recorded = Recorded::default();
    let report = pipeline::ingest_paths_with(
        &store,
        std::slice::from_ref(&docs),
        &recorded,
        &Default::default(),
    )
    .await
    .unwrap();
    let a_chunks = match outcome_of(&report, "a.md") {
        Outcome::Added { chunks, .. } => *chunks,
        other => panic!("{other:?}"),
    };
    let mut expected = vec![
        "start 2".to_string(),
        "a.md Parsing".into(),
        format!("a.md Embedding {{ done: 0, total: {a_chunks} }}"),
        format!("a.md Embedding {{ done: {a_chunks}, total: {a_chunks} }}"),
        "a.md Writing".into(),
        "a.md done".into(),
        "b.md Parsing".into(),
    ];
    for done in [0, 128, 256, 300] {
        expected.push(format!("b.md Embedding {{ done: {done}, total: 300 }}"));
    }
    expected.extend(["b.md Writing".into(), "b.md done".into(), "indexing".into()]);
    assert_eq!(*recorded.0.lock().unwrap(), expected);

    // Again: nothing changed, nothing parsed, nothing indexed.
    let again = Recorded::default();
    pipeline::ingest_paths_with(
        &store,
        std::slice::from_ref(&docs),
        &again,
        &Default::default(),
    )
    .await
    .unwrap();
    assert_eq!(
        *again.0.lock().unwrap(),
        ["start 2", "a.md done", "b.md done"]
    );
}
