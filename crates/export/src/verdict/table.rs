//! The judge's report for a terminal: one row per point and gate, the most
//! severe decisions first (regressions at the top), then spec drift as
//! diffs, environment mismatches, SLO failures, new and dropped points, and
//! a one-line summary with what the exit code means.

use super::{band, change, evidence, exit_meaning, interval, percent, slo_value, value};
use crate::slo_name;
use crate::table::{Align, Table};
use infer_bench_judge::compare::{Decision, Match, PointReport, Report};

/// The report as text.
pub fn table(r: &Report) -> String {
    let mut out = format!(
        "{}: judged against {} (recorded {}), confidence {}, min_runs {}\n\n",
        r.spec,
        or_dash(&r.baseline.path),
        or_dash(&r.baseline.recorded_at),
        percent(r.confidence),
        r.min_runs
    );
    let mut rows: Vec<(u8, u8, &PointReport, usize)> = Vec::new();
    for p in r.points.iter().filter(|p| p.matched == Match::Compared) {
        for (i, g) in p.gates.iter().enumerate() {
            let sev = if p.skipped { 9 } else { g.decision.severity() };
            rows.push((sev, p.order(), p, i));
        }
    }
    rows.sort_by(|a, b| (a.0, a.1, &a.2.slug, a.3).cmp(&(b.0, b.1, &b.2.slug, b.3)));
    if !rows.is_empty() {
        let mut t = Table::new(&[
            ("verdict", Align::Left),
            ("point", Align::Left),
            ("gate", Align::Left),
            ("baseline", Align::Right),
            ("new", Align::Right),
            ("change", Align::Right),
            ("interval", Align::Left),
            ("band", Align::Right),
            ("evidence", Align::Left),
            ("note", Align::Left),
        ]);
        for (_, _, p, i) in rows {
            let g = &p.gates[i];
            let mut verdict = g.decision.to_string();
            if p.skipped {
                verdict.push_str(" (skipped)");
            } else if !g.confirmations.is_empty() && g.decision == Decision::Regressed {
                verdict.push_str(" (confirmed)");
            }
            t.row(vec![
                verdict,
                p.slug.clone(),
                g.label.clone(),
                value(g.baseline, &g.unit),
                value(g.new, &g.unit),
                change(g.change, g.scale, &g.unit),
                interval(g),
                band(g),
                evidence(g),
                g.note.clone().unwrap_or_default(),
            ]);
        }
        out.push_str(&t.render());
    }
    let mut notes = String::new();
    for p in &r.points {
        if !p.env_mismatch.is_empty() {
            notes.push_str(&format!(
                "\n{}: INCOMPARABLE environments ({}): {}\n",
                p.slug,
                match (p.skipped, r.on_env_mismatch) {
                    (true, _) => "skipped",
                    (_, infer_bench_spec::raw::OnEnvMismatch::Fail) => "fails the check",
                    _ => "advisory",
                },
                p.env_mismatch
                    .iter()
                    .map(|m| m.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some(d) = &p.drift {
            notes.push_str(&format!(
                "\n{}: the configuration changed (spec drift), so it was not compared; bless it to start gating the new one:\n{}",
                p.slug, d
            ));
        }
        for s in p.slo.iter().filter(|s| !s.pass) {
            notes.push_str(&format!(
                "\n{}: SLO failed: {} (measured {})\n",
                p.slug,
                slo_name(&s.metric, &s.expr),
                slo_value(&s.metric, s.value)
            ));
        }
        if p.matched == Match::Compared {
            for n in &p.notes {
                notes.push_str(&format!("{}: {n}\n", p.slug));
            }
        }
    }
    let list = |m: Match| -> Vec<&str> {
        r.points
            .iter()
            .filter(|p| p.matched == m)
            .map(|p| p.id.as_str())
            .collect()
    };
    let new = list(Match::New);
    if !new.is_empty() {
        notes.push_str(&format!(
            "\nnew (not in the baseline; bless to gate them): {}\n",
            new.join(", ")
        ));
    }
    let dropped = list(Match::Dropped);
    if !dropped.is_empty() {
        notes.push_str(&format!(
            "\nin the baseline but not in these results: {}\n",
            dropped.join(", ")
        ));
    }
    if !notes.is_empty() {
        out.push_str(&notes);
    }
    let c = &r.counts;
    out.push_str(&format!(
        "\n{} regressed, {} improved, {} unchanged, {} inconclusive, {} incomparable, {} insufficient; {} drift, {} new, {} dropped; {} SLO failure(s) -> {}\n",
        c.regressed,
        c.improved,
        c.unchanged,
        c.inconclusive,
        c.incomparable + c.skipped,
        c.insufficient,
        c.drift,
        c.new,
        c.dropped,
        c.slo_failed,
        exit_meaning(r.exit_code)
    ));
    out
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}
