//! The judge's report as Markdown, for a pull-request comment or a CI step
//! summary (`$GITHUB_STEP_SUMMARY`). A heading whose word is the exit
//! code's ("passed", "failed: regression", "could not judge", "could not
//! measure"), one sentence counting the points, what about the rules the
//! reader must know; then the regressions (one row per regressed gate: the
//! change, its interval, the noise band, the evidence) with the recorded
//! facts that changed; SLO failures; what could not be judged, one line per
//! reason with the points it applies to and the setting that fixes it, spec
//! drift as the settings that changed; improvements; and a count of what
//! did not change.
//!
//! GitHub refuses comments above 65,536 characters, so the text is kept
//! under [`MAX_BYTES`]: sections and table rows are added in that order of
//! importance until the next one would not fit, and a closing note says how
//! much was left out.

use super::{
    Class, Group, band, change, count_points, evidence, exit_meaning, headline, percent, slo_value,
    tally, unjudged_groups, value,
};
use crate::slo_name;
use infer_bench_judge::compare::{Decision, GateReport, Match, PointReport, Report, Scale};
use infer_bench_judge::fingerprint::Mismatch;
use infer_bench_judge::rules::RulesSource;
use infer_bench_results::outside;

/// The most bytes [`markdown`] writes: under GitHub's 65,536-character
/// comment limit, with room for a heading a workflow may add.
pub const MAX_BYTES: usize = 64_000;

/// Room kept for the truncation note and the footer.
const RESERVE_BYTES: usize = 600;

/// Points named in a line before "and N more".
const NAMES: usize = 10;

/// A reason with at most this many points shows each point's particulars
/// under it (more: in a collapsed block).
const INLINE_POINTS: usize = 3;

/// Lines of a drift diff shown before it is cut.
const DRIFT_LINES: usize = 60;

/// Characters of a point's particulars or a changed value before it is cut.
const DETAIL_CHARS: usize = 240;

/// The report as Markdown, at most `max_bytes` long (use [`MAX_BYTES`]).
pub fn markdown(r: &Report, max_bytes: usize) -> String {
    let mut w = Writer::new(max_bytes.saturating_sub(RESERVE_BYTES));
    w.force(&format!(
        "## infer-bench: {} {}\n\n{}\n\n",
        code(&r.spec),
        headline(r),
        summary_line(r)
    ));
    for n in notices(r) {
        w.force(&format!("{n}\n\n"));
    }
    let mut how = format!(
        "Baseline {} (recorded {}), results {}; confidence {}, min_runs {}",
        code(dash(&r.baseline.path)),
        code(dash(&r.baseline.recorded_at)),
        code(dash(&r.results.path)),
        percent(r.confidence),
        r.min_runs
    );
    if r.allow_unjudged {
        how.push_str(", `allow_unjudged`");
    }
    if r.strict {
        how.push_str(", `--strict`");
    }
    w.force(&format!("{how}.\n\n"));

    let gates_of = |d: Decision| -> Vec<(&PointReport, &GateReport)> {
        r.points
            .iter()
            .filter(|p| p.matched == Match::Compared && !p.skipped && !p.failed)
            .flat_map(|p| p.gates.iter().map(move |g| (p, g)))
            .filter(|(_, g)| g.decision == d)
            .collect()
    };

    let regressed = gates_of(Decision::Regressed);
    if !regressed.is_empty() {
        w.section("### Regressions\n\n");
        gate_table(&mut w, &regressed);
        let points: Vec<&PointReport> = r
            .points
            .iter()
            .filter(|p| Class::of(r, p) == Class::Regressed)
            .collect();
        if let Some(block) = fact_changes(&points) {
            w.push(&block);
        }
    }

    let slo_failed: Vec<&PointReport> = r
        .points
        .iter()
        .filter(|p| p.slo_pass == Some(false))
        .collect();
    if !slo_failed.is_empty() {
        w.section("### SLO failures\n\n");
        w.table_header("| point | SLO | measured |\n|---|---|--:|\n");
        for p in slo_failed {
            for s in p.slo.iter().filter(|s| !s.pass) {
                w.row(&format!(
                    "| {} | {} | {} |\n",
                    code_cell(&p.slug),
                    cell(&slo_name(&s.metric, &s.expr)),
                    slo_value(&s.metric, s.value)
                ));
            }
        }
        w.end_table();
    }

    let failed: Vec<&PointReport> = r.points.iter().filter(|p| p.failed).collect();
    if !failed.is_empty() {
        w.section("### Could not be measured\n\n");
        for p in failed {
            w.push(&format!("- {}: {}\n", code(&p.slug), quote(&p.failure())));
        }
        w.push("\n");
    }

    unjudged(&mut w, r);

    let improved = gates_of(Decision::Improved);
    if !improved.is_empty() {
        w.section("### Improvements\n\n");
        gate_table(&mut w, &improved);
    }

    let of_class = |c: Class| -> Vec<&PointReport> {
        r.points.iter().filter(|p| Class::of(r, p) == c).collect()
    };
    let unchanged = of_class(Class::Unchanged);
    if !unchanged.is_empty() {
        w.section("### Unchanged\n\n");
        w.push(&format!(
            "{}: {}.\n\n",
            count_points(unchanged.len()),
            names(&unchanged, |p| &p.slug)
        ));
    }

    let new = of_class(Class::New);
    let dropped = of_class(Class::Dropped);
    if !new.is_empty() || !dropped.is_empty() {
        w.section("### New and dropped points\n\n");
        if !new.is_empty() {
            w.push(&format!(
                "- new, not judged until blessed: {}\n",
                names(&new, |p| &p.id)
            ));
        }
        if !dropped.is_empty() {
            w.push(&format!(
                "- in the baseline, not in these results: {}\n",
                names(&dropped, |p| &p.id)
            ));
        }
        w.push("\n");
    }
    w.finish(&format!(
        "<sub>infer-bench {} · exit code {} ({})</sub>\n",
        env!("CARGO_PKG_VERSION"),
        r.exit_code,
        exit_meaning(r)
    ))
}

