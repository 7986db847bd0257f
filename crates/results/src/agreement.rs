//! Quality beside speed: how closely a candidate's answers (a precision,
//! a server) agree with a reference's answers to the same prompts, both
//! decoded greedily. Pure functions over [`Answer`]s already read: the
//! engine measures a point's agreement with them, the judge re-exports
//! them as `judge::quality`.
//!
//! The metrics, over the prompts both answered (`docs/metrics.md`,
//! "Quality"):
//!
//! - **exact match**: the share of answers whose text equals the
//!   reference's, with its Wilson interval ([`wilson`]);
//! - **first difference**: the mean position of the first unit where an
//!   answer leaves the reference's (an equal answer counts its length);
//! - **token agreement**: of all positions of the longer of each pair,
//!   the share where both hold the same unit.
//!
//! A unit is the server's token where every answer of both sides carries
//! its tokens (log-probabilities were returned), and otherwise a
//! whitespace-separated word ([`Unit`]).
//!
//! Where both sides returned the most likely alternatives per position
//! (`top_logprobs`), **KL** is the mean Kullback-Leibler divergence of the
//! reference's next-token distribution from the candidate's,
//! `KL(P_ref || P_cand)` in nats, over the positions where both were
//! conditioned on the same text: every position up to and including the
//! first difference. A server gives only its top k, so each distribution
//! is coarsened to the tokens both lists hold plus one cell for the rest
//! of the vocabulary (its mass is one minus theirs). Coarsening never
//! increases KL: the figure is a lower bound of the divergence over the
//! whole vocabulary, close to it when the lists hold most of the mass.
//! Positions after the first difference are conditioned on different text
//! and are not compared.

use crate::quality::{Answer, TokenChoice};

/// The unit answers are compared in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// The server's tokens (every answer carried its token list).
    Tokens,
    /// Whitespace-separated words of the text.
    Words,
}

impl Unit {
    pub fn name(self) -> &'static str {
        match self {
            Unit::Tokens => "tokens",
            Unit::Words => "words",
        }
    }
}

/// How a candidate's answers agree with the reference's.
#[derive(Debug, Clone, PartialEq)]
pub struct Agreement {
    /// Prompts both sides answered (pairs compared).
    pub prompts: u64,
    /// Pairs whose texts are equal.
    pub exact: u64,
    /// `exact / prompts`, in [0, 1].
    pub exact_match: f64,
    /// Mean position (0-based, in `unit`s) of the first difference; an
    /// equal answer counts its length.
    pub first_diff_mean: f64,
    /// Equal positions over all positions of the longer answer of each
    /// pair, in [0, 1].
    pub token_agreement: f64,
    pub unit: Unit,
    /// Next-token distributions compared (positions up to and including
    /// each pair's first difference where both sides listed alternatives).
    pub positions: u64,
    /// Mean `KL(P_ref || P_cand)` over those positions (nats); `None`
    /// where no position had alternatives on both sides.
    pub kl_mean: Option<f64>,
    /// The standard error of `first_diff_mean` over prompts.
    pub first_diff_se: f64,
    /// The standard error of the KL figure: of the per-prompt means
    /// (prompts are the independent draws; positions within an answer
    /// are not), over `sqrt` of the prompts with positions.
    pub kl_se: Option<f64>,
    /// Each pair's first difference, in prompt order (its length where
    /// the answers are equal).
    pub first_diffs: Vec<u64>,
}

/// Compares `candidate[i]` with `reference[i]` for every `i` both have
/// (answers pair by prompt index); `None` when there is no pair.
pub fn agreement(reference: &[Answer], candidate: &[Answer]) -> Option<Agreement> {
    let pairs: Vec<(&Answer, &Answer)> = reference.iter().zip(candidate).collect();
    agreement_of(&pairs)
}

