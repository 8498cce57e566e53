//! The visual grounding view: one piece of evidence (a chunk) with its items outlined on
//! the page rasters, page by page through the pages that have boxes. `V` opens it for
//! the selected citation (conversation), ledger chunk, capsule entry (inspector) or page
//! image; `←`/`→` page; `Esc`,
//! `q` or `V` close. The pages are drawn and encoded off the UI task
//! (`Effect::LoadGrounding`, answered by `Msg::GroundingReady`).

use crossterm::event::KeyEvent;
use ratatui::layout::Rect;
use ratatui_image::protocol::Protocol;

use crate::tui::keymap::Action;

use super::{App, Effect, Pane};

/// The evidence the view shows.
#[derive(Debug, Clone, PartialEq)]
pub struct GroundingTarget {
    pub chunk_id: String,
    /// Title or URI, for the title until the pages arrive.
    pub document: String,
    /// The collection the chunk came from, when several are open and it is known.
    pub collection: Option<String>,
}

/// One outlined page, encoded for the terminal.
pub struct GroundingPage {
    pub page_no: i64,
    pub matched: usize,
    pub context: usize,
    pub protocol: Box<Protocol>,
}

/// The pages of the evidence (and the document's URI), as `Msg::GroundingReady` brings them.
pub struct GroundingPages {
    pub document_uri: String,
    pub pages: Vec<GroundingPage>,
}

pub enum GroundingState {
    Loading,
    Ready(GroundingPages),
    /// One line saying why there is nothing to show.
    Failed(String),
}

pub struct GroundingView {
    pub target: GroundingTarget,
    pub state: GroundingState,
    /// Index into the ready pages.
    pub page: usize,
    /// Cells the pages were encoded for.
    pub size: (u16, u16),
    /// The context's outlines are drawn (`x` toggles them).
    pub context: bool,
    /// When the pages were asked for (the loading line counts from it).
    pub started: std::time::Instant,
}

/// The view when open, and what it needs to (re)load.
#[derive(Default)]
pub struct GroundingSlot {
    pub view: Option<GroundingView>,
    pub generation: u64,
    /// The whole frame, as last drawn (the view covers it).
    pub screen: Rect,
    /// The pages being loaded are a redraw of the ones shown (context toggled): the
    /// page number to stay on.
    pub keep_page: Option<i64>,
}

/// Cells the page image gets in a frame of `screen`: inside the border, below the status
/// line.
pub fn grounding_cells(screen: Rect) -> (u16, u16) {
    (
        screen.width.saturating_sub(2).max(10),
        screen.height.saturating_sub(3).max(3),
    )
}

impl App {
    /// Opens visual grounding for `target` (the hook every evidence view calls).
    pub fn open_grounding(&mut self, target: GroundingTarget) -> Vec<Effect> {
        self.popup = None;
        self.grounding.keep_page = None;
        self.grounding.view = Some(GroundingView {
            target,
            state: GroundingState::Loading,
            page: 0,
            size: (0, 0),
            context: true,
            started: std::time::Instant::now(),
        });
        self.refresh_grounding()
    }

    /// (Re)loads the open view's pages when the frame's size changed.
    pub(super) fn refresh_grounding(&mut self) -> Vec<Effect> {
        let size = grounding_cells(self.grounding.screen);
        let Some(view) = self.grounding.view.as_mut() else {
            return Vec::new();
        };
        if view.size == size {
            return Vec::new();
        }
        view.size = size;
        view.state = GroundingState::Loading;
        view.started = std::time::Instant::now();
        self.grounding.generation += 1;
        vec![Effect::LoadGrounding {
            generation: self.grounding.generation,
            chunk_id: view.target.chunk_id.clone(),
            size,
            context: view.context,
            collection: view.target.collection.clone(),
        }]
    }

    /// The evidence selected in the focused pane: the conversation's selected citation,
    /// the ledger's chunk, the page-images pane's evidence.
    pub fn selected_evidence(&self) -> Option<GroundingTarget> {
        match self.focus {
            Pane::Conversation | Pane::Input => {
                let (t, c) = self.conversation.selected_citation?;
                let cit = self.transcript.turns.get(t)?.citations.get(c)?;
                Some(GroundingTarget {
                    chunk_id: cit.chunk_id.clone(),
                    document: cit.source.clone(),
                    collection: cit.collection.clone(),
                })
            }
            Pane::Ledger if self.ledger.in_chunks => {
                let (c, _) = self.ledger_chunks().get(self.ledger.chunk).cloned()?;
                Some(GroundingTarget {
                    chunk_id: c.chunk_id.clone(),
                    document: c.document.clone().unwrap_or_default(),
                    collection: c.collection.clone(),
                })
            }
            Pane::Inspector => self.selected_capsule_entry().map(|e| GroundingTarget {
                document: e.document(),
                collection: self.collection_of(&e.chunk_id),
                chunk_id: e.chunk_id,
            }),
            Pane::Images => self.images.target.as_ref().map(|t| GroundingTarget {
                chunk_id: t.chunk_id.clone(),
                document: t.document.clone(),
                collection: t.collection.clone(),
            }),
            _ => None,
        }
    }

