//! `groundwork eval` end to end: the real binary, the real async-openai client against
//! the scripted server (whose researcher answers each request from what it carries, so
//! concurrent questions get their own replies), a real LanceDB store. The policy arm and
//! the no-policy arm differ exactly where uncited answers are redirected into
//! declarations; a killed run continues without running a question twice; a failing
//! endpoint is recorded per question; text question files and TOML experiment files.

use std::collections::HashSet;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::home::{Home, err};
use crate::support::researcher::{self, Study, asked};
use crate::support::scripted_server::ScriptedServer;
use serde_json::{Value, json};

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The whole lines of `results.jsonl` (one being written may not have its newline yet).
fn results(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("results.jsonl")).unwrap_or_default();
    let whole = text.rfind('\n').map_or(0, |i| i + 1);
    text[..whole]
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The question each recorded request was made for (its last question).
fn questions_of(server: &ScriptedServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .map(|b| asked(b).last().cloned().unwrap_or_default())
        .collect()
}

const SET: &str = r#"{"id": "a1", "question": "How did lighthouses start?", "label": "answerable"}
{"id": "a2", "question": "Which lenses do lighthouse towers use?", "label": "answerable"}
{"id": "u1", "question": "Who painted the towers?", "label": "unanswerable", "expect": "not in the guide"}
{"id": "u2", "question": "What did the keeper eat?", "label": "unanswerable"}
{"id": "u3", "question": "How tall was the tallest lighthouse in 1700?", "label": "unanswerable"}
"#;

/// Cites for questions about lighthouses; searches the rest and answers them uncited.
fn researches(q: &str) -> Study {
    if q.to_lowercase().contains("lighthouse") {
        Study::Cite
    } else {
        Study::Uncited
    }
}

