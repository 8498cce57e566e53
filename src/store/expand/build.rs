//! One expanded result from a window of items (SPEC §5.3): its content, the chunk
//! anchors that must stay inside, the refs, pages and pictures it keeps.

use std::collections::{HashMap, HashSet};

use serde_json::Map;

use super::{MIN_ANCHOR, SEPARATOR, SEPARATOR_CHARS, char_find, char_len, char_slice, is_noise};
use crate::store::docling::label;
use crate::store::types::{DocumentItem, SearchResult};

/// Substrings of a chunk's content used to find it inside expanded text: the whole
/// content when it fits the budget, then a central slice of at least `MIN_ANCHOR` chars
/// (unless the content or budget is shorter), never longer than the budget.
pub(super) fn evidence_anchors(content: &str, max_chars: usize) -> Vec<String> {
    let n = char_len(content);
    if n == 0 {
        return Vec::new();
    }
    let mut anchors = Vec::new();
    if n <= max_chars {
        anchors.push(content.to_string());
    }
    if max_chars > 0 {
        let min_anchor = MIN_ANCHOR.min(max_chars).min(n);
        let target = (max_chars / 2)
            .min(n / 2)
            .max(min_anchor)
            .min(max_chars)
            .min(n);
        if target < n {
            let start = (n / 2).saturating_sub(target / 2);
            anchors.push(char_slice(content, start, start + target));
        }
    }
    anchors
}

/// The `[start, end)` char window of `content` to keep: `max_chars` wide, centred on the
/// first anchor found (trying `candidates` in order), else a prefix.
pub(super) fn clip_window(
    content: &str,
    candidates: &[&SearchResult],
    max_chars: usize,
) -> (usize, usize) {
    if max_chars == 0 {
        return (0, 0);
    }
    let n = char_len(content);
    let found = candidates.iter().find_map(|r| {
        evidence_anchors(&r.content, max_chars)
            .into_iter()
            .find_map(|a| char_find(content, &a).map(|at| (at, char_len(&a))))
    });
    let Some((at, len)) = found else {
        return (0, n.min(max_chars));
    };
    let center = at + len / 2;
    let start = center.saturating_sub(max_chars / 2);
    let end = n.min(start + max_chars);
    (end.saturating_sub(max_chars), end)
}

/// Whether an item's char span overlaps the window; a zero-width span (a picture with
/// no text) counts when it lies within the window's closed bounds.
fn span_in_window(start: usize, end: usize, win_start: usize, win_end: usize) -> bool {
    if start == end {
        win_start <= start && start <= win_end
    } else {
        start < win_end && end > win_start
    }
}

/// Whether some constituent with refs has none of them left in `built`.
pub(super) fn lost_constituent(built: &SearchResult, group: &[&SearchResult]) -> bool {
    let surviving: HashSet<&str> = built.doc_item_refs.iter().map(String::as_str).collect();
    group.iter().any(|r| {
        !r.doc_item_refs.is_empty()
            && !r
                .doc_item_refs
                .iter()
                .any(|x| surviving.contains(x.as_str()))
    })
}

