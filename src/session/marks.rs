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
    extra
        .get(KEY)
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .filter_map(|e| serde_json::from_value::<AnswerMark>(e.clone()).ok())
                .map(|m| (m.question, m))
                .collect()
        })
        .unwrap_or_default()
}

/// Marks `question` (`Some((mark, note))`) or takes its mark back (`None`), keeping every
/// other entry as it is.
pub fn set(extra: &mut Map<String, Value>, question: u64, mark: Option<(String, Option<String>)>) {
    let mut entries: Vec<Value> = extra
        .get(KEY)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    entries.retain(|e| e.get("question").and_then(Value::as_u64) != Some(question));
    if let Some((mark, note)) = mark {
        let entry = AnswerMark {
            question,
            mark,
            note,
        };
        entries.push(serde_json::to_value(entry).expect("a mark serialises"));
        entries.sort_by_key(|e| e.get("question").and_then(Value::as_u64));
    }
    if entries.is_empty() {
        extra.remove(KEY);
    } else {
        extra.insert(KEY.into(), Value::Array(entries));
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
