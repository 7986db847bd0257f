//! The statistics of the regression judge: pure functions, no I/O.
//!
//! This module owns the arithmetic of one comparison: given the baseline's
//! per-run values `x_1..x_m` of one metric statistic (e.g. each run's TTFT
//! p99) and the new per-run values `y_1..y_n`, it estimates the relative
//! change (Hodges-Lehmann on log ratios), its distribution-free confidence
//! interval (order statistics of the pairwise log ratios, with the critical
//! value from the exact null distribution of the Mann-Whitney U statistic
//! for small samples and its normal approximation above), the noise band, and
//! the data-driven verdict (REGRESSED, IMPROVED, UNCHANGED, INCONCLUSIVE).
//!
//! Fractions that may be zero (error rate, goodput ratio) are compared by
//! their difference instead ([`judge_absolute`]): the same estimate and
//! interval on `y_j - x_i`, with the band in the values' own unit.
//!
//! It does not decide whether two results may be compared at all (point
//! identity, environment fingerprint: INCOMPARABLE) nor whether there are
//! enough valid runs (`min_runs`: INSUFFICIENT); the caller does, before
//! calling [`judge`]. Runs are the statistical unit: requests inside one run
//! are not independent samples, so callers pass one value per run (or, with a
//! single run per side, one value per steady-state window).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The largest number of pairs `m * n` for which the confidence interval uses
/// the exact null distribution of U (e.g. 60 runs a side, or 10 against
/// 360); above it, the normal approximation with continuity correction.
///
/// The exact computation costs about `(m n)^2 / 2` additions and its counts
/// (at most `C(120, 60) ~ 1e35` here) fit in a `u128`.
pub const EXACT_MAX_PAIRS: usize = 3600;

/// Relative slack when comparing a tail probability with `(1 - confidence)
/// / 2`, so that a requested confidence equal to an attainable one (e.g. 80%
/// for m = n = 3, where `P(U <= 1) = 2/20` exactly) counts as reached despite
/// the rounding of `1 - 0.8` in binary floating point.
const REL_TOL: f64 = 1e-9;

/// A shift between two samples on the log scale, with its confidence
/// interval.
///
/// All three values are natural logs of ratios `new / base`; use [`pct`] to
/// turn one into a relative change (`ln 1.1` -> `0.1`, i.e. +10%).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Shift {
    /// The Hodges-Lehmann estimate: the median of the `m * n` pairwise log
    /// ratios `ln(new_j / base_i)` (the mean of the two middle ones when
    /// `m * n` is even).
    pub estimate: f64,
    /// Lower bound of the confidence interval: `D_(k)`, the k-th smallest
    /// pairwise log ratio.
    pub low: f64,
    /// Upper bound of the confidence interval: `D_(mn+1-k)`.
    pub high: f64,
    /// The coverage of `[low, high]` under the null distribution of U,
    /// `1 - 2 P(U <= k - 1)`. It may be below the requested confidence when
    /// the samples are too small to reach it (m = n = 3 tops out at 90%).
    pub achieved_confidence: f64,
    /// Number of baseline values.
    pub m: usize,
    /// Number of new values.
    pub n: usize,
}

/// The relative change a log ratio stands for: `e^d - 1`, as a fraction
/// (`0.1` = +10%, `-0.2` = -20%).
pub fn pct(log_ratio: f64) -> f64 {
    log_ratio.exp_m1()
}

/// The Hodges-Lehmann estimate of the shift from `base` to `new` on the log
/// scale, with its distribution-free confidence interval.
///
/// `base` (`x_1..x_m`) and `new` (`y_1..y_n`) are positive per-run values of
/// one metric statistic. With `D_(1) <= ... <= D_(mn)` the sorted pairwise
/// log ratios `D = ln(y_j / x_i)` (all `m * n` pairs):
///
/// - the estimate is their median;
/// - the interval is `[D_(k), D_(mn+1-k)]`, where `k` is the largest integer
///   with `P(U <= k - 1) <= (1 - confidence) / 2`, U being the Mann-Whitney
///   statistic under H0 (no shift; every ordering of the `m + n` values
///   equally likely). Its coverage is `1 - 2 P(U <= k - 1)`, reported as
///   `achieved_confidence`.
///
/// `P(U <= u)` is exact for `m * n <=` [`EXACT_MAX_PAIRS`] (counted by
/// dynamic programming over the arrangements of the two samples, no tables)
/// and from the normal approximation with continuity correction above it:
/// `Phi((u + 1/2 - mn/2) / sqrt(mn(m+n+1)/12))`.
///
/// When even `k = 1` (the full range of the pairwise ratios) misses the
/// requested confidence, as for m = n = 3 at 95% (`P(U <= 0) = 1/20`, so the
/// best is 90%), the full range is returned with the confidence it achieves.
/// The coverage is exact for continuous data; ties (equal values) make the
/// closed interval conservative.
///
/// Returns `None` if either side is empty, any value is not finite and
/// strictly positive, or `confidence` is not in `(0, 1]`. Costs
/// `O(mn log mn)` time and `O(mn)` memory, plus the exact distribution.
pub fn hodges_lehmann(base: &[f64], new: &[f64], confidence: f64) -> Option<Shift> {
    if !(confidence > 0.0 && confidence <= 1.0) {
        return None;
    }
    let ln_base = logs(base)?;
    let ln_new = logs(new)?;
    shift_of_differences(&ln_base, &ln_new, confidence)
}

/// The Hodges-Lehmann shift `new - base` on the scale the values are given
/// in, with its interval: the machinery of [`hodges_lehmann`] applied to
/// the pairwise differences `y_j - x_i` themselves rather than to log
/// ratios. For quantities compared by absolute difference, such as
/// fractions that may be zero (error rate).
///
/// Returns `None` if either side is empty, any value is not finite, or
/// `confidence` is not in `(0, 1]`.
pub fn hodges_lehmann_absolute(base: &[f64], new: &[f64], confidence: f64) -> Option<Shift> {
    if !(confidence > 0.0 && confidence <= 1.0) {
        return None;
    }
    let finite = |xs: &[f64]| !xs.is_empty() && xs.iter().all(|x| x.is_finite());
    if !(finite(base) && finite(new)) {
        return None;
    }
    shift_of_differences(base, new, confidence)
}

/// Estimate and interval from the pairwise differences of two non-empty
/// samples of finite values.
fn shift_of_differences(base: &[f64], new: &[f64], confidence: f64) -> Option<Shift> {
    let (m, n) = (base.len(), new.len());
    let pairs = m.checked_mul(n)?;
    let mut d = Vec::with_capacity(pairs);
    for y in new {
        d.extend(base.iter().map(|x| y - x));
    }
    d.sort_unstable_by(f64::total_cmp);
    let estimate = median_of_sorted(&d)?;
    let (k, achieved_confidence) = interval_rank(m, n, confidence);
    // 1 <= k <= (mn + 1) / 2, so both indices are in range and low <= high.
    let low = *d.get(k.checked_sub(1)?)?;
    let high = *d.get(pairs.checked_sub(k)?)?;
    Some(Shift {
        estimate,
        low,
        high,
        achieved_confidence,
        m,
        n,
    })
}

