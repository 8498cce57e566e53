//! Object storage, exercised (issue 15 part 4): the default build of the binary (S3 is in
//! every build) against a local S3 server (moto on 127.0.0.1, authentication on) with the database at
//! `s3://groundwork/kb.lancedb` and the endpoint and key given the usual way
//! (`AWS_ENDPOINT`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
//! `AWS_ALLOW_HTTP`): ingest, re-ingest, info, search, `ask` against the scripted model,
//! the workbench in tmux, two ingests at once, and the one-line errors for a missing
//! bucket, bad credentials and an unreachable endpoint. The default build's refusal of a
//! `gs://`, `az://` or `db://` URI (the `cloud` feature's) is checked too.
//!
//! `.ci/setup-tests` installs moto (see `support/s3.rs`); without it these tests fail
//! saying so.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::hashembed::{self, EmbedServer};
use crate::support::s3::{AWS_VARS, BUCKET, Moto, free_port, groundwork_bin};
use crate::support::scripted_server::{Reply, ScriptedServer};
use crate::support::tmux::{EXIT_SUFFIX, Tmux, assert_restored};
use serde_json::{Value, json};

const DB: &str = "s3://groundwork/kb.lancedb";

/// A user: a private HOME (data dir, logs, config) and a working directory of their own.
struct User {
    home: tempfile::TempDir,
    cwd: tempfile::TempDir,
}

impl User {
    fn new() -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
            cwd: tempfile::tempdir().unwrap(),
        }
    }

    fn command(&self, bin: &Path, args: &[&str], env: &[(String, String)]) -> Command {
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .current_dir(self.cwd.path())
            .env("HOME", self.home.path())
            .env("XDG_DATA_HOME", self.home.path().join("data"))
            .env("XDG_CONFIG_HOME", self.home.path().join("config"))
            .env("OPENAI_API_KEY", "sk-s3-test-SECRET")
            .env("GROUNDWORK_DISCOVER", "off")
            .env_remove("HAIKU_RAG_DB")
            .env_remove("GROUNDWORK_MODEL_URL")
            .env_remove("GROUNDWORK_MODEL")
            .env_remove("GROUNDWORK_EMBED_URL")
            .env_remove("GROUNDWORK_EMBED_MODEL")
            .env_remove("GROUNDWORK_CONFIG");
        for k in AWS_VARS {
            cmd.env_remove(k);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    async fn run(&self, bin: &Path, args: &[&str], env: &[(String, String)]) -> Output {
        let mut cmd = self.command(bin, args, env);
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap()
    }

    /// What the user's log file holds (empty when there is none).
    fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("data/groundwork/logs/groundwork.log"))
            .unwrap_or_default()
    }
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ingest")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn embed_args(embed: &EmbedServer) -> Vec<String> {
    vec![
        "--embed-url".into(),
        embed.url.clone(),
        "--embed-model".into(),
        hashembed::MODEL.into(),
    ]
}

async fn ingest(
    user: &User,
    bin: &Path,
    env: &[(String, String)],
    embed: &EmbedServer,
    files: &[&str],
) -> Output {
    let mut args: Vec<String> = vec!["--db".into(), DB.into(), "ingest".into()];
    args.extend(files.iter().map(|f| f.to_string()));
    args.extend(embed_args(embed));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    user.run(bin, &args, env).await
}

