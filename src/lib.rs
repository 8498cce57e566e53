//! Groundwork: a terminal workbench for grounded research with LLM agents over
//! haiku.rag-compatible LanceDB knowledge bases.
//!
//! The core (everything outside `tui`) never depends on a terminal library; the TUI is a
//! view over what the core emits.

pub mod capabilities;
pub mod cli;
pub mod config;
pub mod embed;
pub mod engine;
pub mod errors;
pub mod eval;
pub mod exit;
pub mod host;
pub mod http;
pub mod ingest;
pub mod model;
pub mod paths;
pub mod sandbox;
pub mod session;
pub mod store;
pub mod template;
pub mod terminal_text;
pub mod timing;
pub mod tui;
