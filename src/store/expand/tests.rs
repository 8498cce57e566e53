//! Unit tests of context expansion and the picture helpers.
//!
//! Kept in one file because every case shares the same item, hit and section builders
//! below, and together they read as one specification of expansion.

use serde_json::{Map, json};

use super::build::{clip_window, evidence_anchors};
use super::*;

const B: usize = 100;

fn self_ref(pos: i64, label: &str) -> String {
    match label {
        "picture" => format!("#/pictures/{pos}"),
        "table" => format!("#/tables/{pos}"),
        _ => format!("#/texts/{pos}"),
    }
}

fn item(pos: i64, label: &str, text: &str) -> DocumentItem {
    DocumentItem {
        document_id: "d".into(),
        position: pos,
        self_ref: self_ref(pos, label),
        label: label.into(),
        text: text.into(),
        page_numbers: Vec::new(),
        picture_data: None,
        heading_level: 0,
        tree_depth: 0,
    }
}

fn paged(mut it: DocumentItem, pages: &[i64]) -> DocumentItem {
    it.page_numbers = pages.to_vec();
    it
}

fn hit(id: &str, score: f64, refs: &[&str], content: &str) -> SearchResult {
    SearchResult {
        content: content.into(),
        score,
        chunk_id: Some(id.into()),
        chunk_ids: Vec::new(),
        chunk_meta: json!({ "id": id }).as_object().unwrap().clone(),
        document_id: Some("d".into()),
        document_uri: Some("file:///d".into()),
        document_title: Some("Doc".into()),
        document_meta: Map::new(),
        order: 3,
        doc_item_refs: refs.iter().map(|r| r.to_string()).collect(),
        page_numbers: Vec::new(),
        headings: None,
        labels: vec!["text".into()],
        image_data: None,
        picture_captions: Map::new(),
        collection: None,
    }
}

fn doc(items: Vec<DocumentItem>) -> HashMap<String, Vec<DocumentItem>> {
    HashMap::from([("d".to_string(), items)])
}

fn rep(c: char, n: usize) -> String {
    std::iter::repeat_n(c, n).collect()
}

fn refs(r: &SearchResult) -> Vec<&str> {
    r.doc_item_refs.iter().map(String::as_str).collect()
}

fn texts(range: std::ops::RangeInclusive<i64>) -> Vec<String> {
    range.map(|p| format!("#/texts/{p}")).collect()
}

/// Unstructured document: items 0..n, each ten copies of its own letter.
fn letters(n: i64) -> Vec<DocumentItem> {
    (0..n)
        .map(|p| item(p, "text", &rep((b'a' + p as u8) as char, 10)))
        .collect()
}

/// One section: a ten-char header at 0 (page 1), then text items 1..=9 of ten
/// chars each (page 2). 100 chars, 118 joined, so it is taken whole and clipped.
fn ten_item_section() -> Vec<DocumentItem> {
    let mut items = vec![paged(item(0, "section_header", &rep('H', 10)), &[1])];
    for p in 1..10 {
        items.push(paged(
            item(p, "text", &rep((b'a' + p as u8) as char, 10)),
            &[2],
        ));
    }
    items
}

/// The position range `expansion_range` picks for matches at `positions`.
fn range_of(items: &[DocumentItem], positions: &[i64], max_chars: usize) -> (i64, i64) {
    let window: Vec<&DocumentItem> = items.iter().collect();
    let lens: Vec<usize> = window.iter().map(|it| char_len(&it.text)).collect();
    let has_sections = window
        .iter()
        .any(|it| SECTION_LABELS.contains(&it.label.as_str()));
    let mut matched: Vec<usize> = positions
        .iter()
        .map(|p| window.iter().position(|it| it.position == *p).unwrap())
        .collect();
    matched.sort_unstable();
    expansion_range(&window, &lens, &matched, has_sections, max_chars)
}

