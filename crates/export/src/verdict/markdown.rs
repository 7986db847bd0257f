//! The judge's report as Markdown, for a pull-request comment or a CI step
//! summary (`$GITHUB_STEP_SUMMARY`). Regressions first, each with the
//! metric, baseline against new, the change and its interval, the noise
//! band and the evidence, then the context that may explain it (facts that
//! changed, the point's telemetry); then SLO failures, what could not be
//! judged, spec drift, improvements, and a count of what did not change.
//!
//! GitHub refuses comments above 65,536 characters, so the text is kept
//! under [`MAX_BYTES`]: sections and table rows are added in that order of
//! importance until the next one would not fit, and a closing note says how
//! much was left out.

use super::{
    band, change, evidence, exit_meaning, interval, percent, slo_value, telemetry_highlights, value,
};
use crate::slo_name;
use crate::xml::escape;
use infer_bench_judge::compare::{Decision, GateReport, Match, PointReport, Report};

/// The most bytes [`markdown`] writes: under GitHub's 65,536-character
/// comment limit, with room for a heading a workflow may add.
pub const MAX_BYTES: usize = 64_000;

/// Room kept for the truncation note and the footer.
const RESERVE_BYTES: usize = 600;

/// Telemetry entries shown per regressed point.
const TELEMETRY_ENTRIES: usize = 12;

/// Lines of a drift diff shown before it is cut.
const DRIFT_LINES: usize = 60;

