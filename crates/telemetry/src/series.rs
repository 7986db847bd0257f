//! Arithmetic on sampled series, shared by the GPU and server telemetry:
//! summary statistics of the samples inside measurement windows, linear
//! interpolation of a counter at an instant, the increase of a counter
//! that may reset, and thinning of long series for storage. Pure
//! functions on `(t_s, value)` data; no clocks.

use infer_bench_results::telemetry::SeriesStats;

/// A measurement window on the point's clock, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub start_s: f64,
    pub end_s: f64,
}

impl Span {
    pub fn contains(&self, t_s: f64) -> bool {
        t_s >= self.start_s && t_s <= self.end_s
    }
    pub fn len_s(&self) -> f64 {
        (self.end_s - self.start_s).max(0.0)
    }
}

/// Whether `t_s` lies in any of `windows`.
pub fn in_windows(windows: &[Span], t_s: f64) -> bool {
    windows.iter().any(|w| w.contains(t_s))
}

/// Mean, nearest-rank p50 and p95, min and max of `values` (NaNs
/// dropped); `None` when nothing is left.
pub fn stats(values: impl IntoIterator<Item = f64>) -> Option<SeriesStats> {
    let mut v: Vec<f64> = values.into_iter().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    // Nearest rank: the smallest value with at least p% of samples at or below it.
    let rank = |p: f64| {
        let r = (p / 100.0 * n as f64).ceil() as usize;
        v[r.clamp(1, n) - 1]
    };
    Some(SeriesStats {
        count: n as u64,
        mean: v.iter().sum::<f64>() / n as f64,
        min: v[0],
        p50: rank(50.0),
        p95: rank(95.0),
        max: v[n - 1],
    })
}

/// Statistics of the samples `(t_s, value)` inside `windows`.
pub fn window_stats(
    t_s: &[f64],
    values: impl IntoIterator<Item = Option<f64>>,
    windows: &[Span],
) -> Option<SeriesStats> {
    stats(
        t_s.iter()
            .zip(values)
            .filter(|(t, _)| in_windows(windows, **t))
            .filter_map(|(_, v)| v),
    )
}

/// A counter's value at `t`, interpolated linearly between the samples
/// around it; `None` unless samples lie on both sides (or exactly at `t`).
pub fn interpolate(points: &[(f64, f64)], t: f64) -> Option<f64> {
    let after = points.iter().position(|(x, _)| *x >= t)?;
    let (t1, v1) = points[after];
    if t1 == t {
        return Some(v1);
    }
    let (t0, v0) = *points.get(after.checked_sub(1)?)?;
    if t1 <= t0 {
        return Some(v1);
    }
    Some(v0 + (v1 - v0) * (t - t0) / (t1 - t0))
}

/// The increase of a counter over its samples, in order: the sum of the
/// rises, where a fall means the counter was reset (a restarted server)
/// and counts its new value as the rise, as Prometheus' `increase` does.
pub fn increase(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut total = 0.0;
    let mut prev: Option<f64> = None;
    for v in values {
        if let Some(p) = prev {
            total += if v >= p { v - p } else { v };
        }
        prev = Some(v);
    }
    total
}

/// The increase of a counter sampled at `points` (time order) over
/// `window`, between the last sample at or before its start and the first
/// at or after its end, with the time those two samples span. Without a
/// sample on one side the nearest sample inside stands in; `None` without
/// two samples.
pub fn covering_increase(points: &[(f64, f64)], window: Span) -> Option<(f64, f64)> {
    if points.len() < 2 {
        return None;
    }
    let first = points
        .iter()
        .rposition(|(t, _)| *t <= window.start_s)
        .unwrap_or(0);
    let last = points
        .iter()
        .position(|(t, _)| *t >= window.end_s)
        .unwrap_or(points.len() - 1);
    if last <= first {
        return None;
    }
    let span = &points[first..=last];
    Some((
        increase(span.iter().map(|p| p.1)),
        span[span.len() - 1].0 - span[0].0,
    ))
}

/// The integral of `points` over `window` by trapezoids between
/// consecutive samples. Nothing is assumed beyond the first and last
/// sample: only the part of the window they cover counts. Returns the
/// integral and the length covered.
pub fn integrate(points: &[(f64, f64)], window: Span) -> (f64, f64) {
    let mut area = 0.0;
    let mut covered = 0.0;
    for pair in points.windows(2) {
        let ((t0, v0), (t1, v1)) = (pair[0], pair[1]);
        let a = t0.max(window.start_s);
        let b = t1.min(window.end_s);
        if b <= a || t1 <= t0 {
            continue;
        }
        let at = |t: f64| v0 + (v1 - v0) * (t - t0) / (t1 - t0);
        area += (at(a) + at(b)) / 2.0 * (b - a);
        covered += b - a;
    }
    (area, covered)
}

/// How many samples go into each stored point so that at most `max` remain.
pub fn thin_factor(n: usize, max: usize) -> usize {
    if n <= max || max == 0 {
        1
    } else {
        n.div_ceil(max)
    }
}

/// Averages consecutive groups of `k` values (`None`s skipped; a group of
/// only `None`s stays `None`).
pub fn thin(values: &[Option<f64>], k: usize) -> Vec<Option<f64>> {
    if k <= 1 {
        return values.to_vec();
    }
    values
        .chunks(k)
        .map(|c| {
            let v: Vec<f64> = c.iter().flatten().copied().collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        })
        .collect()
}

