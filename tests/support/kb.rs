//! The knowledge base, agent and wire helpers shared by the capability tests
//! (`tests/scenarios_*.rs`, `rag_capability.rs`, `analysis_capability.rs`,
//! `field_fixes.rs`): document builders, a real LanceDB store in a temp dir embedded by
//! the hashembed server, agents that talk to the scripted OpenAI-compatible server
//! through the real client, and readers of stored messages and recorded requests.
//! Use with `mod support;` and `use support::kb::*;`.

use std::collections::HashMap;
use std::sync::Arc;

use groundwork::capabilities::analysis::AnalysisCapability;
use groundwork::capabilities::policy::REDIRECT_TAG;
use groundwork::capabilities::rag::RagCapability;
use groundwork::capabilities::state::{EvidenceState, StateKind};
use groundwork::config::AppConfig;
use groundwork::embed::{self, EmbedderSpec};
use groundwork::engine::agent::{Agent, RunError, RunInput, RunOutput, RunResult};
use groundwork::engine::cancel::CancelToken;
use groundwork::engine::capability::Capability;
use groundwork::engine::events::EventSink;
use groundwork::engine::messages::{
    BinaryContent, ModelMessage, ModelRequest, ModelRequestPart, ModelResponse, ModelResponsePart,
    TextPart, ToolCallPart, ToolReturnPart, UserContent,
};
use groundwork::store::{DocumentItem, NewChunk, NewDocument, Store};
use serde_json::{Map, Value, json};

use super::hashembed;
use super::scripted_server::{ScriptedServer, wire_messages};
use super::{agent_for, test_config};

/// The binary that doubles as the sandbox worker.
pub const WORKER: &str = env!("CARGO_BIN_EXE_groundwork");

// ----- documents ----------------------------------------------------------------------

pub fn item(pos: i64, self_ref: &str, label: &str, level: i64, text: &str) -> DocumentItem {
    DocumentItem {
        document_id: String::new(),
        position: pos,
        self_ref: self_ref.into(),
        label: label.into(),
        text: text.into(),
        page_numbers: vec![1],
        picture_data: None,
        heading_level: level,
        tree_depth: 0,
    }
}

pub fn picture(pos: i64, self_ref: &str, text: &str, bytes: Vec<u8>) -> DocumentItem {
    DocumentItem {
        picture_data: Some(bytes),
        ..item(pos, self_ref, "picture", 0, text)
    }
}

/// A text chunk (labels `["text"]`).
pub fn chunk(order: i64, headings: &[&str], refs: &[&str], content: &str) -> NewChunk {
    chunk_labelled(order, headings, refs, &["text"], content)
}

/// A chunk with the given doc-item labels.
pub fn chunk_labelled(
    order: i64,
    headings: &[&str],
    refs: &[&str],
    labels: &[&str],
    content: &str,
) -> NewChunk {
    let fts = if headings.is_empty() {
        content.to_string()
    } else {
        format!("{}\n{content}", headings.join("\n"))
    };
    NewChunk {
        content: content.into(),
        content_fts: fts,
        metadata: json!({
            "doc_item_refs": refs,
            "headings": if headings.is_empty() { Value::Null } else { json!(headings) },
            "labels": labels,
            "page_numbers": [1],
        }),
        order,
    }
}

pub fn document(
    uri: Option<&str>,
    title: Option<&str>,
    items: Vec<DocumentItem>,
    chunks: Vec<NewChunk>,
) -> NewDocument {
    NewDocument {
        uri: uri.map(str::to_string),
        title: title.map(str::to_string),
        metadata: Map::new(),
        content: chunks
            .iter()
            .map(|c| c.content.clone())
            .collect::<Vec<_>>()
            .join("\n"),
        docling_document: json!({}),
        pages: vec![],
        items,
        chunks,
    }
}

