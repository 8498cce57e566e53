//! `[search.reranker]`: a reranker speaking the common rerank HTTP API (vLLM, llama.cpp's
//! server with `--reranking`, Cohere, Jina, Voyage): `POST {url}/rerank`.
//!
//! ```toml
//! [search.reranker]
//! url = "http://127.0.0.1:8000/v1"   # the request goes to {url}/rerank
//! model = "bge-reranker-v2-m3"       # optional; llama.cpp ignores it (default "default")
//! timeout_secs = 30                  # the whole rerank request
//! api_key = "..."                    # optional; GROUNDWORK_RERANKER_API_KEY is the usual place
//! ```
//!
//! Precedence, lowest first: the file, the environment (`GROUNDWORK_RERANKER_URL`,
//! `GROUNDWORK_RERANKER_MODEL`, `GROUNDWORK_RERANKER_API_KEY`), then the flags
//! (`--reranker-url`, `--reranker-model`). The key is an [`ApiKey`]: never serialized,
//! never printed.

use serde::{Deserialize, Serialize};

use super::{ApiKey, ConfigError};

/// Environment variable naming the reranker's base URL.
pub const ENV_RERANKER_URL: &str = "GROUNDWORK_RERANKER_URL";
/// Environment variable naming the reranker model.
pub const ENV_RERANKER_MODEL: &str = "GROUNDWORK_RERANKER_MODEL";
/// Environment variable holding the reranker's API key.
pub const ENV_RERANKER_API_KEY: &str = "GROUNDWORK_RERANKER_API_KEY";

/// The model name sent when none is configured (llama.cpp's server ignores it).
pub const DEFAULT_RERANKER_MODEL: &str = "default";
/// Default `timeout_secs`.
pub const DEFAULT_RERANKER_TIMEOUT_SECS: u64 = 30;

/// A configured reranker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerankerConfig {
    /// Base URL; the request goes to `{url}/rerank`.
    pub url: String,
    /// Model name sent with each request.
    #[serde(default = "default_model")]
    pub model: String,
    /// Limit for the whole request (connecting included).
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// The key, sent as a bearer token; never serialized.
    #[serde(skip)]
    pub api_key: Option<ApiKey>,
}

fn default_model() -> String {
    DEFAULT_RERANKER_MODEL.to_string()
}

fn default_timeout() -> u64 {
    DEFAULT_RERANKER_TIMEOUT_SECS
}

impl RerankerConfig {
    /// A reranker at `url` with the defaults.
    pub fn new(url: impl Into<String>) -> Self {
        RerankerConfig {
            url: url.into(),
            model: default_model(),
            timeout_secs: default_timeout(),
            api_key: None,
        }
    }

    /// Whether the values are usable.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        super::check_http_url("search.reranker.url", &self.url)?;
        if self.model.trim().is_empty() {
            return Err(ConfigError::Invalid {
                key: "search.reranker.model".into(),
                message: "must not be empty".into(),
            });
        }
        if self.timeout_secs == 0 {
            return Err(ConfigError::Invalid {
                key: "search.reranker.timeout_secs".into(),
                message: "timeouts must be at least one second".into(),
            });
        }
        Ok(())
    }
}

/// `[search.reranker]` as written: unknown keys refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct FileReranker {
    url: String,
    model: Option<String>,
    timeout_secs: Option<u64>,
    api_key: Option<ApiKey>,
}

impl FileReranker {
    pub(super) fn into_config(self) -> RerankerConfig {
        let mut c = RerankerConfig::new(self.url);
        if let Some(m) = self.model {
            c.model = m;
        }
        if let Some(t) = self.timeout_secs {
            c.timeout_secs = t;
        }
        c.api_key = self.api_key;
        c
    }
}

/// Lays the environment and the flags over the file's reranker. A model or key without
/// any URL is refused: it would silently do nothing.
pub(super) fn apply_env_and_flags(
    file: Option<RerankerConfig>,
    env: &crate::paths::Env,
    url_flag: Option<&str>,
    model_flag: Option<&str>,
) -> Result<Option<RerankerConfig>, ConfigError> {
    let non_empty = |k: &str| env.get(k).filter(|v| !v.trim().is_empty()).cloned();
    let url = url_flag
        .map(str::to_string)
        .or_else(|| non_empty(ENV_RERANKER_URL));
    let model = model_flag
        .map(str::to_string)
        .or_else(|| non_empty(ENV_RERANKER_MODEL));
    let mut cfg = match (file, url) {
        (Some(mut c), Some(u)) => {
            c.url = u;
            c
        }
        (Some(c), None) => c,
        (None, Some(u)) => RerankerConfig::new(u),
        (None, None) => {
            if model.is_some() {
                return Err(ConfigError::Invalid {
                    key: "search.reranker.model".into(),
                    message: "a reranker model needs a reranker URL (--reranker-url, \
                              GROUNDWORK_RERANKER_URL or [search.reranker] url)"
                        .into(),
                });
            }
            return Ok(None);
        }
    };
    if let Some(m) = model {
        cfg.model = m;
    }
    if let Some(k) = non_empty(ENV_RERANKER_API_KEY) {
        cfg.api_key = Some(ApiKey::new(k));
    }
    cfg.validate()?;
    Ok(Some(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> crate::paths::Env {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn flags_over_env_over_file() {
        let file = Some(RerankerConfig::new("http://file/v1"));
        let e = env(&[
            (ENV_RERANKER_URL, "http://env/v1"),
            (ENV_RERANKER_API_KEY, "rk-env-secret"),
        ]);
        let c = apply_env_and_flags(file.clone(), &e, None, None)
            .unwrap()
            .unwrap();
        assert_eq!(c.url, "http://env/v1");
        assert_eq!(c.model, DEFAULT_RERANKER_MODEL);
        assert_eq!(c.api_key.as_ref().unwrap().expose(), "rk-env-secret");
        assert!(!format!("{c:?}").contains("rk-env-secret"));
        assert!(!serde_json::to_string(&c).unwrap().contains("rk-env-secret"));
        let c = apply_env_and_flags(file, &e, Some("http://flag/v1"), Some("bge"))
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.url.as_str(), c.model.as_str()),
            ("http://flag/v1", "bge")
        );
        assert!(matches!(
            apply_env_and_flags(None, &env(&[]), None, None),
            Ok(None)
        ));
    }

    #[test]
    fn a_model_without_a_url_and_a_bad_url_are_refused() {
        let err = apply_env_and_flags(None, &env(&[]), None, Some("bge"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs a reranker URL"), "{err}");
        let err = apply_env_and_flags(None, &env(&[]), Some("localhost:8000"), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not an http(s) URL"), "{err}");
    }
}
