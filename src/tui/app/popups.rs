//! Popups over the panes: their state (help, command palette, document filter,
//! database info, path prompt, chunk detail), their keys, and the effect results that
//! fill them. The path prompt's completions and Enter are resolved by the Runtime
//! (`paths`), so no key here touches the filesystem.

use std::path::PathBuf;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui_textarea::TextArea;

use crate::tui::keymap::Action;

use super::{App, Effect, PathOutcome};

/// A popup over the panes.
pub enum Popup {
    Help {
        scroll: u16,
    },
    Palette {
        query: String,
        selected: usize,
    },
    Filter {
        all: Option<Vec<String>>,
        query: String,
        cursor: usize,
        chosen: Vec<String>,
    },
    Info(Option<String>),
    /// A path prompt for save-as, open and attach.
    Path {
        purpose: PathPurpose,
        input: Box<TextArea<'static>>,
        entries: Vec<String>,
        selected: usize,
    },
    ChunkDetail {
        chunk_id: String,
        text: Option<String>,
        scroll: u16,
        /// For a cited chunk: the context the model saw (expanded around it), and where
        /// the chunk's own text sits inside it when it is there word for word.
        context: Option<(String, Option<std::ops::Range<usize>>)>,
    },
    /// The conversation's find prompt.
    Find {
        query: String,
    },
    /// Marking an answer of the session: `turn` in the transcript, `question` its identity;
    /// `note` while a note is typed.
    Mark {
        turn: usize,
        question: u64,
        note: Option<Box<TextArea<'static>>>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathPurpose {
    SaveAs,
    Open,
    AttachImage,
}

/// The heading above the context the model saw when the cited chunk is found in it.
pub const CONTEXT_HEADING_MARKED: &str =
    "The context the model saw (expanded around the chunk; the chunk's own text highlighted):";
/// The heading when the chunk's text is not in it word for word.
pub const CONTEXT_HEADING_UNMARKED: &str = "The context the model saw (expanded around the chunk; the chunk's text is not in it word for word):";

impl App {
    /// Opens the path prompt; its completions are listed by the Runtime.
    pub(super) fn open_path_prompt(&mut self, purpose: PathPurpose) -> Vec<Effect> {
        let mut input = TextArea::default();
        let start = match purpose {
            PathPurpose::SaveAs => self
                .session_path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "session.sqlite".into()),
            _ => self.start_dir.clone(),
        };
        input.insert_str(start);
        let effect = list_paths(&input, purpose);
        self.popup = Some(Popup::Path {
            purpose,
            input: Box::new(input),
            entries: Vec::new(),
            selected: 0,
        });
        vec![effect]
    }

    /// Palette entries matching `query`.
    pub fn palette_entries(&self, query: &str) -> Vec<Action> {
        const COMMANDS: &[Action] = &[
            Action::NewSession,
            Action::OpenSession,
            Action::SaveAs,
            Action::ExportMarkdown,
            Action::ExportJson,
            Action::Explorer,
            Action::VisualGrounding,
            Action::FilterDocuments,
            Action::DatabaseInfo,
            Action::ToggleCompaction,
            Action::TogglePolicy,
            Action::AttachImage,
            Action::ToggleTheme,
            Action::Replay,
            Action::VerifyClaims,
            Action::ViolationsOnly,
            Action::ToggleDiff,
            Action::Help,
            Action::Quit,
        ];
        let q = query.to_lowercase();
        COMMANDS
            .iter()
            .copied()
            .filter(|a| q.is_empty() || a.description().to_lowercase().contains(&q))
            .collect()
    }

