//! Quality gates: a point's quality figures (agreement with a reference's
//! answers, task accuracy) judged against the baseline's, with the same
//! verdict words as speed and the same rule that what could not be judged
//! does not pass.
//!
//! The evidence is the prompts, not runs: each side's figure is a
//! proportion of its prompts (`agreement`, `token_agreement`, `accuracy`)
//! or a mean over them (`first_diff`, `kl_mean`), with its sampling error
//! from the prompts. The change is new minus baseline:
//!
//! - for a proportion, in points, with Newcombe's hybrid score interval
//!   (from each side's Wilson interval at the judge's confidence), against
//!   the gate's noise band in points;
//! - for a mean, relative to the baseline's value (or to a floor: 0.001
//!   nats of KL, one token of first difference, below which a figure is
//!   indistinguishable from zero), with a normal interval from both
//!   sides' standard errors, against the noise band in percent.
//!
//! The verdict is the speed gates' (`stats::verdict_of`): REGRESSED when
//! the whole interval is worse than the band, UNCHANGED when it lies
//! inside, INCONCLUSIVE when it straddles an edge. With fewer than
//! [`MIN_PROMPTS`] prompts compared on a side, with no figure on a side,
//! or with different prompt sets, it is INSUFFICIENT or INCOMPARABLE.
//!
//! Token agreement counts positions, but positions of one answer are not
//! independent (after a first difference they mostly all differ): its
//! interval takes the prompts as the draws, which is conservative.

use infer_bench_results::agreement::wilson;
use infer_bench_results::metric::{Kind, Metric};
use infer_bench_results::quality::PointQuality;
use infer_bench_spec::Gate;

use crate::compare::{Decision, GateReport, Scale, Settings, Shortfall};
use crate::stats::{self, Verdict};

/// The fewest prompts a side must have compared (or scored) for a quality
/// gate to decide: below it the interval of a proportion is wider than
/// any band a gate would use.
pub const MIN_PROMPTS: u64 = 30;

/// Below these a mean is taken as this much, so that a change from zero
/// has a size: 0.001 nats of KL, one token of first difference.
const KL_FLOOR: f64 = 1e-3;
const FIRST_DIFF_FLOOR: f64 = 1.0;

/// One side's figure of a metric: its value, its prompts and its
/// sampling error (the count behind a proportion, or a standard error).
struct Figure {
    value: f64,
    prompts: u64,
    se: f64,
}

fn figure(q: &PointQuality, metric: Metric) -> Option<Figure> {
    let value = q.value(metric)?;
    match metric {
        Metric::Accuracy => {
            let a = q.accuracy.as_ref()?;
            Some(Figure {
                value,
                prompts: a.scored,
                se: 0.0,
            })
        }
        _ => {
            let a = q.agreement.as_ref()?;
            let se = match metric {
                Metric::FirstDiff => a.first_diff_se,
                Metric::KlMean => a.kl_se.unwrap_or(0.0),
                _ => 0.0,
            };
            Some(Figure {
                value,
                prompts: a.compared,
                se,
            })
        }
    }
}

