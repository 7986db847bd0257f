//! Series: the records of one spec read per point and metric, in commit
//! order, cut where the measurements stop being comparable. A point whose
//! configuration hash changed, whose environment's identity keys differ
//! (another GPU, server major version, simulator model), or whose metric
//! definitions changed starts a new segment, as the gate's INCOMPARABLE
//! does: a change point is never looked for across such a cut.

use std::collections::BTreeMap;

use crate::record::{Level, Record, RecordPoint};

/// One commit's value in a series.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub commit: String,
    pub time: String,
    pub value: f64,
    pub runs: Vec<f64>,
}

/// A stretch of comparable commits.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Why this segment is not comparable with the one before (empty for
    /// the first).
    pub started_because: String,
    pub entries: Vec<Entry>,
}

/// One point x metric over the history.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub slug: String,
    /// The gate label (`tpot p50`).
    pub label: String,
    pub metric: String,
    pub higher_is_worse: bool,
    /// The noise band of the newest record, in percent.
    pub noise_pct: f64,
    /// Oldest first; never empty.
    pub segments: Vec<Segment>,
}

impl Series {
    /// The newest comparable stretch, the one a check judges.
    pub fn current(&self) -> &Segment {
        self.segments.last().expect("a series has a segment")
    }
}

/// The series of `records` (oldest first), by slug then label.
pub fn series(records: &[Record]) -> Vec<Series> {
    let mut out: BTreeMap<(String, String), (Series, Option<Last>)> = BTreeMap::new();
    for r in records {
        for (slug, p) in &r.points {
            for (label, level) in &p.metrics {
                if !level.value.is_finite() {
                    continue;
                }
                let (s, last) = out
                    .entry((slug.clone(), label.clone()))
                    .or_insert_with(|| (empty(slug, label, level), None));
                let why = match last {
                    None => Some(String::new()),
                    Some(l) => l.break_before(r, p),
                };
                if let Some(why) = why {
                    s.segments.push(Segment {
                        started_because: why,
                        entries: Vec::new(),
                    });
                }
                s.noise_pct = level.noise_pct;
                s.higher_is_worse = level.higher_is_worse();
                if let Some(seg) = s.segments.last_mut() {
                    seg.entries.push(Entry {
                        commit: r.commit.clone(),
                        time: r.time.clone(),
                        value: level.value,
                        runs: level.runs.clone(),
                    });
                }
                *last = Some(Last {
                    commit: r.commit.clone(),
                    metrics_version: r.metrics_version,
                    hash: p.hash.clone(),
                    identity: p.identity.clone(),
                });
            }
        }
    }
    out.into_values().map(|(s, _)| s).collect()
}

fn empty(slug: &str, label: &str, level: &Level) -> Series {
    Series {
        slug: slug.to_string(),
        label: label.to_string(),
        metric: level.metric.clone(),
        higher_is_worse: level.higher_is_worse(),
        noise_pct: level.noise_pct,
        segments: Vec::new(),
    }
}

/// What the previous entry of a series was measured under.
struct Last {
    commit: String,
    metrics_version: u32,
    hash: String,
    identity: BTreeMap<String, String>,
}

impl Last {
    /// Why `p` of `r` cannot continue the series, if it cannot.
    fn break_before(&self, r: &Record, p: &RecordPoint) -> Option<String> {
        let short = |c: &str| c.chars().take(12).collect::<String>();
        if self.metrics_version != r.metrics_version {
            return Some(format!(
                "metric definitions changed (version {} -> {}) at {}",
                self.metrics_version,
                r.metrics_version,
                short(&r.commit)
            ));
        }
        if self.hash != p.hash {
            return Some(format!(
                "the point's configuration changed at {} (hash {} -> {})",
                short(&r.commit),
                short(&self.hash),
                short(&p.hash)
            ));
        }
        let changed: Vec<String> = self
            .identity
            .iter()
            .filter_map(|(k, old)| {
                let new = p.identity.get(k)?;
                (new != old).then(|| format!("{k}: {old} -> {new}"))
            })
            .collect();
        (!changed.is_empty()).then(|| {
            format!(
                "the environment changed at {} ({}; last comparable {})",
                short(&r.commit),
                changed.join(", "),
                short(&self.commit)
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Source;

    pub(crate) fn rec(commit: &str, secs: u64, hash: &str, gpu: &str, tpot: f64) -> Record {
        let level = Level {
            metric: "tpot".into(),
            stat: Some("p50".into()),
            noise_pct: 5.0,
            value: tpot,
            runs: vec![tpot],
        };
        Record {
            points: BTreeMap::from([(
                "sim.a".to_string(),
                RecordPoint {
                    hash: hash.into(),
                    axes: BTreeMap::new(),
                    identity: BTreeMap::from([("sim_gpu".into(), gpu.into())]),
                    metrics: BTreeMap::from([("tpot p50".to_string(), level)]),
                },
            )]),
            ..Record::new("q", commit, &crate::record::format_time(secs), Source::Run)
        }
    }

    #[test]
    fn a_changed_hash_or_identity_starts_a_new_segment() {
        let records = [
            rec("c1", 1, "h1", "h100", 10.0),
            rec("c2", 2, "h1", "h100", 10.1),
            rec("c3", 3, "h2", "h100", 12.0),
            rec("c4", 4, "h2", "h100", 12.1),
            rec("c5", 5, "h2", "b200", 6.0),
        ];
        let all = series(&records);
        assert_eq!(all.len(), 1);
        let s = &all[0];
        assert_eq!((s.slug.as_str(), s.label.as_str()), ("sim.a", "tpot p50"));
        assert!(s.higher_is_worse);
        let lens: Vec<usize> = s.segments.iter().map(|g| g.entries.len()).collect();
        assert_eq!(lens, [2, 2, 1]);
        assert!(
            s.segments[1]
                .started_because
                .contains("configuration changed at c3"),
            "{}",
            s.segments[1].started_because
        );
        assert!(
            s.segments[2]
                .started_because
                .contains("sim_gpu: h100 -> b200"),
            "{}",
            s.segments[2].started_because
        );
        assert_eq!(s.current().entries[0].commit, "c5");
    }
}