/// [`agreement`] over pairs (reference, candidate) already made, so a
/// caller that pairs answers by its own rule need not copy them.
pub fn agreement_of(pairs: &[(&Answer, &Answer)]) -> Option<Agreement> {
    let n = pairs.len();
    if n == 0 {
        return None;
    }
    let pairs = || pairs.iter().copied();
    let unit = if pairs().all(|(r, c)| has_tokens(r) && has_tokens(c)) {
        Unit::Tokens
    } else {
        Unit::Words
    };
    let mut exact = 0u64;
    let mut first_diff_sum = 0f64;
    let mut equal_positions = 0u64;
    let mut all_positions = 0u64;
    let mut kl_sum = 0f64;
    let mut kl_n = 0u64;
    let mut first_diffs = Vec::with_capacity(n);
    let mut kl_per_prompt = Vec::new();
    for (r, c) in pairs() {
        if r.text == c.text {
            exact += 1;
        }
        let (ru, cu) = (units(r, unit), units(c, unit));
        let first = ru.iter().zip(&cu).take_while(|(a, b)| a == b).count();
        // An equal answer counts its length: `first` is then both lengths.
        first_diff_sum += first as f64;
        first_diffs.push(first as u64);
        equal_positions += ru.iter().zip(&cu).filter(|(a, b)| a == b).count() as u64;
        all_positions += ru.len().max(cu.len()) as u64;
        if unit == Unit::Tokens {
            // Positions 0..=first were decoded from the same text on both
            // sides; beyond `first` the contexts differ.
            let (mut sum, mut k) = (0.0, 0u64);
            for (rt, ct) in r.tokens.iter().zip(&c.tokens).take(first + 1) {
                if let Some(kl) = kl_coarse(rt, ct) {
                    sum += kl;
                    k += 1;
                }
            }
            kl_sum += sum;
            kl_n += k;
            if k > 0 {
                kl_per_prompt.push(sum / k as f64);
            }
        }
    }
    Some(Agreement {
        prompts: n as u64,
        exact,
        exact_match: exact as f64 / n as f64,
        first_diff_mean: first_diff_sum / n as f64,
        token_agreement: if all_positions == 0 {
            1.0
        } else {
            equal_positions as f64 / all_positions as f64
        },
        unit,
        positions: kl_n,
        kl_mean: (kl_n > 0).then(|| kl_sum / kl_n as f64),
        first_diff_se: standard_error(first_diffs.iter().map(|&x| x as f64)),
        kl_se: (!kl_per_prompt.is_empty()).then(|| standard_error(kl_per_prompt.iter().copied())),
        first_diffs,
    })
}

/// The standard error of a sample's mean: its standard deviation (n - 1)
/// over `sqrt(n)`; 0 with fewer than two values.
fn standard_error(xs: impl Iterator<Item = f64> + Clone) -> f64 {
    let n = xs.clone().count();
    if n < 2 {
        return 0.0;
    }
    let mean = xs.clone().sum::<f64>() / n as f64;
    let ss: f64 = xs.map(|x| (x - mean).powi(2)).sum();
    (ss / (n - 1) as f64).sqrt() / (n as f64).sqrt()
}

/// An answer with text carries its tokens (an empty answer needs none).
fn has_tokens(a: &Answer) -> bool {
    !a.tokens.is_empty() || a.text.is_empty()
}

fn units(a: &Answer, unit: Unit) -> Vec<&str> {
    match unit {
        Unit::Tokens => a.tokens.iter().map(|t| t.token.unencoded()).collect(),
        Unit::Words => a.text.unencoded().split_whitespace().collect(),
    }
}

/// The smallest probability a candidate's cell is taken to have, so that
/// a cell the candidate rules out costs a large but finite divergence.
const Q_FLOOR: f64 = 1e-12;

/// `KL(P || Q)` of two positions' top lists, coarsened to the tokens both
/// list plus one cell for the rest; `None` when either lists nothing.
pub fn kl_coarse(reference: &TokenChoice, candidate: &TokenChoice) -> Option<f64> {
    if reference.top.is_empty() || candidate.top.is_empty() {
        return None;
    }
    let mut kl = 0.0;
    let (mut p_shared, mut q_shared) = (0.0, 0.0);
    for a in &reference.top {
        let Some(b) = candidate.top.iter().find(|b| b.token == a.token) else {
            continue;
        };
        let (p, q) = (a.logprob.exp(), b.logprob.exp());
        p_shared += p;
        q_shared += q;
        if p > 0.0 {
            kl += p * (p / q.max(Q_FLOOR)).ln();
        }
    }
    let p_rest = (1.0 - p_shared).clamp(0.0, 1.0);
    let q_rest = (1.0 - q_shared).clamp(0.0, 1.0);
    if p_rest > 0.0 {
        kl += p_rest * (p_rest / q_rest.max(Q_FLOOR)).ln();
    }
    // Rounding in the servers' figures can take a sum a hair below zero.
    Some(kl.max(0.0))
}

