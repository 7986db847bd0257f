//! The terminal summary of a run: one row per point with the numbers
//! people look at first, the points' telemetry where there is some, then
//! what made points invalid or failed, and every finding (pre-flight
//! checks, warnings, hints) once: a finding several points share is one
//! line that names them ("all 6 points: pre-flight: ..."), never a line per
//! point. The run prints findings nowhere else (the live progress on
//! stderr shows only progress), so each is read once.
//!
//! Narrow by default: the table fits [`crate::term::WIDTH`] columns by
//! leaving out, in the order of [`NARROW_DROPS`], the columns that do not
//! fit (and says which); `--wide` shows them all. An SLO failure's cell
//! says FAIL and a note names the SLOs that failed; in a wide table the
//! cell names them itself.

use super::findings::Findings;
use super::table::{Align, Table};
use crate::term::Look;
use infer_bench_judge::compare::tls_insecure_targets;
use infer_bench_results::PointStatus;
use infer_bench_spec::results::{PointResult, Results};

/// The summary's columns a narrow table leaves out first, in this order,
/// until it fits: what a person needs at a glance stays (throughput, TTFT,
/// TPOT, SLO, validity).
pub const NARROW_DROPS: &[&str] = &[
    "ITL p99",
    "E2E p50",
    "$/1M out",
    "goodput",
    "TTFT p99",
    "err",
    "out tok/s",
];

fn f(x: f64, digits: usize) -> String {
    if x.is_finite() {
        format!("{x:.digits$}")
    } else {
        "-".into()
    }
}

/// The summary table and notes, drawn as the command line said
/// ([`crate::term::current`]).
pub fn table(r: &Results) -> String {
    render(r, crate::term::current())
}

