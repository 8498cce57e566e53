//! Reads: documents, contents, page images, chunks, items and pictures, counts and
//! the store's summary, plus the row decoders search shares.

use std::collections::{BTreeMap, HashMap};

use arrow_array::RecordBatch;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use serde_json::{Map, Value};

use super::arrow_util::{binaries, ints, sql_in, sql_str, strings};
use super::pages::decode_pages;
use super::{
    Chunk, DocumentItem, DocumentMeta, IndexInfo, Result, Store, StoreError, StoreInfo, collect,
};

impl Store {
    /// Documents whose `document_meta` row matches the SQL `filter` (all when `None`),
    /// ordered by creation time.
    pub async fn list_documents(&self, filter: Option<&str>) -> Result<Vec<DocumentMeta>> {
        self.document_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut q = self.meta.query();
        if let Some(f) = filter.filter(|f| !f.trim().is_empty()) {
            q = q.only_if(f);
        }
        let batches = match q.execute().await {
            Ok(s) => collect(s).await,
            Err(e) => Err(e.into()),
        };
        let batches = match (batches, filter) {
            (Err(StoreError::Lance(e)), Some(f)) => {
                return Err(StoreError::InvalidFilter {
                    filter: f.into(),
                    message: e.to_string(),
                });
            }
            (r, _) => r?,
        };
        let mut docs = metas_from_batches(&batches);
        docs.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(docs)
    }

    /// How many reads of `document_meta` this store has made so far.
    pub fn document_reads(&self) -> usize {
        self.document_reads
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub async fn get_document(&self, id: &str) -> Result<Option<DocumentMeta>> {
        Ok(self
            .list_documents(Some(&format!("id = {}", sql_str(id))))
            .await?
            .into_iter()
            .next())
    }

    pub async fn find_by_uri(&self, uri: &str) -> Result<Option<DocumentMeta>> {
        Ok(self
            .list_documents(Some(&format!("uri = {}", sql_str(uri))))
            .await?
            .into_iter()
            .next())
    }

    /// Metadata for several documents at once, keyed by id.
    pub async fn documents_by_id(&self, ids: &[String]) -> Result<HashMap<String, DocumentMeta>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        Ok(self
            .list_documents(Some(&sql_in("id", ids)))
            .await?
            .into_iter()
            .map(|d| (d.id.clone(), d))
            .collect())
    }

    /// The full text of a document (`documents.content`).
    pub async fn document_content(&self, id: &str) -> Result<Option<String>> {
        let batches = collect(
            self.documents
                .query()
                .only_if(format!("id = {}", sql_str(id)))
                .select(Select::columns(&["id", "content"]))
                .execute()
                .await?,
        )
        .await?;
        Ok(batches
            .iter()
            .flat_map(|b| strings(b, "content"))
            .next()
            .flatten())
    }

    /// The page rasters kept for a document (`documents.docling_pages`), by page number.
    pub async fn page_images(&self, id: &str) -> Result<BTreeMap<i64, Vec<u8>>> {
        Ok(self
            .document_blob(id, "docling_pages")
            .await?
            .map(|blob| decode_pages(&blob))
            .unwrap_or_default())
    }

    /// One binary column of a document's row (`docling_pages`, `docling_document`), if set.
    pub(super) async fn document_blob(&self, id: &str, column: &str) -> Result<Option<Vec<u8>>> {
        let batches = collect(
            self.documents
                .query()
                .only_if(format!("id = {}", sql_str(id)))
                .select(Select::columns(&["id", column]))
                .execute()
                .await?,
        )
        .await?;
        Ok(batches
            .iter()
            .flat_map(|b| binaries(b, column))
            .next()
            .flatten())
    }

    pub async fn get_chunk(&self, id: &str) -> Result<Option<Chunk>> {
        Ok(self
            .query_chunks(&format!("id = {}", sql_str(id)))
            .await?
            .into_iter()
            .next())
    }

    /// A document's chunks in `order`.
    pub async fn chunks_of(&self, document_id: &str) -> Result<Vec<Chunk>> {
        let mut c = self
            .query_chunks(&format!("document_id = {}", sql_str(document_id)))
            .await?;
        c.sort_by_key(|c| c.order);
        Ok(c)
    }

