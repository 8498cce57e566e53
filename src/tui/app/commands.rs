//! Keys and the keymap's global actions: a key goes to the open popup, to the keymap's
//! action, or to the composer; actions quit, cancel, move focus, open popups, start a new
//! session, export, and toggle options.

use std::path::PathBuf;

use crossterm::event::KeyEvent;

use crate::tui::keymap::Action;
use crate::tui::theme::{Theme, ThemeName};

use super::{App, Effect, Pane, PathPurpose, Popup};

impl App {
    pub(super) fn on_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        if self.replay.is_some() {
            return self.on_replay_key(key);
        }
        if self.grounding.view.is_some() {
            return self.on_grounding_key(key);
        }
        if self.popup.is_some() {
            return self.on_popup_key(key);
        }
        if self.explorer.is_some() {
            return self.on_explorer_key(key);
        }
        let input_focused = self.focus == Pane::Input;
        if let Some(action) = self.keymap.action_for(&key, input_focused) {
            return self.on_action(action);
        }
        if input_focused {
            return self.on_input_key(key);
        }
        self.dirty = false;
        Vec::new()
    }

    pub(super) fn cancel_running(&mut self) -> bool {
        if let Some(live) = &self.live {
            live.cancel.cancel();
            self.notice = Some("cancelling…".into());
            true
        } else {
            false
        }
    }

    pub(super) fn focus_pane(&mut self, p: Pane) -> Vec<Effect> {
        self.focus = p;
        if p == Pane::Images {
            return self.refresh_images();
        }
        Vec::new()
    }

    pub(super) fn on_action(&mut self, action: Action) -> Vec<Effect> {
        let armed = std::mem::take(&mut self.quit_armed);
        match action {
            Action::NewSession | Action::SaveAs if self.read_only => {
                self.notice = Some("read-only: reviewing never changes or saves a session".into());
                Vec::new()
            }
            Action::VerifyClaims if self.read_only => {
                self.notice = Some(
                    "read-only: reviewing never changes the session; `groundwork verify SESSION` checks its claims (or `eval --verify`)"
                        .into(),
                );
                Vec::new()
            }
            // `q` is easy to press by mistake: with a question running or a question
            // typed, it asks first (a second `q` quits; Ctrl-Q never asks).
            Action::QuitPane if !armed && (self.running() || self.input_holds_text()) => {
                self.quit_armed = true;
                self.notice = Some(format!(
                    "{}: press q again to quit, any other key to stay",
                    if self.running() {
                        "a question is running"
                    } else {
                        "the question input holds text"
                    }
                ));
                Vec::new()
            }
            Action::Quit | Action::QuitPane => {
                self.quit = true;
                vec![Effect::Quit]
            }
            Action::CancelOrQuit => {
                if !self.cancel_running() {
                    self.quit = true;
                    return vec![Effect::Quit];
                }
                Vec::new()
            }
            Action::Interrupt => {
                if !self.cancel_running() {
                    self.focus = Pane::Input;
                }
                Vec::new()
            }
            Action::NextPane | Action::PrevPane => {
                let i = Pane::ORDER
                    .iter()
                    .position(|&p| p == self.focus)
                    .unwrap_or(0);
                let n = Pane::ORDER.len();
                let next = if action == Action::NextPane {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                self.focus_pane(Pane::ORDER[next])
            }
            Action::FocusConversation => self.focus_pane(Pane::Conversation),
            Action::FocusInspector => self.focus_pane(Pane::Inspector),
            Action::FocusLedger => self.focus_pane(Pane::Ledger),
            Action::FocusImages => self.focus_pane(Pane::Images),
            Action::FocusInput => self.focus_pane(Pane::Input),
            Action::VisualGrounding => self.visual_grounding(),
            Action::Palette => {
                self.popup = Some(Popup::Palette {
                    query: String::new(),
                    selected: 0,
                });
                Vec::new()
            }
            Action::Help | Action::HelpPane => {
                self.popup = Some(Popup::Help { scroll: 0 });
                Vec::new()
            }
            Action::AttachImage => self.open_path_prompt(PathPurpose::AttachImage),
            Action::OpenSession => self.open_path_prompt(PathPurpose::Open),
            Action::SaveAs => self.open_path_prompt(PathPurpose::SaveAs),
            Action::HistoryPrev => {
                self.focus = Pane::Input;
                self.recall(-1);
                Vec::new()
            }
            Action::HistoryNext => {
                self.focus = Pane::Input;
                self.recall(1);
                Vec::new()
            }
            Action::NewSession => {
                if self.running() {
                    self.notice = Some("cancel the running question first".into());
                    return Vec::new();
                }
                let path = self
                    .session_path
                    .as_ref()
                    .and_then(|p| p.parent())
                    .map(crate::session::new_session_path);
                vec![Effect::NewSession(path)]
            }
            Action::ExportMarkdown | Action::ExportJson => {
                let base = self
                    .session_path
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("groundwork-session.json"));
                let (path, contents) = if action == Action::ExportMarkdown {
                    (
                        base.with_extension("md"),
                        crate::host::transcript::to_markdown_marked(
                            &self.transcript,
                            &self.export_title(),
                            &self.marks,
                            &self.checks,
                        ),
                    )
                } else {
                    (
                        base.with_extension("export.json"),
                        serde_json::to_string_pretty(&crate::host::transcript::to_json(
                            &self.transcript,
                            &self.session.messages,
                            &self.session.state,
                        ))
                        .unwrap_or_default(),
                    )
                };
                vec![Effect::Export { path, contents }]
            }
            Action::FilterDocuments => {
                self.popup = Some(Popup::Filter {
                    all: None,
                    query: String::new(),
                    cursor: 0,
                    chosen: self.filter_labels.clone(),
                });
                vec![Effect::LoadDocuments]
            }
            Action::Explorer => self.toggle_explorer(),
            Action::Replay => self.open_replay(),
            Action::VerifyClaims => self.verify_selected(),
            Action::DatabaseInfo => {
                self.popup = Some(Popup::Info(None));
                vec![Effect::LoadDbInfo]
            }
            Action::ToggleCompaction => {
                self.options.compaction = !self.options.compaction;
                self.notice = Some(format!(
                    "evidence compaction {} for the next question",
                    on_off(self.options.compaction)
                ));
                Vec::new()
            }
            Action::TogglePolicy => {
                self.options.policy = !self.options.policy;
                self.notice = Some(format!(
                    "citation policy {} for the next question",
                    on_off(self.options.policy)
                ));
                Vec::new()
            }
            Action::ToggleTheme => {
                let next = match self.theme.name {
                    ThemeName::Light => ThemeName::Dark,
                    ThemeName::Dark | ThemeName::Auto => ThemeName::Light,
                };
                self.theme_setting = next;
                self.theme = Theme::for_terminal(next, self.terminal_background);
                // The cached conversation lines carry the old theme's styles.
                self.version += 1;
                Vec::new()
            }
            Action::Grow => {
                self.split = (self.split + 5).min(80);
                self.refresh_images()
            }
            Action::Shrink => {
                self.split = self.split.saturating_sub(5).max(20);
                self.refresh_images()
            }
            Action::Zoom => {
                self.zoom = !self.zoom;
                self.refresh_images()
            }
            nav => self.on_nav(nav),
        }
    }

    fn export_title(&self) -> String {
        let mut t = "Groundwork conversation".to_string();
        if self.scripted_demo() {
            t.push_str(" (scripted demonstration, not a model's work)");
        }
        t
    }
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}
