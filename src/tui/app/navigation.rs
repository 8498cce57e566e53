//! Inside the panes: focus, scrolling, selection (citations, requests, ledger rows and
//! chunks, images), the mouse, and the evidence whose images the images pane shows.

use std::collections::HashSet;

use crossterm::event::{MouseEvent, MouseEventKind};
use ratatui::layout::Rect;

use crate::tui::keymap::Action;

use super::{App, Effect, ImageMeta, Pane, Popup};
use crate::host::transcript::Evidence;

/// An image's load state.
pub enum ImageState {
    Loading,
    Ready(Box<ratatui_image::protocol::Protocol>),
    Failed(String),
}

pub struct ImageItem {
    pub meta: ImageMeta,
    pub state: ImageState,
}

/// Layout rectangles of the last frame (for mouse hit-testing and image sizes).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Areas {
    pub conversation: Rect,
    pub inspector: Rect,
    pub ledger: Rect,
    pub images: Rect,
    pub input: Rect,
}

#[derive(Debug, Default)]
pub struct ConversationView {
    /// First visible wrapped line; `None` follows the bottom.
    pub scroll: Option<usize>,
    /// Content arrived below while the user was scrolled up.
    pub new_below: bool,
    pub collapsed: HashSet<u64>,
    /// Selected citation: (question, index in its citations).
    pub selected_citation: Option<(usize, usize)>,
    /// The text `/` looks for, once entered.
    pub find: Option<String>,
    /// The wrapped line of the match last gone to.
    pub find_line: Option<usize>,
}

#[derive(Debug, Default)]
pub struct InspectorView {
    /// Index into `App::requests()`; `None` means the newest.
    pub selected: Option<usize>,
    pub diff: bool,
    /// Show the instructions in full.
    pub instructions: bool,
    pub scroll: usize,
    /// The selected entry of the request's capsule (index into its entries).
    pub entry: Option<usize>,
}

#[derive(Debug, Default)]
pub struct LedgerView {
    pub selected: usize,
    /// In the chunk list of the selected row.
    pub in_chunks: bool,
    pub chunk: usize,
    pub violations_only: bool,
}

#[derive(Default)]
pub struct ImagesView {
    pub generation: u64,
    /// The target's images have been listed (maybe none).
    pub listed: bool,
    pub target: Option<Evidence>,
    pub items: Vec<ImageItem>,
    pub selected: usize,
    /// The size images were last made for.
    pub size: (u16, u16),
}

impl App {
    pub(super) fn on_nav(&mut self, action: Action) -> Vec<Effect> {
        match self.focus {
            Pane::Conversation => self.nav_conversation(action),
            Pane::Inspector => self.nav_inspector(action),
            Pane::Ledger => self.nav_ledger(action),
            Pane::Images => {
                let n = self.images.items.len();
                match action {
                    Action::Up | Action::Left if self.images.selected > 0 => {
                        self.images.selected -= 1
                    }
                    Action::Down | Action::Right if self.images.selected + 1 < n => {
                        self.images.selected += 1
                    }
                    Action::Top => self.images.selected = 0,
                    Action::Bottom => self.images.selected = n.saturating_sub(1),
                    _ => {}
                }
                Vec::new()
            }
            Pane::Input => Vec::new(),
        }
    }

    /// Lines the conversation pane shows at once.
    fn page(&self, area: Rect) -> usize {
        (area.height.saturating_sub(2) as usize).max(1)
    }

