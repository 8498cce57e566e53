//! The docling-core literals the knowledge base is written in: the schema version a
//! stored `DoclingDocument` claims and the prefix of picture item references. Their one
//! home; the ingest writer, the store, expansion, the sandbox and the capabilities
//! import them from here.

/// docling-core schema version we claim (docling-core 2.104 writes 1.10.0).
pub const DOCLING_SCHEMA_VERSION: &str = "1.10.0";

/// Prefix of picture item references (`#/pictures/0`).
pub const PICTURE_REF_PREFIX: &str = "#/pictures/";
