//! Groundwork's configuration: one TOML file, parsed once into a typed [`Config`].
//!
//! The file is `GROUNDWORK_CONFIG` when set, else `$XDG_CONFIG_HOME/groundwork/config.toml`
//! ([`file_path`], the one resolver). Every key is optional and a missing file means
//! defaults; an unknown key, a wrong type, bad syntax or an out-of-range value is a
//! [`ConfigError`] naming the file, the line and the key, never the line's text.
//!
//! The sections, each in its own file:
//! - `[storage]`, `[search]`, `[embeddings]`, `[qa]`, `[analysis]`, `[prompts]`: the
//!   haiku.rag-compatible [`AppConfig`] (`sections.rs`);
//! - `[search.reranker]`: the reranker endpoint ([`RerankerConfig`], `rerank.rs`);
//! - `[model]`: the model endpoint, with its environment and flag overrides and the API
//!   key ([`ModelConfig`], `model.rs`);
//! - `[tui]`: theme and key bindings as plain data ([`TuiConfig`], `tui.rs`);
//! - `[collections]`: named databases opened side by side ([`CollectionsConfig`],
//!   `collections.rs`);
//! - `[judge]`: the model that checks claims against what they cite ([`JudgeConfig`],
//!   `judge.rs`).
//!
//! This module uses only `crate::paths` and `crate::errors` from the rest of the crate;
//! the consumers take the parsed values.

pub mod collections;
pub mod error;
pub mod haiku;
pub mod judge;
pub mod model;
pub mod rerank;
pub mod sections;
pub mod tui;

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::paths::Env;

pub use collections::{CollectionsConfig, check_name as check_collection_name};
pub use error::{ConfigError, TomlErrorInfo, describe_toml_error, line_col, line_of_key};
pub use judge::JudgeConfig;
pub use model::{ApiKey, ModelConfig, ModelOverrides, TOKENIZER_ENCODINGS, TokenizerSetting};
pub use rerank::RerankerConfig;
pub use sections::{
    AnalysisConfig, AppConfig, ChunkerType, EmbedderSpec, EmbeddingsConfig, ProcessingConfig,
    PromptsConfig, QaConfig, QaModelConfig, SearchConfig, StorageConfig, StoreLayout,
};
pub use tui::{ThemeName, TuiConfig};

/// Environment variable naming the config file.
pub const ENV_CONFIG: &str = "GROUNDWORK_CONFIG";

/// Groundwork's config file: `GROUNDWORK_CONFIG` when set, else
/// `$XDG_CONFIG_HOME/groundwork/config.toml` (`~/.config/...` without `XDG_CONFIG_HOME`).
pub fn file_path(env: &Env) -> PathBuf {
    if let Some(p) = env.get(ENV_CONFIG).filter(|s| !s.is_empty()) {
        return PathBuf::from(p);
    }
    let dir = if let Some(x) = env.get("XDG_CONFIG_HOME").filter(|s| !s.is_empty()) {
        PathBuf::from(x)
    } else if let Some(home) = env.get("HOME").filter(|s| !s.is_empty()) {
        PathBuf::from(home).join(".config")
    } else {
        dirs::config_dir().unwrap_or_else(|| PathBuf::from("."))
    };
    dir.join("groundwork").join("config.toml")
}

/// The whole configuration: the file's sections with the environment and the command
/// line's overrides applied.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// The file it was read from (which may not exist); `None`: no file.
    pub path: Option<PathBuf>,
    /// `[storage]`, `[search]`, `[embeddings]`, `[qa]`, `[analysis]`, `[prompts]`.
    pub app: AppConfig,
    /// `[model]`, the environment, then the flags.
    pub model: ModelConfig,
    /// `[tui]`.
    pub tui: TuiConfig,
    /// `[collections]`: named databases opened side by side.
    pub collections: CollectionsConfig,
    /// `[judge]`: the model that checks claims against what they cite.
    pub judge: JudgeConfig,
    /// Whether an endpoint was named (`model.base_url`, `GROUNDWORK_MODEL_URL` or a
    /// flag) rather than left to discovery.
    pub endpoint_named: bool,
    /// Whether a model name was given (file, `GROUNDWORK_MODEL` or a flag).
    pub model_named: bool,
}

