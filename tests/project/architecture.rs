//! The architecture test: `tests/architecture.json` names the parts of Groundwork (each a
//! list of paths under `src/`), the arrows one part may follow to another, and the "never"
//! arrows that are forbidden, each with its reason. This test reads every `.rs` file under
//! `src/`, finds every `crate::` path in its code (`use` and `pub use` statements, grouped
//! and nested ones included, and inline paths such as `crate::x::y(...)`; comments, doc
//! comments and string literals are skipped), maps the file and the module each path names
//! to their parts (longest path prefix wins; `crate::x` is `src/x.rs` or `src/x/`), and
//! fails listing every reference a "never" arrow forbids, quoting its reason, or that no
//! arrow allows. References within one part are always fine. In `src/main.rs`, the binary,
//! `groundwork::` paths name the library and count the same way.
//!
//! The checker is a function over a crate directory ([`check`]), so the tests at the end
//! run it over small synthetic trees with planted imports.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The library's name, as `src/main.rs` spells its paths.
const LIBRARY: &str = "groundwork";

// ----- the rules ------------------------------------------------------------------------

/// One part: a name and the paths it is made of (`src/x.rs` a file, `src/x/` a folder).
#[derive(Debug)]
struct Part {
    name: String,
    paths: Vec<String>,
}

/// An arrow between two parts, with the reason it is allowed or forbidden.
#[derive(Debug)]
struct Arrow {
    from: String,
    to: String,
    reason: String,
}

/// `tests/architecture.json`, read.
#[derive(Debug)]
struct Rules {
    parts: Vec<Part>,
    arrows: Vec<Arrow>,
    never: Vec<Arrow>,
}

