//! Sessions in SQLite: one database file per session, so a session stays one portable
//! file a reviewer can receive.
//!
//! Every list a session holds (messages as pydantic-ai's JSON, requests in linear form,
//! the instructions, tool lists and texts they refer to, the runs' timings) is a table
//! of one row per item, numbered from 0; the state and the small metadata are rows of
//! `meta`. Every row carries the CRC-32 of its text, so a flipped byte anywhere in what
//! the session holds is found when it is read. A save is one transaction
//! ([`apply`]): each list's changed tail replaced, the new rows added, and a row in
//! `commits` saying how long every list is now; reading checks that every list is
//! exactly as long as the last commit says and numbered without a gap. The
//! transaction's rollback journal makes a kill at any moment leave the previous commit
//! or the new one.
//!
//! Rollback journal, not WAL: a reader of a WAL database creates its `-shm` and `-wal`
//! files, and `open`, `inspect`, `replay` and `export` must never write a file. Readers
//! open the file read-only after checking its header ([`check_header`]); a journal left
//! by a killed writer is rolled back in a copy ([`load`]), never in place.
//!
//! One writer at a time: a writer takes the session's lease ([`Lease`], a row naming its
//! pid, taken in a write transaction), and every save checks that the file's last commit
//! is the one this process read or wrote ([`SessionError::Changed`] otherwise).
//! `ask`'s cache of the earlier questions' wire text ([`super::resume`]) is a row of its
//! own, valid only for the commit it names.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod lease;
mod resume_row;

pub use lease::Lease;
pub(crate) use resume_row::{drop_resume, image_at, read_resume, write_resume};

use super::linear::StoredText;
use super::{RunTiming, Session, SessionError};
use crate::engine::capability::ToolDef;
use crate::engine::messages::ModelMessage;

/// `PRAGMA application_id` of a Groundwork session ("GWS1").
pub const APPLICATION_ID: i32 = 0x4757_5331;

/// `PRAGMA user_version`: the schema this build writes and the newest it reads. Schema 2
/// added `state_ops` (schema-1 files are read as they are, and given the table by their
/// next commit).
const SCHEMA: i32 = 2;

/// How long a writer waits for another's transaction (a commit takes milliseconds).
const BUSY_MS: u64 = 5_000;

/// The list tables, in the order of [`Lens`].
const LISTS: [&str; 6] = [
    "messages",
    "requests",
    "instructions",
    "tool_sets",
    "texts",
    "timings",
];

const SCHEMA_SQL: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, body TEXT NOT NULL, crc INTEGER NOT NULL);
CREATE TABLE messages (seq INTEGER PRIMARY KEY, body TEXT NOT NULL, crc INTEGER NOT NULL);
CREATE TABLE requests (seq INTEGER PRIMARY KEY, body TEXT NOT NULL, crc INTEGER NOT NULL);
CREATE TABLE instructions (seq INTEGER PRIMARY KEY, body TEXT NOT NULL, crc INTEGER NOT NULL);
CREATE TABLE tool_sets (seq INTEGER PRIMARY KEY, body TEXT NOT NULL, crc INTEGER NOT NULL);
CREATE TABLE texts (seq INTEGER PRIMARY KEY, body TEXT NOT NULL, crc INTEGER NOT NULL);
CREATE TABLE timings (seq INTEGER PRIMARY KEY, body TEXT NOT NULL, crc INTEGER NOT NULL);
CREATE TABLE state_ops (seq INTEGER PRIMARY KEY, body TEXT NOT NULL, crc INTEGER NOT NULL);
CREATE TABLE commits (seq INTEGER PRIMARY KEY, at TEXT NOT NULL, body TEXT NOT NULL, crc INTEGER NOT NULL);
CREATE TABLE writer (id INTEGER PRIMARY KEY CHECK (id = 0), pid INTEGER NOT NULL, since TEXT NOT NULL);
CREATE TABLE resume (id INTEGER PRIMARY KEY CHECK (id = 0), generation INTEGER NOT NULL, head TEXT NOT NULL, wire_len INTEGER NOT NULL, crc INTEGER NOT NULL);
CREATE TABLE wire (start INTEGER PRIMARY KEY, body TEXT NOT NULL, crc INTEGER NOT NULL);
";

/// How long each list is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Lens {
    pub(crate) messages: usize,
    pub(crate) requests: usize,
    pub(crate) instructions: usize,
    pub(crate) tool_sets: usize,
    pub(crate) texts: usize,
    pub(crate) timings: usize,
    /// Rows of changes to the state written whole last (`state_ops`).
    #[serde(default)]
    pub(crate) state_ops: usize,
}

impl Lens {
    fn of(s: &Session) -> Lens {
        Lens {
            messages: s.messages.len(),
            requests: s.groundwork.requests.len(),
            instructions: s.groundwork.tables.instructions.len(),
            tool_sets: s.groundwork.tables.tool_sets.len(),
            texts: s.groundwork.tables.texts.len(),
            timings: s.groundwork.timings.len(),
            state_ops: 0,
        }
    }

