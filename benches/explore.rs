//! The knowledge-base explorer's store reads over a 1,000-document, 10,000-chunk base:
//! a batch of 50 documents at the start and at the end of the list (the cost of a batch
//! must not grow with its offset much), a filtered batch (warm, and cold: the first after
//! opening the store), a document's details (chunks in
//! order, pages, picture count) and one chunk's agent context (expanded, rendered).
//!
//! `cargo bench --bench explore` builds the base once (cached under the target dir),
//! embedded by the deterministic "hashembed-64" model over HTTP on 127.0.0.1.

#[path = "../tests/support/hashembed.rs"]
mod hashembed;

use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};
use groundwork::embed::{self, EmbedderSpec};
use groundwork::host::explore;
use groundwork::store::{NewChunk, NewDocument, Store};
use serde_json::json;

const DOCS: usize = 1_000;
const PER_DOC: usize = 10;

fn document(d: usize) -> NewDocument {
    let chunks = (0..PER_DOC)
        .map(|i| {
            let content = format!("Manual {d}, part {i}: the inverter and the battery bank.");
            NewChunk {
                content_fts: content.clone(),
                content,
                metadata: json!({"doc_item_refs": [format!("#/texts/{i}")], "headings": [format!("Part {i}")], "labels": ["text"], "page_numbers": [i / 3 + 1]}),
                order: i as i64,
            }
        })
        .collect();
    NewDocument {
        uri: Some(format!("bench://doc-{d}")),
        // Every tenth is a "Service" manual: the filtered batch's matches.
        title: Some(if d.is_multiple_of(10) {
            format!("Service manual {d}")
        } else {
            format!("Manual {d}")
        }),
        metadata: serde_json::Map::new(),
        content: String::new(),
        docling_document: json!({}),
        pages: vec![],
        items: vec![],
        chunks,
    }
}

fn db_path() -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    PathBuf::from(target).join(format!("bench-data/explore-{DOCS}.lancedb"))
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(hashembed::start());
    let spec = EmbedderSpec {
        provider: "openai".into(),
        name: hashembed::MODEL.into(),
        vector_dim: hashembed::DIM,
        base_url: Some(server.url.clone()),
    };
    let path = db_path();
    let uri = path.to_string_lossy().into_owned();
    let store = rt.block_on(async {
        let fresh = Store::open(&uri).await.is_err();
        if fresh {
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        }
        let mut store = Store::open_or_create(&uri, &spec).await.unwrap();
        store
            .set_embedder(embed::build(&spec, &Default::default()).unwrap())
            .unwrap();
        if fresh {
            for d in 0..DOCS {
                store.add_document(document(d), None).await.unwrap();
            }
            store.ensure_indexes().await.unwrap();
        }
        store
    });
    assert_eq!(rt.block_on(store.count_documents()).unwrap(), DOCS);
    let last = DOCS - explore::DOCUMENT_BATCH;
    // The filtered batch is the first 50 "Service" manuals, in the order they were added.
    let service = rt
        .block_on(explore::documents(&store, "SERVICE", 0))
        .unwrap();
    let titles: Vec<String> = service.iter().filter_map(|d| d.title.clone()).collect();
    let want: Vec<String> = (0..50)
        .map(|k| format!("Service manual {}", k * 10))
        .collect();
    assert_eq!(titles, want);
    let doc = rt.block_on(explore::documents(&store, "", last)).unwrap()[0]
        .id
        .clone();
    let chunk = rt.block_on(explore::document(&store, &doc)).unwrap().chunks[PER_DOC / 2]
        .id()
        .to_string();

    let mut group = c.benchmark_group("explore");
    group.sample_size(30);
    group.bench_function("first_batch_of_50", |b| {
        b.iter(|| rt.block_on(explore::documents(&store, "", 0)).unwrap())
    });
    group.bench_function("last_batch_of_50_of_1000", |b| {
        b.iter(|| rt.block_on(explore::documents(&store, "", last)).unwrap())
    });
    // The filter box asks again on every key: the rows are read once per table version,
    // then matched in memory (warm); the first filtered read after opening, or after a
    // write, scans the table once (cold: a store opened afresh, the open measured alone
    // beside it).
    group.bench_function("filtered_batch_service", |b| {
        b.iter(|| {
            rt.block_on(explore::documents(&store, "service", 0))
                .unwrap()
        })
    });
    group.bench_function("filtered_batch_service_cold", |b| {
        b.iter(|| {
            rt.block_on(async {
                let fresh = Store::open(&uri).await.unwrap();
                explore::documents(&fresh, "service", 0).await.unwrap()
            })
        })
    });
    group.bench_function("store_open", |b| {
        b.iter(|| rt.block_on(Store::open(&uri)).unwrap())
    });
    group.bench_function("document_detail_10_chunks", |b| {
        b.iter(|| rt.block_on(explore::document(&store, &doc)).unwrap())
    });
    group.bench_function("agent_context", |b| {
        b.iter(|| {
            rt.block_on(explore::agent_context(&store, &chunk, 1, 1, 0.0, false))
                .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
