//! A local S3-compatible server for tests: moto in server mode on 127.0.0.1, with request
//! authentication on (an IAM user whose key may do every S3 action).
//!
//! `.ci/setup-tests` installs `moto[server]` into a venv outside the clone
//! (`$GROUNDWORK_MOTO_VENV`, default `~/.cache/groundwork-moto-venv`). Without it
//! [`Moto::start`] panics saying what is missing and to run `.ci/setup-tests`: these tests
//! fail, they never skip.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The bucket every test's database lives in.
pub const BUCKET: &str = "groundwork";
/// The region the tests name (moto accepts any).
pub const REGION: &str = "us-east-1";

fn home() -> PathBuf {
    PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
}

fn env_path(key: &str) -> Option<PathBuf> {
    std::env::var_os(key)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The venv `.ci/setup-tests` installs moto into.
pub fn moto_venv() -> PathBuf {
    env_path("GROUNDWORK_MOTO_VENV").unwrap_or_else(|| home().join(".cache/groundwork-moto-venv"))
}

/// The binary under test: S3 is in the default build.
pub fn groundwork_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_groundwork"))
}

/// A running moto server with the tests' bucket and key. Dropping it kills the server.
pub struct Moto {
    child: Child,
    pub endpoint: String,
    pub key_id: String,
    pub secret: String,
}

impl Moto {
    /// Starts moto on a free port of 127.0.0.1 and creates `buckets` (plus [`BUCKET`]).
    pub fn start(buckets: &[&str]) -> Self {
        let venv = moto_venv();
        let server = venv.join("bin/moto_server");
        assert!(
            server.exists(),
            "moto is missing ({} does not exist): run .ci/setup-tests, which installs \
             moto[server] into {}",
            server.display(),
            venv.display()
        );
        let port = free_port();
        let endpoint = format!("http://127.0.0.1:{port}");
        let child = Command::new(&server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let mut moto = Moto {
            child,
            endpoint,
            key_id: String::new(),
            secret: String::new(),
        };
        moto.wait_listening(port);
        let mut all = vec![BUCKET];
        all.extend_from_slice(buckets);
        let out = moto.python(&["setup", &moto.endpoint.clone()], &all);
        let key: Value = serde_json::from_str(out.trim()).expect("moto_setup.py prints the key");
        moto.key_id = key["key_id"].as_str().unwrap().to_string();
        moto.secret = key["secret"].as_str().unwrap().to_string();
        moto
    }

    fn wait_listening(&mut self, port: u16) {
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("moto_server exited at start ({status})");
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "moto_server did not listen on {port} within 60 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn python(&self, args: &[&str], more: &[&str]) -> String {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/s3/moto_setup.py");
        let out = Command::new(moto_venv().join("bin/python"))
            .arg(script)
            .args(args)
            .args(more)
            .output()
            .expect("run moto_setup.py");
        assert!(
            out.status.success(),
            "moto_setup.py {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The object keys in `bucket`.
    pub fn keys(&self, bucket: &str) -> Vec<String> {
        let out = self.python(
            &["list", &self.endpoint, &self.key_id, &self.secret, bucket],
            &[],
        );
        serde_json::from_str(out.trim()).expect("a JSON list of keys")
    }

    /// The environment a user sets for this server: endpoint, key, region, plain HTTP.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("AWS_ENDPOINT".into(), self.endpoint.clone()),
            ("AWS_ACCESS_KEY_ID".into(), self.key_id.clone()),
            ("AWS_SECRET_ACCESS_KEY".into(), self.secret.clone()),
            ("AWS_REGION".into(), REGION.into()),
            ("AWS_ALLOW_HTTP".into(), "true".into()),
        ]
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on (bound, then released).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Every AWS variable a test run might inherit, removed so only the test's own apply.
pub const AWS_VARS: [&str; 12] = [
    "AWS_ENDPOINT",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ALLOW_HTTP",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
];
