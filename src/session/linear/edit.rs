//! A rewritten message kept as a change to the stored message it replaced (its parts by
//! index into the stored one, new parts, long texts in the text table).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::{RawValue, to_raw_value};

use super::Tables;
use crate::engine::messages::{ModelMessage, ModelRequest};

/// A rewritten message as a change to the stored one it replaced: its parts (each a
/// part of the stored message, by index, or a new part) and the other fields that
/// differ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Edit {
    /// The raw message it replaced.
    pub base: usize,
    /// Its parts.
    pub parts: Vec<PartSrc>,
    /// Fields (other than `parts`) set to another value.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub set: serde_json::Map<String, Value>,
    /// Fields of the stored message it does not have.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unset: Vec<String>,
}

/// One part of an edited message. New parts are kept as the JSON text they were
/// written as, and read into a part only when the message is rebuilt.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartSrc {
    /// The stored message's part at this index.
    Same(usize),
    /// A new part.
    New(Box<RawValue>),
    /// A new part whose long `content` is text `.0` of the text table (a capsule is
    /// sent again with every request of a question, in a new part each time).
    Text(usize, Box<RawValue>),
    /// A new part whose long list `content` is text `.0` of the text table, written
    /// one item a line ([`list_text`]): the capsule's cited pictures, sent again with
    /// every request and growing by a picture when a question cites one, cost the file
    /// each picture once (format version 4).
    List(usize, Box<RawValue>),
}

impl PartialEq for PartSrc {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (PartSrc::Same(a), PartSrc::Same(b)) => a == b,
            (PartSrc::New(a), PartSrc::New(b)) => a.get() == b.get(),
            (PartSrc::Text(t, a), PartSrc::Text(u, b))
            | (PartSrc::List(t, a), PartSrc::List(u, b)) => t == u && a.get() == b.get(),
            _ => false,
        }
    }
}

/// Contents at least this long are kept once, in the text table.
const SHARED_TEXT: usize = 256;

impl PartSrc {
    /// A part of the sent message the stored one does not have: its long content goes
    /// to the text table.
    fn new_part(mut p: Value, tables: &mut Tables) -> Option<PartSrc> {
        let list = match p.get("content") {
            Some(Value::String(text)) if text.len() >= SHARED_TEXT => {
                let at = tables.texts.index_of(text);
                p["content"] = Value::Null;
                return Some(PartSrc::Text(at, to_raw_value(&p).ok()?));
            }
            Some(Value::Array(items)) => list_text(items).filter(|t| t.len() >= SHARED_TEXT),
            _ => None,
        };
        Some(match list {
            Some(text) => {
                let at = tables.texts.index_of(&text);
                p["content"] = Value::Null;
                PartSrc::List(at, to_raw_value(&p).ok()?)
            }
            None => PartSrc::New(to_raw_value(&p).ok()?),
        })
    }

    /// The part as JSON (for a message that is not read from typed parts).
    fn value(&self, base_parts: &[Value], tables: &Tables) -> Value {
        match self {
            PartSrc::Same(k) => base_parts.get(*k).cloned().unwrap_or(Value::Null),
            PartSrc::New(v) => serde_json::from_str(v.get()).unwrap_or(Value::Null),
            PartSrc::Text(t, rest) => text_part(*t, rest, tables),
            PartSrc::List(t, rest) => list_part(*t, rest, tables),
        }
    }
}

/// A list as the text table keeps it: its items as compact JSON, one a line (JSON
/// writes no line break inside a value), each after the first led by its comma, so that
/// a list that grew by an item is stored as the lines of the list before it plus that
/// item's line.
fn list_text(items: &[Value]) -> Option<String> {
    let mut text = String::from("[");
    for (i, item) in items.iter().enumerate() {
        text.push_str(if i == 0 { "\n" } else { "\n," });
        text.push_str(&serde_json::to_string(item).ok()?);
    }
    text.push_str("\n]");
    Some(text)
}

/// The part `rest` with list `t` of the table as its content.
fn list_part(t: usize, rest: &RawValue, tables: &Tables) -> Value {
    let list = tables
        .texts
        .get(t)
        .and_then(|text| serde_json::from_str(&text).ok());
    with_content(rest, list.unwrap_or(Value::Null))
}

