//! Long sessions: a generated 500-question conversation (search → cite → answer, three
//! model requests a question) with the request snapshots the engine records, compacted
//! as Groundwork compacts (earlier search results sent as receipts, a capsule of the cited
//! evidence riding on the question with a fresh part every request). Figures:
//!
//! - the session file's size against its `messages` + `state` alone (printed);
//! - committing and saving question 500 into a session loaded from its SQLite file, as
//!   `ask` does over a session read whole: the save is one transaction adding what the
//!   question added (synced); the save alone; and writing the whole session into a new
//!   file (what continuing a JSON session does once);
//! - opening it: load, then the workbench's model (`App::new`: transcript, ledger,
//!   request index), up to the first frame's data;
//! - what `PRAGMA synchronous` costs a save: SQLite alone writing the bytes the last
//!   question adds, in one transaction of a copy of the session file, at FULL (what
//!   sessions use: SQLite's default in rollback-journal mode), NORMAL and OFF;
//! - `inspect --request N`: load, rebuild request N, render it;
//! - a counterfactual replay's preparation of question N (the prefix, the start state
//!   rebuilt from the timings' recorded starts, the original run's figures and sent text),
//!   and the diff of what the last question sent against a run without its last request.
//!
//! Each question is committed as the host commits it, its start recorded in its timing.
//!
//! The capsule in the generated conversation is written as compaction writes it (a group
//! per earlier question, newest first, labelled with its position) and carries the newest
//! 20 cited chunks;
//! `GROUNDWORK_BENCH_CAPSULE=all` makes it carry every chunk cited so far, as a real
//! capsule does (see the README on what that costs the file).
//!
//! `cargo bench --bench sessions`

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use groundwork::engine::capability::ToolDef;
use groundwork::engine::events::{RequestSnapshot, TokenCounts};
use groundwork::engine::messages::ModelMessage;
use groundwork::host::inspect::SessionRequests;
use groundwork::session::Session;
use groundwork::tui::app::{App, HostInfo};
use serde_json::{Map, Value, json};

