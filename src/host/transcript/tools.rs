//! Reading tool calls and results: the one-line summary a tool row shows, and the chunk
//! ids a search tool's text returned.

use serde_json::{Map, Value};

use crate::capabilities::{analysis, rag};

/// What a capability tool does, for faces that show it without naming capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// `rag_search`, `analysis_search`.
    Search,
    /// `rag_cite`, `analysis_cite`.
    Cite,
    /// `analysis_execute_code`.
    Execute,
    /// Anything else (`load_capability`, output tools, a host's own tools).
    Other,
}

/// The kind of the tool called `name`.
pub fn tool_kind(name: &str) -> ToolKind {
    match name {
        rag::SEARCH_TOOL | analysis::SEARCH_TOOL => ToolKind::Search,
        rag::CITE_TOOL | analysis::CITE_TOOL => ToolKind::Cite,
        analysis::EXECUTE_TOOL => ToolKind::Execute,
        _ => ToolKind::Other,
    }
}

/// One line describing a tool call, as a tool row shows it.
pub fn tool_summary(name: &str, args: &str) -> String {
    let parsed: Option<Map<String, Value>> = serde_json::from_str(args).ok();
    let one_line = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    match (name, &parsed) {
        (rag::SEARCH_TOOL | analysis::SEARCH_TOOL, Some(m)) => match m.get("query") {
            Some(Value::String(q)) => format!("\"{}\"", one_line(q)),
            _ => one_line(args),
        },
        (analysis::EXECUTE_TOOL, Some(m)) => match m.get("code") {
            Some(Value::String(code)) => code
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
                .chars()
                .take(120)
                .collect(),
            _ => one_line(args),
        },
        (rag::CITE_TOOL | analysis::CITE_TOOL, Some(m)) => match m.get("chunk_ids") {
            Some(Value::Array(ids)) if ids.is_empty() => "no chunks (ungrounded)".into(),
            Some(Value::Array(ids)) => ids
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(String::from)
                        .unwrap_or_else(|| v.to_string())
                })
                .collect::<Vec<_>>()
                .join(", "),
            _ => one_line(args),
        },
        _ => one_line(args).chars().take(160).collect(),
    }
}

/// The chunk ids (and `Source:` lines) of a search tool's text: each result block starts
/// with `[chunk_id]`, optionally followed by ` [rank i of n]`.
pub fn result_ids(text: &str) -> Vec<(String, Option<String>)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix('[') else {
            continue;
        };
        let Some(end) = rest.find(']') else {
            continue;
        };
        let id = &rest[..end];
        let after = &rest[end + 1..];
        if id.is_empty() || id.contains(' ') || !(after.is_empty() || after.starts_with(" [rank")) {
            continue;
        }
        let source = lines
            .iter()
            .skip(i + 1)
            .take(3)
            .find_map(|l| l.strip_prefix("Source: "))
            .map(|s| {
                let s = s.trim();
                // `"Title" > heading > ...`: the quoted title.
                match s.strip_prefix('"').and_then(|r| r.split_once('"')) {
                    Some((title, _)) => title.to_string(),
                    None => s.to_string(),
                }
            });
        out.push((id.to_string(), source));
    }
    out
}
