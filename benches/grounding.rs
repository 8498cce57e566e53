//! Visual grounding: outlining a page raster (a US Letter page rastered at 144 dpi,
//! 1224×1584 pixels) with 10, 100 and 1,000 item boxes, half matched and half context.
//! The cost is one copy of the raster plus a term linear in the boxes (each outline is its
//! perimeter times the line width).
//!
//! `cargo bench --bench grounding`

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use groundwork::store::grounding::{Origin, ProvBox, Role, draw_outlines};
use image::{DynamicImage, Rgba, RgbaImage};

fn boxes(n: usize) -> Vec<(Role, ProvBox)> {
    (0..n)
        .map(|i| {
            let row = (i % 50) as f64;
            let col = (i / 50 % 2) as f64;
            let role = if i % 2 == 0 {
                Role::Matched
            } else {
                Role::Context
            };
            (
                role,
                ProvBox {
                    page_no: 1,
                    l: 72.0 + col * 240.0,
                    t: 40.0 + row * 14.0,
                    r: 300.0 + col * 240.0,
                    b: 52.0 + row * 14.0,
                    origin: Origin::TopLeft,
                },
            )
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let page = DynamicImage::ImageRgba8(RgbaImage::from_pixel(
        1224,
        1584,
        Rgba([255, 255, 255, 255]),
    ));
    let mut g = c.benchmark_group("draw_outlines 1224x1584");
    for n in [10usize, 100, 1000] {
        let b = boxes(n);
        g.bench_with_input(BenchmarkId::from_parameter(n), &b, |bench, b| {
            bench.iter(|| draw_outlines(&page, (612.0, 792.0), b))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
