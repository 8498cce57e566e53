//! The capsules of a long session: a generated conversation whose every request carries
//! the capsule of all the evidence cited so far (written as compaction writes it: a group
//! per earlier question, newest first, labelled with its position; now and then an
//! earlier chunk cited again and moved to the front). Its file keeps each capsule as a
//! change to the one before, so the text table grows with what each question added;
//! every request reads back exactly, and the inspector shows the same for every request
//! as it does for the older file that held each capsule whole, and for the requests as
//! they were recorded.

use groundwork::capabilities::compaction::{ENTRY_SEPARATOR, capsule_header, group_label};
use groundwork::engine::capability::ToolDef;
use groundwork::engine::events::{RequestSnapshot, TokenCounts};
use groundwork::engine::messages::ModelMessage;
use groundwork::host::inspect::{InspectedRequest, render_request, unified_diff};
use groundwork::session::Session;
use serde_json::{Map, Value, json};

const QUESTIONS: usize = 90;

fn msg(v: Value) -> ModelMessage {
    serde_json::from_value(v).unwrap()
}

fn ts(q: usize, k: usize) -> String {
    format!("2026-01-01T{:02}:{:02}:{:02}Z", q / 60 % 24, q % 60, k)
}

fn tools() -> Vec<ToolDef> {
    ["rag_search", "rag_cite"]
        .iter()
        .map(|n| {
            serde_json::from_value(json!({"name": n, "description": format!("{n}: does it"),
                "parameters": {"type": "object"}, "capability_id": "rag"}))
            .unwrap()
        })
        .collect()
}

/// The chunk question `q` cites: its own, or every seventh question one cited before.
fn cited_by(q: usize) -> usize {
    if q % 7 == 3 { q / 2 } else { q }
}

/// The capsule at question `q`: the chunks cited before it, grouped by the newest
/// question that cited each, newest first.
fn capsule(q: usize) -> String {
    let mut newest: Vec<(usize, usize)> = Vec::new(); // (question, chunk)
    for asked in 0..q {
        let chunk = cited_by(asked);
        newest.retain(|&(_, c)| c != chunk);
        newest.push((asked, chunk));
    }
    let mut text = capsule_header().to_string();
    for (position, (asked, chunk)) in newest.iter().rev().enumerate() {
        text.push_str(ENTRY_SEPARATOR);
        text.push_str(&group_label(position + 1));
        text.push_str(ENTRY_SEPARATOR);
        text.push_str(&format!(
            "[c{chunk}-0] Source: \"doc {}\"\nPassage {chunk}, cited in question {asked}: {}",
            chunk % 17,
            "the operator log records the state of charge. ".repeat(4)
        ));
    }
    text
}

/// What was sent for `raw`: earlier search results as receipts, the capsule on the
/// question's first message (in a new part every request).
fn sent_for(raw: &[ModelMessage], start: usize, q: usize, k: usize) -> Vec<ModelMessage> {
    raw.iter()
        .enumerate()
        .map(|(i, m)| {
            let mut v = serde_json::to_value(m).unwrap();
            if i < start && v["parts"][0]["tool_name"] == "rag_search" {
                v["parts"][0]["content"] = json!("[evidence receipt]");
            } else if i == start && q > 0 {
                v["parts"].as_array_mut().unwrap().insert(
                    0,
                    json!({"part_kind": "user-prompt", "content": capsule(q),
                        "timestamp": ts(q, 50 + k)}),
                );
            }
            msg(v)
        })
        .collect()
}

fn snapshot(raw: &[ModelMessage], sent: Vec<ModelMessage>, q: usize, k: usize) -> RequestSnapshot {
    let instructions = "Answer from the knowledge base and cite.";
    RequestSnapshot {
        run_id: format!("run-{q}"),
        request: k + 1,
        raw_tokens: TokenCounts::estimate(instructions, raw),
        compacted_tokens: TokenCounts::estimate(instructions, &sent),
        raw: raw.to_vec(),
        compacted: sent,
        tools: tools(),
        instructions: instructions.into(),
        tokens: None,
    }
}

/// Question `q` over `messages`: the messages after it and its three requests.
fn question(messages: &[ModelMessage], q: usize) -> (Vec<ModelMessage>, Vec<RequestSnapshot>) {
    let mut messages = messages.to_vec();
    let start = messages.len();
    let mut snaps = Vec::new();
    messages.push(msg(
        json!({"kind": "request", "timestamp": ts(q, 0), "parts": [
        {"part_kind": "user-prompt", "content": format!("Question {q}?"), "timestamp": ts(q, 0)}]}),
    ));
    let results = format!(
        "<chunk id=\"c{q}-0\">{}</chunk>",
        "retrieved text ".repeat(40)
    );
    for (k, (name, content)) in [("rag_search", results), ("rag_cite", "Cited.".into())]
        .into_iter()
        .enumerate()
    {
        let raw = messages.clone();
        snaps.push(snapshot(&raw, sent_for(&raw, start, q, k), q, k));
        let id = format!("call-{q}-{k}");
        messages.push(msg(
            json!({"kind": "response", "timestamp": ts(q, 2 * k + 1), "parts": [
            {"part_kind": "tool-call", "tool_name": name, "args": "{}", "tool_call_id": id}]}),
        ));
        messages.push(msg(
            json!({"kind": "request", "timestamp": ts(q, 2 * k + 2), "parts": [
            {"part_kind": "tool-return", "tool_name": name, "content": content,
             "tool_call_id": id, "timestamp": ts(q, 2 * k + 2)}]}),
        ));
    }
    let raw = messages.clone();
    snaps.push(snapshot(&raw, sent_for(&raw, start, q, 2), q, 2));
    messages.push(msg(
        json!({"kind": "response", "timestamp": ts(q, 9), "parts": [
        {"part_kind": "text", "content": format!("Answer {q} [c{}-0].", cited_by(q))}]}),
    ));
    (messages, snaps)
}

