//! A question of a session asked over its resume row ([`crate::session::resume`]): the
//! run is given the messages from the last question's compaction carrier on
//! ([`crate::engine::agent::Earlier`] stands for the ones before), its save commits
//! what it added (built from that window), and the resume row is written anew with the
//! window moved forward. Whatever the window form cannot do (an estimate it cannot
//! record, another writer committed meanwhile) reads the session whole and commits the
//! run there ([`rebase`]), as a question over the whole session would have been.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::capabilities::compaction::{compact_history, find_carrier};
use crate::capabilities::state::as_a_new_question_sees_it;
use crate::engine::agent::{Agent, Earlier, RunInput, RunResult};
use crate::engine::cancel::CancelToken;
use crate::engine::chat::estimate_message_tokens;
use crate::engine::messages::{ModelMessage, ModelRequestPart};
use crate::session::resume::{EarlierMessages, Pending, Resume};
use crate::session::store::Lease;
use crate::session::{Saved, Session, SessionError};

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

/// Writes the resume row of `session`, just saved to `path` after a question that
/// began at message `question` and was compacted for `owned` (nothing when it was not
/// compacted, the agent cannot take a window, or the session is not a database; an old
/// row then names an older commit and is not used).
pub fn write_after_whole_save(
    agent: &Agent,
    session: &Session,
    path: &Path,
    question: usize,
    owned: Option<&[String]>,
) {
    let database = !crate::session::is_json_path(path);
    let resume = owned
        .filter(|_| database && agent.takes_earlier())
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
    if let Some(mut r) = resume
        && let Err(e) = r.write()
    {
        tracing::warn!("cannot write the resume row of {}: {e}", path.display());
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

/// A session opened through its resume row, as its one writer.
pub struct Resumed {
    resume: Resume,
    owned: Vec<String>,
    lease: Option<Lease>,
    /// The question asked and committed, waiting for the save.
    asked: Option<Asked>,
}

struct Asked {
    result: RunResult,
    start: Map<String, Value>,
    pending: Result<Pending, String>,
}

impl Resumed {
    /// The session at `path` through its resume row, when the row continues the file's
    /// last commit and was written for questions compacted for `owned`; `lease` is the
    /// session's, held until this is dropped.
    pub fn open(
        path: &Path,
        owned: &[String],
        lease: Option<Lease>,
    ) -> Result<Self, Option<Lease>> {
        match Resume::read(path).filter(|r| r.earlier.compacted_for == owned) {
            Some(resume) => Ok(Resumed {
                resume,
                owned: owned.to_vec(),
                lease,
                asked: None,
            }),
            None => Err(lease),
        }
    }

    /// The session file.
    pub fn path(&self) -> &Path {
        self.resume.path()
    }

    /// Asks `question` over the window and commits it for the save (see
    /// [`super::conversation::Conversation::ask`]).
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
            "question asked over the resume row"
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

    /// Saves the question asked: one commit, then the resume row moved on; or,
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
            Ok(pending) => match self.resume.append(pending) {
                Ok(()) => true,
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
        crate::timing::mark("save: committed");
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
                .map_err(|e| e.to_string())
                .and_then(|()| self.resume.write().map_err(|e| e.to_string())),
            None => Err("the model cannot write wire text".to_string()),
        };
        if let Err(e) = written {
            tracing::warn!(
                "cannot write the resume row of {}: {e}",
                self.path().display()
            );
            crate::session::store::drop_resume(self.path());
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

/// A session opened for one question by its one writer: through its resume row, or read
/// whole (or new). `ask` goes through it alone: it asks, records the knowledge bases,
/// commits and saves the question whichever way the session was opened.
pub enum Opened {
    /// Through its resume row.
    Resumed(Box<Resumed>),
    /// Read whole (or new), with where the question asked over it began.
    Whole(Box<super::conversation::Conversation>, usize),
}

impl Opened {
    /// Ready for a question of `agent`: a session opened through its resume row is read
    /// whole when the agent cannot run over a window (a tokenizer that counts every
    /// message).
    pub fn for_agent(self, agent: &Agent, model: &str) -> Result<Opened, SessionError> {
        match self {
            Opened::Resumed(r) if !agent.takes_earlier() => {
                Ok(Opened::Whole(Box::new(r.into_whole(model)?), 0))
            }
            other => Ok(other),
        }
    }

    /// Asks `question` and commits it on success (see [`super::conversation::Conversation::ask`]).
    pub async fn ask(
        &mut self,
        agent: &Agent,
        question: &str,
        events: Option<tokio::sync::mpsc::UnboundedSender<crate::engine::events::CoreEvent>>,
        cancel: CancelToken,
    ) -> Result<AskOutcome, AskError> {
        match self {
            Opened::Resumed(r) => r.ask(agent, question, events, cancel).await,
            Opened::Whole(c, start) => {
                *start = c.session().messages.len();
                c.ask(agent, question, events, cancel).await
            }
        }
    }

    /// Records that `question` ran against the knowledge bases `open`.
    pub fn record_knowledge_bases(
        &mut self,
        open: &[crate::session::knowledge::KnowledgeBase],
        question: u64,
    ) {
        match self {
            Opened::Resumed(r) => r.record_knowledge_bases(open, question),
            Opened::Whole(c, _) => c.record_knowledge_bases(open, question),
        }
    }

    /// Saves the question asked, and the resume row for the next one (questions
    /// compacted for `owned`).
    pub fn save(&mut self, agent: &Agent, owned: Option<&[String]>) -> anyhow::Result<Saved> {
        match self {
            Opened::Resumed(r) => r.save(agent),
            Opened::Whole(c, start) => {
                let saved = c.save()?;
                if saved.note.is_none() {
                    write_after_whole_save(agent, c.session(), &saved.path, *start, owned);
                }
                Ok(saved)
            }
        }
    }

    /// The file the question is saved to.
    pub fn path(&self) -> &Path {
        match self {
            Opened::Resumed(r) => r.path(),
            // A conversation opened for a question always has its file.
            Opened::Whole(c, _) => c.path().unwrap_or_else(|| Path::new("")),
        }
    }

    /// Why the session is saved somewhere else than the file named (a JSON session
    /// continues in the SQLite file beside it).
    pub fn continued_note(&self) -> Option<&str> {
        match self {
            Opened::Resumed(_) => None,
            Opened::Whole(c, _) => c.continued_note(),
        }
    }

    /// Ends it before the process exits (see
    /// [`super::conversation::Conversation::close_for_exit`]).
    pub fn close_for_exit(self) {
        match self {
            Opened::Resumed(r) => drop(r),
            Opened::Whole(c, _) => c.close_for_exit(),
        }
    }
}

/// Opens the session at `path` for a question of `model` as its one writer (where it is
/// read from and saved to: [`crate::session::continue_at`]): through its resume row
/// when `owned` (the evidence tools the question's compaction rewrites for) is given and
/// the row continues the file's last commit, else read whole (or new).
pub fn open_for_question(
    path: PathBuf,
    model: &str,
    owned: Option<&[String]>,
) -> Result<Opened, SessionError> {
    let at = crate::session::continue_at(&path);
    let mut lease = Lease::acquire(&at.write)?;
    if let Some(owned) = owned
        && at.read.as_ref() == Some(&at.write)
    {
        match Resumed::open(&at.write, owned, lease) {
            Ok(r) => return Ok(Opened::Resumed(Box::new(r))),
            Err(l) => lease = l,
        }
    }
    super::conversation::Conversation::open_at(at, model, lease)
        .map(|c| Opened::Whole(Box::new(c), 0))
}

impl Resumed {
    /// The session read whole, for a question that cannot run over the window (the
    /// lease kept).
    pub fn into_whole(
        self,
        model: &str,
    ) -> Result<super::conversation::Conversation, SessionError> {
        let at = crate::session::continue_at(self.resume.path());
        super::conversation::Conversation::open_at(at, model, self.lease)
    }
}
