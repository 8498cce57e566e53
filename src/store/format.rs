//! The text a search result shows the agent (SPEC §5.4).

use serde_json::Value;

use crate::store::docling::label;
use crate::store::types::SearchResult;

/// Separator between the blocks of several results.
pub const BLOCK_SEPARATOR: &str = "\n\n---\n\n";

/// What a search with no results returns.
pub const NO_RESULTS: &str = "No results found.";

/// Display priority of the labels that outrank plain text; lower wins.
const LABEL_PRIORITY: &[(&str, u8)] = &[
    (label::TABLE, 1),
    (label::CODE, 2),
    (label::FORM, 3),
    (label::FIELD_REGION, 3),
    (label::KEY_VALUE_REGION, 4),
    (label::FIELD_ITEM, 4),
    (label::FIELD_KEY, 5),
    (label::FIELD_VALUE, 6),
    (label::FIELD_HEADING, 7),
    (label::LIST_ITEM, 8),
    (label::FORMULA, 9),
    (label::CHART, 10),
    (label::PICTURE, 11),
    (label::CAPTION, 12),
    (label::FOOTNOTE, 13),
    (label::FIELD_HINT, 14),
    (label::MARKER, 15),
    (label::SECTION_HEADER, 16),
    (label::TITLE, 17),
];

fn priority(label: &str) -> Option<u8> {
    LABEL_PRIORITY
        .iter()
        .find(|(l, _)| *l == label)
        .map(|&(_, p)| p)
}

/// The label to show for a result: the known label with the lowest priority number
/// (the earliest among equals), else the first label. `None` when there are no labels.
pub fn primary_label(labels: &[String]) -> Option<String> {
    let first = labels.first()?;
    let mut best: Option<(&String, u8)> = None;
    for label in labels {
        if let Some(p) = priority(label)
            && best.is_none_or(|(_, bp)| p < bp)
        {
            best = Some((label, p));
        }
    }
    Some(best.map_or(first, |(l, _)| l).clone())
}

/// Python's `f"{x:.2f}"`: two decimals, `nan` for NaN.
fn two_decimals(x: f64) -> String {
    if x.is_nan() {
        "nan".to_string()
    } else {
        format!("{x:.2}")
    }
}

/// One result's block for the agent. `rank` and `total` give the
/// `[rank r of n]` / `[rank r]` header; without a rank the score is shown instead.
pub fn format_for_agent(r: &SearchResult, rank: Option<usize>, total: Option<usize>) -> String {
    // haiku.rag prints Python's `None` for a missing chunk id.
    let id = r.chunk_id.as_deref().unwrap_or("None");
    let mut lines = vec![match (rank, total) {
        (Some(rank), Some(total)) => format!("[{id}] [rank {rank} of {total}]"),
        (Some(rank), None) => format!("[{id}] [rank {rank}]"),
        (None, _) => format!("[{id}] (score: {})", two_decimals(r.score)),
    }];

    let mut source: Vec<String> = Vec::new();
    if let Some(title) = r.document_title.as_deref().filter(|t| !t.is_empty()) {
        source.push(format!("\"{title}\""));
    }
    if let Some(headings) = r.headings.as_ref().filter(|h| !h.is_empty()) {
        source.push(headings.join(" > "));
    }
    if !source.is_empty() {
        lines.push(format!("Source: {}", source.join(" > ")));
    }

    if let Some(label) = primary_label(&r.labels).filter(|l| !l.is_empty()) {
        lines.push(format!("Type: {label}"));
    }

    for (self_ref, caption) in &r.picture_captions {
        let text = match caption {
            Value::String(s) => s.clone(),
            Value::Null | Value::Bool(false) => String::new(),
            other => other.to_string(),
        };
        if !text.is_empty() {
            lines.push(format!("Figure caption ({self_ref}): {text}"));
        }
    }

    lines.push(format!("Content:\n{}", r.content));
    lines.join("\n")
}

