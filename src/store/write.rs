//! Writes: a document with its items and chunks (embedded on the way in), and
//! deleting one.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, FixedSizeListArray, Int64Array, LargeBinaryArray, RecordBatch, StringArray,
    types::Float32Type,
};
use serde_json::Value;

use super::arrow_util::sql_str;
use super::pages::encode_pages;
use super::{DocumentMeta, NewDocument, Result, Store, StoreError, schema};

/// A UUID v5 of `s` (stable ids: the demo corpus, replacements).
pub(super) fn stable_id(s: &str) -> String {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, s.as_bytes()).to_string()
}

/// A document's rows ready to write: the chunks embedded, their ids drawn, the blobs
/// encoded.
pub(super) struct Rows {
    pub(super) doc: NewDocument,
    pub(super) vectors: Vec<Vec<f32>>,
    pub(super) chunk_ids: Vec<String>,
    docling: Vec<u8>,
    pages: Option<Vec<u8>>,
}

impl Rows {
    /// The `document_meta` row of these rows under `id`.
    pub(super) fn meta(&self, id: &str, created_at: String, updated_at: String) -> DocumentMeta {
        DocumentMeta {
            id: id.to_string(),
            uri: self.doc.uri.clone(),
            title: self.doc.title.clone(),
            metadata: self.doc.metadata.clone(),
            created_at,
            updated_at,
        }
    }
}

/// Told how many chunks of a document are embedded so far, and of how many.
pub type Embedded<'a> = dyn Fn(usize, usize) + Send + Sync + 'a;

/// haiku.rag's timestamp form: Python `datetime.now().isoformat()`, naive local time.
pub(super) fn now_iso() -> String {
    chrono::Local::now()
        .naive_local()
        .format("%Y-%m-%dT%H:%M:%S%.6f")
        .to_string()
}

impl Store {
    /// Writes a document with its items and chunks (embedding the chunks) and returns its
    /// metadata. When `replaces` is given, the new version replaces that document and keeps
    /// its id and creation time ([`Store::replace_document`]): a failure or a kill at any
    /// point leaves a complete version (old or new) in place.
    pub async fn add_document(
        &self,
        doc: NewDocument,
        replaces: Option<&str>,
    ) -> Result<DocumentMeta> {
        self.add_document_seeded(doc, replaces, None).await
    }

    /// [`Store::add_document`] with ids derived from `seed` (UUID v5) instead of random
    /// ones, so the same document written anywhere gets the same document and chunk ids
    /// (the bundled demo corpus, whose recorded session cites its chunks). A replaced
    /// document keeps its id; its chunks take the seeded ones.
    pub async fn add_document_seeded(
        &self,
        doc: NewDocument,
        replaces: Option<&str>,
        seed: Option<&str>,
    ) -> Result<DocumentMeta> {
        self.add_document_reporting(doc, replaces, seed, &|_, _| {})
            .await
    }

    /// [`Store::add_document_seeded`], telling `embedded` how many of the chunks are
    /// embedded so far, of how many, as the embedding goes.
    pub async fn add_document_reporting(
        &self,
        doc: NewDocument,
        replaces: Option<&str>,
        seed: Option<&str>,
        embedded: &Embedded<'_>,
    ) -> Result<DocumentMeta> {
        self.writable()?;
        if let Some(old) = replaces {
            return self.replace_reporting(doc, old, seed, embedded).await;
        }
        let id = match seed {
            Some(s) => stable_id(s),
            None => uuid::Uuid::new_v4().to_string(),
        };
        let rows = self.prepare(doc, seed, embedded).await?;
        let now = now_iso();
        let meta = rows.meta(&id, now.clone(), now);
        if let Err(e) = self.write_rows(&id, &rows, &rows.chunk_ids, &meta).await {
            // Remove whatever part of the new document made it to disk.
            let _ = self.delete_document(&id).await;
            return Err(e);
        }
        Ok(meta)
    }

    /// Embeds the chunks, draws their ids and encodes the blobs: everything a write of
    /// `doc` needs, done once however many times the rows are written.
    pub(super) async fn prepare(
        &self,
        doc: NewDocument,
        seed: Option<&str>,
        embedded: &Embedded<'_>,
    ) -> Result<Rows> {
        let embedder = self.embedder()?.clone();
        let texts: Vec<String> = doc.chunks.iter().map(|c| c.content_fts.clone()).collect();
        // Whole (the local embedder sorts every text by length before it batches them),
        // its progress told at each of the embedder's batches.
        let total = texts.len();
        embedded(0, total);
        let vectors = if texts.is_empty() {
            Vec::new()
        } else {
            embedder
                .embed_reporting(&texts, &|n| embedded(n, total))
                .await?
        };
        let chunk_ids: Vec<String> = (0..doc.chunks.len())
            .map(|i| match seed {
                Some(s) => stable_id(&format!("{s}#chunk-{i}")),
                None => uuid::Uuid::new_v4().to_string(),
            })
            .collect();
        let docling = zstd::encode_all(doc.docling_document.to_string().as_bytes(), 3)
            .map_err(|e| StoreError::Other(format!("compressing docling_document: {e}")))?;
        let pages = if doc.pages.is_empty() {
            None
        } else {
            Some(encode_pages(&doc.pages)?)
        };
        Ok(Rows {
            doc,
            vectors,
            chunk_ids,
            docling,
            pages,
        })
    }

