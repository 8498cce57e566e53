//! Counterfactual replay end to end: sessions asked by the real binary (`ask`) over the
//! scripted server's researcher and a real LanceDB store, one question run again with
//! other flags (`groundwork replay`), and the workbench's replay popup and side-by-side
//! screen on TestBackend.

use crate::support::home::{Home, err};
use crate::support::researcher::{self, DECLINED, INVENTED, Study, asked};
use crate::support::scripted_server::ScriptedServer;
use serde_json::Value;

/// Cites for questions about lighthouses; searches the rest and answers them uncited.
fn researches(q: &str) -> Study {
    if q.to_lowercase().contains("lighthouse") {
        Study::Cite
    } else {
        Study::Uncited
    }
}

fn out(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Asks `questions` in turn into the session `s.sqlite` of `home`.
async fn asked_session(home: &Home, url: &str, questions: &[&str]) {
    for q in questions {
        let o = home
            .run(&[
                "--model-url",
                url,
                "--model",
                "scripted",
                "--session",
                "s.sqlite",
                "ask",
                q,
            ])
            .await;
        assert!(o.status.success(), "{}", err(&o));
    }
}

use crate::support::file_names as listing;

async fn replay(home: &Home, url: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "--model-url",
        url,
        "--model",
        "scripted",
        "replay",
        "s.sqlite",
    ];
    all.extend_from_slice(args);
    home.run(&all).await
}

#[tokio::test]
async fn replaying_a_redirected_question_without_the_policy_changes_its_outcome_and_not_the_session()
 {
    let home = Home::new().await;
    let model = ScriptedServer::responding(researcher::researcher(researches)).await;
    let url = model.base_url();
    asked_session(&home, &url, &["What did the keeper eat?"]).await;
    let session = home.path("s.sqlite");
    let before = std::fs::read(&session).unwrap();
    let files = listing(home.dir.path());

    // Discarded: the comparison is printed, nothing is written.
    let o = replay(
        &home,
        &url,
        &["--question", "1", "--arm=--no-policy", "--json"],
    )
    .await;
    assert!(o.status.success(), "{}", err(&o));
    let c: Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(c["question"], 1);
    assert_eq!(c["prompt"], "What did the keeper eat?");
    assert_eq!(c["changes"], "--no-policy");
    // The policy redirected the uncited answer into a declaration: search, answer,
    // empty cite, declaration. Without it: search, answer.
    let o1 = &c["original"];
    assert_eq!(
        (
            o1["outcome"].as_str(),
            o1["redirected"].as_bool(),
            o1["requests"].as_u64()
        ),
        (Some("ungrounded"), Some(true), Some(4))
    );
    assert_eq!(o1["answer"], DECLINED);
    let r = &c["replay"];
    assert_eq!(
        (
            r["outcome"].as_str(),
            r["redirected"].as_bool(),
            r["requests"].as_u64()
        ),
        (Some("missing"), Some(false), Some(2))
    );
    assert_eq!(r["answer"], INVENTED);
    assert!(r["sent_tokens"].as_u64().unwrap() < o1["sent_tokens"].as_u64().unwrap());
    assert!(c["saved"].is_null());
    let diff = c["diff"].as_str().unwrap();
    let removed: Vec<&str> = diff.lines().filter(|l| l.starts_with('-')).collect();
    // The redirect and the later requests are gone, so are the policy's instructions.
    assert!(
        removed
            .iter()
            .any(|l| l.contains(groundwork::capabilities::policy::REDIRECT_TAG)),
        "{diff}"
    );
    assert!(
        removed.iter().any(|l| l.starts_with("-request 3")),
        "{diff}"
    );
    assert!(
        removed.iter().any(|l| l.starts_with("-request 4")),
        "{diff}"
    );
    assert!(
        !diff
            .lines()
            .any(|l| l.starts_with('+') && !l.starts_with("+++")),
        "the replay sent nothing the original did not: {diff}"
    );
    assert_eq!(std::fs::read(&session).unwrap(), before);
    assert_eq!(
        listing(home.dir.path()),
        files,
        "a discarded replay writes nothing"
    );

    // The text form shows both runs side by side and the diff.
    let o = replay(&home, &url, &["--question", "1", "--arm=--no-policy"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let text = out(&o);
    // Shown with --nocapture (the README's captured comparison).
    println!("{text}");
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["outcome", "ungrounded,", "redirected", "missing"]),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["requests", "4", "2"]),
        "{text}"
    );
    assert!(
        text.contains("what was sent (original → replay):"),
        "{text}"
    );

    // Saved beside: a new session that `inspect` opens, holding the replayed question.
    let o = replay(
        &home,
        &url,
        &["--question", "1", "--arm=--no-policy", "--save"],
    )
    .await;
    assert!(o.status.success(), "{}", err(&o));
    let beside = home.path("s.replay-1-no-policy.json");
    assert!(err(&o).contains("replay saved to"), "{}", err(&o));
    let o = home.run(&["inspect", beside.to_str().unwrap()]).await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(out(&o).contains("2 request(s)"), "{}", out(&o));
    let saved: Value = serde_json::from_slice(&std::fs::read(&beside).unwrap()).unwrap();
    let text = saved["messages"].to_string();
    assert!(text.contains("What did the keeper eat?"));
    assert!(
        text.contains(INVENTED) && !text.contains(DECLINED),
        "{text}"
    );
    assert_eq!(std::fs::read(&session).unwrap(), before);
    // A second save does not overwrite the first.
    let o = replay(
        &home,
        &url,
        &["--question", "1", "--arm=--no-policy", "--save"],
    )
    .await;
    assert!(o.status.success(), "{}", err(&o));
    assert!(home.path("s.replay-1-no-policy-2.json").exists());
    assert_eq!(std::fs::read(&session).unwrap(), before);
}

