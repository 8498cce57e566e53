//! Evidence compaction's hook (`haiku-rag-evidence-compaction`, SPEC §8.1): the
//! capability whose `wrap_model_request` rewrites the outgoing copy of earlier questions'
//! evidence through the pure core in [`super`]. The capsule and its fetched pictures are
//! kept for the run and rebuilt only when its [`CapsuleKey`] no longer holds.

use serde_json::Value;

use super::{
    CAPABILITY_ID, CapsuleKey, EvidenceView, build_capsule, capsule_images_with,
    compact_history_owned, image_media_type, owned_tools, question_in_progress, require_records,
};
use crate::capabilities::evidence::{StoreHandle, discover};
use crate::engine::agent::Earlier;
use crate::engine::capability::{BoxFuture, Capability, CapabilityRun, ForRunContext, RunContext};
use crate::engine::messages::{ModelMessage, UserContent};

/// The compactor as registered. Takes no configuration.
#[derive(Debug, Clone, Default)]
pub struct EvidenceCompactionCapability;

impl EvidenceCompactionCapability {
    /// The compactor.
    pub fn new() -> Self {
        EvidenceCompactionCapability
    }

    /// `EvidenceCompactionCapability.from_spec()`: accepts nothing but `null` or `{}`.
    pub fn from_spec(args: &Value) -> anyhow::Result<Self> {
        match args {
            Value::Null => Ok(Self),
            Value::Object(m) if m.is_empty() => Ok(Self),
            other => {
                anyhow::bail!("EvidenceCompactionCapability takes no arguments, found {other}")
            }
        }
    }
}

impl Capability for EvidenceCompactionCapability {
    fn id(&self) -> &str {
        CAPABILITY_ID
    }

    fn for_run(&self, _ctx: &mut ForRunContext<'_>) -> anyhow::Result<Box<dyn CapabilityRun>> {
        Ok(Box::new(CompactorRun::default()))
    }
}

/// The capsule built for the run, with the key it was built under.
#[derive(Debug, Clone)]
struct Built {
    key: CapsuleKey,
    /// The request it was built for: a capsule whose picture could not be fetched (the
    /// store failed) is rebuilt, and the picture fetched again, on the next request.
    step: (String, usize),
    /// Every picture's fetch was answered: found, or not in the store (a cited item
    /// without picture bytes, a document since removed); the store does not change that
    /// during a run, so a capsule missing such a picture is not rebuilt for it.
    settled: bool,
    text: String,
    images: Vec<UserContent>,
}

/// The per-run copy: holds the run's capsule, never persisted.
#[derive(Debug, Default)]
pub struct CompactorRun {
    cache: Option<Built>,
    rewrites: super::Rewrites,
    /// Every picture a store answered for during the run (its bytes, or that it has none),
    /// by store, document and ref: a capsule rebuilt later in the run (a citation changed
    /// its key) takes them from here instead of asking the store again, as a settled
    /// capsule is reused.
    fetched: std::collections::HashMap<PictureKey, Option<Vec<u8>>>,
}

/// A picture's store ([`StoreHandle::identity`]), document and ref.
type PictureKey = (usize, String, String);

/// A picture to fetch: its owner's connection, document and ref.
struct Wanted {
    store: StoreHandle,
    key: PictureKey,
}

