//! The application model and its update function.
//!
//! `App` is the UI's own view of the session: the committed session, the transcript and
//! ledger derived from it, the live run built from `CoreEvent`s, and each pane's
//! selection and scroll. `App::update` takes one `Msg` and returns the `Effect`s the run
//! loop must carry out (start or cancel a question, load images, list a directory for
//! path completion, read an attached image, save); it performs no I/O and no heavy work
//! itself, so tests drive it directly, and every result comes back as another `Msg`.
//!
//! The parts: `msg` (the two enums), `live` (the running question and its core events),
//! `commands` (keys and the keymap's global actions), `input` (composer, history,
//! attachments), `navigation` (pane focus, scrolling, selection, the images target),
//! `popups` (palette, filter, info, path picker, help, chunk detail), `explorer` (the
//! knowledge-base explorer: documents, chunks, search, agent context) and `paths` (the
//! filesystem work of path completion and attachments, which the Runtime runs).

mod commands;
mod explorer;
mod grounding;
mod input;
mod live;
mod msg;
mod navigation;
pub mod paths;
mod popups;
mod replay;
mod review;

use std::path::PathBuf;

use crossterm::event::KeyEventKind;
use ratatui_textarea::TextArea;

use crate::engine::events::RequestSnapshot;
use crate::engine::messages::BinaryContent;
use crate::host::ask::AskOptions;
use crate::host::inspect::{CapsuleEntryRef, InspectedRequest};
use crate::host::transcript::{ToolKind, ToolStep, Transcript, tool_kind};
use crate::session::Session;

use super::background::Background;
use super::keymap::Keymap;
use super::theme::{Theme, ThemeName};

pub use explorer::{ExploreRequest, Explored, Explorer, ExplorerView, LOAD_AHEAD, SearchView};
pub use grounding::{
    GroundingPage, GroundingPages, GroundingSlot, GroundingState, GroundingView, Zoom,
    grounding_cells, zoom_window,
};
pub use input::build_prompt;
use input::new_input;
pub use live::{Ended, LiveRun, Phase, Waiting};
pub use msg::{Answered, Effect, ImageMeta, Msg, PathOutcome};
pub use navigation::{
    Areas, ConversationView, IMAGE_LIST_ROWS, ImageItem, ImageState, ImagesView, InspectorView,
    LedgerView, image_cells,
};
pub use paths::attach_image;
pub use popups::{CONTEXT_HEADING_MARKED, CONTEXT_HEADING_UNMARKED, PathPurpose, Popup};
pub use replay::{REPLAY_TOGGLES, ReplayState, toggle_flag};
pub use review::{MARK_KEYS, ReviewState};

/// The panes, in `Tab` order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pane {
    Input,
    Conversation,
    Inspector,
    Ledger,
    Images,
}

impl Pane {
    pub const ORDER: [Pane; 5] = [
        Pane::Input,
        Pane::Conversation,
        Pane::Inspector,
        Pane::Ledger,
        Pane::Images,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Pane::Input => "Question",
            Pane::Conversation => "Conversation",
            Pane::Inspector => "Request inspector",
            Pane::Ledger => "Citation ledger",
            Pane::Images => "Page images",
        }
    }

    /// The title where the tab row is narrow (80 columns).
    pub fn short_title(self) -> &'static str {
        match self {
            Pane::Input => "Question",
            Pane::Conversation => "Conversation",
            Pane::Inspector => "Inspector",
            Pane::Ledger => "Ledger",
            Pane::Images => "Images",
        }
    }
}

/// What the host knows about its surroundings, for the status bar.
#[derive(Debug, Clone, PartialEq)]
pub struct HostInfo {
    pub db: String,
    /// The databases open, as a question's record in the session names them.
    pub knowledge_bases: Vec<crate::session::knowledge::KnowledgeBase>,
    /// Why the session shown reopened no database of its own, when it did not (a
    /// session recorded by a haiku.rag host says nothing of where it ran).
    pub knowledge_base_note: Option<String>,
    /// The named collections open side by side (empty: the one database `db`).
    pub collections: Vec<String>,
    /// `name @ url`, or why there is none.
    pub model: String,
    /// Whether questions can be asked.
    pub model_ready: bool,
    /// How to configure a model, shown when asking without one.
    pub model_help: String,
    pub capabilities: Vec<String>,
    pub max_searches: usize,
    /// `analysis_execute_code` calls allowed per run.
    pub max_executions: usize,
}

