//! The store against real LanceDB tables on disk, with the real async-openai embedder
//! talking to a deterministic embeddings server on 127.0.0.1.

use std::sync::Arc;

use crate::support::hashembed;
use groundwork::embed::{self, EmbedderSpec};
use groundwork::store::{DocumentItem, NewChunk, NewDocument, Store, StoreError};
use serde_json::{Map, Value, json};

fn spec(url: &str, dim: usize) -> EmbedderSpec {
    EmbedderSpec {
        provider: "openai".into(),
        name: hashembed::MODEL.into(),
        vector_dim: dim,
        base_url: Some(url.into()),
    }
}

async fn new_store(dir: &std::path::Path, url: &str) -> Store {
    let uri = dir.join("kb.lancedb").to_string_lossy().into_owned();
    let s = spec(url, hashembed::DIM);
    let mut store = Store::create(&uri, &s).await.unwrap();
    store
        .set_embedder(embed::build(&s, &Default::default()).unwrap())
        .unwrap();
    store
}

fn item(self_ref: &str, label: &str, text: &str, level: i64) -> DocumentItem {
    DocumentItem {
        document_id: String::new(),
        position: 0,
        self_ref: self_ref.into(),
        label: label.into(),
        text: text.into(),
        page_numbers: vec![],
        picture_data: None,
        heading_level: level,
        tree_depth: 0,
    }
}

fn chunk(order: i64, headings: &[&str], refs: &[&str], label: &str, content: &str) -> NewChunk {
    let fts = if headings.is_empty() {
        content.to_string()
    } else {
        format!("{}\n{content}", headings.join("\n"))
    };
    NewChunk {
        content: content.into(),
        content_fts: fts,
        metadata: json!({
            "doc_item_refs": refs,
            "headings": if headings.is_empty() { Value::Null } else { json!(headings) },
            "labels": [label],
            "page_numbers": [],
        }),
        order,
    }
}

/// "Solar" and "Battery" documents, each a title, a header and paragraphs.
fn solar() -> NewDocument {
    NewDocument {
        uri: Some("test://solar".into()),
        title: Some("Solar Panels".into()),
        metadata: Map::from_iter([("topic".to_string(), json!("solar"))]),
        content: "# Solar Panels\n\n## Cleaning\n\nWash the panels with water twice a year.\n\nNever use abrasive brushes on the glass.".into(),
        docling_document: json!({"schema_name": "DoclingDocument"}),
        pages: vec![],
        items: vec![
            item("#/texts/0", "title", "Solar Panels", 0),
            item("#/texts/1", "section_header", "Cleaning", 1),
            item("#/texts/2", "text", "Wash the panels with water twice a year.", 0),
            item("#/texts/3", "text", "Never use abrasive brushes on the glass.", 0),
        ],
        chunks: vec![
            chunk(0, &["Cleaning"], &["#/texts/2"], "text", "Wash the panels with water twice a year."),
            chunk(1, &["Cleaning"], &["#/texts/3"], "text", "Never use abrasive brushes on the glass."),
        ],
    }
}

fn battery() -> NewDocument {
    NewDocument {
        uri: Some("test://battery".into()),
        title: Some("Battery Storage".into()),
        metadata: Map::from_iter([("topic".to_string(), json!("storage"))]),
        content: "Lithium batteries store surplus energy for the night.".into(),
        docling_document: json!({}),
        pages: vec![],
        items: vec![item(
            "#/texts/0",
            "text",
            "Lithium batteries store surplus energy for the night.",
            0,
        )],
        chunks: vec![chunk(
            0,
            &[],
            &["#/texts/0"],
            "text",
            "Lithium batteries store surplus energy for the night.",
        )],
    }
}

