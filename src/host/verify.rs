//! Claims checked against what they cite (`groundwork verify`, the workbench's `V`,
//! `eval --verify`): each sentence of an answer that carries a citation marker is put to
//! a judge model beside the passages its markers name, one request per sentence, and
//! comes back supported, partly supported, not supported or unclear, with the judge's
//! one-line reason. The result ([`Verification`]) is kept with the session, judge
//! requests and replies included ([`crate::session::verdicts`]).
//!
//! The passages are the cited chunks themselves (read from the knowledge base as the
//! question read it); a chunk that cannot be read is shown to the judge as the expanded
//! context the answering model saw, and the check says so. A marker that names no source
//! of the answer makes its sentence "not supported" without asking the judge.

use chrono::Utc;

use crate::engine::cancel::CancelToken;
use crate::engine::chat::{ChatModel, ModelError, ModelRequestParams};
use crate::engine::events::{RequestSnapshot, TokenCounts};
use crate::engine::messages::{ModelMessage, ModelRequest};
use crate::host::transcript::{CitationView, Turn, markers};
use crate::session::verdicts::{ClaimCheck, JudgeRequest, Verdict, Verification};

/// The judge's instructions (`assets/prompts/verify/judge.md`).
pub fn instructions() -> &'static str {
    include_str!("../../assets/prompts/verify/judge.md").trim_end()
}

/// The `run_id` the inspector shows a judge request under.
pub fn run_id(question: u64) -> String {
    format!("verify:{question}")
}

/// A sentence of an answer with citation markers, and the sources they name.
#[derive(Debug)]
pub struct Claim<'a> {
    pub sentence: String,
    /// Its markers' numbers, each once, in order.
    pub markers: Vec<i64>,
    /// The answer's sources its markers name.
    pub sources: Vec<&'a CitationView>,
    /// Markers naming no source of the answer.
    pub missing: Vec<i64>,
}

/// The claims of an answer: its sentences that carry markers.
pub fn claims(turn: &Turn) -> Vec<Claim<'_>> {
    sentences(&turn.answer)
        .into_iter()
        .filter_map(|sentence| {
            let mut ms = markers(&sentence);
            let mut seen = std::collections::HashSet::new();
            ms.retain(|m| seen.insert(*m));
            if ms.is_empty() {
                return None;
            }
            let mut sources = Vec::new();
            let mut missing = Vec::new();
            for &m in &ms {
                match turn.citations.iter().find(|c| c.number == m) {
                    Some(c) => sources.push(c),
                    None => missing.push(m),
                }
            }
            Some(Claim {
                sentence,
                markers: ms,
                sources,
                missing,
            })
        })
        .collect()
}

/// The sentences of a Markdown answer: paragraphs, list items, headings and table rows
/// are split apart, then each at a full stop, `!` or `?` that ends a sentence (followed
/// by a space and a capital, a digit or an opening mark, or by the end). Markers right
/// after the stop (`… in 2001. [1] The …`) stay with the sentence they follow. List
/// bullets and heading marks are left off.
pub fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for block in blocks(text) {
        split_block(&block, &mut out);
    }
    out
}

/// Whether `line` starts a block of its own (blank, a list item, a heading, a table row
/// or a quote).
fn starts_block(line: &str) -> bool {
    let l = line.trim_start();
    if l.is_empty() || l.starts_with(['#', '|', '>']) {
        return true;
    }
    let bullet = l.len() > 1 && l.starts_with(['-', '*', '+']) && l[1..].starts_with(' ');
    bullet || numbered(l).is_some()
}

/// The length of a `12. ` or `3) ` item number at the start of `l`.
fn numbered(l: &str) -> Option<usize> {
    let digits = l.bytes().take_while(u8::is_ascii_digit).count();
    let rest = &l[digits..];
    (digits > 0 && (rest.starts_with(". ") || rest.starts_with(") "))).then_some(digits + 2)
}

/// `l` without its list bullet, item number, heading or quote marks.
fn strip_item(l: &str) -> &str {
    let l = l.trim_start();
    if let Some(n) = numbered(l) {
        return l[n..].trim_start();
    }
    for p in ["- ", "* ", "+ "] {
        if let Some(r) = l.strip_prefix(p) {
            return r.trim_start();
        }
    }
    if l.starts_with('#') || l.starts_with('>') {
        return l.trim_start_matches(['#', '>']).trim_start();
    }
    l
}