#[tokio::test]
async fn the_policy_arm_turns_uncited_answers_into_declarations_and_the_report_counts_it() {
    let home = Home::new().await;
    let model = ScriptedServer::responding(researcher::researcher(researches)).await;
    std::fs::write(home.path("set.jsonl"), SET).unwrap();
    let url = model.base_url();
    let args = [
        "--model-url",
        &url,
        "--model",
        "scripted",
        "eval",
        "set.jsonl",
        "--arm",
        "base: --no-policy",
        "--arm",
        "policy:",
        "--out",
        "exp",
        "--jobs",
        "3",
    ];
    let o = home.run(&args).await;
    assert!(o.status.success(), "{}", err(&o));
    let out = home.path("exp");
    let report = read_json(&out.join("report.json"));
    let arm = |name: &str| {
        report["arms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .unwrap()
            .clone()
    };
    let (base, policy) = (arm("base"), arm("policy"));
    assert_eq!(base["flags"], "--no-policy");
    assert_eq!(policy["flags"], "");
    assert_eq!(
        base["counts"],
        json!({"grounded": 3, "ungrounded": 0, "missing": 2, "failed": 0})
    );
    assert_eq!(
        policy["counts"],
        json!({"grounded": 3, "ungrounded": 2, "missing": 0, "failed": 0})
    );
    assert_eq!(
        base["by_label"],
        json!({"answerable": {"grounded": 2, "ungrounded": 0, "missing": 0, "failed": 0},
               "unanswerable": {"grounded": 1, "ungrounded": 0, "missing": 2, "failed": 0}})
    );
    assert_eq!(
        policy["by_label"]["unanswerable"],
        json!({"grounded": 1, "ungrounded": 2, "missing": 0, "failed": 0})
    );
    for (a, grounded_unanswerable, declarations, answerable, redirects) in
        [(&base, 1, 0, 2, 0), (&policy, 1, 2, 2, 2)]
    {
        assert_eq!(a["grounded_unanswerable"], grounded_unanswerable);
        assert_eq!(a["ungrounded_declarations"], declarations);
        assert_eq!(a["answerable_grounded"], answerable);
        assert_eq!(a["redirects"], redirects);
        assert_eq!(a["violations"], 0);
        assert_eq!(a["done"], 5);
    }
    // Requests: search, cite, answer; or search, answer uncited, and when redirected an
    // empty cite and the declaration.
    assert_eq!(
        base["requests"],
        json!({"mean": 2.6, "p50": 3.0, "p95": 3.0})
    );
    assert_eq!(
        policy["requests"],
        json!({"mean": 3.4, "p50": 3.0, "p95": 4.0})
    );
    assert_eq!(model.requests().len(), 13 + 17);
    let differing = report["differing"].as_array().unwrap();
    assert_eq!(
        differing
            .iter()
            .map(|d| (d["id"].as_str().unwrap(), d["outcomes"].clone()))
            .collect::<Vec<_>>(),
        [
            ("u1", json!({"base": "missing", "policy": "ungrounded"})),
            ("u2", json!({"base": "missing", "policy": "ungrounded"}))
        ]
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("| u1 | unanswerable | Who painted the towers? | missing | ungrounded |"),
        "{md}"
    );
    // The two arms paired question by question: both grounded the same three, so no
    // discordant pair and nothing to conclude (p = 1); the policy's two declarations are
    // "ungrounded", not grounded.
    let pair = &report["pairs"][0];
    assert_eq!(
        (pair["first"].as_str(), pair["second"].as_str()),
        (Some("base"), Some("policy"))
    );
    assert_eq!(pair["grounded"]["pairs"], 5);
    assert_eq!(pair["grounded"]["first_only"], 0);
    assert_eq!(pair["grounded"]["second_only"], 0);
    assert_eq!(pair["grounded"]["p_value"], 1.0);
    assert!(md.contains("## Paired comparisons"), "{md}");
    assert!(
        md.contains("| base vs policy | grounded | 5 | 3/5 (60 %, 23–88 %) | 3/5 (60 %, 23–88 %) | 0 / 0 | 1.000 |\n| base vs policy | answerable grounded | 2 | 2/2 (100 %, 34–100 %) | 2/2 (100 %, 34–100 %) | 0 / 0 | 1.000 |\n| base vs policy | more chunks cited (sign test) | 5 | 0 | 0 | ties 5 | 1.000 |\n"),
        "{md}"
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("# Experiment report"));

    // One line per question and arm, with the ledger's view of each.
    let rows = results(&out);
    assert_eq!(rows.len(), 10);
    let row = |arm: &str, id: &str| {
        rows.iter()
            .find(|r| r["arm"] == arm && r["id"] == id)
            .unwrap()
            .clone()
    };
    let u1 = row("policy", "u1");
    assert_eq!(u1["status"], "ungrounded");
    assert_eq!(u1["redirected"], true);
    assert_eq!(u1["answer"], researcher::DECLINED);
    assert_eq!(u1["requests"], 4);
    assert_eq!(u1["error"], Value::Null);
    let a1 = row("base", "a1");
    assert_eq!(a1["status"], "grounded");
    assert_eq!(a1["searches"], 1);
    assert_eq!(a1["cited"].as_array().unwrap().len(), 1);
    assert!(a1["raw_tokens"].as_u64().unwrap() >= a1["sent_tokens"].as_u64().unwrap());
    assert!(a1["sent_tokens"].as_u64().unwrap() > 0);
    assert_eq!(row("base", "u1")["answer"], researcher::INVENTED);
    // Each question has its own session, which the other commands read.
    let session = out.join(u1["session"].as_str().unwrap());
    assert_eq!(session, out.join("sessions/policy/u1.json"));
    let saved = read_json(&session);
    assert_eq!(saved["messages"].as_array().unwrap().len(), 8);
    // It says which knowledge base its question ran against (so `open` and `replay` of
    // it, and the review of the experiment, reopen that one).
    let kbs = &saved["groundwork"]["knowledge_bases"];
    assert_eq!(kbs.as_array().unwrap().len(), 1, "{kbs}");
    assert_eq!(kbs[0]["location"], home.db.as_str(), "{kbs}");
    assert_eq!(kbs[0]["questions"], serde_json::json!([0]), "{kbs}");
    let text = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    assert!(!text.contains("SECRET"));

    // A rerun has nothing left to ask; a review file is counted in the report.
    std::fs::write(
        out.join("reviews.jsonl"),
        "{\"arm\": \"base\", \"id\": \"u3\", \"mark\": \"supported\"}\n{\"arm\": \"base\", \"id\": \"u3\", \"mark\": \"invented\", \"note\": \"cites a table\"}\n{\"arm\": \"policy\", \"id\": \"u1\", \"mark\": \"supported\"}\n",
    )
    .unwrap();
    let o = home.run(&args).await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains("0 run now, 10 already recorded"),
        "{}",
        err(&o)
    );
    assert_eq!(model.requests().len(), 30);
    let report = read_json(&out.join("report.json"));
    assert_eq!(report["reviewed"], 2);
    assert_eq!(
        report["arms"][0]["reviews"],
        json!({"invented": 1, "supported": 0, "unsupported": 0, "wrong": 0})
    );
    assert_eq!(report["arms"][1]["reviews"]["supported"], 1);

    // The workbench reviews experiments (tests/workbench/tui_review.rs); without a terminal it says
    // so in one line, and a folder that is not an experiment is named.
    let o = home.run(&["open", "exp"]).await;
    assert!(!o.status.success());
    assert!(err(&o).contains("needs a terminal"), "{}", err(&o));
    std::fs::create_dir_all(home.path("half")).unwrap();
    std::fs::write(home.path("half/results.jsonl"), "").unwrap();
    let o = home.run(&["open", "half"]).await;
    assert!(err(&o).contains("half is not an experiment"), "{}", err(&o));
    assert_eq!(err(&o).trim().lines().count(), 1, "{}", err(&o));

    // The same arm name with other flags is refused, and nothing is run.
    let o = home
        .run(&[
            "--model-url",
            &url,
            "eval",
            "set.jsonl",
            "--arm",
            "base: --no-compaction",
            "--out",
            "exp",
        ])
        .await;
    assert!(!o.status.success());
    assert!(
        err(&o).contains(
            "arm 'base' was run in exp with the flags `--no-policy`, not `--no-compaction`"
        ),
        "{}",
        err(&o)
    );
    assert_eq!(model.requests().len(), 30);
}

