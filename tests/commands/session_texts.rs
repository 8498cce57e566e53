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
    let journaled = dir.path().join("journaled.sqlite");
    let mut session = Session::new("m");
    let mut recorded: Vec<RequestSnapshot> = Vec::new();
    for q in 0..QUESTIONS {
        let (messages, snaps) = question(&session.messages, q);
        recorded.extend(snaps.iter().cloned());
        session.commit(messages, state(q), snaps);
        // Saved after every question, as `ask` does, each save committing what the
        // question added: the capsules too, each as a change to the one before.
        session.save(&journaled).unwrap();
    }
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
        "saved question by question"
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

/// Picture `n`'s bytes as base64: distinct for every picture, about 4 KB.
fn picture_data(n: usize) -> String {
    let mut state = n as u64 * 2_654_435_761 + 1;
    (0..4096)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let k = (state % 64) as u8;
            (match k {
                0..=25 => b'A' + k,
                26..=51 => b'a' + k - 26,
                52..=61 => b'0' + k - 52,
                62 => b'+',
                _ => b'/',
            }) as char
        })
        .collect()
}

/// Picture `n` as user content after its label, as a search attaches it and as the
/// capsule attaches it again.
fn picture(n: usize) -> [Value; 2] {
    [
        json!(format!(
            "Figure of chunk c{n}-0 (#/pictures/{n}) [haiku.rag/retrieved-image]"
        )),
        json!({"kind": "binary", "data": picture_data(n), "media_type": "image/png",
            "identifier": format!("#/pictures/{n}"), "vendor_metadata": null}),
    ]
}

/// Every question retrieves a picture of its own and cites it, so the capsule sent with
/// every request carries a picture more each question. The file keeps each picture's
/// list as a change to the list before it: a picture costs the file its bytes in the
/// history and once more in the text table, not once per request (which grew with the
/// square of the conversation), and every request reads back exactly.
#[test]
fn the_capsules_pictures_cost_the_file_each_picture_once() {
    const ASKED: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pictures.sqlite");
    let mut session = Session::new("m");
    let mut recorded: Vec<RequestSnapshot> = Vec::new();
    for q in 0..ASKED {
        let (mut messages, snaps) = question(&session.messages, q);
        // The search's return is followed by its picture in the history.
        let start = session.messages.len();
        let mut v = serde_json::to_value(&messages[start + 2]).unwrap();
        v["parts"].as_array_mut().unwrap().push(json!({
            "part_kind": "user-prompt", "content": picture(q), "timestamp": ts(q, 2)}));
        messages[start + 2] = msg(v);
        // What was sent: the capsule's pictures (every one cited so far) beside its
        // text, in a new part every request; the history's pictures stripped.
        let snaps: Vec<RequestSnapshot> = snaps
            .into_iter()
            .map(|mut s| {
                s.raw.truncate(start);
                s.raw.extend(
                    messages[start..]
                        .iter()
                        .take(s.compacted.len() - start)
                        .cloned(),
                );
                let mut sent: Vec<ModelMessage> = s.compacted[..start].to_vec();
                sent.extend(s.raw[start..].iter().cloned());
                if q > 0 {
                    let mut v = serde_json::to_value(&sent[start]).unwrap();
                    let pictures: Vec<Value> = (0..q).flat_map(picture).collect();
                    let parts = v["parts"].as_array_mut().unwrap();
                    parts.insert(
                        0,
                        s.compacted[start]
                            .as_request()
                            .map_or(json!(null), |r| serde_json::to_value(&r.parts[0]).unwrap()),
                    );
                    parts.insert(
                        1,
                        json!({"part_kind": "user-prompt", "content": pictures,
                        "timestamp": ts(q, 60 + s.request)}),
                    );
                    sent[start] = msg(v);
                }
                for m in &mut sent[..start] {
                    let mut v = serde_json::to_value(&*m).unwrap();
                    let parts = v["parts"].as_array_mut().unwrap();
                    let before = parts.len();
                    parts.retain(|p| !p["content"].is_array());
                    if parts.len() != before {
                        *m = msg(v);
                    }
                }
                s.compacted = sent;
                s.raw_tokens = TokenCounts::estimate(&s.instructions, &s.raw);
                s.compacted_tokens = TokenCounts::estimate(&s.instructions, &s.compacted);
                s
            })
            .collect();
        recorded.extend(snaps.iter().cloned());
        session.commit(messages, state(q), snaps);
        session.save(&path).unwrap();
    }
    for (i, s) in session.requests().enumerate() {
        assert!(s == recorded[i], "request {} as committed", i + 1);
    }
    let replayed = Session::load(&path).unwrap();
    assert!(
        replayed.requests().eq(recorded.iter().cloned()),
        "saved question by question (file and journal), every request reads back"
    );
    let whole = dir.path().join("whole.json");
    replayed.save(&whole).unwrap();
    let loaded = Session::load(&whole).unwrap();
    assert!(
        loaded.requests().eq(recorded.iter().cloned()),
        "written whole, every request reads back"
    );

    let file: Value = serde_json::from_slice(&std::fs::read(&whole).unwrap()).unwrap();
    let pictures: usize = (0..ASKED).map(|n| picture_data(n).len()).sum();
    let base = serde_json::to_vec(&json!({"messages": file["messages"], "state": file["state"]}))
        .unwrap()
        .len();
    let section = serde_json::to_vec(&file["groundwork"]).unwrap().len();
    // Each picture once more, and a few hundred bytes a request for the rest (the
    // receipts, the capsule's text as a change to the one before, references).
    let requests = 3 * ASKED;
    assert!(
        section <= pictures + 1200 * requests,
        "Groundwork's section takes {section} bytes for {pictures} bytes of pictures \
         and {requests} requests (the history and state: {base})"
    );
    let texts = file["groundwork"]["tables"]["texts"].as_array().unwrap();
    assert!(
        texts.iter().any(|t| t.get("over").is_some()),
        "a list is stored as a change to the list before it, over the capsule between"
    );
}
