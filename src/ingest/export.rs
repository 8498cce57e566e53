//! Markdown serialisation of items (docling's `export_to_markdown()` style): tables in
//! tabulate "github" style and back, lists, and the whole document.

use crate::store::docling::label;

use super::ParsedItem;
use super::captions::{caption_owner, captions_of};

/// Render a Markdown table (docling/tabulate "github" style: columns padded
/// to `max(header + 2, cells)`, numeric columns right-aligned).
pub(crate) fn markdown_table(rows: &[Vec<String>]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let ncols = rows.iter().map(Vec::len).max().unwrap_or(0);
    if ncols == 0 {
        return String::new();
    }
    let cell = |r: &Vec<String>, c: usize| -> String {
        r.get(c)
            .cloned()
            .unwrap_or_default()
            .replace('\n', " ")
            .replace('|', "&#124;")
    };
    let header: Vec<String> = (0..ncols).map(|c| cell(&rows[0], c)).collect();
    let body: Vec<Vec<String>> = rows[1..]
        .iter()
        .map(|r| (0..ncols).map(|c| cell(r, c)).collect())
        .collect();
    let mut widths = Vec::with_capacity(ncols);
    let mut right = Vec::with_capacity(ncols);
    for c in 0..ncols {
        let w = body
            .iter()
            .map(|r| r[c].chars().count())
            .chain(std::iter::once(header[c].chars().count() + 2))
            .max()
            .unwrap_or(0);
        widths.push(w);
        let numeric = !body.is_empty()
            && body
                .iter()
                .all(|r| r[c].trim().is_empty() || r[c].trim().parse::<f64>().is_ok())
            && body.iter().any(|r| !r[c].trim().is_empty());
        right.push(numeric);
    }
    let fmt_row = |r: &[String]| -> String {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| {
                let pad = widths[c].saturating_sub(s.chars().count());
                if right[c] {
                    format!("{}{}", " ".repeat(pad), s)
                } else {
                    format!("{}{}", s, " ".repeat(pad))
                }
            })
            .collect();
        format!("| {} |", cells.join(" | "))
    };
    let mut out = vec![fmt_row(&header)];
    out.push(format!(
        "|{}|",
        widths
            .iter()
            .map(|w| "-".repeat(w + 2))
            .collect::<Vec<_>>()
            .join("|")
    ));
    for r in &body {
        out.push(fmt_row(r));
    }
    out.join("\n")
}

/// The Markdown table part of a table item's text (without leading
/// captions).
pub(crate) fn table_markdown_only(text: &str) -> String {
    text.lines()
        .filter(|l| l.trim_start().starts_with('|'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Parse a table back from the Markdown produced by [`markdown_table`]
/// (first row = header; leading caption lines are skipped).
pub(crate) fn table_rows(md: &str) -> Vec<Vec<String>> {
    md.lines()
        .filter(|l| l.trim_start().starts_with('|'))
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .map(|(_, line)| {
            let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
            inner
                .split('|')
                .map(|c| c.trim().replace("&#124;", "|"))
                .collect()
        })
        .collect()
}

/// Serialise list items `[start, end)` like docling's Markdown list
/// serializer: `- text` / `1. text`, nested lists indented 4 spaces per level.
pub(crate) fn list_markdown(items: &[ParsedItem]) -> String {
    let base = items.iter().map(|i| i.tree_depth).min().unwrap_or(0);
    items
        .iter()
        .map(|it| {
            let level = ((it.tree_depth - base) / 2).max(0) as usize;
            let marker = if it.marker.is_empty() {
                "-"
            } else {
                it.marker.as_str()
            };
            format!("{}{} {}", " ".repeat(4 * level), marker, it.text)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// docling-style `export_to_markdown()` of the items (blocks joined by a
/// blank line, list runs as one block, pictures as `<!-- image -->`).
pub(crate) fn markdown_export(items: &[ParsedItem]) -> String {
    let mut blocks: Vec<String> = Vec::new();
    let mut i = 0;
    while i < items.len() {
        let it = &items[i];
        match it.label.as_str() {
            label::LIST_ITEM => {
                let mut j = i + 1;
                while j < items.len()
                    && items[j].label == label::LIST_ITEM
                    && items[j].list_group == it.list_group
                {
                    j += 1;
                }
                blocks.push(list_markdown(&items[i..j]));
                i = j;
                continue;
            }
            label::TITLE => blocks.push(format!("# {}", it.text)),
            label::SECTION_HEADER => blocks.push(format!(
                "{} {}",
                "#".repeat((it.heading_level + 1).clamp(1, 6) as usize),
                it.text
            )),
            label::CODE => blocks.push(format!("```\n{}\n```", it.text)),
            label::PICTURE => {
                for c in captions_of(items, i) {
                    blocks.push(items[c].text.clone());
                }
                blocks.push("<!-- image -->".to_string());
            }
            label::TABLE => blocks.push(it.text.clone()),
            label::CAPTION if caption_owner(items, i).is_some() => {}
            _ => {
                if !it.text.is_empty() {
                    blocks.push(it.text.clone())
                }
            }
        }
        i += 1;
    }
    blocks.join("\n\n")
}
