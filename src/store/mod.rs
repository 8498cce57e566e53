//! The knowledge base: haiku.rag 0.77's LanceDB tables (SPEC §11), read and written.
//!
//! A [`Store`] is opened by URI (a local directory, or an object-store / LanceDB Cloud URI
//! with the `cloud` feature). Opening checks that every table has haiku.rag's columns and
//! that `chunks.vector` has the dimension recorded in `settings`; anything else is refused
//! with an error that names what differs. Queries need an [`Embedder`] of that dimension.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow_array::{
    ArrayRef, FixedSizeListArray, Int64Array, LargeBinaryArray, RecordBatch, StringArray,
    types::Float32Type,
};
use futures::TryStreamExt;
use lancedb::Table;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use serde_json::{Map, Value, json};

use crate::config::SearchConfig;
use crate::embed::{EmbedError, Embedder, EmbedderSpec};

mod arrow_util;
pub mod docling;
pub mod expand;
pub mod format;
pub mod schema;
pub mod search;
pub mod types;

use arrow_util::{binaries, ints, sql_in, sql_str, strings};
pub use types::{DocumentItem, SearchResult};

/// The haiku.rag version whose layout we write (recorded in `settings`).
pub const HAIKU_RAG_VERSION: &str = "0.77.0";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no knowledge base at {uri}; create one with `groundwork ingest PATH...`")]
    NotFound { uri: String },
    #[error("{uri} is a file, not a database directory")]
    NotADirectory { uri: String },
    #[error("{uri} is not a haiku.rag database:\n  - {}", .differences.join("\n  - "))]
    ForeignSchema {
        uri: String,
        differences: Vec<String>,
    },
    #[error(
        "the query embedder '{embedder}' produces {embedder_dim}-dimensional vectors, but {uri} \
         was built with '{db_embedder}' ({db_dim} dimensions); use the database's embedder or \
         rebuild the database"
    )]
    DimensionMismatch {
        uri: String,
        embedder: String,
        embedder_dim: usize,
        db_embedder: String,
        db_dim: usize,
    },
    #[error("{uri} already holds a database; open it instead of creating one")]
    AlreadyExists { uri: String },
    #[error("no embedder is attached to the store (needed to search or ingest)")]
    NoEmbedder,
    #[error("invalid document filter `{filter}`: {message}")]
    InvalidFilter { filter: String, message: String },
    #[error("the settings row of {uri} is unreadable: {message}")]
    Settings { uri: String, message: String },
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error("LanceDB: {0}")]
    Lance(#[from] lancedb::Error),
    #[error("Arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    #[error("{0}")]
    Other(String),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A row of `document_meta`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DocumentMeta {
    pub id: String,
    pub uri: Option<String>,
    pub title: Option<String>,
    pub metadata: Map<String, Value>,
    pub created_at: String,
    pub updated_at: String,
}

/// A row of `chunks`, without its vector.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Chunk {
    pub id: String,
    pub document_id: String,
    pub content: String,
    pub content_fts: String,
    pub metadata: Map<String, Value>,
    pub order: i64,
}

/// A chunk to be written: content plus haiku.rag chunk metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct NewChunk {
    pub content: String,
    pub content_fts: String,
    /// `doc_item_refs`, `headings`, `labels`, `page_numbers`.
    pub metadata: Value,
    pub order: i64,
}

/// One page raster of a PDF, kept for the page-images pane.
#[derive(Debug, Clone, PartialEq)]
pub struct PageRaster {
    pub page_no: i64,
    pub png: Vec<u8>,
    pub width: u32,
    pub height: u32,
}

/// A whole document to be written.
#[derive(Debug, Clone, Default)]
pub struct NewDocument {
    pub uri: Option<String>,
    pub title: Option<String>,
    pub metadata: Map<String, Value>,
    pub content: String,
    /// The docling-shaped structure, stored zstd-compressed in `documents.docling_document`.
    pub docling_document: Value,
    pub pages: Vec<PageRaster>,
    /// Items in reading order; `document_id` and `position` are assigned on write.
    pub items: Vec<DocumentItem>,
    pub chunks: Vec<NewChunk>,
}

