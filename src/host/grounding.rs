//! Visual grounding of a piece of evidence: for a chunk (or a document's list of
//! `doc_item_refs`), the pages its items sit on, each page raster with the matched items
//! outlined in strong orange and, when asked, the items context expansion adds around
//! them in faint yellow — ready-to-show images, page by page, for the workbench.

use std::collections::{BTreeMap, HashSet};

use image::RgbaImage;

use crate::store::Store;
use crate::store::grounding::{ProvBox, Role, draw_outlines, item_boxes, whole_page};
use crate::store::search::result_from_chunk;

/// haiku.rag's words when a document has no page images (title, then detail).
pub const NO_PAGE_IMAGES: &str = "No page images available";
pub const NO_PAGE_IMAGES_DETAIL: &str = "This document was converted without page images.";

/// One page of the evidence, outlined.
#[derive(Debug, Clone)]
pub struct GroundedPage {
    pub page_no: i64,
    /// The page raster with the outlines drawn.
    pub image: RgbaImage,
    /// Boxes of matched items on this page.
    pub matched: usize,
    /// Boxes of context items on this page.
    pub context: usize,
}

/// A piece of evidence on its pages: only pages with at least one box, in page order.
#[derive(Debug, Clone)]
pub struct Grounding {
    pub document_id: String,
    /// Title, else URI, else id.
    pub document: String,
    pub document_uri: Option<String>,
    pub pages: Vec<GroundedPage>,
}

/// Why there is nothing to show; each reads as one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GroundingError {
    #[error("chunk {0} is not in the knowledge base")]
    NoChunk(String),
    #[error("{NO_PAGE_IMAGES}: {NO_PAGE_IMAGES_DETAIL}")]
    NoPageImages,
    #[error(
        "no boxes: the items of this evidence have no positions on their pages (only PDF items do)"
    )]
    NoBoxes,
    #[error("cannot read the knowledge base: {0}")]
    Store(String),
}

fn store_err(e: impl std::fmt::Display) -> GroundingError {
    GroundingError::Store(e.to_string())
}

/// A chunk's items outlined on their pages; with `with_context`, also the items context
/// expansion adds around them (the items of the expanded result that are not the chunk's).
pub async fn ground_chunk(
    store: &Store,
    chunk_id: &str,
    with_context: bool,
) -> Result<Grounding, GroundingError> {
    ground_chunk_sharp(store, chunk_id, with_context, None).await
}

/// [`ground_chunk`] on rasters made sharper by `sharpen` where the source PDF allows.
pub async fn ground_chunk_sharp(
    store: &Store,
    chunk_id: &str,
    with_context: bool,
    sharpen: Option<&Sharpen>,
) -> Result<Grounding, GroundingError> {
    let chunk = store
        .get_chunk(chunk_id)
        .await
        .map_err(store_err)?
        .ok_or_else(|| GroundingError::NoChunk(chunk_id.to_string()))?;
    let document_id = chunk.document_id.clone();
    let result = result_from_chunk(chunk, 0.0, None);
    let matched = result.doc_item_refs.clone();
    let context = if with_context && !matched.is_empty() {
        let expanded = store.expand(vec![result]).await.map_err(store_err)?;
        expanded
            .into_iter()
            .flat_map(|r| r.doc_item_refs)
            .filter(|r| !matched.contains(r))
            .collect()
    } else {
        Vec::new()
    };
    ground_refs(store, &document_id, &matched, &context, sharpen).await
}

/// Page rasters sharper than the stored ones (haiku.rag stores them at 72 dpi): rendered
/// again from the document's source PDF, when it is a local file that is still there, at
/// a resolution giving pages at least `min_height` pixels high (at most 300 dpi), and
/// kept in `cache` per file, page and resolution.
#[derive(Debug, Clone)]
pub struct Sharpen {
    pub min_height: u32,
    pub cache: std::path::PathBuf,
}

impl Sharpen {
    /// The resolution for a page stored `stored_height` pixels high at 72 dpi, in steps
    /// of 24 dpi so nearby view sizes share a cache entry; `None` when the stored raster
    /// is already high enough.
    pub fn dpi_for(&self, stored_height: u32) -> Option<u32> {
        if stored_height == 0 || stored_height >= self.min_height {
            return None;
        }
        let dpi = (72 * self.min_height).div_ceil(stored_height);
        Some(dpi.div_ceil(24).saturating_mul(24).clamp(96, 300))
    }

