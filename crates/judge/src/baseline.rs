//! The baseline file: what `bless` writes and `diff` reads. A versioned,
//! committed JSON file (`format: "infer-bench-baseline"`, `version: 1`,
//! schema in `schemas/baseline.schema.json`) holding, per point ID, the
//! point's resolved configuration, its environment fingerprint, the
//! statistics of each run (with the run's windows, which stand in for runs
//! when a side has only one) and the merged HDR histograms, so any
//! percentile can be recomputed later.
//!
//! The layout is made for code review: keys sorted at every level, one
//! point per block, and a single timestamp (`recorded_at`); run start times
//! and other per-run clocks are left out. Writing, reading and writing
//! again gives the same bytes. A baseline holds at most one point per slug:
//! blessing a point whose configuration changed replaces the old entry.

use std::collections::BTreeMap;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use infer_bench_results::error::Error;
use infer_bench_spec::plan::PointConfig;
use infer_bench_spec::results::{
    Environment, METRICS_VERSION, PointResult, PointStatus, Results, Stats, ToolInfo, WindowStats,
    write_atomic,
};

/// The `format` of every baseline file.
pub const FORMAT: &str = "infer-bench-baseline";
/// Version of the baseline format this build writes and reads up to.
pub const VERSION: u32 = 1;

/// A baseline file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "infer-bench baseline")]
pub struct Baseline {
    /// Always "infer-bench-baseline".
    pub format: String,
    pub version: u32,
    /// Version of the metric definitions the numbers follow; baselines of
    /// another version cannot be compared.
    pub metrics_version: u32,
    /// The name of the spec the points come from.
    pub spec: String,
    /// The tool that last wrote the file.
    pub tool: ToolInfo,
    /// When the file was last written (RFC 3339, UTC): its only timestamp.
    pub recorded_at: String,
    /// The points, by point ID (`slug-hash`).
    pub points: BTreeMap<String, BaselinePoint>,
}

/// One point of a baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BaselinePoint {
    pub slug: String,
    pub hash: String,
    pub axes: BTreeMap<String, String>,
    /// The resolved configuration, as in results.
    pub config: PointConfig,
    /// The point's environment fingerprint: the run's identity keys and
    /// facts plus the point's server and simulated hardware.
    pub environment: Environment,
    /// The statistics of each run, with its windows.
    pub runs: Vec<BaselineRun>,
    /// All runs merged.
    pub merged: Stats,
    /// The merged histograms, encoded (see `hist::encode`).
    #[serde(default)]
    pub histograms: BTreeMap<String, String>,
}

/// One run of a baseline point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BaselineRun {
    pub run: u32,
    pub stats: Stats,
    #[serde(default)]
    pub windows: Vec<WindowStats>,
}

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

impl Baseline {
    /// An empty baseline for a spec.
    pub fn new(spec: &str) -> Baseline {
        Baseline {
            format: FORMAT.into(),
            version: VERSION,
            metrics_version: METRICS_VERSION,
            spec: spec.into(),
            tool: ToolInfo::current(),
            recorded_at: String::new(),
            points: BTreeMap::new(),
        }
    }

    /// The point with this slug, with its ID.
    pub fn by_slug(&self, slug: &str) -> Option<(&String, &BaselinePoint)> {
        self.points.iter().find(|(_, p)| p.slug == slug)
    }

