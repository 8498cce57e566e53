//! `[model]`: the OpenAI-compatible endpoint, its environment and flag overrides, and
//! the API key (which never appears in `Debug`, `Display` or error output).
//!
//! Precedence, lowest first: built-in defaults, the `[model]` table of the config file
//! (see [`crate::config::file_path`]), the
//! environment (`GROUNDWORK_MODEL_URL`, `GROUNDWORK_MODEL`, `OPENAI_API_KEY`), then
//! explicit overrides (command-line flags). The environment is passed in as a map so
//! tests never touch the process environment.
//!
//! ```toml
//! [model]
//! base_url = "http://127.0.0.1:8080/v1"
//! model = "qwen3"
//! api_key = "sk-..."        # optional; OPENAI_API_KEY is the usual place
//! timeout_secs = 120       # idle: longest wait for the headers or between stream bytes
//! total_timeout_secs = 600  # optional; the whole request, retries included (default: none)
//! connect_timeout_secs = 10
//! max_retries = 2           # for connection failures and HTTP 408/429/502/503/504
//! stream = true
//! max_tokens = 2048         # optional; sent as `max_tokens` (default: the server's)
//! max_response_bytes = 8388608  # answer text + reasoning + tool calls (default 8 MiB)
//! tokenizer = "tokenizer.json"  # optional; counts request tokens (path, or o200k / cl100k)
//! ```

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::ConfigError;

/// Environment variable naming the endpoint base URL.
pub const ENV_MODEL_URL: &str = "GROUNDWORK_MODEL_URL";
/// Environment variable naming the model.
pub const ENV_MODEL: &str = "GROUNDWORK_MODEL";
/// Environment variable holding the API key.
pub const ENV_API_KEY: &str = "OPENAI_API_KEY";

/// Default endpoint: a local llama-server.
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:8080/v1";
/// Default model name (llama-server ignores it).
pub const DEFAULT_MODEL: &str = "default";

/// An API key. It never appears in `Debug` or `Display` output and has no
/// `Serialize` impl, so it cannot end up in logs, errors or saved files.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The key itself, for the HTTP client only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl<'de> Deserialize<'de> for ApiKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(ApiKey)
    }
}

/// Everything needed to talk to an OpenAI-compatible endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// Base URL including `/v1`, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// Model name sent with each request.
    pub model: String,
    /// API key, if the endpoint needs one.
    pub api_key: Option<ApiKey>,
    /// Idle timeout: the longest wait for the response headers and between body
    /// bytes of one attempt (a long answer that keeps streaming is never cut).
    pub timeout_secs: u64,
    /// Limit for the whole request, retries included; `None`: no limit.
    pub total_timeout_secs: Option<u64>,
    /// Limit for establishing the TCP/TLS connection.
    pub connect_timeout_secs: u64,
    /// Extra attempts after a connection failure or HTTP 408, 429, 502, 503, 504 (an
    /// idle timeout or a cut stream is retried at most once).
    pub max_retries: u32,
    /// First backoff delay in milliseconds; doubles per retry, capped at 8 s.
    pub retry_base_delay_ms: u64,
    /// Use SSE streaming (text and tool-call deltas surface as they arrive).
    pub stream: bool,
    /// Sent as `max_tokens` when set; an answer that hits it is marked cut off.
    pub max_tokens: Option<u32>,
    /// Largest answer accepted (text, reasoning and tool calls, in bytes).
    pub max_response_bytes: u64,
    /// How request tokens are counted; `None`: by the model's name (a tiktoken encoding
    /// for OpenAI families, else characters / 4).
    pub tokenizer: Option<TokenizerSetting>,
}

/// `[model] tokenizer`: a tiktoken encoding by name, or a model's `tokenizer.json` (a
/// relative path is relative to the config file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenizerSetting {
    /// `o200k_base`, `cl100k_base`, ... (the `_base` may be left off).
    Encoding(String),
    /// A Hugging Face `tokenizer.json`.
    File(PathBuf),
}

/// The tiktoken encodings `[model] tokenizer` names.
pub const TOKENIZER_ENCODINGS: &[&str] = &[
    "o200k_base",
    "o200k",
    "o200k_harmony",
    "cl100k_base",
    "cl100k",
    "p50k_base",
    "p50k",
    "r50k_base",
    "r50k",
];

