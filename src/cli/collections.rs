//! Which databases a command opens: `--db PATH` (one unnamed store), `--db NAME=PATH`
//! repeated (named collections), else `[collections]` of the config file, else
//! `$HAIKU_RAG_DB` or the default database. [`parse_db_flags`] reads the flags;
//! [`Databases`] is the result every command reads.

use anyhow::{Result, bail};

use crate::config::check_collection_name;

/// What the command opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Databases {
    /// One unnamed store: its location.
    Single(String),
    /// Named collections, in the order given: (name, location).
    Collections(Vec<(String, String)>),
}

/// One `--db` value: `NAME=PATH` when the text before the first `=` could only be a
/// name (no `/`, `\`, `:`, `.` or `~` in it), else a bare path.
fn parse_one(value: &str) -> Result<(Option<String>, String)> {
    if let Some((name, path)) = value.split_once('=')
        && !name.contains(['/', '\\', ':', '.', '~'])
        && !name.is_empty()
    {
        if let Err(why) = check_collection_name(name) {
            bail!("--db {value}: {why}");
        }
        if path.trim().is_empty() {
            bail!("--db {value}: the database path of collection '{name}' is empty");
        }
        return Ok((Some(name.to_string()), path.to_string()));
    }
    if value.trim().is_empty() {
        bail!("--db needs a path (or NAME=PATH)");
    }
    Ok((None, value.to_string()))
}

/// The `--db` flags: none, one bare path, or named collections (never both kinds, no
/// name twice). `None` when no flag was given.
pub fn parse_db_flags(values: &[String]) -> Result<Option<Databases>> {
    let mut bare = Vec::new();
    let mut named: Vec<(String, String)> = Vec::new();
    for v in values {
        match parse_one(v)? {
            (None, path) => bare.push(path),
            (Some(name), path) => {
                if named.iter().any(|(n, _)| *n == name) {
                    bail!("--db {v}: collection '{name}' is given twice");
                }
                named.push((name, path));
            }
        }
    }
    match (bare.len(), named.is_empty()) {
        (0, true) => Ok(None),
        (1, true) => Ok(Some(Databases::Single(bare.remove(0)))),
        (_, true) => bail!(
            "--db is given {} times without names; name each collection: --db NAME=PATH",
            bare.len()
        ),
        (0, false) => Ok(Some(Databases::Collections(named))),
        (_, false) => bail!(
            "--db {} has no name but other --db flags do; name it: --db NAME={}",
            bare[0],
            bare[0]
        ),
    }
}

impl Databases {
    /// The collection names (empty for a single store).
    pub fn names(&self) -> Vec<String> {
        match self {
            Databases::Single(_) => Vec::new(),
            Databases::Collections(c) => c.iter().map(|(n, _)| n.clone()).collect(),
        }
    }

    /// The locations, each with its name (`None` for the single store).
    pub fn entries(&self) -> Vec<(Option<String>, String)> {
        match self {
            Databases::Single(db) => vec![(None, db.clone())],
            Databases::Collections(c) => c
                .iter()
                .map(|(n, db)| (Some(n.clone()), db.clone()))
                .collect(),
        }
    }

    /// Only the collection `name` (`--collection NAME`); `None` keeps them all.
    pub fn only(&self, name: Option<&str>) -> Result<Databases> {
        let Some(name) = name else {
            return Ok(self.clone());
        };
        match self {
            Databases::Single(_) => bail!(
                "--collection {name}: no named collections are open (give --db NAME=PATH or \
                 [collections] in the config file)"
            ),
            Databases::Collections(c) => match c.iter().find(|(n, _)| n == name) {
                Some(one) => Ok(Databases::Collections(vec![one.clone()])),
                None => bail!(
                    "--collection {name}: no such collection (open: {})",
                    self.names().join(", ")
                ),
            },
        }
    }

    /// The one database a writing command (`ingest`, `delete`) works on: the single
    /// store, the only collection, or the one `--collection` names.
    pub fn one(&self, name: Option<&str>, command: &str) -> Result<String> {
        let chosen = self.only(name)?;
        match chosen.entries().as_slice() {
            [(_, db)] => Ok(db.clone()),
            _ => bail!(
                "`{command}` works on one database: add --collection NAME (one of {})",
                self.names().join(", ")
            ),
        }
    }

    /// Shown where one location is shown: the path, or `name=path` joined by `, `.
    pub fn describe(&self) -> String {
        match self {
            Databases::Single(db) => db.clone(),
            Databases::Collections(c) => c
                .iter()
                .map(|(n, db)| format!("{n}={db}"))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(v: &[&str]) -> Result<Option<Databases>> {
        parse_db_flags(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    fn err(v: &[&str]) -> String {
        flags(v).unwrap_err().to_string()
    }

    #[test]
    fn bare_and_named_flags() {
        assert_eq!(flags(&[]).unwrap(), None);
        assert_eq!(
            flags(&["/kb/a.lancedb"]).unwrap(),
            Some(Databases::Single("/kb/a.lancedb".into()))
        );
        // `=` after a path character is part of the path.
        assert_eq!(
            flags(&["./x=y"]).unwrap(),
            Some(Databases::Single("./x=y".into()))
        );
        assert_eq!(
            flags(&["s3://b/k=v"]).unwrap(),
            Some(Databases::Single("s3://b/k=v".into()))
        );
        assert_eq!(
            flags(&["manuals=/kb/m", "papers=/kb/p"]).unwrap(),
            Some(Databases::Collections(vec![
                ("manuals".into(), "/kb/m".into()),
                ("papers".into(), "/kb/p".into())
            ]))
        );
    }

    #[test]
    fn bad_flags_are_one_line_each() {
        assert_eq!(
            err(&["a=/x", "a=/y"]),
            "--db a=/y: collection 'a' is given twice"
        );
        assert_eq!(
            err(&["my-docs=/x"]),
            "--db my-docs=/x: 'my-docs' is not a valid collection name (a letter or _, then \
             letters, digits or _)"
        );
        assert_eq!(
            err(&["a="]),
            "--db a=: the database path of collection 'a' is empty"
        );
        assert_eq!(
            err(&["/x", "a=/y"]),
            "--db /x has no name but other --db flags do; name it: --db NAME=/x"
        );
        assert_eq!(
            err(&["/x", "/y"]),
            "--db is given 2 times without names; name each collection: --db NAME=PATH"
        );
    }

    #[test]
    fn narrowing_to_one() {
        let d = flags(&["a=/x", "b=/y"]).unwrap().unwrap();
        assert_eq!(d.one(Some("b"), "ingest").unwrap(), "/y");
        assert_eq!(
            d.one(None, "ingest").unwrap_err().to_string(),
            "`ingest` works on one database: add --collection NAME (one of a, b)"
        );
        assert_eq!(
            d.only(Some("c")).unwrap_err().to_string(),
            "--collection c: no such collection (open: a, b)"
        );
        let single = Databases::Single("/z".into());
        assert_eq!(single.one(None, "delete").unwrap(), "/z");
        assert!(single.only(Some("a")).is_err());
    }
}
