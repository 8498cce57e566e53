//! The cite tool shared by the evidence capabilities (`rag_cite`, `analysis_cite`;
//! SPEC §6): ids resolved against this question's retrieved results with near-miss
//! repair, then through the stores (each document read once per call), numbered across
//! the conversation, and declared.

use std::collections::HashMap;

use anyhow::bail;
use serde_json::{Map, Value, json};

use crate::capabilities::evidence::StoreHandle;
use crate::capabilities::kit::py_list;
use crate::capabilities::similarity::closest;
use crate::capabilities::state::{Citation, CitationRef, EvidenceState};
use crate::engine::capability::{ToolOutcome, ToolOutput};
use crate::store::search::result_from_chunk;
use crate::store::{DocumentMeta, SearchResult};
use crate::template::fill;

macro_rules! text {
    ($name:ident, $file:literal) => {
        fn $name() -> &'static str {
            include_str!(concat!("../../assets/prompts/capabilities/", $file)).trim_end()
        }
    };
}

text!(cite_ids_description, "rag_cite_ids_description.txt");
text!(cite_empty_text, "cite_empty.txt");
text!(cite_registered_text, "cite_registered.txt");
text!(cite_partial_text, "cite_partial.txt");
text!(cite_unresolved_text, "cite_unresolved.txt");

/// The cite tool's parameters: `chunk_ids`, a list of strings.
pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "chunk_ids": {
                "type": "array",
                "items": {"type": "string"},
                "description": cite_ids_description()
            }
        },
        "required": ["chunk_ids"],
        "additionalProperties": false
    })
}

/// The `chunk_ids` argument: a list (non-strings as their JSON), one string, or nothing.
fn requested_ids(args: &Map<String, Value>) -> anyhow::Result<Vec<String>> {
    Ok(match args.get("chunk_ids") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        None | Some(Value::Null) => Vec::new(),
        Some(other) => bail!("`chunk_ids` must be a list of strings, found {other}"),
    })
}

/// Runs the cite tool for the capability whose state namespace is `namespace`, over its
/// `stores` (collection name, handle) for ids not retrieved in this question.
pub async fn cite(
    state: &mut EvidenceState,
    namespace: &str,
    epoch: u64,
    stores: &[(Option<String>, StoreHandle)],
    args: &Map<String, Value>,
) -> anyhow::Result<ToolOutcome> {
    let requested = requested_ids(args)?;
    if requested.is_empty() {
        state.declare(&[], epoch)?;
        return Ok(ToolOutcome::Ok(ToolOutput::text(cite_empty_text())));
    }

    // Everything retrieved in this question, first result per chunk id wins.
    let mut known: Vec<String> = Vec::new();
    let mut by_id: HashMap<String, SearchResult> = HashMap::new();
    for r in state.searches.values().flatten() {
        let Some(id) = r.chunk_id.clone() else {
            continue;
        };
        if let std::collections::hash_map::Entry::Vacant(slot) = by_id.entry(id.clone()) {
            known.push(id);
            slot.insert(r.clone());
        }
    }

    let mut resolved: Vec<(String, SearchResult)> = Vec::new();
    let mut unresolved: Vec<String> = Vec::new();
    for raw in &requested {
        let id = raw.trim_matches(|c| c == '[' || c == ']').to_string();
        let id = if !by_id.contains_key(&id) && !known.is_empty() {
            closest(&id, &known).unwrap_or(id)
        } else {
            id
        };
        match by_id.get(&id) {
            Some(r) => resolved.push((id, r.clone())),
            None => unresolved.push(id),
        }
    }

    let mut ignored = Vec::new();
    if !unresolved.is_empty() {
        // Documents fetched once per (collection, document id) within this call.
        let mut docs: HashMap<(usize, String), Option<DocumentMeta>> = HashMap::new();
        for id in unresolved {
            let mut found = None;
            for (at, (name, handle)) in stores.iter().enumerate() {
                let store = handle.get().await?;
                let Some(chunk) = store.get_chunk(&id).await? else {
                    continue;
                };
                let key = (at, chunk.document_id.clone());
                if !docs.contains_key(&key) {
                    let doc = store.get_document(&key.1).await?;
                    docs.insert(key.clone(), doc);
                }
                found = docs[&key].as_ref().map(|doc| {
                    let mut r = result_from_chunk(chunk, 1.0, Some(doc));
                    r.collection = name.clone();
                    r
                });
                break;
            }
            match found {
                Some(result) => resolved.push((id, result)),
                None => ignored.push(id),
            }
        }
    }

    if resolved.is_empty() {
        return Ok(ToolOutcome::Retry(fill(
            cite_unresolved_text(),
            &[("ids", &py_list(&requested))],
        )));
    }

    let mut refs = Vec::with_capacity(resolved.len());
    for (id, result) in &resolved {
        if !state.citation_index.contains_key(id) {
            let mut citation = Citation::from_result(id, result);
            citation.index = Some(state.citation_index.len() as i64 + 1);
            state.citation_index.insert(id.clone(), citation);
        }
        if !state.citations.contains(id) {
            state.citations.push(id.clone());
        }
        refs.push(CitationRef::new(namespace, id.clone()));
    }
    state.declare(&refs, epoch)?;

    let count = resolved.len().to_string();
    let reply = if ignored.is_empty() {
        fill(cite_registered_text(), &[("count", &count)])
    } else {
        fill(
            cite_partial_text(),
            &[
                ("count", &count),
                ("ignored_count", &ignored.len().to_string()),
                ("ignored", &py_list(&ignored)),
            ],
        )
    };
    Ok(ToolOutcome::Ok(ToolOutput::text(reply)))
}
