//! The database commands that print what is stored: `search`, `info`, `delete`, `list`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::store::search::SearchMode;
use crate::store::{SearchResult, Store, format};

use super::args::{DeleteArgs, InfoArgs, ListArgs, SearchArgs};
use super::context::CmdContext;

pub(super) async fn search(ctx: &CmdContext, a: SearchArgs) -> Result<ExitCode> {
    let store = ctx.open_store().await?;
    let (results, rerank) = store
        .search_reported(&a.query, a.limit, a.filter.as_deref(), SearchMode::Hybrid)
        .await?;
    let results = if a.no_expand {
        results
    } else {
        store.expand(results).await?
    };
    if let Some(w) = rerank.as_ref().and_then(|r| r.warning.as_deref()) {
        eprintln!("warning: {w}");
    }
    let hit_of = |r: &SearchResult| {
        let report = rerank.as_ref()?;
        r.chunk_id
            .iter()
            .chain(&r.chunk_ids)
            .find_map(|id| report.hit(id))
    };
    let mut out = std::io::stdout().lock();
    if a.json {
        let mut values = Vec::with_capacity(results.len());
        for r in &results {
            let mut v = serde_json::to_value(r)?;
            if let (Some(h), Some(o)) = (hit_of(r), v.as_object_mut()) {
                o.insert("fused_score".into(), h.fused_score.into());
                o.insert("fused_rank".into(), h.fused_rank.into());
                o.insert("rerank_score".into(), h.rerank_score.into());
            }
            values.push(v);
        }
        serde_json::to_writer_pretty(&mut out, &values)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(r) = &rerank {
        writeln!(out, "{}\n", r.note())?;
    }
    if results.is_empty() {
        writeln!(out, "No results found.")?;
        return Ok(ExitCode::SUCCESS);
    }
    let n = results.len();
    let blocks: Vec<String> = results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut text = format::format_for_agent(r, Some(i + 1), Some(n));
            let doc = r
                .document_uri
                .as_deref()
                .or(r.document_title.as_deref())
                .unwrap_or("");
            let fused = match hit_of(r) {
                Some(h) if h.rerank_score.is_some() => {
                    format!(
                        " (reranked; fused {:.4}, fused #{})",
                        h.fused_score, h.fused_rank
                    )
                }
                Some(_) => " (fused)".to_string(),
                None => String::new(),
            };
            text.insert_str(0, &format!("score {:.4}{fused}  {doc}\n", r.score));
            text
        })
        .collect();
    writeln!(out, "{}", format::join_results(&blocks))?;
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn info(ctx: &CmdContext, a: InfoArgs) -> Result<ExitCode> {
    let info = Store::open(&ctx.db).await?.info().await?;
    let mut out = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &info)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "database   {}", info.uri)?;
    if let Some(v) = &info.haiku_rag_version {
        writeln!(out, "layout     haiku.rag {v}")?;
    }
    let e = &info.embedder;
    writeln!(
        out,
        "embedder   {} {} ({} dims){}",
        e.provider,
        e.name,
        e.vector_dim,
        e.base_url
            .as_deref()
            .map(|u| format!(" at {u}"))
            .unwrap_or_default()
    )?;
    if let Some(r) = &ctx.config.app.search.reranker {
        writeln!(
            out,
            "reranker   {} at {}/rerank ({}x candidates)",
            r.model,
            r.url.trim_end_matches('/'),
            crate::store::rerank::CANDIDATES_PER_RESULT
        )?;
    }
    writeln!(
        out,
        "contents   {} documents, {} chunks, {} items ({} pictures)",
        info.documents, info.chunks, info.items, info.pictures
    )?;
    if info.indexes.is_empty() {
        writeln!(out, "indexes    none")?;
    }
    for (i, idx) in info.indexes.iter().enumerate() {
        let status = if idx.unindexed_rows == 0 {
            "up to date".to_string()
        } else {
            format!("{} rows not indexed", idx.unindexed_rows)
        };
        writeln!(
            out,
            "{}{}.{} {} ({}): {status}",
            if i == 0 { "indexes    " } else { "           " },
            idx.table,
            idx.columns.join(","),
            idx.kind,
            idx.name
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn delete(ctx: &CmdContext, a: DeleteArgs) -> Result<ExitCode> {
    let store = Store::open(&ctx.db).await?;
    let doc = match store.get_document(&a.document).await? {
        Some(d) => Some(d),
        None => store.find_by_uri(&a.document).await?,
    };
    let Some(doc) = doc else {
        bail!("no document with id or URI '{}'", a.document);
    };
    store.delete_document(&doc.id).await?;
    store.ensure_indexes().await?;
    println!(
        "deleted {} ({})",
        doc.id,
        doc.uri.or(doc.title).unwrap_or_default()
    );
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn list(ctx: &CmdContext, a: ListArgs) -> Result<ExitCode> {
    let store = Store::open(&ctx.db).await?;
    let docs = store.list_documents(a.filter.as_deref()).await?;
    let mut out = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &docs)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    for d in docs {
        writeln!(
            out,
            "{}  {}  {}",
            d.id,
            d.title.as_deref().unwrap_or("(untitled)"),
            d.uri.as_deref().unwrap_or("")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
