//! Document parsing and chunking: Markdown, plain text, HTML and PDF files
//! become haiku.rag-style document items (the `document_items` table of
//! SPEC §11) plus chunks (the `chunks` table), without any database.
//!
//! The item model mirrors what haiku.rag 0.77 stores from a docling
//! `DoclingDocument`: `iterate_items()` order, `#/texts/N` / `#/tables/N` /
//! `#/pictures/N` refs numbered per kind, docling labels, `heading_level` for
//! section headers and the `iterate_items()` level as `tree_depth` (so items
//! directly under the document body have depth 1, list items depth 2, ...).
//!
//! Conventions that the item list encodes (there is no explicit tree):
//! * a `caption` item directly after a `picture` or `table` item, one level
//!   deeper, is that item's caption (docling keeps captions as children of
//!   their floating item);
//! * consecutive `list_item`s with the same [`ParsedItem::list_group`] form one
//!   list (docling's `ListGroup`); nesting is given by `tree_depth` (+2 per
//!   level: list group, then list item).

use std::path::Path;

pub mod chunker;
pub mod docling;
pub mod html;
pub mod markdown;
pub mod pdf;
pub mod pipeline;
pub mod text;

pub use chunker::{ChunkOptions, chunk};
pub use docling::docling_json;

/// One document item, in reading order (its index in
/// [`ParsedDocument::items`] is its `position`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParsedItem {
    /// `#/texts/N`, `#/tables/N` or `#/pictures/N`.
    pub self_ref: String,
    /// docling label: `title`, `section_header`, `text`, `list_item`, `code`,
    /// `caption`, `table`, `picture`.
    pub label: String,
    /// Item text; tables as Markdown (preceded by their caption text and a
    /// blank line when captioned, as docling serialises them), pictures:
    /// caption or alt text (or "").
    pub text: String,
    /// 1-based pages (PDF only; empty otherwise).
    pub page_numbers: Vec<i64>,
    /// Section headers only (>= 1), else 0.
    pub heading_level: i64,
    /// docling `iterate_items()` level (1 = directly under the body).
    pub tree_depth: i64,
    /// PNG/JPEG/... bytes for pictures whose image could be loaded.
    pub picture_data: Option<Vec<u8>>,
    /// List items only: docling's list marker (`""` for bullets, `"1."`,
    /// `"2."`... for enumerated lists).
    pub marker: String,
    /// List items only: identifies the outermost list the item belongs to
    /// (all items of one top-level list, nested ones included, share it).
    pub list_group: Option<usize>,
    /// Where the item is on its pages (PDF only): boxes in points, origin top left.
    /// Empty means the whole page of each of `page_numbers`.
    pub boxes: Vec<ItemBox>,
}

/// An item's box on one page, in points with the origin at the page's top left (the
/// page raster is 72 dpi, so points are its pixels).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ItemBox {
    /// 1-based page.
    pub page_no: i64,
    /// Left edge.
    pub l: f64,
    /// Top edge.
    pub t: f64,
    /// Right edge.
    pub r: f64,
    /// Bottom edge.
    pub b: f64,
}

/// A parsed document.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParsedDocument {
    pub title: Option<String>,
    /// Full text, Markdown-ish (like docling's `export_to_markdown()`).
    pub content: String,
    /// Reading order; position = index.
    pub items: Vec<ParsedItem>,
    /// Page rasters (PDFs only).
    pub pages: Vec<PageImage>,
}

/// A PNG raster of one PDF page (72 dpi), for the page-image pane.
#[derive(Debug, Clone, PartialEq)]
pub struct PageImage {
    pub page_no: i64,
    pub png: Vec<u8>,
    pub width: u32,
    pub height: u32,
}

/// A chunk before embedding/storage.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkDraft {
    pub content: String,
    pub content_fts: String,
    pub order: i64,
    /// `{"doc_item_refs":[...], "headings":[...]|null, "labels":[...], "page_numbers":[...]}`
    pub metadata: serde_json::Value,
}

/// Input kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    Markdown,
    Text,
    Html,
    Pdf,
}

