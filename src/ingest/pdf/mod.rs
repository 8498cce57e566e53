//! PDF → items through Debian's poppler-utils (subprocesses):
//!
//! * `pdfinfo` — validates the file and gives the page count;
//! * `pdftotext -bbox-layout` — flows (columns, in reading order), blocks
//!   (paragraphs) and lines with their boxes ([`layout`]);
//! * `pdftohtml -xml -zoom 1` — the font (size, weight) of every text run and the
//!   box of every embedded image ([`layout`]);
//! * [`structure`] — running headers, footers and page numbers left out, headings
//!   (`title`, `section_header` with levels) found by size and weight, tables kept
//!   together; hyphenated line breaks joined;
//! * `pdfimages -list` + `pdfimages -png -p` — embedded raster images (masks
//!   skipped) as `picture` items with PNG bytes; a picture goes just before a
//!   "Figure N:" block on its page (which becomes its caption), else at the
//!   end of its page. A block starting "Table N:" right after a table becomes
//!   its caption;
//! * `pdftoppm -png -r 72` — one PNG raster per page ([`PageImage`]; at 72
//!   dpi pixel sizes equal the page size in points, so item boxes map onto it).
//!
//! Every item carries its box on its page (points, origin top left), which becomes
//! docling's `prov`. All items are direct children of the body (`tree_depth` 1;
//! captions 2).

pub mod layout;
pub mod structure;

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{
    IngestError, ItemBox, ItemBuilder, PageImage, ParsedDocument, looks_like_figure_caption,
    looks_like_table_caption,
};
use layout::Rect;
use structure::Element;

fn err(name: &str, detail: impl Into<String>) -> IngestError {
    IngestError::Pdf {
        name: name.to_string(),
        detail: detail.into(),
    }
}

fn run(name: &str, cmd: &str, args: &[&std::ffi::OsStr]) -> Result<Vec<u8>, IngestError> {
    let out = Command::new(cmd).args(args).output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            err(name, format!("{cmd} not found (install poppler-utils)"))
        } else {
            err(name, format!("cannot run {cmd}: {e}"))
        }
    })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let msg = stderr
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("failed");
        return Err(err(name, format!("{cmd}: {}", msg.trim())));
    }
    Ok(out.stdout)
}

/// Parse PDF bytes (written to a temporary file for poppler).
pub fn parse_pdf_bytes(bytes: &[u8], name: &str) -> Result<ParsedDocument, IngestError> {
    let dir = tempfile::tempdir().map_err(|source| IngestError::Io {
        name: name.to_string(),
        source,
    })?;
    let p = dir.path().join("input.pdf");
    std::fs::write(&p, bytes).map_err(|source| IngestError::Io {
        name: name.to_string(),
        source,
    })?;
    parse_pdf_path(&p, name)
}

