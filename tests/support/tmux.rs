//! Running the real binary in a real terminal: a private tmux server per test.

use std::process::Command;
use std::time::{Duration, Instant};

pub struct Tmux {
    socket: String,
    session: String,
    /// The server's configuration file (`-f`); none reads no file at all.
    config: tempfile::NamedTempFile,
}

impl Tmux {
    /// A tmux server of its own (`-L`), so tests never touch the user's sessions.
    pub fn new(name: &str) -> Self {
        Self::with_config(name, "")
    }

    /// A tmux server of its own whose configuration file holds `config` (tmux commands,
    /// e.g. `set -g window-style bg=colour231`), not the user's `~/.tmux.conf`.
    pub fn with_config(name: &str, config: &str) -> Self {
        assert!(
            Command::new("tmux").arg("-V").output().is_ok(),
            "tmux is required for this test (.ci/setup-tests installs it)"
        );
        let file = tempfile::NamedTempFile::new().expect("tmux config file");
        std::fs::write(file.path(), config).expect("write tmux config");
        Tmux {
            socket: format!("gw-{name}-{}", std::process::id()),
            session: "gw".into(),
            config: file,
        }
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket, "-f"]).arg(self.config.path());
        c
    }

    /// Starts `sh -c script` in a `w`×`h` terminal.
    pub fn start(&self, script: &str, w: u16, h: u16) {
        let status = self
            .cmd()
            .args(["new-session", "-d", "-s", &self.session, "-x"])
            .arg(w.to_string())
            .arg("-y")
            .arg(h.to_string())
            .args(["sh", "-c", script])
            .status()
            .expect("tmux new-session");
        assert!(status.success());
    }

    pub fn capture(&self) -> String {
        let o = self
            .cmd()
            .args(["capture-pane", "-p", "-t", &self.session])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The screen with its colours and attributes as escape sequences (`capture-pane -e`).
    pub fn capture_styled(&self) -> String {
        let o = self
            .cmd()
            .args(["capture-pane", "-p", "-e", "-t", &self.session])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    pub fn send(&self, keys: &[&str]) {
        let status = self
            .cmd()
            .args(["send-keys", "-t", &self.session])
            .args(keys)
            .status()
            .expect("tmux send-keys");
        assert!(status.success());
    }

    /// Polls the screen until `pred` holds (at most `secs` seconds).
    pub async fn wait_for(&self, what: &str, secs: u64, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if pred(&screen) {
                // A capture can catch a frame half drawn (the panes, not yet the status
                // bar): the capture a moment later has the whole frame.
                tokio::time::sleep(Duration::from_millis(150)).await;
                let whole = self.capture();
                if pred(&whole) {
                    return whole;
                }
            }
            if start.elapsed() > Duration::from_secs(secs) {
                panic!("timed out waiting for {what}; screen:\n{screen}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

/// After the program exits, the script prints this and the terminal modes.
pub const EXIT_SUFFIX: &str = "echo GW_EXIT=$?; stty -a | tr ' ' '\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; echo; echo GW_END; sleep 60";

impl Tmux {
    /// Waits until the program has exited and the terminal modes are printed.
    pub async fn wait_exit(&self) -> String {
        self.wait_for("the exit", 30, |s| s.contains("GW_END"))
            .await
    }
}

/// Checks the exit line and that cooked mode, echo and the main screen are back.
pub fn assert_restored(screen: &str, gone: &str) {
    assert!(screen.contains("GW_EXIT=0"), "{screen}");
    let modes = screen
        .lines()
        .find(|l| l.contains("icanon"))
        .unwrap_or_default();
    let words: Vec<&str> = modes.split_whitespace().collect();
    assert!(
        words.contains(&"icanon") && words.contains(&"echo"),
        "terminal left in raw mode: {modes:?}\n{screen}"
    );
    assert!(
        !screen.contains(gone),
        "alternate screen still shown:\n{screen}"
    );
}
