//! Replacing a document with a new version that keeps its id and creation time (as
//! haiku.rag's update does), safe against a kill at any moment.
//!
//! LanceDB commits each table on its own, so a document's four tables cannot change in one
//! step. A document is visible once its `document_meta` row exists, and that row is
//! written last and deleted first, so a visible document is always complete. The
//! replacement goes through a second, temporary document, so that at every moment at least
//! one complete version is visible:
//!
//! 1. the new version is written under the *replacement id* ([`replacement_id`], derived
//!    from the document's id), its metadata naming the document it replaces
//!    ([`REPLACES_KEY`]); old and new are both visible;
//! 2. the old version is deleted; the new one is visible under the replacement id;
//! 3. the new version is written again under the document's id (the rows are in memory:
//!    the chunks are embedded once); both are visible, with the same content;
//! 4. the replacement is deleted.
//!
//! A kill leaves, besides one complete version, at most a visible replacement or rows
//! without a `document_meta` row. [`Store::stored_for_uri`] recognises both, and the next
//! ingest of the file finishes the replacement (or removes the leftover), so a rerun
//! converges to one document with the original id. (A LanceDB `update` moving the rows
//! onto the old id would rewrite them just the same, copy-on-write, but table by table, so
//! for a while the visible document would have its rows under two ids.)

use serde_json::Value;

use super::arrow_util::sql_str;
use super::write::{now_iso, stable_id};
use super::{DocumentMeta, NewDocument, Result, Store};

/// The `document_meta.metadata` key of a replacement in progress: the id of the document
/// it replaces. Never on a finished document.
pub const REPLACES_KEY: &str = "groundwork_replaces";

/// The test hook ending the process at one step of a replacement, as a kill would: no
/// cleanup runs. Values: `replacement-written`, `original-removed`, `original-rewritten`.
pub const KILL_ENV: &str = "GROUNDWORK_TEST_KILL_REPLACE";

/// The id a replacement of document `id` is written under while it is in progress.
pub fn replacement_id(id: &str) -> String {
    stable_id(&format!("groundwork:replacement:{id}"))
}

/// Whether `meta` is a replacement in progress (a temporary document), and of which id.
pub fn replaced_by(meta: &DocumentMeta) -> Option<&str> {
    meta.metadata
        .get(REPLACES_KEY)
        .and_then(Value::as_str)
        .filter(|original| replacement_id(original) == meta.id)
}

/// What the knowledge base holds for one URI.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The id the document keeps: the original one, even when an interrupted
    /// replacement already removed it.
    pub id: String,
    /// The complete version visible now: the document itself, or its replacement when
    /// an interrupted replacement already removed the original.
    pub current: DocumentMeta,
    /// Whether an interrupted replacement left a temporary document or rows to clean up.
    pub interrupted: bool,
}

/// Ends the process at `step` when the test hook asks for it.
fn kill_point(step: &str) {
    if std::env::var(KILL_ENV).is_ok_and(|s| s == step) {
        crate::errors::say!("{KILL_ENV}={step}: ending the process here, as a kill would");
        std::process::exit(137);
    }
}

impl Store {
    /// The document stored under `uri`, with what an interrupted replacement left
    /// recognised (see the module documentation).
    pub async fn stored_for_uri(&self, uri: &str) -> Result<Option<Stored>> {
        let docs = self
            .list_documents(Some(&format!("uri = {}", sql_str(uri))))
            .await?;
        let (temps, originals): (Vec<&DocumentMeta>, Vec<&DocumentMeta>) =
            docs.iter().partition(|d| replaced_by(d).is_some());
        if let Some(original) = originals.first() {
            let temp = replacement_id(&original.id);
            let interrupted = temps.iter().any(|t| t.id == temp) || self.has_rows(&temp).await?;
            return Ok(Some(Stored {
                id: original.id.clone(),
                current: (*original).clone(),
                interrupted,
            }));
        }
        Ok(temps.first().and_then(|t| {
            Some(Stored {
                id: replaced_by(t)?.to_string(),
                current: (*t).clone(),
                interrupted: true,
            })
        }))
    }

    /// Whether any rows are stored under document id `id` (items are written first and
    /// deleted last, so one look at `document_items` answers).
    async fn has_rows(&self, id: &str) -> Result<bool> {
        Ok(self
            .items
            .count_rows(Some(format!("document_id = {}", sql_str(id))))
            .await?
            > 0)
    }

    /// Removes what an interrupted replacement of `id` left while the document itself is
    /// complete and visible.
    pub async fn discard_replacement(&self, id: &str) -> Result<()> {
        self.delete_document(&replacement_id(id)).await
    }

    /// Replaces document `id` with `doc`, keeping its id and creation time; its chunks get
    /// new ids (seeded by `seed` when given). Finishes an interrupted replacement of `id`.
    /// An error leaves a complete version visible, and a later call converges.
    pub async fn replace_document(
        &self,
        doc: NewDocument,
        id: &str,
        seed: Option<&str>,
    ) -> Result<DocumentMeta> {
        self.replace_reporting(doc, id, seed, &|_, _| {}).await
    }

    /// [`Store::replace_document`], telling `embedded` how the embedding goes.
    pub(super) async fn replace_reporting(
        &self,
        doc: NewDocument,
        id: &str,
        seed: Option<&str>,
        embedded: &super::write::Embedded<'_>,
    ) -> Result<DocumentMeta> {
        self.writable()?;
        let rows = self.prepare(doc, seed, embedded).await?;
        let temp = replacement_id(id);
        let both = self
            .documents_by_id(&[id.to_string(), temp.clone()])
            .await?;
        let now = now_iso();
        let created_at = both
            .get(id)
            .or_else(|| both.get(&temp))
            .map(|m| m.created_at.clone())
            .unwrap_or_else(|| now.clone());
        if both.contains_key(id) || !both.contains_key(&temp) {
            // Steps 1 and 2: the new version visible under the replacement id, the old one
            // gone. (With neither visible there is nothing to keep: step 1 is harmless.)
            self.delete_document(&temp).await?;
            let mut meta = rows.meta(&temp, created_at.clone(), now.clone());
            meta.metadata
                .insert(REPLACES_KEY.into(), Value::String(id.to_string()));
            let temp_chunks: Vec<String> =
                rows.chunk_ids.iter().map(|c| replacement_id(c)).collect();
            if let Err(e) = self.write_rows(&temp, &rows, &temp_chunks, &meta).await {
                let _ = self.delete_document(&temp).await;
                return Err(e);
            }
            kill_point("replacement-written");
        }
        // The original's rows, or what an interrupted run left of them.
        self.delete_document(id).await?;
        kill_point("original-removed");
        // Steps 3 and 4.
        let meta = rows.meta(id, created_at, now);
        if let Err(e) = self.write_rows(id, &rows, &rows.chunk_ids, &meta).await {
            // The replacement stays visible; the next call writes the original again.
            let _ = self.delete_document(id).await;
            return Err(e);
        }
        kill_point("original-rewritten");
        self.delete_document(&temp).await?;
        Ok(meta)
    }
}
