//! The conversation and the citation ledger as data, derived from a session's committed
//! history and state. The TUI renders these; `export` writes them as Markdown or JSON.
//!
//! A question starts at a request whose user prompt is not a citation redirect; its
//! identity is that message's index in the history (SPEC §0.2: the message count before
//! the question). Everything up to the next question belongs to it.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::capabilities::state::{
    self, CapabilityEvidenceRecord, Citation, EvidenceState, StateKind,
};
use crate::capabilities::{analysis, rag};

/// The citation verdict of a question; re-exported so the screen reads it from the host.
pub use crate::capabilities::state::CitationStatus;
use crate::engine::messages::{
    ModelMessage, ModelRequestPart, ModelResponsePart, UserContent, UserContentValue,
};

/// The tag that marks the policy's redirect message (SPEC §10).
pub use crate::capabilities::policy::REDIRECT_TAG;

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Still running (live runs only).
    Running,
    /// Returned successfully.
    Ok,
    /// Returned a failure, or asked the model to retry.
    Failed,
}

/// One tool call of a question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolStep {
    pub call_id: String,
    pub name: String,
    /// One line: the query, the first line of code, the chunk ids, or the arguments.
    pub summary: String,
    pub status: StepStatus,
    /// The full arguments as sent.
    pub args: String,
}

/// A citation as the conversation shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CitationView {
    /// Display number, continuing across the conversation.
    pub index: i64,
    /// `rag` or `analysis`.
    pub capability: String,
    pub chunk_id: String,
    pub document_id: String,
    /// Title, else URI.
    pub source: String,
    pub document_uri: String,
    pub pages: Vec<i64>,
    pub headings: Vec<String>,
    pub content: String,
    pub picture_refs: Vec<String>,
    pub collection: Option<String>,
}

impl CitationView {
    fn from_citation(capability: &str, c: &Citation) -> Self {
        CitationView {
            index: c.index.unwrap_or(0),
            capability: capability.to_string(),
            chunk_id: c.chunk_id.clone(),
            document_id: c.document_id.clone(),
            source: c
                .document_title
                .clone()
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| c.document_uri.clone()),
            document_uri: c.document_uri.clone(),
            pages: c.page_numbers.clone(),
            headings: c.headings.clone().unwrap_or_default(),
            content: c.content.clone(),
            picture_refs: c.picture_refs.clone(),
            collection: c.collection.clone(),
        }
    }

    /// `[n] Source (p.1, 2, 3...)`, as haiku.rag titles a citation.
    pub fn title(&self) -> String {
        let mut t = format!("[{}] {}", self.index, self.source);
        if !self.pages.is_empty() {
            let shown: Vec<String> = self.pages.iter().take(3).map(|p| p.to_string()).collect();
            let more = if self.pages.len() > 3 { "..." } else { "" };
            t.push_str(&format!(" (p.{}{more})", shown.join(", ")));
        }
        t
    }
}

/// One question and everything that answered it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Turn {
    /// The question's identity (its message index).
    pub question: u64,
    /// The prompt text (images as `[Image #N]`).
    pub prompt: String,
    /// Tool calls in order.
    pub steps: Vec<ToolStep>,
    /// The final answer (the last response's text).
    pub answer: String,
    /// Cited chunks, by display number.
    pub citations: Vec<CitationView>,
    /// The last successful analysis program.
    pub program: Option<String>,
    /// Whether the policy redirected this question.
    pub redirected: bool,
    /// Model requests made for this question.
    pub requests: usize,
    /// Chunks its searches returned: (capability, chunk id, source line).
    pub retrieved: Vec<(String, String, Option<String>)>,
    /// Whether the question's last model answer was cut off at the token limit
    /// (finish reason `length`).
    pub cut_off: bool,
}

