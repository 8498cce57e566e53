//! Ingestion: files and folders in, documents out. Parsing and chunking live in
//! [`crate::ingest`]; this module decides what to (re)write and writes it.
//!
//! * An unchanged file (same content hash as the stored document with the same URI) is a
//!   no-op.
//! * A changed file (or one parsed by an older parser) replaces its document, which keeps
//!   its id and creation time ([`Store::replace_document`]): a failure or a kill at any
//!   moment leaves a complete version (old or new) visible, and the next ingest of the
//!   file finishes or removes what an interrupted replacement left, so a rerun converges
//!   to one document with the original id.
//! * A file that cannot be read or parsed is reported by name and skipped; nothing already
//!   stored is touched.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::ingest::{self, ChunkOptions};
use crate::store::{DocumentItem, NewChunk, NewDocument, PageRaster, Store, StoreError};

/// The `document_meta.metadata` key holding the source file's content hash.
pub const HASH_KEY: &str = "sha256";

/// `document_meta.metadata` key naming the parser that made a document's items, for
/// kinds whose parser changed: a file parsed by an older one is parsed again on the next
/// ingest even when its bytes did not change.
pub const PARSER_KEY: &str = "groundwork_parser";

/// The `document_meta.metadata` key naming the chunker when it is not one chunk per item
/// (`hybrid 256 tokens, peers merged`): a file chunked otherwise is chunked again on the
/// next ingest even when its bytes did not change.
pub const CHUNKER_KEY: &str = "groundwork_chunker";

/// The parser a file goes through now, for kinds with a recorded parser (PDFs: headings,
/// furniture and positions since `pdf-structure-1`; tables of contents and indexes as
/// `document_index` since `pdf-structure-2`).
pub fn parser_version(path: &Path) -> Option<&'static str> {
    path.extension()
        .and_then(|e| e.to_str())
        .filter(|e| e.eq_ignore_ascii_case("pdf"))
        .map(|_| "pdf-structure-2")
}

/// File extensions `ingest` picks up when walking folders.
pub const EXTENSIONS: &[&str] = &["md", "markdown", "txt", "text", "html", "htm", "pdf"];

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Added {
        id: String,
        chunks: usize,
    },
    /// The document was replaced by the file's new version and kept its id.
    Replaced {
        id: String,
        chunks: usize,
    },
    Unchanged {
        id: String,
    },
    Failed {
        error: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct FileOutcome {
    pub path: PathBuf,
    pub outcome: Outcome,
}

#[derive(Debug, Default, Clone)]
pub struct IngestReport {
    pub files: Vec<FileOutcome>,
}

impl IngestReport {
    pub fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.files.iter().filter(|o| f(&o.outcome)).count()
    }
    pub fn failed(&self) -> Vec<&FileOutcome> {
        self.files
            .iter()
            .filter(|o| matches!(o.outcome, Outcome::Failed { .. }))
            .collect()
    }
    pub fn chunks_written(&self) -> usize {
        self.files
            .iter()
            .map(|o| match o.outcome {
                Outcome::Added { chunks, .. } | Outcome::Replaced { chunks, .. } => chunks,
                _ => 0,
            })
            .sum()
    }
}

/// Progress callbacks for a UI (a progress bar in the CLI).
pub trait Progress: Send + Sync {
    fn start(&self, _total_files: usize) {}
    /// `file` has reached `stage`.
    fn stage(&self, _file: &Path, _stage: Stage) {}
    fn file_done(&self, _file: &FileOutcome) {}
    /// Every file is done; the indexes are being brought up to date.
    fn indexing(&self) {}
}

/// What a file's ingest is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Reading and parsing it (a PDF's pages rastered too).
    Parsing,
    /// Embedding its chunks: `done` of `total`.
    Embedding { done: usize, total: usize },
    /// Writing its rows.
    Writing,
}

impl Progress for () {}