/// The two-sided 95% z.
pub const Z95: f64 = 1.959_963_984_540_054;

/// The Wilson score interval of a proportion: `successes` of `n` at the
/// given `z` (e.g. [`Z95`]), as (low, high) in [0, 1]; `None` for n = 0.
/// Unlike the normal approximation it stays inside [0, 1] and is honest
/// at 0% and 100%, where a few hundred prompts often land.
pub fn wilson(successes: u64, n: u64, z: f64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let n = n as f64;
    let p = successes.min(n as u64) as f64 / n;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    // At 0% and 100% the bound on that side is exactly 0 or 1; rounding
    // would leave it a hair inside.
    let low = if successes == 0 {
        0.0
    } else {
        (centre - half).max(0.0)
    };
    let high = if p == 1.0 {
        1.0
    } else {
        (centre + half).min(1.0)
    };
    Some((low, high))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outside::Outside;
    use crate::quality::Alternative;

    fn tok(token: &str, top: &[(&str, f64)]) -> TokenChoice {
        TokenChoice {
            token: Outside::new(token),
            logprob: top
                .iter()
                .find(|(t, _)| *t == token)
                .map_or(-10.0, |(_, p)| p.ln()),
            top: top
                .iter()
                .map(|(t, p)| Alternative {
                    token: Outside::new(*t),
                    logprob: p.ln(),
                })
                .collect(),
        }
    }

    fn answer(tokens: Vec<TokenChoice>) -> Answer {
        Answer {
            text: Outside::new(
                tokens
                    .iter()
                    .map(|t| t.token.unencoded())
                    .collect::<String>(),
            ),
            tokens,
            ..Answer::default()
        }
    }

    fn words(text: &str) -> Answer {
        Answer {
            text: Outside::new(text),
            ..Answer::default()
        }
    }

    #[test]
    fn identical_answers_agree_fully_with_zero_divergence() {
        let a = answer(vec![
            tok("The", &[("The", 0.7), ("A", 0.2)]),
            tok(" cat", &[(" cat", 0.5), (" dog", 0.4)]),
        ]);
        let g = agreement(&[a.clone(), a.clone()], &[a.clone(), a]).unwrap();
        assert_eq!(g.prompts, 2);
        assert_eq!(g.exact_match, 1.0);
        assert_eq!(g.first_diff_mean, 2.0);
        assert_eq!(g.token_agreement, 1.0);
        assert_eq!(g.unit, Unit::Tokens);
        assert_eq!(g.first_diffs, vec![2, 2]);
        assert_eq!(g.first_diff_se, 0.0);
        assert!(g.kl_se.unwrap().abs() < 1e-12);
        // Both positions of each pair are compared (the answers never
        // differ, so every position shares its context).
        assert_eq!(g.positions, 4);
        assert!(g.kl_mean.unwrap().abs() < 1e-12);
    }

    #[test]
    fn the_first_difference_and_token_agreement_count_positions() {
        let r = words("one two three four");
        // Differs at position 2, agrees again at 3; one word longer.
        let c = words("one two tree four five");
        let g = agreement(&[r], &[c]).unwrap();
        assert_eq!(g.unit, Unit::Words);
        assert_eq!(g.exact_match, 0.0);
        assert_eq!(g.first_diff_mean, 2.0);
        assert_eq!(g.first_diffs, vec![2]);
        assert_eq!(g.first_diff_se, 0.0);
        // Equal at 0, 1 and 3, of the longer answer's 5 positions.
        assert!((g.token_agreement - 3.0 / 5.0).abs() < 1e-12);
        assert_eq!(g.kl_mean, None);
    }

    #[test]
    fn kl_is_computed_on_shared_cells_and_the_rest() {
        // P: a 0.6, b 0.3, rest 0.1; Q: a 0.5, c 0.3 -> shared {a}, rest.
        let p = tok("a", &[("a", 0.6), ("b", 0.3)]);
        let q = tok("a", &[("a", 0.5), ("c", 0.3)]);
        let want = 0.6 * (0.6f64 / 0.5).ln() + 0.4 * (0.4f64 / 0.5).ln();
        assert!((kl_coarse(&p, &q).unwrap() - want).abs() < 1e-12);
        // Coarsening never increases the divergence: over the full
        // three-token support plus rest, the true KL is larger.
        // (P: a .6 b .3 r .1; Q: a .5 b q_b c .3 r .2 - q_b, any q_b < .2.)
        let q_b: f64 = 0.1;
        let full = 0.6 * (0.6f64 / 0.5).ln() + 0.3 * (0.3 / q_b).ln() + 0.1 * (0.1 / 0.1f64).ln();
        assert!(full >= want);
        assert_eq!(kl_coarse(&p, &tok("a", &[])), None);
    }

    #[test]
    fn divergence_is_compared_up_to_the_first_difference_only() {
        let r = answer(vec![
            tok("x", &[("x", 0.9), ("y", 0.05)]),
            tok("y", &[("y", 0.5), ("z", 0.4)]),
            tok("z", &[("z", 0.9)]),
        ]);
        let c = answer(vec![
            tok("x", &[("x", 0.9), ("y", 0.05)]),
            tok("z", &[("z", 0.5), ("y", 0.4)]),
            // After the difference: unrelated, and not compared.
            tok("q", &[("q", 0.99)]),
        ]);
        let g = agreement(std::slice::from_ref(&r), std::slice::from_ref(&c)).unwrap();
        assert_eq!(g.first_diff_mean, 1.0);
        assert_eq!(g.positions, 2);
        let at1 = 0.5 * (0.5f64 / 0.4).ln() + 0.4 * (0.4f64 / 0.5).ln() + 0.1 * (0.1f64 / 0.1).ln();
        assert!((g.kl_mean.unwrap() - at1 / 2.0).abs() < 1e-12, "{g:?}");
    }

    #[test]
    fn standard_errors_are_over_prompts() {
        // First differences 0 and 2: mean 1, sd sqrt(2), se 1.
        let r = [words("a b"), words("a b")];
        let c = [words("x b"), words("a b")];
        let g = agreement(&r, &c).unwrap();
        assert_eq!(g.first_diffs, vec![0, 2]);
        assert!((g.first_diff_se - 1.0).abs() < 1e-12, "{g:?}");
    }

    #[test]
    fn answers_without_tokens_are_compared_in_words() {
        let r = answer(vec![tok("a", &[("a", 1.0)])]);
        let c = words("a");
        let g = agreement(&[r], &[c]).unwrap();
        assert_eq!(g.unit, Unit::Words);
        assert_eq!(g.exact_match, 1.0);
        assert_eq!(agreement(&[], &[words("a")]), None);
    }

    #[test]
    fn wilson_matches_published_values_and_stays_in_range() {
        // 71.2% of 1000 -> [68.32%, 73.92%] (rounded); 0 of 10 -> [0, 27.8%].
        let (lo, hi) = wilson(712, 1000, Z95).unwrap();
        assert!(
            (lo - 0.6832).abs() < 5e-4 && (hi - 0.7392).abs() < 5e-4,
            "{lo} {hi}"
        );
        let (lo, hi) = wilson(0, 10, Z95).unwrap();
        assert_eq!(lo, 0.0);
        assert!((hi - 0.2775).abs() < 5e-4, "{hi}");
        let (lo, hi) = wilson(10, 10, Z95).unwrap();
        assert!(hi == 1.0 && (lo - 0.7225).abs() < 5e-4, "{lo}");
        assert_eq!(wilson(0, 0, Z95), None);
    }
}
