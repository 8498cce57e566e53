//! Evidence compaction's pure core (SPEC §8): the capsule of cited evidence, the
//! cited pictures to re-attach, the rewriting of earlier questions' evidence returns
//! on the outgoing copy of the history, and the refusal when state was not carried.
//!
//! The engine's `wrap_model_request` hook orchestrates it (§8.1):
//!
//! 1. build one [`EvidenceView`] per discovered evidence capability, sorted by ns;
//! 2. `boundary = question_in_progress(views)`; stop when it is 0;
//! 3. [`require_records`]`(views, outgoing, boundary)?`;
//! 4. once per (run id, run step): [`build_capsule`], fetch each
//!    [`Capsule::pictures`] entry's bytes through its owning capability, then
//!    [`capsule_images`];
//! 5. `outgoing = `[`compact_history`]`(outgoing, boundary, owned_tools(views), ...)`.
//!
//! Stored history is never touched: every function here takes `&[ModelMessage]`.

use std::collections::HashSet;

use crate::capabilities::state::{CapabilityEvidenceRecord, Citation, EvidenceState, OrderedMap};
use crate::engine::messages::{
    BinaryContent, ModelMessage, ModelRequestPart, UserContent, UserContentValue, UserPromptPart,
};

/// Fixed id of the compaction capability.
pub const CAPABILITY_ID: &str = "haiku-rag-evidence-compaction";

/// Marks a picture label we attached (`RETRIEVED_IMAGE_TAG`, SPEC §5.6, §8.4).
pub const RETRIEVED_IMAGE_TAG: &str = "[haiku.rag/retrieved-image]";

/// Separator between capsule pieces.
pub const ENTRY_SEPARATOR: &str = "\n\n";

const CAPSULE_HEADER: &str = include_str!("../../assets/prompts/capabilities/capsule_header.txt");
const RECEIPT: &str = include_str!("../../assets/prompts/capabilities/receipt.txt");
const PICTURE_LABEL: &str =
    include_str!("../../assets/prompts/capabilities/capsule_picture_label.txt");

/// The capsule's header line (ours).
pub fn capsule_header() -> &'static str {
    CAPSULE_HEADER.trim_end()
}

/// The note that replaces an earlier question's evidence return (ours, §8.3).
pub fn receipt() -> &'static str {
    RECEIPT.trim_end()
}

/// `[Cited evidence group <k>]`: k counts the groups, newest first (§8.2).
pub fn group_label(position: usize) -> String {
    format!("[Cited evidence group {position}]")
}

/// The label that precedes a re-attached cited picture (ours, §8.5). It names
/// `[<chunk_id>]` and `(<self_ref>)` and ends with [`RETRIEVED_IMAGE_TAG`].
pub fn picture_label(chunk_id: &str, self_ref: &str) -> String {
    let text = fill(
        PICTURE_LABEL.trim_end(),
        &[("chunk_id", chunk_id), ("self_ref", self_ref)],
    );
    format!("{text} {RETRIEVED_IMAGE_TAG}")
}

/// Replaces `{name}` placeholders in one pass, so a value containing a placeholder is
/// never expanded again. Unknown placeholders are kept.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let replaced = after.find('}').and_then(|end| {
            let name = &after[..end];
            values
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value, end))
        });
        match replaced {
            Some((value, end)) => {
                out.push_str(value);
                rest = &after[end + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Errors of compaction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactionError {
    /// A cited occurrence without its `citation_index` entry (§8.2).
    #[error(
        "the {capability} capability cited chunk {chunk_id} in question(s) {questions:?} but \
         has no citation record for it, so its content cannot be kept"
    )]
    MissingCitation {
        capability: String,
        chunk_id: String,
        questions: Vec<u64>,
    },
    /// Earlier evidence of a capability whose state was not carried (§8.6).
    #[error(
        "evidence compaction cannot summarise earlier evidence of the {capability} capability: \
         the host did not carry the capability state (state[\"{capability}\"]) between runs, \
         so there is no record to build the capsule from. Pass the same state on every run, \
         or remove evidence compaction."
    )]
    StateNotCarried { capability: String },
}

/// One discovered evidence capability, as compaction sees it (§8.1). Built fresh
/// for every request, never stored.
#[derive(Debug, Clone)]
pub struct EvidenceView<'a> {
    /// The state namespace (`rag` / `analysis`); also the refs' `capability`.
    pub capability: &'a str,
    /// Its ledger.
    pub record: &'a CapabilityEvidenceRecord,
    /// Its citations by chunk id.
    pub citation_index: &'a OrderedMap<Citation>,
    /// Its evidence tools (`rag_search`; `analysis_search`, `analysis_execute_code`).
    /// The cite tool is not one.
    pub tool_names: Vec<String>,
    /// Whether its `for_run` found a record with a question (§3.1).
    pub state_carried: bool,
}

impl<'a> EvidenceView<'a> {
    /// The view of a capability's settled state.
    pub fn new(
        capability: &'a str,
        state: &'a EvidenceState,
        tool_names: &[&str],
        state_carried: bool,
    ) -> Self {
        EvidenceView {
            capability,
            record: &state.evidence,
            citation_index: &state.citation_index,
            tool_names: tool_names.iter().map(|s| s.to_string()).collect(),
            state_carried,
        }
    }
}