/// Whether `earlier` (the messages before the run's window) was rewritten as this
/// request rewrites them: for the same evidence tools, without returns of a capability
/// whose state was not carried, and with the carrier (and the question in progress) in
/// the window, so that no earlier message would be rewritten otherwise.
fn earlier_holds(
    earlier: &Earlier,
    views: &[EvidenceView<'_>],
    owned: &[String],
    boundary: usize,
    window: &[ModelMessage],
) -> anyhow::Result<()> {
    if earlier.compacted_for != owned {
        anyhow::bail!(
            "the earlier messages were compacted for the tools {:?}, this request compacts \
             for {owned:?}; run it over the whole history",
            earlier.compacted_for
        );
    }
    for view in views.iter().filter(|v| !v.state_carried) {
        if view.tool_names.iter().any(|t| earlier.returns.contains(t)) {
            return Err(
                crate::capabilities::compaction::CompactionError::StateNotCarried {
                    capability: view.capability.to_string(),
                }
                .into(),
            );
        }
    }
    let carrier_in_window = boundary >= earlier.len
        && super::find_carrier(window, boundary - earlier.len, owned).is_some();
    if earlier.len > 0 && !carrier_in_window {
        anyhow::bail!(
            "the question in progress or the newest evidence before it lies among the {} \
             earlier messages, so they are not rewritten as they were; run it over the whole \
             history",
            earlier.len
        );
    }
    Ok(())
}

fn decodable(bytes: &[u8]) -> Option<String> {
    image::load_from_memory(bytes).ok()?;
    image_media_type(bytes)
        .map(str::to_string)
        .or_else(|| Some("image/png".to_string()))
}

impl CapabilityRun for CompactorRun {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn wrap_model_request<'a>(
        &'a mut self,
        ctx: &'a mut RunContext,
        outgoing: Vec<ModelMessage>,
    ) -> BoxFuture<'a, anyhow::Result<Vec<ModelMessage>>> {
        Box::pin(async move {
            // Everything that borrows the registry happens in this block.
            let (boundary, owned, pending) = {
                let evidence = discover(ctx);
                let views: Vec<EvidenceView<'_>> = evidence
                    .iter()
                    .map(|e| {
                        EvidenceView::new(
                            e.namespace(),
                            e.evidence_state(),
                            e.evidence_tools(),
                            e.state_carried(),
                        )
                    })
                    .collect();
                let boundary = question_in_progress(&views);
                if boundary == 0 {
                    return Ok(outgoing);
                }
                let owned = owned_tools(&views);
                // A run over a window of a long history: the earlier messages were
                // rewritten as this request would rewrite them, and the boundary counts
                // them too.
                let boundary = match ctx.earlier.as_deref() {
                    Some(earlier) => {
                        earlier_holds(earlier, &views, &owned, boundary, &outgoing)?;
                        boundary - earlier.len
                    }
                    None => boundary,
                };
                require_records(&views, &outgoing, boundary)?;
                let step = (ctx.run_id.clone(), ctx.run_step);
                let reusable = self
                    .cache
                    .as_ref()
                    .is_some_and(|c| (c.settled || c.step == step) && c.key.holds_for(&views));
                let pending = if reusable {
                    None
                } else {
                    let key = CapsuleKey::of(&views);
                    let capsule = build_capsule(&views)?;
                    let wanted: Vec<Wanted> = capsule
                        .pictures
                        .iter()
                        .map(|p| {
                            let store = evidence
                                .iter()
                                .find(|e| e.namespace() == p.capability)
                                .map(|e| e.picture_store(&p.chunk_id))
                                .expect("pictures come from discovered capabilities");
                            Wanted {
                                key: (store.identity(), p.document_id.clone(), p.self_ref.clone()),
                                store,
                            }
                        })
                        .collect();
                    Some((key, step, capsule, wanted))
                };
                (boundary, owned, pending)
            };
            if let Some((key, step, capsule, wanted)) = pending {
                let mut fetched: Vec<Option<Vec<u8>>> = Vec::with_capacity(wanted.len());
                let mut settled = true;
                for w in &wanted {
                    // `None`: the store failed; `Some(None)`: it has no such picture.
                    let answer = match self.fetched.get(&w.key) {
                        Some(known) => Some(known.clone()),
                        None => {
                            let (_, document_id, self_ref) = &w.key;
                            let answer = match w.store.get().await {
                                Ok(store) => store.picture(document_id, self_ref).await.ok(),
                                Err(_) => None,
                            };
                            if let Some(known) = &answer {
                                self.fetched.insert(w.key.clone(), known.clone());
                            }
                            answer
                        }
                    };
                    settled &= answer.is_some();
                    fetched.push(answer.flatten());
                }
                let mut index = 0;
                let images = capsule_images_with(
                    &capsule.pictures,
                    |_| {
                        let bytes = fetched[index].take();
                        index += 1;
                        bytes
                    },
                    decodable,
                );
                self.cache = Some(Built {
                    key,
                    step,
                    settled,
                    text: capsule.text,
                    images,
                });
            }
            let built = self.cache.as_ref().expect("built above");
            Ok(compact_history_owned(
                outgoing,
                &mut self.rewrites,
                boundary,
                &owned,
                &built.text,
                &built.images,
            ))
        })
    }
}
