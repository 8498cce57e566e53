//! The outgoing copy of the history, rewritten for the wire (SPEC §8.3, §8.4, §8.6):
//! receipts for earlier evidence returns, the capsule on the carrier, our pictures
//! stripped, and the refusal when a capability's state was not carried.

use super::capsule::EvidenceView;
use super::{CompactionError, RETRIEVED_IMAGE_TAG, receipt};
use crate::engine::messages::{
    ModelMessage, ModelRequestPart, UserContent, UserContentValue, UserPromptKind, UserPromptPart,
};

/// Whether a request part is a return of one of `owned`.
fn owned_return<S: AsRef<str>>(part: &ModelRequestPart, owned: &[S]) -> bool {
    match part {
        ModelRequestPart::ToolReturn(r) => owned.iter().any(|o| o.as_ref() == r.tool_name),
        _ => false,
    }
}

/// The last owned tool return below `boundary`, as (message index, part index).
pub fn find_carrier<S: AsRef<str>>(
    messages: &[ModelMessage],
    boundary: usize,
    owned: &[S],
) -> Option<(usize, usize)> {
    let end = boundary.min(messages.len());
    messages[..end]
        .iter()
        .enumerate()
        .rev()
        .find_map(|(index, message)| {
            let request = message.as_request()?;
            request
                .parts
                .iter()
                .rposition(|p| owned_return(p, owned))
                .map(|position| (index, position))
        })
}

/// Removes our (tagged label, image) pairs from list content (§8.4). Only a string
/// containing [`RETRIEVED_IMAGE_TAG`] immediately followed by an image is ours, and
/// both go together.
pub fn strip_our_pictures(items: &[UserContent]) -> Vec<UserContent> {
    let mut kept = Vec::with_capacity(items.len());
    let mut index = 0;
    while index < items.len() {
        let ours = matches!(&items[index], UserContent::Text(s) if s.contains(RETRIEVED_IMAGE_TAG))
            && matches!(items.get(index + 1), Some(UserContent::Binary(b)) if b.is_image());
        if ours {
            index += 2;
            continue;
        }
        kept.push(items[index].clone());
        index += 1;
    }
    kept
}

/// Rewrites a copy of `messages` for the wire (§8.3); see [`compact_history_owned`].
pub fn compact_history<S: AsRef<str>>(
    messages: &[ModelMessage],
    boundary: usize,
    owned_tool_names: &[S],
    capsule_text: &str,
    capsule_images: &[UserContent],
) -> Vec<ModelMessage> {
    compact_history_owned(
        messages.to_vec(),
        &mut Rewrites::default(),
        boundary,
        owned_tool_names,
        capsule_text,
        capsule_images,
    )
}

/// Whether `items[index]` starts one of our (tagged label, image) pairs.
fn our_picture_at(items: &[UserContent], index: usize) -> bool {
    matches!(&items[index], UserContent::Text(s) if s.contains(RETRIEVED_IMAGE_TAG))
        && matches!(items.get(index + 1), Some(UserContent::Binary(b)) if b.is_image())
}

/// Whether a part is user content holding one of our (tagged label, image) pairs.
/// An empty content list counts too: such a part is dropped like one stripping empties.
fn has_our_picture(part: &ModelRequestPart) -> bool {
    let ModelRequestPart::UserPrompt(prompt) = part else {
        return false;
    };
    let UserContentValue::Items(items) = &prompt.content else {
        return false;
    };
    items.is_empty() || (0..items.len()).any(|at| our_picture_at(items, at))
}

/// Whether stripping our pictures leaves nothing of this part.
fn strips_to_nothing(part: &ModelRequestPart) -> bool {
    let ModelRequestPart::UserPrompt(prompt) = part else {
        return false;
    };
    let UserContentValue::Items(items) = &prompt.content else {
        return false;
    };
    let mut index = 0;
    while index < items.len() {
        if !our_picture_at(items, index) {
            return false;
        }
        index += 2;
    }
    true
}

/// The rewrites of one run's requests, by the message each was made from. A message
/// before the boundary that does not carry the capsule is rewritten the same way for
/// every request (its receipts and stripped pictures depend on it and the owned tools
/// only), so the run's later requests take the rewrite made for the first: the same
/// message, which what follows knows by identity (the estimate's memory, the wire body's
/// and the session encoder's comparisons). Holds the messages it was made from, so no
/// other message takes their addresses, and only those of the latest request.
#[derive(Debug, Default)]
pub struct Rewrites {
    owned: Vec<String>,
    by_source: std::collections::HashMap<usize, (ModelMessage, ModelMessage)>,
}

