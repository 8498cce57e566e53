//! The RAG capability (`haiku-rag`, SPEC §1, §3, §5, §6, §7): `rag_search` and
//! `rag_cite` over one knowledge base, with per-run budgets, notices and tool
//! withdrawal. The question ledger lives in the pure core ([`super::state`]); what
//! RAG shares with analysis (budget, search, pictures) lives in [`super::kit`].

use std::collections::HashSet;
use std::sync::Arc;

use anyhow::bail;
use serde_json::{Map, Value, json};

use crate::capabilities::evidence::{
    EvidenceSource, StoreHandle, StoreSource, budget_notice, path_source,
};
use crate::capabilities::kit::{self, RequestBudget, search};
use crate::capabilities::state::{EvidenceState, RAG_NAMESPACE, StateKind};
use crate::config::AppConfig;
use crate::engine::capability::{
    BoxFuture, Capability, CapabilityRun, ForRunContext, RunContext, RunOutcomeView, ToolDef,
    ToolOutcome,
};
use crate::store::Store;
use crate::store::search::SearchMode;
use crate::template::fill;

/// The exact `from_spec` parameter names (SPEC §13).
pub use crate::capabilities::evidence::SPEC_PARAMETERS;
pub use crate::capabilities::kit::{
    CITATION_GRACE_REQUESTS, picture_content, py_list, search_picture_label,
};

/// Fixed id of the RAG capability.
pub const CAPABILITY_ID: &str = "haiku-rag";
/// The search tool.
pub const SEARCH_TOOL: &str = "rag_search";
/// The cite tool.
pub const CITE_TOOL: &str = "rag_cite";
/// Default model requests per run before the tools are withdrawn.
pub const DEFAULT_REQUEST_LIMIT: usize = 20;
/// The fixed part of the search-limit failure.
pub const SEARCH_LIMIT_MARKER: &str = "Search limit reached";

/// The tools whose returns are evidence (compaction rewrites them).
pub const EVIDENCE_TOOLS: &[&str] = &[SEARCH_TOOL];

macro_rules! text {
    ($name:ident, $file:literal) => {
        fn $name() -> &'static str {
            include_str!(concat!("../../assets/prompts/capabilities/", $file)).trim_end()
        }
    };
}

text!(rag_md, "../rag.md");
text!(description_text, "rag_description.txt");
text!(search_description, "rag_search_description.txt");
text!(
    search_sources_description,
    "rag_search_sources_description.txt"
);
text!(unknown_sources_text, "rag_unknown_sources.txt");
text!(cite_description, "rag_cite_description.txt");

/// The packaged instructions, with the domain preamble first when set (SPEC §1.1).
pub fn instructions_text(config: &AppConfig) -> String {
    kit::with_preamble(config, rag_md())
}

/// The RAG capability as registered on an agent.
#[derive(Debug, Clone)]
pub struct RagCapability {
    config: Arc<AppConfig>,
    /// One unnamed source, or several named collections.
    sources: Vec<(Option<String>, StoreSource)>,
    db_path: String,
    defer_loading: bool,
    request_limit: Option<usize>,
    vision: bool,
}

impl RagCapability {
    /// Over a store the host opened (borrowed, never closed). Eager, request limit 20,
    /// vision from `config.qa.model.vision`.
    pub fn new(store: Arc<Store>, config: AppConfig) -> Self {
        RagCapability {
            db_path: store.uri().to_string(),
            vision: config.qa.model.vision,
            config: Arc::new(config),
            sources: vec![(None, StoreSource::Shared(store))],
            defer_loading: false,
            request_limit: Some(DEFAULT_REQUEST_LIMIT),
        }
    }

    /// Over a database path opened read-only on first need in each run.
    pub fn open_path(db_path: impl Into<String>, config: AppConfig) -> Self {
        let db_path = db_path.into();
        RagCapability {
            vision: config.qa.model.vision,
            sources: vec![(None, path_source(db_path.clone(), config.clone()))],
            config: Arc::new(config),
            db_path,
            defer_loading: false,
            request_limit: Some(DEFAULT_REQUEST_LIMIT),
        }
    }

