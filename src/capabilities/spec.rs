//! Building capabilities from a spec (SPEC §13): a list under `capabilities`, each
//! entry a class name, bare or mapped to its arguments, e.g.
//! `{"capabilities": [{"RAGCapability": {"db_path": "kb.lancedb"}}, "CitationPolicyCapability"]}`.
//! Works on JSON values; TOML converts to them through serde.

use std::collections::HashSet;
use std::sync::Arc;

use anyhow::bail;
use serde_json::Value;

use crate::capabilities::analysis::AnalysisCapability;
use crate::capabilities::compaction::hook::EvidenceCompactionCapability;
use crate::capabilities::policy::CitationPolicyCapability;
use crate::capabilities::rag::RagCapability;
use crate::engine::agent::AgentError;
use crate::engine::capability::Capability;

/// One capability from its class name and arguments (`null` when named bare).
pub fn capability_from_spec(name: &str, args: &Value) -> anyhow::Result<Arc<dyn Capability>> {
    Ok(match name {
        "RAGCapability" => Arc::new(RagCapability::from_spec(args)?),
        "AnalysisCapability" => Arc::new(AnalysisCapability::from_spec(args)?),
        "EvidenceCompactionCapability" => Arc::new(EvidenceCompactionCapability::from_spec(args)?),
        "CitationPolicyCapability" => Arc::new(CitationPolicyCapability::from_spec(args)?),
        other => bail!("unknown capability '{other}' in the spec"),
    })
}

/// Every capability of a spec, in order. Two entries with the same id are refused
/// before any run.
pub fn capabilities_from_spec(spec: &Value) -> anyhow::Result<Vec<Arc<dyn Capability>>> {
    let entries = match spec.get("capabilities") {
        Some(Value::Array(entries)) => entries,
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(other) => bail!("`capabilities` must be a list, found {other}"),
    };
    let mut built: Vec<Arc<dyn Capability>> = Vec::with_capacity(entries.len());
    let mut ids = HashSet::new();
    for entry in entries {
        let cap = match entry {
            Value::String(name) => capability_from_spec(name, &Value::Null)?,
            Value::Object(map) if map.len() == 1 => {
                let (name, args) = map.iter().next().expect("one entry");
                capability_from_spec(name, args)?
            }
            other => bail!("a capability entry is a name or a one-key mapping, found {other}"),
        };
        if !ids.insert(cap.id().to_string()) {
            return Err(AgentError::DuplicateCapability(cap.id().to_string()).into());
        }
        built.push(cap);
    }
    Ok(built)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scenario_93_and_95_spec_entries() {
        let caps = capabilities_from_spec(&json!({"capabilities": [
            {"RAGCapability": {"db_path": "/tmp/kb.lancedb"}},
            "EvidenceCompactionCapability",
            {"CitationPolicyCapability": {}}
        ]}))
        .unwrap();
        let ids: Vec<&str> = caps.iter().map(|c| c.id()).collect();
        assert_eq!(
            ids,
            [
                "haiku-rag",
                "haiku-rag-evidence-compaction",
                "haiku-rag-citation-policy"
            ]
        );
        assert!(caps[0].defer_loading());

        let err = capabilities_from_spec(&json!({"capabilities": [
            "CitationPolicyCapability", "CitationPolicyCapability"
        ]}))
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("haiku-rag-citation-policy") && err.contains("unique within a run"));
        assert!(
            capabilities_from_spec(&json!({"capabilities": [{"RAGCapability": {"sources": 1}}]}))
                .is_err()
        );
        assert!(capabilities_from_spec(&json!({"capabilities": ["Nope"]})).is_err());
    }
}
