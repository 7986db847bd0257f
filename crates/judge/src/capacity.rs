//! Capacity searches against a baseline: a search is judged as a whole, by
//! its answer, not probe by probe. Each answer is an interval: the
//! capacity is at least the last passing level and below the first
//! failing one. Two intervals that overlap cannot be told apart at the
//! precision the searches ran with, so they are UNCHANGED; a capacity is
//! REGRESSED only when the new search failed at a level the baseline's
//! passed (the new interval lies wholly at or below the baseline's last
//! pass), and IMPROVED in the mirror case. A search whose configuration
//! changed (another hash), or that did not finish on either side, is not
//! judged.

use std::collections::BTreeMap;

use serde::Serialize;

use infer_bench_results::search::{SearchOutcome, SearchResult};

/// The decision on one capacity search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum CapacityDecision {
    /// The new search failed at or below a level the baseline passed.
    Regressed,
    /// The new search passed at or above a level the baseline failed.
    Improved,
    /// The intervals overlap: no change the searches can resolve.
    Unchanged,
    /// Not judged (see `note`).
    Unjudged,
    /// In the results, not in the baseline.
    New,
    /// In the baseline, not in the results.
    Dropped,
}

impl CapacityDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityDecision::Regressed => "REGRESSED",
            CapacityDecision::Improved => "IMPROVED",
            CapacityDecision::Unchanged => "UNCHANGED",
            CapacityDecision::Unjudged => "UNJUDGED",
            CapacityDecision::New => "NEW",
            CapacityDecision::Dropped => "DROPPED",
        }
    }
}

/// A search's answer as an interval: `[lower, upper)`, `lower` 0 when even
/// the first probe failed, `upper` absent when every probe passed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bracket {
    pub id: String,
    pub lower: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upper: Option<f64>,
    pub outcome: SearchOutcome,
    /// The answer in words, with its uncertainty.
    pub answer: String,
}

impl Bracket {
    fn of(s: &SearchResult) -> Bracket {
        Bracket {
            id: s.id.clone(),
            lower: s.last_pass.as_ref().map_or(0.0, |p| p.level),
            upper: s.first_fail.as_ref().map(|f| f.level),
            outcome: s.outcome,
            answer: s.answer(),
        }
    }
}

/// One capacity search compared with the baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityReport {
    pub slug: String,
    pub over: String,
    pub target: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Bracket>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub results: Option<Bracket>,
    pub decision: CapacityDecision,
    /// Why, in one sentence.
    pub note: String,
}

impl CapacityReport {
    /// Whether this search blocks a clean verdict when unjudged searches
    /// are not allowed: one that could not be judged.
    pub fn unjudged(&self) -> bool {
        self.decision == CapacityDecision::Unjudged
    }
    /// Whether a capacity was compared on both sides.
    pub fn judged(&self) -> bool {
        matches!(
            self.decision,
            CapacityDecision::Regressed | CapacityDecision::Improved | CapacityDecision::Unchanged
        )
    }
}

/// Compares the searches of new results with the baseline's (by slug).
pub fn compare(
    baseline: &BTreeMap<String, SearchResult>,
    results: &[SearchResult],
) -> Vec<CapacityReport> {
    let mut out = Vec::new();
    for new in results {
        let base = baseline.get(&new.slug);
        let report = |decision, note: String| CapacityReport {
            slug: new.slug.clone(),
            over: new.over.clone(),
            target: new.target.clone(),
            baseline: base.map(Bracket::of),
            results: Some(Bracket::of(new)),
            decision,
            note,
        };
        let Some(base) = base else {
            out.push(report(
                CapacityDecision::New,
                "not in the baseline: bless it to judge it".into(),
            ));
            continue;
        };
        out.push(decide(base, new, report));
    }
    for (slug, base) in baseline {
        if !results.iter().any(|s| s.slug == *slug) {
            out.push(CapacityReport {
                slug: slug.clone(),
                over: base.over.clone(),
                target: base.target.clone(),
                baseline: Some(Bracket::of(base)),
                results: None,
                decision: CapacityDecision::Dropped,
                note: "not in these results (not selected, or no longer in the spec)".into(),
            });
        }
    }
    out
}

