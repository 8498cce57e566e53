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

/// haiku.rag 0.101's own search of `kb`'s database (`kb.py search`): its hits and the
/// documents it lists (off the runtime's thread, which serves the embedder).
async fn haiku_search(kb: &Path, query: &str) -> Value {
    let (kb, query) = (kb.to_path_buf(), query.to_string());
    tokio::task::spawn_blocking(move || {
        crate::support::run_haiku101_script(
            "haiku101/kb.py",
            &["search", kb.to_str().unwrap(), &query],
        )
    })
    .await
    .unwrap()
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
    let theirs = haiku_search(&kb, "heat pump defrost cycle").await;
    assert_eq!(theirs["hits"][0]["title"], "Heat pump notes", "{theirs}");
    assert!(
        theirs["documents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == "Heat pump notes"),
        "{theirs}"
    );

    // Groundwork replaces the note (new text) and deletes another it added: haiku.rag 0.101
    // finds the new text, and no longer lists the deleted document.
    std::fs::write(
        &note,
        "# Heat pump notes\n\nThe outdoor fan ices over below minus ten; the defrost heater melts it.\n",
    )
    .unwrap();
    let other = dir.path().join("boiler.md");
    std::fs::write(
        &other,
        "# Boiler notes\n\nThe boiler pressure sits at one bar.\n",
    )
    .unwrap();
    for (args, said) in [
        (vec!["ingest", note.to_str().unwrap()], "0 added, 1 updated"),
        (vec!["ingest", other.to_str().unwrap()], "1 added"),
    ] {
        let mut all = vec!["--db", db];
        all.extend(args);
        let o = groundwork(elsewhere, &home, &all, Some(&config));
        assert!(o.status.success(), "{}", err(&o));
        assert!(String::from_utf8_lossy(&o.stdout).starts_with(said));
    }
    let boiler_uri = groundwork::ingest::pipeline::file_uri(&other);
    let o = groundwork(
        elsewhere,
        &home,
        &["--db", db, "delete", &boiler_uri],
        Some(&config),
    );
    assert!(o.status.success(), "{}", err(&o));
    let theirs = haiku_search(&kb, "outdoor fan ices over defrost heater").await;
    assert_eq!(theirs["hits"][0]["title"], "Heat pump notes", "{theirs}");
    let documents = theirs["documents"].as_array().unwrap();
    assert!(!documents.iter().any(|d| d == "Boiler notes"), "{theirs}");
    assert_eq!(
        documents.iter().filter(|d| *d == "Heat pump notes").count(),
        1,
        "{theirs}"
    );
}

/// The scripted model for haiku.rag 0.101's capability, whose tools are `search`, `cite`
/// and `execute_code`: it searches each question (the tilt question twice in one
/// response: one unit of 0.101's search budget), cites the first result (nothing for a
/// question about the gearbox, which it then declares unanswered) and answers.
fn model_0101(body: &Value) -> crate::support::scripted_server::Reply {
    use crate::support::scripted_server::{Reply, wire_messages};
    let messages = wire_messages(body);
    let last = messages.last().cloned().unwrap_or_default();
    let question = crate::support::researcher::asked(body)
        .last()
        .cloned()
        .unwrap_or_default();
    if last["role"] == "tool" {
        let id = last["tool_call_id"].as_str().unwrap_or("");
        let name = messages
            .iter()
            .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
            .find(|c| c["id"] == id)
            .map(|c| c["function"]["name"].as_str().unwrap_or("").to_string())
            .unwrap_or_default();
        return match name.as_str() {
            "search" if question.contains("gearbox") => {
                Reply::tool_call("cite", serde_json::json!({"chunk_ids": []}))
            }
            "search" => {
                let text = crate::support::researcher::content_text(&last);
                let ids: Vec<String> = groundwork::host::transcript::result_ids(&text)
                    .into_iter()
                    .map(|(id, _)| id)
                    .take(1)
                    .collect();
                Reply::tool_call("cite", serde_json::json!({ "chunk_ids": ids }))
            }
            _ if question.contains("gearbox") => Reply::text("The knowledge base does not say."),
            _ => Reply::text("Tilt the panels close to your latitude [1]."),
        };
    }
    let search = Reply::tool_call("search", serde_json::json!({ "query": question }));
    if question.contains("tilt") {
        search.and_tool_call("search", serde_json::json!({"query": "panel orientation"}))
    } else {
        search
    }
}

/// A conversation recorded by a haiku.rag 0.101.1 host (its own capability and agent, the
/// state only under `rag`, tools named `search` and `cite`) reads as a Groundwork
/// session: the transcript with the tool rows under their 0.101 names, the ledger's
/// statuses, searches and citations from its history and state, `inspect`, and the
/// Markdown export quoting the cited chunk from the 0.101 database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_haiku_rag_0101_host_session_reads_with_its_ledger() {
    use groundwork::host::transcript::{CitationStatus, ToolKind, Transcript, tool_kind};
    let embed = crate::support::hashembed::start().await;
    let model = crate::support::scripted_server::ScriptedServer::responding(model_0101).await;
    let dir = tempfile::tempdir().unwrap();
    let kb = dir.path().join("kb");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let session = dir.path().join("s101.json");
    let recorded = tokio::task::spawn_blocking({
        let (kb, url, model_url, session) = (
            kb.clone(),
            embed.url.clone(),
            model.base_url(),
            session.clone(),
        );
        move || {
            crate::support::run_haiku101_script("haiku101/kb.py", &[kb.to_str().unwrap(), &url]);
            crate::support::run_haiku101_script(
                "haiku101/session.py",
                &[
                    kb.to_str().unwrap(),
                    &model_url,
                    session.to_str().unwrap(),
                    "What tilt angle should the panels have?",
                    "What is the gearbox oil temperature limit?",
                ],
            )
        }
    })
    .await
    .unwrap();
    let state = &recorded["state"];
    assert!(
        state.get("analysis").is_none(),
        "0.101 keeps state only under rag: {state}"
    );
    let index = state["rag"]["citation_index"].as_object().unwrap();

    let s = groundwork::session::Session::load(&session).unwrap();
    let t = Transcript::build(&s.messages, &s.state);
    assert_eq!(t.turns.len(), 2);
    let names: Vec<Vec<&str>> = t
        .turns
        .iter()
        .map(|turn| turn.steps.iter().map(|s| s.name.as_str()).collect())
        .collect();
    assert_eq!(
        names,
        [vec!["search", "search", "cite"], vec!["search", "cite"]]
    );
    assert_eq!(tool_kind("search"), ToolKind::Search);
    assert!(
        t.turns[0].steps[0].summary.starts_with('"'),
        "a search row shows its query: {}",
        t.turns[0].steps[0].summary
    );
    assert_eq!(t.turns[1].steps[1].summary, "no chunks (ungrounded)");
    // Two searches in one response are one unit of 0.101's budget.
    let statuses: Vec<CitationStatus> = t.ledger.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [CitationStatus::Grounded, CitationStatus::Ungrounded]
    );
    assert_eq!(
        t.ledger.iter().map(|r| r.searches).collect::<Vec<_>>(),
        [1, 1]
    );
    let first: Vec<&str> = t.turns[0]
        .citations
        .iter()
        .map(|c| c.evidence.chunk_id.as_str())
        .collect();
    assert_eq!(first.len(), 1);
    assert_eq!(
        index[first[0]]["index"], 1,
        "the cited chunk is the state's first citation: {index:?}"
    );
    assert!(!t.turns[0].retrieved.is_empty(), "what its search returned");

    // The workbench shows it: the tool rows under their 0.101 names, the ledger's rows.
    let mut app =
        groundwork::tui::app::App::new(s.clone(), None, crate::support::workbench::host());
    let conversation = crate::support::workbench::pane(
        &mut app,
        groundwork::tui::app::Pane::Conversation,
        160,
        48,
    );
    assert!(
        conversation.contains("✓ search \"What tilt angle should the panels have?\""),
        "{conversation}"
    );
    let ledger =
        crate::support::workbench::pane(&mut app, groundwork::tui::app::Pane::Ledger, 160, 48);
    assert!(
        ledger.contains("grounded") && ledger.contains("ungrounded") && ledger.contains("1/5"),
        "{ledger}"
    );

    let db = kb.join("kb101.lancedb");
    let config = kb.join("haiku.rag.yaml");
    let run = |args: &[&str]| groundwork(dir.path(), &home, args, Some(&config));
    let o = run(&[
        "--db",
        db.to_str().unwrap(),
        "inspect",
        session.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", err(&o));
    let o = run(&[
        "--db",
        db.to_str().unwrap(),
        "export",
        session.to_str().unwrap(),
        "--format",
        "md",
    ]);
    assert!(o.status.success(), "{}", err(&o));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(
        md.contains("- ✓ `search` \"What tilt angle should the panels have?\""),
        "{md}"
    );
    assert!(md.contains("*Citation status: ungrounded*"), "{md}");
    assert!(
        !md.contains("the cited chunk was not read"),
        "quoted from the 0.101 database: {md}"
    );

    // The same conversation as haiku.rag's web app keeps it (AG-UI messages made by
    // pydantic-ai's own adapter, in a `sessions` table), two sessions in one store.
    let app_dir = dir.path().join("app");
    std::fs::create_dir_all(&app_dir).unwrap();
    let store = app_dir.join("sessions.db");
    let made = crate::support::run_haiku101_script(
        "haiku101/webapp.py",
        &[
            store.to_str().unwrap(),
            &format!("Tilt and gearbox={}", session.display()),
            &format!("Again={}", session.display()),
        ],
    );
    assert_eq!(made["ids"], serde_json::json!(["session-1", "session-2"]));
    let before = std::fs::read(&store).unwrap();
    // Listed: id, title, questions, dates, and how to open one.
    let o = run(&["inspect", store.to_str().unwrap()]);
    assert!(o.status.success(), "{}", err(&o));
    let listed = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        listed,
        format!(
            "{store}: haiku.rag's web-app session store, 2 session(s)\n  \
             session-1  Tilt and gearbox · 2 question(s) · created 2026-12-01T09:00:00+00:00 · updated 2026-12-01T09:30:00+00:00\n  \
             session-2  Again · 2 question(s) · created 2026-12-02T09:00:00+00:00 · updated 2026-12-02T09:30:00+00:00\n\
             open one with: groundwork open '{store}#session-1'\n",
            store = store.display()
        )
    );
    // A request of the store itself: one line naming how to choose a session.
    let o = run(&["inspect", store.to_str().unwrap(), "--request", "1"]);
    assert!(!o.status.success());
    assert_eq!(
        err(&o).trim(),
        format!(
            "error: {store} is haiku.rag's web-app session store: name one of its sessions as {store}#ID to see its requests",
            store = store.display()
        )
    );
    // The store alone, of two sessions, is refused in one line naming how to choose.
    let refused = groundwork::session::Session::load(&store)
        .unwrap_err()
        .to_string();
    assert_eq!(
        refused,
        format!(
            "{store} is haiku.rag's web-app session store with 2 sessions: name one as {store}#ID (`groundwork inspect {store}` lists them)",
            store = store.display()
        )
    );
    let address = format!("{}#session-1", store.display());
    let missing = format!("{}#session-9", store.display());
    assert!(
        groundwork::session::Session::load(Path::new(&missing))
            .unwrap_err()
            .to_string()
            .contains("holds no session 'session-9'")
    );
    // One session reads as the conversation it is: the same transcript and ledger as the
    // host session it was made from.
    let from_app = groundwork::session::Session::load(Path::new(&address)).unwrap();
    assert_eq!(Transcript::build(&from_app.messages, &from_app.state), t);
    assert_eq!(from_app.state, s.state);
    // inspect and the Markdown export read it as they read the host session.
    let o = run(&["inspect", &address]);
    assert!(o.status.success(), "{}", err(&o));
    let o_json = run(&["inspect", session.to_str().unwrap()]);
    // The same requests of the same messages; AG-UI keeps no instructions or usage, so
    // the web app's reconstructed requests are the messages alone.
    let rows = |o: &Output| -> Vec<(String, String)> {
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let head = text.lines().next().unwrap_or_default().to_string();
        assert!(head.ends_with(": 12 messages, 6 request(s)"), "{text}");
        text.lines()
            .skip(2)
            .map(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                (cols[0].to_string(), cols[1].to_string())
            })
            .collect()
    };
    assert_eq!(rows(&o), rows(&o_json));
    let o = run(&[
        "--db",
        db.to_str().unwrap(),
        "export",
        &address,
        "--format",
        "md",
    ]);
    assert!(o.status.success(), "{}", err(&o));
    let app_md = String::from_utf8_lossy(&o.stdout);
    let body = |m: &str| m.split_once('\n').map(|(_, b)| b.to_string()).unwrap();
    assert_eq!(body(&app_md), body(&md));
    assert!(
        app_md.starts_with("# Tilt and gearbox\n"),
        "titled as the app titles it: {app_md}"
    );
    // Questions asked over it go beside the store, never into it.
    let at = groundwork::session::continue_at(Path::new(&address));
    assert_eq!(at.read.as_deref(), Some(Path::new(&address)));
    assert_eq!(at.write, app_dir.join("sessions-session-1.sqlite"));
    // Read-only: the store is byte for byte as it was, and no file was made beside it.
    assert_eq!(std::fs::read(&store).unwrap(), before);
    assert_eq!(crate::support::file_names(&app_dir), ["sessions.db"]);
}

