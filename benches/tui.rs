//! Frame render time of the workbench at 200×60 on ratatui's `TestBackend`:
//! a 500-message conversation (250 questions, each a prompt and a Markdown answer after a
//! search and a cite) and its 250-row ledger, and a 1,000-row ledger (1,000 questions).
//! "first frame" includes wrapping the whole conversation; "steady frame" is a redraw with
//! the wrap cache warm, which is what streaming and key presses cost.
//!
//! `cargo bench --bench tui`

use criterion::{Criterion, criterion_group, criterion_main};
use groundwork::engine::messages::{
    ModelMessage, ModelRequest, ModelRequestPart, ModelResponse, ModelResponsePart, TextPart,
    ToolCallPart, ToolReturnPart,
};
use groundwork::session::Session;
use groundwork::tui::app::{App, HostInfo, Pane};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;

fn session(questions: usize, with_tools: bool) -> Session {
    let mut s = Session::new("bench");
    for q in 0..questions {
        s.messages
            .push(ModelMessage::from(ModelRequest::user(format!(
                "Question {q}: how did the battery banks behave during the outage in week {q}?"
            ))));
        if with_tools {
            s.messages.push(ModelMessage::from(ModelResponse::new(vec![
                ModelResponsePart::ToolCall(ToolCallPart::new(
                    "rag_search",
                    json!({"query": format!("battery outage week {q}")}).to_string(),
                    format!("call_{q}_0"),
                )),
            ])));
            s.messages.push(ModelMessage::from(ModelRequest::new(vec![
                ModelRequestPart::ToolReturn(ToolReturnPart::new(
                    "rag_search",
                    json!(format!("[chunk-{q}] [rank 1 of 1]\nSource: \"Field report\"\nContent:\nThe banks held.")),
                    format!("call_{q}_0"),
                )),
            ])));
        }
        s.messages.push(ModelMessage::from(ModelResponse::new(vec![
            ModelResponsePart::Text(TextPart::new(format!(
                "During week {q} the **two banks** carried the critical loads for *four hours*.\n\n\
                 - state of charge stayed above 20 %\n- the inverter switched in 40 ms\n\n\
                 The clinic and the cold store never lost power, as the operator log shows."
            ))),
        ])));
    }
    s
}

fn host() -> HostInfo {
    HostInfo {
        knowledge_bases: Vec::new(),
        knowledge_base_note: None,
        collections: Vec::new(),
        db: "bench.lancedb".into(),
        model: "bench".into(),
        model_ready: true,
        model_help: String::new(),
        capabilities: vec!["rag".into()],
        max_searches: 5,
        max_executions: 15,
    }
}

fn frame(c: &mut Criterion) {
    let mut term = Terminal::new(TestBackend::new(200, 60)).unwrap();
    // 250 questions × (prompt, tool call, tool return, answer) = 1,000 messages; the
    // 500-message case has no tool round trip: 250 × (prompt, answer).
    let mut chat = App::new(session(250, false), None, host());
    assert_eq!(chat.session.messages.len(), 500);
    chat.focus = Pane::Conversation;
    c.bench_function("frame 200x60, 500-message conversation, steady", |b| {
        groundwork::tui::draw(&mut term, &mut chat).unwrap();
        b.iter(|| groundwork::tui::draw(&mut term, &mut chat).unwrap())
    });
    c.bench_function(
        "frame 200x60, 500-message conversation, first (wraps all)",
        |b| {
            b.iter(|| {
                chat.version += 1;
                groundwork::tui::draw(&mut term, &mut chat).unwrap()
            })
        },
    );
    let mut ledger = App::new(session(1000, true), None, host());
    assert_eq!(ledger.transcript.ledger.len(), 1000);
    ledger.focus = Pane::Ledger;
    ledger.zoom = true;
    ledger.ledger.selected = 500;
    c.bench_function("frame 200x60, 1,000-row ledger", |b| {
        b.iter(|| groundwork::tui::draw(&mut term, &mut ledger).unwrap())
    });
    c.bench_function("transcript + ledger from a 4,000-message session", |b| {
        b.iter(|| {
            groundwork::host::transcript::Transcript::build(
                &ledger.session.messages,
                &ledger.session.state,
            )
        })
    });
}

criterion_group!(benches, frame);
criterion_main!(benches);
