//! Sessions: `{"messages": [...], "state": {...}, "groundwork": {...}}`.
//!
//! `messages` is pydantic-ai's message JSON and `state` the host state dict, so a
//! haiku.rag host can read our sessions and we can read theirs (a file without
//! `groundwork` loads with fresh metadata). `groundwork` holds what only Groundwork
//! needs: request snapshots (raw vs. compacted), timings and labels. Nothing here
//! holds an API key.
//!
//! A session Groundwork continues lives in an SQLite file of its own ([`store`]): a
//! save is one transaction adding what the question added, a kill leaves the previous
//! commit or the new one, a damaged file is refused in one line and left as it is, and
//! one writer at a time holds its lease ([`store::Lease`]). JSON sessions (Groundwork's
//! older files, with their journals, and haiku.rag's) are read and never modified;
//! continuing one writes the SQLite file beside it ([`continue_at`]). A path named
//! `.json` is written whole as JSON (exports, an experiment's sessions).

pub mod app_store;
mod disk;
mod file;
pub mod journal;
pub mod knowledge;
pub mod linear;
mod lock;
pub mod marks;
pub mod resume;
mod starts;
pub mod state_diff;
pub mod store;
pub mod verdicts;

use std::borrow::Cow;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::engine::agent::{RunError, RunResult};
use crate::engine::events::{EstimateMemo, RequestSnapshot};
use crate::engine::messages::ModelMessage;

pub(crate) use disk::same_file;
pub use disk::{kept_path, new_session_path, remove_stale_temps, write_atomic};
pub use journal::journal_path;
pub use linear::{LinearRequest, RequestTotals, Tables};
pub use lock::{SessionLock, lock_path};
pub use starts::RunStart;

use file::{SavedImage, SessionFile};

/// Current `groundwork.version`: 4 keeps requests in linear form ([`linear`]), each text
/// of the text table as a change to an earlier one ([`linear::Texts`]), and long list
/// contents (the capsule's pictures) in that table too; version 3 changed each text from
/// the one just before and kept lists in every request, version 2 kept texts whole,
/// version 1 full copies of every request's history. All are read, and a session is
/// saved in this one.
pub const SESSION_FORMAT_VERSION: u32 = 4;

/// A conversation with its state and Groundwork's metadata.
///
/// `groundwork.requests` refers into `messages`: replace the history through
/// [`Session::commit`] or [`Session::set_messages`], which keep the references right.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "SessionFile")]
pub struct Session {
    /// Committed history.
    pub messages: Vec<ModelMessage>,
    /// Committed host state.
    #[serde(default)]
    pub state: Map<String, Value>,
    /// Groundwork's metadata.
    #[serde(default)]
    pub groundwork: GroundworkMeta,
    /// Top-level keys other hosts wrote, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
    /// What the file holds as this session last read or saved it (for incremental saves).
    #[serde(skip)]
    saved: SavedImage,
    /// The start state of the latest run rebuilt or recorded ([`starts`]).
    #[serde(skip)]
    starts: starts::StartCache,
}

/// Groundwork's part of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroundworkMeta {
    /// Format version.
    pub version: u32,
    /// The model the session was run with.
    #[serde(default)]
    pub model: Option<String>,
    /// When the session was created.
    pub created_at: DateTime<Utc>,
    /// One entry per model request, across runs, in linear form (see
    /// [`Session::request`] for the whole snapshot).
    #[serde(default)]
    pub requests: Vec<LinearRequest>,
    /// The distinct instructions and tool lists the requests refer to.
    #[serde(default, skip_serializing_if = "tables_empty")]
    pub tables: Tables,
    /// One entry per committed run.
    #[serde(default)]
    pub timings: Vec<RunTiming>,
    /// Whether the session came from the scripted demo model.
    #[serde(default)]
    pub scripted_demo: bool,
    /// Free-form labels.
    #[serde(default)]
    pub labels: Map<String, Value>,
    /// Unknown keys, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Default for GroundworkMeta {
    fn default() -> Self {
        GroundworkMeta {
            version: SESSION_FORMAT_VERSION,
            model: None,
            created_at: Utc::now(),
            requests: Vec::new(),
            tables: Tables::default(),
            timings: Vec::new(),
            scripted_demo: false,
            labels: Map::new(),
            extra: Map::new(),
        }
    }
}

