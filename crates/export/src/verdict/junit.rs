//! The judge's report as JUnit XML, so CI systems show regressions as
//! failed tests: one `<testcase>` per point and gate (classname = the
//! point's slug, name = the gate, e.g. "tpot p50"), one per SLO of a point,
//! one for a point's configuration when it drifted, and one for a new or
//! dropped point.
//!
//! A test case fails exactly when it makes the exit code fail: REGRESSED,
//! a failed SLO, INCOMPARABLE under `on_env_mismatch = "fail"`, a point
//! that could not be judged for a reason that fails the check (INSUFFICIENT,
//! INVALID, INCOMPARABLE by default, spec drift, a selected point that did
//! not finish; none of them with `allow_unjudged`), INCONCLUSIVE and
//! advisory INCOMPARABLE only with `--strict`; and, as a case of their own
//! (classname "infer-bench"), rules that differ from the baseline's and a
//! comparison that judged nothing. A point that could not be measured is an
//! `<error>`. Other unjudged cases are `<skipped>`, with the reason. Text is escaped for XML 1.0 by [`crate::xml::escape`],
//! which drops the characters XML cannot carry at all (most control
//! characters).

use super::{band, change, evidence, interval, slo_value, unjudged_fails, value};
use crate::slo_name;
use crate::xml::escape;
use infer_bench_judge::compare::{Decision, GateReport, Match, PointReport, Report};
use infer_bench_spec::raw::OnEnvMismatch;

enum Outcome {
    Pass,
    Failure { kind: String, message: String },
    Error(String),
    Skipped(String),
}

struct Case {
    classname: String,
    name: String,
    outcome: Outcome,
    /// Details for `<system-out>` (or the body of a failure).
    text: String,
}