    fn as_array(self) -> [usize; 6] {
        [
            self.messages,
            self.requests,
            self.instructions,
            self.tool_sets,
            self.texts,
            self.timings,
        ]
    }
}

/// What a session's file holds, as this session last read or saved it: the commit, the
/// lengths of its lists, the state. Everything before `messages_clean` /
/// `requests_clean` is known to be in the file unchanged.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Image {
    pub(crate) path: PathBuf,
    /// The file's last commit.
    pub(crate) generation: u64,
    pub(crate) messages_clean: usize,
    pub(crate) requests_clean: usize,
    pub(crate) lens: Lens,
    state: Map<String, Value>,
    /// The file's last message and its index: a session whose message there differs is
    /// not the one the file continues, and is written from its start.
    last: Option<(usize, ModelMessage)>,
    /// The size of the state as last written whole, and of the changes written since.
    state_bytes: usize,
    ops_bytes: usize,
}

impl Image {
    fn of(path: &Path, generation: u64, session: &Session, stored: StateStored) -> Image {
        Image {
            path: path.to_path_buf(),
            generation,
            messages_clean: session.messages.len(),
            requests_clean: session.groundwork.requests.len(),
            lens: Lens {
                state_ops: stored.ops,
                ..Lens::of(session)
            },
            state_bytes: stored.state_bytes,
            ops_bytes: stored.ops_bytes,
            state: session.state.clone(),
            last: session
                .messages
                .last()
                .map(|m| (session.messages.len() - 1, m.clone())),
        }
    }

    /// The committed state as saved.
    pub(crate) fn state(&self) -> &Map<String, Value> {
        &self.state
    }

    /// Whether everything of the session is in the file (nothing newer in memory).
    pub(crate) fn whole(&self) -> bool {
        self.messages_clean == self.lens.messages && self.requests_clean == self.lens.requests
    }
}

/// How the state stands in the file: written whole (`state_bytes` long) and followed by
/// `ops` rows of changes (`ops_bytes` long).
#[derive(Debug, Clone, Copy, Default)]
struct StateStored {
    state_bytes: usize,
    ops: usize,
    ops_bytes: usize,
}

/// The state as one save writes it: unchanged, whole (the rows of changes before it
/// removed), or as the changes since the file's state (one row of `state_ops`).
#[derive(Debug)]
enum StateWrite {
    Unchanged,
    Whole(String),
    Changes(String),
}

/// How a save writes `new` over the file's state `image`: as its changes, while all the
/// changes written since the state was last written whole stay under a quarter of it (so
/// a question costs what it changed, and reading replays a bounded tail); whole
/// otherwise.
fn state_write(image: &Image, new: &Map<String, Value>) -> Result<StateWrite, SessionError> {
    let mut ops = Vec::new();
    super::state_diff::diff_state(&image.state, new, &mut Vec::new(), &mut ops);
    if ops.is_empty() {
        return Ok(StateWrite::Unchanged);
    }
    let changes = serde_json::to_string(&ops)?;
    if (image.ops_bytes + changes.len()) * 4 <= image.state_bytes {
        Ok(StateWrite::Changes(changes))
    } else {
        Ok(StateWrite::Whole(serde_json::to_string(new)?))
    }
}

impl StateStored {
    /// After `write` over a file whose state stood as `self`.
    fn after(self, write: &StateWrite) -> StateStored {
        match write {
            StateWrite::Unchanged => self,
            StateWrite::Whole(s) => StateStored {
                state_bytes: s.len(),
                ops: 0,
                ops_bytes: 0,
            },
            StateWrite::Changes(c) => StateStored {
                ops: self.ops + 1,
                ops_bytes: self.ops_bytes + c.len(),
                ..self
            },
        }
    }
}

impl Image {
    fn stored(&self) -> StateStored {
        StateStored {
            state_bytes: self.state_bytes,
            ops: self.lens.state_ops,
            ops_bytes: self.ops_bytes,
        }
    }
}

/// The small fields of `groundwork` (everything but its lists).
pub(crate) fn meta_of(s: &Session) -> Value {
    let g = &s.groundwork;
    serde_json::json!({
        "version": g.version,
        "model": g.model,
        "created_at": g.created_at,
        "scripted_demo": g.scripted_demo,
        "labels": g.labels,
        "extra": g.extra,
    })
}

