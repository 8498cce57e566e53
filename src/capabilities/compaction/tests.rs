//! Unit tests of the pure core, one per SPEC §8 scenario (51–67) and rule. Kept in one
//! file because they share the conversation and state builders at the top.

use super::*;
use crate::capabilities::state::{Citation, CitationRef, EvidenceState, StateKind, settle_for_run};
use crate::engine::messages::{
    BinaryContent, ModelMessage, ModelRequest, ModelRequestPart, ModelResponse, ModelResponsePart,
    TextPart, ToolCallPart, ToolReturnPart, UserContent, UserContentValue, UserPromptPart,
};
use serde_json::{Value, json};

mod rewrites;

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0";
const RAG_TOOLS: &[&str] = &["rag_search"];
const ANALYSIS_TOOLS: &[&str] = &["analysis_search", "analysis_execute_code"];

fn prompt(text: &str) -> ModelMessage {
    ModelMessage::from(ModelRequest::user(text))
}

fn calls(names: &[(&str, &str)]) -> ModelMessage {
    ModelMessage::from(ModelResponse::new(
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
    ModelMessage::from(ModelRequest::new(parts))
}

fn text(content: &str) -> ModelMessage {
    ModelMessage::from(ModelResponse::new(vec![ModelResponsePart::Text(
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
        ModelMessage::from(ModelRequest::user(ours_only.clone())),
        text("ok"),
        ModelMessage::from(ModelRequest::user(user_items.clone())),
        text("ok"),
        ModelMessage::from(ModelRequest::user(lone.clone())),
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
    let (state, carried) = settle_for_run(StateKind::Rag, Some(&raw), history_len, false).unwrap();
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

    // Read back (the inspector selects these): every entry once, in capsule order,
    // group labels and the header left out.
    let refs = capsule_entry_refs(text);
    let ids: Vec<&str> = refs.iter().map(|r| r.chunk_id.as_str()).collect();
    assert_eq!(ids, ["new", "reused", "old"]);
    assert_eq!(refs[0].source, "\"Doc\" (test://doc)");
    assert_eq!(refs[0].document(), "Doc");
    assert!(capsule_entry_refs("no capsule here").is_empty());

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
    let raw = json!({"evidence": {"question": 4, "in_progress": true, "latest_evidence_epoch": 5}});
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

/// The capsule key holds while nothing the capsule shows changes, and breaks on a new
/// citation, on a re-citation in a newer question and on another capability's view.
#[test]
fn capsule_key_follows_citations() {
    let state = cited_state("rag", StateKind::Rag, &[("a", 1), ("b", 2)]);
    let views = [rag_view(&state)];
    let key = CapsuleKey::of(&views);
    assert!(key.holds_for(&views));
    assert_eq!(key, CapsuleKey::of(&views));

    // A retrieved-only occurrence changes nothing the capsule shows.
    let mut retrieved = state.clone();
    retrieved.evidence.begin_question(3).unwrap();
    retrieved
        .evidence
        .occurrences
        .get_or_insert_with("c", crate::capabilities::state::EvidenceOccurrence::default)
        .retrieved_in_questions
        .push(3);
    assert!(key.holds_for(&[rag_view(&retrieved)]));
    assert_eq!(
        build_capsule(&[rag_view(&retrieved)]).unwrap(),
        build_capsule(&views).unwrap()
    );

    // A new citation in the question in progress.
    let cited = cited_state("rag", StateKind::Rag, &[("a", 1), ("b", 2), ("c", 3)]);
    assert!(!key.holds_for(&[rag_view(&cited)]));
    // The same chunk cited again, in a newer question: it moves to the newest group.
    let again = cited_state("rag", StateKind::Rag, &[("a", 1), ("b", 2), ("a", 3)]);
    assert!(!key.holds_for(&[rag_view(&again)]));
    assert_ne!(
        build_capsule(&[rag_view(&again)]).unwrap().text,
        build_capsule(&views).unwrap().text
    );
    // A second capability appears (deferred loading), or the first one goes.
    let analysis = cited_state("analysis", StateKind::Analysis, &[("x", 1)]);
    let both = [
        rag_view(&state),
        EvidenceView::new("analysis", &analysis, ANALYSIS_TOOLS, true),
    ];
    assert!(!key.holds_for(&both));
    assert!(!key.holds_for(&[]));
    assert!(CapsuleKey::of(&both).holds_for(&both));
}

/// Writing the capsule into one buffer gives exactly the pieces joined by the separator.
#[test]
fn capsule_text_is_the_joined_pieces() {
    let mut state = cited_state("rag", StateKind::Rag, &[("a", 1), ("b", 2), ("c", 2)]);
    state.citation_index.get_mut("b").unwrap().collection = Some("manuals".into());
    let views = [rag_view(&state)];
    let entries = eligible_entries(&views).unwrap();
    let expected = [
        capsule_header().to_string(),
        group_label(1),
        entries[0].render(true),
        entries[1].render(true),
        group_label(2),
        entries[2].render(true),
    ]
    .join(ENTRY_SEPARATOR);
    assert_eq!(build_capsule(&views).unwrap().text, expected);
}