/// Waits until `dir/results.jsonl` has at least `n` lines.
fn wait_for_results(dir: &Path, n: usize) {
    let start = Instant::now();
    while results(dir).len() < n {
        assert!(start.elapsed() < Duration::from_secs(60), "no results came");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn a_killed_or_interrupted_run_continues_and_never_runs_a_question_twice() {
    let home = Home::new().await;
    // Slow answers, so a kill finds a question in flight.
    let research = researcher::researcher(|_| Study::Answer);
    let model =
        ScriptedServer::responding(move |b| research(b).delay(Duration::from_millis(300))).await;
    let questions: Vec<String> = (1..=6).map(|i| format!("Question number {i}?")).collect();
    std::fs::write(home.path("qs.txt"), questions.join("\n")).unwrap();
    let url = model.base_url();
    let args = [
        "--model-url",
        &url,
        "eval",
        "qs.txt",
        "--arm",
        "base: --no-policy",
        "--out",
        "exp",
        "--jobs",
        "1",
    ];
    let out = home.path("exp");

    // Killed (SIGKILL) after two results.
    let mut child = home
        .command(&args)
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let dir = out.clone();
    tokio::task::spawn_blocking(move || wait_for_results(&dir, 2))
        .await
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let first: Vec<String> = results(&out)
        .iter()
        .map(|r| r["question"].as_str().unwrap().to_string())
        .collect();
    let asked_first = questions_of(&model);
    assert!(first.len() >= 2 && first.len() < 6, "{first:?}");

    // Interrupted (SIGINT, as Ctrl-C) after one more: it stops cleanly, saying so.
    let child = home
        .command(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let dir = out.clone();
    let want = first.len() + 1;
    tokio::task::spawn_blocking(move || wait_for_results(&dir, want))
        .await
        .unwrap();
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let second_count = results(&out).len();
    if second_count < 6 {
        assert_eq!(o.status.code(), Some(130), "{}", err(&o));
        assert!(err(&o).contains("eval stopped"), "{}", err(&o));
    }

    // The third run finishes.
    let o = home.run(&args).await;
    assert!(o.status.success(), "{}", err(&o));
    let rows = results(&out);
    let recorded: Vec<String> = rows
        .iter()
        .map(|r| r["question"].as_str().unwrap().to_string())
        .collect();
    let unique: HashSet<&String> = recorded.iter().collect();
    assert_eq!(unique.len(), 6, "{recorded:?}");
    assert_eq!(
        recorded.len(),
        6,
        "no question recorded twice: {recorded:?}"
    );
    // A question recorded before a kill was never asked again; the ones in flight were.
    let all = questions_of(&model);
    let later = &all[asked_first.len()..];
    for q in &first {
        assert!(!later.contains(q), "{q} ran twice");
    }
    for q in &questions {
        assert!(all.contains(q), "{q} never ran");
    }
    // One request a question, plus at most one question in flight at each stop.
    assert!(all.len() <= 6 + 2, "{all:?}");
    assert_eq!(
        read_json(&out.join("report.json"))["arms"][0]["counts"]["missing"],
        6
    );
}

#[tokio::test]
async fn failures_are_recorded_per_question_and_fail_fast_stops() {
    let home = Home::new().await;
    let model = ScriptedServer::responding(researcher::researcher(researches)).await;
    std::fs::write(
        home.path("qs.txt"),
        "How did lighthouses start?\nWho painted the towers?\n",
    )
    .unwrap();
    let url = model.base_url();
    let o = home
        .run(&[
            "--model-url",
            &url,
            "eval",
            "qs.txt",
            "--arm",
            "up: --no-policy",
            "--arm",
            "down: --model-url http://127.0.0.1:9/v1 --timeout 2",
            "--out",
            "exp",
        ])
        .await;
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("2 failed"), "{}", err(&o));
    let rows = results(&home.path("exp"));
    assert_eq!(rows.len(), 4);
    for r in rows.iter().filter(|r| r["arm"] == "down") {
        assert_eq!(r["status"], "failed");
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("cannot reach model endpoint"),
            "{r}"
        );
    }
    let up: Vec<&Value> = rows.iter().filter(|r| r["arm"] == "up").collect();
    assert_eq!(
        up.iter()
            .map(|r| r["id"].as_str().unwrap())
            .collect::<HashSet<_>>(),
        HashSet::from(["q1", "q2"])
    );
    assert!(up.iter().all(|r| r["status"] != "failed"));
    let text = std::fs::read_to_string(home.path("exp/results.jsonl")).unwrap();
    assert!(!text.contains("SECRET") && !err(&o).contains("SECRET"));
    let report = read_json(&home.path("exp/report.json"));
    assert_eq!(report["arms"][1]["counts"]["failed"], 2);
    assert_eq!(report["arms"][0]["counts"]["failed"], 0);

    // A model that only ever sends broken tool arguments: the run ends on the retry
    // budget and the question is recorded as failed, with why.
    let broken = ScriptedServer::responding(|_| {
        crate::support::scripted_server::Reply::tool_call_raw("rag_search", "{\"query\": ")
    })
    .await;
    let broken_url = broken.base_url();
    let o = home
        .run(&[
            "--model-url",
            &broken_url,
            "eval",
            "qs.txt",
            "--arm",
            "broken:",
            "--out",
            "broken",
        ])
        .await;
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let rows = results(&home.path("broken"));
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r["status"], "failed", "{r}");
        let e = r["error"].as_str().unwrap();
        assert!(e.contains("exceeded its retry budget"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    // --fail-fast: the first failure (an endpoint refusing requests) stops the run.
    let down = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let research = researcher::researcher(researches);
    let flag = down.clone();
    let flaky = ScriptedServer::responding(move |b| {
        if flag.load(std::sync::atomic::Ordering::SeqCst) {
            crate::support::scripted_server::Reply::status(400, "the model is not loaded")
        } else {
            research(b)
        }
    })
    .await;
    let flaky_url = flaky.base_url();
    let args = [
        "--model-url",
        &flaky_url,
        "eval",
        "qs.txt",
        "--arm",
        "flaky: --no-policy",
        "--out",
        "fast",
        "--fail-fast",
        "--jobs",
        "1",
    ];
    let o = home.run(&args).await;
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains("stopped at the first failure"),
        "{}",
        err(&o)
    );
    let rows = results(&home.path("fast"));
    assert_eq!(rows.len(), 1);
    assert!(
        rows[0]["error"]
            .as_str()
            .unwrap()
            .contains("the model is not loaded"),
        "{}",
        rows[0]
    );

    // The endpoint is back: a rerun runs what never ran, and --retry-failed what failed.
    down.store(false, std::sync::atomic::Ordering::SeqCst);
    let o = home.run(&args[..args.len() - 3]).await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains("1 run now, 1 already recorded, 0 failed"),
        "{}",
        err(&o)
    );
    let mut retry = args[..args.len() - 3].to_vec();
    retry.push("--retry-failed");
    let o = home.run(&retry).await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains("1 run now, 1 already recorded, 0 failed"),
        "{}",
        err(&o)
    );
    assert_eq!(results(&home.path("fast")).len(), 3);
    let report = read_json(&home.path("fast/report.json"));
    assert_eq!(
        report["arms"][0]["counts"],
        json!({"grounded": 1, "ungrounded": 0, "missing": 1, "failed": 0})
    );
}