impl TokenizerSetting {
    /// `value` as written in the file at `config` (relative paths against its folder).
    pub fn parse(value: &str, config: Option<&Path>) -> TokenizerSetting {
        if TOKENIZER_ENCODINGS.contains(&value) {
            return TokenizerSetting::Encoding(value.to_string());
        }
        let p = PathBuf::from(value);
        let p = match config.and_then(Path::parent) {
            Some(dir) if p.is_relative() => dir.join(p),
            _ => p,
        };
        TokenizerSetting::File(p)
    }
}

/// Default `max_response_bytes`: 8 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            base_url: DEFAULT_BASE_URL.to_string(),
            model: DEFAULT_MODEL.to_string(),
            api_key: None,
            timeout_secs: 120,
            total_timeout_secs: None,
            connect_timeout_secs: 10,
            max_retries: 2,
            retry_base_delay_ms: 500,
            stream: true,
            max_tokens: None,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            tokenizer: None,
        }
    }
}

/// Explicit overrides, typically from command-line flags. `None` keeps the value.
#[derive(Debug, Clone, Default)]
pub struct ModelOverrides {
    /// `--model-url`.
    pub base_url: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// API key given explicitly.
    pub api_key: Option<ApiKey>,
    /// `--timeout`.
    pub timeout_secs: Option<u64>,
    /// `--max-retries`.
    pub max_retries: Option<u32>,
    /// `--no-stream` sets `Some(false)`.
    pub stream: Option<bool>,
    /// `--max-tokens`.
    pub max_tokens: Option<u32>,
    /// `--reranker-url` (laid over `[search.reranker]`).
    pub reranker_url: Option<String>,
    /// `--reranker-model`.
    pub reranker_model: Option<String>,
}

/// `[model]` of the config file, as written: every key optional, unknown keys refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct FileModel {
    pub(super) base_url: Option<String>,
    pub(super) model: Option<String>,
    api_key: Option<ApiKey>,
    timeout_secs: Option<u64>,
    total_timeout_secs: Option<u64>,
    connect_timeout_secs: Option<u64>,
    max_retries: Option<u32>,
    retry_base_delay_ms: Option<u64>,
    stream: Option<bool>,
    max_tokens: Option<u32>,
    max_response_bytes: Option<u64>,
    tokenizer: Option<String>,
}

/// The config file as [`crate::config::file_path`] resolves it from the process
/// environment (`GROUNDWORK_CONFIG`, else `$XDG_CONFIG_HOME/groundwork/config.toml`).
pub fn default_config_path() -> Option<PathBuf> {
    Some(super::file_path(&crate::paths::process_env()))
}

impl ModelConfig {
    /// Loads the configuration. `path` is the config file (a missing file is not an
    /// error: defaults apply); `env` is the environment to read variables from. The
    /// whole file is read and checked (see [`super::Config::load`]).
    pub fn load(
        path: Option<&Path>,
        env: &HashMap<String, String>,
        overrides: &ModelOverrides,
    ) -> Result<ModelConfig, ConfigError> {
        super::Config::load(path, env, overrides).map(|c| c.model)
    }

    /// The file's `[model]` (from `path`, holding `text`) over the defaults, checked; a
    /// bad value is named with its file and line.
    pub(super) fn from_file(
        file: FileModel,
        path: &Path,
        text: &str,
    ) -> Result<ModelConfig, ConfigError> {
        let mut cfg = ModelConfig::default();
        let tokenizer = file.tokenizer.clone();
        cfg.apply_file(file);
        cfg.tokenizer = tokenizer.map(|t| TokenizerSetting::parse(&t, Some(path)));
        cfg.validate().map_err(|e| e.in_file(path, text))?;
        Ok(cfg)
    }

