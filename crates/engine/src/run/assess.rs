//! Judging a finished point: whether it is valid (enough time, requests
//! and samples; the client kept up; every request finished), the warnings
//! it carries, its SLOs, the hints of its timeline, and its cost.

use infer_bench_results::hist::Hist;
use infer_bench_results::metric::Metric;
use infer_bench_spec::results::{PointResult, PointStatus, SloResult};
use infer_bench_spec::{Spec, Threshold};

/// Judges validity, SLOs and cost of a finished point.
pub fn assess(spec: &Spec, pr: &mut PointResult) {
    if pr.status == PointStatus::Failed {
        return;
    }
    let v = &spec.validity;
    let cfg = &pr.config;
    let mut reasons = Vec::new();
    let mut warnings = Vec::new();
    for r in &pr.runs {
        let s = &r.stats;
        let tag = if pr.runs.len() > 1 {
            format!("run {}: ", r.run + 1)
        } else {
            String::new()
        };
        if s.window_s < v.min_duration.as_secs_f64() {
            reasons.push(format!(
                "{tag}the measurement window was {:.1}s, below the minimum {}",
                s.window_s, v.min_duration
            ));
        }
        let n = s.requests.succeeded + s.requests.failed;
        if n < v.min_requests {
            reasons.push(format!(
                "{tag}{n} requests measured, below the minimum {}",
                v.min_requests
            ));
        }
        if let (Some(off), Some(ach)) = (s.offered_rate, s.achieved_send_rate) {
            let gap = (ach / off - 1.0).abs();
            if gap > v.max_rate_gap.fraction() {
                reasons.push(format!("{tag}requests were sent at {ach:.2}/s against {off:.2}/s offered ({:.1}% apart; the limit is {})", gap * 100.0, v.max_rate_gap));
            }
        }
        if let Some(lag) = s.latency_ms.get("dispatch_lag") {
            if lag.p99 > v.max_dispatch_lag_p99.as_millis_f64() {
                reasons.push(format!(
                    "{tag}the client itself was late: dispatch lag p99 {:.3} ms is above the {} budget",
                    lag.p99, v.max_dispatch_lag_p99
                ));
            }
        }
        if s.requests.unfinished > 0 {
            reasons.push(format!(
                "{tag}{} requests did not finish",
                s.requests.unfinished
            ));
        }
    }
    if pr.merged.requests.succeeded == 0 {
        reasons.push("no request succeeded".into());
    }
    if v.percentile_sample_check {
        for gate in &spec.slo {
            if let Some(infer_bench_spec::Stat::Percentile(p)) = gate.expr.stat {
                let need = samples_for_percentile(p);
                let have = pr
                    .merged
                    .latency_ms
                    .get(gate.metric.name())
                    .map(|s| s.count)
                    .unwrap_or(0);
                if have < need {
                    reasons.push(format!(
                        "{} of {} needs at least {need} samples to mean something (MLPerf's early-stopping bound); this point has {have}",
                        gate.expr.stat.map(|s| s.name()).unwrap_or_default(),
                        gate.metric
                    ));
                }
            }
        }
    }
    let t = &pr.merged.tokens;
    if let Some(rep) = t.reported_input_mean {
        if t.requested_input_mean > 0.0 {
            let dev = rep / t.requested_input_mean - 1.0;
            if dev.abs() > 0.05 {
                warnings.push(format!(
                    "prompts averaged {rep:.0} tokens as the server counts them against {:.0} requested ({:+.0}%){}",
                    t.requested_input_mean,
                    dev * 100.0,
                    if cfg.workload.api == infer_bench_spec::raw::Api::Chat { "; the chat template adds tokens" } else { "" }
                ));
            }
        }
    }
    if cfg.workload.ignore_eos && pr.merged.requests.succeeded > 0 {
        let asked = t.requested_output_mean;
        let got = t.output.mean;
        if asked > 0.0 && got < asked * 0.95 {
            warnings.push(format!("outputs averaged {got:.0} tokens against {asked:.0} requested: the server may not honour ignore_eos"));
        }
    }
    if pr.merged.requests.resent > 0 {
        warnings.push(format!(
            "{} request(s) were re-sent once because the server closed a kept-alive connection as they went out (their TTFT counts the lost attempt)",
            pr.merged.requests.resent
        ));
    }
    if t.output_source.contains_key("events") {
        warnings.push("some output token counts were counted from events (the server sent no usage): approximate".into());
    }
    pr.valid = reasons.is_empty();
    pr.invalid_reasons = reasons;
    pr.warnings.extend(warnings);
    pr.slo = spec
        .slo
        .iter()
        .map(|g| {
            let value = pr.value(g.metric, g.expr.stat.as_ref());
            let threshold = match g.expr.threshold {
                Threshold::Duration(d) => d.as_millis_f64(),
                Threshold::Percent(p) => p.fraction(),
                Threshold::Rate(r) => r.as_per_second(),
                Threshold::Number(n) => n,
            };
            let pass = value.is_some_and(|v| g.expr.cmp.holds(v, threshold));
            SloResult {
                metric: g.metric.name().to_string(),
                expr: g.expr.to_string(),
                value,
                pass,
                note: value.is_none().then(|| "no data".to_string()),
            }
        })
        .collect();
    pr.slo_pass = (!pr.slo.is_empty()).then(|| pr.slo.iter().all(|s| s.pass));
    pr.hints = crate::insight::hints(pr, &spec.validity);
    let energy_j = pr.telemetry.as_ref().and_then(|t| t.gpu.energy_j);
    let gpus = crate::cost::gpus(&spec.cost, &pr.config);
    pr.cost = crate::cost::compute(&spec.cost, gpus, &pr.merged, energy_j);
}

/// Requests needed before a percentile means something: the smallest n
/// with p^n <= 1% (zero violations in n draws rule out a true rate above
/// 1-p with 99% confidence; MLPerf's early-stopping rule gives 459 for p99).
pub fn samples_for_percentile(p: f64) -> u64 {
    let q = p / 100.0;
    if q <= 0.0 || q >= 1.0 {
        return 1;
    }
    ((0.01f64).ln() / q.ln()).ceil() as u64
}

/// The histogram of a metric in a point, decoded.
pub fn point_hist(pr: &PointResult, metric: Metric) -> Option<Hist> {
    infer_bench_results::hist::decode(pr.histograms.get(metric.name())?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_sample_bounds_match_mlperf() {
        assert_eq!(samples_for_percentile(99.0), 459);
        assert_eq!(samples_for_percentile(50.0), 7);
        assert_eq!(samples_for_percentile(90.0), 44);
        assert_eq!(samples_for_percentile(99.9), 4603);
    }
}
