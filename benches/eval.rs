//! `groundwork eval`'s own cost: questions per second through the whole engine path
//! (host conversation, agent loop, RAG over a real LanceDB store, compaction and policy,
//! the async-openai client, results appended and synced, the report) with `--jobs 4`
//! against the scripted server on 127.0.0.1, whose researcher answers at once: search,
//! cite, answer (three requests a question). Each iteration runs 20 questions into a
//! fresh folder; the figure is per question.
//!
//! `cargo bench --bench eval`

#[path = "../tests/support/hashembed.rs"]
mod hashembed;
#[allow(dead_code)]
#[path = "../tests/support/researcher.rs"]
mod researcher;
#[allow(dead_code)]
#[path = "../tests/support/scripted_server.rs"]
mod scripted_server;

use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use groundwork::config::{ApiKey, AppConfig, EmbedderSpec, ModelConfig};
use groundwork::engine::cancel::CancelToken;
use groundwork::eval::{self, Arm, Entry, Plan, Settings};
use groundwork::host::compose::Composer;
use groundwork::store::{NewChunk, NewDocument, Store};
use scripted_server::ScriptedServer;
use serde_json::{Map, json};

const QUESTIONS: usize = 20;

async fn store(dir: &std::path::Path, embed_url: &str) -> Store {
    let spec = EmbedderSpec {
        provider: "openai".into(),
        name: hashembed::MODEL.into(),
        vector_dim: hashembed::DIM,
        base_url: Some(embed_url.to_string()),
    };
    let mut store = Store::create(&dir.join("kb.lancedb").to_string_lossy(), &spec)
        .await
        .unwrap();
    store
        .set_embedder(groundwork::embed::build(&spec, &Default::default()).unwrap())
        .unwrap();
    let chunks: Vec<NewChunk> = (0..8)
        .map(|i| {
            let content = format!("Lighthouse fact {i}: towers burned wood, then oil, then lamps.");
            NewChunk {
                content_fts: content.clone(),
                content,
                metadata: json!({"doc_item_refs": [], "headings": [], "labels": ["text"], "page_numbers": []}),
                order: i,
            }
        })
        .collect();
    store
        .add_document(
            NewDocument {
                uri: Some("file:///lighthouses.md".into()),
                title: Some("Lighthouses".into()),
                metadata: Map::new(),
                content: chunks
                    .iter()
                    .map(|c| c.content.clone())
                    .collect::<Vec<_>>()
                    .join("\n"),
                docling_document: json!({}),
                pages: vec![],
                items: vec![],
                chunks,
            },
            None,
        )
        .await
        .unwrap();
    store.ensure_indexes().await.unwrap();
    store
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (model, embed, store) = rt.block_on(async {
        let model =
            ScriptedServer::responding(researcher::researcher(|_| researcher::Study::Cite)).await;
        let embed = hashembed::start().await;
        let store = store(dir.path(), &embed.url).await;
        (model, embed, Arc::new(store))
    });
    let config = ModelConfig {
        base_url: model.base_url(),
        model: "scripted-model".into(),
        api_key: Some(ApiKey::new("sk-bench")),
        ..ModelConfig::default()
    };
    let client: Arc<dyn groundwork::engine::chat::ChatModel> =
        Arc::new(groundwork::model::OpenAiModel::new(config).unwrap());
    let arm = Arm {
        name: "policy".into(),
        settings: Settings::default(),
        composer: Composer::new(Some(client), Some(store), AppConfig::default()),
        model_name: "scripted-model".into(),
        knowledge_bases: Vec::new(),
    };
    let entries: Vec<Entry> = (0..QUESTIONS)
        .map(|i| Entry {
            id: format!("q{i}"),
            label: Some("answerable".into()),
            expect: None,
            turns: vec![format!("How did lighthouse {i} burn its light?")],
        })
        .collect();
    let mut g = c.benchmark_group("eval");
    g.throughput(Throughput::Elements(QUESTIONS as u64));
    g.sample_size(10);
    let mut run = 0;
    g.bench_function("questions_jobs_4", |b| {
        b.iter(|| {
            run += 1;
            let plan = Plan {
                entries: entries.clone(),
                arms: vec![arm.clone()],
                out: dir.path().join(format!("run{run}")),
                jobs: 4,
                fail_fast: false,
                retry_failed: false,
                judge: None,
            };
            let summary = rt
                .block_on(eval::run(plan, &|_| {}, CancelToken::new()))
                .unwrap();
            assert_eq!(summary.report.arms[0].counts.grounded, QUESTIONS);
        })
    });
    g.finish();
    drop(embed);
}

criterion_group!(benches, bench);
criterion_main!(benches);
