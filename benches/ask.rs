//! `groundwork ask --session S.sqlite` wall time, the real binary against the scripted
//! OpenAI-compatible server (tests/support), on a session of one question and on one of
//! 500 (`GROUNDWORK_BENCH_QUESTIONS`). Each question is search → cite → answer over a
//! small knowledge base (tests/fixtures/ingest/sample.md, embedded over HTTP by the
//! hashembed test model), with compaction and the policy on, as a user runs it. The long
//! session is built by asking its questions one by one through the same binary and is
//! kept under the target directory for later runs (a question short: the bench copies
//! it and asks its last question there, unmeasured, as the `ask` before a user's next
//! one leaves a session: with its resume row for that very commit). Each measured `ask`
//! starts from that saved session (the file written back over itself, synced to disk).
//! The two sessions are asked alternately, so that the machine's drift falls on both
//! alike; the bench prints the mean and median wall time of each, their ratios and the
//! difference, and the floor any `ask` that reads the whole history pays: reading every
//! message row of the long session without building anything. Where the time goes,
//! phase by phase: each `ask` logs it with
//! `GROUNDWORK_LOG=warn,groundwork::timing=debug` (see `src/timing.rs`), into the log of
//! the bench's temporary home: to keep it, run the bench with its binary replaced by a
//! script that sets `XDG_DATA_HOME` and starts the real one.
//!
//! `cargo bench --bench ask`

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

#[path = "../tests/support/hashembed.rs"]
mod hashembed;
#[allow(dead_code)]
#[path = "../tests/support/scripted_server.rs"]
mod scripted_server;

use scripted_server::{Reply, ScriptedServer};

