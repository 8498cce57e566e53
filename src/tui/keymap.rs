//! User-bindable actions and the keys bound to them.
//!
//! Every action has a list of keys. `global` actions work everywhere, including while
//! the question input has focus (so they are Ctrl/Alt/Esc/function-key chords);
//! `pane` actions work when a pane other than the input has focus. The defaults can be
//! replaced per action in the config file's `[tui.keys]` table; a key bound to two
//! actions that can both fire is reported at start-up, naming the file and the key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde::{Deserialize, Serialize};

/// Where an action's keys are active.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Global,
    Pane,
}

macro_rules! actions {
    ($( $variant:ident, $scope:ident, $desc:literal, [$($key:literal),*] ;)*) => {
        /// Something a key can do.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum Action { $($variant),* }

        impl Action {
            /// Every action, in help order.
            pub const ALL: &'static [Action] = &[$(Action::$variant),*];

            /// One line for the help and the palette.
            pub fn description(self) -> &'static str {
                match self { $(Action::$variant => $desc),* }
            }

            /// Where its keys work.
            pub fn scope(self) -> Scope {
                match self { $(Action::$variant => Scope::$scope),* }
            }

            fn default_keys(self) -> &'static [&'static str] {
                match self { $(Action::$variant => &[$($key),*]),* }
            }
        }
    };
}

actions! {
    Quit, Global, "quit", ["ctrl-q"];
    CancelOrQuit, Global, "cancel the running question, or quit when none runs", ["ctrl-c"];
    Interrupt, Global, "cancel the running question / close a popup / focus the input", ["esc"];
    NextPane, Global, "next pane", ["tab"];
    PrevPane, Global, "previous pane", ["shift-tab"];
    FocusConversation, Global, "go to the conversation", ["alt-1", "f2"];
    FocusInspector, Global, "go to the request inspector", ["alt-2", "f3"];
    FocusLedger, Global, "go to the citation ledger", ["alt-3", "f4"];
    FocusImages, Global, "go to the page images", ["alt-4", "f5"];
    Explorer, Global, "explore the knowledge base", ["f6", "alt-5"];
    FocusInput, Pane, "go to the question input", ["i", "0"];
    Palette, Global, "command palette", ["ctrl-p"];
    Help, Global, "help: every key", ["f1"];
    HelpPane, Pane, "help: every key", ["?"];
    AttachImage, Global, "attach an image to the question", ["ctrl-i", "ctrl-o"];
    HistoryPrev, Global, "previous question from history", ["ctrl-up"];
    HistoryNext, Global, "next question from history", ["ctrl-down"];
    NewSession, Global, "new session", ["ctrl-n"];
    SaveAs, Global, "save the session as…", ["ctrl-s"];
    OpenSession, Pane, "open a session file", ["o"];
    ExportMarkdown, Pane, "export the conversation to Markdown", ["e"];
    ExportJson, Pane, "export the conversation to JSON", ["E"];
    FilterDocuments, Pane, "document filter", ["f"];
    DatabaseInfo, Pane, "database info", ["I"];
    ToggleCompaction, Global, "toggle evidence compaction for the next question", ["alt-c"];
    TogglePolicy, Global, "toggle the citation policy for the next question", ["alt-p"];
    ToggleTheme, Global, "switch between the dark and light theme", ["alt-t"];
    Replay, Global, "replay the selected question with changes", ["alt-r", "f7"];
    VerifyClaims, Global, "check the answer's claims with the judge model", ["alt-v"];
    QuitPane, Pane, "quit (asks first while a question runs or one is typed)", ["q"];
    Up, Pane, "up / scroll up", ["k", "up"];
    Down, Pane, "down / scroll down", ["j", "down"];
    PageUp, Pane, "page up", ["pageup", "ctrl-u"];
    PageDown, Pane, "page down", ["pagedown", "ctrl-d"];
    Top, Pane, "to the top", ["g", "home"];
    Bottom, Pane, "to the bottom (follow new content)", ["G", "end"];
    Left, Pane, "left / previous", ["h", "left"];
    Right, Pane, "right / next", ["l", "right"];
    PrevRequest, Pane, "inspector: previous model request", ["["];
    NextRequest, Pane, "inspector: next model request", ["]"];
    ToggleDiff, Pane, "inspector: side by side / unified diff", ["d"];
    ToggleInstructions, Pane, "inspector: show or hide the full instructions", ["t"];
    NextCapsuleEntry, Pane, "inspector: select the next capsule entry", ["c"];
    PrevCapsuleEntry, Pane, "inspector: select the previous capsule entry", ["C"];
    Select, Pane, "open / expand the selected item", ["enter"];
    Back, Pane, "close the detail view", ["backspace"];
    ToggleSources, Pane, "conversation: collapse or expand sources", ["s"];
    VisualGrounding, Pane, "visual grounding of the selected evidence", ["V"];
    NextMatch, Pane, "next match (a grounded page, or a found line)", ["n"];
    PrevMatch, Pane, "previous match (a grounded page, or a found line)", ["N"];
    ToggleContext, Pane, "visual grounding: show or hide the context outlines", ["x"];
    MarkAnswer, Pane, "mark the answer (supported / unsupported / invented / wrong)", ["m"];
    PrevQuestion, Pane, "conversation: to the previous question", ["{"];
    NextQuestion, Pane, "conversation: to the next question", ["}"];
    Find, Pane, "conversation: find text (then n / N)", ["/"];
    Copy, Pane, "copy the selected source, else the answer in view (OSC 52)", ["y"];
    ViolationsOnly, Pane, "ledger: show only questions with a violation", ["v"];
    Grow, Pane, "widen the conversation column", ["+", ">"];
    Shrink, Pane, "narrow the conversation column", ["-", "<"];
    Zoom, Pane, "zoom: the focused pane alone; grounding: page, width, 100 %", ["z"];
}

