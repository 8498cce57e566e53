pub mod compaction;
pub mod compactor;
pub mod evidence;
pub mod policy;
pub mod rag;
pub mod similarity;
pub mod spec;
pub mod state;
