//! Session files: `{"messages": [...], "state": {...}, "groundwork": {...}}`.
//!
//! `messages` is pydantic-ai's message JSON and `state` the host state dict, so a
//! haiku.rag host can read our sessions and we can read theirs (a file without
//! `groundwork` loads with fresh metadata). `groundwork` holds what only Groundwork
//! needs: request snapshots (raw vs. compacted), timings and labels. Nothing here
//! holds an API key.
//!
//! Saving is atomic: a temporary file in the same directory is written, synced and
//! renamed over the target.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::agent::{RunError, RunResult};
use super::events::RequestSnapshot;
use super::messages::ModelMessage;

/// Current `groundwork.version`.
pub const SESSION_FORMAT_VERSION: u32 = 1;

/// A conversation with its state and Groundwork's metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// Committed history.
    pub messages: Vec<ModelMessage>,
    /// Committed host state.
    #[serde(default)]
    pub state: Map<String, Value>,
    /// Groundwork's metadata.
    #[serde(default)]
    pub groundwork: GroundworkMeta,
    /// Top-level keys other hosts wrote, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Groundwork's part of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroundworkMeta {
    /// Format version.
    pub version: u32,
    /// The model the session was run with.
    #[serde(default)]
    pub model: Option<String>,
    /// When the session was created.
    pub created_at: DateTime<Utc>,
    /// One snapshot per model request, across runs.
    #[serde(default)]
    pub requests: Vec<RequestSnapshot>,
    /// One entry per committed run.
    #[serde(default)]
    pub timings: Vec<RunTiming>,
    /// Whether the session came from the scripted demo model.
    #[serde(default)]
    pub scripted_demo: bool,
    /// Free-form labels.
    #[serde(default)]
    pub labels: Map<String, Value>,
    /// Unknown keys, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Default for GroundworkMeta {
    fn default() -> Self {
        GroundworkMeta {
            version: SESSION_FORMAT_VERSION,
            model: None,
            created_at: Utc::now(),
            requests: Vec::new(),
            timings: Vec::new(),
            scripted_demo: false,
            labels: Map::new(),
            extra: Map::new(),
        }
    }
}

/// Timing of one committed run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunTiming {
    /// The run.
    pub run_id: String,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// Wall-clock duration.
    pub duration_ms: u64,
    /// Model requests made.
    pub requests: usize,
}

/// Why a session could not be loaded or saved.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Reading or writing failed.
    #[error("cannot {action} session file {path}: {source}")]
    Io {
        /// "read" or "write".
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The file is not a valid session.
    #[error("corrupt session file {path} (line {line}, column {column}): {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The JSON error.
        message: String,
    },
    /// Serializing failed.
    #[error("cannot serialize session: {0}")]
    Serialize(#[from] serde_json::Error),
}

impl Session {
    /// An empty session for `model`.
    pub fn new(model: impl Into<String>) -> Self {
        Session {
            messages: Vec::new(),
            state: Map::new(),
            groundwork: GroundworkMeta {
                model: Some(model.into()),
                ..GroundworkMeta::default()
            },
            extra: Map::new(),
        }
    }

    /// Commits a run's history and state together, only if the run succeeded
    /// (SPEC §2.5). Returns whether anything was committed.
    pub fn commit_run(&mut self, outcome: &Result<RunResult, RunError>) -> bool {
        match outcome {
            Ok(result) => {
                self.messages = result.messages.clone();
                self.state = result.state.clone();
                self.groundwork
                    .requests
                    .extend(result.requests.iter().cloned());
                self.groundwork.timings.push(RunTiming {
                    run_id: result.run_id.clone(),
                    started_at: result.started_at,
                    duration_ms: result.duration_ms,
                    requests: result.usage.requests,
                });
                true
            }
            Err(_) => false,
        }
    }

    /// Parses a session from JSON text; `path` is only used in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<Self, SessionError> {
        serde_json::from_str(text).map_err(|e| SessionError::Corrupt {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })
    }

    /// Loads a session file.
    pub fn load(path: &Path) -> Result<Self, SessionError> {
        let text = std::fs::read_to_string(path).map_err(|source| SessionError::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        })?;
        Session::from_json(&text, path)
    }

    /// Saves atomically (temp file in the same directory, fsync, rename).
    pub fn save(&self, path: &Path) -> Result<(), SessionError> {
        let mut json = serde_json::to_vec_pretty(self)?;
        json.push(b'\n');
        write_atomic(path, &json).map_err(|source| SessionError::Io {
            action: "write",
            path: path.to_path_buf(),
            source,
        })
    }
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory is
/// written, synced and renamed over the target (and removed on failure).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session.json".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // Make the rename durable; not every platform allows syncing a directory.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
