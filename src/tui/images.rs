//! Loading the images pane's pictures: lists a target's figures and page images from the
//! store, then decodes and sizes each for the terminal's image protocol off the UI task.

use std::sync::Arc;

use ratatui_image::picker::Picker;
use tokio::sync::mpsc::UnboundedSender;

use crate::store::Store;

use super::app::{ImageMeta, ImageTarget, Msg};

/// Lists the figures and pages of `target`, then decodes and sizes each off the UI task.
pub(super) async fn load_images(
    store: Option<Arc<Store>>,
    picker: Picker,
    generation: u64,
    target: ImageTarget,
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
    let mut blobs: Vec<Result<Vec<u8>, String>> = Vec::new();
    for r in &target.picture_refs {
        metas.push(ImageMeta {
            caption: format!("{} · figure {r}", target.document),
            document: target.document.clone(),
            page: None,
            self_ref: Some(r.clone()),
            chunk_id: target.chunk_id.clone(),
        });
        blobs.push(match store.picture(&target.document_id, r).await {
            Ok(Some(b)) => Ok(b),
            Ok(None) => Err("no image data stored for this figure".into()),
            Err(e) => Err(e.to_string()),
        });
    }
    let pages = store.page_images(&target.document_id).await;
    for p in &target.pages {
        metas.push(ImageMeta {
            caption: format!("{} · page {p}", target.document),
            document: target.document.clone(),
            page: Some(*p),
            self_ref: None,
            chunk_id: target.chunk_id.clone(),
        });
        blobs.push(match &pages {
            Ok(pages) => pages
                .get(p)
                .cloned()
                .ok_or_else(|| "this document was stored without page images".into()),
            Err(e) => Err(e.to_string()),
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
            Ok(bytes) => tokio::task::spawn_blocking(move || {
                let img =
                    image::load_from_memory(&bytes).map_err(|e| format!("cannot decode: {e}"))?;
                picker
                    .new_protocol(
                        img,
                        ratatui::layout::Size::new(size.0, size.1),
                        ratatui_image::Resize::Scale(None),
                    )
                    .map(Box::new)
                    .map_err(|e| e.to_string())
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
