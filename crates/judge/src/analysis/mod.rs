//! Sweep analysis of finished results, for reports: which points form a
//! load sweep, the capacity of each sweep at its SLOs, the knee of its
//! throughput curve, the Pareto frontier of per-user against per-GPU
//! output speed, and the best configuration by goodput per dollar.
//!
//! It reads results (plain data) and knows nothing of how reports look;
//! the exporters in `export::report` draw and print what it finds. The
//! decision rules live in small pure functions (`capacity`, `knee`,
//! `pareto_front`, `best`) so they are tested on hand-made numbers, and
//! every rule is described in `docs/reports.md`.
//!
//! - A **sweep** is the points of one results file that differ only in
//!   load level (the `concurrency` or `rate` axis): grouped by every other
//!   axis and by load kind, sorted by load. Points with a ramp carry their
//!   own staircase and belong to no sweep.
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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use infer_bench_results::metric::Metric;
use infer_bench_spec::results::{PointResult, PointStatus, Results, SloResult, Stats};
use infer_bench_spec::{Level, SloExpr, Stat, Threshold};

/// Version of the analysis JSON (`report --format json`).
pub const VERSION: u32 = 1;

/// The knee is where the marginal throughput gain per unit load drops
/// below this fraction of the initial slope.
pub const KNEE_FRACTION: f64 = 0.5;

/// One results file given to a report, with the label its points carry.
#[derive(Debug, Clone)]
pub struct Source {
    pub label: String,
    /// The results file as read (a run directory resolves to its results.json).
    pub path: PathBuf,
    pub results: Results,
    /// `[cost] gpus` of the spec, when it sets one.
    pub cost_gpus: Option<u32>,
    /// The spec's `description`, when it has one.
    pub description: Option<String>,
}

impl Source {
    pub fn new(label: String, path: PathBuf, results: Results) -> Source {
        let table: Option<toml::Table> = results.spec.source.parse().ok();
        let cost_gpus = table
            .as_ref()
            .and_then(|t| t.get("cost")?.get("gpus")?.as_integer())
            .and_then(|g| u32::try_from(g).ok())
            .filter(|&g| g > 0);
        let description = table
            .as_ref()
            .and_then(|t| t.get("description")?.as_str().map(str::to_string));
        Source {
            label,
            path,
            results,
            cost_gpus,
            description,
        }
    }

    /// GPUs a point ran on: the spec's `[cost] gpus`, else the simulator's
    /// `gpus`, else the number of `gpu_ids` of the target, else 1.
    pub fn gpus(&self, p: &PointResult) -> u32 {
        self.cost_gpus
            .or(p.config.target.sim.as_ref().map(|s| s.gpus))
            .or(p.config.target.gpu_ids.as_ref().map(|ids| ids.len() as u32))
            .filter(|&g| g > 0)
            .unwrap_or(1)
    }
}

/// Labels results files by their spec's name; files of the same spec are
/// told apart by their directory's name, else by their position.
pub fn label_sources(inputs: Vec<(PathBuf, Results)>) -> Vec<Source> {
    let count = |name: &str| inputs.iter().filter(|(_, r)| r.spec.name == name).count();
    let dir_of = |p: &Path| {
        p.parent()
            .and_then(|d| d.file_name())
            .map(|d| d.to_string_lossy().into_owned())
    };
    let mut labels: Vec<String> = inputs
        .iter()
        .map(|(path, r)| {
            if count(&r.spec.name) == 1 {
                r.spec.name.clone()
            } else {
                match dir_of(path) {
                    Some(d) => format!("{} ({d})", r.spec.name),
                    None => r.spec.name.clone(),
                }
            }
        })
        .collect();
    for i in 0..labels.len() {
        if labels.iter().filter(|l| **l == labels[i]).count() > 1 {
            let mut k = 0;
            let same = labels[i].clone();
            for l in labels.iter_mut().filter(|l| **l == same) {
                k += 1;
                *l = format!("{same} #{k}");
            }
        }
    }
    inputs
        .into_iter()
        .zip(labels)
        .map(|((path, results), label)| Source::new(label, path, results))
        .collect()
}

/// Closed-loop concurrency or open-loop request rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadKind {
    Concurrency,
    Rate,
}

