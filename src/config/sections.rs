//! The haiku.rag-compatible sections of the config file: `[storage]`, `[search]`,
//! `[embeddings]`, `[qa]`, `[analysis]`, `[prompts]`, gathered in [`AppConfig`].
//!
//! Section and key names follow haiku.rag's `AppConfig` where the meaning is the same
//! (`search.limit`, `search.max_context_chars`, `qa.max_searches`, ...). These types are
//! also what a capability spec's `config` mapping deserializes into (JSON, lenient like
//! haiku.rag's), so they accept unknown keys; the config *file* is read through the
//! strict `File*` mirrors below, which refuse them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::rerank::{FileReranker, RerankerConfig};

/// How haiku.rag records an embedding model in `settings.embeddings.model`
/// (`provider`, `name`, `vector_dim`, `base_url`); also `[embeddings.model]` of the
/// config file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbedderSpec {
    pub provider: String,
    pub name: String,
    pub vector_dim: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AppConfig {
    pub storage: StorageConfig,
    /// How documents are chunked (haiku.rag `processing`).
    #[serde(skip_serializing_if = "ProcessingConfig::is_default")]
    pub processing: ProcessingConfig,
    pub search: SearchConfig,
    pub embeddings: EmbeddingsConfig,
    pub qa: QaConfig,
    pub analysis: AnalysisConfig,
    pub prompts: PromptsConfig,
}

/// How documents are chunked (haiku.rag `processing`): `chunker_type` `hierarchical` (one
/// chunk per item, Groundwork's default) or `hybrid` (chunks sized for the embedder:
/// `chunk_size` tokens, neighbours under the same headings merged when
/// `chunking_merge_peers`, as haiku.rag's default chunker).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcessingConfig {
    pub chunker_type: ChunkerType,
    pub chunk_size: usize,
    pub chunking_merge_peers: bool,
}

/// `processing.chunker_type`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChunkerType {
    /// One chunk per item (docling's `HierarchicalChunker`).
    #[default]
    Hierarchical,
    /// Sized for the embedder (docling's `HybridChunker`).
    Hybrid,
}

impl Default for ProcessingConfig {
    fn default() -> Self {
        ProcessingConfig {
            chunker_type: ChunkerType::default(),
            chunk_size: 256,
            chunking_merge_peers: true,
        }
    }
}

impl ProcessingConfig {
    fn is_default(&self) -> bool {
        *self == ProcessingConfig::default()
    }
}

/// The analysis capability's settings (haiku.rag `analysis`, SPEC §7.1, §9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AnalysisConfig {
    /// `analysis_execute_code` calls allowed per run.
    pub max_executions: usize,
    /// Compute budget of one execution, in seconds; the sandbox's total is
    /// `code_timeout * max_executions`.
    pub code_timeout: f64,
    /// Characters of program output kept before the truncation marker.
    pub max_output_chars: usize,
    /// Memory a program may use, in MiB (Groundwork's own setting).
    pub max_memory_mb: usize,
    /// The analysis model's traits; `None` falls back to `qa.model`.
    pub model: Option<QaModelConfig>,
}

impl Default for AnalysisConfig {
    fn default() -> Self {
        Self {
            max_executions: 15,
            code_timeout: 60.0,
            max_output_chars: 50_000,
            max_memory_mb: 512,
            model: None,
        }
    }
}

/// The question-answering agent's settings (haiku.rag `qa`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QaConfig {
    /// `rag_search` calls allowed per run (SPEC §7.1).
    pub max_searches: usize,
    /// The answering model's traits.
    pub model: QaModelConfig,
}

impl Default for QaConfig {
    fn default() -> Self {
        Self {
            max_searches: 5,
            model: QaModelConfig::default(),
        }
    }
}

/// What the answering model can do.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QaModelConfig {
    /// Whether the model reads images: retrieved pictures are attached to search results.
    pub vision: bool,
}

/// Prose added to the capabilities' instructions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PromptsConfig {
    /// Sent before each evidence capability's instructions when non-empty (SPEC §1.1).
    pub domain_preamble: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StorageConfig {
    /// Overrides the data directory that holds the default database.
    pub data_dir: Option<PathBuf>,
    /// The haiku.rag layout a new database is created in.
    #[serde(skip_serializing_if = "StoreLayout::is_default")]
    pub layout: StoreLayout,
}

/// The haiku.rag layout a new database is created in (`[storage] layout`). The tables,
/// their indexes and their file format are the same in both; what differs is the
/// settings row: 0.77's records the embedder with where it is served (so Groundwork
/// reopens the database with no flags), 0.101's only its provider, name and dimension
/// (where it is served lives in the user's `haiku.rag.yaml`, or `--embed-url`), which
/// haiku.rag 0.101 opens without asking for `haiku-rag migrate`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoreLayout {
    /// haiku.rag 0.77 (the default).
    #[default]
    #[serde(rename = "0.77", alias = "0.77.0")]
    V077,
    /// haiku.rag 0.101.
    #[serde(rename = "0.101", alias = "0.101.1")]
    V0101,
}

