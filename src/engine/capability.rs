//! The capability interface (SPEC §0.3) and the per-run context.
//!
//! A [`Capability`] is registered once on an agent. For every run, each registered
//! capability (loaded or not) makes a per-run copy through [`Capability::for_run`]; the
//! copies implement [`CapabilityRun`] and receive the hooks in this order:
//!
//! 1. `for_run` (every capability)
//! 2. `before_run` (registration order, active capabilities)
//! 3. per model request: `prepare_tools`; `before_model_request` (registration
//!    order); `wrap_model_request` (a chain in registration order); the model call;
//!    `after_model_request` (reverse order)
//! 4. `call_tool` for each call of the response, sequentially
//! 5. `after_run` (reverse order, **every** run copy, loaded or not) or `on_run_error`
//!    (reverse order, every run copy) when the run failed or was cancelled.
//!
//! A deferred capability that the model has not loaded is *dormant*: only `for_run`,
//! `after_run` and `on_run_error` reach it (SPEC §12, port decision).
//!
//! Async hooks return a [`BoxFuture`]; implement them as
//! `Box::pin(async move { ... })`.

use std::any::Any;
use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::cancel::CancelToken;
pub use super::chat::BoxFuture;
use super::messages::{ModelMessage, ModelResponse, UserContent, UserContentValue};

/// Name of the engine-owned tool that loads a deferred capability (reserved; SPEC §12).
/// Its one home: the agent loop and the capabilities import it from here.
pub const LOAD_CAPABILITY_TOOL: &str = "load_capability";

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// Tool name (machine literal).
    pub name: String,
    /// One-line description for the model.
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: Value,
    /// Owning capability; `None` for engine and host tools.
    pub capability_id: Option<String>,
    /// Function tool or output tool.
    #[serde(default)]
    pub kind: ToolKind,
}

impl ToolDef {
    /// A function tool.
    pub fn function(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> Self {
        ToolDef {
            name: name.into(),
            description: description.into(),
            parameters,
            capability_id: None,
            kind: ToolKind::Function,
        }
    }

    /// An output tool: calling it ends the run with its arguments as the result.
    pub fn output(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> Self {
        ToolDef {
            kind: ToolKind::Output,
            ..ToolDef::function(name, description, parameters)
        }
    }
}

/// What calling a tool does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Runs `call_tool`; the result goes back to the model.
    #[default]
    Function,
    /// Ends the run; the arguments are the run's output.
    Output,
}

/// A successful tool result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// Becomes the tool return's content (usually a string).
    pub content: Value,
    /// Extra user-prompt items (text, images) sent in the same request, after the
    /// tool returns (SPEC §0.1 rich output).
    pub extra: Vec<UserContent>,
    /// Becomes the tool return's `metadata`: kept in the history for the application
    /// (the inspector), never sent to the model (pydantic-ai `ToolReturn.metadata`).
    pub metadata: Option<Value>,
}

impl ToolOutput {
    /// A plain text result.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            content: Value::String(text.into()),
            extra: Vec::new(),
            metadata: None,
        }
    }

    /// A JSON result.
    pub fn json(content: Value) -> Self {
        ToolOutput {
            content,
            extra: Vec::new(),
            metadata: None,
        }
    }

    /// Adds extra user-prompt items.
    pub fn with_extra(mut self, extra: Vec<UserContent>) -> Self {
        self.extra = extra;
        self
    }

    /// Sets the tool return's metadata (not sent to the model).
    pub fn with_metadata(mut self, metadata: Value) -> Self {
        self.metadata = Some(metadata);
        self
    }
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// Success.
    Ok(ToolOutput),
    /// A terminal failure (pydantic-ai `ToolFailed`): a tool return with outcome
    /// `failed`. Uses no retry budget.
    Failed(String),
    /// Ask the model to try again (pydantic-ai `ModelRetry`): a retry prompt. Counts
    /// against the owning toolset's retry budget; running out aborts the run.
    Retry(String),
    /// The result comes later (external work, approval): the run ends with
    /// deferred requests.
    Deferred,
}

/// When an enqueued message is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// When the run would otherwise end with a final answer: the message becomes a new
    /// user request and the loop makes another model request.
    WhenIdle,
}

/// A user message a capability wants delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct Enqueued {
    /// The message.
    pub content: UserContentValue,
    /// When to deliver it.
    pub priority: Priority,
}

