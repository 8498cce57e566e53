//! Claims checked against what they cite, end to end: a session asked by the real binary
//! over the scripted researcher and a real LanceDB store, then `groundwork verify` with a
//! scripted judge (its verdicts asserted exactly, the requests it was sent, what the
//! session keeps, the Markdown export), a judge at another endpoint (never sent the
//! answering model's key), a judge that is down, and a question that is not there.

use crate::support::home::{Home, err};
use crate::support::researcher::{self, Study};
use crate::support::scripted_server::{Reply, ScriptedServer, system_text, wire_messages};
use serde_json::{Value, json};

/// The answer after the researcher's citation: three cited sentences (the third naming a
/// source the answer does not have) and one without a marker.
const ANSWER: &str = "Lighthouses guide ships at night [1]. They were painted by Monet [1]. \
                      Keepers lived in them [2]. Nothing else is known.";

/// The judge's instructions start so (`assets/prompts/verify/judge.md`).
const JUDGE: &str = "You check one claim";

/// The scripted judge: supported for the ships, not supported for Monet (as JSON in a
/// fence, as weak models answer), anything else a reply that names no verdict.
fn judge_reply(body: &Value) -> Reply {
    let prompt = wire_messages(body)
        .last()
        .and_then(|m| m["content"].as_str().map(str::to_string))
        .unwrap_or_default();
    // The claim is the line after `Claim:`.
    let claim = prompt.lines().nth(1).unwrap_or_default();
    if claim.contains("guide ships") {
        Reply::text(
            r#"{"verdict": "supported", "reason": "The passage says lighthouses guide ships at night."}"#,
        )
    } else if claim.contains("Monet") {
        Reply::text(
            "```json\n{\"verdict\": \"not_supported\", \"reason\": \"The passage names no painter.\"}\n```",
        )
    } else {
        Reply::text("Hard to say.")
    }
}

/// The researcher (search, cite the first result) answering [`ANSWER`], and the judge.
fn model(body: &Value) -> Reply {
    if system_text(body).starts_with(JUDGE) {
        return judge_reply(body);
    }
    let messages = wire_messages(body);
    let cited = messages.iter().any(|m| {
        m["tool_calls"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["function"]["name"] == "rag_cite"))
    });
    if cited && messages.last().is_some_and(|m| m["role"] == "tool") {
        return Reply::text(ANSWER);
    }
    researcher::researcher(|_| Study::Cite)(body)
}

