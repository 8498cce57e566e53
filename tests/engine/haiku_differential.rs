//! The multi-turn differential check against haiku.rag 0.77 itself.
//!
//! `tests/fixtures/haiku_session/` holds a 5-question conversation recorded by haiku.rag's
//! own RAG + EvidenceCompaction + CitationPolicy capabilities over the haiku.rag-built
//! fixture database (`record_session.sh`): the model's turns (`script.json`), the structure
//! of every request haiku.rag sent (`wire.json`: which tool returns are capsule, receipt or
//! live evidence, the capsule's groups of chunk ids, where redirects and pictures are, which
//! tools are offered) and the final state (`final_state.json`). Here the same turns are
//! replayed through Groundwork's engine (the real async-openai client against the scripted
//! OpenAI-compatible server) over a copy of the same database, and both are compared
//! request by request, apart from prose. Then the session we wrote is handed to haiku.rag
//! itself (`load_groundwork_session.py`), which must load it and continue it.

use crate::support::copy_dir;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::support::hashembed;
use crate::support::scripted_server::{Reply, ScriptedServer};
use groundwork::capabilities::compaction::hook::EvidenceCompactionCapability;
use groundwork::capabilities::compaction::{capsule_header, group_label, receipt};
use groundwork::capabilities::policy::CitationPolicyCapability;
use groundwork::capabilities::rag::RagCapability;
use groundwork::config::AppConfig;
use groundwork::embed::{self, EmbedderSpec};
use groundwork::engine::agent::Agent;
use groundwork::engine::cancel::CancelToken;
use groundwork::engine::messages::{
    ModelMessage, ModelRequestPart, ModelResponsePart, UserContent, UserContentValue,
};
use groundwork::session::Session;
use groundwork::store::Store;
use serde_json::{Map, Value, json};

const REDIRECT_TAG: &str = "[haiku.rag/citation-redirect]";
const RETRIEVED_IMAGE_TAG: &str = "[haiku.rag/retrieved-image]";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn read(name: &str) -> Value {
    let p = fixtures().join("haiku_session").join(name);
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

/// `[<36-char id>]` occurrences, in order.
fn bracketed_ids(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('[') {
        let tail = &rest[i + 1..];
        if tail.len() >= 37 && tail.as_bytes()[36] == b']' {
            let id = &tail[..36];
            if id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') && id.matches('-').count() == 4
            {
                out.push(id.to_string());
            }
        }
        rest = tail;
    }
    out
}

/// Chunk ids of result blocks (lines that start with `[<id>]`).
fn line_ids(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            bracketed_ids(l)
                .into_iter()
                .next()
                .filter(|id| l.starts_with(&format!("[{id}]")))
        })
        .collect()
}

fn capsule_groups(text: &str) -> Vec<Vec<String>> {
    let mut groups: Vec<Vec<String>> = Vec::new();
    for line in text.lines() {
        if (1..=200).any(|k| line.trim() == group_label(k)) {
            groups.push(Vec::new());
        } else if let Some(g) = groups.last_mut()
            && let Some(id) = line_ids(line).into_iter().next()
        {
            g.push(id);
        }
    }
    groups
}

/// A capsule's entries (`[<id>] Source: …` and the cited text) in order: chunk id, length
/// in characters, SHA-256, as `record_session.py`'s `capsule_entries` reads haiku.rag's.
/// Blocks are joined by the entry separator; one that starts neither an entry nor a group
/// label belongs to the entry before it (cited text with blank lines).
fn capsule_entries(text: &str) -> Vec<Value> {
    use sha2::Digest;
    let sep = groundwork::capabilities::compaction::ENTRY_SEPARATOR;
    let starts_entry = |b: &str| {
        b.starts_with('[')
            && b.len() > 37
            && line_ids(b)
                .first()
                .is_some_and(|id| b[1 + id.len()..].starts_with("] Source: "))
    };
    let is_label = |b: &str| (1..=200).any(|k| b == group_label(k));
    let mut blocks: Vec<String> = Vec::new();
    for piece in text.split(sep) {
        match blocks.last_mut() {
            Some(last) if !starts_entry(piece) && !is_label(piece) => {
                last.push_str(sep);
                last.push_str(piece);
            }
            _ => blocks.push(piece.to_string()),
        }
    }
    blocks
        .iter()
        .filter(|b| starts_entry(b))
        .map(|b| {
            json!({
                "chunk_id": line_ids(b)[0],
                "chars": b.chars().count(),
                "sha256": format!("{:x}", sha2::Sha256::digest(b.as_bytes())),
            })
        })
        .collect()
}

