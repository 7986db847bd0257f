//! The baseline file: what `bless` writes and `diff` reads. A versioned,
//! committed JSON file (`format: "infer-bench-baseline"`, `version: 2`,
//! schema in `schemas/baseline.schema.json`) holding, per point ID, the
//! point's resolved configuration, its environment fingerprint, the
//! statistics of each run (with the run's windows, which stand in for runs
//! when a side has only one) and the merged HDR histograms, so any
//! percentile can be recomputed later.
//!
//! Version 2 adds the judging rules (`rules`: the `[regression]` table the
//! baseline was blessed with, which a comparison uses instead of whatever
//! the new results' spec says) and the blessed spec's SHA-256. Version 1
//! files read as before, without them. Version 3 adds `searches`, the
//! answers of capacity searches, judged as capacities; a baseline without
//! searches is still written as version 2, byte for byte as before, and a
//! tool that cannot judge searches refuses a file that has some.
//! Version 4 adds a point's `quality` (agreement with a reference's
//! answers, task accuracy), judged by quality gates; it is written only
//! when a point has some, so a tool that cannot judge quality refuses a
//! baseline that holds it rather than pass it unjudged.
//!
//! The layout is made for code review: keys sorted at every level, one
//! point per block, and a single timestamp (`recorded_at`); run start times
//! and other per-run clocks are left out. Writing, reading and writing
//! again gives the same bytes. A baseline holds at most one point per slug:
//! blessing a point whose configuration changed replaces the old entry.

use std::collections::BTreeMap;
use std::path::Path;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{FileKind, FormatError};
use crate::{Environment, Error, METRICS_VERSION, Stats, ToolInfo, WindowStats, write_atomic};

/// The `format` of every baseline file.
pub const FORMAT: &str = "infer-bench-baseline";
/// Version of the baseline format this build writes and reads up to.
pub const VERSION: u32 = 4;
/// The version written for a baseline with capacity searches and no
/// point with quality figures.
pub const VERSION_WITH_SEARCHES: u32 = 3;
/// The version written for a baseline without capacity searches.
pub const VERSION_WITHOUT_SEARCHES: u32 = 2;

/// A baseline file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "infer-bench baseline", rename = "Baseline")]
pub struct Baseline<C = serde_json::Value> {
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
    /// The judging rules, pinned when the baseline was blessed: the
    /// compiled `[regression]` table of the spec (gates, confidence,
    /// min_runs, on_env_mismatch, confirm, allow_unjudged). A comparison
    /// judges by these, so a pull request cannot loosen them. Absent in
    /// version 1 files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<serde_json::Value>,
    /// SHA-256 of the spec text last blessed into this file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_sha256: Option<String>,
    /// The points, by point ID (`slug-hash`).
    pub points: BTreeMap<String, BaselinePoint<C>>,
    /// Capacity searches, by slug: their answers, judged as capacities
    /// (their probes are not points of the baseline). Absent before
    /// version 3.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub searches: BTreeMap<String, crate::search::SearchResult>,
}

/// One point of a baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "BaselinePoint")]
pub struct BaselinePoint<C = serde_json::Value> {
    pub slug: String,
    pub hash: String,
    pub axes: BTreeMap<String, String>,
    /// The resolved configuration, as in results.
    pub config: C,
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
    /// The point's quality figures (`[quality]`); absent before version 4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<crate::quality::PointQuality>,
}

/// One run of a baseline point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BaselineRun {
    pub run: u32,
    pub stats: Stats,
    #[serde(default)]
    pub windows: Vec<WindowStats>,
}

impl<C> Baseline<C> {
    /// An empty baseline for a spec.
    pub fn new(spec: &str) -> Baseline<C> {
        Baseline {
            format: FORMAT.into(),
            version: VERSION_WITHOUT_SEARCHES,
            metrics_version: METRICS_VERSION,
            spec: spec.into(),
            tool: ToolInfo::current(),
            recorded_at: String::new(),
            rules: None,
            spec_sha256: None,
            points: BTreeMap::new(),
            searches: BTreeMap::new(),
        }
    }

    /// The point with this slug, with its ID.
    pub fn by_slug(&self, slug: &str) -> Option<(&String, &BaselinePoint<C>)> {
        self.points.iter().find(|(_, p)| p.slug == slug)
    }
}

