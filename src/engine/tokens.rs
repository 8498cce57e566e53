//! Token counting: one small trait, [`TokenCounter`], with three counters behind it: a
//! tiktoken BPE for OpenAI model families ([`Tiktoken`], its vocabularies compiled
//! into the binary), a model's own `tokenizer.json` ([`TokenizerJson`]), and the
//! characters / 4 estimate ([`CharEstimate`]) otherwise. The host picks one
//! (`crate::host::compose::token_counter`); the agent loop counts every request with it
//! (instructions, tool schemas and messages) into a [`TokenReport`], and fills in what
//! the provider reported once the response arrives.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::capability::ToolDef;
use super::chat::IMAGE_TOKEN_ESTIMATE;
use super::messages::{
    ModelMessage, ModelRequestPart, ModelResponsePart, RequestUsage, UserContent, UserContentValue,
};

/// Counts the tokens of a text.
pub trait TokenCounter: Send + Sync {
    /// What the figures come from, as shown beside them: `o200k`, `cl100k`,
    /// `tokenizer.json` or `≈ chars/4`.
    fn name(&self) -> &str;
    /// Tokens of `text`.
    fn count(&self, text: &str) -> usize;
}

impl fmt::Debug for dyn TokenCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenCounter({})", self.name())
    }
}

/// A counter shared by the agents of a host.
pub type SharedCounter = Arc<dyn TokenCounter>;

/// The counter for `model` without a tokenizer file: its tiktoken encoding when it is
/// an OpenAI family (remembering the counts of long texts), the estimate otherwise.
pub fn for_model(model: &str) -> SharedCounter {
    match Tiktoken::for_model(model) {
        Some(t) => Arc::new(Remembered::new(t)),
        None => Arc::new(CharEstimate),
    }
}

/// Texts shorter than this are counted each time (hashing them costs about as much).
const REMEMBER_FROM: usize = 64;
/// Counts remembered before the memory starts over (a few MB at most).
const REMEMBER_MAX: usize = 100_000;

/// A counter that remembers the counts of long texts by their hash: every request of a
/// conversation sends the history again, and a real tokenizer is ~100× slower than
/// hashing, so each message's text is tokenized once and later requests only hash it.
pub struct Remembered<C> {
    inner: C,
    seen: std::sync::Mutex<std::collections::HashMap<u64, usize>>,
}

impl<C: TokenCounter> Remembered<C> {
    /// Remembers the counts of `inner`.
    pub fn new(inner: C) -> Self {
        Remembered {
            inner,
            seen: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }
}

impl<C: TokenCounter> TokenCounter for Remembered<C> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn count(&self, text: &str) -> usize {
        if text.len() < REMEMBER_FROM {
            return self.inner.count(text);
        }
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let key = BuildHasherDefault::<DefaultHasher>::default().hash_one(text);
        let known = self
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .copied();
        if let Some(n) = known {
            return n;
        }
        let n = self.inner.count(text);
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= REMEMBER_MAX {
            seen.clear();
        }
        seen.insert(key, n);
        n
    }
}

/// The name of the estimate.
pub const ESTIMATE_NAME: &str = "≈ chars/4";

/// A quarter of the characters, rounded up: the fallback when no tokenizer is known.
#[derive(Debug, Clone, Copy, Default)]
pub struct CharEstimate;

impl TokenCounter for CharEstimate {
    fn name(&self) -> &str {
        ESTIMATE_NAME
    }
    fn count(&self, text: &str) -> usize {
        super::chat::estimate_tokens(text)
    }
}

/// A tiktoken BPE (OpenAI's encodings; the vocabularies are part of the binary).
pub struct Tiktoken {
    name: &'static str,
    bpe: &'static tiktoken_rs::CoreBPE,
}

impl Tiktoken {
    /// The encoding OpenAI uses for `model` (`gpt-4o` → o200k, `gpt-4` → cl100k), with
    /// any `provider/` prefix dropped; `None` for other families.
    pub fn for_model(model: &str) -> Option<Tiktoken> {
        let base = model.rsplit('/').next().unwrap_or(model);
        tiktoken_rs::tokenizer::get_tokenizer(base).map(Self::of)
    }

    /// An encoding by its name (`o200k_base` or `o200k`, `cl100k_base`, `p50k_base`,
    /// `r50k_base`, `o200k_harmony`).
    pub fn named(name: &str) -> Option<Tiktoken> {
        use tiktoken_rs::tokenizer::Tokenizer as T;
        let t = match name.strip_suffix("_base").unwrap_or(name) {
            "o200k" => T::O200kBase,
            "o200k_harmony" => T::O200kHarmony,
            "cl100k" => T::Cl100kBase,
            "p50k" => T::P50kBase,
            "r50k" => T::R50kBase,
            _ => return None,
        };
        Some(Self::of(t))
    }