impl Enqueued {
    /// A message delivered when the run would otherwise end.
    pub fn when_idle(content: impl Into<UserContentValue>) -> Self {
        Enqueued {
            content: content.into(),
            priority: Priority::WhenIdle,
        }
    }
}

/// A registered capability (the long-lived object; see the module docs).
pub trait Capability: Send + Sync {
    /// Stable id, unique within an agent.
    fn id(&self) -> &str;

    /// One-line description for the deferred-capability catalogue.
    fn description(&self) -> Option<String> {
        None
    }

    /// Whether the capability starts collapsed behind `load_capability`.
    fn defer_loading(&self) -> bool {
        false
    }

    /// Retry budget of this capability's toolset (consecutive retries per tool).
    fn max_retries(&self) -> u32 {
        3
    }

    /// Makes the per-run copy. Called for every registered capability at the start of
    /// every run, loaded or not. May read and write the host state.
    fn for_run(&self, ctx: &mut ForRunContext<'_>) -> anyhow::Result<Box<dyn CapabilityRun>>;
}

/// What `for_run` sees.
#[derive(Debug)]
pub struct ForRunContext<'a> {
    /// The run id.
    pub run_id: &'a str,
    /// The history as handed to the run, before the new prompt is appended (its window
    /// only, after `earlier` messages, when the host handed over a window).
    pub history: &'a [ModelMessage],
    /// How many messages come before `history` ([`crate::engine::agent::Earlier`]).
    pub earlier: usize,
    /// Whether the run has a new user prompt.
    pub has_prompt: bool,
    /// Whether the run resumes deferred tool calls.
    pub resuming_deferred: bool,
    /// The run's copy of the host state, keyed by namespace.
    pub state: &'a mut Map<String, Value>,
    /// Whether the capability starts this run loaded (always true when not deferred).
    pub active: bool,
}

/// The per-run copy of a capability. Every hook has a default that does nothing.
pub trait CapabilityRun: Any + Send + Sync {
    /// For downcasting by other capabilities (see [`RunContext::capability_as`]).
    fn as_any(&self) -> &dyn Any;

    /// Once per run, before the first request (registration order).
    fn before_run<'a>(&'a mut self, _ctx: &'a mut RunContext) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }

    /// Instructions added to every request while the capability is active. Also the
    /// payload of a `load_capability` return.
    fn instructions(&self, _ctx: &RunContext) -> Option<String> {
        None
    }

    /// The tools this capability offers. The engine stamps `capability_id`.
    fn tools(&self, _ctx: &RunContext) -> Vec<ToolDef> {
        Vec::new()
    }

    /// Edits the visible tool list for the coming request (remove own tools, ...).
    fn prepare_tools(&mut self, _ctx: &RunContext, _tools: &mut Vec<ToolDef>) {}

    /// Before each request (registration order). `ctx.messages` already ends with the
    /// request about to be sent, so `ctx.epoch()` is the request's epoch. Returns extra
    /// instructions for this request only.
    fn before_model_request<'a>(
        &'a mut self,
        _ctx: &'a mut RunContext,
    ) -> BoxFuture<'a, anyhow::Result<Option<String>>> {
        Box::pin(async { Ok(None) })
    }

    /// Rewrites the outgoing copy of the messages (a middleware chain in registration
    /// order). Stored history is not touched.
    fn wrap_model_request<'a>(
        &'a mut self,
        _ctx: &'a mut RunContext,
        outgoing: Vec<ModelMessage>,
    ) -> BoxFuture<'a, anyhow::Result<Vec<ModelMessage>>> {
        Box::pin(async move { Ok(outgoing) })
    }

    /// After each response (reverse registration order). May enqueue user messages.
    fn after_model_request<'a>(
        &'a mut self,
        _ctx: &'a mut RunContext,
        _response: &'a ModelResponse,
    ) -> BoxFuture<'a, anyhow::Result<Vec<Enqueued>>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Runs one of this capability's tools.
    fn call_tool<'a>(
        &'a mut self,
        name: &'a str,
        _args: Map<String, Value>,
        _ctx: &'a mut RunContext,
    ) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move { ToolOutcome::Failed(format!("tool {name} is not implemented")) })
    }

    /// After a run that produced a result (reverse order, every run copy).
    fn after_run<'a>(
        &'a mut self,
        _ctx: &'a mut RunContext,
        _result: &'a RunOutcomeView<'a>,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }

    /// After a run that failed or was cancelled (reverse order, every run copy).
    fn on_run_error<'a>(
        &'a mut self,
        _ctx: &'a mut RunContext,
        _error: &'a str,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// What `after_run` learns about the result.
