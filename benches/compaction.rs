//! Building the capsule and compacting the request, per model request, for a 50-question
//! conversation with 200 cited chunks (`tests/fixtures/compaction_bench/session.json`,
//! recorded by haiku.rag 0.77's own capabilities; question 51 is about to send its first
//! request). The same operation haiku.rag's `EvidenceCompactionCapability.wrap_model_request`
//! performs, timed there by `tests/fixtures/compaction_bench/make_bench.py` on the same
//! input (`results.json`): evidence views from the run's state, the boundary, the record
//! check, the owned tools, the capsule text, and the rewritten outgoing message list. The
//! engine hands the capability an owned outgoing copy of the history, which is rewritten in
//! place (`compact_history_owned`); that copy is made outside the timed section, as
//! haiku.rag's benchmark resets its list outside its own. Loading the session and the state
//! is excluded on both sides (a run does it once). A second figure includes cloning the
//! 1.6 MB history (`compact_history` on a borrowed slice).
//! `tests/engine/compaction_fixture.rs` checks that the output is haiku.rag's.
//!
//! The capsule only changes when a citation does, so the hook keeps it for the run under
//! its [`CapsuleKey`]: the first request of a question builds it, every later request of
//! the question (after a search, a code run, a retry) checks the key and reuses it. The
//! "capsule kept" figure is that per-request path; haiku.rag rebuilds the capsule on
//! every request, so its figure is the same 704 µs either way. The hook also keeps the
//! run's rewrites ([`Rewrites`]), which a later request of the run takes as they are;
//! every figure here starts without them, as a run's first request does.
//!
//! `cargo bench --bench compaction`

use std::path::Path;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use groundwork::capabilities::compaction::{
    CapsuleKey, EvidenceView, Rewrites, build_capsule, compact_history, compact_history_owned,
    owned_tools, question_in_progress, require_records,
};
use groundwork::capabilities::state::{EvidenceState, StateKind};
use groundwork::session::Session;

fn compaction(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compaction_bench");
    let session = Session::load(&dir.join("session.json")).unwrap();
    let rag = EvidenceState::load(StateKind::Rag, &session.state["rag"]).unwrap();
    let messages = &session.messages;

    c.bench_function(
        "capsule + compacted request (50 questions, 200 cited chunks)",
        |b| {
            b.iter_batched(
                || messages.clone(),
                |outgoing| {
                    let views = [EvidenceView::new("rag", &rag, &["rag_search"], true)];
                    let boundary = question_in_progress(&views);
                    require_records(&views, &outgoing, boundary).unwrap();
                    let owned = owned_tools(&views);
                    let capsule = build_capsule(&views).unwrap();
                    compact_history_owned(
                        outgoing,
                        &mut Rewrites::default(),
                        boundary,
                        &owned,
                        &capsule.text,
                        &[],
                    )
                },
                BatchSize::LargeInput,
            )
        },
    );
    let kept = {
        let views = [EvidenceView::new("rag", &rag, &["rag_search"], true)];
        (CapsuleKey::of(&views), build_capsule(&views).unwrap().text)
    };
    c.bench_function(
        "capsule kept: key check + compacted request (later requests of a question)",
        |b| {
            b.iter_batched(
                || messages.clone(),
                |outgoing| {
                    let views = [EvidenceView::new("rag", &rag, &["rag_search"], true)];
                    let boundary = question_in_progress(&views);
                    require_records(&views, &outgoing, boundary).unwrap();
                    let owned = owned_tools(&views);
                    assert!(kept.0.holds_for(&views));
                    compact_history_owned(
                        outgoing,
                        &mut Rewrites::default(),
                        boundary,
                        &owned,
                        &kept.1,
                        &[],
                    )
                },
                BatchSize::LargeInput,
            )
        },
    );
    c.bench_function("CapsuleKey::holds_for (200 cited chunks)", |b| {
        let views = [EvidenceView::new("rag", &rag, &["rag_search"], true)];
        b.iter(|| kept.0.holds_for(&views))
    });
    c.bench_function("the same, cloning the history first", |b| {
        b.iter(|| {
            let views = [EvidenceView::new("rag", &rag, &["rag_search"], true)];
            let boundary = question_in_progress(&views);
            require_records(&views, messages, boundary).unwrap();
            let owned = owned_tools(&views);
            let capsule = build_capsule(&views).unwrap();
            compact_history(messages, boundary, &owned, &capsule.text, &[])
        })
    });
    let views = [EvidenceView::new("rag", &rag, &["rag_search"], true)];
    c.bench_function("build_capsule (200 entries, 50 groups)", |b| {
        b.iter(|| build_capsule(&views).unwrap())
    });
    let capsule = build_capsule(&views).unwrap();
    let owned = owned_tools(&views);
    c.bench_function(
        "compact_history_owned (351 messages, 75 owned returns)",
        |b| {
            b.iter_batched(
                || messages.clone(),
                |outgoing| {
                    compact_history_owned(
                        outgoing,
                        &mut Rewrites::default(),
                        350,
                        &owned,
                        &capsule.text,
                        &[],
                    )
                },
                BatchSize::LargeInput,
            )
        },
    );
}

criterion_group!(benches, compaction);
criterion_main!(benches);