/// The report as JUnit XML.
pub fn junit(r: &Report) -> String {
    let mut cases = Vec::new();
    report_cases(r, &mut cases);
    for p in &r.points {
        point_cases(r, p, &mut cases);
    }
    let count = |f: fn(&Outcome) -> bool| cases.iter().filter(|c| f(&c.outcome)).count();
    let failures = count(|o| matches!(o, Outcome::Failure { .. }));
    let errors = count(|o| matches!(o, Outcome::Error(_)));
    let skipped = count(|o| matches!(o, Outcome::Skipped(_)));
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let attrs = format!(
        "tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\"",
        cases.len()
    );
    out.push_str(&format!(
        "<testsuites name=\"infer-bench\" {attrs}>\n  <testsuite name=\"{}\" {attrs}>\n",
        escape(&r.spec)
    ));
    for c in &cases {
        out.push_str(&format!(
            "    <testcase classname=\"{}\" name=\"{}\">\n",
            escape(&c.classname),
            escape(&c.name)
        ));
        match &c.outcome {
            Outcome::Pass => {}
            Outcome::Failure { kind, message } => out.push_str(&format!(
                "      <failure type=\"{}\" message=\"{}\">{}</failure>\n",
                escape(kind),
                escape(message),
                escape(&c.text)
            )),
            Outcome::Error(message) => out.push_str(&format!(
                "      <error message=\"{}\">{}</error>\n",
                escape(message),
                escape(&c.text)
            )),
            Outcome::Skipped(message) => out.push_str(&format!(
                "      <skipped message=\"{}\"/>\n",
                escape(message)
            )),
        }
        if !matches!(c.outcome, Outcome::Failure { .. } | Outcome::Error(_)) && !c.text.is_empty() {
            out.push_str(&format!(
                "      <system-out>{}</system-out>\n",
                escape(&c.text)
            ));
        }
        out.push_str("    </testcase>\n");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// Cases about the whole comparison: the rules it judged by, and whether
/// it judged anything.
fn report_cases(r: &Report, cases: &mut Vec<Case>) {
    let case = |name: &str, outcome: Outcome, text: String| Case {
        classname: "infer-bench".into(),
        name: name.into(),
        outcome,
        text,
    };
    if !r.rules_changes.is_empty() {
        let list = r
            .rules_changes
            .iter()
            .map(|m| m.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        cases.push(case(
            "rules",
            Outcome::Failure {
                kind: "RULES".into(),
                message: "the spec's rules differ from the baseline's; judged by the baseline's (bless on main to adopt them)".into(),
            },
            list,
        ));
    }
    let blocking = r.points.iter().any(|p| unjudged_fails(r, p));
    if r.nothing_judged() && !r.allow_unjudged && !blocking {
        cases.push(case(
            "judged",
            Outcome::Failure {
                kind: "UNJUDGED".into(),
                message: "no point of these results was compared with the baseline".into(),
            },
            String::new(),
        ));
    }
}

fn point_cases(r: &Report, p: &PointReport, cases: &mut Vec<Case>) {
    let case = |name: &str, outcome: Outcome, text: String| Case {
        classname: p.slug.clone(),
        name: name.to_string(),
        outcome,
        text,
    };
    // A case of a point that could not be judged fails when the point's
    // reason fails the check (or with --strict); an INCONCLUSIVE gate only
    // with --strict, even in a point that fails for another gate.
    let unjudged = |decision: Option<Decision>, message: String| {
        let fails = match &p.unjudged {
            Some(u) => r.strict || (u.blocking && decision != Some(Decision::Inconclusive)),
            None => false,
        };
        if fails {
            Outcome::Failure {
                kind: "UNJUDGED".into(),
                message,
            }
        } else {
            Outcome::Skipped(message)
        }
    };
    // The point's reason, on the cases it is about.
    let reason = |decision: Option<Decision>| match &p.unjudged {
        Some(u) if decision.is_none() || decision == p.decision => {
            format!(" ({}; fix: {})", u.reason, u.fix)
        }
        _ => String::new(),
    };
    match p.matched {
        Match::New => cases.push(case(
            "baseline",
            Outcome::Skipped("new point: not in the baseline yet".into()),
            String::new(),
        )),
        Match::Dropped if p.missing => cases.push(case(
            "baseline",
            unjudged(
                None,
                format!("selected, but did not finish{}", reason(None)),
            ),
            p.notes.join("; "),
        )),
        Match::Dropped => cases.push(case(
            "baseline",
            Outcome::Skipped(format!(
                "in the baseline, not in these results ({})",
                p.notes.join("; ")
            )),
            String::new(),
        )),
        Match::Drift => cases.push(case(
            "configuration",
            unjudged(
                None,
                format!(
                    "the configuration changed (spec drift): {}",
                    p.drift_changes
                        .iter()
                        .map(|m| m.to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            ),
            p.drift.clone().unwrap_or_default(),
        )),
        Match::Compared => {
            for g in &p.gates {
                let text = figures(g);
                let why = g.note.clone().unwrap_or_default();
                let outcome = if p.failed {
                    Outcome::Error(why)
                } else {
                    match g.decision {
                        Decision::Regressed if !p.skipped => Outcome::Failure {
                            kind: "REGRESSED".into(),
                            message: format!(
                                "REGRESSED: {} {} (band {})",
                                change(g.change, g.scale, &g.unit),
                                interval(g),
                                band(g)
                            ),
                        },
                        Decision::Incomparable if p.skipped => Outcome::Skipped(format!(
                            "INCOMPARABLE (skipped): {}",
                            mismatch_text(p)
                        )),
                        Decision::Incomparable if r.on_env_mismatch == OnEnvMismatch::Fail => {
                            Outcome::Failure {
                                kind: "INCOMPARABLE".into(),
                                message: format!("INCOMPARABLE: {}", mismatch_text(p)),
                            }
                        }
                        Decision::Incomparable => unjudged(
                            Some(g.decision),
                            format!(
                                "INCOMPARABLE: {}{}",
                                mismatch_text(p),
                                reason(Some(g.decision))
                            ),
                        ),
                        Decision::Inconclusive | Decision::Insufficient => unjudged(
                            Some(g.decision),
                            format!("{}: {why}{}", g.decision, reason(Some(g.decision))),
                        ),
                        _ => Outcome::Pass,
                    }
                };
                cases.push(case(&g.label, outcome, text));
            }
        }
    }
    for s in &p.slo {
        let name = format!("slo {}", slo_name(&s.metric, &s.expr));
        let text = format!("measured {}", slo_value(&s.metric, s.value));
        let outcome = if s.pass {
            Outcome::Pass
        } else {
            Outcome::Failure {
                kind: "SLO".into(),
                message: format!(
                    "SLO failed: {} (measured {})",
                    slo_name(&s.metric, &s.expr),
                    slo_value(&s.metric, s.value)
                ),
            }
        };
        cases.push(case(&name, outcome, text));
    }
}

fn figures(g: &GateReport) -> String {
    format!(
        "{}: baseline {}, new {}, change {} {}, noise band {}, {}",
        g.decision,
        value(g.baseline, &g.unit),
        value(g.new, &g.unit),
        change(g.change, g.scale, &g.unit),
        interval(g),
        band(g),
        evidence(g)
    )
}

fn mismatch_text(p: &PointReport) -> String {
    p.env_mismatch
        .iter()
        .map(|m| m.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    use infer_bench_judge::compare::{Settings, compare};
    use infer_bench_testkit::fixtures::{baseline_of, plan, point, results};

    /// One regressed point with a failed SLO, one INCONCLUSIVE point, one
    /// new point: failures are the regression and the SLO; the
    /// INCONCLUSIVE gate is skipped, and a failure under --strict.
    #[test]
    fn failures_follow_the_exit_code() {
        let gates =
            "[regression]\nmetrics = [{ metric = \"tpot\", stat = \"p50\", noise = \"5%\" }]\n";
        let (spec, plan) = plan(16, gates);
        let named = |slug: &str, v: &[f64]| {
            let mut p = point(&plan, v, &[]);
            p.slug = slug.into();
            p.id = format!("{slug}-00000000");
            p
        };
        let b = baseline_of(&results(vec![
            named("a", &[100.0; 3]),
            named("b", &[100.0; 3]),
        ]));
        let mut a = named("a", &[120.0; 3]);
        a.slo = vec![infer_bench_results::SloResult {
            metric: "tpot".into(),
            expr: "p50 < 110ms".parse().unwrap(),
            value: Some(120.0),
            pass: false,
            note: None,
        }];
        a.slo_pass = Some(false);
        let new = results(vec![
            a,
            named("b", &[100.0, 104.0, 108.0]),
            named("c", &[1.0; 3]),
        ]);
        let mut r = compare(&b, &new, &Settings::from_regression(&spec.regression));
        let xml = junit(&r);
        assert!(
            xml.contains("tests=\"4\" failures=\"2\" errors=\"0\" skipped=\"2\""),
            "{xml}"
        );
        assert!(xml.contains("<testcase classname=\"a\" name=\"tpot p50\">\n      <failure type=\"REGRESSED\" message=\"REGRESSED: +20.0% [+20.0%, +20.0%] (band ±5.0%)\">"), "{xml}");
        assert!(
            xml.contains("name=\"slo tpot p50 &lt; 110ms\">\n      <failure type=\"SLO\""),
            "{xml}"
        );
        assert!(xml.contains("<testcase classname=\"b\" name=\"tpot p50\">\n      <skipped message=\"INCONCLUSIVE: "), "{xml}");
        assert!(
            xml.contains(
                "<testcase classname=\"c\" name=\"baseline\">\n      <skipped message=\"new point"
            ),
            "{xml}"
        );
        r.finish(true);
        let strict = junit(&r);
        assert!(strict.contains("failures=\"3\""), "{strict}");
        assert!(
            strict.contains("<failure type=\"UNJUDGED\" message=\"INCONCLUSIVE: "),
            "{strict}"
        );
    }

    /// What could not be judged fails its case when it fails the check;
    /// INCONCLUSIVE is skipped; `allow_unjudged` skips both.
    #[test]
    fn blocking_unjudged_cases_fail() {
        use crate::verdict::testkit::{self, GATES};
        let base: &[(&str, &[f64])] = &[("a", &[100.0; 3]), ("b", &[100.0; 3])];
        let new: &[(&str, &[f64])] = &[("a", &[100.0; 2]), ("b", &[100.0, 104.0, 108.0])];
        let r = testkit::judge(GATES, base, new);
        assert_eq!(r.exit_code, 4);
        let xml = junit(&r);
        assert!(
            xml.contains("tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"1\""),
            "{xml}"
        );
        assert!(
            xml.contains("<testcase classname=\"a\" name=\"tpot p50\">\n      <failure type=\"UNJUDGED\" message=\"INSUFFICIENT: "),
            "{xml}"
        );
        assert!(
            xml.contains("(fewer runs than min_runs; fix: `[load] runs = 3` (or more))"),
            "{xml}"
        );
        assert!(
            xml.contains("<testcase classname=\"b\" name=\"tpot p50\">\n      <skipped message=\"INCONCLUSIVE: "),
            "{xml}"
        );
        let allowed = testkit::judge(
            &GATES.replace("[regression]\n", "[regression]\nallow_unjudged = true\n"),
            base,
            new,
        );
        assert_eq!(allowed.exit_code, 0);
        let xml = junit(&allowed);
        assert!(
            xml.contains("failures=\"0\" errors=\"0\" skipped=\"2\""),
            "{xml}"
        );
    }

    /// Rules that differ from the baseline's are a failed case of their
    /// own; so is a comparison that judged nothing.
    #[test]
    fn changed_rules_and_nothing_judged_fail_a_case() {
        use crate::verdict::testkit::{self, GATES};
        let (spec, plan) = plan(16, GATES);
        let mut b = baseline_of(&results(vec![point(&plan, &[100.0; 3], &[])]));
        infer_bench_judge::rules::pin(&mut b, &spec.regression, "sha");
        let mut wide = spec.regression.clone();
        wide.min_runs = 9;
        let rules = infer_bench_judge::rules::resolve(&b, &wide).unwrap();
        let r = compare(
            &b,
            &results(vec![point(&plan, &[100.0; 3], &[])]),
            &Settings::from_rules(&rules),
        );
        assert_eq!(r.exit_code, 4);
        let xml = junit(&r);
        assert!(
            xml.contains("<testcase classname=\"infer-bench\" name=\"rules\">\n      <failure type=\"RULES\" message=\"the spec&#39;s rules differ from the baseline&#39;s; judged by the baseline&#39;s (bless on main to adopt them)\">min_runs: 3 -&gt; 9</failure>"),
            "{xml}"
        );
        assert!(xml.contains("failures=\"1\""), "{xml}");
        let nothing = testkit::judge(GATES, &[("a", &[100.0; 3])], &[("b", &[100.0; 3])]);
        assert_eq!(nothing.exit_code, 4);
        let xml = junit(&nothing);
        assert!(
            xml.contains("<testcase classname=\"infer-bench\" name=\"judged\">\n      <failure type=\"UNJUDGED\""),
            "{xml}"
        );
        assert!(xml.contains("failures=\"1\""), "{xml}");
    }
}
