//! Tests of the rendered views: toc nesting and chunk ids, items rows, result dicts.

use super::*;

fn item(pos: i64, label: &str, level: i64, text: &str) -> DocumentItem {
    DocumentItem {
        document_id: "d".into(),
        position: pos,
        self_ref: format!("#/texts/{pos}"),
        label: label.into(),
        text: text.into(),
        page_numbers: vec![],
        picture_data: None,
        heading_level: level,
        tree_depth: 0,
    }
}

fn ranges(v: &Value) -> Vec<(String, Value, usize)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["title"].as_str().unwrap().to_string(),
                n["item_range"].clone(),
                n["children"].as_array().unwrap().len(),
            )
        })
        .collect()
}

/// Scenario 85: nesting, ranges in positions, no `position` key.
#[test]
fn scenario_85_toc_nesting() {
    let mut items = vec![];
    for (pos, level, title) in [
        (0, 1, "Intro"),
        (2, 2, "Background"),
        (4, 3, "Prior Work"),
        (6, 2, "Approach"),
        (8, 1, "Methods"),
    ] {
        items.push(item(pos, "section_header", level, title));
        items.push(item(pos + 1, "text", 0, "para"));
    }
    let tree = toc_tree(&items, &HashMap::new());
    assert_eq!(
        ranges(&tree),
        [
            ("Intro".into(), json!([0, 8]), 2),
            ("Methods".into(), json!([8, 10]), 0)
        ]
    );
    let intro = &tree[0]["children"];
    assert_eq!(
        ranges(intro),
        [
            ("Background".into(), json!([2, 6]), 1),
            ("Approach".into(), json!([6, 8]), 0)
        ]
    );
    assert_eq!(
        ranges(&intro[0]["children"]),
        [("Prior Work".into(), json!([4, 6]), 0)]
    );
    assert!(!tree.to_string().contains("\"position\""));
    assert_eq!(
        toc_tree(&[item(0, "text", 0, "x")], &HashMap::new()),
        json!([])
    );
}

/// Scenario 87: chunk ids per node are the ordered union over the range.
#[test]
fn scenario_87_toc_chunk_ids() {
    let items = vec![
        item(0, "section_header", 1, "Intro"),
        item(1, "text", 0, "a"),
        item(2, "text", 0, "b"),
        item(3, "section_header", 2, "Background"),
        item(4, "text", 0, "c"),
        item(5, "section_header", 1, "Methods"),
        item(6, "text", 0, "d"),
    ];
    let index: HashMap<String, Vec<String>> = [
        ("#/texts/1", vec!["cA"]),
        ("#/texts/2", vec!["cA", "cB"]),
        ("#/texts/3", vec!["cB"]),
        ("#/texts/4", vec!["cC"]),
        ("#/texts/5", vec!["cD"]),
        ("#/texts/6", vec!["cD"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    let tree = toc_tree(&items, &index);
    assert_eq!(tree[0]["item_range"], json!([0, 5]));
    assert_eq!(tree[0]["chunk_ids"], json!(["cA", "cB", "cC"]));
    assert_eq!(tree[0]["children"][0]["item_range"], json!([3, 5]));
    assert_eq!(tree[0]["children"][0]["chunk_ids"], json!(["cB", "cC"]));
    assert_eq!(tree[1]["item_range"], json!([5, 7]));
    assert_eq!(tree[1]["chunk_ids"], json!(["cD"]));
}

/// Scenario 83: items.jsonl rows and keys.
#[test]
fn scenario_83_items_rows() {
    let items = vec![
        item(0, "section_header", 1, "H1"),
        item(1, "text", 0, "para é"),
        item(2, "section_header", 2, "H2"),
    ];
    let text = render_items(&items, &HashMap::new());
    assert!(!text.ends_with('\n') && text.contains("para é"));
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3);
    let levels: Vec<i64> = rows
        .iter()
        .map(|r| r["heading_level"].as_i64().unwrap())
        .collect();
    assert_eq!(levels, [1, 0, 2]);
    for r in &rows {
        let keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "self_ref",
                "label",
                "text",
                "page_numbers",
                "heading_level",
                "chunk_ids"
            ]
        );
    }
}

#[test]
fn result_dicts_have_picture_refs_and_no_image_data() {
    let r: SearchResult = serde_json::from_value(json!({
        "content": "c", "score": 1.0, "chunk_id": "c1",
        "doc_item_refs": ["#/texts/0", "#/pictures/0", "#/pictures/1"],
        "image_data": {"#/pictures/0": "AAAA"}
    }))
    .unwrap();
    let d = result_dict(&r);
    assert_eq!(d["picture_refs"], json!(["#/pictures/0", "#/pictures/1"]));
    assert!(d.get("image_data").is_none());
    assert_eq!(seconds_text(60.0), "60");
    assert_eq!(seconds_text(2.5), "2.5");
}
