//! Embedders: turn texts into vectors for the `chunks.vector` column and for queries.
//!
//! Two implementations: [`openai::OpenAiEmbedder`] (any OpenAI-compatible `/v1/embeddings`
//! endpoint) and the local default `local::LocalEmbedder` (all-MiniLM-L6-v2 run in-process).
//! The embedder a database was built with is recorded in its `settings` row as an
//! [`EmbedderSpec`]; by default queries use that same embedder.

use futures::future::BoxFuture;

pub mod local;
pub mod openai;
pub mod rerank;

/// How haiku.rag records an embedding model (plain data, defined with the config's
/// `[embeddings.model]`).
pub use crate::config::EmbedderSpec;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("embedding endpoint {url} failed: {message}")]
    Endpoint { url: String, message: String },
    #[error("embedder returned {got} vectors for {want} texts")]
    Count { got: usize, want: usize },
    #[error(
        "embedder {name} returned vectors of dimension {got}, but {want} was expected; \
         check the embedding model and its vector_dim"
    )]
    Dimension {
        name: String,
        got: usize,
        want: usize,
    },
    #[error("local embedder: {0}")]
    Local(String),
    #[error("unknown embedding provider '{0}' (known: openai, local)")]
    UnknownProvider(String),
}

/// Something that embeds batches of texts. Implementations must return exactly one vector
/// of [`Embedder::dim`] floats per input text, in input order.
pub trait Embedder: Send + Sync {
    fn spec(&self) -> &EmbedderSpec;
    fn dim(&self) -> usize {
        self.spec().vector_dim
    }
    fn embed<'a>(&'a self, texts: &'a [String])
    -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>>;

    /// [`Embedder::embed`], telling `done` how many of `texts` are embedded so far as the
    /// embedding goes (at each of the embedder's own batches; at least once, at the end).
    fn embed_reporting<'a>(
        &'a self,
        texts: &'a [String],
        done: &'a Done<'a>,
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            let vectors = self.embed(texts).await?;
            done(vectors.len());
            Ok(vectors)
        })
    }
}

/// Told how many texts are embedded so far.
pub type Done<'a> = dyn Fn(usize) + Send + Sync + 'a;

/// Checks count and dimension of an embedder's output.
pub fn check_vectors(
    spec: &EmbedderSpec,
    want: usize,
    vectors: &[Vec<f32>],
) -> Result<(), EmbedError> {
    if vectors.len() != want {
        return Err(EmbedError::Count {
            got: vectors.len(),
            want,
        });
    }
    if let Some(v) = vectors.iter().find(|v| v.len() != spec.vector_dim) {
        return Err(EmbedError::Dimension {
            name: spec.name.clone(),
            got: v.len(),
            want: spec.vector_dim,
        });
    }
    Ok(())
}

/// Embedder settings given on the command line or in the environment
/// (`--embed-url`/`GROUNDWORK_EMBED_URL`, `--embed-model`/`GROUNDWORK_EMBED_MODEL`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EmbedOverrides {
    pub url: Option<String>,
    pub model: Option<String>,
    pub dim: Option<usize>,
}

