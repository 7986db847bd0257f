//! The power study of the regression gate: how often [`stats::judge`] calls
//! a real slowdown REGRESSED, and an unchanged server too (a false alarm).
//!
//! Pure arithmetic, deterministic from a seed. A trial draws the baseline's
//! per-run values `x_i = f_i e^(r u_i)` and the new ones
//! `y_j = (1 + s) g_j e^(r v_j)`, where `f` and `g` are run speed factors
//! drawn as the simulator draws them (`N(1, sigma)` clamped to `[0.5,
//! 1.5]`, see `crates/sim/src/server.rs`), `s` is the slowdown the new
//! server really has (the simulator's `slowdown` multiplies every time), and
//! `r` a per-run residual (the measuring machine's own jitter, lognormal),
//! then judges them with [`stats::judge`] as a latency (up is worse).
//!
//! `cargo run --release -p infer-bench-judge --example power` prints the
//! tables of `docs/regression.md` ("Power, measured").

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::stats::{self, Judgement, Verdict};

/// The rule a gate judges by: its declared noise band and the confidence of
/// the interval (both fractions).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    pub noise: f64,
    pub confidence: f64,
    /// Widen the band to twice the baseline's coefficient of variation when
    /// that is larger: the rule before the study (`tau = max(noise, 2
    /// CV(base))`), kept here to measure it.
    pub spread: bool,
}

/// One cell of the study: the noise model and the true change.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    /// Standard deviation of the run speed factor (`[targets.X.sim] noise`).
    pub sigma: f64,
    /// Standard deviation of the per-run lognormal residual (log scale).
    pub residual: f64,
    /// Baseline runs.
    pub base_runs: usize,
    /// New runs.
    pub new_runs: usize,
    /// The new server's true slowdown (0.05 = every time 5% longer).
    pub slowdown: f64,
}

/// Verdict counts over a number of trials.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub regressed: usize,
    pub improved: usize,
    pub unchanged: usize,
    pub inconclusive: usize,
}

impl Tally {
    pub fn add(&mut self, verdict: Verdict) {
        match verdict {
            Verdict::Regressed => self.regressed += 1,
            Verdict::Improved => self.improved += 1,
            Verdict::Unchanged => self.unchanged += 1,
            Verdict::Inconclusive => self.inconclusive += 1,
        }
    }

    pub fn trials(&self) -> usize {
        self.regressed + self.improved + self.unchanged + self.inconclusive
    }

    /// The share of trials that were REGRESSED (0 for no trials).
    pub fn regressed_share(&self) -> f64 {
        share(self.regressed, self.trials())
    }
}

fn share(count: usize, of: usize) -> f64 {
    if of == 0 {
        0.0
    } else {
        count as f64 / of as f64
    }
}

/// A standard normal draw (Box-Muller, one of the pair).
pub fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1 = 1.0 - rng.random::<f64>(); // (0, 1]
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A run's speed factor as the simulator draws it: `N(1, sigma)` clamped
/// to `[0.5, 1.5]`.
pub fn speed_factor(rng: &mut ChaCha8Rng, sigma: f64) -> f64 {
    (1.0 + sigma * standard_normal(rng)).clamp(0.5, 1.5)
}

/// `count` per-run values of a server `1 + slowdown` times slower than the
/// baseline's, under the cell's noise.
pub fn runs(rng: &mut ChaCha8Rng, cell: &Cell, count: usize, slowdown: f64) -> Vec<f64> {
    (0..count)
        .map(|_| {
            let f = speed_factor(rng, cell.sigma);
            let jitter = if cell.residual > 0.0 {
                (cell.residual * standard_normal(rng)).exp()
            } else {
                1.0
            };
            (1.0 + slowdown) * f * jitter
        })
        .collect()
}

fn judge(base: &[f64], new: &[f64], rule: Rule) -> Judgement {
    let noise = if rule.spread {
        let cv = stats::coefficient_of_variation(base).unwrap_or(0.0);
        rule.noise.max(2.0 * cv)
    } else {
        rule.noise
    };
    // Positive finite values and a valid rule: judge cannot refuse them.
    stats::judge(base, new, true, noise, rule.confidence).expect("positive values and a valid rule")
}

