//! The store reads the workbench's effects make off the UI task: the explorer's reads,
//! passages, chunks, database information, the filter's documents, and which store holds
//! a piece of evidence (the knowledge base as a question read it, when it is gone now).

use std::sync::Arc;

use crate::host::explore;
use crate::store::Store;

use super::app::{App, ExploreRequest, Explored};

/// What changed in the open database at `location` since `versions` (none: it is not
/// open, it has not changed, or the versions cannot be read any more).
pub(super) async fn compare_point(
    stores: &[(Option<String>, Arc<Store>)],
    location: &str,
    versions: &crate::session::knowledge::TableVersions,
) -> Option<String> {
    let (_, now) = stores.iter().find(|(_, s)| s.uri() == location)?;
    if now.table_versions().await.ok().as_ref() == Some(versions) {
        return None;
    }
    let then = crate::host::explore::open_as_read(location, versions)
        .await
        .ok()?;
    let c = crate::host::explore::kb_changes(&then, now).await.ok()?;
    Some(c.describe())
}

/// Runs one store read of the explorer through `host::explore`.
pub(super) async fn explore(
    store: Option<Arc<Store>>,
    request: ExploreRequest,
    vision: bool,
) -> Explored {
    fn no_db<T>() -> Result<T, String> {
        Err("no database is open".to_string())
    }
    match request {
        ExploreRequest::Documents {
            generation,
            filter,
            offset,
        } => Explored::Documents {
            generation,
            offset,
            result: match store {
                Some(s) => explore::documents(&s, &filter, offset).await,
                None => no_db(),
            },
        },
        ExploreRequest::Document(id) => Explored::Document {
            result: match store {
                Some(s) => explore::document(&s, &id).await,
                None => no_db(),
            },
            id,
        },
        ExploreRequest::Search { query, filter } => Explored::Search {
            result: match store {
                Some(s) => explore::search_base(&s, &query, filter.as_deref()).await,
                None => no_db(),
            },
            query,
        },
        ExploreRequest::Context {
            chunk_id,
            rank,
            total,
            score,
        } => Explored::Context {
            result: match store {
                Some(s) => explore::agent_context(&s, &chunk_id, rank, total, score, vision).await,
                None => no_db(),
            },
            chunk_id,
        },
        ExploreRequest::WarmFilter => {
            if let Some(s) = store {
                explore::warm_filter(&s).await;
            }
            Explored::FilterWarmed
        }
    }
}

