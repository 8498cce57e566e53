//! The command line: `ask`, `inspect`, `replay`, `eval`, configuration, the first run, session files and long sessions, and the field fixes.
//!
//! One test binary for the area (linked once, not once per file); each file below was a
//! binary of its own before, and keeps its name as a module.

#[path = "../support/mod.rs"]
mod support;

mod ask;
mod cli;
mod config;
mod demo_session;
mod eval;
mod field_cli;
mod field_fixes;
mod first_run;
mod inspect;
mod long_sessions;
mod replay;
mod resume;
mod secrets;
mod session_store;
mod session_texts;
mod sessions;
mod verify;
mod worked_example;
