//! The question set of an experiment: JSONL, one object a line (`question`, or `turns`
//! for one conversation of several questions; optional `id`, `label`, `expect`), or a
//! plain text file with one question a line. Every bad line is refused with its number.

use std::collections::HashSet;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

/// One entry of the set: a question, or several asked as one conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The entry's identity in results and session files (`q<N>` when not given).
    pub id: String,
    /// E.g. `answerable` / `unanswerable`.
    pub label: Option<String>,
    /// Notes for the reviewer, kept as given.
    pub expect: Option<Value>,
    /// The questions, asked in order over one session (one for a plain question).
    pub turns: Vec<String>,
}

impl Entry {
    /// The question as results show it: the first turn.
    pub fn question(&self) -> &str {
        self.turns.first().map_or("", String::as_str)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct QuestionsError {
    pub path: String,
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    id: Option<Value>,
    question: Option<String>,
    turns: Option<Vec<String>>,
    label: Option<String>,
    expect: Option<Value>,
}

/// Reads a question set: JSONL when the file ends in `.jsonl`/`.json` or its first
/// non-blank line starts with `{`, else one question per non-blank line.
pub fn load(path: &Path) -> Result<Vec<Entry>, QuestionsError> {
    let err = |message: String| QuestionsError {
        path: path.display().to_string(),
        message,
    };
    if let Some(kind) = crate::paths::not_a_regular_file(path) {
        return Err(err(format!("it is {kind}, not a file of questions")));
    }
    let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))?;
    // A byte-order mark (editors on Windows write one) is not part of the first line.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let jsonl = matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("jsonl" | "json")
    ) || text
        .lines()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| l.trim_start().starts_with('{'));
    let entries = if jsonl {
        parse_jsonl(text).map_err(err)?
    } else {
        parse_text(text)
    };
    if entries.is_empty() {
        return Err(err("no questions".into()));
    }
    check_ids(&entries).map_err(err)?;
    Ok(entries)
}

/// One question per non-blank line.
pub fn parse_text(text: &str) -> Vec<Entry> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .enumerate()
        .map(|(i, q)| Entry {
            id: format!("q{}", i + 1),
            label: None,
            expect: None,
            turns: vec![q.to_string()],
        })
        .collect()
}

/// One JSON object per non-blank line.
pub fn parse_jsonl(text: &str) -> Result<Vec<Entry>, String> {
    let mut entries = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |m: String| format!("line {}: {m}", n + 1);
        let raw: RawEntry = serde_json::from_str(line).map_err(|e| at(e.to_string()))?;
        let turns = match (raw.question, raw.turns) {
            (Some(q), None) => vec![q],
            (None, Some(t)) => t,
            (Some(_), Some(_)) => return Err(at("give `question` or `turns`, not both".into())),
            (None, None) => return Err(at("no `question` (or `turns`)".into())),
        };
        if turns.is_empty() || turns.iter().any(|t| t.trim().is_empty()) {
            return Err(at("an empty question".into()));
        }
        let id = match raw.id {
            None => format!("q{}", entries.len() + 1),
            Some(Value::String(s)) if !s.trim().is_empty() => s,
            Some(Value::Number(n)) => n.to_string(),
            Some(other) => return Err(at(format!("`id` must be a string or number, not {other}"))),
        };
        entries.push(Entry {
            id,
            label: raw.label.filter(|l| !l.trim().is_empty()),
            expect: raw.expect,
            turns,
        });
    }
    Ok(entries)
}

/// The file name an id or arm name is saved under: unsafe characters become `_`; a name
/// that would be empty (`..`) or longer than 80 bytes is cut and ends in a hash of the id
/// (the results record each question's session path).
pub fn file_name(id: &str) -> String {
    /// Longer names are cut and told apart by a hash (a file name is at most 255 bytes).
    const MAX: usize = 80;
    let plain = plain_file_name(id);
    if !plain.is_empty() && plain.len() <= MAX {
        return plain;
    }
    use sha2::Digest as _;
    let hash = hex::encode(&sha2::Sha256::digest(id.as_bytes())[..4]);
    let stem: String = plain.chars().take(MAX - 9).collect();
    if stem.is_empty() {
        format!("id-{hash}")
    } else {
        format!("{stem}-{hash}")
    }
}