    /// Writes `rows` under `id` with the given chunk ids, `document_meta` last: a document
    /// becomes visible once everything else is written.
    pub(super) async fn write_rows(
        &self,
        id: &str,
        rows: &Rows,
        chunk_ids: &[String],
        meta: &DocumentMeta,
    ) -> Result<()> {
        let doc = &rows.doc;
        let vectors = &rows.vectors;
        // items
        if !doc.items.is_empty() {
            let n = doc.items.len();
            let batch = RecordBatch::try_new(
                schema::document_items_schema(),
                vec![
                    Arc::new(StringArray::from(vec![id; n])) as ArrayRef,
                    Arc::new(Int64Array::from_iter_values(0..n as i64)),
                    Arc::new(StringArray::from_iter_values(
                        doc.items.iter().map(|i| i.self_ref.as_str()),
                    )),
                    Arc::new(StringArray::from_iter_values(
                        doc.items.iter().map(|i| i.label.as_str()),
                    )),
                    Arc::new(StringArray::from_iter_values(
                        doc.items.iter().map(|i| i.text.as_str()),
                    )),
                    Arc::new(StringArray::from_iter_values(doc.items.iter().map(|i| {
                        serde_json::to_string(&i.page_numbers).unwrap_or_default()
                    }))),
                    Arc::new(LargeBinaryArray::from_iter(
                        doc.items.iter().map(|i| i.picture_data.as_deref()),
                    )),
                    Arc::new(Int64Array::from_iter_values(
                        doc.items.iter().map(|i| i.heading_level),
                    )),
                    Arc::new(Int64Array::from_iter_values(
                        doc.items.iter().map(|i| i.tree_depth),
                    )),
                ],
            )?;
            self.items.add(batch).execute().await?;
        }
        // chunks
        if !doc.chunks.is_empty() {
            let n = doc.chunks.len();
            let dim = self.dim() as i32;
            let vector = FixedSizeListArray::from_iter_primitive::<Float32Type, _, _>(
                vectors
                    .iter()
                    .map(|v| Some(v.iter().copied().map(Some).collect::<Vec<_>>())),
                dim,
            );
            let batch = RecordBatch::try_new(
                schema::chunks_schema(self.dim()),
                vec![
                    Arc::new(StringArray::from_iter_values(chunk_ids.iter().take(n))) as ArrayRef,
                    Arc::new(StringArray::from(vec![id; n])),
                    Arc::new(StringArray::from_iter_values(
                        doc.chunks.iter().map(|c| c.content.as_str()),
                    )),
                    Arc::new(StringArray::from_iter_values(
                        doc.chunks.iter().map(|c| c.content_fts.as_str()),
                    )),
                    Arc::new(StringArray::from_iter_values(
                        doc.chunks.iter().map(|c| c.metadata.to_string()),
                    )),
                    Arc::new(Int64Array::from_iter_values(
                        doc.chunks.iter().map(|c| c.order),
                    )),
                    Arc::new(vector),
                ],
            )?;
            self.chunks.add(batch).execute().await?;
        }
        // documents
        let batch = RecordBatch::try_new(
            schema::documents_schema(),
            vec![
                Arc::new(StringArray::from(vec![id])) as ArrayRef,
                Arc::new(StringArray::from(vec![doc.content.as_str()])),
                Arc::new(LargeBinaryArray::from_iter(vec![Some(
                    rows.docling.as_slice(),
                )])),
                Arc::new(LargeBinaryArray::from_iter(vec![rows.pages.as_deref()])),
                Arc::new(StringArray::from(vec![
                    crate::store::docling::DOCLING_SCHEMA_VERSION,
                ])),
            ],
        )?;
        self.documents.add(batch).execute().await?;
        // document_meta last: a document becomes visible once everything else is written.
        let batch = RecordBatch::try_new(
            schema::document_meta_schema(),
            vec![
                Arc::new(StringArray::from(vec![id])) as ArrayRef,
                Arc::new(StringArray::from(vec![meta.uri.as_deref()])),
                Arc::new(StringArray::from(vec![meta.title.as_deref()])),
                Arc::new(StringArray::from(vec![
                    Value::Object(meta.metadata.clone()).to_string(),
                ])),
                Arc::new(StringArray::from(vec![meta.created_at.as_str()])),
                Arc::new(StringArray::from(vec![meta.updated_at.as_str()])),
            ],
        )?;
        self.meta.add(batch).execute().await?;
        Ok(())
    }

    /// Deletes a document and everything that belongs to it. Deleting an unknown id is a
    /// no-op. The `document_meta` row goes first so the document disappears from listings
    /// before its parts do; `document_items` goes last (it is written first), so any rows
    /// an interrupted write or delete left under an id include items.
    pub async fn delete_document(&self, id: &str) -> Result<()> {
        self.writable()?;
        let by_id = format!("id = {}", sql_str(id));
        let by_doc = format!("document_id = {}", sql_str(id));
        self.meta.delete(by_id.as_str()).await?;
        self.chunks.delete(by_doc.as_str()).await?;
        self.documents.delete(by_id.as_str()).await?;
        self.items.delete(by_doc.as_str()).await?;
        Ok(())
    }
}
