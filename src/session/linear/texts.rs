//! The text table: the long texts of rewritten parts (capsules), each kept once and
//! stored as a change to the text before it.
//!
//! A question's capsule is the previous one with a few entries added or moved and its
//! group labels renumbered, so storing each capsule whole makes the file grow with the
//! square of the conversation. Here a text is written as line operations over the
//! previous text of the table: copy a run of its lines, copy a run while adding a
//! constant to the one number of every line of one shape (a renumbered label), or new
//! lines. Nothing here knows what a capsule is: any text works, and reading rebuilds it
//! byte for byte. The first text is written whole; a bare string elsewhere is a text of
//! an older file (version 2, each text whole), converted as it is read.
//!
//! Texts of different kinds take turns in the table (a question's capsule, then the
//! list of its cited pictures, one item a line): a text is therefore written over the
//! newest earlier text that begins like it ([`head`]), which is the text before it
//! unless another kind came between (then it is stored as [`StoredText::Over`]).
//!
//! In memory a text is its lines, each shared with the texts it was copied from: a
//! capsule or a list of pictures that grew by a line holds pointers to the lines of the
//! one before, so the table costs memory (and reading it time) for what each text
//! added, not for every text whole.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One operation of a stored text, over the lines (split at `\n`) of the text before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TextOp {
    /// New lines, joined with `\n`.
    Lines(String),
    /// Lines `from..from + len` of the previous text.
    Copy(usize, usize),
    /// Lines `from..from + len` of the previous text, where every line holding exactly
    /// one run of digits and reading `shape` with the run replaced by `#` gets the
    /// number plus `add`.
    Shift(usize, usize, i64, String),
}

/// A text as the file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StoredText {
    /// Whole: the first text, or a text of an older file.
    Whole(String),
    /// Operations over the previous text of the table.
    Ops(Vec<TextOp>),
    /// Operations over text `over` of the table, an earlier one than the previous
    /// (format version 4).
    Over {
        /// The text they apply to.
        over: usize,
        /// The operations.
        ops: Vec<TextOp>,
    },
}

/// How a text begins: its first line, or its first 64 bytes when that line is longer.
/// Texts of one kind (capsules under their header, lists of pictures) begin alike.
fn head(text: &str) -> &[u8] {
    let b = &text.as_bytes()[..text.len().min(64)];
    b.iter()
        .position(|&c| c == b'\n')
        .map_or(b, |end| &b[..end])
}

/// A text as the table holds it: its lines (split at `\n`), shared between texts.
type Lines = Vec<Arc<str>>;

/// The lines of `text`, each held on its own.
fn lines_of(text: &str) -> Lines {
    text.split('\n').map(Arc::from).collect()
}

/// The text of `lines`.
fn joined(lines: &[Arc<str>]) -> String {
    let mut text = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for (i, l) in lines.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        text.push_str(l);
    }
    text
}

/// How the text of `lines` begins ([`head`]).
fn head_of(lines: &[Arc<str>]) -> &[u8] {
    let first = lines.first().map_or(&b""[..], |l| l.as_bytes());
    &first[..first.len().min(64)]
}

/// The distinct long texts of a session's rewritten parts.
#[derive(Debug, Clone, Default)]
pub struct Texts {
    items: Vec<Lines>,
    /// `stored[i]` rebuilds `items[i]` from an earlier text (or is it whole).
    stored: Vec<StoredText>,
}

impl PartialEq for Texts {
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items
    }
}

impl Texts {
    /// How many texts.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Text `i`.
    pub fn get(&self, i: usize) -> Option<String> {
        self.items.get(i).map(|l| joined(l))
    }

