//! The two enums of the update loop: `Msg`, everything fed into `App::update` (input,
//! core events, the results of effects), and `Effect`, what `update` asks the Runtime to
//! do (`execute` in `tui/runtime.rs`); every effect's result comes back as a `Msg`.

use std::path::PathBuf;
use std::sync::Arc;

use crossterm::event::{KeyEvent, MouseEvent};

use crate::engine::cancel::CancelToken;
use crate::engine::events::CoreEvent;
use crate::engine::messages::{BinaryContent, UserContentValue};
use crate::host::ask::AskOptions;
use crate::session::Session;

use super::PathPurpose;
use super::explorer::{ExploreRequest, Explored};

/// How a question ended, for the conversation's owner.
pub struct Answered {
    pub run_id: String,
    pub outcome: Result<crate::engine::agent::RunResult, crate::engine::agent::RunError>,
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
    /// The visual grounding view's pages were outlined and encoded (or why not).
    GroundingReady {
        generation: u64,
        result: Result<super::GroundingPages, String>,
    },
    /// A grounding page drawn at a zoom: `at` is (page index, zoom, step); with whether
    /// the view reaches the page's bottom.
    GroundingZoomed {
        generation: u64,
        at: (usize, super::Zoom, u32),
        result: Result<(Box<ratatui_image::protocol::Protocol>, bool), String>,
    },
    /// What changed in the knowledge base since questions read it: (question identity,
    /// `1 document deleted`), for those where something did.
    KbChanges(Vec<(u64, String)>),
    /// Cited chunks' own passages, or why one could not be read.
    Passages(Vec<(String, Result<crate::host::transcript::Passage, String>)>),
    /// A chunk's full text for the ledger detail.
    ChunkText {
        chunk_id: String,
        text: Result<String, String>,
    },
    /// Documents for the filter modal: `(label, id)`.
    Documents(Result<Vec<String>, String>),
    /// A store read of the explorer came back.
    Explored(Explored),
    /// Database info text.
    DbInfo(Result<String, String>),
    /// A session file was opened: the conversation's owner holds it from now on, and
    /// this is its first snapshot (the file it is saved to, and the session).
    SessionOpened(Result<(PathBuf, Arc<Session>), String>),
    /// A new, empty session replaced the one shown (saved to the path, if any).
    NewSession(Arc<Session>, Option<PathBuf>),
    /// The running question `run_id` was committed (when it had not been cancelled);
    /// `session` is the conversation as it is now. `deferred`: the run paused for
    /// deferred tool calls.
    Committed {
        run_id: String,
        session: Arc<Session>,
        deferred: bool,
    },
    /// The conversation changed (a mark, the document filter): the snapshot to show.
    Updated(Arc<Session>),
    /// A question's outcome, for the conversation's owner (the runtime); the app is
    /// told through `Committed` and the run's own events.
    Answered(Box<Answered>),
    /// The judge's check of a question's claims (or why it failed), for the
    /// conversation's owner (the runtime), which keeps it and sends the app `Updated`.
    Verified {
        /// The question's number as the conversation shows it (1-based).
        number: usize,
        result: Result<Box<crate::session::verdicts::Verification>, String>,
    },
    /// Directory entries completing `typed` in the path prompt.
    PathEntries {
        typed: String,
        entries: Vec<String>,
    },
    /// What Enter in the path prompt chose, once the filesystem was asked.
    PathResolved {
        typed: String,
        outcome: PathOutcome,
    },
    /// An image file to attach was read and re-encoded (or refused).
    ImageAttached {
        path: PathBuf,
        result: Result<BinaryContent, String>,
    },
    /// A review mark was saved in the experiment's folder (and its report rewritten).
    MarkSaved(Result<crate::eval::results::Review, String>),
    /// A replay started by [`Effect::Replay`] ended: both runs compared, or why not.
    Replayed {
        id: u64,
        result: Result<Box<crate::host::replay::Replayed>, String>,
    },
    /// A replay was saved beside the session (where), or why not.
    ReplaySaved(Result<PathBuf, String>),
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
    /// Set (`None`: take back) the reviewer's mark on the answer to `question` in the
    /// conversation, and save it.
    Mark {
        question: u64,
        mark: Option<(String, Option<String>)>,
    },
    /// Check the claims of this answer (question `number`, 1-based) with the judge; the
    /// outcome comes back as [`Msg::Verified`].
    Verify {
        number: usize,
        turn: Box<crate::host::transcript::Turn>,
    },
    /// Restrict later questions to these documents (`NAME: document` labels when
    /// several collections are open; none: all).
    Filter(Vec<String>),
    /// Save the conversation to this file from now on, now.
    SaveAs(PathBuf),
    /// Replace the conversation with a new, empty one saved to this file.
    NewSession(Option<PathBuf>),
    /// Write an export.
    Export {
        path: PathBuf,
        contents: String,
    },
    /// List and load the images of a piece of evidence.
    LoadImages {
        generation: u64,
        target: crate::host::transcript::Evidence,
        /// Cells available for the picture.
        size: (u16, u16),
    },
    /// Outline a chunk's items on its pages for the visual grounding view.
    LoadGrounding {
        generation: u64,
        chunk_id: String,
        /// Cells available for a page.
        size: (u16, u16),
        /// Outline the context expansion adds around the chunk too.
        context: bool,
        /// The collection the chunk came from, when known.
        collection: Option<String>,
    },
    /// Draw grounding page `page` (its outlined raster `image`) at `zoom`, `step` quarter
    /// views down, for `size` cells.
    ZoomGrounding {
        generation: u64,
        page: usize,
        zoom: super::Zoom,
        step: u32,
        image: std::sync::Arc<image::RgbaImage>,
        size: (u16, u16),
    },
    /// Load a chunk's full text.
    LoadChunk(String),
    /// Text for the clipboard, sent to the terminal as OSC 52.
    Copy(String),
    /// Read cited chunks' own passages (`Msg::Passages`): (collection, chunk id, the
    /// question citing it, whose recorded versions give the chunk when it is gone now).
    LoadPassages(Vec<(Option<String>, String, u64)>),
    /// Compare each (question, database, versions it read) with the database as it is
    /// open now (`Msg::KbChanges`).
    CompareKnowledgeBases(Vec<(u64, String, crate::session::knowledge::TableVersions)>),
    LoadDocuments,
    LoadDbInfo,
    /// A store read of the knowledge-base explorer (`Msg::Explored`).
    Explore(ExploreRequest),
    OpenSession(PathBuf),
    /// List the directory of the typed path for completion (`Msg::PathEntries`).
    ListPaths {
        typed: String,
        purpose: PathPurpose,
    },
    /// Resolve Enter in the path prompt (`Msg::PathResolved`): when `typed` is a
    /// directory the highlighted entry is chosen; a chosen directory is entered.
    ResolvePath {
        typed: String,
        highlighted: Option<String>,
    },
    /// Read an image file, check it decodes and re-encode it (`Msg::ImageAttached`).
    AttachImage(PathBuf),
    /// Append a review mark to `dir/reviews.jsonl` and rewrite the report
    /// (`Msg::MarkSaved`).
    SaveMark {
        dir: PathBuf,
        review: crate::eval::results::Review,
    },
    /// Run question `question` (1-based) of the session again with `flags` (an arm's
    /// flags) from the committed state it started from (`Msg::Replayed`).
    Replay {
        id: u64,
        question: usize,
        flags: String,
        cancel: CancelToken,
    },
    /// Save a replay's session in a new file beside `original` (`Msg::ReplaySaved`).
    SaveReplay {
        original: PathBuf,
        question: usize,
        changes: String,
        session: Box<Session>,
    },
    Quit,
}

/// What Enter in the path prompt chose.
#[derive(Debug, Clone, PartialEq)]
pub enum PathOutcome {
    /// A directory: the prompt moves into it.
    Directory(String),
    /// A file (or a path to create): the prompt's purpose is carried out.
    File(PathBuf),
    /// Nothing to choose (a directory with no entry highlighted).
    Nothing,
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
    /// Items of the cited chunk outlined on this page (0 for figures, and for pages
    /// without a match).
    pub matched: usize,
}
