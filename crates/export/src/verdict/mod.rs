//! Exporters of the regression judge's report (`judge::compare::Report`):
//! a terminal table, Markdown for a pull-request comment or a CI step
//! summary, JUnit XML, and JSON. Each is a function from the report to
//! text; this module also holds the number formatting they share, so a
//! change reads the same everywhere.

pub mod junit;
pub mod markdown;
pub mod table;

use infer_bench_judge::compare::{Decision, GateReport, Match, PointReport, Report, Scale};
use infer_bench_results::exit::{EXIT_FAILED, EXIT_INFRA, EXIT_OK, EXIT_UNJUDGED};
use infer_bench_results::metric::Metric;
use infer_bench_spec::raw::OnEnvMismatch;

/// The report as pretty JSON with a final newline.
pub fn json(report: &Report) -> String {
    let mut s = serde_json::to_string_pretty(report).expect("reports serialize");
    s.push('\n');
    s
}

/// A value in a metric's unit: "7.46 ms", "941 tok/s", "0.50%".
pub fn value(v: Option<f64>, unit: &str) -> String {
    let Some(v) = v.filter(|v| v.is_finite()) else {
        return "-".into();
    };
    if unit == "fraction" {
        return format!("{:.2}%", v * 100.0);
    }
    // A KL divergence of a good precision is a few thousandths of a nat.
    if unit == "nats" {
        return format!("{v:.4} nats");
    }
    let digits = if v.abs() >= 100.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    if unit.is_empty() {
        format!("{v:.digits$}")
    } else {
        format!("{v:.digits$} {unit}")
    }
}

/// A change: "+10.2%" (relative) or "+1.20 pts" (a fraction's difference,
/// in percentage points); other absolute changes in the metric's unit.
pub fn change(c: Option<f64>, scale: Scale, unit: &str) -> String {
    let Some(c) = c.filter(|c| c.is_finite()) else {
        return "-".into();
    };
    match scale {
        Scale::Relative => format!("{:+.1}%", c * 100.0),
        Scale::Absolute if unit == "fraction" => format!("{:+.2} pts", c * 100.0),
        Scale::Absolute => format!("{c:+.3} {unit}"),
    }
}

/// The interval of a gate's change: "[+8.1%, +12.0%]".
pub fn interval(g: &GateReport) -> String {
    match (g.change_low, g.change_high) {
        (Some(_), Some(_)) => format!(
            "[{}, {}]",
            change(g.change_low, g.scale, &g.unit),
            change(g.change_high, g.scale, &g.unit)
        ),
        _ => "-".into(),
    }
}

/// The noise band: "±5.0%" or "±5.00 pts".
pub fn band(g: &GateReport) -> String {
    match g.noise_band.filter(|b| b.is_finite()) {
        None => "-".into(),
        Some(b) => match g.scale {
            Scale::Relative => format!("±{:.1}%", b * 100.0),
            Scale::Absolute if g.unit == "fraction" => format!("±{:.2} pts", b * 100.0),
            Scale::Absolute => format!("±{b:.3} {}", g.unit),
        },
    }
}

/// The evidence behind a decision: "3 vs 3 runs, 90%" or "4 vs 4 windows
/// (within-run), 80%".
pub fn evidence(g: &GateReport) -> String {
    if g.m == 0 && g.n == 0 {
        return "-".into();
    }
    let unit = if g.over_prompts {
        "prompts"
    } else if g.within_run {
        "windows (within-run)"
    } else {
        "runs"
    };
    let base = if g.history.is_some() {
        format!("{} commits of main", g.m)
    } else {
        g.m.to_string()
    };
    match g.achieved_confidence {
        Some(c) => format!("{base} vs {} {unit}, {:.0}%", g.n, c * 100.0),
        None => format!("{base} vs {} {unit}", g.n),
    }
}

