//! The history in the formats of trackers teams already run. Each takes
//! the records of one spec; the tracker formats take the newest record
//! ([`super::newest`]: a tracker keeps its own history, one upload per
//! commit), the CSV takes every record.
//!
//! - [`bmf`]: Bencher Metric Format JSON, a benchmark per point (its
//!   slug), a measure per gate label, `lower_value`/`upper_value` the
//!   lowest and highest run. `bencher run --adapter json --file bmf.json`
//! - [`github_action_benchmark`]: github-action-benchmark's custom JSON,
//!   an entry per point and gate, one file per [`Direction`] (the action
//!   reads one direction a file): `tool: customSmallerIsBetter` with
//!   `output-file-path: smaller.json`, `tool: customBiggerIsBetter` with
//!   `output-file-path: bigger.json`.
//! - [`openmetrics`]: gauges for a Prometheus Pushgateway, no timestamps
//!   (the Pushgateway refuses them).
//!   `curl --data-binary @metrics.txt http://pushgateway:9091/metrics/job/infer-bench`
//! - [`csv`]: a row per record, point and metric, for a spreadsheet or
//!   `duckdb -c "select * from 'history.csv'"`.
//!
//! Names in the tracker files ([`name`]) keep letters, digits and
//! ` ._-/%` and nothing else: Bencher and github-action-benchmark write
//! benchmark names into pull-request and commit comments we do not
//! render, so no Markdown, HTML or mention may be built from them. The
//! slugs infer-bench makes are unchanged by it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use infer_bench_history::record::{Level, Record};
use infer_bench_results::outside;
use serde_json::{Map, Value, json};

use super::{newest, unit_of};
use crate::report::csv::{field, num};

/// A name or text from a record as a tracker file carries it: ASCII
/// letters, digits, space and `._-/%` kept, every other character
/// (markup, quotes, backticks, `@`, `|`, `:` of a workflow command, line
/// breaks, escapes) written as `_`. Empty text is `_`.
pub fn name(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, ' ' | '.' | '_' | '-' | '/' | '%') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() { "_".into() } else { out }
}

/// Text with its control characters (but a line feed) made visible as
/// U+FFFD: a metrics or CSV file read with `cat` runs no escape
/// sequence. Line feeds are the encoders' to quote or escape.
fn visible(s: &str) -> std::borrow::Cow<'_, str> {
    if s.chars().any(|c| c.is_control() && c != '\n') {
        s.chars()
            .map(|c| {
                if c.is_control() && c != '\n' {
                    '\u{FFFD}'
                } else {
                    c
                }
            })
            .collect::<String>()
            .into()
    } else {
        s.into()
    }
}

/// A label value: [`visible`], then escaped ([`outside::prom_label`]).
fn label(s: &str) -> String {
    outside::prom_label(&visible(s)).into_owned()
}

/// A CSV field: [`visible`], then quoted and defused ([`field`]).
fn cell(s: &str) -> String {
    field(&visible(s))
}

/// The newest record's levels with finite values: (slug, label, level).
fn levels(records: &[Record]) -> Vec<(&str, &str, &Level)> {
    newest(records)
        .map(|r| {
            r.points
                .iter()
                .flat_map(|(slug, p)| {
                    p.metrics
                        .iter()
                        .map(move |(label, l)| (slug.as_str(), label.as_str(), l))
                })
                .filter(|(_, _, l)| l.value.is_finite())
                .collect()
        })
        .unwrap_or_default()
}

/// The lowest and highest finite run, if any.
fn spread(l: &Level) -> Option<(f64, f64)> {
    l.runs
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("JSON values serialize");
    s.push('\n');
    s
}

/// The newest record in Bencher Metric Format:
/// `{"<slug>": {"<gate label>": {"value": v, "lower_value": min run,
/// "upper_value": max run}}}`; the bounds are left out without runs.
/// An empty history is `{}`.
pub fn bmf(records: &[Record]) -> String {
    let mut out: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for (slug, label, l) in levels(records) {
        let mut m = Map::new();
        m.insert("value".into(), json!(l.value));
        if let Some((lo, hi)) = spread(l) {
            m.insert("lower_value".into(), json!(lo));
            m.insert("upper_value".into(), json!(hi));
        }
        out.entry(name(slug))
            .or_default()
            .insert(name(label), Value::Object(m));
    }
    pretty(&json!(out))
}

/// Which way a github-action-benchmark file's values are better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Latencies, error rates: the `customSmallerIsBetter` tool.
    SmallerIsBetter,
    /// Throughputs: the `customBiggerIsBetter` tool.
    BiggerIsBetter,
}

