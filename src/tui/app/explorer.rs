//! The knowledge-base explorer: a full-screen mode over the panes (F6, or the palette).
//! Documents load in batches as the highlight nears the end of what is loaded, filtered
//! by title or URI; the highlighted document's details and chunks load with it; `/`
//! searches the base; `c` shows a chunk exactly as the model receives it; Enter opens a
//! chunk's every field. All store reads are effects (`Effect::Explore`) that the Runtime
//! runs through `host::explore`; their results come back as `Msg::Explored`.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::host::explore::{AgentContext, DOCUMENT_BATCH, DocumentDetail, Searched};
use crate::store::rerank::RerankReport;
use crate::store::{DocumentMeta, SearchResult};
use crate::tui::keymap::Action;

use super::{App, Effect};

/// Load the next batch when the highlight is this close to the end of the loaded list.
pub const LOAD_AHEAD: usize = 10;

/// The explorer's state.
#[derive(Debug, Default)]
pub struct Explorer {
    /// Bumped when the filter changes: batches of an older filter are dropped.
    pub generation: u64,
    /// Title/URI filter of the documents list.
    pub filter: String,
    /// Keys go to the filter box.
    pub editing_filter: bool,
    pub docs: Vec<DocumentMeta>,
    pub docs_loading: bool,
    /// A batch read is running (of this filter or an older one). One at a time: a filter
    /// typed meanwhile is read when it returns, so fast typing queues no scans.
    pub docs_in_flight: bool,
    /// Every document of the filter is loaded.
    pub docs_done: bool,
    pub docs_error: Option<String>,
    /// The highlighted document.
    pub doc: usize,
    /// The document whose details were asked for last, and what came back.
    pub detail_for: Option<String>,
    pub detail: Option<Result<DocumentDetail, String>>,
    /// The highlighted chunk of the detail's document.
    pub chunk: usize,
    /// The chunks list has focus (else the documents list).
    pub in_chunks: bool,
    /// The search result jumped to, highlighted once its document's details arrive;
    /// until then `v` and `c` act on it (a key pressed while the document is read).
    pub pending_chunk: Option<SearchResult>,
    /// The store was asked to read the documents' rows the filter box matches in memory
    /// (once, when the first batch arrived), so that the first key typed finds them read.
    pub filter_warmed: bool,
    pub view: ExplorerView,
    /// The collection browsed when several are open (`C` moves to the next); `None`: the
    /// one database.
    pub collection: Option<String>,
}

/// What the explorer shows.
#[derive(Debug, Default)]
pub enum ExplorerView {
    /// Documents, chunks and the highlighted item's details.
    #[default]
    Main,
    /// Every field of the highlighted chunk.
    Chunk {
        scroll: u16,
    },
    Search(SearchView),
    /// A chunk as the model receives it; `back` is the view to return to.
    Context {
        chunk_id: String,
        context: Option<Result<AgentContext, String>>,
        scroll: u16,
        back: Box<ExplorerView>,
    },
}

/// The search screen.
#[derive(Debug)]
pub struct SearchView {
    pub query: String,
    /// Search the whole base, not only the session's document filter.
    pub whole_base: bool,
    /// The query that was searched last (results belong to it).
    pub searched: Option<String>,
    pub running: bool,
    pub results: Result<Vec<SearchResult>, String>,
    /// What the reranker did to the results, when one is configured.
    pub rerank: Option<RerankReport>,
    pub selected: usize,
    /// Keys go to the results list (else to the query box).
    pub in_results: bool,
}

/// Store reads of the explorer (run by the Runtime through `host::explore`).
#[derive(Debug, Clone, PartialEq)]
pub enum ExploreRequest {
    Documents {
        generation: u64,
        filter: String,
        offset: usize,
    },
    Document(String),
    Search {
        query: String,
        filter: Option<String>,
    },
    Context {
        chunk_id: String,
        rank: usize,
        total: usize,
        score: f64,
    },
    /// Read the documents' rows the title filter matches (nothing comes back but
    /// [`Explored::FilterWarmed`]).
    WarmFilter,
}

/// Their results.
#[derive(Debug)]
pub enum Explored {
    Documents {
        generation: u64,
        offset: usize,
        result: Result<Vec<DocumentMeta>, String>,
    },
    Document {
        id: String,
        result: Result<DocumentDetail, String>,
    },
    Search {
        query: String,
        result: Result<Searched, String>,
    },
    Context {
        chunk_id: String,
        result: Result<AgentContext, String>,
    },
    FilterWarmed,
}

