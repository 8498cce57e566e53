//! `results.jsonl`: one JSON object per (arm, question), appended one line at a time and
//! synced, so a crash loses at most the questions in flight; a line torn by a crash is
//! cut off when the file is next opened. The last line of a pair wins (a failed question
//! run again with `--retry-failed` appends its new result). `reviews.jsonl`: a reviewer's
//! marks, one line per (arm, id), the last line winning.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One question of one arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRecord {
    pub arm: String,
    pub id: String,
    #[serde(default)]
    pub label: Option<String>,
    /// The (first) question.
    pub question: String,
    /// `grounded`, `ungrounded`, `missing` (the ledger's status of the last question of the
    /// entry) or `failed`.
    pub status: String,
    /// Why it failed, or why its session could not be saved.
    #[serde(default)]
    pub error: Option<String>,
    /// The citation policy's redirect was sent (in any turn).
    pub redirected: bool,
    /// The policy recorded a violation (in any turn).
    pub violation: bool,
    /// The answer ended on the token limit.
    #[serde(default)]
    pub cut_off: bool,
    /// Cited chunk ids, in citation order.
    pub cited: Vec<String>,
    pub searches: usize,
    pub executions: usize,
    /// Model requests.
    pub requests: usize,
    /// Estimated tokens of the stored history, summed over the requests.
    pub raw_tokens: usize,
    /// Estimated tokens of what was sent (after compaction), summed over the requests.
    pub sent_tokens: usize,
    /// What the endpoint reported.
    pub usage: ProviderUsage,
    pub latency_ms: u64,
    pub answer: String,
    /// What the question set expects of the answer (its `expect`), for the reviewer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<serde_json::Value>,
    /// The session file, relative to the experiment's folder.
    pub session: String,
    /// Each question of a multi-turn entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<TurnResult>,
    /// The judge's verdicts on the cited sentences of the answers (`eval --verify`),
    /// summed over the entry's questions; none when they were not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<crate::session::verdicts::VerdictCounts>,
    /// Why the claims could not be checked (the judge failed); the answer's own result
    /// stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims_error: Option<String>,
}

/// Provider-reported token counts, summed over the requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// One question of a conversation entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnResult {
    pub question: String,
    pub status: String,
    pub redirected: bool,
    pub violation: bool,
    pub cited: Vec<String>,
    pub answer: String,
}

pub const FAILED: &str = "failed";

impl ResultRecord {
    pub fn failed(&self) -> bool {
        self.status == FAILED
    }
}

/// The results file, open for appending.
pub struct Journal {
    file: std::fs::File,
    path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ResultsError {
    pub path: String,
    pub message: String,
}

impl Journal {
    /// Opens (or creates) `path`, returning what it holds; a last line without its
    /// newline (a write a crash interrupted) is cut off.
    pub fn open(path: &Path) -> Result<(Journal, Vec<ResultRecord>), ResultsError> {
        let err = |message: String| ResultsError {
            path: path.display().to_string(),
            message,
        };
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(err(format!("cannot read: {e}"))),
        };
        let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let text = std::str::from_utf8(&bytes[..whole]).map_err(|e| err(e.to_string()))?;
        let mut records = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let r: ResultRecord = serde_json::from_str(line).map_err(|e| {
                err(format!(
                    "line {} is not a result ({e}); remove it or use another --out",
                    n + 1
                ))
            })?;
            records.push(r);
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| err(format!("cannot open for writing: {e}")))?;
        if whole < bytes.len() {
            file.set_len(whole as u64)
                .map_err(|e| err(format!("cannot cut the torn last line: {e}")))?;
        }
        Ok((
            Journal {
                file,
                path: path.to_path_buf(),
            },
            records,
        ))
    }

    /// Appends one result as one line and syncs it to disk.
    pub fn append(&mut self, r: &ResultRecord) -> Result<(), ResultsError> {
        let mut line = crate::errors::redacted_json(r).map_err(|e| ResultsError {
            path: self.path.display().to_string(),
            message: e.to_string(),
        })?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| ResultsError {
                path: self.path.display().to_string(),
                message: format!("cannot append a result: {e}"),
            })
    }
}

