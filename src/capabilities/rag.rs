//! The RAG capability (`haiku-rag`, SPEC §1, §3, §5, §6, §7): `rag_search` and
//! `rag_cite` over one knowledge base, with per-run budgets, notices and tool
//! withdrawal. The question ledger lives in the pure core ([`super::state`]).

use std::collections::HashSet;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::capabilities::evidence::{
    EvidenceSource, StoreHandle, StoreSource, budget_notice, path_source,
};
use crate::capabilities::state::{
    EvidenceState, RAG_NAMESPACE, StateKind, awaits_the_model, settle_for_run,
};
use crate::config::AppConfig;
use crate::engine::capability::{
    BoxFuture, Capability, CapabilityRun, ForRunContext, RunContext, RunOutcomeView, ToolDef,
    ToolOutcome, ToolOutput,
};
use crate::engine::messages::{BinaryContent, ModelMessage, UserContent};
use crate::engine::prompts::fill;
use crate::store::format::{NO_RESULTS, format_for_agent, join_results};
use crate::store::{SearchResult, Store};

/// Fixed id of the RAG capability.
pub const CAPABILITY_ID: &str = "haiku-rag";
/// The search tool.
pub const SEARCH_TOOL: &str = "rag_search";
/// The cite tool.
pub const CITE_TOOL: &str = "rag_cite";
/// Default model requests per run before the tools are withdrawn.
pub const DEFAULT_REQUEST_LIMIT: usize = 20;
/// Requests the cite tool stays offered once the request limit is reached.
pub const CITATION_GRACE_REQUESTS: usize = 2;
/// The fixed part of the search-limit failure.
pub const SEARCH_LIMIT_MARKER: &str = "Search limit reached";

const EVIDENCE_TOOLS: &[&str] = &[SEARCH_TOOL];

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
text!(search_query_description, "rag_search_query_description.txt");
text!(search_limit_description, "rag_search_limit_description.txt");
text!(
    search_sources_description,
    "rag_search_sources_description.txt"
);
text!(unknown_sources_text, "rag_unknown_sources.txt");
text!(cite_description, "rag_cite_description.txt");
text!(search_limit_text, "search_limit.txt");
text!(search_picture_label_text, "search_picture_label.txt");
text!(notice_grace_text, "notice_grace_expired.txt");
text!(notice_limit_text, "notice_request_limit.txt");

/// The packaged instructions, with the domain preamble first when set (SPEC §1.1).
pub fn instructions_text(config: &AppConfig) -> String {
    let preamble = config.prompts.domain_preamble.trim();
    if preamble.is_empty() {
        rag_md().to_string()
    } else {
        format!("{}\n\n{}", config.prompts.domain_preamble, rag_md())
    }
}

/// Python's `repr` of a list of strings: `['a', 'b']`.
pub fn py_list(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|s| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")))
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// The label before a retrieved picture (SPEC §5.6).
pub fn search_picture_label(i: usize, n: usize, chunk_id: &str, self_ref: &str) -> String {
    fill(
        search_picture_label_text(),
        &[
            ("i", &i.to_string()),
            ("n", &n.to_string()),
            ("chunk_id", chunk_id),
            ("self_ref", self_ref),
        ],
    )
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

/// The exact `from_spec` parameter names (SPEC §13).
pub const SPEC_PARAMETERS: &[&str] = &[
    "config",
    "db_path",
    "defer_loading",
    "request_limit",
    "vision",
];

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
        let awaits = awaits_the_model(ctx.history);
        let (state, state_carried) = settle_for_run(
            StateKind::Rag,
            ctx.state.get(RAG_NAMESPACE),
            ctx.history.len(),
            awaits,
        )?;
        ctx.state
            .insert(RAG_NAMESPACE.to_string(), state.to_value());
        Ok(Box::new(RagRun {
            config: self.config.clone(),
            stores: self
                .sources
                .iter()
                .map(|(name, source)| (name.clone(), StoreHandle::new(source.clone())))
                .collect(),
            request_limit: self.request_limit,
            vision: self.vision,
            state,
            state_carried,
            search_count: 0,
            request_count: 0,
            grace_requests_used: 0,
            epoch: 0,
        }))
    }
}

