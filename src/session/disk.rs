//! The file side of sessions: atomic writes whose temporary files name their writer's
//! pid, removal of the temporaries a killed writer left behind, unique names for new
//! sessions, and the stamp (identity and size of the file) this process last read or
//! wrote, so a save notices that another writer changed the file meanwhile.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// Temporaries without a pid in their name (written by earlier Groundwork versions) are
/// removed once they are this old.
const UNNAMED_TEMP_AGE: Duration = Duration::from_secs(3600);

pub(crate) fn dir_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session.json".into())
}

/// `.NAME.PID.RANDOM.tmp` beside `path`.
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    let random = uuid::Uuid::new_v4().simple().to_string();
    dir_of(path).join(format!(
        ".{}.{}.{}.tmp",
        file_name(path),
        std::process::id(),
        &random[..12]
    ))
}

/// Whether process `pid` is running (a zombie is not).
#[cfg(unix)]
pub(crate) fn pid_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let exists = unsafe { libc::kill(raw, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !exists {
        return false;
    }
    // A killed child its parent has not reaped yet still exists, as a zombie.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_none_or(|state| state != "Z"),
        Err(_) => true,
    }
}

/// Whether process `pid` is running; without a way to ask, assume it is.
#[cfg(not(unix))]
pub(crate) fn pid_alive(_pid: u32) -> bool {
    true
}

/// Removes the temporaries of `path` that a dead writer left behind: those whose pid is
/// not running, and pid-less ones (earlier versions) older than an hour. Best effort;
/// returns how many were removed.
pub fn remove_stale_temps(path: &Path) -> usize {
    let prefix = format!(".{}.", file_name(path));
    let Ok(entries) = std::fs::read_dir(dir_of(path)) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(middle) = name.strip_prefix(&prefix).and_then(|rest| {
            rest.strip_suffix(".tmp")
                .or_else(|| rest.strip_suffix(".tmp-journal"))
        }) else {
            continue;
        };
        let stale = match middle.split_once('.') {
            Some((pid, _)) if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) => {
                let pid: u32 = pid.parse().unwrap_or(0);
                pid != std::process::id() && !pid_alive(pid)
            }
            _ => entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_some_and(|age| age > UNNAMED_TEMP_AGE),
        };
        if stale && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory (named
/// after this process) is written, synced and renamed over the target, and removed on
/// failure. Temporaries that killed writers left beside `path` are removed first. A kill
/// at any moment leaves `path` as it was or as written, never torn.
///
/// The bytes pass through the redactor first
/// ([`crate::errors::redact_file_bytes`]): no secret reaches a report, an export or a
/// settings file. (A session's snapshot is written by [`write_atomic_stamped`], from a
/// history its runs already redacted.)
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_stamped(path, &crate::errors::redact_file_bytes(bytes)).map(|_| ())
}

/// [`write_atomic`], returning the stamp of the file written.
pub(crate) fn write_atomic_stamped(path: &Path, bytes: &[u8]) -> std::io::Result<Stamp> {
    let dir = dir_of(path);
    std::fs::create_dir_all(dir)?;
    remove_stale_temps(path);
    let tmp = temp_path(path);
    crate::exit::register(&tmp);
    let write = || -> std::io::Result<Stamp> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        let stamp = Stamp::of(&f.metadata()?);
        std::fs::rename(&tmp, path)?;
        // Make the rename durable; not every platform allows syncing a directory.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(stamp)
    };
    let written = write().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    });
    crate::exit::forget(&tmp);
    written
}

/// A new session file name in `dir` that no other session has: local time to the
/// second, then a random suffix (`20261201-081918-3f9a1c07.sqlite`).
pub fn new_session_path(dir: &Path) -> PathBuf {
    loop {
        let random = uuid::Uuid::new_v4().simple().to_string();
        let p = dir.join(format!(
            "{}-{}.sqlite",
            chrono::Local::now().format("%Y%m%d-%H%M%S"),
            &random[..8]
        ));
        if !p.exists() {
            return p;
        }
    }
}