#[test]
fn scenario_33_overlapping_ranges_merge_under_the_best_chunk() {
    let items = letters(10);
    let low = hit("c1", 0.4, &["#/texts/3"], &items[3].text);
    let mut high = hit("c2", 0.9, &["#/texts/5"], &items[5].text);
    high.document_title = Some("Best".into());
    let out = expand_context(vec![low, high], &doc(items), 50);
    assert_eq!(out.len(), 1);
    let r = &out[0];
    assert_eq!(r.chunk_id.as_deref(), Some("c2"));
    assert_eq!(r.chunk_ids, vec!["c1".to_string(), "c2".to_string()]);
    assert_eq!(r.score, 0.9);
    assert_eq!(r.chunk_meta["id"], json!("c2"));
    assert_eq!(r.document_title.as_deref(), Some("Best"));
    // Ranges [1,5] and [3,7] merge into [1,7]: 82 joined chars, clipped to the 50
    // around item 5 (at 48..58), i.e. [28, 78), which keeps a tail of item 3.
    let joined = (1..=7u8)
        .map(|p| rep((b'a' + p) as char, 10))
        .collect::<Vec<_>>()
        .join("\n\n");
    assert_eq!(r.content, char_slice(&joined, 28, 78));
    assert_eq!(r.doc_item_refs, texts(3..=7));
}

#[test]
fn existing_chunk_ids_are_unioned() {
    let items = letters(10);
    let mut a = hit("c1", 0.4, &["#/texts/4"], &items[4].text);
    a.chunk_ids = vec!["c1".into(), "c0".into()];
    let b = hit("c2", 0.9, &["#/texts/5"], &items[5].text);
    let out = expand_context(vec![a, b], &doc(items), 1000);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].chunk_ids, vec!["c1", "c0", "c2"]);
}

#[test]
fn ranges_sharing_an_end_merge_and_adjacent_ones_do_not() {
    let shared = merge_ranges(&[(5, 9, 1), (0, 5, 0)]);
    assert_eq!(shared, vec![(0, 9, vec![0, 1])]);
    let adjacent = merge_ranges(&[(0, 5, 0), (6, 9, 1)]);
    assert_eq!(adjacent, vec![(0, 5, vec![0]), (6, 9, vec![1])]);
    let nested = merge_ranges(&[(0, 9, 0), (2, 3, 1), (9, 12, 2), (13, 14, 3)]);
    assert_eq!(nested, vec![(0, 12, vec![0, 1, 2]), (13, 14, vec![3])]);
}

#[test]
fn adjacent_sections_stay_separate_results() {
    let mut items = vec![item(0, "section_header", "Alpha")];
    items.extend((1..4).map(|p| item(p, "text", &rep('a', 10))));
    items.push(item(4, "section_header", "Beta"));
    items.extend((5..8).map(|p| item(p, "text", &rep('b', 10))));
    let a = hit("a", 0.5, &["#/texts/2"], &rep('a', 10));
    let b = hit("b", 0.6, &["#/texts/6"], &rep('b', 10));
    let out = expand_context(vec![a, b], &doc(items), B);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].chunk_id.as_deref(), Some("b"));
    assert_eq!(out[0].doc_item_refs, texts(4..=7));
    assert_eq!(out[1].doc_item_refs, texts(0..=3));
    assert_eq!(
        out[1].content,
        format!("Alpha\n\n{0}\n\n{0}\n\n{0}", rep('a', 10))
    );
}

#[test]
fn large_section_grows_only_inside_its_bounds() {
    let mut items = vec![
        item(0, "text", &rep('p', 20)),
        item(1, "section_header", "H1"),
    ];
    items.extend((2..=20).map(|p| item(p, "text", &rep('x', 20))));
    items.push(item(21, "section_header", "H2"));
    items.push(item(22, "text", &rep('q', 20)));
    // Section [1,20] holds 382 chars > B: grow from 2, never past the header at 1.
    assert_eq!(range_of(&items, &[2], B), (1, 6));
    assert_eq!(range_of(&items, &[20], B), (16, 20));
    assert_eq!(range_of(&items, &[10], B), (8, 12));
    let r = &expand_context(
        vec![hit("c", 1.0, &["#/texts/2"], &rep('x', 20))],
        &doc(items),
        B,
    )[0];
    assert!(r.content.starts_with("H1\n\n"));
    assert_eq!(r.doc_item_refs, texts(1..=6));
}

#[test]
fn section_within_budget_share_is_taken_whole() {
    let section = |header: &str, body: usize| {
        vec![
            item(0, "text", &rep('p', 50)),
            item(1, "section_header", header),
            item(2, "text", &rep('x', body)),
            item(3, "text", &rep('y', 10)),
            item(4, "section_header", "Next"),
            item(5, "text", &rep('n', 50)),
        ]
    };
    // 3 + 10 + 10 = 23 chars, within [20, 100].
    assert_eq!(range_of(&section("Sec", 10), &[2], B), (1, 3));
    // Exactly 0.2·B = 20 chars still counts.
    assert_eq!(range_of(&section("S", 9), &[2], B), (1, 3));
    // Exactly B chars too.
    assert_eq!(range_of(&section("S", 89), &[2], B), (1, 3));
    // 19 chars is too small: grows across both boundaries.
    assert_eq!(range_of(&section("S", 8), &[2], B), (0, 5));
}

