//! The workbench TUI: a view over the capability engine.
//!
//! The agent loop runs in background tokio tasks and reports through `CoreEvent`s; the UI
//! keeps its own model (`app::App`), updates it from one `Msg` at a time, and draws only
//! when something changed, after draining what is queued. Nothing here shares mutable
//! state with the engine.

pub mod app;
pub mod background;
pub mod keymap;
pub mod terminal;
pub mod theme;
pub mod view;
pub mod wrap;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use futures::{Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui_image::picker::{Picker, ProtocolType};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use crate::config::{AppConfig, ConfigError};
use crate::engine::chat::ChatModel;
use crate::engine::events::CoreEvent;
use crate::host::ask::{AskOptions, CapabilityChoice};
use crate::host::compose::Composer;
use crate::host::conversation;
use crate::session::Session;
use crate::store::Store;

use app::{App, Effect, ImageMeta, ImageTarget, Msg};
use keymap::Keymap;
use theme::ThemeName;

/// What the effects need: the store, the model, the configuration and the image picker.
#[derive(Clone)]
pub struct Services {
    pub store: Option<Arc<Store>>,
    pub model: Option<Arc<dyn ChatModel>>,
    pub config: AppConfig,
    /// Evidence capabilities of every question (empty: RAG).
    pub capabilities: Vec<CapabilityChoice>,
    pub eager: bool,
    pub picker: Picker,
    /// The sandbox worker executable for the analysis capability (default: this binary).
    pub sandbox_worker: Option<std::path::PathBuf>,
}

impl Services {
    /// Services with the halfblocks picker; `run` detects the terminal's protocol.
    pub fn new(
        store: Option<Arc<Store>>,
        model: Option<Arc<dyn ChatModel>>,
        config: AppConfig,
        capabilities: Vec<CapabilityChoice>,
        eager: bool,
    ) -> Self {
        Services {
            store,
            model,
            config,
            capabilities,
            eager,
            picker: Picker::halfblocks(),
            sandbox_worker: None,
        }
    }

    /// What the agents of questions are composed from.
    pub fn composer(&self) -> Composer {
        Composer::new(self.model.clone(), self.store.clone(), self.config.clone())
    }
}

/// `[tui]` of the config file (plain data; parsed with the rest of the file).
pub use crate::config::TuiConfig;

/// The keymap `[tui.keys]` of the config file `path` asks for. A bad key, an unknown
/// action, a plain key bound globally or a key bound twice is a config error naming the
/// file, the line and the action's key (`tui.keys.quit`).
pub fn keymap_from_config(tui: &TuiConfig, path: &Path) -> Result<Keymap, ConfigError> {
    Keymap::with_overrides(&tui.keys, path).map_err(|e| {
        let actions = e.actions();
        let action = actions
            .iter()
            .find(|a| tui.keys.contains_key(**a))
            .or(actions.first())
            .copied()
            .unwrap_or_default();
        ConfigError::Parse {
            path: path.to_path_buf(),
            line: tui.line_of(action),
            key: Some(format!("tui.keys.{action}")),
            message: e.detail(),
        }
    })
}

/// Reads the config file `path` (all of it is checked) and builds the theme and the
/// keymap from its `[tui]`; errors name the file, the line and the key.
pub fn load_tui_config(path: &Path) -> Result<(ThemeName, Keymap)> {
    let config = crate::config::Config::load_file(path)?;
    let keymap = keymap_from_config(&config.tui, path)?;
    Ok((config.tui.theme, keymap))
}

/// Picks the image protocol once, before the event loop reads input. Inside tmux, and
/// when the terminal does not answer, halfblocks; `GROUNDWORK_IMAGE_PROTOCOL` overrides.
pub fn detect_picker() -> Picker {
    let forced = std::env::var("GROUNDWORK_IMAGE_PROTOCOL").unwrap_or_default();
    let in_tmux = std::env::var("TMUX").is_ok_and(|v| !v.is_empty());
    let mut picker = if forced == "halfblocks" || (in_tmux && forced.is_empty()) {
        Picker::halfblocks()
    } else {
        Picker::from_query_stdio().unwrap_or_else(|_| Picker::halfblocks())
    };
    match forced.as_str() {
        "kitty" => picker.set_protocol_type(ProtocolType::Kitty),
        "sixel" => picker.set_protocol_type(ProtocolType::Sixel),
        "iterm2" => picker.set_protocol_type(ProtocolType::Iterm2),
        _ => {}
    }
    picker
}

/// The workbench's one-line refusal when stdin or stdout is not a terminal.
pub const NEEDS_TERMINAL: &str = "the workbench needs a terminal (stdin and stdout); use \
     `groundwork inspect SESSION` to read a session without one";

/// Fails with [`NEEDS_TERMINAL`] unless stdin and stdout are both terminals. Call before
/// any set-up, so `groundwork open X </dev/null >out` stops at once with one line.
pub fn require_terminal() -> Result<()> {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        Ok(())
    } else {
        anyhow::bail!(NEEDS_TERMINAL)
    }
}

