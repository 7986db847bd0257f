//! Blessing: which points of a run may become a baseline, and how they
//! enter the file (`infer_bench_results::baseline`, the format itself).
//! A baseline holds at most one point per slug: blessing a point whose
//! configuration changed replaces the old entry.

use infer_bench_results::{Environment, PointStatus, ToolInfo};
use infer_bench_spec::plan::PointConfig;
use infer_bench_spec::results::{PointResult, Results};

pub use infer_bench_results::baseline::{
    BaselineRun, FORMAT, VERSION, VERSION_WITH_SEARCHES, VERSION_WITHOUT_SEARCHES,
};
use infer_bench_results::search::{SearchOutcome, SearchResult};
use std::collections::BTreeSet;

/// A baseline whose points carry their compiled configuration.
pub type Baseline = infer_bench_results::baseline::Baseline<PointConfig>;
/// One point of a baseline, with its compiled configuration.
pub type BaselinePoint = infer_bench_results::baseline::BaselinePoint<PointConfig>;

/// Why `bless` refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BlessError {
    #[error(
        "no point of the results matches \"{selector}\"; the results hold: {}",
        available.join(", ")
    )]
    NoMatch {
        selector: String,
        available: Vec<String>,
    },
    #[error(
        "refusing to bless {} point(s) that cannot be baselines:\n{}\nhint: re-run them, or leave them out with --points",
        refused.len(),
        refused.iter().map(|(id, why)| format!("  {id}: {why}")).collect::<Vec<_>>().join("\n")
    )]
    Refused { refused: Vec<(String, String)> },
    #[error("the results hold no finished point to bless")]
    Empty,
    #[error(
        "the baseline belongs to spec \"{baseline}\", the results to \"{results}\"\nhint: pass --baseline with another file, or delete the old one"
    )]
    OtherSpec { baseline: String, results: String },
    #[error(
        "the results follow metric definitions version {results}, the baseline version {baseline}\nhint: bless every point again (or start a new baseline file)"
    )]
    MetricsVersion { baseline: u32, results: u32 },
}

/// What a bless did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blessed {
    /// IDs written.
    pub written: Vec<String>,
    /// IDs removed because a blessed point with the same slug but another
    /// configuration took their place.
    pub superseded: Vec<String>,
    /// Points already there and left as they were.
    pub kept: usize,
}

/// Blessing results into a baseline.
pub trait Bless {
    /// Writes the selected points of `results` into the baseline (all
    /// points when `selectors` is empty; otherwise IDs, slugs or slug
    /// prefixes ending in `*`, as `--only` takes them), replacing any entry with the same
    /// slug and keeping the others. Refuses, changing nothing, when a
    /// selected point failed or is INVALID, when a selector matches
    /// nothing, or when the results come from another spec or metric
    /// definitions. `now` becomes `recorded_at`.
    fn bless(
        &mut self,
        results: &Results,
        selectors: &[String],
        now: &str,
    ) -> Result<Blessed, BlessError>;
}

impl Bless for Baseline {
    fn bless(
        &mut self,
        results: &Results,
        selectors: &[String],
        now: &str,
    ) -> Result<Blessed, BlessError> {
        if !self.points.is_empty() && self.spec != results.spec.name {
            return Err(BlessError::OtherSpec {
                baseline: self.spec.clone(),
                results: results.spec.name.clone(),
            });
        }
        if !self.points.is_empty() && self.metrics_version != results.metrics_version {
            return Err(BlessError::MetricsVersion {
                baseline: self.metrics_version,
                results: results.metrics_version,
            });
        }
        let matches = |p: &PointResult, s: &str| infer_bench_spec::plan::selects(s, &p.id, &p.slug);
        let search_matches =
            |x: &SearchResult, s: &str| infer_bench_spec::plan::selects(s, &x.id, &x.slug);
        // A capacity search is blessed as a whole, by its answer: its
        // probes are not baseline points (the next search may probe other
        // levels, and a failing probe is what a search is for).
        let probes: BTreeSet<&str> = results
            .searches
            .iter()
            .flat_map(|x| x.probes.iter().map(|p| p.id.as_str()))
            .collect();
        for s in selectors {
            if !results.points.iter().any(|p| matches(p, s))
                && !results.searches.iter().any(|x| search_matches(x, s))
            {
                return Err(BlessError::NoMatch {
                    selector: s.clone(),
                    available: results
                        .points
                        .iter()
                        .map(|p| p.id.clone())
                        .chain(results.searches.iter().map(|x| x.id.clone()))
                        .collect(),
                });
            }
        }
        let chosen: Vec<&PointResult> = results
            .points
            .iter()
            .filter(|p| !probes.contains(p.id.as_str()))
            .filter(|p| selectors.is_empty() || selectors.iter().any(|s| matches(p, s)))
            .collect();
        let searches: Vec<&SearchResult> = results
            .searches
            .iter()
            .filter(|x| selectors.is_empty() || selectors.iter().any(|s| search_matches(x, s)))
            .collect();
        if chosen.is_empty() && searches.is_empty() {
            return Err(BlessError::Empty);
        }
        let mut refused: Vec<(String, String)> = searches
            .iter()
            .filter(|x| x.outcome == SearchOutcome::Unfinished)
            .map(|x| (x.id.clone(), "the search did not finish".to_string()))
            .collect();
        refused.extend(
            chosen
                .iter()
                .filter_map(|p| refusal(p).map(|why| (p.id.clone(), why))),
        );
        if !refused.is_empty() {
            return Err(BlessError::Refused { refused });
        }
        let mut written = Vec::new();
        let mut superseded = Vec::new();
        for p in chosen {
            let old: Vec<String> = self
                .points
                .iter()
                .filter(|(id, b)| b.slug == p.slug && **id != p.id)
                .map(|(id, _)| id.clone())
                .collect();
            for id in old {
                self.points.remove(&id);
                superseded.push(id);
            }
            self.points
                .insert(p.id.clone(), entry(p, &results.environment));
            written.push(p.id.clone());
        }
        for x in searches {
            self.searches.insert(x.slug.clone(), x.clone());
            written.push(x.id.clone());
        }
        self.format = FORMAT.into();
        self.version = if self.points.values().any(|p| p.quality.is_some()) {
            VERSION
        } else if !self.searches.is_empty() {
            VERSION_WITH_SEARCHES
        } else {
            VERSION_WITHOUT_SEARCHES
        };
        self.metrics_version = results.metrics_version;
        self.spec = results.spec.name.clone();
        self.tool = ToolInfo::current();
        self.recorded_at = now.into();
        Ok(Blessed {
            kept: (self.points.len() + self.searches.len()).saturating_sub(written.len()),
            written,
            superseded,
        })
    }
}

