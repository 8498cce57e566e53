//! The knowledge base at a point of its history. Every write makes a new version of the
//! tables it touches (LanceDB dataset versions); the versions of all five tables name the
//! knowledge base as a question saw it ([`TableVersions`]). Tags are database-level, as
//! haiku.rag keeps them (`haiku-rag tag create`): one LanceDB tag of the same name on every
//! table, so a tag made by either tool is read by the other. A store can be checked out at
//! recorded versions or at a tag: it then reads the knowledge base as it was and refuses
//! every write in one line.

use std::collections::BTreeMap;

use lancedb::Table;

use super::{Result, Store, StoreError, schema};

/// The version of each table, by table name (`documents`, `document_meta`, `chunks`,
/// `document_items`, `settings`).
pub type TableVersions = BTreeMap<String, u64>;

/// A database-level tag: the version it names on each table that has it, and the tables
/// it is missing from (a partial tag: made outside either tool, or left by a failure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagInfo {
    pub name: String,
    pub tables: TableVersions,
    pub missing: Vec<String>,
}

impl TagInfo {
    /// Whether every table has it.
    pub fn complete(&self) -> bool {
        self.missing.is_empty()
    }
}

/// Where a store reads from when it is not the newest versions: the tag, or the recorded
/// versions (read-only then).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pinned {
    Tag(String),
    Versions(TableVersions),
    /// As it was at this time (each table's newest version made at or before it).
    Time(chrono::DateTime<chrono::Utc>),
}

