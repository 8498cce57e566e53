//! Reviewing an experiment (`groundwork open DIR`): the table of questions × arms
//! ([`ReviewState`]), its filters, the marks and notes given on it, and opening a cell's
//! session read-only in the usual panes. Keys here come before the keymap's; marks are
//! saved by the Runtime (`Effect::SaveMark`) and shown when `Msg::MarkSaved` says so.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui_textarea::TextArea;

use crate::eval::results::Review;
use crate::eval::review::{Cell, Filter, ReviewTable};

use super::{App, Effect, Msg, Pane};

/// The marks, with their key and how the table shows them.
pub const MARK_KEYS: [(char, &str, &str); 4] = [
    ('s', "supported", "✓sup"),
    ('u', "unsupported", "?uns"),
    ('i', "invented", "✗inv"),
    ('w', "wrong", "✗wrg"),
];

/// The review of an experiment folder.
pub struct ReviewState {
    pub table: ReviewTable,
    pub filter: Filter,
    /// The labels of the questions, in order (`f` cycles through them).
    pub labels: Vec<String>,
    /// The selected row, among the rows the filter keeps.
    pub row: usize,
    /// The selected arm (column).
    pub arm: usize,
    /// The first row shown (kept by the view so the selection stays visible).
    pub scroll: std::cell::Cell<usize>,
    /// The table is shown (otherwise the opened cell's session is).
    pub showing_table: bool,
    /// The cell (row in `table.rows`, arm) whose session is open.
    pub opened: Option<(usize, usize)>,
    /// A session is being loaded for the selected cell.
    opening: Option<(usize, usize)>,
    /// The note being typed for the current cell.
    pub note: Option<TextArea<'static>>,
}

impl ReviewState {
    pub fn new(table: ReviewTable) -> Self {
        let mut labels: Vec<String> = Vec::new();
        for l in table.rows.iter().filter_map(|r| r.label.as_ref()) {
            if !labels.contains(l) {
                labels.push(l.clone());
            }
        }
        ReviewState {
            table,
            filter: Filter::default(),
            labels,
            row: 0,
            arm: 0,
            scroll: std::cell::Cell::new(0),
            showing_table: true,
            opened: None,
            opening: None,
            note: None,
        }
    }

    /// The rows the filter keeps (indices into `table.rows`).
    pub fn visible(&self) -> Vec<usize> {
        self.table.filtered(&self.filter).map(|(i, _)| i).collect()
    }

    /// The selected cell (row in `table.rows`, arm), if the filter keeps any row.
    pub fn selected(&self) -> Option<(usize, usize)> {
        self.visible().get(self.row).map(|&r| (r, self.arm))
    }

    /// The cell marks and notes apply to: the opened one, or the selected one.
    pub fn current(&self) -> Option<(usize, usize)> {
        if self.showing_table {
            self.selected()
        } else {
            self.opened
        }
    }

    pub fn cell(&self, (row, arm): (usize, usize)) -> Option<&Cell> {
        self.table.rows.get(row).and_then(|r| r.cells.get(arm))
    }

    /// The filters in use, for the header (empty: none).
    pub fn filter_text(&self) -> String {
        let mut parts = Vec::new();
        if self.filter.differing {
            parts.push("differing".to_string());
        }
        if self.filter.violations {
            parts.push("violations".to_string());
        }
        if let Some(l) = &self.filter.label {
            parts.push(format!("label={l}"));
        }
        if self.filter.unmarked {
            parts.push("unmarked".to_string());
        }
        parts.join(" · ")
    }

    fn clamp(&mut self) {
        let n = self.visible().len();
        self.row = self.row.min(n.saturating_sub(1));
    }
}

fn plain(key: &KeyEvent) -> Option<char> {
    match key.code {
        KeyCode::Char(c)
            if !key
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
        {
            Some(c)
        }
        _ => None,
    }
}

impl App {
    /// Opens the workbench on an experiment's review table, read-only.
    pub fn with_review(mut self, table: ReviewTable) -> Self {
        self.review = Some(ReviewState::new(table));
        self.read_only = true;
        self.focus = Pane::Conversation;
        self
    }