/// Judges one quality gate of a point.
pub(crate) fn judge(
    gate: &Gate,
    base: Option<&PointQuality>,
    new: Option<&PointQuality>,
    settings: &Settings,
    problem: Option<&str>,
    mismatch: bool,
) -> GateReport {
    let metric = gate.metric;
    let scale = if metric.kind() == Kind::Ratio {
        Scale::Absolute
    } else {
        Scale::Relative
    };
    let mut report = GateReport {
        over_prompts: true,
        ..GateReport::undecided(metric, None, scale, false)
    };
    if let Some(problem) = problem {
        report.note = Some(problem.to_string());
        return report;
    }
    let no_value = |report: &mut GateReport, note: String| {
        report.note = Some(note);
        report.shortfall = Some(Shortfall::NoValue);
    };
    let (Some(bq), Some(nq)) = (base, new) else {
        let side = if base.is_none() {
            "the baseline has no quality figures: bless it from a run with [quality]"
        } else {
            "the new results have no quality figures: the run had no [quality] phase for this server"
        };
        no_value(&mut report, side.to_string());
        return report;
    };
    let (b, n) = match (figure(bq, metric), figure(nq, metric)) {
        (Some(b), Some(n)) => (b, n),
        (None, _) => {
            let why = bq
                .note
                .clone()
                .unwrap_or_else(|| format!("no {metric} figure"));
            no_value(&mut report, format!("baseline: {why}"));
            return report;
        }
        (_, None) => {
            let why = nq
                .note
                .clone()
                .unwrap_or_else(|| format!("no {metric} figure"));
            no_value(&mut report, format!("new results: {why}"));
            return report;
        }
    };
    report.baseline = Some(b.value);
    report.new = Some(n.value);
    report.m = b.prompts as usize;
    report.n = n.prompts as usize;
    if mismatch {
        report.decision = Decision::Incomparable;
        report.note = Some("the environments differ (see the mismatch)".into());
        return report;
    }
    if bq.prompt_set != nq.prompt_set || bq.reference != nq.reference {
        report.decision = Decision::Incomparable;
        report.note = Some(format!(
            "the quality prompts, their settings or the reference ({} then, {} now) differ from the baseline's: bless again to compare",
            bq.reference, nq.reference
        ));
        return report;
    }
    if b.prompts < MIN_PROMPTS || n.prompts < MIN_PROMPTS {
        report.note = Some(format!(
            "{} baseline and {} new prompts compared; a quality gate needs {MIN_PROMPTS} a side ([quality] prompts)",
            b.prompts, n.prompts
        ));
        report.shortfall = Some(Shortfall::FewReplicates);
        return report;
    }
    let z = stats::z_for(settings.confidence);
    let (change, low, high) = match scale {
        Scale::Absolute => newcombe(&b, &n, z),
        Scale::Relative => {
            let floor = if metric == Metric::KlMean {
                KL_FLOOR
            } else {
                FIRST_DIFF_FLOOR
            };
            let base = b.value.max(floor);
            let change = (n.value - b.value) / base;
            let se = (n.se.powi(2) + b.se.powi(2)).sqrt() / base;
            (change, change - z * se, change + z * se)
        }
    };
    let (lo, hi) = if metric.higher_is_worse() {
        (low, high)
    } else {
        (-high, -low)
    };
    let band = gate.noise.fraction();
    let verdict = stats::verdict_of(lo, hi, band);
    report.change = Some(change);
    report.change_low = Some(low);
    report.change_high = Some(high);
    report.noise_band = Some(band);
    report.achieved_confidence = Some(settings.confidence);
    report.decision = verdict.into();
    if verdict == Verdict::Inconclusive {
        report.note = Some(
            "the interval straddles the noise band: ask more prompts ([quality] prompts) for a verdict"
                .into(),
        );
    }
    report
}