pub(crate) fn apply_meta(s: &mut Session, meta: Value) -> Result<(), serde_json::Error> {
    #[derive(Deserialize)]
    struct Meta {
        model: Option<String>,
        created_at: chrono::DateTime<chrono::Utc>,
        #[serde(default)]
        scripted_demo: bool,
        #[serde(default)]
        labels: Map<String, Value>,
        #[serde(default)]
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

fn crc(body: &str) -> i64 {
    i64::from(crc32fast::hash(body.as_bytes()))
}

/// Whether the file at `path` is an SQLite database (of any application).
pub fn is_database(path: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == b"SQLite format 3\0")
}

fn damaged(path: &Path, problem: impl Into<String>) -> SessionError {
    SessionError::Damaged {
        path: path.to_path_buf(),
        // One line, whatever SQLite said.
        problem: problem
            .into()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
    }
}

fn sql_error(path: &Path, action: &'static str, e: rusqlite::Error) -> SessionError {
    use rusqlite::ErrorCode as C;
    match e.sqlite_error_code() {
        Some(C::DatabaseBusy | C::DatabaseLocked) => SessionError::Busy {
            path: path.to_path_buf(),
            pid: None,
        },
        Some(C::DatabaseCorrupt | C::NotADatabase) => damaged(path, e.to_string()),
        Some(C::DiskFull) => SessionError::Io {
            action,
            path: path.to_path_buf(),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        },
        _ => SessionError::Io {
            action,
            path: path.to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        },
    }
}

/// Checks the first 100 bytes of a session database before SQLite opens it: an SQLite
/// file, in rollback-journal mode (a reader of a WAL file would create files beside
/// it), whose application is Groundwork's.
fn check_header(path: &Path) -> Result<(), SessionError> {
    use std::io::Read as _;
    let mut head = [0u8; 100];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head));
    match read {
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            return Err(damaged(path, "shorter than a database header"));
        }
        Err(source) => {
            return Err(SessionError::Io {
                action: "read",
                path: path.to_path_buf(),
                source,
            });
        }
        Ok(()) => {}
    }
    if &head[..16] != b"SQLite format 3\0" {
        return Err(damaged(path, "not an SQLite database"));
    }
    if head[18] != 1 || head[19] != 1 {
        return Err(damaged(
            path,
            format!(
                "its header names file format {}/{}, not the rollback journal Groundwork writes",
                head[18], head[19]
            ),
        ));
    }
    let app = i32::from_be_bytes([head[68], head[69], head[70], head[71]]);
    if app != APPLICATION_ID {
        return Err(damaged(
            path,
            format!("an SQLite database of another application (application id {app:#x})"),
        ));
    }
    Ok(())
}

fn open_read(path: &Path) -> Result<Connection, SessionError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| sql_error(path, "read", e))?;
    conn.busy_timeout(std::time::Duration::from_millis(BUSY_MS))
        .map_err(|e| sql_error(path, "read", e))?;
    Ok(conn)
}

fn open_write(path: &Path) -> Result<Connection, SessionError> {
    check_header(path)?;
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| sql_error(path, "write", e))?;
    conn.busy_timeout(std::time::Duration::from_millis(BUSY_MS))
        .map_err(|e| sql_error(path, "write", e))?;
    Ok(conn)
}

fn generation_in(conn: &Connection, path: &Path) -> Result<u64, SessionError> {
    let g: Option<i64> = conn
        .query_row("SELECT max(seq) FROM commits", [], |r| r.get(0))
        .map_err(|e| sql_error(path, "read", e))?;
    g.map(|g| g as u64)
        .ok_or_else(|| damaged(path, "it holds no commit"))
}

/// Reads the session database at `path` without writing anything: every row checked
/// against its CRC, every list against the last commit.
pub(crate) fn load(path: &Path) -> Result<(Session, Image), SessionError> {
    check_header(path)?;
    match read_all(&open_read(path)?, path) {
        // A journal left by a killed writer: a read-only reader may not roll it back,
        // so it is rolled back in a copy (the files here stay as they are).
        Err(SessionError::Io { .. }) if hot_journal(path) => load_copy(path),
        other => other,
    }
}

fn hot_journal(path: &Path) -> bool {
    std::fs::metadata(journal_of(path)).is_ok_and(|m| m.len() > 0)
}

fn journal_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push("-journal");
    PathBuf::from(name)
}

fn load_copy(path: &Path) -> Result<(Session, Image), SessionError> {
    let io = |source| SessionError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    };
    let dir = tempfile::tempdir().map_err(io)?;
    let copy = dir.path().join("session.sqlite");
    std::fs::copy(journal_of(path), journal_of(&copy)).map_err(io)?;
    std::fs::copy(path, &copy).map_err(io)?;
    let conn = Connection::open(&copy).map_err(|e| sql_error(path, "read", e))?;
    let (session, mut image) = read_all(&conn, path)?;
    image.path = path.to_path_buf();
    Ok((session, image))
}

