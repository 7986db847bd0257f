//! The sweep analysis in words: SLO expressions as people read them
//! ([`expr_text`]), how loads are written ("c=32", "rate=4/s"), what the
//! best configuration is best at, one-sentence readings of a capacity and a
//! knee, and the sentences the rules store in their results (which reach
//! the analysis JSON, so their wording is part of its output). Nothing is
//! decided here: the rules live in `rules.rs`.

use infer_bench_spec::{SloExpr, Threshold};

use super::{BestBasis, Capacity, Knee, LoadKind, LoadSample};

impl LoadKind {
    /// The axis label with its unit.
    pub fn axis_label(self) -> &'static str {
        match self {
            LoadKind::Concurrency => "concurrency (requests in flight)",
            LoadKind::Rate => "offered rate (req/s)",
        }
    }
    /// How a load of this kind is written: "c=32", "rate=4/s".
    pub fn show(self, load: f64) -> String {
        match self {
            LoadKind::Concurrency => format!("c={}", infer_bench_spec::fmt_number(load)),
            LoadKind::Rate => format!("rate={}/s", infer_bench_spec::fmt_number(load)),
        }
    }
}

impl BestBasis {
    /// What the best configuration is best at, in a few words.
    pub fn describe(self) -> &'static str {
        match self {
            BestBasis::GoodRequestsPerGpuUsd => "good requests per GPU-dollar",
            BestBasis::GoodputPerGpu => "good requests/s per GPU (no cost data)",
        }
    }
}

/// An SLO expression for people and charts: durations in milliseconds,
/// the unit latencies are reported in ("p50 < 17.1ms" where the spec's
/// canonical form is "p50 < 17100us"); it parses back to the same gate.
pub fn expr_text(expr: &str) -> String {
    // A stored expression that does not parse is shown as it was written.
    let Ok(e) = expr.parse::<SloExpr>() else {
        return expr.to_string();
    };
    let t = match e.threshold {
        Threshold::Duration(d) => format!(
            "{}ms",
            infer_bench_spec::fmt_number((d.as_millis_f64() * 1e6).round() / 1e6)
        ),
        other => other.to_string(),
    };
    match e.stat {
        Some(stat) => format!("{stat} {} {t}", e.cmp.symbol()),
        None => format!("{} {t}", e.cmp.symbol()),
    }
}

/// A one-sentence reading of a capacity, loads written with `kind`.
pub fn describe_capacity(c: &Capacity, kind: LoadKind) -> String {
    let show = |l: f64| kind.show(l);
    match c {
        Capacity::NoSlo => "no SLOs to judge".into(),
        Capacity::AllPass { at_least, .. } => format!(
            "every SLO holds at every load: capacity ≥ {} (the highest tested)",
            show(*at_least)
        ),
        Capacity::NonePass { below, failing, .. } => format!(
            "fails already at the lowest load {}: capacity < {} ({})",
            show(*below),
            show(*below),
            failing.join("; ")
        ),
        Capacity::Between {
            capacity,
            last_pass,
            first_fail,
            binding,
            ..
        } => {
            let limit = binding
                .as_ref()
                .map(|b| format!(", limited by {} {}", b.metric, b.expr))
                .unwrap_or_default();
            format!(
                "capacity ≈ {} (between {} which passes and {} which fails{limit})",
                show(round_sig(*capacity, 3)),
                show(last_pass.load),
                show(first_fail.load)
            )
        }
    }
}

/// A one-sentence reading of a knee.
pub fn describe_knee(k: &Knee, kind: LoadKind) -> String {
    match k {
        Knee::Undefined { reason } => format!("no knee: {reason}"),
        Knee::NotReached {
            initial_slope,
            final_slope,
        } => format!(
            "no knee yet: the last step still gains {:.0}% of the initial throughput per unit load",
            100.0 * final_slope / initial_slope
        ),
        Knee::At {
            load,
            initial_slope,
            slope_after,
            ..
        } => format!(
            "knee at {}: beyond it each unit of load adds {:.0}% of the initial throughput per unit",
            kind.show(*load),
            100.0 * slope_after / initial_slope
        ),
    }
}

/// `x` rounded to `digits` significant digits.
pub fn round_sig(x: f64, digits: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let m = 10f64.powi(digits - 1 - x.abs().log10().floor() as i32);
    (x * m).round() / m
}

// The sentences the rules store in their results.

/// The SLOs a load level fails ("tpot p50 < 10ms"), or why it could not
/// be judged (`Capacity::NonePass::failing`).
pub(super) fn failing_slos(s: &LoadSample<'_>) -> Vec<String> {
    if !s.measured {
        return vec!["the point could not be measured".into()];
    }
    s.slo
        .iter()
        .filter(|x| !x.pass)
        .map(|x| format!("{} {}", x.metric, expr_text(&x.expr)))
        .collect()
}

/// Capacity note: the first failing point was not measured.
pub(super) fn unmeasured_failure(id: &str) -> String {
    format!("{id} could not be measured; the capacity is taken at the last passing load")
}

/// Capacity note: no failing SLO has values at both bracketing points.
pub(super) fn nothing_to_interpolate(id: &str) -> String {
    format!(
        "no failing SLO of {id} has values on both sides to interpolate; the capacity is taken at the last passing load"
    )
}

/// Capacity note: the sweep passes again above its first failure.
pub(super) fn passes_again(id: &str) -> String {
    format!("{id} passes again at a higher load; the capacity is taken below the first failure")
}

/// Why there is no knee: too few measured loads.
pub(super) fn too_few_loads(n: usize) -> String {
    format!("{n} measured load level(s); a knee needs two or more")
}

/// Why there is no knee: nothing to take the initial slope from.
pub(super) const NO_INITIAL_THROUGHPUT: &str = "no throughput at the lowest load";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_read_in_milliseconds_and_parse_back() {
        for (text, want) in [
            ("p50 < 17100us", "p50 < 17.1ms"),
            ("p99 <= 2s", "p99 <= 2000ms"),
            ("< 1%", "< 1%"),
            ("mean > 20/s", "mean > 20/s"),
        ] {
            let e: SloExpr = text.parse().unwrap();
            assert_eq!(expr_text(&e.to_string()), want);
            assert_eq!(want.parse::<SloExpr>().unwrap(), e);
        }
    }

    #[test]
    fn round_sig_rounds() {
        assert_eq!(round_sig(52.345, 3), 52.3);
        assert_eq!(round_sig(0.012345, 2), 0.012);
        assert_eq!(round_sig(12345.0, 2), 12000.0);
    }
}
