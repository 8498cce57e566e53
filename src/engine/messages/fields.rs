//! Reading a message or a part from JSON key by key: its fields are kept in the order
//! they came as a short list, with the names pydantic-ai uses held as static strings, and
//! taken out one by one into the typed value. A long history is mostly small objects of
//! a few strings each; reading each through a `serde_json::Map` first (an index map with
//! hashed keys, every key allocated) cost more than the strings themselves.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::SharedText;

/// A field name: one of the names the message model knows, or another one.
pub(super) type Key = Cow<'static, str>;

/// An object's fields in the order they were read. A name read twice keeps its first
/// place and its last value, as a `serde_json::Map` does.
#[derive(Debug, Default)]
pub(super) struct Fields(Vec<(Key, Value)>);

impl Fields {
    fn push(&mut self, key: Key, value: Value) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// The string value of `key`, if it has one.
    pub(super) fn str(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.as_str())
    }

    /// Takes `key`'s value out; the others keep their order.
    pub(super) fn value(&mut self, key: &str) -> Option<Value> {
        let at = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(at).1)
    }

    /// Takes `key` out and reads it as `T`; `None` when it is absent.
    pub(super) fn take<T: FromField>(&mut self, key: &str) -> serde_json::Result<Option<T>> {
        self.value(key).map(T::from_field).transpose()
    }

    /// [`Fields::take`] for a field that must be there.
    pub(super) fn required<T: FromField>(&mut self, key: &'static str) -> serde_json::Result<T> {
        self.take(key)?
            .ok_or_else(|| serde_json::Error::missing_field(key))
    }

    /// [`Fields::take`] for an optional field (absent and `null` are `None`).
    pub(super) fn optional<T: FromField>(&mut self, key: &str) -> serde_json::Result<Option<T>> {
        Ok(self.take::<Option<T>>(key)?.flatten())
    }

    /// The fields left, in order (a value's unknown fields, or a part kept verbatim).
    pub(super) fn into_map(self) -> Map<String, Value> {
        self.0
            .into_iter()
            .map(|(k, v)| (k.into_owned(), v))
            .collect()
    }
}

/// A field's value read as a typed value. Strings and `null` are taken as they are; any
/// other shape goes through the type's own reader, so the errors are serde's.
pub(super) trait FromField: Sized {
    fn from_field(value: Value) -> serde_json::Result<Self>;
}

/// Types read from a field by their own readers.
macro_rules! from_field_by_serde {
    ($($t:ty),* $(,)?) => {$(
        impl FromField for $t {
            fn from_field(value: Value) -> serde_json::Result<Self> {
                serde_json::from_value(value)
            }
        }
    )*};
}

from_field_by_serde!(
    super::RequestKind,
    super::ResponseKind,
    super::UserPromptKind,
    super::ToolReturnKind,
    super::TextKind,
    super::ToolCallKind,
    super::ThinkingKind,
    super::RequestUsage,
);

impl FromField for Value {
    fn from_field(value: Value) -> serde_json::Result<Self> {
        Ok(value)
    }
}

impl FromField for String {
    fn from_field(value: Value) -> serde_json::Result<Self> {
        match value {
            Value::String(s) => Ok(s),
            other => serde_json::from_value(other),
        }
    }
}

impl<T: FromField> FromField for Option<T> {
    fn from_field(value: Value) -> serde_json::Result<Self> {
        match value {
            Value::Null => Ok(None),
            other => T::from_field(other).map(Some),
        }
    }
}

impl FromField for super::Timestamp {
    fn from_field(value: Value) -> serde_json::Result<Self> {
        String::from_field(value).map(super::Timestamp)
    }
}

impl FromField for super::UserContentValue {
    fn from_field(value: Value) -> serde_json::Result<Self> {
        match value {
            Value::String(s) => Ok(super::UserContentValue::Text(s)),
            other => serde_json::from_value(other),
        }
    }
}

impl FromField for super::ToolArgs {
    fn from_field(value: Value) -> serde_json::Result<Self> {
        match value {
            Value::String(s) => Ok(super::ToolArgs::Json(s)),
            Value::Object(m) => Ok(super::ToolArgs::Object(m)),
            other => serde_json::from_value(other),
        }
    }
}

/// The names the message model reads, kept without allocating.
const NAMES: &[&str] = &[
    "args",
    "cache_audio_read_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "content",
    "conversation_id",
    "data",
    "details",
    "dynamic_ref",
    "finish_reason",
    "id",
    "identifier",
    "input_audio_tokens",
    "input_tokens",
    "instructions",
    "kind",
    "media_type",
    "metadata",
    "model_name",
    "outcome",
    "output_audio_tokens",
    "output_tokens",
    "part_kind",
    "parts",
    "provider_details",
    "provider_name",
    "provider_response_id",
    "provider_url",
    "run_id",
    "signature",
    "state",
    "timestamp",
    "tool_call_id",
    "tool_kind",
    "tool_name",
    "usage",
    "vendor_metadata",
];

/// The longest name in [`NAMES`] plus one.
const NAME_LENGTHS: usize = 24;

