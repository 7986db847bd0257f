//! Change points: where the level of one series (one benchmark point's
//! metric over the commits of main) shifted, by how much, and how surely.
//! Pure functions, no I/O, no clock, no randomness: the same series and
//! settings always give the same answer.
//!
//! # The algorithm
//!
//! E-Divisive means (Matteson and James, 2014) by binary segmentation, with
//! the windows and the re-weigh of Apache Otava (formerly Hunter; the CI of
//! `MongoDB` runs the same E-Divisive):
//!
//! 1. **Split.** Within a segment, the candidate split is the one that
//!    maximizes the energy statistic `Q = mn/(m+n) · (2/mn Σ|x−y| −
//!    Σ|x−x'|/C(m,2) − Σ|y−y'|/C(n,2))` (`α = 1`) between the `m` values on
//!    its left and the `n` on its right, each side at least
//!    [`Settings::min_segment`] long. It is computed for every split of a
//!    segment in `O(n²)` by moving one value at a time from right to left.
//! 2. **Test.** The split stands when Welch's t-test between the two sides
//!    gives a p-value of at most [`Settings::max_pvalue`] (Otava uses
//!    Student's; Welch's does not assume both levels equally noisy); then
//!    both sides are split in turn, else the segment is final. Steps 1 and
//!    2 run over the whole series and over windows of 50 values that start
//!    every 25: binary segmentation alone misses a change that a neighbour
//!    hides (up 3%, then down 5%: from far away the segment barely moved),
//!    and a window sees it from near. (Otava's first pass is ten times
//!    looser than its last; measured here, that finds a few more 3% steps
//!    and many more false alarms in a long flat history, so one limit
//!    serves both.)
//! 3. **Re-weigh** (Otava's merge). Each candidate is tested again against
//!    its neighbouring segments only (from the previous candidate to the
//!    next); the weakest that fails is dropped, its two segments merge, and
//!    the rest are tested again, until every one passes. Failing is, first,
//!    a p-value over [`Settings::max_pvalue`] or a side shorter than
//!    [`Settings::min_segment`] (windows may propose two candidates a
//!    commit apart), the largest p-value dropped first; then a shift under
//!    [`Settings::min_relative`], the smallest first. A slow drift that
//!    steps 1 and 2 cut into a staircase keeps only the steps its
//!    neighbours confirm, one or two.
//!
//! Why a t-test and not the permutation test of the paper: a permutation
//! test redraws the whole segment a few hundred times per split, `O(R n²)`,
//! which for 2,000 commits is seconds, not milliseconds; the t-test is
//! `O(n)` and plain arithmetic, so no seed is needed for determinism. Its
//! price is that the p-value of the *best* of many splits is optimistic
//! (the split was chosen because it looks different); the default limit
//! is small to pay for that, and `docs/changepoint-study.md` measures the
//! false alarms it leaves. PELT was not chosen: it needs a penalty in
//! units of the noise's likelihood (a model of the noise per metric),
//! where E-Divisive assumes no model to place a split and its t-test
//! gives each shift a p-value a reader can weigh.
//!
//! # Reading the answer
//!
//! A [`ChangePoint`]'s `before` and `after` are the **medians** of the
//! segments on either side, each bounded by the neighbouring change points
//! (or the ends of the series): robust to one odd run, and the level a
//! reader would draw by eye. Its `pvalue` is the re-weighed one: Welch's
//! test between those two segments.
//!
//! Non-finite values (a missing or broken measurement) are **skipped**: the
//! series is read as if they were not there, and indices still point into
//! the series as given. A series with fewer than `2 × min_segment` finite
//! values has no change point.
//!
//! # Known limits
//!
//! A slow drift has no single commit to blame; it is reported as one step
//! (sometimes two) somewhere within it, and a long steady trend as a
//! staircase. Two shifts closer than `min_segment` commits are seen as
//! one, and a spike of fewer than `min_segment` commits that comes back is
//! never a level of its own. A small step is found near, not always at,
//! its commit: at 2% noise a 3% step is within two commits of its place
//! about three times in four. A shift dropped for `min_relative` merges
//! its two segments, so its neighbour is measured against their mixed
//! level.

