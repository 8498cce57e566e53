//! A conversation: one session, the file it is saved to, and the questions asked over
//! it. Every face asks through here: a question starts over the session's committed
//! history and state ([`start_question`]), its events go to the face's channel, it can
//! be cancelled, and only a successful outcome is committed (SPEC §2.5) and then saved
//! atomically, never over another writer's work ([`Session::save_or_keep`]).
//!
//! [`Conversation`] owns its session (the `ask` command). The workbench keeps its session
//! in its own view-model, which commits from the run's events; it uses the same functions
//! over that session ([`start_question`], [`commit_finished`], [`save_shared`],
//! [`write_export`], [`apply_document_filter`]).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{Map, Value};

use crate::capabilities::state::{EvidenceState, StateKind, as_a_new_question_sees_it};
use crate::engine::agent::{Agent, RunError, RunInput, RunResult};
use crate::engine::cancel::CancelToken;
use crate::engine::events::{CoreEvent, EventSink, RequestSnapshot};
use crate::engine::messages::{ModelMessage, UserContentValue};
use crate::session::store::Lease;
use crate::session::{Continued, RunTiming, Saved, Session, SessionError};

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

    /// Waits for the run's outcome. A run that panicked panics here, as it would have
    /// run inline; one whose task was aborted (the runtime shutting down) is cancelled.
    pub async fn outcome(self) -> Result<RunResult, RunError> {
        match self.handle.await {
            Ok(outcome) => outcome,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(RunError::Cancelled),
        }
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

/// Commits a question a face followed through its events rather than its outcome (the
/// workbench: `RunFinished` carries the history and state, the requests came one by one
/// in `RequestBuilt`), with its timing, as [`Session::commit_run`] does for an outcome.
pub fn commit_finished(
    session: &mut Session,
    run_id: String,
    messages: Vec<ModelMessage>,
    state: Map<String, Value>,
    requests: impl IntoIterator<Item = RequestSnapshot>,
    started: std::time::Instant,
    model_requests: usize,
) {
    let start = session.run_start(as_a_new_question_sees_it(&session.state));
    session.commit(messages, state, requests);
    let elapsed = started.elapsed();
    session.groundwork.timings.push(RunTiming {
        run_id,
        started_at: chrono::Utc::now() - chrono::Duration::from_std(elapsed).unwrap_or_default(),
        duration_ms: elapsed.as_millis() as u64,
        requests: model_requests,
        start: Some(start),
    });
}

/// Saves `session` to `path` for a writer that holds no lease between saves (the
/// workbench): the lease is taken while saving, and when another writer holds it or
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
    /// Whether this is the session's one writer from opening to the last save (then
    /// its lease, when the file existed, is held here).
    writer: bool,
    lease: Option<Lease>,
    /// Why the session is saved somewhere else than the file opened.
    note: Option<String>,
}

impl Conversation {
    /// `session`, saved to `path` by a writer that takes the lease only while saving.
    pub fn new(session: Session, path: PathBuf) -> Self {
        Conversation {
            session,
            path,
            writer: false,
            lease: None,
            note: None,
        }
    }

    /// Opens the session at `path` as its one writer, from loading to the last save (a
    /// second writer is refused with [`SessionError::Busy`]): the saved session, or a
    /// new one for `model` when there is no file yet. A JSON session is read and its
    /// questions saved beside it ([`crate::session::continue_at`]).
    pub fn open_locked(path: PathBuf, model: impl Into<String>) -> Result<Self, SessionError> {
        let at = crate::session::continue_at(&path);
        let lease = Lease::acquire(&at.write)?;
        Self::open_at(at, model, lease)
    }

