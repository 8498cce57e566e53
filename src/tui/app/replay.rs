//! Counterfactual replay in the workbench: on the selected question (the ledger's row, or
//! the conversation's selected citation), one key opens a popup to choose the changes (a
//! line of `ask`'s flags, as an `eval` arm takes them, with toggles for the common ones);
//! Enter runs the question again in the background from the committed state it started
//! from ([`Effect::Replay`]), Esc cancels; then both runs are shown side by side with a
//! diff of what was sent, and `s` saves the replay beside the session or Esc/`d`
//! discards it. The session shown is never changed.

use std::path::PathBuf;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::engine::cancel::CancelToken;
use crate::host::replay::Replayed;
use crate::tui::keymap::Action;

use super::{App, Effect, Pane};

/// Where the replay is.
pub enum ReplayState {
    /// Choosing the changes.
    Choosing {
        /// 1-based question number.
        question: usize,
        prompt: String,
        /// `ask`'s flags, e.g. `--no-policy --eager`.
        flags: String,
    },
    /// Running in the background.
    Running {
        id: u64,
        question: usize,
        flags: String,
        cancel: CancelToken,
    },
    /// Both runs side by side.
    Shown {
        replayed: Box<Replayed>,
        /// Lines of its diff (counted once).
        diff_lines: usize,
        /// First line of the diff shown.
        scroll: usize,
        /// Where it was saved, once saved.
        saved: Option<PathBuf>,
        /// A save is under way.
        saving: bool,
    },
}

/// The flags the popup's toggles add or remove.
pub const REPLAY_TOGGLES: [(char, &str); 4] = [
    ('p', "--no-policy"),
    ('c', "--no-compaction"),
    ('e', "--eager"),
    ('a', "--capability analysis"),
];