/// A small decodable PNG.
pub fn png() -> Vec<u8> {
    let img = image::RgbImage::from_pixel(2, 2, image::Rgb([200, 10, 10]));
    let mut out = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

/// The shared fixture's documents, by name.
pub fn fixture_documents() -> Vec<(&'static str, NewDocument)> {
    let ai_text = "Artificial intelligence studies agents that perceive their environment and act.";
    let mut ai = document(
        Some("test://ai-overview"),
        Some("AI Overview"),
        vec![item(0, "#/texts/0", "text", 0, ai_text)],
        vec![chunk(0, &["Intro", "Details"], &["#/texts/0"], ai_text)],
    );
    ai.metadata = Map::from_iter([("topic".to_string(), json!("ai"))]);
    let ml = document(
        Some("test://ml-basics"),
        Some("ML Basics"),
        vec![],
        vec![
            chunk(
                0,
                &[],
                &[],
                "Gradient descent minimises a loss function step by step.",
            ),
            chunk(
                1,
                &[],
                &[],
                "Gradient boosting combines weak learners into a strong one.",
            ),
            chunk(
                2,
                &[],
                &[],
                "Gradient clipping keeps exploding gradients in check.",
            ),
        ],
    );
    let inverter_text = "Wiring diagram of the inverter";
    let inverter = document(
        Some("test://inverter"),
        Some("Inverter"),
        vec![picture(0, "#/pictures/0", inverter_text, png())],
        vec![chunk(0, &[], &["#/pictures/0"], inverter_text)],
    );
    let garbage_text = "Scanned schematic of the charge controller";
    let garbage = document(
        Some("test://controller"),
        Some("Controller"),
        vec![picture(
            0,
            "#/pictures/0",
            garbage_text,
            b"definitely not an image".to_vec(),
        )],
        vec![chunk(0, &[], &["#/pictures/0"], garbage_text)],
    );
    let arxiv = document(
        Some("2410.11843v5"),
        Some("2410.11843v5"),
        vec![],
        vec![chunk(
            0,
            &[],
            &[],
            "Retrieval augmented generation grounds answers in documents.",
        )],
    );
    let long = document(
        Some("test://long"),
        Some("Long Report"),
        vec![],
        vec![chunk(0, &[], &[], &long_content())],
    );
    let handbook = document(
        Some("test://handbook"),
        Some("Handbook"),
        vec![
            item(0, "#/texts/0", "text", 0, "Handbook torque table."),
            item(
                1,
                "#/texts/1",
                "text",
                0,
                "Handbook torque values for the alpha bolts.",
            ),
            item(
                2,
                "#/texts/2",
                "text",
                0,
                "Handbook torque values for the beta bolts.",
            ),
            item(3, "#/texts/3", "text", 0, "End of the torque table."),
        ],
        vec![
            chunk(
                0,
                &[],
                &["#/texts/1"],
                "Handbook torque values for the alpha bolts.",
            ),
            chunk(
                1,
                &[],
                &["#/texts/2"],
                "Handbook torque values for the beta bolts.",
            ),
        ],
    );
    vec![
        ("AI Overview", ai),
        ("ML Basics", ml),
        ("Inverter", inverter),
        ("Controller", garbage),
        ("arxiv", arxiv),
        ("Long Report", long),
        ("Handbook", handbook),
    ]
}

/// 20 000 characters of distinct text.
pub fn long_content() -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.chars().count() < 20_000 {
        s.push_str(&format!("Line {i:05} of the long report. "));
        i += 1;
    }
    s.chars().take(20_000).collect()
}

// ----- knowledge base -----------------------------------------------------------------

pub struct Kb {
    pub _embed: hashembed::EmbedServer,
    pub _dir: tempfile::TempDir,
    pub store: Arc<Store>,
    /// document name -> chunk ids in order
    pub chunks: HashMap<String, Vec<String>>,
    pub doc_ids: HashMap<String, String>,
}

impl Kb {
    pub fn chunk(&self, name: &str, i: usize) -> String {
        self.chunks[name][i].clone()
    }
}

