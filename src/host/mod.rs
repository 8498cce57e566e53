//! The host: what every face (the `ask` command, the workbench) shares — composing
//! agents from the configuration, running a question against a session and committing
//! it, and the read-only views of a session (transcript, ledger, request inspection).

pub mod ask;
pub mod demo;
pub mod inspect;
pub mod transcript;
