//! The resume row ([`super::super::resume`]) in the session's file: its head and the wire
//! text as append-only chunks, valid only for the commit it names.

use std::path::Path;

use rusqlite::{OptionalExtension as _, TransactionBehavior, params};
use serde_json::{Map, Value};

use super::{
    Image, Lens, SessionError, check_header, crc, generation_in, open_read, open_write, sql_error,
};
use crate::engine::messages::ModelMessage;

/// The image of the file at `path` at commit `generation` with lists `lens` and
/// `state` (as a resume row describes it; `sizes`: the state's as last written whole and
/// the changes' since, [`Image::state_sizes`]).
pub(crate) fn image_at(
    path: &Path,
    generation: u64,
    lens: Lens,
    state: Map<String, Value>,
    last: Option<&ModelMessage>,
    sizes: (usize, usize),
) -> Image {
    Image {
        path: path.to_path_buf(),
        generation,
        messages_clean: lens.messages,
        requests_clean: lens.requests,
        lens,
        state,
        last: last.map(|m| (lens.messages.saturating_sub(1), m.clone())),
        state_bytes: sizes.0,
        ops_bytes: sizes.1,
    }
}

impl Image {
    /// The size of the state as last written whole, and of the changes written since.
    pub(crate) fn state_sizes(&self) -> (usize, usize) {
        (self.state_bytes, self.ops_bytes)
    }
}

/// The resume row of the session at `path`: its head and wire text, when it was
/// written for the file's last commit and reads back whole.
pub(crate) fn read_resume(path: &Path) -> Option<(u64, String, String)> {
    check_header(path).ok()?;
    let conn = open_read(path).ok()?;
    conn.execute_batch("BEGIN").ok()?;
    let generation = generation_in(&conn, path).ok()?;
    let (g, head, wire_len, sum): (i64, String, i64, i64) = conn
        .query_row(
            "SELECT generation, head, wire_len, crc FROM resume WHERE id = 0",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()
        .ok()??;
    if g as u64 != generation || sum != crc(&head) {
        return None;
    }
    let mut wire = String::with_capacity(usize::try_from(wire_len).ok()?);
    let mut stmt = conn
        .prepare("SELECT start, body, crc FROM wire ORDER BY start")
        .ok()?;
    let mut rows = stmt.query([]).ok()?;
    while let Some(row) = rows.next().ok()? {
        let start: i64 = row.get(0).ok()?;
        let body: String = row.get(1).ok()?;
        if start as usize != wire.len() || crc(&body) != row.get::<_, i64>(2).ok()? {
            return None;
        }
        wire.push_str(&body);
    }
    (wire.len() as i64 == wire_len).then_some((generation, head, wire))
}

/// Writes the resume row for commit `generation` (nothing when the file has moved on
/// since). The wire text only grows as questions are asked: what of it is stored
/// already (its first `stored` bytes, as this process read or wrote them) is kept, and
/// only the rest is written.
pub(crate) fn write_resume(
    path: &Path,
    generation: u64,
    head: &str,
    wire: &str,
    stored: usize,
) -> Result<(), SessionError> {
    let err = |e| sql_error(path, "write", e);
    let from = if wire.is_char_boundary(stored) {
        stored
    } else {
        0
    };
    let mut conn = open_write(path)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(err)?;
    if generation_in(&tx, path)? != generation {
        return Ok(());
    }
    tx.execute("DELETE FROM wire WHERE start >= ?1", [from as i64])
        .map_err(err)?;
    if from < wire.len() {
        let rest = &wire[from..];
        tx.execute(
            "INSERT INTO wire (start, body, crc) VALUES (?1, ?2, ?3)",
            params![from as i64, rest, crc(rest)],
        )
        .map_err(err)?;
    }
    tx.execute(
        "INSERT OR REPLACE INTO resume (id, generation, head, wire_len, crc) VALUES (0, ?1, ?2, ?3, ?4)",
        params![generation as i64, head, wire.len() as i64, crc(head)],
    )
    .map_err(err)?;
    tx.commit().map_err(err)
}

/// Removes the resume row (a question that could not continue it).
pub(crate) fn drop_resume(path: &Path) {
    if let Ok(conn) = open_write(path) {
        let _ = conn.execute("DELETE FROM resume", []);
    }
}