/// The sample coefficient of variation `s / mean`, with
/// `s = sqrt(sum (x_i - mean)^2 / (n - 1))` (sample standard deviation).
///
/// Meant for positive per-run values. Returns `None` with fewer than two
/// values, any non-finite value, or a mean that is not strictly positive.
pub fn coefficient_of_variation(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let count = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / count;
    if !(mean.is_finite() && mean > 0.0) {
        return None;
    }
    let ss: f64 = xs.iter().map(|x| (x - mean).powi(2)).sum();
    let cv = (ss / (count - 1.0)).sqrt() / mean;
    cv.is_finite().then_some(cv)
}

/// The data-driven verdicts. INCOMPARABLE (environments differ) and
/// INSUFFICIENT (too few valid runs) are decided by the caller before any
/// statistics are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    /// The whole interval is worse than the noise band.
    Regressed,
    /// The whole interval is better than the noise band.
    Improved,
    /// The whole interval lies inside the noise band.
    Unchanged,
    /// The interval straddles an edge of the band: add runs.
    Inconclusive,
}

impl Verdict {
    /// The verdict as printed and serialized: `"REGRESSED"` etc.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Regressed => "REGRESSED",
            Verdict::Improved => "IMPROVED",
            Verdict::Unchanged => "UNCHANGED",
            Verdict::Inconclusive => "INCONCLUSIVE",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome of [`judge`]: the verdict and the figures behind it.
///
/// Changes are fractions in the metric's natural direction (`+0.12`: the
/// metric's value is 12% higher than the baseline's), whichever direction is
/// worse: a throughput that drops 10% shows `change = -0.10` with a
/// REGRESSED verdict.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    pub verdict: Verdict,
    /// Estimated change, `e^d - 1` with `d` the Hodges-Lehmann estimate.
    pub change: f64,
    /// Lower bound of the change's confidence interval, `e^low - 1`.
    pub change_low: f64,
    /// Upper bound of the change's confidence interval, `e^high - 1`.
    pub change_high: f64,
    /// The noise band used, as a fraction: the declared `noise` (relative)
    /// or the declared difference (absolute).
    pub tau: f64,
    /// Coverage of the interval (see [`Shift::achieved_confidence`]).
    pub achieved_confidence: f64,
    /// Number of baseline values.
    pub m: usize,
    /// Number of new values.
    pub n: usize,
}

/// Judges the new per-run values of one metric statistic against the
/// baseline's.
///
/// 1. [`hodges_lehmann`] gives the log-ratio estimate and interval
///    `[low, high]` at `confidence`.
/// 2. Orientation, so that up is worse: for a metric where higher is worse
///    (latency) the interval is used as is; where higher is better
///    (throughput) the reciprocal ratio is used, i.e. the interval becomes
///    `[-high, -low]`.
/// 3. Noise band: `tau = noise`, the metric's declared band as a fraction
///    (0.05 = 5%): the smallest change worth failing a check for, and the
///    allowance for what the replicates cannot see (a machine that drifts
///    between the baseline's day and today). The spread of the replicates is
///    not added to it: the interval already carries it, and adding twice the
///    baseline's CV as well counted it twice (at 2% run-to-run noise the
///    band became 4% or more, so a real 5% slowdown was almost never
///    caught; `cargo run --release -p infer-bench-judge --example power`
///    measures it). Callers whose replicates miss a source of variance
///    (windows of one run do not see how whole runs differ) widen `noise`
///    themselves.
/// 4. The band is applied on the log scale, symmetrically:
///    `b = ln(1 + tau)` and the oriented interval is compared with `[-b, +b]`.
///    So a change counts as noise when the ratio lies in
///    `[1 / (1 + tau), 1 + tau]`, which makes the verdict independent of
///    which side is called the baseline (swapping them swaps REGRESSED and
///    IMPROVED) and of whether a metric is expressed as a rate or as its
///    reciprocal (a 4.9% latency drop is a 5.15% throughput gain, and both get
///    the same verdict for tau = 5%). The alternative `[ln(1 - tau),
///    ln(1 + tau)]` would break both symmetries and is undefined for
///    `tau >= 1`.
/// 5. Verdict: REGRESSED if `low' > +b`, IMPROVED if `high' < -b`, UNCHANGED
///    if `-b <= low'` and `high' <= +b`, INCONCLUSIVE otherwise (the interval
///    straddles an edge of the band), where `[low', high']` is the oriented
///    interval.
///
/// The verdict is taken at the confidence the samples allow; callers that
/// need the requested confidence check [`Judgement::achieved_confidence`]
/// (and enforce `min_runs`) themselves.
///
/// Returns `None` when [`hodges_lehmann`] does, or when `noise` is not finite
/// and `>= 0`.
pub fn judge(
    base: &[f64],
    new: &[f64],
    higher_is_worse: bool,
    noise: f64,
    confidence: f64,
) -> Option<Judgement> {
    if !(noise.is_finite() && noise >= 0.0) {
        return None;
    }
    let shift = hodges_lehmann(base, new, confidence)?;
    let (low, high) = if higher_is_worse {
        (shift.low, shift.high)
    } else {
        (-shift.high, -shift.low)
    };
    let tau = noise;
    let verdict = verdict_of(low, high, tau.ln_1p());
    Some(Judgement {
        verdict,
        change: pct(shift.estimate),
        change_low: pct(shift.low),
        change_high: pct(shift.high),
        tau,
        achieved_confidence: shift.achieved_confidence,
        m: shift.m,
        n: shift.n,
    })
}

/// Judges like [`judge`], but on the absolute scale: for fractions such as
/// the error rate, which are often exactly zero (so no ratio exists) and
/// whose changes read naturally in percentage points.
///
/// The shift is [`hodges_lehmann_absolute`] (`y_j - x_i`), oriented as in
/// [`judge`]; the band is `tau = noise` (as in [`judge`], the spread of the
/// values is in the interval already), compared directly with the oriented
/// interval:
/// REGRESSED if `low' > tau`, IMPROVED if `high' < -tau`, UNCHANGED if
/// inside `[-tau, tau]`, INCONCLUSIVE otherwise. The returned changes and
/// `tau` are absolute differences in the values' unit (`0.01` = one
/// percentage point for a fraction), not relative changes.
///
/// Returns `None` when [`hodges_lehmann_absolute`] does, or when `noise` is
/// not finite and `>= 0`.
pub fn judge_absolute(
    base: &[f64],
    new: &[f64],
    higher_is_worse: bool,
    noise: f64,
    confidence: f64,
) -> Option<Judgement> {
    if !(noise.is_finite() && noise >= 0.0) {
        return None;
    }
    let shift = hodges_lehmann_absolute(base, new, confidence)?;
    let (low, high) = if higher_is_worse {
        (shift.low, shift.high)
    } else {
        (-shift.high, -shift.low)
    };
    let tau = noise;
    Some(Judgement {
        verdict: verdict_of(low, high, tau),
        change: shift.estimate,
        change_low: shift.low,
        change_high: shift.high,
        tau,
        achieved_confidence: shift.achieved_confidence,
        m: shift.m,
        n: shift.n,
    })
}

