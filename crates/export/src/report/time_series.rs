//! Time series found in a point's telemetry, which the results format
//! keeps as free-form JSON. Rather than depend on one layout, this looks
//! for samples wherever they are: arrays of objects that carry a time
//! field (`t_s`, `time_ms`, `elapsed_s`...), or objects of parallel arrays
//! with one for time. Fields named like utilization, memory or power
//! become series, in %, GiB and W. Anything else is ignored; a layout this
//! does not recognise just draws nothing. Missing samples (`null`) are
//! gaps in the line.

use serde_json::{Map, Value};

/// What a series measures; one chart per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Utilization,
    Memory,
    Power,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Utilization, Kind::Memory, Kind::Power];

    pub fn title(self) -> &'static str {
        match self {
            Kind::Utilization => "GPU utilization",
            Kind::Memory => "GPU memory used",
            Kind::Power => "GPU power",
        }
    }

    pub fn axis(self) -> &'static str {
        match self {
            Kind::Utilization => "utilization (%)",
            Kind::Memory => "memory used (GiB)",
            Kind::Power => "power (W)",
        }
    }
}

/// One series: where it was found and its (seconds, value) samples.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeSeries {
    /// Path to the samples and the field: "gpus[0].samples.power_w".
    pub name: String,
    pub kind: Kind,
    /// Seconds since the first sample, and the value in the kind's unit.
    pub points: Vec<(f64, f64)>,
}

/// At most this many series are taken from one point.
const MAX_SERIES: usize = 32;
const MAX_DEPTH: usize = 8;

/// The factor from a time field's unit to seconds, if `key` names time.
fn time_scale(key: &str) -> Option<f64> {
    let k = key.to_ascii_lowercase();
    let base = ["t", "ts", "time", "timestamp", "elapsed", "offset", "at"];
    let (stem, scale) = if let Some(s) = k.strip_suffix("_ns") {
        (s, 1e-9)
    } else if let Some(s) = k.strip_suffix("_us") {
        (s, 1e-6)
    } else if let Some(s) = k.strip_suffix("_ms") {
        (s, 1e-3)
    } else if let Some(s) = k.strip_suffix("_s") {
        (s, 1.0)
    } else {
        (k.as_str(), 1.0)
    };
    base.contains(&stem).then_some(scale)
}

/// The kind of a value field and the factor to its unit.
fn classify(key: &str, values: &[f64]) -> Option<(Kind, f64)> {
    let k = key.to_ascii_lowercase();
    if k.contains("util") || k.contains("busy") {
        let scale = if k.contains("pct") || k.contains("percent") {
            1.0
        } else if k.contains("frac") || k.contains("ratio") {
            100.0
        } else if values.iter().filter(|v| v.is_finite()).all(|v| *v <= 1.0) {
            // Unitless: a fraction if it never exceeds 1.
            100.0
        } else {
            1.0
        };
        return Some((Kind::Utilization, scale));
    }
    if k.contains("power") || k.contains("watt") {
        let scale = if k.ends_with("_mw") { 1e-3 } else { 1.0 };
        return Some((Kind::Power, scale));
    }
    if k.contains("mem") && !k.contains("clock") && !k.contains("temp") {
        let scale = if k.ends_with("bytes") || k.ends_with("_b") {
            1.0 / (1u64 << 30) as f64
        } else if k.ends_with("mib") || k.ends_with("mb") {
            1.0 / 1024.0
        } else if k.ends_with("kib") || k.ends_with("kb") {
            1.0 / (1024.0 * 1024.0)
        } else if k.ends_with("gib") || k.ends_with("gb") {
            1.0
        } else if k.contains("pct") || k.contains("percent") || k.contains("frac") {
            return None;
        } else {
            // Unitless memory: bytes if it is large.
            let big = values.iter().any(|v| *v > 1e6);
            if big { 1.0 / (1u64 << 30) as f64 } else { 1.0 }
        };
        return Some((Kind::Memory, scale));
    }
    None
}