    /// Applies the environment, then `overrides`, and checks the result.
    pub(super) fn apply_env_and_flags(
        &mut self,
        env: &HashMap<String, String>,
        overrides: &ModelOverrides,
    ) -> Result<(), ConfigError> {
        let cfg = self;
        let non_empty = |k: &str| env.get(k).filter(|v| !v.trim().is_empty()).cloned();
        if let Some(v) = non_empty(ENV_MODEL_URL) {
            cfg.base_url = v;
        }
        if let Some(v) = non_empty(ENV_MODEL) {
            cfg.model = v;
        }
        if let Some(v) = non_empty(ENV_API_KEY) {
            cfg.api_key = Some(ApiKey::new(v));
        }
        if let Some(v) = &overrides.base_url {
            cfg.base_url = v.clone();
        }
        if let Some(v) = &overrides.model {
            cfg.model = v.clone();
        }
        if let Some(v) = &overrides.api_key {
            cfg.api_key = Some(v.clone());
        }
        if let Some(v) = overrides.timeout_secs {
            cfg.timeout_secs = v;
        }
        if let Some(v) = overrides.max_retries {
            cfg.max_retries = v;
        }
        if let Some(v) = overrides.stream {
            cfg.stream = v;
        }
        if let Some(v) = overrides.max_tokens {
            cfg.max_tokens = Some(v);
        }
        cfg.validate()
    }

    fn apply_file(&mut self, m: FileModel) {
        if let Some(v) = m.base_url {
            self.base_url = v;
        }
        if let Some(v) = m.model {
            self.model = v;
        }
        if let Some(v) = m.api_key {
            self.api_key = Some(v);
        }
        if let Some(v) = m.timeout_secs {
            self.timeout_secs = v;
        }
        if let Some(v) = m.connect_timeout_secs {
            self.connect_timeout_secs = v;
        }
        if let Some(v) = m.max_retries {
            self.max_retries = v;
        }
        if let Some(v) = m.retry_base_delay_ms {
            self.retry_base_delay_ms = v;
        }
        if let Some(v) = m.stream {
            self.stream = v;
        }
        if let Some(v) = m.total_timeout_secs {
            self.total_timeout_secs = Some(v);
        }
        if let Some(v) = m.max_tokens {
            self.max_tokens = Some(v);
        }
        if let Some(v) = m.max_response_bytes {
            self.max_response_bytes = v;
        }
    }

    /// Whether the values are usable (URLs, non-zero limits).
    fn validate(&self) -> Result<(), ConfigError> {
        super::check_http_url("model.base_url", &self.base_url)?;
        for (key, secs) in [
            ("model.timeout_secs", Some(self.timeout_secs)),
            (
                "model.connect_timeout_secs",
                Some(self.connect_timeout_secs),
            ),
            ("model.total_timeout_secs", self.total_timeout_secs),
        ] {
            if secs == Some(0) {
                return Err(ConfigError::Invalid {
                    key: key.into(),
                    message: "timeouts must be at least one second".into(),
                });
            }
        }
        if let Some(TokenizerSetting::File(p)) = &self.tokenizer
            && !p.is_file()
        {
            return Err(ConfigError::Invalid {
                key: "model.tokenizer".into(),
                message: format!(
                    "{} is not a file (a tokenizer.json, or one of {})",
                    p.display(),
                    TOKENIZER_ENCODINGS.join(", ")
                ),
            });
        }
        if self.max_tokens == Some(0) {
            return Err(ConfigError::Invalid {
                key: "model.max_tokens".into(),
                message: "must be at least 1".into(),
            });
        }
        if self.max_response_bytes == 0 {
            return Err(ConfigError::Invalid {
                key: "model.max_response_bytes".into(),
                message: "must be at least 1".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn precedence_file_env_flags() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(
            &path,
            "[model]\nbase_url = \"http://file/v1\"\nmodel = \"file-model\"\napi_key = \"sk-file\"\ntimeout_secs = 7\n",
        )
        .unwrap();
        let cfg = ModelConfig::load(Some(&path), &env(&[]), &ModelOverrides::default()).unwrap();
        assert_eq!(cfg.base_url, "http://file/v1");
        assert_eq!(cfg.model, "file-model");
        assert_eq!(cfg.api_key.as_ref().unwrap().expose(), "sk-file");
        assert_eq!(cfg.timeout_secs, 7);

        let e = env(&[
            (ENV_MODEL_URL, "http://env/v1"),
            (ENV_MODEL, "env-model"),
            (ENV_API_KEY, "sk-env"),
        ]);
        let cfg = ModelConfig::load(Some(&path), &e, &ModelOverrides::default()).unwrap();
        assert_eq!(cfg.base_url, "http://env/v1");
        assert_eq!(cfg.model, "env-model");
        assert_eq!(cfg.api_key.as_ref().unwrap().expose(), "sk-env");

        let o = ModelOverrides {
            model: Some("flag-model".into()),
            ..Default::default()
        };
        let cfg = ModelConfig::load(Some(&path), &e, &o).unwrap();
        assert_eq!(cfg.model, "flag-model");
        assert_eq!(cfg.base_url, "http://env/v1");
    }

    #[test]
    fn missing_file_gives_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = ModelConfig::load(
            Some(&dir.path().join("none.toml")),
            &env(&[]),
            &ModelOverrides::default(),
        )
        .unwrap();
        assert_eq!(cfg, ModelConfig::default());
    }

    #[test]
    fn corrupt_file_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        let mut f = std::fs::File::create(&path).unwrap();
        writeln!(f, "[model]\nmodel = \"ok\"\ntimeout_secs = \"soon\"").unwrap();
        let err =
            ModelConfig::load(Some(&path), &env(&[]), &ModelOverrides::default()).unwrap_err();
        let text = err.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains("line 3"), "{text}");
        assert!(text.contains("key `model.timeout_secs`"), "{text}");
    }

