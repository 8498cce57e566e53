//! The indexes haiku.rag keeps (`schema::INDEX_SPECS`): created where missing,
//! folded forward, and the IVF-PQ vector index once `chunks` is large enough.

use lancedb::Table;

use super::{Result, Store, schema};

/// Below this many chunks a flat (exact) vector search is fast enough and an IVF-PQ index
/// would be poorly trained.
pub const VECTOR_INDEX_MIN_ROWS: usize = 5000;

pub(super) async fn create_index(
    table: &Table,
    column: &str,
    kind: schema::IndexKind,
) -> Result<()> {
    use lancedb::index::Index;
    use lancedb::index::scalar::{BTreeIndexBuilder, BitmapIndexBuilder, FtsIndexBuilder};
    let index = match kind {
        // haiku.rag: FTS(with_position=True, remove_stop_words=False), other parameters at
        // lancedb's defaults (simple tokenizer, English, lower case, stemming, ASCII folding).
        schema::IndexKind::Fts => Index::FTS(
            FtsIndexBuilder::default()
                .with_position(true)
                .remove_stop_words(false)
                .stem(true)
                .lower_case(true)
                .ascii_folding(true)
                .max_token_length(Some(40)),
        ),
        schema::IndexKind::BTree => Index::BTree(BTreeIndexBuilder::default()),
        schema::IndexKind::Bitmap => Index::Bitmap(BitmapIndexBuilder::default()),
    };
    table
        .create_index(&[column], index)
        .replace(true)
        .execute()
        .await?;
    Ok(())
}

impl Store {
    /// Creates the indexes haiku.rag keeps (`schema::INDEX_SPECS`) where they are missing,
    /// folds rows added since into the existing ones, and builds the vector index (IVF-PQ)
    /// once `chunks` is large enough for one to pay off.
    pub async fn ensure_indexes(&self) -> Result<()> {
        use lancedb::table::{OptimizeOptions, optimize::OptimizeAction};
        self.writable()?;
        for (name, table) in self.tables() {
            let existing = table.list_indices().await?;
            for (col, kind) in schema::index_specs(name) {
                if !existing.iter().any(|i| i.columns.iter().any(|c| c == col)) {
                    create_index(table, col, *kind).await?;
                }
            }
            if !existing.is_empty() && table.count_rows(None).await? > 0 {
                // Another writer's index update of the same version (two users ingesting
                // into one shared database) preempts ours; lance says to retry, on the
                // latest version.
                let mut attempt = 0;
                loop {
                    match table
                        .optimize(OptimizeAction::Index(OptimizeOptions::default()))
                        .await
                    {
                        Err(e)
                            if attempt < 5
                                && e.to_string().contains("Retryable commit conflict") =>
                        {
                            attempt += 1;
                            tracing::info!(
                                table = name,
                                attempt,
                                "index update preempted; retrying"
                            );
                            table.checkout_latest().await?;
                        }
                        other => {
                            other?;
                            break;
                        }
                    }
                }
            }
        }
        let rows = self.chunks.count_rows(None).await?;
        let has_vector_index = self
            .chunks
            .list_indices()
            .await?
            .iter()
            .any(|i| i.columns.iter().any(|c| c == "vector"));
        if rows >= VECTOR_INDEX_MIN_ROWS && !has_vector_index {
            self.build_vector_index(rows).await?;
        }
        Ok(())
    }

    async fn build_vector_index(&self, rows: usize) -> Result<()> {
        use lancedb::index::Index;
        use lancedb::index::vector::IvfPqIndexBuilder;
        let partitions = ((rows as f64).sqrt() as u32).clamp(1, 256);
        let dim = self.dim();
        // Sub-vectors must divide the dimension; aim for 8..16 dims per sub-vector.
        let sub = [96, 64, 48, 32, 24, 16, 12, 8, 4, 2, 1]
            .into_iter()
            .find(|s| dim.is_multiple_of(*s) && dim / s >= 8)
            .unwrap_or(1) as u32;
        self.chunks
            .create_index(
                &["vector"],
                Index::IvfPq(
                    IvfPqIndexBuilder::default()
                        .distance_type(lancedb::DistanceType::L2)
                        .num_partitions(partitions)
                        .num_sub_vectors(sub),
                ),
            )
            .replace(true)
            .execute()
            .await?;
        Ok(())
    }
}