impl Turn {
    pub fn new(question: u64, prompt: String) -> Self {
        Turn {
            question,
            prompt,
            steps: Vec::new(),
            answer: String::new(),
            citations: Vec::new(),
            program: None,
            redirected: false,
            requests: 0,
            retrieved: Vec::new(),
            cut_off: false,
        }
    }
}

/// A retrieved or cited chunk in the ledger.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LedgerChunk {
    pub capability: String,
    pub chunk_id: String,
    /// Display number when cited.
    pub index: Option<i64>,
    pub document_id: Option<String>,
    /// Title or URI when known.
    pub document: Option<String>,
    pub pages: Vec<i64>,
    pub content: Option<String>,
    pub picture_refs: Vec<String>,
}

/// One row of the citation ledger: one question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LedgerRow {
    pub question: u64,
    pub prompt: String,
    pub status: CitationStatus,
    pub redirected: bool,
    pub violation: bool,
    pub cited: Vec<LedgerChunk>,
    /// Retrieved for this question but not cited.
    pub uncited: Vec<LedgerChunk>,
    pub searches: usize,
    pub executions: usize,
    /// The answer was cut off at the token limit.
    pub cut_off: bool,
}

/// The whole conversation.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Transcript {
    pub turns: Vec<Turn>,
    pub ledger: Vec<LedgerRow>,
}

/// Whether a user prompt is the policy's redirect.
pub fn is_redirect(text: &str) -> bool {
    text.contains(REDIRECT_TAG)
}

/// The text of a user prompt, images as `[Image #N]`.
pub fn prompt_text(content: &UserContentValue) -> String {
    match content {
        UserContentValue::Text(t) => t.clone(),
        UserContentValue::Items(items) => {
            let mut out = String::new();
            let mut image = 0;
            for it in items {
                match it {
                    UserContent::Text(t) => out.push_str(t),
                    UserContent::Binary(_) | UserContent::Other(_) => {
                        image += 1;
                        out.push_str(&format!("[Image #{image}]"));
                    }
                }
            }
            out
        }
    }
}

/// The user prompt of a request, if it has one.
fn user_prompt(m: &ModelMessage) -> Option<String> {
    let req = m.as_request()?;
    let texts: Vec<String> = req
        .parts
        .iter()
        .filter_map(|p| match p {
            ModelRequestPart::UserPrompt(u) => Some(prompt_text(&u.content)),
            _ => None,
        })
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// One line describing a tool call, as a tool row shows it.
pub fn tool_summary(name: &str, args: &str) -> String {
    let parsed: Option<Map<String, Value>> = serde_json::from_str(args).ok();
    let one_line = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    match (name, &parsed) {
        (rag::SEARCH_TOOL | analysis::SEARCH_TOOL, Some(m)) => match m.get("query") {
            Some(Value::String(q)) => format!("\"{}\"", one_line(q)),
            _ => one_line(args),
        },
        (analysis::EXECUTE_TOOL, Some(m)) => match m.get("code") {
            Some(Value::String(code)) => code
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
                .chars()
                .take(120)
                .collect(),
            _ => one_line(args),
        },
        (rag::CITE_TOOL | analysis::CITE_TOOL, Some(m)) => match m.get("chunk_ids") {
            Some(Value::Array(ids)) if ids.is_empty() => "no chunks (ungrounded)".into(),
            Some(Value::Array(ids)) => ids
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(String::from)
                        .unwrap_or_else(|| v.to_string())
                })
                .collect::<Vec<_>>()
                .join(", "),
            _ => one_line(args),
        },
        _ => one_line(args).chars().take(160).collect(),
    }
}

/// The tag of pictures attached to search results (SPEC §5).
pub use crate::capabilities::kit::RETRIEVED_IMAGE_TAG;

