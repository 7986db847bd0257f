//! Judging a finished point: whether it is valid (enough time, requests
//! and samples; the client kept up; every request finished), the warnings
//! it carries, its SLOs, the hints of its timeline, and its cost.

use infer_bench_results::{PointStatus, Reason, ReasonKind, SloResult};
use infer_bench_spec::results::PointResult;
use infer_bench_spec::{SloGate, Spec, Threshold};

/// The most of a simulated point's time its simulator may lose behind its
/// own schedule (`infer_bench_sim_lag_seconds_total` over the scrape span)
/// before the point is INVALID. A simulator that falls behind is slower
/// than its model says: on a 2-core machine saturated by other work it lost
/// 11-17% and measured TPOT 14% slower than an unchanged baseline; on a
/// busy but not saturated one, under 3% (median 2.4%).
pub const MAX_SIMULATOR_TIME_LOST: f64 = 0.10;

/// The share of a simulated point's time its simulator spent behind its own
/// schedule, from its `/metrics` as scraped over the point.
fn simulator_time_lost(pr: &PointResult) -> Option<f64> {
    let metrics = pr.telemetry.as_ref()?.server_metrics.as_ref()?;
    let lag = metrics.counters.get("infer_bench_sim_lag_seconds_total")?;
    let (lost, span) = (lag.delta?, lag.span_s?);
    (span > 0.0).then(|| lost / span)
}

/// Judges validity, SLOs and cost of a finished point.
pub fn assess(spec: &Spec, pr: &mut PointResult) {
    if pr.status == PointStatus::Failed {
        return;
    }
    let reasons = invalid_reasons(spec, pr);
    let warnings = warnings(pr);
    pr.valid = reasons.is_empty();
    pr.invalid_reasons = reasons;
    pr.warnings.extend(warnings);
    pr.slo = slos(spec, pr);
    pr.slo_pass = (!pr.slo.is_empty()).then(|| pr.slo.iter().all(|s| s.pass));
    pr.hints = crate::insight::hints(pr, &spec.validity);
    let energy_j = pr.telemetry.as_ref().and_then(|t| t.gpu.energy_j);
    let gpus = crate::cost::gpus(&spec.cost, &pr.config);
    let cost = crate::cost::for_target(&spec.cost, &pr.config);
    pr.cost = crate::cost::compute(&cost, gpus, &pr.merged, energy_j);
}