impl Direction {
    /// The action's `tool` input for a file of this direction.
    pub fn tool(self) -> &'static str {
        match self {
            Direction::SmallerIsBetter => "customSmallerIsBetter",
            Direction::BiggerIsBetter => "customBiggerIsBetter",
        }
    }
}

/// The newest record's metrics of one `direction` as github-action-benchmark's
/// custom JSON: `[{"name": "<slug> <gate label>", "unit": "ms", "value":
/// v, "range": "± half the runs' spread", "extra": "commit, runs, noise
/// band"}]`. Metrics this build does not know count as smaller-is-better,
/// as the check reads them. An empty history is `[]`.
pub fn github_action_benchmark(records: &[Record], direction: Direction) -> String {
    let commit = newest(records).map(|r| name(&r.commit)).unwrap_or_default();
    let entries: Vec<Value> = levels(records)
        .into_iter()
        .filter(|(_, _, l)| l.higher_is_worse() == (direction == Direction::SmallerIsBetter))
        .map(|(slug, label, l)| {
            let mut e = Map::new();
            e.insert(
                "name".into(),
                json!(format!("{} {}", name(slug), name(label))),
            );
            e.insert("unit".into(), json!(unit_of(&l.metric)));
            e.insert("value".into(), json!(l.value));
            let mut extra = format!("commit {commit}");
            if let Some((lo, hi)) = spread(l) {
                e.insert("range".into(), json!(format!("± {}", num((hi - lo) / 2.0))));
                let runs: Vec<String> = l.runs.iter().map(|v| num(*v)).collect();
                let _ = write!(extra, "\n{} runs: {}", runs.len(), runs.join(", "));
            }
            if l.noise_pct.is_finite() {
                let _ = write!(extra, "\nnoise band ±{}%", num(l.noise_pct));
            }
            e.insert("extra".into(), json!(extra));
            Value::Object(e)
        })
        .collect();
    pretty(&Value::Array(entries))
}

/// The metric family of the values.
pub const VALUE_GAUGE: &str = "infer_bench_value";
/// The metric family of the noise bands.
pub const NOISE_GAUGE: &str = "infer_bench_noise_pct";

/// A gauge family: its name, its help, and what it reads of a level.
type Family = (&'static str, &'static str, fn(&Level) -> f64);

/// The newest record as OpenMetrics text: two gauge families,
/// `infer_bench_value` (the value, in the metric's unit) and
/// `infer_bench_noise_pct` (the gate's noise band), each sample labelled
/// `{spec, point, metric, stat, unit, commit}` with label values escaped
/// (backslash, double quote, line feed: [`outside::prom_label`]; other
/// control characters become U+FFFD); ends
/// with `# EOF`. No timestamps: the Pushgateway refuses them, and stamps
/// its own `push_time_seconds`.
pub fn openmetrics(records: &[Record]) -> String {
    let mut out = String::new();
    let Some(r) = newest(records) else {
        out.push_str("# EOF\n");
        return out;
    };
    let levels = levels(records);
    let families: [Family; 2] = [
        (
            VALUE_GAUGE,
            "The value of a gated metric at a commit of main, in the metric's unit (label unit).",
            |l| l.value,
        ),
        (
            NOISE_GAUGE,
            "The gate's noise band of a metric at a commit of main, in percent.",
            |l| l.noise_pct,
        ),
    ];
    for (family, help, of) in families {
        let _ = writeln!(out, "# HELP {family} {help}");
        let _ = writeln!(out, "# TYPE {family} gauge");
        for (slug, _, l) in &levels {
            let v = of(l);
            if !v.is_finite() {
                continue;
            }
            let _ = writeln!(
                out,
                "{family}{{spec=\"{}\",point=\"{}\",metric=\"{}\",stat=\"{}\",unit=\"{}\",commit=\"{}\"}} {}",
                label(&r.spec),
                label(slug),
                label(&l.metric),
                label(l.stat.as_deref().unwrap_or("")),
                unit_of(&l.metric),
                label(&r.commit),
                num(v)
            );
        }
    }
    out.push_str("# EOF\n");
    out
}

/// The CSV columns, in order. Add new ones at the end.
pub const CSV_COLUMNS: &[&str] = &[
    "commit",
    "time",
    "spec",
    "point",
    "metric",
    "stat",
    "value",
    "runs",
    "noise_pct",
];