impl LoadKind {
    /// The axis label with its unit.
    pub fn axis_label(self) -> &'static str {
        match self {
            LoadKind::Concurrency => "concurrency (requests in flight)",
            LoadKind::Rate => "offered rate (req/s)",
        }
    }
    /// How a load of this kind is written: "c=32", "rate=4/s".
    pub fn show(self, load: f64) -> String {
        match self {
            LoadKind::Concurrency => format!("c={}", infer_bench_spec::fmt_number(load)),
            LoadKind::Rate => format!("rate={}/s", infer_bench_spec::fmt_number(load)),
        }
    }
}

/// The load level of a steady point; `None` for a ramp.
pub fn load_of(p: &PointResult) -> Option<(LoadKind, f64)> {
    if p.config.load.ramp.is_some() {
        return None;
    }
    Some(match p.config.load.level {
        Level::Concurrency(c) => (LoadKind::Concurrency, f64::from(c)),
        Level::Rate(r) => (LoadKind::Rate, r.as_per_second()),
    })
}

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

/// A latency statistic of a point in ms (stored, or from its histogram).
pub fn latency_ms(p: &PointResult, metric: Metric, pct: f64) -> Option<f64> {
    p.value(metric, Some(&Stat::Percentile(pct)))
}

/// Output tokens/s one user sees: 1000 / TPOT p50 (ms), else output
/// tokens/s divided by the mean concurrency.
pub fn tokens_per_s_per_user(p: &PointResult) -> Option<f64> {
    tokens_per_s_per_user_of(latency_ms(p, Metric::Tpot, 50.0), &p.merged)
}

/// `tokens_per_s_per_user` from a TPOT p50 (ms) and the statistics of a
/// point or one of its runs.
pub fn tokens_per_s_per_user_of(tpot_p50_ms: Option<f64>, s: &Stats) -> Option<f64> {
    if let Some(tpot) = tpot_p50_ms.filter(|t| *t > 0.0) {
        return Some(1000.0 / tpot);
    }
    (s.concurrency_mean > 0.0 && s.output_tokens_per_s > 0.0)
        .then(|| s.output_tokens_per_s / s.concurrency_mean)
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

fn failing_names(s: &LoadSample<'_>) -> Vec<String> {
    if !s.measured {
        return vec!["the point could not be measured".into()];
    }
    s.slo
        .iter()
        .filter(|x| !x.pass)
        .map(|x| format!("{} {}", x.metric, expr_text(&x.expr)))
        .collect()
}

/// An SLO expression for people and charts: durations in milliseconds,
/// the unit latencies are reported in ("p50 < 17.1ms" where the spec's
/// canonical form is "p50 < 17100us"); it parses back to the same gate.
pub fn expr_text(expr: &str) -> String {
    // A stored expression that does not parse is shown as it was written.
    let Ok(e) = expr.parse::<SloExpr>() else {
        return expr.to_string();
    };
    let t = match e.threshold {
        Threshold::Duration(d) => format!(
            "{}ms",
            infer_bench_spec::fmt_number((d.as_millis_f64() * 1e6).round() / 1e6)
        ),
        other => other.to_string(),
    };
    match e.stat {
        Some(stat) => format!("{stat} {} {t}", e.cmp.symbol()),
        None => format!("{} {t}", e.cmp.symbol()),
    }
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
            failing: failing_names(fail),
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
                        expr: expr_text(&f.expr),
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
        notes.push(format!(
            "{} could not be measured; the capacity is taken at the last passing load",
            fail.id
        ));
    } else if binding.is_none() {
        notes.push(format!(
            "no failing SLO of {} has values on both sides to interpolate; the capacity is taken at the last passing load",
            fail.id
        ));
    }
    if let Some(again) = samples[k + 1..].iter().find(|s| s.passes()) {
        notes.push(format!(
            "{} passes again at a higher load; the capacity is taken below the first failure",
            again.id
        ));
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
            reason: format!(
                "{} measured load level(s); a knee needs two or more",
                curve.len()
            ),
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
            reason: "no throughput at the lowest load".into(),
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

impl BestBasis {
    pub fn describe(self) -> &'static str {
        match self {
            BestBasis::GoodRequestsPerGpuUsd => "good requests per GPU-dollar",
            BestBasis::GoodputPerGpu => "good requests/s per GPU (no cost data)",
        }
    }
}

/// The best configuration of a set of points.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Best {
    pub source: String,
    pub point: String,
    pub label: String,
    pub basis: BestBasis,
    pub value: f64,
}

