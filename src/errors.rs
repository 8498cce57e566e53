//! What a user reads when something fails: one line per error, each cause once, and no
//! secret anywhere in it.
//!
//! * [`render`] joins an error's chain with `": "`, leaving out a cause whose text the
//!   line already holds (many errors print their source themselves, so a plain `{:#}`
//!   repeats it: "No such file or directory (os error 2): No such file or directory (os
//!   error 2)").
//! * Secrets are registered once at start-up ([`register_secret`], [`register_env`],
//!   [`register_config_text`]): API keys from the environment and the config file.
//!   [`redact`] replaces every registered secret, and every `api_key = …` assignment,
//!   with `<redacted>`. The error line on stderr and every log line pass through it
//!   ([`RedactingWriter`]).

use std::borrow::Cow;
use std::io;
use std::sync::{OnceLock, RwLock};

/// What stands in for a secret.
pub const REDACTED: &str = "<redacted>";

/// Secrets shorter than this are not registered (they would match ordinary text).
const MIN_SECRET_LEN: usize = 6;

fn secrets() -> &'static RwLock<Vec<String>> {
    static SECRETS: OnceLock<RwLock<Vec<String>>> = OnceLock::new();
    SECRETS.get_or_init(|| RwLock::new(Vec::new()))
}

/// Whether a config or environment key names a secret.
pub fn is_secret_key(key: &str) -> bool {
    // `tokenizer` (a path to a tokenizer.json, `[model] tokenizer`) names no secret.
    let k = key.to_ascii_lowercase().replace("tokenizer", "");
    ["api_key", "apikey", "token", "secret", "password", "passwd"]
        .iter()
        .any(|s| k.contains(s))
}

/// Remembers `secret` so [`redact`] hides it from now on.
pub fn register_secret(secret: &str) {
    let secret = secret.trim();
    if secret.chars().count() < MIN_SECRET_LEN {
        return;
    }
    let mut all = secrets().write().unwrap_or_else(|p| p.into_inner());
    if !all.iter().any(|s| s == secret) {
        all.push(secret.to_string());
        // Longest first, so a secret containing another is replaced whole.
        all.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

/// Registers the values of every environment variable whose name names a secret.
pub fn register_env<'a>(vars: impl IntoIterator<Item = (&'a String, &'a String)>) {
    for (k, v) in vars {
        if is_secret_key(k) {
            register_secret(v);
        }
    }
}

/// Registers the values assigned to secret keys in a config file's text, read line by
/// line so that even a file that does not parse gives its secrets up.
pub fn register_config_text(text: &str) {
    for line in text.lines() {
        if let Some((key, value)) = line.split_once('=')
            && is_secret_key(key.trim().trim_matches('"'))
        {
            let value = value.split(" #").next().unwrap_or(value).trim();
            register_secret(value);
            register_secret(value.trim_matches(|c| c == '"' || c == '\''));
        }
    }
}

/// `text` with every registered secret, and the value of every `api_key = …` /
/// `api_key: …` it contains, replaced by [`REDACTED`].
pub fn redact(text: &str) -> Cow<'_, str> {
    let all = secrets().read().unwrap_or_else(|p| p.into_inner());
    let mut out: Cow<'_, str> = Cow::Borrowed(text);
    for s in all.iter() {
        if out.contains(s.as_str()) {
            out = Cow::Owned(out.replace(s.as_str(), REDACTED));
        }
    }
    drop(all);
    if out.to_ascii_lowercase().contains("api_key") {
        out = Cow::Owned(redact_assignments(&out));
    }
    out
}

/// Replaces the value after `api_key =` or `api_key:` (up to the end of the line).
fn redact_assignments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let lower = line.to_ascii_lowercase();
        match lower.find("api_key") {
            Some(at) => {
                let after = at + "api_key".len();
                let rest = &line[after..];
                let sep = rest
                    .char_indices()
                    .find(|(_, c)| !c.is_whitespace() && *c != '"')
                    .filter(|(_, c)| *c == '=' || *c == ':');
                match sep {
                    Some((j, _)) if !rest[j + 1..].trim().is_empty() => {
                        out.push_str(&line[..after + j + 1]);
                        out.push(' ');
                        out.push_str(REDACTED);
                    }
                    _ => out.push_str(line),
                }
            }
            None => out.push_str(line),
        }
    }
    out
}

