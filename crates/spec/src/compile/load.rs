//! The `[load]` section (arrivals, ends, warmup, timeouts, ramps) and the
//! `[validity]` thresholds a run must meet to count.

use super::Cx;
use crate::de::fmt_number;
use crate::diag::Seg;
use crate::model::*;
use crate::raw::*;
use crate::{Duration, Percent};

impl Cx<'_> {
    /// `traces`: some workload replays a trace (whose end is the trace's).
    pub(super) fn load(&mut self, l: RawLoad, traces: bool) -> LoadDefaults {
        if l.warmup.is_some() && l.warmup_requests.is_some() {
            self.key_err(
                "load.warmup_requests",
                "give either `warmup` (a time) or `warmup_requests` (a count), not both",
                None,
            );
        }
        if l.burstiness.is_some() && !matches!(l.arrival, Some(Arrival::Gamma)) {
            self.key_err(
                "load.burstiness",
                "`burstiness` shapes gamma arrivals only",
                Some("set arrival = \"gamma\", or remove burstiness".into()),
            );
        }
        let burstiness = self.positive(
            "load.burstiness",
            l.burstiness,
            1.0,
            Some(crate::limits::MAX_BURSTINESS),
        );
        {
            use crate::limits::{MAX_CONCURRENCY, MAX_REQUESTS, MAX_RUNS};
            let c = |v: Option<u32>| v.map(u64::from);
            self.count_in(
                "load.runs",
                c(l.runs),
                1,
                MAX_RUNS.into(),
                "a number of runs",
            );
            self.count_in(
                "load.requests",
                l.requests,
                1,
                MAX_REQUESTS,
                "a number of requests",
            );
            self.count_in(
                "load.warmup_requests",
                l.warmup_requests,
                0,
                MAX_REQUESTS,
                "a number of requests",
            );
            self.count_in(
                "load.concurrency",
                c(l.concurrency),
                1,
                MAX_CONCURRENCY.into(),
                "a concurrency",
            );
            self.count_in(
                "load.max_concurrency",
                c(l.max_concurrency),
                1,
                MAX_CONCURRENCY.into(),
                "a concurrency",
            );
        }
        // With a trace, the points of other workloads are checked for an
        // end by the plan.
        if l.duration.is_none() && l.requests.is_none() && l.ramp.is_none() && !traces {
            self.errors.push(self.loc.error_at_span(
                self.loc.span(&[Seg::Key("load".into())]),
                "load",
                "a point needs an end: set `duration`, `requests` or both (whichever ends first)",
                Some("e.g. duration = \"60s\"".into()),
            ));
        }
        if l.duration.is_some_and(|d| d.is_zero()) {
            self.err("load.duration", "expected a duration > 0, found 0s", None);
        }
        if let Some(r) = &l.ramp {
            if l.duration.is_some() {
                self.key_err(
                    "load.duration",
                    "a ramp sets the duration itself (steps x every); remove `duration`",
                    None,
                );
            }
            if r.every.is_zero() {
                self.err(
                    "load.ramp.every",
                    "expected a step length > 0, found 0s",
                    None,
                );
            }
            self.ramp_levels(r);
        }
        let search = l.search.as_ref().and_then(|s| self.search(s, &l));
        let t = l.timeouts.unwrap_or_default();
        let timeouts = Timeouts {
            connect: t.connect.unwrap_or(Duration::from_secs(10)),
            first_token: t.first_token.unwrap_or(Duration::from_secs(60)),
            idle: t.idle.unwrap_or(Duration::from_secs(30)),
            total: t.total.unwrap_or(Duration::from_secs(600)),
        };
        for (key, d) in [
            ("connect", timeouts.connect),
            ("first_token", timeouts.first_token),
            ("idle", timeouts.idle),
            ("total", timeouts.total),
        ] {
            if d.is_zero() {
                self.err(
                    &format!("load.timeouts.{key}"),
                    "expected a timeout > 0, found 0s",
                    None,
                );
            }
        }
        let limits = self.limits(l.limits.unwrap_or_default());
        let window = l.window.unwrap_or(Duration::from_secs(10));
        if window.is_zero() {
            self.err("load.window", "expected a window > 0, found 0s", None);
        }
        LoadDefaults {
            arrival: l.arrival,
            burstiness,
            concurrency: l.concurrency,
            rate: l.rate,
            max_concurrency: l.max_concurrency,
            ramp: l.ramp,
            search,
            warmup: match (l.warmup, l.warmup_requests) {
                (Some(d), _) if !d.is_zero() => Warmup::Time(d),
                (_, Some(n)) if n > 0 => Warmup::Requests(n),
                _ => Warmup::None,
            },
            duration: l.duration,
            requests: l.requests,
            runs: l.runs.unwrap_or(1).max(1),
            window,
            timeouts,
            limits,
            cold_connections: l.cold_connections.unwrap_or(false),
            reset_cache: l.reset_cache.unwrap_or_default(),
        }
    }

    /// `[load] search`, checked against the rest of `[load]`; `None` on
    /// error. Whether the spec has the SLOs or goodput bounds its target
    /// reads is checked once those are compiled (`search_target`).
    fn search(&mut self, s: &RawSearch, l: &RawLoad) -> Option<Search> {
        let errors = self.errors.len();
        if l.ramp.is_some() {
            self.key_err(
                "load.ramp",
                "a search sets the level of each probe itself; give either `ramp` or `search`, not both",
                None,
            );
        }
        for (key, set) in [
            ("load.rate", l.rate.is_some()),
            ("load.concurrency", l.concurrency.is_some()),
        ] {
            if set {
                self.key_err(
                    key,
                    "a search sets the level of each probe itself (from `from` to `to`)",
                    Some(format!("remove `{}`", &key[5..])),
                );
            }
        }
        let fits = |v: &RawLevel| {
            matches!(
                (s.over, v),
                (SearchOver::Rate, RawLevel::Rate(_))
                    | (SearchOver::Concurrency, RawLevel::Concurrency(_))
            )
        };
        let example = match s.over {
            SearchOver::Rate => "a rate such as \"2/s\"",
            SearchOver::Concurrency => "a concurrency (a whole number)",
        };
        for (key, v) in [("from", &s.from), ("to", &s.to)] {
            if !fits(v) {
                self.err(
                    &format!("load.search.{key}"),
                    format!(
                        "a search over {} needs {example}, found {}",
                        s.over.name(),
                        level_text(v)
                    ),
                    None,
                );
            }
        }
        let value = |v: &RawLevel| match v {
            RawLevel::Concurrency(c) => *c as f64,
            RawLevel::Rate(r) => r.as_per_second(),
        };
        if fits(&s.from) && fits(&s.to) && value(&s.to) <= value(&s.from) {
            self.err(
                "load.search.to",
                format!(
                    "expected a level above from ({}), found {}",
                    level_text(&s.from),
                    level_text(&s.to)
                ),
                None,
            );
        }
        if let RawLevel::Concurrency(c) = s.to {
            if c > crate::limits::MAX_CONCURRENCY {
                self.err(
                    "load.search.to",
                    format!(
                        "expected a concurrency of at most {}, found {c}",
                        crate::limits::MAX_CONCURRENCY
                    ),
                    None,
                );
            }
        }
        let precision = s.precision.unwrap_or(Percent::new(5.0).expect("valid"));
        if !(precision.value() >= 0.1 && precision.value() <= 100.0) {
            self.err(
                "load.search.precision",
                format!("expected a percentage in [0.1%, 100%], found {precision}"),
                None,
            );
        }
        let target = match s.target.as_deref().map(str::parse::<SearchTarget>) {
            None => SearchTarget::Slo,
            Some(Ok(t)) => t,
            Some(Err(e)) => {
                self.err("load.search.target", e.to_string(), None);
                SearchTarget::Slo
            }
        };
        let level = |v: &RawLevel| match v {
            RawLevel::Concurrency(c) => Level::Concurrency(*c),
            RawLevel::Rate(r) => Level::Rate(*r),
        };
        (self.errors.len() == errors).then(|| Search {
            over: s.over,
            from: level(&s.from),
            to: level(&s.to),
            target,
            precision,
        })
    }

    /// A search's target needs something to read: SLOs, or goodput bounds.
    pub(super) fn search_target(&mut self, load: &LoadDefaults, slo: bool, goodput: bool) {
        match load.search.as_ref().map(|s| s.target) {
            Some(SearchTarget::Slo) if !slo => self.err(
                "load.search",
                "target = \"slo\" (the default) needs SLOs, and the spec has no [slo] table",
                Some(
                    "add [slo] gates, or set target = \"goodput >= 95%\" with [goodput] bounds"
                        .into(),
                ),
            ),
            Some(SearchTarget::Goodput(_)) if !goodput => self.err(
                "load.search.target",
                "a goodput target needs per-request bounds, and the spec has no [goodput] table",
                Some("add [goodput] with ttft, tpot or e2e bounds".into()),
            ),
            _ => {}
        }
    }

    /// `[load.limits]`: each at least 1 and at most [`Limits::MAX`].
    fn limits(&mut self, l: RawLimits) -> Limits {
        let (d, top) = (Limits::DEFAULT, Limits::MAX);
        let mut check = |key: &str, v: Option<u64>, default: u64, max: u64| match v {
            None => default,
            Some(n) if (1..=max).contains(&n) => n,
            Some(n) => {
                self.err(
                    &format!("load.limits.{key}"),
                    format!("expected a number from 1 to {max}, found {n}"),
                    None,
                );
                default
            }
        };
        Limits {
            max_line_bytes: check(
                "max_line_bytes",
                l.max_line_bytes,
                d.max_line_bytes,
                top.max_line_bytes,
            ),
            max_response_bytes: check(
                "max_response_bytes",
                l.max_response_bytes,
                d.max_response_bytes,
                top.max_response_bytes,
            ),
            max_events: check("max_events", l.max_events, d.max_events, top.max_events),
            max_error_body_bytes: check(
                "max_error_body_bytes",
                l.max_error_body_bytes,
                d.max_error_body_bytes,
                top.max_error_body_bytes,
            ),
        }
    }

    /// The levels of a ramp, checked; empty on error.
    fn ramp_levels(&mut self, r: &RawRamp) -> Vec<Level> {
        let levels = ramp_levels(r);
        match levels {
            Ok(l) => l,
            Err(e) => {
                self.err(&format!("load.ramp.{}", e.key()), e.to_string(), None);
                Vec::new()
            }
        }
    }

    pub(super) fn validity(&mut self, v: RawValidity) -> Validity {
        if let Some(g) = v.max_rate_gap.filter(|g| g.value() > 100.0) {
            self.err(
                "validity.max_rate_gap",
                format!("expected a percentage in [0%, 100%], found {g}"),
                None,
            );
        }
        Validity {
            min_duration: v.min_duration.unwrap_or_default(),
            min_requests: v.min_requests.unwrap_or(1),
            max_dispatch_lag_p99: v.max_dispatch_lag_p99,
            max_rate_gap: v.max_rate_gap.unwrap_or(Percent::new(1.0).expect("valid")),
            percentile_sample_check: v.percentile_sample_check.unwrap_or(true),
        }
    }
}