/// "6 points: **2 regressed**, **1 could not be judged** (fewer runs than
/// min_runs), 3 unchanged." Each point counts once; what fails the check is
/// bold.
fn summary_line(r: &Report) -> String {
    let total = r.points.len();
    if total == 0 {
        return "No points.".into();
    }
    let groups = unjudged_groups(r);
    let failing: Vec<&Group> = groups.iter().filter(|g| g.fails).collect();
    let parts: Vec<String> = tally(r)
        .into_iter()
        .map(|(class, n)| {
            let mut part = if class.fails() {
                format!("**{n} {}**", class.words())
            } else {
                format!("{n} {}", class.words())
            };
            if class == Class::Unjudged && failing.len() == 1 {
                part.push_str(&format!(" ({})", failing[0].reason));
            }
            part
        })
        .collect();
    format!("{}: {}.", count_points(total), parts.join(", "))
}

/// What the reader must know before the figures: rules that differ from
/// the baseline's, rules that came from the spec, nothing judged.
fn notices(r: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for name in &r.tls_insecure {
        out.push(format!(
            "> ⚠ **TLS verification was off for target {}** (`tls_insecure = true`): its certificate was not checked.",
            code(name)
        ));
    }
    match r.rules {
        RulesSource::Baseline if !r.rules_changes.is_empty() => out.push(format!(
            "> **The spec's rules differ from the baseline's; judged by the baseline's** (bless on main to adopt them): {}.",
            changes(&r.rules_changes, false)
        )),
        RulesSource::Baseline => {}
        RulesSource::Spec => out.push(
            "The baseline pins no rules (an older file): judged by the spec's `[regression]` rules."
                .into(),
        ),
    }
    for line in super::capacity_lines(r) {
        out.push(format!("> {}", line.replace('`', "'")));
    }
    let failing = r.points.iter().any(|p| Class::of(r, p) == Class::Unjudged);
    if r.nothing_judged() && !failing {
        out.push(
            "**Nothing was judged:** no point of these results was compared with the baseline's."
                .into(),
        );
    }
    out
}