/// The question start indices of a history: requests with a user prompt that is neither
/// the policy's redirect nor pictures attached to tool results.
pub fn question_starts(messages: &[ModelMessage]) -> Vec<usize> {
    messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let req = m.as_request()?;
            let with_results = req.parts.iter().any(|p| {
                matches!(
                    p,
                    ModelRequestPart::ToolReturn(_) | ModelRequestPart::RetryPrompt(_)
                )
            });
            match user_prompt(m) {
                Some(text)
                    if !is_redirect(&text)
                        && !with_results
                        && !text.contains(RETRIEVED_IMAGE_TAG) =>
                {
                    Some(i)
                }
                _ => None,
            }
        })
        .collect()
}

fn evidence_states(state: &Map<String, Value>) -> Vec<EvidenceState> {
    [StateKind::Rag, StateKind::Analysis]
        .into_iter()
        .filter_map(|kind| {
            state
                .get(kind.namespace())
                .and_then(|raw| EvidenceState::load(kind, raw).ok())
        })
        .collect()
}

impl Transcript {
    /// Builds the conversation and the ledger of a committed history and state.
    pub fn build(messages: &[ModelMessage], state: &Map<String, Value>) -> Self {
        let states = evidence_states(state);
        let violations = state::violations(state);
        let starts = question_starts(messages);
        let mut turns = Vec::with_capacity(starts.len());
        let mut ledger = Vec::with_capacity(starts.len());
        let last_question = starts.last().map(|&s| s as u64);
        for (k, &start) in starts.iter().enumerate() {
            let end = starts.get(k + 1).copied().unwrap_or(messages.len());
            let q = start as u64;
            let mut turn = Turn::new(q, user_prompt(&messages[start]).unwrap_or_default());
            fill_turn(&mut turn, &messages[start..end]);
            // Citations of this question, by display number.
            let mut citations = Vec::new();
            for s in &states {
                let ns = s.kind_namespace();
                for (id, occ) in s.evidence.occurrences.iter() {
                    if occ.cited_in_questions.contains(&q)
                        && let Some(c) = s.citation_index.get(id)
                    {
                        citations.push(CitationView::from_citation(ns, c));
                    }
                }
            }
            citations.sort_by_key(|c| c.index);
            turn.citations = citations;
            let status = if Some(q) == last_question {
                let records: Vec<&CapabilityEvidenceRecord> =
                    states.iter().map(|s| &s.evidence).collect();
                state::citation_status_for(&records, q)
            } else {
                past_status(&turn)
            };
            ledger.push(ledger_row(&turn, &states, status, violations.contains(&q)));
            turns.push(turn);
        }
        Transcript { turns, ledger }
    }
}

/// A past question's status from its history: cited chunks → grounded; a successful cite
/// with no chunks → ungrounded; otherwise missing.
fn past_status(turn: &Turn) -> CitationStatus {
    if !turn.citations.is_empty() {
        return CitationStatus::Grounded;
    }
    let cited_nothing = turn.steps.iter().any(|s| {
        matches!(s.name.as_str(), rag::CITE_TOOL | analysis::CITE_TOOL)
            && s.status == StepStatus::Ok
            && s.summary == "no chunks (ungrounded)"
    });
    if cited_nothing {
        CitationStatus::Ungrounded
    } else {
        CitationStatus::Missing
    }
}

