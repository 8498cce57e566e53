//! Against a real llama.cpp `llama-server` (SmolLM2-135M-Instruct, 127.0.0.1, a free port,
//! one slot, `-t 2`, `-c 2048`): streaming, the usage stored against the server's own, cancel,
//! the context-overflow and 404 messages, a server that is still loading, and a server killed
//! mid-answer. `.ci/setup-tests` builds the server and fetches the model (see `crate::support::llama`);
//! without them every test here fails with "run .ci/setup-tests".
//!
//! The tests take turns (one server at a time): two servers on two cores would make each
//! other crawl.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex as StdMutex;

use crate::support::llama::{
    ALIAS, LlamaOptions, LlamaServer, RecordingProxy, server_deltas, server_usage,
};
use crate::support::{agent_for, drain, events, test_config};
use groundwork::config::{ModelConfig, ModelOverrides};
use groundwork::engine::agent::{RunError, RunInput, RunOutput};
use groundwork::engine::cancel::CancelToken;
use groundwork::engine::discover::{Discovery, ModelChoice, choose_model_with, discover_waiting};
use groundwork::engine::events::CoreEvent;
use groundwork::engine::messages::{ModelMessage, ModelResponsePart};
use groundwork::session::Session;
use serde_json::Value;

/// One real server at a time.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Our client's config for a real server: no retries, generous timeouts.
fn real_config(base_url: &str) -> ModelConfig {
    let mut c = test_config(base_url);
    c.model = ALIAS.into();
    c.timeout_secs = 300;
    c.connect_timeout_secs = 5;
    c.max_retries = 0;
    c
}

