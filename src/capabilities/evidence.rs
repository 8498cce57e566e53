//! What the compactor and the policy need from an evidence capability's run copy
//! (SPEC §8.1, §8.7, §10.1), and how they find them in the run's registry.
//!
//! Discovery reads the per-run copies through [`RunContext::capability`] and
//! downcasts them. An evidence capability adds its run type to [`as_evidence`].

use std::sync::Arc;

use anyhow::Context as _;
use tokio::sync::OnceCell;

use crate::capabilities::state::EvidenceState;
use crate::config::AppConfig;
use crate::engine::capability::{CapabilityRun, RunContext};
use crate::store::Store;

/// A discovered evidence capability's per-run view.
pub trait EvidenceSource: Send + Sync {
    /// The state namespace (`rag`, `analysis`), also the refs' `capability`.
    fn namespace(&self) -> &str;
    /// The settled state of this run.
    fn evidence_state(&self) -> &EvidenceState;
    /// The evidence tools (the cite tool is not one).
    fn evidence_tools(&self) -> &[&'static str];
    /// Whether the cite tool is still offered (`grace_requests_used < 2`).
    fn cite_available(&self) -> bool;
    /// Whether `for_run` found a record with a question.
    fn state_carried(&self) -> bool;
    /// The capability's own connection holding a cited chunk's pictures (its
    /// collection's store when the capability covers several).
    fn picture_store(&self, chunk_id: &str) -> StoreHandle;
}

/// Every evidence capability of the run, sorted by namespace.
pub fn discover(ctx: &RunContext) -> Vec<&dyn EvidenceSource> {
    let mut found: Vec<&dyn EvidenceSource> = ctx
        .capability_ids()
        .filter_map(|id| ctx.capability(id))
        .filter_map(as_evidence)
        .collect();
    found.sort_by(|a, b| a.namespace().cmp(b.namespace()));
    found
}

/// The evidence view of a run copy, if it is an evidence capability.
pub fn as_evidence(run: &dyn CapabilityRun) -> Option<&dyn EvidenceSource> {
    let any = run.as_any();
    if let Some(rag) = any.downcast_ref::<crate::capabilities::rag::RagRun>() {
        return Some(rag);
    }
    if let Some(analysis) = any.downcast_ref::<crate::capabilities::analysis::AnalysisRun>() {
        return Some(analysis);
    }
    None
}

/// Where a capability's store comes from.
#[derive(Clone)]
pub enum StoreSource {
    /// A store the host opened and lends; reused, never closed by the capability.
    Shared(Arc<Store>),
    /// A database opened read-only on first need, once per run.
    Path {
        /// The database URI.
        uri: String,
        /// The configuration (search settings).
        config: Box<AppConfig>,
    },
}

impl std::fmt::Debug for StoreSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreSource::Shared(s) => write!(f, "Shared({})", s.uri()),
            StoreSource::Path { uri, .. } => write!(f, "Path({uri})"),
        }
    }
}

/// A per-run, lazily opened connection. Cloning shares the same connection.
#[derive(Clone, Debug)]
pub struct StoreHandle {
    source: StoreSource,
    cell: Arc<OnceCell<Arc<Store>>>,
}

impl StoreHandle {
    /// A handle that opens (or borrows) the store on first use.
    pub fn new(source: StoreSource) -> Self {
        let cell = Arc::new(OnceCell::new());
        if let StoreSource::Shared(store) = &source {
            let _ = cell.set(store.clone());
        }
        StoreHandle { source, cell }
    }

    /// The same for every clone of this handle, and different for handles that coexist
    /// apart (each opens its own connection).
    pub fn identity(&self) -> usize {
        Arc::as_ptr(&self.cell) as *const () as usize
    }

    /// The store, opening it on first use.
    pub async fn get(&self) -> anyhow::Result<Arc<Store>> {
        let store = self
            .cell
            .get_or_try_init(|| async {
                match &self.source {
                    StoreSource::Shared(store) => Ok(store.clone()),
                    StoreSource::Path { uri, config } => open_store(uri, config).await,
                }
            })
            .await?;
        Ok(store.clone())
    }

    /// Whether the handle has a connection open.
    pub fn is_open(&self) -> bool {
        self.cell.initialized()
    }
}

