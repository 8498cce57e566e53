//! Request snapshots in linear form (format version 2).
//!
//! A request's stored history is almost always a prefix of the session's committed
//! `messages`, and what was sent is that history with a few messages rewritten (the
//! capsule, receipts, stripped pictures, a redirect or notice). So a request is kept as
//! a reference into `messages` plus only what differs: `raw` is `messages[..upto]`
//! followed by `extra` (messages the committed history no longer holds in that form).
//! What was sent is a list of sources (a message of the raw history, or a rewritten
//! message written out once) stored as a change to the previous request's list: the
//! first `keep` sources of the previous request, then `tail`, pieces that are either a
//! range of the raw history or one rewritten message. A rewritten message (a receipt,
//! say) is therefore written once, in the request that first sent it, and the file
//! grows with what each request added. Instructions and tool lists are kept once per
//! distinct value, in tables
//! beside the requests, and the token estimates are recomputed (they are a function of
//! the messages and instructions; kept only if one ever differs). A version-1 snapshot
//! (full copies) is read as [`StoredRequest::Full`] and converted against the history.

use std::borrow::Cow;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::engine::capability::ToolDef;
use crate::engine::chat::{estimate_message_tokens, estimate_tokens};
use crate::engine::events::{EstimateMemo, RequestSnapshot, TokenCounts};
use crate::engine::messages::ModelMessage;
use crate::engine::tokens::TokenReport;

mod edit;
mod read;
mod texts;
mod window;

pub use edit::{Edit, PartSrc};
pub use read::{RequestTotals, TokenPrefix, snapshot, snapshots, totals};
pub use texts::{StoredText, TextOp, Texts};
pub use window::{TableEnd, WindowEncoder, WindowTables, fingerprint, tools_fingerprint};

/// A request's stored history: `messages[..upto]` with `patches` in place of the
/// messages the committed history no longer holds in that form, then `extra`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawRef {
    /// How many leading messages of the committed history it covers.
    pub upto: usize,
    /// Messages at those positions that differ from the committed ones, by position.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<(usize, ModelMessage)>,
    /// What follows them at this request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra: Vec<ModelMessage>,
}

/// One piece of the tail of what was sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Piece {
    /// The raw history's messages `start..end`, sent as stored.
    Raw(usize, usize),
    /// A message sent in place of (or beside) the stored ones.
    Sent(Box<ModelMessage>),
    /// A message sent in place of raw message `base`, as a change to it.
    Edit(Box<Edit>),
}

/// One model request in linear form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinearRequest {
    /// The run.
    pub run_id: String,
    /// 1-based request index within the run.
    pub request: usize,
    /// The stored history at this request.
    pub raw: RawRef,
    /// How many leading sources of the previous request's sent list this one shares.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub keep: usize,
    /// The rest of what was sent.
    pub tail: Vec<Piece>,
    /// Index into the instructions table.
    pub instructions: usize,
    /// Index into the tool-list table.
    pub tools: usize,
    /// The raw estimate, only when it is not the recomputed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_tokens: Option<TokenCounts>,
    /// The sent estimate, only when it is not the recomputed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_tokens: Option<TokenCounts>,
    /// The counted and provider-reported figures (a few numbers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenReport>,
}

pub(super) fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A request as a session file holds it: linear (version 2) or a full copy (version 1,
/// converted as the session is read).
#[derive(Debug, Clone, PartialEq)]
pub enum StoredRequest {
    /// Linear form.
    Linear(Box<LinearRequest>),
    /// A version-1 snapshot.
    Full(Box<RequestSnapshot>),
}

impl Serialize for StoredRequest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            StoredRequest::Linear(l) => l.as_ref().serialize(s),
            StoredRequest::Full(f) => f.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for StoredRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Read as text first and then as the form it is: the linear form, or a
        // version-1 full copy (which has `compacted` and no `tail`); never as a JSON tree.
        let raw = <Box<serde_json::value::RawValue>>::deserialize(d)?;
        match serde_json::from_str::<LinearRequest>(raw.get()) {
            Ok(l) => Ok(StoredRequest::Linear(Box::new(l))),
            Err(linear) => match serde_json::from_str::<RequestSnapshot>(raw.get()) {
                Ok(f) => Ok(StoredRequest::Full(Box::new(f))),
                Err(full) if raw.get().contains("\"compacted\"") => Err(D::Error::custom(full)),
                Err(_) => Err(D::Error::custom(linear)),
            },
        }
    }
}

