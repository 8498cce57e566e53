//! Context expansion of search results over `document_items` (SPEC §5.3), plus the two
//! pure helpers of the store's search (SPEC §5.2): picture-chunk dedup and the picture
//! refs a result wants bytes for.
//!
//! Everything here is pure: the caller loads the items, this module only decides.
//! Character counts and offsets are in Unicode scalar values (what Python's `len` and
//! slicing count), never bytes.//!
//! Here the windows: which items around the matched ones each result grows over.
//! `build` turns a window into the expanded result; `pictures` holds the two search
//! helpers.

mod build;
mod pictures;

use std::collections::{HashMap, HashSet};

use crate::store::docling::label;
use crate::store::types::{DocumentItem, SearchResult};

use build::{build_result, lost_constituent};
pub use pictures::{dedup_picture_chunks, wanted_picture_refs};

/// Labels excluded from content and from char counting in structured windows.
pub const NOISE_LABELS: &[&str] = &[
    label::FOOTNOTE,
    label::PAGE_HEADER,
    label::PAGE_FOOTER,
    label::DOCUMENT_INDEX,
];

/// Labels that start a section.
const SECTION_LABELS: &[&str] = &[label::SECTION_HEADER, label::TITLE];

/// Matched labels whose small section is taken alone, never crossing its boundaries.
const TIGHT_LABELS: &[&str] = &[label::PICTURE, label::TABLE];

/// A section smaller than this share of the budget is too small to stand alone.
const MIN_SECTION_RATIO: f64 = 0.2;

/// Positions fetched on each side of a document's matched items.
const WINDOW_MARGIN: i64 = 100;

/// Shortest anchor (in chars) used to locate a chunk inside expanded text, unless the
/// chunk or the budget is shorter.
const MIN_ANCHOR: usize = 128;

const SEPARATOR: &str = "\n\n";
const SEPARATOR_CHARS: usize = 2;

fn is_noise(label: &str) -> bool {
    NOISE_LABELS.contains(&label)
}

fn char_len(s: &str) -> usize {
    s.chars().count()
}

/// The chars `[start, end)` of `s`.
fn char_slice(s: &str, start: usize, end: usize) -> String {
    s.chars()
        .skip(start)
        .take(end.saturating_sub(start))
        .collect()
}

/// Char offset of the first occurrence of `needle` in `hay`.
fn char_find(hay: &str, needle: &str) -> Option<usize> {
    hay.find(needle).map(|byte| hay[..byte].chars().count())
}

/// Descending-score comparison key: `-0.0` ranks with `0.0`, and NaN gets a fixed place
/// so the sort sees a total order.
fn score_key(score: f64) -> f64 {
    if score == 0.0 { 0.0 } else { score }
}

/// Expand each result to its surrounding context (SPEC §5.3).
///
/// `items` maps document_id to that document's items sorted by position. Only the
/// items inside `[min_pos - 100, max_pos + 100]` of a document's resolved refs are
/// used, so a caller that loads more gets the same answer. `max_chars` is the budget B.
pub fn expand_context(
    results: Vec<SearchResult>,
    items: &HashMap<String, Vec<DocumentItem>>,
    max_chars: usize,
) -> Vec<SearchResult> {
    // Group by document in order of first appearance; results without a document form
    // their own group and pass through.
    let mut groups: Vec<(Option<String>, Vec<SearchResult>)> = Vec::new();
    for result in results {
        match groups
            .iter_mut()
            .find(|(doc, _)| *doc == result.document_id)
        {
            Some((_, group)) => group.push(result),
            None => groups.push((result.document_id.clone(), vec![result])),
        }
    }

    let mut out = Vec::new();
    for (doc, group) in groups {
        let expandable = doc.is_some() && group.iter().any(|r| !r.doc_item_refs.is_empty());
        match doc.as_deref().and_then(|d| items.get(d)) {
            Some(doc_items) if expandable => {
                out.extend(expand_document(group, doc_items, max_chars));
            }
            _ => out.extend(group),
        }
    }

    out.sort_by(|a, b| score_key(b.score).total_cmp(&score_key(a.score)));
    out
}

