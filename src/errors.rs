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

/// Credentials recognised by their shape wherever they appear, registered or not: what
/// servers echo back in error bodies (`Bearer sk-…`, `Authorization: Basic …`,
/// `api-key: …`) and the password in a URL's userinfo (`http://user:pass@host`). Each
/// pattern's group 1 is the secret.
fn shapes() -> &'static [regex::Regex] {
    static SHAPES: OnceLock<Vec<regex::Regex>> = OnceLock::new();
    SHAPES.get_or_init(|| {
        [
            r"(?i)\bbearer\s+([A-Za-z0-9._~+/=\-]{6,})",
            r#"(?i)\bauthorization"?\s*[:=]\s*"?(?:basic|token|key)\s+([^\s"',;}]{6,})"#,
            r#"(?i)\b(?:x-)?(?:api-key|apikey|api-token)"?\s*[:=]\s*"?([^\s"',;}]{6,})"#,
            r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#@:]*:([^\s/?#@]+)@",
        ]
        .iter()
        .map(|p| regex::Regex::new(p).expect("a valid pattern"))
        .collect()
    })
}

/// The byte ranges of `text` that hold a secret: every registered secret and every
/// credential [`shapes`] recognises, sorted and merged. A range already reading
/// [`REDACTED`] is not one.
pub fn secret_spans(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut spans = Vec::new();
    {
        let all = secrets().read().unwrap_or_else(|p| p.into_inner());
        for s in all.iter() {
            spans.extend(
                text.match_indices(s.as_str())
                    .map(|(at, m)| at..at + m.len()),
            );
        }
    }
    for shape in shapes() {
        for caps in shape.captures_iter(text) {
            if let Some(m) = caps.get(1)
                && !m.as_str().starts_with(REDACTED)
            {
                spans.push(m.range());
            }
        }
    }
    spans.sort_by_key(|r| (r.start, std::cmp::Reverse(r.end)));
    let mut merged: Vec<std::ops::Range<usize>> = Vec::with_capacity(spans.len());
    for r in spans {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// `text` with every secret [`secret_spans`] finds, and the value of every `api_key = …`
/// / `api_key: …` it contains, replaced by [`REDACTED`].
pub fn redact(text: &str) -> Cow<'_, str> {
    let spans = secret_spans(text);
    let mut out: Cow<'_, str> = if spans.is_empty() {
        Cow::Borrowed(text)
    } else {
        let mut s = String::with_capacity(text.len());
        let mut at = 0;
        for r in spans {
            s.push_str(&text[at..r.start]);
            s.push_str(REDACTED);
            at = r.end;
        }
        s.push_str(&text[at..]);
        Cow::Owned(s)
    };
    if out.to_ascii_lowercase().contains("api_key") {
        out = Cow::Owned(redact_assignments(&out));
    }
    out
}

/// Registers the password of every URL in `text` (`scheme://user:password@host`), so
/// it is redacted wherever it appears later, not only inside its URL, and the Basic
/// credentials an HTTP client makes of it (`base64(user:password)`), which a server
/// may echo back.
pub fn register_url_passwords(text: &str) {
    use base64::Engine as _;
    static USERINFO: OnceLock<regex::Regex> = OnceLock::new();
    let userinfo = USERINFO.get_or_init(|| {
        regex::Regex::new(r"\b[A-Za-z][A-Za-z0-9+.\-]*://([^\s/?#@:]*):([^\s/?#@]+)@")
            .expect("a valid pattern")
    });
    for caps in userinfo.captures_iter(text) {
        let (user, password) = (&caps[1], &caps[2]);
        register_secret(password);
        for (u, p) in [(user, password), (&*decode(user), &*decode(password))] {
            let basic = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
            register_secret(&basic);
        }
        register_secret(&decode(password));
    }
}

/// `text` with its `%XX` escapes decoded (a URL's userinfo), when that makes UTF-8.
fn decode(text: &str) -> Cow<'_, str> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .unwrap_or(Cow::Borrowed(text))
}

