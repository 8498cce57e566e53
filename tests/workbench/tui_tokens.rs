//! True token counts in the workbench: three questions asked through the app against the
//! scripted OpenAI-compatible server, each answer reporting its own `usage`, counted by a
//! `tokenizer.json` the host chose. The inspector, the status bar and the ledger show the
//! counted figure with its counter beside the provider's prompt and completion tokens and
//! the difference (insta snapshots at 80x24 and 160x48).

use std::path::Path;
use std::sync::Arc;

use crate::support::scripted_server::ScriptedServer;
use crate::support::workbench::*;
use groundwork::engine::tokens::{TokenCounter, TokenizerJson};
use groundwork::tui::Runtime;
use groundwork::tui::app::Pane;

/// The prompt and completion tokens the scripted server reports for reply `i`.
fn usage(i: usize) -> (u64, u64) {
    (1000 + 100 * i as u64, 10 + i as u64)
}

#[tokio::test]
async fn inspector_status_and_ledger_show_provider_usage_beside_the_count() {
    let kb = demo_kb().await;
    let figure = hit(&kb.store, "monthly solar output", |r| {
        r.doc_item_refs.iter().any(|x| x.contains("pictures"))
    })
    .await;
    let figure_chunk = figure.chunk_id.clone().unwrap();
    let second = hit(&kb.store, "battery state of charge summer day", |r| {
        r.chunk_id.as_deref() != Some(&figure_chunk)
    })
    .await;
    let replies: Vec<_> = three_questions(&figure_chunk, second.chunk_id.as_deref().unwrap())
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.usage(usage(i).0, usage(i).1))
        .collect();
    let n = replies.len();
    let server = ScriptedServer::start(replies).await;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    let mut services = services(&kb.store, &server.base_url());
    let tokenizer = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/configs/good/tokenizer.json");
    let counter = Arc::new(TokenizerJson::from_file(&tokenizer).unwrap());
    services.counter = Some(counter.clone());
    let mut rt = Runtime::new(services);
    ask(&mut rt, &mut app, "How much did the array produce in July?").await;
    ask(&mut rt, &mut app, "And the battery state of charge?").await;
    ask(&mut rt, &mut app, "Say something nice about microgrids").await;
    assert_eq!(server.remaining(), 0, "every scripted reply was used");
    assert_eq!(app.request_count(), n);

    // Every request: counted by the tokenizer, the provider's figures, the difference.
    for i in 0..n {
        let (_, s) = app.request_at(i).unwrap();
        let t = s.tokens.as_ref().expect("counted");
        assert_eq!(t.counter, "tokenizer.json");
        assert_eq!(t.instructions, counter.count(&s.instructions));
        assert!(t.tools > 0, "the tool schemas are counted");
        assert_eq!(
            (t.provider_prompt, t.provider_completion),
            (Some(usage(i).0), Some(usage(i).1))
        );
        assert_eq!(t.difference, Some(usage(i).0 as i64 - t.sent as i64));
    }
    let totals = app.token_totals();
    assert_eq!(totals.requests, n);
    assert_eq!(totals.reported, n);
    assert_eq!(
        totals.provider_prompt,
        (0..n).map(|i| usage(i).0).sum::<u64>()
    );
    assert_eq!(
        totals.provider_completion,
        (0..n).map(|i| usage(i).1).sum::<u64>()
    );

    let settings = redactions();
    let _guard = settings.bind_to_scope();
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        let size = format!("{w}x{h}");
        // The compacted follow-up's first request.
        app.inspector.selected = Some(4);
        insta::assert_snapshot!(
            format!("inspector_tokens_{size}"),
            pane(&mut app, Pane::Inspector, w, h)
        );
        insta::assert_snapshot!(format!("status_tokens_{w}"), status_bar(&mut app, w));
        app.ledger.selected = 0;
        insta::assert_snapshot!(
            format!("ledger_tokens_{size}"),
            pane(&mut app, Pane::Ledger, w, h)
        );
    }
    // Beside a notice the field keeps its count and counter, and the notice stays.
    let noticed = status_bar(&mut app, 160);
    assert!(
        noticed.contains("(tokenizer.json)") && noticed.contains("saved session.json"),
        "{noticed}"
    );
    // With the bar to itself it also says what the provider reported.
    app.notice = None;
    let wide = status_bar(&mut app, 160);
    let t = app.request_at(4).unwrap().1.tokens.clone().unwrap();
    assert!(wide.contains("(tokenizer.json)"), "{wide}");
    assert!(
        wide.contains(&format!(
            "provider {} ({})",
            groundwork::engine::tokens::thousands(t.provider_prompt.unwrap()),
            groundwork::engine::tokens::signed(t.difference.unwrap())
        )),
        "{wide}"
    );
}

/// While a question runs: the request's count shows as soon as it is built, and the
/// provider's figures when its response arrives (`ResponseReceived`).
#[test]
fn a_running_request_gets_the_provider_figures_when_answered() {
    use crossterm::event::{KeyCode, KeyModifiers};
    use groundwork::engine::events::{CoreEvent, RequestSnapshot};
    use groundwork::engine::messages::RequestUsage;
    use groundwork::engine::tokens::{CharEstimate, TokenReport};
    use groundwork::tui::app::Msg;
    let dir = tempfile::tempdir().unwrap();
    let mut app = new_app(dir.path());
    for c in "Q?".chars() {
        app.update(key_event(KeyCode::Char(c), KeyModifiers::SHIFT));
    }
    assert_eq!(
        app.update(key_event(KeyCode::Enter, KeyModifiers::NONE))
            .len(),
        1
    );
    let run = app.live.as_ref().unwrap().run_id.clone();
    let report = TokenReport::count(&CharEstimate, "Answer from the base.", &[], &[], &[]);
    app.update(Msg::Core(CoreEvent::RequestBuilt {
        run_id: run.clone(),
        request: 1,
        snapshot: Box::new(RequestSnapshot {
            run_id: run.clone(),
            request: 1,
            raw: vec![],
            compacted: vec![],
            tools: vec![],
            instructions: "Answer from the base.".into(),
            raw_tokens: Default::default(),
            compacted_tokens: Default::default(),
            tokens: Some(report.clone()),
        }),
    }));
    let inspector = pane(&mut app, Pane::Inspector, 100, 12);
    assert!(inspector.contains("sent 6 tok (≈ chars/4)"), "{inspector}");
    assert!(
        inspector.contains("provider: no usage reported (yet)"),
        "{inspector}"
    );
    let mut answered = report;
    answered.set_usage(&RequestUsage {
        input_tokens: 20,
        output_tokens: 4,
        ..Default::default()
    });
    app.update(Msg::Core(CoreEvent::ResponseReceived {
        run_id: run.clone(),
        request: 1,
        tokens: answered,
    }));
    let inspector = pane(&mut app, Pane::Inspector, 100, 12);
    assert!(
        inspector.contains("provider 20 in · 4 out  diff +14 (+233%) vs counted"),
        "{inspector}"
    );
    assert!(
        status_bar(&mut app, 200).contains("req 1 tok 6→6 (≈ chars/4) provider 20 (+14)"),
        "{}",
        status_bar(&mut app, 200)
    );
    // A late event of another run changes nothing.
    app.update(Msg::Core(CoreEvent::ResponseReceived {
        run_id: "another-run".into(),
        request: 1,
        tokens: TokenReport::default(),
    }));
    assert_eq!(app.token_totals().provider_prompt, 20);
}
