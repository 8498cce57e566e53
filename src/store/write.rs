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

/// haiku.rag's timestamp form: Python `datetime.now().isoformat()`, naive local time.
pub(super) fn now_iso() -> String {
    chrono::Local::now()
        .naive_local()
        .format("%Y-%m-%dT%H:%M:%S%.6f")
        .to_string()
}

impl Store {
    /// Writes a document with its items and chunks (embedding the chunks) and returns its
    /// metadata. When `replaces` is given, that document is deleted only after the new one is
    /// completely written, so a failure leaves the old version in place.
    pub async fn add_document(
        &self,
        doc: NewDocument,
        replaces: Option<&str>,
    ) -> Result<DocumentMeta> {
        self.add_document_seeded(doc, replaces, None).await
    }

    /// [`Store::add_document`] with ids derived from `seed` (UUID v5) instead of random
    /// ones, so the same document written anywhere gets the same document and chunk ids
    /// (the bundled demo corpus, whose recorded session cites its chunks).
    pub async fn add_document_seeded(
        &self,
        doc: NewDocument,
        replaces: Option<&str>,
        seed: Option<&str>,
    ) -> Result<DocumentMeta> {
        let embedder = self.embedder()?.clone();
        let texts: Vec<String> = doc.chunks.iter().map(|c| c.content_fts.clone()).collect();
        let vectors = embedder.embed(&texts).await?;
        let stable =
            |s: &str| uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, s.as_bytes()).to_string();
        let id = match seed {
            Some(s) => stable(s),
            None => uuid::Uuid::new_v4().to_string(),
        };
        let chunk_ids: Vec<String> = (0..doc.chunks.len())
            .map(|i| match seed {
                Some(s) => stable(&format!("{s}#chunk-{i}")),
                None => uuid::Uuid::new_v4().to_string(),
            })
            .collect();
        let now = now_iso();
        let created_at = match replaces {
            Some(old) => self
                .get_document(old)
                .await?
                .map(|m| m.created_at)
                .unwrap_or_else(|| now.clone()),
            None => now.clone(),
        };
        let meta = DocumentMeta {
            id: id.clone(),
            uri: doc.uri.clone(),
            title: doc.title.clone(),
            metadata: doc.metadata.clone(),
            created_at,
            updated_at: now,
        };
        let result = self
            .write_rows(&id, &doc, &vectors, &chunk_ids, &meta)
            .await;
        if let Err(e) = result {
            // Remove whatever part of the new document made it to disk; the old one is intact.
            let _ = self.delete_document(&id).await;
            return Err(e);
        }
        if let Some(old) = replaces {
            self.delete_document(old).await?;
        }
        Ok(meta)
    }

    async fn write_rows(
        &self,
        id: &str,
        doc: &NewDocument,
        vectors: &[Vec<f32>],
        chunk_ids: &[String],
        meta: &DocumentMeta,
    ) -> Result<()> {
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
        let docling = zstd::encode_all(doc.docling_document.to_string().as_bytes(), 3)
            .map_err(|e| StoreError::Other(format!("compressing docling_document: {e}")))?;
        let pages = if doc.pages.is_empty() {
            None
        } else {
            Some(encode_pages(&doc.pages)?)
        };
        let batch = RecordBatch::try_new(
            schema::documents_schema(),
            vec![
                Arc::new(StringArray::from(vec![id])) as ArrayRef,
                Arc::new(StringArray::from(vec![doc.content.as_str()])),
                Arc::new(LargeBinaryArray::from_iter(vec![Some(docling.as_slice())])),
                Arc::new(LargeBinaryArray::from_iter(vec![pages.as_deref()])),
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
    /// before its parts do.
    pub async fn delete_document(&self, id: &str) -> Result<()> {
        let by_id = format!("id = {}", sql_str(id));
        let by_doc = format!("document_id = {}", sql_str(id));
        self.meta.delete(by_id.as_str()).await?;
        self.chunks.delete(by_doc.as_str()).await?;
        self.items.delete(by_doc.as_str()).await?;
        self.documents.delete(by_id.as_str()).await?;
        Ok(())
    }
}
