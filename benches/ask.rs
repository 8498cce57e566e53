//! `groundwork ask --session S.json` wall time, the real binary against the scripted
//! OpenAI-compatible server (tests/support), on a session of one question and on one of
//! 500 (`GROUNDWORK_BENCH_QUESTIONS`). Each question is search → cite → answer over a
//! small knowledge base (tests/fixtures/ingest/sample.md, embedded over HTTP by the
//! hashembed test model), with compaction and the policy on, as a user runs it. The long
//! session is built by asking its questions one by one through the same binary and is
//! kept under the target directory for later runs (a question short: the bench copies
//! it and asks its last question there, unmeasured, as the `ask` before a user's next
//! one leaves a session: with its journal and, when it is long, its resume file, which
//! names those very files). Each measured `ask` starts from that saved session (the file
//! and its journal written back over themselves with their modification times, synced to
//! disk, and the resume file put back). The two sessions are asked alternately, so that the machine's
//! drift falls on both alike; the bench prints the mean and median wall time of each,
//! their ratios and the difference, and the floor any `ask` that reads the history from
//! its JSON pays: reading the long session and checking it as JSON without building
//! anything. Where the time goes, phase by phase: each `ask`
//! logs it with `GROUNDWORK_LOG=warn,groundwork::timing=debug` (see `src/timing.rs`),
//! into the log of the bench's temporary home: to keep it, run the bench with its binary
//! replaced by a script that sets `XDG_DATA_HOME` and starts the real one.
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
    let path = dir.join(format!("session-{n}.json"));
    let done = dir.join(format!(
        "session-{n}.done-v{}",
        groundwork::session::SESSION_FORMAT_VERSION
    ));
    if done.exists() && path.exists() {
        return path;
    }
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(groundwork::session::journal_path(&path));
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

/// Writes `bytes` over `path` (the same file when it exists), gives it the
/// modification time `time` and waits until it is on disk, outside the measured time: a
/// user's session is on disk before the next `ask`, since the `ask` that wrote it synced
/// it. Left unsynced, the measured `ask`'s own sync of the journal it appends to wrote
/// the whole copy first (7.5 MB for the long session, several ms).
fn write_synced(path: &Path, bytes: &[u8], time: std::time::SystemTime) {
    std::fs::write(path, bytes).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_modified(time).unwrap();
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
        let scratch = home.path().join(format!("s-{q}.json"));
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
                        p.keep_primed(&b);
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
    let (read, skim) = json_floor(&long);
    println!(
        "the floor of reading the {n}-question session as JSON (file and journal, nothing \
         built; best of 30): read {read:?}, checked {skim:?}"
    );
}

/// One session the bench asks, as saved, and the wall times of the asks on it.
struct Pair {
    q: usize,
    /// The kept session it is made from (a question fewer).
    from: PathBuf,
    /// The file, its journal and its resume file as the question before left them,
    /// with the file's and the journal's modification times.
    pristine: (Vec<u8>, std::time::SystemTime),
    journal: Option<(Vec<u8>, std::time::SystemTime)>,
    resume: Option<Vec<u8>>,
    /// The file's and the journal's (device, inode).
    inodes: (Option<DevIno>, Option<DevIno>),
    scratch: PathBuf,
    walls: Vec<Duration>,
}

/// A file's (device, inode).
type DevIno = (u64, u64);

/// A file's (device, inode), if it exists.
fn inode(path: &Path) -> Option<DevIno> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl Pair {
    /// The scratch session made from the kept one `from` and asked its last question
    /// there (unmeasured), as a user's session is left by the `ask` before: with its
    /// journal and, for a long one, its resume file, which names these very files
    /// (their inodes and modification times, kept by [`Pair::restore`]).
    fn primed(b: &Bench, q: usize, from: &Path, scratch: PathBuf) -> Pair {
        let journal = |p: &Path| groundwork::session::journal_path(p);
        let resume = |p: &Path| groundwork::session::resume::resume_path(p);
        for p in [scratch.clone(), journal(&scratch), resume(&scratch)] {
            let _ = std::fs::remove_file(p);
        }
        if from.exists() {
            std::fs::copy(from, &scratch).unwrap();
        }
        if journal(from).exists() {
            std::fs::copy(journal(from), journal(&scratch)).unwrap();
        }
        b.ask(&scratch, q.saturating_sub(1));
        let with_time = |p: &Path| {
            let bytes = std::fs::read(p).ok()?;
            let time = std::fs::metadata(p).ok()?.modified().ok()?;
            Some((bytes, time))
        };
        Pair {
            q,
            from: from.to_path_buf(),
            pristine: with_time(&scratch).expect("the primed session"),
            journal: with_time(&journal(&scratch)),
            resume: std::fs::read(resume(&scratch)).ok(),
            inodes: (inode(&scratch), inode(&journal(&scratch))),
            scratch,
            walls: Vec::new(),
        }
    }

    /// The scratch session (its journal and its resume file) put back as the saved one,
    /// each written over the same file so the resume file still names it.
    fn restore(&self) {
        let (bytes, time) = &self.pristine;
        write_synced(&self.scratch, bytes, *time);
        let scratch_journal = groundwork::session::journal_path(&self.scratch);
        match &self.journal {
            Some((bytes, time)) => write_synced(&scratch_journal, bytes, *time),
            None => {
                let _ = std::fs::remove_file(&scratch_journal);
            }
        }
        let resume = groundwork::session::resume::resume_path(&self.scratch);
        match &self.resume {
            Some(bytes) => std::fs::write(resume, bytes).unwrap(),
            None => {
                let _ = std::fs::remove_file(resume);
            }
        }
    }

    /// After an `ask` that wrote a new file (it folded the journal) or removed the
    /// journal, the files the resume file names are gone: primes the session anew.
    fn keep_primed(&mut self, b: &Bench) {
        if self.resume.is_none() {
            return;
        }
        let journal = groundwork::session::journal_path(&self.scratch);
        let gone = inode(&self.scratch) != self.inodes.0 || inode(&journal) != self.inodes.1;
        if gone {
            let walls = std::mem::take(&mut self.walls);
            *self = Pair::primed(b, self.q, &self.from.clone(), self.scratch.clone());
            self.walls = walls;
        }
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

/// The least any `ask` that reads the history from its JSON pays: reading the session
/// file and its journal, and checking them as JSON without building anything.
fn json_floor(session: &Path) -> (Duration, Duration) {
    let journal = groundwork::session::journal_path(session);
    let (mut read, mut skim) = (Duration::MAX, Duration::MAX);
    for _ in 0..30 {
        let t = Instant::now();
        let file = std::fs::read_to_string(session).unwrap();
        let lines = std::fs::read_to_string(&journal).unwrap_or_default();
        read = read.min(t.elapsed());
        let t = Instant::now();
        let _: serde::de::IgnoredAny = serde_json::from_str(&file).unwrap();
        for line in lines.lines().filter(|l| !l.trim().is_empty()) {
            let _: serde::de::IgnoredAny = serde_json::from_str(line).unwrap();
        }
        skim = skim.min(t.elapsed());
    }
    (read, skim)
}

criterion_group!(benches, ask);
criterion_main!(benches);