#[tokio::test]
async fn ingest_search_ask_and_the_workbench_on_s3() {
    let bin = groundwork_bin();
    let moto = Moto::start(&[]);
    let env = moto.env();
    let embed = hashembed::start().await;
    let user = User::new();

    let o = ingest(
        &user,
        &bin,
        &env,
        &embed,
        &[&fixture("sample.md"), &fixture("sample.html")],
    )
    .await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(err(&o).contains(&format!("created {DB}")), "{}", err(&o));
    assert!(out(&o).contains("2 added"), "{}", out(&o));
    // Everything is in the bucket, under the database's prefix; nothing landed locally
    // (a URI taken for a relative path would have made `s3:/groundwork/...` here).
    let keys = moto.keys(BUCKET);
    for table in [
        "documents",
        "document_meta",
        "chunks",
        "document_items",
        "settings",
    ] {
        let prefix = format!("kb.lancedb/{table}.lance/_versions/");
        assert!(
            keys.iter().any(|k| k.starts_with(&prefix)),
            "no {prefix} in {keys:?}"
        );
    }
    assert!(
        keys.iter().all(|k| k.starts_with("kb.lancedb/")),
        "{keys:?}"
    );
    assert_eq!(
        std::fs::read_dir(user.cwd.path()).unwrap().count(),
        0,
        "files were written to the working directory"
    );

    // Re-ingesting reads the stored hashes back from the bucket.
    let o = ingest(&user, &bin, &env, &embed, &[&fixture("sample.md")]).await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("1 unchanged"), "{}", out(&o));

    let o = user.run(&bin, &["--db", DB, "info"], &env).await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("2 documents"), "{}", out(&o));
    assert!(out(&o).contains(DB), "{}", out(&o));

    let o = user
        .run(
            &bin,
            &[
                "--db",
                DB,
                "search",
                "fires on hills",
                "--json",
                "--limit",
                "1",
            ],
            &env,
        )
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let hits: Value = serde_json::from_str(&out(&o)).unwrap();
    assert!(
        hits[0]["content"]
            .as_str()
            .unwrap()
            .contains("fires on hills"),
        "{hits}"
    );
    let chunk = hits[0]["chunk_id"].as_str().unwrap().to_string();

    // `ask`: the agent searches the bucket's database and cites what it found.
    let model = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "fires on hills"})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [chunk]})),
        Reply::text("The first towers were fires on hills."),
    ])
    .await;
    let session = user.home.path().join("ask-session.sqlite");
    let url = model.base_url();
    let o = user
        .run(
            &bin,
            &[
                "--db",
                DB,
                "--session",
                session.to_str().unwrap(),
                "--model-url",
                &url,
                "--model",
                "scripted",
                "ask",
                "How did lighthouses start?",
                "--json",
            ],
            &env,
        )
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let v: Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["answer"], "The first towers were fires on hills.");
    assert_eq!(v["status"], "grounded");
    assert_eq!(v["citations"][0]["chunk_id"], chunk.as_str());
    // The search result the model read came from the bucket.
    let second = serde_json::to_string(&model.requests()[1]).unwrap();
    assert!(second.contains("fires on hills"), "{second}");
    // The session is a local file; the bucket holds the database only.
    assert!(session.exists());
    assert!(
        moto.keys(BUCKET)
            .iter()
            .all(|k| k.starts_with("kb.lancedb/"))
    );

    workbench_on_s3(&bin, &moto, &user, &chunk).await;
    assert!(
        !user.log().contains(&moto.secret),
        "the secret reached the log"
    );
}

/// The workbench's open path on the bucket: first frame, a question answered from the
/// bucket's database with its ledger row, quit, terminal restored.
async fn workbench_on_s3(bin: &Path, moto: &Moto, user: &User, chunk: &str) {
    let model = ScriptedServer::start(vec![
        Reply::tool_call("rag_search", json!({"query": "fires on hills"})),
        Reply::tool_call("rag_cite", json!({"chunk_ids": [chunk]})),
        Reply::text("Fires on hills came first."),
    ])
    .await;
    let session = user.home.path().join("tui-session.sqlite");
    let tmux = Tmux::new("s3");
    let vars: Vec<String> = moto.env().iter().map(|(k, v)| format!("{k}={v}")).collect();
    let script = format!(
        "cd {cwd} && env -u GROUNDWORK_MODEL_URL -u GROUNDWORK_MODEL -u HAIKU_RAG_DB \
         HOME={home} XDG_DATA_HOME={home}/data XDG_CONFIG_HOME={home}/config \
         GROUNDWORK_DISCOVER=off OPENAI_API_KEY=sk-s3-tui-SECRET {vars} \
         {bin} --db {DB} --session {session} --model-url {url} --model scripted-model; {EXIT_SUFFIX}",
        cwd = user.cwd.path().display(),
        home = user.home.path().display(),
        vars = vars.join(" "),
        bin = bin.display(),
        session = session.display(),
        url = model.base_url(),
    );
    tmux.start(&script, 160, 48);
    let screen = tmux
        .wait_for("the first frame", 60, |s| {
            s.contains("Conversation") && s.contains("Citation ledger")
        })
        .await;
    assert!(screen.contains("groundwork/kb.lancedb"), "{screen}");
    tmux.send(&["How did lighthouses start?"]);
    tmux.send(&["Enter"]);
    tmux.wait_for("the answer", 60, |s| {
        s.contains("Fires on hills came first.")
    })
    .await;
    let screen = tmux
        .wait_for("the ledger row", 60, |s| {
            s.lines()
                .any(|l| l.contains("1   grounded") && l.contains("How did"))
        })
        .await;
    assert!(screen.contains("Sources (1)"), "{screen}");
    tmux.send(&["C-q"]);
    let screen = tmux.wait_exit().await;
    assert_restored(&screen, "Citation ledger");
    let saved = crate::support::session_text(&session);
    assert!(saved.contains("Fires on hills came first."));
    assert_eq!(
        std::fs::read_dir(user.cwd.path()).unwrap().count(),
        0,
        "the workbench wrote to the working directory"
    );
}

