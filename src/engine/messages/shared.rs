//! [`SharedText`]: a text many messages hold the same (a request's instructions, which
//! every request of a conversation carries and which rarely change), kept once in
//! memory and copied as a pointer.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An immutable text shared by its copies. Read from JSON, a text equal to the one read
/// just before on the same thread is that one again (instructions repeat message after
/// message), so a long history holds each distinct text once.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SharedText(Arc<str>);

thread_local! {
    static LAST_READ: std::cell::RefCell<Option<Arc<str>>> = const { std::cell::RefCell::new(None) };
}

impl SharedText {
    /// `text`, sharing the text read (or interned) last on this thread when it is the
    /// same.
    pub fn interned(text: &str) -> Self {
        LAST_READ.with(|last| {
            let mut last = last.borrow_mut();
            match last.as_ref() {
                Some(seen) if **seen == *text => SharedText(seen.clone()),
                _ => {
                    let shared: Arc<str> = Arc::from(text);
                    *last = Some(shared.clone());
                    SharedText(shared)
                }
            }
        })
    }
}

impl Deref for SharedText {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SharedText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl PartialEq<&str> for SharedText {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl Serialize for SharedText {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SharedText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = SharedText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<SharedText, E> {
                Ok(SharedText::interned(v))
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_read_one_after_the_other_are_kept_once() {
        let texts: Vec<SharedText> = serde_json::from_str(
            r#"["Answer from the base.", "Answer from the base.", "Other.", "Other."]"#,
        )
        .unwrap();
        assert!(Arc::ptr_eq(&texts[0].0, &texts[1].0));
        assert!(Arc::ptr_eq(&texts[2].0, &texts[3].0));
        assert!(!Arc::ptr_eq(&texts[1].0, &texts[2].0));
        assert_eq!(texts[2], "Other.");
        assert_eq!(
            serde_json::to_string(&texts[0]).unwrap(),
            r#""Answer from the base.""#
        );
        // Read from a JSON value too.
        let v: SharedText = serde_json::from_value(serde_json::json!("Other.")).unwrap();
        assert!(Arc::ptr_eq(&v.0, &texts[3].0));
    }
}
