//! The session file as read and as written whole: reading it key by key (converting
//! version-1 requests), the snapshot form with its identities, and the record of what
//! the file held when this session last read or saved it.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::linear::{self, LinearRequest, StoredRequest, Tables};
use super::{GroundworkMeta, RunTiming, SESSION_FORMAT_VERSION, Session, store};
use crate::engine::messages::ModelMessage;
use chrono::{DateTime, Utc};

/// The [`store::Image`]s of a session, one per file it was read from or saved to;
/// never part of comparisons, and shared by the session's copies (the workbench saves a
/// copy on another thread: the session it keeps then knows what the file holds).
#[derive(Default, Clone)]
pub(super) struct SavedImage(std::sync::Arc<std::sync::Mutex<Vec<store::Image>>>);

impl SavedImage {
    fn images(&self) -> std::sync::MutexGuard<'_, Vec<store::Image>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the image of the file at `path` in place.
    pub(super) fn with<R>(
        &self,
        path: &std::path::Path,
        f: impl FnOnce(Option<&store::Image>) -> R,
    ) -> R {
        f(self
            .images()
            .iter()
            .find(|i| super::disk::same_file(&i.path, path)))
    }

    /// Replaces the image of its file.
    pub(super) fn put(&self, image: store::Image) {
        let mut all = self.images();
        all.retain(|i| !super::disk::same_file(&i.path, &image.path));
        all.push(image);
    }