/// Whether `e` is a write to a closed pipe (`groundwork inspect S | head -1`): the reader
/// has all it wanted, so nothing is printed for it.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            || cause
                .downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == Some(io::ErrorKind::BrokenPipe)
    })
}

/// One line for `e`: its chain joined by `": "`, each cause once, secrets redacted.
pub fn render(e: &anyhow::Error) -> String {
    redact(&join_causes(e.chain())).into_owned()
}

/// One line for `e` and its sources (reqwest's own message omits, say, the DNS or TLS
/// cause): joined by `": "`, each cause once. Not redacted: what prints it does that.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    join_causes(std::iter::successors(Some(e), |c| c.source()))
}

fn join_causes<'a>(causes: impl Iterator<Item = &'a (dyn std::error::Error + 'static)>) -> String {
    let mut line = String::new();
    for cause in causes {
        let text = cause.to_string();
        let text = text.trim();
        if text.is_empty() || line.contains(text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(text);
    }
    // One line: a cause that spans lines (a TOML snippet, a backtrace) is folded.
    let folded: Vec<&str> = line
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    folded.join(" ")
}

/// A log writer that redacts secrets from whatever passes through it.
pub struct RedactingWriter<W>(pub W);

impl<W: io::Write> io::Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.0.write_all(redact(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_is_told_apart_wherever_it_sits_in_the_chain() {
        let pipe = || io::Error::new(io::ErrorKind::BrokenPipe, "Broken pipe (os error 32)");
        assert!(is_broken_pipe(&anyhow::Error::new(pipe())));
        assert!(is_broken_pipe(
            &anyhow::Error::new(pipe()).context("writing")
        ));
        let json = serde_json::Error::io(pipe());
        assert!(is_broken_pipe(&anyhow::Error::new(json)));
        let other = io::Error::new(io::ErrorKind::NotFound, "gone");
        assert!(!is_broken_pipe(&anyhow::Error::new(other)));
    }

    #[test]
    fn a_cause_already_in_the_line_is_left_out() {
        let io = io::Error::new(
            io::ErrorKind::NotFound,
            "No such file or directory (os error 2)",
        );
        let e =
            anyhow::Error::new(io).context("cannot read x: No such file or directory (os error 2)");
        assert_eq!(
            render(&e),
            "cannot read x: No such file or directory (os error 2)"
        );
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(render(&e), "outer: inner");
    }

    /// A plain error's sources, as reqwest nests them: each once, on one line.
    #[test]
    fn a_plain_errors_sources_join_on_one_line() {
        #[derive(Debug)]
        struct Outer(io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("builder error")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(io::Error::other("No CA certificates\nwere loaded"));
        assert_eq!(chain(&e), "builder error: No CA certificates were loaded");
        let e = Outer(io::Error::other("builder error"));
        assert_eq!(chain(&e), "builder error");
    }

    #[test]
    fn registered_secrets_and_assignments_are_redacted() {
        register_secret("sk-test-registered-0123");
        let line = "failed: bearer sk-test-registered-0123 refused";
        assert_eq!(redact(line), "failed: bearer <redacted> refused");
        assert_eq!(
            redact("3 | api_key = \"sk-unknown-999\"").as_ref(),
            "3 | api_key = <redacted>"
        );
        assert_eq!(redact("no secrets here").as_ref(), "no secrets here");
        register_config_text("[model]\napi_key = sk-unquoted-777 # mine\n");
        assert_eq!(redact("saw sk-unquoted-777").as_ref(), "saw <redacted>");
    }

    #[test]
    fn a_tokenizer_path_is_no_secret() {
        assert!(!is_secret_key("tokenizer"));
        assert!(!is_secret_key("GROUNDWORK_TOKENIZER"));
        assert!(is_secret_key("token"));
        assert!(is_secret_key("HF_TOKEN"));
        assert!(is_secret_key("tokenizer_token"));
    }

    #[test]
    fn short_values_are_not_registered() {
        register_secret("abc");
        assert_eq!(redact("abcdef").as_ref(), "abcdef");
    }
}
