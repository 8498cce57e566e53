//! The knowledge base: the LanceDB store, several collections, the search cache, ingestion (Markdown, HTML, text, PDF), rerankers, the local embedder, the demo corpus and object storage.
//!
//! One test binary for the area (linked once, not once per file); each file below was a
//! binary of its own before, and keeps its name as a module.

#[path = "../support/mod.rs"]
mod support;

mod collections;
mod demo_corpus;
mod haiku101;
mod hybrid_chunking;
mod ingest_pipeline;
mod local_embedder;
mod object_storage;
mod real_pdf;
mod rerank;
mod search_cache;
mod store;
