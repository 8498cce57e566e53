//! The engine's own overhead per model request: everything but the HTTP round trip.
//!
//! A 200-message conversation (100 request/response pairs with tool calls, returns and
//! prose) is handed to the agent as history; one run makes one model request to an
//! in-process model that answers at once, so what is timed is the loop itself: building the
//! request, instructions, tool preparation, every capability hook, the request snapshot with
//! its token estimates for the raw and the sent messages, the per-run copy of history and
//! state, and the run result. The HTTP client is measured separately by the model-client
//! tests against the scripted server.
//!
//! `cargo bench --bench engine`

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use futures::future::BoxFuture;
use groundwork::engine::agent::{Agent, RunInput};
use groundwork::engine::cancel::CancelToken;
use groundwork::engine::capability::{ToolDef, ToolKind};
use groundwork::engine::chat::{ChatModel, ModelError, ModelRequestParams, StreamDelta};
use groundwork::engine::messages::{
    ModelMessage, ModelRequest, ModelRequestPart, ModelResponse, ModelResponsePart, TextPart,
    ToolCallPart, ToolReturnPart, UserPromptPart,
};
use serde_json::json;

struct InstantModel;

impl ChatModel for InstantModel {
    fn model_name(&self) -> &str {
        "instant"
    }
    fn request<'a>(
        &'a self,
        _params: ModelRequestParams<'a>,
        _on_delta: &'a (dyn Fn(StreamDelta) + Send + Sync),
        _cancel: &'a CancelToken,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async {
            Ok(ModelResponse::new(vec![ModelResponsePart::Text(
                TextPart::new(
                    "The answer, in a few sentences of ordinary length for a grounded reply.",
                ),
            )]))
        })
    }
}

fn conversation(pairs: usize) -> Vec<ModelMessage> {
    let mut out = Vec::with_capacity(pairs * 2);
    let evidence =
        "[chunk-0001] [rank 1 of 5]\nSource: \"Manual\" > Section\nType: text\nContent:\n"
            .to_string()
            + &"Evidence text of a typical chunk with a few sentences. ".repeat(12);
    for i in 0..pairs {
        let req = if i % 2 == 0 {
            ModelRequest::new(vec![ModelRequestPart::UserPrompt(UserPromptPart::new(
                format!("Question number {i} about the manual?"),
            ))])
        } else {
            ModelRequest::new(vec![ModelRequestPart::ToolReturn(ToolReturnPart::new(
                "rag_search",
                json!(evidence),
                format!("call-{i}"),
            ))])
        };
        out.push(ModelMessage::from(req));
        let resp = if i % 2 == 0 {
            ModelResponse::new(vec![ModelResponsePart::ToolCall(ToolCallPart::new(
                "rag_search",
                format!("{{\"query\": \"topic {i}\"}}"),
                format!("call-{}", i + 1),
            ))])
        } else {
            ModelResponse::new(vec![ModelResponsePart::Text(TextPart::new(
                "An answer grounded in the cited chunks, a paragraph long. ".repeat(4),
            ))])
        };
        out.push(ModelMessage::from(resp));
    }
    out
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let history = conversation(100);
    assert_eq!(history.len(), 200);
    let agent = Agent::builder(Arc::new(InstantModel))
        .instructions("You answer from the knowledge base. ".repeat(40))
        .output_tool(ToolDef {
            name: "final_result".into(),
            description: "The structured answer.".into(),
            parameters: json!({"type": "object", "properties": {"answer": {"type": "string"}}}),
            capability_id: None,
            kind: ToolKind::Output,
        })
        .build()
        .unwrap();
    let mut state = serde_json::Map::new();
    state.insert("rag".into(), json!({"citations": [], "searches": {}}));
    c.bench_function("engine_overhead_one_request_200_messages", |b| {
        b.iter(|| {
            let input = RunInput::prompt("One more question?")
                .with_history(history.clone())
                .with_state(state.clone());
            rt.block_on(agent.run(input, None, CancelToken::new()))
                .unwrap()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