fn read_all(conn: &Connection, path: &Path) -> Result<(Session, Image), SessionError> {
    let err = |e| sql_error(path, "read", e);
    // One read transaction: every table as of one commit.
    conn.execute_batch("BEGIN").map_err(err)?;
    let schema: i32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(err)?;
    if schema > SCHEMA {
        return Err(SessionError::Newer {
            path: path.to_path_buf(),
            kind: "session schema",
            version: schema as u64,
            newest: SCHEMA as u64,
        });
    }
    let check: String = conn
        .query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
        .map_err(err)?;
    if check != "ok" {
        return Err(damaged(path, check));
    }
    let generation = generation_in(conn, path)?;
    let (body, sum): (String, i64) = conn
        .query_row(
            "SELECT body, crc FROM commits WHERE seq = ?1",
            [generation as i64],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(err)?;
    if crc(&body) != sum {
        return Err(damaged(
            path,
            format!("commit {generation} does not match its checksum"),
        ));
    }
    let lens: Lens = serde_json::from_str(&body)
        .map_err(|e| damaged(path, format!("commit {generation}: {e}")))?;
    let mut session = Session::new("");
    let mut meta = std::collections::HashMap::new();
    {
        let mut stmt = conn
            .prepare("SELECT key, body, crc FROM meta")
            .map_err(err)?;
        let mut rows = stmt.query([]).map_err(err)?;
        while let Some(row) = rows.next().map_err(err)? {
            let key: String = row.get(0).map_err(err)?;
            let body: String = row.get(1).map_err(err)?;
            if crc(&body) != row.get::<_, i64>(2).map_err(err)? {
                return Err(damaged(path, format!("{key} does not match its checksum")));
            }
            meta.insert(key, body);
        }
    }
    let state_bytes = meta.get("state").map_or(0, String::len);
    let mut take = |key: &str| -> Result<Value, SessionError> {
        let body = meta
            .remove(key)
            .ok_or_else(|| damaged(path, format!("its {key} is missing")))?;
        serde_json::from_str(&body).map_err(|e| damaged(path, format!("{key}: {e}")))
    };
    let groundwork = take("groundwork")?;
    let version = groundwork.get("version").and_then(Value::as_u64);
    apply_meta(&mut session, groundwork).map_err(|e| damaged(path, format!("groundwork: {e}")))?;
    if let Some(v) = version {
        session.groundwork.version = v as u32;
    }
    session.state = match take("state")? {
        Value::Object(m) => m,
        _ => return Err(damaged(path, "its state is not an object")),
    };
    let (ops, ops_bytes) = if schema >= 2 {
        read_list_sized::<Vec<super::state_diff::StateOp>>(conn, path, "state_ops", lens.state_ops)?
    } else {
        (Vec::new(), 0)
    };
    for (i, ops) in ops.into_iter().enumerate() {
        super::state_diff::apply_state(&mut session.state, ops)
            .map_err(|e| damaged(path, format!("state_ops row {i}: {e}")))?;
    }
    session.extra = match take("extra")? {
        Value::Object(m) => m,
        _ => return Err(damaged(path, "its extra keys are not an object")),
    };
    let want = lens.as_array();
    session.messages = read_list(conn, path, LISTS[0], want[0])?;
    let g = &mut session.groundwork;
    g.requests = read_list(conn, path, LISTS[1], want[1])?;
    g.tables.instructions = read_list(conn, path, LISTS[2], want[2])?;
    g.tables.tool_sets = read_list::<Vec<ToolDef>>(conn, path, LISTS[3], want[3])?;
    let texts: Vec<StoredText> = read_list(conn, path, LISTS[4], want[4])?;
    g.tables
        .texts
        .extend_stored(texts)
        .map_err(|e| damaged(path, format!("texts: {e}")))?;
    g.timings = read_list::<RunTiming>(conn, path, LISTS[5], want[5])?;
    conn.execute_batch("COMMIT").map_err(err)?;
    let stored = StateStored {
        state_bytes,
        ops: lens.state_ops,
        ops_bytes,
    };
    let image = Image::of(path, generation, &session, stored);
    Ok((session, image))
}

fn read_list<T: serde::de::DeserializeOwned>(
    conn: &Connection,
    path: &Path,
    table: &str,
    len: usize,
) -> Result<Vec<T>, SessionError> {
    read_list_sized(conn, path, table, len).map(|(items, _)| items)
}

/// The `len` rows of `table`, checked, with their texts' total length.
fn read_list_sized<T: serde::de::DeserializeOwned>(
    conn: &Connection,
    path: &Path,
    table: &str,
    len: usize,
) -> Result<(Vec<T>, usize), SessionError> {
    let err = |e| sql_error(path, "read", e);
    let mut bytes = 0;
    let mut stmt = conn
        .prepare(&format!("SELECT seq, body, crc FROM {table} ORDER BY seq"))
        .map_err(err)?;
    let mut rows = stmt.query([]).map_err(err)?;
    let mut out = Vec::with_capacity(len);
    while let Some(row) = rows.next().map_err(err)? {
        let seq: i64 = row.get(0).map_err(err)?;
        if seq != out.len() as i64 {
            return Err(damaged(
                path,
                format!("{table}: row {seq} where row {} should be", out.len()),
            ));
        }
        let body = row.get_ref(1).map_err(err)?;
        let body = body
            .as_str()
            .map_err(|e| damaged(path, format!("{table} row {seq}: {e}")))?;
        if crc(body) != row.get::<_, i64>(2).map_err(err)? {
            return Err(damaged(
                path,
                format!("{table} row {seq} does not match its checksum"),
            ));
        }
        bytes += body.len();
        out.push(
            serde_json::from_str(body)
                .map_err(|e| damaged(path, format!("{table} row {seq}: {e}")))?,
        );
    }
    if out.len() != len {
        return Err(damaged(
            path,
            format!(
                "{table}: {} rows where the last commit holds {len}",
                out.len()
            ),
        ));
    }
    Ok((out, bytes))
}

/// One save's rows: for each list, where its kept prefix ends and the rows after it.
struct Delta {
    lists: [(usize, Vec<String>); 6],
    lens: Lens,
    meta: String,
    extra: String,
    state: StateWrite,
}

fn bodies<T: Serialize>(items: &[T]) -> Result<Vec<String>, SessionError> {
    items
        .iter()
        .map(|i| serde_json::to_string(i).map_err(SessionError::from))
        .collect()
}

/// What `session` changed since `image`.
fn delta_of(session: &Session, image: &Image) -> Result<Delta, SessionError> {
    let g = &session.groundwork;
    let t = &g.tables;
    let was = image.lens;
    let now = Lens::of(session);
    // Tables and timings only grow; one that shrank is written from its start.
    let grown = |now: usize, was: usize| if now >= was { was } else { 0 };
    let continues = image
        .last
        .as_ref()
        .is_none_or(|(i, m)| session.messages.get(*i) == Some(m));
    let (messages_clean, requests_clean) = if continues {
        (image.messages_clean, image.requests_clean)
    } else {
        (0, 0)
    };
    let keep_messages = messages_clean.min(was.messages).min(now.messages);
    let keep_requests = requests_clean.min(was.requests).min(now.requests);
    let keep_instructions = grown(now.instructions, was.instructions);
    let keep_tool_sets = grown(now.tool_sets, was.tool_sets);
    let keep_texts = grown(now.texts, was.texts);
    let keep_timings = grown(now.timings, was.timings);
    Ok(Delta {
        lists: [
            (keep_messages, bodies(&session.messages[keep_messages..])?),
            (keep_requests, bodies(&g.requests[keep_requests..])?),
            (
                keep_instructions,
                bodies(&t.instructions[keep_instructions..])?,
            ),
            (keep_tool_sets, bodies(&t.tool_sets[keep_tool_sets..])?),
            (keep_texts, bodies(t.texts.stored_from(keep_texts))?),
            (keep_timings, bodies(&g.timings[keep_timings..])?),
        ],
        lens: now,
        meta: serde_json::to_string(&meta_of(session))?,
        extra: serde_json::to_string(&session.extra)?,
        state: state_write(image, &session.state)?,
    })
}

fn write_delta(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    delta: &Delta,
    generation: u64,
) -> Result<(), SessionError> {
    let err = |e| sql_error(path, "write", e);
    for (table, (keep, rows)) in LISTS.iter().zip(&delta.lists) {
        tx.execute(
            &format!("DELETE FROM {table} WHERE seq >= ?1"),
            [*keep as i64],
        )
        .map_err(err)?;
        let mut insert = tx
            .prepare(&format!(
                "INSERT INTO {table} (seq, body, crc) VALUES (?1, ?2, ?3)"
            ))
            .map_err(err)?;
        for (i, body) in rows.iter().enumerate() {
            insert
                .execute(params![(keep + i) as i64, body, crc(body)])
                .map_err(err)?;
        }
    }
    let mut put = tx
        .prepare("INSERT OR REPLACE INTO meta (key, body, crc) VALUES (?1, ?2, ?3)")
        .map_err(err)?;
    put.execute(params!["groundwork", &delta.meta, crc(&delta.meta)])
        .map_err(err)?;
    put.execute(params!["extra", &delta.extra, crc(&delta.extra)])
        .map_err(err)?;
    match &delta.state {
        StateWrite::Unchanged => {}
        StateWrite::Whole(state) => {
            put.execute(params!["state", state, crc(state)])
                .map_err(err)?;
            tx.execute("DELETE FROM state_ops", []).map_err(err)?;
        }
        StateWrite::Changes(ops) => {
            tx.execute(
                "INSERT INTO state_ops (seq, body, crc) VALUES (?1, ?2, ?3)",
                params![(delta.lens.state_ops - 1) as i64, ops, crc(ops)],
            )
            .map_err(err)?;
        }
    }
    let lens = serde_json::to_string(&delta.lens)?;
    tx.execute(
        "INSERT INTO commits (seq, at, body, crc) VALUES (?1, ?2, ?3, ?4)",
        params![
            generation as i64,
            chrono::Utc::now().to_rfc3339(),
            &lens,
            crc(&lens)
        ],
    )
    .map_err(err)?;
    Ok(())
}

/// Creates the session database at `path` holding `session`, which must not exist: it
/// is written whole beside it under a temporary name and linked into place, so `path`
/// never holds half a session, and a file another writer made meanwhile is never
/// replaced ([`SessionError::Changed`]).
pub(crate) fn create(path: &Path, session: &Session) -> Result<Image, SessionError> {
    let io = |source| SessionError::Io {
        action: "write",
        path: path.to_path_buf(),
        source,
    };
    let dir = super::disk::dir_of(path);
    std::fs::create_dir_all(dir).map_err(io)?;
    super::disk::remove_stale_temps(path);
    let tmp = super::disk::temp_path(path);
    crate::exit::register(&tmp);
    crate::exit::register(&journal_of(&tmp));
    let mut state_len = 0;
    let made = (|| -> Result<(), SessionError> {
        let err = |e| sql_error(path, "write", e);
        let mut conn = Connection::open(&tmp).map_err(err)?;
        conn.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {SCHEMA}; \
             PRAGMA journal_mode = DELETE; {SCHEMA_SQL}"
        ))
        .map_err(err)?;
        let empty = Image::of(path, 0, &Session::new(""), StateStored::default());
        let mut delta = delta_of(session, &empty)?;
        let state = serde_json::to_string(&session.state)?;
        state_len = state.len();
        delta.state = StateWrite::Whole(state);
        let tx = conn.transaction().map_err(err)?;
        write_delta(&tx, path, &delta, 1)?;
        tx.commit().map_err(err)?;
        conn.close().map_err(|(_, e)| err(e))?;
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(io)?;
        match std::fs::hard_link(&tmp, path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(SessionError::Changed {
                    path: path.to_path_buf(),
                });
            }
            // A file system without hard links: renamed, after checking nothing is there.
            Err(_) if !path.exists() => std::fs::rename(&tmp, path).map_err(io)?,
            Err(e) => return Err(io(e)),
        }
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&tmp);
    let _ = std::fs::remove_file(journal_of(&tmp));
    crate::exit::forget(&tmp);
    crate::exit::forget(&journal_of(&tmp));
    made?;
    let stored = StateStored {
        state_bytes: state_len,
        ops: 0,
        ops_bytes: 0,
    };
    Ok(Image::of(path, 1, session, stored))
}

