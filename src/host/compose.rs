//! Composing an agent for a question: the evidence capabilities the options choose
//! (RAG, analysis, deferred when several), evidence compaction and the citation policy,
//! over the host's preamble. Every face (the `ask` command, the workbench) gets its
//! agents here, so a question is composed the same way wherever it is asked.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::capabilities::analysis::AnalysisCapability;
use crate::capabilities::compaction::hook::EvidenceCompactionCapability;
use crate::capabilities::policy::CitationPolicyCapability;
use crate::capabilities::rag::RagCapability;
use crate::config::{AppConfig, ModelOverrides, TokenizerSetting};
use crate::engine::agent::Agent;
use crate::engine::capability::Capability;
use crate::engine::chat::ChatModel;
use crate::engine::tokens::{self, SharedCounter};
use crate::store::Store;

/// The host's own system preamble (SPEC §1.1 `AGENT_PREAMBLE`), in our words.
pub fn agent_preamble() -> &'static str {
    include_str!("../../assets/prompts/agent_preamble.md")
}

/// An evidence capability a question can register.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapabilityChoice {
    Rag,
    Analysis,
}

impl CapabilityChoice {
    /// The name the command line takes and the workbench shows.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Rag => "rag",
            Self::Analysis => "analysis",
        }
    }
}

impl std::str::FromStr for CapabilityChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "rag" => Ok(Self::Rag),
            "analysis" => Ok(Self::Analysis),
            other => Err(format!("unknown capability '{other}' (rag, analysis)")),
        }
    }
}

/// The names of the evidence capabilities `choices` registers (RAG when empty).
pub fn capability_names(choices: &[CapabilityChoice]) -> Vec<String> {
    if choices.is_empty() {
        return vec![CapabilityChoice::Rag.as_str().into()];
    }
    choices.iter().map(|c| c.as_str().to_string()).collect()
}

/// How a question's agent is composed.
#[derive(Debug, Clone)]
pub struct AskOptions {
    /// Evidence capabilities to register; empty means RAG.
    pub capabilities: Vec<CapabilityChoice>,
    /// Register them eagerly even when there are several (otherwise several are deferred).
    pub eager: bool,
    pub compaction: bool,
    pub policy: bool,
    /// The analysis sandbox worker executable (default: `$GROUNDWORK_SANDBOX_WORKER`,
    /// else this executable).
    pub sandbox_worker: Option<std::path::PathBuf>,
}

impl Default for AskOptions {
    fn default() -> Self {
        Self {
            capabilities: Vec::new(),
            eager: false,
            compaction: true,
            policy: true,
            sandbox_worker: None,
        }
    }
}

/// The evidence tools compaction rewrites for in a question composed with `opts`, in
/// its order ([`crate::capabilities::compaction::owned_tools`]); `None` when compaction
/// is off. Every registered evidence capability counts, loaded or not.
pub fn compacted_tools(opts: &AskOptions) -> Option<Vec<String>> {
    if !opts.compaction {
        return None;
    }
    let mut choices = opts.capabilities.clone();
    if choices.is_empty() {
        choices.push(CapabilityChoice::Rag);
    }
    let mut names: Vec<String> = choices
        .iter()
        .flat_map(|c| match c {
            CapabilityChoice::Rag => crate::capabilities::rag::EVIDENCE_TOOLS,
            CapabilityChoice::Analysis => crate::capabilities::analysis::EVIDENCE_TOOLS,
        })
        .map(|t| t.to_string())
        .collect();
    names.sort();
    names.dedup();
    Some(names)
}

/// What a question's composition may change: `ask`'s flags, an `eval` arm, a replay's
/// changes (one type for all three); `None` leaves the default (`ask`'s, the
/// configuration's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// `rag`, `analysis` (empty: rag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eager: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_url: Option<String>,
    /// The model's idle timeout in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_limit: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_searches: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_executions: Option<usize>,
}

impl Settings {
    /// These settings with every field `over` sets taking its place.
    pub fn overlay(self, over: Settings) -> Settings {
        Settings {
            capabilities: over.capabilities.or(self.capabilities),
            eager: over.eager.or(self.eager),
            compaction: over.compaction.or(self.compaction),
            policy: over.policy.or(self.policy),
            model: over.model.or(self.model),
            model_url: over.model_url.or(self.model_url),
            timeout: over.timeout.or(self.timeout),
            max_tokens: over.max_tokens.or(self.max_tokens),
            search_limit: over.search_limit.or(self.search_limit),
            max_searches: over.max_searches.or(self.max_searches),
            max_executions: over.max_executions.or(self.max_executions),
        }
    }

    /// The capabilities, checked.
    pub fn capability_choices(&self) -> Result<Vec<CapabilityChoice>, String> {
        self.capabilities
            .iter()
            .flatten()
            .map(|c| c.parse())
            .collect()
    }