/// Newcombe's hybrid score interval of `new - base` for two proportions,
/// from each side's Wilson interval at `z`: (difference, low, high).
fn newcombe(b: &Figure, n: &Figure, z: f64) -> (f64, f64, f64) {
    let k = |f: &Figure| (f.value * f.prompts as f64).round() as u64;
    let (l1, u1) = wilson(k(b), b.prompts, z).unwrap_or((0.0, 1.0));
    let (l2, u2) = wilson(k(n), n.prompts, z).unwrap_or((0.0, 1.0));
    let (p1, p2) = (b.value, n.value);
    let d = p2 - p1;
    let low = d - ((p2 - l2).powi(2) + (u1 - p1).powi(2)).sqrt();
    let high = d + ((u2 - p2).powi(2) + (p1 - l1).powi(2)).sqrt();
    (d, low, high)
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_results::quality::{AccuracyResult, AgreementResult};
    use infer_bench_spec::Percent;

    fn settings() -> Settings {
        let rules = infer_bench_spec::compile_regression("t.toml", "name = \"t\"\n")
            .expect("a spec without [regression]");
        Settings::from_regression(&rules)
    }

    fn gate(metric: Metric, noise: f64) -> Gate {
        Gate {
            metric,
            stat: None,
            noise: Percent::new(noise).unwrap(),
        }
    }

    fn agreeing(exact: u64, compared: u64, kl: f64, kl_se: f64) -> PointQuality {
        PointQuality {
            reference: "sim/m/bf16".into(),
            prompt_set: "abc".into(),
            prompts: compared,
            answered: compared,
            agreement: Some(AgreementResult {
                compared,
                exact,
                exact_match: exact as f64 / compared as f64,
                kl_mean: Some(kl),
                kl_se: Some(kl_se),
                unit: "tokens".into(),
                ..AgreementResult::default()
            }),
            ..PointQuality::default()
        }
    }

    fn decide(g: &Gate, b: &PointQuality, n: &PointQuality) -> GateReport {
        judge(g, Some(b), Some(n), &settings(), None, false)
    }

    #[test]
    fn a_drop_in_agreement_regresses_and_the_same_answers_do_not() {
        let g = gate(Metric::Agreement, 5.0);
        // 96% then 60% of 200 prompts: far outside a 5-point band.
        let r = decide(
            &g,
            &agreeing(192, 200, 0.01, 0.001),
            &agreeing(120, 200, 0.01, 0.001),
        );
        assert_eq!(r.decision, Decision::Regressed, "{r:?}");
        assert!(r.change.unwrap() < -0.3 && r.over_prompts);
        assert_eq!((r.m, r.n), (200, 200));
        // The same figure: the interval sits inside the band.
        let r = decide(
            &g,
            &agreeing(192, 200, 0.01, 0.001),
            &agreeing(192, 200, 0.01, 0.001),
        );
        assert_eq!(r.decision, Decision::Unchanged, "{r:?}");
        // Better agreement is an improvement.
        let r = decide(
            &g,
            &agreeing(120, 200, 0.01, 0.001),
            &agreeing(196, 200, 0.01, 0.001),
        );
        assert_eq!(r.decision, Decision::Improved, "{r:?}");
    }

    #[test]
    fn a_small_change_on_few_prompts_is_inconclusive_and_too_few_are_insufficient() {
        let g = gate(Metric::Agreement, 5.0);
        let r = decide(&g, &agreeing(36, 40, 0.0, 0.0), &agreeing(33, 40, 0.0, 0.0));
        assert_eq!(r.decision, Decision::Inconclusive, "{r:?}");
        let r = decide(&g, &agreeing(9, 10, 0.0, 0.0), &agreeing(2, 10, 0.0, 0.0));
        assert_eq!(r.decision, Decision::Insufficient);
        assert_eq!(r.shortfall, Some(Shortfall::FewReplicates));
    }

    #[test]
    fn kl_is_judged_relative_to_the_baseline_or_its_floor() {
        let g = gate(Metric::KlMean, 50.0);
        // From none to 0.02 nats: twenty floors up.
        let r = decide(
            &g,
            &agreeing(200, 200, 0.0, 0.0),
            &agreeing(150, 200, 0.02, 0.002),
        );
        assert_eq!(r.decision, Decision::Regressed, "{r:?}");
        // Zero on both sides is unchanged, not a ratio of nothing.
        let r = decide(
            &g,
            &agreeing(200, 200, 0.0, 0.0),
            &agreeing(200, 200, 0.0, 0.0),
        );
        assert_eq!(r.decision, Decision::Unchanged, "{r:?}");
        let r = decide(
            &g,
            &agreeing(150, 200, 0.010, 0.001),
            &agreeing(150, 200, 0.0101, 0.001),
        );
        assert_eq!(r.decision, Decision::Unchanged, "{r:?}");
    }

    #[test]
    fn what_cannot_be_compared_never_passes() {
        let g = gate(Metric::Agreement, 5.0);
        let b = agreeing(192, 200, 0.0, 0.0);
        let r = judge(&g, Some(&b), None, &settings(), None, false);
        assert_eq!(r.decision, Decision::Insufficient);
        let r = judge(&g, None, Some(&b), &settings(), None, false);
        assert_eq!(r.decision, Decision::Insufficient);
        let mut other = b.clone();
        other.prompt_set = "def".into();
        assert_eq!(decide(&g, &b, &other).decision, Decision::Incomparable);
        let mut unmeasured = b.clone();
        unmeasured.agreement = None;
        unmeasured.note = Some("the reference sim/m/bf16 did not answer".into());
        let r = decide(&g, &b, &unmeasured);
        assert_eq!(r.decision, Decision::Insufficient);
        assert!(r.note.unwrap().contains("did not answer"));
        // Accuracy without expected answers has no figure either.
        let r = decide(&gate(Metric::Accuracy, 5.0), &b, &b);
        assert_eq!(r.decision, Decision::Insufficient);
    }

    #[test]
    fn accuracy_is_a_proportion_of_the_scored_prompts() {
        let g = gate(Metric::Accuracy, 5.0);
        let scored = |correct: u64| PointQuality {
            prompt_set: "abc".into(),
            accuracy: Some(AccuracyResult {
                scorer: "exact".into(),
                scored: 1000,
                correct,
                rate: correct as f64 / 1000.0,
                ..AccuracyResult::default()
            }),
            ..PointQuality::default()
        };
        // 71.2% against 71.8% of 1000: the interval of the difference is
        // about +-4 points, inside a 5-point band.
        let r = decide(&g, &scored(718), &scored(712));
        assert_eq!(r.decision, Decision::Unchanged, "{r:?}");
        let r = decide(&g, &scored(718), &scored(600));
        assert_eq!(r.decision, Decision::Regressed, "{r:?}");
    }
}
