//! The application model and its update function.
//!
//! `App` is the UI's own view of the session: the committed session, the transcript and
//! ledger derived from it, the live run built from `CoreEvent`s, and each pane's
//! selection and scroll. `App::update` takes one `Msg` and returns the `Effect`s the run
//! loop must carry out (start or cancel a question, load images, save); it performs no
//! I/O itself, so tests drive it directly.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;
use ratatui_textarea::TextArea;

use crate::capabilities::state::{EvidenceState, StateKind};
use crate::engine::cancel::CancelToken;
use crate::engine::events::{CoreEvent, OutputSummary, RequestSnapshot, ToolCallStatus};
use crate::engine::messages::{BinaryContent, UserContent, UserContentValue};
use crate::host::ask::AskOptions;
use crate::host::inspect::InspectedRequest;
use crate::host::transcript::{StepStatus, ToolStep, Transcript, Turn, tool_summary};
use crate::session::{RunTiming, Session};

use super::background::Background;
use super::keymap::{Action, Keymap};
use super::theme::{Theme, ThemeName};

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
}

/// Everything the loop feeds into `update`.
pub enum Msg {
    Key(KeyEvent),
    Mouse(MouseEvent),
    Paste(String),
    Resize,
    Core(CoreEvent),
    Tick,
    /// The loop has started (first frame drawn): show the latest evidence's images.
    Started,
    /// Images of the selected evidence were listed (captions known, bytes loading).
    ImagesListed {
        generation: u64,
        items: Vec<ImageMeta>,
    },
    /// One image is ready to draw, or failed.
    ImageReady {
        generation: u64,
        index: usize,
        result: Result<Box<ratatui_image::protocol::Protocol>, String>,
    },
    /// A chunk's full text for the ledger detail.
    ChunkText {
        chunk_id: String,
        text: Result<String, String>,
    },
    /// Documents for the filter modal: `(label, id)`.
    Documents(Result<Vec<String>, String>),
    /// Database info text.
    DbInfo(Result<String, String>),
    /// A session file was opened.
    SessionOpened(Result<(PathBuf, Box<Session>), String>),
    /// Something the loop did (saved, exported), for the status line.
    Notice(String),
    /// Something the loop failed to do.
    Error(String),
}

/// What the loop must do.
#[derive(Debug, Clone)]
pub enum Effect {
    /// Start a question.
    Ask {
        run_id: String,
        prompt: UserContentValue,
        options: AskOptions,
        cancel: CancelToken,
    },
    /// Save the session (atomically) to this path.
    Save(PathBuf),
    /// Write an export.
    Export {
        path: PathBuf,
        contents: String,
    },
    /// List and load the images of a piece of evidence.
    LoadImages {
        generation: u64,
        target: ImageTarget,
        /// Cells available for the picture.
        size: (u16, u16),
    },
    /// Load a chunk's full text.
    LoadChunk(String),
    LoadDocuments,
    LoadDbInfo,
    OpenSession(PathBuf),
    Quit,
}

/// Evidence whose images the images pane shows.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageTarget {
    pub chunk_id: String,
    pub document_id: String,
    pub document: String,
    pub pages: Vec<i64>,
    pub picture_refs: Vec<String>,
}

/// One image of the evidence (caption and what it is).
#[derive(Debug, Clone, PartialEq)]
pub struct ImageMeta {
    /// `figure #/pictures/0` or `page 2`.
    pub caption: String,
    pub document: String,
    pub page: Option<i64>,
    pub self_ref: Option<String>,
    pub chunk_id: String,
}

/// An image's load state.
pub enum ImageState {
    Loading,
    Ready(Box<ratatui_image::protocol::Protocol>),
    Failed(String),
}

pub struct ImageItem {
    pub meta: ImageMeta,
    pub state: ImageState,
}

/// What a running question is doing, from the engine's events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Asked; the first request is not built yet.
    Starting,
    /// Request N was sent; nothing has come back yet (the model reads the prompt, or
    /// writes a tool call, which streams no event).
    Waiting(usize),
    /// Reasoning text streams.
    Thinking,
    /// Answer text streams.
    Writing,
    /// These tools run.
    Tools(Vec<String>),
    /// The tool calls ended; the next request is being built.
    NextRequest,
}

impl Phase {
    /// The label next to the spinner.
    pub fn label(&self) -> String {
        match self {
            Phase::Starting => "starting…".into(),
            Phase::Waiting(1) => "waiting for the model (it reads the prompt first)…".into(),
            Phase::Waiting(n) => format!("waiting for the model (request {n})…"),
            Phase::Thinking => "the model is thinking…".into(),
            Phase::Writing => "writing the answer…".into(),
            Phase::Tools(names) => {
                let mut what: Vec<&str> = names.iter().map(|n| tool_activity(n)).collect();
                what.dedup();
                format!("{}…", what.join(", "))
            }
            Phase::NextRequest => "preparing the next request…".into(),
        }
    }
}

/// What a running tool is doing, for the spinner line.
fn tool_activity(name: &str) -> &'static str {
    match name {
        "rag_search" | "analysis_search" => "running search",
        "rag_cite" | "analysis_cite" => "checking citations",
        "analysis_execute_code" => "running the program",
        _ => "running a tool",
    }
}

/// A question being answered.
pub struct LiveRun {
    pub run_id: String,
    pub cancel: CancelToken,
    pub turn: Turn,
    pub requests: Vec<RequestSnapshot>,
    /// What it is doing now.
    pub phase: Phase,
    pub started: std::time::Instant,
}

/// How the last question ended when it did not commit.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    Cancelled(String),
    Failed(String, String),
}

