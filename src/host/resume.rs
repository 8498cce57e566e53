//! A question of a long session asked over its resume file
//! ([`crate::session::resume`]): the run is given the messages from the last question's
//! compaction carrier on ([`crate::engine::agent::Earlier`] stands for the ones before),
//! its save appends one journal record built from that window, and the resume file is
//! written anew with the window moved forward. Whatever the window form cannot do (the
//! journal is due to be folded into a new file, an estimate it cannot record, the files
//! changed meanwhile) reads the session whole and commits the run there
//! ([`rebase`]), as a question over the whole session would have been.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::capabilities::compaction::{compact_history, find_carrier};
use crate::capabilities::state::as_a_new_question_sees_it;
use crate::engine::agent::{Agent, Earlier, RunInput, RunResult};
use crate::engine::cancel::CancelToken;
use crate::engine::chat::estimate_message_tokens;
use crate::engine::messages::{ModelMessage, ModelRequestPart};
use crate::session::resume::{EarlierMessages, Pending, Resume, resume_path};
use crate::session::{Policy, Saved, Session, SessionError, SessionLock};

use super::ask::{AskError, AskOutcome};

/// The earlier messages `earlier` (with wire text `wire`) followed by `next`, rewritten
/// for the `owned` evidence tools as every later request rewrites them (no capsule on
/// any: the carrier of a later question is after them). `None` when the agent's model
/// cannot write wire text.
pub fn extend_earlier(
    agent: &Agent,
    earlier: &EarlierMessages,
    wire: &str,
    next: &[ModelMessage],
    owned: &[String],
) -> Option<(EarlierMessages, String)> {
    let sent = compact_history(next, next.len(), owned, "", &[]);
    let mut out = earlier.clone();
    out.len += next.len();
    out.compacted_for = owned.to_vec();
    out.raw_tokens += next.iter().map(estimate_message_tokens).sum::<usize>();
    out.sent_tokens += sent.iter().map(estimate_message_tokens).sum::<usize>();
    for m in next.iter().filter_map(ModelMessage::as_request) {
        for p in &m.parts {
            if let ModelRequestPart::ToolReturn(r) = p {
                out.returns.insert(r.tool_name.clone());
            }
        }
    }
    let mut text = String::with_capacity(wire.len() + next.len() * 256);
    text.push_str(wire);
    text.push_str(&agent.earlier_wire(&sent)?);
    Some((out, text))
}

/// Where the next question's window starts: the carrier of the question that began at
/// message `question` (the newest evidence return before it), which every request of
/// the questions to come rewrites as the ones before it.
fn next_window_start(messages: &[ModelMessage], question: usize, owned: &[String]) -> usize {
    find_carrier(messages, question, owned).map_or(0, |(at, _)| at)
}

/// Writes the resume file of `session`, just saved to `path` after a question that
/// began at message `question` and was compacted for `owned` (nothing when it was not
/// compacted, the agent cannot take a window, or the session is too short to be
/// journaled; an old resume file is then removed).
pub fn write_after_whole_save(
    agent: &Agent,
    session: &Session,
    path: &Path,
    question: usize,
    owned: Option<&[String]>,
) {
    let journaled = session.journals_at(path);
    let resume = owned
        .filter(|_| journaled && agent.takes_earlier())
        .and_then(|owned| {
            let w = next_window_start(&session.messages, question, owned);
            let (mut earlier, wire) = extend_earlier(
                agent,
                &EarlierMessages::default(),
                "",
                &session.messages[..w],
                owned,
            )?;
            earlier.loaded = agent.loaded_from_history(&session.messages);
            Resume::of_session(session, path, earlier, wire)
        });
    match resume {
        Some(r) => {
            if let Err(e) = r.write() {
                tracing::warn!("cannot write {}: {e}", resume_path(path).display());
            }
        }
        None => {
            let _ = std::fs::remove_file(resume_path(path));
        }
    }
}