async fn open_store(uri: &str, config: &AppConfig) -> anyhow::Result<Arc<Store>> {
    let mut store = Store::open(uri)
        .await
        .with_context(|| format!("cannot open the knowledge base at {uri}"))?;
    store.set_search_config(config.search.clone());
    let env = crate::paths::process_env();
    let embedder = crate::embed::build(store.embedder_spec(), &env)?;
    store.set_embedder(embedder)?;
    Ok(Arc::new(store))
}

/// Resolves a database location (SPEC §13): the argument, then `$HAIKU_RAG_DB`, then
/// `<data dir>/haiku.rag.lancedb`.
pub fn resolve_db_path(db_path: Option<&str>, config: &AppConfig) -> String {
    let env = crate::paths::process_env();
    crate::paths::resolve_db(db_path, config.storage.data_dir.as_deref(), &env)
}

/// For tests and hosts: a path-backed source.
pub fn path_source(uri: impl Into<String>, config: AppConfig) -> StoreSource {
    StoreSource::Path {
        uri: uri.into(),
        config: Box::new(config),
    }
}

/// The "spent its budget" notice (SPEC §7.3 case 3): `spent` and `remaining` are
/// sorted and joined with `", "`; with no remaining evidence tool the model is told
/// to cite and answer.
pub fn budget_notice(ns: &str, spent: &[&str], remaining: &[&str], cite: &str) -> String {
    let join = |tools: &[&str]| {
        let mut tools = tools.to_vec();
        tools.sort_unstable();
        tools.join(", ")
    };
    let template = if remaining.is_empty() {
        include_str!("../../assets/prompts/capabilities/notice_budget_spent.txt")
    } else {
        include_str!("../../assets/prompts/capabilities/notice_budget_remaining.txt")
    };
    crate::template::fill(
        template.trim_end(),
        &[
            ("ns", ns),
            ("spent", &join(spent)),
            ("remaining", &join(remaining)),
            ("cite", cite),
        ],
    )
}

/// The exact `from_spec` parameter names of both evidence capabilities (SPEC §13).
pub const SPEC_PARAMETERS: &[&str] = &[
    "config",
    "db_path",
    "defer_loading",
    "request_limit",
    "vision",
];

/// The `from_spec` arguments of an evidence capability (SPEC §13): exactly `db_path`,
/// `config`, `defer_loading` (default true), `request_limit` (default per capability,
/// `null` = none) and `vision` (default: the configured one).
pub struct EvidenceSpec {
    pub config: crate::config::AppConfig,
    /// Resolved against the config's data dir.
    pub db_path: String,
    pub defer_loading: bool,
    pub request_limit: Option<usize>,
    pub vision: Option<bool>,
}

impl EvidenceSpec {
    /// Parses `args` for the capability class `class` (named in errors).
    pub fn parse(
        class: &str,
        args: &serde_json::Value,
        default_request_limit: usize,
    ) -> anyhow::Result<Self> {
        use anyhow::{Context as _, bail};
        use serde_json::Value;
        let empty = serde_json::Map::new();
        let args = match args {
            Value::Null => &empty,
            Value::Object(map) => map,
            other => bail!("{class} arguments must be a mapping, found {other}"),
        };
        let names = SPEC_PARAMETERS;
        if let Some(key) = args.keys().find(|k| !names.contains(&k.as_str())) {
            bail!(
                "{class} has no parameter '{key}' (expected one of {})",
                names.join(", ")
            );
        }
        let config: crate::config::AppConfig = match args.get("config") {
            None | Some(Value::Null) => Default::default(),
            Some(v) => serde_json::from_value(v.clone())
                .with_context(|| format!("invalid {class} config"))?,
        };
        let db_path = match args.get("db_path") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => bail!("db_path must be a string, found {other}"),
        };
        let db_path = resolve_db_path(db_path.as_deref(), &config);
        let defer_loading = match args.get("defer_loading") {
            None | Some(Value::Null) => true,
            Some(v) => v.as_bool().context("defer_loading must be a boolean")?,
        };
        let request_limit = match args.get("request_limit") {
            None => Some(default_request_limit),
            Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .context("request_limit must be a non-negative integer or null")?
                    as usize,
            ),
        };
        let vision = match args.get("vision") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_bool().context("vision must be a boolean")?),
        };
        Ok(EvidenceSpec {
            config,
            db_path,
            defer_loading,
            request_limit,
            vision,
        })
    }
}
