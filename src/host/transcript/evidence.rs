//! One chunk as every face meets it, from the search that found it to the screen: the
//! conversation's sources, the ledger's rows, visual grounding, the page images, the
//! explorer's hits and the Markdown export all carry this reference and name it with its
//! labels, so a chunk is named and located the same way wherever a reviewer meets it.
//!
//! The capabilities' own shapes ([`SearchResult`], [`Citation`], capsule entries) stay as
//! haiku.rag writes them; this is what the host reads out of them.

use serde::Serialize;

use crate::capabilities::state::Citation;
use crate::store::types::{SearchResult, source_label};

/// A chunk and where it stands: its capability and collection, its document, pages and
/// sections, its pictures.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Evidence {
    /// `rag` or `analysis`: the capability whose search or citation recorded it.
    pub capability: String,
    pub chunk_id: String,
    /// `""` when unknown.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub document_id: String,
    /// How the document is named: its title, else its URI ([`source_label`]); `""` when
    /// neither is known.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// `""` when unknown.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub document_uri: String,
    pub pages: Vec<i64>,
    pub headings: Vec<String>,
    pub picture_refs: Vec<String>,
    /// The collection it came from, when several were searched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collection: Option<String>,
}

impl Evidence {
    /// A chunk a capability cited, as its citation records it.
    pub fn cited(capability: &str, c: &Citation) -> Self {
        Evidence {
            capability: capability.to_string(),
            chunk_id: c.chunk_id.clone(),
            document_id: c.document_id.clone(),
            source: source_label(c.document_title.as_deref(), Some(&c.document_uri)),
            document_uri: c.document_uri.clone(),
            pages: c.page_numbers.clone(),
            headings: c.headings.clone().unwrap_or_default(),
            picture_refs: c.picture_refs.clone(),
            collection: c.collection.clone(),
        }
    }

    /// A chunk a search returned, as the hit records it.
    pub fn found(capability: &str, r: &SearchResult) -> Self {
        Evidence {
            capability: capability.to_string(),
            chunk_id: r.id().to_string(),
            document_id: r.document_id.clone().unwrap_or_default(),
            source: r.source_label(),
            document_uri: r.document_uri.clone().unwrap_or_default(),
            pages: r.page_numbers.clone(),
            headings: r.headings.clone().unwrap_or_default(),
            picture_refs: r
                .doc_item_refs
                .iter()
                .filter(|r| r.starts_with("#/pictures/"))
                .cloned()
                .collect(),
            collection: r.collection.clone(),
        }
    }

    /// A chunk known only by its id and the source line a search result gave it (a tool
    /// result read back from the history, its hit not in the state).
    pub fn listed(capability: &str, chunk_id: &str, source: Option<String>) -> Self {
        Evidence {
            capability: capability.to_string(),
            chunk_id: chunk_id.to_string(),
            source: source.unwrap_or_default(),
            ..Evidence::default()
        }
    }

    /// The source, or `?` when nothing names it.
    pub fn source_or_unknown(&self) -> &str {
        if self.source.is_empty() {
            "?"
        } else {
            &self.source
        }
    }

    /// `[n] Source (p.1, 2, 3...)`, as haiku.rag titles a citation: `n` the number the
    /// answer's markers use, `pages` the ones to show (the chunk's own once read, else
    /// the citation's, which span its expanded context).
    pub fn title(&self, number: i64, pages: &[i64]) -> String {
        let mut t = format!("[{number}] {}", self.source);
        if !pages.is_empty() {
            let shown: Vec<String> = pages.iter().take(3).map(i64::to_string).collect();
            let more = if pages.len() > 3 { "..." } else { "" };
            t.push_str(&format!(" (p.{}{more})", shown.join(", ")));
        }
        t
    }

    /// `libtasn1.pdf, p. 8, §Invoking asn1Parser`: the source, the given pages and the
    /// innermost of the given sections (the chunk's own once read).
    pub fn reference(&self, pages: &[i64], headings: &[String]) -> String {
        let mut r = self.source.clone();
        if !pages.is_empty() {
            let shown: Vec<String> = pages.iter().map(i64::to_string).collect();
            let p = if pages.len() == 1 { "p." } else { "pp." };
            r.push_str(&format!(", {p} {}", shown.join(", ")));
        }
        if let Some(section) = headings.last() {
            r.push_str(&format!(", §{section}"));
        }
        r
    }

    /// `source · chunk id`: how a picture or a page names the evidence it shows.
    pub fn caption(&self) -> String {
        format!("{} · {}", self.source, self.chunk_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn citation(title: Option<&str>, uri: &str) -> Citation {
        serde_json::from_value(serde_json::json!({
            "index": 3,
            "document_id": "d1",
            "chunk_id": "c1",
            "chunk_ids": ["c1"],
            "document_uri": uri,
            "document_title": title,
            "page_numbers": [8, 9],
            "headings": ["3 Invoking", "3.1 asn1Parser"],
            "content": "Usage: asn1Parser",
            "doc_item_refs": ["#/texts/4", "#/pictures/0"],
            "picture_refs": ["#/pictures/0"],
        }))
        .expect("a citation")
    }

    #[test]
    fn a_citation_and_a_hit_of_one_chunk_are_one_reference() {
        let cited = Evidence::cited("rag", &citation(Some("Libtasn1"), "file:///m.pdf"));
        let hit: SearchResult = serde_json::from_value(serde_json::json!({
            "content": "Usage: asn1Parser",
            "score": 0.5,
            "chunk_id": "c1",
            "document_id": "d1",
            "document_uri": "file:///m.pdf",
            "document_title": "Libtasn1",
            "page_numbers": [8, 9],
            "headings": ["3 Invoking", "3.1 asn1Parser"],
            "doc_item_refs": ["#/texts/4", "#/pictures/0"],
        }))
        .expect("a hit");
        assert_eq!(Evidence::found("rag", &hit), cited);
        assert_eq!(cited.source, "Libtasn1");
        assert_eq!(cited.picture_refs, ["#/pictures/0"]);
    }

    #[test]
    fn a_reference_is_named_by_title_else_uri_and_located_by_page_and_section() {
        let titled = Evidence::cited("rag", &citation(Some("Libtasn1"), "file:///m.pdf"));
        let untitled = Evidence::cited("rag", &citation(Some(" "), "file:///m.pdf"));
        assert_eq!(untitled.source, "file:///m.pdf");
        assert_eq!(titled.title(1, &[8, 9]), "[1] Libtasn1 (p.8, 9)");
        assert_eq!(
            titled.title(2, &[1, 2, 3, 4]),
            "[2] Libtasn1 (p.1, 2, 3...)"
        );
        assert_eq!(titled.title(1, &[]), "[1] Libtasn1");
        assert_eq!(
            titled.reference(&[8], &titled.headings),
            "Libtasn1, p. 8, §3.1 asn1Parser"
        );
        assert_eq!(titled.reference(&[8, 9], &[]), "Libtasn1, pp. 8, 9");
        assert_eq!(titled.caption(), "Libtasn1 · c1");
        let bare = Evidence::listed("analysis", "c9", None);
        assert_eq!(bare.source_or_unknown(), "?");
        assert_eq!(bare.reference(&[], &[]), "");
        assert_eq!(
            Evidence::listed("rag", "c9", Some("Manual".into())).source_or_unknown(),
            "Manual"
        );
    }
}
