//! Tests of the PDF parser over the sample PDFs in `tests/fixtures/ingest` (needs poppler-utils).

use super::*;
use crate::ingest::{ChunkOptions, DocKind, chunk, parse_bytes, parse_file, tests::fixture};

#[test]
fn sample_pdf_items_pages_and_pictures() {
    let doc = parse_file(&fixture("sample.pdf")).unwrap();
    assert_eq!(doc.title.as_deref(), Some("Sample Report"));
    let got: Vec<(&str, &str, &str, Vec<i64>, i64)> = doc
        .items
        .iter()
        .map(|i| {
            (
                i.self_ref.as_str(),
                i.label.as_str(),
                i.text.as_str(),
                i.page_numbers.clone(),
                i.tree_depth,
            )
        })
        .collect();
    let fig = "Figure 1: A colour gradient standing in for a photo.";
    let table = "| Name   |   Height |   Year |\n|--------|----------|--------|\n| Alpha  |       31 |   1890 |\n| Beta   |       45 |   1902 |\n| Gamma  |       27 |   1911 |";
    let table_with_caption = format!("Table 1: Heights in metres.\n\n{table}");
    assert_eq!(
        got,
        vec![
            ("#/texts/0", "title", "Sample Report", vec![1], 1),
            (
                "#/texts/1",
                "text",
                "This document exercises the PDF ingestion path of Groundwork. It has two pages, a figure with a caption and a small table.",
                vec![1],
                1
            ),
            ("#/texts/2", "section_header", "Introduction", vec![1], 1),
            (
                "#/texts/3",
                "text",
                "Lighthouses guide ships along dangerous coasts at night. Each tower shows a distinct pattern of flashes.",
                vec![1],
                1
            ),
            ("#/pictures/0", "picture", fig, vec![1], 1),
            ("#/texts/4", "caption", fig, vec![1], 2),
            ("#/texts/5", "section_header", "Results", vec![2], 1),
            (
                "#/texts/6",
                "text",
                "The table below lists three lighthouses and their heights.",
                vec![2],
                1
            ),
            ("#/tables/0", "table", &table_with_caption, vec![2], 1),
            (
                "#/texts/7",
                "caption",
                "Table 1: Heights in metres.",
                vec![2],
                2
            ),
            (
                "#/texts/8",
                "text",
                "All three towers are still in service today. The tallest one is Beta.",
                vec![2],
                1
            ),
        ]
    );
    assert_eq!(doc.items[2].heading_level, 1);
    // Boxes: the picture where the page draws it (72, 420 + 128 from the bottom of
    // a 792 pt page), the heading on its line.
    let pic_box = doc.items[4].boxes[0];
    assert_eq!(
        (pic_box.page_no, pic_box.l, pic_box.t, pic_box.r, pic_box.b),
        (1, 72.0, 244.0, 264.0, 372.0)
    );
    let h = doc.items[2].boxes[0];
    assert!(
        (h.l - 72.0).abs() < 0.5 && (h.t - 151.0).abs() < 2.0,
        "{h:?}"
    );
    // the embedded 96x64 image, as PNG bytes
    let pic = doc.items[4].picture_data.as_ref().unwrap();
    let img = image::load_from_memory(pic).unwrap();
    assert_eq!((img.width(), img.height()), (96, 64));
    // page rasters: US Letter at 72 dpi
    assert_eq!(doc.pages.len(), 2);
    for (i, p) in doc.pages.iter().enumerate() {
        assert_eq!(p.page_no, i as i64 + 1);
        let img = image::load_from_memory(&p.png).unwrap();
        assert_eq!((img.width(), img.height()), (p.width, p.height));
        assert_eq!((p.width, p.height), (612, 792));
    }
    // chunks carry page numbers; the table caption leads the table chunk
    let chunks = chunk(&doc, &ChunkOptions::default());
    let table_chunk = chunks
        .iter()
        .find(|c| {
            c.metadata["labels"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l == "table")
        })
        .unwrap();
    assert_eq!(
        table_chunk.content,
        "Table 1: Heights in metres.\n\nAlpha, Height = 31. Alpha, Year = 1890. Beta, Height = 45. Beta, Year = 1902. Gamma, Height = 27. Gamma, Year = 1911"
    );
    assert_eq!(
        table_chunk.metadata["doc_item_refs"],
        serde_json::json!(["#/texts/7", "#/tables/0"])
    );
    assert_eq!(table_chunk.metadata["page_numbers"], serde_json::json!([2]));
    assert_eq!(
        table_chunk.metadata["headings"],
        serde_json::json!(["Sample Report", "Results"])
    );
    let pic_chunk = chunks
        .iter()
        .find(|c| c.metadata["labels"] == serde_json::json!(["picture"]))
        .unwrap();
    assert_eq!(
        pic_chunk.metadata["doc_item_refs"],
        serde_json::json!(["#/pictures/0"])
    );
    assert_eq!(pic_chunk.metadata["page_numbers"], serde_json::json!([1]));
    assert_eq!(chunks.len(), 7);
    // docling JSON: page sizes and provenance
    let v = crate::ingest::docling_json(&doc, "sample.pdf");
    assert_eq!(v["pages"]["2"]["size"]["width"], 612.0);
    assert_eq!(v["tables"][0]["prov"][0]["page_no"], 2);
    assert_eq!(
        v["pictures"][0]["prov"][0]["bbox"],
        serde_json::json!({"l": 72.0, "t": 244.0, "r": 264.0, "b": 372.0, "coord_origin": "TOPLEFT"})
    );
}

