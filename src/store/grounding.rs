//! Visual grounding: where items sit on their pages (the docling `prov` boxes of
//! `documents.docling_document`), and a page raster with those boxes outlined.
//!
//! Boxes are in PDF points with an origin: `TOPLEFT` (y grows downwards, `t < b`) or
//! `BOTTOMLEFT` (y measured from the bottom of the page, `t > b`); haiku.rag-built
//! databases carry either. [`draw_outlines`] maps both onto the raster, clamps them to
//! the page and skips degenerate ones.

use std::collections::BTreeMap;

use image::{DynamicImage, Rgba, RgbaImage};
use imageproc::drawing::draw_hollow_rect_mut;
use imageproc::rect::Rect;
use serde_json::Value;

use super::pages::decode_page_sizes;
use super::{Result, Store, StoreError};

/// Where a box's y axis starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    TopLeft,
    BottomLeft,
}

impl Origin {
    /// docling's `coord_origin` (`TOPLEFT`, `BOTTOMLEFT`); docling's default is `TOPLEFT`.
    pub fn parse(s: Option<&str>) -> Option<Origin> {
        match s {
            None | Some("TOPLEFT") => Some(Origin::TopLeft),
            Some("BOTTOMLEFT") => Some(Origin::BottomLeft),
            Some(_) => None,
        }
    }
}

/// One `prov` box of an item: a rectangle on a page, in PDF points.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProvBox {
    pub page_no: i64,
    pub l: f64,
    pub t: f64,
    pub r: f64,
    pub b: f64,
    pub origin: Origin,
}

/// What an outlined box stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Surrounding context (context expansion): drawn first, in faint yellow.
    Context,
    /// An item the chunk (or citation) itself refers to: drawn on top, in strong orange.
    Matched,
}

/// The outline colour of matched items (haiku.rag's strong orange).
pub const MATCHED_COLOUR: Rgba<u8> = Rgba([255, 102, 0, 255]);
/// The outline colour of expansion context (haiku.rag's faint yellow).
pub const CONTEXT_COLOUR: Rgba<u8> = Rgba([240, 210, 60, 255]);

impl Role {
    pub fn colour(self) -> Rgba<u8> {
        match self {
            Role::Matched => MATCHED_COLOUR,
            Role::Context => CONTEXT_COLOUR,
        }
    }
}

/// Line width in pixels for a raster: about 1/300 of its shorter side, at least 1.
/// Context outlines are drawn this thin; matched items twice as thick.
pub fn line_width(width: u32, height: u32) -> u32 {
    (width.min(height) / 300).max(1)
}

/// How much of [`MATCHED_COLOUR`] tints the inside of a matched item, out of 256: the
/// item stands out among the context while its text stays readable.
pub const MATCHED_FILL: u32 = 64;

/// `px` tinted with `colour`, `alpha` out of 256.
fn tint(px: Rgba<u8>, colour: Rgba<u8>, alpha: u32) -> Rgba<u8> {
    let mix = |p: u8, c: u8| ((p as u32 * (256 - alpha) + c as u32 * alpha) / 256) as u8;
    Rgba([
        mix(px[0], colour[0]),
        mix(px[1], colour[1]),
        mix(px[2], colour[2]),
        px[3],
    ])
}

/// A box in raster pixels: `[x0, x1) × [y0, y1)`, inside the raster; `None` when the box
/// is not finite or covers less than a pixel once clamped to the page.
pub fn pixel_rect(
    bx: &ProvBox,
    page: (f64, f64),
    raster: (u32, u32),
) -> Option<(u32, u32, u32, u32)> {
    let (pw, ph) = page;
    let (w, h) = (raster.0 as f64, raster.1 as f64);
    if !(pw > 0.0 && ph > 0.0) || raster.0 == 0 || raster.1 == 0 {
        return None;
    }
    let (top, bottom) = match bx.origin {
        Origin::TopLeft => (bx.t, bx.b),
        Origin::BottomLeft => (ph - bx.t, ph - bx.b),
    };
    let vals = [bx.l, bx.r, top, bottom];
    if vals.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let (sx, sy) = (w / pw, h / ph);
    let clamp = |v: f64, max: f64| v.clamp(0.0, max);
    let x0 = clamp(bx.l.min(bx.r) * sx, w).floor();
    let x1 = clamp(bx.l.max(bx.r) * sx, w).ceil();
    let y0 = clamp(top.min(bottom) * sy, h).floor();
    let y1 = clamp(top.max(bottom) * sy, h).ceil();
    if x1 - x0 < 1.0 || y1 - y0 < 1.0 {
        return None;
    }
    Some((x0 as u32, x1 as u32, y0 as u32, y1 as u32))
}

