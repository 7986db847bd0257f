//! Capacity search (`[load] search`): which level to probe next, and what
//! the probes so far say. Bracketing, then bisection: the first probe is
//! at `from`; while probes pass, the level doubles (capped at `to`); once
//! one fails, the geometric mean of the last pass and the first failure
//! is probed until the failure is at most `precision` above the pass.
//! Only a VALID probe that meets the target passes: an INVALID or failed
//! probe proves nothing about the server, so it counts against the level
//! (the answer errs low, never high).
//!
//! The searcher only ever probes strictly between the highest pass and the
//! lowest failure so far, so even a noisy oracle (a level that passes once
//! and fails once) leaves a bracket whose ends are a real pass and a real
//! failure. The run loop (`plan`) asks it for levels and feeds it verdicts;
//! it knows nothing of servers.

use infer_bench_results::PointStatus;
use infer_bench_results::search::{ProbeVerdict, SearchOutcome, SearchProbe, SearchResult};
use infer_bench_spec::raw::SearchOver;
use infer_bench_spec::results::PointResult;
use infer_bench_spec::{Level, Rate, Search, SearchTarget};

/// Where a search stands.
#[derive(Debug, Clone)]
pub struct Searcher {
    search: Search,
    /// The highest passing probe so far.
    pass: Option<SearchProbe>,
    /// The lowest failing probe so far (above `pass`).
    fail: Option<SearchProbe>,
    probes: Vec<SearchProbe>,
    /// Set when the next level cannot be told apart from a bracket end.
    stuck: bool,
}

/// A level's number: requests/s or a concurrency.
pub fn level_value(l: Level) -> f64 {
    match l {
        Level::Concurrency(c) => c as f64,
        Level::Rate(r) => r.as_per_second(),
    }
}

/// A rate rounded to three significant digits, so probe slugs stay
/// readable (`r5.66`, not `r5.656854249492381`).
fn round3(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(2 - x.log10().floor() as i32);
    (x * scale).round() / scale
}

impl Searcher {
    pub fn new(search: &Search) -> Searcher {
        Searcher {
            search: search.clone(),
            pass: None,
            fail: None,
            probes: Vec::new(),
            stuck: false,
        }
    }

    fn level(&self, x: f64) -> Option<Level> {
        match self.search.over {
            SearchOver::Concurrency => Some(Level::Concurrency(x.round().max(1.0) as u32)),
            SearchOver::Rate => Rate::per_second(round3(x)).map(Level::Rate),
        }
    }

    fn converged(&self, lo: f64, hi: f64) -> bool {
        hi <= lo * (1.0 + self.search.precision.fraction()) + 1e-12
    }

    /// The next level to probe, or `None` when the search is over.
    pub fn next(&self) -> Option<Level> {
        if self.stuck {
            return None;
        }
        let to = level_value(self.search.to);
        let candidate = match (&self.pass, &self.fail) {
            (None, None) => return Some(self.search.from),
            (None, Some(_)) => return None,
            (Some(p), None) if p.level >= to => return None,
            (Some(p), None) => self.level((p.level * 2.0).min(to))?,
            (Some(p), Some(f)) if self.converged(p.level, f.level) => return None,
            (Some(p), Some(f)) => self.level((p.level * f.level).sqrt())?,
        };
        let x = level_value(candidate);
        let above = self.pass.as_ref().is_none_or(|p| x > p.level);
        let below = self.fail.as_ref().is_none_or(|f| x < f.level);
        (above && below).then_some(candidate)
    }

    /// Records what the probe at `level` (the one `next` gave) showed.
    pub fn record(&mut self, id: &str, level: Level, verdict: ProbeVerdict) {
        let probe = SearchProbe {
            id: id.to_string(),
            level: level_value(level),
            verdict,
        };
        self.probes.push(probe.clone());
        if verdict.passed() {
            self.pass = Some(probe);
        } else {
            self.fail = Some(probe);
        }
        // A bracket too narrow to split: adjacent concurrencies, or a
        // rounded rate equal to an end.
        if self.pass.is_some() && self.next().is_none() && !self.over_by_rule() {
            self.stuck = true;
        }
    }

