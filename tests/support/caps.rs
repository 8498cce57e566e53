//! A configurable test capability that records every hook it receives.
//!
//! [`TestCap`] offers the tools it is given and answers them with a handler closure;
//! its run copies append `"<id>:<hook>"` entries to a shared [`Trace`]. Options add
//! per-request instructions, rewrite outgoing messages, enqueue a when-idle message,
//! or write to the host state.

use std::any::Any;
use std::sync::{Arc, Mutex};

use groundwork::engine::capability::{
    BoxFuture, Capability, CapabilityRun, Enqueued, ForRunContext, RunContext, RunOutcomeView,
    ToolDef, ToolOutcome,
};
use groundwork::engine::messages::{ModelMessage, ModelResponse};
use serde_json::{Map, Value, json};

/// Shared hook log.
pub type Trace = Arc<Mutex<Vec<String>>>;

/// Answers a tool call: `(tool name, args, ctx) -> outcome`.
pub type Handler =
    Arc<dyn Fn(&str, &Map<String, Value>, &mut RunContext) -> ToolOutcome + Send + Sync>;

/// Rewrites outgoing messages.
pub type Rewriter = Arc<dyn Fn(Vec<ModelMessage>) -> Vec<ModelMessage> + Send + Sync>;

/// A test capability.
#[derive(Clone)]
pub struct TestCap {
    pub id: String,
    pub deferred: bool,
    pub description: Option<String>,
    pub instructions: Option<String>,
    pub tools: Vec<ToolDef>,
    pub handler: Handler,
    pub trace: Trace,
    pub per_request: Option<String>,
    pub rewrite: Option<Rewriter>,
    pub enqueue_once: Option<String>,
    pub max_retries: u32,
}

/// A JSON schema for an object with one string property `q`.
pub fn query_schema() -> Value {
    json!({"type": "object", "properties": {"q": {"type": "string"}}})
}

impl TestCap {
    /// A capability with no tools.
    pub fn new(id: &str, trace: &Trace) -> Self {
        TestCap {
            id: id.to_string(),
            deferred: false,
            description: None,
            instructions: None,
            tools: Vec::new(),
            handler: Arc::new(|name, _, _| ToolOutcome::Failed(format!("no handler for {name}"))),
            trace: trace.clone(),
            per_request: None,
            rewrite: None,
            enqueue_once: None,
            max_retries: 3,
        }
    }

    /// Adds a tool taking `{"q": string}`.
    pub fn tool(mut self, name: &str) -> Self {
        self.tools.push(ToolDef::function(
            name,
            format!("test tool {name}"),
            query_schema(),
        ));
        self
    }

    /// Sets the tool handler.
    pub fn handler(
        mut self,
        f: impl Fn(&str, &Map<String, Value>, &mut RunContext) -> ToolOutcome + Send + Sync + 'static,
    ) -> Self {
        self.handler = Arc::new(f);
        self
    }

    /// Sets the capability's instructions.
    pub fn instructions(mut self, text: &str) -> Self {
        self.instructions = Some(text.to_string());
        self
    }

    /// Makes it deferred with a catalogue description.
    pub fn deferred(mut self, description: &str) -> Self {
        self.deferred = true;
        self.description = Some(description.to_string());
        self
    }

    /// Adds `text` to every request's instructions from `before_model_request`.
    pub fn per_request(mut self, text: &str) -> Self {
        self.per_request = Some(text.to_string());
        self
    }

    /// Rewrites outgoing messages in `wrap_model_request`.
    pub fn rewrite(
        mut self,
        f: impl Fn(Vec<ModelMessage>) -> Vec<ModelMessage> + Send + Sync + 'static,
    ) -> Self {
        self.rewrite = Some(Arc::new(f));
        self
    }

    /// Enqueues `text` (when idle) after the first response.
    pub fn enqueue_once(mut self, text: &str) -> Self {
        self.enqueue_once = Some(text.to_string());
        self
    }

    /// Wraps in an `Arc<dyn Capability>`.
    pub fn arc(self) -> Arc<dyn Capability> {
        Arc::new(self)
    }
}

impl Capability for TestCap {
    fn id(&self) -> &str {
        &self.id
    }

    fn description(&self) -> Option<String> {
        self.description.clone()
    }

