//! The words the decisions of the sweep analysis store in their results:
//! SLO expressions as people read them ([`expr_text`]), the notes of a
//! capacity and the reasons a knee is undefined. They reach the analysis
//! JSON, so their wording is part of its output. Plain functions of plain
//! values: this file knows none of the analysis's types, so the decisions
//! (`decide.rs`) and the exporters can both use it.

use infer_bench_spec::{SloExpr, Threshold};

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
}
