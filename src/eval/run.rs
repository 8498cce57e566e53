//! Running an experiment: every (question, arm) pair not yet recorded runs headless
//! through the host's [`Conversation`] (the engine path of `ask`), each entry in its own
//! session file, at most `jobs` at once. Each result is appended to `results.jsonl` as it
//! comes; a cancelled run (Ctrl-C) records nothing for the questions in flight, and the
//! next run of the same plan continues with what is left.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::engine::cancel::CancelToken;
use crate::host::ask::AskError;
use crate::host::compose::Composer;
use crate::host::conversation::Conversation;
use crate::host::transcript::Transcript;
use crate::session::Session;

use super::experiment::Settings;
use super::questions::{Entry, file_name};
use super::report::{self, Report};
use super::results::{self, FAILED, Journal, ProviderUsage, ResultRecord, TurnResult};

/// One arm, ready to run: its settings and what its agents are composed from.
#[derive(Clone)]
pub struct Arm {
    pub name: String,
    pub settings: Settings,
    pub composer: Composer,
    /// The model name its sessions record.
    pub model_name: String,
    /// The knowledge bases its questions run against, recorded in each session so that
    /// opening it (or replaying a question) finds them again.
    pub knowledge_bases: Vec<crate::session::knowledge::KnowledgeBase>,
}

/// An experiment to run.
pub struct Plan {
    pub entries: Vec<Entry>,
    pub arms: Vec<Arm>,
    /// The experiment's folder.
    pub out: PathBuf,
    /// Questions at once (at least 1).
    pub jobs: usize,
    /// Stop at the first failure.
    pub fail_fast: bool,
    /// Run again pairs whose result is `failed`.
    pub retry_failed: bool,
    /// The judge that checks each answer's cited sentences against the passages they
    /// cite (`--verify`); none: they are not checked.
    pub judge: Option<Arc<dyn crate::engine::chat::ChatModel>>,
}

/// What the face hears while it runs.
#[derive(Debug, Clone)]
pub enum Progress {
    /// Before anything runs, per arm: its questions and how many are already done.
    Arm {
        arm: usize,
        total: usize,
        done: usize,
    },
    /// A result was recorded.
    Recorded { arm: usize, status: String },
}

/// How a run ended.
#[derive(Debug)]
pub struct Summary {
    /// Pairs run (and recorded) now.
    pub ran: usize,
    /// Pairs already recorded before.
    pub skipped: usize,
    /// Failed results recorded now.
    pub failed: usize,
    /// Stopped by cancellation (or the first failure with `fail_fast`) before the end.
    pub stopped: bool,
    pub report: Report,
    pub report_markdown: String,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct EvalError(pub String);

fn err(e: impl std::fmt::Display) -> EvalError {
    EvalError(e.to_string())
}

/// The file of `arms.json`: each arm's flags as first run, so a rerun with other flags
/// under the same name is refused rather than mixed into its results.
const ARMS_FILE: &str = "arms.json";

fn check_arms(out: &Path, arms: &[Arm]) -> Result<(), EvalError> {
    let path = out.join(ARMS_FILE);
    let mut known: serde_json::Map<String, serde_json::Value> = match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b)
            .map_err(|e| err(format!("{}: not an arms file: {e}", path.display())))?,
        Err(_) => serde_json::Map::new(),
    };
    for a in arms {
        let flags = a.settings.describe();
        match known.get(&a.name).and_then(|v| v.as_str()) {
            Some(old) if old != flags => {
                return Err(err(format!(
                    "arm '{}' was run in {} with the flags `{old}`, not `{flags}`: give it another name or use another --out",
                    a.name,
                    out.display()
                )));
            }
            Some(_) => {}
            None => {
                known.insert(a.name.clone(), flags.into());
            }
        }
    }
    let text = serde_json::to_string_pretty(&known).map_err(err)?;
    crate::session::write_atomic(&path, text.as_bytes())
        .map_err(|e| err(format!("cannot write {}: {e}", path.display())))
}

