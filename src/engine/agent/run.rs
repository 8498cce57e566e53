//! The loop driver: one run from `for_run` to `after_run`. It calls the capability
//! hooks in SPEC order, builds each request (tools, instructions, the wrap chain, the
//! snapshot), calls the model, and carries out what [`super::step`] decides after
//! each response and each batch of tool results. Events go out as it goes.

use std::collections::BTreeSet;

use super::step::{self, Decision, StepState};
use super::{
    Agent, DeferredResults, Earlier, LOAD_CAPABILITY_TOOL, RunError, RunInput, RunOutput, RunResult,
};
use crate::engine::cancel::CancelToken;
use crate::engine::capability::{ForRunContext, RunContext, RunSlot, ToolDef};
use crate::engine::chat::{ModelRequestParams, StreamDelta};
use crate::engine::events::{CoreEvent, EstimateMemo, EventSink, RequestSnapshot, RunUsage};
use crate::engine::messages::{
    CAPABILITY_LOAD_TOOL_KIND, ModelMessage, ModelRequest, ModelRequestPart, ModelResponse,
    ModelResponsePart, SharedText, UserContentValue, UserPromptPart,
};
use crate::engine::tokens::{ESTIMATE_NAME, TokenReport};

/// Per-run bookkeeping that is not part of the hook context.
pub(super) struct Loop<'e> {
    pub(super) events: &'e EventSink,
    pub(super) usage: RunUsage,
    pub(super) snapshots: Vec<RequestSnapshot>,
    /// The per-message estimates of the run's requests so far.
    pub(super) estimates: EstimateMemo,
    /// What the step decisions read and update.
    pub(super) step: StepState,
}

impl Agent {
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
            earlier,
        } = input;
        let run_id = run_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let window_len = history.len();
        let history_len = Earlier::len_of(earlier.as_ref()) + window_len;
        if let Some(e) = &earlier
            && let Err(why) = self.earlier_refused(e, &history)
        {
            let err = RunError::InvalidInput(why);
            events.emit(CoreEvent::RunFailed {
                run_id,
                request: 0,
                error: err.to_string(),
            });
            return Err(err);
        }

        // 1. for_run: every registered capability gets a run copy.
        let mut loaded = self.loaded_from_history(&history);
        if let Some(e) = &earlier {
            loaded.extend(e.loaded.iter().cloned());
        }
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
                earlier: Earlier::len_of(earlier.as_ref()),
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
            earlier: earlier.clone(),
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
            usage: RunUsage::default(),
            snapshots: Vec::new(),
            estimates: EstimateMemo::default(),
            step: StepState::new(self.request_limit),
        };
        let outcome = self.drive(ctx, &mut lp, prompt, deferred_results).await;
        let outcome = match outcome {
            Ok(output) => self.after_run(ctx, &output).await.map(|()| output),
            Err(e) => Err(e),
        };
        let request = lp.step.request();
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
                scrub_secrets(
                    &mut ctx.messages,
                    window_len,
                    &mut ctx.state,
                    &mut lp.snapshots,
                );
                Ok(RunResult {
                    run_id,
                    output,
                    messages: std::mem::take(&mut ctx.messages),
                    new_message_index: window_len,
                    earlier,
                    state: std::mem::take(&mut ctx.state),
                    usage: lp.usage,
                    requests: lp.snapshots,
                    estimates: std::sync::Arc::new(lp.estimates),
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
        let mut decision = StepState::start(parts, &ctx.messages);
        let mut offered = Vec::new();
        loop {
            decision = match decision {
                Decision::Send(_) | Decision::SendHistory => {
                    if ctx.cancel.is_cancelled() {
                        return Err(RunError::Cancelled);
                    }
                    if let Decision::Send(parts) = decision {
                        let request = self.stamp(ModelRequest::new(parts), ctx);
                        ctx.messages.push(ModelMessage::from(request));
                    }
                    let (response, tools) = self.model_step(ctx, lp).await?;
                    offered = tools;
                    lp.step.after_response(&response)
                }
                Decision::Execute(calls) => {
                    let end = self.execute_calls(ctx, lp, &calls, &offered).await?;
                    lp.step.after_calls(end)
                }
                Decision::Finish { output, closing } => {
                    if !closing.is_empty() {
                        ctx.messages.push(ModelMessage::from(
                            self.stamp(ModelRequest::new(closing), ctx),
                        ));
                    }
                    return Ok(output);
                }
            };
        }
    }

    /// Why a run cannot take `earlier` before `window`, if it cannot: the model must
    /// send earlier messages as wire text, and the window must hold at least the message
    /// the question continues from.
    fn earlier_refused(&self, earlier: &Earlier, window: &[ModelMessage]) -> Result<(), String> {
        if !self.takes_earlier() {
            return Err(format!(
                "the model client {} (tokens counted by {}) needs the whole history, not \
                 earlier messages as written",
                self.model.model_name(),
                self.counter.name()
            ));
        }
        if earlier.len > 0 && window.is_empty() {
            return Err("a history window after earlier messages cannot be empty".into());
        }
        Ok(())
    }

    fn stamp(&self, mut request: ModelRequest, ctx: &RunContext) -> ModelRequest {
        request.run_id = Some(ctx.run_id.clone());
        request
    }

    /// The tools for the coming request, before `prepare_tools`.
    fn collect_tools(&self, ctx: &RunContext) -> Result<Vec<ToolDef>, RunError> {
        let load = self.has_deferred().then(super::load_capability_tool);
        let capability_tools = self
            .active_indices(ctx)
            .into_iter()
            .filter_map(|i| {
                let slot = &ctx.slots[i];
                let run = slot.run.as_deref()?;
                Some((slot.id.clone(), run.tools(ctx)))
            })
            .collect();
        step::offered_tools(load, capability_tools, &self.output_tools)
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
        sections.extend(self.deferred_catalogue(ctx));
        sections.extend(additions.into_iter().filter(|a| !a.trim().is_empty()));
        sections.join("\n\n")
    }

    /// One model request: tools, hooks, wrap chain, the call, after hooks.
    async fn model_step(
        &self,
        ctx: &mut RunContext,
        lp: &mut Loop<'_>,
    ) -> Result<(ModelResponse, Vec<ToolDef>), RunError> {
        let request = lp.step.next_request()?;
        ctx.run_step = request;
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
        if let Some(r) = ctx
            .messages
            .last_mut()
            .and_then(ModelMessage::as_request_mut)
        {
            r.instructions = Some(SharedText::interned(&instructions));
        }
        crate::timing::mark("request: prepared");
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
        crate::timing::mark("request: compacted");
        let mut raw_tokens = lp.estimates.estimate(&instructions, &ctx.messages);
        let mut compacted_tokens = lp.estimates.estimate(&instructions, &outgoing);
        // The earlier messages count in the totals; their per-message figures stay out.
        if let Some(e) = &ctx.earlier {
            raw_tokens.total += e.raw_tokens;
            compacted_tokens.total += e.sent_tokens;
        }
        // The estimate's figures are those just made, with the tool schemas.
        let tokens = if self.counter.name() == ESTIMATE_NAME {
            TokenReport::estimated(
                raw_tokens.instructions,
                raw_tokens.total,
                compacted_tokens.total,
                &tools,
            )
        } else {
            TokenReport::count(
                self.counter.as_ref(),
                &instructions,
                &tools,
                &ctx.messages,
                &outgoing,
            )
        };
        crate::timing::mark("request: estimated");
        let snapshot = RequestSnapshot {
            run_id: ctx.run_id.clone(),
            request,
            raw_tokens,
            compacted_tokens,
            tokens: Some(tokens),
            raw: ctx.messages.clone(),
            compacted: outgoing.clone(),
            tools: tools.clone(),
            instructions: instructions.clone(),
        };
        lp.events.emit(CoreEvent::RequestBuilt {
            run_id: ctx.run_id.clone(),
            request,
            snapshot: Box::new(snapshot.clone()),
        });
        lp.snapshots.push(snapshot);

        // d. the model call
        let events = lp.events.clone();
        let run_id = ctx.run_id.clone();
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
            StreamDelta::Waiting {
                idle_timeout_secs,
                retries_left,
            } => events.emit(CoreEvent::ModelWaiting {
                run_id: run_id.clone(),
                request,
                idle_timeout_secs,
                retries_left,
            }),
        };
        let params = ModelRequestParams {
            instructions: &instructions,
            earlier: ctx.earlier.as_ref().map(|e| &*e.wire),
            messages: &outgoing,
            tools: &tools,
        };
        let mut response = self.model.request(params, &on_delta, &ctx.cancel).await?;
        crate::timing::mark("request: answered");
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
        if let Some(tokens) = lp.snapshots.last_mut().and_then(|s| s.tokens.as_mut()) {
            tokens.set_usage(&response.usage);
            lp.events.emit(CoreEvent::ResponseReceived {
                run_id: ctx.run_id.clone(),
                request,
                tokens: tokens.clone(),
            });
        }
        ctx.messages.push(ModelMessage::from(response.clone()));

        // e. after_model_request, reverse order
        for &i in active.iter().rev() {
            let id = ctx.slots[i].id.clone();
            match with_run!(ctx, i, |run, c| run.after_model_request(c, &response).await) {
                Some(Ok(enqueued)) => lp.step.enqueue(enqueued),
                Some(Err(e)) => return Err(hook_error(&id, "after_model_request", e)),
                None => {}
            }
        }
        Ok((response, tools))
    }
}