/// What `groundwork info` reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StoreInfo {
    pub uri: String,
    pub haiku_rag_version: Option<String>,
    pub embedder: EmbedderSpec,
    pub documents: usize,
    pub chunks: usize,
    pub items: usize,
    pub pictures: usize,
    pub indexes: Vec<IndexInfo>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct IndexInfo {
    pub table: String,
    pub name: String,
    pub kind: String,
    pub columns: Vec<String>,
    /// Rows not yet covered by the index (0 when fully indexed or unknown).
    pub unindexed_rows: usize,
}

pub struct Store {
    uri: String,
    documents: Table,
    meta: Table,
    chunks: Table,
    items: Table,
    settings: Value,
    embedder_spec: EmbedderSpec,
    embedder: Option<Arc<dyn Embedder>>,
    search_config: SearchConfig,
    /// How many `document_meta` reads were made (for tests of fetch-once behaviour).
    document_reads: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("uri", &self.uri)
            .field("embedder", &self.embedder_spec)
            .finish_non_exhaustive()
    }
}

/// haiku.rag's timestamp form: Python `datetime.now().isoformat()`, naive local time.
fn now_iso() -> String {
    chrono::Local::now()
        .naive_local()
        .format("%Y-%m-%dT%H:%M:%S%.6f")
        .to_string()
}

async fn create_index(table: &Table, column: &str, kind: schema::IndexKind) -> Result<()> {
    use lancedb::index::Index;
    use lancedb::index::scalar::{BTreeIndexBuilder, BitmapIndexBuilder, FtsIndexBuilder};
    let index = match kind {
        // haiku.rag: FTS(with_position=True, remove_stop_words=False), other parameters at
        // lancedb's defaults (simple tokenizer, English, lower case, stemming, ASCII folding).
        schema::IndexKind::Fts => Index::FTS(
            FtsIndexBuilder::default()
                .with_position(true)
                .remove_stop_words(false)
                .stem(true)
                .lower_case(true)
                .ascii_folding(true)
                .max_token_length(Some(40)),
        ),
        schema::IndexKind::BTree => Index::BTree(BTreeIndexBuilder::default()),
        schema::IndexKind::Bitmap => Index::Bitmap(BitmapIndexBuilder::default()),
    };
    table
        .create_index(&[column], index)
        .replace(true)
        .execute()
        .await?;
    Ok(())
}

/// Reads the embedder a database was built with from its settings JSON. haiku.rag 0.77
/// writes `embeddings.model.{provider,name,vector_dim,base_url}`.
pub fn embedder_from_settings(settings: &Value) -> Option<EmbedderSpec> {
    let model = settings.get("embeddings")?.get("model")?;
    serde_json::from_value(model.clone()).ok()
}

async fn collect(stream: lancedb::arrow::SendableRecordBatchStream) -> Result<Vec<RecordBatch>> {
    Ok(stream.try_collect::<Vec<_>>().await?)
}