/// Saves what `session` changed since `image` (its file's last commit as this process
/// read or wrote it) in one transaction; [`SessionError::Changed`] when another writer
/// committed meanwhile. Returns the image of the file afterwards.
pub(crate) fn apply(session: &Session, image: &Image) -> Result<Image, SessionError> {
    let path = &image.path;
    let mut delta = delta_of(session, image)?;
    let stored = image.stored().after(&delta.state);
    delta.lens.state_ops = stored.ops;
    commit(path, image.generation, &delta)?;
    Ok(Image::of(path, image.generation + 1, session, stored))
}

fn commit(path: &Path, expected: u64, delta: &Delta) -> Result<(), SessionError> {
    let err = |e| sql_error(path, "write", e);
    let mut conn = open_write(path)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    if generation_in(&tx, path)? != expected {
        return Err(SessionError::Changed {
            path: path.to_path_buf(),
        });
    }
    let version: i32 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(err)?;
    if version < SCHEMA {
        tx.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS state_ops (seq INTEGER PRIMARY KEY, body TEXT NOT NULL, \
             crc INTEGER NOT NULL); PRAGMA user_version = {SCHEMA};"
        ))
        .map_err(err)?;
    }
    write_delta(&tx, path, delta, expected + 1)?;
    tx.commit().map_err(err)
}

