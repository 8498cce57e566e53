//! The worked example of docs/guide/experiments.md (issue 44 §3), made here: the seeds'
//! measurement layout — two arms (no policy, policy), answerable and unanswerable
//! questions, explicit ungrounded declarations, a grounded answer to an unanswerable
//! question, redirects fired — run by the real `groundwork eval --verify` over the demo
//! corpus (as the first run ingests it) with the scripted researcher and a scripted judge.
//! The report in the guide is this run's `report.md`, line for line but the latency row
//! (wall-clock time); `GROUNDWORK_UPDATE_DOCS=1 cargo test --test commands worked_example`
//! writes it into the guide.

use std::path::Path;

use crate::support::home::{err, hermetic};
use crate::support::researcher::{self, Study};
use crate::support::scripted_server::{Reply, ScriptedServer, system_text, wire_messages};
use serde_json::Value;

/// The question set: three answerable from the demo corpus, three it does not answer.
pub const SET: &str = r#"{"id": "a1", "question": "How much did the solar array produce in July?", "label": "answerable"}
{"id": "a2", "question": "What state of charge does the battery keep overnight?", "label": "answerable"}
{"id": "a3", "question": "When does the operator island the microgrid?", "label": "answerable"}
{"id": "u1", "question": "Who founded the Harbor Point microgrid company?", "label": "unanswerable"}
{"id": "u2", "question": "What did the maintenance crew eat for lunch?", "label": "unanswerable"}
{"id": "u3", "question": "How tall is the harbor lighthouse?", "label": "unanswerable"}
"#;

const BEGIN: &str =
    "<!-- worked-example:begin (tests/commands/worked_example.rs writes and checks it) -->";
const END: &str = "<!-- worked-example:end -->";

/// The researcher: it searches every question; it cites the first result for the
/// answerable ones and for `u1` (so one unanswerable question gets a grounded answer) and
/// answers the others without a citation (which the policy redirects into declarations).
/// A cited answer names its question, so the judge can tell them apart. The judge finds
/// the founder's answer not supported and every other supported.
fn model(body: &Value) -> Reply {
    let messages = wire_messages(body);
    if system_text(body).starts_with("You check one claim") {
        let prompt = messages[1]["content"].as_str().unwrap_or_default();
        let claim = prompt.lines().nth(1).unwrap_or_default();
        return Reply::text(if claim.contains("founded") {
            r#"{"verdict": "not_supported", "reason": "The passage names no founder."}"#
        } else {
            r#"{"verdict": "supported", "reason": "The passage says so."}"#
        });
    }
    let question = researcher::asked(body).last().cloned().unwrap_or_default();
    let cited = messages.iter().any(|m| {
        m["tool_calls"].as_array().is_some_and(|c| {
            c.iter().any(|c| {
                c["function"]["name"] == "rag_cite"
                    && !c["function"]["arguments"]
                        .as_str()
                        .unwrap_or("")
                        .contains("[]")
            })
        })
    });
    if cited && messages.last().is_some_and(|m| m["role"] == "tool") {
        return Reply::text(format!("The knowledge base answers \"{question}\" [1]."));
    }
    researcher::researcher(|q| {
        if q.contains("founded") || !(q.contains("lunch") || q.contains("lighthouse")) {
            Study::Cite
        } else {
            Study::Uncited
        }
    })(body)
}

#[tokio::test]
async fn the_worked_example_in_the_guide_is_what_eval_writes() {
    let kb = crate::support::workbench::demo_kb().await;
    let server = ScriptedServer::responding(model).await;
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("set.jsonl"), SET).unwrap();
    let url = server.base_url();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_groundwork"));
    cmd.args(["--db", &kb.db, "--model-url", &url, "--model", "scripted"])
        .args([
            "eval",
            "set.jsonl",
            "--arm",
            "base: --no-policy",
            "--arm",
            "policy:",
        ])
        .args(["--out", "exp", "--verify", "--jobs", "1"])
        .current_dir(home.path());
    hermetic(&mut cmd, home.path());
    let o = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    let report = std::fs::read_to_string(home.path().join("exp/report.md")).unwrap();

    // The seeds' figures, exactly.
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("exp/report.json")).unwrap(),
    )
    .unwrap();
    let (base, policy) = (&json["arms"][0], &json["arms"][1]);
    let figures = |a: &Value| {
        [
            "grounded_unanswerable",
            "ungrounded_declarations",
            "answerable_grounded",
            "redirects",
            "violations",
        ]
        .map(|k| a[k].as_u64().unwrap())
    };
    assert_eq!(figures(base), [1, 0, 3, 0, 0], "{base}");
    assert_eq!(figures(policy), [1, 2, 3, 2, 0], "{policy}");
    assert_eq!(base["counts"]["missing"], 2);
    assert_eq!(policy["claims"]["not_supported"], 1);
    assert_eq!(json["pairs"][0]["grounded"]["p_value"], 1.0);

    // The guide shows this report, line for line but the latency row.
    let guide = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/guide/experiments.md");
    let page = std::fs::read_to_string(&guide).unwrap();
    let (Some(b), Some(e)) = (page.find(BEGIN), page.find(END)) else {
        panic!("{} lacks the lines {BEGIN} and {END}", guide.display());
    };
    let wanted = format!("\n```\n{report}```\n");
    let steady = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with("| latency ms |"))
            .map(str::to_string)
            .collect()
    };
    let written = &page[b + BEGIN.len()..e];
    if steady(written) != steady(&wanted) {
        if std::env::var_os("GROUNDWORK_UPDATE_DOCS").is_some() {
            let page = format!("{}{BEGIN}{wanted}{}", &page[..b], &page[e..]);
            std::fs::write(&guide, page).unwrap();
            return;
        }
        panic!(
            "docs/guide/experiments.md does not show the worked example's report: run \
             GROUNDWORK_UPDATE_DOCS=1 cargo test --test commands worked_example\n{report}"
        );
    }
}