/// Runs the app in the real terminal until it quits. The terminal is restored on every
/// path out, panics included.
pub async fn run(mut app: App, mut services: Services) -> Result<()> {
    require_terminal()?;
    let guard = terminal::TerminalGuard::enter()?;
    // Queried after raw mode, before the event stream starts (STYLE §2.5): the
    // background (only when the theme follows it), then the image protocol.
    if app.theme_setting == ThemeName::Auto {
        let rgb = background::query(background::TIMEOUT);
        tracing::info!("terminal background (OSC 11): {rgb:?}");
        app.set_terminal_background(rgb.map(background::Rgb::background));
    }
    services.picker = detect_picker();
    let backend = ratatui::backend::CrosstermBackend::new(std::io::stdout());
    let mut term = Terminal::new(backend)?;
    term.clear()?;
    let events = crossterm::event::EventStream::new().filter_map(|e| async move {
        match e {
            Ok(crossterm::event::Event::Key(k)) => Some(Msg::Key(k)),
            Ok(crossterm::event::Event::Mouse(m)) => Some(Msg::Mouse(m)),
            Ok(crossterm::event::Event::Paste(p)) => Some(Msg::Paste(p)),
            Ok(crossterm::event::Event::Resize(_, _)) => Some(Msg::Resize),
            _ => None,
        }
    });
    let result = run_loop(&mut term, &mut app, services, Box::pin(events)).await;
    drop(guard);
    result
}

/// Draws `app` into `term`, storing the layout first.
pub fn draw<B: Backend>(term: &mut Terminal<B>, app: &mut App) -> Result<()> {
    let size = term.size().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let area = ratatui::layout::Rect::new(0, 0, size.width, size.height);
    app.areas = view::layout(app, area).1;
    term.draw(|f| view::render(app, f))
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    app.dirty = false;
    Ok(())
}

/// The background side of the loop: the channels core events and effect results come
/// back on, and the services effects use. Tests drive it step by step.
pub struct Runtime {
    services: Arc<Services>,
    core_tx: UnboundedSender<CoreEvent>,
    core_rx: tokio::sync::mpsc::UnboundedReceiver<CoreEvent>,
    msg_tx: UnboundedSender<Msg>,
    msg_rx: tokio::sync::mpsc::UnboundedReceiver<Msg>,
}

impl Runtime {
    pub fn new(services: Services) -> Self {
        let (core_tx, core_rx) = unbounded_channel();
        let (msg_tx, msg_rx) = unbounded_channel();
        Runtime {
            services: Arc::new(services),
            core_tx,
            core_rx,
            msg_tx,
            msg_rx,
        }
    }

    /// Updates the app with `msg` and carries out the effects.
    pub fn handle(&self, app: &mut App, msg: Msg) {
        for effect in app.update(msg) {
            execute(effect, app, &self.services, &self.core_tx, &self.msg_tx);
        }
    }

    /// Waits for the next message from the background (engine or effects).
    pub async fn next_background(&mut self) -> Option<Msg> {
        tokio::select! {
            Some(ev) = self.core_rx.recv() => Some(Msg::Core(ev)),
            Some(m) = self.msg_rx.recv() => Some(m),
            else => None,
        }
    }

