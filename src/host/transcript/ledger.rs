//! The citation ledger's rows: per question, the chunks it cited and the ones it
//! retrieved without citing, its searches and executions, and its citation status.

use serde::Serialize;

use crate::capabilities::state::EvidenceState;
use crate::capabilities::{analysis, rag};

use super::{CitationStatus, Evidence, Namespace, StepStatus, Turn};

/// A retrieved or cited chunk in the ledger.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LedgerChunk {
    /// Display number when cited.
    pub index: Option<i64>,
    #[serde(flatten)]
    pub evidence: Evidence,
    pub content: Option<String>,
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

/// A past question's status from its history ([`CitationStatus::of_declarations`]): its
/// citations are a declaration that cites something, each successful cite naming no
/// chunk one that cites nothing.
pub(super) fn past_status(turn: &Turn) -> CitationStatus {
    let cited = (!turn.citations.is_empty()).then_some(true);
    let declared_nothing = turn
        .steps
        .iter()
        .filter(|s| {
            super::tool_kind(&s.name) == super::ToolKind::Cite
                && s.status == StepStatus::Ok
                && cites_no_chunks(&s.args)
        })
        .map(|_| false);
    CitationStatus::of_declarations(cited.into_iter().chain(declared_nothing))
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
                index: citation.and_then(|c| c.index),
                evidence: match (citation, result) {
                    (Some(c), _) => Evidence::cited(ns, c),
                    (None, Some(r)) => Evidence::found(ns, r),
                    (None, None) => Evidence::listed(ns, id, None),
                },
                content: citation
                    .map(|c| c.content.clone())
                    .or_else(|| result.map(|r| r.content.clone())),
            };
            if is_cited {
                cited.push(chunk);
            } else {
                uncited.push(chunk);
            }
        }
    }
    // Retrieved in this question's searches (read from its tool results) but not cited.
    for listed in &turn.retrieved {
        let id = &listed.chunk_id;
        let known = cited
            .iter()
            .chain(uncited.iter())
            .any(|c| &c.evidence.chunk_id == id);
        if known {
            continue;
        }
        let cap = &listed.capability;
        let citation = states.iter().find_map(|s| s.citation_index.get(id));
        let result = states.iter().find_map(|s| {
            s.searches
                .values()
                .flatten()
                .find(|r| r.chunk_id.as_deref() == Some(id.as_str()))
        });
        uncited.push(LedgerChunk {
            index: None,
            evidence: match (citation, result) {
                (Some(c), _) => Evidence::cited(cap, c),
                (None, Some(r)) => Evidence::found(cap, r),
                (None, None) => listed.clone(),
            },
            content: citation.map(|c| c.content.clone()),
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

    fn cite(args: &str, status: StepStatus) -> super::super::ToolStep {
        super::super::ToolStep {
            call_id: "call".into(),
            name: crate::capabilities::rag::CITE_TOOL.into(),
            summary: String::new(),
            status,
            args: args.into(),
        }
    }

    #[test]
    fn a_past_question_is_judged_by_its_citations_and_cite_calls() {
        let mut turn = Turn::new(0, "q".into());
        assert_eq!(past_status(&turn), CitationStatus::Missing);
        // A cite that failed declares nothing.
        turn.steps
            .push(cite(r#"{"chunk_ids": []}"#, StepStatus::Failed));
        assert_eq!(past_status(&turn), CitationStatus::Missing);
        turn.steps
            .push(cite(r#"{"chunk_ids": []}"#, StepStatus::Ok));
        assert_eq!(past_status(&turn), CitationStatus::Ungrounded);
        // A citation in the state grounds it, whatever empty cites came before.
        turn.citations.push(super::super::CitationView {
            number: 1,
            index: 1,
            evidence: Evidence::listed("rag", "c1", None),
            content: String::new(),
            passage: None,
        });
        assert_eq!(past_status(&turn), CitationStatus::Grounded);
    }

    #[test]
    fn a_declaration_is_read_from_the_cite_arguments() {
        assert!(cites_no_chunks(r#"{"chunk_ids": []}"#));
        assert!(cites_no_chunks(r#"{ "chunk_ids" : [ ] }"#));
        assert!(!cites_no_chunks(r#"{"chunk_ids": ["c1"]}"#));
        assert!(!cites_no_chunks("no chunks (ungrounded)"));
        assert!(!cites_no_chunks("{}"));
    }
}
