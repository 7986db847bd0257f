//! Files written by earlier versions stay readable. `fixtures/` holds a
//! results file and a baseline as infer-bench wrote them (results format 1,
//! baseline format 1); each new version of the formats must read them, as
//! outside tools depending on this crate do: with the point configuration
//! left as JSON.

use std::path::PathBuf;

use infer_bench_results::Results;
use infer_bench_results::baseline::Baseline;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn a_version_1_results_file_reads() {
    let (r, _) = Results::<serde_json::Value>::read(&fixture("results-v1.json")).unwrap();
    assert_eq!(r.version, 1);
    assert_eq!(r.spec.name, "quickstart");
    assert_eq!(r.points.len(), 6);
    let p = &r.points[0];
    assert!(p.config["model"]["name"].is_string(), "{}", p.config);
    assert!(p.merged.requests.succeeded > 0);
    // Percentiles that were not stored are recomputed from the histogram.
    let ttft = infer_bench_results::metric::Metric::Ttft;
    let p42 = "p42".parse().unwrap();
    assert!(p.value(ttft, Some(&p42)).is_some_and(|v| v > 0.0));
}

#[test]
fn a_version_1_baseline_reads() {
    let b = Baseline::<serde_json::Value>::read(&fixture("baseline-v1.json")).unwrap();
    assert_eq!((b.version, b.spec.as_str()), (1, "quickstart"));
    assert_eq!(b.points.len(), 5);
    for (id, p) in &b.points {
        assert!(id.starts_with(&p.slug), "{id}");
        assert!(!p.runs.is_empty() && !p.histograms.is_empty(), "{id}");
    }
}

#[test]
fn a_baseline_written_again_is_the_same_bytes() {
    let text = std::fs::read_to_string(fixture("baseline-v1.json")).unwrap();
    let b = Baseline::<serde_json::Value>::parse(&text).unwrap();
    let again = b.to_json();
    let first_difference = again
        .lines()
        .zip(text.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b);
    assert_eq!(first_difference, None);
    assert_eq!(again.len(), text.len());
}
