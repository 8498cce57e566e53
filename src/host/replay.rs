//! Counterfactual replay: one question of a session run again from the committed history
//! and state it started from ([`crate::session::Session::question_start`]), through the
//! same engine path as every question ([`super::conversation::start_question`]), with
//! another agent (compaction, policy, capabilities or model changed), and the two runs
//! compared: outcome, requests, tokens, latency, answer, and a line diff of what was sent.
//!
//! The original session is only read. The replay lives in a scratch session (the
//! original's prefix, with its earlier requests and timings, plus the replayed question)
//! that [`save_beside`] writes to a new file next to the original, or that is dropped.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::engine::agent::{Agent, RunError, RunResult};
use crate::engine::cancel::CancelToken;
use crate::engine::events::{EventSink, RequestSnapshot};
use crate::engine::messages::{ModelMessage, ModelRequestPart, UserContentValue};
use crate::session::Session;

use super::conversation::{Question, start_question};
use super::inspect::part_texts;
use super::transcript::Transcript;

/// Why a question cannot be replayed (one line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ReplayError(pub String);

fn fail(e: impl std::fmt::Display) -> ReplayError {
    ReplayError(e.to_string())
}

/// One run of the question, as the comparison shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunFigures {
    /// `grounded`, `ungrounded` or `missing`, classified as `eval` classifies a result.
    pub outcome: String,
    /// The citation policy redirected the answer.
    pub redirected: bool,
    /// The policy recorded a violation.
    pub violation: bool,
    /// Model requests.
    pub requests: usize,
    /// Estimated tokens of the stored history, summed over the requests.
    pub raw_tokens: usize,
    /// Estimated tokens of what was sent, summed over the requests.
    pub sent_tokens: usize,
    /// What the provider reported, summed (0 when it reported nothing).
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub latency_ms: u64,
    pub answer: String,
}

/// The two runs of a question side by side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// 1-based question number.
    pub question: usize,
    pub prompt: String,
    /// What was changed (the arm's flags).
    pub changes: String,
    pub original: RunFigures,
    pub replay: RunFigures,
    /// A unified line diff of everything sent, request by request (original → replay);
    /// empty when both sent the same.
    pub diff: String,
    /// Which knowledge base the replay searched, when the face says (`as question 2 read
    /// it (chunks 7, …)`, `as it is now`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub knowledge_base: Option<String>,
}

/// A question ready to be run again.
pub struct Prepared {
    /// 1-based question number.
    pub question: usize,
    prompt: UserContentValue,
    /// The session as it was committed before the question: its history and state, the
    /// requests and timings of the earlier questions.
    prefix: Session,
    original: RunFigures,
    original_sent: String,
}

/// A finished replay: the comparison and the scratch session holding it.
pub struct Replayed {
    pub comparison: Comparison,
    /// The original's prefix plus the replayed question (never the original file).
    pub session: Session,
}

/// The user prompt of the request at `m`.
fn prompt_of(m: &ModelMessage) -> Option<UserContentValue> {
    m.as_request()?.parts.iter().find_map(|p| match p {
        ModelRequestPart::UserPrompt(u) => Some(u.content.clone()),
        _ => None,
    })
}

/// What a run sent, request by request, as text: the instructions (in full when they
/// differ from the request before's), the tools and every part of every message sent
/// (no timestamps, so equal requests read equal).
pub fn sent_text(requests: &[RequestSnapshot]) -> String {
    let mut out = String::new();
    let mut previous: Option<&str> = None;
    for r in requests {
        out.push_str(&format!("request {}\n", r.request));
        let tools: Vec<&str> = r.tools.iter().map(|t| t.name.as_str()).collect();
        out.push_str(&format!("tools: {}\n", tools.join(", ")));
        if previous == Some(r.instructions.as_str()) {
            out.push_str("instructions: as in the request before\n");
        } else {
            out.push_str("instructions:\n");
            for line in r.instructions.lines() {
                out.push_str(&format!("  {line}\n"));
            }
        }
        previous = Some(&r.instructions);
        for (i, m) in r.compacted.iter().enumerate() {
            for (kind, text) in part_texts(m) {
                out.push_str(&format!("#{i} {kind}\n"));
                for line in text.lines() {
                    out.push_str(&format!("    {line}\n"));
                }
            }
        }
    }
    out
}

/// The unified diff of what two runs sent (empty when they sent the same).
pub fn sent_diff(original: &str, replay: &str) -> String {
    if original == replay {
        return String::new();
    }
    similar::TextDiff::from_lines(original, replay)
        .unified_diff()
        .context_radius(2)
        .header("original", "replay")
        .to_string()
}