fn blocks(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        if starts_block(line) && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        if line.trim().is_empty() {
            continue;
        }
        if current.is_empty() {
            current.push_str(strip_item(line));
        } else {
            current.push(' ');
            current.push_str(line.trim());
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The index after a marker (`[3]`, `[1, 2]`) starting at `chars[at]`.
fn marker_end(chars: &[(usize, char)], at: usize) -> Option<usize> {
    let mut k = at + 1;
    let mut digit = false;
    while let Some(&(_, c)) = chars.get(k) {
        match c {
            ']' => return digit.then_some(k + 1),
            '0'..='9' => digit = true,
            ',' | ' ' => {}
            _ => return None,
        }
        k += 1;
    }
    None
}

fn starts_sentence(c: char) -> bool {
    c.is_uppercase() || c.is_ascii_digit() || matches!(c, '"' | '“' | '(' | '[' | '*' | '_' | '`')
}

fn split_block(s: &str, out: &mut Vec<String>) {
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let n = chars.len();
    let byte = |k: usize| chars.get(k).map_or(s.len(), |&(b, _)| b);
    let mut push = |from: usize, to: usize| {
        let t = s[byte(from)..byte(to)].trim();
        if !t.is_empty() {
            out.push(t.to_string());
        }
    };
    let mut start = 0;
    let mut i = 0;
    while i < n {
        if !matches!(chars[i].1, '.' | '!' | '?') {
            i += 1;
            continue;
        }
        // Closing marks and markers belong to the sentence that just ended.
        let mut j = i + 1;
        loop {
            while j < n && matches!(chars[j].1, ')' | '"' | '\'' | '”' | '’' | '*' | '_') {
                j += 1;
            }
            let mut k = j;
            while k < n && chars[k].1 == ' ' {
                k += 1;
            }
            match (k < n && chars[k].1 == '[')
                .then(|| marker_end(&chars, k))
                .flatten()
            {
                Some(end) => j = end,
                None => break,
            }
        }
        if j >= n {
            break;
        }
        if chars[j].1.is_whitespace() {
            let mut k = j;
            while k < n && chars[k].1.is_whitespace() {
                k += 1;
            }
            if k >= n || starts_sentence(chars[k].1) {
                push(start, j);
                start = k;
                i = k;
                continue;
            }
        }
        i = j.max(i + 1);
    }
    push(start, n);
}

/// Where each citation marker (`[1]`, `[2, 3]`, read as [`markers`] reads them) of `text`
/// ends, in order.
pub fn marker_ends(text: &str) -> Vec<usize> {
    crate::host::transcript::marker_groups(text)
        .into_iter()
        .map(|(end, _)| end)
        .collect()
}

/// `answer` with each checked claim's verdict glyph, after `tag`, right after the claim's
/// last marker (`… at night [1]✓.`): the claims are the answer's sentences with markers,
/// in order, so the markers of claim k are the next ones in the answer.
pub fn with_verdicts(answer: &str, v: &Verification, tag: &str) -> String {
    let ends = marker_ends(answer);
    let mut at_marker = 0;
    let mut inserts = Vec::new();
    for c in &v.claims {
        at_marker += marker_ends(&c.sentence).len();
        if let Some(&end) = at_marker.checked_sub(1).and_then(|k| ends.get(k)) {
            inserts.push((end, c.verdict.glyph()));
        }
    }
    let mut out = String::with_capacity(answer.len() + inserts.len() * 8);
    let mut from = 0;
    for (end, glyph) in inserts {
        out.push_str(&answer[from..end]);
        out.push_str(tag);
        out.push_str(glyph);
        from = end;
    }
    out.push_str(&answer[from..]);
    out
}

/// What the judge is sent for `claim`: the sentence, then each source it cites with its
/// reference and text.
pub fn judge_prompt(claim: &Claim<'_>) -> String {
    let mut p = format!("Claim:\n{}\n\nCited passages:\n", claim.sentence);
    for c in &claim.sources {
        let (reference, text) = match &c.passage {
            Some(passage) => (c.reference(), passage.text.as_str()),
            None => (
                format!(
                    "{} (the context around the cited passage)",
                    c.evidence.source
                ),
                c.content.as_str(),
            ),
        };
        p.push_str(&format!("\n[{}] {reference}\n{}\n", c.number, text.trim()));
    }
    p
}

/// The verdict and reason in a judge's reply: the JSON object asked for, else the first
/// verdict named in words; a reply that names none is `unclear`, and says so.
pub fn read_reply(reply: &str) -> (Verdict, String) {
    let object = match (reply.find('{'), reply.rfind('}')) {
        (Some(a), Some(b)) if a < b => {
            serde_json::from_str::<serde_json::Value>(&reply[a..=b]).ok()
        }
        _ => None,
    };
    if let Some(o) = object
        && let Some(v) = o
            .get("verdict")
            .and_then(|v| v.as_str())
            .and_then(verdict_named)
    {
        let reason = o
            .get("reason")
            .and_then(|r| r.as_str())
            .map(one_line)
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| "(the judge gave no reason)".into());
        return (v, reason);
    }
    let first = one_line(reply);
    match verdict_named(reply) {
        Some(v) => (v, first),
        None => (
            Verdict::Unclear,
            format!(
                "the judge's reply names no verdict: {:?}",
                first.chars().take(120).collect::<String>()
            ),
        ),
    }
}

/// The verdict `text` names first (`not supported`, `partly_supported`, `unclear`, ...).
fn verdict_named(text: &str) -> Option<Verdict> {
    let t = text.to_lowercase().replace(['_', '-'], " ");
    let words = [
        ("not supported", Verdict::NotSupported),
        ("unsupported", Verdict::NotSupported),
        ("partly supported", Verdict::PartlySupported),
        ("partially supported", Verdict::PartlySupported),
        ("unclear", Verdict::Unclear),
        ("supported", Verdict::Supported),
    ];
    words
        .iter()
        .filter_map(|(w, v)| t.find(w).map(|at| (at, *v)))
        // The earliest wins; at one place the longer phrase (listed first) does.
        .min_by_key(|(at, _)| *at)
        .map(|(_, v)| v)
}

/// `text` on one line, at most 300 characters.
fn one_line(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() > 300 {
        let mut cut: String = joined.chars().take(299).collect();
        cut.push('…');
        cut
    } else {
        joined
    }
}

/// Checks the claims of `turn`'s answer with `judge`, one request per claim;
/// `progress(k, n)` is told before claim `k` (1-based) of `n` is sent. A judge request
/// that fails ends the check with its error (nothing partial is returned).
pub async fn check_turn(
    judge: &dyn ChatModel,
    turn: &Turn,
    cancel: &CancelToken,
    progress: &(dyn Fn(usize, usize) + Send + Sync),
) -> Result<Verification, ModelError> {
    let claims = claims(turn);
    let mut v = Verification {
        question: turn.question,
        judge: judge.model_name().to_string(),
        at: Utc::now(),
        instructions: instructions().to_string(),
        from_context: Vec::new(),
        claims: Vec::new(),
        requests: Vec::new(),
    };
    for (k, claim) in claims.iter().enumerate() {
        for c in &claim.sources {
            if c.passage.is_none() && !v.from_context.contains(&c.evidence.chunk_id) {
                v.from_context.push(c.evidence.chunk_id.clone());
            }
        }
        let chunks: Vec<String> = claim
            .sources
            .iter()
            .map(|c| c.evidence.chunk_id.clone())
            .collect();
        let missing = || {
            let named: Vec<String> = claim.missing.iter().map(|m| format!("[{m}]")).collect();
            named.join(", ")
        };
        if claim.sources.is_empty() {
            v.claims.push(ClaimCheck {
                sentence: claim.sentence.clone(),
                markers: claim.markers.clone(),
                chunks,
                verdict: Verdict::NotSupported,
                reason: format!("{} names no source of this answer", missing()),
                request: None,
            });
            continue;
        }
        progress(k + 1, claims.len());
        let prompt = judge_prompt(claim);
        let messages = [ModelMessage::Request(std::sync::Arc::new(
            ModelRequest::user(prompt.clone()),
        ))];
        let params = ModelRequestParams {
            instructions: instructions(),
            earlier: None,
            messages: &messages,
            tools: &[],
        };
        let response = judge.request(params, &|_| {}, cancel).await?;
        let reply = response.text();
        let (verdict, mut reason) = read_reply(&reply);
        if !claim.missing.is_empty() {
            reason.push_str(&format!(" ({} names no source of this answer)", missing()));
        }
        let u = &response.usage;
        v.requests.push(JudgeRequest {
            prompt,
            reply,
            usage: (u.input_tokens > 0 || u.output_tokens > 0)
                .then_some((u.input_tokens, u.output_tokens)),
        });
        v.claims.push(ClaimCheck {
            sentence: claim.sentence.clone(),
            markers: claim.markers.clone(),
            chunks,
            verdict,
            reason,
            request: Some(v.requests.len() - 1),
        });
    }
    Ok(v)
}

/// Judge request `k` of `v` as the inspector shows a request: what was sent (the
/// instructions and the one user message), no tools.
pub fn judge_snapshot(v: &Verification, k: usize) -> Option<RequestSnapshot> {
    let r = v.requests.get(k)?;
    let messages = vec![ModelMessage::Request(std::sync::Arc::new(
        ModelRequest::user(r.prompt.clone()),
    ))];
    let counts = TokenCounts::estimate(&v.instructions, &messages);
    Some(RequestSnapshot {
        run_id: run_id(v.question),
        request: k + 1,
        raw: messages.clone(),
        compacted: messages,
        tools: Vec::new(),
        instructions: v.instructions.clone(),
        raw_tokens: counts.clone(),
        compacted_tokens: counts,
        tokens: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_cut_into_its_sentences_with_their_markers() {
        let answer = "asn1Parser reads an ASN.1 file [1]. It takes -c and -o, e.g. for output. \
                      [2]\n\nVersion 4.19 added it in 2001.[3] Nothing else.\n\
                      - Item one [1]\n- Item two!\n1. Numbered [2, 3]\n## Heading";
        assert_eq!(
            sentences(answer),
            [
                "asn1Parser reads an ASN.1 file [1].",
                "It takes -c and -o, e.g. for output. [2]",
                "Version 4.19 added it in 2001.[3]",
                "Nothing else.",
                "Item one [1]",
                "Item two!",
                "Numbered [2, 3]",
                "Heading",
            ]
        );
        // A wrapped paragraph is one block; a decimal is not a stop.
        assert_eq!(
            sentences("It costs 3.5 euros\nper page [1]. Done."),
            ["It costs 3.5 euros per page [1].", "Done."]
        );
    }

    #[test]
    fn each_claims_verdict_is_put_after_its_last_marker() {
        let answer =
            "Ships [1]. Painted by Monet [1][2].\n- Keepers [3]\nNo marker. Array [0] [x].";
        let claim = |sentence: &str, verdict| ClaimCheck {
            sentence: sentence.into(),
            markers: markers(sentence),
            chunks: Vec::new(),
            verdict,
            reason: String::new(),
            request: None,
        };
        let v = Verification {
            question: 0,
            judge: "j".into(),
            at: Utc::now(),
            instructions: String::new(),
            from_context: Vec::new(),
            claims: vec![
                claim("Ships [1].", Verdict::Supported),
                claim("Painted by Monet [1][2].", Verdict::NotSupported),
                claim("Keepers [3]", Verdict::Unclear),
            ],
            requests: Vec::new(),
        };
        assert_eq!(
            sentences(answer)
                .iter()
                .filter(|s| !markers(s).is_empty())
                .count(),
            3
        );
        assert_eq!(
            with_verdicts(answer, &v, "|"),
            "Ships [1]|✓. Painted by Monet [1][2]|✗.\n- Keepers [3]|?\nNo marker. Array [0] [x]."
        );
    }

    #[test]
    fn replies_are_read_as_json_or_words_and_otherwise_unclear() {
        assert_eq!(
            read_reply(
                "```json\n{\"verdict\": \"partly_supported\", \"reason\": \"Only the year.\"}\n```"
            ),
            (Verdict::PartlySupported, "Only the year.".into())
        );
        assert_eq!(
            read_reply("{\"verdict\": \"Not Supported\"}"),
            (Verdict::NotSupported, "(the judge gave no reason)".into())
        );
        assert_eq!(
            read_reply("Unsupported: the passage says 1999."),
            (
                Verdict::NotSupported,
                "Unsupported: the passage says 1999.".into()
            )
        );
        assert_eq!(read_reply("supported").0, Verdict::Supported);
        let (v, reason) = read_reply("I think so.");
        assert_eq!(v, Verdict::Unclear);
        assert_eq!(
            reason,
            "the judge's reply names no verdict: \"I think so.\""
        );
    }
}
