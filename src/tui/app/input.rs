//! The composer: editing keys, `[Image #N]` tokens deleted as a unit, history recall,
//! attachments, and submitting a question (the prompt interleaves text and images as
//! haiku.rag's chat builds it).

use std::path::PathBuf;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui_textarea::TextArea;

use crate::engine::cancel::CancelToken;
use crate::engine::messages::{BinaryContent, UserContent, UserContentValue};
use crate::host::transcript::Turn;
use crate::tui::keymap::Action;

use super::{App, Effect, LiveRun, Pane, Phase};

pub(super) fn new_input() -> TextArea<'static> {
    let mut t = TextArea::default();
    t.set_placeholder_text(
        "Ask a question about the knowledge base (Enter sends, Ctrl-J new line)",
    );
    t.set_cursor_line_style(ratatui::style::Style::default());
    t
}

impl App {
    pub(super) fn on_input_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Enter if shift || key.modifiers.contains(KeyModifiers::ALT) => {
                self.input.insert_newline();
                Vec::new()
            }
            KeyCode::Char('j') | KeyCode::Char('m') if ctrl => {
                self.input.insert_newline();
                Vec::new()
            }
            KeyCode::Enter => self.submit(),
            KeyCode::Up if self.input.cursor().0 == 0 => {
                self.recall(-1);
                Vec::new()
            }
            KeyCode::Down if self.input.cursor().0 + 1 >= self.input.lines().len() => {
                self.recall(1);
                Vec::new()
            }
            KeyCode::Backspace => {
                if !self.delete_image_token(true) {
                    self.input.input(key);
                }
                Vec::new()
            }
            KeyCode::Delete => {
                if !self.delete_image_token(false) {
                    self.input.input(key);
                }
                Vec::new()
            }
            _ => {
                self.input.input(key);
                Vec::new()
            }
        }
    }

    /// Deletes an `[Image #N]` token touching the cursor as a unit.
    fn delete_image_token(&mut self, before: bool) -> bool {
        let ratatui_textarea::DataCursor(row, col) = self.input.cursor();
        let Some(line) = self.input.lines().get(row).cloned() else {
            return false;
        };
        let chars: Vec<char> = line.chars().collect();
        let text: String = chars.iter().collect();
        let re_start = |s: &str| s.find("[Image #");
        let mut offset = 0;
        let mut rest = text.as_str();
        while let Some(start) = re_start(rest) {
            let abs = offset + rest[..start].chars().count();
            let Some(end_rel) = rest[start..].find(']') else {
                break;
            };
            let token = &rest[start..start + end_rel + 1];
            let len = token.chars().count();
            let is_token = token[8..token.len() - 1]
                .chars()
                .all(|c| c.is_ascii_digit());
            let touches = if before { col == abs + len } else { col == abs };
            if is_token && touches {
                if before {
                    self.input.delete_str(0);
                    for _ in 0..len {
                        self.input.delete_char();
                    }
                } else {
                    self.input.delete_str(len);
                }
                return true;
            }
            offset = abs + len;
            rest = &rest[start + end_rel + 1..];
        }
        false
    }

    pub(super) fn recall(&mut self, dir: i32) {
        if self.history.is_empty() {
            return;
        }
        let n = self.history.len();
        let pos = match (self.history_pos, dir) {
            (None, -1) => Some(n - 1),
            (None, _) => None,
            (Some(0), -1) => Some(0),
            (Some(p), -1) => Some(p - 1),
            (Some(p), _) if p + 1 < n => Some(p + 1),
            (Some(_), _) => None,
        };
        self.history_pos = pos;
        let text = pos.map(|p| self.history[p].clone()).unwrap_or_default();
        self.input = new_input();
        self.input.insert_str(text);
    }

    fn submit(&mut self) -> Vec<Effect> {
        let text = self.input.lines().join("\n");
        if text.trim().is_empty() && self.attachments.is_empty() {
            return Vec::new();
        }
        if self.running() {
            self.notice = Some(format!(
                "a question is running; {} cancels it",
                self.keymap.hint(Action::Interrupt)
            ));
            return Vec::new();
        }
        if self.read_only {
            self.notice =
                Some("read-only: reviewing never asks questions or changes the session".into());
            return Vec::new();
        }
        if !self.host.model_ready {
            self.error = Some(self.host.model_help.clone());
            return Vec::new();
        }
        let prompt = build_prompt(&text, std::mem::take(&mut self.attachments));
        let run_id = uuid::Uuid::new_v4().to_string();
        let cancel = CancelToken::new();
        self.history.push(text.clone());
        self.history_pos = None;
        self.input = new_input();
        self.ended = None;
        self.error = None;
        self.notice = None;
        self.conversation.scroll = None;
        self.conversation.new_below = false;
        self.live = Some(LiveRun {
            run_id: run_id.clone(),
            cancel: cancel.clone(),
            turn: Turn::new(self.session.messages.len() as u64, text),
            requests: Vec::new(),
            phase: Phase::Starting,
            started: std::time::Instant::now(),
            waiting: None,
        });
        self.inspector.selected = None;
        self.bump();
        vec![Effect::Ask {
            run_id,
            prompt,
            options: self.options.clone(),
            cancel,
        }]
    }

    /// An image to attach was read (by the Runtime): add it and its `[Image #N]` token.
    pub(super) fn image_attached(&mut self, path: PathBuf, result: Result<BinaryContent, String>) {
        match result {
            Ok(binary) => {
                let n = self.attachments.len() + 1;
                let name = path
                    .file_name()
                    .map(|f| f.to_string_lossy().to_string())
                    .unwrap_or_default();
                self.attachments.push((name.clone(), binary));
                self.input.insert_str(format!("[Image #{n}]"));
                self.notice = Some(format!("Attached {name}"));
                self.focus = Pane::Input;
            }
            Err(e) => self.error = Some(e),
        }
    }
}