    /// The texts in order.
    pub fn iter(&self) -> impl Iterator<Item = String> + '_ {
        self.items.iter().map(|l| joined(l))
    }

    /// The index of `text`, added last if it is new.
    pub fn index_of(&mut self, text: &str) -> usize {
        let want: Vec<&str> = text.split('\n').collect();
        // The newest texts are the likeliest.
        let same =
            |x: &Lines| x.len() == want.len() && x.iter().zip(&want).all(|(a, b)| **a == **b);
        if let Some(i) = self.items.iter().rposition(same) {
            return i;
        }
        self.push(text);
        self.items.len() - 1
    }

    /// Adds `text` last, stored as a change to the newest text that begins like it
    /// (else to the text before it), and held as lines shared with that text.
    pub fn push(&mut self, text: &str) {
        let Some(last) = self.items.len().checked_sub(1) else {
            self.items.push(lines_of(text));
            self.stored.push(StoredText::Whole(text.to_string()));
            return;
        };
        let over = Some(last)
            .filter(|&l| head_of(&self.items[l]) != head(text))
            .and_then(|l| {
                let i = self
                    .items
                    .iter()
                    .rposition(|t| !t.is_empty() && head_of(t) == head(text))?;
                (i != l).then_some(i)
            });
        let base = &self.items[over.unwrap_or(last)];
        let prev: Vec<&str> = base.iter().map(|l| &**l).collect();
        let ops = encode_over(&prev, text);
        // What is stored always rebuilds what is held: were the operations ever not to
        // apply, the text is stored as new lines.
        let (stored, lines) = match apply_lines(base, &ops)
            .ok()
            .filter(|l| l.len() == text.split('\n').count())
        {
            Some(lines) => match over {
                Some(over) => (StoredText::Over { over, ops }, lines),
                None => (StoredText::Ops(ops), lines),
            },
            None => (
                StoredText::Ops(vec![TextOp::Lines(text.to_string())]),
                lines_of(text),
            ),
        };
        self.items.push(lines);
        self.stored.push(stored);
    }

    /// The stored form of texts `from..`, each over the one before it.
    pub(crate) fn stored_from(&self, from: usize) -> &[StoredText] {
        &self.stored[from.min(self.stored.len())..]
    }

    /// Keeps the first `n` texts.
    pub(crate) fn truncate(&mut self, n: usize) {
        self.items.truncate(n);
        self.stored.truncate(n);
    }

    /// The newest text of each kind ([`head`]) among the last `back` texts, with its
    /// index, oldest first: what a writer that continues the table without holding it
    /// needs ([`Texts::continuing`]).
    pub fn newest_by_head(&self, back: usize) -> Vec<(usize, String)> {
        let mut seen: Vec<&[u8]> = Vec::new();
        let mut out = Vec::new();
        let from = self.items.len().saturating_sub(back);
        for i in (from..self.items.len()).rev() {
            // A text not held (a table continued without it) has no line.
            if self.items[i].is_empty() {
                continue;
            }
            let h = head_of(&self.items[i]);
            if !seen.contains(&h) {
                seen.push(h);
                out.push((i, joined(&self.items[i])));
            }
        }
        out.reverse();
        out
    }

    /// A table of `len` texts of which only `known` (index, text) are held: texts pushed
    /// onto it are stored as over the full table ([`Texts::push`]) when their base is
    /// among the known ones, and as new lines otherwise, so what it adds
    /// ([`Texts::stored_from`] `len`) continues the full table exactly. The texts it does
    /// not hold are empty and never found by [`Texts::index_of`] (a text has a line).
    pub fn continuing(len: usize, known: Vec<(usize, String)>) -> Result<Texts, String> {
        let mut texts = Texts {
            items: vec![Lines::new(); len],
            stored: vec![StoredText::Ops(Vec::new()); len],
        };
        for (i, text) in known {
            let slot = texts
                .items
                .get_mut(i)
                .ok_or_else(|| format!("text {i} of a table of {len}"))?;
            *slot = lines_of(&text);
        }
        Ok(texts)
    }

    /// Appends texts in stored form, each over the one before it.
    pub(crate) fn extend_stored(&mut self, stored: Vec<StoredText>) -> Result<(), String> {
        for s in stored {
            match s {
                // An older file's text (or the first): kept as this format stores it.
                StoredText::Whole(text) => self.push(&text),
                StoredText::Ops(ops) => {
                    let Some(prev) = self.items.last() else {
                        return Err("the first text is a change to no text".into());
                    };
                    let lines = apply_lines(prev, &ops)
                        .map_err(|e| format!("text {} does not apply: {e}", self.items.len()))?;
                    self.items.push(lines);
                    self.stored.push(StoredText::Ops(ops));
                }
                StoredText::Over { over, ops } => {
                    let n = self.items.len();
                    let Some(base) = self.items.get(over) else {
                        return Err(format!("text {n} is a change to text {over}, of {n}"));
                    };
                    let lines = apply_lines(base, &ops)
                        .map_err(|e| format!("text {n} does not apply: {e}"))?;
                    self.items.push(lines);
                    self.stored.push(StoredText::Over { over, ops });
                }
            }
        }
        Ok(())
    }
}