/// The file as written; unknown top-level keys refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a table")]
struct RawFile {
    storage: sections::FileStorage,
    processing: sections::FileProcessing,
    search: sections::FileSearch,
    embeddings: sections::FileEmbeddings,
    qa: sections::FileQa,
    analysis: sections::FileAnalysis,
    prompts: sections::FilePrompts,
    model: model::FileModel,
    tui: TuiConfig,
    collections: collections::RawCollections,
    judge: JudgeConfig,
}

impl Config {
    /// Loads the file `path` (missing: defaults), then applies `env` and `overrides`.
    pub fn load(
        path: Option<&Path>,
        env: &Env,
        overrides: &ModelOverrides,
    ) -> Result<Config, ConfigError> {
        let mut cfg = match path {
            Some(p) => Self::load_file(p)?,
            None => Config::default(),
        };
        cfg.model.apply_env_and_flags(env, overrides)?;
        cfg.app.search.reranker = rerank::apply_env_and_flags(
            cfg.app.search.reranker.take(),
            env,
            overrides.reranker_url.as_deref(),
            overrides.reranker_model.as_deref(),
        )?;
        let env_set = |k: &str| env.get(k).is_some_and(|v| !v.trim().is_empty());
        cfg.endpoint_named |= overrides.base_url.is_some() || env_set(model::ENV_MODEL_URL);
        cfg.model_named = overrides.model.is_some()
            || env_set(model::ENV_MODEL)
            || cfg.model.model != model::DEFAULT_MODEL;
        Ok(cfg)
    }

    /// Loads the file named by `env` ([`file_path`]) with the environment and
    /// `overrides` applied.
    pub fn from_env(env: &Env, overrides: &ModelOverrides) -> Result<Config, ConfigError> {
        Self::load(Some(&file_path(env)), env, overrides)
    }

    /// Reads the file `path` alone (no environment); a missing file gives the defaults.
    pub fn load_file(path: &Path) -> Result<Config, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config {
                path: Some(path.to_path_buf()),
                ..Config::default()
            }),
            Err(source) => Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Parses `text`, the contents of the file `path` (named in errors), alone.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let raw: RawFile =
            toml::from_str(text).map_err(|e| ConfigError::from_toml(path, text, &e))?;
        let endpoint_named = raw.model.base_url.is_some();
        let model = ModelConfig::from_file(raw.model, path, text)?;
        let mut tui = raw.tui;
        tui.locate_keys(text);
        let app = sections::FileSections {
            storage: raw.storage,
            processing: raw.processing,
            search: raw.search,
            embeddings: raw.embeddings,
            qa: raw.qa,
            analysis: raw.analysis,
            prompts: raw.prompts,
        }
        .into_config();
        if app.processing.chunk_size == 0 {
            return Err(ConfigError::Invalid {
                key: "processing.chunk_size".into(),
                message: "a chunk must hold at least one token".into(),
            }
            .in_file(path, text));
        }
        if let Some(r) = &app.search.reranker {
            r.validate().map_err(|e| e.in_file(path, text))?;
        }
        let collections = CollectionsConfig::from_file(raw.collections, path, text)?;
        raw.judge.validate().map_err(|e| e.in_file(path, text))?;
        let model_named = model.model != model::DEFAULT_MODEL;
        Ok(Config {
            collections,
            judge: raw.judge,
            path: Some(path.to_path_buf()),
            app,
            model,
            tui,
            endpoint_named,
            model_named,
        })
    }
}

