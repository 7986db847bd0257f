//! The `[load]` section (arrivals, ends, warmup, timeouts, ramps) and the
//! `[validity]` thresholds a run must meet to count.

use super::Cx;
use crate::de::fmt_number;
use crate::diag::Seg;
use crate::model::*;
use crate::raw::*;
use crate::{Duration, Percent};

impl Cx<'_> {
    pub(super) fn load(&mut self, l: RawLoad) -> LoadDefaults {
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
        let burstiness = self.positive("load.burstiness", l.burstiness, 1.0, None);
        if l.duration.is_none() && l.requests.is_none() && l.ramp.is_none() {
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
        if l.requests == Some(0) {
            self.err(
                "load.requests",
                "expected at least 1 request, found 0",
                None,
            );
        }
        if l.runs == Some(0) {
            self.err("load.runs", "expected at least 1 run, found 0", None);
        }
        if l.concurrency == Some(0) {
            self.err(
                "load.concurrency",
                "expected a concurrency of at least 1, found 0",
                None,
            );
        }
        if l.max_concurrency == Some(0) {
            self.err("load.max_concurrency", "expected at least 1, found 0", None);
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
        Validity {
            min_duration: v.min_duration.unwrap_or_default(),
            min_requests: v.min_requests.unwrap_or(1),
            max_dispatch_lag_p99: v.max_dispatch_lag_p99,
            max_rate_gap: v.max_rate_gap.unwrap_or(Percent::new(1.0).expect("valid")),
            percentile_sample_check: v.percentile_sample_check.unwrap_or(true),
        }
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
}

impl RampError {
    /// The key of `[load.ramp]` that is wrong.
    pub fn key(&self) -> &'static str {
        match self {
            RampError::MixedKinds | RampError::GoesDown { .. } => "to",
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
                if levels.len() > 10_000 {
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
            }
        }
    }
    levels.dedup();
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
        ] {
            assert_eq!(error(&r), (key.to_string(), message.to_string()));
        }
    }
}
