//! The keys reference (docs/reference/keys.md) is the keymap's own table: a binding added,
//! changed or described anew in src/tui/keymap.rs fails here until the page says the same.
//! `GROUNDWORK_UPDATE_DOCS=1 cargo test --test project docs::` writes the table into the page.

use std::path::Path;

use groundwork::tui::keymap::Keymap;

const BEGIN: &str =
    "<!-- keys:begin (generated from src/tui/keymap.rs; checked by tests/project/docs.rs) -->";
const END: &str = "<!-- keys:end -->";

#[test]
fn the_keys_reference_is_the_keymaps_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference/keys.md");
    let page = std::fs::read_to_string(&path).expect("docs/reference/keys.md exists");
    let (Some(b), Some(e)) = (page.find(BEGIN), page.find(END)) else {
        panic!("{} lacks the lines {BEGIN} and {END}", path.display());
    };
    assert!(b < e, "{BEGIN} comes before {END}");
    let written = &page[b + BEGIN.len()..e];
    let table = Keymap::default().reference_table();
    let wanted = format!("\n{table}");
    if written != wanted && std::env::var_os("GROUNDWORK_UPDATE_DOCS").is_some() {
        let page = format!("{}{BEGIN}{wanted}{}", &page[..b], &page[e..]);
        std::fs::write(&path, page).unwrap();
        return;
    }
    assert_eq!(
        written, wanted,
        "docs/reference/keys.md does not list the keymap's bindings: run \
         GROUNDWORK_UPDATE_DOCS=1 cargo test --test project docs::"
    );
}