/// Issue 44 §1: a replay searches the knowledge base as the question read it (the
/// versions of its tables the session recorded), unless `--kb now`; the comparison says
/// which.
#[tokio::test]
async fn a_replay_searches_the_knowledge_base_as_the_question_read_it() {
    let home = Home::new().await;
    let model = ScriptedServer::responding(researcher::researcher(researches)).await;
    let url = model.base_url();
    asked_session(&home, &url, &["Which lighthouse towers guide ships?"]).await;
    let recorded = crate::support::session_json(&home.path("s.sqlite"));
    let versions = &recorded["groundwork"]["knowledge_bases"][0]["versions"]["0"];
    assert!(versions["chunks"].as_u64().is_some(), "{recorded}");
    // A document added since, which the question's search now finds.
    std::fs::write(
        home.path("keepers.md"),
        "# Lighthouse keepers\n\nLighthouse keepers tend the lighthouse towers that guide \
         ships: which lighthouse towers guide ships is their whole trade.\n",
    )
    .unwrap();
    let o = home.run(&["ingest", "keepers.md"]).await;
    assert!(o.status.success(), "{}", err(&o));

    let o = replay(&home, &url, &["--question", "1", "--json"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let pinned: Value = serde_json::from_str(&out(&o)).unwrap();
    let kb = pinned["knowledge_base"].as_str().unwrap();
    assert!(kb.starts_with("as question 1 read it (chunks "), "{kb}");
    assert_eq!(
        pinned["diff"], "",
        "the same knowledge base: the same requests"
    );
    let o = replay(&home, &url, &["--question", "1", "--kb", "now", "--json"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let now: Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(now["knowledge_base"], "as it is now (--kb now)");
    assert!(
        now["diff"].as_str().unwrap().contains("Lighthouse keepers"),
        "{}",
        now["diff"]
    );
    // The text output says it too.
    let o = replay(&home, &url, &["--question", "1"]).await;
    assert!(
        out(&o).contains("knowledge base: as question 1 read it"),
        "{}",
        out(&o)
    );

    // Once the cited documents are deleted, the export still quotes the cited chunk, as
    // the question read it, and says its source changed since.
    let o = home.run(&["list", "--json"]).await;
    let docs: Value = serde_json::from_str(&out(&o)).unwrap();
    for d in docs.as_array().unwrap() {
        if d["title"] != "Lighthouse keepers" {
            let o = home.run(&["delete", d["id"].as_str().unwrap()]).await;
            assert!(o.status.success(), "{}", err(&o));
        }
    }
    let o = home.run(&["export", "s.sqlite", "--format", "md"]).await;
    assert!(o.status.success(), "{}", err(&o));
    let md = out(&o);
    assert!(md.contains("source changed since cited"), "{md}");
    assert!(!md.contains("the cited chunk was not read"), "{md}");
}

#[tokio::test]
async fn replaying_the_second_of_three_questions_starts_from_what_the_first_committed() {
    let home = Home::new().await;
    let model = ScriptedServer::responding(researcher::researcher(researches)).await;
    let url = model.base_url();
    let questions = [
        "How did lighthouses start?",
        "Who painted the towers?",
        "Which lenses do lighthouse towers use?",
    ];
    asked_session(&home, &url, &questions).await;
    let before = std::fs::read(home.path("s.sqlite")).unwrap();
    // What the starts cost the file: the changes to the lasting record, not the earlier
    // questions' search results again.
    let file =
        serde_json::to_value(groundwork::session::Session::load(&home.path("s.sqlite")).unwrap())
            .unwrap();
    let starts: usize = file["groundwork"]["timings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["start"].to_string().len())
        .sum();
    let state = file["state"].to_string().len();
    eprintln!(
        "starts {starts} bytes, state {state} bytes, file {} bytes",
        before.len()
    );
    assert!(starts < state, "starts {starts} bytes, state {state} bytes");
    let seen = model.requests().len();
    let o = replay(
        &home,
        &url,
        &["--question", "2", "--arm=--no-policy", "--json"],
    )
    .await;
    assert!(o.status.success(), "{}", err(&o));
    let replayed = &model.requests()[seen..];
    assert_eq!(replayed.len(), 2, "search and the uncited answer");
    let tag = groundwork::host::transcript::RETRIEVED_IMAGE_TAG;
    for body in replayed {
        let questions_sent: Vec<String> = asked(body)
            .into_iter()
            .filter(|q| !q.contains(tag))
            .collect();
        assert_eq!(
            questions_sent,
            questions[..2].to_vec(),
            "question 1's history, not 3"
        );
    }
    // What the original question 2 was first sent (after question 1's three requests),
    // the replay was first sent too: the same history and evidence state.
    let original = &model.requests()[3];
    assert_eq!(
        asked(original).last().map(String::as_str),
        Some(questions[1])
    );
    assert_eq!(replayed[0]["messages"], original["messages"]);
    let c: Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(c["original"]["outcome"], "ungrounded");
    assert_eq!(c["replay"]["outcome"], "missing");
    assert_eq!(std::fs::read(home.path("s.sqlite")).unwrap(), before);
    // Question 4 does not exist; the refusal names the session and says so.
    let o = replay(&home, &url, &["--question", "4"]).await;
    assert!(!o.status.success());
    assert!(
        err(&o).contains("the session has 3 question(s); there is no question 4"),
        "{}",
        err(&o)
    );
}

#[tokio::test]
async fn an_endpoint_that_is_down_is_a_one_line_error_and_nothing_is_written() {
    let home = Home::new().await;
    let model = ScriptedServer::responding(researcher::researcher(researches)).await;
    let url = model.base_url();
    asked_session(&home, &url, &["What did the keeper eat?"]).await;
    let before = std::fs::read(home.path("s.sqlite")).unwrap();
    let files = listing(home.dir.path());
    // A port nothing listens on.
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1", l.local_addr().unwrap())
    };
    let o = replay(
        &home,
        &down,
        &["--question", "1", "--arm=--no-policy", "--save"],
    )
    .await;
    assert!(!o.status.success());
    let e = err(&o);
    let lines: Vec<&str> = e.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{e}");
    assert!(lines[0].contains("the replay failed"), "{e}");
    assert!(!e.contains("SECRET"), "{e}");
    assert_eq!(std::fs::read(home.path("s.sqlite")).unwrap(), before);
    assert_eq!(listing(home.dir.path()), files);
    // A flag an arm does not take is refused before anything runs.
    let o = replay(&home, &url, &["--question", "1", "--arm=--no-polcy"]).await;
    assert!(!o.status.success());
    assert!(
        err(&o).contains("unexpected argument '--no-polcy'"),
        "{}",
        err(&o)
    );
}

// The workbench: the replay popup, its progress, the side-by-side screen and its keys.

mod workbench {
    use std::sync::Arc;
    use std::time::Duration;

    use crossterm::event::{KeyCode, KeyModifiers};
    use groundwork::config::AppConfig;
    use groundwork::model::OpenAiModel;
    use groundwork::session::Session;
    use groundwork::tui::app::{App, Msg, ReplayState};
    use groundwork::tui::{Runtime, Services};

    use super::{asked_session, listing, researches};
    use crate::support::home::Home;
    use crate::support::researcher;
    use crate::support::scripted_server::ScriptedServer;
    use crate::support::test_config;
    use crate::support::workbench::{host, press, press_mod, redactions, screen};

    async fn open(home: &Home, model_url: &str) -> (App, Runtime) {
        let mut store = groundwork::store::Store::open(&home.db).await.unwrap();
        let embedder =
            groundwork::embed::build(store.embedder_spec(), &Default::default()).unwrap();
        store.set_embedder(embedder).unwrap();
        let mut services = Services::new(
            Some(Arc::new(store)),
            Some(Arc::new(OpenAiModel::new(test_config(model_url)).unwrap())),
            AppConfig::default(),
            vec![],
            false,
        );
        let env = [("GROUNDWORK_DISCOVER".to_string(), "off".to_string())]
            .into_iter()
            .collect();
        services.replay_changes = Some(groundwork::cli::workbench_changes(env, Default::default()));
        let path = home.path("s.sqlite");
        let session = Session::load(&path).unwrap();
        (
            App::new(session, Some(path), host()),
            Runtime::new(services),
        )
    }

    /// The screen with the token figures masked (`#` per digit): the sent counts move by
    /// a token or so between runs of one scripted conversation (the estimate counts
    /// characters of what was sent), and the snapshots are about the layout.
    fn shown(app: &mut App, w: u16, h: u16) -> String {
        screen(app, w, h)
            .lines()
            .map(|l| {
                if ["tok", "counted", "provider"].iter().any(|k| l.contains(k)) {
                    l.chars()
                        .map(|c| if c.is_ascii_digit() { '#' } else { c })
                        .collect()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    async fn finished(rt: &mut Runtime, app: &mut App) {
        assert!(
            rt.until(app, Duration::from_secs(30), |a| !a.replay_running())
                .await,
            "the replay finished"
        );
    }

    /// Issue 44 §1: the workbench's replay searches the knowledge base as the question
    /// read it too, and its screen says so.
    #[tokio::test]
    async fn a_workbench_replay_searches_the_knowledge_base_as_the_question_read_it() {
        let home = Home::new().await;
        let model = ScriptedServer::responding(researcher::researcher(researches)).await;
        let url = model.base_url();
        asked_session(&home, &url, &["Which lighthouse towers guide ships?"]).await;
        std::fs::write(
            home.path("keepers.md"),
            "# Lighthouse keepers\n\nLighthouse keepers tend the lighthouse towers that \
             guide ships: which lighthouse towers guide ships is their whole trade.\n",
        )
        .unwrap();
        let o = home.run(&["ingest", "keepers.md"]).await;
        assert!(o.status.success(), "{}", crate::support::home::err(&o));
        let (mut app, mut rt) = open(&home, &url).await;
        press(&mut rt, &mut app, KeyCode::F(4));
        assert_eq!(app.replay_target(), Some(0));
        press_mod(&mut rt, &mut app, KeyCode::Char('r'), KeyModifiers::ALT);
        press(&mut rt, &mut app, KeyCode::Enter);
        finished(&mut rt, &mut app).await;
        assert_eq!(app.error, None);
        let Some(ReplayState::Shown { replayed, .. }) = &app.replay else {
            panic!("the replay is shown")
        };
        let kb = replayed.comparison.knowledge_base.clone().unwrap();
        assert!(kb.starts_with("as question 1 read it (chunks "), "{kb}");
        assert_eq!(
            replayed.comparison.diff, "",
            "the same knowledge base and no change: what the question sent"
        );
        let side = screen(&mut app, 160, 48);
        assert!(
            side.contains("knowledge base as question 1 read it"),
            "{side}"
        );
    }

    #[tokio::test]
    async fn the_replay_popup_runs_the_selected_question_and_shows_both_runs_side_by_side() {
        let home = Home::new().await;
        let model = ScriptedServer::responding(researcher::researcher(researches)).await;
        let url = model.base_url();
        asked_session(
            &home,
            &url,
            &["How did lighthouses start?", "What did the keeper eat?"],
        )
        .await;
        let before = std::fs::read(home.path("s.sqlite")).unwrap();
        let files = listing(home.dir.path());
        let (mut app, mut rt) = open(&home, &url).await;
        let mut settings = redactions();
        // The latencies of the two runs.
        settings.add_filter(r"latency .*", "latency <ms>");
        // The checkout the fixtures were ingested from (and the padding its length makes).
        settings.add_filter(
            r"file://\S*/tests/fixtures/(\S*) *",
            "file://<repo>/tests/fixtures/$1 ",
        );
        // A path the pane's border cuts short: its visible part depends on the checkout.
        settings.add_filter(r"file:///[^│\s]*", "file://<repo>…");
        let _guard = settings.bind_to_scope();

        // The ledger's selected row is the question replayed: the second.
        press(&mut rt, &mut app, KeyCode::F(4));
        press(&mut rt, &mut app, KeyCode::Down);
        assert_eq!(app.replay_target(), Some(1));
        press_mod(&mut rt, &mut app, KeyCode::Char('r'), KeyModifiers::ALT);
        press_mod(&mut rt, &mut app, KeyCode::Char('p'), KeyModifiers::ALT);
        let popup = shown(&mut app, 80, 24);
        insta::assert_snapshot!("replay_popup_80x24", popup);
        assert!(popup.contains("Replay question 2") && popup.contains("> --no-policy"));
        insta::assert_snapshot!("replay_popup_160x48", shown(&mut app, 160, 48));
        // Typed flags go to the line; toggling twice leaves it as it was.
        for c in " --eager".chars() {
            press(&mut rt, &mut app, KeyCode::Char(c));
        }
        press_mod(&mut rt, &mut app, KeyCode::Char('e'), KeyModifiers::ALT);
        assert!(
            matches!(&app.replay, Some(ReplayState::Choosing { flags, .. }) if flags == "--no-policy")
        );

        press(&mut rt, &mut app, KeyCode::Enter);
        assert!(app.replay_running());
        assert!(shown(&mut app, 80, 24).contains("replaying question 2"));
        finished(&mut rt, &mut app).await;
        assert_eq!(app.error, None);
        let side = shown(&mut app, 80, 24);
        insta::assert_snapshot!("replay_side_by_side_80x24", side);
        let row = |name: &str| {
            side.lines()
                .find(|l| l.trim_start().starts_with(name))
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
                .unwrap_or_default()
        };
        assert_eq!(
            row("outcome"),
            ["outcome", "ungrounded,", "redirected", "missing"]
        );
        assert_eq!(row("requests"), ["requests", "4", "2"]);
        insta::assert_snapshot!("replay_side_by_side_160x48", shown(&mut app, 160, 48));
        // The diff scrolls.
        assert!(side.contains("line 1/"));
        press(&mut rt, &mut app, KeyCode::Char('j'));
        press(&mut rt, &mut app, KeyCode::PageDown);
        assert!(shown(&mut app, 80, 24).contains("line 12/"));
        press(&mut rt, &mut app, KeyCode::Char('g'));
        assert!(shown(&mut app, 80, 24).contains("line 1/"));

        // `s` saves beside the session; Esc closes; the session shown is unchanged.
        press(&mut rt, &mut app, KeyCode::Char('s'));
        assert!(
            rt.until(&mut app, Duration::from_secs(10), |a| matches!(
                &a.replay,
                Some(ReplayState::Shown { saved: Some(_), .. })
            ))
            .await
        );
        let beside = home.path("s.replay-2-no-policy.json");
        assert!(
            app.notice
                .as_deref()
                .unwrap()
                .contains("s.replay-2-no-policy.json")
        );
        let saved = Session::load(&beside).unwrap();
        assert_eq!(saved.messages.len(), app.session.messages.len() - 8 + 4);
        press(&mut rt, &mut app, KeyCode::Esc);
        assert!(app.replay.is_none());
        assert_eq!(std::fs::read(home.path("s.sqlite")).unwrap(), before);
        let mut expected = files.clone();
        expected.push("s.replay-2-no-policy.json".into());
        expected.sort();
        assert_eq!(listing(home.dir.path()), expected);

        // From the palette, on the last question: no changes, discarded with `d`.
        press_mod(&mut rt, &mut app, KeyCode::Char('p'), KeyModifiers::CONTROL);
        for c in "replay".chars() {
            press(&mut rt, &mut app, KeyCode::Char(c));
        }
        press(&mut rt, &mut app, KeyCode::Enter);
        assert!(matches!(
            &app.replay,
            Some(ReplayState::Choosing { question: 2, .. })
        ));
        press(&mut rt, &mut app, KeyCode::Enter);
        finished(&mut rt, &mut app).await;
        let same = shown(&mut app, 80, 24);
        assert!(same.contains("with no changes"), "{same}");
        press(&mut rt, &mut app, KeyCode::Char('d'));
        assert!(app.replay.is_none());
        assert_eq!(
            app.notice.as_deref(),
            Some("replay discarded; nothing was written")
        );
        assert_eq!(listing(home.dir.path()), expected);

        // Esc cancels a running replay; its late result is dropped.
        press_mod(&mut rt, &mut app, KeyCode::F(7), KeyModifiers::NONE);
        press(&mut rt, &mut app, KeyCode::Enter);
        assert!(app.replay_running());
        press(&mut rt, &mut app, KeyCode::Esc);
        assert!(app.replay.is_none());
        tokio::time::sleep(Duration::from_millis(500)).await;
        crate::support::workbench::settle(&mut rt, &mut app).await;
        assert!(app.replay.is_none() && app.error.is_none());
        assert_eq!(std::fs::read(home.path("s.sqlite")).unwrap(), before);
        assert_eq!(listing(home.dir.path()), expected);
    }

    #[tokio::test]
    async fn a_replay_whose_endpoint_is_down_is_a_one_line_error_and_loses_nothing() {
        let home = Home::new().await;
        let model = ScriptedServer::responding(researcher::researcher(researches)).await;
        asked_session(&home, &model.base_url(), &["What did the keeper eat?"]).await;
        let before = std::fs::read(home.path("s.sqlite")).unwrap();
        let down = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}/v1", l.local_addr().unwrap())
        };
        let (mut app, mut rt) = open(&home, &down).await;
        press_mod(&mut rt, &mut app, KeyCode::Char('r'), KeyModifiers::ALT);
        press(&mut rt, &mut app, KeyCode::Enter);
        finished(&mut rt, &mut app).await;
        let e = app.error.clone().unwrap();
        assert!(e.starts_with("the replay failed"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        assert!(app.replay.is_none());
        assert!(shown(&mut app, 80, 24).contains("the replay failed"));
        // A bad flag is one line too.
        press_mod(&mut rt, &mut app, KeyCode::Char('r'), KeyModifiers::ALT);
        for c in "--no-polcy".chars() {
            press(&mut rt, &mut app, KeyCode::Char(c));
        }
        press(&mut rt, &mut app, KeyCode::Enter);
        finished(&mut rt, &mut app).await;
        assert_eq!(
            app.error.as_deref(),
            Some("arm 'replay': unexpected argument '--no-polcy' found")
        );
        // Pasted text goes to the flags line, not the question; Ctrl-Q still quits.
        press_mod(&mut rt, &mut app, KeyCode::Char('r'), KeyModifiers::ALT);
        rt.handle(&mut app, Msg::Paste("--eager".into()));
        assert!(
            matches!(&app.replay, Some(ReplayState::Choosing { flags, .. }) if flags == "--eager")
        );
        assert_eq!(app.input.lines(), [""]);
        press_mod(&mut rt, &mut app, KeyCode::Char('q'), KeyModifiers::CONTROL);
        assert!(app.quit && app.replay.is_none());
        assert_eq!(std::fs::read(home.path("s.sqlite")).unwrap(), before);
    }
}
