//! Plain data types shared by the store, search, context expansion and the capabilities.
//! Field names are haiku.rag 0.77 machine literals (they appear in persisted state).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::embed::EmbedderSpec;

/// How every face names a document: its title, else its URI (an empty title counts as
/// none). The one place this rule is written.
pub fn source_label(title: Option<&str>, uri: Option<&str>) -> String {
    title
        .filter(|t| !t.trim().is_empty())
        .or(uri)
        .unwrap_or_default()
        .to_string()
}

/// One search hit, as persisted in `state[ns].searches` (SPEC §5.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    pub content: String,
    pub score: f64,
    #[serde(default)]
    pub chunk_id: Option<String>,
    #[serde(default)]
    pub chunk_ids: Vec<String>,
    #[serde(default)]
    pub chunk_meta: Map<String, Value>,
    #[serde(default)]
    pub document_id: Option<String>,
    #[serde(default)]
    pub document_uri: Option<String>,
    #[serde(default)]
    pub document_title: Option<String>,
    #[serde(default)]
    pub document_meta: Map<String, Value>,
    #[serde(default)]
    pub order: i64,
    #[serde(default)]
    pub doc_item_refs: Vec<String>,
    #[serde(default)]
    pub page_numbers: Vec<i64>,
    #[serde(default)]
    pub headings: Option<Vec<String>>,
    #[serde(default)]
    pub labels: Vec<String>,
    /// `{self_ref: base64(bytes)}` for pictures that have bytes; insertion order kept.
    #[serde(default)]
    pub image_data: Option<Map<String, Value>>,
    /// `{self_ref: caption text}`; insertion order kept.
    #[serde(default)]
    pub picture_captions: Map<String, Value>,
    /// Name of the collection (database) this result came from, when a capability
    /// covers several. Not a haiku.rag 0.77 field; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collection: Option<String>,
}

impl SearchResult {
    /// [`source_label`] of the hit's document.
    pub fn source_label(&self) -> String {
        source_label(self.document_title.as_deref(), self.document_uri.as_deref())
    }

    /// The anchor chunk id, or "" when the result has none.
    pub fn id(&self) -> &str {
        self.chunk_id.as_deref().unwrap_or("")
    }
}

/// One row of the `document_items` table (SPEC §11).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DocumentItem {
    pub document_id: String,
    pub position: i64,
    pub self_ref: String,
    pub label: String,
    pub text: String,
    #[serde(default)]
    pub page_numbers: Vec<i64>,
    #[serde(default, skip_serializing)]
    pub picture_data: Option<Vec<u8>>,
    #[serde(default)]
    pub heading_level: i64,
    #[serde(default)]
    pub tree_depth: i64,
}

/// A row of `document_meta`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DocumentMeta {
    pub id: String,
    pub uri: Option<String>,
    pub title: Option<String>,
    pub metadata: Map<String, Value>,
    pub created_at: String,
    pub updated_at: String,
}

/// A row of `chunks`, without its vector.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Chunk {
    pub id: String,
    pub document_id: String,
    pub content: String,
    pub content_fts: String,
    pub metadata: Map<String, Value>,
    pub order: i64,
}

/// A chunk to be written: content plus haiku.rag chunk metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct NewChunk {
    pub content: String,
    pub content_fts: String,
    /// `doc_item_refs`, `headings`, `labels`, `page_numbers`.
    pub metadata: Value,
    pub order: i64,
}

/// One page raster of a PDF, kept for the page-images pane.
#[derive(Debug, Clone, PartialEq)]
pub struct PageRaster {
    pub page_no: i64,
    pub png: Vec<u8>,
    pub width: u32,
    pub height: u32,
}

/// A whole document to be written.
#[derive(Debug, Clone, Default)]
pub struct NewDocument {
    pub uri: Option<String>,
    pub title: Option<String>,
    pub metadata: Map<String, Value>,
    pub content: String,
    /// The docling-shaped structure, stored zstd-compressed in `documents.docling_document`.
    pub docling_document: Value,
    pub pages: Vec<PageRaster>,
    /// Items in reading order; `document_id` and `position` are assigned on write.
    pub items: Vec<DocumentItem>,
    pub chunks: Vec<NewChunk>,
}

/// What `groundwork info` reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StoreInfo {
    pub uri: String,
    pub haiku_rag_version: Option<String>,
    pub embedder: EmbedderSpec,
    pub documents: usize,
    pub chunks: usize,
    pub items: usize,
    pub pictures: usize,
    pub indexes: Vec<IndexInfo>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct IndexInfo {
    pub table: String,
    pub name: String,
    pub kind: String,
    pub columns: Vec<String>,
    /// Rows not yet covered by the index (0 when fully indexed or unknown).
    pub unindexed_rows: usize,
}

#[cfg(test)]
mod label_tests {
    use super::source_label;

    #[test]
    fn a_document_is_named_by_its_title_else_its_uri() {
        assert_eq!(
            source_label(Some("Manual"), Some("file:///m.pdf")),
            "Manual"
        );
        assert_eq!(
            source_label(Some(""), Some("file:///m.pdf")),
            "file:///m.pdf"
        );
        assert_eq!(
            source_label(Some("  "), Some("file:///m.pdf")),
            "file:///m.pdf"
        );
        assert_eq!(source_label(None, Some("file:///m.pdf")), "file:///m.pdf");
        assert_eq!(source_label(None, None), "");
    }
}
