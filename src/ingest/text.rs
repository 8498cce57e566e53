//! Plain text → `text` items, one per paragraph (split on blank lines),
//! whitespace normalised, no title.
//!
//! Note: haiku.rag itself routes `.txt` through docling's Markdown backend
//! (`convert_text(..., name="<stem>.md")`), so Markdown syntax in a `.txt`
//! file would become headings/lists there; we deliberately keep plain text
//! plain.

use crate::store::docling::label;

use super::{ItemBuilder, ParsedDocument, normalize_ws};

pub fn parse_text(src: &str) -> ParsedDocument {
    let mut b = ItemBuilder::default();
    let mut para = String::new();
    let flush = |para: &mut String, b: &mut ItemBuilder| {
        let t = normalize_ws(para);
        para.clear();
        if !t.is_empty() {
            b.push(label::TEXT, t, 1);
        }
    };
    for line in src.lines() {
        if line.trim().is_empty() {
            flush(&mut para, &mut b);
        } else {
            para.push_str(line);
            para.push('\n');
        }
    }
    flush(&mut para, &mut b);
    b.finish(None, Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_split_on_blank_lines() {
        let doc = parse_text("First line\nstill first.\n\n\n  Second\tparagraph  \n \t\nThird\r\n");
        let got: Vec<(&str, &str, &str, i64)> = doc
            .items
            .iter()
            .map(|i| {
                (
                    i.self_ref.as_str(),
                    i.label.as_str(),
                    i.text.as_str(),
                    i.tree_depth,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("#/texts/0", "text", "First line still first.", 1),
                ("#/texts/1", "text", "Second paragraph", 1),
                ("#/texts/2", "text", "Third", 1)
            ]
        );
        assert_eq!(doc.title, None);
        assert_eq!(
            doc.content,
            "First line still first.\n\nSecond paragraph\n\nThird"
        );
        assert!(doc.pages.is_empty());
    }

    #[test]
    fn empty_text_has_no_items() {
        assert!(parse_text("  \n\n").items.is_empty());
    }
}
