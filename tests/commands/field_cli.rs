//! Errors a user meets at the command line (issue 14 items 9b, 14, 15, 16, 18, 18a, 18b,
//! 18c): the real binary with a private HOME, the scripted model server and the
//! hashembed embedder on 127.0.0.1.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::hashembed;
use crate::support::scripted_server::{Reply, ScriptedServer, tool_names};
use serde_json::{Value, json};

const SECRET: &str = "sk-field-SECRET-7f3a9c";

struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        Home {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
        cmd.args(args)
            .current_dir(self.path())
            .env("HOME", self.path())
            .env("XDG_DATA_HOME", self.path().join("data"))
            .env("XDG_CONFIG_HOME", self.path().join("config"))
            .env("OPENAI_API_KEY", SECRET)
            .env("GROUNDWORK_DISCOVER", "off")
            .env_remove("HAIKU_RAG_DB")
            .env_remove("GROUNDWORK_CONFIG")
            .env_remove("GROUNDWORK_MODEL_URL")
            .env_remove("GROUNDWORK_MODEL")
            .env_remove("GROUNDWORK_EMBED_URL")
            .env_remove("GROUNDWORK_EMBED_MODEL");
        cmd
    }

    /// `ask "What is the lamp?"` over `db`, embedded by `embed`, against `model_url`,
    /// with no input.
    fn ask_lamp(&self, db: &str, embed: &hashembed::EmbedServer, model_url: &str) -> Command {
        let mut cmd = self.command(&[
            "--db",
            db,
            "--embed-url",
            &embed.url,
            "--embed-model",
            hashembed::MODEL,
            "--model-url",
            model_url,
            "ask",
            "What is the lamp?",
        ]);
        cmd.stdin(Stdio::null());
        cmd
    }

    /// `program args` (a wrapper that starts groundwork itself: `script`, `unshare`) with
    /// the same environment as [`Home::command`].
    fn wrapped(&self, program: &str, args: &[&str]) -> Command {
        let plain = self.command(&[]);
        let mut cmd = Command::new(program);
        cmd.args(args).current_dir(self.path()).stdin(Stdio::null());
        for (k, v) in plain.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd
    }

    /// `groundwork args` on a terminal: util-linux `script` gives it a pty, whose output
    /// (stdout and stderr, as a terminal shows them) is the wrapper's stdout.
    fn on_terminal(&self, args: &[&str]) -> Command {
        let line = std::iter::once(env!("CARGO_BIN_EXE_groundwork"))
            .chain(args.iter().copied())
            .map(|a| format!("'{a}'"))
            .collect::<Vec<_>>()
            .join(" ");
        self.wrapped("script", &["-qec", &line, "/dev/null"])
    }

    async fn run(&self, args: &[&str]) -> Output {
        let mut cmd = self.command(args);
        cmd.stdin(Stdio::null());
        run_bounded(cmd).await
    }

    fn write_config(&self, text: &str) -> PathBuf {
        let path = self.path().join("config/groundwork/config.toml");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.path().join("data/groundwork/logs/groundwork.log"))
            .unwrap_or_default()
    }

    /// A knowledge base of the ingest fixture at `kb.lancedb`, embedded by `embed`.
    async fn kb(&self, embed: &hashembed::EmbedServer) -> String {
        let db = self
            .path()
            .join("kb.lancedb")
            .to_string_lossy()
            .into_owned();
        let o = self.ingest(embed, &db, &fixture("sample.md")).await;
        assert!(o.status.success(), "{}", stderr(&o));
        db
    }

    /// `groundwork --db DB ingest FILE` with the hashembed embedder.
    async fn ingest(&self, embed: &hashembed::EmbedServer, db: &str, file: &str) -> Output {
        self.run(&[
            "--db",
            db,
            "--embed-url",
            &embed.url,
            "--embed-model",
            hashembed::MODEL,
            "ingest",
            file,
        ])
        .await
    }
}

