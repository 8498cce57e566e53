//! The capability engine: message model, capability interface, agent loop, deferred
//! loading and events. No terminal code lives here.
//!
//! A host runs a question like this:
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use groundwork::engine::{agent::{Agent, RunInput}, cancel::CancelToken};
//! use groundwork::config::{Config, ModelOverrides};
//! use groundwork::{model::OpenAiModel, session::Session};
//!
//! let env = groundwork::paths::process_env();
//! let config = Config::from_env(&env, &ModelOverrides::default())?.model;
//! let agent = Agent::builder(Arc::new(OpenAiModel::new(config)?))
//!     .instructions("Answer from the knowledge base.")
//!     .build()?;
//! let mut session = Session::new("my-model");
//! let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
//! let input = RunInput::prompt("What is in the manual?")
//!     .with_history(session.messages.clone())
//!     .with_state(session.state.clone());
//! // The run works on copies; commit history and state together, only on success.
//! let outcome = agent.run(input, tx, CancelToken::new()).await;
//! if session.commit_run(&outcome) {
//!     session.save(std::path::Path::new("sessions/demo.json"))?;
//! }
//! # Ok(()) }
//! ```

pub mod agent;
pub mod cancel;
pub mod capability;
pub mod chat;
pub mod discover;
pub mod events;
pub mod messages;
pub mod prompts;
pub mod tokens;
