//! Chunking as haiku.rag 0.77 does it with `processing.chunker_type:
//! hierarchical` (`DoclingLocalChunker` → docling-core `HierarchicalChunker`
//! with haiku's serializer provider), plus haiku's synthetic picture chunks.
//!
//! Rules (from docling-core `hierarchical_chunker.py` and the Markdown
//! serializer it uses, `ChunkingDocSerializer`):
//! * headings are not chunks; they maintain `heading_by_level`: a `title` is
//!   level 0, a `section_header` its `level`; a new heading drops every
//!   heading at its level or deeper. `metadata.headings` is that stack in
//!   level order — **the title included** — or `null` when empty.
//! * one chunk per top-level item: a whole list (nested lists included) is
//!   one chunk, serialised as `- item` / `1. item` lines with nested lists
//!   indented by 4 spaces; text is its own chunk; code is a fenced block
//!   (without language); tables use docling's `TripletTableSerializer`
//!   (`Alpha, Height = 31. Alpha, Year = 1890`) because haiku's
//!   `processing.chunking_use_markdown_tables` defaults to `false`
//!   ([`ChunkOptions::markdown_tables`] switches to the Markdown table).
//! * a picture serialises to its caption texts only (image placeholder is
//!   `""`), so a captioned picture yields a chunk whose `doc_item_refs` are
//!   the caption items (labels `["caption"]`), an uncaptioned one yields
//!   nothing; owned captions never form their own chunk. Table captions
//!   precede the table text (`caption\n\ntriplets`).
//! * items with empty text produce no chunk.
//! * no merging of small chunks: haiku only merges peers for the `hybrid`
//!   chunker (`chunking_merge_peers`); `HierarchicalChunker` has no size
//!   option, so neither do we.
//!
//! Synthetic picture chunks (haiku `build_picture_chunks`, emitted by haiku
//! only when the embedder accepts images; here on by default, see
//! [`ChunkOptions::picture_chunks`]): one per picture with bytes, skipping
//! byte-identical repeats and pictures whose smaller side is below
//! `min_picture_size` (undecodable sizes are kept); content = the picture's
//! text, metadata `{"doc_item_refs":[ref],"labels":["picture"],
//! "page_numbers":[..],"headings":null}` (haiku's key order). Text and picture
//! chunks are then stably sorted by the position of their first ref and
//! `order` is the index.
//!
//! `content_fts` = headings joined by `"\n"`, then `"\n"`, then content; just
//! content without headings (haiku `ChunkRepository._contextualize_content`).
//! Text-chunk metadata keys follow haiku's `ChunkMetadata.model_dump()`
//! order: `doc_item_refs`, `headings`, `labels`, `page_numbers` (sorted,
//! distinct).

use std::collections::{BTreeMap, HashSet};

use serde_json::json;

use crate::store::docling::label;

use super::{
    ChunkDraft, ParsedDocument, ParsedItem, caption_owner, captions_of, list_markdown, table_rows,
};

/// Chunking options (haiku.rag `processing.*` equivalents).
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkOptions {
    /// Emit synthetic picture chunks (haiku does when the embedder is
    /// multimodal).
    pub picture_chunks: bool,
    /// `processing.min_picture_size` (default 64): pictures whose smaller
    /// side is below this get no picture chunk; 0 keeps all.
    pub min_picture_size: u32,
    /// `processing.chunking_use_markdown_tables` (default false → triplets).
    pub markdown_tables: bool,
    /// Longest chunk content, in characters (Groundwork's own limit; docling's
    /// hierarchical chunker has none). A longer item — a 50 MB paragraph — is split at
    /// paragraph, line, sentence or word boundaries into chunks of at most this size,
    /// each keeping the item's refs and headings.
    pub max_chunk_chars: usize,
    /// Size the chunks for the embedder as haiku.rag's `hybrid` chunker does
    /// ([`super::hybrid`]); `None`: one chunk per item, as `hierarchical`.
    pub hybrid: Option<super::hybrid::Hybrid>,
}

/// Default [`ChunkOptions::max_chunk_chars`]: far above any paragraph of prose, so
/// ordinary documents chunk exactly as haiku.rag chunks them.
pub const MAX_CHUNK_CHARS: usize = 16_000;