fn out(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A home whose session `s.sqlite` holds one question, asked with the flags `base`.
async fn asked_home(base: &[&str]) -> Home {
    let home = Home::new().await;
    let ask = [
        "--session",
        "s.sqlite",
        "ask",
        "Which lighthouse towers guide ships?",
    ];
    let o = home.run(&[base, &ask[..]].concat()).await;
    assert!(o.status.success(), "{}", err(&o));
    home
}

#[tokio::test]
async fn each_cited_sentence_is_judged_against_its_passage_and_the_verdicts_are_kept() {
    let server = ScriptedServer::responding(model).await;
    let url = server.base_url();
    let base = ["--model-url", url.as_str(), "--model", "scripted"];
    let home = asked_home(&base).await;
    let asked = server.recorded().len();

    let o = home
        .run(&[&base[..], &["verify", "s.sqlite"]].concat())
        .await;
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(
        out(&o),
        "question 1: Which lighthouse towers guide ships?\n\
         \x20 ✓ supported        Lighthouses guide ships at night [1].\n\
         \x20   The passage says lighthouses guide ships at night.\n\
         \x20 ✗ not supported    They were painted by Monet [1].\n\
         \x20   The passage names no painter.\n\
         \x20 ✗ not supported    Keepers lived in them [2].\n\
         \x20   [2] names no source of this answer\n\
         \x20 3 claims: 1 supported · 2 not supported (judge scripted)\n"
    );
    assert!(
        err(&o).contains("question 1: checking claim 1 of 3…"),
        "{}",
        err(&o)
    );

    // Two requests: the claim whose marker names no source was not put to the judge.
    let sent = server.recorded().split_off(asked);
    assert_eq!(sent.len(), 2, "{sent:?}");
    let first = &sent[0].body;
    assert!(system_text(first).starts_with(JUDGE));
    assert!(
        first.get("tools").is_none(),
        "the judge is offered no tools: {first}"
    );
    let user = wire_messages(first)[1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        user.starts_with(
            "Claim:\nLighthouses guide ships at night [1].\n\nCited passages:\n\n[1] "
        ),
        "{user}"
    );
    // The cited chunk itself, read from the knowledge base, with its reference.
    assert!(user.contains("Lighthouse Guide"), "{user}");
    assert!(
        !user.contains("the context around"),
        "the chunk was read: {user}"
    );

    let session = crate::support::session_json(&home.path("s.sqlite"));
    let v = &session["groundwork"]["verifications"][0];
    assert_eq!(v["question"], 0);
    assert_eq!(v["judge"], "scripted");
    let verdicts: Vec<(&str, Option<u64>)> = v["claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["verdict"].as_str().unwrap(), c["request"].as_u64()))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("supported", Some(0)),
            ("not_supported", Some(1)),
            ("not_supported", None)
        ]
    );
    assert_eq!(v["requests"][0]["prompt"], json!(user));
    assert_eq!(
        v["requests"][1]["reply"],
        "```json\n{\"verdict\": \"not_supported\", \"reason\": \"The passage names no painter.\"}\n```"
    );
    assert!(
        session
            .get("state")
            .is_some_and(|s| !s.to_string().contains("verdict")),
        "never in haiku.rag's state"
    );

    // `inspect` lists the judge's requests after the model's, each whole on request.
    let o = home.run(&["inspect", "s.sqlite"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let overview = out(&o);
    assert!(
        overview.contains("2 judge request(s) of claim checks (groundwork verify):")
            && overview.contains(
                "     5  judge scripted, question 1: ✗ not supported — They were painted by Monet [1]."
            ),
        "{overview}"
    );
    let o = home.run(&["inspect", "s.sqlite", "--request", "5"]).await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        out(&o).contains("They were painted by Monet [1].") && out(&o).contains("verify:0"),
        "{}",
        out(&o)
    );
    let o = home.run(&["inspect", "s.sqlite", "--request", "6"]).await;
    assert!(
        err(&o).contains("has 5 request(s); there is no request 6"),
        "{}",
        err(&o)
    );

    // The export counts them and shows each claim's verdict.
    let o = home.run(&["export", "s.sqlite", "--format", "md"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let md = out(&o);
    assert!(
        md.contains("Claims checked (judge scripted): 3 claims: 1 supported · 2 not supported"),
        "{md}"
    );
    assert!(
        md.contains(
            "- ✗ not supported: They were painted by Monet [1]. — The passage names no painter."
        ),
        "{md}"
    );

    // Checked again (the one question, as JSON): the check is replaced, not added.
    let o = home
        .run(
            &[
                &base[..],
                &["verify", "s.sqlite", "--question", "1", "--json"],
            ]
            .concat(),
        )
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let printed: Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(
        printed[0]["claims"][1]["reason"],
        "The passage names no painter."
    );
    let session = crate::support::session_json(&home.path("s.sqlite"));
    assert_eq!(
        session["groundwork"]["verifications"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // A JSON session (haiku.rag's, or an export) is read, never written: its checks go to
    // the SQLite file beside it, and stderr says so.
    let o = home.run(&["export", "s.sqlite", "--out", "h.json"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let exported = std::fs::read(home.path("h.json")).unwrap();
    let o = home.run(&[&base[..], &["verify", "h.json"]].concat()).await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        err(&o).contains("h.json is kept as it was; the session continues in h.sqlite"),
        "{}",
        err(&o)
    );
    assert_eq!(std::fs::read(home.path("h.json")).unwrap(), exported);
    let beside = crate::support::session_json(&home.path("h.sqlite"));
    assert_eq!(
        beside["groundwork"]["verifications"][0]["claims"][0]["verdict"],
        "supported"
    );
}

#[tokio::test]
async fn a_judge_elsewhere_gets_no_key_a_judge_that_is_down_stores_nothing_and_a_missing_question_is_named()
 {
    let server = ScriptedServer::responding(model).await;
    let url = server.base_url();
    let base = ["--model-url", url.as_str(), "--model", "scripted"];
    let home = asked_home(&base).await;
    let before = crate::support::session_json(&home.path("s.sqlite"));

    let o = home
        .run(&[&base[..], &["verify", "s.sqlite", "--question", "2"]].concat())
        .await;
    assert!(!o.status.success());
    assert_eq!(
        err(&o).trim(),
        "error: s.sqlite has 1 question(s); there is no question 2"
    );

    let o = home
        .run(
            &[
                &base[..],
                &["verify", "s.sqlite", "--judge-url", "http://127.0.0.1:9/v1"],
            ]
            .concat(),
        )
        .await;
    assert!(!o.status.success());
    let e = err(&o);
    let last = e.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: question 1: the judge failed: cannot reach model endpoint at http://127.0.0.1:9/v1")
            && last.ends_with("nothing was stored for this question"),
        "{e}"
    );
    assert!(
        crate::support::session_json(&home.path("s.sqlite")) == before,
        "nothing stored"
    );

    // A judge at another endpoint, with a model of its own: never sent the answering
    // model's key.
    let judge = ScriptedServer::responding(judge_reply).await;
    let o = home
        .run(
            &[
                &base[..],
                &[
                    "verify",
                    "s.sqlite",
                    "--judge-url",
                    &judge.base_url(),
                    "--judge-model",
                    "big-judge",
                ],
            ]
            .concat(),
        )
        .await;
    assert!(o.status.success(), "{}", err(&o));
    let sent = judge.recorded();
    assert_eq!(sent.len(), 2);
    assert!(
        sent.iter().all(|r| r
            .authorization
            .as_deref()
            .is_none_or(|a| a.trim() == "Bearer")),
        "{:?}",
        sent[0].authorization
    );
    assert!(sent.iter().all(|r| r.body["model"] == "big-judge"));
    assert!(out(&o).contains("(judge big-judge)"), "{}", out(&o));
}

/// `eval --verify`: one judge for every arm; each result records the verdicts on its
/// cited sentences, each session keeps the checks, the report counts "citations not
/// supported" per arm and compares the arms on it; `--gate claims_not_supported==0`
/// fails on it; a judge that is down leaves the answers' results as they are and says
/// which questions were not checked.
#[tokio::test]
async fn eval_verify_counts_citations_not_supported_per_arm() {
    const SET: &str = r#"{"id": "a1", "question": "How did lighthouses start?", "label": "answerable"}
{"id": "a2", "question": "Which lenses do lighthouse towers use?", "label": "answerable"}
{"id": "u1", "question": "Who painted the towers?", "label": "unanswerable"}
"#;
    let home = Home::new().await;
    // The researcher cites for lighthouse questions and answers the rest uncited; the
    // judge finds every cited sentence not supported.
    let server = ScriptedServer::responding(|body: &Value| {
        if system_text(body).starts_with(JUDGE) {
            return Reply::text(r#"{"verdict": "not_supported", "reason": "Not in the passage."}"#);
        }
        researcher::researcher(|q| {
            if q.contains("lighthouse") {
                Study::Cite
            } else {
                Study::Uncited
            }
        })(body)
    })
    .await;
    std::fs::write(home.path("set.jsonl"), SET).unwrap();
    let url = server.base_url();
    let eval = |out: &'static str, extra: &'static [&'static str]| {
        let url = url.clone();
        let home = &home;
        async move {
            let mut args = vec![
                "--model-url",
                url.as_str(),
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
                "--verify",
            ];
            args.extend_from_slice(extra);
            home.run(&args).await
        }
    };
    let o = eval("exp", &["--gate", "claims_not_supported==0"]).await;
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    assert!(
        err(&o).contains("gate: arm 'base': claims_not_supported 2, wanted == 0"),
        "{}",
        err(&o)
    );
    let exp = home.path("exp");
    let results: Vec<Value> = std::fs::read_to_string(exp.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let a1 = results
        .iter()
        .find(|r| r["arm"] == "policy" && r["id"] == "a1")
        .unwrap();
    assert_eq!(
        a1["claims"],
        json!({"supported": 0, "partly_supported": 0, "not_supported": 1, "unclear": 0})
    );
    let u1 = results
        .iter()
        .find(|r| r["arm"] == "base" && r["id"] == "u1")
        .unwrap();
    assert_eq!(
        u1["claims"]["not_supported"], 0,
        "nothing cited, nothing to check"
    );
    let session = crate::support::session_json(&exp.join(a1["session"].as_str().unwrap()));
    assert_eq!(
        session["groundwork"]["verifications"][0]["claims"][0]["reason"],
        "Not in the passage."
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(exp.join("report.json")).unwrap()).unwrap();
    for arm in report["arms"].as_array().unwrap() {
        assert_eq!(arm["claims_checked"], 3, "{arm}");
        assert_eq!(arm["claims"]["not_supported"], 2, "{arm}");
        assert_eq!(arm["questions_not_supported"], 2, "{arm}");
    }
    assert_eq!(report["pairs"][0]["claims_supported"]["pairs"], 3);
    let md = std::fs::read_to_string(exp.join("report.md")).unwrap();
    assert!(
        md.contains("| citations not supported | 2 of 2 claims, in 2 questions | 2 of 2 claims, in 2 questions |"),
        "{md}"
    );
    assert!(
        md.contains("| base vs policy | no claim not supported (judge) | 3 |"),
        "{md}"
    );

    // A judge that is down: the answers' results stand; the cited ones were not checked.
    let o = eval("down", &["--judge-url", "http://127.0.0.1:9/v1"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(home.path("down/report.json")).unwrap())
            .unwrap();
    let base = &report["arms"][0];
    assert_eq!(base["counts"]["grounded"], 2, "{base}");
    assert_eq!(base["claims_unchecked"], 2, "{base}");
    let md = std::fs::read_to_string(home.path("down/report.md")).unwrap();
    assert!(
        md.contains("| not checked (the judge failed) | 2 | 2 |"),
        "{md}"
    );
}