impl std::fmt::Display for Pinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pinned::Tag(t) => write!(f, "tag '{t}'"),
            Pinned::Time(t) => write!(f, "{}", t.format("%Y-%m-%dT%H:%M:%SZ")),
            Pinned::Versions(v) => write!(
                f,
                "versions {}",
                v.iter()
                    .map(|(t, n)| format!("{t} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

impl Store {
    /// The five tables, by name (`tables()` is the four of documents and chunks).
    fn all_tables(&self) -> [(&'static str, &Table); 5] {
        [
            (schema::DOCUMENTS, &self.documents),
            (schema::DOCUMENT_META, &self.meta),
            (schema::CHUNKS, &self.chunks),
            (schema::DOCUMENT_ITEMS, &self.items),
            (schema::SETTINGS, &self.settings_table),
        ]
    }

    /// The version of every table as this store reads it.
    pub async fn table_versions(&self) -> Result<TableVersions> {
        let mut out = TableVersions::new();
        for (name, table) in self.all_tables() {
            out.insert(name.to_string(), table.version().await?);
        }
        Ok(out)
    }

    /// Where this store is pinned (none: it reads and writes the newest versions).
    pub fn pinned(&self) -> Option<&Pinned> {
        self.pinned.as_ref()
    }

    /// One line refusing a write to a pinned store.
    pub(crate) fn writable(&self) -> Result<()> {
        match &self.pinned {
            None => Ok(()),
            Some(p) => Err(StoreError::Other(format!(
                "{} is open read-only at {p}; writes need the database as it is now (without --at)",
                self.uri
            ))),
        }
    }

    /// Every tag of the database, by name, complete or partial.
    pub async fn tags(&self) -> Result<Vec<TagInfo>> {
        let mut tags: BTreeMap<String, TableVersions> = BTreeMap::new();
        for (name, table) in self.all_tables() {
            for (tag, contents) in table.tags().await?.list().await? {
                tags.entry(tag)
                    .or_default()
                    .insert(name.to_string(), contents.version);
            }
        }
        Ok(tags
            .into_iter()
            .map(|(name, tables)| TagInfo {
                missing: self
                    .tables()
                    .iter()
                    .map(|(t, _)| t.to_string())
                    .filter(|t| !tables.contains_key(t))
                    .collect(),
                name,
                tables,
            })
            .collect())
    }

    /// Tags the current version of every table `name`. A name already used, on every
    /// table or on some, is refused; when tagging fails part way, the tags made are taken
    /// back. Returns the versions tagged.
    pub async fn create_tag(&self, name: &str) -> Result<TableVersions> {
        self.writable()?;
        check_tag_name(name)?;
        if let Some(t) = self.tags().await?.into_iter().find(|t| t.name == name) {
            return Err(StoreError::Other(if t.complete() {
                format!("tag '{name}' already exists")
            } else {
                format!(
                    "tag '{name}' already exists on some tables ({}); delete it first",
                    t.tables.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            }));
        }
        let versions = self.table_versions().await?;
        for (table_name, table) in self.all_tables() {
            let made = async { table.tags().await?.create(name, versions[table_name]).await };
            if let Err(e) = made.await {
                let _ = self.delete_tag_everywhere(name).await;
                return Err(StoreError::Other(format!(
                    "could not tag {table_name} '{name}' ({e}); the tag was taken back"
                )));
            }
        }
        Ok(versions)
    }

    /// Deletes tag `name` from every table that has it.
    pub async fn delete_tag(&self, name: &str) -> Result<()> {
        self.writable()?;
        if !self.delete_tag_everywhere(name).await? {
            return Err(StoreError::Other(format!("there is no tag '{name}'")));
        }
        Ok(())
    }

    async fn delete_tag_everywhere(&self, name: &str) -> Result<bool> {
        let mut found = false;
        for (_, table) in self.all_tables() {
            let mut tags = table.tags().await?;
            if tags.list().await?.contains_key(name) {
                tags.delete(name).await?;
                found = true;
            }
        }
        Ok(found)
    }

    /// Reads the knowledge base as it was at `versions` from now on (read-only). A table
    /// whose version is gone (cleaned up since) is named in the error.
    pub async fn check_out(&mut self, versions: &TableVersions) -> Result<()> {
        for (name, table) in self.all_tables() {
            let Some(&v) = versions.get(name) else {
                return Err(StoreError::Other(format!(
                    "the recorded versions of {} name no version of table {name}",
                    self.uri
                )));
            };
            table.checkout(v).await.map_err(|e| {
                StoreError::Other(format!(
                    "{} no longer has version {v} of table {name} ({e})",
                    self.uri
                ))
            })?;
        }
        self.pinned = Some(Pinned::Versions(versions.clone()));
        Ok(())
    }

    /// Another handle of this database, checked out at `versions` (read-only), searching
    /// as this one does (its query embedder and search settings).
    pub async fn at_versions(&self, versions: &TableVersions) -> Result<Store> {
        let mut s = Store::open(&self.uri).await?;
        s.embedder = self.embedder.clone();
        s.set_search_config(self.search_config.clone());
        s.check_out(versions).await?;
        Ok(s)
    }

    /// Reads the knowledge base as it was at tag `name` from now on (read-only). A partial
    /// tag or an unknown one is refused in one line (naming the tags there are).
    pub async fn check_out_tag(&mut self, name: &str) -> Result<TableVersions> {
        let tags = self.tags().await?;
        let Some(tag) = tags.iter().find(|t| t.name == name) else {
            let known: Vec<&str> = tags.iter().map(|t| t.name.as_str()).collect();
            return Err(StoreError::Other(format!(
                "{} has no tag '{name}' ({})",
                self.uri,
                if known.is_empty() {
                    "it has no tags; `groundwork tag create NAME` makes one".to_string()
                } else {
                    format!("its tags: {}", known.join(", "))
                }
            )));
        };
        if !tag.complete() {
            return Err(StoreError::Other(format!(
                "tag '{name}' of {} is missing on {}: it does not name the whole knowledge base",
                self.uri,
                tag.missing.join(", ")
            )));
        }
        let versions = tag.tables.clone();
        self.check_out(&versions).await?;
        self.pinned = Some(Pinned::Tag(name.to_string()));
        Ok(versions)
    }
}

impl Store {
    /// Version `version` of the `chunks` table with every other table as it was when that
    /// version was written; a version the table does not have is named with the ones it has.
    pub async fn versions_with_chunks(&self, version: u64) -> Result<TableVersions> {
        let listed = self.chunks.list_versions().await?;
        let Some(made) = listed.iter().find(|v| v.version == version) else {
            let (first, last) = (
                listed.iter().map(|v| v.version).min().unwrap_or(0),
                listed.iter().map(|v| v.version).max().unwrap_or(0),
            );
            return Err(StoreError::Other(format!(
                "{} has no version {version} of its chunks table (it has {first} to {last}, \
                 less any cleaned up)",
                self.uri
            )));
        };
        let mut versions = self.versions_at(made.timestamp).await?;
        versions.insert(schema::CHUNKS.to_string(), version);
        Ok(versions)
    }

    /// The version of every table as it was at `at`: each table's newest version made at
    /// or before it. A table with no version that old is named in the error.
    pub async fn versions_at(&self, at: chrono::DateTime<chrono::Utc>) -> Result<TableVersions> {
        let mut out = TableVersions::new();
        for (name, table) in self.all_tables() {
            let v = table
                .list_versions()
                .await?
                .into_iter()
                .filter(|v| v.timestamp <= at)
                .map(|v| v.version)
                .max()
                .ok_or_else(|| {
                    StoreError::Other(format!(
                        "{} had no table {name} yet at {}",
                        self.uri,
                        at.format("%Y-%m-%dT%H:%M:%SZ")
                    ))
                })?;
            out.insert(name.to_string(), v);
        }
        Ok(out)
    }

    /// Reads the knowledge base as it was at `at` from now on (read-only): a tag, else a
    /// version of the `chunks` table (a number: every other table as it was when that
    /// version was written), else a time (`2026-12-01T10:00:00Z`, `2026-12-01T10:00`,
    /// `2026-12-01`: UTC; a date is its first moment). A tag of that name wins.
    pub async fn check_out_at(&mut self, at: &str) -> Result<TableVersions> {
        let tags = self.tags().await?;
        if tags.iter().any(|t| t.name == at) {
            return self.check_out_tag(at).await;
        }
        if let Ok(version) = at.parse::<u64>() {
            let versions = self.versions_with_chunks(version).await?;
            self.check_out(&versions).await?;
            return Ok(versions);
        }
        let Some(time) = parse_time(at) else {
            // Neither: the tag error names the tags there are.
            return self.check_out_tag(at).await.map_err(|e| {
                StoreError::Other(format!(
                    "{e}; --at also takes a time, e.g. 2026-12-01T10:00"
                ))
            });
        };
        let versions = self.versions_at(time).await?;
        self.check_out(&versions).await?;
        self.pinned = Some(Pinned::Time(time));
        Ok(versions)
    }
}

/// `2026-12-01T10:00:00Z` (RFC 3339, any offset), `2026-12-01T10:00[:00]` or
/// `2026-12-01 10:00[:00]` (UTC), `2026-12-01` (its first moment, UTC).
fn parse_time(s: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    use chrono::{NaiveDate, NaiveDateTime, TimeZone, Utc};
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    for f in [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, f) {
            return Some(Utc.from_utc_datetime(&t));
        }
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| Utc.from_utc_datetime(&t))
}

/// A tag name LanceDB takes: letters, digits, `.`, `_`, `-`, not starting with `.` or `-`.
fn check_tag_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !name.starts_with(['.', '-'])
        && !name.ends_with(".lock")
        && !name.contains("..");
    if ok {
        Ok(())
    } else {
        Err(StoreError::Other(format!(
            "'{name}' cannot be a tag: use letters, digits, '.', '_' and '-' (not first)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::parse_time;

    #[test]
    fn times_read_as_utc() {
        let t = |s: &str| parse_time(s).map(|t| t.to_rfc3339());
        assert_eq!(
            t("2026-12-01T10:00:00Z").unwrap(),
            "2026-12-01T10:00:00+00:00"
        );
        assert_eq!(
            t("2026-12-01T11:00:00+01:00").unwrap(),
            "2026-12-01T10:00:00+00:00"
        );
        assert_eq!(t("2026-12-01T10:00").unwrap(), "2026-12-01T10:00:00+00:00");
        assert_eq!(
            t("2026-12-01 10:00:30").unwrap(),
            "2026-12-01T10:00:30+00:00"
        );
        assert_eq!(t("2026-12-01").unwrap(), "2026-12-01T00:00:00+00:00");
        assert_eq!(t("v1"), None);
        assert_eq!(t("2026-13-01"), None);
    }
}