    /// Over several named stores the host opened (collections). `rag_search` gains a
    /// `sources` argument to pick collections, results and citations carry their
    /// collection's name, and the cite fallback looks in every collection.
    pub fn with_collections(
        collections: Vec<(String, Arc<Store>)>,
        config: AppConfig,
    ) -> anyhow::Result<Self> {
        let mut names = HashSet::new();
        for (name, _) in &collections {
            if name.trim().is_empty() || !names.insert(name.clone()) {
                bail!("collection names must be non-empty and unique, got '{name}' twice or empty");
            }
        }
        let Some((_, first)) = collections.first() else {
            bail!("a RAG capability needs at least one collection");
        };
        let mut cap = RagCapability::new(first.clone(), config);
        if collections.len() > 1 {
            cap.sources = collections
                .into_iter()
                .map(|(name, store)| (Some(name), StoreSource::Shared(store)))
                .collect();
        }
        Ok(cap)
    }

    /// The collection names (empty for a single unnamed store).
    pub fn collection_names(&self) -> Vec<String> {
        self.sources.iter().filter_map(|(n, _)| n.clone()).collect()
    }

    /// `RAGCapability.from_spec` (SPEC §13): the arguments `db_path`, `config`,
    /// `defer_loading` (default true), `request_limit` (default 20, `null` = none) and
    /// `vision` (default `config.qa.model.vision`). Anything else is refused.
    pub fn from_spec(args: &Value) -> anyhow::Result<Self> {
        let spec = crate::capabilities::evidence::EvidenceSpec::parse(
            "RAGCapability",
            args,
            DEFAULT_REQUEST_LIMIT,
        )?;
        Ok(RagCapability::open_path(spec.db_path, spec.config)
            .defer_loading(spec.defer_loading)
            .request_limit(spec.request_limit)
            .vision(spec.vision))
    }

    /// Starts collapsed behind `load_capability` when true.
    pub fn defer_loading(mut self, defer: bool) -> Self {
        self.defer_loading = defer;
        self
    }

    /// Model requests per run before the tools are withdrawn (`None` = no limit).
    pub fn request_limit(mut self, limit: Option<usize>) -> Self {
        self.request_limit = limit;
        self
    }

    /// Overrides the vision gate (`None` keeps `config.qa.model.vision`).
    pub fn vision(mut self, vision: Option<bool>) -> Self {
        if let Some(v) = vision {
            self.vision = v;
        }
        self
    }

    /// The database location.
    pub fn db_path(&self) -> &str {
        &self.db_path
    }

    /// The configured request limit.
    pub fn configured_request_limit(&self) -> Option<usize> {
        self.request_limit
    }

    /// The resolved vision gate.
    pub fn vision_enabled(&self) -> bool {
        self.vision
    }

    /// The configuration.
    pub fn config(&self) -> &AppConfig {
        &self.config
    }
}

impl Capability for RagCapability {
    fn id(&self) -> &str {
        CAPABILITY_ID
    }

    fn description(&self) -> Option<String> {
        Some(description_text().to_string())
    }

    fn defer_loading(&self) -> bool {
        self.defer_loading
    }

    fn for_run(&self, ctx: &mut ForRunContext<'_>) -> anyhow::Result<Box<dyn CapabilityRun>> {
        let (state, state_carried) = kit::settle_state(ctx, StateKind::Rag, RAG_NAMESPACE)?;
        Ok(Box::new(RagRun {
            config: self.config.clone(),
            stores: self
                .sources
                .iter()
                .map(|(name, source)| (name.clone(), StoreHandle::new(source.clone())))
                .collect(),
            vision: self.vision,
            state,
            state_carried,
            search_count: 0,
            budget: RequestBudget::new(self.request_limit),
            epoch: 0,
        }))
    }
}

/// The per-run copy.
#[derive(Debug)]
pub struct RagRun {
    config: Arc<AppConfig>,
    stores: Vec<(Option<String>, StoreHandle)>,
    vision: bool,
    state: EvidenceState,
    state_carried: bool,
    search_count: usize,
    budget: RequestBudget,
    epoch: u64,
}

impl RagRun {
    /// The settled state.
    pub fn state(&self) -> &EvidenceState {
        &self.state
    }

    /// Searches made in this run.
    pub fn search_count(&self) -> usize {
        self.search_count
    }

    /// Counted model requests in this run.
    pub fn request_count(&self) -> usize {
        self.budget.request_count()
    }

    /// Grace requests used after the request limit.
    pub fn grace_requests_used(&self) -> usize {
        self.budget.grace_requests_used()
    }

    /// Removes this capability's withdrawn tools (SPEC §7.2); others are untouched.
    pub fn withdraw(&self, tools: &mut Vec<ToolDef>) {
        self.budget.withdraw(CAPABILITY_ID, CITE_TOOL, tools);
    }