    async fn query_chunks(&self, filter: &str) -> Result<Vec<Chunk>> {
        let batches = collect(
            self.chunks
                .query()
                .only_if(filter)
                .select(Select::columns(&[
                    "id",
                    "document_id",
                    "content",
                    "content_fts",
                    "metadata",
                    "order",
                ]))
                .execute()
                .await?,
        )
        .await?;
        Ok(batches.iter().flat_map(chunks_from_batch).collect())
    }

    /// A document's items with `lo <= position <= hi` (all when both are `None`), sorted by
    /// position. Picture bytes are not loaded.
    pub async fn items_of(
        &self,
        document_id: &str,
        range: Option<(i64, i64)>,
    ) -> Result<Vec<DocumentItem>> {
        let mut filter = format!("document_id = {}", sql_str(document_id));
        if let Some((lo, hi)) = range {
            filter.push_str(&format!(" AND position >= {lo} AND position <= {hi}"));
        }
        self.query_items(&filter, false).await
    }

    /// Items of one document at the given positions.
    pub async fn items_at(
        &self,
        document_id: &str,
        positions: &[i64],
    ) -> Result<Vec<DocumentItem>> {
        if positions.is_empty() {
            return Ok(Vec::new());
        }
        let list: Vec<String> = positions.iter().map(i64::to_string).collect();
        let filter = format!(
            "document_id = {} AND position IN ({})",
            sql_str(document_id),
            list.join(", ")
        );
        self.query_items(&filter, false).await
    }

    /// Items of one document selected by self_ref.
    pub async fn items_by_ref(
        &self,
        document_id: &str,
        refs: &[String],
    ) -> Result<Vec<DocumentItem>> {
        if refs.is_empty() {
            return Ok(Vec::new());
        }
        let filter = format!(
            "document_id = {} AND {}",
            sql_str(document_id),
            sql_in("self_ref", refs)
        );
        self.query_items(&filter, false).await
    }

    /// A picture's bytes, by `(document_id, self_ref)`.
    pub async fn picture(&self, document_id: &str, self_ref: &str) -> Result<Option<Vec<u8>>> {
        let filter = format!(
            "document_id = {} AND self_ref = {}",
            sql_str(document_id),
            sql_str(self_ref)
        );
        Ok(self
            .query_items(&filter, true)
            .await?
            .into_iter()
            .find_map(|i| i.picture_data))
    }

    /// Picture bytes for several refs of one document.
    pub async fn pictures(
        &self,
        document_id: &str,
        refs: &[String],
    ) -> Result<HashMap<String, Vec<u8>>> {
        if refs.is_empty() {
            return Ok(HashMap::new());
        }
        let filter = format!(
            "document_id = {} AND {}",
            sql_str(document_id),
            sql_in("self_ref", refs)
        );
        Ok(self
            .query_items(&filter, true)
            .await?
            .into_iter()
            .filter_map(|i| i.picture_data.map(|d| (i.self_ref, d)))
            .collect())
    }

    async fn query_items(&self, filter: &str, with_pictures: bool) -> Result<Vec<DocumentItem>> {
        let mut cols = vec![
            "document_id",
            "position",
            "self_ref",
            "label",
            "text",
            "page_numbers",
            "heading_level",
            "tree_depth",
        ];
        if with_pictures {
            cols.push("picture_data");
        }
        let batches = collect(
            self.items
                .query()
                .only_if(filter)
                .select(Select::columns(&cols))
                .execute()
                .await?,
        )
        .await?;
        let mut out = Vec::new();
        for b in &batches {
            let doc = strings(b, "document_id");
            let pos = ints(b, "position");
            let sref = strings(b, "self_ref");
            let label = strings(b, "label");
            let text = strings(b, "text");
            let pages = strings(b, "page_numbers");
            let hl = ints(b, "heading_level");
            let td = ints(b, "tree_depth");
            let pics = if with_pictures {
                binaries(b, "picture_data")
            } else {
                vec![None; b.num_rows()]
            };
            for i in 0..b.num_rows() {
                out.push(DocumentItem {
                    document_id: doc[i].clone().unwrap_or_default(),
                    position: pos[i].unwrap_or(0),
                    self_ref: sref[i].clone().unwrap_or_default(),
                    label: label[i].clone().unwrap_or_default(),
                    text: text[i].clone().unwrap_or_default(),
                    page_numbers: parse_int_list(pages[i].as_deref()),
                    picture_data: pics[i].clone(),
                    heading_level: hl[i].unwrap_or(0),
                    tree_depth: td[i].unwrap_or(0),
                });
            }
        }
        out.sort_by_key(|i| i.position);
        Ok(out)
    }