#[derive(Debug, Clone)]
pub enum RunOutcomeView<'a> {
    /// A text answer.
    Text(&'a str),
    /// An output tool's arguments.
    Tool {
        /// The output tool.
        tool_name: &'a str,
        /// Its arguments.
        args: &'a Value,
    },
    /// The run paused for deferred tool calls.
    Deferred,
}

impl RunOutcomeView<'_> {
    /// Whether the run paused for deferred calls (questions stay open then).
    pub fn is_deferred(&self) -> bool {
        matches!(self, RunOutcomeView::Deferred)
    }
}

/// One registered capability's per-run slot.
pub(crate) struct RunSlot {
    pub(crate) id: String,
    /// `None` while the run copy is busy in one of its own hooks.
    pub(crate) run: Option<Box<dyn CapabilityRun>>,
}

/// Everything a hook may look at or change during a run.
pub struct RunContext {
    /// The run id (a UUID).
    pub run_id: String,
    /// Model requests started so far in this run (1 during the first request).
    pub run_step: usize,
    /// The run's working history (a copy; the caller's history is untouched). When the
    /// host handed over only a window of a long history, its messages start at message
    /// [`RunContext::earlier_len`]: every message index a hook keeps (a question's
    /// identity, say) counts the earlier messages too.
    pub messages: Vec<ModelMessage>,
    /// The messages before the window, as the host described them.
    pub earlier: Option<std::sync::Arc<crate::engine::agent::Earlier>>,
    /// The run's working copy of the host state, keyed by namespace.
    pub state: Map<String, Value>,
    /// Number of messages in the history handed to the run, before the new prompt
    /// (the question identity of SPEC §0.2), earlier messages included.
    pub history_len: usize,
    /// The run's cancellation token.
    pub cancel: CancelToken,
    pub(crate) slots: Vec<RunSlot>,
    pub(crate) active: BTreeSet<String>,
}

impl std::fmt::Debug for RunContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext")
            .field("run_id", &self.run_id)
            .field("run_step", &self.run_step)
            .field("messages", &self.messages.len())
            .field("history_len", &self.history_len)
            .field("active", &self.active)
            .finish_non_exhaustive()
    }
}

impl ForRunContext<'_> {
    /// The length of the history handed to the run, earlier messages included.
    pub fn history_len(&self) -> usize {
        self.earlier + self.history.len()
    }
}

impl RunContext {
    /// The history's length, earlier messages included: during `before_model_request`
    /// this is the epoch of the request about to be sent (SPEC §0.2).
    pub fn epoch(&self) -> usize {
        self.earlier_len() + self.messages.len()
    }

    /// How many messages come before [`RunContext::messages`].
    pub fn earlier_len(&self) -> usize {
        crate::engine::agent::Earlier::len_of(self.earlier.as_ref())
    }

    /// Ids of every registered capability, in registration order.
    pub fn capability_ids(&self) -> impl Iterator<Item = &str> {
        self.slots.iter().map(|s| s.id.as_str())
    }

    /// Whether the capability is active (not deferred, or loaded).
    pub fn is_active(&self, id: &str) -> bool {
        self.active.contains(id)
    }

    /// Another capability's run copy. `None` for an unknown id, and for the calling
    /// capability itself while its hook runs (it has `self`).
    pub fn capability(&self, id: &str) -> Option<&dyn CapabilityRun> {
        self.slots
            .iter()
            .find(|s| s.id == id)
            .and_then(|s| s.run.as_deref())
    }

    /// Another capability's run copy, downcast to its concrete type.
    pub fn capability_as<T: CapabilityRun>(&self, id: &str) -> Option<&T> {
        self.capability(id)
            .and_then(|r| r.as_any().downcast_ref::<T>())
    }

    /// Every other run copy of type `T`, with its id (e.g. every evidence capability).
    pub fn capabilities_of<T: CapabilityRun>(&self) -> Vec<(&str, &T)> {
        self.slots
            .iter()
            .filter_map(|s| {
                s.run
                    .as_deref()
                    .and_then(|r| r.as_any().downcast_ref::<T>())
                    .map(|r| (s.id.as_str(), r))
            })
            .collect()
    }
}
