//! haiku.rag's own configuration file (`haiku.rag.yaml`), found and read as haiku.rag
//! 0.101 finds and reads it, for the one thing Groundwork needs from it: where the
//! embedder a database records is served, and its key. Since haiku.rag 0.82 a database
//! records only the embedder's provider, name and dimension; its endpoint lives in the
//! user's configuration.
//!
//! The file is `HAIKU_RAG_CONFIG_PATH` when set (it must exist), else `./haiku.rag.yaml`,
//! else `haiku.rag.yaml` in haiku.rag's data directory (`~/.local/share/haiku.rag` on
//! Linux, `~/Library/Application Support/haiku.rag` on macOS). `${VAR}` and
//! `${VAR:-default}` in its string values are expanded from the environment (`$$` is a
//! dollar; `${HAIKU_RAG_CONFIG_DIR}` is the file's folder), as haiku.rag does. Only
//! `embeddings.model` and `providers.ollama.base_url` are read; every other key is left
//! to haiku.rag. A file that is not YAML, or a value of the wrong type there, is one line
//! naming the file and the line.
//!
//! The endpoint applies only to the embedder the file configures: the same provider and
//! name as the database records (haiku.rag refuses a database whose embedder differs).
//! Per provider, as haiku.rag's `get_embedder`: `ollama` at the model's `base_url`, else
//! `providers.ollama.base_url`, else `OLLAMA_BASE_URL`, else `http://localhost:11434`
//! (its OpenAI API under `/v1`); `vllm` at the model's `base_url` (default
//! `http://localhost:8000/v1`, `/v1` added); `openai` (LM Studio, llama.cpp, any
//! OpenAI-compatible server) at the model's `base_url`.

use std::path::{Path, PathBuf};

use serde_yaml_ng::Value;

use super::{ApiKey, EmbedderSpec};
use crate::paths::Env;

/// The environment variable haiku.rag reads the file's path from.
pub const ENV_PATH: &str = "HAIKU_RAG_CONFIG_PATH";
/// The file's name.
pub const FILE_NAME: &str = "haiku.rag.yaml";

/// Why haiku.rag's configuration could not be used, in one line.
#[derive(Debug, thiserror::Error)]
pub enum HaikuConfigError {
    #[error("{ENV_PATH} names {0}, which does not exist")]
    Missing(PathBuf),
    #[error("cannot read haiku.rag's configuration {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("invalid haiku.rag configuration {path}{at}: {message}")]
    Invalid {
        path: PathBuf,
        /// `, line N` when known.
        at: String,
        message: String,
    },
}

/// What Groundwork reads of a `haiku.rag.yaml`.
#[derive(Debug, Clone)]
pub struct HaikuConfig {
    /// The file.
    pub path: PathBuf,
    /// `embeddings.model.provider` (haiku.rag's default: `ollama`).
    pub provider: String,
    /// `embeddings.model.name` (default: `qwen3-embedding:4b`).
    pub name: String,
    base_url: Option<String>,
    api_key: Option<ApiKey>,
    ollama_base_url: Option<String>,
}

/// Where an embedder is served, from haiku.rag's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    pub base_url: String,
    pub api_key: Option<ApiKey>,
    /// The file it came from.
    pub from: PathBuf,
}

/// The file haiku.rag would read, if any: `HAIKU_RAG_CONFIG_PATH` (which must exist),
/// `cwd/haiku.rag.yaml`, then the data directory's.
pub fn find(env: &Env, cwd: &Path) -> Result<Option<PathBuf>, HaikuConfigError> {
    if let Some(p) = env.get(ENV_PATH).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(crate::paths::expand_tilde(p, env));
        return if p.exists() {
            Ok(Some(p))
        } else {
            Err(HaikuConfigError::Missing(p))
        };
    }
    let here = cwd.join(FILE_NAME);
    if here.exists() {
        return Ok(Some(here));
    }
    let Some(home) = env.get("HOME").filter(|h| !h.is_empty()) else {
        return Ok(None);
    };
    let data = if cfg!(target_os = "macos") {
        Path::new(home).join("Library/Application Support/haiku.rag")
    } else {
        Path::new(home).join(".local/share/haiku.rag")
    };
    let there = data.join(FILE_NAME);
    Ok(there.exists().then_some(there))
}