/// A percentage for headers: "95%".
pub fn percent(f: f64) -> String {
    let p = f * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

/// An SLO's measured value in its metric's unit.
pub fn slo_value(metric: &str, v: Option<f64>) -> String {
    let unit = metric.parse::<Metric>().map(|m| m.unit()).unwrap_or("");
    value(v, unit)
}

/// The word of a verdict's heading, true to its exit code: "passed" only
/// for 0, "failed: regression" (or what else failed) for 1, "could not
/// measure" for 3, "could not judge" for 4.
pub fn headline(r: &Report) -> String {
    match r.exit_code {
        EXIT_OK => "passed".into(),
        EXIT_FAILED => {
            let c = &r.counts;
            let mut what = Vec::new();
            if c.regressed > 0 {
                what.push("regression");
            }
            if c.slo_failed > 0 {
                what.push("SLO");
            }
            if what.is_empty() {
                what.push("environment mismatch");
            }
            format!("failed: {}", what.join(", "))
        }
        EXIT_INFRA => "could not measure".into(),
        EXIT_UNJUDGED => "could not judge".into(),
        _ => "failed".into(),
    }
}

/// What a report's exit code means, naming its reasons: "passed",
/// "failed: 2 points regressed", "could not judge 6 points: see above",
/// "could not judge: the spec's rules differ from the baseline's".
pub fn exit_meaning(r: &Report) -> String {
    let points = count_points;
    match r.exit_code {
        EXIT_OK => "passed".into(),
        EXIT_FAILED => {
            let c = &r.counts;
            let mut why = Vec::new();
            if c.regressed > 0 {
                why.push(format!("{} regressed", points(c.regressed)));
            }
            if c.slo_failed > 0 {
                why.push(format!("{} failed an SLO", points(c.slo_failed)));
            }
            if r.on_env_mismatch == OnEnvMismatch::Fail && c.incomparable > 0 {
                why.push(format!(
                    "{} ran in another environment (on_env_mismatch = \"fail\")",
                    points(c.incomparable)
                ));
            }
            format!("failed: {}{}", why.join("; "), also_unjudged(r))
        }
        EXIT_INFRA => format!(
            "could not measure {}: see above{}",
            points(r.counts.failed),
            also_unjudged(r)
        ),
        EXIT_UNJUDGED => {
            let rules = !r.rules_changes.is_empty();
            let failing = r.points.iter().filter(|p| unjudged_fails(r, p)).count();
            if failing > 0 {
                let strict = r.points.iter().any(|p| {
                    unjudged_fails(r, p) && !p.unjudged.as_ref().is_some_and(|u| u.blocking)
                });
                format!(
                    "could not judge {}{}{}: see above",
                    points(failing),
                    if strict { " (--strict)" } else { "" },
                    if rules {
                        ", and the spec's rules differ from the baseline's"
                    } else {
                        ""
                    }
                )
            } else if rules {
                "could not judge: the spec's rules differ from the baseline's (see above)".into()
            } else if r.nothing_judged() {
                "could not judge: no point was compared with the baseline".into()
            } else {
                "could not judge".into()
            }
        }
        code => format!("failed (exit code {code})"),
    }
}

/// "; also could not judge 2 points": what else fails the check behind a
/// regression or an unmeasured point.
fn also_unjudged(r: &Report) -> String {
    let n = r
        .points
        .iter()
        .filter(|p| unjudged_fails(r, p) && !p.failed)
        .count();
    let mut also = Vec::new();
    if n > 0 {
        also.push(format!("could not judge {}", count_points(n)));
    }
    if !r.rules_changes.is_empty() {
        also.push("the spec's rules differ from the baseline's".into());
    }
    if also.is_empty() {
        String::new()
    } else {
        format!("; also {}", also.join(", and "))
    }
}

/// Whether `p` could not be judged and that fails the check: its reason
/// blocks, or `--strict` fails whatever could not be judged.
pub fn unjudged_fails(r: &Report, p: &PointReport) -> bool {
    p.unjudged.as_ref().is_some_and(|u| u.blocking || r.strict)
}

/// What one point counts as in a summary. Each point counts once, in the
/// first class that applies, so the classes add up to the points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// Could not be measured (exit 3).
    Unmeasured,
    Regressed,
    /// A failed SLO (and no regression).
    SloFailed,
    /// INCOMPARABLE under `on_env_mismatch = "fail"`.
    Incomparable,
    /// Could not be judged, and that fails the check.
    Unjudged,
    /// INCONCLUSIVE, advisory.
    Inconclusive,
    /// Could not be judged, advisory (`on_env_mismatch = "advisory"`, or
    /// `allow_unjudged`).
    Advisory,
    /// INCOMPARABLE and left out (`on_env_mismatch = "skip"`).
    Skipped,
    Improved,
    Unchanged,
    New,
    Dropped,
}

