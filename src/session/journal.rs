//! The journals of sessions saved by earlier Groundwork versions, read only.
//!
//! Before sessions were SQLite files ([`super::store`]), a long session's JSON file (the
//! *snapshot*) had a journal beside it, `NAME.journal`, to which each save appended one
//! line holding what the question changed. Such a pair is still read, and never written,
//! moved or removed: the journal's first line names the snapshot it continues; each
//! record is applied in order; a torn last line (no newline: that save never returned)
//! is left out. A journal left over from a fold (it continues the snapshot the file
//! names as its previous one) holds nothing the file does not. Anything else (a header
//! that does not read, a record that does not, a journal of another version of the
//! file) refuses the session in one line naming the journal, so that no question it
//! holds is silently left out.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::RunTiming;
use super::Session;
use super::linear::{LinearRequest, StoredText};
use super::state_diff::{StateOp, apply_state};
use crate::engine::capability::ToolDef;
use crate::engine::messages::ModelMessage;

/// `NAME.journal` beside the session file `NAME`.
pub fn journal_path(session: &Path) -> PathBuf {
    let mut name = session
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "session.json".into());
    name.push(".journal");
    session.with_file_name(name)
}

/// The journal's first line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Header {
    groundwork_journal: u32,
    /// The identity of the snapshot it continues.
    snapshot: String,
    /// The snapshot's size in bytes.
    bytes: u64,
}

/// A list that grew: the first `keep` items of the `base` items saved before, then `add`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Tail<V> {
    base: usize,
    keep: usize,
    add: V,
}

/// One save's changes.
#[derive(Debug, Deserialize)]
struct RecordIn {
    seq: u64,
    messages: Tail<Vec<ModelMessage>>,
    requests: Tail<Vec<LinearRequest>>,
    instructions: Tail<Vec<String>>,
    tool_sets: Tail<Vec<Vec<ToolDef>>>,
    /// Texts over the one before each (see [`super::linear::Texts`]).
    texts: Tail<Vec<StoredText>>,
    timings: Tail<Vec<RunTiming>>,
    #[serde(default)]
    state: Vec<StateOp>,
    /// `groundwork`'s small fields: model, created_at, scripted_demo, labels, extra.
    meta: Value,
    /// Top-level keys other hosts wrote.
    #[serde(default)]
    extra: Map<String, Value>,
}

/// The identities a snapshot carries in `groundwork`: its own, and the one it folded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SnapshotIds {
    pub(crate) snapshot: Option<String>,
    pub(crate) previous: Option<String>,
}

/// The journal beside a snapshot as read from disk, with its records read up to the
/// first that cannot be (for a long session, on another thread while the snapshot is
/// parsed: see [`Session::load`]).
pub(crate) struct JournalRead {
    /// The journal's length in bytes.
    len: std::io::Result<u64>,
    /// The header and the length of its line, or why it does not read.
    header: Option<Result<(Header, u64), String>>,
    /// Each whole line after the header: its length and what it reads as.
    records: Vec<(u64, serde_json::Result<RecordIn>)>,
}

/// Reads the journal beside `path` (see [`JournalRead`]).
pub(crate) fn read(path: &Path) -> JournalRead {
    let jpath = journal_path(path);
    let bytes = std::fs::read(&jpath);
    let mut header = None;
    let mut records = Vec::new();
    if let Ok(bytes) = &bytes
        && !bytes.is_empty()
    {
        let mut lines = bytes.split_inclusive(|b| *b == b'\n');
        header = lines.next().map(|l| {
            if !l.ends_with(b"\n") {
                return Err("its first line is cut short".to_string());
            }
            serde_json::from_slice::<Header>(l)
                .map(|h| (h, l.len() as u64))
                .map_err(|e| format!("its first line does not read: {e}"))
        });
        if matches!(header, Some(Ok(_))) {
            for line in lines {
                if !line.ends_with(b"\n") {
                    break; // a torn last line: that save never returned
                }
                let record = match std::str::from_utf8(line) {
                    Ok(text) => serde_json::from_str::<RecordIn>(text),
                    Err(_) => serde_json::from_slice::<RecordIn>(line),
                };
                let stop = record.is_err();
                records.push((line.len() as u64, record));
                if stop {
                    break;
                }
            }
        }
    }
    crate::timing::mark("session: journal read");
    JournalRead {
        len: bytes.map(|b| b.len() as u64),
        header,
        records,
    }
}

