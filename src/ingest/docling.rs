//! A minimal, valid `DoclingDocument` JSON for a [`ParsedDocument`], so that
//! haiku.rag (docling-core ≥ 2.82) can load what we store in
//! `documents.docling_document`.
//!
//! What it contains — only what we know:
//! * `body` and node tree rebuilt from the items' `tree_depth` (list groups
//!   `#/groups/N` with label `list`; invisible `section` groups where HTML
//!   skipped heading levels; captions as children + `captions` of their
//!   picture/table);
//! * `texts` (`orig` = `text`; `level` for section headers; `marker` /
//!   `enumerated` for list items; `code_language: "unknown"` for code),
//!   `tables` (cells from the Markdown table, first row = column header),
//!   `pictures` (with `image` as a data URI when the bytes decode as an
//!   image; the store strips these URIs as haiku does);
//! * `prov` only for PDF items: the item's box on its page (TOPLEFT points), or the
//!   whole page when the parser had none
//!   (we do not keep block coordinates) and `charspan` `[0, len(text)]`;
//!   `pages` with each page's size (no page image: those go to
//!   `documents.docling_pages`);
//! * `origin`: mimetype from the name's extension, filename, and a
//!   `binary_hash` derived from the SHA-256 of the extracted `content` (the
//!   source bytes are not available here).

use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::store::docling::label;

use super::{ParsedDocument, caption_owner, image_mime, table_rows};

/// docling-core schema version we claim; its home is the store.
pub use crate::store::docling::DOCLING_SCHEMA_VERSION;

fn r(s: &str) -> Value {
    json!({ "$ref": s })
}