fn push(out: &mut Vec<TimeSeries>, name: String, key: &str, times: &[f64], values: &[f64]) {
    if out.len() >= MAX_SERIES || times.len() != values.len() || times.len() < 2 {
        return;
    }
    let Some((kind, scale)) = classify(key, values) else {
        return;
    };
    let t0 = times
        .iter()
        .copied()
        .filter(|t| t.is_finite())
        .fold(f64::INFINITY, f64::min);
    // NaN values stay: they are gaps.
    let points: Vec<(f64, f64)> = times
        .iter()
        .zip(values)
        .map(|(t, v)| (t - t0, v * scale))
        .filter(|(t, _)| t.is_finite())
        .collect();
    if points.iter().filter(|(_, v)| v.is_finite()).count() >= 2 {
        let name = name
            .split('.')
            .filter(|seg| !matches!(*seg, "series" | "samples"))
            .collect::<Vec<_>>()
            .join(".");
        out.push(TimeSeries { name, kind, points });
    }
}

/// Samples as an array of objects, each with a time field.
fn rows(path: &str, items: &[Value], out: &mut Vec<TimeSeries>) -> bool {
    let Some(first) = items.first().and_then(Value::as_object) else {
        return false;
    };
    let Some((tkey, scale)) = first
        .iter()
        .filter(|(_, v)| v.is_number())
        .find_map(|(k, _)| time_scale(k).map(|s| (k.clone(), s)))
    else {
        return false;
    };
    let fields: Vec<&String> = first
        .iter()
        .filter(|(k, v)| v.is_number() && **k != tkey)
        .map(|(k, _)| k)
        .collect();
    let mut times = Vec::new();
    let mut cols: Vec<Vec<f64>> = vec![Vec::new(); fields.len()];
    for item in items {
        let Some(obj) = item.as_object() else {
            continue;
        };
        let Some(t) = obj.get(&tkey).and_then(Value::as_f64) else {
            continue;
        };
        times.push(t * scale);
        for (col, f) in cols.iter_mut().zip(&fields) {
            col.push(obj.get(*f).and_then(Value::as_f64).unwrap_or(f64::NAN));
        }
    }
    for (f, col) in fields.iter().zip(&cols) {
        push(out, join(path, f), f, &times, col);
    }
    true
}