#[tokio::test]
async fn create_add_search_replace_delete() {
    let server = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store = new_store(dir.path(), &server.url).await;

    let s = store.add_document(solar(), None).await.unwrap();
    let b = store.add_document(battery(), None).await.unwrap();
    store.ensure_indexes().await.unwrap();
    assert_eq!(store.count_documents().await.unwrap(), 2);
    assert_eq!(store.count_chunks().await.unwrap(), 3);

    // The chunks were embedded from content_fts (headings + content) over HTTP.
    let inputs = server.served.inputs.lock().unwrap().clone();
    assert!(inputs.contains(&"Cleaning\nWash the panels with water twice a year.".to_string()));

    let hits = store
        .search("abrasive brushes glass", Some(3), None)
        .await
        .unwrap();
    assert!(!hits.is_empty());
    assert_eq!(hits[0].content, "Never use abrasive brushes on the glass.");
    assert_eq!(hits[0].document_title.as_deref(), Some("Solar Panels"));
    assert_eq!(hits[0].document_uri.as_deref(), Some("test://solar"));
    assert_eq!(
        hits[0].headings.as_deref(),
        Some(&["Cleaning".to_string()][..])
    );
    assert!(
        hits[0].chunk_ids.is_empty(),
        "filled by context expansion only"
    );
    // Scores are RRF relevance scores, sorted descending.
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));

    // Pre-filter: only chunks of matching documents count against the limit.
    let filtered = store
        .search(
            "abrasive brushes glass",
            Some(3),
            Some("uri = 'test://battery'"),
        )
        .await
        .unwrap();
    assert_eq!(filtered.len(), 1);
    assert_eq!(filtered[0].document_id.as_deref(), Some(b.id.as_str()));
    let meta_filter = store
        .search("panels", Some(5), Some("title LIKE '%Solar%'"))
        .await
        .unwrap();
    assert!(
        meta_filter
            .iter()
            .all(|r| r.document_id.as_deref() == Some(s.id.as_str()))
    );

    // Replace: the new version takes the old one's place under its id; the old chunks
    // are gone and nothing of the temporary replacement is left.
    let old_chunks = store.chunks_of(&s.id).await.unwrap();
    let mut changed = solar();
    changed.chunks[1].content = "Use a soft sponge on the glass.".into();
    changed.chunks[1].content_fts = "Cleaning\nUse a soft sponge on the glass.".into();
    let s2 = store.add_document(changed, Some(&s.id)).await.unwrap();
    assert_eq!(s2.id, s.id, "replacing keeps the id");
    assert_eq!(
        s2.created_at, s.created_at,
        "replacing keeps the creation time"
    );
    assert_eq!(store.get_document(&s.id).await.unwrap(), Some(s2.clone()));
    let new_chunks = store.chunks_of(&s.id).await.unwrap();
    assert_eq!(new_chunks.len(), 2);
    assert_eq!(new_chunks[1].content, "Use a soft sponge on the glass.");
    assert!(
        new_chunks
            .iter()
            .all(|c| old_chunks.iter().all(|o| o.id != c.id)),
        "the chunks are new"
    );
    for o in &old_chunks {
        assert!(store.get_chunk(&o.id).await.unwrap().is_none());
    }
    let temp = groundwork::store::replace::replacement_id(&s.id);
    assert!(store.get_document(&temp).await.unwrap().is_none());
    assert!(store.chunks_of(&temp).await.unwrap().is_empty());
    assert!(store.items_of(&temp, None).await.unwrap().is_empty());
    assert_eq!(store.count_documents().await.unwrap(), 2);
    assert_eq!(store.count_chunks().await.unwrap(), 3);

    // Delete.
    store.delete_document(&b.id).await.unwrap();
    assert_eq!(store.count_documents().await.unwrap(), 1);
    assert!(store.chunks_of(&b.id).await.unwrap().is_empty());
    let info = store.info().await.unwrap();
    assert_eq!(info.documents, 1);
    assert_eq!(info.chunks, 2);
    assert!(info.indexes.iter().any(|i| i.columns == ["content_fts"]));
}

#[tokio::test]
async fn empty_queries_and_unmatched_filters_give_nothing() {
    let server = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store = new_store(dir.path(), &server.url).await;
    // An empty database.
    assert!(
        store
            .search("anything", None, None)
            .await
            .unwrap()
            .is_empty()
    );
    store.add_document(solar(), None).await.unwrap();
    store.ensure_indexes().await.unwrap();
    assert!(store.search("   ", None, None).await.unwrap().is_empty());
    assert!(store.search("", None, None).await.unwrap().is_empty());
    assert!(
        store
            .search("panels", None, Some("uri = 'test://nowhere'"))
            .await
            .unwrap()
            .is_empty()
    );
    // A broken filter is a clear error naming the filter.
    let err = store
        .search("panels", None, Some("no_such_column = 1"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::InvalidFilter { filter, .. } if filter == "no_such_column = 1"),
        "{err}"
    );
}