/// A store at `path` holding `docs`, embedded by the hashembed server at `embed_url`,
/// with its indexes built. Returns the store, each document's chunk ids in order and
/// each document's id, both by name.
pub async fn store_at(
    path: &std::path::Path,
    embed_url: &str,
    docs: Vec<(&str, NewDocument)>,
) -> (Store, HashMap<String, Vec<String>>, HashMap<String, String>) {
    let spec = EmbedderSpec {
        provider: "openai".into(),
        name: hashembed::MODEL.into(),
        vector_dim: hashembed::DIM,
        base_url: Some(embed_url.to_string()),
    };
    store_with(path, &spec, docs).await
}

/// [`store_at`] with the embedder `spec` (another dimension, another server).
pub async fn store_with(
    path: &std::path::Path,
    spec: &EmbedderSpec,
    docs: Vec<(&str, NewDocument)>,
) -> (Store, HashMap<String, Vec<String>>, HashMap<String, String>) {
    let uri = path.to_string_lossy().into_owned();
    let spec = spec.clone();
    let mut store = Store::create(&uri, &spec).await.unwrap();
    store
        .set_embedder(embed::build(&spec, &Default::default()).unwrap())
        .unwrap();
    let mut chunks = HashMap::new();
    let mut doc_ids = HashMap::new();
    for (name, doc) in docs {
        let meta = store.add_document(doc, None).await.unwrap();
        let mut found = store.chunks_of(&meta.id).await.unwrap();
        found.sort_by_key(|c| c.order);
        chunks.insert(name.to_string(), found.into_iter().map(|c| c.id).collect());
        doc_ids.insert(name.to_string(), meta.id);
    }
    store.ensure_indexes().await.unwrap();
    (store, chunks, doc_ids)
}

/// A store holding `docs`.
pub async fn kb_with(docs: Vec<(&str, NewDocument)>) -> Kb {
    let server = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (store, chunks, doc_ids) =
        store_at(&dir.path().join("kb.lancedb"), &server.url, docs).await;
    Kb {
        _embed: server,
        _dir: dir,
        store: Arc::new(store),
        chunks,
        doc_ids,
    }
}

/// The shared fixture store.
pub async fn kb() -> Kb {
    kb_with(fixture_documents()).await
}

pub fn rag(kb: &Kb) -> RagCapability {
    RagCapability::new(kb.store.clone(), AppConfig::default())
}

pub fn rag_with(kb: &Kb, edit: impl FnOnce(&mut AppConfig)) -> RagCapability {
    let mut config = AppConfig::default();
    edit(&mut config);
    RagCapability::new(kb.store.clone(), config)
}

pub fn analysis(kb: &Kb) -> AnalysisCapability {
    analysis_with(kb, |_| {})
}

pub fn analysis_with(kb: &Kb, edit: impl FnOnce(&mut AppConfig)) -> AnalysisCapability {
    let mut config = AppConfig::default();
    edit(&mut config);
    AnalysisCapability::new(kb.store.clone(), config).worker(WORKER)
}

// ----- agents and runs ----------------------------------------------------------------

pub fn agent(server: &ScriptedServer, caps: Vec<Arc<dyn Capability>>) -> Agent {
    let mut builder = agent_for(test_config(&server.base_url()));
    for cap in caps {
        builder = builder.capability(cap);
    }
    builder.build().unwrap()
}

pub async fn run(agent: &Agent, input: RunInput) -> Result<RunResult, RunError> {
    agent
        .run(input, EventSink::none(), CancelToken::new())
        .await
}

pub fn rag_state(state: &Map<String, Value>) -> EvidenceState {
    EvidenceState::load(StateKind::Rag, &state["rag"]).unwrap()
}

pub fn analysis_state(state: &Map<String, Value>) -> EvidenceState {
    EvidenceState::load(StateKind::Analysis, &state["analysis"]).unwrap()
}

/// A host state holding only `rag`.
pub fn rag_host_state(state: &EvidenceState) -> Map<String, Value> {
    Map::from_iter([("rag".to_string(), state.to_value())])
}

pub fn text_output(result: &RunResult) -> String {
    match &result.output {
        RunOutput::Text(t) => t.clone(),
        other => panic!("expected text, got {other:?}"),
    }
}

