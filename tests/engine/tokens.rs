//! True token counts end to end: `groundwork ask --json` against the scripted
//! OpenAI-compatible server (whose answers carry a `usage` object), then `inspect` and
//! `inspect --json` on the saved session. Each request shows the provider's prompt and
//! completion tokens beside the counted figure, the difference, and which counter counted:
//! a `tokenizer.json` named in the config, the tiktoken encoding of an OpenAI model
//! family, or the characters / 4 estimate.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::hashembed;
use crate::support::scripted_server::{Reply, ScriptedServer};
use serde_json::Value;

struct Home(tempfile::TempDir);

impl Home {
    async fn run(&self, args: &[&str], config: Option<&Path>) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
        cmd.args(args)
            .env("HOME", self.0.path())
            .env("XDG_DATA_HOME", self.0.path().join("data"))
            .env("XDG_CONFIG_HOME", self.0.path().join("config"))
            // Hermetic: a model server running on this machine is never found.
            .env("GROUNDWORK_DISCOVER", "off")
            .env_remove("GROUNDWORK_CONFIG")
            .env_remove("HAIKU_RAG_DB")
            .env_remove("GROUNDWORK_MODEL_URL")
            .env_remove("GROUNDWORK_MODEL")
            .env_remove("GROUNDWORK_EMBED_URL")
            .env_remove("GROUNDWORK_EMBED_MODEL");
        if let Some(c) = config {
            cmd.env("GROUNDWORK_CONFIG", c);
        }
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap()
    }
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// What the fixture tokenizer (WordLevel behind the Whitespace pre-tokenizer, regex
/// `\w+|[^\w\s]+`) makes of `s`, counted without it: one token per run of word
/// characters and per run of other non-space characters.
fn pretokens(s: &str) -> usize {
    #[derive(PartialEq, Clone, Copy)]
    enum C {
        Word,
        Space,
        Other,
    }
    let class = |c: char| {
        if c.is_alphanumeric() || c == '_' {
            C::Word
        } else if c.is_whitespace() {
            C::Space
        } else {
            C::Other
        }
    };
    let mut n = 0;
    let mut prev = C::Space;
    for c in s.chars() {
        let k = class(c);
        if k != C::Space && k != prev {
            n += 1;
        }
        prev = k;
    }
    n
}

fn fixture_tokenizer() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/configs/good/tokenizer.json")
}

async fn ingested(home: &Home, embed: &hashembed::EmbedServer) -> String {
    let db = home.0.path().join("kb.lancedb");
    let db = db.to_str().unwrap().to_string();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ingest/sample.md");
    let o = home
        .run(
            &[
                "--db",
                &db,
                "ingest",
                sample.to_str().unwrap(),
                "--embed-url",
                &embed.url,
                "--embed-model",
                hashembed::MODEL,
            ],
            None,
        )
        .await;
    assert!(o.status.success(), "{}", text(&o).1);
    db
}