fn tables_empty(t: &Tables) -> bool {
    t.instructions.is_empty() && t.tool_sets.is_empty() && t.texts.is_empty()
}

/// Timing of one committed run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunTiming {
    /// The run.
    pub run_id: String,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// Wall-clock duration.
    pub duration_ms: u64,
    /// Model requests made.
    pub requests: usize,
    /// The history and state it started from (none in sessions written before
    /// starts were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<RunStart>,
}

/// Why a session could not be loaded or saved.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Reading or writing failed.
    #[error("cannot {action} session file {path}: {source}")]
    Io {
        /// "read" or "write".
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The file is not a valid session.
    #[error("corrupt session file {path} (line {line}, column {column}): {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The JSON error.
        message: String,
    },
    /// The file was written by a newer Groundwork, in a format this one does not read.
    #[error(
        "{} was written by a newer Groundwork ({kind} {version}; this one reads up to \
         {newest}): update Groundwork to open it",
        path.display()
    )]
    Newer {
        /// The file.
        path: PathBuf,
        /// What is versioned: `session format` (a JSON session) or `session schema` (an
        /// SQLite one).
        kind: &'static str,
        /// Its version.
        version: u64,
        /// The newest this build reads.
        newest: u64,
    },
    /// Serializing failed.
    #[error("cannot serialize session: {0}")]
    Serialize(#[from] serde_json::Error),
    /// Another Groundwork process holds the session's lock.
    #[error("session {} is being written by another groundwork process{}", path.display(), pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    Busy {
        /// The session file.
        path: PathBuf,
        /// The holder's pid, when it could be read.
        pid: Option<u32>,
    },
    /// The journal beside a session file cannot be applied.
    #[error("{message}")]
    Journal {
        /// The journal.
        path: PathBuf,
        /// What is wrong, naming the file.
        message: String,
    },
    /// A session database that cannot be read as a whole session.
    #[error("{} is damaged ({problem}): it is not opened, and is left as it was", path.display())]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The file changed on disk since this process read or wrote it.
    #[error("{} changed on disk since this process read it (another program wrote it)", path.display())]
    Changed {
        /// The session file.
        path: PathBuf,
    },
    /// haiku.rag's web-app session store was named without one of its sessions, or with
    /// one it does not hold.
    #[error("{message}")]
    AppStore {
        /// The store.
        path: PathBuf,
        /// What to name instead, in one line.
        message: String,
    },
}

impl SessionError {
    /// A session's text that did not read: newer than this build reads, or corrupt.
    fn unreadable(e: serde_json::Error, path: &Path) -> SessionError {
        match file::newer_format(&e) {
            Some(version) => SessionError::Newer {
                path: path.to_path_buf(),
                kind: "session format",
                version,
                newest: u64::from(SESSION_FORMAT_VERSION),
            },
            None => SessionError::Corrupt {
                path: path.to_path_buf(),
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            },
        }
    }
}

/// Where [`Session::save_or_keep`] put the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// The file written.
    pub path: PathBuf,
    /// Why it is not the file asked for (one line), when it is not.
    pub note: Option<String>,
}

impl Session {
    /// An empty session for `model`.
    pub fn new(model: impl Into<String>) -> Self {
        Session {
            messages: Vec::new(),
            state: Map::new(),
            groundwork: GroundworkMeta {
                model: Some(model.into()),
                ..GroundworkMeta::default()
            },
            extra: Map::new(),
            saved: SavedImage::default(),
            starts: Default::default(),
        }
    }

    /// Commits a run's history and state together, only if the run succeeded
    /// (SPEC §2.5), recording the committed state as the state it started from. Returns
    /// whether anything was committed.
    pub fn commit_run(&mut self, outcome: &Result<RunResult, RunError>) -> bool {
        let start = self.state.clone();
        self.commit_run_from(outcome, start)
    }