impl Store {
    /// Opens an existing database and checks its layout.
    pub async fn open(uri: &str) -> Result<Self> {
        let local = crate::paths::local_db_uri(uri);
        let uri = local.as_str();
        if !crate::paths::is_remote_uri(uri) {
            let path = std::path::Path::new(uri);
            if !path.exists() {
                return Err(StoreError::NotFound { uri: uri.into() });
            }
            if !path.is_dir() {
                return Err(StoreError::NotADirectory { uri: uri.into() });
            }
        }
        let db = lancedb::connect(uri).execute().await?;
        let names = db.table_names().execute().await?;
        let missing: Vec<&str> = schema::ALL_TABLES
            .iter()
            .copied()
            .filter(|t| !names.iter().any(|n| n == t))
            .collect();
        if missing.len() == schema::ALL_TABLES.len() {
            if names.is_empty() {
                return Err(StoreError::NotFound { uri: uri.into() });
            }
            return Err(StoreError::ForeignSchema {
                uri: uri.into(),
                differences: vec![format!(
                    "it holds the tables {} but none of documents, document_meta, chunks, \
                     document_items, settings",
                    names.join(", ")
                )],
            });
        }
        if !missing.is_empty() {
            return Err(StoreError::ForeignSchema {
                uri: uri.into(),
                differences: missing
                    .iter()
                    .map(|t| format!("table '{t}' is missing"))
                    .collect(),
            });
        }
        let open = |name: &'static str| db.open_table(name).execute();
        let documents = open(schema::DOCUMENTS).await?;
        let meta = open(schema::DOCUMENT_META).await?;
        let chunks = open(schema::CHUNKS).await?;
        let items = open(schema::DOCUMENT_ITEMS).await?;
        let settings_table = open(schema::SETTINGS).await?;

        let settings = read_settings(&settings_table, uri).await?;
        let chunk_schema = chunks.schema().await?;
        let dim = schema::vector_dim(&chunk_schema).unwrap_or(0);
        let mut differences = Vec::new();
        for (name, table) in [
            (schema::DOCUMENTS, &documents),
            (schema::DOCUMENT_META, &meta),
            (schema::CHUNKS, &chunks),
            (schema::DOCUMENT_ITEMS, &items),
            (schema::SETTINGS, &settings_table),
        ] {
            let s = table.schema().await?;
            differences.extend(schema::differences(name, &s, dim.max(1)));
        }
        if dim == 0 && differences.is_empty() {
            differences.push("column 'chunks.vector' is not a fixed-size vector".into());
        }
        let embedder_spec = match embedder_from_settings(&settings) {
            Some(spec) => spec,
            None => {
                differences.push(
                    "settings record no embedder (expected embeddings.model with provider, \
                     name and vector_dim)"
                        .into(),
                );
                EmbedderSpec {
                    provider: String::new(),
                    name: String::new(),
                    vector_dim: dim,
                    base_url: None,
                }
            }
        };
        if differences.is_empty() && embedder_spec.vector_dim != dim {
            differences.push(format!(
                "settings say the embedder '{}' has {} dimensions, but chunks.vector has {dim}",
                embedder_spec.name, embedder_spec.vector_dim
            ));
        }
        if !differences.is_empty() {
            return Err(StoreError::ForeignSchema {
                uri: uri.into(),
                differences,
            });
        }
        Ok(Self {
            uri: uri.into(),
            documents,
            meta,
            chunks,
            items,
            settings,
            embedder_spec,
            embedder: None,
            search_config: SearchConfig::default(),
            document_reads: Default::default(),
        })
    }

    /// Creates a new, empty database built with `spec`'s embedder.
    pub async fn create(uri: &str, spec: &EmbedderSpec) -> Result<Self> {
        let local = crate::paths::local_db_uri(uri);
        let uri = local.as_str();
        if !crate::paths::is_remote_uri(uri) && std::path::Path::new(uri).is_file() {
            return Err(StoreError::NotADirectory { uri: uri.into() });
        }
        let db = lancedb::connect(uri).execute().await?;
        let names = db.table_names().execute().await?;
        if schema::ALL_TABLES
            .iter()
            .any(|t| names.iter().any(|n| n == t))
        {
            return Err(StoreError::AlreadyExists { uri: uri.into() });
        }
        for t in schema::ALL_TABLES {
            let table = db
                .create_empty_table(t, schema::expected(t, spec.vector_dim))
                .execute()
                .await?;
            for (col, kind) in schema::index_specs(t) {
                create_index(&table, col, *kind).await?;
            }
        }
        let settings = json!({
            "version": HAIKU_RAG_VERSION,
            "writer": format!("groundwork {}", env!("CARGO_PKG_VERSION")),
            "embeddings": { "model": spec },
        });
        let table = db.open_table(schema::SETTINGS).execute().await?;
        let batch = RecordBatch::try_new(
            schema::settings_schema(),
            vec![
                Arc::new(StringArray::from(vec!["settings"])) as ArrayRef,
                Arc::new(StringArray::from(vec![settings.to_string()])),
            ],
        )?;
        table.add(batch).execute().await?;
        drop(db);
        Self::open(uri).await
    }

