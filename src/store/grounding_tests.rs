use super::*;
use serde_json::json;

const WHITE: Rgba<u8> = Rgba([255, 255, 255, 255]);

/// A 100×200-point page rastered at 2 px per point: 200×400 pixels, white.
fn page() -> DynamicImage {
    DynamicImage::ImageRgba8(RgbaImage::from_pixel(200, 400, WHITE))
}

/// Docling JSON of one text item whose box spans x 10..50 and 20..60 points from the top
/// of a 100×200 page, written in the given origin.
fn docling(origin: &str) -> Value {
    let (t, b) = if origin == "TOPLEFT" {
        (20.0, 60.0)
    } else {
        (180.0, 140.0)
    };
    json!({
        "pages": {"1": {"page_no": 1, "size": {"width": 100.0, "height": 200.0}}},
        "texts": [{
            "self_ref": "#/texts/0",
            "prov": [{
                "page_no": 1,
                "bbox": {"l": 10.0, "t": t, "r": 50.0, "b": b, "coord_origin": origin},
                "charspan": [0, 5]
            }]
        }]
    })
}

/// White tinted by a matched item: 3/4 white, 1/4 orange.
const TINTED: Rgba<u8> = Rgba([255, 216, 191, 255]);

/// The box above lands on pixels x 20..100, y 40..120. Context: outlined `width` pixels
/// inwards (1 at 200/300 → 1), the inside white. A matched item: outlined from its edge
/// outwards, `width` pixels (2), the inside tinted. Past the outline: untouched.
fn assert_box_at_expected_pixels(img: &RgbaImage, colour: Rgba<u8>, width: u32, inside: Rgba<u8>) {
    let outward = inside != WHITE;
    // The edge rows and columns, k pixels in (or out); `low`: the top or left edge.
    let at = |edge: u32, k: u32, low: bool| {
        if low != outward { edge + k } else { edge - k }
    };
    for k in 0..width {
        for x in [20, 60, 99] {
            assert_eq!(
                *img.get_pixel(x, at(40, k, true)),
                colour,
                "top edge at x={x}, k={k}"
            );
            assert_eq!(
                *img.get_pixel(x, at(119, k, false)),
                colour,
                "bottom edge at x={x}, k={k}"
            );
        }
        for y in [40, 80, 119] {
            assert_eq!(
                *img.get_pixel(at(20, k, true), y),
                colour,
                "left edge at y={y}, k={k}"
            );
            assert_eq!(
                *img.get_pixel(at(99, k, false), y),
                colour,
                "right edge at y={y}, k={k}"
            );
        }
    }
    // Just inside every edge.
    let d = if outward { 1 } else { width };
    for (x, y) in [
        (20 + d, 80),
        (99 - d, 80),
        (60, 40 + d),
        (60, 119 - d),
        (60, 80),
    ] {
        assert_eq!(*img.get_pixel(x, y), inside, "({x},{y}) inside");
    }
    // Just past the outline, and far away: untouched.
    let o = if outward { width } else { 1 };
    for (x, y) in [
        (20 - o, 80),
        (99 + o, 80),
        (60, 40 - o),
        (60, 119 + o),
        (0, 0),
        (199, 399),
    ] {
        assert_eq!(*img.get_pixel(x, y), WHITE, "({x},{y}) untouched");
    }
}

#[test]
fn topleft_and_bottomleft_boxes_land_on_the_same_pixels() {
    for origin in ["TOPLEFT", "BOTTOMLEFT"] {
        let doc = docling(origin);
        let sizes = page_sizes(&doc);
        assert_eq!(sizes.get(&1), Some(&(100.0, 200.0)));
        let boxes = item_boxes(&doc, "#/texts/0");
        assert_eq!(boxes.len(), 1, "{origin}");
        let want = if origin == "TOPLEFT" {
            Origin::TopLeft
        } else {
            Origin::BottomLeft
        };
        assert_eq!(boxes[0].origin, want);
        let img = draw_outlines(&page(), sizes[&1], &[(Role::Matched, boxes[0])]);
        assert_box_at_expected_pixels(&img, MATCHED_COLOUR, 2, TINTED);
    }
}

#[test]
fn context_and_matched_have_distinct_colours_and_matched_wins() {
    assert_ne!(MATCHED_COLOUR, CONTEXT_COLOUR);
    let doc = docling("TOPLEFT");
    let bx = item_boxes(&doc, "#/texts/0")[0];
    // Context: thin, and the inside untouched.
    let img = draw_outlines(&page(), (100.0, 200.0), &[(Role::Context, bx)]);
    assert_box_at_expected_pixels(&img, CONTEXT_COLOUR, 1, WHITE);
    // The same box as context and matched (in either order): matched is on top, thick and
    // tinted.
    for boxes in [
        [(Role::Matched, bx), (Role::Context, bx)],
        [(Role::Context, bx), (Role::Matched, bx)],
    ] {
        let img = draw_outlines(&page(), (100.0, 200.0), &boxes);
        assert_box_at_expected_pixels(&img, MATCHED_COLOUR, 2, TINTED);
    }
}

