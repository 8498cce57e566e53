//! HTML → items, following docling's `HTMLDocumentBackend` hierarchy:
//!
//! * `<h1>` → `title` (resets the hierarchy; later content is nested under
//!   it), `<hN>` (N ≥ 2) → `section_header` with level N-1, nested under the
//!   previous heading; skipped levels get an invisible section group (which
//!   counts for `tree_depth`, as in docling's `iterate_items()`);
//! * `<p>` and loose text → `text`; `<ul>/<ol>` → list group, `<li>` →
//!   `list_item` (nested lists under their item); `<pre>` → `code`;
//!   `<table>` → `table` (+ `<caption>` as its `caption`); `<img>` →
//!   `picture` (data: URIs or files relative to the HTML file);
//!   `<figure>`'s `<figcaption>` → the picture's `caption`.
//! * `<head>`, `<script>`, `<style>`, `<noscript>`, `<template>` are ignored.

use std::path::Path;

use scraper::{ElementRef, Html, Node};

use crate::store::docling::label;

use super::{ItemBuilder, ParsedDocument, load_image, normalize_ws};

struct Ctx<'a> {
    b: ItemBuilder,
    base: Option<&'a Path>,
    /// depth of the node at each hierarchy level (index = docling's
    /// `parents` key); level 0 = body.
    depths: Vec<Option<i64>>,
    level: usize,
    pending: String,
    title: Option<String>,
}

impl Ctx<'_> {
    fn content_depth(&self) -> i64 {
        self.depths.get(self.level).copied().flatten().unwrap_or(0) + 1
    }

    fn flush(&mut self, depth: i64) {
        let t = normalize_ws(&std::mem::take(&mut self.pending));
        if !t.is_empty() {
            self.b.push(label::TEXT, t, depth);
        }
    }

    fn set_depth(&mut self, level: usize, d: Option<i64>) {
        if self.depths.len() <= level {
            self.depths.resize(level + 1, None);
        }
        self.depths[level] = d;
    }
}

pub fn parse_html(src: &str, base: Option<&Path>) -> ParsedDocument {
    let html = Html::parse_document(src);
    let mut cx = Ctx {
        b: ItemBuilder::default(),
        base,
        depths: vec![Some(0)],
        level: 0,
        pending: String::new(),
        title: None,
    };
    let sel = scraper::Selector::parse("body").expect("static selector");
    let root = html
        .select(&sel)
        .next()
        .unwrap_or_else(|| html.root_element());
    walk(&mut cx, root);
    let d = cx.content_depth();
    cx.flush(d);
    let title = cx.title.clone().or_else(|| {
        let s = scraper::Selector::parse("head > title").expect("static selector");
        html.select(&s)
            .next()
            .map(|t| normalize_ws(&t.text().collect::<String>()))
            .filter(|t| !t.is_empty())
    });
    cx.b.finish(title, Vec::new())
}

fn walk(cx: &mut Ctx, el: ElementRef) {
    for child in el.children() {
        match child.value() {
            Node::Text(t) => cx.pending.push_str(t),
            Node::Element(_) => {
                let e = ElementRef::wrap(child).expect("element");
                element(cx, e);
            }
            _ => {}
        }
    }
}

fn text_of(e: ElementRef) -> String {
    normalize_ws(&e.text().collect::<String>())
}

/// Text of an element without the text of nested lists.
fn text_without_lists(e: ElementRef) -> String {
    let mut out = String::new();
    fn rec(e: ElementRef, out: &mut String) {
        for c in e.children() {
            match c.value() {
                Node::Text(t) => out.push_str(t),
                Node::Element(el) => {
                    if matches!(el.name(), "ul" | "ol" | "script" | "style") {
                        continue;
                    }
                    if let Some(ce) = ElementRef::wrap(c) {
                        rec(ce, out);
                    }
                }
                _ => {}
            }
        }
    }
    rec(e, &mut out);
    normalize_ws(&out)
}

fn picture(cx: &mut Ctx, img: ElementRef, depth: i64) -> usize {
    let src = img.value().attr("src").unwrap_or("");
    let alt = normalize_ws(img.value().attr("alt").unwrap_or(""));
    let data = load_image(src, cx.base);
    cx.b.push(label::PICTURE, alt, depth).picture_data = data;
    cx.b.items.len() - 1
}

