//! The visual grounding view: one piece of evidence (a chunk) with its items outlined on
//! the page rasters, page by page through the pages that have boxes. `V` opens it for
//! the selected citation (conversation), ledger chunk, capsule entry (inspector) or page
//! image; `←`/`→` page; `Esc`,
//! `q` or `V` close. The pages are drawn and encoded off the UI task
//! (`Effect::LoadGrounding`, answered by `Msg::GroundingReady`).

use crossterm::event::KeyEvent;
use ratatui::layout::Rect;
use ratatui_image::protocol::Protocol;

use crate::host::transcript::Evidence;
use crate::tui::keymap::Action;

use super::{App, Effect, Pane};

/// How a grounding page is fitted to the view (`z` cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Zoom {
    /// The whole page in the view.
    #[default]
    Page,
    /// The page's width across the view, scrolled down by quarter views.
    Width,
    /// One raster pixel per screen pixel, from the page's top left, scrolled likewise.
    Actual,
}

impl Zoom {
    pub fn next(self) -> Zoom {
        match self {
            Zoom::Page => Zoom::Width,
            Zoom::Width => Zoom::Actual,
            Zoom::Actual => Zoom::Page,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Zoom::Page => "fit page",
            Zoom::Width => "fit width",
            Zoom::Actual => "100 %",
        }
    }
}

/// The part of an `img` (width, height) raster shown at `zoom` in a view of `cells`
/// whose cells are `font` pixels, `step` quarter views down: `(x, y, w, h)` in raster
/// pixels, and whether it reaches the raster's bottom.
pub fn zoom_window(
    img: (u32, u32),
    cells: (u16, u16),
    font: (u16, u16),
    zoom: Zoom,
    step: u32,
) -> ((u32, u32, u32, u32), bool) {
    let (iw, ih) = (img.0.max(1), img.1.max(1));
    let view = (
        (cells.0 as u32 * font.0.max(1) as u32).max(1),
        (cells.1 as u32 * font.1.max(1) as u32).max(1),
    );
    let (w, h) = match zoom {
        Zoom::Page => return ((0, 0, iw, ih), true),
        Zoom::Width => (
            iw,
            ((view.1 as u64 * iw as u64 / view.0 as u64) as u32).clamp(1, ih),
        ),
        Zoom::Actual => (view.0.min(iw), view.1.min(ih)),
    };
    let y = (step * (h / 4).max(1)).min(ih - h);
    ((0, y, w, h), y + h >= ih)
}

/// One outlined page, encoded for the terminal (whole, fitted to the view), with its
/// outlined raster for the other zooms.
pub struct GroundingPage {
    pub page_no: i64,
    pub matched: usize,
    pub context: usize,
    pub protocol: Box<Protocol>,
    pub image: std::sync::Arc<image::RgbaImage>,
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
    pub target: Evidence,
    pub state: GroundingState,
    /// Index into the ready pages.
    pub page: usize,
    /// Cells the pages were encoded for.
    pub size: (u16, u16),
    /// The context's outlines are drawn (`x` toggles them).
    pub context: bool,
    /// When the pages were asked for (the loading line counts from it).
    pub started: std::time::Instant,
    /// How the page is fitted (`z` cycles), and how many quarter views it is scrolled.
    pub zoom: Zoom,
    pub step: u32,
    /// The page drawn at the zoom, once drawn.
    pub zoomed: Option<ZoomedPage>,
}

