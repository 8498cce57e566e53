//! Which knowledge bases a session's questions ran against, kept in the session (under
//! `groundwork.knowledge_bases`, one entry per database with the questions that searched
//! it), so that opening the session later reopens them instead of whatever database is
//! the default then. Sessions recorded by haiku.rag hosts carry none.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The version of each table of a knowledge base, by table name (what
/// `crate::store::versions::TableVersions` holds; the session keeps it as data).
pub type TableVersions = BTreeMap<String, u64>;

/// The key under the session's `groundwork` section.
pub const KEY: &str = "knowledge_bases";

/// One database a session's questions searched.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnowledgeBase {
    /// The collection's name, when several were open side by side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Where it was opened: the location as resolved (`~` expanded, the default made
    /// explicit).
    pub location: String,
    /// The embedder its vectors were made with (`provider:name`, dimension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedder: Option<String>,
    /// The questions (their identities) that ran against it.
    #[serde(default)]
    pub questions: Vec<u64>,
    /// The versions of its tables each question read (LanceDB dataset versions), by
    /// question identity: what pins a question to the knowledge base it saw.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub versions: BTreeMap<u64, TableVersions>,
    /// The versions the open database reads now (not saved: recorded under each question
    /// asked over it).
    #[serde(skip)]
    pub reading: Option<TableVersions>,
}

impl KnowledgeBase {
    /// Whether `location` is a local path that is no longer there (object storage and
    /// LanceDB Cloud URIs are taken as present; opening them says more).
    pub fn is_missing(&self) -> bool {
        !self.location.contains("://") && !std::path::Path::new(&self.location).exists()
    }
}

/// The knowledge bases recorded in a session's `groundwork` extra keys.
pub fn recorded(extra: &Map<String, Value>) -> Vec<KnowledgeBase> {
    extra
        .get(KEY)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// Records that question `question` ran against `open` (every open database).
pub fn record(extra: &mut Map<String, Value>, open: &[KnowledgeBase], question: u64) {
    if open.is_empty() {
        return;
    }
    let mut all = recorded(extra);
    for kb in open {
        let entry = match all
            .iter_mut()
            .find(|e| e.name == kb.name && e.location == kb.location)
        {
            Some(e) => e,
            None => {
                all.push(KnowledgeBase {
                    questions: Vec::new(),
                    versions: BTreeMap::new(),
                    reading: None,
                    ..kb.clone()
                });
                all.last_mut().expect("just pushed")
            }
        };
        entry.embedder = kb.embedder.clone().or(entry.embedder.take());
        if !entry.questions.contains(&question) {
            entry.questions.push(question);
        }
        if let Some(v) = &kb.reading {
            entry.versions.insert(question, v.clone());
        }
    }
    if let Ok(v) = serde_json::to_value(&all) {
        extra.insert(KEY.into(), v);
    }
}

/// Every point the session's questions read: (question identity, database location,
/// the versions of its tables), the latest question first.
pub fn points(extra: &Map<String, Value>) -> Vec<(u64, String, TableVersions)> {
    let mut out: Vec<(u64, String, TableVersions)> = recorded(extra)
        .into_iter()
        .flat_map(|k| {
            k.versions
                .into_iter()
                .map(move |(q, v)| (q, k.location.clone(), v))
        })
        .collect();
    out.sort_by_key(|p| std::cmp::Reverse(p.0));
    out
}

/// The knowledge bases question `question` (its identity) ran against; when none is
/// recorded for it, those of the latest question.
pub fn for_question(extra: &Map<String, Value>, question: u64) -> Vec<KnowledgeBase> {
    let of: Vec<KnowledgeBase> = recorded(extra)
        .into_iter()
        .filter(|k| k.questions.contains(&question))
        .collect();
    if of.is_empty() { latest(extra) } else { of }
}

/// The knowledge bases the session's latest question ran against (what reopening the
/// session opens), in the order recorded.
pub fn latest(extra: &Map<String, Value>) -> Vec<KnowledgeBase> {
    let all = recorded(extra);
    let Some(last) = all.iter().flat_map(|k| k.questions.iter().copied()).max() else {
        return all;
    };
    all.into_iter()
        .filter(|k| k.questions.contains(&last))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kb(name: Option<&str>, location: &str) -> KnowledgeBase {
        KnowledgeBase {
            name: name.map(String::from),
            location: location.into(),
            embedder: Some("openai:e (8)".into()),
            questions: Vec::new(),
            versions: BTreeMap::new(),
            reading: None,
        }
    }

    #[test]
    fn each_question_is_recorded_against_the_databases_it_searched() {
        let mut extra = Map::new();
        assert!(recorded(&extra).is_empty());
        record(&mut extra, &[], 0);
        assert!(extra.is_empty(), "nothing open, nothing written");
        record(&mut extra, &[kb(None, "/a.lancedb")], 0);
        record(&mut extra, &[kb(None, "/a.lancedb")], 4);
        let both = [kb(Some("m"), "/m.lancedb"), kb(Some("p"), "/p.lancedb")];
        record(&mut extra, &both, 8);
        let all = recorded(&extra);
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].questions, [0, 4]);
        assert_eq!(all[1].questions, [8]);
        assert_eq!(
            latest(&extra),
            both.map(|k| KnowledgeBase {
                questions: vec![8],
                ..k
            })
        );
        assert_eq!(
            for_question(&extra, 4),
            [KnowledgeBase {
                questions: vec![0, 4],
                ..kb(None, "/a.lancedb")
            }]
        );
        assert_eq!(for_question(&extra, 99).len(), 2, "unknown: the latest");
        // What each question read is kept under it; the open database's versions are not
        // themselves saved.
        let reading = |n: u64| KnowledgeBase {
            reading: Some(TableVersions::from([("chunks".to_string(), n)])),
            ..kb(None, "/a.lancedb")
        };
        record(&mut extra, &[reading(3)], 12);
        record(&mut extra, &[reading(5)], 16);
        let a = &recorded(&extra)[0];
        assert_eq!(a.versions[&12]["chunks"], 3);
        assert_eq!(a.versions[&16]["chunks"], 5);
        assert!(
            !a.versions.contains_key(&0),
            "recorded before versions were"
        );
        assert_eq!(extra[KEY][0]["versions"]["16"]["chunks"], 5);
        assert!(extra[KEY][0].get("reading").is_none());
        // It travels as JSON under the key, so any reader of the session keeps it.
        assert_eq!(extra[KEY][0]["location"], "/a.lancedb");
    }

    #[test]
    fn a_local_database_that_is_gone_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!kb(None, dir.path().to_str().unwrap()).is_missing());
        assert!(kb(None, "/no/such/place.lancedb").is_missing());
        assert!(!kb(None, "s3://bucket/kb").is_missing());
    }
}
