//! Reranking after fused search (SPEC §5.2): with a reranker configured, search fetches
//! `limit * 10` candidates, the reranker scores their contents against the query, and
//! the best `limit` are kept, carrying the reranker's score (as haiku.rag's results do).
//!
//! A reranker that is down, answers an error or something that is not a rerank result,
//! or takes longer than its timeout never fails the search: the fused order is kept
//! (cut to `limit`), the failure is logged, and the [`RerankReport`] carries the warning
//! for `groundwork search`, the search tools and the inspector. The report also keeps
//! each result's fused rank and score, so what the reranker moved can be shown.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::config::RerankerConfig;
use crate::embed::rerank::{RerankError, Reranker};

use super::{Chunk, Store};

/// How many candidates a reranked search fetches per wanted result (haiku.rag: 10).
pub const CANDIDATES_PER_RESULT: usize = 10;

/// Ends every warning: what the user gets instead of the reranked order.
pub const FUSED_ORDER_NOTE: &str = "the results keep the fused order";

/// The key of a search tool return's metadata that holds the report.
pub const METADATA_KEY: &str = "rerank";

/// The reranker a store was given: the client, or why it could not be built.
#[derive(Debug)]
pub struct Attached(Result<Arc<Reranker>, RerankError>);

impl Attached {
    pub(super) fn build(config: &RerankerConfig) -> Self {
        Attached(Reranker::new(config).map(Arc::new))
    }
}

/// One kept result as fusion had it and as the reranker scored it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerankedHit {
    pub chunk_id: String,
    /// 1-based rank among the fused candidates.
    pub fused_rank: usize,
    /// The fused (RRF) score.
    pub fused_score: f64,
    /// The reranker's score; `None` when reranking failed.
    pub rerank_score: Option<f64>,
}

/// What reranking did to one search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerankReport {
    /// The model named in the request.
    pub model: String,
    /// `{url}/rerank`.
    pub endpoint: String,
    /// How many fused candidates were sent.
    pub candidates: usize,
    /// The kept results, in final order.
    pub results: Vec<RerankedHit>,
    /// Why the fused order was kept, when reranking failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl RerankReport {
    /// The entry for `chunk_id`.
    pub fn hit(&self, chunk_id: &str) -> Option<&RerankedHit> {
        self.results.iter().find(|h| h.chunk_id == chunk_id)
    }

    /// `(final rank, fused rank)`, both 1-based, of every result the reranker moved.
    pub fn moved(&self) -> Vec<(usize, usize)> {
        self.results
            .iter()
            .enumerate()
            .filter(|(i, h)| h.fused_rank != i + 1)
            .map(|(i, h)| (i + 1, h.fused_rank))
            .collect()
    }

    /// One line for people: the warning, or what moved.
    pub fn note(&self) -> String {
        if let Some(w) = &self.warning {
            return format!("warning: {w}");
        }
        let moved = self.moved();
        let head = format!(
            "reranked {} candidates with {}",
            self.candidates, self.model
        );
        if moved.is_empty() {
            return format!("{head}: fused order kept");
        }
        let list: Vec<String> = moved
            .iter()
            .map(|(now, was)| format!("#{now} was fused #{was}"))
            .collect();
        format!(
            "{head}: {} of {} results reordered ({})",
            moved.len(),
            self.results.len(),
            list.join(", ")
        )
    }

    /// The report as tool return metadata (`{"rerank": …}`; never sent to the model).
    pub fn to_metadata(&self) -> Value {
        json!({ METADATA_KEY: self })
    }

    /// The report in tool return metadata, if there is one.
    pub fn from_metadata(metadata: &Value) -> Option<Self> {
        serde_json::from_value(metadata.get(METADATA_KEY)?.clone()).ok()
    }
}

impl Store {
    /// The reranker in use (`None`: none configured, or it could not be built).
    pub fn reranker(&self) -> Option<&Reranker> {
        self.reranker.as_ref()?.0.as_deref().ok()
    }

