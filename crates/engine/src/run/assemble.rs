//! Assembling a point's result: its runs and their tallies merged into a
//! `PointResult` (merged statistics, ramp steps, the parts of a mix,
//! memory by phase), or a point that could not be measured at all. Both a
//! run and `merge` (agents' and shards' records added) build points here.

use std::collections::BTreeMap;

use super::recorder::Tally;
use infer_bench_results::{
    MemoryPhases, MixResult, PhaseTimeline, PointStatus, RunResult, ServerInfo, Stats, StepResult,
};
use infer_bench_spec::Level;
use infer_bench_spec::plan::{Point, PointConfig};
use infer_bench_spec::results::PointResult;

/// Memory by phase, from the point's telemetry and its runs' timelines.
pub fn memory(
    pr: &PointResult,
    timelines: &[(f64, PhaseTimeline)],
    before_server: &BTreeMap<u32, u64>,
) -> Option<MemoryPhases> {
    let tel = pr.telemetry.as_ref()?;
    let placed: Vec<crate::insight::PlacedTimeline<'_>> = timelines
        .iter()
        .map(|(origin_s, t)| crate::insight::PlacedTimeline {
            origin_s: *origin_s,
            timeline: t,
        })
        .collect();
    crate::insight::memory_phases(tel, &placed, before_server)
}

/// Each part of a mixed workload: its weight, its share of the measured
/// requests and its statistics over the point's window.
pub fn mix_results(
    cfg: &PointConfig,
    parts: &BTreeMap<u32, Tally>,
    window_s: f64,
    open: bool,
) -> Vec<MixResult> {
    let total: u64 = parts.values().map(|t| t.counts().sent).sum();
    cfg.workload
        .mix
        .iter()
        .enumerate()
        .map(|(i, part)| {
            let stats = parts
                .get(&(i as u32))
                .map(|t| t.stats(window_s, open, 0))
                .unwrap_or_default();
            MixResult {
                workload: part.workload.name.clone(),
                weight: part.weight,
                share: if total > 0 {
                    stats.requests.sent as f64 / total as f64
                } else {
                    0.0
                },
                stats,
            }
        })
        .collect()
}

/// A point that could not be measured at all.
pub fn failed_point(p: &Point, failure: String) -> PointResult {
    PointResult {
        id: p.id.clone(),
        slug: p.slug.clone(),
        hash: p.hash.clone(),
        axes: p.axes.iter().cloned().collect(),
        config: p.config.clone(),
        status: PointStatus::Failed,
        failure: Some(failure),
        valid: false,
        invalid_reasons: vec![infer_bench_results::Reason::new(
            infer_bench_results::ReasonKind::NotMeasured,
            "the point could not be measured",
        )],
        warnings: Vec::new(),
        runs: Vec::new(),
        merged: Stats::default(),
        histograms: BTreeMap::new(),
        steps: Vec::new(),
        slo: Vec::new(),
        slo_pass: None,
        server: None,
        cost: None,
        telemetry: None,
        workload: None,
        turns: Vec::new(),
        agents: Vec::new(),
        clock: None,
        mix: Vec::new(),
        memory: None,
        client: None,
        preflight: Vec::new(),
        hints: Vec::new(),
        stages: None,
        quality: None,
    }
}

