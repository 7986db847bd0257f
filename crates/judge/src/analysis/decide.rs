//! The decision rules of the sweep analysis, on plain numbers and plain
//! data (a row per point, [`PointRow`], and its [`LoadKind`], which the
//! assembly in `mod.rs` fills): the capacity of a sweep at its SLOs and the
//! SLO that binds it, the knee of a throughput curve, the Pareto front, the
//! best configuration, and memory growth along a concurrency sweep. Each is
//! a small pure function tested on hand-made numbers; the sentences the
//! rules store in their results (notes, reasons, the failing SLOs) come
//! from `wording.rs`.
//!
//! - **Capacity at SLO**: the highest load at which every SLO holds.
//!   Walking up the sweep, the first point that fails an SLO (or could not
//!   be measured) and the passing point below it bracket the capacity; on
//!   each failing SLO the load where its value crosses the threshold is
//!   interpolated linearly between the two, and the lowest crossing wins
//!   (that SLO binds). A sweep that passes everywhere has a capacity of at
//!   least its highest load; one that fails at its lowest load, below it.
//! - **Knee** of the throughput curve (output tokens/s against load): the
//!   first point after which the marginal gain, Δthroughput/Δload to the
//!   next point, falls below `KNEE_FRACTION` of the initial slope
//!   (throughput/load at the lowest load, i.e. the slope from the origin,
//!   since no load gives no throughput). Chosen over Kneedle because it
//!   needs no normalisation, means the same on 3 points as on 30, and
//!   reads as a sentence: "past c=32 each extra request in flight buys
//!   less than half what the first ones did".
//! - **Best configuration**: among measured points that do not fail an
//!   SLO, the highest good requests per GPU-dollar (`cost`); without cost
//!   data, the highest goodput per GPU.
//! - **INVALID points** (measured, but their numbers are not to be
//!   trusted) take no part in capacity, knee or best; only where every
//!   measured point of the set is INVALID are they used, and the result
//!   says it was drawn from INVALID points.

use serde::Serialize;

use infer_bench_spec::results::PointResult;

use infer_bench_results::SloResult;
use infer_bench_spec::{SloExpr, Threshold};

use super::wording;

/// Closed-loop concurrency or open-loop request rate (how its loads are
/// written is in `describe.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadKind {
    Concurrency,
    Rate,
}

/// One point as the analysis sees it.
#[derive(Debug, Clone, Serialize)]
pub struct PointRow {
    /// Index of the source (results file) among the report's inputs.
    #[serde(skip)]
    pub source_index: usize,
    /// Index of the point in its results file.
    #[serde(skip)]
    pub point_index: usize,
    /// The source's label.
    pub source: String,
    pub id: String,
    pub slug: String,
    /// How charts and tables name the point: the slug, prefixed with the
    /// source's label when the report has several sources.
    pub label: String,
    /// The sweep the point belongs to (absent for ramps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_kind: Option<LoadKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<f64>,
    /// The point was measured (status complete).
    pub measured: bool,
    pub valid: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo_pass: Option<bool>,
    pub gpus: u32,
    pub output_tokens_per_s: f64,
    pub output_tokens_per_s_per_gpu: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_s_per_user: Option<f64>,
    pub goodput_requests_per_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub good_requests_per_gpu_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usd_per_1m_output_tokens: Option<f64>,
    /// On the Pareto frontier of per-user against per-GPU output speed.
    pub pareto: bool,
}

/// The knee is where the marginal throughput gain per unit load drops
/// below this fraction of the initial slope.
pub const KNEE_FRACTION: f64 = 0.5;

/// A threshold in the unit results report the metric in: ms for
/// durations, a fraction for percentages, per second for rates.
pub fn threshold_value(t: &Threshold) -> f64 {
    match t {
        Threshold::Duration(d) => d.as_millis_f64(),
        Threshold::Percent(p) => p.fraction(),
        Threshold::Rate(r) => r.as_per_second(),
        Threshold::Number(n) => *n,
    }
}

/// A point named in an analysis: its ID and load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bracket {
    pub point: String,
    pub load: f64,
}

