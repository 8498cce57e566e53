//! The background side of the workbench: the services effects use ([`Services`]), the
//! [`Runtime`] that feeds core events and effect results back to the app, and the
//! execution of each [`Effect`] (questions, saving, exporting, store look-ups).
//!
//! The runtime holds the workbench's [`Conversation`], the one owner of the open session:
//! it runs questions over it, commits them, records marks and the document filter, and
//! saves. The app only shows snapshots of it (`Msg::Committed`, `Msg::Updated`,
//! `Msg::SessionOpened`) and asks for changes through effects.

use std::sync::Arc;
use std::time::Duration;

use ratatui_image::picker::Picker;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use crate::config::AppConfig;
use crate::engine::chat::ChatModel;
use crate::engine::events::CoreEvent;
use crate::host::ask::{AskOptions, CapabilityChoice};
use crate::host::compose::Composer;
use crate::host::conversation::{self, Conversation};
use crate::session::Session;
use crate::store::Store;

use super::app::{self, Answered, App, Effect, Msg};
use super::images::{load_grounding, load_images};
use super::reads::{
    Held, compare_point, db_info, document_labels, explore, find_chunk, recorded_points,
    store_holding_or_as_read,
};

/// How a replay's changes (`ask`'s flags, as an `eval` arm takes them) turn the
/// workbench's composition into the replay's: the face parses them (and builds another
/// model when they name one); the error is one line.
pub type ReplayChanges = Arc<
    dyn Fn(
            String,
            Composer,
        )
            -> crate::engine::chat::BoxFuture<'static, Result<(Composer, AskOptions), String>>
        + Send
        + Sync,
>;

/// What the effects need: the store, the model, the configuration and the image picker.
#[derive(Clone)]
pub struct Services {
    pub store: Option<Arc<Store>>,
    /// Named collections searched side by side (then `store` is the first of them).
    pub collections: Vec<(String, Arc<Store>)>,
    pub model: Option<Arc<dyn ChatModel>>,
    /// The model that checks claims against what they cite (none: `model`).
    pub judge: Option<Arc<dyn ChatModel>>,
    pub config: AppConfig,
    /// Evidence capabilities of every question (empty: RAG).
    pub capabilities: Vec<CapabilityChoice>,
    pub eager: bool,
    pub picker: Picker,
    /// The sandbox worker executable for the analysis capability (default: this binary).
    pub sandbox_worker: Option<std::path::PathBuf>,
    /// How the requests' tokens are counted (default: by the model's name).
    pub counter: Option<crate::engine::tokens::SharedCounter>,
    /// How a replay's changes are read (none: replays are refused in one line).
    pub replay_changes: Option<ReplayChanges>,
    /// Where copied text goes.
    pub clipboard: Clipboard,
    /// Where sharper page rasters for visual grounding are kept (none: the stored ones
    /// are shown; only the real workbench sets it, so tests never write the user's data
    /// dir).
    pub page_cache: Option<std::path::PathBuf>,
    /// Saves in the order they were asked for: the number of the last one asked, and per
    /// file the number of the last one written (held while writing, so two saves of one
    /// file never interleave and an older copy never lands over a newer one).
    saves: Arc<(
        std::sync::atomic::AtomicU64,
        std::sync::Mutex<std::collections::HashMap<std::path::PathBuf, u64>>,
    )>,
}

