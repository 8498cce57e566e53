//! Reading requests back: one request or all of them in full, and the overview figures
//! (token totals) of every request without rebuilding any.

use super::*;

/// Request `n` (0-based) of `requests` in full, as it was recorded.
pub fn snapshot(
    requests: &[LinearRequest],
    n: usize,
    messages: &[ModelMessage],
    tables: &Tables,
) -> Option<RequestSnapshot> {
    let r = requests.get(n)?;
    let list = sent_list(requests, n);
    Some(build(requests, r, &list, messages, tables))
}

fn build(
    requests: &[LinearRequest],
    r: &LinearRequest,
    list: &SentList,
    messages: &[ModelMessage],
    tables: &Tables,
) -> RequestSnapshot {
    let raw = r.raw(messages);
    let mut compacted = Vec::with_capacity(list.len);
    for src in &list.runs {
        match *src {
            Src::Raw(a, b) => compacted.extend_from_slice(&raw[a.min(raw.len())..b.min(raw.len())]),
            other => compacted
                .extend(sent_message(requests, &raw, tables, other).map(|m| m.into_owned())),
        }
    }
    let instructions = tables
        .instructions
        .get(r.instructions)
        .cloned()
        .unwrap_or_default();
    RequestSnapshot {
        run_id: r.run_id.clone(),
        request: r.request,
        raw_tokens: r
            .raw_tokens
            .clone()
            .unwrap_or_else(|| TokenCounts::estimate(&instructions, &raw)),
        compacted_tokens: r
            .sent_tokens
            .clone()
            .unwrap_or_else(|| TokenCounts::estimate(&instructions, &compacted)),
        tools: tables.tool_sets.get(r.tools).cloned().unwrap_or_default(),
        tokens: r.tokens.clone(),
        instructions,
        raw,
        compacted,
    }
}

/// Every request in full, in one pass.
pub fn snapshots<'a>(
    requests: &'a [LinearRequest],
    messages: &'a [ModelMessage],
    tables: &'a Tables,
) -> impl Iterator<Item = RequestSnapshot> + 'a {
    let mut list = SentList::default();
    requests.iter().enumerate().map(move |(i, r)| {
        list.apply(i, r);
        build(requests, r, &list, messages, tables)
    })
}

/// Token estimates of the committed messages as prefix sums, for request summaries
/// without rebuilding every request.
pub struct TokenPrefix(Vec<usize>);

impl TokenPrefix {
    /// Over `messages`.
    pub fn new(messages: &[ModelMessage]) -> Self {
        let mut sums = Vec::with_capacity(messages.len() + 1);
        let mut total = 0;
        sums.push(0);
        for m in messages {
            total += estimate_message_tokens(m);
            sums.push(total);
        }
        TokenPrefix(sums)
    }

    fn range(&self, a: usize, b: usize) -> usize {
        let n = self.0.len() - 1;
        self.0[b.min(n)] - self.0[a.min(n)]
    }
}

/// What the overview of a request needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestTotals {
    /// Messages in the stored history.
    pub raw_messages: usize,
    /// Raw token estimate.
    pub raw_tokens: usize,
    /// Sent token estimate.
    pub sent_tokens: usize,
    /// Tools offered.
    pub tools: usize,
}

/// The overview figures of every request, in one pass and without rebuilding any.
pub fn totals(
    requests: &[LinearRequest],
    messages: &[ModelMessage],
    tables: &Tables,
) -> Vec<RequestTotals> {
    let prefix = TokenPrefix::new(messages);
    let mut list = SentList::default();
    let mut out = Vec::with_capacity(requests.len());
    // A rewritten message is sent by many requests; each is estimated once.
    let mut rewritten: std::collections::HashMap<(usize, usize), usize> = Default::default();
    for (i, r) in requests.iter().enumerate() {
        list.apply(i, r);
        let instructions = tables
            .instructions
            .get(r.instructions)
            .map_or(0, |i| estimate_tokens(i));
        let upto = r.raw.upto.min(prefix.0.len() - 1);
        let extra: Vec<usize> = r.raw.extra.iter().map(estimate_message_tokens).collect();
        let raw_len = upto + extra.len();
        let patched: Vec<(usize, isize)> = r
            .raw
            .patches
            .iter()
            .filter(|(j, _)| *j < upto)
            .map(|(j, m)| {
                let committed = prefix.range(*j, j + 1) as isize;
                (*j, estimate_message_tokens(m) as isize - committed)
            })
            .collect();
        // Tokens of raw[a..b]: the shared prefix (with its patches), then `extra`.
        let raw_range = |a: usize, b: usize| -> usize {
            let b = b.min(raw_len);
            let a = a.min(b);
            let shared = prefix.range(a.min(upto), b.min(upto)) as isize
                + patched
                    .iter()
                    .filter(|(j, _)| *j >= a && *j < b)
                    .map(|(_, d)| d)
                    .sum::<isize>();
            let (ea, eb) = (a.max(upto) - upto, b.max(upto) - upto);
            shared.max(0) as usize + extra[ea..eb].iter().sum::<usize>()
        };
        let sent: usize = list
            .runs
            .iter()
            .map(|src| match *src {
                Src::Raw(a, b) => raw_range(a, b),
                Src::Sent { request, piece } => *rewritten
                    .entry((request, piece))
                    .or_insert_with(|| sent_tokens_of(requests, messages, tables, r, *src)),
            })
            .sum();
        out.push(RequestTotals {
            raw_messages: raw_len,
            raw_tokens: r
                .raw_tokens
                .as_ref()
                .map_or(instructions + raw_range(0, raw_len), |t| t.total),
            sent_tokens: r
                .sent_tokens
                .as_ref()
                .map_or(instructions + sent, |t| t.total),
            tools: tables.tool_sets.get(r.tools).map_or(0, Vec::len),
        });
    }
    out
}

/// Tokens of a rewritten message kept from an earlier request (an edit needs this
/// request's raw history; only the one message is rebuilt).
fn sent_tokens_of(
    requests: &[LinearRequest],
    messages: &[ModelMessage],
    tables: &Tables,
    r: &LinearRequest,
    src: Src,
) -> usize {
    let Src::Sent { request, piece } = src else {
        return 0;
    };
    match requests.get(request).and_then(|q| q.tail.get(piece)) {
        Some(Piece::Sent(m)) => estimate_message_tokens(m),
        Some(Piece::Edit(e)) => r
            .raw_message(messages, e.base)
            .and_then(|b| e.apply(&b, tables))
            .map_or(0, |m| estimate_message_tokens(&m)),
        _ => 0,
    }
}

impl LinearRequest {
    /// Message `j` of this request's raw history.
    fn raw_message(&self, messages: &[ModelMessage], j: usize) -> Option<ModelMessage> {
        if let Some((_, m)) = self.raw.patches.iter().find(|(k, _)| *k == j) {
            return Some(m.clone());
        }
        let upto = self.raw.upto.min(messages.len());
        if j < upto {
            messages.get(j).cloned()
        } else {
            self.raw.extra.get(j - upto).cloned()
        }
    }
}