    /// The collection a chunk the session cited or retrieved came from (as its citation
    /// or search recorded it), when several are open.
    pub fn collection_of(&self, chunk_id: &str) -> Option<String> {
        self.transcript
            .turns
            .iter()
            .flat_map(|t| t.citations.iter())
            .find(|c| c.chunk_id == chunk_id)
            .and_then(|c| c.collection.clone())
            .or_else(|| {
                self.transcript
                    .ledger
                    .iter()
                    .flat_map(|r| r.cited.iter().chain(r.uncited.iter()))
                    .find(|c| c.chunk_id == chunk_id)
                    .and_then(|c| c.collection.clone())
            })
    }

    /// `V`: visual grounding for the selected evidence, or a notice saying what to select.
    pub(super) fn visual_grounding(&mut self) -> Vec<Effect> {
        match self.selected_evidence() {
            Some(target) => self.open_grounding(target),
            None if self.focus == Pane::Inspector => {
                self.notice = Some(format!(
                    "visual grounding: select a capsule entry first ({} / {} in the inspector)",
                    self.keymap.hint(Action::NextCapsuleEntry),
                    self.keymap.hint(Action::PrevCapsuleEntry)
                ));
                Vec::new()
            }
            None => {
                self.notice = Some(format!(
                    "visual grounding: select a citation (conversation ←/→), a ledger chunk, a capsule entry (inspector {}) or a page image first",
                    self.keymap.hint(Action::NextCapsuleEntry)
                ));
                Vec::new()
            }
        }
    }

    /// Keys while the view is open: page, close; quitting still works.
    pub(super) fn on_grounding_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let action = self.keymap.action_for(&key, false);
        let (n, matched): (usize, Vec<usize>) = match &self.grounding.view {
            Some(GroundingView {
                state: GroundingState::Ready(p),
                ..
            }) => (
                p.pages.len(),
                p.pages
                    .iter()
                    .enumerate()
                    .filter(|(_, page)| page.matched > 0)
                    .map(|(i, _)| i)
                    .collect(),
            ),
            _ => (0, Vec::new()),
        };
        let Some(view) = self.grounding.view.as_mut() else {
            return Vec::new();
        };
        match action {
            Some(Action::Left | Action::Up | Action::PageUp) => {
                view.page = view.page.saturating_sub(1)
            }
            Some(Action::Right | Action::Down | Action::PageDown) if view.page + 1 < n => {
                view.page += 1
            }
            Some(Action::NextMatch) => match matched.iter().find(|&&i| i > view.page) {
                Some(&i) => view.page = i,
                None => self.notice = Some("no matched item on a later page".into()),
            },
            Some(Action::PrevMatch) => match matched.iter().rev().find(|&&i| i < view.page) {
                Some(&i) => view.page = i,
                None => self.notice = Some("no matched item on an earlier page".into()),
            },
            Some(Action::ToggleContext) => {
                view.context = !view.context;
                // Drawn again, staying on the page shown now.
                let shown = match &view.state {
                    GroundingState::Ready(p) => p.pages.get(view.page).map(|pg| pg.page_no),
                    _ => None,
                };
                view.size = (0, 0);
                self.grounding.keep_page = shown;
                return self.refresh_grounding();
            }
            Some(Action::Top) => view.page = 0,
            Some(Action::Bottom) => view.page = n.saturating_sub(1),
            Some(Action::Interrupt | Action::QuitPane | Action::Back | Action::VisualGrounding) => {
                self.grounding.view = None
            }
            Some(a @ (Action::Quit | Action::CancelOrQuit)) => return self.on_action(a),
            _ => self.dirty = false,
        }
        Vec::new()
    }

    pub(super) fn grounding_ready(
        &mut self,
        generation: u64,
        result: Result<GroundingPages, String>,
    ) {
        if generation != self.grounding.generation {
            return;
        }
        let keep_page = std::mem::take(&mut self.grounding.keep_page);
        if let Some(view) = self.grounding.view.as_mut() {
            // The evidence itself first: the first page with a matched item (a redraw
            // stays on the page it was asked from, when that page is still there).
            let kept = keep_page.and_then(|no| {
                result
                    .as_ref()
                    .ok()
                    .and_then(|p| p.pages.iter().position(|page| page.page_no == no))
            });
            view.page = kept
                .or_else(|| {
                    result
                        .as_ref()
                        .ok()
                        .and_then(|p| p.pages.iter().position(|page| page.matched > 0))
                })
                .unwrap_or(0);
            view.state = match result {
                Ok(pages) => GroundingState::Ready(pages),
                Err(e) => GroundingState::Failed(e),
            };
        }
    }
}