impl DocKind {
    /// Kind for a file extension (case-insensitive, without the dot).
    pub fn from_extension(ext: &str) -> Option<DocKind> {
        match ext.to_ascii_lowercase().as_str() {
            "md" | "markdown" => Some(DocKind::Markdown),
            "txt" | "text" => Some(DocKind::Text),
            "html" | "htm" => Some(DocKind::Html),
            "pdf" => Some(DocKind::Pdf),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("unsupported file type {ext:?} for {name}")]
    UnsupportedExtension { name: String, ext: String },
    #[error("cannot read {name}: {source}")]
    Io {
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{name} is not valid UTF-8 text")]
    NotUtf8 { name: String },
    #[error("cannot parse PDF {name}: {detail}")]
    Pdf { name: String, detail: String },
}

/// Parse a file, choosing the parser by extension (`md`/`markdown`,
/// `txt`/`text`, `html`/`htm`, `pdf`). Relative images in Markdown/HTML are
/// resolved against the file's directory.
pub fn parse_file(path: &Path) -> Result<ParsedDocument, IngestError> {
    let name = path.display().to_string();
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().into_owned())
        .unwrap_or_default();
    let kind = DocKind::from_extension(&ext).ok_or_else(|| IngestError::UnsupportedExtension {
        name: name.clone(),
        ext: ext.clone(),
    })?;
    if kind == DocKind::Pdf {
        return pdf::parse_pdf_path(path, &name);
    }
    let bytes = std::fs::read(path).map_err(|source| IngestError::Io {
        name: name.clone(),
        source,
    })?;
    let base = path.parent().map(Path::to_path_buf);
    parse_with_base(kind, &bytes, &name, base.as_deref())
}

/// Parse in-memory bytes. `name` is used in errors (and, for Markdown/HTML,
/// relative image paths are resolved against the current directory only if
/// `name` is a path whose parent exists).
pub fn parse_bytes(kind: DocKind, bytes: &[u8], name: &str) -> Result<ParsedDocument, IngestError> {
    let base = Path::new(name).parent().filter(|p| p.is_dir());
    parse_with_base(kind, bytes, name, base)
}

fn parse_with_base(
    kind: DocKind,
    bytes: &[u8],
    name: &str,
    base: Option<&Path>,
) -> Result<ParsedDocument, IngestError> {
    let as_text = || {
        std::str::from_utf8(bytes)
            .map(|s| s.trim_start_matches('\u{feff}'))
            .map_err(|_| IngestError::NotUtf8 {
                name: name.to_string(),
            })
    };
    match kind {
        DocKind::Markdown => Ok(markdown::parse_markdown(as_text()?, base)),
        DocKind::Text => Ok(text::parse_text(as_text()?)),
        // Pages in legacy encodings still parse (lossily); binary data does not.
        DocKind::Html if bytes.contains(&0) => Err(IngestError::NotUtf8 {
            name: name.to_string(),
        }),
        DocKind::Html => Ok(html::parse_html(&String::from_utf8_lossy(bytes), base)),
        DocKind::Pdf => pdf::parse_pdf_bytes(bytes, name),
    }
}

/// Collapse runs of whitespace to single spaces and trim.
pub(crate) fn normalize_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Builds items with per-kind ref numbering.
#[derive(Default)]
pub(crate) struct ItemBuilder {
    pub items: Vec<ParsedItem>,
    texts: usize,
    tables: usize,
    pictures: usize,
    lists: usize,
}

impl ItemBuilder {
    pub fn push(&mut self, label: &str, text: String, tree_depth: i64) -> &mut ParsedItem {
        let self_ref = match label {
            "table" => {
                self.tables += 1;
                format!("#/tables/{}", self.tables - 1)
            }
            "picture" => {
                self.pictures += 1;
                format!("#/pictures/{}", self.pictures - 1)
            }
            _ => {
                self.texts += 1;
                format!("#/texts/{}", self.texts - 1)
            }
        };
        self.items.push(ParsedItem {
            self_ref,
            label: label.to_string(),
            text,
            tree_depth,
            ..Default::default()
        });
        self.items.last_mut().expect("just pushed")
    }

    /// A fresh list-group id.
    pub fn new_list(&mut self) -> usize {
        self.lists += 1;
        self.lists - 1
    }