/// What a question asked over the resume window adds to a session this process does
/// not hold whole ([`super::resume`]).
pub(crate) struct Added<'a> {
    pub(crate) messages: &'a [ModelMessage],
    pub(crate) requests: &'a [super::linear::LinearRequest],
    pub(crate) instructions: &'a [String],
    pub(crate) tool_sets: &'a [Vec<ToolDef>],
    pub(crate) texts: &'a [StoredText],
    pub(crate) timing: &'a RunTiming,
    pub(crate) state: &'a Map<String, Value>,
    /// `groundwork`'s small fields and the other hosts' keys.
    pub(crate) meta: &'a Value,
    pub(crate) extra: &'a Map<String, Value>,
}

/// Commits `added` after `image` (as [`apply`] would for a session holding the file's
/// content and `added`). Returns the image afterwards.
pub(crate) fn append(image: &Image, added: &Added<'_>) -> Result<Image, SessionError> {
    let was = image.lens;
    let state = state_write(image, added.state)?;
    let stored = image.stored().after(&state);
    let lens = Lens {
        messages: was.messages + added.messages.len(),
        requests: was.requests + added.requests.len(),
        instructions: was.instructions + added.instructions.len(),
        tool_sets: was.tool_sets + added.tool_sets.len(),
        texts: was.texts + added.texts.len(),
        timings: was.timings + 1,
        state_ops: stored.ops,
    };
    let delta = Delta {
        lists: [
            (was.messages, bodies(added.messages)?),
            (was.requests, bodies(added.requests)?),
            (was.instructions, bodies(added.instructions)?),
            (was.tool_sets, bodies(added.tool_sets)?),
            (was.texts, bodies(added.texts)?),
            (was.timings, bodies(std::slice::from_ref(added.timing))?),
        ],
        lens,
        meta: serde_json::to_string(added.meta)?,
        extra: serde_json::to_string(added.extra)?,
        state,
    };
    commit(&image.path, image.generation, &delta)?;
    Ok(Image {
        path: image.path.clone(),
        generation: image.generation + 1,
        messages_clean: lens.messages,
        requests_clean: lens.requests,
        lens,
        state: added.state.clone(),
        last: match added.messages.last() {
            Some(m) => Some((lens.messages - 1, m.clone())),
            None => image.last.clone(),
        },
        state_bytes: stored.state_bytes,
        ops_bytes: stored.ops_bytes,
    })
}

#[cfg(test)]
pub(crate) mod tests_support {
    use std::path::Path;

