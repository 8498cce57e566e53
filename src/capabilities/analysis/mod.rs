//! The analysis capability (`haiku-rag-analysis`, SPEC §1, §5–§7, §9):
//! `analysis_search`, `analysis_execute_code` and `analysis_cite` over one knowledge
//! base. Code runs in a sandbox worker process ([`crate::sandbox`]), one per run,
//! started on the first execution and stopped when the run ends. What analysis shares
//! with RAG (budget, search, pictures) lives in [`super::kit`]; running code in the
//! sandbox lives in `execute`.

mod execute;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::capabilities::evidence::{
    EvidenceSource, StoreHandle, StoreSource, budget_notice, path_source,
};
use crate::capabilities::kit::{self, RequestBudget, search};
use crate::capabilities::state::{ANALYSIS_NAMESPACE, EvidenceState, StateKind};
use crate::config::AppConfig;
use crate::engine::capability::{
    BoxFuture, Capability, CapabilityRun, ForRunContext, RunContext, RunOutcomeView, ToolDef,
    ToolOutcome,
};
use crate::sandbox::host::Sandbox;
use crate::sandbox::vfs::Corpus;
use crate::store::search::SearchMode;
use execute::execute_schema;

pub use crate::capabilities::kit::CITATION_GRACE_REQUESTS;
pub use execute::{failure_text, restarted_note};

/// Fixed id of the analysis capability.
pub const CAPABILITY_ID: &str = "haiku-rag-analysis";
/// The search tool.
pub const SEARCH_TOOL: &str = "analysis_search";
/// The code tool.
pub const EXECUTE_TOOL: &str = "analysis_execute_code";
/// The cite tool.
pub const CITE_TOOL: &str = "analysis_cite";
/// Default model requests per run before the tools are withdrawn.
pub const DEFAULT_REQUEST_LIMIT: usize = 30;
/// The fixed part of the execution-limit failure.
pub const EXECUTION_LIMIT_MARKER: &str = "Code-execution limit reached";
/// What a successful execution that printed nothing returns.
pub const NO_OUTPUT: &str = "No output.";
/// Python recursion depth allowed in the sandbox.
pub const MAX_RECURSION: u64 = 200;

/// The tools whose returns are evidence (compaction rewrites them).
pub const EVIDENCE_TOOLS: &[&str] = &[SEARCH_TOOL, EXECUTE_TOOL];

macro_rules! text {
    ($name:ident, $file:literal) => {
        fn $name() -> &'static str {
            include_str!(concat!("../../../assets/prompts/capabilities/", $file)).trim_end()
        }
    };
}

text!(analysis_md, "../analysis.md");
text!(description_text, "analysis_description.txt");
text!(search_description, "analysis_search_description.txt");
text!(execute_description, "analysis_execute_code_description.txt");
text!(cite_description, "analysis_cite_description.txt");

/// The packaged instructions, with the domain preamble first when set (SPEC §1.1).
pub fn instructions_text(config: &AppConfig) -> String {
    kit::with_preamble(config, analysis_md())
}

/// The analysis capability as registered on an agent.
#[derive(Debug, Clone)]
pub struct AnalysisCapability {
    config: Arc<AppConfig>,
    source: StoreSource,
    db_path: String,
    defer_loading: bool,
    request_limit: Option<usize>,
    vision: bool,
    worker: Option<PathBuf>,
}

/// The exact `from_spec` parameter names (SPEC §13).
pub use crate::capabilities::evidence::SPEC_PARAMETERS;

fn default_vision(config: &AppConfig) -> bool {
    config
        .analysis
        .model
        .as_ref()
        .unwrap_or(&config.qa.model)
        .vision
}

impl AnalysisCapability {
    /// Over a store the host opened (borrowed, never closed). Eager, request limit 30,
    /// vision from `(analysis.model or qa.model).vision`.
    pub fn new(store: Arc<crate::store::Store>, config: AppConfig) -> Self {
        AnalysisCapability {
            db_path: store.uri().to_string(),
            vision: default_vision(&config),
            config: Arc::new(config),
            source: StoreSource::Shared(store),
            defer_loading: false,
            request_limit: Some(DEFAULT_REQUEST_LIMIT),
            worker: None,
        }
    }

    /// Over a database path opened read-only on first need in each run.
    pub fn open_path(db_path: impl Into<String>, config: AppConfig) -> Self {
        let db_path = db_path.into();
        AnalysisCapability {
            vision: default_vision(&config),
            source: path_source(db_path.clone(), config.clone()),
            config: Arc::new(config),
            db_path,
            defer_loading: false,
            request_limit: Some(DEFAULT_REQUEST_LIMIT),
            worker: None,
        }
    }