/// Why the point's numbers cannot be trusted (empty when they can): too
/// short, too few requests or samples, a rate not offered, a late client,
/// requests unfinished or failed by this machine, a simulator behind.
fn invalid_reasons(spec: &Spec, pr: &PointResult) -> Vec<Reason> {
    let v = &spec.validity;
    let mut reasons = Vec::new();
    for r in &pr.runs {
        let s = &r.stats;
        let tag = if pr.runs.len() > 1 {
            format!("run {}: ", r.run + 1)
        } else {
            String::new()
        };
        // First: the cause of the other reasons such a run has (a rate
        // not offered, a late client, requests unfinished).
        if s.requests.not_sent > 0 {
            let late = crate::run::parts::MAX_LATE.as_secs_f64();
            let reason = match pr.config.load.max_concurrency {
                // The slots were what was full: the server did not keep
                // up with the rate at that cap.
                Some(cap) => Reason::new(ReasonKind::DispatchLag, format!(
                    "{tag}the rate did not fit `max_concurrency = {cap}`: {} of its arrivals found every slot busy for over {late} s and were not sent",
                    s.requests.not_sent,
                ))
                .with_fix("a lower `rate` (the server's capacity at this cap is below it), or a higher `max_concurrency`"),
                None => Reason::new(ReasonKind::DispatchLag, format!(
                    "{tag}the client could not keep the rate: {} of its arrivals were not sent (none goes out more than {late} s after its scheduled time, nor while {} are in flight)",
                    s.requests.not_sent,
                    crate::run::parts::MAX_OPEN_IN_FLIGHT,
                ))
                .with_fix("a lower `rate`, a `[load] max_concurrency`, or a machine (or more load-sharing agents) that can send it"),
            };
            reasons.push(reason);
        }
        if s.window_s < v.min_duration.as_secs_f64() {
            reasons.push(Reason::new(
                ReasonKind::WindowTooShort,
                format!(
                    "{tag}the measurement window was {:.1}s, below the minimum {}",
                    s.window_s, v.min_duration
                ),
            ));
        }
        let n = s.requests.succeeded.saturating_add(s.requests.failed);
        if n < v.min_requests {
            reasons.push(Reason::new(
                ReasonKind::TooFewRequests,
                format!(
                    "{tag}{n} requests measured, below the minimum {}",
                    v.min_requests
                ),
            ));
        }
        if let (Some(off), Some(ach)) = (s.offered_rate, s.achieved_send_rate) {
            let gap = (ach / off - 1.0).abs();
            if gap > v.max_rate_gap.fraction() {
                reasons.push(Reason::new(ReasonKind::RateNotOffered, format!("{tag}requests were sent at {ach:.2}/s against {off:.2}/s offered ({:.1}% apart; the limit is {})", gap * 100.0, v.max_rate_gap)));
            }
        }
        if let Some(late) = v.late_client(&s.latency_ms) {
            reasons.push(Reason::new(ReasonKind::DispatchLag, format!(
                "{tag}the client itself was late: dispatch lag {} {:.3} ms is above the budget of {:.3} ms ({})",
                late.stat, late.lag_ms, late.budget_ms, late.rule
            )));
        }
        if let Some(late) = v.late_reader(&s.latency_ms) {
            reasons.push(Reason::new(ReasonKind::ReadDelay, format!(
                "{tag}the client itself was late reading: read delay {} {:.3} ms is above the budget of {:.3} ms ({})",
                late.stat, late.lag_ms, late.budget_ms, late.rule
            )));
        }
        if s.requests.unfinished > 0 {
            reasons.push(Reason::new(
                ReasonKind::DidNotFinish,
                format!("{tag}{} requests did not finish", s.requests.unfinished),
            ));
        }
    }
    if pr.merged.requests.succeeded == 0 {
        reasons.push(Reason::new(ReasonKind::NoSuccess, "no request succeeded"));
    }
    let client_limit = infer_bench_protocol::ErrorClass::ClientLimit.name();
    if let Some(&n) = pr.merged.errors.get(client_limit).filter(|&&n| n > 0) {
        reasons.push(Reason::new(ReasonKind::ClientLimit, format!(
            "{n} request(s) failed because the client ran out of file descriptors (client_limit): the load was limited by this machine, not the server; raise the open-file limit (ulimit -n) or lower the load"
        )).with_fix("raise the open-file limit (ulimit -n) or lower the load"));
    }
    if let Some(lost) = simulator_time_lost(pr) {
        if lost > MAX_SIMULATOR_TIME_LOST {
            reasons.push(Reason::new(ReasonKind::SimulatorBehind, format!(
                "the simulator fell behind its own schedule: {:.0}% of the point's time was lost to the machine (the limit is {:.0}%), so the machine, not the modelled GPU, set the pace",
                lost * 100.0,
                MAX_SIMULATOR_TIME_LOST * 100.0
            )));
        }
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
                    reasons.push(Reason::new(ReasonKind::TooFewSamples, format!(
                        "{} of {} needs at least {need} samples to mean something (MLPerf's early-stopping bound); this point has {have}",
                        gate.expr.stat.map(|s| s.name()).unwrap_or_default(),
                        gate.metric
                    )));
                }
            }
        }
    }
    reasons
}

/// What the reader should know that does not invalidate the point: token
/// counts off what was asked, re-sent requests, counts from events.
fn warnings(pr: &PointResult) -> Vec<Reason> {
    let cfg = &pr.config;
    let mut warnings = Vec::new();
    let t = &pr.merged.tokens;
    // Images and audio cost prompt tokens the client cannot count: the
    // `image_tokens` hint says what they came to instead.
    let media = pr.merged.media.is_some();
    if let Some(rep) = t.reported_input_mean.filter(|_| !media) {
        if t.requested_input_mean > 0.0 {
            let dev = rep / t.requested_input_mean - 1.0;
            if dev.abs() > 0.05 {
                warnings.push(Reason::new(ReasonKind::PromptLengths, format!(
                    "prompts averaged {rep:.0} tokens as the server counts them against {:.0} requested ({:+.0}%){}",
                    t.requested_input_mean,
                    dev * 100.0,
                    if cfg.workload.api.takes_messages() { "; the chat template adds tokens" } else { "" }
                )));
            }
        }
    }
    if cfg.workload.ignore_eos && pr.merged.requests.succeeded > 0 {
        let asked = t.requested_output_mean;
        let got = t.output.mean;
        if asked > 0.0 && got < asked * 0.95 {
            warnings.push(Reason::new(ReasonKind::IgnoreEos, format!("outputs averaged {got:.0} tokens against {asked:.0} requested: the server may not honour ignore_eos")));
        }
    }
    if pr.merged.requests.resent > 0 {
        warnings.push(Reason::new(ReasonKind::Resent, format!(
            "{} request(s) were re-sent once because the server closed a kept-alive connection as they went out (their TTFT counts the lost attempt)",
            pr.merged.requests.resent
        )));
    }
    if t.output_source.contains_key("events") {
        warnings.push(Reason::new(ReasonKind::CountedFromEvents, "some output token counts were counted from events (the server sent no usage): approximate"));
    }
    warnings
}

