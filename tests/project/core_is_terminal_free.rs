//! The core (everything in `src/` outside `src/tui/`) must never import a terminal library:
//! the TUI is a view over what the core emits, and headless commands must not drag one in.

use std::path::Path;

fn visit(dir: &Path, offenders: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "tui") && path.parent() == Some(&src()) {
                continue;
            }
            visit(&path, offenders);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for lib in ["ratatui", "crossterm"] {
                    if code.contains(&format!("{lib}::")) || code.contains(&format!("use {lib}")) {
                        offenders.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
}

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn core_never_imports_ratatui_or_crossterm() {
    let mut offenders = Vec::new();
    visit(&src(), &mut offenders);
    assert!(
        offenders.is_empty(),
        "terminal imports outside src/tui:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_check_sees_an_offending_file() {
    // Guard against a check that can never fail: a file under a temp "src" with an import
    // must be reported.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("x.rs"),
        "use ratatui::widgets::Paragraph;\n",
    )
    .unwrap();
    let mut offenders = Vec::new();
    visit(dir.path(), &mut offenders);
    assert_eq!(offenders.len(), 1);
}
