//! Reading tool calls and results: the one-line summary a tool row shows, and the chunk
//! ids a search tool's text returned.

use serde_json::{Map, Value};

use crate::capabilities::{analysis, rag};
use crate::store::format::BLOCK_SEPARATOR;

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

/// The tools of haiku.rag 0.87 and later (today's 0.101): one RAG capability, its tools
/// unprefixed. Sessions its hosts recorded are read with these names.
pub const SEARCH_TOOL_0101: &str = "search";
/// See [`SEARCH_TOOL_0101`].
pub const CITE_TOOL_0101: &str = "cite";
/// See [`SEARCH_TOOL_0101`].
pub const EXECUTE_TOOL_0101: &str = "execute_code";

/// The kind of the tool called `name`.
pub fn tool_kind(name: &str) -> ToolKind {
    match name {
        rag::SEARCH_TOOL | analysis::SEARCH_TOOL | SEARCH_TOOL_0101 => ToolKind::Search,
        rag::CITE_TOOL | analysis::CITE_TOOL | CITE_TOOL_0101 => ToolKind::Cite,
        analysis::EXECUTE_TOOL | EXECUTE_TOOL_0101 => ToolKind::Execute,
        _ => ToolKind::Other,
    }
}

/// One line describing a tool call, as a tool row shows it.
pub fn tool_summary(name: &str, args: &str) -> String {
    let parsed: Option<Map<String, Value>> = serde_json::from_str(args).ok();
    let one_line = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    match (tool_kind(name), &parsed) {
        (ToolKind::Search, Some(m)) => match m.get("query") {
            Some(Value::String(q)) => format!("\"{}\"", one_line(q)),
            _ => one_line(args),
        },
        (ToolKind::Execute, Some(m)) => match m.get("code") {
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
        (ToolKind::Cite, Some(m)) => match m.get("chunk_ids") {
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

/// The chunk ids (and `Source:` lines) of a search tool's text: each result block (blocks
/// are joined by [`BLOCK_SEPARATOR`]) starts with `[chunk_id]`, followed by ` [rank i of n]`,
/// ` [rank i]` or ` (score: s)`. Only a block's first line is read: a line of a chunk's own
/// text that happens to start with a bracket (a texinfo `[Function]` label) is content.
pub fn result_ids(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for block in text.split(BLOCK_SEPARATOR) {
        let mut lines = block.lines();
        let Some(header) = lines.next() else {
            continue;
        };
        let Some((id, after)) = header
            .strip_prefix('[')
            .and_then(|rest| rest.split_once(']'))
        else {
            continue;
        };
        let header_tail =
            after.is_empty() || after.starts_with(" [rank ") || after.starts_with(" (score: ");
        if id.is_empty() || id.contains(char::is_whitespace) || !header_tail {
            continue;
        }
        let source = lines
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_blocks_first_line_names_a_chunk() {
        let text = "[c1] [rank 1 of 2]\nSource: \"Manual\" > 4 Functions\nContent:\n\
                    [Function]\nint asn1_create_element (...)\n[x] [rank 9 of 9]\
                    \n\n---\n\n[c2] [rank 2 of 2]\nContent:\nplain";
        assert_eq!(
            result_ids(text),
            vec![
                ("c1".to_string(), Some("Manual".to_string())),
                ("c2".to_string(), None)
            ]
        );
        assert_eq!(result_ids("[c] (score: 0.50)\nContent:\nx")[0].0, "c");
        assert!(result_ids("No results found.").is_empty());
    }
}