    /// Opens the database at `uri`, creating it with `spec` when there is none.
    pub async fn open_or_create(uri: &str, spec: &EmbedderSpec) -> Result<Self> {
        match Self::open(uri).await {
            Err(StoreError::NotFound { .. }) => Self::create(uri, spec).await,
            other => other,
        }
    }

    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The full settings JSON of the database.
    pub fn settings(&self) -> &Value {
        &self.settings
    }

    /// The embedder the database was built with.
    pub fn embedder_spec(&self) -> &EmbedderSpec {
        &self.embedder_spec
    }

    pub fn dim(&self) -> usize {
        self.embedder_spec.vector_dim
    }

    pub fn search_config(&self) -> &SearchConfig {
        &self.search_config
    }

    pub fn set_search_config(&mut self, config: SearchConfig) {
        self.search_config = config;
    }

    /// Attaches the embedder used for queries and ingestion. It must produce vectors of the
    /// database's dimension.
    pub fn set_embedder(&mut self, embedder: Arc<dyn Embedder>) -> Result<()> {
        if embedder.dim() != self.dim() {
            return Err(StoreError::DimensionMismatch {
                uri: self.uri.clone(),
                embedder: embedder.spec().name.clone(),
                embedder_dim: embedder.dim(),
                db_embedder: self.embedder_spec.name.clone(),
                db_dim: self.dim(),
            });
        }
        self.embedder = Some(embedder);
        Ok(())
    }

    pub fn embedder(&self) -> Result<&Arc<dyn Embedder>> {
        self.embedder.as_ref().ok_or(StoreError::NoEmbedder)
    }

    // ----- reads -------------------------------------------------------------------------

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
        let mut docs = Vec::new();
        for b in &batches {
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
        let batches = collect(
            self.documents
                .query()
                .only_if(format!("id = {}", sql_str(id)))
                .select(Select::columns(&["id", "docling_pages"]))
                .execute()
                .await?,
        )
        .await?;
        let Some(Some(blob)) = batches
            .iter()
            .flat_map(|b| binaries(b, "docling_pages"))
            .next()
        else {
            return Ok(BTreeMap::new());
        };
        Ok(decode_pages(&blob))
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

    // ----- writes ------------------------------------------------------------------------

    /// Writes a document with its items and chunks (embedding the chunks) and returns its
    /// metadata. When `replaces` is given, that document is deleted only after the new one is
    /// completely written, so a failure leaves the old version in place.
    pub async fn add_document(
        &self,
        doc: NewDocument,
        replaces: Option<&str>,
    ) -> Result<DocumentMeta> {
        self.add_document_seeded(doc, replaces, None).await
    }

    /// [`Store::add_document`] with ids derived from `seed` (UUID v5) instead of random
    /// ones, so the same document written anywhere gets the same document and chunk ids
    /// (the bundled demo corpus, whose recorded session cites its chunks).
    pub async fn add_document_seeded(
        &self,
        doc: NewDocument,
        replaces: Option<&str>,
        seed: Option<&str>,
    ) -> Result<DocumentMeta> {
        let embedder = self.embedder()?.clone();
        let texts: Vec<String> = doc.chunks.iter().map(|c| c.content_fts.clone()).collect();
        let vectors = embedder.embed(&texts).await?;
        let stable =
            |s: &str| uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, s.as_bytes()).to_string();
        let id = match seed {
            Some(s) => stable(s),
            None => uuid::Uuid::new_v4().to_string(),
        };
        let chunk_ids: Vec<String> = (0..doc.chunks.len())
            .map(|i| match seed {
                Some(s) => stable(&format!("{s}#chunk-{i}")),
                None => uuid::Uuid::new_v4().to_string(),
            })
            .collect();
        let now = now_iso();
        let created_at = match replaces {
            Some(old) => self
                .get_document(old)
                .await?
                .map(|m| m.created_at)
                .unwrap_or_else(|| now.clone()),
            None => now.clone(),
        };
        let meta = DocumentMeta {
            id: id.clone(),
            uri: doc.uri.clone(),
            title: doc.title.clone(),
            metadata: doc.metadata.clone(),
            created_at,
            updated_at: now,
        };
        let result = self
            .write_rows(&id, &doc, &vectors, &chunk_ids, &meta)
            .await;
        if let Err(e) = result {
            // Remove whatever part of the new document made it to disk; the old one is intact.
            let _ = self.delete_document(&id).await;
            return Err(e);
        }
        if let Some(old) = replaces {
            self.delete_document(old).await?;
        }
        Ok(meta)
    }

