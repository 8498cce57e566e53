//! Numbers in PDF text: bare page numbers (Arabic or Roman) and leading section numbers.

/// Whether `text` is a bare page number: `7`, `vii`, `- 7 -`, `Page 7`, `7 / 36`.
pub fn is_page_number(text: &str) -> bool {
    let t = text
        .trim()
        .trim_matches(|c: char| c == '-' || c == '–' || c.is_whitespace());
    let t = t
        .strip_prefix("Page ")
        .or_else(|| t.strip_prefix("page "))
        .unwrap_or(t);
    let t = t
        .split(" / ")
        .next()
        .unwrap_or(t)
        .split(" of ")
        .next()
        .unwrap_or(t)
        .trim();
    !t.is_empty() && (t.chars().all(|c| c.is_ascii_digit()) || is_roman(t))
}

/// A lower-case Roman numeral below 4000 (`vii`, `xiv`), as front matter numbers pages.
fn is_roman(t: &str) -> bool {
    if t.is_empty() || t.len() > 8 {
        return false;
    }
    let value = |c: char| match c {
        'i' => Some(1),
        'v' => Some(5),
        'x' => Some(10),
        'l' => Some(50),
        'c' => Some(100),
        'd' => Some(500),
        'm' => Some(1000),
        _ => None,
    };
    let Some(digits) = t.chars().map(value).collect::<Option<Vec<u32>>>() else {
        return false;
    };
    let mut total = 0;
    for (i, &d) in digits.iter().enumerate() {
        if digits.get(i + 1).is_some_and(|&n| n > d) {
            total -= d as i64;
        } else {
            total += d as i64;
        }
    }
    // Canonical form only: the numeral of the value must be the text.
    total > 0 && total < 4000 && to_roman(total as u32) == t
}

fn to_roman(mut n: u32) -> String {
    let table = [
        (1000, "m"),
        (900, "cm"),
        (500, "d"),
        (400, "cd"),
        (100, "c"),
        (90, "xc"),
        (50, "l"),
        (40, "xl"),
        (10, "x"),
        (9, "ix"),
        (5, "v"),
        (4, "iv"),
        (1, "i"),
    ];
    let mut out = String::new();
    for (v, s) in table {
        while n >= v {
            out.push_str(s);
            n -= v;
        }
    }
    out
}

/// The depth of a leading section number (`4` → 1, `4.1` → 2, `A.2` → 2), when the
/// text starts with one followed by a title.
pub fn section_number_depth(text: &str) -> Option<i64> {
    let (num, rest) = text.split_once(' ')?;
    if rest.trim().is_empty() || !rest.trim().starts_with(|c: char| c.is_alphabetic()) {
        return None;
    }
    let num = num.trim_end_matches('.');
    let parts: Vec<&str> = num.split('.').collect();
    let ok = parts.iter().enumerate().all(|(i, p)| {
        !p.is_empty()
            && (p.chars().all(|c| c.is_ascii_digit())
                || (i == 0 && p.len() == 1 && p.chars().all(|c| c.is_ascii_uppercase())))
    }) && parts.iter().any(|p| p.chars().all(|c| c.is_ascii_digit()));
    ok.then_some(parts.len() as i64)
}
