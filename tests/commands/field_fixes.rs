//! Field faults of issue 14 owned by the engine's composition: a structured answer gets
//! the citation redirect (item 19), and every capability's vision follows the driving
//! model (item 21). Real agent loop, real client, scripted server, real LanceDB store.

use std::sync::Arc;

use crate::support::kb::*;
use crate::support::scripted_server::{Reply, ScriptedServer};
use crate::support::{agent_for, test_config};
use groundwork::capabilities::policy::CitationPolicyCapability;
use groundwork::config::{AppConfig, QaModelConfig};
use groundwork::engine::agent::{RunInput, RunOutput};
use groundwork::engine::cancel::CancelToken;
use groundwork::engine::capability::ToolDef;
use groundwork::engine::events::EventSink;
use groundwork::host::ask::{CapabilityChoice, driving_vision};
use serde_json::json;

fn final_result_tool() -> ToolDef {
    ToolDef::output(
        "final_result",
        "The structured answer.",
        json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}),
    )
}

/// Item 19: an answer given through the output tool, after a search and without a
/// cite, ends the question like a text answer: the policy's one redirect reaches the
/// model (with the output tool's return in the same request), the model cites and
/// answers again, and the run's output is that last structured answer.
#[tokio::test]
async fn a_structured_answer_without_citations_is_redirected_once() {
    let kb = kb().await;
    let ai = kb.chunk("AI Overview", 0);
    let server = ScriptedServer::start(vec![
        Reply::tool_call(
            "rag_search",
            json!({"query": "agents perceive", "limit": 1}),
        ),
        Reply::tool_call("final_result", json!({"answer": "uncited"})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [ai]})),
        Reply::tool_call("final_result", json!({"answer": "cited"})),
    ])
    .await;
    let agent = agent_for(test_config(&server.base_url()))
        .capability(Arc::new(rag(&kb)))
        .capability(Arc::new(CitationPolicyCapability::new()))
        .output_tool(final_result_tool())
        .build()
        .unwrap();
    let result = agent
        .run(RunInput::prompt("q"), EventSink::none(), CancelToken::new())
        .await
        .unwrap();
    match &result.output {
        RunOutput::Tool { tool_name, args } => {
            assert_eq!(tool_name, "final_result");
            assert_eq!(args, &json!({"answer": "cited"}));
        }
        other => panic!("expected the structured answer, got {other:?}"),
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(redirects(&requests[1]), 0);
    assert_eq!(
        redirects(&requests[2]),
        1,
        "the redirect follows the output call"
    );
    // The last request carries the history: still the one redirect, no second.
    assert_eq!(redirects(&requests[3]), 1, "one redirect per question");
    // The output call got its return in the redirect's request.
    assert_eq!(returns_of(&requests[2], "final_result").len(), 1);
    assert_eq!(rag_state(&result.state).citations, [ai]);
    assert_eq!(
        result.state["citation_policy"]["violations"],
        json!([]),
        "a redirected and cited answer is no violation"
    );
}

/// Item 21: with both capabilities, every capability's vision follows `qa.model`, even
/// when `analysis.model` says otherwise; with Analysis alone, `analysis.model` drives.
#[test]
fn vision_follows_the_driving_model() {
    let mut config = AppConfig::default();
    config.qa.model.vision = false;
    config.analysis.model = Some(QaModelConfig { vision: true });
    let both = [CapabilityChoice::Rag, CapabilityChoice::Analysis];
    assert!(!driving_vision(&config, &both));
    assert!(!driving_vision(&config, &[CapabilityChoice::Rag]));
    assert!(driving_vision(&config, &[CapabilityChoice::Analysis]));
    config.analysis.model = None;
    config.qa.model.vision = true;
    assert!(driving_vision(&config, &[CapabilityChoice::Analysis]));
}

/// Item 21 through the composition `ask` and the workbench share: with both
/// capabilities registered and `analysis.model.vision = true` but `qa.model.vision =
/// false`, an `analysis_search` that finds a picture attaches nothing.
#[tokio::test]
async fn both_capabilities_attach_no_picture_when_the_driving_model_is_blind() {
    let kb = kb().await;
    let mut config = AppConfig::default();
    config.qa.model.vision = false;
    config.analysis.model = Some(QaModelConfig { vision: true });
    let script = || {
        vec![
            Reply::tool_call(
                "analysis_search",
                json!({"query": "wiring diagram inverter", "limit": 1}),
            ),
            Reply::text("done"),
        ]
    };
    let run_with = |config: AppConfig, choices: Vec<CapabilityChoice>| {
        let kb = &kb;
        async move {
            let server = ScriptedServer::start(script()).await;
            let model = Arc::new(
                groundwork::model::OpenAiModel::new(test_config(&server.base_url())).unwrap(),
            );
            let opts = groundwork::host::ask::AskOptions {
                capabilities: choices,
                eager: true,
                compaction: false,
                policy: false,
                sandbox_worker: Some(WORKER.into()),
            };
            let agent = groundwork::host::ask::build_agent(model, kb.store.clone(), &config, &opts)
                .unwrap();
            agent
                .run(RunInput::prompt("q"), EventSink::none(), CancelToken::new())
                .await
                .unwrap();
            user_texts(&server.requests()[1]).1
        }
    };
    let both = vec![CapabilityChoice::Rag, CapabilityChoice::Analysis];
    assert_eq!(run_with(config.clone(), both).await, 0, "qa.model is blind");
    // Analysis alone is driven by analysis.model, which sees.
    assert_eq!(
        run_with(config.clone(), vec![CapabilityChoice::Analysis]).await,
        1
    );
}