    fn of(t: tiktoken_rs::tokenizer::Tokenizer) -> Tiktoken {
        use tiktoken_rs::tokenizer::Tokenizer as T;
        let name = match t {
            T::O200kHarmony => "o200k_harmony",
            T::O200kBase => "o200k",
            T::Cl100kBase => "cl100k",
            T::P50kBase | T::P50kEdit => "p50k",
            T::R50kBase | T::Gpt2 => "r50k",
        };
        Tiktoken {
            name,
            bpe: tiktoken_rs::bpe_for_tokenizer(t).unwrap_or_else(|_| unreachable_bpe()),
        }
    }
}

/// `bpe_for_tokenizer` never fails (it returns a compiled-in singleton).
fn unreachable_bpe() -> &'static tiktoken_rs::CoreBPE {
    tiktoken_rs::o200k_base_singleton()
}

impl TokenCounter for Tiktoken {
    fn name(&self) -> &str {
        self.name
    }
    fn count(&self, text: &str) -> usize {
        // Text that looks like a special token is counted as text, as it is sent.
        self.bpe.encode_ordinary(text).len()
    }
}

/// A model's own `tokenizer.json` (the Hugging Face `tokenizers` format).
pub struct TokenizerJson {
    tokenizer: tokenizers::Tokenizer,
}

impl TokenizerJson {
    /// Reads `path`; the error is one line naming it.
    pub fn from_file(path: &Path) -> Result<TokenizerJson, String> {
        let mut tokenizer = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| format!("cannot read tokenizer {}: {e}", path.display()))?;
        Self::unlimited(&mut tokenizer);
        Ok(TokenizerJson { tokenizer })
    }

    /// Wraps a tokenizer built in memory.
    pub fn new(mut tokenizer: tokenizers::Tokenizer) -> TokenizerJson {
        Self::unlimited(&mut tokenizer);
        TokenizerJson { tokenizer }
    }

    /// Whole texts are counted: no truncation, no padding.
    fn unlimited(t: &mut tokenizers::Tokenizer) {
        let _ = t.with_truncation(None);
        t.with_padding(None);
    }
}

impl TokenCounter for TokenizerJson {
    fn name(&self) -> &str {
        "tokenizer.json"
    }
    fn count(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        self.tokenizer
            .encode(text, false)
            .map(|e| e.get_ids().len())
            .unwrap_or_else(|_| super::chat::estimate_tokens(text))
    }
}

/// Tokens of one message by `count`: text, tool arguments (with the tool's name) and
/// tool results, each image at [`IMAGE_TOKEN_ESTIMATE`], thinking not counted (not sent).
pub fn message_tokens(message: &ModelMessage, count: &dyn Fn(&str) -> usize) -> usize {
    match message {
        ModelMessage::Request(r) => r
            .parts
            .iter()
            .map(|p| match p {
                ModelRequestPart::SystemPrompt(s) => count(&s.content),
                ModelRequestPart::UserPrompt(u) => match &u.content {
                    UserContentValue::Text(s) => count(s),
                    UserContentValue::Items(items) => items
                        .iter()
                        .map(|i| match i {
                            UserContent::Text(s) => count(s),
                            UserContent::Binary(_) => IMAGE_TOKEN_ESTIMATE,
                            UserContent::Other(_) => 0,
                        })
                        .sum(),
                },
                ModelRequestPart::ToolReturn(t) => count(&t.content_str()),
                ModelRequestPart::RetryPrompt(rp) => count(&rp.content.text()),
                ModelRequestPart::Other(_) => 0,
            })
            .sum(),
        ModelMessage::Response(r) => r
            .parts
            .iter()
            .map(|p| match p {
                ModelResponsePart::Text(t) => count(&t.content),
                ModelResponsePart::ToolCall(c) => count(&c.tool_name) + count(&c.args_as_json()),
                ModelResponsePart::Thinking(_) | ModelResponsePart::Other(_) => 0,
            })
            .sum(),
    }
}

/// Tokens of the tool schemas as the chat API receives them (each tool's
/// `{"type": "function", "function": {name, description, parameters}}` as JSON).
pub fn tools_tokens(counter: &dyn TokenCounter, tools: &[ToolDef]) -> usize {
    tools
        .iter()
        .map(|t| {
            let v = serde_json::json!({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}});
            counter.count(&v.to_string())
        })
        .sum()
}