/// A windowed run's result as a run over the whole history `committed` would have
/// returned it: the earlier messages put back in its history and in every request (as
/// stored, as sent, and their estimates).
pub fn rebase(mut result: RunResult, committed: &[ModelMessage], owned: &[String]) -> RunResult {
    let Some(earlier) = result.earlier.take() else {
        return result;
    };
    let before = &committed[..earlier.len];
    let sent = compact_history(before, before.len(), owned, "", &[]);
    let raw_est: Vec<usize> = before.iter().map(estimate_message_tokens).collect();
    let sent_est: Vec<usize> = sent.iter().map(estimate_message_tokens).collect();
    let prepend = |front: &[ModelMessage], back: &mut Vec<ModelMessage>| {
        let mut all = Vec::with_capacity(front.len() + back.len());
        all.extend_from_slice(front);
        all.append(back);
        *back = all;
    };
    let prepend_est = |front: &[usize], back: &mut Vec<usize>| {
        let mut all = front.to_vec();
        all.append(back);
        *back = all;
    };
    for snap in &mut result.requests {
        prepend(before, &mut snap.raw);
        prepend(&sent, &mut snap.compacted);
        prepend_est(&raw_est, &mut snap.raw_tokens.per_message);
        prepend_est(&sent_est, &mut snap.compacted_tokens.per_message);
    }
    prepend(before, &mut result.messages);
    result.new_message_index += earlier.len;
    result
}

/// A long session opened through its resume file, as its one writer.
pub struct Resumed {
    resume: Resume,
    owned: Vec<String>,
    _lock: SessionLock,
    /// The question asked and committed, waiting for the save.
    asked: Option<Asked>,
}

struct Asked {
    result: RunResult,
    start: Map<String, Value>,
    pending: Result<Pending, String>,
}

impl Resumed {
    /// The session at `path` through its resume file, when the file continues the
    /// session on disk and was written for questions compacted for `owned`; `lock` is the
    /// session's, held until this is dropped.
    pub fn open(path: &Path, owned: &[String], lock: SessionLock) -> Result<Self, SessionLock> {
        match Resume::read(path).filter(|r| r.earlier.compacted_for == owned) {
            Some(resume) => Ok(Resumed {
                resume,
                owned: owned.to_vec(),
                _lock: lock,
                asked: None,
            }),
            None => Err(lock),
        }
    }

    /// The session file.
    pub fn path(&self) -> &Path {
        self.resume.path()
    }

    /// Asks `question` over the window and commits it for the save (see
    /// [`super::ask::ask`]).
    pub async fn ask(
        &mut self,
        agent: &Agent,
        question: &str,
        events: Option<tokio::sync::mpsc::UnboundedSender<crate::engine::events::CoreEvent>>,
        cancel: CancelToken,
    ) -> Result<AskOutcome, AskError> {
        if question.trim().is_empty() {
            return Err(AskError::EmptyQuestion);
        }
        let r = &self.resume;
        let earlier = Earlier {
            len: r.earlier.len,
            wire: Arc::from(r.wire.as_str()),
            compacted_for: r.earlier.compacted_for.clone(),
            returns: r.earlier.returns.clone(),
            raw_tokens: r.earlier.raw_tokens,
            sent_tokens: r.earlier.sent_tokens,
            loaded: r.earlier.loaded.clone(),
        };
        let input = RunInput::prompt(question)
            .with_history(r.window.clone())
            .with_state(r.state().clone())
            .with_earlier(Arc::new(earlier));
        tracing::debug!(
            earlier = r.earlier.len,
            window = r.window.len(),
            "question asked over the resume file"
        );
        crate::timing::mark("run: started");
        let result = agent
            .run(input, events, cancel)
            .await
            .map_err(|e| AskError::Run(e.to_string()))?;
        crate::timing::mark("run: finished");
        let start = as_a_new_question_sees_it(r.state());
        let pending = r.encode(&result, start.clone());
        crate::timing::mark("run: committed");
        let outcome = super::ask::outcome_of(&result);
        self.asked = Some(Asked {
            result,
            start,
            pending,
        });
        Ok(outcome)
    }

    /// Records that `question` ran against the knowledge bases `open`.
    pub fn record_knowledge_bases(
        &mut self,
        open: &[crate::session::knowledge::KnowledgeBase],
        question: u64,
    ) {
        if let Some(extra) = self.resume.extra_mut() {
            crate::session::knowledge::record(extra, open, question);
        }
    }

    /// Saves the question asked: one journal record, then the resume file moved on; or,
    /// when the window form cannot, the session read whole with the question committed
    /// and saved as [`super::conversation::Conversation::save`] saves it.
    pub fn save(&mut self, agent: &Agent) -> anyhow::Result<Saved> {
        let Some(asked) = self.asked.take() else {
            return Ok(Saved {
                note: None,
                path: self.path().to_path_buf(),
            });
        };
        let question = self.resume.messages_len();
        let mut changed = false;
        let appended = match asked.pending {
            Ok(pending) => match self.resume.append(pending, Policy::default()) {
                Ok(done) => done,
                Err(SessionError::Changed { .. }) => {
                    changed = true;
                    false
                }
                Err(e) => return Err(e.into()),
            },
            Err(why) => {
                tracing::debug!("saving the session whole: {why}");
                false
            }
        };
        crate::timing::mark("save: appended");
        if appended {
            self.move_window(agent, question);
            return Ok(Saved {
                note: None,
                path: self.path().to_path_buf(),
            });
        }
        self.save_whole(agent, asked.result, asked.start, question, changed)
    }

