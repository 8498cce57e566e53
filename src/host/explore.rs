//! The knowledge-base explorer's host API: what the workbench's explorer reads from the
//! store (documents a batch at a time, a document's details and chunks, hybrid search,
//! a chunk exactly as the search tool hands it to the model) and, from the session's
//! ledger, the questions each chunk was retrieved and cited in.
//!
//! The agent context reuses the search tool's own rendering
//! ([`crate::capabilities::kit::search::result_block`] and
//! [`crate::capabilities::kit::picture_content`]), so what the explorer shows is what a
//! search return carries.

use std::collections::BTreeSet;

use crate::capabilities::kit::{picture_content, search};
use crate::engine::chat::{IMAGE_TOKEN_ESTIMATE, estimate_tokens};
use crate::engine::messages::UserContent;
use crate::store::rerank::RerankReport;
use crate::store::{DocumentMeta, SearchResult, Store};

use super::transcript::Transcript;

/// Documents per batch (haiku.rag's inspector loads 50 at a time).
pub const DOCUMENT_BATCH: usize = 50;

/// Results of an explorer search (haiku.rag's inspector: 50, not expanded).
pub const SEARCH_LIMIT: usize = 50;

/// A document as the explorer's list names it: title, else URI, else id.
pub fn document_label(d: &DocumentMeta) -> String {
    d.title
        .clone()
        .filter(|t| !t.is_empty())
        .or_else(|| d.uri.clone().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| d.id.clone())
}

/// One batch of documents from `offset`, whose title or URI contains `filter`.
pub async fn documents(
    store: &Store,
    filter: &str,
    offset: usize,
) -> Result<Vec<DocumentMeta>, String> {
    store
        .documents_page(filter, offset, DOCUMENT_BATCH)
        .await
        .map_err(|e| format!("cannot list documents: {e}"))
}

/// Reads ahead what the title filter matches in memory (every document's row, once per
/// version of the table), so that the first key typed in the filter box finds it read. A
/// failure is left for the filtered read itself to report.
pub async fn warm_filter(store: &Store) {
    if let Err(e) = store.warm_document_listing().await {
        tracing::debug!("reading the documents ahead for the filter: {e}");
    }
}

/// A document's details: its row, its chunks in order (as results, score 0), the
/// pages its chunks lie on and its picture count.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentDetail {
    pub meta: DocumentMeta,
    pub chunks: Vec<SearchResult>,
    pub pages: Vec<i64>,
    pub pictures: usize,
}

/// The details of document `id`.
pub async fn document(store: &Store, id: &str) -> Result<DocumentDetail, String> {
    let err = |e: crate::store::StoreError| format!("cannot read document {id}: {e}");
    let meta = store
        .get_document(id)
        .await
        .map_err(err)?
        .ok_or_else(|| format!("document {id} is not in this database"))?;
    let chunks: Vec<SearchResult> = store
        .chunks_of(id)
        .await
        .map_err(err)?
        .into_iter()
        .map(|c| crate::store::search::result_from_chunk(c, 0.0, Some(&meta)))
        .collect();
    let pages: BTreeSet<i64> = chunks
        .iter()
        .flat_map(|c| c.page_numbers.iter().copied())
        .collect();
    let pictures = store.count_pictures_of(id).await.map_err(err)?;
    Ok(DocumentDetail {
        meta,
        chunks,
        pages: pages.into_iter().collect(),
        pictures,
    })
}

/// The store's hybrid search over the whole base (`filter` `None`) or the documents the
/// SQL `filter` selects, not expanded.
pub async fn search_base(
    store: &Store,
    query: &str,
    filter: Option<&str>,
) -> Result<Searched, String> {
    store
        .search_reported(
            query,
            Some(SEARCH_LIMIT),
            filter,
            crate::store::search::SearchMode::Hybrid,
        )
        .await
        .map(|(results, rerank)| Searched { results, rerank })
        .map_err(|e| e.to_string())
}

/// A search's results and, with a reranker configured, what it did (fused and reranked
/// scores, or why the fused order was kept).
#[derive(Debug, Clone, PartialEq)]
pub struct Searched {
    pub results: Vec<SearchResult>,
    pub rerank: Option<RerankReport>,
}

/// What the model receives for one chunk: the search tool's block of the expanded chunk
/// and the pictures it would attach (or that vision off suppresses).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentContext {
    pub chunk_id: String,
    /// The block as the search return carries it.
    pub text: String,
    /// The self_refs of the chunk's pictures, in the order they would be attached.
    pub pictures: Vec<String>,
    /// Whether the driving model has vision (the pictures are attached).
    pub vision: bool,
    /// Estimated tokens of it all: text at chars/4, each attached picture at
    /// [`IMAGE_TOKEN_ESTIMATE`].
    pub tokens: usize,
}