/// One request's token figures: counted (instructions, tool schemas, messages, by
/// `counter`) and, once answered, what the provider reported.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenReport {
    /// The counter: `o200k`, `cl100k`, `tokenizer.json`, `≈ chars/4`.
    pub counter: String,
    /// The instructions.
    pub instructions: usize,
    /// The tool schemas.
    pub tools: usize,
    /// The stored history with the instructions and tools.
    pub raw: usize,
    /// What was sent, with the instructions and tools.
    pub sent: usize,
    /// The provider's prompt tokens (`usage.prompt_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_prompt: Option<u64>,
    /// The provider's completion tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_completion: Option<u64>,
    /// The provider's prompt tokens minus `sent` (the chat template, and any error of
    /// the counter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difference: Option<i64>,
}

impl TokenReport {
    /// Counts a request: `raw` (the stored history) and `sent` with the same
    /// `instructions` and `tools`. A sent message equal to the raw one at its place is
    /// counted once.
    pub fn count(
        counter: &dyn TokenCounter,
        instructions: &str,
        tools: &[ToolDef],
        raw: &[ModelMessage],
        sent: &[ModelMessage],
    ) -> TokenReport {
        let count = |s: &str| counter.count(s);
        let raw_per: Vec<usize> = raw.iter().map(|m| message_tokens(m, &count)).collect();
        let sent_messages: usize = sent
            .iter()
            .enumerate()
            .map(|(i, m)| match (raw.get(i), raw_per.get(i)) {
                (Some(r), Some(n)) if r == m => *n,
                _ => message_tokens(m, &count),
            })
            .sum();
        let instructions = counter.count(instructions);
        let tools = tools_tokens(counter, tools);
        TokenReport {
            counter: counter.name().to_string(),
            instructions,
            tools,
            raw: instructions + tools + raw_per.iter().sum::<usize>(),
            sent: instructions + tools + sent_messages,
            provider_prompt: None,
            provider_completion: None,
            difference: None,
        }
    }

    /// The estimate's report from the chars/4 totals already made of a request
    /// (`raw` and `sent` include the `instructions`), adding the tool schemas.
    pub fn estimated(instructions: usize, raw: usize, sent: usize, tools: &[ToolDef]) -> Self {
        let tools = tools_tokens(&CharEstimate, tools);
        TokenReport {
            counter: ESTIMATE_NAME.to_string(),
            instructions,
            tools,
            raw: raw + tools,
            sent: sent + tools,
            ..Default::default()
        }
    }

    /// Records what the provider reported (nothing when it reported no usage at all).
    pub fn set_usage(&mut self, usage: &RequestUsage) {
        if usage.input_tokens == 0 && usage.output_tokens == 0 {
            return;
        }
        self.provider_prompt = Some(usage.input_tokens);
        self.provider_completion = Some(usage.output_tokens);
        self.difference = Some(usage.input_tokens as i64 - self.sent as i64);
    }

    /// The difference as a share of the counted figure, in percent.
    pub fn difference_pct(&self) -> Option<f64> {
        let d = self.difference?;
        (self.sent > 0).then(|| d as f64 * 100.0 / self.sent as f64)
    }
}

/// Token figures summed over requests (the ledger's and the status bar's totals).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TokenTotals {
    /// Requests summed.
    pub requests: usize,
    /// Their counters (one name, or several joined with `+`).
    pub counter: String,
    /// Counted sent tokens.
    pub sent: usize,
    /// Provider prompt tokens, over the requests that reported them.
    pub provider_prompt: u64,
    /// Provider completion tokens.
    pub provider_completion: u64,
    /// Requests with a provider figure.
    pub reported: usize,
    /// Counted sent tokens of those requests (what `provider_prompt` compares with).
    pub sent_reported: usize,
}

impl TokenTotals {
    /// Adds one request.
    pub fn add(&mut self, r: &TokenReport) {
        self.requests += 1;
        if !self.counter.split('+').any(|c| c == r.counter) {
            if !self.counter.is_empty() {
                self.counter.push('+');
            }
            self.counter.push_str(&r.counter);
        }
        self.sent += r.sent;
        if let (Some(p), Some(c)) = (r.provider_prompt, r.provider_completion) {
            self.provider_prompt += p;
            self.provider_completion += c;
            self.reported += 1;
            self.sent_reported += r.sent;
        }
    }