    /// The review's part of `update`: the message back when the review does not take it.
    // The message is handed straight back to `update`, never stored: no need to box it.
    #[allow(clippy::result_large_err)]
    pub(super) fn on_review(&mut self, msg: Msg) -> Result<Vec<Effect>, Msg> {
        let Some(review) = &mut self.review else {
            return Err(msg);
        };
        match msg {
            Msg::Key(key) if key.kind != crossterm::event::KeyEventKind::Release => {
                if review.note.is_some() {
                    return Ok(self.on_note_key(key));
                }
                if review.showing_table {
                    return Ok(self.on_table_key(key));
                }
                // A popup or the visual grounding view takes its own keys (`x` there
                // hides the context, it does not clear a mark).
                if self.popup.is_some() || self.grounding.view.is_some() {
                    return Err(msg);
                }
                if key.code == KeyCode::Esc {
                    review.showing_table = true;
                    self.notice = None;
                    self.error = None;
                    return Ok(Vec::new());
                }
                match plain(&key) {
                    Some(c) if c == 'n' || c == 'x' || MARK_KEYS.iter().any(|(k, ..)| *k == c) => {
                        Ok(self.mark_key(c))
                    }
                    _ => Err(msg),
                }
            }
            Msg::Paste(text) if review.note.is_some() => {
                if let Some(note) = &mut review.note {
                    note.insert_str(text.replace(['\n', '\r'], " "));
                }
                Ok(Vec::new())
            }
            Msg::Mouse(_) | Msg::Paste(_) if review.showing_table => Ok(Vec::new()),
            Msg::SessionOpened(result) if review.opening.is_some() => {
                let cell = review.opening.take();
                match result {
                    Ok((path, session)) => {
                        review.showing_table = false;
                        review.opened = cell;
                        let (row, arm) = cell.unwrap_or_default();
                        let id = review.table.rows[row].id.clone();
                        let name = review.table.arms[arm].clone();
                        self.load_session(session, Some(path));
                        self.focus = Pane::Conversation;
                        self.error = None;
                        self.notice = Some(format!(
                            "reviewing {id} in arm '{name}' (read-only) · s u i w mark · n note · x clears · Esc back to the table"
                        ));
                        Ok(self.select_latest_citation())
                    }
                    Err(e) => {
                        self.error = Some(format!("cannot open the session: {e}"));
                        Ok(Vec::new())
                    }
                }
            }
            Msg::MarkSaved(result) => {
                match result {
                    Ok(r) if r.mark == crate::eval::results::CLEARED => {
                        review.table.apply(&r);
                        self.error = None;
                        self.notice =
                            Some(format!("cleared the mark of {} in arm '{}'", r.id, r.arm));
                    }
                    Ok(r) => {
                        review.table.apply(&r);
                        self.error = None;
                        self.notice = Some(format!(
                            "marked {} in arm '{}' {}{}",
                            r.id,
                            r.arm,
                            r.mark,
                            if r.note.is_some() {
                                " (with a note)"
                            } else {
                                ""
                            }
                        ));
                    }
                    Err(e) => self.error = Some(e),
                }
                Ok(Vec::new())
            }
            other => Err(other),
        }
    }