impl AgentContext {
    /// The sentence before the block: which pictures are attached or suppressed.
    pub fn preface(&self) -> String {
        let n = self.pictures.len();
        match (self.vision, n) {
            (true, 0) => "Vision is on; this chunk has no pictures to attach.".into(),
            (true, n) => format!(
                "Vision is on: {n} picture(s) are attached after the text: {}.",
                self.pictures.join(", ")
            ),
            (false, 0) => "Vision is off; this chunk has no pictures.".into(),
            (false, n) => format!(
                "Vision is off: {n} picture(s) are suppressed ({}); any VLM descriptions \
                 remain inline.",
                self.pictures.join(", ")
            ),
        }
    }
}

/// The agent context of `chunk_id`, as a search return of `total` results shows it at
/// `rank` (a chunk on its own: rank 1 of 1). `score` is the search's, when it came from one.
pub async fn agent_context(
    store: &Store,
    chunk_id: &str,
    rank: usize,
    total: usize,
    score: f64,
    vision: bool,
) -> Result<AgentContext, String> {
    let result = store
        .chunk_as_evidence(chunk_id, score)
        .await
        .map_err(|e| format!("cannot expand chunk {chunk_id}: {e}"))?
        .ok_or_else(|| format!("chunk {chunk_id} is not in this database"))?;
    let text = search::result_block(&result, rank.max(1), total.max(rank).max(1));
    let pictures: Vec<String> = picture_content(std::slice::from_ref(&result))
        .into_iter()
        .filter_map(|c| match c {
            UserContent::Binary(b) => b.identifier,
            _ => None,
        })
        .collect();
    let mut tokens = estimate_tokens(&text);
    if vision {
        let labels: usize = picture_content(std::slice::from_ref(&result))
            .iter()
            .map(|c| match c {
                UserContent::Text(t) => estimate_tokens(t),
                _ => IMAGE_TOKEN_ESTIMATE,
            })
            .sum();
        tokens += labels;
    }
    Ok(AgentContext {
        chunk_id: chunk_id.to_string(),
        text,
        pictures,
        vision,
        tokens,
    })
}

/// A cited chunk's own passage: from its collection when it names one that is open,
/// else from whichever open store holds it.
pub async fn find_passage(
    stores: &[(Option<String>, std::sync::Arc<Store>)],
    collection: Option<&str>,
    chunk_id: &str,
) -> Result<super::transcript::Passage, String> {
    let named: Vec<_> = stores
        .iter()
        .filter(|(n, _)| collection.is_some() && n.as_deref() == collection)
        .collect();
    let order: Vec<_> = if named.is_empty() {
        stores.iter().collect()
    } else {
        named
    };
    for (_, s) in order {
        if let Some(r) = s
            .result_for_chunk(chunk_id)
            .await
            .map_err(|e| e.to_string())?
        {
            return Ok(passage_of(r, false));
        }
    }
    Err(format!(
        "chunk {chunk_id} is not in the open knowledge base"
    ))
}

fn passage_of(r: SearchResult, as_cited: bool) -> super::transcript::Passage {
    super::transcript::Passage {
        text: r.content,
        pages: r.page_numbers,
        headings: r.headings.unwrap_or_default(),
        as_cited,
    }
}

/// Where the knowledge base a question read is recorded, for a chunk of `collection` it
/// cited: the database's location and the versions of its tables the question read (none
/// when the session records none, as earlier sessions and haiku.rag hosts' do not).
pub fn as_read_point(
    extra: &serde_json::Map<String, serde_json::Value>,
    collection: Option<&str>,
    question: u64,
) -> Option<(String, crate::session::knowledge::TableVersions)> {
    crate::session::knowledge::recorded(extra)
        .into_iter()
        .filter(|k| k.questions.contains(&question))
        .find(|k| collection.is_none() || k.name.as_deref() == collection)
        .and_then(|k| Some((k.location, k.versions.get(&question)?.clone())))
}

/// The knowledge base `location` as it was at `versions`, read-only (for
/// [`passage_as_read`]).
pub async fn open_as_read(
    location: &str,
    versions: &crate::session::knowledge::TableVersions,
) -> Result<Store, String> {
    let mut s = Store::open(location).await.map_err(|e| e.to_string())?;
    s.check_out(versions).await.map_err(|e| e.to_string())?;
    Ok(s)
}

/// A chunk's passage from `then` (a knowledge base checked out at the versions a question
/// read, [`open_as_read`]), for a chunk no longer in it as it is now: marked
/// [`super::transcript::Passage::as_cited`].
pub async fn passage_as_read(then: &Store, chunk_id: &str) -> Option<super::transcript::Passage> {
    match then.result_for_chunk(chunk_id).await {
        Ok(Some(r)) => Some(passage_of(r, true)),
        _ => None,
    }
}