impl Class {
    pub fn of(r: &Report, p: &PointReport) -> Class {
        if p.failed {
            return Class::Unmeasured;
        }
        if p.decision == Some(Decision::Regressed) && !p.skipped {
            return Class::Regressed;
        }
        if p.slo_pass == Some(false) {
            return Class::SloFailed;
        }
        if p.skipped {
            return Class::Skipped;
        }
        if p.decision == Some(Decision::Incomparable) && r.on_env_mismatch == OnEnvMismatch::Fail {
            return Class::Incomparable;
        }
        if let Some(u) = &p.unjudged {
            return if u.blocking || r.strict {
                Class::Unjudged
            } else if p.decision == Some(Decision::Inconclusive) {
                Class::Inconclusive
            } else {
                Class::Advisory
            };
        }
        match (p.matched, p.decision) {
            (Match::New, _) => Class::New,
            (Match::Dropped, _) => Class::Dropped,
            (_, Some(Decision::Improved)) => Class::Improved,
            _ => Class::Unchanged,
        }
    }

    /// How the summary says it: "regressed", "could not be judged".
    pub fn words(self) -> &'static str {
        match self {
            Class::Unmeasured => "could not be measured",
            Class::Regressed => "regressed",
            Class::SloFailed => "failed an SLO",
            Class::Incomparable => "ran in another environment",
            Class::Unjudged => "could not be judged",
            Class::Inconclusive => "inconclusive",
            Class::Advisory => "not judged (advisory)",
            Class::Skipped => "left out (another environment)",
            Class::Improved => "improved",
            Class::Unchanged => "unchanged",
            Class::New => "new",
            Class::Dropped => "not in these results",
        }
    }

    /// Whether points of this class fail the check.
    pub fn fails(self) -> bool {
        self <= Class::Unjudged
    }
}

/// The points of a report by class, in class order, the empty ones left
/// out: `(class, points)`.
pub fn tally(r: &Report) -> Vec<(Class, usize)> {
    let mut counts: std::collections::BTreeMap<Class, usize> = Default::default();
    for p in &r.points {
        *counts.entry(Class::of(r, p)).or_default() += 1;
    }
    counts.into_iter().collect()
}

/// Points that could not be judged for one reason.
pub struct Group<'a> {
    pub reason: String,
    pub fix: String,
    /// Whether these points fail the check.
    pub fails: bool,
    pub points: Vec<&'a PointReport>,
}

impl Group<'_> {
    /// Each point's particulars: `(point, detail)`.
    pub fn details(&self) -> Vec<(&str, String)> {
        self.points
            .iter()
            .map(|p| {
                let d = match &p.unjudged {
                    // An INVALID point's reasons are in its gates' notes.
                    Some(u) if u.detail.trim().is_empty() => p
                        .gates
                        .iter()
                        .find_map(|g| g.note.clone())
                        .or_else(|| p.notes.first().cloned())
                        .unwrap_or_default(),
                    Some(u) => u.detail.clone(),
                    None => p
                        .env_mismatch
                        .iter()
                        .map(|m| m.to_string())
                        .collect::<Vec<_>>()
                        .join("; "),
                };
                (p.slug.as_str(), d)
            })
            .collect()
    }

    /// Whether these points' configurations changed (spec drift).
    pub fn is_drift(&self) -> bool {
        self.points.iter().all(|p| p.matched == Match::Drift)
    }
}

/// What could not be judged, one group per reason: those that fail the
/// check first, then in report order. Points left out for another
/// environment (`on_env_mismatch = "skip"`) are a group of their own.
pub fn unjudged_groups(r: &Report) -> Vec<Group<'_>> {
    let mut groups: Vec<Group> = Vec::new();
    for p in &r.points {
        let (reason, fix, fails) = match &p.unjudged {
            Some(u) => (u.reason.clone(), u.fix.clone(), unjudged_fails(r, p)),
            None if p.skipped => (
                "left out: the environment differs from the baseline's (`on_env_mismatch = \"skip\"`)"
                    .to_string(),
                "run on the machine class the baseline was recorded on".to_string(),
                false,
            ),
            None => continue,
        };
        match groups
            .iter_mut()
            .find(|g| g.reason == reason && g.fix == fix && g.fails == fails)
        {
            Some(g) => g.points.push(p),
            None => groups.push(Group {
                reason,
                fix,
                fails,
                points: vec![p],
            }),
        }
    }
    groups.sort_by_key(|g| !g.fails);
    groups
}

