//! The token figures of saved requests for `inspect` and the inspector: requests recorded
//! before counting (or by a haiku.rag host) get the estimate's with the provider's usage
//! from the response that follows them; and the lines that say which counter counted
//! what, beside the provider's figures.

use crate::engine::events::RequestSnapshot;
use crate::engine::messages::{ModelMessage, RequestUsage};
use crate::engine::tokens::{
    CharEstimate, ESTIMATE_NAME, TokenReport, signed, thousands, tools_tokens,
};
use crate::session::linear::{LinearRequest, RequestTotals, Tables};

/// The usage the provider reported for `r`: that of the response that follows its
/// stored history in the committed messages, when it reported any.
pub(super) fn provider_usage<'m>(
    r: &LinearRequest,
    messages: &'m [ModelMessage],
) -> Option<&'m RequestUsage> {
    if !r.raw.extra.is_empty() {
        return None;
    }
    messages
        .get(r.raw.upto)?
        .as_response()
        .map(|x| &x.usage)
        .filter(|u| u.input_tokens > 0 || u.output_tokens > 0)
}

/// A request recorded without token figures (a haiku.rag host's, or an older
/// Groundwork's) gets the estimate's, with the provider's usage from its response.
pub(super) fn fill_tokens(s: &mut RequestSnapshot, r: &LinearRequest, messages: &[ModelMessage]) {
    if s.tokens.is_some() {
        return;
    }
    let Some(usage) = provider_usage(r, messages) else {
        return;
    };
    let mut report = TokenReport::count(
        &CharEstimate,
        &s.instructions,
        &s.tools,
        &s.raw,
        &s.compacted,
    );
    report.set_usage(usage);
    s.tokens = Some(report);
}

/// The overview's figures of `r` (totals `t`): recorded, or the estimate's with the
/// provider's usage.
pub(super) fn overview_tokens(
    r: &LinearRequest,
    t: &RequestTotals,
    recorded: bool,
    tables: &Tables,
    messages: &[ModelMessage],
) -> Option<TokenReport> {
    r.tokens.clone().or_else(|| {
        // Provider figures of a session recorded without counts.
        provider_usage(r, messages).map(|u| {
            let tools = tables
                .tool_sets
                .get(r.tools)
                .map_or(0, |t| tools_tokens(&CharEstimate, t));
            let sent = if recorded {
                t.sent_tokens
            } else {
                t.raw_tokens
            };
            let mut report = TokenReport {
                counter: ESTIMATE_NAME.into(),
                tools,
                raw: t.raw_tokens + tools,
                sent: sent + tools,
                ..Default::default()
            };
            report.set_usage(u);
            report
        })
    })
}

/// The token lines of a request: counted (by which counter, and of what) and what the
/// provider reported, with the difference.
pub fn token_lines(t: &TokenReport) -> [String; 2] {
    let messages = t.sent.saturating_sub(t.instructions + t.tools);
    let counted = format!(
        "counted: sent {} tok ({}) = instructions {} + tools {} + messages {} · raw {}",
        thousands(t.sent as u64),
        t.counter,
        thousands(t.instructions as u64),
        thousands(t.tools as u64),
        thousands(messages as u64),
        thousands(t.raw as u64),
    );
    let provider = match (t.provider_prompt, t.provider_completion, t.difference) {
        (Some(p), Some(c), Some(d)) => format!(
            "provider: prompt {} / completion {} tok · difference {} ({:+.1}%)",
            thousands(p),
            thousands(c),
            signed(d),
            t.difference_pct().unwrap_or(0.0)
        ),
        _ => "provider: no usage reported".to_string(),
    };
    [counted, provider]
}
