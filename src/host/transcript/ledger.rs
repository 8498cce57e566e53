//! The citation ledger's rows: per question, the chunks it cited and the ones it
//! retrieved without citing, its searches and executions, and its citation status.

use crate::store::types::source_label;
use serde::Serialize;

use crate::capabilities::state::EvidenceState;
use crate::capabilities::{analysis, rag};

use super::{CitationStatus, Namespace, StepStatus, Turn};

/// A retrieved or cited chunk in the ledger.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LedgerChunk {
    pub capability: String,
    pub chunk_id: String,
    /// Display number when cited.
    pub index: Option<i64>,
    pub document_id: Option<String>,
    /// Title or URI when known.
    pub document: Option<String>,
    pub pages: Vec<i64>,
    pub content: Option<String>,
    pub picture_refs: Vec<String>,
    /// The collection the chunk came from, when several were searched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collection: Option<String>,
}

/// One row of the citation ledger: one question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LedgerRow {
    pub question: u64,
    pub prompt: String,
    pub status: CitationStatus,
    pub redirected: bool,
    pub violation: bool,
    pub cited: Vec<LedgerChunk>,
    /// Retrieved for this question but not cited.
    pub uncited: Vec<LedgerChunk>,
    pub searches: usize,
    pub executions: usize,
    /// The answer was cut off at the token limit.
    pub cut_off: bool,
}

/// A past question's status from its history: cited chunks → grounded; a successful cite
/// with no chunks → ungrounded; otherwise missing.
pub(super) fn past_status(turn: &Turn) -> CitationStatus {
    if !turn.citations.is_empty() {
        return CitationStatus::Grounded;
    }
    let cited_nothing = turn.steps.iter().any(|s| {
        super::tool_kind(&s.name) == super::ToolKind::Cite
            && s.status == StepStatus::Ok
            && cites_no_chunks(&s.args)
    });
    if cited_nothing {
        CitationStatus::Ungrounded
    } else {
        CitationStatus::Missing
    }
}

/// Whether a cite call's arguments name no chunk (`{"chunk_ids": []}`): the model's
/// declaration that nothing grounds its answer. Read from the arguments, not from how a
/// tool row words them.
pub(super) fn cites_no_chunks(args: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(args)
        .ok()
        .and_then(|v| {
            v.get("chunk_ids")
                .and_then(|ids| ids.as_array().map(Vec::is_empty))
        })
        .unwrap_or(false)
}

pub(super) fn ledger_row(
    turn: &Turn,
    states: &[EvidenceState],
    status: CitationStatus,
    violation: bool,
) -> LedgerRow {
    let q = turn.question;
    let mut cited = Vec::new();
    let mut uncited = Vec::new();
    for s in states {
        let ns = s.kind_namespace();
        for (id, occ) in s.evidence.occurrences.iter() {
            let is_cited = occ.cited_in_questions.contains(&q);
            if !is_cited && !occ.retrieved_in_questions.contains(&q) {
                continue;
            }
            let citation = s.citation_index.get(id);
            let result = s
                .searches
                .values()
                .flatten()
                .find(|r| r.chunk_id.as_deref() == Some(id));
            let chunk = LedgerChunk {
                capability: ns.to_string(),
                chunk_id: id.to_string(),
                index: citation.and_then(|c| c.index),
                document_id: citation
                    .map(|c| c.document_id.clone())
                    .or_else(|| result.and_then(|r| r.document_id.clone())),
                document: citation
                    .map(|c| source_label(c.document_title.as_deref(), Some(&c.document_uri)))
                    .or_else(|| result.map(|r| r.source_label())),
                pages: citation
                    .map(|c| c.page_numbers.clone())
                    .or_else(|| result.map(|r| r.page_numbers.clone()))
                    .unwrap_or_default(),
                content: citation
                    .map(|c| c.content.clone())
                    .or_else(|| result.map(|r| r.content.clone())),
                picture_refs: citation.map(|c| c.picture_refs.clone()).unwrap_or_default(),
                collection: citation
                    .and_then(|c| c.collection.clone())
                    .or_else(|| result.and_then(|r| r.collection.clone())),
            };
            if is_cited {
                cited.push(chunk);
            } else {
                uncited.push(chunk);
            }
        }
    }
    // Retrieved in this question's searches (read from its tool results) but not cited.
    for (cap, id, source) in &turn.retrieved {
        let known = cited
            .iter()
            .chain(uncited.iter())
            .any(|c| &c.chunk_id == id);
        if known {
            continue;
        }
        let citation = states.iter().find_map(|s| s.citation_index.get(id));
        uncited.push(LedgerChunk {
            capability: cap.clone(),
            chunk_id: id.clone(),
            index: None,
            document_id: citation.map(|c| c.document_id.clone()),
            document: citation
                .map(|c| source_label(c.document_title.as_deref(), Some(&c.document_uri)))
                .or_else(|| source.clone()),
            pages: citation.map(|c| c.page_numbers.clone()).unwrap_or_default(),
            content: citation.map(|c| c.content.clone()),
            picture_refs: Vec::new(),
            collection: citation.and_then(|c| c.collection.clone()).or_else(|| {
                states.iter().find_map(|s| {
                    s.searches
                        .values()
                        .flatten()
                        .find(|r| r.chunk_id.as_deref() == Some(id.as_str()))
                        .and_then(|r| r.collection.clone())
                })
            }),
        });
    }
    cited.sort_by_key(|c| c.index.unwrap_or(i64::MAX));
    let count = |names: &[&str]| {
        turn.steps
            .iter()
            .filter(|s| names.contains(&s.name.as_str()))
            .count()
    };
    LedgerRow {
        question: q,
        prompt: turn.prompt.clone(),
        status,
        redirected: turn.redirected,
        violation,
        cited,
        uncited,
        // haiku.rag 0.101's searches in its budget's units.
        searches: count(&[rag::SEARCH_TOOL, analysis::SEARCH_TOOL]) + turn.search_units_0101,
        executions: count(&[analysis::EXECUTE_TOOL, super::tools::EXECUTE_TOOL_0101]),
        cut_off: turn.cut_off,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_is_read_from_the_cite_arguments() {
        assert!(cites_no_chunks(r#"{"chunk_ids": []}"#));
        assert!(cites_no_chunks(r#"{ "chunk_ids" : [ ] }"#));
        assert!(!cites_no_chunks(r#"{"chunk_ids": ["c1"]}"#));
        assert!(!cites_no_chunks("no chunks (ungrounded)"));
        assert!(!cites_no_chunks("{}"));
    }
}