    /// How many fused candidates a search for `limit` results fetches.
    pub(super) fn candidate_count(&self, limit: usize) -> usize {
        if self.reranker.is_some() {
            limit.saturating_mul(CANDIDATES_PER_RESULT)
        } else {
            limit
        }
    }

    /// Reranks the fused `hits` (best first) and keeps `limit`; without a reranker, or
    /// when it fails, the fused order is cut to `limit`.
    pub(super) async fn rerank_hits(
        &self,
        query: &str,
        mut hits: Vec<(Chunk, f64)>,
        limit: usize,
    ) -> (Vec<(Chunk, f64)>, Option<RerankReport>) {
        let Some(Attached(attached)) = &self.reranker else {
            hits.truncate(limit);
            return (hits, None);
        };
        let candidates = hits.len();
        let fused = |i: usize, h: &(Chunk, f64), rerank_score| RerankedHit {
            chunk_id: h.0.id.clone(),
            fused_rank: i + 1,
            fused_score: h.1,
            rerank_score,
        };
        let (model, endpoint, answer) = match attached {
            Ok(r) => {
                let documents: Vec<String> = hits.iter().map(|(c, _)| c.content.clone()).collect();
                let answer = if documents.is_empty() {
                    Ok(Vec::new())
                } else {
                    r.rerank(query, &documents, limit).await
                };
                (r.model().to_string(), r.endpoint().to_string(), answer)
            }
            Err(e) => (String::new(), e.endpoint.clone(), Err(e.clone())),
        };
        match answer {
            Ok(ranked) => {
                let results = ranked
                    .iter()
                    .map(|r| fused(r.index, &hits[r.index], Some(r.score)))
                    .collect();
                let mut slots: Vec<Option<(Chunk, f64)>> = hits.into_iter().map(Some).collect();
                let kept = ranked
                    .iter()
                    .filter_map(|r| slots[r.index].take().map(|(c, _)| (c, r.score)))
                    .collect();
                let report = RerankReport {
                    model,
                    endpoint,
                    candidates,
                    results,
                    warning: None,
                };
                (kept, Some(report))
            }
            Err(e) => {
                let warning = format!("{e}; {FUSED_ORDER_NOTE}");
                tracing::warn!("search for {query:?}: {warning}");
                hits.truncate(limit);
                let results = hits
                    .iter()
                    .enumerate()
                    .map(|(i, h)| fused(i, h, None))
                    .collect();
                let report = RerankReport {
                    model,
                    endpoint,
                    candidates,
                    results,
                    warning: Some(warning),
                };
                (hits, Some(report))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: &str, fused_rank: usize) -> RerankedHit {
        RerankedHit {
            chunk_id: id.into(),
            fused_rank,
            fused_score: 0.01,
            rerank_score: Some(0.5),
        }
    }

    #[test]
    fn the_note_names_what_moved_and_the_metadata_round_trips() {
        let report = RerankReport {
            model: "bge".into(),
            endpoint: "http://x/v1/rerank".into(),
            candidates: 30,
            results: vec![hit("a", 7), hit("b", 2), hit("c", 1)],
            warning: None,
        };
        assert_eq!(report.moved(), vec![(1, 7), (3, 1)]);
        assert_eq!(
            report.note(),
            "reranked 30 candidates with bge: 2 of 3 results reordered (#1 was fused #7, #3 was fused #1)"
        );
        assert_eq!(
            RerankReport::from_metadata(&report.to_metadata()),
            Some(report.clone())
        );
        assert_eq!(RerankReport::from_metadata(&json!({"other": 1})), None);
        let failed = RerankReport {
            warning: Some(format!(
                "reranker http://x/v1/rerank: HTTP 500: boom; {FUSED_ORDER_NOTE}"
            )),
            ..report
        };
        assert!(
            failed
                .note()
                .starts_with("warning: reranker http://x/v1/rerank: HTTP 500")
        );
    }
}