    /// Provider prompt tokens minus the counted ones, over the reported requests.
    pub fn difference(&self) -> Option<i64> {
        (self.reported > 0).then(|| self.provider_prompt as i64 - self.sent_reported as i64)
    }
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A signed difference as `+1,234` or `-56`.
pub fn signed(n: i64) -> String {
    let sign = if n < 0 { '-' } else { '+' };
    format!("{sign}{}", thousands(n.unsigned_abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiktoken_counts_known_strings() {
        let o200k = Tiktoken::named("o200k").unwrap();
        let cl100k = Tiktoken::named("cl100k_base").unwrap();
        assert_eq!(o200k.name(), "o200k");
        assert_eq!(cl100k.name(), "cl100k");
        assert_eq!(o200k.count("hello world"), 2);
        assert_eq!(cl100k.count("hello world"), 2);
        assert_eq!(o200k.count(""), 0);
        // Special-token text counts as text.
        assert!(cl100k.count("<|endoftext|>") > 1);
        assert_eq!(cl100k.count("tiktoken is great!"), 6);
    }

    #[test]
    fn a_tokenizer_json_counts_its_own_tokens() {
        // A WordLevel model behind the Whitespace pre-tokenizer: one token per word and
        // per run of punctuation.
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/configs/good/tokenizer.json");
        let t = TokenizerJson::from_file(&path).unwrap();
        assert_eq!(t.name(), "tokenizer.json");
        assert_eq!(t.count("hello world"), 2);
        assert_eq!(t.count("hello, world!"), 4);
        assert_eq!(t.count(""), 0);
        // No truncation: a long text counts whole.
        assert_eq!(t.count(&"word ".repeat(5000)), 5000);
        let err = TokenizerJson::from_file(Path::new("/nonexistent/tokenizer.json")).err();
        assert!(
            err.unwrap()
                .starts_with("cannot read tokenizer /nonexistent/tokenizer.json: ")
        );
    }

    #[test]
    fn remembered_counts_equal_the_counter() {
        let r = Remembered::new(Tiktoken::named("cl100k").unwrap());
        let plain = Tiktoken::named("cl100k").unwrap();
        let long = "Evidence text of a typical chunk with a few sentences. ".repeat(20);
        for text in ["hello world", long.as_str(), long.as_str()] {
            assert_eq!(r.count(text), plain.count(text));
        }
        assert_eq!(r.name(), "cl100k");
        assert_eq!(r.seen.lock().unwrap().len(), 1, "the long text once");
    }

    #[test]
    fn model_families() {
        let name = |m: &str| Tiktoken::for_model(m).map(|t| t.name().to_string());
        assert_eq!(name("gpt-4o").as_deref(), Some("o200k"));
        assert_eq!(name("openai/gpt-4o-mini").as_deref(), Some("o200k"));
        assert_eq!(name("gpt-4").as_deref(), Some("cl100k"));
        assert_eq!(name("gpt-3.5-turbo").as_deref(), Some("cl100k"));
        assert_eq!(name("qwen3"), None);
        assert_eq!(name("default"), None);
        assert!(Tiktoken::named("nope").is_none());
    }

    #[test]
    fn estimate_and_report() {
        let e = CharEstimate;
        assert_eq!(e.name(), "≈ chars/4");
        assert_eq!(e.count("abcde"), 2);
        let tool = ToolDef::function("t", "d", serde_json::json!({"type": "object"}));
        let json = r#"{"type":"function","function":{"description":"d","name":"t","parameters":{"type":"object"}}}"#;
        assert_eq!(
            tools_tokens(&e, std::slice::from_ref(&tool)),
            json.len().div_ceil(4)
        );
        let mut r = TokenReport::count(&e, "abcd", std::slice::from_ref(&tool), &[], &[]);
        let same = TokenReport::estimated(1, 1, 1, std::slice::from_ref(&tool));
        assert_eq!(same, r, "the estimate's report from its totals");
        assert_eq!(
            (r.instructions, r.raw, r.sent),
            (1, 1 + r.tools, 1 + r.tools)
        );
        r.set_usage(&RequestUsage::default());
        assert_eq!(r.difference, None);
        let usage = RequestUsage {
            input_tokens: r.sent as u64 + 10,
            output_tokens: 3,
            ..Default::default()
        };
        r.set_usage(&usage);
        assert_eq!(
            (r.provider_prompt, r.provider_completion, r.difference),
            (Some(r.sent as u64 + 10), Some(3), Some(10))
        );
        let mut t = TokenTotals::default();
        t.add(&r);
        t.add(&TokenReport {
            counter: "o200k".into(),
            sent: 5,
            ..Default::default()
        });
        assert_eq!(t.counter, "≈ chars/4+o200k");
        assert_eq!((t.requests, t.reported, t.difference()), (2, 1, Some(10)));
    }

    #[test]
    fn number_formats() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1234), "1,234");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(signed(-1234), "-1,234");
        assert_eq!(signed(5), "+5");
    }
}