/// A database Groundwork creates with `[storage] layout = "0.101"` records what haiku.rag
/// 0.101 records (the version, and the embedder's provider, name and dimension only), so
/// haiku.rag 0.101.1 opens and searches it without asking for `haiku-rag migrate`;
/// Groundwork reopens it through the user's `haiku.rag.yaml`, and `info` names the layout.
/// Without the key a new database is 0.77's, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_database_in_0101s_layout_is_read_by_haiku_rag_0101_without_a_migration() {
    let embed = crate::support::hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let config_dir = home.join("config").join("groundwork");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("config.toml"),
        "[storage]\nlayout = \"0.101\"\n",
    )
    .unwrap();
    let kb = dir.path().join("kb");
    std::fs::create_dir_all(&kb).unwrap();
    let yaml = kb.join("haiku.rag.yaml");
    std::fs::write(
        &yaml,
        format!(
            "embeddings:\n  model:\n    provider: openai\n    name: {}\n    vector_dim: 64\n    base_url: {}\n",
            crate::support::hashembed::MODEL,
            embed.url
        ),
    )
    .unwrap();
    let note = dir.path().join("heat-pump.md");
    std::fs::write(
        &note,
        "# Heat pump notes\n\nThe heat pump defrost cycle runs every ninety minutes in frost.\n",
    )
    .unwrap();
    // `ingest` of the note into a new database at `db`, the embedder named by flags.
    let ingest_new = |db: &str| {
        let o = groundwork(
            dir.path(),
            &home,
            &[
                "--db",
                db,
                "--embed-url",
                &embed.url,
                "--embed-model",
                crate::support::hashembed::MODEL,
                "ingest",
                note.to_str().unwrap(),
            ],
            None,
        );
        assert!(o.status.success(), "{}", err(&o));
    };
    let db = kb.join("kb101.lancedb");
    let db = db.to_str().unwrap();
    ingest_new(db);
    // Reopened with no flags: the embedder's endpoint from the user's haiku.rag.yaml.
    let o = groundwork(dir.path(), &home, &["--db", db, "info"], Some(&yaml));
    assert!(o.status.success(), "{}", err(&o));
    let info = String::from_utf8_lossy(&o.stdout);
    assert!(info.contains("layout     haiku.rag 0.101.1\n"), "{info}");
    let o = groundwork(
        dir.path(),
        &home,
        &["--db", db, "search", "defrost cycle", "--json"],
        Some(&yaml),
    );
    assert!(o.status.success(), "{}", err(&o));
    let ours = ids(&o);
    // haiku.rag 0.101.1 opens it as its own (no migration asked for) and finds the note.
    let theirs = haiku_search(&kb, "heat pump defrost cycle").await;
    assert_eq!(theirs["hits"][0]["title"], "Heat pump notes", "{theirs}");
    assert_eq!(theirs["hits"][0]["chunk_id"], ours[0].as_str());
    assert_eq!(theirs["documents"], serde_json::json!(["Heat pump notes"]));

    // Without the key, a new database is 0.77's (its settings say where the embedder is).
    std::fs::remove_file(config_dir.join("config.toml")).unwrap();
    let old = dir.path().join("old.lancedb");
    let old = old.to_str().unwrap();
    ingest_new(old);
    let o = groundwork(dir.path(), &home, &["--db", old, "info"], None);
    assert!(o.status.success(), "{}", err(&o));
    let info = String::from_utf8_lossy(&o.stdout);
    assert!(info.contains("layout     haiku.rag 0.77.0\n"), "{info}");
}
