//! The agent loop (SPEC §0): build a request, run the capability hooks, call the
//! model, execute tool calls, repeat until a final answer, an output-tool call or
//! deferred calls end the run.
//!
//! A run works on copies: [`RunInput`] hands over the history and state by value, and
//! the caller commits [`RunResult::messages`] / [`RunResult::state`] only on success
//! (see [`crate::session::Session::commit_run`]). A failed or cancelled run therefore
//! leaves the caller's history and state untouched.
//!
//! One job per file: this one holds the public types (the agent and its builder, run
//! input, result, output and errors); `run` drives a run (hooks, the model call,
//! events); `step` decides what follows at each point of the loop, as pure functions
//! with their own tests; `tools` executes the tool calls of a response; `deferred` is
//! deferred loading (SPEC §12): the catalogue in the instructions while a deferred
//! capability is collapsed, the engine-owned `load_capability` tool, and recovery of
//! loaded capabilities from the history.

/// Takes a run copy out of its slot for the duration of one hook, so the hook can
/// get `&mut self` and `&mut RunContext` (which still lends out every other copy).
macro_rules! with_run {
    ($ctx:ident, $i:expr, |$run:ident, $c:ident| $body:expr) => {{
        let i = $i;
        match $ctx.slots[i].run.take() {
            Some(mut $run) => {
                let $c = &mut *$ctx;
                let out = $body;
                $ctx.slots[i].run = Some($run);
                Some(out)
            }
            None => None,
        }
    }};
}

mod deferred;
mod run;
mod step;
mod tools;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::capability::{Capability, RunOutcomeView, ToolDef, ToolKind, ToolOutcome};
use super::chat::{ChatModel, ModelError};
use super::events::{OutputSummary, RequestSnapshot, RunUsage};
use super::messages::{ModelMessage, ToolCallPart, UserContentValue};
use super::tokens::SharedCounter;

/// Name of the engine-owned tool that loads a deferred capability (reserved).
pub use super::capability::LOAD_CAPABILITY_TOOL;
pub use deferred::load_capability_tool;

/// Why an agent could not be built.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Two capabilities share an id.
    #[error("capability id '{0}' must be unique within a run, but it is registered more than once")]
    DuplicateCapability(String),
    /// A deferred capability needs an id the model can name.
    #[error("deferred capability has an empty id")]
    EmptyDeferredId,
}

/// Why a run ended without a result.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The run was cancelled.
    #[error("run cancelled")]
    Cancelled,
    /// The model request failed.
    #[error(transparent)]
    Model(ModelError),
    /// The run made more model requests than allowed.
    #[error("the run exceeded its request limit of {limit} model requests")]
    RequestLimit {
        /// The limit.
        limit: usize,
    },
    /// A tool used up its retry budget.
    #[error("tool '{tool}' exceeded its retry budget of {max}")]
    RetriesExhausted {
        /// The tool.
        tool: String,
        /// The budget.
        max: u32,
    },
    /// A capability hook failed.
    #[error("capability '{capability}' failed in {hook}: {message}")]
    Hook {
        /// The capability.
        capability: String,
        /// The hook.
        hook: &'static str,
        /// The error.
        message: String,
    },
    /// The run input does not fit the history.
    #[error("invalid run input: {0}")]
    InvalidInput(String),
}

impl From<ModelError> for RunError {
    fn from(e: ModelError) -> Self {
        match e {
            ModelError::Cancelled => RunError::Cancelled,
            other => RunError::Model(other),
        }
    }
}

/// The tool calls a run paused on.
#[derive(Debug, Clone, PartialEq)]
pub struct DeferredRequests {
    /// The deferred calls, in response order.
    pub calls: Vec<ToolCallPart>,
}

/// Results for deferred calls, keyed by call id, handed to the resuming run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeferredResults {
    /// Call id → outcome (`Deferred` is not allowed here).
    pub results: BTreeMap<String, ToolOutcome>,
}

impl DeferredResults {
    /// Adds a result.
    pub fn with(mut self, call_id: impl Into<String>, outcome: ToolOutcome) -> Self {
        self.results.insert(call_id.into(), outcome);
        self
    }
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutput {
    /// The text of the last final response.
    Text(String),
    /// An output tool's arguments.
    Tool {
        /// The output tool.
        tool_name: String,
        /// Its arguments.
        args: Value,
    },
    /// The run paused; resume with [`RunInput::deferred_results`].
    Deferred(DeferredRequests),
}

impl RunOutput {
    fn view(&self) -> RunOutcomeView<'_> {
        match self {
            RunOutput::Text(t) => RunOutcomeView::Text(t),
            RunOutput::Tool { tool_name, args } => RunOutcomeView::Tool { tool_name, args },
            RunOutput::Deferred(_) => RunOutcomeView::Deferred,
        }
    }