/// "min_runs 3 → 9; tpot p50 noise 5% → 1000%", or with `code`
/// "`model.served_name`: `a` → `b`".
fn changes(list: &[Mismatch], code: bool) -> String {
    // Rules are typed values the judge writes back (numbers, percents),
    // not free text: shown as they are.
    let text = |v: &str| short(&one_line(v));
    let code_text = |v: &str| outside::markdown_code(&short(&one_line(v)));
    list.iter()
        .map(|m| {
            if code {
                format!(
                    "{}: {} → {}",
                    outside::markdown_code(&m.key),
                    code_text(&m.baseline),
                    code_text(&m.new)
                )
            } else {
                format!("{} {} → {}", m.key, text(&m.baseline), text(&m.new))
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// One line per reason a point could not be judged, with its points and
/// its fix; drift as the settings that changed; each point's particulars
/// and the full drift diffs collapsed.
fn unjudged(w: &mut Writer, r: &Report) {
    let groups = unjudged_groups(r);
    if groups.is_empty() {
        return;
    }
    let any_fails = groups.iter().any(|g| g.fails);
    if any_fails {
        let why = if r.allow_unjudged {
            "`--strict` fails these"
        } else {
            "Each fails the check (exit 4) until fixed"
        };
        w.section(&format!("### Could not be judged\n\n{why}.\n\n"));
    } else {
        w.section("### Not judged (advisory)\n\n");
    }
    // Drift shows what changed, point by point; a reason with few points
    // shows each point's particulars under it; one with more names its
    // points and keeps the particulars in a collapsed block.
    let inline = |g: &Group| g.is_drift() || g.points.len() <= INLINE_POINTS;
    for g in &groups {
        let tag = if any_fails && !g.fails {
            " (advisory)"
        } else {
            ""
        };
        let who = if inline(g) {
            String::new()
        } else {
            format!(" ({})", names(&g.points, |p| &p.slug))
        };
        let mut line = format!(
            "- **{}**{tag}: {}{who}. {}.\n",
            g.reason,
            count_points(g.points.len()),
            fix_text(&g.fix)
        );
        if inline(g) {
            let details = g.details();
            for (p, (slug, detail)) in g.points.iter().zip(&details).take(NAMES) {
                let what = if p.matched == Match::Drift {
                    if p.drift_changes.is_empty() {
                        "see the diff below".to_string()
                    } else {
                        changes(&p.drift_changes, true)
                    }
                } else {
                    quote(detail)
                };
                if what.is_empty() {
                    line.push_str(&format!("    - {}\n", code(slug)));
                } else {
                    line.push_str(&format!("    - {}: {what}\n", code(slug)));
                }
            }
            if g.points.len() > NAMES {
                line.push_str(&format!("    - and {} more\n", g.points.len() - NAMES));
            }
        }
        w.push(&line);
    }
    w.push("\n");

    let mut items = Vec::new();
    for g in groups.iter().filter(|g| !inline(g)) {
        for (slug, detail) in g.details() {
            if !detail.trim().is_empty() {
                items.push(format!("- {}: {}\n", code(slug), quote(&detail)));
            }
        }
    }
    w.collapsed("Each point's particulars", &items);

    let diffs: Vec<String> = r
        .points
        .iter()
        .filter(|p| p.matched == Match::Drift)
        .filter_map(|p| {
            let diff = p.drift.as_deref()?;
            let mut lines: Vec<&str> = diff.lines().collect();
            let cut = lines.len().saturating_sub(DRIFT_LINES);
            lines.truncate(DRIFT_LINES);
            let more = if cut > 0 {
                format!("... {cut} more lines\n")
            } else {
                String::new()
            };
            Some(format!(
                "```diff\n{}\n{more}```\n\n",
                lines.join("\n").replace("```", "` ` `")
            ))
        })
        .collect();
    w.collapsed("The configurations' full diffs", &diffs);
}

/// The regressed or improved gates, one row each: few columns, short
/// numbers, so the table fits a pull-request comment. The evidence (runs
/// a side, the confidence reached, confirmations) is a sentence under the
/// table when every row has the same, else a column.
fn gate_table(w: &mut Writer, rows: &[(&PointReport, &GateReport)]) {
    let ev = |g: &GateReport| {
        let mut ev = evidence(g);
        if !g.confirmations.is_empty() {
            ev.push_str(&format!(
                ", confirmed by {} re-run(s)",
                g.confirmations.len()
            ));
        }
        ev
    };
    let shared = rows
        .first()
        .map(|(_, g)| ev(g))
        .filter(|first| rows.iter().all(|(_, g)| ev(g) == *first));
    if shared.is_some() {
        w.table_header(
            "| point | gate | baseline → new | change [interval] | noise band |\n|---|---|--:|--:|--:|\n",
        );
    } else {
        w.table_header(
            "| point | gate | baseline → new | change [interval] | noise band | evidence |\n|---|---|--:|--:|--:|---|\n",
        );
    }
    for (p, g) in rows {
        let last = if shared.is_some() {
            String::new()
        } else {
            format!(" {} |", ev(g))
        };
        w.row(&format!(
            "| {} | {} | {} | **{}** {} | {} |{last}\n",
            code_cell(&p.slug),
            g.label,
            from_to(g),
            change(g.change, g.scale, &g.unit),
            short_interval(g),
            band(g),
        ));
    }
    w.end_table();
    if shared.is_some() {
        w.push(&format!("{}.\n\n", evidence_sentence(rows[0].1)));
    }
    let drifts: Vec<String> = rows
        .iter()
        .filter_map(|(p, g)| {
            let h = g.history.as_ref().filter(|h| h.extends_drift)?;
            let d = h.drift.as_ref()?;
            Some(format!(
                "- {} {}: main moved {:+.1}% over the last {} commits, since {}; this change would extend that drift\n",
                code(&p.slug),
                g.label,
                d.relative * 100.0,
                d.commits,
                code(&commit(&d.since))
            ))
        })
        .collect();
    for d in &drifts {
        w.push(d);
    }
    if !drifts.is_empty() {
        w.push("\n");
    }
}

/// A commit as people quote it: its first 12 characters.
fn commit(c: &str) -> String {
    c.chars().take(12).collect()
}

/// The evidence of a gate as a sentence, for a table whose rows share it:
/// "Each row compares 3 baseline runs with 3 new ones; each interval covers
/// 90%."
fn evidence_sentence(g: &GateReport) -> String {
    let what = if g.over_prompts {
        "prompts"
    } else if g.within_run {
        "windows (a side has a single run: within-run evidence)"
    } else {
        "runs"
    };
    let mut s = match &g.history {
        Some(h) => format!(
            "Each row compares main's level over its last {} commits (since {}) with {} new {}",
            h.commits,
            code(&commit(&h.since)),
            g.n,
            if g.within_run { "windows" } else { "runs" }
        ),
        None => format!(
            "Each row compares {} baseline {what} with {} new ones",
            g.m, g.n
        ),
    };
    if let Some(c) = g.achieved_confidence {
        s.push_str(&format!("; each interval covers {}", percent(c)));
    }
    if !g.confirmations.is_empty() {
        s.push_str(&format!(
            "; confirmed by {} re-run(s)",
            g.confirmations.len()
        ));
    }
    s
}

/// "9.38 → 13.6 ms": both values, the unit once.
fn from_to(g: &GateReport) -> String {
    let a = value(g.baseline, &g.unit);
    let b = value(g.new, &g.unit);
    let suffix = format!(" {}", g.unit);
    match a.strip_suffix(&suffix) {
        Some(bare) if !g.unit.is_empty() && b.ends_with(&suffix) => format!("{bare} → {b}"),
        _ => format!("{a} → {b}"),
    }
}

/// The interval of a change, short: "[+38.3, +46.1]" (in the change's
/// unit: percent, or percentage points for a fraction).
fn short_interval(g: &GateReport) -> String {
    let (Some(lo), Some(hi)) = (
        g.change_low.filter(|x| x.is_finite()),
        g.change_high.filter(|x| x.is_finite()),
    ) else {
        return String::new();
    };
    match g.scale {
        Scale::Relative => format!("[{:+.1}, {:+.1}]", lo * 100.0, hi * 100.0),
        Scale::Absolute if g.unit == "fraction" => {
            format!("[{:+.2}, {:+.2}]", lo * 100.0, hi * 100.0)
        }
        Scale::Absolute => format!("[{lo:+.3}, {hi:+.3}]"),
    }
}

/// The recorded facts that changed since the baseline (server version,
/// kernel, ...), which may explain a regression: one line when the
/// regressed points share them, else one per point.
fn fact_changes(points: &[&PointReport]) -> Option<String> {
    let with: Vec<&&PointReport> = points
        .iter()
        .filter(|p| !p.fact_changes.is_empty())
        .collect();
    let first = with.first()?;
    if with.len() == points.len() && with.iter().all(|p| p.fact_changes == first.fact_changes) {
        return Some(format!(
            "Recorded facts that changed since the baseline: {}.\n\n",
            changes(&first.fact_changes, true)
        ));
    }
    let mut out = String::from("Recorded facts that changed since the baseline:\n\n");
    for p in with {
        out.push_str(&format!(
            "- {}: {}\n",
            code(&p.slug),
            changes(&p.fact_changes, true)
        ));
    }
    out.push('\n');
    Some(out)
}

/// "Fix: `[load] runs = 3` (or more)"; a fix that says "fix ..." itself is
/// only capitalized.
fn fix_text(fix: &str) -> String {
    match fix.strip_prefix("fix ") {
        Some(rest) => format!("Fix {rest}"),
        None => format!("Fix: {fix}"),
    }
}

/// "`a`, `b`, `c` and 4 more".
fn names<'a>(points: &[&'a PointReport], name: impl Fn(&'a PointReport) -> &'a str) -> String {
    let shown: Vec<String> = points.iter().take(NAMES).map(|p| code(name(p))).collect();
    let more = points.len().saturating_sub(NAMES);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// At most [`DETAIL_CHARS`] characters.
fn short(s: &str) -> String {
    if s.chars().count() <= DETAIL_CHARS {
        s.to_string()
    } else {
        s.chars().take(DETAIL_CHARS - 3).collect::<String>() + "..."
    }
}

/// A table cell: one line, read as the characters it holds (pipes
/// escaped, no Markdown, HTML, link or mention built from it).
fn cell(s: &str) -> String {
    outside::markdown_text(&one_line(s))
}

/// Outside text in prose (a failure, a detail, a changed value): one line,
/// at most [`DETAIL_CHARS`] characters, read as the characters it holds.
fn quote(s: &str) -> String {
    outside::markdown_text(&short(&one_line(s)))
}

/// A name from a spec or a file (a point, a target, a path) as a code span.
fn code(s: &str) -> String {
    outside::markdown_code(s)
}

/// [`code`] in a table cell.
fn code_cell(s: &str) -> String {
    outside::markdown_cell(s)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

/// Appends text while it fits a byte budget and counts what did not
/// (shared with the history's Markdown, [`crate::history::check`]).
pub(crate) struct Writer {
    out: String,
    budget: usize,
    full: bool,
    /// Items (rows, blocks, sections) left out.
    dropped: usize,
    /// A table header waiting for its first row.
    pending_header: Option<String>,
}

impl Writer {
    pub(crate) fn new(budget: usize) -> Writer {
        Writer {
            out: String::new(),
            budget,
            full: false,
            dropped: 0,
            pending_header: None,
        }
    }

    /// Always written (the title and summary).
    pub(crate) fn force(&mut self, s: &str) {
        self.out.push_str(s);
    }

    pub(crate) fn fits(&self, extra: usize) -> bool {
        !self.full && self.out.len() + extra <= self.budget
    }

    pub(crate) fn push(&mut self, s: &str) {
        if self.fits(s.len()) {
            self.out.push_str(s);
        } else {
            self.full = true;
            self.dropped += 1;
        }
    }

    /// A `<details>` block of `items` under `summary`, with as many items
    /// as fit (the rest counted as left out); nothing when there are none.
    pub(crate) fn collapsed(&mut self, summary: &str, items: &[String]) {
        if items.is_empty() {
            return;
        }
        let open = format!("<details><summary>{summary}</summary>\n\n");
        let close = "\n</details>\n\n";
        if !self.fits(open.len() + close.len()) {
            self.full = true;
            self.dropped += 1;
            return;
        }
        let mut block = open;
        for (i, item) in items.iter().enumerate() {
            if !self.fits(block.len() + item.len() + close.len()) {
                self.full = true;
                self.dropped += items.len() - i;
                break;
            }
            block.push_str(item);
        }
        block.push_str(close);
        self.out.push_str(&block);
    }

    pub(crate) fn section(&mut self, heading: &str) {
        self.push(heading);
    }

    pub(crate) fn table_header(&mut self, header: &str) {
        self.pending_header = Some(header.to_string());
    }

    pub(crate) fn row(&mut self, row: &str) {
        match self.pending_header.take() {
            Some(h) => {
                let both = format!("{h}{row}");
                self.push(&both);
            }
            None => self.push(row),
        }
    }

    pub(crate) fn end_table(&mut self) {
        self.pending_header = None;
        self.push("\n");
    }

    pub(crate) fn finish(self, footer: &str) -> String {
        self.finish_pointing(
            "`infer-bench diff --format json` (or the JUnit file)",
            footer,
        )
    }

    /// [`Writer::finish`], the closing note naming `full` as where the
    /// whole report is.
    pub(crate) fn finish_pointing(mut self, full: &str, footer: &str) -> String {
        if self.full {
            self.out.push_str(&format!(
                "\n_The report was cut to stay under GitHub's size limit: {} more item(s) not shown. The full verdicts are in {full}._\n\n",
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
    use crate::verdict::testkit::{self, GATES};
    use crate::xml::escape;
    use infer_bench_judge::compare::{Settings, compare};
    use infer_bench_testkit::fixtures::{baseline_of, plan, point, results};

    /// `count` points named p0000.., each with baseline TPOT 100 and the
    /// new TPOT `new(i)` in all three runs.
    fn report(count: usize, new: impl Fn(usize) -> f64) -> Report {
        let (spec, plan) = plan(16, GATES);
        let named = |i: usize, v: f64| testkit::named(&plan, &format!("p{i:04}"), &[v; 3]);
        let b = baseline_of(&results((0..count).map(|i| named(i, 100.0)).collect()));
        let mut new = results((0..count).map(|i| named(i, new(i))).collect());
        new.environment.facts.insert("kernel".into(), "6.5".into());
        let mut report = compare(&b, &new, &Settings::from_regression(&spec.regression));
        if let Some(first) = report.points.iter_mut().find(|p| p.id == "p0000-00000000") {
            first.telemetry = Some(serde_json::json!({
                "gpu": {"throttle_reasons": "hw_slowdown", "sm_clock_mhz": [1410, 1410]},
            }));
        }
        report
    }

    #[test]
    fn regressions_first_with_the_changed_facts_then_improvements_then_a_count() {
        // p0000 regressed, p0001 improved, p0002 unchanged.
        let r = report(3, |i| [120.0, 80.0, 100.0][i]);
        let md = markdown(&r, MAX_BYTES);
        assert!(
            md.starts_with(
                "## infer-bench: `unit` failed: regression\n\n3 points: **1 regressed**, 1 improved, 1 unchanged.\n\n"
            ),
            "{md}"
        );
        let reg = md.find("### Regressions").unwrap();
        let imp = md.find("### Improvements").unwrap();
        let unch = md.find("### Unchanged").unwrap();
        assert!(reg < imp && imp < unch, "{md}");
        assert!(
            md.contains("| point | gate | baseline → new | change [interval] | noise band |\n"),
            "{md}"
        );
        assert!(
            md.contains(
                "| `p0000` | tpot p50 | 100 → 120 ms | **+20.0%** [+20.0, +20.0] | ±5.0% |\n"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "Each row compares 3 baseline runs with 3 new ones; each interval covers 90%."
            ),
            "{md}"
        );
        // The context names the fact that changed; no telemetry dump.
        assert!(
            md.contains("Recorded facts that changed since the baseline: `kernel`: `6.1` → `6.5`."),
            "{md}"
        );
        assert!(!md.contains("throttle_reasons"), "{md}");
        assert!(
            md.contains("| `p0001` | tpot p50 | 100 → 80.0 ms | **-20.0%**"),
            "{md}"
        );
        assert!(md.contains("1 point: `p0002`."), "{md}");
        assert!(
            md.trim_end()
                .ends_with("exit code 1 (failed: 1 point regressed)</sub>"),
            "{md}"
        );
        assert!(!md.contains("cut to stay under"));
    }

    /// Six points that could not be judged for one reason: one line naming
    /// the six, with the fix; the summary counts points and says so.
    #[test]
    fn one_line_per_unjudged_reason() {
        let r = testkit::six_with_too_few_runs();
        let md = markdown(&r, MAX_BYTES);
        assert!(
            md.starts_with(
                "## infer-bench: `unit` could not judge\n\n6 points: **6 could not be judged** (fewer runs than min_runs).\n\n"
            ),
            "{md}"
        );
        let lines: Vec<&str> = md
            .lines()
            .filter(|l| l.contains("fewer runs than min_runs"))
            .collect();
        assert_eq!(lines.len(), 2, "the summary and one line: {md}");
        assert_eq!(
            lines[1],
            "- **fewer runs than min_runs**: 6 points (`p0`, `p1`, `p2`, `p3`, `p4`, `p5`). Fix: `[load] runs = 3` (or more)."
        );
        assert!(!md.contains("| INSUFFICIENT"), "{md}");
        // The particulars, collapsed, one line a point.
        assert!(
            md.contains(
                "<details><summary>Each point's particulars</summary>\n\n- `p0`: tpot p50: "
            ),
            "{md}"
        );
        assert!(md.contains("could not judge 6 points: see above"), "{md}");
    }

    /// Spec drift reads as the settings that changed; the full diff is
    /// collapsed.
    #[test]
    fn drift_is_the_settings_that_changed() {
        let (spec, plan16) = plan(16, GATES);
        let (_, plan24) = plan(24, GATES);
        let b = baseline_of(&results(vec![point(&plan16, &[100.0; 3], &[])]));
        let new = results(vec![point(&plan24, &[100.0; 3], &[])]);
        let r = compare(&b, &new, &Settings::from_regression(&spec.regression));
        let md = markdown(&r, MAX_BYTES);
        let slug = &r.points[0].slug;
        assert!(
            md.starts_with("## infer-bench: `unit` could not judge"),
            "{md}"
        );
        assert!(
            md.contains(&format!(
                "- **its configuration changed since the baseline**: 1 point. Fix: bless it on the main branch once the change is meant (`infer-bench bless RESULTS --points SLUG`).\n    - `{slug}`: `workload.output_tokens`: `fixed(16)` → `fixed(24)`\n"
            )),
            "{md}"
        );
        assert!(
            md.contains("<details><summary>The configurations' full diffs</summary>\n\n```diff\n--- baseline "),
            "{md}"
        );
    }

    /// Rules that differ from the baseline's are said near the top; rules
    /// from the spec (an older baseline) are said too.
    #[test]
    fn changed_rules_are_said_first() {
        let (spec, plan) = plan(16, GATES);
        let mut b = baseline_of(&results(vec![point(&plan, &[100.0; 3], &[])]));
        infer_bench_judge::rules::pin(&mut b, &spec.regression, "sha");
        let mut wide = spec.regression.clone();
        wide.min_runs = 9;
        for g in &mut wide.gates {
            g.noise = infer_bench_spec::Percent::new(1000.0).unwrap();
        }
        let rules = infer_bench_judge::rules::resolve(&b, &wide).unwrap();
        let r = compare(
            &b,
            &results(vec![point(&plan, &[100.0; 3], &[])]),
            &Settings::from_rules(&rules),
        );
        let md = markdown(&r, MAX_BYTES);
        assert!(
            md.starts_with("## infer-bench: `unit` could not judge\n\n1 point: 1 unchanged.\n\n> **The spec's rules differ from the baseline's; judged by the baseline's** (bless on main to adopt them): min_runs 3 → 9; tpot p50 noise 5% → 1000%.\n\n"),
            "{md}"
        );
        assert!(
            md.contains(
                "exit code 4 (could not judge: the spec's rules differ from the baseline's (see above))"
            ),
            "{md}"
        );
        let spec_rules = testkit::judge(GATES, &[("a", &[100.0; 3])], &[("a", &[100.0; 3])]);
        let md = markdown(&spec_rules, MAX_BYTES);
        assert!(
            md.contains("\n\nThe baseline pins no rules (an older file): judged by the spec's `[regression]` rules.\n\n"),
            "{md}"
        );
    }

    /// The heading's word is the exit code's.
    #[test]
    fn the_heading_says_what_the_exit_code_says() {
        let heading = |r: &Report| markdown(r, MAX_BYTES).lines().next().unwrap().to_string();
        let same = testkit::judge(GATES, &[("a", &[100.0; 3])], &[("a", &[100.0; 3])]);
        assert_eq!(same.exit_code, 0);
        assert_eq!(heading(&same), "## infer-bench: `unit` passed");
        let slower = testkit::judge(GATES, &[("a", &[100.0; 3])], &[("a", &[150.0; 3])]);
        assert_eq!(slower.exit_code, 1);
        assert_eq!(
            heading(&slower),
            "## infer-bench: `unit` failed: regression"
        );
        let few = testkit::six_with_too_few_runs();
        assert_eq!(few.exit_code, 4);
        assert_eq!(heading(&few), "## infer-bench: `unit` could not judge");
        // Only new points: nothing judged is not a pass.
        let nothing = testkit::judge(GATES, &[("a", &[100.0; 3])], &[("b", &[100.0; 3])]);
        assert_eq!(nothing.exit_code, 4);
        assert_eq!(heading(&nothing), "## infer-bench: `unit` could not judge");
        let md = markdown(&nothing, MAX_BYTES);
        assert!(md.contains("**Nothing was judged:**"), "{md}");
        assert!(
            md.contains("2 points: 1 new, 1 not in these results."),
            "{md}"
        );
        // A point that could not be measured.
        let (spec, plan) = plan(16, GATES);
        let b = baseline_of(&results(vec![point(&plan, &[100.0; 3], &[])]));
        let mut p = point(&plan, &[100.0; 3], &[]);
        p.status = infer_bench_results::PointStatus::Failed;
        p.failure = Some("the target is unreachable".into());
        let failed = compare(
            &b,
            &results(vec![p]),
            &Settings::from_regression(&spec.regression),
        );
        assert_eq!(failed.exit_code, 3);
        assert_eq!(heading(&failed), "## infer-bench: `unit` could not measure");
        let md = markdown(&failed, MAX_BYTES);
        assert!(md.contains("1 point: **1 could not be measured**."), "{md}");
        assert!(md.contains("### Could not be measured\n\n- `"), "{md}");
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

    /// 3000 points that could not be judged: one line, and the collapsed
    /// particulars stop where the budget does, closed.
    #[test]
    fn many_unjudged_points_stay_one_line_under_the_limit() {
        let slugs: Vec<String> = (0..3000).map(|i| format!("p{i:04}")).collect();
        let base: Vec<(&str, &[f64])> = slugs
            .iter()
            .map(|s| (s.as_str(), &[100.0; 3][..]))
            .collect();
        let new: Vec<(&str, &[f64])> = slugs
            .iter()
            .map(|s| (s.as_str(), &[100.0; 2][..]))
            .collect();
        let r = testkit::judge(GATES, &base, &new);
        let md = markdown(&r, MAX_BYTES);
        assert!(md.len() <= MAX_BYTES, "{}", md.len());
        assert!(
            md.contains("- **fewer runs than min_runs**: 3000 points (`p0000`, `p0001`, `p0002`, `p0003`, `p0004`, `p0005`, `p0006`, `p0007`, `p0008`, `p0009` and 2990 more)."),
            "{}",
            &md[..2000]
        );
        assert_eq!(
            md.matches("<details>").count(),
            md.matches("</details>").count()
        );
        assert!(
            md.contains("cut to stay under"),
            "{}",
            &md[md.len() - 600..]
        );
    }

    #[test]
    fn cells_are_escaped() {
        assert_eq!(cell("a | b\nc"), "a \\| b c");
        assert_eq!(cell("<img src=x>"), "\\<img src=x\\>");
        assert_eq!(escape("<a&b>"), "&lt;a&amp;b&gt;");
    }
}