/// A file name beside `path` for a conversation that could not be saved to `path`:
/// `NAME-kept-TIME-RANDOM.EXT` (the extension `path` has, `sqlite` when none).
pub fn kept_path(path: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session".into());
    let ext = path
        .extension()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sqlite".into());
    loop {
        let random = uuid::Uuid::new_v4().simple().to_string();
        let p = dir_of(path).join(format!(
            "{stem}-kept-{}-{}.{ext}",
            chrono::Local::now().format("%Y%m%d-%H%M%S"),
            &random[..8]
        ));
        if !p.exists() {
            return p;
        }
    }
}

/// What identifies one version of a file: which file it is, its size and modification
/// time. Every atomic save makes a new file, so a save by anyone else changes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    #[cfg(unix)]
    inode: (u64, u64),
}

impl Stamp {
    pub(crate) fn of(meta: &std::fs::Metadata) -> Stamp {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt as _;
        Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            #[cfg(unix)]
            inode: (meta.dev(), meta.ino()),
        }
    }

    pub(crate) fn of_path(path: &Path) -> Option<Stamp> {
        std::fs::metadata(path).ok().map(|m| Stamp::of(&m))
    }
}

/// Per session file (absolute path): the stamp this process last read or wrote, and
/// where its conversation went when it could not be saved there.
#[derive(Default)]
struct Known {
    stamps: HashMap<PathBuf, Stamp>,
    moved: HashMap<PathBuf, PathBuf>,
}

fn known() -> std::sync::MutexGuard<'static, Known> {
    static KNOWN: OnceLock<Mutex<Known>> = OnceLock::new();
    KNOWN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn key(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Whether two paths name the same session file.
pub(crate) fn same_file(a: &Path, b: &Path) -> bool {
    key(a) == key(b)
}

/// Remembers the version of `path` this process read or wrote.
pub(crate) fn remember(path: &Path, stamp: Stamp) {
    known().stamps.insert(key(path), stamp);
}

/// Whether `path` on disk is still the version this process last read or wrote (also
/// true when the process never read it, or when it does not exist).
pub(crate) fn unchanged(path: &Path) -> bool {
    let Some(now) = Stamp::of_path(path) else {
        return true;
    };
    known().stamps.get(&key(path)).is_none_or(|s| *s == now)
}

/// Where saves of `path` go since they could not go to `path` itself.
pub(crate) fn moved(path: &Path) -> Option<PathBuf> {
    known().moved.get(&key(path)).cloned()
}

/// Saves of `path` go to `to` from now on.
pub(crate) fn remember_move(path: &Path, to: &Path) {
    known().moved.insert(key(path), to.to_path_buf());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_temps_of_dead_writers_are_removed_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        // A pid that is not running: a child that has exited and been reaped.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let dead_tmp = dir.path().join(format!(".s.json.{dead}.abc.tmp"));
        let live_tmp = dir
            .path()
            .join(format!(".s.json.{}.abc.tmp", std::process::id()));
        let other = dir.path().join(format!(".t.json.{dead}.abc.tmp"));
        for p in [&dead_tmp, &live_tmp, &other] {
            std::fs::write(p, "{").unwrap();
        }
        write_atomic(&path, b"{}").unwrap();
        assert!(!dead_tmp.exists(), "the dead writer's temp is removed");
        assert!(live_tmp.exists(), "a running writer's temp is kept");
        assert!(other.exists(), "another file's temp is not touched");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}");
    }

    #[test]
    fn new_session_names_are_unique_within_a_second() {
        let dir = tempfile::tempdir().unwrap();
        let names: std::collections::HashSet<_> =
            (0..50).map(|_| new_session_path(dir.path())).collect();
        assert_eq!(names.len(), 50);
    }
}
