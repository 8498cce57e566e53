//! Markdown → items, following docling's `MarkdownDocumentBackend`:
//!
//! * every `#` heading becomes a `title` (docling calls `add_title` for each
//!   level-1 heading), `##` a `section_header` with level 1, `###` level 2, …
//!   (`level - 1`);
//! * the tree is flat: docling's Markdown backend does not nest content under
//!   headings, so body blocks have `tree_depth` 1, list items 2 (under their
//!   list group), nested list items 4, …;
//! * an image's title (`![alt](src "title")`) becomes its `caption` (docling).
//!   In addition (our extension, not docling), a paragraph right after a
//!   picture that is entirely italic or starts "Figure N:"/"Fig. N." becomes
//!   its caption. The picture's text is its caption text, else its alt text.
//! * inline formatting is dropped and a paragraph is one `text` item (docling
//!   splits formatted runs into an inline group of several items).

use std::path::Path;

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use crate::store::docling::label;

use super::{ItemBuilder, ParsedDocument, load_image, looks_like_figure_caption, normalize_ws};

enum Seg {
    Text(String),
    Image {
        src: String,
        title: String,
        alt: String,
    },
}

struct ListCtx {
    ordered: bool,
    next: u64,
    /// depth of the list group node
    depth: i64,
    group: usize,
}

struct ItemCtx {
    /// index of the emitted list item, if emitted already
    emitted: Option<usize>,
    buf: String,
    depth: i64,
    marker: String,
    group: usize,
}