    /// [`Session::commit_run`], recording `start` as the state the run started from
    /// (the host records it as the run saw it: [`Session::run_start`]).
    pub fn commit_run_from(
        &mut self,
        outcome: &Result<RunResult, RunError>,
        start: Map<String, Value>,
    ) -> bool {
        match outcome {
            Ok(result) => {
                let start = self.run_start(start);
                crate::timing::mark("commit: run start");
                self.set_messages(result.messages.clone());
                crate::timing::mark("commit: messages set");
                self.state = result.state.clone();
                self.push_requests_estimated(
                    result.requests.iter().map(Cow::Borrowed),
                    &result.estimates,
                );
                crate::timing::mark("commit: requests pushed");
                self.groundwork.timings.push(RunTiming {
                    run_id: result.run_id.clone(),
                    started_at: result.started_at,
                    duration_ms: result.duration_ms,
                    requests: result.usage.requests,
                    start: Some(start),
                });
                true
            }
            Err(_) => false,
        }
    }

    /// Commits a history, a state and the requests that produced them.
    pub fn commit(
        &mut self,
        messages: Vec<ModelMessage>,
        state: Map<String, Value>,
        requests: impl IntoIterator<Item = RequestSnapshot>,
    ) {
        self.set_messages(messages);
        self.state = state;
        self.push_requests(requests);
    }

