//! `[tui]`: the workbench's theme and key bindings, as plain data. The TUI turns the
//! binding strings into key events and reports bad keys and conflicts
//! (`crate::tui::keymap`); nothing here knows about the terminal.
//!
//! ```toml
//! [tui]
//! theme = "light"            # auto (default: follows the terminal), dark, light
//! [tui.keys]
//! help = ["f10", "ctrl-h"]   # action name -> keys, replacing that action's defaults
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Which theme. `auto` (the default) follows the terminal's background: light on a
/// light background, dark otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThemeName {
    #[default]
    Auto,
    Dark,
    Light,
}

/// `[tui]` of the config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct TuiConfig {
    #[serde(default)]
    pub theme: ThemeName,
    /// Action name (`quit`, `help`, ...) → the keys bound to it, as written
    /// (`ctrl-p`, `shift-tab`, `G`).
    #[serde(default)]
    pub keys: BTreeMap<String, Vec<String>>,
    /// The 1-based line of the file that binds each action in `keys`, when known; for
    /// errors about a binding.
    #[serde(skip)]
    pub key_lines: BTreeMap<String, usize>,
}

impl TuiConfig {
    /// Records the line of each binding in `text`, the file this was parsed from.
    pub(super) fn locate_keys(&mut self, text: &str) {
        self.key_lines = self
            .keys
            .keys()
            .filter_map(|action| {
                let line = super::line_of_key(text, &format!("tui.keys.{action}"))
                    .or_else(|| super::line_of_key(text, "tui.keys"))?;
                Some((action.clone(), line))
            })
            .collect();
    }

    /// The line binding `action`, else 1.
    pub fn line_of(&self, action: &str) -> usize {
        self.key_lines.get(action).copied().unwrap_or(1)
    }
}
