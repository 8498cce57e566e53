//! Chunks sized for the embedder, as haiku.rag's default `hybrid` chunker sizes them
//! (docling-core `HybridChunker` with `merge_peers`): the hierarchical chunks, then
//!
//! 1. a chunk whose text with its headings is over `max_tokens` and is a list of several
//!    items is cut into windows of whole items, each as long as fits;
//! 2. a chunk still over is cut at paragraph, line, sentence or word boundaries into
//!    pieces that fit (docling uses `semchunk` here; the boundaries are ours);
//! 3. neighbouring chunks under the same headings are merged (joined by a line break)
//!    while the merged text with its headings fits.
//!
//! Tokens are those of the embedder's own tokenizer when there is one at hand (special
//! tokens not counted, as docling counts them), else about four characters a token. Every
//! chunk keeps its headings; picture chunks are never merged.

use std::sync::Arc;

use super::ParsedItem;
use crate::store::docling::label;

/// How a hybrid chunker counts tokens.
#[derive(Clone)]
pub enum TokenCount {
    /// About four characters a token (no tokenizer at hand).
    Estimate,
    /// A Hugging Face tokenizer (the embedder's).
    Tokenizer(Arc<tokenizers::Tokenizer>),
}

impl TokenCount {
    /// The tokens of `text`.
    pub fn count(&self, text: &str) -> usize {
        match self {
            TokenCount::Estimate => text.chars().count().div_ceil(4),
            TokenCount::Tokenizer(t) => t
                .encode(text, false)
                .map(|e| e.len())
                .unwrap_or_else(|_| text.chars().count().div_ceil(4)),
        }
    }

    /// The tokenizer of the model directory `dir` (its `tokenizer.json`), read without
    /// its own truncation or padding.
    pub fn from_model_dir(dir: &std::path::Path) -> Option<TokenCount> {
        let mut t = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).ok()?;
        t.with_truncation(None).ok()?;
        t.with_padding(None);
        Some(TokenCount::Tokenizer(Arc::new(t)))
    }
}

impl std::fmt::Debug for TokenCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenCount::Estimate => f.write_str("Estimate"),
            TokenCount::Tokenizer(_) => f.write_str("Tokenizer"),
        }
    }
}

