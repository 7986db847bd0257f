//! Fixtures for tests of the judge and of what renders its verdicts: a
//! one-point simulator plan, points with chosen run and window statistics,
//! and a baseline blessed from them.
//!
//! The judge's own unit tests use these too; the test kit links its own
//! copy of the judge, so [`baseline_of`] returns that copy's `Baseline`
//! and those tests bless with the judge under test instead.

use infer_bench_results::hist::Summary;
use infer_bench_results::{Environment, PointStatus, RunResult, Stats, WindowStats};
use infer_bench_spec::plan::Plan;
use infer_bench_spec::results::{PointResult, Results};

use infer_bench_judge::baseline::{Baseline, Bless};

/// A spec with one simulator point and the given `[regression]` table.
pub fn plan(output_tokens: u32, regression: &str) -> (infer_bench_spec::Spec, Plan) {
    let src = format!(
        r#"
name = "unit"
seed = 1
[targets.sim]
kind = "sim"
gpu = "l40s"
[models.m]
preset = "llama-3.1-8b"
[workloads.w]
api = "chat"
input_tokens = 64
output_tokens = {output_tokens}
[load]
concurrency = 4
duration = "1s"
runs = 3
{regression}
"#
    );
    let spec = infer_bench_spec::compile("unit.toml", &src, std::path::Path::new("."))
        .unwrap_or_else(|e| panic!("{e}"));
    let plan = Plan::build(&spec).unwrap_or_else(|e| panic!("{e}"));
    (spec, plan)
}

/// Statistics with a TPOT p50, an output throughput and an error rate.
pub fn stats(tpot_p50_ms: f64, tokens_per_s: f64, error_rate: f64) -> Stats {
    let mut s = Stats {
        window_s: 1.0,
        output_tokens_per_s: tokens_per_s,
        error_rate,
        ..Stats::default()
    };
    s.requests.succeeded = 100;
    s.latency_ms.insert(
        "tpot".into(),
        Summary {
            count: 100,
            p50: tpot_p50_ms,
            ..Summary::default()
        },
    );
    s
}

/// A finished, VALID point of `plan` with one run per value (TPOT p50
/// = value, throughput = 10 000 / value, no errors) and, per run, the
/// given windows' TPOT p50s.
pub fn point(plan: &Plan, runs: &[f64], windows: &[&[f64]]) -> PointResult {
    let mut p = infer_bench_engine::run::failed_point(&plan.points[0], String::new());
    p.status = PointStatus::Complete;
    p.failure = None;
    p.valid = true;
    p.invalid_reasons.clear();
    p.runs = runs
        .iter()
        .enumerate()
        .map(|(i, &v)| RunResult {
            run: i as u32,
            started_at: "2026-01-01T00:00:00Z".into(),
            stats: stats(v, 10_000.0 / v, 0.0),
            windows: windows
                .get(i)
                .map(|ws| {
                    ws.iter()
                        .enumerate()
                        .map(|(k, &w)| WindowStats {
                            start_s: k as f64,
                            end_s: k as f64 + 1.0,
                            stats: stats(w, 10_000.0 / w, 0.0),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            histograms: Default::default(),
            shard: None,
            cache_reset: None,
        })
        .collect();
    p.merged = stats(runs.first().copied().unwrap_or(1.0), 1.0, 0.0);
    p
}

pub fn results(points: Vec<PointResult>) -> Results {
    Results {
        format: infer_bench_results::FORMAT.into(),
        version: infer_bench_results::VERSION,
        metrics_version: infer_bench_results::METRICS_VERSION,
        tool: infer_bench_results::ToolInfo::current(),
        spec: infer_bench_results::SpecInfo {
            name: "unit".into(),
            path: "unit.toml".into(),
            sha256: String::new(),
            seed: 1,
            source: String::new(),
        },
        started_at: "2026-01-01T00:00:00Z".into(),
        finished_at: None,
        complete: true,
        interrupted: false,
        partition: None,
        agent: None,
        environment: Environment {
            identity: [("client_class".to_string(), "x86_64-2cpu".to_string())].into(),
            facts: [("kernel".to_string(), "6.1".to_string())].into(),
        },
        points,
        pending: Vec::new(),
        merged_from: Vec::new(),
        searches: Vec::new(),
    }
}

pub fn baseline_of(r: &Results) -> Baseline {
    let mut b = Baseline::new("unit");
    b.bless(r, &[], "2026-01-01T00:00:00Z").unwrap();
    b
}

pub const GATES: &str = r#"
[regression]
metrics = [
  { metric = "tpot", stat = "p50", noise = "5%" },
  { metric = "output_tokens_per_s", noise = "5%" },
  { metric = "error_rate", noise = "1%" },
]
"#;