/// Every string inside `value` (keys left as they are) passed through [`redact`]: what a
/// JSON file or line is written from, so each string is redacted on its own and the JSON
/// stays whole.
pub fn redact_json(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) => {
            if let Cow::Owned(r) = redact(s) {
                *s = r;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact_json),
        serde_json::Value::Object(map) => map.values_mut().for_each(redact_json),
        _ => {}
    }
}

/// `value` serialised as JSON with every string redacted ([`redact_json`]).
pub fn redacted_json<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut v = serde_json::to_value(value)?;
    redact_json(&mut v);
    serde_json::to_vec(&v)
}

/// The bytes of a file about to be written, redacted: a JSON document or JSON lines
/// string by string (so the JSON stays whole), any other text line by line. Bytes with
/// no secret, and bytes that are not UTF-8, are returned as they are.
pub fn redact_file_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Cow::Borrowed(bytes);
    };
    if matches!(redact(text), Cow::Borrowed(_)) {
        return Cow::Borrowed(bytes);
    }
    let json_line = |line: &str| -> Option<String> {
        let mut v: serde_json::Value = serde_json::from_str(line).ok()?;
        redact_json(&mut v);
        serde_json::to_string(&v).ok()
    };
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        if let Ok(mut v) = serde_json::from_str::<serde_json::Value>(text) {
            redact_json(&mut v);
            let pretty = text.trim_end().contains('\n');
            let mut out = if pretty {
                serde_json::to_string_pretty(&v)
            } else {
                serde_json::to_string(&v)
            }
            .unwrap_or_default();
            if text.ends_with('\n') {
                out.push('\n');
            }
            return Cow::Owned(out.into_bytes());
        }
        let lines: Option<Vec<String>> = text
            .split_inclusive('\n')
            .map(|l| {
                let body = l.trim_end_matches('\n');
                if body.trim().is_empty() {
                    return Some(l.to_string());
                }
                json_line(body).map(|j| j + &l[body.len()..])
            })
            .collect();
        if let Some(lines) = lines {
            return Cow::Owned(lines.concat().into_bytes());
        }
    }
    Cow::Owned(redact(text).into_owned().into_bytes())
}

/// Whether any secret is in `value`'s strings; when one is, `value` is rewritten with
/// every string redacted. For what is kept (a session's messages): clean values, the
/// usual case, are left untouched.
pub fn scrub<T: serde::Serialize + serde::de::DeserializeOwned>(value: &mut T) {
    let Ok(mut v) = serde_json::to_value(&*value) else {
        return;
    };
    let before = v.clone();
    redact_json(&mut v);
    if v != before
        && let Ok(clean) = serde_json::from_value(v)
    {
        *value = clean;
    }
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

/// A writer that passes whole lines through [`redact`]: a secret split across two
/// writes (a formatted line is written piece by piece) is still found. What is left
/// without a newline is redacted and written on [`Write::flush`](io::Write::flush) and on
/// drop.
pub struct Redacted<W: io::Write> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: io::Write> Redacted<W> {
    pub fn new(inner: W) -> Self {
        Redacted {
            inner,
            pending: Vec::new(),
        }
    }

    fn write_through(&mut self, upto: usize) -> io::Result<()> {
        let text = String::from_utf8_lossy(&self.pending[..upto]);
        let clean = redact(&text).into_owned();
        self.pending.drain(..upto);
        self.inner.write_all(clean.as_bytes())
    }
}

impl<W: io::Write> io::Write for Redacted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        if let Some(last) = self.pending.iter().rposition(|&b| b == b'\n') {
            self.write_through(last + 1)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            self.write_through(self.pending.len())?;
        }
        self.inner.flush()
    }
}

impl<W: io::Write> Drop for Redacted<W> {
    fn drop(&mut self) {
        let _ = io::Write::flush(self);
    }
}

/// Standard output, redacted: every command writes its output through this.
pub fn stdout() -> Redacted<io::StdoutLock<'static>> {
    Redacted::new(io::stdout().lock())
}

