//! The lease of a session's one writer: a row of the session's file naming its process.

use std::path::{Path, PathBuf};

use rusqlite::{OptionalExtension as _, TransactionBehavior, params};

use super::{SessionError, open_write, sql_error};

/// The lease of a session's one writer: a row naming this process, taken in a write
/// transaction and removed on drop. A lease whose holder is no longer running (killed)
/// is taken over.
#[derive(Debug)]
pub struct Lease {
    path: PathBuf,
}

impl Lease {
    /// Takes the lease of the session database at `path`, or fails at once with
    /// [`SessionError::Busy`] naming the pid of the process that holds it. A path with
    /// no file yet needs none (a new file is linked into place only if none is there).
    pub fn acquire(path: &Path) -> Result<Option<Lease>, SessionError> {
        if !path.exists() {
            return Ok(None);
        }
        let key = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        if !held().insert(key.clone()) {
            return Err(SessionError::Busy {
                path: path.to_path_buf(),
                pid: Some(std::process::id()),
            });
        }
        let taken = Self::take(path);
        if !matches!(taken, Ok(Some(_))) {
            held().remove(&key);
        }
        taken
    }

    fn take(path: &Path) -> Result<Option<Lease>, SessionError> {
        let err = |e| sql_error(path, "write", e);
        let mut conn = open_write(path)?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let holder: Option<(i64, String)> = tx
            .query_row("SELECT pid, since FROM writer WHERE id = 0", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
            .map_err(err)?;
        let me = std::process::id();
        if let Some((pid, since)) = holder.and_then(|(p, s)| Some((u32::try_from(p).ok()?, s)))
            && pid != me
            && super::super::disk::pid_alive(pid)
            && !started_after(pid, &since)
        {
            return Err(SessionError::Busy {
                path: path.to_path_buf(),
                pid: Some(pid),
            });
        }
        tx.execute(
            "INSERT OR REPLACE INTO writer (id, pid, since) VALUES (0, ?1, ?2)",
            params![i64::from(me), chrono::Utc::now().to_rfc3339()],
        )
        .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(Some(Lease {
            path: path.to_path_buf(),
        }))
    }
}

/// Whether process `pid` started after `since` (an RFC 3339 time): then it is not the
/// process that took a lease at `since`, whose pid it was given again. Where that cannot
/// be told, it is not.
#[cfg(target_os = "linux")]
fn started_after(pid: u32, since: &str) -> bool {
    let Ok(since) = chrono::DateTime::parse_from_rfc3339(since) else {
        return false;
    };
    // Field 22 of /proc/PID/stat: the start in clock ticks after boot (`btime`).
    let started = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let (_, rest) = s.rsplit_once(')')?;
            rest.split_whitespace().nth(19)?.parse::<u64>().ok()
        });
    let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|b| b.trim().parse::<i64>().ok())
    });
    // SAFETY: sysconf reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    match (started, boot) {
        (Some(started), Some(boot)) if ticks > 0 => {
            let at = boot as f64 + started as f64 / ticks as f64;
            // A second of slack: the clock ticks and btime are coarse.
            at > since.timestamp() as f64 + 1.0
        }
        _ => false,
    }
}

#[cfg(not(target_os = "linux"))]
fn started_after(_pid: u32, _since: &str) -> bool {
    false
}

/// The sessions whose lease this process holds.
fn held() -> std::sync::MutexGuard<'static, std::collections::BTreeSet<PathBuf>> {
    static HELD: std::sync::Mutex<std::collections::BTreeSet<PathBuf>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for Lease {
    fn drop(&mut self) {
        held().remove(&std::path::absolute(&self.path).unwrap_or_else(|_| self.path.clone()));
        if let Ok(conn) = open_write(&self.path) {
            let _ = conn.execute(
                "DELETE FROM writer WHERE pid = ?1",
                [i64::from(std::process::id())],
            );
        }
    }
}