/// A grounding page drawn at a zoom.
pub struct ZoomedPage {
    /// (page index, zoom, step).
    pub at: (usize, Zoom, u32),
    pub drawn: Box<Protocol>,
    /// The view reaches the page's bottom.
    pub at_end: bool,
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
    pub fn open_grounding(&mut self, target: Evidence) -> Vec<Effect> {
        self.popup = None;
        self.grounding.keep_page = None;
        self.grounding.view = Some(GroundingView {
            target,
            state: GroundingState::Loading,
            page: 0,
            size: (0, 0),
            context: true,
            started: std::time::Instant::now(),
            zoom: Zoom::Page,
            step: 0,
            zoomed: None,
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
        view.zoomed = None;
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
    pub fn selected_evidence(&self) -> Option<Evidence> {
        match self.focus {
            Pane::Conversation | Pane::Input => {
                let (t, c) = self.conversation.selected_citation?;
                let cit = self.transcript.turns.get(t)?.citations.get(c)?;
                Some(cit.evidence.clone())
            }
            Pane::Ledger if self.ledger.in_chunks => {
                let (c, _) = self.ledger_chunks().get(self.ledger.chunk).cloned()?;
                Some(c.evidence.clone())
            }
            // The chunk as the session's citations or searches recorded it; the capsule's
            // own words only for one they do not hold.
            Pane::Inspector => self.selected_capsule_entry().map(|e| {
                self.evidence_of(&e.chunk_id).unwrap_or_else(|| Evidence {
                    source: e.document(),
                    chunk_id: e.chunk_id,
                    ..Evidence::default()
                })
            }),
            Pane::Images => self.images.target.clone(),
            _ => None,
        }
    }

    /// A chunk the session cited or retrieved, as its citation (else its search)
    /// recorded it.
    pub fn evidence_of(&self, chunk_id: &str) -> Option<Evidence> {
        self.transcript
            .turns
            .iter()
            .flat_map(|t| t.citations.iter())
            .map(|c| &c.evidence)
            .chain(
                self.transcript
                    .ledger
                    .iter()
                    .flat_map(|r| r.cited.iter().chain(r.uncited.iter()))
                    .map(|c| &c.evidence),
            )
            .find(|e| e.chunk_id == chunk_id)
            .cloned()
    }

    /// The collection a chunk the session cited or retrieved came from (as its citation
    /// or search recorded it), when several are open.
    pub fn collection_of(&self, chunk_id: &str) -> Option<String> {
        self.evidence_of(chunk_id).and_then(|e| e.collection)
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
        let zoomed = view.zoom != Zoom::Page;
        let at_end = view
            .zoomed
            .as_ref()
            .is_some_and(|z| z.at == (view.page, view.zoom, view.step) && z.at_end);
        match action {
            // Zoomed in, up and down scroll the page by a quarter of the view.
            Some(Action::Up) if zoomed => {
                view.step = view.step.saturating_sub(1);
                return self.zoom_effect();
            }
            Some(Action::Down) if zoomed => {
                if at_end {
                    self.notice = Some("the bottom of the page".into());
                } else {
                    view.step += 1;
                    return self.zoom_effect();
                }
            }
            Some(Action::Zoom) => {
                view.zoom = view.zoom.next();
                view.step = 0;
                self.notice = Some(format!("zoom: {}", view.zoom.label()));
                return self.zoom_effect();
            }
            Some(Action::Left | Action::Up | Action::PageUp) => {
                view.page = view.page.saturating_sub(1);
                view.step = 0;
                return self.zoom_effect();
            }
            Some(Action::Right | Action::Down | Action::PageDown) if view.page + 1 < n => {
                view.page += 1;
                view.step = 0;
                return self.zoom_effect();
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

    /// Asks for the page shown to be drawn at the view's zoom, unless it is fitted whole
    /// (drawn with the pages) or already drawn so.
    pub(super) fn zoom_effect(&mut self) -> Vec<Effect> {
        let generation = self.grounding.generation;
        let Some(view) = self.grounding.view.as_mut() else {
            return Vec::new();
        };
        let GroundingState::Ready(p) = &view.state else {
            return Vec::new();
        };
        let at = (view.page, view.zoom, view.step);
        if view.zoom == Zoom::Page || view.zoomed.as_ref().is_some_and(|z| z.at == at) {
            return Vec::new();
        }
        let Some(page) = p.pages.get(view.page) else {
            return Vec::new();
        };
        vec![Effect::ZoomGrounding {
            generation,
            page: view.page,
            zoom: view.zoom,
            step: view.step,
            image: page.image.clone(),
            size: view.size,
        }]
    }

    pub(super) fn grounding_zoomed(
        &mut self,
        generation: u64,
        at: (usize, Zoom, u32),
        result: Result<(Box<Protocol>, bool), String>,
    ) {
        if generation != self.grounding.generation {
            return;
        }
        let Some(view) = self.grounding.view.as_mut() else {
            return;
        };
        if at != (view.page, view.zoom, view.step) {
            return;
        }
        match result {
            Ok((drawn, at_end)) => view.zoomed = Some(ZoomedPage { at, drawn, at_end }),
            Err(e) => self.error = Some(format!("cannot draw the page at {}: {e}", at.1.label())),
        }
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

#[cfg(test)]
mod zoom_tests {
    use super::*;

    #[test]
    fn zoom_windows_fit_width_or_pixels_and_scroll_by_quarters() {
        // A 600×800 raster in 100×40 cells of 8×16 pixels: an 800×640 pixel view.
        let img = (600, 800);
        let (cells, font) = ((100, 40), (8, 16));
        assert_eq!(
            zoom_window(img, cells, font, Zoom::Page, 3),
            ((0, 0, 600, 800), true)
        );
        // Fit width: 600 raster pixels across 800, so 480 raster rows fill the 640.
        assert_eq!(
            zoom_window(img, cells, font, Zoom::Width, 0),
            ((0, 0, 600, 480), false)
        );
        assert_eq!(
            zoom_window(img, cells, font, Zoom::Width, 1),
            ((0, 120, 600, 480), false)
        );
        // Past the bottom: held at it, and said.
        assert_eq!(
            zoom_window(img, cells, font, Zoom::Width, 9),
            ((0, 320, 600, 480), true)
        );
        // 100 %: the raster's own pixels, as many as the view holds.
        assert_eq!(
            zoom_window(img, cells, font, Zoom::Actual, 0),
            ((0, 0, 600, 640), false)
        );
        assert_eq!(
            zoom_window(img, cells, font, Zoom::Actual, 2),
            ((0, 160, 600, 640), true)
        );
        assert_eq!(Zoom::Page.next().next().next(), Zoom::Page);
    }
}