    async fn write_rows(
        &self,
        id: &str,
        doc: &NewDocument,
        vectors: &[Vec<f32>],
        chunk_ids: &[String],
        meta: &DocumentMeta,
    ) -> Result<()> {
        // items
        if !doc.items.is_empty() {
            let n = doc.items.len();
            let batch = RecordBatch::try_new(
                schema::document_items_schema(),
                vec![
                    Arc::new(StringArray::from(vec![id; n])) as ArrayRef,
                    Arc::new(Int64Array::from_iter_values(0..n as i64)),
                    Arc::new(StringArray::from_iter_values(
                        doc.items.iter().map(|i| i.self_ref.as_str()),
                    )),
                    Arc::new(StringArray::from_iter_values(
                        doc.items.iter().map(|i| i.label.as_str()),
                    )),
                    Arc::new(StringArray::from_iter_values(
                        doc.items.iter().map(|i| i.text.as_str()),
                    )),
                    Arc::new(StringArray::from_iter_values(doc.items.iter().map(|i| {
                        serde_json::to_string(&i.page_numbers).unwrap_or_default()
                    }))),
                    Arc::new(LargeBinaryArray::from_iter(
                        doc.items.iter().map(|i| i.picture_data.as_deref()),
                    )),
                    Arc::new(Int64Array::from_iter_values(
                        doc.items.iter().map(|i| i.heading_level),
                    )),
                    Arc::new(Int64Array::from_iter_values(
                        doc.items.iter().map(|i| i.tree_depth),
                    )),
                ],
            )?;
            self.items.add(batch).execute().await?;
        }
        // chunks
        if !doc.chunks.is_empty() {
            let n = doc.chunks.len();
            let dim = self.dim() as i32;
            let vector = FixedSizeListArray::from_iter_primitive::<Float32Type, _, _>(
                vectors
                    .iter()
                    .map(|v| Some(v.iter().copied().map(Some).collect::<Vec<_>>())),
                dim,
            );
            let batch = RecordBatch::try_new(
                schema::chunks_schema(self.dim()),
                vec![
                    Arc::new(StringArray::from_iter_values(chunk_ids.iter().take(n))) as ArrayRef,
                    Arc::new(StringArray::from(vec![id; n])),
                    Arc::new(StringArray::from_iter_values(
                        doc.chunks.iter().map(|c| c.content.as_str()),
                    )),
                    Arc::new(StringArray::from_iter_values(
                        doc.chunks.iter().map(|c| c.content_fts.as_str()),
                    )),
                    Arc::new(StringArray::from_iter_values(
                        doc.chunks.iter().map(|c| c.metadata.to_string()),
                    )),
                    Arc::new(Int64Array::from_iter_values(
                        doc.chunks.iter().map(|c| c.order),
                    )),
                    Arc::new(vector),
                ],
            )?;
            self.chunks.add(batch).execute().await?;
        }
        // documents
        let docling = zstd::encode_all(doc.docling_document.to_string().as_bytes(), 3)
            .map_err(|e| StoreError::Other(format!("compressing docling_document: {e}")))?;
        let pages = if doc.pages.is_empty() {
            None
        } else {
            Some(encode_pages(&doc.pages)?)
        };
        let batch = RecordBatch::try_new(
            schema::documents_schema(),
            vec![
                Arc::new(StringArray::from(vec![id])) as ArrayRef,
                Arc::new(StringArray::from(vec![doc.content.as_str()])),
                Arc::new(LargeBinaryArray::from_iter(vec![Some(docling.as_slice())])),
                Arc::new(LargeBinaryArray::from_iter(vec![pages.as_deref()])),
                Arc::new(StringArray::from(vec![
                    crate::store::docling::DOCLING_SCHEMA_VERSION,
                ])),
            ],
        )?;
        self.documents.add(batch).execute().await?;
        // document_meta last: a document becomes visible once everything else is written.
        let batch = RecordBatch::try_new(
            schema::document_meta_schema(),
            vec![
                Arc::new(StringArray::from(vec![id])) as ArrayRef,
                Arc::new(StringArray::from(vec![meta.uri.as_deref()])),
                Arc::new(StringArray::from(vec![meta.title.as_deref()])),
                Arc::new(StringArray::from(vec![
                    Value::Object(meta.metadata.clone()).to_string(),
                ])),
                Arc::new(StringArray::from(vec![meta.created_at.as_str()])),
                Arc::new(StringArray::from(vec![meta.updated_at.as_str()])),
            ],
        )?;
        self.meta.add(batch).execute().await?;
        Ok(())
    }