/// Each of the spec's SLOs, held or not by the point's merged numbers.
fn slos(spec: &Spec, pr: &PointResult) -> Vec<SloResult> {
    // Quality SLOs are judged once every server has answered
    // (`quality::settle`).
    spec.slo
        .iter()
        .filter(|g| !g.metric.is_quality())
        .map(|g| slo_result(g, pr.value(g.metric, g.expr.stat.as_ref())))
        .collect()
}

/// An SLO held or not by `value`, the metric's figure (`None`: no data,
/// which fails).
pub(super) fn slo_result(g: &SloGate, value: Option<f64>) -> SloResult {
    let threshold = match g.expr.threshold {
        Threshold::Duration(d) => d.as_millis_f64(),
        Threshold::Percent(p) => p.fraction(),
        Threshold::Rate(r) => r.as_per_second(),
        Threshold::Number(n) => n,
    };
    SloResult {
        metric: g.metric.name().to_string(),
        expr: g.expr.to_string(),
        value,
        pass: value.is_some_and(|v| g.expr.cmp.holds(v, threshold)),
        note: value.is_none().then(|| "no data".to_string()),
    }
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

    const SPEC: &str = "name = \"t\"\n[targets.s]\nkind = \"sim\"\ngpu = \"h100-sxm\"\n[models.m]\npreset = \"llama-3.1-8b\"\n[workloads.w]\ninput_tokens = 8\noutput_tokens = 8\n[load]\nconcurrency = 1\nduration = \"1s\"\n[validity]\npercentile_sample_check = false\n";

    /// The point of `SPEC` (plus `validity`, keys of `[validity]`) after
    /// one run with this dispatch lag p99 and TTFT p50 from send (ms).
    fn judged(validity: &str, lag_p99: f64, ttft_p50: f64) -> PointResult {
        let spec = infer_bench_spec::compile(
            "t.toml",
            &format!("{SPEC}{validity}"),
            std::path::Path::new("."),
        )
        .unwrap();
        let plan = infer_bench_spec::plan::Plan::build(&spec).unwrap();
        let mut p = crate::run::assemble::failed_point(&plan.points[0], String::new());
        p.status = PointStatus::Complete;
        let mut stats = infer_bench_results::Stats {
            window_s: 1.0,
            ..Default::default()
        };
        stats.requests.succeeded = 100;
        let summary = |p50: f64, p99: f64| infer_bench_results::hist::Summary {
            count: 100,
            p50,
            p99,
            ..Default::default()
        };
        stats
            .latency_ms
            .insert("dispatch_lag".into(), summary(0.05, lag_p99));
        stats
            .latency_ms
            .insert("ttft_from_send".into(), summary(ttft_p50, ttft_p50 * 2.0));
        p.merged = stats.clone();
        p.runs = vec![infer_bench_results::RunResult {
            run: 0,
            started_at: String::new(),
            stats,
            windows: Vec::new(),
            histograms: Default::default(),
            shard: None,
            cache_reset: None,
        }];
        assess(&spec, &mut p);
        p
    }

    fn lag_reason(p: &PointResult) -> Option<&String> {
        p.invalid_reasons
            .iter()
            .find(|r| r.kind == ReasonKind::DispatchLag)
            .map(|r| &r.message)
    }

    #[test]
    fn the_default_lag_budget_is_a_share_of_ttft() {
        // A lag p99 of 3, 4.5 and 18 ms (its median 0.05 ms, a client that
        // keeps up) against a TTFT p50 of 100 ms and p99 of 200 ms: within 10% of
        // the p99 (20 ms), and the median within 5% of the median (5 ms).
        for lag in [3.0, 4.5, 18.0] {
            let p = judged("", lag, 100.0);
            assert!(p.valid, "{:?}", p.invalid_reasons);
            assert!(p.hints.iter().all(|h| h.kind != "client_bound"));
        }
        // A tail of 24 ms is caught, hint and all.
        let p = judged("", 24.0, 100.0);
        assert!(!p.valid);
        let r = lag_reason(&p).unwrap();
        assert!(
            r.contains("dispatch lag p99 24.000 ms is above the budget of 20.000 ms")
                && r.contains("10% of TTFT p99 200.0 ms, at least 10ms"),
            "{r}"
        );
        assert!(p.hints.iter().any(|h| h.kind == "client_bound"));
    }

    /// A client late on every request (the median of its lag near its
    /// p99) is caught by the median's budget.
    #[test]
    fn a_client_late_on_every_request_is_caught_by_the_median() {
        let mut p = judged("", 8.0, 100.0);
        assert!(p.valid, "a median of 0.05 ms is within 5 ms");
        for r in &mut p.runs {
            r.stats.latency_ms.get_mut("dispatch_lag").unwrap().p50 = 8.0;
        }
        let spec = infer_bench_spec::compile("t.toml", SPEC, std::path::Path::new(".")).unwrap();
        assess(&spec, &mut p);
        let r = lag_reason(&p).unwrap();
        assert!(
            r.contains(
                "dispatch lag p50 8.000 ms is above the budget of 5.000 ms (5% of TTFT p50 100.0 ms"
            ),
            "{r}"
        );
    }

    /// A request the client could not open a connection for, out of file
    /// descriptors, makes the point INVALID: one is enough.
    #[test]
    fn a_client_out_of_descriptors_makes_the_point_invalid() {
        let spec = infer_bench_spec::compile("t.toml", SPEC, std::path::Path::new(".")).unwrap();
        let mut p = judged("", 1.0, 100.0);
        assert!(p.valid, "{:?}", p.invalid_reasons);
        p.merged.errors.insert("client_limit".into(), 1);
        assess(&spec, &mut p);
        assert!(!p.valid);
        assert_eq!(
            p.invalid_reasons,
            vec![Reason {
                kind: ReasonKind::ClientLimit,
                message: "1 request(s) failed because the client ran out of file descriptors (client_limit): the load was limited by this machine, not the server; raise the open-file limit (ulimit -n) or lower the load".into(),
                fix: Some("raise the open-file limit (ulimit -n) or lower the load".into()),
            }]
        );
    }

    /// A simulator that lost more than a tenth of the point's time behind
    /// its own schedule measured the machine, not its model.
    #[test]
    fn a_simulator_that_fell_behind_makes_the_point_invalid() {
        let spec = infer_bench_spec::compile("t.toml", SPEC, std::path::Path::new(".")).unwrap();
        for (lost, valid) in [(0.2, true), (1.6, false)] {
            let mut p = judged("", 1.0, 100.0);
            let mut metrics = infer_bench_results::telemetry::ServerMetrics::default();
            metrics.counters.insert(
                "infer_bench_sim_lag_seconds_total".into(),
                infer_bench_results::telemetry::CounterSeries {
                    delta: Some(lost),
                    span_s: Some(10.0),
                    values: Vec::new(),
                },
            );
            p.telemetry = Some(infer_bench_results::telemetry::PointTelemetry {
                server_metrics: Some(metrics),
                ..Default::default()
            });
            assess(&spec, &mut p);
            assert_eq!(p.valid, valid, "{lost}: {:?}", p.invalid_reasons);
            if !valid {
                let r = &p.invalid_reasons[0];
                assert_eq!(r.kind, ReasonKind::SimulatorBehind);
                assert!(
                    r.message
                        .contains("the simulator fell behind its own schedule: 16%"),
                    "{r:?}"
                );
            }
        }
    }

    #[test]
    fn the_floor_holds_at_tiny_ttft() {
        // 10% of a TTFT p99 of 8 ms is 0.8 ms; the budget is the 10 ms
        // floor (a busy machine's preemptions land in a short run's p99).
        assert!(judged("", 9.0, 4.0).valid);
        let p = judged("", 12.0, 4.0);
        assert!(!p.valid);
        assert!(
            lag_reason(&p)
                .unwrap()
                .contains("above the budget of 10.000 ms"),
            "{:?}",
            p.invalid_reasons
        );
    }

    #[test]
    fn a_set_budget_is_fixed() {
        // Within the relative budgets, but above the fixed 2 ms.
        let p = judged("max_dispatch_lag_p99 = \"2ms\"\n", 3.0, 100.0);
        assert!(!p.valid);
        let r = lag_reason(&p).unwrap();
        assert!(
            r.contains("budget of 2.000 ms ([validity] max_dispatch_lag_p99 = \"2ms\")"),
            "{r}"
        );
        // Beyond the floor at a tiny TTFT, but within the fixed 20 ms.
        assert!(!judged("", 12.0, 4.0).valid);
        assert!(judged("max_dispatch_lag_p99 = \"20ms\"\n", 12.0, 4.0).valid);
    }

    #[test]
    fn the_reason_names_the_setting() {
        // `bless` refuses INVALID points with these reasons: they say which
        // key changes the budget.
        for validity in ["", "max_dispatch_lag_p99 = \"1ms\"\n"] {
            let p = judged(validity, 60.0, 100.0);
            let r = lag_reason(&p).unwrap();
            assert!(r.contains("[validity] max_dispatch_lag_p99"), "{r}");
        }
    }
}