/// The SLO that limits a sweep's capacity, with its values on either side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Binding {
    pub metric: String,
    pub expr: String,
    /// The threshold in the metric's unit (ms, fraction, per second).
    pub threshold: f64,
    pub value_at_last_pass: f64,
    pub value_at_first_fail: f64,
}

/// The capacity of a sweep at its SLOs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Capacity {
    /// The points carry no SLOs.
    NoSlo,
    /// Every point passes: the capacity is at least the highest load tested.
    AllPass { at_least: f64, highest: Bracket },
    /// The lowest load already fails: the capacity is below it.
    NonePass {
        below: f64,
        lowest: Bracket,
        /// The SLOs failed at the lowest load ("tpot p50 < 10ms"), or why
        /// the point could not be judged.
        failing: Vec<String>,
    },
    /// Between the last passing and the first failing point.
    Between {
        /// Interpolated on the binding SLO; the last passing load when
        /// nothing could be interpolated.
        capacity: f64,
        last_pass: Bracket,
        first_fail: Bracket,
        #[serde(skip_serializing_if = "Option::is_none")]
        binding: Option<Binding>,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
}

/// One load level as capacity sees it.
#[derive(Debug, Clone, Copy)]
pub struct LoadSample<'a> {
    pub id: &'a str,
    pub load: f64,
    /// The point was measured; an unmeasured point fails.
    pub measured: bool,
    pub slo: &'a [SloResult],
}

impl LoadSample<'_> {
    fn passes(&self) -> bool {
        self.measured && self.slo.iter().all(|s| s.pass)
    }
}

/// The SLOs a load level fails ("tpot p50 < 10ms"), or why it could not
/// be judged (`Capacity::NonePass::failing`).
pub(super) fn failing_slos(s: &LoadSample<'_>) -> Vec<String> {
    if !s.measured {
        return vec!["the point could not be measured".into()];
    }
    s.slo
        .iter()
        .filter(|x| !x.pass)
        .map(|x| format!("{} {}", x.metric, wording::expr_text(&x.expr)))
        .collect()
}

/// The load where `value` crosses `threshold` on the line through
/// (l0, v0) and (l1, v1), clamped to [l0, l1].
fn crossing(l0: f64, v0: f64, l1: f64, v1: f64, threshold: f64) -> f64 {
    if v1 == v0 || !(v0.is_finite() && v1.is_finite()) {
        return l0;
    }
    let f = ((threshold - v0) / (v1 - v0)).clamp(0.0, 1.0);
    l0 + f * (l1 - l0)
}

/// The capacity at SLO of a sweep (samples sorted by load, ascending).
pub fn capacity(samples: &[LoadSample<'_>]) -> Capacity {
    if samples.is_empty() || samples.iter().all(|s| s.measured && s.slo.is_empty()) {
        return Capacity::NoSlo;
    }
    let bracket = |s: &LoadSample<'_>| Bracket {
        point: s.id.to_string(),
        load: s.load,
    };
    let Some(k) = samples.iter().position(|s| !s.passes()) else {
        let last = samples.last().expect("non-empty");
        return Capacity::AllPass {
            at_least: last.load,
            highest: bracket(last),
        };
    };
    let fail = &samples[k];
    if k == 0 {
        return Capacity::NonePass {
            below: fail.load,
            lowest: bracket(fail),
            failing: failing_slos(fail),
        };
    }
    let pass = &samples[k - 1];
    let mut binding: Option<(f64, Binding)> = None;
    if fail.measured {
        for f in fail.slo.iter().filter(|s| !s.pass) {
            let Some(v1) = f.value else { continue };
            let Some(v0) = pass
                .slo
                .iter()
                .find(|s| s.metric == f.metric && s.expr == f.expr)
                .and_then(|s| s.value)
            else {
                continue;
            };
            let Ok(expr) = f.expr.parse::<SloExpr>() else {
                continue;
            };
            let threshold = threshold_value(&expr.threshold);
            let at = crossing(pass.load, v0, fail.load, v1, threshold);
            if binding.as_ref().is_none_or(|(b, _)| at < *b) {
                binding = Some((
                    at,
                    Binding {
                        metric: f.metric.clone(),
                        expr: wording::expr_text(&f.expr),
                        threshold,
                        value_at_last_pass: v0,
                        value_at_first_fail: v1,
                    },
                ));
            }
        }
    }
    let mut notes = Vec::new();
    if !fail.measured {
        notes.push(wording::unmeasured_failure(fail.id));
    } else if binding.is_none() {
        notes.push(wording::nothing_to_interpolate(fail.id));
    }
    if let Some(again) = samples[k + 1..].iter().find(|s| s.passes()) {
        notes.push(wording::passes_again(again.id));
    }
    let (capacity, binding) = match binding {
        Some((at, b)) => (at, Some(b)),
        None => (pass.load, None),
    };
    Capacity::Between {
        capacity,
        last_pass: bracket(pass),
        first_fail: bracket(fail),
        binding,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    }
}