/// The figures of the last question of `messages` + `state` and of its requests.
fn figures(
    messages: &[ModelMessage],
    state: &Map<String, Value>,
    requests: &[RequestSnapshot],
    latency_ms: u64,
) -> RunFigures {
    let t = Transcript::build(messages, state);
    let (answer, row) = (t.turns.last(), t.ledger.last());
    let mut f = RunFigures {
        outcome: row.map_or("missing", |r| r.status.as_str()).to_string(),
        redirected: row.is_some_and(|r| r.redirected),
        violation: row.is_some_and(|r| r.violation),
        requests: requests.len(),
        raw_tokens: 0,
        sent_tokens: 0,
        input_tokens: 0,
        output_tokens: 0,
        latency_ms,
        answer: answer.map(|a| a.answer.clone()).unwrap_or_default(),
    };
    for r in requests {
        f.raw_tokens += r.raw_tokens.total;
        f.sent_tokens += r.compacted_tokens.total;
        if let Some(k) = &r.tokens {
            f.input_tokens += k.provider_prompt.unwrap_or(0);
            f.output_tokens += k.provider_completion.unwrap_or(0);
        }
    }
    f
}

/// Question `question` (1-based, as the conversation numbers them) of `session`, with
/// the committed history and state it started from.
pub fn prepare(session: &Session, question: usize) -> Result<Prepared, ReplayError> {
    let transcript = Transcript::build(&session.messages, &session.state);
    let count = transcript.turns.len();
    let Some(turn) = question
        .checked_sub(1)
        .and_then(|i| transcript.turns.get(i))
    else {
        return Err(fail(format!(
            "the session has {count} question(s); there is no question {question}"
        )));
    };
    let history = turn.question as usize;
    let timings = &session.groundwork.timings;
    let Some(index) = timings
        .iter()
        .position(|t| t.start.as_ref().is_some_and(|s| s.history == history))
    else {
        return Err(fail(format!(
            "question {question} was committed before sessions recorded where each question started; it cannot be replayed"
        )));
    };
    let Some((_, state)) = session.question_start(index) else {
        return Err(fail(format!(
            "the recorded start of question {question} does not apply to the session's state (was the file edited?)"
        )));
    };
    let prompt = session
        .messages
        .get(history)
        .and_then(prompt_of)
        .ok_or_else(|| {
            fail(format!(
                "question {question} has no user prompt to ask again"
            ))
        })?;
    let timing = &timings[index];
    // Where the question ended and what it left: the next question's start.
    let (end, after) = match session.question_start(index + 1) {
        Some((h, s)) => (h, s),
        None => (session.messages.len(), session.state.clone()),
    };
    let end = end.min(session.messages.len()).max(history);
    let earlier: HashSet<&str> = timings[..index].iter().map(|t| t.run_id.as_str()).collect();
    let kept = session
        .groundwork
        .requests
        .iter()
        .take_while(|r| earlier.contains(r.run_id.as_str()))
        .count();
    let original_requests: Vec<RequestSnapshot> = (0..session.request_count())
        .filter(|&i| session.groundwork.requests[i].run_id == timing.run_id)
        .filter_map(|i| session.request(i))
        .collect();
    let original = figures(
        &session.messages[..end],
        &after,
        &original_requests,
        timing.duration_ms,
    );
    let mut prefix = Session::new(session.groundwork.model.clone().unwrap_or_default());
    prefix.groundwork.created_at = session.groundwork.created_at;
    prefix.groundwork.labels = session.groundwork.labels.clone();
    prefix.messages = session.messages[..history].to_vec();
    prefix.groundwork.requests = session.groundwork.requests[..kept].to_vec();
    prefix.groundwork.tables = session.groundwork.tables.clone();
    prefix.groundwork.timings = timings[..index].to_vec();
    prefix.state = state;
    Ok(Prepared {
        question,
        prompt,
        prefix,
        original,
        original_sent: sent_text(&original_requests),
    })
}

impl Prepared {
    /// The question's prompt as text.
    pub fn prompt_text(&self) -> String {
        self.prompt.text()
    }

    /// Starts the question again with `agent`, over the committed history and state it
    /// started from, in a task of its own (see [`start_question`]).
    pub fn start(
        &self,
        agent: Agent,
        run_id: Option<String>,
        events: impl Into<EventSink>,
        cancel: CancelToken,
    ) -> Question {
        start_question(
            agent,
            &self.prefix,
            self.prompt.clone(),
            run_id,
            events,
            cancel,
        )
    }

