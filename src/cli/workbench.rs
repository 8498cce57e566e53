//! `groundwork` and `groundwork open SESSION`: setting up and starting the workbench —
//! the first-run demo database, the store and the model, the session to open, and what
//! the TUI shows about them.

use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::paths;

use super::args::{GlobalArgs, OpenArgs};
use super::context::{CmdContext, choose_model};
use super::ingest::ensure_demo_db;

/// Whether the database is the default one (no `--db`, no `[collections]`, no
/// `HAIKU_RAG_DB`).
fn is_default_db(ctx: &CmdContext) -> bool {
    !ctx.db_named
}

/// `groundwork` and `groundwork open SESSION`: the workbench TUI.
pub(super) async fn workbench(
    ctx: &CmdContext,
    global: &GlobalArgs,
    open: Option<OpenArgs>,
) -> Result<ExitCode> {
    use crate::session::Session;
    use crate::tui;
    if let Some(dir) = open.as_ref().map(|o| std::path::Path::new(&o.session))
        && dir.is_dir()
    {
        if dir.join("results.jsonl").exists() {
            return review(ctx, global, dir).await;
        }
        bail!("{} is a folder, not a session file", dir.display());
    }
    // Without a terminal, say so before any set-up (first-run ingest, model probing).
    tui::require_terminal()?;
    // Everything that can fail on bad configuration fails here, before raw mode.
    let config_path = ctx.config.path.clone().unwrap_or_default();
    let keymap = tui::keymap_from_config(&ctx.config.tui, &config_path)?;
    let theme = ctx.config.tui.theme;
    let open = open.unwrap_or_default();
    // The session named on the command line is read first: it says which knowledge
    // bases its questions ran against, and those are what it reopens.
    let explicit = if open.session.is_empty() {
        global.session.clone()
    } else if open.session == "demo" {
        None
    } else {
        Some(std::path::PathBuf::from(&open.session))
    };
    // A JSON session is read as it is and continued in the SQLite file beside it.
    let continued = explicit.as_deref().map(crate::session::continue_at);
    let read = continued.as_ref().and_then(|at| at.read.as_deref());
    let mut preloaded = match (&explicit, read) {
        (Some(_), Some(read)) => Some(Session::load(read)?),
        (Some(p), None) if !open.session.is_empty() => {
            bail!("session file {} does not exist", p.display())
        }
        _ => None,
    };
    let recorded = preloaded
        .as_ref()
        .map(|s| crate::session::knowledge::latest(&s.groundwork.extra))
        .unwrap_or_default();
    let reopened = match (&explicit, &preloaded) {
        (Some(p), Some(_)) => ctx.reopening(global, p, &recorded)?,
        _ => ctx.clone(),
    };
    let knowledge_base_note = (preloaded.is_some()
        && recorded.is_empty()
        && global.db.is_empty()
        && preloaded.as_ref().is_some_and(|s| !s.messages.is_empty()))
    .then(|| {
        format!(
            "this session does not say which knowledge base it ran against; searching {}",
            ctx.databases.describe()
        )
    });
    let ctx = &reopened;
    let fresh_demo = if is_default_db(ctx) {
        ensure_demo_db(ctx).await?
    } else {
        false
    };
    // Probing for a model (up to 400 ms) overlaps opening the store.
    let (opened, choice) = tokio::join!(ctx.open_collections(None), choose_model(ctx));
    let knowledge_bases = match &opened {
        Ok(o) => super::context::knowledge_bases_of(o).await,
        Err(_) => Vec::new(),
    };
    let choice = choice?;
    let counter = crate::host::compose::token_counter(
        &model_name(&choice),
        ctx.config.model.tokenizer.as_ref(),
    )?;
    let opened = match opened {
        Ok(s) => s,
        Err(e) if open.session.is_empty() => return Err(e),
        Err(e) => {
            // A saved session is inspectable without its database.
            crate::errors::say!("warning: {e:#}; the session opens without search");
            Vec::new()
        }
    };
    let mut store = None;
    let mut collections = Vec::new();
    for (name, s) in opened {
        let s = std::sync::Arc::new(s);
        match name {
            Some(n) => collections.push((n, s)),
            None => store = Some(s),
        }
    }
    if let Some((_, first)) = collections.first() {
        store = Some(first.clone());
    }
    let model: Option<std::sync::Arc<dyn crate::engine::chat::ChatModel>> = match choice.config() {
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
        match (continued.clone().map(|at| at.write), preloaded.take()) {
            (Some(p), Some(s)) => (s, Some(p)),
            (Some(p), None) => (Session::new(model_name(&choice)), Some(p)),
            (None, _) => (Session::new(model_name(&choice)), Some(new_path())),
        }
    };
    let capabilities = crate::host::compose::capability_names(&open.capabilities);
    let host = tui::app::HostInfo {
        knowledge_bases,
        knowledge_base_note,
        db: ctx.databases.describe(),
        collections: ctx.databases.names(),
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
    // The judge: [judge] over the workbench's endpoint, by default the session's model.
    let judge: Option<std::sync::Arc<dyn crate::engine::chat::ChatModel>> = match choice.config() {
        Some(c) => Some(std::sync::Arc::new(crate::model::OpenAiModel::new(
            ctx.config
                .judge
                .endpoint(c, None, None, session.groundwork.model.as_deref())?,
        )?)),
        None => None,
    };
    let mut app = tui::app::App::new(session, path, host)
        .with_keymap(keymap)
        .with_theme(theme);
    if let Some(note) = continued.and_then(|at| at.note) {
        app.notice = Some(note);
    }
    let mut services = tui::Services::new(
        store,
        model,
        ctx.config.app.clone(),
        open.capabilities.clone(),
        open.eager,
    )
    .with_collections(collections);
    services.counter = Some(counter);
    services.judge = judge;
    services.replay_changes = Some(super::replay::workbench_changes(
        ctx.env.clone(),
        super::context::model_overrides(global),
    ));
    tui::run(app, services).await?;
    Ok(ExitCode::SUCCESS)
}

/// `groundwork open DIR` on an experiment: its review table, read-only (no model; the
/// store, when it opens, serves the ledger's chunks and the page images).
async fn review(ctx: &CmdContext, global: &GlobalArgs, dir: &std::path::Path) -> Result<ExitCode> {
    use crate::tui;
    let table = crate::eval::ReviewTable::load(dir).map_err(|e| anyhow::anyhow!(e.0))?;
    tui::require_terminal()?;
    // The experiment's sessions say which knowledge base its questions ran against (the
    // first one that can be read speaks for the experiment): that is what is reopened.
    let first = table
        .rows
        .iter()
        .flat_map(|r| r.cells.iter())
        .filter_map(|c| c.session.as_ref())
        .find_map(|p| Some((p.clone(), crate::session::Session::load(p).ok()?)));
    let reopened = match &first {
        Some((path, session)) => ctx.reopening(
            global,
            path,
            &crate::session::knowledge::latest(&session.groundwork.extra),
        )?,
        None => ctx.clone(),
    };
    drop(first);
    let ctx = &reopened;
    let config_path = ctx.config.path.clone().unwrap_or_default();
    let keymap = tui::keymap_from_config(&ctx.config.tui, &config_path)?;
    let store = match ctx.open_store().await {
        Ok(s) => Some(std::sync::Arc::new(s)),
        Err(e) => {
            crate::errors::say!(
                "warning: {e:#}; the sessions open without their chunks and images"
            );
            None
        }
    };
    let host = tui::app::HostInfo {
        db: ctx.db.clone(),
        model: "none (reviewing)".into(),
        model_ready: false,
        model_help: "reviewing an experiment is read-only: no questions are asked".into(),
        capabilities: Vec::new(),
        max_searches: ctx.config.app.qa.max_searches,
        max_executions: ctx.config.app.analysis.max_executions,
        collections: Vec::new(),
        knowledge_bases: Vec::new(),
        knowledge_base_note: None,
    };
    let app = tui::app::App::new(crate::session::Session::new(String::new()), None, host)
        .with_keymap(keymap)
        .with_theme(ctx.config.tui.theme)
        .with_review(table);
    let services = tui::Services::new(store, None, ctx.config.app.clone(), Vec::new(), false);
    tui::run(app, services).await?;
    Ok(ExitCode::SUCCESS)
}

fn model_name(choice: &crate::engine::discover::ModelChoice) -> String {
    choice.config().map(|c| c.model.clone()).unwrap_or_default()
}
