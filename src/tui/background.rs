//! The terminal's background colour, asked once at start-up with an OSC 11 query, so the
//! workbench can pick the light theme on a light terminal.
//!
//! The query runs in raw mode, beside the image-protocol query and before the input
//! reader starts: a query answered while the event reader runs would race it for stdin
//! (crossterm #672, atuin #2947). A Device Status Report (`ESC [ 5 n`) follows the OSC 11
//! query; every terminal answers it, so a terminal that ignores OSC 11 costs one round
//! trip, not the timeout.

use std::time::Duration;

/// Whether a background is light or dark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Background {
    Light,
    Dark,
}

/// What the terminal answered: its background colour, 0.0–1.0 per channel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rgb {
    pub r: f64,
    pub g: f64,
    pub b: f64,
}

impl Rgb {
    /// WCAG relative luminance (sRGB channels linearised).
    pub fn luminance(self) -> f64 {
        fn lin(c: f64) -> f64 {
            if c <= 0.04045 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        }
        0.2126 * lin(self.r) + 0.7152 * lin(self.g) + 0.0722 * lin(self.b)
    }

    /// Light when black text on it has more contrast than white text (WCAG contrast
    /// ratios are equal at a luminance of about 0.179).
    pub fn background(self) -> Background {
        let l = self.luminance();
        let with_black = (l + 0.05) / 0.05;
        let with_white = 1.05 / (l + 0.05);
        if with_black > with_white {
            Background::Light
        } else {
            Background::Dark
        }
    }
}

/// The query: OSC 11 (background colour), then DSR 5 (status) as the end marker.
pub const QUERY: &[u8] = b"\x1b]11;?\x07\x1b[5n";

/// The colour in an OSC 11 reply somewhere in `bytes`:
/// `ESC ] 11 ; rgb:RRRR/GGGG/BBBB` (1 to 4 hex digits a channel; `rgba:` with a fourth
/// channel is accepted), ended by BEL or ST (`ESC \`). Anything around it (other replies,
/// keys typed meanwhile) is ignored.
pub fn parse_osc11(bytes: &[u8]) -> Option<Rgb> {
    let text = String::from_utf8_lossy(bytes);
    let start = text.find("\x1b]11;")? + 5;
    let rest = &text[start..];
    let end = rest.find(['\x07', '\x1b'])?;
    let body = &rest[..end];
    let (kind, channels) = body.split_once(':')?;
    let parts: Vec<&str> = channels.split('/').collect();
    let want = match kind {
        "rgb" => 3,
        "rgba" => 4,
        _ => return None,
    };
    if parts.len() != want {
        return None;
    }
    let channel = |s: &str| -> Option<f64> {
        if s.is_empty() || s.len() > 4 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let v = u32::from_str_radix(s, 16).ok()?;
        let max = (1u32 << (4 * s.len())) - 1;
        Some(v as f64 / max as f64)
    };
    Some(Rgb {
        r: channel(parts[0])?,
        g: channel(parts[1])?,
        b: channel(parts[2])?,
    })
}

/// Whether `bytes` hold the DSR reply (`ESC [ 0 n`, or `ESC [ 3 n`), the end of the
/// answers to [`QUERY`].
pub fn has_status_reply(bytes: &[u8]) -> bool {
    bytes.windows(4).any(|w| w == b"\x1b[0n" || w == b"\x1b[3n")
}

/// The default wait for the answers (a terminal answers DSR at once; this only bounds
/// one that answers nothing).
pub const TIMEOUT: Duration = Duration::from_millis(300);

/// Asks the terminal on stdin/stdout for its background. Call in raw mode, before the
/// event reader starts. `None` when it did not answer OSC 11 within `timeout`.
#[cfg(unix)]
pub fn query(timeout: Duration) -> Option<Rgb> {
    use std::io::Write;
    use std::time::Instant;

    use rustix::termios::{OptionalActions, SpecialCodeIndex, tcgetattr, tcsetattr};

    let stdin = std::io::stdin();
    let saved = tcgetattr(&stdin).ok()?;
    // Reads return after 0.1 s without data instead of blocking (VMIN 0, VTIME 1), so
    // nothing is left waiting on stdin once the deadline passes.
    let mut polling = saved.clone();
    polling.special_codes[SpecialCodeIndex::VMIN] = 0;
    polling.special_codes[SpecialCodeIndex::VTIME] = 1;
    tcsetattr(&stdin, OptionalActions::Now, &polling).ok()?;
    let mut reply = Vec::new();
    let asked = std::io::stdout()
        .write_all(QUERY)
        .and_then(|()| std::io::stdout().flush());
    if asked.is_ok() {
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 256];
        while Instant::now() < deadline && !has_status_reply(&reply) && reply.len() < 4096 {
            match rustix::io::read(&stdin, &mut buf) {
                Ok(n) => reply.extend_from_slice(&buf[..n]),
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => break,
            }
        }
    }
    let _ = tcsetattr(&stdin, OptionalActions::Now, &saved);
    parse_osc11(&reply)
}

