//! Ending on a signal the way a normal exit ends. SIGTERM and SIGHUP (and SIGINT, for
//! commands that do not take Ctrl-C as "stop the question and report") remove the files
//! Groundwork made for its own use while running (a session's `.lock`, a temporary file
//! being written; each is [`register`]ed while it exists), run the hooks a face added
//! (the workbench restores the terminal), then end the process with the status the
//! signal would have given (128 + its number).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

fn files() -> &'static Mutex<Vec<PathBuf>> {
    static FILES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    &FILES
}

fn hooks() -> &'static Mutex<Vec<fn()>> {
    static HOOKS: Mutex<Vec<fn()>> = Mutex::new(Vec::new());
    &HOOKS
}

/// Removes `path` if a signal ends the process before [`forget`] is called for it.
pub fn register(path: &Path) {
    files()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(path.to_path_buf());
}

/// `path` is no longer Groundwork's to remove (it was removed, renamed or released).
pub fn forget(path: &Path) {
    let mut all = files().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(i) = all.iter().rposition(|p| p == path) {
        all.swap_remove(i);
    }
}

/// Runs `hook` before a signal ends the process (restoring the terminal).
pub fn on_signal(hook: fn()) {
    let mut all = hooks().lock().unwrap_or_else(|p| p.into_inner());
    if !all.contains(&hook) {
        all.push(hook);
    }
}

/// What a signal does before the process ends: the registered files removed, the hooks
/// run. Public for tests.
pub fn clean_up() {
    let paths = std::mem::take(&mut *files().lock().unwrap_or_else(|p| p.into_inner()));
    for p in paths {
        let _ = std::fs::remove_file(p);
    }
    let hooks = hooks().lock().unwrap_or_else(|p| p.into_inner()).clone();
    for hook in hooks {
        hook();
    }
}

/// Listens for SIGTERM and SIGHUP, and SIGINT when `interrupt`; on one, [`clean_up`] and
/// end the process. Call inside the runtime.
#[cfg(unix)]
pub fn install(interrupt: bool) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut kinds = vec![
        (SignalKind::terminate(), libc::SIGTERM),
        (SignalKind::hangup(), libc::SIGHUP),
    ];
    if interrupt {
        kinds.push((SignalKind::interrupt(), libc::SIGINT));
    }
    for (kind, number) in kinds {
        let Ok(mut stream) = signal(kind) else {
            continue;
        };
        tokio::spawn(async move {
            if stream.recv().await.is_some() {
                tracing::info!("ending on signal {number}");
                clean_up();
                std::process::exit(128 + number);
            }
        });
    }
}

#[cfg(not(unix))]
pub fn install(_interrupt: bool) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_up_removes_what_is_registered_and_not_what_was_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let (kept, gone) = (dir.path().join("kept"), dir.path().join("gone"));
        std::fs::write(&kept, "").unwrap();
        std::fs::write(&gone, "").unwrap();
        register(&kept);
        register(&gone);
        forget(&kept);
        clean_up();
        assert!(kept.exists());
        assert!(!gone.exists());
    }
}
