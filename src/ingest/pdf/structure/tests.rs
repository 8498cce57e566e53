//! Tests of the structure rules over hand-built pages (lines with fonts and boxes).

use super::*;
use crate::ingest::pdf::layout::Line;

fn line(text: &str, t: f64, l: f64, size: f64, bold: bool) -> Line {
    Line {
        text: text.into(),
        rect: Rect {
            l,
            t,
            r: l + text.len() as f64 * size * 0.5,
            b: t + size,
        },
        size,
        bold,
    }
}

fn block(lines: Vec<Line>, flow: usize) -> Block {
    Block { lines, flow }
}

fn page(no: i64, blocks: Vec<Block>) -> Page {
    Page {
        page_no: no,
        width: 612.0,
        height: 792.0,
        blocks,
        images: vec![],
    }
}

#[test]
fn page_numbers_and_section_numbers() {
    for t in ["7", "vii", "xiv", "- 7 -", "Page 7", "7 / 36"] {
        assert!(is_page_number(t), "{t}");
    }
    for t in ["7 apples", "Chapter 3: Utilities", "vivid", "dim", "civic"] {
        assert!(!is_page_number(t), "{t}");
    }
    assert_eq!(section_number_depth("4 Function reference"), Some(1));
    assert_eq!(section_number_depth("4.1 ASN.1 schema functions"), Some(2));
    assert_eq!(section_number_depth("4.1.2. Details"), Some(3));
    assert_eq!(section_number_depth("A.2 Appendix part"), Some(2));
    assert_eq!(section_number_depth("asn1 parser2tree"), None);
    assert_eq!(section_number_depth("42 is the answer"), Some(1));
    assert_eq!(section_number_depth("3.5 kg of flour"), Some(2));
}

#[test]
fn headers_numbers_headings_and_levels() {
    let body = |t: f64, text: &str| block(vec![line(text, t, 72.0, 11.0, false)], 0);
    let mut pages = Vec::new();
    for no in 1..=4 {
        let mut blocks = vec![
            block(
                vec![line(
                    &format!("Chapter {no}: Field notes"),
                    40.0,
                    72.0,
                    9.0,
                    false,
                )],
                0,
            ),
            block(vec![line(&no.to_string(), 40.0, 520.0, 9.0, false)], 1),
        ];
        if no == 1 {
            blocks.push(block(vec![line("The Manual", 90.0, 72.0, 24.0, true)], 2));
        }
        blocks.push(block(
            vec![line(
                &format!("{no} Chapter title"),
                130.0,
                72.0,
                17.0,
                true,
            )],
            2,
        ));
        blocks.push(block(
            vec![line(&format!("{no}.1 A section"), 160.0, 72.0, 14.0, true)],
            2,
        ));
        for k in 0..6 {
            blocks.push(body(
                190.0 + 14.0 * k as f64,
                "An ordinary sentence of the body text that goes on.",
            ));
        }
        blocks.push(block(
            vec![line(&format!("{}", no + 10), 760.0, 300.0, 9.0, false)],
            3,
        ));
        pages.push(page(no, blocks));
    }
    let out = structure(&pages);
    let all: Vec<&Element> = out.iter().flatten().collect();
    assert_eq!(
        all[0],
        &Element::Title {
            text: "The Manual".into(),
            rect: pages[0].blocks[2].rect()
        }
    );
    let headings: Vec<(String, i64)> = all
        .iter()
        .filter_map(|e| match e {
            Element::Heading { text, level, .. } => Some((text.clone(), *level)),
            _ => None,
        })
        .collect();
    assert_eq!(headings[0], ("1 Chapter title".to_string(), 1));
    assert_eq!(headings[1], ("1.1 A section".to_string(), 2));
    assert_eq!(headings.len(), 8);
    // No running header, no page number anywhere.
    for e in &all {
        if let Element::Text { text, .. } = e {
            assert!(!text.contains("Chapter"), "{text}");
            assert!(!is_page_number(text), "{text}");
        }
    }
}

#[test]
fn a_glued_heading_is_split_off() {
    let b = block(
        vec![
            line("3.3 Invoking asn1Decoding", 98.0, 90.0, 14.0, true),
            line(
                "asn1Decoding generates an ASN.1 structure from a file",
                120.0,
                90.0,
                11.0,
                false,
            ),
            line(
                "with ASN.1 definitions and a binary file.",
                133.0,
                90.0,
                11.0,
                false,
            ),
        ],
        0,
    );
    let parts = split_by_style(&b);
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0].text(), "3.3 Invoking asn1Decoding");
}

#[test]
fn option_columns_are_one_table_but_prose_columns_are_not() {
    let col = |flow: usize, l: f64, texts: &[&str]| {
        block(
            texts
                .iter()
                .enumerate()
                .map(|(i, t)| line(t, 200.0 + 13.0 * i as f64, l, 9.0, false))
                .collect(),
            flow,
        )
    };
    let blocks = vec![
        col(0, 101.0, &["-b, --benchmark", "-s, --strict"]),
        col(
            1,
            227.0,
            &["perform a benchmark on decoding", "use strict DER decoding"],
        ),
    ];
    let (rows, _, next) = table_at(&blocks, 0, &HashSet::new(), 0).unwrap();
    assert_eq!(next, 2);
    assert_eq!(
        rows,
        vec![
            vec![
                "-b, --benchmark".to_string(),
                "perform a benchmark on decoding".into()
            ],
            vec!["-s, --strict".to_string(), "use strict DER decoding".into()],
        ]
    );
    let prose = vec![
        col(
            0,
            72.0,
            &[
                "The left column runs on with many words in it",
                "and its second line is as long as the first one",
            ],
        ),
        col(
            1,
            320.0,
            &[
                "The right column runs on with many words in it",
                "and its second line is as long as the first one",
            ],
        ),
    ];
    assert!(table_at(&prose, 0, &HashSet::new(), 0).is_none());
}