/// "3 points" or "1 point".
pub fn count_points(n: usize) -> String {
    format!("{n} point{}", if n == 1 { "" } else { "s" })
}

/// Scalar leaves of a telemetry value worth showing next to a regression:
/// `(dotted.path, text)`, keys that name throttling, clocks, KV cache,
/// preemptions, power, temperature, utilization, queues or memory first
/// (the shape of telemetry is not fixed, so this only looks at names);
/// arrays of numbers are summarized by their mean and maximum. At most
/// `limit` entries.
pub fn telemetry_highlights(t: &serde_json::Value, limit: usize) -> Vec<(String, String)> {
    const INTERESTING: &[&str] = &[
        "throttl", "clock", "kv", "cache", "preempt", "power", "temp", "util", "queue", "waiting",
        "swap", "mem", "evict",
    ];
    let mut leaves = Vec::new();
    flatten(t, String::new(), &mut leaves);
    let interesting = |k: &str| {
        let k = k.to_ascii_lowercase();
        INTERESTING.iter().any(|w| k.contains(w))
    };
    let (mut first, rest): (Vec<_>, Vec<_>) = leaves.into_iter().partition(|(k, _)| interesting(k));
    if first.is_empty() {
        first = rest;
    }
    first.truncate(limit);
    first
}

fn flatten(v: &serde_json::Value, path: String, out: &mut Vec<(String, String)>) {
    use serde_json::Value;
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                flatten(v, join(k), out);
            }
        }
        Value::Array(items) => {
            let nums: Vec<f64> = items.iter().filter_map(|x| x.as_f64()).collect();
            if !items.is_empty() && nums.len() == items.len() {
                let mean = nums.iter().sum::<f64>() / nums.len() as f64;
                let max = nums.iter().copied().fold(f64::MIN, f64::max);
                out.push((
                    path,
                    format!(
                        "mean {}, max {} ({} samples)",
                        num(mean),
                        num(max),
                        nums.len()
                    ),
                ));
            } else if items.len() <= 4 {
                for (i, x) in items.iter().enumerate() {
                    flatten(x, join(&i.to_string()), out);
                }
            }
        }
        Value::Null => {}
        Value::String(s) => {
            let mut s = s.clone();
            if s.chars().count() > 80 {
                s = s.chars().take(77).collect::<String>() + "...";
            }
            out.push((path, s));
        }
        Value::Bool(b) => out.push((path, b.to_string())),
        Value::Number(n) => out.push((path, n.as_f64().map(num).unwrap_or_else(|| n.to_string()))),
    }
}

