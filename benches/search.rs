//! Hybrid-search latency over a 50,000-chunk knowledge base against the engine's floor, and
//! ingestion throughput.
//!
//! `cargo bench --bench search` builds (once, cached under the target dir) a database of
//! 50,000 chunks written through `Store::add_document`, embedded by the deterministic
//! "hashembed-64" model served over HTTP on 127.0.0.1 (the same client path as any
//! OpenAI-compatible endpoint), with the FTS and IVF-PQ indexes Groundwork builds. It prints
//! ingestion throughput (chunks/s), then p50/p95 over the same 200 queries (two passes,
//! interleaved query by query so both see the same machine; the second pass is reported,
//! the first only for Groundwork, as its caches fill) of:
//!
//! - the floor: LanceDB's own vector query (after embedding the query over HTTP) and its
//!   full-text query, run concurrently on the chunks table, selecting the columns a result
//!   needs — what any hybrid search on this engine must at least spend;
//! - Groundwork's hybrid search (`Store::search`: both legs, RRF, documents' metadata,
//!   picture lookup), and the ratio to the floor.
//!
//! - the same search with a reranker configured: a local rerank server on 127.0.0.1 that
//!   answers at once (the scripted one of the tests), so what it adds is Groundwork's side of
//!   reranking — `limit * 10` candidates from each leg, their metadata, one HTTP round trip,
//!   the reordering — not a model's inference.
//!
//! Then criterion times the floor (group `search_floor`) and the searches (group `search`).
//! `benches/compare_search.sh` runs this and haiku.rag 0.77 on the same database.

