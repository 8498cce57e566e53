//! Finding a model when none is configured: the usual local OpenAI-compatible servers are
//! asked for `/v1/models` with a short timeout, and the first that answers is used.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::config::{ENV_MODEL, ENV_MODEL_URL, ModelConfig, ModelOverrides};

/// Where local servers listen by default, in the order they are preferred.
pub const LOCAL_SERVERS: &[(&str, &str)] = &[
    ("Ollama", "http://127.0.0.1:11434/v1"),
    ("llama.cpp", "http://127.0.0.1:8080/v1"),
    ("LM Studio", "http://127.0.0.1:1234/v1"),
    ("vLLM", "http://127.0.0.1:8000/v1"),
];

/// `GROUNDWORK_DISCOVER`: comma-separated base URLs to try instead of the usual local
/// servers (`off` or an empty value: try none).
pub const ENV_DISCOVER: &str = "GROUNDWORK_DISCOVER";

/// The servers to try: `GROUNDWORK_DISCOVER` when set, else [`LOCAL_SERVERS`].
pub fn candidates(env: &HashMap<String, String>) -> Vec<(String, String)> {
    match env.get(ENV_DISCOVER) {
        Some(v) => v
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty() && *u != "off")
            .map(|u| (u.to_string(), u.to_string()))
            .collect(),
        None => LOCAL_SERVERS
            .iter()
            .map(|(n, u)| (n.to_string(), u.to_string()))
            .collect(),
    }
}

/// The one-line hint shown when no model can be reached.
pub fn configure_hint() -> String {
    format!(
        "No model configured and none found at {}. Set one in one line: \
         {ENV_MODEL_URL}=http://HOST:PORT/v1 {ENV_MODEL}=NAME groundwork (or --model-url/--model, \
         or [model] base_url/model in the config file).",
        LOCAL_SERVERS
            .iter()
            .map(|(n, u)| format!("{n} {}", u.trim_start_matches("http://")))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// A server that answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub server: String,
    pub base_url: String,
    /// Model ids it lists.
    pub models: Vec<String>,
}

/// How the model was chosen.
#[derive(Debug, Clone)]
pub enum ModelChoice {
    /// From flags, environment or the config file.
    Configured(ModelConfig),
    /// Found by asking the local servers.
    Discovered(ModelConfig, Found),
    /// Nothing configured, nothing answered.
    None(String),
}

impl ModelChoice {
    pub fn config(&self) -> Option<&ModelConfig> {
        match self {
            ModelChoice::Configured(c) | ModelChoice::Discovered(c, _) => Some(c),
            ModelChoice::None(_) => None,
        }
    }

    /// For the status bar and stderr: `name @ url (found LM Studio)`.
    pub fn describe(&self) -> String {
        match self {
            ModelChoice::Configured(c) => format!("{} @ {}", c.model, c.base_url),
            ModelChoice::Discovered(c, f) => {
                format!("{} @ {} (found {})", c.model, c.base_url, f.server)
            }
            ModelChoice::None(_) => "none".into(),
        }
    }
}

/// Whether a model endpoint is set by flags, environment or the config file.
pub fn endpoint_configured(
    path: Option<&Path>,
    env: &HashMap<String, String>,
    overrides: &ModelOverrides,
) -> bool {
    if overrides.base_url.is_some() {
        return true;
    }
    if env.get(ENV_MODEL_URL).is_some_and(|v| !v.trim().is_empty()) {
        return true;
    }
    let Some(text) = path.and_then(|p| std::fs::read_to_string(p).ok()) else {
        return false;
    };
    toml::from_str::<toml::Value>(&text)
        .ok()
        .and_then(|v| v.get("model")?.get("base_url").cloned())
        .is_some()
}

/// Asks one server for its models.
async fn probe(client: &reqwest::Client, base_url: &str) -> Option<Vec<String>> {
    let url = format!("{}/models", base_url.trim_end_matches('/'));
    let resp = client.get(url).send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let body: Value = serde_json::from_slice(&resp.bytes().await.ok()?).ok()?;
    let data = body.get("data")?.as_array()?;
    Some(
        data.iter()
            .filter_map(|m| m.get("id").and_then(Value::as_str).map(String::from))
            .collect(),
    )
}

/// Asks every candidate at once; the first in `candidates` order that answers wins.
pub async fn discover(candidates: &[(String, String)], timeout: Duration) -> Option<Found> {
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .no_proxy()
        .build()
        .ok()?;
    let answers =
        futures::future::join_all(candidates.iter().map(|(_, url)| probe(&client, url))).await;
    candidates
        .iter()
        .zip(answers)
        .find_map(|((name, url), models)| {
            models.map(|models| Found {
                server: name.clone(),
                base_url: url.clone(),
                models,
            })
        })
}

/// The model to use: the configured one, else the first local server that answers (with
/// the configured model name if one was given, else the first model it lists).
pub async fn choose_model(
    path: Option<&Path>,
    env: &HashMap<String, String>,
    overrides: &ModelOverrides,
    candidates: &[(String, String)],
) -> Result<ModelChoice, super::config::ConfigError> {
    let config = ModelConfig::load(path, env, overrides)?;
    if endpoint_configured(path, env, overrides) {
        return Ok(ModelChoice::Configured(config));
    }
    let Some(found) = discover(candidates, Duration::from_millis(400)).await else {
        return Ok(ModelChoice::None(configure_hint()));
    };
    let name_given = overrides.model.is_some()
        || env.get(ENV_MODEL).is_some_and(|v| !v.trim().is_empty())
        || config.model != super::config::DEFAULT_MODEL;
    let mut config = config;
    config.base_url = found.base_url.clone();
    if !name_given && let Some(first) = found.models.first() {
        config.model = first.clone();
    }
    Ok(ModelChoice::Discovered(config, found))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_come_from_the_environment_when_set() {
        let mut env = HashMap::new();
        assert_eq!(candidates(&env).len(), LOCAL_SERVERS.len());
        env.insert(ENV_DISCOVER.into(), "off".into());
        assert!(candidates(&env).is_empty());
        env.insert(ENV_DISCOVER.into(), "http://a/v1, http://b/v1".into());
        assert_eq!(
            candidates(&env)
                .into_iter()
                .map(|c| c.1)
                .collect::<Vec<_>>(),
            ["http://a/v1", "http://b/v1"]
        );
    }

    #[test]
    fn the_hint_says_how_in_one_line() {
        let h = configure_hint();
        assert!(!h.contains('\n'));
        assert!(h.contains(ENV_MODEL_URL) && h.contains("11434"));
    }
}
