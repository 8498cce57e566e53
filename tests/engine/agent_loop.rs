//! The agent loop, mostly on the in-memory model (`crate::support::memory_model`): hook order,
//! wrap/enqueue, tool failure semantics, malformed and cut-off calls, limits, deferred
//! loading, cancellation and deferred-tool resumption. The first tests go through the
//! real async-openai client against the scripted server, end to end: tool calls,
//! streaming events, and what the retry prompt looks like on the wire.
//!
//! Over the usual 600 lines: one file holds every agent-loop scenario, so the loop's
//! behaviour reads in one place.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::caps::{TestCap, Trace};
use crate::support::memory_model::{MEMORY_MODEL, MemoryModel, Turn};
use crate::support::scripted_server::{
    Reply, ScriptedServer, system_text, tool_names, wire_messages,
};
use crate::support::{agent_for, drain, events, test_config};
use groundwork::engine::agent::{DeferredResults, RunError, RunInput, RunOutput};
use groundwork::engine::cancel::CancelToken;
use groundwork::engine::capability::{ToolDef, ToolOutcome, ToolOutput};
use groundwork::engine::chat::{ModelError, StreamDelta};
use groundwork::engine::events::{CoreEvent, ToolCallStatus};
use groundwork::engine::messages::{
    ModelMessage, ModelRequestPart, ModelResponsePart, RetryContent, ToolReturnPart,
    UserContentValue,
};
use groundwork::session::Session;
use serde_json::{Value, json};

fn trace() -> Trace {
    Arc::new(Mutex::new(Vec::new()))
}

fn ok_search(
    name: &str,
    args: &serde_json::Map<String, Value>,
    _: &mut groundwork::engine::capability::RunContext,
) -> ToolOutcome {
    ToolOutcome::Ok(ToolOutput::text(format!(
        "{name} found 3 results for {}",
        args.get("q").and_then(Value::as_str).unwrap_or("?")
    )))
}

fn request_parts(m: &ModelMessage) -> &[ModelRequestPart] {
    &m.as_request().expect("a request").parts
}

// End to end, through the HTTP client.

#[tokio::test]
async fn tool_calls_then_final_answer() {
    let server = ScriptedServer::start(vec![
        Reply::tool_call("search", json!({"q": "zebra"})),
        Reply::text("There are 3 zebras."),
    ])
    .await;
    let t = trace();
    let agent = agent_for(test_config(&server.base_url()))
        .instructions("Base instructions.")
        .capability(
            TestCap::new("cap", &t)
                .tool("search")
                .instructions("# Cap\nUse search.")
                .handler(ok_search)
                .arc(),
        )
        .build()
        .unwrap();
    let (tx, mut rx) = events();
    let result = agent
        .run(RunInput::prompt("How many zebras?"), tx, CancelToken::new())
        .await
        .unwrap();

    assert_eq!(result.output, RunOutput::Text("There are 3 zebras.".into()));
    assert_eq!(result.messages.len(), 4);
    assert_eq!(result.new_message_index, 0);
    assert_eq!(result.usage.requests, 2);
    assert_eq!(result.usage.tokens.input_tokens, 22);
    assert_eq!(result.usage.tokens.output_tokens, 14);
    let call = result.messages[1]
        .as_response()
        .unwrap()
        .tool_calls()
        .next()
        .unwrap()
        .clone();
    assert_eq!(call.tool_name, "search");
    assert_eq!(call.args_as_object().unwrap()["q"], "zebra");
    match &request_parts(&result.messages[2])[0] {
        ModelRequestPart::ToolReturn(r) => {
            assert_eq!(r.tool_call_id, call.tool_call_id);
            assert_eq!(r.content, json!("search found 3 results for zebra"));
            assert_eq!(r.outcome, "success");
        }
        other => panic!("expected a tool return, got {other:?}"),
    }

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(tool_names(&reqs[0]), vec!["search"]);
    let sys = system_text(&reqs[0]);
    assert!(
        sys.starts_with("Base instructions.\n\n# Cap\nUse search."),
        "{sys}"
    );
    let wire = wire_messages(&reqs[1]);
    assert_eq!(wire.last().unwrap()["role"], "tool");
    assert_eq!(
        wire.last().unwrap()["tool_call_id"],
        json!(call.tool_call_id)
    );
    assert_eq!(
        wire[wire.len() - 2]["tool_calls"][0]["function"]["name"],
        "search"
    );
    // The stored requests carry the instructions they were sent with.
    assert_eq!(
        result.messages[0]
            .as_request()
            .unwrap()
            .instructions
            .as_deref(),
        Some(sys.as_str())
    );

    let evs = drain(&mut rx);
    assert!(evs.iter().all(|e| e.run_id() == result.run_id));
    assert_eq!(
        evs.iter()
            .filter(|e| matches!(e, CoreEvent::RequestBuilt { .. }))
            .count(),
        2
    );
    assert!(
        evs.iter()
            .any(|e| matches!(e, CoreEvent::ToolCallStarted { name, .. } if name == "search"))
    );
    assert!(evs.iter().any(|e| matches!(e, CoreEvent::ToolCallFinished { outcome: ToolCallStatus::Ok, summary, request: 1, .. } if summary.contains("3 results"))));
    match evs.last().unwrap() {
        CoreEvent::RunFinished {
            messages, request, ..
        } => {
            assert_eq!(messages.len(), 4);
            assert_eq!(*request, 2);
        }
        other => panic!("last event should be RunFinished, got {other:?}"),
    }
}

