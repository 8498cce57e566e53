//! Paired comparisons of two arms over the same questions: each question answered in both
//! arms is a pair, so a difference between the arms is judged on the questions where they
//! disagree. Exact McNemar tests on binary outcomes, a sign test on cited chunks, Wilson
//! intervals for each rate; the distributions come from `statrs`.

use serde::Serialize;
use statrs::distribution::{Binomial, ContinuousCDF, DiscreteCDF, Normal};

/// The methods, as the report names them.
pub const METHOD: &str = "pairs are the questions answered (not failed) in both arms; outcomes compared with the exact McNemar test (two-sided binomial test, p = ½, on the discordant pairs); cited chunks per question with the sign test (ties dropped); rates with 95 % Wilson score intervals";

/// Two-sided exact binomial test of `k` successes in `n` trials with p = ½:
/// `min(1, 2 · P(X ≤ min(k, n − k)))`; 1 when `n` is 0.
pub fn exact_two_sided(k: usize, n: usize) -> f64 {
    if n == 0 {
        return 1.0;
    }
    let tail = k.min(n - k) as u64;
    let binomial = Binomial::new(0.5, n as u64).expect("p = ½ and n ≥ 1 are valid");
    (2.0 * binomial.cdf(tail)).min(1.0)
}

/// A rate with its 95 % Wilson score interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rate {
    pub count: usize,
    pub of: usize,
    pub rate: f64,
    pub low: f64,
    pub high: f64,
}

impl Rate {
    pub fn wilson(count: usize, of: usize) -> Rate {
        if of == 0 {
            return Rate {
                count,
                of,
                rate: 0.0,
                low: 0.0,
                high: 1.0,
            };
        }
        let z = Normal::standard().inverse_cdf(0.975);
        let (n, p) = (of as f64, count as f64 / of as f64);
        let z2 = z * z;
        let denom = 1.0 + z2 / n;
        let centre = (p + z2 / (2.0 * n)) / denom;
        let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
        Rate {
            count,
            of,
            rate: p,
            low: (centre - half).max(0.0),
            high: (centre + half).min(1.0),
        }
    }
}

/// A binary outcome over the pairs: how often each arm alone had it, the exact McNemar
/// p-value, and the questions where the arms disagree (with the arm that had it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub pairs: usize,
    pub first: Rate,
    pub second: Rate,
    /// Pairs where only the first arm had the outcome, and only the second.
    pub first_only: usize,
    pub second_only: usize,
    pub p_value: f64,
    /// (question id, the arm that had the outcome).
    pub discordant: Vec<(String, String)>,
}

impl Outcome {
    /// The outcome over `pairs` of (question id, first arm had it, second arm had it).
    pub fn of(names: (&str, &str), pairs: &[(String, bool, bool)]) -> Outcome {
        let n = pairs.len();
        let first = pairs.iter().filter(|p| p.1).count();
        let second = pairs.iter().filter(|p| p.2).count();
        let mut discordant = Vec::new();
        let (mut first_only, mut second_only) = (0, 0);
        for (id, a, b) in pairs {
            match (a, b) {
                (true, false) => {
                    first_only += 1;
                    discordant.push((id.clone(), names.0.to_string()));
                }
                (false, true) => {
                    second_only += 1;
                    discordant.push((id.clone(), names.1.to_string()));
                }
                _ => {}
            }
        }
        Outcome {
            pairs: n,
            first: Rate::wilson(first, n),
            second: Rate::wilson(second, n),
            first_only,
            second_only,
            p_value: exact_two_sided(first_only, first_only + second_only),
            discordant,
        }
    }
}

/// The sign test on a count per question (cited chunks): pairs where the first arm's is
/// higher, lower, equal; ties dropped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SignTest {
    pub first_more: usize,
    pub second_more: usize,
    pub ties: usize,
    pub p_value: f64,
}

impl SignTest {
    pub fn of(pairs: &[(usize, usize)]) -> SignTest {
        let first_more = pairs.iter().filter(|(a, b)| a > b).count();
        let second_more = pairs.iter().filter(|(a, b)| a < b).count();
        SignTest {
            first_more,
            second_more,
            ties: pairs.len() - first_more - second_more,
            p_value: exact_two_sided(first_more, first_more + second_more),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-4
    }

    #[test]
    fn exact_mcnemar_against_known_tables() {
        // 1 against 9 discordant: 2 · (1 + 10) / 1024.
        assert!(close(exact_two_sided(1, 10), 22.0 / 1024.0));
        assert!(close(exact_two_sided(9, 10), 22.0 / 1024.0));
        // 0 against 6: 2 / 64.
        assert!(close(exact_two_sided(0, 6), 0.03125));
        // Balanced, or nothing discordant: no evidence at all.
        assert_eq!(exact_two_sided(5, 10), 1.0);
        assert_eq!(exact_two_sided(0, 0), 1.0);
        // 2 against 0 of 37 questions: p = 0.5, nothing to conclude.
        assert!(close(exact_two_sided(2, 2), 0.5));
    }

    #[test]
    fn wilson_intervals_against_known_values() {
        // 8 of 10: [0.4902, 0.9433]; 0 of 10: [0, 0.2775]; 10 of 10: [0.7225, 1].
        let r = Rate::wilson(8, 10);
        assert!(close(r.low, 0.4902) && close(r.high, 0.9433), "{r:?}");
        let r = Rate::wilson(0, 10);
        assert!(close(r.low, 0.0) && close(r.high, 0.2775), "{r:?}");
        let r = Rate::wilson(10, 10);
        assert!(close(r.low, 0.7225) && close(r.high, 1.0), "{r:?}");
        assert_eq!(Rate::wilson(0, 0).high, 1.0);
    }

    #[test]
    fn outcomes_and_sign_tests_count_the_pairs() {
        let pairs = vec![
            ("a1".to_string(), true, true),
            ("u1".to_string(), true, false),
            ("u2".to_string(), false, true),
            ("u3".to_string(), false, true),
        ];
        let o = Outcome::of(("base", "policy"), &pairs);
        assert_eq!((o.pairs, o.first_only, o.second_only), (4, 1, 2));
        assert_eq!(o.first.count, 2);
        assert!(close(o.p_value, 1.0));
        assert_eq!(
            o.discordant,
            vec![
                ("u1".to_string(), "base".to_string()),
                ("u2".to_string(), "policy".to_string()),
                ("u3".to_string(), "policy".to_string())
            ]
        );
        let s = SignTest::of(&[(2, 1), (1, 1), (0, 3), (0, 1), (4, 4)]);
        assert_eq!((s.first_more, s.second_more, s.ties), (1, 2, 2));
        assert!(close(s.p_value, 1.0));
    }
}