/// The part `rest` (a part whose content was taken out) with `content` put back.
fn with_content(rest: &RawValue, content: Value) -> Value {
    let mut p: Value = serde_json::from_str(rest.get()).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut p {
        m.insert("content".into(), content);
    }
    p
}

/// Whether two requests agree in everything but their parts.
fn same_but_parts(b: &ModelRequest, s: &ModelRequest) -> bool {
    b.timestamp == s.timestamp
        && b.instructions == s.instructions
        && b.run_id == s.run_id
        && b.conversation_id == s.conversation_id
        && b.metadata == s.metadata
        && b.state == s.state
        && b.extra == s.extra
}

/// The part `rest` with text `t` of the table as its content.
fn text_part(t: usize, rest: &RawValue, tables: &Tables) -> Value {
    with_content(rest, Value::String(tables.texts.get(t).unwrap_or_default()))
}

impl Edit {
    /// `sent` as a change to `base` (message `index` of the raw history), if that is
    /// smaller than writing it out.
    pub(super) fn of(
        index: usize,
        base: &ModelMessage,
        sent: &ModelMessage,
        tables: &mut Tables,
    ) -> Option<Edit> {
        if let Some(edit) = Edit::of_parts(index, base, sent, tables) {
            return edit;
        }
        let (Ok(Value::Object(b)), Ok(Value::Object(s))) =
            (serde_json::to_value(base), serde_json::to_value(sent))
        else {
            return None;
        };
        let empty = Vec::new();
        let base_parts = b.get("parts").and_then(Value::as_array).unwrap_or(&empty);
        let parts = s
            .get("parts")
            .and_then(Value::as_array)?
            .iter()
            .map(|p| match base_parts.iter().position(|q| q == p) {
                Some(k) => Some(PartSrc::Same(k)),
                None => PartSrc::new_part(p.clone(), tables),
            })
            .collect::<Option<Vec<_>>>()?;
        let set = s
            .iter()
            .filter(|(k, v)| k.as_str() != "parts" && b.get(*k) != Some(v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let unset = b.keys().filter(|k| !s.contains_key(*k)).cloned().collect();
        Edit {
            base: index,
            parts,
            set,
            unset,
        }
        .if_smaller(base, sent, tables)
    }

    /// The edit, if it gives `sent` again from `base` and is smaller than `sent` written
    /// out.
    fn if_smaller(self, base: &ModelMessage, sent: &ModelMessage, tables: &Tables) -> Option<Edit> {
        (self.apply(base, tables).as_ref() == Some(sent)
            && serde_json::to_vec(&self).ok()?.len() < serde_json::to_vec(sent).ok()?.len())
        .then_some(self)
    }

    /// [`Edit::of`] for the common case, read from the typed messages: a request whose
    /// fields are all the stored one's and whose parts differ (receipts, the capsule,
    /// stripped pictures). Nothing of the stored message is copied or serialized but the
    /// new parts. `None` when the case does not apply; `Some(None)` when it applies and
    /// the edit is not smaller.
    fn of_parts(
        index: usize,
        base: &ModelMessage,
        sent: &ModelMessage,
        tables: &mut Tables,
    ) -> Option<Option<Edit>> {
        let (ModelMessage::Request(b), ModelMessage::Request(s)) = (base, sent) else {
            return None;
        };
        if !same_but_parts(b, s) {
            return None;
        }
        let mut parts = Vec::with_capacity(s.parts.len());
        for p in &s.parts {
            parts.push(match b.parts.iter().position(|q| q == p) {
                Some(k) => PartSrc::Same(k),
                None => PartSrc::new_part(serde_json::to_value(p).ok()?, tables)?,
            });
        }
        let edit = Edit {
            base: index,
            parts,
            set: serde_json::Map::new(),
            unset: Vec::new(),
        };
        Some(edit.if_smaller(base, sent, tables))
    }

    /// Whether this edit of `base` surely gives `sent`, told without building the
    /// message: the stored parts it keeps are compared in place and its new parts by
    /// the text `sent`'s parts write (`buf` is scratch space). `false` means only that
    /// it could not be told so (a capsule's text part, changed fields): the caller then
    /// builds the message with [`Edit::apply`] and compares. Committing the first
    /// request of a question compares one receipt per earlier question this way.
    pub(super) fn surely_gives(
        &self,
        base: &ModelMessage,
        sent: &ModelMessage,
        buf: &mut Vec<u8>,
    ) -> bool {
        let (ModelMessage::Request(b), ModelMessage::Request(s)) = (base, sent) else {
            return false;
        };
        if !self.set.is_empty()
            || !self.unset.is_empty()
            || self.parts.len() != s.parts.len()
            || !same_but_parts(b, s)
        {
            return false;
        }
        self.parts.iter().zip(&s.parts).all(|(p, q)| match p {
            PartSrc::Same(k) => b.parts.get(*k) == Some(q),
            PartSrc::New(v) => {
                buf.clear();
                serde_json::to_writer(&mut *buf, q).is_ok() && buf == v.get().as_bytes()
            }
            PartSrc::Text(..) | PartSrc::List(..) => false,
        })
    }

    /// The message, given the stored one it replaced.
    pub(super) fn apply(&self, base: &ModelMessage, tables: &Tables) -> Option<ModelMessage> {
        // A request whose fields are all kept: built from the typed parts (the stored
        // message is not serialized to be read back).
        if let ModelMessage::Request(b) = base
            && self.set.is_empty()
            && self.unset.is_empty()
        {
            let parts = self
                .parts
                .iter()
                .map(|p| match p {
                    PartSrc::Same(k) => b.parts.get(*k).cloned(),
                    PartSrc::New(v) => serde_json::from_str(v.get()).ok(),
                    PartSrc::Text(t, rest) => {
                        serde_json::from_value(text_part(*t, rest, tables)).ok()
                    }
                    PartSrc::List(t, rest) => {
                        serde_json::from_value(list_part(*t, rest, tables)).ok()
                    }
                })
                .collect::<Option<Vec<_>>>()?;
            return Some(ModelMessage::from(b.with_parts(parts)));
        }
        let Ok(Value::Object(b)) = serde_json::to_value(base) else {
            return None;
        };
        let empty = Vec::new();
        let base_parts = b.get("parts").and_then(Value::as_array).unwrap_or(&empty);
        let parts: Vec<Value> = self
            .parts
            .iter()
            .map(|p| p.value(base_parts, tables))
            .collect();
        // Keys in the order the message has them.
        let mut out = serde_json::Map::new();
        for (k, v) in &b {
            if self.unset.contains(k) {
                continue;
            }
            let v = if k == "parts" {
                Value::Array(parts.clone())
            } else {
                self.set.get(k).cloned().unwrap_or_else(|| v.clone())
            };
            out.insert(k.clone(), v);
        }
        for (k, v) in &self.set {
            if !out.contains_key(k) {
                out.insert(k.clone(), v.clone());
            }
        }
        if !out.contains_key("parts") {
            out.insert("parts".into(), Value::Array(parts));
        }
        serde_json::from_value(Value::Object(out)).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::messages::{ModelRequestPart, ToolReturnPart, UserPromptPart};
    use serde_json::json;

    fn request(parts: Vec<ModelRequestPart>) -> ModelMessage {
        ModelMessage::from(ModelRequest::new(parts))
    }

    fn tool_return(content: Value) -> ModelRequestPart {
        ModelRequestPart::ToolReturn(ToolReturnPart::new("search", content, "c1"))
    }

    /// A receipt in place of an evidence return is told to be what the edit gives
    /// without building it; another content, another field or a capsule's shared text
    /// is not (the caller then builds the message and compares).
    #[test]
    fn an_edit_is_told_to_give_a_message_without_building_it() {
        let prompt = ModelRequestPart::UserPrompt(UserPromptPart::new("q"));
        let base = request(vec![
            prompt.clone(),
            tool_return(json!([{"chunk_id": "a", "content": "evidence"}])),
        ]);
        let mut sent = base.clone();
        sent.as_request_mut().unwrap().parts[1] = tool_return(json!("a short receipt"));
        let mut tables = Tables::default();
        let edit = Edit::of(0, &base, &sent, &mut tables).expect("an edit");
        assert!(matches!(
            edit.parts[..],
            [PartSrc::Same(0), PartSrc::New(_)]
        ));
        let mut buf = Vec::new();
        assert!(edit.surely_gives(&base, &sent, &mut buf));
        assert_eq!(edit.apply(&base, &tables).as_ref(), Some(&sent));

        let mut other = sent.clone();
        other.as_request_mut().unwrap().parts[1] = tool_return(json!("another receipt"));
        assert!(!edit.surely_gives(&base, &other, &mut buf));
        let mut other = sent.clone();
        other.as_request_mut().unwrap().run_id = Some("elsewhere".into());
        assert!(!edit.surely_gives(&base, &other, &mut buf));
        let mut other = sent.clone();
        other.as_request_mut().unwrap().parts.push(prompt);
        assert!(!edit.surely_gives(&base, &other, &mut buf));
        let mut moved = base.clone();
        moved.as_request_mut().unwrap().parts[0] =
            ModelRequestPart::UserPrompt(UserPromptPart::new("another question"));
        assert!(!edit.surely_gives(&moved, &sent, &mut buf), "another base");

        let long = "capsule text ".repeat(40);
        let mut capsule = base.clone();
        capsule.as_request_mut().unwrap().parts[1] = tool_return(json!(long));
        let edit = Edit::of(0, &base, &capsule, &mut tables).expect("an edit");
        assert!(matches!(edit.parts[1], PartSrc::Text(..)));
        assert!(!edit.surely_gives(&base, &capsule, &mut buf));
        assert_eq!(edit.apply(&base, &tables).as_ref(), Some(&capsule));
    }

    /// A new part whose content is a long list (the capsule's pictures) keeps that list
    /// in the text table, one item a line; the edit gives the sent message back, and a
    /// list grown by an item adds that item's line to the table, not the whole list.
    #[test]
    fn a_long_list_content_is_kept_in_the_text_table() {
        let prompt = ModelRequestPart::UserPrompt(UserPromptPart::new("q"));
        let base = request(vec![prompt.clone()]);
        let picture = |n: usize| {
            vec![
                json!(format!("Figure {n} [haiku.rag/retrieved-image]")),
                json!({"kind": "binary", "data": "QUJD".repeat(100 + n), "media_type": "image/png",
                    "identifier": format!("#/pictures/{n}"), "vendor_metadata": null}),
            ]
        };
        let with = |n: usize| {
            let items: Vec<Value> = (0..n).flat_map(picture).collect();
            let part: ModelRequestPart = serde_json::from_value(json!({
                "part_kind": "user-prompt", "content": items, "timestamp": "2026-01-01T00:00:00Z"}))
            .unwrap();
            request(vec![part, prompt.clone()])
        };
        let mut tables = Tables::default();
        let one = with(1);
        let edit = Edit::of(0, &base, &one, &mut tables).expect("an edit");
        assert!(matches!(
            edit.parts[..],
            [PartSrc::List(0, _), PartSrc::Same(0)]
        ));
        assert_eq!(edit.apply(&base, &tables).as_ref(), Some(&one));
        assert!(!edit.surely_gives(&base, &one, &mut Vec::new()));
        let json = serde_json::to_string(&edit).unwrap();
        assert!(
            !json.contains("QUJD"),
            "the pictures are in the table: {json}"
        );
        let read: Edit = serde_json::from_str(&json).unwrap();
        assert_eq!(read.apply(&base, &tables).as_ref(), Some(&one));

        let two = with(2);
        let edit = Edit::of(0, &base, &two, &mut tables).expect("an edit");
        assert_eq!(edit.apply(&base, &tables).as_ref(), Some(&two));
        let added = serde_json::to_string(&tables.texts.stored_from(1)).unwrap();
        assert_eq!(
            added.matches("QUJD").count(),
            100 + 1,
            "only the new picture: {added}"
        );
        // The same list again is the same text.
        Edit::of(0, &base, &two, &mut tables).expect("an edit");
        assert_eq!(tables.texts.len(), 2);
    }
}
