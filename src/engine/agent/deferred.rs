//! Deferred capability loading (SPEC §12): the catalogue in the instructions while a
//! deferred capability is collapsed, the engine-owned `load_capability` tool (its
//! definition and its execution), and recovery of loaded capabilities from the history.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};

use super::{Agent, LOAD_CAPABILITY_TOOL};
use crate::engine::capability::{Capability, RunContext, ToolDef, ToolOutcome, ToolOutput};
use crate::engine::messages::{ModelMessage, ModelRequestPart, ToolCallPart};
use crate::engine::prompts;

/// Retry budget of `load_capability` (as in pydantic-ai).
pub(super) const LOAD_CAPABILITY_MAX_RETRIES: u32 = 1;

impl Agent {
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

    /// The catalogue of deferred capabilities, while any of them is not loaded yet.
    pub(super) fn deferred_catalogue(&self, ctx: &RunContext) -> Option<String> {
        let deferred: Vec<&Arc<dyn Capability>> = self
            .capabilities
            .iter()
            .filter(|c| c.defer_loading())
            .collect();
        if !deferred.iter().any(|c| !ctx.active.contains(c.id())) {
            return None;
        }
        let mut lines = vec![prompts::deferred_catalogue_header().to_string()];
        for c in deferred {
            lines.push(match c.description() {
                Some(d) => format!("- {}: {}", c.id(), d),
                None => format!("- {}", c.id()),
            });
        }
        lines.push(prompts::deferred_catalogue_footer().to_string());
        Some(lines.join("\n"))
    }

    /// Whether any capability is deferred (then `load_capability` is offered).
    pub(super) fn has_deferred(&self) -> bool {
        self.capabilities.iter().any(|c| c.defer_loading())
    }

    /// The engine's `load_capability` tool (SPEC §12).
    pub(super) fn load_capability(&self, ctx: &mut RunContext, call: &ToolCallPart) -> ToolOutcome {
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