impl PartialEq for TokenCount {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (TokenCount::Estimate, TokenCount::Estimate) => true,
            (TokenCount::Tokenizer(a), TokenCount::Tokenizer(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// haiku.rag's `processing.chunker_type: hybrid` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Hybrid {
    /// `processing.chunk_size` (haiku.rag's default 256, the local embedder's window).
    pub max_tokens: usize,
    /// `processing.chunking_merge_peers` (default true).
    pub merge_peers: bool,
    pub count: TokenCount,
}

/// A chunk before its metadata is written (the chunker's own).
pub(super) struct Raw {
    pub content: String,
    pub refs: Vec<usize>,
    pub headings: Option<Vec<String>>,
    pub picture: bool,
}

impl Raw {
    /// The text that is embedded and counted: the headings, then the content.
    fn context(&self) -> String {
        match &self.headings {
            Some(h) if !h.is_empty() => format!("{}\n{}", h.join("\n"), self.content),
            _ => self.content.clone(),
        }
    }
}

impl Hybrid {
    fn fits(&self, r: &Raw) -> bool {
        self.count.count(&r.context()) <= self.max_tokens
    }

    /// The hierarchical chunks `raws` of `items`, sized (see the module docs).
    pub(super) fn refine(&self, raws: Vec<Raw>, items: &[ParsedItem]) -> Vec<Raw> {
        let mut sized = Vec::with_capacity(raws.len());
        for r in raws {
            if r.picture || self.fits(&r) {
                sized.push(r);
                continue;
            }
            for w in self.item_windows(r, items) {
                if self.fits(&w) {
                    sized.push(w);
                } else {
                    self.split_text(w, &mut sized);
                }
            }
        }
        if self.merge_peers {
            self.merge(sized)
        } else {
            sized
        }
    }

    /// A list of several items in windows of whole items, each as long as fits (a single
    /// item that does not fit is a window of its own); anything else as it is.
    fn item_windows(&self, r: Raw, items: &[ParsedItem]) -> Vec<Raw> {
        let list = r.refs.len() > 1 && r.refs.iter().all(|&k| items[k].label == label::LIST_ITEM);
        if !list {
            return vec![r];
        }
        let window = |from: usize, to: usize| {
            let of: Vec<ParsedItem> = r.refs[from..=to]
                .iter()
                .map(|&k| items[k].clone())
                .collect();
            Raw {
                content: super::list_markdown(&of),
                refs: r.refs[from..=to].to_vec(),
                headings: r.headings.clone(),
                picture: false,
            }
        };
        let mut out = Vec::new();
        let mut start = 0;
        while start < r.refs.len() {
            let mut end = start;
            while end + 1 < r.refs.len() && self.fits(&window(start, end + 1)) {
                end += 1;
            }
            out.push(window(start, end));
            start = end + 1;
        }
        out
    }

    /// `r` cut at paragraph, line, sentence or word boundaries into pieces that fit.
    fn split_text(&self, r: Raw, out: &mut Vec<Raw>) {
        let piece = |text: &str| Raw {
            content: text.to_string(),
            refs: r.refs.clone(),
            headings: r.headings.clone(),
            picture: false,
        };
        let fits = |text: &str| self.fits(&piece(text));
        let mut pieces = Vec::new();
        let chars = r.content.chars().count();
        let tokens = self.count.count(&r.context()).max(1);
        // A first cut near the size that fits, then each piece that is still over cut
        // again, smaller.
        let first = (chars * self.max_tokens / tokens).max(MIN_PIECE_CHARS);
        split_fit(&r.content, &fits, first, &mut pieces);
        out.extend(pieces.iter().map(|p| piece(p)));
    }

    /// Neighbours under the same headings merged while the merged chunk fits.
    fn merge(&self, raws: Vec<Raw>) -> Vec<Raw> {
        let mut out: Vec<Raw> = Vec::with_capacity(raws.len());
        let mut pending: Option<Raw> = None;
        for r in raws {
            let Some(cur) = pending.take() else {
                pending = Some(r);
                continue;
            };
            if !cur.picture && !r.picture && cur.headings == r.headings {
                let merged = Raw {
                    content: format!("{}\n{}", cur.content, r.content),
                    refs: cur.refs.iter().chain(r.refs.iter()).copied().collect(),
                    headings: cur.headings.clone(),
                    picture: false,
                };
                if self.fits(&merged) {
                    pending = Some(merged);
                    continue;
                }
            }
            out.push(cur);
            pending = Some(r);
        }
        out.extend(pending);
        out
    }
}

/// The shortest piece a cut aims for (a word or two).
const MIN_PIECE_CHARS: usize = 16;

fn split_fit(text: &str, fits: &dyn Fn(&str) -> bool, max_chars: usize, out: &mut Vec<String>) {
    if fits(text) || max_chars < MIN_PIECE_CHARS {
        out.push(text.to_string());
        return;
    }
    let limit = max_chars.min(text.chars().count().saturating_sub(1));
    let pieces = super::chunker::split_long(text, limit.max(1));
    if pieces.len() < 2 {
        out.push(text.to_string());
        return;
    }
    for p in pieces {
        if fits(p) {
            out.push(p.to_string());
        } else {
            split_fit(p, fits, p.chars().count() * 3 / 4, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(content: &str, refs: Vec<usize>, headings: &[&str]) -> Raw {
        Raw {
            content: content.into(),
            refs,
            headings: (!headings.is_empty())
                .then(|| headings.iter().map(|h| h.to_string()).collect()),
            picture: false,
        }
    }

    fn hybrid(max_tokens: usize) -> Hybrid {
        Hybrid {
            max_tokens,
            merge_peers: true,
            count: TokenCount::Estimate,
        }
    }

    #[test]
    fn small_neighbours_under_one_heading_merge_while_they_fit() {
        let h = hybrid(10); // 40 characters with the heading
        let out = h.refine(
            vec![
                raw("one two", vec![0], &["H"]),
                raw("three four", vec![1], &["H"]),
                raw("five six seven eight nine", vec![2], &["H"]),
                raw("other", vec![3], &["G"]),
            ],
            &[],
        );
        let got: Vec<(&str, Vec<usize>)> = out
            .iter()
            .map(|r| (r.content.as_str(), r.refs.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("one two\nthree four", vec![0, 1]),
                ("five six seven eight nine", vec![2]),
                ("other", vec![3]),
            ]
        );
        // Every chunk keeps its headings.
        assert_eq!(out[0].headings.as_deref(), Some(&["H".to_string()][..]));
    }

    #[test]
    fn a_long_text_is_cut_at_boundaries_into_pieces_that_fit() {
        let h = hybrid(12);
        let text = "First sentence here. Second sentence there. Third one is a bit longer. Fourth.";
        let mut out = Vec::new();
        h.split_text(raw(text, vec![0], &["Sec"]), &mut out);
        assert!(out.len() > 1);
        for r in &out {
            assert!(h.fits(r), "{:?} does not fit", r.content);
            assert_eq!(r.refs, [0]);
        }
        let joined: Vec<&str> = out.iter().map(|r| r.content.as_str()).collect();
        assert_eq!(joined.join(" "), text);
    }

    #[test]
    fn pictures_are_never_merged() {
        let h = hybrid(100);
        let mut pic = raw("figure", vec![1], &[]);
        pic.picture = true;
        let out = h.refine(
            vec![raw("a", vec![0], &[]), pic, raw("b", vec![2], &[])],
            &[],
        );
        assert_eq!(out.len(), 3);
    }
}
