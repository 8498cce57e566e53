//! A reviewer's marks on the answers of an ordinary session, kept in the session (under
//! `groundwork.reviews`: one entry per marked question, with its mark and an optional
//! note), so they travel with the file a reviewer receives. The marks are the ones
//! experiments use (`supported`, `unsupported`, `invented`, `wrong`); an experiment's own
//! marks stay in its `reviews.jsonl`, beside sessions it never writes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The key under the session's `groundwork` section.
pub const KEY: &str = "reviews";

/// One marked answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerMark {
    /// The question's identity (its message index).
    pub question: u64,
    pub mark: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The marks a session holds, by question. Entries that do not read as marks are left in
/// the file untouched and not shown.
pub fn marks(extra: &Map<String, Value>) -> BTreeMap<u64, AnswerMark> {
    by_question(extra, KEY, |m: &AnswerMark| m.question)
}

/// Marks `question` (`Some((mark, note))`) or takes its mark back (`None`), keeping every
/// other entry as it is.
pub fn set(extra: &mut Map<String, Value>, question: u64, mark: Option<(String, Option<String>)>) {
    let entry = mark.map(|(mark, note)| AnswerMark {
        question,
        mark,
        note,
    });
    put(extra, KEY, question, entry.as_ref());
}

/// The entries of the list under `key` that read as `T`, by their question (what a
/// reviewer adds to a session: marks, claim checks). The others are not shown.
pub(crate) fn by_question<T: serde::de::DeserializeOwned>(
    extra: &Map<String, Value>,
    key: &str,
    question: impl Fn(&T) -> u64,
) -> BTreeMap<u64, T> {
    extra
        .get(key)
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .filter_map(|e| serde_json::from_value::<T>(e.clone()).ok())
                .map(|t| (question(&t), t))
                .collect()
        })
        .unwrap_or_default()
}

/// Puts `entry` as the one of `question` in the list under `key` (none: takes it out),
/// keeping every other entry as it is, in question order; an empty list leaves no key.
pub(crate) fn put<T: Serialize>(
    extra: &mut Map<String, Value>,
    key: &str,
    question: u64,
    entry: Option<&T>,
) {
    let mut entries: Vec<Value> = extra
        .get(key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    entries.retain(|e| e.get("question").and_then(Value::as_u64) != Some(question));
    if let Some(entry) = entry {
        entries.push(serde_json::to_value(entry).expect("a review entry serialises"));
        entries.sort_by_key(|e| e.get("question").and_then(Value::as_u64));
    }
    if entries.is_empty() {
        extra.remove(key);
    } else {
        extra.insert(key.into(), Value::Array(entries));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_set_replaced_and_taken_back_per_question() {
        let mut extra = Map::new();
        set(&mut extra, 4, Some(("supported".into(), None)));
        set(
            &mut extra,
            0,
            Some(("invented".into(), Some("no such painter".into()))),
        );
        set(
            &mut extra,
            4,
            Some(("wrong".into(), Some("p. 9 says otherwise".into()))),
        );
        assert_eq!(
            serde_json::to_string(&extra[KEY]).unwrap(),
            r#"[{"question":0,"mark":"invented","note":"no such painter"},{"question":4,"mark":"wrong","note":"p. 9 says otherwise"}]"#
        );
        let m = marks(&extra);
        assert_eq!(m[&4].mark, "wrong");
        assert_eq!(m[&0].note.as_deref(), Some("no such painter"));
        set(&mut extra, 0, None);
        set(&mut extra, 4, None);
        assert!(!extra.contains_key(KEY), "nothing left, no key");
        // Something else under the key is kept, not shown.
        extra.insert(
            KEY.into(),
            serde_json::json!([{"question": 2, "mark": "supported"}, "odd"]),
        );
        assert_eq!(marks(&extra).len(), 1);
        set(&mut extra, 2, None);
        assert_eq!(extra[KEY], serde_json::json!(["odd"]));
    }
}
