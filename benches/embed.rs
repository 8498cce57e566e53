//! Throughput of the local all-MiniLM-L6-v2 embedder: sentences per second at batch 64.
//!
//! Needs the model files locally (GROUNDWORK_EMBED_MODEL_DIR or the data dir cache); without
//! them it prints a notice and measures nothing. Run with `cargo bench --bench embed`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use groundwork::embed::local::{LocalEmbedder, ModelSource, locate_model};

const WORDS: &[&str] = &[
    "retrieval",
    "augmented",
    "generation",
    "combines",
    "a",
    "search",
    "step",
    "with",
    "language",
    "model",
    "the",
    "knowledge",
    "base",
    "holds",
    "chunks",
    "of",
    "documents",
    "and",
    "each",
    "chunk",
    "has",
    "vector",
    "for",
    "nearest",
    "neighbour",
    "queries",
    "over",
    "lance",
    "tables",
    "answers",
    "cite",
    "their",
    "sources",
    "carefully",
];

/// 64 deterministic sentences of 5–30 words (like the probe in MODELS.md §B.2).
fn sentences() -> Vec<String> {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    (0..64)
        .map(|_| {
            let n = 5 + (next() % 26) as usize;
            let words: Vec<&str> = (0..n)
                .map(|_| WORDS[(next() % WORDS.len() as u64) as usize])
                .collect();
            format!("{}.", words.join(" "))
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut src = ModelSource::from_env();
    src.allow_download = false;
    let Ok(Some(dir)) = locate_model(&src) else {
        eprintln!(
            "SKIPPED: all-MiniLM-L6-v2 files not available locally; set GROUNDWORK_EMBED_MODEL_DIR"
        );
        return;
    };
    let model = LocalEmbedder::load(&dir)
        .expect("load model")
        .with_batch_size(64);
    let texts = sentences();
    let mut group = c.benchmark_group("local_embedder");
    group.throughput(Throughput::Elements(texts.len() as u64));
    group.sample_size(10);
    group.measurement_time(std::time::Duration::from_secs(12));
    group.bench_function("all-MiniLM-L6-v2/batch64", |b| {
        b.iter(|| model.embed_blocking(&texts).expect("embed"))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