impl Serialize for Texts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.stored.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Texts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let stored = Vec::<StoredText>::deserialize(d)?;
        let mut texts = Texts::default();
        texts
            .extend_stored(stored)
            .map_err(serde::de::Error::custom)?;
        Ok(texts)
    }
}

/// `text` stored over `prev` ([`encode_over`]), or whole when there is no previous text.
#[cfg(test)]
fn encode(prev: Option<&str>, text: &str) -> StoredText {
    let Some(prev) = prev else {
        return StoredText::Whole(text.to_string());
    };
    let prev: Vec<&str> = prev.split('\n').collect();
    StoredText::Ops(encode_over(&prev, text))
}

/// The operations that store `text` over the lines `prev`: a single `Lines` when
/// nothing shared makes them smaller (never a bare string, which would read as an older
/// file's text and be converted again).
fn encode_over(prev: &[&str], text: &str) -> Vec<TextOp> {
    let lines: Vec<&str> = text.split('\n').collect();
    let ops = diff_lines(prev, &lines);
    let size: usize = ops
        .iter()
        .map(|op| match op {
            TextOp::Lines(s) => s.len() + 3,
            TextOp::Copy(..) => 12,
            TextOp::Shift(_, _, _, shape) => shape.len() + 20,
        })
        .sum();
    if size >= text.len() {
        vec![TextOp::Lines(text.to_string())]
    } else {
        ops
    }
}

/// The one run of ASCII digits of a line: its byte range and value.
#[derive(Debug, Clone, Copy)]
struct Num {
    start: usize,
    end: usize,
    value: u64,
}

fn one_number(line: &str) -> Option<Num> {
    let b = line.as_bytes();
    let start = b.iter().position(u8::is_ascii_digit)?;
    let end = start + b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
    if b[end..].iter().any(u8::is_ascii_digit) {
        return None;
    }
    let value = line[start..end].parse().ok()?;
    Some(Num { start, end, value })
}

/// The line's prefix and suffix around its number: its shape.
fn shape_of<'a>(line: &'a str, n: &Num) -> (&'a str, &'a str) {
    (&line[..n.start], &line[n.end..])
}

/// Whether `line` (whose one number is `n`) reads `shape` with the number as `#`.
fn has_shape(line: &str, n: &Num, shape: &str) -> bool {
    let (pre, suf) = shape_of(line, n);
    shape.len() == pre.len() + 1 + suf.len()
        && shape.as_bytes()[pre.len()] == b'#'
        && shape.as_bytes()[..pre.len()] == *pre.as_bytes()
        && shape.as_bytes()[pre.len() + 1..] == *suf.as_bytes()
}

/// The lines `ops` make of the lines `lines`: a copied line is the same line, shared.
fn apply_lines(lines: &[Arc<str>], ops: &[TextOp]) -> Result<Lines, String> {
    let mut out: Lines = Vec::with_capacity(lines.len() + 8);
    let run = |from: usize, len: usize| {
        lines
            .get(from..from.checked_add(len).ok_or("a run past the end")?)
            .ok_or_else(|| format!("lines {from}..{} of {}", from + len, lines.len()))
    };
    for op in ops {
        match op {
            TextOp::Lines(s) => out.extend(s.split('\n').map(Arc::from)),
            TextOp::Copy(from, len) => out.extend_from_slice(run(*from, *len)?),
            TextOp::Shift(from, len, add, shape) => {
                let (first, last) = (shape.as_bytes().first(), shape.as_bytes().last());
                for l in run(*from, *len)? {
                    // Most lines are not of the shape: told by their ends, copied as they are.
                    let b = l.as_bytes();
                    let candidate =
                        b.len() >= shape.len() && b.first() == first && b.last() == last;
                    let number = candidate
                        .then(|| one_number(l).filter(|n| has_shape(l, n, shape)))
                        .flatten();
                    match number {
                        Some(n) => {
                            let value = n
                                .value
                                .checked_add_signed(*add)
                                .ok_or("a number out of range")?;
                            let (pre, suf) = shape_of(l, &n);
                            let mut line = String::with_capacity(l.len() + 4);
                            line.push_str(pre);
                            let _ = write!(line, "{value}");
                            line.push_str(suf);
                            out.push(Arc::from(line));
                        }
                        None => out.push(l.clone()),
                    }
                }
            }
        }
    }
    Ok(out)
}