/// The last result of each (arm, id).
pub fn latest(records: Vec<ResultRecord>) -> HashMap<(String, String), ResultRecord> {
    records
        .into_iter()
        .map(|r| ((r.arm.clone(), r.id.clone()), r))
        .collect()
}

/// The marks a reviewer gives an answer.
pub const MARKS: [&str; 4] = ["supported", "unsupported", "invented", "wrong"];

/// The `mark` of a line that takes an answer's mark (and note) back: the line stays in
/// `reviews.jsonl` as a record of it, and the answer reads as unmarked.
pub const CLEARED: &str = "cleared";

/// One line of `reviews.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Review {
    pub arm: String,
    pub id: String,
    /// One of [`MARKS`].
    pub mark: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Reads `reviews.jsonl` (none: no reviews): the last mark of each (arm, id).
pub fn load_reviews(path: &Path) -> Result<HashMap<(String, String), Review>, ResultsError> {
    let err = |message: String| ResultsError {
        path: path.display().to_string(),
        message,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(err(format!("cannot read: {e}"))),
    };
    let mut out = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r: Review =
            serde_json::from_str(line).map_err(|e| err(format!("line {}: {e}", n + 1)))?;
        if r.mark == CLEARED {
            out.remove(&(r.arm.clone(), r.id.clone()));
            continue;
        }
        if !MARKS.contains(&r.mark.as_str()) {
            return Err(err(format!(
                "line {}: unknown mark `{}` ({})",
                n + 1,
                r.mark,
                MARKS.join(", ")
            )));
        }
        out.insert((r.arm.clone(), r.id.clone()), r);
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn record(arm: &str, id: &str, status: &str) -> ResultRecord {
        ResultRecord {
            arm: arm.into(),
            id: id.into(),
            label: None,
            question: format!("{id}?"),
            status: status.into(),
            error: None,
            redirected: false,
            violation: false,
            cut_off: false,
            cited: Vec::new(),
            searches: 0,
            executions: 0,
            requests: 1,
            raw_tokens: 10,
            sent_tokens: 8,
            usage: ProviderUsage::default(),
            latency_ms: 5,
            answer: "a".into(),
            expect: None,
            session: String::new(),
            turns: Vec::new(),
            claims: None,
            claims_error: None,
        }
    }

    #[test]
    fn appended_results_survive_and_a_torn_line_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let (mut j, none) = Journal::open(&path).unwrap();
        assert!(none.is_empty());
        j.append(&record("a", "q1", "grounded")).unwrap();
        j.append(&record("a", "q2", "failed")).unwrap();
        drop(j);
        // A crash in the middle of the third line.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"arm\": \"a\", \"id\": \"q").unwrap();
        drop(f);
        let (mut j, back) = Journal::open(&path).unwrap();
        assert_eq!(back.len(), 2);
        j.append(&record("a", "q2", "missing")).unwrap();
        let (_, back) = Journal::open(&path).unwrap();
        assert_eq!(back.len(), 3);
        let latest = latest(back);
        assert_eq!(latest[&("a".into(), "q2".into())].status, "missing");
        std::fs::write(&path, "{}\n").unwrap();
        let e = Journal::open(&path).err().unwrap().to_string();
        assert!(e.contains("line 1 is not a result"), "{e}");
    }

    #[test]
    fn reviews_last_mark_wins_and_unknown_marks_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reviews.jsonl");
        assert!(load_reviews(&path).unwrap().is_empty());
        std::fs::write(
            &path,
            "{\"arm\":\"a\",\"id\":\"q1\",\"mark\":\"supported\"}\n{\"arm\":\"a\",\"id\":\"q1\",\"mark\":\"invented\",\"note\":\"no such page\"}\n",
        )
        .unwrap();
        let r = load_reviews(&path).unwrap();
        assert_eq!(r[&("a".into(), "q1".into())].mark, "invented");
        std::fs::write(&path, "{\"arm\":\"a\",\"id\":\"q1\",\"mark\":\"meh\"}\n").unwrap();
        let e = load_reviews(&path).unwrap_err().to_string();
        assert!(e.contains("line 1: unknown mark `meh`"), "{e}");
    }
}
