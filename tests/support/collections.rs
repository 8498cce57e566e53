//! Two collections for the tests of several collections (`tests/collections*.rs`):
//! real LanceDB stores holding an overlapping document, each built with its own embedder
//! (hashembed at two dimensions on two servers), and running the binary over them.

use std::collections::HashMap;
use std::process::{Command, Output};
use std::sync::Arc;

use groundwork::embed::EmbedderSpec;
use groundwork::store::NewDocument;
use serde_json::Value;

use super::hashembed::{self, EmbedServer};
use super::kb::{chunk, document, store_with};

/// The dimension of the second collection's embedder (the first uses hashembed's own).
pub const PAPERS_DIM: usize = 32;

/// Two collections: `manuals` (hashembed-64) and `papers` (hashembed-32, another server),
/// both holding the Handbook; each also holds one document of its own.
pub struct Two {
    pub manuals_embed: EmbedServer,
    pub papers_embed: EmbedServer,
    pub dir: tempfile::TempDir,
    pub manuals: String,
    pub papers: String,
    pub manuals_store: Arc<groundwork::store::Store>,
    pub papers_store: Arc<groundwork::store::Store>,
    /// (collection, document) → chunk ids.
    pub chunks: HashMap<(&'static str, &'static str), Vec<String>>,
}

pub const HANDBOOK: &str = "Torque the inverter bolts to twelve newton metres.";

fn handbook() -> NewDocument {
    document(
        Some("test://handbook"),
        Some("Handbook"),
        vec![],
        vec![chunk(0, &[], &[], HANDBOOK)],
    )
}

pub async fn two_collections() -> Two {
    let manuals_embed = hashembed::start().await;
    let papers_embed = hashembed::start_dim(PAPERS_DIM).await;
    let dir = tempfile::tempdir().unwrap();
    let spec = |name: &str, dim: usize, url: &str| EmbedderSpec {
        provider: "openai".into(),
        name: name.into(),
        vector_dim: dim,
        base_url: Some(url.to_string()),
    };
    let manuals = dir.path().join("manuals.lancedb");
    let (m, m_chunks, _) = store_with(
        &manuals,
        &spec(hashembed::MODEL, hashembed::DIM, &manuals_embed.url),
        vec![
            ("handbook", handbook()),
            (
                "reset",
                document(
                    Some("test://reset"),
                    Some("Reset Guide"),
                    vec![],
                    vec![chunk(
                        0,
                        &[],
                        &[],
                        "Reset the inverter by holding its button for ten seconds.",
                    )],
                ),
            ),
        ],
    )
    .await;
    let papers = dir.path().join("papers.lancedb");
    let (p, p_chunks, _) = store_with(
        &papers,
        &spec("hashembed-32", PAPERS_DIM, &papers_embed.url),
        vec![
            ("handbook", handbook()),
            (
                "study",
                document(
                    Some("test://study"),
                    Some("Bolt Study"),
                    vec![],
                    vec![chunk(
                        0,
                        &[],
                        &[],
                        "A study of bolt torque loss in rooftop inverter mounts.",
                    )],
                ),
            ),
        ],
    )
    .await;
    let mut chunks = HashMap::new();
    for (coll, found) in [("manuals", m_chunks), ("papers", p_chunks)] {
        for (doc, ids) in found {
            let doc: &'static str = match doc.as_str() {
                "handbook" => "handbook",
                "reset" => "reset",
                _ => "study",
            };
            chunks.insert((coll, doc), ids);
        }
    }
    Two {
        manuals_embed,
        papers_embed,
        manuals: manuals.to_string_lossy().into_owned(),
        papers: papers.to_string_lossy().into_owned(),
        manuals_store: Arc::new(m),
        papers_store: Arc::new(p),
        dir,
        chunks,
    }
}

impl Two {
    pub fn chunk(&self, coll: &'static str, doc: &'static str) -> String {
        self.chunks[&(coll, doc)][0].clone()
    }

    /// `--db manuals=… --db papers=…`.
    pub fn db_flags(&self) -> Vec<String> {
        vec![
            "--db".into(),
            format!("manuals={}", self.manuals),
            "--db".into(),
            format!("papers={}", self.papers),
        ]
    }

    /// Runs the binary with `args`, hermetic (no discovery, no config but `config`).
    pub async fn run(&self, args: &[String], config: Option<&str>) -> Output {
        let home = self.dir.path().join("home");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
        cmd.args(args)
            .env("HOME", &home)
            .env("XDG_DATA_HOME", home.join("data"))
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("GROUNDWORK_DISCOVER", "off")
            .env_remove("HAIKU_RAG_DB")
            .env_remove("GROUNDWORK_MODEL_URL")
            .env_remove("GROUNDWORK_MODEL")
            .env_remove("GROUNDWORK_EMBED_URL")
            .env_remove("GROUNDWORK_EMBED_MODEL")
            .env_remove("GROUNDWORK_CONFIG");
        if let Some(text) = config {
            let path = self.dir.path().join("config.toml");
            std::fs::write(&path, text).unwrap();
            cmd.env("GROUNDWORK_CONFIG", path);
        }
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap()
    }

    pub async fn run_with_dbs(&self, rest: &[&str]) -> Output {
        let mut args = self.db_flags();
        args.extend(rest.iter().map(|s| s.to_string()));
        self.run(&args, None).await
    }
}

/// The `properties` of `rag_search` in a recorded request body.
pub fn search_properties(body: &Value) -> Value {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "rag_search")
        .map(|t| t["function"]["parameters"]["properties"].clone())
        .expect("rag_search offered")
}
