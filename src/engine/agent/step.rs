//! The step decisions of the agent loop, as pure functions: no I/O, no async, no
//! capability hooks. The driver (`run.rs`) asks at each point of a run what follows
//! and carries the answer out:
//!
//! * [`StepState::start`]: the first request (new parts, or the history as it is);
//! * [`StepState::next_request`]: whether another model request is allowed;
//! * [`StepState::after_response`]: execute the response's tool calls, finish on its
//!   text, or deliver the messages queued for when the run goes idle;
//! * [`output_call`] and [`route`]: which call ends the run, and how each other call
//!   is handled (a capability tool, `load_capability`, or a retry prompt for unknown
//!   tools and malformed or cut-off arguments);
//! * [`StepState::charge_retry`]: the retry budgets;
//! * [`StepState::after_calls`]: continue, finish on an output tool (unless queued
//!   messages are due), or pause on deferred calls;
//! * [`offered_tools`]: which tools the next request offers.
//!
//! The file is over the usual 600 lines because its tests, one per decision branch,
//! live beside the decisions they pin down.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::{DeferredRequests, LOAD_CAPABILITY_TOOL, RunError, RunOutput};
use crate::engine::capability::{Enqueued, Priority, ToolDef, ToolKind};
use crate::engine::messages::{
    ModelMessage, ModelRequestPart, ModelResponse, ToolCallPart, UserPromptPart,
};
use crate::engine::prompts;

/// What the driver does next.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Decision {
    /// Append a request made of these parts to the history, then call the model.
    Send(Vec<ModelRequestPart>),
    /// Call the model on the history as it is (it already ends with a request).
    SendHistory,
    /// Execute these tool calls of the last response, in order.
    Execute(Vec<ToolCallPart>),
    /// End the run with `output`, after appending a request made of `closing` to the
    /// history when it is not empty.
    Finish {
        /// The run's output.
        output: RunOutput,
        /// The tool results that close the run.
        closing: Vec<ModelRequestPart>,
    },
}

/// How the tool calls of one response ended (what `tools.rs` hands back).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum CallsEnd {
    /// Every call has a result: these parts go out in the next request.
    Continue(Vec<ModelRequestPart>),
    /// An output tool was called with usable arguments.
    Output {
        /// A tool return for every call of the response.
        parts: Vec<ModelRequestPart>,
        /// The output tool.
        tool_name: String,
        /// Its arguments.
        args: Value,
    },
    /// Some calls are deferred: the run pauses.
    Deferred {
        /// The results of the calls that were not deferred.
        parts: Vec<ModelRequestPart>,
        /// The deferred calls.
        calls: Vec<ToolCallPart>,
    },
}

/// How one tool call (not an output-tool call that ends the run) is handled.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Route {
    /// The engine's own `load_capability` tool.
    LoadCapability,
    /// A capability tool with usable arguments: call it on run slot `slot`.
    Call {
        /// The owning capability's slot.
        slot: usize,
        /// The arguments.
        args: Map<String, Value>,
    },
    /// A retry prompt with `message`: an unknown tool, or arguments that are not a JSON
    /// object (malformed, or cut off by the length limit). Charged to slot `slot`'s
    /// retry budget, or the agent's when `None`.
    Retry {
        /// The owning capability's slot, if any.
        slot: Option<usize>,
        /// The retry prompt.
        message: String,
    },
}

/// The loop's bookkeeping that the decisions read and update.
#[derive(Debug, Clone, Default)]
pub(super) struct StepState {
    /// Maximum model requests (`None`: unlimited).
    request_limit: Option<usize>,
    /// Model requests made so far (the current request's 1-based number).
    request: usize,
    /// Consecutive-step retry counts per tool name.
    retries: HashMap<String, u32>,
    /// Tools that asked for a retry in the current step.
    failed_now: HashSet<String>,
    /// Messages capabilities queued for later delivery.
    pending: Vec<Enqueued>,
}

impl StepState {
    /// A fresh run allowing `request_limit` model requests.
    pub(super) fn new(request_limit: Option<usize>) -> Self {
        StepState {
            request_limit,
            ..StepState::default()
        }
    }

