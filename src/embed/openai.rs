//! Embeddings from any OpenAI-compatible `/v1/embeddings` endpoint, through async-openai.

use async_openai::{
    Client,
    config::OpenAIConfig,
    types::embeddings::{CreateEmbeddingRequest, EmbeddingInput},
};
use futures::future::BoxFuture;

use super::{EmbedError, Embedder, EmbedderSpec, check_vectors};

/// Texts per HTTP request; large ingests are split into batches of this size.
const BATCH: usize = 128;

pub struct OpenAiEmbedder {
    spec: EmbedderSpec,
    client: Client<OpenAIConfig>,
    base_url: String,
}

impl std::fmt::Debug for OpenAiEmbedder {
    // The client holds the API key: never print it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl OpenAiEmbedder {
    /// `spec.base_url` must be set (e.g. `http://127.0.0.1:11434/v1`). `api_key` may be empty
    /// for local servers.
    pub fn new(spec: EmbedderSpec, api_key: Option<String>) -> Result<Self, EmbedError> {
        let base_url = spec.base_url.clone().ok_or_else(|| EmbedError::Endpoint {
            url: "(none)".into(),
            message: format!(
                "embedder '{}' has no base URL; set --embed-url or GROUNDWORK_EMBED_URL, or its base_url in haiku.rag's configuration (haiku.rag.yaml)",
                spec.name
            ),
        })?;
        let base_url = base_url.trim_end_matches('/').to_string();
        let config = OpenAIConfig::new()
            .with_api_base(base_url.clone())
            .with_api_key(api_key.unwrap_or_default());
        let http = crate::http::builder_for([base_url.as_str()])
            .build()
            .map_err(|e| EmbedError::Endpoint {
                url: base_url.clone(),
                message: format!(
                    "cannot set up the HTTP client: {}",
                    crate::errors::chain(&e)
                ),
            })?;
        Ok(Self {
            spec,
            client: Client::build(http, config),
            base_url,
        })
    }

    /// One `/v1/embeddings` call; vectors in input order, unchecked.
    async fn request(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let request = CreateEmbeddingRequest {
            model: self.spec.name.clone(),
            input: EmbeddingInput::StringArray(texts),
            encoding_format: None,
            user: None,
            dimensions: None,
        };
        let response = self
            .client
            .embeddings()
            .create(request)
            .await
            .map_err(|e| EmbedError::Endpoint {
                url: self.base_url.clone(),
                message: e.to_string(),
            })?;
        let mut data = response.data;
        data.sort_by_key(|e| e.index);
        Ok(data.into_iter().map(|e| e.embedding).collect())
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let vectors = self.request(texts.to_vec()).await?;
        check_vectors(&self.spec, texts.len(), &vectors)?;
        Ok(vectors)
    }

    /// Embeds one string and returns the vector length (used to learn a model's dimension).
    pub async fn probe(&self) -> Result<usize, EmbedError> {
        self.request(vec!["dimension probe".into()])
            .await?
            .first()
            .map(Vec::len)
            .ok_or_else(|| EmbedError::Endpoint {
                url: self.base_url.clone(),
                message: "the endpoint returned no embedding".into(),
            })
    }
}

impl Embedder for OpenAiEmbedder {
    fn spec(&self) -> &EmbedderSpec {
        &self.spec
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        self.embed_reporting(texts, &|_| {})
    }

    fn embed_reporting<'a>(
        &'a self,
        texts: &'a [String],
        done: &'a super::Done<'a>,
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(texts.len());
            for batch in texts.chunks(BATCH) {
                // Empty strings are rejected by some servers; embed a single space instead.
                let batch: Vec<String> = batch
                    .iter()
                    .map(|t| {
                        if t.trim().is_empty() {
                            " ".to_string()
                        } else {
                            t.clone()
                        }
                    })
                    .collect();
                out.extend(self.embed_batch(&batch).await?);
                done(out.len());
            }
            Ok(out)
        })
    }
}