/// Runs `cmd` to completion, killing it (and failing) after two minutes: a hang is the
/// bug some of these tests look for. Output is read while the child runs.
async fn run_bounded(mut cmd: Command) -> Output {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let done = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicBool::new(false));
    let (d, k) = (done.clone(), killed.clone());
    let watchdog = std::thread::spawn(move || {
        let started = Instant::now();
        while !d.load(Ordering::SeqCst) {
            if started.elapsed() > Duration::from_secs(120) {
                k.store(true, Ordering::SeqCst);
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let o = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    done.store(true, Ordering::SeqCst);
    watchdog.join().unwrap();
    assert!(
        !killed.load(Ordering::SeqCst),
        "groundwork (pid {pid}) did not finish within 120 s; stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ingest")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// A run of [`Home::ask_lamp`] that succeeded with the scripted answer.
fn answered_lamp(o: &Output) {
    assert!(o.status.success(), "{}", stderr(o));
    assert!(stdout(o).contains("The lamp is electric."), "{}", stdout(o));
}

/// The one error line of a failed run.
fn error_line(o: &Output) -> String {
    assert!(!o.status.success(), "expected a failure: {}", stdout(o));
    let err = stderr(o);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(lines.len(), 1, "one error line expected:\n{err}");
    lines[0].to_string()
}

/// Item 15: `--db` naming a file says so, in one line, without LanceDB's internals.
#[tokio::test]
async fn a_db_that_is_a_file_is_named_as_such() {
    let home = Home::new();
    let file = home.path().join("notes.txt");
    std::fs::write(&file, "hello").unwrap();
    for cmd in ["info", "list"] {
        let o = home.run(&["--db", file.to_str().unwrap(), cmd]).await;
        let line = error_line(&o);
        assert_eq!(
            line,
            format!(
                "error: {} is a file, not a database directory",
                file.display()
            )
        );
        assert!(!stderr(&o).contains("backtrace"), "{}", stderr(&o));
    }
}

/// Item 18a: relative `--db` paths starting with `db` are local directories, not
/// LanceDB Cloud URIs.
#[tokio::test]
async fn relative_db_paths_starting_with_db_are_local() {
    let embed = hashembed::start().await;
    let home = Home::new();
    for db in ["db.lancedb", "dbs/kb"] {
        let o = home.ingest(&embed, db, &fixture("sample.md")).await;
        assert!(o.status.success(), "{db}: {}", stderr(&o));
        assert!(
            home.path().join(db).is_dir(),
            "{db} created in the working dir"
        );
        let o = home.run(&["--db", db, "info", "--json"]).await;
        assert!(o.status.success(), "{db}: {}", stderr(&o));
        let info: Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(info["documents"], 1);
    }
}

/// Item 16: a type error in `[search]` names the file, the line and the key.
#[tokio::test]
async fn a_config_error_names_file_line_and_key() {
    let home = Home::new();
    let path = home.write_config("[search]\nmax_context_chars = 100\nlimit = \"five\"\n");
    let o = home.run(&["--db", "x.lancedb", "info"]).await;
    let line = error_line(&o);
    assert!(line.contains(&path.display().to_string()), "{line}");
    assert!(line.contains("line 3"), "{line}");
    assert!(line.contains("key `search.limit`"), "{line}");
    assert!(line.contains("expected usize"), "{line}");
}

/// Item 14: a syntax or type error on the `api_key` line never prints the key, neither
/// to stderr nor to the log file; nor does any other error line.
#[tokio::test]
async fn a_bad_api_key_line_leaks_the_key_nowhere() {
    let home = Home::new();
    let key = "sk-config-LEAK-5d2e8b";
    for text in [
        format!("[model]\nmodel = \"m\"\napi_key = {key}\n"),
        format!("[model]\napi_key = [\"{key}\"]\n"),
        format!("[model]\napi_key = \"{key}\"\ntimeout_secs = \"{key}\"\n"),
    ] {
        home.write_config(&text);
        // The model config is read by `ask`; the TUI config by the workbench.
        let o = home.run(&["--db", "x.lancedb", "ask", "q"]).await;
        let err = stderr(&o);
        assert!(!o.status.success());
        assert!(err.contains("line "), "{err}");
        assert!(!err.contains(key), "{err}");
        assert!(!err.contains(SECRET), "{err}");
        assert!(!home.log().contains(key), "{}", home.log());
        assert!(!home.log().contains(SECRET), "{}", home.log());
    }
}

/// Item 18b: a cause is printed once; a blank question is refused before anything is
/// sent.
#[tokio::test]
async fn causes_print_once_and_blank_questions_are_refused() {
    let home = Home::new();
    let o = home
        .run(&["inspect", home.path().join("none.json").to_str().unwrap()])
        .await;
    let line = error_line(&o);
    assert_eq!(line.matches("os error 2").count(), 1, "{line}");

    let model = ScriptedServer::start(vec![Reply::text("never asked")]).await;
    let url = model.base_url();
    for q in ["", "   \n\t"] {
        let o = home
            .run(&["--db", "x.lancedb", "--model-url", &url, "ask", q])
            .await;
        assert_eq!(
            error_line(&o),
            "error: the question is empty; nothing was sent to the model"
        );
    }
    assert!(model.requests().is_empty());
}

/// Item 18c: `--capability` before the command applies to `ask`; other commands refuse
/// it instead of ignoring it.
#[tokio::test]
async fn capability_flags_before_ask_are_honoured() {
    let embed = hashembed::start().await;
    let home = Home::new();
    let db = home.kb(&embed).await;
    let model = ScriptedServer::start(vec![Reply::text("Nothing to compute.")]).await;
    let url = model.base_url();
    let session = home.path().join("s.json");
    let o = home
        .run(&[
            "--capability",
            "analysis",
            "--db",
            &db,
            "--embed-url",
            &embed.url,
            "--embed-model",
            hashembed::MODEL,
            "--model-url",
            &url,
            "--session",
            session.to_str().unwrap(),
            "ask",
            "How many documents are there?",
        ])
        .await;
    assert!(o.status.success(), "{}", stderr(&o));
    let tools = tool_names(&model.requests()[0]);
    assert!(
        tools.contains(&"analysis_execute_code".to_string()),
        "{tools:?}"
    );
    assert!(!tools.contains(&"rag_search".to_string()), "{tools:?}");

    let o = home
        .run(&["--capability", "analysis", "--db", &db, "search", "x"])
        .await;
    let line = error_line(&o);
    assert!(line.contains("--capability"), "{line}");
    assert!(line.contains("`search`"), "{line}");
}

/// Item 18: a named pipe is skipped with a message instead of blocking forever, given
/// by name or met inside a folder.
#[tokio::test]
async fn named_pipes_are_skipped_not_read() {
    let embed = hashembed::start().await;
    let home = Home::new();
    let docs = home.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::copy(fixture("sample.md"), docs.join("sample.md")).unwrap();
    let fifo = docs.join("pipe.md");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo is part of coreutils");
    let db = home.path().join("kb.lancedb");
    let base = [
        "--db",
        db.to_str().unwrap(),
        "--embed-url",
        &embed.url,
        "--embed-model",
        hashembed::MODEL,
        "ingest",
    ];
    // The folder: the pipe is passed over, the document ingested.
    let mut args = base.to_vec();
    args.push(docs.to_str().unwrap());
    let o = home.run(&args).await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("1 added"), "{}", stdout(&o));
    // By name: refused by name, and the run still ends.
    let mut args = base.to_vec();
    args.push(fifo.to_str().unwrap());
    let o = home.run(&args).await;
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(&format!("{}: skipped, it is a named pipe", fifo.display())),
        "{}",
        stderr(&o)
    );
}

/// Item 18: one 400 KB paragraph becomes chunks no longer than the chunker's limit.
#[tokio::test]
async fn an_oversized_paragraph_is_split() {
    let embed = hashembed::start().await;
    let home = Home::new();
    let file = home.path().join("wall.txt");
    std::fs::write(
        &file,
        "All work and no play makes a dull text. ".repeat(10_000),
    )
    .unwrap();
    let db = home.path().join("kb.lancedb");
    let db = db.to_str().unwrap();
    let with_embed = |args: &[&str]| {
        let mut v = vec![
            "--db",
            db,
            "--embed-url",
            embed.url.as_str(),
            "--embed-model",
            hashembed::MODEL,
        ];
        v.extend_from_slice(args);
        v.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let args = with_embed(&["ingest", file.to_str().unwrap()]);
    let o = home
        .run(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
    assert!(o.status.success(), "{}", stderr(&o));
    let args = with_embed(&[
        "search",
        "dull text",
        "--json",
        "--no-expand",
        "--limit",
        "200",
    ]);
    let o = home
        .run(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .await;
    let hits: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let hits = hits.as_array().unwrap();
    assert!(hits.len() >= 25, "{} chunks", hits.len());
    for h in hits {
        let n = h["content"].as_str().unwrap().chars().count();
        assert!(n <= groundwork::ingest::chunker::MAX_CHUNK_CHARS, "{n}");
    }
}

/// Item 9b: printing to a terminal, `ask` strips the escape sequences a model wrote
/// (here a screen clear and a window-title change) and keeps the text.
#[tokio::test]
async fn ask_strips_escape_sequences_on_a_terminal() {
    let embed = hashembed::start().await;
    let home = Home::new();
    let db = home.kb(&embed).await;
    let answer = "Safe\u{1b}[2J answer\u{1b}]0;pwned\u{7} here.";
    let model = ScriptedServer::start(vec![Reply::text(answer), Reply::text(answer)]).await;
    let url = model.base_url();
    let session = home.path().join("s.json");
    let args = [
        "--db",
        db.as_str(),
        "--embed-url",
        embed.url.as_str(),
        "--embed-model",
        hashembed::MODEL,
        "--model-url",
        url.as_str(),
        "--session",
        session.to_str().unwrap(),
        "ask",
        "Say something.",
    ];
    // On a pipe the text is passed through as the model wrote it.
    let o = home.run(&args).await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains(answer));
    // On a terminal (util-linux `script` gives the child a pty).
    let script = home.on_terminal(&args);
    let o = run_bounded(script).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let shown = stdout(&o);
    assert!(shown.contains("Safe answer here."), "{shown:?}");
    assert!(!shown.contains("pwned"), "{shown:?}");
    assert!(!shown.contains("\u{1b}[2J"), "{shown:?}");
}

/// Item 9b: on a full disk the answer is still printed and the error says the session
/// could not be saved; the session file is not left torn. Runs the binary in a private
/// mount namespace with a full 64 KiB tmpfs as its sessions folder.
#[tokio::test]
async fn a_full_disk_keeps_the_answer_and_says_the_session_was_not_saved() {
    let embed = hashembed::start().await;
    let home = Home::new();
    let db = home.kb(&embed).await;
    let model = ScriptedServer::start(vec![Reply::text("The answer survives.")]).await;
    let url = model.base_url();
    let full = home.path().join("full");
    std::fs::create_dir_all(&full).unwrap();
    let session = full.join("s.sqlite");
    let line = format!(
        "mount -t tmpfs -o size=64k tmpfs '{dir}' && \
         (dd if=/dev/zero of='{dir}/fill' bs=4k 2>/dev/null; true) && \
         exec '{bin}' --db '{db}' --embed-url '{eu}' --embed-model '{em}' --model-url '{url}' \
         --session '{session}' ask 'Will it be kept?'",
        dir = full.display(),
        bin = env!("CARGO_BIN_EXE_groundwork"),
        eu = embed.url,
        em = hashembed::MODEL,
        session = session.display(),
    );
    let unshare = home.wrapped(
        "unshare",
        &["--mount", "--map-root-user", "sh", "-c", &line],
    );
    let o = run_bounded(unshare).await;
    let err = stderr(&o);
    assert!(
        !err.contains("unshare: ") && !err.contains("mount: "),
        "this test needs a private mount namespace (util-linux unshare): {err}"
    );
    assert!(!o.status.success(), "{err}");
    assert!(
        stdout(&o).contains("The answer survives."),
        "{}",
        stdout(&o)
    );
    assert!(
        err.contains("the answer above was not saved: the session could not be written to"),
        "{err}"
    );
    assert!(err.contains("No space left on device"), "{err}");
    assert!(!err.contains(SECRET));
    // Outside the namespace the folder is as it was: nothing written, nothing torn.
    assert!(!session.exists());
    assert_eq!(json!(std::fs::read_dir(&full).unwrap().count()), json!(0));
}

/// A system without CA certificates (a slim container) still reaches plain-http
/// endpoints: the chat and embedding clients load no TLS roots for them. An
/// https endpoint there is refused in one line that names what is missing.
#[tokio::test]
async fn local_endpoints_need_no_ca_certificates() {
    let embed = hashembed::start().await;
    let home = Home::new();
    let db = home.kb(&embed).await;
    let model = ScriptedServer::start(vec![Reply::text("The lamp is electric.")]).await;
    let no_certs = home.path().join("no-certs");
    std::fs::create_dir_all(&no_certs).unwrap();
    let run = |model_url: &str| {
        let mut cmd = home.ask_lamp(&db, &embed, model_url);
        // rustls-native-certs reads only these when they are set: no roots at all.
        cmd.env("SSL_CERT_FILE", home.path().join("none.pem"))
            .env("SSL_CERT_DIR", &no_certs);
        run_bounded(cmd)
    };
    answered_lamp(&run(&model.base_url()).await);
    assert_eq!(model.requests().len(), 1);

    let o = run("https://127.0.0.1:9/v1").await;
    let line = error_line(&o);
    assert!(line.contains("cannot set up the model client"), "{line}");
    assert!(line.contains("No CA certificates"), "{line}");
    assert!(!line.contains(SECRET), "{line}");
}

/// A server on 127.0.0.1 that answers every request with a 307 to `to(path)`: its base
/// URL and the paths it was asked for.
async fn redirector(
    to: impl Fn(&str) -> String + Send + Sync + 'static,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let to = std::sync::Arc::new(to);
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = asked.clone();
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        log.lock().unwrap().push(uri.path().to_string());
        let location = to(uri.path());
        async move {
            (
                axum::http::StatusCode::TEMPORARY_REDIRECT,
                [("location", location)],
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), asked)
}

/// A plain-http model endpoint behind a proxy: a redirect to another http address is
/// followed, and one to https (which a client without TLS roots cannot follow) is named
/// in one line with what to do, once (the same redirect would come back), without the
/// credentials or the key the redirect carried.
#[tokio::test]
async fn http_redirects_are_followed_and_one_to_https_says_which_address_to_use() {
    let embed = hashembed::start().await;
    let home = Home::new();
    let db = home.kb(&embed).await;
    let model = ScriptedServer::start(vec![Reply::text("The lamp is electric.")]).await;
    let origin = model.base_url().trim_end_matches("/v1").to_string();
    let (moved, _) = redirector(move |path| format!("{origin}{path}")).await;
    let (upgraded, asked) =
        redirector(|path| format!("https://user:pw@127.0.0.1:9{path}?key={SECRET}")).await;
    let ask = |model_url: &str| run_bounded(home.ask_lamp(&db, &embed, model_url));
    answered_lamp(&ask(&moved).await);
    assert_eq!(model.requests().len(), 1);

    let o = ask(&upgraded).await;
    let line = error_line(&o);
    assert!(
        line.contains(&format!(
            "{upgraded}/chat/completions redirects to https://127.0.0.1:9/v1/chat/completions; \
             give the https:// address as the endpoint"
        )),
        "{line}"
    );
    assert!(!stderr(&o).contains(SECRET), "{}", stderr(&o));
    assert!(!stderr(&o).contains("pw@"), "{}", stderr(&o));
    let chats = asked
        .lock()
        .unwrap()
        .iter()
        .filter(|p| p.ends_with("/chat/completions"))
        .count();
    assert_eq!(chats, 1, "not retried");
    assert_eq!(model.requests().len(), 1);
}

/// The phases a log line of `groundwork::timing` names, in the order they were logged.
fn timing_phases(log: &str) -> Vec<(String, f64)> {
    log.lines()
        .filter(|l| l.contains("groundwork::timing"))
        .map(|l| {
            let phase = l.split("phase=\"").nth(1).and_then(|r| r.split('"').next());
            let field = |name: &str| -> Option<f64> {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
                    .and_then(|v| v.parse().ok())
            };
            // Each line also gives the page faults so far and the committed memory.
            match (phase, field("ms"), field("faults"), field("committed_kib")) {
                (Some(p), Some(ms), Some(faults), Some(_)) if faults > 0.0 => (p.to_string(), ms),
                _ => panic!("a timing line without its phase, time and memory: {l}"),
            }
        })
        .collect()
}

/// With `groundwork::timing` enabled, an `ask` logs where its time went, phase by phase
/// in the order they happen and each with the time since the process started; by
/// default nothing of it is logged.
#[tokio::test]
async fn an_ask_logs_its_phases_when_timing_is_enabled() {
    let embed = hashembed::start().await;
    let home = Home::new();
    let db = home.kb(&embed).await;
    // The second question searches before it answers (uncited: the policy asks once more).
    let model = ScriptedServer::start(vec![
        Reply::text("The lamp is electric."),
        Reply::tool_call("rag_search", json!({"query": "lamp"})),
        Reply::text("The lamp is electric."),
        Reply::text("The lamp is electric."),
    ])
    .await;
    let session = home.path().join("timed.sqlite");
    let ask = |timed: bool| {
        let mut cmd = home.ask_lamp(&db, &embed, &model.base_url());
        cmd.args(["--session", session.to_str().unwrap()]);
        if timed {
            cmd.env("GROUNDWORK_LOG", "warn,groundwork::timing=debug");
        }
        run_bounded(cmd)
    };
    answered_lamp(&ask(false).await);
    assert!(timing_phases(&home.log()).is_empty(), "{}", home.log());

    // The second question reads the session the first one saved.
    answered_lamp(&ask(true).await);
    let phases = timing_phases(&home.log());
    let names: Vec<&str> = phases.iter().map(|(p, _)| p.as_str()).collect();
    let at = |phase: &str| {
        names
            .iter()
            .position(|n| *n == phase)
            .unwrap_or_else(|| panic!("{phase} is not logged: {names:?}"))
    };
    let in_order = |expected: &[&str]| {
        let positions: Vec<usize> = expected.iter().map(|p| at(p)).collect();
        assert!(
            positions.windows(2).all(|w| w[0] < w[1]),
            "{expected:?} not in this order: {names:?}"
        );
        for w in positions.windows(2) {
            assert!(phases[w[0]].1 <= phases[w[1]].1, "{phases:?}");
        }
    };
    // The second question continues the first through the session's resume row, read
    // on a thread of its own while the agent is built; it commits only what it added.
    in_order(&[
        "ask: agent built",
        "ask: session opened",
        "run: started",
        "request: prepared",
        "request: compacted",
        "request: estimated",
        "request: body written",
        "request: answered",
        "run: finished",
        "run: committed",
        "ask: answered and committed",
        "save: committed",
        "save: resume written",
        "ask: saved",
    ]);
    assert!(at("session: resume row read") < at("ask: session opened"));
    // The search, the uncited answer the policy sends back once, the answer.
    assert_eq!(
        names.iter().filter(|n| **n == "request: answered").count(),
        3
    );
    // The search between the two requests, leg by leg (the legs run side by side).
    in_order(&[
        "request: answered",
        "search: query embedded",
        "search: vector leg",
    ]);
    for leg in ["search: vector leg", "search: full-text leg"] {
        in_order(&[leg, "search: documents read", "search: pictures attached"]);
    }
    in_order(&[
        "search: pictures attached",
        "search: expanded",
        "run: finished",
    ]);
    assert!(phases.iter().all(|(_, ms)| *ms >= 0.0 && *ms < 60_000.0));
}

/// Issue 46: what a user types wrong at the command line is one line each, naming the
/// fault: a URL that does not parse (not "connection closed"), a question number below 1
/// (not clap's four lines), a search limit of 0 (not one result).
#[tokio::test]
async fn bad_values_at_the_command_line_are_one_line_each() {
    let home = Home::new();
    let one_line = |o: &Output| {
        assert!(!o.status.success(), "expected a refusal: {}", stdout(o));
        let err = stderr(o);
        assert_eq!(err.lines().count(), 1, "one line expected:\n{err}");
        assert!(err.starts_with("error: "), "{err}");
        err.trim_end().to_string()
    };

    let o = home
        .run(&[
            "--db",
            "x.lancedb",
            "--model-url",
            "http://[::1",
            "--model",
            "m",
            "ask",
            "What is the lamp?",
        ])
        .await;
    let line = one_line(&o);
    assert!(
        line.contains("\"http://[::1\" is not a valid URL (invalid IPv6 address)"),
        "{line}"
    );

    let session = Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions/demo.json");
    let o = home
        .run(&["replay", session.to_str().unwrap(), "--question", "-1"])
        .await;
    assert_eq!(
        one_line(&o),
        "error: invalid value '-1' for '--question <N>': questions are numbered from 1 \
         (see 'groundwork replay --help')"
    );
    assert_eq!(o.status.code(), Some(2));

    let o = home.run(&["search", "lamp", "--limit", "0"]).await;
    assert_eq!(
        one_line(&o),
        "error: invalid value '0' for '--limit <LIMIT>': must be at least 1 (see 'groundwork \
         search --help')"
    );

    // Help is still clap's whole page, on stdout, with success.
    let o = home.run(&["replay", "--help"]).await;
    assert!(o.status.success());
    assert!(stdout(&o).contains("--question <N>"), "{}", stdout(&o));
}

/// Runs `cmd` with its stdout a pipe whose reader is gone before anything is written, so
/// every write meets a closed pipe.
async fn run_with_reader_gone(mut cmd: Command) -> Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    drop(child.stdout.take());
    tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap()
}

/// Issue 46: `inspect S | head -1` ends quietly when the reader closes the pipe (the status
/// a program stopped by SIGPIPE has), instead of "error: Broken pipe (os error 32)".
#[tokio::test]
async fn a_closed_pipe_ends_a_command_quietly() {
    let home = Home::new();
    let session = Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions/demo.json");
    let mut cmd = home.command(&["inspect", session.to_str().unwrap()]);
    cmd.stdin(Stdio::null());
    let o = run_with_reader_gone(cmd).await;
    assert_eq!(stderr(&o), "", "nothing on stderr");
    assert_eq!(o.status.code(), Some(141));
}

/// Issue 46: `ask … | head -c0` (the reader gone before the answer is printed) still keeps
/// the question: the session is saved before anything is printed, and the closed pipe
/// ends the command quietly.
#[tokio::test]
async fn an_ask_whose_reader_is_gone_keeps_the_question_and_ends_quietly() {
    let embed = hashembed::start().await;
    let home = Home::new();
    let db = home.kb(&embed).await;
    let model = ScriptedServer::start(vec![Reply::text("The lamp is electric.")]).await;
    let session = home.path().join("kept.sqlite");
    let mut cmd = home.ask_lamp(&db, &embed, &model.base_url());
    cmd.args(["--session", session.to_str().unwrap()]);
    let o = run_with_reader_gone(cmd).await;
    assert_eq!(o.status.code(), Some(141), "{}", stderr(&o));
    assert!(!stderr(&o).contains("error"), "{}", stderr(&o));
    let saved = groundwork::session::Session::load(&session).unwrap();
    let saved = serde_json::to_string(&saved.messages).unwrap();
    assert!(saved.contains("What is the lamp?"), "the question is kept");
    assert!(saved.contains("The lamp is electric."), "and its answer");
}

/// Issue 46: a question ended by SIGTERM (or SIGHUP, or Ctrl-C outside the workbench)
/// leaves nothing behind: the session's lease is free again, no temporary file; the
/// status is the signal's, and the session is as it was (nothing half-asked committed).
#[tokio::test]
async fn a_signal_that_ends_a_question_leaves_no_lock_behind() {
    let embed = hashembed::start().await;
    let home = Home::new();
    let db = home.kb(&embed).await;
    for (signal, number) in [("TERM", 15), ("HUP", 1), ("INT", 2)] {
        let model = ScriptedServer::start(vec![
            Reply::text("Too late.").delay(Duration::from_secs(30)),
        ])
        .await;
        let session = home.path().join(format!("{signal}.sqlite"));
        let empty = groundwork::session::Session::new("scripted");
        empty.save(&session).unwrap();
        let mut cmd = home.ask_lamp(&db, &embed, &model.base_url());
        cmd.args(["--session", session.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let child = cmd.spawn().unwrap();
        let started = Instant::now();
        while model.requests().is_empty() {
            assert!(started.elapsed() < Duration::from_secs(30), "never asked");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let holder = || -> Option<i64> {
            rusqlite::Connection::open_with_flags(
                &session,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .unwrap()
            .query_row("SELECT pid FROM writer", [], |r| r.get(0))
            .ok()
        };
        assert_eq!(
            holder(),
            Some(i64::from(child.id())),
            "the question holds the session's lease"
        );
        let kill = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let o = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
            .await
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(128 + number),
            "{signal}: {}",
            stderr(&o)
        );
        // Its holder gone, the lease is free: the next writer takes it.
        let lease = groundwork::session::store::Lease::acquire(&session).unwrap();
        assert!(lease.is_some(), "{signal}: the lease is free");
        drop(lease);
        let after = groundwork::session::Session::load(&session).unwrap();
        assert!(after.messages.is_empty(), "{signal}: nothing was committed");
        let left: Vec<_> = std::fs::read_dir(home.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(signal) && *n != format!("{signal}.sqlite"))
            .collect();
        assert!(left.is_empty(), "{signal}: left behind {left:?}");
    }
}

/// Issue 46: `search --limit 3` that prints fewer passages, because expansion joined
/// neighbouring chunks, says so; with `--no-expand` every result is its own passage.
#[tokio::test]
async fn a_search_whose_results_merged_says_so() {
    let embed = hashembed::start().await;
    let home = Home::new();
    let db = home.kb(&embed).await;
    let search = |extra: &[&str]| {
        let mut args = vec![
            "--db",
            db.as_str(),
            "--embed-url",
            embed.url.as_str(),
            "--embed-model",
            hashembed::MODEL,
            "search",
            "lamp",
            "--limit",
            "3",
        ];
        args.extend_from_slice(extra);
        args.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let run = |args: Vec<String>| {
        let home = &home;
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            home.run(&args).await
        }
    };
    let o = run(search(&[])).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let passages = text.lines().filter(|l| l.starts_with("score ")).count();
    assert!(passages < 3, "the fixture's neighbours merge: {text}");
    let plural = if passages == 1 { "" } else { "s" };
    assert!(
        text.starts_with(&format!(
            "3 results, merged into {passages} passage{plural}: "
        )),
        "{text}"
    );
    let o = run(search(&["--json"])).await;
    let json: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(json.as_array().unwrap().len(), passages);
    assert!(
        stderr(&o).contains("note: 3 results, merged into"),
        "{}",
        stderr(&o)
    );
    let o = run(search(&["--no-expand"])).await;
    let text = stdout(&o);
    assert_eq!(text.lines().filter(|l| l.starts_with("score ")).count(), 3);
    assert!(!text.contains("merged"), "{text}");
}

/// Issue 46: `ask` on a terminal streams: the answer's first words are on the screen
/// while the model is still writing the rest, and each tool call is a row. (Before, the
/// screen stayed empty until the whole answer had arrived.)
#[tokio::test]
async fn ask_on_a_terminal_streams_the_answer_as_it_comes() {
    use std::io::Read as _;
    let embed = hashembed::start().await;
    let home = Home::new();
    let db = home.kb(&embed).await;
    let answer = "First words arrive early, and the rest of the answer follows slowly.";
    let model = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "lamp"})),
        Reply::text(answer)
            .chunk_chars(8)
            .chunk_delay(Duration::from_millis(400)),
    ])
    .await;
    let url = model.base_url();
    let args = [
        "--db",
        db.as_str(),
        "--embed-url",
        embed.url.as_str(),
        "--embed-model",
        hashembed::MODEL,
        "--model-url",
        url.as_str(),
        "ask",
        "--no-policy",
        "What is the lamp?",
    ];
    let mut script = home.on_terminal(&args);
    script.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = script.spawn().unwrap();
    let mut pty = child.stdout.take().unwrap();
    let started = Instant::now();
    let reader = std::thread::spawn(move || {
        // (when, everything read so far)
        let mut seen: Vec<(Duration, String)> = Vec::new();
        let mut all = Vec::new();
        let mut buf = [0u8; 256];
        while let Ok(n) = pty.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
            seen.push((
                started.elapsed(),
                String::from_utf8_lossy(&all).into_owned(),
            ));
        }
        seen
    });
    let seen = tokio::task::spawn_blocking(move || reader.join().unwrap())
        .await
        .unwrap();
    assert!(child.wait().unwrap().success());
    let (end, all) = seen.last().cloned().unwrap();
    assert!(
        all.contains("↳ rag_search"),
        "the tool call is a row: {all:?}"
    );
    assert!(all.contains("slowly."), "{all:?}");
    assert_eq!(
        all.matches("First words").count(),
        1,
        "printed once: {all:?}"
    );
    let first = seen
        .iter()
        .find(|(_, s)| s.contains("First wo"))
        .map(|(t, _)| *t)
        .unwrap();
    assert!(
        end.saturating_sub(first) >= Duration::from_secs(2),
        "the first words came {first:?}, the end {end:?}: not streamed"
    );
}