/// A level as written in the spec: `4` or `"2/s"`.
fn level_text(v: &RawLevel) -> String {
    match v {
        RawLevel::Concurrency(c) => c.to_string(),
        RawLevel::Rate(r) => format!("\"{r}\""),
    }
}

/// Why a ramp has no levels.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RampError {
    #[error("`from` and `to` must both be concurrencies (numbers) or both rates (\"2/s\")")]
    MixedKinds,
    #[error(
        "the ramp goes down: to ({}) is below from ({})",
        fmt_number(*to),
        fmt_number(*from)
    )]
    GoesDown { from: f64, to: f64 },
    #[error("give either `step` (added) or `factor` (multiplied), not both")]
    StepAndFactor,
    #[error("a ramp needs `step` (added each step) or `factor` (multiplied each step)")]
    NoStep,
    #[error("`step` must be of the same kind as `from`")]
    StepKind,
    #[error("the ramp has more than 10000 steps")]
    TooManySteps,
    #[error("expected a factor > 1, found {0}")]
    Factor(f64),
    #[error("expected a concurrency of at most 100000, found {0}")]
    TooHigh(u32),
    #[error("the ramp lasts longer than 30 days (steps x every)")]
    TooLong,
}

impl RampError {
    /// The key of `[load.ramp]` that is wrong.
    pub fn key(&self) -> &'static str {
        match self {
            RampError::MixedKinds | RampError::GoesDown { .. } | RampError::TooHigh(_) => "to",
            RampError::TooLong => "every",
            RampError::StepAndFactor | RampError::Factor(_) => "factor",
            RampError::NoStep | RampError::StepKind | RampError::TooManySteps => "step",
        }
    }
}