/// `id` with every character a file name should not hold replaced by `_`, leading dots
/// dropped (no hidden files, no `..`).
fn plain_file_name(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_start_matches('.')
        .to_string()
}

fn check_ids(entries: &[Entry]) -> Result<(), String> {
    let mut ids = HashSet::new();
    let mut files = HashSet::new();
    for e in entries {
        if !ids.insert(e.id.as_str()) {
            return Err(format!("the id `{}` is used twice", e.id));
        }
        if !files.insert(file_name(&e.id).to_lowercase()) {
            return Err(format!(
                "the id `{}` gives the same session file name as another id",
                e.id
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_order_mark_is_read_past_and_a_named_pipe_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let bom = dir.path().join("q.jsonl");
        std::fs::write(&bom, "\u{feff}{\"id\": \"a\", \"question\": \"Why?\"}\n").unwrap();
        let e = load(&bom).unwrap();
        assert_eq!((e[0].id.as_str(), e[0].turns[0].as_str()), ("a", "Why?"));
        let plain = dir.path().join("q.txt");
        std::fs::write(&plain, "\u{feff}Why?\nHow?\n").unwrap();
        assert_eq!(load(&plain).unwrap()[0].turns[0], "Why?");

        let fifo = dir.path().join("q.fifo.jsonl");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // Refused at once (reading it would wait for a writer forever).
        let err = load(&fifo).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{}: it is a named pipe, not a file of questions",
                fifo.display()
            )
        );
    }

    #[test]
    fn jsonl_entries_with_defaults_turns_and_refusals() {
        let text = "{\"question\": \"A?\", \"label\": \"answerable\"}\n\n{\"id\": 7, \"turns\": [\"B?\", \"C?\"], \"expect\": \"x\"}\n{\"question\": \"D?\"}\n";
        let e = parse_jsonl(text).unwrap();
        assert_eq!(
            e.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
            ["q1", "7", "q3"]
        );
        assert_eq!(e[0].label.as_deref(), Some("answerable"));
        assert_eq!(e[1].turns, ["B?", "C?"]);
        assert_eq!(e[1].question(), "B?");
        assert_eq!(
            parse_jsonl("{\"question\": \"A?\"}\n{\"questoin\": \"B?\"}").unwrap_err(),
            "line 2: unknown field `questoin`, expected one of `id`, `question`, `turns`, `label`, `expect` at line 1 column 11"
        );
        assert_eq!(
            parse_jsonl("{\"question\": \" \"}").unwrap_err(),
            "line 1: an empty question"
        );
        assert!(parse_jsonl("{\"question\": \"a\", \"turns\": [\"b\"]}").is_err());
        let dup = parse_jsonl(
            "{\"id\": \"a\", \"question\": \"x\"}\n{\"id\": \"a\", \"question\": \"y\"}",
        )
        .unwrap();
        assert_eq!(check_ids(&dup).unwrap_err(), "the id `a` is used twice");
    }

    #[test]
    fn text_lines_and_file_names() {
        let e = parse_text("  First?\n\nSecond?\n");
        assert_eq!(e.len(), 2);
        assert_eq!((e[1].id.as_str(), e[1].question()), ("q2", "Second?"));
        assert_eq!(file_name("a/b c.d"), "a_b_c.d");
        assert_eq!(file_name("../x"), "_x");
        // Nothing left, or too long for a file name: cut, with a hash of the whole id.
        assert!(file_name("..").starts_with("id-"), "{}", file_name(".."));
        assert_eq!(file_name("..").len(), 11);
        assert_ne!(file_name(".."), file_name("..."));
        let long = "q".repeat(300);
        let name = file_name(&long);
        assert_eq!(name.len(), 80);
        assert!(name.starts_with("qqqq"));
        assert_ne!(name, file_name(&format!("{long}x")));
    }
}
