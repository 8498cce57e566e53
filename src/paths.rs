//! Where things live: database URI resolution and the data directory (the config
//! file's path is `crate::config::file_path`).
//!
//! The database location is a URI (a local path, `s3://`, or `gs://`, `az://`, `db://`
//! with the `cloud` feature). Only the default location assumes a local disk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Environment variables as a plain map, so resolution is testable without touching the
/// process environment.
pub type Env = HashMap<String, String>;

/// The process environment, captured once.
pub fn process_env() -> Env {
    std::env::vars().collect()
}

/// Groundwork's data directory: `$XDG_DATA_HOME/groundwork` (or the platform equivalent).
pub fn data_dir(env: &Env) -> PathBuf {
    if let Some(x) = env.get("XDG_DATA_HOME").filter(|s| !s.is_empty()) {
        return PathBuf::from(x).join("groundwork");
    }
    if let Some(home) = env.get("HOME").filter(|s| !s.is_empty()) {
        return PathBuf::from(home).join(".local/share/groundwork");
    }
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("groundwork")
}

/// Expands a leading `~` or `~/` using `HOME`.
pub fn expand_tilde(s: &str, env: &Env) -> String {
    let home = env.get("HOME").cloned().unwrap_or_default();
    if s == "~" {
        return home;
    }
    if let Some(rest) = s.strip_prefix("~/") {
        return Path::new(&home).join(rest).to_string_lossy().into_owned();
    }
    s.to_string()
}

/// True for URIs lancedb opens through an object store or its cloud service.
pub fn is_remote_uri(uri: &str) -> bool {
    [
        "s3://",
        "s3+ddb://",
        "gs://",
        "az://",
        "abfss://",
        "db://",
        "memory://",
    ]
    .iter()
    .any(|p| uri.starts_with(p))
}

/// The URI LanceDB is given for `uri`: remote URIs as they are, local paths made
/// absolute. LanceDB reads a relative path such as `db.lancedb` or `dbs/kb` as a LanceDB
/// Cloud URI (`db://`), so a local path never reaches it relative.
pub fn local_db_uri(uri: &str) -> String {
    if is_remote_uri(uri) || uri.contains("://") {
        return uri.to_string();
    }
    std::path::absolute(uri)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| uri.to_string())
}

/// Resolution order (SPEC §13): the `--db` flag, then `HAIKU_RAG_DB` (with `~` expanded),
/// then `<data dir>/haiku.rag.lancedb`, where the data dir is `storage.data_dir` from the
/// config file when set.
pub fn resolve_db(flag: Option<&str>, config_data_dir: Option<&Path>, env: &Env) -> String {
    if let Some(f) = flag.filter(|s| !s.is_empty()) {
        return expand_tilde(f, env);
    }
    if let Some(v) = env.get("HAIKU_RAG_DB").filter(|s| !s.is_empty()) {
        return expand_tilde(v, env);
    }
    let dir = config_data_dir
        .map(Path::to_path_buf)
        .unwrap_or_else(|| data_dir(env));
    dir.join("haiku.rag.lancedb").to_string_lossy().into_owned()
}

/// What `path` is when it exists but is not a regular file (`"a named pipe"`, `"a
/// socket"`, `"a device"`, `"a folder"`): reading one can block forever or never end, so
/// commands refuse or skip it by this name.
pub fn not_a_regular_file(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt as _;
    let ft = std::fs::metadata(path).ok()?.file_type();
    if ft.is_file() {
        None
    } else if ft.is_fifo() {
        Some("a named pipe")
    } else if ft.is_socket() {
        Some("a socket")
    } else if ft.is_block_device() || ft.is_char_device() {
        Some("a device")
    } else if ft.is_dir() {
        Some("a folder")
    } else {
        Some("not a regular file")
    }
}

/// An environment of these pairs (tests).
#[cfg(test)]
pub(crate) fn env_of(pairs: &[(&str, &str)]) -> Env {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        env_of(pairs)
    }

    #[test]
    fn flag_wins_over_env_and_default() {
        let e = env(&[("HAIKU_RAG_DB", "/env/db"), ("HOME", "/home/u")]);
        assert_eq!(resolve_db(Some("/flag/db"), None, &e), "/flag/db");
    }

    #[test]
    fn env_is_tilde_expanded() {
        let e = env(&[("HAIKU_RAG_DB", "~/kb/x.lancedb"), ("HOME", "/home/u")]);
        assert_eq!(resolve_db(None, None, &e), "/home/u/kb/x.lancedb");
    }

    #[test]
    fn default_is_under_xdg_data_dir() {
        let e = env(&[("HOME", "/home/u")]);
        assert_eq!(
            resolve_db(None, None, &e),
            "/home/u/.local/share/groundwork/haiku.rag.lancedb"
        );
        let e = env(&[("HOME", "/home/u"), ("XDG_DATA_HOME", "/xdg")]);
        assert_eq!(
            resolve_db(None, None, &e),
            "/xdg/groundwork/haiku.rag.lancedb"
        );
        assert_eq!(
            resolve_db(None, Some(Path::new("/cfg/data")), &e),
            "/cfg/data/haiku.rag.lancedb"
        );
    }

    #[test]
    fn local_paths_reach_lancedb_absolute() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            local_db_uri("db.lancedb"),
            cwd.join("db.lancedb").to_string_lossy()
        );
        assert_eq!(local_db_uri("dbs/kb"), cwd.join("dbs/kb").to_string_lossy());
        assert_eq!(local_db_uri("/abs/kb"), "/abs/kb");
        assert_eq!(local_db_uri("s3://bucket/kb"), "s3://bucket/kb");
    }

    #[test]
    fn remote_uris_are_recognised() {
        assert!(is_remote_uri("s3://bucket/kb"));
        assert!(is_remote_uri("db://my-project"));
        assert!(!is_remote_uri("/tmp/kb.lancedb"));
    }
}