/// Runs what is left of `plan`, then writes `report.json` and `report.md`.
pub async fn run(
    plan: Plan,
    progress: &(dyn Fn(Progress) + Send + Sync),
    cancel: CancelToken,
) -> Result<Summary, EvalError> {
    let out = plan.out.clone();
    std::fs::create_dir_all(&out)
        .map_err(|e| err(format!("cannot create {}: {e}", out.display())))?;
    // One run per experiment folder at a time: two would both run every question.
    let _lock =
        crate::session::SessionLock::acquire(&out.join("results.jsonl")).map_err(|e| match e {
            crate::session::SessionError::Busy { pid, .. } => err(format!(
                "another eval{} is running in {}: wait for it to end, or use another --out",
                pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
                out.display()
            )),
            other => err(other),
        })?;
    check_arms(&out, &plan.arms)?;
    let (mut journal, records) = Journal::open(&out.join("results.jsonl")).map_err(err)?;
    let mut latest = results::latest(records);
    let mut todo = Vec::new();
    let mut skipped = 0;
    for (ai, arm) in plan.arms.iter().enumerate() {
        let mut done = 0;
        for e in &plan.entries {
            match latest.get(&(arm.name.clone(), e.id.clone())) {
                Some(r) if r.question != e.question() => {
                    return Err(err(format!(
                        "{}: `{}` was asked as \"{}\", the questions file now asks \"{}\": use another --out",
                        out.join("results.jsonl").display(),
                        e.id,
                        r.question,
                        e.question()
                    )));
                }
                Some(r) if !(r.failed() && plan.retry_failed) => done += 1,
                _ => {}
            }
        }
        skipped += done;
        progress(Progress::Arm {
            arm: ai,
            total: plan.entries.len(),
            done,
        });
    }
    // Question-major: the arms advance together, so a stopped run compares evenly.
    for (ei, e) in plan.entries.iter().enumerate() {
        for (ai, arm) in plan.arms.iter().enumerate() {
            let recorded = latest.get(&(arm.name.clone(), e.id.clone()));
            if recorded.is_none_or(|r| r.failed() && plan.retry_failed) {
                todo.push((ei, ai));
            }
        }
    }
    let entries = Arc::new(plan.entries);
    let arms = Arc::new(plan.arms);
    let mut pending = todo.into_iter();
    let mut set = tokio::task::JoinSet::new();
    let (mut ran, mut failed, mut stopped) = (0, 0, false);
    loop {
        while set.len() < plan.jobs.max(1) && !cancel.is_cancelled() {
            let Some((ei, ai)) = pending.next() else {
                break;
            };
            let (entries, arms, out, cancel, judge) = (
                entries.clone(),
                arms.clone(),
                out.clone(),
                cancel.clone(),
                plan.judge.clone(),
            );
            set.spawn(async move {
                let record =
                    run_entry(&arms[ai], &entries[ei], &out, judge.as_deref(), cancel).await;
                (ai, record)
            });
        }
        let Some(joined) = set.join_next().await else {
            break;
        };
        let (ai, record) = joined.map_err(err)?;
        let Some(record) = record else {
            continue;
        };
        journal.append(&record).map_err(err)?;
        ran += 1;
        if record.failed() {
            failed += 1;
            if plan.fail_fast {
                cancel.cancel();
            }
        }
        progress(Progress::Recorded {
            arm: ai,
            status: record.status.clone(),
        });
        latest.insert((record.arm.clone(), record.id.clone()), record);
    }
    if cancel.is_cancelled() {
        stopped = pending.next().is_some()
            || arms.iter().any(|a| {
                entries
                    .iter()
                    .any(|e| !latest.contains_key(&(a.name.clone(), e.id.clone())))
            });
    }
    let reviews = results::load_reviews(&out.join("reviews.jsonl")).map_err(err)?;
    let names: Vec<(String, String)> = arms
        .iter()
        .map(|a| (a.name.clone(), a.settings.describe()))
        .collect();
    let report = report::build(&entries, &names, &latest, &reviews);
    let report_markdown = report::write(&out, &report)?;
    Ok(Summary {
        ran,
        skipped,
        failed,
        stopped,
        report,
        report_markdown,
    })
}

/// The session file of an entry in an arm, relative to the experiment's folder.
pub fn session_path(arm: &str, id: &str) -> PathBuf {
    Path::new("sessions")
        .join(file_name(arm))
        .join(format!("{}.json", file_name(id)))
}