fn decide(
    base: &SearchResult,
    new: &SearchResult,
    report: impl Fn(CapacityDecision, String) -> CapacityReport,
) -> CapacityReport {
    use CapacityDecision::*;
    if new.outcome == SearchOutcome::Unfinished {
        return report(Unjudged, "the search did not finish: run it again".into());
    }
    if base.id != new.id {
        return report(
            Unjudged,
            format!(
                "its configuration changed since the baseline ({} then, {} now): bless it once the change is meant",
                base.id, new.id
            ),
        );
    }
    let (b, n) = (Bracket::of(base), Bracket::of(new));
    let unit = new.unit();
    let num = infer_bench_spec::fmt_number;
    match (n.upper, b.upper) {
        (Some(nh), _) if nh <= b.lower => report(
            Regressed,
            format!(
                "fails at {} {unit}, which the baseline passed (its last pass: {} {unit})",
                num(nh),
                num(b.lower)
            ),
        ),
        (_, Some(bh)) if n.lower >= bh => report(
            Improved,
            format!(
                "passes at {} {unit}, which the baseline failed (its first failure: {} {unit})",
                num(n.lower),
                num(bh)
            ),
        ),
        _ => report(
            Unchanged,
            "the intervals overlap: no change larger than the searches' precision".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_results::search::{ProbeVerdict, SearchProbe};

    fn search(id: &str, pass: Option<f64>, fail: Option<f64>) -> SearchResult {
        let probe = |level: f64, verdict| SearchProbe {
            id: format!("p{level}"),
            level,
            verdict,
        };
        let last_pass = pass.map(|l| probe(l, ProbeVerdict::Pass));
        let first_fail = fail.map(|l| probe(l, ProbeVerdict::Fail));
        SearchResult {
            id: id.into(),
            slug: "s.search-r1-r32".into(),
            over: "rate".into(),
            target: "slo".into(),
            precision_pct: 5.0,
            from: 1.0,
            to: 32.0,
            outcome: match (pass, fail) {
                (Some(_), Some(_)) => SearchOutcome::Found,
                (None, _) => SearchOutcome::BelowRange,
                (_, None) => SearchOutcome::AboveRange,
            },
            probes: last_pass.iter().chain(first_fail.iter()).cloned().collect(),
            last_pass,
            first_fail,
        }
    }

    fn decision(base: SearchResult, new: SearchResult) -> CapacityDecision {
        let b: BTreeMap<_, _> = [(base.slug.clone(), base)].into();
        let r = compare(&b, &[new]);
        assert_eq!(r.len(), 1);
        r[0].decision
    }

    #[test]
    fn only_disjoint_intervals_are_changes() {
        use CapacityDecision::*;
        let base = || search("a", Some(6.0), Some(6.25));
        // Overlapping, nested or equal: the searches cannot tell.
        for (p, f) in [(6.0, 6.25), (6.1, 6.3), (5.9, 6.1), (5.0, 6.2)] {
            assert_eq!(
                decision(base(), search("a", Some(p), Some(f))),
                Unchanged,
                "[{p}, {f})"
            );
        }
        // Fails at the baseline's last pass, or below: regressed.
        assert_eq!(
            decision(base(), search("a", Some(5.8), Some(6.0))),
            Regressed
        );
        assert_eq!(decision(base(), search("a", None, Some(1.0))), Regressed);
        // Passes at the baseline's first failure, or above: improved.
        assert_eq!(
            decision(base(), search("a", Some(6.25), Some(6.5))),
            Improved
        );
        assert_eq!(decision(base(), search("a", Some(32.0), None)), Improved);
        // Both above the range: nothing to tell apart.
        assert_eq!(
            decision(search("a", Some(32.0), None), search("a", Some(32.0), None)),
            Unchanged
        );
    }

    #[test]
    fn changed_or_unfinished_searches_are_not_judged() {
        let base = search("a", Some(6.0), Some(6.25));
        let r = decision(base.clone(), search("b", Some(3.0), Some(3.1)));
        assert_eq!(r, CapacityDecision::Unjudged);
        let mut unfinished = search("a", Some(1.0), None);
        unfinished.outcome = SearchOutcome::Unfinished;
        assert_eq!(
            decision(base.clone(), unfinished),
            CapacityDecision::Unjudged
        );
        let b: BTreeMap<_, _> = [(base.slug.clone(), base)].into();
        let r = compare(&b, &[]);
        assert_eq!(r[0].decision, CapacityDecision::Dropped);
    }
}
