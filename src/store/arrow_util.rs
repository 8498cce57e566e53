//! Reading typed columns out of Arrow record batches, and building batches to write.

use arrow_array::{
    Array, BinaryArray, Float32Array, Float64Array, Int32Array, Int64Array, LargeBinaryArray,
    LargeStringArray, RecordBatch, StringArray,
};

/// A column of strings (Utf8 or LargeUtf8); nulls read as `None`.
pub fn strings(batch: &RecordBatch, name: &str) -> Vec<Option<String>> {
    let Some(col) = batch.column_by_name(name) else {
        return vec![None; batch.num_rows()];
    };
    if let Some(a) = col.as_any().downcast_ref::<StringArray>() {
        return (0..a.len())
            .map(|i| (!a.is_null(i)).then(|| a.value(i).to_string()))
            .collect();
    }
    if let Some(a) = col.as_any().downcast_ref::<LargeStringArray>() {
        return (0..a.len())
            .map(|i| (!a.is_null(i)).then(|| a.value(i).to_string()))
            .collect();
    }
    vec![None; batch.num_rows()]
}

/// A column of integers (Int32 or Int64); nulls read as `None`.
pub fn ints(batch: &RecordBatch, name: &str) -> Vec<Option<i64>> {
    let Some(col) = batch.column_by_name(name) else {
        return vec![None; batch.num_rows()];
    };
    if let Some(a) = col.as_any().downcast_ref::<Int64Array>() {
        return (0..a.len())
            .map(|i| (!a.is_null(i)).then(|| a.value(i)))
            .collect();
    }
    if let Some(a) = col.as_any().downcast_ref::<Int32Array>() {
        return (0..a.len())
            .map(|i| (!a.is_null(i)).then(|| a.value(i) as i64))
            .collect();
    }
    vec![None; batch.num_rows()]
}

/// A column of floats (Float32 or Float64); nulls read as `None`.
pub fn floats(batch: &RecordBatch, name: &str) -> Vec<Option<f64>> {
    let Some(col) = batch.column_by_name(name) else {
        return vec![None; batch.num_rows()];
    };
    if let Some(a) = col.as_any().downcast_ref::<Float32Array>() {
        return (0..a.len())
            .map(|i| (!a.is_null(i)).then(|| a.value(i) as f64))
            .collect();
    }
    if let Some(a) = col.as_any().downcast_ref::<Float64Array>() {
        return (0..a.len())
            .map(|i| (!a.is_null(i)).then(|| a.value(i)))
            .collect();
    }
    vec![None; batch.num_rows()]
}

/// A column of bytes (Binary or LargeBinary); nulls read as `None`.
pub fn binaries(batch: &RecordBatch, name: &str) -> Vec<Option<Vec<u8>>> {
    let Some(col) = batch.column_by_name(name) else {
        return vec![None; batch.num_rows()];
    };
    if let Some(a) = col.as_any().downcast_ref::<LargeBinaryArray>() {
        return (0..a.len())
            .map(|i| (!a.is_null(i)).then(|| a.value(i).to_vec()))
            .collect();
    }
    if let Some(a) = col.as_any().downcast_ref::<BinaryArray>() {
        return (0..a.len())
            .map(|i| (!a.is_null(i)).then(|| a.value(i).to_vec()))
            .collect();
    }
    vec![None; batch.num_rows()]
}

/// Quotes a string as a SQL literal for lance filters.
pub fn sql_str(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// `column IN ('a', 'b', ...)`.
pub fn sql_in(column: &str, values: &[String]) -> String {
    let list: Vec<String> = values.iter().map(|v| sql_str(v)).collect();
    format!("{column} IN ({})", list.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_escaped() {
        assert_eq!(sql_str("it's"), "'it''s'");
        assert_eq!(
            sql_in("id", &["a".into(), "b'c".into()]),
            "id IN ('a', 'b''c')"
        );
    }
}
