//! Counting one request's tokens (instructions, tool schemas, the stored history and what
//! was sent) over a 200-message conversation, the work the agent loop does per model
//! request: with the chars/4 estimate, with o200k tokenizing everything (a request of a
//! new conversation), and with o200k remembering the counts of texts it has seen (every
//! later request, which sends the history again).
//!
//! `cargo bench --bench tokens`

use criterion::{Criterion, criterion_group, criterion_main};
use groundwork::engine::capability::ToolDef;
use groundwork::engine::messages::{
    ModelMessage, ModelRequest, ModelRequestPart, ModelResponse, ModelResponsePart, TextPart,
    ToolCallPart, ToolReturnPart, UserPromptPart,
};
use groundwork::engine::tokens::{CharEstimate, Remembered, Tiktoken, TokenReport};
use serde_json::json;

fn conversation(pairs: usize) -> Vec<ModelMessage> {
    let mut out = Vec::with_capacity(pairs * 2);
    for i in 0..pairs {
        // Every evidence text is distinct, as real search results are.
        let evidence = format!(
            "[chunk-{i:04}] [rank 1 of 5]\nSource: \"Manual\" > Section {i}\nType: text\nContent:\n{}",
            "Evidence text of a typical chunk with a few sentences. ".repeat(12)
        );
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
            ModelResponse::new(vec![ModelResponsePart::Text(TextPart::new(format!(
                "Answer {i}: {}",
                "An answer grounded in the cited chunks, a paragraph long. ".repeat(4)
            )))])
        };
        out.push(ModelMessage::from(resp));
    }
    out
}

fn bench(c: &mut Criterion) {
    let history = conversation(100);
    let instructions = "You answer from the knowledge base. ".repeat(40);
    let tools = vec![ToolDef::function(
        "rag_search",
        "Search the knowledge base.",
        json!({"type": "object", "properties": {"query": {"type": "string"}}}),
    )];
    let chars: usize = history
        .iter()
        .map(|m| serde_json::to_string(m).unwrap().len())
        .sum();
    eprintln!("history: {} messages, {chars} bytes as JSON", history.len());
    c.bench_function("tokens_one_request_200_messages_estimate", |b| {
        b.iter(|| TokenReport::count(&CharEstimate, &instructions, &tools, &history, &history))
    });
    let o200k = Tiktoken::named("o200k").unwrap();
    c.bench_function("tokens_one_request_200_messages_o200k_all_new", |b| {
        b.iter(|| TokenReport::count(&o200k, &instructions, &tools, &history, &history))
    });
    let remembered = Remembered::new(Tiktoken::named("o200k").unwrap());
    TokenReport::count(&remembered, &instructions, &tools, &history, &history);
    c.bench_function("tokens_one_request_200_messages_o200k_remembered", |b| {
        b.iter(|| TokenReport::count(&remembered, &instructions, &tools, &history, &history))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