pub fn parse_markdown(src: &str, base: Option<&Path>) -> ParsedDocument {
    let mut opts = Options::empty();
    opts.insert(Options::ENABLE_TABLES);
    opts.insert(Options::ENABLE_STRIKETHROUGH);
    let parser = Parser::new_ext(src, opts);

    let mut b = ItemBuilder::default();
    let mut title: Option<String> = None;

    // inline collection
    let mut segs: Vec<Seg> = Vec::new();
    let mut cur = String::new();
    let mut in_image: Option<(String, String, String)> = None;
    // italic tracking for caption detection
    let mut emph_depth = 0usize;
    let mut non_emph_text = false;

    let mut heading: Option<HeadingLevel> = None;
    let mut code: Option<String> = None;
    let mut lists: Vec<ListCtx> = Vec::new();
    let mut items: Vec<ItemCtx> = Vec::new();
    let mut table: Option<(Vec<Vec<String>>, Vec<String>)> = None;
    // index of the last picture if the previous block ended with pictures
    let mut caption_target: Option<usize> = None;

    let flush_item = |b: &mut ItemBuilder, it: &mut ItemCtx| {
        let text = normalize_ws(&it.buf);
        it.buf.clear();
        match it.emitted {
            Some(idx) => {
                if !text.is_empty() {
                    let t = &mut b.items[idx].text;
                    if !t.is_empty() {
                        t.push(' ');
                    }
                    t.push_str(&text);
                }
            }
            None => {
                let item = b.push(label::LIST_ITEM, text, it.depth);
                item.marker = it.marker.clone();
                item.list_group = Some(it.group);
                it.emitted = Some(b.items.len() - 1);
            }
        }
    };

    for ev in parser {
        match ev {
            Event::Start(Tag::Heading { level, .. }) => {
                heading = Some(level);
                cur.clear();
            }
            Event::End(TagEnd::Heading(_)) => {
                let text = normalize_ws(&take_text(&mut segs, &mut cur));
                let level = heading.take().map(|l| l as i64).unwrap_or(1);
                if !text.is_empty() {
                    if level == 1 {
                        if title.is_none() {
                            title = Some(text.clone());
                        }
                        b.push(label::TITLE, text, 1);
                    } else {
                        b.push(label::SECTION_HEADER, text, 1).heading_level = level - 1;
                    }
                }
                caption_target = None;
            }
            Event::Start(Tag::Paragraph) => {
                segs.clear();
                cur.clear();
                emph_depth = 0;
                non_emph_text = false;
            }
            Event::End(TagEnd::Paragraph) => {
                if let Some(it) = items.last_mut() {
                    // paragraph inside a list item: its text belongs to the item
                    let t = take_text(&mut segs, &mut cur);
                    if !it.buf.is_empty() {
                        it.buf.push(' ');
                    }
                    it.buf.push_str(&t);
                    continue;
                }
                if !cur.is_empty() {
                    segs.push(Seg::Text(std::mem::take(&mut cur)));
                }
                let all_text: String = segs
                    .iter()
                    .filter_map(|s| match s {
                        Seg::Text(t) => Some(t.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join(" ");
                let all_text = normalize_ws(&all_text);
                let has_image = segs.iter().any(|s| matches!(s, Seg::Image { .. }));
                // caption for the previous picture?
                if let Some(pic) = caption_target.take() {
                    let italic = !non_emph_text && !all_text.is_empty();
                    let has_caption = !super::captions_of(&b.items, pic).is_empty();
                    if !has_image
                        && !has_caption
                        && (italic || looks_like_figure_caption(&all_text))
                    {
                        let depth = b.items[pic].tree_depth + 1;
                        b.items[pic].text = all_text.clone();
                        b.push(label::CAPTION, all_text, depth);
                        segs.clear();
                        continue;
                    }
                }
                let mut last_was_picture = false;
                for seg in segs.drain(..) {
                    match seg {
                        Seg::Text(t) => {
                            let t = normalize_ws(&t);
                            if !t.is_empty() {
                                b.push(label::TEXT, t, 1);
                                last_was_picture = false;
                            }
                        }
                        Seg::Image { src, title, alt } => {
                            let data = load_image(&src, base);
                            let title = normalize_ws(&title);
                            let alt = normalize_ws(&alt);
                            let text = if title.is_empty() { alt } else { title.clone() };
                            b.push(label::PICTURE, text, 1).picture_data = data;
                            if !title.is_empty() {
                                b.push(label::CAPTION, title, 2);
                            }
                            last_was_picture = true;
                        }
                    }
                }
                if last_was_picture {
                    caption_target = b.items.iter().rposition(|i| i.label == label::PICTURE);
                }
                continue;
            }
            Event::Start(Tag::Emphasis) => emph_depth += 1,
            Event::End(TagEnd::Emphasis) => emph_depth = emph_depth.saturating_sub(1),
            Event::Start(Tag::Image {
                dest_url, title, ..
            }) => {
                if !cur.is_empty() {
                    segs.push(Seg::Text(std::mem::take(&mut cur)));
                }
                in_image = Some((dest_url.to_string(), title.to_string(), String::new()));
            }
            Event::End(TagEnd::Image) => {
                if let Some((src, title, alt)) = in_image.take() {
                    segs.push(Seg::Image { src, title, alt });
                }
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(c) = code.as_mut() {
                    c.push_str(&t);
                } else if let Some(img) = in_image.as_mut() {
                    img.2.push_str(&t);
                } else if let Some(tb) = table.as_mut() {
                    if let Some(cell) = tb.1.last_mut() {
                        cell.push_str(&t);
                    }
                } else {
                    if emph_depth == 0 && !t.trim().is_empty() {
                        non_emph_text = true;
                    }
                    cur.push_str(&t);
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some(img) = in_image.as_mut() {
                    img.2.push(' ');
                } else if let Some(tb) = table.as_mut() {
                    if let Some(cell) = tb.1.last_mut() {
                        cell.push(' ');
                    }
                } else {
                    cur.push(' ');
                }
            }
            Event::Start(Tag::CodeBlock(kind)) => {
                let _ = matches!(kind, CodeBlockKind::Fenced(_));
                code = Some(String::new());
            }
            Event::End(TagEnd::CodeBlock) => {
                let c = code.take().unwrap_or_default();
                // docling: drop leading blank lines, keep first-line indent, rstrip
                let trimmed = c.trim_end();
                let mut lines: Vec<&str> = trimmed.lines().collect();
                while lines.first().is_some_and(|l| l.trim().is_empty()) {
                    lines.remove(0);
                }
                let text = lines.join("\n");
                if !text.is_empty() {
                    let depth = items.last().map(|i| i.depth + 1).unwrap_or(1);
                    b.push(label::CODE, text, depth);
                }
                caption_target = None;
            }
            Event::Start(Tag::List(start)) => {
                // a nested list: emit the enclosing item first (reading order)
                if let Some(it) = items.last_mut() {
                    let t = take_text(&mut segs, &mut cur);
                    it.buf.push_str(&t);
                    flush_item(&mut b, it);
                }
                let (depth, group) = match items.last() {
                    Some(it) => (it.depth + 1, it.group),
                    None => (1, b.new_list()),
                };
                lists.push(ListCtx {
                    ordered: start.is_some(),
                    next: start.unwrap_or(1),
                    depth,
                    group,
                });
                caption_target = None;
            }
            Event::End(TagEnd::List(_)) => {
                lists.pop();
            }
            Event::Start(Tag::Item) => {
                let l = lists.last_mut().expect("item inside list");
                let marker = if l.ordered {
                    l.next += 1;
                    format!("{}.", l.next - 1)
                } else {
                    String::new()
                };
                items.push(ItemCtx {
                    emitted: None,
                    buf: String::new(),
                    depth: l.depth + 1,
                    marker,
                    group: l.group,
                });
                cur.clear();
                segs.clear();
            }
            Event::End(TagEnd::Item) => {
                if let Some(mut it) = items.pop() {
                    let t = take_text(&mut segs, &mut cur);
                    if !t.trim().is_empty() {
                        if !it.buf.is_empty() {
                            it.buf.push(' ');
                        }
                        it.buf.push_str(&t);
                    }
                    if it.emitted.is_none() && normalize_ws(&it.buf).is_empty() {
                        continue; // docling skips empty list items
                    }
                    flush_item(&mut b, &mut it);
                }
            }
            Event::Start(Tag::Table(_)) => table = Some((Vec::new(), Vec::new())),
            Event::Start(Tag::TableHead) | Event::Start(Tag::TableRow) => {
                if let Some(tb) = table.as_mut() {
                    tb.1.clear();
                }
            }
            Event::Start(Tag::TableCell) => {
                if let Some(tb) = table.as_mut() {
                    tb.1.push(String::new());
                }
            }
            Event::End(TagEnd::TableHead) | Event::End(TagEnd::TableRow) => {
                if let Some(tb) = table.as_mut() {
                    let row = tb.1.drain(..).map(|c| normalize_ws(&c)).collect();
                    tb.0.push(row);
                }
            }
            Event::End(TagEnd::Table) => {
                if let Some((rows, _)) = table.take() {
                    let md = super::markdown_table(&rows);
                    if !md.is_empty() {
                        b.push(label::TABLE, md, 1);
                    }
                }
                caption_target = None;
            }
            _ => {}
        }
    }
    b.finish(title, Vec::new())
}

fn take_text(segs: &mut Vec<Seg>, cur: &mut String) -> String {
    let mut out = String::new();
    for s in segs.drain(..) {
        if let Seg::Text(t) = s {
            out.push_str(&t);
            out.push(' ');
        }
    }
    out.push_str(cur);
    cur.clear();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(doc: &ParsedDocument) -> Vec<(String, String, String, i64, i64)> {
        doc.items
            .iter()
            .map(|i| {
                (
                    i.self_ref.clone(),
                    i.label.clone(),
                    i.text.clone(),
                    i.heading_level,
                    i.tree_depth,
                )
            })
            .collect()
    }

    fn s(r: &str, l: &str, t: &str, h: i64, d: i64) -> (String, String, String, i64, i64) {
        (r.into(), l.into(), t.into(), h, d)
    }

    #[test]
    fn sample_markdown_items() {
        let path = crate::ingest::tests::fixture("sample.md");
        let doc = crate::ingest::parse_file(&path).unwrap();
        assert_eq!(doc.title.as_deref(), Some("Lighthouse Guide"));
        let md_table = "| Name   |   Height |   Year |\n|--------|----------|--------|\n| Alpha  |       31 |   1890 |\n| Beta   |       45 |   1902 |";
        assert_eq!(
            summary(&doc),
            vec![
                s("#/texts/0", "title", "Lighthouse Guide", 0, 1),
                s(
                    "#/texts/1",
                    "text",
                    "Lighthouses guide ships at night.",
                    0,
                    1
                ),
                s("#/texts/2", "section_header", "History", 1, 1),
                s(
                    "#/texts/3",
                    "text",
                    "The first towers were fires on hills.",
                    0,
                    1
                ),
                s("#/texts/4", "section_header", "Modern towers", 2, 1),
                s("#/texts/5", "list_item", "Electric lamps", 0, 2),
                s("#/texts/6", "list_item", "Fresnel lenses", 0, 2),
                s("#/texts/7", "list_item", "Glass prisms", 0, 4),
                s("#/texts/8", "list_item", "Automation", 0, 2),
                s("#/texts/9", "code", "beam = lamp * lens\nprint(beam)", 0, 1),
                s("#/texts/10", "section_header", "Data", 1, 1),
                s("#/tables/0", "table", md_table, 0, 1),
                s("#/pictures/0", "picture", "Figure 1: A red square.", 0, 1),
                s("#/texts/11", "caption", "Figure 1: A red square.", 0, 2),
                s("#/texts/12", "list_item", "Check the lamp", 0, 2),
                s("#/texts/13", "list_item", "Log the hours", 0, 2),
                s("#/pictures/1", "picture", "missing image", 0, 1),
            ]
        );
        let pic = &doc.items[12];
        let data = pic.picture_data.as_ref().expect("picture bytes loaded");
        assert_eq!(image::load_from_memory(data).unwrap().width(), 96);
        assert!(doc.items[16].picture_data.is_none());
        assert_eq!(doc.items[12].marker, "");
        assert_eq!(doc.items[14].marker, "1.");
        assert_eq!(doc.items[15].marker, "2.");
        assert_ne!(doc.items[14].list_group, doc.items[5].list_group);
        assert_eq!(doc.items[7].list_group, doc.items[5].list_group);
        assert!(
            doc.content.starts_with(
                "# Lighthouse Guide\n\nLighthouses guide ships at night.\n\n## History"
            )
        );
        assert!(
            doc.content
                .contains("- Fresnel lenses\n    - Glass prisms\n- Automation")
        );
        assert!(
            doc.content
                .contains("Figure 1: A red square.\n\n<!-- image -->")
        );
    }

    #[test]
    fn every_h1_is_a_title_and_image_title_is_caption() {
        let doc = parse_markdown(
            "# One\n\ntext\n\n# Two\n\n![alt text](nope.png \"The caption\")\n\n*not a caption: no picture before*\n",
            None,
        );
        let labels: Vec<&str> = doc.items.iter().map(|i| i.label.as_str()).collect();
        assert_eq!(
            labels,
            ["title", "text", "title", "picture", "caption", "text"]
        );
        assert_eq!(doc.items[3].text, "The caption");
        assert_eq!(doc.items[4].text, "The caption");
        assert_eq!(doc.items[5].text, "not a caption: no picture before");
        assert_eq!(doc.title.as_deref(), Some("One"));
    }

    #[test]
    fn italic_paragraph_after_picture_is_caption() {
        let doc = parse_markdown("![a](x.png)\n\n_A small_ *drawing*\n\nplain\n", None);
        let got: Vec<(&str, &str)> = doc
            .items
            .iter()
            .map(|i| (i.label.as_str(), i.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("picture", "A small drawing"),
                ("caption", "A small drawing"),
                ("text", "plain")
            ]
        );
    }
}
