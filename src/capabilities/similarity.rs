//! Chunk-id repair similarity (SPEC §6 step 3).
//!
//! [`ratio`] reproduces Python's `difflib.SequenceMatcher(None, a, b).ratio()` exactly,
//! including the "autojunk" heuristic, and [`closest`] reproduces
//! `difflib.get_close_matches(word, possibilities, n=1, cutoff=0.75)`. Both work on
//! Unicode code points, as Python strings do.

use std::collections::HashMap;

/// The similarity a repaired chunk id must reach (SPEC §6 step 3).
pub const REPAIR_CUTOFF: f64 = 0.75;

/// `difflib.SequenceMatcher(None, a, b).ratio()`: `2 * matches / (len(a) + len(b))`,
/// `1.0` when both are empty.
pub fn ratio(a: &str, b: &str) -> f64 {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let length = a.len() + b.len();
    if length == 0 {
        return 1.0;
    }
    let matcher = Matcher::new(&a, &b);
    2.0 * matcher.matches() as f64 / length as f64
}

/// `difflib.get_close_matches(word, known, n=1, cutoff=0.75)`: the known id most
/// similar to `word`, if any reaches [`REPAIR_CUTOFF`].
pub fn closest(word: &str, known: &[String]) -> Option<String> {
    closest_with_cutoff(word, known, REPAIR_CUTOFF)
}

/// [`closest`] with an explicit cutoff.
///
/// As in Python, the candidate is the matcher's first sequence and `word` its second
/// (the ratio is not symmetric: autojunk and tie-breaking look at the second), and
/// the winner is the largest `(score, candidate)` tuple: the highest score, ties
/// going to the greatest string in code-point order (`heapq.nlargest(1, ...)` is
/// `max(...)` over those tuples).
pub fn closest_with_cutoff(word: &str, known: &[String], cutoff: f64) -> Option<String> {
    let mut best: Option<(f64, &String)> = None;
    for candidate in known {
        let score = ratio(candidate, word);
        if score < cutoff {
            continue;
        }
        let better = match best {
            None => true,
            Some((best_score, best_candidate)) => {
                score > best_score || (score == best_score && candidate > best_candidate)
            }
        };
        if better {
            best = Some((score, candidate));
        }
    }
    best.map(|(_, candidate)| candidate.clone())
}

/// The parts of `SequenceMatcher` that `ratio()` needs.
struct Matcher<'s> {
    a: &'s [char],
    b: &'s [char],
    /// For each character of `b` that is not "popular": its positions in `b`, ascending.
    b2j: HashMap<char, Vec<usize>>,
}

impl<'s> Matcher<'s> {
    fn new(a: &'s [char], b: &'s [char]) -> Self {
        let mut b2j: HashMap<char, Vec<usize>> = HashMap::new();
        for (j, c) in b.iter().enumerate() {
            b2j.entry(*c).or_default().push(j);
        }
        // autojunk: with 200 or more elements, a character occurring more than
        // `n / 100 + 1` times is "popular" and is not used to start a match. It is
        // not junk, though: matches still extend over it (`bjunk` stays empty).
        let n = b.len();
        if n >= 200 {
            let ntest = n / 100 + 1;
            b2j.retain(|_, positions| positions.len() <= ntest);
        }
        Matcher { a, b, b2j }
    }

    /// `find_longest_match(alo, ahi, blo, bhi)` with no junk: `(i, j, size)`.
    fn find_longest_match(
        &self,
        alo: usize,
        ahi: usize,
        blo: usize,
        bhi: usize,
    ) -> (usize, usize, usize) {
        let (a, b) = (self.a, self.b);
        let (mut besti, mut bestj, mut bestsize) = (alo, blo, 0usize);
        let mut j2len: HashMap<usize, usize> = HashMap::new();
        for (i, c) in a.iter().enumerate().take(ahi).skip(alo) {
            let mut newj2len: HashMap<usize, usize> = HashMap::new();
            if let Some(positions) = self.b2j.get(c) {
                for &j in positions {
                    if j < blo {
                        continue;
                    }
                    if j >= bhi {
                        break;
                    }
                    let previous = if j == 0 {
                        0
                    } else {
                        j2len.get(&(j - 1)).copied().unwrap_or(0)
                    };
                    let k = previous + 1;
                    newj2len.insert(j, k);
                    if k > bestsize {
                        besti = i + 1 - k;
                        bestj = j + 1 - k;
                        bestsize = k;
                    }
                }
            }
            j2len = newj2len;
        }
        // Extend over equal non-junk elements on both sides (popular ones included).
        while besti > alo && bestj > blo && a[besti - 1] == b[bestj - 1] {
            besti -= 1;
            bestj -= 1;
            bestsize += 1;
        }
        while besti + bestsize < ahi
            && bestj + bestsize < bhi
            && a[besti + bestsize] == b[bestj + bestsize]
        {
            bestsize += 1;
        }
        (besti, bestj, bestsize)
    }

