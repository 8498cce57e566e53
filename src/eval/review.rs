//! An experiment folder as a review table: one row per question, one cell per arm with
//! its outcome, the session to open and the reviewer's mark. Marks are appended to
//! `reviews.jsonl` one synced line at a time (the last line of a pair wins), so they
//! survive reopening and the report counts them. This is what the workbench's review
//! table shows; it is data only.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::questions::Entry;
use super::report;
use super::results::{self, Journal, MARKS, Review};
use super::run::EvalError;

/// One arm's outcome for one question.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// `grounded` / `ungrounded` / `missing` / `failed`; `None` when not run yet.
    pub status: Option<String>,
    pub redirected: bool,
    pub violation: bool,
    /// The session file to open.
    pub session: Option<PathBuf>,
    pub mark: Option<String>,
    pub note: Option<String>,
    /// The answer (the last question's, for a conversation).
    pub answer: Option<String>,
}

/// One question across the arms.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: String,
    pub label: Option<String>,
    pub question: String,
    /// What the question set expects of the answer, as written there.
    pub expect: Option<String>,
    /// In the order of [`ReviewTable::arms`].
    pub cells: Vec<Cell>,
}

impl Row {
    /// Whether the arms that ran it disagree on its outcome.
    pub fn differs(&self) -> bool {
        let mut statuses = self.cells.iter().filter_map(|c| c.status.as_deref());
        statuses
            .next()
            .is_some_and(|first| statuses.any(|s| s != first))
    }
}

/// Which rows to show.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Only questions whose outcome differs between arms.
    pub differing: bool,
    /// Only questions with a violation in some arm.
    pub violations: bool,
    /// Only questions with this label.
    pub label: Option<String>,
    /// Only questions with an answer no mark was given yet.
    pub unmarked: bool,
}

impl Filter {
    pub fn keeps(&self, row: &Row) -> bool {
        (!self.differing || row.differs())
            && (!self.violations || row.cells.iter().any(|c| c.violation))
            && (!self.unmarked
                || row
                    .cells
                    .iter()
                    .any(|c| c.status.is_some() && c.mark.is_none()))
            && self
                .label
                .as_ref()
                .is_none_or(|l| row.label.as_ref() == Some(l))
    }
}

/// An experiment folder's questions × arms.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewTable {
    pub dir: PathBuf,
    pub arms: Vec<String>,
    /// In the order the results first name them.
    pub rows: Vec<Row>,
}

/// The reviewed questions of an experiment as a question set (`groundwork eval
/// --from-reviews DIR`): one JSONL line per question marked in any arm, with its id,
/// label and question, and as its `expect` the marks and notes (after what the set
/// expected before, when it did), so that a reviewed failure becomes a case of the next
/// experiment. Returns the lines and how many questions they hold.
pub fn reviewed_set(table: &ReviewTable) -> (String, usize) {
    let mut out = String::new();
    let mut n = 0;
    for row in &table.rows {
        let marks: Vec<String> = table
            .arms
            .iter()
            .zip(&row.cells)
            .filter_map(|(arm, c)| {
                let mark = c
                    .mark
                    .as_deref()
                    .filter(|m| *m != super::results::CLEARED)?;
                Some(match c.note.as_deref().filter(|n| !n.trim().is_empty()) {
                    Some(note) => format!("{arm}: {mark} ({note})"),
                    None => format!("{arm}: {mark}"),
                })
            })
            .collect();
        if marks.is_empty() {
            continue;
        }
        let reviewed = format!("reviewed: {}", marks.join("; "));
        let expect = match &row.expect {
            Some(before) => format!("{before} — {reviewed}"),
            None => reviewed,
        };
        let mut line = serde_json::json!({
            "id": row.id,
            "question": row.question,
            "expect": expect,
        });
        if let Some(label) = &row.label {
            line["label"] = label.clone().into();
        }
        out.push_str(&line.to_string());
        out.push('\n');
        n += 1;
    }
    (out, n)
}

fn err(e: impl std::fmt::Display) -> EvalError {
    EvalError(e.to_string())
}

