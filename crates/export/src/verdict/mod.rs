//! Exporters of the regression judge's report (`judge::compare::Report`):
//! a terminal table, Markdown for a pull-request comment or a CI step
//! summary, JUnit XML, and JSON. Each is a function from the report to
//! text; this module also holds the number formatting they share, so a
//! change reads the same everywhere.

pub mod junit;
pub mod markdown;
pub mod table;

use infer_bench_judge::compare::{GateReport, Report, Scale};
use infer_bench_results::metric::Metric;

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
    let unit = if g.within_run {
        "windows (within-run)"
    } else {
        "runs"
    };
    match g.achieved_confidence {
        Some(c) => format!("{} vs {} {unit}, {:.0}%", g.m, g.n, c * 100.0),
        None => format!("{} vs {} {unit}", g.m, g.n),
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

/// What a report's exit code means, in a few words.
pub fn exit_meaning(code: u8) -> &'static str {
    match code {
        0 => "passed",
        1 => "failed: a regression, a failed SLO or a forbidden environment mismatch",
        3 => "failed: a point could not be measured",
        4 => "failed (--strict): something could not be judged",
        _ => "failed",
    }
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
