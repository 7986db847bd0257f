//! Sweep analysis of finished results, for reports: which points form a
//! load sweep, the capacity of each sweep at its SLOs, the knee of its
//! throughput curve, the Pareto frontier of per-user against per-GPU
//! output speed, and the best configuration by goodput per dollar.
//!
//! It reads results (plain data) and knows nothing of how reports look;
//! the exporters in `export::report` draw and print what it finds. Every
//! rule is described in `docs/reports.md`. Four files, whose public items
//! are all re-exported here (`analysis::capacity`, `analysis::expr_text`),
//! each using only the ones below it:
//!
//! - this one owns the assembly: the sources (results files) and their
//!   labels, the grouping of points into sweeps, and the [`Analysis`] with
//!   its JSON (`report --format json`);
//! - `describe.rs` owns the readings for people: how loads are written,
//!   one-sentence readings of a capacity and a knee;
//! - `decide.rs` owns a row per point and its load kind, and the decisions
//!   on them: small pure functions on plain numbers and plain data
//!   (`capacity`, `knee`, `pareto_front`, `best`, `memory_growth`), tested
//!   on hand-made numbers;
//! - `wording.rs` owns the words the decisions store in their results
//!   (SLO expressions as people read them, notes, reasons), which are part
//!   of the analysis JSON.
//!
//! A **sweep** is the points of one results file that differ only in load
//! level (the `concurrency` or `rate` axis): grouped by every other axis
//! and by load kind, sorted by load. Points with a ramp carry their own
//! staircase and belong to no sweep.

mod decide;
mod describe;
mod wording;

pub use decide::{
    Best, BestBasis, Binding, Bracket, Capacity, CurvePoint, KNEE_FRACTION, Knee, LoadKind,
    LoadSample, MemoryGrowth, PointRow, best, capacity, fit_line, knee, memory_growth,
    pareto_front, threshold_value,
};
pub use describe::{describe_capacity, describe_knee, round_sig};
pub use wording::expr_text;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use infer_bench_results::metric::Metric;
use infer_bench_results::{PointStatus, Stats};
use infer_bench_spec::results::{PointResult, Results};
use infer_bench_spec::{Level, SloExpr, Stat};

/// Version of the analysis JSON (`report --format json`).
pub const VERSION: u32 = 1;

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
    /// Every measured point of the sweep is INVALID, so capacity and knee
    /// were drawn from them; otherwise INVALID points take no part.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub from_invalid: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best: Option<Best>,
    /// Concurrency sweeps: how memory grows per concurrent request, and
    /// where it would run out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<MemoryGrowth>,
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

impl PointRow {
    /// The row of point `pi` of source `si`; `many`: the report has
    /// several sources, so the label names the source.
    fn of(src: &Source, si: usize, p: &PointResult, pi: usize, many: bool) -> PointRow {
        let gpus = src.gpus(p);
        let measured = p.status == PointStatus::Complete;
        let s = &p.merged;
        let load = load_of(p);
        PointRow {
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
            good_requests_per_gpu_usd: p.cost.as_ref().and_then(|c| c.good_requests_per_gpu_usd),
            usd_per_1m_output_tokens: p.cost.as_ref().and_then(|c| c.usd_per_1m_output_tokens),
            pareto: false,
        }
    }
}

impl Sweep {
    /// The sweep of `rows` (indices into `points`, any order), which share
    /// `src`, `kind` and the `fixed` axes; `earlier` are the sweeps already
    /// named, whose names it must not repeat.
    fn of(
        src: &Source,
        points: &[PointRow],
        kind: LoadKind,
        fixed: Vec<(String, String)>,
        mut rows: Vec<usize>,
        many: bool,
        earlier: &[Sweep],
    ) -> Sweep {
        rows.sort_by(|&a, &b| {
            points[a]
                .load
                .unwrap_or(0.0)
                .total_cmp(&points[b].load.unwrap_or(0.0))
        });
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
        let name = if groups_share_name(earlier, &name) {
            format!("{name} ({})", kind_word(kind))
        } else {
            name
        };
        // INVALID points are left out of capacity and knee, unless
        // every measured point of the sweep is INVALID.
        let from_invalid = !rows.iter().any(|&i| points[i].measured && points[i].valid);
        let counts = |i: usize| from_invalid || !points[i].measured || points[i].valid;
        let samples: Vec<LoadSample<'_>> = rows
            .iter()
            .filter(|&&i| counts(i))
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
            .filter(|&&i| points[i].measured && counts(i))
            .map(|&i| CurvePoint {
                id: &points[i].id,
                load: points[i].load.unwrap_or(0.0),
                value: points[i].output_tokens_per_s,
            })
            .collect();
        let knee = knee(&curve, KNEE_FRACTION);
        let best = best(points, &rows);
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
        Sweep {
            memory,
            from_invalid,
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
        }
    }
}

impl Analysis {
    /// Analyses every point of every source.
    pub fn of(sources: &[Source]) -> Analysis {
        let many = sources.len() > 1;
        let mut points = Vec::new();
        let mut groups: BTreeMap<SweepKey, Vec<usize>> = BTreeMap::new();
        for (si, src) in sources.iter().enumerate() {
            for (pi, p) in src.results.points.iter().enumerate() {
                let row = PointRow::of(src, si, p, pi, many);
                let load = load_of(p);
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
        for ((si, kind, fixed), rows) in groups {
            let sweep = Sweep::of(&sources[si], &points, kind, fixed, rows, many, &sweeps);
            sweeps.push(sweep);
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