/// Where the workbench's `y` puts what it copies.
#[derive(Clone)]
pub enum Clipboard {
    /// The terminal's clipboard, through OSC 52 on standard output (it reaches the system
    /// clipboard over ssh and through tmux when the terminal allows it).
    Terminal,
    /// Kept here, newest last: the default, so a workbench drawn off-screen (tests, a
    /// `TestBackend`) never writes escape sequences to a terminal it does not own.
    Kept(Arc<std::sync::Mutex<Vec<String>>>),
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
            collections: Vec::new(),
            model,
            judge: None,
            config,
            capabilities,
            eager,
            picker: Picker::halfblocks(),
            sandbox_worker: None,
            counter: None,
            replay_changes: None,
            clipboard: Clipboard::Kept(Default::default()),
            page_cache: None,
            saves: Default::default(),
        }
    }

    /// Searches these named collections side by side (the first also becomes `store`).
    pub fn with_collections(mut self, collections: Vec<(String, Arc<Store>)>) -> Self {
        if let Some((_, first)) = collections.first() {
            self.store = Some(first.clone());
        }
        self.collections = collections;
        self
    }

    /// Every open store with its collection name (`None`: the one unnamed store).
    pub fn stores(&self) -> Vec<(Option<String>, Arc<Store>)> {
        self.composer().stores()
    }

    /// What the agents of questions are composed from.
    pub fn composer(&self) -> Composer {
        Composer::new(self.model.clone(), self.store.clone(), self.config.clone())
            .with_collections(self.collections.clone())
            .with_counter(self.counter.clone())
    }
}

