//! Hybrid search (SPEC §5.2): vector nearest neighbours and BM25 over `content_fts`, fused
//! by Reciprocal Rank Fusion (k = 60), pre-filtered to the documents a SQL filter selects;
//! then picture-chunk dedup, picture bytes, and (optionally) context expansion (§5.3).
//!
//! Like haiku.rag, the vector leg uses LanceDB's default metric (L2; embeddings are unit
//! length, so the order is the cosine order) and each leg fetches `limit` rows before RRF.

use std::collections::{BTreeSet, HashMap};

use base64::Engine;
use lancedb::index::scalar::FullTextSearchQuery;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use serde_json::{Map, Value};

use crate::store::docling::label;

use super::arrow_util::{floats, sql_in};
use super::{
    DocumentItem, DocumentMeta, Result, SearchResult, Store, StoreError, chunks_from_batch,
    collect, expand,
};

/// RRF's k, as haiku.rag (LanceDB's `RRFReranker` default).
pub const RRF_K: f64 = 60.0;

/// Rows of a result set with a score derived from `column`.
fn scored(
    batches: &[arrow_array::RecordBatch],
    column: &str,
    f: impl Fn(f64) -> f64,
) -> Vec<(super::Chunk, f64)> {
    let mut out = Vec::new();
    for b in batches {
        for (chunk, s) in chunks_from_batch(b).into_iter().zip(floats(b, column)) {
            out.push((chunk, s.map(&f).unwrap_or(0.0)));
        }
    }
    out
}

/// Reciprocal Rank Fusion exactly as haiku.rag gets it from LanceDB's Python
/// `RRFReranker`: each list contributes `1 / (rank + k)` with 1-based ranks; rows are
/// collected vector list first, then full-text rows not seen yet; the scores are float32 and
/// the sort is stable and descending. (The Rust `RRFReranker` counts ranks from 0, which
/// shifts every score; fusing here keeps scores identical to haiku.rag's.)
pub fn rrf(
    vector: &[(super::Chunk, f64)],
    fts: &[(super::Chunk, f64)],
) -> Vec<(super::Chunk, f64)> {
    let mut order: Vec<super::Chunk> = Vec::new();
    let mut score: std::collections::HashMap<String, f64> = std::collections::HashMap::new();
    for list in [vector, fts] {
        for (rank, (chunk, _)) in list.iter().enumerate() {
            let s = score.entry(chunk.id.clone()).or_insert_with(|| {
                order.push(chunk.clone());
                0.0
            });
            *s += 1.0 / (rank as f64 + 1.0 + RRF_K);
        }
    }
    let mut fused: Vec<(super::Chunk, f64)> = order
        .into_iter()
        .map(|c| {
            let s = score[&c.id] as f32 as f64;
            (c, s)
        })
        .collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1));
    fused
}

/// Where a search found its chunk (for the per-result diagnostics of `groundwork search`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchMode {
    Hybrid,
    Vector,
    FullText,
}

impl Store {
    /// Hybrid search without context expansion. An empty query, or a filter that matches no
    /// document, gives no results.
    pub async fn search(
        &self,
        query: &str,
        limit: Option<usize>,
        filter: Option<&str>,
    ) -> Result<Vec<SearchResult>> {
        self.search_with_mode(query, limit, filter, SearchMode::Hybrid)
            .await
    }

    /// Hybrid search followed by context expansion: what `rag_search` shows the model.
    pub async fn search_expanded(
        &self,
        query: &str,
        limit: Option<usize>,
        filter: Option<&str>,
    ) -> Result<Vec<SearchResult>> {
        let results = self.search(query, limit, filter).await?;
        self.expand(results).await
    }

    pub async fn search_with_mode(
        &self,
        query: &str,
        limit: Option<usize>,
        filter: Option<&str>,
        mode: SearchMode,
    ) -> Result<Vec<SearchResult>> {
        self.search_inner(query, limit, filter, mode, &mut None)
            .await
    }

    /// [`Store::search_with_mode`] with what the reranker did (`None`: no reranker).
    pub async fn search_reported(
        &self,
        query: &str,
        limit: Option<usize>,
        filter: Option<&str>,
        mode: SearchMode,
    ) -> Result<(Vec<SearchResult>, Option<super::rerank::RerankReport>)> {
        let mut report = None;
        let results = self
            .search_inner(query, limit, filter, mode, &mut report)
            .await?;
        Ok((results, report))
    }

