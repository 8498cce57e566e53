//! The haiku.rag capabilities: RAG and analysis over a knowledge base, the kit they
//! share, the citation ledger and policy, and evidence compaction.

pub mod analysis;
pub mod cite;
pub mod compaction;
pub mod evidence;
pub mod kit;
pub mod policy;
pub mod rag;
pub mod similarity;
pub mod spec;
pub mod state;