mod ttest;

pub mod study;

use std::cmp::Ordering;

/// How sure and how large a shift must be to be reported.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// The largest p-value (Welch's t-test, two-sided) of a reported
    /// shift, in `(0, 1)`. Default 0.001, Otava's: at 2% noise it finds a
    /// 5% step 97% of the time, and reports a shift that is not there
    /// about once in 20 flat histories of 200 commits
    /// (`docs/changepoint-study.md`).
    pub max_pvalue: f64,
    /// The fewest values a segment may have, at least 2 (a smaller value
    /// is read as 2). Default 5: shifts closer than this are one shift.
    pub min_segment: usize,
    /// The smallest shift reported, as a fraction of the level before it
    /// (`|after − before| / |before|`), at least 0. Default 0: every
    /// significant shift; the gate passes its noise band here.
    pub min_relative: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            max_pvalue: 0.001,
            min_segment: 5,
            min_relative: 0.0,
        }
    }
}

/// Why [`Settings`] read from a file or a command line cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    #[error("max_pvalue must be above 0 and below 1, not {0}")]
    MaxPvalue(f64),
    #[error("min_segment must be at least 2, not {0}")]
    MinSegment(usize),
    #[error("min_relative must be a fraction of at least 0 (0.05 is 5%), not {0}")]
    MinRelative(f64),
}

impl Settings {
    /// Checks that every setting is in its range. [`detect`] itself never
    /// fails: a p-value limit out of range (or NaN) finds nothing, a
    /// `min_segment` below 2 is read as 2, and a NaN `min_relative` is 0.
    ///
    /// # Errors
    ///
    /// The first setting out of its range.
    pub fn check(&self) -> Result<(), SettingsError> {
        if !(self.max_pvalue > 0.0 && self.max_pvalue < 1.0) {
            return Err(SettingsError::MaxPvalue(self.max_pvalue));
        }
        if self.min_segment < 2 {
            return Err(SettingsError::MinSegment(self.min_segment));
        }
        if !(self.min_relative >= 0.0 && self.min_relative.is_finite()) {
            return Err(SettingsError::MinRelative(self.min_relative));
        }
        Ok(())
    }
}

/// One shift of level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangePoint {
    /// The first index of the new level: `series[index]` is the first value
    /// after the shift.
    pub index: usize,
    /// The median of the segment before (from the previous change point).
    pub before: f64,
    /// The median of the segment after (to the next change point).
    pub after: f64,
    /// `(after − before) / |before|`: 0.05 is 5% up. Infinite when `before`
    /// is 0 and `after` is not.
    pub relative: f64,
    /// Welch's two-sided p-value between the two segments; the confidence
    /// is `1 − pvalue`.
    pub pvalue: f64,
}

/// The change points of `series`, sorted by index. See the module
/// documentation for the algorithm and how non-finite values are read.
#[must_use]
pub fn detect(series: &[f64], settings: &Settings) -> Vec<ChangePoint> {
    let (positions, values): (Vec<usize>, Vec<f64>) = series
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_finite())
        .map(|(i, v)| (i, *v))
        .unzip();
    let min_segment = settings.min_segment.max(2);
    let candidates = candidates(&values, min_segment, settings.max_pvalue);
    reweigh(&values, candidates, min_segment, settings)
        .into_iter()
        .map(|cp| ChangePoint {
            index: positions[cp.index],
            ..cp
        })
        .collect()
}

/// The length of the overlapping windows of the candidate pass (Otava's
/// `window_len`); they start every half window, the last ends at the end.
const WINDOW: usize = 50;

/// The candidate pass: the significant splits of the whole series and of
/// every window, sorted, without repeats.
fn candidates(values: &[f64], min_segment: usize, max_pvalue: f64) -> Vec<usize> {
    let n = values.len();
    let mut found = split_all(values, min_segment, max_pvalue);
    if n > WINDOW {
        let mut start = 0;
        loop {
            let end = (start + WINDOW).min(n);
            let first = end - WINDOW;
            let window = split_all(&values[first..end], min_segment, max_pvalue);
            found.extend(window.into_iter().map(|i| first + i));
            if end == n {
                break;
            }
            start += WINDOW / 2;
        }
    }
    found.sort_unstable();
    found.dedup();
    found
}

