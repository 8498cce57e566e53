//! `[collections]` of the config file: named knowledge bases opened side by side
//! (`NAME = "PATH"`, in name order), and the rule every collection name follows,
//! whether it comes from the file or from `--db NAME=PATH`.

use std::path::Path;

use super::ConfigError;
use serde::Deserialize;
use serde::de::{MapAccess, Visitor};

/// What a collection name may be: an identifier (ASCII letter or `_`, then letters,
/// digits or `_`), so that it reads the same in a tool schema, a capsule line and a
/// shell. `Err` says why not, in one line.
pub fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "'{name}' is not a valid collection name (a letter or _, then letters, digits or _)"
        ))
    }
}

/// The collections the file names, in name order: (name, path).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CollectionsConfig(pub Vec<(String, String)>);

impl CollectionsConfig {
    /// Checks the raw `[collections]` table of the file `path` (holding `text`): every
    /// name valid, every path non-empty.
    pub(crate) fn from_file(
        raw: RawCollections,
        path: &Path,
        text: &str,
    ) -> Result<Self, ConfigError> {
        let mut out = Vec::with_capacity(raw.0.len());
        for (name, db) in raw.0 {
            let key = format!("collections.{name}");
            check_name(&name).map_err(|m| ConfigError::at_key(path, text, &key, m))?;
            if db.trim().is_empty() {
                return Err(ConfigError::at_key(
                    path,
                    text,
                    &key,
                    "the database path is empty",
                ));
            }
            out.push((name, db));
        }
        Ok(CollectionsConfig(out))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `[collections]` as written: (name, path) in the order the parser gives them.
#[derive(Debug, Default)]
pub(crate) struct RawCollections(Vec<(String, String)>);

impl<'de> Deserialize<'de> for RawCollections {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawCollections;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a table of NAME = \"PATH\"")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, String>()? {
                    out.push((k, v));
                }
                Ok(RawCollections(out))
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_identifiers() {
        for good in ["manuals", "_x", "Papers2", "a_b"] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for bad in ["", "2x", "my-docs", "a b", "é", "a.b"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn collections_come_in_name_order() {
        // toml hands the table over sorted by key; the order is the names', whatever the
        // file's.
        let c = crate::config::Config::parse(
            "[collections]\nzeta = \"/z\"\nalpha = \"/a\"\n",
            Path::new("c.toml"),
        )
        .unwrap();
        let names: Vec<&str> = c.collections.0.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["alpha", "zeta"]);
    }
}