    /// `AnalysisCapability.from_spec` (SPEC §13): `db_path`, `config`, `defer_loading`
    /// (default true), `request_limit` (default 30, `null` = none) and `vision`.
    pub fn from_spec(args: &Value) -> anyhow::Result<Self> {
        let spec = crate::capabilities::evidence::EvidenceSpec::parse(
            "AnalysisCapability",
            args,
            DEFAULT_REQUEST_LIMIT,
        )?;
        Ok(AnalysisCapability::open_path(spec.db_path, spec.config)
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

    /// Overrides the vision gate (`None` keeps the configured one).
    pub fn vision(mut self, vision: Option<bool>) -> Self {
        if let Some(v) = vision {
            self.vision = v;
        }
        self
    }

    /// The sandbox worker executable (default: `$GROUNDWORK_SANDBOX_WORKER`, else
    /// this executable).
    pub fn worker(mut self, path: impl Into<PathBuf>) -> Self {
        self.worker = Some(path.into());
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

impl Capability for AnalysisCapability {
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
        let (state, state_carried) =
            kit::settle_state(ctx, StateKind::Analysis, ANALYSIS_NAMESPACE)?;
        Ok(Box::new(AnalysisRun {
            config: self.config.clone(),
            store: StoreHandle::new(self.source.clone()),
            vision: self.vision,
            worker: self.worker.clone(),
            state,
            state_carried,
            search_count: 0,
            execute_count: 0,
            budget: RequestBudget::new(self.request_limit),
            epoch: 0,
            sandbox: None,
            compute_used: Duration::ZERO,
        }))
    }
}

/// The per-run copy.
pub struct AnalysisRun {
    config: Arc<AppConfig>,
    store: StoreHandle,
    vision: bool,
    worker: Option<PathBuf>,
    state: EvidenceState,
    state_carried: bool,
    search_count: usize,
    execute_count: usize,
    budget: RequestBudget,
    epoch: u64,
    sandbox: Option<(Sandbox, Corpus)>,
    compute_used: Duration,
}

impl std::fmt::Debug for AnalysisRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnalysisRun")
            .field("search_count", &self.search_count)
            .field("execute_count", &self.execute_count)
            .field("request_count", &self.budget.request_count())
            .field("sandbox", &self.sandbox.as_ref().map(|(s, _)| s))
            .finish_non_exhaustive()
    }
}

impl AnalysisRun {
    /// The settled state.
    pub fn state(&self) -> &EvidenceState {
        &self.state
    }

    /// Searches made in this run.
    pub fn search_count(&self) -> usize {
        self.search_count
    }

    /// Executions attempted in this run.
    pub fn execute_count(&self) -> usize {
        self.execute_count
    }

    /// Counted model requests in this run.
    pub fn request_count(&self) -> usize {
        self.budget.request_count()
    }

    /// Grace requests used after the request limit.
    pub fn grace_requests_used(&self) -> usize {
        self.budget.grace_requests_used()
    }

    /// The sandbox worker's process id, while one runs.
    pub fn sandbox_pid(&self) -> Option<u32> {
        self.sandbox.as_ref().and_then(|(s, _)| s.pid())
    }

    /// Stops the sandbox worker, if any (run end).
    pub async fn close_sandbox(&mut self) {
        if let Some((sandbox, _)) = self.sandbox.take() {
            sandbox.close().await;
        }
    }

    /// Removes this capability's withdrawn tools (SPEC §7.2); others are untouched.
    pub fn withdraw(&self, tools: &mut Vec<ToolDef>) {
        self.budget.withdraw(CAPABILITY_ID, CITE_TOOL, tools);
    }

    fn max_searches(&self) -> usize {
        self.config.qa.max_searches
    }

    fn max_executions(&self) -> usize {
        self.config.analysis.max_executions
    }

    /// The budget notice for the coming request (SPEC §7.3).
    pub fn notice(&self) -> Option<String> {
        let ns = ANALYSIS_NAMESPACE;
        if let Some(notice) = self.budget.notice(ns, CITE_TOOL) {
            return Some(notice);
        }
        let mut spent = Vec::new();
        if self.search_count >= self.max_searches() {
            spent.push(SEARCH_TOOL);
        }
        if self.execute_count >= self.max_executions() {
            spent.push(EXECUTE_TOOL);
        }
        if spent.is_empty() {
            return None;
        }
        let remaining: Vec<&str> = EVIDENCE_TOOLS
            .iter()
            .copied()
            .filter(|t| !spent.contains(t))
            .collect();
        Some(budget_notice(ns, &spent, &remaining, CITE_TOOL))
    }

    async fn search(&mut self, args: &Map<String, Value>) -> anyhow::Result<ToolOutcome> {
        self.search_count += 1;
        if let Some(refused) = search::over_budget(self.search_count, self.max_searches()) {
            return Ok(refused);
        }
        let (query, limit) = search::parse_args(SEARCH_TOOL, args, self.config.search.limit)?;
        let store = self.store.get().await?;
        let filter = self.state.document_filter.clone();
        let (found, rerank) = store
            .search_reported(&query, Some(limit), filter.as_deref(), SearchMode::Hybrid)
            .await?;
        let results = store.expand(found).await?;
        let reports = rerank.into_iter().collect();
        search::finish_reported(
            &mut self.state,
            &query,
            &results,
            self.epoch,
            self.vision,
            reports,
        )
    }