/// Checks that `url` (the value of `key`) is an http(s) URL that parses: one line naming the
/// fault otherwise (`"http://[::1" is not a valid URL (invalid IPv6 address)`), before any
/// connection is tried.
pub(crate) fn check_http_url(key: &str, url: &str) -> Result<(), ConfigError> {
    let invalid = |message: String| ConfigError::Invalid {
        key: key.into(),
        message,
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(invalid(format!("{url:?} is not an http(s) URL")));
    }
    match reqwest::Url::parse(url) {
        Ok(u) if u.host_str().is_some_and(|h| !h.is_empty()) => Ok(()),
        Ok(_) => Err(invalid(format!("{url:?} is not a valid URL (no host)"))),
        Err(e) => Err(invalid(format!("{url:?} is not a valid URL ({e})"))),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn urls_that_do_not_parse_are_named_in_one_line() {
        use super::check_http_url;
        assert!(check_http_url("model.base_url", "http://127.0.0.1:8080/v1").is_ok());
        assert!(check_http_url("model.base_url", "https://[::1]:8080/v1").is_ok());
        let line = |url: &str| {
            check_http_url("model.base_url", url)
                .unwrap_err()
                .to_string()
        };
        let e = line("http://[::1");
        assert!(
            e.contains("\"http://[::1\" is not a valid URL (invalid IPv6 address)"),
            "{e}"
        );
        assert!(
            line("http://").contains("is not a valid URL"),
            "{}",
            line("http://")
        );
        assert!(line("ftp://x").contains("is not an http(s) URL"));
        assert!(!e.contains('\n'));
    }

    use super::*;

    #[test]
    fn missing_file_gives_defaults() {
        let c = Config::load_file(Path::new("/nonexistent/groundwork.toml"))
            .unwrap()
            .app;
        assert_eq!(c, AppConfig::default());
        assert_eq!(c.search.limit, 5);
        assert_eq!(c.search.max_context_chars, 5000);
        assert_eq!(c.qa.max_searches, 5);
        assert!(!c.qa.model.vision);
        assert_eq!(c.prompts.domain_preamble, "");
    }

    #[test]
    fn partial_file_keeps_other_defaults() {
        let c = Config::parse(
            "[search]\nlimit = 9\n[embeddings.model]\nprovider = \"openai\"\nname = \"m\"\nvector_dim = 8\nbase_url = \"http://x/v1\"\n",
            Path::new("c.toml"),
        )
        .unwrap()
        .app;
        assert_eq!(c.search.limit, 9);
        assert_eq!(c.search.max_context_chars, 5000);
        assert_eq!(c.embeddings.model.unwrap().vector_dim, 8);
    }

    #[test]
    fn unknown_keys_are_refused_in_the_file_but_not_in_a_spec_mapping() {
        let err = Config::parse(
            "[qa]\nmax_searches = 2\nenvironment = 1\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("line 3, key `qa.environment`"), "{err}");
        // A capability spec's `config` (haiku.rag's AppConfig dump) may carry keys
        // Groundwork does not read.
        let c: AppConfig = serde_json::from_value(serde_json::json!({
            "environment": "production",
            "qa": {"max_searches": 2, "max_iterations": 9},
        }))
        .unwrap();
        assert_eq!(c.qa.max_searches, 2);
    }

    #[test]
    fn corrupt_file_names_file_and_line() {
        let err = Config::parse("[search\nlimit = 3", Path::new("/etc/gw.toml")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/etc/gw.toml"), "{msg}");
        assert!(msg.contains("line 1"), "{msg}");
    }

    #[test]
    fn a_type_error_names_file_line_and_key() {
        let err = Config::parse(
            "[storage]\n\n[search]\nmax_context_chars = 10\nlimit = \"five\"\n",
            Path::new("/etc/gw.toml"),
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("invalid config file /etc/gw.toml, line 5"),
            "{msg}"
        );
        assert!(msg.contains("key `search.limit`"), "{msg}");
        assert!(msg.contains("expected usize"), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }

    #[test]
    fn a_secret_on_the_bad_line_is_never_shown() {
        for text in [
            "[model]\napi_key = sk-live-unquoted-4242\n",
            "[model]\napi_key = \"sk-live-open-4242\n",
            "[model]\napi_key = 'sk-live-single-4242\n",
        ] {
            let err = Config::parse(text, Path::new("c.toml")).unwrap_err();
            let msg = err.to_string();
            assert!(!msg.contains("4242"), "{msg}");
            assert!(msg.contains("line 2"), "{msg}");
        }
    }
}
