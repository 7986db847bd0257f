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
pub const VERSION: u32 = 3;
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
    /// newline.
    pub fn to_json(&self) -> String {
        let mut value = serde_json::to_value(self).expect("baselines serialize");
        // JSON cannot hold a non-finite float: leave it out (see `finite`).
        crate::finite::strip(&mut value, &crate::finite::non_finite(self));
        let mut s =
            serde_json::to_string_pretty(&crate::sorted_keys(value)).expect("values serialize");
        s.push('\n');
        s
    }

    /// Writes the file atomically (temporary file, then rename).
    pub fn write(&self, path: &Path) -> crate::Result<()> {
        write_atomic(path, self.to_json().as_bytes())
    }

    /// Reads a baseline file, checking its format and version, and that no
    /// slug appears twice.
    pub fn read(path: &Path) -> crate::Result<Baseline<C>> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Baseline::parse(&text).map_err(|problem| Error::Format {
            path: path.to_path_buf(),
            problem,
        })
    }

    /// Parses a baseline's text; the error is one sentence.
    pub fn parse(text: &str) -> Result<Baseline<C>, FormatError> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(FormatError::NotJson)?;
        if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(FormatError::NotOurs {
                kind: FileKind::Baseline,
                format: FORMAT,
            });
        }
        let version = value.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
        if version > VERSION as u64 {
            return Err(FormatError::Newer {
                kind: FileKind::Baseline,
                version,
                reads: VERSION,
            });
        }
        let baseline: Baseline<C> =
            crate::from_value_at(value).map_err(|source| FormatError::Invalid {
                kind: FileKind::Baseline,
                source,
            })?;
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