#[test]
fn small_section_with_a_picture_or_table_match_is_taken_alone() {
    for label in ["picture", "table"] {
        let items = vec![
            item(0, "text", &rep('p', 50)),
            item(1, "section_header", "Fig"),
            item(2, label, "a chart"),
            item(3, "section_header", "Next"),
            item(4, "text", &rep('n', 50)),
        ];
        assert_eq!(range_of(&items, &[2], B), (1, 2), "{label}");
        let matched = self_ref(2, label);
        let r = &expand_context(vec![hit("c", 1.0, &[&matched], "a chart")], &doc(items), B)[0];
        assert_eq!(r.content, "Fig\n\na chart");
        assert_eq!(refs(r), vec!["#/texts/1", matched.as_str()]);
    }
}

#[test]
fn too_small_section_grows_across_boundaries() {
    let items = vec![
        item(0, "text", &rep('p', 30)),
        item(1, "section_header", "Sm"),
        item(2, "text", "tiny"),
        item(3, "section_header", "Next"),
        item(4, "text", &rep('n', 30)),
        item(5, "text", &rep('m', 30)),
    ];
    // 4: lo 1 (6) hi 3 (10) lo 0 (40) hi 4 (70) hi 5 (100).
    assert_eq!(range_of(&items, &[2], B), (0, 5));
}

#[test]
fn unstructured_growth_alternates_starting_below() {
    let items = letters(10);
    // 10, lo 4 → 20, hi 6 → 30, lo 3 → 40.
    assert_eq!(range_of(&items, &[5], 35), (3, 6));
    // The upward step is skipped once the downward one reached the budget.
    assert_eq!(range_of(&items, &[5], 20), (4, 5));
    // At an edge only the other side grows.
    assert_eq!(range_of(&items, &[9], 35), (6, 9));
    assert_eq!(range_of(&items, &[0], 35), (0, 3));
    // Both edges hit before the budget.
    assert_eq!(range_of(&items, &[5], 5000), (0, 9));
    // The centre is the median of the matches.
    assert_eq!(range_of(&items, &[1, 2, 8], 10), (2, 2));
}

#[test]
fn noise_is_excluded_from_text_and_counting_in_structured_windows() {
    let items = vec![
        item(0, "section_header", "Head"),
        item(1, "page_header", &rep('P', 50)),
        item(2, "text", &rep('a', 10)),
        item(3, "footnote", &rep('F', 50)),
        item(4, "text", &rep('b', 10)),
        item(5, "section_header", "Tail"),
        item(6, "text", &rep('t', 90)),
    ];
    // 24 chars without noise (124 with): the section is taken whole.
    assert_eq!(range_of(&items, &[2], B), (0, 4));
    let r = &expand_context(
        vec![hit("c", 1.0, &["#/texts/2"], &rep('a', 10))],
        &doc(items),
        B,
    )[0];
    assert_eq!(
        r.content,
        format!("Head\n\n{}\n\n{}", rep('a', 10), rep('b', 10))
    );
    assert_eq!(refs(r), vec!["#/texts/0", "#/texts/2", "#/texts/4"]);
    assert_eq!(r.labels, vec!["section_header", "text"]);
}

#[test]
fn noise_counts_in_unstructured_windows() {
    let items = vec![
        item(0, "text", &rep('a', 10)),
        item(1, "footnote", &rep('F', 10)),
        item(2, "text", &rep('b', 10)),
    ];
    let r = &expand_context(
        vec![hit("c", 1.0, &["#/texts/2"], &rep('b', 10))],
        &doc(items),
        1000,
    )[0];
    assert!(r.content.contains(&rep('F', 10)));
    assert_eq!(r.labels, vec!["footnote", "text"]);
}

#[test]
fn items_outside_the_fetch_window_are_ignored() {
    // A header at 150 is outside [0, 110] and must not make the window structured:
    // unstructured growth counts the footnote at 9, structured growth would not.
    let mut items = letters(20);
    items[9] = item(9, "footnote", &rep('F', 10));
    items.push(item(150, "section_header", "Far"));
    let r = &expand_context(
        vec![hit("c", 1.0, &["#/texts/10"], &items[10].text)],
        &doc(items),
        35,
    )[0];
    assert!(r.content.contains(&rep('F', 10)));
    assert!(!r.doc_item_refs.contains(&"#/texts/12".to_string()));
}

