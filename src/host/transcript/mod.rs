//! The conversation and the citation ledger as data, derived from a session's committed
//! history and state. The TUI renders these; `export` writes them as Markdown or JSON.
//!
//! A question starts at a request whose user prompt is not a citation redirect; its
//! identity is that message's index in the history (SPEC §0.2: the message count before
//! the question). Everything up to the next question belongs to it.

mod evidence;
mod export;
mod filter;
mod ledger;
mod tools;

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

pub use evidence::Evidence;
pub use export::{clip_answer, clip_source, to_json, to_markdown, to_markdown_marked};
pub use filter::{
    apply_collection_filter, apply_document_filter, collection_label, document_filter,
    document_filter_sql, set_document_filter,
};
pub use ledger::{LedgerChunk, LedgerRow};
use ledger::{ledger_row, past_status};
pub use tools::{ToolKind, result_ids, tool_kind, tool_summary};

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
    /// The number the answer's markers use for it: `[1]` is the first source the
    /// question cited (see [`number_sources`]).
    pub number: i64,
    /// The session-wide citation number (haiku.rag's `index`), continuing across the
    /// conversation.
    pub index: i64,
    /// The cited chunk (its pages and sections those of the context the model saw).
    #[serde(flatten)]
    pub evidence: Evidence,
    pub content: String,
    /// The cited chunk itself, read from the knowledge base (`content` is the context
    /// the model saw, expanded around it); `None` until read, or when it is not there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passage: Option<Passage>,
}

/// A cited chunk's own text and where it stands in its document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Passage {
    pub text: String,
    pub pages: Vec<i64>,
    pub headings: Vec<String>,
    /// The chunk is no longer in the knowledge base as it is now: this is the passage as
    /// the question read it (from the table versions the session recorded).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub as_cited: bool,
}

impl Passage {
    /// Where the passage starts in `context` (the expanded text the model saw), when it
    /// is there word for word.
    pub fn span_in(&self, context: &str) -> Option<std::ops::Range<usize>> {
        let text = self.text.trim();
        (!text.is_empty())
            .then(|| context.find(text))
            .flatten()
            .map(|at| at..at + text.len())
    }
}

impl CitationView {
    fn from_citation(capability: &str, c: &Citation) -> Self {
        CitationView {
            number: c.index.unwrap_or(0),
            index: c.index.unwrap_or(0),
            evidence: Evidence::cited(capability, c),
            content: c.content.clone(),
            passage: None,
        }
    }

    /// `[n] Source (p.1, 2, 3...)` ([`Evidence::title`]), `n` the number the answer's
    /// markers use, the pages the cited chunk's own once read.
    pub fn title(&self) -> String {
        let pages = self
            .passage
            .as_ref()
            .map_or(&self.evidence.pages, |p| &p.pages);
        self.evidence.title(self.number, pages)
    }

    /// `Source, p. 8, §Section` ([`Evidence::reference`]) of the cited chunk's own pages
    /// and section once read, else of the context the model saw.
    pub fn reference(&self) -> String {
        match &self.passage {
            Some(p) => self.evidence.reference(&p.pages, &p.headings),
            None => self
                .evidence
                .reference(&self.evidence.pages, &self.evidence.headings),
        }
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
    /// The answer the citation policy caught: the text the model gave, citing nothing,
    /// before the redirect (the final answer came after it).
    pub caught: Option<String>,
    /// Model requests made for this question.
    pub requests: usize,
    /// Chunks its searches returned, as the tool results name them (id and source).
    pub retrieved: Vec<Evidence>,
    /// Whether the question's last model answer was cut off at the token limit
    /// (finish reason `length`).
    pub cut_off: bool,
    /// What cut it off, in words ([`ModelResponse::cut_off_note`]).
    pub cut_off_note: Option<String>,
    /// Search units of haiku.rag 0.101's `search` (its budget counts up to three searches
    /// in one model response as one unit).
    #[serde(skip)]
    pub search_units_0101: usize,
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
            caught: None,
            requests: 0,
            retrieved: Vec::new(),
            cut_off: false,
            cut_off_note: None,
            search_units_0101: 0,
        }
    }
}