/// The distinct instructions and tool lists of a session's requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tables {
    /// Distinct instructions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instructions: Vec<String>,
    /// Distinct tool lists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_sets: Vec<Vec<ToolDef>>,
    /// Long texts of rewritten parts (capsules), each once, stored as changes to the
    /// text before.
    #[serde(default, skip_serializing_if = "Texts::is_empty")]
    pub texts: Texts,
}

pub(super) fn index_of<T: PartialEq + Clone>(table: &mut Vec<T>, value: &T) -> usize {
    // The newest entries are the likeliest.
    if let Some(i) = table.iter().rposition(|x| x == value) {
        return i;
    }
    table.push(value.clone());
    table.len() - 1
}

/// Where one sent message comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Src {
    /// Messages `a..b` of the request's own raw history.
    Raw(usize, usize),
    /// Tail piece `piece` of request `request` (a rewritten message).
    Sent { request: usize, piece: usize },
}

impl Src {
    fn len(self) -> usize {
        match self {
            Src::Raw(a, b) => b.saturating_sub(a),
            Src::Sent { .. } => 1,
        }
    }
}

/// A request's sent list as runs of sources.
#[derive(Debug, Clone, Default)]
pub(super) struct SentList {
    runs: Vec<Src>,
    len: usize,
}

impl SentList {
    fn truncate(&mut self, n: usize) {
        while self.len > n {
            let Some(last) = self.runs.pop() else { break };
            let l = last.len();
            if self.len - l >= n {
                self.len -= l;
                continue;
            }
            // Split the last run.
            let keep = n - (self.len - l);
            if let Src::Raw(a, _) = last {
                self.runs.push(Src::Raw(a, a + keep));
            }
            self.len = n;
        }
    }

    fn push(&mut self, src: Src) {
        if let (Some(Src::Raw(_, end)), Src::Raw(a, b)) = (self.runs.last_mut(), src)
            && *end == a
        {
            *end = b;
            self.len += b - a;
            return;
        }
        self.len += src.len();
        self.runs.push(src);
    }

    /// Applies request `index`'s change.
    fn apply(&mut self, index: usize, r: &LinearRequest) {
        self.truncate(r.keep);
        for (k, p) in r.tail.iter().enumerate() {
            match p {
                Piece::Raw(a, b) => self.push(Src::Raw(*a, *b)),
                Piece::Sent(_) | Piece::Edit(_) => self.push(Src::Sent {
                    request: index,
                    piece: k,
                }),
            }
        }
    }

    /// The sources one by one.
    fn each(&self) -> impl Iterator<Item = Src> + '_ {
        self.runs.iter().flat_map(|s| {
            let (raw, other) = match *s {
                Src::Raw(a, b) => (a..b, None),
                other => (0..0, Some(other)),
            };
            raw.map(|j| Src::Raw(j, j + 1)).chain(other)
        })
    }
}

pub(super) fn sent_message<'a>(
    requests: &'a [LinearRequest],
    raw: &'a [ModelMessage],
    tables: &Tables,
    src: Src,
) -> Option<Cow<'a, ModelMessage>> {
    match src {
        Src::Raw(j, _) => raw.get(j).map(Cow::Borrowed),
        Src::Sent { request, piece } => match requests.get(request)?.tail.get(piece)? {
            Piece::Sent(m) => Some(Cow::Borrowed(m)),
            // An edit applies to the raw message of this request's own history.
            Piece::Edit(e) => raw
                .get(e.base)
                .and_then(|b| e.apply(b, tables))
                .map(Cow::Owned),
            Piece::Raw(..) => None,
        },
    }
}

/// Whether source `src` gives `sent`. When it is an edit (`edit`, [`edit_of`]), the edit
/// is first compared without rebuilding its message ([`Edit::surely_gives`]), and rebuilt
/// only when that cannot tell.
fn gives(
    requests: &[LinearRequest],
    raw: &[ModelMessage],
    tables: &Tables,
    src: Src,
    edit: Option<&Edit>,
    sent: &ModelMessage,
    scratch: &mut Vec<u8>,
) -> bool {
    let told = edit.is_some_and(|e| {
        raw.get(e.base)
            .is_some_and(|b| e.surely_gives(b, sent, scratch))
    });
    told || sent_message(requests, raw, tables, src).as_deref() == Some(sent)
}

/// The edit a rewritten source is, when it is an edit of a stored message.
fn edit_of(requests: &[LinearRequest], src: Src) -> Option<&Edit> {
    let Src::Sent { request, piece } = src else {
        return None;
    };
    match requests.get(request)?.tail.get(piece)? {
        Piece::Edit(e) => Some(e),
        _ => None,
    }
}

