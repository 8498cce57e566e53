//! Claims checked against what they cite: a judge model's verdict on each sentence of an
//! answer that carries a citation marker, kept in the session (under
//! `groundwork.verifications`, one entry per checked question; never in haiku.rag's
//! state) with the judge's requests, so a reviewer who receives the file sees what was
//! asked and what came back. [`crate::host::verify`] makes them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The key under the session's `groundwork` section.
pub const KEY: &str = "verifications";

/// What the judge said of one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Supported,
    PartlySupported,
    NotSupported,
    Unclear,
}

impl Verdict {
    pub const ALL: [Verdict; 4] = [
        Verdict::Supported,
        Verdict::PartlySupported,
        Verdict::NotSupported,
        Verdict::Unclear,
    ];

    /// The machine name (`partly_supported`), as stored and as the judge answers.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Supported => "supported",
            Verdict::PartlySupported => "partly_supported",
            Verdict::NotSupported => "not_supported",
            Verdict::Unclear => "unclear",
        }
    }

    /// In words (`partly supported`).
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Supported => "supported",
            Verdict::PartlySupported => "partly supported",
            Verdict::NotSupported => "not supported",
            Verdict::Unclear => "unclear",
        }
    }

    /// One character shown on the claim's marker.
    pub fn glyph(self) -> &'static str {
        match self {
            Verdict::Supported => "✓",
            Verdict::PartlySupported => "½",
            Verdict::NotSupported => "✗",
            Verdict::Unclear => "?",
        }
    }
}

/// One sentence of an answer and the judge's verdict on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimCheck {
    /// The sentence as the answer has it, markers included.
    pub sentence: String,
    /// Its markers' numbers (`[1]`, `[2, 3]`), in order.
    pub markers: Vec<i64>,
    /// The chunks those markers name (a marker naming no source of the answer has none).
    pub chunks: Vec<String>,
    pub verdict: Verdict,
    /// The judge's one-line reason (or why no judge was asked).
    pub reason: String,
    /// The judge request that decided it (index into [`Verification::requests`]); none
    /// when the claim was decided without asking (its markers name no source).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<usize>,
}

/// One request made to the judge, as sent and as answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgeRequest {
    /// The user message (the claim and the passages it cites).
    pub prompt: String,
    /// The judge's reply, verbatim.
    pub reply: String,
    /// Tokens the endpoint reported (prompt, completion), when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<(u64, u64)>,
}

/// The check of one question's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verification {
    /// The question's identity (its message index).
    pub question: u64,
    /// The judge model's name.
    pub judge: String,
    pub at: DateTime<Utc>,
    /// The judge's instructions (the same for every request).
    pub instructions: String,
    /// Cited chunks that could not be read from the knowledge base: the judge was shown
    /// the expanded context the model saw for them instead of the chunk itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from_context: Vec<String>,
    pub claims: Vec<ClaimCheck>,
    pub requests: Vec<JudgeRequest>,
}

impl Verification {
    /// How many claims got each verdict.
    pub fn counts(&self) -> VerdictCounts {
        let mut c = VerdictCounts::default();
        for claim in &self.claims {
            c.add(claim.verdict);
        }
        c
    }
}

/// Claims per verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerdictCounts {
    pub supported: usize,
    pub partly_supported: usize,
    pub not_supported: usize,
    pub unclear: usize,
}

impl VerdictCounts {
    pub fn add(&mut self, v: Verdict) {
        *self.slot(v) += 1;
    }

    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &VerdictCounts) {
        for v in Verdict::ALL {
            *self.slot(v) += other.get(v);
        }
    }

    pub fn get(&self, v: Verdict) -> usize {
        match v {
            Verdict::Supported => self.supported,
            Verdict::PartlySupported => self.partly_supported,
            Verdict::NotSupported => self.not_supported,
            Verdict::Unclear => self.unclear,
        }
    }

    fn slot(&mut self, v: Verdict) -> &mut usize {
        match v {
            Verdict::Supported => &mut self.supported,
            Verdict::PartlySupported => &mut self.partly_supported,
            Verdict::NotSupported => &mut self.not_supported,
            Verdict::Unclear => &mut self.unclear,
        }
    }

    pub fn total(&self) -> usize {
        self.supported + self.partly_supported + self.not_supported + self.unclear
    }

    /// `✓2 ✗1`: a glyph and a count per verdict given.
    pub fn glyphs(&self) -> String {
        Verdict::ALL
            .iter()
            .filter(|&&v| self.get(v) > 0)
            .map(|&v| format!("{}{}", v.glyph(), self.get(v)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// `3 claims: 2 supported · 1 not supported` (verdicts with none left out).
    pub fn summary(&self) -> String {
        let n = self.total();
        let parts: Vec<String> = Verdict::ALL
            .iter()
            .filter(|&&v| self.get(v) > 0)
            .map(|&v| format!("{} {}", self.get(v), v.label()))
            .collect();
        let noun = if n == 1 { "claim" } else { "claims" };
        if parts.is_empty() {
            format!("{n} {noun}")
        } else {
            format!("{n} {noun}: {}", parts.join(" · "))
        }
    }
}

/// The checks a session holds, by question. Entries that do not read as checks are left
/// in the file untouched and not shown.
pub fn verifications(extra: &Map<String, Value>) -> BTreeMap<u64, Verification> {
    super::marks::by_question(extra, KEY, |v: &Verification| v.question)
}

/// Keeps `v` as the check of its question, replacing an earlier one and keeping every
/// other entry as it is.
pub fn set(extra: &mut Map<String, Value>, v: &Verification) {
    super::marks::put(extra, KEY, v.question, Some(v));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(question: u64, verdicts: &[Verdict]) -> Verification {
        Verification {
            question,
            judge: "judge".into(),
            at: DateTime::from_timestamp(0, 0).unwrap(),
            instructions: "check".into(),
            from_context: Vec::new(),
            claims: verdicts
                .iter()
                .map(|&verdict| ClaimCheck {
                    sentence: "It is so [1].".into(),
                    markers: vec![1],
                    chunks: vec!["c1".into()],
                    verdict,
                    reason: "because".into(),
                    request: Some(0),
                })
                .collect(),
            requests: vec![JudgeRequest {
                prompt: "p".into(),
                reply: "r".into(),
                usage: Some((11, 7)),
            }],
        }
    }

    #[test]
    fn checks_are_kept_per_question_replaced_and_counted() {
        let mut extra = Map::new();
        extra.insert(KEY.into(), serde_json::json!(["odd"]));
        set(&mut extra, &check(4, &[Verdict::Supported]));
        set(
            &mut extra,
            &check(0, &[Verdict::NotSupported, Verdict::Unclear]),
        );
        set(
            &mut extra,
            &check(4, &[Verdict::PartlySupported, Verdict::Supported]),
        );
        let all = verifications(&extra);
        assert_eq!(all.keys().copied().collect::<Vec<_>>(), [0, 4]);
        assert_eq!(
            all[&4].counts().summary(),
            "2 claims: 1 supported · 1 partly supported"
        );
        assert_eq!(
            all[&0].counts().summary(),
            "2 claims: 1 not supported · 1 unclear"
        );
        assert_eq!(extra[KEY][0], serde_json::json!("odd"), "kept, not shown");
        assert_eq!(extra[KEY][1]["claims"][0]["verdict"], "not_supported");
        assert_eq!(
            all[&0],
            check(0, &[Verdict::NotSupported, Verdict::Unclear])
        );
    }
}