/// Characters of the evidence tool's returns among `messages`, as `record_session.py`'s
/// `evidence_chars` counts them.
fn evidence_chars(messages: &[ModelMessage]) -> usize {
    messages
        .iter()
        .filter_map(|m| match m {
            ModelMessage::Request(r) => Some(&r.parts),
            _ => None,
        })
        .flatten()
        .filter_map(|p| match p {
            ModelRequestPart::ToolReturn(t) if t.tool_name == "rag_search" => {
                Some(t.content_text().chars().count())
            }
            _ => None,
        })
        .sum()
}

/// The prose-free structure of one message, in the shape of `wire.json`.
fn structure(m: &ModelMessage) -> Value {
    let capsule_first = capsule_header().lines().next().unwrap();
    match m {
        ModelMessage::Response(r) => {
            let parts: Vec<Value> = r
                .parts
                .iter()
                .filter_map(|p| match p {
                    ModelResponsePart::ToolCall(c) => Some(json!({
                        "part": "tool-call",
                        "tool_name": c.tool_name,
                        "args": serde_json::from_str::<Value>(&c.args_as_json()).unwrap_or(Value::Null),
                        "role": "other",
                    })),
                    ModelResponsePart::Text(_) => Some(json!({"part": "text", "role": "other"})),
                    _ => None,
                })
                .collect();
            json!({"kind": "response", "parts": parts})
        }
        ModelMessage::Request(r) => {
            let parts: Vec<Value> = r
                .parts
                .iter()
                .filter_map(|p| match p {
                    ModelRequestPart::UserPrompt(u) => {
                        let (text, images) = match &u.content {
                            UserContentValue::Text(t) => (t.clone(), 0),
                            UserContentValue::Items(items) => (
                                items
                                    .iter()
                                    .filter_map(|i| match i {
                                        UserContent::Text(t) => Some(t.as_str()),
                                        _ => None,
                                    })
                                    .collect::<Vec<_>>()
                                    .join("\n"),
                                items
                                    .iter()
                                    .filter(|i| matches!(i, UserContent::Binary(_)))
                                    .count(),
                            ),
                        };
                        let role = if text.contains(REDIRECT_TAG) {
                            "redirect"
                        } else if images > 0 && text.contains(RETRIEVED_IMAGE_TAG) {
                            "picture"
                        } else {
                            "question"
                        };
                        let mut v = json!({"part": "user-prompt", "role": role, "images": images});
                        if role == "picture" {
                            v["chunk_ids"] = json!(bracketed_ids(&text));
                        }
                        Some(v)
                    }
                    ModelRequestPart::ToolReturn(t) => {
                        let text = t.content_text();
                        let mut v = json!({"part": "tool-return", "tool_name": t.tool_name});
                        let role = match t.tool_name.as_str() {
                            "rag_search" if text.contains(capsule_first) => {
                                v["capsule_groups"] = json!(capsule_groups(&text));
                                v["capsule_entries"] = json!(capsule_entries(&text));
                                "capsule"
                            }
                            "rag_search" if text.trim() == receipt().trim() => "receipt",
                            "rag_search" => {
                                v["chunk_ids"] = json!(line_ids(&text));
                                "live-evidence"
                            }
                            "rag_cite" => "cite-result",
                            _ => "other",
                        };
                        v["role"] = json!(role);
                        Some(v)
                    }
                    ModelRequestPart::RetryPrompt(r) => Some(
                        json!({"part": "retry-prompt", "tool_name": r.tool_name, "role": "other"}),
                    ),
                    _ => None,
                })
                .collect();
            json!({"kind": "request", "parts": parts})
        }
    }
}

