//! The local embedder against sentence-transformers, side by side on the same machine,
//! texts, model files and batch size (issue 45).
//!
//! `cargo bench --bench embed_compare` (add `--profile dev` for the build `cargo run`
//! makes). The texts are what `ingest` embeds for libtasn1-doc's manual (the PDF and the
//! HTML reference: each chunk with its headings). Groundwork's `LocalEmbedder` and
//! sentence-transformers (torch, CPU, two threads; `benches/embed/st_encode.py`
//! in the venv at `GROUNDWORK_ST_VENV`, default `~/.cache/groundwork-st-venv`: `python3 -m
//! venv` it and `pip install torch sentence-transformers`) each embed every text after one
//! warm-up batch, at batch 64 and 32 (both embedders' default); then
//! again while another CPU-bound process runs (contention: throughput should fall in
//! proportion, not collapse). Prints texts per second and the ratio, and checks that both
//! give the same vectors (cosine ≥ 0.999 on the first five).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use groundwork::embed::local::{LocalEmbedder, ModelSource, locate_model};
use serde_json::Value;

const DOCS: [&str; 2] = [
    "/usr/share/doc/libtasn1-doc/libtasn1.pdf",
    "/usr/share/doc/libtasn1-doc/reference/libtasn1-libtasn1.html",
];

/// What `ingest` embeds for the manual: each chunk's text with its headings.
fn texts() -> Vec<String> {
    let mut out = Vec::new();
    for doc in DOCS {
        assert!(
            Path::new(doc).is_file(),
            "{doc} is missing: install the Debian package libtasn1-doc (.ci/setup-tests does)"
        );
        let parsed = groundwork::ingest::parse_file(Path::new(doc)).expect("the manual parses");
        let options = groundwork::ingest::ChunkOptions {
            picture_chunks: false,
            ..Default::default()
        };
        out.extend(
            groundwork::ingest::chunk(&parsed, &options)
                .into_iter()
                .map(|c| c.content_fts),
        );
    }
    out
}

fn ours(model: &LocalEmbedder, texts: &[String], batch: usize) -> (f64, Vec<Vec<f32>>) {
    let model = model.clone().with_batch_size(batch);
    model
        .embed_blocking(&texts[..batch.min(texts.len())])
        .unwrap();
    let started = Instant::now();
    let vectors = model.embed_blocking(texts).unwrap();
    (
        texts.len() as f64 / started.elapsed().as_secs_f64(),
        vectors,
    )
}

fn theirs(python: &Path, model_dir: &Path, texts: &Path, batch: usize) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/embed/st_encode.py");
    let out = Command::new(python)
        .arg(script)
        .arg(model_dir)
        .arg(texts)
        .arg(batch.to_string())
        .arg("2")
        .env("TOKENIZERS_PARALLELISM", "false")
        .output()
        .expect("the sentence-transformers venv's python runs");
    assert!(
        out.status.success(),
        "sentence-transformers failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("its JSON line")
}

fn cosine(a: &[f32], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * y).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// Another CPU-bound process, for as long as it is held.
struct Busy(std::process::Child);

impl Busy {
    fn start() -> Busy {
        Busy(
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .expect("sh"),
        )
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let venv = std::env::var("GROUNDWORK_ST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            Path::new(&std::env::var("HOME").unwrap_or_default()).join(".cache/groundwork-st-venv")
        });
    let python = venv.join("bin/python");
    assert!(
        python.is_file(),
        "{} is missing: python3 -m venv {} && {}/bin/pip install torch sentence-transformers",
        python.display(),
        venv.display(),
        venv.display()
    );
    let model_dir = locate_model(&ModelSource::from_env())
        .expect("the model's files")
        .expect(
            "all-MiniLM-L6-v2's files (run groundwork once, or set GROUNDWORK_EMBED_MODEL_DIR)",
        );
    let model = LocalEmbedder::load(&model_dir).expect("the local embedder loads");
    let texts = texts();
    let dir = tempfile::tempdir().unwrap();
    let texts_path = dir.path().join("texts.json");
    std::fs::write(&texts_path, serde_json::to_string(&texts).unwrap()).unwrap();
    let chars: usize = texts.iter().map(|t| t.chars().count()).sum();
    println!(
        "{} texts of libtasn1-doc's manual, {} characters on average; profile {}",
        texts.len(),
        chars / texts.len().max(1),
        if cfg!(debug_assertions) {
            "dev"
        } else {
            "release"
        }
    );
    for contended in [false, true] {
        let _busy = contended.then(Busy::start);
        let when = if contended {
            "beside another CPU-bound process"
        } else {
            "alone"
        };
        for batch in [64, 32] {
            let (rate, vectors) = ours(&model, &texts, batch);
            let st = theirs(&python, &model_dir, &texts_path, batch);
            let st_rate = st["per_s"].as_f64().unwrap();
            let first: Vec<Vec<f64>> = serde_json::from_value(st["first"].clone()).unwrap();
            let worst = first
                .iter()
                .zip(&vectors)
                .map(|(b, a)| cosine(a, b))
                .fold(1.0f64, f64::min);
            assert!(worst > 0.999, "the two embedders disagree: cosine {worst}");
            println!(
                "  {when}, batch {batch}: Groundwork {rate:.1} texts/s, sentence-transformers {st_rate:.1} texts/s (torch {}): {:.2}x",
                st["torch"].as_str().unwrap_or("?"),
                rate / st_rate
            );
        }
    }
}
