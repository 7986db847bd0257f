//! Exporters of the history of main (`infer-bench history`, issue 39):
//! pure functions from the history crate's plain data (records, series,
//! a check's report) to text. This module owns how the history is shown
//! and handed to other trackers; it reads nothing and writes nothing.
//!
//! - [`check`]: the check's verdicts for a terminal ([`check::table`]), a
//!   pull-request comment or job summary ([`check::markdown`], with a
//!   sparkline per series) and JSON ([`check::json`]).
//! - [`trackers`]: the newest record for the trackers teams already run,
//!   and the whole history as CSV. Each file is sent with one command:
//!   - Bencher Metric Format ([`trackers::bmf`]):
//!     `bencher run --adapter json --file bmf.json`
//!   - github-action-benchmark ([`trackers::github_action_benchmark`], one
//!     file per direction): the action's `tool: customSmallerIsBetter` with
//!     `output-file-path: smaller.json`, and a second step with
//!     `tool: customBiggerIsBetter` and `output-file-path: bigger.json`
//!   - OpenMetrics for a Prometheus Pushgateway ([`trackers::openmetrics`]):
//!     `curl --data-binary @metrics.txt http://pushgateway:9091/metrics/job/infer-bench`
//!   - CSV ([`trackers::csv`]), every record: open it in a spreadsheet or
//!     `duckdb -c "select * from 'history.csv'"`
//! - [`page`]: the offline HTML history page, a chart per point and
//!   metric ([`page::html`]).
//!
//! Slugs, labels, commits and restart reasons come from files a pull
//! request can edit: each format writes them through its encoder
//! ([`infer_bench_results::outside`], [`crate::xml::escape`]), and the
//! tracker formats, whose names other tools render in pages and comments
//! we do not control, keep only a conservative set of characters
//! ([`trackers::name`]).

pub mod check;
pub mod page;
pub mod trackers;

use infer_bench_history::check::Shift;
use infer_bench_history::record::Record;
use infer_bench_results::metric::Metric;

use crate::verdict::value;

/// The most values a sparkline shows.
pub const SPARK_VALUES: usize = 30;

/// The bars of a sparkline, lowest first.
const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// The newest of `records`: the latest time, the last given among equal
/// times (the store lists records oldest first, by time then commit).
pub fn newest(records: &[Record]) -> Option<&Record> {
    records
        .iter()
        .enumerate()
        .max_by_key(|(i, r)| (r.seconds(), *i))
        .map(|(_, r)| r)
}

/// A unicode block sparkline (`▁▂▃▄▅▆▇█`) of the newest
/// [`SPARK_VALUES`] finite values, scaled from their lowest to their
/// highest; a flat line is drawn at mid height. Empty without values.
pub fn sparkline(values: &[f64]) -> String {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let shown = &finite[finite.len().saturating_sub(SPARK_VALUES)..];
    let (lo, hi) = shown
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let top = BARS.len() - 1;
    shown
        .iter()
        .map(|&v| {
            if hi > lo {
                let f = (v - lo) / (hi - lo);
                // f is in [0, 1], so the rounded index is in 0..=top.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let i = (f * top as f64).round() as usize;
                BARS[i.min(top)]
            } else {
                BARS[top / 2]
            }
        })
        .collect()
}

/// The unit of a metric by name (`ms`, `tok/s`, `fraction`); empty when
/// this build does not know it.
pub(crate) fn unit_of(metric: &str) -> &'static str {
    metric.parse::<Metric>().map(Metric::unit).unwrap_or("")
}

/// The unit of a gate label (`tpot p50`: the metric is its first word).
pub(crate) fn unit_of_label(label: &str) -> &'static str {
    unit_of(label.split(' ').next().unwrap_or(""))
}

/// A commit as people read it: its first 7 characters, as git abbreviates.
pub(crate) fn short(commit: &str) -> String {
    commit.chars().take(7).collect()
}

/// A confidence as a percentage that never rounds up to a certainty:
/// 0.9995 is "99.9%".
pub(crate) fn confidence(c: f64) -> String {
    let tenths = (c.clamp(0.0, 1.0) * 1000.0).floor() / 10.0;
    format!("{tenths:.1}%")
}

/// A relative change: "+6.1%".
pub(crate) fn relative(r: f64) -> String {
    crate::verdict::change(Some(r), infer_bench_judge::compare::Scale::Relative, "")
}

/// "12.0 -> 12.7 ms" (fractions: "0.50% -> 0.70%"), with `arrow` between.
pub(crate) fn from_to(before: f64, after: f64, unit: &str, arrow: &str) -> String {
    if unit == "fraction" || unit.is_empty() {
        format!(
            "{} {arrow} {}",
            value(Some(before), unit),
            value(Some(after), unit)
        )
    } else {
        format!(
            "{} {arrow} {}",
            value(Some(before), ""),
            value(Some(after), unit)
        )
    }
}

