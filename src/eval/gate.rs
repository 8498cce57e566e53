//! `groundwork eval … --gate 'grounded>=0.9,violations==0,unsupported==0'`: conditions
//! every arm's figures must meet, so an experiment can guard a configuration in CI. The
//! outcome rates (`grounded`, `ungrounded`, `missing`, `failed`) are fractions of the
//! arm's questions run (0 to 1); everything else is a count: `violations`, `redirects`,
//! `declarations` (explicit ungrounded declarations), `grounded_unanswerable`,
//! `answerable_grounded`, `claims_not_supported` (the judge's verdicts, with `--verify`),
//! and the review marks `supported`, `unsupported`, `invented`, `wrong`.

use super::report::{ArmReport, Report};

/// One condition: a figure, a comparison and a value.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub figure: String,
    pub op: Op,
    pub value: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Ge,
    Le,
    Gt,
    Lt,
    Eq,
    Ne,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Ge => ">=",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Lt => "<",
            Op::Eq => "==",
            Op::Ne => "!=",
        }
    }

    fn holds(self, a: f64, b: f64) -> bool {
        // Rates are compared as the fractions they print as, so 0.9 of 10 is >= 0.9.
        let eps = 1e-9;
        match self {
            Op::Ge => a >= b - eps,
            Op::Le => a <= b + eps,
            Op::Gt => a > b + eps,
            Op::Lt => a < b - eps,
            Op::Eq => (a - b).abs() <= eps,
            Op::Ne => (a - b).abs() > eps,
        }
    }
}

/// The rates (fractions of the questions run).
const RATES: [&str; 4] = ["grounded", "ungrounded", "missing", "failed"];
/// The counts.
const COUNTS: [&str; 10] = [
    "violations",
    "claims_not_supported",
    "redirects",
    "declarations",
    "grounded_unanswerable",
    "answerable_grounded",
    "supported",
    "unsupported",
    "invented",
    "wrong",
];

/// Reads `grounded>=0.9,violations==0`; a mistake is one line naming it.
pub fn parse(spec: &str) -> Result<Vec<Condition>, String> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let ops = [
            (">=", Op::Ge),
            ("<=", Op::Le),
            ("==", Op::Eq),
            ("!=", Op::Ne),
            (">", Op::Gt),
            ("<", Op::Lt),
        ];
        let Some((i, text, op)) = ops
            .iter()
            .filter_map(|(t, op)| part.find(t).map(|i| (i, *t, *op)))
            .min_by_key(|(i, t, _)| (*i, std::cmp::Reverse(t.len())))
        else {
            return Err(format!(
                "--gate: `{part}` compares nothing; write it as FIGURE>=VALUE (>=, <=, ==, !=, >, <)"
            ));
        };
        let figure = part[..i].trim().to_string();
        let raw = part[i + text.len()..].trim();
        if !RATES.contains(&figure.as_str()) && !COUNTS.contains(&figure.as_str()) {
            return Err(format!(
                "--gate: unknown figure `{figure}` (rates 0 to 1: {}; counts: {})",
                RATES.join(", "),
                COUNTS.join(", ")
            ));
        }
        let value: f64 = raw
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| format!("--gate: `{raw}` in `{part}` is not a number"))?;
        if RATES.contains(&figure.as_str()) && value > 1.0 {
            return Err(format!(
                "--gate: `{figure}` is a rate from 0 to 1 (`{figure}>=0.9`), not {raw}"
            ));
        }
        out.push(Condition { figure, op, value });
    }
    if out.is_empty() {
        return Err("--gate: no condition given (e.g. `grounded>=0.9,violations==0`)".into());
    }
    Ok(out)
}

/// Figure `name` of `arm`.
fn figure(arm: &ArmReport, name: &str) -> f64 {
    let rate = |n: usize| {
        if arm.done == 0 {
            0.0
        } else {
            n as f64 / arm.done as f64
        }
    };
    let c = &arm.counts;
    match name {
        "grounded" => rate(c.grounded),
        "ungrounded" => rate(c.ungrounded),
        "missing" => rate(c.missing),
        "failed" => rate(c.failed),
        "violations" => arm.violations as f64,
        "redirects" => arm.redirects as f64,
        "declarations" => arm.ungrounded_declarations as f64,
        "grounded_unanswerable" => arm.grounded_unanswerable as f64,
        "answerable_grounded" => arm.answerable_grounded as f64,
        "claims_not_supported" => arm.claims.not_supported as f64,
        mark => arm.reviews.get(mark).copied().unwrap_or(0) as f64,
    }
}

/// Every condition an arm falls short of, one line each (`arm 'base': grounded 0.80, wanted
/// >= 0.9`); none when every arm passes.
pub fn check(report: &Report, conditions: &[Condition]) -> Vec<String> {
    let mut failed = Vec::new();
    for arm in &report.arms {
        for c in conditions {
            let got = figure(arm, &c.figure);
            if !c.op.holds(got, c.value) {
                let shown = if RATES.contains(&c.figure.as_str()) {
                    format!("{got:.2}")
                } else {
                    format!("{got}")
                };
                failed.push(format!(
                    "arm '{}': {} {shown}, wanted {} {}",
                    arm.name,
                    c.figure,
                    c.op.as_str(),
                    c.value
                ));
            }
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_read_and_mistakes_are_named() {
        let c = parse("grounded>=0.9, violations==0,unsupported<1").unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(
            (c[0].figure.as_str(), c[0].op, c[0].value),
            ("grounded", Op::Ge, 0.9)
        );
        assert_eq!((c[1].figure.as_str(), c[1].op), ("violations", Op::Eq));
        assert_eq!((c[2].figure.as_str(), c[2].op), ("unsupported", Op::Lt));
        assert!(
            parse("grounded>=high")
                .unwrap_err()
                .contains("`high` in `grounded>=high` is not a number")
        );
        assert!(
            parse("grounded=>0.9")
                .unwrap_err()
                .contains("unknown figure `grounded=`")
        );
        assert!(
            parse("grounded 0.9")
                .unwrap_err()
                .contains("compares nothing")
        );
        assert!(
            parse("grounding>=0.9")
                .unwrap_err()
                .contains("unknown figure `grounding`")
        );
        assert!(
            parse("grounded>=90")
                .unwrap_err()
                .contains("a rate from 0 to 1")
        );
        assert!(parse(" , ").unwrap_err().contains("no condition"));
    }

    #[test]
    fn an_arm_that_falls_short_is_named_with_the_figure() {
        let arm = |name: &str, grounded: usize, violations: usize| ArmReport {
            name: name.into(),
            done: 10,
            counts: super::super::report::Counts {
                grounded,
                ungrounded: 10 - grounded,
                ..Default::default()
            },
            violations,
            ..Default::default()
        };
        let report = Report {
            arms: vec![arm("base", 9, 0), arm("no-policy", 8, 2)],
            ..Default::default()
        };
        let gate = parse("grounded>=0.9,violations==0").unwrap();
        assert_eq!(
            check(&report, &gate),
            [
                "arm 'no-policy': grounded 0.80, wanted >= 0.9",
                "arm 'no-policy': violations 2, wanted == 0"
            ]
        );
        assert!(check(&report, &parse("grounded>=0.8").unwrap()).is_empty());
    }
}