/// The sent list of request `n` (walking the changes from the first request).
pub(super) fn sent_list(requests: &[LinearRequest], n: usize) -> SentList {
    let mut list = SentList::default();
    for (i, r) in requests.iter().enumerate().take(n + 1) {
        list.apply(i, r);
    }
    list
}

/// `sent` as pieces of `raw`, each sent message looked for near where the last one was
/// found (compaction rewrites or inserts a few messages in place).
pub(super) fn pieces(
    raw: &[ModelMessage],
    sent: &[ModelMessage],
    cursor: usize,
    tables: &mut Tables,
) -> Vec<Piece> {
    pieces_in(raw, 0, sent, cursor, tables)
}

/// [`pieces`] over a window of the raw history: `raw[k]` is message `offset + k`, and
/// `cursor` and the pieces count from the history's start.
fn pieces_in(
    raw: &[ModelMessage],
    offset: usize,
    sent: &[ModelMessage],
    mut cursor: usize,
    tables: &mut Tables,
) -> Vec<Piece> {
    let at = |j: usize| j.checked_sub(offset).and_then(|k| raw.get(k));
    let end = offset + raw.len();
    let mut out: Vec<Piece> = Vec::new();
    for m in sent {
        let found = if at(cursor) == Some(m) {
            Some(cursor)
        } else {
            (cursor.saturating_sub(2).max(offset)..(cursor + 3).min(end))
                .find(|&j| at(j) == Some(m))
        };
        match found {
            Some(j) => {
                match out.last_mut() {
                    Some(Piece::Raw(_, end)) if *end == j => *end = j + 1,
                    _ => out.push(Piece::Raw(j, j + 1)),
                }
                cursor = j + 1;
            }
            None => {
                let edit = at(cursor).and_then(|b| Edit::of(cursor, b, m, tables));
                out.push(match edit {
                    Some(e) => Piece::Edit(Box::new(e)),
                    None => Piece::Sent(Box::new(m.clone())),
                });
                cursor += 1;
            }
        }
    }
    out
}

/// Appends requests in linear form, remembering the previous request's sent list.
pub struct Encoder<'m> {
    list: SentList,
    /// The estimates the run made, by message.
    memo: Option<&'m EstimateMemo>,
    /// Token estimates of the committed messages, computed once per encoder.
    estimates: Option<Vec<usize>>,
    /// The request this encoder encoded last (kept, not copied): its sent list is `list`,
    /// message by message, so a rewritten message need not be rebuilt from its edit to be
    /// compared.
    last: Option<Cow<'m, RequestSnapshot>>,
}

impl<'m> Encoder<'m> {
    /// Continues after `requests`.
    pub fn after(requests: &[LinearRequest]) -> Self {
        Encoder {
            list: match requests.len() {
                0 => SentList::default(),
                n => sent_list(requests, n - 1),
            },
            memo: None,
            estimates: None,
            last: None,
        }
    }

    /// Takes a message's estimate from `memo` when it holds that message: the same
    /// function of the same message, so what is recorded is what a reader recomputes.
    pub fn with_memo(mut self, memo: &'m EstimateMemo) -> Self {
        self.memo = Some(memo);
        self
    }

    fn estimate(&self, message: &ModelMessage) -> usize {
        self.memo
            .and_then(|memo| memo.get(message))
            .unwrap_or_else(|| estimate_message_tokens(message))
    }