    /// Total size of `get_matching_blocks()`.
    fn matches(&self) -> usize {
        let mut total = 0;
        let mut queue = vec![(0, self.a.len(), 0, self.b.len())];
        while let Some((alo, ahi, blo, bhi)) = queue.pop() {
            let (i, j, k) = self.find_longest_match(alo, ahi, blo, bhi);
            if k > 0 {
                total += k;
                if alo < i && blo < j {
                    queue.push((alo, i, blo, j));
                }
                if i + k < ahi && j + k < bhi {
                    queue.push((i + k, ahi, j + k, bhi));
                }
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn fixture() -> Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/difflib/difflib_ratio.json"
        );
        let text = std::fs::read_to_string(path).expect("fixture present");
        serde_json::from_str(&text).expect("fixture is JSON")
    }

    /// Every pair generated by `tests/fixtures/difflib/generate.py` (Python 3.11
    /// difflib) matches to 1e-12, autojunk cases (len(b) >= 200) included.
    #[test]
    fn ratio_matches_python_difflib() {
        let fixture = fixture();
        let pairs = fixture["pairs"].as_array().unwrap();
        assert!(pairs.len() >= 500, "fixture has {} pairs", pairs.len());
        let mut long = 0;
        for pair in pairs {
            let a = pair["a"].as_str().unwrap();
            let b = pair["b"].as_str().unwrap();
            let expected = pair["ratio"].as_f64().unwrap();
            if b.chars().count() >= 200 {
                long += 1;
            }
            let got = ratio(a, b);
            assert!(
                (got - expected).abs() < 1e-12,
                "ratio({a:?}, {b:?}) = {got}, Python says {expected}"
            );
        }
        assert!(long >= 50, "only {long} autojunk cases");
    }

    /// `get_close_matches(n=1, cutoff=0.75)` over the generated cases, including
    /// tie-breaking on equal scores.
    #[test]
    fn closest_matches_python_get_close_matches() {
        let fixture = fixture();
        for case in fixture["closest"].as_array().unwrap() {
            let word = case["word"].as_str().unwrap();
            let known: Vec<String> = case["known"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect();
            let expected = case["result"].as_str().map(str::to_string);
            assert_eq!(
                closest(word, &known),
                expected,
                "word {word:?} in {known:?}"
            );
        }
    }

    /// The autojunk heuristic changes the result: without it a 250-char run of one
    /// character against itself shifted by one would score near 1.0.
    #[test]
    fn autojunk_applies_from_200_elements() {
        let b = "x".repeat(250);
        let a = format!("y{}", "x".repeat(249));
        // Python: SequenceMatcher(None, a, b).ratio() == 0.0 ('x' is popular in b,
        // so no match can start; 'y' is not in b).
        assert_eq!(ratio(&a, &b), 0.0);
        // Below 200 elements nothing is popular.
        let b = "x".repeat(199);
        let a = format!("y{}", "x".repeat(198));
        assert!(ratio(&a, &b) > 0.99);
        // No match can start on a popular character, but the extension loops still
        // grow the empty match at (0, 0) over equal characters (Python: 1.0).
        assert_eq!(ratio(&"x".repeat(250), &"x".repeat(250)), 1.0);
    }

    /// SPEC §6: unrelated UUID4s score about 0.5, a dropped character or a missing
    /// hyphen group stays at or above 0.75.
    #[test]
    fn uuid_repair_thresholds() {
        let a = "3f2b8c1e-9d4a-4c7b-8e21-5a6f0d9c4b12";
        let b = "a7e10d54-26bf-4f93-b0c8-e1d2f3a49876";
        let unrelated = ratio(a, b);
        assert!(unrelated < 0.75, "{unrelated}");
        let dropped = a.replacen('9', "", 1);
        assert!(ratio(a, &dropped) >= 0.75);
        let no_group = "3f2b8c1e-9d4a-8e21-5a6f0d9c4b12";
        assert!(ratio(a, no_group) >= 0.75);
        let known = vec![b.to_string(), a.to_string()];
        assert_eq!(closest(&dropped, &known).as_deref(), Some(a));
        assert_eq!(closest(no_group, &known).as_deref(), Some(a));
        assert_eq!(closest("3f2b", &known), None);
        assert_eq!(closest("anything", &[]), None);
    }

    /// Ties go to the greatest string, as `max((score, x), ...)` does.
    #[test]
    fn ties_prefer_the_greatest_candidate() {
        let known: Vec<String> = ["abce", "abcz", "abcf"].map(String::from).to_vec();
        assert_eq!(closest("abcd", &known).as_deref(), Some("abcz"));
    }

    #[test]
    fn ratio_edge_cases() {
        assert_eq!(ratio("", ""), 1.0);
        assert_eq!(ratio("a", ""), 0.0);
        assert_eq!(ratio("abcd", "abcd"), 1.0);
        assert_eq!(ratio("ab", "ac"), 0.5);
        // Code points, not bytes.
        assert_eq!(ratio("ä", "ä"), 1.0);
        assert_eq!(ratio("äb", "äc"), 0.5);
    }
}