/// The text of the last response in `messages`.
fn last_text(messages: &[ModelMessage]) -> String {
    messages
        .iter()
        .rev()
        .find_map(|m| match m {
            ModelMessage::Response(r) => Some(
                r.parts
                    .iter()
                    .filter_map(|p| match p {
                        ModelResponsePart::Text(t) => Some(t.content.clone()),
                        _ => None,
                    })
                    .collect::<String>(),
            ),
            _ => None,
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn streamed_text_arrives_in_deltas_and_is_committed() {
    let _turn = TURN.lock().await;
    let server = LlamaServer::start(&LlamaOptions::default());
    let proxy = RecordingProxy::start(format!("http://{}", server.addr())).await;
    let agent = agent_for(real_config(&proxy.base_url())).build().unwrap();
    let (tx, mut rx) = events();
    let result = agent
        .run(
            RunInput::prompt("Say hello to the reader."),
            tx,
            CancelToken::new(),
        )
        .await
        .unwrap();
    let deltas: Vec<String> = drain(&mut rx)
        .into_iter()
        .filter_map(|e| match e {
            CoreEvent::TextDelta { text, .. } => Some(text),
            _ => None,
        })
        .collect();
    let RunOutput::Text(answer) = &result.output else {
        panic!("expected a text answer, got {:?}", result.output);
    };
    assert!(deltas.len() >= 2, "streamed in pieces: {deltas:?}");
    assert_eq!(&deltas.concat(), answer);
    // Byte for byte what the server streamed.
    let bodies = proxy.bodies();
    assert_eq!(bodies.len(), 1, "one request");
    assert_eq!(server_deltas(&bodies[0]).concat(), *answer);
    // Committed: the session holds the question and the answer.
    let mut session = Session::new(ALIAS);
    assert!(session.commit_run(&Ok(result.clone())));
    assert_eq!(last_text(&session.messages), *answer);
}

#[tokio::test]
async fn the_stored_usage_is_the_servers() {
    let _turn = TURN.lock().await;
    let server = LlamaServer::start(&LlamaOptions::default());
    let proxy = RecordingProxy::start(format!("http://{}", server.addr())).await;
    let agent = agent_for(real_config(&proxy.base_url())).build().unwrap();
    let result = agent
        .run(
            RunInput::prompt("Name three colours."),
            None,
            CancelToken::new(),
        )
        .await
        .unwrap();
    let usage = server_usage(&proxy.bodies()[0]).expect("the server reported usage");
    let mut session = Session::new(ALIAS);
    session.commit_run(&Ok(result));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    session.save(&path).unwrap();
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let response = saved["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["kind"] == "response")
        .unwrap();
    assert_eq!(response["usage"]["input_tokens"], usage["prompt_tokens"]);
    assert_eq!(
        response["usage"]["output_tokens"],
        usage["completion_tokens"]
    );
    assert!(usage["completion_tokens"].as_u64().unwrap() > 0, "{usage}");
}

#[tokio::test]
async fn ask_stores_the_servers_usage_for_every_request() {
    let _turn = TURN.lock().await;
    let kb = crate::support::workbench::demo_kb().await;
    let server = LlamaServer::start(&LlamaOptions::default());
    let proxy = RecordingProxy::start(format!("http://{}", server.addr())).await;
    let home = tempfile::tempdir().unwrap();
    let session = home.path().join("s.sqlite");
    let o = ask(
        home.path(),
        &kb.db,
        &session,
        "What does the demo corpus say about batteries?",
        &[("GROUNDWORK_MODEL_URL", &proxy.base_url())],
    )
    .await;
    assert!(o.status.success(), "{}", stderr(&o));
    let saved = crate::support::session_json(&session);
    let responses: Vec<&Value> = saved["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["kind"] == "response")
        .collect();
    let bodies = proxy.bodies();
    assert_eq!(responses.len(), bodies.len(), "one response per request");
    for (stored, body) in responses.iter().zip(&bodies) {
        let usage = server_usage(body).expect("the server reported usage");
        assert_eq!(stored["usage"]["input_tokens"], usage["prompt_tokens"]);
        assert_eq!(stored["usage"]["output_tokens"], usage["completion_tokens"]);
    }
    // The printed answer is the one the server streamed last.
    let last = server_deltas(bodies.last().unwrap()).concat();
    assert!(stdout(&o).contains(last.trim()), "{}", stdout(&o));
}

#[tokio::test]
async fn cancel_closes_the_connection_and_commits_nothing() {
    let _turn = TURN.lock().await;
    // The sampled model may end a short answer at once: the answer runs to 1500 tokens.
    let server = LlamaServer::start(&LlamaOptions {
        n_predict: Some(1500),
        ignore_eos: true,
        ..LlamaOptions::default()
    });
    let agent = agent_for(real_config(&server.base_url())).build().unwrap();
    let (tx, mut rx) = events();
    let cancel = CancelToken::new();
    let run = agent.run(
        RunInput::prompt("Count from 1 to 1000, one number per line."),
        tx,
        cancel.clone(),
    );
    let watch = async {
        // Cancel (what Esc does) once the first text has arrived.
        while let Some(e) = rx.recv().await {
            if matches!(e, CoreEvent::TextDelta { .. }) {
                cancel.cancel();
                break;
            }
        }
        rx
    };
    let (outcome, mut rx) = tokio::join!(run, watch);
    assert!(
        matches!(outcome, Err(RunError::Cancelled)),
        "{:?}",
        outcome.as_ref().map(|r| &r.output)
    );
    assert!(
        drain(&mut rx)
            .iter()
            .any(|e| matches!(e, CoreEvent::RunCancelled { .. }))
    );
    let mut session = Session::new(ALIAS);
    assert!(!session.commit_run(&outcome));
    assert!(session.messages.is_empty());
    // The server saw the connection close and stopped generating: llama.cpp logs
    // "cancel task" when the client goes away (a finished task logs no such line). Waited
    // for off the runtime, which must stay free to close the dropped connection.
    // The server writes its log from another thread: the line may follow the idle slot.
    let log = tokio::task::spawn_blocking(move || {
        server.wait_idle();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let log = server.log_text();
            if log.contains("cancel task") || std::time::Instant::now() > deadline {
                return log;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    })
    .await
    .unwrap();
    assert!(
        log.contains("cancel task"),
        "the server never saw the cancel:\n{log}"
    );
}

/// Depends on the client's lenient error parsing (branch `model`): llama.cpp's error body
/// has an integer `code`.
#[tokio::test]
async fn a_prompt_over_the_context_reads_like_the_servers_message() {
    let _turn = TURN.lock().await;
    let server = LlamaServer::start(&LlamaOptions::default());
    let agent = agent_for(real_config(&server.base_url())).build().unwrap();
    let question = "Summarise this: ".to_string() + &"lorem ipsum dolor sit amet ".repeat(700);
    let err = agent
        .run(RunInput::prompt(question), None, CancelToken::new())
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("HTTP 400"), "{msg}");
    assert!(
        msg.contains("exceeds the available context size (2048 tokens)"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "{msg}");
}

/// Depends on the client's lenient error parsing (branch `model`).
#[tokio::test]
async fn a_wrong_base_path_reads_404_file_not_found() {
    let _turn = TURN.lock().await;
    let server = LlamaServer::start(&LlamaOptions::default());
    let url = format!("http://{}/v2", server.addr());
    let agent = agent_for(real_config(&url)).build().unwrap();
    let err = agent
        .run(RunInput::prompt("Hello?"), None, CancelToken::new())
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("model endpoint {url} returned HTTP 404")),
        "{msg}"
    );
    assert!(msg.contains("File Not Found"), "{msg}");
}

#[tokio::test]
async fn discovery_waits_for_a_server_that_is_still_loading() {
    let _turn = TURN.lock().await;
    let server = LlamaServer::spawn(&LlamaOptions::default());
    server.wait_listening();
    let candidates = vec![("llama.cpp".to_string(), server.base_url())];
    let notes = StdMutex::new(Vec::<String>::new());
    let on_wait = |n: &str| notes.lock().unwrap().push(n.to_string());
    let env = std::collections::HashMap::new();
    let choice = choose_model_with(
        None,
        &env,
        &ModelOverrides::default(),
        &candidates,
        &on_wait,
    )
    .await
    .unwrap();
    let notes = notes.into_inner().unwrap();
    assert_eq!(
        notes,
        [format!(
            "llama.cpp on {} is loading the model; waiting up to 30 s",
            server.addr()
        )],
        "discovery saw the 503 of a loading server"
    );
    match choice {
        ModelChoice::Discovered(c, f) => {
            assert_eq!(c.base_url, server.base_url());
            assert_eq!(c.model, ALIAS);
            assert_eq!(f.server, "llama.cpp");
        }
        other => panic!("expected the server once loaded, got {other:?}"),
    }
}

#[tokio::test]
async fn a_server_that_stays_loading_is_named_as_loading() {
    let _turn = TURN.lock().await;
    let server = LlamaServer::spawn(&LlamaOptions::default());
    server.wait_listening();
    let candidates = vec![("llama.cpp".to_string(), server.base_url())];
    // No time to finish loading: its 503 is reported with the server's words.
    match discover_waiting(
        &candidates,
        std::time::Duration::from_millis(400),
        std::time::Duration::ZERO,
        &|_| {},
    )
    .await
    {
        Discovery::Loading(l) => assert_eq!(l[0].message, "Loading model"),
        other => panic!("expected loading, got {other:?}"),
    }
}

#[tokio::test]
async fn ask_right_after_the_server_starts_waits_and_answers() {
    let _turn = TURN.lock().await;
    let kb = crate::support::workbench::demo_kb().await;
    let home = tempfile::tempdir().unwrap();
    let session = home.path().join("s.sqlite");
    let server = LlamaServer::spawn(&LlamaOptions::default());
    server.wait_listening();
    let o = ask(
        home.path(),
        &kb.db,
        &session,
        "What is in the demo corpus?",
        &[("GROUNDWORK_DISCOVER", &server.base_url())],
    )
    .await;
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "{}/v1 is loading the model; waiting up to 30 s",
            server.addr()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("using {ALIAS} at {}", server.base_url())),
        "{err}"
    );
    assert!(!stdout(&o).trim().is_empty());
    assert!(session.exists());
}

/// Depends on the mid-stream wording (branch `model`): "the connection closed mid-answer".
#[tokio::test]
async fn a_server_killed_mid_answer_leaves_the_session_unchanged() {
    let _turn = TURN.lock().await;
    let kb = crate::support::workbench::demo_kb().await;
    let home = tempfile::tempdir().unwrap();
    let session = home.path().join("s.sqlite");
    // A first question, answered and saved.
    {
        let server = LlamaServer::start(&LlamaOptions::default());
        let o = ask(
            home.path(),
            &kb.db,
            &session,
            "Hello?",
            &[("GROUNDWORK_MODEL_URL", &server.base_url())],
        )
        .await;
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let before = Session::load(&session).unwrap();
    // A second one on a server that is killed while it streams a long answer.
    // The sampled model may end a short answer at once: the answer runs to 1500 tokens.
    let server = LlamaServer::start(&LlamaOptions {
        n_predict: Some(1500),
        ignore_eos: true,
        ..LlamaOptions::default()
    });
    let child = ask_command(
        home.path(),
        &kb.db,
        &session,
        "Count from 1 to 1000, one number per line.",
        &[("GROUNDWORK_MODEL_URL", &server.base_url())],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let server = tokio::task::spawn_blocking(move || {
        let mut server = server;
        server.wait_decoding(8);
        server.kill();
        server
    })
    .await
    .unwrap();
    let o = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    drop(server);
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains("closed mid-answer"), "{err}");
    assert_eq!(
        Session::load(&session).unwrap(),
        before,
        "session unchanged"
    );
    let leftovers: Vec<_> = std::fs::read_dir(home.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn ask_command(
    home: &Path,
    db: &str,
    session: &Path,
    question: &str,
    env: &[(&str, &str)],
) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
    cmd.args(["--db", db, "--session"])
        .arg(session)
        .args(["ask", "--no-policy", question])
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("GROUNDWORK_DISCOVER", "off")
        .env_remove("HAIKU_RAG_DB")
        .env_remove("GROUNDWORK_MODEL_URL")
        .env_remove("GROUNDWORK_MODEL")
        .env_remove("OPENAI_API_KEY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

async fn ask(
    home: &Path,
    db: &str,
    session: &Path,
    question: &str,
    env: &[(&str, &str)],
) -> Output {
    let mut cmd = ask_command(home, db, session, question, env);
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The judge of `groundwork verify` against the real server: one request per cited
/// sentence, no tools, the reply stored as the server sent it with the server's usage,
/// and every reply (a 135M model's, whatever it writes) read as one of the four verdicts
/// with a reason.
#[tokio::test]
async fn the_judge_speaks_the_servers_protocol_and_every_reply_gets_a_verdict() {
    use groundwork::host::transcript::{CitationView, Passage, Turn};
    use groundwork::session::verdicts::Verdict;
    let _turn = TURN.lock().await;
    let server = LlamaServer::start(&LlamaOptions::default());
    let proxy = RecordingProxy::start(format!("http://{}", server.addr())).await;
    let mut config = real_config(&proxy.base_url());
    config.max_tokens = Some(48);
    let judge = groundwork::model::OpenAiModel::new(config).unwrap();
    let passage = "Lighthouses stand on rocky coasts and guide ships at night.";
    let mut turn = Turn::new(0, "Where do lighthouses stand?".into());
    turn.answer = "Lighthouses stand on rocky coasts [1]. They are painted by Monet [1].".into();
    turn.citations = vec![CitationView {
        number: 1,
        index: 1,
        evidence: groundwork::host::transcript::Evidence {
            capability: "rag".into(),
            chunk_id: "c1".into(),
            document_id: "d1".into(),
            source: "Lighthouse Guide".into(),
            document_uri: "file:///guide.md".into(),
            ..Default::default()
        },
        content: passage.into(),
        passage: Some(Passage {
            text: passage.into(),
            pages: Vec::new(),
            headings: vec!["Coasts".into()],
            as_cited: false,
        }),
    }];
    let v = groundwork::host::verify::check_turn(&judge, &turn, &CancelToken::new(), &|_, _| {})
        .await
        .unwrap();
    assert_eq!(v.judge, ALIAS);
    assert_eq!(v.claims.len(), 2);
    assert_eq!(v.requests.len(), 2);
    // The chat requests and their responses (a probe the client may make aside).
    let (sent, answers): (Vec<Value>, Vec<Vec<u8>>) = proxy
        .requests()
        .into_iter()
        .zip(proxy.bodies())
        .filter(|(request, _)| request.get("messages").is_some())
        .unzip();
    assert_eq!(sent.len(), 2);
    for (k, (claim, request)) in v.claims.iter().zip(&v.requests).enumerate() {
        assert_eq!(claim.request, Some(k));
        assert!(Verdict::ALL.contains(&claim.verdict));
        assert!(!claim.reason.is_empty());
        assert_eq!(
            groundwork::host::verify::read_reply(&request.reply),
            (claim.verdict, claim.reason.clone()),
            "the verdict is the stored reply's"
        );
        let body = &sent[k];
        assert!(body.get("tools").is_none(), "{body}");
        assert!(
            body["messages"][0]["content"]
                .as_str()
                .unwrap()
                .starts_with("You check one claim")
        );
        assert_eq!(body["messages"][1]["content"], request.prompt.as_str());
        let usage = server_usage(&answers[k]).expect("the server reported usage");
        assert_eq!(
            request.usage,
            Some((
                usage["prompt_tokens"].as_u64().unwrap(),
                usage["completion_tokens"].as_u64().unwrap()
            ))
        );
        assert!(
            server_deltas(&answers[k]).concat() == request.reply,
            "the reply as the server streamed it"
        );
    }
}
