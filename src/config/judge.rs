//! `[judge]`: the model that checks an answer's claims against what they cite
//! (`groundwork verify`, the workbench's `V`, `eval --verify`).
//!
//! ```toml
//! [judge]
//! base_url = "http://127.0.0.1:8081/v1"  # default: [model] base_url
//! model = "qwen3-8b"                      # default: the model the session was run with
//! api_key = "sk-..."                      # default: [model]'s key, on [model]'s endpoint only
//! ```
//!
//! Flags (`--judge-url`, `--judge-model`) win over the file. Every other setting
//! (timeouts, retries, streaming, `max_tokens`) is `[model]`'s. The answering model's API
//! key is never sent to a judge at another endpoint.

use serde::Deserialize;

use super::{ApiKey, ConfigError, ModelConfig};

/// `[judge]` as written: every key optional, unknown keys refused.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub struct JudgeConfig {
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key: Option<ApiKey>,
}

impl JudgeConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if let Some(u) = &self.base_url {
            super::check_http_url("judge.base_url", u)?;
        }
        if self.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
            return Err(ConfigError::Invalid {
                key: "judge.model".into(),
                message: "is empty".into(),
            });
        }
        Ok(())
    }

    /// The judge's endpoint settings: `model`'s, with the judge's endpoint, model and key
    /// laid over them; `url` and `name` (the flags) win, then the file; the model name
    /// falls back to `session_model` (the model the session was run with), then
    /// `model`'s.
    pub fn endpoint(
        &self,
        model: &ModelConfig,
        url: Option<&str>,
        name: Option<&str>,
        session_model: Option<&str>,
    ) -> Result<ModelConfig, ConfigError> {
        let mut cfg = model.clone();
        if let Some(u) = url.or(self.base_url.as_deref()) {
            super::check_http_url("judge.base_url", u)?;
            if u.trim_end_matches('/') != model.base_url.trim_end_matches('/') {
                cfg.api_key = None;
            }
            cfg.base_url = u.to_string();
        }
        if let Some(k) = &self.api_key {
            cfg.api_key = Some(k.clone());
        }
        cfg.model = name
            .or(self.model.as_deref())
            .or(session_model.filter(|m| !m.trim().is_empty()))
            .unwrap_or(&model.model)
            .to_string();
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judge_defaults_to_the_sessions_model_and_keeps_the_key_on_its_endpoint() {
        let model = ModelConfig {
            base_url: "http://127.0.0.1:8080/v1".into(),
            model: "default".into(),
            api_key: Some(ApiKey::new("sk-model")),
            ..ModelConfig::default()
        };
        let none = JudgeConfig::default();
        let j = none.endpoint(&model, None, None, Some("qwen3")).unwrap();
        assert_eq!(
            (j.base_url.as_str(), j.model.as_str()),
            (model.base_url.as_str(), "qwen3")
        );
        assert_eq!(j.api_key, model.api_key, "same endpoint, same key");
        let j = none.endpoint(&model, None, None, None).unwrap();
        assert_eq!(j.model, "default");
        // Another endpoint never gets the answering model's key.
        let j = none
            .endpoint(
                &model,
                Some("http://judge.example/v1"),
                Some("big"),
                Some("qwen3"),
            )
            .unwrap();
        assert_eq!(
            (j.base_url.as_str(), j.model.as_str()),
            ("http://judge.example/v1", "big")
        );
        assert_eq!(j.api_key, None);
        let file = JudgeConfig {
            base_url: Some("http://judge.example/v1".into()),
            model: Some("judge-8b".into()),
            api_key: Some(ApiKey::new("sk-judge")),
        };
        let j = file.endpoint(&model, None, None, Some("qwen3")).unwrap();
        assert_eq!(j.model, "judge-8b");
        assert_eq!(j.api_key, Some(ApiKey::new("sk-judge")));
        let e = none
            .endpoint(&model, Some("judge.example"), None, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("judge.base_url"), "{e}");
    }
}
