//! Groundwork's configuration file (`$XDG_CONFIG_HOME/groundwork/config.toml`).
//!
//! Section and key names follow haiku.rag's `AppConfig` where the meaning is the same
//! (`search.limit`, `search.max_context_chars`, `qa.max_searches`, ...). Every key is
//! optional; a missing file means defaults. A file that does not parse is an error that
//! names the file and the line.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::embed::EmbedderSpec;
use crate::paths::Env;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is not valid TOML: {message}")]
    Parse { path: PathBuf, message: String },
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AppConfig {
    pub storage: StorageConfig,
    pub search: SearchConfig,
    pub embeddings: EmbeddingsConfig,
    pub qa: QaConfig,
    pub analysis: AnalysisConfig,
    pub prompts: PromptsConfig,
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
}

impl Default for SearchConfig {
    fn default() -> Self {
        Self {
            limit: 5,
            max_context_chars: 5000,
            vector_refine_factor: 30,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EmbeddingsConfig {
    /// The embedder new databases are built with. `None` means the local default.
    pub model: Option<EmbedderSpec>,
}

impl AppConfig {
    /// Loads the config file at `path`; a missing file gives the defaults.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(source) => Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// Loads the file named by the environment (see [`crate::paths::config_file`]).
    pub fn load_from_env(env: &Env) -> Result<Self, ConfigError> {
        Self::load(&crate::paths::config_file(env))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_gives_defaults() {
        let c = AppConfig::load(Path::new("/nonexistent/groundwork.toml")).unwrap();
        assert_eq!(c, AppConfig::default());
        assert_eq!(c.search.limit, 5);
        assert_eq!(c.search.max_context_chars, 5000);
        assert_eq!(c.qa.max_searches, 5);
        assert!(!c.qa.model.vision);
        assert_eq!(c.prompts.domain_preamble, "");
    }

    #[test]
    fn partial_file_keeps_other_defaults() {
        let c = AppConfig::parse(
            "[search]\nlimit = 9\n[embeddings.model]\nprovider = \"openai\"\nname = \"m\"\nvector_dim = 8\nbase_url = \"http://x/v1\"\n",
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(c.search.limit, 9);
        assert_eq!(c.search.max_context_chars, 5000);
        assert_eq!(c.embeddings.model.unwrap().vector_dim, 8);
    }

    #[test]
    fn corrupt_file_names_file_and_line() {
        let err = AppConfig::parse("[search\nlimit = 3", Path::new("/etc/gw.toml")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/etc/gw.toml"), "{msg}");
        assert!(msg.contains("line 1"), "{msg}");
    }
}