/// A popup over the panes.
pub enum Popup {
    Help {
        scroll: u16,
    },
    Palette {
        query: String,
        selected: usize,
    },
    Filter {
        all: Option<Vec<String>>,
        query: String,
        cursor: usize,
        chosen: Vec<String>,
    },
    Info(Option<String>),
    /// A path prompt for save-as, open and attach.
    Path {
        purpose: PathPurpose,
        input: Box<TextArea<'static>>,
        entries: Vec<String>,
        selected: usize,
    },
    ChunkDetail {
        chunk_id: String,
        text: Option<String>,
        scroll: u16,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathPurpose {
    SaveAs,
    Open,
    AttachImage,
}

/// What the host knows about its surroundings, for the status bar.
#[derive(Debug, Clone, PartialEq)]
pub struct HostInfo {
    pub db: String,
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

/// Layout rectangles of the last frame (for mouse hit-testing and image sizes).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Areas {
    pub conversation: Rect,
    pub inspector: Rect,
    pub ledger: Rect,
    pub images: Rect,
    pub input: Rect,
}

#[derive(Debug, Default)]
pub struct ConversationView {
    /// First visible wrapped line; `None` follows the bottom.
    pub scroll: Option<usize>,
    /// Content arrived below while the user was scrolled up.
    pub new_below: bool,
    pub collapsed: HashSet<u64>,
    /// Selected citation: (question, index in its citations).
    pub selected_citation: Option<(usize, usize)>,
}

#[derive(Debug, Default)]
pub struct InspectorView {
    /// Index into `App::requests()`; `None` means the newest.
    pub selected: Option<usize>,
    pub diff: bool,
    /// Show the instructions in full.
    pub instructions: bool,
    pub scroll: usize,
}

#[derive(Debug, Default)]
pub struct LedgerView {
    pub selected: usize,
    /// In the chunk list of the selected row.
    pub in_chunks: bool,
    pub chunk: usize,
    pub violations_only: bool,
}

#[derive(Default)]
pub struct ImagesView {
    pub generation: u64,
    /// The target's images have been listed (maybe none).
    pub listed: bool,
    pub target: Option<ImageTarget>,
    pub items: Vec<ImageItem>,
    pub selected: usize,
    /// The size images were last made for.
    pub size: (u16, u16),
}

/// Inspector lines for (request index, width, diff mode, full instructions, theme).
pub type InspectorCache = (
    (usize, u16, bool, bool, ThemeName),
    std::rc::Rc<Vec<ratatui::text::Line<'static>>>,
);

/// Wrapped conversation lines for (width, version).
pub type WrapCache = (u16, u64, std::rc::Rc<Vec<ratatui::text::Line<'static>>>);

pub struct App {
    pub session: Session,
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
    pub popup: Option<Popup>,
    pub notice: Option<String>,
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
    pub wrap_cache: std::cell::RefCell<Option<WrapCache>>,
    /// The inspector's lines for (request, width, diff, theme); snapshots never change.
    pub inspector_cache: std::cell::RefCell<Option<InspectorCache>>,
}

fn new_input() -> TextArea<'static> {
    let mut t = TextArea::default();
    t.set_placeholder_text(
        "Ask a question about the knowledge base (Enter sends, Ctrl-J new line)",
    );
    t.set_cursor_line_style(ratatui::style::Style::default());
    t
}

impl App {
    pub fn new(session: Session, session_path: Option<PathBuf>, host: HostInfo) -> Self {
        let mut app = App {
            session,
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
            popup: None,
            notice: None,
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
            wrap_cache: std::cell::RefCell::new(None),
            inspector_cache: std::cell::RefCell::new(None),
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
        self.committed_requests = (0..crate::host::inspect::SessionRequests::of(&self.session)
            .len())
            .map(|_| std::cell::OnceCell::new())
            .collect();
        *self.inspector_cache.borrow_mut() = None;
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
        self.committed_requests.len() + self.live.as_ref().map_or(0, |l| l.requests.len())
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
        } else {
            self.live
                .as_ref()
                .and_then(|l| l.requests.get(i - c))
                .map(|s| (true, s))
        }
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
    }

    /// One message in, the effects to carry out out.
    pub fn update(&mut self, msg: Msg) -> Vec<Effect> {
        self.dirty = true;
        match msg {
            Msg::Key(k) if k.kind == KeyEventKind::Press || k.kind == KeyEventKind::Repeat => {
                self.on_key(k)
            }
            Msg::Key(_) => {
                self.dirty = false;
                Vec::new()
            }
            Msg::Mouse(m) => self.on_mouse(m),
            Msg::Paste(text) => {
                if self.focus == Pane::Input && self.popup.is_none() {
                    self.input.insert_str(text);
                }
                Vec::new()
            }
            Msg::Resize => self.refresh_images(),
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
                if generation == self.images.generation {
                    self.images.listed = true;
                    self.images.items = items
                        .into_iter()
                        .map(|meta| ImageItem {
                            meta,
                            state: ImageState::Loading,
                        })
                        .collect();
                    self.images.selected = 0;
                }
                Vec::new()
            }
            Msg::ImageReady {
                generation,
                index,
                result,
            } => {
                if generation == self.images.generation
                    && let Some(item) = self.images.items.get_mut(index)
                {
                    item.state = match result {
                        Ok(p) => ImageState::Ready(p),
                        Err(e) => ImageState::Failed(e),
                    };
                }
                Vec::new()
            }
            Msg::ChunkText { chunk_id, text } => {
                if let Some(Popup::ChunkDetail {
                    chunk_id: shown,
                    text: slot,
                    ..
                }) = &mut self.popup
                    && *shown == chunk_id
                {
                    *slot = Some(text.unwrap_or_else(|e| format!("(cannot load the chunk: {e})")));
                }
                Vec::new()
            }
            Msg::Documents(docs) => {
                if let Some(Popup::Filter { all, .. }) = &mut self.popup {
                    match docs {
                        Ok(d) => *all = Some(d),
                        Err(e) => {
                            *all = Some(Vec::new());
                            self.error = Some(format!("cannot list documents: {e}"));
                        }
                    }
                }
                Vec::new()
            }
            Msg::DbInfo(info) => {
                if let Some(Popup::Info(slot)) = &mut self.popup {
                    *slot = Some(info.unwrap_or_else(|e| format!("error: {e}")));
                }
                Vec::new()
            }
            Msg::SessionOpened(result) => {
                match result {
                    Ok((path, session)) => {
                        self.load_session(*session, Some(path.clone()));
                        self.notice = Some(format!("opened {}", path.display()));
                        return self.select_latest_citation();
                    }
                    Err(e) => self.error = Some(e),
                }
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
        }
    }

    /// Replaces the session (new, opened).
    pub fn load_session(&mut self, session: Session, path: Option<PathBuf>) {
        self.session = session;
        self.session_path = path;
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

    // -----------------------------------------------------------------------------
    // Core events
    // -----------------------------------------------------------------------------

    fn on_core(&mut self, ev: CoreEvent) -> Vec<Effect> {
        let Some(live) = &mut self.live else {
            return Vec::new();
        };
        if ev.run_id() != live.run_id {
            // A run we cancelled or replaced: newest wins.
            self.dirty = false;
            return Vec::new();
        }
        match ev {
            CoreEvent::RequestBuilt {
                snapshot, request, ..
            } => {
                live.phase = Phase::Waiting(request);
                live.turn.requests += 1;
                live.requests.push(*snapshot);
                // The answer is the last request's text.
                live.turn.answer.clear();
                self.bump();
            }
            CoreEvent::ResponseRestarted { request, .. } => {
                // The broken-off stream is asked for again: what it showed is void.
                live.turn.answer.clear();
                live.phase = Phase::Waiting(request);
                self.bump();
            }
            CoreEvent::TextDelta { text, .. } => {
                live.turn.answer.push_str(&text);
                live.phase = Phase::Writing;
                self.bump();
            }
            CoreEvent::ThinkingDelta { .. } => {
                if live.phase != Phase::Thinking {
                    live.phase = Phase::Thinking;
                    self.bump();
                } else {
                    self.dirty = false;
                }
            }
            CoreEvent::StateChanged { .. } => {}
            CoreEvent::ToolCallStarted {
                name,
                args,
                call_id,
                ..
            } => {
                match &mut live.phase {
                    Phase::Tools(names) => names.push(name.clone()),
                    phase => *phase = Phase::Tools(vec![name.clone()]),
                }
                live.turn.steps.push(ToolStep {
                    summary: tool_summary(&name, &args),
                    call_id,
                    name,
                    status: StepStatus::Running,
                    args,
                });
                self.bump();
            }
            CoreEvent::ToolCallFinished {
                call_id, outcome, ..
            } => {
                if let Some(step) = live.turn.steps.iter_mut().find(|s| s.call_id == call_id) {
                    step.status = match outcome {
                        ToolCallStatus::Ok | ToolCallStatus::Deferred => StepStatus::Ok,
                        ToolCallStatus::Failed | ToolCallStatus::Retry => StepStatus::Failed,
                    };
                    if let Phase::Tools(names) = &mut live.phase
                        && let Some(i) = names.iter().position(|n| *n == step.name)
                    {
                        names.remove(i);
                        if names.is_empty() {
                            live.phase = Phase::NextRequest;
                        }
                    }
                }
                self.bump();
            }
            CoreEvent::RunFinished {
                messages,
                state,
                usage,
                output,
                ..
            } => {
                let live = self.live.take().expect("checked above");
                self.session.commit(messages, state, live.requests);
                self.session.groundwork.timings.push(RunTiming {
                    run_id: live.run_id,
                    started_at: chrono::Utc::now()
                        - chrono::Duration::from_std(live.started.elapsed()).unwrap_or_default(),
                    duration_ms: live.started.elapsed().as_millis() as u64,
                    requests: usage.requests,
                });
                if let OutputSummary::Deferred { .. } = output {
                    self.notice = Some("the run paused for deferred tool calls".into());
                }
                self.rebuild();
                self.inspector.selected = None;
                self.ledger.selected = self.transcript.ledger.len().saturating_sub(1);
                self.ledger.in_chunks = false;
                let mut effects = Vec::new();
                if let Some(path) = &self.session_path {
                    effects.push(Effect::Save(path.clone()));
                }
                effects.extend(self.select_latest_citation());
                return effects;
            }
            CoreEvent::RunFailed { error, .. } => {
                let live = self.live.take().expect("checked above");
                self.error = Some(error.clone());
                self.ended = Some(Ended::Failed(live.turn.prompt, error));
                self.bump();
            }
            CoreEvent::RunCancelled { .. } => {
                let live = self.live.take().expect("checked above");
                self.ended = Some(Ended::Cancelled(live.turn.prompt));
                self.notice = Some("cancelled; nothing was committed".into());
                self.bump();
            }
        }
        Vec::new()
    }

    // -----------------------------------------------------------------------------
    // Keys
    // -----------------------------------------------------------------------------

    fn on_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        if self.popup.is_some() {
            return self.on_popup_key(key);
        }
        let input_focused = self.focus == Pane::Input;
        if let Some(action) = self.keymap.action_for(&key, input_focused) {
            return self.on_action(action);
        }
        if input_focused {
            return self.on_input_key(key);
        }
        self.dirty = false;
        Vec::new()
    }

    fn on_input_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Enter if shift || key.modifiers.contains(KeyModifiers::ALT) => {
                self.input.insert_newline();
                Vec::new()
            }
            KeyCode::Char('j') | KeyCode::Char('m') if ctrl => {
                self.input.insert_newline();
                Vec::new()
            }
            KeyCode::Enter => self.submit(),
            KeyCode::Up if self.input.cursor().0 == 0 => {
                self.recall(-1);
                Vec::new()
            }
            KeyCode::Down if self.input.cursor().0 + 1 >= self.input.lines().len() => {
                self.recall(1);
                Vec::new()
            }
            KeyCode::Backspace => {
                if !self.delete_image_token(true) {
                    self.input.input(key);
                }
                Vec::new()
            }
            KeyCode::Delete => {
                if !self.delete_image_token(false) {
                    self.input.input(key);
                }
                Vec::new()
            }
            _ => {
                self.input.input(key);
                Vec::new()
            }
        }
    }

