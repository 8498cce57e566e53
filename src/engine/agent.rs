//! The agent loop (SPEC §0): build a request, run the capability hooks, call the
//! model, execute tool calls, repeat until a final answer, an output-tool call or
//! deferred calls end the run.
//!
//! A run works on copies: [`RunInput`] hands over the history and state by value, and
//! the caller commits [`RunResult::messages`] / [`RunResult::state`] only on success
//! (see [`crate::session::Session::commit_run`]). A failed or cancelled run therefore
//! leaves the caller's history and state untouched.
//!
//! Deferred loading (SPEC §12) lives here too: the catalogue in the instructions while
//! a deferred capability is collapsed, the engine-owned `load_capability` tool, and
//! recovery of loaded capabilities from the history.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::cancel::CancelToken;
use super::capability::{
    Capability, Enqueued, ForRunContext, Priority, RunContext, RunOutcomeView, RunSlot, ToolDef,
    ToolKind, ToolOutcome, ToolOutput,
};
use super::events::{
    CoreEvent, EventSink, OutputSummary, RequestSnapshot, RunUsage, TokenCounts, ToolCallStatus,
    summarize,
};
use super::messages::{
    CAPABILITY_LOAD_TOOL_KIND, ModelMessage, ModelRequest, ModelRequestPart, ModelResponse,
    ModelResponsePart, RetryPromptPart, ToolCallPart, ToolReturnPart, UserContent,
    UserContentValue, UserPromptPart,
};
use super::prompts;
use crate::model::{ChatModel, ModelError, ModelRequestParams, StreamDelta};

/// Name of the engine-owned tool that loads a deferred capability (reserved).
pub use super::capability::LOAD_CAPABILITY_TOOL;

/// Retry budget of `load_capability` (as in pydantic-ai).
const LOAD_CAPABILITY_MAX_RETRIES: u32 = 1;

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
    /// The full history after the run (input history + new messages).
    pub messages: Vec<ModelMessage>,
    /// Index of the first message this run added.
    pub new_message_index: usize,
    /// The state after the run.
    pub state: Map<String, Value>,
    /// Usage.
    pub usage: RunUsage,
    /// One snapshot per model request.
    pub requests: Vec<RequestSnapshot>,
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
}

impl AgentBuilder {
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
        Ok(Agent {
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

/// How the tool calls of one response ended.
enum StepEnd {
    Continue(Vec<ModelRequestPart>),
    Output(Vec<ModelRequestPart>, String, Value),
    Deferred(Vec<ModelRequestPart>, Vec<ToolCallPart>),
}

/// Per-run bookkeeping that is not part of the hook context.
struct Loop<'e> {
    events: &'e EventSink,
    request: usize,
    usage: RunUsage,
    snapshots: Vec<RequestSnapshot>,
    /// Consecutive-step retry counts per tool name.
    retries: HashMap<String, u32>,
    pending: Vec<Enqueued>,
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
        }
    }

    /// The registered capability ids, in order.
    pub fn capability_ids(&self) -> Vec<String> {
        self.capabilities
            .iter()
            .map(|c| c.id().to_string())
            .collect()
    }

    /// Deferred capabilities the history shows as loaded: a `load_capability` call for
    /// a registered deferred id answered by a successful tool return.
    pub fn loaded_from_history(&self, history: &[ModelMessage]) -> BTreeSet<String> {
        let deferred: HashSet<&str> = self
            .capabilities
            .iter()
            .filter(|c| c.defer_loading())
            .map(|c| c.id())
            .collect();
        let mut by_call: HashMap<&str, String> = HashMap::new();
        let mut loaded = BTreeSet::new();
        for message in history {
            match message {
                ModelMessage::Response(r) => {
                    for call in r
                        .tool_calls()
                        .filter(|c| c.tool_name == LOAD_CAPABILITY_TOOL)
                    {
                        if let Some(id) = call
                            .args_as_object()
                            .ok()
                            .and_then(|a| a.get("id").and_then(Value::as_str).map(str::to_owned))
                        {
                            by_call.insert(call.tool_call_id.as_str(), id);
                        }
                    }
                }
                ModelMessage::Request(r) => {
                    for part in &r.parts {
                        if let ModelRequestPart::ToolReturn(t) = part
                            && t.tool_name == LOAD_CAPABILITY_TOOL
                            && !t.is_failed()
                            && let Some(id) = by_call.get(t.tool_call_id.as_str())
                            && deferred.contains(id.as_str())
                        {
                            loaded.insert(id.clone());
                        }
                    }
                }
            }
        }
        loaded
    }

