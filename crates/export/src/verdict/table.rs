//! The judge's report for a terminal: one row per gate of the points that
//! were judged, the most severe decisions first (regressions at the top);
//! then what could not be judged, one entry per reason with its points,
//! the setting that fixes it and each point's particulars (spec drift as
//! the settings that changed); points that could not be measured, SLO
//! failures, new and dropped points, the notes; and a one-line summary that
//! counts points and says what the exit code means.

use super::{
    Class, band, change, count_points, evidence, exit_meaning, interval, percent, slo_value, tally,
    unjudged_groups, value,
};
use crate::slo_name;
use crate::table::{Align, Table};
use infer_bench_judge::compare::{Decision, Match, PointReport, Report};
use infer_bench_judge::rules::RulesSource;
use infer_bench_results::outside;

/// Points named in a line before "and N more".
const NAMES: usize = 10;

/// The report as text, drawn as the command line said
/// ([`crate::term::current`]).
pub fn table(r: &Report) -> String {
    render(r, crate::term::current())
}

/// The report as text; colour from `look` on the verdict cells (every
/// column is shown: a gate's row is read whole). One function because it
/// is the page read top to bottom: each section (gates, what could not be
/// judged, notes, the summary line) appends to the text in the order it
/// prints, and the helpers it calls hold the logic.
pub fn render(r: &Report, look: crate::term::Look) -> String {
    let mut out = format!(
        "{}: judged against {} (recorded {}), confidence {}, min_runs {}{}{}\n",
        outside::terminal(&r.spec),
        outside::terminal(or_dash(&r.baseline.path)),
        outside::terminal(or_dash(&r.baseline.recorded_at)),
        percent(r.confidence),
        r.min_runs,
        if r.allow_unjudged {
            ", allow_unjudged"
        } else {
            ""
        },
        if r.strict { ", --strict" } else { "" },
    );
    match r.rules {
        RulesSource::Baseline if !r.rules_changes.is_empty() => out.push_str(&format!(
            "The spec's rules differ from the baseline's; judged by the baseline's (bless on main to adopt them): {}\n",
            r.rules_changes
                .iter()
                .map(|m| format!("{} {} -> {}", m.key, m.baseline, m.new))
                .collect::<Vec<_>>()
                .join("; ")
        )),
        RulesSource::Baseline => {}
        RulesSource::Spec => out.push_str(
            "The baseline pins no rules (an older file): judged by the spec's [regression] rules.\n",
        ),
    }
    out.push('\n');

    // Gate rows for the points that were judged (a regressed point shows
    // all its gates); what could not be judged is listed by reason below.
    let grouped = |p: &PointReport| {
        p.skipped
            || p.failed
            || (p.unjudged.is_some() && p.decision != Some(Decision::Inconclusive))
    };
    let mut rows: Vec<(u8, u8, &PointReport, usize)> = Vec::new();
    for p in r
        .points
        .iter()
        .filter(|p| p.matched == Match::Compared && !grouped(p))
    {
        for (i, g) in p.gates.iter().enumerate() {
            rows.push((g.decision.severity(), p.order(), p, i));
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
            if !g.confirmations.is_empty() && g.decision == Decision::Regressed {
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
        let wide = crate::term::Look { wide: true, ..look };
        out.push_str(&t.render_look(wide, &[]).0);
        out.push('\n');
    }

    let groups = unjudged_groups(r);
    for fails in [true, false] {
        let these: Vec<_> = groups.iter().filter(|g| g.fails == fails).collect();
        if these.is_empty() {
            continue;
        }
        out.push_str(if fails {
            "could not judge (fails the check until fixed):\n"
        } else {
            "not judged (advisory):\n"
        });
        for g in these {
            let drift = if g.is_drift() { " (spec drift)" } else { "" };
            out.push_str(&format!(
                "  {}{drift}: {}\n    fix: {}\n",
                g.reason,
                count_points(g.points.len()),
                g.fix
            ));
            // Details quote servers and specs (a failure, a drifted
            // value): each stays on its line, its controls shown.
            for (slug, detail) in g.details() {
                let slug = outside::terminal(slug);
                if detail.trim().is_empty() {
                    out.push_str(&format!("    {slug}\n"));
                } else {
                    out.push_str(&format!("    {slug}: {}\n", outside::terminal(&detail)));
                }
            }
        }
        out.push('\n');
    }

    let mut notes = String::new();
    for p in r.points.iter().filter(|p| p.failed) {
        notes.push_str(&format!(
            "{}: could not be measured: {}\n",
            outside::terminal(&p.slug),
            outside::terminal(&p.failure())
        ));
    }
    for p in &r.points {
        for s in p.slo.iter().filter(|s| !s.pass) {
            notes.push_str(&format!(
                "{}: SLO failed: {} (measured {})\n",
                p.slug,
                slo_name(&s.metric, &s.expr),
                slo_value(&s.metric, s.value)
            ));
        }
    }
    let of_class = |c: Class| -> Vec<&str> {
        r.points
            .iter()
            .filter(|p| Class::of(r, p) == c)
            .map(|p| p.id.as_str())
            .collect()
    };
    let new = of_class(Class::New);
    if !new.is_empty() {
        notes.push_str(&format!(
            "new, not judged until blessed: {}\n",
            new.join(", ")
        ));
    }
    let dropped = of_class(Class::Dropped);
    if !dropped.is_empty() {
        notes.push_str(&format!(
            "in the baseline but not in these results: {}\n",
            dropped.join(", ")
        ));
    }
    // Notes of the compared points, each once with the points it is about.
    let mut by_note: Vec<(&str, Vec<&str>)> = Vec::new();
    for p in r.points.iter().filter(|p| p.matched == Match::Compared) {
        for n in &p.notes {
            match by_note.iter_mut().find(|(text, _)| text == n) {
                Some((_, slugs)) => slugs.push(&p.slug),
                None => by_note.push((n, vec![&p.slug])),
            }
        }
    }
    for (text, slugs) in by_note {
        let more = slugs.len().saturating_sub(NAMES);
        let mut who = slugs[..slugs.len().min(NAMES)].join(", ");
        if more > 0 {
            who.push_str(&format!(" and {more} more"));
        }
        notes.push_str(&format!("{who}: {text}\n"));
    }
    // Notes are plain lines that quote points, specs and servers: each is
    // kept to itself, its controls shown.
    if !notes.is_empty() {
        for line in notes.lines() {
            out.push_str(&outside::terminal(line));
            out.push('\n');
        }
        out.push('\n');
    }

    for line in super::capacity_lines(r) {
        out.push_str(&outside::terminal(&line));
        out.push('\n');
    }
    if !r.capacity.is_empty() {
        out.push('\n');
    }

    let parts: Vec<String> = tally(r)
        .into_iter()
        .map(|(class, n)| format!("{n} {}", class.words()))
        .collect();
    let total = if parts.is_empty() {
        "no points".to_string()
    } else {
        format!("{}: {}", count_points(r.points.len()), parts.join(", "))
    };
    out.push_str(&format!("{total} -> {}\n", exit_meaning(r)));
    out
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::testkit::{self, GATES};

    /// Six points that could not be judged for one reason: one entry with
    /// the six and the fix, no row per gate; the summary counts points and
    /// names the reason the check failed (not --strict).
    #[test]
    fn unjudged_points_are_grouped_by_reason() {
        let r = testkit::six_with_too_few_runs();
        let t = table(&r);
        assert!(
            t.contains(
                "could not judge (fails the check until fixed):\n  fewer runs than min_runs: 6 points\n    fix: `[load] runs = 3` (or more)\n    p0: tpot p50: "
            ),
            "{t}"
        );
        assert!(!t.contains("INSUFFICIENT"), "{t}");
        assert!(!t.contains("--strict"), "{t}");
        assert!(
            t.ends_with(
                "\n6 points: 6 could not be judged -> could not judge 6 points: see above\n"
            ),
            "{t}"
        );
    }

    /// A regressed point still shows its gates; the summary counts each
    /// point once.
    #[test]
    fn a_regressed_point_shows_its_gates_and_the_summary_counts_points() {
        let r = testkit::judge(
            GATES,
            &[("a", &[100.0; 3]), ("b", &[100.0; 3]), ("c", &[100.0; 3])],
            &[("a", &[150.0; 3]), ("b", &[100.0; 2]), ("c", &[100.0; 3])],
        );
        let t = table(&r);
        assert!(t.contains("REGRESSED  a"), "{t}");
        assert!(t.contains("UNCHANGED  c"), "{t}");
        assert!(!t.contains("INSUFFICIENT"), "{t}");
        assert!(t.contains("  fewer runs than min_runs: 1 point\n"), "{t}");
        assert!(
            t.ends_with(
                "\n3 points: 1 regressed, 1 could not be judged, 1 unchanged -> failed: 1 point regressed; also could not judge 1 point\n"
            ),
            "{t}"
        );
    }

    #[test]
    fn a_pass_says_passed() {
        let r = testkit::judge(GATES, &[("a", &[100.0; 3])], &[("a", &[100.0; 3])]);
        let t = table(&r);
        assert!(
            t.contains("The baseline pins no rules (an older file): judged by the spec's [regression] rules.\n"),
            "{t}"
        );
        assert!(t.ends_with("\n1 point: 1 unchanged -> passed\n"), "{t}");
    }
}