/// Runs one entry of one arm; `None` when it was cancelled (nothing is recorded).
async fn run_entry(
    arm: &Arm,
    entry: &Entry,
    out: &Path,
    judge: Option<&dyn crate::engine::chat::ChatModel>,
    cancel: CancelToken,
) -> Option<ResultRecord> {
    let relative = session_path(&arm.name, &entry.id);
    let path = out.join(&relative);
    // What an interrupted earlier attempt left is not a result: start over.
    for stale in [path.clone(), crate::session::journal_path(&path)] {
        let _ = std::fs::remove_file(stale);
    }
    let mut record = ResultRecord {
        arm: arm.name.clone(),
        id: entry.id.clone(),
        label: entry.label.clone(),
        question: entry.question().to_string(),
        status: FAILED.into(),
        error: None,
        redirected: false,
        violation: false,
        cut_off: false,
        cited: Vec::new(),
        searches: 0,
        executions: 0,
        requests: 0,
        raw_tokens: 0,
        sent_tokens: 0,
        usage: ProviderUsage::default(),
        latency_ms: 0,
        answer: String::new(),
        expect: entry.expect.clone(),
        session: relative.display().to_string(),
        turns: Vec::new(),
        claims: None,
        claims_error: None,
    };
    let started = Instant::now();
    let agent = arm
        .settings
        .options()
        .map_err(|e| e.to_string())
        .and_then(|o| arm.composer.agent(&o).map_err(|e| e.to_string()));
    let agent = match agent {
        Ok(a) => a,
        Err(e) => {
            record.error = Some(e);
            return Some(record);
        }
    };
    let mut conversation = Conversation::new(Session::new(arm.model_name.clone()), path);
    let mut error = None;
    let mut asked = 0;
    for turn in &entry.turns {
        match conversation.ask(&agent, turn, None, cancel.clone()).await {
            Ok(outcome) => {
                asked += 1;
                if let Some(q) = outcome.question {
                    conversation.record_knowledge_bases(&arm.knowledge_bases, q);
                }
                record.requests += outcome.requests.len();
                for r in &outcome.requests {
                    record.raw_tokens += r.raw_tokens.total;
                    record.sent_tokens += r.compacted_tokens.total;
                }
                record.usage.input_tokens += outcome.usage.tokens.input_tokens;
                record.usage.output_tokens += outcome.usage.tokens.output_tokens;
                record.cut_off = outcome.cut_off;
            }
            Err(_) if cancel.is_cancelled() => return None,
            Err(e) => {
                error = Some(match e {
                    AskError::Run(m) | AskError::Agent(m) => m,
                    other => other.to_string(),
                });
                break;
            }
        }
    }
    record.latency_ms = started.elapsed().as_millis() as u64;
    let session = conversation.session();
    let transcript = Transcript::build(&session.messages, &session.state);
    for (turn, row) in transcript.turns.iter().zip(&transcript.ledger) {
        let cited: Vec<String> = row
            .cited
            .iter()
            .map(|c| c.evidence.chunk_id.clone())
            .collect();
        record.redirected |= row.redirected;
        record.violation |= row.violation;
        record.searches += row.searches;
        record.executions += row.executions;
        record.cited.extend(cited.iter().cloned());
        record.status = row.status.as_str().to_string();
        record.answer = turn.answer.clone();
        if entry.turns.len() > 1 {
            record.turns.push(TurnResult {
                question: turn.prompt.clone(),
                status: record.status.clone(),
                redirected: row.redirected,
                violation: row.violation,
                cited,
                answer: turn.answer.clone(),
            });
        }
    }
    if let Some(judge) = judge
        && error.is_none()
        && asked > 0
    {
        match verify(arm, judge, &mut conversation, &cancel).await {
            Ok(counts) => record.claims = Some(counts),
            Err(_) if cancel.is_cancelled() => return None,
            Err(e) => record.claims_error = Some(e),
        }
    }
    // A question whose session could not be saved failed: its evidence cannot be
    // reviewed, and a run again asks it again.
    if asked > 0
        && let Err(e) = conversation.save()
    {
        error.get_or_insert(format!(
            "the session could not be saved: {}",
            crate::errors::render(&e)
        ));
    }
    if let Some(e) = error {
        record.status = FAILED.into();
        record.error = Some(e);
    }
    Some(record)
}

/// Checks the cited sentences of every answer of `conversation` with `judge` against the
/// chunks they cite (read from the arm's knowledge base), keeps each check in the session,
/// and returns the verdicts summed; the first judge failure ends it, in one line.
async fn verify(
    arm: &Arm,
    judge: &dyn crate::engine::chat::ChatModel,
    conversation: &mut Conversation,
    cancel: &CancelToken,
) -> Result<crate::session::verdicts::VerdictCounts, String> {
    let session = conversation.snapshot();
    let mut transcript = Transcript::build(&session.messages, &session.state);
    let stores = arm.composer.stores();
    crate::host::explore::read_passages(&mut transcript, &stores, &session.groundwork.extra).await;
    let mut counts = crate::session::verdicts::VerdictCounts::default();
    for turn in &transcript.turns {
        if crate::host::verify::claims(turn).is_empty() {
            continue;
        }
        let v = crate::host::verify::check_turn(judge, turn, cancel, &|_, _| {})
            .await
            .map_err(|e| format!("the judge failed: {e}"))?;
        counts.merge(&v.counts());
        conversation.set_verification(&v);
    }
    Ok(counts)
}

/// Results per (arm, id), as the report reads them, for a face that shows an experiment.
pub fn load_latest(out: &Path) -> Result<HashMap<(String, String), ResultRecord>, EvalError> {
    let (_, records) = Journal::open(&out.join("results.jsonl")).map_err(err)?;
    Ok(results::latest(records))
}