/// The raster with each box outlined in its role's colour, the line width scaled to the
/// raster: context first, thin; then matched items tinted inside ([`MATCHED_FILL`]) and
/// outlined twice as thick, on top. `page` is the page size in points.
pub fn draw_outlines(
    raster: &DynamicImage,
    page: (f64, f64),
    boxes: &[(Role, ProvBox)],
) -> RgbaImage {
    let mut img = raster.to_rgba8();
    let (w, h) = img.dimensions();
    let mut sorted: Vec<&(Role, ProvBox)> = boxes.iter().collect();
    sorted.sort_by_key(|(role, _)| *role);
    // The tint goes under every matched outline, so one matched box never tints over
    // another's edge.
    for (_, bx) in sorted.iter().filter(|(role, _)| *role == Role::Matched) {
        let Some((x0, x1, y0, y1)) = pixel_rect(bx, page, (w, h)) else {
            continue;
        };
        for y in y0..y1 {
            for x in x0..x1 {
                let px = *img.get_pixel(x, y);
                img.put_pixel(x, y, tint(px, MATCHED_COLOUR, MATCHED_FILL));
            }
        }
    }
    for (role, bx) in sorted {
        let Some((x0, x1, y0, y1)) = pixel_rect(bx, page, (w, h)) else {
            continue;
        };
        let lw = line_width(w, h);
        match role {
            // Inside the box's edge.
            Role::Context => {
                for i in 0..lw {
                    let (rw, rh) = (
                        (x1 - x0).saturating_sub(2 * i),
                        (y1 - y0).saturating_sub(2 * i),
                    );
                    if rw == 0 || rh == 0 {
                        break;
                    }
                    let rect = Rect::at((x0 + i) as i32, (y0 + i) as i32).of_size(rw, rh);
                    draw_hollow_rect_mut(&mut img, rect, role.colour());
                }
            }
            // The box's edge and outwards, twice as thick: a line of text a few pixels
            // high stays readable under its tint.
            Role::Matched => {
                for i in 0..2 * lw {
                    let rect = Rect::at(x0 as i32 - i as i32, y0 as i32 - i as i32)
                        .of_size(x1 - x0 + 2 * i, y1 - y0 + 2 * i);
                    draw_hollow_rect_mut(&mut img, rect, role.colour());
                }
            }
        }
    }
    img
}

/// Page sizes in points (`pages.<n>.size`) of a docling document, by page number.
pub fn page_sizes(docling: &Value) -> BTreeMap<i64, (f64, f64)> {
    let mut out = BTreeMap::new();
    if let Some(pages) = docling.get("pages").and_then(Value::as_object) {
        for (k, p) in pages {
            let page_no = p
                .get("page_no")
                .and_then(Value::as_i64)
                .or_else(|| k.parse().ok());
            let w = p.pointer("/size/width").and_then(Value::as_f64);
            let h = p.pointer("/size/height").and_then(Value::as_f64);
            if let (Some(n), Some(w), Some(h)) = (page_no, w, h) {
                out.insert(n, (w, h));
            }
        }
    }
    out
}

/// The `prov` boxes of the item `self_ref` (`#/texts/3`) of a docling document; empty
/// when the item is unknown or has no `prov`. Boxes with an unknown origin are skipped.
pub fn item_boxes(docling: &Value, self_ref: &str) -> Vec<ProvBox> {
    let Some(pointer) = self_ref.strip_prefix('#') else {
        return Vec::new();
    };
    let Some(provs) = docling
        .pointer(pointer)
        .and_then(|item| item.get("prov"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    provs
        .iter()
        .filter_map(|p| {
            let bbox = p.get("bbox")?;
            let num = |k: &str| bbox.get(k).and_then(Value::as_f64);
            Some(ProvBox {
                page_no: p.get("page_no").and_then(Value::as_i64)?,
                l: num("l")?,
                t: num("t")?,
                r: num("r")?,
                b: num("b")?,
                origin: Origin::parse(bbox.get("coord_origin").and_then(Value::as_str))?,
            })
        })
        .collect()
}

/// Whether a box covers (nearly) the whole page: the position written for an item whose
/// parser knew only its page, which says nothing about where on the page it is.
pub fn whole_page(bx: &ProvBox, page: (f64, f64)) -> bool {
    let area = (bx.r - bx.l).abs() * (bx.t - bx.b).abs();
    area >= 0.98 * page.0 * page.1
}

impl Store {
    /// A document's page sizes in points: from its `DoclingDocument` when it lists its
    /// pages (Groundwork's), else from `docling_pages` (haiku.rag strips `pages` from the
    /// stored document).
    pub async fn page_sizes(
        &self,
        id: &str,
        docling: Option<&Value>,
    ) -> Result<BTreeMap<i64, (f64, f64)>> {
        let mut sizes = docling.map(page_sizes).unwrap_or_default();
        if sizes.is_empty()
            && let Some(blob) = self.document_blob(id, "docling_pages").await?
        {
            sizes = decode_page_sizes(&blob);
        }
        Ok(sizes)
    }

    /// A document's `DoclingDocument` (`documents.docling_document`, zstd JSON), if kept.
    pub async fn docling_document(&self, id: &str) -> Result<Option<Value>> {
        let Some(blob) = self.document_blob(id, "docling_document").await? else {
            return Ok(None);
        };
        let raw = zstd::decode_all(blob.as_slice())
            .map_err(|e| StoreError::Other(format!("decompressing docling_document: {e}")))?;
        serde_json::from_slice(&raw)
            .map(Some)
            .map_err(|e| StoreError::Other(format!("reading docling_document: {e}")))
    }
}

#[cfg(test)]
#[path = "grounding_tests.rs"]
mod tests;
