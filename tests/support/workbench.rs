//! Driving the workbench TUI headless: a demo knowledge base built with the hash
//! embedder, the app wired to the scripted OpenAI-compatible server, keys in, screens out.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use groundwork::config::AppConfig;
use groundwork::embed::{self, EmbedderSpec};
use groundwork::model::OpenAiModel;
use groundwork::session::Session;
use groundwork::store::Store;
use groundwork::store::types::SearchResult;
use groundwork::tui::app::{App, HostInfo, Msg, Pane};
use groundwork::tui::{Runtime, Services};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;

use super::hashembed;
use super::scripted_server::Reply;
use super::test_config;

/// The demo corpus in a temporary LanceDB store, embedded with the hash embedder.
pub struct DemoKb {
    pub embed: hashembed::EmbedServer,
    pub dir: tempfile::TempDir,
    pub store: Arc<Store>,
    pub db: String,
}

impl DemoKb {
    /// The knowledge base as a workbench question records it: where it is and the
    /// versions of its tables the open store reads.
    pub async fn recording(&self) -> groundwork::session::knowledge::KnowledgeBase {
        groundwork::session::knowledge::KnowledgeBase {
            location: self.db.clone(),
            reading: Some(self.store.table_versions().await.unwrap()),
            ..Default::default()
        }
    }

    /// The database opened again, as a later process opens it (what was written since
    /// included), with the query embedder.
    pub async fn reopened(&self) -> Arc<Store> {
        let mut s = Store::open(&self.db).await.unwrap();
        s.set_embedder(embed::build(self.store.embedder_spec(), &Default::default()).unwrap())
            .unwrap();
        Arc::new(s)
    }
}

pub fn demo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo")
}

pub async fn demo_kb() -> DemoKb {
    let embed = hashembed::start().await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir
        .path()
        .join("demo.lancedb")
        .to_string_lossy()
        .into_owned();
    let spec = EmbedderSpec {
        provider: "openai".into(),
        name: hashembed::MODEL.into(),
        vector_dim: hashembed::DIM,
        base_url: Some(embed.url.clone()),
    };
    let mut store = Store::create(&db, &spec).await.unwrap();
    store
        .set_embedder(embed::build(&spec, &Default::default()).unwrap())
        .unwrap();
    // As the first run ingests it: demo URIs and stable ids.
    let report = groundwork::ingest::pipeline::ingest_paths_with(
        &store,
        &[demo_dir()],
        &(),
        &groundwork::host::demo::ingest_options(&demo_dir()),
    )
    .await
    .unwrap();
    assert!(report.failed().is_empty(), "demo corpus ingests cleanly");
    DemoKb {
        embed,
        dir,
        store: Arc::new(store),
        db,
    }
}

/// The first hit for `query` that satisfies `pred`.
pub async fn hit(store: &Store, query: &str, pred: impl Fn(&SearchResult) -> bool) -> SearchResult {
    store
        .search_expanded(query, Some(10), None)
        .await
        .unwrap()
        .into_iter()
        .find(|r| pred(r))
        .unwrap_or_else(|| panic!("no hit for {query:?}"))
}

pub fn host() -> HostInfo {
    HostInfo {
        knowledge_bases: Vec::new(),
        knowledge_base_note: None,
        collections: Vec::new(),
        db: "demo.lancedb".into(),
        model: "scripted-model @ scripted server".into(),
        model_ready: true,
        model_help: String::new(),
        capabilities: vec!["rag".into()],
        max_searches: 5,
        max_executions: 15,
    }
}

pub fn services(store: &Arc<Store>, model_url: &str) -> Services {
    Services::new(
        Some(store.clone()),
        Some(Arc::new(OpenAiModel::new(test_config(model_url)).unwrap())),
        AppConfig::default(),
        vec![],
        false,
    )
}

/// A fresh app saving to `dir/session.json`.
pub fn new_app(dir: &Path) -> App {
    App::new(
        Session::new("scripted-model"),
        Some(dir.join("session.json")),
        host(),
    )
}

pub fn key_event(code: KeyCode, mods: KeyModifiers) -> Msg {
    Msg::Key(KeyEvent::new_with_kind(code, mods, KeyEventKind::Press))
}

pub fn press(rt: &mut Runtime, app: &mut App, code: KeyCode) {
    rt.handle(app, key_event(code, KeyModifiers::NONE));
}

pub fn press_mod(rt: &mut Runtime, app: &mut App, code: KeyCode, mods: KeyModifiers) {
    rt.handle(app, key_event(code, mods));
}