#[cfg(not(unix))]
pub fn query(_timeout: Duration) -> Option<Rgb> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sixteen_bit_replies_ended_by_bel_or_st() {
        let white = parse_osc11(b"\x1b]11;rgb:ffff/ffff/ffff\x07").unwrap();
        assert_eq!((white.r, white.g, white.b), (1.0, 1.0, 1.0));
        let black = parse_osc11(b"\x1b]11;rgb:0000/0000/0000\x1b\\").unwrap();
        assert_eq!((black.r, black.g, black.b), (0.0, 0.0, 0.0));
        let c = parse_osc11(b"\x1b]11;rgb:1e1e/1e1e/2e2e\x07").unwrap();
        assert!((c.r - 0x1e1e as f64 / 65535.0).abs() < 1e-9);
        assert!((c.b - 0x2e2e as f64 / 65535.0).abs() < 1e-9);
    }

    #[test]
    fn parses_short_channels_rgba_and_surrounding_replies() {
        // Two hex digits a channel (some terminals), scaled by their own maximum.
        let c = parse_osc11(b"\x1b]11;rgb:ff/80/00\x07").unwrap();
        assert_eq!(c.r, 1.0);
        assert!((c.g - 128.0 / 255.0).abs() < 1e-9);
        assert_eq!(c.b, 0.0);
        let c = parse_osc11(b"\x1b]11;rgb:f/f/f\x07").unwrap();
        assert_eq!(c.g, 1.0);
        let c = parse_osc11(b"\x1b]11;rgba:ffff/ffff/ffff/ffff\x07").unwrap();
        assert_eq!(c.r, 1.0);
        // Other answers and typed keys around the reply.
        let c = parse_osc11(b"x\x1b[?1;2c\x1b]11;rgb:0000/0000/0000\x07\x1b[0n").unwrap();
        assert_eq!(c.r, 0.0);
    }

    #[test]
    fn refuses_what_is_not_an_osc11_colour() {
        for bad in [
            &b""[..],
            b"\x1b[0n",
            b"\x1b]10;rgb:ffff/ffff/ffff\x07",
            b"\x1b]11;rgb:ffff/ffff\x07",
            b"\x1b]11;rgb:fffff/ffff/ffff\x07",
            b"\x1b]11;rgb:gggg/ffff/ffff\x07",
            b"\x1b]11;rgb:ffff/ffff/ffff",
            b"\x1b]11;#ffffff\x07",
            b"\x1b]11;rgba:ffff/ffff/ffff\x07",
        ] {
            assert_eq!(parse_osc11(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn light_and_dark_by_luminance() {
        let rgb = |r: u8, g: u8, b: u8| Rgb {
            r: r as f64 / 255.0,
            g: g as f64 / 255.0,
            b: b as f64 / 255.0,
        };
        // xterm's default white, Solarized light, a light grey: light.
        for c in [
            rgb(255, 255, 255),
            rgb(0xfd, 0xf6, 0xe3),
            rgb(0xc0, 0xc0, 0xc0),
        ] {
            assert_eq!(c.background(), Background::Light, "{c:?}");
        }
        // Black, Solarized dark, a mid grey, saturated blue: dark.
        for c in [
            rgb(0, 0, 0),
            rgb(0x00, 0x2b, 0x36),
            rgb(0x60, 0x60, 0x60),
            rgb(0, 0, 255),
        ] {
            assert_eq!(c.background(), Background::Dark, "{c:?}");
        }
        assert!((rgb(255, 255, 255).luminance() - 1.0).abs() < 1e-9);
        assert_eq!(rgb(0, 0, 0).luminance(), 0.0);
    }

    #[test]
    fn the_status_reply_ends_the_answers() {
        assert!(has_status_reply(b"\x1b]11;rgb:0/0/0\x07\x1b[0n"));
        assert!(!has_status_reply(b"\x1b]11;rgb:0/0/0\x07"));
    }
}
