//! The simulator against published measurements of real servers.
//!
//! Every row of `tests/specs/calibration/rows.toml` names a spec in that
//! folder (one point, in virtual time, on the profile of the engine that
//! was measured, with only the settings the source states), the metric the
//! source published and its value. This test runs each spec with the
//! release binary, renders the table `docs/simulator.md` keeps between its
//! calibration markers, and fails when the committed table differs from
//! what the simulator gives now (`INFER_BENCH_BLESS=1` rewrites it), when
//! fewer than 80% of the rows are within 1.25x of the published figure, or
//! when any row is off by more than 2x.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;

const BEGIN: &str = "<!-- calibration table: written by tests/calibration.rs -->";
const END: &str = "<!-- end of calibration table -->";

/// Within this factor a row counts as matching.
const CLOSE: f64 = 1.25;
/// No row may be further off than this.
const WORST: f64 = 2.0;
/// At least this share of the rows must be close.
const SHARE: f64 = 0.8;

#[derive(Deserialize)]
struct Rows {
    row: Vec<Row>,
    sources: BTreeMap<String, Source>,
}

#[derive(Deserialize)]
struct Row {
    id: String,
    engine: String,
    metric: String,
    published: f64,
    /// The published figure is this spec's metric over that spec's.
    #[serde(default)]
    relative_to: Option<String>,
    source: String,
    setting: String,
    /// Why the row is off, when it is.
    #[serde(default)]
    note: Option<String>,
}

#[derive(Deserialize)]
struct Source {
    title: String,
    url: String,
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/specs/calibration")
}

/// Runs one calibration spec; its only point.
fn point(id: &str) -> Value {
    let out = tempfile::tempdir().unwrap();
    let spec = dir().join(format!("{id}.toml"));
    let o = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .args(["run", "-q", "--out"])
        .arg(out.path())
        .arg(&spec)
        .output()
        .unwrap();
    // Exit 1 is a point that failed its SLOs or is INVALID (too few
    // requests for a percentile): the numbers are still the numbers.
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{id}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(out.path().join("results.json")).unwrap();
    let mut results: Value = serde_json::from_str(&text).unwrap();
    let points = results["points"].as_array_mut().unwrap();
    assert_eq!(points.len(), 1, "{id}: one point per calibration spec");
    assert_eq!(points[0]["clock"], "virtual", "{id}: runs in virtual time");
    assert_eq!(points[0]["merged"]["requests"]["failed"], 0, "{id}");
    points.remove(0)
}

/// A metric of a point: `output_tokens_per_s`, or `SERIES_STAT_ms` of a
/// latency series (`ttft_mean_ms`, `tpot_p50_ms`, ...).
fn metric(p: &Value, name: &str) -> f64 {
    let m = &p["merged"];
    if name == "output_tokens_per_s" {
        return m[name].as_f64().unwrap();
    }
    let rest = name
        .strip_suffix("_ms")
        .expect("a latency metric ends in _ms");
    let (series, stat) = rest.rsplit_once('_').unwrap();
    m["latency_ms"][series][stat]
        .as_f64()
        .unwrap_or_else(|| panic!("no {series} {stat} in {}", p["id"]))
}

fn number(x: f64) -> String {
    if x >= 1000.0 {
        format!("{x:.0}")
    } else if x >= 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn unit(metric: &str) -> &'static str {
    if metric.ends_with("_ms") {
        "ms"
    } else {
        "tok/s"
    }
}

fn label(metric: &str, relative: bool) -> String {
    if relative {
        return "output tok/s gain".into();
    }
    if metric == "output_tokens_per_s" {
        return "output tok/s".into();
    }
    let rest = metric.strip_suffix("_ms").unwrap();
    let (series, stat) = rest.rsplit_once('_').unwrap();
    format!("{} {stat}", series.to_uppercase())
}

