//! The session file as read and as written whole: reading it key by key (converting
//! version-1 requests), the snapshot form with its identities, and the record of what
//! the file held when this session last read or saved it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::linear::{self, StoredRequest, Tables};
use super::{GroundworkMeta, RunTiming, SESSION_FORMAT_VERSION, Session, journal};
use crate::engine::messages::ModelMessage;
use chrono::{DateTime, Utc};

/// The [`journal::Image`] of a session; never part of comparisons, copied with the
/// session.
#[derive(Default)]
pub(super) struct SavedImage(std::sync::Mutex<Option<journal::Image>>);

impl SavedImage {
    /// Runs `f` on the image in place (it holds a copy of the state: not cloned).
    pub(super) fn with<R>(&self, f: impl FnOnce(Option<&journal::Image>) -> R) -> R {
        f(self.0.lock().unwrap_or_else(|e| e.into_inner()).as_ref())
    }

    pub(super) fn set(&self, image: Option<journal::Image>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = image;
    }

    /// Only the first `messages` messages (and `requests` requests) are still as saved.
    pub(super) fn lower(&self, messages: usize, requests: usize) {
        if let Some(i) = self.0.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            i.messages_clean = i.messages_clean.min(messages);
            i.requests_clean = i.requests_clean.min(requests);
        }
    }
}

impl Clone for SavedImage {
    fn clone(&self) -> Self {
        SavedImage(std::sync::Mutex::new(self.with(|i| i.cloned())))
    }
}

impl PartialEq for SavedImage {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for SavedImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SavedImage")
    }
}

/// A session as written whole: the session with the snapshot's identity (and the one it
/// folded) in `groundwork`.
#[derive(Serialize)]
pub(super) struct SnapshotOut<'a> {
    pub(super) messages: &'a [ModelMessage],
    pub(super) state: &'a Map<String, Value>,
    pub(super) groundwork: MetaOut<'a>,
    #[serde(flatten)]
    pub(super) extra: &'a Map<String, Value>,
}

#[derive(Serialize)]
pub(super) struct MetaOut<'a> {
    #[serde(flatten)]
    pub(super) meta: &'a GroundworkMeta,
    pub(super) snapshot: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) previous_snapshot: Option<&'a str>,
}

/// A session file as read, before version-1 requests are converted. Read key by key
/// (not through `#[serde(flatten)]`, which would buffer the whole history first).
pub(super) struct SessionFile {
    messages: Vec<ModelMessage>,
    state: Map<String, Value>,
    pub(super) groundwork: Option<GroundworkFile>,
    extra: Map<String, Value>,
}

impl<'de> Deserialize<'de> for SessionFile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = SessionFile;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a session object with `messages`")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<SessionFile, A::Error> {
                let mut messages = None;
                let mut state = None;
                let mut groundwork = None;
                let mut extra = Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "messages" => messages = Some(map.next_value()?),
                        "state" => state = Some(map.next_value::<Option<_>>()?.unwrap_or_default()),
                        "groundwork" => groundwork = map.next_value()?,
                        _ => {
                            extra.insert(key, map.next_value()?);
                        }
                    }
                }
                Ok(SessionFile {
                    messages: messages
                        .ok_or_else(|| serde::de::Error::missing_field("messages"))?,
                    state: state.unwrap_or_default(),
                    groundwork,
                    extra,
                })
            }
        }
        d.deserialize_map(V)
    }
}

/// Groundwork's section as read, key by key like [`SessionFile`] (`#[serde(flatten)]`
/// would buffer every request and text of a long session before reading them).
pub(super) struct GroundworkFile {
    model: Option<String>,
    created_at: DateTime<Utc>,
    requests: Vec<StoredRequest>,
    tables: Tables,
    timings: Vec<RunTiming>,
    scripted_demo: bool,
    labels: Map<String, Value>,
    pub(super) extra: Map<String, Value>,
}

impl<'de> Deserialize<'de> for GroundworkFile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = GroundworkFile;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("Groundwork's section of a session")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<GroundworkFile, A::Error> {
                let mut model = None;
                let mut created_at = None;
                let mut requests = Vec::new();
                let mut tables = Tables::default();
                let mut timings = Vec::new();
                let mut scripted_demo = false;
                let mut labels = Map::new();
                let mut extra = Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "model" => model = map.next_value()?,
                        "created_at" => created_at = Some(map.next_value()?),
                        "requests" => requests = map.next_value()?,
                        "tables" => tables = map.next_value()?,
                        "timings" => timings = map.next_value()?,
                        "scripted_demo" => scripted_demo = map.next_value()?,
                        "labels" => labels = map.next_value()?,
                        _ => {
                            extra.insert(key, map.next_value()?);
                        }
                    }
                }
                Ok(GroundworkFile {
                    model,
                    created_at: created_at
                        .ok_or_else(|| serde::de::Error::missing_field("created_at"))?,
                    requests,
                    tables,
                    timings,
                    scripted_demo,
                    labels,
                    extra,
                })
            }
        }
        d.deserialize_map(V)
    }
}

impl From<SessionFile> for Session {
    fn from(f: SessionFile) -> Session {
        let mut session = Session {
            messages: f.messages,
            state: f.state,
            groundwork: GroundworkMeta::default(),
            extra: f.extra,
            saved: SavedImage::default(),
            starts: Default::default(),
        };
        let Some(g) = f.groundwork else {
            return session;
        };
        let mut extra = g.extra;
        extra.remove("version");
        extra.remove("snapshot");
        extra.remove("previous_snapshot");
        session.groundwork = GroundworkMeta {
            version: SESSION_FORMAT_VERSION,
            model: g.model,
            created_at: g.created_at,
            requests: Vec::new(),
            tables: g.tables,
            timings: g.timings,
            scripted_demo: g.scripted_demo,
            labels: g.labels,
            extra,
        };
        // Version 1 (full copies) is converted against the history, in order.
        let mut encoder = None;
        for r in g.requests {
            match r {
                StoredRequest::Linear(l) => {
                    encoder = None;
                    session.groundwork.requests.push(*l);
                }
                StoredRequest::Full(snap) => {
                    let enc = encoder.get_or_insert_with(|| {
                        linear::Encoder::after(&session.groundwork.requests)
                    });
                    let l = enc.encode(
                        &session.groundwork.requests,
                        &snap,
                        &session.messages,
                        &mut session.groundwork.tables,
                    );
                    session.groundwork.requests.push(l);
                }
            }
        }
        session
    }
}