impl<C: Serialize + DeserializeOwned> Baseline<C> {
    /// The canonical text: pretty JSON, keys sorted at every level, final
    /// newline. Built one point at a time (each point's JSON tree, sorted,
    /// is written and dropped before the next), so writing a baseline
    /// needs memory for its text and one point, not a tree of the whole.
    pub fn to_json(&self) -> String {
        use serde::ser::SerializeMap;
        use serde_json::Value;
        /// Every field but the points, as the baseline serializes them.
        #[derive(Serialize)]
        struct Top<'a> {
            format: &'a str,
            version: u32,
            metrics_version: u32,
            spec: &'a str,
            tool: &'a ToolInfo,
            recorded_at: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            rules: Option<&'a Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            spec_sha256: Option<&'a str>,
            #[serde(skip_serializing_if = "BTreeMap::is_empty")]
            searches: &'a BTreeMap<String, crate::search::SearchResult>,
        }
        /// A value's JSON with its keys sorted and non-finite floats left
        /// out (see `finite`).
        fn canonical<T: Serialize>(value: &T) -> Value {
            let mut json = serde_json::to_value(value).expect("baselines serialize");
            crate::finite::strip(&mut json, &crate::finite::non_finite(value));
            crate::sorted_keys(json)
        }
        struct Points<'a, C>(&'a BTreeMap<String, BaselinePoint<C>>);
        impl<C: Serialize> Serialize for Points<'_, C> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = s.serialize_map(Some(self.0.len()))?;
                for (id, point) in self.0 {
                    map.serialize_entry(id, &canonical(point))?;
                }
                map.end()
            }
        }
        struct Canon<'a, C> {
            top: Value,
            points: Points<'a, C>,
        }
        impl<C: Serialize> Serialize for Canon<'_, C> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let top = self
                    .top
                    .as_object()
                    .expect("a struct serializes as an object");
                let mut map = s.serialize_map(Some(top.len() + 1))?;
                let mut points = Some(&self.points);
                for (key, value) in top {
                    if key.as_str() > "points"
                        && let Some(p) = points.take()
                    {
                        map.serialize_entry("points", p)?;
                    }
                    map.serialize_entry(key, value)?;
                }
                if let Some(p) = points {
                    map.serialize_entry("points", p)?;
                }
                map.end()
            }
        }
        let top = Top {
            format: &self.format,
            version: self.version,
            metrics_version: self.metrics_version,
            spec: &self.spec,
            tool: &self.tool,
            recorded_at: &self.recorded_at,
            rules: self.rules.as_ref(),
            spec_sha256: self.spec_sha256.as_deref(),
            searches: &self.searches,
        };
        let canon = Canon {
            top: canonical(&top),
            points: Points(&self.points),
        };
        let mut s = serde_json::to_string_pretty(&canon).expect("values serialize");
        s.push('\n');
        s
    }

    /// Writes the file atomically (temporary file, then rename).
    pub fn write(&self, path: &Path) -> crate::Result<()> {
        write_atomic(path, self.to_json().as_bytes())
    }

    /// Reads a baseline file, checking its format and version, and that no
    /// slug appears twice. A file larger than `MAX_RESULTS_BYTES` is
    /// refused before it is read.
    pub fn read(path: &Path) -> crate::Result<Baseline<C>> {
        use std::io::Read as _;
        let read_error = |source| Error::Read {
            path: path.to_path_buf(),
            source,
        };
        let format_error = |problem| Error::Format {
            path: path.to_path_buf(),
            problem,
        };
        let file = std::fs::File::open(path).map_err(read_error)?;
        let bytes = file.metadata().map_err(read_error)?.len();
        if bytes > crate::MAX_RESULTS_BYTES {
            return Err(format_error(FormatError::TooLarge {
                kind: FileKind::Baseline,
                bytes,
                limit: crate::MAX_RESULTS_BYTES,
            }));
        }
        let mut text = String::with_capacity(bytes as usize);
        file.take(crate::MAX_RESULTS_BYTES)
            .read_to_string(&mut text)
            .map_err(read_error)?;
        Baseline::parse(&text).map_err(format_error)
    }

    /// Parses a baseline's text; the error is one sentence. The text is
    /// deserialized straight into the baseline (no JSON tree), after a
    /// first pass that keeps only its format and version, and every
    /// histogram it holds is checked within its bounds (`hist::check`).
    pub fn parse(text: &str) -> Result<Baseline<C>, FormatError> {
        #[derive(Default, Deserialize)]
        struct Head {
            #[serde(default)]
            format: Option<serde_json::Value>,
            #[serde(default)]
            version: Option<serde_json::Value>,
        }
        let head: Head = match serde_json::from_str(text) {
            Ok(head) => head,
            Err(e) if e.is_data() => Head::default(),
            Err(e) => return Err(FormatError::NotJson(e)),
        };
        if head.format.as_ref().and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(FormatError::NotOurs {
                kind: FileKind::Baseline,
                format: FORMAT,
            });
        }
        let version = head.version.as_ref().and_then(|v| v.as_u64()).unwrap_or(0);
        if version > VERSION as u64 {
            return Err(FormatError::Newer {
                kind: FileKind::Baseline,
                version,
                reads: VERSION,
            });
        }
        let mut de = serde_json::Deserializer::from_str(text);
        let baseline: Baseline<C> =
            serde_path_to_error::deserialize(&mut de).map_err(|e| FormatError::Invalid {
                kind: FileKind::Baseline,
                source: crate::FieldError {
                    path: e.path().to_string(),
                    source: e.into_inner(),
                },
            })?;
        de.end().map_err(FormatError::NotJson)?;
        for (id, p) in &baseline.points {
            for (name, text) in &p.histograms {
                crate::hist::check(text).map_err(|source| FormatError::Histogram {
                    at: format!("points.{id}.histograms.{name}"),
                    source,
                })?;
            }
        }
        let mut seen = BTreeMap::new();
        for (id, p) in &baseline.points {
            if let Some(other) = seen.insert(p.slug.as_str(), id.as_str()) {
                return Err(FormatError::DuplicateSlug {
                    first: other.to_string(),
                    second: id.clone(),
                    slug: p.slug.clone(),
                });
            }
        }
        Ok(baseline)
    }
}