    /// `snap`, the request after those already in `requests`, against the committed
    /// history `messages`; its instructions and tools go into `tables`. The encoder keeps
    /// `snap` (borrowed or owned, never copied) to compare the next request with.
    pub fn encode(
        &mut self,
        requests: &[LinearRequest],
        snap: Cow<'m, RequestSnapshot>,
        messages: &[ModelMessage],
        tables: &mut Tables,
    ) -> LinearRequest {
        let index = requests.len();
        let upto = snap.raw.len().min(messages.len());
        let patches: Vec<(usize, ModelMessage)> = snap.raw[..upto]
            .iter()
            .zip(messages)
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(j, (a, _))| (j, a.clone()))
            .collect();
        // How much of the previous request's sent list this one shares: a source is
        // shared when it gives the same message here (raw sources index this request's
        // own history).
        let mut keep = 0;
        let mut cursor = 0;
        let last = self.last.take();
        let mut scratch = Vec::new();
        for src in self.list.each() {
            let Some(sent) = snap.compacted.get(keep) else {
                break;
            };
            // A rewritten message the request before sent, over the same stored message
            // there and here, is that request's message again.
            let as_last = |base: usize| {
                let RequestSnapshot { raw, compacted, .. } = last.as_deref()?;
                let same_base = raw.get(base).is_some_and(|b| snap.raw.get(base) == Some(b));
                same_base.then(|| compacted.get(keep) == Some(sent))
            };
            let same = match src {
                Src::Raw(j, _) => snap.raw.get(j) == Some(sent),
                other => {
                    let edit = edit_of(requests, other);
                    match edit.and_then(|e| as_last(e.base)) {
                        Some(same) => same,
                        None => gives(requests, &snap.raw, tables, other, edit, sent, &mut scratch),
                    }
                }
            };
            if !same {
                break;
            }
            if let Src::Raw(j, _) = src {
                cursor = j + 1;
            }
            keep += 1;
        }
        let r = LinearRequest {
            run_id: snap.run_id.clone(),
            request: snap.request,
            raw: RawRef {
                upto,
                patches,
                extra: snap.raw[upto..].to_vec(),
            },
            keep,
            tail: pieces(&snap.raw, &snap.compacted[keep..], cursor, tables),
            instructions: index_of(&mut tables.instructions, &snap.instructions),
            tools: index_of(&mut tables.tool_sets, &snap.tools),
            raw_tokens: None,
            sent_tokens: None,
            tokens: snap.tokens.clone(),
        };
        self.list.apply(index, &r);
        // The estimates are recomputed when read; kept only if the recorded ones differ.
        // The committed messages' estimates are shared by every request of the commit.
        let mut estimates = self.estimates.take().unwrap_or_default();
        if estimates.len() != messages.len() {
            estimates = messages.iter().map(|m| self.estimate(m)).collect();
        }
        let patched: std::collections::HashSet<usize> =
            r.raw.patches.iter().map(|(j, _)| *j).collect();
        let raw_per: Vec<usize> = snap
            .raw
            .iter()
            .enumerate()
            .map(|(j, m)| match estimates.get(j) {
                Some(e) if j < upto && !patched.contains(&j) => *e,
                _ => self.estimate(m),
            })
            .collect();
        self.estimates = Some(estimates);
        let mut sent_per = Vec::with_capacity(snap.compacted.len());
        for (i, src) in self.list.each().enumerate() {
            sent_per.push(match src {
                Src::Raw(j, _) => raw_per.get(j).copied().unwrap_or(0),
                _ => snap.compacted.get(i).map_or(0, |m| self.estimate(m)),
            });
        }
        let instructions = estimate_tokens(&snap.instructions);
        let mut r = r;
        let (raw_tokens, sent_tokens) = (
            TokenCounts::of(instructions, raw_per),
            TokenCounts::of(instructions, sent_per),
        );
        if raw_tokens != snap.raw_tokens {
            r.raw_tokens = Some(snap.raw_tokens.clone());
        }
        if sent_tokens != snap.compacted_tokens {
            r.sent_tokens = Some(snap.compacted_tokens.clone());
        }
        self.last = Some(snap);
        r
    }
}

impl LinearRequest {
    /// The stored history at this request.
    pub fn raw(&self, messages: &[ModelMessage]) -> Vec<ModelMessage> {
        let upto = self.raw.upto.min(messages.len());
        let mut raw = Vec::with_capacity(upto + self.raw.extra.len());
        raw.extend_from_slice(&messages[..upto]);
        for (j, m) in &self.raw.patches {
            if let Some(slot) = raw.get_mut(*j) {
                *slot = m.clone();
            }
        }
        raw.extend(self.raw.extra.iter().cloned());
        raw
    }

    /// The committed history changed from `old` to `new`, which differ at positions
    /// `changed` (ascending, below both lengths): this request keeps its own messages.
    pub fn rebase(&mut self, old: &[ModelMessage], new_len: usize, changed: &[usize]) {
        let raw = &mut self.raw;
        if raw.upto > new_len {
            // Beyond the new history: written out in `extra`.
            let mut tail: Vec<ModelMessage> = old[new_len..raw.upto.min(old.len())].to_vec();
            for (j, m) in &raw.patches {
                if *j >= new_len && *j < raw.upto {
                    tail[*j - new_len] = m.clone();
                }
            }
            raw.patches.retain(|(j, _)| *j < new_len);
            tail.append(&mut raw.extra);
            raw.extra = tail;
            raw.upto = new_len;
        }
        for &j in changed.iter().take_while(|&&j| j < raw.upto) {
            if let Err(at) = raw.patches.binary_search_by_key(&j, |(k, _)| *k) {
                raw.patches.insert(at, (j, old[j].clone()));
            }
        }
    }
}
