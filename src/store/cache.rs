//! What search would otherwise read again on every query, kept per table version: the
//! metadata of the documents results came from, and which documents hold picture bytes;
//! and, for the explorer's title filter, every `document_meta` row in table order.
//!
//! The store's table handles see their own writes and nothing else (LanceDB's lazy read
//! consistency), and a table's version changes with every write, so a cache entry taken at
//! version `v` is exactly what a fresh read at `v` would give. A new version drops the entry.
//! Both caches grow at most with the corpus (one entry per document).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use lancedb::query::{ExecutableQuery, QueryBase, Select};

use super::arrow_util::strings;
use super::read::metas_from_batches;
use super::{DocumentMeta, Result, Store, collect};

#[derive(Default)]
pub(super) struct Cache {
    /// `document_meta` rows looked up so far, at one version of that table.
    documents: Mutex<Versioned<HashMap<String, DocumentMeta>>>,
    /// The ids of documents with at least one `document_items` row holding picture bytes,
    /// at one version of that table.
    pictured: Mutex<Option<Versioned<HashSet<String>>>>,
    /// Every `document_meta` row in table order, at one version of that table.
    listing: Mutex<Option<Versioned<Arc<Listing>>>>,
    /// Held while the listing is read, so that two callers read it once.
    listing_read: tokio::sync::Mutex<()>,
}

/// Every document's row in table order, with its title and URI lower-cased for matching.
pub(super) struct Listing {
    pub docs: Vec<DocumentMeta>,
    /// `(title, uri)` of each row of `docs`, lower-cased (empty when missing).
    pub keys: Vec<(String, String)>,
}

#[derive(Default)]
struct Versioned<T> {
    version: u64,
    value: T,
}

impl Store {
    /// Metadata of the given documents, keyed by id: what [`Store::documents_by_id`] reads,
    /// reading only the ids not seen at the current version of `document_meta`.
    pub(crate) async fn cached_documents(
        &self,
        ids: &[String],
    ) -> Result<HashMap<String, DocumentMeta>> {
        let version = self.meta.version().await?;
        let missing: Vec<String> = {
            let mut c = self
                .cache
                .documents
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if c.version != version {
                *c = Versioned {
                    version,
                    value: HashMap::new(),
                };
            }
            ids.iter()
                .filter(|id| !c.value.contains_key(*id))
                .cloned()
                .collect()
        };
        let read = self.documents_by_id(&missing).await?;
        let mut c = self
            .cache
            .documents
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut out: HashMap<String, DocumentMeta> = ids
            .iter()
            .filter_map(|id| c.value.get(id).map(|d| (id.clone(), d.clone())))
            .collect();
        if c.version == version {
            c.value
                .extend(read.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        out.extend(read);
        Ok(out)
    }

    /// Whether any item of `document_id` holds picture bytes (read once per version of
    /// `document_items`, for all documents).
    pub(crate) async fn has_pictures(&self, document_id: &str) -> Result<bool> {
        let version = self.items.version().await?;
        {
            let c = self
                .cache
                .pictured
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if let Some(p) = c.as_ref().filter(|p| p.version == version) {
                return Ok(p.value.contains(document_id));
            }
        }
        let batches = collect(
            self.items
                .query()
                .only_if("picture_data IS NOT NULL")
                .select(Select::columns(&["document_id"]))
                .execute()
                .await?,
        )
        .await?;
        let value: HashSet<String> = batches
            .iter()
            .flat_map(|b| strings(b, "document_id"))
            .flatten()
            .collect();
        let found = value.contains(document_id);
        *self
            .cache
            .pictured
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(Versioned { version, value });
        Ok(found)
    }

    /// Every document's row in table order (read once per version of `document_meta`:
    /// one scan of its six small columns, instead of one filtered scan of every fragment
    /// for every key typed in the filter box).
    pub(super) async fn listing(&self) -> Result<Arc<Listing>> {
        let version = self.meta.version().await?;
        let cached = || {
            let c = self.cache.listing.lock().unwrap_or_else(|e| e.into_inner());
            c.as_ref()
                .filter(|l| l.version == version)
                .map(|l| l.value.clone())
        };
        if let Some(l) = cached() {
            return Ok(l);
        }
        // One reader at a time: a caller that waited here finds the rows read.
        let _reading = self.cache.listing_read.lock().await;
        if let Some(l) = cached() {
            return Ok(l);
        }
        let batches = collect(self.meta.query().execute().await?).await?;
        let docs = metas_from_batches(&batches);
        let lower = |s: &Option<String>| s.as_deref().unwrap_or_default().to_lowercase();
        let keys = docs
            .iter()
            .map(|d| (lower(&d.title), lower(&d.uri)))
            .collect();
        let value = Arc::new(Listing { docs, keys });
        *self.cache.listing.lock().unwrap_or_else(|e| e.into_inner()) = Some(Versioned {
            version,
            value: value.clone(),
        });
        Ok(value)
    }
}
