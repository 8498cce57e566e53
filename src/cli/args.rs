//! The command line's shape: the clap types of `groundwork [--db [NAME=]PATH]... <command>`, the
//! global flags and each subcommand's arguments. Parsing only; nothing here runs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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

impl Cli {
    /// Whether the command answers and exits (one question, one search, one listing):
    /// not the workbench and not the batches (`ingest`, `eval`), which run long.
    pub fn ends_soon(&self) -> bool {
        matches!(
            self.command,
            Some(
                Command::Ask(_)
                    | Command::Search(_)
                    | Command::Info(_)
                    | Command::Delete(_)
                    | Command::List(_)
                    | Command::Inspect(_)
                    | Command::Export(_)
                    | Command::Replay(_)
                    | Command::Tag(_)
                    | Command::Verify(_)
            )
        )
    }
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
    /// Database location (a directory, s3://, or gs://, az://, db:// with the `cloud` feature).
    /// Repeat as NAME=PATH to open several named collections side by side.
    /// Default: [collections] of the config file, else $HAIKU_RAG_DB, else
    /// <data dir>/haiku.rag.lancedb.
    #[arg(long, global = true, value_name = "PATH|NAME=PATH")]
    pub db: Vec<String>,
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
    /// Read the knowledge base(s) as they were at this tag (`groundwork tag create`, or
    /// haiku.rag's `tag create`), version of the chunks table (the other tables as they
    /// were then) or time (`2026-12-01T10:00`, UTC), read-only: search, ask, list, info,
    /// open.
    #[arg(long, global = true, value_name = "TAG|VERSION|TIME")]
    pub at: Option<String>,
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
    /// Rerank API endpoint (POST URL/rerank: vLLM, llama.cpp --reranking, Cohere, Jina,
    /// Voyage), e.g. http://127.0.0.1:8000/v1 (env GROUNDWORK_RERANKER_URL; config
    /// `[search.reranker] url`). Search then reranks limit*10 fused candidates.
    #[arg(long, global = true, value_name = "URL")]
    pub reranker_url: Option<String>,
    /// Reranker model name (env GROUNDWORK_RERANKER_MODEL; config `[search.reranker] model`).
    #[arg(long, global = true, value_name = "NAME")]
    pub reranker_model: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Add or update documents (Markdown, text, HTML, PDF; folders are walked).
    Ingest(IngestArgs),
    /// Hybrid search (vector + BM25, fused by RRF; reranked when a reranker is configured).
    Search(SearchArgs),
    /// Database path, embedder, counts and index status.
    Info(InfoArgs),
    /// Delete a document by id or URI.
    Delete(DeleteArgs),
    /// List documents.
    List(ListArgs),
    /// Show the model requests of a saved session, the stored history beside what was sent.
    Inspect(InspectArgs),
    /// Write a saved session as JSON (`messages` + `state`, with Groundwork's section:
    /// what pydantic-ai and haiku.rag read) or as Markdown; the session is only read.
    Export(ExportArgs),
    /// Ask one question and print the answer (the session is saved after a successful run).
    Ask(AskArgs),
    /// Run a question set through arms (ask's flags) headless and report them side by side.
    Eval(EvalArgs),
    /// Check each sentence of the answers that carries a citation marker against the
    /// passages it cites, with a judge model ([judge] in the config; default the session's
    /// model); the verdicts are saved with the session.
    Verify(VerifyArgs),
    /// Run one question of a saved session again with other settings (an arm's flags)
    /// and show both runs side by side; the session itself is never changed.
    Replay(ReplayArgs),
    /// Open a saved session in the workbench (Groundwork's or a haiku.rag host's; `demo`
    /// opens the scripted demo session), or review an experiment folder of `eval`.
    Open(OpenArgs),
    /// Name the knowledge base as it is now (a tag on every table, as haiku.rag's `tag`
    /// makes), list the tags, or delete one; `--at TAG` reads it as it was.
    #[command(subcommand)]
    Tag(TagCommand),
}

#[derive(Debug, Subcommand)]
pub enum TagCommand {
    /// Tag the current version of every table.
    Create {
        name: String,
        /// Only this collection (of those `--db NAME=PATH` or [collections] open).
        #[arg(long, value_name = "NAME")]
        collection: Option<String>,
    },
    /// List the tags, with the version each names per table.
    List {
        #[arg(long)]
        json: bool,
        /// Only this collection.
        #[arg(long, value_name = "NAME")]
        collection: Option<String>,
    },
    /// Delete a tag from every table.
    Delete {
        name: String,
        /// Only this collection.
        #[arg(long, value_name = "NAME")]
        collection: Option<String>,
    },
}

#[derive(Debug, Args, Default)]
pub struct OpenArgs {
    /// A session file, `demo`, or an experiment folder (`groundwork eval --out DIR`).
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
    #[command(flatten)]
    pub flags: AskFlags,
    /// Print answer, citations, ledger status and every request (raw and compacted) as JSON.
    #[arg(long)]
    pub json: bool,
}