/// The knee of a throughput curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Knee {
    /// Fewer than two measured loads, or no throughput at the lowest one.
    Undefined { reason: String },
    /// The marginal gain never fell below the fraction: still scaling.
    NotReached {
        initial_slope: f64,
        /// The slope of the last segment.
        final_slope: f64,
    },
    /// Past this point each extra unit of load buys less than
    /// `KNEE_FRACTION` of the initial slope.
    At {
        point: String,
        load: f64,
        throughput: f64,
        initial_slope: f64,
        /// Δthroughput/Δload from the knee to the next point.
        slope_after: f64,
    },
}

/// One point of a curve.
#[derive(Debug, Clone, Copy)]
pub struct CurvePoint<'a> {
    pub id: &'a str,
    pub load: f64,
    pub value: f64,
}

/// The knee of a throughput curve (sorted by load, ascending), with the
/// marginal-gain rule described in the module docs.
pub fn knee(curve: &[CurvePoint<'_>], fraction: f64) -> Knee {
    if curve.len() < 2 {
        return Knee::Undefined {
            reason: wording::too_few_loads(curve.len()),
        };
    }
    let first = curve[0];
    let initial = if first.load > 0.0 {
        first.value / first.load
    } else {
        let second = curve[1];
        (second.value - first.value) / (second.load - first.load)
    };
    if !(initial.is_finite() && initial > 0.0) {
        return Knee::Undefined {
            reason: wording::NO_INITIAL_THROUGHPUT.into(),
        };
    }
    let mut last_slope = initial;
    for w in curve.windows(2) {
        let dl = w[1].load - w[0].load;
        if dl <= 0.0 {
            continue;
        }
        let slope = (w[1].value - w[0].value) / dl;
        last_slope = slope;
        if slope < fraction * initial {
            return Knee::At {
                point: w[0].id.to_string(),
                load: w[0].load,
                throughput: w[0].value,
                initial_slope: initial,
                slope_after: slope,
            };
        }
    }
    Knee::NotReached {
        initial_slope: initial,
        final_slope: last_slope,
    }
}

/// Which points no other point beats on both `x` and `y` (larger is
/// better on both); non-finite points are never on the frontier.
pub fn pareto_front(xy: &[(f64, f64)]) -> Vec<bool> {
    xy.iter()
        .map(|&(x, y)| {
            x.is_finite()
                && y.is_finite()
                && !xy.iter().any(|&(ox, oy)| {
                    ox.is_finite() && oy.is_finite() && ox >= x && oy >= y && (ox > x || oy > y)
                })
        })
        .collect()
}

/// What the best configuration is best at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BestBasis {
    /// Good requests per GPU-dollar (`cost.good_requests_per_gpu_usd`).
    GoodRequestsPerGpuUsd,
    /// Good requests/s per GPU, when no point has cost data.
    GoodputPerGpu,
}

/// The best configuration of a set of points.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Best {
    pub source: String,
    pub point: String,
    pub label: String,
    pub basis: BestBasis,
    pub value: f64,
    /// Every measured candidate was INVALID: the best of those, to be read
    /// with care.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub from_invalid: bool,
}