impl HaikuConfig {
    /// Reads `path`.
    pub fn load(path: &Path, env: &Env) -> Result<HaikuConfig, HaikuConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| HaikuConfigError::Read {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Self::parse(&text, path, env)
    }

    /// Reads `text`, the contents of the file `path`.
    pub fn parse(text: &str, path: &Path, env: &Env) -> Result<HaikuConfig, HaikuConfigError> {
        let invalid = |at: String, message: String| HaikuConfigError::Invalid {
            path: path.to_path_buf(),
            at,
            message,
        };
        let doc: Value = serde_yaml_ng::from_str(text).map_err(|e| {
            let at = e
                .location()
                .map(|l| format!(", line {}", l.line()))
                .unwrap_or_default();
            // The parser's words without its own position (given above).
            let message = e.to_string();
            let message = message
                .split(" at line ")
                .next()
                .unwrap_or(&message)
                .to_string();
            invalid(at, message)
        })?;
        let dir = path
            .canonicalize()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        let reserved = dir.to_string_lossy().into_owned();
        let section = |keys: &[&str]| -> Option<Value> {
            let mut v = &doc;
            for k in keys {
                v = v.get(*k)?;
            }
            Some(v.clone())
        };
        // A string (or nothing) under `keys`; anything else names the key and its line.
        let string_at = |keys: &[&str]| -> Result<Option<String>, HaikuConfigError> {
            match section(keys) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(v)) => Ok(Some(v)),
                Some(other) => {
                    let kind = match other {
                        Value::Bool(_) => "a boolean",
                        Value::Number(_) => "a number",
                        Value::Sequence(_) => "a list",
                        Value::Mapping(_) => "a mapping",
                        _ => "something else",
                    };
                    let last = keys.last().copied().unwrap_or_default();
                    Err(invalid(
                        line_of(text, last)
                            .map(|l| format!(", line {l}"))
                            .unwrap_or_default(),
                        format!("{}: expected a string, found {kind}", keys.join(".")),
                    ))
                }
            }
        };
        let model = |key: &str| string_at(&["embeddings", "model", key]);
        let (provider, name, base_url, api_key) = (
            model("provider")?,
            model("name")?,
            model("base_url")?,
            model("api_key")?,
        );
        let ollama = string_at(&["providers", "ollama", "base_url"])?;
        let expand = |s: Option<String>, key: &str| -> Result<Option<String>, HaikuConfigError> {
            s.map(|s| {
                expand_vars(&s, env, &reserved).map_err(|var| {
                    invalid(
                        line_of(text, key).map(|l| format!(", line {l}")).unwrap_or_default(),
                        format!(
                            "{key} references the unset or empty environment variable ${{{var}}} (set it, or write ${{{var}:-default}})"
                        ),
                    )
                })
            })
            .transpose()
        };
        Ok(HaikuConfig {
            path: path.to_path_buf(),
            provider: expand(provider, "provider")?.unwrap_or_else(|| "ollama".into()),
            name: expand(name, "name")?.unwrap_or_else(|| "qwen3-embedding:4b".into()),
            base_url: expand(base_url, "base_url")?.filter(|u| !u.is_empty()),
            api_key: expand(api_key, "api_key")?
                .filter(|k| !k.is_empty())
                .map(ApiKey::new),
            ollama_base_url: expand(ollama, "base_url")?.filter(|u| !u.is_empty()),
        })
    }

    /// Where `spec` (the embedder a database records) is served, by this file: none when
    /// the file configures another embedder, or names no endpoint for it.
    pub fn endpoint_for(&self, spec: &EmbedderSpec, env: &Env) -> Option<Endpoint> {
        if self.provider != spec.provider || self.name != spec.name {
            return None;
        }
        let with_v1 = |u: &str| {
            let u = u.trim_end_matches('/');
            if u.ends_with("/v1") {
                u.to_string()
            } else {
                format!("{u}/v1")
            }
        };
        let base_url = match self.provider.as_str() {
            "ollama" => with_v1(
                self.base_url
                    .as_deref()
                    .or(self.ollama_base_url.as_deref())
                    .or(env
                        .get("OLLAMA_BASE_URL")
                        .map(String::as_str)
                        .filter(|u| !u.is_empty()))
                    .unwrap_or("http://localhost:11434"),
            ),
            "vllm" => with_v1(
                self.base_url
                    .as_deref()
                    .unwrap_or("http://localhost:8000/v1"),
            ),
            "openai" | "lm_studio" => self.base_url.clone()?,
            _ => return None,
        };
        Some(Endpoint {
            base_url,
            api_key: self.api_key.clone(),
            from: self.path.clone(),
        })
    }
}