impl ReviewTable {
    /// Reads `dir`: `arms.json` (the arms, in the order first run), `results.jsonl` and
    /// `reviews.jsonl`.
    pub fn load(dir: &Path) -> Result<ReviewTable, EvalError> {
        let arms_path = dir.join("arms.json");
        let arms: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(
            &std::fs::read(&arms_path)
                .map_err(|e| err(format!("{} is not an experiment ({e})", dir.display())))?,
        )
        .map_err(|e| err(format!("{}: {e}", arms_path.display())))?;
        let arms: Vec<String> = arms.keys().cloned().collect();
        let (_, records) = Journal::open(&dir.join("results.jsonl")).map_err(err)?;
        let reviews = results::load_reviews(&dir.join("reviews.jsonl")).map_err(err)?;
        let mut order: Vec<(String, Option<String>, String, Option<String>)> = Vec::new();
        for r in &records {
            if !order.iter().any(|(id, ..)| id == &r.id) {
                let expect = r.expect.as_ref().map(|v| match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                });
                order.push((r.id.clone(), r.label.clone(), r.question.clone(), expect));
            }
        }
        let latest = results::latest(records);
        let rows = order
            .into_iter()
            .map(|(id, label, question, expect)| {
                let cells = arms
                    .iter()
                    .map(|arm| {
                        let key = (arm.clone(), id.clone());
                        let r = latest.get(&key);
                        let review = reviews.get(&key);
                        Cell {
                            status: r.map(|r| r.status.clone()),
                            redirected: r.is_some_and(|r| r.redirected),
                            violation: r.is_some_and(|r| r.violation),
                            session: r.map(|r| dir.join(&r.session)),
                            mark: review.map(|v| v.mark.clone()),
                            note: review.and_then(|v| v.note.clone()),
                            answer: r.map(|r| r.answer.clone()),
                        }
                    })
                    .collect();
                Row {
                    id,
                    label,
                    question,
                    expect,
                    cells,
                }
            })
            .collect();
        Ok(ReviewTable {
            dir: dir.to_path_buf(),
            arms,
            rows,
        })
    }

    /// The rows `filter` keeps, with their index in [`ReviewTable::rows`].
    pub fn filtered<'a>(&'a self, filter: &'a Filter) -> impl Iterator<Item = (usize, &'a Row)> {
        self.rows
            .iter()
            .enumerate()
            .filter(move |(_, r)| filter.keeps(r))
    }

    /// Shows `review` (saved with [`save_mark`]) in the table.
    pub fn apply(&mut self, review: &Review) {
        let Some(arm) = self.arms.iter().position(|a| a == &review.arm) else {
            return;
        };
        if let Some(row) = self.rows.iter_mut().find(|r| r.id == review.id) {
            let cleared = review.mark == results::CLEARED;
            row.cells[arm].mark = (!cleared).then(|| review.mark.clone());
            row.cells[arm].note = if cleared { None } else { review.note.clone() };
        }
    }

    /// Marks row `row`'s answer in arm `arm` (one of [`MARKS`]), saving it first.
    pub fn mark(
        &mut self,
        row: usize,
        arm: usize,
        mark: &str,
        note: Option<String>,
    ) -> Result<(), EvalError> {
        if !MARKS.contains(&mark) {
            return Err(err(format!("unknown mark `{mark}` ({})", MARKS.join(", "))));
        }
        let (Some(r), Some(name)) = (self.rows.get(row), self.arms.get(arm)) else {
            return Err(err("no such question or arm"));
        };
        if r.cells[arm].status.is_none() {
            return Err(err(format!("`{}` has no answer in arm '{name}' yet", r.id)));
        }
        let review = Review {
            arm: name.clone(),
            id: r.id.clone(),
            mark: mark.to_string(),
            note: note.clone(),
        };
        save_mark(&self.dir, &review)?;
        let cell = &mut self.rows[row].cells[arm];
        cell.mark = Some(mark.to_string());
        cell.note = note;
        Ok(())
    }
}

