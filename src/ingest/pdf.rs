//! PDF → items through Debian's poppler-utils (subprocesses):
//!
//! * `pdfinfo` — validates the file and gives the page count;
//! * `pdftotext -bbox-layout` — text blocks (poppler's paragraphs) per page in
//!   reading order, each a `text` item with its page number. No heading
//!   detection (no font information there). Rows of side-by-side single-line
//!   blocks (≥ 2 rows with the same ≥ 2 cell count) become a `table` item
//!   (first row = header). A block starting "Figure N:" / "Table N:" right
//!   after a picture / table becomes its `caption`;
//! * `pdfimages -list` + `pdfimages -png -p` — embedded raster images (masks
//!   skipped) as `picture` items with PNG bytes; a picture goes just before a
//!   "Figure N:" block on its page (which becomes its caption), else at the
//!   end of its page;
//! * `pdftoppm -png -r 72` — one PNG raster per page ([`PageImage`]; at 72
//!   dpi pixel sizes equal the page size in points).
//!
//! All items are direct children of the body (`tree_depth` 1; captions 2).

use std::path::{Path, PathBuf};
use std::process::Command;

use scraper::{ElementRef, Html, Selector};

use super::{
    IngestError, ItemBuilder, PageImage, ParsedDocument, looks_like_figure_caption,
    looks_like_table_caption, normalize_ws,
};

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

struct Block {
    text: String,
    x_min: f64,
    y_min: f64,
    lines: usize,
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
    let (title, pages_blocks) = parse_bbox(&xhtml);

    let tmp = tempfile::tempdir().map_err(|source| IngestError::Io {
        name: name.to_string(),
        source,
    })?;
    let pictures = extract_images(name, path, tmp.path())?;
    let page_images = rasterize(name, path, tmp.path())?;

