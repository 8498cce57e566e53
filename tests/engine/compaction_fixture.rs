//! The compaction benchmark's input (`tests/fixtures/compaction_bench/`): a 50-question
//! conversation with 200 cited chunks recorded by haiku.rag 0.77's own capabilities, with
//! question 51 about to send its first request. Groundwork's compaction of that request is
//! the one haiku.rag produced (`results.json.expected_output`): the same carrier, the same
//! receipts, the same capsule groups of chunk ids, newest first. `benches/compaction.rs`
//! times exactly this operation.

use std::path::Path;

use groundwork::capabilities::compaction::{
    EvidenceView, build_capsule, capsule_header, compact_history, group_label, owned_tools,
    question_in_progress, receipt, require_records,
};
use groundwork::capabilities::state::{EvidenceState, StateKind};
use groundwork::engine::messages::{ModelMessage, ModelRequestPart};
use groundwork::session::Session;
use serde_json::Value;

#[test]
fn compaction_of_the_benchmark_conversation_matches_haiku_rag() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compaction_bench");
    let session = Session::load(&dir.join("session.json")).unwrap();
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let expected = &results["expected_output"];
    assert_eq!(session.messages.len(), 351);

    let rag = EvidenceState::load(StateKind::Rag, &session.state["rag"]).unwrap();
    let views = [EvidenceView::new("rag", &rag, &["rag_search"], true)];
    let boundary = question_in_progress(&views);
    assert_eq!(boundary, 350);
    require_records(&views, &session.messages, boundary).unwrap();
    let owned = owned_tools(&views);
    let capsule = build_capsule(&views).unwrap();
    let out = compact_history(&session.messages, boundary, &owned, &capsule.text, &[]);
    assert_eq!(out.len(), session.messages.len());
    // The stored history is untouched; only the outgoing copy is rewritten.
    assert_ne!(out, session.messages);

    let returns = |m: &ModelMessage| -> Vec<String> {
        m.as_request()
            .map(|r| {
                r.parts
                    .iter()
                    .filter_map(|p| match p {
                        ModelRequestPart::ToolReturn(t) if t.tool_name == "rag_search" => {
                            Some(t.content_text())
                        }
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut receipts = Vec::new();
    let mut carriers = Vec::new();
    for (i, m) in out.iter().enumerate() {
        for text in returns(m) {
            if text.trim() == receipt().trim() {
                receipts.push(i as u64);
            } else if text.starts_with(capsule_header().lines().next().unwrap()) {
                carriers.push((i as u64, text));
            }
        }
    }
    let want: Vec<u64> = expected["receipt_message_indices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(receipts, want, "receipts");
    assert_eq!(carriers.len(), 1, "exactly one carrier");
    assert_eq!(
        carriers[0].0,
        expected["carrier"]["message_index"].as_u64().unwrap()
    );

    // The capsule's groups of chunk ids, newest question first.
    let mut groups: Vec<Vec<String>> = Vec::new();
    for line in carriers[0].1.lines() {
        if (1..=60).any(|k| line.trim() == group_label(k)) {
            groups.push(Vec::new());
        } else if let Some(g) = groups.last_mut()
            && line.starts_with('[')
            && line.len() > 37
            && &line[37..38] == "]"
        {
            g.push(line[1..37].to_string());
        }
    }
    let want: Vec<Vec<String>> =
        serde_json::from_value(expected["capsule_groups"].clone()).unwrap();
    assert_eq!(groups.len(), 50);
    assert_eq!(groups, want, "capsule groups");
}
