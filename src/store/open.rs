//! Opening an existing database (checking every table's columns and the vector
//! dimension against `settings`) and creating a new one.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use lancedb::Table;
use lancedb::query::ExecutableQuery;
use serde_json::{Value, json};

use super::arrow_util::strings;
use super::indexes::create_index;
use super::{Result, Store, StoreError, collect, schema};
use crate::config::SearchConfig;
use crate::config::StoreLayout;
use crate::embed::EmbedderSpec;

/// Reads the embedder a database was built with from its settings JSON. haiku.rag 0.77
/// writes `embeddings.model.{provider,name,vector_dim,base_url}`.
pub fn embedder_from_settings(settings: &Value) -> Option<EmbedderSpec> {
    let model = settings.get("embeddings")?.get("model")?;
    serde_json::from_value(model.clone()).ok()
}

impl Store {
    /// Opens an existing database and checks its layout. On object storage a missing
    /// bucket, rejected credentials or an unreachable endpoint is one clear sentence.
    pub async fn open(uri: &str) -> Result<Self> {
        let local = crate::paths::local_db_uri(uri);
        let uri = local.as_str();
        Self::open_at(uri)
            .await
            .map_err(|e| super::remote::explain(uri, e))
    }

    async fn open_at(uri: &str) -> Result<Self> {
        if !crate::paths::is_remote_uri(uri) {
            let path = std::path::Path::new(uri);
            if !path.exists() {
                return Err(StoreError::NotFound { uri: uri.into() });
            }
            if !path.is_dir() {
                return Err(StoreError::NotADirectory { uri: uri.into() });
            }
        }
        let db = super::remote::connect(uri).await?;
        let names = db.table_names().execute().await?;
        let missing: Vec<&str> = schema::ALL_TABLES
            .iter()
            .copied()
            .filter(|t| !names.iter().any(|n| n == t))
            .collect();
        if missing.len() == schema::ALL_TABLES.len() {
            if names.is_empty() {
                return Err(StoreError::NotFound { uri: uri.into() });
            }
            return Err(StoreError::ForeignSchema {
                uri: uri.into(),
                differences: vec![format!(
                    "it holds the tables {} but none of documents, document_meta, chunks, \
                     document_items, settings",
                    names.join(", ")
                )],
            });
        }
        if !missing.is_empty() {
            return Err(StoreError::ForeignSchema {
                uri: uri.into(),
                differences: missing
                    .iter()
                    .map(|t| format!("table '{t}' is missing"))
                    .collect(),
            });
        }
        let open = |name: &'static str| db.open_table(name).execute();
        let documents = open(schema::DOCUMENTS).await?;
        let meta = open(schema::DOCUMENT_META).await?;
        let chunks = open(schema::CHUNKS).await?;
        let items = open(schema::DOCUMENT_ITEMS).await?;
        let settings_table = open(schema::SETTINGS).await?;

        let settings = read_settings(&settings_table, uri).await?;
        let chunk_schema = chunks.schema().await?;
        let dim = schema::vector_dim(&chunk_schema).unwrap_or(0);
        let mut differences = Vec::new();
        for (name, table) in [
            (schema::DOCUMENTS, &documents),
            (schema::DOCUMENT_META, &meta),
            (schema::CHUNKS, &chunks),
            (schema::DOCUMENT_ITEMS, &items),
            (schema::SETTINGS, &settings_table),
        ] {
            let s = table.schema().await?;
            differences.extend(schema::differences(name, &s, dim.max(1)));
        }
        if dim == 0 && differences.is_empty() {
            differences.push("column 'chunks.vector' is not a fixed-size vector".into());
        }
        let embedder_spec = match embedder_from_settings(&settings) {
            Some(spec) => spec,
            None => {
                differences.push(
                    "settings record no embedder (expected embeddings.model with provider, \
                     name and vector_dim)"
                        .into(),
                );
                EmbedderSpec {
                    provider: String::new(),
                    name: String::new(),
                    vector_dim: dim,
                    base_url: None,
                }
            }
        };
        if differences.is_empty() && embedder_spec.vector_dim != dim {
            differences.push(format!(
                "settings say the embedder '{}' has {} dimensions, but chunks.vector has {dim}",
                embedder_spec.name, embedder_spec.vector_dim
            ));
        }
        if !differences.is_empty() {
            return Err(StoreError::ForeignSchema {
                uri: uri.into(),
                differences,
            });
        }
        Ok(Self {
            uri: uri.into(),
            documents,
            meta,
            chunks,
            items,
            settings_table,
            settings,
            pinned: None,
            embedder_spec,
            embedder: None,
            search_config: SearchConfig::default(),
            reranker: None,
            document_reads: Default::default(),
            cache: Default::default(),
        })
    }

