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
//! * `pdftoppm -png -r 72` — one PNG raster per page ([`PageImage`](super::PageImage); at 72
//!   dpi pixel sizes equal the page size in points, so item boxes map onto it).
//!
//! Every item carries its box on its page (points, origin top left), which becomes
//! docling's `prov`. All items are direct children of the body (`tree_depth` 1;
//! captions 2).

pub mod layout;
mod poppler;
pub mod structure;

use std::path::Path;

use crate::store::docling::label;

use super::{
    IngestError, ItemBox, ItemBuilder, ParsedDocument, looks_like_figure_caption,
    looks_like_table_caption,
};
use layout::Rect;
use poppler::{err, extract_images, font_layout, rasterize, run};
use structure::Element;

/// Parse PDF bytes (written to a temporary file for poppler).
/// Page `page_no` of the PDF at `path` rendered at `dpi` (`pdftoppm`): the PNG bytes.
pub fn render_page(path: &Path, page_no: i64, dpi: u32) -> Result<Vec<u8>, IngestError> {
    let name = path.display().to_string();
    let dir = tempfile::tempdir().map_err(|source| IngestError::Io {
        name: name.clone(),
        source,
    })?;
    let prefix = dir.path().join("page");
    let (page, dpi) = (page_no.to_string(), dpi.to_string());
    poppler::run(
        &name,
        "pdftoppm",
        &[
            "-png".as_ref(),
            "-r".as_ref(),
            dpi.as_ref(),
            "-f".as_ref(),
            page.as_ref(),
            "-l".as_ref(),
            page.as_ref(),
            "-singlefile".as_ref(),
            path.as_os_str(),
            prefix.as_os_str(),
        ],
    )?;
    let png = dir.path().join("page.png");
    std::fs::read(&png).map_err(|source| IngestError::Io {
        name: png.display().to_string(),
        source,
    })
}

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
                    let t = b.push(label::TABLE, md, 1);
                    t.page_numbers = vec![page_no];
                    t.boxes = vec![at(*rect)];
                    i += 1;
                    if let Some(Element::Text { text, rect }) = els.get(i)
                        && looks_like_table_caption(text)
                    {
                        let c = b.push(label::CAPTION, text.clone(), 2);
                        c.page_numbers = vec![page_no];
                        c.boxes = vec![at(*rect)];
                        i += 1;
                    }
                    continue;
                }
                Element::Index { rows, rect } => {
                    let md = super::markdown_table(rows);
                    let t = b.push(label::DOCUMENT_INDEX, md, 1);
                    t.page_numbers = vec![page_no];
                    t.boxes = vec![at(*rect)];
                }
                Element::Title { text, rect } => {
                    detected_title.get_or_insert_with(|| text.clone());
                    let t = b.push(label::TITLE, text.clone(), 1);
                    t.page_numbers = vec![page_no];
                    t.boxes = vec![at(*rect)];
                }
                Element::Heading { text, level, rect } => {
                    let h = b.push(label::SECTION_HEADER, text.clone(), 1);
                    h.page_numbers = vec![page_no];
                    h.heading_level = *level;
                    h.boxes = vec![at(*rect)];
                }
                Element::Text { text, rect } => {
                    if looks_like_figure_caption(text) && !page_pics.is_empty() {
                        let (data, pic_rect) = page_pics.remove(0);
                        let pic = b.push(label::PICTURE, text.clone(), 1);
                        pic.page_numbers = vec![page_no];
                        pic.picture_data = Some(data.clone());
                        pic.boxes = pic_rect.map(at).into_iter().collect();
                        let c = b.push(label::CAPTION, text.clone(), 2);
                        c.page_numbers = vec![page_no];
                        c.boxes = vec![at(*rect)];
                    } else {
                        let t = b.push(label::TEXT, text.clone(), 1);
                        t.page_numbers = vec![page_no];
                        t.boxes = vec![at(*rect)];
                    }
                }
            }
            i += 1;
        }
        for (data, rect) in page_pics {
            let pic = b.push(label::PICTURE, String::new(), 1);
            pic.page_numbers = vec![page_no];
            pic.picture_data = Some(data.clone());
            pic.boxes = rect.map(at).into_iter().collect();
        }
    }
    Ok(b.finish(info_title.or(detected_title), page_images))
}

#[cfg(test)]
mod tests;