/// The boundary: identity of the question in progress, `max(question or 0)`.
pub fn question_in_progress(views: &[EvidenceView<'_>]) -> usize {
    views
        .iter()
        .map(|v| v.record.question.unwrap_or(0))
        .max()
        .unwrap_or(0) as usize
}

/// The union of the views' evidence tool names, sorted.
pub fn owned_tools(views: &[EvidenceView<'_>]) -> Vec<String> {
    let mut names: Vec<String> = views
        .iter()
        .flat_map(|v| v.tool_names.iter().cloned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// One cited piece of evidence in the capsule.
#[derive(Debug, Clone, PartialEq)]
pub struct CapsuleEntry<'a> {
    pub capability: &'a str,
    pub chunk_id: &'a str,
    /// The newest question that cited it.
    pub question: u64,
    pub citation: &'a Citation,
}

impl CapsuleEntry<'_> {
    /// `"<title>"`, plus ` (<uri>)` when the uri differs; the uri alone without a title.
    pub fn source(&self) -> String {
        let uri = self.citation.document_uri.as_str();
        match self.citation.document_title.as_deref() {
            Some(title) if !title.is_empty() => {
                if !uri.is_empty() && uri != title {
                    format!("\"{title}\" ({uri})")
                } else {
                    format!("\"{title}\"")
                }
            }
            _ => uri.to_string(),
        }
    }

    /// `[<chunk_id>] Source: <source>`, the `Collection: <name>` line when asked for,
    /// then the content.
    pub fn render(&self, with_collection: bool) -> String {
        let mut text = format!("[{}] Source: {}", self.chunk_id, self.source());
        if with_collection && let Some(collection) = &self.citation.collection {
            text.push_str("\nCollection: ");
            text.push_str(collection);
        }
        text.push('\n');
        text.push_str(&self.citation.content);
        text
    }
}

/// The cited entries, sorted by (question desc, capability asc, chunk_id asc).
/// Retrieved-only occurrences are skipped; a cited one without a citation record is
/// an error.
pub fn eligible_entries<'a>(
    views: &[EvidenceView<'a>],
) -> Result<Vec<CapsuleEntry<'a>>, CompactionError> {
    let mut entries = Vec::new();
    for view in views {
        for (chunk_id, occurrence) in view.record.occurrences.iter() {
            let Some(&question) = occurrence.cited_in_questions.iter().max() else {
                continue;
            };
            let Some(citation) = view.citation_index.get(chunk_id) else {
                return Err(CompactionError::MissingCitation {
                    capability: view.capability.to_string(),
                    chunk_id: chunk_id.to_string(),
                    questions: occurrence.cited_in_questions.clone(),
                });
            };
            entries.push(CapsuleEntry {
                capability: view.capability,
                chunk_id,
                question,
                citation,
            });
        }
    }
    entries.sort_by(|a, b| {
        b.question
            .cmp(&a.question)
            .then_with(|| a.capability.cmp(b.capability))
            .then_with(|| a.chunk_id.cmp(b.chunk_id))
    });
    Ok(entries)
}

/// A cited picture to re-attach, with the label that must travel with it (§8.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetainedPicture {
    /// The owning capability (ns), which fetches the bytes.
    pub capability: String,
    /// The first chunk (in capsule order) that cited it.
    pub chunk_id: String,
    pub document_id: String,
    pub self_ref: String,
    pub label: String,
}

/// Everything compaction inserts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capsule {
    /// `""` when nothing was cited.
    pub text: String,
    /// Deduplicated on (capability, document_id, self_ref), in capsule order.
    pub pictures: Vec<RetainedPicture>,
}