    /// [`Conversation::open_locked`] with the session's lease already taken.
    pub fn open_at(
        at: Continued,
        model: impl Into<String>,
        lease: Option<Lease>,
    ) -> Result<Self, SessionError> {
        let session = match &at.read {
            Some(p) => Session::load(p)?,
            None => Session::new(model),
        };
        Ok(Conversation {
            session,
            path: at.write,
            writer: true,
            lease,
            note: at.note,
        })
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Records that `question` ran against the knowledge bases `open`.
    pub fn record_knowledge_bases(
        &mut self,
        open: &[crate::session::knowledge::KnowledgeBase],
        question: u64,
    ) {
        crate::session::knowledge::record(&mut self.session.groundwork.extra, open, question);
    }

    /// Ends a conversation whose process is about to exit: the lock is released, and the
    /// session is left to the exit rather than freed one string and JSON value at a time
    /// (for a long session that costs more than reading it did).
    pub fn close_for_exit(self) {
        let Conversation { session, lease, .. } = self;
        drop(lease);
        std::mem::forget(session);
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
        let start = as_a_new_question_sees_it(&self.session.state);
        self.session.commit_run_from(outcome, start)
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
        // The one writer holds the lease already; a file it created is its own.
        Ok(self.session.save_or_keep(&self.path, !self.writer)?)
    }

    /// Why the session is saved somewhere else than the file opened (a JSON session
    /// continues in the SQLite file beside it), one line.
    pub fn continued_note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// Restricts later questions to the documents `labels` names (none: all).
    pub fn set_document_filter(&mut self, labels: &[String]) -> Option<String> {
        apply_document_filter(&mut self.session.state, labels)
    }

    /// The conversation as Markdown (under `title`) or as JSON.
    pub fn export(&self, format: ExportFormat, title: &str) -> String {
        let t = Transcript::build(&self.session.messages, &self.session.state);
        match format {
            ExportFormat::Markdown => transcript::to_markdown_marked(
                &t,
                title,
                &crate::session::marks::marks(&self.session.groundwork.extra),
            ),
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::engine::messages::{ModelResponse, ModelResponsePart, TextPart};
    use crate::model::{BoxFuture, ChatModel, ModelError, ModelRequestParams, StreamDelta};

    /// Answers every request with `answer N`, recording how many messages each was sent.
    #[derive(Default)]
    struct Echo(Mutex<Vec<usize>>);

    impl ChatModel for Echo {
        fn model_name(&self) -> &str {
            "echo"
        }
        fn request<'a>(
            &'a self,
            params: ModelRequestParams<'a>,
            _on_delta: &'a (dyn Fn(StreamDelta) + Send + Sync),
            _cancel: &'a CancelToken,
        ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
            let mut seen = self.0.lock().unwrap();
            seen.push(params.messages.len());
            let text = format!("answer {}", seen.len());
            Box::pin(async move {
                Ok(ModelResponse::new(vec![ModelResponsePart::Text(
                    TextPart::new(text),
                )]))
            })
        }
    }

    fn agent(model: &Arc<Echo>) -> Agent {
        Agent::builder(model.clone()).build().unwrap()
    }

    #[tokio::test]
    async fn a_question_runs_over_the_committed_history_and_commits_only_on_success() {
        let dir = tempfile::tempdir().unwrap();
        let model = Arc::new(Echo::default());
        let mut c = Conversation::new(Session::new("echo"), dir.path().join("s.json"));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let q = c.start(
            agent(&model),
            "first?",
            Some("run-1".into()),
            tx,
            CancelToken::new(),
        );
        assert_eq!(q.run_id(), Some("run-1"));
        let outcome = q.outcome().await;
        assert!(c.session().messages.is_empty(), "nothing before the commit");
        assert!(c.commit(&outcome));
        assert_eq!(c.session().messages.len(), 2);
        assert_eq!(c.session().groundwork.timings[0].run_id, "run-1");
        let mut finished = false;
        while let Ok(ev) = rx.try_recv() {
            finished |=
                matches!(ev, CoreEvent::RunFinished { ref run_id, .. } if run_id == "run-1");
        }
        assert!(finished, "the outcome event reached the face's channel");

        // The next question is sent the committed history; a cancelled one commits nothing.
        let outcome = c
            .start(agent(&model), "second?", None, None, CancelToken::new())
            .outcome()
            .await;
        assert!(c.commit(&outcome));
        assert_eq!(*model.0.lock().unwrap(), vec![1, 3]);
        let before = c.session().clone();
        let cancel = CancelToken::new();
        cancel.cancel();
        let q = c.start(agent(&model), "third?", None, None, cancel);
        let outcome = q.outcome().await;
        assert!(matches!(outcome, Err(RunError::Cancelled)), "{outcome:?}");
        assert!(!c.commit(&outcome));
        assert_eq!(c.session(), &before);
    }

    #[tokio::test]
    async fn ask_commits_and_saves_as_the_one_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("s.sqlite");
        let model = Arc::new(Echo::default());
        let mut c = Conversation::open_locked(path.clone(), "echo").unwrap();
        let out = c
            .ask(&agent(&model), "q?", None, CancelToken::new())
            .await
            .unwrap();
        assert_eq!(out.answer, "answer 1");
        assert!(matches!(
            c.ask(&agent(&model), "  ", None, CancelToken::new()).await,
            Err(AskError::EmptyQuestion)
        ));
        let saved = c.save().unwrap();
        assert_eq!((saved.path.as_path(), saved.note), (path.as_path(), None));
        let session = c.into_session();
        assert_eq!(Session::load(&path).unwrap(), session);
        // Once the file is there, its one writer holds its lease.
        let held = Conversation::open_locked(path.clone(), "echo").unwrap();
        assert!(matches!(
            Conversation::open_locked(path.clone(), "echo"),
            Err(SessionError::Busy { .. })
        ));
        drop(held);
        // The lease went with the conversation.
        let again = Conversation::open_locked(path.clone(), "echo").unwrap();
        assert_eq!(again.session(), &session);
    }

    #[test]
    fn a_question_followed_through_its_events_commits_with_its_timing() {
        let mut s = Session::new("m");
        let started = std::time::Instant::now();
        let messages = vec![ModelMessage::from(
            crate::engine::messages::ModelRequest::user("q"),
        )];
        commit_finished(&mut s, "r".into(), messages, Map::new(), [], started, 2);
        assert_eq!(s.messages.len(), 1);
        let t = &s.groundwork.timings[0];
        assert_eq!((t.run_id.as_str(), t.requests), ("r", 2));
    }

    #[test]
    fn the_document_filter_makes_the_rag_state_and_clears() {
        let mut c = Conversation::new(Session::new("m"), PathBuf::from("s.json"));
        let sql = c.set_document_filter(&["manual".to_string()]).unwrap();
        let rag = &c.session().state[StateKind::Rag.namespace()];
        assert_eq!(rag["document_filter"], Value::String(sql));
        assert_eq!(c.set_document_filter(&[]), None);
        assert_eq!(
            c.session().state[StateKind::Rag.namespace()]["document_filter"],
            Value::Null
        );
        assert!(c.export(ExportFormat::Markdown, "T").contains('T'));
        assert!(c.export(ExportFormat::Json, "T").starts_with('{'));
    }
}