    /// Handles everything already queued, without waiting. Returns how many.
    pub fn drain(&mut self, app: &mut App) -> usize {
        let mut n = 0;
        loop {
            let msg = match self.core_rx.try_recv() {
                Ok(ev) => Msg::Core(ev),
                Err(_) => match self.msg_rx.try_recv() {
                    Ok(m) => m,
                    Err(_) => return n,
                },
            };
            self.handle(app, msg);
            n += 1;
        }
    }

    /// Handles background messages until `done(app)` holds or `timeout` passes.
    pub async fn until(
        &mut self,
        app: &mut App,
        timeout: Duration,
        done: impl Fn(&App) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while !done(app) {
            match tokio::time::timeout_at(deadline, self.next_background()).await {
                Ok(Some(m)) => self.handle(app, m),
                _ => return done(app),
            }
        }
        true
    }
}

/// The event loop over any backend and input stream.
pub async fn run_loop<B: Backend>(
    term: &mut Terminal<B>,
    app: &mut App,
    services: Services,
    mut input: impl Stream<Item = Msg> + Unpin,
) -> Result<()> {
    let mut rt = Runtime::new(services);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    draw(term, app)?;
    rt.handle(app, Msg::Started);
    // Test hook: proves the terminal is restored when the UI panics.
    if std::env::var_os("GROUNDWORK_TEST_PANIC").is_some() {
        panic!("GROUNDWORK_TEST_PANIC is set: panicking after the first frame");
    }
    let mut input_open = true;
    while input_open {
        tokio::select! {
            m = input.next() => match m {
                Some(m) => rt.handle(app, m),
                None => break,
            },
            Some(m) = rt.next_background() => rt.handle(app, m),
            _ = tick.tick(), if app.animating() => rt.handle(app, Msg::Tick),
        }
        // Everything already pending, terminal input and core events alike, is handled
        // before one draw (STYLE §2.1.5). `poll!` registers this task's waker.
        while !app.quit {
            let mut handled = rt.drain(app);
            match futures::poll!(input.next()) {
                std::task::Poll::Ready(Some(m)) => {
                    rt.handle(app, m);
                    handled += 1;
                }
                std::task::Poll::Ready(None) => input_open = false,
                std::task::Poll::Pending => {}
            }
            if handled == 0 || !input_open {
                break;
            }
        }
        if app.quit || !input_open {
            break;
        }
        if app.dirty {
            draw(term, app)?;
            // A new layout may give the images pane another size.
            if images_need_resize(app) {
                rt.handle(app, Msg::Resize);
                if app.dirty {
                    draw(term, app)?;
                }
            }
        }
    }
    // Leave no question running behind us.
    if let Some(live) = &app.live {
        live.cancel.cancel();
    }
    Ok(())
}

/// Whether the images pane's size differs from the size its images were made for.
pub fn images_need_resize(app: &App) -> bool {
    let a = app.areas.images;
    app.images.target.is_some() && a.area() > 0 && app::image_cells(a) != app.images.size
}