/// The summary table and notes, drawn with `look`.
pub fn render(r: &Results, look: Look) -> String {
    let quality = super::quality::any(r);
    let mut columns = vec![
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
    ];
    if quality {
        columns.push(("agree", Align::Right));
    }
    columns.extend([("SLO", Align::Left), ("valid", Align::Left)]);
    let mut t = Table::new(&columns);
    let mut notes = Vec::new();
    let mut findings = Findings::default();
    // Retrieval points (no TTFT, TPOT or ITL) have a table of their own.
    let mut generation = 0;
    for p in &r.points {
        let mut cells = row(p, look, &mut findings);
        if quality {
            // Before SLO and valid, the last two.
            cells.insert(cells.len() - 2, super::quality::cell(p));
        }
        if !super::retrieval::is_retrieval(p) {
            t.row(cells);
            generation += 1;
        }
    }
    super::summary_details::findings(r, &mut findings);
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
        infer_bench_results::outside::terminal(&r.spec.name),
        r.points.len(),
        if r.complete { "" } else { ", incomplete" }
    );
    let (text, hidden) = t.render_look(look, NARROW_DROPS);
    if generation > 0 {
        out.push_str(&text);
    }
    let mut before = generation > 0;
    for table in [
        super::retrieval::table(r, look),
        super::retrieval::tensor_table(r, look),
    ]
    .into_iter()
    .flatten()
    {
        if before {
            out.push('\n');
        }
        out.push_str(&table);
        before = true;
    }
    if generation > 0 {
        out.push_str(&fit_note(&hidden));
    }
    for table in ramp_steps(r) {
        out.push('\n');
        out.push_str(&table);
    }
    let searches = super::capacity::summary_lines(r);
    if !searches.is_empty() {
        out.push('\n');
        for line in searches {
            out.push_str(&line);
            out.push('\n');
        }
    }
    if let Some(table) = super::quality::table(r, look) {
        out.push('\n');
        out.push_str(&table);
    }
    let (telemetry, telemetry_notes) = super::resources::points(r);
    if let Some(table) = telemetry {
        out.push('\n');
        out.push_str(&table);
    }
    notes.extend(findings.lines(r.points.len()));
    notes.extend(telemetry_notes);
    for table in [
        super::summary_details::mix_table(r, look),
        super::summary_details::reasoning_table(r, look),
        super::summary_details::memory_table(r, look),
    ]
    .into_iter()
    .flatten()
    {
        out.push('\n');
        out.push_str(&table);
    }
    for name in tls_insecure_targets(r) {
        notes.push(format!(
            "⚠ TLS verification was off for target {name} (tls_insecure = true)"
        ));
    }
    if !r.pending.is_empty() {
        notes.push(format!(
            "{} point(s) did not run: {}",
            r.pending.len(),
            infer_bench_results::outside::terminal(&r.pending.join(", "))
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

/// A point's row of the summary table; what it found goes to `findings`.
fn row(p: &PointResult, look: Look, findings: &mut Findings) -> Vec<String> {
    let s = &p.merged;
    let ms = |m: &str, q: fn(&infer_bench_results::hist::Summary) -> f64| {
        s.latency_ms
            .get(m)
            .map(|x| f(q(x), 1))
            .unwrap_or_else(|| "-".into())
    };
    let slo = match p.slo_pass {
        // Narrow: the failed SLOs are named in a note, not the cell.
        Some(false) if !look.wide => {
            let failed: Vec<String> = p
                .slo
                .iter()
                .filter(|x| !x.pass)
                .map(|x| crate::slo_name(&x.metric, &x.expr))
                .collect();
            if !failed.is_empty() {
                findings.add(&p.slug, "SLO failed", &failed.join("; "));
            }
            "FAIL".to_string()
        }
        _ => crate::report::slo_text(p),
    };
    let valid = valid_cell(p);
    let cells = vec![
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
    ];
    if let Some(fail) = &p.failure {
        findings.add(&p.slug, "", fail);
    }
    for reason in &p.invalid_reasons {
        if p.status != PointStatus::Failed {
            findings.add(&p.slug, "INVALID", &reason.message);
        }
    }
    for w in &p.warnings {
        findings.add(&p.slug, "warning", &w.message);
    }
    if !s.errors.is_empty() {
        findings.add(&p.slug, "failures by class", &crate::failures_text(s));
    }
    cells
}

/// A table per ramp: one row per step, each step measured on its own.
pub fn ramp_steps(r: &Results) -> Vec<String> {
    r.points
        .iter()
        .filter(|p| !p.steps.is_empty())
        .map(|p| {
            let mut t = Table::new(&[
                ("step", Align::Right),
                ("level", Align::Left),
                ("ok", Align::Right),
                ("err", Align::Right),
                ("req/s", Align::Right),
                ("out tok/s", Align::Right),
                ("TTFT p50", Align::Right),
                ("TTFT p99", Align::Right),
                ("TPOT p50", Align::Right),
                ("TPOT p99", Align::Right),
                ("E2E p50", Align::Right),
                ("goodput", Align::Right),
            ]);
            for st in &p.steps {
                let c = crate::report::step_cells(st);
                // The step table's E2E p99 is left out to stay narrow.
                t.row(
                    c.iter()
                        .enumerate()
                        .filter(|(k, _)| *k != 11)
                        .map(|(_, v)| v.clone())
                        .collect(),
                );
            }
            format!("{}: ramp steps\n{}", p.slug, t.render())
        })
        .collect()
}

/// A point's `valid` cell: FAILED, yes or INVALID.
pub(crate) fn valid_cell(p: &PointResult) -> &'static str {
    match (p.status, p.valid) {
        (PointStatus::Failed, _) => "FAILED",
        (_, true) => "yes",
        (_, false) => "INVALID",
    }
}

/// The line under a table that left columns out to fit the terminal
/// (empty when none were).
pub(crate) fn fit_note(hidden: &[String]) -> String {
    if hidden.is_empty() {
        return String::new();
    }
    format!(
        "(to fit {} columns, not shown: {}; --wide shows every column)\n",
        crate::term::WIDTH,
        hidden.join(", ")
    )
}