/// The baseline schema (JSON Schema draft-07) with `C` as the points'
/// configuration, pretty, with a final newline.
pub fn schema_text<C: JsonSchema>() -> String {
    crate::schema_text_of::<Baseline<C>>("baseline")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Stats;

    /// The canonical text as a tree of the whole baseline gives it: what
    /// `to_json` wrote before it went point by point.
    fn whole_tree(b: &Baseline) -> String {
        let mut value = serde_json::to_value(b).unwrap();
        crate::finite::strip(&mut value, &crate::finite::non_finite(b));
        let mut s = serde_json::to_string_pretty(&crate::sorted_keys(value)).unwrap();
        s.push('\n');
        s
    }

    fn point(slug: &str, throughput: f64) -> BaselinePoint {
        BaselinePoint {
            slug: slug.into(),
            hash: "abc".into(),
            axes: [("z".to_string(), "1".to_string()), ("a".into(), "2".into())].into(),
            config: serde_json::json!({"zeta": 1, "alpha": {"y": [3, 1], "b": null}}),
            environment: Environment::default(),
            runs: vec![BaselineRun {
                run: 1,
                stats: Stats {
                    request_throughput: throughput,
                    ..Stats::default()
                },
                windows: vec![WindowStats::default()],
            }],
            merged: Stats::default(),
            quality: None,
            histograms: [(
                "ttft".to_string(),
                crate::hist::encode(&crate::hist::new_hist()),
            )]
            .into(),
        }
    }

    #[test]
    fn the_text_written_point_by_point_is_the_whole_trees() {
        let mut b: Baseline = Baseline::new("spec");
        b.recorded_at = "2025-01-01T00:00:00Z".into();
        for (with_rules, sha) in [(false, None), (true, Some("f00".to_string()))] {
            b.rules = with_rules.then(|| serde_json::json!({"gates": {"b": 1, "a": f64::NAN}}));
            b.spec_sha256 = sha;
            b.points.insert("sim.b-1".into(), point("sim.b", f64::NAN));
            b.points.insert("sim.a-2".into(), point("sim.a", 3.5));
            b.points.get_mut("sim.a-2").unwrap().merged.error_rate = f64::INFINITY;
            let text = b.to_json();
            assert_eq!(text, whole_tree(&b));
            // The non-finite floats are left out, not written as null.
            assert!(!text.contains("\"request_throughput\": null"), "{text}");
            assert!(!text.contains("\"error_rate\": null"), "{text}");
        }
        // Finite, it reads back as it was.
        b.points.insert("sim.b-1".into(), point("sim.b", 2.0));
        b.points.insert("sim.a-2".into(), point("sim.a", 3.5));
        assert_eq!(Baseline::parse(&b.to_json()).unwrap(), b);
    }

    #[test]
    fn a_hostile_histogram_is_an_error_naming_its_point() {
        let mut b: Baseline = Baseline::new("spec");
        let mut p = point("sim.a", 1.0);
        p.histograms
            .insert("e2e".into(), crate::hist::tests::hostile(0xC000_0000));
        b.points.insert("sim.a-1".into(), p);
        let err = Baseline::<serde_json::Value>::parse(&b.to_json()).unwrap_err();
        assert!(
            matches!(&err, FormatError::Histogram { at, source: crate::HistError::PayloadTooLong { .. } } if at == "points.sim.a-1.histograms.e2e"),
            "{err}"
        );
    }
}