    /// Creates a new, empty database built with `spec`'s embedder.
    pub async fn create(uri: &str, spec: &EmbedderSpec) -> Result<Self> {
        Self::create_in(uri, spec, StoreLayout::default()).await
    }

    /// Creates a new, empty database built with `spec`'s embedder, in haiku.rag's
    /// `layout`.
    pub async fn create_in(uri: &str, spec: &EmbedderSpec, layout: StoreLayout) -> Result<Self> {
        let local = crate::paths::local_db_uri(uri);
        let uri = local.as_str();
        if !crate::paths::is_remote_uri(uri) && std::path::Path::new(uri).is_file() {
            return Err(StoreError::NotADirectory { uri: uri.into() });
        }
        Self::create_at(uri, spec, layout)
            .await
            .map_err(|e| super::remote::explain(uri, e))
    }

    async fn create_at(uri: &str, spec: &EmbedderSpec, layout: StoreLayout) -> Result<Self> {
        let db = super::remote::connect(uri).await?;
        let names = db.table_names().execute().await?;
        if schema::ALL_TABLES
            .iter()
            .any(|t| names.iter().any(|n| n == t))
        {
            return Err(StoreError::AlreadyExists { uri: uri.into() });
        }
        for t in schema::ALL_TABLES {
            let table = db
                .create_empty_table(t, schema::expected(t, spec.vector_dim))
                .execute()
                .await?;
            for (col, kind) in schema::index_specs(t) {
                create_index(&table, col, *kind).await?;
            }
        }
        let settings = match layout {
            StoreLayout::V077 => json!({
                "version": layout.version(),
                "writer": format!("groundwork {}", env!("CARGO_PKG_VERSION")),
                "embeddings": { "model": spec },
            }),
            // Only the version and the embedder's identity, as haiku.rag 0.89+ records them.
            StoreLayout::V0101 => json!({
                "version": layout.version(),
                "embeddings": { "model": {
                    "provider": spec.provider,
                    "name": spec.name,
                    "vector_dim": spec.vector_dim,
                } },
            }),
        };
        let table = db.open_table(schema::SETTINGS).execute().await?;
        let batch = RecordBatch::try_new(
            schema::settings_schema(),
            vec![
                Arc::new(StringArray::from(vec!["settings"])) as ArrayRef,
                Arc::new(StringArray::from(vec![settings.to_string()])),
            ],
        )?;
        table.add(batch).execute().await?;
        drop(db);
        Self::open(uri).await
    }

    /// Opens the database at `uri`, creating it with `spec` when there is none.
    pub async fn open_or_create(uri: &str, spec: &EmbedderSpec) -> Result<Self> {
        match Self::open(uri).await {
            Err(StoreError::NotFound { .. }) => Self::create(uri, spec).await,
            other => other,
        }
    }
}

pub(super) async fn read_settings(table: &Table, uri: &str) -> Result<Value> {
    let batches = collect(table.query().execute().await?).await?;
    let raw = batches
        .iter()
        .flat_map(|b| {
            let ids = strings(b, "id");
            let s = strings(b, "settings");
            ids.into_iter().zip(s).collect::<Vec<_>>()
        })
        .find(|(id, _)| id.as_deref() == Some("settings"))
        .and_then(|(_, s)| s);
    let Some(raw) = raw else {
        return Err(StoreError::Settings {
            uri: uri.into(),
            message: "the settings table has no row with id 'settings'".into(),
        });
    };
    serde_json::from_str(&raw).map_err(|e| StoreError::Settings {
        uri: uri.into(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_embedder_is_read() {
        let s = json!({"embeddings": {"model": {"provider": "openai", "name": "m", "vector_dim": 8, "base_url": "http://x/v1"}}});
        let spec = embedder_from_settings(&s).unwrap();
        assert_eq!(spec.vector_dim, 8);
        assert_eq!(spec.base_url.as_deref(), Some("http://x/v1"));
        assert!(embedder_from_settings(&json!({})).is_none());
    }
}