/// Numbers a question's sources (in the order it cited them) the way its answer's
/// markers do. A model numbers the sources of each answer itself, `[1]` for the first it
/// cited, so that is the default; when every marker in the answer is instead one of these
/// sources' session-wide numbers and some lie beyond the answer's own count, the answer
/// used those, and they are kept. Either way the marker `[n]` and the source titled
/// `[n]` are the same source.
pub fn number_sources(answer: &str, citations: &mut [CitationView]) {
    let indexes: Vec<i64> = citations.iter().map(|c| c.index).collect();
    for (c, n) in citations.iter_mut().zip(source_numbers(answer, &indexes)) {
        c.number = n;
    }
}

/// [`number_sources`] for sources given by their session-wide numbers, in cite order.
pub fn source_numbers(answer: &str, indexes: &[i64]) -> Vec<i64> {
    let markers = markers(answer);
    let n = indexes.len() as i64;
    let session_wide = !markers.is_empty()
        && markers.iter().any(|&m| m > n)
        && markers.iter().all(|m| indexes.contains(m));
    (0..indexes.len())
        .map(|k| {
            if session_wide {
                indexes[k]
            } else {
                k as i64 + 1
            }
        })
        .collect()
}

/// The numbers of an answer's citation markers (`[3]`, `[1, 2]`, `[4][5]`), in order.
pub fn markers(answer: &str) -> Vec<i64> {
    marker_groups(answer)
        .into_iter()
        .flat_map(|(_, numbers)| numbers)
        .collect()
}

/// Each citation marker of `text` (`[3]`, `[1, 2]`: positive numbers, comma separated)
/// with the byte index just after its `]`, in order.
pub fn marker_groups(text: &str) -> Vec<(usize, Vec<i64>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(open) = text[at..].find('[') {
        let start = at + open + 1;
        let Some(close) = text[start..].find(']') else {
            break;
        };
        let numbers: Option<Vec<i64>> = text[start..start + close]
            .split(',')
            .map(|p| p.trim().parse::<i64>().ok().filter(|&k| k > 0))
            .collect();
        at = start + close + 1;
        if let Some(numbers) = numbers {
            out.push((at, numbers));
        }
    }
    out
}

/// The whole conversation.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Transcript {
    pub turns: Vec<Turn>,
    pub ledger: Vec<LedgerRow>,
}

/// What a reader is told of a redirect, in every face (the conversation, the export,
/// `ask`): why the policy stepped in and what it asked for.
pub const REDIRECT_NOTE: &str = "redirected: this answer cited nothing, so the citation policy \
     asked the model to cite what grounds it (or declare that nothing does) and to answer again";

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
    /// Every cited chunk, once: (its collection, its id, the first question citing it).
    pub fn cited_chunks(&self) -> Vec<(Option<String>, String, u64)> {
        let mut out: Vec<(Option<String>, String, u64)> = Vec::new();
        for t in &self.turns {
            for c in &t.citations {
                if !out.iter().any(|(_, id, _)| *id == c.evidence.chunk_id) {
                    out.push((
                        c.evidence.collection.clone(),
                        c.evidence.chunk_id.clone(),
                        t.question,
                    ));
                }
            }
        }
        out
    }

    /// Gives each citation its passage, when `passages` has it.
    pub fn set_passages(&mut self, passages: &std::collections::HashMap<String, Passage>) {
        for c in self.turns.iter_mut().flat_map(|t| &mut t.citations) {
            if let Some(p) = passages.get(&c.evidence.chunk_id) {
                c.passage = Some(p.clone());
            }
        }
    }

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
            number_sources(&turn.answer, &mut citations);
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