/// One question with `model`, answered in one request reporting (prompt, completion).
async fn ask(
    home: &Home,
    db: &str,
    session: &Path,
    model: &str,
    config: Option<&Path>,
    usage: (u64, u64),
) -> Value {
    let server = ScriptedServer::start(vec![
        Reply::text("Lighthouses began as fires on hills.").usage(usage.0, usage.1),
    ])
    .await;
    let url = server.base_url();
    let o = home
        .run(
            &[
                "--db",
                db,
                "--session",
                session.to_str().unwrap(),
                "--model-url",
                &url,
                "--model",
                model,
                "ask",
                "How did lighthouses start?",
                "--no-policy",
                "--json",
            ],
            config,
        )
        .await;
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[tokio::test]
async fn ask_and_inspect_show_the_provider_figure_beside_the_counted_one() {
    let embed = hashembed::start().await;
    let home = Home(tempfile::tempdir().unwrap());
    let db = ingested(&home, &embed).await;
    let config = home.0.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[model]\ntokenizer = {:?}\n",
            fixture_tokenizer().display().to_string()
        ),
    )
    .unwrap();
    let session = home.0.path().join("s.sqlite");
    let v = ask(&home, &db, &session, "smollm2", Some(&config), (4321, 56)).await;
    let reqs = v["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 1, "{v}");
    let r = &reqs[0];
    let t = &r["tokens"];
    assert_eq!(t["counter"], "tokenizer.json");
    // The instructions counted by the user's tokenizer, exactly.
    let instructions = r["instructions"].as_str().unwrap();
    assert_eq!(
        t["instructions"].as_u64().unwrap() as usize,
        pretokens(instructions)
    );
    // Tool schemas are counted too: every tool's JSON as sent.
    let tools: usize = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let wire = serde_json::json!({"type": "function", "function": {
                "name": d["name"], "description": d["description"], "parameters": d["parameters"]}});
            pretokens(&wire.to_string())
        })
        .sum();
    assert!(tools > 0);
    assert_eq!(t["tools"].as_u64().unwrap() as usize, tools);
    // The one message sent is the question.
    let sent = t["sent"].as_u64().unwrap() as usize;
    assert_eq!(
        sent,
        pretokens(instructions) + tools + pretokens("How did lighthouses start?")
    );
    assert_eq!(t["provider_prompt"], 4321);
    assert_eq!(t["provider_completion"], 56);
    assert_eq!(t["difference"].as_i64().unwrap(), 4321 - sent as i64);
    // The chars/4 estimate of messages and instructions stays beside it.
    assert!(r["compacted_tokens"]["total"].as_u64().unwrap() > 0);

    // `inspect --json` reads the same figures back from the session.
    let o = home
        .run(&["inspect", session.to_str().unwrap(), "--json"], None)
        .await;
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let back: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(back[0]["tokens"], *t);

    // The overview: counted, provider, completion, difference and the counter.
    let o = home
        .run(&["inspect", session.to_str().unwrap()], None)
        .await;
    let (out, _) = text(&o);
    let header = out.lines().nth(1).unwrap();
    for col in ["counted", "provider", "out", "diff", "counter"] {
        assert!(header.contains(col), "{out}");
    }
    let row: Vec<&str> = out.lines().nth(2).unwrap().split_whitespace().collect();
    let diff = diff_thousands(4321 - sent as i64);
    assert_eq!(
        row[6..],
        [
            sent.to_string().as_str(),
            "4321",
            "56",
            diff.as_str(),
            "tokenizer.json"
        ],
        "{out}"
    );

    // One request in detail says which counter counted what, and the difference.
    let o = home
        .run(
            &["inspect", session.to_str().unwrap(), "--request", "1"],
            None,
        )
        .await;
    let (out, _) = text(&o);
    assert!(
        out.contains(&format!(
            "counted: sent {} tok (tokenizer.json) = instructions {} + tools {} + messages {}",
            sent,
            pretokens(instructions),
            tools,
            pretokens("How did lighthouses start?")
        )),
        "{out}"
    );
    let pct = (4321 - sent as i64) as f64 * 100.0 / sent as f64;
    assert!(
        out.contains(&format!(
            "provider: prompt 4,321 / completion 56 tok · difference {} ({pct:+.1}%)",
            diff
        )),
        "{out}"
    );
}

fn diff_thousands(d: i64) -> String {
    groundwork::engine::tokens::signed(d)
}

#[tokio::test]
async fn the_counter_follows_the_model_family_else_the_estimate() {
    let embed = hashembed::start().await;
    let home = Home(tempfile::tempdir().unwrap());
    let db = ingested(&home, &embed).await;
    // An OpenAI family: its tiktoken encoding, no file needed (compiled in).
    let v = ask(
        &home,
        &db,
        &home.0.path().join("a.json"),
        "gpt-4o-mini",
        None,
        (900, 9),
    )
    .await;
    let t = &v["requests"][0]["tokens"];
    assert_eq!(t["counter"], "o200k");
    let o200k = t["sent"].as_u64().unwrap();
    assert_eq!(t["difference"].as_i64().unwrap(), 900 - o200k as i64);
    let v = ask(
        &home,
        &db,
        &home.0.path().join("b.json"),
        "gpt-4",
        None,
        (900, 9),
    )
    .await;
    assert_eq!(v["requests"][0]["tokens"]["counter"], "cl100k");
    // Any other model: the estimate, said as such.
    let v = ask(
        &home,
        &db,
        &home.0.path().join("c.json"),
        "qwen3",
        None,
        (900, 9),
    )
    .await;
    let t = &v["requests"][0]["tokens"];
    assert_eq!(t["counter"], "≈ chars/4");
    // The estimate counts the tool schemas as well as the messages and instructions.
    let r = &v["requests"][0];
    assert!(t["sent"].as_u64().unwrap() > r["compacted_tokens"]["total"].as_u64().unwrap());
    assert_eq!(t["provider_prompt"], 900);
}

#[tokio::test]
async fn a_tokenizer_that_cannot_be_read_is_one_line_and_nothing_is_sent() {
    let embed = hashembed::start().await;
    let home = Home(tempfile::tempdir().unwrap());
    let db = ingested(&home, &embed).await;
    let bad = home.0.path().join("tokenizer.json");
    std::fs::write(&bad, "{ not a tokenizer").unwrap();
    let config = home.0.path().join("config.toml");
    std::fs::write(&config, "[model]\ntokenizer = \"tokenizer.json\"\n").unwrap();
    let server = ScriptedServer::start(vec![Reply::text("never")]).await;
    let session = home.0.path().join("s.sqlite");
    let o = home
        .run(
            &[
                "--db",
                &db,
                "--session",
                session.to_str().unwrap(),
                "--model-url",
                &server.base_url(),
                "ask",
                "Anything?",
            ],
            Some(&config),
        )
        .await;
    let (_, err) = text(&o);
    assert!(!o.status.success());
    let line = err.lines().last().unwrap_or_default();
    assert!(
        line.contains(&format!(
            "model.tokenizer: cannot read tokenizer {}",
            bad.display()
        )),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(server.requests().is_empty());
    assert!(!session.exists());
}