    fn on_table_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let review = self.review.as_mut().expect("reviewing");
        let n = review.visible().len();
        let arms = review.table.arms.len();
        match key.code {
            KeyCode::Char('c' | 'q') if ctrl => {
                self.quit = true;
                return vec![Effect::Quit];
            }
            KeyCode::Char('q') => {
                self.quit = true;
                return vec![Effect::Quit];
            }
            KeyCode::Up | KeyCode::Char('k') => review.row = review.row.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => {
                review.row = (review.row + 1).min(n.saturating_sub(1))
            }
            KeyCode::PageUp => review.row = review.row.saturating_sub(10),
            KeyCode::PageDown => review.row = (review.row + 10).min(n.saturating_sub(1)),
            KeyCode::Home | KeyCode::Char('g') => review.row = 0,
            KeyCode::End | KeyCode::Char('G') => review.row = n.saturating_sub(1),
            KeyCode::Left | KeyCode::Char('h') | KeyCode::BackTab => {
                review.arm = review.arm.saturating_sub(1)
            }
            KeyCode::Right | KeyCode::Char('l') | KeyCode::Tab => {
                review.arm = (review.arm + 1).min(arms.saturating_sub(1))
            }
            KeyCode::Char('d') => {
                review.filter.differing = !review.filter.differing;
                review.clamp();
            }
            KeyCode::Char('v') => {
                review.filter.violations = !review.filter.violations;
                review.clamp();
            }
            KeyCode::Char('m') => {
                review.filter.unmarked = !review.filter.unmarked;
                review.clamp();
            }
            KeyCode::Char('f') => {
                let next = match &review.filter.label {
                    None => review.labels.first().cloned(),
                    Some(l) => {
                        let i = review.labels.iter().position(|x| x == l);
                        i.and_then(|i| review.labels.get(i + 1)).cloned()
                    }
                };
                review.filter.label = next;
                review.clamp();
            }
            KeyCode::Enter => return self.open_selected(),
            KeyCode::Esc => {
                self.notice = None;
                self.error = None;
            }
            _ => match plain(&key) {
                Some(c) if c == 'n' || c == 'x' || MARK_KEYS.iter().any(|(k, ..)| *k == c) => {
                    return self.mark_key(c);
                }
                _ => self.dirty = false,
            },
        }
        Vec::new()
    }

    fn open_selected(&mut self) -> Vec<Effect> {
        let review = self.review.as_mut().expect("reviewing");
        let Some(cell) = review.selected() else {
            self.notice = Some("no question is shown; change the filters (d v f)".into());
            return Vec::new();
        };
        let Some(path) = review.cell(cell).and_then(|c| c.session.clone()) else {
            self.notice = Some("this arm has no answer to this question yet".into());
            return Vec::new();
        };
        review.opening = Some(cell);
        vec![Effect::OpenSession(path)]
    }

    /// `s` `u` `i` `w` mark the current cell (keeping its note); `n` asks for a note; `x`
    /// takes the mark and note back.
    fn mark_key(&mut self, c: char) -> Vec<Effect> {
        let review = self.review.as_mut().expect("reviewing");
        let Some(at) = review.current() else {
            self.notice = Some("no question is shown; change the filters (d v f m)".into());
            return Vec::new();
        };
        let cell = review.cell(at).cloned();
        if cell.as_ref().is_none_or(|c| c.status.is_none()) {
            self.error =
                Some("this arm has no answer to this question yet: nothing to mark".into());
            return Vec::new();
        }
        let cell = cell.unwrap_or_else(|| unreachable!("checked above"));
        if c == 'x' {
            if cell.mark.is_none() {
                self.notice = Some("this answer has no mark to clear".into());
                return Vec::new();
            }
            return vec![self.save_mark(at, crate::eval::results::CLEARED.to_string(), None)];
        }
        if c == 'n' {
            if cell.mark.is_none() {
                self.error = Some("mark the answer first (s u i w), then add a note".into());
                return Vec::new();
            }
            let mut t = TextArea::default();
            t.set_cursor_line_style(ratatui::style::Style::default());
            t.insert_str(cell.note.clone().unwrap_or_default());
            review.note = Some(t);
            return Vec::new();
        }
        let mark = MARK_KEYS
            .iter()
            .find(|(k, ..)| *k == c)
            .map(|(_, m, _)| m.to_string())
            .unwrap_or_default();
        vec![self.save_mark(at, mark, cell.note)]
    }

    fn save_mark(&self, (row, arm): (usize, usize), mark: String, note: Option<String>) -> Effect {
        let review = self.review.as_ref().expect("reviewing");
        Effect::SaveMark {
            dir: review.table.dir.clone(),
            review: Review {
                arm: review.table.arms[arm].clone(),
                id: review.table.rows[row].id.clone(),
                mark,
                note,
            },
        }
    }

    fn on_note_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let review = self.review.as_mut().expect("reviewing");
        match key.code {
            KeyCode::Esc => {
                review.note = None;
                Vec::new()
            }
            KeyCode::Enter => {
                let text = review
                    .note
                    .take()
                    .map(|t| t.lines().join(" ").trim().to_string())
                    .unwrap_or_default();
                let Some(at) = review.current() else {
                    return Vec::new();
                };
                let Some(mark) = review.cell(at).and_then(|c| c.mark.clone()) else {
                    return Vec::new();
                };
                let note = (!text.is_empty()).then_some(text);
                vec![self.save_mark(at, mark, note)]
            }
            _ => {
                if let Some(t) = &mut review.note {
                    t.input(key);
                }
                Vec::new()
            }
        }
    }
}
