//! Faults of the analysis sandbox seen in the field (issue 14, items 9–12 and 20), each
//! reproduced against the real worker subprocess (`groundwork __sandbox-worker`): time
//! spent in host calls counts against the time limit, a forced stop restarts the session
//! and says so, internal interpreter errors read as unsupported constructs, the worker
//! dies with its parent and on cancel, and it sees none of the parent's environment.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::hashembed;
use crate::support::scripted_server::{Reply, ScriptedServer, wire_messages};
use crate::support::{agent_for, test_config};
use groundwork::capabilities::analysis::AnalysisCapability;
use groundwork::capabilities::state::{EvidenceState, StateKind};
use groundwork::config::AppConfig;
use groundwork::embed::{self, EmbedderSpec};
use groundwork::engine::agent::{Agent, RunError, RunInput, RunResult};
use groundwork::engine::cancel::CancelToken;
use groundwork::engine::events::EventSink;
use groundwork::sandbox::{ExecLimits, HostMessage};
use groundwork::store::{NewChunk, NewDocument, Store};
use serde_json::{Map, Value, json};

const WORKER: &str = env!("CARGO_BIN_EXE_groundwork");

/// Generous bound for anything that should happen "at once" or "within the limit";
/// only a hang exceeds it.
const BOUND: Duration = Duration::from_secs(60);

// ----- fixtures -----------------------------------------------------------------------

struct Kb {
    _embed: hashembed::EmbedServer,
    dir: tempfile::TempDir,
    store: Arc<Store>,
}

impl Kb {
    fn uri(&self) -> String {
        self.dir
            .path()
            .join("kb.lancedb")
            .to_string_lossy()
            .into_owned()
    }
}

async fn kb() -> Kb {
    let server = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("kb.lancedb").to_string_lossy().into_owned();
    let spec = EmbedderSpec {
        provider: "openai".into(),
        name: hashembed::MODEL.into(),
        vector_dim: hashembed::DIM,
        base_url: Some(server.url.clone()),
    };
    let mut store = Store::create(&uri, &spec).await.unwrap();
    store
        .set_embedder(embed::build(&spec, &Default::default()).unwrap())
        .unwrap();
    let content = "Solar panels convert sunlight.";
    store
        .add_document(
            NewDocument {
                uri: Some("test://solar".into()),
                title: Some("Solar".into()),
                metadata: Map::new(),
                content: content.into(),
                docling_document: json!({}),
                pages: vec![],
                items: vec![],
                chunks: vec![NewChunk {
                    content: content.into(),
                    content_fts: content.into(),
                    metadata: json!({"doc_item_refs": [], "headings": null, "labels": ["text"], "page_numbers": [1]}),
                    order: 0,
                }],
            },
            None,
        )
        .await
        .unwrap();
    store.ensure_indexes().await.unwrap();
    Kb {
        _embed: server,
        dir,
        store: Arc::new(store),
    }
}

fn analysis_with(kb: &Kb, edit: impl FnOnce(&mut AppConfig)) -> AnalysisCapability {
    let mut config = AppConfig::default();
    edit(&mut config);
    AnalysisCapability::new(kb.store.clone(), config).worker(WORKER)
}

fn agent(server: &ScriptedServer, cap: AnalysisCapability) -> Agent {
    agent_for(test_config(&server.base_url()))
        .capability(Arc::new(cap))
        .build()
        .unwrap()
}

fn exec(code: &str) -> Reply {
    Reply::tool_call("analysis_execute_code", json!({"code": code}))
}

/// The `analysis_execute_code` returns the last request carried.
fn code_returns(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in wire_messages(body) {
        if m["role"] == "tool" {
            out.push(m["content"].as_str().unwrap_or_default().to_string());
        }
    }
    out
}

/// Runs the codes in one run (then answers "done"), bounded so a hang fails the test.
async fn run_codes(cap: AnalysisCapability, codes: &[&str]) -> (Vec<String>, RunResult) {
    let mut replies: Vec<Reply> = codes.iter().map(|c| exec(c)).collect();
    replies.push(Reply::text("done"));
    let server = ScriptedServer::start(replies).await;
    let agent = agent(&server, cap);
    let run = agent.run(RunInput::prompt("q"), EventSink::none(), CancelToken::new());
    let result = tokio::time::timeout(BOUND, run)
        .await
        .expect("the run hung")
        .unwrap();
    (code_returns(server.requests().last().unwrap()), result)
}