fn ledger_row(
    turn: &Turn,
    states: &[EvidenceState],
    status: CitationStatus,
    violation: bool,
) -> LedgerRow {
    let q = turn.question;
    let mut cited = Vec::new();
    let mut uncited = Vec::new();
    for s in states {
        let ns = s.kind_namespace();
        for (id, occ) in s.evidence.occurrences.iter() {
            let is_cited = occ.cited_in_questions.contains(&q);
            if !is_cited && !occ.retrieved_in_questions.contains(&q) {
                continue;
            }
            let citation = s.citation_index.get(id);
            let result = s
                .searches
                .values()
                .flatten()
                .find(|r| r.chunk_id.as_deref() == Some(id));
            let chunk = LedgerChunk {
                capability: ns.to_string(),
                chunk_id: id.to_string(),
                index: citation.and_then(|c| c.index),
                document_id: citation
                    .map(|c| c.document_id.clone())
                    .or_else(|| result.and_then(|r| r.document_id.clone())),
                document: citation
                    .map(|c| {
                        c.document_title
                            .clone()
                            .filter(|t| !t.is_empty())
                            .unwrap_or_else(|| c.document_uri.clone())
                    })
                    .or_else(|| {
                        result.and_then(|r| r.document_title.clone().or(r.document_uri.clone()))
                    }),
                pages: citation
                    .map(|c| c.page_numbers.clone())
                    .or_else(|| result.map(|r| r.page_numbers.clone()))
                    .unwrap_or_default(),
                content: citation
                    .map(|c| c.content.clone())
                    .or_else(|| result.map(|r| r.content.clone())),
                picture_refs: citation.map(|c| c.picture_refs.clone()).unwrap_or_default(),
            };
            if is_cited {
                cited.push(chunk);
            } else {
                uncited.push(chunk);
            }
        }
    }
    // Retrieved in this question's searches (read from its tool results) but not cited.
    for (cap, id, source) in &turn.retrieved {
        let known = cited
            .iter()
            .chain(uncited.iter())
            .any(|c| &c.chunk_id == id);
        if known {
            continue;
        }
        let citation = states.iter().find_map(|s| s.citation_index.get(id));
        uncited.push(LedgerChunk {
            capability: cap.clone(),
            chunk_id: id.clone(),
            index: None,
            document_id: citation.map(|c| c.document_id.clone()),
            document: citation
                .map(|c| {
                    c.document_title
                        .clone()
                        .unwrap_or_else(|| c.document_uri.clone())
                })
                .or_else(|| source.clone()),
            pages: citation.map(|c| c.page_numbers.clone()).unwrap_or_default(),
            content: citation.map(|c| c.content.clone()),
            picture_refs: Vec::new(),
        });
    }
    cited.sort_by_key(|c| c.index.unwrap_or(i64::MAX));
    let count = |names: &[&str]| {
        turn.steps
            .iter()
            .filter(|s| names.contains(&s.name.as_str()))
            .count()
    };
    LedgerRow {
        question: q,
        prompt: turn.prompt.clone(),
        status,
        redirected: turn.redirected,
        violation,
        cited,
        uncited,
        searches: count(&[rag::SEARCH_TOOL, analysis::SEARCH_TOOL]),
        executions: count(&[analysis::EXECUTE_TOOL]),
        cut_off: turn.cut_off,
    }
}