/// Issue 46: a model that accepts the question and stays silent is not a blank screen:
/// after 10 s the terminal says how long `ask` has waited, the idle timeout that ends
/// the attempt and whether it will be tried again.
#[tokio::test]
async fn ask_on_a_terminal_shows_the_wait_for_a_silent_model() {
    let embed = hashembed::start().await;
    let home = Home::new();
    let db = home.kb(&embed).await;
    let model =
        ScriptedServer::start(vec![Reply::text("At last.").delay(Duration::from_secs(12))]).await;
    let url = model.base_url();
    let args = [
        "--db",
        db.as_str(),
        "--embed-url",
        embed.url.as_str(),
        "--embed-model",
        hashembed::MODEL,
        "--model-url",
        url.as_str(),
        "--timeout",
        "30",
        "ask",
        "--no-policy",
        "Anyone there?",
    ];
    let o = run_bounded(home.on_terminal(&args)).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let shown = stdout(&o);
    assert!(
        shown.contains("waiting for the model: 10 s (idle timeout 30 s, will try once more)")
            || shown
                .contains("waiting for the model: 11 s (idle timeout 30 s, will try once more)"),
        "{shown:?}"
    );
    assert!(shown.contains("At last."), "{shown:?}");
    // On a pipe, none of it: the answer alone.
    let model = ScriptedServer::start(vec![Reply::text("Piped.")]).await;
    let url = model.base_url();
    let mut piped = args;
    piped[7] = url.as_str();
    let o = home.run(&piped).await;
    assert_eq!(stdout(&o), "Piped.\n");
}

