//! The host side of what sandboxed code can reach (SPEC §9.3, §9.4): the two host
//! functions and the read-only document filesystem, answered from the store.
//!
//! ```text
//! /documents/<document_id>/
//!   metadata.json   {"id","title","uri","created_at"}
//!   content.txt     the document's full text (read from the store on every access)
//!   items.jsonl     {"self_ref","label","text","page_numbers","heading_level","chunk_ids"} per line
//!   toc.json        {"doc_id","title","tree":[node...]}   (absent if HAIKU_RAG_DISABLE_TOC is set)
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value, json};

use super::ReplyError;
use super::worker::{LIST_DOCUMENTS_FUNCTION, SEARCH_FUNCTION};
use crate::store::docling::PICTURE_REF_PREFIX;
use crate::store::{DocumentItem, DocumentMeta, SearchResult, Store};

/// Results per in-code `search()` when the code gives no limit.
pub const DEFAULT_CODE_SEARCH_LIMIT: usize = 10;

/// The files of one document directory, in listing order.
pub const DOCUMENT_FILES: &[&str] = &["metadata.json", "content.txt", "items.jsonl", "toc.json"];

/// Items and the `self_ref -> chunk ids` index of one document, fetched once.
#[derive(Debug, Clone)]
struct Structure {
    items: Vec<DocumentItem>,
    chunk_index: HashMap<String, Vec<String>>,
}

/// The corpus as sandboxed code sees it, for one sandbox (one run).
pub struct Corpus {
    store: Arc<Store>,
    filter: Option<String>,
    toc: bool,
    listing: Option<Vec<DocumentMeta>>,
    structures: HashMap<String, Arc<Structure>>,
    rendered: HashMap<String, String>,
    read_deadline: Option<(Instant, String)>,
    /// In-code search results since the last [`Corpus::take_results`].
    results: Vec<SearchResult>,
    /// How many times items and chunk indexes were fetched from the store.
    pub structure_fetches: usize,
}

impl std::fmt::Debug for Corpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Corpus")
            .field("store", &self.store.uri())
            .field("filter", &self.filter)
            .finish_non_exhaustive()
    }
}

fn err(kind: &str, message: impl Into<String>) -> ReplyError {
    ReplyError {
        kind: kind.into(),
        message: message.into(),
    }
}

fn not_found(path: &str) -> ReplyError {
    err(
        "FileNotFoundError",
        format!("[Errno 2] No such file or directory: '{path}'"),
    )
}

fn store_error(e: impl std::fmt::Display) -> ReplyError {
    err("RuntimeError", format!("knowledge base error: {e}"))
}

/// `60` for 60.0, `2.5` for 2.5 (how the read deadline message names the budget).
pub fn seconds_text(secs: f64) -> String {
    if secs.fract() == 0.0 {
        format!("{}", secs as i64)
    } else {
        format!("{secs}")
    }
}

enum Node {
    Root,
    Documents,
    DocumentDir(String),
    File(String, String),
}

impl Corpus {
    /// Over `store`, with the document filter current when the sandbox is created.
    pub fn new(store: Arc<Store>, filter: Option<String>) -> Self {
        Corpus {
            store,
            filter: filter.filter(|f| !f.trim().is_empty()),
            toc: std::env::var_os("HAIKU_RAG_DISABLE_TOC").is_none(),
            listing: None,
            structures: HashMap::new(),
            rendered: HashMap::new(),
            read_deadline: None,
            results: Vec::new(),
            structure_fetches: 0,
        }
    }

    /// Starts an execution whose document reads must happen within `code_timeout`.
    pub fn begin_execution(&mut self, code_timeout_secs: f64) {
        let deadline = Instant::now() + std::time::Duration::from_secs_f64(code_timeout_secs);
        self.read_deadline = Some((deadline, seconds_text(code_timeout_secs)));
    }