    /// The current request's 1-based number (0 before the first).
    pub(super) fn request(&self) -> usize {
        self.request
    }

    /// Queues messages a capability wants delivered.
    pub(super) fn enqueue(&mut self, messages: impl IntoIterator<Item = Enqueued>) {
        self.pending.extend(messages);
    }

    /// The first request of a run: `parts` (deferred results, then the prompt) as a new
    /// request; none at all when a promptless run's history already ends with one.
    pub(super) fn start(parts: Vec<ModelRequestPart>, history: &[ModelMessage]) -> Decision {
        if parts.is_empty() && matches!(history.last(), Some(ModelMessage::Request(_))) {
            Decision::SendHistory
        } else {
            Decision::Send(parts)
        }
    }

    /// Counts a model request about to be made; more than the limit fails the run.
    pub(super) fn next_request(&mut self) -> Result<usize, RunError> {
        self.request += 1;
        match self.request_limit {
            Some(limit) if self.request > limit => Err(RunError::RequestLimit { limit }),
            _ => Ok(self.request),
        }
    }

    /// After a model response: its tool calls are executed; without any, the run ends
    /// on its text, unless messages wait for the run to go idle (they go out instead).
    pub(super) fn after_response(&mut self, response: &ModelResponse) -> Decision {
        let calls: Vec<ToolCallPart> = response.tool_calls().cloned().collect();
        if !calls.is_empty() {
            return Decision::Execute(calls);
        }
        let idle = self.take_when_idle();
        if idle.is_empty() {
            Decision::Finish {
                output: RunOutput::Text(response.text()),
                closing: Vec::new(),
            }
        } else {
            Decision::Send(idle)
        }
    }

    /// Starts executing the calls of a response.
    pub(super) fn begin_calls(&mut self) {
        self.failed_now.clear();
    }

    /// A call of `tool` asked for a retry; `max` is its budget. The count rises once per
    /// step and tool; a tool already at its budget fails the run.
    pub(super) fn charge_retry(&mut self, tool: &str, max: u32) -> Result<(), RunError> {
        let count = self.retries.get(tool).copied().unwrap_or(0);
        if count >= max {
            return Err(RunError::RetriesExhausted {
                tool: tool.to_string(),
                max,
            });
        }
        if self.failed_now.insert(tool.to_string()) {
            self.retries.insert(tool.to_string(), count + 1);
        }
        Ok(())
    }

    /// The calls of a response are done: retry counts are for consecutive failures, so
    /// the tools that did not fail in this step start over.
    pub(super) fn end_calls(&mut self) {
        let failed = &self.failed_now;
        self.retries.retain(|name, _| failed.contains(name));
    }

    /// After the calls of a response were executed.
    ///
    /// A structured answer ends the question like a text answer: messages waiting for
    /// the run to go idle (the policy's redirect) are delivered with the output tool's
    /// return, and the model answers again.
    pub(super) fn after_calls(&mut self, end: CallsEnd) -> Decision {
        match end {
            CallsEnd::Continue(parts) => Decision::Send(parts),
            CallsEnd::Output {
                mut parts,
                tool_name,
                args,
            } => {
                let idle = self.take_when_idle();
                if idle.is_empty() {
                    Decision::Finish {
                        output: RunOutput::Tool { tool_name, args },
                        closing: parts,
                    }
                } else {
                    parts.extend(idle);
                    Decision::Send(parts)
                }
            }
            CallsEnd::Deferred { parts, calls } => Decision::Finish {
                output: RunOutput::Deferred(DeferredRequests { calls }),
                closing: parts,
            },
        }
    }

    /// The pending `when_idle` messages as user-prompt parts, taken out of the queue
    /// (the others are dropped: the run is ending, SPEC §2 "Enqueue with priority
    /// `when_idle`").
    fn take_when_idle(&mut self) -> Vec<ModelRequestPart> {
        std::mem::take(&mut self.pending)
            .into_iter()
            .filter(|e| e.priority == Priority::WhenIdle)
            .map(|e| ModelRequestPart::UserPrompt(UserPromptPart::new(e.content)))
            .collect()
    }
}