impl Rules {
    /// Reads the rules; a malformed file is an error naming what is wrong.
    fn from_json(text: &str) -> Result<Rules, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let parts = v["parts"]
            .as_object()
            .ok_or("no \"parts\" object")?
            .iter()
            .map(|(name, p)| {
                let paths = p["is"]
                    .as_array()
                    .ok_or(format!("part {name}: no \"is\" list"))?
                    .iter()
                    .map(|s| {
                        s.as_str()
                            .map(str::to_string)
                            .ok_or(format!("part {name}: a path is not a string"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Part {
                    name: name.clone(),
                    paths,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let arrows = |key: &str| -> Result<Vec<Arrow>, String> {
            v[key]
                .as_array()
                .ok_or(format!("no \"{key}\" list"))?
                .iter()
                .map(|a| {
                    let field = |i: usize| a[i].as_str().unwrap_or_default().to_string();
                    match a.as_array().map(Vec::len) {
                        Some(2 | 3) => Ok(Arrow {
                            from: field(0),
                            to: field(1),
                            reason: field(2),
                        }),
                        _ => Err(format!("{key}: {a} is not [from, to, reason]")),
                    }
                })
                .collect()
        };
        Ok(Rules {
            parts,
            arrows: arrows("arrows")?,
            never: arrows("never")?,
        })
    }

    /// The part a path under the crate directory (`src/store/mod.rs`) belongs to: the part
    /// with the longest path that is the file itself or a folder holding it.
    fn part_of_file(&self, rel: &str) -> Option<&str> {
        self.longest(|p| {
            if p.ends_with('/') {
                rel.starts_with(p)
            } else {
                rel == p
            }
        })
    }

    /// The part a module path (`["engine", "agent", "Agent"]`) belongs to: for each of its
    /// prefixes `src/a/b`, the parts holding `src/a/b.rs` or the folder `src/a/b/`; the
    /// longest part path wins.
    fn part_of_module(&self, segments: &[String]) -> Option<&str> {
        let bases: Vec<String> = (1..=segments.len())
            .map(|k| format!("src/{}", segments[..k].join("/")))
            .collect();
        self.longest(|p| {
            bases.iter().any(|base| {
                if p.ends_with('/') {
                    format!("{base}/").starts_with(p)
                } else {
                    p.strip_suffix(".rs") == Some(base.as_str())
                }
            })
        })
    }

    fn longest(&self, matches: impl Fn(&str) -> bool) -> Option<&str> {
        self.parts
            .iter()
            .flat_map(|part| part.paths.iter().map(move |p| (part, p)))
            .filter(|(_, p)| matches(p))
            .max_by_key(|(_, p)| p.len())
            .map(|(part, _)| part.name.as_str())
    }

    fn find<'a>(list: &'a [Arrow], from: &str, to: &str) -> Option<&'a Arrow> {
        list.iter().find(|a| a.from == from && a.to == to)
    }
}

// ----- reading code ---------------------------------------------------------------------

/// `text` with every comment (line, doc, block, nested block) and every string, byte-string,
/// raw-string and char literal blanked out, newlines kept, so positions keep their lines.
fn code_only(text: &str) -> Vec<char> {
    let c: Vec<char> = text.chars().collect();
    let mut out = c.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for ch in &mut out[from..to.min(c.len())] {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
    };
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            let end = (i..c.len()).find(|&j| c[j] == '\n').unwrap_or(c.len());
            blank(&mut out, i, end);
            i = end;
        } else if c[i] == '/' && next == Some('*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < c.len() && depth > 0 {
                if c[j] == '/' && c.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if c[j] == '*' && c.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if (c[i] == 'r' || (c[i] == 'b' && next == Some('r')))
            && (i == 0 || !ident(c[i - 1]))
            && {
                let start = if c[i] == 'b' { i + 2 } else { i + 1 };
                let hashes = c[start..].iter().take_while(|&&h| h == '#').count();
                c.get(start + hashes) == Some(&'"')
            }
        {
            // A raw string: r"..", r#".."#, br"..".
            let start = if c[i] == 'b' { i + 2 } else { i + 1 };
            let hashes = c[start..].iter().take_while(|&&h| h == '#').count();
            let mut j = start + hashes + 1;
            while j < c.len() {
                if c[j] == '"'
                    && c[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes
                {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            blank(&mut out, i, j);
            i = j;
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{1F600}', '"') or a lifetime ('a).
            if next == Some('\\') {
                let end = (i + 3..c.len()).find(|&j| c[j] == '\'').unwrap_or(c.len());
                blank(&mut out, i, end + 1);
                i = end + 1;
            } else if c.get(i + 2) == Some(&'\'') {
                blank(&mut out, i, i + 3);
                i += 3;
            } else {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// One `crate::` path found in a file: its 1-based line, its root (`crate`, `groundwork`)
/// and its segments after the root.
#[derive(Debug, PartialEq)]
struct Found {
    line: usize,
    root: String,
    segments: Vec<String>,
}

/// Every path in `text` rooted at one of `roots` (`crate`, and `groundwork` in the binary),
/// one per leaf of a grouped `use` (`crate::{a::b, c::{d, e}}` gives `a::b`, `c::d`, `c::e`).
fn references(text: &str, roots: &[&str]) -> Vec<Found> {
    let c = code_only(text);
    let line_at = |pos: usize| 1 + c[..pos].iter().filter(|&&ch| ch == '\n').count();
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if !ident(c[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < c.len() && ident(c[i]) {
            i += 1;
        }
        let word: String = c[start..i].iter().collect();
        let after_root = start == 0 || !matches!(c[start - 1], '$' | ':');
        if !after_root || !roots.contains(&word.as_str()) {
            continue;
        }
        let mut j = skip_ws(&c, i);
        if c.get(j) == Some(&':') && c.get(j + 1) == Some(&':') {
            j += 2;
            let mut tree = Tree {
                c: &c,
                pos: j,
                root: &word,
                out: &mut out,
                line_at: &line_at,
            };
            tree.parse(Vec::new(), line_at(start));
            i = tree.pos;
        }
    }
    out
}

fn skip_ws(c: &[char], mut i: usize) -> usize {
    while i < c.len() && c[i].is_whitespace() {
        i += 1;
    }
    i
}

/// A path tree after `root::`: `a::b`, `a::{b, c::{d, e}}`, `a::*`, `{self, a}`.
struct Tree<'a> {
    c: &'a [char],
    pos: usize,
    root: &'a str,
    out: &'a mut Vec<Found>,
    line_at: &'a dyn Fn(usize) -> usize,
}

impl Tree<'_> {
    fn parse(&mut self, prefix: Vec<String>, line: usize) {
        let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
        self.pos = skip_ws(self.c, self.pos);
        match self.c.get(self.pos) {
            Some('{') => {
                self.pos += 1;
                loop {
                    self.pos = skip_ws(self.c, self.pos);
                    match self.c.get(self.pos) {
                        None => break,
                        Some('}') => {
                            self.pos += 1;
                            break;
                        }
                        Some(',') => self.pos += 1,
                        Some(_) => {
                            let before = self.pos;
                            self.parse(prefix.clone(), line);
                            if self.pos == before {
                                self.pos += 1;
                            }
                        }
                    }
                }
            }
            Some(&ch) if ident(ch) => {
                let start = self.pos;
                while self.pos < self.c.len() && ident(self.c[self.pos]) {
                    self.pos += 1;
                }
                let word: String = self.c[start..self.pos].iter().collect();
                let line = (self.line_at)(start);
                let mut path = prefix;
                if word != "self" {
                    path.push(word);
                }
                let j = skip_ws(self.c, self.pos);
                if self.c.get(j) == Some(&':') && self.c.get(j + 1) == Some(&':') {
                    self.pos = j + 2;
                    self.parse(path, line);
                } else {
                    self.leaf(path, line);
                }
            }
            _ => self.leaf(prefix, line), // `*`, `<T>`, or the end
        }
    }

    fn leaf(&mut self, segments: Vec<String>, line: usize) {
        if !segments.is_empty() {
            self.out.push(Found {
                line,
                root: self.root.to_string(),
                segments,
            });
        }
    }
}

// ----- the check ------------------------------------------------------------------------

/// A reference the rules do not allow, or a file or module that belongs to no part.
#[derive(Debug)]
struct Violation {
    file: String,
    line: usize,
    path: String,
    rule: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.rule)
        } else {
            write!(
                f,
                "{}:{}: {}: {}",
                self.file, self.line, self.path, self.rule
            )
        }
    }
}

/// Every violation of `rules` in the `.rs` files under `crate_dir/src`, sorted by file and
/// line.
fn check(crate_dir: &Path, rules: &Rules) -> Vec<Violation> {
    let mut files = Vec::new();
    rust_files(&crate_dir.join("src"), &mut files);
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let rel = path
            .strip_prefix(crate_dir)
            .unwrap()
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        let Some(from) = rules.part_of_file(&rel) else {
            out.push(Violation {
                file: rel,
                line: 0,
                path: String::new(),
                rule: "belongs to no part of tests/architecture.json".into(),
            });
            continue;
        };
        let binary = rel == "src/main.rs" || rel.starts_with("src/bin/");
        let roots: &[&str] = if binary {
            &["crate", LIBRARY]
        } else {
            &["crate"]
        };
        let text = std::fs::read_to_string(&path).unwrap();
        let mut seen = std::collections::HashSet::new();
        for found in references(&text, roots) {
            let shown = format!("{}::{}", found.root, found.segments.join("::"));
            if !seen.insert((found.line, shown.clone())) {
                continue;
            }
            let rule = match rules.part_of_module(&found.segments) {
                None => Some("names a module in no part of tests/architecture.json".into()),
                Some(to) if to == from => None,
                Some(to) => match (
                    Rules::find(&rules.never, from, to),
                    Rules::find(&rules.arrows, from, to),
                ) {
                    (Some(never), _) => {
                        Some(format!("{from} → {to} is never allowed: {}", never.reason))
                    }
                    (None, Some(_)) => None,
                    (None, None) => Some(format!("{from} → {to}: no arrow allows it")),
                },
            };
            if let Some(rule) = rule {
                out.push(Violation {
                    file: rel.clone(),
                    line: found.line,
                    path: shown,
                    rule,
                });
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn listing(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| format!("  {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

// ----- the real tree --------------------------------------------------------------------

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn real_rules() -> Rules {
    let path = manifest_dir().join("tests/architecture.json");
    let text = std::fs::read_to_string(&path).unwrap();
    Rules::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_source_tree_follows_the_architecture() {
    // A checker that reads nothing can never fail: the tree has hundreds of crate:: paths.
    let mut files = Vec::new();
    rust_files(&manifest_dir().join("src"), &mut files);
    let read: usize = files
        .iter()
        .map(|f| references(&std::fs::read_to_string(f).unwrap(), &["crate"]).len())
        .sum();
    assert!(read > 100, "only {read} crate:: paths read under src/");
    let violations = check(manifest_dir(), &real_rules());
    assert!(
        violations.is_empty(),
        "{} reference(s) break tests/architecture.json:\n{}",
        violations.len(),
        listing(&violations)
    );
}

#[test]
fn the_rules_are_well_formed() {
    let rules = real_rules();
    let names: Vec<&str> = rules.parts.iter().map(|p| p.name.as_str()).collect();
    let mut problems = Vec::new();
    for (kind, list) in [("arrow", &rules.arrows), ("never", &rules.never)] {
        for a in list {
            for end in [&a.from, &a.to] {
                if !names.contains(&end.as_str()) {
                    problems.push(format!("{kind} {} → {}: no part {end}", a.from, a.to));
                }
            }
            if a.reason.trim().is_empty() {
                problems.push(format!("{kind} {} → {} has no reason", a.from, a.to));
            }
            if a.from == a.to {
                problems.push(format!("{kind} {} → {} points at itself", a.from, a.to));
            }
        }
    }
    for a in &rules.arrows {
        if Rules::find(&rules.never, &a.from, &a.to).is_some() {
            problems.push(format!("{} → {} is both allowed and never", a.from, a.to));
        }
    }
    for part in &rules.parts {
        if !part.paths.iter().any(|p| manifest_dir().join(p).exists()) {
            problems.push(format!(
                "part {}: none of {:?} exists",
                part.name, part.paths
            ));
        }
        for p in &part.paths {
            if !p.starts_with("src/") || !(p.ends_with('/') || p.ends_with(".rs")) {
                problems.push(format!("part {}: {p} is not src/….rs or src/…/", part.name));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ----- the checker on synthetic trees ---------------------------------------------------

/// Small rules for the synthetic trees: Store may use Base and Model, Sandbox may use
/// Store, Face may use Store, Store → Engine is never allowed.
const RULES: &str = r#"{
  "parts": {
    "Face": {"is": ["src/main.rs"]},
    "Base": {"is": ["src/lib.rs", "src/config.rs", "src/config/"]},
    "Engine": {"is": ["src/engine/"]},
    "Store": {"is": ["src/store/", "src/ingest/"]},
    "Ingest pipeline": {"is": ["src/ingest/pipeline.rs"]},
    "Model": {"is": ["src/model/"]},
    "Sandbox": {"is": ["src/sandbox/"]}
  },
  "arrows": [
    ["Store", "Base", "shared"],
    ["Store", "Model", "embedders"],
    ["Sandbox", "Store", "the VFS reads the store"],
    ["Engine", "Base", "shared"],
    ["Face", "Store", "commands"]
  ],
  "never": [
    ["Store", "Engine", "storage knows no agent"]
  ]
}"#;

/// A crate directory holding `files` (path under it, text).
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn violations(files: &[(&str, &str)]) -> Vec<String> {
    let dir = tree(files);
    let rules = Rules::from_json(RULES).unwrap();
    check(dir.path(), &rules)
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn a_forbidden_import_is_reported_with_file_line_and_rule() {
    let found = violations(&[(
        "src/store/x.rs",
        "//! Storage.\n\nuse crate::engine::agent::Agent;\n",
    )]);
    assert_eq!(
        found,
        vec![
            "src/store/x.rs:3: crate::engine::agent::Agent: Store → Engine is never allowed: \
             storage knows no agent"
        ]
    );
}

#[test]
fn an_import_no_arrow_allows_is_reported() {
    let found = violations(&[
        (
            "src/sandbox/vfs.rs",
            "fn f() {\n    let s = crate::store::Store::open();\n    crate::engine::prompts::fill(\"x\", &[]);\n}\n",
        ),
        ("src/engine/mod.rs", "pub use crate::sandbox::ExecLimits;\n"),
    ]);
    assert_eq!(
        found,
        vec![
            "src/engine/mod.rs:1: crate::sandbox::ExecLimits: Engine → Sandbox: no arrow allows it",
            "src/sandbox/vfs.rs:3: crate::engine::prompts::fill: Sandbox → Engine: no arrow \
             allows it",
        ]
    );
}

#[test]
fn a_grouped_use_is_read_leaf_by_leaf() {
    let found = violations(&[(
        "src/store/x.rs",
        "use crate::{\n    config::AppConfig,\n    store::{types::SearchResult, format},\n    \
         engine::{self, agent::Agent, events::{CoreEvent, EventSink}},\n    model::*,\n};\n\
         pub use crate::{ingest::chunker, sandbox::Sandbox};\n",
    )]);
    assert_eq!(
        found,
        vec![
            "src/store/x.rs:4: crate::engine: Store → Engine is never allowed: storage knows \
             no agent",
            "src/store/x.rs:4: crate::engine::agent::Agent: Store → Engine is never allowed: \
             storage knows no agent",
            "src/store/x.rs:4: crate::engine::events::CoreEvent: Store → Engine is never \
             allowed: storage knows no agent",
            "src/store/x.rs:4: crate::engine::events::EventSink: Store → Engine is never \
             allowed: storage knows no agent",
            "src/store/x.rs:7: crate::sandbox::Sandbox: Store → Sandbox: no arrow allows it",
        ]
    );
}

#[test]
fn comments_strings_and_macros_are_not_references() {
    let found = violations(&[(
        "src/store/x.rs",
        "//! See [`crate::engine::agent`].\n\
         /// Calls [`crate::engine::agent::Agent::run`].\n\
         pub(crate) fn f() -> &'static str {\n\
             // use crate::engine::agent::Agent;\n\
             /* crate::engine /* nested */ crate::engine */\n\
             let _q = '\"'; let _c = 'c';\n\
             let _r = r#\"use crate::engine::x;\"#;\n\
             \"use crate::engine::agent::Agent;\"\n\
         }\n\
         macro_rules! m { () => { $crate::engine::x() } }\n",
    )]);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn a_clean_tree_passes() {
    let found = violations(&[
        ("src/lib.rs", "pub mod config;\npub mod store;\n"),
        ("src/config.rs", "pub struct AppConfig;\n"),
        (
            "src/store/mod.rs",
            "use crate::config::AppConfig;\nuse crate::model::Embedder;\nuse crate::store::types::X;\n\
             use crate::ingest::chunker::split;\n",
        ),
        (
            "src/sandbox/vfs.rs",
            "use crate::{store::{Store, DocumentItem}, sandbox::worker};\n",
        ),
        ("src/engine/agent.rs", "use crate::config::AppConfig;\n"),
    ]);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_longest_path_decides_the_part_and_unknown_places_are_reported() {
    let found = violations(&[
        // src/ingest/ is Store, but src/ingest/pipeline.rs is its own part here.
        ("src/ingest/pipeline.rs", "use crate::store::Store;\n"),
        ("src/store/mod.rs", "use crate::ingest::pipeline::run;\n"),
        ("src/ui/mod.rs", "pub fn f() {}\n"),
        ("src/engine/x.rs", "fn f() { crate::nowhere::g(); }\n"),
    ]);
    assert_eq!(
        found,
        vec![
            "src/engine/x.rs:1: crate::nowhere::g: names a module in no part of \
             tests/architecture.json",
            "src/ingest/pipeline.rs:1: crate::store::Store: Ingest pipeline → Store: no arrow \
             allows it",
            "src/store/mod.rs:1: crate::ingest::pipeline::run: Store → Ingest pipeline: no \
             arrow allows it",
            "src/ui/mod.rs: belongs to no part of tests/architecture.json",
        ]
    );
}

#[test]
fn the_binary_names_the_library_by_its_name() {
    let found = violations(&[
        (
            "src/main.rs",
            "fn main() { groundwork::engine::run(); let _ = crate::store::x; }\n",
        ),
        (
            "src/store/mod.rs",
            "fn f() { groundwork::engine::run(); }\n",
        ),
    ]);
    // Only the binary reaches the library by its name; inside the library it is no path.
    assert_eq!(
        found,
        vec!["src/main.rs:1: groundwork::engine::run: Face → Engine: no arrow allows it"]
    );
}
