//! A reranker client for the common rerank HTTP API that vLLM, llama.cpp's server
//! (`--reranking`), Cohere, Jina and Voyage speak: `POST {url}/rerank` with
//! `{"model", "query", "documents": [...], "top_n"}`, answered by
//! `{"results": [{"index", "relevance_score"}, ...]}`.
//!
//! One request per search, limited as a whole by `timeout_secs`. Every failure is one
//! line naming the endpoint and what went wrong (unreachable, no answer in time, an
//! error status with the server's own message, an answer that is not a rerank result);
//! the API key is sent as a bearer token and appears nowhere else.

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use crate::config::{ApiKey, RerankerConfig};

/// Why a rerank request gave no order (one line, shown as it is).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("reranker {endpoint}: {message}")]
pub struct RerankError {
    /// `{url}/rerank`.
    pub endpoint: String,
    /// What went wrong.
    pub message: String,
}

/// One scored document: its index in the request and the reranker's score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ranked {
    pub index: usize,
    pub score: f64,
}

#[derive(Deserialize)]
struct Answer {
    results: Vec<AnswerItem>,
}

#[derive(Deserialize)]
struct AnswerItem {
    index: usize,
    relevance_score: f64,
}

/// A configured reranker endpoint.
pub struct Reranker {
    endpoint: String,
    model: String,
    timeout: Duration,
    api_key: Option<ApiKey>,
    client: reqwest::Client,
}

impl std::fmt::Debug for Reranker {
    // The key stays out of every printout.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reranker")
            .field("endpoint", &self.endpoint)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl Reranker {
    /// The client for `config` (the HTTP client is built once and kept).
    pub fn new(config: &RerankerConfig) -> Result<Self, RerankError> {
        let endpoint = format!("{}/rerank", config.url.trim_end_matches('/'));
        let timeout = Duration::from_secs(config.timeout_secs.max(1));
        let client = crate::http::builder_for([endpoint.as_str()])
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| RerankError {
                endpoint: endpoint.clone(),
                message: format!("cannot build an HTTP client: {}", crate::errors::chain(&e)),
            })?;
        Ok(Reranker {
            endpoint,
            model: config.model.clone(),
            timeout,
            api_key: config.api_key.clone(),
            client,
        })
    }

    /// `{url}/rerank`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The model name sent.
    pub fn model(&self) -> &str {
        &self.model
    }

    fn error(&self, message: impl Into<String>) -> RerankError {
        RerankError {
            endpoint: self.endpoint.clone(),
            message: message.into(),
        }
    }

    /// Scores `documents` against `query` and returns the best `top_n`, best first
    /// (ties keep the request order). An index the request did not have is an error.
    pub async fn rerank(
        &self,
        query: &str,
        documents: &[String],
        top_n: usize,
    ) -> Result<Vec<Ranked>, RerankError> {
        if documents.is_empty() {
            return Ok(Vec::new());
        }
        let body = json!({
            "model": self.model,
            "query": query,
            "documents": documents,
            "top_n": top_n,
        });
        let mut request = self
            .client
            .post(&self.endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body.to_string());
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key.expose());
        }
        let response = request.send().await.map_err(|e| self.transport(&e))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| self.transport(&e))?;
        if !status.is_success() {
            let message = crate::model::error_body_message(&bytes, status.as_u16());
            return Err(self.error(format!("HTTP {}: {message}", status.as_u16())));
        }
        let answer: Answer = serde_json::from_slice(&bytes).map_err(|e| {
            self.error(format!(
                "the answer is not a rerank result ({e}); expected \
                 {{\"results\": [{{\"index\", \"relevance_score\"}}]}}"
            ))
        })?;
        let mut ranked = Vec::with_capacity(answer.results.len());
        let mut seen = vec![false; documents.len()];
        for item in answer.results {
            if item.index >= documents.len() {
                return Err(self.error(format!(
                    "the answer names document {} of {}",
                    item.index,
                    documents.len()
                )));
            }
            if !item.relevance_score.is_finite() {
                return Err(self.error(format!(
                    "the answer scores document {} with a non-finite number",
                    item.index
                )));
            }
            if std::mem::replace(&mut seen[item.index], true) {
                continue;
            }
            ranked.push(Ranked {
                index: item.index,
                score: item.relevance_score,
            });
        }
        ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
        ranked.truncate(top_n);
        Ok(ranked)
    }

    /// A failure below HTTP, in one line.
    fn transport(&self, e: &reqwest::Error) -> RerankError {
        if e.is_timeout() {
            return self.error(format!(
                "no answer within {} s (search.reranker.timeout_secs)",
                self.timeout.as_secs()
            ));
        }
        let mut cause: &dyn std::error::Error = e;
        while let Some(next) = cause.source() {
            cause = next;
        }
        if e.is_connect() {
            return self.error(format!("cannot connect ({cause})"));
        }
        self.error(format!("the request failed ({cause})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_the_url_plus_rerank_and_the_key_is_not_printed() {
        let mut c = RerankerConfig::new("http://127.0.0.1:8000/v1/");
        c.api_key = Some(ApiKey::new("rk-secret-4242"));
        let r = Reranker::new(&c).unwrap();
        assert_eq!(r.endpoint(), "http://127.0.0.1:8000/v1/rerank");
        assert_eq!(r.model(), "default");
        assert!(!format!("{r:?}").contains("4242"));
    }
}
