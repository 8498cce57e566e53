//! The real binary in a temporary home with a database holding the lighthouse guide
//! (`tests/fixtures/ingest/sample.md` and `sample.html`, embedded by the hashembed
//! server): hermetic (no model server on this machine is found, no environment leaks
//! in), every command run in the home's folder.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::hashembed;

pub struct Home {
    pub dir: tempfile::TempDir,
    _embed: hashembed::EmbedServer,
    pub db: String,
}

impl Home {
    /// A home with a database holding the lighthouse guide.
    pub async fn new() -> Home {
        let embed = hashembed::start().await;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("kb.lancedb").display().to_string();
        let home = Home {
            dir,
            _embed: embed,
            db,
        };
        let fixtures =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ingest");
        let (md, html) = (fixtures.join("sample.md"), fixtures.join("sample.html"));
        let url = home._embed.url.clone();
        let o = home
            .run(&[
                "ingest",
                md.to_str().unwrap(),
                html.to_str().unwrap(),
                "--embed-url",
                &url,
                "--embed-model",
                hashembed::MODEL,
            ])
            .await;
        assert!(o.status.success(), "{}", err(&o));
        home
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
        cmd.arg("--db")
            .arg(&self.db)
            .args(args)
            .current_dir(self.dir.path())
            .env("OPENAI_API_KEY", "sk-eval-test-SECRET");
        hermetic(&mut cmd, self.dir.path());
        cmd
    }

    pub async fn run(&self, args: &[&str]) -> Output {
        let mut cmd = self.command(args);
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap()
    }
}

/// Makes `cmd` hermetic with `home` as its home: its data and configuration there, no
/// model server on this machine discovered, and none of the environment's knowledge
/// base, model or embedder settings leaking in.
pub fn hermetic<'c>(cmd: &'c mut Command, home: &Path) -> &'c mut Command {
    cmd.env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("GROUNDWORK_DISCOVER", "off")
        .env_remove("HAIKU_RAG_DB")
        .env_remove("GROUNDWORK_MODEL_URL")
        .env_remove("GROUNDWORK_MODEL")
        .env_remove("GROUNDWORK_EMBED_URL")
        .env_remove("GROUNDWORK_EMBED_MODEL")
}

pub fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