/// The best of `rows` (indices into `points`): measured, VALID, not
/// failing an SLO, highest goodput per GPU-dollar, or per GPU without cost
/// data. Only when no measured point is VALID is it drawn from INVALID
/// ones, and then it says so (`from_invalid`).
pub fn best(points: &[PointRow], rows: &[usize]) -> Option<Best> {
    let from_invalid = !rows.iter().any(|&i| points[i].measured && points[i].valid);
    let eligible: Vec<&PointRow> = rows
        .iter()
        .map(|&i| &points[i])
        .filter(|p| p.measured && (p.valid || from_invalid) && p.slo_pass != Some(false))
        .collect();
    let by_cost = eligible
        .iter()
        .filter_map(|p| Some((*p, p.good_requests_per_gpu_usd?)))
        .filter(|(_, v)| v.is_finite());
    let (basis, pick) = if eligible
        .iter()
        .any(|p| p.good_requests_per_gpu_usd.is_some())
    {
        (BestBasis::GoodRequestsPerGpuUsd, max_by(by_cost))
    } else {
        (
            BestBasis::GoodputPerGpu,
            max_by(
                eligible
                    .iter()
                    .map(|p| (*p, p.goodput_requests_per_s / f64::from(p.gpus))),
            ),
        )
    };
    let (p, value) = pick?;
    (value > 0.0).then(|| Best {
        source: p.source.clone(),
        point: p.id.clone(),
        label: p.label.clone(),
        basis,
        value,
        from_invalid,
    })
}

fn max_by<'a>(it: impl Iterator<Item = (&'a PointRow, f64)>) -> Option<(&'a PointRow, f64)> {
    it.fold(None, |acc: Option<(&PointRow, f64)>, (p, v)| match acc {
        Some((_, best)) if best >= v => acc,
        _ => Some((p, v)),
    })
}

/// A straight line through (concurrency, peak memory) over a sweep's
/// points, and the concurrency at which it reaches the limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryGrowth {
    /// "kv_cache" (the server's KV-cache usage, 0 to 1) or "gpu<i>"
    /// (memory used, bytes).
    pub what: String,
    /// Growth per concurrent request in flight (fraction or bytes).
    pub per_request: f64,
    /// At zero concurrency.
    pub intercept: f64,
    /// Where it runs out: 1.0 for the KV cache, the GPU's total memory.
    pub limit: f64,
    /// The concurrency at which the line reaches the limit; absent when
    /// memory does not grow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs_out_at: Option<f64>,
    /// Coefficient of determination of the fit.
    pub r2: f64,
    pub points: usize,
}

/// Least squares through (x, y): slope, intercept, r².
pub fn fit_line(xy: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let n = xy.len() as f64;
    if xy.len() < 2 {
        return None;
    }
    let mx = xy.iter().map(|p| p.0).sum::<f64>() / n;
    let my = xy.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = xy.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = xy.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = xy.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let r2 = if syy > 0.0 {
        sxy * sxy / (sxx * syy)
    } else {
        1.0
    };
    Some((slope, my - slope * mx, r2))
}

