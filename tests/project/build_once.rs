//! `cargo run` and then `cargo test` compile every dependency once: a feature that only a
//! dev-dependency turns on (axum's `tower-log` turning on `tracing/log`, say) would build
//! `tracing` a second time for the tests, and everything above it with it (lance,
//! datafusion, lancedb: most of a cold build). Cargo.toml turns those features on for the
//! normal build too; this test keeps the two feature sets equal.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// Every package of the graph over `edges`, with the features it is built with, one line
/// each (`tracing v0.1.44 [attributes,default,log,std,tracing-attributes]`).
fn built_with(edges: &str) -> BTreeSet<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "--locked",
            "-e",
            edges,
            "--prefix",
            "none",
            "-f",
            "{p} [{f}]",
        ])
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -e {edges}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.trim_end_matches(" (*)").to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn the_tests_build_every_dependency_with_the_features_the_binary_has() {
    let binary = built_with("normal,build");
    let tests = built_with("normal,build,dev");
    assert!(
        binary.iter().any(|l| l.starts_with("lancedb v")),
        "the graph was read: {binary:?}"
    );
    let rebuilt: Vec<&String> = binary.difference(&tests).collect();
    let with: Vec<&String> = tests
        .iter()
        .filter(|l| {
            rebuilt
                .iter()
                .any(|r| r.split(" [").next() == l.split(" [").next())
        })
        .collect();
    assert!(
        rebuilt.is_empty(),
        "these dependencies are built with other features for the tests, so `cargo test` \
         would compile them (and everything above them) a second time; turn the features on \
         in [dependencies] too:\n  binary: {rebuilt:#?}\n  tests:  {with:#?}"
    );
}
