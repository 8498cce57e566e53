//! The bundled demo corpus (`assets/demo`) ingests completely and gives search, context
//! expansion, pictures and page images something real to show.

use std::path::Path;

use crate::support::hashembed;
use groundwork::embed::{self, EmbedderSpec};
use groundwork::ingest::pipeline::{self, Outcome};
use groundwork::store::Store;

#[tokio::test]
async fn the_demo_corpus_ingests_and_searches() {
    let server = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let spec = EmbedderSpec {
        provider: "openai".into(),
        name: hashembed::MODEL.into(),
        vector_dim: hashembed::DIM,
        base_url: Some(server.url.clone()),
    };
    let uri = dir
        .path()
        .join("demo.lancedb")
        .to_string_lossy()
        .into_owned();
    let mut store = Store::create(&uri, &spec).await.unwrap();
    store
        .set_embedder(embed::build(&spec, &Default::default()).unwrap())
        .unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo");
    let report = pipeline::ingest_paths(&store, &[demo], &()).await.unwrap();
    assert!(report.failed().is_empty(), "{:?}", report.failed());
    assert_eq!(report.count(|o| matches!(o, Outcome::Added { .. })), 5);

    let info = store.info().await.unwrap();
    assert_eq!(info.documents, 5);
    assert!(
        info.pictures >= 3,
        "two handbook figures and the PDF chart: {info:?}"
    );

    let docs = store.list_documents(None).await.unwrap();
    let pdf = docs
        .iter()
        .find(|d| d.uri.as_deref().unwrap().ends_with(".pdf"))
        .unwrap();
    assert_eq!(store.page_images(&pdf.id).await.unwrap().len(), 3);

    // A figure caption brings its picture's bytes along.
    let hits = store
        .search("monthly solar output figure", Some(5), None)
        .await
        .unwrap();
    assert!(
        hits.iter()
            .any(|h| h.image_data.as_ref().is_some_and(|m| !m.is_empty())),
        "{hits:#?}"
    );

    // Expansion grows a hit to its section.
    let hits = store
        .search_expanded("spare modules winter storage voltage", Some(3), None)
        .await
        .unwrap();
    // (Neighbouring hits of one document merge into one result, SCENARIOS 33.)
    let top = hits
        .iter()
        .find(|h| {
            h.headings
                .as_deref()
                .is_some_and(|h| h.iter().any(|x| x == "Winter storage of spare modules"))
        })
        .expect("the winter storage section among the top three");
    assert!(top.content.contains("3.2 V"), "{}", top.content);

    // The PDF's table and pages are searchable.
    let hits = store
        .search("battery bank cycles health", Some(5), None)
        .await
        .unwrap();
    assert!(hits.iter().any(|h| h.document_id.as_deref() == Some(pdf.id.as_str())
        && h.page_numbers == vec![2]));
}
