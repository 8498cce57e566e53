//! A real PDF from a Debian package: libtasn1-doc's manual (`.ci/setup-tests` installs it),
//! 36 pages typeset by TeX with a running header ("Chapter 3: Utilities") and page
//! numbers at the top of every page. Its chapters and sections must come out as
//! headings, no chunk may hold the running header or a bare page number, and a known
//! sentence's box must lie where `pdftotext -bbox` puts its words.

use std::path::Path;
use std::process::Command;

use crate::support::hashembed;
use groundwork::ingest::{ChunkOptions, chunk, parse_file};

const MANUAL: &str = "/usr/share/doc/libtasn1-doc/libtasn1.pdf";

fn manual() -> &'static Path {
    let p = Path::new(MANUAL);
    assert!(
        p.is_file(),
        "{MANUAL} is missing: install the Debian package libtasn1-doc (.ci/setup-tests does)"
    );
    p
}

#[test]
fn chapters_and_sections_are_headings_with_levels() {
    let doc = parse_file(manual()).unwrap();
    let heads: Vec<(String, i64)> = doc
        .items
        .iter()
        .filter(|i| i.label == "section_header")
        .map(|i| (i.text.clone(), i.heading_level))
        .collect();
    for (text, level) in [
        ("1 Introduction", 1),
        ("2 ASN.1 structure handling", 1),
        ("2.1 ASN.1 syntax", 2),
        ("3 Utilities", 1),
        ("3.1 Invoking asn1Parser", 2),
        ("3.3 Invoking asn1Decoding", 2),
        ("4 Function reference", 1),
        ("4.1 ASN.1 schema functions", 2),
    ] {
        assert!(
            heads.iter().any(|(t, l)| t == text && *l == level),
            "{text} (level {level}) not among the headings: {heads:?}"
        );
    }
    // Function entries under 4.1 are one level deeper.
    assert!(
        heads.contains(&("asn1 parser2tree".to_string(), 3)),
        "{heads:?}"
    );
    // The table of contents lists chapters with dot leaders: those are no headings.
    assert!(heads.iter().all(|(t, _)| !t.contains(". . .")), "{heads:?}");
}

#[test]
fn no_chunk_holds_the_running_header_or_a_page_number() {
    let doc = parse_file(manual()).unwrap();
    let chunks = chunk(&doc, &ChunkOptions::default());
    assert!(chunks.len() > 100, "{} chunks", chunks.len());
    for c in &chunks {
        for header in [
            "Chapter 1: Introduction",
            "Chapter 3: Utilities",
            "Chapter 4: Function reference",
        ] {
            assert!(
                !c.content.contains(header),
                "running header in {:?}",
                c.content
            );
        }
    }
    // Page numbers sit in the top or bottom tenth of every page (792 pt high): no item
    // that is a bare number is left there. (A chapter number in the table of contents,
    // mid-page, is content.)
    for it in &doc.items {
        let t = it.text.trim();
        if !t.is_empty() && t.chars().all(|ch| ch.is_ascii_digit()) {
            let bx = it.boxes[0];
            assert!(
                bx.b > 79.2 && bx.t < 712.8,
                "page number {t:?} kept at {bx:?}"
            );
        }
    }
    // The asn1Coding chunk of section 3.2 is clean and carries its section path.
    let coding = chunks
        .iter()
        .find(|c| c.content.starts_with("asn1Coding generates a DER encoding"))
        .expect("the asn1Coding paragraph");
    assert_eq!(
        coding.metadata["headings"],
        serde_json::json!(["Libtasn1", "3 Utilities", "3.2 Invoking asn1Coding"])
    );
}