fn questions() -> usize {
    std::env::var("GROUNDWORK_BENCH_QUESTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

struct Bench {
    home: PathBuf,
    db: String,
    embed: hashembed::EmbedServer,
    server: ScriptedServer,
    chunks: Vec<String>,
}

impl Bench {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
        cmd.args(["--db", &self.db, "--embed-url", &self.embed.url])
            .args(["--embed-model", hashembed::MODEL])
            .args(args)
            .env("HOME", &self.home)
            .env("XDG_DATA_HOME", self.home.join("data"))
            .env("XDG_CONFIG_HOME", self.home.join("config"))
            .env("OPENAI_API_KEY", "sk-bench")
            .env("GROUNDWORK_DISCOVER", "off")
            .env_remove("HAIKU_RAG_DB")
            .env_remove("GROUNDWORK_MODEL_URL")
            .env_remove("GROUNDWORK_MODEL")
            .env_remove("GROUNDWORK_EMBED_URL")
            .env_remove("GROUNDWORK_EMBED_MODEL");
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        let o = self.command(args).output().expect("run groundwork");
        assert!(
            o.status.success(),
            "groundwork {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }

    /// Question `q`'s replies: search, cite one of the chunks, answer.
    fn script(&self, q: usize) {
        let chunk = &self.chunks[q % self.chunks.len()];
        self.server.push(Reply::tool_call(
            "rag_search",
            json!({"query": format!("question {q}: the operator log"), "limit": 3}),
        ));
        self.server
            .push(Reply::tool_call("rag_cite", json!({"chunk_ids": [chunk]})));
        self.server.push(Reply::text(format!(
            "Answer {q}: the log says so [{chunk}]."
        )));
    }

    fn ask(&self, session: &Path, q: usize) -> Output {
        self.script(q);
        let url = self.server.base_url();
        self.run(&[
            "--session",
            session.to_str().unwrap(),
            "--model-url",
            &url,
            "--model",
            "scripted",
            "ask",
            &format!("Question {q}: what does the operator log say?"),
        ])
    }
}

/// A session of `n` questions asked through the binary (kept in `dir` for later runs of
/// the same session format: a kept session of an older one would be rewritten whole by
/// every measured `ask`).
fn session_of(b: &Bench, dir: &Path, n: usize) -> PathBuf {
    let path = dir.join(format!("session-{n}.sqlite"));
    let done = dir.join(format!(
        "session-{n}.done-v{}-sqlite",
        groundwork::session::SESSION_FORMAT_VERSION
    ));
    if done.exists() && path.exists() {
        return path;
    }
    let _ = std::fs::remove_file(&path);
    let start = Instant::now();
    for q in 0..n {
        b.ask(&path, q);
        if (q + 1) % 50 == 0 {
            eprintln!("built {} of {n} questions in {:?}", q + 1, start.elapsed());
        }
    }
    std::fs::write(&done, "").unwrap();
    path
}

/// Writes `bytes` over `path` and waits until it is on disk, outside the measured time:
/// a user's session is on disk before the next `ask`, since the `ask` that wrote it
/// synced it. Left unsynced, the measured `ask`'s own commit would write the whole copy
/// first.
fn write_synced(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.sync_all().unwrap();
}

fn ask(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let n = questions();
    // The knowledge base and the long session are kept: building them takes minutes.
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("ask-bench-{n}"));
    std::fs::create_dir_all(&keep).unwrap();
    let home = tempfile::tempdir().unwrap();
    let (embed, server) = rt.block_on(async {
        (
            hashembed::start().await,
            ScriptedServer::start(Vec::new()).await,
        )
    });
    // The bench reads no request back: the server reads each body through and keeps none.
    server.forget_requests();
    let mut b = Bench {
        home: home.path().to_path_buf(),
        db: keep.join("kb.lancedb").to_str().unwrap().to_string(),
        embed,
        server,
        chunks: Vec::new(),
    };
    if !Path::new(&b.db).exists() {
        let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ingest/sample.md");
        b.run(&["ingest", sample.to_str().unwrap()]);
    }
    let found: Value = serde_json::from_slice(
        &b.run(&["search", "the operator log", "--limit", "5", "--json"])
            .stdout,
    )
    .expect("search --json");
    b.chunks = found
        .as_array()
        .expect("a list of results")
        .iter()
        .filter_map(|r| r["chunk_id"].as_str().map(str::to_string))
        .collect();
    assert!(!b.chunks.is_empty(), "search found nothing: {found}");

    let short = session_of(&b, &keep, 0);
    let long = session_of(&b, &keep, n - 1);
    // The two sessions are asked alternately, in turn first, so that whatever the
    // machine does meanwhile (another tenant, the page cache, the CPU's clock) falls on
    // both alike: measured one after the other, the ratio moved more with the machine
    // than with the code.
    let pair = [(1usize, &short), (n, &long)].map(|(q, from)| {
        let scratch = home.path().join(format!("s-{q}.sqlite"));
        Pair::primed(&b, q, from, scratch)
    });
    let pair = std::cell::RefCell::new(pair);
    let mut g = c.benchmark_group("ask");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(40));
    let mut turn = 0usize;
    g.bench_function(
        format!("ask on a session of 1 question and on one of {n}, alternately"),
        |bench| {
            bench.iter_batched(
                || pair.borrow().iter().for_each(Pair::restore),
                |()| {
                    turn += 1;
                    for k in [turn % 2, (turn + 1) % 2] {
                        let p = &mut pair.borrow_mut()[k];
                        let t = Instant::now();
                        b.ask(&p.scratch, p.q);
                        p.walls.push(t.elapsed());
                    }
                },
                BatchSize::PerIteration,
            )
        },
    );
    g.finish();
    let [one, many] = pair.into_inner().map(|p| Stats::of(p.walls));
    println!(
        "ask wall time over {} asks of each, alternately: on 1 question mean {:.1} ms, \
         median {:.1} ms; on {n} mean {:.1} ms, median {:.1} ms; ratio of means {:.2}, \
         of medians {:.2}; question {n} costs {:.1} ms more (medians)",
        one.count,
        one.mean,
        one.median,
        many.mean,
        many.median,
        many.mean / one.mean,
        many.median / one.median,
        many.median - one.median,
    );
    let (read, skim) = history_floor(&long);
    println!(
        "the floor of reading the {n}-question session's whole history (every message \
         row, nothing built; best of 30): read {read:?}, checked as JSON {skim:?}"
    );
}

/// One session the bench asks, as saved, and the wall times of the asks on it.
struct Pair {
    q: usize,
    /// The file as the question before left it.
    pristine: Vec<u8>,
    scratch: PathBuf,
    walls: Vec<Duration>,
}

impl Pair {
    /// The scratch session made from the kept one `from` and asked its last question
    /// there (unmeasured), as a user's session is left by the `ask` before: with its
    /// resume row for that commit.
    fn primed(b: &Bench, q: usize, from: &Path, scratch: PathBuf) -> Pair {
        let _ = std::fs::remove_file(&scratch);
        if from.exists() {
            std::fs::copy(from, &scratch).unwrap();
        }
        b.ask(&scratch, q.saturating_sub(1));
        Pair {
            q,
            pristine: std::fs::read(&scratch).expect("the primed session"),
            scratch,
            walls: Vec::new(),
        }
    }

    /// The scratch session put back as the saved one.
    fn restore(&self) {
        write_synced(&self.scratch, &self.pristine);
    }
}

/// Mean and median of some wall times, in milliseconds.
struct Stats {
    count: usize,
    mean: f64,
    median: f64,
}

impl Stats {
    fn of(mut walls: Vec<Duration>) -> Stats {
        walls.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let count = walls.len().max(1);
        Stats {
            count: walls.len(),
            mean: walls.iter().copied().map(ms).sum::<f64>() / count as f64,
            median: walls.get(walls.len() / 2).copied().map_or(0.0, ms),
        }
    }
}

/// The least any `ask` that reads the whole history pays: reading every message row
/// of the session, and checking them as JSON without building anything.
fn history_floor(session: &Path) -> (Duration, Duration) {
    let (mut read, mut skim) = (Duration::MAX, Duration::MAX);
    for _ in 0..30 {
        let t = Instant::now();
        let conn = rusqlite::Connection::open_with_flags(
            session,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        let mut stmt = conn
            .prepare("SELECT body FROM messages ORDER BY seq")
            .unwrap();
        let rows: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        read = read.min(t.elapsed());
        let t = Instant::now();
        for row in &rows {
            let _: serde::de::IgnoredAny = serde_json::from_str(row).unwrap();
        }
        skim = skim.min(t.elapsed());
    }
    (read, skim)
}

criterion_group!(benches, ask);
criterion_main!(benches);
