//! The replay effects of the workbench: run a question again in the background
//! ([`Effect::Replay`], answered by `Msg::Replayed`) and save one beside the session
//! ([`Effect::SaveReplay`], answered by `Msg::ReplaySaved`).

use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;

use crate::session::Session;

use super::Services;
use super::app::{App, Effect, Msg};

pub(super) fn execute(
    effect: Effect,
    app: &App,
    services: &Arc<Services>,
    msg_tx: &UnboundedSender<Msg>,
) {
    match effect {
        Effect::Replay {
            id,
            question,
            flags,
            cancel,
        } => {
            let (session, services, tx) = (app.session.clone(), services.clone(), msg_tx.clone());
            tokio::spawn(async move {
                let result = replay(&services, session, question, flags, cancel).await;
                let _ = tx.send(Msg::Replayed {
                    id,
                    result: result.map(Box::new),
                });
            });
        }
        Effect::SaveReplay {
            original,
            question,
            changes,
            session,
        } => {
            let tx = msg_tx.clone();
            tokio::task::spawn_blocking(move || {
                let path = crate::host::replay::beside_path(&original, question, &changes);
                let result = crate::host::replay::save_beside(&session, &path)
                    .map(|()| path)
                    .map_err(|e| e.0);
                let _ = tx.send(Msg::ReplaySaved(result));
            });
        }
        _ => {}
    }
}

/// Runs question `question` of `session` again with the changes `flags` and compares.
async fn replay(
    services: &Services,
    session: Arc<Session>,
    question: usize,
    flags: String,
    cancel: crate::engine::cancel::CancelToken,
) -> Result<crate::host::replay::Replayed, String> {
    let shared = session.clone();
    let prepared = tokio::task::spawn_blocking(move || {
        crate::host::replay::prepare(&shared, question).map_err(|e| e.0)
    })
    .await
    .map_err(|e| e.to_string())??;
    let Some(changes) = services.replay_changes.clone() else {
        return Err("replays need the workbench's model and database; none is configured".into());
    };
    let (mut composer, mut opts) = changes(flags.clone(), services.composer()).await?;
    // Over the knowledge base as the question read it (the versions the session recorded).
    let knowledge_base = crate::host::replay::pin_to_question(&mut composer, &session, question)
        .await
        .map_err(|e| e.0)?;
    // The workbench's own capabilities unless the changes name others.
    if opts.capabilities.is_empty() {
        opts.capabilities = services.capabilities.clone();
        opts.eager |= services.eager;
    }
    opts.sandbox_worker = services.sandbox_worker.clone();
    let agent = composer.agent(&opts).map_err(|e| e.0)?;
    let outcome = prepared.start(agent, None, None, cancel).outcome().await;
    let mut replayed = prepared.finish(outcome, &flags).map_err(|e| e.0)?;
    replayed.comparison.knowledge_base = Some(knowledge_base);
    Ok(replayed)
}