/// Fills steps, answer, program, redirect and request count from a question's messages.
pub fn fill_turn(turn: &mut Turn, messages: &[ModelMessage]) {
    let mut last_code: Option<(String, String)> = None;
    for m in messages {
        match m {
            ModelMessage::Response(r) => {
                turn.requests += 1;
                turn.cut_off = r.is_cut_off();
                let text: String = r
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        ModelResponsePart::Text(t) => Some(t.content.as_str()),
                        _ => None,
                    })
                    .collect();
                if !text.trim().is_empty() {
                    turn.answer = text;
                }
                for p in &r.parts {
                    if let ModelResponsePart::ToolCall(c) = p {
                        let args = c.args_as_json();
                        if c.tool_name == analysis::EXECUTE_TOOL {
                            last_code = serde_json::from_str::<Map<String, Value>>(&args)
                                .ok()
                                .and_then(|m| {
                                    m.get("code").and_then(Value::as_str).map(String::from)
                                })
                                .map(|code| (c.tool_call_id.clone(), code));
                        }
                        turn.steps.push(ToolStep {
                            call_id: c.tool_call_id.clone(),
                            name: c.tool_name.clone(),
                            summary: tool_summary(&c.tool_name, &args),
                            status: StepStatus::Running,
                            args,
                        });
                    }
                }
            }
            ModelMessage::Request(req) => {
                for p in &req.parts {
                    if let ModelRequestPart::ToolReturn(t) = p
                        && !t.is_failed()
                        && let Some(cap) = match t.tool_name.as_str() {
                            rag::SEARCH_TOOL => Some(state::RAG_NAMESPACE),
                            analysis::SEARCH_TOOL => Some(state::ANALYSIS_NAMESPACE),
                            _ => None,
                        }
                    {
                        for (id, source) in result_ids(&t.content_text()) {
                            if !turn.retrieved.iter().any(|r| r.1 == id) {
                                turn.retrieved.push((cap.to_string(), id, source));
                            }
                        }
                    }
                    let (id, ok) = match p {
                        ModelRequestPart::ToolReturn(t) => (&t.tool_call_id, !t.is_failed()),
                        ModelRequestPart::RetryPrompt(r) => (&r.tool_call_id, false),
                        ModelRequestPart::UserPrompt(u) => {
                            if is_redirect(&prompt_text(&u.content)) {
                                turn.redirected = true;
                            }
                            continue;
                        }
                        _ => continue,
                    };
                    if let Some(step) = turn.steps.iter_mut().find(|s| &s.call_id == id) {
                        step.status = if ok {
                            StepStatus::Ok
                        } else {
                            StepStatus::Failed
                        };
                    }
                    if ok
                        && let Some((call, code)) = &last_code
                        && call == id
                    {
                        turn.program = Some(code.clone());
                    }
                }
            }
        }
    }
}

/// The chunk ids (and `Source:` lines) of a search tool's text: each result block starts
/// with `[chunk_id]`, optionally followed by ` [rank i of n]`.
pub fn result_ids(text: &str) -> Vec<(String, Option<String>)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix('[') else {
            continue;
        };
        let Some(end) = rest.find(']') else {
            continue;
        };
        let id = &rest[..end];
        let after = &rest[end + 1..];
        if id.is_empty() || id.contains(' ') || !(after.is_empty() || after.starts_with(" [rank")) {
            continue;
        }
        let source = lines
            .iter()
            .skip(i + 1)
            .take(3)
            .find_map(|l| l.strip_prefix("Source: "))
            .map(|s| {
                let s = s.trim();
                // `"Title" > heading > ...`: the quoted title.
                match s.strip_prefix('"').and_then(|r| r.split_once('"')) {
                    Some((title, _)) => title.to_string(),
                    None => s.to_string(),
                }
            });
        out.push((id.to_string(), source));
    }
    out
}

/// The conversation as Markdown: questions, answers, tool calls and sources.
pub fn to_markdown(t: &Transcript, title: &str) -> String {
    let mut out = format!("# {title}\n\n");
    for (turn, row) in t.turns.iter().zip(&t.ledger) {
        out.push_str(&format!("## Question\n\n{}\n\n", turn.prompt.trim()));
        if !turn.steps.is_empty() {
            out.push_str("**Tool calls**\n\n");
            for s in &turn.steps {
                let mark = match s.status {
                    StepStatus::Ok => "✓",
                    StepStatus::Failed => "✗",
                    StepStatus::Running => "…",
                };
                out.push_str(&format!("- {mark} `{}` {}\n", s.name, s.summary));
            }
            out.push('\n');
        }
        out.push_str(&format!("## Answer\n\n{}\n\n", turn.answer.trim()));
        if turn.cut_off {
            out.push_str("*The answer was cut off at the model's token limit.*\n\n");
        }
        out.push_str(&format!(
            "*Citation status: {}{}{}*\n\n",
            row.status.as_str(),
            if row.redirected { ", redirected" } else { "" },
            if row.violation {
                ", violation recorded"
            } else {
                ""
            }
        ));
        if let Some(code) = &turn.program {
            out.push_str(&format!(
                "**Program**\n\n```python\n{}\n```\n\n",
                code.trim_end()
            ));
        }
        if !turn.citations.is_empty() {
            out.push_str(&format!("**Sources ({})**\n\n", turn.citations.len()));
            for c in &turn.citations {
                out.push_str(&format!("- {} `{}`\n", c.title(), c.chunk_id));
                if !c.headings.is_empty() {
                    out.push_str(&format!("  Section: {}\n", c.headings.join(" > ")));
                }
                let excerpt: String = c.content.chars().take(500).collect();
                for line in excerpt.lines() {
                    out.push_str(&format!("  > {line}\n"));
                }
            }
            out.push('\n');
        }
    }
    out
}