    /// Runs one question (or a resumption). Events go to `events`; `cancel` stops the
    /// run at the next await point. On error the input copies are dropped, so the
    /// caller's committed history and state are untouched.
    pub async fn run(
        &self,
        input: RunInput,
        events: impl Into<EventSink>,
        cancel: CancelToken,
    ) -> Result<RunResult, RunError> {
        let events = events.into();
        let started_at = chrono::Utc::now();
        let clock = std::time::Instant::now();
        let RunInput {
            prompt,
            history,
            mut state,
            deferred_results,
            run_id,
        } = input;
        let run_id = run_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let history_len = history.len();

        // 1. for_run: every registered capability gets a run copy.
        let loaded = self.loaded_from_history(&history);
        let mut active = BTreeSet::new();
        let mut slots = Vec::with_capacity(self.capabilities.len());
        for cap in &self.capabilities {
            let is_active = !cap.defer_loading() || loaded.contains(cap.id());
            if is_active {
                active.insert(cap.id().to_string());
            }
            let mut fctx = ForRunContext {
                run_id: &run_id,
                history: &history,
                has_prompt: prompt.is_some(),
                resuming_deferred: deferred_results.is_some(),
                state: &mut state,
                active: is_active,
            };
            match cap.for_run(&mut fctx) {
                Ok(run) => slots.push(RunSlot {
                    id: cap.id().to_string(),
                    run: Some(run),
                }),
                Err(e) => {
                    let err = RunError::Hook {
                        capability: cap.id().to_string(),
                        hook: "for_run",
                        message: format!("{e:#}"),
                    };
                    events.emit(CoreEvent::RunFailed {
                        run_id,
                        request: 0,
                        error: err.to_string(),
                    });
                    return Err(err);
                }
            }
        }
        let mut owned_ctx = RunContext {
            run_id: run_id.clone(),
            run_step: 0,
            messages: history,
            state,
            history_len,
            cancel,
            slots,
            active,
        };
        let ctx = &mut owned_ctx;
        events.emit(CoreEvent::StateChanged {
            run_id: run_id.clone(),
            request: 0,
            state: ctx.state.clone(),
        });

        let mut lp = Loop {
            events: &events,
            request: 0,
            usage: RunUsage::default(),
            snapshots: Vec::new(),
            retries: HashMap::new(),
            pending: Vec::new(),
        };
        let outcome = self.drive(ctx, &mut lp, prompt, deferred_results).await;
        let outcome = match outcome {
            Ok(output) => self.after_run(ctx, &output).await.map(|()| output),
            Err(e) => Err(e),
        };
        let request = lp.request;
        match outcome {
            Ok(output) => {
                events.emit(CoreEvent::StateChanged {
                    run_id: run_id.clone(),
                    request,
                    state: ctx.state.clone(),
                });
                events.emit(CoreEvent::RunFinished {
                    run_id: run_id.clone(),
                    request,
                    output: output.summary(),
                    messages: ctx.messages.clone(),
                    state: ctx.state.clone(),
                    usage: Box::new(lp.usage.clone()),
                });
                Ok(RunResult {
                    run_id,
                    output,
                    messages: std::mem::take(&mut ctx.messages),
                    new_message_index: history_len,
                    state: std::mem::take(&mut ctx.state),
                    usage: lp.usage,
                    requests: lp.snapshots,
                    started_at,
                    duration_ms: u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX),
                })
            }
            Err(err) => {
                let text = err.to_string();
                for i in (0..ctx.slots.len()).rev() {
                    with_run!(ctx, i, |run, c| run.on_run_error(c, &text).await);
                }
                match err {
                    RunError::Cancelled => events.emit(CoreEvent::RunCancelled { run_id, request }),
                    _ => events.emit(CoreEvent::RunFailed {
                        run_id,
                        request,
                        error: text,
                    }),
                }
                Err(err)
            }
        }
    }

    /// `after_run` on every run copy, reverse registration order.
    async fn after_run(&self, ctx: &mut RunContext, output: &RunOutput) -> Result<(), RunError> {
        let view = output.view();
        for i in (0..ctx.slots.len()).rev() {
            let id = ctx.slots[i].id.clone();
            if let Some(Err(e)) = with_run!(ctx, i, |run, c| run.after_run(c, &view).await) {
                return Err(hook_error(&id, "after_run", e));
            }
        }
        Ok(())
    }

    fn active_indices(&self, ctx: &RunContext) -> Vec<usize> {
        (0..ctx.slots.len())
            .filter(|&i| ctx.active.contains(&ctx.slots[i].id))
            .collect()
    }

    /// The loop proper: requests and tool calls until the run has an output.
    async fn drive(
        &self,
        ctx: &mut RunContext,
        lp: &mut Loop<'_>,
        prompt: Option<UserContentValue>,
        deferred_results: Option<DeferredResults>,
    ) -> Result<RunOutput, RunError> {
        // 2. before_run, registration order, active capabilities.
        for i in self.active_indices(ctx) {
            let id = ctx.slots[i].id.clone();
            if let Some(Err(e)) = with_run!(ctx, i, |run, c| run.before_run(c).await) {
                return Err(hook_error(&id, "before_run", e));
            }
        }

        // The first request of this run.
        // Deferred results and a new prompt share one request, results first.
        let mut parts = match deferred_results {
            Some(results) => self.resume_parts(ctx, results)?,
            None => Vec::new(),
        };
        if let Some(prompt) = prompt {
            parts.push(ModelRequestPart::UserPrompt(UserPromptPart::new(prompt)));
        }
        let mut next_parts: Option<Vec<ModelRequestPart>> =
            if parts.is_empty() && matches!(ctx.messages.last(), Some(ModelMessage::Request(_))) {
                // A promptless run on a history ending with a request sends it as is.
                None
            } else {
                Some(parts)
            };

        loop {
            if ctx.cancel.is_cancelled() {
                return Err(RunError::Cancelled);
            }
            if let Some(parts) = next_parts.take() {
                let request = self.stamp(ModelRequest::new(parts), ctx);
                ctx.messages.push(ModelMessage::Request(request));
            }
            let (response, offered) = self.model_step(ctx, lp).await?;

            let calls: Vec<ToolCallPart> = response.tool_calls().cloned().collect();
            if calls.is_empty() {
                let idle = take_when_idle(lp);
                if idle.is_empty() {
                    return Ok(RunOutput::Text(response.text()));
                }
                next_parts = Some(idle);
                continue;
            }

            match self.execute_calls(ctx, lp, &calls, &offered).await? {
                StepEnd::Continue(parts) => next_parts = Some(parts),
                StepEnd::Output(mut parts, tool_name, args) => {
                    // A structured answer ends the question like a text answer: messages
                    // waiting for the run to go idle (the policy's redirect) are delivered
                    // with the output tool's return, and the model answers again.
                    let idle = take_when_idle(lp);
                    if !idle.is_empty() {
                        parts.extend(idle);
                        next_parts = Some(parts);
                        continue;
                    }
                    ctx.messages.push(ModelMessage::Request(
                        self.stamp(ModelRequest::new(parts), ctx),
                    ));
                    return Ok(RunOutput::Tool { tool_name, args });
                }
                StepEnd::Deferred(parts, deferred) => {
                    if !parts.is_empty() {
                        ctx.messages.push(ModelMessage::Request(
                            self.stamp(ModelRequest::new(parts), ctx),
                        ));
                    }
                    return Ok(RunOutput::Deferred(DeferredRequests { calls: deferred }));
                }
            }
        }
    }

    fn stamp(&self, mut request: ModelRequest, ctx: &RunContext) -> ModelRequest {
        request.run_id = Some(ctx.run_id.clone());
        request
    }

    /// Tool-result parts for resuming deferred calls.
    fn resume_parts(
        &self,
        ctx: &RunContext,
        mut results: DeferredResults,
    ) -> Result<Vec<ModelRequestPart>, RunError> {
        let Some(pos) = ctx
            .messages
            .iter()
            .rposition(|m| matches!(m, ModelMessage::Response(_)))
        else {
            return Err(RunError::InvalidInput(
                "deferred results were given, but the history has no model response".into(),
            ));
        };
        let answered: HashSet<&str> = ctx.messages[pos + 1..]
            .iter()
            .filter_map(ModelMessage::as_request)
            .flat_map(|r| r.parts.iter())
            .filter_map(|p| match p {
                ModelRequestPart::ToolReturn(t) => Some(t.tool_call_id.as_str()),
                ModelRequestPart::RetryPrompt(r) => Some(r.tool_call_id.as_str()),
                _ => None,
            })
            .collect();
        let response = ctx.messages[pos].as_response().expect("found a response");
        let mut parts = Vec::new();
        let mut extra = Vec::new();
        for call in response.tool_calls() {
            if answered.contains(call.tool_call_id.as_str()) {
                continue;
            }
            let outcome = results.results.remove(&call.tool_call_id).ok_or_else(|| {
                RunError::InvalidInput(format!(
                    "no deferred result for tool call '{}' ({})",
                    call.tool_call_id, call.tool_name
                ))
            })?;
            if outcome == ToolOutcome::Deferred {
                return Err(RunError::InvalidInput(format!(
                    "deferred result for '{}' is itself deferred",
                    call.tool_call_id
                )));
            }
            let (part, items, _) = outcome_to_part(call, outcome);
            parts.push(part);
            extra.extend(items);
        }
        if let Some(unknown) = results.results.keys().next() {
            return Err(RunError::InvalidInput(format!(
                "deferred result for '{unknown}', which is not an open tool call"
            )));
        }
        if !extra.is_empty() {
            parts.push(ModelRequestPart::UserPrompt(UserPromptPart::new(extra)));
        }
        Ok(parts)
    }

    /// The tools for the coming request, before `prepare_tools`.
    fn collect_tools(&self, ctx: &RunContext) -> Result<Vec<ToolDef>, RunError> {
        let mut tools = Vec::new();
        if self.capabilities.iter().any(|c| c.defer_loading()) {
            tools.push(load_capability_tool());
        }
        for i in self.active_indices(ctx) {
            let slot = &ctx.slots[i];
            let Some(run) = slot.run.as_deref() else {
                continue;
            };
            for mut tool in run.tools(ctx) {
                tool.capability_id = Some(slot.id.clone());
                tools.push(tool);
            }
        }
        tools.extend(self.output_tools.iter().cloned());
        let mut names = HashSet::new();
        for t in &tools {
            if !names.insert(t.name.as_str()) {
                let owner = t.capability_id.clone().unwrap_or_else(|| "agent".into());
                let message = if t.name == LOAD_CAPABILITY_TOOL {
                    format!(
                        "the tool name '{LOAD_CAPABILITY_TOOL}' is reserved for deferred capability loading"
                    )
                } else {
                    format!("the tool name '{}' is offered twice", t.name)
                };
                return Err(RunError::Hook {
                    capability: owner,
                    hook: "tools",
                    message,
                });
            }
        }
        Ok(tools)
    }

    /// Base instructions, active capabilities' instructions, the deferred catalogue
    /// and this request's additions, joined by blank lines.
    fn build_instructions(&self, ctx: &RunContext, additions: Vec<String>) -> String {
        let mut sections = Vec::new();
        if !self.instructions.trim().is_empty() {
            sections.push(self.instructions.clone());
        }
        for i in self.active_indices(ctx) {
            if let Some(text) = ctx.slots[i]
                .run
                .as_deref()
                .and_then(|r| r.instructions(ctx))
                && !text.trim().is_empty()
            {
                sections.push(text);
            }
        }
        let deferred: Vec<&Arc<dyn Capability>> = self
            .capabilities
            .iter()
            .filter(|c| c.defer_loading())
            .collect();
        if deferred.iter().any(|c| !ctx.active.contains(c.id())) {
            let mut lines = vec![prompts::deferred_catalogue_header().to_string()];
            for c in deferred {
                lines.push(match c.description() {
                    Some(d) => format!("- {}: {}", c.id(), d),
                    None => format!("- {}", c.id()),
                });
            }
            lines.push(prompts::deferred_catalogue_footer().to_string());
            sections.push(lines.join("\n"));
        }
        sections.extend(additions.into_iter().filter(|a| !a.trim().is_empty()));
        sections.join("\n\n")
    }

    /// One model request: tools, hooks, wrap chain, the call, after hooks.
    async fn model_step(
        &self,
        ctx: &mut RunContext,
        lp: &mut Loop<'_>,
    ) -> Result<(ModelResponse, Vec<ToolDef>), RunError> {
        lp.request += 1;
        if let Some(limit) = self.request_limit
            && lp.request > limit
        {
            return Err(RunError::RequestLimit { limit });
        }
        ctx.run_step = lp.request;
        let active = self.active_indices(ctx);

        // a. prepare_tools
        let mut tools = self.collect_tools(ctx)?;
        for &i in &active {
            if let Some(mut run) = ctx.slots[i].run.take() {
                run.prepare_tools(ctx, &mut tools);
                ctx.slots[i].run = Some(run);
            }
        }
        // b. before_model_request, registration order
        let mut additions = Vec::new();
        for &i in &active {
            let id = ctx.slots[i].id.clone();
            match with_run!(ctx, i, |run, c| run.before_model_request(c).await) {
                Some(Ok(Some(text))) => additions.push(text),
                Some(Err(e)) => return Err(hook_error(&id, "before_model_request", e)),
                _ => {}
            }
        }
        let instructions = self.build_instructions(ctx, additions);
        if let Some(ModelMessage::Request(r)) = ctx.messages.last_mut() {
            r.instructions = Some(instructions.clone());
        }
        // c. wrap_model_request chain
        let mut outgoing = ctx.messages.clone();
        for &i in &active {
            let id = ctx.slots[i].id.clone();
            let input = std::mem::take(&mut outgoing);
            match with_run!(ctx, i, |run, c| run.wrap_model_request(c, input).await) {
                Some(Ok(out)) => outgoing = out,
                Some(Err(e)) => return Err(hook_error(&id, "wrap_model_request", e)),
                None => unreachable!("every slot is filled between hooks"),
            }
        }
        let snapshot = RequestSnapshot {
            run_id: ctx.run_id.clone(),
            request: lp.request,
            raw_tokens: TokenCounts::estimate(&instructions, &ctx.messages),
            compacted_tokens: TokenCounts::estimate(&instructions, &outgoing),
            raw: ctx.messages.clone(),
            compacted: outgoing.clone(),
            tools: tools.clone(),
            instructions: instructions.clone(),
        };
        lp.events.emit(CoreEvent::RequestBuilt {
            run_id: ctx.run_id.clone(),
            request: lp.request,
            snapshot: Box::new(snapshot.clone()),
        });
        lp.snapshots.push(snapshot);

        // d. the model call
        let events = lp.events.clone();
        let (run_id, request) = (ctx.run_id.clone(), lp.request);
        let on_delta = move |d: StreamDelta| match d {
            StreamDelta::Text(text) => events.emit(CoreEvent::TextDelta {
                run_id: run_id.clone(),
                request,
                text,
            }),
            StreamDelta::Thinking(text) => events.emit(CoreEvent::ThinkingDelta {
                run_id: run_id.clone(),
                request,
                text,
            }),
            StreamDelta::ToolCall { .. } => {}
            StreamDelta::Restart => events.emit(CoreEvent::ResponseRestarted {
                run_id: run_id.clone(),
                request,
            }),
        };
        let params = ModelRequestParams {
            instructions: &instructions,
            messages: &outgoing,
            tools: &tools,
        };
        let mut response = self.model.request(params, &on_delta, &ctx.cancel).await?;
        response.run_id = Some(ctx.run_id.clone());
        for part in &mut response.parts {
            if let ModelResponsePart::ToolCall(c) = part
                && c.tool_name == LOAD_CAPABILITY_TOOL
            {
                c.tool_kind = Some(CAPABILITY_LOAD_TOOL_KIND.to_string());
            }
        }
        lp.usage.requests += 1;
        lp.usage.tokens.add(&response.usage);
        ctx.messages.push(ModelMessage::Response(response.clone()));

        // e. after_model_request, reverse order
        for &i in active.iter().rev() {
            let id = ctx.slots[i].id.clone();
            match with_run!(ctx, i, |run, c| run.after_model_request(c, &response).await) {
                Some(Ok(enqueued)) => lp.pending.extend(enqueued),
                Some(Err(e)) => return Err(hook_error(&id, "after_model_request", e)),
                None => {}
            }
        }
        Ok((response, tools))
    }

    /// 4. Executes the calls of one response, sequentially.
    async fn execute_calls(
        &self,
        ctx: &mut RunContext,
        lp: &mut Loop<'_>,
        calls: &[ToolCallPart],
        offered: &[ToolDef],
    ) -> Result<StepEnd, RunError> {
        let find = |name: &str| offered.iter().find(|t| t.name == name);
        let mut failed_now: HashSet<String> = HashSet::new();

        // An output-tool call with usable arguments ends the run; other calls are skipped.
        let output = calls.iter().find_map(|c| match find(&c.tool_name) {
            Some(t) if t.kind == ToolKind::Output => c.args_as_object().ok().map(|a| (c, a)),
            _ => None,
        });
        if let Some((out_call, args)) = output {
            let parts = calls
                .iter()
                .map(|c| {
                    let text = if std::ptr::eq(c, out_call) {
                        prompts::output_tool_return()
                    } else {
                        prompts::output_tool_skipped()
                    };
                    lp.events.emit(CoreEvent::ToolCallStarted {
                        run_id: ctx.run_id.clone(),
                        request: lp.request,
                        name: c.tool_name.clone(),
                        args: c.args_as_json(),
                        call_id: c.tool_call_id.clone(),
                    });
                    lp.events.emit(CoreEvent::ToolCallFinished {
                        run_id: ctx.run_id.clone(),
                        request: lp.request,
                        call_id: c.tool_call_id.clone(),
                        outcome: ToolCallStatus::Ok,
                        summary: text.to_string(),
                    });
                    ModelRequestPart::ToolReturn(ToolReturnPart::new(
                        &c.tool_name,
                        json!(text),
                        &c.tool_call_id,
                    ))
                })
                .collect();
            return Ok(StepEnd::Output(
                parts,
                out_call.tool_name.clone(),
                Value::Object(args),
            ));
        }

        let mut parts = Vec::new();
        let mut extra = Vec::new();
        let mut deferred = Vec::new();
        for call in calls {
            if ctx.cancel.is_cancelled() {
                return Err(RunError::Cancelled);
            }
            lp.events.emit(CoreEvent::ToolCallStarted {
                run_id: ctx.run_id.clone(),
                request: lp.request,
                name: call.tool_name.clone(),
                args: call.args_as_json(),
                call_id: call.tool_call_id.clone(),
            });
            let (outcome, max_retries, owner) = match find(&call.tool_name) {
                Some(t) if t.name == LOAD_CAPABILITY_TOOL && t.capability_id.is_none() => (
                    self.load_capability(ctx, call),
                    LOAD_CAPABILITY_MAX_RETRIES,
                    None,
                ),
                Some(t) if t.kind == ToolKind::Output => {
                    let err = call.args_as_object().err().unwrap_or_default();
                    let msg = prompts::fill(
                        prompts::invalid_tool_args(),
                        &[("name", &call.tool_name), ("error", &err)],
                    );
                    (ToolOutcome::Retry(msg), self.max_retries, None)
                }
                Some(t) => {
                    let owner = t.capability_id.clone();
                    let index = owner
                        .as_deref()
                        .and_then(|id| ctx.slots.iter().position(|s| s.id == id));
                    match (index, call.args_as_object()) {
                        (Some(i), Ok(args)) => {
                            let cancel = ctx.cancel.clone();
                            let name = call.tool_name.as_str();
                            let outcome = with_run!(ctx, i, |run, c| {
                                tokio::select! {
                                    biased;
                                    _ = cancel.cancelled() => None,
                                    o = run.call_tool(name, args, c) => Some(o),
                                }
                            });
                            match outcome.flatten() {
                                Some(o) => (o, self.capabilities[i].max_retries(), owner),
                                None => return Err(RunError::Cancelled),
                            }
                        }
                        (Some(i), Err(err)) => {
                            let msg = prompts::fill(
                                prompts::invalid_tool_args(),
                                &[("name", &call.tool_name), ("error", &err)],
                            );
                            (
                                ToolOutcome::Retry(msg),
                                self.capabilities[i].max_retries(),
                                owner,
                            )
                        }
                        (None, _) => (self.unknown_tool(call, offered), self.max_retries, None),
                    }
                }
                None => (self.unknown_tool(call, offered), self.max_retries, None),
            };
            lp.usage.tool_calls += 1;

            if let ToolOutcome::Retry(_) = &outcome {
                let count = lp.retries.get(&call.tool_name).copied().unwrap_or(0);
                if count >= max_retries {
                    return Err(RunError::RetriesExhausted {
                        tool: call.tool_name.clone(),
                        max: max_retries,
                    });
                }
                if failed_now.insert(call.tool_name.clone()) {
                    lp.retries.insert(call.tool_name.clone(), count + 1);
                }
            }
            let (status, summary) = match &outcome {
                ToolOutcome::Ok(o) => (
                    ToolCallStatus::Ok,
                    match &o.content {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    },
                ),
                ToolOutcome::Failed(m) => (ToolCallStatus::Failed, m.clone()),
                ToolOutcome::Retry(m) => (ToolCallStatus::Retry, m.clone()),
                ToolOutcome::Deferred => (ToolCallStatus::Deferred, String::new()),
            };
            if outcome == ToolOutcome::Deferred {
                deferred.push(call.clone());
            } else {
                let (mut part, items, _) = outcome_to_part(call, outcome);
                if call.tool_name == LOAD_CAPABILITY_TOOL
                    && let ModelRequestPart::ToolReturn(t) = &mut part
                {
                    t.tool_kind = Some(CAPABILITY_LOAD_TOOL_KIND.to_string());
                }
                parts.push(part);
                extra.extend(items);
            }
            lp.events.emit(CoreEvent::ToolCallFinished {
                run_id: ctx.run_id.clone(),
                request: lp.request,
                call_id: call.tool_call_id.clone(),
                outcome: status,
                summary: summarize(&summary, 200),
            });
            if owner.is_some() {
                lp.events.emit(CoreEvent::StateChanged {
                    run_id: ctx.run_id.clone(),
                    request: lp.request,
                    state: ctx.state.clone(),
                });
            }
        }
        // Retry counts are for consecutive failures: tools that did not fail now reset.
        lp.retries.retain(|name, _| failed_now.contains(name));
        if !extra.is_empty() {
            parts.push(ModelRequestPart::UserPrompt(UserPromptPart::new(extra)));
        }
        if deferred.is_empty() {
            Ok(StepEnd::Continue(parts))
        } else {
            Ok(StepEnd::Deferred(parts, deferred))
        }
    }

    fn unknown_tool(&self, call: &ToolCallPart, offered: &[ToolDef]) -> ToolOutcome {
        let available = offered
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        ToolOutcome::Retry(prompts::fill(
            prompts::unknown_tool(),
            &[("name", &call.tool_name), ("available", &available)],
        ))
    }

    /// The engine's `load_capability` tool (SPEC §12).
    fn load_capability(&self, ctx: &mut RunContext, call: &ToolCallPart) -> ToolOutcome {
        let id = match call.args_as_object() {
            Ok(args) => match args.get("id").and_then(Value::as_str) {
                Some(id) => id.to_string(),
                None => {
                    return ToolOutcome::Retry(prompts::fill(
                        prompts::invalid_tool_args(),
                        &[
                            ("name", LOAD_CAPABILITY_TOOL),
                            ("error", "missing string field \"id\""),
                        ],
                    ));
                }
            },
            Err(err) => {
                return ToolOutcome::Retry(prompts::fill(
                    prompts::invalid_tool_args(),
                    &[("name", LOAD_CAPABILITY_TOOL), ("error", &err)],
                ));
            }
        };
        let Some(index) = ctx.slots.iter().position(|s| s.id == id) else {
            return ToolOutcome::Retry(prompts::fill(
                prompts::load_capability_unknown(),
                &[("id", &id)],
            ));
        };
        if ctx.active.contains(&id) {
            return ToolOutcome::Ok(ToolOutput::json(json!({})));
        }
        ctx.active.insert(id);
        let Some(run) = ctx.slots[index].run.as_deref() else {
            return ToolOutcome::Ok(ToolOutput::json(json!({})));
        };
        let mut names: Vec<String> = run.tools(ctx).into_iter().map(|t| t.name).collect();
        names.sort();
        let mut sections = Vec::new();
        if let Some(text) = run.instructions(ctx).filter(|t| !t.trim().is_empty()) {
            sections.push(text);
        }
        if !names.is_empty() {
            sections.push(prompts::fill(
                prompts::load_capability_tools(),
                &[("tools", &names.join(", "))],
            ));
        }
        let content = if sections.is_empty() {
            json!({})
        } else {
            json!({"instructions": sections.join("\n\n")})
        };
        ToolOutcome::Ok(ToolOutput::json(content))
    }
}