fn execute(
    effect: Effect,
    app: &App,
    services: &Arc<Services>,
    core_tx: &UnboundedSender<CoreEvent>,
    msg_tx: &UnboundedSender<Msg>,
) {
    match effect {
        Effect::Quit => {}
        Effect::Ask {
            run_id,
            prompt,
            options,
            cancel,
        } => {
            let opts = AskOptions {
                capabilities: services.capabilities.clone(),
                eager: services.eager,
                sandbox_worker: services.sandbox_worker.clone(),
                ..options
            };
            match services.composer().agent(&opts) {
                // Outcome events (finished, failed, cancelled) come through `core_tx`;
                // the app commits from them.
                Ok(agent) => drop(conversation::start_question(
                    agent,
                    &app.session,
                    prompt,
                    Some(run_id),
                    core_tx.clone(),
                    cancel,
                )),
                Err(e) => {
                    let _ = core_tx.send(CoreEvent::RunFailed {
                        run_id,
                        request: 0,
                        error: e.to_string(),
                    });
                }
            }
        }
        Effect::Save(path) => {
            let session = app.session.clone();
            let tx = msg_tx.clone();
            tokio::task::spawn_blocking(move || {
                // Never over another writer's work (an `ask` on the same file): then the
                // conversation is kept beside it, and the error says where.
                let msg = match conversation::save_shared(&session, &path) {
                    Ok(saved) if saved.note.is_some() => Msg::Error(saved.note.unwrap_or_default()),
                    Ok(saved) => Msg::Notice(format!(
                        "saved {}",
                        saved
                            .path
                            .file_name()
                            .map(|f| f.to_string_lossy())
                            .unwrap_or_default()
                    )),
                    Err(e) => Msg::Error(format!("cannot save the session: {e}")),
                };
                let _ = tx.send(msg);
            });
        }
        Effect::Export { path, contents } => {
            let tx = msg_tx.clone();
            tokio::task::spawn_blocking(move || {
                let msg = match conversation::write_export(&path, &contents) {
                    Ok(()) => Msg::Notice(format!(
                        "exported {}",
                        path.file_name()
                            .map(|f| f.to_string_lossy())
                            .unwrap_or_default()
                    )),
                    Err(e) => Msg::Error(format!("cannot export to {}: {e}", path.display())),
                };
                let _ = tx.send(msg);
            });
        }
        Effect::OpenSession(path) => {
            let tx = msg_tx.clone();
            tokio::task::spawn_blocking(move || {
                let msg = match Session::load(&path) {
                    Ok(s) => Msg::SessionOpened(Ok((path, Box::new(s)))),
                    Err(e) => Msg::SessionOpened(Err(e.to_string())),
                };
                let _ = tx.send(msg);
            });
        }
        Effect::LoadDocuments => {
            let tx = msg_tx.clone();
            let store = services.store.clone();
            tokio::spawn(async move {
                let r = match store {
                    None => Err("no database is open".to_string()),
                    Some(s) => s
                        .list_documents(None)
                        .await
                        .map(|docs| {
                            docs.into_iter()
                                .map(|d| {
                                    d.title.filter(|t| !t.is_empty()).or(d.uri).unwrap_or(d.id)
                                })
                                .collect()
                        })
                        .map_err(|e| e.to_string()),
                };
                let _ = tx.send(Msg::Documents(r));
            });
        }
        Effect::LoadDbInfo => {
            let tx = msg_tx.clone();
            let store = services.store.clone();
            tokio::spawn(async move {
                let r = match store {
                    None => Err("no database is open".to_string()),
                    Some(s) => s
                        .info()
                        .await
                        .map(|i| format_info(&i))
                        .map_err(|e| e.to_string()),
                };
                let _ = tx.send(Msg::DbInfo(r));
            });
        }
        Effect::LoadChunk(chunk_id) => {
            let tx = msg_tx.clone();
            let store = services.store.clone();
            tokio::spawn(async move {
                let text = match store {
                    None => Err("no database is open".to_string()),
                    Some(s) => match s.result_for_chunk(&chunk_id).await {
                        Ok(Some(r)) => Ok(chunk_text(&r)),
                        Ok(None) => Err(format!("chunk {chunk_id} is not in this database")),
                        Err(e) => Err(e.to_string()),
                    },
                };
                let _ = tx.send(Msg::ChunkText { chunk_id, text });
            });
        }
        Effect::ListPaths { typed, purpose } => {
            let tx = msg_tx.clone();
            tokio::task::spawn_blocking(move || {
                let entries = app::paths::complete(&typed, purpose);
                let _ = tx.send(Msg::PathEntries { typed, entries });
            });
        }
        Effect::ResolvePath { typed, highlighted } => {
            let tx = msg_tx.clone();
            tokio::task::spawn_blocking(move || {
                let outcome = app::paths::resolve(&typed, highlighted.as_deref());
                let _ = tx.send(Msg::PathResolved { typed, outcome });
            });
        }
        Effect::AttachImage(path) => {
            let tx = msg_tx.clone();
            tokio::task::spawn_blocking(move || {
                let result = app::attach_image(&path);
                let _ = tx.send(Msg::ImageAttached { path, result });
            });
        }
        Effect::LoadImages {
            generation,
            target,
            size,
        } => {
            let tx = msg_tx.clone();
            let store = services.store.clone();
            let picker = services.picker.clone();
            tokio::spawn(load_images(store, picker, generation, target, size, tx));
        }
    }
}

