//! A results file is data from outside: cut short, hand-edited, written by
//! a buggy tool. Reading a damaged copy of a real results file (the
//! quickstart's, `fixtures/results-v1.json`) is one clear error that names
//! the file and the field; and whatever a run measured, what it writes
//! reads back (no `NaN` or `Infinity` written as `null` where a number
//! must be).

use std::path::{Path, PathBuf};

use infer_bench_results::Results;
use infer_bench_results::telemetry::{
    CounterSeries, GaugeSeries, PointTelemetry, SeriesStats, ServerMetrics,
};
use serde_json::{Value, json};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results-v1.json")
}

fn original() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture()).unwrap()).unwrap()
}

/// Writes `text` to a fresh file and reads it as results.
fn read_text(name: &str, text: &str) -> (PathBuf, Result<Results, String>) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("results-damaged");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let r = Results::<Value>::read(&path)
        .map(|(r, _)| r)
        .map_err(|e| e.to_string());
    (path, r)
}

/// Reads a changed copy of the fixture; the error, which must name the file.
fn error_of(name: &str, change: impl FnOnce(&mut Value)) -> String {
    let mut v = original();
    change(&mut v);
    let (path, r) = read_text(name, &serde_json::to_string_pretty(&v).unwrap());
    let err = r.expect_err(name);
    assert!(
        err.contains(&path.display().to_string()),
        "{name}: the error names the file: {err}"
    );
    assert_eq!(err.lines().count(), 1, "{name}: one line: {err}");
    err
}

#[test]
fn a_file_cut_short_says_so() {
    let text = std::fs::read_to_string(fixture()).unwrap();
    for cut in [1, 100, text.len() / 3, text.len() / 2, text.len() - 2] {
        let (path, r) = read_text("cut.json", &text[..cut]);
        let err = r.expect_err("a cut file");
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("cut short"), "at {cut}: {err}");
    }
}

#[test]
fn a_value_of_the_wrong_type_is_named_by_its_path() {
    let err = error_of("type.json", |v| {
        v["points"][0]["merged"]["window_s"] = json!("two seconds")
    });
    assert!(err.contains("points[0].merged.window_s"), "{err}");
    assert!(err.contains("expected f64"), "{err}");

    let err = error_of("type2.json", |v| {
        v["points"][2]["runs"][0]["stats"]["requests"]["sent"] = json!(-3)
    });
    assert!(
        err.contains("points[2].runs[0].stats.requests.sent"),
        "{err}"
    );
}

#[test]
fn a_missing_field_is_named_with_where_it_was_expected() {
    let err = error_of("missing.json", |v| {
        v["points"][1]["runs"][0]["stats"]
            .as_object_mut()
            .unwrap()
            .remove("requests");
    });
    assert!(err.contains("points[1].runs[0].stats"), "{err}");
    assert!(err.contains("missing field `requests`"), "{err}");
}

#[test]
fn a_null_where_a_number_must_be_is_named() {
    // What earlier versions wrote for a non-finite float.
    let err = error_of("null.json", |v| {
        v["points"][0]["merged"]["request_throughput"] = Value::Null
    });
    assert!(
        err.contains("points[0].merged.request_throughput: invalid type: null"),
        "{err}"
    );
}

#[test]
fn a_null_where_a_value_is_optional_reads_as_absent() {
    let mut v = original();
    v["points"][0]["merged"]["offered_rate"] = Value::Null;
    v["points"][0]["merged"]["tokens"]["reported_input_mean"] = Value::Null;
    let (_, r) = read_text("optional.json", &v.to_string());
    let r = r.unwrap();
    assert_eq!(r.points[0].merged.offered_rate, None);
    assert_eq!(r.points[0].merged.tokens.reported_input_mean, None);
}

#[test]
fn not_a_results_file_and_a_newer_one_are_told_apart() {
    let (_, r) = read_text("other.json", "{\"format\": \"something-else\"}");
    assert!(r.unwrap_err().contains("not an infer-bench results file"));
    let mut v = original();
    v["version"] = json!(99);
    let (_, r) = read_text("newer.json", &v.to_string());
    assert!(r.unwrap_err().contains("newer infer-bench"));
}

/// A server's metrics can say `+Inf` or `NaN`; whatever reaches a results
/// value is left out when written, and the file reads back.
#[test]
fn non_finite_values_are_never_written_and_the_file_reads_back() {
    let (mut r, _) = Results::<Value>::read(&fixture()).unwrap();
    let p = &mut r.points[0];
    p.merged.offered_rate = Some(f64::INFINITY);
    p.merged.achieved_send_rate = Some(f64::NAN);
    let mut metrics = ServerMetrics {
        url: "http://x/metrics".into(),
        interval_s: 1.0,
        t_s: vec![0.0, 1.0],
        ..Default::default()
    };
    metrics.gauges.insert(
        "vllm:num_requests_running".into(),
        GaugeSeries {
            stats: Some(SeriesStats {
                count: 2,
                mean: f64::INFINITY,
                min: 1.0,
                p50: 1.0,
                p95: f64::NAN,
                max: f64::INFINITY,
            }),
            values: vec![Some(1.0), Some(f64::INFINITY)],
        },
    );
    metrics.counters.insert(
        "vllm:prompt_tokens_total".into(),
        CounterSeries {
            delta: Some(f64::NEG_INFINITY),
            span_s: Some(1.0),
            values: vec![Some(0.0), Some(f64::NAN)],
        },
    );
    metrics.headline.prefix_cache_hit_ratio = Some(f64::NAN);
    p.telemetry = Some(PointTelemetry {
        server_metrics: Some(metrics),
        ..Default::default()
    });
    let text = r.to_json();
    assert!(!text.contains("NaN") && !text.contains("Infinity"));
    // Left out, not written as null.
    let written: Value = serde_json::from_str(&text).unwrap();
    let sm = &written["points"][0]["telemetry"]["server_metrics"];
    let stats = &sm["gauges"]["vllm:num_requests_running"]["stats"];
    assert!(
        stats.get("mean").is_none() && stats.get("max").is_none(),
        "{stats}"
    );
    assert!(written["points"][0]["merged"].get("offered_rate").is_none());
    let (_, back) = read_text("non-finite.json", &text);
    let back = back.expect("what was written reads back");
    let p = &back.points[0];
    assert_eq!(p.merged.offered_rate, None);
    assert_eq!(p.merged.achieved_send_rate, None);
    let sm = p
        .telemetry
        .as_ref()
        .unwrap()
        .server_metrics
        .as_ref()
        .unwrap();
    let g = &sm.gauges["vllm:num_requests_running"];
    let stats = g.stats.unwrap();
    assert_eq!((stats.count, stats.min, stats.p50), (2, 1.0, 1.0));
    assert_eq!(g.values, [Some(1.0), None]);
    let c = &sm.counters["vllm:prompt_tokens_total"];
    assert_eq!((c.delta, c.span_s), (None, Some(1.0)));
    assert_eq!(c.values, [Some(0.0), None]);
    assert_eq!(sm.headline.prefix_cache_hit_ratio, None);
    // Everything else is as it was.
    let (orig, _) = Results::<Value>::read(&fixture()).unwrap();
    assert_eq!(back.points[1..], orig.points[1..]);
    assert_eq!(back.points[0].runs, orig.points[0].runs);
}
