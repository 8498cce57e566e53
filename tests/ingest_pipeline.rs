//! Ingestion end to end: real files (Markdown, HTML, text, PDF) parsed, chunked, embedded
//! over HTTP and written to LanceDB; re-ingesting, replacing and failing files.

mod support;

use std::path::Path;

use groundwork::embed::{self, EmbedderSpec};
use groundwork::ingest::pipeline::{self, Outcome};
use groundwork::store::Store;
use support::hashembed;

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
    let text = std::fs::read_to_string(docs.join("sample.md")).unwrap();
    std::fs::write(
        docs.join("sample.md"),
        text.replace("fires on hills", "bonfires on cliffs"),
    )
    .unwrap();
    let changed = pipeline::ingest_paths(&store, &[docs.join("sample.md")], &())
        .await
        .unwrap();
    let Outcome::Replaced { id, old_id, .. } = outcome_of(&changed, "sample.md").clone() else {
        panic!("{changed:?}");
    };
    assert_eq!(old_id, md.id);
    assert!(store.get_document(&md.id).await.unwrap().is_none());
    assert!(store.chunks_of(&md.id).await.unwrap().is_empty());
    let hits = store
        .search("bonfires cliffs", Some(1), None)
        .await
        .unwrap();
    assert_eq!(hits[0].document_id.as_deref(), Some(id.as_str()));
    assert_eq!(store.count_documents().await.unwrap(), 4);

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
    );
    assert!(old.metadata.get(pipeline::PARSER_KEY).is_none());
    old.metadata.remove(pipeline::PARSER_KEY);
    let old_meta = store.add_document_seeded(old, None, None).await.unwrap();

    let outcome = pipeline::ingest_file(&store, &pdf).await.unwrap();
    let Outcome::Replaced { old_id, id, .. } = outcome else {
        panic!("expected a replacement, got {outcome:?}");
    };
    assert_eq!(old_id, old_meta.id);
    let now = store.find_by_uri(&uri).await.unwrap().unwrap();
    assert_eq!(now.id, id);
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