fn state(q: usize) -> Map<String, Value> {
    let index: Map<String, Value> = (0..=q)
        .map(|c| {
            (
                format!("c{c}-0"),
                json!({"content": "passage", "page_numbers": [c]}),
            )
        })
        .collect();
    json!({"rag": {"citation_index": index}})
        .as_object()
        .unwrap()
        .clone()
}

/// What the inspector shows of request `number`.
fn shown(number: usize, snapshot: RequestSnapshot) -> String {
    let diff = unified_diff(&snapshot);
    let r = InspectedRequest {
        number,
        recorded: true,
        snapshot,
    };
    format!("{}\n{diff}", render_request(&r, 120))
}

fn assert_shows(session: &Session, want: &[String], what: &str) {
    assert_eq!(session.request_count(), want.len(), "{what}: request count");
    for (i, (got, want)) in session.requests().zip(want).enumerate() {
        let got = shown(i + 1, got);
        assert!(got == *want, "{what}: request {} is shown otherwise", i + 1);
    }
}

#[test]
fn every_request_of_a_long_session_shows_as_recorded_and_as_the_older_file_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let journaled = dir.path().join("journaled.json");
    let mut session = Session::new("m");
    let mut recorded: Vec<RequestSnapshot> = Vec::new();
    let mut appended = false;
    for q in 0..QUESTIONS {
        let (messages, snaps) = question(&session.messages, q);
        recorded.extend(snaps.iter().cloned());
        session.commit(messages, state(q), snaps);
        // Saved after every question, as `ask` does, appending to the journal from the
        // start (`ask` does once the file passes 1 MiB): the capsules go there too, each
        // as a change to the one before.
        let policy = groundwork::session::Policy {
            journal_from: 0,
            fold_ratio: 1,
        };
        session.save_with(&journaled, policy).unwrap();
        appended |= groundwork::session::journal_path(&journaled).exists();
    }
    assert!(appended, "the saves appended to a journal");
    let want: Vec<String> = recorded
        .iter()
        .enumerate()
        .map(|(i, s)| shown(i + 1, s.clone()))
        .collect();
    for (i, s) in session.requests().enumerate() {
        assert!(s == recorded[i], "request {} as committed", i + 1);
    }

    let path = dir.path().join("s.json");
    session.save(&path).unwrap();
    let loaded = Session::load(&path).unwrap();
    assert_shows(&loaded, &want, "written whole and read back");
    let replayed = Session::load(&journaled).unwrap();
    assert!(
        replayed.requests().eq(recorded.iter().cloned()),
        "saved question by question (file and journal)"
    );

    // The texts are stored as changes: the whole table takes a few times the last
    // capsule, where whole texts take about half the number of questions times it.
    let file: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let texts = &file["groundwork"]["tables"]["texts"];
    let stored = texts.as_array().unwrap();
    assert_eq!(stored.len(), QUESTIONS - 1, "one capsule a question");
    assert!(stored[0].is_string(), "the first text is whole");
    assert!(
        stored[1..].iter().all(Value::is_array),
        "the others are changes"
    );
    let table = serde_json::to_vec(texts).unwrap().len();
    let last = capsule(QUESTIONS - 1).len();
    assert!(
        table < 4 * last,
        "the text table takes {table} bytes, the last capsule {last}"
    );
    let base = serde_json::to_vec(&json!({"messages": file["messages"], "state": file["state"]}))
        .unwrap()
        .len();
    let size = std::fs::metadata(&path).unwrap().len() as usize;
    assert!(
        size * 2 <= base * 3,
        "the file takes {size} bytes, its messages and state {base}"
    );

    // The older form (version 2) held every text whole: it reads as the same session,
    // shows every request the same, and is written in the new form.
    let mut old = file.clone();
    old["groundwork"]["version"] = json!(2);
    old["groundwork"]["tables"]["texts"] = json!((1..QUESTIONS).map(capsule).collect::<Vec<_>>());
    let old_path = dir.path().join("old.json");
    std::fs::write(&old_path, serde_json::to_vec(&old).unwrap()).unwrap();
    let older = Session::load(&old_path).unwrap();
    assert!(older == loaded, "the older file reads as the same session");
    assert_shows(&older, &want, "the older file");
    older.save(&old_path).unwrap();
    let rewritten: Value = serde_json::from_slice(&std::fs::read(&old_path).unwrap()).unwrap();
    assert_eq!(
        rewritten["groundwork"]["tables"]["texts"], *texts,
        "written in the new form"
    );
    assert_eq!(
        rewritten["groundwork"]["version"],
        groundwork::session::SESSION_FORMAT_VERSION
    );
}
