//! Incremental saves: a journal beside the session file.
//!
//! A long session's file is big, and rewriting it for every question would cost what the
//! conversation holds. So once the file (the *snapshot*) is past [`Policy::journal_from`]
//! bytes, a save appends one line to `NAME.journal` holding only what changed since the
//! previous save: the messages, requests, table entries and timings added (as a kept
//! prefix plus new items), the state as a list of changes ([`diff_state`]), and the small
//! metadata. When the journal grows past a quarter of the snapshot, the next save folds
//! everything into a new snapshot (atomically, [`super::disk::write_atomic`]) and removes
//! the journal, so the total written stays proportional to the conversation.
//!
//! The snapshot is always a complete session of some earlier save, the file pydantic-ai
//! and haiku.rag read; Groundwork reads the snapshot and then the journal. The journal's
//! first line names the snapshot it continues (an identity written into the snapshot's
//! `groundwork.snapshot`, and its size); records are synced before a save returns. A kill
//! during an append leaves at most a torn last line, which is ignored (and cut off before
//! the next append): the file then reads as the previous save. A journal that does not
//! continue the snapshot beside it (the snapshot was folded and the journal's removal was
//! interrupted) is removed; one whose snapshot another program rewrote is kept under
//! `NAME.journal.orphaned-TIME` and never applied.

use std::io::{Seek as _, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::disk::Stamp;
use super::linear::{LinearRequest, StoredText};
use super::state_diff::{StateOp, apply_state, diff_state};
use super::{RunTiming, Session};
use crate::engine::capability::ToolDef;
use crate::engine::messages::ModelMessage;

/// Journal format version (the header's `groundwork_journal`).
const JOURNAL_VERSION: u32 = 1;

/// When saves append to the journal and when they fold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Snapshots smaller than this are rewritten whole on every save.
    pub journal_from: u64,
    /// The journal is folded once it would exceed the snapshot's size divided by this.
    pub fold_ratio: u64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            journal_from: 1 << 20,
            fold_ratio: 4,
        }
    }
}

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

/// One save's changes (serialized borrowing the session, read back owned).
#[derive(Debug, Serialize, Deserialize)]
struct Record<M, R, S, T, W, X> {
    seq: u64,
    messages: Tail<M>,
    requests: Tail<R>,
    instructions: Tail<S>,
    tool_sets: Tail<T>,
    /// Texts over the one before each (see [`super::linear::Texts`]).
    texts: Tail<X>,
    timings: Tail<W>,
    #[serde(default)]
    state: Vec<StateOp>,
    /// `groundwork`'s small fields: model, created_at, scripted_demo, labels, extra.
    meta: Value,
    /// Top-level keys other hosts wrote.
    #[serde(default)]
    extra: Map<String, Value>,
}

type RecordIn = Record<
    Vec<ModelMessage>,
    Vec<LinearRequest>,
    Vec<String>,
    Vec<Vec<ToolDef>>,
    Vec<RunTiming>,
    Vec<StoredText>,
>;

/// What the files on disk hold, as this session last saved or read them: the lengths
/// of its lists, the state, and where the journal stands. Everything before
/// `messages_clean` / `requests_clean` is known to be on disk unchanged.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Image {
    pub(crate) path: PathBuf,
    pub(crate) snapshot: String,
    pub(crate) snapshot_bytes: u64,
    /// The journal's length up to its last whole record (0: no journal).
    pub(crate) journal_bytes: u64,
    pub(crate) seq: u64,
    pub(crate) messages_clean: usize,
    pub(crate) requests_clean: usize,
    /// The file and the journal as this session saw them: when either differs, this
    /// session is not the one that last wrote them, and its next save writes whole.
    pub(crate) file_stamp: Option<Stamp>,
    pub(crate) journal_stamp: Option<Stamp>,
    lens: Lens,
    state: Map<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Lens {
    pub(crate) messages: usize,
    pub(crate) requests: usize,
    pub(crate) instructions: usize,
    pub(crate) tool_sets: usize,
    pub(crate) texts: usize,
    pub(crate) timings: usize,
}

fn lens(s: &Session) -> Lens {
    Lens {
        messages: s.messages.len(),
        requests: s.groundwork.requests.len(),
        instructions: s.groundwork.tables.instructions.len(),
        tool_sets: s.groundwork.tables.tool_sets.len(),
        texts: s.groundwork.tables.texts.len(),
        timings: s.groundwork.timings.len(),
    }
}

impl Image {
    /// The image of `session` as just written whole to `path`.
    pub(crate) fn snapshot(path: &Path, snapshot: String, bytes: u64, session: &Session) -> Self {
        Image {
            file_stamp: Stamp::of_path(path),
            journal_stamp: None,
            path: path.to_path_buf(),
            snapshot,
            snapshot_bytes: bytes,
            journal_bytes: 0,
            seq: 0,
            messages_clean: session.messages.len(),
            requests_clean: session.groundwork.requests.len(),
            lens: lens(session),
            state: session.state.clone(),
        }
    }
}

