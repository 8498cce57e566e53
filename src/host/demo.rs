//! The bundled demo: the corpus under `assets/demo/` (compiled into the binary, so an
//! installed Groundwork has it too) and, once recorded, the scripted demo session.

use std::path::{Path, PathBuf};

/// The demo corpus: path relative to the corpus root, and contents.
pub const CORPUS: &[(&str, &[u8])] = &[
    (
        "battery-maintenance-guide.md",
        include_bytes!("../../assets/demo/battery-maintenance-guide.md"),
    ),
    (
        "microgrid-operator-handbook.md",
        include_bytes!("../../assets/demo/microgrid-operator-handbook.md"),
    ),
    (
        "glossary.html",
        include_bytes!("../../assets/demo/glossary.html"),
    ),
    (
        "operator-log-excerpts.txt",
        include_bytes!("../../assets/demo/operator-log-excerpts.txt"),
    ),
    (
        "harbor-point-field-report-2026.pdf",
        include_bytes!("../../assets/demo/harbor-point-field-report-2026.pdf"),
    ),
    (
        "figures/battery-soc.png",
        include_bytes!("../../assets/demo/figures/battery-soc.png"),
    ),
    (
        "figures/monthly-output.png",
        include_bytes!("../../assets/demo/figures/monthly-output.png"),
    ),
];

/// The URI prefix of demo documents: `groundwork-demo:///<file>`, the same on every
/// machine, so the recorded demo session's citations name the same documents everywhere.
pub const URI_PREFIX: &str = "groundwork-demo:///";

/// How the demo corpus under `root` is ingested: machine-independent URIs and ids derived
/// from them and the content, so the demo session's chunk ids exist in every demo database.
pub fn ingest_options(root: &Path) -> crate::ingest::pipeline::IngestOptions {
    crate::ingest::pipeline::IngestOptions {
        uri_root: Some((root.to_path_buf(), URI_PREFIX.to_string())),
        stable_ids: true,
        // The demo session cites the chunks of one chunk per item.
        hybrid: None,
    }
}

/// Writes the corpus under `dir` (files that already hold the same bytes are left alone)
/// and returns the paths of the documents to ingest (figures are read through them).
pub fn write_corpus(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut docs = Vec::new();
    for (rel, bytes) in CORPUS {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if std::fs::read(&path).ok().as_deref() != Some(*bytes) {
            std::fs::write(&path, bytes)?;
        }
        if !rel.starts_with("figures/") {
            docs.push(path);
        }
    }
    Ok(docs)
}

/// The recorded scripted demo session, if this build has one.
pub const SESSION_JSON: Option<&str> = Some(include_str!("../../sessions/demo.json"));

/// The demo session, parsed.
pub fn session() -> Option<Result<crate::session::Session, crate::session::SessionError>> {
    SESSION_JSON
        .map(|text| crate::session::Session::from_json(text, Path::new("sessions/demo.json")))
}