/// The table of contents (page 3) and the two index pages (35, 36) are `document_index`
/// tables of (entry, pages) rows, as docling labels tables of contents, and no chunk
/// holds them: before, "2.1 2.2 2.3 2.4 2.5", "4" and every dot-leader line were chunks
/// that crowded the search results.
#[test]
fn the_table_of_contents_and_the_index_are_document_index_and_not_chunked() {
    let doc = parse_file(manual()).unwrap();
    let index: Vec<&groundwork::ingest::ParsedItem> = doc
        .items
        .iter()
        .filter(|i| i.label == "document_index")
        .collect();
    let pages: Vec<i64> = index.iter().flat_map(|i| i.page_numbers.clone()).collect();
    assert_eq!(pages, [3, 35, 36], "{index:?}");
    assert!(index.iter().all(|i| i.self_ref.starts_with("#/tables/")));
    // The rows name each entry and its page.
    let rows = |text: &str| -> Vec<Vec<String>> {
        text.lines()
            .map(|l| {
                l.trim_matches('|')
                    .split('|')
                    .map(|c| c.trim().to_string())
                    .collect()
            })
            .collect()
    };
    let row = |a: &str, b: &str| vec![a.to_string(), b.to_string()];
    assert!(
        rows(&index[0].text).contains(&row("Invoking asn1Parser", "5")),
        "{}",
        index[0].text
    );
    assert!(
        rows(&index[2].text).contains(&row("asn1_array2tree", "9")),
        "{}",
        index[2].text
    );
    let chunks = chunk(&doc, &ChunkOptions::default());
    for c in &chunks {
        assert!(
            !c.content.contains(". . . ."),
            "an index line chunked: {:?}",
            c.content
        );
    }
    assert!(
        !chunks.iter().any(|c| c.content == "2.1 2.2 2.3 2.4 2.5"),
        "the table of contents' section numbers chunked"
    );
    // Chapter 1 still starts the document's chunks after the title page.
    assert!(chunks.iter().any(|c| {
        c.content
            .starts_with("This document describes the Libtasn1 library")
    }));
    // docling-core reads the document with its index tables (label document_index).
    let json = groundwork::ingest::docling_json(&doc, "libtasn1.pdf");
    let labels: Vec<&str> = json["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels.iter().filter(|l| **l == "document_index").count(),
        3,
        "{labels:?}"
    );
}

#[test]
fn a_known_sentence_is_boxed_where_poppler_puts_its_words() {
    let doc = parse_file(manual()).unwrap();
    let item = doc
        .items
        .iter()
        .find(|i| {
            i.text
                .starts_with("asn1Decoding generates an ASN.1 structure from a file")
        })
        .expect("the asn1Decoding paragraph");
    assert_eq!(item.page_numbers, [10]);
    let bx = item.boxes[0];
    assert_eq!(bx.page_no, 10);
    let out = Command::new("pdftotext")
        .args(["-bbox", "-f", "10", "-l", "10", MANUAL, "-"])
        .output()
        .unwrap();
    let words = String::from_utf8(out.stdout).unwrap();
    let line = words
        .lines()
        .find(|l| l.ends_with(">generates</word>"))
        .expect("pdftotext -bbox lists the word");
    let num = |k: &str| -> f64 {
        let at = line.find(&format!("{k}=\"")).unwrap() + k.len() + 2;
        line[at..].split('"').next().unwrap().parse().unwrap()
    };
    let eps = 0.01;
    assert!(
        bx.l <= num("xMin") + eps && num("xMax") <= bx.r + eps,
        "{bx:?} vs {line}"
    );
    assert!(
        bx.t <= num("yMin") + eps && num("yMax") <= bx.b + eps,
        "{bx:?} vs {line}"
    );
    // And the box is the paragraph's, not the page's: it starts at the text's left
    // margin and ends well above the page's bottom.
    assert!((bx.l - 90.0).abs() < 1.0, "{bx:?}");
    assert!(bx.b < 200.0, "{bx:?}");
}

/// `groundwork search` over the ingested manual names the section of a PDF hit.
#[tokio::test]
async fn search_output_names_the_section_of_a_pdf_hit() {
    let embed = hashembed::start().await;
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join("kb.lancedb");
    let run = |args: Vec<String>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_groundwork"));
        cmd.args(args)
            .env("HOME", home.path())
            .env("XDG_DATA_HOME", home.path().join("data"))
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .env("GROUNDWORK_DISCOVER", "off")
            .env_remove("HAIKU_RAG_DB")
            .env_remove("GROUNDWORK_CONFIG");
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
    };
    let base = |rest: &[&str]| {
        let mut v: Vec<String> = [
            "--db",
            db.to_str().unwrap(),
            "--embed-url",
            &embed.url,
            "--embed-model",
            hashembed::MODEL,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(rest.iter().map(|s| s.to_string()));
        v
    };
    let o = run(base(&["ingest", manual().to_str().unwrap()]))
        .await
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(base(&[
        "search",
        "asn1Decoding benchmark strict DER decoding",
        "--limit",
        "3",
    ]))
    .await
    .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains("3 Utilities > 3.3 Invoking asn1Decoding"),
        "no section named in:\n{out}"
    );
}
