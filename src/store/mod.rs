//! The knowledge base: haiku.rag 0.77's LanceDB tables (SPEC §11), read and written.
//!
//! A [`Store`] is opened by URI (a local directory, an `s3://` URI, or a GCS, Azure or
//! LanceDB Cloud URI with the `cloud` feature). Opening checks that every table has haiku.rag's columns and
//! that `chunks.vector` has the dimension recorded in `settings`; anything else is refused
//! with an error that names what differs. Queries need an [`Embedder`] of that dimension.//!
//! One file per job: the record types (`types`), opening and creating a database
//! (`open`), reads (`read`), writes (`write`), replacing a document in place (`replace`),
//! indexes (`indexes`), the page-raster blob (`pages`); search, expansion and formatting have their own modules.

use std::sync::Arc;

use arrow_array::RecordBatch;
use futures::TryStreamExt;
use lancedb::Table;
use serde_json::Value;

use crate::config::SearchConfig;
use crate::embed::{EmbedError, Embedder, EmbedderSpec};
mod arrow_util;
mod browse;
mod cache;
pub mod docling;
pub mod expand;
pub mod format;
pub mod grounding;
mod indexes;
mod open;
mod pages;
mod read;
pub mod remote;
pub mod replace;
pub mod rerank;
pub mod schema;
pub mod search;
pub mod types;
pub mod versions;
mod write;

pub use indexes::VECTOR_INDEX_MIN_ROWS;
pub use open::embedder_from_settings;
pub(crate) use read::chunks_from_batch;
pub use types::{Chunk, DocumentMeta, IndexInfo, NewChunk, NewDocument, PageRaster, StoreInfo};
pub use types::{DocumentItem, SearchResult};

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
pub struct Store {
    uri: String,
    documents: Table,
    meta: Table,
    chunks: Table,
    items: Table,
    settings_table: Table,
    settings: Value,
    /// Where it reads when checked out at a tag or recorded versions (read-only then).
    pinned: Option<versions::Pinned>,
    embedder_spec: EmbedderSpec,
    embedder: Option<Arc<dyn Embedder>>,
    search_config: SearchConfig,
    /// The reranker `search_config.reranker` names (or why it could not be built).
    reranker: Option<rerank::Attached>,
    /// How many `document_meta` reads were made (for tests of fetch-once behaviour).
    document_reads: std::sync::atomic::AtomicUsize,
    /// Per-version caches search reads through (`cache`).
    cache: cache::Cache,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("uri", &self.uri)
            .field("embedder", &self.embedder_spec)
            .finish_non_exhaustive()
    }
}

async fn collect(stream: lancedb::arrow::SendableRecordBatchStream) -> Result<Vec<RecordBatch>> {
    Ok(stream.try_collect::<Vec<_>>().await?)
}
impl Store {
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

    /// Sets the search settings; a `reranker` in them is attached (see [`rerank`]).
    pub fn set_search_config(&mut self, config: SearchConfig) {
        self.reranker = config.reranker.as_ref().map(rerank::Attached::build);
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

    fn tables(&self) -> [(&'static str, &Table); 4] {
        [
            (schema::DOCUMENTS, &self.documents),
            (schema::DOCUMENT_META, &self.meta),
            (schema::CHUNKS, &self.chunks),
            (schema::DOCUMENT_ITEMS, &self.items),
        ]
    }

    pub(crate) fn chunks_table(&self) -> &Table {
        &self.chunks
    }
}