/// `name` as the static string of the same name in [`NAMES`], if it is one. A long
/// history has tens of thousands of field names: they are told apart by their length and
/// first byte before any comparison of the whole (a binary search over the sorted names
/// compared whole strings five or six times a name).
fn known(name: &str) -> Option<&'static str> {
    static BY_LENGTH: std::sync::OnceLock<[Vec<&'static str>; NAME_LENGTHS]> =
        std::sync::OnceLock::new();
    let table = BY_LENGTH.get_or_init(|| {
        let mut table: [Vec<&'static str>; NAME_LENGTHS] = Default::default();
        for name in NAMES {
            if let Some(slot) = table.get_mut(name.len()) {
                slot.push(name);
            }
        }
        table
    });
    let first = *name.as_bytes().first()?;
    table
        .get(name.len())?
        .iter()
        .copied()
        .find(|n| n.as_bytes().first() == Some(&first) && *n == name)
}

/// Reads a field name.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = Key;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(match known(v) {
            Some(name) => Cow::Borrowed(name),
            None => Cow::Owned(v.to_string()),
        })
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Key, E> {
        Ok(match known(&v) {
            Some(name) => Cow::Borrowed(name),
            None => Cow::Owned(v),
        })
    }
}

/// Reads an object's fields; `special` may read a field's value itself (it is told how
/// many fields were kept before it) and says whether it did.
fn read_fields<'de, A: MapAccess<'de>>(
    mut access: A,
    mut special: impl FnMut(&Key, usize, &mut A) -> Result<bool, A::Error>,
) -> Result<Fields, A::Error> {
    let mut fields = Fields(Vec::with_capacity(access.size_hint().unwrap_or(8)));
    while let Some(key) = access.next_key_seed(KeySeed)? {
        if !special(&key, fields.0.len(), &mut access)? {
            let value = access.next_value::<Value>()?;
            fields.push(key, value);
        }
    }
    Ok(fields)
}

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Fields;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, access: A) -> Result<Fields, A::Error> {
                read_fields(access, |_, _, _| Ok(false))
            }
        }
        d.deserialize_map(V)
    }
}

/// A message as read, before its kind says what it is: its parts' fields, its
/// instructions (read as shared text straight away: every request repeats them) and its
/// other fields.
pub(super) struct MessageFields {
    pub(super) parts: Option<Vec<Fields>>,
    pub(super) instructions: Option<Option<SharedText>>,
    /// Where the instructions came among the other fields.
    instructions_at: usize,
    pub(super) rest: Fields,
}

impl MessageFields {
    /// The instructions back among the other fields, in their place (a message that has
    /// no such field keeps them as an unknown one).
    pub(super) fn rest_with_instructions(mut self) -> Fields {
        if let Some(text) = self.instructions.take() {
            let value = text.map_or(Value::Null, |t| Value::String(t.to_string()));
            let at = self.instructions_at.min(self.rest.0.len());
            self.rest
                .0
                .insert(at, (Cow::Borrowed("instructions"), value));
        }
        self.rest
    }
}

impl<'de> Deserialize<'de> for MessageFields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MessageFields;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a message object")
            }
            fn visit_map<A: MapAccess<'de>>(self, access: A) -> Result<MessageFields, A::Error> {
                let mut parts = None;
                let mut instructions = None;
                let mut instructions_at = 0;
                let rest = read_fields(access, |key, read, access| match key.as_ref() {
                    "parts" => {
                        parts = Some(access.next_value::<Vec<Fields>>()?);
                        Ok(true)
                    }
                    "instructions" => {
                        instructions = Some(access.next_value::<Option<SharedText>>()?);
                        instructions_at = read;
                        Ok(true)
                    }
                    _ => Ok(false),
                })?;
                Ok(MessageFields {
                    parts,
                    instructions,
                    instructions_at,
                    rest,
                })
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_known_as_itself_and_no_other_text_is() {
        assert!(NAMES.iter().all(|n| n.len() < NAME_LENGTHS));
        for name in NAMES {
            assert_eq!(known(name), Some(*name));
            // A copy read from elsewhere gives the static name.
            let copy: String = name.chars().collect();
            assert_eq!(known(&copy), Some(*name));
        }
        for other in [
            "",
            "x",
            "Args",
            "args ",
            "part_kinds",
            "kinds",
            "tool_nam",
            "zzzz",
        ] {
            assert_eq!(known(other), None, "{other:?}");
        }
        // An unknown name is kept as read.
        let f: Fields = serde_json::from_str(r#"{"args": 1, "argz": 2}"#).unwrap();
        assert!(matches!(&f.0[0].0, Cow::Borrowed("args")));
        assert!(matches!(&f.0[1].0, Cow::Owned(n) if n == "argz"));
    }

    #[test]
    fn fields_keep_their_order_and_a_repeated_name_its_first_place() {
        let f: Fields = serde_json::from_str(r#"{"b": 1, "zz": 2, "b": 3, "a": null}"#).unwrap();
        let m = f.into_map();
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"b":3,"zz":2,"a":null}"#
        );
    }
}