/// Appends `review` to `dir/reviews.jsonl` as one line, synced before it returns.
pub fn save_mark(dir: &Path, review: &Review) -> Result<(), EvalError> {
    if !MARKS.contains(&review.mark.as_str()) && review.mark != results::CLEARED {
        return Err(err(format!(
            "unknown mark `{}` ({})",
            review.mark,
            MARKS.join(", ")
        )));
    }
    let path = dir.join("reviews.jsonl");
    let mut line = crate::errors::redacted_json(review).map_err(err)?;
    line.push(b'\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(&line).and_then(|()| f.sync_data()))
        .map_err(|e| err(format!("cannot save the mark to {}: {e}", path.display())))
}

/// Writes `report.json` and `report.md` of `dir` again from its files (arms, results and
/// reviews), so that they count the marks given since the run.
pub fn rewrite_report(dir: &Path) -> Result<(), EvalError> {
    let table = ReviewTable::load(dir)?;
    let arms_path = dir.join("arms.json");
    let flags: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&arms_path).map_err(err)?).map_err(err)?;
    let names: Vec<(String, String)> = table
        .arms
        .iter()
        .map(|a| {
            let f = flags.get(a).and_then(|v| v.as_str()).unwrap_or_default();
            (a.clone(), f.to_string())
        })
        .collect();
    let entries: Vec<Entry> = table
        .rows
        .iter()
        .map(|r| Entry {
            id: r.id.clone(),
            label: r.label.clone(),
            expect: None,
            turns: vec![r.question.clone()],
        })
        .collect();
    let (_, records) = Journal::open(&dir.join("results.jsonl")).map_err(err)?;
    let reviews = results::load_reviews(&dir.join("reviews.jsonl")).map_err(err)?;
    let mut report = report::build(&entries, &names, &results::latest(records), &reviews);
    // The folder names only the questions run so far; the last run's report knows the set.
    let before = std::fs::read(dir.join("report.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["questions"].as_u64());
    report.questions = report.questions.max(before.unwrap_or(0) as usize);
    report::write(dir, &report).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::results::tests::record;

    #[test]
    fn a_folder_as_rows_filters_and_marks_that_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("arms.json"),
            "{\"policy\": \"\", \"base\": \"--no-policy\"}",
        )
        .unwrap();
        let (mut j, _) = Journal::open(&dir.path().join("results.jsonl")).unwrap();
        let mut u1 = record("policy", "u1", "ungrounded");
        u1.label = Some("unanswerable".into());
        u1.session = "sessions/policy/u1.json".into();
        j.append(&u1).unwrap();
        let mut b = record("base", "u1", "missing");
        b.violation = true;
        j.append(&b).unwrap();
        j.append(&record("base", "a1", "grounded")).unwrap();
        let mut t = ReviewTable::load(dir.path()).unwrap();
        assert_eq!(t.arms, ["policy", "base"]);
        assert_eq!(
            t.rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["u1", "a1"]
        );
        assert_eq!(
            t.rows[0].cells[0].session,
            Some(dir.path().join("sessions/policy/u1.json"))
        );
        assert_eq!(t.rows[1].cells[0].status, None, "a1 not run by policy yet");
        assert!(t.rows[0].differs() && !t.rows[1].differs());
        let only = |f: Filter| t.filtered(&f).map(|(i, _)| i).collect::<Vec<_>>();
        assert_eq!(
            only(Filter {
                differing: true,
                ..Default::default()
            }),
            [0]
        );
        assert_eq!(
            only(Filter {
                violations: true,
                ..Default::default()
            }),
            [0]
        );
        assert_eq!(
            only(Filter {
                label: Some("unanswerable".into()),
                ..Default::default()
            }),
            [0]
        );
        assert_eq!(only(Filter::default()), [0, 1]);

        t.mark(0, 1, "invented", Some("no such page".into()))
            .unwrap();
        t.mark(0, 1, "wrong", None).unwrap();
        assert!(t.mark(0, 1, "meh", None).is_err());
        assert!(
            t.mark(1, 0, "supported", None)
                .unwrap_err()
                .0
                .contains("no answer")
        );
        let again = ReviewTable::load(dir.path()).unwrap();
        assert_eq!(again.rows[0].cells[1].mark.as_deref(), Some("wrong"));
        assert_eq!(again, t);
        assert!(
            ReviewTable::load(&dir.path().join("none"))
                .unwrap_err()
                .0
                .contains("is not an experiment")
        );
    }
}
