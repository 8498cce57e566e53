//! The database commands that print what is stored: `search`, `info`, `delete`, `list`.
//! With several collections open, `search` merges their results by score (each marked
//! with its collection), `info` and `list` print one block or row set per collection.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use crate::store::search::SearchMode;
use crate::store::{SearchResult, Store, format};

use super::args::{DeleteArgs, InfoArgs, ListArgs, SearchArgs};
use super::context::CmdContext;

pub(super) async fn search(ctx: &CmdContext, a: SearchArgs) -> Result<ExitCode> {
    let opened = ctx.open_collections(a.collection.as_deref()).await?;
    let several = opened.len() > 1;
    let mut results = Vec::new();
    let mut reports = Vec::new();
    // Results found, and the passages they became once expanded (neighbours merge).
    let (mut retrieved, mut passages) = (0, 0);
    for (name, store) in &opened {
        let (found, rerank) = store
            .search_reported(&a.query, a.limit, a.filter.as_deref(), SearchMode::Hybrid)
            .await?;
        retrieved += found.len();
        let mut found = if a.no_expand {
            found
        } else {
            store.expand(found).await?
        };
        passages += found.len();
        if let Some(w) = rerank.as_ref().and_then(|r| r.warning.as_deref()) {
            match name.as_deref().filter(|_| several) {
                Some(n) => crate::errors::say!("warning: collection {n}: {w}"),
                None => crate::errors::say!("warning: {w}"),
            }
        }
        if several {
            for r in &mut found {
                r.collection = name.clone();
            }
        }
        results.extend(found);
        reports.extend(rerank.map(|r| (name.clone(), r)));
    }
    if several {
        // As RAG's `rag_search` over collections: by score, ties in collection order.
        results.sort_by(|x, y| y.score.total_cmp(&x.score));
        results.truncate(a.limit.unwrap_or(ctx.config.app.search.limit));
    }
    let hit_of = |r: &SearchResult| {
        r.chunk_id
            .iter()
            .chain(&r.chunk_ids)
            .find_map(|id| reports.iter().find_map(|(_, report)| report.hit(id)))
    };
    let merged = (passages < retrieved).then(|| {
        format!(
            "{retrieved} results, merged into {passages} passage{}: neighbouring chunks were \
             joined when their context was expanded (--no-expand shows each)",
            if passages == 1 { "" } else { "s" }
        )
    });
    let mut out = crate::errors::stdout();
    if a.json {
        if let Some(note) = &merged {
            crate::errors::say!("note: {note}");
        }
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
    for (name, r) in &reports {
        match name.as_deref().filter(|_| several) {
            Some(n) => writeln!(out, "[{n}] {}\n", r.note())?,
            None => writeln!(out, "{}\n", r.note())?,
        }
    }
    if results.is_empty() {
        writeln!(out, "No results found.")?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(note) = &merged {
        writeln!(out, "{note}\n")?;
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
            let from = r
                .collection
                .as_deref()
                .map(|c| format!("[{c}] "))
                .unwrap_or_default();
            text.insert_str(
                0,
                &format!("score {:.4}{fused}  {from}{doc}\n{}", r.score, location(r)),
            );
            text
        })
        .collect();
    writeln!(out, "{}", format::join_results(&blocks))?;
    Ok(ExitCode::SUCCESS)
}

/// Where a hit sits in its document, as the explorer's chunk detail names it: a
/// `Page(s):` line and a `Section:` line (the headings above the chunk, outermost first),
/// each only when known.
fn location(r: &SearchResult) -> String {
    let mut out = String::new();
    if !r.page_numbers.is_empty() {
        let pages: Vec<String> = r.page_numbers.iter().map(i64::to_string).collect();
        out.push_str(&format!("Page(s): {}\n", pages.join(", ")));
    }
    if let Some(h) = r.headings.as_ref().filter(|h| !h.is_empty()) {
        out.push_str(&format!("Section: {}\n", h.join(" > ")));
    }
    out
}

pub(super) async fn info(ctx: &CmdContext, a: InfoArgs) -> Result<ExitCode> {
    let chosen = ctx.databases.only(a.collection.as_deref())?;
    let mut infos = Vec::new();
    for (name, db) in chosen.entries() {
        let opened = ctx.open_db(&db).await;
        let info = match opened {
            Ok(store) => store.info().await.map_err(anyhow::Error::from),
            Err(e) => Err(e),
        };
        let info = match &name {
            Some(n) => info.with_context(|| format!("collection {n}"))?,
            None => info?,
        };
        // Where the embedder is served, when only haiku.rag's configuration says it.
        let endpoint = match ctx.haiku_endpoint(&ctx.overrides.apply(&info.embedder)) {
            Ok(e) => e,
            Err(e) => {
                crate::errors::say!("warning: {e:#}");
                None
            }
        };
        infos.push((name, info, endpoint));
    }
    let mut out = crate::errors::stdout();
    let several = infos.len() > 1;
    if a.json {
        if several {
            let list: Vec<serde_json::Value> = infos
                .iter()
                .map(|(name, info, endpoint)| {
                    let mut v = info_json(info, endpoint.as_ref());
                    if let serde_json::Value::Object(m) = &mut v {
                        m.insert("collection".into(), name.clone().into());
                    }
                    v
                })
                .collect();
            serde_json::to_writer_pretty(&mut out, &list)?;
        } else {
            serde_json::to_writer_pretty(&mut out, &info_json(&infos[0].1, infos[0].2.as_ref()))?;
        }
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    for (i, (name, info, endpoint)) in infos.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        if let Some(n) = name.as_deref().filter(|_| several) {
            writeln!(out, "collection {n}")?;
        }
        print_info(
            &mut out,
            info,
            endpoint.as_ref(),
            ctx.config.app.search.reranker.as_ref(),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `info --json`: the store's info, with `embedder_endpoint` (`base_url`, `from`) when
/// haiku.rag's configuration serves the embedder.
fn info_json(
    info: &crate::store::StoreInfo,
    endpoint: Option<&crate::config::haiku::Endpoint>,
) -> serde_json::Value {
    let mut v = serde_json::to_value(info).unwrap_or_default();
    if let (Some(e), serde_json::Value::Object(m)) = (endpoint, &mut v) {
        m.insert(
            "embedder_endpoint".into(),
            serde_json::json!({"base_url": e.base_url, "from": e.from}),
        );
    }
    v
}

fn print_info(
    out: &mut impl Write,
    info: &crate::store::StoreInfo,
    endpoint: Option<&crate::config::haiku::Endpoint>,
    reranker: Option<&crate::config::RerankerConfig>,
) -> Result<()> {
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
        match (e.base_url.as_deref(), endpoint) {
            (Some(u), _) => format!(" at {u}"),
            (None, Some(ep)) => format!(" at {} (from {})", ep.base_url, ep.from.display()),
            (None, None) => String::new(),
        }
    )?;
    if let Some(r) = reranker {
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
    Ok(())
}

pub(super) async fn delete(ctx: &CmdContext, a: DeleteArgs) -> Result<ExitCode> {
    let store = ctx
        .open_db(&ctx.databases.one(a.collection.as_deref(), "delete")?)
        .await?;
    let doc = match store.get_document(&a.document).await? {
        Some(d) => Some(d),
        None => store.find_by_uri(&a.document).await?,
    };
    let Some(doc) = doc else {
        bail!("no document with id or URI '{}'", a.document);
    };
    store.delete_document(&doc.id).await?;
    // And what an interrupted re-ingest of it left.
    store.discard_replacement(&doc.id).await?;
    store.ensure_indexes().await?;
    writeln!(
        crate::errors::stdout(),
        "deleted {} ({})",
        doc.id,
        doc.uri.or(doc.title).unwrap_or_default()
    )?;
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn list(ctx: &CmdContext, a: ListArgs) -> Result<ExitCode> {
    let chosen = ctx.databases.only(a.collection.as_deref())?;
    let several = chosen.entries().len() > 1;
    let mut rows = Vec::new();
    for (name, db) in chosen.entries() {
        let docs = async {
            let store = ctx.open_db(&db).await?;
            Ok::<_, anyhow::Error>(store.list_documents(a.filter.as_deref()).await?)
        }
        .await;
        let docs = match &name {
            Some(n) => docs.with_context(|| format!("collection {n}"))?,
            None => docs?,
        };
        rows.extend(docs.into_iter().map(|d| (name.clone(), d)));
    }
    let mut out = crate::errors::stdout();
    if a.json {
        if several {
            let list: Vec<serde_json::Value> = rows
                .iter()
                .map(|(name, d)| {
                    let mut v = serde_json::to_value(d).unwrap_or_default();
                    if let serde_json::Value::Object(m) = &mut v {
                        m.insert("collection".into(), name.clone().into());
                    }
                    v
                })
                .collect();
            serde_json::to_writer_pretty(&mut out, &list)?;
        } else {
            let docs: Vec<_> = rows.iter().map(|(_, d)| d).collect();
            serde_json::to_writer_pretty(&mut out, &docs)?;
        }
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    for (name, d) in rows {
        let from = name
            .filter(|_| several)
            .map(|n| format!("{n}  "))
            .unwrap_or_default();
        writeln!(
            out,
            "{from}{}  {}  {}",
            d.id,
            d.title.as_deref().unwrap_or("(untitled)"),
            d.uri.as_deref().unwrap_or("")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `groundwork tag create|list|delete`: database-level tags (the same tag on every table,
/// as haiku.rag's `tag` makes them), on the database as it is now.
pub(super) async fn tag(ctx: &CmdContext, cmd: super::args::TagCommand) -> Result<ExitCode> {
    use super::args::TagCommand;
    if ctx.at.is_some() {
        anyhow::bail!("--at reads the knowledge base at a tag; `tag` works on it as it is now");
    }
    let collection = match &cmd {
        TagCommand::Create { collection, .. }
        | TagCommand::List { collection, .. }
        | TagCommand::Delete { collection, .. } => collection.clone(),
    };
    let chosen = ctx.databases.only(collection.as_deref())?;
    let mut out = crate::errors::stdout();
    let mut listed = Vec::new();
    for (name, db) in chosen.entries() {
        let label = name.clone().unwrap_or_else(|| db.clone());
        let store = Store::open(&db)
            .await
            .with_context(|| format!("collection {label}"))?;
        match &cmd {
            TagCommand::Create { name: tag, .. } => {
                let versions = store.create_tag(tag).await?;
                writeln!(
                    out,
                    "tagged {label} '{tag}': {}",
                    describe_versions(&versions)
                )?;
            }
            TagCommand::Delete { name: tag, .. } => {
                store.delete_tag(tag).await?;
                writeln!(out, "deleted tag '{tag}' of {label}")?;
            }
            TagCommand::List { json, .. } => {
                let tags = store.tags().await?;
                if *json {
                    listed.push(serde_json::json!({
                        "collection": name,
                        "database": db,
                        "tags": tags.iter().map(|t| serde_json::json!({
                            "name": t.name,
                            "tables": t.tables,
                            "missing": t.missing,
                        })).collect::<Vec<_>>(),
                    }));
                    continue;
                }
                if tags.is_empty() {
                    writeln!(
                        out,
                        "{label}: no tags (`groundwork tag create NAME` makes one)"
                    )?;
                }
                for t in tags {
                    let partial = if t.complete() {
                        String::new()
                    } else {
                        format!(" (partial: missing on {})", t.missing.join(", "))
                    };
                    writeln!(
                        out,
                        "{label}\t{}\t{}{partial}",
                        t.name,
                        describe_versions(&t.tables)
                    )?;
                }
            }
        }
    }
    if let TagCommand::List { json: true, .. } = cmd {
        serde_json::to_writer_pretty(&mut out, &listed)?;
        writeln!(out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `documents 3, document_meta 4, …`.
fn describe_versions(v: &crate::store::versions::TableVersions) -> String {
    v.iter()
        .map(|(t, n)| format!("{t} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}
