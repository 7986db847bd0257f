//! One record of the history: what a run of main measured, small enough to
//! keep one file per commit for years. Per point (by slug) it holds the
//! configuration hash and the environment's identity keys (what decides
//! whether two records may be compared), and per gated metric the merged
//! value and each run's value: the levels change-point detection reads,
//! never the raw histograms.
//!
//! A record is made from a baseline-shaped set of points
//! ([`Record::from_baseline`]): `history record` blesses a run's results
//! into an in-memory baseline first (so the same points qualify, with the
//! same refusals), and `history import` reads the committed baselines of
//! past commits as they are.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use infer_bench_judge::baseline::Baseline;
use infer_bench_judge::fingerprint::with_implied_keys;
use infer_bench_judge::rules::gate_label;
use infer_bench_results::ToolInfo;
use infer_bench_results::metric::{Metric, Stat};
use infer_bench_spec::Regression;

/// The `format` of a history record.
pub const FORMAT: &str = "infer-bench-history";
/// The version of the record format this build writes and reads.
pub const VERSION: u32 = 1;

/// Where a record's values came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A run of the commit (`history record`).
    Run,
    /// The baseline committed at the commit (`history import --git`).
    Baseline,
    /// A results folder found on disk (`history import RESULTS`).
    Results,
}

/// One commit's measurements of one spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub format: String,
    pub version: u32,
    /// The metric definitions the values follow (results' `metrics_version`).
    pub metrics_version: u32,
    /// The spec's name.
    pub spec: String,
    /// The commit measured (a git object name, or any short ID made of
    /// letters, digits, `.`, `_` and `-`).
    pub commit: String,
    /// The commit's time (RFC 3339, UTC): records are ordered by it.
    pub time: String,
    /// How many commits the commit's history holds (`git rev-list
    /// --count`): orders commits made in the same second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u64>,
    pub source: Source,
    pub tool: ToolInfo,
    /// By slug.
    pub points: BTreeMap<String, RecordPoint>,
}

/// One point of a record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordPoint {
    /// The configuration hash (a new hash starts a new series).
    pub hash: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub axes: BTreeMap<String, String>,
    /// The environment's identity keys (a changed key starts a new series).
    #[serde(default)]
    pub identity: BTreeMap<String, String>,
    /// By gate label (`tpot p50`, `output_tokens_per_s`).
    pub metrics: BTreeMap<String, Level>,
}

/// One metric's level at one commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// The metric's name (`tpot`).
    pub metric: String,
    /// The statistic (`p50`), for distributions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stat: Option<String>,
    /// The gate's noise band at this commit, in percent.
    pub noise_pct: f64,
    /// The value over all runs (the merged statistic), in the metric's unit.
    pub value: f64,
    /// Each run's value, in run order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<f64>,
}

impl Level {
    /// The metric, when this build knows its name.
    pub fn metric(&self) -> Option<Metric> {
        self.metric.parse().ok()
    }

    /// Whether a higher value is worse (latency, error rate); unknown
    /// metrics count as higher-is-worse, the cautious reading.
    pub fn higher_is_worse(&self) -> bool {
        self.metric().is_none_or(Metric::higher_is_worse)
    }
}

/// Why a record could not be made or read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecordError {
    #[error(
        "\"{0}\" cannot name a commit in a history file name: expected 1 to 64 letters, digits, '.', '_' or '-', not starting with '.' or '-'"
    )]
    BadCommit(String),
    #[error(
        "the spec's name \"{0}\" cannot name a history folder: expected 1 to 64 letters, digits, '.', '_' or '-', not starting with '.' or '-'"
    )]
    BadSpec(String),
    #[error("\"{0}\" is not a time in RFC 3339 (e.g. 2026-12-06T16:19:12Z)")]
    BadTime(String),
    #[error("not a history record (its \"format\" is not \"{FORMAT}\")")]
    NotOurs,
    #[error("written by a newer infer-bench (record version {0}; this one reads up to {VERSION})")]
    Newer(u64),
    #[error("not JSON, or not a record: {0}")]
    Invalid(String),
    #[error("no point of the results can be recorded ({0})")]
    NothingToRecord(String),
}