/// Runs `args` and returns the one line on stderr, checking the exit status, that it is
/// one line, and that no secret is in it or in the log.
async fn one_line_error(
    user: &User,
    bin: &Path,
    args: &[&str],
    env: &[(String, String)],
    secrets: &[&str],
) -> String {
    let o = user.run(bin, args, env).await;
    assert!(!o.status.success(), "{args:?} succeeded: {}", out(&o));
    let e = err(&o);
    let lines: Vec<&str> = e.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?}: not one line:\n{e}");
    for s in secrets {
        assert!(!e.contains(s), "a secret in the error: {e}");
        assert!(!user.log().contains(s), "a secret in the log");
    }
    lines[0].to_string()
}

#[tokio::test]
async fn a_missing_bucket_bad_credentials_and_an_unreachable_endpoint_are_one_clear_line() {
    let bin = groundwork_bin();
    let moto = Moto::start(&[]);
    let embed = hashembed::start().await;
    let user = User::new();
    let env = moto.env();
    let secrets = [moto.secret.as_str()];
    let at = &moto.endpoint;

    // A bucket that does not exist: searching, and ingesting (which would create the db).
    let nosuch = "s3://no-such-bucket/kb.lancedb";
    let line = one_line_error(&user, &bin, &["--db", nosuch, "info"], &env, &secrets).await;
    assert_eq!(
        line,
        format!(
            "error: the bucket 'no-such-bucket' does not exist at {at}: create it, or correct \
             the bucket in {nosuch}"
        )
    );
    let mut args = vec!["--db", nosuch, "ingest"];
    let md = fixture("sample.md");
    args.push(&md);
    let extra = embed_args(&embed);
    args.extend(extra.iter().map(String::as_str));
    let line = one_line_error(&user, &bin, &args, &env, &secrets).await;
    assert!(
        line.contains("the bucket 'no-such-bucket' does not exist"),
        "{line}"
    );

    // A database in the bucket, for the credential errors to be about.
    let o = ingest(&user, &bin, &env, &embed, &[&fixture("sample.md")]).await;
    assert!(o.status.success(), "{}", err(&o));
    let with = |key: &str, value: &str| -> Vec<(String, String)> {
        env.iter()
            .map(|(k, v)| {
                if k == key {
                    (k.clone(), value.to_string())
                } else {
                    (k.clone(), v.clone())
                }
            })
            .collect()
    };

    // The right key with a wrong secret; a key the server does not know.
    let wrong = "wrong-secret-0123456789abcdef";
    let bad = with("AWS_SECRET_ACCESS_KEY", wrong);
    let line = one_line_error(
        &user,
        &bin,
        &["--db", DB, "search", "fires"],
        &bad,
        &[wrong, &moto.secret],
    )
    .await;
    assert_eq!(
        line,
        format!(
            "error: {at} rejected the credentials for {DB} (SignatureDoesNotMatch): check \
             AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)"
        )
    );
    let unknown = with("AWS_ACCESS_KEY_ID", "AKIAUNKNOWNUNKNOWN00");
    let line = one_line_error(&user, &bin, &["--db", DB, "info"], &unknown, &secrets).await;
    assert!(line.contains("(InvalidAccessKeyId)"), "{line}");

    // Nothing listens on the endpoint.
    let gone = format!("http://127.0.0.1:{}", free_port());
    let unreachable = with("AWS_ENDPOINT", &gone);
    let line = one_line_error(&user, &bin, &["--db", DB, "info"], &unreachable, &secrets).await;
    assert_eq!(
        line,
        format!(
            "error: cannot reach the object store at {gone} for {DB} (connection refused): \
             check AWS_ENDPOINT (or AWS_ENDPOINT_URL; AWS_ALLOW_HTTP=true for http://) and \
             the network"
        )
    );

    // After all that the database is as it was.
    let o = user.run(&bin, &["--db", DB, "info"], &env).await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("1 documents"), "{}", out(&o));
}