/// The report as Markdown, at most `max_bytes` long (use [`MAX_BYTES`]).
pub fn markdown(r: &Report, max_bytes: usize) -> String {
    let mut w = Writer::new(max_bytes.saturating_sub(RESERVE_BYTES));
    let c = &r.counts;
    let status = match r.exit_code {
        0 => "passed",
        _ => "failed",
    };
    w.force(&format!(
        "## infer-bench: `{}` {status}\n\n{}\n\n",
        r.spec,
        summary_line(r)
    ));
    w.force(&format!(
        "Baseline `{}` (recorded {}), results `{}`; confidence {}, min_runs {}.\n\n",
        dash(&r.baseline.path),
        dash(&r.baseline.recorded_at),
        dash(&r.results.path),
        percent(r.confidence),
        r.min_runs
    ));

    let gates_of = |d: Decision| -> Vec<(&PointReport, &GateReport)> {
        r.points
            .iter()
            .filter(|p| p.matched == Match::Compared && !p.skipped)
            .flat_map(|p| p.gates.iter().map(move |g| (p, g)))
            .filter(|(_, g)| g.decision == d)
            .collect()
    };

    let regressed = gates_of(Decision::Regressed);
    if !regressed.is_empty() {
        w.section("### Regressions\n\n");
        gate_table(&mut w, &regressed);
        for p in r
            .points
            .iter()
            .filter(|p| p.decision == Some(Decision::Regressed) && !p.skipped)
        {
            if let Some(block) = context(p) {
                w.push(&block);
            }
        }
    }

    let slo_failed: Vec<&PointReport> = r
        .points
        .iter()
        .filter(|p| p.slo_pass == Some(false))
        .collect();
    if !slo_failed.is_empty() {
        w.section("### SLO failures\n\n");
        w.table_header("| point | SLO | measured |\n|---|---|---|\n");
        for p in slo_failed {
            for s in p.slo.iter().filter(|s| !s.pass) {
                w.row(&format!(
                    "| `{}` | {} | {} |\n",
                    p.slug,
                    cell(&slo_name(&s.metric, &s.expr)),
                    slo_value(&s.metric, s.value)
                ));
            }
        }
        w.end_table();
    }

    let failed: Vec<&PointReport> = r.points.iter().filter(|p| p.failed).collect();
    if !failed.is_empty() {
        w.section("### Points that could not be measured\n\n");
        for p in failed {
            let why = p
                .gates
                .first()
                .and_then(|g| g.note.clone())
                .or_else(|| p.notes.first().cloned())
                .unwrap_or_default();
            w.push(&format!("- `{}`: {}\n", p.id, one_line(&why)));
        }
        w.push("\n");
    }

    let unjudged: Vec<&PointReport> = r
        .points
        .iter()
        .filter(|p| p.matched == Match::Compared && !p.failed)
        .filter(|p| p.skipped || p.decision.is_some_and(Decision::is_unjudged))
        .collect();
    if !unjudged.is_empty() {
        w.section("### Not judged\n\n");
        w.table_header("| point | gate | decision | why |\n|---|---|---|---|\n");
        for p in unjudged {
            if !p.env_mismatch.is_empty() {
                let what = p
                    .env_mismatch
                    .iter()
                    .map(|m| m.to_string())
                    .collect::<Vec<_>>()
                    .join(", ");
                let effect = if p.skipped {
                    "skipped"
                } else if r.on_env_mismatch == infer_bench_spec::raw::OnEnvMismatch::Fail {
                    "fails the check"
                } else {
                    "advisory"
                };
                w.row(&format!(
                    "| `{}` | all | INCOMPARABLE ({effect}) | environment differs: {} |\n",
                    p.slug,
                    cell(&what)
                ));
                continue;
            }
            for g in p.gates.iter().filter(|g| g.decision.is_unjudged()) {
                w.row(&format!(
                    "| `{}` | {} | {} | {} |\n",
                    p.slug,
                    g.label,
                    g.decision,
                    cell(g.note.as_deref().unwrap_or(""))
                ));
            }
        }
        w.end_table();
    }

    let drift: Vec<&PointReport> = r
        .points
        .iter()
        .filter(|p| p.matched == Match::Drift)
        .collect();
    if !drift.is_empty() {
        w.section("### Spec drift (not compared)\n\nThese points' configurations changed; bless them to start gating the new ones.\n\n");
        for p in drift {
            let diff = p.drift.as_deref().unwrap_or("");
            let mut lines: Vec<&str> = diff.lines().collect();
            let cut = lines.len().saturating_sub(DRIFT_LINES);
            lines.truncate(DRIFT_LINES);
            let more = if cut > 0 {
                format!("... {cut} more lines\n")
            } else {
                String::new()
            };
            w.push(&format!(
                "<details><summary><code>{}</code>: configuration changed</summary>\n\n```diff\n{}\n{more}```\n\n</details>\n\n",
                escape(&p.slug),
                lines.join("\n").replace("```", "` ` `")
            ));
        }
    }

    let improved = gates_of(Decision::Improved);
    if !improved.is_empty() {
        w.section("### Improvements\n\n");
        gate_table(&mut w, &improved);
    }

    if c.unchanged > 0 || c.unchanged_gates > 0 {
        w.section("### Unchanged\n\n");
        w.push(&format!(
            "{} point(s) unchanged; {} gate(s) unchanged across all compared points.\n\n",
            c.unchanged, c.unchanged_gates
        ));
    }

    let list = |m: Match| -> Vec<String> {
        r.points
            .iter()
            .filter(|p| p.matched == m)
            .map(|p| format!("`{}`", p.id))
            .collect()
    };
    let new = list(Match::New);
    let dropped = list(Match::Dropped);
    if !new.is_empty() || !dropped.is_empty() {
        w.section("### New and dropped points\n\n");
        if !new.is_empty() {
            w.push(&format!("- new (bless to gate them): {}\n", new.join(", ")));
        }
        if !dropped.is_empty() {
            w.push(&format!(
                "- in the baseline, not in these results: {}\n",
                dropped.join(", ")
            ));
        }
        w.push("\n");
    }
    w.finish(&format!(
        "<sub>infer-bench {} · exit code {} ({})</sub>\n",
        env!("CARGO_PKG_VERSION"),
        r.exit_code,
        exit_meaning(r.exit_code)
    ))
}

/// "**1 regressed**, 2 improved, 5 unchanged ..." with the zeros left out.
fn summary_line(r: &Report) -> String {
    let c = &r.counts;
    let mut parts = Vec::new();
    let mut add = |n: usize, what: &str, bold: bool| {
        if n > 0 {
            parts.push(if bold {
                format!("**{n} {what}**")
            } else {
                format!("{n} {what}")
            });
        }
    };
    add(c.regressed, "regressed", true);
    add(c.slo_failed, "with failed SLOs", true);
    add(c.failed, "failed to run", true);
    add(c.improved, "improved", false);
    add(c.unchanged, "unchanged", false);
    add(c.inconclusive, "inconclusive", false);
    add(c.incomparable + c.skipped, "incomparable", false);
    add(c.insufficient, "insufficient", false);
    add(c.drift, "changed configuration", false);
    add(c.new, "new", false);
    add(c.dropped, "dropped", false);
    if parts.is_empty() {
        "No points.".into()
    } else {
        format!("Points: {}.", parts.join(", "))
    }
}