    pub async fn count_documents(&self) -> Result<usize> {
        Ok(self.meta.count_rows(None).await?)
    }

    pub async fn count_chunks(&self) -> Result<usize> {
        Ok(self.chunks.count_rows(None).await?)
    }

    pub async fn info(&self) -> Result<StoreInfo> {
        let mut indexes = Vec::new();
        for (name, table) in self.tables() {
            for idx in table.list_indices().await? {
                let unindexed = match table.index_stats(&idx.name).await {
                    Ok(Some(s)) => s.num_unindexed_rows,
                    _ => 0,
                };
                indexes.push(IndexInfo {
                    table: name.into(),
                    name: idx.name.clone(),
                    kind: format!("{:?}", idx.index_type),
                    columns: idx.columns.clone(),
                    unindexed_rows: unindexed,
                });
            }
        }
        Ok(StoreInfo {
            uri: self.uri.clone(),
            haiku_rag_version: self
                .settings
                .get("version")
                .and_then(Value::as_str)
                .map(String::from),
            embedder: self.embedder_spec.clone(),
            documents: self.meta.count_rows(None).await?,
            chunks: self.chunks.count_rows(None).await?,
            items: self.items.count_rows(None).await?,
            pictures: self
                .items
                .count_rows(Some("picture_data IS NOT NULL".into()))
                .await?,
            indexes,
        })
    }
}

/// `document_meta` rows, in the batches' order.
pub(crate) fn metas_from_batches(batches: &[RecordBatch]) -> Vec<DocumentMeta> {
    let mut docs = Vec::new();
    for b in batches {
        let ids = strings(b, "id");
        let uris = strings(b, "uri");
        let titles = strings(b, "title");
        let metas = strings(b, "metadata");
        let created = strings(b, "created_at");
        let updated = strings(b, "updated_at");
        for i in 0..b.num_rows() {
            docs.push(DocumentMeta {
                id: ids[i].clone().unwrap_or_default(),
                uri: uris[i].clone(),
                title: titles[i].clone(),
                metadata: parse_object(metas[i].as_deref()),
                created_at: created[i].clone().unwrap_or_default(),
                updated_at: updated[i].clone().unwrap_or_default(),
            });
        }
    }
    docs
}

pub(crate) fn chunks_from_batch(b: &RecordBatch) -> Vec<Chunk> {
    let ids = strings(b, "id");
    let docs = strings(b, "document_id");
    let content = strings(b, "content");
    let fts = strings(b, "content_fts");
    let meta = strings(b, "metadata");
    let order = ints(b, "order");
    (0..b.num_rows())
        .map(|i| Chunk {
            id: ids[i].clone().unwrap_or_default(),
            document_id: docs[i].clone().unwrap_or_default(),
            content: content[i].clone().unwrap_or_default(),
            content_fts: fts[i].clone().unwrap_or_default(),
            metadata: parse_object(meta[i].as_deref()),
            order: order[i].unwrap_or(0),
        })
        .collect()
}

/// Parses a JSON-object string column; anything else reads as an empty object.
pub(crate) fn parse_object(s: Option<&str>) -> Map<String, Value> {
    s.and_then(|s| serde_json::from_str::<Value>(s).ok())
        .and_then(|v| match v {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default()
}

pub(crate) fn parse_int_list(s: Option<&str>) -> Vec<i64> {
    s.and_then(|s| serde_json::from_str::<Vec<i64>>(s).ok())
        .unwrap_or_default()
}
