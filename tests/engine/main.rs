//! The capability engine: the agent loop, the four capabilities, the model client and its faults, token counts, the sandbox worker, the scenarios of ../shared/SCENARIOS.md, a real llama.cpp server, model discovery and the differential checks against haiku.rag 0.77.
//!
//! One test binary for the area (linked once, not once per file); each file below was a
//! binary of its own before, and keeps its name as a module.

#[path = "../support/mod.rs"]
mod support;

mod agent_loop;
mod analysis_capability;
mod compaction_fixture;
mod discover;
mod haiku_differential;
mod haiku_fixture;
mod model_client;
mod model_faults;
mod rag_capability;
mod real_server;
mod sandbox_faults;
mod scenarios_ab;
mod scenarios_cdf;
mod scenarios_g;
mod scenarios_ikl;
mod tokens;