/// Issue 41: `ask` says when the citation policy redirected, and shows the answer it
/// caught; `--json` carries both.
#[tokio::test]
async fn ask_shows_the_answer_the_policy_caught() {
    let embed = hashembed::start().await;
    let home = Home::new();
    let db = home.kb(&embed).await;
    let replies = || {
        vec![
            Reply::tool_call("rag_search", json!({"query": "author"})),
            Reply::text("Fabio Fiorina wrote it in 2001."),
            Reply::tool_call("rag_cite", json!({"chunk_ids": []})),
            Reply::text("Nothing in the knowledge base says who wrote it."),
        ]
    };
    let model = ScriptedServer::start(replies()).await;
    let o = run_bounded(home.ask_lamp(&db, &embed, &model.base_url())).await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o).lines().next(),
        Some("Nothing in the knowledge base says who wrote it.")
    );
    let err = stderr(&o);
    assert!(
        err.contains(groundwork::host::transcript::REDIRECT_NOTE),
        "{err}"
    );
    assert!(
        err.contains("the caught answer: Fabio Fiorina wrote it in 2001."),
        "{err}"
    );
    let model = ScriptedServer::start(replies()).await;
    let mut cmd = home.ask_lamp(&db, &embed, &model.base_url());
    cmd.arg("--json");
    let o = run_bounded(cmd).await;
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["redirected"], true);
    assert_eq!(v["caught"], "Fabio Fiorina wrote it in 2001.");
}

