//! What an arm changes ([`Settings`], the one type of what a question's composition
//! may change, as `ask`'s flags and replays also take it: capabilities, compaction, policy, model and
//! endpoint, the search limit and budgets), and the TOML experiment file a user keeps in
//! version control: `questions`, `out`, `jobs` and one `[[arm]]` table per arm, each with
//! a `name` and `flags` (`ask`'s flags, parsed by the face) and/or the typed fields.

use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use crate::host::compose::Settings;

/// An arm as written: its name, its `ask` flags (still a string) and typed settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ArmEntry {
    pub name: String,
    pub flags: Option<String>,
    pub settings: Settings,
}

/// A TOML experiment file, its paths resolved against the file's folder.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Experiment {
    pub questions: Option<PathBuf>,
    pub out: Option<PathBuf>,
    pub jobs: Option<usize>,
    pub arms: Vec<ArmEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExperiment {
    questions: Option<PathBuf>,
    out: Option<PathBuf>,
    jobs: Option<usize>,
    #[serde(default)]
    arm: Vec<toml::Table>,
}

/// Reads an experiment file; a bad one is refused naming the file and what is wrong.
pub fn load(path: &Path) -> Result<Experiment, String> {
    let name = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{name}: cannot read: {e}"))?;
    let base = path.parent().unwrap_or(Path::new(""));
    parse(&text, base).map_err(|e| format!("{name}: {e}"))
}

/// Parses an experiment file's text; relative paths are taken from `base`.
pub fn parse(text: &str, base: &Path) -> Result<Experiment, String> {
    let raw: RawExperiment = toml::from_str(text).map_err(|e| one_line(&e.to_string()))?;
    if raw.jobs == Some(0) {
        return Err("`jobs` must be at least 1".into());
    }
    let mut arms = Vec::new();
    for (i, mut t) in raw.arm.into_iter().enumerate() {
        let name = match t.remove("name") {
            Some(toml::Value::String(s)) => s,
            _ => return Err(format!("arm {}: no `name` string", i + 1)),
        };
        let flags = match t.remove("flags") {
            None => None,
            Some(toml::Value::String(s)) => Some(s),
            Some(_) => return Err(format!("arm '{name}': `flags` must be a string")),
        };
        let settings = Settings::deserialize(toml::Value::Table(t))
            .map_err(|e| format!("arm '{name}': {}", one_line(&e.to_string())))?;
        arms.push(ArmEntry {
            name,
            flags,
            settings,
        });
    }
    Ok(Experiment {
        questions: raw.questions.map(|p| base.join(p)),
        out: raw.out.map(|p| base.join(p)),
        jobs: raw.jobs,
        arms,
    })
}

/// TOML errors come over several lines (a snippet of the file); the first and the last
/// say it.
fn one_line(e: &str) -> String {
    let lines: Vec<&str> = e.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    match lines.as_slice() {
        [] => String::new(),
        [one] => one.to_string(),
        [first, .., last] => format!("{first} {last}"),
    }
}

/// Checks an arm's name: it names a folder of sessions and a column of the report.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("an arm needs a name, `NAME: FLAGS`".into());
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        || name.starts_with('.')
    {
        return Err(format!(
            "arm name '{name}': use letters, digits, '-', '_' and '.'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::compose::CapabilityChoice;

    #[test]
    fn a_file_with_flags_and_typed_arms() {
        let e = parse(
            "questions = \"q.jsonl\"\njobs = 3\n[[arm]]\nname = \"base\"\nflags = \"--no-policy\"\n[[arm]]\nname = \"tight\"\nsearch_limit = 2\nmax_searches = 1\npolicy = true\n",
            Path::new("/x"),
        )
        .unwrap();
        assert_eq!(e.questions, Some(PathBuf::from("/x/q.jsonl")));
        assert_eq!(e.jobs, Some(3));
        assert_eq!(e.arms[0].flags.as_deref(), Some("--no-policy"));
        assert_eq!(e.arms[1].settings.search_limit, Some(2));
        assert_eq!(
            e.arms[1].settings.describe(),
            "--search-limit 2 --max-searches 1"
        );
        let bad = parse("[[arm]]\nname = \"a\"\npolcy = false\n", Path::new("")).unwrap_err();
        assert!(bad.starts_with("arm 'a': unknown field `polcy`"), "{bad}");
        let bad = parse("jbos = 1\n", Path::new("")).unwrap_err();
        assert!(bad.contains("unknown field `jbos`"), "{bad}");
        assert!(!bad.contains('\n'));
    }

    #[test]
    fn overlay_options_and_names() {
        let base = Settings {
            policy: Some(false),
            search_limit: Some(3),
            ..Default::default()
        };
        let s = base.overlay(Settings {
            search_limit: Some(4),
            capabilities: Some(vec!["analysis".into()]),
            ..Default::default()
        });
        assert_eq!(
            s.describe(),
            "--capability analysis --no-policy --search-limit 4"
        );
        let o = s.options().unwrap();
        assert!(!o.policy && o.compaction);
        assert_eq!(o.capabilities, [CapabilityChoice::Analysis]);
        let bad = Settings {
            capabilities: Some(vec!["web".into()]),
            ..Default::default()
        };
        assert!(bad.options().is_err());
        assert!(check_name("policy-1").is_ok());
        assert!(check_name("a b").is_err() && check_name("").is_err());
    }
}
