//! Retrieval quality on real manuals (issue 45): does search find the passage that answers
//! a question?
//!
//! `cargo bench --profile dev --bench retrieval` ingests libtasn1-doc's manual (the Debian
//! package: the 36-page PDF typeset by TeX and the gtk-doc HTML reference of the same API)
//! with the built `groundwork` binary into a fresh database, once per embedder, and asks
//! the questions of `benches/retrieval/libtasn1.toml` through `groundwork search --json`.
//! Each question names a phrase of the passage that answers it; a result answers it when
//! its text holds the phrase (lowercased, every run of characters other than letters and
//! digits one space). It reports, per embedder:
//!
//! - hit@1, hit@3, hit@5 and MRR (over the top 10) judged on the chunk itself (`--no-expand`,
//!   what the ranking found) and on the context-expanded result (what `rag_search` shows
//!   the model);
//! - how many phrases lie whole inside one stored chunk (the rest are cut by a chunk
//!   boundary: no chunk alone can answer them), and the chunks' sizes (how many are under
//!   60 characters, how many over 1,500: past what the embedder reads);
//! - the ingest time.
//!
//! Embedders: `test` (the deterministic hashembed-64 of the tests, served over HTTP on
//! 127.0.0.1) and `local` (Groundwork's embedded all-MiniLM-L6-v2, as `cargo run` uses it);
//! `GROUNDWORK_RETRIEVAL_EMBEDDERS=test` runs one. Each runs with both chunkers
//! (`[processing] chunker_type`: `hierarchical`, one chunk per item, and `hybrid`, chunks
//! sized for the embedder); `GROUNDWORK_RETRIEVAL_CHUNKERS=hybrid` runs one. Each question's ranks are written to
//! `retrieval-<embedder>-<chunker>.json` in the target's `tmp` folder so two runs (before and after a change to chunking or
//! search) can be compared question by question. The figures are in docs/PERFORMANCE.md.

#[path = "../tests/support/hashembed.rs"]
mod hashembed;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::Deserialize;
use serde_json::{Value, json};

const PDF: &str = "/usr/share/doc/libtasn1-doc/libtasn1.pdf";
const HTML: &str = "/usr/share/doc/libtasn1-doc/reference/libtasn1-libtasn1.html";
/// Results looked at per question (MRR counts a hit up to here).
const DEPTH: usize = 10;

#[derive(Debug, Deserialize)]
struct Cases {
    case: Vec<Case>,
}

#[derive(Debug, Deserialize)]
struct Case {
    doc: String,
    section: String,
    question: String,
    phrase: String,
}

/// Lowercased, every run of characters other than letters and digits one space.
fn normal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = true;
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            out.push(c);
            space = false;
        } else if !space {
            out.push(' ');
            space = true;
        }
    }
    out.trim_end().to_string()
}

/// The rank (1-based) of the first result whose `content` holds `phrase`.
fn rank(results: &[Value], phrase: &str) -> Option<usize> {
    results
        .iter()
        .position(|r| normal(r["content"].as_str().unwrap_or("")).contains(phrase))
        .map(|i| i + 1)
}

struct Figures {
    hit: [usize; 3],
    reciprocal: f64,
}

impl Figures {
    fn of(ranks: &[Option<usize>]) -> Figures {
        let at = |k: usize| ranks.iter().filter(|r| r.is_some_and(|r| r <= k)).count();
        Figures {
            hit: [at(1), at(3), at(5)],
            reciprocal: ranks.iter().flatten().map(|&r| 1.0 / r as f64).sum(),
        }
    }

    fn line(&self, n: usize) -> String {
        let pct = |k: usize| format!("{:.2}", k as f64 / n as f64);
        format!(
            "hit@1 {}  hit@3 {}  hit@5 {}  MRR {:.3}",
            pct(self.hit[0]),
            pct(self.hit[1]),
            pct(self.hit[2]),
            self.reciprocal / n as f64
        )
    }
}

struct Run {
    dir: tempfile::TempDir,
    flags: Vec<String>,
}

/// The config file of a run: the chunker, nothing else.
fn config_for(dir: &Path, chunker: &str) -> PathBuf {
    let path = dir.join("config.toml");
    std::fs::write(
        &path,
        format!("[processing]\nchunker_type = \"{chunker}\"\n"),
    )
    .unwrap();
    path
}

impl Run {
    fn db(&self) -> PathBuf {
        self.dir.path().join("kb.lancedb")
    }

