//! The haiku.rag 0.77 table layout (SPEC §11) and the check that a database matches it.
//!
//! Column types and nullability are those haiku.rag 0.77 creates (see
//! `tests/fixtures/haiku/schema.txt`, dumped from a database it wrote).

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef};

pub const DOCUMENTS: &str = "documents";
pub const DOCUMENT_META: &str = "document_meta";
pub const CHUNKS: &str = "chunks";
pub const DOCUMENT_ITEMS: &str = "document_items";
pub const SETTINGS: &str = "settings";

pub const ALL_TABLES: [&str; 5] = [DOCUMENTS, DOCUMENT_META, CHUNKS, DOCUMENT_ITEMS, SETTINGS];

/// A non-null string column (haiku.rag's pydantic `str` fields).
fn utf8(name: &str) -> Field {
    Field::new(name, DataType::Utf8, false)
}

/// A nullable string column (haiku.rag's `str | None` fields).
fn utf8_null(name: &str) -> Field {
    Field::new(name, DataType::Utf8, true)
}

pub fn documents_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        utf8("id"),
        utf8("content"),
        Field::new("docling_document", DataType::LargeBinary, true),
        Field::new("docling_pages", DataType::LargeBinary, true),
        utf8_null("docling_version"),
    ]))
}

pub fn document_meta_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        utf8("id"),
        utf8_null("uri"),
        utf8_null("title"),
        utf8("metadata"),
        utf8("created_at"),
        utf8("updated_at"),
    ]))
}

pub fn vector_type(dim: usize) -> DataType {
    DataType::FixedSizeList(
        Arc::new(Field::new("item", DataType::Float32, true)),
        dim as i32,
    )
}

pub fn chunks_schema(dim: usize) -> SchemaRef {
    Arc::new(Schema::new(vec![
        utf8("id"),
        utf8("document_id"),
        utf8("content"),
        utf8("content_fts"),
        utf8("metadata"),
        Field::new("order", DataType::Int64, false),
        Field::new("vector", vector_type(dim), true),
    ]))
}

pub fn document_items_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        utf8("document_id"),
        Field::new("position", DataType::Int64, false),
        utf8("self_ref"),
        utf8("label"),
        utf8("text"),
        utf8("page_numbers"),
        Field::new("picture_data", DataType::LargeBinary, true),
        Field::new("heading_level", DataType::Int64, false),
        Field::new("tree_depth", DataType::Int64, false),
    ]))
}

pub fn settings_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![utf8("id"), utf8("settings")]))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKind {
    Fts,
    BTree,
    Bitmap,
}

/// The indexes haiku.rag 0.77 creates per table (its `schema.index_specs()`).
pub fn index_specs(table: &str) -> &'static [(&'static str, IndexKind)] {
    match table {
        DOCUMENTS => &[("id", IndexKind::BTree)],
        DOCUMENT_META => &[("id", IndexKind::BTree), ("uri", IndexKind::BTree)],
        CHUNKS => &[
            ("content_fts", IndexKind::Fts),
            ("id", IndexKind::BTree),
            ("document_id", IndexKind::BTree),
        ],
        DOCUMENT_ITEMS => &[
            ("document_id", IndexKind::BTree),
            ("position", IndexKind::BTree),
            ("self_ref", IndexKind::BTree),
            ("label", IndexKind::Bitmap),
        ],
        _ => &[],
    }
}

/// The expected schema of a table; `dim` is the embedding dimension for `chunks`.
pub fn expected(table: &str, dim: usize) -> SchemaRef {
    match table {
        DOCUMENTS => documents_schema(),
        DOCUMENT_META => document_meta_schema(),
        CHUNKS => chunks_schema(dim),
        DOCUMENT_ITEMS => document_items_schema(),
        _ => settings_schema(),
    }
}

/// Two types are compatible when they hold the same values for our purposes: string and
/// binary widths may differ (`Utf8`/`LargeUtf8`, `Binary`/`LargeBinary`), integers may be
/// 32 or 64 bits wide.
fn compatible(expected: &DataType, actual: &DataType) -> bool {
    use DataType::*;
    match (expected, actual) {
        (Utf8 | LargeUtf8 | Utf8View, Utf8 | LargeUtf8 | Utf8View) => true,
        (Binary | LargeBinary | BinaryView, Binary | LargeBinary | BinaryView) => true,
        (Int32 | Int64, Int32 | Int64) => true,
        (FixedSizeList(_, a), FixedSizeList(f, b)) => {
            a == b && matches!(f.data_type(), Float32 | Float16 | Float64)
        }
        (a, b) => a == b,
    }
}

/// Describes every way `actual` differs from the expected schema of `table`: missing
/// columns and columns of another type. Extra columns are allowed (newer haiku.rag versions
/// may add some). An empty list means the table matches.
pub fn differences(table: &str, actual: &Schema, dim: usize) -> Vec<String> {
    let want = expected(table, dim);
    let mut out = Vec::new();
    for field in want.fields() {
        match actual.field_with_name(field.name()) {
            Err(_) => out.push(format!(
                "table '{table}' has no column '{}' (expected {})",
                field.name(),
                describe(field.data_type())
            )),
            Ok(have) if !compatible(field.data_type(), have.data_type()) => out.push(format!(
                "column '{table}.{}' is {}, expected {}",
                field.name(),
                describe(have.data_type()),
                describe(field.data_type())
            )),
            Ok(_) => {}
        }
    }
    out
}

/// The dimension of `chunks.vector` in a schema, if it is a fixed-size list.
pub fn vector_dim(chunks: &Schema) -> Option<usize> {
    match chunks.field_with_name("vector").ok()?.data_type() {
        DataType::FixedSizeList(_, n) => Some(*n as usize),
        _ => None,
    }
}

pub fn describe(t: &DataType) -> String {
    match t {
        DataType::FixedSizeList(f, n) => format!("a vector of {n} {}", describe(f.data_type())),
        DataType::Utf8 | DataType::LargeUtf8 => "a string".into(),
        DataType::Binary | DataType::LargeBinary => "binary".into(),
        DataType::Int64 | DataType::Int32 => "an integer".into(),
        DataType::Float32 => "float32".into(),
        other => format!("{other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_schemas_match_themselves() {
        for t in ALL_TABLES {
            assert!(differences(t, &expected(t, 8), 8).is_empty(), "{t}");
        }
    }

    #[test]
    fn missing_and_mistyped_columns_are_named() {
        let s = Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("document_id", DataType::Int64, true),
        ]);
        let d = differences(CHUNKS, &s, 8);
        assert!(
            d.iter().any(|m| m.contains("no column 'content_fts'")),
            "{d:?}"
        );
        assert!(
            d.iter()
                .any(|m| m.contains("'chunks.document_id' is an integer")),
            "{d:?}"
        );
    }

    #[test]
    fn wrong_dimension_is_a_difference() {
        let d = differences(CHUNKS, &chunks_schema(384), 64);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].contains("384") && d[0].contains("64"), "{d:?}");
        assert_eq!(vector_dim(&chunks_schema(384)), Some(384));
    }
}
