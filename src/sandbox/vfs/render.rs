//! The JSON the sandbox hands to code: document and search-result dicts, `items.jsonl`
//! and the `toc.json` tree, rendered from store rows.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::store::docling::{PICTURE_REF_PREFIX, label};
use crate::store::{DocumentItem, DocumentMeta, SearchResult};

/// `{id, title, uri, created_at}` (list_documents rows and metadata.json).
pub fn document_dict(d: &DocumentMeta) -> Value {
    json!({"id": d.id, "title": d.title, "uri": d.uri, "created_at": d.created_at})
}

/// The dict an in-code `search()` returns per result (no image data).
pub fn result_dict(r: &SearchResult) -> Value {
    let pictures: Vec<&String> = r
        .doc_item_refs
        .iter()
        .filter(|x| x.starts_with(PICTURE_REF_PREFIX))
        .collect();
    json!({
        "chunk_id": r.chunk_id,
        "content": r.content,
        "document_id": r.document_id,
        "document_title": r.document_title,
        "document_uri": r.document_uri,
        "score": r.score,
        "page_numbers": r.page_numbers,
        "headings": r.headings,
        "doc_item_refs": r.doc_item_refs,
        "labels": r.labels,
        "picture_refs": pictures,
    })
}

/// items.jsonl: one object per item in position order, joined by `"\n"`.
pub fn render_items(items: &[DocumentItem], chunk_index: &HashMap<String, Vec<String>>) -> String {
    items
        .iter()
        .map(|i| {
            json!({
                "self_ref": i.self_ref,
                "label": i.label,
                "text": i.text,
                "page_numbers": i.page_numbers,
                "heading_level": i.heading_level,
                "chunk_ids": chunk_index.get(&i.self_ref).cloned().unwrap_or_default(),
            })
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The toc.json tree (SPEC §9.4) over items sorted by position.
pub fn toc_tree(items: &[DocumentItem], chunk_index: &HashMap<String, Vec<String>>) -> Value {
    let headers: Vec<&DocumentItem> = items
        .iter()
        .filter(|i| i.label == label::SECTION_HEADER && i.heading_level > 0)
        .collect();
    if headers.is_empty() {
        return json!([]);
    }
    let total = items.iter().map(|i| i.position).max().unwrap_or(0) + 1;
    struct Flat {
        node: Map<String, Value>,
        level: i64,
        children: Vec<usize>,
    }
    let mut flat: Vec<Flat> = Vec::with_capacity(headers.len());
    for (k, h) in headers.iter().enumerate() {
        let end = headers[k + 1..]
            .iter()
            .find(|n| n.heading_level <= h.heading_level)
            .map(|n| n.position)
            .unwrap_or(total);
        let mut chunk_ids: Vec<String> = Vec::new();
        for i in items
            .iter()
            .filter(|i| i.position >= h.position && i.position < end)
        {
            for c in chunk_index.get(&i.self_ref).into_iter().flatten() {
                if !chunk_ids.contains(c) {
                    chunk_ids.push(c.clone());
                }
            }
        }
        let mut node = Map::new();
        node.insert("self_ref".into(), json!(h.self_ref));
        node.insert("level".into(), json!(h.heading_level));
        node.insert("title".into(), json!(h.text));
        node.insert("page_numbers".into(), json!(h.page_numbers));
        node.insert("item_range".into(), json!([h.position, end]));
        node.insert("chunk_ids".into(), json!(chunk_ids));
        flat.push(Flat {
            node,
            level: h.heading_level,
            children: Vec::new(),
        });
    }
    let mut roots: Vec<usize> = Vec::new();
    let mut stack: Vec<usize> = Vec::new();
    for k in 0..flat.len() {
        while let Some(&top) = stack.last() {
            if flat[top].level >= flat[k].level {
                stack.pop();
            } else {
                break;
            }
        }
        match stack.last() {
            Some(&parent) => flat[parent].children.push(k),
            None => roots.push(k),
        }
        stack.push(k);
    }
    fn build(k: usize, flat: &[Flat]) -> Value {
        let mut node = flat[k].node.clone();
        node.insert(
            "children".into(),
            Value::Array(flat[k].children.iter().map(|c| build(*c, flat)).collect()),
        );
        Value::Object(node)
    }
    Value::Array(roots.iter().map(|r| build(*r, &flat)).collect())
}