    #[test]
    fn a_value_out_of_range_names_file_line_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "[model]\nmodel = \"m\"\nbase_url = \"ftp://x\"\n").unwrap();
        let err = ModelConfig::load(Some(&path), &env(&[]), &ModelOverrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("key `model.base_url`"), "{err}");
        std::fs::write(&path, "[model]\ntimeout_secs = 0\n").unwrap();
        let err = ModelConfig::load(Some(&path), &env(&[]), &ModelOverrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 2") && err.contains("model.timeout_secs"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_api_key_line_never_shows_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        for text in [
            "[model]\napi_key = 987654321987\n",
            "[model]\napi_key = sk-unquoted-98765\n",
            "[model]\napi_key = [\"sk-in-array-98765\"]\n",
        ] {
            std::fs::write(&path, text).unwrap();
            let err = ModelConfig::load(Some(&path), &env(&[]), &ModelOverrides::default())
                .unwrap_err()
                .to_string();
            assert!(!err.contains("98765"), "{err}");
            assert!(err.contains("line 2"), "{err}");
        }
    }

    #[test]
    fn limits_from_file_and_flags() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(
            &path,
            "[model]\ntimeout_secs = 30\ntotal_timeout_secs = 900\nmax_tokens = 256\nmax_response_bytes = 1000\n",
        )
        .unwrap();
        let cfg = ModelConfig::load(Some(&path), &env(&[]), &ModelOverrides::default()).unwrap();
        assert_eq!(cfg.timeout_secs, 30);
        assert_eq!(cfg.total_timeout_secs, Some(900));
        assert_eq!(cfg.max_tokens, Some(256));
        assert_eq!(cfg.max_response_bytes, 1000);
        let o = ModelOverrides {
            timeout_secs: Some(5),
            max_tokens: Some(16),
            ..Default::default()
        };
        let cfg = ModelConfig::load(Some(&path), &env(&[]), &o).unwrap();
        assert_eq!((cfg.timeout_secs, cfg.max_tokens), (5, Some(16)));
        let defaults = ModelConfig::default();
        assert_eq!(defaults.total_timeout_secs, None);
        assert_eq!(defaults.max_tokens, None);
        assert_eq!(defaults.max_response_bytes, 8 * 1024 * 1024);

        std::fs::write(&path, "[model]\nmax_tokens = 0\n").unwrap();
        let err = ModelConfig::load(Some(&path), &env(&[]), &ModelOverrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("model.max_tokens"), "{err}");
    }

    #[test]
    fn api_key_is_redacted() {
        let key = ApiKey::new("sk-secret-123");
        let cfg = ModelConfig {
            api_key: Some(key.clone()),
            ..ModelConfig::default()
        };
        assert!(!format!("{cfg:?}").contains("sk-secret-123"));
        assert!(!format!("{key}").contains("sk-secret-123"));
    }
}