fn chunk_text(r: &crate::store::types::SearchResult) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "Document: {}\n",
        r.document_title
            .clone()
            .or(r.document_uri.clone())
            .unwrap_or_default()
    ));
    if let Some(uri) = &r.document_uri {
        s.push_str(&format!("Source: {uri}\n"));
    }
    if !r.page_numbers.is_empty() {
        let p: Vec<String> = r.page_numbers.iter().map(|p| p.to_string()).collect();
        s.push_str(&format!("Pages: {}\n", p.join(", ")));
    }
    if let Some(h) = &r.headings
        && !h.is_empty()
    {
        s.push_str(&format!("Section: {}\n", h.join(" > ")));
    }
    s.push('\n');
    s.push_str(&r.content);
    s
}

/// Database info as the modal shows it.
pub fn format_info(i: &crate::store::StoreInfo) -> String {
    let mut s = format!("Path: {}\n", i.uri);
    if let Some(v) = &i.haiku_rag_version {
        s.push_str(&format!("Layout: haiku.rag {v}\n"));
    }
    s.push_str(&format!(
        "Embeddings: {}/{} ({})\n",
        i.embedder.provider, i.embedder.name, i.embedder.vector_dim
    ));
    s.push_str(&format!(
        "Documents: {}   Chunks: {}   Items: {}   Pictures: {}\n\nIndexes:\n",
        i.documents, i.chunks, i.items, i.pictures
    ));
    for idx in &i.indexes {
        s.push_str(&format!(
            "  {}.{} {} — {}\n",
            idx.table,
            idx.columns.join(","),
            idx.kind,
            if idx.unindexed_rows == 0 {
                "up to date".to_string()
            } else {
                format!("{} rows not indexed", idx.unindexed_rows)
            }
        ));
    }
    if !i.indexes.iter().any(|x| x.kind.contains("IVF")) {
        s.push_str("  no vector index (IVF-PQ is built from 5,000 chunks; search is exact)\n");
    }
    s
}

/// Lists the figures and pages of `target`, then decodes and sizes each off the UI task.
async fn load_images(
    store: Option<Arc<Store>>,
    picker: Picker,
    generation: u64,
    target: ImageTarget,
    size: (u16, u16),
    tx: UnboundedSender<Msg>,
) {
    let Some(store) = store else {
        let _ = tx.send(Msg::ImagesListed {
            generation,
            items: Vec::new(),
        });
        return;
    };
    let mut metas = Vec::new();
    let mut blobs: Vec<Result<Vec<u8>, String>> = Vec::new();
    for r in &target.picture_refs {
        metas.push(ImageMeta {
            caption: format!("{} · figure {r}", target.document),
            document: target.document.clone(),
            page: None,
            self_ref: Some(r.clone()),
            chunk_id: target.chunk_id.clone(),
        });
        blobs.push(match store.picture(&target.document_id, r).await {
            Ok(Some(b)) => Ok(b),
            Ok(None) => Err("no image data stored for this figure".into()),
            Err(e) => Err(e.to_string()),
        });
    }
    let pages = store.page_images(&target.document_id).await;
    for p in &target.pages {
        metas.push(ImageMeta {
            caption: format!("{} · page {p}", target.document),
            document: target.document.clone(),
            page: Some(*p),
            self_ref: None,
            chunk_id: target.chunk_id.clone(),
        });
        blobs.push(match &pages {
            Ok(pages) => pages
                .get(p)
                .cloned()
                .ok_or_else(|| "this document was stored without page images".into()),
            Err(e) => Err(e.to_string()),
        });
    }
    let _ = tx.send(Msg::ImagesListed {
        generation,
        items: metas,
    });
    for (index, blob) in blobs.into_iter().enumerate() {
        let picker = picker.clone();
        let result = match blob {
            Err(e) => Err(e),
            Ok(bytes) => tokio::task::spawn_blocking(move || {
                let img =
                    image::load_from_memory(&bytes).map_err(|e| format!("cannot decode: {e}"))?;
                picker
                    .new_protocol(
                        img,
                        ratatui::layout::Size::new(size.0, size.1),
                        ratatui_image::Resize::Scale(None),
                    )
                    .map(Box::new)
                    .map_err(|e| e.to_string())
            })
            .await
            .unwrap_or_else(|e| Err(e.to_string())),
        };
        if tx
            .send(Msg::ImageReady {
                generation,
                index,
                result,
            })
            .is_err()
        {
            return;
        }
    }
}
