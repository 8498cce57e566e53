//! Requests of a run over a history window ([`crate::engine::agent::Earlier`]) in linear
//! form, written without the earlier messages, the earlier requests or the tables.
//!
//! The run was given the committed history from message `earlier` on; what its requests
//! sent for the messages before is what every request since the one that made the window
//! sends for them (compaction rewrites them alike), and that request is the session's
//! last. So a request keeps at least `earlier` sources of the list before it, and only
//! the window is compared and written: the raw reference, the kept count, the tail, and
//! the instructions, tool lists and texts it adds to the tables, found among the tables'
//! entries by their fingerprints ([`TableEnd`]) and among the newest texts of each kind
//! ([`super::Texts::continuing`]). What a reader rebuilds from it is what the full
//! encoder's form rebuilds; the form itself may keep fewer sources where the full one
//! would have found the earlier messages' sources to continue further.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use super::{LinearRequest, RawRef, Tables, pieces_in};
use crate::engine::capability::ToolDef;
use crate::engine::chat::{estimate_message_tokens, estimate_tokens};
use crate::engine::events::RequestSnapshot;
use crate::engine::messages::ModelMessage;

/// A fingerprint of a table entry: the first 16 bytes of its SHA-256, in hex.
pub fn fingerprint(bytes: &[u8]) -> String {
    let digest = sha2::Sha256::digest(bytes);
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The fingerprint of a tool list (of its JSON).
pub fn tools_fingerprint(tools: &[ToolDef]) -> String {
    fingerprint(&serde_json::to_vec(tools).unwrap_or_default())
}

/// The end of a table a writer continues without holding it: its length and each
/// entry's index by fingerprint, and what it added.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TableEnd<T> {
    /// Entries in the table.
    pub len: usize,
    /// Each entry's index, by fingerprint (the newest of equal entries).
    pub by_print: HashMap<String, usize>,
    /// Entries added since it was made (`len` counts them).
    #[serde(skip)]
    pub added: Vec<T>,
}

impl<T: Clone> TableEnd<T> {
    /// The end of `table`, each entry fingerprinted by `print`.
    pub fn of(table: &[T], print: impl Fn(&T) -> String) -> Self {
        TableEnd {
            len: table.len(),
            by_print: table
                .iter()
                .enumerate()
                .map(|(i, t)| (print(t), i))
                .collect(),
            added: Vec::new(),
        }
    }

    /// The index of the entry of fingerprint `print`, `value` added last if it is new.
    fn index_of(&mut self, value: &T, print: String) -> usize {
        if let Some(&i) = self.by_print.get(&print) {
            return i;
        }
        self.added.push(value.clone());
        self.by_print.insert(print, self.len);
        self.len += 1;
        self.len - 1
    }

    /// Takes what was added, keeping the fingerprints.
    pub fn take_added(&mut self) -> Vec<T> {
        std::mem::take(&mut self.added)
    }
}

/// Encodes the requests of one run over a history window, in order.
pub struct WindowEncoder<'r> {
    /// Messages before the window.
    earlier: usize,
    /// Their estimates, as stored and as sent.
    earlier_tokens: (usize, usize),
    /// The run's request encoded last.
    last: Option<&'r RequestSnapshot>,
}

/// The tables a window's requests go into.
pub struct WindowTables<'t> {
    /// The instructions table's end.
    pub instructions: &'t mut TableEnd<String>,
    /// The tool-list table's end.
    pub tool_sets: &'t mut TableEnd<Vec<ToolDef>>,
    /// The text table as [`super::Texts::continuing`] holds it (instructions and tool
    /// lists unused).
    pub texts: &'t mut Tables,
}

impl<'r> WindowEncoder<'r> {
    /// For a run given `earlier` messages before its window, with these estimates.
    pub fn new(earlier: usize, raw_tokens: usize, sent_tokens: usize) -> Self {
        WindowEncoder {
            earlier,
            earlier_tokens: (raw_tokens, sent_tokens),
            last: None,
        }
    }

    /// `snap` (its `raw` and `compacted` the window's messages) against the committed
    /// window `committed` (messages `earlier..`). An error when its estimates are not
    /// those a reader recomputes, which the window form cannot record.
    pub fn encode(
        &mut self,
        snap: &'r RequestSnapshot,
        committed: &[ModelMessage],
        tables: &mut WindowTables<'_>,
    ) -> Result<LinearRequest, String> {
        let w = self.earlier;
        let upto = snap.raw.len().min(committed.len());
        let patches: Vec<(usize, ModelMessage)> = snap.raw[..upto]
            .iter()
            .zip(committed)
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(j, (a, _))| (w + j, a.clone()))
            .collect();
        // The earlier messages' sources are the list before's; then as many of the
        // window's as this request sent alike (the run's request before, same raw).
        let mut keep = w;
        if let Some(last) = self.last {
            keep += last
                .compacted
                .iter()
                .zip(&snap.compacted)
                .take_while(|(a, b)| a == b)
                .count();
        }
        let tail = pieces_in(
            &snap.raw,
            w,
            &snap.compacted[keep - w..],
            keep,
            tables.texts,
        );
        let r = LinearRequest {
            run_id: snap.run_id.clone(),
            request: snap.request,
            raw: RawRef {
                upto: w + upto,
                patches,
                extra: snap.raw[upto..].to_vec(),
            },
            keep,
            tail,
            instructions: tables.instructions.index_of(
                &snap.instructions,
                fingerprint(snap.instructions.as_bytes()),
            ),
            tools: tables
                .tool_sets
                .index_of(&snap.tools, tools_fingerprint(&snap.tools)),
            raw_tokens: None,
            sent_tokens: None,
            tokens: snap.tokens.clone(),
        };
        let instructions = estimate_tokens(&snap.instructions);
        let (raw_earlier, sent_earlier) = self.earlier_tokens;
        let recomputed = |messages: &[ModelMessage], earlier: usize| -> (Vec<usize>, usize) {
            let per: Vec<usize> = messages.iter().map(estimate_message_tokens).collect();
            let total = instructions + earlier + per.iter().sum::<usize>();
            (per, total)
        };
        for (what, counts, messages, earlier) in [
            ("stored", &snap.raw_tokens, &snap.raw, raw_earlier),
            (
                "sent",
                &snap.compacted_tokens,
                &snap.compacted,
                sent_earlier,
            ),
        ] {
            let (per, total) = recomputed(messages, earlier);
            if counts.per_message != per
                || counts.total != total
                || counts.instructions != instructions
            {
                return Err(format!(
                    "request {} of run {}: its {what} estimate is not the one a reader \
                     recomputes",
                    snap.request, snap.run_id
                ));
            }
        }
        self.last = Some(snap);
        Ok(r)
    }
}