    /// Deletes an `[Image #N]` token touching the cursor as a unit.
    fn delete_image_token(&mut self, before: bool) -> bool {
        let ratatui_textarea::DataCursor(row, col) = self.input.cursor();
        let Some(line) = self.input.lines().get(row).cloned() else {
            return false;
        };
        let chars: Vec<char> = line.chars().collect();
        let text: String = chars.iter().collect();
        let re_start = |s: &str| s.find("[Image #");
        let mut offset = 0;
        let mut rest = text.as_str();
        while let Some(start) = re_start(rest) {
            let abs = offset + rest[..start].chars().count();
            let Some(end_rel) = rest[start..].find(']') else {
                break;
            };
            let token = &rest[start..start + end_rel + 1];
            let len = token.chars().count();
            let is_token = token[8..token.len() - 1]
                .chars()
                .all(|c| c.is_ascii_digit());
            let touches = if before { col == abs + len } else { col == abs };
            if is_token && touches {
                if before {
                    self.input.delete_str(0);
                    for _ in 0..len {
                        self.input.delete_char();
                    }
                } else {
                    self.input.delete_str(len);
                }
                return true;
            }
            offset = abs + len;
            rest = &rest[start + end_rel + 1..];
        }
        false
    }

    fn recall(&mut self, dir: i32) {
        if self.history.is_empty() {
            return;
        }
        let n = self.history.len();
        let pos = match (self.history_pos, dir) {
            (None, -1) => Some(n - 1),
            (None, _) => None,
            (Some(0), -1) => Some(0),
            (Some(p), -1) => Some(p - 1),
            (Some(p), _) if p + 1 < n => Some(p + 1),
            (Some(_), _) => None,
        };
        self.history_pos = pos;
        let text = pos.map(|p| self.history[p].clone()).unwrap_or_default();
        self.input = new_input();
        self.input.insert_str(text);
    }