    async fn cite(&mut self, args: &Map<String, Value>) -> anyhow::Result<ToolOutcome> {
        crate::capabilities::cite::cite(
            &mut self.state,
            ANALYSIS_NAMESPACE,
            self.epoch,
            std::slice::from_ref(&(None, self.store.clone())),
            args,
        )
        .await
    }
}

impl EvidenceSource for AnalysisRun {
    fn namespace(&self) -> &str {
        ANALYSIS_NAMESPACE
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

    fn picture_store(&self, _chunk_id: &str) -> StoreHandle {
        self.store.clone()
    }
}

impl CapabilityRun for AnalysisRun {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn instructions(&self, _ctx: &RunContext) -> Option<String> {
        Some(instructions_text(&self.config))
    }

    fn tools(&self, _ctx: &RunContext) -> Vec<ToolDef> {
        vec![
            ToolDef::function(SEARCH_TOOL, search_description(), search::schema()),
            ToolDef::function(EXECUTE_TOOL, execute_description(), execute_schema()),
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
                .count_request(&ctx.messages, &[SEARCH_TOOL, EXECUTE_TOOL, CITE_TOOL]);
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
                EXECUTE_TOOL => self.execute(&args).await,
                CITE_TOOL => self.cite(&args).await,
                other => Ok(ToolOutcome::Failed(format!(
                    "unknown analysis tool {other}"
                ))),
            };
            kit::write_back(ctx, ANALYSIS_NAMESPACE, &self.state);
            outcome.unwrap_or_else(|e| ToolOutcome::Failed(format!("{name} failed: {e:#}")))
        })
    }

    fn after_run<'a>(
        &'a mut self,
        ctx: &'a mut RunContext,
        result: &'a RunOutcomeView<'a>,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            self.close_sandbox().await;
            if !result.is_deferred() {
                self.state.evidence.end_question();
            }
            kit::write_back(ctx, ANALYSIS_NAMESPACE, &self.state);
            Ok(())
        })
    }

    fn on_run_error<'a>(
        &'a mut self,
        _ctx: &'a mut RunContext,
        _error: &'a str,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.close_sandbox().await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(config: AppConfig) -> AnalysisRun {
        AnalysisRun {
            config: Arc::new(config),
            store: StoreHandle::new(path_source("/nonexistent", AppConfig::default())),
            vision: false,
            worker: None,
            state: EvidenceState::empty(StateKind::Analysis),
            state_carried: false,
            search_count: 0,
            execute_count: 0,
            budget: RequestBudget::new(Some(2)),
            epoch: 0,
            sandbox: None,
            compute_used: Duration::ZERO,
        }
    }

    #[test]
    fn notices_name_spent_and_remaining_tools() {
        let mut r = run(AppConfig::default());
        assert_eq!(r.notice(), None);
        r.execute_count = 15;
        let n = r.notice().unwrap();
        assert!(
            n.contains("spent its budget for analysis_execute_code"),
            "{n}"
        );
        assert!(n.contains("analysis_search") && n.contains("analysis_cite"));
        r.search_count = 5;
        let n = r.notice().unwrap();
        assert!(
            n.contains("spent its budget for analysis_execute_code, analysis_search"),
            "{n}"
        );
        r.budget.requests = 2;
        let n = r.notice().unwrap();
        assert!(n.contains("analysis capability has reached its request limit"));
        r.budget.grace_used = 2;
        let n = r.notice().unwrap();
        assert!(n.contains("no longer available") && !n.contains("analysis_cite"));
    }

    #[tokio::test]
    async fn a_spent_session_budget_refuses_clearly_without_a_worker() {
        let mut config = AppConfig::default();
        config.analysis.code_timeout = 2.0;
        config.analysis.max_executions = 3;
        let mut r = run(config);
        // A worker killed by the watchdog costs its time limit plus the slack.
        r.compute_used = Duration::from_secs(7);
        let result = r.run_code("print(1)").await.unwrap();
        assert!(!result.success && !result.reset);
        assert!(
            result.stderr.contains("whole time budget of 6s"),
            "{}",
            result.stderr
        );
        assert!(!result.stderr.contains("0ns"), "{}", result.stderr);
        assert!(r.sandbox.is_none(), "no worker was started");
    }

    #[test]
    fn failure_text_adds_the_iteration_hint_only_for_file_loops() {
        let plain = failure_text("NameError: undefined", "partial");
        assert_eq!(plain, "NameError: undefined\n\nOutput: partial");
        let hinted = failure_text("TypeError: 'TextIOWrapper' object is not iterable", "");
        assert!(hinted.contains(".readlines()") && hinted.contains(r#".read().split("\n")"#));
        assert!(hinted.ends_with("\n\nOutput: "));
    }

    #[test]
    fn instructions_have_the_heading_once_after_the_preamble() {
        let mut config = AppConfig::default();
        assert!(instructions_text(&config).starts_with("# Analysis"));
        config.prompts.domain_preamble = "The corpus contains solar manuals.".into();
        let text = instructions_text(&config);
        assert!(text.starts_with("The corpus contains solar manuals.\n\n# Analysis"));
        assert_eq!(text.matches("# Analysis").count(), 1);
    }
}