    /// How the arm's agents are composed.
    pub fn options(&self) -> Result<AskOptions, String> {
        let d = AskOptions::default();
        Ok(AskOptions {
            capabilities: self.capability_choices()?,
            eager: self.eager.unwrap_or(d.eager),
            compaction: self.compaction.unwrap_or(d.compaction),
            policy: self.policy.unwrap_or(d.policy),
            sandbox_worker: None,
        })
    }

    /// `config` with the search limit and the budgets these settings override.
    pub fn apply(&self, mut config: AppConfig) -> AppConfig {
        if let Some(n) = self.search_limit {
            config.search.limit = n;
        }
        if let Some(n) = self.max_searches {
            config.qa.max_searches = n;
        }
        if let Some(n) = self.max_executions {
            config.analysis.max_executions = n;
        }
        config
    }

    /// The model settings the arm overrides, over `base` (the command line's).
    pub fn model_overrides(&self, base: &ModelOverrides) -> ModelOverrides {
        let mut m = base.clone();
        if self.model_url.is_some() {
            m.base_url = self.model_url.clone();
        }
        if self.model.is_some() {
            m.model = self.model.clone();
        }
        if self.timeout.is_some() {
            m.timeout_secs = self.timeout;
        }
        if self.max_tokens.is_some() {
            m.max_tokens = self.max_tokens;
        }
        m
    }

    /// The settings as `ask` flags, in a fixed order (the report shows them; a rerun
    /// compares them).
    pub fn describe(&self) -> String {
        let mut f: Vec<String> = Vec::new();
        for c in self.capabilities.iter().flatten() {
            f.push(format!("--capability {c}"));
        }
        if self.eager == Some(true) {
            f.push("--eager".into());
        }
        if self.compaction == Some(false) {
            f.push("--no-compaction".into());
        }
        if self.policy == Some(false) {
            f.push("--no-policy".into());
        }
        let mut value = |name: &str, v: Option<String>| {
            if let Some(v) = v {
                f.push(format!("--{name} {v}"));
            }
        };
        value("model", self.model.clone());
        value("model-url", self.model_url.clone());
        value("timeout", self.timeout.map(|v| v.to_string()));
        value("max-tokens", self.max_tokens.map(|v| v.to_string()));
        value("search-limit", self.search_limit.map(|v| v.to_string()));
        value("max-searches", self.max_searches.map(|v| v.to_string()));
        value("max-executions", self.max_executions.map(|v| v.to_string()));
        f.join(" ")
    }
}

/// Why no agent could be composed (one line, shown as it is).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ComposeError(pub String);

/// What agents are composed from: the model, the database and the configuration. Either
/// of the first two may be missing (the workbench opens a saved session without them);
/// then questions are refused with one line.
#[derive(Clone)]
pub struct Composer {
    pub model: Option<Arc<dyn ChatModel>>,
    pub store: Option<Arc<Store>>,
    /// Named collections searched side by side (RAG's `sources`); when there are two or
    /// more they replace `store` for RAG.
    pub collections: Vec<(String, Arc<Store>)>,
    pub config: AppConfig,
    /// How the requests' tokens are counted (default: by the model's name).
    pub counter: Option<SharedCounter>,
}

impl Composer {
    /// Every store its agents search, with its collection name (`None`: the one unnamed
    /// store).
    pub fn stores(&self) -> Vec<(Option<String>, Arc<Store>)> {
        if self.collections.is_empty() {
            return self.store.iter().map(|s| (None, s.clone())).collect();
        }
        self.collections
            .iter()
            .map(|(n, s)| (Some(n.clone()), s.clone()))
            .collect()
    }

    pub fn new(
        model: Option<Arc<dyn ChatModel>>,
        store: Option<Arc<Store>>,
        config: AppConfig,
    ) -> Self {
        Composer {
            model,
            store,
            collections: Vec::new(),
            config,
            counter: None,
        }
    }

    /// Searches these named collections side by side (the first also becomes `store`).
    pub fn with_collections(mut self, collections: Vec<(String, Arc<Store>)>) -> Self {
        if let Some((_, first)) = collections.first() {
            self.store = Some(first.clone());
        }
        self.collections = collections;
        self
    }

    /// Counts the requests' tokens with `counter` (see [`token_counter`]).
    pub fn with_counter(mut self, counter: Option<SharedCounter>) -> Self {
        self.counter = counter;
        self
    }

    /// The agent for a question with `opts`.
    pub fn agent(&self, opts: &AskOptions) -> Result<Agent, ComposeError> {
        let (Some(model), Some(store)) = (self.model.clone(), self.store.clone()) else {
            return Err(ComposeError("no model or database available".into()));
        };
        build_agent_over(
            model,
            store,
            &self.collections,
            &self.config,
            opts,
            self.counter.clone(),
        )
    }
}