    /// Deletes a document and everything that belongs to it. Deleting an unknown id is a
    /// no-op. The `document_meta` row goes first so the document disappears from listings
    /// before its parts do.
    pub async fn delete_document(&self, id: &str) -> Result<()> {
        let by_id = format!("id = {}", sql_str(id));
        let by_doc = format!("document_id = {}", sql_str(id));
        self.meta.delete(by_id.as_str()).await?;
        self.chunks.delete(by_doc.as_str()).await?;
        self.items.delete(by_doc.as_str()).await?;
        self.documents.delete(by_id.as_str()).await?;
        Ok(())
    }

    /// Creates the indexes haiku.rag keeps (`schema::INDEX_SPECS`) where they are missing,
    /// folds rows added since into the existing ones, and builds the vector index (IVF-PQ)
    /// once `chunks` is large enough for one to pay off.
    pub async fn ensure_indexes(&self) -> Result<()> {
        use lancedb::table::{OptimizeOptions, optimize::OptimizeAction};
        for (name, table) in self.tables() {
            let existing = table.list_indices().await?;
            for (col, kind) in schema::index_specs(name) {
                if !existing.iter().any(|i| i.columns.iter().any(|c| c == col)) {
                    create_index(table, col, *kind).await?;
                }
            }
            if !existing.is_empty() && table.count_rows(None).await? > 0 {
                table
                    .optimize(OptimizeAction::Index(OptimizeOptions::default()))
                    .await?;
            }
        }
        let rows = self.chunks.count_rows(None).await?;
        let has_vector_index = self
            .chunks
            .list_indices()
            .await?
            .iter()
            .any(|i| i.columns.iter().any(|c| c == "vector"));
        if rows >= VECTOR_INDEX_MIN_ROWS && !has_vector_index {
            self.build_vector_index(rows).await?;
        }
        Ok(())
    }

