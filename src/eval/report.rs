//! The report: the arms side by side, from the results of the question set (the last
//! result of each pair) and the reviewer's marks. `report.json` is [`Report`] as JSON;
//! `report.md` the same figures as Markdown tables.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::paired::{Outcome, SignTest};
use super::questions::Entry;
use super::results::{MARKS, ResultRecord, Review};
use crate::session::verdicts::{Verdict, VerdictCounts};

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
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
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
    /// The judge's verdicts on the cited sentences (`--verify`), over the questions
    /// whose claims were checked.
    pub claims: VerdictCounts,
    /// Questions whose claims were checked.
    pub claims_checked: usize,
    /// Questions with at least one claim the judge found not supported.
    pub questions_not_supported: usize,
    /// Questions whose claims could not be checked (the judge failed).
    pub claims_unchecked: usize,
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

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Report {
    /// Questions in the set.
    pub questions: usize,
    pub arms: Vec<ArmReport>,
    pub differing: Vec<Difference>,
    /// Reviewed answers in all (`reviews.jsonl`).
    pub reviewed: usize,
    /// Every pair of arms compared question by question.
    pub pairs: Vec<PairReport>,
}

/// Two arms compared over the questions both answered ([`super::paired::METHOD`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairReport {
    pub first: String,
    pub second: String,
    pub method: &'static str,
    /// Grounded or not, over every pair.
    pub grounded: Outcome,
    /// Grounded or not, over the pairs labelled `answerable`.
    pub answerable_grounded: Outcome,
    /// Chunks cited per question.
    pub cited: SignTest,
    /// Marked `supported` or not, over the pairs a reviewer marked in both arms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supported: Option<Outcome>,
    /// No claim the judge found not supported, or some, over the pairs whose claims were
    /// checked in both arms (`--verify`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claims_supported: Option<Outcome>,
}