/// Issue 41: `replay` without `--db` runs the question again over the knowledge base it
/// ran against (recorded by `ask`), not the default one; a moved database is named.
#[tokio::test]
async fn replay_reopens_the_knowledge_base_the_question_ran_against() {
    let embed = hashembed::start().await;
    let home = Home::new();
    let db = home.kb(&embed).await;
    let replies = || {
        vec![
            Reply::tool_call("rag_search", json!({"query": "lamp"})),
            Reply::tool_call("rag_cite", json!({"chunk_ids": []})),
            Reply::text("The lamp is electric."),
        ]
    };
    let model = ScriptedServer::start(replies()).await;
    let session = home.path().join("s.json");
    let mut cmd = home.ask_lamp(&db, &embed, &model.base_url());
    cmd.args(["--session", session.to_str().unwrap()]);
    answered_lamp(&run_bounded(cmd).await);
    let model = ScriptedServer::start(replies()).await;
    let replay = [
        "--embed-url",
        embed.url.as_str(),
        "--embed-model",
        hashembed::MODEL,
        "--model-url",
        &model.base_url(),
        "replay",
        session.to_str().unwrap(),
        "--question",
        "1",
        "--arm=--no-policy",
    ]
    .map(str::to_string);
    let args: Vec<&str> = replay.iter().map(String::as_str).collect();
    let o = home.run(&args).await;
    assert!(o.status.success(), "{}", stderr(&o));
    // The replayed search read the lighthouse guide (the default database has nothing).
    let sent = model.requests()[1].to_string();
    assert!(
        sent.contains("tool-return") || sent.contains("\"tool\""),
        "{sent}"
    );
    assert!(
        sent.contains("Lighthouse"),
        "the guide's text came back: {sent}"
    );
    assert!(!stderr(&o).contains("no knowledge base"), "{}", stderr(&o));
    std::fs::rename(&db, home.path().join("moved.lancedb")).unwrap();
    let o = home.run(&args).await;
    assert_eq!(
        error_line(&o),
        format!(
            "error: {} ran against the knowledge base {db}, which is not there any more; give --db PATH to open it where it is now",
            session.display()
        )
    );
}