/// Expands folders (recursively, sorted) into the supported files they contain. Paths that
/// are files are kept whatever their extension (an unsupported one fails at parse time and
/// is reported).
pub fn collect_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
        if meta.is_dir() {
            walk(p, &mut out).map_err(|e| format!("{}: {e}", p.display()))?;
        } else {
            // A named pipe, socket or device is kept here and refused by name at read
            // time (reading a pipe would block forever).
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Why `path` is not ingested when it is not a regular file (a named pipe, a socket, a
/// device): reading one can block forever or never end.
fn not_a_regular_file(path: &Path) -> Option<String> {
    crate::paths::not_a_regular_file(path)
        .map(|kind| format!("{}: skipped, it is {kind}", path.display()))
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if !p.is_file() {
            // Named pipes, sockets and devices inside a folder are passed over.
            continue;
        } else if p
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
        {
            out.push(p);
        }
    }
    Ok(())
}

/// The URI a file is stored under: `file://` + its absolute path.
pub fn file_uri(path: &Path) -> String {
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    format!("file://{}", abs.display())
}

pub fn content_hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// How files become documents.
#[derive(Debug, Clone, Default)]
pub struct IngestOptions {
    /// Store files under this root as `prefix` + their path relative to it, instead of
    /// `file://` + the absolute path.
    pub uri_root: Option<(PathBuf, String)>,
    /// Derive document and chunk ids from the URI and the content hash (UUID v5) instead
    /// of drawing random ones.
    pub stable_ids: bool,
    /// Chunks sized for the embedder (`[processing] chunker_type = "hybrid"`); `None`:
    /// one chunk per item.
    pub hybrid: Option<ingest::hybrid::Hybrid>,
}

impl IngestOptions {
    /// What the chunker is, as a document's metadata records it ([`CHUNKER_KEY`]):
    /// absent for one chunk per item.
    pub fn chunker(&self) -> Option<String> {
        self.hybrid.as_ref().map(|h| {
            format!(
                "hybrid {} tokens{}",
                h.max_tokens,
                if h.merge_peers { ", peers merged" } else { "" }
            )
        })
    }
}

impl IngestOptions {
    /// The URI `path` is stored under.
    pub fn uri_for(&self, path: &Path) -> String {
        if let Some((root, prefix)) = &self.uri_root
            && let Ok(rel) = path.strip_prefix(root)
        {
            let parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            return format!("{prefix}{}", parts.join("/"));
        }
        file_uri(path)
    }
}

/// Ingests every file under `paths`, then refreshes the indexes once.
pub async fn ingest_paths(
    store: &Store,
    paths: &[PathBuf],
    progress: &dyn Progress,
) -> Result<IngestReport, StoreError> {
    ingest_paths_with(store, paths, progress, &IngestOptions::default()).await
}

/// [`ingest_paths`] with options.
pub async fn ingest_paths_with(
    store: &Store,
    paths: &[PathBuf],
    progress: &dyn Progress,
    options: &IngestOptions,
) -> Result<IngestReport, StoreError> {
    let files = collect_files(paths).map_err(StoreError::Other)?;
    progress.start(files.len());
    let mut report = IngestReport::default();
    let mut wrote = false;
    for path in files {
        let outcome = match ingest_file_reporting(store, &path, options, progress).await {
            Ok(o) => o,
            Err(e) => Outcome::Failed {
                error: e.to_string(),
            },
        };
        wrote |= matches!(outcome, Outcome::Added { .. } | Outcome::Replaced { .. });
        let fo = FileOutcome { path, outcome };
        progress.file_done(&fo);
        report.files.push(fo);
    }
    if wrote {
        progress.indexing();
        store.ensure_indexes().await?;
    }
    Ok(report)
}

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Parse(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Ingests one file. Errors leave the store as it was.
pub async fn ingest_file(store: &Store, path: &Path) -> Result<Outcome, FileError> {
    ingest_file_with(store, path, &IngestOptions::default()).await
}

/// [`ingest_file`] with options.
pub async fn ingest_file_with(
    store: &Store,
    path: &Path,
    options: &IngestOptions,
) -> Result<Outcome, FileError> {
    ingest_file_reporting(store, path, options, &()).await
}

/// [`ingest_file_with`], telling `progress` each stage the file reaches.
pub async fn ingest_file_reporting(
    store: &Store,
    path: &Path,
    options: &IngestOptions,
    progress: &dyn Progress,
) -> Result<Outcome, FileError> {
    if let Some(why) = not_a_regular_file(path) {
        return Err(FileError::Parse(why));
    }
    let bytes = std::fs::read(path).map_err(|source| FileError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let hash = content_hash(&bytes);
    let uri = options.uri_for(path);
    let seed = options.stable_ids.then(|| format!("{uri}\n{hash}"));
    let existing = store.stored_for_uri(&uri).await?;
    let parser = parser_version(path);
    if let Some(stored) = &existing
        && stored.current.id == stored.id
        && stored
            .current
            .metadata
            .get(HASH_KEY)
            .and_then(Value::as_str)
            == Some(hash.as_str())
        && stored
            .current
            .metadata
            .get(PARSER_KEY)
            .and_then(Value::as_str)
            == parser
        && stored
            .current
            .metadata
            .get(CHUNKER_KEY)
            .and_then(Value::as_str)
            == options.chunker().as_deref()
    {
        // The document holds the file's version; a replacement interrupted after that
        // (or one of an older version) only has its leftovers to go.
        if stored.interrupted {
            store.discard_replacement(&stored.id).await?;
        }
        return Ok(Outcome::Unchanged {
            id: stored.id.clone(),
        });
    }
    progress.stage(path, Stage::Parsing);
    let owned = path.to_path_buf();
    let parsed = tokio::task::spawn_blocking(move || ingest::parse_file(&owned))
        .await
        .map_err(|e| FileError::Parse(format!("{}: parser crashed: {e}", path.display())))?
        .map_err(|e| FileError::Parse(format!("{}: {e}", path.display())))?;
    if parsed.items.iter().all(|i| i.text.trim().is_empty()) {
        // An empty parse must never replace a stored version of the file.
        return Err(FileError::Parse(format!(
            "{}: no text could be extracted",
            path.display()
        )));
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| uri.clone());
    let mut doc = new_document(parsed, &name, uri, hash, options.hybrid.as_ref());
    if let Some(p) = parser {
        doc.metadata
            .insert(PARSER_KEY.into(), Value::String(p.into()));
    }
    if let Some(c) = options.chunker() {
        doc.metadata.insert(CHUNKER_KEY.into(), Value::String(c));
    }
    let chunks = doc.chunks.len();
    let replaces = existing.as_ref().map(|s| s.id.as_str());
    let embedded = |done: usize, total: usize| {
        progress.stage(path, Stage::Embedding { done, total });
        if done == total {
            progress.stage(path, Stage::Writing);
        }
    };
    let meta = store
        .add_document_reporting(doc, replaces, seed.as_deref(), &embedded)
        .await?;
    Ok(match replaces {
        Some(_) => Outcome::Replaced {
            id: meta.id,
            chunks,
        },
        None => Outcome::Added {
            id: meta.id,
            chunks,
        },
    })
}

/// Turns a parsed file into the rows to write.
pub fn new_document(
    parsed: ingest::ParsedDocument,
    name: &str,
    uri: String,
    hash: String,
    hybrid: Option<&ingest::hybrid::Hybrid>,
) -> NewDocument {
    // Like haiku.rag with a text-only embedder: pictures get no synthetic chunk of their own
    // (their captions are chunked and bring the picture bytes back at search time).
    let options = ChunkOptions {
        picture_chunks: false,
        hybrid: hybrid.cloned(),
        ..ChunkOptions::default()
    };
    let chunks = ingest::chunk(&parsed, &options)
        .into_iter()
        .map(|c| NewChunk {
            content: c.content,
            content_fts: c.content_fts,
            metadata: c.metadata,
            order: c.order,
        })
        .collect();
    let docling_document = ingest::docling_json(&parsed, name);
    let title = parsed.title.clone().or_else(|| {
        Path::new(name)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
    });
    let mut metadata = Map::new();
    metadata.insert(HASH_KEY.into(), Value::String(hash));
    let items = parsed
        .items
        .into_iter()
        .enumerate()
        .map(|(i, it)| DocumentItem {
            document_id: String::new(),
            position: i as i64,
            self_ref: it.self_ref,
            label: it.label,
            text: it.text,
            page_numbers: it.page_numbers,
            picture_data: it.picture_data,
            heading_level: it.heading_level,
            tree_depth: it.tree_depth,
        })
        .collect();
    let pages = parsed
        .pages
        .into_iter()
        .map(|p| PageRaster {
            page_no: p.page_no,
            png: p.png,
            width: p.width,
            height: p.height,
        })
        .collect();
    NewDocument {
        uri: Some(uri),
        title,
        metadata,
        content: parsed.content,
        docling_document,
        pages,
        items,
        chunks,
    }
}