/// `s` with `${VAR}`, `${VAR:-default}` and `$$` expanded (`HAIKU_RAG_CONFIG_DIR` is
/// `config_dir`); `Err(VAR)` for a variable that is unset or empty without a default.
fn expand_vars(s: &str, env: &Env, config_dir: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$$") {
            out.push('$');
            rest = after;
            continue;
        }
        let parsed = tail.strip_prefix("${").and_then(|t| {
            let close = t.find('}')?;
            let inner = &t[..close];
            let (name, default) = match inner.split_once(":-") {
                Some((n, d)) => (n, Some(d)),
                None => (inner, None),
            };
            let valid = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            valid.then_some((name, default, close))
        });
        let Some((name, default, close)) = parsed else {
            // Not a reference: a lone dollar stays.
            out.push('$');
            rest = &tail[1..];
            continue;
        };
        let value = if name == "HAIKU_RAG_CONFIG_DIR" {
            config_dir.to_string()
        } else {
            match (env.get(name).filter(|v| !v.is_empty()), default) {
                (Some(v), _) => v.clone(),
                (None, Some(d)) => d.to_string(),
                (None, None) => return Err(name.to_string()),
            }
        };
        out.push_str(&value);
        rest = &tail[2 + close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The first line (1-based) where `key:` appears.
fn line_of(text: &str, key: &str) -> Option<usize> {
    let pat = format!("{key}:");
    text.lines()
        .position(|l| l.trim_start().starts_with(&pat))
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::paths::env_of as env;

    fn spec(provider: &str, name: &str) -> EmbedderSpec {
        EmbedderSpec {
            provider: provider.into(),
            name: name.into(),
            vector_dim: 64,
            base_url: None,
        }
    }

    #[test]
    fn the_file_is_found_where_haiku_rag_looks() {
        let dir = tempfile::tempdir().unwrap();
        let (home, cwd) = (dir.path().join("home"), dir.path().join("work"));
        std::fs::create_dir_all(home.join(".local/share/haiku.rag")).unwrap();
        std::fs::create_dir_all(&cwd).unwrap();
        let e = env(&[("HOME", home.to_str().unwrap())]);
        assert_eq!(find(&e, &cwd).unwrap(), None);
        let user = home.join(".local/share/haiku.rag/haiku.rag.yaml");
        std::fs::write(&user, "").unwrap();
        assert_eq!(find(&e, &cwd).unwrap(), Some(user.clone()));
        std::fs::write(cwd.join(FILE_NAME), "").unwrap();
        assert_eq!(find(&e, &cwd).unwrap(), Some(cwd.join(FILE_NAME)));
        let mut named = e.clone();
        named.insert(ENV_PATH.into(), user.to_string_lossy().into_owned());
        assert_eq!(find(&named, &cwd).unwrap(), Some(user));
        named.insert(ENV_PATH.into(), "/nowhere/h.yaml".into());
        assert_eq!(
            find(&named, &cwd).unwrap_err().to_string(),
            "HAIKU_RAG_CONFIG_PATH names /nowhere/h.yaml, which does not exist"
        );
    }

    #[test]
    fn the_endpoint_is_resolved_per_provider_as_haiku_rag_does() {
        let p = Path::new("/cfg/haiku.rag.yaml");
        let e = env(&[("EMBED_HOST", "gpu1"), ("EMBED_KEY", "sk-embed")]);
        let c = HaikuConfig::parse(
            "embeddings:\n  model:\n    provider: openai\n    name: hashembed-64\n    vector_dim: 64\n    \
             base_url: http://${EMBED_HOST}:${EMBED_PORT:-8081}/v1\n    api_key: ${EMBED_KEY}\n\
             qa:\n  model: {provider: ollama, name: qwen3}\nunknown_section: [1, 2]\n",
            p,
            &e,
        )
        .unwrap();
        let ep = c.endpoint_for(&spec("openai", "hashembed-64"), &e).unwrap();
        assert_eq!(ep.base_url, "http://gpu1:8081/v1");
        assert_eq!(ep.api_key, Some(ApiKey::new("sk-embed")));
        assert_eq!(ep.from, p);
        // Another embedder than the database's: nothing from this file.
        assert_eq!(c.endpoint_for(&spec("openai", "other"), &e), None);
        assert_eq!(c.endpoint_for(&spec("ollama", "hashembed-64"), &e), None);

        // Ollama: the model's URL, else providers.ollama, else OLLAMA_BASE_URL, else local.
        let ollama = |yaml: &str, e: &Env| {
            HaikuConfig::parse(yaml, p, e)
                .unwrap()
                .endpoint_for(&spec("ollama", "qwen3-embedding:4b"), e)
                .unwrap()
                .base_url
        };
        assert_eq!(ollama("", &env(&[])), "http://localhost:11434/v1");
        assert_eq!(
            ollama("", &env(&[("OLLAMA_BASE_URL", "http://box:11434/")])),
            "http://box:11434/v1"
        );
        assert_eq!(
            ollama(
                "providers:\n  ollama:\n    base_url: http://p:1\n",
                &env(&[])
            ),
            "http://p:1/v1"
        );
        assert_eq!(
            ollama(
                "providers: {ollama: {base_url: 'http://p:1'}}\nembeddings: {model: {base_url: 'http://m:2/v1'}}\n",
                &env(&[])
            ),
            "http://m:2/v1"
        );
        let vllm = HaikuConfig::parse(
            "embeddings: {model: {provider: vllm, name: e5, base_url: 'http://v:9'}}",
            p,
            &env(&[]),
        )
        .unwrap();
        assert_eq!(
            vllm.endpoint_for(&spec("vllm", "e5"), &env(&[]))
                .unwrap()
                .base_url,
            "http://v:9/v1"
        );
    }

    #[test]
    fn a_bad_file_is_one_line_naming_it_and_the_line() {
        let p = Path::new("/cfg/haiku.rag.yaml");
        let e = env(&[]);
        let err = |yaml: &str| HaikuConfig::parse(yaml, p, &e).unwrap_err().to_string();
        let e1 = err("embeddings:\n  model: [unclosed\n");
        assert!(
            e1.starts_with("invalid haiku.rag configuration /cfg/haiku.rag.yaml, line "),
            "{e1}"
        );
        assert!(!e1.contains('\n'), "{e1}");
        assert_eq!(
            err("embeddings:\n  model:\n    name: [1, 2]\n"),
            "invalid haiku.rag configuration /cfg/haiku.rag.yaml, line 3: embeddings.model.name: expected a string, found a list"
        );
        assert_eq!(
            err("embeddings:\n  model:\n    api_key: ${NO_SUCH_KEY}\n"),
            "invalid haiku.rag configuration /cfg/haiku.rag.yaml, line 3: api_key references the unset or empty environment variable ${NO_SUCH_KEY} (set it, or write ${NO_SUCH_KEY:-default})"
        );
        // `$$` is a dollar, a lone `$` stays, the config's folder is known.
        assert_eq!(
            expand_vars("a$$b $c ${HAIKU_RAG_CONFIG_DIR}/x", &e, "/cfg").unwrap(),
            "a$b $c /cfg/x"
        );
    }
}