    let mut b = ItemBuilder::default();
    for page_no in 1..=page_count {
        let blocks = pages_blocks
            .get((page_no - 1) as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let mut page_pics: Vec<&Vec<u8>> = pictures
            .iter()
            .filter(|(pg, _)| *pg == page_no)
            .map(|(_, d)| d)
            .collect();
        let start = b.items.len();
        let mut i = 0;
        while i < blocks.len() {
            // table: consecutive rows of side-by-side single-line blocks
            let (rows, next) = table_at(blocks, i);
            if rows.len() >= 2 {
                let md = super::markdown_table(&rows);
                b.push("table", md, 1).page_numbers = vec![page_no];
                i = next;
                if let Some(bl) = blocks.get(i)
                    && looks_like_table_caption(&bl.text)
                {
                    b.push("caption", bl.text.clone(), 2).page_numbers = vec![page_no];
                    i += 1;
                }
                continue;
            }
            let bl = &blocks[i];
            if looks_like_figure_caption(&bl.text) && !page_pics.is_empty() {
                let data = page_pics.remove(0);
                let pic = b.push("picture", bl.text.clone(), 1);
                pic.page_numbers = vec![page_no];
                pic.picture_data = Some(data.clone());
                b.push("caption", bl.text.clone(), 2).page_numbers = vec![page_no];
            } else {
                b.push("text", bl.text.clone(), 1).page_numbers = vec![page_no];
            }
            i += 1;
        }
        for data in page_pics {
            let pic = b.push("picture", String::new(), 1);
            pic.page_numbers = vec![page_no];
            pic.picture_data = Some(data.clone());
        }
        let _ = start;
    }
    Ok(b.finish(title, page_images))
}

/// Rows of a table starting at block `i`: returns (rows, next index).
fn table_at(blocks: &[Block], i: usize) -> (Vec<Vec<String>>, usize) {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut j = i;
    loop {
        let mut k = j;
        while k < blocks.len()
            && blocks[k].lines == 1
            && (blocks[k].y_min - blocks[j].y_min).abs() < 3.0
        {
            k += 1;
        }
        if k - j < 2 {
            break;
        }
        let mut cells: Vec<&Block> = blocks[j..k].iter().collect();
        cells.sort_by(|a, b| a.x_min.total_cmp(&b.x_min));
        let row: Vec<String> = cells.iter().map(|c| c.text.clone()).collect();
        if rows.first().is_some_and(|r| r.len() != row.len()) {
            break;
        }
        rows.push(row);
        j = k;
    }
    (rows, j)
}

fn attr(e: &ElementRef, a: &str) -> f64 {
    e.value()
        .attr(a)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// Title (from the PDF info, via `<title>`) and blocks per page.
fn parse_bbox(xhtml: &str) -> (Option<String>, Vec<Vec<Block>>) {
    let html = Html::parse_document(xhtml);
    let sel = |s: &str| Selector::parse(s).expect("static selector");
    let (s_title, s_page, s_block, s_line, s_word) = (
        sel("title"),
        sel("page"),
        sel("block"),
        sel("line"),
        sel("word"),
    );
    let title = html
        .select(&s_title)
        .next()
        .map(|t| normalize_ws(&t.text().collect::<String>()))
        .filter(|t| !t.is_empty());
    let pages = html
        .select(&s_page)
        .map(|page| {
            page.select(&s_block)
                .filter_map(|block| {
                    let lines: Vec<String> = block
                        .select(&s_line)
                        .map(|l| {
                            l.select(&s_word)
                                .map(|w| w.text().collect::<String>())
                                .collect::<Vec<_>>()
                                .join(" ")
                        })
                        .collect();
                    let text = normalize_ws(&join_lines(&lines));
                    (!text.is_empty()).then(|| Block {
                        text,
                        x_min: attr(&block, "xmin"),
                        y_min: attr(&block, "ymin"),
                        lines: lines.len(),
                    })
                })
                .collect()
        })
        .collect();
    (title, pages)
}

/// Join lines with spaces, merging words hyphenated across a line break
/// ("exam-" + "ple" → "example") only when the next line starts lowercase.
fn join_lines(lines: &[String]) -> String {
    let mut out = String::new();
    for l in lines {
        let l = l.trim();
        if l.is_empty() {
            continue;
        }
        if out.ends_with('-')
            && out.len() > 1
            && out[..out.len() - 1]
                .chars()
                .last()
                .is_some_and(char::is_alphabetic)
            && l.chars().next().is_some_and(char::is_lowercase)
        {
            out.pop();
        } else if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(l);
    }
    out
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
                ("#/texts/0", "text", "Sample Report", vec![1], 1),
                (
                    "#/texts/1",
                    "text",
                    "This document exercises the PDF ingestion path of Groundwork. It has two pages, a figure with a caption and a small table.",
                    vec![1],
                    1
                ),
                ("#/texts/2", "text", "Introduction", vec![1], 1),
                (
                    "#/texts/3",
                    "text",
                    "Lighthouses guide ships along dangerous coasts at night. Each tower shows a distinct pattern of flashes.",
                    vec![1],
                    1
                ),
                ("#/pictures/0", "picture", fig, vec![1], 1),
                ("#/texts/4", "caption", fig, vec![1], 2),
                ("#/texts/5", "text", "Results", vec![2], 1),
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
        assert_eq!(table_chunk.metadata["headings"], serde_json::Value::Null);
        let pic_chunk = &chunks[4];
        assert_eq!(
            pic_chunk.metadata["doc_item_refs"],
            serde_json::json!(["#/pictures/0"])
        );
        assert_eq!(pic_chunk.metadata["page_numbers"], serde_json::json!([1]));
        assert_eq!(chunks.len(), 10);
        // docling JSON: page sizes and provenance
        let v = crate::ingest::docling_json(&doc, "sample.pdf");
        assert_eq!(v["pages"]["2"]["size"]["width"], 612.0);
        assert_eq!(v["tables"][0]["prov"][0]["page_no"], 2);
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

    #[test]
    fn hyphenated_lines_join() {
        assert_eq!(
            join_lines(&["an exam-".into(), "ple here".into()]),
            "an example here"
        );
        assert_eq!(
            join_lines(&["state-".into(), "Of-the-art".into()]),
            "state- Of-the-art"
        );
    }
}