    fn summary(&self) -> OutputSummary {
        match self {
            RunOutput::Text(text) => OutputSummary::Text { text: text.clone() },
            RunOutput::Tool { tool_name, args } => OutputSummary::Tool {
                tool_name: tool_name.clone(),
                args: args.clone(),
            },
            RunOutput::Deferred(d) => OutputSummary::Deferred {
                call_ids: d.calls.iter().map(|c| c.tool_call_id.clone()).collect(),
            },
        }
    }
}

/// Input of one run. History and state are moved in: the run works on them as copies.
#[derive(Debug, Clone, Default)]
pub struct RunInput {
    /// The new user prompt, if any.
    pub prompt: Option<UserContentValue>,
    /// The committed history.
    pub history: Vec<ModelMessage>,
    /// The committed host state.
    pub state: Map<String, Value>,
    /// Results for the deferred calls the history ends with.
    pub deferred_results: Option<DeferredResults>,
    /// The run id to use (a fresh UUID when `None`), so a host can tag the run before
    /// its first event arrives.
    pub run_id: Option<String>,
    /// The messages before `history`, when the host hands over only the latest part of a
    /// long history (see [`Earlier`]); `history` then starts at message `earlier.len`.
    pub earlier: Option<Arc<Earlier>>,
}

/// The messages before a run's history window, as far as a run needs them, so that a
/// host can run a question of a long conversation without building its earlier
/// questions: how many there are, what they look like on the wire once compacted (every
/// request of every later question sends them rewritten the same way), their token
/// estimates, and the few facts the hooks read from them. A run given these sends the
/// same request bodies as a run given the whole history, and its history, snapshots
/// and per-message estimates hold the window only.
///
/// Valid only for what it was made with: the compaction of the tools in
/// `compacted_for` (the run refuses another set), and a window that starts at or
/// before the compaction's carrier (the newest evidence return before the question in
/// progress), so that every message it holds is rewritten the same way by every request
/// to come.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Earlier {
    /// How many messages come before the window.
    pub len: usize,
    /// Their wire messages as compaction rewrote them, in order, each followed by a
    /// comma (the chat-completions form [`crate::model`] writes).
    pub wire: Arc<str>,
    /// The evidence tools compaction rewrote them for, in its order.
    pub compacted_for: Vec<String>,
    /// The tools whose returns they hold (compaction refuses a capability whose state
    /// was not carried when its returns are among them).
    pub returns: std::collections::BTreeSet<String>,
    /// Their token estimates summed, as stored and as sent.
    pub raw_tokens: usize,
    /// See `raw_tokens`.
    pub sent_tokens: usize,
    /// The deferred capabilities they loaded (`load_capability` calls answered).
    pub loaded: std::collections::BTreeSet<String>,
}

impl Earlier {
    /// How many messages come before the window of `earlier` (none without one).
    pub fn len_of(earlier: Option<&Arc<Earlier>>) -> usize {
        earlier.map_or(0, |e| e.len)
    }
}

impl RunInput {
    /// A run asking `prompt` with no history.
    pub fn prompt(prompt: impl Into<UserContentValue>) -> Self {
        RunInput {
            prompt: Some(prompt.into()),
            ..RunInput::default()
        }
    }

    /// Sets the history.
    pub fn with_history(mut self, history: Vec<ModelMessage>) -> Self {
        self.history = history;
        self
    }

    /// Sets the state.
    pub fn with_state(mut self, state: Map<String, Value>) -> Self {
        self.state = state;
        self
    }

    /// Hands over only the window of a long history: `history` then holds the messages
    /// after `earlier.len`.
    pub fn with_earlier(mut self, earlier: Arc<Earlier>) -> Self {
        self.earlier = Some(earlier);
        self
    }

    /// Sets the run id.
    pub fn with_run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = Some(run_id.into());
        self
    }
}

