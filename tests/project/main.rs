//! The project itself: the architecture map, the terminal-free core, and one build of the dependencies for `cargo run` and `cargo test`.
//!
//! One test binary for the area (linked once, not once per file); each file below was a
//! binary of its own before, and keeps its name as a module.

mod architecture;
mod build_once;
mod core_is_terminal_free;
mod docs;