    /// The source PDF of a document whose URI is `uri`, when it is a local file.
    fn source(uri: Option<&str>) -> Option<std::path::PathBuf> {
        let path = std::path::PathBuf::from(uri?.strip_prefix("file://")?);
        let is_pdf = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("pdf"));
        (is_pdf && path.is_file()).then_some(path)
    }

    /// Page `page_no` of `pdf` at `dpi`, from the cache or rendered into it; `None` when
    /// it cannot be had (the stored raster is shown then).
    fn page(&self, pdf: &std::path::Path, page_no: i64, dpi: u32) -> Option<Vec<u8>> {
        use sha2::Digest;
        let meta = std::fs::metadata(pdf).ok()?;
        let stamp = format!(
            "{}|{}|{:?}",
            pdf.display(),
            meta.len(),
            meta.modified().ok()
        );
        let key = hex::encode(&sha2::Sha256::digest(stamp.as_bytes())[..8]);
        let file = self.cache.join(format!("{key}-p{page_no}-{dpi}dpi.png"));
        if let Ok(bytes) = std::fs::read(&file) {
            return Some(bytes);
        }
        let bytes = crate::ingest::pdf::render_page(pdf, page_no, dpi).ok()?;
        // Written whole or not at all (a torn cache file would be read as the page); a
        // cache that cannot be written only costs the next view a render.
        let _ = crate::session::write_atomic(&file, &bytes);
        Some(bytes)
    }
}

/// The items `matched` (and `context`, minus the matched ones) of one document outlined
/// on their pages.
pub async fn ground_refs(
    store: &Store,
    document_id: &str,
    matched: &[String],
    context: &[String],
    sharpen: Option<&Sharpen>,
) -> Result<Grounding, GroundingError> {
    let meta = store.get_document(document_id).await.map_err(store_err)?;
    let docling = store
        .docling_document(document_id)
        .await
        .map_err(store_err)?
        .ok_or(GroundingError::NoBoxes)?;
    let sizes = store
        .page_sizes(document_id, Some(&docling))
        .await
        .map_err(store_err)?;
    let matched_set: HashSet<&str> = matched.iter().map(String::as_str).collect();
    let mut boxes: BTreeMap<i64, Vec<(Role, ProvBox)>> = BTreeMap::new();
    let roles = matched.iter().map(|r| (Role::Matched, r)).chain(
        context
            .iter()
            .filter(|r| !matched_set.contains(r.as_str()))
            .map(|r| (Role::Context, r)),
    );
    for (role, r) in roles {
        for bx in item_boxes(&docling, r) {
            let positioned = sizes.get(&bx.page_no).is_none_or(|&s| !whole_page(&bx, s));
            if positioned {
                boxes.entry(bx.page_no).or_default().push((role, bx));
            }
        }
    }
    if boxes.is_empty() {
        return Err(GroundingError::NoBoxes);
    }
    let rasters = store.page_images(document_id).await.map_err(store_err)?;
    let mut wanted: BTreeMap<i64, Vec<u8>> = rasters
        .into_iter()
        .filter(|(p, _)| boxes.contains_key(p))
        .collect();
    if wanted.is_empty() {
        return Err(GroundingError::NoPageImages);
    }
    let source = Sharpen::source(meta.as_ref().and_then(|m| m.uri.as_deref()));
    if let (Some(sharpen), Some(pdf)) = (sharpen.cloned(), source) {
        wanted = tokio::task::spawn_blocking(move || {
            wanted
                .into_iter()
                .map(|(page_no, stored)| {
                    let height = image::ImageReader::new(std::io::Cursor::new(&stored))
                        .with_guessed_format()
                        .ok()
                        .and_then(|r| r.into_dimensions().ok())
                        .map_or(0, |(_, h)| h);
                    let sharper = sharpen
                        .dpi_for(height)
                        .and_then(|dpi| sharpen.page(&pdf, page_no, dpi));
                    (page_no, sharper.unwrap_or(stored))
                })
                .collect()
        })
        .await
        .map_err(store_err)?;
    }
    let pages = tokio::task::spawn_blocking(move || draw_pages(wanted, &sizes, &boxes))
        .await
        .map_err(store_err)?;
    if pages.is_empty() {
        return Err(GroundingError::NoPageImages);
    }
    let document_uri = meta.as_ref().and_then(|m| m.uri.clone());
    let document = meta
        .as_ref()
        .map(|m| crate::store::types::source_label(m.title.as_deref(), m.uri.as_deref()))
        .filter(|label| !label.is_empty())
        .unwrap_or_else(|| document_id.to_string());
    Ok(Grounding {
        document_id: document_id.to_string(),
        document,
        document_uri,
        pages,
    })
}

/// Decodes each raster and outlines its boxes. A page without a recorded size is taken
/// to be rastered at 72 dpi (one pixel per point); a raster that does not decode is left
/// out.
fn draw_pages(
    rasters: BTreeMap<i64, Vec<u8>>,
    sizes: &BTreeMap<i64, (f64, f64)>,
    boxes: &BTreeMap<i64, Vec<(Role, ProvBox)>>,
) -> Vec<GroundedPage> {
    let mut out = Vec::new();
    for (page_no, bytes) in rasters {
        let Ok(raster) = image::load_from_memory(&bytes) else {
            continue;
        };
        let on_page = &boxes[&page_no];
        let size = sizes
            .get(&page_no)
            .copied()
            .unwrap_or((raster.width() as f64, raster.height() as f64));
        let count = |role| on_page.iter().filter(|(r, _)| *r == role).count();
        out.push(GroundedPage {
            page_no,
            image: draw_outlines(&raster, size, on_page),
            matched: count(Role::Matched),
            context: count(Role::Context),
        });
    }
    out
}