/// A name safe as one path component on every system: `[A-Za-z0-9._-]`,
/// at most 64 characters, not starting with `.` or `-`.
pub fn safe_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && !s.starts_with(['.', '-'])
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Seconds since the Unix epoch of an RFC 3339 time.
pub fn parse_time(s: &str) -> Result<u64, RecordError> {
    humantime::parse_rfc3339_weak(s.trim_end_matches('Z'))
        .ok()
        .or_else(|| parse_offset_time(s))
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
        .ok_or_else(|| RecordError::BadTime(s.to_string()))
}

/// An RFC 3339 time with a numeric offset (`2026-12-06T17:19:12+01:00`,
/// as git's `%cI` writes it), as a UTC instant.
fn parse_offset_time(s: &str) -> Option<std::time::SystemTime> {
    let (local, sign, off) = match s.rfind(['+', '-']) {
        Some(i) if i > 10 => (&s[..i], &s[i..=i], &s[i + 1..]),
        _ => return None,
    };
    let (h, m) = off.split_once(':')?;
    let secs = h.parse::<u64>().ok()? * 3600 + m.parse::<u64>().ok()? * 60;
    let t = humantime::parse_rfc3339_weak(local).ok()?;
    let d = std::time::Duration::from_secs(secs);
    if sign == "+" {
        t.checked_sub(d)
    } else {
        t.checked_add(d)
    }
}

/// `secs` since the epoch as `2026-12-06T16:19:12Z`.
pub fn format_time(secs: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        .to_string()
}

/// The labels and statistics recorded for every point: the gates of the
/// spec's `[regression]` table.
fn recorded(regression: &Regression) -> Vec<(String, Metric, Option<Stat>, f64)> {
    regression
        .gates
        .iter()
        .map(|g| {
            (
                gate_label(g.metric, g.stat.as_ref()),
                g.metric,
                g.stat,
                g.noise.value(),
            )
        })
        .collect()
}

impl Record {
    /// A record of no points yet.
    pub fn new(spec: &str, commit: &str, time: &str, source: Source) -> Record {
        Record {
            format: FORMAT.into(),
            version: VERSION,
            metrics_version: infer_bench_results::METRICS_VERSION,
            spec: spec.to_string(),
            commit: commit.to_string(),
            time: time.to_string(),
            depth: None,
            source,
            tool: ToolInfo::current(),
            points: BTreeMap::new(),
        }
    }

    /// The record of `baseline`'s points at `commit` and `time`, with the
    /// metrics `regression` gates. `time` is normalized to UTC.
    pub fn from_baseline(
        baseline: &Baseline,
        regression: &Regression,
        commit: &str,
        time: &str,
        source: Source,
    ) -> Result<Record, RecordError> {
        if !safe_name(commit) {
            return Err(RecordError::BadCommit(commit.to_string()));
        }
        if !safe_name(&baseline.spec) {
            return Err(RecordError::BadSpec(baseline.spec.clone()));
        }
        let time = format_time(parse_time(time)?);
        let gates = recorded(regression);
        let mut points = BTreeMap::new();
        for p in baseline.points.values() {
            let mut metrics = BTreeMap::new();
            for (label, metric, stat, noise_pct) in &gates {
                let Some(value) = p
                    .merged
                    .value(*metric, stat.as_ref())
                    .filter(|v| v.is_finite())
                else {
                    continue;
                };
                let runs = p
                    .runs
                    .iter()
                    .filter_map(|r| r.stats.value(*metric, stat.as_ref()))
                    .filter(|v| v.is_finite())
                    .collect();
                metrics.insert(
                    label.clone(),
                    Level {
                        metric: metric.name().to_string(),
                        stat: stat.map(Stat::name),
                        noise_pct: *noise_pct,
                        value,
                        runs,
                    },
                );
            }
            if metrics.is_empty() {
                continue;
            }
            points.insert(
                p.slug.clone(),
                RecordPoint {
                    hash: p.hash.clone(),
                    axes: p.axes.clone(),
                    identity: with_implied_keys(&p.environment).identity,
                    metrics,
                },
            );
        }
        Ok(Record {
            metrics_version: baseline.metrics_version,
            points,
            ..Record::new(&baseline.spec, commit, &time, source)
        })
    }