impl Explorer {
    /// The chunks of the shown document (none while loading or after an error).
    pub fn chunks(&self) -> &[SearchResult] {
        match &self.detail {
            Some(Ok(d)) => &d.chunks,
            _ => &[],
        }
    }

    /// The highlighted chunk, when the chunks list has focus.
    pub fn highlighted_chunk(&self) -> Option<&SearchResult> {
        if self.in_chunks {
            self.chunks().get(self.chunk)
        } else {
            None
        }
    }

    /// The chunk a key acts on: the highlighted one, or the search result jumped to
    /// while its document is still being read.
    fn target_chunk(&self) -> Option<&SearchResult> {
        match (&self.pending_chunk, &self.detail) {
            (Some(hit), None)
                if self.in_chunks && hit.document_id.as_deref() == self.detail_for.as_deref() =>
            {
                Some(hit)
            }
            _ => self.highlighted_chunk(),
        }
    }

    /// Starts over with the current filter: the first batch is asked now, or when the
    /// read in flight returns.
    fn first_batch(&mut self) -> Option<Effect> {
        self.generation += 1;
        self.docs.clear();
        self.doc = 0;
        self.docs_done = false;
        self.docs_error = None;
        self.docs_loading = true;
        if self.docs_in_flight {
            return None;
        }
        Some(self.batch_at(0))
    }

    fn batch_at(&mut self, offset: usize) -> Effect {
        self.docs_in_flight = true;
        Effect::Explore(ExploreRequest::Documents {
            generation: self.generation,
            filter: self.filter.clone(),
            offset,
        })
    }

    /// The next batch, when the highlight is near the end of what is loaded.
    fn more(&mut self) -> Option<Effect> {
        if self.docs_loading
            || self.docs_in_flight
            || self.docs_done
            || self.doc + LOAD_AHEAD < self.docs.len()
        {
            return None;
        }
        self.docs_loading = true;
        Some(self.batch_at(self.docs.len()))
    }

    /// Asks for the highlighted document's details when they are not shown yet.
    fn detail_of_highlight(&mut self) -> Option<Effect> {
        let id = self.docs.get(self.doc)?.id.clone();
        if self.detail_for.as_deref() == Some(id.as_str()) {
            return None;
        }
        self.detail_for = Some(id.clone());
        self.detail = None;
        self.chunk = 0;
        Some(Effect::Explore(ExploreRequest::Document(id)))
    }

    /// Moves the highlight of the focused list by `delta` (clamped).
    fn move_by(&mut self, delta: isize) -> Vec<Effect> {
        let step = |i: usize, n: usize| -> usize {
            if n == 0 {
                0
            } else {
                (i as isize + delta).clamp(0, n as isize - 1) as usize
            }
        };
        if self.in_chunks {
            self.chunk = step(self.chunk, self.chunks().len());
            return Vec::new();
        }
        self.doc = step(self.doc, self.docs.len());
        self.detail_of_highlight()
            .into_iter()
            .chain(self.more())
            .collect()
    }
}

impl App {
    /// Opens the explorer (loading the first batch), or closes it.
    pub(super) fn toggle_explorer(&mut self) -> Vec<Effect> {
        if self.explorer.take().is_some() {
            return Vec::new();
        }
        let mut ex = Explorer {
            collection: self.host.collections.first().cloned(),
            ..Explorer::default()
        };
        let first = ex.first_batch();
        self.explorer = Some(ex);
        first.into_iter().collect()
    }

    /// `C`: browse the next open collection (its documents, chunks and search).
    fn next_collection(&mut self) -> Vec<Effect> {
        let names = &self.host.collections;
        let Some(ex) = self.explorer.as_mut() else {
            return Vec::new();
        };
        if names.len() < 2 {
            self.notice = Some("one database is open; --db NAME=PATH opens several".into());
            return Vec::new();
        }
        let at = ex
            .collection
            .as_ref()
            .and_then(|c| names.iter().position(|n| n == c))
            .map_or(0, |i| (i + 1) % names.len());
        ex.collection = Some(names[at].clone());
        ex.filter_warmed = false;
        ex.detail_for = None;
        ex.detail = None;
        ex.chunk = 0;
        ex.in_chunks = false;
        ex.pending_chunk = None;
        ex.first_batch().into_iter().collect()
    }