/// A run found by [`diff_lines`]: `len` lines of the previous text from `from`, with the
/// numbers of lines of `shape` shifted by `add`.
#[derive(Clone, Copy, Default)]
struct Run<'a> {
    from: usize,
    len: usize,
    shift: Option<(i64, &'a str, &'a str)>,
}

/// Operations that make the lines `l` of the lines `p`, in time linear in both (a few
/// candidate runs are tried at each line: where the last run ended, and the first place
/// after it holding the same line or a line of the same shape).
fn diff_lines(p: &[&str], l: &[&str]) -> Vec<TextOp> {
    let pn: Vec<Option<Num>> = p.iter().map(|s| one_number(s)).collect();
    let ln: Vec<Option<Num>> = l.iter().map(|s| one_number(s)).collect();
    let mut exact: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut shaped: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (j, line) in p.iter().enumerate() {
        exact.entry(line).or_default().push(j);
        if let Some(n) = &pn[j] {
            shaped.entry(shape_of(line, n)).or_default().push(j);
        }
    }
    // The first position at or after `cursor`, and the first of all.
    let near = |v: Option<&Vec<usize>>, cursor: usize| -> [Option<usize>; 2] {
        let Some(v) = v else { return [None, None] };
        let k = v.partition_point(|&j| j < cursor);
        [v.get(k).copied(), v.first().copied()]
    };
    let extend = |i: usize, j: usize| -> Run {
        let mut run = Run {
            from: j,
            len: 0,
            shift: None,
        };
        while i + run.len < l.len() && j + run.len < p.len() {
            let k = run.len;
            let (pl, ll) = (p[j + k], l[i + k]);
            let ok = match run.shift {
                None => {
                    pl == ll
                        || match (&pn[j + k], &ln[i + k]) {
                            (Some(a), Some(b))
                                if shape_of(pl, a) == shape_of(ll, b)
                                    && canonical(ll, b)
                                    // Lines of this shape earlier in the run were
                                    // copied as they are: they would shift too.
                                    && !(j..j + k).any(|m| {
                                        pn[m].is_some_and(|x| {
                                            shape_of(p[m], &x) == shape_of(pl, a)
                                        })
                                    }) =>
                            {
                                let (pre, suf) = shape_of(pl, a);
                                run.shift = Some((b.value as i64 - a.value as i64, pre, suf));
                                true
                            }
                            _ => false,
                        }
                }
                Some((add, pre, suf)) => match (&pn[j + k], &ln[i + k]) {
                    (Some(a), _) if shape_of(pl, a) == (pre, suf) => ln[i + k].is_some_and(|b| {
                        shape_of(ll, &b) == (pre, suf)
                            && canonical(ll, &b)
                            && a.value.checked_add_signed(add) == Some(b.value)
                    }),
                    _ => pl == ll,
                },
            };
            if !ok {
                break;
            }
            run.len += 1;
        }
        run
    };
    let mut ops = Vec::new();
    let mut literal: Vec<&str> = Vec::new();
    let (mut i, mut cursor) = (0, 0);
    while i < l.len() {
        let mut candidates = vec![Some(cursor)];
        candidates.extend(near(exact.get(l[i]), cursor));
        if let Some(n) = &ln[i] {
            candidates.extend(near(shaped.get(&shape_of(l[i], n)), cursor));
        }
        let mut best = Run::default();
        for j in candidates.into_iter().flatten() {
            if j < p.len() {
                let r = extend(i, j);
                if r.len > best.len {
                    best = r;
                }
            }
        }
        // A single short line is cheaper written out.
        if best.len == 0 || (best.len == 1 && l[i].len() < 16) {
            literal.push(l[i]);
            i += 1;
            cursor += 1;
            continue;
        }
        if !literal.is_empty() {
            ops.push(TextOp::Lines(literal.join("\n")));
            literal.clear();
        }
        ops.push(match best.shift {
            None => TextOp::Copy(best.from, best.len),
            Some((add, pre, suf)) => {
                TextOp::Shift(best.from, best.len, add, format!("{pre}#{suf}"))
            }
        });
        i += best.len;
        cursor = best.from + best.len;
    }
    if !literal.is_empty() {
        ops.push(TextOp::Lines(literal.join("\n")));
    }
    ops
}