/// Thins sample times: the mean time of each group.
pub fn thin_times(t_s: &[f64], k: usize) -> Vec<f64> {
    if k <= 1 {
        return t_s.to_vec();
    }
    t_s.chunks(k)
        .map(|c| c.iter().sum::<f64>() / c.len() as f64)
        .collect()
}

/// Thins bit sets: the union of each group.
pub fn thin_bits(values: &[Option<u64>], k: usize) -> Vec<Option<u64>> {
    if k <= 1 {
        return values.to_vec();
    }
    values
        .chunks(k)
        .map(|c| c.iter().flatten().copied().reduce(|a, b| a | b))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_are_hand_computed() {
        // 1..=20: mean 10.5; nearest-rank p50 = 10th value, p95 = 19th.
        let s = stats((1..=20).map(|x| x as f64)).unwrap();
        assert_eq!(s.count, 20);
        assert_eq!(s.mean, 10.5);
        assert_eq!(s.p50, 10.0);
        assert_eq!(s.p95, 19.0);
        assert_eq!((s.min, s.max), (1.0, 20.0));
        let one = stats([7.0]).unwrap();
        assert_eq!((one.p50, one.p95, one.mean), (7.0, 7.0, 7.0));
        assert!(stats([f64::NAN]).is_none());
        assert!(stats(std::iter::empty()).is_none());
    }

    #[test]
    fn window_stats_use_only_samples_inside() {
        let t = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
        let v = [
            Some(100.0),
            Some(1.0),
            None,
            Some(3.0),
            Some(5.0),
            Some(100.0),
        ];
        let w = [Span {
            start_s: 1.0,
            end_s: 4.0,
        }];
        let s = window_stats(&t, v, &w).unwrap();
        assert_eq!(s.count, 3);
        assert_eq!(s.mean, 3.0);
        assert_eq!(s.max, 5.0);
    }

    #[test]
    fn interpolation_needs_both_sides() {
        let p = [(0.0, 0.0), (1.0, 10.0), (3.0, 30.0)];
        assert_eq!(interpolate(&p, 0.5), Some(5.0));
        assert_eq!(interpolate(&p, 2.0), Some(20.0));
        assert_eq!(interpolate(&p, 3.0), Some(30.0));
        assert_eq!(interpolate(&p, 0.0), Some(0.0));
        assert_eq!(interpolate(&p, -1.0), None);
        assert_eq!(interpolate(&p, 4.0), None);
    }

    #[test]
    fn increase_survives_resets() {
        assert_eq!(increase([5.0, 7.0, 10.0]), 5.0);
        // Reset after 10: the new value 2 is the rise, then +3.
        assert_eq!(increase([5.0, 10.0, 2.0, 5.0]), 10.0);
        assert_eq!(increase([3.0]), 0.0);
    }

    #[test]
    fn covering_increase_brackets_the_window() {
        let p = [
            (0.0, 0.0),
            (1.0, 10.0),
            (2.0, 25.0),
            (3.0, 40.0),
            (4.0, 41.0),
        ];
        // Window 1.5..2.5: from the sample at 1.0 to the one at 3.0.
        let (d, span) = covering_increase(
            &p,
            Span {
                start_s: 1.5,
                end_s: 2.5,
            },
        )
        .unwrap();
        assert_eq!((d, span), (30.0, 2.0));
        // Samples exactly at the edges are used as they are.
        let (d, span) = covering_increase(
            &p,
            Span {
                start_s: 1.0,
                end_s: 3.0,
            },
        )
        .unwrap();
        assert_eq!((d, span), (30.0, 2.0));
        assert!(
            covering_increase(
                &p[..1],
                Span {
                    start_s: 0.0,
                    end_s: 1.0
                }
            )
            .is_none()
        );
    }

    #[test]
    fn integral_is_trapezoids_clipped_to_the_window() {
        // 100 W flat for 2 s, then a ramp to 300 W over 1 s.
        let p = [(0.0, 100.0), (2.0, 100.0), (3.0, 300.0)];
        let (a, c) = integrate(
            &p,
            Span {
                start_s: 1.0,
                end_s: 3.0,
            },
        );
        // 1 s at 100 W plus the ramp's mean 200 W for 1 s.
        assert_eq!((a, c), (300.0, 2.0));
        let (a, c) = integrate(
            &p,
            Span {
                start_s: 2.5,
                end_s: 9.0,
            },
        );
        // From 200 W at 2.5 s to 300 W at 3 s; nothing beyond the samples.
        assert_eq!((a, c), (125.0, 0.5));
    }

    #[test]
    fn thinning_averages_groups() {
        assert_eq!(thin_factor(1000, 1200), 1);
        assert_eq!(thin_factor(2401, 1200), 3);
        let v = [Some(1.0), Some(3.0), None, None, Some(5.0)];
        assert_eq!(thin(&v, 2), vec![Some(2.0), None, Some(5.0)]);
        assert_eq!(thin_times(&[0.0, 1.0, 2.0], 2), vec![0.5, 2.0]);
        assert_eq!(
            thin_bits(&[Some(1), Some(4), None, None], 2),
            vec![Some(5), None]
        );
    }
}