/// The prompt of a question: text with `[Image #N]` tokens becomes text and images
/// interleaved, as haiku.rag's chat builds it.
pub fn build_prompt(text: &str, images: Vec<(String, BinaryContent)>) -> UserContentValue {
    if images.is_empty() {
        return UserContentValue::Text(text.to_string());
    }
    let mut items: Vec<UserContent> = Vec::new();
    let mut rest = text;
    let mut used_any = false;
    let mut buf = String::new();
    while let Some(start) = rest.find("[Image #") {
        let after = &rest[start + 8..];
        let Some(end) = after.find(']') else {
            break;
        };
        let num = &after[..end];
        buf.push_str(&rest[..start]);
        match num.parse::<usize>() {
            Ok(n) if n >= 1 && n <= images.len() => {
                if !buf.is_empty() {
                    items.push(UserContent::Text(std::mem::take(&mut buf)));
                }
                items.push(UserContent::Binary(images[n - 1].1.clone()));
                used_any = true;
            }
            _ => buf.push_str(&rest[start..start + 8 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    buf.push_str(rest);
    let has_tokens = text.contains("[Image #");
    if !has_tokens {
        let mut items = Vec::new();
        if !text.is_empty() {
            items.push(UserContent::Text(text.to_string()));
        }
        items.extend(images.into_iter().map(|(_, b)| UserContent::Binary(b)));
        return UserContentValue::Items(items);
    }
    if !used_any {
        return UserContentValue::Text(text.to_string());
    }
    if !buf.is_empty() {
        items.push(UserContent::Text(buf));
    }
    UserContentValue::Items(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img() -> BinaryContent {
        BinaryContent::from_bytes(&[1, 2, 3], "image/png")
    }

    #[test]
    fn prompt_splits_on_image_tokens() {
        assert_eq!(
            build_prompt("hi", vec![]),
            UserContentValue::Text("hi".into())
        );
        let p = build_prompt("look [Image #1] here", vec![("a.png".into(), img())]);
        let UserContentValue::Items(items) = p else {
            panic!("items expected")
        };
        assert_eq!(items.len(), 3);
        assert!(matches!(&items[1], UserContent::Binary(_)));
        // Out-of-range tokens stay text; no token resolving → plain text.
        let p = build_prompt("see [Image #5]", vec![("a.png".into(), img())]);
        assert_eq!(p, UserContentValue::Text("see [Image #5]".into()));
        // Images without tokens go after the text.
        let p = build_prompt("q", vec![("a.png".into(), img())]);
        let UserContentValue::Items(items) = p else {
            panic!("items expected")
        };
        assert!(matches!(&items[0], UserContent::Text(t) if t == "q"));
        assert!(matches!(&items[1], UserContent::Binary(_)));
    }
}
