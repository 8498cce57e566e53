//! Tool execution: the calls of one response run one after another (capability tools,
//! `load_capability`, retry prompts as [`step::route`] decides), each announced and
//! reported as events; and the tool results a resumed run brings for deferred calls.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::deferred::LOAD_CAPABILITY_MAX_RETRIES;
use super::run::Loop;
use super::step::{self, CallsEnd, Route};
use super::{Agent, DeferredResults, LOAD_CAPABILITY_TOOL, RunError};
use crate::engine::capability::{RunContext, ToolDef, ToolOutcome};
use crate::engine::events::{CoreEvent, ToolCallStatus, summarize};
use crate::engine::messages::{
    CAPABILITY_LOAD_TOOL_KIND, ModelMessage, ModelRequestPart, RetryPromptPart, ToolCallPart,
    ToolReturnPart, UserContent, UserPromptPart,
};
use crate::engine::prompts;

impl Agent {
    /// 4. Executes the calls of one response, sequentially.
    pub(super) async fn execute_calls(
        &self,
        ctx: &mut RunContext,
        lp: &mut Loop<'_>,
        calls: &[ToolCallPart],
        offered: &[ToolDef],
    ) -> Result<CallsEnd, RunError> {
        // An output-tool call with usable arguments ends the run; other calls are skipped.
        if let Some((out_index, args)) = step::output_call(calls, offered) {
            let parts = calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let text = if i == out_index {
                        prompts::output_tool_return()
                    } else {
                        prompts::output_tool_skipped()
                    };
                    lp.events.emit(CoreEvent::ToolCallStarted {
                        run_id: ctx.run_id.clone(),
                        request: lp.step.request(),
                        name: c.tool_name.clone(),
                        args: c.args_as_json(),
                        call_id: c.tool_call_id.clone(),
                    });
                    lp.events.emit(CoreEvent::ToolCallFinished {
                        run_id: ctx.run_id.clone(),
                        request: lp.step.request(),
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
            return Ok(CallsEnd::Output {
                parts,
                tool_name: calls[out_index].tool_name.clone(),
                args: Value::Object(args),
            });
        }

        lp.step.begin_calls();
        let mut parts = Vec::new();
        let mut extra = Vec::new();
        let mut deferred = Vec::new();
        for call in calls {
            if ctx.cancel.is_cancelled() {
                return Err(RunError::Cancelled);
            }
            lp.events.emit(CoreEvent::ToolCallStarted {
                run_id: ctx.run_id.clone(),
                request: lp.step.request(),
                name: call.tool_name.clone(),
                args: call.args_as_json(),
                call_id: call.tool_call_id.clone(),
            });
            let route = step::route(call, offered, |id| {
                ctx.slots.iter().position(|s| s.id == id)
            });
            let (outcome, max_retries, owned) = match route {
                Route::LoadCapability => (
                    self.load_capability(ctx, call),
                    LOAD_CAPABILITY_MAX_RETRIES,
                    false,
                ),
                Route::Call { slot, args } => {
                    let cancel = ctx.cancel.clone();
                    let name = call.tool_name.as_str();
                    let outcome = with_run!(ctx, slot, |run, c| {
                        tokio::select! {
                            biased;
                            _ = cancel.cancelled() => None,
                            o = run.call_tool(name, args, c) => Some(o),
                        }
                    });
                    match outcome.flatten() {
                        Some(o) => (o, self.capabilities[slot].max_retries(), true),
                        None => return Err(RunError::Cancelled),
                    }
                }
                Route::Retry { slot, message } => (
                    ToolOutcome::Retry(message),
                    slot.map_or(self.max_retries, |i| self.capabilities[i].max_retries()),
                    slot.is_some(),
                ),
            };
            lp.usage.tool_calls += 1;

            if let ToolOutcome::Retry(_) = &outcome {
                lp.step.charge_retry(&call.tool_name, max_retries)?;
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
                let (mut part, items) = outcome_to_part(call, outcome);
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
                request: lp.step.request(),
                call_id: call.tool_call_id.clone(),
                outcome: status,
                summary: summarize(&summary, 200),
            });
            if owned {
                lp.events.emit(CoreEvent::StateChanged {
                    run_id: ctx.run_id.clone(),
                    request: lp.step.request(),
                    state: ctx.state.clone(),
                });
            }
        }
        lp.step.end_calls();
        if !extra.is_empty() {
            parts.push(ModelRequestPart::UserPrompt(UserPromptPart::new(extra)));
        }
        if deferred.is_empty() {
            Ok(CallsEnd::Continue(parts))
        } else {
            Ok(CallsEnd::Deferred {
                parts,
                calls: deferred,
            })
        }
    }

    /// Tool-result parts for resuming deferred calls.
    pub(super) fn resume_parts(
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
            let (part, items) = outcome_to_part(call, outcome);
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
}

/// The request part for one tool outcome, and extra user items to send after the tool
/// returns.
pub(super) fn outcome_to_part(
    call: &ToolCallPart,
    outcome: ToolOutcome,
) -> (ModelRequestPart, Vec<UserContent>) {
    match outcome {
        ToolOutcome::Ok(out) => {
            let mut ret = ToolReturnPart::new(&call.tool_name, out.content, &call.tool_call_id);
            ret.metadata = out.metadata;
            (ModelRequestPart::ToolReturn(ret), out.extra)
        }
        ToolOutcome::Failed(msg) => {
            let mut ret =
                ToolReturnPart::new(&call.tool_name, Value::String(msg), &call.tool_call_id);
            ret.outcome = "failed".to_string();
            (ModelRequestPart::ToolReturn(ret), Vec::new())
        }
        ToolOutcome::Retry(msg) => (
            ModelRequestPart::RetryPrompt(RetryPromptPart::for_tool(
                &call.tool_name,
                &call.tool_call_id,
                msg,
            )),
            Vec::new(),
        ),
        ToolOutcome::Deferred => unreachable!("deferred outcomes produce no part"),
    }
}