/// The output-tool call that ends the run: the first call of an output tool whose
/// arguments are a JSON object, by position, with those arguments.
pub(super) fn output_call(
    calls: &[ToolCallPart],
    offered: &[ToolDef],
) -> Option<(usize, Map<String, Value>)> {
    calls.iter().enumerate().find_map(|(i, c)| {
        match offered.iter().find(|t| t.name == c.tool_name) {
            Some(t) if t.kind == ToolKind::Output => c.args_as_object().ok().map(|a| (i, a)),
            _ => None,
        }
    })
}

/// How `call` is handled, given the tools offered and `slot_of` (a capability id to
/// its run slot).
pub(super) fn route(
    call: &ToolCallPart,
    offered: &[ToolDef],
    slot_of: impl Fn(&str) -> Option<usize>,
) -> Route {
    let unknown = || Route::Retry {
        slot: None,
        message: unknown_tool_message(call, offered),
    };
    match offered.iter().find(|t| t.name == call.tool_name) {
        Some(t) if t.name == LOAD_CAPABILITY_TOOL && t.capability_id.is_none() => {
            Route::LoadCapability
        }
        Some(t) if t.kind == ToolKind::Output => Route::Retry {
            slot: None,
            message: invalid_args_message(
                &call.tool_name,
                &call.args_as_object().err().unwrap_or_default(),
            ),
        },
        Some(t) => match t.capability_id.as_deref().and_then(slot_of) {
            Some(slot) => match call.args_as_object() {
                Ok(args) => Route::Call { slot, args },
                Err(err) => Route::Retry {
                    slot: Some(slot),
                    message: invalid_args_message(&call.tool_name, &err),
                },
            },
            None => unknown(),
        },
        None => unknown(),
    }
}

/// The retry prompt for arguments that are not a usable JSON object.
pub(super) fn invalid_args_message(tool: &str, error: &str) -> String {
    prompts::fill(
        prompts::invalid_tool_args(),
        &[("name", tool), ("error", error)],
    )
}

