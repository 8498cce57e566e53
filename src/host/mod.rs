//! The host: what every face (the `ask` command, the workbench) shares — composing
//! agents from the configuration ([`compose`]), asking a question over a session and
//! committing and saving it ([`conversation`], [`ask`]), and the read-only views of a
//! session (transcript, ledger, request inspection), and a question run again with
//! other settings beside the original ([`replay`]), and an answer's claims checked
//! against what they cite by a judge model ([`verify`]).

pub mod ask;
pub mod compose;
pub mod conversation;
pub mod demo;
pub mod explore;
pub mod grounding;
pub mod inspect;
mod inspect_tokens;
pub mod replay;
pub mod resume;
pub mod transcript;
pub mod verify;
