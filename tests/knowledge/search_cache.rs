//! What search keeps between queries (documents' metadata, which documents hold pictures)
//! against real LanceDB tables and the real embedder over HTTP: a repeated search reads
//! nothing again, and every write through the store shows in the next search.

use crate::support::hashembed;
use groundwork::embed::{self, EmbedderSpec};
use groundwork::store::{DocumentItem, NewChunk, NewDocument, Store, StoreError};
use serde_json::{Map, json};

async fn new_store(dir: &std::path::Path, url: &str) -> Store {
    let uri = dir.join("kb.lancedb").to_string_lossy().into_owned();
    let spec = EmbedderSpec {
        provider: "openai".into(),
        name: hashembed::MODEL.into(),
        vector_dim: hashembed::DIM,
        base_url: Some(url.into()),
    };
    let mut store = Store::create(&uri, &spec).await.unwrap();
    store
        .set_embedder(embed::build(&spec, &Default::default()).unwrap())
        .unwrap();
    store
}

fn item(self_ref: &str, label: &str, text: &str, picture: Option<&[u8]>) -> DocumentItem {
    DocumentItem {
        document_id: String::new(),
        position: 0,
        self_ref: self_ref.into(),
        label: label.into(),
        text: text.into(),
        page_numbers: vec![],
        picture_data: picture.map(<[u8]>::to_vec),
        heading_level: 0,
        tree_depth: 0,
    }
}

/// A one-chunk document whose chunk refers to `#/pictures/0` (a picture item, with bytes
/// when `picture` is given).
fn doc(uri: &str, title: &str, content: &str, picture: Option<&[u8]>) -> NewDocument {
    NewDocument {
        uri: Some(uri.into()),
        title: Some(title.into()),
        metadata: Map::from_iter([("v".to_string(), json!(title))]),
        content: content.into(),
        docling_document: json!({}),
        pages: vec![],
        items: vec![item("#/pictures/0", "picture", content, picture)],
        chunks: vec![NewChunk {
            content: content.into(),
            content_fts: content.into(),
            metadata: json!({"doc_item_refs": ["#/pictures/0"], "labels": ["picture"], "page_numbers": []}),
            order: 0,
        }],
    }
}

#[tokio::test]
async fn repeated_searches_read_metadata_once_and_see_every_write() {
    let server = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store = new_store(dir.path(), &server.url).await;
    let a = store
        .add_document(doc("test://a", "Alpha", "inverter fault alarm", None), None)
        .await
        .unwrap();
    store
        .add_document(
            doc("test://b", "Beta", "battery winter storage", None),
            None,
        )
        .await
        .unwrap();

    let first = store.search("inverter fault", Some(2), None).await.unwrap();
    assert_eq!(first[0].document_title.as_deref(), Some("Alpha"));
    assert_eq!(first[0].document_meta["v"], json!("Alpha"));
    assert!(first.iter().all(|r| r.image_data.is_none()));
    let reads = store.document_reads();
    let again = store.search("inverter fault", Some(2), None).await.unwrap();
    assert_eq!(again, first, "the same search gives the same results");
    assert_eq!(
        store.document_reads(),
        reads,
        "documents already seen are not read again"
    );

    // Replacing the document (new title, and now a picture with bytes) shows at once.
    let a2 = store
        .add_document(
            doc("test://a", "Alpha 2", "inverter fault alarm", Some(b"PNG!")),
            Some(&a.id),
        )
        .await
        .unwrap();
    assert_eq!(a2.id, a.id, "a replaced document keeps its id");
    let after = store.search("inverter fault", Some(2), None).await.unwrap();
    assert_eq!(after[0].document_id.as_deref(), Some(a.id.as_str()));
    assert_eq!(after[0].document_title.as_deref(), Some("Alpha 2"));
    assert_eq!(after[0].document_meta["v"], json!("Alpha 2"));
    let images = after[0]
        .image_data
        .as_ref()
        .expect("the new picture's bytes");
    assert_eq!(images["#/pictures/0"], json!("UE5HIQ=="));
    assert!(
        after
            .iter()
            .all(|r| r.document_title.as_deref() != Some("Alpha")),
        "the old version is gone"
    );

    // Deleting it: gone from the next search, metadata and pictures alike.
    store.delete_document(&a2.id).await.unwrap();
    let gone = store.search("inverter fault", Some(2), None).await.unwrap();
    assert!(!gone.is_empty());
    assert!(
        gone.iter()
            .all(|r| r.document_title.as_deref() == Some("Beta"))
    );
    assert!(gone.iter().all(|r| r.image_data.is_none()));
}

#[tokio::test]
async fn a_failing_embedder_is_an_error_unless_the_store_is_empty() {
    let server = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut store = new_store(dir.path(), &server.url).await;
    // Nothing to find: no embedding is needed, and a down endpoint is no error.
    let down = EmbedderSpec {
        base_url: Some("http://127.0.0.1:9/v1".into()),
        ..store.embedder_spec().clone()
    };
    let working = store.embedder().unwrap().clone();
    store
        .set_embedder(embed::build(&down, &Default::default()).unwrap())
        .unwrap();
    assert!(
        store
            .search("anything", None, None)
            .await
            .unwrap()
            .is_empty()
    );

    store.set_embedder(working).unwrap();
    store
        .add_document(doc("test://a", "Alpha", "inverter fault alarm", None), None)
        .await
        .unwrap();
    store
        .set_embedder(embed::build(&down, &Default::default()).unwrap())
        .unwrap();
    let err = store.search("inverter", None, None).await.unwrap_err();
    assert!(matches!(err, StoreError::Embed(_)), "{err}");
}