impl Default for ChunkOptions {
    fn default() -> Self {
        ChunkOptions {
            picture_chunks: true,
            min_picture_size: 64,
            markdown_tables: false,
            max_chunk_chars: MAX_CHUNK_CHARS,
            hybrid: None,
        }
    }
}

use super::hybrid::Raw;

/// `text` in pieces of at most `max` characters, cut after the last paragraph break,
/// else line break, else sentence end, else space inside each window (a window with none
/// is cut at `max`). Whitespace at the cuts is dropped; `text` itself when it fits.
pub fn split_long(text: &str, max: usize) -> Vec<&str> {
    // `nth(max)` looks at most `max` characters ahead, so a 50 MB paragraph costs one
    // pass, not one count of the rest per piece.
    if max == 0 || text.char_indices().nth(max).is_none() {
        return vec![text];
    }
    let mut out = Vec::new();
    let mut rest = text;
    // Byte offset of the first character past the limit: a piece ends at or before it.
    while let Some((limit, _)) = rest.char_indices().nth(max) {
        let (end, next) = ["\n\n", "\n", ". ", " "]
            .iter()
            .find_map(|sep| {
                // A separator may start right at the limit (the piece before it fits).
                let mut reach = (limit + sep.len()).min(rest.len());
                while !rest.is_char_boundary(reach) {
                    reach -= 1;
                }
                let search = &rest[..reach];
                search.rfind(sep).filter(|&i| i > 0 && i <= limit).map(|i| {
                    // A sentence keeps its full stop.
                    let keep = if *sep == ". " { 1 } else { 0 };
                    (i + keep, i + sep.len())
                })
            })
            .unwrap_or((limit, limit));
        let piece = rest[..end].trim_end();
        if !piece.is_empty() {
            out.push(piece);
        }
        rest = rest[next..].trim_start();
    }
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// Chunk a parsed document (see the module docs for the rules).
pub fn chunk(doc: &ParsedDocument, opts: &ChunkOptions) -> Vec<ChunkDraft> {
    let items = &doc.items;
    let mut heading_by_level: BTreeMap<i64, String> = BTreeMap::new();
    let mut raws: Vec<Raw> = Vec::new();
    let mut i = 0;
    while i < items.len() {
        let it = &items[i];
        let mut next = i + 1;
        let produced: Option<(String, Vec<usize>)> = match it.label.as_str() {
            label::TITLE | label::SECTION_HEADER => {
                let level = if it.label == label::TITLE {
                    0
                } else {
                    it.heading_level
                };
                heading_by_level.retain(|k, _| *k < level);
                heading_by_level.insert(level, it.text.clone());
                None
            }
            label::LIST_ITEM => {
                while next < items.len()
                    && items[next].label == label::LIST_ITEM
                    && items[next].list_group == it.list_group
                {
                    next += 1;
                }
                let run: Vec<&ParsedItem> = items[i..next]
                    .iter()
                    .filter(|x| !x.text.is_empty())
                    .collect();
                let owned: Vec<ParsedItem> = run.iter().map(|x| (*x).clone()).collect();
                let refs = (i..next).filter(|&k| !items[k].text.is_empty()).collect();
                Some((list_markdown(&owned), refs))
            }
            label::CAPTION if caption_owner(items, i).is_some() => None,
            label::PICTURE => {
                let caps = captions_of(items, i);
                let caps: Vec<usize> = caps
                    .into_iter()
                    .filter(|&c| !items[c].text.is_empty())
                    .collect();
                let text = caps
                    .iter()
                    .map(|&c| items[c].text.as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                Some((text, caps))
            }
            label::TABLE => {
                let caps: Vec<usize> = captions_of(items, i)
                    .into_iter()
                    .filter(|&c| !items[c].text.is_empty())
                    .collect();
                let cap_text = caps
                    .iter()
                    .map(|&c| items[c].text.as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                let table_text = if opts.markdown_tables {
                    super::table_markdown_only(&it.text)
                } else {
                    triplets(&table_rows(&it.text))
                };
                let mut parts = Vec::new();
                let mut refs = Vec::new();
                if !cap_text.is_empty() {
                    parts.push(cap_text);
                    refs.extend(caps);
                }
                if !table_text.is_empty() {
                    parts.push(table_text);
                    refs.push(i);
                }
                Some((parts.join("\n\n"), refs))
            }
            label::CODE => Some((code_block(&it.text), vec![i])),
            // A table of contents or an index points at passages; it is not one.
            label::DOCUMENT_INDEX => None,
            _ => Some((it.text.clone(), vec![i])),
        };
        if let Some((content, refs)) = produced
            && !content.is_empty()
            && !refs.is_empty()
        {
            let headings: Vec<String> = heading_by_level.values().cloned().collect();
            let headings = if headings.is_empty() {
                None
            } else {
                Some(headings)
            };
            for piece in split_long(&content, opts.max_chunk_chars) {
                raws.push(Raw {
                    content: piece.to_string(),
                    refs: refs.clone(),
                    headings: headings.clone(),
                    picture: false,
                });
            }
        }
        i = next;
    }

    if let Some(h) = &opts.hybrid {
        raws = h.refine(raws, items);
    }

    if opts.picture_chunks {
        let mut seen: HashSet<&[u8]> = HashSet::new();
        let mut any = false;
        for (k, it) in items.iter().enumerate() {
            if it.label != label::PICTURE {
                continue;
            }
            let Some(data) = it.picture_data.as_deref() else {
                continue;
            };
            if !seen.insert(data) {
                continue;
            }
            if opts.min_picture_size > 0
                && let Ok(dim) = image::ImageReader::new(std::io::Cursor::new(data))
                    .with_guessed_format()
                    .map_err(|_| ())
                    .and_then(|r| r.into_dimensions().map_err(|_| ()))
                && dim.0.min(dim.1) < opts.min_picture_size
            {
                continue;
            }
            any = true;
            raws.push(Raw {
                content: it.text.clone(),
                refs: vec![k],
                headings: None,
                picture: true,
            });
        }
        if any {
            // stable sort by the position of the first ref
            raws.sort_by_key(|r| r.refs[0]);
        }
    }

    raws.into_iter()
        .enumerate()
        .map(|(order, r)| {
            let refs: Vec<&str> = r.refs.iter().map(|&k| items[k].self_ref.as_str()).collect();
            let labels: Vec<&str> = r.refs.iter().map(|&k| items[k].label.as_str()).collect();
            let mut pages: Vec<i64> = r.refs.iter().flat_map(|&k| items[k].page_numbers.iter().copied()).collect();
            pages.sort_unstable();
            pages.dedup();
            let metadata = if r.picture {
                json!({"doc_item_refs": refs, "labels": labels, "page_numbers": pages, "headings": null})
            } else {
                json!({"doc_item_refs": refs, "headings": r.headings, "labels": labels, "page_numbers": pages})
            };
            let content_fts = match &r.headings {
                Some(h) if !h.is_empty() => format!("{}\n{}", h.join("\n"), r.content),
                _ => r.content.clone(),
            };
            ChunkDraft {
                content: r.content,
                content_fts,
                order: order as i64,
                metadata,
            }
        })
        .collect()
}

/// docling's `_code_block`: a fence longer than any backtick run inside.
fn code_block(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat((longest + 1).max(3));
    format!("{fence}\n{text}\n{fence}")
}

/// docling-core `TripletTableSerializer` for a table whose first row is the
/// column header.
pub(crate) fn triplets(rows: &[Vec<String>]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let header = &rows[0];
    let body = &rows[1..];
    let ncols = header.len();
    if body.is_empty() {
        return header
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(". ");
    }
    if ncols == 0 {
        return String::new();
    }
    let cell =
        |r: &Vec<String>, c: usize| r.get(c).map(|s| s.trim().to_string()).unwrap_or_default();
    let text = if ncols == 1 {
        let col_name = cell(&body[0], 0);
        let values: Vec<String> = body[1..].iter().map(|r| cell(r, 0)).collect();
        if values.is_empty() {
            col_name
        } else {
            values
                .iter()
                .map(|v| format!("{col_name} = {v}"))
                .collect::<Vec<_>>()
                .join(". ")
        }
    } else {
        let mut parts = Vec::new();
        for r in body {
            for (c, col) in header.iter().enumerate().skip(1) {
                parts.push(format!("{}, {} = {}", cell(r, 0), col.trim(), cell(r, c)));
            }
        }
        parts.join(". ")
    };
    if text.is_empty() {
        // _flatten_table_text
        body.iter()
            .flat_map(|r| r.iter())
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(". ")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::{parse_file, tests::fixture};
    use serde_json::Value;

    fn view(chunks: &[ChunkDraft]) -> Vec<(i64, String, String, Value)> {
        chunks
            .iter()
            .map(|c| {
                (
                    c.order,
                    c.content.clone(),
                    c.content_fts.clone(),
                    c.metadata.clone(),
                )
            })
            .collect()
    }

    fn expected_sample() -> Vec<(i64, String, String, Value)> {
        let t = "Lighthouse Guide";
        vec![
            (
                0,
                "Lighthouses guide ships at night.".into(),
                format!("{t}\nLighthouses guide ships at night."),
                json!({"doc_item_refs":["#/texts/1"],"headings":[t],"labels":["text"],"page_numbers":[]}),
            ),
            (
                1,
                "The first towers were fires on hills.".into(),
                format!("{t}\nHistory\nThe first towers were fires on hills."),
                json!({"doc_item_refs":["#/texts/3"],"headings":[t,"History"],"labels":["text"],"page_numbers":[]}),
            ),
            (
                2,
                "- Electric lamps\n- Fresnel lenses\n    - Glass prisms\n- Automation".into(),
                format!(
                    "{t}\nHistory\nModern towers\n- Electric lamps\n- Fresnel lenses\n    - Glass prisms\n- Automation"
                ),
                json!({"doc_item_refs":["#/texts/5","#/texts/6","#/texts/7","#/texts/8"],"headings":[t,"History","Modern towers"],"labels":["list_item","list_item","list_item","list_item"],"page_numbers":[]}),
            ),
            (
                3,
                "```\nbeam = lamp * lens\nprint(beam)\n```".into(),
                format!("{t}\nHistory\nModern towers\n```\nbeam = lamp * lens\nprint(beam)\n```"),
                json!({"doc_item_refs":["#/texts/9"],"headings":[t,"History","Modern towers"],"labels":["code"],"page_numbers":[]}),
            ),
            (
                4,
                "Alpha, Height = 31. Alpha, Year = 1890. Beta, Height = 45. Beta, Year = 1902"
                    .into(),
                format!(
                    "{t}\nData\nAlpha, Height = 31. Alpha, Year = 1890. Beta, Height = 45. Beta, Year = 1902"
                ),
                json!({"doc_item_refs":["#/tables/0"],"headings":[t,"Data"],"labels":["table"],"page_numbers":[]}),
            ),
            (
                5,
                "Figure 1: A red square.".into(),
                "Figure 1: A red square.".into(),
                json!({"doc_item_refs":["#/pictures/0"],"labels":["picture"],"page_numbers":[],"headings":null}),
            ),
            (
                6,
                "Figure 1: A red square.".into(),
                format!("{t}\nData\nFigure 1: A red square."),
                json!({"doc_item_refs":["#/texts/11"],"headings":[t,"Data"],"labels":["caption"],"page_numbers":[]}),
            ),
            (
                7,
                "1. Check the lamp\n2. Log the hours".into(),
                format!("{t}\nData\n1. Check the lamp\n2. Log the hours"),
                json!({"doc_item_refs":["#/texts/12","#/texts/13"],"headings":[t,"Data"],"labels":["list_item","list_item"],"page_numbers":[]}),
            ),
        ]
    }

    #[test]
    fn markdown_chunks_exact() {
        let doc = parse_file(&fixture("sample.md")).unwrap();
        let chunks = chunk(&doc, &ChunkOptions::default());
        assert_eq!(view(&chunks), expected_sample());
        // metadata key order is haiku's
        let keys: Vec<&String> = chunks[0].metadata.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["doc_item_refs", "headings", "labels", "page_numbers"]
        );
        let keys: Vec<&String> = chunks[5].metadata.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["doc_item_refs", "labels", "page_numbers", "headings"]
        );
    }

    #[test]
    fn html_chunks_match_markdown() {
        // same content, same chunks; the HTML data: URI picture is a
        // byte-identical copy of red.png, so it is deduplicated
        let doc = parse_file(&fixture("sample.html")).unwrap();
        let chunks = chunk(&doc, &ChunkOptions::default());
        assert_eq!(view(&chunks), expected_sample());
    }

    #[test]
    fn a_huge_paragraph_is_split_below_the_limit() {
        let sentence = "The battery stores energy for the night. ";
        let para = sentence.repeat(2_000); // 82,000 characters, one paragraph
        let md = format!("# Power\n\n{para}\n\nShort closing line.\n");
        let doc = crate::ingest::markdown::parse_markdown(&md, None);
        let chunks = chunk(&doc, &ChunkOptions::default());
        let long: Vec<_> = chunks
            .iter()
            .filter(|c| c.content.starts_with("The battery"))
            .collect();
        assert!(long.len() >= 6, "{} pieces", long.len());
        for c in &chunks {
            assert!(
                c.content.chars().count() <= MAX_CHUNK_CHARS,
                "{}",
                c.content.len()
            );
            assert!(!c.content.starts_with(' ') && !c.content.ends_with(' '));
        }
        // Cut at sentence ends, nothing lost, headings kept, order consecutive.
        assert!(long.iter().all(|c| c.content.ends_with('.')));
        let joined: String = long
            .iter()
            .map(|c| c.content.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(joined, para.trim_end());
        assert!(
            long.iter()
                .all(|c| c.metadata["headings"] == json!(["Power"]))
        );
        assert_eq!(
            chunks.iter().map(|c| c.order).collect::<Vec<_>>(),
            (0..chunks.len() as i64).collect::<Vec<_>>()
        );
        assert_eq!(chunks.last().unwrap().content, "Short closing line.");
    }

    #[test]
    fn split_long_cuts_at_the_best_boundary() {
        assert_eq!(split_long("abc", 10), vec!["abc"]);
        assert_eq!(split_long("aaaa bbbb cccc", 9), vec!["aaaa bbbb", "cccc"]);
        assert_eq!(split_long("aaaa\n\nbb cc", 9), vec!["aaaa", "bb cc"]);
        // No boundary at all: a hard cut, on a character boundary.
        assert_eq!(split_long("ééééé", 2), vec!["éé", "éé", "é"]);
    }

    #[test]
    fn picture_chunk_options() {
        let doc = parse_file(&fixture("sample.md")).unwrap();
        let no_pics = chunk(
            &doc,
            &ChunkOptions {
                picture_chunks: false,
                ..Default::default()
            },
        );
        assert_eq!(no_pics.len(), 7);
        assert!(no_pics.iter().all(|c| c.metadata["labels"][0] != "picture"));
        assert_eq!(
            no_pics.iter().map(|c| c.order).collect::<Vec<_>>(),
            (0..7).collect::<Vec<_>>()
        );
        // red.png is 96x72: too small for min_picture_size 73
        let big = chunk(
            &doc,
            &ChunkOptions {
                min_picture_size: 73,
                ..Default::default()
            },
        );
        assert_eq!(big.len(), 7);
        let md = chunk(
            &doc,
            &ChunkOptions {
                markdown_tables: true,
                ..Default::default()
            },
        );
        assert!(md[4].content.starts_with("| Name   |"));
    }

    #[test]
    fn title_replaced_and_levels_popped() {
        let doc = crate::ingest::markdown::parse_markdown(
            "intro\n\n# A\n\n### deep\n\nx\n\n## mid\n\ny\n\n# B\n\nz\n",
            None,
        );
        let chunks = chunk(&doc, &ChunkOptions::default());
        let h: Vec<Value> = chunks
            .iter()
            .map(|c| c.metadata["headings"].clone())
            .collect();
        assert_eq!(
            h,
            [
                json!(null),
                json!(["A", "deep"]),
                json!(["A", "mid"]),
                json!(["B"])
            ]
        );
        assert_eq!(chunks[0].content_fts, "intro");
    }

    #[test]
    fn triplet_shapes() {
        let s = |v: &[&[&str]]| -> Vec<Vec<String>> {
            v.iter()
                .map(|r| r.iter().map(|c| c.to_string()).collect())
                .collect()
        };
        assert_eq!(triplets(&s(&[&["H1", "H2"]])), "H1. H2");
        assert_eq!(
            triplets(&s(&[&["Col"], &["a"], &["b"], &["c"]])),
            "a = b. a = c"
        );
        assert_eq!(triplets(&s(&[&["Col"], &["a"]])), "a");
        assert_eq!(triplets(&s(&[&["", ""], &["", "x"]])), ",  = x");
    }
}