/// The generated field manual (`make_structured_pdf.py`): headings with levels, the
/// running header and page numbers left out, two columns in reading order, a
/// hyphenated break joined, the table whole, every item boxed where it is.
#[test]
fn structured_pdf_headings_furniture_columns_tables_and_boxes() {
    let path = fixture("structured.pdf");
    let doc = parse_file(&path).unwrap();
    let heads: Vec<(&str, &str, i64)> = doc
        .items
        .iter()
        .filter(|i| i.label == "title" || i.label == "section_header")
        .map(|i| (i.label.as_str(), i.text.as_str(), i.heading_level))
        .collect();
    assert_eq!(
        heads,
        vec![
            ("title", "Field Manual", 0),
            ("section_header", "1 Getting started", 1),
            ("section_header", "1.1 Power", 2),
            ("section_header", "2 Measurements", 1),
            ("section_header", "2.1 Reading the gauge", 2),
        ]
    );
    for it in &doc.items {
        assert!(
            !it.text.contains("Field Manual - Groundwork"),
            "{:?}",
            it.text
        );
        assert!(
            !structure::is_page_number(&it.text),
            "a page number became an item: {it:?}"
        );
        assert!(!it.boxes.is_empty(), "{} has no box", it.self_ref);
    }
    // Page 2: the left column, then the right one; "stor-" "age" joined.
    let texts: Vec<&str> = doc
        .items
        .iter()
        .filter(|i| i.label == "text" && i.page_numbers == [2])
        .map(|i| i.text.as_str())
        .collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts[0].starts_with("The station runs from a small solar panel"));
    assert!(
        texts[0].contains("in a shaded box for storage, away"),
        "{}",
        texts[0]
    );
    assert!(texts[1].starts_with("The logger wakes every ten minutes"));
    assert!(
        doc.items.iter().position(|i| i.text == texts[0])
            < doc.items.iter().position(|i| i.text == texts[1])
    );
    // The table, whole, with its caption.
    let table = doc.items.iter().find(|i| i.label == "table").unwrap();
    assert!(table.text.contains("| Temperature"), "{}", table.text);
    assert_eq!(
        table.text.matches('\n').count(),
        6,
        "caption, blank, header, rule, 3 rows: {}",
        table.text
    );
    // Chunks carry the section path; no chunk holds furniture.
    let chunks = chunk(&doc, &ChunkOptions::default());
    let power = chunks
        .iter()
        .find(|c| c.content.starts_with("The station runs"))
        .unwrap();
    assert_eq!(
        power.metadata["headings"],
        serde_json::json!(["Field Manual", "1 Getting started", "1.1 Power"])
    );
    assert!(chunks.iter().all(|c| !c.content.contains("Groundwork")));
    // A word's box from `pdftotext -bbox` lies inside its item's box on its page.
    let words = String::from_utf8(
        std::process::Command::new("pdftotext")
            .args(["-bbox", "-f", "2", "-l", "2"])
            .arg(&path)
            .arg("-")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let wakes = words
        .lines()
        .find(|l| l.ends_with(">wakes</word>"))
        .expect("pdftotext -bbox lists the word");
    let num = |k: &str| -> f64 {
        let at = wakes.find(&format!("{k}=\"")).unwrap() + k.len() + 2;
        wakes[at..].split('"').next().unwrap().parse().unwrap()
    };
    let right = doc.items.iter().find(|i| i.text == texts[1]).unwrap();
    let bx = right.boxes[0];
    assert_eq!(bx.page_no, 2);
    assert!(
        bx.l <= num("xMin") + 0.01 && num("xMax") <= bx.r + 0.01,
        "{bx:?} {wakes}"
    );
    assert!(
        bx.t <= num("yMin") + 0.01 && num("yMax") <= bx.b + 0.01,
        "{bx:?} {wakes}"
    );
}

#[test]
fn parse_bytes_pdf_matches_file() {
    let bytes = std::fs::read(fixture("sample.pdf")).unwrap();
    let a = parse_bytes(DocKind::Pdf, &bytes, "upload.pdf").unwrap();
    let b = parse_file(&fixture("sample.pdf")).unwrap();
    assert_eq!(a.items, b.items);
    assert_eq!(a.content, b.content);
}

#[test]
fn garbage_pdf_is_an_error_naming_the_file() {
    let e = parse_bytes(DocKind::Pdf, b"\x00\x01binary garbage\xff", "junk.pdf").unwrap_err();
    assert!(e.to_string().contains("junk.pdf"), "{e}");
    // has a header but is broken
    let e = parse_bytes(
        DocKind::Pdf,
        b"%PDF-1.4\n1 0 obj << /Type /Catalog >>\ngarbage",
        "broken.pdf",
    )
    .unwrap_err();
    assert!(e.to_string().contains("broken.pdf"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("truncated.pdf");
    let mut bytes = std::fs::read(fixture("sample.pdf")).unwrap();
    bytes.truncate(400);
    std::fs::write(&p, bytes).unwrap();
    match parse_file(&p) {
        Err(e) => assert!(e.to_string().contains("truncated.pdf"), "{e}"),
        Ok(doc) => panic!("truncated PDF parsed: {} items", doc.items.len()),
    }
}