    fn tables(&self) -> [(&'static str, &Table); 4] {
        [
            (schema::DOCUMENTS, &self.documents),
            (schema::DOCUMENT_META, &self.meta),
            (schema::CHUNKS, &self.chunks),
            (schema::DOCUMENT_ITEMS, &self.items),
        ]
    }

    async fn build_vector_index(&self, rows: usize) -> Result<()> {
        use lancedb::index::Index;
        use lancedb::index::vector::IvfPqIndexBuilder;
        let partitions = ((rows as f64).sqrt() as u32).clamp(1, 256);
        let dim = self.dim();
        // Sub-vectors must divide the dimension; aim for 8..16 dims per sub-vector.
        let sub = [96, 64, 48, 32, 24, 16, 12, 8, 4, 2, 1]
            .into_iter()
            .find(|s| dim.is_multiple_of(*s) && dim / s >= 8)
            .unwrap_or(1) as u32;
        self.chunks
            .create_index(
                &["vector"],
                Index::IvfPq(
                    IvfPqIndexBuilder::default()
                        .distance_type(lancedb::DistanceType::L2)
                        .num_partitions(partitions)
                        .num_sub_vectors(sub),
                ),
            )
            .replace(true)
            .execute()
            .await?;
        Ok(())
    }

    pub(crate) fn chunks_table(&self) -> &Table {
        &self.chunks
    }
}

/// Below this many chunks a flat (exact) vector search is fast enough and an IVF-PQ index
/// would be poorly trained.
pub const VECTOR_INDEX_MIN_ROWS: usize = 5000;

async fn read_settings(table: &Table, uri: &str) -> Result<Value> {
    let batches = collect(table.query().execute().await?).await?;
    let raw = batches
        .iter()
        .flat_map(|b| {
            let ids = strings(b, "id");
            let s = strings(b, "settings");
            ids.into_iter().zip(s).collect::<Vec<_>>()
        })
        .find(|(id, _)| id.as_deref() == Some("settings"))
        .and_then(|(_, s)| s);
    let Some(raw) = raw else {
        return Err(StoreError::Settings {
            uri: uri.into(),
            message: "the settings table has no row with id 'settings'".into(),
        });
    };
    serde_json::from_str(&raw).map_err(|e| StoreError::Settings {
        uri: uri.into(),
        message: e.to_string(),
    })
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

/// `docling_pages`: zstd JSON map `"<page_no>" -> {page_no, size{width,height}, image{uri}}`
/// with the raster as a PNG data URI.
fn encode_pages(pages: &[PageRaster]) -> Result<Vec<u8>> {
    use base64::Engine;
    let mut map = Map::new();
    for p in pages {
        let data = base64::engine::general_purpose::STANDARD.encode(&p.png);
        map.insert(
            p.page_no.to_string(),
            json!({
                "page_no": p.page_no,
                "size": {"width": p.width, "height": p.height},
                "image": {
                    "mimetype": "image/png",
                    "dpi": 72,
                    "size": {"width": p.width, "height": p.height},
                    "uri": format!("data:image/png;base64,{data}"),
                },
            }),
        );
    }
    zstd::encode_all(Value::Object(map).to_string().as_bytes(), 3)
        .map_err(|e| StoreError::Other(format!("compressing docling_pages: {e}")))
}

fn decode_pages(blob: &[u8]) -> BTreeMap<i64, Vec<u8>> {
    use base64::Engine;
    let Ok(raw) = zstd::decode_all(blob) else {
        return BTreeMap::new();
    };
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(&raw) else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for (k, v) in map {
        let Ok(page) = k.parse::<i64>() else { continue };
        let uri = v
            .pointer("/image/uri")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Some((_, data)) = uri.split_once("base64,")
            && let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data)
        {
            out.insert(page, bytes);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_round_trip() {
        let pages = vec![PageRaster {
            page_no: 2,
            png: vec![1, 2, 3],
            width: 10,
            height: 20,
        }];
        let blob = encode_pages(&pages).unwrap();
        let back = decode_pages(&blob);
        assert_eq!(back.get(&2), Some(&vec![1, 2, 3]));
    }

    #[test]
    fn settings_embedder_is_read() {
        let s = json!({"embeddings": {"model": {"provider": "openai", "name": "m", "vector_dim": 8, "base_url": "http://x/v1"}}});
        let spec = embedder_from_settings(&s).unwrap();
        assert_eq!(spec.vector_dim, 8);
        assert_eq!(spec.base_url.as_deref(), Some("http://x/v1"));
        assert!(embedder_from_settings(&json!({})).is_none());
    }
}