    /// Compact JSON, one point per line (small, and a reviewer can still
    /// read a diff of it), with a final newline.
    pub fn to_json(&self) -> String {
        let mut head = serde_json::to_value(self).expect("a record serializes");
        let points = head
            .as_object_mut()
            .and_then(|o| o.remove("points"))
            .unwrap_or_default();
        let head = serde_json::to_string(&head).expect("a record serializes");
        let mut out = String::with_capacity(head.len() + 256);
        out.push_str(head.trim_end_matches('}'));
        out.push_str(",\"points\":{");
        if let serde_json::Value::Object(points) = points {
            for (i, (slug, p)) in points.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                out.push_str(&serde_json::to_string(slug).expect("a string serializes"));
                out.push(':');
                out.push_str(&serde_json::to_string(p).expect("a point serializes"));
            }
            if !points.is_empty() {
                out.push('\n');
            }
        }
        out.push_str("}}\n");
        out
    }

    /// Reads a record's JSON, refusing other files and newer versions.
    pub fn parse(text: &str) -> Result<Record, RecordError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| RecordError::Invalid(e.to_string()))?;
        if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(RecordError::NotOurs);
        }
        let version = value.get("version").and_then(serde_json::Value::as_u64);
        if let Some(v) = version.filter(|v| *v > u64::from(VERSION)) {
            return Err(RecordError::Newer(v));
        }
        let record: Record =
            serde_json::from_value(value).map_err(|e| RecordError::Invalid(e.to_string()))?;
        if !safe_name(&record.commit) {
            return Err(RecordError::BadCommit(record.commit));
        }
        if !safe_name(&record.spec) {
            return Err(RecordError::BadSpec(record.spec));
        }
        parse_time(&record.time)?;
        Ok(record)
    }

    /// Seconds since the epoch of the record's time (0 when unreadable;
    /// [`Record::parse`] refuses such records).
    pub fn seconds(&self) -> u64 {
        parse_time(&self.time).unwrap_or(0)
    }

    /// The order of records: time, then depth, then commit.
    pub fn order(&self) -> (u64, u64, &str) {
        (self.seconds(), self.depth.unwrap_or(0), &self.commit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_safe_path_components() {
        assert!(safe_name("0123abcdef"));
        assert!(safe_name("v1.2_rc-3"));
        for bad in [
            "",
            ".",
            "..",
            "-x",
            "a/b",
            "a b",
            "x\u{1b}[31m",
            &"a".repeat(65),
        ] {
            assert!(!safe_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn times_with_offsets_are_the_same_instant_in_utc() {
        let z = parse_time("2026-12-06T16:19:12Z").unwrap();
        assert_eq!(parse_time("2026-12-06T17:19:12+01:00").unwrap(), z);
        assert_eq!(parse_time("2026-12-06T11:19:12-05:00").unwrap(), z);
        assert_eq!(format_time(z), "2026-12-06T16:19:12Z");
        assert!(matches!(
            parse_time("yesterday"),
            Err(RecordError::BadTime(_))
        ));
    }

    #[test]
    fn a_record_reads_back_as_written_and_refuses_what_is_not_one() {
        let r = Record {
            format: FORMAT.into(),
            version: VERSION,
            metrics_version: 3,
            spec: "quickstart".into(),
            commit: "abc123".into(),
            time: "2026-12-06T16:19:12Z".into(),
            depth: Some(7),
            source: Source::Run,
            tool: ToolInfo::current(),
            points: BTreeMap::from([(
                "sim.a".to_string(),
                RecordPoint {
                    hash: "h1".into(),
                    axes: BTreeMap::new(),
                    identity: BTreeMap::from([("server".into(), "x".into())]),
                    metrics: BTreeMap::from([(
                        "tpot p50".to_string(),
                        Level {
                            metric: "tpot".into(),
                            stat: Some("p50".into()),
                            noise_pct: 5.0,
                            value: 12.5,
                            runs: vec![12.0, 13.0],
                        },
                    )]),
                },
            )]),
        };
        let text = r.to_json();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert_eq!(Record::parse(&text).unwrap(), r);
        assert_eq!(Record::parse("{}"), Err(RecordError::NotOurs));
        let newer = text.replace("\"version\":1", "\"version\":9");
        assert_eq!(Record::parse(&newer), Err(RecordError::Newer(9)));
        let hostile = text.replace("abc123", "../../etc");
        assert!(matches!(
            Record::parse(&hostile),
            Err(RecordError::BadCommit(_))
        ));
    }
}