/// Expands a ramp into its levels, or says which key is wrong and why.
pub fn ramp_levels(r: &RawRamp) -> Result<Vec<Level>, RampError> {
    let as_f = |l: &RawLevel| match l {
        RawLevel::Concurrency(c) => *c as f64,
        RawLevel::Rate(r) => r.as_per_second(),
    };
    let same_kind = |a: &RawLevel, b: &RawLevel| {
        matches!(
            (a, b),
            (RawLevel::Concurrency(_), RawLevel::Concurrency(_))
                | (RawLevel::Rate(_), RawLevel::Rate(_))
        )
    };
    if !same_kind(&r.from, &r.to) {
        return Err(RampError::MixedKinds);
    }
    let (from, to) = (as_f(&r.from), as_f(&r.to));
    if to < from {
        return Err(RampError::GoesDown { from, to });
    }
    if let RawLevel::Concurrency(c) = r.to {
        if c > crate::limits::MAX_CONCURRENCY {
            return Err(RampError::TooHigh(c));
        }
    }
    let mut levels = Vec::new();
    let mut x = from;
    let make = |x: f64| match r.from {
        RawLevel::Concurrency(_) => Level::Concurrency(x.round() as u32),
        RawLevel::Rate(_) => Level::Rate(crate::Rate::per_second(x).expect("positive")),
    };
    match (r.step, r.factor) {
        (Some(_), Some(_)) => {
            return Err(RampError::StepAndFactor);
        }
        (None, None) => {
            return Err(RampError::NoStep);
        }
        (Some(step), None) => {
            if !same_kind(&step, &r.from) {
                return Err(RampError::StepKind);
            }
            let s = as_f(&step);
            while x <= to + 1e-9 {
                levels.push(make(x));
                x += s;
                if levels.len() > crate::limits::MAX_RAMP_STEPS {
                    return Err(RampError::TooManySteps);
                }
            }
        }
        (None, Some(f)) => {
            if !(f > 1.0 && f.is_finite()) {
                return Err(RampError::Factor(f));
            }
            while x <= to + 1e-9 {
                levels.push(make(x));
                x *= f;
                if levels.len() > crate::limits::MAX_RAMP_STEPS {
                    return Err(RampError::TooManySteps);
                }
            }
        }
    }
    levels.dedup();
    let total = r.every.as_nanos().checked_mul(levels.len() as u64);
    if total.is_none_or(|t| t > crate::limits::MAX_DURATION.as_nanos()) {
        return Err(RampError::TooLong);
    }
    Ok(levels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Rate;

    fn ramp(from: RawLevel, to: RawLevel, step: Option<RawLevel>, factor: Option<f64>) -> RawRamp {
        RawRamp {
            from,
            step,
            factor,
            every: Duration::from_secs(10),
            to,
        }
    }

    /// The key at fault and the message, for a ramp that has no levels.
    fn error(r: &RawRamp) -> (String, String) {
        let e = ramp_levels(r).unwrap_err();
        (e.key().to_string(), e.to_string())
    }

    #[test]
    fn ramp_levels_expand() {
        use RawLevel::Concurrency as C;
        let levels = ramp_levels(&ramp(C(1), C(4), Some(C(1)), None)).unwrap();
        assert_eq!(levels, (1..=4).map(Level::Concurrency).collect::<Vec<_>>());
        let levels = ramp_levels(&ramp(C(1), C(8), None, Some(2.0))).unwrap();
        assert_eq!(
            levels,
            [1, 2, 4, 8].map(Level::Concurrency).to_vec(),
            "factor doubles"
        );
    }

    #[test]
    fn ramp_errors_name_their_key() {
        use RawLevel::Concurrency as C;
        let rate = |x: f64| RawLevel::Rate(Rate::per_second(x).unwrap());
        for (r, key, message) in [
            (
                ramp(C(1), rate(2.0), Some(C(1)), None),
                "to",
                "`from` and `to` must both be concurrencies (numbers) or both rates (\"2/s\")",
            ),
            (
                ramp(rate(2.5), rate(1.0), Some(rate(1.0)), None),
                "to",
                "the ramp goes down: to (1) is below from (2.5)",
            ),
            (
                ramp(C(1), C(4), Some(C(1)), Some(2.0)),
                "factor",
                "give either `step` (added) or `factor` (multiplied), not both",
            ),
            (
                ramp(C(1), C(4), None, None),
                "step",
                "a ramp needs `step` (added each step) or `factor` (multiplied each step)",
            ),
            (
                ramp(C(1), C(4), Some(rate(1.0)), None),
                "step",
                "`step` must be of the same kind as `from`",
            ),
            (
                ramp(rate(0.001), rate(100.0), Some(rate(0.001)), None),
                "step",
                "the ramp has more than 10000 steps",
            ),
            (
                ramp(C(1), C(4), None, Some(1.0)),
                "factor",
                "expected a factor > 1, found 1",
            ),
            (
                // 69 million levels before the cap; stops at the cap.
                ramp(C(1), C(1000), None, Some(1.0000001)),
                "step",
                "the ramp has more than 10000 steps",
            ),
            (
                ramp(C(1), C(200_000), Some(C(100)), None),
                "to",
                "expected a concurrency of at most 100000, found 200000",
            ),
        ] {
            assert_eq!(error(&r), (key.to_string(), message.to_string()));
        }
    }
}
