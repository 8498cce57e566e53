//! What an arm changes ([`ArmSettings`]: capabilities, compaction, policy, model and
//! endpoint, the search limit and budgets), and the TOML experiment file a user keeps in
//! version control: `questions`, `out`, `jobs` and one `[[arm]]` table per arm, each with
//! a `name` and `flags` (`ask`'s flags, parsed by the face) and/or the typed fields.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::ModelOverrides;
use crate::host::ask::{AskOptions, CapabilityChoice, ConfigOverrides};

/// What one arm sets; `None` leaves the default (`ask`'s, the configuration's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArmSettings {
    /// `rag`, `analysis` (empty: rag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eager: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_url: Option<String>,
    /// The model's idle timeout in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_limit: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_searches: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_executions: Option<usize>,
}

impl ArmSettings {
    /// These settings with every field `over` sets taking its place.
    pub fn overlay(self, over: ArmSettings) -> ArmSettings {
        ArmSettings {
            capabilities: over.capabilities.or(self.capabilities),
            eager: over.eager.or(self.eager),
            compaction: over.compaction.or(self.compaction),
            policy: over.policy.or(self.policy),
            model: over.model.or(self.model),
            model_url: over.model_url.or(self.model_url),
            timeout: over.timeout.or(self.timeout),
            max_tokens: over.max_tokens.or(self.max_tokens),
            search_limit: over.search_limit.or(self.search_limit),
            max_searches: over.max_searches.or(self.max_searches),
            max_executions: over.max_executions.or(self.max_executions),
        }
    }

    /// The capabilities, checked.
    pub fn capability_choices(&self) -> Result<Vec<CapabilityChoice>, String> {
        self.capabilities
            .iter()
            .flatten()
            .map(|c| c.parse())
            .collect()
    }

    /// How the arm's agents are composed.
    pub fn options(&self) -> Result<AskOptions, String> {
        let d = AskOptions::default();
        Ok(AskOptions {
            capabilities: self.capability_choices()?,
            eager: self.eager.unwrap_or(d.eager),
            compaction: self.compaction.unwrap_or(d.compaction),
            policy: self.policy.unwrap_or(d.policy),
            sandbox_worker: None,
        })
    }

    /// The configuration the arm overrides.
    pub fn config_overrides(&self) -> ConfigOverrides {
        ConfigOverrides {
            search_limit: self.search_limit,
            max_searches: self.max_searches,
            max_executions: self.max_executions,
        }
    }

    /// The model settings the arm overrides, over `base` (the command line's).
    pub fn model_overrides(&self, base: &ModelOverrides) -> ModelOverrides {
        let mut m = base.clone();
        if self.model_url.is_some() {
            m.base_url = self.model_url.clone();
        }
        if self.model.is_some() {
            m.model = self.model.clone();
        }
        if self.timeout.is_some() {
            m.timeout_secs = self.timeout;
        }
        if self.max_tokens.is_some() {
            m.max_tokens = self.max_tokens;
        }
        m
    }

    /// The settings as `ask` flags, in a fixed order (the report shows them; a rerun
    /// compares them).
    pub fn describe(&self) -> String {
        let mut f: Vec<String> = Vec::new();
        for c in self.capabilities.iter().flatten() {
            f.push(format!("--capability {c}"));
        }
        if self.eager == Some(true) {
            f.push("--eager".into());
        }
        if self.compaction == Some(false) {
            f.push("--no-compaction".into());
        }
        if self.policy == Some(false) {
            f.push("--no-policy".into());
        }
        let mut value = |name: &str, v: Option<String>| {
            if let Some(v) = v {
                f.push(format!("--{name} {v}"));
            }
        };
        value("model", self.model.clone());
        value("model-url", self.model_url.clone());
        value("timeout", self.timeout.map(|v| v.to_string()));
        value("max-tokens", self.max_tokens.map(|v| v.to_string()));
        value("search-limit", self.search_limit.map(|v| v.to_string()));
        value("max-searches", self.max_searches.map(|v| v.to_string()));
        value("max-executions", self.max_executions.map(|v| v.to_string()));
        f.join(" ")
    }
}

/// An arm as written: its name, its `ask` flags (still a string) and typed settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ArmEntry {
    pub name: String,
    pub flags: Option<String>,
    pub settings: ArmSettings,
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
        let settings = ArmSettings::deserialize(toml::Value::Table(t))
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
        let base = ArmSettings {
            policy: Some(false),
            search_limit: Some(3),
            ..Default::default()
        };
        let s = base.overlay(ArmSettings {
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
        let bad = ArmSettings {
            capabilities: Some(vec!["web".into()]),
            ..Default::default()
        };
        assert!(bad.options().is_err());
        assert!(check_name("policy-1").is_ok());
        assert!(check_name("a b").is_err() && check_name("").is_err());
    }
}
