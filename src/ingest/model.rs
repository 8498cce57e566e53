//! The ingest data model: parsed items, their boxes, parsed documents, page rasters,
//! chunk drafts, the input kinds and the ingest error.

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
