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
use crate::store::{DocumentItem, DocumentMeta, SearchResult, Store};

mod render;
pub use render::{document_dict, render_items, result_dict, toc_tree};

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

#[cfg(test)]
mod tests;