/// The best of `rows` (indices into `points`): measured, not failing an
/// SLO, highest goodput per GPU-dollar, or per GPU without cost data.
pub fn best(points: &[PointRow], rows: &[usize]) -> Option<Best> {
    let eligible: Vec<&PointRow> = rows
        .iter()
        .map(|&i| &points[i])
        .filter(|p| p.measured && p.slo_pass != Some(false))
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
    })
}

fn max_by<'a>(it: impl Iterator<Item = (&'a PointRow, f64)>) -> Option<(&'a PointRow, f64)> {
    it.fold(None, |acc: Option<(&PointRow, f64)>, (p, v)| match acc {
        Some((_, best)) if best >= v => acc,
        _ => Some((p, v)),
    })
}

/// What the points of a sweep share: their source (by index), load kind,
/// and every axis but the load's.
type SweepKey = (usize, LoadKind, Vec<(String, String)>);

/// A sweep: points of one source that differ only in load.
#[derive(Debug, Clone, Serialize)]
pub struct Sweep {
    /// "precision=fp8", prefixed with the source's label when the report
    /// has several sources.
    pub name: String,
    pub source: String,
    pub load_kind: LoadKind,
    /// The other axes, which all its points share.
    pub fixed_axes: BTreeMap<String, String>,
    /// Point IDs, by load.
    pub points: Vec<String>,
    pub loads: Vec<f64>,
    /// Indices into `Analysis::points`, by load.
    #[serde(skip)]
    pub rows: Vec<usize>,
    pub capacity: Capacity,
    pub knee: Knee,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best: Option<Best>,
    /// Concurrency sweeps: how memory grows per concurrent request, and
    /// where it would run out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<MemoryGrowth>,
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

/// A results file as the analysis lists it.
#[derive(Debug, Clone, Serialize)]
pub struct SourceSummary {
    pub label: String,
    pub path: String,
    pub spec: String,
    pub started_at: String,
    pub points: usize,
    pub complete: bool,
}

/// A point named across sources.
#[derive(Debug, Clone, Serialize)]
pub struct PointName {
    pub source: String,
    pub point: String,
}

/// Everything a report shows beyond the raw numbers.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    /// Always "infer-bench-analysis".
    pub format: &'static str,
    pub version: u32,
    pub knee_fraction: f64,
    pub sources: Vec<SourceSummary>,
    pub points: Vec<PointRow>,
    pub sweeps: Vec<Sweep>,
    /// The Pareto frontier, by output tokens/s per user.
    pub pareto_frontier: Vec<PointName>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best: Option<Best>,
}