/// The background side of the loop: the channels core events and effect results come
/// back on, and the services effects use. Tests drive it step by step.
pub struct Runtime {
    services: Arc<Services>,
    /// The open session's one owner (taken over from the app's first snapshot at the
    /// first message, replaced when a session is opened or made).
    conversation: Option<Conversation>,
    /// The session whose claims the judge is checking (its creation time, which names it).
    checking: Option<chrono::DateTime<chrono::Utc>>,
    /// The question running over it: its run id and cancel token.
    asking: Option<(String, crate::engine::cancel::CancelToken)>,
    /// What the app shows while a commit changes the session in place.
    empty: Arc<Session>,
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
            conversation: None,
            checking: None,
            asking: None,
            empty: Arc::new(Session::new(String::new())),
            core_tx,
            core_rx,
            msg_tx,
            msg_rx,
        }
    }

    /// Updates the app with `msg` and carries out the effects.
    pub fn handle(&mut self, app: &mut App, msg: Msg) {
        let msg = match msg {
            Msg::Answered(answered) => return self.answered(app, *answered),
            // A check is kept by the conversation's owner, then shown.
            // A check of a session that is no longer the open one is not kept in this one.
            Msg::Verified {
                number,
                result: Ok(v),
            } if self.checking.take()
                != Some(self.conversation(app).session().groundwork.created_at) =>
            {
                Msg::Verified {
                    number,
                    result: Err(format!(
                        "the session whose question {number} it checked is no longer open ({} claims)",
                        v.claims.len()
                    )),
                }
            }
            Msg::Verified {
                number,
                result: Ok(v),
            } => {
                self.conversation(app).set_verification(&v);
                let snapshot = self.conversation(app).snapshot();
                self.handle(app, Msg::Updated(snapshot));
                self.save_saying(Some(crate::tui::app::checked_notice(number, &v)));
                Msg::Verified {
                    number,
                    result: Ok(v),
                }
            }
            // The session opened is the conversation from now on.
            Msg::SessionOpened(Ok((path, session))) => {
                let writable = !app.read_only && app.review.is_none();
                self.conversation = Some(Conversation::shown(
                    session.clone(),
                    writable.then(|| path.clone()),
                ));
                Msg::SessionOpened(Ok((path, session)))
            }
            msg => msg,
        };
        let effects = app.update(msg);
        self.carry_out(app, effects);
    }

    /// Carries out effects the app returned outside `update` (`App::open_grounding`).
    pub fn carry_out(&mut self, app: &mut App, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::Ask {
                    run_id,
                    prompt,
                    options,
                    cancel,
                } => self.ask(app, run_id, prompt, options, cancel),
                Effect::Mark { question, mark } => {
                    self.conversation(app).set_mark(question, mark);
                    self.show_change(app);
                }
                Effect::Verify { number, turn } => {
                    self.checking = Some(self.conversation(app).session().groundwork.created_at);
                    self.verify(number, *turn);
                }
                Effect::Filter(labels) => {
                    let collections = app.host.collections.clone();
                    let conversation = self.conversation(app);
                    if collections.len() > 1 {
                        conversation.set_collection_filter(&labels, &collections);
                    } else {
                        conversation.set_document_filter(&labels);
                    }
                    let snapshot = conversation.snapshot();
                    self.handle(app, Msg::Updated(snapshot));
                }
                Effect::SaveAs(path) => {
                    self.conversation(app).set_path(path);
                    self.save();
                }
                Effect::NewSession(path) => {
                    let model = app.session.groundwork.model.clone();
                    let mut session =
                        crate::session::Session::new(model.clone().unwrap_or_default());
                    session.groundwork.model = model;
                    let conversation = Conversation::shown(Arc::new(session), path.clone());
                    let snapshot = conversation.snapshot();
                    self.conversation = Some(conversation);
                    self.handle(app, Msg::NewSession(snapshot, path));
                }
                effect => execute(effect, app, &self.services, &self.msg_tx),
            }
        }
    }

    /// The open session's owner; the first time one is needed it takes over the session
    /// the app was built over (the app's first snapshot: the app never changes it).
    fn conversation(&mut self, app: &App) -> &mut Conversation {
        self.conversation.get_or_insert_with(|| {
            let path = (!app.read_only).then(|| app.session_path.clone()).flatten();
            Conversation::shown(app.session.clone(), path)
        })
    }

    /// Sends the app the session as it is after a change and saves it when it has a file.
    fn show_change(&mut self, app: &mut App) {
        let snapshot = self.conversation(app).snapshot();
        self.handle(app, Msg::Updated(snapshot));
        self.save();
    }

    /// Starts a question over the conversation; its events come through `core_tx`, its
    /// outcome back to [`Runtime::answered`].
    fn ask(
        &mut self,
        app: &App,
        run_id: String,
        prompt: crate::engine::messages::UserContentValue,
        options: AskOptions,
        cancel: crate::engine::cancel::CancelToken,
    ) {
        let services = &self.services;
        let opts = AskOptions {
            capabilities: services.capabilities.clone(),
            eager: services.eager,
            sandbox_worker: services.sandbox_worker.clone(),
            ..options
        };
        let agent = match services.composer().agent(&opts) {
            Ok(agent) => agent,
            Err(e) => {
                let _ = self.core_tx.send(CoreEvent::RunFailed {
                    run_id,
                    request: 0,
                    error: e.to_string(),
                });
                return;
            }
        };
        let (core_tx, msg_tx) = (self.core_tx.clone(), self.msg_tx.clone());
        self.asking = Some((run_id.clone(), cancel.clone()));
        let question =
            self.conversation(app)
                .start(agent, prompt, Some(run_id.clone()), core_tx, cancel);
        tokio::spawn(async move {
            let outcome = question.outcome().await;
            let _ = msg_tx.send(Msg::Answered(Box::new(Answered { run_id, outcome })));
        });
    }

    /// Checks `turn`'s claims with the judge in the background; the check comes back as
    /// [`Msg::Verified`].
    fn verify(&mut self, number: usize, turn: crate::host::transcript::Turn) {
        let tx = self.msg_tx.clone();
        let Some(judge) = self.services.judge.clone().or(self.services.model.clone()) else {
            let _ = tx.send(Msg::Verified {
                number,
                result: Err("no judge model: configure [judge] or [model]".into()),
            });
            return;
        };
        tokio::spawn(async move {
            let cancel = crate::engine::cancel::CancelToken::new();
            let result = crate::host::verify::check_turn(&*judge, &turn, &cancel, &|_, _| {})
                .await
                .map(Box::new)
                .map_err(|e| format!("the judge failed: {e}"));
            let _ = tx.send(Msg::Verified { number, result });
        });
    }

    /// A question's outcome: committed when it succeeded and was not cancelled meanwhile,
    /// shown, and saved. A failed or cancelled run commits nothing.
    fn answered(&mut self, app: &mut App, answered: Answered) {
        let Answered { run_id, outcome } = answered;
        // The outcome of a run the app has since replaced is not this question's.
        if self.asking.as_ref().is_none_or(|(id, _)| *id != run_id) {
            return;
        }
        let Some((_, cancel)) = self.asking.take() else {
            return;
        };
        if outcome.is_err() {
            // The run's own events told the app (`RunFailed`, `RunCancelled`).
            return;
        }
        if cancel.is_cancelled() {
            // Cancelled after the run finished, before its commit: it is not committed,
            // and the app is told as the engine would have told it.
            let request = outcome.as_ref().map_or(0, |r| r.usage.requests);
            let cancelled = CoreEvent::RunCancelled { run_id, request };
            self.handle(app, Msg::Core(cancelled));
            return;
        }
        let deferred = matches!(
            &outcome,
            Ok(r) if matches!(r.output, crate::engine::agent::RunOutput::Deferred(_))
        );
        let Some(conversation) = self.conversation.as_mut() else {
            return;
        };
        // The app's snapshot is let go first, so the commit changes the session in place
        // instead of copying it; nothing is drawn before the new one arrives.
        app.session = self.empty.clone();
        conversation.commit_question(&outcome, &app.host.knowledge_bases);
        let snapshot = conversation.snapshot();
        self.handle(
            app,
            Msg::Committed {
                run_id,
                session: snapshot,
                deferred,
            },
        );
        self.save();
    }

    /// Saves the conversation in the background when it has a file (saves of one file
    /// land in the order they were asked for); the result comes back as a notice or an
    /// error.
    fn save(&mut self) {
        self.save_saying(None);
    }

    /// [`Runtime::save`], its notice saying `what` first (`what; saved FILE`).
    fn save_saying(&mut self, what: Option<String>) {
        let Some(job) = self.conversation.as_ref().and_then(|c| c.save_job()) else {
            return;
        };
        let tx = self.msg_tx.clone();
        let saves = self.services.saves.clone();
        let number = saves.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        tokio::task::spawn_blocking(move || {
            let path = job.path().to_path_buf();
            let mut written = saves.1.lock().unwrap_or_else(|e| e.into_inner());
            if written.get(&path).is_some_and(|&n| n > number) {
                // A newer copy of the session is already in the file.
                return;
            }
            written.insert(path, number);
            // Never over another writer's work (an `ask` on the same file): then the
            // conversation is kept beside it, and the error says where.
            let msg = match job.run() {
                Ok(saved) if saved.note.is_some() => Msg::Error(saved.note.unwrap_or_default()),
                Ok(saved) => Msg::Notice(format!(
                    "{}saved {}",
                    what.map(|w| format!("{w}; ")).unwrap_or_default(),
                    saved
                        .path
                        .file_name()
                        .map(|f| f.to_string_lossy())
                        .unwrap_or_default()
                )),
                Err(e) => Msg::Error(format!("cannot save the session: {e:#}")),
            };
            let _ = tx.send(msg);
        });
    }

    /// Waits for the next message from the background (engine or effects).
    pub async fn next_background(&mut self) -> Option<Msg> {
        // Engine events first, as `drain` takes them: a run's `RunFinished` is always
        // handled before its outcome (`Msg::Answered`), which is sent after it.
        tokio::select! {
            biased;
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

fn execute(effect: Effect, app: &App, services: &Arc<Services>, msg_tx: &UnboundedSender<Msg>) {
    match effect {
        Effect::Quit => {}
        // The conversation's effects are the runtime's own (`Runtime::carry_out`).
        Effect::Ask { .. }
        | Effect::Verify { .. }
        | Effect::Mark { .. }
        | Effect::Filter(_)
        | Effect::SaveAs(_)
        | Effect::NewSession(_) => {}
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
            // A session opened for questions: a JSON one is continued in the SQLite file
            // beside it. One opened to review is read as it is.
            let continues = !app.read_only && app.review.is_none();
            tokio::task::spawn_blocking(move || {
                let at = if continues {
                    crate::session::continue_at(&path)
                } else {
                    crate::session::Continued {
                        read: Some(path.clone()),
                        write: path.clone(),
                        note: None,
                    }
                };
                let read = at.read.clone().unwrap_or_else(|| path.clone());
                let msg = match Session::load(&read) {
                    Ok(s) => Msg::SessionOpened(Ok((at.write, Arc::new(s)))),
                    Err(e) => Msg::SessionOpened(Err(e.to_string())),
                };
                let opened = matches!(msg, Msg::SessionOpened(Ok(_)));
                let _ = tx.send(msg);
                if let Some(note) = at.note.filter(|_| opened) {
                    let _ = tx.send(Msg::Notice(note));
                }
            });
        }
        Effect::LoadDocuments => {
            let tx = msg_tx.clone();
            let stores = services.stores();
            tokio::spawn(async move {
                let _ = tx.send(Msg::Documents(document_labels(&stores).await));
            });
        }
        Effect::Explore(request) => {
            let tx = msg_tx.clone();
            // The collection the explorer browses (its reads were asked for just now).
            let browsed = app.explorer.as_ref().and_then(|e| e.collection.as_deref());
            let store = match browsed {
                Some(name) => services
                    .collections
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, s)| s.clone())
                    .or_else(|| services.store.clone()),
                None => services.store.clone(),
            };
            let vision =
                crate::host::compose::driving_vision(&services.config, &services.capabilities);
            tokio::spawn(async move {
                let _ = tx.send(Msg::Explored(explore(store, request, vision).await));
            });
        }
        Effect::LoadDbInfo => {
            let tx = msg_tx.clone();
            let stores = services.stores();
            tokio::spawn(async move {
                let _ = tx.send(Msg::DbInfo(db_info(&stores).await));
            });
        }
        Effect::LoadPassages(wanted) => {
            let tx = msg_tx.clone();
            let stores = services.stores();
            if stores.is_empty() {
                // Nothing to read (a session opened for review only): said at once.
                let none = wanted
                    .into_iter()
                    .map(|(_, id, _)| (id, Err("no knowledge base is open".to_string())))
                    .collect();
                let _ = tx.send(Msg::Passages(none));
                return;
            }
            // Where each chunk was when its question read it (the database and the versions
            // of its tables the session recorded), for a chunk that is gone now.
            let extra = &app.session.groundwork.extra;
            let wanted: Vec<_> = wanted
                .into_iter()
                .map(|(collection, id, question)| {
                    let as_read =
                        crate::host::explore::as_read_point(extra, collection.as_deref(), question);
                    (collection, id, as_read)
                })
                .collect();
            tokio::spawn(async move {
                let mut read = Vec::with_capacity(wanted.len());
                // Each recorded point opened once (and only when a chunk is gone now).
                let mut opened: Vec<(_, Option<Store>)> = Vec::new();
                for (collection, id, as_read) in wanted {
                    let now =
                        crate::host::explore::find_passage(&stores, collection.as_deref(), &id)
                            .await;
                    let passage = match (now, as_read) {
                        (Err(e), Some(point)) => {
                            if !opened.iter().any(|(p, _)| *p == point) {
                                let then =
                                    crate::host::explore::open_as_read(&point.0, &point.1).await;
                                opened.push((point.clone(), then.ok()));
                            }
                            let then = opened
                                .iter()
                                .find(|(p, _)| *p == point)
                                .and_then(|(_, s)| s.as_ref());
                            match then {
                                Some(then) => crate::host::explore::passage_as_read(then, &id)
                                    .await
                                    .ok_or(e),
                                None => Err(e),
                            }
                        }
                        (now, _) => now,
                    };
                    read.push((id, passage));
                }
                let _ = tx.send(Msg::Passages(read));
            });
        }
        Effect::CompareKnowledgeBases(points) => {
            let tx = msg_tx.clone();
            let stores = services.stores();
            tokio::spawn(async move {
                let mut changes = Vec::new();
                // Each recorded point compared once, with the open store at its location.
                let mut compared: Vec<(
                    String,
                    crate::session::knowledge::TableVersions,
                    Option<String>,
                )> = Vec::new();
                for (question, location, versions) in points {
                    let known = compared
                        .iter()
                        .find(|(l, v, _)| *l == location && *v == versions)
                        .map(|(.., c)| c.clone());
                    let change = match known {
                        Some(c) => c,
                        None => {
                            let c = compare_point(&stores, &location, &versions).await;
                            compared.push((location, versions, c.clone()));
                            c
                        }
                    };
                    if let Some(c) = change {
                        changes.push((question, c));
                    }
                }
                let _ = tx.send(Msg::KbChanges(changes));
            });
        }
        // What goes to the clipboard passes the redactor like every other output.
        Effect::Copy(text) => match &services.clipboard {
            Clipboard::Terminal => {
                use std::io::Write;
                let mut out = std::io::stdout();
                let text = crate::errors::redact(&text);
                let sent = crossterm::execute!(
                    out,
                    crossterm::clipboard::CopyToClipboard::to_clipboard_from(text.as_bytes())
                )
                .and_then(|_| out.flush());
                if let Err(e) = sent {
                    let _ = msg_tx.send(Msg::Error(format!("could not copy: {e}")));
                }
            }
            Clipboard::Kept(kept) => kept
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(crate::errors::redact(&text).into_owned()),
        },
        Effect::ZoomGrounding {
            generation,
            page,
            zoom,
            step,
            image,
            size,
        } => {
            let tx = msg_tx.clone();
            let picker = services.picker.clone();
            tokio::task::spawn_blocking(move || {
                let result = super::images::encode_zoomed(&picker, &image, size, zoom, step);
                let _ = tx.send(Msg::GroundingZoomed {
                    generation,
                    at: (page, zoom, step),
                    result,
                });
            });
        }
        Effect::LoadChunk(chunk_id) => {
            let tx = msg_tx.clone();
            let stores = services.stores();
            tokio::spawn(async move {
                let text = find_chunk(&stores, &chunk_id).await;
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
        Effect::SaveMark { dir, review } => {
            let tx = msg_tx.clone();
            tokio::task::spawn_blocking(move || {
                let result = crate::eval::review::save_mark(&dir, &review)
                    .map_err(|e| e.0)
                    .and_then(|()| {
                        crate::eval::review::rewrite_report(&dir).map_err(|e| {
                            format!(
                                "the mark is saved, but the report was not rewritten: {}",
                                e.0
                            )
                        })
                    });
                let _ = tx.send(Msg::MarkSaved(result.map(|()| review)));
            });
        }
        effect @ (Effect::Replay { .. } | Effect::SaveReplay { .. }) => {
            super::replays::execute(effect, app, services, msg_tx)
        }
        Effect::LoadImages {
            generation,
            target,
            size,
        } => {
            let tx = msg_tx.clone();
            let stores = services.stores();
            let picker = services.picker.clone();
            let points = recorded_points(app);
            tokio::spawn(async move {
                let store = store_holding_or_as_read(
                    &stores,
                    target.collection.as_deref(),
                    Held::Document(&target.document_id),
                    points,
                )
                .await;
                load_images(store, picker, generation, target, size, tx).await
            });
        }
        Effect::LoadGrounding {
            generation,
            chunk_id,
            size,
            context,
            collection,
        } => {
            let tx = msg_tx.clone();
            let stores = services.stores();
            let picker = services.picker.clone();
            // Pages twice the view's height in pixels, so fit width and 100 % stay sharp.
            let sharpen =
                services
                    .page_cache
                    .clone()
                    .map(|cache| crate::host::grounding::Sharpen {
                        min_height: 2 * size.1 as u32 * picker.font_size().height as u32,
                        cache,
                    });
            let points = recorded_points(app);
            tokio::spawn(async move {
                let store = store_holding_or_as_read(
                    &stores,
                    collection.as_deref(),
                    Held::Chunk(&chunk_id),
                    points,
                )
                .await;
                let load = super::images::GroundingLoad {
                    generation,
                    chunk_id,
                    size,
                    context,
                    sharpen,
                };
                load_grounding(store, picker, load, tx).await
            });
        }
    }
}