    fn max_searches(&self) -> usize {
        self.config.qa.max_searches
    }

    /// The budget notice for the coming request (SPEC §7.3).
    pub fn notice(&self) -> Option<String> {
        if let Some(notice) = self.budget.notice(RAG_NAMESPACE, CITE_TOOL) {
            return Some(notice);
        }
        if self.search_count >= self.max_searches() {
            // Only the search tool can be spent, and it is RAG's only evidence tool.
            return Some(budget_notice(RAG_NAMESPACE, &[SEARCH_TOOL], &[], CITE_TOOL));
        }
        None
    }

    async fn search(&mut self, args: &Map<String, Value>) -> anyhow::Result<ToolOutcome> {
        self.search_count += 1;
        if let Some(refused) = search::over_budget(self.search_count, self.max_searches()) {
            return Ok(refused);
        }
        let (query, limit) = search::parse_args(SEARCH_TOOL, args, self.config.search.limit)?;
        let selected = match self.select_sources(args.get("sources")) {
            Ok(selected) => selected,
            Err(message) => return Ok(ToolOutcome::Retry(message)),
        };
        let mut results = Vec::new();
        let mut reports = Vec::new();
        for (name, handle) in selected {
            let filter = match (&name, self.state.collection_filters.is_empty()) {
                // A per-collection filter: collections it does not name are left out.
                (Some(n), false) => match self.state.collection_filters.get(n) {
                    Some(sql) => Some(sql.clone()),
                    None => continue,
                },
                _ => self.state.document_filter.clone(),
            };
            let store = handle.get().await?;
            let (found, rerank) = store
                .search_reported(&query, Some(limit), filter.as_deref(), SearchMode::Hybrid)
                .await?;
            reports.extend(rerank);
            let mut found = store.expand(found).await?;
            crate::timing::mark("search: expanded");
            for r in &mut found {
                r.collection = name.clone();
            }
            results.extend(found);
        }
        if self.stores.len() > 1 {
            // Stable: ties keep collection order.
            results.sort_by(|a, b| b.score.total_cmp(&a.score));
            results.truncate(limit);
        }
        search::finish_reported(
            &mut self.state,
            &query,
            &results,
            self.epoch,
            self.vision,
            reports,
        )
    }

    /// The stores a search covers: every collection unless `sources` names some.
    fn select_sources(
        &self,
        sources: Option<&Value>,
    ) -> Result<Vec<(Option<String>, StoreHandle)>, String> {
        let wanted: Vec<String> = match sources {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            Some(Value::String(s)) => vec![s.clone()],
            _ => Vec::new(),
        };
        if wanted.is_empty() || self.stores.len() == 1 {
            return Ok(self.stores.clone());
        }
        let names: Vec<String> = self.stores.iter().filter_map(|(n, _)| n.clone()).collect();
        let unknown: Vec<String> = wanted
            .iter()
            .filter(|w| !names.contains(w))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Err(fill(
                unknown_sources_text(),
                &[
                    ("unknown", &py_list(&unknown)),
                    ("names", &names.join(", ")),
                ],
            ));
        }
        Ok(self
            .stores
            .iter()
            .filter(|(n, _)| n.as_ref().is_some_and(|n| wanted.contains(n)))
            .cloned()
            .collect())
    }

    async fn cite(&mut self, args: &Map<String, Value>) -> anyhow::Result<ToolOutcome> {
        crate::capabilities::cite::cite(
            &mut self.state,
            RAG_NAMESPACE,
            self.epoch,
            &self.stores,
            args,
        )
        .await
    }
}

fn search_schema(collections: &[String]) -> Value {
    let mut schema = search::schema();
    if collections.len() > 1 {
        schema["properties"]["sources"] = json!({
            "anyOf": [
                {"type": "array", "items": {"type": "string", "enum": collections}},
                {"type": "null"}
            ],
            "default": null,
            "description": fill(search_sources_description(), &[("names", &collections.join(", "))])
        });
    }
    schema
}

impl EvidenceSource for RagRun {
    fn namespace(&self) -> &str {
        RAG_NAMESPACE
    }

    fn evidence_state(&self) -> &EvidenceState {
        &self.state
    }

    fn evidence_tools(&self) -> &[&'static str] {
        EVIDENCE_TOOLS
    }

    fn cite_available(&self) -> bool {
        !self.budget.grace_expired()
    }