    fn groundwork(&self, args: &[&str]) -> std::process::Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
        cmd.arg("--db")
            .arg(self.db())
            .args(&self.flags)
            .args(args)
            .env("GROUNDWORK_DISCOVER", "off")
            .env("GROUNDWORK_CONFIG", self.dir.path().join("config.toml"))
            .env_remove("GROUNDWORK_EMBED_URL")
            .env_remove("GROUNDWORK_EMBED_MODEL");
        // Blocking this worker only: the test embedder answers on the runtime's others.
        let out = tokio::task::block_in_place(|| cmd.output()).expect("groundwork runs");
        assert!(
            out.status.success(),
            "groundwork {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn search(&self, question: &str, expand: bool) -> Vec<Value> {
        let depth = DEPTH.to_string();
        let mut args = vec!["search", question, "--json", "--limit", &depth];
        if !expand {
            args.push("--no-expand");
        }
        let out = self.groundwork(&args);
        serde_json::from_slice::<Value>(&out.stdout)
            .expect("search --json")
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

async fn measure(name: &str, chunker: &str, cases: &[Case], flags: Vec<String>) -> Value {
    let run = Run {
        dir: tempfile::tempdir().unwrap(),
        flags,
    };
    config_for(run.dir.path(), chunker);
    let started = Instant::now();
    run.groundwork(&["ingest", PDF, HTML]);
    let ingest_s = started.elapsed().as_secs_f64();

    // The stored chunks, read straight from the database.
    let store = groundwork::store::Store::open(run.db().to_str().unwrap())
        .await
        .expect("the database just made");
    let mut chunks: Vec<(String, String)> = Vec::new();
    for d in store.list_documents(None).await.unwrap() {
        let uri = d.uri.clone().unwrap_or_default();
        let doc = if uri.ends_with(".pdf") { "pdf" } else { "html" };
        for c in store.chunks_of(&d.id).await.unwrap() {
            chunks.push((doc.to_string(), c.content));
        }
    }
    let lengths: Vec<usize> = chunks.iter().map(|(_, c)| c.chars().count()).collect();
    let tiny = lengths.iter().filter(|&&l| l < 60).count();
    let long = lengths.iter().filter(|&&l| l > 1500).count();
    let per_doc = |doc: &str| {
        let of: Vec<usize> = chunks
            .iter()
            .filter(|(d, _)| d == doc)
            .map(|(_, c)| c.chars().count())
            .collect();
        let small = of.iter().filter(|&&l| l < 60).count();
        format!("{doc} {} ({small} under 60)", of.len())
    };
    let mut sorted = lengths.clone();
    sorted.sort_unstable();
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0);

    let mut per_case = Vec::new();
    let (mut raw, mut expanded) = (Vec::new(), Vec::new());
    let mut whole = 0;
    for c in cases {
        let phrase = normal(&c.phrase);
        let inside = chunks
            .iter()
            .any(|(doc, text)| *doc == c.doc && normal(text).contains(&phrase));
        whole += usize::from(inside);
        let r = rank(&run.search(&c.question, false), &phrase);
        let e = rank(&run.search(&c.question, true), &phrase);
        raw.push(r);
        expanded.push(e);
        per_case.push(json!({
            "question": c.question,
            "doc": c.doc,
            "section": c.section,
            "in_one_chunk": inside,
            "rank_chunk": r,
            "rank_expanded": e,
        }));
    }
    let n = cases.len();
    println!(
        "embedder {name}, chunker {chunker}: {} chunks ({}, {}), ingest {ingest_s:.1} s",
        chunks.len(),
        per_doc("pdf"),
        per_doc("html")
    );
    println!(
        "  chunks: median {median} chars, {tiny} under 60, {long} over 1,500; phrases inside one chunk: {whole}/{n}"
    );
    println!("  the chunk itself   {}", Figures::of(&raw).line(n));
    println!("  expanded context   {}", Figures::of(&expanded).line(n));
    let out =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("retrieval-{name}-{chunker}.json"));
    let record = json!({
        "embedder": name,
        "chunker": chunker,
        "chunks": chunks.len(),
        "ingest_s": ingest_s,
        "median_chars": median,
        "under_60": tiny,
        "over_1500": long,
        "in_one_chunk": whole,
        "cases": per_case,
    });
    std::fs::write(&out, serde_json::to_string_pretty(&record).unwrap()).unwrap();
    println!("  per question: {}", out.display());
    record
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; there is nothing to filter.
    for path in [PDF, HTML] {
        assert!(
            Path::new(path).is_file(),
            "{path} is missing: install the Debian package libtasn1-doc (.ci/setup-tests does)"
        );
    }
    let cases: Cases = toml::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/retrieval/libtasn1.toml"),
        )
        .unwrap(),
    )
    .expect("benches/retrieval/libtasn1.toml");
    let wanted =
        std::env::var("GROUNDWORK_RETRIEVAL_EMBEDDERS").unwrap_or_else(|_| "test,local".into());
    println!(
        "{} questions over libtasn1-doc's manual (PDF and HTML), top {DEPTH}",
        cases.case.len()
    );
    let chunkers = std::env::var("GROUNDWORK_RETRIEVAL_CHUNKERS")
        .unwrap_or_else(|_| "hierarchical,hybrid".into());
    for (name, chunker) in wanted.split(',').map(str::trim).flat_map(|n| {
        chunkers
            .split(',')
            .map(str::trim)
            .map(move |c| (n, c))
            .collect::<Vec<_>>()
    }) {
        match name {
            "test" => {
                let embed = hashembed::start().await;
                let flags = vec![
                    "--embed-url".to_string(),
                    embed.url.clone(),
                    "--embed-model".into(),
                    hashembed::MODEL.into(),
                ];
                // The commands run while the embedder answers on this runtime's threads.
                let cases = &cases.case;
                measure("test", chunker, cases, flags).await;
            }
            "local" => {
                measure("local", chunker, &cases.case, Vec::new()).await;
            }
            other => panic!("unknown embedder '{other}' (test or local)"),
        }
    }
}
