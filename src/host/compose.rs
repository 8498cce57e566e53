//! Composing an agent for a question: the evidence capabilities the options choose
//! (RAG, analysis, deferred when several), evidence compaction and the citation policy,
//! over the host's preamble. Every face (the `ask` command, the workbench) gets its
//! agents here, so a question is composed the same way wherever it is asked.

use std::sync::Arc;

use crate::capabilities::analysis::AnalysisCapability;
use crate::capabilities::compaction::hook::EvidenceCompactionCapability;
use crate::capabilities::policy::CitationPolicyCapability;
use crate::capabilities::rag::RagCapability;
use crate::config::{AppConfig, TokenizerSetting};
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

/// Configuration a question may override (an `ask` flag, an `eval` arm): the search
/// limit and the budgets.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConfigOverrides {
    /// `[search] limit`: results of a search that names no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_limit: Option<usize>,
    /// `[qa] max_searches`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_searches: Option<usize>,
    /// `[analysis] max_executions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_executions: Option<usize>,
}

impl ConfigOverrides {
    /// `config` with these overrides.
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