/// The retry prompt for a call of a tool that is not offered.
fn unknown_tool_message(call: &ToolCallPart, offered: &[ToolDef]) -> String {
    let available = offered
        .iter()
        .map(|t| t.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    prompts::fill(
        prompts::unknown_tool(),
        &[("name", &call.tool_name), ("available", &available)],
    )
}

/// The tools the next request offers, before `prepare_tools`: `load_capability` first
/// (when given), then each active capability's tools tagged with its id, then the
/// output tools. A name offered twice fails the run.
pub(super) fn offered_tools(
    load_capability: Option<ToolDef>,
    capability_tools: Vec<(String, Vec<ToolDef>)>,
    output_tools: &[ToolDef],
) -> Result<Vec<ToolDef>, RunError> {
    let mut tools: Vec<ToolDef> = load_capability.into_iter().collect();
    for (id, defs) in capability_tools {
        for mut tool in defs {
            tool.capability_id = Some(id.clone());
            tools.push(tool);
        }
    }
    tools.extend(output_tools.iter().cloned());
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::messages::{ModelRequest, ModelResponsePart, TextPart, ToolReturnPart};

    fn call(name: &str, args: &str, id: &str) -> ToolCallPart {
        ToolCallPart::new(name, args, id)
    }

    fn response(parts: Vec<ModelResponsePart>) -> ModelResponse {
        ModelResponse::new(parts)
    }

    fn text(t: &str) -> ModelResponsePart {
        ModelResponsePart::Text(TextPart::new(t))
    }

    fn tool(name: &str, owner: Option<&str>) -> ToolDef {
        let mut t = ToolDef::function(name, "d", json!({"type": "object"}));
        t.capability_id = owner.map(str::to_string);
        t
    }

    fn output_tool(name: &str) -> ToolDef {
        ToolDef::output(name, "d", json!({"type": "object"}))
    }

    fn ret(name: &str, id: &str) -> ModelRequestPart {
        ModelRequestPart::ToolReturn(ToolReturnPart::new(name, json!("ok"), id))
    }

    fn prompt(text: &str) -> ModelRequestPart {
        ModelRequestPart::UserPrompt(UserPromptPart::new(text))
    }

    fn idle_state(messages: &[&str]) -> StepState {
        let mut state = StepState::new(None);
        state.enqueue(messages.iter().map(|m| Enqueued::when_idle(*m)));
        state
    }

    /// The parts a `Send` decision carries, as `prompt:<text>` / `return:<call id>`
    /// (parts are timestamped, so they are compared by what they say).
    fn sent(decision: &Decision) -> Vec<String> {
        let Decision::Send(parts) = decision else {
            panic!("not a send: {decision:?}");
        };
        parts
            .iter()
            .map(|p| match p {
                ModelRequestPart::UserPrompt(u) => format!("prompt:{}", u.content.text()),
                ModelRequestPart::ToolReturn(r) => format!("return:{}", r.tool_call_id),
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn slot_of(id: &str) -> Option<usize> {
        ["rag", "analysis"].iter().position(|s| *s == id)
    }

    #[test]
    fn a_prompt_starts_with_a_new_request() {
        let history = vec![ModelMessage::from(ModelRequest::new(vec![prompt("old")]))];
        let parts = vec![prompt("q")];
        assert_eq!(
            StepState::start(parts.clone(), &history),
            Decision::Send(parts)
        );
    }

    #[test]
    fn a_promptless_run_on_a_trailing_request_sends_the_history() {
        let history = vec![ModelMessage::from(ModelRequest::new(vec![prompt("q")]))];
        assert_eq!(
            StepState::start(Vec::new(), &history),
            Decision::SendHistory
        );
    }

    #[test]
    fn a_promptless_run_after_a_response_sends_an_empty_request() {
        let history = vec![ModelMessage::from(response(vec![text("a")]))];
        assert_eq!(
            StepState::start(Vec::new(), &history),
            Decision::Send(Vec::new())
        );
        assert_eq!(
            StepState::start(Vec::new(), &[]),
            Decision::Send(Vec::new())
        );
    }

    #[test]
    fn requests_up_to_the_limit_are_allowed() {
        let mut state = StepState::new(Some(2));
        assert_eq!(state.next_request().unwrap(), 1);
        assert_eq!(state.next_request().unwrap(), 2);
        assert!(matches!(
            state.next_request(),
            Err(RunError::RequestLimit { limit: 2 })
        ));
        let mut unlimited = StepState::new(None);
        for n in 1..=100 {
            assert_eq!(unlimited.next_request().unwrap(), n);
        }
    }

    #[test]
    fn a_text_answer_finishes_the_run() {
        let mut state = StepState::new(None);
        assert_eq!(
            state.after_response(&response(vec![text("The "), text("answer.")])),
            Decision::Finish {
                output: RunOutput::Text("The answer.".into()),
                closing: Vec::new(),
            }
        );
    }

    #[test]
    fn a_text_answer_with_queued_messages_sends_them_instead() {
        let mut state = idle_state(&["first", "second"]);
        assert_eq!(
            sent(&state.after_response(&response(vec![text("done")]))),
            ["prompt:first", "prompt:second"]
        );
        // Delivered once: the next text answer ends the run.
        assert!(matches!(
            state.after_response(&response(vec![text("done")])),
            Decision::Finish { .. }
        ));
    }

    #[test]
    fn tool_calls_are_executed_and_queued_messages_wait() {
        let mut state = idle_state(&["later"]);
        let calls = vec![
            call("search", r#"{"q":"x"}"#, "c1"),
            call("fetch", "{}", "c2"),
        ];
        let r = response(vec![
            text("looking"),
            ModelResponsePart::ToolCall(calls[0].clone()),
            ModelResponsePart::ToolCall(calls[1].clone()),
        ]);
        assert_eq!(state.after_response(&r), Decision::Execute(calls));
        assert_eq!(
            sent(&state.after_response(&response(vec![text("done")]))),
            ["prompt:later"]
        );
    }

    #[test]
    fn the_first_output_call_with_usable_arguments_ends_the_run() {
        let offered = [tool("search", Some("rag")), output_tool("answer")];
        let calls = [
            call("search", "{}", "c1"),
            call("answer", r#"{"x": "#, "c2"),
            call("answer", r#"{"x": 1}"#, "c3"),
        ];
        let (index, args) = output_call(&calls, &offered).unwrap();
        assert_eq!(index, 2);
        assert_eq!(Value::Object(args), json!({"x": 1}));
        assert_eq!(output_call(&calls[..2], &offered), None);
        // Only an offered output tool counts.
        assert_eq!(output_call(&calls, &[tool("answer", None)]), None);
    }

    #[test]
    fn load_capability_is_the_engines_own() {
        let offered = [tool(LOAD_CAPABILITY_TOOL, None)];
        let c = call(LOAD_CAPABILITY_TOOL, r#"{"id": "rag"}"#, "c1");
        assert_eq!(route(&c, &offered, slot_of), Route::LoadCapability);
    }

    #[test]
    fn a_capability_tool_with_an_object_is_called_on_its_slot() {
        let offered = [tool("search", Some("rag")), tool("chart", Some("analysis"))];
        let c = call("chart", r#"{"kind": "bar"}"#, "c1");
        let Route::Call { slot, args } = route(&c, &offered, slot_of) else {
            panic!("not a call");
        };
        assert_eq!(slot, 1);
        assert_eq!(Value::Object(args), json!({"kind": "bar"}));
    }

    #[test]
    fn malformed_or_cut_off_arguments_get_a_retry_on_the_owners_budget() {
        let offered = [tool("search", Some("rag"))];
        for args in [r#"{"q": "cut"#, "[1, 2]", "not json"] {
            let c = call("search", args, "c1");
            let Route::Retry { slot, message } = route(&c, &offered, slot_of) else {
                panic!("not a retry for {args}");
            };
            assert_eq!(slot, Some(0));
            let err = c.args_as_object().unwrap_err();
            assert_eq!(message, invalid_args_message("search", &err));
        }
    }

    #[test]
    fn an_output_call_with_bad_arguments_gets_a_retry_on_the_agents_budget() {
        let offered = [output_tool("answer")];
        let c = call("answer", r#"{"x"#, "c1");
        let err = c.args_as_object().unwrap_err();
        assert_eq!(
            route(&c, &offered, slot_of),
            Route::Retry {
                slot: None,
                message: invalid_args_message("answer", &err),
            }
        );
    }

    #[test]
    fn an_unknown_tool_gets_a_retry_naming_the_available_ones() {
        let offered = [tool("search", Some("rag")), output_tool("answer")];
        let expected = prompts::fill(
            prompts::unknown_tool(),
            &[("name", "nope"), ("available", "search, answer")],
        );
        assert_eq!(
            route(&call("nope", "{}", "c1"), &offered, slot_of),
            Route::Retry {
                slot: None,
                message: expected,
            }
        );
        // A tool whose owner has no run slot is unknown too.
        let orphan = [tool("ghost", Some("gone"))];
        assert!(matches!(
            route(&call("ghost", "{}", "c1"), &orphan, slot_of),
            Route::Retry { slot: None, .. }
        ));
    }

    #[test]
    fn retries_count_once_per_step_and_run_out_at_the_budget() {
        let mut state = StepState::new(None);
        state.begin_calls();
        state.charge_retry("search", 2).unwrap();
        // A second failure of the same tool in the same step does not count again.
        state.charge_retry("search", 2).unwrap();
        state.end_calls();
        state.begin_calls();
        state.charge_retry("search", 2).unwrap();
        state.end_calls();
        state.begin_calls();
        assert!(matches!(
            state.charge_retry("search", 2),
            Err(RunError::RetriesExhausted { ref tool, max: 2 }) if tool == "search"
        ));
        // A zero budget fails at once.
        assert!(state.charge_retry("answer", 0).is_err());
    }

    #[test]
    fn a_step_without_failures_resets_the_retry_count() {
        let mut state = StepState::new(None);
        state.begin_calls();
        state.charge_retry("search", 1).unwrap();
        state.end_calls();
        // The next step: search succeeds (nothing charged), so its count starts over.
        state.begin_calls();
        state.end_calls();
        state.begin_calls();
        state.charge_retry("search", 1).unwrap();
    }

    #[test]
    fn tool_results_go_out_in_the_next_request() {
        let mut state = idle_state(&["later"]);
        let parts = vec![ret("search", "c1")];
        assert_eq!(
            state.after_calls(CallsEnd::Continue(parts.clone())),
            Decision::Send(parts)
        );
    }

    #[test]
    fn an_output_tool_finishes_with_its_arguments_and_the_returns() {
        let mut state = StepState::new(None);
        let parts = vec![ret("answer", "c1")];
        assert_eq!(
            state.after_calls(CallsEnd::Output {
                parts: parts.clone(),
                tool_name: "answer".into(),
                args: json!({"x": 1}),
            }),
            Decision::Finish {
                output: RunOutput::Tool {
                    tool_name: "answer".into(),
                    args: json!({"x": 1}),
                },
                closing: parts,
            }
        );
    }

    #[test]
    fn an_output_tool_with_queued_messages_delivers_them_with_the_returns() {
        let mut state = idle_state(&["redirect"]);
        let decision = state.after_calls(CallsEnd::Output {
            parts: vec![ret("answer", "c1")],
            tool_name: "answer".into(),
            args: json!({}),
        });
        assert_eq!(sent(&decision), ["return:c1", "prompt:redirect"]);
    }

    #[test]
    fn deferred_calls_pause_the_run() {
        let mut state = idle_state(&["never"]);
        let deferred = vec![call("approve", "{}", "c2")];
        let done = vec![ret("search", "c1")];
        assert_eq!(
            state.after_calls(CallsEnd::Deferred {
                parts: done.clone(),
                calls: deferred.clone(),
            }),
            Decision::Finish {
                output: RunOutput::Deferred(DeferredRequests { calls: deferred }),
                closing: done,
            }
        );
    }

    #[test]
    fn tools_are_offered_engine_first_then_capabilities_then_outputs() {
        let tools = offered_tools(
            Some(tool(LOAD_CAPABILITY_TOOL, None)),
            vec![
                ("rag".into(), vec![tool("search", None)]),
                (
                    "analysis".into(),
                    vec![tool("chart", None), tool("table", None)],
                ),
            ],
            &[output_tool("answer")],
        )
        .unwrap();
        let names: Vec<(&str, Option<&str>)> = tools
            .iter()
            .map(|t| (t.name.as_str(), t.capability_id.as_deref()))
            .collect();
        assert_eq!(
            names,
            [
                (LOAD_CAPABILITY_TOOL, None),
                ("search", Some("rag")),
                ("chart", Some("analysis")),
                ("table", Some("analysis")),
                ("answer", None),
            ]
        );
        assert!(offered_tools(None, Vec::new(), &[]).unwrap().is_empty());
    }

    #[test]
    fn a_tool_name_offered_twice_fails_the_run() {
        let twice = offered_tools(
            None,
            vec![
                ("rag".into(), vec![tool("search", None)]),
                ("web".into(), vec![tool("search", None)]),
            ],
            &[],
        );
        assert!(matches!(
            twice,
            Err(RunError::Hook { ref capability, hook: "tools", ref message })
                if capability == "web" && message.contains("'search' is offered twice")
        ));
        let reserved = offered_tools(
            Some(tool(LOAD_CAPABILITY_TOOL, None)),
            vec![("rag".into(), vec![tool(LOAD_CAPABILITY_TOOL, None)])],
            &[],
        );
        assert!(matches!(
            reserved,
            Err(RunError::Hook { ref capability, ref message, .. })
                if capability == "rag" && message.contains("reserved")
        ));
    }
}