/// 500, or `GROUNDWORK_BENCH_QUESTIONS`.
fn questions() -> usize {
    std::env::var("GROUNDWORK_BENCH_QUESTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

fn msg(v: Value) -> ModelMessage {
    serde_json::from_value(v).unwrap()
}

fn ts(q: usize, k: usize) -> String {
    format!(
        "2026-01-01T{:02}:{:02}:{:02}.{:06}Z",
        q / 60 % 24,
        q % 60,
        k,
        q * 7 + k
    )
}

fn tools() -> Vec<ToolDef> {
    ["rag_search", "rag_cite", "rag_read"]
        .iter()
        .map(|n| {
            serde_json::from_value(
                json!({"name": n, "description": format!("{n}: ").repeat(20),
                "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
                "capability_id": "rag"}),
            )
            .unwrap()
        })
        .collect()
}

/// About what the engine sends: the preamble and the RAG instructions.
fn instructions() -> String {
    "You answer from the knowledge base and cite what you use. ".repeat(100)
}

/// The receipt form of a message once its question is over (earlier search results are
/// sent as receipts), or the message itself.
fn settled(m: &ModelMessage) -> ModelMessage {
    let v = serde_json::to_value(m).unwrap();
    let p0 = &v["parts"][0];
    if p0["part_kind"] == "tool-return" && p0["tool_name"] == "rag_search" {
        let mut r = v.clone();
        r["parts"][0]["content"] = json!("[evidence receipt: see the capsule]");
        msg(r)
    } else {
        m.clone()
    }
}

/// The capsule of question `q` as compaction writes it: the header, then one group per
/// earlier question (newest first, labelled with its position), each holding the chunk
/// that question cited, for the newest `cited` questions.
fn capsule(q: usize, cited: usize) -> String {
    use groundwork::capabilities::compaction::{ENTRY_SEPARATOR, capsule_header, group_label};
    let mut text = capsule_header().to_string();
    for (position, asked) in (q.saturating_sub(cited)..q).rev().enumerate() {
        text.push_str(ENTRY_SEPARATOR);
        text.push_str(&group_label(position + 1));
        text.push_str(ENTRY_SEPARATOR);
        text.push_str(&format!(
            "[c{asked}-0] Source: \"doc {}\"\n{}",
            asked % 17,
            cited_content()
        ));
    }
    text
}

/// The content of every cited chunk (as the state's citation index holds it).
fn cited_content() -> String {
    "a retrieved passage of the knowledge base ".repeat(6)
}

/// `m` with the capsule in a new first part.
fn with_capsule(m: &ModelMessage, q: usize, k: usize, cited: usize) -> Value {
    let mut c = serde_json::to_value(m).unwrap();
    c["parts"].as_array_mut().unwrap().insert(
        0,
        json!({"part_kind": "user-prompt", "content": capsule(q, cited), "timestamp": ts(q, 50 + k)}),
    );
    c
}

/// The sent form of `raw` at request `k` of question `q`: the settled earlier questions,
/// the question's first message with the capsule of cited evidence (a fresh part each
/// request), the rest as stored.
fn sent_for(
    settled: &[ModelMessage],
    raw: &[ModelMessage],
    q: usize,
    k: usize,
) -> Vec<ModelMessage> {
    let start = settled.len();
    let mut sent = settled.to_vec();
    for (i, m) in raw.iter().enumerate().skip(start) {
        if i == start && q > 0 {
            let cited = if std::env::var("GROUNDWORK_BENCH_CAPSULE").as_deref() == Ok("all") {
                q
            } else {
                q.min(20)
            };
            sent.push(msg(with_capsule(m, q, k, cited)));
        } else {
            sent.push(m.clone());
        }
    }
    sent
}

fn snapshot(raw: &[ModelMessage], sent: Vec<ModelMessage>, k: usize, q: usize) -> RequestSnapshot {
    let instructions = instructions();
    RequestSnapshot {
        run_id: format!("run-{q}"),
        request: k,
        raw_tokens: TokenCounts::estimate(&instructions, raw),
        compacted_tokens: TokenCounts::estimate(&instructions, &sent),
        tokens: None,
        raw: raw.to_vec(),
        compacted: sent,
        tools: tools(),
        instructions,
    }
}

type Question = (Vec<ModelMessage>, Map<String, Value>, Vec<RequestSnapshot>);

/// Question `q` over `session` (whose earlier messages are sent as `settled`): its
/// messages, state and snapshots.
fn question(session: &Session, settled: &[ModelMessage], q: usize) -> Question {
    let instructions = instructions();
    let mut messages = session.messages.clone();
    let mut snaps = Vec::new();
    messages.push(msg(
        json!({"kind": "request", "instructions": instructions, "run_id": format!("run-{q}"),
        "timestamp": ts(q, 0), "parts": [{"part_kind": "user-prompt",
        "content": format!("Question {q}: what does the operator log say about unit {}?", q % 31),
        "timestamp": ts(q, 0)}]}),
    ));
    let results: String = (0..5)
        .map(|c| {
            format!(
                "<chunk id=\"c{q}-{c}\" document=\"doc {}\">{}</chunk>\n",
                (q + c) % 17,
                "a retrieved passage of the knowledge base ".repeat(14)
            )
        })
        .collect();
    let steps = [
        (
            "rag_search",
            json!({"query": format!("unit {}", q % 31)}),
            results,
        ),
        (
            "rag_cite",
            json!({"chunk_ids": [format!("c{q}-0")]}),
            "Cited 1 chunk.".to_string(),
        ),
    ];
    for (k, (name, args, content)) in steps.into_iter().enumerate() {
        let raw = messages.clone();
        snaps.push(snapshot(&raw, sent_for(settled, &raw, q, k), k + 1, q));
        let id = format!("call-{q}-{k}");
        messages.push(msg(json!({"kind": "response", "model_name": "bench", "timestamp": ts(q, 2 * k + 1),
            "usage": {"input_tokens": 4000 + q, "output_tokens": 30},
            "parts": [{"part_kind": "tool-call", "tool_name": name, "args": args.to_string(), "tool_call_id": id}]})));
        messages.push(msg(
            json!({"kind": "request", "instructions": instructions, "run_id": format!("run-{q}"),
            "timestamp": ts(q, 2 * k + 2), "parts": [{"part_kind": "tool-return", "tool_name": name,
            "content": content, "tool_call_id": id, "timestamp": ts(q, 2 * k + 2)}]}),
        ));
    }
    let raw = messages.clone();
    snaps.push(snapshot(&raw, sent_for(settled, &raw, q, 2), 3, q));
    messages.push(msg(json!({"kind": "response", "model_name": "bench", "timestamp": ts(q, 9),
        "usage": {"input_tokens": 4200 + q, "output_tokens": 120},
        "parts": [{"part_kind": "text", "content": format!("The log records {} entries for unit {} [1]. {}",
            q % 7, q % 31, "More of the answer. ".repeat(20))}]})));
    let mut state = session.state.clone();
    let index = state
        .entry("citation_index")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .unwrap();
    index.insert(
        format!("c{q}-0"),
        json!({"document_title": format!("doc {}", q % 17),
        "content": cited_content(), "page_numbers": [q % 40]}),
    );
    (messages, state, snaps)
}

/// A session of `questions` questions, and the settled sent form of its messages.
fn build(questions: usize) -> (Session, Vec<ModelMessage>) {
    let mut s = Session::new("bench");
    let mut settled_msgs = Vec::new();
    for q in 0..questions {
        let (m, st, snaps) = question(&s, &settled_msgs, q);
        settled_msgs.extend(m[s.messages.len()..].iter().map(settled));
        commit(&mut s, m, st, snaps);
    }
    (s, settled_msgs)
}

/// Commits a question as the host does: its start recorded in its timing.
fn commit(
    s: &mut Session,
    m: Vec<ModelMessage>,
    st: Map<String, Value>,
    snaps: Vec<RequestSnapshot>,
) {
    let start = s.run_start(groundwork::capabilities::state::as_a_new_question_sees_it(
        &s.state,
    ));
    let n = s.groundwork.timings.len();
    s.commit(m, st, snaps);
    s.groundwork.timings.push(groundwork::session::RunTiming {
        run_id: format!("run-{n}"),
        started_at: chrono::Utc::now(),
        duration_ms: 1000,
        requests: 3,
        start: Some(start),
    });
}

fn host() -> HostInfo {
    HostInfo {
        knowledge_bases: Vec::new(),
        knowledge_base_note: None,
        collections: Vec::new(),
        db: "bench.lancedb".into(),
        model: "bench".into(),
        model_ready: true,
        model_help: String::new(),
        capabilities: vec!["rag".into()],
        max_searches: 5,
        max_executions: 15,
    }
}

fn sessions(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.sqlite");
    let questions = questions();
    let (before, settled_msgs) = build(questions - 1);
    let mut full = before.clone();
    let (m, st, snaps) = question(&full, &settled_msgs, questions - 1);
    commit(&mut full, m.clone(), st.clone(), snaps.clone());
    full.save(&path).unwrap();
    let file = std::fs::metadata(&path).unwrap().len();
    let base = serde_json::to_vec(&json!({"messages": full.messages, "state": full.state}))
        .unwrap()
        .len();
    println!(
        "{questions} questions, {} messages, {} requests: session file {file} bytes, messages + state {base} bytes, ratio {:.3}; the state alone {} bytes",
        full.messages.len(),
        full.request_count(),
        file as f64 / base as f64,
        serde_json::to_vec(&full.state).unwrap().len()
    );

    let mut g = c.benchmark_group(format!("long session ({questions} questions)"));
    g.sample_size(10);
    let saved = dir.path().join("save.sqlite");
    before.save(&saved).unwrap();
    let pristine = std::fs::read(&saved).unwrap();
    let reload = || {
        std::fs::write(&saved, &pristine).unwrap();
        Session::load(&saved).unwrap()
    };
    g.bench_function("commit and save the last question (one transaction)", |b| {
        b.iter_batched(
            || (reload(), m.clone(), st.clone(), snaps.clone()),
            |(mut s, m, st, snaps)| {
                commit(&mut s, m, st, snaps);
                s.save(&saved).unwrap();
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("save the last question, committed (one transaction)", |b| {
        b.iter_batched(
            || {
                let mut s = reload();
                commit(&mut s, m.clone(), st.clone(), snaps.clone());
                s
            },
            |s| s.save(&saved).unwrap(),
            BatchSize::LargeInput,
        )
    });
    let fresh = dir.path().join("fresh.sqlite");
    g.bench_function("write the whole session into a new file", |b| {
        b.iter_batched(
            || {
                let _ = std::fs::remove_file(&fresh);
                let s = Session::load(&path).unwrap();
                // A session read from JSON: nothing of it is in the new file yet.
                Session::from_json(&String::from_utf8(s.to_json().unwrap()).unwrap(), &fresh)
                    .unwrap()
            },
            |s| s.save(&fresh).unwrap(),
            BatchSize::LargeInput,
        )
    });
    // The bytes the last question added to the file, written by SQLite alone at each
    // `synchronous` setting (sessions are saved at FULL).
    let added = (file as usize).saturating_sub(pristine.len());
    println!("the last question adds {added} bytes to the file");
    let scratch = dir.path().join("sync.sqlite");
    std::fs::copy(&path, &scratch).unwrap();
    let blob = vec![7u8; added.max(1)];
    for sync in ["FULL", "NORMAL", "OFF"] {
        let conn = rusqlite::Connection::open(&scratch).unwrap();
        conn.execute_batch(&format!(
            "PRAGMA synchronous = {sync}; CREATE TABLE IF NOT EXISTS bench_sync (b BLOB);"
        ))
        .unwrap();
        g.bench_function(
            format!("SQLite alone: one transaction of the question's bytes, synchronous={sync}"),
            |b| {
                b.iter(|| {
                    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
                    conn.execute("DELETE FROM bench_sync", []).unwrap();
                    conn.execute("INSERT INTO bench_sync VALUES (?1)", [&blob])
                        .unwrap();
                    conn.execute_batch("COMMIT").unwrap();
                })
            },
        );
    }
    g.bench_function("open: load and the workbench's model", |b| {
        b.iter(|| {
            let s = Session::load(&path).unwrap();
            App::new(s, Some(path.clone()), host())
        })
    });
    for n in [1, full.request_count() / 2, full.request_count()] {
        g.bench_function(format!("inspect --request {n}"), |b| {
            b.iter(|| {
                let s = Session::load(&path).unwrap();
                let r = SessionRequests::of(&s).get(n).unwrap();
                groundwork::host::inspect::render_request(&r, 120)
            })
        });
    }
    // The same session as JSON (its export, what the sessions of earlier versions were),
    // side by side: reading it, and the last request from it.
    let json = dir.path().join("long.json");
    std::fs::write(&json, full.to_json().unwrap()).unwrap();
    println!(
        "the same session as JSON: {} bytes",
        std::fs::metadata(&json).unwrap().len()
    );
    g.bench_function("JSON: load", |b| b.iter(|| Session::load(&json).unwrap()));
    g.bench_function("SQLite: load", |b| b.iter(|| Session::load(&path).unwrap()));
    let last = full.request_count();
    g.bench_function(format!("JSON: inspect --request {last}"), |b| {
        b.iter(|| {
            let s = Session::load(&json).unwrap();
            let r = SessionRequests::of(&s).get(last).unwrap();
            groundwork::host::inspect::render_request(&r, 120)
        })
    });
    g.bench_function("inspect (overview)", |b| {
        b.iter(|| {
            let s = Session::load(&path).unwrap();
            groundwork::host::inspect::render_overview_rows(&SessionRequests::of(&s).overview())
        })
    });
    g.bench_function(
        "replay: the diff of what the last question sent against it without its last request",
        |b| {
            b.iter(|| {
                use groundwork::host::replay::{sent_diff, sent_text};
                let d = sent_diff(&sent_text(&snaps), &sent_text(&snaps[..snaps.len() - 1]));
                assert!(d.contains("-request 3"));
                d
            })
        },
    );
    let loaded = Session::load(&path).unwrap();
    for q in [1, questions / 2, questions] {
        g.bench_function(format!("replay: prepare question {q}"), |b| {
            b.iter(|| groundwork::host::replay::prepare(&loaded, q).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, sessions);
criterion_main!(benches);