    /// Documents of the filter modal matching its query.
    pub fn filter_matches<'a>(all: &'a [String], query: &str) -> Vec<&'a String> {
        let q = query.to_lowercase();
        all.iter()
            .filter(|d| q.is_empty() || d.to_lowercase().contains(&q))
            .collect()
    }

    pub(super) fn on_popup_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let Some(mut popup) = self.popup.take() else {
            return Vec::new();
        };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && matches!(key.code, KeyCode::Char('q')) {
            self.quit = true;
            return vec![Effect::Quit];
        }
        if ctrl && matches!(key.code, KeyCode::Char('c')) {
            if self.cancel_running() {
                self.popup = Some(popup);
                return Vec::new();
            }
            return Vec::new();
        }
        let mut effects = Vec::new();
        let keep = match &mut popup {
            Popup::Help { scroll } => match key.code {
                KeyCode::Up | KeyCode::Char('k') => {
                    *scroll = scroll.saturating_sub(1);
                    true
                }
                KeyCode::Down | KeyCode::Char('j') => {
                    *scroll += 1;
                    true
                }
                KeyCode::PageUp => {
                    *scroll = scroll.saturating_sub(10);
                    true
                }
                KeyCode::PageDown => {
                    *scroll += 10;
                    true
                }
                KeyCode::Esc
                | KeyCode::Enter
                | KeyCode::Char('q')
                | KeyCode::Char('?')
                | KeyCode::F(1) => false,
                _ => true,
            },
            Popup::Info(_) => !matches!(
                key.code,
                KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q') | KeyCode::Char('I')
            ),
            Popup::ChunkDetail { scroll, .. } => match key.code {
                KeyCode::Up | KeyCode::Char('k') => {
                    *scroll = scroll.saturating_sub(1);
                    true
                }
                KeyCode::Down | KeyCode::Char('j') => {
                    *scroll += 1;
                    true
                }
                KeyCode::PageDown => {
                    *scroll += 10;
                    true
                }
                KeyCode::PageUp => {
                    *scroll = scroll.saturating_sub(10);
                    true
                }
                KeyCode::Esc | KeyCode::Enter | KeyCode::Backspace | KeyCode::Char('q') => false,
                _ => true,
            },
            Popup::Mark {
                turn,
                question,
                note,
            } => {
                let (turn, question) = (*turn, *question);
                match note {
                    Some(input) => match key.code {
                        KeyCode::Esc => {
                            *note = None;
                            true
                        }
                        KeyCode::Enter => {
                            let text = input.lines().join(" ").trim().to_string();
                            let mark = self.marks.get(&question).map(|m| m.mark.clone());
                            if let Some(mark) = mark {
                                effects = self.set_answer_mark(
                                    turn,
                                    question,
                                    Some((mark, (!text.is_empty()).then_some(text))),
                                );
                            }
                            false
                        }
                        _ => {
                            input.input(key);
                            true
                        }
                    },
                    None => match key.code {
                        KeyCode::Esc => false,
                        KeyCode::Char('n') if !ctrl => {
                            if let Some(m) = self.marks.get(&question) {
                                let mut t = TextArea::default();
                                t.set_cursor_line_style(ratatui::style::Style::default());
                                t.insert_str(m.note.clone().unwrap_or_default());
                                *note = Some(Box::new(t));
                            } else {
                                self.notice =
                                    Some("mark the answer first (s u i w), then add a note".into());
                            }
                            true
                        }
                        KeyCode::Char('x') if !ctrl => {
                            if self.marks.contains_key(&question) {
                                effects = self.set_answer_mark(turn, question, None);
                            } else {
                                self.notice = Some("this answer has no mark to clear".into());
                            }
                            false
                        }
                        KeyCode::Char(c) if !ctrl => {
                            match super::review::MARK_KEYS.iter().find(|(k, ..)| *k == c) {
                                Some((_, mark, _)) => {
                                    // A note already given stays with the new mark.
                                    let kept =
                                        self.marks.get(&question).and_then(|m| m.note.clone());
                                    effects = self.set_answer_mark(
                                        turn,
                                        question,
                                        Some((mark.to_string(), kept)),
                                    );
                                    false
                                }
                                None => true,
                            }
                        }
                        _ => true,
                    },
                }
            }
            Popup::Find { query } => match key.code {
                KeyCode::Esc => false,
                KeyCode::Backspace => {
                    query.pop();
                    true
                }
                KeyCode::Enter => {
                    let query = query.trim().to_string();
                    if query.is_empty() {
                        self.conversation.find = None;
                    } else {
                        self.conversation.find = Some(query);
                        self.conversation.find_line = None;
                        self.step_find(true);
                    }
                    false
                }
                KeyCode::Char(c) if !ctrl => {
                    query.push(c);
                    true
                }
                _ => true,
            },
            Popup::Palette { query, selected } => match key.code {
                KeyCode::Esc => false,
                KeyCode::Up => {
                    *selected = selected.saturating_sub(1);
                    true
                }
                KeyCode::Down => {
                    *selected += 1;
                    true
                }
                KeyCode::Backspace => {
                    query.pop();
                    *selected = 0;
                    true
                }
                KeyCode::Enter => {
                    let entries = self.palette_entries(query);
                    if let Some(&a) = entries.get((*selected).min(entries.len().saturating_sub(1)))
                    {
                        effects = self.on_action(a);
                        return effects;
                    }
                    false
                }
                KeyCode::Char(c) if !ctrl => {
                    query.push(c);
                    *selected = 0;
                    true
                }
                _ => true,
            },
            Popup::Filter {
                all,
                query,
                cursor,
                chosen,
            } => {
                let matches: Vec<String> = all
                    .as_deref()
                    .map(|a| App::filter_matches(a, query).into_iter().cloned().collect())
                    .unwrap_or_default();
                match key.code {
                    KeyCode::Esc => false,
                    KeyCode::Up => {
                        *cursor = cursor.saturating_sub(1);
                        true
                    }
                    KeyCode::Down => {
                        if *cursor + 1 < matches.len() {
                            *cursor += 1;
                        }
                        true
                    }
                    KeyCode::Char(' ') | KeyCode::Tab => {
                        if let Some(d) = matches.get(*cursor) {
                            if let Some(p) = chosen.iter().position(|c| c == d) {
                                chosen.remove(p);
                            } else {
                                chosen.push(d.clone());
                            }
                        }
                        true
                    }
                    KeyCode::Backspace => {
                        query.pop();
                        *cursor = 0;
                        true
                    }
                    KeyCode::Enter => {
                        let chosen = chosen.clone();
                        effects.extend(self.apply_filter(chosen));
                        false
                    }
                    KeyCode::Char(c) if !ctrl => {
                        query.push(c);
                        *cursor = 0;
                        true
                    }
                    _ => true,
                }
            }
            Popup::Path {
                purpose,
                input,
                entries,
                selected,
            } => match key.code {
                KeyCode::Esc => false,
                KeyCode::Up => {
                    *selected = selected.saturating_sub(1);
                    true
                }
                KeyCode::Down => {
                    if *selected + 1 < entries.len() {
                        *selected += 1;
                    }
                    true
                }
                KeyCode::Tab => {
                    if let Some(e) = entries.get(*selected).cloned() {
                        let mut t = TextArea::default();
                        t.insert_str(e);
                        **input = t;
                        *selected = 0;
                    }
                    effects.push(list_paths(input, *purpose));
                    true
                }
                KeyCode::Enter => {
                    // Whether the typed path or the highlighted entry is a directory is
                    // the filesystem's to say: the Runtime resolves it.
                    effects.push(Effect::ResolvePath {
                        typed: input.lines().join(""),
                        highlighted: entries.get(*selected).cloned(),
                    });
                    true
                }
                _ => {
                    input.input(key);
                    *selected = 0;
                    effects.push(list_paths(input, *purpose));
                    true
                }
            },
        };
        if keep {
            self.popup = Some(popup);
        }
        effects
    }

    /// Opens the mark popup for the answer of transcript turn `turn` (none: said so).
    pub(super) fn open_mark(&mut self, turn: Option<usize>) -> Vec<Effect> {
        if self.read_only {
            self.notice = Some(
                "read-only: an experiment's answers are marked with s u i w (they go to its reviews.jsonl)"
                    .into(),
            );
            return Vec::new();
        }
        if self.running() {
            // The session is saved whole on a mark: not while a question's commit is due.
            self.notice = Some("a question is running: mark its answers when it ends".into());
            return Vec::new();
        }
        let Some((turn, t)) = turn.and_then(|k| Some((k, self.transcript.turns.get(k)?))) else {
            self.notice = Some("no answered question to mark".into());
            return Vec::new();
        };
        self.popup = Some(Popup::Mark {
            turn,
            question: t.question,
            note: None,
        });
        Vec::new()
    }

    /// Sets (or takes back) the mark of an answer in the session and saves the session.
    fn set_answer_mark(
        &mut self,
        turn: usize,
        question: u64,
        mark: Option<(String, Option<String>)>,
    ) -> Vec<Effect> {
        let what = match &mark {
            Some((m, Some(_))) => format!(
                "marked the answer to question {} {m} (with a note)",
                turn + 1
            ),
            Some((m, None)) => format!("marked the answer to question {} {m}", turn + 1),
            None => format!("cleared the mark of the answer to question {}", turn + 1),
        };
        self.notice = Some(match &self.session_path {
            Some(_) => what,
            None => format!(
                "{what}; the session is not saved yet ({} saves it)",
                self.keymap.hint(Action::SaveAs)
            ),
        });
        vec![Effect::Mark { question, mark }]
    }

    fn finish_path(&mut self, purpose: PathPurpose, path: PathBuf) -> Vec<Effect> {
        match purpose {
            PathPurpose::SaveAs => {
                self.session_path = Some(path.clone());
                vec![Effect::SaveAs(path)]
            }
            PathPurpose::Open => {
                if self.running() {
                    self.error = Some("cancel the running question first".into());
                    return Vec::new();
                }
                vec![Effect::OpenSession(path)]
            }
            PathPurpose::AttachImage => vec![Effect::AttachImage(path)],
        }
    }

    /// Asks the conversation's owner to restrict later questions to `labels`.
    fn apply_filter(&mut self, labels: Vec<String>) -> Vec<Effect> {
        self.notice = Some(if labels.is_empty() {
            "No filter (all documents)".into()
        } else {
            format!("{} document(s) selected", labels.len())
        });
        self.filter_labels = labels.clone();
        vec![Effect::Filter(labels)]
    }

    /// Completions of the path prompt arrived; those for text since changed are dropped.
    pub(super) fn path_entries(&mut self, typed: String, listed: Vec<String>) {
        if let Some(Popup::Path { input, entries, .. }) = &mut self.popup
            && input.lines().join("") == typed
        {
            *entries = listed;
        }
    }

    /// Enter in the path prompt was resolved: enter a directory or finish with a file.
    pub(super) fn path_resolved(&mut self, typed: String, outcome: PathOutcome) -> Vec<Effect> {
        let Some(Popup::Path {
            purpose,
            input,
            selected,
            ..
        }) = &mut self.popup
        else {
            return Vec::new();
        };
        if input.lines().join("") != typed {
            return Vec::new();
        }
        let purpose = *purpose;
        match outcome {
            PathOutcome::Directory(dir) => {
                let mut t = TextArea::default();
                t.insert_str(dir);
                **input = t;
                *selected = 0;
                vec![list_paths(input, purpose)]
            }
            PathOutcome::File(path) => {
                self.popup = None;
                self.finish_path(purpose, path)
            }
            PathOutcome::Nothing => Vec::new(),
        }
    }

    /// A chunk's text for the chunk detail popup, if it still shows that chunk.
    pub(super) fn chunk_text(&mut self, chunk_id: String, text: Result<String, String>) {
        // The popup's text width (it spans the frame but 8 columns, inside its border).
        let width = self.grounding.screen.width.saturating_sub(10).max(10);
        let height = self.grounding.screen.height;
        if let Some(Popup::ChunkDetail {
            chunk_id: shown,
            text: slot,
            scroll,
            context,
        }) = &mut self.popup
            && *shown == chunk_id
        {
            let body = text.unwrap_or_else(|e| format!("(cannot load the chunk: {e})"));
            // With the context the model saw, it opens where the cited chunk sits in it
            // (two rows above), not at the context's first line.
            if let Some((ctx, Some(span))) = context.as_ref()
                && let Some(before) = ctx.get(..span.start)
            {
                let rows = |l: &str| {
                    crate::tui::wrap::wrap_line(&ratatui::text::Line::raw(l.to_string()), width)
                        .len()
                        .max(1)
                };
                let mut at: usize = body.lines().map(rows).sum();
                // The blank line and the context's heading.
                at += 1 + rows(CONTEXT_HEADING_MARKED);
                let full_lines: Vec<&str> = before.split('\n').collect();
                at += full_lines[..full_lines.len() - 1]
                    .iter()
                    .map(|l| rows(l))
                    .sum::<usize>();
                // Only when the chunk would be below the popup's last row.
                let height = height.saturating_sub(6) as usize;
                if at + 1 >= height {
                    *scroll = at.saturating_sub(2).min(u16::MAX as usize) as u16;
                }
            }
            *slot = Some(body);
        }
    }

    /// The documents of the filter popup.
    pub(super) fn documents(&mut self, docs: Result<Vec<String>, String>) {
        if let Some(Popup::Filter { all, .. }) = &mut self.popup {
            match docs {
                Ok(d) => *all = Some(d),
                Err(e) => {
                    *all = Some(Vec::new());
                    self.error = Some(format!("cannot list documents: {e}"));
                }
            }
        }
    }

    /// The database info popup's text.
    pub(super) fn db_info(&mut self, info: Result<String, String>) {
        if let Some(Popup::Info(slot)) = &mut self.popup {
            *slot = Some(info.unwrap_or_else(|e| format!("error: {e}")));
        }
    }
}

