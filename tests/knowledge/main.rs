//! The knowledge base: the LanceDB store, several collections, the search cache, ingestion (Markdown, HTML, text, PDF), rerankers, the local embedder, the demo corpus and object storage.
//!
//! One test binary for the area (linked once, not once per file); each file below was a
//! binary of its own before, and keeps its name as a module.

#[path = "../support/mod.rs"]
mod support;

mod store;
mod collections;
mod search_cache;
mod ingest_pipeline;
mod real_pdf;
mod rerank;
mod local_embedder;
mod demo_corpus;
mod object_storage;