impl Analysis {
    /// Analyses every point of every source.
    pub fn of(sources: &[Source]) -> Analysis {
        let many = sources.len() > 1;
        let mut points = Vec::new();
        let mut groups: BTreeMap<SweepKey, Vec<usize>> = BTreeMap::new();
        for (si, src) in sources.iter().enumerate() {
            for (pi, p) in src.results.points.iter().enumerate() {
                let gpus = src.gpus(p);
                let measured = p.status == PointStatus::Complete;
                let s = &p.merged;
                let load = load_of(p);
                let row = PointRow {
                    source_index: si,
                    point_index: pi,
                    source: src.label.clone(),
                    id: p.id.clone(),
                    slug: p.slug.clone(),
                    label: if many {
                        format!("{}: {}", src.label, p.slug)
                    } else {
                        p.slug.clone()
                    },
                    sweep: None,
                    load_kind: load.map(|l| l.0),
                    load: load.map(|l| l.1),
                    measured,
                    valid: p.valid,
                    slo_pass: p.slo_pass,
                    gpus,
                    output_tokens_per_s: s.output_tokens_per_s,
                    output_tokens_per_s_per_gpu: s.output_tokens_per_s / f64::from(gpus),
                    output_tokens_per_s_per_user: if measured {
                        tokens_per_s_per_user(p)
                    } else {
                        None
                    },
                    goodput_requests_per_s: s.goodput,
                    good_requests_per_gpu_usd: p
                        .cost
                        .as_ref()
                        .and_then(|c| c.good_requests_per_gpu_usd),
                    usd_per_1m_output_tokens: p
                        .cost
                        .as_ref()
                        .and_then(|c| c.usd_per_1m_output_tokens),
                    pareto: false,
                };
                if let Some((kind, _)) = load {
                    let fixed: Vec<(String, String)> = p
                        .axes
                        .iter()
                        .filter(|(k, _)| k.as_str() != "concurrency" && k.as_str() != "rate")
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    groups
                        .entry((si, kind, fixed))
                        .or_default()
                        .push(points.len());
                }
                points.push(row);
            }
        }

        let xy: Vec<(f64, f64)> = points
            .iter()
            .map(|p| match (p.measured, p.output_tokens_per_s_per_user) {
                (true, Some(u)) if p.output_tokens_per_s > 0.0 => {
                    (u, p.output_tokens_per_s_per_gpu)
                }
                _ => (f64::NAN, f64::NAN),
            })
            .collect();
        for (row, on) in points.iter_mut().zip(pareto_front(&xy)) {
            row.pareto = on;
        }
        let mut frontier: Vec<usize> = (0..points.len()).filter(|&i| points[i].pareto).collect();
        frontier.sort_by(|&a, &b| xy[a].0.total_cmp(&xy[b].0));

        let mut sweeps = Vec::new();
        for ((si, kind, fixed), mut rows) in groups {
            rows.sort_by(|&a, &b| {
                points[a]
                    .load
                    .unwrap_or(0.0)
                    .total_cmp(&points[b].load.unwrap_or(0.0))
            });
            let src = &sources[si];
            let axes_text = fixed
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ");
            let name = match (many, axes_text.is_empty()) {
                (_, true) => src.label.clone(),
                (true, false) => format!("{}: {axes_text}", src.label),
                (false, false) => axes_text,
            };
            let name = if groups_share_name(&sweeps, &name) {
                format!("{name} ({})", kind_word(kind))
            } else {
                name
            };
            let samples: Vec<LoadSample<'_>> = rows
                .iter()
                .map(|&i| {
                    let p = &src.results.points[points[i].point_index];
                    LoadSample {
                        id: &p.id,
                        load: points[i].load.unwrap_or(0.0),
                        measured: points[i].measured,
                        slo: &p.slo,
                    }
                })
                .collect();
            let capacity = capacity(&samples);
            let curve: Vec<CurvePoint<'_>> = rows
                .iter()
                .filter(|&&i| points[i].measured)
                .map(|&i| CurvePoint {
                    id: &points[i].id,
                    load: points[i].load.unwrap_or(0.0),
                    value: points[i].output_tokens_per_s,
                })
                .collect();
            let knee = knee(&curve, KNEE_FRACTION);
            let best = best(&points, &rows);
            let memory = if kind == LoadKind::Concurrency {
                let measured: Vec<(f64, &PointResult)> = rows
                    .iter()
                    .filter(|&&i| points[i].measured)
                    .map(|&i| {
                        (
                            points[i].load.unwrap_or(0.0),
                            &src.results.points[points[i].point_index],
                        )
                    })
                    .collect();
                memory_growth(&measured)
            } else {
                Vec::new()
            };
            sweeps.push(Sweep {
                memory,
                name,
                source: src.label.clone(),
                load_kind: kind,
                fixed_axes: fixed.into_iter().collect(),
                points: rows.iter().map(|&i| points[i].id.clone()).collect(),
                loads: rows
                    .iter()
                    .map(|&i| points[i].load.unwrap_or(0.0))
                    .collect(),
                rows,
                capacity,
                knee,
                best,
            });
        }
        for s in &sweeps {
            for &i in &s.rows {
                points[i].sweep = Some(s.name.clone());
            }
        }
        let all: Vec<usize> = (0..points.len()).collect();
        let best = best(&points, &all);
        Analysis {
            format: "infer-bench-analysis",
            version: VERSION,
            knee_fraction: KNEE_FRACTION,
            sources: sources
                .iter()
                .map(|s| SourceSummary {
                    label: s.label.clone(),
                    path: s.path.display().to_string(),
                    spec: s.results.spec.name.clone(),
                    started_at: s.results.started_at.clone(),
                    points: s.results.points.len(),
                    complete: s.results.complete,
                })
                .collect(),
            pareto_frontier: frontier
                .iter()
                .map(|&i| PointName {
                    source: points[i].source.clone(),
                    point: points[i].id.clone(),
                })
                .collect(),
            points,
            sweeps,
            best,
        }
    }

