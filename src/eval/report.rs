//! The report: the arms side by side, from the results of the question set (the last
//! result of each pair) and the reviewer's marks. `report.json` is [`Report`] as JSON;
//! `report.md` the same figures as Markdown tables.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::questions::Entry;
use super::results::{MARKS, ResultRecord, Review};

/// Counts of outcomes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub grounded: usize,
    pub ungrounded: usize,
    pub missing: usize,
    pub failed: usize,
}

impl Counts {
    fn add(&mut self, status: &str) {
        match status {
            "grounded" => self.grounded += 1,
            "ungrounded" => self.ungrounded += 1,
            "missing" => self.missing += 1,
            _ => self.failed += 1,
        }
    }
}

/// Mean, median and 95th percentile (nearest rank).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stats {
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
}

impl Stats {
    pub fn of(values: &[f64]) -> Stats {
        if values.is_empty() {
            return Stats::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let rank = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Stats {
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: rank(0.5),
            p95: rank(0.95),
        }
    }
}

/// One arm's column.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmReport {
    pub name: String,
    /// Its settings as `ask` flags.
    pub flags: String,
    /// Questions of the set with a result.
    pub done: usize,
    pub counts: Counts,
    /// Per label (`unlabelled` for questions without one).
    pub by_label: BTreeMap<String, Counts>,
    /// Questions labelled `unanswerable` that got a grounded answer.
    pub grounded_unanswerable: usize,
    /// Answers that declared themselves ungrounded (an empty citation).
    pub ungrounded_declarations: usize,
    /// Questions labelled `answerable` answered grounded.
    pub answerable_grounded: usize,
    pub redirects: usize,
    pub violations: usize,
    /// Over the questions that did not fail.
    pub requests: Stats,
    pub raw_tokens: Stats,
    pub sent_tokens: Stats,
    pub provider_input_tokens: Stats,
    pub provider_output_tokens: Stats,
    pub latency_ms: Stats,
    /// Reviewer marks of this arm's answers, per mark (all marks listed).
    pub reviews: BTreeMap<String, usize>,
}

/// A question whose outcome differs between arms.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    pub id: String,
    pub label: Option<String>,
    pub question: String,
    /// Arm name → status, for each arm with a result.
    pub outcomes: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Questions in the set.
    pub questions: usize,
    pub arms: Vec<ArmReport>,
    pub differing: Vec<Difference>,
    /// Reviewed answers in all (`reviews.jsonl`).
    pub reviewed: usize,
}

/// The report of `entries` × `arms` (name, flags) over the latest results and reviews.
pub fn build(
    entries: &[Entry],
    arms: &[(String, String)],
    results: &HashMap<(String, String), ResultRecord>,
    reviews: &HashMap<(String, String), Review>,
) -> Report {
    let mut reviewed = 0;
    let arm_reports = arms
        .iter()
        .map(|(name, flags)| {
            let mut a = ArmReport {
                name: name.clone(),
                flags: flags.clone(),
                done: 0,
                counts: Counts::default(),
                by_label: BTreeMap::new(),
                grounded_unanswerable: 0,
                ungrounded_declarations: 0,
                answerable_grounded: 0,
                redirects: 0,
                violations: 0,
                requests: Stats::default(),
                raw_tokens: Stats::default(),
                sent_tokens: Stats::default(),
                provider_input_tokens: Stats::default(),
                provider_output_tokens: Stats::default(),
                latency_ms: Stats::default(),
                reviews: MARKS.iter().map(|m| (m.to_string(), 0)).collect(),
            };
            let mut figures: [Vec<f64>; 6] = Default::default();
            for e in entries {
                let key = (name.clone(), e.id.clone());
                let Some(r) = results.get(&key) else {
                    continue;
                };
                a.done += 1;
                a.counts.add(&r.status);
                let label = e.label.clone().unwrap_or_else(|| "unlabelled".into());
                a.by_label.entry(label.clone()).or_default().add(&r.status);
                let grounded = r.status == "grounded";
                a.grounded_unanswerable += usize::from(grounded && label == "unanswerable");
                a.answerable_grounded += usize::from(grounded && label == "answerable");
                a.ungrounded_declarations += usize::from(r.status == "ungrounded");
                a.redirects += usize::from(r.redirected);
                a.violations += usize::from(r.violation);
                if !r.failed() {
                    let values = [
                        r.requests as f64,
                        r.raw_tokens as f64,
                        r.sent_tokens as f64,
                        r.usage.input_tokens as f64,
                        r.usage.output_tokens as f64,
                        r.latency_ms as f64,
                    ];
                    for (f, v) in figures.iter_mut().zip(values) {
                        f.push(v);
                    }
                }
                if let Some(review) = reviews.get(&key) {
                    *a.reviews.entry(review.mark.clone()).or_default() += 1;
                    reviewed += 1;
                }
            }
            let [req, raw, sent, input, output, latency] = figures.map(|f| Stats::of(&f));
            a.requests = req;
            a.raw_tokens = raw;
            a.sent_tokens = sent;
            a.provider_input_tokens = input;
            a.provider_output_tokens = output;
            a.latency_ms = latency;
            a
        })
        .collect();
    let differing = entries
        .iter()
        .filter_map(|e| {
            let outcomes: BTreeMap<String, String> = arms
                .iter()
                .filter_map(|(name, _)| {
                    results
                        .get(&(name.clone(), e.id.clone()))
                        .map(|r| (name.clone(), r.status.clone()))
                })
                .collect();
            let mut statuses: Vec<&String> = outcomes.values().collect();
            statuses.dedup();
            (statuses.len() > 1).then(|| Difference {
                id: e.id.clone(),
                label: e.label.clone(),
                question: e.question().to_string(),
                outcomes,
            })
        })
        .collect();
    Report {
        questions: entries.len(),
        arms: arm_reports,
        differing,
        reviewed,
    }
}