/// The verdict of an oriented interval `[low, high]` against the band
/// `[-band, +band]` (step 5 of [`judge`]).
pub(crate) fn verdict_of(low: f64, high: f64, band: f64) -> Verdict {
    if low > band {
        Verdict::Regressed
    } else if high < -band {
        Verdict::Improved
    } else if low >= -band && high <= band {
        Verdict::Unchanged
    } else {
        Verdict::Inconclusive
    }
}

/// The sample standard deviation (`n - 1` in the denominator); `None` with
/// fewer than two values or any non-finite value.
pub fn standard_deviation(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let count = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / count;
    let ss: f64 = xs.iter().map(|x| (x - mean).powi(2)).sum();
    let s = (ss / (count - 1.0)).sqrt();
    s.is_finite().then_some(s)
}

/// Natural logs of the values; `None` if empty or any value is not finite
/// and strictly positive.
fn logs(xs: &[f64]) -> Option<Vec<f64>> {
    if xs.is_empty() {
        return None;
    }
    xs.iter()
        .map(|&x| (x.is_finite() && x > 0.0).then(|| x.ln()))
        .collect()
}

/// Median of sorted values (mean of the two middle ones for an even count).
fn median_of_sorted(d: &[f64]) -> Option<f64> {
    let mid = d.len() / 2;
    if d.len() % 2 == 1 {
        d.get(mid).copied()
    } else {
        Some((d.get(mid.checked_sub(1)?)? + d.get(mid)?) / 2.0)
    }
}

/// The rank `k` of the interval `[D_(k), D_(mn+1-k)]` for `m, n >= 1` and
/// its coverage `1 - 2 P(U <= k - 1)`: exact for small samples, normal
/// approximation above [`EXACT_MAX_PAIRS`] (or should the exact counts ever
/// overflow). Always `1 <= k <= (mn + 1) / 2`.
fn interval_rank(m: usize, n: usize, confidence: f64) -> (usize, f64) {
    let threshold = (1.0 - confidence) / 2.0 * (1.0 + REL_TOL);
    if m.saturating_mul(n) <= EXACT_MAX_PAIRS {
        if let Some(rank) = exact_rank(m, n, threshold) {
            return rank;
        }
    }
    normal_rank(m, n, threshold)
}

/// The largest `k <= (mn + 1) / 2` with `P(U <= k - 1) <= threshold` under
/// the exact null distribution (or `k = 1` if none), and its coverage.
/// `None` if the counts overflow.
fn exact_rank(m: usize, n: usize, threshold: f64) -> Option<(usize, f64)> {
    let k_max = (m.checked_mul(n)?.checked_add(1)?) / 2;
    let cdf = exact_lower_cdf(m, n, k_max.checked_sub(1)?)?;
    // The CDF is non-decreasing: count the leading entries under the
    // threshold; that count is the largest k with P(U <= k - 1) <= threshold.
    let reached = cdf.iter().take_while(|&&p| p <= threshold).count();
    let k = reached.max(1);
    let tail = *cdf.get(k - 1)?;
    Some((k, 1.0 - 2.0 * tail))
}