/// The per-run copy.
#[derive(Debug)]
pub struct RagRun {
    config: Arc<AppConfig>,
    stores: Vec<(Option<String>, StoreHandle)>,
    request_limit: Option<usize>,
    vision: bool,
    state: EvidenceState,
    state_carried: bool,
    search_count: usize,
    request_count: usize,
    grace_requests_used: usize,
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
        self.request_count
    }

    /// Grace requests used after the request limit.
    pub fn grace_requests_used(&self) -> usize {
        self.grace_requests_used
    }

    fn limit_reached(&self) -> bool {
        self.request_limit
            .is_some_and(|limit| self.request_count >= limit)
    }

    fn grace_expired(&self) -> bool {
        self.request_limit.is_some() && self.grace_requests_used >= CITATION_GRACE_REQUESTS
    }

    /// Removes this capability's withdrawn tools (SPEC §7.2); others are untouched.
    pub fn withdraw(&self, tools: &mut Vec<ToolDef>) {
        let own = |t: &ToolDef| t.capability_id.as_deref() == Some(CAPABILITY_ID);
        if self.grace_expired() {
            tools.retain(|t| !own(t));
        } else if self.limit_reached() {
            tools.retain(|t| !own(t) || t.name == CITE_TOOL);
        }
    }

    fn max_searches(&self) -> usize {
        self.config.qa.max_searches
    }

    /// The budget notice for the coming request (SPEC §7.3).
    pub fn notice(&self) -> Option<String> {
        let ns = RAG_NAMESPACE;
        if self.grace_expired() {
            return Some(fill(notice_grace_text(), &[("ns", ns)]));
        }
        if self.limit_reached() {
            return Some(fill(
                notice_limit_text(),
                &[("ns", ns), ("cite", CITE_TOOL)],
            ));
        }
        if self.search_count >= self.max_searches() {
            // Only the search tool can be spent, and it is RAG's only evidence tool.
            return Some(budget_notice(ns, &[SEARCH_TOOL], &[], CITE_TOOL));
        }
        None
    }

    fn write_back(&self, ctx: &mut RunContext) {
        ctx.state
            .insert(RAG_NAMESPACE.to_string(), self.state.to_value());
    }

    async fn search(&mut self, args: &Map<String, Value>) -> anyhow::Result<ToolOutcome> {
        self.search_count += 1;
        if self.search_count > self.max_searches() {
            return Ok(ToolOutcome::Failed(search_limit_text().to_string()));
        }
        let query = args
            .get("query")
            .and_then(Value::as_str)
            .context("rag_search needs a string `query`")?
            .to_string();
        let limit = match args.get("limit") {
            None | Some(Value::Null) => self.config.search.limit,
            Some(v) => v
                .as_u64()
                .map(|n| n as usize)
                .context("`limit` must be a non-negative integer")?,
        };
        let selected = match self.select_sources(args.get("sources")) {
            Ok(selected) => selected,
            Err(message) => return Ok(ToolOutcome::Retry(message)),
        };
        let filter = self.state.document_filter.clone();
        let mut results = Vec::new();
        for (name, handle) in selected {
            let store = handle.get().await?;
            let found = store.search(&query, Some(limit), filter.as_deref()).await?;
            let mut found = store.expand(found).await?;
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
        let total = results.len();
        let text = if results.is_empty() {
            NO_RESULTS.to_string()
        } else {
            let blocks: Vec<String> = results
                .iter()
                .enumerate()
                .map(|(i, r)| format_for_agent(r, Some(i + 1), Some(total)))
                .collect();
            join_results(&blocks)
        };
        let bucket = self.state.searches.get_or_insert_with(&query, Vec::new);
        let mut seen: HashSet<String> = bucket.iter().map(|r| r.id().to_string()).collect();
        for r in &results {
            if seen.insert(r.id().to_string()) {
                bucket.push(r.clone());
            }
        }
        self.state.evidence.note_evidence(self.epoch)?;
        let mut output = ToolOutput::text(text);
        if self.vision {
            let pictures = picture_content(&results);
            if !pictures.is_empty() {
                output = output.with_extra(pictures);
            }
        }
        Ok(ToolOutcome::Ok(output))
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

/// The label/image pairs for the results' decodable pictures (SPEC §5.6).
pub fn picture_content(results: &[SearchResult]) -> Vec<UserContent> {
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut kept: Vec<(String, String, Vec<u8>)> = Vec::new();
    for r in results {
        let Some(images) = &r.image_data else {
            continue;
        };
        let doc = r.document_id.clone().unwrap_or_default();
        for (self_ref, data) in images {
            if seen.contains(&(doc.clone(), self_ref.clone())) {
                continue;
            }
            let Some(encoded) = data.as_str() else {
                continue;
            };
            let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
                continue;
            };
            if image::load_from_memory(&bytes).is_err() {
                continue;
            }
            seen.insert((doc.clone(), self_ref.clone()));
            kept.push((r.id().to_string(), self_ref.clone(), bytes));
        }
    }
    let total = kept.len();
    let mut content = Vec::with_capacity(total * 2);
    for (i, (chunk_id, self_ref, bytes)) in kept.into_iter().enumerate() {
        content.push(UserContent::Text(search_picture_label(
            i + 1,
            total,
            &chunk_id,
            &self_ref,
        )));
        let mut image = BinaryContent::from_bytes(&bytes, "image/png");
        image.identifier = Some(self_ref);
        content.push(UserContent::Binary(image));
    }
    content
}

/// Whether the newest response in `messages` called one of `tools`.
fn latest_response_called(messages: &[ModelMessage], tools: &[&str]) -> bool {
    messages
        .iter()
        .rev()
        .find_map(ModelMessage::as_response)
        .is_some_and(|r| {
            r.tool_calls()
                .any(|c| tools.contains(&c.tool_name.as_str()))
        })
}

fn search_schema(collections: &[String]) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": search_query_description()},
            "limit": {
                "anyOf": [{"type": "integer"}, {"type": "null"}],
                "default": null,
                "description": search_limit_description()
            }
        },
        "required": ["query"],
        "additionalProperties": false
    });
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
        !self.grace_expired()
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
            if self.limit_reached()
                && latest_response_called(&ctx.messages, &[SEARCH_TOOL, CITE_TOOL])
            {
                self.grace_requests_used += 1;
            }
            self.request_count += 1;
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
            self.write_back(ctx);
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
            self.write_back(ctx);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png() -> Vec<u8> {
        let img = image::RgbImage::from_pixel(1, 1, image::Rgb([0, 0, 0]));
        let mut out = std::io::Cursor::new(Vec::new());
        image::DynamicImage::ImageRgb8(img)
            .write_to(&mut out, image::ImageFormat::Png)
            .unwrap();
        out.into_inner()
    }

    fn result(chunk: &str, doc: &str, pictures: &[(&str, Vec<u8>)]) -> SearchResult {
        let images: Map<String, Value> = pictures
            .iter()
            .map(|(r, b)| {
                (
                    r.to_string(),
                    Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
                )
            })
            .collect();
        serde_json::from_value(json!({
            "content": "c", "score": 1.0, "chunk_id": chunk, "document_id": doc,
            "image_data": images,
        }))
        .unwrap()
    }

    #[test]
    fn scenario_31_one_pair_per_document_picture() {
        let results = vec![
            result("first", "doc-1", &[("#/pictures/0", png())]),
            result("second", "doc-1", &[("#/pictures/0", png())]),
        ];
        let content = picture_content(&results);
        assert_eq!(content.len(), 2);
        assert_eq!(
            content[0],
            UserContent::Text(
                "Page image 1 of 1, retrieved from the knowledge base for search result [first] \
                 (#/pictures/0). Not provided by the user. [haiku.rag/retrieved-image]"
                    .into()
            )
        );
        match &content[1] {
            UserContent::Binary(b) => {
                assert_eq!(b.media_type, "image/png");
                assert_eq!(b.identifier.as_deref(), Some("#/pictures/0"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn undecodable_pictures_are_skipped_and_other_documents_kept() {
        let results = vec![
            result("a", "doc-1", &[("#/pictures/0", b"not an image".to_vec())]),
            result("b", "doc-2", &[("#/pictures/0", png())]),
            result("c", "doc-1", &[("#/pictures/1", png())]),
        ];
        let content = picture_content(&results);
        let labels: Vec<&str> = content
            .iter()
            .filter_map(|c| match c {
                UserContent::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(labels.len(), 2);
        assert!(labels[0].starts_with("Page image 1 of 2") && labels[0].contains("[b]"));
        assert!(labels[1].starts_with("Page image 2 of 2") && labels[1].contains("[c]"));
    }

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
            request_limit: Some(2),
            vision: false,
            state: EvidenceState::empty(StateKind::Rag),
            state_carried: false,
            search_count: 0,
            request_count: 0,
            grace_requests_used: 0,
            epoch: 0,
        };
        assert_eq!(run.notice(), None);
        run.search_count = 5;
        let spent = run.notice().unwrap();
        assert!(spent.contains("spent its budget for rag_search") && spent.contains("rag_cite"));
        // Scenario 45: at the limit only the cite tool stays and the notice names it.
        run.request_count = 2;
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
        run.grace_requests_used = 2;
        assert!(!run.cite_available());
        let expired = run.notice().unwrap();
        assert!(expired.contains("no longer available") && !expired.contains("rag_cite"));
        run.withdraw(&mut tools);
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["host_tool"]);
    }
}