#[tokio::test]
async fn streaming_deltas_arrive_as_events_and_thinking_is_not_sent_back() {
    let server = ScriptedServer::start(vec![
        Reply::text("Hello streaming world")
            .with_thinking("let me think")
            .chunk_chars(3),
        Reply::text("again"),
    ])
    .await;
    let agent = agent_for(test_config(&server.base_url())).build().unwrap();
    let (tx, mut rx) = events();
    let result = agent
        .run(RunInput::prompt("hi"), tx, CancelToken::new())
        .await
        .unwrap();
    let evs = drain(&mut rx);
    let texts: Vec<String> = evs
        .iter()
        .filter_map(|e| match e {
            CoreEvent::TextDelta { text, request, .. } => {
                assert_eq!(*request, 1);
                Some(text.clone())
            }
            _ => None,
        })
        .collect();
    assert!(
        texts.len() >= 7,
        "text should arrive in several deltas: {texts:?}"
    );
    assert_eq!(texts.concat(), "Hello streaming world");
    let thinking: String = evs
        .iter()
        .filter_map(|e| match e {
            CoreEvent::ThinkingDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thinking, "let me think");
    let response = result.messages[1].as_response().unwrap();
    assert!(
        matches!(&response.parts[0], ModelResponsePart::Thinking(t) if t.content == "let me think")
    );
    assert_eq!(response.finish_reason.as_deref(), Some("stop"));
    assert_eq!(response.model_name.as_deref(), Some("scripted-model"));

    let second = agent
        .run(
            RunInput::prompt("more").with_history(result.messages.clone()),
            None,
            CancelToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(second.output, RunOutput::Text("again".into()));
    let body = server.requests()[1].to_string();
    assert!(body.contains("Hello streaming world"));
    assert!(
        !body.contains("let me think"),
        "thinking must not be sent: {body}"
    );
}

fn failing_cap(t: &Trace) -> TestCap {
    TestCap::new("tools", t)
        .tool("fails")
        .tool("retries")
        .handler(|name, _, _| match name {
            "fails" => ToolOutcome::Failed("the store is offline".into()),
            _ => ToolOutcome::Retry("use a shorter query".into()),
        })
}

#[tokio::test]
async fn failed_is_a_tool_return_and_retry_is_a_retry_prompt() {
    let server = ScriptedServer::start(vec![
        Reply::tool_call("fails", json!({"q": "a"})).and_tool_call("retries", json!({"q": "b"})),
        Reply::tool_call("retries", json!({"q": "c"})),
        Reply::text("gave up"),
    ])
    .await;
    let t = trace();
    let agent = agent_for(test_config(&server.base_url()))
        .capability(failing_cap(&t).arc())
        .build()
        .unwrap();
    let result = agent
        .run(RunInput::prompt("q"), None, CancelToken::new())
        .await
        .unwrap();
    assert_eq!(result.output, RunOutput::Text("gave up".into()));
    let parts = request_parts(&result.messages[2]);
    match (&parts[0], &parts[1]) {
        (ModelRequestPart::ToolReturn(f), ModelRequestPart::RetryPrompt(r)) => {
            assert_eq!(f.outcome, "failed");
            assert_eq!(f.content, json!("the store is offline"));
            assert_eq!(r.tool_name.as_deref(), Some("retries"));
            assert_eq!(r.content, RetryContent::Text("use a shorter query".into()));
        }
        other => panic!("{other:?}"),
    }
    let wire = wire_messages(&server.requests()[1]);
    let retry_msg = wire.last().unwrap();
    assert_eq!(retry_msg["role"], "tool");
    assert!(
        retry_msg["content"]
            .as_str()
            .unwrap()
            .starts_with("use a shorter query")
    );
}

// The loop itself, on the in-memory model.

#[tokio::test]
async fn hooks_run_in_spec_order() {
    let model = MemoryModel::new(vec![
        Turn::tool_call("a_tool", json!({"q": "x"})),
        Turn::text("done"),
    ]);
    let t = trace();
    let agent = model
        .agent()
        .capability(
            TestCap::new("A", &t)
                .tool("a_tool")
                .handler(ok_search)
                .per_request("A says hi.")
                .arc(),
        )
        .capability(TestCap::new("B", &t).arc())
        .build()
        .unwrap();
    agent
        .run(RunInput::prompt("go"), None, CancelToken::new())
        .await
        .unwrap();
    let per_request = |epoch: usize| {
        vec![
            "A:prepare_tools".to_string(),
            "B:prepare_tools".into(),
            format!("A:before_model_request(epoch={epoch})"),
            format!("B:before_model_request(epoch={epoch})"),
            "A:wrap_model_request".into(),
            "B:wrap_model_request".into(),
            "B:after_model_request".into(),
            "A:after_model_request".into(),
        ]
    };
    let mut expected = vec![
        "A:for_run(active=true)".to_string(),
        "B:for_run(active=true)".into(),
        "A:before_run".into(),
        "B:before_run".into(),
    ];
    expected.extend(per_request(1));
    expected.push("A:call_tool(a_tool)".into());
    expected.extend(per_request(3));
    expected.extend([
        "B:after_run(deferred=false)".to_string(),
        "A:after_run(deferred=false)".into(),
    ]);
    assert_eq!(*t.lock().unwrap(), expected);
    // before_model_request additions reach this request's instructions.
    for body in model.requests() {
        assert!(body.instructions.clone().ends_with("A says hi."));
    }
}

#[tokio::test]
async fn wrap_model_request_changes_the_wire_not_the_history() {
    let model = MemoryModel::new(vec![Turn::text("ok")]);
    let t = trace();
    let agent = model
        .agent()
        .capability(
            TestCap::new("compactor", &t)
                .rewrite(|mut msgs| {
                    for m in &mut msgs {
                        if let Some(r) = m.as_request_mut() {
                            for p in &mut r.parts {
                                if let ModelRequestPart::UserPrompt(u) = p {
                                    u.content = UserContentValue::Text("[compacted]".into());
                                }
                            }
                        }
                    }
                    msgs
                })
                .arc(),
        )
        .build()
        .unwrap();
    let prompt = "a very long prompt ".repeat(20);
    let result = agent
        .run(RunInput::prompt(prompt.as_str()), None, CancelToken::new())
        .await
        .unwrap();
    let wire = format!("{:?}", model.requests()[0].messages);
    assert!(wire.contains("[compacted]"));
    assert!(!wire.contains("a very long prompt"));
    match &request_parts(&result.messages[0])[0] {
        ModelRequestPart::UserPrompt(u) => {
            assert_eq!(u.content, UserContentValue::Text(prompt.clone()))
        }
        other => panic!("{other:?}"),
    }
    let snap = &result.requests[0];
    assert_ne!(snap.raw, snap.compacted);
    assert!(snap.raw_tokens.total > snap.compacted_tokens.total);
    assert_eq!(snap.raw_tokens.per_message.len(), 1);
}

#[tokio::test]
async fn enqueue_when_idle_makes_another_request() {
    let model = MemoryModel::new(vec![
        Turn::text("first answer"),
        Turn::text("second answer"),
    ]);
    let t = trace();
    let agent = model
        .agent()
        .capability(
            TestCap::new("policy", &t)
                .enqueue_once("Please cite your sources.")
                .arc(),
        )
        .build()
        .unwrap();
    let result = agent
        .run(RunInput::prompt("q"), None, CancelToken::new())
        .await
        .unwrap();
    assert_eq!(result.output, RunOutput::Text("second answer".into()));
    assert_eq!(result.messages.len(), 4);
    match &request_parts(&result.messages[2])[0] {
        ModelRequestPart::UserPrompt(u) => {
            assert_eq!(u.content.text(), "Please cite your sources.")
        }
        other => panic!("{other:?}"),
    }
    let reqs = model.requests();
    assert_eq!(reqs.len(), 2);
    let sent = reqs[1].messages.last().unwrap();
    match request_parts(sent) {
        [ModelRequestPart::UserPrompt(u)] => {
            assert_eq!(u.content.text(), "Please cite your sources.")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn exhausting_the_retry_budget_aborts_the_run() {
    let replies = (0..5)
        .map(|i| Turn::tool_call("retries", json!({"q": i})))
        .collect();
    let model = MemoryModel::new(replies);
    let t = trace();
    let agent = model
        .agent()
        .capability(failing_cap(&t).arc())
        .build()
        .unwrap();
    let (tx, mut rx) = events();
    let err = agent
        .run(RunInput::prompt("q"), tx, CancelToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunError::RetriesExhausted { tool, max: 3 } if tool == "retries"),
        "{err}"
    );
    assert_eq!(
        model.requests().len(),
        4,
        "three retries are allowed, the fourth aborts"
    );
    assert_eq!(t.lock().unwrap().last().unwrap(), "tools:on_run_error");
    assert!(
        matches!(drain(&mut rx).last(), Some(CoreEvent::RunFailed { error, .. }) if error.contains("retry budget"))
    );
}

#[tokio::test]
async fn request_limit_is_an_error() {
    let replies = (0..3)
        .map(|i| Turn::tool_call("search", json!({"q": i})))
        .collect();
    let model = MemoryModel::new(replies);
    let t = trace();
    let agent = model
        .agent()
        .capability(
            TestCap::new("cap", &t)
                .tool("search")
                .handler(ok_search)
                .arc(),
        )
        .request_limit(Some(2))
        .build()
        .unwrap();
    let err = agent
        .run(RunInput::prompt("q"), None, CancelToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::RequestLimit { limit: 2 }), "{err}");
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test]
async fn unknown_tool_gets_a_retry_prompt() {
    let model = MemoryModel::new(vec![
        Turn::tool_call("nonexistent", json!({})),
        Turn::text("sorry"),
    ]);
    let t = trace();
    let agent = model
        .agent()
        .capability(
            TestCap::new("cap", &t)
                .tool("search")
                .handler(ok_search)
                .arc(),
        )
        .build()
        .unwrap();
    let result = agent
        .run(RunInput::prompt("q"), None, CancelToken::new())
        .await
        .unwrap();
    match &request_parts(&result.messages[2])[0] {
        ModelRequestPart::RetryPrompt(r) => {
            let text = r.content.text();
            assert!(
                text.contains("nonexistent") && text.contains("search"),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn output_tool_ends_the_run_with_its_arguments() {
    let model = MemoryModel::new(vec![
        Turn::tool_call("final_answer", json!({"answer": "42"}))
            .and_tool_call("search", json!({"q": "x"})),
    ]);
    let t = trace();
    let agent = model.agent()
        .capability(TestCap::new("cap", &t).tool("search").handler(ok_search).arc())
        .output_tool(ToolDef::output(
            "final_answer",
            "Give the final answer.",
            json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}),
        ))
        .build()
        .unwrap();
    let result = agent
        .run(RunInput::prompt("q"), None, CancelToken::new())
        .await
        .unwrap();
    assert_eq!(
        result.output,
        RunOutput::Tool {
            tool_name: "final_answer".into(),
            args: json!({"answer": "42"})
        }
    );
    assert!(
        model.requests()[0]
            .tool_names()
            .contains(&"final_answer".to_string())
    );
    assert!(
        !t.lock()
            .unwrap()
            .iter()
            .any(|e| e.starts_with("cap:call_tool")),
        "other calls are skipped"
    );
    let parts = request_parts(result.messages.last().unwrap());
    assert_eq!(parts.len(), 2, "every call gets a return");
}

#[tokio::test]
async fn duplicate_capability_id_is_rejected() {
    let t = trace();
    let err = MemoryModel::default()
        .agent()
        .capability(TestCap::new("haiku-rag-citation-policy", &t).arc())
        .capability(TestCap::new("haiku-rag-citation-policy", &t).arc())
        .build()
        .unwrap_err()
        .to_string();
    assert!(err.contains("unique within a run"), "{err}");
    assert!(err.contains("haiku-rag-citation-policy"), "{err}");
}

#[tokio::test]
async fn malformed_and_cut_off_tool_calls_get_a_retry_prompt() {
    let model = MemoryModel::new(vec![
        Turn::tool_call_raw("search", r#"{"q": "cut"#).finish_reason("length"),
        Turn::tool_call_raw("search", "not json"),
        Turn::text("gave up"),
    ]);
    let t = trace();
    let agent = model
        .agent()
        .capability(
            TestCap::new("cap", &t)
                .tool("search")
                .handler(ok_search)
                .arc(),
        )
        .build()
        .unwrap();
    let (tx, mut rx) = events();
    let result = agent
        .run(RunInput::prompt("q"), tx, CancelToken::new())
        .await
        .unwrap();
    assert_eq!(result.output, RunOutput::Text("gave up".into()));
    assert!(result.messages[1].as_response().unwrap().is_cut_off());
    for (at, call_id) in [(2, "call_1_0"), (4, "call_2_0")] {
        match &request_parts(&result.messages[at])[0] {
            ModelRequestPart::RetryPrompt(r) => {
                assert_eq!(r.tool_call_id, call_id);
                assert_eq!(r.tool_name.as_deref(), Some("search"));
            }
            other => panic!("{other:?}"),
        }
    }
    // The model saw each retry prompt; the tool never ran.
    let reqs = model.requests();
    assert_eq!(reqs.len(), 3);
    assert!(matches!(
        request_parts(reqs[1].messages.last().unwrap())[0],
        ModelRequestPart::RetryPrompt(_)
    ));
    assert!(
        !t.lock()
            .unwrap()
            .iter()
            .any(|e| e.starts_with("cap:call_tool"))
    );
    let retries = drain(&mut rx)
        .into_iter()
        .filter(|e| {
            matches!(
                e,
                CoreEvent::ToolCallFinished {
                    outcome: ToolCallStatus::Retry,
                    ..
                }
            )
        })
        .count();
    assert_eq!(retries, 2);
}

#[tokio::test]
async fn a_model_error_fails_the_run() {
    let model = MemoryModel::new(vec![
        Turn::tool_call("search", json!({"q": "x"})),
        Turn::error(ModelError::Http {
            url: "memory://".into(),
            status: 400,
            message: "context overflow".into(),
            retry_after: None,
        }),
    ]);
    let t = trace();
    let agent = model
        .agent()
        .capability(
            TestCap::new("cap", &t)
                .tool("search")
                .handler(ok_search)
                .arc(),
        )
        .build()
        .unwrap();
    let (tx, mut rx) = events();
    let err = agent
        .run(RunInput::prompt("q"), tx, CancelToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunError::Model(ModelError::Http { status: 400, .. })),
        "{err}"
    );
    assert_eq!(t.lock().unwrap().last().unwrap(), "cap:on_run_error");
    assert!(matches!(
        drain(&mut rx).last(),
        Some(CoreEvent::RunFailed { error, request: 2, .. }) if error.contains("context overflow")
    ));
    assert_eq!(model.remaining(), 0);
}

#[tokio::test]
async fn a_queued_message_after_an_output_tool_gets_another_answer() {
    let model = MemoryModel::new(vec![
        Turn::tool_call("final_answer", json!({"answer": "42"})),
        Turn::tool_call("final_answer", json!({"answer": "43"})),
    ]);
    let t = trace();
    let agent = model
        .agent()
        .capability(TestCap::new("policy", &t).enqueue_once("Cite it.").arc())
        .output_tool(ToolDef::output(
            "final_answer",
            "Answer.",
            json!({"type": "object"}),
        ))
        .build()
        .unwrap();
    let result = agent
        .run(RunInput::prompt("q"), None, CancelToken::new())
        .await
        .unwrap();
    assert_eq!(
        result.output,
        RunOutput::Tool {
            tool_name: "final_answer".into(),
            args: json!({"answer": "43"})
        }
    );
    // The redirect goes out with the first output tool's return.
    assert_eq!(result.messages.len(), 5);
    match request_parts(&result.messages[2]) {
        [
            ModelRequestPart::ToolReturn(r),
            ModelRequestPart::UserPrompt(u),
        ] => {
            assert_eq!(r.tool_call_id, "call_1_0");
            assert_eq!(u.content.text(), "Cite it.");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        request_parts(&result.messages[4]),
        [ModelRequestPart::ToolReturn(_)]
    ));
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test]
async fn stream_deltas_become_events_of_their_request() {
    let model = MemoryModel::new(vec![Turn::text("Hello").with_thinking("hm").deltas(vec![
        StreamDelta::Text("He".into()),
        StreamDelta::Restart,
        StreamDelta::Thinking("hm".into()),
        StreamDelta::Text("Hello".into()),
    ])]);
    let agent = model.agent().build().unwrap();
    let (tx, mut rx) = events();
    let result = agent
        .run(RunInput::prompt("hi"), tx, CancelToken::new())
        .await
        .unwrap();
    assert_eq!(result.output, RunOutput::Text("Hello".into()));
    let seen: Vec<String> = drain(&mut rx)
        .into_iter()
        .filter_map(|e| match e {
            CoreEvent::TextDelta { text, request, .. } => Some(format!("{request}:text:{text}")),
            CoreEvent::ThinkingDelta { text, request, .. } => {
                Some(format!("{request}:thinking:{text}"))
            }
            CoreEvent::ResponseRestarted { request, .. } => Some(format!("{request}:restart")),
            _ => None,
        })
        .collect();
    assert_eq!(
        seen,
        ["1:text:He", "1:restart", "1:thinking:hm", "1:text:Hello"]
    );
    assert_eq!(model.requests()[0].messages.len(), 1);
}

fn rag_cap(t: &Trace) -> TestCap {
    TestCap::new("haiku-rag", t)
        .tool("rag_search")
        .tool("rag_cite")
        .instructions("# RAG\nSearch the knowledge base with rag_search, then cite with rag_cite.")
        .deferred("Searches the knowledge base and cites evidence for grounded answers.")
        .handler(ok_search)
}

#[tokio::test]
async fn deferred_loading_j90() {
    let model = MemoryModel::new(vec![
        Turn::tool_call("load_capability", json!({"id": "haiku-rag"})),
        Turn::tool_call("rag_search", json!({"q": "solar"})),
        Turn::text("Answer."),
        // Second run, with the first run's history.
        Turn::text("Second answer."),
    ]);
    let t = trace();
    let agent = model
        .agent()
        .instructions("Base.")
        .capability(rag_cap(&t).arc())
        .build()
        .unwrap();
    let result = agent
        .run(RunInput::prompt("q"), None, CancelToken::new())
        .await
        .unwrap();
    let reqs = model.requests();

    // Request 1: collapsed. Catalogue, no heading, only load_capability.
    let sys1 = reqs[0].instructions.clone();
    assert!(!sys1.contains("# RAG"), "{sys1}");
    assert!(sys1.contains("The following capabilities are deferred and can be loaded using the `load_capability` tool:\n- haiku-rag: Searches the knowledge base"), "{sys1}");
    assert_eq!(reqs[0].tool_names(), vec!["load_capability"]);

    // The load return carries the instructions and the sorted tool names.
    let load_return = match &request_parts(&result.messages[2])[0] {
        ModelRequestPart::ToolReturn(r) => r.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(load_return.tool_kind.as_deref(), Some("capability-load"));
    let payload = load_return.content["instructions"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(payload.contains("# RAG"), "{payload}");
    assert!(payload.contains("rag_cite, rag_search"), "{payload}");
    let call = result.messages[1]
        .as_response()
        .unwrap()
        .tool_calls()
        .next()
        .unwrap()
        .clone();
    assert_eq!(call.tool_kind.as_deref(), Some("capability-load"));

    // Request 2 on: loaded. Tools visible, heading in instructions, no catalogue.
    let mut tools2 = reqs[1].tool_names();
    tools2.sort();
    assert_eq!(tools2, vec!["load_capability", "rag_cite", "rag_search"]);
    let sys2 = reqs[1].instructions.clone();
    assert!(
        sys2.contains("# RAG") && !sys2.contains("are deferred"),
        "{sys2}"
    );

    // Dormant until loaded: no hooks in request 1; after_run reaches it regardless.
    let log = t.lock().unwrap().clone();
    let first_prepare = log
        .iter()
        .position(|e| e == "haiku-rag:prepare_tools")
        .unwrap();
    let call_pos = log
        .iter()
        .position(|e| e == "haiku-rag:call_tool(rag_search)")
        .unwrap();
    assert!(first_prepare < call_pos);
    assert_eq!(log[0], "haiku-rag:for_run(active=false)");
    assert!(!log.contains(&"haiku-rag:before_run".to_string()));
    assert_eq!(
        log.iter()
            .filter(|e| e.starts_with("haiku-rag:before_model_request"))
            .count(),
        2
    );
    assert_eq!(log.last().unwrap(), "haiku-rag:after_run(deferred=false)");

    // A later run with that history starts loaded.
    t.lock().unwrap().clear();
    agent
        .run(
            RunInput::prompt("again").with_history(result.messages.clone()),
            None,
            CancelToken::new(),
        )
        .await
        .unwrap();
    let reqs = model.requests();
    assert!(reqs[3].instructions.clone().contains("# RAG"));
    assert!(reqs[3].tool_names().contains(&"rag_search".to_string()));
    assert_eq!(t.lock().unwrap()[0], "haiku-rag:for_run(active=true)");
}

#[tokio::test]
async fn load_capability_unknown_id_and_already_active() {
    let model = MemoryModel::new(vec![
        Turn::tool_call("load_capability", json!({"id": "nope"}))
            .and_tool_call("load_capability", json!({"id": "eager"})),
        Turn::text("ok"),
    ]);
    let t = trace();
    let agent = model
        .agent()
        .capability(rag_cap(&t).arc())
        .capability(TestCap::new("eager", &t).instructions("# Eager").arc())
        .build()
        .unwrap();
    let result = agent
        .run(RunInput::prompt("q"), None, CancelToken::new())
        .await
        .unwrap();
    let parts = request_parts(&result.messages[2]);
    match (&parts[0], &parts[1]) {
        (ModelRequestPart::RetryPrompt(r), ModelRequestPart::ToolReturn(ok)) => {
            assert_eq!(
                r.content,
                RetryContent::Text("No capability found with id 'nope'.".into())
            );
            assert_eq!(ok.content, json!({}));
        }
        other => panic!("{other:?}"),
    }
    // Still collapsed on request 2.
    assert_eq!(model.requests()[1].tool_names(), vec!["load_capability"]);
    assert!(agent.loaded_from_history(&result.messages).is_empty());
}

#[tokio::test]
async fn cancellation_mid_stream_leaves_the_callers_history_and_state_untouched() {
    let model = MemoryModel::new(vec![
        Turn::text("first"),
        Turn::hang().deltas(vec![StreamDelta::Text("this answer streams".into())]),
    ]);
    let t = trace();
    let agent = Arc::new(
        model
            .agent()
            .capability(TestCap::new("cap", &t).arc())
            .build()
            .unwrap(),
    );
    let mut session = Session::new(MEMORY_MODEL);
    let first = agent
        .run(RunInput::prompt("one"), None, CancelToken::new())
        .await;
    assert!(session.commit_run(&first));
    let committed = session.clone();

    let (tx, mut rx) = events();
    let cancel = CancelToken::new();
    let input = RunInput::prompt("two")
        .with_history(session.messages.clone())
        .with_state(session.state.clone());
    let handle = tokio::spawn({
        let agent = agent.clone();
        let cancel = cancel.clone();
        async move { agent.run(input, tx, cancel).await }
    });
    // Wait until the stream has started, then cancel.
    let mut saw_delta = false;
    while let Some(e) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
    {
        if let CoreEvent::StateChanged { state, .. } = &e {
            // The run's copy already differs from the committed state.
            assert_eq!(state["cap"]["history_len"], json!(2));
        }
        if matches!(e, CoreEvent::TextDelta { .. }) {
            saw_delta = true;
            break;
        }
    }
    assert!(saw_delta);
    let started = std::time::Instant::now();
    cancel.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(5), handle)
        .await
        .unwrap()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(matches!(outcome, Err(RunError::Cancelled)));
    assert!(!session.commit_run(&outcome));
    assert_eq!(session, committed);
    assert_eq!(session.state["cap"]["history_len"], json!(0));
    assert!(matches!(
        drain(&mut rx).last(),
        Some(CoreEvent::RunCancelled { .. })
    ));
    assert_eq!(t.lock().unwrap().last().unwrap(), "cap:on_run_error");
}

#[tokio::test]
async fn deferred_tool_results_resume_the_run() {
    let model = MemoryModel::new(vec![
        Turn::tool_call("search", json!({"q": "a"}))
            .and_tool_call("external", json!({"q": "approve?"})),
        Turn::text("done"),
    ]);
    let t = trace();
    let agent = model
        .agent()
        .capability(
            TestCap::new("cap", &t)
                .tool("search")
                .tool("external")
                .handler(|name, args, ctx| match name {
                    "external" => ToolOutcome::Deferred,
                    _ => ok_search(name, args, ctx),
                })
                .arc(),
        )
        .build()
        .unwrap();
    let first = agent
        .run(RunInput::prompt("q"), None, CancelToken::new())
        .await
        .unwrap();
    let RunOutput::Deferred(deferred) = &first.output else {
        panic!("expected deferred output, got {:?}", first.output)
    };
    assert_eq!(deferred.calls.len(), 1);
    assert_eq!(deferred.calls[0].tool_name, "external");
    assert!(
        t.lock()
            .unwrap()
            .contains(&"cap:after_run(deferred=true)".to_string())
    );
    // History: prompt, response with both calls, the completed call's return.
    assert_eq!(first.messages.len(), 3);
    assert_eq!(model.requests().len(), 1);

    let call_id = deferred.calls[0].tool_call_id.clone();
    let results = DeferredResults::default().with(
        call_id.clone(),
        ToolOutcome::Ok(ToolOutput::text("approved")),
    );
    let input = RunInput {
        history: first.messages.clone(),
        state: first.state.clone(),
        deferred_results: Some(results),
        ..RunInput::default()
    };
    let second = agent.run(input, None, CancelToken::new()).await.unwrap();
    assert_eq!(second.output, RunOutput::Text("done".into()));
    let sent = model.requests()[1].messages.clone();
    let returns: Vec<&ToolReturnPart> = sent
        .iter()
        .filter_map(ModelMessage::as_request)
        .flat_map(|r| r.parts.iter())
        .filter_map(|p| match p {
            ModelRequestPart::ToolReturn(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(returns.len(), 2);
    assert!(returns.iter().any(|r| r.tool_call_id == call_id));
    assert!(returns.iter().any(|r| r.content == json!("approved")));

    // A result for a call that is not open is rejected.
    let bad = RunInput {
        history: first.messages.clone(),
        deferred_results: Some(
            DeferredResults::default().with("not-a-call", ToolOutcome::Failed("x".into())),
        ),
        ..RunInput::default()
    };
    let err = agent.run(bad, None, CancelToken::new()).await.unwrap_err();
    assert!(matches!(err, RunError::InvalidInput(_)), "{err}");
}

#[tokio::test]
async fn epochs_and_identity_follow_the_spec_worked_example() {
    let model = MemoryModel::new(vec![
        Turn::tool_call("search", json!({"q": "x"})),
        Turn::tool_call("cite", json!({"q": "c1"})),
        Turn::text("answer"),
        Turn::text("second answer"),
    ]);
    let t = trace();
    let agent = model
        .agent()
        .capability(
            TestCap::new("rag", &t)
                .tool("search")
                .tool("cite")
                .handler(ok_search)
                .arc(),
        )
        .build()
        .unwrap();
    let first = agent
        .run(RunInput::prompt("q0"), None, CancelToken::new())
        .await
        .unwrap();
    let epochs = |log: &[String]| -> Vec<String> {
        log.iter()
            .filter(|e| e.contains("epoch"))
            .cloned()
            .collect()
    };
    assert_eq!(
        epochs(&t.lock().unwrap()),
        [
            "rag:before_model_request(epoch=1)",
            "rag:before_model_request(epoch=3)",
            "rag:before_model_request(epoch=5)"
        ]
    );
    assert_eq!(first.messages.len(), 6, "the next question's identity is 6");
    assert_eq!(first.state["rag"]["history_len"], json!(0));
    t.lock().unwrap().clear();
    let second = agent
        .run(
            RunInput::prompt("q1")
                .with_history(first.messages.clone())
                .with_state(first.state.clone()),
            None,
            CancelToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(second.state["rag"]["history_len"], json!(6));
    assert_eq!(second.new_message_index, 6);
    assert_eq!(
        epochs(&t.lock().unwrap()),
        ["rag:before_model_request(epoch=7)"]
    );
}
