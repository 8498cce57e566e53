//! Colours: a dark and a light theme. Every style the views use comes from here.
//!
//! Each theme's colours assume a background of its kind, so each paints its own
//! (`base`) everywhere the views leave the background unset, unless the terminal's own
//! background is known to be of the same kind ([`Theme::for_terminal`]).

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier, Style};

use super::background::Background;

/// Which theme (`[tui] theme` of the config file).
pub use crate::config::ThemeName;

impl ThemeName {
    /// The theme for a terminal with background `bg` (`auto` resolved; dark when unknown).
    pub fn resolve(self, bg: Option<Background>) -> ThemeName {
        match (self, bg) {
            (ThemeName::Auto, Some(Background::Light)) => ThemeName::Light,
            (ThemeName::Auto, _) => ThemeName::Dark,
            (named, _) => named,
        }
    }
}

/// The styles of one theme.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    /// `Dark` or `Light` (never `Auto`).
    pub name: ThemeName,
    /// Foreground and background of every cell the views leave unstyled.
    pub base: Style,
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
    /// The style a citation status is shown in.
    pub fn status(&self, s: crate::host::transcript::CitationStatus) -> Style {
        use crate::host::transcript::CitationStatus;
        match s {
            CitationStatus::Grounded => self.grounded,
            CitationStatus::Ungrounded => self.ungrounded,
            CitationStatus::Missing => self.missing,
        }
    }

    /// A judge's verdict on a claim: supported as grounded, partly as ungrounded, not
    /// supported as missing, unclear dimmed.
    pub fn verdict(&self, v: crate::session::verdicts::Verdict) -> Style {
        use crate::session::verdicts::Verdict;
        match v {
            Verdict::Supported => self.grounded,
            Verdict::PartlySupported => self.ungrounded,
            Verdict::NotSupported => self.missing,
            Verdict::Unclear => self.dim,
        }
    }

    /// The theme `name` painting its own background (`auto` is dark here).
    pub fn by_name(name: ThemeName) -> Self {
        match name {
            ThemeName::Auto | ThemeName::Dark => Self::dark(),
            ThemeName::Light => Self::light(),
        }
    }

    /// The theme `name` resolves to on a terminal with background `bg`. On a background
    /// of the theme's own kind the terminal's background shows (its exact colour,
    /// transparency included); on any other, or an unknown one, the theme paints its own.
    pub fn for_terminal(name: ThemeName, bg: Option<Background>) -> Self {
        let mut theme = Self::by_name(name.resolve(bg));
        let kind = match theme.name {
            ThemeName::Light => Background::Light,
            _ => Background::Dark,
        };
        if bg == Some(kind) {
            theme.base = theme.base.bg(Color::Reset);
        }
        theme
    }

    /// Gives every cell of `buf` without a foreground or background the base's.
    pub fn paint_base(&self, buf: &mut Buffer) {
        let (fg, bg) = (
            self.base.fg.unwrap_or(Color::Reset),
            self.base.bg.unwrap_or(Color::Reset),
        );
        for cell in buf.content.iter_mut() {
            if cell.fg == Color::Reset {
                cell.fg = fg;
            }
            if cell.bg == Color::Reset {
                cell.bg = bg;
            }
        }
    }

    pub fn dark() -> Self {
        let fg = Style::default().fg(Color::Gray);
        Theme {
            name: ThemeName::Dark,
            base: Style::default().fg(Color::Gray).bg(Color::Black),
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
            base: Style::default().fg(Color::Black).bg(Color::White),
            text: Style::default().fg(Color::Black),
            // Not `Gray`: that is ANSI white, barely visible on a white background.
            dim: Style::default().fg(Color::DarkGray),
            title: Style::default()
                .fg(Color::Black)
                .add_modifier(Modifier::BOLD),
            border: Style::default().fg(Color::DarkGray),
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
