//! The workbench: snapshots at 80×24 and 160×48 (TestBackend + insta), the explorer, grounding and page images, popups, experiment review, token views, and the real binary in tmux.
//!
//! One test binary for the area (linked once, not once per file); each file below was a
//! binary of its own before, and keeps its name as a module.

#[path = "../support/mod.rs"]
mod support;

mod collections_workbench;
mod tui;
mod tui_explorer;
mod tui_grounding;
mod tui_popups;
mod tui_review;
mod tui_tmux;
mod tui_tokens;
mod tui_verify;
