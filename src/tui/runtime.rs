//! The background side of the workbench: the services effects use ([`Services`]), the
//! [`Runtime`] that feeds core events and effect results back to the app, and the
//! execution of each [`Effect`] (questions, saving, exporting, store look-ups).

use std::sync::Arc;
use std::time::Duration;

use ratatui_image::picker::Picker;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use crate::config::AppConfig;
use crate::engine::chat::ChatModel;
use crate::engine::events::CoreEvent;
use crate::host::ask::{AskOptions, CapabilityChoice};
use crate::host::compose::Composer;
use crate::host::conversation;
use crate::session::Session;
use crate::store::Store;

use super::app::{self, App, Effect, Msg};
use super::images::{load_grounding, load_images};

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
        let effects = app.update(msg);
        self.carry_out(app, effects);
    }

    /// Carries out effects the app returned outside `update` (`App::open_grounding`).
    pub fn carry_out(&self, app: &mut App, effects: Vec<Effect>) {
        for effect in effects {
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
        Effect::LoadGrounding {
            generation,
            chunk_id,
            size,
        } => {
            let tx = msg_tx.clone();
            let store = services.store.clone();
            let picker = services.picker.clone();
            tokio::spawn(load_grounding(
                store, picker, generation, chunk_id, size, tx,
            ));
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
