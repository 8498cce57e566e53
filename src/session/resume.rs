//! The resume file beside a long session (`NAME.resume`): what the next question needs
//! to continue the conversation without reading it, so that asking question 500 costs
//! about what asking question 1 does.
//!
//! A question sends every earlier message again, and every request of every question to
//! come rewrites the messages before the newest evidence return of the last question
//! (compaction's carrier) the same way. The file keeps those messages as what is sent
//! for them (their wire text, their estimates, the few facts a run reads from them:
//! [`crate::engine::agent::Earlier`]), the messages from there on as they are (the
//! window), the committed state, the state the last question started from, where the
//! session's files stand (the snapshot's identity, the journal's length, both files'
//! stamps) and the ends of its tables. A question then runs over the window
//! ([`crate::engine::agent::RunInput::earlier`]) and its save appends one journal
//! record ([`super::journal`]) built from the window alone
//! ([`super::linear::WindowEncoder`]).
//!
//! The file is a cache, never the record: it is written after a save (a JSON line, then
//! the wire text), replaced by renaming a temporary over it without syncing, and used
//! only when the session file and its journal are exactly as it says (same stamps) and
//! the question is composed as the one that wrote it (same evidence tools compacted).
//! Anything else (another writer, haiku.rag rewriting the file, a journal folded, a torn
//! or stale resume file) reads the session whole, as before, and writes the file anew.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::disk;
use super::journal::{self, Added, Image, Policy, Standing};
use super::linear::{
    LinearRequest, StoredText, TableEnd, Tables, Texts, WindowEncoder, WindowTables, fingerprint,
    tools_fingerprint,
};
use super::starts::RunStart;
use super::state_diff::diff_state;
use super::{RunTiming, Session, SessionError, journal_path};
use crate::engine::agent::RunResult;
use crate::engine::capability::ToolDef;
use crate::engine::messages::ModelMessage;

/// Resume file format version (its first line's `groundwork_resume`).
const RESUME_VERSION: u32 = 2;

/// How many texts back the newest text of each kind is looked for.
const TEXTS_BACK: usize = 64;

/// `NAME.resume` beside the session file `NAME`.
pub fn resume_path(session: &Path) -> PathBuf {
    let mut name = session
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "session.json".into());
    name.push(".resume");
    session.with_file_name(name)
}

/// The messages before the window, as the resume file describes them (the engine's
/// [`crate::engine::agent::Earlier`] without its wire text).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EarlierMessages {
    /// How many.
    pub len: usize,
    /// The evidence tools compaction rewrote them for.
    pub compacted_for: Vec<String>,
    /// The tools whose returns they hold.
    pub returns: std::collections::BTreeSet<String>,
    /// Their estimates summed, as stored.
    pub raw_tokens: usize,
    /// Their estimates summed, as sent.
    pub sent_tokens: usize,
    /// The deferred capabilities loaded in the history.
    pub loaded: std::collections::BTreeSet<String>,
}

/// The resume file's first line.
#[derive(Serialize, Deserialize)]
struct Head {
    groundwork_resume: u32,
    standing: Standing,
    state: Map<String, Value>,
    start: Map<String, Value>,
    meta: Value,
    extra: Map<String, Value>,
    earlier: EarlierMessages,
    window: Vec<ModelMessage>,
    instructions: TableEnd<String>,
    tool_sets: TableEnd<Vec<ToolDef>>,
    texts: Vec<(usize, String)>,
    /// The wire text's length in bytes (it follows the line).
    wire_len: usize,
    /// Its CRC-32: the file is replaced without syncing, so a crash may leave the head
    /// whole and the text after it not.
    wire_crc: u32,
}

/// A long session as its resume file holds it.
pub struct Resume {
    path: PathBuf,
    image: Image,
    /// The state the last question started from (as recorded).
    start: Map<String, Value>,
    meta: Value,
    extra: Map<String, Value>,
    /// The messages before the window.
    pub earlier: EarlierMessages,
    /// Their wire text.
    pub wire: String,
    /// The committed messages from `earlier.len` on.
    pub window: Vec<ModelMessage>,
    instructions: TableEnd<String>,
    tool_sets: TableEnd<Vec<ToolDef>>,
    texts: Vec<(usize, String)>,
}

/// A question over the window, encoded and ready to be appended.
pub struct Pending {
    messages: Vec<ModelMessage>,
    requests: Vec<LinearRequest>,
    instructions: Vec<String>,
    tool_sets: Vec<Vec<ToolDef>>,
    instructions_end: TableEnd<String>,
    tool_sets_end: TableEnd<Vec<ToolDef>>,
    texts: Vec<StoredText>,
    texts_after: Vec<(usize, String)>,
    timing: RunTiming,
    state: Map<String, Value>,
    start: Map<String, Value>,
    window: Vec<ModelMessage>,
}