    fn defer_loading(&self) -> bool {
        self.deferred
    }

    fn max_retries(&self) -> u32 {
        self.max_retries
    }

    fn for_run(&self, ctx: &mut ForRunContext<'_>) -> anyhow::Result<Box<dyn CapabilityRun>> {
        self.trace
            .lock()
            .unwrap()
            .push(format!("{}:for_run(active={})", self.id, ctx.active));
        ctx.state
            .insert(self.id.clone(), json!({"history_len": ctx.history.len()}));
        Ok(Box::new(TestRun {
            cap: self.clone(),
            enqueued: false,
            requests_seen: Vec::new(),
        }))
    }
}

/// The run copy of [`TestCap`].
pub struct TestRun {
    pub cap: TestCap,
    pub enqueued: bool,
    /// `ctx.epoch()` at each `before_model_request`.
    pub requests_seen: Vec<usize>,
}

impl TestRun {
    fn log(&self, hook: &str) {
        self.cap
            .trace
            .lock()
            .unwrap()
            .push(format!("{}:{hook}", self.cap.id));
    }
}

impl CapabilityRun for TestRun {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn before_run<'a>(&'a mut self, _ctx: &'a mut RunContext) -> BoxFuture<'a, anyhow::Result<()>> {
        self.log("before_run");
        Box::pin(async { Ok(()) })
    }

    fn instructions(&self, _ctx: &RunContext) -> Option<String> {
        self.cap.instructions.clone()
    }

    fn tools(&self, _ctx: &RunContext) -> Vec<ToolDef> {
        self.cap.tools.clone()
    }

    fn prepare_tools(&mut self, _ctx: &RunContext, tools: &mut Vec<ToolDef>) {
        self.log("prepare_tools");
        assert!(
            tools
                .iter()
                .filter(|t| self.cap.tools.iter().any(|o| o.name == t.name))
                .all(|t| t.capability_id.as_deref() == Some(self.cap.id.as_str())),
            "own tools carry the capability id"
        );
    }

    fn before_model_request<'a>(
        &'a mut self,
        ctx: &'a mut RunContext,
    ) -> BoxFuture<'a, anyhow::Result<Option<String>>> {
        self.log(&format!("before_model_request(epoch={})", ctx.epoch()));
        self.requests_seen.push(ctx.epoch());
        let extra = self.cap.per_request.clone();
        Box::pin(async move { Ok(extra) })
    }

    fn wrap_model_request<'a>(
        &'a mut self,
        _ctx: &'a mut RunContext,
        outgoing: Vec<ModelMessage>,
    ) -> BoxFuture<'a, anyhow::Result<Vec<ModelMessage>>> {
        self.log("wrap_model_request");
        let out = match &self.cap.rewrite {
            Some(f) => f(outgoing),
            None => outgoing,
        };
        Box::pin(async move { Ok(out) })
    }

    fn after_model_request<'a>(
        &'a mut self,
        _ctx: &'a mut RunContext,
        _response: &'a ModelResponse,
    ) -> BoxFuture<'a, anyhow::Result<Vec<Enqueued>>> {
        self.log("after_model_request");
        let mut out = Vec::new();
        if let Some(text) = &self.cap.enqueue_once
            && !self.enqueued
        {
            self.enqueued = true;
            out.push(Enqueued::when_idle(text.as_str()));
        }
        Box::pin(async move { Ok(out) })
    }

    fn call_tool<'a>(
        &'a mut self,
        name: &'a str,
        args: Map<String, Value>,
        ctx: &'a mut RunContext,
    ) -> BoxFuture<'a, ToolOutcome> {
        self.log(&format!("call_tool({name})"));
        let outcome = (self.cap.handler)(name, &args, ctx);
        Box::pin(async move { outcome })
    }

    fn after_run<'a>(
        &'a mut self,
        _ctx: &'a mut RunContext,
        result: &'a RunOutcomeView<'a>,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        self.log(&format!("after_run(deferred={})", result.is_deferred()));
        Box::pin(async { Ok(()) })
    }

    fn on_run_error<'a>(
        &'a mut self,
        _ctx: &'a mut RunContext,
        _error: &'a str,
    ) -> BoxFuture<'a, ()> {
        self.log("on_run_error");
        Box::pin(async {})
    }
}