/// How a question is composed: `ask`'s flags, which are also an `eval` arm's flags.
#[derive(Debug, Clone, Args, Default, PartialEq)]
pub struct AskFlags {
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
    /// Default number of results of a search the model makes (config `[search] limit`).
    #[arg(long, value_name = "N", value_parser = positive)]
    pub search_limit: Option<usize>,
    /// Searches allowed per question (config `[qa] max_searches`).
    #[arg(long, value_name = "N")]
    pub max_searches: Option<usize>,
    /// Program executions allowed per question (config `[analysis] max_executions`).
    #[arg(long, value_name = "N")]
    pub max_executions: Option<usize>,
}

impl AskFlags {
    /// What these flags change in a question's composition (the model flags, which are
    /// global, are added by [`ArmFlags::settings`]).
    pub fn settings(&self) -> crate::host::ask::Settings {
        crate::host::ask::Settings {
            capabilities: (!self.capabilities.is_empty()).then(|| {
                self.capabilities
                    .iter()
                    .map(|c| c.as_str().to_string())
                    .collect()
            }),
            eager: self.eager.then_some(true),
            compaction: self.no_compaction.then_some(false),
            policy: self.no_policy.then_some(false),
            search_limit: self.search_limit,
            max_searches: self.max_searches,
            max_executions: self.max_executions,
            ..Default::default()
        }
    }
}

fn positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A question's number as the conversation shows it: 1, 2, …
fn question_number(s: &str) -> Result<usize, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if n >= 1 => Ok(n as usize),
        Ok(_) => Err("questions are numbered from 1".into()),
        Err(_) => Err("not a question number (1, 2, …)".into()),
    }
}

/// An `eval` arm's flags, `NAME: FLAGS`: `ask`'s own flags and the model flags, parsed
/// by the same definitions.
#[derive(Debug, Parser)]
#[command(name = "arm", no_binary_name = true, disable_version_flag = true)]
pub struct ArmFlags {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(flatten)]
    pub ask: AskFlags,
}

