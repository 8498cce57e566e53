//! Colours: a dark and a light theme. Every style the views use comes from here.

use ratatui::style::{Color, Modifier, Style};
use serde::{Deserialize, Serialize};

/// Which theme.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThemeName {
    #[default]
    Dark,
    Light,
}

/// The styles of one theme.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: ThemeName,
    pub text: Style,
    pub dim: Style,
    pub title: Style,
    pub border: Style,
    pub border_focus: Style,
    pub user: Style,
    pub assistant: Style,
    pub running: Style,
    pub ok: Style,
    pub failed: Style,
    pub selected: Style,
    pub capsule: Style,
    pub receipt: Style,
    pub stripped: Style,
    pub redirect: Style,
    pub changed: Style,
    pub grounded: Style,
    pub ungrounded: Style,
    pub missing: Style,
    pub error: Style,
    pub status: Style,
    pub key: Style,
}

impl Theme {
    pub fn by_name(name: ThemeName) -> Self {
        match name {
            ThemeName::Dark => Self::dark(),
            ThemeName::Light => Self::light(),
        }
    }

    pub fn dark() -> Self {
        let fg = Style::default().fg(Color::Gray);
        Theme {
            name: ThemeName::Dark,
            text: fg,
            dim: Style::default().fg(Color::DarkGray),
            title: Style::default()
                .fg(Color::White)
                .add_modifier(Modifier::BOLD),
            border: Style::default().fg(Color::DarkGray),
            border_focus: Style::default().fg(Color::Cyan),
            user: Style::default()
                .fg(Color::LightBlue)
                .add_modifier(Modifier::BOLD),
            assistant: Style::default()
                .fg(Color::LightGreen)
                .add_modifier(Modifier::BOLD),
            running: Style::default().fg(Color::Yellow),
            ok: Style::default().fg(Color::Green),
            failed: Style::default().fg(Color::Red),
            selected: Style::default()
                .bg(Color::Rgb(45, 55, 72))
                .add_modifier(Modifier::BOLD),
            capsule: Style::default().fg(Color::Black).bg(Color::Cyan),
            receipt: Style::default().fg(Color::Black).bg(Color::Yellow),
            stripped: Style::default().fg(Color::Black).bg(Color::Magenta),
            redirect: Style::default().fg(Color::White).bg(Color::Red),
            changed: Style::default().fg(Color::Black).bg(Color::Blue),
            grounded: Style::default().fg(Color::Green),
            ungrounded: Style::default().fg(Color::Yellow),
            missing: Style::default().fg(Color::Red),
            error: Style::default()
                .fg(Color::LightRed)
                .add_modifier(Modifier::BOLD),
            status: Style::default().fg(Color::Gray).bg(Color::Rgb(30, 30, 40)),
            key: Style::default()
                .fg(Color::Cyan)
                .add_modifier(Modifier::BOLD),
        }
    }

    pub fn light() -> Self {
        Theme {
            name: ThemeName::Light,
            text: Style::default().fg(Color::Black),
            dim: Style::default().fg(Color::Gray),
            title: Style::default()
                .fg(Color::Black)
                .add_modifier(Modifier::BOLD),
            border: Style::default().fg(Color::Gray),
            border_focus: Style::default().fg(Color::Blue),
            user: Style::default()
                .fg(Color::Blue)
                .add_modifier(Modifier::BOLD),
            assistant: Style::default()
                .fg(Color::Green)
                .add_modifier(Modifier::BOLD),
            running: Style::default().fg(Color::Rgb(160, 110, 0)),
            ok: Style::default().fg(Color::Green),
            failed: Style::default().fg(Color::Red),
            selected: Style::default()
                .bg(Color::Rgb(210, 225, 245))
                .add_modifier(Modifier::BOLD),
            capsule: Style::default().fg(Color::Black).bg(Color::LightCyan),
            receipt: Style::default().fg(Color::Black).bg(Color::LightYellow),
            stripped: Style::default().fg(Color::Black).bg(Color::LightMagenta),
            redirect: Style::default().fg(Color::White).bg(Color::Red),
            changed: Style::default().fg(Color::Black).bg(Color::LightBlue),
            grounded: Style::default().fg(Color::Green),
            ungrounded: Style::default().fg(Color::Rgb(160, 110, 0)),
            missing: Style::default().fg(Color::Red),
            error: Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
            status: Style::default()
                .fg(Color::Black)
                .bg(Color::Rgb(225, 225, 232)),
            key: Style::default()
                .fg(Color::Blue)
                .add_modifier(Modifier::BOLD),
        }
    }
}
