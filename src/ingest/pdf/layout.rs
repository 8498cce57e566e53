//! What poppler says about a PDF's pages, joined into lines with fonts.
//!
//! * `pdftotext -bbox-layout` gives the structure: per page, flows (poppler's columns,
//!   in reading order), their blocks (paragraphs) and each block's lines with boxes.
//! * `pdftohtml -xml -zoom 1` gives the fonts: text runs with a box and a font spec
//!   (size, family), bold marked by `<b>` or a bold family name, and the boxes of the
//!   embedded images.
//!
//! Both use points with the origin at the top left of the page, so a run belongs to the
//! line its box overlaps most.

use scraper::{ElementRef, Html, Selector};

use crate::ingest::normalize_ws;

/// A box in points, origin top left: left, top, right, bottom.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Rect {
    pub l: f64,
    pub t: f64,
    pub r: f64,
    pub b: f64,
}

impl Rect {
    pub fn height(&self) -> f64 {
        (self.b - self.t).max(0.0)
    }

    pub fn width(&self) -> f64 {
        (self.r - self.l).max(0.0)
    }

    /// The smallest box holding both.
    pub fn union(&self, o: &Rect) -> Rect {
        Rect {
            l: self.l.min(o.l),
            t: self.t.min(o.t),
            r: self.r.max(o.r),
            b: self.b.max(o.b),
        }
    }

    fn overlap(a0: f64, a1: f64, b0: f64, b1: f64) -> f64 {
        (a1.min(b1) - a0.max(b0)).max(0.0)
    }

    /// Vertical overlap as a share of the smaller height.
    pub fn v_overlap(&self, o: &Rect) -> f64 {
        let h = self.height().min(o.height());
        if h <= 0.0 {
            return 0.0;
        }
        Self::overlap(self.t, self.b, o.t, o.b) / h
    }

    /// Horizontal overlap in points.
    pub fn h_overlap(&self, o: &Rect) -> f64 {
        Self::overlap(self.l, self.r, o.l, o.r)
    }
}

/// One line of text with its box and dominant font.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub text: String,
    pub rect: Rect,
    /// Font size in points (the runs' size weighted by characters; the line height when
    /// no run matched).
    pub size: f64,
    /// Most of the line's characters are bold.
    pub bold: bool,
}

/// A block of lines (poppler's paragraph).
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub lines: Vec<Line>,
    /// Index of the flow (column) the block belongs to on its page.
    pub flow: usize,
}

impl Block {
    pub fn rect(&self) -> Rect {
        self.lines
            .iter()
            .map(|l| l.rect)
            .reduce(|a, b| a.union(&b))
            .unwrap_or_default()
    }

    /// The lines joined (hyphenated line breaks merged), whitespace normalised.
    pub fn text(&self) -> String {
        let lines: Vec<String> = self.lines.iter().map(|l| l.text.clone()).collect();
        normalize_ws(&join_lines(&lines))
    }

    /// Characters of text, for weighting.
    pub fn chars(&self) -> usize {
        self.lines.iter().map(|l| l.text.chars().count()).sum()
    }

    /// The font size most of the block's characters have.
    pub fn size(&self) -> f64 {
        let mut best: Vec<(f64, usize)> = Vec::new();
        for l in &self.lines {
            let n = l.text.chars().count();
            match best.iter_mut().find(|(s, _)| (s - l.size).abs() < 0.25) {
                Some(e) => e.1 += n,
                None => best.push((l.size, n)),
            }
        }
        best.into_iter()
            .max_by_key(|(_, n)| *n)
            .map_or(0.0, |(s, _)| s)
    }

    pub fn bold(&self) -> bool {
        let bold: usize = self
            .lines
            .iter()
            .filter(|l| l.bold)
            .map(|l| l.text.chars().count())
            .sum();
        bold * 2 > self.chars()
    }
}

/// One page: its size and blocks in reading order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Page {
    pub page_no: i64,
    pub width: f64,
    pub height: f64,
    pub blocks: Vec<Block>,
    /// Boxes of the embedded images, in the order pdftohtml lists them.
    pub images: Vec<Rect>,
}

/// A text run from `pdftohtml -xml`.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub rect: Rect,
    pub size: f64,
    pub bold: bool,
    pub chars: usize,
}

