//! PDF ingestion throughput: `groundwork::ingest::parse_file` on libtasn1-doc's manual
//! (36 pages typeset by TeX; `.ci/setup-tests` installs the Debian package), reported in pages
//! per second: poppler's subprocesses (`pdftohtml -xml`, `pdftoppm` for the page rasters)
//! plus our structure (headings, furniture, reading order, tables, boxes).
//!
//! `cargo bench --profile dev --bench ingest_pdf` (the figure in the README is of the dev
//! profile, as `cargo run` gives; a release build needs a cold build of every dependency).

use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use groundwork::ingest::parse_file;

const MANUAL: &str = "/usr/share/doc/libtasn1-doc/libtasn1.pdf";

fn bench(c: &mut Criterion) {
    let manual = Path::new(MANUAL);
    assert!(
        manual.is_file(),
        "{MANUAL} is missing: install the Debian package libtasn1-doc (.ci/setup-tests does)"
    );
    let parsed = parse_file(manual).unwrap_or_else(|e| panic!("parsing {MANUAL}: {e}"));
    let pages = parsed.pages.len() as u64;
    assert!(pages > 0, "{MANUAL}: no pages rastered");
    let mut g = c.benchmark_group("parse_file libtasn1.pdf");
    // About 4 s per parse unoptimised: ten samples of one parse each.
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(60))
        .throughput(Throughput::Elements(pages));
    g.bench_function(format!("{pages} pages"), |b| {
        b.iter(|| parse_file(manual).unwrap_or_else(|e| panic!("parsing {MANUAL}: {e}")))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