/// Rewrites the outgoing `messages` for the wire (§8.3), in place: below `boundary`,
/// every owned tool return becomes the receipt, except the carrier (the newest one),
/// which gets the capsule when it is non-empty; our pictures are stripped from user
/// content; the capsule images join the carrier's request as a new user part. Messages
/// at or after `boundary` are untouched, nothing else is copied, and a request that
/// stripping would leave without parts is kept as it was.
pub fn compact_history_owned<S: AsRef<str>>(
    mut messages: Vec<ModelMessage>,
    rewrites: &mut Rewrites,
    boundary: usize,
    owned_tool_names: &[S],
    capsule_text: &str,
    capsule_images: &[UserContent],
) -> Vec<ModelMessage> {
    if boundary == 0 {
        return messages;
    }
    let carrier = find_carrier(&messages, boundary, owned_tool_names);
    if !rewrites
        .owned
        .iter()
        .map(String::as_str)
        .eq(owned_tool_names.iter().map(AsRef::as_ref))
    {
        rewrites.owned = owned_tool_names
            .iter()
            .map(|s| s.as_ref().to_string())
            .collect();
        rewrites.by_source.clear();
    }
    let mut earlier = std::mem::take(&mut rewrites.by_source);
    for (index, message) in messages.iter_mut().enumerate().take(boundary) {
        let identity = message.identity();
        let ModelMessage::Request(request) = message else {
            continue;
        };
        let adds_images = carrier.is_some_and(|(at, _)| at == index) && !capsule_images.is_empty();
        let touched = adds_images
            || request
                .parts
                .iter()
                .any(|p| owned_return(p, owned_tool_names) || has_our_picture(p));
        if !touched || (!adds_images && request.parts.iter().all(strips_to_nothing)) {
            // Nothing to rewrite (the message stays shared), or a request stripping would
            // leave with no parts, which is not a message: keep the original.
            continue;
        }
        let same_every_time = !adds_images && carrier.is_none_or(|(at, _)| at != index);
        if same_every_time && let Some(done) = earlier.remove(&identity) {
            *message = done.1.clone();
            rewrites.by_source.insert(identity, done);
            continue;
        }
        // The rewritten request is built from the parts it keeps: the evidence a receipt
        // replaces is never copied.
        let mut parts = Vec::with_capacity(request.parts.len() + 1);
        for (position, part) in request.parts.iter().enumerate() {
            match part {
                ModelRequestPart::ToolReturn(r) if owned_return(part, owned_tool_names) => {
                    let body = if carrier == Some((index, position)) && !capsule_text.is_empty() {
                        capsule_text
                    } else {
                        receipt()
                    };
                    parts.push(ModelRequestPart::ToolReturn(
                        r.with_content(serde_json::Value::String(body.to_string())),
                    ));
                }
                ModelRequestPart::UserPrompt(prompt) if has_our_picture(part) => {
                    let UserContentValue::Items(items) = &prompt.content else {
                        unreachable!("only list content holds pictures");
                    };
                    let kept = strip_our_pictures(items);
                    if !kept.is_empty() {
                        parts.push(ModelRequestPart::UserPrompt(UserPromptPart {
                            content: UserContentValue::Items(kept),
                            timestamp: prompt.timestamp.clone(),
                            part_kind: UserPromptKind,
                            extra: prompt.extra.clone(),
                        }));
                    }
                }
                other => parts.push(other.clone()),
            }
        }
        if adds_images {
            parts.push(ModelRequestPart::UserPrompt(UserPromptPart::new(
                capsule_images.to_vec(),
            )));
        }
        let rewritten = ModelMessage::from(request.with_parts(parts));
        if same_every_time {
            let source = std::mem::replace(message, rewritten.clone());
            rewrites
                .by_source
                .insert(source.identity(), (source, rewritten));
        } else {
            *message = rewritten;
        }
    }
    messages
}

/// Refuses to compact when a capability whose state was not carried has owned
/// returns below the boundary (§8.6). Only that capability's own tools count.
pub fn require_records(
    views: &[EvidenceView<'_>],
    messages: &[ModelMessage],
    boundary: usize,
) -> Result<(), CompactionError> {
    for view in views.iter().filter(|v| !v.state_carried) {
        if find_carrier(messages, boundary, &view.tool_names).is_some() {
            return Err(CompactionError::StateNotCarried {
                capability: view.capability.to_string(),
            });
        }
    }
    Ok(())
}