/// `trials` comparisons of the cell, each with fresh noise.
pub fn simulate(seed: u64, trials: usize, cell: &Cell, rule: Rule) -> Tally {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut tally = Tally::default();
    for _ in 0..trials {
        let base = runs(&mut rng, cell, cell.base_runs, 0.0);
        let new = runs(&mut rng, cell, cell.new_runs, cell.slowdown);
        tally.add(judge(&base, &new, rule).verdict);
    }
    tally
}

/// When a sequential check stops adding runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Once the verdict is anything but INCONCLUSIVE.
    Decided,
    /// Once the verdict is REGRESSED or IMPROVED, or the interval's upper
    /// end is below `+margin` (no slowdown of `margin` or more).
    Margin,
}

/// The outcome of sequential trials: the final verdicts and the new runs
/// they took.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sequential {
    pub tally: Tally,
    /// Mean number of new runs per trial.
    pub mean_new_runs: f64,
}

/// `trials` sequential checks: the baseline has `cell.base_runs` runs; the
/// new side is judged after each count in `looks` (ascending, the last being
/// the cap) and stops at the first look that `stop` accepts; the verdict of
/// the last look taken counts. `margin` is the slowdown `Stop::Margin` rules
/// out (ignored by `Stop::Decided`).
pub fn sequential(
    seed: u64,
    trials: usize,
    cell: &Cell,
    rule: Rule,
    looks: &[usize],
    stop: Stop,
    margin: f64,
) -> Sequential {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut tally = Tally::default();
    let mut total_runs = 0usize;
    let cap = looks.last().copied().unwrap_or(0);
    for _ in 0..trials {
        let base = runs(&mut rng, cell, cell.base_runs, 0.0);
        let new = runs(&mut rng, cell, cap, cell.slowdown);
        let mut verdict = Verdict::Inconclusive;
        let mut used = 0;
        for &look in looks {
            let j = judge(&base, &new[..look], rule);
            verdict = j.verdict;
            used = look;
            let done = match stop {
                Stop::Decided => verdict != Verdict::Inconclusive,
                Stop::Margin => {
                    matches!(verdict, Verdict::Regressed | Verdict::Improved)
                        || j.change_high < margin
                }
            };
            if done {
                break;
            }
        }
        total_runs += used;
        tally.add(verdict);
    }
    Sequential {
        tally,
        mean_new_runs: share(total_runs, trials),
    }
}