/// Standard error, redacted: notes, warnings and errors are written through this
/// ([`say!`](crate::say)).
pub fn stderr() -> Redacted<io::StderrLock<'static>> {
    Redacted::new(io::stderr().lock())
}

/// `eprintln!` through the redactor ([`stderr`]): how Groundwork writes every line meant
/// for the person at the terminal on standard error.
macro_rules! say {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let mut err = $crate::errors::stderr();
        let _ = writeln!(err, $($arg)*);
    }};
}
pub(crate) use say;

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
    fn credentials_echoed_by_servers_are_redacted_by_their_shape() {
        let cases = [
            (
                "HTTP 401: invalid key Bearer rr-unregistered-4242",
                "HTTP 401: invalid key Bearer <redacted>",
            ),
            (
                r#"{"detail":"Authorization: Basic dTpwYXNzd29yZA== refused"}"#,
                r#"{"detail":"Authorization: Basic <redacted> refused"}"#,
            ),
            (
                "x-api-key: az-unregistered-99 is not valid",
                "x-api-key: <redacted> is not valid",
            ),
            (
                "cannot reach http://me:hunter22@127.0.0.1:9/v1/rerank",
                "cannot reach http://me:<redacted>@127.0.0.1:9/v1/rerank",
            ),
            ("bearer <redacted>", "bearer <redacted>"),
            (
                "Basic usage of the API key store",
                "Basic usage of the API key store",
            ),
            (
                "see https://example.org/a:b@c",
                "see https://example.org/a:b@c",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(redact(text), want, "{text}");
        }
    }

    #[test]
    fn a_url_password_is_redacted_anywhere_once_registered_and_so_is_its_basic_form() {
        register_url_passwords("--reranker-url=http://rr:pa%73s-url-1234@host/v1");
        assert_eq!(redact("echo: pass-url-1234").as_ref(), "echo: <redacted>");
        assert_eq!(redact("echo: pa%73s-url-1234").as_ref(), "echo: <redacted>");
        // base64("rr:pass-url-1234")
        assert_eq!(
            redact("provided: Basic cnI6cGFzcy11cmwtMTIzNA==").as_ref(),
            "provided: Basic <redacted>"
        );
    }

    #[test]
    fn json_files_stay_json_and_lines_stay_lines() {
        register_secret("sk-json-file-5150");
        let pretty = "{\n  \"error\": \"api_key: sk-json-file-5150\",\n  \"n\": 1\n}\n";
        let out = String::from_utf8(redact_file_bytes(pretty.as_bytes()).into_owned()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["error"], "api_key: <redacted>");
        assert_eq!(v["n"], 1);
        assert!(
            out.ends_with("}\n") && out.contains("\n  "),
            "still pretty: {out}"
        );
        let lines = "{\"a\":\"sk-json-file-5150\"}\n{\"b\":2}\n";
        let out = String::from_utf8(redact_file_bytes(lines.as_bytes()).into_owned()).unwrap();
        assert_eq!(out, "{\"a\":\"<redacted>\"}\n{\"b\":2}\n");
        let md = "# Report\nkey sk-json-file-5150 here\n";
        assert_eq!(
            redact_file_bytes(md.as_bytes()).as_ref(),
            b"# Report\nkey <redacted> here\n"
        );
        let clean = b"{\"nothing\": \"to hide\"}";
        assert!(matches!(redact_file_bytes(clean), Cow::Borrowed(_)));
    }

    #[test]
    fn a_secret_split_across_writes_is_still_redacted() {
        use std::io::Write as _;
        register_secret("sk-split-write-8080");
        let mut buf = Vec::new();
        {
            let mut w = Redacted::new(&mut buf);
            write!(w, "key sk-split-").unwrap();
            write!(w, "write-8080 and more").unwrap();
            writeln!(w, ", end").unwrap();
            write!(w, "tail sk-split-write-8080").unwrap();
        }
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "key <redacted> and more, end\ntail <redacted>"
        );
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