/// Build one expanded result from the items at positions `[lo, hi]`.
pub(super) fn build_result(
    lo: i64,
    hi: i64,
    group: &[&SearchResult],
    pos_to_item: &HashMap<i64, &DocumentItem>,
    has_sections: bool,
    max_chars: usize,
) -> SearchResult {
    // Join the item texts, remembering each item's char span in the joined text.
    let mut joined = String::new();
    let mut cursor = 0usize;
    let mut spans: Vec<(usize, usize, &DocumentItem)> = Vec::new();
    for pos in lo..=hi {
        let Some(&item) = pos_to_item.get(&pos) else {
            continue;
        };
        if has_sections && is_noise(&item.label) {
            continue;
        }
        if !item.text.is_empty() {
            if !joined.is_empty() {
                joined.push_str(SEPARATOR);
                cursor += SEPARATOR_CHARS;
            }
            let start = cursor;
            joined.push_str(&item.text);
            cursor += char_len(&item.text);
            spans.push((start, cursor, item));
        } else if item.label == label::PICTURE {
            spans.push((cursor, cursor, item));
        }
    }

    let mut headings: Vec<String> = Vec::new();
    for h in group.iter().filter_map(|r| r.headings.as_ref()).flatten() {
        if !headings.contains(h) {
            headings.push(h.clone());
        }
    }

    // The highest-scoring constituent (the first one among equals) gives identity.
    let mut first = group[0];
    for r in &group[1..] {
        if r.score > first.score {
            first = r;
        }
    }

    let mut chunk_ids: Vec<String> = Vec::new();
    for r in group {
        let own: Vec<&String> = if r.chunk_ids.is_empty() {
            r.chunk_id.iter().collect()
        } else {
            r.chunk_ids.iter().collect()
        };
        for id in own {
            if !chunk_ids.contains(id) {
                chunk_ids.push(id.clone());
            }
        }
    }

    // Never return less than the anchor chunk itself: fragmented item texts fall back
    // to the chunk's own content and metadata.
    let (base, base_spans) = if char_len(&joined) < char_len(&first.content) {
        (first.content.clone(), None)
    } else {
        (joined, Some(spans))
    };

    let base_len = char_len(&base);
    let (content, window) = if base_len > max_chars {
        let mut candidates = vec![first];
        candidates.extend_from_slice(group);
        let (ws, we) = clip_window(&base, &candidates, max_chars);
        (char_slice(&base, ws, we), Some((ws, we)))
    } else {
        (base, None)
    };

    let (mut pages, refs, labels): (Vec<i64>, Vec<String>, Vec<String>) = match base_spans {
        None => (
            first.page_numbers.clone(),
            first.doc_item_refs.clone(),
            first.labels.clone(),
        ),
        Some(spans) => {
            let mut pages = Vec::new();
            let mut refs = Vec::new();
            let mut labels = Vec::new();
            for (s, e, item) in spans {
                if let Some((ws, we)) = window
                    && !span_in_window(s, e, ws, we)
                {
                    continue;
                }
                refs.push(item.self_ref.clone());
                if !item.label.is_empty() {
                    labels.push(item.label.clone());
                }
                pages.extend_from_slice(&item.page_numbers);
            }
            (pages, refs, labels)
        }
    };

    // Pages of constituents whose refs all survived come back even when the items
    // carry none.
    let surviving: HashSet<&str> = refs.iter().map(String::as_str).collect();
    for r in group {
        if !r.page_numbers.is_empty()
            && !r.doc_item_refs.is_empty()
            && r.doc_item_refs
                .iter()
                .all(|x| surviving.contains(x.as_str()))
        {
            pages.extend_from_slice(&r.page_numbers);
        }
    }
    pages.sort_unstable();
    pages.dedup();
    let mut labels = labels;
    labels.sort();
    labels.dedup();

    // Picture bytes and captions only from constituents still present.
    let mut image_data = Map::new();
    let mut captions = Map::new();
    for r in group {
        if !r.doc_item_refs.is_empty()
            && !r
                .doc_item_refs
                .iter()
                .any(|x| surviving.contains(x.as_str()))
        {
            continue;
        }
        if let Some(data) = &r.image_data {
            for (k, v) in data {
                image_data.insert(k.clone(), v.clone());
            }
        }
        for (k, v) in &r.picture_captions {
            captions.insert(k.clone(), v.clone());
        }
    }

    SearchResult {
        content,
        score: group.iter().map(|r| r.score).fold(first.score, f64::max),
        chunk_id: first.chunk_id.clone(),
        chunk_ids,
        chunk_meta: first.chunk_meta.clone(),
        document_id: first.document_id.clone(),
        document_uri: first.document_uri.clone(),
        document_title: first.document_title.clone(),
        document_meta: first.document_meta.clone(),
        order: 0,
        doc_item_refs: if refs.is_empty() {
            first.doc_item_refs.clone()
        } else {
            refs
        },
        page_numbers: if pages.is_empty() {
            first.page_numbers.clone()
        } else {
            pages
        },
        headings: if headings.is_empty() {
            None
        } else {
            Some(headings)
        },
        labels: if labels.is_empty() {
            first.labels.clone()
        } else {
            labels
        },
        image_data: if image_data.is_empty() {
            None
        } else {
            Some(image_data)
        },
        picture_captions: captions,
        collection: first.collection.clone(),
    }
}