fn element(cx: &mut Ctx, e: ElementRef) {
    let name = e.value().name();
    let inline = matches!(
        name,
        "a" | "b"
            | "strong"
            | "i"
            | "em"
            | "u"
            | "span"
            | "code"
            | "small"
            | "sub"
            | "sup"
            | "mark"
            | "abbr"
            | "s"
            | "q"
            | "cite"
            | "kbd"
            | "br"
    );
    if inline {
        if name == "br" {
            cx.pending.push(' ');
        } else if e
            .select(&scraper::Selector::parse("img").expect("sel"))
            .next()
            .is_some()
        {
            walk(cx, e);
        } else {
            cx.pending.push_str(&e.text().collect::<String>());
        }
        return;
    }
    let depth = cx.content_depth();
    match name {
        "head" | "script" | "style" | "noscript" | "template" => {}
        "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
            cx.flush(depth);
            let text = text_of(e);
            let n: usize = name[1..].parse().unwrap_or(1);
            if n == 1 {
                cx.depths = vec![Some(0)];
                cx.level = 0;
                cx.b.push(label::TITLE, text.clone(), 1);
                cx.set_depth(1, Some(1));
                if cx.title.is_none() && !text.is_empty() {
                    cx.title = Some(text);
                }
            } else {
                let l = n - 1;
                if l > cx.level {
                    for i in cx.level..l {
                        let d = cx.depths.get(i).copied().flatten().unwrap_or(0) + 1;
                        cx.set_depth(i + 1, Some(d));
                    }
                    cx.level = l;
                } else if l < cx.level {
                    cx.depths.truncate(l + 2);
                    cx.level = l;
                }
                let d = cx.depths.get(cx.level).copied().flatten().unwrap_or(0) + 1;
                cx.b.push(label::SECTION_HEADER, text, d).heading_level = l as i64;
                cx.set_depth(cx.level + 1, Some(d));
            }
            cx.level += 1;
            for img in e.select(&scraper::Selector::parse("img").expect("sel")) {
                picture(cx, img, cx.content_depth());
            }
        }
        "p" => {
            cx.flush(depth);
            walk(cx, e);
            cx.flush(depth);
        }
        "img" => {
            cx.flush(depth);
            picture(cx, e, depth);
        }
        "pre" => {
            cx.flush(depth);
            let raw: String = e.text().collect();
            let text = raw.trim_end().trim_start_matches(['\n', '\r']).to_string();
            if !text.is_empty() {
                cx.b.push(label::CODE, text, depth);
            }
        }
        "ul" | "ol" => {
            cx.flush(depth);
            let group = cx.b.new_list();
            list(cx, e, depth, group);
        }
        "table" => {
            cx.flush(depth);
            let mut rows = Vec::new();
            let tr = scraper::Selector::parse("tr").expect("sel");
            let cell = scraper::Selector::parse("th, td").expect("sel");
            for r in e.select(&tr) {
                let row: Vec<String> = r.select(&cell).map(text_of).collect();
                if !row.is_empty() {
                    rows.push(row);
                }
            }
            let md = super::markdown_table(&rows);
            if !md.is_empty() {
                cx.b.push(label::TABLE, md, depth);
                let cap = scraper::Selector::parse("caption").expect("sel");
                if let Some(c) = e.select(&cap).next() {
                    let t = text_of(c);
                    if !t.is_empty() {
                        cx.b.push(label::CAPTION, t, depth + 1);
                    }
                }
            }
        }
        "figure" => {
            cx.flush(depth);
            let img_sel = scraper::Selector::parse("img").expect("sel");
            let cap_sel = scraper::Selector::parse("figcaption").expect("sel");
            let caption = e
                .select(&cap_sel)
                .next()
                .map(text_of)
                .filter(|t| !t.is_empty());
            let mut first = true;
            for img in e.select(&img_sel) {
                let idx = picture(cx, img, depth);
                if first {
                    first = false;
                    if let Some(cap) = caption.clone() {
                        cx.b.items[idx].text = cap.clone();
                        cx.b.push(label::CAPTION, cap, depth + 1);
                    }
                }
            }
            if first {
                // a figure without an image: keep its caption as text
                if let Some(cap) = caption {
                    cx.b.push(label::TEXT, cap, depth);
                }
            }
        }
        _ => {
            // containers (div, section, article, main, body, blockquote, ...)
            walk(cx, e);
            if !matches!(name, "html") {
                cx.flush(depth);
            }
        }
    }
}

