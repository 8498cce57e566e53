//! Finding a model when none is configured: the usual local OpenAI-compatible servers are
//! asked for `/v1/models` with a short timeout, and the first that answers is used. A server
//! that is still starting (HTTP 503, llama.cpp's "Loading model") is waited for, up to
//! [`DEFAULT_WAIT`] (`GROUNDWORK_DISCOVER_WAIT` seconds), and then used or named as loading.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::config::model::{ENV_MODEL, ENV_MODEL_URL};
use crate::config::{Config, ConfigError, ModelConfig, ModelOverrides};

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

/// `GROUNDWORK_DISCOVER_WAIT`: how many seconds to wait for a server that answers 503
/// while it loads its model (default [`DEFAULT_WAIT`]; 0: don't wait).
pub const ENV_DISCOVER_WAIT: &str = "GROUNDWORK_DISCOVER_WAIT";

/// How long a loading server is waited for unless `GROUNDWORK_DISCOVER_WAIT` says otherwise.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// Time between two probes of a loading server.
const POLL_EVERY: Duration = Duration::from_millis(250);

/// The wait for a loading server: `GROUNDWORK_DISCOVER_WAIT` seconds (fractions allowed),
/// else [`DEFAULT_WAIT`]. An unreadable value is ignored.
pub fn wait_budget(env: &HashMap<String, String>) -> Duration {
    env.get(ENV_DISCOVER_WAIT)
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(DEFAULT_WAIT)
}

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

/// How a candidate is named in messages: `llama.cpp on 127.0.0.1:8080` for a known server,
/// the URL itself for one from `GROUNDWORK_DISCOVER`.
fn who(name: &str, url: &str) -> String {
    let bare = url.trim_start_matches("http://");
    if name == url {
        bare.to_string()
    } else {
        format!("{name} on {}", bare.trim_end_matches("/v1"))
    }
}

/// The one-line hint shown when no model can be reached, naming the usual local servers.
pub fn configure_hint() -> String {
    let defaults: Vec<(String, String)> = LOCAL_SERVERS
        .iter()
        .map(|(n, u)| (n.to_string(), u.to_string()))
        .collect();
    configure_hint_for(&defaults)
}