    fn submit(&mut self) -> Vec<Effect> {
        let text = self.input.lines().join("\n");
        if text.trim().is_empty() && self.attachments.is_empty() {
            return Vec::new();
        }
        if self.running() {
            self.notice = Some(format!(
                "a question is running; {} cancels it",
                self.keymap.hint(Action::Interrupt)
            ));
            return Vec::new();
        }
        if !self.host.model_ready {
            self.error = Some(self.host.model_help.clone());
            return Vec::new();
        }
        let prompt = build_prompt(&text, std::mem::take(&mut self.attachments));
        let run_id = uuid::Uuid::new_v4().to_string();
        let cancel = CancelToken::new();
        self.history.push(text.clone());
        self.history_pos = None;
        self.input = new_input();
        self.ended = None;
        self.error = None;
        self.notice = None;
        self.conversation.scroll = None;
        self.conversation.new_below = false;
        self.live = Some(LiveRun {
            run_id: run_id.clone(),
            cancel: cancel.clone(),
            turn: Turn::new(self.session.messages.len() as u64, text),
            requests: Vec::new(),
            phase: Phase::Starting,
            started: std::time::Instant::now(),
        });
        self.inspector.selected = None;
        self.bump();
        vec![Effect::Ask {
            run_id,
            prompt,
            options: self.options.clone(),
            cancel,
        }]
    }

    fn cancel_running(&mut self) -> bool {
        if let Some(live) = &self.live {
            live.cancel.cancel();
            self.notice = Some("cancelling…".into());
            true
        } else {
            false
        }
    }

    fn focus_pane(&mut self, p: Pane) -> Vec<Effect> {
        self.focus = p;
        if p == Pane::Images {
            return self.refresh_images();
        }
        Vec::new()
    }