/// Samples as parallel arrays in one object, one of them time.
fn columns(path: &str, obj: &Map<String, Value>, out: &mut Vec<TimeSeries>) -> bool {
    // An array of numbers, `null` standing for a missing sample.
    let numbers = |v: &Value| -> Option<Vec<f64>> {
        let a = v.as_array()?;
        (a.len() >= 2 && a.iter().any(Value::is_number)).then_some(())?;
        a.iter()
            .map(|x| match x {
                Value::Null => Some(f64::NAN),
                other => other.as_f64(),
            })
            .collect()
    };
    let Some((tkey, times)) = obj.iter().find_map(|(k, v)| {
        let s = time_scale(k)?;
        Some((
            k,
            numbers(v)?.into_iter().map(|t| t * s).collect::<Vec<_>>(),
        ))
    }) else {
        return false;
    };
    for (k, v) in obj.iter().filter(|(k, _)| *k != tkey) {
        if let Some(vals) = numbers(v) {
            push(out, join(path, k), k, &times, &vals);
        }
    }
    true
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn walk(path: &str, v: &Value, depth: usize, out: &mut Vec<TimeSeries>) {
    if depth > MAX_DEPTH || out.len() >= MAX_SERIES {
        return;
    }
    match v {
        Value::Array(items) => {
            if items.len() >= 2 && rows(path, items, out) {
                return;
            }
            for (i, item) in items.iter().enumerate().take(64) {
                walk(&format!("{path}[{i}]"), item, depth + 1, out);
            }
        }
        Value::Object(obj) => {
            if columns(path, obj, out) {
                return;
            }
            for (k, item) in obj {
                walk(&join(path, k), item, depth + 1, out);
            }
        }
        _ => {}
    }
}

/// Every utilization, memory and power time series in `telemetry`.
pub fn series(telemetry: &Value) -> Vec<TimeSeries> {
    let mut out = Vec::new();
    walk("", telemetry, 0, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_rows_of_samples_anywhere() {
        let t = json!({
            "gpus": [{
                "index": 0,
                "samples": [
                    {"t_ms": 1000, "util_pct": 50, "memory_used_bytes": 2147483648u64, "power_w": 300.5, "sm_clock_mhz": 1980},
                    {"t_ms": 1500, "util_pct": 90, "memory_used_bytes": 3221225472u64, "power_w": 420.0, "sm_clock_mhz": 1980}
                ]
            }],
            "summary": {"power_w_mean": 360.0}
        });
        let mut s = series(&t);
        s.sort_by(|a, b| a.name.cmp(&b.name));
        let names: Vec<&str> = s.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "gpus[0].memory_used_bytes",
                "gpus[0].power_w",
                "gpus[0].util_pct"
            ]
        );
        assert_eq!(s[0].kind, Kind::Memory);
        assert_eq!(s[0].points, vec![(0.0, 2.0), (0.5, 3.0)]);
        assert_eq!(s[1].points, vec![(0.0, 300.5), (0.5, 420.0)]);
        assert_eq!(s[2].kind, Kind::Utilization);
        assert_eq!(s[2].points[1], (0.5, 90.0));
    }

    #[test]
    fn finds_parallel_columns_and_scales_fractions() {
        let t = json!({"series": {"t_s": [0.0, 1.0, 2.0], "gpu_util": [0.1, 0.5, 1.0], "mem_used_mib": [1024, 2048, 2048]}});
        let s = series(&t);
        assert_eq!(s.len(), 2);
        let util = s.iter().find(|x| x.kind == Kind::Utilization).unwrap();
        assert_eq!(util.points, vec![(0.0, 10.0), (1.0, 50.0), (2.0, 100.0)]);
        let mem = s.iter().find(|x| x.kind == Kind::Memory).unwrap();
        assert_eq!(mem.points[1], (1.0, 2.0));
    }

    #[test]
    fn reads_the_typed_telemetry_layout_with_gaps() {
        // results' PointTelemetry: per-device parallel series, null where
        // a sample failed, beside summary statistics.
        let t = json!({
            "runs": [{"run": 0, "start_s": 0.0, "window_start_s": 1.0, "window_end_s": 6.0}],
            "gpu": {"status": "sampled", "interval_s": 0.1, "devices": [{
                "index": 0, "name": "NVIDIA H100 80GB HBM3",
                "stats": {"utilization_pct": {"count": 3, "mean": 60.0, "min": 0.5, "p50": 80.0, "p95": 99.0, "max": 99.0}},
                "series": {
                    "thinned_by": 1,
                    "t_s": [1.0, 1.1, 1.2, 1.3],
                    "utilization_pct": [0.5, null, 80.0, 99.0],
                    "memory_used_bytes": [1073741824.0, 2147483648.0, 2147483648.0, 2147483648.0],
                    "power_w": [100.0, 350.0, null, 690.0],
                    "energy_j": [0.0, 35.0, 70.0, 139.0],
                    "sm_clock_mhz": [1980.0, 1980.0, 1980.0, 1980.0]
                }
            }]}
        });
        let mut s = series(&t);
        s.sort_by(|a, b| a.name.cmp(&b.name));
        let names: Vec<&str> = s.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "gpu.devices[0].memory_used_bytes",
                "gpu.devices[0].power_w",
                "gpu.devices[0].utilization_pct"
            ]
        );
        let util = &s[2];
        // A percentage stays one, even when every sample is below 1.
        assert_eq!(util.points[0], (0.0, 0.5));
        assert!(util.points[1].1.is_nan(), "a gap");
        assert!((util.points[3].0 - 0.3).abs() < 1e-9);
        assert_eq!(s[0].points[1].1, 2.0);
    }

    #[test]
    fn ignores_what_it_does_not_know() {
        assert!(series(&json!(null)).is_empty());
        assert!(series(&json!({"power_w_mean": 3.0, "samples": []})).is_empty());
        assert!(series(&json!([{"a": 1}, {"a": 2}])).is_empty());
        assert!(series(&json!({"samples": [{"t_s": 0, "temperature_c": 60}, {"t_s": 1, "temperature_c": 61}]})).is_empty());
    }
}
