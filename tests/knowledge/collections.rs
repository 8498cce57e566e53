//! Several collections end to end: two real LanceDB stores holding overlapping documents,
//! each built with its own embedder (`tests/support/collections.rs`), opened with
//! `--db NAME=PATH` or `[collections]`, through `search`, `info`, `list` and `ask` against
//! the scripted OpenAI-compatible server (the `sources` argument the model is offered, the
//! `Collection:` lines of the compacted request read back with `inspect`, the
//! per-collection ledger rows). The workbench: `tests/workbench/collections_workbench.rs`.

use std::path::Path;
use std::process::Output;

use crate::support::collections::{PAPERS_DIM, search_properties, two_collections};
use crate::support::scripted_server::{Reply, ScriptedServer};
use serde_json::{Value, json};

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn search_merges_collections_and_narrows_to_one() {
    let two = two_collections().await;
    let before = (
        two.manuals_embed.served.inputs.lock().unwrap().len(),
        two.papers_embed.served.inputs.lock().unwrap().len(),
    );
    let o = two
        .run_with_dbs(&["search", "inverter bolt torque", "--json", "--limit", "10"])
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let hits: Vec<Value> = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(hits.len(), 4, "{hits:#?}");
    let from = |c: &str| -> Vec<String> {
        hits.iter()
            .filter(|h| h["collection"] == c)
            .map(|h| h["document_title"].as_str().unwrap().to_string())
            .collect()
    };
    let mut m = from("manuals");
    m.sort();
    let mut p = from("papers");
    p.sort();
    assert_eq!(m, ["Handbook", "Reset Guide"]);
    assert_eq!(p, ["Bolt Study", "Handbook"]);
    // Merged by score, best first.
    let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    // Each collection's query was embedded by its own recorded embedder.
    for (server, n) in [
        (&two.manuals_embed, before.0),
        (&two.papers_embed, before.1),
    ] {
        let inputs = server.served.inputs.lock().unwrap();
        assert_eq!(&inputs[n..], ["inverter bolt torque"], "{inputs:?}");
    }

    // --collection narrows to one: no `collection` key then (one store is open).
    let o = two
        .run_with_dbs(&[
            "search",
            "inverter bolt torque",
            "--json",
            "--collection",
            "papers",
        ])
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let hits: Vec<Value> = serde_json::from_str(&out(&o)).unwrap();
    let ids: Vec<&str> = hits
        .iter()
        .map(|h| h["chunk_id"].as_str().unwrap())
        .collect();
    assert_eq!(hits.len(), 2);
    assert!(ids.contains(&two.chunk("papers", "handbook").as_str()));
    assert!(ids.contains(&two.chunk("papers", "study").as_str()));
    assert!(hits.iter().all(|h| h.get("collection").is_none()));

    // Text output names each result's collection.
    let o = two
        .run_with_dbs(&["search", "reset button", "--limit", "1"])
        .await;
    assert!(out(&o).starts_with("score "), "{}", out(&o));
    assert!(
        out(&o)
            .lines()
            .next()
            .unwrap()
            .contains("[manuals] test://reset")
    );
}