    fn state_carried(&self) -> bool {
        self.state_carried
    }

    fn picture_store(&self, chunk_id: &str) -> StoreHandle {
        let collection = self
            .state
            .citation_index
            .get(chunk_id)
            .and_then(|c| c.collection.as_deref());
        self.stores
            .iter()
            .find(|(name, _)| name.is_some() && name.as_deref() == collection)
            .unwrap_or(&self.stores[0])
            .1
            .clone()
    }
}

impl CapabilityRun for RagRun {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn instructions(&self, _ctx: &RunContext) -> Option<String> {
        Some(instructions_text(&self.config))
    }

    fn tools(&self, _ctx: &RunContext) -> Vec<ToolDef> {
        vec![
            ToolDef::function(
                SEARCH_TOOL,
                search_description(),
                search_schema(
                    &self
                        .stores
                        .iter()
                        .filter_map(|(n, _)| n.clone())
                        .collect::<Vec<_>>(),
                ),
            ),
            ToolDef::function(
                CITE_TOOL,
                cite_description(),
                crate::capabilities::cite::schema(),
            ),
        ]
    }

    fn prepare_tools(&mut self, _ctx: &RunContext, tools: &mut Vec<ToolDef>) {
        self.withdraw(tools);
    }

    fn before_model_request<'a>(
        &'a mut self,
        ctx: &'a mut RunContext,
    ) -> BoxFuture<'a, anyhow::Result<Option<String>>> {
        Box::pin(async move {
            self.epoch = ctx.epoch() as u64;
            let notice = self.notice();
            self.budget
                .count_request(&ctx.messages, &[SEARCH_TOOL, CITE_TOOL]);
            Ok(notice)
        })
    }

    fn call_tool<'a>(
        &'a mut self,
        name: &'a str,
        args: Map<String, Value>,
        ctx: &'a mut RunContext,
    ) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let outcome = match name {
                SEARCH_TOOL => self.search(&args).await,
                CITE_TOOL => self.cite(&args).await,
                other => Ok(ToolOutcome::Failed(format!("unknown RAG tool {other}"))),
            };
            kit::write_back(ctx, RAG_NAMESPACE, &self.state);
            outcome.unwrap_or_else(|e| ToolOutcome::Failed(format!("{name} failed: {e:#}")))
        })
    }

    fn after_run<'a>(
        &'a mut self,
        ctx: &'a mut RunContext,
        result: &'a RunOutcomeView<'a>,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            if !result.is_deferred() {
                self.state.evidence.end_question();
            }
            kit::write_back(ctx, RAG_NAMESPACE, &self.state);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_list_repr_and_notices() {
        assert_eq!(
            py_list(&["6.43".into(), "6.51.2".into()]),
            "['6.43', '6.51.2']"
        );
        assert_eq!(py_list(&[]), "[]");
        let config = AppConfig::default();
        let mut run = RagRun {
            config: Arc::new(config),
            stores: vec![(
                None,
                StoreHandle::new(path_source("/nonexistent", AppConfig::default())),
            )],
            vision: false,
            state: EvidenceState::empty(StateKind::Rag),
            state_carried: false,
            search_count: 0,
            budget: RequestBudget::new(Some(2)),
            epoch: 0,
        };
        assert_eq!(run.notice(), None);
        run.search_count = 5;
        let spent = run.notice().unwrap();
        assert!(spent.contains("spent its budget for rag_search") && spent.contains("rag_cite"));
        // Scenario 45: at the limit only the cite tool stays and the notice names it.
        run.budget.requests = 2;
        let limit = run.notice().unwrap();
        assert!(limit.contains("has reached its request limit") && limit.contains("rag_cite"));
        let mut tools = vec![
            ToolDef {
                capability_id: Some(CAPABILITY_ID.into()),
                ..ToolDef::function(SEARCH_TOOL, "", json!({}))
            },
            ToolDef {
                capability_id: Some(CAPABILITY_ID.into()),
                ..ToolDef::function(CITE_TOOL, "", json!({}))
            },
            ToolDef::function("host_tool", "", json!({})),
        ];
        run.withdraw(&mut tools);
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, [CITE_TOOL, "host_tool"]);
        run.budget.grace_used = 2;
        assert!(!run.cite_available());
        let expired = run.notice().unwrap();
        assert!(expired.contains("no longer available") && !expired.contains("rag_cite"));
        run.withdraw(&mut tools);
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["host_tool"]);
    }
}