#[test]
fn clip_centres_on_the_anchor_and_narrows_metadata() {
    let items = ten_item_section();
    let mut h = hit("c", 1.0, &["#/texts/5"], &items[5].text);
    h.page_numbers = vec![7];
    let r = &expand_context(vec![h], &doc(items), B)[0];
    // Joined is 118 chars; item 5 sits at 60..70, so the window is [15, 115).
    let joined = (0..10u8)
        .map(|p| rep(if p == 0 { 'H' } else { (b'a' + p) as char }, 10))
        .collect::<Vec<_>>()
        .join("\n\n");
    assert_eq!(r.content, char_slice(&joined, 15, 115));
    assert_eq!(r.content.find(&rep('f', 10)), Some(45));
    assert_eq!(r.doc_item_refs, texts(1..=9));
    assert_eq!(r.labels, vec!["text"]);
    // Item pages narrowed to survivors, plus the fully surviving constituent's own.
    assert_eq!(r.page_numbers, vec![2, 7]);
}

#[test]
fn clip_keeps_a_prefix_when_the_anchor_is_not_found() {
    let items = ten_item_section();
    let mut h = hit("c", 1.0, &["#/texts/5"], "text that is nowhere");
    h.page_numbers = vec![7];
    let r = &expand_context(vec![h], &doc(items), B)[0];
    assert_eq!(char_len(&r.content), B);
    assert!(r.content.starts_with(&rep('H', 10)));
    assert_eq!(r.doc_item_refs, texts(0..=8));
    assert_eq!(r.labels, vec!["section_header", "text"]);
    assert_eq!(r.page_numbers, vec![1, 2, 7]);
}

#[test]
fn clip_anchors_on_a_central_slice_when_the_exact_text_drifted() {
    let body: String = (0..50).map(|i| format!("{i:03}|")).collect();
    let items = vec![
        item(0, "text", &rep('p', 100)),
        item(1, "text", &body),
        item(2, "text", &rep('q', 100)),
    ];
    let chunk = format!("DRIFT{}DRIFT", char_slice(&body, 20, 165));
    let r = &expand_context(vec![hit("c", 1.0, &["#/texts/1"], &chunk)], &doc(items), B)[0];
    // Anchor = chunk chars [27, 127) = body[42, 142); the window is exactly that.
    assert_eq!(r.content, char_slice(&body, 42, 142));
    assert_eq!(refs(r), vec!["#/texts/1"]);
}

#[test]
fn clip_counts_chars_not_bytes() {
    let items = vec![
        item(0, "text", &rep('é', 60)),
        item(1, "text", &rep('漢', 60)),
    ];
    let r = &expand_context(
        vec![hit("c", 1.0, &["#/texts/1"], &rep('漢', 60))],
        &doc(items),
        B,
    )[0];
    assert_eq!(char_len(&r.content), B);
    assert!(r.content.ends_with(&rep('漢', 60)));
    assert_eq!(refs(r), vec!["#/texts/0", "#/texts/1"]);
}

#[test]
fn group_splits_back_when_the_clip_evicts_a_constituent() {
    let items = ten_item_section();
    let best = hit("best", 0.9, &["#/texts/8"], &items[8].text);
    let other = hit("other", 0.5, &["#/texts/0"], &items[0].text);
    let out = expand_context(vec![other, best], &doc(items), B);
    // Merged, the window around item 8 is [18, 118) and loses item 0.
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].chunk_id.as_deref(), Some("best"));
    assert_eq!(out[0].chunk_ids, vec!["best"]);
    assert_eq!(out[0].doc_item_refs, texts(1..=9));
    assert_eq!(out[1].chunk_id.as_deref(), Some("other"));
    assert_eq!(out[1].chunk_ids, vec!["other"]);
    assert_eq!(out[1].doc_item_refs, texts(0..=8));
    assert!(out[1].content.starts_with(&rep('H', 10)));
}