/// The effect listing completions of the prompt's text.
fn list_paths(input: &TextArea<'static>, purpose: PathPurpose) -> Effect {
    Effect::ListPaths {
        typed: input.lines().join(""),
        purpose,
    }
}

#[cfg(test)]
mod tests {
    use crossterm::event::{KeyEventKind, KeyModifiers};

    use super::*;
    use crate::engine::messages::BinaryContent;
    use crate::session::Session;
    use crate::tui::app::{HostInfo, Msg};

    fn app() -> App {
        let host = HostInfo {
            knowledge_bases: Vec::new(),
            knowledge_base_note: None,
            collections: Vec::new(),
            db: String::new(),
            model: String::new(),
            model_ready: false,
            model_help: String::new(),
            capabilities: Vec::new(),
            max_searches: 5,
            max_executions: 15,
        };
        let mut app = App::new(Session::new("m"), None, host);
        app.start_dir = "/nowhere/".into();
        app
    }

    fn key(app: &mut App, code: KeyCode, mods: KeyModifiers) -> Vec<Effect> {
        app.update(Msg::Key(KeyEvent::new_with_kind(
            code,
            mods,
            KeyEventKind::Press,
        )))
    }

    #[test]
    fn the_path_prompt_leaves_the_filesystem_to_the_runtime() {
        let mut app = app();
        let effects = key(&mut app, KeyCode::Char('o'), KeyModifiers::CONTROL);
        assert!(matches!(
            effects.as_slice(),
            [Effect::ListPaths { typed, purpose: PathPurpose::AttachImage }] if typed == "/nowhere/"
        ));
        // Completions for text typed since are dropped; those for the text are shown.
        let effects = key(&mut app, KeyCode::Char('a'), KeyModifiers::NONE);
        assert!(
            matches!(effects.as_slice(), [Effect::ListPaths { typed, .. }] if typed == "/nowhere/a")
        );
        app.update(Msg::PathEntries {
            typed: "/nowhere/".into(),
            entries: vec!["/nowhere/old/".into()],
        });
        app.update(Msg::PathEntries {
            typed: "/nowhere/a".into(),
            entries: vec!["/nowhere/a.png".into()],
        });
        let Some(Popup::Path { entries, .. }) = &app.popup else {
            panic!("the prompt is open")
        };
        assert_eq!(entries, &["/nowhere/a.png".to_string()]);
        // Enter asks what the path is; a file ends the prompt with the purpose's effect.
        let effects = key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
        assert!(matches!(
            effects.as_slice(),
            [Effect::ResolvePath { typed, highlighted: Some(h) }]
                if typed == "/nowhere/a" && h == "/nowhere/a.png"
        ));
        assert!(app.popup.is_some(), "open until the path is resolved");
        let effects = app.update(Msg::PathResolved {
            typed: "/nowhere/a".into(),
            outcome: PathOutcome::File("/nowhere/a.png".into()),
        });
        assert!(app.popup.is_none());
        assert!(matches!(effects.as_slice(), [Effect::AttachImage(p)] if p.ends_with("a.png")));
        // The image, read off the UI task, is attached with its token.
        app.update(Msg::ImageAttached {
            path: "/nowhere/a.png".into(),
            result: Ok(BinaryContent::from_bytes(&[1], "image/jpeg")),
        });
        assert_eq!(app.attachments.len(), 1);
        assert_eq!(app.input.lines().join(""), "[Image #1]");
    }

    #[test]
    fn the_document_filter_is_asked_of_the_conversation_owner() {
        let mut app = app();
        let effects = app.apply_filter(vec!["Battery Guide".into()]);
        assert!(
            matches!(effects.as_slice(), [Effect::Filter(l)] if l == &["Battery Guide".to_string()])
        );
        // The app changes nothing itself: the owner's next snapshot carries the filter.
        assert_eq!(app.document_filter(), None);
        assert!(
            matches!(app.apply_filter(Vec::new()).as_slice(), [Effect::Filter(l)] if l.is_empty())
        );
    }
}
