//! The search tool both evidence capabilities offer (`rag_search`,
//! `analysis_search`; SPEC §5): its arguments and schema, and what a search returns
//! to the model and records in the state.

use std::collections::HashSet;

use anyhow::Context as _;
use serde_json::{Map, Value, json};

use super::pictures::picture_content;
use crate::capabilities::state::EvidenceState;
use crate::engine::capability::{ToolOutcome, ToolOutput};
use crate::store::SearchResult;
use crate::store::format::{NO_RESULTS, format_for_agent, join_results};
use crate::store::rerank::RerankReport;

fn search_query_description() -> &'static str {
    include_str!("../../../assets/prompts/capabilities/rag_search_query_description.txt").trim_end()
}

fn search_limit_description() -> &'static str {
    include_str!("../../../assets/prompts/capabilities/rag_search_limit_description.txt").trim_end()
}

fn search_limit_text() -> &'static str {
    include_str!("../../../assets/prompts/capabilities/search_limit.txt").trim_end()
}

/// The failure of a search past `max_searches` (SPEC §7.1), or `None` while the
/// budget lasts. `count` is the searches made, this one included.
pub fn over_budget(count: usize, max_searches: usize) -> Option<ToolOutcome> {
    (count > max_searches).then(|| ToolOutcome::Failed(search_limit_text().to_string()))
}

/// The `query` and `limit` arguments of `tool` (`limit` defaults to `default_limit`).
pub fn parse_args(
    tool: &str,
    args: &Map<String, Value>,
    default_limit: usize,
) -> anyhow::Result<(String, usize)> {
    let query = args
        .get("query")
        .and_then(Value::as_str)
        .with_context(|| format!("{tool} needs a string `query`"))?
        .to_string();
    let limit = match args.get("limit") {
        None | Some(Value::Null) => default_limit,
        Some(v) => v
            .as_u64()
            .map(|n| n as usize)
            .context("`limit` must be a non-negative integer")?,
    };
    Ok((query, limit))
}

/// The argument schema: `query` and an optional `limit`.
pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": search_query_description()},
            "limit": {
                "anyOf": [{"type": "integer"}, {"type": "null"}],
                "default": null,
                "description": search_limit_description()
            }
        },
        "required": ["query"],
        "additionalProperties": false
    })
}

/// Adds `results` to the state's `searches[bucket]`, skipping chunks already there.
pub fn merge_results(state: &mut EvidenceState, bucket: &str, results: &[SearchResult]) {
    let kept = state.searches.get_or_insert_with(bucket, Vec::new);
    let mut seen: HashSet<String> = kept.iter().map(|r| r.id().to_string()).collect();
    for r in results {
        if seen.insert(r.id().to_string()) {
            kept.push(r.clone());
        }
    }
}

/// One result's block as a search return of `total` results shows it at `rank` (1-based).
pub fn result_block(result: &SearchResult, rank: usize, total: usize) -> String {
    format_for_agent(result, Some(rank), Some(total))
}

/// The text a search returns to the model for `results`: the numbered blocks, or the
/// no-results line.
pub fn results_text(results: &[SearchResult]) -> String {
    if results.is_empty() {
        return NO_RESULTS.to_string();
    }
    let total = results.len();
    let blocks: Vec<String> = results
        .iter()
        .enumerate()
        .map(|(i, r)| result_block(r, i + 1, total))
        .collect();
    join_results(&blocks)
}

/// Records a search's `results` under `query`, notes evidence in `epoch`, and builds
/// the return: the numbered result blocks, plus the pictures when `vision` is on.
pub fn finish(
    state: &mut EvidenceState,
    query: &str,
    results: &[SearchResult],
    epoch: u64,
    vision: bool,
) -> anyhow::Result<ToolOutcome> {
    finish_reported(state, query, results, epoch, vision, Vec::new())
}

/// [`finish`] for a search that went through a reranker: what it did (one report per
/// store searched) goes into the tool return's metadata, for the inspector.
pub fn finish_reported(
    state: &mut EvidenceState,
    query: &str,
    results: &[SearchResult],
    epoch: u64,
    vision: bool,
    reports: Vec<RerankReport>,
) -> anyhow::Result<ToolOutcome> {
    let metadata = rerank_metadata(reports, results);
    let text = results_text(results);
    merge_results(state, query, results);
    state.evidence.note_evidence(epoch)?;
    let mut output = ToolOutput::text(text);
    if vision {
        let pictures = picture_content(results);
        if !pictures.is_empty() {
            output = output.with_extra(pictures);
        }
    }
    if let Some(m) = metadata {
        output = output.with_metadata(m);
    }
    Ok(ToolOutcome::Ok(output))
}

/// One report for the results shown, in their order: the hits of every store's report
/// (fused ranks stay those of their own store), the candidates summed, the warnings
/// joined. `None` without a reranker.
fn rerank_metadata(reports: Vec<RerankReport>, results: &[SearchResult]) -> Option<Value> {
    let first = reports.first()?.clone();
    let find = |id: &str| reports.iter().find_map(|r| r.hit(id)).cloned();
    let hits = results
        .iter()
        .filter_map(|r| {
            r.chunk_id
                .iter()
                .chain(&r.chunk_ids)
                .find_map(|id| find(id))
        })
        .collect();
    let warnings: Vec<&str> = reports
        .iter()
        .filter_map(|r| r.warning.as_deref())
        .collect();
    let merged = RerankReport {
        candidates: reports.iter().map(|r| r.candidates).sum(),
        results: hits,
        warning: (!warnings.is_empty()).then(|| warnings.join("; ")),
        ..first
    };
    Some(merged.to_metadata())
}
