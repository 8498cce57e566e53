//! Inference: the BERT model loaded with candle, tokenised in batches, mean-pooled over
//! the attention mask and L2-normalised, like sentence-transformers.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use futures::future::BoxFuture;
use tokenizers::utils::padding::{PaddingDirection, PaddingParams, PaddingStrategy, pad_encodings};
use tokenizers::utils::truncation::{TruncationDirection, TruncationParams, TruncationStrategy};
use tokenizers::{Encoding, Tokenizer};

use crate::embed::{EmbedError, Embedder, EmbedderSpec, check_vectors};

use super::provision::check_model_dir;
use super::*;

fn candle_err(context: &str) -> impl FnOnce(candle_core::Error) -> EmbedError + '_ {
    move |e| local_err(format!("{context}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// The embedder
// ---------------------------------------------------------------------------------------------

/// all-MiniLM-L6-v2 on the CPU. Cheap to clone (the model is shared behind an `Arc`).
#[derive(Clone)]
pub struct LocalEmbedder {
    inner: Arc<Inner>,
    batch_size: usize,
}

struct Inner {
    spec: EmbedderSpec,
    model: BertModel,
    tokenizer: Tokenizer,
    pad_id: u32,
    pad_token: String,
    device: Device,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("spec", &self.inner.spec)
            .field("batch_size", &self.batch_size)
            .finish_non_exhaustive()
    }
}

impl LocalEmbedder {
    /// Loads the model from a directory holding `config.json`, `tokenizer.json` and
    /// `model.safetensors` (memory-mapped). Does not check hashes: see [`ensure_model`].
    pub fn load(model_dir: &Path) -> Result<Self, EmbedError> {
        check_model_dir(model_dir, "the model directory")?;

        let config_path = model_dir.join("config.json");
        let config_text = fs::read_to_string(&config_path)
            .map_err(|e| local_err(format!("cannot read {}: {e}", config_path.display())))?;
        let config: BertConfig = serde_json::from_str(&config_text)
            .map_err(|e| local_err(format!("invalid {}: {e}", config_path.display())))?;
        if config.hidden_size != VECTOR_DIM {
            return Err(local_err(format!(
                "{} describes a model with hidden size {}, but {MODEL_NAME} has {VECTOR_DIM}; \
                 is this the right model directory?",
                config_path.display(),
                config.hidden_size
            )));
        }

        let tokenizer_path = model_dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| local_err(format!("cannot load {}: {e}", tokenizer_path.display())))?;
        // tokenizer.json ships with fixed padding/truncation at 128; sentence-transformers uses
        // max_seq_length 256 and pads each batch to its longest member. We truncate here and pad
        // per (length-sorted) batch in `embed_batch`.
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| local_err(format!("cannot configure truncation: {e}")))?;
        tokenizer.with_padding(None);
        let pad_token = "[PAD]".to_string();
        let pad_id = tokenizer.token_to_id(&pad_token).ok_or_else(|| {
            local_err(format!(
                "{} has no [PAD] token; is this a BERT tokenizer?",
                tokenizer_path.display()
            ))
        })?;

        let device = Device::Cpu;
        let weights = model_dir.join("model.safetensors");
        // SAFETY: the file is memory-mapped read-only. Like every mmap, this is only sound if
        // nobody truncates or rewrites the file while it is mapped; the model directory is
        // written once (atomically, by `ensure_model`) and never modified afterwards.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &device) }
            .map_err(candle_err("cannot map model.safetensors"))?;
        let model = BertModel::load(vb, &config).map_err(|e| {
            local_err(format!(
                "cannot load BERT weights from {}: {e}",
                weights.display()
            ))
        })?;

        Ok(Self {
            inner: Arc::new(Inner {
                spec: local_spec(),
                model,
                tokenizer,
                pad_id,
                pad_token,
                device,
            }),
            batch_size: DEFAULT_BATCH_SIZE,
        })
    }

    /// Same embedder with another internal batch size (texts per forward pass, at least 1).
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Number of tokens (with `[CLS]`/`[SEP]`, after truncation) the model sees for `text`.
    pub fn token_count(&self, text: &str) -> Result<usize, EmbedError> {
        let enc = self
            .inner
            .tokenizer
            .encode(text, true)
            .map_err(|e| local_err(format!("tokenization failed: {e}")))?;
        Ok(enc.len())
    }

    /// Embeds synchronously on the calling thread (CPU-bound; from async code use
    /// [`Embedder::embed`], which runs this on the blocking pool). Returns one L2-normalised
    /// 384-d vector per text, in input order.
    pub fn embed_blocking<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_blocking_reporting(texts, &|_| {})
    }

    /// [`LocalEmbedder::embed_blocking`], telling `done` how many texts are embedded after
    /// each batch.
    pub fn embed_blocking_reporting<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
        done: &dyn Fn(usize),
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let inputs: Vec<&str> = texts.iter().map(|t| t.as_ref()).collect();
        let encodings = self
            .inner
            .tokenizer
            .encode_batch(inputs, true)
            .map_err(|e| local_err(format!("tokenization failed: {e}")))?;

        // Sort by token count so each batch pads as little as possible.
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(encodings[i].len()));

        let mut out: Vec<Option<Vec<f32>>> = vec![None; encodings.len()];
        let mut embedded = 0;
        for chunk in order.chunks(self.batch_size) {
            let mut batch: Vec<Encoding> = chunk.iter().map(|&i| encodings[i].clone()).collect();
            let vectors = self.embed_batch(&mut batch)?;
            for (&i, v) in chunk.iter().zip(vectors) {
                out[i] = Some(v);
            }
            embedded += chunk.len();
            done(embedded);
        }
        let vectors: Vec<Vec<f32>> = out.into_iter().map(|v| v.unwrap_or_default()).collect();
        check_vectors(&self.inner.spec, texts.len(), &vectors)?;
        Ok(vectors)
    }

    fn embed_batch(&self, batch: &mut [Encoding]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let inner = &*self.inner;
        pad_encodings(
            batch,
            &PaddingParams {
                strategy: PaddingStrategy::BatchLongest,
                direction: PaddingDirection::Right,
                pad_to_multiple_of: None,
                pad_id: inner.pad_id,
                pad_type_id: 0,
                pad_token: inner.pad_token.clone(),
            },
        )
        .map_err(|e| local_err(format!("padding failed: {e}")))?;
        let rows = batch.len();
        let len = batch.first().map(|e| e.len()).unwrap_or(0);
        let mut ids = Vec::with_capacity(rows * len);
        let mut mask = Vec::with_capacity(rows * len);
        for enc in batch.iter() {
            ids.extend_from_slice(enc.get_ids());
            mask.extend_from_slice(enc.get_attention_mask());
        }
        let dev = &inner.device;
        let err = candle_err("forward pass failed");
        let ids = Tensor::from_vec(ids, (rows, len), dev).map_err(candle_err("input ids"))?;
        let mask = Tensor::from_vec(mask, (rows, len), dev).map_err(candle_err("mask"))?;
        let type_ids = ids.zeros_like().map_err(candle_err("type ids"))?;

        let pooled = (|| -> candle_core::Result<Tensor> {
            let hidden = inner.model.forward(&ids, &type_ids, Some(&mask))?; // (b, L, 384)
            // Mean over real tokens: sum(hidden * mask) / max(sum(mask), 1e-9).
            let mask_f = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (b, L, 1)
            let summed = hidden.broadcast_mul(&mask_f)?.sum(1)?; // (b, 384)
            let counts = mask_f.sum(1)?.clamp(1e-9f32, f32::MAX)?; // (b, 1)
            let mean = summed.broadcast_div(&counts)?;
            // L2 normalise like torch.nn.functional.normalize (eps 1e-12).
            let norms = mean
                .sqr()?
                .sum_keepdim(1)?
                .sqrt()?
                .clamp(1e-12f32, f32::MAX)?;
            mean.broadcast_div(&norms)
        })()
        .map_err(err)?;
        pooled
            .to_vec2::<f32>()
            .map_err(candle_err("reading vectors"))
    }
}

impl Embedder for LocalEmbedder {
    fn spec(&self) -> &EmbedderSpec {
        &self.inner.spec
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
        done: &'a crate::embed::Done<'a>,
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            if texts.is_empty() {
                done(0);
                return Ok(Vec::new());
            }
            let this = self.clone();
            let owned = texts.to_vec();
            // Each batch's count comes back from the blocking pool as it is embedded.
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let task = tokio::task::spawn_blocking(move || {
                this.embed_blocking_reporting(&owned, &|n| {
                    let _ = tx.send(n);
                })
            });
            while let Some(n) = rx.recv().await {
                done(n);
            }
            let vectors = task
                .await
                .map_err(|e| local_err(format!("embedding task failed: {e}")))??;
            check_vectors(&self.inner.spec, texts.len(), &vectors)?;
            Ok(vectors)
        })
    }
}
