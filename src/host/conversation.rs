//! A conversation: one session, the file it is saved to, and the questions asked over
//! it. Every face asks through here: a question starts over the session's committed
//! history and state ([`start_question`]), its events go to the face's channel, it can
//! be cancelled, and only a successful outcome is committed (SPEC §2.5) and then saved
//! atomically, never over another writer's work ([`Session::save_or_keep`]).
//!
//! [`Conversation`] is the one owner of an open session: `ask`, `eval` and the workbench
//! all commit through it ([`Conversation::commit_question`], one commit path), and only
//! it changes the session (marks, the document filter, the knowledge bases recorded). A
//! face that draws the session reads it through [`Conversation::snapshot`], an immutable
//! shared copy it is sent again after every change; it never holds a session of its own.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use serde_json::{Map, Value};

use crate::capabilities::state::{EvidenceState, StateKind, as_a_new_question_sees_it};
use crate::engine::agent::{Agent, RunError, RunInput, RunResult};
use crate::engine::cancel::CancelToken;
use crate::engine::events::{CoreEvent, EventSink};
use crate::engine::messages::UserContentValue;
use crate::session::store::Lease;
use crate::session::{Continued, Saved, Session, SessionError};

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

/// A save of one snapshot of a conversation, to run wherever the face saves (the
/// workbench saves off its UI task, in the order the saves were asked for).
pub struct SaveJob {
    session: Arc<Session>,
    path: PathBuf,
    /// Whether the lease is taken while saving (a writer that holds none between saves).
    shared: bool,
}

impl SaveJob {
    /// The file it saves to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Saves atomically to the file (creating its folder), or beside it when another
    /// writer holds the file or changed it meanwhile (then [`Saved::note`] says where).
    pub fn run(&self) -> anyhow::Result<Saved> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        Ok(self.session.save_or_keep(&self.path, self.shared)?)
    }
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
    /// Shared with the snapshots handed out; changed in place when none is held.
    session: Arc<Session>,
    /// None: a conversation that is not saved (yet).
    path: Option<PathBuf>,
    /// Whether this is the session's one writer from opening to the last save (then
    /// its lease, when the file existed, is held here).
    writer: bool,
    lease: Option<Lease>,
    /// A session file not made yet, claimed (its `NAME.lock` beside it) from opening to
    /// the end, so a second writer is refused before its question runs, not at its save.
    claim: Option<crate::session::SessionLock>,
    /// Why the session is saved somewhere else than the file opened.
    note: Option<String>,
}

impl Conversation {
    /// `session`, saved to `path` by a writer that takes the lease only while saving.
    pub fn new(session: Session, path: PathBuf) -> Self {
        Self::shown(Arc::new(session), Some(path))
    }

