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
    /// The file does not parse, or a value has the wrong type: the file, the line and
    /// the key, never the line's text (it may hold a secret).
    #[error("invalid config file {}, line {line}{}: {message}", path.display(), key.as_deref().map(|k| format!(", key `{k}`")).unwrap_or_default())]
    Parse {
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// The dotted key the error is about, when known (`search.limit`).
        key: Option<String>,
        /// What is wrong (a secret's value left out).
        message: String,
    },
}

/// Where a TOML error is and what it says, without the offending line's text: a file's
/// `api_key` line must never reach an error message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TomlErrorInfo {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// The dotted key, when known.
    pub key: Option<String>,
    /// The message; for a secret key, quoted values in it are replaced.
    pub message: String,
}

/// Describes `e`, an error parsing `text`.
pub fn describe_toml_error(text: &str, e: &toml::de::Error) -> TomlErrorInfo {
    let (line, column) = e
        .span()
        .map(|span| line_col(text, span.start))
        .unwrap_or((1, 1));
    // toml names the key path only when it prints without the input.
    let mut bare = e.clone();
    bare.set_input(None);
    let shown = bare.to_string();
    let key = shown
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("in `").and_then(|k| k.strip_suffix('`')))
        .map(str::to_string)
        .filter(|k| !k.is_empty())
        .or_else(|| key_at_line(text, line));
    let mut message = e.message().trim().replace('\n', "; ");
    if key.as_deref().is_some_and(crate::errors::is_secret_key)
        || text
            .lines()
            .nth(line.saturating_sub(1))
            .and_then(|l| l.split_once('='))
            .is_some_and(|(k, _)| crate::errors::is_secret_key(k.trim()))
    {
        message = hide_quoted(&message);
    }
    TomlErrorInfo {
        line,
        column,
        key,
        message: crate::errors::redact(&message).into_owned(),
    }
}

/// 1-based line and column of byte offset `pos` in `text`.
pub fn line_col(text: &str, pos: usize) -> (usize, usize) {
    let before = &text[..pos.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The 1-based line of `text` that assigns the dotted key `dotted` (`model.base_url`:
/// `base_url = …` under `[model]`).
pub fn line_of_key(text: &str, dotted: &str) -> Option<usize> {
    let (table, key) = dotted.rsplit_once('.').unwrap_or(("", dotted));
    let mut current = String::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if let Some(h) = l.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            current = h.trim_matches(|c| c == '[' || c == ']').trim().to_string();
            continue;
        }
        if let Some((k, _)) = l.split_once('=')
            && k.trim().trim_matches('"') == key
            && current == table
        {
            return Some(i + 1);
        }
    }
    None
}

/// The dotted key assigned on 1-based `line` of `text`, under the last table header
/// above it.
fn key_at_line(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let this = lines.get(line.checked_sub(1)?)?.trim();
    let (key, _) = this.split_once('=')?;
    let key = key.trim().trim_matches('"');
    if key.is_empty() || key.contains(char::is_whitespace) {
        return None;
    }
    let table = lines[..line - 1].iter().rev().find_map(|l| {
        let l = l.trim();
        l.strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .map(|h| h.trim_matches(|c| c == '[' || c == ']').trim().to_string())
    });
    Some(match table {
        Some(t) if !t.is_empty() => format!("{t}.{key}"),
        _ => key.to_string(),
    })
}

/// `message` with every quoted or back-ticked value replaced by `<redacted>`.
fn hide_quoted(message: &str) -> String {
    let mut out = String::new();
    let mut chars = message.chars();
    while let Some(c) = chars.next() {
        if c == '`' || c == '"' {
            out.push_str(crate::errors::REDACTED);
            for d in chars.by_ref() {
                if d == c {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl ConfigError {
    /// The error for `e` from parsing the config file `path` holding `text`.
    pub fn from_toml(path: &Path, text: &str, e: &toml::de::Error) -> Self {
        let info = describe_toml_error(text, e);
        ConfigError::Parse {
            path: path.to_path_buf(),
            line: info.line,
            key: info.key,
            message: info.message,
        }
    }
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
        toml::from_str(text).map_err(|e| ConfigError::from_toml(path, text, &e))
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

    #[test]
    fn a_type_error_names_file_line_and_key() {
        let err = AppConfig::parse(
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
            let err = AppConfig::parse(text, Path::new("c.toml")).unwrap_err();
            let msg = err.to_string();
            assert!(!msg.contains("4242"), "{msg}");
            assert!(msg.contains("line 2"), "{msg}");
        }
    }
}