    /// Replaces the history, keeping earlier requests' references into it right.
    pub fn set_messages(&mut self, messages: Vec<ModelMessage>) {
        let changed: Vec<usize> = self
            .messages
            .iter()
            .zip(&messages)
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(j, _)| j)
            .collect();
        if !changed.is_empty() || messages.len() < self.messages.len() {
            for r in &mut self.groundwork.requests {
                r.rebase(&self.messages, messages.len(), &changed);
            }
            let first = changed.first().copied().unwrap_or(usize::MAX);
            self.saved.lower(first.min(messages.len()), 0);
        }
        self.messages = messages;
    }

    /// Records requests made over the current history (after [`Session::set_messages`]).
    pub fn push_requests(&mut self, requests: impl IntoIterator<Item = RequestSnapshot>) {
        let memo = EstimateMemo::default();
        self.push_requests_estimated(requests.into_iter().map(Cow::Owned), &memo);
    }

    /// [`Session::push_requests`] of a run that estimated its messages in `estimates`
    /// (taken from there rather than estimated again). A borrowed request is encoded
    /// without copying its histories.
    pub fn push_requests_estimated<'r>(
        &mut self,
        requests: impl IntoIterator<Item = Cow<'r, RequestSnapshot>>,
        estimates: &'r EstimateMemo,
    ) {
        let mut encoder = linear::Encoder::after(&self.groundwork.requests).with_memo(estimates);
        for snap in requests {
            let l = encoder.encode(
                &self.groundwork.requests,
                snap,
                &self.messages,
                &mut self.groundwork.tables,
            );
            self.groundwork.requests.push(l);
        }
    }

    /// How many requests the session recorded.
    pub fn request_count(&self) -> usize {
        self.groundwork.requests.len()
    }

    /// Recorded request `i` (0-based) in full.
    pub fn request(&self, i: usize) -> Option<RequestSnapshot> {
        linear::snapshot(
            &self.groundwork.requests,
            i,
            &self.messages,
            &self.groundwork.tables,
        )
    }

    /// Every recorded request in full, in order (one pass).
    pub fn requests(&self) -> impl Iterator<Item = RequestSnapshot> + '_ {
        linear::snapshots(
            &self.groundwork.requests,
            &self.messages,
            &self.groundwork.tables,
        )
    }

    /// The overview figures of every recorded request, without rebuilding any.
    pub fn request_totals(&self) -> Vec<RequestTotals> {
        linear::totals(
            &self.groundwork.requests,
            &self.messages,
            &self.groundwork.tables,
        )
    }

    /// Parses a session from JSON text; `path` is only used in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Self, SessionError> {
        serde_json::from_str(text).map_err(|e| SessionError::unreadable(e, path))
    }

    /// Loads a session: an SQLite session file ([`store::load`]), or a JSON one with the
    /// journal an earlier Groundwork kept beside it applied ([`journal`]). Nothing on
    /// disk changes.
    pub fn load(path: &Path) -> Result<Self, SessionError> {
        if let Some((store, id)) = app_store::address(path) {
            return app_store::load(&store, &id);
        }
        if app_store::is_app_store(path) {
            return app_store::load_only(path);
        }
        if store::is_database(path) {
            let (session, image) = store::load(path)?;
            session.saved.put(image);
            crate::timing::mark("session: database read");
            return Ok(session);
        }
        let io = |source| SessionError::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        };
        let mut file = std::fs::File::open(path).map_err(io)?;
        let stamp = file.metadata().map(|m| disk::Stamp::of(&m)).map_err(io)?;
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(io)?;
        crate::timing::mark("session: file read");
        // A long session's journal is read on another thread while its file is parsed.
        let (parsed, journal) = if text.len() >= file::PARALLEL_FROM {
            std::thread::scope(|scope| {
                let journal = std::thread::Builder::new()
                    .spawn_scoped(scope, || journal::read(path))
                    .ok();
                let parsed = Session::parse(&text, path);
                (parsed, journal.and_then(|j| j.join().ok()))
            })
        } else {
            (Session::parse(&text, path), None)
        };
        crate::timing::mark("session: parsed");
        let (mut session, ids) = parsed?;
        disk::remember(path, stamp);
        let bytes = text.len() as u64;
        drop(text);
        let journal = journal.unwrap_or_else(|| journal::read(path));
        journal::replay(path, &mut session, &ids, bytes, journal).map_err(|message| {
            SessionError::Journal {
                path: journal_path(path),
                message,
            }
        })?;
        crate::timing::mark("session: journal replayed");
        Ok(session)
    }

    /// Parses a session file, with the snapshot identities it carries.
    fn parse(text: &str, path: &Path) -> Result<(Self, journal::SnapshotIds), SessionError> {
        let file = SessionFile::parse(text).map_err(|e| SessionError::unreadable(e, path))?;
        let id = |key: &str| {
            file.groundwork
                .as_ref()
                .and_then(|g| g.extra.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let ids = journal::SnapshotIds {
            snapshot: id("snapshot"),
            previous: id("previous_snapshot"),
        };
        let mut session = Session::from(file);
        // The identities of an older file's journal are not part of the session.
        session.groundwork.extra.remove("snapshot");
        session.groundwork.extra.remove("previous_snapshot");
        Ok((session, ids))
    }

    /// The file's JSON (compact: long sessions are read and written often).
    pub fn to_json(&self) -> Result<Vec<u8>, SessionError> {
        let mut json = serde_json::to_vec(self)?;
        json.push(b'\n');
        Ok(json)
    }

    /// Saves to `path`: a path named `.json` is written whole as JSON, atomically; any
    /// other is the session's SQLite file, created whole the first time and then
    /// given what changed since this process read or saved it, in one transaction.
    /// Refuses with [`SessionError::Changed`] when another writer changed the file since
    /// (or made it, when this session never read it).
    pub fn save(&self, path: &Path) -> Result<(), SessionError> {
        if is_json_path(path) {
            return self.save_json(path);
        }
        // The image is used in place (it holds a copy of the state: not cloned).
        let next = self.saved.with(path, |image| match image {
            Some(image) => store::apply(self, image),
            None if !path.exists() => store::create(path, self),
            None => Err(SessionError::Changed {
                path: path.to_path_buf(),
            }),
        })?;
        crate::timing::mark("save: committed");
        self.saved.put(next);
        Ok(())
    }

    /// Writes the whole session to `path` as JSON (atomically), unless another program
    /// changed the file since this process read or wrote it.
    fn save_json(&self, path: &Path) -> Result<(), SessionError> {
        if !disk::unchanged(path) {
            return Err(SessionError::Changed {
                path: path.to_path_buf(),
            });
        }
        let json = self.to_json()?;
        let stamp = disk::write_atomic_stamped(path, &json).map_err(|source| SessionError::Io {
            action: "write",
            path: path.to_path_buf(),
            source,
        })?;
        disk::remember(path, stamp);
        Ok(())
    }

    /// Saves to `path`, never over another writer's work: when another Groundwork process
    /// holds its lease (only checked with `take_lock`; `ask` holds the lease itself) or
    /// the file changed since this process read it, the session is saved to a new file
    /// beside it ([`kept_path`]) and later saves of `path` in this process go there too.
    pub fn save_or_keep(&self, path: &Path, take_lock: bool) -> Result<Saved, SessionError> {
        let target = disk::moved(path).unwrap_or_else(|| path.to_path_buf());
        let lease = if take_lock && !is_json_path(&target) {
            match store::Lease::acquire(&target) {
                Ok(l) => l,
                Err(e @ SessionError::Busy { .. }) => return self.keep_beside(path, &e),
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        let saved = self.save(&target);
        drop(lease);
        match saved {
            // After a move the note was given once; the path says where it went.
            Ok(()) => Ok(Saved {
                note: None,
                path: target,
            }),
            Err(e @ SessionError::Changed { .. }) => self.keep_beside(path, &e),
            Err(e) => Err(e),
        }
    }

    /// Saves to a new file beside `path` ([`kept_path`]), which another program changed
    /// since this process read it, with the note saying so; later saves of `path` in
    /// this process go there too.
    pub fn keep_beside_changed(&self, path: &Path) -> Result<Saved, SessionError> {
        self.keep_beside(
            path,
            &SessionError::Changed {
                path: path.to_path_buf(),
            },
        )
    }

    fn keep_beside(&self, path: &Path, why: &SessionError) -> Result<Saved, SessionError> {
        let kept = kept_path(path);
        self.save(&kept)?;
        disk::remember_move(path, &kept);
        let why = match why {
            SessionError::Changed { path } => format!(
                "{} changed on disk since this question started (another program wrote it)",
                path.display()
            ),
            other => other.to_string(),
        };
        Ok(Saved {
            note: Some(format!("{why}; your answer is kept in {}", kept.display())),
            path: kept,
        })
    }
}

/// Whether `path` is named as a JSON file (written whole as JSON, never as a database).
pub fn is_json_path(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// Loads the session a user named `path` for reading: the file itself, or, when the
/// conversation continues in the SQLite file beside a JSON session (or a `.json` name
/// that was never written), that file, saying so on standard error.
pub fn load_named(path: &Path) -> Result<Session, SessionError> {
    let at = continue_at(path);
    match at.read {
        Some(read) if read != path => {
            crate::errors::say!(
                "reading {}, where the session {} continues",
                read.display(),
                path.display()
            );
            Session::load(&read)
        }
        _ => Session::load(path),
    }
}

/// Where a conversation opened at `path` is read from and saved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continued {
    /// The file read (none: a new session).
    pub read: Option<PathBuf>,
    /// The SQLite file its questions are saved to.
    pub write: PathBuf,
    /// Why `write` is not `path` (one line), when it is not.
    pub note: Option<String>,
}

/// The SQLite file `beside` a session `path` names, which already continues it.
fn continuing(beside: PathBuf, path: &Path) -> Continued {
    Continued {
        note: Some(format!(
            "continuing {} (where questions asked over {} are saved)",
            beside.display(),
            path.display()
        )),
        read: Some(beside.clone()),
        write: beside,
    }
}

/// Where questions asked over the session at `path` go. A session database is
/// continued in place. A JSON session (or a `.json` name) is never modified: its
/// questions go to the SQLite file beside it (`NAME.sqlite`), which continues it from
/// then on, and the note says so.
pub fn continue_at(path: &Path) -> Continued {
    if let Some(at) = app_store::continue_at(path) {
        return at;
    }
    let json = is_json_path(path) || (path.exists() && !store::is_database(path));
    if !json {
        return Continued {
            read: path.exists().then(|| path.to_path_buf()),
            write: path.to_path_buf(),
            note: None,
        };
    }
    let beside = path.with_extension("sqlite");
    if store::is_database(&beside) {
        return continuing(beside, path);
    }
    let note = if path.exists() {
        format!(
            "{} is kept as it was; the session continues in {}",
            path.display(),
            beside.display()
        )
    } else {
        format!("the session is saved to {}", beside.display())
    };
    Continued {
        read: path.exists().then(|| path.to_path_buf()),
        write: beside,
        note: Some(note),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_save_while_another_process_writes_is_kept_beside_and_later_saves_follow_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        let mut s = Session::new("m");
        s.save_or_keep(&path, true).unwrap();
        // Another writer holds the lease (an `ask` running on the file).
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        store::tests_support::hold_lease(&path, other.id());
        s.state.insert("q".into(), Value::from(1));
        let saved = s.save_or_keep(&path, true).unwrap();
        assert_ne!(saved.path, path);
        assert_eq!(saved.path.extension().unwrap(), "sqlite");
        assert_eq!(
            saved.note.as_deref(),
            Some(
                format!(
                    "session {} is being written by another groundwork process (pid {}); \
                     your answer is kept in {}",
                    path.display(),
                    other.id(),
                    saved.path.display()
                )
                .as_str()
            )
        );
        assert_eq!(Session::load(&saved.path).unwrap().state["q"], 1);
        other.kill().unwrap();
        other.wait().unwrap();
        // Later saves go to the kept file, not over the other writer's.
        s.state.insert("q".into(), Value::from(2));
        let again = s.save_or_keep(&path, true).unwrap();
        assert_eq!(
            (again.path.as_path(), again.note),
            (saved.path.as_path(), None)
        );
        assert_eq!(Session::load(&saved.path).unwrap().state["q"], 2);
        assert!(Session::load(&path).unwrap().state.get("q").is_none());
    }

    /// A run's estimates are taken for the messages it estimated (that very allocation)
    /// and give the same stored requests as estimating afresh; a memory that does not
    /// hold a message is not taken for it.
    #[test]
    fn requests_saved_with_the_runs_estimates_are_those_saved_without() {
        use crate::engine::events::TokenCounts;
        use crate::engine::messages::ModelRequest;
        let history: Vec<ModelMessage> = (0..5)
            .map(|i| ModelRequest::user(format!("question {i} {}", "x".repeat(i * 7))).into())
            .collect();
        let mut memo = EstimateMemo::default();
        let raw_tokens = memo.estimate("be brief", &history);
        let sent = history[1..].to_vec();
        let compacted_tokens = memo.estimate("be brief", &sent);
        let snap = RequestSnapshot {
            run_id: "r".into(),
            request: 1,
            raw: history.clone(),
            compacted: sent,
            tools: Vec::new(),
            instructions: "be brief".into(),
            raw_tokens: raw_tokens.clone(),
            compacted_tokens,
            tokens: None,
        };
        assert_eq!(raw_tokens, TokenCounts::estimate("be brief", &history));
        let copy: ModelMessage = ModelRequest::user("question 0 ").into();
        assert_eq!(
            memo.get(&history[0].clone()),
            Some(raw_tokens.per_message[0])
        );
        assert_eq!(
            memo.get(&copy),
            None,
            "an equal message elsewhere is not known"
        );

        let mut plain = Session::new("m");
        plain.commit(history.clone(), Map::new(), [snap.clone()]);
        let mut memoised = Session::new("m");
        memoised.set_messages(history);
        memoised.push_requests_estimated([Cow::Borrowed(&snap)], &memo);
        assert_eq!(memoised.groundwork.requests, plain.groundwork.requests);
        assert_eq!(memoised.groundwork.requests[0].raw_tokens, None);
        assert_eq!(memoised.groundwork.requests[0].sent_tokens, None);
        assert_eq!(memoised.request(0), Some(snap));
    }

    #[test]
    fn a_file_changed_since_it_was_read_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        Session::new("m").save(&path).unwrap();
        let mut s = Session::load(&path).unwrap();
        // Another program rewrites it.
        let mut other = Session::load(&path).unwrap();
        other.state.insert("theirs".into(), Value::from(true));
        std::fs::write(&path, other.to_json().unwrap()).unwrap();
        s.state.insert("ours".into(), Value::from(true));
        assert!(matches!(s.save(&path), Err(SessionError::Changed { .. })));
        let saved = s.save_or_keep(&path, false).unwrap();
        let note = saved.note.unwrap();
        assert!(
            note.starts_with(&format!(
                "{} changed on disk since this question started",
                path.display()
            )),
            "{note}"
        );
        assert_eq!(Session::load(&path).unwrap().state["theirs"], true);
        assert_eq!(Session::load(&saved.path).unwrap().state["ours"], true);
    }
}