    pub(super) fn explored(&mut self, msg: Explored) -> Vec<Effect> {
        let Some(ex) = self.explorer.as_mut() else {
            return Vec::new();
        };
        match msg {
            Explored::Documents {
                generation,
                offset,
                result,
            } => {
                ex.docs_in_flight = false;
                if generation != ex.generation {
                    // The filter changed while this was read: read the current one.
                    return vec![ex.batch_at(0)];
                }
                if offset != ex.docs.len() {
                    return Vec::new();
                }
                ex.docs_loading = false;
                let mut warm = None;
                match result {
                    Ok(batch) => {
                        ex.docs_done = batch.len() < DOCUMENT_BATCH;
                        ex.docs.extend(batch);
                        ex.docs_error = None;
                        if !ex.filter_warmed && ex.filter.is_empty() {
                            ex.filter_warmed = true;
                            warm = Some(Effect::Explore(ExploreRequest::WarmFilter));
                        }
                    }
                    Err(e) => {
                        ex.docs_done = true;
                        ex.docs_error = Some(e);
                    }
                }
                if ex.pending_chunk.is_some() {
                    return warm.into_iter().collect();
                }
                ex.detail_of_highlight()
                    .into_iter()
                    .chain(ex.more())
                    .chain(warm)
                    .collect()
            }
            Explored::Document { id, result } => {
                if ex.detail_for.as_deref() != Some(id.as_str()) {
                    return Vec::new();
                }
                if let (Some(want), Ok(d)) = (ex.pending_chunk.take(), &result) {
                    ex.chunk = d
                        .chunks
                        .iter()
                        .position(|c| c.chunk_id.as_deref() == Some(want.id()))
                        .unwrap_or(0);
                    ex.in_chunks = true;
                    if let Some(i) = ex.docs.iter().position(|d| d.id == id) {
                        ex.doc = i;
                    }
                }
                ex.detail = Some(result);
                Vec::new()
            }
            Explored::Search { query, result } => {
                if let ExplorerView::Search(s) = &mut ex.view
                    && s.searched.as_deref() == Some(query.as_str())
                {
                    s.running = false;
                    s.selected = 0;
                    s.in_results = result.as_ref().is_ok_and(|r| !r.results.is_empty());
                    match result {
                        Ok(found) => {
                            s.results = Ok(found.results);
                            s.rerank = found.rerank;
                        }
                        Err(e) => {
                            s.results = Err(e);
                            s.rerank = None;
                        }
                    }
                }
                Vec::new()
            }
            Explored::Context { chunk_id, result } => {
                if let ExplorerView::Context {
                    chunk_id: want,
                    context,
                    ..
                } = &mut ex.view
                    && *want == chunk_id
                {
                    *context = Some(result);
                }
                Vec::new()
            }
            Explored::FilterWarmed => {
                self.dirty = false;
                Vec::new()
            }
        }
    }