/// Applies the journal beside `path` (as [`read`] read it) to `session`, just read from
/// the snapshot `ids` names, of `snapshot_bytes` bytes. Returns how many records were
/// applied; an error (naming the journal) when the journal cannot be applied whole.
/// Nothing on disk changes.
pub(crate) fn replay(
    path: &Path,
    session: &mut Session,
    ids: &SnapshotIds,
    snapshot_bytes: u64,
    read: JournalRead,
) -> Result<u64, String> {
    let snapshot_id = ids.snapshot.as_deref();
    let jpath = journal_path(path);
    let JournalRead {
        len,
        header,
        records: lines,
    } = read;
    match len {
        Ok(0) => return Ok(0),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(format!("cannot read {}: {e}", jpath.display())),
    }
    let (header, _) = match header {
        Some(Ok(h)) => h,
        Some(Err(why)) => {
            return Err(format!(
                "session journal {} is damaged ({why}): the session is not opened, and \
                 both files are left as they are",
                jpath.display()
            ));
        }
        None => return Ok(0),
    };
    if Some(header.snapshot.as_str()) != snapshot_id || header.bytes != snapshot_bytes {
        // Left over from a fold: the file holds everything it did.
        if ids.previous.as_deref() == Some(header.snapshot.as_str()) {
            return Ok(0);
        }
        return Err(format!(
            "session journal {} continues another version of {} (another program rewrote \
             the file): the session is not opened, and both files are left as they are",
            jpath.display(),
            path.display()
        ));
    }
    let mut records: u64 = 0;
    for (_, record) in lines {
        let record = record.map_err(|e| {
            format!(
                "corrupt session journal {} (record {}): {e}",
                jpath.display(),
                records + 1
            )
        })?;
        apply(session, records, record).map_err(|e| {
            format!(
                "session journal {} does not fit its snapshot (record {}): {e}",
                jpath.display(),
                records + 1
            )
        })?;
        records += 1;
    }
    Ok(records)
}

fn grow<T>(items: &mut Vec<T>, t: Tail<Vec<T>>, what: &str) -> Result<(), String> {
    if items.len() != t.base || t.keep > t.base {
        return Err(format!(
            "{what}: the record continues {} of them, there are {}",
            t.base,
            items.len()
        ));
    }
    items.truncate(t.keep);
    items.extend(t.add);
    Ok(())
}

/// Applies record `r`, which must follow record number `seq`.
fn apply(session: &mut Session, seq: u64, r: RecordIn) -> Result<(), String> {
    if r.seq != seq + 1 {
        return Err(format!("record {} follows record {seq}", r.seq));
    }
    grow(&mut session.messages, r.messages, "messages")?;
    let g = &mut session.groundwork;
    grow(&mut g.requests, r.requests, "requests")?;
    grow(&mut g.tables.instructions, r.instructions, "instructions")?;
    grow(&mut g.tables.tool_sets, r.tool_sets, "tool lists")?;
    let t = r.texts;
    if g.tables.texts.len() != t.base || t.keep > t.base {
        return Err(format!(
            "texts: the record continues {} of them, there are {}",
            t.base,
            g.tables.texts.len()
        ));
    }
    g.tables.texts.truncate(t.keep);
    g.tables.texts.extend_stored(t.add)?;
    grow(&mut g.timings, r.timings, "timings")?;
    apply_state(&mut session.state, r.state)?;
    super::store::apply_meta(session, r.meta).map_err(|e| e.to_string())?;
    session.extra = r.extra;
    Ok(())
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_sits_beside_the_session() {
        assert_eq!(
            journal_path(Path::new("/tmp/s/chat.json")),
            Path::new("/tmp/s/chat.json.journal")
        );
    }
}