    /// Whether the search ended for a reason of its own (precision
    /// reached, range left), as opposed to the levels running out.
    fn over_by_rule(&self) -> bool {
        let to = level_value(self.search.to);
        match (&self.pass, &self.fail) {
            (Some(p), None) => p.level >= to,
            (Some(p), Some(f)) => self.converged(p.level, f.level),
            _ => true,
        }
    }

    /// Every probe so far, in order.
    pub fn probes(&self) -> &[SearchProbe] {
        &self.probes
    }

    /// The answer so far; `finished` says whether the search ended on its
    /// own (else it is `Unfinished`).
    pub fn result(&self, id: &str, slug: &str, finished: bool) -> SearchResult {
        let outcome = match (&self.pass, &self.fail) {
            _ if !finished => SearchOutcome::Unfinished,
            (None, Some(_)) => SearchOutcome::BelowRange,
            (Some(_), None) => SearchOutcome::AboveRange,
            (Some(_), Some(_)) if self.stuck => SearchOutcome::Resolution,
            (Some(_), Some(_)) => SearchOutcome::Found,
            (None, None) => SearchOutcome::Unfinished,
        };
        SearchResult {
            id: id.to_string(),
            slug: slug.to_string(),
            over: self.search.over.name().to_string(),
            target: self.search.target.to_string(),
            precision_pct: self.search.precision.value(),
            from: level_value(self.search.from),
            to: level_value(self.search.to),
            outcome,
            last_pass: self.pass.clone(),
            first_fail: self.fail.clone(),
            probes: self.probes.clone(),
        }
    }
}

