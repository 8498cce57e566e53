//! The retrieved pictures a search return carries when vision is on (SPEC §5.6): one
//! label/image pair per distinct decodable picture of the results, each label ending
//! with [`RETRIEVED_IMAGE_TAG`] so that compaction and the transcript recognise them.

use std::collections::HashSet;

use base64::Engine as _;

use crate::engine::messages::{BinaryContent, UserContent};
use crate::store::SearchResult;
use crate::template::fill;

/// Marks the label of a picture attached to a search return (machine literal).
pub const RETRIEVED_IMAGE_TAG: &str = "[haiku.rag/retrieved-image]";

fn search_picture_label_text() -> &'static str {
    include_str!("../../../assets/prompts/capabilities/search_picture_label.txt").trim_end()
}

/// The label before a retrieved picture (SPEC §5.6).
pub fn search_picture_label(i: usize, n: usize, chunk_id: &str, self_ref: &str) -> String {
    fill(
        search_picture_label_text(),
        &[
            // First, so that no filled-in value is scanned for `{tag}`.
            ("tag", RETRIEVED_IMAGE_TAG),
            ("i", &i.to_string()),
            ("n", &n.to_string()),
            ("chunk_id", chunk_id),
            ("self_ref", self_ref),
        ],
    )
}

/// The label/image pairs for the results' decodable pictures (SPEC §5.6).
pub fn picture_content(results: &[SearchResult]) -> Vec<UserContent> {
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut kept: Vec<(String, String, Vec<u8>)> = Vec::new();
    for r in results {
        let Some(images) = &r.image_data else {
            continue;
        };
        let doc = r.document_id.clone().unwrap_or_default();
        for (self_ref, data) in images {
            if seen.contains(&(doc.clone(), self_ref.clone())) {
                continue;
            }
            let Some(encoded) = data.as_str() else {
                continue;
            };
            let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
                continue;
            };
            if image::load_from_memory(&bytes).is_err() {
                continue;
            }
            seen.insert((doc.clone(), self_ref.clone()));
            kept.push((r.id().to_string(), self_ref.clone(), bytes));
        }
    }
    let total = kept.len();
    let mut content = Vec::with_capacity(total * 2);
    for (i, (chunk_id, self_ref, bytes)) in kept.into_iter().enumerate() {
        content.push(UserContent::Text(search_picture_label(
            i + 1,
            total,
            &chunk_id,
            &self_ref,
        )));
        let mut image = BinaryContent::from_bytes(&bytes, "image/png");
        image.identifier = Some(self_ref);
        content.push(UserContent::Binary(image));
    }
    content
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value, json};

    use super::*;

    fn png() -> Vec<u8> {
        let img = image::RgbImage::from_pixel(1, 1, image::Rgb([0, 0, 0]));
        let mut out = std::io::Cursor::new(Vec::new());
        image::DynamicImage::ImageRgb8(img)
            .write_to(&mut out, image::ImageFormat::Png)
            .unwrap();
        out.into_inner()
    }

    fn result(chunk: &str, doc: &str, pictures: &[(&str, Vec<u8>)]) -> SearchResult {
        let images: Map<String, Value> = pictures
            .iter()
            .map(|(r, b)| {
                (
                    r.to_string(),
                    Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
                )
            })
            .collect();
        serde_json::from_value(json!({
            "content": "c", "score": 1.0, "chunk_id": chunk, "document_id": doc,
            "image_data": images,
        }))
        .unwrap()
    }

    #[test]
    fn scenario_31_one_pair_per_document_picture() {
        let results = vec![
            result("first", "doc-1", &[("#/pictures/0", png())]),
            result("second", "doc-1", &[("#/pictures/0", png())]),
        ];
        let content = picture_content(&results);
        assert_eq!(content.len(), 2);
        assert_eq!(
            content[0],
            UserContent::Text(
                "Page image 1 of 1, retrieved from the knowledge base for search result [first] \
                 (#/pictures/0). Not provided by the user. [haiku.rag/retrieved-image]"
                    .into()
            )
        );
        match &content[1] {
            UserContent::Binary(b) => {
                assert_eq!(b.media_type, "image/png");
                assert_eq!(b.identifier.as_deref(), Some("#/pictures/0"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn undecodable_pictures_are_skipped_and_other_documents_kept() {
        let results = vec![
            result("a", "doc-1", &[("#/pictures/0", b"not an image".to_vec())]),
            result("b", "doc-2", &[("#/pictures/0", png())]),
            result("c", "doc-1", &[("#/pictures/1", png())]),
        ];
        let content = picture_content(&results);
        let labels: Vec<&str> = content
            .iter()
            .filter_map(|c| match c {
                UserContent::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(labels.len(), 2);
        assert!(labels[0].starts_with("Page image 1 of 2") && labels[0].contains("[b]"));
        assert!(labels[1].starts_with("Page image 2 of 2") && labels[1].contains("[c]"));
    }
}