pub fn type_text(rt: &mut Runtime, app: &mut App, text: &str) {
    for c in text.chars() {
        let mods = if c.is_uppercase() {
            KeyModifiers::SHIFT
        } else {
            KeyModifiers::NONE
        };
        rt.handle(app, key_event(KeyCode::Char(c), mods));
    }
}

/// Types `question`, presses Enter and waits until the run ends and effects settle.
pub async fn ask(rt: &mut Runtime, app: &mut App, question: &str) {
    app.focus = Pane::Input;
    type_text(rt, app, question);
    press(rt, app, KeyCode::Enter);
    assert!(app.running(), "the question started: {:?}", app.error);
    assert!(
        rt.until(app, Duration::from_secs(30), |a| !a.running())
            .await,
        "the question finished"
    );
    settle(rt, app).await;
}

/// Handles background messages until nothing arrives for a moment (saves, images).
pub async fn settle(rt: &mut Runtime, app: &mut App) {
    while let Ok(Some(m)) =
        tokio::time::timeout(Duration::from_millis(300), rt.next_background()).await
    {
        rt.handle(app, m);
    }
}

fn buffer_text(term: &Terminal<TestBackend>) -> String {
    let buf = term.backend().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut line = String::new();
        for x in 0..buf.area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The whole app at `w`×`h`, as cells (for styles).
pub fn screen_buffer(app: &mut App, w: u16, h: u16) -> ratatui::buffer::Buffer {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    groundwork::tui::draw(&mut term, app).unwrap();
    term.backend().buffer().clone()
}

/// The status bar alone, `w` columns wide.
pub fn status_bar(app: &mut App, w: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, 1)).unwrap();
    term.draw(|f| groundwork::tui::view::status::status_bar(app, f, f.area()))
        .unwrap();
    buffer_text(&term)
}

/// The whole app at `w`×`h`.
pub fn screen(app: &mut App, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    groundwork::tui::draw(&mut term, app).unwrap();
    buffer_text(&term)
}

/// One pane's render function alone, filling a `w`×`h` frame.
pub fn pane(app: &mut App, pane: Pane, w: u16, h: u16) -> String {
    use groundwork::tui::view;
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    let area = ratatui::layout::Rect::new(0, 0, w, h);
    match pane {
        Pane::Conversation => app.areas.conversation = area,
        Pane::Inspector => app.areas.inspector = area,
        Pane::Ledger => app.areas.ledger = area,
        Pane::Images => app.areas.images = area,
        Pane::Input => app.areas.input = area,
    }
    term.draw(|f| match pane {
        Pane::Conversation => view::conversation::render(app, f, f.area()),
        Pane::Inspector => view::inspector::render(app, f, f.area()),
        Pane::Ledger => view::ledger::render(app, f, f.area()),
        Pane::Images => view::images::render(app, f, f.area()),
        Pane::Input => view::status::input(app, f, f.area()),
    })
    .unwrap();
    buffer_text(&term)
}

/// Insta settings that hide ids (UUID chunk, document and run ids).
pub fn redactions() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "<id>",
    );
    s.add_filter(r"[0-9a-f]{8}-[0-9a-f-]{1,26}…?", "<id…>");
    // An id cut before its first dash.
    s.add_filter(r"\b[0-9a-f]{8}…", "<id…>");
    s.add_filter(r"run [0-9a-f]{8}", "run <run>");
    s.add_filter(r"/tmp/\.tmp[A-Za-z0-9]+", "<tmp>");
    s
}

/// Scripted replies of the three demo questions, given the chunks they cite:
/// 1. search twice, cite a chunk with a figure, answer (grounded);
/// 2. a follow-up: search, cite, answer (compacted: the capsule carries question 1);
/// 3. an answer without citing, redirected, answered again without citing (violation).
pub fn three_questions(figure_chunk: &str, second_chunk: &str) -> Vec<Reply> {
    vec![
        Reply::tool_call("rag_search", json!({"query": "monthly solar output July"})),
        Reply::tool_call("rag_search", json!({"query": "outages"})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [figure_chunk]})),
        Reply::text(
            "July was the strongest month for the array, as the monthly output figure shows.",
        ),
        Reply::tool_call("rag_search", json!({"query": "battery state of charge"})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [second_chunk]})),
        Reply::text("The battery is kept between its charge limits over a summer day."),
        Reply::text("Microgrids are neat."),
        Reply::text("Microgrids are still neat."),
    ]
}
