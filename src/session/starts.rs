//! What each committed question started from: the length of the history it was given
//! and the state it was given, so that a question can be run again from exactly there
//! (a counterfactual replay). Each run's timing records its start ([`RunStart`]): the
//! state as changes ([`diff_state`]) to the state the question before it started from,
//! so what a session stores per question is what that question changed, and rebuilding
//! the start of question N walks the changes once. The host records the state as the
//! run saw it ([`crate::capabilities::state::as_a_new_question_sees_it`]: the answered
//! question's searches and citations, which every run clears first, left out), so a
//! question costs the file what it added to the lasting record. A timing written before
//! starts were recorded has none; the next recorded one is then changed from `{}`.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Session;
use super::state_diff::{StateOp, apply_state_ref, diff_state};

/// Where a committed run started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStart {
    /// Messages of the committed history the run was given.
    pub history: usize,
    /// The state it was given, as changes to the state the run before it started from
    /// (to the empty state when that one recorded no start, or for the first run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub state: Vec<StateOp>,
}

/// The start state of the latest run whose start was rebuilt or recorded (its timing's
/// index), so recording the next start costs one comparison, not a walk of them all.
#[derive(Default)]
pub(super) struct StartCache(Mutex<Option<(usize, Map<String, Value>)>>);

impl StartCache {
    fn get(&self, index: usize) -> Option<Map<String, Value>> {
        let guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        guard
            .as_ref()
            .filter(|(i, _)| *i == index)
            .map(|(_, s)| s.clone())
    }

    fn set(&self, index: usize, state: Map<String, Value>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((index, state));
    }
}

impl Clone for StartCache {
    fn clone(&self) -> Self {
        let guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        StartCache(Mutex::new(guard.clone()))
    }
}

impl PartialEq for StartCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for StartCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StartCache")
    }
}

impl Session {
    /// The start of a run over the committed history as it is now and the state
    /// `state` (the committed state, or as the run saw it); call it before committing.
    pub fn run_start(&self, state: Map<String, Value>) -> RunStart {
        let n = self.groundwork.timings.len();
        let before = match n.checked_sub(1) {
            Some(last) => self.start_state(last).unwrap_or_default(),
            None => Map::new(),
        };
        let mut ops = Vec::new();
        diff_state(&before, &state, &mut Vec::new(), &mut ops);
        self.starts.set(n, state);
        RunStart {
            history: self.messages.len(),
            state: ops,
        }
    }

    /// The history length and state run `index` (0-based, in `groundwork.timings`)
    /// started from; `None` when its start was not recorded (an older session) or its
    /// recorded changes do not apply (the file was edited).
    pub fn question_start(&self, index: usize) -> Option<(usize, Map<String, Value>)> {
        let start = self.groundwork.timings.get(index)?.start.as_ref()?;
        Some((start.history, self.start_state(index)?))
    }

    /// The state run `index` started from, rebuilt from the recorded changes.
    /// The state the latest committed run started from, when its start was recorded.
    pub(crate) fn latest_start(&self) -> Option<Map<String, Value>> {
        self.start_state(self.groundwork.timings.len().checked_sub(1)?)
    }

    fn start_state(&self, index: usize) -> Option<Map<String, Value>> {
        if let Some(s) = self.starts.get(index) {
            return Some(s);
        }
        let timings = self.groundwork.timings.get(..=index)?;
        // The walk begins after the last run without a recorded start.
        let from = timings
            .iter()
            .rposition(|t| t.start.is_none())
            .map_or(0, |i| i + 1);
        if from > index {
            return None;
        }
        let mut state = Map::new();
        for t in &timings[from..] {
            apply_state_ref(&mut state, &t.start.as_ref()?.state).ok()?;
        }
        self.starts.set(index, state.clone());
        Some(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::messages::{ModelMessage, ModelRequest};
    use crate::session::RunTiming;
    use serde_json::json;

    fn commit(s: &mut Session, state: Value) {
        let start = s.run_start(s.state.clone());
        let mut messages = s.messages.clone();
        messages.push(ModelMessage::from(ModelRequest::user("q")));
        s.commit(messages, state.as_object().unwrap().clone(), []);
        s.groundwork.timings.push(RunTiming {
            run_id: format!("r{}", s.groundwork.timings.len()),
            started_at: chrono::Utc::now(),
            duration_ms: 1,
            requests: 1,
            start: Some(start),
        });
    }

    #[test]
    fn each_question_starts_from_the_state_the_one_before_left_and_survives_a_save() {
        let mut s = Session::new("m");
        commit(&mut s, json!({"rag": {"ledger": [1]}}));
        // Changed between questions (a document filter).
        s.state.insert("filter".into(), json!("a"));
        commit(&mut s, json!({"rag": {"ledger": [1, 2]}, "filter": "a"}));
        commit(&mut s, json!({"rag": {"ledger": [1, 2, 3]}, "filter": "a"}));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        s.save(&path).unwrap();
        let loaded = Session::load(&path).unwrap();
        for s in [&s, &loaded] {
            assert_eq!(s.question_start(0), Some((0, Map::new())));
            assert_eq!(
                s.question_start(1).unwrap(),
                (
                    1,
                    json!({"rag": {"ledger": [1]}, "filter": "a"})
                        .as_object()
                        .unwrap()
                        .clone()
                )
            );
            assert_eq!(s.question_start(2).unwrap().0, 2);
            assert_eq!(
                Value::Object(s.question_start(2).unwrap().1),
                json!({"rag": {"ledger": [1, 2]}, "filter": "a"})
            );
            assert_eq!(s.question_start(3), None);
        }
        // A ledger that grew is recorded as its new entries only.
        let ops = &loaded.groundwork.timings[2].start.as_ref().unwrap().state;
        assert_eq!(
            serde_json::to_value(ops).unwrap(),
            json!([[["rag", "ledger"], {"push": [2]}]])
        );
    }

    #[test]
    fn a_run_without_a_recorded_start_cannot_be_rebuilt_and_the_next_starts_afresh() {
        let mut s = Session::new("m");
        commit(&mut s, json!({"a": 1}));
        s.groundwork.timings[0].start = None;
        commit(&mut s, json!({"a": 2}));
        let fresh = Session::from_json(
            &String::from_utf8(s.to_json().unwrap()).unwrap(),
            "x".as_ref(),
        )
        .unwrap();
        assert_eq!(fresh.question_start(0), None);
        assert_eq!(
            Value::Object(fresh.question_start(1).unwrap().1),
            json!({"a": 1})
        );
    }
}