pub(super) fn hook_error(id: &str, hook: &'static str, e: anyhow::Error) -> RunError {
    RunError::Hook {
        capability: id.to_string(),
        hook,
        message: format!("{e:#}"),
    }
}

/// Keeps secrets out of what a run returns, so nothing that records a run (a session,
/// an eval result, `ask --json`) can keep one: a key a server echoed into a tool's
/// warning, a password in a URL. Only when the run's new messages or its state hold a
/// secret is anything rewritten: then every message (each once, its copies in the
/// snapshots sharing the clean one) and the state pass through the redactor.
fn scrub_secrets(
    messages: &mut [ModelMessage],
    new_from: usize,
    state: &mut serde_json::Map<String, serde_json::Value>,
    snapshots: &mut [RequestSnapshot],
) {
    let dirty = |text: serde_json::Result<String>| {
        text.is_ok_and(|t| matches!(crate::errors::redact(&t), std::borrow::Cow::Owned(_)))
    };
    if !dirty(serde_json::to_string(
        &messages[new_from.min(messages.len())..],
    )) && !dirty(serde_json::to_string(&*state))
    {
        return;
    }
    let mut clean: std::collections::HashMap<usize, ModelMessage> = Default::default();
    let mut scrub = |m: &mut ModelMessage| {
        let id = m.identity();
        let c = clean
            .entry(id)
            .or_insert_with(|| {
                let mut c = m.clone();
                crate::errors::scrub(&mut c);
                c
            })
            .clone();
        *m = c;
    };
    messages.iter_mut().for_each(&mut scrub);
    for snap in snapshots.iter_mut() {
        snap.raw.iter_mut().for_each(&mut scrub);
        snap.compacted.iter_mut().for_each(&mut scrub);
    }
    crate::errors::scrub(state);
}
