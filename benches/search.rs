//! Hybrid-search latency over a 50,000-chunk knowledge base, and ingestion throughput.
//!
//! `cargo bench --bench search` builds (once, cached under the target dir) a database of
//! 50,000 chunks written through `Store::add_document`, embedded by the deterministic
//! "hashembed-64" model served over HTTP on 127.0.0.1 (the same client path as any
//! OpenAI-compatible endpoint), with the FTS and IVF-PQ indexes Groundwork builds. It prints
//! ingestion throughput (chunks/s) and p50/p95 of hybrid search (vector + BM25 + RRF,
//! query embedding included) over 200 queries, then hands the same search to criterion.

#[path = "../tests/support/hashembed.rs"]
mod hashembed;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use groundwork::embed::{self, EmbedderSpec};
use groundwork::store::{NewChunk, NewDocument, Store};
use serde_json::json;

const CHUNKS: usize = 50_000;
const PER_DOC: usize = 100;

const WORDS: &[&str] = &[
    "solar", "panel", "inverter", "battery", "charge", "voltage", "current", "roof", "angle",
    "shade", "cable", "fuse", "meter", "grid", "export", "import", "winter", "summer", "clean",
    "glass", "frame", "mount", "bolt", "wind", "snow", "rain", "heat", "cell", "module", "string",
    "diode", "bypass", "tilt", "azimuth", "yield", "kilowatt", "hour", "storage", "lithium",
    "cycle", "warranty", "install", "inspect", "repair", "safety", "earth", "breaker", "display",
    "monitor", "log", "fault", "alarm", "reset", "firmware", "update", "network", "sensor",
];

/// Deterministic pseudo-random text: a small LCG over a fixed vocabulary.
fn text(seed: u64, words: usize) -> String {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut out = Vec::with_capacity(words);
    for _ in 0..words {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        out.push(WORDS[(x >> 33) as usize % WORDS.len()]);
    }
    out.join(" ")
}

fn document(d: usize) -> NewDocument {
    let chunks = (0..PER_DOC)
        .map(|i| {
            let content = text((d * PER_DOC + i) as u64, 60);
            let heading = format!("Section {}", i / 10);
            NewChunk {
                content_fts: format!("{heading}\n{content}"),
                content,
                metadata: json!({"doc_item_refs": [format!("#/texts/{i}")], "headings": [heading], "labels": ["text"], "page_numbers": []}),
                order: i as i64,
            }
        })
        .collect();
    NewDocument {
        uri: Some(format!("bench://doc-{d}")),
        title: Some(format!("Manual {d}")),
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
    PathBuf::from(target).join(format!("bench-data/search-{CHUNKS}.lancedb"))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
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
            let t = Instant::now();
            for d in 0..CHUNKS / PER_DOC {
                store.add_document(document(d), None).await.unwrap();
            }
            let write = t.elapsed();
            let ti = Instant::now();
            store.ensure_indexes().await.unwrap();
            let index = ti.elapsed();
            println!(
                "ingest: {CHUNKS} chunks written in {:.1}s ({:.0} chunks/s incl. embedding over HTTP); indexes (FTS, BTree, IVF-PQ) in {:.1}s; overall {:.0} chunks/s",
                write.as_secs_f64(),
                CHUNKS as f64 / write.as_secs_f64(),
                index.as_secs_f64(),
                CHUNKS as f64 / (write + index).as_secs_f64(),
            );
        }
        store
    });
    assert_eq!(rt.block_on(store.count_chunks()).unwrap(), CHUNKS);

    let queries: Vec<String> = (0..200).map(|i| text(1_000_000 + i, 4)).collect();
    let mut times = Vec::with_capacity(queries.len());
    for q in &queries {
        let t = Instant::now();
        let r = rt.block_on(store.search(q, Some(5), None)).unwrap();
        times.push(t.elapsed());
        assert!(!r.is_empty());
    }
    times.sort();
    println!(
        "hybrid search over {CHUNKS} chunks, limit 5, {} queries: p50 {:.2} ms, p95 {:.2} ms",
        times.len(),
        percentile(&times, 0.50).as_secs_f64() * 1e3,
        percentile(&times, 0.95).as_secs_f64() * 1e3,
    );

    let mut group = c.benchmark_group("search");
    group.sample_size(50);
    let mut i = 0usize;
    group.bench_function("hybrid_50k_limit5", |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            rt.block_on(store.search(&queries[i], Some(5), None))
                .unwrap()
        })
    });
    group.bench_function("hybrid_expanded_50k_limit5", |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            rt.block_on(store.search_expanded(&queries[i], Some(5), None))
                .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