impl ArmFlags {
    /// What an arm's flags change: `ask`'s, and the model flags.
    pub fn settings(&self) -> crate::host::ask::Settings {
        let g = &self.global;
        crate::host::ask::Settings {
            model: g.model.clone(),
            model_url: g.model_url.clone(),
            timeout: g.timeout,
            max_tokens: g.max_tokens,
            ..self.ask.settings()
        }
    }
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Questions: JSONL (`question`, optional `id`, `label`, `expect`, or `turns`) or
    /// plain text, one question a line. Optional with --experiment naming `questions`.
    pub questions: Option<PathBuf>,
    /// An arm, `NAME: FLAGS` with `ask`'s flags, e.g. `--arm 'base: --no-policy'` (repeatable).
    #[arg(long = "arm", value_name = "NAME: FLAGS")]
    pub arms: Vec<String>,
    /// A TOML experiment file: `questions`, `out`, `jobs` and its `[[arm]]` tables.
    #[arg(long, value_name = "FILE")]
    pub experiment: Option<PathBuf>,
    /// The experiment's folder: sessions, results.jsonl, report.md, report.json.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Questions run at once (default 2, or `jobs` in the experiment file).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub jobs: Option<u64>,
    /// Stop at the first failed question instead of recording it and going on.
    #[arg(long)]
    pub fail_fast: bool,
    /// Run again the questions whose recorded result is `failed`.
    #[arg(long)]
    pub retry_failed: bool,
    /// Conditions every arm must meet, e.g. `grounded>=0.9,violations==0,unsupported==0`
    /// (rates 0 to 1: grounded, ungrounded, missing, failed; counts: violations,
    /// redirects, declarations, grounded_unanswerable, answerable_grounded and the review
    /// marks; claims_not_supported with --verify). The run exits with 3 naming each arm
    /// and figure that falls short.
    #[arg(long, value_name = "CONDITIONS")]
    pub gate: Option<String>,
    /// Check each answer's cited sentences against the passages they cite with a judge
    /// model ([judge] in the config, else [model]); the report gains "citations not
    /// supported" per arm. Only questions run now are checked.
    #[arg(long)]
    pub verify: bool,
    /// The judge's endpoint (with --verify; default: [judge] base_url, else [model]'s).
    #[arg(long, value_name = "URL", requires = "verify")]
    pub judge_url: Option<String>,
    /// The judge model (with --verify; default: [judge] model, else [model]'s).
    #[arg(long, value_name = "NAME", requires = "verify")]
    pub judge_model: Option<String>,
    /// Write the questions marked in experiment DIR as a question set on standard output
    /// (each with its marks and notes as `expect`) and run nothing.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["questions", "arms", "experiment", "out", "gate"])]
    pub from_reviews: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A session file.
    pub session: PathBuf,
    /// The question to run again (1-based, as the conversation numbers them).
    #[arg(long, value_name = "N", value_parser = question_number, allow_negative_numbers = true)]
    pub question: usize,
    /// What to change: `ask`'s flags, as an `eval` arm takes them, e.g. `--no-policy`,
    /// `--no-compaction`, `--capability analysis`, `--eager`, `--model M`.
    #[arg(
        long = "arm",
        value_name = "FLAGS",
        default_value = "",
        allow_hyphen_values = true
    )]
    pub arm: String,
    /// Which knowledge base the replay searches: `recorded` (default), the versions of its
    /// tables the question read, as the session recorded them (read-only); `now`, as it is
    /// now.
    #[arg(long, value_name = "recorded|now", default_value = "recorded", value_parser = ["recorded", "now"])]
    pub kb: String,
    /// Save the replay as a new session: at PATH, or beside the session
    /// (`S.replay-N-CHANGES.json`) without one. Without --save nothing is written.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "")]
    pub save: Option<String>,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// A session file (Groundwork's, or one recorded by a haiku.rag host), or haiku.rag's
    /// web-app session store (`sessions.db`: its sessions are listed; `sessions.db#ID`
    /// names one).
    pub session: PathBuf,
    /// Show this request (1-based) in detail.
    #[arg(long)]
    pub request: Option<usize>,
    /// Print the requests (raw and compacted messages, tools, instructions, tokens) as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// A session file (Groundwork's, or one recorded by a haiku.rag host: its checks are
    /// saved in the SQLite file beside it).
    pub session: PathBuf,
    /// Check only this question (1-based, as the conversation numbers them).
    #[arg(long, value_name = "N")]
    pub question: Option<usize>,
    /// The judge's endpoint (default: [judge] base_url, else [model]'s).
    #[arg(long, value_name = "URL")]
    pub judge_url: Option<String>,
    /// The judge model (default: [judge] model, else the model the session was run with).
    #[arg(long, value_name = "NAME")]
    pub judge_model: Option<String>,
    /// Print the checks as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A session file (Groundwork's, or one recorded by a haiku.rag host).
    pub session: PathBuf,
    /// `json` (the session: pydantic-ai's messages, the state, Groundwork's section) or
    /// `md` (the conversation with its sources, as the workbench exports it).
    #[arg(long, default_value = "json", value_parser = ["json", "md"])]
    pub format: String,
    /// Write to this file (atomically) instead of standard output.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// Files or folders.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// The collection to add to, when several are open.
    #[arg(long, value_name = "NAME")]
    pub collection: Option<String>,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    pub query: String,
    /// Number of results (default: config search.limit, 5).
    #[arg(long, short, value_parser = positive)]
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
    /// Only this collection (of those `--db NAME=PATH` or [collections] open).
    #[arg(long, value_name = "NAME")]
    pub collection: Option<String>,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    #[arg(long)]
    pub json: bool,
    /// Only this collection (of those `--db NAME=PATH` or [collections] open).
    #[arg(long, value_name = "NAME")]
    pub collection: Option<String>,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// Document id or URI.
    pub document: String,
    /// The collection to delete from, when several are open.
    #[arg(long, value_name = "NAME")]
    pub collection: Option<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[arg(long)]
    pub filter: Option<String>,
    #[arg(long)]
    pub json: bool,
    /// Only this collection (of those `--db NAME=PATH` or [collections] open).
    #[arg(long, value_name = "NAME")]
    pub collection: Option<String>,
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

    /// The commands that answer and exit keep the memory they free; the workbench and
    /// the batches give it back as mimalloc does.
    #[test]
    fn only_commands_that_end_soon_keep_freed_memory() {
        let soon = |args: &[&str]| {
            let mut all = vec!["groundwork"];
            all.extend_from_slice(args);
            Cli::try_parse_from(all).unwrap().ends_soon()
        };
        assert!(soon(&["ask", "q?"]));
        assert!(soon(&["search", "lamp"]));
        assert!(soon(&["inspect", "s.json"]));
        assert!(soon(&["list"]));
        assert!(!soon(&[]), "the workbench");
        assert!(!soon(&["open", "s.json"]));
        assert!(!soon(&["ingest", "docs"]));
    }

    /// `ask`'s configuration flags reach the configuration its agent is composed with.
    #[test]
    fn ask_overrides_the_search_limit_and_budgets() {
        let cli = Cli::try_parse_from([
            "groundwork",
            "ask",
            "q?",
            "--search-limit",
            "2",
            "--max-searches",
            "1",
            "--no-policy",
        ])
        .unwrap();
        let Some(Command::Ask(a)) = cli.command else {
            panic!("ask")
        };
        let settings = a.flags.settings();
        let config = settings.apply(crate::config::AppConfig::default());
        assert_eq!((config.search.limit, config.qa.max_searches), (2, 1));
        assert_eq!(
            config.analysis.max_executions,
            crate::config::AppConfig::default().analysis.max_executions
        );
        let options = settings.options().unwrap();
        assert!(!options.policy && options.compaction);
        assert!(Cli::try_parse_from(["groundwork", "ask", "q?", "--search-limit", "0"]).is_err());
        assert!(Cli::try_parse_from(["groundwork", "search", "lamp", "--limit", "0"]).is_err());
        let e = Cli::try_parse_from(["groundwork", "replay", "s.json", "--question", "-1"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("questions are numbered from 1"), "{e}");
    }
}