fn attr(e: &ElementRef, a: &str) -> f64 {
    e.value()
        .attr(a)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

fn sel(s: &str) -> Selector {
    Selector::parse(s).expect("static selector")
}

/// Title and pages from `pdftotext -bbox-layout` output. Lines carry no font yet.
pub fn parse_bbox_layout(xhtml: &str) -> (Option<String>, Vec<Page>) {
    let html = Html::parse_document(xhtml);
    let (s_title, s_page, s_flow, s_block, s_line, s_word) = (
        sel("title"),
        sel("page"),
        sel("flow"),
        sel("block"),
        sel("line"),
        sel("word"),
    );
    let title = html
        .select(&s_title)
        .next()
        .map(|t| normalize_ws(&t.text().collect::<String>()))
        .filter(|t| !t.is_empty());
    let pages = html
        .select(&s_page)
        .enumerate()
        .map(|(i, page)| {
            let mut blocks = Vec::new();
            for (flow, f) in page.select(&s_flow).enumerate() {
                for block in f.select(&s_block) {
                    let lines: Vec<Line> = block
                        .select(&s_line)
                        .filter_map(|l| {
                            let words: Vec<String> = l
                                .select(&s_word)
                                .map(|w| w.text().collect::<String>())
                                .collect();
                            let text = normalize_ws(&words.join(" "));
                            let rect = Rect {
                                l: attr(&l, "xmin"),
                                t: attr(&l, "ymin"),
                                r: attr(&l, "xmax"),
                                b: attr(&l, "ymax"),
                            };
                            (!text.is_empty()).then(|| Line {
                                text,
                                rect,
                                size: rect.height(),
                                bold: false,
                            })
                        })
                        .collect();
                    if !lines.is_empty() {
                        blocks.push(Block { lines, flow });
                    }
                }
            }
            Page {
                page_no: i as i64 + 1,
                width: attr(&page, "width"),
                height: attr(&page, "height"),
                blocks,
                images: Vec::new(),
            }
        })
        .collect();
    (title, pages)
}

/// Whether a font family name says bold (`Helvetica-Bold`, `CMBX12`, `Arial,Bold`).
fn bold_family(family: &str) -> bool {
    let f = family.to_ascii_lowercase();
    let base = f.split('+').next_back().unwrap_or(&f);
    base.contains("bold")
        || base.contains("black")
        || base.contains("heavy")
        || base.starts_with("cmbx")
        || base.starts_with("cmb10")
        || base.ends_with("-bd")
        || base.ends_with(",bd")
}

/// Text runs and image boxes per page (1-based page number) from `pdftohtml -xml -zoom 1`.
pub fn parse_font_xml(xml: &str) -> Vec<(i64, Vec<Run>, Vec<Rect>)> {
    // pdftohtml's XML is well formed but has a DTD line; the HTML parser reads it fine
    // and keeps the element names.
    let html = Html::parse_document(xml);
    let (s_page, s_font, s_text, s_image, s_b) = (
        sel("page"),
        sel("fontspec"),
        sel("text"),
        // The HTML parser reads `<image>` as `<img>`, as HTML5 says.
        sel("image, img"),
        sel("b"),
    );
    // Font specs are global ids declared on the page where first used.
    let mut fonts: std::collections::HashMap<String, (f64, bool)> = Default::default();
    let mut out = Vec::new();
    for page in html.select(&s_page) {
        let no = attr(&page, "number") as i64;
        for f in page.select(&s_font) {
            if let Some(id) = f.value().attr("id") {
                let family = f.value().attr("family").unwrap_or("");
                fonts.insert(id.to_string(), (attr(&f, "size"), bold_family(family)));
            }
        }
        let rect_of = |e: &ElementRef| {
            let (t, l) = (attr(e, "top"), attr(e, "left"));
            Rect {
                l,
                t,
                r: l + attr(e, "width"),
                b: t + attr(e, "height"),
            }
        };
        let runs = page
            .select(&s_text)
            .map(|t| {
                let text: String = t.text().collect();
                let chars = text.trim().chars().count();
                let bold_chars: usize = t
                    .select(&s_b)
                    .map(|b| b.text().collect::<String>().trim().chars().count())
                    .sum();
                let (size, fam_bold) = t
                    .value()
                    .attr("font")
                    .and_then(|id| fonts.get(id))
                    .copied()
                    .unwrap_or((0.0, false));
                Run {
                    rect: rect_of(&t),
                    size,
                    bold: fam_bold || (chars > 0 && bold_chars * 2 >= chars),
                    chars,
                }
            })
            .filter(|r| r.chars > 0)
            .collect();
        let images = page.select(&s_image).map(|i| rect_of(&i)).collect();
        out.push((no, runs, images));
    }
    out
}

/// Gives each line the size and weight of the runs that overlap it most.
pub fn attach_fonts(pages: &mut [Page], fonts: &[(i64, Vec<Run>, Vec<Rect>)]) {
    for page in pages.iter_mut() {
        let Some((_, runs, images)) = fonts.iter().find(|(no, _, _)| *no == page.page_no) else {
            continue;
        };
        page.images = images.clone();
        for block in &mut page.blocks {
            for line in &mut block.lines {
                let mut weight = 0usize;
                let mut size_sum = 0.0;
                let mut bold = 0usize;
                for run in runs {
                    if run.rect.v_overlap(&line.rect) < 0.5 || run.rect.h_overlap(&line.rect) < 0.5
                    {
                        continue;
                    }
                    weight += run.chars;
                    size_sum += run.size * run.chars as f64;
                    if run.bold {
                        bold += run.chars;
                    }
                }
                if weight > 0 {
                    line.size = size_sum / weight as f64;
                    line.bold = bold * 2 > weight;
                }
            }
        }
    }
}

/// Join lines with spaces, merging words hyphenated across a line break
/// ("exam-" + "ple" → "example") only when the next line starts lowercase.
pub fn join_lines(lines: &[String]) -> String {
    let mut out = String::new();
    for l in lines {
        let l = l.trim();
        if l.is_empty() {
            continue;
        }
        if out.ends_with('-')
            && out.len() > 1
            && out[..out.len() - 1]
                .chars()
                .last()
                .is_some_and(char::is_alphabetic)
            && l.chars().next().is_some_and(char::is_lowercase)
        {
            out.pop();
        } else if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(l);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bold_families() {
        assert!(bold_family("ECEDAZ+CMBX12"));
        assert!(bold_family("Helvetica-Bold"));
        assert!(bold_family("LCHKSO+CMB10"));
        assert!(!bold_family("PWNLKT+CMR10"));
        assert!(!bold_family("Times-Roman"));
    }

    #[test]
    fn runs_give_lines_their_font() {
        let xml = r##"<?xml version="1.0"?><pdf2xml><page number="1" top="0" left="0" height="792" width="612">
<fontspec id="0" size="11" family="CMR10" color="#000"/>
<fontspec id="1" size="14" family="CMBX12" color="#000"/>
<text top="98" left="90" width="192" height="13" font="1">3.3 Invoking</text>
<text top="120" left="90" width="300" height="10" font="0">plain <b>and</b> text here</text>
<image top="300" left="72" width="192" height="128" src="x.png"/>
</page></pdf2xml>"##;
        let fonts = parse_font_xml(xml);
        assert_eq!(fonts.len(), 1);
        assert_eq!(fonts[0].1.len(), 2);
        assert!(fonts[0].1[0].bold && !fonts[0].1[1].bold);
        assert_eq!(
            fonts[0].2,
            vec![Rect {
                l: 72.0,
                t: 300.0,
                r: 264.0,
                b: 428.0
            }]
        );
        let line = |t: f64, text: &str| Line {
            text: text.into(),
            rect: Rect {
                l: 90.0,
                t,
                r: 280.0,
                b: t + 11.0,
            },
            size: 11.0,
            bold: false,
        };
        let mut pages = vec![Page {
            page_no: 1,
            width: 612.0,
            height: 792.0,
            blocks: vec![Block {
                lines: vec![
                    line(98.0, "3.3 Invoking"),
                    line(120.0, "plain and text here"),
                ],
                flow: 0,
            }],
            images: vec![],
        }];
        attach_fonts(&mut pages, &fonts);
        let l = &pages[0].blocks[0].lines;
        assert_eq!((l[0].size, l[0].bold), (14.0, true));
        assert_eq!((l[1].size, l[1].bold), (11.0, false));
        assert_eq!(pages[0].images.len(), 1);
    }

    #[test]
    fn hyphenated_lines_join() {
        assert_eq!(
            join_lines(&["an exam-".into(), "ple here".into()]),
            "an example here"
        );
        assert_eq!(
            join_lines(&["state-".into(), "Of-the-art".into()]),
            "state- Of-the-art"
        );
    }
}
