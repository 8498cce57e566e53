//! Reads for browsing the knowledge base (the workbench's explorer): documents a page at
//! a time with a title/URI filter, a document's picture count, and one chunk as a search
//! would hand it to the model (pictures attached, context expanded).

use lancedb::query::{ExecutableQuery, QueryBase};

use super::arrow_util::sql_str;
use super::read::metas_from_batches;
use super::{DocumentMeta, Result, SearchResult, Store, collect};

/// The SQL filter of documents whose title or URI contains `text`, in any case (the
/// same `LOWER(..) LIKE` the document filter uses; `%` and `_` keep their SQL meaning).
pub fn title_or_uri_filter(text: &str) -> Option<String> {
    let text = text.trim().to_lowercase();
    if text.is_empty() {
        return None;
    }
    let p = sql_str(&format!("%{text}%"));
    Some(format!("LOWER(title) LIKE {p} OR LOWER(uri) LIKE {p}"))
}

impl Store {
    /// Up to `limit` documents from `offset` on, in the table's order (the order they were
    /// added), whose title or URI contains `text` (all when empty). Reads only that page.
    pub async fn documents_page(
        &self,
        text: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<DocumentMeta>> {
        let mut q = self.meta.query().limit(limit).offset(offset);
        if let Some(f) = title_or_uri_filter(text) {
            q = q.only_if(f);
        }
        let batches = collect(q.execute().await?).await?;
        Ok(metas_from_batches(&batches))
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

#[cfg(test)]
mod tests {
    use super::title_or_uri_filter;

    #[test]
    fn the_filter_is_lower_case_and_quotes_are_doubled() {
        assert_eq!(title_or_uri_filter("  "), None);
        assert_eq!(
            title_or_uri_filter(" O'Brien ").as_deref(),
            Some("LOWER(title) LIKE '%o''brien%' OR LOWER(uri) LIKE '%o''brien%'")
        );
    }
}
