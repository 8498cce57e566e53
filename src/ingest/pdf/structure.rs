//! From lines with fonts to a document's structure: running headers and page numbers
//! set apart, headings found by size and weight and given levels, rows of aligned
//! blocks kept together as tables.
//!
//! The rules, in the order they run:
//! 1. A block whose lines change size is split where the size changes (a heading that
//!    poppler glued to the paragraph under it); so is a block whose short first line
//!    alone is bold. A bare number on the baseline of the line to its right is joined
//!    to it (poppler cuts "3 Utilities" in two).
//! 2. **Furniture**: a block of at most two lines in the top or bottom tenth of the page
//!    is a running header or footer when its text (digits masked) recurs on two or
//!    more pages, when it is a bare page number (`7`, `vii`, `- 7 -`, `Page 7`), or
//!    when it sits in a band (its top within 3 pt) that holds such blocks on at least a
//!    quarter of the pages (three at least). Furniture is left out of the items.
//! 3. **Body size**: the font size most characters outside furniture have.
//! 4. **Headings**: a block of at most three lines and 200 characters that is not a bare
//!    number, a table-of-contents entry (dot leaders), an address or a link, set at
//!    least 12 % larger than the body, or bold at body size and numbered
//!    (`4.1 Foo`). Its level: the number of parts of its section number when it has one
//!    (`4.1.2` → 3), else the rank of its size among the heading sizes (largest first).
//!    The first heading of page 1, when it alone has the largest heading size, is the
//!    document's title.
//! 5. **Tables**: consecutive single-line blocks side by side on one baseline, two rows
//!    or more with the same number of cells; or blocks side by side in neighbouring
//!    columns that start on one baseline with the same number of lines, line tops
//!    aligned, and short lines (at most five words) in every column but the last.
//! 6. **Tables of contents and indexes**: a page whose text and tables hold at least
//!    three dot-leader entries (`Utilities . . . . 5`), in at least a third of them, is
//!    an index page: its text and tables become one
//!    `document_index` table of (entry, pages) rows, which is never chunked (docling's
//!    label for tables of contents; haiku.rag keeps it out of what it shows a model).

use std::collections::{HashMap, HashSet};

use super::layout::{Block, Page, Rect};

mod numbers;
pub use numbers::{is_page_number, section_number_depth};

/// What a block became.
#[derive(Debug, Clone, PartialEq)]
pub enum Element {
    /// The document title (docling `title`).
    Title { text: String, rect: Rect },
    /// A section heading with its level (docling `section_header`).
    Heading {
        text: String,
        level: i64,
        rect: Rect,
    },
    /// A paragraph.
    Text { text: String, rect: Rect },
    /// A table: rows of cells.
    Table { rows: Vec<Vec<String>>, rect: Rect },
    /// A table of contents or an index (docling `document_index`): (entry, pages) rows.
    Index { rows: Vec<Vec<String>>, rect: Rect },
}

impl Element {
    pub fn rect(&self) -> Rect {
        match self {
            Element::Title { rect, .. }
            | Element::Heading { rect, .. }
            | Element::Text { rect, .. }
            | Element::Table { rect, .. }
            | Element::Index { rect, .. } => *rect,
        }
    }
}