fn list(cx: &mut Ctx, e: ElementRef, group_depth: i64, group: usize) {
    let ordered = e.value().name() == "ol";
    let mut n: u64 = e
        .value()
        .attr("start")
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1);
    for c in e.children() {
        let Some(li) = ElementRef::wrap(c) else {
            continue;
        };
        if li.value().name() != "li" {
            continue;
        }
        let text = text_without_lists(li);
        let marker = if ordered {
            n += 1;
            format!("{}.", n - 1)
        } else {
            String::new()
        };
        let item = cx.b.push(label::LIST_ITEM, text, group_depth + 1);
        item.marker = marker;
        item.list_group = Some(group);
        for sub in li.children() {
            let Some(se) = ElementRef::wrap(sub) else {
                continue;
            };
            if matches!(se.value().name(), "ul" | "ol") {
                list(cx, se, group_depth + 2, group);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_html_items() {
        let path = crate::ingest::tests::fixture("sample.html");
        let doc = crate::ingest::parse_file(&path).unwrap();
        assert_eq!(doc.title.as_deref(), Some("Lighthouse Guide"));
        let got: Vec<(&str, &str, &str, i64, i64)> = doc
            .items
            .iter()
            .map(|i| {
                (
                    i.self_ref.as_str(),
                    i.label.as_str(),
                    i.text.as_str(),
                    i.heading_level,
                    i.tree_depth,
                )
            })
            .collect();
        let md_table = "| Name   |   Height |   Year |\n|--------|----------|--------|\n| Alpha  |       31 |   1890 |\n| Beta   |       45 |   1902 |";
        assert_eq!(
            got,
            vec![
                ("#/texts/0", "title", "Lighthouse Guide", 0, 1),
                (
                    "#/texts/1",
                    "text",
                    "Lighthouses guide ships at night.",
                    0,
                    2
                ),
                ("#/texts/2", "section_header", "History", 1, 2),
                (
                    "#/texts/3",
                    "text",
                    "The first towers were fires on hills.",
                    0,
                    3
                ),
                ("#/texts/4", "section_header", "Modern towers", 2, 3),
                ("#/texts/5", "list_item", "Electric lamps", 0, 5),
                ("#/texts/6", "list_item", "Fresnel lenses", 0, 5),
                ("#/texts/7", "list_item", "Glass prisms", 0, 7),
                ("#/texts/8", "list_item", "Automation", 0, 5),
                ("#/texts/9", "code", "beam = lamp * lens\nprint(beam)", 0, 4),
                ("#/texts/10", "section_header", "Data", 1, 2),
                ("#/tables/0", "table", md_table, 0, 3),
                ("#/pictures/0", "picture", "Figure 1: A red square.", 0, 3),
                ("#/texts/11", "caption", "Figure 1: A red square.", 0, 4),
                ("#/texts/12", "list_item", "Check the lamp", 0, 4),
                ("#/texts/13", "list_item", "Log the hours", 0, 4),
                ("#/pictures/1", "picture", "inline", 0, 3),
            ]
        );
        assert_eq!(
            doc.items[12].picture_data.as_deref(),
            Some(&std::fs::read(crate::ingest::tests::fixture("red.png")).unwrap()[..])
        );
        // data: URI image
        let inline = doc.items[16]
            .picture_data
            .as_ref()
            .expect("data uri decoded");
        assert!(image::load_from_memory(inline).is_ok());
        assert_eq!(doc.items[14].marker, "1.");
    }

    #[test]
    fn skipped_heading_levels_and_loose_text() {
        let doc = parse_html(
            "<html><head><title>T</title><style>x{}</style></head><body><div>loose <b>bold</b> text</div><h3>Deep</h3><p>para</p></body></html>",
            None,
        );
        let got: Vec<(&str, &str, i64, i64)> = doc
            .items
            .iter()
            .map(|i| {
                (
                    i.label.as_str(),
                    i.text.as_str(),
                    i.heading_level,
                    i.tree_depth,
                )
            })
            .collect();
        // h3 without title/h2: two invisible groups (depth 1, 2) then the header
        assert_eq!(
            got,
            [
                ("text", "loose bold text", 0, 1),
                ("section_header", "Deep", 2, 3),
                ("text", "para", 0, 4)
            ]
        );
        assert_eq!(doc.title.as_deref(), Some("T"));
    }

    #[test]
    fn br_entities_and_figure_without_image() {
        let doc = parse_html(
            "<p>one<br>two &amp; <a href='x'>three</a></p><figure><figcaption>Lonely caption</figcaption></figure>",
            None,
        );
        let got: Vec<(&str, &str)> = doc
            .items
            .iter()
            .map(|i| (i.label.as_str(), i.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [("text", "one two & three"), ("text", "Lonely caption")]
        );
    }
}
