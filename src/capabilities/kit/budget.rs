//! The per-run request budget of an evidence capability (SPEC §7.2, §7.3): model
//! requests are counted; at the limit only the cite tool stays offered, for
//! [`CITATION_GRACE_REQUESTS`] requests that still call one of the capability's tools,
//! then every tool of the capability is withdrawn. The notices of those two stages
//! live here too.

use crate::engine::capability::ToolDef;
use crate::engine::messages::ModelMessage;
use crate::template::fill;

/// Requests the cite tool stays offered once the request limit is reached.
pub const CITATION_GRACE_REQUESTS: usize = 2;

fn notice_grace_text() -> &'static str {
    include_str!("../../../assets/prompts/capabilities/notice_grace_expired.txt").trim_end()
}

fn notice_limit_text() -> &'static str {
    include_str!("../../../assets/prompts/capabilities/notice_request_limit.txt").trim_end()
}

/// Counted requests and used grace requests against an optional limit.
#[derive(Debug, Clone, Default)]
pub struct RequestBudget {
    limit: Option<usize>,
    pub(crate) requests: usize,
    pub(crate) grace_used: usize,
}

impl RequestBudget {
    /// A fresh budget (`None` = no limit).
    pub fn new(limit: Option<usize>) -> Self {
        RequestBudget {
            limit,
            requests: 0,
            grace_used: 0,
        }
    }

    /// Counted model requests.
    pub fn request_count(&self) -> usize {
        self.requests
    }

    /// Grace requests used after the limit.
    pub fn grace_requests_used(&self) -> usize {
        self.grace_used
    }

    /// Whether the request limit is reached.
    pub fn limit_reached(&self) -> bool {
        self.limit.is_some_and(|limit| self.requests >= limit)
    }

    /// Whether the citation grace is used up (the cite tool is withdrawn too).
    pub fn grace_expired(&self) -> bool {
        self.limit.is_some() && self.grace_used >= CITATION_GRACE_REQUESTS
    }

    /// Removes the withdrawn tools of `capability_id` (SPEC §7.2); others are untouched.
    pub fn withdraw(&self, capability_id: &str, cite_tool: &str, tools: &mut Vec<ToolDef>) {
        let own = |t: &ToolDef| t.capability_id.as_deref() == Some(capability_id);
        if self.grace_expired() {
            tools.retain(|t| !own(t));
        } else if self.limit_reached() {
            tools.retain(|t| !own(t) || t.name == cite_tool);
        }
    }

    /// The grace-expired or request-limit notice (SPEC §7.3 cases 1 and 2), if due.
    pub fn notice(&self, namespace: &str, cite_tool: &str) -> Option<String> {
        if self.grace_expired() {
            return Some(fill(notice_grace_text(), &[("ns", namespace)]));
        }
        if self.limit_reached() {
            return Some(fill(
                notice_limit_text(),
                &[("ns", namespace), ("cite", cite_tool)],
            ));
        }
        None
    }

    /// Counts the coming request; past the limit, a request after a response that
    /// called one of `own_tools` uses one grace request.
    pub fn count_request(&mut self, messages: &[ModelMessage], own_tools: &[&str]) {
        if self.limit_reached() && latest_response_called(messages, own_tools) {
            self.grace_used += 1;
        }
        self.requests += 1;
    }
}

/// Whether the newest response in `messages` called one of `tools`.
fn latest_response_called(messages: &[ModelMessage], tools: &[&str]) -> bool {
    messages
        .iter()
        .rev()
        .find_map(ModelMessage::as_response)
        .is_some_and(|r| {
            r.tool_calls()
                .any(|c| tools.contains(&c.tool_name.as_str()))
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(name: &str, capability: Option<&str>) -> ToolDef {
        ToolDef {
            capability_id: capability.map(str::to_string),
            ..ToolDef::function(name, "", json!({}))
        }
    }

    #[test]
    fn no_limit_never_withdraws_and_grace_needs_own_calls() {
        let mut unlimited = RequestBudget::new(None);
        for _ in 0..50 {
            unlimited.count_request(&[], &["t"]);
        }
        assert!(!unlimited.limit_reached() && !unlimited.grace_expired());
        assert_eq!(unlimited.notice("rag", "rag_cite"), None);

        let mut budget = RequestBudget::new(Some(1));
        budget.count_request(&[], &["t"]);
        assert!(budget.limit_reached());
        // No response called one of the tools: no grace is used.
        budget.count_request(&[], &["t"]);
        assert_eq!(budget.grace_requests_used(), 0);
        let mut tools = vec![
            tool("t", Some("cap")),
            tool("cite", Some("cap")),
            tool("other", None),
        ];
        budget.withdraw("cap", "cite", &mut tools);
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["cite", "other"]);
    }
}