    /// Makes process `pid` the holder of the session's lease.
    pub(crate) fn hold_lease(path: &Path, pid: u32) {
        let conn = super::open_write(path).unwrap();
        conn.execute(
            "INSERT OR REPLACE INTO writer (id, pid, since) VALUES (0, ?1, 'now')",
            [i64::from(pid)],
        )
        .unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::messages::{ModelRequest, ModelResponse, ModelResponsePart, TextPart};

    /// A session of `n` questions (a request and a response each), a state that says
    /// how many, and one request recorded per question.
    fn grown(session: &mut Session, n: usize) {
        for _ in 0..n {
            let q = session.messages.len() / 2;
            let mut messages = session.messages.clone();
            messages.push(ModelRequest::user(format!("question {q}")).into());
            messages.push(
                ModelResponse::new(vec![ModelResponsePart::Text(TextPart::new(format!(
                    "answer {q} {}",
                    "x".repeat(q % 7)
                )))])
                .into(),
            );
            let mut state = session.state.clone();
            state.insert("questions".into(), Value::from(q + 1));
            session.set_messages(messages);
            session.state = state;
        }
    }

    fn questions(path: &Path) -> usize {
        Session::load(path).unwrap().messages.len() / 2
    }

    #[test]
    fn a_session_reads_back_as_saved_and_each_save_adds_only_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        let mut s = Session::new("m");
        grown(&mut s, 3);
        s.save(&path).unwrap();
        assert!(is_database(&path));
        assert_eq!(Session::load(&path).unwrap(), s);
        for _ in 0..5 {
            grown(&mut s, 1);
            s.save(&path).unwrap();
        }
        let back = Session::load(&path).unwrap();
        assert_eq!(back, s);
        assert_eq!(questions(&path), 8);
        // Eight questions, one row each pair: the first commit and five more.
        let conn = open_read(&path).unwrap();
        let commits: i64 = conn
            .query_row("SELECT count(*) FROM commits", [], |r| r.get(0))
            .unwrap();
        assert_eq!(commits, 6);
        // A history replaced from its middle is rewritten from there.
        let mut cut = back.messages.clone();
        cut.truncate(4);
        let mut reloaded = Session::load(&path).unwrap();
        reloaded.set_messages(cut);
        reloaded.save(&path).unwrap();
        assert_eq!(questions(&path), 2);
    }