    /// The in-code search results gathered since the last call.
    pub fn take_results(&mut self) -> Vec<SearchResult> {
        std::mem::take(&mut self.results)
    }

    /// A host function call from code.
    pub async fn call(
        &mut self,
        function: &str,
        args: &[Value],
        kwargs: &Map<String, Value>,
    ) -> Result<Value, ReplyError> {
        match function {
            SEARCH_FUNCTION => {
                let query = kwargs
                    .get("query")
                    .or(args.first())
                    .and_then(Value::as_str)
                    .ok_or_else(|| err("TypeError", "search() needs a string query"))?
                    .to_string();
                let limit = match kwargs.get("limit").or(args.get(1)) {
                    None | Some(Value::Null) => DEFAULT_CODE_SEARCH_LIMIT,
                    Some(v) => v
                        .as_u64()
                        .ok_or_else(|| err("TypeError", "search() limit must be an integer"))?
                        as usize,
                };
                self.search(&query, limit).await
            }
            LIST_DOCUMENTS_FUNCTION => {
                let docs = self.listing().await?;
                Ok(Value::Array(docs.iter().map(document_dict).collect()))
            }
            other => Err(err("NameError", format!("name '{other}' is not defined"))),
        }
    }

    async fn search(&mut self, query: &str, limit: usize) -> Result<Value, ReplyError> {
        let found = self
            .store
            .search(query, Some(limit), self.filter.as_deref())
            .await
            .map_err(store_error)?;
        let found = self.store.expand(found).await.map_err(store_error)?;
        let dicts = found.iter().map(result_dict).collect();
        self.results.extend(found);
        Ok(Value::Array(dicts))
    }

    async fn listing(&mut self) -> Result<&[DocumentMeta], ReplyError> {
        if self.listing.is_none() {
            let docs = self
                .store
                .list_documents(self.filter.as_deref())
                .await
                .map_err(store_error)?;
            self.listing = Some(docs);
        }
        Ok(self.listing.as_deref().unwrap_or_default())
    }

    async fn resolve(&mut self, path: &str) -> Result<Option<Node>, ReplyError> {
        let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let toc = self.toc;
        let known = |id: &str, docs: &[DocumentMeta]| docs.iter().any(|d| d.id == id);
        Ok(match parts.as_slice() {
            [] => Some(Node::Root),
            ["documents"] => Some(Node::Documents),
            ["documents", id] => {
                let docs = self.listing().await?;
                known(id, docs).then(|| Node::DocumentDir(id.to_string()))
            }
            ["documents", id, file] => {
                let docs = self.listing().await?;
                let listed = DOCUMENT_FILES.contains(file) && (toc || *file != "toc.json");
                (listed && known(id, docs)).then(|| Node::File(id.to_string(), file.to_string()))
            }
            _ => None,
        })
    }

