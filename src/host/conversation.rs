//! A conversation: one session, the file it is saved to, and the questions asked over
//! it. Every face asks through here: a question starts over the session's committed
//! history and state ([`start_question`]), its events go to the face's channel, it can
//! be cancelled, and only a successful outcome is committed (SPEC §2.5) and then saved
//! atomically, never over another writer's work ([`Session::save_or_keep`]).
//!
//! [`Conversation`] owns its session (the `ask` command). The workbench keeps its session
//! in its own view-model, which commits from the run's events; it uses the same functions
//! over that session ([`start_question`], [`save_shared`], [`write_export`]).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{Map, Value};

use crate::capabilities::state::{EvidenceState, StateKind};
use crate::engine::agent::{Agent, RunError, RunInput, RunResult};
use crate::engine::cancel::CancelToken;
use crate::engine::events::{CoreEvent, EventSink};
use crate::engine::messages::UserContentValue;
use crate::session::{Saved, Session, SessionError, SessionLock};

use super::ask::{AskError, AskOutcome};
use super::transcript::{self, Transcript};

/// A question running in its own task.
pub struct Question {
    run_id: Option<String>,
    cancel: CancelToken,
    handle: tokio::task::JoinHandle<Result<RunResult, RunError>>,
}

impl Question {
    /// The run id it was started with, if the face chose one.
    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    /// Stops the run at its next await point; nothing is committed.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Waits for the run's outcome (a task that panicked counts as cancelled).
    pub async fn outcome(self) -> Result<RunResult, RunError> {
        self.handle.await.unwrap_or(Err(RunError::Cancelled))
    }
}

/// The run input of a question over `session`'s committed history and state.
pub fn question_input(
    session: &Session,
    prompt: impl Into<UserContentValue>,
    run_id: Option<String>,
) -> RunInput {
    let input = RunInput::prompt(prompt)
        .with_history(session.messages.clone())
        .with_state(session.state.clone());
    match run_id {
        Some(id) => input.with_run_id(id),
        None => input,
    }
}

/// Starts `agent` on a question over `session` in a task of its own. Its events,
/// outcome events included (finished, failed, cancelled), go to `events`; `cancel`
/// stops it. The session is not touched: commit the outcome when it succeeds.
pub fn start_question(
    agent: Agent,
    session: &Session,
    prompt: impl Into<UserContentValue>,
    run_id: Option<String>,
    events: impl Into<EventSink>,
    cancel: CancelToken,
) -> Question {
    let input = question_input(session, prompt, run_id.clone());
    let events = events.into();
    let token = cancel.clone();
    let handle = tokio::spawn(async move { agent.run(input, events, token).await });
    Question {
        run_id,
        cancel,
        handle,
    }
}

/// Saves `session` to `path` for a writer that holds no lock between saves (the
/// workbench): the lock is taken while saving, and when another writer holds it or
/// changed the file, the session is kept beside it ([`Saved::note`] says where).
pub fn save_shared(session: &Session, path: &Path) -> Result<Saved, SessionError> {
    session.save_or_keep(path, true)
}

/// Writes an export (Markdown, JSON) atomically.
pub fn write_export(path: &Path, contents: &str) -> std::io::Result<()> {
    crate::session::write_atomic(path, contents.as_bytes())
}

/// Sets the document filter of every evidence state to the documents `labels` names
/// (none: all documents), making the RAG state when there is none yet. Returns the SQL
/// filter written.
pub fn apply_document_filter(state: &mut Map<String, Value>, labels: &[String]) -> Option<String> {
    let sql = transcript::document_filter_sql(labels);
    if !state.contains_key(StateKind::Rag.namespace()) {
        state.insert(
            StateKind::Rag.namespace().into(),
            EvidenceState::empty(StateKind::Rag).to_value(),
        );
    }
    transcript::set_document_filter(state, sql.as_deref());
    sql
}

/// An export's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Markdown,
    Json,
}

/// One session and the file it is saved to.
pub struct Conversation {
    session: Session,
    path: PathBuf,
    /// Held from opening to the last save when this is the session's only writer.
    lock: Option<SessionLock>,
}

impl Conversation {
    /// `session`, saved to `path` by a writer that takes the lock only while saving.
    pub fn new(session: Session, path: PathBuf) -> Self {
        Conversation {
            session,
            path,
            lock: None,
        }
    }

    /// Opens `path` as its one writer, from loading to the last save (a second writer
    /// is refused with [`SessionError::Busy`]): the saved session, or a new one for
    /// `model` when there is no file yet.
    pub fn open_locked(path: PathBuf, model: impl Into<String>) -> Result<Self, SessionError> {
        let lock = SessionLock::acquire(&path)?;
        let session = if path.exists() {
            Session::load(&path)?
        } else {
            Session::new(model)
        };
        Ok(Conversation {
            session,
            path,
            lock: Some(lock),
        })
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The file it is saved to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn into_session(self) -> Session {
        self.session
    }

    /// Starts a question over the committed history and state (see [`start_question`]).
    pub fn start(
        &self,
        agent: Agent,
        prompt: impl Into<UserContentValue>,
        run_id: Option<String>,
        events: impl Into<EventSink>,
        cancel: CancelToken,
    ) -> Question {
        start_question(agent, &self.session, prompt, run_id, events, cancel)
    }

    /// Commits a question's history and state, only if it succeeded. Returns whether
    /// anything was committed.
    pub fn commit(&mut self, outcome: &Result<RunResult, RunError>) -> bool {
        self.session.commit_run(outcome)
    }

    /// Asks `question` and commits it on success (see [`super::ask::ask`]).
    pub async fn ask(
        &mut self,
        agent: &Agent,
        question: &str,
        events: Option<tokio::sync::mpsc::UnboundedSender<CoreEvent>>,
        cancel: CancelToken,
    ) -> Result<AskOutcome, AskError> {
        super::ask::ask(agent, &mut self.session, question, events, cancel).await
    }

    /// Saves atomically to the session's file (creating its folder), or beside it when
    /// another writer changed it meanwhile (then [`Saved::note`] says where).
    pub fn save(&self) -> anyhow::Result<Saved> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        // The holder of the lock does not take it again.
        Ok(self.session.save_or_keep(&self.path, self.lock.is_none())?)
    }

    /// Restricts later questions to the documents `labels` names (none: all).
    pub fn set_document_filter(&mut self, labels: &[String]) -> Option<String> {
        apply_document_filter(&mut self.session.state, labels)
    }

    /// The conversation as Markdown (under `title`) or as JSON.
    pub fn export(&self, format: ExportFormat, title: &str) -> String {
        let t = Transcript::build(&self.session.messages, &self.session.state);
        match format {
            ExportFormat::Markdown => transcript::to_markdown(&t, title),
            ExportFormat::Json => serde_json::to_string_pretty(&transcript::to_json(
                &t,
                &self.session.messages,
                &self.session.state,
            ))
            .unwrap_or_default(),
        }
    }

    /// Writes [`Conversation::export`] to `path` atomically.
    pub fn export_to(&self, format: ExportFormat, title: &str, path: &Path) -> std::io::Result<()> {
        write_export(path, &self.export(format, title))
    }
}