fn executions(result: &RunResult) -> Vec<groundwork::capabilities::state::Execution> {
    EvidenceState::load(StateKind::Analysis, &result.state["analysis"])
        .unwrap()
        .executions
        .unwrap()
}

/// `pid (comm) state ppid ...` of a live process; `None` once it is gone or a zombie.
fn live_parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(") ").map(|(_, r)| r)?;
    let mut fields = after.split_whitespace();
    if fields.next()? == "Z" {
        return None;
    }
    fields.next()?.parse().ok()
}

/// Pids of live `__sandbox-worker` children of `parent` (after their exec: the
/// command line names the worker mode), optionally started from a path containing
/// `marker`.
fn worker_children(parent: u32, marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if live_parent_of(pid) != Some(parent) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.contains("__sandbox-worker") && cmdline.contains(marker) {
            out.push(pid);
        }
    }
    out
}

async fn wait_for_worker(parent: u32, marker: &str) -> u32 {
    let started = Instant::now();
    loop {
        if let Some(pid) = worker_children(parent, marker).first() {
            return *pid;
        }
        assert!(started.elapsed() < BOUND, "no worker appeared");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls until `pid` is gone (or a zombie nobody reaps); false if it outlived the bound.
async fn gone_within_bound(pid: u32) -> bool {
    let started = Instant::now();
    while started.elapsed() < BOUND {
        if live_parent_of(pid).is_none() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A worker path of the test's own, so workers of tests running alongside are left alone.
fn own_worker(dir: &tempfile::TempDir, name: &str) -> (std::path::PathBuf, String) {
    let path = dir.path().join(name);
    std::os::unix::fs::symlink(WORKER, &path).unwrap();
    let marker = path.to_string_lossy().into_owned();
    (path, marker)
}

// ----- 9 and 20: time limits and forced stops -------------------------------------------

/// Issue 14, item 9: a program calling a host function in a loop was not bounded (the
/// question hung), and the next execution then failed at once with
/// "time limit exceeded: 63.465µs > 0ns".
#[tokio::test]
async fn a_host_call_loop_is_stopped_at_the_time_limit_and_the_next_execution_works() {
    let kb = kb().await;
    let started = Instant::now();
    let (returns, result) = run_codes(
        analysis_with(&kb, |c| c.analysis.code_timeout = 2.0),
        &[
            "x = 1",
            "while True:\n    search('solar')",
            "print('next')",
            "print(x)",
            "while True:\n    await list_documents()",
            "print('after')",
        ],
    )
    .await;
    assert!(started.elapsed() < BOUND);
    for stopped in [&returns[1], &returns[4]] {
        assert!(
            stopped.contains("time limit of 2s"),
            "a clear time-limit result: {stopped}"
        );
        assert!(stopped.contains("restarted"), "{stopped}");
        assert!(!stopped.contains("µs > 0ns"), "{stopped}");
    }
    assert_eq!(returns[2], "next\n");
    assert!(
        returns[3].contains("NameError"),
        "the session was thrown away: {}",
        returns[3]
    );
    assert_eq!(returns[5], "after\n");
    let ex = executions(&result);
    assert!(!ex[1].success && ex[2].success && ex[5].success);
}

/// Issue 14, item 20 (SPEC §9.2, §9.5): the compute limit is the watchdog's; a program
/// stopped by it loses the session, and the tool result says the sandbox restarted.
/// What the run recorded survives: the execution log and the in-code search results
/// kept for citation.
#[tokio::test]
async fn a_program_stopped_by_the_compute_limit_restarts_the_session() {
    let kb = kb().await;
    let (returns, result) = run_codes(
        analysis_with(&kb, |c| c.analysis.code_timeout = 1.0),
        &[
            "x = 5",
            "r = await search('solar')\nprint(len(r))\nwhile True:\n    pass",
            "print(x)",
            "y = 2\nprint(y)",
            "print(y)",
        ],
    )
    .await;
    let stopped = &returns[1];
    // `<stderr>\n\nOutput: <stdout>`, the stderr ending with the restart note.
    let (stderr, output) = stopped.split_once("\n\nOutput: ").unwrap();
    assert_eq!(output, "1\n", "the partial output is kept");
    let mut lines = stderr.lines();
    assert!(
        lines.next().unwrap().contains("time limit of 1s"),
        "{stopped}"
    );
    let note = lines.next().unwrap();
    assert!(note.contains("restarted"), "{stopped}");
    assert_eq!(
        note,
        groundwork::capabilities::analysis::restarted_note(),
        "the note is the packaged one"
    );
    assert!(
        returns[2].contains("NameError"),
        "variables are gone: {}",
        returns[2]
    );
    assert_eq!(returns[3], "2\n");
    assert_eq!(
        returns[4], "2\n",
        "the fresh session keeps its own variables"
    );
    let ex = executions(&result);
    assert_eq!(ex.len(), 5);
    assert!(!ex[1].success && ex[1].stderr.contains("restarted"));
    let state = EvidenceState::load(StateKind::Analysis, &result.state["analysis"]).unwrap();
    assert!(
        !state.searches.get("_sandbox").unwrap().is_empty(),
        "in-code results made before the stop are kept"
    );
}

/// A refused document read past the deadline is SPEC's ordinary `TimeoutError`
/// (§9.5), not a forced stop: the session survives it.
#[tokio::test]
async fn a_read_loop_fails_with_the_read_deadline_and_keeps_the_session() {
    let kb = kb().await;
    let (returns, _) = run_codes(
        analysis_with(&kb, |c| c.analysis.code_timeout = 1.0),
        &[
            "x = 7\ndocs = await list_documents()",
            "from pathlib import Path\np = Path('/documents/' + docs[0]['id'] + '/content.txt')\nwhile True:\n    p.read_text()",
            "print(x)",
        ],
    )
    .await;
    assert!(
        returns[1].contains("no further document reads after 1s"),
        "{}",
        returns[1]
    );
    assert!(!returns[1].contains("restarted"), "{}", returns[1]);
    assert_eq!(returns[2], "7\n");
}

// ----- 11: internal interpreter errors ----------------------------------------------------

/// Issue 14, item 11: `raise SystemExit(1)` reached the model as "Internal error in
/// monty: exceptions can only be called with zero or one string argument".
#[tokio::test]
async fn internal_interpreter_errors_read_as_unsupported_constructs() {
    let kb = kb().await;
    let (returns, result) = run_codes(
        analysis_with(&kb, |_| {}),
        &[
            "x = 3",
            "print('before')\nraise SystemExit(1)",
            "raise ValueError(42)",
            "print(x)",
        ],
    )
    .await;
    assert!(
        returns[1].starts_with("NotImplementedError: SystemExit is not supported in the sandbox"),
        "{}",
        returns[1]
    );
    assert!(returns[1].ends_with("Output: before\n"), "{}", returns[1]);
    assert!(
        returns[2].contains("ValueError(...) with a non-string argument is not supported"),
        "{}",
        returns[2]
    );
    for r in &returns[1..3] {
        assert!(!r.to_lowercase().contains("monty"), "{r}");
        assert!(!r.contains("restarted"), "an ordinary failure: {r}");
    }
    assert_eq!(returns[3], "3\n", "the session is untouched");
    let ex = executions(&result);
    assert!(!ex[1].success && !ex[2].success);
}

// ----- 10: the worker dies with its parent and on cancel ----------------------------------

fn looping_exec() -> String {
    let msg = HostMessage::Exec {
        code: "while True:\n    pass".into(),
        limits: ExecLimits {
            time_limit_ms: 600_000,
            session_remaining_ms: 600_000,
            max_memory: 64 << 20,
            max_recursion: 200,
            max_output_chars: 1000,
        },
    };
    format!("{}\n", serde_json::to_string(&msg).unwrap())
}

/// Issue 14, item 10: a worker whose stdin closes (its host is gone) exits even while
/// its program computes. The test process stays alive, so this is the worker's own
/// stdin watch, not the parent-death signal.
#[tokio::test]
async fn a_computing_worker_exits_when_its_stdin_closes() {
    let mut child = Command::new(WORKER)
        .arg(groundwork::sandbox::WORKER_ARG)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(looping_exec().as_bytes()).unwrap();
    stdin.flush().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(child.try_wait().unwrap().is_none(), "the program computes");
    drop(stdin);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > BOUND {
            let _ = child.kill();
            panic!("the worker outlived its closed stdin");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status:?}");
}

/// Issue 14, item 10: cancelling a run while its program computes stops the worker
/// at once (the run's sandbox is closed on the error path).
#[tokio::test]
async fn cancelling_a_run_stops_its_worker() {
    let kb = kb().await;
    let dir = tempfile::tempdir().unwrap();
    let (path, marker) = own_worker(&dir, "worker-of-cancel");
    let server =
        ScriptedServer::start(vec![exec("while True:\n    pass"), Reply::text("never")]).await;
    let agent = agent(
        &server,
        analysis_with(&kb, |c| c.analysis.code_timeout = 600.0).worker(&path),
    );
    let cancel = CancelToken::new();
    let token = cancel.clone();
    let runner = tokio::spawn(async move {
        agent
            .run(RunInput::prompt("q"), EventSink::none(), token)
            .await
    });
    let pid = wait_for_worker(std::process::id(), &marker).await;
    cancel.cancel();
    let outcome = tokio::time::timeout(BOUND, runner)
        .await
        .expect("the cancelled run hung")
        .unwrap();
    assert!(matches!(outcome, Err(RunError::Cancelled)), "{outcome:?}");
    assert!(
        gone_within_bound(pid).await,
        "worker {pid} outlived the cancel"
    );
}

/// Starts `groundwork ask --capability analysis` whose scripted model runs a program
/// that loops for ever, with an API key and a secret in its environment; returns the
/// `ask` process and its worker's pid.
async fn ask_with_a_looping_program(
    kb: &Kb,
    model: &ScriptedServer,
    home: &tempfile::TempDir,
    secret: (&str, &str),
) -> (std::process::Child, u32) {
    let session = home.path().join("s.sqlite");
    // A compute limit far beyond the test's bound, so only the parent's death ends it.
    let config = home.path().join("config/groundwork/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "[analysis]\ncode_timeout = 600.0\n").unwrap();
    let ask = Command::new(WORKER)
        .args([
            "--db",
            &kb.uri(),
            "--session",
            session.to_str().unwrap(),
            "--model-url",
            &model.base_url(),
            "--model",
            "scripted",
            "ask",
            "How many?",
            "--capability",
            "analysis",
        ])
        .env("HOME", home.path())
        .env("XDG_DATA_HOME", home.path().join("data"))
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("GROUNDWORK_DISCOVER", "off")
        .env("OPENAI_API_KEY", "sk-sandbox-faults-SECRET")
        .env(secret.0, secret.1)
        .env_remove("HAIKU_RAG_DB")
        .env_remove("GROUNDWORK_MODEL_URL")
        .env_remove("GROUNDWORK_MODEL")
        .env_remove("GROUNDWORK_SANDBOX_WORKER")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let worker = wait_for_worker(ask.id(), "").await;
    (ask, worker)
}

/// Issue 14, item 12: the worker inherited the whole environment, API keys included.
#[tokio::test]
async fn the_worker_never_sees_the_parent_environment() {
    let kb = kb().await;
    let model =
        ScriptedServer::start(vec![exec("while True:\n    pass"), Reply::text("never")]).await;
    let home = tempfile::tempdir().unwrap();
    let secret_name = format!("GW_FAULTS_SECRET_{}", std::process::id());
    let secret_value = format!("hunter2-{}", uuid::Uuid::new_v4());
    let (mut ask, worker) =
        ask_with_a_looping_program(&kb, &model, &home, (&secret_name, &secret_value)).await;
    let environ = std::fs::read(format!("/proc/{worker}/environ")).unwrap();
    let environ = String::from_utf8_lossy(&environ).into_owned();
    let parent_environ = std::fs::read(format!("/proc/{}/environ", ask.id())).unwrap();
    ask.kill().unwrap();
    ask.wait().unwrap();
    assert!(
        String::from_utf8_lossy(&parent_environ).contains(&secret_value),
        "the parent has the secret"
    );
    for leaked in [
        "OPENAI_API_KEY",
        "sk-sandbox-faults-SECRET",
        &secret_name,
        &secret_value,
        "HOME=",
    ] {
        assert!(!environ.contains(leaked), "the worker sees {leaked}");
    }
    assert!(environ.is_empty(), "an empty environment: {environ:?}");
}

/// Issue 14, item 10: the worker of an `ask` killed while a program runs computed on for
/// about a minute; it must die with its parent.
#[tokio::test]
async fn the_worker_of_a_killed_ask_dies_with_it() {
    let kb = kb().await;
    let model =
        ScriptedServer::start(vec![exec("while True:\n    pass"), Reply::text("never")]).await;
    let home = tempfile::tempdir().unwrap();
    let (mut ask, worker) =
        ask_with_a_looping_program(&kb, &model, &home, ("GW_FAULTS_UNUSED", "1")).await;
    // SIGKILL: the parent gets no chance to clean up.
    ask.kill().unwrap();
    ask.wait().unwrap();
    let died = gone_within_bound(worker).await;
    if !died {
        let _ = Command::new("kill")
            .arg("-9")
            .arg(worker.to_string())
            .status();
    }
    assert!(died, "worker {worker} outlived its killed parent");
}
