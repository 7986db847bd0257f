//! The terminal summary of a run: one row per point with the numbers
//! people look at first, the points' telemetry where there is some, then
//! what made points invalid or failed.

use super::table::{Align, Table};
use infer_bench_judge::compare::tls_insecure_targets;
use infer_bench_spec::results::{PointStatus, Results};

fn f(x: f64, digits: usize) -> String {
    if x.is_finite() {
        format!("{x:.digits$}")
    } else {
        "-".into()
    }
}

/// The summary table and notes.
pub fn table(r: &Results) -> String {
    let mut t = Table::new(&[
        ("point", Align::Left),
        ("ok", Align::Right),
        ("err", Align::Right),
        ("req/s", Align::Right),
        ("out tok/s", Align::Right),
        ("TTFT p50", Align::Right),
        ("TTFT p99", Align::Right),
        ("TPOT p50", Align::Right),
        ("ITL p99", Align::Right),
        ("E2E p50", Align::Right),
        ("goodput", Align::Right),
        ("$/1M out", Align::Right),
        ("SLO", Align::Left),
        ("valid", Align::Left),
    ]);
    let mut notes = Vec::new();
    for p in &r.points {
        let s = &p.merged;
        let ms = |m: &str, q: fn(&infer_bench_results::hist::Summary) -> f64| {
            s.latency_ms
                .get(m)
                .map(|x| f(q(x), 1))
                .unwrap_or_else(|| "-".into())
        };
        let slo = crate::report::slo_text(p);
        let valid = match (p.status, p.valid) {
            (PointStatus::Failed, _) => "FAILED",
            (_, true) => "yes",
            (_, false) => "INVALID",
        };
        t.row(vec![
            p.slug.clone(),
            s.requests.succeeded.to_string(),
            s.requests.failed.to_string(),
            f(s.request_throughput, 2),
            f(s.output_tokens_per_s, 0),
            ms("ttft", |x| x.p50),
            ms("ttft", |x| x.p99),
            ms("tpot", |x| x.p50),
            ms("itl", |x| x.p99),
            ms("e2e", |x| x.p50),
            format!("{}%", f(s.goodput_ratio * 100.0, 0)),
            p.cost
                .as_ref()
                .and_then(|c| c.usd_per_1m_output_tokens)
                .map(|x| f(x, 2))
                .unwrap_or_else(|| "-".into()),
            slo,
            valid.into(),
        ]);
        if let Some(fail) = &p.failure {
            notes.push(format!("{}: {fail}", p.slug));
        }
        for reason in &p.invalid_reasons {
            if p.status != PointStatus::Failed {
                notes.push(format!("{} is INVALID: {reason}", p.slug));
            }
        }
        for w in &p.warnings {
            notes.push(format!("{}: warning: {w}", p.slug));
        }
        if !s.errors.is_empty() {
            notes.push(format!(
                "{}: failures by class: {}",
                p.slug,
                crate::failures_text(s)
            ));
        }
    }
    let simulated = r
        .points
        .iter()
        .filter(|p| p.clock.as_deref() == Some("virtual"))
        .count();
    let clock = match simulated {
        0 => String::new(),
        n if n == r.points.len() => ", simulated in virtual time".into(),
        n => format!(", {n} simulated in virtual time"),
    };
    let mut out = format!(
        "{} ({} points{}{clock})\nlatencies in ms\n\n",
        r.spec.name,
        r.points.len(),
        if r.complete { "" } else { ", incomplete" }
    );
    out.push_str(&t.render());
    let searches = super::capacity::summary_lines(r);
    if !searches.is_empty() {
        out.push('\n');
        for line in searches {
            out.push_str(&line);
            out.push('\n');
        }
    }
    let (telemetry, telemetry_notes) = super::telemetry::points(r);
    if let Some(table) = telemetry {
        out.push('\n');
        out.push_str(&table);
    }
    notes.extend(telemetry_notes);
    for table in [
        super::summary_details::mix_table(r),
        super::summary_details::memory_table(r),
    ]
    .into_iter()
    .flatten()
    {
        out.push('\n');
        out.push_str(&table);
    }
    notes.extend(super::summary_details::notes(r));
    for name in tls_insecure_targets(r) {
        notes.push(format!(
            "⚠ TLS verification was off for target {name} (tls_insecure = true)"
        ));
    }
    if !r.pending.is_empty() {
        notes.push(format!(
            "{} point(s) did not run: {}",
            r.pending.len(),
            r.pending.join(", ")
        ));
    }
    if !notes.is_empty() {
        out.push('\n');
        for n in notes {
            out.push_str(&n);
            out.push('\n');
        }
    }
    out
}
