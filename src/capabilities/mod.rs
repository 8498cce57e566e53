pub mod compaction;
pub mod similarity;
pub mod state;
