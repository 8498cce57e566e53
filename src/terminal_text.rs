//! Model text made safe to print to a terminal: a model (or a document it quotes) can
//! emit escape sequences that move the cursor, retitle the window, rewrite the
//! clipboard (OSC 52) or hide text. The workbench never passes them through; neither does
//! `ask` when its output is a terminal.

use std::borrow::Cow;

/// `text` without terminal control sequences: CSI (`ESC [` … final byte), OSC (`ESC ]`
/// … BEL or `ESC \`), DCS/SOS/PM/APC strings, any other two-byte escape, and every C0
/// and C1 control character except newline and tab.
pub fn strip_controls(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| (c.is_control() && c != '\n' && c != '\t') || c == '\u{1b}')
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters and intermediates up to a final byte in @..~.
                Some('[') => {
                    for d in chars.by_ref() {
                        if ('@'..='~').contains(&d) {
                            break;
                        }
                    }
                }
                // OSC, DCS, SOS, PM, APC: a string ended by BEL or ST (ESC \).
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                _ => {}
            },
            // C1 CSI and the C1 string introducers.
            '\u{9b}' => {
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            '\n' | '\t' => out.push(c),
            '\r' => {
                // A bare carriage return would overwrite the line; keep CRLF as LF.
                if chars.peek() != Some(&'\n') {
                    out.push('\n');
                }
            }
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(d) = chars.next() {
        match d {
            '\u{7}' | '\u{9c}' => return,
            '\u{1b}' => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                return;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed() {
        assert!(matches!(strip_controls("a\nb\tc é"), Cow::Borrowed(_)));
    }

    #[test]
    fn sequences_and_controls_are_removed() {
        assert_eq!(strip_controls("\u{1b}[2J\u{1b}[31mred\u{1b}[0m"), "red");
        assert_eq!(strip_controls("a\u{1b}]0;pwned\u{7}b"), "ab");
        assert_eq!(strip_controls("a\u{1b}]52;c;ZXZpbA==\u{1b}\\b"), "ab");
        assert_eq!(strip_controls("x\u{8}\u{8}y\u{0}z"), "xyz");
        assert_eq!(strip_controls("one\r\ntwo\rthree"), "one\ntwo\nthree");
        assert_eq!(strip_controls("\u{9b}1mbold"), "bold");
        assert_eq!(strip_controls("tail\u{1b}"), "tail");
    }
}