    /// A filesystem operation from code (`op` is Monty's name, e.g. `Path.read_text`).
    pub async fn os(&mut self, op: &str, path: &str) -> Result<Value, ReplyError> {
        let node = self.resolve(path).await?;
        match op {
            "Path.exists" => Ok(Value::Bool(node.is_some())),
            "Path.is_file" => Ok(Value::Bool(matches!(node, Some(Node::File(..))))),
            "Path.is_dir" => Ok(Value::Bool(matches!(
                node,
                Some(Node::Root | Node::Documents | Node::DocumentDir(_))
            ))),
            "Path.iterdir" => match node {
                None => Err(not_found(path)),
                Some(Node::Root) => Ok(json!(["/documents"])),
                Some(Node::Documents) => {
                    let docs = self.listing().await?;
                    Ok(Value::Array(
                        docs.iter()
                            .map(|d| Value::String(format!("/documents/{}", d.id)))
                            .collect(),
                    ))
                }
                Some(Node::DocumentDir(id)) => Ok(Value::Array(
                    DOCUMENT_FILES
                        .iter()
                        .filter(|f| self.toc || **f != "toc.json")
                        .map(|f| Value::String(format!("/documents/{id}/{f}")))
                        .collect(),
                )),
                Some(Node::File(..)) => Err(err(
                    "NotADirectoryError",
                    format!("[Errno 20] Not a directory: '{path}'"),
                )),
            },
            "Path.stat" => match node {
                None => Err(not_found(path)),
                Some(Node::File(id, file)) => {
                    let text = self.read(&id, &file).await?;
                    Ok(json!({"is_dir": false, "size": text.len()}))
                }
                Some(_) => Ok(json!({"is_dir": true})),
            },
            "open" | "Path.read_text" | "Path.read_bytes" => {
                self.check_read_deadline()?;
                match node {
                    None => Err(not_found(path)),
                    Some(Node::File(id, file)) => {
                        if op == "open" {
                            Ok(Value::Null)
                        } else {
                            Ok(Value::String(self.read(&id, &file).await?))
                        }
                    }
                    Some(_) => Err(err(
                        "IsADirectoryError",
                        format!("[Errno 21] Is a directory: '{path}'"),
                    )),
                }
            }
            other => Err(err(
                "OSError",
                format!("{other} is not supported on document files"),
            )),
        }
    }

    fn check_read_deadline(&self) -> Result<(), ReplyError> {
        if let Some((deadline, secs)) = &self.read_deadline
            && Instant::now() > *deadline
        {
            return Err(err(
                "TimeoutError",
                format!("time limit exceeded: no further document reads after {secs}s"),
            ));
        }
        Ok(())
    }

    async fn read(&mut self, id: &str, file: &str) -> Result<String, ReplyError> {
        match file {
            "metadata.json" => {
                let docs = self.listing().await?;
                let doc = docs
                    .iter()
                    .find(|d| d.id == id)
                    .ok_or_else(|| not_found(id))?;
                Ok(document_dict(doc).to_string())
            }
            "content.txt" => Ok(self
                .store
                .document_content(id)
                .await
                .map_err(store_error)?
                .unwrap_or_default()),
            "items.jsonl" | "toc.json" => {
                let key = format!("{id}/{file}");
                if let Some(text) = self.rendered.get(&key) {
                    return Ok(text.clone());
                }
                let structure = self.structure(id).await?;
                let text = if file == "items.jsonl" {
                    render_items(&structure.items, &structure.chunk_index)
                } else {
                    let title = self
                        .listing()
                        .await?
                        .iter()
                        .find(|d| d.id == id)
                        .and_then(|d| d.title.clone());
                    json!({
                        "doc_id": id,
                        "title": title,
                        "tree": toc_tree(&structure.items, &structure.chunk_index),
                    })
                    .to_string()
                };
                self.rendered.insert(key, text.clone());
                Ok(text)
            }
            _ => Err(not_found(file)),
        }
    }

    async fn structure(&mut self, id: &str) -> Result<Arc<Structure>, ReplyError> {
        if let Some(s) = self.structures.get(id) {
            return Ok(s.clone());
        }
        self.structure_fetches += 1;
        let mut items = self.store.items_of(id, None).await.map_err(store_error)?;
        items.sort_by_key(|i| i.position);
        let chunks = self.store.chunks_of(id).await.map_err(store_error)?;
        let mut chunk_index: HashMap<String, Vec<String>> = HashMap::new();
        for c in &chunks {
            let refs = c
                .metadata
                .get("doc_item_refs")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for r in refs.iter().filter_map(Value::as_str) {
                let ids = chunk_index.entry(r.to_string()).or_default();
                if !ids.contains(&c.id) {
                    ids.push(c.id.clone());
                }
            }
        }
        let s = Arc::new(Structure { items, chunk_index });
        self.structures.insert(id.to_string(), s.clone());
        Ok(s)
    }
}

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
        .filter(|i| i.label == "section_header" && i.heading_level > 0)
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

#[cfg(test)]
mod tests {
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
}
