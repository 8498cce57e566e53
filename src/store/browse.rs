//! Reads for browsing the knowledge base (the workbench's explorer): documents a page at
//! a time with a title/URI filter, a document's picture count, and one chunk as a search
//! would hand it to the model (pictures attached, context expanded).

use lancedb::query::{ExecutableQuery, QueryBase};

use super::arrow_util::sql_str;
use super::read::metas_from_batches;
use super::{DocumentMeta, Result, SearchResult, Store, collect};

impl Store {
    /// Up to `limit` documents from `offset` on, in the table's order (the order they were
    /// added), whose title or URI contains `text` in any case (all when empty). Without a
    /// filter only that page is read. With one, the documents' rows are read once per
    /// version of the table and matched in memory: a filtered scan costs about a full
    /// scan of every fragment (one per ingested document), and the filter box asks again
    /// on every key.
    pub async fn documents_page(
        &self,
        text: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<DocumentMeta>> {
        let text = text.trim().to_lowercase();
        if text.is_empty() {
            let q = self.meta.query().limit(limit).offset(offset);
            let batches = collect(q.execute().await?).await?;
            return Ok(metas_from_batches(&batches));
        }
        let listing = self.listing().await?;
        Ok(listing
            .keys
            .iter()
            .zip(&listing.docs)
            .filter(|((title, uri), _)| title.contains(&text) || uri.contains(&text))
            .skip(offset)
            .take(limit)
            .map(|(_, d)| d.clone())
            .collect())
    }

    /// Reads every document's row into memory (once per version of the table), which
    /// [`Store::documents_page`] then filters.
    pub async fn warm_document_listing(&self) -> Result<()> {
        self.listing().await.map(|_| ())
    }

    /// How many pictures (items with bytes) a document holds.
    pub async fn count_pictures_of(&self, document_id: &str) -> Result<usize> {
        Ok(self
            .items
            .count_rows(Some(format!(
                "document_id = {} AND picture_data IS NOT NULL",
                sql_str(document_id)
            )))
            .await?)
    }

    /// One chunk as the search tool would hand it to the model: its result with the
    /// pictures it refers to, then context-expanded. `score` is kept on the result.
    pub async fn chunk_as_evidence(
        &self,
        chunk_id: &str,
        score: f64,
    ) -> Result<Option<SearchResult>> {
        let Some(mut r) = self.result_for_chunk(chunk_id).await? else {
            return Ok(None);
        };
        r.score = score;
        let with_pictures = self.attach_pictures(vec![r]).await?;
        Ok(self.expand(with_pictures).await?.into_iter().next())
    }
}