impl Resume {
    /// The resume file of the session at `path`, when it continues the files on disk
    /// exactly; `None` otherwise (no file, another version, torn, or stale). A resume
    /// used is remembered as what this process read, so a later save checks the files
    /// against it as against a session it loaded.
    pub fn read(path: &Path) -> Option<Resume> {
        let bytes = std::fs::read(resume_path(path)).ok()?;
        let end = bytes.iter().position(|&b| b == b'\n')?;
        let head: Head = serde_json::from_slice(&bytes[..end]).ok()?;
        let wire = &bytes[end + 1..];
        if head.groundwork_resume != RESUME_VERSION
            || wire.len() != head.wire_len
            || crc32fast::hash(wire) != head.wire_crc
        {
            return None;
        }
        let image = Image::standing_at(path, head.standing, head.state);
        if !journal::current(&image) {
            return None;
        }
        if head.window.len() + head.earlier.len != image_messages(&image) {
            return None;
        }
        let wire = String::from_utf8(wire.to_vec()).ok()?;
        disk::remember(path, image.file_stamp.clone()?);
        disk::remember_journal(path, image.journal_stamp.clone());
        Some(Resume {
            path: path.to_path_buf(),
            image,
            start: head.start,
            meta: head.meta,
            extra: head.extra,
            earlier: head.earlier,
            wire,
            window: head.window,
            instructions: head.instructions,
            tool_sets: head.tool_sets,
            texts: head.texts,
        })
    }

    /// The resume of `session`, just saved to `path` (everything on disk), whose last
    /// question started from `start` (as recorded), with the messages before `earlier.len`
    /// described by `earlier` and `wire`. `None` when the session is not all on disk as
    /// saved there.
    pub fn of_session(
        session: &Session,
        path: &Path,
        earlier: EarlierMessages,
        wire: String,
    ) -> Option<Resume> {
        let image = session.saved.with(|i| {
            let i = i.filter(|i| disk::same_file(&i.path, path))?;
            let standing = i.standing()?;
            Some(Image::standing_at(path, standing, i.state().clone()))
        })?;
        let tables = &session.groundwork.tables;
        Some(Resume {
            path: path.to_path_buf(),
            image,
            start: session.latest_start().unwrap_or_default(),
            meta: journal::meta_of(session),
            extra: session.extra.clone(),
            window: session.messages.get(earlier.len..)?.to_vec(),
            earlier,
            wire,
            instructions: TableEnd::of(&tables.instructions, |t| fingerprint(t.as_bytes())),
            tool_sets: TableEnd::of(&tables.tool_sets, |t| tools_fingerprint(t)),
            texts: tables.texts.newest_by_head(TEXTS_BACK),
        })
    }

    /// The committed state.
    pub fn state(&self) -> &Map<String, Value> {
        self.image.state()
    }

    /// The session file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many messages the session holds.
    pub fn messages_len(&self) -> usize {
        self.earlier.len + self.window.len()
    }

    /// Writes the resume file (see the module's notes: a cache, replaced unsynced).
    pub fn write(&self) -> std::io::Result<()> {
        let standing = self
            .image
            .standing()
            .ok_or_else(|| std::io::Error::other("the session is not all on disk"))?;
        let head = Head {
            groundwork_resume: RESUME_VERSION,
            standing,
            state: self.image.state().clone(),
            start: self.start.clone(),
            meta: self.meta.clone(),
            extra: self.extra.clone(),
            earlier: self.earlier.clone(),
            window: self.window.clone(),
            instructions: self.instructions.clone(),
            tool_sets: self.tool_sets.clone(),
            texts: self.texts.clone(),
            wire_len: self.wire.len(),
            wire_crc: crc32fast::hash(self.wire.as_bytes()),
        };
        let mut bytes = serde_json::to_vec(&head).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        bytes.extend_from_slice(self.wire.as_bytes());
        disk::replace_unsynced(&resume_path(&self.path), &bytes)
    }