    fn on_action(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::Quit | Action::QuitPane => {
                self.quit = true;
                vec![Effect::Quit]
            }
            Action::CancelOrQuit => {
                if !self.cancel_running() {
                    self.quit = true;
                    return vec![Effect::Quit];
                }
                Vec::new()
            }
            Action::Interrupt => {
                if !self.cancel_running() {
                    self.focus = Pane::Input;
                }
                Vec::new()
            }
            Action::NextPane | Action::PrevPane => {
                let i = Pane::ORDER
                    .iter()
                    .position(|&p| p == self.focus)
                    .unwrap_or(0);
                let n = Pane::ORDER.len();
                let next = if action == Action::NextPane {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                self.focus_pane(Pane::ORDER[next])
            }
            Action::FocusConversation => self.focus_pane(Pane::Conversation),
            Action::FocusInspector => self.focus_pane(Pane::Inspector),
            Action::FocusLedger => self.focus_pane(Pane::Ledger),
            Action::FocusImages => self.focus_pane(Pane::Images),
            Action::FocusInput => self.focus_pane(Pane::Input),
            Action::Palette => {
                self.popup = Some(Popup::Palette {
                    query: String::new(),
                    selected: 0,
                });
                Vec::new()
            }
            Action::Help | Action::HelpPane => {
                self.popup = Some(Popup::Help { scroll: 0 });
                Vec::new()
            }
            Action::AttachImage => self.open_path_prompt(PathPurpose::AttachImage),
            Action::OpenSession => self.open_path_prompt(PathPurpose::Open),
            Action::SaveAs => self.open_path_prompt(PathPurpose::SaveAs),
            Action::HistoryPrev => {
                self.focus = Pane::Input;
                self.recall(-1);
                Vec::new()
            }
            Action::HistoryNext => {
                self.focus = Pane::Input;
                self.recall(1);
                Vec::new()
            }
            Action::NewSession => {
                if self.running() {
                    self.notice = Some("cancel the running question first".into());
                    return Vec::new();
                }
                let model = self.session.groundwork.model.clone();
                let mut s = Session::new(model.unwrap_or_default());
                s.groundwork.model = self.session.groundwork.model.clone();
                let path = self
                    .session_path
                    .as_ref()
                    .and_then(|p| p.parent())
                    .map(|d| {
                        d.join(format!(
                            "{}.json",
                            chrono::Local::now().format("%Y%m%d-%H%M%S")
                        ))
                    });
                self.load_session(s, path);
                self.notice = Some("new session".into());
                Vec::new()
            }
            Action::ExportMarkdown | Action::ExportJson => {
                let base = self
                    .session_path
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("groundwork-session.json"));
                let (path, contents) = if action == Action::ExportMarkdown {
                    (
                        base.with_extension("md"),
                        crate::host::transcript::to_markdown(
                            &self.transcript,
                            &self.export_title(),
                        ),
                    )
                } else {
                    (
                        base.with_extension("export.json"),
                        serde_json::to_string_pretty(&crate::host::transcript::to_json(
                            &self.transcript,
                            &self.session.messages,
                            &self.session.state,
                        ))
                        .unwrap_or_default(),
                    )
                };
                vec![Effect::Export { path, contents }]
            }
            Action::FilterDocuments => {
                self.popup = Some(Popup::Filter {
                    all: None,
                    query: String::new(),
                    cursor: 0,
                    chosen: self.filter_labels.clone(),
                });
                vec![Effect::LoadDocuments]
            }
            Action::DatabaseInfo => {
                self.popup = Some(Popup::Info(None));
                vec![Effect::LoadDbInfo]
            }
            Action::ToggleCompaction => {
                self.options.compaction = !self.options.compaction;
                self.notice = Some(format!(
                    "evidence compaction {} for the next question",
                    on_off(self.options.compaction)
                ));
                Vec::new()
            }
            Action::TogglePolicy => {
                self.options.policy = !self.options.policy;
                self.notice = Some(format!(
                    "citation policy {} for the next question",
                    on_off(self.options.policy)
                ));
                Vec::new()
            }
            Action::ToggleTheme => {
                let next = match self.theme.name {
                    ThemeName::Light => ThemeName::Dark,
                    ThemeName::Dark | ThemeName::Auto => ThemeName::Light,
                };
                self.theme_setting = next;
                self.theme = Theme::for_terminal(next, self.terminal_background);
                // The cached conversation lines carry the old theme's styles.
                self.version += 1;
                Vec::new()
            }
            Action::Grow => {
                self.split = (self.split + 5).min(80);
                self.refresh_images()
            }
            Action::Shrink => {
                self.split = self.split.saturating_sub(5).max(20);
                self.refresh_images()
            }
            Action::Zoom => {
                self.zoom = !self.zoom;
                self.refresh_images()
            }
            nav => self.on_nav(nav),
        }
    }

    fn export_title(&self) -> String {
        let mut t = "Groundwork conversation".to_string();
        if self.scripted_demo() {
            t.push_str(" (scripted demonstration, not a model's work)");
        }
        t
    }

    fn open_path_prompt(&mut self, purpose: PathPurpose) -> Vec<Effect> {
        let mut input = TextArea::default();
        let start = match purpose {
            PathPurpose::SaveAs => self
                .session_path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "session.json".into()),
            _ => std::env::current_dir()
                .map(|d| format!("{}/", d.display()))
                .unwrap_or_default(),
        };
        input.insert_str(start);
        let mut popup = Popup::Path {
            purpose,
            input: Box::new(input),
            entries: Vec::new(),
            selected: 0,
        };
        refresh_entries(&mut popup);
        self.popup = Some(popup);
        Vec::new()
    }

    // -----------------------------------------------------------------------------
    // Navigation inside panes
    // -----------------------------------------------------------------------------

    fn on_nav(&mut self, action: Action) -> Vec<Effect> {
        match self.focus {
            Pane::Conversation => self.nav_conversation(action),
            Pane::Inspector => {
                self.nav_inspector(action);
                Vec::new()
            }
            Pane::Ledger => self.nav_ledger(action),
            Pane::Images => {
                let n = self.images.items.len();
                match action {
                    Action::Up | Action::Left if self.images.selected > 0 => {
                        self.images.selected -= 1
                    }
                    Action::Down | Action::Right if self.images.selected + 1 < n => {
                        self.images.selected += 1
                    }
                    Action::Top => self.images.selected = 0,
                    Action::Bottom => self.images.selected = n.saturating_sub(1),
                    _ => {}
                }
                Vec::new()
            }
            Pane::Input => Vec::new(),
        }
    }

    /// Lines the conversation pane shows at once.
    fn page(&self, area: Rect) -> usize {
        (area.height.saturating_sub(2) as usize).max(1)
    }

    fn nav_conversation(&mut self, action: Action) -> Vec<Effect> {
        let page = self.page(self.areas.conversation);
        let total = super::view::conversation::line_count(self, self.areas.conversation.width);
        let max_top = total.saturating_sub(page);
        let top = self.conversation.scroll.unwrap_or(max_top);
        let set = |app: &mut App, t: usize| {
            if t >= max_top {
                app.conversation.scroll = None;
                app.conversation.new_below = false;
            } else {
                app.conversation.scroll = Some(t);
            }
        };
        match action {
            Action::Up => set(self, top.saturating_sub(1)),
            Action::Down => set(self, top + 1),
            Action::PageUp => set(self, top.saturating_sub(page)),
            Action::PageDown => set(self, top + page),
            Action::Top => set(self, 0),
            Action::Bottom => set(self, usize::MAX),
            Action::Left | Action::Right => return self.step_citation(action == Action::Right),
            Action::Select | Action::ToggleSources => {
                let q = self
                    .conversation
                    .selected_citation
                    .and_then(|(t, _)| self.transcript.turns.get(t))
                    .or(self.transcript.turns.last())
                    .map(|t| t.question);
                if let Some(q) = q
                    && !self.conversation.collapsed.remove(&q)
                {
                    self.conversation.collapsed.insert(q);
                }
                self.version += 1;
            }
            _ => {}
        }
        Vec::new()
    }

    fn all_citations(&self) -> Vec<(usize, usize)> {
        self.transcript
            .turns
            .iter()
            .enumerate()
            .flat_map(|(t, turn)| (0..turn.citations.len()).map(move |c| (t, c)))
            .collect()
    }

    fn step_citation(&mut self, forward: bool) -> Vec<Effect> {
        let all = self.all_citations();
        if all.is_empty() {
            return Vec::new();
        }
        let pos = self
            .conversation
            .selected_citation
            .and_then(|s| all.iter().position(|&x| x == s));
        let next = match (pos, forward) {
            (None, _) => all.len() - 1,
            (Some(p), true) => (p + 1).min(all.len() - 1),
            (Some(p), false) => p.saturating_sub(1),
        };
        self.conversation.selected_citation = Some(all[next]);
        self.version += 1;
        let (t, c) = all[next];
        let cit = &self.transcript.turns[t].citations[c];
        let target = ImageTarget {
            chunk_id: cit.chunk_id.clone(),
            document_id: cit.document_id.clone(),
            document: cit.source.clone(),
            pages: cit.pages.clone(),
            picture_refs: cit.picture_refs.clone(),
        };
        self.set_image_target(target)
    }

    fn select_latest_citation(&mut self) -> Vec<Effect> {
        self.conversation.selected_citation = None;
        if self.all_citations().is_empty() {
            return Vec::new();
        }
        self.step_citation(true)
    }

    fn nav_inspector(&mut self, action: Action) {
        let n = self.request_count();
        let cur = self.selected_request().unwrap_or(0);
        match action {
            Action::PrevRequest | Action::Left => {
                self.inspector.selected = Some(cur.saturating_sub(1));
                self.inspector.scroll = 0;
            }
            Action::NextRequest | Action::Right => {
                self.inspector.selected = if cur + 1 >= n { None } else { Some(cur + 1) };
                self.inspector.scroll = 0;
            }
            Action::ToggleDiff | Action::Select => {
                self.inspector.diff = !self.inspector.diff;
                self.inspector.scroll = 0;
            }
            Action::ToggleInstructions => {
                self.inspector.instructions = !self.inspector.instructions;
            }
            Action::Up => self.inspector.scroll = self.inspector.scroll.saturating_sub(1),
            Action::Down => self.inspector.scroll += 1,
            Action::PageUp => {
                self.inspector.scroll = self
                    .inspector
                    .scroll
                    .saturating_sub(self.page(self.areas.inspector))
            }
            Action::PageDown => self.inspector.scroll += self.page(self.areas.inspector),
            Action::Top => self.inspector.scroll = 0,
            Action::Bottom => self.inspector.scroll = usize::MAX / 2,
            _ => {}
        }
    }

    /// The chunks listed for the selected ledger row: cited, then retrieved-not-cited.
    pub fn ledger_chunks(&self) -> Vec<(&crate::host::transcript::LedgerChunk, bool)> {
        let rows = self.visible_ledger();
        let Some(&i) = rows.get(self.ledger.selected) else {
            return Vec::new();
        };
        let row = &self.transcript.ledger[i];
        row.cited
            .iter()
            .map(|c| (c, true))
            .chain(row.uncited.iter().map(|c| (c, false)))
            .collect()
    }

    fn nav_ledger(&mut self, action: Action) -> Vec<Effect> {
        let rows = self.visible_ledger().len();
        let chunks = self.ledger_chunks().len();
        if self.ledger.in_chunks {
            match action {
                Action::Up => self.ledger.chunk = self.ledger.chunk.saturating_sub(1),
                Action::Down if self.ledger.chunk + 1 < chunks => self.ledger.chunk += 1,
                Action::Top => self.ledger.chunk = 0,
                Action::Bottom => self.ledger.chunk = chunks.saturating_sub(1),
                Action::Left | Action::Back => {
                    self.ledger.in_chunks = false;
                    return Vec::new();
                }
                Action::Select => {
                    let Some((c, _)) = self.ledger_chunks().get(self.ledger.chunk).cloned() else {
                        return Vec::new();
                    };
                    let chunk_id = c.chunk_id.clone();
                    let mut effects = Vec::new();
                    self.popup = Some(Popup::ChunkDetail {
                        chunk_id: chunk_id.clone(),
                        text: None,
                        scroll: 0,
                    });
                    effects.push(Effect::LoadChunk(chunk_id));
                    effects.extend(self.target_ledger_chunk());
                    return effects;
                }
                Action::ViolationsOnly => return self.toggle_violations(),
                _ => {}
            }
            return self.target_ledger_chunk();
        }
        match action {
            Action::Up => self.ledger.selected = self.ledger.selected.saturating_sub(1),
            Action::Down if self.ledger.selected + 1 < rows => self.ledger.selected += 1,
            Action::Top => self.ledger.selected = 0,
            Action::Bottom => self.ledger.selected = rows.saturating_sub(1),
            Action::Select | Action::Right if chunks > 0 => {
                self.ledger.in_chunks = true;
                self.ledger.chunk = 0;
                return self.target_ledger_chunk();
            }
            Action::ViolationsOnly => return self.toggle_violations(),
            _ => {}
        }
        self.ledger.chunk = 0;
        Vec::new()
    }

    fn toggle_violations(&mut self) -> Vec<Effect> {
        self.ledger.violations_only = !self.ledger.violations_only;
        self.ledger.selected = 0;
        self.ledger.in_chunks = false;
        self.notice = Some(if self.ledger.violations_only {
            "ledger: questions with a violation only".into()
        } else {
            "ledger: all questions".into()
        });
        Vec::new()
    }

    fn target_ledger_chunk(&mut self) -> Vec<Effect> {
        let Some((c, _)) = self.ledger_chunks().get(self.ledger.chunk).cloned() else {
            return Vec::new();
        };
        let Some(document_id) = c.document_id.clone() else {
            return Vec::new();
        };
        let target = ImageTarget {
            chunk_id: c.chunk_id.clone(),
            document_id,
            document: c.document.clone().unwrap_or_default(),
            pages: c.pages.clone(),
            picture_refs: c.picture_refs.clone(),
        };
        self.set_image_target(target)
    }

    fn set_image_target(&mut self, target: ImageTarget) -> Vec<Effect> {
        if self.images.target.as_ref() == Some(&target) {
            return Vec::new();
        }
        self.images.target = Some(target);
        self.images.size = (0, 0);
        self.refresh_images()
    }

    /// (Re)loads the images of the target when the pane's size changed.
    fn refresh_images(&mut self) -> Vec<Effect> {
        let Some(target) = self.images.target.clone() else {
            return Vec::new();
        };
        let size = image_cells(self.areas.images);
        if size == self.images.size {
            return Vec::new();
        }
        self.images.size = size;
        self.images.generation += 1;
        self.images.items.clear();
        self.images.listed = false;
        vec![Effect::LoadImages {
            generation: self.images.generation,
            target,
            size,
        }]
    }

    // -----------------------------------------------------------------------------
    // Mouse
    // -----------------------------------------------------------------------------

    fn on_mouse(&mut self, m: MouseEvent) -> Vec<Effect> {
        let inside = |r: Rect| {
            m.column >= r.x && m.column < r.x + r.width && m.row >= r.y && m.row < r.y + r.height
        };
        let pane = [
            (self.areas.conversation, Pane::Conversation),
            (self.areas.inspector, Pane::Inspector),
            (self.areas.ledger, Pane::Ledger),
            (self.areas.images, Pane::Images),
            (self.areas.input, Pane::Input),
        ]
        .into_iter()
        .find(|(r, _)| inside(*r))
        .map(|(_, p)| p);
        let Some(pane) = pane else {
            self.dirty = false;
            return Vec::new();
        };
        match m.kind {
            MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => {
                let prev = self.focus;
                self.focus = pane;
                let action = if m.kind == MouseEventKind::ScrollUp {
                    Action::Up
                } else {
                    Action::Down
                };
                let mut effects = Vec::new();
                for _ in 0..3 {
                    effects.extend(self.on_nav(action));
                }
                self.focus = prev;
                effects
            }
            MouseEventKind::Down(_) => self.focus_pane(pane),
            _ => {
                self.dirty = false;
                Vec::new()
            }
        }
    }

    // -----------------------------------------------------------------------------
    // Popups
    // -----------------------------------------------------------------------------

    /// Palette entries matching `query`.
    pub fn palette_entries(&self, query: &str) -> Vec<Action> {
        const COMMANDS: &[Action] = &[
            Action::NewSession,
            Action::OpenSession,
            Action::SaveAs,
            Action::ExportMarkdown,
            Action::ExportJson,
            Action::FilterDocuments,
            Action::DatabaseInfo,
            Action::ToggleCompaction,
            Action::TogglePolicy,
            Action::AttachImage,
            Action::ToggleTheme,
            Action::ViolationsOnly,
            Action::ToggleDiff,
            Action::Help,
            Action::Quit,
        ];
        let q = query.to_lowercase();
        COMMANDS
            .iter()
            .copied()
            .filter(|a| q.is_empty() || a.description().to_lowercase().contains(&q))
            .collect()
    }

    /// Documents of the filter modal matching its query.
    pub fn filter_matches<'a>(all: &'a [String], query: &str) -> Vec<&'a String> {
        let q = query.to_lowercase();
        all.iter()
            .filter(|d| q.is_empty() || d.to_lowercase().contains(&q))
            .collect()
    }

    fn on_popup_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let Some(mut popup) = self.popup.take() else {
            return Vec::new();
        };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && matches!(key.code, KeyCode::Char('q')) {
            self.quit = true;
            return vec![Effect::Quit];
        }
        if ctrl && matches!(key.code, KeyCode::Char('c')) {
            if self.cancel_running() {
                self.popup = Some(popup);
                return Vec::new();
            }
            return Vec::new();
        }
        let mut effects = Vec::new();
        let keep = match &mut popup {
            Popup::Help { scroll } => match key.code {
                KeyCode::Up | KeyCode::Char('k') => {
                    *scroll = scroll.saturating_sub(1);
                    true
                }
                KeyCode::Down | KeyCode::Char('j') => {
                    *scroll += 1;
                    true
                }
                KeyCode::PageUp => {
                    *scroll = scroll.saturating_sub(10);
                    true
                }
                KeyCode::PageDown => {
                    *scroll += 10;
                    true
                }
                KeyCode::Esc
                | KeyCode::Enter
                | KeyCode::Char('q')
                | KeyCode::Char('?')
                | KeyCode::F(1) => false,
                _ => true,
            },
            Popup::Info(_) => !matches!(
                key.code,
                KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q') | KeyCode::Char('I')
            ),
            Popup::ChunkDetail { scroll, .. } => match key.code {
                KeyCode::Up | KeyCode::Char('k') => {
                    *scroll = scroll.saturating_sub(1);
                    true
                }
                KeyCode::Down | KeyCode::Char('j') => {
                    *scroll += 1;
                    true
                }
                KeyCode::PageDown => {
                    *scroll += 10;
                    true
                }
                KeyCode::PageUp => {
                    *scroll = scroll.saturating_sub(10);
                    true
                }
                KeyCode::Esc | KeyCode::Enter | KeyCode::Backspace | KeyCode::Char('q') => false,
                _ => true,
            },
            Popup::Palette { query, selected } => match key.code {
                KeyCode::Esc => false,
                KeyCode::Up => {
                    *selected = selected.saturating_sub(1);
                    true
                }
                KeyCode::Down => {
                    *selected += 1;
                    true
                }
                KeyCode::Backspace => {
                    query.pop();
                    *selected = 0;
                    true
                }
                KeyCode::Enter => {
                    let entries = self.palette_entries(query);
                    if let Some(&a) = entries.get((*selected).min(entries.len().saturating_sub(1)))
                    {
                        effects = self.on_action(a);
                        return effects;
                    }
                    false
                }
                KeyCode::Char(c) if !ctrl => {
                    query.push(c);
                    *selected = 0;
                    true
                }
                _ => true,
            },
            Popup::Filter {
                all,
                query,
                cursor,
                chosen,
            } => {
                let matches: Vec<String> = all
                    .as_deref()
                    .map(|a| App::filter_matches(a, query).into_iter().cloned().collect())
                    .unwrap_or_default();
                match key.code {
                    KeyCode::Esc => false,
                    KeyCode::Up => {
                        *cursor = cursor.saturating_sub(1);
                        true
                    }
                    KeyCode::Down => {
                        if *cursor + 1 < matches.len() {
                            *cursor += 1;
                        }
                        true
                    }
                    KeyCode::Char(' ') | KeyCode::Tab => {
                        if let Some(d) = matches.get(*cursor) {
                            if let Some(p) = chosen.iter().position(|c| c == d) {
                                chosen.remove(p);
                            } else {
                                chosen.push(d.clone());
                            }
                        }
                        true
                    }
                    KeyCode::Backspace => {
                        query.pop();
                        *cursor = 0;
                        true
                    }
                    KeyCode::Enter => {
                        let chosen = chosen.clone();
                        self.apply_filter(chosen);
                        false
                    }
                    KeyCode::Char(c) if !ctrl => {
                        query.push(c);
                        *cursor = 0;
                        true
                    }
                    _ => true,
                }
            }
            Popup::Path {
                purpose,
                input,
                entries,
                selected,
            } => match key.code {
                KeyCode::Esc => false,
                KeyCode::Up => {
                    *selected = selected.saturating_sub(1);
                    true
                }
                KeyCode::Down => {
                    if *selected + 1 < entries.len() {
                        *selected += 1;
                    }
                    true
                }
                KeyCode::Tab => {
                    if let Some(e) = entries.get(*selected).cloned() {
                        let mut t = TextArea::default();
                        t.insert_str(e);
                        **input = t;
                        *selected = 0;
                    }
                    refresh_entries_parts(input, entries, *purpose);
                    true
                }
                KeyCode::Enter => {
                    let typed = input.lines().join("");
                    let chosen = if std::path::Path::new(&typed).is_dir() {
                        entries.get(*selected).cloned()
                    } else {
                        Some(typed)
                    };
                    match chosen {
                        Some(p) if std::path::Path::new(&p).is_dir() => {
                            let mut t = TextArea::default();
                            t.insert_str(p);
                            **input = t;
                            *selected = 0;
                            refresh_entries_parts(input, entries, *purpose);
                            true
                        }
                        Some(p) => {
                            effects = self.finish_path(*purpose, PathBuf::from(p));
                            false
                        }
                        None => true,
                    }
                }
                _ => {
                    input.input(key);
                    *selected = 0;
                    refresh_entries_parts(input, entries, *purpose);
                    true
                }
            },
        };
        if keep {
            self.popup = Some(popup);
        }
        effects
    }

    fn finish_path(&mut self, purpose: PathPurpose, path: PathBuf) -> Vec<Effect> {
        match purpose {
            PathPurpose::SaveAs => {
                self.session_path = Some(path.clone());
                vec![Effect::Save(path)]
            }
            PathPurpose::Open => {
                if self.running() {
                    self.error = Some("cancel the running question first".into());
                    return Vec::new();
                }
                vec![Effect::OpenSession(path)]
            }
            PathPurpose::AttachImage => {
                match attach_image(&path) {
                    Ok(binary) => {
                        let n = self.attachments.len() + 1;
                        let name = path
                            .file_name()
                            .map(|f| f.to_string_lossy().to_string())
                            .unwrap_or_default();
                        self.attachments.push((name.clone(), binary));
                        self.input.insert_str(format!("[Image #{n}]"));
                        self.notice = Some(format!("Attached {name}"));
                        self.focus = Pane::Input;
                    }
                    Err(e) => self.error = Some(e),
                }
                Vec::new()
            }
        }
    }

    fn apply_filter(&mut self, labels: Vec<String>) {
        let sql = crate::host::transcript::document_filter_sql(&labels);
        if !self.session.state.contains_key(StateKind::Rag.namespace()) {
            self.session.state.insert(
                StateKind::Rag.namespace().into(),
                EvidenceState::empty(StateKind::Rag).to_value(),
            );
        }
        crate::host::transcript::set_document_filter(&mut self.session.state, sql.as_deref());
        self.notice = Some(if labels.is_empty() {
            "No filter (all documents)".into()
        } else {
            format!("{} document(s) selected", labels.len())
        });
        self.filter_labels = labels;
    }

    /// The current document filter, if any.
    pub fn document_filter(&self) -> Option<String> {
        self.session
            .state
            .get(StateKind::Rag.namespace())
            .and_then(|s| s.get("document_filter"))
            .and_then(|v| v.as_str())
            .map(String::from)
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
            .filter(|s| matches!(s.name.as_str(), "rag_search" | "analysis_search"))
            .count();
        let e = steps
            .iter()
            .filter(|s| s.name == "analysis_execute_code")
            .count();
        (s, e)
    }
}