    /// Compares the replay's outcome with the original run; a failed run is an error.
    pub fn finish(
        self,
        outcome: Result<RunResult, RunError>,
        changes: &str,
    ) -> Result<Replayed, ReplayError> {
        let result = match &outcome {
            Ok(r) => r,
            Err(e) => return Err(fail(format!("the replay failed: {e}"))),
        };
        let replay = figures(
            &result.messages,
            &result.state,
            &result.requests,
            result.duration_ms,
        );
        let diff = sent_diff(&self.original_sent, &sent_text(&result.requests));
        let comparison = Comparison {
            question: self.question,
            prompt: self.prompt.text(),
            changes: changes.trim().to_string(),
            original: self.original,
            replay,
            diff,
            knowledge_base: None,
        };
        // The replay's session is a conversation of its own, committed as every other.
        let mut replayed = super::conversation::Conversation::shown(Arc::new(self.prefix), None);
        replayed.commit_question(&outcome, &[]);
        Ok(Replayed {
            comparison,
            session: replayed.into_session(),
        })
    }
}

/// Runs question `question` of `session` again with `agent` and compares the two runs.
pub async fn replay(
    session: &Session,
    question: usize,
    agent: Agent,
    changes: &str,
    cancel: CancelToken,
) -> Result<Replayed, ReplayError> {
    let prepared = prepare(session, question)?;
    let outcome = prepared.start(agent, None, None, cancel).outcome().await;
    prepared.finish(outcome, changes)
}