impl EmbedOverrides {
    /// Flags win over the environment.
    pub fn resolve(
        url: Option<String>,
        model: Option<String>,
        dim: Option<usize>,
        env: &crate::paths::Env,
    ) -> Self {
        let get = |k: &str| env.get(k).filter(|v| !v.is_empty()).cloned();
        Self {
            url: url.or_else(|| get("GROUNDWORK_EMBED_URL")),
            model: model.or_else(|| get("GROUNDWORK_EMBED_MODEL")),
            dim: dim.or_else(|| get("GROUNDWORK_EMBED_DIM").and_then(|d| d.parse().ok())),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.url.is_none() && self.model.is_none()
    }

    /// Applies the overrides to the spec a database records. An override makes the embedder
    /// an OpenAI-compatible one.
    pub fn apply(&self, spec: &EmbedderSpec) -> EmbedderSpec {
        if self.is_empty() {
            return spec.clone();
        }
        EmbedderSpec {
            provider: "openai".into(),
            name: self.model.clone().unwrap_or_else(|| spec.name.clone()),
            vector_dim: self.dim.unwrap_or(spec.vector_dim),
            base_url: self.url.clone().or_else(|| spec.base_url.clone()),
        }
    }
}

/// The API key for embedding endpoints: `GROUNDWORK_EMBED_API_KEY`, else `OPENAI_API_KEY`.
pub fn api_key(env: &crate::paths::Env) -> Option<String> {
    env.get("GROUNDWORK_EMBED_API_KEY")
        .or_else(|| env.get("OPENAI_API_KEY"))
        .filter(|v| !v.is_empty())
        .cloned()
}

/// Normalises provider-specific conventions to an OpenAI-compatible base URL: haiku.rag
/// records Ollama's root URL (`http://localhost:11434`), whose OpenAI API is under `/v1`.
pub fn openai_base_url(spec: &EmbedderSpec) -> Option<String> {
    let url = match (spec.provider.as_str(), spec.base_url.as_deref()) {
        ("ollama", None) => "http://127.0.0.1:11434".to_string(),
        ("vllm", None) => "http://127.0.0.1:8000".to_string(),
        (_, Some(u)) => u.to_string(),
        (_, None) => return None,
    };
    let url = url.trim_end_matches('/').to_string();
    if matches!(spec.provider.as_str(), "ollama" | "vllm") && !url.ends_with("/v1") {
        Some(format!("{url}/v1"))
    } else {
        Some(url)
    }
}

/// Builds the embedder a spec describes.
pub fn build(
    spec: &EmbedderSpec,
    env: &crate::paths::Env,
) -> Result<std::sync::Arc<dyn Embedder>, EmbedError> {
    match spec.provider.as_str() {
        "openai" | "ollama" | "vllm" | "lm_studio" => {
            let mut spec = spec.clone();
            spec.base_url = openai_base_url(&spec);
            Ok(std::sync::Arc::new(openai::OpenAiEmbedder::new(
                spec,
                api_key(env),
            )?))
        }
        local::PROVIDER => {
            // The files must be in place already: callers run `local::ensure_model` (which
            // may download, with progress) before building.
            let source = local::ModelSource::from_vars(
                |k| env.get(k).cloned(),
                Some(crate::paths::data_dir(env)),
            );
            match local::locate_model(&source)? {
                Some(dir) => Ok(std::sync::Arc::new(local::LocalEmbedder::load(&dir)?)),
                None => Err(EmbedError::Local(format!(
                    "the model files are not installed yet. {}",
                    local::offline_instructions()
                ))),
            }
        }
        other => Err(EmbedError::UnknownProvider(other.to_string())),
    }
}

/// Asks an OpenAI-compatible endpoint for one vector to learn the model's dimension.
pub async fn probe_dimension(
    url: &str,
    model: &str,
    env: &crate::paths::Env,
) -> Result<usize, EmbedError> {
    let spec = EmbedderSpec {
        provider: "openai".into(),
        name: model.into(),
        vector_dim: 0,
        base_url: Some(url.into()),
    };
    let e = openai::OpenAiEmbedder::new(spec, api_key(env))?;
    e.probe().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> EmbedderSpec {
        EmbedderSpec {
            provider: "ollama".into(),
            name: "nomic".into(),
            vector_dim: 768,
            base_url: None,
        }
    }

    #[test]
    fn overrides_flags_beat_env() {
        let env: crate::paths::Env = [
            (
                "GROUNDWORK_EMBED_URL".to_string(),
                "http://env/v1".to_string(),
            ),
            (
                "GROUNDWORK_EMBED_MODEL".to_string(),
                "env-model".to_string(),
            ),
        ]
        .into();
        let o = EmbedOverrides::resolve(Some("http://flag/v1".into()), None, None, &env);
        assert_eq!(o.url.as_deref(), Some("http://flag/v1"));
        assert_eq!(o.model.as_deref(), Some("env-model"));
        let s = o.apply(&spec());
        assert_eq!(s.provider, "openai");
        assert_eq!(s.vector_dim, 768);
        assert_eq!(s.base_url.as_deref(), Some("http://flag/v1"));
    }

    #[test]
    fn ollama_urls_get_v1() {
        assert_eq!(
            openai_base_url(&spec()).as_deref(),
            Some("http://127.0.0.1:11434/v1")
        );
        let mut s = spec();
        s.base_url = Some("http://gpu:11434/".into());
        assert_eq!(openai_base_url(&s).as_deref(), Some("http://gpu:11434/v1"));
        s.provider = "openai".into();
        s.base_url = Some("http://x/api".into());
        assert_eq!(openai_base_url(&s).as_deref(), Some("http://x/api"));
    }

    #[test]
    fn unknown_provider_is_refused() {
        let mut s = spec();
        s.provider = "voyageai".into();
        let err = build(&s, &Default::default()).err().unwrap();
        assert!(err.to_string().contains("voyageai"));
    }
}