/// The small fields of `groundwork`, whole in every record.
pub(crate) fn meta_of(s: &Session) -> Value {
    let g = &s.groundwork;
    serde_json::json!({
        "model": g.model,
        "created_at": g.created_at,
        "scripted_demo": g.scripted_demo,
        "labels": g.labels,
        "extra": g.extra,
    })
}

fn apply_meta(s: &mut Session, meta: Value) -> Result<(), serde_json::Error> {
    #[derive(Deserialize)]
    struct Meta {
        model: Option<String>,
        created_at: chrono::DateTime<chrono::Utc>,
        scripted_demo: bool,
        labels: Map<String, Value>,
        extra: Map<String, Value>,
    }
    let m: Meta = serde_json::from_value(meta)?;
    let g = &mut s.groundwork;
    g.model = m.model;
    g.created_at = m.created_at;
    g.scripted_demo = m.scripted_demo;
    g.labels = m.labels;
    g.extra = m.extra;
    Ok(())
}

fn tail<T>(items: &[T], base: usize, clean: usize) -> Tail<&[T]> {
    let keep = clean.min(base).min(items.len());
    Tail {
        base,
        keep,
        add: &items[keep..],
    }
}

/// The record of what `session` changed since `image`, as one line (with its newline).
pub(crate) fn record_line(session: &Session, image: &Image) -> Result<Vec<u8>, serde_json::Error> {
    let g = &session.groundwork;
    let t = &g.tables;
    let now = lens(session);
    let was = image.lens;
    // Tables and timings only grow; if one shrank, it is written from the start.
    let grown = |now: usize, was: usize| if now >= was { was } else { 0 };
    let mut state = Vec::new();
    diff_state(&image.state, &session.state, &mut Vec::new(), &mut state);
    let record = Record {
        seq: image.seq + 1,
        messages: tail(&session.messages, was.messages, image.messages_clean),
        requests: tail(&g.requests, was.requests, image.requests_clean),
        instructions: tail(
            &t.instructions,
            was.instructions,
            grown(now.instructions, was.instructions),
        ),
        tool_sets: tail(
            &t.tool_sets,
            was.tool_sets,
            grown(now.tool_sets, was.tool_sets),
        ),
        texts: {
            let keep = grown(now.texts, was.texts).min(t.texts.len());
            Tail {
                base: was.texts,
                keep,
                add: t.texts.stored_from(keep),
            }
        },
        timings: tail(&g.timings, was.timings, grown(now.timings, was.timings)),
        state,
        meta: meta_of(session),
        extra: session.extra.clone(),
    };
    let mut line = serde_json::to_vec(&record)?;
    line.push(b'\n');
    Ok(line)
}

/// Where the files stand as an [`Image`] says, without the state (kept by a resume
/// file, [`super::resume`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Standing {
    snapshot: String,
    snapshot_bytes: u64,
    journal_bytes: u64,
    seq: u64,
    file_stamp: Option<Stamp>,
    journal_stamp: Option<Stamp>,
    pub(crate) lens: Lens,
}

impl Image {
    /// Where the files stand, when everything is on disk (nothing of the session is
    /// newer than the files).
    pub(crate) fn standing(&self) -> Option<Standing> {
        (self.messages_clean == self.lens.messages && self.requests_clean == self.lens.requests)
            .then(|| Standing {
                snapshot: self.snapshot.clone(),
                snapshot_bytes: self.snapshot_bytes,
                journal_bytes: self.journal_bytes,
                seq: self.seq,
                file_stamp: self.file_stamp.clone(),
                journal_stamp: self.journal_stamp.clone(),
                lens: self.lens,
            })
    }

    /// The image of the files at `path` standing as `standing` says, with `state`.
    pub(crate) fn standing_at(path: &Path, standing: Standing, state: Map<String, Value>) -> Image {
        Image {
            path: path.to_path_buf(),
            snapshot: standing.snapshot,
            snapshot_bytes: standing.snapshot_bytes,
            journal_bytes: standing.journal_bytes,
            seq: standing.seq,
            messages_clean: standing.lens.messages,
            requests_clean: standing.lens.requests,
            file_stamp: standing.file_stamp,
            journal_stamp: standing.journal_stamp,
            lens: standing.lens,
            state,
        }
    }

    /// The committed state as saved.
    pub(crate) fn state(&self) -> &Map<String, Value> {
        &self.state
    }
}