/// Resampling of recorded per-run values: each trial draws `2 * runs`
/// distinct values at random, judges the first `runs` (baseline) against the
/// other `runs` multiplied by `1 + slowdown`. `None` if there are fewer
/// than `2 * runs` values or any is not positive.
pub fn resample(
    seed: u64,
    trials: usize,
    values: &[f64],
    runs: usize,
    slowdown: f64,
    rule: Rule,
) -> Option<Tally> {
    if values.len() < 2 * runs || values.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut tally = Tally::default();
    let mut order: Vec<usize> = (0..values.len()).collect();
    for _ in 0..trials {
        // Partial Fisher-Yates: the first 2 * runs entries are a random
        // sample without replacement.
        for i in 0..2 * runs {
            let j = i + rng.random_range(0..values.len() - i);
            order.swap(i, j);
        }
        let base: Vec<f64> = order[..runs].iter().map(|&i| values[i]).collect();
        let new: Vec<f64> = order[runs..2 * runs]
            .iter()
            .map(|&i| values[i] * (1.0 + slowdown))
            .collect();
        tally.add(judge(&base, &new, rule).verdict);
    }
    Some(tally)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: Rule = Rule {
        noise: 0.02,
        confidence: 0.95,
        spread: false,
    };

    fn cell(sigma: f64, runs: usize, slowdown: f64) -> Cell {
        Cell {
            sigma,
            residual: 0.0,
            base_runs: runs,
            new_runs: runs,
            slowdown,
        }
    }

    /// The draws have the simulator's distribution: mean 1, standard
    /// deviation sigma, clamped to [0.5, 1.5].
    #[test]
    fn speed_factors_are_normal_around_one_and_clamped() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let xs: Vec<f64> = (0..20_000).map(|_| speed_factor(&mut rng, 0.02)).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let sd = stats::standard_deviation(&xs).unwrap();
        assert!((mean - 1.0).abs() < 0.001, "{mean}");
        assert!((sd - 0.02).abs() < 0.001, "{sd}");
        let wide: Vec<f64> = (0..1000).map(|_| speed_factor(&mut rng, 10.0)).collect();
        assert!(wide.iter().all(|f| (0.5..=1.5).contains(f)));
        assert!(wide.contains(&0.5) && wide.contains(&1.5));
    }

    /// Without noise every trial sees the exact change: a 10% slowdown is
    /// always REGRESSED, none UNCHANGED; the same seed gives the same tally.
    #[test]
    fn noiseless_trials_see_the_exact_change() {
        let t = simulate(7, 200, &cell(0.0, 3, 0.10), RULE);
        assert_eq!(t.regressed, 200);
        let t = simulate(7, 200, &cell(0.0, 3, 0.0), RULE);
        assert_eq!(t.unchanged, 200);
        let a = simulate(9, 300, &cell(0.02, 5, 0.05), RULE);
        assert_eq!(a, simulate(9, 300, &cell(0.02, 5, 0.05), RULE));
        assert_eq!(a.trials(), 300);
    }

    /// More slowdown, more runs: more REGRESSED; no change: rarely.
    #[test]
    fn power_grows_with_the_change_and_the_runs() {
        let p = |runs, s| simulate(3, 2000, &cell(0.02, runs, s), RULE).regressed_share();
        assert!(p(5, 0.0) < 0.01);
        assert!(p(5, 0.03) < p(5, 0.05) && p(5, 0.05) < p(5, 0.10));
        assert!(p(3, 0.05) < p(10, 0.05));
        assert!(p(10, 0.10) > 0.99);
    }

    /// The recommended defaults (docs/regression.md, "Power, measured"):
    /// 8 runs a side, a 1% band at 95% confidence catch a 5% slowdown at 2%
    /// noise at least 90% of the time, with at most 1% false alarms.
    #[test]
    fn the_recommended_defaults_meet_the_target() {
        let rule = Rule {
            noise: 0.01,
            confidence: 0.95,
            spread: false,
        };
        let caught = simulate(11, 2000, &cell(0.02, 8, 0.05), rule).regressed_share();
        let false_alarms = simulate(12, 2000, &cell(0.02, 8, 0.0), rule).regressed_share();
        assert!(caught >= 0.90, "{caught}");
        assert!(false_alarms <= 0.01, "{false_alarms}");
        // The rule before (a 5% band widened to 2 CV(base)) missed most.
        let before = Rule {
            noise: 0.05,
            spread: true,
            ..rule
        };
        assert!(simulate(11, 2000, &cell(0.02, 8, 0.05), before).regressed_share() < 0.1);
    }

    /// Sequential checks stop early when the verdict is decided: a 20%
    /// slowdown is REGRESSED at the first look.
    #[test]
    fn sequential_stops_at_the_first_decided_look() {
        let s = sequential(
            5,
            500,
            &cell(0.01, 10, 0.20),
            RULE,
            &[3, 5, 10],
            Stop::Decided,
            0.05,
        );
        assert_eq!(s.tally.regressed, 500);
        assert_eq!(s.mean_new_runs, 3.0);
        // An unchanged server under the margin rule stops once a 5%
        // slowdown is ruled out, which takes more than 3 runs sometimes.
        let s = sequential(
            5,
            500,
            &cell(0.02, 10, 0.0),
            RULE,
            &[3, 5, 10],
            Stop::Margin,
            0.05,
        );
        assert!(s.mean_new_runs >= 3.0 && s.mean_new_runs <= 10.0);
        assert_eq!(s.tally.trials(), 500);
    }

    /// Resampling identical values finds no change at all; a slowdown of
    /// them is exact.
    #[test]
    fn resampling_recorded_values() {
        let values: Vec<f64> = (0..30).map(|i| 100.0 + (i % 3) as f64).collect();
        let t = resample(1, 100, &values, 5, 0.0, RULE).unwrap();
        assert_eq!(t.regressed + t.improved, 0);
        let t = resample(1, 100, &[100.0; 10], 5, 0.10, RULE).unwrap();
        assert_eq!(t.regressed, 100);
        assert!(resample(1, 10, &[100.0; 9], 5, 0.0, RULE).is_none());
        assert!(resample(1, 10, &[0.0; 10], 5, 0.0, RULE).is_none());
    }
}
