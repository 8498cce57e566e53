//! The two pure picture helpers of the store's search (SPEC §5.2): picture-chunk
//! dedup and the picture refs a result wants bytes for.

use std::collections::HashMap;

use crate::store::docling::{PICTURE_REF_PREFIX, label};
use crate::store::types::{DocumentItem, SearchResult};

/// Collapse results whose only ref is the same picture of the same document to the
/// higher-scoring one (the earlier one on a tie); everything else keeps its place.
pub fn dedup_picture_chunks(results: Vec<SearchResult>) -> Vec<SearchResult> {
    let mut best: HashMap<(Option<String>, String), usize> = HashMap::new();
    let mut keep = vec![true; results.len()];
    for (i, r) in results.iter().enumerate() {
        let [only] = r.doc_item_refs.as_slice() else {
            continue;
        };
        if !only.starts_with(PICTURE_REF_PREFIX) {
            continue;
        }
        let key = (r.document_id.clone(), only.clone());
        match best.get(&key) {
            None => {
                best.insert(key, i);
            }
            Some(&prior) if r.score > results[prior].score => {
                keep[prior] = false;
                best.insert(key, i);
            }
            Some(_) => keep[i] = false,
        }
    }
    results
        .into_iter()
        .zip(keep)
        .filter_map(|(r, k)| k.then_some(r))
        .collect()
}

/// The picture refs whose bytes the store should fetch for `result`, in ref order
/// without repeats: its own picture refs, and for each of its refs that is a caption
/// item, the picture item just before that caption. `doc_items` are the result's
/// document's items (any subset holding the captions and their pictures). A result
/// without a document wants nothing.
pub fn wanted_picture_refs(result: &SearchResult, doc_items: &[DocumentItem]) -> Vec<String> {
    if result.document_id.is_none() {
        return Vec::new();
    }
    let mut wanted: Vec<String> = Vec::new();
    for r in &result.doc_item_refs {
        let picture = if r.starts_with(PICTURE_REF_PREFIX) {
            Some(r.clone())
        } else {
            doc_items
                .iter()
                .find(|it| it.self_ref == *r && it.label == label::CAPTION)
                .and_then(|cap| {
                    doc_items
                        .iter()
                        .find(|it| it.position == cap.position - 1 && it.label == label::PICTURE)
                })
                .map(|pic| pic.self_ref.clone())
        };
        if let Some(p) = picture
            && !wanted.contains(&p)
        {
            wanted.push(p);
        }
    }
    wanted
}