    /// Only the first `messages` messages (and `requests` requests) are still as saved.
    pub(super) fn lower(&self, messages: usize, requests: usize) {
        for i in self.images().iter_mut() {
            i.messages_clean = i.messages_clean.min(messages);
            i.requests_clean = i.requests_clean.min(requests);
        }
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

/// A session file as read, before version-1 requests are converted. Read key by key
/// (not through `#[serde(flatten)]`, which would buffer the whole history first).
/// Groundwork's section is read as `G`: whole, or as its text (to be read on another
/// thread, [`SessionFile::parse`]).
pub(super) struct SessionFile<G = Option<GroundworkFile>> {
    messages: Vec<ModelMessage>,
    state: Map<String, Value>,
    pub(super) groundwork: G,
    extra: Map<String, Value>,
}

/// A session file of at least this many bytes has Groundwork's section (and the journal
/// beside it) read on a thread of its own while the history is read.
pub(super) const PARALLEL_FROM: usize = 1 << 20;

/// What a section of a newer format than this build reads is refused with, followed by
/// its version ([`newer_format`] finds it in the error).
const NEWER: &str = "the section is of a newer session format: ";

/// The format version of a section refused as newer than this build reads.
pub(super) fn newer_format(e: &serde_json::Error) -> Option<u64> {
    let text = e.to_string();
    let rest = &text[text.find(NEWER)? + NEWER.len()..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[..digits].parse().ok()
}

/// How a session file written by Groundwork goes on from its state to its section.
const SECTION_START: &str = r#"},"groundwork":{"#;

impl SessionFile {
    /// Reads a session file's text. A long one (written by Groundwork: `messages`,
    /// `state`, then `groundwork`) has its section read on a second thread from where its
    /// text seems to start, while this thread reads the history and passes over the
    /// section. The second thread's result is used only when it read exactly the bytes
    /// this one found to be the section; otherwise the section is read here. Errors are
    /// those of reading the whole text in one go.
    pub(super) fn parse(text: &str) -> serde_json::Result<SessionFile> {
        let guess = if text.len() >= PARALLEL_FROM {
            text.rfind(SECTION_START)
                .map(|at| at + SECTION_START.len() - 1)
        } else {
            None
        };
        let Some(guess) = guess else {
            return serde_json::from_str(text);
        };
        let read = std::thread::scope(|scope| {
            let section = std::thread::Builder::new().spawn_scoped(scope, move || {
                let mut values = serde_json::Deserializer::from_str(&text[guess..])
                    .into_iter::<GroundworkFile>();
                let read = values.next();
                crate::timing::mark("session: section parsed");
                read.map(|r| (r, values.byte_offset()))
            });
            let head =
                serde_json::from_str::<SessionFile<Option<&serde_json::value::RawValue>>>(text);
            crate::timing::mark("session: history parsed");
            let section = section.ok().and_then(|s| s.join().ok()).flatten();
            let head = head.ok()?;
            let groundwork = match head.groundwork {
                None => None,
                Some(raw) => {
                    let at = (raw.get().as_ptr() as usize).checked_sub(text.as_ptr() as usize);
                    match section {
                        Some((Ok(g), used)) if at == Some(guess) && used == raw.get().len() => {
                            Some(g)
                        }
                        _ => Some(serde_json::from_str::<GroundworkFile>(raw.get()).ok()?),
                    }
                }
            };
            Some(SessionFile {
                messages: head.messages,
                state: head.state,
                groundwork,
                extra: head.extra,
            })
        });
        match read {
            Some(file) => Ok(file),
            // The error as reading the text in one go reports it (its line and column).
            None => serde_json::from_str(text),
        }
    }
}

impl<'de, G: Deserialize<'de> + Default> Deserialize<'de> for SessionFile<G> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<G>(std::marker::PhantomData<G>);
        impl<'de, G: Deserialize<'de> + Default> serde::de::Visitor<'de> for V<G> {
            type Value = SessionFile<G>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a session object with `messages`")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<SessionFile<G>, A::Error> {
                let mut messages = None;
                let mut state = None;
                let mut groundwork = G::default();
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
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// A section's requests as read: straight in linear form when the section said before
/// them that it is of version 2 or later (Groundwork writes `version` first), else each
/// as whichever form it has.
enum Requests {
    Linear(Vec<LinearRequest>),
    Stored(Vec<StoredRequest>),
}

/// Groundwork's section as read, key by key like [`SessionFile`] (`#[serde(flatten)]`
/// would buffer every request and text of a long session before reading them).
pub(super) struct GroundworkFile {
    model: Option<String>,
    created_at: DateTime<Utc>,
    requests: Requests,
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
                let mut requests = Requests::Linear(Vec::new());
                let mut tables = Tables::default();
                let mut timings = Vec::new();
                let mut scripted_demo = false;
                let mut labels = Map::new();
                let mut extra = Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "model" => model = map.next_value()?,
                        "created_at" => created_at = Some(map.next_value()?),
                        "requests" => {
                            let linear = extra
                                .get("version")
                                .and_then(Value::as_u64)
                                .is_some_and(|v| v >= 2);
                            requests = if linear {
                                Requests::Linear(map.next_value()?)
                            } else {
                                Requests::Stored(map.next_value()?)
                            };
                        }
                        "tables" => tables = map.next_value()?,
                        "timings" => timings = map.next_value()?,
                        "scripted_demo" => scripted_demo = map.next_value()?,
                        "labels" => labels = map.next_value()?,
                        "version" => {
                            let version: Value = map.next_value()?;
                            if let Some(v) = version
                                .as_u64()
                                .filter(|&v| v > u64::from(SESSION_FORMAT_VERSION))
                            {
                                return Err(serde::de::Error::custom(format!("{NEWER}{v}")));
                            }
                            extra.insert(key, version);
                        }
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
        let stored = match g.requests {
            Requests::Linear(requests) => {
                session.groundwork.requests = requests;
                return session;
            }
            Requests::Stored(stored) => stored,
        };
        // Version 1 (full copies) is converted against the history, in order.
        session.groundwork.requests.reserve_exact(stored.len());
        let mut encoder = None;
        for r in stored {
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
                        std::borrow::Cow::Owned(*snap),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::messages::ModelRequest;
    use crate::session::SessionError;

    /// A session file of more than [`PARALLEL_FROM`] bytes, with labels and `extra`
    /// spliced in after its section.
    fn long_text(after_section: &str) -> String {
        let mut s = Session::new("m");
        s.messages
            .push(ModelRequest::user("a".repeat(PARALLEL_FROM)).into());
        s.state.insert("k".into(), Value::from(1));
        s.groundwork.labels.insert("l".into(), Value::from("x"));
        let text = String::from_utf8(s.to_json().unwrap()).unwrap();
        let text = text.trim_end();
        format!("{}{after_section}}}", &text[..text.len() - 1])
    }

    fn read(text: &str) -> Result<Session, String> {
        SessionFile::parse(text)
            .map(Session::from)
            .map_err(|e| e.to_string())
    }

    fn read_in_one_go(text: &str) -> Result<Session, String> {
        serde_json::from_str::<SessionFile>(text)
            .map(Session::from)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_long_file_read_on_two_threads_is_the_file_read_in_one_go() {
        let text = long_text("");
        let read = read(&text).unwrap();
        assert_eq!(read.groundwork.labels["l"], "x");
        assert_eq!(read.state["k"], 1);
        assert_eq!(Ok(read), read_in_one_go(&text));
    }

    #[test]
    fn a_section_look_alike_after_the_section_does_not_mislead_the_reader() {
        // The last `},"groundwork":{` is inside a key another host wrote after the section:
        // the second thread reads the wrong object, and its result is not used.
        let text = long_text(r#","other":{"a":{},"groundwork":{"labels":{"no":1}}}"#);
        let read = read(&text).unwrap();
        assert_eq!(read.groundwork.labels["l"], "x");
        assert_eq!(read.extra["other"]["groundwork"]["labels"]["no"], 1);
        assert_eq!(Ok(read), read_in_one_go(&text));
    }

    #[test]
    fn a_broken_section_is_reported_where_reading_in_one_go_reports_it() {
        let text = long_text("").replace(r#""labels":{"l":"x"}"#, r#""labels":{"l":}"#);
        let err = read(&text).unwrap_err();
        assert_eq!(Err(err.clone()), read_in_one_go(&text));
        assert!(err.contains("line 1"), "{err}");
        // And a history broken before the section.
        let text = long_text("").replacen(r#""kind":"request""#, r#""kind":"nonsense""#, 1);
        assert_eq!(read(&text).unwrap_err(), read_in_one_go(&text).unwrap_err());
    }

    #[test]
    fn a_long_file_without_a_section_reads_as_a_host_file() {
        let text = format!(
            r#"{{"messages":[],"state":{{"s":{{"x":{{}},"groundwork":{{}}}}}},"pad":"{}"}}"#,
            "b".repeat(PARALLEL_FROM)
        );
        // Without a section a session gets fresh metadata, made when it is read.
        let fresh = |mut s: Session| {
            s.groundwork.created_at = DateTime::UNIX_EPOCH;
            s
        };
        let read = fresh(read(&text).unwrap());
        assert_eq!(read.state["s"]["groundwork"], serde_json::json!({}));
        assert_eq!(read, fresh(read_in_one_go(&text).unwrap()));
    }

    /// A file of a newer format than this build reads is refused as that, in one line
    /// naming it, short or long (its section then read on a thread of its own), and
    /// before anything of its section is read.
    #[test]
    fn a_file_of_a_newer_format_is_refused_as_newer_not_as_corrupt() {
        let newer = SESSION_FORMAT_VERSION + 1;
        let short = format!(
            r#"{{"messages":[],"state":{{}},"groundwork":{{"version":{newer},"created_at":"2026-01-01T00:00:00Z","requests":[{{"a form":"not known yet"}}]}}}}"#
        );
        let long = long_text("").replacen(
            &format!(r#""version":{SESSION_FORMAT_VERSION}"#),
            &format!(r#""version":{newer}"#),
            1,
        );
        assert_ne!(long, long_text(""), "the long file names its version");
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [("short.json", short), ("long.json", long)] {
            let path = dir.path().join(name);
            std::fs::write(&path, &text).unwrap();
            let err = Session::load(&path).unwrap_err();
            assert!(
                matches!(err, SessionError::Newer { version, .. } if version == u64::from(newer)),
                "{name}: {err:?}"
            );
            let line = err.to_string();
            assert!(!line.contains('\n') && line.contains(name), "{line}");
            assert!(line.contains("newer Groundwork"), "{line}");
            assert!(matches!(
                Session::from_json(&text, &path),
                Err(SessionError::Newer { .. })
            ));
        }
    }
}