#[test]
fn image_data_survives_only_with_its_refs() {
    let mut items = ten_item_section();
    items[9] = item(9, "picture", &rep('z', 10));
    let with_picture = |content: &str| {
        let mut h = hit("c", 1.0, &["#/pictures/9"], content);
        h.image_data = Some(
            json!({ "#/pictures/9": "QUJD" })
                .as_object()
                .unwrap()
                .clone(),
        );
        h.picture_captions = json!({ "#/pictures/9": "cap" })
            .as_object()
            .unwrap()
            .clone();
        h
    };
    // Anchor found: item 9 stays in the window, bytes and caption stay.
    let kept = &expand_context(vec![with_picture(&rep('z', 10))], &doc(items.clone()), B)[0];
    assert!(kept.doc_item_refs.contains(&"#/pictures/9".to_string()));
    assert_eq!(
        kept.image_data.as_ref().unwrap()["#/pictures/9"],
        json!("QUJD")
    );
    assert_eq!(kept.picture_captions["#/pictures/9"], json!("cap"));
    // Anchor lost: the prefix window drops item 9 and its bytes with it.
    let dropped = &expand_context(vec![with_picture("nowhere")], &doc(items), B)[0];
    assert!(!dropped.doc_item_refs.contains(&"#/pictures/9".to_string()));
    assert_eq!(dropped.image_data, None);
    assert!(dropped.picture_captions.is_empty());
}

#[test]
fn empty_picture_keeps_its_ref_but_adds_no_text_or_bytes() {
    let items = vec![
        item(0, "text", "aaaa"),
        item(1, "picture", ""),
        item(2, "text", "bbbb"),
        item(3, "text", ""),
    ];
    let r = &expand_context(vec![hit("c", 1.0, &["#/texts/0"], "aaaa")], &doc(items), B)[0];
    assert_eq!(r.content, "aaaa\n\nbbbb");
    assert_eq!(refs(r), vec!["#/texts/0", "#/pictures/1", "#/texts/2"]);
    assert_eq!(r.labels, vec!["picture", "text"]);
    assert_eq!(r.image_data, None);
}

#[test]
fn empty_picture_on_a_clip_edge_survives() {
    // Zero-width picture at the very end (122), window [22, 122].
    let items = vec![
        item(0, "text", &rep('a', 60)),
        item(1, "text", &rep('b', 60)),
        item(2, "picture", ""),
    ];
    let h = hit("c", 1.0, &["#/texts/1", "#/pictures/2"], &rep('b', 60));
    let r = &expand_context(vec![h], &doc(items), B)[0];
    assert_eq!(
        r.content,
        char_slice(&format!("{}\n\n{}", rep('a', 60), rep('b', 60)), 22, 122)
    );
    assert_eq!(refs(r), vec!["#/texts/0", "#/texts/1", "#/pictures/2"]);
    // Zero-width picture at the very start (0), prefix window [0, 100].
    let items = vec![
        item(0, "picture", ""),
        item(1, "text", &rep('a', 60)),
        item(2, "text", &rep('b', 60)),
    ];
    let h = hit(
        "c",
        1.0,
        &["#/pictures/0", "#/texts/1", "#/texts/2"],
        "nowhere",
    );
    let r = &expand_context(vec![h], &doc(items), B)[0];
    assert_eq!(refs(r), vec!["#/pictures/0", "#/texts/1", "#/texts/2"]);
    assert_eq!(char_len(&r.content), B);
}

#[test]
fn short_joined_text_falls_back_to_the_chunk() {
    let items = vec![
        item(0, "text", "aa"),
        item(1, "text", "bb"),
        item(2, "text", "cc"),
    ];
    let mut h = hit("c", 1.0, &["#/texts/1"], &rep('w', 30));
    h.page_numbers = vec![3, 1, 3];
    h.labels = vec!["text".into(), "list_item".into()];
    h.headings = Some(vec!["A".into(), "B".into()]);
    let r = &expand_context(vec![h], &doc(items), B)[0];
    assert_eq!(r.content, rep('w', 30));
    assert_eq!(refs(r), vec!["#/texts/1"]);
    assert_eq!(r.page_numbers, vec![1, 3]);
    assert_eq!(r.labels, vec!["list_item", "text"]);
    assert_eq!(r.headings, Some(vec!["A".to_string(), "B".to_string()]));
    assert_eq!(r.chunk_ids, vec!["c"]);
    assert_eq!(r.order, 0);
}