    fn nav_conversation(&mut self, action: Action) -> Vec<Effect> {
        let page = self.page(self.areas.conversation);
        let total = crate::tui::view::conversation::line_count(self, self.areas.conversation.width);
        let max_top = total.saturating_sub(page);
        let top = self.conversation.scroll.unwrap_or(max_top);
        let set = |app: &mut App, t: usize| {
            if t >= max_top {
                app.conversation.scroll = None;
                app.conversation.new_below = false;
            } else {
                app.conversation.scroll = Some(t);
            }
        };
        match action {
            Action::Up => set(self, top.saturating_sub(1)),
            Action::Down => set(self, top + 1),
            Action::PageUp => set(self, top.saturating_sub(page)),
            Action::PageDown => set(self, top + page),
            Action::Top => set(self, 0),
            Action::Bottom => set(self, usize::MAX),
            Action::Left | Action::Right => return self.step_citation(action == Action::Right),
            Action::PrevQuestion | Action::NextQuestion => {
                let width = self.areas.conversation.width;
                let lines = crate::tui::view::conversation::question_lines(self, width);
                let target = if action == Action::NextQuestion {
                    // At the bottom every question below the top is already in view.
                    lines.into_iter().find(|&l| l > top && top < max_top)
                } else {
                    lines.into_iter().rev().find(|&l| l < top)
                };
                match target {
                    Some(l) => set(self, l),
                    None if action == Action::NextQuestion => {
                        self.notice = Some("no question below".into())
                    }
                    None => self.notice = Some("no question above".into()),
                }
            }
            Action::Find => {
                self.popup = Some(Popup::Find {
                    query: self.conversation.find.clone().unwrap_or_default(),
                });
            }
            Action::NextMatch | Action::PrevMatch => self.step_find(action == Action::NextMatch),
            Action::Copy => return self.copy_in_view(top, page),
            Action::MarkAnswer => {
                let turn = match self.conversation.selected_citation {
                    Some((t, _)) => Some(t),
                    None => self.turn_in_view(top, page),
                };
                return self.open_mark(turn);
            }
            // Enter on a selected source: the cited chunk whole, every field.
            Action::Select if self.conversation.selected_citation.is_some() => {
                let Some(c) = self
                    .conversation
                    .selected_citation
                    .and_then(|(t, c)| self.transcript.turns.get(t)?.citations.get(c))
                else {
                    return Vec::new();
                };
                let chunk_id = c.evidence.chunk_id.clone();
                // Below the chunk: the context the model saw, the chunk marked inside it.
                let span = c.passage.as_ref().and_then(|p| p.span_in(&c.content));
                self.popup = Some(Popup::ChunkDetail {
                    chunk_id: chunk_id.clone(),
                    text: None,
                    scroll: 0,
                    context: Some((c.content.clone(), span)),
                });
                return vec![Effect::LoadChunk(chunk_id)];
            }
            Action::Select | Action::ToggleSources => {
                let q = self
                    .conversation
                    .selected_citation
                    .and_then(|(t, _)| self.transcript.turns.get(t))
                    .or(self.transcript.turns.last())
                    .map(|t| t.question);
                if let Some(q) = q
                    && !self.conversation.collapsed.remove(&q)
                {
                    self.conversation.collapsed.insert(q);
                }
                self.version += 1;
            }
            _ => {}
        }
        Vec::new()
    }

    fn all_citations(&self) -> Vec<(usize, usize)> {
        self.transcript
            .turns
            .iter()
            .enumerate()
            .flat_map(|(t, turn)| (0..turn.citations.len()).map(move |c| (t, c)))
            .collect()
    }

    fn step_citation(&mut self, forward: bool) -> Vec<Effect> {
        let all = self.all_citations();
        if all.is_empty() {
            return Vec::new();
        }
        let pos = self
            .conversation
            .selected_citation
            .and_then(|s| all.iter().position(|&x| x == s));
        let next = match (pos, forward) {
            (None, _) => all.len() - 1,
            (Some(p), true) => (p + 1).min(all.len() - 1),
            (Some(p), false) => p.saturating_sub(1),
        };
        self.conversation.selected_citation = Some(all[next]);
        self.version += 1;
        self.reveal_selected_source();
        let (t, c) = all[next];
        let target = self.transcript.turns[t].citations[c].evidence.clone();
        self.set_image_target(target)
    }

    /// Goes to the next (or previous) wrapped line holding the conversation's find text,
    /// round past the end, and puts it a third of the way down the pane.
    pub(super) fn step_find(&mut self, forward: bool) {
        let Some(needle) = self.conversation.find.clone() else {
            self.notice = Some(format!(
                "nothing to find yet: {} asks for the text",
                self.keymap.hint(Action::Find)
            ));
            return;
        };
        let area = self.areas.conversation;
        let lines = crate::tui::view::conversation::find_lines(self, area.width, &needle);
        if lines.is_empty() {
            self.conversation.find_line = None;
            self.notice = Some(format!("no line of the conversation holds \"{needle}\""));
            return;
        }
        let page = self.page(area);
        let total = crate::tui::view::conversation::line_count(self, area.width);
        let max_top = total.saturating_sub(page);
        let top = self.conversation.scroll.unwrap_or(max_top).min(max_top);
        // From the match last gone to; the first search starts from the top of the view.
        let from = self.conversation.find_line;
        let next = match (from, forward) {
            (None, _) => lines.iter().copied().find(|&l| l >= top),
            (Some(c), true) => lines.iter().copied().find(|&l| l > c),
            (Some(c), false) => lines.iter().rev().copied().find(|&l| l < c),
        };
        let wrapped = next.is_none() && from.is_some();
        let line = next.unwrap_or(if forward {
            lines[0]
        } else {
            lines[lines.len() - 1]
        });
        self.conversation.find_line = Some(line);
        let new_top = line.saturating_sub(page / 3);
        self.conversation.scroll = if new_top >= max_top {
            None
        } else {
            Some(new_top)
        };
        let k = lines.iter().position(|&l| l == line).unwrap_or(0) + 1;
        self.notice = Some(format!(
            "\"{needle}\": line {k} of {}{}",
            lines.len(),
            if wrapped { " (from the other end)" } else { "" }
        ));
    }