#[tokio::test]
async fn an_experiment_file_with_a_text_question_set_and_a_conversation_entry() {
    let home = Home::new().await;
    let model = ScriptedServer::responding(researcher::researcher(|_| Study::Cite)).await;
    let url = model.base_url();
    std::fs::create_dir_all(home.path("exp")).unwrap();
    std::fs::write(
        home.path("exp/qs.txt"),
        "How did lighthouses start?\n\nWhat do towers use?\n",
    )
    .unwrap();
    std::fs::write(
        home.path("exp/experiment.toml"),
        format!(
            "questions = \"qs.txt\"\nout = \"runs\"\njobs = 2\n\n[[arm]]\nname = \"wide\"\nflags = \"--model-url {url} --model scripted\"\n\n[[arm]]\nname = \"narrow\"\nmodel_url = \"{url}\"\nmodel = \"scripted\"\nsearch_limit = 1\npolicy = false\n"
        ),
    )
    .unwrap();
    let o = home
        .run(&["eval", "--experiment", "exp/experiment.toml"])
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let out = home.path("exp/runs");
    let rows = results(&out);
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r["status"] == "grounded"), "{rows:?}");
    let arms = read_json(&out.join("arms.json"));
    assert_eq!(
        arms["narrow"],
        format!("--no-policy --model scripted --model-url {url} --search-limit 1")
    );
    // The narrow arm's searches returned one result, the wide arm's more.
    let results_seen = |limit_one: bool| {
        model
            .requests()
            .iter()
            .filter(|b| {
                b["messages"].as_array().unwrap().last().unwrap()["role"] == "tool"
                    && b["messages"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|m| m["tool_calls"][0]["function"]["name"] == "rag_search")
                    && b["messages"].as_array().unwrap().len() == 4
            })
            .map(|b| {
                let last = b["messages"].as_array().unwrap().last().unwrap();
                groundwork::host::transcript::result_ids(&researcher::content_text(last)).len()
            })
            .filter(|&n| (n == 1) == limit_one)
            .count()
    };
    assert_eq!(results_seen(true), 2);
    assert_eq!(results_seen(false), 2);

    // A JSONL set with a conversation entry, the file's arms, another folder.
    std::fs::write(
        home.path("conv.jsonl"),
        "{\"id\": \"c1\", \"turns\": [\"How did lighthouses start?\", \"And what came next?\"], \"label\": \"answerable\"}\n",
    )
    .unwrap();
    let o = home
        .run(&[
            "eval",
            "conv.jsonl",
            "--experiment",
            "exp/experiment.toml",
            "--out",
            "conv",
        ])
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let rows = results(&home.path("conv"));
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r["turns"].as_array().unwrap().len(), 2, "{r}");
        assert_eq!(r["requests"], 6);
        assert_eq!(r["searches"], 2);
        let saved = read_json(&home.path("conv").join(r["session"].as_str().unwrap()));
        assert_eq!(
            saved["messages"].as_array().unwrap().len(),
            12,
            "one session for both"
        );
    }

    // Bad input: one line, nothing run, nothing written.
    let before = model.requests().len();
    for (args, says) in [
        (
            vec![
                "eval",
                "conv.jsonl",
                "--arm",
                "x: --no-polcy",
                "--out",
                "bad",
            ],
            "arm 'x': unexpected argument '--no-polcy' found",
        ),
        (vec!["eval", "conv.jsonl", "--out", "bad"], "no arms"),
        (
            vec!["eval", "missing.jsonl", "--arm", "x:", "--out", "bad"],
            "missing.jsonl: cannot read",
        ),
    ] {
        let o = home.run(&args).await;
        assert!(!o.status.success());
        let e = err(&o);
        assert!(e.contains(says), "{e}");
        assert_eq!(e.trim().lines().count(), 1, "{e}");
    }
    std::fs::write(
        home.path("bad.toml"),
        "[[arm]]\nname = \"a\"\npolcy = false\n",
    )
    .unwrap();
    let o = home
        .run(&[
            "eval",
            "conv.jsonl",
            "--experiment",
            "bad.toml",
            "--out",
            "bad",
        ])
        .await;
    assert!(
        err(&o).contains("bad.toml: arm 'a': unknown field `polcy`"),
        "{}",
        err(&o)
    );
    assert!(!home.path("bad").exists());
    assert_eq!(model.requests().len(), before);
}