/// Two users ingest different files into the same bucket database at the same moment:
/// LanceDB commits each table version with a conditional PUT (`If-None-Match: *`), so the
/// second writer's commit fails, is rebased on the first one's and retried; both
/// succeed and every document is there once.
#[tokio::test]
async fn two_ingests_at_once_into_one_bucket_database_both_land() {
    let bin = groundwork_bin();
    let moto = Moto::start(&[]);
    let env = moto.env();
    let embed = hashembed::start().await;
    let (alice, bob) = (User::new(), User::new());
    let o = ingest(&alice, &bin, &env, &embed, &[&fixture("sample.md")]).await;
    assert!(o.status.success(), "{}", err(&o));

    let files = |user: &User, name: &str, n: usize| -> Vec<String> {
        (0..n)
            .map(|i| {
                let p: PathBuf = user.cwd.path().join(format!("{name}-{i}.txt"));
                std::fs::write(
                    &p,
                    format!("{name} report {i}: the {name} tide tables {i}.\n"),
                )
                .unwrap();
                p.to_string_lossy().into_owned()
            })
            .collect()
    };
    let a = files(&alice, "alice", 3);
    let b = files(&bob, "bob", 3);
    let a_refs: Vec<&str> = a.iter().map(String::as_str).collect();
    let b_refs: Vec<&str> = b.iter().map(String::as_str).collect();
    let (oa, ob) = tokio::join!(
        ingest(&alice, &bin, &env, &embed, &a_refs),
        ingest(&bob, &bin, &env, &embed, &b_refs)
    );
    assert!(oa.status.success(), "alice: {}", err(&oa));
    assert!(ob.status.success(), "bob: {}", err(&ob));
    assert!(out(&oa).contains("3 added"), "{}", out(&oa));
    assert!(out(&ob).contains("3 added"), "{}", out(&ob));

    let o = alice.run(&bin, &["--db", DB, "list", "--json"], &env).await;
    assert!(o.status.success(), "{}", err(&o));
    let docs: Value = serde_json::from_str(&out(&o)).unwrap();
    let uris: Vec<String> = docs
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["uri"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(uris.len(), 7, "{uris:?}");
    for f in a.iter().chain(&b) {
        let name = Path::new(f)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert_eq!(
            uris.iter().filter(|u| u.ends_with(&name)).count(),
            1,
            "{name} in {uris:?}"
        );
    }
    // Each writer's chunks are searchable.
    for who in ["alice", "bob"] {
        let o = bob
            .run(
                &bin,
                &[
                    "--db",
                    DB,
                    "search",
                    &format!("{who} tide tables"),
                    "--json",
                ],
                &env,
            )
            .await;
        assert!(o.status.success(), "{}", err(&o));
        assert!(out(&o).contains(&format!("{who} report")), "{}", out(&o));
    }
}

/// The default build (no `cloud` feature) refuses a Google Cloud Storage, Azure or LanceDB
/// Cloud URI in one line that says how to get a build that opens it.
#[tokio::test]
async fn the_default_build_says_gcs_azure_and_lancedb_cloud_need_the_cloud_feature() {
    let user = User::new();
    let bin = groundwork_bin();
    for (uri, place) in [
        ("gs://bucket/kb.lancedb", "Google Cloud Storage (gs://)"),
        ("az://container/kb.lancedb", "Azure Blob Storage (az://)"),
        ("db://my-database", "LanceDB Cloud (db://)"),
    ] {
        let line = one_line_error(&user, &bin, &["--db", uri, "info"], &[], &[]).await;
        assert_eq!(
            line,
            format!(
                "error: {uri} is on {place}, which this build of groundwork cannot open: build \
                 it with `cargo build --release --features cloud`"
            )
        );
    }
}