/// Expand the results of one document.
fn expand_document(
    results: Vec<SearchResult>,
    doc_items: &[DocumentItem],
    max_chars: usize,
) -> Vec<SearchResult> {
    // Resolve every ref of every result against the whole document.
    let ref_to_pos: HashMap<&str, i64> = doc_items
        .iter()
        .map(|it| (it.self_ref.as_str(), it.position))
        .collect();
    let resolved: Vec<i64> = results
        .iter()
        .flat_map(|r| r.doc_item_refs.iter())
        .filter_map(|r| ref_to_pos.get(r.as_str()).copied())
        .collect();
    let (Some(&min_pos), Some(&max_pos)) = (resolved.iter().min(), resolved.iter().max()) else {
        return results;
    };
    let (win_lo, win_hi) = ((min_pos - WINDOW_MARGIN).max(0), max_pos + WINDOW_MARGIN);

    let mut window: Vec<&DocumentItem> = doc_items
        .iter()
        .filter(|it| it.position >= win_lo && it.position <= win_hi)
        .collect();
    window.sort_by_key(|it| it.position);
    if window.is_empty() {
        return results;
    }
    let lens: Vec<usize> = window.iter().map(|it| char_len(&it.text)).collect();
    let has_sections = window
        .iter()
        .any(|it| SECTION_LABELS.contains(&it.label.as_str()));
    let pos_to_idx: HashMap<i64, usize> = window
        .iter()
        .enumerate()
        .map(|(i, it)| (it.position, i))
        .collect();
    let pos_to_item: HashMap<i64, &DocumentItem> =
        window.iter().map(|it| (it.position, *it)).collect();

    // One range per result with at least one resolvable ref; the rest pass through.
    let mut ranges: Vec<(i64, i64, usize)> = Vec::new();
    let mut passthrough: Vec<usize> = Vec::new();
    for (idx, result) in results.iter().enumerate() {
        let matched: HashSet<i64> = result
            .doc_item_refs
            .iter()
            .filter_map(|r| ref_to_pos.get(r.as_str()).copied())
            .collect();
        let mut matched_idx: Vec<usize> = matched
            .iter()
            .filter_map(|p| pos_to_idx.get(p).copied())
            .collect();
        if matched_idx.is_empty() {
            passthrough.push(idx);
            continue;
        }
        matched_idx.sort_unstable();
        let (lo, hi) = expansion_range(&window, &lens, &matched_idx, has_sections, max_chars);
        ranges.push((lo, hi, idx));
    }

    let mut out = Vec::new();
    for (lo, hi, members) in merge_ranges(&ranges) {
        let group: Vec<&SearchResult> = members.iter().map(|&i| &results[i]).collect();
        let built = build_result(lo, hi, &group, &pos_to_item, has_sections, max_chars);
        if group.len() > 1 && lost_constituent(&built, &group) {
            // The merged window cannot hold every constituent's evidence: give each
            // constituent its own window, clipped around its own anchor.
            for &i in &members {
                let (clo, chi, _) = ranges
                    .iter()
                    .find(|(_, _, r)| *r == i)
                    .copied()
                    .expect("every member has a range");
                out.push(build_result(
                    clo,
                    chi,
                    &[&results[i]],
                    &pos_to_item,
                    has_sections,
                    max_chars,
                ));
            }
        } else {
            out.push(built);
        }
    }
    let mut results: Vec<Option<SearchResult>> = results.into_iter().map(Some).collect();
    out.extend(passthrough.into_iter().filter_map(|i| results[i].take()));
    out
}

/// Merge ranges that overlap, including ranges that share an end position. Merely
/// adjacent ranges stay apart. Groups come out sorted by start; members keep the
/// input order among equal starts.
fn merge_ranges(ranges: &[(i64, i64, usize)]) -> Vec<(i64, i64, Vec<usize>)> {
    let mut sorted = ranges.to_vec();
    sorted.sort_by_key(|r| r.0);
    let mut merged: Vec<(i64, i64, Vec<usize>)> = Vec::new();
    for (lo, hi, idx) in sorted {
        match merged.last_mut() {
            Some(cur) if cur.1 >= lo => {
                cur.1 = cur.1.max(hi);
                cur.2.push(idx);
            }
            _ => merged.push((lo, hi, vec![idx])),
        }
    }
    merged
}

/// The inclusive position range one result expands to. `matched` holds sorted indices
/// into `items`.
fn expansion_range(
    items: &[&DocumentItem],
    lens: &[usize],
    matched: &[usize],
    has_sections: bool,
    max_chars: usize,
) -> (i64, i64) {
    let center = matched[matched.len() / 2];
    let last = items.len() - 1;
    if !has_sections {
        return grow_outward(items, lens, center, max_chars, false, 0, last);
    }

    // Sections: a leading one before the first header, then one per header running to
    // just before the next header.
    let headers: Vec<usize> = (0..items.len())
        .filter(|&i| SECTION_LABELS.contains(&items[i].label.as_str()))
        .collect();
    let mut sections: Vec<(usize, usize)> = Vec::new();
    if headers[0] > 0 {
        sections.push((0, headers[0] - 1));
    }
    for (j, &h) in headers.iter().enumerate() {
        let end = headers.get(j + 1).map_or(last, |&next| next - 1);
        sections.push((h, end));
    }
    let (sec_start, sec_end) = sections
        .iter()
        .copied()
        .find(|&(s, e)| s <= center && center <= e)
        .unwrap_or(sections[0]);

    let sec_chars: usize = (sec_start..=sec_end)
        .filter(|&i| !is_noise(&items[i].label))
        .map(|i| lens[i])
        .sum();
    let min_useful = (max_chars as f64 * MIN_SECTION_RATIO).floor() as usize;
    let whole_section = (items[sec_start].position, items[sec_end].position);

    if sec_chars <= max_chars && sec_chars >= min_useful {
        return whole_section;
    }
    if sec_chars > max_chars {
        return grow_outward(items, lens, center, max_chars, true, sec_start, sec_end);
    }
    if matched
        .iter()
        .any(|&i| TIGHT_LABELS.contains(&items[i].label.as_str()))
    {
        return whole_section;
    }
    grow_outward(items, lens, center, max_chars, true, 0, last)
}

/// Grow from `center` one item at a time, first toward lower positions and then toward
/// higher ones, until the char count reaches `max_chars` or both bounds are hit. With
/// `skip_noise`, noise items are walked over but not counted.
fn grow_outward(
    items: &[&DocumentItem],
    lens: &[usize],
    center: usize,
    max_chars: usize,
    skip_noise: bool,
    lo_bound: usize,
    hi_bound: usize,
) -> (i64, i64) {
    let counted = |i: usize| {
        if skip_noise && is_noise(&items[i].label) {
            0
        } else {
            lens[i]
        }
    };
    let (mut lo, mut hi) = (center, center);
    let mut chars = counted(center);
    while chars < max_chars {
        let mut grew = false;
        if lo > lo_bound {
            lo -= 1;
            chars += counted(lo);
            grew = true;
        }
        if hi < hi_bound && chars < max_chars {
            hi += 1;
            chars += counted(hi);
            grew = true;
        }
        if !grew {
            break;
        }
    }
    (items[lo].position, items[hi].position)
}

#[cfg(test)]
mod tests;