/// `flags` with `toggle` added at the end, or removed when it is there.
pub fn toggle_flag(flags: &str, toggle: &str) -> String {
    let padded = format!(" {} ", flags.trim());
    let needle = format!(" {toggle} ");
    let out = if padded.contains(&needle) {
        padded.replacen(&needle, " ", 1)
    } else {
        format!("{padded}{toggle}")
    };
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl App {
    /// The question a replay would run: the conversation's selected citation's question
    /// when the conversation has focus, else the ledger's selected row, else the last.
    pub fn replay_target(&self) -> Option<usize> {
        let n = self.transcript.turns.len();
        if n == 0 {
            return None;
        }
        if self.focus == Pane::Conversation
            && let Some((q, _)) = self.conversation.selected_citation
        {
            return Some(q.min(n - 1));
        }
        let rows = self.visible_ledger();
        Some(
            rows.get(self.ledger.selected)
                .copied()
                .unwrap_or(n - 1)
                .min(n - 1),
        )
    }

    /// Asks the judge to check the claims of the selected question's answer (the one
    /// a replay would take), each sentence with a marker against the passages it cites.
    pub(super) fn verify_selected(&mut self) -> Vec<Effect> {
        if self.running() || self.verifying.is_some() {
            self.notice = Some("wait for the running question or check to finish".into());
            return Vec::new();
        }
        let Some(i) = self.replay_target() else {
            self.notice = Some("no answer to check yet".into());
            return Vec::new();
        };
        let turn = &self.transcript.turns[i];
        let claims = crate::host::verify::claims(turn).len();
        if claims == 0 {
            self.notice = Some(format!(
                "question {}: no sentence of the answer carries a citation marker; nothing to check",
                i + 1
            ));
            return Vec::new();
        }
        self.verifying = Some(i + 1);
        self.notice = Some(format!(
            "question {}: the judge is checking {claims} claim{}…",
            i + 1,
            if claims == 1 { "" } else { "s" }
        ));
        vec![Effect::Verify {
            number: i + 1,
            turn: Box::new(turn.clone()),
        }]
    }

    /// Opens the replay popup on the selected question.
    pub(super) fn open_replay(&mut self) -> Vec<Effect> {
        if self.running() {
            self.notice = Some("wait for the running question to finish, then replay".into());
            return Vec::new();
        }
        let Some(i) = self.replay_target() else {
            self.notice = Some("no question to replay yet".into());
            return Vec::new();
        };
        self.replay = Some(ReplayState::Choosing {
            question: i + 1,
            prompt: self.transcript.turns[i].prompt.clone(),
            flags: String::new(),
        });
        Vec::new()
    }

    /// A key while the replay popup, its progress or its result is shown.
    pub(super) fn on_replay_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let Some(state) = &mut self.replay else {
            return Vec::new();
        };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        // Quitting works from every replay screen (a running replay is cancelled).
        if self.keymap.action_for(&key, true) == Some(Action::Quit) {
            if let ReplayState::Running { cancel, .. } = state {
                cancel.cancel();
            }
            self.replay = None;
            return self.on_action(Action::Quit);
        }
        match state {
            ReplayState::Choosing {
                question, flags, ..
            } => match key.code {
                KeyCode::Esc => self.replay = None,
                KeyCode::Enter => {
                    let (question, flags) = (*question, flags.trim().to_string());
                    self.replay_seq += 1;
                    let cancel = CancelToken::new();
                    self.replay = Some(ReplayState::Running {
                        id: self.replay_seq,
                        question,
                        flags: flags.clone(),
                        cancel: cancel.clone(),
                    });
                    self.error = None;
                    return vec![Effect::Replay {
                        id: self.replay_seq,
                        question,
                        flags,
                        cancel,
                    }];
                }
                KeyCode::Backspace => {
                    flags.pop();
                }
                KeyCode::Char('u') if ctrl => flags.clear(),
                KeyCode::Char(c) if alt => {
                    if let Some((_, t)) = REPLAY_TOGGLES.iter().find(|(k, _)| *k == c) {
                        *flags = toggle_flag(flags, t);
                    }
                }
                KeyCode::Char(c) if !ctrl => flags.push(c),
                _ => self.dirty = false,
            },
            ReplayState::Running { cancel, .. } => {
                let stop = key.code == KeyCode::Esc || (ctrl && key.code == KeyCode::Char('c'));
                if stop {
                    cancel.cancel();
                    self.replay = None;
                    self.notice = Some("replay cancelled; nothing was written".into());
                } else {
                    self.dirty = false;
                }
            }
            ReplayState::Shown {
                replayed,
                diff_lines,
                scroll,
                saved,
                saving,
            } => {
                let last = diff_lines.saturating_sub(1);
                match key.code {
                    KeyCode::Esc | KeyCode::Char('d') | KeyCode::Char('q') => {
                        self.notice = Some(match saved {
                            Some(p) => format!("replay closed (saved to {})", p.display()),
                            None => "replay discarded; nothing was written".into(),
                        });
                        self.replay = None;
                    }
                    KeyCode::Char('s') => {
                        if let Some(p) = saved {
                            self.notice = Some(format!("already saved to {}", p.display()));
                        } else if *saving {
                            self.notice = Some("saving…".into());
                        } else if let Some(original) = self.session_path.clone() {
                            *saving = true;
                            return vec![Effect::SaveReplay {
                                original,
                                question: replayed.comparison.question,
                                changes: replayed.comparison.changes.clone(),
                                session: Box::new(replayed.session.clone()),
                            }];
                        } else {
                            self.error = Some(
                                "this session has no file to save the replay beside: save it first (ctrl-s)"
                                    .into(),
                            );
                        }
                    }
                    _ => match self.keymap.action_for(&key, false) {
                        Some(Action::Up) => *scroll = scroll.saturating_sub(1),
                        Some(Action::Down) => *scroll = (*scroll + 1).min(last),
                        Some(Action::PageUp) => *scroll = scroll.saturating_sub(10),
                        Some(Action::PageDown) => *scroll = (*scroll + 10).min(last),
                        Some(Action::Top) => *scroll = 0,
                        Some(Action::Bottom) => *scroll = last,
                        _ => self.dirty = false,
                    },
                }
            }
        }
        Vec::new()
    }

    /// A replay came back (ignored when it is not the one running: cancelled, replaced).
    pub(super) fn replayed(&mut self, id: u64, result: Result<Box<Replayed>, String>) {
        let current = matches!(&self.replay, Some(ReplayState::Running { id: i, .. }) if *i == id);
        if !current {
            self.dirty = false;
            return;
        }
        match result {
            Ok(replayed) => {
                self.replay = Some(ReplayState::Shown {
                    diff_lines: replayed.comparison.diff.lines().count(),
                    replayed,
                    scroll: 0,
                    saved: None,
                    saving: false,
                })
            }
            Err(e) => {
                self.replay = None;
                self.error = Some(e);
            }
        }
    }

    /// The replay was saved beside the session (or not).
    pub(super) fn replay_saved(&mut self, result: Result<PathBuf, String>) {
        if let Some(ReplayState::Shown { saved, saving, .. }) = &mut self.replay {
            *saving = false;
            match result {
                Ok(p) => {
                    self.notice = Some(format!("replay saved to {}", p.display()));
                    *saved = Some(p);
                }
                Err(e) => self.error = Some(e),
            }
        }
    }

    /// Pasted text goes to the flags line while the popup is open.
    pub(super) fn paste_into_replay(&mut self, text: &str) -> bool {
        match &mut self.replay {
            Some(ReplayState::Choosing { flags, .. }) => {
                flags.push_str(&text.replace(['\n', '\r'], " "));
                true
            }
            Some(_) => true,
            None => false,
        }
    }

    pub fn replay_running(&self) -> bool {
        matches!(self.replay, Some(ReplayState::Running { .. }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toggles_add_and_remove_one_flag_and_keep_the_rest() {
        assert_eq!(toggle_flag("", "--no-policy"), "--no-policy");
        assert_eq!(
            toggle_flag("--eager  --no-policy", "--no-policy"),
            "--eager"
        );
        assert_eq!(
            toggle_flag("--model m", "--capability analysis"),
            "--model m --capability analysis"
        );
        assert_eq!(
            toggle_flag("--model m --capability analysis", "--capability analysis"),
            "--model m"
        );
    }
}