/// Fills steps, answer, program, redirect and request count from a question's messages.
pub fn fill_turn(turn: &mut Turn, messages: &[ModelMessage]) {
    let mut last_code: Option<(String, String)> = None;
    for m in messages {
        match m {
            ModelMessage::Response(r) => {
                turn.requests += 1;
                let searches_0101 = r
                    .tool_calls()
                    .filter(|c| c.tool_name == tools::SEARCH_TOOL_0101)
                    .count();
                turn.search_units_0101 += searches_0101.div_ceil(3);
                turn.cut_off = r.is_cut_off();
                turn.cut_off_note = r.cut_off_note();
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
                        if tool_kind(&c.tool_name) == ToolKind::Execute {
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
                            // haiku.rag 0.101's one capability keeps its state under `rag`.
                            rag::SEARCH_TOOL | tools::SEARCH_TOOL_0101 => {
                                Some(state::RAG_NAMESPACE)
                            }
                            analysis::SEARCH_TOOL => Some(state::ANALYSIS_NAMESPACE),
                            _ => None,
                        }
                    {
                        for (id, source) in result_ids(&t.content_text()) {
                            if !turn.retrieved.iter().any(|r| r.chunk_id == id) {
                                turn.retrieved.push(Evidence::listed(cap, &id, source));
                            }
                        }
                    }
                    let (id, ok) = match p {
                        ModelRequestPart::ToolReturn(t) => (&t.tool_call_id, !t.is_failed()),
                        ModelRequestPart::RetryPrompt(r) => (&r.tool_call_id, false),
                        ModelRequestPart::UserPrompt(u) => {
                            if is_redirect(&prompt_text(&u.content)) {
                                turn.redirected = true;
                                if turn.caught.is_none() && !turn.answer.trim().is_empty() {
                                    turn.caught = Some(std::mem::take(&mut turn.answer));
                                }
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

#[cfg(test)]
mod numbering_tests {
    use super::*;

    fn view(index: i64) -> CitationView {
        CitationView {
            number: index,
            index,
            evidence: Evidence::listed("rag", &format!("c{index}"), Some("doc".into())),
            content: String::new(),
            passage: None,
        }
    }

    fn numbers(answer: &str, indexes: &[i64]) -> Vec<i64> {
        let mut cs: Vec<CitationView> = indexes.iter().map(|&i| view(i)).collect();
        number_sources(answer, &mut cs);
        cs.iter().map(|c| c.number).collect()
    }

    #[test]
    fn a_source_is_titled_by_its_marker_and_located_by_the_cited_chunk_once_read() {
        let mut c = view(7);
        c.number = 1;
        c.evidence.pages = vec![6, 7, 8, 9];
        c.evidence.headings = vec!["2.2 Naming".into()];
        // Before the chunk is read: the pages and section of the context the model saw.
        assert_eq!(c.title(), "[1] doc (p.6, 7, 8...)");
        assert_eq!(c.reference(), "doc, pp. 6, 7, 8, 9, §2.2 Naming");
        c.passage = Some(Passage {
            text: "Usage: asn1Parser".into(),
            pages: vec![8],
            headings: vec!["3 Invoking".into(), "3.1 asn1Parser".into()],
            as_cited: false,
        });
        assert_eq!(c.title(), "[1] doc (p.8)");
        assert_eq!(c.reference(), "doc, p. 8, §3.1 asn1Parser");
    }

    #[test]
    fn markers_are_read_in_every_form() {
        assert_eq!(
            markers("a [1] b [2, 3] c [4][5] [x] [0] [ 6 ]"),
            [1, 2, 3, 4, 5, 6]
        );
        assert_eq!(markers("no markers, [unclosed"), Vec::<i64>::new());
    }

    #[test]
    fn an_answers_sources_are_numbered_as_its_markers_number_them() {
        // Question 3 of a session cites sources 7 and 8: the answer says [1] and [2].
        assert_eq!(numbers("Yes [1], and more [2].", &[7, 8]), [1, 2]);
        // No markers at all: still 1, 2 (the first cited is [1]).
        assert_eq!(numbers("Yes.", &[7, 8]), [1, 2]);
        // The answer used the session-wide numbers: they are kept.
        assert_eq!(numbers("Yes [7], and [8].", &[7, 8]), [7, 8]);
        // A marker that is neither: per answer.
        assert_eq!(numbers("Yes [9].", &[7, 8]), [1, 2]);
        // The first question's sources are 1 and 2 either way.
        assert_eq!(numbers("Yes [1][2].", &[1, 2]), [1, 2]);
    }
}