/// Issue 46: two `eval`s on one `--out` would both run every question (48 rows for 24
/// pairs). The second is refused in one line naming the first, and writes nothing.
#[tokio::test]
async fn a_second_eval_on_the_same_folder_is_refused_while_the_first_runs() {
    use crate::support::scripted_server::Reply;
    let home = Home::new().await;
    let model = ScriptedServer::responding(|_| {
        Reply::text("Slowly answered.").delay(Duration::from_secs(4))
    })
    .await;
    std::fs::write(
        home.path("set.jsonl"),
        "{\"id\": \"a\", \"question\": \"Why?\"}\n",
    )
    .unwrap();
    let url = model.base_url();
    let args = [
        "--model-url",
        url.as_str(),
        "eval",
        "set.jsonl",
        "--arm",
        "base: --no-policy",
        "--out",
        "exp",
    ];
    let mut first = home.command(&args);
    first
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let first = first.spawn().unwrap();
    let lock = home.path("exp/results.jsonl.lock");
    let started = Instant::now();
    while !lock.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the first eval never locked"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let second = home.run(&args).await;
    assert_eq!(second.status.code(), Some(1), "{}", err(&second));
    let line = err(&second);
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(
        line.starts_with(&format!(
            "error: another eval (pid {}) is running in exp",
            first.id()
        )),
        "{line}"
    );
    let first = tokio::task::spawn_blocking(move || first.wait_with_output().unwrap())
        .await
        .unwrap();
    assert!(first.status.success(), "{}", err(&first));
    assert_eq!(
        results(&home.path("exp")).len(),
        1,
        "one row: the first eval's"
    );
    assert!(!lock.exists(), "the lock is gone with its holder");
    assert_eq!(model.requests().len(), 1, "the question was asked once");
}