/// Memory growth over a concurrency sweep's measured points, each with
/// its concurrency.
pub fn memory_growth(points: &[(f64, &PointResult)]) -> Vec<MemoryGrowth> {
    let mut out = Vec::new();
    let growth = |what: String, xy: Vec<(f64, f64)>, limit: f64| {
        let (slope, intercept, r2) = fit_line(&xy)?;
        Some(MemoryGrowth {
            what,
            per_request: slope,
            intercept,
            limit,
            runs_out_at: (slope > 0.0).then(|| (limit - intercept) / slope),
            r2,
            points: xy.len(),
        })
    };
    let kv: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|(c, p)| {
            let h = &p.telemetry.as_ref()?.server_metrics.as_ref()?.headline;
            Some((*c, h.kv_cache_usage_ratio?.max))
        })
        .collect();
    out.extend(growth("kv_cache".into(), kv, 1.0));
    let gpus: std::collections::BTreeSet<u32> = points
        .iter()
        .filter_map(|(_, p)| p.telemetry.as_ref())
        .flat_map(|t| t.gpu.devices.iter().map(|d| d.index))
        .collect();
    for g in gpus {
        let mut total = None;
        let xy: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|(c, p)| {
                let d = p
                    .telemetry
                    .as_ref()?
                    .gpu
                    .devices
                    .iter()
                    .find(|d| d.index == g)?;
                total = total.or(d.memory_total_bytes);
                Some((*c, d.stats.memory_used_bytes?.max))
            })
            .collect();
        if let Some(t) = total {
            out.extend(growth(format!("gpu{g}"), xy, t as f64));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::describe_knee;

    fn slo(metric: &str, expr: &str, value: Option<f64>) -> SloResult {
        let expr: SloExpr = expr.parse().unwrap();
        let pass = value.is_some_and(|v| expr.cmp.holds(v, threshold_value(&expr.threshold)));
        SloResult {
            metric: metric.into(),
            expr: expr.to_string(),
            value,
            pass,
            note: None,
        }
    }

    fn samples<'a>(
        ids: &'a [String],
        slos: &'a [Vec<SloResult>],
        loads: &[f64],
    ) -> Vec<LoadSample<'a>> {
        ids.iter()
            .zip(slos)
            .zip(loads)
            .map(|((id, slo), &load)| LoadSample {
                id,
                load,
                measured: true,
                slo,
            })
            .collect()
    }

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("p{i}")).collect()
    }

    #[test]
    fn capacity_interpolates_on_the_failing_metric() {
        let ids = ids(4);
        let slos = vec![
            vec![
                slo("tpot", "p50 < 10ms", Some(6.0)),
                slo("error_rate", "< 1%", Some(0.0)),
            ],
            vec![
                slo("tpot", "p50 < 10ms", Some(8.0)),
                slo("error_rate", "< 1%", Some(0.0)),
            ],
            vec![
                slo("tpot", "p50 < 10ms", Some(12.0)),
                slo("error_rate", "< 1%", Some(0.0)),
            ],
            vec![
                slo("tpot", "p50 < 10ms", Some(20.0)),
                slo("error_rate", "< 1%", Some(0.0)),
            ],
        ];
        let c = capacity(&samples(&ids, &slos, &[8.0, 16.0, 32.0, 64.0]));
        let Capacity::Between {
            capacity,
            last_pass,
            first_fail,
            binding,
            note,
        } = c
        else {
            panic!("{c:?}")
        };
        // 8 ms at 16, 12 ms at 32: 10 ms is crossed half way, at 24.
        assert!((capacity - 24.0).abs() < 1e-9, "{capacity}");
        assert_eq!(
            last_pass,
            Bracket {
                point: "p1".into(),
                load: 16.0
            }
        );
        assert_eq!(
            first_fail,
            Bracket {
                point: "p2".into(),
                load: 32.0
            }
        );
        let b = binding.unwrap();
        assert_eq!((b.metric.as_str(), b.expr.as_str()), ("tpot", "p50 < 10ms"));
        assert_eq!(
            (b.threshold, b.value_at_last_pass, b.value_at_first_fail),
            (10.0, 8.0, 12.0)
        );
        assert_eq!(note, None);
    }

    #[test]
    fn the_lowest_crossing_binds() {
        let ids = ids(2);
        let slos = vec![
            vec![
                slo("ttft", "p90 < 100ms", Some(50.0)),
                slo("tpot", "p50 < 10ms", Some(9.0)),
            ],
            // ttft crosses at 3/4 of the way, tpot at 1/4.
            vec![
                slo("ttft", "p90 < 100ms", Some(116.0)),
                slo("tpot", "p50 < 10ms", Some(13.0)),
            ],
        ];
        let c = capacity(&samples(&ids, &slos, &[10.0, 50.0]));
        let Capacity::Between {
            capacity, binding, ..
        } = c
        else {
            panic!("{c:?}")
        };
        assert!((capacity - 20.0).abs() < 1e-9, "{capacity}");
        assert_eq!(binding.unwrap().metric, "tpot");
    }

    #[test]
    fn capacity_edge_cases() {
        let ids = ids(3);
        let pass = |v| vec![slo("tpot", "p50 < 10ms", Some(v))];
        let all = vec![pass(1.0), pass(2.0), pass(3.0)];
        assert_eq!(
            capacity(&samples(&ids, &all, &[1.0, 2.0, 4.0])),
            Capacity::AllPass {
                at_least: 4.0,
                highest: Bracket {
                    point: "p2".into(),
                    load: 4.0
                }
            }
        );
        let none = vec![pass(11.0), pass(12.0), pass(13.0)];
        assert_eq!(
            capacity(&samples(&ids, &none, &[1.0, 2.0, 4.0])),
            Capacity::NonePass {
                below: 1.0,
                lowest: Bracket {
                    point: "p0".into(),
                    load: 1.0
                },
                failing: vec!["tpot p50 < 10ms".into()],
            }
        );
        let no_slo: Vec<Vec<SloResult>> = vec![vec![], vec![], vec![]];
        assert_eq!(
            capacity(&samples(&ids, &no_slo, &[1.0, 2.0, 4.0])),
            Capacity::NoSlo
        );
        assert_eq!(capacity(&[]), Capacity::NoSlo);
    }

    #[test]
    fn non_monotonic_sweeps_take_the_first_failure_and_say_so() {
        let ids = ids(3);
        let slos = vec![
            vec![slo("tpot", "p50 < 10ms", Some(5.0))],
            vec![slo("tpot", "p50 < 10ms", Some(15.0))],
            vec![slo("tpot", "p50 < 10ms", Some(9.0))],
        ];
        let c = capacity(&samples(&ids, &slos, &[1.0, 3.0, 5.0]));
        let Capacity::Between { capacity, note, .. } = c else {
            panic!("{c:?}")
        };
        assert!((capacity - 2.0).abs() < 1e-9);
        assert!(note.unwrap().contains("p2 passes again"));
    }

    #[test]
    fn an_unmeasured_point_fails_without_interpolation() {
        let ids = ids(2);
        let slos = vec![vec![slo("tpot", "p50 < 10ms", Some(5.0))], vec![]];
        let mut s = samples(&ids, &slos, &[1.0, 3.0]);
        s[1].measured = false;
        let c = capacity(&s);
        let Capacity::Between {
            capacity,
            binding,
            note,
            ..
        } = c
        else {
            panic!("{c:?}")
        };
        assert_eq!(capacity, 1.0);
        assert!(binding.is_none());
        assert!(note.unwrap().contains("could not be measured"));
        // Failing at the lowest load because it was not measured.
        let c = capacity_of_first_unmeasured();
        assert!(
            matches!(c, Capacity::NonePass { ref failing, .. } if failing[0].contains("could not be measured"))
        );
    }

    fn capacity_of_first_unmeasured() -> Capacity {
        let s = [LoadSample {
            id: "p0",
            load: 1.0,
            measured: false,
            slo: &[],
        }];
        capacity(&s)
    }

    #[test]
    fn rising_latency_slo_on_a_greater_than_metric() {
        // "goodput > 20/s": passing above, failing below the threshold.
        let ids = ids(2);
        let slos = vec![
            vec![slo("goodput_ratio", ">= 90%", Some(0.98))],
            vec![slo("goodput_ratio", ">= 90%", Some(0.70))],
        ];
        let c = capacity(&samples(&ids, &slos, &[10.0, 20.0]));
        let Capacity::Between { capacity, .. } = c else {
            panic!("{c:?}")
        };
        // 0.98 -> 0.70 crosses 0.90 at 8/28 of the way.
        assert!(
            (capacity - (10.0 + 10.0 * 8.0 / 28.0)).abs() < 1e-9,
            "{capacity}"
        );
    }

    fn curve<'a>(ids: &'a [String], pts: &[(f64, f64)]) -> Vec<CurvePoint<'a>> {
        ids.iter()
            .zip(pts)
            .map(|(id, &(load, value))| CurvePoint { id, load, value })
            .collect()
    }

    #[test]
    fn knee_is_where_marginal_gain_halves() {
        let ids = ids(5);
        // Linear up to 16 (100 per unit), then 40 per unit, then flat.
        let c = curve(
            &ids,
            &[
                (4.0, 400.0),
                (8.0, 800.0),
                (16.0, 1600.0),
                (32.0, 2240.0),
                (64.0, 2300.0),
            ],
        );
        let k = knee(&c, 0.5);
        assert_eq!(
            k,
            Knee::At {
                point: "p2".into(),
                load: 16.0,
                throughput: 1600.0,
                initial_slope: 100.0,
                slope_after: 40.0
            }
        );
        assert!(describe_knee(&k, LoadKind::Concurrency).starts_with("knee at c=16"));
    }

    #[test]
    fn knee_not_reached_or_undefined() {
        let ids = ids(3);
        let k = knee(&curve(&ids, &[(1.0, 10.0), (2.0, 20.0), (4.0, 38.0)]), 0.5);
        assert!(
            matches!(k, Knee::NotReached { initial_slope, final_slope } if initial_slope == 10.0 && final_slope == 9.0)
        );
        assert!(matches!(
            knee(&curve(&ids, &[(1.0, 10.0)]), 0.5),
            Knee::Undefined { .. }
        ));
        assert!(matches!(
            knee(&curve(&ids, &[(1.0, 0.0), (2.0, 5.0)]), 0.5),
            Knee::Undefined { .. }
        ));
    }

    #[test]
    fn pareto_keeps_the_undominated() {
        let xy = [
            (10.0, 100.0),
            (20.0, 80.0),
            (15.0, 70.0),
            (5.0, 100.0),
            (30.0, 10.0),
            (f64::NAN, 1e9),
        ];
        assert_eq!(
            pareto_front(&xy),
            vec![true, true, false, false, true, false]
        );
        // Ties: equal points are both kept.
        assert_eq!(pareto_front(&[(1.0, 1.0), (1.0, 1.0)]), vec![true, true]);
    }

    fn row(id: &str, slo_pass: Option<bool>, per_usd: Option<f64>, goodput: f64) -> PointRow {
        PointRow {
            source_index: 0,
            point_index: 0,
            source: "s".into(),
            id: id.into(),
            slug: id.into(),
            label: id.into(),
            sweep: None,
            load_kind: None,
            load: None,
            measured: true,
            valid: true,
            slo_pass,
            gpus: 2,
            output_tokens_per_s: 0.0,
            output_tokens_per_s_per_gpu: 0.0,
            output_tokens_per_s_per_user: None,
            goodput_requests_per_s: goodput,
            good_requests_per_gpu_usd: per_usd,
            usd_per_1m_output_tokens: None,
            pareto: false,
        }
    }

    #[test]
    fn best_skips_slo_failures_and_falls_back_without_cost() {
        let rows = vec![
            row("a", Some(true), Some(100.0), 1.0),
            row("b", Some(false), Some(900.0), 9.0),
            row("c", Some(true), Some(300.0), 3.0),
        ];
        let b = best(&rows, &[0, 1, 2]).unwrap();
        assert_eq!(
            (b.point.as_str(), b.basis, b.value),
            ("c", BestBasis::GoodRequestsPerGpuUsd, 300.0)
        );
        let rows = vec![row("a", None, None, 4.0), row("b", None, None, 6.0)];
        let b = best(&rows, &[0, 1]).unwrap();
        assert_eq!(
            (b.point.as_str(), b.basis, b.value),
            ("b", BestBasis::GoodputPerGpu, 3.0)
        );
        assert!(best(&rows, &[]).is_none());
    }

    #[test]
    fn best_leaves_invalid_points_out_unless_all_are() {
        let mut rows = vec![
            row("a", Some(true), Some(100.0), 1.0),
            row("b", Some(true), Some(900.0), 9.0),
        ];
        rows[1].valid = false;
        let b = best(&rows, &[0, 1]).unwrap();
        assert_eq!((b.point.as_str(), b.from_invalid), ("a", false));
        rows[0].valid = false;
        let b = best(&rows, &[0, 1]).unwrap();
        assert_eq!((b.point.as_str(), b.from_invalid), ("b", true));
    }
}