/// The paired comparisons of every two arms.
fn pairs(
    entries: &[Entry],
    arms: &[(String, String)],
    results: &HashMap<(String, String), ResultRecord>,
    reviews: &HashMap<(String, String), Review>,
) -> Vec<PairReport> {
    let mut out = Vec::new();
    for (i, (first, _)) in arms.iter().enumerate() {
        for (second, _) in &arms[i + 1..] {
            let both: Vec<(&Entry, &ResultRecord, &ResultRecord)> = entries
                .iter()
                .filter_map(|e| {
                    let a = results.get(&(first.clone(), e.id.clone()))?;
                    let b = results.get(&(second.clone(), e.id.clone()))?;
                    (!a.failed() && !b.failed()).then_some((e, a, b))
                })
                .collect();
            let names = (first.as_str(), second.as_str());
            let grounded = |r: &ResultRecord| r.status == "grounded";
            let outcome = |keep: &dyn Fn(&Entry) -> bool| {
                let pairs: Vec<(String, bool, bool)> = both
                    .iter()
                    .filter(|(e, ..)| keep(e))
                    .map(|(e, a, b)| (e.id.clone(), grounded(a), grounded(b)))
                    .collect();
                Outcome::of(names, &pairs)
            };
            let supported: Vec<(String, bool, bool)> = both
                .iter()
                .filter_map(|(e, ..)| {
                    let a = reviews.get(&(first.clone(), e.id.clone()))?;
                    let b = reviews.get(&(second.clone(), e.id.clone()))?;
                    Some((e.id.clone(), a.mark == "supported", b.mark == "supported"))
                })
                .collect();
            let all_supported =
                |r: &ResultRecord| r.claims.map(|c| c.get(Verdict::NotSupported) == 0);
            let claims_supported: Vec<(String, bool, bool)> = both
                .iter()
                .filter_map(|(e, a, b)| Some((e.id.clone(), all_supported(a)?, all_supported(b)?)))
                .collect();
            out.push(PairReport {
                first: first.clone(),
                second: second.clone(),
                method: super::paired::METHOD,
                grounded: outcome(&|_| true),
                answerable_grounded: outcome(&|e| e.label.as_deref() == Some("answerable")),
                cited: SignTest::of(
                    &both
                        .iter()
                        .map(|(_, a, b)| (a.cited.len(), b.cited.len()))
                        .collect::<Vec<_>>(),
                ),
                supported: (!supported.is_empty()).then(|| Outcome::of(names, &supported)),
                claims_supported: (!claims_supported.is_empty())
                    .then(|| Outcome::of(names, &claims_supported)),
            });
        }
    }
    out
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
                claims: VerdictCounts::default(),
                claims_checked: 0,
                questions_not_supported: 0,
                claims_unchecked: 0,
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
                if let Some(c) = &r.claims {
                    a.claims.merge(c);
                    a.claims_checked += 1;
                    a.questions_not_supported += usize::from(c.get(Verdict::NotSupported) > 0);
                }
                a.claims_unchecked += usize::from(r.claims_error.is_some());
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
        pairs: pairs(entries, arms, results, reviews),
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
    if r.arms
        .iter()
        .any(|a| a.claims_checked + a.claims_unchecked > 0)
    {
        out.push_str("\nClaims checked by the judge (`--verify`): each cited sentence against the passages it cites.\n\n");
        header(&mut out, "");
        row(&mut out, "questions checked", &|a| {
            format!("{} ({} claims)", a.claims_checked, a.claims.total())
        });
        row(&mut out, "citations not supported", &|a| {
            format!(
                "{} of {} claims, in {} question{}",
                a.claims.not_supported,
                a.claims.total(),
                a.questions_not_supported,
                if a.questions_not_supported == 1 {
                    ""
                } else {
                    "s"
                }
            )
        });
        row(&mut out, "partly supported", &|a| {
            a.claims.partly_supported.to_string()
        });
        row(&mut out, "supported", &|a| a.claims.supported.to_string());
        row(&mut out, "unclear", &|a| a.claims.unclear.to_string());
        row(&mut out, "not checked (the judge failed)", &|a| {
            a.claims_unchecked.to_string()
        });
    }
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
    if !r.pairs.is_empty() {
        out.push_str(&format!(
            "\n## Paired comparisons\n\nMethod: {}.\n\n",
            super::paired::METHOD
        ));
        out.push_str("| arms | outcome | pairs | first | second | only first / only second | p |\n|---|---|---|---|---|---|---|\n");
        let rate = |r: &super::paired::Rate| {
            format!(
                "{}/{} ({:.0} %, {:.0}–{:.0} %)",
                r.count,
                r.of,
                r.rate * 100.0,
                r.low * 100.0,
                r.high * 100.0
            )
        };
        for p in &r.pairs {
            let arms = format!("{} vs {}", cell(&p.first), cell(&p.second));
            let mut outcomes = vec![
                ("grounded", &p.grounded),
                ("answerable grounded", &p.answerable_grounded),
            ];
            if let Some(s) = &p.supported {
                outcomes.push(("marked supported", s));
            }
            if let Some(s) = &p.claims_supported {
                outcomes.push(("no claim not supported (judge)", s));
            }
            for (name, o) in outcomes {
                out.push_str(&format!(
                    "| {arms} | {name} | {} | {} | {} | {} / {} | {:.3} |\n",
                    o.pairs,
                    rate(&o.first),
                    rate(&o.second),
                    o.first_only,
                    o.second_only,
                    o.p_value
                ));
            }
            out.push_str(&format!(
                "| {arms} | more chunks cited (sign test) | {} | {} | {} | ties {} | {:.3} |\n",
                p.cited.first_more + p.cited.second_more + p.cited.ties,
                p.cited.first_more,
                p.cited.second_more,
                p.cited.ties,
                p.cited.p_value
            ));
        }
        for p in &r.pairs {
            if p.grounded.discordant.is_empty() {
                continue;
            }
            let list: Vec<String> = p
                .grounded
                .discordant
                .iter()
                .map(|(id, arm)| format!("{} (grounded in {})", cell(id), cell(arm)))
                .collect();
            out.push_str(&format!(
                "\nDiscordant questions, {} vs {}: {}.\n",
                cell(&p.first),
                cell(&p.second),
                list.join(", ")
            ));
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

#[cfg(test)]
mod paired_tests {
    use super::*;
    use crate::eval::results::tests::record;

    #[test]
    fn two_arms_are_compared_pair_by_pair() {
        let label = |i: usize| if i < 6 { "answerable" } else { "unanswerable" };
        let entries: Vec<Entry> = (0..10)
            .map(|i| Entry {
                id: format!("q{i}"),
                label: Some(label(i).into()),
                expect: None,
                turns: vec![format!("q{i}?")],
            })
            .collect();
        let arms = vec![
            ("base".to_string(), "--no-policy".to_string()),
            ("policy".to_string(), String::new()),
        ];
        let mut results = HashMap::new();
        for i in 0..10 {
            let id = format!("q{i}");
            // base: grounded on q0..q2; policy: grounded on q0..q7; q9 failed in base.
            let mut a = record("base", &id, if i < 3 { "grounded" } else { "missing" });
            if i == 9 {
                a = record("base", &id, "failed");
            }
            let mut b = record("policy", &id, if i < 8 { "grounded" } else { "ungrounded" });
            b.cited = vec!["c".into(); if i < 8 { 2 } else { 0 }];
            a.cited = vec!["c".into(); if i < 3 { 1 } else { 0 }];
            results.insert(("base".into(), id.clone()), a);
            results.insert(("policy".into(), id), b);
        }
        let mut reviews = HashMap::new();
        for (arm, mark) in [("base", "invented"), ("policy", "supported")] {
            reviews.insert(
                (arm.to_string(), "q5".to_string()),
                Review {
                    arm: arm.into(),
                    id: "q5".into(),
                    mark: mark.into(),
                    note: None,
                },
            );
        }
        let r = build(&entries, &arms, &results, &reviews);
        assert_eq!(r.pairs.len(), 1);
        let p = &r.pairs[0];
        // q9 failed in base: 9 pairs; policy alone grounded q3..q7.
        assert_eq!(p.grounded.pairs, 9);
        assert_eq!((p.grounded.first_only, p.grounded.second_only), (0, 5));
        assert!(
            (p.grounded.p_value - 0.0625).abs() < 1e-9,
            "{}",
            p.grounded.p_value
        );
        assert_eq!(p.grounded.first.count, 3);
        assert_eq!(p.grounded.second.count, 8);
        assert_eq!(p.answerable_grounded.pairs, 6);
        assert_eq!(p.answerable_grounded.second_only, 3);
        assert_eq!(
            (p.cited.first_more, p.cited.second_more, p.cited.ties),
            (0, 8, 1)
        );
        assert!((p.cited.p_value - 2.0 / 256.0).abs() < 1e-9);
        let s = p.supported.as_ref().unwrap();
        assert_eq!((s.pairs, s.second_only), (1, 1));
        let md = to_markdown(&r);
        assert!(md.contains("## Paired comparisons"), "{md}");
        assert!(
            md.contains("| base vs policy | grounded | 9 | 3/9 (33 %, 12–65 %) | 8/9 (89 %, 57–98 %) | 0 / 5 | 0.062 |"),
            "{md}"
        );
        assert!(
            md.contains("Discordant questions, base vs policy: q3 (grounded in policy), q4 (grounded in policy)"),
            "{md}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["pairs"][0]["grounded"]["second_only"], 5);
    }
}