#[path = "../tests/support/hashembed.rs"]
mod hashembed;
#[path = "../tests/support/rerank_server.rs"]
#[allow(dead_code)] // the bench uses the deterministic reordering only
mod rerank_server;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use futures::TryStreamExt;
use groundwork::config::{RerankerConfig, SearchConfig};
use groundwork::embed::{self, Embedder, EmbedderSpec};
use groundwork::store::{NewChunk, NewDocument, Store};
use lancedb::index::scalar::FullTextSearchQuery;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
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
    // `GROUNDWORK_BENCH_EMBED_URL`: a hashembed-64 endpoint to use instead of the in-process
    // one (compare_search.sh points this run and haiku.rag's at the same server).
    let (_server, url) = match std::env::var("GROUNDWORK_BENCH_EMBED_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let server = rt.block_on(hashembed::start());
            let url = server.url.clone();
            (Some(server), url)
        }
    };
    let spec = EmbedderSpec {
        provider: "openai".into(),
        name: hashembed::MODEL.into(),
        vector_dim: hashembed::DIM,
        base_url: Some(url),
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

    let embedder = store.embedder().unwrap().clone();
    let table = rt.block_on(async {
        lancedb::connect(&uri)
            .execute()
            .await
            .unwrap()
            .open_table("chunks")
            .execute()
            .await
            .unwrap()
    });

    let queries: Vec<String> = (0..200).map(|i| text(1_000_000 + i, 4)).collect();
    println!("first query: {:?}", queries[0]);
    // First pass: the store's caches fill (documents' metadata is read once per document).
    let (mut floor_times, mut gw_times) = (Vec::new(), Vec::new());
    let mut first_pass = Vec::new();
    for pass in 0..2 {
        for (n, q) in queries.iter().enumerate() {
            // Alternate which goes first, so neither always runs on a warmer engine.
            let f_first = (n + pass) % 2 == 0;
            if f_first {
                let f = time(|| rt.block_on(floor(&table, embedder.as_ref(), q)));
                if pass == 1 {
                    floor_times.push(f);
                }
            }
            let t = Instant::now();
            let r = rt.block_on(store.search(q, Some(5), None)).unwrap();
            let e = t.elapsed();
            assert!(!r.is_empty());
            if pass == 0 {
                first_pass.push(e);
            } else {
                gw_times.push(e);
            }
            if !f_first {
                let f = time(|| rt.block_on(floor(&table, embedder.as_ref(), q)));
                if pass == 1 {
                    floor_times.push(f);
                }
            }
        }
    }
    for v in [&mut floor_times, &mut gw_times, &mut first_pass] {
        v.sort();
    }
    let ms = |v: &[Duration], p: f64| percentile(v, p).as_secs_f64() * 1e3;
    println!(
        "floor (LanceDB vector + full-text queries concurrently, query embedded over HTTP) over {CHUNKS} chunks, limit 5, {} queries: p50 {:.2} ms, p95 {:.2} ms",
        floor_times.len(),
        ms(&floor_times, 0.5),
        ms(&floor_times, 0.95),
    );
    println!(
        "hybrid search over {CHUNKS} chunks, limit 5, {} queries: p50 {:.2} ms, p95 {:.2} ms ({:.2}x the floor's p50); first pass, caches filling: p50 {:.2} ms",
        gw_times.len(),
        ms(&gw_times, 0.5),
        ms(&gw_times, 0.95),
        ms(&gw_times, 0.5) / ms(&floor_times, 0.5),
        ms(&first_pass, 0.5),
    );

    // The same base through a second store handle with a reranker, interleaved with the
    // plain search (one warm-up pass, then the reported one).
    let reranker = rt.block_on(rerank_server::RerankServer::start(
        rerank_server::Behaviour::Reverse,
    ));
    let reranked = rt.block_on(async {
        let mut s = Store::open(&uri).await.unwrap();
        s.set_embedder(embedder.clone()).unwrap();
        s.set_search_config(SearchConfig {
            reranker: Some(RerankerConfig::new(reranker.url.clone())),
            ..store.search_config().clone()
        });
        s
    });
    let (mut plain_times, mut rr_times, mut wide_times) = (Vec::new(), Vec::new(), Vec::new());
    for pass in 0..2 {
        for q in &queries {
            let p = time(|| rt.block_on(store.search(q, Some(5), None)).unwrap().len());
            // The reranker's candidates without the reranker: a plain search for 50.
            let w = time(|| rt.block_on(store.search(q, Some(50), None)).unwrap().len());
            let r = time(|| {
                let (hits, report) = rt
                    .block_on(reranked.search_reported(
                        q,
                        Some(5),
                        None,
                        groundwork::store::search::SearchMode::Hybrid,
                    ))
                    .unwrap();
                let report = report.expect("the reranker was asked");
                assert!(report.warning.is_none(), "{:?}", report.warning);
                hits.len()
            });
            if pass == 1 {
                plain_times.push(p);
                rr_times.push(r);
                wide_times.push(w);
            }
        }
    }
    plain_times.sort();
    rr_times.sort();
    wide_times.sort();
    println!(
        "with a reranker (local rerank server answering at once; 50 candidates per leg, one HTTP round trip), limit 5, {} queries: p50 {:.2} ms, p95 {:.2} ms; hybrid search beside it p50 {:.2} ms: the reranker adds {:.2} ms ({:.2}x)",
        rr_times.len(),
        ms(&rr_times, 0.5),
        ms(&rr_times, 0.95),
        ms(&plain_times, 0.5),
        ms(&rr_times, 0.5) - ms(&plain_times, 0.5),
        ms(&rr_times, 0.5) / ms(&plain_times, 0.5),
    );
    println!(
        "of which the 10x candidates alone (a plain hybrid search for 50): p50 {:.2} ms, so the rerank request and reordering take {:.2} ms",
        ms(&wide_times, 0.5),
        ms(&rr_times, 0.5) - ms(&wide_times, 0.5),
    );

    let mut group = c.benchmark_group("search_floor");
    group.sample_size(50);
    let mut i = 0usize;
    group.bench_function("vector_fts_embed_50k_limit5", |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            rt.block_on(floor(&table, embedder.as_ref(), &queries[i]))
        })
    });
    group.finish();

    let mut group = c.benchmark_group("search");
    group.sample_size(50);
    group.bench_function("hybrid_50k_limit5", |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            rt.block_on(store.search(&queries[i], Some(5), None))
                .unwrap()
        })
    });
    group.bench_function("hybrid_reranked_50k_limit5", |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            rt.block_on(reranked.search(&queries[i], Some(5), None))
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

fn time(f: impl FnOnce() -> usize) -> Duration {
    let t = Instant::now();
    let rows = f();
    let e = t.elapsed();
    assert!(rows > 0, "the floor found nothing");
    e
}

/// The columns a search result is built from (what `Store::search` selects).
const COLUMNS: [&str; 6] = [
    "id",
    "document_id",
    "content",
    "content_fts",
    "metadata",
    "order",
];

/// The engine's floor for one hybrid query: embed the query, then LanceDB's vector query,
/// concurrently with its full-text query, each fetching `limit` rows of [`COLUMNS`]; the
/// batches are collected and nothing else is done with them. Returns the rows found.
async fn floor(table: &lancedb::Table, embedder: &dyn Embedder, query: &str) -> usize {
    let limit = 5;
    let vector = async {
        let v = embedder
            .embed(&[query.to_string()])
            .await
            .unwrap()
            .pop()
            .unwrap();
        let q = table
            .query()
            .nearest_to(v.as_slice())
            .unwrap()
            .column("vector")
            .refine_factor(SearchConfig::default().vector_refine_factor)
            .select(Select::columns(&COLUMNS))
            .limit(limit);
        q.execute().await?.try_collect::<Vec<_>>().await
    };
    let fts = async {
        let q = table
            .query()
            .full_text_search(
                FullTextSearchQuery::new(query.to_string())
                    .with_column("content_fts".to_string())
                    .unwrap(),
            )
            .select(Select::columns(&COLUMNS))
            .limit(limit);
        q.execute().await?.try_collect::<Vec<_>>().await
    };
    let (v, f) = futures::try_join!(vector, fts).unwrap();
    v.iter().chain(&f).map(|b| b.num_rows()).sum()
}

criterion_group!(benches, bench);
criterion_main!(benches);