    /// The point a row stands for.
    pub fn point<'s>(&self, sources: &'s [Source], row: usize) -> &'s PointResult {
        let r = &self.points[row];
        &sources[r.source_index].results.points[r.point_index]
    }

    /// The analysis as pretty JSON with a final newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("analysis serializes");
        s.push('\n');
        s
    }
}

fn kind_word(kind: LoadKind) -> &'static str {
    match kind {
        LoadKind::Concurrency => "concurrency",
        LoadKind::Rate => "rate",
    }
}

fn groups_share_name(sweeps: &[Sweep], name: &str) -> bool {
    sweeps.iter().any(|s| s.name == name)
}

/// A one-sentence reading of a capacity, loads written with `kind`.
pub fn describe_capacity(c: &Capacity, kind: LoadKind) -> String {
    let show = |l: f64| kind.show(l);
    match c {
        Capacity::NoSlo => "no SLOs to judge".into(),
        Capacity::AllPass { at_least, .. } => format!(
            "every SLO holds at every load: capacity ≥ {} (the highest tested)",
            show(*at_least)
        ),
        Capacity::NonePass { below, failing, .. } => format!(
            "fails already at the lowest load {}: capacity < {} ({})",
            show(*below),
            show(*below),
            failing.join("; ")
        ),
        Capacity::Between {
            capacity,
            last_pass,
            first_fail,
            binding,
            ..
        } => {
            let limit = binding
                .as_ref()
                .map(|b| format!(", limited by {} {}", b.metric, b.expr))
                .unwrap_or_default();
            format!(
                "capacity ≈ {} (between {} which passes and {} which fails{limit})",
                show(round_sig(*capacity, 3)),
                show(last_pass.load),
                show(first_fail.load)
            )
        }
    }
}

/// A one-sentence reading of a knee.
pub fn describe_knee(k: &Knee, kind: LoadKind) -> String {
    match k {
        Knee::Undefined { reason } => format!("no knee: {reason}"),
        Knee::NotReached {
            initial_slope,
            final_slope,
        } => format!(
            "no knee yet: the last step still gains {:.0}% of the initial throughput per unit load",
            100.0 * final_slope / initial_slope
        ),
        Knee::At {
            load,
            initial_slope,
            slope_after,
            ..
        } => format!(
            "knee at {}: beyond it each unit of load adds {:.0}% of the initial throughput per unit",
            kind.show(*load),
            100.0 * slope_after / initial_slope
        ),
    }
}

/// `x` rounded to `digits` significant digits.
pub fn round_sig(x: f64, digits: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let m = 10f64.powi(digits - 1 - x.abs().log10().floor() as i32);
    (x * m).round() / m
}

/// The SLO expressions of a metric in `sources`, once each, with the
/// labels of the sources that set each.
pub fn slo_lines<'a>(
    sources: impl IntoIterator<Item = &'a Source>,
    metric: &str,
) -> Vec<(SloExpr, Vec<String>)> {
    let mut out: Vec<(SloExpr, Vec<String>)> = Vec::new();
    for s in sources {
        for p in &s.results.points {
            for r in p.slo.iter().filter(|r| r.metric == metric) {
                let Ok(expr) = r.expr.parse::<SloExpr>() else {
                    continue;
                };
                match out.iter_mut().find(|(e, _)| *e == expr) {
                    Some((_, labels)) if labels.contains(&s.label) => {}
                    Some((_, labels)) => labels.push(s.label.clone()),
                    None => out.push((expr, vec![s.label.clone()])),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn expressions_read_in_milliseconds_and_parse_back() {
        for (text, want) in [
            ("p50 < 17100us", "p50 < 17.1ms"),
            ("p99 <= 2s", "p99 <= 2000ms"),
            ("< 1%", "< 1%"),
            ("mean > 20/s", "mean > 20/s"),
        ] {
            let e: SloExpr = text.parse().unwrap();
            assert_eq!(expr_text(&e.to_string()), want);
            assert_eq!(want.parse::<SloExpr>().unwrap(), e);
        }
    }

    #[test]
    fn round_sig_rounds() {
        assert_eq!(round_sig(52.345, 3), 52.3);
        assert_eq!(round_sig(0.012345, 2), 0.012);
        assert_eq!(round_sig(12345.0, 2), 12000.0);
    }
}