    /// Encodes `result`, a successful run over the window (given the earlier messages
    /// as this resume describes them) that started from `start` (the state as it saw
    /// it), as the save will append it. An error when it cannot be written in window
    /// form (then the session is read whole and the run committed there).
    pub fn encode(&self, result: &RunResult, start: Map<String, Value>) -> Result<Pending, String> {
        let w = self.earlier.len;
        if result.earlier.as_ref().map_or(0, |e| e.len) != w
            || result.new_message_index != self.window.len()
            || result.messages.get(..self.window.len()) != Some(&self.window[..])
        {
            return Err("the run was not over this session's window".into());
        }
        let Some(lens) = self.image.standing().map(|s| s.lens) else {
            return Err("the session is not all on disk".into());
        };
        let mut instructions = self.instructions.clone();
        let mut tool_sets = self.tool_sets.clone();
        let texts_len = lens.texts;
        let mut texts = Tables {
            texts: Texts::continuing(texts_len, self.texts.clone())?,
            ..Tables::default()
        };
        let mut encoder = WindowEncoder::new(w, self.earlier.raw_tokens, self.earlier.sent_tokens);
        let mut requests = Vec::with_capacity(result.requests.len());
        for snap in &result.requests {
            let mut tables = WindowTables {
                instructions: &mut instructions,
                tool_sets: &mut tool_sets,
                texts: &mut texts,
            };
            requests.push(encoder.encode(snap, &result.messages, &mut tables)?);
        }
        let mut ops = Vec::new();
        diff_state(&self.start, &start, &mut Vec::new(), &mut ops);
        let timing = RunTiming {
            run_id: result.run_id.clone(),
            started_at: result.started_at,
            duration_ms: result.duration_ms,
            requests: result.usage.requests,
            start: Some(RunStart {
                history: self.messages_len(),
                state: ops,
            }),
        };
        Ok(Pending {
            messages: result.messages[self.window.len()..].to_vec(),
            requests,
            instructions: instructions.take_added(),
            tool_sets: tool_sets.take_added(),
            instructions_end: instructions,
            tool_sets_end: tool_sets,
            texts: texts.texts.stored_from(texts_len).to_vec(),
            texts_after: texts.texts.newest_by_head(TEXTS_BACK),
            timing,
            state: result.state.clone(),
            start,
            window: result.messages.clone(),
        })
    }

    /// Appends `pending` to the session's journal (synced), when the files are as this
    /// resume says and the policy appends (rather than folding the journal into a new
    /// file). `Ok(false)`: nothing was written, the session must be saved whole.
    /// [`SessionError::Changed`] when another writer changed the files.
    /// The session's `groundwork` extra keys, as this resume will write them.
    pub fn extra(&self) -> Option<&Map<String, Value>> {
        self.meta.get("extra").and_then(Value::as_object)
    }

    /// [`Resume::extra`], to change before the next append.
    pub fn extra_mut(&mut self) -> Option<&mut Map<String, Value>> {
        self.meta.get_mut("extra").and_then(Value::as_object_mut)
    }

    pub fn append(&mut self, pending: Pending, policy: Policy) -> Result<bool, SessionError> {
        let path = self.path.clone();
        if !disk::unchanged(&path) {
            return Err(SessionError::Changed { path });
        }
        if !disk::journal_unchanged(&path) || !journal::current(&self.image) {
            return Err(SessionError::Changed {
                path: journal_path(&path),
            });
        }
        let added = Added {
            messages: &pending.messages,
            requests: &pending.requests,
            instructions: &pending.instructions,
            tool_sets: &pending.tool_sets,
            texts: &pending.texts,
            timing: &pending.timing,
            state: &pending.state,
            meta: &self.meta,
            extra: &self.extra,
        };
        let line = journal::added_line(&self.image, &added)?;
        let bytes = self.image.snapshot_bytes;
        let journal = self.image.journal_bytes.max(128) + line.len() as u64;
        if bytes < policy.journal_from || journal > bytes / policy.fold_ratio.max(1) {
            return Ok(false);
        }
        let stamp = journal::append(&self.image, &line).map_err(|source| SessionError::Io {
            action: "write",
            path: journal_path(&path),
            source,
        })?;
        disk::remember_journal(&path, Some(stamp.clone()));
        self.image = journal::after_added(&self.image, &added, line.len() as u64, stamp);
        self.instructions = pending.instructions_end;
        self.tool_sets = pending.tool_sets_end;
        self.texts = pending.texts_after;
        self.start = pending.start;
        self.window = pending.window;
        Ok(true)
    }

    /// Moves the window's start to `earlier.len` (later, or the same), the messages
    /// before it described by `earlier` and `wire` (the earlier wire text continued).
    pub fn advance(&mut self, earlier: EarlierMessages, wire: String) -> Result<(), String> {
        let from = earlier
            .len
            .checked_sub(self.earlier.len)
            .filter(|&k| k <= self.window.len())
            .ok_or("the window can only move forward")?;
        self.window.drain(..from);
        self.earlier = earlier;
        self.wire = wire;
        Ok(())
    }
}

/// The messages the files hold, as `image` says.
fn image_messages(image: &Image) -> usize {
    image.standing().map_or(usize::MAX, |s| s.lens.messages)
}
