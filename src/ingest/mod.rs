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

mod builder;
mod captions;
pub mod chunker;
pub mod docling;
mod export;
pub mod html;
pub mod hybrid;
mod images;
pub mod markdown;
mod model;
pub mod pdf;
pub mod pipeline;
pub mod text;

pub use chunker::{ChunkOptions, chunk};
pub use docling::docling_json;

pub(crate) use builder::{ItemBuilder, normalize_ws};
pub(crate) use captions::{
    caption_owner, captions_of, looks_like_figure_caption, looks_like_table_caption,
};
pub(crate) use export::{list_markdown, markdown_table, table_markdown_only, table_rows};
pub(crate) use images::{image_mime, load_image};
pub use model::{ChunkDraft, DocKind, IngestError, ItemBox, PageImage, ParsedDocument, ParsedItem};

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
