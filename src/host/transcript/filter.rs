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

/// The filter modal's label of a document of collection `name` (several collections).
pub fn collection_label(name: &str, label: &str) -> String {
    format!("{name}: {label}")
}

/// [`apply_document_filter`] over several collections: each label chosen is
/// `NAME: label` ([`collection_label`]) for a collection of `collections`. The RAG state's
/// `collection_filters` get each collection's SQL (a search then covers only the
/// collections named), and `document_filter` the SQL of every label (as haiku.rag reads
/// it). A label without a known collection prefix filters every collection.
pub fn apply_collection_filter(
    state: &mut Map<String, Value>,
    labels: &[String],
    collections: &[String],
) {
    let mut per: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let mut plain = Vec::new();
    let mut unscoped = false;
    for l in labels {
        let scoped = collections.iter().find_map(|c| {
            l.strip_prefix(c.as_str())
                .and_then(|r| r.strip_prefix(": "))
                .map(|rest| (c.clone(), rest.to_string()))
        });
        match scoped {
            Some((c, rest)) => {
                per.entry(c).or_default().push(rest.clone());
                plain.push(rest);
            }
            None => {
                unscoped = true;
                plain.push(l.clone());
            }
        }
    }
    plain.dedup();
    apply_document_filter(state, &plain);
    let filters: Map<String, Value> = if unscoped {
        Map::new()
    } else {
        per.iter()
            .filter_map(|(c, names)| {
                document_filter_sql(names).map(|sql| (c.clone(), Value::String(sql)))
            })
            .collect()
    };
    if let Some(Value::Object(rag)) = state.get_mut(StateKind::Rag.namespace()) {
        if filters.is_empty() {
            rag.remove("collection_filters");
        } else {
            rag.insert("collection_filters".into(), Value::Object(filters));
        }
    }
}

/// The document filter of the session state (the RAG state's), if any.
pub fn document_filter(state: &Map<String, Value>) -> Option<String> {
    state
        .get(StateKind::Rag.namespace())
        .and_then(|s| s.get("document_filter"))
        .and_then(|v| v.as_str())
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_collection_filter_names_each_collection_or_none() {
        let colls = labels(&["manuals", "papers"]);
        let mut state = Map::new();
        apply_collection_filter(
            &mut state,
            &labels(&["papers: Handbook", "papers: Bolt Study"]),
            &colls,
        );
        let rag = &state["rag"];
        let filters = rag["collection_filters"].as_object().unwrap();
        assert_eq!(filters.keys().collect::<Vec<_>>(), ["papers"]);
        assert_eq!(
            filters["papers"],
            document_filter_sql(&labels(&["Handbook", "Bolt Study"])).unwrap()
        );
        assert_eq!(
            document_filter(&state),
            document_filter_sql(&labels(&["Handbook", "Bolt Study"]))
        );
        // The state type reads it back.
        let s = EvidenceState::load(StateKind::Rag, rag).unwrap();
        assert_eq!(s.collection_filters.len(), 1);
        // A label without a collection filters every collection alike.
        apply_collection_filter(&mut state, &labels(&["papers: Handbook", "Other"]), &colls);
        assert!(state["rag"].get("collection_filters").is_none());
        assert!(document_filter(&state).unwrap().contains("Other"));
        // Nothing chosen: no filter at all.
        apply_collection_filter(&mut state, &[], &colls);
        assert!(state["rag"].get("collection_filters").is_none());
        assert_eq!(document_filter(&state), None);
    }
}