/// Builds the capsule text and its picture list (§8.2, §8.5).
///
/// When the entries name more than one collection, each entry carrying one gets a
/// `Collection: <name>` line after its source.
pub fn build_capsule(views: &[EvidenceView<'_>]) -> Result<Capsule, CompactionError> {
    let entries = eligible_entries(views)?;
    if entries.is_empty() {
        return Ok(Capsule::default());
    }
    let collections: HashSet<Option<&str>> = entries
        .iter()
        .map(|e| e.citation.collection.as_deref())
        .collect();
    let with_collection = collections.len() > 1;

    let mut pieces = vec![capsule_header().to_string()];
    let mut pictures = Vec::new();
    let mut seen: HashSet<(&str, &str, &str)> = HashSet::new();
    let mut position = 0;
    let mut current: Option<u64> = None;
    for entry in &entries {
        if current != Some(entry.question) {
            position += 1;
            current = Some(entry.question);
            pieces.push(group_label(position));
        }
        pieces.push(entry.render(with_collection));
        for self_ref in &entry.citation.picture_refs {
            let identity = (
                entry.capability,
                entry.citation.document_id.as_str(),
                self_ref.as_str(),
            );
            if !seen.insert(identity) {
                continue;
            }
            pictures.push(RetainedPicture {
                capability: entry.capability.to_string(),
                chunk_id: entry.chunk_id.to_string(),
                document_id: entry.citation.document_id.clone(),
                self_ref: self_ref.clone(),
                label: picture_label(entry.chunk_id, self_ref),
            });
        }
    }
    Ok(Capsule {
        text: pieces.join(ENTRY_SEPARATOR),
        pictures,
    })
}

/// The media type of PNG, JPEG, GIF or WebP bytes, from their signature; `None` for
/// anything else. A cheap stand-in for decoding (the engine may pass a real decoder
/// to [`capsule_images_with`]).
pub fn image_media_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 8 {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) && bytes.len() > 3 {
        Some("image/jpeg")
    } else if (bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a")) && bytes.len() > 6 {
        Some("image/gif")
    } else if bytes.len() > 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// The `[label, image, label, image, ...]` user content for the retained pictures.
/// `fetch` returns a picture's bytes (`None` when the fetch failed or found nothing);
/// a picture without decodable bytes is left out together with its label.
pub fn capsule_images(
    pictures: &[RetainedPicture],
    fetch: impl FnMut(&RetainedPicture) -> Option<Vec<u8>>,
) -> Vec<UserContent> {
    capsule_images_with(pictures, fetch, |bytes| {
        image_media_type(bytes).map(str::to_string)
    })
}

/// [`capsule_images`] with the caller's decodability check, which returns the
/// media type of a decodable image.
pub fn capsule_images_with(
    pictures: &[RetainedPicture],
    mut fetch: impl FnMut(&RetainedPicture) -> Option<Vec<u8>>,
    decode: impl Fn(&[u8]) -> Option<String>,
) -> Vec<UserContent> {
    let mut content = Vec::new();
    for picture in pictures {
        let Some(bytes) = fetch(picture) else {
            continue;
        };
        let Some(media_type) = decode(&bytes) else {
            continue;
        };
        let mut image = BinaryContent::from_bytes(&bytes, media_type);
        image.identifier = Some(picture.self_ref.clone());
        content.push(UserContent::Text(picture.label.clone()));
        content.push(UserContent::Binary(image));
    }
    content
}

/// Whether a request part is a return of one of `owned`.
fn owned_return<S: AsRef<str>>(part: &ModelRequestPart, owned: &[S]) -> bool {
    match part {
        ModelRequestPart::ToolReturn(r) => owned.iter().any(|o| o.as_ref() == r.tool_name),
        _ => false,
    }
}

/// The last owned tool return below `boundary`, as (message index, part index).
pub fn find_carrier<S: AsRef<str>>(
    messages: &[ModelMessage],
    boundary: usize,
    owned: &[S],
) -> Option<(usize, usize)> {
    let end = boundary.min(messages.len());
    messages[..end]
        .iter()
        .enumerate()
        .rev()
        .find_map(|(index, message)| {
            let request = message.as_request()?;
            request
                .parts
                .iter()
                .rposition(|p| owned_return(p, owned))
                .map(|position| (index, position))
        })
}

/// Removes our (tagged label, image) pairs from list content (§8.4). Only a string
/// containing [`RETRIEVED_IMAGE_TAG`] immediately followed by an image is ours, and
/// both go together.
pub fn strip_our_pictures(items: &[UserContent]) -> Vec<UserContent> {
    let mut kept = Vec::with_capacity(items.len());
    let mut index = 0;
    while index < items.len() {
        let ours = matches!(&items[index], UserContent::Text(s) if s.contains(RETRIEVED_IMAGE_TAG))
            && matches!(items.get(index + 1), Some(UserContent::Binary(b)) if b.is_image());
        if ours {
            index += 2;
            continue;
        }
        kept.push(items[index].clone());
        index += 1;
    }
    kept
}

/// Rewrites a copy of `messages` for the wire (§8.3); see [`compact_history_owned`].
pub fn compact_history<S: AsRef<str>>(
    messages: &[ModelMessage],
    boundary: usize,
    owned_tool_names: &[S],
    capsule_text: &str,
    capsule_images: &[UserContent],
) -> Vec<ModelMessage> {
    compact_history_owned(
        messages.to_vec(),
        boundary,
        owned_tool_names,
        capsule_text,
        capsule_images,
    )
}

/// Whether `items[index]` starts one of our (tagged label, image) pairs.
fn our_picture_at(items: &[UserContent], index: usize) -> bool {
    matches!(&items[index], UserContent::Text(s) if s.contains(RETRIEVED_IMAGE_TAG))
        && matches!(items.get(index + 1), Some(UserContent::Binary(b)) if b.is_image())
}

/// Whether stripping our pictures leaves nothing of this part.
fn strips_to_nothing(part: &ModelRequestPart) -> bool {
    let ModelRequestPart::UserPrompt(prompt) = part else {
        return false;
    };
    let UserContentValue::Items(items) = &prompt.content else {
        return false;
    };
    let mut index = 0;
    while index < items.len() {
        if !our_picture_at(items, index) {
            return false;
        }
        index += 2;
    }
    true
}

/// Rewrites the outgoing `messages` for the wire (§8.3), in place: below `boundary`,
/// every owned tool return becomes the receipt, except the carrier (the newest one),
/// which gets the capsule when it is non-empty; our pictures are stripped from user
/// content; the capsule images join the carrier's request as a new user part. Messages
/// at or after `boundary` are untouched, nothing else is copied, and a request that
/// stripping would leave without parts is kept as it was.
pub fn compact_history_owned<S: AsRef<str>>(
    mut messages: Vec<ModelMessage>,
    boundary: usize,
    owned_tool_names: &[S],
    capsule_text: &str,
    capsule_images: &[UserContent],
) -> Vec<ModelMessage> {
    if boundary == 0 {
        return messages;
    }
    let carrier = find_carrier(&messages, boundary, owned_tool_names);
    for (index, message) in messages.iter_mut().enumerate().take(boundary) {
        let ModelMessage::Request(request) = message else {
            continue;
        };
        let adds_images = carrier.is_some_and(|(at, _)| at == index) && !capsule_images.is_empty();
        if !adds_images && request.parts.iter().all(strips_to_nothing) {
            // A request with no parts is not a message: keep the original.
            continue;
        }
        for (position, part) in request.parts.iter_mut().enumerate() {
            let owned = owned_return(part, owned_tool_names);
            match part {
                ModelRequestPart::ToolReturn(r) if owned => {
                    let body = if carrier == Some((index, position)) && !capsule_text.is_empty() {
                        capsule_text
                    } else {
                        receipt()
                    };
                    r.content = serde_json::Value::String(body.to_string());
                }
                ModelRequestPart::UserPrompt(prompt) => {
                    if let UserContentValue::Items(items) = &mut prompt.content {
                        let mut at = 0;
                        while at < items.len() {
                            if our_picture_at(items, at) {
                                items.drain(at..at + 2);
                            } else {
                                at += 1;
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        request.parts.retain(|p| {
            !matches!(p, ModelRequestPart::UserPrompt(u)
                if matches!(&u.content, UserContentValue::Items(items) if items.is_empty()))
        });
        if adds_images {
            request
                .parts
                .push(ModelRequestPart::UserPrompt(UserPromptPart::new(
                    capsule_images.to_vec(),
                )));
        }
    }
    messages
}

/// Refuses to compact when a capability whose state was not carried has owned
/// returns below the boundary (§8.6). Only that capability's own tools count.
pub fn require_records(
    views: &[EvidenceView<'_>],
    messages: &[ModelMessage],
    boundary: usize,
) -> Result<(), CompactionError> {
    for view in views.iter().filter(|v| !v.state_carried) {
        if find_carrier(messages, boundary, &view.tool_names).is_some() {
            return Err(CompactionError::StateNotCarried {
                capability: view.capability.to_string(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::state::{CitationRef, StateKind, settle_for_run};
    use crate::engine::messages::ModelRequest;
    use crate::engine::messages::{
        ModelResponse, ModelResponsePart, TextPart, ToolCallPart, ToolReturnPart,
    };
    use serde_json::{Value, json};

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0";
    const RAG_TOOLS: &[&str] = &["rag_search"];
    const ANALYSIS_TOOLS: &[&str] = &["analysis_search", "analysis_execute_code"];

    fn prompt(text: &str) -> ModelMessage {
        ModelMessage::Request(ModelRequest::user(text))
    }

    fn calls(names: &[(&str, &str)]) -> ModelMessage {
        ModelMessage::Response(ModelResponse::new(
            names
                .iter()
                .map(|(tool, id)| ModelResponsePart::ToolCall(ToolCallPart::new(*tool, "{}", *id)))
                .collect(),
        ))
    }

    fn ret(tool: &str, id: &str, content: &str) -> ModelRequestPart {
        ModelRequestPart::ToolReturn(ToolReturnPart::new(tool, json!(content), id))
    }

    fn request(parts: Vec<ModelRequestPart>) -> ModelMessage {
        ModelMessage::Request(ModelRequest::new(parts))
    }

    fn text(content: &str) -> ModelMessage {
        ModelMessage::Response(ModelResponse::new(vec![ModelResponsePart::Text(
            TextPart::new(content),
        )]))
    }

    /// `answered(q, evidence)` of SCENARIOS.
    fn answered(question: &str, evidence: &str) -> Vec<ModelMessage> {
        vec![
            prompt(question),
            calls(&[("rag_search", "call-1")]),
            request(vec![ret("rag_search", "call-1", evidence)]),
            text("an answer"),
        ]
    }

    fn image(bytes: &[u8]) -> UserContent {
        UserContent::Binary(BinaryContent::from_bytes(bytes, "image/png"))
    }

    fn tagged_label() -> UserContent {
        UserContent::Text(format!(
            "Page image 1 of 1 [c1] (#/pictures/0). {RETRIEVED_IMAGE_TAG}"
        ))
    }

    /// Contents of the returns of `tool`, in order.
    fn returns_of(messages: &[ModelMessage], tool: &str) -> Vec<String> {
        messages
            .iter()
            .filter_map(ModelMessage::as_request)
            .flat_map(|r| r.parts.iter())
            .filter_map(|p| match p {
                ModelRequestPart::ToolReturn(r) if r.tool_name == tool => Some(r.content_text()),
                _ => None,
            })
            .collect()
    }

    fn all_returns(messages: &[ModelMessage]) -> Vec<String> {
        messages
            .iter()
            .filter_map(ModelMessage::as_request)
            .flat_map(|r| r.parts.iter())
            .filter_map(|p| match p {
                ModelRequestPart::ToolReturn(r) => Some(r.content_text()),
                _ => None,
            })
            .collect()
    }

    fn citation(chunk: &str, title: Option<&str>, uri: &str, content: &str) -> Citation {
        Citation {
            document_id: "doc-1".into(),
            chunk_id: chunk.into(),
            chunk_ids: vec![chunk.into()],
            document_uri: uri.into(),
            document_title: title.map(String::from),
            content: content.into(),
            ..Citation::default()
        }
    }

    /// A state whose record cited each `(chunk, question)` (in the given order).
    fn cited_state(ns: &str, kind: StateKind, cites: &[(&str, u64)]) -> EvidenceState {
        let mut state = EvidenceState::empty(kind);
        let mut questions: Vec<u64> = cites.iter().map(|(_, q)| *q).collect();
        questions.sort();
        questions.dedup();
        for question in questions {
            if state.evidence.question.is_some() {
                state.evidence.end_question();
            }
            state.evidence.begin_question(question).unwrap();
            for (chunk, _) in cites.iter().filter(|(_, q)| *q == question) {
                state.citation_index.insert(
                    *chunk,
                    citation(
                        chunk,
                        Some("Doc"),
                        "test://doc",
                        &format!("content of {chunk}"),
                    ),
                );
                state
                    .declare(&[CitationRef::new(ns, *chunk)], question + 1)
                    .unwrap();
            }
        }
        state.evidence.end_question();
        state
    }

    fn rag_view(state: &EvidenceState) -> EvidenceView<'_> {
        EvidenceView::new("rag", state, RAG_TOOLS, true)
    }

    /// Scenario 51: boundary 0 returns the messages unchanged; for any boundary the
    /// input and its parts are unchanged and still hold the evidence.
    #[test]
    fn scenario_51_boundary_zero_and_input_untouched() {
        let messages = answered("first", "EVIDENCE");
        let before = messages.clone();
        let out = compact_history(&messages, 0, RAG_TOOLS, "CAPSULE", &[]);
        assert_eq!(out, messages);
        for boundary in [0, 2, 3, 4, 10] {
            let out = compact_history(&messages, boundary, RAG_TOOLS, "CAPSULE", &[image(PNG)]);
            assert_eq!(messages, before);
            assert_eq!(returns_of(&messages, "rag_search"), ["EVIDENCE"]);
            if boundary >= 3 {
                assert_eq!(returns_of(&out, "rag_search"), ["CAPSULE"]);
            }
        }
    }

    /// Scenario 52: with boundary 4 the only tool return is the capsule; without
    /// compaction (boundary 0) the earlier return goes out word for word.
    #[test]
    fn scenario_52_capsule_replaces_earlier_return() {
        let mut messages = answered("first", "OLD EVIDENCE");
        messages.push(prompt("second"));
        let out = compact_history(&messages, 4, RAG_TOOLS, "CAPSULE", &[]);
        assert_eq!(all_returns(&out), ["CAPSULE"]);
        assert_eq!(out.len(), messages.len());
        assert_eq!(out[4], messages[4]);
        let out = compact_history(&messages, 0, RAG_TOOLS, "CAPSULE", &[]);
        assert_eq!(all_returns(&out), ["OLD EVIDENCE"]);
    }

    /// Scenario 54: the current question's live return, another tool's return and a
    /// cite acknowledgement are untouched; the earlier search return carries the capsule.
    #[test]
    fn scenario_54_only_earlier_owned_returns_are_rewritten() {
        let messages = vec![
            prompt("first"),
            calls(&[("rag_search", "s1"), ("other_tool", "o1")]),
            request(vec![
                ret("rag_search", "s1", "OLD"),
                ret("other_tool", "o1", "NOT OURS"),
            ]),
            calls(&[("rag_cite", "c1")]),
            request(vec![ret("rag_cite", "c1", "Registered 1 citation(s).")]),
            text("an answer"),
            prompt("second"),
            calls(&[("rag_search", "s2")]),
            request(vec![ret("rag_search", "s2", "LIVE EVIDENCE")]),
        ];
        let out = compact_history(&messages, 6, RAG_TOOLS, "CAPSULE", &[]);
        assert_eq!(returns_of(&out, "rag_search"), ["CAPSULE", "LIVE EVIDENCE"]);
        assert_eq!(returns_of(&out, "other_tool"), ["NOT OURS"]);
        assert_eq!(returns_of(&out, "rag_cite"), ["Registered 1 citation(s)."]);
        assert_eq!(out[4], messages[4]);
        assert_eq!(&out[6..], &messages[6..]);
    }

    /// §8.1/8.3: failed returns of owned tools are rewritten too (outcome kept), and
    /// an empty capsule leaves only receipts.
    #[test]
    fn failed_owned_returns_become_receipts() {
        let mut failed = ToolReturnPart::new("rag_search", json!("Search limit reached."), "s2");
        failed.outcome = "failed".into();
        let messages = vec![
            prompt("first"),
            calls(&[("rag_search", "s1")]),
            request(vec![ret("rag_search", "s1", "OLD")]),
            calls(&[("rag_search", "s2")]),
            request(vec![ModelRequestPart::ToolReturn(failed)]),
            text("answer"),
        ];
        let out = compact_history(&messages, 6, RAG_TOOLS, "CAPSULE", &[]);
        assert_eq!(returns_of(&out, "rag_search"), [receipt(), "CAPSULE"]);
        let out = compact_history(&messages, 6, RAG_TOOLS, "", &[image(PNG)]);
        assert_eq!(returns_of(&out, "rag_search"), [receipt(), receipt()]);
        match &out[4] {
            ModelMessage::Request(r) => {
                let ModelRequestPart::ToolReturn(part) = &r.parts[0] else {
                    panic!("expected a return")
                };
                assert!(part.is_failed());
                // The carrier still takes the images (§8.3 does not tie them to the text).
                assert_eq!(r.parts.len(), 2);
            }
            ModelMessage::Response(_) => panic!("expected a request"),
        }
    }

    /// Scenario 56: a user's untagged label+image stays; a tagged label followed by
    /// text stays; a message made only of our pair is passed through as the original.
    #[test]
    fn scenario_56_only_our_tagged_pairs_are_stripped() {
        let user_items = vec![
            UserContent::Text(
                "Here is a page image retrieved from the knowledge base for my report".into(),
            ),
            image(PNG),
        ];
        let lone = vec![tagged_label(), UserContent::Text("and more".into())];
        let ours_only = vec![tagged_label(), image(PNG)];
        let messages = vec![
            ModelMessage::Request(ModelRequest::user(ours_only.clone())),
            text("ok"),
            ModelMessage::Request(ModelRequest::user(user_items.clone())),
            text("ok"),
            ModelMessage::Request(ModelRequest::user(lone.clone())),
            text("ok"),
            prompt("now"),
        ];
        let out = compact_history(&messages, 6, RAG_TOOLS, "CAPSULE", &[]);
        assert_eq!(out, messages);
        for message in &out {
            if let ModelMessage::Request(r) = message {
                assert!(!r.parts.is_empty());
            }
        }
        assert_eq!(strip_our_pictures(&ours_only), vec![]);
        assert_eq!(strip_our_pictures(&user_items), user_items);
        assert_eq!(strip_our_pictures(&lone), lone);
    }

    /// §8.4: our pair is removed from mixed content, the user's own items stay, and a
    /// part emptied by stripping is dropped while the message keeps its other parts.
    #[test]
    fn our_pairs_are_removed_from_mixed_content() {
        let mixed = vec![
            UserContent::Text("search results".into()),
            tagged_label(),
            image(b"ours"),
            image(b"users own"),
            tagged_label(),
        ];
        let stripped = strip_our_pictures(&mixed);
        assert_eq!(
            stripped,
            vec![mixed[0].clone(), mixed[3].clone(), mixed[4].clone()]
        );
        let messages = vec![
            prompt("first"),
            calls(&[("rag_search", "s1")]),
            request(vec![
                ret("rag_search", "s1", "OLD"),
                ModelRequestPart::UserPrompt(UserPromptPart::new(vec![tagged_label(), image(PNG)])),
            ]),
            text("answer"),
        ];
        let out = compact_history(&messages, 4, RAG_TOOLS, "", &[]);
        let request = out[2].as_request().unwrap();
        assert_eq!(request.parts.len(), 1);
        assert_eq!(returns_of(&out, "rag_search"), [receipt()]);
        // Above the boundary nothing is stripped.
        let out = compact_history(&messages, 2, RAG_TOOLS, "", &[]);
        assert_eq!(out, messages);
    }

    /// Scenario 57: two returns in one request → [RECEIPT, capsule]; the capsule
    /// images appear once, as a new user part of that same request.
    #[test]
    fn scenario_57_one_carrier_part_and_images_once() {
        let images = vec![UserContent::Text("label".into()), image(PNG)];
        let messages = vec![
            prompt("first"),
            calls(&[("rag_search", "a"), ("rag_search", "b")]),
            request(vec![
                ret("rag_search", "a", "E1"),
                ret("rag_search", "b", "E2"),
            ]),
            text("answer"),
            prompt("second"),
        ];
        assert_eq!(find_carrier(&messages, 4, RAG_TOOLS), Some((2, 1)));
        let out = compact_history(&messages, 4, RAG_TOOLS, "CAPSULE", &images);
        assert_eq!(returns_of(&out, "rag_search"), [receipt(), "CAPSULE"]);
        let mut image_parts = 0;
        for (index, message) in out.iter().enumerate() {
            let Some(r) = message.as_request() else {
                continue;
            };
            for part in &r.parts {
                if let ModelRequestPart::UserPrompt(p) = part
                    && p.content == UserContentValue::Items(images.clone())
                {
                    image_parts += 1;
                    assert_eq!(index, 2);
                }
            }
        }
        assert_eq!(image_parts, 1);
        assert!(matches!(
            out[2].as_request().unwrap().parts.last(),
            Some(ModelRequestPart::UserPrompt(_))
        ));
    }

    /// Scenario 58: an earlier owned return of a capability whose state was not
    /// carried is refused, naming the capability; with carried evidence
    /// `{question: 0, in_progress: false}` the follow-up gets [RECEIPT].
    #[test]
    fn scenario_58_refusal_without_carried_state() {
        let mut messages = answered("an earlier question", "EVIDENCE TO LOSE");
        messages.push(prompt("follow-up"));
        let history_len = 4;

        let (fresh, carried) = settle_for_run(StateKind::Rag, None, history_len, false).unwrap();
        assert!(!carried);
        let views = [EvidenceView::new("rag", &fresh, RAG_TOOLS, carried)];
        let boundary = question_in_progress(&views);
        assert_eq!(boundary, 4);
        let err = require_records(&views, &messages, boundary).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("carry the capability state"), "{text}");
        assert!(text.contains("rag"));

        let raw = json!({"evidence": {"question": 0, "in_progress": false}});
        let (state, carried) =
            settle_for_run(StateKind::Rag, Some(&raw), history_len, false).unwrap();
        assert!(carried);
        let views = [EvidenceView::new("rag", &state, RAG_TOOLS, carried)];
        require_records(&views, &messages, question_in_progress(&views)).unwrap();
        let capsule = build_capsule(&views).unwrap();
        assert_eq!(capsule, Capsule::default());
        let out = compact_history(
            &messages,
            question_in_progress(&views),
            &owned_tools(&views),
            &capsule.text,
            &[],
        );
        assert_eq!(all_returns(&out), [receipt()]);
    }

    /// §8.6: a non-carried capability whose tools never ran earlier does not block,
    /// and one capability's carried record does not vouch for another's.
    #[test]
    fn refusal_is_per_capability() {
        let mut messages = answered("q", "E");
        messages.push(prompt("follow-up"));
        let rag = EvidenceState::empty(StateKind::Rag);
        let analysis = EvidenceState::empty(StateKind::Analysis);
        let views = [
            EvidenceView::new("analysis", &analysis, ANALYSIS_TOOLS, false),
            EvidenceView::new("rag", &rag, RAG_TOOLS, true),
        ];
        require_records(&views, &messages, 4).unwrap();
        let views = [
            EvidenceView::new("analysis", &analysis, ANALYSIS_TOOLS, true),
            EvidenceView::new("rag", &rag, RAG_TOOLS, false),
        ];
        let err = require_records(&views, &messages, 4).unwrap_err();
        assert_eq!(
            err,
            CompactionError::StateNotCarried {
                capability: "rag".into()
            }
        );
        // Returns at or above the boundary are the current question's: no refusal.
        require_records(&views, &messages, 2).unwrap();
    }

    /// Scenario 60: header once, groups newest first, entries sorted, reused evidence
    /// once in the newest group; rag and analysis share one capsule.
    #[test]
    fn scenario_60_capsule_groups_and_order() {
        let state = cited_state(
            "rag",
            StateKind::Rag,
            &[("old", 2), ("reused", 2), ("new", 8), ("reused", 8)],
        );
        let capsule = build_capsule(&[rag_view(&state)]).unwrap();
        let text = &capsule.text;
        assert_eq!(text.matches(capsule_header()).count(), 1);
        assert!(text.starts_with(capsule_header()));
        let g1 = text.find("[Cited evidence group 1]").unwrap();
        let g2 = text.find("[Cited evidence group 2]").unwrap();
        let new = text.find("[new]").unwrap();
        let old = text.find("[old]").unwrap();
        let reused = text.find("[reused]").unwrap();
        assert!(g1 < g2 && new < old);
        assert!(g1 < reused && reused < g2);
        assert_eq!(text.matches("[reused]").count(), 1);
        assert!(!text.contains("[Cited evidence group 3]"));
        // Exact structure: pieces joined by a blank line.
        let pieces: Vec<&str> = text.split(ENTRY_SEPARATOR).collect();
        assert_eq!(
            pieces,
            [
                capsule_header(),
                "[Cited evidence group 1]",
                "[new] Source: \"Doc\" (test://doc)\ncontent of new",
                "[reused] Source: \"Doc\" (test://doc)\ncontent of reused",
                "[Cited evidence group 2]",
                "[old] Source: \"Doc\" (test://doc)\ncontent of old",
            ]
        );

        let rag = cited_state("rag", StateKind::Rag, &[("r1", 4)]);
        let analysis = cited_state("analysis", StateKind::Analysis, &[("a1", 6)]);
        let views = [
            EvidenceView::new("analysis", &analysis, ANALYSIS_TOOLS, true),
            rag_view(&rag),
        ];
        let capsule = build_capsule(&views).unwrap();
        assert_eq!(capsule.text.matches(capsule_header()).count(), 1);
        let a1 = capsule.text.find("[a1]").unwrap();
        let r1 = capsule.text.find("[r1]").unwrap();
        assert!(a1 < r1);
        assert!(capsule.text.contains("[Cited evidence group 2]"));
    }

    /// Sort ties: same question → capability ascending, then chunk id ascending.
    #[test]
    fn entries_sort_by_capability_then_chunk() {
        let rag = cited_state("rag", StateKind::Rag, &[("b", 3), ("a", 3)]);
        let analysis = cited_state("analysis", StateKind::Analysis, &[("z", 3)]);
        let views = [
            rag_view(&rag),
            EvidenceView::new("analysis", &analysis, ANALYSIS_TOOLS, true),
        ];
        let entries = eligible_entries(&views).unwrap();
        let order: Vec<(&str, &str)> = entries.iter().map(|e| (e.capability, e.chunk_id)).collect();
        assert_eq!(order, [("analysis", "z"), ("rag", "a"), ("rag", "b")]);
    }

    /// Scenario 61: the source line.
    #[test]
    fn scenario_61_source_rule() {
        let entry = |c: &Citation| {
            CapsuleEntry {
                capability: "rag",
                chunk_id: "c",
                question: 0,
                citation: c,
            }
            .render(false)
        };
        let same = citation("c", Some("2410.11843v5"), "2410.11843v5", "x");
        let rendered = entry(&same);
        assert!(
            rendered.starts_with("[c] Source: \"2410.11843v5\"\n"),
            "{rendered}"
        );
        assert!(!rendered.contains("2410.11843v5)"));
        let both = citation("c", Some("Title a"), "test://a", "x");
        assert!(entry(&both).starts_with("[c] Source: \"Title a\" (test://a)\nx"));
        let no_title = citation("c", None, "test://b", "x");
        assert_eq!(entry(&no_title), "[c] Source: test://b\nx");
        let nothing = citation("c", None, "", "x");
        assert_eq!(entry(&nothing), "[c] Source: \nx");
        let title_only = citation("c", Some("T"), "", "x");
        assert_eq!(entry(&title_only), "[c] Source: \"T\"\nx");
    }

    /// Scenario 63: retrieved-only evidence is absent (and its pictures too); cited
    /// content of 20 000 characters is kept whole.
    #[test]
    fn scenario_63_retrieved_only_absent_and_no_size_budget() {
        let long = "x".repeat(20_000);
        let mut state = EvidenceState::empty(StateKind::Rag);
        state.evidence.begin_question(2).unwrap();
        let mut big = citation("big", Some("Doc"), "test://doc", &long);
        big.picture_refs = vec!["#/pictures/1".into()];
        state.citation_index.insert("big", big);
        state.declare(&[CitationRef::new("rag", "big")], 3).unwrap();
        // A retrieved-only occurrence (hand-written: retrieval never creates one).
        state.evidence.occurrences.insert(
            "seen",
            crate::capabilities::state::EvidenceOccurrence {
                capability: "rag".into(),
                chunk_id: "seen".into(),
                retrieved_in_questions: vec![2],
                cited_in_questions: vec![],
            },
        );
        let mut seen = citation("seen", Some("Doc"), "test://doc", "RETRIEVED ONLY");
        seen.picture_refs = vec!["#/pictures/9".into()];
        state.citation_index.insert("seen", seen);
        let capsule = build_capsule(&[rag_view(&state)]).unwrap();
        assert!(capsule.text.contains(&long));
        assert!(!capsule.text.contains("[seen]"));
        assert!(!capsule.text.contains("RETRIEVED ONLY"));
        let refs: Vec<&str> = capsule
            .pictures
            .iter()
            .map(|p| p.self_ref.as_str())
            .collect();
        assert_eq!(refs, ["#/pictures/1"]);
    }

    /// §8.2: a cited occurrence without a citation record is an error naming it.
    #[test]
    fn cited_occurrence_without_citation_is_an_error() {
        let mut state = cited_state("rag", StateKind::Rag, &[("kept", 0)]);
        state.evidence.begin_question(2).unwrap();
        state
            .declare(&[CitationRef::new("rag", "ghost")], 3)
            .unwrap();
        let err = build_capsule(&[rag_view(&state)]).unwrap_err();
        assert!(err.to_string().contains("ghost"), "{err}");
        assert!(matches!(err, CompactionError::MissingCitation { .. }));
    }

    /// Nothing cited → empty text and no pictures.
    #[test]
    fn empty_capsule() {
        let state = EvidenceState::empty(StateKind::Rag);
        assert_eq!(
            build_capsule(&[rag_view(&state)]).unwrap(),
            Capsule::default()
        );
        assert_eq!(build_capsule(&[]).unwrap(), Capsule::default());
    }

    /// Scenario 65: the one cited picture comes back labelled, with our tag, when the
    /// owner returns PNG bytes; nothing (label included) when the fetch returns
    /// nothing or undecodable bytes.
    #[test]
    fn scenario_65_cited_picture_rehydration() {
        let mut state = EvidenceState::empty(StateKind::Rag);
        state.evidence.begin_question(1).unwrap();
        let mut c = citation("chunk-1", Some("Doc"), "test://doc", "a figure");
        c.picture_refs = vec!["#/pictures/0".into()];
        state.citation_index.insert("chunk-1", c);
        state
            .declare(&[CitationRef::new("rag", "chunk-1")], 2)
            .unwrap();
        state.evidence.end_question();
        let capsule = build_capsule(&[rag_view(&state)]).unwrap();
        assert_eq!(capsule.pictures.len(), 1);
        let picture = &capsule.pictures[0];
        assert_eq!(
            (
                picture.capability.as_str(),
                picture.document_id.as_str(),
                picture.self_ref.as_str()
            ),
            ("rag", "doc-1", "#/pictures/0")
        );

        let mut asked = Vec::new();
        let content = capsule_images(&capsule.pictures, |p| {
            asked.push((
                p.capability.clone(),
                p.document_id.clone(),
                p.self_ref.clone(),
            ));
            Some(PNG.to_vec())
        });
        assert_eq!(
            asked,
            [("rag".into(), "doc-1".into(), "#/pictures/0".into())]
        );
        assert_eq!(content.len(), 2);
        let UserContent::Text(label) = &content[0] else {
            panic!("label first")
        };
        assert!(label.ends_with(RETRIEVED_IMAGE_TAG));
        assert!(label.contains("[chunk-1]") && label.contains("(#/pictures/0)"));
        let UserContent::Binary(bytes) = &content[1] else {
            panic!("image second")
        };
        assert_eq!(bytes.media_type, "image/png");
        assert_eq!(bytes.identifier.as_deref(), Some("#/pictures/0"));

        // Our own stripping recognises what we emit.
        assert!(strip_our_pictures(&content).is_empty());

        assert!(capsule_images(&capsule.pictures, |_| None).is_empty());
        assert!(capsule_images(&capsule.pictures, |_| Some(b"not an image".to_vec())).is_empty());
        assert!(capsule_images(&capsule.pictures, |_| Some(Vec::new())).is_empty());

        // Carried through compaction: the one image goes on the carrier's request.
        let mut messages = answered("first", "EVIDENCE");
        messages.push(prompt("second"));
        let out = compact_history(&messages, 4, RAG_TOOLS, &capsule.text, &content);
        let images: usize = out
            .iter()
            .filter_map(ModelMessage::as_request)
            .flat_map(|r| r.parts.iter())
            .filter_map(|p| match p {
                ModelRequestPart::UserPrompt(u) => match &u.content {
                    UserContentValue::Items(items) => Some(
                        items
                            .iter()
                            .filter(|i| matches!(i, UserContent::Binary(_)))
                            .count(),
                    ),
                    UserContentValue::Text(_) => None,
                },
                _ => None,
            })
            .sum();
        assert_eq!(images, 1);
    }

    /// §8.5: the same ref cited through two chunks of one document is kept once
    /// (first chunk in capsule order wins); the same ref in two documents is two
    /// pictures; the same ref under two capabilities is two pictures.
    #[test]
    fn picture_dedup_rules() {
        let mut state = EvidenceState::empty(StateKind::Rag);
        state.evidence.begin_question(1).unwrap();
        for (chunk, doc) in [("a", "doc-1"), ("b", "doc-1"), ("c", "doc-2")] {
            let mut c = citation(chunk, Some("Doc"), "test://doc", "x");
            c.document_id = doc.into();
            c.picture_refs = vec!["#/pictures/0".into()];
            state.citation_index.insert(chunk, c);
        }
        state
            .declare(
                &[
                    CitationRef::new("rag", "b"),
                    CitationRef::new("rag", "a"),
                    CitationRef::new("rag", "c"),
                ],
                2,
            )
            .unwrap();
        let analysis = {
            let mut s = EvidenceState::empty(StateKind::Analysis);
            s.evidence.begin_question(1).unwrap();
            let mut c = citation("a", Some("Doc"), "test://doc", "x");
            c.picture_refs = vec!["#/pictures/0".into()];
            s.citation_index.insert("a", c);
            s.declare(&[CitationRef::new("analysis", "a")], 2).unwrap();
            s
        };
        let views = [
            EvidenceView::new("analysis", &analysis, ANALYSIS_TOOLS, true),
            rag_view(&state),
        ];
        let capsule = build_capsule(&views).unwrap();
        let got: Vec<(&str, &str, &str)> = capsule
            .pictures
            .iter()
            .map(|p| {
                (
                    p.capability.as_str(),
                    p.chunk_id.as_str(),
                    p.document_id.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("analysis", "a", "doc-1"),
                ("rag", "a", "doc-1"),
                ("rag", "c", "doc-2")
            ]
        );
        // A missing picture drops only its own pair.
        let content = capsule_images(&capsule.pictures, |p| {
            (p.document_id != "doc-2").then(|| PNG.to_vec())
        });
        assert_eq!(content.len(), 4);
    }

    /// Scenario 67: a resumed question (carried `{question: 4, in_progress: true}`)
    /// keeps its live evidence; the earlier return becomes a receipt.
    #[test]
    fn scenario_67_resumed_question_keeps_live_evidence() {
        let mut messages = answered("an earlier question", "EVIDENCE FOR THE OLD TURN");
        messages.extend([
            prompt("the live question"),
            calls(&[("rag_search", "call-2")]),
            request(vec![ret(
                "rag_search",
                "call-2",
                "EVIDENCE FOR THE LIVE TURN",
            )]),
        ]);
        let raw =
            json!({"evidence": {"question": 4, "in_progress": true, "latest_evidence_epoch": 5}});
        for awaits in [false, true] {
            let (state, carried) =
                settle_for_run(StateKind::Rag, Some(&raw), messages.len(), awaits).unwrap();
            let views = [EvidenceView::new("rag", &state, RAG_TOOLS, carried)];
            let boundary = question_in_progress(&views);
            assert_eq!(boundary, 4);
            require_records(&views, &messages, boundary).unwrap();
            let capsule = build_capsule(&views).unwrap();
            let out = compact_history(
                &messages,
                boundary,
                &owned_tools(&views),
                &capsule.text,
                &[],
            );
            assert_eq!(
                returns_of(&out, "rag_search"),
                [receipt(), "EVIDENCE FOR THE LIVE TURN"]
            );
        }
    }

    /// A user prompt with string content and responses below the boundary are never
    /// rewritten; the cite tool is not an owned tool.
    #[test]
    fn owned_tools_union_and_untouched_kinds() {
        let rag = EvidenceState::empty(StateKind::Rag);
        let analysis = EvidenceState::empty(StateKind::Analysis);
        let views = [
            EvidenceView::new("analysis", &analysis, ANALYSIS_TOOLS, true),
            rag_view(&rag),
        ];
        assert_eq!(
            owned_tools(&views),
            ["analysis_execute_code", "analysis_search", "rag_search"]
        );
        let messages = vec![
            prompt("q"),
            calls(&[("analysis_execute_code", "x"), ("load_capability", "l")]),
            request(vec![
                ret("analysis_execute_code", "x", "42"),
                ret("load_capability", "l", "# RAG"),
            ]),
            text("a"),
            prompt("next"),
        ];
        let out = compact_history(&messages, 4, &owned_tools(&views), "", &[]);
        assert_eq!(returns_of(&out, "analysis_execute_code"), [receipt()]);
        assert_eq!(returns_of(&out, "load_capability"), ["# RAG"]);
        assert_eq!(out[0], messages[0]);
        assert_eq!(out[1], messages[1]);
        assert_eq!(out[3], messages[3]);
    }

    /// More than one cited collection adds a `Collection:` line to each entry.
    #[test]
    fn collection_line_only_with_several_collections() {
        let mut state = cited_state("rag", StateKind::Rag, &[("a", 1), ("b", 1)]);
        let capsule = build_capsule(&[rag_view(&state)]).unwrap();
        assert!(!capsule.text.contains("Collection:"));
        state.citation_index.get_mut("a").unwrap().collection = Some("manuals".into());
        state.citation_index.get_mut("b").unwrap().collection = Some("manuals".into());
        let capsule = build_capsule(&[rag_view(&state)]).unwrap();
        assert!(!capsule.text.contains("Collection:"));
        state.citation_index.get_mut("b").unwrap().collection = Some("papers".into());
        let capsule = build_capsule(&[rag_view(&state)]).unwrap();
        assert!(
            capsule
                .text
                .contains("[a] Source: \"Doc\" (test://doc)\nCollection: manuals\ncontent of a")
        );
        assert!(
            capsule
                .text
                .contains("[b] Source: \"Doc\" (test://doc)\nCollection: papers\ncontent of b")
        );
        let v: Value = serde_json::to_value(state.citation_index.get("b").unwrap()).unwrap();
        assert_eq!(v["collection"], "papers");
    }

    /// Prose comes from the asset files; the machine literals are exact.
    #[test]
    fn labels_and_literals() {
        assert_eq!(group_label(3), "[Cited evidence group 3]");
        assert!(!capsule_header().is_empty() && !capsule_header().ends_with('\n'));
        assert!(!receipt().is_empty() && !receipt().contains('\n'));
        let label = picture_label("{self_ref}", "#/pictures/2");
        assert!(label.contains("[{self_ref}]") && label.contains("(#/pictures/2)"));
        assert!(label.ends_with(&format!(" {RETRIEVED_IMAGE_TAG}")));
        assert_eq!(
            fill("a {x} {y} {z", &[("x", "1"), ("y", "{x}")]),
            "a 1 {x} {z"
        );
    }

    #[test]
    fn image_signatures() {
        assert_eq!(image_media_type(PNG), Some("image/png"));
        assert_eq!(
            image_media_type(b"\xff\xd8\xff\xe0rest"),
            Some("image/jpeg")
        );
        assert_eq!(image_media_type(b"GIF89a...."), Some("image/gif"));
        assert_eq!(
            image_media_type(b"RIFF\0\0\0\0WEBPVP8 "),
            Some("image/webp")
        );
        assert_eq!(image_media_type(b"\x89PNG\r\n\x1a\n"), None);
        assert_eq!(image_media_type(b"not an image"), None);
    }
}