    /// The conversation of a face that shows `session` (the snapshot it was built
    /// over), saved to `path` (none: not saved until a path is given) by a writer that
    /// takes the lease only while saving.
    pub fn shown(session: Arc<Session>, path: Option<PathBuf>) -> Self {
        Conversation {
            session,
            path,
            writer: false,
            lease: None,
            claim: None,
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

    /// [`Conversation::open_locked`] with the session's lease already taken (none: the
    /// file is not there yet, and is claimed here until this conversation ends).
    pub fn open_at(
        at: Continued,
        model: impl Into<String>,
        lease: Option<Lease>,
    ) -> Result<Self, SessionError> {
        let claim = if lease.is_none() && !at.write.exists() {
            Some(crate::session::SessionLock::acquire(&at.write)?)
        } else {
            None
        };
        let session = match &at.read {
            Some(p) => Session::load(p)?,
            None => Session::new(model),
        };
        Ok(Conversation {
            session: Arc::new(session),
            path: Some(at.write),
            writer: true,
            lease,
            claim,
            note: at.note,
        })
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The session as it is now, for a face to draw: it never changes; the next change
    /// makes a new one.
    pub fn snapshot(&self) -> Arc<Session> {
        self.session.clone()
    }

    /// The session to change: in place when no snapshot of it is held, else a copy.
    fn session_mut(&mut self) -> &mut Session {
        Arc::make_mut(&mut self.session)
    }

    /// Records that `question` ran against the knowledge bases `open`.
    pub fn record_knowledge_bases(
        &mut self,
        open: &[crate::session::knowledge::KnowledgeBase],
        question: u64,
    ) {
        crate::session::knowledge::record(&mut self.session_mut().groundwork.extra, open, question);
    }

    /// Sets (or with `None` takes back) the reviewer's mark on the answer to `question`.
    pub fn set_mark(&mut self, question: u64, mark: Option<(String, Option<String>)>) {
        crate::session::marks::set(&mut self.session_mut().groundwork.extra, question, mark);
    }

    /// Keeps `v` as the check of its question's claims (replacing an earlier one).
    pub fn set_verification(&mut self, v: &crate::session::verdicts::Verification) {
        crate::session::verdicts::set(&mut self.session_mut().groundwork.extra, v);
    }

    /// Ends a conversation whose process is about to exit: the lock is released, and the
    /// session is left to the exit rather than freed one string and JSON value at a time
    /// (for a long session that costs more than reading it did).
    pub fn close_for_exit(self) {
        let Conversation {
            session,
            lease,
            claim,
            ..
        } = self;
        drop(lease);
        drop(claim);
        std::mem::forget(session);
    }

    /// The file it is saved to (none: it is not saved).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Saves it to `path` from now on.
    pub fn set_path(&mut self, path: PathBuf) {
        self.path = Some(path);
    }

    pub fn into_session(self) -> Session {
        Arc::try_unwrap(self.session).unwrap_or_else(|shared| (*shared).clone())
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
        self.commit_question(outcome, &[])
    }

    /// Commits a question that ran against the knowledge bases `open`, only if it
    /// succeeded (then `open` is recorded under the question). Returns whether anything
    /// was committed.
    pub fn commit_question(
        &mut self,
        outcome: &Result<RunResult, RunError>,
        open: &[crate::session::knowledge::KnowledgeBase],
    ) -> bool {
        if outcome.is_err() {
            return false;
        }
        let question = self.session.messages.len() as u64;
        let session = self.session_mut();
        crate::session::knowledge::record(&mut session.groundwork.extra, open, question);
        let start = as_a_new_question_sees_it(&session.state);
        session.commit_run_from(outcome, start)
    }

    /// Asks `question` over the committed history and state, and commits it on success.
    pub async fn ask(
        &mut self,
        agent: &Agent,
        question: &str,
        events: Option<tokio::sync::mpsc::UnboundedSender<CoreEvent>>,
        cancel: CancelToken,
    ) -> Result<AskOutcome, AskError> {
        if question.trim().is_empty() {
            return Err(AskError::EmptyQuestion);
        }
        let input = question_input(&self.session, question, None);
        crate::timing::mark("run: started");
        let outcome = agent.run(input, events, cancel).await;
        crate::timing::mark("run: finished");
        let asked = match &outcome {
            Ok(r) => super::ask::outcome_of(r),
            Err(e) => return Err(AskError::Run(e.to_string())),
        };
        self.commit_question(&outcome, &[]);
        crate::timing::mark("run: committed");
        Ok(asked)
    }

    /// A save of the session as it is now ([`SaveJob::run`] carries it out); none when
    /// the conversation has no file.
    pub fn save_job(&self) -> Option<SaveJob> {
        Some(SaveJob {
            session: self.session.clone(),
            path: self.path.clone()?,
            // The one writer holds the lease already; a file it created is its own.
            shared: !self.writer,
        })
    }

    /// Saves atomically to the session's file (creating its folder), or beside it when
    /// another writer changed it meanwhile (then [`Saved::note`] says where).
    pub fn save(&self) -> anyhow::Result<Saved> {
        match self.save_job() {
            Some(job) => job.run(),
            None => anyhow::bail!("the session has no file to be saved to"),
        }
    }

    /// Why the session is saved somewhere else than the file opened (a JSON session
    /// continues in the SQLite file beside it), one line.
    pub fn continued_note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// Restricts later questions to the documents `labels` names (none: all).
    pub fn set_document_filter(&mut self, labels: &[String]) -> Option<String> {
        apply_document_filter(&mut self.session_mut().state, labels)
    }

    /// Restricts later questions to the documents `labels` names as `NAME: document`
    /// across the open `collections` (none: all).
    pub fn set_collection_filter(&mut self, labels: &[String], collections: &[String]) {
        transcript::apply_collection_filter(&mut self.session_mut().state, labels, collections);
    }

    /// The conversation as Markdown (under `title`) or as JSON.
    pub fn export(&self, format: ExportFormat, title: &str) -> String {
        let t = Transcript::build(&self.session.messages, &self.session.state);
        match format {
            ExportFormat::Markdown => transcript::to_markdown_marked(
                &t,
                title,
                &crate::session::marks::marks(&self.session.groundwork.extra),
                &crate::session::verdicts::verifications(&self.session.groundwork.extra),
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

    #[tokio::test]
    async fn snapshots_never_change_and_the_knowledge_bases_go_with_the_commit() {
        let dir = tempfile::tempdir().unwrap();
        let model = Arc::new(Echo::default());
        let mut c = Conversation::shown(Arc::new(Session::new("echo")), None);
        assert!(c.save_job().is_none(), "no file: nothing to save");
        let shown = c.snapshot();
        let kb = crate::session::knowledge::KnowledgeBase {
            name: None,
            location: "/kb.lancedb".into(),
            ..Default::default()
        };
        let outcome = c
            .start(agent(&model), "first?", None, None, CancelToken::new())
            .outcome()
            .await;
        assert!(c.commit_question(&outcome, std::slice::from_ref(&kb)));
        // What the face was shown stays as it was; the next snapshot has the question.
        assert!(shown.messages.is_empty());
        let now = c.snapshot();
        assert_eq!(now.messages.len(), 2);
        let recorded = crate::session::knowledge::recorded(&now.groundwork.extra);
        assert_eq!(recorded[0].questions, vec![0]);
        // Marks change the session too, never a snapshot handed out.
        c.set_mark(0, Some(("supported".into(), None)));
        assert!(crate::session::marks::marks(&now.groundwork.extra).is_empty());
        assert_eq!(
            crate::session::marks::marks(&c.session().groundwork.extra).len(),
            1
        );
        // A failed question commits nothing, and records no knowledge base.
        let before = c.snapshot();
        assert!(!c.commit_question(&Err(RunError::Cancelled), &[kb]));
        assert!(
            Arc::ptr_eq(&before, &c.snapshot()),
            "nothing was copied or changed"
        );
        // Given a file, it saves there (taking the lease only while saving).
        let path = dir.path().join("s.sqlite");
        c.set_path(path.clone());
        let saved = c.save_job().unwrap().run().unwrap();
        assert_eq!((saved.path, saved.note), (path.clone(), None));
        assert_eq!(&Session::load(&path).unwrap(), c.session());
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