/// What a finished (assessed) probe shows against the search's target.
pub fn verdict(target: SearchTarget, pr: &PointResult) -> ProbeVerdict {
    if pr.status == PointStatus::Failed {
        return ProbeVerdict::Failed;
    }
    if !pr.valid {
        return ProbeVerdict::Invalid;
    }
    let met = match target {
        SearchTarget::Slo => pr.slo_pass == Some(true),
        SearchTarget::Goodput(p) => pr.merged.goodput_ratio >= p.fraction(),
    };
    if met {
        ProbeVerdict::Pass
    } else {
        ProbeVerdict::Fail
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_spec::Percent;

    fn search(over: SearchOver, from: f64, to: f64, precision: f64) -> Search {
        let level = |x: f64| match over {
            SearchOver::Rate => Level::Rate(Rate::per_second(x).unwrap()),
            SearchOver::Concurrency => Level::Concurrency(x as u32),
        };
        Search {
            over,
            from: level(from),
            to: level(to),
            target: SearchTarget::Slo,
            precision: Percent::new(precision).unwrap(),
        }
    }

    /// Runs a search against an oracle; returns the answer and the levels probed.
    fn run(s: &Search, mut oracle: impl FnMut(f64) -> ProbeVerdict) -> (SearchResult, Vec<f64>) {
        let mut searcher = Searcher::new(s);
        let mut levels = Vec::new();
        while let Some(l) = searcher.next() {
            let x = level_value(l);
            assert!(levels.len() < 100, "the search does not end: {levels:?}");
            levels.push(x);
            searcher.record(&format!("p{x}"), l, oracle(x));
        }
        (searcher.result("s", "s", true), levels)
    }

    fn threshold(t: f64) -> impl FnMut(f64) -> ProbeVerdict {
        move |x| {
            if x <= t {
                ProbeVerdict::Pass
            } else {
                ProbeVerdict::Fail
            }
        }
    }

    #[test]
    fn a_monotone_oracle_is_bracketed_within_the_precision() {
        for t in [1.3, 2.0, 5.0, 7.77, 13.0, 29.9] {
            let s = search(SearchOver::Rate, 1.0, 32.0, 5.0);
            let (r, levels) = run(&s, threshold(t));
            assert_eq!(r.outcome, SearchOutcome::Found, "t = {t}: {levels:?}");
            let (p, f) = (r.last_pass.unwrap().level, r.first_fail.unwrap().level);
            assert!(p <= t && t < f, "t = {t}: [{p}, {f})");
            assert!(
                f / p - 1.0 <= 0.05 + 1e-9,
                "t = {t}: [{p}, {f}) is wider than 5%"
            );
            // Doubling from 1 to 32 is at most 6 probes, bisecting a factor
            // of 2 to 5% at most 4 more (log2(ln 2 / ln 1.05) = 3.8).
            assert!(
                levels.len() <= 10,
                "t = {t}: {} probes: {levels:?}",
                levels.len()
            );
            assert_eq!(levels[0], 1.0, "the first probe is `from`");
        }
    }

    #[test]
    fn the_range_ends_are_answers_of_their_own() {
        let s = search(SearchOver::Rate, 2.0, 16.0, 5.0);
        let (r, levels) = run(&s, threshold(1.0));
        assert_eq!((r.outcome, levels), (SearchOutcome::BelowRange, vec![2.0]));
        assert!(r.last_pass.is_none());
        assert_eq!(r.answer(), "below 2 req/s (the first probe failed)");
        let (r, levels) = run(&s, threshold(100.0));
        assert_eq!(r.outcome, SearchOutcome::AboveRange);
        assert_eq!(
            levels,
            vec![2.0, 4.0, 8.0, 16.0],
            "doubling, capped at `to`"
        );
        assert_eq!(r.answer(), "at least 16 req/s (every probe passed)");
    }

    #[test]
    fn concurrency_stops_at_adjacent_levels() {
        // 5% of 10 is half a request: the levels run out first.
        let s = search(SearchOver::Concurrency, 1.0, 64.0, 5.0);
        let (r, levels) = run(&s, threshold(10.0));
        assert_eq!(r.outcome, SearchOutcome::Resolution, "{levels:?}");
        assert_eq!(
            (r.last_pass.unwrap().level, r.first_fail.unwrap().level),
            (10.0, 11.0)
        );
        assert!(levels.iter().all(|x| x.fract() == 0.0));
        // Wide enough a precision ends by the rule.
        let s = search(SearchOver::Concurrency, 1.0, 64.0, 30.0);
        let (r, _) = run(&s, threshold(10.0));
        assert_eq!(r.outcome, SearchOutcome::Found);
    }

    #[test]
    fn an_invalid_probe_is_not_a_pass() {
        // The server holds 10/s, but every probe above 5/s is INVALID (say
        // the client could not keep up): the answer errs low, at 5.
        let s = search(SearchOver::Rate, 1.0, 32.0, 5.0);
        let (r, _) = run(&s, |x| {
            if x > 5.0 {
                ProbeVerdict::Invalid
            } else {
                threshold(10.0)(x)
            }
        });
        let (p, f) = (r.last_pass.unwrap(), r.first_fail.unwrap());
        assert!(p.level <= 5.0 && f.level > 5.0);
        assert_eq!(f.verdict, ProbeVerdict::Invalid);
        assert!(
            r.probes
                .iter()
                .filter(|p| p.verdict.passed())
                .all(|p| p.level <= 5.0)
        );
    }

    #[test]
    fn a_noisy_oracle_still_leaves_a_true_bracket() {
        // Within 3% of the threshold the verdict is a coin toss (seeded);
        // outside it, the truth. Whatever the tosses, the last pass is below
        // the noisy band's top and the first failure above its bottom, and
        // the bracket is as narrow as asked.
        let t = 7.0;
        for seed in 0..200u64 {
            let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut toss = move || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state & 1 == 1
            };
            let s = search(SearchOver::Rate, 1.0, 32.0, 5.0);
            let (r, levels) = run(&s, |x| {
                let pass = if (x / t - 1.0).abs() <= 0.03 {
                    toss()
                } else {
                    x <= t
                };
                if pass {
                    ProbeVerdict::Pass
                } else {
                    ProbeVerdict::Fail
                }
            });
            assert_eq!(r.outcome, SearchOutcome::Found, "seed {seed}: {levels:?}");
            let (p, f) = (r.last_pass.unwrap().level, r.first_fail.unwrap().level);
            assert!(p < f, "seed {seed}");
            assert!(p <= t * 1.03 && f >= t * 0.97, "seed {seed}: [{p}, {f})");
            assert!(f / p - 1.0 <= 0.05 + 1e-9, "seed {seed}: [{p}, {f})");
        }
    }

    #[test]
    fn probe_rates_are_rounded_to_three_digits() {
        let s = search(SearchOver::Rate, 1.0, 32.0, 1.0);
        let (_, levels) = run(&s, threshold(5.0));
        for x in levels {
            assert_eq!(x, round3(x), "{x}");
        }
        assert_eq!(round3(5.656854), 5.66);
        assert_eq!(round3(0.0123456), 0.0123);
        assert_eq!(round3(123.456), 123.0);
    }
}