    /// A large state that changes a little each question is saved as its changes (one
    /// row each), written whole again once the changes pass a quarter of it, and always
    /// reads back exactly.
    #[test]
    fn the_state_is_saved_as_its_changes_and_now_and_then_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        let mut s = Session::new("m");
        let index: Map<String, Value> = (0..400)
            .map(|i| (format!("chunk-{i}"), Value::from("x".repeat(40))))
            .collect();
        s.state.insert("index".into(), Value::Object(index));
        s.save(&path).unwrap();
        let rows = |p: &Path| -> i64 {
            open_read(p)
                .unwrap()
                .query_row("SELECT count(*) FROM state_ops", [], |r| r.get(0))
                .unwrap()
        };
        let (mut most, mut reset) = (0, false);
        for q in 0..60 {
            grown(&mut s, 1);
            s.state["index"]
                .as_object_mut()
                .unwrap()
                .insert(format!("new-{q}"), Value::from("y".repeat(40)));
            s.save(&path).unwrap();
            let n = rows(&path);
            reset |= n < most;
            most = most.max(n);
            assert_eq!(Session::load(&path).unwrap(), s, "question {q}");
        }
        assert!(most >= 5, "changes were written as rows: {most}");
        assert!(reset, "the state was written whole again");
        // Continued from a fresh read, as the next `ask` does.
        let mut again = Session::load(&path).unwrap();
        grown(&mut again, 1);
        again.state.insert("last".into(), Value::from(true));
        again.save(&path).unwrap();
        assert_eq!(Session::load(&path).unwrap(), again);
    }

    /// A file of a newer schema is refused in one line naming its schema and the newest
    /// this build reads, and left as it was.
    #[test]
    fn a_newer_schema_is_refused_by_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        Session::new("m").save(&path).unwrap();
        let newer = SCHEMA + 1;
        open_write(&path)
            .unwrap()
            .execute_batch(&format!("PRAGMA user_version = {newer};"))
            .unwrap();
        let before = std::fs::read(&path).unwrap();
        let e = Session::load(&path).unwrap_err().to_string();
        assert!(
            e.ends_with(&format!(
                "was written by a newer Groundwork (session schema {newer}; this one reads up to {SCHEMA}): update Groundwork to open it"
            )),
            "{e}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    /// A file of schema 1 (before `state_ops`) reads as it is, and its next commit
    /// brings it to this schema.
    #[test]
    fn a_schema_1_file_reads_and_is_continued() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        let mut s = Session::new("m");
        grown(&mut s, 2);
        s.save(&path).unwrap();
        open_write(&path)
            .unwrap()
            .execute_batch("DROP TABLE state_ops; PRAGMA user_version = 1;")
            .unwrap();
        let mut back = Session::load(&path).unwrap();
        assert_eq!(back, s);
        grown(&mut back, 1);
        back.save(&path).unwrap();
        assert_eq!(Session::load(&path).unwrap(), back);
        let version: i32 = open_read(&path)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA);
    }

    #[test]
    fn a_second_writer_is_refused_naming_the_first_and_a_stale_save_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        let mut s = Session::new("m");
        grown(&mut s, 1);
        s.save(&path).unwrap();
        // Another process holds the lease: its pid is named.
        let other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        tests_support::hold_lease(&path, other.id());
        let e = Lease::acquire(&path).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "session {} is being written by another groundwork process (pid {})",
                path.display(),
                other.id()
            )
        );
        let mut other = other;
        other.kill().unwrap();
        other.wait().unwrap();
        // Its holder gone, the lease is taken over.
        assert!(Lease::acquire(&path).unwrap().is_some());
        // A lease whose pid a later process was given (it started after the lease was
        // taken) is taken over too.
        let later = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        {
            let conn = open_write(&path).unwrap();
            conn.execute(
                "INSERT OR REPLACE INTO writer (id, pid, since) VALUES (0, ?1, ?2)",
                params![i64::from(later.id()), "2020-01-01T00:00:00+00:00"],
            )
            .unwrap();
        }
        assert!(Lease::acquire(&path).unwrap().is_some());
        let mut later = later;
        later.kill().unwrap();
        later.wait().unwrap();
        // Two copies read at one commit: the second to save is refused.
        let mut a = Session::load(&path).unwrap();
        let mut b = Session::load(&path).unwrap();
        grown(&mut a, 1);
        grown(&mut b, 2);
        a.save(&path).unwrap();
        assert!(matches!(b.save(&path), Err(SessionError::Changed { .. })));
        assert_eq!(questions(&path), 2);
    }

    #[test]
    fn a_journal_left_by_a_killed_writer_is_rolled_back_in_a_copy_not_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        let mut s = Session::new("m");
        grown(&mut s, 2);
        s.save(&path).unwrap();
        let before = std::fs::read(&path).unwrap();
        // A writer in the middle of its commit, its journal written and the file half
        // changed, as a kill would leave them.
        let journal = journal_of(&path);
        {
            let mut conn = open_write(&path).unwrap();
            conn.execute_batch("PRAGMA cache_size = 1").unwrap();
            let tx = conn.transaction().unwrap();
            for i in 0..200 {
                tx.execute(
                    "INSERT INTO messages (seq, body, crc) VALUES (?1, 'x', 0)",
                    [1000 + i],
                )
                .unwrap();
            }
            // Leave the transaction open and copy the files as they are now.
            std::fs::copy(&path, dir.path().join("mid.sqlite")).unwrap();
            if journal.exists() {
                std::fs::copy(&journal, dir.path().join("mid.sqlite-journal")).unwrap();
            }
            drop(tx);
        }
        let mid = dir.path().join("mid.sqlite");
        let mid_journal = journal_of(&mid);
        assert!(mid_journal.exists(), "the writer spilled its journal");
        let (file, jour) = (
            std::fs::read(&mid).unwrap(),
            std::fs::read(&mid_journal).unwrap(),
        );
        let back = Session::load(&mid).unwrap();
        assert_eq!(back.messages.len(), 4);
        assert_eq!(
            std::fs::read(&mid).unwrap(),
            file,
            "the file is left as it was"
        );
        assert_eq!(std::fs::read(&mid_journal).unwrap(), jour);
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    /// Flipped bytes, truncations and zero-filled stretches at random places of a session
    /// file: every time, the session reads back with every committed question, or is
    /// refused in one line naming the file; the file is never changed by reading it.
    #[test]
    fn damage_anywhere_loses_no_question_silently_and_reading_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        let mut s = Session::new("m");
        for _ in 0..12 {
            grown(&mut s, 1);
            s.save(&path).unwrap();
        }
        let good = std::fs::read(&path).unwrap();
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let (mut refused, mut whole) = (0, 0);
        for case in 0..100 {
            let mut bytes = good.clone();
            let at = next(bytes.len());
            match case % 3 {
                0 => bytes[at] ^= 1 << next(8),
                1 => bytes.truncate(at),
                _ => {
                    let len = 1 + next(64);
                    for b in bytes.iter_mut().skip(at).take(len) {
                        *b = 0;
                    }
                }
            }
            let damaged = dir.path().join(format!("d{case}.sqlite"));
            std::fs::write(&damaged, &bytes).unwrap();
            match Session::load(&damaged) {
                Ok(back) => {
                    assert_eq!(
                        back.messages, s.messages,
                        "case {case}: read without a refusal, it holds every question"
                    );
                    whole += 1;
                }
                Err(e) => {
                    let line = e.to_string();
                    assert!(!line.contains('\n'), "case {case}: {line}");
                    assert!(
                        line.contains(&damaged.display().to_string()),
                        "case {case}: {line}"
                    );
                    refused += 1;
                }
            }
            assert_eq!(std::fs::read(&damaged).unwrap(), bytes, "case {case}");
            let beside: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("d{case}.")) && n != &format!("d{case}.sqlite"))
                .collect();
            assert!(beside.is_empty(), "case {case}: reading made {beside:?}");
        }
        assert!(refused > 0 && whole > 0, "{refused} refused, {whole} whole");
    }
}