/// The tool text for a list of formatted blocks.
pub fn join_results(blocks: &[String]) -> String {
    let joined = blocks.join(BLOCK_SEPARATOR);
    if joined.is_empty() {
        NO_RESULTS.to_string()
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    fn result(id: &str, content: &str) -> SearchResult {
        SearchResult {
            content: content.into(),
            score: 0.0,
            chunk_id: Some(id.into()),
            chunk_ids: vec![id.into(), "hidden-id".into()],
            chunk_meta: json!({ "secret": "meta" }).as_object().unwrap().clone(),
            document_id: Some("doc".into()),
            document_uri: Some("file:///doc".into()),
            document_title: None,
            document_meta: json!({ "secret": "docmeta" }).as_object().unwrap().clone(),
            order: 0,
            doc_item_refs: vec!["#/texts/1".into()],
            page_numbers: vec![1],
            headings: None,
            labels: Vec::new(),
            image_data: None,
            picture_captions: Map::new(),
            collection: None,
        }
    }

    fn labels(ls: &[&str]) -> Vec<String> {
        ls.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn scenario_29_two_blocks() {
        let mut first = result("c1", "Artificial intelligence is broad.");
        first.document_title = Some("AI Overview".into());
        first.headings = Some(vec!["Intro".into(), "Details".into()]);
        first.labels = labels(&["text"]);
        let second = result("c2", "Plain chunk.");
        let blocks = vec![
            format_for_agent(&first, Some(1), Some(2)),
            format_for_agent(&second, Some(2), Some(2)),
        ];
        assert_eq!(
            join_results(&blocks),
            "[c1] [rank 1 of 2]\nSource: \"AI Overview\" > Intro > Details\nType: text\n\
             Content:\nArtificial intelligence is broad.\
             \n\n---\n\n\
             [c2] [rank 2 of 2]\nContent:\nPlain chunk."
        );
        assert!(!blocks[0].contains("hidden-id") && !blocks[0].contains("secret"));
    }

    #[test]
    fn header_line_forms() {
        let mut r = result("c", "x");
        r.score = 0.876;
        assert_eq!(
            format_for_agent(&r, Some(3), None),
            "[c] [rank 3]\nContent:\nx"
        );
        assert_eq!(
            format_for_agent(&r, None, None),
            "[c] (score: 0.88)\nContent:\nx"
        );
        // A total without a rank still shows the score.
        assert_eq!(
            format_for_agent(&r, None, Some(4)),
            "[c] (score: 0.88)\nContent:\nx"
        );
        r.score = 0.125;
        assert!(format_for_agent(&r, None, None).starts_with("[c] (score: 0.12)"));
        r.score = 1.0;
        assert!(format_for_agent(&r, None, None).starts_with("[c] (score: 1.00)"));
        r.score = 0.016393;
        assert!(format_for_agent(&r, None, None).starts_with("[c] (score: 0.02)"));
        r.score = f64::NAN;
        assert!(format_for_agent(&r, None, None).starts_with("[c] (score: nan)"));
        r.chunk_id = None;
        assert!(format_for_agent(&r, Some(1), Some(1)).starts_with("[None] [rank 1 of 1]"));
    }

    #[test]
    fn source_line_variants() {
        let mut r = result("c", "x");
        r.document_title = Some("T".into());
        assert_eq!(
            format_for_agent(&r, Some(1), Some(1)).lines().nth(1),
            Some("Source: \"T\"")
        );
        r.headings = Some(vec!["A".into(), "B".into()]);
        assert_eq!(
            format_for_agent(&r, Some(1), Some(1)).lines().nth(1),
            Some("Source: \"T\" > A > B")
        );
        r.document_title = None;
        assert_eq!(
            format_for_agent(&r, Some(1), Some(1)).lines().nth(1),
            Some("Source: A > B")
        );
        // An empty title or heading list counts as absent.
        r.document_title = Some(String::new());
        r.headings = Some(Vec::new());
        assert_eq!(
            format_for_agent(&r, Some(1), Some(1)),
            "[c] [rank 1 of 1]\nContent:\nx"
        );
    }

    #[test]
    fn type_line_only_with_labels() {
        let mut r = result("c", "x");
        assert!(!format_for_agent(&r, None, None).contains("Type:"));
        r.labels = labels(&["text", "table"]);
        assert_eq!(
            format_for_agent(&r, Some(1), Some(1)),
            "[c] [rank 1 of 1]\nType: table\nContent:\nx"
        );
        r.labels = labels(&[""]);
        assert!(!format_for_agent(&r, None, None).contains("Type:"));
    }

    #[test]
    fn primary_label_priorities() {
        assert_eq!(primary_label(&[]), None);
        assert_eq!(
            primary_label(&labels(&["text", "caption", "table"])).as_deref(),
            Some("table")
        );
        assert_eq!(
            primary_label(&labels(&["title", "section_header"])).as_deref(),
            Some("section_header")
        );
        assert_eq!(
            primary_label(&labels(&["picture", "caption"])).as_deref(),
            Some("picture")
        );
        assert_eq!(
            primary_label(&labels(&["list_item", "formula", "code"])).as_deref(),
            Some("code")
        );
        // Equal priorities: the earlier label wins.
        assert_eq!(
            primary_label(&labels(&["field_region", "form"])).as_deref(),
            Some("field_region")
        );
        assert_eq!(
            primary_label(&labels(&["field_item", "key_value_region"])).as_deref(),
            Some("field_item")
        );
        // No known label: the first one.
        assert_eq!(
            primary_label(&labels(&["text", "paragraph"])).as_deref(),
            Some("text")
        );
        assert_eq!(
            primary_label(&labels(&["footnote", "marker", "text"])).as_deref(),
            Some("footnote")
        );
    }

    #[test]
    fn figure_caption_lines_in_order() {
        let mut r = result("c", "x");
        r.labels = labels(&["picture"]);
        r.picture_captions = json!({
            "#/pictures/2": "Second figure",
            "#/pictures/0": "",
            "#/pictures/1": "First figure",
        })
        .as_object()
        .unwrap()
        .clone();
        assert_eq!(
            format_for_agent(&r, Some(1), Some(1)),
            "[c] [rank 1 of 1]\nType: picture\n\
             Figure caption (#/pictures/2): Second figure\n\
             Figure caption (#/pictures/1): First figure\nContent:\nx"
        );
    }

    #[test]
    fn join_empty_and_single() {
        assert_eq!(join_results(&[]), "No results found.");
        assert_eq!(join_results(&["a".to_string()]), "a");
        assert_eq!(
            join_results(&["a".to_string(), "b".to_string()]),
            "a\n\n---\n\nb"
        );
    }
}