/// A shift, unencoded: "+6.1% at abc1234 (12.0 -> 12.7 ms, confidence
/// 99.9%)". The commit is outside text: encode the whole for its place.
pub(crate) fn shift_text(s: &Shift, unit: &str, arrow: &str) -> String {
    format!(
        "{} at {} ({}, confidence {})",
        relative(s.relative),
        short(&s.commit),
        from_to(s.before, s.after, unit, arrow),
        confidence(s.confidence)
    )
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Records, series and checks built by hand for the exporters' tests.

    use std::collections::BTreeMap;

    use infer_bench_history::check::{Report, SeriesCheck, Shift, Verdict};
    use infer_bench_history::record::{Level, Record, RecordPoint, Source};

    /// A slug that tries every trick: markup, a quote, a line break, a
    /// terminal escape, a workflow command, a spreadsheet formula.
    pub const HOSTILE: &str =
        "=cmd|' /C calc'!A0<script>alert(1)</script>\"\n::error::pwned\u{1b}[31m@team";

    pub fn level(metric: &str, stat: Option<&str>, value: f64, runs: &[f64]) -> Level {
        Level {
            metric: metric.into(),
            stat: stat.map(Into::into),
            noise_pct: 5.0,
            value,
            runs: runs.to_vec(),
        }
    }

    /// A record of `commit` at `secs` with the points and levels given.
    pub fn rec(commit: &str, secs: u64, points: &[(&str, &str, Level)]) -> Record {
        let mut map: BTreeMap<String, RecordPoint> = BTreeMap::new();
        for (slug, label, level) in points {
            map.entry((*slug).to_string())
                .or_insert_with(|| RecordPoint {
                    hash: "h1".into(),
                    axes: BTreeMap::new(),
                    identity: BTreeMap::from([("sim_gpu".into(), "h100".into())]),
                    metrics: BTreeMap::new(),
                })
                .metrics
                .insert((*label).to_string(), level.clone());
        }
        Record {
            points: map,
            ..Record::new(
                "q",
                commit,
                &infer_bench_history::record::format_time(secs),
                Source::Run,
            )
        }
    }

    /// TPOT p50 of `sim.a` and output tokens/s of `sim.a` over `tpot`'s
    /// values, one record a value, commits `c0`, `c1`, ...
    pub fn history(tpot: &[f64]) -> Vec<Record> {
        tpot.iter()
            .enumerate()
            .map(|(i, &v)| {
                rec(
                    &format!("c{i}"),
                    1_000 + i as u64,
                    &[
                        (
                            "sim.a",
                            "tpot p50",
                            level("tpot", Some("p50"), v, &[v - 0.5, v + 0.5]),
                        ),
                        (
                            "sim.a",
                            "output_tokens_per_s",
                            level("output_tokens_per_s", None, 1000.0 / v, &[]),
                        ),
                    ],
                )
            })
            .collect()
    }

    pub fn shift(commit: &str, before: f64, after: f64, worse: bool) -> Shift {
        Shift {
            commit: commit.into(),
            time: "2026-12-06T16:19:12Z".into(),
            previous_commit: "prev".into(),
            before,
            after,
            relative: (after - before) / before.abs(),
            confidence: 0.9995,
            worse,
            beyond_noise: true,
        }
    }

    pub fn series_check(
        slug: &str,
        label: &str,
        verdict: Verdict,
        shifts: Vec<Shift>,
    ) -> SeriesCheck {
        SeriesCheck {
            slug: slug.into(),
            label: label.into(),
            noise_pct: 5.0,
            commits: 12,
            since: "c0".into(),
            newest: 12.7,
            restarted: String::new(),
            shifts,
            verdict,
        }
    }

    pub fn report(series: Vec<SeriesCheck>, exit_code: u8) -> Report {
        Report {
            spec: "q".into(),
            records: 12,
            series,
            exit_code,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_sparkline_scales_from_lowest_to_highest() {
        assert_eq!(
            sparkline(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]),
            "▁▂▃▄▅▆▇█"
        );
        assert_eq!(sparkline(&[10.0, 10.0, 20.0]), "▁▁█");
        // Flat: mid height; nothing: nothing; NaN is left out.
        assert_eq!(sparkline(&[3.0, 3.0]), "▄▄");
        assert_eq!(sparkline(&[]), "");
        assert_eq!(sparkline(&[f64::NAN, 1.0, f64::INFINITY, 2.0]), "▁█");
        // Only the newest 30 values.
        let many: Vec<f64> = (0..100).map(f64::from).collect();
        let s = sparkline(&many);
        assert_eq!(s.chars().count(), SPARK_VALUES);
        assert!(s.starts_with('▁') && s.ends_with('█'), "{s}");
    }

    #[test]
    fn history_newest_is_the_latest_time_then_the_last_given() {
        use fixtures::rec;
        assert!(newest(&[]).is_none());
        let records = [rec("b", 20, &[]), rec("a", 10, &[]), rec("c", 20, &[])];
        assert_eq!(newest(&records).unwrap().commit, "c");
    }

    #[test]
    fn history_shift_text_reads_as_a_sentence() {
        let s = fixtures::shift("abc1234def", 12.0, 12.732, true);
        assert_eq!(
            shift_text(&s, "ms", "->"),
            "+6.1% at abc1234 (12.0 -> 12.7 ms, confidence 99.9%)"
        );
        assert_eq!(from_to(0.005, 0.007, "fraction", "→"), "0.50% → 0.70%");
        assert_eq!(confidence(1.0), "100.0%");
        assert_eq!(unit_of_label("tpot p50"), "ms");
        assert_eq!(unit_of_label("no_such_metric"), "");
    }
}