/// The recorded haiku.rag structure, cut to the keys compared (tool call ids differ by
/// design: each side's model server numbers its own calls).
fn recorded(m: &Value) -> Value {
    let parts: Vec<Value> = m["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["part"] != "system-prompt")
        .map(|p| {
            let mut o = Map::new();
            for k in [
                "part",
                "tool_name",
                "args",
                "role",
                "images",
                "chunk_ids",
                "capsule_groups",
                "capsule_entries",
            ] {
                if let Some(v) = p.get(k)
                    && !v.is_null()
                {
                    o.insert(k.into(), v.clone());
                }
            }
            if p["part"] == "user-prompt" && p["role"] != "picture" {
                o.remove("chunk_ids");
            }
            if p["part"] == "tool-call" || p["part"] == "text" {
                o.remove("images");
            }
            Value::Object(o)
        })
        .collect();
    json!({"kind": m["kind"], "parts": parts})
}

fn replies(script: &Value) -> Vec<Reply> {
    script
        .as_array()
        .unwrap()
        .iter()
        .map(|turn| {
            let mut reply: Option<Reply> = None;
            for p in turn["parts"].as_array().unwrap() {
                reply = Some(match (p["type"].as_str().unwrap(), reply) {
                    ("tool-call", None) => {
                        Reply::tool_call(p["tool_name"].as_str().unwrap(), p["args"].clone())
                    }
                    ("tool-call", Some(r)) => {
                        r.and_tool_call(p["tool_name"].as_str().unwrap(), p["args"].clone())
                    }
                    ("text", None) => Reply::text(p["content"].as_str().unwrap()),
                    ("text", Some(r)) => r.and_text(p["content"].as_str().unwrap()),
                    (other, _) => panic!("unknown part {other}"),
                });
            }
            reply.expect("a turn with parts")
        })
        .collect()
}

#[tokio::test]
async fn the_same_conversation_has_the_same_structure_on_the_wire_as_haiku_rag() {
    let script = read("script.json");
    let wire = read("wire.json");
    let expected = read("expected.json");
    let final_state = read("final_state.json");

    // A private copy of the haiku.rag-built database, queried through the hashembed model.
    let embed = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.lancedb");
    copy_dir(&fixtures().join("haiku/db.lancedb"), &db);
    let mut store = Store::open(&db.to_string_lossy()).await.unwrap();
    let spec = EmbedderSpec {
        base_url: Some(embed.url.clone()),
        ..store.embedder_spec().clone()
    };
    store
        .set_embedder(embed::build(&spec, &Default::default()).unwrap())
        .unwrap();
    let store = Arc::new(store);

    // The host as the recording composed it: RAG (vision on), compaction and the policy.
    let mut config = AppConfig::default();
    config.qa.model.vision = true;
    let server = ScriptedServer::start(replies(&script)).await;
    let agent: Agent = crate::support::agent_for(crate::support::test_config(&server.base_url()))
        .instructions(groundwork::host::ask::agent_preamble())
        .capability(Arc::new(RagCapability::new(store.clone(), config)))
        .capability(Arc::new(EvidenceCompactionCapability::new()))
        .capability(Arc::new(CitationPolicyCapability::new()))
        .build()
        .unwrap();
    let mut conversation = groundwork::host::conversation::Conversation::shown(
        Arc::new(Session::new("scripted-model")),
        None,
    );
    for q in expected["questions"].as_array().unwrap() {
        conversation
            .ask(
                &agent,
                q["user_prompt"].as_str().unwrap(),
                None,
                CancelToken::new(),
            )
            .await
            .unwrap_or_else(|e| panic!("question {}: {e}", q["number"]));
    }
    let session = conversation.into_session();
    assert_eq!(
        server.remaining(),
        0,
        "every recorded model turn was replayed"
    );

    // The comparison has something to compare: every role appears on haiku.rag's side.
    let roles: Vec<&str> = wire
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["messages"].as_array().unwrap())
        .flat_map(|m| m["parts"].as_array().unwrap())
        .filter_map(|p| p["role"].as_str())
        .collect();
    for role in [
        "capsule",
        "receipt",
        "live-evidence",
        "redirect",
        "picture",
        "cite-result",
    ] {
        assert!(roles.contains(&role), "the recording has a {role}");
    }
    let two_groups = wire.as_array().unwrap().iter().any(|r| {
        r["messages"].as_array().unwrap().iter().any(|m| {
            m["parts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["capsule_groups"].as_array().is_some_and(|g| g.len() == 2))
        })
    });
    assert!(two_groups, "a capsule with two groups");

    // Request by request: tools offered, then every message's structure.
    let requests: Vec<_> = session.requests().collect();
    let wire = wire.as_array().unwrap();
    assert_eq!(requests.len(), wire.len(), "number of model requests");
    let mut compared_sizes = Vec::new();
    for (ours, theirs) in requests.iter().zip(wire) {
        let n = theirs["request"].as_u64().unwrap();
        let mut tools: Vec<&str> = ours.tools.iter().map(|t| t.name.as_str()).collect();
        tools.sort();
        let want: Vec<&str> = theirs["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert_eq!(tools, want, "request {n}: tools offered");
        let got: Vec<Value> = ours.compacted.iter().map(structure).collect();
        let want: Vec<Value> = theirs["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(recorded)
            .collect();
        assert_eq!(
            got.len(),
            want.len(),
            "request {n}: number of messages sent"
        );
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g,
                w,
                "request {n}, message {i}:\nours   {}\nhaiku  {}",
                serde_json::to_string(g).unwrap(),
                serde_json::to_string(w).unwrap()
            );
        }
        // What compaction did to the evidence, in size: the history's evidence returns
        // are the same text on both sides; as sent, the capsule's entries are the same
        // bytes (compared above) and only the prose around them is ours, so the request
        // shrinks, stays or grows exactly where haiku.rag's does.
        let (raw, sent) = (evidence_chars(&ours.raw), evidence_chars(&ours.compacted));
        let theirs_chars = &theirs["evidence_chars"];
        let (their_raw, their_sent) = (
            theirs_chars["raw"].as_u64().unwrap() as usize,
            theirs_chars["sent"].as_u64().unwrap() as usize,
        );
        assert_eq!(raw, their_raw, "request {n}: evidence in the history");
        assert_eq!(
            sent.cmp(&raw),
            their_sent.cmp(&their_raw),
            "request {n}: compaction changed the evidence sent {raw} → {sent}; haiku.rag's {their_raw} → {their_sent}"
        );
        compared_sizes.push((n, raw, sent, their_sent));
    }
    // Compaction was exercised: some request sent less evidence than its history held,
    // and capsules carried entries on both sides.
    assert!(
        compared_sizes.iter().any(|&(_, raw, sent, _)| sent < raw),
        "{compared_sizes:?}"
    );
    let entries = wire
        .iter()
        .flat_map(|r| r["messages"].as_array().unwrap())
        .flat_map(|m| m["parts"].as_array().unwrap())
        .filter_map(|p| p["capsule_entries"].as_array())
        .map(Vec::len)
        .sum::<usize>();
    assert!(entries >= 10, "capsule entries compared: {entries}");

    // The final state, apart from prose: citations, index, evidence record, policy.
    let rag = &session.state["rag"];
    let theirs = &final_state["rag"];
    assert_eq!(rag["citations"], theirs["citations"]);
    assert_eq!(rag["evidence"], theirs["evidence"]);
    assert_eq!(rag["document_filter"], theirs["document_filter"]);
    let searches: Map<String, Value> = rag["searches"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let ids: Vec<Value> = v
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["chunk_id"].clone())
                .collect();
            (k.clone(), Value::Array(ids))
        })
        .collect();
    assert_eq!(Value::Object(searches), theirs["searches"]);
    let index = rag["citation_index"].as_object().unwrap();
    let want_index = theirs["citation_index"].as_object().unwrap();
    assert_eq!(
        index.keys().collect::<Vec<_>>(),
        want_index.keys().collect::<Vec<_>>()
    );
    for (id, w) in want_index {
        for k in [
            "index",
            "document_id",
            "chunk_ids",
            "page_numbers",
            "picture_refs",
        ] {
            assert_eq!(index[id][k], w[k], "citation_index[{id}].{k}");
        }
    }
    assert_eq!(
        session.state["citation_policy"],
        final_state["citation_policy"]
    );

    // And the other way round: haiku.rag 0.77 loads what we wrote (messages, every state
    // namespace through its own models, byte-identical round trip, its own `for_run`) and
    // continues the conversation with one more grounded question.
    // What it loads is the session as Groundwork keeps it (its SQLite file), exported
    // as `groundwork export` writes it.
    let db_file = dir.path().join("groundwork-session.sqlite");
    session.save(&db_file).unwrap();
    let ours = dir.path().join("groundwork-session.json");
    std::fs::write(&ours, Session::load(&db_file).unwrap().to_json().unwrap()).unwrap();
    let summary = run_loader(&ours, &["--continue", "--db", &db.to_string_lossy()]);
    assert_eq!(summary["continue"]["committed"], true, "{summary}");
    assert_eq!(summary["continue"]["status"], "grounded", "{summary}");
    for ns in ["rag", "citation_policy"] {
        assert_eq!(summary["state"][ns]["roundtrip"], "identical", "{summary}");
    }
}

/// haiku.rag 0.77 loads `session` (`load_groundwork_session.py`, in its pinned venv) and
/// says so in its summary.
fn run_loader(session: &Path, args: &[&str]) -> Value {
    let session = session.to_string_lossy();
    let mut all = vec![session.as_ref()];
    all.extend_from_slice(args);
    let summary =
        crate::support::run_haiku_script("haiku_session/load_groundwork_session.py", &all);
    assert_eq!(summary["ok"], true, "{summary}");
    summary
}

/// The committed demo session (rag and analysis state) loads in haiku.rag 0.77.
#[test]
fn haiku_rag_loads_the_demo_session() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions/demo.json");
    let summary = run_loader(&demo, &[]);
    for ns in ["rag", "analysis", "citation_policy"] {
        assert_eq!(summary["state"][ns]["roundtrip"], "identical", "{summary}");
    }
    assert_eq!(summary["for_run"]["analysis"]["ok"], true, "{summary}");
}