pub fn docling_json(doc: &ParsedDocument, name: &str) -> Value {
    let stem = std::path::Path::new(name)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| name.to_string());
    let ext = std::path::Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let mimetype = match ext.as_str() {
        "md" | "markdown" => "text/markdown",
        "html" | "htm" => "text/html",
        "pdf" => "application/pdf",
        _ => "text/plain",
    };
    let digest = Sha256::digest(doc.content.as_bytes());
    let mut h = [0u8; 8];
    h.copy_from_slice(&digest[..8]);
    let binary_hash = u64::from_be_bytes(h);

    let page_size = |p: i64| {
        doc.pages
            .iter()
            .find(|pg| pg.page_no == p)
            .map(|pg| (pg.width as f64, pg.height as f64))
            .unwrap_or((0.0, 0.0))
    };

    // node tree
    struct Node {
        self_ref: String,
        parent: String,
        children: Vec<String>,
    }
    let mut groups: Vec<(Node, &'static str, String)> = Vec::new(); // node, label, name
    let mut item_nodes: Vec<Node> = Vec::new();
    let mut body_children: Vec<String> = Vec::new();
    // stack entries: (depth, ref, list_group for list groups)
    #[derive(Clone)]
    enum Kind {
        Body,
        Group(usize, Option<usize>),
        Item(usize),
    }
    let mut stack: Vec<(i64, Kind)> = vec![(0, Kind::Body)];

    fn add_child(
        kind: &Kind,
        child: String,
        body: &mut Vec<String>,
        groups: &mut [(Node, &'static str, String)],
        items: &mut [Node],
    ) -> String {
        match kind {
            Kind::Body => {
                body.push(child);
                "#/body".to_string()
            }
            Kind::Group(g, _) => {
                groups[*g].0.children.push(child);
                groups[*g].0.self_ref.clone()
            }
            Kind::Item(i) => {
                items[*i].children.push(child);
                items[*i].self_ref.clone()
            }
        }
    }

    for (idx, it) in doc.items.iter().enumerate() {
        let d = it.tree_depth.max(1);
        while stack.last().is_some_and(|(sd, _)| *sd >= d) {
            stack.pop();
        }
        // a list item needs its own list group directly above it
        if it.label == label::LIST_ITEM {
            let need_new = !matches!(stack.last(), Some((sd, Kind::Group(_, Some(g)))) if *sd == d - 1 && Some(*g) == it.list_group);
            if need_new {
                while stack.last().is_some_and(|(sd, _)| *sd >= d - 1) && stack.len() > 1 {
                    stack.pop();
                }
            }
        }
        while let Some((sd, top)) = stack.last().cloned() {
            if sd >= d - 1 {
                break;
            }
            let gi = groups.len();
            let gref = format!("#/groups/{gi}");
            let is_list = it.label == label::LIST_ITEM && sd + 1 == d - 1;
            let parent = add_child(
                &top,
                gref.clone(),
                &mut body_children,
                &mut groups,
                &mut item_nodes,
            );
            groups.push((
                Node {
                    self_ref: gref,
                    parent,
                    children: Vec::new(),
                },
                if is_list {
                    label::GROUP_LIST
                } else {
                    label::GROUP_SECTION
                },
                if is_list {
                    "list".to_string()
                } else {
                    format!("header-{}", sd + 1)
                },
            ));
            stack.push((
                sd + 1,
                Kind::Group(gi, if is_list { it.list_group } else { None }),
            ));
        }
        let top = stack.last().map(|(_, k)| k.clone()).unwrap_or(Kind::Body);
        let parent = add_child(
            &top,
            it.self_ref.clone(),
            &mut body_children,
            &mut groups,
            &mut item_nodes,
        );
        item_nodes.push(Node {
            self_ref: it.self_ref.clone(),
            parent,
            children: Vec::new(),
        });
        stack.push((d, Kind::Item(idx)));
    }

    let mut texts = Vec::new();
    let mut tables = Vec::new();
    let mut pictures = Vec::new();
    for (idx, it) in doc.items.iter().enumerate() {
        let node = &item_nodes[idx];
        let chars = it.text.chars().count();
        let prov: Vec<Value> = if it.boxes.is_empty() {
            it.page_numbers
                .iter()
                .map(|&p| {
                    let (w, h) = page_size(p);
                    json!({
                        "page_no": p,
                        "bbox": {"l": 0.0, "t": 0.0, "r": w, "b": h, "coord_origin": "TOPLEFT"},
                        "charspan": [0, chars]
                    })
                })
                .collect()
        } else {
            it.boxes
                .iter()
                .map(|bx| {
                    let round = |v: f64| (v * 100.0).round() / 100.0;
                    json!({
                        "page_no": bx.page_no,
                        "bbox": {"l": round(bx.l), "t": round(bx.t), "r": round(bx.r), "b": round(bx.b), "coord_origin": "TOPLEFT"},
                        "charspan": [0, chars]
                    })
                })
                .collect()
        };
        let children: Vec<Value> = node.children.iter().map(|c| r(c)).collect();
        let mut o = json!({
            "self_ref": it.self_ref,
            "parent": r(&node.parent),
            "children": children,
            "content_layer": "body",
            "label": it.label,
            "prov": prov,
        });
        let m = o.as_object_mut().expect("object");
        let captions: Vec<Value> = node
            .children
            .iter()
            .filter_map(|c| doc.items.iter().position(|x| &x.self_ref == c))
            .filter(|&ci| caption_owner(&doc.items, ci) == Some(idx))
            .map(|ci| r(&doc.items[ci].self_ref))
            .collect();
        match it.label.as_str() {
            label::TABLE | label::DOCUMENT_INDEX => {
                let rows = table_rows(&it.text);
                let ncols = rows.iter().map(Vec::len).max().unwrap_or(0);
                let mut cells = Vec::new();
                for (ri, row) in rows.iter().enumerate() {
                    for (ci, text) in row.iter().enumerate() {
                        cells.push(json!({
                            "row_span": 1, "col_span": 1,
                            "start_row_offset_idx": ri, "end_row_offset_idx": ri + 1,
                            "start_col_offset_idx": ci, "end_col_offset_idx": ci + 1,
                            "text": text,
                            "column_header": ri == 0, "row_header": false, "row_section": false,
                        }));
                    }
                }
                m.insert("captions".into(), Value::Array(captions));
                m.insert("references".into(), json!([]));
                m.insert("footnotes".into(), json!([]));
                m.insert(
                    "data".into(),
                    json!({"table_cells": cells, "num_rows": rows.len(), "num_cols": ncols}),
                );
                tables.push(o);
            }
            label::PICTURE => {
                m.insert("captions".into(), Value::Array(captions));
                m.insert("references".into(), json!([]));
                m.insert("footnotes".into(), json!([]));
                if let Some(data) = it.picture_data.as_deref()
                    && let Ok(img) = image::load_from_memory(data)
                {
                    let uri = format!(
                        "data:{};base64,{}",
                        image_mime(data),
                        base64::engine::general_purpose::STANDARD.encode(data)
                    );
                    m.insert(
                            "image".into(),
                            json!({"mimetype": image_mime(data), "dpi": 72,
                                   "size": {"width": img.width() as f64, "height": img.height() as f64},
                                   "uri": uri}),
                        );
                }
                pictures.push(o);
            }
            _ => {
                m.insert("orig".into(), json!(it.text));
                m.insert("text".into(), json!(it.text));
                match it.label.as_str() {
                    label::SECTION_HEADER => {
                        m.insert("level".into(), json!(it.heading_level.clamp(1, 100)));
                    }
                    label::LIST_ITEM => {
                        m.insert("enumerated".into(), json!(!it.marker.is_empty()));
                        m.insert("marker".into(), json!(it.marker));
                    }
                    label::CODE => {
                        m.insert("captions".into(), json!([]));
                        m.insert("references".into(), json!([]));
                        m.insert("footnotes".into(), json!([]));
                        m.insert("code_language".into(), json!("unknown"));
                    }
                    _ => {}
                }
                texts.push(o);
            }
        }
    }

    let groups_json: Vec<Value> = groups
        .iter()
        .map(|(n, label, gname)| {
            json!({
                "self_ref": n.self_ref,
                "parent": r(&n.parent),
                "children": n.children.iter().map(|c| r(c)).collect::<Vec<_>>(),
                "content_layer": "body",
                "name": gname,
                "label": label,
            })
        })
        .collect();
    let mut pages = serde_json::Map::new();
    for p in &doc.pages {
        pages.insert(
            p.page_no.to_string(),
            json!({"size": {"width": p.width as f64, "height": p.height as f64}, "page_no": p.page_no}),
        );
    }
    json!({
        "schema_name": "DoclingDocument",
        "version": DOCLING_SCHEMA_VERSION,
        "name": stem,
        "origin": {"mimetype": mimetype, "binary_hash": binary_hash, "filename": name},
        "furniture": {"self_ref": "#/furniture", "children": [], "content_layer": "furniture", "name": "_root_", "label": label::GROUP_UNSPECIFIED},
        "body": {"self_ref": "#/body", "children": body_children.iter().map(|c| r(c)).collect::<Vec<_>>(), "content_layer": "body", "name": "_root_", "label": label::GROUP_UNSPECIFIED},
        "groups": groups_json,
        "texts": texts,
        "pictures": pictures,
        "tables": tables,
        "key_value_items": [],
        "form_items": [],
        "pages": pages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::{parse_file, tests::fixture};

    /// Walk the body like docling's `iterate_items()` (groups not yielded):
    /// (self_ref, level).
    fn iterate(v: &Value) -> Vec<(String, i64)> {
        fn resolve<'a>(v: &'a Value, r: &str) -> &'a Value {
            let mut parts = r.trim_start_matches("#/").split('/');
            let coll = parts.next().unwrap();
            match parts.next() {
                Some(i) => &v[coll][i.parse::<usize>().unwrap()],
                None => &v[coll],
            }
        }
        fn rec(v: &Value, node: &Value, level: i64, out: &mut Vec<(String, i64)>) {
            let sr = node["self_ref"].as_str().unwrap();
            if !sr.starts_with("#/groups") && sr != "#/body" {
                out.push((sr.to_string(), level));
            }
            for c in node["children"].as_array().unwrap() {
                let child = resolve(v, c["$ref"].as_str().unwrap());
                assert_eq!(
                    child["parent"]["$ref"], node["self_ref"],
                    "parent link of {}",
                    child["self_ref"]
                );
                rec(v, child, level + 1, out);
            }
        }
        let mut out = Vec::new();
        rec(v, &v["body"], 0, &mut out);
        out
    }

    fn check_tree_matches_items(file: &str) -> Value {
        let doc = parse_file(&fixture(file)).unwrap();
        let v = docling_json(&doc, file);
        let want: Vec<(String, i64)> = doc
            .items
            .iter()
            .map(|i| (i.self_ref.clone(), i.tree_depth))
            .collect();
        assert_eq!(iterate(&v), want, "{file}");
        v
    }

    #[test]
    fn markdown_docling_tree() {
        let v = check_tree_matches_items("sample.md");
        assert_eq!(v["schema_name"], "DoclingDocument");
        assert_eq!(v["name"], "sample");
        assert_eq!(v["texts"][0]["label"], "title");
        assert_eq!(v["texts"][2]["level"], 1);
        assert_eq!(v["texts"][4]["level"], 2);
        assert_eq!(v["groups"][0]["label"], "list");
        assert_eq!(
            v["pictures"][0]["captions"],
            json!([{"$ref": "#/texts/11"}])
        );
        assert!(
            v["pictures"][0]["image"]["uri"]
                .as_str()
                .unwrap()
                .starts_with("data:image/png;base64,")
        );
        assert!(v["pictures"][1].get("image").is_none());
        assert_eq!(v["tables"][0]["data"]["num_rows"], 3);
        assert_eq!(v["tables"][0]["data"]["num_cols"], 3);
        assert_eq!(v["texts"][13]["marker"], "2.");
        assert_eq!(v["texts"][13]["enumerated"], true);
    }

    #[test]
    fn html_docling_tree() {
        let v = check_tree_matches_items("sample.html");
        assert_eq!(v["origin"]["mimetype"], "text/html");
    }

    #[test]
    fn skipped_levels_get_section_groups() {
        let doc = crate::ingest::html::parse_html("<h3>Deep</h3><p>x</p>", None);
        let v = docling_json(&doc, "x.html");
        assert_eq!(v["groups"][0]["label"], "section");
        assert_eq!(v["groups"][1]["label"], "section");
        assert_eq!(v["texts"][0]["parent"]["$ref"], "#/groups/1");
        assert_eq!(v["texts"][1]["parent"]["$ref"], "#/texts/0");
    }
}

/// Cross-check helper: `GW_DUMP_DIR=/tmp/x cargo test -- --ignored dump_fixtures`
/// writes `<fixture>.json` = {docling, items, chunks} for comparison with
/// docling-core's own `HierarchicalChunker` / `iterate_items()` in Python.
#[cfg(test)]
mod dump {
    use super::*;
    use crate::ingest::{ChunkOptions, chunk, parse_file, tests::fixture};

    #[test]
    #[ignore]
    fn dump_fixtures() {
        let dir = std::env::var("GW_DUMP_DIR").expect("GW_DUMP_DIR");
        for f in ["sample.md", "sample.html", "sample.pdf"] {
            let doc = parse_file(&fixture(f)).unwrap();
            let items: Vec<Value> = doc
                .items
                .iter()
                .map(|i| json!({"self_ref": i.self_ref, "label": i.label, "text": i.text, "page_numbers": i.page_numbers, "heading_level": i.heading_level, "tree_depth": i.tree_depth}))
                .collect();
            let chunks: Vec<Value> = chunk(
                &doc,
                &ChunkOptions {
                    picture_chunks: false,
                    ..Default::default()
                },
            )
            .into_iter()
            .map(|c| json!({"content": c.content, "metadata": c.metadata}))
            .collect();
            let out = json!({"docling": docling_json(&doc, f), "items": items, "chunks": chunks, "content": doc.content});
            std::fs::write(
                format!("{dir}/{f}.json"),
                serde_json::to_string_pretty(&out).unwrap(),
            )
            .unwrap();
        }
    }
}