    pub fn finish(mut self, title: Option<String>, pages: Vec<PageImage>) -> ParsedDocument {
        // haiku stores a table's text as docling's Markdown serialisation,
        // which puts the captions first: "caption\n\n| table |"
        for i in 0..self.items.len() {
            if self.items[i].label == "table" {
                let caps: Vec<String> = captions_of(&self.items, i)
                    .into_iter()
                    .map(|c| self.items[c].text.clone())
                    .filter(|t| !t.is_empty())
                    .collect();
                if !caps.is_empty() {
                    self.items[i].text = format!("{}\n\n{}", caps.join(" "), self.items[i].text);
                }
            }
        }
        let content = markdown_export(&self.items);
        ParsedDocument {
            title,
            content,
            items: self.items,
            pages,
        }
    }
}

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

/// Indices of each item's caption items (captions directly following a
/// picture/table, one level deeper).
pub(crate) fn captions_of(items: &[ParsedItem], idx: usize) -> Vec<usize> {
    let owner = &items[idx];
    if owner.label != "picture" && owner.label != "table" {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut j = idx + 1;
    while j < items.len()
        && items[j].label == "caption"
        && items[j].tree_depth == owner.tree_depth + 1
    {
        out.push(j);
        j += 1;
    }
    out
}

/// Whether item `idx` is a caption owned by a preceding picture/table.
pub(crate) fn caption_owner(items: &[ParsedItem], idx: usize) -> Option<usize> {
    if items[idx].label != "caption" {
        return None;
    }
    let mut j = idx;
    while j > 0 {
        j -= 1;
        let it = &items[j];
        if it.label == "caption" && it.tree_depth == items[idx].tree_depth {
            continue;
        }
        if (it.label == "picture" || it.label == "table")
            && it.tree_depth + 1 == items[idx].tree_depth
        {
            return Some(j);
        }
        return None;
    }
    None
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
            "list_item" => {
                let mut j = i + 1;
                while j < items.len()
                    && items[j].label == "list_item"
                    && items[j].list_group == it.list_group
                {
                    j += 1;
                }
                blocks.push(list_markdown(&items[i..j]));
                i = j;
                continue;
            }
            "title" => blocks.push(format!("# {}", it.text)),
            "section_header" => blocks.push(format!(
                "{} {}",
                "#".repeat((it.heading_level + 1).clamp(1, 6) as usize),
                it.text
            )),
            "code" => blocks.push(format!("```\n{}\n```", it.text)),
            "picture" => {
                for c in captions_of(items, i) {
                    blocks.push(items[c].text.clone());
                }
                blocks.push("<!-- image -->".to_string());
            }
            "table" => blocks.push(it.text.clone()),
            "caption" if caption_owner(items, i).is_some() => {}
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

/// Sniff an image's MIME type from its magic bytes.
pub(crate) fn image_mime(bytes: &[u8]) -> &'static str {
    match image::guess_format(bytes) {
        Ok(image::ImageFormat::Png) => "image/png",
        Ok(image::ImageFormat::Jpeg) => "image/jpeg",
        Ok(image::ImageFormat::Gif) => "image/gif",
        Ok(image::ImageFormat::WebP) => "image/webp",
        Ok(image::ImageFormat::Bmp) => "image/bmp",
        Ok(image::ImageFormat::Tiff) => "image/tiff",
        _ => "application/octet-stream",
    }
}

/// Load an image referenced from Markdown/HTML: `data:` URIs are decoded,
/// other non-URL paths are read relative to `base`. Remote URLs are not
/// fetched.
pub(crate) fn load_image(src: &str, base: Option<&Path>) -> Option<Vec<u8>> {
    use base64::Engine;
    let src = src.trim();
    if let Some(rest) = src.strip_prefix("data:") {
        let (meta, data) = rest.split_once(',')?;
        if meta.ends_with(";base64") {
            return base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .ok();
        }
        return Some(data.as_bytes().to_vec());
    }
    if src.contains("://") || src.is_empty() {
        return None;
    }
    let base = base?;
    let rel = src.split(['?', '#']).next().unwrap_or(src);
    let rel = percent_decode(rel);
    let p = base.join(rel);
    if p.is_file() {
        std::fs::read(p).ok()
    } else {
        None
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a paragraph reads like a figure caption ("Figure 3: ...",
/// "Fig. 2 - ...").
pub(crate) fn looks_like_figure_caption(s: &str) -> bool {
    let lower = s.trim_start().to_ascii_lowercase();
    for p in ["figure", "fig."] {
        if let Some(rest) = lower.strip_prefix(p) {
            let rest = rest.trim_start();
            let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            if !digits.is_empty() {
                let after = rest[digits.len()..].trim_start();
                return after.starts_with(':')
                    || after.starts_with('.')
                    || after.starts_with('-')
                    || after.starts_with('—');
            }
        }
    }
    false
}

/// Same for tables ("Table 1: ...").
pub(crate) fn looks_like_table_caption(s: &str) -> bool {
    let lower = s.trim_start().to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("table") {
        let rest = rest.trim_start();
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        if !digits.is_empty() {
            let after = rest[digits.len()..].trim_start();
            return after.starts_with(':') || after.starts_with('.');
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/ingest"
        ))
        .join(name)
    }

    #[test]
    fn markdown_table_matches_tabulate_github() {
        let rows = vec![
            vec!["Name".to_string(), "Qty".to_string()],
            vec!["apple".to_string(), "3".to_string()],
            vec!["kiwi".to_string(), "12".to_string()],
        ];
        let md = markdown_table(&rows);
        assert_eq!(
            md,
            "| Name   |   Qty |\n|--------|-------|\n| apple  |     3 |\n| kiwi   |    12 |"
        );
        assert_eq!(table_rows(&md), rows);
    }

    #[test]
    fn unknown_extension_is_an_error_naming_the_file() {
        let err = parse_file(Path::new("/tmp/whatever/notes.docx")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("notes.docx"), "{msg}");
        assert!(msg.contains("docx"), "{msg}");
        let err = parse_file(Path::new("/tmp/whatever/README")).unwrap_err();
        assert!(err.to_string().contains("README"));
    }

    #[test]
    fn missing_file_is_an_error_naming_the_file() {
        let err = parse_file(Path::new("/nonexistent/dir/a.md")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/dir/a.md"));
    }

    #[test]
    fn binary_garbage_as_text_is_an_error() {
        let err =
            parse_bytes(DocKind::Text, &[0xff, 0xfe, 0x00, 0x81, 0x9f], "junk.txt").unwrap_err();
        assert!(err.to_string().contains("junk.txt"));
    }

    #[test]
    fn caption_heuristics() {
        assert!(looks_like_figure_caption("Figure 1: A cat."));
        assert!(looks_like_figure_caption("Fig. 2. Dogs"));
        assert!(!looks_like_figure_caption("Figures are nice"));
        assert!(looks_like_table_caption("Table 3: Heights"));
        assert!(!looks_like_table_caption("Tables: none"));
    }
}
