//! The document filter of a session: haiku.rag's SQL built from selected document
//! labels, and reading and writing it in the evidence states.

use serde_json::{Map, Value};

use crate::capabilities::state::{EvidenceState, StateKind};

/// The SQL filter haiku.rag's document filter builds from selected document labels: per
/// name a case-insensitive `LIKE` on `uri` or `title`, plus the same with spaces removed;
/// several names joined by `OR`. No names → no filter.
pub fn document_filter_sql(names: &[String]) -> Option<String> {
    let clauses: Vec<String> = names
        .iter()
        .map(|name| {
            let esc = name.replace('\'', "''");
            let squeezed = esc.replace(' ', "");
            let mut parts = vec![
                format!("LOWER(uri) LIKE LOWER('%{esc}%')"),
                format!("LOWER(title) LIKE LOWER('%{esc}%')"),
            ];
            if squeezed != esc {
                parts.push(format!("LOWER(uri) LIKE LOWER('%{squeezed}%')"));
                parts.push(format!("LOWER(title) LIKE LOWER('%{squeezed}%')"));
            }
            parts.join(" OR ")
        })
        .collect();
    match clauses.len() {
        0 => None,
        1 => Some(clauses.into_iter().next().unwrap_or_default()),
        _ => Some(
            clauses
                .iter()
                .map(|c| format!("({c})"))
                .collect::<Vec<_>>()
                .join(" OR "),
        ),
    }
}

/// Writes `filter` into `document_filter` of every evidence state present.
pub fn set_document_filter(state: &mut Map<String, Value>, filter: Option<&str>) {
    for ns in [StateKind::Rag.namespace(), StateKind::Analysis.namespace()] {
        if let Some(Value::Object(s)) = state.get_mut(ns) {
            s.insert(
                "document_filter".into(),
                filter.map_or(Value::Null, |f| Value::String(f.to_string())),
            );
        }
    }
}

/// Applies the document filter chosen from `labels` (haiku.rag's SQL, see
/// [`document_filter_sql`]) to the session state: the RAG state is created when absent,
/// then every evidence state present gets the filter (none when `labels` is empty).
pub fn apply_document_filter(state: &mut Map<String, Value>, labels: &[String]) {
    let sql = document_filter_sql(labels);
    if !state.contains_key(StateKind::Rag.namespace()) {
        state.insert(
            StateKind::Rag.namespace().into(),
            EvidenceState::empty(StateKind::Rag).to_value(),
        );
    }
    set_document_filter(state, sql.as_deref());
}

/// The document filter of the session state (the RAG state's), if any.
pub fn document_filter(state: &Map<String, Value>) -> Option<String> {
    state
        .get(StateKind::Rag.namespace())
        .and_then(|s| s.get("document_filter"))
        .and_then(|v| v.as_str())
        .map(String::from)
}