/// Every record as CSV: a row per record, point and metric, in the
/// order given (oldest first from the store), then by point and gate.
/// `runs` is how many runs the value merges; `value` is in the metric's
/// unit. Fields are quoted as RFC 4180 asks and made inert for
/// spreadsheets as the report's CSV does ([`crate::report::csv`]);
/// control characters other than a line feed become U+FFFD.
pub fn csv(records: &[Record]) -> String {
    let mut out = CSV_COLUMNS.join(",");
    out.push('\n');
    for r in records {
        for (slug, p) in &r.points {
            for l in p.metrics.values() {
                let cells = [
                    cell(&r.commit),
                    cell(&r.time),
                    cell(&r.spec),
                    cell(slug),
                    cell(&l.metric),
                    cell(l.stat.as_deref().unwrap_or("")),
                    num(l.value),
                    l.runs.len().to_string(),
                    num(l.noise_pct),
                ];
                out.push_str(&cells.join(","));
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{HOSTILE, history, level, rec};
    use super::*;

    fn hostile() -> Vec<Record> {
        let mut r = rec(
            "c1",
            5,
            &[(
                HOSTILE,
                "tpot p50 <b>@here</b>",
                level("tpot", Some("p50\"\n"), 12.0, &[11.0, 13.5]),
            )],
        );
        r.commit = "=HYPERLINK(\"http://x\")\u{1b}[31m".into();
        vec![r]
    }

    #[test]
    fn history_bmf_is_the_newest_record_by_benchmark_and_measure() {
        let v: Value = serde_json::from_str(&bmf(&history(&[10.0, 12.5]))).unwrap();
        assert_eq!(
            v,
            json!({"sim.a": {
                "tpot p50": {"value": 12.5, "lower_value": 12.0, "upper_value": 13.0},
                "output_tokens_per_s": {"value": 80.0},
            }})
        );
        assert_eq!(bmf(&[]), "{}\n");
    }

    #[test]
    fn history_bmf_names_are_inert() {
        let text = bmf(&hostile());
        let v: Value = serde_json::from_str(&text).unwrap();
        let (bench, measures) = v.as_object().unwrap().iter().next().unwrap();
        assert_eq!(
            bench,
            "_cmd__ /C calc__A0_script_alert_1__/script_____error__pwned__31m_team"
        );
        assert_eq!(
            measures.as_object().unwrap().keys().next().unwrap(),
            "tpot p50 _b__here_/b_"
        );
        for bad in ["<", "@", "|", "\\u001b", "\\n"] {
            assert!(!text.contains(bad), "{bad} in {text}");
        }
    }

    #[test]
    fn history_github_action_benchmark_splits_by_direction() {
        let records = history(&[10.0, 12.5]);
        let smaller: Value = serde_json::from_str(&github_action_benchmark(
            &records,
            Direction::SmallerIsBetter,
        ))
        .unwrap();
        assert_eq!(
            smaller,
            json!([{
                "name": "sim.a tpot p50",
                "unit": "ms",
                "value": 12.5,
                "range": "± 0.5",
                "extra": "commit c1\n2 runs: 12, 13\nnoise band ±5%",
            }])
        );
        let bigger: Value = serde_json::from_str(&github_action_benchmark(
            &records,
            Direction::BiggerIsBetter,
        ))
        .unwrap();
        assert_eq!(
            bigger,
            json!([{
                "name": "sim.a output_tokens_per_s",
                "unit": "tok/s",
                "value": 80.0,
                "extra": "commit c1\nnoise band ±5%",
            }])
        );
        assert_eq!(Direction::BiggerIsBetter.tool(), "customBiggerIsBetter");
        assert_eq!(
            github_action_benchmark(&[], Direction::SmallerIsBetter),
            "[]\n"
        );
        let text = github_action_benchmark(&hostile(), Direction::SmallerIsBetter);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v.as_array().unwrap().len(), 1);
        for bad in ["<", "@", "|", "\u{1b}", "=HYPER", "\""] {
            assert!(
                !v[0]["name"].as_str().unwrap().contains(bad)
                    && !v[0]["extra"].as_str().unwrap().contains(bad),
                "{bad} in {text}"
            );
        }
    }

    /// One sample: its name, its labels in order, its value.
    type Sample = (String, Vec<(String, String)>, f64);

    /// The samples of an OpenMetrics text.
    fn samples(text: &str) -> Vec<Sample> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|line| {
                let open = line.find('{').unwrap();
                let close = line.rfind('}').unwrap();
                let mut labels = Vec::new();
                let body = &line[open + 1..close];
                let mut chars = body.chars().peekable();
                while chars.peek().is_some() {
                    let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
                    assert_eq!(chars.next(), Some('"'), "{line}");
                    let mut val = String::new();
                    loop {
                        match chars.next().expect("a closing quote") {
                            '\\' => match chars.next().unwrap() {
                                'n' => val.push('\n'),
                                c @ ('\\' | '"') => val.push(c),
                                c => panic!("bad escape \\{c} in {line}"),
                            },
                            '"' => break,
                            '\n' => panic!("a raw line break"),
                            c => val.push(c),
                        }
                    }
                    labels.push((key, val));
                    if chars.peek() == Some(&',') {
                        chars.next();
                    }
                }
                let value = line[close + 2..].parse().unwrap();
                (line[..open].to_string(), labels, value)
            })
            .collect()
    }

    #[test]
    fn history_openmetrics_has_typed_gauges_and_ends_with_eof() {
        let text = openmetrics(&history(&[10.0, 12.5]));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "# HELP infer_bench_value The value of a gated metric at a commit of main, in the metric's unit (label unit)."
        );
        assert_eq!(lines[1], "# TYPE infer_bench_value gauge");
        assert_eq!(
            lines[2],
            "infer_bench_value{spec=\"q\",point=\"sim.a\",metric=\"output_tokens_per_s\",stat=\"\",unit=\"tok/s\",commit=\"c1\"} 80"
        );
        assert_eq!(
            lines[3],
            "infer_bench_value{spec=\"q\",point=\"sim.a\",metric=\"tpot\",stat=\"p50\",unit=\"ms\",commit=\"c1\"} 12.5"
        );
        assert_eq!(
            lines[4],
            "# HELP infer_bench_noise_pct The gate's noise band of a metric at a commit of main, in percent."
        );
        assert_eq!(lines[5], "# TYPE infer_bench_noise_pct gauge");
        assert_eq!(lines.last(), Some(&"# EOF"));
        assert_eq!(lines.len(), 9);
        let s = samples(&text);
        assert_eq!(s.len(), 4);
        assert!(s.iter().all(|(_, labels, _)| labels.len() == 6));
        assert_eq!(openmetrics(&[]), "# EOF\n");
    }

    #[test]
    fn history_openmetrics_escapes_label_values() {
        let text = openmetrics(&hostile());
        // One HELP, TYPE and sample per family, and # EOF: nothing broke a line.
        assert_eq!(text.lines().count(), 7, "{text}");
        let s = samples(&text);
        let labels: BTreeMap<&str, &str> = s[0]
            .1
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(labels["point"], HOSTILE.replace('\u{1b}', "\u{FFFD}"));
        assert_eq!(labels["stat"], "p50\"\n");
        assert_eq!(labels["commit"], "=HYPERLINK(\"http://x\")\u{FFFD}[31m");
        assert!(!text.contains('\u{1b}'));
        assert_eq!(s[0].2, 12.0);
    }

    /// RFC 4180 rows: fields split on commas outside quotes, quotes
    /// doubled inside.
    fn parse_csv(text: &str) -> Vec<Vec<String>> {
        let mut rows = vec![];
        let mut row = vec![];
        let mut cell = String::new();
        let mut quoted = false;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match (c, quoted) {
                ('"', true) if chars.peek() == Some(&'"') => {
                    chars.next();
                    cell.push('"');
                }
                ('"', _) => quoted = !quoted,
                (',', false) => row.push(std::mem::take(&mut cell)),
                ('\n', false) => {
                    row.push(std::mem::take(&mut cell));
                    rows.push(std::mem::take(&mut row));
                }
                (c, _) => cell.push(c),
            }
        }
        rows
    }

    #[test]
    fn history_csv_has_a_row_per_record_point_and_metric() {
        let rows = parse_csv(&csv(&history(&[10.0, 12.5])));
        assert_eq!(rows[0], CSV_COLUMNS);
        assert_eq!(rows.len(), 1 + 2 * 2);
        assert_eq!(
            rows[2],
            [
                "c0",
                "1970-01-01T00:16:40Z",
                "q",
                "sim.a",
                "tpot",
                "p50",
                "10",
                "2",
                "5"
            ]
        );
        assert_eq!(rows[3][0], "c1");
        assert_eq!(parse_csv(&csv(&[])), vec![CSV_COLUMNS.to_vec()]);
    }

    #[test]
    fn history_csv_defuses_formulas_and_quotes() {
        let text = csv(&hostile());
        let rows = parse_csv(&text);
        assert_eq!(rows.len(), 2, "{text}");
        let row = &rows[1];
        assert_eq!(row.len(), CSV_COLUMNS.len());
        assert_eq!(row[0], "'=HYPERLINK(\"http://x\")\u{FFFD}[31m");
        assert_eq!(
            row[3],
            format!("'{}", HOSTILE.replace('\u{1b}', "\u{FFFD}"))
        );
        assert!(!text.contains('\u{1b}'));
        assert_eq!(row[5], "p50\"\n");
        for cell in row {
            assert!(
                !cell.starts_with(['=', '+', '-', '@', '\t', '\r']),
                "{cell}"
            );
        }
    }
}
