//! The one error type of configuration loading, and the helpers that turn a TOML error
//! into "file, line, key, what is wrong" without ever quoting the offending line: a
//! config file's `api_key` line must never reach an error message or a log.

use std::path::{Path, PathBuf};

/// Why the configuration could not be loaded. Every variant prints as one line.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The file does not parse, names an unknown key, or holds a wrong or out-of-range
    /// value: the file, the line and the key, never the line's text.
    #[error("invalid config file {}, line {line}{}: {message}", path.display(), key.as_deref().map(|k| format!(", key `{k}`")).unwrap_or_default())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// The dotted key the error is about, when known (`search.limit`).
        key: Option<String>,
        /// What is wrong (a secret's value left out).
        message: String,
    },
    /// A value from the environment or a flag is out of range.
    #[error("invalid config value {key}: {message}")]
    Invalid {
        /// The dotted key.
        key: String,
        /// What is wrong.
        message: String,
    },
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

    /// An error about the dotted `key` of the config file `path` (holding `text`),
    /// named with the line that assigns it (line 1 when it cannot be found).
    pub fn at_key(path: &Path, text: &str, key: &str, message: impl Into<String>) -> Self {
        ConfigError::Parse {
            path: path.to_path_buf(),
            line: line_of_key(text, key).unwrap_or(1),
            key: Some(key.to_string()),
            message: message.into(),
        }
    }

    /// An [`ConfigError::Invalid`] value that came from the config file `path` (holding
    /// `text`), named with the file and the line of its key.
    pub(crate) fn in_file(self, path: &Path, text: &str) -> ConfigError {
        match self {
            ConfigError::Invalid { key, message } => match line_of_key(text, &key) {
                Some(line) => ConfigError::Parse {
                    path: path.to_path_buf(),
                    line,
                    key: Some(key),
                    message,
                },
                None => ConfigError::Invalid { key, message },
            },
            other => other,
        }
    }
}

/// Where a TOML error is and what it says, without the offending line's text.
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

/// Describes `e`, an error parsing `text`. An unknown key is described as one, naming
/// its section (`unknown key `colour` in [model]; expected one of ...`).
pub fn describe_toml_error(text: &str, e: &toml::de::Error) -> TomlErrorInfo {
    let (line, column) = e
        .span()
        .map(|span| line_col(text, span.start))
        .unwrap_or((1, 1));
    // toml names the key path only when it prints without the input.
    let mut bare = e.clone();
    bare.set_input(None);
    let shown = bare.to_string();
    let named = shown
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("in `").and_then(|k| k.strip_suffix('`')))
        .map(str::to_string)
        .filter(|k| !k.is_empty());
    let raw = e.message().trim().replace('\n', "; ");
    if let Some((field, expected)) = unknown_field(&raw) {
        // The span is the unknown key itself; its section is the table above it, or the
        // path toml names (a dotted or inline key).
        let key = key_at_line(text, line)
            .filter(|k| k.rsplit('.').next() == Some(field))
            .or_else(|| named.as_ref().map(|t| format!("{t}.{field}")))
            .unwrap_or_else(|| field.to_string());
        let section = key.rsplit_once('.').map(|(s, _)| s);
        let message = match section {
            Some(s) => format!("unknown key `{field}` in [{s}]{expected}"),
            None => format!("unknown top-level key `{field}`{expected}"),
        };
        return TomlErrorInfo {
            line,
            column,
            key: Some(key),
            message,
        };
    }
    let key = named.or_else(|| key_at_line(text, line));
    // A string of the wrong type is not quoted back: it may be a misplaced secret.
    let mut message = hide_string_values(&raw);
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

/// For serde's "unknown field `x`, expected one of `a`, `b`": the field and
/// "; expected one of `a`, `b`" (or "; expected `a`", or nothing).
fn unknown_field(message: &str) -> Option<(&str, String)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, rest) = rest.split_once('`')?;
    let expected = rest
        .strip_prefix(", ")
        .filter(|r| r.starts_with("expected"))
        .map(|r| format!("; {r}"))
        .unwrap_or_default();
    Some((field, expected))
}

/// 1-based line and column of byte offset `pos` in `text`.
pub fn line_col(text: &str, pos: usize) -> (usize, usize) {
    let before = &text[..pos.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The name of the table a header line (`[model]`, `[[x]]`) opens, if it is one.
fn table_header(line: &str) -> Option<String> {
    let l = line.trim();
    let inner = l.strip_prefix('[')?;
    let (name, rest) = inner.split_once(']')?;
    let rest = rest.strip_prefix(']').unwrap_or(rest).trim();
    let name = name.trim_start_matches('[').trim();
    (rest.is_empty() || rest.starts_with('#'))
        .then(|| name.to_string())
        .filter(|n| !n.is_empty() && !n.contains(','))
}

/// The 1-based line of `text` that assigns the dotted key `dotted` (`model.base_url`:
/// `base_url = …` under `[model]`).
pub fn line_of_key(text: &str, dotted: &str) -> Option<usize> {
    let (table, key) = dotted.rsplit_once('.').unwrap_or(("", dotted));
    let mut current = String::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(h) = table_header(line) {
            current = h;
            continue;
        }
        if let Some((k, _)) = line.trim().split_once('=')
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
    let table = lines[..line - 1].iter().rev().find_map(|l| table_header(l));
    Some(match table {
        Some(t) if !t.is_empty() => format!("{t}.{key}"),
        _ => key.to_string(),
    })
}

/// `message` with serde's `string "…"` (the value that had the wrong type) said as
/// `a string`.
fn hide_string_values(message: &str) -> String {
    const MARK: &str = "string \"";
    let mut out = String::new();
    let mut rest = message;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        out.push_str("a string");
        let mut chars = rest[at + MARK.len()..].char_indices();
        let mut end = rest.len() - at - MARK.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &rest[at + MARK.len() + end..];
    }
    out.push_str(rest);
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrong_string_is_not_quoted_back() {
        assert_eq!(
            hide_string_values(r#"invalid type: string "sk-\"x\"-1", expected u64"#),
            "invalid type: a string, expected u64"
        );
        assert_eq!(hide_string_values("unclosed table"), "unclosed table");
    }

    #[test]
    fn headers_with_comments_count_and_arrays_do_not() {
        assert_eq!(
            table_header("[model] # the endpoint").as_deref(),
            Some("model")
        );
        assert_eq!(table_header("[[tui.keys]]").as_deref(), Some("tui.keys"));
        assert_eq!(table_header(r#"["a", "b"]"#), None);
        assert_eq!(table_header(r#"["a"],"#), None);
        let text = "[model] # x\nmodel = \"m\"\n[tui.keys]\nhelp = [\"f1\"]\n";
        assert_eq!(line_of_key(text, "model.model"), Some(2));
        assert_eq!(line_of_key(text, "tui.keys.help"), Some(4));
        assert_eq!(line_of_key(text, "tui.keys.quit"), None);
    }

    #[test]
    fn an_unknown_key_names_its_section() {
        let text = "[search]\nlimit = 3\n\n[qa.model]\nvison = true\n";
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Qa {
            vision: Option<bool>,
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct File {
            qa: std::collections::HashMap<String, Qa>,
        }
        let e = toml::from_str::<File>(text).unwrap_err();
        let info = describe_toml_error(text, &e);
        assert_eq!(info.line, 5);
        assert_eq!(info.key.as_deref(), Some("qa.model.vison"));
        assert_eq!(
            info.message,
            "unknown key `vison` in [qa.model]; expected `vision`"
        );
    }
}