/// Binary segmentation: the significant splits of `values` and of the
/// segments they make, in any order.
fn split_all(values: &[f64], min_segment: usize, max_pvalue: f64) -> Vec<usize> {
    let mut found = Vec::new();
    let mut pending = vec![(0, values.len())];
    while let Some((start, end)) = pending.pop() {
        let segment = &values[start..end];
        let Some(at) = best_split(segment, min_segment) else {
            continue;
        };
        if ttest::welch_pvalue(&segment[..at], &segment[at..]) <= max_pvalue {
            found.push(start + at);
            pending.push((start, start + at));
            pending.push((start + at, end));
        }
    }
    found
}

/// The split of `xs` (the index of the first value on the right) that
/// maximizes the E-Divisive energy statistic, leaving at least
/// `min_segment` values on each side; the first of equals. `None` when
/// `xs` is too short or no statistic is finite.
fn best_split(xs: &[f64], min_segment: usize) -> Option<usize> {
    let n = xs.len();
    if n < 2 * min_segment {
        return None;
    }
    // row[i] = Σ_j |x_i − x_j| over the whole segment.
    let row: Vec<f64> = xs
        .iter()
        .map(|x| xs.iter().map(|y| (x - y).abs()).sum())
        .collect();
    // With the split before `s`: within-left, within-right and between sums
    // of distances (each pair once).
    let mut within_left = 0.0;
    let mut within_right = row.iter().sum::<f64>() / 2.0;
    let mut between = 0.0;
    let mut best: Option<(usize, f64)> = None;
    for (moved, x) in xs.iter().enumerate().take(n - min_segment) {
        let to_left: f64 = xs[..moved].iter().map(|y| (x - y).abs()).sum();
        let to_right = row[moved] - to_left;
        within_left += to_left;
        within_right -= to_right;
        between += to_right - to_left;
        let s = moved + 1;
        if s < min_segment {
            continue;
        }
        let q = energy(s, n - s, within_left, within_right, between);
        if q.is_finite() && best.is_none_or(|(_, b)| q > b) {
            best = Some((s, q));
        }
    }
    best.map(|(s, _)| s)
}

/// `Q` of Matteson and James for `m` values on the left and `k` on the
/// right (both at least 2), from their sums of pairwise distances.
#[allow(clippy::cast_precision_loss)] // segment lengths are far below 2^52
fn energy(m: usize, k: usize, within_left: f64, within_right: f64, between: f64) -> f64 {
    let (m, k) = (m as f64, k as f64);
    let e = 2.0 * between / (m * k)
        - 2.0 * within_left / (m * (m - 1.0))
        - 2.0 * within_right / (k * (k - 1.0));
    m * k / (m + k) * e
}

/// Otava's re-weigh: drops the weakest candidate that fails against its
/// neighbouring segments until all pass; returns the survivors with their
/// levels (indices into `values`). Candidates of different windows may lie
/// closer than `min_segment`: one of them fails as if not significant.
fn reweigh(
    values: &[f64],
    mut candidates: Vec<usize>,
    min_segment: usize,
    settings: &Settings,
) -> Vec<ChangePoint> {
    loop {
        let bounds = |i: usize| {
            let start = if i == 0 { 0 } else { candidates[i - 1] };
            let end = candidates.get(i + 1).copied().unwrap_or(values.len());
            (start, end)
        };
        let points: Vec<ChangePoint> = (0..candidates.len())
            .map(|i| {
                let (start, end) = bounds(i);
                judge(values, start, candidates[i], end)
            })
            .collect();
        let weakest = points
            .iter()
            .enumerate()
            .filter_map(|(i, cp)| {
                let (start, end) = bounds(i);
                let short = cp.index - start < min_segment || end - cp.index < min_segment;
                let significant = cp.pvalue <= settings.max_pvalue;
                if short || !significant {
                    Some((i, Weakness::Doubtful(cp.pvalue)))
                } else if cp.relative.abs() < settings.min_relative {
                    Some((i, Weakness::Small(cp.relative.abs())))
                } else {
                    None
                }
            })
            .max_by(|(_, a), (_, b)| a.order(b))
            .map(|(i, _)| i);
        match weakest {
            Some(i) => {
                candidates.remove(i);
            }
            None => return points,
        }
    }
}