/// The elements of each page, in reading order (furniture left out).
pub fn structure(pages: &[Page]) -> Vec<Vec<Element>> {
    let heights: Vec<f64> = pages.iter().map(|p| p.height).collect();
    let pages: Vec<Vec<Block>> = pages
        .iter()
        .map(|p| join_number_labels(p.blocks.iter().flat_map(split_by_style).collect()))
        .collect();
    let furniture = find_furniture(&pages, &heights);
    let body = body_size(&pages, &furniture);
    // Heading candidates and their sizes.
    let mut is_heading: HashSet<(usize, usize)> = HashSet::new();
    let mut sizes: Vec<f64> = Vec::new();
    for (pi, blocks) in pages.iter().enumerate() {
        for (bi, b) in blocks.iter().enumerate() {
            if furniture.contains(&(pi, bi)) || !looks_like_heading(b, body) {
                continue;
            }
            is_heading.insert((pi, bi));
            if !sizes.iter().any(|s| (s - b.size()).abs() < 0.5) {
                sizes.push(b.size());
            }
        }
    }
    sizes.sort_by(|a, b| b.total_cmp(a));
    // The title: page 1's first heading, alone at the largest heading size.
    let title = pages.first().and_then(|blocks| {
        let first = (0..blocks.len()).find(|&bi| is_heading.contains(&(0, bi)))?;
        let top = sizes.first()?;
        let at_top = is_heading
            .iter()
            .filter(|&&(pi, bi)| (pages[pi][bi].size() - top).abs() < 0.5)
            .count();
        ((blocks[first].size() - top).abs() < 0.5 && at_top == 1).then_some(first)
    });
    let ranked: Vec<f64> = match title {
        Some(_) => sizes.iter().skip(1).copied().collect(),
        None => sizes.clone(),
    };
    let level_of = |b: &Block| -> i64 {
        if let Some(n) = section_number_depth(&b.text()) {
            return n;
        }
        ranked
            .iter()
            .position(|s| (s - b.size()).abs() < 0.5)
            .map_or(ranked.len() as i64 + 1, |i| i as i64 + 1)
    };

    let mut out = Vec::new();
    for (pi, blocks) in pages.iter().enumerate() {
        let mut elements = Vec::new();
        let mut bi = 0;
        while bi < blocks.len() {
            if furniture.contains(&(pi, bi)) {
                bi += 1;
                continue;
            }
            if let Some((rows, rect, next)) = table_at(blocks, bi, &furniture, pi) {
                elements.push(Element::Table { rows, rect });
                bi = next;
                continue;
            }
            let b = &blocks[bi];
            let text = b.text();
            let rect = b.rect();
            elements.push(if pi == 0 && title == Some(bi) {
                Element::Title { text, rect }
            } else if is_heading.contains(&(pi, bi)) {
                Element::Heading {
                    text,
                    level: level_of(b),
                    rect,
                }
            } else {
                Element::Text { text, rect }
            });
            bi += 1;
        }
        out.push(index_page(elements));
    }
    out
}

/// Rule 6: an index page's text and tables as one `document_index` table where the first
/// of them stood; any other page as it is.
fn index_page(elements: Vec<Element>) -> Vec<Element> {
    let body = |e: &Element| -> Option<String> {
        match e {
            Element::Text { text, .. } => Some(text.clone()),
            Element::Table { rows, .. } => Some(
                rows.iter()
                    .map(|r| r.join(" "))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            _ => None,
        }
    };
    let texts: Vec<String> = elements.iter().filter_map(body).collect();
    let found: Vec<usize> = texts.iter().map(|t| index_entries(t).len()).collect();
    let holding = found.iter().filter(|&&n| n > 0).count();
    if found.iter().sum::<usize>() < 3 || holding * 3 < texts.len() {
        return elements;
    }
    let mut rows = Vec::new();
    let mut rect: Option<Rect> = None;
    let mut at = None;
    let mut out = Vec::with_capacity(elements.len());
    for e in elements {
        match body(&e) {
            Some(text) => {
                let found = index_entries(&text);
                if found.is_empty() {
                    // A letter heading of an index ("A"), or an entry poppler cut.
                    rows.push(vec![text.trim().to_string(), String::new()]);
                } else {
                    rows.extend(found);
                }
                rect = Some(rect.map_or(e.rect(), |r| r.union(&e.rect())));
                at.get_or_insert(out.len());
            }
            None => out.push(e),
        }
    }
    if let (Some(at), Some(rect)) = (at, rect) {
        out.insert(at, Element::Index { rows, rect });
    }
    out
}

/// The dot-leader entries of `text` (`asn1_array2tree . . . . 9 asn1_bit_der . . 16`):
/// (entry, pages) pairs, the pages as printed (`4, 22`).
pub fn index_entries(text: &str) -> Vec<Vec<String>> {
    static ENTRY: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?P<entry>[^.\s][^.]*?(?:\.[^.\s][^.]*?)*?)\s*(?:\.\s*){3,}(?P<pages>[0-9ivxlc]+(?:\s*[,–-]\s*[0-9ivxlc]+)*)")
            .expect("a valid pattern")
    });
    ENTRY
        .captures_iter(text)
        .map(|c| vec![c["entry"].trim().to_string(), c["pages"].trim().to_string()])
        .collect()
}

