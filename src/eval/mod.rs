//! Experiments (`groundwork eval`): a question set ([`questions`]) run through arms
//! ([`experiment`]: `ask`'s flags, typed settings, TOML experiment files), every question
//! headless through the host's conversation, the engine path of `ask` ([`run`]); results
//! appended one line at a time ([`results`]), the arms reported side by side
//! ([`report`]), and the folder as a review table with marks that are saved as they are
//! given ([`review`]). The face parses the flags and shows the progress.

pub mod experiment;
pub mod gate;
pub mod paired;
pub mod questions;
pub mod report;
pub mod results;
pub mod review;
pub mod run;

pub use experiment::{ArmEntry, Experiment, Settings};
pub use questions::Entry;
pub use report::Report;
pub use results::{ResultRecord, Review};
pub use review::{Filter, ReviewTable};
pub use run::{Arm, EvalError, Plan, Progress, Summary, run};