#[test]
fn the_simulator_matches_published_measurements() {
    let rows: Rows =
        toml::from_str(&std::fs::read_to_string(dir().join("rows.toml")).unwrap()).unwrap();
    let mut points: BTreeMap<String, Value> = BTreeMap::new();
    for r in &rows.row {
        for id in std::iter::once(&r.id).chain(r.relative_to.as_ref()) {
            if !points.contains_key(id) {
                points.insert(id.clone(), point(id));
            }
        }
    }
    let keys: Vec<&String> = rows.sources.keys().collect();
    let mut table = String::new();
    table.push_str(BEGIN);
    table.push_str(
        "\n\n| # | engine | setting | metric | published | simulated | ratio |\n|---|---|---|---|---|---|---|\n",
    );
    let (mut close, mut worst, mut worst_row) = (0usize, 1.0f64, String::new());
    let mut off = Vec::new();
    for (i, r) in rows.row.iter().enumerate() {
        let mut simulated = metric(&points[&r.id], &r.metric);
        if let Some(base) = &r.relative_to {
            simulated /= metric(&points[base], &r.metric);
        }
        let ratio = simulated / r.published;
        let factor = ratio.max(1.0 / ratio);
        if factor <= CLOSE {
            close += 1;
        } else {
            off.push((i + 1, r, factor));
        }
        if factor > worst {
            (worst, worst_row) = (factor, r.id.clone());
        }
        let s = keys
            .iter()
            .position(|k| **k == r.source)
            .unwrap_or_else(|| panic!("{}: unknown source {}", r.id, r.source))
            + 1;
        let unit = if r.relative_to.is_some() {
            "x"
        } else {
            unit(&r.metric)
        };
        table.push_str(&format!(
            "| {} | {} | {} [[S{s}]](#calibration-sources) | {} | {} {unit} | {} {unit} | {:.2}{} |\n",
            i + 1,
            r.engine,
            r.setting,
            label(&r.metric, r.relative_to.is_some()),
            number(r.published),
            number(simulated),
            ratio,
            if factor > CLOSE { " ✗" } else { "" },
        ));
    }
    let n = rows.row.len();
    table.push_str(&format!(
        "\n{close} of {n} rows ({:.0}%) are within {CLOSE}x of the published figure; the furthest is {worst:.2}x off (`{worst_row}`). Ratio: simulated / published; for a latency below 1 the simulator is faster, for a throughput above 1.\n",
        100.0 * close as f64 / n as f64
    ));
    if !off.is_empty() {
        table.push_str(&format!("\nRows outside {CLOSE}x, and why:\n\n"));
        for (i, r, factor) in &off {
            table.push_str(&format!(
                "- {i} ({factor:.2}x): {}\n",
                r.note.as_deref().unwrap_or("not explained yet")
            ));
        }
    }
    table.push_str("\n<a id=\"calibration-sources\"></a>Sources:\n\n");
    for (k, s) in rows.sources.values().enumerate() {
        table.push_str(&format!("- S{}: {}, <{}>\n", k + 1, s.title, s.url));
    }
    table.push('\n');
    table.push_str(END);

    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/simulator.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let (start, end) = (
        doc.find(BEGIN)
            .expect("docs/simulator.md has the table's start marker"),
        doc.find(END)
            .expect("docs/simulator.md has the table's end marker")
            + END.len(),
    );
    if std::env::var_os("INFER_BENCH_BLESS").is_some() {
        let new = format!("{}{table}{}", &doc[..start], &doc[end..]);
        std::fs::write(&doc_path, new).unwrap();
    } else {
        assert_eq!(
            &doc[start..end],
            table,
            "docs/simulator.md's calibration table is stale: run INFER_BENCH_BLESS=1 cargo test --release --test calibration"
        );
    }
    for (i, r, _) in &off {
        assert!(
            r.note.is_some(),
            "row {i} ({}) is outside {CLOSE}x and rows.toml says nothing of why",
            r.id
        );
    }
    assert!(
        close as f64 >= SHARE * n as f64,
        "only {close} of {n} rows within {CLOSE}x"
    );
    assert!(worst <= WORST, "{worst_row} is {worst:.2}x off");
}