/// A key with its modifiers, as written in the config (`ctrl-p`, `shift-tab`, `G`, `]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub code: KeyCodeOrd,
    pub ctrl: bool,
    pub alt: bool,
    pub shift: bool,
}

/// `KeyCode` subset with an order (for stable help output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyCodeOrd {
    Char(char),
    F(u8),
    Enter,
    Esc,
    Tab,
    Backspace,
    Delete,
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    Home,
    End,
}

impl Key {
    /// Parses `ctrl-p`, `alt-1`, `shift-tab`, `f1`, `enter`, `space`, `G`, `[`.
    pub fn parse(s: &str) -> Result<Key, String> {
        let mut ctrl = false;
        let mut alt = false;
        let mut shift = false;
        let mut rest = s;
        loop {
            let lower = rest.to_ascii_lowercase();
            if rest.len() > 1 && lower.starts_with("ctrl-") {
                ctrl = true;
                rest = &rest[5..];
            } else if rest.len() > 1 && lower.starts_with("alt-") {
                alt = true;
                rest = &rest[4..];
            } else if rest.len() > 1 && lower.starts_with("shift-") {
                shift = true;
                rest = &rest[6..];
            } else {
                break;
            }
        }
        let lower = rest.to_ascii_lowercase();
        let code = match lower.as_str() {
            "enter" | "return" => KeyCodeOrd::Enter,
            "esc" | "escape" => KeyCodeOrd::Esc,
            "tab" => KeyCodeOrd::Tab,
            "backtab" => {
                shift = true;
                KeyCodeOrd::Tab
            }
            "backspace" => KeyCodeOrd::Backspace,
            "delete" | "del" => KeyCodeOrd::Delete,
            "up" => KeyCodeOrd::Up,
            "down" => KeyCodeOrd::Down,
            "left" => KeyCodeOrd::Left,
            "right" => KeyCodeOrd::Right,
            "pageup" | "pgup" => KeyCodeOrd::PageUp,
            "pagedown" | "pgdn" => KeyCodeOrd::PageDown,
            "home" => KeyCodeOrd::Home,
            "end" => KeyCodeOrd::End,
            "space" => KeyCodeOrd::Char(' '),
            f if f.len() >= 2
                && f.starts_with('f')
                && f[1..].chars().all(|c| c.is_ascii_digit()) =>
            {
                let n: u8 = f[1..].parse().map_err(|_| format!("unknown key '{s}'"))?;
                if !(1..=12).contains(&n) {
                    return Err(format!("unknown key '{s}'"));
                }
                KeyCodeOrd::F(n)
            }
            _ => {
                let mut chars = rest.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) => {
                        if ctrl || alt {
                            KeyCodeOrd::Char(c.to_ascii_lowercase())
                        } else {
                            KeyCodeOrd::Char(c)
                        }
                    }
                    _ => return Err(format!("unknown key '{s}'")),
                }
            }
        };
        // Shift on a character is the character itself (`G`, `?`).
        if let KeyCodeOrd::Char(_) = code
            && !ctrl
            && !alt
        {
            shift = false;
        }
        Ok(Key {
            code,
            ctrl,
            alt,
            shift,
        })
    }

    /// The key of a terminal event.
    pub fn from_event(e: &KeyEvent) -> Option<Key> {
        let m = e.modifiers;
        let ctrl = m.contains(KeyModifiers::CONTROL);
        let alt = m.contains(KeyModifiers::ALT);
        let mut shift = m.contains(KeyModifiers::SHIFT);
        let code = match e.code {
            KeyCode::Char(c) => {
                if ctrl || alt {
                    KeyCodeOrd::Char(c.to_ascii_lowercase())
                } else {
                    shift = false;
                    KeyCodeOrd::Char(c)
                }
            }
            KeyCode::F(n) => KeyCodeOrd::F(n),
            KeyCode::Enter => KeyCodeOrd::Enter,
            KeyCode::Esc => KeyCodeOrd::Esc,
            KeyCode::Tab => KeyCodeOrd::Tab,
            KeyCode::BackTab => {
                shift = true;
                KeyCodeOrd::Tab
            }
            KeyCode::Backspace => KeyCodeOrd::Backspace,
            KeyCode::Delete => KeyCodeOrd::Delete,
            KeyCode::Up => KeyCodeOrd::Up,
            KeyCode::Down => KeyCodeOrd::Down,
            KeyCode::Left => KeyCodeOrd::Left,
            KeyCode::Right => KeyCodeOrd::Right,
            KeyCode::PageUp => KeyCodeOrd::PageUp,
            KeyCode::PageDown => KeyCodeOrd::PageDown,
            KeyCode::Home => KeyCodeOrd::Home,
            KeyCode::End => KeyCodeOrd::End,
            _ => return None,
        };
        Some(Key {
            code,
            ctrl,
            alt,
            shift,
        })
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ctrl {
            f.write_str("ctrl-")?;
        }
        if self.alt {
            f.write_str("alt-")?;
        }
        if self.shift {
            f.write_str("shift-")?;
        }
        match self.code {
            KeyCodeOrd::Char(' ') => f.write_str("space"),
            KeyCodeOrd::Char(c) => write!(f, "{c}"),
            KeyCodeOrd::F(n) => write!(f, "f{n}"),
            other => f.write_str(&format!("{other:?}").to_ascii_lowercase()),
        }
    }
}