fn hook_error(id: &str, hook: &'static str, e: anyhow::Error) -> RunError {
    RunError::Hook {
        capability: id.to_string(),
        hook,
        message: format!("{e:#}"),
    }
}

/// The `load_capability` tool definition.
pub fn load_capability_tool() -> ToolDef {
    ToolDef::function(
        LOAD_CAPABILITY_TOOL,
        prompts::load_capability_description(),
        json!({
            "properties": {"id": {
                "description": prompts::load_capability_id_description(),
                "title": "Id",
                "type": "string",
            }},
            "required": ["id"],
            "title": "LoadCapabilityArgs",
            "type": "object",
        }),
    )
}

/// The request part(s) for one tool outcome: the part, extra user items, and the
/// display status.
fn outcome_to_part(
    call: &ToolCallPart,
    outcome: ToolOutcome,
) -> (ModelRequestPart, Vec<UserContent>, ToolCallStatus) {
    match outcome {
        ToolOutcome::Ok(out) => (
            ModelRequestPart::ToolReturn(ToolReturnPart::new(
                &call.tool_name,
                out.content,
                &call.tool_call_id,
            )),
            out.extra,
            ToolCallStatus::Ok,
        ),
        ToolOutcome::Failed(msg) => {
            let mut ret =
                ToolReturnPart::new(&call.tool_name, Value::String(msg), &call.tool_call_id);
            ret.outcome = "failed".to_string();
            (
                ModelRequestPart::ToolReturn(ret),
                Vec::new(),
                ToolCallStatus::Failed,
            )
        }
        ToolOutcome::Retry(msg) => (
            ModelRequestPart::RetryPrompt(RetryPromptPart::for_tool(
                &call.tool_name,
                &call.tool_call_id,
                msg,
            )),
            Vec::new(),
            ToolCallStatus::Retry,
        ),
        ToolOutcome::Deferred => unreachable!("deferred outcomes produce no part"),
    }
}

/// The pending `when_idle` messages as user-prompt parts, taken out of the queue (the
/// others are dropped: the run is ending, SPEC §2 "Enqueue with priority `when_idle`").
fn take_when_idle(lp: &mut Loop<'_>) -> Vec<ModelRequestPart> {
    std::mem::take(&mut lp.pending)
        .into_iter()
        .filter(|e| e.priority == Priority::WhenIdle)
        .map(|e| ModelRequestPart::UserPrompt(UserPromptPart::new(e.content)))
        .collect()
}