/// Writes `report.json` and `report.md` into `out` (atomically); returns the Markdown.
pub fn write(out: &std::path::Path, report: &Report) -> Result<String, super::EvalError> {
    let err = |e: String| super::EvalError(e);
    let markdown = to_markdown(report);
    let json = serde_json::to_string_pretty(report).map_err(|e| err(e.to_string()))?;
    for (name, text) in [("report.json", json.as_str()), ("report.md", &markdown)] {
        let path = out.join(name);
        crate::session::write_atomic(&path, text.as_bytes())
            .map_err(|e| err(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(markdown)
}

/// Markdown-safe table cell text on one line.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn stats(s: &Stats) -> String {
    format!("{:.1} / {} / {}", s.mean, s.p50, s.p95)
}

/// The report as Markdown.
pub fn to_markdown(r: &Report) -> String {
    let mut out = String::from("# Experiment report\n\n");
    out.push_str(&format!(
        "{} questions, {} arms.\n\n",
        r.questions,
        r.arms.len()
    ));
    let header = |out: &mut String, first: &str| {
        out.push_str(&format!("| {first} |"));
        for a in &r.arms {
            out.push_str(&format!(" {} |", cell(&a.name)));
        }
        out.push_str("\n|---|");
        for _ in &r.arms {
            out.push_str("---|");
        }
        out.push('\n');
    };
    let row = |out: &mut String, name: &str, f: &dyn Fn(&ArmReport) -> String| {
        out.push_str(&format!("| {name} |"));
        for a in &r.arms {
            out.push_str(&format!(" {} |", cell(&f(a))));
        }
        out.push('\n');
    };
    header(&mut out, "");
    row(&mut out, "flags", &|a| {
        if a.flags.is_empty() {
            "(ask's defaults)".to_string()
        } else {
            format!("`{}`", a.flags)
        }
    });
    row(&mut out, "done", &|a| {
        format!("{} of {}", a.done, r.questions)
    });
    row(&mut out, "grounded", &|a| a.counts.grounded.to_string());
    row(&mut out, "ungrounded", &|a| a.counts.ungrounded.to_string());
    row(&mut out, "missing", &|a| a.counts.missing.to_string());
    row(&mut out, "failed", &|a| a.counts.failed.to_string());
    let mut labels: Vec<&String> = r.arms.iter().flat_map(|a| a.by_label.keys()).collect();
    labels.sort();
    labels.dedup();
    for l in labels {
        row(
            &mut out,
            &format!("{l}: grounded / ungrounded / missing / failed"),
            &|a| {
                let c = a.by_label.get(l).cloned().unwrap_or_default();
                format!(
                    "{} / {} / {} / {}",
                    c.grounded, c.ungrounded, c.missing, c.failed
                )
            },
        );
    }
    row(&mut out, "grounded answers to unanswerable", &|a| {
        a.grounded_unanswerable.to_string()
    });
    row(&mut out, "explicit ungrounded declarations", &|a| {
        a.ungrounded_declarations.to_string()
    });
    row(&mut out, "answerable grounded", &|a| {
        a.answerable_grounded.to_string()
    });
    row(&mut out, "redirects", &|a| a.redirects.to_string());
    row(&mut out, "violations", &|a| a.violations.to_string());
    out.push_str("\nPer question, mean / p50 / p95:\n\n");
    header(&mut out, "");
    row(&mut out, "requests", &|a| stats(&a.requests));
    row(&mut out, "raw tokens", &|a| stats(&a.raw_tokens));
    row(&mut out, "sent tokens", &|a| stats(&a.sent_tokens));
    row(&mut out, "provider input tokens", &|a| {
        stats(&a.provider_input_tokens)
    });
    row(&mut out, "provider output tokens", &|a| {
        stats(&a.provider_output_tokens)
    });
    row(&mut out, "latency ms", &|a| stats(&a.latency_ms));
    if r.reviewed > 0 {
        out.push_str(&format!("\nReviews ({} answers marked):\n\n", r.reviewed));
        header(&mut out, "mark");
        for m in MARKS {
            row(&mut out, m, &|a| {
                a.reviews.get(m).copied().unwrap_or(0).to_string()
            });
        }
    }
    out.push_str(&format!(
        "\n## Outcomes that differ between arms ({})\n\n",
        r.differing.len()
    ));
    if !r.differing.is_empty() {
        out.push_str("| id | label | question |");
        for a in &r.arms {
            out.push_str(&format!(" {} |", cell(&a.name)));
        }
        out.push_str("\n|---|---|---|");
        for _ in &r.arms {
            out.push_str("---|");
        }
        out.push('\n');
        for d in &r.differing {
            out.push_str(&format!(
                "| {} | {} | {} |",
                cell(&d.id),
                cell(d.label.as_deref().unwrap_or("")),
                cell(&d.question)
            ));
            for a in &r.arms {
                out.push_str(&format!(
                    " {} |",
                    d.outcomes.get(&a.name).map_or("", String::as_str)
                ));
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::results::tests::record;

    fn entry(id: &str, label: &str) -> Entry {
        Entry {
            id: id.into(),
            label: Some(label.into()),
            expect: None,
            turns: vec![format!("{id}?")],
        }
    }

    #[test]
    fn arms_side_by_side_with_differences_and_reviews() {
        let entries = vec![entry("q1", "answerable"), entry("q2", "unanswerable")];
        let arms = vec![
            ("base".to_string(), "--no-policy".to_string()),
            ("policy".into(), String::new()),
        ];
        let mut results = HashMap::new();
        for (arm, id, status) in [
            ("base", "q1", "grounded"),
            ("base", "q2", "grounded"),
            ("policy", "q1", "grounded"),
            ("policy", "q2", "ungrounded"),
        ] {
            let mut r = record(arm, id, status);
            r.redirected = arm == "policy" && id == "q2";
            r.requests = if r.redirected { 2 } else { 1 };
            results.insert((arm.to_string(), id.to_string()), r);
        }
        let mut reviews = HashMap::new();
        reviews.insert(
            ("base".to_string(), "q2".to_string()),
            Review {
                arm: "base".into(),
                id: "q2".into(),
                mark: "invented".into(),
                note: None,
            },
        );
        let r = build(&entries, &arms, &results, &reviews);
        let (base, policy) = (&r.arms[0], &r.arms[1]);
        assert_eq!(
            (base.grounded_unanswerable, policy.grounded_unanswerable),
            (1, 0)
        );
        assert_eq!(
            (base.ungrounded_declarations, policy.ungrounded_declarations),
            (0, 1)
        );
        assert_eq!((base.answerable_grounded, policy.redirects), (1, 1));
        assert_eq!(
            policy.requests,
            Stats {
                mean: 1.5,
                p50: 1.0,
                p95: 2.0
            }
        );
        assert_eq!(base.reviews["invented"], 1);
        assert_eq!(r.differing.len(), 1);
        assert_eq!(r.differing[0].outcomes["policy"], "ungrounded");
        let md = to_markdown(&r);
        assert!(
            md.contains("| grounded answers to unanswerable | 1 | 0 |"),
            "{md}"
        );
        assert!(
            md.contains("| q2 | unanswerable | q2? | grounded | ungrounded |"),
            "{md}"
        );
        assert!(md.contains("| invented | 1 | 0 |"), "{md}");
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(
            Stats::of(&v),
            Stats {
                mean: 10.5,
                p50: 10.0,
                p95: 19.0
            }
        );
        assert_eq!(Stats::of(&[]), Stats::default());
    }
}