/// Why a candidate fails the re-weigh, ordered so that the greatest is
/// dropped first: one in doubt (not significant, or with a side shorter
/// than `min_segment`) before one only too small; the larger p-value, or
/// the smaller shift, first. (`max_by` keeps the last of equals.)
#[derive(Debug, Clone, Copy)]
enum Weakness {
    /// Its shift `|relative|` is under `min_relative`.
    Small(f64),
    /// Its p-value.
    Doubtful(f64),
}

impl Weakness {
    fn order(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Self::Doubtful(_), Self::Small(_)) => Ordering::Greater,
            (Self::Small(_), Self::Doubtful(_)) => Ordering::Less,
            (Self::Doubtful(a), Self::Doubtful(b)) => a.total_cmp(b),
            (Self::Small(a), Self::Small(b)) => b.total_cmp(a),
        }
    }
}

/// The change point at `at` between the segments `start..at` and `at..end`.
#[allow(clippy::float_cmp)] // equal levels are no shift, even at 0
fn judge(values: &[f64], start: usize, at: usize, end: usize) -> ChangePoint {
    let (left, right) = (&values[start..at], &values[at..end]);
    let before = median(left);
    let after = median(right);
    let relative = if before == after {
        0.0
    } else {
        (after - before) / before.abs()
    };
    ChangePoint {
        index: at,
        before,
        after,
        relative,
        pvalue: ttest::welch_pvalue(left, right),
    }
}

