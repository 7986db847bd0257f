//! What a pull request is judged against under `[regression] against =
//! "history"`: per point and gate, main's commits since the series' newest
//! change point (at most [`WINDOW`] of them), each one replicate. A
//! re-blessed baseline cannot hide a regression this way: the level is
//! what main measured, commit after commit.
//!
//! Only comparable history counts: the newest record of the point must
//! have the point's configuration hash, no identity key that differs from
//! the new results' fingerprint, and the same metric definitions; and the
//! window is cut at the series' last break (as `history check` cuts it).
//! A point without such history is left out, and the judge says that it
//! judged it against the baseline instead.

use std::collections::BTreeMap;

use infer_bench_judge::compare::{Drift, Reference, References};
use infer_bench_judge::fingerprint::{mismatches, point_environment};
use infer_bench_results::Environment;
use infer_bench_spec::results::Results;

use crate::changepoint::{self, detect};
use crate::record::Record;
use crate::series::series;

/// The most commits a reference holds: recent enough to be main's level
/// now, many enough for a tight interval.
pub const WINDOW: usize = 20;

/// The references of `results`' points in `records` (oldest first).
pub fn references(
    records: &[Record],
    results: &Results,
    settings: &changepoint::Settings,
) -> References {
    let mut out: References = BTreeMap::new();
    let all = series(records);
    for p in &results.points {
        let Some(newest) = records
            .iter()
            .rev()
            .find_map(|r| r.points.get(&p.slug).map(|rp| (r.metrics_version, rp)))
        else {
            continue;
        };
        let (metrics_version, rp) = newest;
        let env = point_environment(&results.environment, p);
        let recorded = Environment {
            identity: rp.identity.clone(),
            facts: BTreeMap::new(),
        };
        if rp.hash != p.hash
            || metrics_version != results.metrics_version
            || !mismatches(&recorded, &env).is_empty()
        {
            continue;
        }
        for s in all.iter().filter(|s| s.slug == p.slug) {
            let seg = s.current();
            let values: Vec<f64> = seg.entries.iter().map(|e| e.value).collect();
            let shifts = detect(&values, settings);
            let start = shifts.last().map_or(0, |c| c.index);
            let start = start.max(values.len().saturating_sub(WINDOW));
            let drift = shifts
                .last()
                .filter(|c| (c.after > c.before) == s.higher_is_worse && c.after != c.before)
                .and_then(|c| {
                    Some(Drift {
                        relative: c.relative,
                        commits: values.len() - c.index,
                        since: seg.entries.get(c.index)?.commit.clone(),
                    })
                });
            out.entry(p.slug.clone()).or_default().insert(
                s.label.clone(),
                Reference {
                    values: values[start..].to_vec(),
                    since: seg.entries[start].commit.clone(),
                    drift,
                },
            );
        }
    }
    out
}