#[tokio::test]
async fn a_query_embedder_of_another_dimension_is_refused() {
    let server = hashembed::start().await;
    let other = hashembed::start_dim(32).await;
    let dir = tempfile::tempdir().unwrap();
    let uri = {
        let store = new_store(dir.path(), &server.url).await;
        store.uri().to_string()
    };
    let mut store = Store::open(&uri).await.unwrap();
    let wrong = embed::build(&spec(&other.url, 32), &Default::default()).unwrap();
    let err = store.set_embedder(wrong).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, StoreError::DimensionMismatch { .. }));
    assert!(msg.contains("32") && msg.contains("64"), "{msg}");

    // An embedder that claims the right dimension but returns another is caught per call.
    let liar = embed::build(&spec(&other.url, 64), &Default::default()).unwrap();
    store.set_embedder(liar).unwrap();
    let err = store.search("panels", None, None).await;
    // Empty database short-circuits before embedding; add a document with the liar and fail.
    assert!(err.unwrap().is_empty());
    let err = store.add_document(solar(), None).await.unwrap_err();
    assert!(err.to_string().contains("dimension 32"), "{err}");
    assert_eq!(
        store.count_documents().await.unwrap(),
        0,
        "nothing half-written"
    );
}

#[tokio::test]
async fn a_foreign_schema_is_refused_naming_what_differs() {
    use arrow_array::{Int64Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    let dir = tempfile::tempdir().unwrap();
    let uri = dir
        .path()
        .join("other.lancedb")
        .to_string_lossy()
        .into_owned();
    let db = lancedb::connect(&uri).execute().await.unwrap();
    // Tables with haiku.rag's names but another layout for chunks.
    let chunks = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("document_id", DataType::Int64, true),
    ]));
    let batch = RecordBatch::try_new(
        chunks.clone(),
        vec![
            Arc::new(StringArray::from(vec!["a"])),
            Arc::new(Int64Array::from(vec![1])),
        ],
    )
    .unwrap();
    db.create_table("chunks", batch).execute().await.unwrap();
    let err = Store::open(&uri).await.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, StoreError::ForeignSchema { .. }), "{msg}");
    assert!(msg.contains("table 'documents' is missing"), "{msg}");

    // A database with entirely different tables.
    let dir2 = tempfile::tempdir().unwrap();
    let uri2 = dir2.path().join("x.lancedb").to_string_lossy().into_owned();
    let db2 = lancedb::connect(&uri2).execute().await.unwrap();
    let s = Arc::new(Schema::new(vec![Field::new("x", DataType::Utf8, true)]));
    let batch = RecordBatch::try_new(s, vec![Arc::new(StringArray::from(vec!["a"]))]).unwrap();
    db2.create_table("vectors", batch).execute().await.unwrap();
    let msg = Store::open(&uri2).await.unwrap_err().to_string();
    assert!(
        msg.contains("vectors") && msg.contains("not a haiku.rag database"),
        "{msg}"
    );

    // A path with nothing at all.
    let err = Store::open(&dir.path().join("missing").to_string_lossy())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }));
}

#[tokio::test]
async fn full_schema_mismatch_names_the_column() {
    // All five tables exist but chunks.content_fts is missing and chunks.vector is 8-d
    // while settings claim 64.
    use arrow_array::{RecordBatch, StringArray};
    use groundwork::store::schema;
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("kb.lancedb").to_string_lossy().into_owned();
    let db = lancedb::connect(&uri).execute().await.unwrap();
    for t in schema::ALL_TABLES {
        let s = if t == schema::CHUNKS {
            let full = schema::chunks_schema(8);
            Arc::new(arrow_schema::Schema::new(
                full.fields()
                    .iter()
                    .filter(|f| f.name() != "content_fts")
                    .cloned()
                    .collect::<Vec<_>>(),
            ))
        } else {
            schema::expected(t, 8)
        };
        db.create_empty_table(t, s).execute().await.unwrap();
    }
    let settings = db.open_table("settings").execute().await.unwrap();
    let row = RecordBatch::try_new(
        schema::settings_schema(),
        vec![
            Arc::new(StringArray::from(vec!["settings"])),
            Arc::new(StringArray::from(vec![
                json!({"embeddings": {"model": {"provider": "openai", "name": "m", "vector_dim": 64}}}).to_string(),
            ])),
        ],
    )
    .unwrap();
    settings.add(row).execute().await.unwrap();
    let msg = Store::open(&uri).await.unwrap_err().to_string();
    assert!(
        msg.contains("'chunks' has no column 'content_fts'"),
        "{msg}"
    );
}

