//! The sweep analysis read for people: how loads are written ("c=32",
//! "rate=4/s"), what the best configuration is best at, and one-sentence
//! readings of a capacity and a knee, for the reports. Nothing is decided
//! here (that is `decide.rs`), and nothing here reaches the analysis JSON
//! (the words the decisions store are `wording.rs`'s).

use super::decide::{BestBasis, Capacity, Knee, LoadKind};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_sig_rounds() {
        assert_eq!(round_sig(52.345, 3), 52.3);
        assert_eq!(round_sig(0.012345, 2), 0.012);
        assert_eq!(round_sig(12345.0, 2), 12000.0);
    }
}