impl StoreLayout {
    /// The haiku.rag version the settings row records.
    pub fn version(self) -> &'static str {
        match self {
            StoreLayout::V077 => "0.77.0",
            StoreLayout::V0101 => "0.101.1",
        }
    }

    fn is_default(&self) -> bool {
        *self == StoreLayout::default()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SearchConfig {
    /// Results per search when the caller gives no limit.
    pub limit: usize,
    /// Context expansion budget in characters (SPEC §5.3).
    pub max_context_chars: usize,
    /// Refine factor for the vector leg of hybrid search.
    pub vector_refine_factor: u32,
    /// `[search.reranker]`: when set, search fetches `limit * 10` candidates, reranks
    /// them and keeps the top `limit` (Groundwork's own key; haiku.rag has `[reranking]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reranker: Option<RerankerConfig>,
}

impl Default for SearchConfig {
    fn default() -> Self {
        Self {
            limit: 5,
            max_context_chars: 5000,
            vector_refine_factor: 30,
            reranker: None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EmbeddingsConfig {
    /// The embedder new databases are built with. `None` means the local default.
    pub model: Option<EmbedderSpec>,
}

// The config file's view of the sections above: every key optional, unknown keys
// refused. `apply` lays a file section over the defaults.

/// Sets `$dst` from each `Option` field of `$src` that is present.
macro_rules! set_present {
    ($dst:expr, $src:expr, $($field:ident),* $(,)?) => {
        $( if let Some(v) = $src.$field { $dst.$field = v; } )*
    };
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct FileStorage {
    data_dir: Option<PathBuf>,
    layout: Option<StoreLayout>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct FileSearch {
    limit: Option<usize>,
    max_context_chars: Option<usize>,
    vector_refine_factor: Option<u32>,
    reranker: Option<FileReranker>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct FileEmbeddings {
    model: Option<FileEmbedderSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct FileEmbedderSpec {
    provider: String,
    name: String,
    vector_dim: usize,
    base_url: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
struct FileQaModel {
    vision: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct FileQa {
    max_searches: Option<usize>,
    model: Option<FileQaModel>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct FileProcessing {
    chunker_type: Option<ChunkerType>,
    chunk_size: Option<usize>,
    chunking_merge_peers: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct FileAnalysis {
    max_executions: Option<usize>,
    code_timeout: Option<f64>,
    max_output_chars: Option<usize>,
    max_memory_mb: Option<usize>,
    model: Option<FileQaModel>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct FilePrompts {
    domain_preamble: Option<String>,
}

/// The haiku.rag sections of one file, as written.
#[derive(Debug, Default)]
pub(super) struct FileSections {
    pub storage: FileStorage,
    pub processing: FileProcessing,
    pub search: FileSearch,
    pub embeddings: FileEmbeddings,
    pub qa: FileQa,
    pub analysis: FileAnalysis,
    pub prompts: FilePrompts,
}

impl FileQaModel {
    fn into_config(self) -> QaModelConfig {
        let mut m = QaModelConfig::default();
        set_present!(m, self, vision);
        m
    }
}

impl FileSections {
    /// The sections with the file's values over the defaults.
    pub fn into_config(self) -> AppConfig {
        let mut c = AppConfig::default();
        if let Some(d) = self.storage.data_dir {
            c.storage.data_dir = Some(d);
        }
        if let Some(layout) = self.storage.layout {
            c.storage.layout = layout;
        }
        set_present!(
            c.processing,
            self.processing,
            chunker_type,
            chunk_size,
            chunking_merge_peers
        );
        set_present!(
            c.search,
            self.search,
            limit,
            max_context_chars,
            vector_refine_factor
        );
        c.search.reranker = self.search.reranker.map(FileReranker::into_config);
        c.embeddings.model = self.embeddings.model.map(|m| EmbedderSpec {
            provider: m.provider,
            name: m.name,
            vector_dim: m.vector_dim,
            base_url: m.base_url,
        });
        set_present!(c.qa, self.qa, max_searches);
        if let Some(m) = self.qa.model {
            c.qa.model = m.into_config();
        }
        let a = self.analysis;
        set_present!(
            c.analysis,
            a,
            max_executions,
            code_timeout,
            max_output_chars,
            max_memory_mb
        );
        c.analysis.model = a.model.map(FileQaModel::into_config);
        set_present!(c.prompts, self.prompts, domain_preamble);
        c
    }
}