/// The one-line hint shown when no model can be reached; it names the servers that were
/// probed (`candidates`), or says that discovery is off when there were none.
pub fn configure_hint_for(candidates: &[(String, String)]) -> String {
    let probed = if candidates.is_empty() {
        format!("model discovery is off ({ENV_DISCOVER})")
    } else {
        format!(
            "none found at {}",
            candidates
                .iter()
                .map(|(n, u)| {
                    let bare = u.trim_start_matches("http://");
                    if n == u {
                        bare.to_string()
                    } else {
                        format!("{n} {bare}")
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "No model configured and {probed}. Set one in one line: \
         {ENV_MODEL_URL}=http://HOST:PORT/v1 {ENV_MODEL}=NAME groundwork (or --model-url/--model, \
         or [model] base_url/model in the config file)."
    )
}

/// The one-line message when the only servers found were still loading after `waited`.
pub fn loading_message(loading: &[Loading], waited: Duration) -> String {
    let names = loading
        .iter()
        .map(|l| who(&l.server, &l.base_url))
        .collect::<Vec<_>>()
        .join(", ");
    let verb = if loading.len() == 1 { "is" } else { "are" };
    let said = loading
        .first()
        .map(|l| format!("HTTP 503 \"{}\"", l.message))
        .unwrap_or_default();
    format!(
        "{names} {verb} loading the model (still {said} after {} s); ask again when it is \
         ready, or wait longer with {ENV_DISCOVER_WAIT}=SECONDS.",
        secs(waited)
    )
}

/// `30`, `0.5`: seconds as a person writes them.
fn secs(d: Duration) -> String {
    let s = (d.as_secs_f64() * 10.0).round() / 10.0;
    format!("{s}")
}

/// A server that answered 503 (still starting) until the wait ran out.
#[derive(Debug, Clone, PartialEq)]
pub struct Loading {
    pub server: String,
    pub base_url: String,
    /// The server's own words (llama.cpp: `Loading model`).
    pub message: String,
}

/// What asking the candidates found.
#[derive(Debug, Clone, PartialEq)]
pub enum Discovery {
    Found(Found),
    /// Nothing ready; these were still loading when the wait ran out.
    Loading(Vec<Loading>),
    Nothing,
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

/// One server's answer to `GET {base_url}/models`.
#[derive(Debug)]
enum Probe {
    Ready(Vec<String>),
    /// HTTP 503: starting up; the server's message.
    Loading(String),
    Absent,
}

/// Asks one server for its models.
async fn probe(client: &reqwest::Client, base_url: &str) -> Probe {
    let url = format!("{}/models", base_url.trim_end_matches('/'));
    let Ok(resp) = client.get(url).send().await else {
        return Probe::Absent;
    };
    let status = resp.status();
    let body = resp.bytes().await.unwrap_or_default();
    if status == reqwest::StatusCode::SERVICE_UNAVAILABLE {
        return Probe::Loading(unavailable_message(&body));
    }
    if !status.is_success() {
        return Probe::Absent;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return Probe::Absent;
    };
    match body.get("data").and_then(Value::as_array) {
        Some(data) => Probe::Ready(
            data.iter()
                .filter_map(|m| m.get("id").and_then(Value::as_str).map(String::from))
                .collect(),
        ),
        None => Probe::Absent,
    }
}

/// The message of a 503 body: `error.message` (llama.cpp), `error` as a string, or the
/// first line of the text, cut to 80 characters.
fn unavailable_message(body: &[u8]) -> String {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let from_json = json.as_ref().and_then(|v| {
        let e = v.get("error")?;
        e.get("message")
            .and_then(Value::as_str)
            .or_else(|| e.as_str())
            .map(String::from)
    });
    let text = from_json.unwrap_or_else(|| {
        String::from_utf8_lossy(body)
            .lines()
            .next()
            .unwrap_or("")
            .to_string()
    });
    let text: String = text.chars().filter(|c| !c.is_control()).take(80).collect();
    if text.trim().is_empty() {
        "Service Unavailable".into()
    } else {
        text.trim().to_string()
    }
}

/// Asks every candidate at once; the first in `candidates` order that answers wins. A
/// server that is loading counts as absent here; see [`discover_waiting`].
pub async fn discover(candidates: &[(String, String)], timeout: Duration) -> Option<Found> {
    match discover_waiting(candidates, timeout, Duration::ZERO, &|_| {}).await {
        Discovery::Found(f) => Some(f),
        _ => None,
    }
}

/// Asks every candidate at once; the first in `candidates` order that is ready wins. When
/// none is ready but some answer 503 (loading), those are asked again every 250 ms for up to
/// `wait`; `on_wait` is told once, in one line, who is being waited for.
pub async fn discover_waiting(
    candidates: &[(String, String)],
    timeout: Duration,
    wait: Duration,
    on_wait: &(dyn Fn(&str) + Sync),
) -> Discovery {
    let Ok(client) = crate::http::builder_for(candidates.iter().map(|(_, u)| u.as_str()))
        .timeout(timeout)
        .connect_timeout(timeout)
        .no_proxy()
        .build()
    else {
        return Discovery::Nothing;
    };
    let started = Instant::now();
    let mut answers =
        futures::future::join_all(candidates.iter().map(|(_, url)| probe(&client, url))).await;
    let mut announced = false;
    loop {
        let ready = candidates
            .iter()
            .zip(answers.iter())
            .find_map(|((n, u), a)| match a {
                Probe::Ready(models) => Some(Found {
                    server: n.clone(),
                    base_url: u.clone(),
                    models: models.clone(),
                }),
                _ => None,
            });
        if let Some(found) = ready {
            return Discovery::Found(found);
        }
        let loading: Vec<Loading> = candidates
            .iter()
            .zip(answers.iter())
            .filter_map(|((n, u), a)| match a {
                Probe::Loading(m) => Some(Loading {
                    server: n.clone(),
                    base_url: u.clone(),
                    message: m.clone(),
                }),
                _ => None,
            })
            .collect();
        if loading.is_empty() {
            return Discovery::Nothing;
        }
        let elapsed = started.elapsed();
        if elapsed >= wait {
            return Discovery::Loading(loading);
        }
        if !announced {
            announced = true;
            let names = loading
                .iter()
                .map(|l| who(&l.server, &l.base_url))
                .collect::<Vec<_>>()
                .join(", ");
            let verb = if loading.len() == 1 { "is" } else { "are" };
            on_wait(&format!(
                "{names} {verb} loading the model; waiting up to {} s",
                secs(wait)
            ));
        }
        tokio::time::sleep(POLL_EVERY.min(wait - elapsed)).await;
        answers = futures::future::join_all(candidates.iter().zip(answers.iter()).map(
            |((_, url), a)| {
                let again = matches!(a, Probe::Loading(_));
                let client = &client;
                async move {
                    if again {
                        probe(client, url).await
                    } else {
                        Probe::Absent
                    }
                }
            },
        ))
        .await;
    }
}

/// The model to use: the configured one, else the first local server that answers (with
/// the configured model name if one was given, else the first model it lists). A loading
/// server is waited for as long as [`wait_budget`] says.
pub async fn choose_model(
    path: Option<&Path>,
    env: &HashMap<String, String>,
    overrides: &ModelOverrides,
    candidates: &[(String, String)],
) -> Result<ModelChoice, ConfigError> {
    choose_model_with(path, env, overrides, candidates, &|_| {}).await
}

/// [`choose_model`], telling `on_wait` (one line) when it waits for a loading server.
pub async fn choose_model_with(
    path: Option<&Path>,
    env: &HashMap<String, String>,
    overrides: &ModelOverrides,
    candidates: &[(String, String)],
    on_wait: &(dyn Fn(&str) + Sync),
) -> Result<ModelChoice, ConfigError> {
    let config = Config::load(path, env, overrides)?;
    Ok(choose_model_for(&config, env, candidates, on_wait).await)
}

/// [`choose_model_with`] for an already loaded configuration.
pub async fn choose_model_for(
    config: &Config,
    env: &HashMap<String, String>,
    candidates: &[(String, String)],
    on_wait: &(dyn Fn(&str) + Sync),
) -> ModelChoice {
    if config.endpoint_named {
        return ModelChoice::Configured(config.model.clone());
    }
    let wait = wait_budget(env);
    let found = match discover_waiting(candidates, Duration::from_millis(400), wait, on_wait).await
    {
        Discovery::Found(f) => f,
        Discovery::Loading(l) => return ModelChoice::None(loading_message(&l, wait)),
        Discovery::Nothing => return ModelChoice::None(configure_hint_for(candidates)),
    };
    let mut model = config.model.clone();
    model.base_url = found.base_url.clone();
    if !config.model_named
        && let Some(first) = found.models.first()
    {
        model.model = first.clone();
    }
    ModelChoice::Discovered(model, found)
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
        assert_eq!(h, configure_hint_for(&candidates(&HashMap::new())));
        assert!(!h.contains('\n'));
        assert!(h.contains(ENV_MODEL_URL) && h.contains("11434"), "{h}");
        assert!(h.contains("Ollama 127.0.0.1:11434/v1"), "{h}");
    }

    #[test]
    fn the_hint_names_the_servers_probed() {
        let env = HashMap::from([(
            ENV_DISCOVER.to_string(),
            "http://127.0.0.1:5001/v1,http://127.0.0.1:5002/v1".to_string(),
        )]);
        let h = configure_hint_for(&candidates(&env));
        assert!(
            h.contains("none found at 127.0.0.1:5001/v1, 127.0.0.1:5002/v1."),
            "{h}"
        );
        for (_, default) in LOCAL_SERVERS {
            let port = default.rsplit(':').next().unwrap();
            assert!(!h.contains(port), "{h}");
        }
        let off = HashMap::from([(ENV_DISCOVER.to_string(), "off".to_string())]);
        let h = configure_hint_for(&candidates(&off));
        assert!(
            h.contains("model discovery is off (GROUNDWORK_DISCOVER)"),
            "{h}"
        );
        assert!(!h.contains("11434"), "{h}");
    }

    #[test]
    fn the_wait_comes_from_the_environment() {
        let mut env = HashMap::new();
        assert_eq!(wait_budget(&env), DEFAULT_WAIT);
        env.insert(ENV_DISCOVER_WAIT.into(), "2.5".into());
        assert_eq!(wait_budget(&env), Duration::from_millis(2500));
        env.insert(ENV_DISCOVER_WAIT.into(), "0".into());
        assert_eq!(wait_budget(&env), Duration::ZERO);
        env.insert(ENV_DISCOVER_WAIT.into(), "soon".into());
        assert_eq!(wait_budget(&env), DEFAULT_WAIT);
    }

    #[test]
    fn a_loading_server_is_named_with_its_words() {
        let l = [Loading {
            server: "llama.cpp".into(),
            base_url: "http://127.0.0.1:8080/v1".into(),
            message: unavailable_message(
                br#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#,
            ),
        }];
        let m = loading_message(&l, Duration::from_secs(30));
        assert!(
            m.starts_with("llama.cpp on 127.0.0.1:8080 is loading the model"),
            "{m}"
        );
        assert!(m.contains("HTTP 503 \"Loading model\" after 30 s"), "{m}");
        assert!(!m.contains('\n'));
        assert_eq!(unavailable_message(b"busy\nmore"), "busy");
        assert_eq!(unavailable_message(b""), "Service Unavailable");
        assert_eq!(
            unavailable_message(br#"{"error":"warming up"}"#),
            "warming up"
        );
    }
}