/// The baseline entry of a finished point.
pub fn entry(p: &PointResult, global: &Environment) -> BaselinePoint {
    BaselinePoint {
        slug: p.slug.clone(),
        hash: p.hash.clone(),
        axes: p.axes.clone(),
        config: p.config.clone(),
        environment: super::fingerprint::point_environment(global, p),
        runs: p
            .runs
            .iter()
            .map(|r| BaselineRun {
                run: r.run,
                stats: r.stats.clone(),
                windows: r.windows.clone(),
            })
            .collect(),
        merged: p.merged.clone(),
        histograms: p.histograms.clone(),
        quality: p.quality.clone(),
    }
}

/// Why a point cannot be a baseline, if it cannot.
pub fn refusal(p: &PointResult) -> Option<String> {
    if p.status == PointStatus::Failed {
        return Some(format!(
            "failed ({})",
            p.failure.as_deref().unwrap_or("it could not be measured")
        ));
    }
    if !p.valid {
        return Some(format!(
            "INVALID ({})",
            infer_bench_results::reason::join(&p.invalid_reasons, "; ")
        ));
    }
    if p.runs.is_empty() {
        return Some("no run finished".into());
    }
    None
}

/// The baseline schema as committed: `schemas/baseline.schema.json`.
pub fn schema_text() -> String {
    infer_bench_results::baseline::schema_text::<PointConfig>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_testkit::fixtures::{plan, point, results};

    fn blessed() -> (Baseline, Results) {
        let (_, plan) = plan(16, "");
        let r = results(vec![point(
            &plan,
            &[100.0, 101.0, 102.0],
            &[&[99.0, 101.0]],
        )]);
        let mut b = Baseline::new("unit");
        b.bless(&r, &[], "2026-01-02T03:04:05Z").unwrap();
        (b, r)
    }

    #[test]
    fn round_trips_byte_for_byte() {
        let (b, _) = blessed();
        let text = b.to_json();
        let back = Baseline::parse(&text).unwrap();
        assert_eq!(back, b);
        assert_eq!(back.to_json(), text);
        // Through the file system too (atomic write, read).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/base.json");
        b.write(&path).unwrap();
        let again = Baseline::read(&path).unwrap();
        again.write(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }

    /// Keys sorted at every level, one timestamp, no per-run clocks.
    #[test]
    fn layout_is_stable() {
        let (b, _) = blessed();
        let text = b.to_json();
        assert_eq!(text.matches("recorded_at").count(), 1);
        assert!(!text.contains("started_at"), "run start times are left out");
        let top: Vec<usize> = [
            "\"format\"",
            "\"metrics_version\"",
            "\"points\"",
            "\"recorded_at\"",
            "\"spec\"",
            "\"tool\"",
            "\"version\"",
        ]
        .iter()
        .map(|k| text.find(k).unwrap_or_else(|| panic!("{k}")))
        .collect();
        assert!(top.windows(2).all(|w| w[0] < w[1]), "{top:?}");
        fn check(v: &serde_json::Value) {
            if let Some(map) = v.as_object() {
                let keys: Vec<&String> = map.keys().collect();
                let mut sorted = keys.clone();
                sorted.sort();
                assert_eq!(keys, sorted);
                map.values().for_each(check);
            } else if let Some(items) = v.as_array() {
                items.iter().for_each(check);
            }
        }
        check(&serde_json::from_str(&text).unwrap());
        assert!(text.ends_with("}\n"));
    }

    #[test]
    fn blessing_keeps_others_and_replaces_a_changed_configuration() {
        let (mut b, _) = blessed();
        let old_id = b.points.keys().next().unwrap().clone();
        // Another point, kept when the first is re-blessed.
        let (_, p16) = plan(16, "");
        let mut other = point(&p16, &[50.0; 3], &[]);
        other.slug = "other".into();
        other.id = "other-12345678".into();
        b.bless(&results(vec![other]), &[], "2026-01-03T00:00:00Z")
            .unwrap();
        assert_eq!(b.points.len(), 2);
        // The first point with a new configuration: same slug, new ID.
        let (_, p24) = plan(24, "");
        let changed = results(vec![point(&p24, &[120.0; 3], &[])]);
        let done = b.bless(&changed, &[], "2026-01-04T00:00:00Z").unwrap();
        assert_eq!(done.superseded, vec![old_id.clone()]);
        assert_eq!(done.kept, 1);
        assert_eq!(b.points.len(), 2);
        assert!(!b.points.contains_key(&old_id));
        assert!(b.points.contains_key("other-12345678"));
        assert_eq!(b.recorded_at, "2026-01-04T00:00:00Z");
    }

    #[test]
    fn refuses_invalid_failed_and_unknown_points_changing_nothing() {
        let (_, plan) = plan(16, "");
        let mut bad = point(&plan, &[100.0; 3], &[]);
        bad.valid = false;
        bad.invalid_reasons = vec![infer_bench_results::Reason::new(
            infer_bench_results::ReasonKind::TooFewRequests,
            "3 requests measured, below the minimum 10",
        )];
        let mut b = Baseline::new("unit");
        let err = b
            .bless(&results(vec![bad.clone()]), &[], "now")
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("refusing to bless 1 point(s)"), "{msg}");
        assert!(msg.contains("INVALID (3 requests measured"), "{msg}");
        assert!(msg.contains("hint:"), "{msg}");
        assert!(b.points.is_empty());
        bad.status = PointStatus::Failed;
        bad.failure = Some("the server could not be started".into());
        let msg = b
            .bless(&results(vec![bad]), &[], "now")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("failed (the server could not be started)"),
            "{msg}"
        );
        let good = results(vec![point(&plan, &[100.0; 3], &[])]);
        let err = b.bless(&good, &["nope".into()], "now").unwrap_err();
        assert!(matches!(err, BlessError::NoMatch { .. }), "{err}");
        // A slug prefix selects when written as one, as --only does; a
        // bare prefix is not a name.
        let err = b.bless(&good, &["sim".into()], "now").unwrap_err();
        assert!(matches!(err, BlessError::NoMatch { .. }), "{err}");
        b.bless(&good, &["sim*".into()], "now").unwrap();
        assert_eq!(b.points.len(), 1);
    }

    #[test]
    fn refuses_results_of_another_spec() {
        let (mut b, mut r) = blessed();
        r.spec.name = "other".into();
        let err = b.bless(&r, &[], "now").unwrap_err();
        assert!(matches!(err, BlessError::OtherSpec { .. }), "{err}");
    }

    #[test]
    fn reading_checks_format_version_and_slugs() {
        let (b, _) = blessed();
        let text = b.to_json();
        use infer_bench_results::FormatError;
        let e = Baseline::parse("[]").unwrap_err();
        assert!(matches!(e, FormatError::NotOurs { .. }), "{e}");
        assert!(e.to_string().contains("not an infer-bench baseline"), "{e}");
        let newer = text.replace("\"version\": 2\n", "\"version\": 99\n");
        let e = Baseline::parse(&newer).unwrap_err();
        assert!(matches!(e, FormatError::Newer { version: 99, .. }), "{e}");
        assert!(e.to_string().contains("newer infer-bench"), "{e}");
        let mut twice = b.clone();
        let p = twice.points.values().next().unwrap().clone();
        twice.points.insert("zzz-00000000".into(), p);
        let e = Baseline::parse(&twice.to_json()).unwrap_err();
        assert!(matches!(e, FormatError::DuplicateSlug { .. }), "{e}");
        assert!(e.to_string().contains("same slug"), "{e}");
    }

    /// The committed schema is the generated one, and blessed files conform
    /// to it. To refresh: `cargo run -- schema baseline >
    /// schemas/baseline.schema.json`.
    #[test]
    fn committed_schema_is_current_and_describes_the_files() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../schemas/baseline.schema.json"
        );
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == schema_text(),
            "schemas/baseline.schema.json is stale: run `cargo run -- schema baseline > schemas/baseline.schema.json`"
        );
        let schema: serde_json::Value = serde_json::from_str(&committed).unwrap();
        let validator = jsonschema::draft7::new(&schema).unwrap();
        let (b, _) = blessed();
        let instance: serde_json::Value = serde_json::from_str(&b.to_json()).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&instance)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:?}");
    }
}