/// The bindings in effect.
#[derive(Debug, Clone, PartialEq)]
pub struct Keymap {
    bindings: BTreeMap<Action, Vec<Key>>,
}

/// A bad `[tui.keys]` table.
#[derive(Debug, thiserror::Error)]
pub enum KeymapError {
    #[error("{file}: [tui.keys] {action}: {message}")]
    BadKey {
        file: String,
        action: String,
        message: String,
    },
    #[error("{file}: [tui.keys] unknown action '{action}'")]
    UnknownAction { file: String, action: String },
    #[error("{file}: [tui.keys] key '{key}' is bound to both {first} and {second}")]
    Conflict {
        file: String,
        key: String,
        first: String,
        second: String,
    },
    #[error(
        "{file}: [tui.keys] {action}: '{key}' cannot be global; use a Ctrl, Alt, Esc or function key"
    )]
    PlainGlobal {
        file: String,
        action: String,
        key: String,
    },
}

impl KeymapError {
    /// The actions the error is about, as named in the config (two for a conflict).
    pub fn actions(&self) -> Vec<&str> {
        match self {
            KeymapError::BadKey { action, .. }
            | KeymapError::UnknownAction { action, .. }
            | KeymapError::PlainGlobal { action, .. } => vec![action],
            KeymapError::Conflict { first, second, .. } => vec![second, first],
        }
    }