/// A measured point from its runs and their tallies merged: the merged
/// statistics, ramp steps, and whether the target was unreachable.
#[allow(clippy::too_many_arguments)]
pub fn finish_point(
    p: &Point,
    runs: Vec<RunResult>,
    merged: &Tally,
    window_s: f64,
    concurrency_max: u64,
    steps: &BTreeMap<u32, Tally>,
    server: Option<ServerInfo>,
    base_url: &str,
) -> PointResult {
    let cfg = &p.config;
    let open = matches!(cfg.load.level, Level::Rate(_));
    let mut stats = merged.stats(window_s, open, concurrency_max);
    // Offered and achieved rates are per run; the merged figures are their means.
    if open && !runs.is_empty() {
        let mean = |f: &dyn Fn(&Stats) -> Option<f64>| {
            let v: Vec<f64> = runs.iter().filter_map(|r| f(&r.stats)).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        stats.offered_rate = mean(&|s| s.offered_rate);
        stats.achieved_send_rate = mean(&|s| s.achieved_send_rate);
    }
    let step_len_s = cfg
        .load
        .ramp
        .as_ref()
        .map(|r| r.every.as_secs_f64() * cfg.load.runs as f64)
        .unwrap_or(0.0);
    let steps = steps
        .iter()
        .map(|(k, t)| StepResult {
            step: *k,
            level: cfg
                .load
                .ramp
                .as_ref()
                .and_then(|r| r.levels.get(*k as usize))
                .map(|l| l.to_string())
                .unwrap_or_default(),
            stats: t.stats(step_len_s, open, 0),
        })
        .collect();
    let mut pr = PointResult {
        id: p.id.clone(),
        slug: p.slug.clone(),
        hash: p.hash.clone(),
        axes: p.axes.iter().cloned().collect(),
        config: cfg.clone(),
        status: PointStatus::Complete,
        failure: None,
        valid: true,
        invalid_reasons: Vec::new(),
        warnings: Vec::new(),
        histograms: merged.histograms(),
        merged: stats,
        runs,
        steps,
        slo: Vec::new(),
        slo_pass: None,
        server,
        cost: None,
        telemetry: None,
        workload: None,
        turns: Vec::new(),
        agents: Vec::new(),
        clock: None,
        mix: Vec::new(),
        memory: None,
        client: None,
        preflight: Vec::new(),
        hints: Vec::new(),
        stages: None,
        quality: None,
    };
    if pr.merged.requests.succeeded == 0 && pr.merged.requests.failed > 0 {
        let connect_only = pr
            .merged
            .errors
            .keys()
            .all(|k| k == "connect" || k == "timeout_connect");
        if connect_only {
            pr.status = PointStatus::Failed;
            let example = pr
                .merged
                .error_examples
                .values()
                .next()
                .map(|e| e.unencoded().to_string())
                .unwrap_or_default();
            // A sentence that quotes the server: every writer of a
            // failure encodes it for its place.
            pr.failure = Some(format!(
                "the target is unreachable at {base_url}: {example}"
            ));
        }
    }
    pr
}

/// The server's account of a kserve point's requests from its statistics
/// over the runs; `None` when the server counted no request. The rest of
/// the client's latency (`outside_ms`) compares like with like: the
/// server's mean is over every request it ran, warm-ups included, so the
/// client's is too (`warmup`: the warm-ups that answered and their E2E
/// summed, ms). It is given only when the server ran about as many
/// requests as the client sent (no other client shared the model).
pub fn stages(
    s: &infer_bench_protocol::kserve::Stats,
    merged: &Stats,
    warmup: (u64, f64),
    stats_path: &str,
) -> Option<infer_bench_results::stages::ServerStages> {
    if s.success.count == 0 && s.fail.count == 0 {
        return None;
    }
    let request_ms = s.success.mean_ms();
    // The server counts every request it ran, warm-ups included; one it
    // refused before running (a wrong shape) it does not count.
    let client = merged.requests.sent + merged.requests.warmup;
    let server = s.success.count + s.fail.count;
    let close = merged.requests.succeeded > 0 && server <= client && server * 50 >= client * 49;
    let outside_ms = merged
        .latency_ms
        .get("e2e")
        .filter(|_| close)
        .and_then(|e2e| {
            let (warm_n, warm_ms) = warmup;
            let n = e2e.count as f64 + warm_n as f64;
            (n > 0.0).then(|| (e2e.mean * e2e.count as f64 + warm_ms) / n - request_ms)
        });
    Some(infer_bench_results::stages::ServerStages {
        source: format!("triton /{stats_path}"),
        requests: s.success.count,
        failures: s.fail.count,
        inferences: s.inferences,
        executions: s.executions,
        request_ms,
        // Triton counts queue and compute per request, as it does success.
        queue_ms: s.queue.mean_ms(),
        compute_input_ms: s.compute_input.mean_ms(),
        compute_infer_ms: s.compute_infer.mean_ms(),
        compute_output_ms: s.compute_output.mean_ms(),
        outside_ms,
    })
}