    /// Writes the selected points of `results` into the baseline (all
    /// points when `selectors` is empty; otherwise IDs, slugs or slug
    /// prefixes, as `--only` takes them), replacing any entry with the same
    /// slug and keeping the others. Refuses, changing nothing, when a
    /// selected point failed or is INVALID, when a selector matches
    /// nothing, or when the results come from another spec or metric
    /// definitions. `now` becomes `recorded_at`.
    pub fn bless(
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
        let matches = |p: &PointResult, s: &str| p.id == s || p.slug == s || p.slug.starts_with(s);
        for s in selectors {
            if !results.points.iter().any(|p| matches(p, s)) {
                return Err(BlessError::NoMatch {
                    selector: s.clone(),
                    available: results.points.iter().map(|p| p.id.clone()).collect(),
                });
            }
        }
        let chosen: Vec<&PointResult> = results
            .points
            .iter()
            .filter(|p| selectors.is_empty() || selectors.iter().any(|s| matches(p, s)))
            .collect();
        if chosen.is_empty() {
            return Err(BlessError::Empty);
        }
        let refused: Vec<(String, String)> = chosen
            .iter()
            .filter_map(|p| refusal(p).map(|why| (p.id.clone(), why)))
            .collect();
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
            self.points.insert(
                p.id.clone(),
                BaselinePoint::from_result(p, &results.environment),
            );
            written.push(p.id.clone());
        }
        self.format = FORMAT.into();
        self.version = VERSION;
        self.metrics_version = results.metrics_version;
        self.spec = results.spec.name.clone();
        self.tool = ToolInfo::current();
        self.recorded_at = now.into();
        Ok(Blessed {
            kept: self.points.len() - written.len(),
            written,
            superseded,
        })
    }

    /// The canonical text: pretty JSON, keys sorted at every level, final
    /// newline.
    pub fn to_json(&self) -> String {
        let value = serde_json::to_value(self).expect("baselines serialize");
        let mut s =
            serde_json::to_string_pretty(&super::sorted_keys(value)).expect("values serialize");
        s.push('\n');
        s
    }

    /// Writes the file atomically (temporary file, then rename).
    pub fn write(&self, path: &Path) -> infer_bench_results::error::Result<()> {
        write_atomic(path, self.to_json().as_bytes()).map_err(|e| Error::io(path, e))
    }

    /// Reads a baseline file, checking its format and version, and that no
    /// slug appears twice.
    pub fn read(path: &Path) -> infer_bench_results::error::Result<Baseline> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Baseline::parse(&text).map_err(|message| Error::Format {
            path: path.to_path_buf(),
            message,
        })
    }

    /// Parses a baseline's text; the error is one sentence.
    pub fn parse(text: &str) -> Result<Baseline, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(format!(
                "not an infer-bench baseline (no \"format\": \"{FORMAT}\")"
            ));
        }
        let version = value.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
        if version > VERSION as u64 {
            return Err(format!(
                "written by a newer infer-bench (baseline version {version}; this one reads up to {VERSION})"
            ));
        }
        let baseline: Baseline =
            serde_json::from_value(value).map_err(|e| format!("invalid baseline: {e}"))?;
        let mut seen = BTreeMap::new();
        for (id, p) in &baseline.points {
            if let Some(other) = seen.insert(p.slug.as_str(), id.as_str()) {
                return Err(format!(
                    "points {other} and {id} have the same slug \"{}\"; keep one",
                    p.slug
                ));
            }
        }
        Ok(baseline)
    }
}

impl BaselinePoint {
    /// The baseline entry of a finished point.
    pub fn from_result(p: &PointResult, global: &Environment) -> BaselinePoint {
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
        }
    }
}

/// Why a point cannot be a baseline, if it cannot.
fn refusal(p: &PointResult) -> Option<String> {
    if p.status == PointStatus::Failed {
        return Some(format!(
            "failed ({})",
            p.failure.as_deref().unwrap_or("it could not be measured")
        ));
    }
    if !p.valid {
        return Some(format!("INVALID ({})", p.invalid_reasons.join("; ")));
    }
    if p.runs.is_empty() {
        return Some("no run finished".into());
    }
    None
}

/// The baseline schema (JSON Schema draft-07), pretty, with a final
/// newline: the text of `schemas/baseline.schema.json`.
pub fn schema_text() -> String {
    let schema = schemars::generate::SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<Baseline>();
    let mut value = serde_json::to_value(schema).expect("serializes");
    if let Some(obj) = value.as_object_mut() {
        obj.insert(
            "$id".into(),
            "https://infer-bench.dev/schemas/baseline.schema.json".into(),
        );
    }
    let mut s = serde_json::to_string_pretty(&value).expect("serializes");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{plan, point, results};

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
        bad.invalid_reasons = vec!["3 requests measured, below the minimum 10".into()];
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
        // A slug prefix selects, as --only does.
        b.bless(&good, &["sim".into()], "now").unwrap();
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
        assert!(
            Baseline::parse("[]")
                .unwrap_err()
                .contains("not an infer-bench baseline")
        );
        let newer = text.replace("\"version\": 1\n", "\"version\": 99\n");
        assert!(
            Baseline::parse(&newer)
                .unwrap_err()
                .contains("newer infer-bench")
        );
        let mut twice = b.clone();
        let p = twice.points.values().next().unwrap().clone();
        twice.points.insert("zzz-00000000".into(), p);
        assert!(
            Baseline::parse(&twice.to_json())
                .unwrap_err()
                .contains("same slug")
        );
    }

    /// The committed schema is the generated one, and blessed files conform
    /// to it. To refresh: `cargo run -- schema baseline >
    /// schemas/baseline.schema.json`.
    #[test]
    fn committed_schema_is_current_and_describes_the_files() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schemas/baseline.schema.json");
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
