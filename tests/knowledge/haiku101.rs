//! haiku.rag 0.101 databases opened with no extra flags (issue 43): a knowledge base built
//! by haiku.rag-slim 0.101.1 itself (`tests/fixtures/haiku101/kb.py`, in its pinned venv)
//! records only its embedder's provider, name and dimension; where the embedder is served
//! is in the user's `haiku.rag.yaml`, which Groundwork finds and reads as haiku.rag does
//! (`HAIKU_RAG_CONFIG_PATH`, then `./haiku.rag.yaml`). Search then returns haiku.rag's own
//! top hits; `--embed-url` still wins; a missing or malformed file is one line; and a
//! document Groundwork ingests is found by haiku.rag 0.101 afterwards.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::home::{err, hermetic};
use serde_json::Value;

fn groundwork(cwd: &Path, home: &Path, args: &[&str], config: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
    cmd.args(args).current_dir(cwd);
    hermetic(&mut cmd, home);
    cmd.env_remove(groundwork::config::haiku::ENV_PATH);
    if let Some(c) = config {
        cmd.env(groundwork::config::haiku::ENV_PATH, c);
    }
    cmd.output().unwrap()
}

fn ids(o: &Output) -> Vec<String> {
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", err(o)));
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| r["chunk_id"].as_str().unwrap().to_string())
        .collect()
}

// Multi-threaded: the commands run while the embedding server answers on this runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_haiku_rag_0101_database_opens_with_the_users_haiku_rag_yaml() {
    let embed = crate::support::hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kb = dir.path().join("kb");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let made = tokio::task::spawn_blocking({
        let (kb, url) = (kb.clone(), embed.url.clone());
        move || crate::support::run_haiku101_script("haiku101/kb.py", &[kb.to_str().unwrap(), &url])
    })
    .await
    .unwrap();
    assert_eq!(made["version"], "0.101.1");
    let db = kb.join("kb101.lancedb");
    let db = db.to_str().unwrap();
    let config = kb.join("haiku.rag.yaml");
    let elsewhere = dir.path();

    let search = |cwd: &Path, q: &str, config: Option<&Path>, extra: &[&str]| {
        let mut args = vec!["--db", db];
        args.extend_from_slice(extra);
        args.extend(["search", q, "--json", "--no-expand"]);
        groundwork(cwd, &home, &args, config)
    };
    // With HAIKU_RAG_CONFIG_PATH, and with ./haiku.rag.yaml: haiku.rag's own top hits.
    let queries = made["queries"].as_object().unwrap();
    for (q, theirs) in queries {
        let theirs: Vec<String> = serde_json::from_value(theirs.clone()).unwrap();
        let o = search(elsewhere, q, Some(&config), &[]);
        assert!(o.status.success(), "{q}: {}", err(&o));
        assert_eq!(ids(&o), theirs, "{q}");
        let o = search(&kb, q, None, &[]);
        assert!(o.status.success(), "{q}: {}", err(&o));
        assert_eq!(ids(&o), theirs, "{q}");
    }
    // `info` says which haiku.rag wrote it and where its embedder is served, from where.
    let o = groundwork(&kb, &home, &["--db", db, "info"], None);
    assert!(o.status.success(), "{}", err(&o));
    let info = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(info.contains("layout     haiku.rag 0.101.1"), "{info}");
    assert!(
        info.contains(&format!(
            "embedder   openai hashembed-64 (64 dims) at {} (from {})",
            embed.url,
            kb.join("haiku.rag.yaml").display()
        )),
        "{info}"
    );
    let (q, theirs) = queries.iter().next().unwrap();
    let theirs: Vec<String> = serde_json::from_value(theirs.clone()).unwrap();

    // No configuration anywhere: one line that says where the endpoint goes.
    let o = search(elsewhere, q, None, &[]);
    assert!(!o.status.success());
    let e = err(&o);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(
        e.contains("embedder 'hashembed-64' has no base URL; set --embed-url or GROUNDWORK_EMBED_URL, or its base_url in haiku.rag's configuration (haiku.rag.yaml)"),
        "{e}"
    );
    // A named file that is not there, and one that is not YAML: one line each, naming it.
    let o = search(elsewhere, q, Some(&dir.path().join("nowhere.yaml")), &[]);
    assert!(!o.status.success());
    assert!(
        err(&o)
            .trim()
            .ends_with("nowhere.yaml, which does not exist"),
        "{}",
        err(&o)
    );
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "embeddings:\n  model:\n    base_url: [unclosed\n").unwrap();
    let o = search(elsewhere, q, Some(&bad), &[]);
    assert!(!o.status.success());
    let e = err(&o);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(
        e.contains(&format!(
            "invalid haiku.rag configuration {}, line ",
            bad.display()
        )),
        "{e}"
    );
    // --embed-url wins over the file (here one that points nowhere).
    let wrong = dir.path().join("wrong.yaml");
    std::fs::write(
        &wrong,
        std::fs::read_to_string(&config)
            .unwrap()
            .replace(&embed.url, "http://127.0.0.1:9/v1"),
    )
    .unwrap();
    let o = search(elsewhere, q, Some(&wrong), &["--embed-url", &embed.url]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(ids(&o), theirs);

    // Groundwork ingests into the 0.101 database; haiku.rag 0.101 reads and searches it
    // afterwards, without a migration.
    let note = dir.path().join("heat-pump.md");
    std::fs::write(
        &note,
        "# Heat pump notes\n\nThe heat pump defrost cycle runs every ninety minutes in frost.\n",
    )
    .unwrap();
    let o = groundwork(
        elsewhere,
        &home,
        &["--db", db, "ingest", note.to_str().unwrap()],
        Some(&config),
    );
    assert!(o.status.success(), "{}", err(&o));
    let theirs = tokio::task::spawn_blocking({
        let kb = kb.clone();
        move || {
            crate::support::run_haiku101_script(
                "haiku101/kb.py",
                &["search", kb.to_str().unwrap(), "heat pump defrost cycle"],
            )
        }
    })
    .await
    .unwrap();
    assert_eq!(theirs["hits"][0]["title"], "Heat pump notes", "{theirs}");
    assert!(
        theirs["documents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == "Heat pump notes"),
        "{theirs}"
    );
}