/// What a run over a history window adds to a session the process does not hold
/// ([`super::resume`]): each list's new items, the state after it.
pub(crate) struct Added<'a> {
    pub(crate) messages: &'a [ModelMessage],
    pub(crate) requests: &'a [LinearRequest],
    pub(crate) instructions: &'a [String],
    pub(crate) tool_sets: &'a [Vec<ToolDef>],
    pub(crate) texts: &'a [StoredText],
    pub(crate) timing: &'a RunTiming,
    pub(crate) state: &'a Map<String, Value>,
    /// `groundwork`'s small fields and the other hosts' keys, as the files hold them.
    pub(crate) meta: &'a Value,
    pub(crate) extra: &'a Map<String, Value>,
}

/// The record of `added` after `image`, as one line (with its newline): what
/// [`record_line`] writes for a session holding the files' content and `added`.
pub(crate) fn added_line(image: &Image, added: &Added<'_>) -> Result<Vec<u8>, serde_json::Error> {
    let was = image.lens;
    let mut state = Vec::new();
    diff_state(&image.state, added.state, &mut Vec::new(), &mut state);
    let record = Record {
        seq: image.seq + 1,
        messages: Tail {
            base: was.messages,
            keep: was.messages,
            add: added.messages,
        },
        requests: Tail {
            base: was.requests,
            keep: was.requests,
            add: added.requests,
        },
        instructions: Tail {
            base: was.instructions,
            keep: was.instructions,
            add: added.instructions,
        },
        tool_sets: Tail {
            base: was.tool_sets,
            keep: was.tool_sets,
            add: added.tool_sets,
        },
        texts: Tail {
            base: was.texts,
            keep: was.texts,
            add: added.texts,
        },
        timings: Tail {
            base: was.timings,
            keep: was.timings,
            add: std::slice::from_ref(added.timing),
        },
        state,
        meta: added.meta.clone(),
        extra: added.extra.clone(),
    };
    let mut line = serde_json::to_vec(&record)?;
    line.push(b'\n');
    Ok(line)
}

/// The image after `added`'s line (of `line_len` bytes) was appended to `image`'s
/// journal, leaving it as `stamp` says.
pub(crate) fn after_added(image: &Image, added: &Added<'_>, line_len: u64, stamp: Stamp) -> Image {
    let was = image.lens;
    let lens = Lens {
        messages: was.messages + added.messages.len(),
        requests: was.requests + added.requests.len(),
        instructions: was.instructions + added.instructions.len(),
        tool_sets: was.tool_sets + added.tool_sets.len(),
        texts: was.texts + added.texts.len(),
        timings: was.timings + 1,
    };
    Image {
        path: image.path.clone(),
        snapshot: image.snapshot.clone(),
        snapshot_bytes: image.snapshot_bytes,
        journal_bytes: image.journal_bytes.max(header_len(image)) + line_len,
        seq: image.seq + 1,
        messages_clean: lens.messages,
        requests_clean: lens.requests,
        file_stamp: image.file_stamp.clone(),
        journal_stamp: Some(stamp),
        lens,
        state: added.state.clone(),
    }
}

/// The image after `line` (made by [`record_line`]) was appended, leaving the journal
/// as `stamp` says.
pub(crate) fn after_append(session: &Session, image: &Image, line_len: u64, stamp: Stamp) -> Image {
    let mut next = Image::snapshot(
        &image.path,
        image.snapshot.clone(),
        image.snapshot_bytes,
        session,
    );
    next.file_stamp = image.file_stamp.clone();
    next.journal_stamp = Some(stamp);
    next.journal_bytes = image.journal_bytes.max(header_len(image)) + line_len;
    next.seq = image.seq + 1;
    next
}

/// Whether the file and the journal on disk are as `image` last saw them.
pub(crate) fn current(image: &Image) -> bool {
    Stamp::of_path(&image.path) == image.file_stamp
        && Stamp::of_path(&journal_path(&image.path)) == image.journal_stamp
}

fn header_line(image: &Image) -> Vec<u8> {
    let mut line = serde_json::to_vec(&Header {
        groundwork_journal: JOURNAL_VERSION,
        snapshot: image.snapshot.clone(),
        bytes: image.snapshot_bytes,
    })
    .expect("a header serializes");
    line.push(b'\n');
    line
}

fn header_len(image: &Image) -> u64 {
    header_line(image).len() as u64
}

/// Appends `line` to the journal of `image` (creating it with its header, or cutting a
/// torn tail first) and syncs it. Returns the journal's stamp afterwards.
pub(crate) fn append(image: &Image, line: &[u8]) -> std::io::Result<Stamp> {
    let path = journal_path(&image.path);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)?;
    let len = f.metadata()?.len();
    if image.journal_bytes == 0 {
        f.set_len(0)?;
        f.rewind()?;
        f.write_all(&header_line(image))?;
    } else {
        if len != image.journal_bytes {
            f.set_len(image.journal_bytes)?;
        }
        f.seek(std::io::SeekFrom::Start(image.journal_bytes))?;
    }
    f.write_all(line)?;
    f.sync_data()?;
    Ok(Stamp::of(&f.metadata()?))
}

