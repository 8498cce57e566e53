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

#[tokio::test]
async fn each_cited_sentence_is_judged_against_its_passage_and_the_verdicts_are_kept() {
    let home = Home::new().await;
    let server = ScriptedServer::responding(model).await;
    let url = server.base_url();
    let base = ["--model-url", url.as_str(), "--model", "scripted"];
    let o = home
        .run(
            &[
                &base[..],
                &[
                    "--session",
                    "s.sqlite",
                    "ask",
                    "Which lighthouse towers guide ships?",
                ],
            ]
            .concat(),
        )
        .await;
    assert!(o.status.success(), "{}", err(&o));
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
}

#[tokio::test]
async fn a_judge_elsewhere_gets_no_key_a_judge_that_is_down_stores_nothing_and_a_missing_question_is_named()
 {
    let home = Home::new().await;
    let server = ScriptedServer::responding(model).await;
    let url = server.base_url();
    let base = ["--model-url", url.as_str(), "--model", "scripted"];
    let o = home
        .run(
            &[
                &base[..],
                &[
                    "--session",
                    "s.sqlite",
                    "ask",
                    "Which lighthouse towers guide ships?",
                ],
            ]
            .concat(),
        )
        .await;
    assert!(o.status.success(), "{}", err(&o));
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