/// A one-line block that is only a number (`3`, `4.1`) followed by a one-line block on
/// the same baseline to its right is one line: the number labels it (a numbered
/// heading or a table-of-contents entry that poppler cut in two).
fn join_number_labels(blocks: Vec<Block>) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::with_capacity(blocks.len());
    let mut it = blocks.into_iter().peekable();
    while let Some(b) = it.next() {
        let label = b.lines.len() == 1
            && b.lines[0]
                .text
                .trim_end_matches('.')
                .split('.')
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
        if label
            && let Some(next) = it.peek()
            && next.lines.len() == 1
            && next.lines[0].text.starts_with(char::is_alphabetic)
            && (next.lines[0].rect.t - b.lines[0].rect.t).abs() < 2.0
            && next.lines[0].rect.l > b.lines[0].rect.r
        {
            let next = it.next().expect("peeked");
            let (a, n) = (&b.lines[0], &next.lines[0]);
            let chars = (a.text.chars().count() + n.text.chars().count()).max(1) as f64;
            let weight = n.text.chars().count() as f64 / chars;
            out.push(Block {
                lines: vec![super::layout::Line {
                    text: format!("{} {}", a.text, n.text),
                    rect: a.rect.union(&n.rect),
                    size: n.size * weight + a.size * (1.0 - weight),
                    bold: n.bold,
                }],
                flow: b.flow,
            });
            continue;
        }
        out.push(b);
    }
    out
}

/// Rule 1: a block split where its font size changes, and a short bold first line over
/// plain lines split off.
fn split_by_style(block: &Block) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    for (i, line) in block.lines.iter().enumerate() {
        let start_new = match out.last() {
            None => true,
            Some(cur) => {
                let prev = cur.lines.last().expect("blocks are never empty");
                (prev.size - line.size).abs() > 0.6
                    || (i == 1
                        && prev.bold
                        && !line.bold
                        && prev.text.chars().count() <= 80
                        && block.lines[1..].iter().all(|l| !l.bold))
            }
        };
        if start_new {
            out.push(Block {
                lines: vec![line.clone()],
                flow: block.flow,
            });
        } else {
            out.last_mut()
                .expect("just checked")
                .lines
                .push(line.clone());
        }
    }
    out
}

/// Rule 2: the (page, block) positions that are running headers, footers or page
/// numbers, given each page's height.
fn find_furniture(pages: &[Vec<Block>], heights: &[f64]) -> HashSet<(usize, usize)> {
    let mask = |s: &str| -> String {
        s.chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .collect()
    };
    // Candidates: short blocks in the margins.
    let mut candidates: Vec<(usize, usize, String, f64, bool)> = Vec::new();
    for (pi, blocks) in pages.iter().enumerate() {
        let h = heights
            .get(pi)
            .copied()
            .filter(|h| *h > 0.0)
            .unwrap_or(792.0);
        for (bi, b) in blocks.iter().enumerate() {
            let r = b.rect();
            if b.lines.len() > 2 {
                continue;
            }
            let top = r.b <= h * 0.1;
            let bottom = r.t >= h * 0.9;
            if top || bottom {
                candidates.push((pi, bi, mask(&b.text()), r.t, top));
            }
        }
    }
    let mut pages_of: HashMap<&str, HashSet<usize>> = HashMap::new();
    for (pi, _, key, _, _) in &candidates {
        pages_of.entry(key.as_str()).or_default().insert(*pi);
    }
    let mut out = HashSet::new();
    for (pi, bi, key, _, _) in &candidates {
        let text = pages[*pi][*bi].text();
        if pages_of[key.as_str()].len() >= 2 || is_page_number(&text) {
            out.insert((*pi, *bi));
        }
    }
    // Bands that hold furniture on many pages take every margin block in them.
    let need = (pages.len() as f64 * 0.25).ceil().max(3.0) as usize;
    let mut band_pages: HashMap<(bool, i64), HashSet<usize>> = HashMap::new();
    for (pi, bi, _, t, top) in &candidates {
        if out.contains(&(*pi, *bi)) {
            band_pages
                .entry((*top, (t / 3.0).round() as i64))
                .or_default()
                .insert(*pi);
        }
    }
    for (pi, bi, _, t, top) in &candidates {
        let band = (t / 3.0).round() as i64;
        let busy = (band - 1..=band + 1)
            .any(|b| band_pages.get(&(*top, b)).is_some_and(|p| p.len() >= need));
        if busy {
            out.insert((*pi, *bi));
        }
    }
    out
}