    /// What is wrong, without the file and the table (for a config error naming both).
    pub fn detail(&self) -> String {
        match self {
            KeymapError::BadKey { message, .. } => message.clone(),
            KeymapError::UnknownAction { action, .. } => format!("unknown action '{action}'"),
            KeymapError::Conflict {
                key, first, second, ..
            } => format!("key '{key}' is bound to both {first} and {second}"),
            KeymapError::PlainGlobal { key, .. } => {
                format!("'{key}' cannot be global; use a Ctrl, Alt, Esc or function key")
            }
        }
    }
}

fn action_name(a: Action) -> String {
    serde_json::to_value(a)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

impl Default for Keymap {
    fn default() -> Self {
        let bindings = Action::ALL
            .iter()
            .map(|&a| {
                let keys = a
                    .default_keys()
                    .iter()
                    .map(|k| Key::parse(k).expect("default keys parse"))
                    .collect();
                (a, keys)
            })
            .collect();
        Keymap { bindings }
    }
}

impl Keymap {
    /// The defaults with `overrides` (action name → keys) applied and checked.
    pub fn with_overrides(
        overrides: &BTreeMap<String, Vec<String>>,
        file: &Path,
    ) -> Result<Keymap, KeymapError> {
        let file_s = file.display().to_string();
        let mut map = Keymap::default();
        for (name, keys) in overrides {
            let action: Action = serde_json::from_value(serde_json::Value::String(name.clone()))
                .map_err(|_| KeymapError::UnknownAction {
                    file: file_s.clone(),
                    action: name.clone(),
                })?;
            let mut parsed = Vec::new();
            for k in keys {
                let key = Key::parse(k).map_err(|message| KeymapError::BadKey {
                    file: file_s.clone(),
                    action: name.clone(),
                    message,
                })?;
                if action.scope() == Scope::Global && !is_chord(&key) {
                    return Err(KeymapError::PlainGlobal {
                        file: file_s.clone(),
                        action: name.clone(),
                        key: k.clone(),
                    });
                }
                parsed.push(key);
            }
            map.bindings.insert(action, parsed);
        }
        map.check(&file_s)?;
        Ok(map)
    }

    fn check(&self, file: &str) -> Result<(), KeymapError> {
        let mut seen: BTreeMap<Key, Action> = BTreeMap::new();
        for (&action, keys) in &self.bindings {
            for key in keys {
                if let Some(&other) = seen.get(key) {
                    return Err(KeymapError::Conflict {
                        file: file.to_string(),
                        key: key.to_string(),
                        first: action_name(other),
                        second: action_name(action),
                    });
                }
                seen.insert(*key, action);
            }
        }
        Ok(())
    }

    /// The action of `event`; `input_focused` limits it to global actions.
    pub fn action_for(&self, event: &KeyEvent, input_focused: bool) -> Option<Action> {
        let key = Key::from_event(event)?;
        self.bindings.iter().find_map(|(&a, keys)| {
            let active = !input_focused || a.scope() == Scope::Global;
            (active && keys.contains(&key)).then_some(a)
        })
    }

    /// The keys of `action`, e.g. `ctrl-p`.
    pub fn keys(&self, action: Action) -> Vec<String> {
        self.bindings
            .get(&action)
            .map(|ks| ks.iter().map(Key::to_string).collect())
            .unwrap_or_default()
    }

    /// The first key of `action`, for hints.
    pub fn hint(&self, action: Action) -> String {
        self.keys(action).into_iter().next().unwrap_or_default()
    }

    /// Every binding as a Markdown table, in help order: the keys, what they do, the
    /// action's name in `[tui.keys]` and where they work (docs/reference/keys.md is this
    /// table for the defaults, checked by tests/project/docs.rs).
    pub fn reference_table(&self) -> String {
        let mut out =
            String::from("| keys | action | name in `[tui.keys]` | where |\n|---|---|---|---|\n");
        for &a in Action::ALL {
            let keys: Vec<String> = self.keys(a).iter().map(|k| format!("`{k}`")).collect();
            let scope = match a.scope() {
                Scope::Global => "everywhere",
                Scope::Pane => "in a pane",
            };
            out.push_str(&format!(
                "| {} | {} | `{}` | {scope} |\n",
                keys.join(", "),
                a.description(),
                action_name(a)
            ));
        }
        out
    }

    /// `(keys, description)` for every action, in help order.
    pub fn help_rows(&self) -> Vec<(String, &'static str)> {
        Action::ALL
            .iter()
            .map(|&a| (self.keys(a).join(", "), a.description()))
            .collect()
    }
}

fn is_chord(k: &Key) -> bool {
    k.ctrl || k.alt || matches!(k.code, KeyCodeOrd::Esc | KeyCodeOrd::F(_) | KeyCodeOrd::Tab)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyEventKind;

    fn ev(code: KeyCode, m: KeyModifiers) -> KeyEvent {
        KeyEvent::new_with_kind(code, m, KeyEventKind::Press)
    }

    #[test]
    fn defaults_have_no_conflicts_and_resolve() {
        let k = Keymap::default();
        k.check("defaults").unwrap();
        assert_eq!(
            k.action_for(&ev(KeyCode::Char('p'), KeyModifiers::CONTROL), true),
            Some(Action::Palette)
        );
        assert_eq!(
            k.action_for(&ev(KeyCode::Char('G'), KeyModifiers::SHIFT), false),
            Some(Action::Bottom)
        );
        // Plain keys do nothing while typing a question.
        assert_eq!(
            k.action_for(&ev(KeyCode::Char('q'), KeyModifiers::NONE), true),
            None
        );
        assert_eq!(
            k.action_for(&ev(KeyCode::BackTab, KeyModifiers::SHIFT), true),
            Some(Action::PrevPane)
        );
        assert_eq!(
            k.action_for(&ev(KeyCode::Char(']'), KeyModifiers::NONE), false),
            Some(Action::NextRequest)
        );
    }

    #[test]
    fn overrides_replace_keys_and_conflicts_name_file_and_key() {
        let mut o = BTreeMap::new();
        o.insert("quit".to_string(), vec!["ctrl-x".to_string()]);
        let k = Keymap::with_overrides(&o, Path::new("/c/config.toml")).unwrap();
        assert_eq!(k.keys(Action::Quit), ["ctrl-x"]);
        assert_eq!(
            k.action_for(&ev(KeyCode::Char('q'), KeyModifiers::CONTROL), true),
            None
        );

        o.insert("palette".to_string(), vec!["ctrl-x".to_string()]);
        let err = Keymap::with_overrides(&o, Path::new("/c/config.toml")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/c/config.toml"), "{msg}");
        assert!(msg.contains("'ctrl-x'"), "{msg}");
        assert!(msg.contains("quit") && msg.contains("palette"), "{msg}");

        let mut bad = BTreeMap::new();
        bad.insert("warp".to_string(), vec!["x".to_string()]);
        assert!(matches!(
            Keymap::with_overrides(&bad, Path::new("c.toml")),
            Err(KeymapError::UnknownAction { .. })
        ));
        let mut plain = BTreeMap::new();
        plain.insert("palette".to_string(), vec!["p".to_string()]);
        assert!(matches!(
            Keymap::with_overrides(&plain, Path::new("c.toml")),
            Err(KeymapError::PlainGlobal { .. })
        ));
    }

    #[test]
    fn keys_round_trip_through_display() {
        for s in [
            "ctrl-p",
            "alt-1",
            "shift-tab",
            "f1",
            "G",
            "[",
            "enter",
            "space",
        ] {
            assert_eq!(Key::parse(s).unwrap().to_string(), s);
        }
        assert!(Key::parse("hyper-x").is_err());
    }
}