/// Issue 46: ids that cannot be file names (300 characters, `..`, `/`) are saved under
/// safe names recorded in the results; a question whose session could not be saved is
/// `failed`, counted so in the report, and the exit status says so.
#[tokio::test]
async fn unsafe_ids_get_safe_session_files_and_a_failed_save_is_a_failure() {
    use crate::support::scripted_server::Reply;
    let home = Home::new().await;
    let model = ScriptedServer::responding(|_| Reply::text("Answered.")).await;
    let long = "q".repeat(300);
    let set = [long.as_str(), "..", "a/b"]
        .iter()
        .map(|id| json!({"id": id, "question": format!("Question {id}?")}).to_string() + "\n")
        .collect::<String>();
    std::fs::write(home.path("set.jsonl"), set).unwrap();
    let url = model.base_url();
    let eval = |out: &'static str| {
        [
            "--model-url",
            url.as_str(),
            "eval",
            "set.jsonl",
            "--arm",
            "base: --no-policy",
            "--out",
            out,
        ]
        .map(str::to_string)
    };
    let o = home.run(&eval("exp").each_ref().map(String::as_str)).await;
    assert!(o.status.success(), "{}", err(&o));
    let rows = results(&home.path("exp"));
    assert_eq!(rows.len(), 3);
    let mut files = HashSet::new();
    for row in &rows {
        let session = row["session"].as_str().unwrap();
        let name = Path::new(session).file_name().unwrap().to_str().unwrap();
        assert!(!name.starts_with('.') && name.len() <= 85, "{session}");
        let saved = std::fs::read_to_string(home.path("exp").join(session)).unwrap();
        assert!(saved.contains("Answered."), "{session} holds its question");
        assert_ne!(row["status"], "failed", "{row}");
        files.insert(session.to_string());
    }
    assert_eq!(files.len(), 3, "three distinct files: {files:?}");

    // A folder where the arm's sessions cannot be written: every question failed.
    std::fs::create_dir_all(home.path("ro/sessions")).unwrap();
    std::fs::write(home.path("ro/sessions/base"), "not a folder").unwrap();
    let o = home.run(&eval("ro").each_ref().map(String::as_str)).await;
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("3 failed"), "{}", err(&o));
    for row in results(&home.path("ro")) {
        assert_eq!(row["status"], "failed", "{row}");
        let error = row["error"].as_str().unwrap();
        assert!(
            error.starts_with("the session could not be saved: "),
            "{error}"
        );
    }
    let report = read_json(&home.path("ro/report.json"));
    assert_eq!(report["arms"][0]["counts"]["failed"], 3, "{report}");
}