#[test]
fn line_width_scales_with_the_raster() {
    assert_eq!(line_width(200, 400), 1);
    assert_eq!(line_width(1224, 1584), 4);
    // 900×1800 raster of the 100×200 page (9 px/pt), line 3: the box spans x 90..450,
    // y 180..540; as context three rows of outline inwards, as a matched item six from
    // the edge outwards; then the inside.
    let big = DynamicImage::ImageRgba8(RgbaImage::from_pixel(900, 1800, WHITE));
    let bx = item_boxes(&docling("BOTTOMLEFT"), "#/texts/0")[0];
    let img = draw_outlines(&big, (100.0, 200.0), &[(Role::Context, bx)]);
    for y in 180..183 {
        assert_eq!(*img.get_pixel(200, y), CONTEXT_COLOUR, "row {y}");
    }
    assert_eq!(*img.get_pixel(200, 183), WHITE);
    assert_eq!(*img.get_pixel(200, 179), WHITE);
    for x in 447..450 {
        assert_eq!(*img.get_pixel(x, 300), CONTEXT_COLOUR, "column {x}");
    }
    assert_eq!(*img.get_pixel(446, 300), WHITE);
    assert_eq!(*img.get_pixel(450, 300), WHITE);
    let img = draw_outlines(&big, (100.0, 200.0), &[(Role::Matched, bx)]);
    for y in 175..181 {
        assert_eq!(*img.get_pixel(200, y), MATCHED_COLOUR, "row {y}");
    }
    assert_eq!(*img.get_pixel(200, 181), TINTED);
    assert_eq!(*img.get_pixel(200, 174), WHITE);
    for x in 449..455 {
        assert_eq!(*img.get_pixel(x, 300), MATCHED_COLOUR, "column {x}");
    }
    assert_eq!(*img.get_pixel(448, 300), TINTED);
    assert_eq!(*img.get_pixel(455, 300), WHITE);
}

#[test]
fn boxes_are_clamped_to_the_page_and_degenerate_ones_skipped() {
    let bx = |l, t, r, b| ProvBox {
        page_no: 1,
        l,
        t,
        r,
        b,
        origin: Origin::TopLeft,
    };
    // Overhanging the right and bottom edges: clamped to the raster.
    assert_eq!(
        pixel_rect(&bx(50.0, 150.0, 130.0, 260.0), (100.0, 200.0), (200, 400)),
        Some((100, 200, 300, 400))
    );
    let img = draw_outlines(
        &page(),
        (100.0, 200.0),
        &[(Role::Matched, bx(50.0, 150.0, 130.0, 260.0))],
    );
    assert_eq!(*img.get_pixel(199, 350), MATCHED_COLOUR);
    assert_eq!(*img.get_pixel(150, 399), MATCHED_COLOUR);
    // Zero width, zero height, entirely off the page, not finite: nothing drawn.
    for d in [
        bx(10.0, 10.0, 10.0, 50.0),
        bx(10.0, 30.0, 50.0, 30.0),
        bx(120.0, 10.0, 150.0, 50.0),
        bx(f64::NAN, 10.0, 50.0, 50.0),
    ] {
        assert_eq!(pixel_rect(&d, (100.0, 200.0), (200, 400)), None, "{d:?}");
        let img = draw_outlines(&page(), (100.0, 200.0), &[(Role::Matched, d)]);
        assert!(img.pixels().all(|p| *p == WHITE), "{d:?} drew nothing");
    }
}

#[test]
fn unknown_items_origins_and_whole_page_boxes() {
    let doc = docling("TOPLEFT");
    assert!(item_boxes(&doc, "#/texts/7").is_empty());
    assert!(item_boxes(&doc, "texts/0").is_empty());
    let mut odd = docling("TOPLEFT");
    odd["texts"][0]["prov"][0]["bbox"]["coord_origin"] = json!("CENTER");
    assert!(item_boxes(&odd, "#/texts/0").is_empty());
    let bx = item_boxes(&doc, "#/texts/0")[0];
    assert!(!whole_page(&bx, (100.0, 200.0)));
    let full = ProvBox {
        l: 0.0,
        t: 0.0,
        r: 100.0,
        b: 200.0,
        ..bx
    };
    assert!(whole_page(&full, (100.0, 200.0)));
}