// ----- stored messages ------------------------------------------------------------------

pub fn prompt(text: &str) -> ModelMessage {
    ModelMessage::from(ModelRequest::user(text))
}

pub fn prompt_items(items: Vec<UserContent>) -> ModelMessage {
    ModelMessage::from(ModelRequest::user(items))
}

pub fn call(tool: &str, args: Value, id: &str) -> ModelMessage {
    ModelMessage::from(ModelResponse::new(vec![ModelResponsePart::ToolCall(
        ToolCallPart::new(tool, args.to_string(), id),
    )]))
}

pub fn tool_return(tool: &str, id: &str, content: &str) -> ModelMessage {
    ModelMessage::from(ModelRequest::new(vec![ModelRequestPart::ToolReturn(
        ToolReturnPart::new(tool, json!(content), id),
    )]))
}

pub fn answer(text: &str) -> ModelMessage {
    ModelMessage::from(ModelResponse::new(vec![ModelResponsePart::Text(
        TextPart::new(text),
    )]))
}

/// SCENARIOS' `answered(q, evidence)`.
pub fn answered(question: &str, evidence: &str) -> Vec<ModelMessage> {
    vec![
        prompt(question),
        call("rag_search", json!({"query": question}), "call-1"),
        tool_return("rag_search", "call-1", evidence),
        answer("an answer"),
    ]
}

pub fn image(bytes: &[u8]) -> UserContent {
    UserContent::Binary(BinaryContent::from_bytes(bytes, "image/png"))
}

/// The content of every stored tool return, in order.
pub fn stored_returns(messages: &[ModelMessage], tool: &str) -> Vec<String> {
    messages
        .iter()
        .filter_map(ModelMessage::as_request)
        .flat_map(|r| r.parts.iter())
        .filter_map(|p| match p {
            ModelRequestPart::ToolReturn(t) if t.tool_name == tool => Some(t.content_text()),
            _ => None,
        })
        .collect()
}

// ----- the wire -------------------------------------------------------------------------

/// The tool messages of a recorded request, as (tool name, content), pairing each with
/// the call of the preceding assistant message.
pub fn tool_returns(body: &Value) -> Vec<(String, String)> {
    let mut names: Map<String, Value> = Map::new();
    let mut out = Vec::new();
    for m in wire_messages(body) {
        if m["role"] == "assistant" {
            names.clear();
            for call in m["tool_calls"].as_array().into_iter().flatten() {
                names.insert(
                    call["id"].as_str().unwrap_or_default().to_string(),
                    call["function"]["name"].clone(),
                );
            }
        } else if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or_default();
            out.push((
                names
                    .get(id)
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            ));
        }
    }
    out
}

pub fn returns_of(body: &Value, tool: &str) -> Vec<String> {
    tool_returns(body)
        .into_iter()
        .filter(|(n, _)| n == tool)
        .map(|(_, c)| c)
        .collect()
}

/// Every user message's text items and the number of images on the wire.
pub fn user_texts(body: &Value) -> (Vec<String>, usize) {
    let mut texts = Vec::new();
    let mut images = 0;
    for m in wire_messages(body).iter().filter(|m| m["role"] == "user") {
        let (t, i) = user_message_items(m);
        texts.extend(t);
        images += i;
    }
    (texts, images)
}

/// One wire user message's text items and image count.
pub fn user_message_items(m: &Value) -> (Vec<String>, usize) {
    let mut texts = Vec::new();
    let mut images = 0;
    match &m["content"] {
        Value::String(s) => texts.push(s.clone()),
        Value::Array(items) => {
            for i in items {
                if i["type"] == "text" {
                    texts.push(i["text"].as_str().unwrap_or_default().to_string());
                } else if i["type"] == "image_url" {
                    images += 1;
                }
            }
        }
        _ => {}
    }
    (texts, images)
}

pub fn redirects(body: &Value) -> usize {
    user_texts(body)
        .0
        .iter()
        .filter(|t| t.contains(REDIRECT_TAG))
        .count()
}