/// Parse a PDF file; `name` is used in errors.
pub fn parse_pdf_path(path: &Path, name: &str) -> Result<ParsedDocument, IngestError> {
    let head = {
        use std::io::Read;
        let mut f = std::fs::File::open(path).map_err(|source| IngestError::Io {
            name: name.to_string(),
            source,
        })?;
        let mut buf = vec![0u8; 1024];
        let n = f.read(&mut buf).map_err(|source| IngestError::Io {
            name: name.to_string(),
            source,
        })?;
        buf.truncate(n);
        buf
    };
    if !head.windows(5).any(|w| w == b"%PDF-") {
        return Err(err(name, "not a PDF file (no %PDF- header)"));
    }
    let p = path.as_os_str();
    let info = String::from_utf8_lossy(&run(name, "pdfinfo", &[p])?).into_owned();
    let page_count: i64 = info
        .lines()
        .find_map(|l| l.strip_prefix("Pages:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| err(name, "pdfinfo reported no page count"))?;

    let xhtml = String::from_utf8_lossy(&run(
        name,
        "pdftotext",
        &[
            "-bbox-layout".as_ref(),
            "-enc".as_ref(),
            "UTF-8".as_ref(),
            p,
            "-".as_ref(),
        ],
    )?)
    .into_owned();
    let (info_title, mut pages) = layout::parse_bbox_layout(&xhtml);

    let tmp = tempfile::tempdir().map_err(|source| IngestError::Io {
        name: name.to_string(),
        source,
    })?;
    let fonts = font_layout(name, path, tmp.path())?;
    layout::attach_fonts(&mut pages, &layout::parse_font_xml(&fonts));
    let elements = structure::structure(&pages);
    let pictures = extract_images(name, path, tmp.path())?;
    let page_images = rasterize(name, path, tmp.path())?;

    let mut b = ItemBuilder::default();
    let mut detected_title = None;
    for page_no in 1..=page_count {
        let idx = (page_no - 1) as usize;
        let els = elements.get(idx).map(Vec::as_slice).unwrap_or(&[]);
        let page = pages.get(idx);
        let whole = page.map(|p| Rect {
            l: 0.0,
            t: 0.0,
            r: p.width,
            b: p.height,
        });
        let at = |r: Rect| ItemBox {
            page_no,
            l: r.l,
            t: r.t,
            r: r.r,
            b: r.b,
        };
        // The page's pictures, with their boxes when pdftohtml saw as many images.
        let on_page: Vec<&Vec<u8>> = pictures
            .iter()
            .filter(|(pg, _)| *pg == page_no)
            .map(|(_, d)| d)
            .collect();
        let rects = page.map(|p| p.images.clone()).unwrap_or_default();
        let mut page_pics: Vec<(&Vec<u8>, Option<Rect>)> = on_page
            .iter()
            .enumerate()
            .map(|(k, d)| {
                let r = (rects.len() == on_page.len()).then(|| rects[k]);
                (*d, r.or(whole))
            })
            .collect();
        let mut i = 0;
        while i < els.len() {
            match &els[i] {
                Element::Table { rows, rect } => {
                    let md = super::markdown_table(rows);
                    let t = b.push("table", md, 1);
                    t.page_numbers = vec![page_no];
                    t.boxes = vec![at(*rect)];
                    i += 1;
                    if let Some(Element::Text { text, rect }) = els.get(i)
                        && looks_like_table_caption(text)
                    {
                        let c = b.push("caption", text.clone(), 2);
                        c.page_numbers = vec![page_no];
                        c.boxes = vec![at(*rect)];
                        i += 1;
                    }
                    continue;
                }
                Element::Title { text, rect } => {
                    detected_title.get_or_insert_with(|| text.clone());
                    let t = b.push("title", text.clone(), 1);
                    t.page_numbers = vec![page_no];
                    t.boxes = vec![at(*rect)];
                }
                Element::Heading { text, level, rect } => {
                    let h = b.push("section_header", text.clone(), 1);
                    h.page_numbers = vec![page_no];
                    h.heading_level = *level;
                    h.boxes = vec![at(*rect)];
                }
                Element::Text { text, rect } => {
                    if looks_like_figure_caption(text) && !page_pics.is_empty() {
                        let (data, pic_rect) = page_pics.remove(0);
                        let pic = b.push("picture", text.clone(), 1);
                        pic.page_numbers = vec![page_no];
                        pic.picture_data = Some(data.clone());
                        pic.boxes = pic_rect.map(at).into_iter().collect();
                        let c = b.push("caption", text.clone(), 2);
                        c.page_numbers = vec![page_no];
                        c.boxes = vec![at(*rect)];
                    } else {
                        let t = b.push("text", text.clone(), 1);
                        t.page_numbers = vec![page_no];
                        t.boxes = vec![at(*rect)];
                    }
                }
            }
            i += 1;
        }
        for (data, rect) in page_pics {
            let pic = b.push("picture", String::new(), 1);
            pic.page_numbers = vec![page_no];
            pic.picture_data = Some(data.clone());
            pic.boxes = rect.map(at).into_iter().collect();
        }
    }
    Ok(b.finish(info_title.or(detected_title), page_images))
}

/// `pdftohtml -xml -zoom 1` (fonts of every run, boxes of every image): the XML text.
fn font_layout(name: &str, path: &Path, dir: &Path) -> Result<String, IngestError> {
    let out = dir.join("layout");
    run(
        name,
        "pdftohtml",
        &[
            "-xml".as_ref(),
            "-zoom".as_ref(),
            "1".as_ref(),
            "-q".as_ref(),
            "-nodrm".as_ref(),
            "-fmt".as_ref(),
            "png".as_ref(),
            path.as_os_str(),
            out.as_os_str(),
        ],
    )?;
    let xml = dir.join("layout.xml");
    std::fs::read_to_string(&xml).map_err(|source| IngestError::Io {
        name: xml.display().to_string(),
        source,
    })
}

/// Embedded images: (page, PNG bytes), in page/number order, masks skipped.
fn extract_images(name: &str, path: &Path, dir: &Path) -> Result<Vec<(i64, Vec<u8>)>, IngestError> {
    let list = String::from_utf8_lossy(&run(
        name,
        "pdfimages",
        &["-list".as_ref(), path.as_os_str()],
    )?)
    .into_owned();
    // page num type ...
    let mut wanted = std::collections::HashMap::new();
    for line in list.lines().skip(2) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 3 {
            continue;
        }
        if let (Ok(page), Ok(num)) = (cols[0].parse::<i64>(), cols[1].parse::<u64>())
            && cols[2] == "image"
        {
            wanted.insert(num, page);
        }
    }
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let prefix = dir.join("img");
    run(
        name,
        "pdfimages",
        &[
            "-png".as_ref(),
            "-p".as_ref(),
            path.as_os_str(),
            prefix.as_os_str(),
        ],
    )?;
    let mut out = Vec::new();
    for (file, parts) in numbered_files(dir, "img-")? {
        // img-PPP-NNN.png
        if parts.len() != 2 {
            continue;
        }
        let (page, num) = (parts[0] as i64, parts[1]);
        if wanted.get(&num) == Some(&page) {
            let data = std::fs::read(&file).map_err(|source| IngestError::Io {
                name: file.display().to_string(),
                source,
            })?;
            out.push(((page, num), data));
        }
    }
    out.sort_by_key(|(k, _)| *k);
    Ok(out.into_iter().map(|((p, _), d)| (p, d)).collect())
}

/// Page rasters at 72 dpi.
fn rasterize(name: &str, path: &Path, dir: &Path) -> Result<Vec<PageImage>, IngestError> {
    let prefix = dir.join("page");
    run(
        name,
        "pdftoppm",
        &[
            "-png".as_ref(),
            "-r".as_ref(),
            "72".as_ref(),
            path.as_os_str(),
            prefix.as_os_str(),
        ],
    )?;
    let mut pages = Vec::new();
    for (file, parts) in numbered_files(dir, "page-")? {
        let Some(&page_no) = parts.first() else {
            continue;
        };
        let png = std::fs::read(&file).map_err(|source| IngestError::Io {
            name: file.display().to_string(),
            source,
        })?;
        let (width, height) = image::ImageReader::new(std::io::Cursor::new(&png))
            .with_guessed_format()
            .ok()
            .and_then(|r| r.into_dimensions().ok())
            .ok_or_else(|| {
                err(
                    name,
                    format!("pdftoppm wrote an unreadable PNG for page {page_no}"),
                )
            })?;
        pages.push(PageImage {
            page_no: page_no as i64,
            png,
            width,
            height,
        });
    }
    pages.sort_by_key(|p| p.page_no);
    Ok(pages)
}

/// `<prefix>N[-M...].png` files in `dir` with their numbers.
fn numbered_files(dir: &Path, prefix: &str) -> Result<Vec<(PathBuf, Vec<u64>)>, IngestError> {
    let rd = std::fs::read_dir(dir).map_err(|source| IngestError::Io {
        name: dir.display().to_string(),
        source,
    })?;
    let mut out = Vec::new();
    for e in rd.flatten() {
        let fname = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = fname
            .strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(".png"))
        else {
            continue;
        };
        let nums: Option<Vec<u64>> = rest.split('-').map(|n| n.parse().ok()).collect();
        if let Some(nums) = nums {
            out.push((e.path(), nums));
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
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
}