fn gate_table(w: &mut Writer, rows: &[(&PointReport, &GateReport)]) {
    w.table_header("| point | gate | baseline | new | change | interval | noise band | evidence |\n|---|---|--:|--:|--:|---|--:|---|\n");
    for (p, g) in rows {
        let mut ev = evidence(g);
        if !g.confirmations.is_empty() {
            ev.push_str(&format!(
                ", confirmed by {} re-run(s)",
                g.confirmations.len()
            ));
        }
        w.row(&format!(
            "| `{}` | {} | {} | {} | **{}** | {} | {} | {} |\n",
            p.slug,
            g.label,
            value(g.baseline, &g.unit),
            value(g.new, &g.unit),
            change(g.change, g.scale, &g.unit),
            interval(g),
            band(g),
            ev
        ));
    }
    w.end_table();
}

/// What may explain a regression: facts that changed and telemetry.
fn context(p: &PointReport) -> Option<String> {
    let mut items = Vec::new();
    if !p.fact_changes.is_empty() {
        items.push(format!(
            "- recorded facts that changed: {}",
            p.fact_changes
                .iter()
                .map(|m| format!("{} `{}` → `{}`", m.key, m.baseline, m.new))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(t) = &p.telemetry {
        let h = telemetry_highlights(t, TELEMETRY_ENTRIES);
        if !h.is_empty() {
            items.push(format!(
                "- telemetry: {}",
                h.iter()
                    .map(|(k, v)| format!("{k} `{}`", v.replace('`', "'")))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    if items.is_empty() {
        return None;
    }
    Some(format!(
        "<details><summary>Context for <code>{}</code></summary>\n\n{}\n\n</details>\n\n",
        escape(&p.slug),
        items.join("\n")
    ))
}

/// A table cell: one line, pipes escaped.
fn cell(s: &str) -> String {
    one_line(s).replace('|', "\\|")
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

/// Appends text while it fits a byte budget and counts what did not.
struct Writer {
    out: String,
    budget: usize,
    full: bool,
    /// Items (rows, blocks, sections) left out.
    dropped: usize,
    /// A table header waiting for its first row.
    pending_header: Option<String>,
}

impl Writer {
    fn new(budget: usize) -> Writer {
        Writer {
            out: String::new(),
            budget,
            full: false,
            dropped: 0,
            pending_header: None,
        }
    }

    /// Always written (the title and summary).
    fn force(&mut self, s: &str) {
        self.out.push_str(s);
    }

    fn fits(&self, extra: usize) -> bool {
        !self.full && self.out.len() + extra <= self.budget
    }

    fn push(&mut self, s: &str) {
        if self.fits(s.len()) {
            self.out.push_str(s);
        } else {
            self.full = true;
            self.dropped += 1;
        }
    }

    fn section(&mut self, heading: &str) {
        self.push(heading);
    }

    fn table_header(&mut self, header: &str) {
        self.pending_header = Some(header.to_string());
    }

    fn row(&mut self, row: &str) {
        match self.pending_header.take() {
            Some(h) => {
                let both = format!("{h}{row}");
                self.push(&both);
            }
            None => self.push(row),
        }
    }

    fn end_table(&mut self) {
        self.pending_header = None;
        self.push("\n");
    }

    fn finish(mut self, footer: &str) -> String {
        if self.full {
            self.out.push_str(&format!(
                "\n_The report was cut to stay under GitHub's size limit: {} more item(s) not shown. The full verdicts are in `infer-bench diff --format json` (or the JUnit file)._\n\n",
                self.dropped
            ));
        }
        self.out.push_str(footer);
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_judge::compare::compare;
    use infer_bench_judge::fixtures::{baseline_of, plan, point, results};

    const GATES: &str = r#"
[regression]
metrics = [{ metric = "tpot", stat = "p50", noise = "5%" }]
"#;

    /// `count` points named p0000.., each with baseline TPOT 100 and the
    /// new TPOT `new(i)` in all three runs.
    fn report(count: usize, new: impl Fn(usize) -> f64) -> Report {
        let (spec, plan) = plan(16, GATES);
        let named = |i: usize, v: f64| {
            let mut p = point(&plan, &[v; 3], &[]);
            p.slug = format!("p{i:04}");
            p.id = format!("p{i:04}-00000000");
            p
        };
        let b = baseline_of(&results((0..count).map(|i| named(i, 100.0)).collect()));
        let points: Vec<_> = (0..count).map(|i| named(i, new(i))).collect();
        let settings = infer_bench_judge::compare::Settings::from_regression(&spec.regression);
        let mut report = compare(&b, &results(points), &settings);
        if let Some(first) = report.points.iter_mut().find(|p| p.id == "p0000-00000000") {
            first.telemetry = Some(serde_json::json!({
                "gpu": {"throttle_reasons": "hw_slowdown", "sm_clock_mhz": [1410, 1410]},
                "vllm": {"num_preemptions_total": 7},
            }));
        }
        report
    }

    #[test]
    fn regressions_first_with_context_then_improvements_then_a_count() {
        // p0000 regressed, p0001 improved, p0002 unchanged.
        let r = report(3, |i| [120.0, 80.0, 100.0][i]);
        let md = markdown(&r, MAX_BYTES);
        assert!(
            md.starts_with(
                "## infer-bench: `unit` failed\n\nPoints: **1 regressed**, 1 improved, 1 unchanged."
            ),
            "{md}"
        );
        let reg = md.find("### Regressions").unwrap();
        let imp = md.find("### Improvements").unwrap();
        let unch = md.find("### Unchanged").unwrap();
        assert!(reg < imp && imp < unch, "{md}");
        assert!(
            md.contains("| `p0000` | tpot p50 | 100 ms | 120 ms | **+20.0%** | [+20.0%, +20.0%] | ±5.0% | 3 vs 3 runs, 90% |"),
            "{md}"
        );
        assert!(md.contains("gpu.throttle_reasons `hw_slowdown`"), "{md}");
        assert!(
            md.contains("gpu.sm_clock_mhz `mean 1410, max 1410 (2 samples)`"),
            "{md}"
        );
        assert!(md.contains("vllm.num_preemptions_total `7`"), "{md}");
        assert!(
            md.contains("| `p0001` | tpot p50 | 100 ms | 80.0 ms | **-20.0%**"),
            "{md}"
        );
        assert!(
            md.contains("1 point(s) unchanged; 1 gate(s) unchanged"),
            "{md}"
        );
        assert!(
            md.trim_end()
                .ends_with("exit code 1 (failed: a regression, a failed SLO or a forbidden environment mismatch)</sub>"),
            "{md}"
        );
        assert!(!md.contains("cut to stay under"));
    }

    /// 3000 regressed points would take about 400 KB; the report keeps the
    /// first rows that fit, says how much it left out, and ends with the
    /// footer.
    #[test]
    fn long_reports_are_cut_under_the_limit() {
        let r = report(3000, |_| 130.0);
        let md = markdown(&r, MAX_BYTES);
        assert!(md.len() <= MAX_BYTES, "{}", md.len());
        assert!(
            md.len() > MAX_BYTES - 2000,
            "uses the room it has: {}",
            md.len()
        );
        assert!(md.contains("| `p0000` | tpot p50 |"));
        assert!(!md.contains("`p2999`"));
        assert!(
            md.contains("_The report was cut to stay under GitHub's size limit:"),
            "{}",
            &md[md.len() - 600..]
        );
        assert!(md.trim_end().ends_with("</sub>"));
        // Every table row that made it is whole.
        let last_row = md.lines().rfind(|l| l.starts_with("| `p")).unwrap();
        assert!(last_row.ends_with(" |"), "{last_row}");
    }

    #[test]
    fn cells_are_escaped() {
        assert_eq!(cell("a | b\nc"), "a \\| b c");
        assert_eq!(escape("<a&b>"), "&lt;a&amp;b&gt;");
    }
}