#[tokio::test]
async fn info_and_list_per_collection_and_config_collections() {
    let two = two_collections().await;
    let o = two.run_with_dbs(&["info"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    let blocks: Vec<&str> = text.split("\n\n").collect();
    assert_eq!(blocks.len(), 2, "{text}");
    assert!(blocks[0].starts_with(&format!("collection manuals\ndatabase   {}\n", two.manuals)));
    assert!(blocks[0].contains("embedder   openai hashembed-64 (64 dims)"));
    assert!(blocks[1].starts_with(&format!("collection papers\ndatabase   {}\n", two.papers)));
    assert!(blocks[1].contains("embedder   openai hashembed-32 (32 dims)"));

    let o = two.run_with_dbs(&["info", "--json"]).await;
    let infos: Vec<Value> = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(infos[0]["collection"], "manuals");
    assert_eq!(infos[1]["collection"], "papers");
    assert_eq!(infos[1]["embedder"]["vector_dim"], PAPERS_DIM);
    assert_eq!(infos[0]["documents"], 2);

    let o = two.run_with_dbs(&["list", "--json"]).await;
    let docs: Vec<Value> = serde_json::from_str(&out(&o)).unwrap();
    let mut rows: Vec<(String, String)> = docs
        .iter()
        .map(|d| {
            (
                d["collection"].as_str().unwrap().to_string(),
                d["title"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        [
            ("manuals".into(), "Handbook".into()),
            ("manuals".into(), "Reset Guide".into()),
            ("papers".into(), "Bolt Study".into()),
            ("papers".into(), "Handbook".into()),
        ]
    );
    let o = two.run_with_dbs(&["list", "--collection", "manuals"]).await;
    let listed = out(&o);
    let lines: Vec<&str> = listed.lines().map(str::trim_end).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines.iter().all(|l| !l.starts_with("manuals")), "{lines:?}");

    // The same collections from `[collections]` of the config file.
    let config = format!(
        "[collections]\nmanuals = \"{}\"\npapers = \"{}\"\n",
        two.manuals, two.papers
    );
    let o = two.run(&strings(&["info"]), Some(&config)).await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(out(&o), text, "config collections open the same databases");
    // A flag replaces the file's collections.
    let o = two
        .run(
            &["--db".to_string(), two.papers.clone(), "info".to_string()],
            Some(&config),
        )
        .await;
    assert!(
        out(&o).starts_with(&format!("database   {}\n", two.papers)),
        "{}",
        out(&o)
    );
}

#[tokio::test]
async fn bad_collection_flags_are_one_line_errors() {
    let two = two_collections().await;
    let missing = two.dir.path().join("nowhere.lancedb");
    let missing = missing.to_string_lossy();
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            strings(&["--db", &format!("a={}", two.manuals), "--db", &format!("a={}", two.papers), "search", "x"]),
            format!("error: --db a={}: collection 'a' is given twice", two.papers),
        ),
        (
            strings(&["--db", &format!("my-docs={}", two.manuals), "info"]),
            format!(
                "error: --db my-docs={}: 'my-docs' is not a valid collection name (a letter or _, then letters, digits or _)",
                two.manuals
            ),
        ),
        (
            strings(&["--db", &format!("manuals={}", two.manuals), "--db", &format!("lost={missing}"), "search", "x"]),
            format!(
                "error: collection lost: no knowledge base at {missing}; create one with `groundwork ingest PATH...`"
            ),
        ),
        (
            strings(&["--db", &format!("manuals={}", two.manuals), "--db", &format!("lost={missing}"), "info"]),
            format!(
                "error: collection lost: no knowledge base at {missing}; create one with `groundwork ingest PATH...`"
            ),
        ),
        (
            strings(&["--db", &format!("manuals={}", two.manuals), "--db", &two.papers, "list"]),
            format!(
                "error: --db {0} has no name but other --db flags do; name it: --db NAME={0}",
                two.papers
            ),
        ),
        (
            {
                let mut a = two.db_flags();
                a.extend(strings(&["search", "x", "--collection", "nope"]));
                a
            },
            "error: --collection nope: no such collection (open: manuals, papers)".into(),
        ),
        (
            {
                let mut a = two.db_flags();
                a.extend(strings(&["delete", "test://handbook"]));
                a
            },
            "error: `delete` works on one database: add --collection NAME (one of manuals, papers)"
                .into(),
        ),
        (
            strings(&["--db", &two.manuals, "search", "x", "--collection", "manuals"]),
            "error: --collection manuals: no named collections are open (give --db NAME=PATH or [collections] in the config file)".into(),
        ),
    ];
    for (args, expected) in cases {
        let o = two.run(&args, None).await;
        assert!(!o.status.success(), "{args:?} succeeded");
        assert_eq!(err(&o).trim_end(), expected, "{args:?}");
    }
    // Nothing was lost: both databases still hold their documents.
    let o = two.run_with_dbs(&["list", "--json"]).await;
    let docs: Vec<Value> = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(docs.len(), 4);
}

#[tokio::test]
async fn ask_offers_sources_compacts_with_collection_lines_and_ledgers_each_collection() {
    let two = two_collections().await;
    let manuals_handbook = two.chunk("manuals", "handbook");
    let papers_handbook = two.chunk("papers", "handbook");
    let study = two.chunk("papers", "study");
    let model = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "inverter bolt torque"})),
        Reply::tool_call(
            "rag_cite",
            json!({"chunk_ids": [manuals_handbook.clone(), papers_handbook.clone()]}),
        ),
        Reply::text("Twelve newton metres, in both the manuals and the papers."),
        // Question 2: a search of one collection, then an answer.
        Reply::tool_call(
            "rag_search",
            json!({"query": "bolt torque loss", "sources": ["papers"]}),
        ),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [study]})),
        Reply::text("The papers say torque is lost over time."),
    ])
    .await;
    let session = two.dir.path().join("s.sqlite");
    let session = session.to_string_lossy().into_owned();
    let ask = |q: &str| {
        let mut a = two.db_flags();
        a.extend(strings(&[
            "--session",
            &session,
            "--model-url",
            &model.base_url(),
            "--model",
            "scripted",
            "ask",
            q,
            "--json",
        ]));
        a
    };
    let o = two
        .run(&ask("How tight are the inverter bolts?"), None)
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let v: Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["status"], "grounded");
    let cited: Vec<(&str, &str)> = v["citations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["chunk_id"].as_str().unwrap(),
                c["collection"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        cited,
        [
            (manuals_handbook.as_str(), "manuals"),
            (papers_handbook.as_str(), "papers")
        ]
    );

    // The model is offered `sources`, naming both collections.
    let first = &model.requests()[0];
    let sources = &search_properties(first)["sources"];
    assert_eq!(
        sources["anyOf"][0],
        json!({"type": "array", "items": {"type": "string", "enum": ["manuals", "papers"]}}),
        "{sources:#}"
    );
    assert_eq!(sources["default"], Value::Null);
    // The search reached both collections: its return holds both Handbook chunks.
    let second = serde_json::to_string(&model.requests()[1]).unwrap();
    assert!(second.contains(&manuals_handbook) && second.contains(&papers_handbook));

    // The question's searches in the saved state: results of both collections.
    let saved = crate::support::session_json(Path::new(&session));
    let both = saved["state"]["rag"]["searches"]["inverter bolt torque"]
        .as_array()
        .expect("the search is recorded")
        .clone();
    let mut colls: Vec<&str> = both
        .iter()
        .map(|r| r["collection"].as_str().unwrap())
        .collect();
    colls.sort();
    colls.dedup();
    assert_eq!(colls, ["manuals", "papers"]);

    let o = two.run(&ask("Does the torque hold?"), None).await;
    assert!(o.status.success(), "{}", err(&o));
    // `sources: ["papers"]` searched papers alone.
    let saved = crate::support::session_json(Path::new(&session));
    let searches = &saved["state"]["rag"]["searches"];
    let narrowed = searches["bolt torque loss"]
        .as_array()
        .expect("the search is recorded");
    assert!(!narrowed.is_empty());
    assert!(
        narrowed.iter().all(|r| r["collection"] == "papers"),
        "{narrowed:#?}"
    );

    // The compacted first request of question 2, as `inspect` reads it from the session:
    // question 1's evidence in the capsule, each entry with its collection.
    let o = two
        .run(&strings(&["inspect", &session, "--json"]), None)
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let inspected = out(&o);
    let requests: Value = serde_json::from_str(&inspected).unwrap();
    let requests = requests
        .as_array()
        .or_else(|| requests["requests"].as_array())
        .expect("a list of requests")
        .clone();
    let q2 = requests
        .iter()
        .map(|r| serde_json::to_string(&r["compacted"]).unwrap_or_default())
        .find(|c| c.contains("Collection: "))
        .unwrap_or_else(|| panic!("no compacted request has a Collection: line: {inspected}"));
    for coll in ["manuals", "papers"] {
        assert!(q2.contains(&format!("Collection: {coll}")), "{q2}");
    }
    assert!(
        q2.contains(&format!(
            "[{manuals_handbook}] Source: \\\"Handbook\\\" (test://handbook)\\nCollection: manuals"
        )),
        "{q2}"
    );

    // The ledger: question 1's cited chunks, one per collection.
    let loaded = groundwork::session::Session::load(Path::new(&session)).unwrap();
    let transcript =
        groundwork::host::transcript::Transcript::build(&loaded.messages, &loaded.state);
    let row = &transcript.ledger[0];
    let mut cited: Vec<(String, Option<String>)> = row
        .cited
        .iter()
        .map(|c| (c.evidence.chunk_id.clone(), c.evidence.collection.clone()))
        .collect();
    cited.sort();
    let mut expected = vec![
        (manuals_handbook.clone(), Some("manuals".to_string())),
        (papers_handbook.clone(), Some("papers".to_string())),
    ];
    expected.sort();
    assert_eq!(cited, expected);
    // Question 2 searched papers alone and cited from it.
    let q2 = &transcript.ledger[1];
    assert_eq!(q2.cited.len(), 1);
    assert_eq!(q2.cited[0].evidence.chunk_id, study);
    assert!(
        q2.cited
            .iter()
            .chain(&q2.uncited)
            .all(|c| c.evidence.collection.as_deref() == Some("papers")),
        "{q2:#?}"
    );
}