/// Inspector lines for (request index, width, diff mode, full instructions, theme).
pub type InspectorCache = (
    (usize, u16, bool, bool, ThemeName, Option<usize>),
    std::rc::Rc<Vec<ratatui::text::Line<'static>>>,
);

/// Wrapped conversation lines for (width, version).
pub type WrapCache = (u16, u64, std::rc::Rc<Vec<ratatui::text::Line<'static>>>);

pub struct App {
    /// The conversation as its owner (the runtime's `Conversation`) last sent it: a
    /// snapshot that never changes; every change comes as a new one.
    pub session: std::sync::Arc<Session>,
    pub session_path: Option<PathBuf>,
    pub transcript: Transcript,
    /// Committed request snapshots (or reconstructed for sessions without them).
    /// The committed requests, each rebuilt from the session when first shown.
    pub committed_requests: Vec<std::cell::OnceCell<InspectedRequest>>,
    pub live: Option<LiveRun>,
    pub ended: Option<Ended>,
    pub focus: Pane,
    pub input: TextArea<'static>,
    pub history: Vec<String>,
    history_pos: Option<usize>,
    pub attachments: Vec<(String, BinaryContent)>,
    pub conversation: ConversationView,
    pub inspector: InspectorView,
    pub ledger: LedgerView,
    pub images: ImagesView,
    /// The visual grounding view (covers the screen when open).
    pub grounding: GroundingSlot,
    pub popup: Option<Popup>,
    /// The knowledge-base explorer, when open (it replaces the panes).
    pub explorer: Option<Explorer>,
    pub notice: Option<String>,
    /// The latest search's reranker failure (cleared by a search it reranked).
    pub rerank_warning: Option<String>,
    pub error: Option<String>,
    pub options: AskOptions,
    pub keymap: Keymap,
    pub theme: Theme,
    /// The theme the configuration asked for (`auto` follows `terminal_background`).
    pub theme_setting: ThemeName,
    /// The terminal's background, when it answered the start-up query.
    pub terminal_background: Option<Background>,
    pub host: HostInfo,
    pub areas: Areas,
    /// Width of the conversation column in percent (wide layout).
    pub split: u16,
    /// Show the focused pane alone.
    pub zoom: bool,
    /// Bumped whenever the conversation's content changes (wrap cache key).
    pub version: u64,
    pub spinner: usize,
    pub dirty: bool,
    pub quit: bool,
    /// Selected document labels of the filter (kept across openings).
    pub filter_labels: Vec<String>,
    /// Where the open and attach prompts start (`dir/`): the working directory, read once
    /// here so that opening a prompt reads nothing.
    pub start_dir: String,
    pub wrap_cache: std::cell::RefCell<Option<WrapCache>>,
    /// The inspector's lines for (request, width, diff, theme); snapshots never change.
    pub inspector_cache: std::cell::RefCell<Option<InspectorCache>>,
    /// The capsule entries of a request (its index), read once from what it sent.
    pub capsule_cache: std::cell::RefCell<Option<(usize, std::rc::Rc<Vec<CapsuleEntryRef>>)>>,
    /// Cited chunks' own passages, by chunk id, as read from the knowledge base (or why
    /// not); each chunk is asked for once.
    pub passages:
        std::collections::HashMap<String, Result<crate::host::transcript::Passage, String>>,
    /// The reviewer's marks on the session's answers, by question (kept in the session).
    pub marks: std::collections::BTreeMap<u64, crate::session::marks::AnswerMark>,
    /// The judge's checks of the answers' claims, by question (kept in the session).
    pub checks: std::collections::BTreeMap<u64, crate::session::verdicts::Verification>,
    /// The judge's requests, in question order, as the inspector shows them (after the
    /// committed model requests).
    pub judge_requests: Vec<RequestSnapshot>,
    /// The question whose claims the judge is checking (1-based), while it does.
    pub verifying: Option<usize>,
    passages_asked: std::collections::HashSet<String>,
    /// What changed in the knowledge base since each question read it (by question
    /// identity; absent: unchanged, or not recorded).
    pub kb_changes: std::collections::HashMap<u64, String>,
    /// Whether the session's recorded knowledge-base points were asked to be compared.
    kb_changes_asked: bool,
    /// `q` was pressed once where quitting loses something; the next `q` quits.
    pub(super) quit_armed: bool,
    /// Questions cannot be asked and the session is never saved (reviewing).
    pub read_only: bool,
    /// The experiment under review (`groundwork open DIR`).
    pub review: Option<ReviewState>,
    /// A counterfactual replay being chosen, running or shown.
    pub replay: Option<ReplayState>,
    /// The id of the latest replay started (a late result of an earlier one is dropped).
    replay_seq: u64,
}

/// What the status line says of a finished check of question `number`'s claims.
pub fn checked_notice(number: usize, v: &crate::session::verdicts::Verification) -> String {
    format!(
        "question {number}: {} (judge {})",
        v.counts().summary(),
        v.judge
    )
}

impl App {
    pub fn new(session: Session, session_path: Option<PathBuf>, host: HostInfo) -> Self {
        let mut app = App {
            session: std::sync::Arc::new(session),
            session_path,
            transcript: Transcript::default(),
            committed_requests: Vec::new(),
            live: None,
            ended: None,
            focus: Pane::Input,
            input: new_input(),
            history: Vec::new(),
            history_pos: None,
            attachments: Vec::new(),
            conversation: ConversationView::default(),
            inspector: InspectorView::default(),
            ledger: LedgerView::default(),
            images: ImagesView::default(),
            grounding: GroundingSlot::default(),
            popup: None,
            explorer: None,
            notice: host.knowledge_base_note.clone(),
            rerank_warning: None,
            error: None,
            options: AskOptions::default(),
            keymap: Keymap::default(),
            theme: Theme::dark(),
            theme_setting: ThemeName::Auto,
            terminal_background: None,
            host,
            areas: Areas::default(),
            split: 50,
            zoom: false,
            version: 0,
            spinner: 0,
            dirty: true,
            quit: false,
            filter_labels: Vec::new(),
            start_dir: std::env::current_dir()
                .map(|d| format!("{}/", d.display()))
                .unwrap_or_default(),
            wrap_cache: std::cell::RefCell::new(None),
            inspector_cache: std::cell::RefCell::new(None),
            capsule_cache: std::cell::RefCell::new(None),
            passages: Default::default(),
            marks: Default::default(),
            checks: Default::default(),
            judge_requests: Vec::new(),
            verifying: None,
            passages_asked: Default::default(),
            kb_changes: Default::default(),
            kb_changes_asked: false,
            quit_armed: false,
            read_only: false,
            review: None,
            replay: None,
            replay_seq: 0,
        };
        app.rebuild();
        app
    }

    pub fn with_keymap(mut self, keymap: Keymap) -> Self {
        self.keymap = keymap;
        self
    }

    pub fn with_theme(mut self, theme: ThemeName) -> Self {
        self.theme_setting = theme;
        self.theme = Theme::for_terminal(theme, self.terminal_background);
        self
    }

    /// What the terminal said about its background (`None`: it did not answer).
    pub fn set_terminal_background(&mut self, bg: Option<Background>) {
        self.terminal_background = bg;
        self.theme = Theme::for_terminal(self.theme_setting, bg);
        *self.inspector_cache.borrow_mut() = None;
        self.version += 1;
        self.dirty = true;
    }

    /// Rebuilds everything derived from the committed session.
    fn rebuild(&mut self) {
        self.transcript = Transcript::build(&self.session.messages, &self.session.state);
        self.read_reviews();
        self.apply_passages();
        self.committed_requests = (0..crate::host::inspect::SessionRequests::of(&self.session)
            .len())
            .map(|_| std::cell::OnceCell::new())
            .collect();
        *self.inspector_cache.borrow_mut() = None;
        *self.capsule_cache.borrow_mut() = None;
        self.history = self
            .transcript
            .turns
            .iter()
            .map(|t| t.prompt.clone())
            .collect();
        self.ledger.selected = self
            .ledger
            .selected
            .min(self.transcript.ledger.len().saturating_sub(1));
        self.version += 1;
        self.bump();
    }

    /// Whether the question input holds text that quitting would lose.
    pub fn input_holds_text(&self) -> bool {
        self.input.lines().iter().any(|l| !l.trim().is_empty())
    }

    /// The passages read so far, given to the transcript's citations.
    fn apply_passages(&mut self) {
        let read: std::collections::HashMap<String, crate::host::transcript::Passage> = self
            .passages
            .iter()
            .filter_map(|(id, p)| p.as_ref().ok().map(|p| (id.clone(), p.clone())))
            .collect();
        self.transcript.set_passages(&read);
    }

    /// A read of the cited chunks not asked for yet, if there are any.
    fn want_passages(&mut self) -> Vec<Effect> {
        let wanted: Vec<(Option<String>, String, u64)> = self
            .transcript
            .cited_chunks()
            .into_iter()
            .filter(|(_, id, _)| !self.passages_asked.contains(id))
            .collect();
        if wanted.is_empty() {
            return Vec::new();
        }
        self.passages_asked
            .extend(wanted.iter().map(|(_, id, _)| id.clone()));
        vec![Effect::LoadPassages(wanted)]
    }

    /// A comparison of the knowledge bases the session's questions read with them as they
    /// are now, once per session shown.
    fn want_kb_changes(&mut self) -> Vec<Effect> {
        if self.kb_changes_asked {
            return Vec::new();
        }
        self.kb_changes_asked = true;
        let points = crate::session::knowledge::points(&self.session.groundwork.extra);
        if points.is_empty() {
            return Vec::new();
        }
        vec![Effect::CompareKnowledgeBases(points)]
    }

    /// Live content changed (the committed part, and so `version`, did not).
    fn bump(&mut self) {
        if self.conversation.scroll.is_some() {
            self.conversation.new_below = true;
        }
        self.dirty = true;
    }

    /// Whether the session shown is the scripted demonstration.
    pub fn scripted_demo(&self) -> bool {
        self.session.groundwork.scripted_demo
    }

    /// Committed and live requests, in order.
    pub fn requests(&self) -> Vec<InspectedRequest> {
        let mut out = crate::host::inspect::requests(&self.session);
        if let Some(live) = &self.live {
            for s in &live.requests {
                out.push(InspectedRequest {
                    number: out.len() + 1,
                    recorded: true,
                    snapshot: s.clone(),
                });
            }
        }
        out
    }

    /// The number of requests (cheaper than `requests()`).
    pub fn request_count(&self) -> usize {
        self.committed_requests.len()
            + self.judge_requests.len()
            + self.live.as_ref().map_or(0, |l| l.requests.len())
    }

    /// The marks and the judge's checks the session holds, and the judge's requests.
    fn read_reviews(&mut self) {
        let extra = &self.session.groundwork.extra;
        self.marks = crate::session::marks::marks(extra);
        self.checks = crate::session::verdicts::verifications(extra);
        self.judge_requests = self
            .checks
            .values()
            .flat_map(|v| {
                (0..v.requests.len()).filter_map(|k| crate::host::verify::judge_snapshot(v, k))
            })
            .collect();
    }

    /// The request the inspector shows (0-based), if any.
    pub fn selected_request(&self) -> Option<usize> {
        let n = self.request_count();
        if n == 0 {
            return None;
        }
        Some(self.inspector.selected.unwrap_or(n - 1).min(n - 1))
    }

    /// The snapshot of request `i` (0-based) without cloning the others.
    pub fn request_at(&self, i: usize) -> Option<(bool, &RequestSnapshot)> {
        let c = self.committed_requests.len();
        if i < c {
            let r = self.committed_requests[i].get_or_init(|| {
                crate::host::inspect::SessionRequests::of(&self.session)
                    .get(i + 1)
                    .expect("counted in rebuild")
            });
            Some((r.recorded, &r.snapshot))
        } else if i < c + self.judge_requests.len() {
            Some((true, &self.judge_requests[i - c]))
        } else {
            let i = i - c - self.judge_requests.len();
            self.live
                .as_ref()
                .and_then(|l| l.requests.get(i))
                .map(|s| (true, s))
        }
    }

    /// The capsule entries of the request the inspector shows (empty without a capsule).
    pub fn capsule_entries(&self) -> std::rc::Rc<Vec<CapsuleEntryRef>> {
        let Some(i) = self.selected_request() else {
            return std::rc::Rc::default();
        };
        if let Some((k, e)) = self.capsule_cache.borrow().as_ref()
            && *k == i
        {
            return e.clone();
        }
        let entries = std::rc::Rc::new(
            self.request_at(i)
                .map(|(_, s)| crate::host::inspect::capsule_entries(s))
                .unwrap_or_default(),
        );
        *self.capsule_cache.borrow_mut() = Some((i, entries.clone()));
        entries
    }

    /// The selected capsule entry of the inspector's request, if any.
    pub fn selected_capsule_entry(&self) -> Option<CapsuleEntryRef> {
        let k = self.inspector.entry?;
        self.capsule_entries().get(k).cloned()
    }

    /// Token figures summed over the session's requests and the running question's.
    pub fn token_totals(&self) -> crate::engine::tokens::TokenTotals {
        let mut t = crate::engine::tokens::TokenTotals::default();
        let committed = self.session.groundwork.requests.iter().map(|r| &r.tokens);
        let live = self
            .live
            .iter()
            .flat_map(|l| l.requests.iter().map(|s| &s.tokens));
        for k in committed.chain(live).flatten() {
            t.add(k);
        }
        t
    }

    /// The counted tokens of the question whose identity (message index) is `question`:
    /// raw and sent summed over the requests of the run that asked it, and how many
    /// requests that was. `None` when the session records no run starting at that question
    /// (a haiku.rag host's session, or one written before runs recorded their starts) or
    /// one of its requests carries no counts.
    pub fn question_tokens(&self, question: u64) -> Option<(usize, usize, usize)> {
        let g = &self.session.groundwork;
        let run = g.timings.iter().find(|t| {
            t.start
                .as_ref()
                .is_some_and(|s| s.history as u64 == question)
        })?;
        let (mut raw, mut sent, mut n) = (0, 0, 0);
        for r in g.requests.iter().filter(|r| r.run_id == run.run_id) {
            let k = r.tokens.as_ref()?;
            raw += k.raw;
            sent += k.sent;
            n += 1;
        }
        (n > 0).then_some((raw, sent, n))
    }

    /// The ledger rows the filter lets through, with their index in the transcript.
    pub fn visible_ledger(&self) -> Vec<usize> {
        self.transcript
            .ledger
            .iter()
            .enumerate()
            .filter(|(_, r)| !self.ledger.violations_only || r.violation)
            .map(|(i, _)| i)
            .collect()
    }

    pub fn running(&self) -> bool {
        self.live.is_some()
    }

    /// Whether something animates (the spinner of a running question).
    pub fn animating(&self) -> bool {
        self.running()
            || self.replay_running()
            || self
                .grounding
                .view
                .as_ref()
                .is_some_and(|v| matches!(v.state, GroundingState::Loading))
    }

    /// One message in, the effects to carry out out.
    pub fn update(&mut self, msg: Msg) -> Vec<Effect> {
        self.dirty = true;
        let msg = match self.on_review(msg) {
            Ok(effects) => return effects,
            Err(msg) => msg,
        };
        let mut effects = self.update_panes(msg);
        effects.extend(self.want_passages());
        effects.extend(self.want_kb_changes());
        if self.read_only {
            // Reviewing never writes the session it shows.
            effects.retain(|e| {
                !matches!(
                    e,
                    Effect::SaveAs(_)
                        | Effect::Ask { .. }
                        | Effect::Mark { .. }
                        | Effect::Filter(_)
                        | Effect::NewSession(_)
                )
            });
        }
        effects
    }

    fn update_panes(&mut self, msg: Msg) -> Vec<Effect> {
        match msg {
            Msg::Key(k) if k.kind == KeyEventKind::Press || k.kind == KeyEventKind::Repeat => {
                self.on_key(k)
            }
            Msg::Key(_) => {
                self.dirty = false;
                Vec::new()
            }
            // The explorer is driven by keys alone.
            Msg::Mouse(_) if self.explorer.is_some() => {
                self.dirty = false;
                Vec::new()
            }
            // The replay's screens are driven by keys alone.
            Msg::Mouse(_) if self.replay.is_some() => {
                self.dirty = false;
                Vec::new()
            }
            Msg::Mouse(m) => self.on_mouse(m),
            Msg::Paste(text) => {
                if self.paste_into_replay(&text) {
                    return Vec::new();
                }
                if self.focus == Pane::Input && self.popup.is_none() && self.explorer.is_none() {
                    self.input.insert_str(text);
                }
                Vec::new()
            }
            Msg::Resize => {
                let mut effects = self.refresh_images();
                effects.extend(self.refresh_grounding());
                effects
            }
            Msg::Tick => {
                self.spinner = self.spinner.wrapping_add(1);
                Vec::new()
            }
            Msg::Started => {
                if self.images.target.is_none() {
                    self.select_latest_citation()
                } else {
                    Vec::new()
                }
            }
            Msg::Core(ev) => self.on_core(ev),
            Msg::ImagesListed { generation, items } => {
                self.images_listed(generation, items);
                Vec::new()
            }
            Msg::ImageReady {
                generation,
                index,
                result,
            } => {
                self.image_ready(generation, index, result);
                Vec::new()
            }
            Msg::GroundingReady { generation, result } => {
                self.grounding_ready(generation, result);
                self.zoom_effect()
            }
            Msg::GroundingZoomed {
                generation,
                at,
                result,
            } => {
                self.grounding_zoomed(generation, at, result);
                Vec::new()
            }
            Msg::KbChanges(changes) => {
                self.kb_changes.extend(changes);
                self.version += 1;
                Vec::new()
            }
            Msg::Passages(read) => {
                self.passages.extend(read);
                self.apply_passages();
                self.version += 1;
                Vec::new()
            }
            Msg::ChunkText { chunk_id, text } => {
                self.chunk_text(chunk_id, text);
                Vec::new()
            }
            Msg::Documents(docs) => {
                self.documents(docs);
                Vec::new()
            }
            Msg::Explored(m) => self.explored(m),
            Msg::DbInfo(info) => {
                self.db_info(info);
                Vec::new()
            }
            Msg::PathEntries { typed, entries } => {
                self.path_entries(typed, entries);
                Vec::new()
            }
            Msg::PathResolved { typed, outcome } => self.path_resolved(typed, outcome),
            Msg::ImageAttached { path, result } => {
                self.image_attached(path, result);
                Vec::new()
            }
            Msg::SessionOpened(result) => {
                match result {
                    Ok((path, session)) => {
                        self.load_session(session, Some(path.clone()));
                        self.notice = Some(format!("opened {}", path.display()));
                        return self.select_latest_citation();
                    }
                    Err(e) => self.error = Some(e),
                }
                Vec::new()
            }
            Msg::NewSession(session, path) => {
                self.load_session(session, path);
                self.notice = Some("new session".into());
                Vec::new()
            }
            Msg::Committed {
                run_id,
                session,
                deferred,
            } => self.committed(run_id, session, deferred),
            Msg::Updated(session) => {
                self.session = session;
                self.read_reviews();
                *self.inspector_cache.borrow_mut() = None;
                self.version += 1;
                Vec::new()
            }
            Msg::Verified { number, result } => {
                self.verifying = None;
                self.notice = Some(match result {
                    Ok(v) => checked_notice(number, &v),
                    Err(e) => format!("question {number}: {e}; nothing was stored"),
                });
                self.dirty = true;
                Vec::new()
            }
            // The runtime's: it commits, then says so with `Committed`.
            Msg::Answered(_) => {
                self.dirty = false;
                Vec::new()
            }
            Msg::Notice(n) => {
                self.notice = Some(n);
                self.error = None;
                Vec::new()
            }
            Msg::Error(e) => {
                self.error = Some(e);
                Vec::new()
            }
            Msg::MarkSaved(_) => Vec::new(),
            Msg::Replayed { id, result } => {
                self.replayed(id, result);
                Vec::new()
            }
            Msg::ReplaySaved(result) => {
                self.replay_saved(result);
                Vec::new()
            }
        }
    }

    /// Shows another session (new, opened), as the conversation's owner sent it.
    fn load_session(&mut self, session: std::sync::Arc<Session>, path: Option<PathBuf>) {
        self.session = session;
        self.session_path = path;
        self.kb_changes.clear();
        self.kb_changes_asked = false;
        self.live = None;
        self.ended = None;
        self.inspector = InspectorView::default();
        self.ledger = LedgerView::default();
        self.conversation = ConversationView::default();
        self.images = ImagesView {
            generation: self.images.generation + 1,
            ..ImagesView::default()
        };
        self.rebuild();
    }

    /// The current document filter, if any.
    pub fn document_filter(&self) -> Option<String> {
        crate::host::transcript::document_filter(&self.session.state)
    }

    /// Searches and executions of the running (or last) question.
    pub fn budget_use(&self) -> (usize, usize) {
        let steps: &[ToolStep] = match &self.live {
            Some(l) => &l.turn.steps,
            None => self
                .transcript
                .turns
                .last()
                .map(|t| t.steps.as_slice())
                .unwrap_or(&[]),
        };
        let s = steps
            .iter()
            .filter(|s| tool_kind(&s.name) == ToolKind::Search)
            .count();
        let e = steps
            .iter()
            .filter(|s| tool_kind(&s.name) == ToolKind::Execute)
            .count();
        (s, e)
    }
}