    /// After an append: the next window starts at this question's carrier.
    fn move_window(&mut self, agent: &Agent, question: usize) {
        let r = &self.resume;
        let w = r.earlier.len;
        let at = w + next_window_start(&r.window, question - w, &self.owned);
        let moved = extend_earlier(agent, &r.earlier, &r.wire, &r.window[..at - w], &self.owned)
            .map(|(mut earlier, wire)| {
                earlier.loaded.extend(agent.loaded_from_history(&r.window));
                (earlier, wire)
            });
        let written = match moved {
            Some((earlier, wire)) => self
                .resume
                .advance(earlier, wire)
                .map_err(std::io::Error::other)
                .and_then(|()| self.resume.write()),
            None => Err(std::io::Error::other("the model cannot write wire text")),
        };
        if let Err(e) = written {
            tracing::warn!("cannot write {}: {e}", resume_path(self.path()).display());
            let _ = std::fs::remove_file(resume_path(self.path()));
        }
        crate::timing::mark("save: resume written");
    }

    /// The question committed to the session read whole from its files and saved as a
    /// whole session is; when another program `changed` the files meanwhile, the
    /// conversation (their messages up to this question's, and this question) is kept
    /// beside them, as then.
    fn save_whole(
        &mut self,
        agent: &Agent,
        result: RunResult,
        start: Map<String, Value>,
        question: usize,
        changed: bool,
    ) -> anyhow::Result<Saved> {
        let path = self.path().to_path_buf();
        let _ = std::fs::remove_file(resume_path(&path));
        let mut session = Session::load(&path)?;
        let w = self.resume.earlier.len;
        let holds = session.messages.len() >= question
            && session.messages[w..question] == self.resume.window[..];
        if !holds {
            anyhow::bail!(
                "{} was replaced while the question ran (another program wrote it) and no \
                 longer holds this conversation",
                path.display()
            );
        }
        if session.messages.len() != question {
            let mut prefix = session.messages.clone();
            prefix.truncate(question);
            session.set_messages(prefix);
        }
        let result = rebase(result, &session.messages, &self.owned);
        session.commit_run_from(&Ok(result), start);
        if let Some(kbs) = self
            .resume
            .extra()
            .and_then(|e| e.get(crate::session::knowledge::KEY))
        {
            session
                .groundwork
                .extra
                .insert(crate::session::knowledge::KEY.into(), kbs.clone());
        }
        let saved = if changed {
            session.keep_beside_changed(&path)?
        } else {
            session.save_or_keep(&path, false)?
        };
        if saved.note.is_none() {
            write_after_whole_save(agent, &session, &saved.path, question, Some(&self.owned));
        }
        Ok(saved)
    }
}

/// A session opened for one question by its one writer.
pub enum Opened {
    /// Through its resume file.
    Resumed(Box<Resumed>),
    /// Read whole (or new).
    Whole(Box<super::conversation::Conversation>),
}

/// Opens `path` for a question of `model` as its one writer: through its resume file
/// when `owned` (the evidence tools the question's compaction rewrites for) is given and
/// the file continues the session on disk, else read whole (or new).
pub fn open_for_question(
    path: PathBuf,
    model: &str,
    owned: Option<&[String]>,
) -> Result<Opened, SessionError> {
    let mut lock = SessionLock::acquire(&path)?;
    if let Some(owned) = owned {
        match Resumed::open(&path, owned, lock) {
            Ok(r) => return Ok(Opened::Resumed(Box::new(r))),
            Err(l) => lock = l,
        }
    }
    super::conversation::Conversation::open_with_lock(path, model, lock)
        .map(|c| Opened::Whole(Box::new(c)))
}

impl Resumed {
    /// The session read whole, for a question that cannot run over the window (the
    /// lock kept).
    pub fn into_whole(
        self,
        model: &str,
    ) -> Result<super::conversation::Conversation, SessionError> {
        let path = self.resume.path().to_path_buf();
        super::conversation::Conversation::open_with_lock(path, model, self._lock)
    }
}