    /// The answered question in view: the one whose heading is the last at or above a
    /// third of the way down the conversation.
    fn turn_in_view(&self, top: usize, page: usize) -> Option<usize> {
        let width = self.areas.conversation.width;
        let lines = crate::tui::view::conversation::question_lines(self, width);
        let k = lines
            .iter()
            .rposition(|&l| l <= top + page / 3)
            .unwrap_or(0);
        (k < self.transcript.turns.len()).then_some(k)
    }

    /// Copies the selected source with its reference, else the answer of the question in
    /// view with its sources' references, to the clipboard through the terminal (OSC 52).
    fn copy_in_view(&mut self, top: usize, page: usize) -> Vec<Effect> {
        use crate::host::transcript::{clip_answer, clip_source};
        let selected = self
            .conversation
            .selected_citation
            .and_then(|(t, c)| self.transcript.turns.get(t)?.citations.get(c));
        let (what, text) = if let Some(c) = selected {
            (format!("source [{}]", c.number), clip_source(c))
        } else {
            let Some(k) = self.turn_in_view(top, page) else {
                self.notice = Some("nothing to copy: no answered question".into());
                return Vec::new();
            };
            let turn = &self.transcript.turns[k];
            (
                format!("the answer to question {}", k + 1),
                clip_answer(turn),
            )
        };
        self.notice = Some(format!(
            "copied {what} ({} characters) to the clipboard through the terminal (OSC 52)",
            text.chars().count()
        ));
        vec![Effect::Copy(text)]
    }

    /// Scrolls the conversation so the selected source is in view (a third from the top),
    /// when it is not.
    fn reveal_selected_source(&mut self) {
        let area = self.areas.conversation;
        let height = area.height.saturating_sub(2) as usize;
        if height == 0 {
            return;
        }
        let Some(line) = crate::tui::view::conversation::selected_source_line(self, area.width)
        else {
            return;
        };
        let total = crate::tui::view::conversation::line_count(self, area.width);
        let max_top = total.saturating_sub(height);
        let top = self.conversation.scroll.unwrap_or(max_top).min(max_top);
        if line < top || line >= top + height {
            self.conversation.scroll = Some(line.saturating_sub(height / 3).min(max_top));
        }
    }

    pub(super) fn select_latest_citation(&mut self) -> Vec<Effect> {
        self.conversation.selected_citation = None;
        if self.all_citations().is_empty() {
            return Vec::new();
        }
        self.step_citation(true)
    }

    fn nav_inspector(&mut self, action: Action) -> Vec<Effect> {
        let n = self.request_count();
        let cur = self.selected_request().unwrap_or(0);
        match action {
            Action::PrevRequest | Action::Left => {
                self.inspector.selected = Some(cur.saturating_sub(1));
                self.inspector.scroll = 0;
                self.inspector.entry = None;
            }
            Action::NextRequest | Action::Right => {
                self.inspector.selected = if cur + 1 >= n { None } else { Some(cur + 1) };
                self.inspector.scroll = 0;
                self.inspector.entry = None;
            }
            Action::NextCapsuleEntry | Action::PrevCapsuleEntry => {
                return self.step_capsule_entry(action == Action::NextCapsuleEntry);
            }
            Action::Select if self.inspector.entry.is_some() => {
                // The selected capsule entry's chunk, every field, as the ledger shows it.
                let Some(e) = self.selected_capsule_entry() else {
                    return Vec::new();
                };
                self.popup = Some(Popup::ChunkDetail {
                    chunk_id: e.chunk_id.clone(),
                    text: None,
                    scroll: 0,
                    context: None,
                });
                return vec![Effect::LoadChunk(e.chunk_id)];
            }
            Action::Back => self.inspector.entry = None,
            Action::ToggleDiff | Action::Select => {
                self.inspector.diff = !self.inspector.diff;
                self.inspector.scroll = 0;
                self.scroll_to_entry();
            }
            Action::ToggleInstructions => {
                self.inspector.instructions = !self.inspector.instructions;
            }
            Action::Up => self.inspector.scroll = self.inspector.scroll.saturating_sub(1),
            Action::Down => self.inspector.scroll += 1,
            Action::PageUp => {
                self.inspector.scroll = self
                    .inspector
                    .scroll
                    .saturating_sub(self.page(self.areas.inspector))
            }
            Action::PageDown => self.inspector.scroll += self.page(self.areas.inspector),
            Action::Top => self.inspector.scroll = 0,
            Action::Bottom => self.inspector.scroll = usize::MAX / 2,
            _ => {}
        }
        Vec::new()
    }