/// The identities a snapshot carries in `groundwork`: its own, and the one it folded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SnapshotIds {
    pub(crate) snapshot: Option<String>,
    pub(crate) previous: Option<String>,
}

/// What reading the journal beside a snapshot found.
#[derive(Debug)]
pub(crate) enum Replay {
    /// No journal, or one left over from a fold (removed).
    None,
    /// Records applied; the image of the result.
    Applied(Box<Image>),
    /// The journal continues another version of the snapshot; kept aside here.
    Orphaned(PathBuf),
}

/// The journal beside a snapshot as read from disk, with its records read up to the
/// first that cannot be (for a long session, on another thread while the snapshot is
/// parsed: see [`Session::load`]). Reading it changes nothing on disk; [`replay`] does.
pub(crate) struct JournalRead {
    stamp: Option<Stamp>,
    /// The journal's length in bytes.
    len: std::io::Result<u64>,
    /// The header and the length of its line.
    header: Option<(Header, u64)>,
    /// Each whole line after the header: its length and what it reads as.
    records: Vec<(u64, serde_json::Result<RecordIn>)>,
}

/// Reads the journal beside `path` (see [`JournalRead`]).
pub(crate) fn read(path: &Path) -> JournalRead {
    let jpath = journal_path(path);
    let stamp = Stamp::of_path(&jpath);
    let bytes = std::fs::read(&jpath);
    let mut header = None;
    let mut records = Vec::new();
    if let Ok(bytes) = &bytes {
        let mut lines = bytes.split_inclusive(|b| *b == b'\n');
        header = lines
            .next()
            .filter(|l| l.ends_with(b"\n"))
            .and_then(|l| Some((serde_json::from_slice(l).ok()?, l.len() as u64)));
        if header.is_some() {
            for line in lines {
                if !line.ends_with(b"\n") {
                    break; // a torn last line: that save never returned
                }
                // Read as text when it is valid UTF-8 (checked once per line, not per
                // string); a line that is not reads as bytes, so its error is serde's.
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
        stamp,
        len: bytes.map(|b| b.len() as u64),
        header,
        records,
    }
}

/// Applies the journal beside `path` (as [`read`] read it) to `session`, which was just
/// read from the snapshot `snapshot_id` of `snapshot_bytes` bytes. The image returned
/// says what is on disk.
pub(crate) fn replay(
    path: &Path,
    session: &mut Session,
    ids: &SnapshotIds,
    snapshot_bytes: u64,
    read: JournalRead,
) -> Result<Replay, String> {
    let snapshot_id = ids.snapshot.as_deref();
    let jpath = journal_path(path);
    let JournalRead {
        stamp: journal_stamp,
        len,
        header,
        records: lines,
    } = read;
    let len = match len {
        Ok(len) => len,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Replay::None),
        Err(e) => return Err(format!("cannot read {}: {e}", jpath.display())),
    };
    let Some((header, header_len)) = header else {
        // Killed while creating it: nothing was committed to it.
        let _ = std::fs::remove_file(&jpath);
        return Ok(Replay::None);
    };
    if Some(header.snapshot.as_str()) != snapshot_id || header.bytes != snapshot_bytes {
        if ids.previous.as_deref() == Some(header.snapshot.as_str()) {
            let _ = std::fs::remove_file(&jpath);
            return Ok(Replay::None);
        }
        let aside = super::disk::beside(
            &jpath,
            &format!("orphaned-{}", chrono::Local::now().format("%Y%m%d-%H%M%S")),
        );
        std::fs::rename(&jpath, &aside)
            .map_err(|e| format!("cannot move {} aside: {e}", jpath.display()))?;
        return Ok(Replay::Orphaned(aside));
    }
    let mut offset = header_len;
    let mut records: u64 = 0;
    for (line, record) in lines {
        let record = match record {
            Ok(r) => r,
            Err(_) if offset + line == len => break,
            Err(e) => {
                return Err(format!(
                    "corrupt session journal {} (record {}): {e}",
                    jpath.display(),
                    records + 1
                ));
            }
        };
        apply(session, records, record).map_err(|e| {
            format!(
                "session journal {} does not fit its snapshot (record {}): {e}",
                jpath.display(),
                records + 1
            )
        })?;
        offset += line;
        records += 1;
    }
    let mut image = Image::snapshot(path, header.snapshot.clone(), snapshot_bytes, session);
    image.seq = records;
    image.journal_bytes = offset;
    image.journal_stamp = journal_stamp;
    Ok(Replay::Applied(Box::new(image)))
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
    apply_meta(session, r.meta).map_err(|e| e.to_string())?;
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
