//! Files written by earlier versions stay readable. `fixtures/` holds a
//! results file and a baseline as infer-bench wrote them (results format 1,
//! baseline format 1), and one point's results as versions 4 (reasons as
//! strings) and 5 (typed reasons) wrote them (`reasons.toml`); each new
//! version of the formats must read them, as outside tools depending on
//! this crate do: with the point configuration left as JSON.

use std::path::PathBuf;

use infer_bench_results::baseline::Baseline;
use infer_bench_results::{Reason, ReasonKind, Results};

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
    // Its reasons were strings: they read as reasons of kind `other`.
    let invalid = r.points.iter().find(|p| !p.valid).unwrap();
    assert_eq!(
        invalid.invalid_reasons,
        [Reason::other(
            "the client itself was late: dispatch lag p99 2.255 ms is above the 1ms budget"
        )]
    );
}

/// Version 4 wrote reasons and warnings as strings: each reads as a
/// reason of kind `other`, its message the string, with no fix.
#[test]
fn a_version_4_results_file_reads_its_reasons_as_other() {
    let (r, _) = Results::<serde_json::Value>::read(&fixture("results-v4.json")).unwrap();
    assert_eq!(r.version, 4);
    let p = &r.points[0];
    assert!(!p.valid);
    assert_eq!(
        p.invalid_reasons,
        [
            Reason::other("12 requests measured, below the minimum 50"),
            Reason::other(
                "p99 of ttft needs at least 459 samples to mean something (MLPerf's early-stopping bound); this point has 12"
            ),
        ]
    );
    assert_eq!(
        p.warnings,
        [Reason::other(
            "prompts averaged 18 tokens as the server counts them against 8 requested (+125%); the chat template adds tokens"
        )]
    );
    assert!(p.invalid_reasons.iter().all(|r| r.fix.is_none()));
}

/// Version 5 writes each reason's kind and fix beside its message; the
/// same run's messages are the words version 4 wrote.
#[test]
fn a_version_5_results_file_reads_typed_reasons() {
    let (r, _) = Results::<serde_json::Value>::read(&fixture("results-v5.json")).unwrap();
    assert_eq!(r.version, 5);
    let p = &r.points[0];
    let kinds = |rs: &[Reason]| rs.iter().map(|r| r.kind).collect::<Vec<_>>();
    assert_eq!(
        kinds(&p.invalid_reasons),
        [ReasonKind::TooFewRequests, ReasonKind::TooFewSamples]
    );
    assert_eq!(kinds(&p.warnings), [ReasonKind::PromptLengths]);
    assert_eq!(
        p.invalid_reasons[0].fix.as_deref(),
        ReasonKind::TooFewRequests.fix()
    );
    let (v4, _) = Results::<serde_json::Value>::read(&fixture("results-v4.json")).unwrap();
    let messages = |rs: &[Reason]| rs.iter().map(|r| r.message.clone()).collect::<Vec<_>>();
    assert_eq!(
        messages(&p.invalid_reasons),
        messages(&v4.points[0].invalid_reasons)
    );
    assert_eq!(messages(&p.warnings), messages(&v4.points[0].warnings));
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