/// Rule 3: the font size most characters have, furniture left out.
fn body_size(pages: &[Vec<Block>], furniture: &HashSet<(usize, usize)>) -> f64 {
    let mut by_size: Vec<(f64, usize)> = Vec::new();
    for (pi, blocks) in pages.iter().enumerate() {
        for (bi, b) in blocks.iter().enumerate() {
            if furniture.contains(&(pi, bi)) {
                continue;
            }
            for l in &b.lines {
                let n = l.text.chars().count();
                match by_size.iter_mut().find(|(s, _)| (s - l.size).abs() < 0.25) {
                    Some(e) => e.1 += n,
                    None => by_size.push((l.size, n)),
                }
            }
        }
    }
    by_size
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map_or(10.0, |(s, _)| s)
}

/// Rule 4: whether a block reads as a heading at this body size.
fn looks_like_heading(b: &Block, body: f64) -> bool {
    let text = b.text();
    let n = text.chars().count();
    if b.lines.len() > 3 || !(2..=200).contains(&n) || is_page_number(&text) {
        return false;
    }
    if !text.chars().any(char::is_alphabetic) {
        return false;
    }
    // A table-of-contents entry ("Utilities . . . . 7"), an address or a link is no
    // heading, whatever its font.
    if text.contains(". . .") || text.contains("....") || text.contains('@') || text.contains("://")
    {
        return false;
    }
    let size = b.size();
    if size >= body * 1.12 {
        return true;
    }
    b.bold()
        && b.lines.len() == 1
        && n <= 100
        && (size - body).abs() < 0.6
        && section_number_depth(&text).is_some()
}

/// Rule 5: a table starting at block `i`: its rows, its box and the next block index.
fn table_at(
    blocks: &[Block],
    i: usize,
    furniture: &HashSet<(usize, usize)>,
    pi: usize,
) -> Option<(Vec<Vec<String>>, Rect, usize)> {
    let usable = |k: usize| k < blocks.len() && !furniture.contains(&(pi, k));
    // (a) rows of single-line cells.
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut rect: Option<Rect> = None;
    let mut j = i;
    loop {
        let mut k = j;
        while usable(k)
            && blocks[k].lines.len() == 1
            && (blocks[k].rect().t - blocks[j].rect().t).abs() < 3.0
        {
            k += 1;
        }
        if k - j < 2 {
            break;
        }
        let mut cells: Vec<&Block> = blocks[j..k].iter().collect();
        cells.sort_by(|a, b| a.rect().l.total_cmp(&b.rect().l));
        let row: Vec<String> = cells.iter().map(|c| c.text()).collect();
        if rows.first().is_some_and(|r| r.len() != row.len()) {
            break;
        }
        for c in &cells {
            rect = Some(rect.map_or(c.rect(), |r| r.union(&c.rect())));
        }
        rows.push(row);
        j = k;
    }
    if rows.len() >= 2 {
        return Some((rows, rect.expect("rows have cells"), j));
    }
    // (b) columns of aligned lines in neighbouring flows.
    let first = blocks.get(i)?;
    let n = first.lines.len();
    if n < 2 || furniture.contains(&(pi, i)) {
        return None;
    }
    let mut cols = vec![first];
    let mut k = i + 1;
    while usable(k) {
        let b = &blocks[k];
        let prev = cols.last().expect("one column at least");
        let aligned = b.lines.len() == n
            && b.flow != prev.flow
            && b.rect().l > prev.rect().r
            && b.lines
                .iter()
                .zip(&first.lines)
                .all(|(x, y)| (x.rect.t - y.rect.t).abs() < 2.0);
        if !aligned {
            break;
        }
        cols.push(b);
        k += 1;
    }
    let short = |b: &Block| {
        b.lines
            .iter()
            .all(|l| l.text.split_whitespace().count() <= 5)
    };
    if cols.len() < 2 || !cols[..cols.len() - 1].iter().all(|b| short(b)) {
        return None;
    }
    let rows: Vec<Vec<String>> = (0..n)
        .map(|r| cols.iter().map(|c| c.lines[r].text.clone()).collect())
        .collect();
    let rect = cols
        .iter()
        .map(|c| c.rect())
        .reduce(|a, b| a.union(&b))
        .expect("two columns");
    Some((rows, rect, k))
}

#[cfg(test)]
mod tests;