/// The token counter for `model` under `[model] tokenizer`: the named tiktoken encoding,
/// the `tokenizer.json` file, or without a setting the model family's tiktoken encoding
/// (`gpt-4o` → o200k) or the characters / 4 estimate.
pub fn token_counter(
    model: &str,
    setting: Option<&TokenizerSetting>,
) -> Result<SharedCounter, ComposeError> {
    match setting {
        None => Ok(tokens::for_model(model)),
        Some(TokenizerSetting::Encoding(name)) => tokens::Tiktoken::named(name)
            .map(|t| Arc::new(tokens::Remembered::new(t)) as SharedCounter)
            .ok_or_else(|| ComposeError(format!("model.tokenizer: unknown encoding {name:?}"))),
        Some(TokenizerSetting::File(path)) => tokens::TokenizerJson::from_file(path)
            .map(|t| Arc::new(tokens::Remembered::new(t)) as SharedCounter)
            .map_err(|e| ComposeError(format!("model.tokenizer: {e}"))),
    }
}

/// Builds the agent for a question (its tokens counted by the model's name).
pub fn build_agent(
    model: Arc<dyn ChatModel>,
    store: Arc<Store>,
    config: &AppConfig,
    opts: &AskOptions,
) -> Result<Agent, ComposeError> {
    build_agent_over(model, store, &[], config, opts, None)
}

/// [`build_agent`] with RAG over `collections` when two or more are named.
fn build_agent_over(
    model: Arc<dyn ChatModel>,
    store: Arc<Store>,
    collections: &[(String, Arc<Store>)],
    config: &AppConfig,
    opts: &AskOptions,
    counter: Option<SharedCounter>,
) -> Result<Agent, ComposeError> {
    let several = collections.len() > 1;
    let mut choices = opts.capabilities.clone();
    if choices.is_empty() {
        choices.push(CapabilityChoice::Rag);
    }
    choices.dedup();
    let deferred = choices.len() > 1 && !opts.eager;
    let vision = driving_vision(config, &choices);
    let mut caps: Vec<Arc<dyn Capability>> = Vec::new();
    for c in &choices {
        match c {
            CapabilityChoice::Rag => {
                let rag = if several {
                    RagCapability::with_collections(collections.to_vec(), config.clone())
                        .map_err(|e| ComposeError(e.to_string()))?
                } else {
                    RagCapability::new(store.clone(), config.clone())
                };
                caps.push(Arc::new(rag.defer_loading(deferred).vision(Some(vision))))
            }
            CapabilityChoice::Analysis if several => {
                return Err(ComposeError(format!(
                    "the analysis capability reads one database, but {} collections are open \
                     ({}); open one, or ask with rag",
                    collections.len(),
                    collections
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            CapabilityChoice::Analysis => {
                let mut analysis = AnalysisCapability::new(store.clone(), config.clone())
                    .defer_loading(deferred)
                    .vision(Some(vision));
                if let Some(worker) = &opts.sandbox_worker {
                    analysis = analysis.worker(worker.clone());
                }
                caps.push(Arc::new(analysis))
            }
        }
    }
    if opts.compaction {
        caps.push(Arc::new(EvidenceCompactionCapability::new()));
    }
    if opts.policy {
        caps.push(Arc::new(CitationPolicyCapability::new()));
    }
    let mut builder = Agent::builder(model).instructions(agent_preamble());
    if let Some(c) = counter {
        builder = builder.token_counter(c);
    }
    for c in caps {
        builder = builder.capability(c);
    }
    builder.build().map_err(|e| ComposeError(e.to_string()))
}

/// The driving model's vision (haiku.rag's chat host): `analysis.model` (falling back
/// to `qa.model`) when Analysis is the only capability, `qa.model` otherwise. Every
/// capability of the agent follows it, since one model reads every tool result.
pub fn driving_vision(config: &AppConfig, choices: &[CapabilityChoice]) -> bool {
    if choices == [CapabilityChoice::Analysis] {
        config
            .analysis
            .model
            .as_ref()
            .unwrap_or(&config.qa.model)
            .vision
    } else {
        config.qa.model.vision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_refusals() {
        assert_eq!(capability_names(&[]), ["rag"]);
        assert_eq!(
            capability_names(&[CapabilityChoice::Analysis, CapabilityChoice::Rag]),
            ["analysis", "rag"]
        );
        assert_eq!("analysis".parse(), Ok(CapabilityChoice::Analysis));
        assert!("x".parse::<CapabilityChoice>().is_err());
        let refused = Composer::new(None, None, AppConfig::default())
            .agent(&AskOptions::default())
            .err();
        assert_eq!(
            refused,
            Some(ComposeError("no model or database available".into()))
        );
    }
}