/// The median of finite values (NaN for none).
fn median(xs: &[f64]) -> f64 {
    let mut sorted = xs.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => sorted[n / 2 - 1] / 2.0 + sorted[n / 2] / 2.0,
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // exact levels are meant
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use rand_distr::{Distribution, Normal};

    fn noisy(levels: &[(usize, f64)], noise: f64, seed: u64) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let normal = Normal::new(0.0, noise).expect("a valid deviation");
        levels
            .iter()
            .flat_map(|&(n, level)| std::iter::repeat_n(level, n))
            .map(|level| level * (1.0 + normal.sample(&mut rng)))
            .collect()
    }

    #[test]
    fn a_flat_noisy_series_has_no_change_point() {
        for seed in 0..20 {
            let series = noisy(&[(200, 100.0)], 0.02, seed);
            assert_eq!(detect(&series, &Settings::default()), [], "seed {seed}");
        }
    }

    #[test]
    fn a_clean_step_is_found_at_its_index_with_its_levels() {
        let series = noisy(&[(30, 100.0), (20, 110.0)], 0.0, 0);
        let points = detect(&series, &Settings::default());
        assert_eq!(points.len(), 1, "{points:?}");
        let cp = points[0];
        assert_eq!(cp.index, 30);
        assert_eq!((cp.before, cp.after), (100.0, 110.0));
        assert!((cp.relative - 0.10).abs() < 1e-12);
        assert_eq!(cp.pvalue, 0.0);
    }

    #[test]
    fn a_noisy_step_is_found_near_its_index() {
        let series = noisy(&[(100, 100.0), (100, 95.0)], 0.02, 7);
        let points = detect(&series, &Settings::default());
        assert_eq!(points.len(), 1, "{points:?}");
        let cp = points[0];
        assert!(cp.index.abs_diff(100) <= 2, "{cp:?}");
        assert!((cp.relative + 0.05).abs() < 0.01, "{cp:?}");
        assert!(cp.pvalue < 1e-10, "{cp:?}");
    }

    #[test]
    fn min_relative_drops_small_shifts_and_keeps_large_ones() {
        let series = noisy(&[(60, 100.0), (60, 104.0), (60, 115.0)], 0.01, 3);
        let all = detect(&series, &Settings::default());
        assert_eq!(all.len(), 2, "{all:?}");
        assert!(all[0].index.abs_diff(60) <= 2 && all[1].index.abs_diff(120) <= 2);
        let large = Settings {
            min_relative: 0.06,
            ..Settings::default()
        };
        let points = detect(&series, &large);
        assert_eq!(points.len(), 1, "{points:?}");
        // The 4% shift is gone, and the one left is measured against the
        // merged segment before it.
        assert_eq!(points[0].index, all[1].index);
        assert!((points[0].before - 102.0).abs() < 2.0, "{points:?}");
    }

    #[test]
    fn detection_is_deterministic() {
        let series = noisy(
            &[(50, 100.0), (50, 92.0), (50, 100.0), (50, 85.0)],
            0.03,
            11,
        );
        let first = detect(&series, &Settings::default());
        assert!(!first.is_empty());
        for _ in 0..5 {
            assert_eq!(detect(&series, &Settings::default()), first);
        }
    }

    #[test]
    fn non_finite_values_are_skipped_and_indices_point_into_the_series() {
        let mut series = noisy(&[(30, 100.0), (30, 120.0)], 0.0, 0);
        series.insert(10, f64::NAN);
        series.insert(31, f64::INFINITY); // just before the first 120
        series.insert(0, f64::NEG_INFINITY);
        let points = detect(&series, &Settings::default());
        assert_eq!(points.len(), 1, "{points:?}");
        assert_eq!(points[0].index, 33);
        assert_eq!(series[33], 120.0);
        assert_eq!((points[0].before, points[0].after), (100.0, 120.0));
    }

    #[test]
    fn empty_short_and_broken_input_never_panics() {
        let settings = Settings::default();
        assert_eq!(detect(&[], &settings), []);
        assert_eq!(detect(&[1.0], &settings), []);
        assert_eq!(detect(&[1.0, 2.0, 3.0, 100.0, 100.0, 100.0], &settings), []);
        assert_eq!(detect(&[f64::NAN; 50], &settings), []);
        assert_eq!(detect(&[7.0; 50], &settings), []);
        let huge: Vec<f64> = (0..40)
            .map(|i| if i < 20 { f64::MAX } else { -f64::MAX })
            .collect();
        let _ = detect(&huge, &settings);
        let zero_before = noisy(&[(20, 0.0), (20, 5.0)], 0.0, 0);
        let points = detect(&zero_before, &settings);
        assert_eq!(points.len(), 1);
        assert!(points[0].relative.is_infinite());
        for broken in [
            Settings {
                max_pvalue: f64::NAN,
                ..settings
            },
            Settings {
                max_pvalue: -1.0,
                ..settings
            },
            Settings {
                min_segment: 0,
                ..settings
            },
            Settings {
                min_relative: f64::NAN,
                ..settings
            },
            Settings {
                min_relative: f64::INFINITY,
                ..settings
            },
        ] {
            assert!(broken.check().is_err(), "{broken:?}");
            let _ = detect(&zero_before, &broken);
        }
        assert_eq!(
            detect(
                &zero_before,
                &Settings {
                    max_pvalue: f64::NAN,
                    ..settings
                }
            ),
            []
        );
        assert_eq!(Settings::default().check(), Ok(()));
    }

    proptest! {
        #[test]
        fn detect_never_panics_and_indices_are_in_range_and_sorted(
            series in prop::collection::vec(
                prop_oneof![
                    8 => -1e6..1e6_f64,
                    1 => any::<f64>(),
                    1 => prop::sample::select(vec![0.0, 1.0, f64::NAN, f64::INFINITY]),
                ],
                0..120,
            ),
            min_segment in 0..12_usize,
            max_pvalue in 0.0..0.5_f64,
            min_relative in 0.0..0.2_f64,
        ) {
            let settings = Settings { max_pvalue, min_segment, min_relative };
            let points = detect(&series, &settings);
            let apart = min_segment.max(2);
            for pair in points.windows(2) {
                prop_assert!(pair[0].index + apart <= pair[1].index);
            }
            for cp in &points {
                prop_assert!(cp.index >= apart && cp.index + apart <= series.len());
                prop_assert!(series[cp.index].is_finite());
                prop_assert!(cp.pvalue <= max_pvalue);
                prop_assert!(cp.relative.abs() >= min_relative);
            }
        }
    }
}
