//! One writer per file that is not a session database (an experiment's folder:
//! `eval` locks its `results.jsonl`): an advisory lock (`flock`-style, through std's
//! `File::try_lock`) on the sidecar `NAME.lock`, which holds the holder's pid. The
//! sidecar is removed when the lock is released, and when a signal ends the process
//! ([`crate::exit`]). Sessions have their lease in their own file
//! ([`super::store::Lease`]).

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

use super::SessionError;

/// The lock on one session file; released (and its sidecar removed) on drop.
#[derive(Debug)]
pub struct SessionLock {
    file: Option<File>,
    lock_path: PathBuf,
}

/// `NAME.lock` beside `NAME`.
pub fn lock_path(session: &Path) -> PathBuf {
    let mut name = session
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "session.json".into());
    name.push(".lock");
    session.with_file_name(name)
}

/// Whether `file` is the file at `path` now (the sidecar may have been removed and made
/// again by another process between our open and our lock).
#[cfg(unix)]
fn is_current(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn is_current(_file: &File, _path: &Path) -> bool {
    true
}

impl SessionLock {
    /// Takes the lock on `session`, or fails at once with [`SessionError::Busy`] naming
    /// the pid of the process that holds it.
    pub fn acquire(session: &Path) -> Result<SessionLock, SessionError> {
        let lock_path = lock_path(session);
        let io = |source| SessionError::Io {
            action: "lock",
            path: session.to_path_buf(),
            source,
        };
        if let Some(dir) = lock_path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        loop {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&lock_path)
                .map_err(io)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    let mut text = String::new();
                    let _ = file.read_to_string(&mut text);
                    return Err(SessionError::Busy {
                        path: session.to_path_buf(),
                        pid: text.trim().parse().ok(),
                    });
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
            }
            if !is_current(&file, &lock_path) {
                continue;
            }
            // The pid is for the message another writer gets; the lock is the flock
            // itself, so a full disk (no room for the pid) does not stop the question.
            let pid = file
                .set_len(0)
                .and_then(|()| file.rewind())
                .and_then(|()| write!(file, "{}", std::process::id()))
                .and_then(|()| file.flush());
            if let Err(e) = pid {
                tracing::warn!(error = %e, lock = %lock_path.display(), "could not write the pid into the session lock");
            }
            crate::exit::register(&lock_path);
            return Ok(SessionLock {
                file: Some(file),
                lock_path,
            });
        }
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        // Removed while still held, so a process that opens it afterwards makes a new one
        // (and one that opened this one sees it is no longer current).
        #[cfg(unix)]
        let _ = std::fs::remove_file(&self.lock_path);
        crate::exit::forget(&self.lock_path);
        if let Some(f) = self.file.take() {
            let _ = f.unlock();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_with_the_holders_pid_and_free_after_release() {
        let dir = tempfile::tempdir().unwrap();
        let s = dir.path().join("s.json");
        let held = SessionLock::acquire(&s).unwrap();
        assert!(lock_path(&s).exists());
        let err = SessionLock::acquire(&s).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "session {} is being written by another groundwork process (pid {})",
                s.display(),
                std::process::id()
            )
        );
        drop(held);
        assert!(!lock_path(&s).exists(), "the sidecar is removed");
        let again = SessionLock::acquire(&s).unwrap();
        drop(again);
    }
}