#[test]
fn headings_union_in_order_labels_and_pages_sorted() {
    let items = vec![
        paged(item(0, "text", "aaaa"), &[4]),
        paged(item(1, "table", "| t |"), &[2, 4]),
        paged(item(2, "list_item", "cccc"), &[1]),
    ];
    let mut a = hit("a", 0.2, &["#/texts/0"], "aaaa");
    a.headings = Some(vec!["X".into(), "Y".into()]);
    let mut b = hit("b", 0.3, &["#/texts/2"], "cccc");
    b.headings = Some(vec!["Y".into(), "Z".into()]);
    let out = expand_context(vec![a, b], &doc(items), B);
    assert_eq!(out.len(), 1);
    let r = &out[0];
    assert_eq!(
        r.headings,
        Some(vec!["X".to_string(), "Y".to_string(), "Z".to_string()])
    );
    assert_eq!(r.labels, vec!["list_item", "table", "text"]);
    assert_eq!(r.page_numbers, vec![1, 2, 4]);
    assert_eq!(r.content, "aaaa\n\n| t |\n\ncccc");
}

#[test]
fn unexpandable_results_pass_through_and_the_list_is_sorted_stably() {
    let items = letters(3);
    let no_refs = hit("none", 0.5, &[], "x");
    let unresolved = hit("gone", 0.7, &["#/texts/99"], "y");
    let mut no_doc = hit("nodoc", 0.9, &["#/texts/0"], "z");
    no_doc.document_id = None;
    let mut other_doc = hit("other", 0.5, &["#/texts/0"], "w");
    other_doc.document_id = Some("missing".into());
    let expanded = hit("exp", 0.5, &["#/texts/1"], &items[1].text);
    let input = vec![
        no_refs.clone(),
        unresolved.clone(),
        no_doc.clone(),
        other_doc.clone(),
        expanded,
    ];
    let out = expand_context(input, &doc(items), 15);
    let ids: Vec<&str> = out.iter().map(|r| r.id()).collect();
    assert_eq!(ids, vec!["nodoc", "gone", "exp", "none", "other"]);
    assert_eq!(out[0], no_doc);
    assert_eq!(out[1], unresolved);
    assert_eq!(out[3], no_refs);
    assert_eq!(out[4], other_doc);
    assert_eq!(out[2].chunk_ids, vec!["exp"]);
}

#[test]
fn picture_chunks_collapse_to_the_higher_score() {
    let mut p_other_doc = hit("p3", 0.3, &["#/pictures/0"], "");
    p_other_doc.document_id = Some("d2".into());
    let input = vec![
        hit("p1", 0.4, &["#/pictures/0"], ""),
        hit("t", 0.8, &["#/texts/1"], ""),
        hit("p2", 0.7, &["#/pictures/0"], ""),
        p_other_doc,
        hit("wide", 0.9, &["#/pictures/0", "#/texts/2"], ""),
        hit("p4", 0.7, &["#/pictures/0"], ""),
        hit("q1", 0.5, &["#/pictures/1"], ""),
    ];
    let out = dedup_picture_chunks(input);
    let ids: Vec<&str> = out.iter().map(|r| r.id()).collect();
    assert_eq!(ids, vec!["t", "p2", "p3", "wide", "q1"]);
}

#[test]
fn wanted_pictures_include_pictures_before_captions() {
    let items = vec![
        item(4, "picture", ""),
        item(5, "caption", "Figure 1"),
        item(7, "text", "body"),
        item(8, "caption", "Orphan caption"),
        item(9, "text", "not a caption"),
    ];
    let h = hit(
        "c",
        1.0,
        &[
            "#/texts/5",
            "#/pictures/3",
            "#/texts/8",
            "#/texts/9",
            "#/pictures/4",
            "#/pictures/3",
        ],
        "",
    );
    assert_eq!(
        wanted_picture_refs(&h, &items),
        vec!["#/pictures/4", "#/pictures/3"]
    );
    let mut loose = h.clone();
    loose.document_id = None;
    assert!(wanted_picture_refs(&loose, &items).is_empty());
}

#[test]
fn anchors_are_bounded_by_the_budget() {
    let long = rep('a', 300);
    let anchors = evidence_anchors(&long, 100);
    assert_eq!(
        anchors.iter().map(|a| char_len(a)).collect::<Vec<_>>(),
        vec![100]
    );
    let anchors = evidence_anchors(&long, 1000);
    assert_eq!(
        anchors.iter().map(|a| char_len(a)).collect::<Vec<_>>(),
        vec![300, 150]
    );
    let short = rep('a', 60);
    assert_eq!(evidence_anchors(&short, 1000), vec![short.clone()]);
    assert!(evidence_anchors("", 100).is_empty());
    assert_eq!(clip_window("abc", &[], 0), (0, 0));
}
