//! Word wrapping of styled lines, done once per change (not per frame), so a view can
//! render only the visible slice of a long conversation.

use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// Wraps `line` to `width` columns at spaces, breaking words longer than a line. The
/// line's own style is kept on every piece.
pub fn wrap_line(line: &Line<'_>, width: u16) -> Vec<Line<'static>> {
    let width = width.max(1) as usize;
    let mut out: Vec<Line<'static>> = Vec::new();
    let mut cur: Vec<Span<'static>> = Vec::new();
    let mut cur_w = 0usize;
    // Words as (text, style) runs, split at spaces but keeping the spaces.
    let mut words: Vec<(String, ratatui::style::Style, bool)> = Vec::new();
    for span in &line.spans {
        let mut buf = String::new();
        let mut in_space = None;
        for ch in span.content.chars() {
            let is_space = ch == ' ';
            if in_space.is_some_and(|s| s != is_space) {
                words.push((std::mem::take(&mut buf), span.style, in_space == Some(true)));
            }
            in_space = Some(is_space);
            buf.push(if ch == '\t' { ' ' } else { ch });
        }
        if !buf.is_empty() {
            words.push((buf, span.style, in_space == Some(true)));
        }
    }
    // A line that starts with spaces keeps them as a hanging indent on every piece.
    let indent: String = line
        .spans
        .first()
        .map(|s| s.content.chars().take_while(|c| *c == ' ').collect())
        .unwrap_or_default();
    let indent_w = if indent.len() * 2 < width {
        indent.len()
    } else {
        0
    };
    let flush = |cur: &mut Vec<Span<'static>>, out: &mut Vec<Line<'static>>| {
        let mut l = Line::from(std::mem::take(cur));
        l.style = line.style;
        out.push(l);
    };
    let start_piece = |cur: &mut Vec<Span<'static>>, out_len: usize| -> usize {
        if out_len > 0 && indent_w > 0 {
            cur.push(Span::raw(indent[..indent_w].to_string()));
            indent_w
        } else {
            0
        }
    };
    for (word, style, is_space) in words {
        let w: usize = word.chars().map(|c| c.width().unwrap_or(0)).sum();
        if is_space {
            if cur_w + w <= width {
                cur.push(Span::styled(word, style));
                cur_w += w;
            } else if cur_w > 0 {
                flush(&mut cur, &mut out);
                cur_w = start_piece(&mut cur, out.len());
            }
            continue;
        }
        if cur_w + w > width && cur_w > 0 {
            // Drop trailing spaces of the finished line.
            while cur.last().is_some_and(|s| s.content.trim().is_empty()) {
                cur.pop();
            }
            flush(&mut cur, &mut out);
            cur_w = start_piece(&mut cur, out.len());
        }
        if cur_w + w <= width {
            cur.push(Span::styled(word, style));
            cur_w += w;
            continue;
        }
        // A word longer than the line: hard-break it.
        let mut piece = String::new();
        for ch in word.chars() {
            let cw = ch.width().unwrap_or(0);
            if cur_w + cw > width {
                cur.push(Span::styled(std::mem::take(&mut piece), style));
                flush(&mut cur, &mut out);
                cur_w = start_piece(&mut cur, out.len());
            }
            piece.push(ch);
            cur_w += cw;
        }
        if !piece.is_empty() {
            cur.push(Span::styled(piece, style));
        }
    }
    if !cur.is_empty() || out.is_empty() {
        flush(&mut cur, &mut out);
    }
    out
}

/// Wraps every line.
pub fn wrap_lines(lines: &[Line<'_>], width: u16) -> Vec<Line<'static>> {
    lines.iter().flat_map(|l| wrap_line(l, width)).collect()
}

/// Cuts `s` to `width` columns, ending with `…` when cut.
pub fn truncate(s: &str, width: usize) -> String {
    let mut out = String::new();
    let mut w = 0;
    let total: usize = s.chars().map(|c| c.width().unwrap_or(0)).sum();
    if total <= width {
        return s.to_string();
    }
    for ch in s.chars() {
        let cw = ch.width().unwrap_or(0);
        if w + cw + 1 > width {
            break;
        }
        out.push(ch);
        w += cw;
    }
    out.push('…');
    out
}

/// Columns `s` takes.
pub fn width(s: &str) -> usize {
    s.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// Cuts `s` to `width` columns from the front, starting with `…` when cut (keeps the
/// end: a path's file name).
pub fn truncate_start(s: &str, width: usize) -> String {
    if self::width(s) <= width {
        return s.to_string();
    }
    let mut tail: Vec<char> = Vec::new();
    let mut w = 0;
    for ch in s.chars().rev() {
        let cw = ch.width().unwrap_or(0);
        if w + cw + 1 > width {
            break;
        }
        tail.push(ch);
        w += cw;
    }
    let mut out = String::from("…");
    out.extend(tail.into_iter().rev());
    out
}

/// Cuts `s` to `width` columns in the middle (keeps both ends: a URL's scheme and
/// host, and its port and path).
pub fn truncate_middle(s: &str, width: usize) -> String {
    if self::width(s) <= width {
        return s.to_string();
    }
    if width <= 1 {
        return truncate(s, width);
    }
    let head_w = (width - 1).div_ceil(2);
    let head = truncate(s, head_w + 1);
    let head = head.trim_end_matches('…');
    let tail = truncate_start(s, width - self::width(head));
    format!("{head}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn wraps_at_spaces_and_breaks_long_words() {
        let l = Line::from("the quick brown fox jumps");
        assert_eq!(
            texts(&wrap_line(&l, 10)),
            ["the quick", "brown fox", "jumps"]
        );
        let l = Line::from("abcdefghijkl");
        assert_eq!(texts(&wrap_line(&l, 5)), ["abcde", "fghij", "kl"]);
        assert_eq!(texts(&wrap_line(&Line::from(""), 5)), [""]);
    }

    #[test]
    fn keeps_span_styles() {
        use ratatui::style::{Color, Style};
        let red = Style::default().fg(Color::Red);
        let l = Line::from(vec![Span::raw("aa "), Span::styled("bbbb", red)]);
        let w = wrap_line(&l, 4);
        assert_eq!(texts(&w), ["aa", "bbbb"]);
        assert_eq!(w[1].spans[0].style, red);
    }

    #[test]
    fn continuation_lines_keep_the_indent() {
        let l = Line::from(vec![Span::raw("    "), Span::raw("aaa bbb ccc")]);
        assert_eq!(texts(&wrap_line(&l, 11)), ["    aaa bbb", "    ccc"]);
    }

    #[test]
    fn truncates_with_ellipsis() {
        assert_eq!(truncate("hello world", 6), "hello…");
        assert_eq!(truncate("hi", 6), "hi");
        assert_eq!(truncate_start("/a/b/demo.lancedb", 13), "…demo.lancedb");
        assert_eq!(truncate_start("/a/b/demo.lancedb", 15), "…b/demo.lancedb");
        assert_eq!(truncate_start("hi", 6), "hi");
        let m = truncate_middle("http://127.0.0.1:8080/v1", 15);
        assert_eq!(m, "http://…8080/v1");
        assert_eq!(width(&m), 15);
        assert!(
            m.starts_with("http://") && m.ends_with("/v1") && m.contains('…'),
            "{m}"
        );
        assert_eq!(truncate_middle("short", 15), "short");
    }
}