/// Whether the line's number is written as the decimal of its value (no leading zero),
/// as a shifted line is rebuilt.
fn canonical(line: &str, n: &Num) -> bool {
    let digits = &line[n.start..n.end];
    digits == "0" || !digits.starts_with('0')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A capsule-like text: a header, then groups of entries, newest first, each
    /// labelled with its position.
    fn capsule(groups: &[&[&str]]) -> String {
        let mut t = String::from("Evidence cited so far:");
        for (g, entries) in groups.iter().enumerate() {
            t.push_str(&format!("\n\n[Cited evidence group {}]", g + 1));
            for e in *entries {
                t.push_str(&format!(
                    "\n\n[{e}] Source: \"doc 7\"\nThe passage of {e}, line one.\nline two"
                ));
            }
        }
        t
    }

    fn roundtrip(prev: &str, text: &str) -> StoredText {
        let stored = encode(Some(prev), text);
        let mut t = Texts::default();
        t.push(prev);
        t.extend_stored(vec![stored.clone()]).unwrap();
        assert_eq!(t.get(1).as_deref(), Some(text));
        stored
    }

    #[test]
    fn a_new_group_in_front_is_a_few_operations_whatever_the_number_of_groups() {
        let names: Vec<String> = (0..300).map(|k| format!("c{k}-0")).collect();
        let groups: Vec<Vec<&str>> = names.iter().map(|n| vec![n.as_str()]).collect();
        let refs: Vec<&[&str]> = groups.iter().map(Vec::as_slice).collect();
        let prev = capsule(&refs[1..]);
        let text = capsule(&refs);
        let StoredText::Ops(ops) = roundtrip(&prev, &text) else {
            panic!("not stored as a change")
        };
        assert!(ops.len() <= 6, "{ops:?}");
        let size = serde_json::to_string(&ops).unwrap().len();
        assert!(size < 300, "{size} bytes: {ops:?}");
        assert!(ops.iter().any(|o| matches!(o, TextOp::Shift(_, _, 1, s)
            if s == "[Cited evidence group #]")));
    }

    #[test]
    fn moved_and_dropped_entries_and_odd_lines_rebuild_exactly() {
        let prev = capsule(&[&["c3-0", "c3-1"], &["c2-0"], &["c1-0", "c1-1"]]);
        // c1-1 cited again: it moves to a new first group.
        roundtrip(
            &prev,
            &capsule(&[&["c1-1"], &["c3-0", "c3-1"], &["c2-0"], &["c1-0"]]),
        );
        roundtrip(&prev, &capsule(&[&["c2-0"]]));
        roundtrip(&prev, "");
        roundtrip("", &prev);
        roundtrip(&prev, &format!("{prev}\n"));
        // Leading zeros, numbers that would go negative, a label copied unchanged
        // before one that shifts.
        roundtrip("[g 007]\n[g 1]\n[g 2]", "[g 8]\n[g 2]\n[g 3]");
        roundtrip("[g 5]\n[g 6]\nx", "[g 0]\n[g 1]\nx");
        roundtrip("[g 1]\nsame line\n[g 2]\n", "[g 1]\nsame line\n[g 3]\n");
        roundtrip("a 1 b 2\nü 3 ö\n", "a 1 b 3\nü 4 ö\n");
    }

    #[test]
    fn texts_read_back_from_their_stored_form_and_from_an_older_files_strings() {
        let mut t = Texts::default();
        let texts = [
            capsule(&[&["a"]]),
            capsule(&[&["b"], &["a"]]),
            capsule(&[&["c", "b"], &["a"]]),
            "unrelated".to_string(),
        ];
        for x in &texts {
            t.index_of(x);
        }
        assert_eq!(t.index_of(&texts[1]), 1);
        let json = serde_json::to_string(&t).unwrap();
        let back: Texts = serde_json::from_str(&json).unwrap();
        assert_eq!(
            back.iter().collect::<Vec<_>>(),
            texts.each_ref().map(String::as_str)
        );
        // Version 2 wrote every text whole.
        let old: Texts = serde_json::from_str(&serde_json::to_string(&texts).unwrap()).unwrap();
        assert_eq!(old, back);
        assert_eq!(serde_json::to_string(&old).unwrap(), json);
        // A change to no text, or one that does not apply, is refused.
        assert!(serde_json::from_str::<Texts>(r#"[[[0, 1]]]"#).is_err());
        let err = serde_json::from_str::<Texts>(r#"["a\nb", [[1, 5]]]"#).unwrap_err();
        assert!(err.to_string().contains("text 1 does not apply"), "{err}");
    }

    /// A table continued by a writer that holds only its newest text of each kind (a
    /// question saved through a resume file) finds and stores texts as the whole table.
    #[test]
    fn a_table_continued_from_its_newest_texts_stores_what_the_whole_table_would() {
        let lists: Vec<String> = (1..=6)
            .map(|n| {
                let items: Vec<String> = (0..n).map(|k| format!("{{\"picture\":{k}}}")).collect();
                format!("[\n{}\n]", items.join("\n,"))
            })
            .collect();
        let capsules: Vec<String> = (1..=6)
            .map(|n| capsule(&(0..n).map(|_| &["c1-0"][..]).collect::<Vec<_>>()))
            .collect();
        let mut whole = Texts::default();
        for (c, l) in capsules.iter().zip(&lists).take(4) {
            whole.index_of(c);
            whole.index_of(l);
        }
        let len = whole.len();
        let newest = whole.newest_by_head(64);
        assert_eq!(newest.len(), 2, "one text of each kind: {newest:?}");
        let mut continued = Texts::continuing(len, newest).unwrap();
        for (c, l) in capsules.iter().zip(&lists).skip(3) {
            // The capsule of the 4th question again: found, not added.
            assert_eq!(continued.index_of(c), whole.index_of(c));
            assert_eq!(continued.index_of(l), whole.index_of(l));
        }
        assert_eq!(continued.len(), whole.len());
        assert_eq!(continued.stored_from(len), whole.stored_from(len));
        // What it added reads back over the whole table.
        let mut read = Texts::default();
        read.extend_stored(whole.stored_from(0)[..len].to_vec())
            .unwrap();
        read.extend_stored(continued.stored_from(len).to_vec())
            .unwrap();
        assert!(read.iter().eq(whole.iter()));
        // Its own newest texts skip the texts it does not hold.
        assert!(
            continued
                .newest_by_head(64)
                .iter()
                .all(|(_, t)| !t.is_empty())
        );
    }

    /// Texts of two kinds taking turns: each is written over the newest one of its own
    /// kind (not over the other kind just before it), and the table reads back the same
    /// from its stored form, whole or after a table it continues (a journal's texts).
    #[test]
    fn texts_of_two_kinds_taking_turns_are_each_written_over_their_own_kind() {
        let lists: Vec<String> = (1..=4)
            .map(|n| {
                let items: Vec<String> = (0..n).map(|k| format!("{{\"picture\":{k}}}")).collect();
                format!("[\n{}\n]", items.join("\n,"))
            })
            .collect();
        let capsules: Vec<String> = (1..=4)
            .map(|n| capsule(&(0..n).map(|_| &["c1-0"][..]).collect::<Vec<_>>()))
            .collect();
        let mut t = Texts::default();
        for (c, l) in capsules.iter().zip(&lists) {
            t.index_of(c);
            t.index_of(l);
        }
        assert_eq!(t.len(), 8);
        let stored = t.stored_from(0).to_vec();
        assert!(matches!(stored[0], StoredText::Whole(_)));
        assert!(
            matches!(stored[1], StoredText::Ops(_)),
            "the first list: over the text before"
        );
        for (i, s) in stored.iter().enumerate().skip(2) {
            let StoredText::Over { over, ops } = s else {
                panic!("text {i} is not written over its own kind: {s:?}");
            };
            assert_eq!(*over, i - 2, "text {i}");
            assert!(
                ops.iter()
                    .all(|op| !matches!(op, TextOp::Lines(l) if l.contains("picture\":0"))),
                "text {i} copies what it shares: {ops:?}"
            );
        }
        // A list that grew holds the lines of the list before it, not copies.
        let shared =
            |t: &Texts| (1..4).all(|k| Arc::ptr_eq(&t.items[2 * k + 1][1], &t.items[2 * k - 1][1]));
        assert!(shared(&t), "lines shared as written");
        let json = serde_json::to_string(&t).unwrap();
        let read: Texts = serde_json::from_str(&json).unwrap();
        assert!(read.iter().eq(t.iter()), "read back whole");
        assert!(shared(&read), "lines shared as read");
        let mut continued = Texts::default();
        continued.extend_stored(stored[..3].to_vec()).unwrap();
        continued.extend_stored(stored[3..].to_vec()).unwrap();
        assert!(continued.iter().eq(t.iter()), "read back in two pieces");
        // A change to a text the table does not have yet is refused.
        let mut short = Texts::default();
        let err = short.extend_stored(vec![
            StoredText::Whole("a".into()),
            StoredText::Over {
                over: 5,
                ops: vec![],
            },
        ]);
        assert!(err.is_err());
    }
}