    /// `c` / `C`: the next or previous entry of the request's capsule; the inspector
    /// scrolls to it and the images pane shows its evidence.
    fn step_capsule_entry(&mut self, forward: bool) -> Vec<Effect> {
        let entries = self.capsule_entries();
        if entries.is_empty() {
            self.notice = Some("this request sent no capsule of cited evidence".into());
            return Vec::new();
        }
        let last = entries.len() - 1;
        let next = match (self.inspector.entry, forward) {
            (None, true) => 0,
            (None, false) => last,
            (Some(k), true) => (k + 1).min(last),
            (Some(k), false) => k.saturating_sub(1),
        };
        self.inspector.entry = Some(next);
        self.notice = None;
        self.scroll_to_entry();
        let chunk_id = entries[next].chunk_id.clone();
        let cited = self
            .transcript
            .turns
            .iter()
            .flat_map(|t| t.citations.iter())
            .find(|c| c.evidence.chunk_id == chunk_id);
        match cited {
            Some(c) => {
                let target = c.evidence.clone();
                self.set_image_target(target)
            }
            None => Vec::new(),
        }
    }

    /// Scrolls the inspector so that the selected capsule entry's first line is near the
    /// top (one line above it shown).
    fn scroll_to_entry(&mut self) {
        if self.inspector.entry.is_none() {
            return;
        }
        let width = self.areas.inspector.width.saturating_sub(2).max(1);
        if let Some(at) = crate::tui::view::inspector::selected_entry_line(self, width) {
            self.inspector.scroll = at.saturating_sub(1);
        }
    }

    /// The chunks listed for the selected ledger row: cited, then retrieved-not-cited.
    pub fn ledger_chunks(&self) -> Vec<(&crate::host::transcript::LedgerChunk, bool)> {
        let rows = self.visible_ledger();
        let Some(&i) = rows.get(self.ledger.selected) else {
            return Vec::new();
        };
        let row = &self.transcript.ledger[i];
        row.cited
            .iter()
            .map(|c| (c, true))
            .chain(row.uncited.iter().map(|c| (c, false)))
            .collect()
    }

    fn nav_ledger(&mut self, action: Action) -> Vec<Effect> {
        if action == Action::MarkAnswer {
            let row = self.visible_ledger().get(self.ledger.selected).copied();
            return self.open_mark(row);
        }
        let rows = self.visible_ledger().len();
        let chunks = self.ledger_chunks().len();
        if self.ledger.in_chunks {
            match action {
                Action::Up => self.ledger.chunk = self.ledger.chunk.saturating_sub(1),
                Action::Down if self.ledger.chunk + 1 < chunks => self.ledger.chunk += 1,
                Action::Top => self.ledger.chunk = 0,
                Action::Bottom => self.ledger.chunk = chunks.saturating_sub(1),
                Action::Left | Action::Back => {
                    self.ledger.in_chunks = false;
                    return Vec::new();
                }
                Action::Select => {
                    let Some((c, _)) = self.ledger_chunks().get(self.ledger.chunk).cloned() else {
                        return Vec::new();
                    };
                    let chunk_id = c.evidence.chunk_id.clone();
                    let mut effects = Vec::new();
                    self.popup = Some(Popup::ChunkDetail {
                        chunk_id: chunk_id.clone(),
                        text: None,
                        scroll: 0,
                        context: None,
                    });
                    effects.push(Effect::LoadChunk(chunk_id));
                    effects.extend(self.target_ledger_chunk());
                    return effects;
                }
                Action::ViolationsOnly => return self.toggle_violations(),
                _ => {}
            }
            return self.target_ledger_chunk();
        }
        match action {
            Action::Up => self.ledger.selected = self.ledger.selected.saturating_sub(1),
            Action::Down if self.ledger.selected + 1 < rows => self.ledger.selected += 1,
            Action::Top => self.ledger.selected = 0,
            Action::Bottom => self.ledger.selected = rows.saturating_sub(1),
            Action::Select | Action::Right if chunks > 0 => {
                self.ledger.in_chunks = true;
                self.ledger.chunk = 0;
                return self.target_ledger_chunk();
            }
            Action::ViolationsOnly => return self.toggle_violations(),
            _ => {}
        }
        self.ledger.chunk = 0;
        Vec::new()
    }

