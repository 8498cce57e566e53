//! Loading the images pane's pictures: lists a target's figures and page images from the
//! store, then decodes and sizes each for the terminal's image protocol off the UI task.
//! Pages come with the target chunk's items outlined (the host's visual grounding); the
//! visual grounding view's pages are loaded here too.

use std::sync::Arc;

use ratatui_image::picker::Picker;
use tokio::sync::mpsc::UnboundedSender;

use crate::host::grounding::ground_chunk;
use crate::store::Store;

use super::app::{GroundingPage, GroundingPages, ImageMeta, Msg, Zoom, zoom_window};

/// A picture to show: stored bytes to decode, or a page already outlined.
enum Source {
    Bytes(Vec<u8>),
    Drawn(image::RgbaImage),
}

/// Encodes `img` for the terminal at `size` cells.
fn encode(
    picker: &Picker,
    img: image::DynamicImage,
    size: (u16, u16),
) -> Result<Box<ratatui_image::protocol::Protocol>, String> {
    picker
        .new_protocol(
            img,
            ratatui::layout::Size::new(size.0, size.1),
            ratatui_image::Resize::Scale(None),
        )
        .map(Box::new)
        .map_err(|e| e.to_string())
}

/// Draws page `image` at `zoom`, `step` quarter views down, for `size` cells.
pub(super) fn encode_zoomed(
    picker: &Picker,
    image: &image::RgbaImage,
    size: (u16, u16),
    zoom: Zoom,
    step: u32,
) -> Result<(Box<ratatui_image::protocol::Protocol>, bool), String> {
    let font = picker.font_size();
    let ((x, y, w, h), at_end) = zoom_window(
        image.dimensions(),
        size,
        (font.width, font.height),
        zoom,
        step,
    );
    let part = image::imageops::crop_imm(image, x, y, w, h).to_image();
    Ok((encode(picker, part.into(), size)?, at_end))
}

/// What the grounding view asks to be drawn.
pub(super) struct GroundingLoad {
    pub generation: u64,
    pub chunk_id: String,
    /// Cells a page gets.
    pub size: (u16, u16),
    /// Outline the expansion context too.
    pub context: bool,
    /// Sharper rasters from the source PDF, where it is at hand.
    pub sharpen: Option<crate::host::grounding::Sharpen>,
}

/// The visual grounding view's pages: the chunk's items and their expansion context
/// outlined, each page encoded off the UI task.
pub(super) async fn load_grounding(
    store: Option<Arc<Store>>,
    picker: Picker,
    load: GroundingLoad,
    tx: UnboundedSender<Msg>,
) {
    let GroundingLoad {
        generation,
        chunk_id,
        size,
        context,
        sharpen,
    } = load;
    let result = match store {
        None => Err("no knowledge base is open".to_string()),
        Some(store) => match crate::host::grounding::ground_chunk_sharp(
            &store,
            &chunk_id,
            context,
            sharpen.as_ref(),
        )
        .await
        {
            Err(e) => Err(e.to_string()),
            Ok(g) => tokio::task::spawn_blocking(move || {
                let pages = g
                    .pages
                    .into_iter()
                    .map(|p| {
                        let image = Arc::new(p.image);
                        Ok(GroundingPage {
                            page_no: p.page_no,
                            matched: p.matched,
                            context: p.context,
                            protocol: encode(&picker, image.as_ref().clone().into(), size)?,
                            image,
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                Ok(GroundingPages {
                    document_uri: g.document_uri.unwrap_or(g.document),
                    pages,
                })
            })
            .await
            .unwrap_or_else(|e| Err(e.to_string())),
        },
    };
    let _ = tx.send(Msg::GroundingReady { generation, result });
}

/// Lists the figures and pages of `target`, then decodes and sizes each off the UI task.
pub(super) async fn load_images(
    store: Option<Arc<Store>>,
    picker: Picker,
    generation: u64,
    target: crate::host::transcript::Evidence,
    size: (u16, u16),
    tx: UnboundedSender<Msg>,
) {
    let Some(store) = store else {
        let _ = tx.send(Msg::ImagesListed {
            generation,
            items: Vec::new(),
        });
        return;
    };
    let mut metas = Vec::new();
    let mut blobs: Vec<Result<Source, String>> = Vec::new();
    for r in &target.picture_refs {
        metas.push(ImageMeta {
            caption: format!("{} · figure {r}", target.source),
            document: target.source.clone(),
            page: None,
            self_ref: Some(r.clone()),
            chunk_id: target.chunk_id.clone(),
            matched: 0,
        });
        blobs.push(match store.picture(&target.document_id, r).await {
            Ok(Some(b)) => Ok(Source::Bytes(b)),
            Ok(None) => Err("no image data stored for this figure".into()),
            Err(e) => Err(e.to_string()),
        });
    }
    let pages = store.page_images(&target.document_id).await;
    // The cited items outlined on their pages; without boxes the pages show plain.
    let mut outlined: std::collections::BTreeMap<i64, (usize, image::RgbaImage)> =
        ground_chunk(&store, &target.chunk_id, false)
            .await
            .map(|g| {
                g.pages
                    .into_iter()
                    .map(|p| (p.page_no, (p.matched, p.image)))
                    .collect()
            })
            .unwrap_or_default();
    for p in &target.pages {
        let drawn = outlined.remove(p);
        let matched = drawn.as_ref().map_or(0, |(n, _)| *n);
        let caption = match &drawn {
            Some((n, _)) => format!(
                "{} · page {p} · {n} item{} outlined",
                target.source,
                if *n == 1 { "" } else { "s" }
            ),
            None => format!("{} · page {p}", target.source),
        };
        metas.push(ImageMeta {
            caption,
            document: target.source.clone(),
            page: Some(*p),
            self_ref: None,
            chunk_id: target.chunk_id.clone(),
            matched,
        });
        blobs.push(match (drawn, &pages) {
            (Some((_, img)), _) => Ok(Source::Drawn(img)),
            (None, Ok(pages)) => pages
                .get(p)
                .cloned()
                .map(Source::Bytes)
                .ok_or_else(|| "this document was stored without page images".into()),
            (None, Err(e)) => Err(e.to_string()),
        });
    }
    let _ = tx.send(Msg::ImagesListed {
        generation,
        items: metas,
    });
    for (index, blob) in blobs.into_iter().enumerate() {
        let picker = picker.clone();
        let result = match blob {
            Err(e) => Err(e),
            Ok(source) => tokio::task::spawn_blocking(move || {
                let img = match source {
                    Source::Bytes(bytes) => image::load_from_memory(&bytes)
                        .map_err(|e| format!("cannot decode: {e}"))?,
                    Source::Drawn(img) => img.into(),
                };
                encode(&picker, img, size)
            })
            .await
            .unwrap_or_else(|e| Err(e.to_string())),
        };
        if tx
            .send(Msg::ImageReady {
                generation,
                index,
                result,
            })
            .is_err()
        {
            return;
        }
    }
}