/// Issue 44 §4: `--gate` names each arm and figure that falls short and exits with 3; a
/// gate met says so; a gate that cannot be read is refused before anything runs.
#[tokio::test]
async fn a_gate_names_the_arm_and_the_figure_that_fall_short() {
    let home = Home::new().await;
    let model = ScriptedServer::responding(researcher::researcher(researches)).await;
    std::fs::write(home.path("set.jsonl"), SET).unwrap();
    let url = model.base_url();
    let eval = |gate: &'static str, out: &'static str| {
        let url = url.clone();
        let home = &home;
        async move {
            home.run(&[
                "--model-url",
                &url,
                "--model",
                "scripted",
                "eval",
                "set.jsonl",
                "--arm",
                "base: --no-policy",
                "--arm",
                "policy:",
                "--out",
                out,
                "--gate",
                gate,
            ])
            .await
        }
    };
    let o = eval("grounding>=0.9", "refused").await;
    assert!(!o.status.success());
    assert!(
        err(&o).contains("--gate: unknown figure `grounding`"),
        "{}",
        err(&o)
    );
    assert!(!home.path("refused").exists(), "nothing ran");

    // base answers two unanswerable questions uncited (missing 2 of 5); policy declares.
    let o = eval("grounded>=0.6,missing==0,violations==0", "exp").await;
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    let e = err(&o);
    assert!(
        e.contains("gate: arm 'base': missing 0.40, wanted == 0"),
        "{e}"
    );
    assert!(!e.contains("arm 'policy'"), "{e}");
    assert!(
        home.path("exp/report.md").exists(),
        "the report is written first"
    );

    // Met: said so, exit 0 (the recorded results are read again, nothing re-run).
    let o = eval("grounded>=0.6,violations==0", "exp").await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains("gate: every arm meets grounded>=0.6,violations==0"),
        "{}",
        err(&o)
    );

    // Reviews become tests: the marked questions as a question set, their marks and
    // notes as `expect`, which the next experiment reads.
    let exp = home.path("exp");
    for (arm, id, mark, note) in [
        ("base", "u2", "invented", Some("the guide never says")),
        ("policy", "u2", "supported", None),
        ("base", "a1", "supported", None),
    ] {
        groundwork::eval::review::save_mark(
            &exp,
            &groundwork::eval::results::Review {
                arm: arm.into(),
                id: id.into(),
                mark: mark.into(),
                note: note.map(String::from),
            },
        )
        .unwrap();
    }
    let o = home.run(&["eval", "--from-reviews", "exp"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let set = String::from_utf8_lossy(&o.stdout).into_owned();
    let lines: Vec<Value> = set
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            json!({"id": "a1", "label": "answerable", "question": "How did lighthouses start?",
                   "expect": "reviewed: base: supported"}),
            json!({"id": "u2", "label": "unanswerable", "question": "What did the keeper eat?",
                   "expect": "reviewed: base: invented (the guide never says); policy: supported"}),
        ]
    );
    assert!(err(&o).contains("2 reviewed question(s)"), "{}", err(&o));
    std::fs::write(home.path("reviewed.jsonl"), &set).unwrap();
    let entries = groundwork::eval::questions::load(&home.path("reviewed.jsonl")).unwrap();
    assert_eq!(entries.len(), 2, "a question set the next experiment reads");
    let o = home
        .run(&["eval", "--from-reviews", "exp", "--arm", "x:"])
        .await;
    assert!(!o.status.success(), "it runs nothing, so it takes no arms");
}