/// What a successful run returns.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The run id.
    pub run_id: String,
    /// The output.
    pub output: RunOutput,
    /// The full history after the run (input history + new messages); the window's
    /// messages only when the run was given [`RunInput::earlier`].
    pub messages: Vec<ModelMessage>,
    /// Index of the first message this run added (in `messages`).
    pub new_message_index: usize,
    /// What the run was given before its window (`messages` and the snapshots' `raw`,
    /// `compacted` and per-message estimates then start at message `earlier.len`).
    pub earlier: Option<Arc<Earlier>>,
    /// The state after the run.
    pub state: Map<String, Value>,
    /// Usage.
    pub usage: RunUsage,
    /// One snapshot per model request.
    pub requests: Vec<RequestSnapshot>,
    /// The per-message token estimates the run made for its requests (so that saving
    /// them does not estimate the whole history again).
    pub estimates: Arc<crate::engine::events::EstimateMemo>,
    /// When the run started.
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// Wall-clock duration of the run.
    pub duration_ms: u64,
}

/// Builds an [`Agent`].
pub struct AgentBuilder {
    model: Arc<dyn ChatModel>,
    instructions: Vec<String>,
    capabilities: Vec<Arc<dyn Capability>>,
    output_tools: Vec<ToolDef>,
    request_limit: Option<usize>,
    max_retries: u32,
    counter: Option<SharedCounter>,
}

impl AgentBuilder {
    /// The token counter of its requests (default: [`crate::engine::tokens::for_model`]
    /// of the model's name).
    pub fn token_counter(mut self, counter: SharedCounter) -> Self {
        self.counter = Some(counter);
        self
    }

    /// Base instructions (joined with a blank line when called more than once).
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions.push(text.into());
        self
    }

    /// Registers a capability (registration order is hook order).
    pub fn capability(mut self, capability: Arc<dyn Capability>) -> Self {
        self.capabilities.push(capability);
        self
    }

    /// Adds an output tool: calling it ends the run with its arguments.
    pub fn output_tool(mut self, mut tool: ToolDef) -> Self {
        tool.kind = ToolKind::Output;
        tool.capability_id = None;
        self.output_tools.push(tool);
        self
    }

    /// Maximum model requests per run (`None`: unlimited). Default 50.
    pub fn request_limit(mut self, limit: Option<usize>) -> Self {
        self.request_limit = limit;
        self
    }

    /// Retry budget for unknown tools and invalid output-tool arguments. Default 3.
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// Validates and builds. Capability ids must be unique.
    pub fn build(self) -> Result<Agent, AgentError> {
        let mut seen = HashSet::new();
        for c in &self.capabilities {
            if !seen.insert(c.id().to_string()) {
                return Err(AgentError::DuplicateCapability(c.id().to_string()));
            }
            if c.defer_loading() && c.id().trim().is_empty() {
                return Err(AgentError::EmptyDeferredId);
            }
        }
        let counter = self
            .counter
            .unwrap_or_else(|| super::tokens::for_model(self.model.model_name()));
        Ok(Agent {
            counter,
            model: self.model,
            instructions: self.instructions.join("\n\n"),
            capabilities: self.capabilities,
            output_tools: self.output_tools,
            request_limit: self.request_limit,
            max_retries: self.max_retries,
        })
    }
}

/// An agent: a model, base instructions, capabilities and output tools.
pub struct Agent {
    model: Arc<dyn ChatModel>,
    counter: SharedCounter,
    instructions: String,
    capabilities: Vec<Arc<dyn Capability>>,
    output_tools: Vec<ToolDef>,
    request_limit: Option<usize>,
    max_retries: u32,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.model.model_name())
            .field(
                "capabilities",
                &self
                    .capabilities
                    .iter()
                    .map(|c| c.id().to_string())
                    .collect::<Vec<_>>(),
            )
            .field("request_limit", &self.request_limit)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Starts building an agent on `model`.
    pub fn builder(model: Arc<dyn ChatModel>) -> AgentBuilder {
        AgentBuilder {
            model,
            instructions: Vec::new(),
            capabilities: Vec::new(),
            output_tools: Vec::new(),
            request_limit: Some(50),
            max_retries: 3,
            counter: None,
        }
    }

    /// Whether a run of this agent can be given only a window of a long history
    /// ([`RunInput::earlier`]): its model sends earlier messages as written, and its
    /// token counter is the estimate (a tokenizer would have to count them all).
    pub fn takes_earlier(&self) -> bool {
        self.model.wire_text(&[]).is_some()
            && self.counter.name() == crate::engine::tokens::ESTIMATE_NAME
    }

    /// `messages` as [`Earlier::wire`] holds them, for this agent's model (`None` when it
    /// cannot send earlier messages as written).
    pub fn earlier_wire(&self, messages: &[ModelMessage]) -> Option<String> {
        self.model.wire_text(messages)
    }

    /// The registered capability ids, in order.
    pub fn capability_ids(&self) -> Vec<String> {
        self.capabilities
            .iter()
            .map(|c| c.id().to_string())
            .collect()
    }
}