/// The knowledge base at a point of its history: a tag names every table's version (as
/// haiku.rag's `tag create` does, so each tool reads the other's tags); a store checked
/// out at a tag or at recorded versions reads what was there then and refuses writes in
/// one line; the newest versions are untouched.
#[tokio::test]
async fn tags_and_versions_pin_the_knowledge_base_and_haiku_rag_shares_the_tags() {
    let server = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store = new_store(dir.path(), &server.url).await;
    let uri = dir.path().join("kb.lancedb").to_string_lossy().into_owned();
    store.add_document(solar(), None).await.unwrap();
    let before = store.table_versions().await.unwrap();
    assert_eq!(
        before.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "chunks",
            "document_items",
            "document_meta",
            "documents",
            "settings"
        ]
    );
    assert_eq!(store.create_tag("v1").await.unwrap(), before);
    let refused = store.create_tag("v1").await.unwrap_err().to_string();
    assert_eq!(refused, "tag 'v1' already exists");
    let refused = store.create_tag("two words").await.unwrap_err().to_string();
    assert!(refused.contains("cannot be a tag"), "{refused}");
    // A moment between the two documents: `--at TIME` reads each table as it was then.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let between = chrono::Utc::now();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    store.add_document(battery(), None).await.unwrap();
    assert_ne!(store.table_versions().await.unwrap(), before);
    assert_eq!(store.versions_at(between).await.unwrap(), before);
    let long_ago = "2001-01-01T00:00:00Z"
        .parse::<chrono::DateTime<chrono::Utc>>()
        .unwrap();
    let refused = store.versions_at(long_ago).await.unwrap_err().to_string();
    assert!(
        refused.contains("had no table documents yet at 2001-01-01T00:00:00Z"),
        "{refused}"
    );

    let opened = |versions: Option<groundwork::store::versions::TableVersions>,
                  tag: Option<&'static str>| {
        let (uri, url) = (uri.clone(), server.url.clone());
        async move {
            let mut s = Store::open(&uri).await.unwrap();
            s.set_embedder(embed::build(&spec(&url, hashembed::DIM), &Default::default()).unwrap())
                .unwrap();
            match (versions, tag) {
                (Some(v), _) => s.check_out(&v).await.unwrap(),
                (None, Some(t)) => {
                    s.check_out_tag(t).await.unwrap();
                }
                _ => {}
            }
            s
        }
    };
    for at in [
        opened(None, Some("v1")).await,
        opened(Some(before.clone()), None).await,
    ] {
        let titles: Vec<_> = at
            .list_documents(None)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|d| d.title)
            .collect();
        assert_eq!(titles, ["Solar Panels"], "{:?}", at.pinned());
        assert_eq!(at.table_versions().await.unwrap(), before);
        let hits = at
            .search("lithium batteries at night", Some(5), None)
            .await
            .unwrap();
        assert!(
            hits.iter()
                .all(|h| h.document_title.as_deref() != Some("Battery Storage")),
            "a document added after the tag is not found at it"
        );
        let refused = at
            .add_document(battery(), None)
            .await
            .unwrap_err()
            .to_string();
        assert!(refused.contains("is open read-only at"), "{refused}");
        assert_eq!(refused.lines().count(), 1);
        let refused = at.delete_document("x").await.unwrap_err().to_string();
        assert!(refused.contains("read-only"), "{refused}");
    }
    // The newest versions are still the newest.
    assert_eq!(
        opened(None, None)
            .await
            .list_documents(None)
            .await
            .unwrap()
            .len(),
        2
    );
    let unknown = opened(None, None)
        .await
        .check_out_tag("v9")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        unknown.contains("has no tag 'v9' (its tags: v1)"),
        "{unknown}"
    );

    // haiku.rag 0.77 reads our tag, whole, at the same versions; we read the one it makes.
    let theirs = crate::support::run_haiku_script("haiku/tags.py", &[&uri, "create", "from-haiku"]);
    assert_eq!(theirs["v1"]["missing"], json!([]));
    let want: Map<String, Value> = before.iter().map(|(t, v)| (t.clone(), json!(v))).collect();
    assert_eq!(theirs["v1"]["tables"], Value::Object(want));
    let ours = store.tags().await.unwrap();
    let made = ours.iter().find(|t| t.name == "from-haiku").unwrap();
    assert!(made.complete());
    assert_eq!(made.tables, store.table_versions().await.unwrap());

    store.delete_tag("v1").await.unwrap();
    assert_eq!(
        store.delete_tag("v1").await.unwrap_err().to_string(),
        "there is no tag 'v1'"
    );
    let left = crate::support::run_haiku_script("haiku/tags.py", &[&uri, "list"]);
    assert_eq!(
        left.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["from-haiku"]
    );
}