/// What a store is asked whether it holds (by id).
#[derive(Clone, Copy)]
pub(super) enum Held<'a> {
    Document(&'a str),
    Chunk(&'a str),
}

/// Whether `store` holds `held`.
pub(super) async fn holds(store: &Store, held: Held<'_>) -> bool {
    match held {
        Held::Document(id) => matches!(store.get_document(id).await, Ok(Some(_))),
        Held::Chunk(id) => matches!(store.get_chunk(id).await, Ok(Some(_))),
    }
}

/// Every point of the knowledge bases the session's questions read (database, table
/// versions), the latest question's first.
pub(super) fn recorded_points(
    app: &App,
) -> Vec<(String, crate::session::knowledge::TableVersions)> {
    let points = crate::session::knowledge::points(&app.session.groundwork.extra);
    let mut out: Vec<(String, crate::session::knowledge::TableVersions)> = Vec::new();
    for (_, l, v) in points {
        if !out.iter().any(|(ol, ov)| *ol == l && *ov == v) {
            out.push((l, v));
        }
    }
    out
}

/// [`store_holding`]; when no open store holds the evidence any more (deleted or replaced
/// since it was cited), the knowledge base as a question of the session read it, read-only
/// (the first recorded point that holds it), so that its pages can still be shown.
pub(super) async fn store_holding_or_as_read(
    stores: &[(Option<String>, Arc<Store>)],
    collection: Option<&str>,
    held: Held<'_>,
    points: Vec<(String, crate::session::knowledge::TableVersions)>,
) -> Option<Arc<Store>> {
    let now = store_holding(stores, collection, held).await;
    if let Some(s) = &now
        && holds(s, held).await
    {
        return now;
    }
    for (location, versions) in points {
        if let Ok(then) = crate::host::explore::open_as_read(&location, &versions).await
            && holds(&then, held).await
        {
            return Some(Arc::new(then));
        }
    }
    now
}

/// The store that holds `held`: with several collections the first that has it, else the
/// one store.
async fn store_holding(
    stores: &[(Option<String>, Arc<Store>)],
    collection: Option<&str>,
    held: Held<'_>,
) -> Option<Arc<Store>> {
    // The collection the evidence records is where it is read; only evidence that does
    // not say (a haiku.rag host's session) is looked for in each open store.
    if let Some(name) = collection
        && let Some((_, s)) = stores.iter().find(|(n, _)| n.as_deref() == Some(name))
    {
        return Some(s.clone());
    }
    if stores.len() > 1 {
        for (_, s) in stores {
            if holds(s, held).await {
                return Some(s.clone());
            }
        }
    }
    stores.first().map(|(_, s)| s.clone())
}

/// The filter's document labels over every open store, in store order: `NAME: label`
/// when several collections are open (the filter is per collection), else each label once.
pub(super) async fn document_labels(
    stores: &[(Option<String>, Arc<Store>)],
) -> Result<Vec<String>, String> {
    if stores.is_empty() {
        return Err("no database is open".to_string());
    }
    let mut labels: Vec<String> = Vec::new();
    for (name, s) in stores {
        let docs = s.list_documents(None).await.map_err(|e| match name {
            Some(n) => format!("collection {n}: {e}"),
            None => e.to_string(),
        })?;
        for d in docs {
            let mut label = crate::store::types::source_label(d.title.as_deref(), d.uri.as_deref());
            if label.is_empty() {
                label = d.id;
            }
            if let Some(n) = name.as_deref().filter(|_| stores.len() > 1) {
                label = crate::host::transcript::collection_label(n, &label);
            }
            if !labels.contains(&label) {
                labels.push(label);
            }
        }
    }
    Ok(labels)
}

/// The database info modal's text: one block per store, each headed by its collection.
pub(super) async fn db_info(stores: &[(Option<String>, Arc<Store>)]) -> Result<String, String> {
    if stores.is_empty() {
        return Err("no database is open".to_string());
    }
    let mut out = String::new();
    for (name, s) in stores {
        let info = s.info().await.map_err(|e| e.to_string())?;
        if !out.is_empty() {
            out.push('\n');
        }
        if let Some(n) = name {
            out.push_str(&format!("Collection: {n}\n"));
        }
        out.push_str(&format_info(&info));
    }
    Ok(out)
}

/// A chunk's text from whichever open store holds it (collections in order).
pub(super) async fn find_chunk(
    stores: &[(Option<String>, Arc<Store>)],
    chunk_id: &str,
) -> Result<String, String> {
    if stores.is_empty() {
        return Err("no database is open".to_string());
    }
    for (name, s) in stores {
        if let Some(r) = s
            .result_for_chunk(chunk_id)
            .await
            .map_err(|e| e.to_string())?
        {
            let mut text = chunk_text(&r);
            if let Some(n) = name.as_deref().filter(|_| stores.len() > 1) {
                text.insert_str(0, &format!("Collection: {n}\n"));
            }
            return Ok(text);
        }
    }
    Err(format!(
        "chunk {chunk_id} is not in {}",
        if stores.len() > 1 {
            "any open collection"
        } else {
            "this database"
        }
    ))
}

pub(super) fn chunk_text(r: &crate::store::types::SearchResult) -> String {
    let mut s = String::new();
    s.push_str(&format!("Document: {}\n", r.source_label()));
    if let Some(uri) = &r.document_uri {
        s.push_str(&format!("Source: {uri}\n"));
    }
    if !r.page_numbers.is_empty() {
        let p: Vec<String> = r.page_numbers.iter().map(|p| p.to_string()).collect();
        s.push_str(&format!("Pages: {}\n", p.join(", ")));
    }
    if let Some(h) = &r.headings
        && !h.is_empty()
    {
        s.push_str(&format!("Section: {}\n", h.join(" > ")));
    }
    s.push('\n');
    s.push_str(&r.content);
    s
}

/// Database info as the modal shows it.
pub fn format_info(i: &crate::store::StoreInfo) -> String {
    let mut s = format!("Path: {}\n", i.uri);
    if let Some(v) = &i.haiku_rag_version {
        s.push_str(&format!("Layout: haiku.rag {v}\n"));
    }
    s.push_str(&format!(
        "Embeddings: {}/{} ({})\n",
        i.embedder.provider, i.embedder.name, i.embedder.vector_dim
    ));
    s.push_str(&format!(
        "Documents: {}   Chunks: {}   Items: {}   Pictures: {}\n\nIndexes:\n",
        i.documents, i.chunks, i.items, i.pictures
    ));
    for idx in &i.indexes {
        s.push_str(&format!(
            "  {}.{} {} — {}\n",
            idx.table,
            idx.columns.join(","),
            idx.kind,
            if idx.unindexed_rows == 0 {
                "up to date".to_string()
            } else {
                format!("{} rows not indexed", idx.unindexed_rows)
            }
        ));
    }
    if !i.indexes.iter().any(|x| x.kind.contains("IVF")) {
        s.push_str("  no vector index (IVF-PQ is built from 5,000 chunks; search is exact)\n");
    }
    s
}