trait Namespace {
    fn kind_namespace(&self) -> &'static str;
}

impl Namespace for EvidenceState {
    fn kind_namespace(&self) -> &'static str {
        if self.executions.is_some() {
            StateKind::Analysis.namespace()
        } else {
            StateKind::Rag.namespace()
        }
    }
}

/// The SQL filter haiku.rag's document filter builds from selected document labels: per
/// name a case-insensitive `LIKE` on `uri` or `title`, plus the same with spaces removed;
/// several names joined by `OR`. No names → no filter.
pub fn document_filter_sql(names: &[String]) -> Option<String> {
    let clauses: Vec<String> = names
        .iter()
        .map(|name| {
            let esc = name.replace('\'', "''");
            let squeezed = esc.replace(' ', "");
            let mut parts = vec![
                format!("LOWER(uri) LIKE LOWER('%{esc}%')"),
                format!("LOWER(title) LIKE LOWER('%{esc}%')"),
            ];
            if squeezed != esc {
                parts.push(format!("LOWER(uri) LIKE LOWER('%{squeezed}%')"));
                parts.push(format!("LOWER(title) LIKE LOWER('%{squeezed}%')"));
            }
            parts.join(" OR ")
        })
        .collect();
    match clauses.len() {
        0 => None,
        1 => Some(clauses.into_iter().next().unwrap_or_default()),
        _ => Some(
            clauses
                .iter()
                .map(|c| format!("({c})"))
                .collect::<Vec<_>>()
                .join(" OR "),
        ),
    }
}

/// Writes `filter` into `document_filter` of every evidence state present.
pub fn set_document_filter(state: &mut Map<String, Value>, filter: Option<&str>) {
    for ns in [StateKind::Rag.namespace(), StateKind::Analysis.namespace()] {
        if let Some(Value::Object(s)) = state.get_mut(ns) {
            s.insert(
                "document_filter".into(),
                filter.map_or(Value::Null, |f| Value::String(f.to_string())),
            );
        }
    }
}

/// Applies the document filter chosen from `labels` (haiku.rag's SQL, see
/// [`document_filter_sql`]) to the session state: the RAG state is created when absent,
/// then every evidence state present gets the filter (none when `labels` is empty).
pub fn apply_document_filter(state: &mut Map<String, Value>, labels: &[String]) {
    let sql = document_filter_sql(labels);
    if !state.contains_key(StateKind::Rag.namespace()) {
        state.insert(
            StateKind::Rag.namespace().into(),
            EvidenceState::empty(StateKind::Rag).to_value(),
        );
    }
    set_document_filter(state, sql.as_deref());
}

/// The document filter of the session state (the RAG state's), if any.
pub fn document_filter(state: &Map<String, Value>) -> Option<String> {
    state
        .get(StateKind::Rag.namespace())
        .and_then(|s| s.get("document_filter"))
        .and_then(|v| v.as_str())
        .map(String::from)
}

/// The JSON export: the transcript plus the session's raw messages and state.
pub fn to_json(t: &Transcript, messages: &[ModelMessage], state: &Map<String, Value>) -> Value {
    serde_json::json!({
        "turns": t.turns,
        "ledger": t.ledger,
        "messages": messages,
        "state": state,
    })
}