    async fn search_inner(
        &self,
        query: &str,
        limit: Option<usize>,
        filter: Option<&str>,
        mode: SearchMode,
        report: &mut Option<super::rerank::RerankReport>,
    ) -> Result<Vec<SearchResult>> {
        let query = query.trim();
        if query.is_empty() {
            return Ok(Vec::new());
        }
        let wanted = limit.unwrap_or(self.search_config().limit).max(1);
        // With a reranker, each leg and the fusion keep `wanted * 10` candidates.
        let limit = self.candidate_count(wanted);
        let prefilter = match filter.map(str::trim).filter(|f| !f.is_empty()) {
            Some(f) => {
                let ids: Vec<String> = self
                    .list_documents(Some(f))
                    .await?
                    .into_iter()
                    .map(|d| d.id)
                    .collect();
                if ids.is_empty() {
                    return Ok(Vec::new());
                }
                Some(sql_in("document_id", &ids))
            }
            None => None,
        };
        let table = self.chunks_table();
        let columns = [
            "id",
            "document_id",
            "content",
            "content_fts",
            "metadata",
            "order",
        ];
        let fts = || {
            FullTextSearchQuery::new(query.to_string())
                .with_column("content_fts".to_string())
                .map_err(|e| StoreError::Other(format!("full-text query: {e}")))
        };
        let fts_leg = || async {
            let mut q = table
                .query()
                .full_text_search(fts()?)
                .select(Select::columns(&columns))
                .limit(limit);
            if let Some(p) = &prefilter {
                q = q.only_if(p);
            }
            let batches = collect(q.execute().await?).await?;
            crate::timing::mark("search: full-text leg");
            Ok::<_, StoreError>(scored(&batches, "_score", |s| s))
        };
        let vector_leg = || async {
            let embedder = self.embedder()?.clone();
            let vector = embedder
                .embed(&[query.to_string()])
                .await?
                .pop()
                .unwrap_or_default();
            crate::timing::mark("search: query embedded");
            let mut q = table
                .query()
                .nearest_to(vector.as_slice())?
                .column("vector")
                .refine_factor(self.search_config().vector_refine_factor)
                .select(Select::columns(&columns))
                .limit(limit);
            if let Some(p) = &prefilter {
                q = q.only_if(p);
            }
            let batches = collect(q.execute().await?).await?;
            crate::timing::mark("search: vector leg");
            Ok::<_, StoreError>(scored(&batches, "_distance", |d| {
                (1.0 / (1.0 + d)).max(0.0)
            }))
        };
        let hits = match mode {
            SearchMode::FullText => fts_leg().await,
            SearchMode::Vector => vector_leg().await,
            SearchMode::Hybrid => futures::try_join!(vector_leg(), fts_leg()).map(|(v, f)| {
                let mut fused = rrf(&v, &f);
                fused.truncate(limit);
                fused
            }),
        };
        // An empty table has nothing to find (and may have no index to search with): the
        // row count is only asked when a leg failed, not on every query.
        let hits = match hits {
            Ok(hits) => hits,
            Err(_) if table.count_rows(None).await? == 0 => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let (hits, reranked) = self.rerank_hits(query, hits, wanted).await;
        *report = reranked;
        let doc_ids: Vec<String> = hits
            .iter()
            .map(|(c, _)| c.document_id.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let docs = self.cached_documents(&doc_ids).await?;
        crate::timing::mark("search: documents read");
        let results: Vec<SearchResult> = hits
            .into_iter()
            .map(|(c, score)| result_from_chunk(c, score, &docs))
            .collect();
        let results = expand::dedup_picture_chunks(results);
        let results = self.attach_pictures(results).await;
        crate::timing::mark("search: pictures attached");
        results
    }

    /// Context expansion over the store's `document_items` (SPEC §5.3).
    /// The documents' item windows are read concurrently.
    pub async fn expand(&self, results: Vec<SearchResult>) -> Result<Vec<SearchResult>> {
        let windows = refs_by_document(&results)
            .into_iter()
            .map(|(doc, refs)| async move {
                let matched = self.items_by_ref(&doc, &refs).await?;
                let (Some(lo), Some(hi)) = (
                    matched.iter().map(|i| i.position).min(),
                    matched.iter().map(|i| i.position).max(),
                ) else {
                    return Ok(None);
                };
                let window = self
                    .items_of(&doc, Some(((lo - 100).max(0), hi + 100)))
                    .await?;
                Ok::<_, StoreError>(Some((doc, window)))
            });
        let items: HashMap<String, Vec<DocumentItem>> = futures::future::try_join_all(windows)
            .await?
            .into_iter()
            .flatten()
            .collect();
        Ok(expand::expand_context(
            results,
            &items,
            self.search_config().max_context_chars,
        ))
    }

    /// Fills `image_data` and `picture_captions` for the pictures each result refers to
    /// (its own picture refs, and the picture just before each caption it contains). One
    /// round of item and picture queries per document that holds pictures at all (the
    /// documents concurrently), whatever the number of results; none for the others.
    pub(super) async fn attach_pictures(
        &self,
        mut results: Vec<SearchResult>,
    ) -> Result<Vec<SearchResult>> {
        // Each document's items and picture bytes are read concurrently; each result
        // belongs to one document, so the bytes are then attached document by document.
        let shared = &results;
        let reads = refs_by_document(shared)
            .into_iter()
            .map(|(doc, refs)| async move {
                if !self.has_pictures(&doc).await? {
                    return Ok(None);
                }
                let mut items = self.items_by_ref(&doc, &refs).await?;
                let before_captions: Vec<i64> = items
                    .iter()
                    .filter(|i| i.label == label::CAPTION && i.position > 0)
                    .map(|i| i.position - 1)
                    .collect();
                items.extend(self.items_at(&doc, &before_captions).await?);
                let mut wanted: Vec<String> = Vec::new();
                for r in shared.iter().filter(|r| in_doc(r, &doc)) {
                    for w in expand::wanted_picture_refs(r, &items) {
                        if !wanted.contains(&w) {
                            wanted.push(w);
                        }
                    }
                }
                let bytes = self.pictures(&doc, &wanted).await?;
                Ok::<_, StoreError>((!bytes.is_empty()).then_some((doc, items, bytes)))
            });
        let found: Vec<_> = futures::future::try_join_all(reads)
            .await?
            .into_iter()
            .flatten()
            .collect();
        for (doc, items, bytes) in found {
            for r in results.iter_mut().filter(|r| in_doc(r, &doc)) {
                let mut image_data = Map::new();
                let mut captions = Map::new();
                for w in expand::wanted_picture_refs(r, &items) {
                    if let Some(b) = bytes.get(&w) {
                        let text = items
                            .iter()
                            .find(|i| i.self_ref == w)
                            .map(|i| i.text.clone())
                            .unwrap_or_default();
                        image_data.insert(
                            w.clone(),
                            Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
                        );
                        captions.insert(w, Value::String(text));
                    }
                }
                if !image_data.is_empty() {
                    r.image_data = Some(image_data);
                    r.picture_captions = captions;
                }
            }
        }
        Ok(results)
    }

    /// A result built from a raw chunk looked up by id (the cite fallback, SPEC §6 step 5):
    /// unexpanded content, score 1.0, document fields from its document.
    pub async fn result_for_chunk(&self, chunk_id: &str) -> Result<Option<SearchResult>> {
        let Some(chunk) = self.get_chunk(chunk_id).await? else {
            return Ok(None);
        };
        let Some(doc) = self.get_document(&chunk.document_id).await? else {
            return Ok(None);
        };
        Ok(Some(result_from_chunk(chunk, 1.0, Some(&doc))))
    }
}

fn in_doc(r: &SearchResult, doc: &str) -> bool {
    r.document_id.as_deref() == Some(doc)
}

/// The union of the results' item refs, per document (first-seen order).
fn refs_by_document(results: &[SearchResult]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for r in results {
        let Some(doc) = r.document_id.as_ref() else {
            continue;
        };
        if r.doc_item_refs.is_empty() {
            continue;
        }
        let pos = match out.iter().position(|(d, _)| d == doc) {
            Some(p) => p,
            None => {
                out.push((doc.clone(), Vec::new()));
                out.len() - 1
            }
        };
        for rf in &r.doc_item_refs {
            if !out[pos].1.contains(rf) {
                out[pos].1.push(rf.clone());
            }
        }
    }
    out
}

/// Builds a SearchResult from a chunk row and its document.
pub fn result_from_chunk(chunk: super::Chunk, score: f64, docs: impl DocLookup) -> SearchResult {
    let doc = docs.lookup(&chunk.document_id);
    let meta = &chunk.metadata;
    let str_list = |k: &str| -> Vec<String> {
        meta.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let headings = meta.get("headings").and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect::<Vec<_>>()
    });
    let page_numbers = meta
        .get("page_numbers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    SearchResult {
        content: chunk.content,
        score,
        chunk_id: Some(chunk.id),
        // haiku.rag leaves this empty until context expansion merges results.
        chunk_ids: Vec::new(),
        chunk_meta: chunk.metadata.clone(),
        document_id: Some(chunk.document_id.clone()),
        document_uri: doc.and_then(|d| d.uri.clone()),
        document_title: doc.and_then(|d| d.title.clone()),
        document_meta: doc.map(|d| d.metadata.clone()).unwrap_or_default(),
        order: chunk.order,
        doc_item_refs: str_list("doc_item_refs"),
        page_numbers,
        headings,
        labels: str_list("labels"),
        image_data: None,
        picture_captions: Map::new(),
        collection: None,
    }
}

/// Finds a document's metadata by id.
pub trait DocLookup {
    fn lookup(&self, id: &str) -> Option<&DocumentMeta>;
}

impl DocLookup for &HashMap<String, DocumentMeta> {
    fn lookup(&self, id: &str) -> Option<&DocumentMeta> {
        self.get(id)
    }
}

impl DocLookup for Option<&DocumentMeta> {
    fn lookup(&self, id: &str) -> Option<&DocumentMeta> {
        self.filter(|d| d.id == id)
    }
}