    fn toggle_violations(&mut self) -> Vec<Effect> {
        self.ledger.violations_only = !self.ledger.violations_only;
        self.ledger.selected = 0;
        self.ledger.in_chunks = false;
        self.notice = Some(if self.ledger.violations_only {
            "ledger: questions with a violation only".into()
        } else {
            "ledger: all questions".into()
        });
        Vec::new()
    }

    fn target_ledger_chunk(&mut self) -> Vec<Effect> {
        let Some((c, _)) = self.ledger_chunks().get(self.ledger.chunk).cloned() else {
            return Vec::new();
        };
        if c.evidence.document_id.is_empty() {
            return Vec::new();
        }
        self.set_image_target(c.evidence.clone())
    }

    fn set_image_target(&mut self, target: Evidence) -> Vec<Effect> {
        if self.images.target.as_ref() == Some(&target) {
            return Vec::new();
        }
        self.images.target = Some(target);
        self.images.size = (0, 0);
        self.refresh_images()
    }

    /// (Re)loads the images of the target when the pane's size changed.
    pub(super) fn refresh_images(&mut self) -> Vec<Effect> {
        let Some(target) = self.images.target.clone() else {
            return Vec::new();
        };
        let size = image_cells(self.areas.images);
        if size == self.images.size {
            return Vec::new();
        }
        self.images.size = size;
        self.images.generation += 1;
        self.images.items.clear();
        self.images.listed = false;
        vec![Effect::LoadImages {
            generation: self.images.generation,
            target,
            size,
        }]
    }

    pub(super) fn on_mouse(&mut self, m: MouseEvent) -> Vec<Effect> {
        let inside = |r: Rect| {
            m.column >= r.x && m.column < r.x + r.width && m.row >= r.y && m.row < r.y + r.height
        };
        let pane = [
            (self.areas.conversation, Pane::Conversation),
            (self.areas.inspector, Pane::Inspector),
            (self.areas.ledger, Pane::Ledger),
            (self.areas.images, Pane::Images),
            (self.areas.input, Pane::Input),
        ]
        .into_iter()
        .find(|(r, _)| inside(*r))
        .map(|(_, p)| p);
        let Some(pane) = pane else {
            self.dirty = false;
            return Vec::new();
        };
        match m.kind {
            MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => {
                let prev = self.focus;
                self.focus = pane;
                let action = if m.kind == MouseEventKind::ScrollUp {
                    Action::Up
                } else {
                    Action::Down
                };
                let mut effects = Vec::new();
                for _ in 0..3 {
                    effects.extend(self.on_nav(action));
                }
                self.focus = prev;
                effects
            }
            MouseEventKind::Down(_) => self.focus_pane(pane),
            _ => {
                self.dirty = false;
                Vec::new()
            }
        }
    }

    /// The images of the target were listed (stale generations are dropped).
    pub(super) fn images_listed(&mut self, generation: u64, items: Vec<ImageMeta>) {
        if generation == self.images.generation {
            self.images.listed = true;
            self.images.items = items
                .into_iter()
                .map(|meta| ImageItem {
                    meta,
                    state: ImageState::Loading,
                })
                .collect();
            // The first page where the cited chunk's items were matched (the expanded
            // context's first page is often not it); else the first figure or page.
            self.images.selected = self
                .images
                .items
                .iter()
                .position(|i| i.meta.matched > 0)
                .unwrap_or(0);
        }
    }

    /// One image was decoded and sized (or failed), off the UI task.
    pub(super) fn image_ready(
        &mut self,
        generation: u64,
        index: usize,
        result: Result<Box<ratatui_image::protocol::Protocol>, String>,
    ) {
        if generation == self.images.generation
            && let Some(item) = self.images.items.get_mut(index)
        {
            item.state = match result {
                Ok(p) => ImageState::Ready(p),
                Err(e) => ImageState::Failed(e),
            };
        }
    }
}

/// Rows of the caption list above the picture in the images pane.
pub const IMAGE_LIST_ROWS: u16 = 3;

/// The cells a picture gets in an images pane of `area` (border and caption list off).
pub fn image_cells(area: Rect) -> (u16, u16) {
    (
        area.width.saturating_sub(2).max(10),
        area.height.saturating_sub(2 + IMAGE_LIST_ROWS).max(3),
    )
}
