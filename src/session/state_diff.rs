//! The state as a list of changes: what turns the state saved before into the state now
//! (objects key by key, arrays that grew by their new items), and applying them. The
//! journal ([`super::journal`]) writes a question's state this way.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One change to the state: the keys leading to a value, and what happens there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateOp(pub Vec<String>, pub Op);

/// What a [`StateOp`] does at its place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// The value there becomes this one (a new key is added last).
    Set(Value),
    /// These items are appended to the array there.
    Push(Vec<Value>),
    /// The key is removed.
    Del,
}

/// The changes that turn `old` into `new`, appended to `ops` (keys under `at`). Objects
/// are compared key by key, an array that only grew gets its new items, anything else
/// that differs is set whole; an object whose keys changed order is set whole, so
/// applying the changes gives `new` exactly, key order included.
pub fn diff_state(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    at: &mut Vec<String>,
    ops: &mut Vec<StateOp>,
) {
    for key in old.keys() {
        if !new.contains_key(key) {
            at.push(key.clone());
            ops.push(StateOp(at.clone(), Op::Del));
            at.pop();
        }
    }
    for (key, value) in new {
        at.push(key.clone());
        match (old.get(key), value) {
            (None, v) => ops.push(StateOp(at.clone(), Op::Set(v.clone()))),
            (Some(o), v) if identical(o, v) => {}
            (Some(Value::Object(o)), Value::Object(n)) if same_order(o, n) => {
                diff_state(o, n, at, ops)
            }
            (Some(Value::Array(o)), Value::Array(n))
                if n.len() > o.len() && o.iter().zip(n).all(|(x, y)| identical(x, y)) =>
            {
                ops.push(StateOp(at.clone(), Op::Push(n[o.len()..].to_vec())))
            }
            (Some(_), v) => ops.push(StateOp(at.clone(), Op::Set(v.clone()))),
        }
        at.pop();
    }
}

/// Equality that also holds objects' key order to account (`Value`'s does not).
fn identical(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|((ka, va), (kb, vb))| ka == kb && identical(va, vb))
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| identical(x, y))
        }
        _ => a == b,
    }
}

/// Whether deleting `old`'s missing keys and appending `new`'s new ones keeps `new`'s
/// order: the kept keys in the same order, the new keys all after them.
fn same_order(old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
    let mut kept = old.keys().filter(|k| new.contains_key(*k));
    let mut seen_new = false;
    for key in new.keys() {
        if old.contains_key(key) {
            if seen_new || kept.next() != Some(key) {
                return false;
            }
        } else {
            seen_new = true;
        }
    }
    true
}

/// Applies changes made by [`diff_state`].
pub fn apply_state(state: &mut Map<String, Value>, ops: Vec<StateOp>) -> Result<(), String> {
    for StateOp(at, op) in ops {
        apply_op(state, &at, op)?;
    }
    Ok(())
}

/// [`apply_state`] of changes that are kept: only the values they set or push are
/// copied, not their places.
pub fn apply_state_ref(state: &mut Map<String, Value>, ops: &[StateOp]) -> Result<(), String> {
    for StateOp(at, op) in ops {
        apply_op(state, at, op.clone())?;
    }
    Ok(())
}

fn apply_op(state: &mut Map<String, Value>, at: &[String], op: Op) -> Result<(), String> {
    let Some((last, parents)) = at.split_last() else {
        return Err("a state change without a key".into());
    };
    let mut map = &mut *state;
    for key in parents {
        map = match map.get_mut(key) {
            Some(Value::Object(m)) => m,
            _ => return Err(format!("the state has no object at {}", parents.join("."))),
        };
    }
    match op {
        Op::Set(v) => {
            map.insert(last.clone(), v);
        }
        Op::Del => {
            map.shift_remove(last);
        }
        Op::Push(items) => match map.get_mut(last) {
            Some(Value::Array(a)) => a.extend(items),
            _ => return Err(format!("the state has no array at {}", at.join("."))),
        },
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn roundtrip(old: Value, new: Value) -> Vec<StateOp> {
        let (old, new) = (map(old), map(new));
        let mut ops = Vec::new();
        diff_state(&old, &new, &mut Vec::new(), &mut ops);
        let mut applied = old.clone();
        apply_state(&mut applied, ops.clone()).unwrap();
        assert_eq!(applied, new);
        assert_eq!(
            serde_json::to_string(&applied).unwrap(),
            serde_json::to_string(&new).unwrap(),
            "key order"
        );
        ops
    }

    #[test]
    fn state_changes_are_only_what_changed_and_apply_exactly() {
        let old = json!({"rag": {"citation_index": {"a": {"content": "x"}}, "citations": ["a"],
            "evidence": {"question": 1, "occurrences": {"a": {"cited": [1]}}}, "filter": null}});
        let new = json!({"rag": {"citation_index": {"a": {"content": "x"}, "b": {"content": "y"}},
            "citations": ["a", "b"],
            "evidence": {"question": 2, "occurrences": {"a": {"cited": [1, 2]}}}, "filter": null}});
        let ops = roundtrip(old, new);
        assert_eq!(
            ops,
            vec![
                StateOp(
                    vec!["rag".into(), "citation_index".into(), "b".into()],
                    Op::Set(json!({"content": "y"}))
                ),
                StateOp(
                    vec!["rag".into(), "citations".into()],
                    Op::Push(vec![json!("b")])
                ),
                StateOp(
                    vec!["rag".into(), "evidence".into(), "question".into()],
                    Op::Set(json!(2))
                ),
                StateOp(
                    vec![
                        "rag".into(),
                        "evidence".into(),
                        "occurrences".into(),
                        "a".into(),
                        "cited".into()
                    ],
                    Op::Push(vec![json!(2)])
                ),
            ]
        );
    }

    #[test]
    fn removed_keys_shrunk_arrays_and_reordered_objects() {
        roundtrip(json!({"a": 1, "b": [1, 2, 3]}), json!({"b": [1]}));
        let ops = roundtrip(
            json!({"o": {"x": 1, "y": 2}}),
            json!({"o": {"y": 2, "x": 1}}),
        );
        assert!(matches!(&ops[..], [StateOp(at, Op::Set(_))] if at == &["o"]));
        roundtrip(json!({"o": {"x": 1}}), json!({"o": {"z": 0, "x": 1}}));
        roundtrip(
            json!({"o": 1}),
            json!({"o": {"now": "an object"}, "n": null}),
        );
        roundtrip(json!({}), json!({}));
    }
}
