//! Item building shared by the parsers: whitespace normalisation and [`ItemBuilder`],
//! which numbers refs per kind and finishes a [`ParsedDocument`].

use crate::store::docling::label;

use super::captions::captions_of;
use super::export::markdown_export;
use super::{PageImage, ParsedDocument, ParsedItem};

/// Collapse runs of whitespace to single spaces and trim.
pub(crate) fn normalize_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Builds items with per-kind ref numbering.
#[derive(Default)]
pub(crate) struct ItemBuilder {
    pub items: Vec<ParsedItem>,
    texts: usize,
    tables: usize,
    pictures: usize,
    lists: usize,
}

impl ItemBuilder {
    pub fn push(&mut self, label: &str, text: String, tree_depth: i64) -> &mut ParsedItem {
        let self_ref = match label {
            label::TABLE | label::DOCUMENT_INDEX => {
                self.tables += 1;
                format!("#/tables/{}", self.tables - 1)
            }
            label::PICTURE => {
                self.pictures += 1;
                format!("#/pictures/{}", self.pictures - 1)
            }
            _ => {
                self.texts += 1;
                format!("#/texts/{}", self.texts - 1)
            }
        };
        self.items.push(ParsedItem {
            self_ref,
            label: label.to_string(),
            text,
            tree_depth,
            ..Default::default()
        });
        self.items.last_mut().expect("just pushed")
    }

    /// A fresh list-group id.
    pub fn new_list(&mut self) -> usize {
        self.lists += 1;
        self.lists - 1
    }

    pub fn finish(mut self, title: Option<String>, pages: Vec<PageImage>) -> ParsedDocument {
        // haiku stores a table's text as docling's Markdown serialisation,
        // which puts the captions first: "caption\n\n| table |"
        for i in 0..self.items.len() {
            if self.items[i].label == label::TABLE {
                let caps: Vec<String> = captions_of(&self.items, i)
                    .into_iter()
                    .map(|c| self.items[c].text.clone())
                    .filter(|t| !t.is_empty())
                    .collect();
                if !caps.is_empty() {
                    self.items[i].text = format!("{}\n\n{}", caps.join(" "), self.items[i].text);
                }
            }
        }
        let content = markdown_export(&self.items);
        ParsedDocument {
            title,
            content,
            items: self.items,
            pages,
        }
    }
}