fn num(x: f64) -> String {
    if x == x.trunc() && x.abs() < 1e15 {
        format!("{x:.0}")
    } else if x.abs() >= 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

/// Reports to test the exporters with: points of the judge's one-point
/// fixture plan, renamed.
#[cfg(test)]
pub(crate) mod testkit {
    use infer_bench_judge::compare::{Report, Settings, compare};
    use infer_bench_spec::plan::Plan;
    use infer_bench_spec::results::PointResult;
    use infer_bench_testkit::fixtures::{baseline_of, plan, point, results};

    /// One gate, TPOT p50 with a 5% band; min_runs 3.
    pub const GATES: &str =
        "[regression]\nmetrics = [{ metric = \"tpot\", stat = \"p50\", noise = \"5%\" }]\n";

    /// A point named `slug` whose runs have these TPOT p50s.
    pub fn named(plan: &Plan, slug: &str, runs: &[f64]) -> PointResult {
        let mut p = point(plan, runs, &[]);
        p.slug = slug.into();
        p.id = format!("{slug}-00000000");
        p
    }

    /// Baseline points `base` and new points `new` (slug, runs), judged
    /// by `regression` (the spec's rules: the baseline pins none).
    pub fn judge(regression: &str, base: &[(&str, &[f64])], new: &[(&str, &[f64])]) -> Report {
        let (spec, plan) = plan(16, regression);
        let b = baseline_of(&results(
            base.iter().map(|(s, v)| named(&plan, s, v)).collect(),
        ));
        let n = results(new.iter().map(|(s, v)| named(&plan, s, v)).collect());
        compare(&b, &n, &Settings::from_regression(&spec.regression))
    }

    /// Six points p0..p5 with three baseline runs and two new ones: six
    /// points with the same reason (fewer runs than min_runs).
    pub fn six_with_too_few_runs() -> Report {
        let slugs = ["p0", "p1", "p2", "p3", "p4", "p5"];
        let base: Vec<(&str, &[f64])> = slugs.iter().map(|s| (*s, &[100.0; 3][..])).collect();
        let new: Vec<(&str, &[f64])> = slugs.iter().map(|s| (*s, &[100.0; 2][..])).collect();
        judge(GATES, &base, &new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(value(Some(7.456), "ms"), "7.46 ms");
        assert_eq!(value(Some(33.41), "ms"), "33.4 ms");
        assert_eq!(value(Some(941.2), "tok/s"), "941 tok/s");
        assert_eq!(value(Some(0.005), "fraction"), "0.50%");
        assert_eq!(value(None, "ms"), "-");
        assert_eq!(change(Some(0.1023), Scale::Relative, "ms"), "+10.2%");
        assert_eq!(change(Some(-0.0909), Scale::Relative, "tok/s"), "-9.1%");
        assert_eq!(
            change(Some(0.012), Scale::Absolute, "fraction"),
            "+1.20 pts"
        );
        assert_eq!(percent(0.95), "95%");
        assert_eq!(percent(0.975), "97.5%");
    }

    #[test]
    fn six_points_with_one_reason_are_one_group_and_the_tally_counts_points() {
        let r = testkit::six_with_too_few_runs();
        assert_eq!(r.exit_code, EXIT_UNJUDGED);
        let groups = unjudged_groups(&r);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].reason, "fewer runs than min_runs");
        assert_eq!(groups[0].points.len(), 6);
        assert!(groups[0].fails);
        assert_eq!(tally(&r), vec![(Class::Unjudged, 6)]);
        assert_eq!(headline(&r), "could not judge");
        assert_eq!(exit_meaning(&r), "could not judge 6 points: see above");
    }

    #[test]
    fn telemetry_prefers_telling_keys_and_summarizes_series() {
        let t = serde_json::json!({
            "gpu": {"name": "H100", "sm_clock_mhz": [1980, 1410, 1410], "throttle_reasons": "hw_slowdown"},
            "server": {"kv_cache_usage": 0.93, "num_preemptions": 12, "version": "0.6.3"},
        });
        let h = telemetry_highlights(&t, 10);
        let keys: Vec<&str> = h.iter().map(|(k, _)| k.as_str()).collect();
        assert!(keys.contains(&"gpu.throttle_reasons"), "{keys:?}");
        assert!(keys.contains(&"server.kv_cache_usage"));
        assert!(keys.contains(&"server.num_preemptions"));
        assert!(
            !keys.contains(&"server.version"),
            "uninteresting when others exist"
        );
        let clock = h.iter().find(|(k, _)| k == "gpu.sm_clock_mhz").unwrap();
        assert_eq!(clock.1, "mean 1600, max 1980 (3 samples)");
        // Nothing telling: the first scalars instead.
        let plain = telemetry_highlights(&serde_json::json!({"a": 1, "b": "x"}), 10);
        assert_eq!(plain.len(), 2);
    }
}

/// One line per capacity search judged against the baseline: `capacity
/// REGRESSED: <slug> (slo): 5.8 req/s ... against 6 req/s ...: why`.
pub(crate) fn capacity_lines(r: &Report) -> Vec<String> {
    r.capacity
        .iter()
        .map(|c| {
            let side = |b: &Option<infer_bench_judge::capacity::Bracket>| {
                b.as_ref()
                    .map(|b| b.answer.clone())
                    .unwrap_or_else(|| "-".into())
            };
            format!(
                "capacity {}: {} ({}): now {}, baseline {}: {}",
                c.decision.as_str(),
                c.slug,
                c.target,
                side(&c.results),
                side(&c.baseline),
                c.note
            )
        })
        .collect()
}