/// Like [`exact_rank`], with `P(U <= u)` from the normal approximation with
/// continuity correction.
fn normal_rank(m: usize, n: usize, threshold: f64) -> (usize, f64) {
    let (mf, nf) = (m as f64, n as f64);
    let mean = mf * nf / 2.0;
    let sd = (mf * nf * (mf + nf + 1.0) / 12.0).sqrt();
    let cdf = |u: usize| std_normal_cdf((u as f64 + 0.5 - mean) / sd);
    let k_max = m.saturating_mul(n).saturating_add(1) / 2;
    // Binary search for the largest k in [1, k_max] with cdf(k - 1) <=
    // threshold; `lo` always satisfies it, or is 1 when nothing does.
    let (mut lo, mut hi) = (1usize, k_max.max(1));
    if cdf(0) <= threshold {
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if cdf(mid - 1) <= threshold {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
    }
    (lo, 1.0 - 2.0 * cdf(lo - 1))
}

/// `P(U <= u)` for `u = 0..=limit` under H0, exactly.
fn exact_lower_cdf(m: usize, n: usize, limit: usize) -> Option<Vec<f64>> {
    let (counts, total) = exact_counts(m, n, limit)?;
    let total = total as f64;
    let mut acc: u128 = 0;
    counts
        .iter()
        .map(|&c| {
            acc = acc.checked_add(c)?;
            Some(acc as f64 / total)
        })
        .collect()
}

/// The number of arrangements of `m` values of one sample and `n` of the
/// other (all distinct) for which `U = u`, for `u = 0..=limit`, and the
/// total number of arrangements `C(m + n, m)`. `None` on overflow.
///
/// U counts the pairs `(x, y)` with `y < x`. Looking at the largest of the
/// `i + j` values: if it is an `x` it exceeds all `j` y's, otherwise it adds
/// nothing, so the counts obey `c(i, j, u) = c(i - 1, j, u - j) + c(i, j - 1,
/// u)` with `c(i, 0, u) = c(0, j, u) = [u = 0]`. The table is filled one `i`
/// at a time, in place, over `j = 0..=min(m, n)` (U has the same
/// distribution for `(m, n)` and `(n, m)`), and truncated at `u = limit`:
/// entries up to `limit` only depend on entries up to `limit`.
fn exact_counts(m: usize, n: usize, limit: usize) -> Option<(Vec<u128>, u128)> {
    let (small, large) = (m.min(n), m.max(n));
    let len = limit.checked_add(1)?;
    let delta = {
        let mut v = vec![0u128; len];
        v[0] = 1;
        v
    };
    let mut rows: Vec<Vec<u128>> = vec![delta; small + 1];
    for _i in 1..=large {
        for j in 1..=small {
            let (done, rest) = rows.split_at_mut(j);
            let prev = done.last()?; // c(i, j - 1, .), already updated
            let cur = rest.first_mut()?; // c(i - 1, j, .), updated in place
            for u in (0..len).rev() {
                let shifted = if u >= j { cur[u - j] } else { 0 };
                cur[u] = shifted.checked_add(prev[u])?;
            }
        }
    }
    let counts = rows.pop()?;
    // C(large + small, small), each partial product C(large + i, i) exact.
    let mut total: u128 = 1;
    for i in 1..=small {
        total = total.checked_mul((large + i) as u128)? / i as u128;
    }
    Some((counts, total))
}

/// The standard normal CDF `Phi(x)`, by Hart's (1968) rational approximation
/// as given by West (2005), "Better approximations to cumulative normal
/// functions": about double precision near the centre, relative error below
/// 1e-8 far in the tails.
/// The two-sided z of a confidence level in (0, 1): the `x` with
/// `P(|Z| <= x) = confidence` for a standard normal `Z` (1.96 at 95%),
/// by bisection on the normal CDF.
pub fn z_for(confidence: f64) -> f64 {
    let target = 1.0 - (1.0 - confidence.clamp(1e-9, 1.0 - 1e-15)) / 2.0;
    let (mut lo, mut hi) = (0.0f64, 40.0f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if std_normal_cdf(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

fn std_normal_cdf(x: f64) -> f64 {
    let z = x.abs();
    let tail = if z > 37.0 {
        0.0
    } else {
        let e = (-z * z / 2.0).exp();
        if z < 7.071_067_811_865_47 {
            let num = (((((0.035_262_496_599_891_1 * z + 0.700_383_064_443_688) * z
                + 6.373_962_203_531_65)
                * z
                + 33.912_866_078_383)
                * z
                + 112.079_291_497_871)
                * z
                + 221.213_596_169_931)
                * z
                + 220.206_867_912_376;
            let den = ((((((0.088_388_347_648_318_4 * z + 1.755_667_163_182_64) * z
                + 16.064_177_579_207)
                * z
                + 86.780_732_202_946_1)
                * z
                + 296.564_248_779_674)
                * z
                + 637.333_633_378_831)
                * z
                + 793.826_512_519_948)
                * z
                + 440.413_735_824_752;
            e * num / den
        } else {
            let b = z + 1.0 / (z + 2.0 / (z + 3.0 / (z + 4.0 / (z + 0.65))));
            e / b / 2.506_628_274_631
        }
    };
    if x > 0.0 { 1.0 - tail } else { tail }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    macro_rules! assert_close {
        ($a:expr, $b:expr) => {
            assert_close!($a, $b, 1e-12)
        };
        ($a:expr, $b:expr, $tol:expr) => {{
            let (a, b) = ($a, $b);
            assert!(close(a, b, $tol), "{a} != {b} (tolerance {})", $tol);
        }};
    }

    #[test]
    fn pct_is_exp_minus_one() {
        assert_close!(pct(0.0), 0.0);
        assert_close!(pct(1.1f64.ln()), 0.1);
        // e^(-ln 1.25) - 1 = 1/1.25 - 1 = 0.8 - 1 = -0.2
        assert_close!(pct(-(1.25f64.ln())), -0.2);
    }

    /// Hand enumeration for m = n = 3: the C(6, 3) = 20 orderings of three
    /// x's and three y's (smallest first), U = number of (x, y) pairs with
    /// y < x = sum over the x's of the y's before it:
    ///
    /// U=0: xxxyyy
    /// U=1: xxyxyy
    /// U=2: xxyyxy xyxxyy
    /// U=3: xxyyyx xyxyxy yxxxyy
    /// U=4: xyxyyx xyyxxy yxxyxy
    /// U=5: xyyxyx yxxyyx yxyxxy
    /// U=6: xyyyxx yxyxyx yyxxxy
    /// U=7: yxyyxx yyxxyx
    /// U=8: yyxyxx
    /// U=9: yyyxxx
    ///
    /// So P(U <= 0) = 1/20, P(U <= 1) = 2/20, P(U <= 2) = 4/20,
    /// P(U <= 3) = 7/20, P(U <= 4) = 10/20.
    #[test]
    fn exact_distribution_m3_n3_matches_hand_enumeration() {
        let (counts, total) = exact_counts(3, 3, 9).unwrap();
        assert_eq!(counts, vec![1, 1, 2, 3, 3, 3, 3, 2, 1, 1]);
        assert_eq!(total, 20);
        let cdf = exact_lower_cdf(3, 3, 4).unwrap();
        let expected = [1.0 / 20.0, 2.0 / 20.0, 4.0 / 20.0, 7.0 / 20.0, 10.0 / 20.0];
        for (p, e) in cdf.iter().zip(expected) {
            assert_close!(*p, e);
        }
    }

    /// m = 2, n = 3: C(5, 2) = 10 orderings; U = sum over the two x's of the
    /// y's before each, i.e. pairs 0 <= a <= b <= 3: (0,0) (0,1) (0,2) (1,1)
    /// (0,3) (1,2) (1,3) (2,2) (2,3) (3,3) -> U = 0 1 2 2 3 3 4 4 5 6.
    #[test]
    fn exact_distribution_m2_n3_is_symmetric_in_m_and_n() {
        let expected = vec![1, 1, 2, 2, 2, 1, 1];
        assert_eq!(exact_counts(2, 3, 6).unwrap(), (expected.clone(), 10));
        assert_eq!(exact_counts(3, 2, 6).unwrap(), (expected, 10));
    }

    /// Brute force: every subset of positions of the x's among m + n slots.
    #[test]
    fn exact_distribution_matches_brute_force_enumeration() {
        for m in 1..=6usize {
            for n in 1..=6usize {
                let mut brute = vec![0u128; m * n + 1];
                for mask in 0u32..(1 << (m + n)) {
                    if mask.count_ones() as usize != m {
                        continue;
                    }
                    // Bit p set: slot p (ascending) holds an x.
                    let (mut ys_before, mut u) = (0, 0);
                    for p in 0..m + n {
                        if mask & (1 << p) != 0 {
                            u += ys_before;
                        } else {
                            ys_before += 1;
                        }
                    }
                    brute[u] += 1;
                }
                let total: u128 = brute.iter().sum();
                assert_eq!(
                    exact_counts(m, n, m * n),
                    Some((brute, total)),
                    "m={m} n={n}"
                );
            }
        }
    }

    /// m = n = 5: the q-binomial [10 choose 5] starts 1, 1, 2, 3, 5, 7
    /// (partitions of u fitting a 5x5 box), total C(10, 5) = 252, so
    /// P(U <= 2) = 4/252 = 0.0159 <= 0.025 < P(U <= 3) = 7/252 = 0.0278:
    /// the tabulated two-sided 5% critical value U = 2, i.e. k = 3, coverage
    /// 1 - 8/252 = 0.968.
    #[test]
    fn critical_value_m5_n5_at_95_percent_matches_tables() {
        let (counts, total) = exact_counts(5, 5, 5).unwrap();
        assert_eq!(counts, vec![1, 1, 2, 3, 5, 7]);
        assert_eq!(total, 252);
        let (k, achieved) = interval_rank(5, 5, 0.95);
        assert_eq!(k, 3);
        assert_close!(achieved, 1.0 - 8.0 / 252.0);
    }

    /// Other table entries (two-sided 5%): n1 = n2 = 6 -> U = 5, n1 = n2 = 8
    /// -> U = 13, n1 = n2 = 10 -> U = 23, n1 = n2 = 20 -> U = 127,
    /// n1 = 4, n2 = 8 -> U = 4, n1 = 3, n2 = 10 -> U = 3.
    #[test]
    fn critical_values_match_published_tables() {
        for (m, n, u_crit) in [
            (6, 6, 5),
            (8, 8, 13),
            (10, 10, 23),
            (20, 20, 127),
            (4, 8, 4),
            (3, 10, 3),
        ] {
            let (k, achieved) = interval_rank(m, n, 0.95);
            assert_eq!(k, u_crit + 1, "m={m} n={n}");
            assert!(achieved >= 0.95, "m={m} n={n}: {achieved}");
        }
    }

    /// m = n = 3 at 95%: P(U <= 0) = 1/20 = 0.05 > 0.025, so even the full
    /// range falls short: k = 1 with coverage 1 - 2/20 = 0.9. At 90% the
    /// full range is just enough; at 80%, P(U <= 1) = 2/20 = 0.1 <= 0.1 so
    /// k = 2 with coverage 1 - 4/20 = 0.8 (needs the rounding slack:
    /// (1 - 0.8) / 2 = 0.09999999999999998 in binary).
    #[test]
    fn small_samples_fall_back_to_the_full_range() {
        let (k, achieved) = interval_rank(3, 3, 0.95);
        assert_eq!(k, 1);
        assert_close!(achieved, 0.9);
        assert_eq!(interval_rank(3, 3, 0.90).0, 1);
        let (k, achieved) = interval_rank(3, 3, 0.80);
        assert_eq!(k, 2);
        assert_close!(achieved, 0.8);
        // m = n = 4: P(U <= 0) = 1/70 = 0.0143 <= 0.025 < P(U <= 1) = 2/70:
        // k = 1 reaches 95%, with coverage 1 - 2/70 = 0.971.
        let (k, achieved) = interval_rank(4, 4, 0.95);
        assert_eq!(k, 1);
        assert_close!(achieved, 1.0 - 2.0 / 70.0);
        // m = n = 1: one pair, P(U <= 0) = 1/2: a point with coverage 0.
        assert_eq!(interval_rank(1, 1, 0.95), (1, 0.0));
    }

    /// base = [100, 100, 100], new = [110, 110, 110]: all 9 pairwise log
    /// ratios are ln(110/100) = ln 1.1, so the estimate and both bounds are
    /// ln 1.1; m = n = 3 at 95% gives k = 1 with coverage 0.9.
    #[test]
    fn constant_shift_m3() {
        let s = hodges_lehmann(&[100.0; 3], &[110.0; 3], 0.95).unwrap();
        let ln11 = 1.1f64.ln();
        assert_close!(s.estimate, ln11);
        assert_close!(s.low, ln11);
        assert_close!(s.high, ln11);
        assert_close!(s.achieved_confidence, 0.9);
        assert_eq!((s.m, s.n), (3, 3));
    }

    /// ln base = 0.00, 0.01, 0.02, 0.03, 0.04 and ln new = 0.005, 0.015,
    /// 0.025, 0.035, 0.045: D = ln new_j - ln base_i = (j - i + 0.5) * 0.01,
    /// and d = j - i in -4..=4 occurs 5 - |d| times. Sorted, with cumulative
    /// counts: d=-4: 1, d=-3: 3, d=-2: 6, d=-1: 10, d=0: 15, d=1: 19,
    /// d=2: 22, d=3: 24, d=4: 25. With k = 3 (m = n = 5 at 95%):
    /// D_(3) has d = -3 -> -0.025; D_(13) (median of 25) has d = 0 -> 0.005;
    /// D_(23) has d = 3 -> 0.035.
    #[test]
    fn order_statistics_m5_n5_hand_computed() {
        let base: Vec<f64> = (0..5).map(|i| (i as f64 * 0.01).exp()).collect();
        let new: Vec<f64> = (0..5).map(|j| ((j as f64 + 0.5) * 0.01).exp()).collect();
        let s = hodges_lehmann(&base, &new, 0.95).unwrap();
        assert_close!(s.estimate, 0.005);
        assert_close!(s.low, -0.025);
        assert_close!(s.high, 0.035);
        assert_close!(s.achieved_confidence, 1.0 - 8.0 / 252.0);
    }

    /// m = 1, n = 2: pairwise log ratios 0.1 and 0.3; the median of an even
    /// count is their mean, 0.2. k_max = (2 + 1) / 2 = 1, P(U <= 0) = 1/3,
    /// so the interval is [0.1, 0.3] with coverage 1 - 2/3 = 1/3.
    #[test]
    fn even_number_of_pairs_takes_the_mean_of_the_middle_two() {
        let s = hodges_lehmann(&[1.0], &[0.1f64.exp(), 0.3f64.exp()], 0.95).unwrap();
        assert_close!(s.estimate, 0.2);
        assert_close!(s.low, 0.1);
        assert_close!(s.high, 0.3);
        assert_close!(s.achieved_confidence, 1.0 / 3.0);
    }

    #[test]
    fn z_for_inverts_the_normal_cdf() {
        assert_close!(z_for(0.95), 1.959_963_984_540_054, 1e-12);
        assert_close!(z_for(0.90), 1.644_853_626_951_472_2, 1e-12);
        assert_close!(z_for(0.99), 2.575_829_303_548_901, 1e-12);
    }

    #[test]
    fn normal_cdf_matches_reference_values() {
        // Reference: 0.5 * erfc(-x / sqrt 2) in double precision.
        for (x, p) in [
            (0.0, 0.5),
            (-1.0, 0.158_655_253_931_457_07),
            (-1.959_963_984_540_054, 0.025),
            (-2.0, 0.022_750_131_948_179_22),
            (-3.0, 0.001_349_898_031_630_095_7),
            (1.0, 0.841_344_746_068_542_9),
            (0.5, 0.691_462_461_274_013_1),
        ] {
            assert_close!(std_normal_cdf(x), p, 1e-15);
        }
        // Tails, relatively.
        let rel = |a: f64, b: f64| ((a - b) / b).abs();
        assert!(rel(std_normal_cdf(-5.0), 2.866_515_718_791_946e-7) < 1e-9);
        assert!(rel(std_normal_cdf(-8.0), 6.220_960_574_271_819e-16) < 1e-8);
        assert_eq!(std_normal_cdf(-40.0), 0.0);
        assert_eq!(std_normal_cdf(40.0), 1.0);
    }

    /// Near the switch to the approximation (60 a side), the normal
    /// critical value is within two ranks of the exact one (of about 1800),
    /// and the exact coverage of the interval it picks is within 0.001 of
    /// both the requested confidence and the coverage it claims.
    #[test]
    fn normal_approximation_agrees_with_exact_at_60_a_side() {
        for confidence in [0.90, 0.95, 0.99] {
            let threshold = (1.0 - confidence) / 2.0;
            let (k_exact, c_exact) = exact_rank(60, 60, threshold).unwrap();
            let (k_normal, c_normal) = normal_rank(60, 60, threshold);
            let cdf = exact_lower_cdf(60, 60, k_normal).unwrap();
            let c_normal_exact = 1.0 - 2.0 * cdf[k_normal - 1];
            println!(
                "60 x 60 at {confidence}: exact k = {k_exact} (coverage {c_exact:.5}), \
                 normal k = {k_normal} (claims {c_normal:.5}, exactly {c_normal_exact:.5})"
            );
            assert!(k_exact.abs_diff(k_normal) <= 2, "{k_exact} vs {k_normal}");
            assert!(c_exact >= confidence, "{c_exact}");
            assert!(close(c_normal, c_normal_exact, 1e-3));
            assert!(close(c_normal_exact, confidence, 1e-3));
        }
    }

    #[test]
    fn large_samples_use_the_normal_approximation() {
        // 100 x 100 = 10 000 pairs > EXACT_MAX_PAIRS.
        let base: Vec<f64> = (0..100).map(|i| 100.0 + i as f64 * 0.1).collect();
        let new: Vec<f64> = base.iter().map(|x| x * 1.2).collect();
        let s = hodges_lehmann(&base, &new, 0.95).unwrap();
        assert_close!(s.estimate, 1.2f64.ln(), 1e-9);
        assert!(s.low < s.estimate && s.estimate < s.high);
        assert!(
            close(s.achieved_confidence, 0.95, 1e-3),
            "{}",
            s.achieved_confidence
        );
    }

    #[test]
    fn degenerate_inputs_return_none() {
        let ok = [1.0, 2.0];
        for bad in [
            &[][..],
            &[0.0][..],
            &[-1.0][..],
            &[1.0, f64::NAN][..],
            &[f64::INFINITY][..],
        ] {
            assert!(hodges_lehmann(bad, &ok, 0.95).is_none());
            assert!(hodges_lehmann(&ok, bad, 0.95).is_none());
            assert!(judge(bad, &ok, true, 0.05, 0.95).is_none());
            assert!(judge(&ok, bad, true, 0.05, 0.95).is_none());
        }
        for confidence in [0.0, -0.5, 1.5, f64::NAN] {
            assert!(hodges_lehmann(&ok, &ok, confidence).is_none());
        }
        // Confidence 1 is accepted: the full range, with what it achieves.
        let s = hodges_lehmann(&ok, &ok, 1.0).unwrap();
        assert_close!(s.achieved_confidence, 1.0 - 2.0 / 6.0);
        for noise in [-0.01, f64::NAN, f64::INFINITY] {
            assert!(judge(&ok, &ok, true, noise, 0.95).is_none());
        }
    }

    /// [90, 100, 110]: mean 100, deviations -10, 0, 10, sample variance
    /// (100 + 0 + 100) / 2 = 100, s = 10, CV = 10 / 100 = 0.1.
    #[test]
    fn coefficient_of_variation_hand_computed() {
        assert_close!(
            coefficient_of_variation(&[90.0, 100.0, 110.0]).unwrap(),
            0.1
        );
        assert_close!(coefficient_of_variation(&[5.0, 5.0]).unwrap(), 0.0);
        assert_eq!(coefficient_of_variation(&[5.0]), None);
        assert_eq!(coefficient_of_variation(&[]), None);
        assert_eq!(coefficient_of_variation(&[-1.0, 1.0]), None);
        assert_eq!(coefficient_of_variation(&[1.0, f64::NAN]), None);
        assert_eq!(coefficient_of_variation(&[f64::MAX, f64::MAX]), None);
    }

    /// Baseline 100 five times (CV 0, so tau = noise = 5%, band ln 1.05 =
    /// 0.0488). With a constant baseline the 25 pairwise ratios are each new
    /// value / 100, five times over: sorted, D_(3) is the smallest new value,
    /// D_(13) the middle one and D_(23) the largest (k = 3 at 95%).
    const FLAT: [f64; 5] = [100.0; 5];

    /// new 110..114: interval [ln 1.10, ln 1.14], 0.0953 > 0.0488.
    #[test]
    fn clear_regression() {
        let j = judge(
            &FLAT,
            &[110.0, 111.0, 112.0, 113.0, 114.0],
            true,
            0.05,
            0.95,
        )
        .unwrap();
        assert_eq!(j.verdict, Verdict::Regressed);
        assert_close!(j.change, 0.12);
        assert_close!(j.change_low, 0.10);
        assert_close!(j.change_high, 0.14);
        assert_close!(j.tau, 0.05);
        assert_close!(j.achieved_confidence, 1.0 - 8.0 / 252.0);
        assert_eq!((j.m, j.n), (5, 5));
    }

    /// new 86..90: interval [ln 0.86, ln 0.90] = [-0.151, -0.105], wholly
    /// below -0.0488.
    #[test]
    fn clear_improvement() {
        let j = judge(&FLAT, &[86.0, 87.0, 88.0, 89.0, 90.0], true, 0.05, 0.95).unwrap();
        assert_eq!(j.verdict, Verdict::Improved);
        assert_close!(j.change, -0.12);
        assert_close!(j.change_low, -0.14);
        assert_close!(j.change_high, -0.10);
    }

    /// new 98..102: interval [ln 0.98, ln 1.02] = [-0.0202, 0.0198], inside
    /// [-0.0488, 0.0488].
    #[test]
    fn within_the_noise_band_is_unchanged() {
        let j = judge(&FLAT, &[98.0, 99.0, 100.0, 101.0, 102.0], true, 0.05, 0.95).unwrap();
        assert_eq!(j.verdict, Verdict::Unchanged);
        assert_close!(j.change, 0.0);
    }

    /// new 100, 102, .., 108: interval [ln 1.00, ln 1.08] = [0, 0.0770]
    /// straddles +0.0488.
    #[test]
    fn straddling_the_band_is_inconclusive() {
        let j = judge(
            &FLAT,
            &[100.0, 102.0, 104.0, 106.0, 108.0],
            true,
            0.05,
            0.95,
        )
        .unwrap();
        assert_eq!(j.verdict, Verdict::Inconclusive);
        assert_close!(j.change, 0.04);
        assert_close!(j.change_low, 0.0);
        assert_close!(j.change_high, 0.08);
    }

    /// Throughput 1000 -> 880..920 tok/s (a 10% drop): natural interval
    /// [ln 0.88, ln 0.92] = [-0.128, -0.083]; oriented (reciprocal) it is
    /// [0.083, 0.128] > 0.0488: REGRESSED, reported as change -0.10 in
    /// [-0.12, -0.08].
    #[test]
    fn throughput_drop_is_a_regression_reported_as_negative_change() {
        let base = [1000.0; 5];
        let j = judge(
            &base,
            &[880.0, 890.0, 900.0, 910.0, 920.0],
            false,
            0.05,
            0.95,
        )
        .unwrap();
        assert_eq!(j.verdict, Verdict::Regressed);
        assert_close!(j.change, -0.10);
        assert_close!(j.change_low, -0.12);
        assert_close!(j.change_high, -0.08);
        // And a 10% gain is an improvement.
        let j = judge(
            &base,
            &[1080.0, 1090.0, 1100.0, 1110.0, 1120.0],
            false,
            0.05,
            0.95,
        )
        .unwrap();
        assert_eq!(j.verdict, Verdict::Improved);
        assert_close!(j.change, 0.10);
    }

    /// A 4.9% latency drop (100 -> 95.1, ln 0.951 = -0.0502) is a 5.15%
    /// throughput gain (1 / 0.951 = 1.0515). With the symmetric band
    /// +-ln 1.05 = +-0.0488 both are IMPROVED; a band [ln 0.95, ln 1.05] =
    /// [-0.0513, 0.0488] would call the latency UNCHANGED and the same
    /// change seen as throughput IMPROVED.
    #[test]
    fn the_band_is_symmetric_under_the_reciprocal() {
        let latency = judge(&FLAT, &[95.1; 5], true, 0.05, 0.95).unwrap();
        let rate = judge(&[1.0 / 100.0; 5], &[1.0 / 95.1; 5], false, 0.05, 0.95).unwrap();
        assert_eq!(latency.verdict, Verdict::Improved);
        assert_eq!(rate.verdict, Verdict::Improved);
        assert_close!(latency.change, -0.049);
        assert_close!(rate.change, 100.0 / 95.1 - 1.0);
    }

    /// base [90, 100, 110] has CV 0.1 (see above), but the band stays the
    /// declared 5% (ln 1.05 = 0.0488): the spread is in the interval
    /// already. new [120, 120, 120]: the pairwise ratios are 120/110 =
    /// 1.091, 120/100 = 1.2, 120/90 = 1.333; m = n = 3 gives the full range
    /// [ln 1.091, ln 1.333] = [0.087, 0.288], wholly above 0.0488:
    /// REGRESSED. (The rule before, tau = max(noise, 2 CV(base)) = 0.2,
    /// called it INCONCLUSIVE although every new run is slower than every
    /// baseline run by 9% or more.) A spread that reaches the band makes it
    /// INCONCLUSIVE through the interval: new [100, 110, 120] gives ratios
    /// from 100/110 = 0.909 to 120/90 = 1.333.
    #[test]
    fn a_noisy_baseline_widens_the_interval_not_the_band() {
        let j = judge(&[90.0, 100.0, 110.0], &[120.0; 3], true, 0.05, 0.95).unwrap();
        assert_close!(j.tau, 0.05);
        assert_eq!(j.verdict, Verdict::Regressed);
        assert_close!(j.change, 0.2);
        assert_close!(j.change_low, 120.0 / 110.0 - 1.0);
        assert_close!(j.change_high, 120.0 / 90.0 - 1.0);
        assert_close!(j.achieved_confidence, 0.9);
        let j = judge(
            &[90.0, 100.0, 110.0],
            &[100.0, 110.0, 120.0],
            true,
            0.05,
            0.95,
        )
        .unwrap();
        assert_eq!(j.verdict, Verdict::Inconclusive);
        assert_close!(j.change_low, 100.0 / 110.0 - 1.0);
        assert_close!(j.change_high, 120.0 / 90.0 - 1.0);
        // The declared band is the band, whatever the baseline's count.
        assert_close!(
            judge(&[90.0, 100.0, 110.0], &[120.0; 3], true, 0.3, 0.95)
                .unwrap()
                .tau,
            0.3
        );
        assert_close!(
            judge(&[100.0], &[120.0; 3], true, 0.05, 0.95).unwrap().tau,
            0.05
        );
    }

    /// Error rates of zero everywhere: every difference is 0, so the
    /// interval is [0, 0], inside the 5-point band: UNCHANGED (no ratio
    /// exists, which is why fractions are judged on differences).
    #[test]
    fn absolute_zero_against_zero_is_unchanged() {
        let j = judge_absolute(&[0.0; 3], &[0.0; 3], true, 0.05, 0.95).unwrap();
        assert_eq!(j.verdict, Verdict::Unchanged);
        assert_close!(j.change, 0.0);
        assert_close!(j.tau, 0.05);
        assert!(judge(&[0.0; 3], &[0.0; 3], true, 0.05, 0.95).is_none());
    }

    /// Error rate 0 -> 10%, 12%, 14%: the nine differences are the new
    /// values three times over; m = n = 3 gives the full range [0.10, 0.14]
    /// at 90%, wholly above the 0.05 band: REGRESSED by 12 points.
    #[test]
    fn absolute_errors_appearing_regress() {
        let j = judge_absolute(&[0.0; 3], &[0.10, 0.12, 0.14], true, 0.05, 0.95).unwrap();
        assert_eq!(j.verdict, Verdict::Regressed);
        assert_close!(j.change, 0.12);
        assert_close!(j.change_low, 0.10);
        assert_close!(j.change_high, 0.14);
        assert_close!(j.achieved_confidence, 0.9);
    }

    /// Goodput ratio 0.9 -> 0.70..0.74 (higher is better): differences
    /// [-0.20, -0.16], oriented [0.16, 0.20] > 0.05: REGRESSED, reported as
    /// a change of -0.18.
    #[test]
    fn absolute_drop_of_a_better_when_higher_fraction_regresses() {
        let j = judge_absolute(&[0.9; 3], &[0.70, 0.72, 0.74], false, 0.05, 0.95).unwrap();
        assert_eq!(j.verdict, Verdict::Regressed);
        assert_close!(j.change, -0.18);
        assert_close!(j.change_low, -0.20);
        assert_close!(j.change_high, -0.16);
    }

    /// base [0, 0.1, 0.2] (s = 0.1) against new [0.3; 3]: differences 0.3,
    /// 0.2, 0.1, interval [0.1, 0.3], wholly above the declared 0.05 band:
    /// REGRESSED (the band is not widened to 2 s = 0.2). Against new [0.1;
    /// 3]: differences 0.1, 0, -0.1, interval [-0.1, 0.1] straddles the
    /// band: INCONCLUSIVE.
    #[test]
    fn absolute_band_is_the_declared_one() {
        let j = judge_absolute(&[0.0, 0.1, 0.2], &[0.3; 3], true, 0.05, 0.95).unwrap();
        assert_close!(j.tau, 0.05);
        assert_eq!(j.verdict, Verdict::Regressed);
        assert_close!(j.change, 0.2);
        let j = judge_absolute(&[0.0, 0.1, 0.2], &[0.1; 3], true, 0.05, 0.95).unwrap();
        assert_eq!(j.verdict, Verdict::Inconclusive);
        assert!(judge_absolute(&[f64::NAN], &[0.0], true, 0.05, 0.95).is_none());
        assert!(judge_absolute(&[], &[0.0], true, 0.05, 0.95).is_none());
        assert!(judge_absolute(&[0.0], &[0.0], true, -1.0, 0.95).is_none());
    }

    #[test]
    fn verdicts_print_and_serialize_in_uppercase() {
        for (v, s) in [
            (Verdict::Regressed, "REGRESSED"),
            (Verdict::Improved, "IMPROVED"),
            (Verdict::Unchanged, "UNCHANGED"),
            (Verdict::Inconclusive, "INCONCLUSIVE"),
        ] {
            assert_eq!(v.to_string(), s);
            assert_eq!(serde_json::to_string(&v).unwrap(), format!("\"{s}\""));
            assert_eq!(
                serde_json::from_str::<Verdict>(&format!("\"{s}\"")).unwrap(),
                v
            );
        }
        let j = judge(&FLAT, &[110.0; 5], true, 0.05, 0.95).unwrap();
        let json = serde_json::to_value(j).unwrap();
        assert_eq!(json["verdict"], "REGRESSED");
        for key in [
            "change",
            "change_low",
            "change_high",
            "tau",
            "achieved_confidence",
            "m",
            "n",
        ] {
            assert!(json.get(key).is_some(), "{key}");
        }
    }

    /// Per-run values: lognormal around 100 with the given CV (mean kept at
    /// 100 * shift), by Box-Muller.
    fn lognormal_runs(
        rng: &mut rand_chacha::ChaCha8Rng,
        count: usize,
        cv: f64,
        shift: f64,
    ) -> Vec<f64> {
        use rand::RngExt;
        let sigma = (1.0 + cv * cv).ln().sqrt();
        (0..count)
            .map(|_| {
                let u1 = 1.0 - rng.random::<f64>(); // (0, 1]
                let u2 = rng.random::<f64>();
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                100.0 * shift * (sigma * z - sigma * sigma / 2.0).exp()
            })
            .collect()
    }

    /// What a simulation saw.
    #[derive(Debug, Default)]
    struct Tally {
        /// REGRESSED, IMPROVED, UNCHANGED, INCONCLUSIVE.
        verdicts: [usize; 4],
        /// Trials whose interval lies wholly above the band.
        above_declared: usize,
    }

    impl fmt::Display for Tally {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let [r, i, u, c] = self.verdicts;
            write!(
                f,
                "REGRESSED {r}, IMPROVED {i}, UNCHANGED {u}, INCONCLUSIVE {c}; \
                 wholly above the band in {}",
                self.above_declared
            )
        }
    }

    const NOISE: f64 = 0.05;

    /// Judges `trials` simulated comparisons of `runs` baseline runs against
    /// `runs` new runs (mean scaled by `shift`), both lognormal with `cv`.
    fn simulate(seed: u64, trials: usize, runs: usize, cv: f64, shift: f64) -> Tally {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut tally = Tally::default();
        for _ in 0..trials {
            let base = lognormal_runs(&mut rng, runs, cv, 1.0);
            let new = lognormal_runs(&mut rng, runs, cv, shift);
            let j = judge(&base, &new, true, NOISE, 0.95).unwrap();
            let slot = match j.verdict {
                Verdict::Regressed => 0,
                Verdict::Improved => 1,
                Verdict::Unchanged => 2,
                Verdict::Inconclusive => 3,
            };
            tally.verdicts[slot] += 1;
            tally.above_declared += usize::from(j.change_low > NOISE);
        }
        tally
    }

    /// No false alarms: base and new from the same distribution (lognormal,
    /// 2% CV), declared noise 5%, 95% confidence, 5 and 3 runs a side, 1000
    /// trials each. Run with `--nocapture` to see the counts.
    #[test]
    fn no_false_alarms_without_a_change() {
        for (runs, seed) in [(5, 20_240_501), (3, 20_240_502)] {
            let tally = simulate(seed, 1000, runs, 0.02, 1.0);
            println!("no change, {runs} vs {runs} runs, 2% CV, noise 5%, 1000 trials: {tally}");
            let [regressed, improved, ..] = tally.verdicts;
            assert_eq!(regressed, 0);
            assert_eq!(improved, 0);
        }
    }

    /// And a real 10% slowdown is caught, same noise, 5 runs a side. The
    /// misses are INCONCLUSIVE, never UNCHANGED or IMPROVED; they all come
    /// from the width of the interval with 5 runs a side against a 5% band
    /// (its lower end is not above +5% in about 20% of the trials; 805 of
    /// 1000 are REGRESSED). `power.rs` and the `power` example measure the
    /// rest of the table.
    #[test]
    fn a_real_regression_is_detected() {
        let tally = simulate(20_240_503, 1000, 5, 0.02, 1.10);
        println!("true +10%, 5 vs 5 runs, 2% CV, noise 5%, 1000 trials: {tally}");
        let [regressed, improved, unchanged, _] = tally.verdicts;
        assert_eq!(improved + unchanged, 0);
        assert!(regressed >= 750, "{regressed} of 1000");
    }

    fn positive_runs() -> impl Strategy<Value = Vec<f64>> {
        prop::collection::vec(1e-3f64..1e6, 1..12)
    }

    proptest! {
        #[test]
        fn interval_contains_the_estimate(base in positive_runs(), new in positive_runs(), confidence in 0.5f64..0.999) {
            let s = hodges_lehmann(&base, &new, confidence).unwrap();
            prop_assert!(s.low <= s.estimate && s.estimate <= s.high, "{s:?}");
            prop_assert!((0.0..=1.0).contains(&s.achieved_confidence), "{s:?}");
        }

        #[test]
        fn swapping_the_sides_negates_the_shift(base in positive_runs(), new in positive_runs()) {
            let s = hodges_lehmann(&base, &new, 0.95).unwrap();
            let t = hodges_lehmann(&new, &base, 0.95).unwrap();
            prop_assert_eq!(t.estimate, -s.estimate);
            prop_assert_eq!(t.low, -s.high);
            prop_assert_eq!(t.high, -s.low);
            prop_assert_eq!(t.achieved_confidence, s.achieved_confidence);
        }

        #[test]
        fn judge_never_panics(
            base in prop::collection::vec(any::<f64>(), 0..8),
            new in prop::collection::vec(any::<f64>(), 0..8),
            higher_is_worse in any::<bool>(),
            noise in any::<f64>(),
            confidence in any::<f64>(),
        ) {
            let _ = judge(&base, &new, higher_is_worse, noise, confidence);
        }
    }
}