/// Rows of the caption list above the picture in the images pane.
pub const IMAGE_LIST_ROWS: u16 = 3;

/// The cells a picture gets in an images pane of `area` (border and caption list off).
pub fn image_cells(area: Rect) -> (u16, u16) {
    (
        area.width.saturating_sub(2).max(10),
        area.height.saturating_sub(2 + IMAGE_LIST_ROWS).max(3),
    )
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// Reads an image file, checks it decodes, and re-encodes it as JPEG for the prompt.
pub fn attach_image(path: &std::path::Path) -> Result<BinaryContent, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let img = image::load_from_memory(&bytes)
        .map_err(|e| format!("{} is not an image: {e}", path.display()))?;
    let mut out = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(img.to_rgb8())
        .write_to(&mut out, image::ImageFormat::Jpeg)
        .map_err(|e| format!("cannot encode {}: {e}", path.display()))?;
    Ok(BinaryContent::from_bytes(&out.into_inner(), "image/jpeg"))
}

/// The prompt of a question: text with `[Image #N]` tokens becomes text and images
/// interleaved, as haiku.rag's chat builds it.
pub fn build_prompt(text: &str, images: Vec<(String, BinaryContent)>) -> UserContentValue {
    if images.is_empty() {
        return UserContentValue::Text(text.to_string());
    }
    let mut items: Vec<UserContent> = Vec::new();
    let mut rest = text;
    let mut used_any = false;
    let mut buf = String::new();
    while let Some(start) = rest.find("[Image #") {
        let after = &rest[start + 8..];
        let Some(end) = after.find(']') else {
            break;
        };
        let num = &after[..end];
        buf.push_str(&rest[..start]);
        match num.parse::<usize>() {
            Ok(n) if n >= 1 && n <= images.len() => {
                if !buf.is_empty() {
                    items.push(UserContent::Text(std::mem::take(&mut buf)));
                }
                items.push(UserContent::Binary(images[n - 1].1.clone()));
                used_any = true;
            }
            _ => buf.push_str(&rest[start..start + 8 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    buf.push_str(rest);
    let has_tokens = text.contains("[Image #");
    if !has_tokens {
        let mut items = Vec::new();
        if !text.is_empty() {
            items.push(UserContent::Text(text.to_string()));
        }
        items.extend(images.into_iter().map(|(_, b)| UserContent::Binary(b)));
        return UserContentValue::Items(items);
    }
    if !used_any {
        return UserContentValue::Text(text.to_string());
    }
    if !buf.is_empty() {
        items.push(UserContent::Text(buf));
    }
    UserContentValue::Items(items)
}

const IMAGE_EXTS: &[&str] = &["png", "jpg", "jpeg", "gif", "bmp", "webp", "tif", "tiff"];

fn refresh_entries(popup: &mut Popup) {
    if let Popup::Path {
        purpose,
        input,
        entries,
        ..
    } = popup
    {
        refresh_entries_parts(input, entries, *purpose);
    }
}

/// Directory entries completing the typed path: folders, and files fitting the purpose.
fn refresh_entries_parts(
    input: &TextArea<'static>,
    entries: &mut Vec<String>,
    purpose: PathPurpose,
) {
    let typed = input.lines().join("");
    let (dir, prefix) = match typed.rfind('/') {
        Some(i) => (typed[..=i].to_string(), typed[i + 1..].to_string()),
        None => ("./".to_string(), typed.clone()),
    };
    let mut out: BTreeMap<String, ()> = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with('.') || !name.starts_with(&prefix) {
                continue;
            }
            let path = format!("{dir}{name}");
            let is_dir = e.path().is_dir();
            let ext = std::path::Path::new(&name)
                .extension()
                .map(|x| x.to_string_lossy().to_lowercase())
                .unwrap_or_default();
            let fits = match purpose {
                PathPurpose::AttachImage => IMAGE_EXTS.contains(&ext.as_str()),
                PathPurpose::Open | PathPurpose::SaveAs => ext == "json",
            };
            if is_dir {
                out.insert(format!("{path}/"), ());
            } else if fits {
                out.insert(path, ());
            }
        }
    }
    *entries = out.into_keys().take(200).collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img() -> BinaryContent {
        BinaryContent::from_bytes(&[1, 2, 3], "image/png")
    }

    #[test]
    fn prompt_splits_on_image_tokens() {
        assert_eq!(
            build_prompt("hi", vec![]),
            UserContentValue::Text("hi".into())
        );
        let p = build_prompt("look [Image #1] here", vec![("a.png".into(), img())]);
        let UserContentValue::Items(items) = p else {
            panic!("items expected")
        };
        assert_eq!(items.len(), 3);
        assert!(matches!(&items[1], UserContent::Binary(_)));
        // Out-of-range tokens stay text; no token resolving → plain text.
        let p = build_prompt("see [Image #5]", vec![("a.png".into(), img())]);
        assert_eq!(p, UserContentValue::Text("see [Image #5]".into()));
        // Images without tokens go after the text.
        let p = build_prompt("q", vec![("a.png".into(), img())]);
        let UserContentValue::Items(items) = p else {
            panic!("items expected")
        };
        assert!(matches!(&items[0], UserContent::Text(t) if t == "q"));
        assert!(matches!(&items[1], UserContent::Binary(_)));
    }
}