    /// A key while the explorer is open (and no popup is).
    pub(super) fn on_explorer_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let chord = key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
            || matches!(key.code, KeyCode::F(_));
        if chord {
            let ctrl_f =
                key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('f');
            if ctrl_f {
                return self.toggle_search_scope();
            }
            // The chords that work everywhere: quit, cancel, palette, help, theme, F6.
            return match self.keymap.action_for(&key, true) {
                Some(
                    a @ (Action::Quit
                    | Action::CancelOrQuit
                    | Action::Palette
                    | Action::Help
                    | Action::ToggleTheme
                    | Action::Explorer),
                ) => self.on_action(a),
                _ => {
                    self.dirty = false;
                    Vec::new()
                }
            };
        }
        let filter = self.document_filter();
        if matches!(
            self.explorer.as_ref().map(|e| &e.view),
            Some(ExplorerView::Main)
        ) {
            return self.explorer_main_key(key);
        }
        let Some(ex) = self.explorer.as_mut() else {
            return Vec::new();
        };
        match &mut ex.view {
            ExplorerView::Main => Vec::new(),
            ExplorerView::Chunk { scroll } => {
                match key.code {
                    KeyCode::Esc | KeyCode::Enter | KeyCode::Backspace | KeyCode::Char('q') => {
                        ex.view = ExplorerView::Main
                    }
                    KeyCode::Char('c') => return self.open_context(),
                    KeyCode::Char('v') => return self.open_explorer_grounding(),
                    code => scroll_key(scroll, code),
                }
                Vec::new()
            }
            ExplorerView::Context { scroll, back, .. } => {
                match key.code {
                    KeyCode::Esc | KeyCode::Backspace | KeyCode::Char('c') | KeyCode::Char('q') => {
                        ex.view = std::mem::take(back.as_mut())
                    }
                    code => scroll_key(scroll, code),
                }
                Vec::new()
            }
            ExplorerView::Search(s) => {
                if !s.in_results {
                    match key.code {
                        KeyCode::Esc => ex.view = ExplorerView::Main,
                        KeyCode::Enter => return self.run_search(filter),
                        KeyCode::Tab | KeyCode::Down => {
                            s.in_results = s.results.as_ref().is_ok_and(|r| !r.is_empty())
                        }
                        KeyCode::Backspace => {
                            s.query.pop();
                        }
                        KeyCode::Char(c) => s.query.push(c),
                        _ => {}
                    }
                    return Vec::new();
                }
                let n = s.results.as_ref().map_or(0, |r| r.len());
                match key.code {
                    KeyCode::Esc | KeyCode::Char('q') => ex.view = ExplorerView::Main,
                    KeyCode::Char('/') | KeyCode::Tab => s.in_results = false,
                    KeyCode::Up | KeyCode::Char('k') => s.selected = s.selected.saturating_sub(1),
                    KeyCode::Down | KeyCode::Char('j') => {
                        s.selected = (s.selected + 1).min(n.saturating_sub(1))
                    }
                    KeyCode::Home | KeyCode::Char('g') => s.selected = 0,
                    KeyCode::End | KeyCode::Char('G') => s.selected = n.saturating_sub(1),
                    KeyCode::Enter => return self.jump_to_result(),
                    KeyCode::Char('c') => return self.open_context(),
                    KeyCode::Char('v') => return self.open_explorer_grounding(),
                    _ => {}
                }
                Vec::new()
            }
        }
    }

    fn explorer_main_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let Some(ex) = self.explorer.as_mut() else {
            return Vec::new();
        };
        if ex.editing_filter {
            match key.code {
                KeyCode::Esc | KeyCode::Enter | KeyCode::Down | KeyCode::Tab => {
                    ex.editing_filter = false
                }
                KeyCode::Backspace if ex.filter.pop().is_some() => {
                    return ex.first_batch().into_iter().collect();
                }
                KeyCode::Char(c) => {
                    ex.filter.push(c);
                    return ex.first_batch().into_iter().collect();
                }
                _ => {}
            }
            return Vec::new();
        }
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => {
                if ex.in_chunks {
                    ex.in_chunks = false;
                } else {
                    self.explorer = None;
                }
                Vec::new()
            }
            KeyCode::Up | KeyCode::Char('k') => ex.move_by(-1),
            KeyCode::Down | KeyCode::Char('j') => ex.move_by(1),
            KeyCode::PageUp => ex.move_by(-10),
            KeyCode::PageDown => ex.move_by(10),
            KeyCode::Home | KeyCode::Char('g') => ex.move_by(isize::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => ex.move_by(isize::MAX / 2),
            KeyCode::Tab | KeyCode::BackTab => {
                ex.in_chunks = !ex.in_chunks && !ex.chunks().is_empty();
                Vec::new()
            }
            KeyCode::Right | KeyCode::Char('l') => {
                ex.in_chunks = !ex.chunks().is_empty();
                Vec::new()
            }
            KeyCode::Left | KeyCode::Char('h') => {
                ex.in_chunks = false;
                Vec::new()
            }
            KeyCode::Enter => {
                if ex.in_chunks {
                    ex.view = ExplorerView::Chunk { scroll: 0 };
                } else {
                    ex.in_chunks = !ex.chunks().is_empty();
                }
                Vec::new()
            }
            KeyCode::Char('f') => {
                ex.editing_filter = true;
                ex.in_chunks = false;
                Vec::new()
            }
            KeyCode::Char('/') => {
                ex.view = ExplorerView::Search(SearchView {
                    query: String::new(),
                    whole_base: false,
                    searched: None,
                    running: false,
                    results: Ok(Vec::new()),
                    rerank: None,
                    selected: 0,
                    in_results: false,
                });
                Vec::new()
            }
            KeyCode::Char('c') => self.open_context(),
            KeyCode::Char('v') => self.open_explorer_grounding(),
            KeyCode::Char('I') => self.on_action(Action::DatabaseInfo),
            KeyCode::Char('C') => self.next_collection(),
            _ => {
                self.dirty = false;
                Vec::new()
            }
        }
    }

    /// Searches the query of the search screen (the session's document filter unless the
    /// whole base is chosen or no filter is set).
    fn run_search(&mut self, filter: Option<String>) -> Vec<Effect> {
        let Some(ExplorerView::Search(s)) = self.explorer.as_mut().map(|e| &mut e.view) else {
            return Vec::new();
        };
        let query = s.query.trim().to_string();
        if query.is_empty() {
            return Vec::new();
        }
        s.searched = Some(query.clone());
        s.running = true;
        s.results = Ok(Vec::new());
        let filter = if s.whole_base { None } else { filter };
        vec![Effect::Explore(ExploreRequest::Search { query, filter })]
    }

    fn toggle_search_scope(&mut self) -> Vec<Effect> {
        let filter = self.document_filter();
        let Some(ExplorerView::Search(s)) = self.explorer.as_mut().map(|e| &mut e.view) else {
            return Vec::new();
        };
        s.whole_base = !s.whole_base;
        if s.searched.is_some() {
            return self.run_search(filter);
        }
        Vec::new()
    }

    /// Enter on a search result: back to the documents with its chunk highlighted.
    fn jump_to_result(&mut self) -> Vec<Effect> {
        let Some(ex) = self.explorer.as_mut() else {
            return Vec::new();
        };
        let ExplorerView::Search(s) = &ex.view else {
            return Vec::new();
        };
        let Some(r) = s.results.as_ref().ok().and_then(|r| r.get(s.selected)) else {
            return Vec::new();
        };
        let (Some(doc), Some(chunk)) = (r.document_id.clone(), r.chunk_id.clone()) else {
            return Vec::new();
        };
        let hit = r.clone();
        ex.view = ExplorerView::Main;
        ex.editing_filter = false;
        ex.in_chunks = true;
        if ex.detail_for.as_deref() == Some(doc.as_str())
            && let Some(Ok(d)) = &ex.detail
        {
            ex.chunk = d
                .chunks
                .iter()
                .position(|c| c.chunk_id.as_deref() == Some(chunk.as_str()))
                .unwrap_or(0);
            return Vec::new();
        }
        if let Some(i) = ex.docs.iter().position(|d| d.id == doc) {
            ex.doc = i;
        }
        ex.pending_chunk = Some(hit);
        ex.detail_for = Some(doc.clone());
        ex.detail = None;
        vec![Effect::Explore(ExploreRequest::Document(doc))]
    }

    /// `c`: the agent context of the highlighted chunk or search result.
    fn open_context(&mut self) -> Vec<Effect> {
        let Some(ex) = self.explorer.as_mut() else {
            return Vec::new();
        };
        let target = match &ex.view {
            ExplorerView::Search(s) => s.results.as_ref().ok().and_then(|r| {
                r.get(s.selected)
                    .map(|hit| (hit.id().to_string(), s.selected + 1, r.len(), hit.score))
            }),
            _ => ex.target_chunk().map(|c| (c.id().to_string(), 1, 1, 0.0)),
        };
        let Some((chunk_id, rank, total, score)) = target.filter(|t| !t.0.is_empty()) else {
            self.notice = Some("highlight a chunk first (Tab moves to the chunks)".into());
            return Vec::new();
        };
        let back = std::mem::take(&mut ex.view);
        ex.view = ExplorerView::Context {
            chunk_id: chunk_id.clone(),
            context: None,
            scroll: 0,
            back: Box::new(back),
        };
        vec![Effect::Explore(ExploreRequest::Context {
            chunk_id,
            rank,
            total,
            score,
        })]
    }

    /// `v`: visual grounding of the highlighted chunk or search result (the page rasters
    /// with its items outlined, and its expansion context).
    fn open_explorer_grounding(&mut self) -> Vec<Effect> {
        let Some(ex) = self.explorer.as_ref() else {
            return Vec::new();
        };
        let hit = match &ex.view {
            ExplorerView::Search(s) => s.results.as_ref().ok().and_then(|r| r.get(s.selected)),
            _ => ex.target_chunk(),
        };
        let Some(hit) = hit.filter(|h| !h.id().is_empty()) else {
            self.notice = Some("highlight a chunk first (Tab moves to the chunks)".into());
            return Vec::new();
        };
        let target = crate::host::transcript::Evidence::found("", hit);
        self.open_grounding(target)
    }
}

fn scroll_key(scroll: &mut u16, code: KeyCode) {
    match code {
        KeyCode::Up | KeyCode::Char('k') => *scroll = scroll.saturating_sub(1),
        KeyCode::Down | KeyCode::Char('j') => *scroll = scroll.saturating_add(1),
        KeyCode::PageUp => *scroll = scroll.saturating_sub(10),
        KeyCode::PageDown | KeyCode::Char(' ') => *scroll = scroll.saturating_add(10),
        KeyCode::Home | KeyCode::Char('g') => *scroll = 0,
        _ => {}
    }
}