/// Reads the own passage of every citation of `t` that has none yet from `stores`, and
/// a chunk that is gone now as its question read it (the versions recorded in `extra`);
/// returns how many could not be read (their sources then quote the context the model
/// saw, and say so).
pub async fn read_passages(
    t: &mut Transcript,
    stores: &[(Option<String>, std::sync::Arc<Store>)],
    extra: &serde_json::Map<String, serde_json::Value>,
) -> usize {
    let mut unread = 0;
    let mut opened: Vec<(_, Option<Store>)> = Vec::new();
    for turn in &mut t.turns {
        let question = turn.question;
        for c in &mut turn.citations {
            if c.passage.is_some() {
                continue;
            }
            let collection = c.evidence.collection.as_deref();
            let mut found = find_passage(stores, collection, &c.evidence.chunk_id)
                .await
                .ok();
            if found.is_none()
                && let Some(point) = as_read_point(extra, collection, question)
            {
                if !opened.iter().any(|(p, _)| *p == point) {
                    let then = open_as_read(&point.0, &point.1).await.ok();
                    opened.push((point.clone(), then));
                }
                if let Some((_, Some(then))) = opened.iter().find(|(p, _)| *p == point) {
                    found = passage_as_read(then, &c.evidence.chunk_id).await;
                }
            }
            match found {
                Some(p) => c.passage = Some(p),
                None => unread += 1,
            }
        }
    }
    unread
}

/// What changed in a knowledge base between the point a question read and now, in
/// documents: added, replaced (the same id, updated since) and deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KbChanges {
    pub added: usize,
    pub replaced: usize,
    pub deleted: usize,
}

impl KbChanges {
    /// `1 document deleted`, `3 documents: 1 added, 2 replaced` (none: `no document
    /// changed`).
    pub fn describe(&self) -> String {
        let kinds: Vec<(usize, &str)> = [
            (self.added, "added"),
            (self.replaced, "replaced"),
            (self.deleted, "deleted"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .collect();
        let total = self.added + self.replaced + self.deleted;
        let documents = |n: usize| format!("{n} document{}", if n == 1 { "" } else { "s" });
        match kinds.as_slice() {
            [] => "no document changed".into(),
            [(n, what)] => format!("{} {what}", documents(*n)),
            more => format!(
                "{}: {}",
                documents(total),
                more.iter()
                    .map(|(n, what)| format!("{n} {what}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The documents of `now` against those of `then` (the same database at the versions a
/// question read, [`open_as_read`]).
pub async fn kb_changes(then: &Store, now: &Store) -> Result<KbChanges, String> {
    async fn ids(s: &Store) -> Result<std::collections::HashMap<String, String>, String> {
        Ok(s.list_documents(None)
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|d| (d.id, d.updated_at))
            .collect())
    }
    let (before, after) = (ids(then).await?, ids(now).await?);
    let mut c = KbChanges::default();
    for (id, updated) in &after {
        match before.get(id) {
            None => c.added += 1,
            Some(was) if was != updated => c.replaced += 1,
            Some(_) => {}
        }
    }
    c.deleted = before.keys().filter(|id| !after.contains_key(*id)).count();
    Ok(c)
}

/// One question of the session in which a chunk was retrieved.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkUse {
    /// The question's number as the ledger shows it (1-based).
    pub question: u64,
    pub prompt: String,
    pub cited: bool,
}

/// The questions of the session in which `chunk_id` was retrieved, and whether each
/// cited it, in question order (from the citation ledger).
pub fn chunk_uses(transcript: &Transcript, chunk_id: &str) -> Vec<ChunkUse> {
    transcript
        .ledger
        .iter()
        .filter_map(|row| {
            let cited = row.cited.iter().any(|c| c.evidence.chunk_id == chunk_id);
            let retrieved = cited || row.uncited.iter().any(|c| c.evidence.chunk_id == chunk_id);
            retrieved.then(|| ChunkUse {
                question: row.question + 1,
                prompt: row.prompt.clone(),
                cited,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::KbChanges;

    #[test]
    fn knowledge_base_changes_read_as_a_reviewer_says_them() {
        let c = |added, replaced, deleted| KbChanges {
            added,
            replaced,
            deleted,
        };
        assert_eq!(c(0, 0, 0).describe(), "no document changed");
        assert_eq!(c(0, 0, 1).describe(), "1 document deleted");
        assert_eq!(c(2, 0, 0).describe(), "2 documents added");
        assert_eq!(c(1, 2, 0).describe(), "3 documents: 1 added, 2 replaced");
        assert_eq!(
            c(1, 1, 1).describe(),
            "3 documents: 1 added, 1 replaced, 1 deleted"
        );
    }
}
