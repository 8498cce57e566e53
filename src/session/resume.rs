//! The resume row of a long session: what the next question needs to continue the
//! conversation without reading it, so that asking question 500 costs about what asking
//! question 1 does.
//!
//! A question sends every earlier message again, and every request of every question to
//! come rewrites the messages before the newest evidence return of the last question
//! (compaction's carrier) the same way. The row keeps those messages as what is sent
//! for them (their wire text, their estimates, the few facts a run reads from them:
//! [`crate::engine::agent::Earlier`]), the messages from there on as they are (the
//! window), the committed state, the state the last question started from, the commit
//! it was written for and the ends of the session's tables. A question then runs over
//! the window ([`crate::engine::agent::RunInput::earlier`]) and its save commits only
//! what it added ([`super::store::append`]), built from the window alone
//! ([`super::linear::WindowEncoder`]).
//!
//! The row is a cache, never the record: it is written right after a commit, names that
//! commit, and is used only while the file's last commit is that one and the question is
//! composed as the one that wrote it (same evidence tools compacted). Anything else
//! (another writer committed, a row that does not read) reads the session whole, as
//! before, and writes the row anew.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::linear::{
    LinearRequest, StoredText, TableEnd, Tables, Texts, WindowEncoder, WindowTables, fingerprint,
    tools_fingerprint,
};
use super::starts::RunStart;
use super::state_diff::diff_state;
use super::store::{self, Added, Image, Lens};
use super::{RunTiming, Session, SessionError};
use crate::engine::agent::RunResult;
use crate::engine::capability::ToolDef;
use crate::engine::messages::ModelMessage;

/// Resume row format version (its head's `groundwork_resume`).
const RESUME_VERSION: u32 = 4;

/// How many texts back the newest text of each kind is looked for.
const TEXTS_BACK: usize = 64;

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

/// The resume row's head.
#[derive(Serialize, Deserialize)]
struct Head {
    groundwork_resume: u32,
    generation: u64,
    lens: Lens,
    /// The state's size as last written whole, and the changes' since.
    #[serde(default)]
    state_sizes: (usize, usize),
    state: Map<String, Value>,
    start: Map<String, Value>,
    meta: Value,
    extra: Map<String, Value>,
    earlier: EarlierMessages,
    window: Vec<ModelMessage>,
    instructions: TableEnd<String>,
    tool_sets: TableEnd<Vec<ToolDef>>,
    texts: Vec<(usize, String)>,
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
    /// How much of `wire` the file holds already.
    wire_stored: usize,
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
    /// The resume row of the session at `path`, when it continues the file's last
    /// commit exactly; `None` otherwise (no row, another version, or stale).
    pub fn read(path: &Path) -> Option<Resume> {
        let (generation, head, wire) = store::read_resume(path)?;
        crate::timing::mark("session: resume row read");
        let head: Head = serde_json::from_str(&head).ok()?;
        if head.groundwork_resume != RESUME_VERSION || head.generation != generation {
            return None;
        }
        if head.window.len() + head.earlier.len != head.lens.messages {
            return None;
        }
        let image = store::image_at(
            path,
            generation,
            head.lens,
            head.state,
            head.window.last(),
            head.state_sizes,
        );
        Some(Resume {
            path: path.to_path_buf(),
            image,
            start: head.start,
            meta: head.meta,
            extra: head.extra,
            earlier: head.earlier,
            wire_stored: wire.len(),
            wire,
            window: head.window,
            instructions: head.instructions,
            tool_sets: head.tool_sets,
            texts: head.texts,
        })
    }

    /// The resume of `session`, just saved to `path` (everything in the file), whose
    /// last question started from `start` (as recorded), with the messages before
    /// `earlier.len` described by `earlier` and `wire`. `None` when the session is not
    /// all in the file as saved there.
    pub fn of_session(
        session: &Session,
        path: &Path,
        earlier: EarlierMessages,
        wire: String,
    ) -> Option<Resume> {
        let image = session
            .saved
            .with(path, |i| i.filter(|i| i.whole()).cloned())?;
        let tables = &session.groundwork.tables;
        Some(Resume {
            path: path.to_path_buf(),
            image,
            start: session.latest_start().unwrap_or_default(),
            meta: store::meta_of(session),
            extra: session.extra.clone(),
            window: session.messages.get(earlier.len..)?.to_vec(),
            earlier,
            wire,
            wire_stored: 0,
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

    /// Writes the resume row for the commit this resume continues (see the module's
    /// notes: a cache, naming its commit).
    pub fn write(&mut self) -> Result<(), SessionError> {
        let head = Head {
            groundwork_resume: RESUME_VERSION,
            generation: self.image.generation,
            lens: self.image.lens,
            state_sizes: self.image.state_sizes(),
            state: self.image.state().clone(),
            start: self.start.clone(),
            meta: self.meta.clone(),
            extra: self.extra.clone(),
            earlier: self.earlier.clone(),
            window: self.window.clone(),
            instructions: self.instructions.clone(),
            tool_sets: self.tool_sets.clone(),
            texts: self.texts.clone(),
        };
        let head = serde_json::to_string(&head)?;
        store::write_resume(
            &self.path,
            self.image.generation,
            &head,
            &self.wire,
            self.wire_stored,
        )?;
        self.wire_stored = self.wire.len();
        Ok(())
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
        let lens = self.image.lens;
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

    /// The session's `groundwork` extra keys, as this resume will write them.
    pub fn extra(&self) -> Option<&Map<String, Value>> {
        self.meta.get("extra").and_then(Value::as_object)
    }

    /// [`Resume::extra`], to change before the next append.
    pub fn extra_mut(&mut self) -> Option<&mut Map<String, Value>> {
        self.meta.get_mut("extra").and_then(Value::as_object_mut)
    }

    /// Commits `pending` to the session's file in one transaction, when the file's last
    /// commit is the one this resume continues ([`SessionError::Changed`] otherwise).
    pub fn append(&mut self, pending: Pending) -> Result<(), SessionError> {
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
        self.image = store::append(&self.image, &added)?;
        self.instructions = pending.instructions_end;
        self.tool_sets = pending.tool_sets_end;
        self.texts = pending.texts_after;
        self.start = pending.start;
        self.window = pending.window;
        Ok(())
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
        // The text stored stays stored when the new one continues it (it does: the
        // earlier wire text only grows).
        if !wire
            .as_bytes()
            .starts_with(&self.wire.as_bytes()[..self.wire_stored])
        {
            self.wire_stored = 0;
        }
        self.wire = wire;
        Ok(())
    }
}