/// Points `composer`'s knowledge bases at the versions question `question` (1-based) of
/// `session` read, as the session recorded them, read-only, so that a replay searches
/// what the question searched; returns what it searches, in words (`as question 2 read it
/// (chunks 7, …)`). A database whose versions the session does not record is searched as
/// it is now, and the words say so; versions cleaned up since are an error naming them.
pub async fn pin_to_question(
    composer: &mut super::compose::Composer,
    session: &Session,
    question: usize,
) -> Result<String, ReplayError> {
    let identity = super::transcript::question_starts(&session.messages)
        .get(question.saturating_sub(1))
        .map(|&q| q as u64);
    let extra = &session.groundwork.extra;
    let describe = |v: &crate::session::knowledge::TableVersions| {
        v.iter()
            .map(|(t, n)| format!("{t} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut read = Vec::new();
    let mut now = Vec::new();
    let mut stores: Vec<(Option<String>, &mut std::sync::Arc<crate::store::Store>)> =
        if composer.collections.is_empty() {
            composer.store.iter_mut().map(|s| (None, s)).collect()
        } else {
            composer
                .collections
                .iter_mut()
                .map(|(n, s)| (Some(n.clone()), s))
                .collect()
        };
    for (name, store) in &mut stores {
        let point = identity
            .and_then(|q| super::explore::as_read_point(extra, name.as_deref(), q))
            .filter(|(location, _)| location == store.uri());
        match point {
            Some((_, versions)) => {
                let pinned = store
                    .at_versions(&versions)
                    .await
                    .map_err(|e| fail(e.to_string()))?;
                **store = std::sync::Arc::new(pinned);
                read.push(describe(&versions));
            }
            None => now.push(store.uri().to_string()),
        }
    }
    if !composer.collections.is_empty() {
        composer.store = composer.collections.first().map(|(_, s)| s.clone());
    }
    Ok(match (read.is_empty(), now.is_empty()) {
        (false, true) => format!("as question {question} read it ({})", read.join("; ")),
        (true, _) => format!(
            "as it is now (the session records no versions of {} for this question)",
            now.join(", ")
        ),
        (false, false) => format!(
            "as question {question} read it ({}); {} as it is now (no versions recorded)",
            read.join("; "),
            now.join(", ")
        ),
    })
}

/// The changes as a file-name part: `--no-policy --eager` → `no-policy-eager`.
pub fn changes_slug(changes: &str) -> String {
    let mut slug = String::new();
    for c in changes.chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_end_matches('-');
    let slug: String = slug.chars().take(60).collect();
    if slug.is_empty() { "same".into() } else { slug }
}

/// `S.replay-N-CHANGES.json` beside the session file `S.json`, the first such name not
/// taken (`…-2.json`, `…-3.json` after it).
pub fn beside_path(original: &Path, question: usize, changes: &str) -> PathBuf {
    let stem = original
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session".into());
    let dir = original.parent().unwrap_or(Path::new(""));
    let base = format!("{stem}.replay-{question}-{}", changes_slug(changes));
    let mut n = 1;
    loop {
        let name = if n == 1 {
            format!("{base}.json")
        } else {
            format!("{base}-{n}.json")
        };
        let path = dir.join(name);
        if !path.exists() {
            return path;
        }
        n += 1;
    }
}

/// Saves a replay's session to `path` (atomically, as every session), never over a file.
pub fn save_beside(session: &Session, path: &Path) -> Result<(), ReplayError> {
    if path.exists() {
        return Err(fail(format!(
            "{} exists; the replay is not written over it",
            path.display()
        )));
    }
    session
        .save(path)
        .map_err(|e| fail(format!("cannot save the replay: {e}")))
}

/// The comparison as text: the two runs side by side, the answers, then the diff.
pub fn render(c: &Comparison) -> String {
    let (o, r) = (&c.original, &c.replay);
    let changes = if c.changes.is_empty() {
        "(none)"
    } else {
        &c.changes
    };
    let mut out = format!(
        "question {}: {}\nreplayed with: {changes}\n",
        c.question, c.prompt
    );
    if let Some(kb) = &c.knowledge_base {
        out.push_str(&format!("knowledge base: {kb}\n"));
    }
    out.push('\n');
    let rows: [(&str, String, String); 7] = [
        ("outcome", outcome(o), outcome(r)),
        ("requests", o.requests.to_string(), r.requests.to_string()),
        (
            "tokens raw",
            o.raw_tokens.to_string(),
            r.raw_tokens.to_string(),
        ),
        (
            "tokens sent",
            o.sent_tokens.to_string(),
            r.sent_tokens.to_string(),
        ),
        (
            "provider in",
            o.input_tokens.to_string(),
            r.input_tokens.to_string(),
        ),
        (
            "provider out",
            o.output_tokens.to_string(),
            r.output_tokens.to_string(),
        ),
        (
            "latency",
            format!("{} ms", o.latency_ms),
            format!("{} ms", r.latency_ms),
        ),
    ];
    out.push_str(&format!("{:<13} {:<26} {}\n", "", "original", "replay"));
    for (name, a, b) in rows {
        out.push_str(&format!("{name:<13} {a:<26} {b}\n"));
    }
    out.push_str(&format!(
        "\noriginal answer:\n  {}\nreplay answer:\n  {}\n\n",
        o.answer.replace('\n', "\n  "),
        r.answer.replace('\n', "\n  ")
    ));
    if c.diff.is_empty() {
        out.push_str("what was sent: the same\n");
    } else {
        out.push_str("what was sent (original → replay):\n");
        out.push_str(&c.diff);
    }
    out
}

/// `ungrounded, redirected` and the like.
pub fn outcome(f: &RunFigures) -> String {
    let mut s = f.outcome.clone();
    if f.redirected {
        s.push_str(", redirected");
    }
    if f.violation {
        s.push_str(", violation");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_name_the_file_beside_the_session_without_taking_a_name() {
        assert_eq!(changes_slug("--no-policy --eager"), "no-policy-eager");
        assert_eq!(changes_slug("  "), "same");
        assert_eq!(changes_slug("--model 'a/b c'"), "model-a-b-c");
        let dir = tempfile::tempdir().unwrap();
        let s = dir.path().join("s.json");
        let first = beside_path(&s, 2, "--no-policy");
        assert_eq!(first, dir.path().join("s.replay-2-no-policy.json"));
        std::fs::write(&first, "{}").unwrap();
        assert_eq!(
            beside_path(&s, 2, "--no-policy"),
            dir.path().join("s.replay-2-no-policy-2.json")
        );
        assert!(save_beside(&Session::new("m"), &first).is_err());
    }

    #[test]
    fn a_session_without_the_question_or_its_start_is_refused_in_one_line() {
        let s = Session::new("m");
        let e = prepare(&s, 1).err().unwrap();
        assert_eq!(e.0, "the session has 0 question(s); there is no question 1");
        let mut s = Session::new("m");
        s.messages.push(ModelMessage::from(
            crate::engine::messages::ModelRequest::user("q?"),
        ));
        let e = prepare(&s, 1).err().unwrap();
        assert!(e.0.contains("before sessions recorded"), "{e}");
        assert_eq!(sent_diff("a\n", "a\n"), "");
        assert!(sent_diff("a\nb\n", "a\n").contains("-b"));
    }
}
