//! The formats of request traces, checked once for `validate` and `run`
//! alike (the same split as `dataset.rs`: this module turns text into
//! records; what is sent is the workload's business).
//!
//! - **mooncake**: JSONL, one request per line, `{"timestamp": 27482,
//!   "input_length": 6955, "output_length": 52, "hash_ids": [46, 47]}`
//!   (timestamp in milliseconds; `hash_ids` the KV-cache blocks the prompt
//!   shares with others, one id per block of `block_tokens` tokens); other
//!   fields are ignored.
//! - **azure**: the Azure LLM inference traces' CSV, a header naming
//!   `TIMESTAMP`, `ContextTokens` and `GeneratedTokens` (any order, other
//!   columns ignored), timestamps as `2023-11-16 18:15:46.6805900` (UTC,
//!   any number of fractional digits, an optional `T`, `Z` or `+00:00`).
//! - **jsonl**: infer-bench's own form, one request per line,
//!   `{"offset_ms": 12.5, "input_tokens": 512, "output_tokens": 64,
//!   "hash_ids": [1, 2]}` (`hash_ids` optional; no other field).
//!
//! Offsets count from the first request of the file, whatever its clock.
//! Timestamps must not decrease, lengths are at least 1 and at most
//! [`crate::limits::MAX_TOKENS`]. Only the requests inside the replay's
//! window are kept, at most [`crate::limits::MAX_TRACE_REQUESTS`] of them,
//! so memory is bounded by the window, not the file. Messages name the
//! line (and column) and quote at most a short excerpt of the file.

pub use crate::raw::TraceFormat;

use serde::Deserialize;

use crate::dataset::DatasetError;
use crate::files::{describe_token, sanitize_message};
use crate::limits::{MAX_TOKENS, MAX_TRACE_REQUESTS};

/// One request of a trace, placed on the replay's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRecord {
    /// Intended send time, ns from the window's start, after the speedup.
    pub at_ns: u64,
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// Shared KV blocks, in prompt order (empty: nothing shared).
    pub hash_ids: Vec<u64>,
}

/// The part of a trace that is replayed, and how fast.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Trace time (from its first request) where the replay starts.
    pub start_ns: u64,
    /// Trace time replayed from `start_ns`; `None`: to the end.
    pub duration_ns: Option<u64>,
    /// Trace time runs this many times faster than the replay's clock.
    pub speedup: f64,
}

impl Window {
    /// The whole trace at its own pace.
    pub const ALL: Window = Window {
        start_ns: 0,
        duration_ns: None,
        speedup: 1.0,
    };
}

/// The requests of a trace inside a window.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    pub records: Vec<TraceRecord>,
    /// Requests in the whole file.
    pub read: u64,
}

/// The shape of a Mooncake line, for hints.
pub const MOONCAKE_SHAPE: &str = "each line is a JSON object such as {\"timestamp\": 27482, \"input_length\": 6955, \"output_length\": 52, \"hash_ids\": [46, 47]}";
/// The shape of an Azure trace, for hints.
pub const AZURE_SHAPE: &str = "an Azure trace is CSV with a header naming TIMESTAMP,ContextTokens,GeneratedTokens and rows such as 2023-11-16 18:15:46.6805900,4808,10";
/// The shape of an infer-bench trace line, for hints.
pub const JSONL_SHAPE: &str = "each line is a JSON object such as {\"offset_ms\": 12.5, \"input_tokens\": 512, \"output_tokens\": 64, \"hash_ids\": [1, 2]}";

#[derive(Deserialize)]
struct MooncakeLine {
    timestamp: f64,
    input_length: i64,
    output_length: i64,
    #[serde(default)]
    hash_ids: Vec<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonlLine {
    offset_ms: f64,
    input_tokens: i64,
    output_tokens: i64,
    #[serde(default)]
    hash_ids: Vec<u64>,
}

/// A request as read, before the window: its time in ns on the file's
/// clock (only differences matter).
struct Raw {
    t_ns: i128,
    input: i64,
    output: i64,
    hash_ids: Vec<u64>,
}

/// Parses a trace's text and keeps the requests inside `window`.
pub fn parse(text: &str, format: TraceFormat, window: Window) -> Result<Parsed, DatasetError> {
    let shape = match format {
        TraceFormat::Mooncake => MOONCAKE_SHAPE,
        TraceFormat::Azure => AZURE_SHAPE,
        TraceFormat::Jsonl => JSONL_SHAPE,
    };
    let err = |line: usize, col: Option<usize>, message: String| DatasetError {
        line: Some(line),
        col,
        message,
        hint: Some(shape),
    };
    let mut out = Parsed::default();
    let mut first: Option<i128> = None;
    let mut last: Option<(i128, usize)> = None;
    let mut lines = text.lines().enumerate();
    let mut columns = None;
    if format == TraceFormat::Azure {
        let Some((i, header)) = lines.by_ref().find(|(_, l)| !l.trim().is_empty()) else {
            return Ok(out);
        };
        columns = Some(azure_columns(header).map_err(|m| err(i + 1, None, m.to_string()))?);
    }
    for (i, line) in lines {
        let lineno = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let raw = match format {
            TraceFormat::Mooncake => {
                let l: MooncakeLine =
                    json_line(line).map_err(|m| err(lineno, None, m.to_string()))?;
                if !l.timestamp.is_finite() {
                    return Err(err(lineno, None, "`timestamp` is not a number".into()));
                }
                Raw {
                    t_ns: (l.timestamp * 1e6).round() as i128,
                    input: l.input_length,
                    output: l.output_length,
                    hash_ids: l.hash_ids,
                }
            }
            TraceFormat::Jsonl => {
                let l: JsonlLine = json_line(line).map_err(|m| err(lineno, None, m.to_string()))?;
                if !l.offset_ms.is_finite() {
                    return Err(err(lineno, None, "`offset_ms` is not a number".into()));
                }
                Raw {
                    t_ns: (l.offset_ms * 1e6).round() as i128,
                    input: l.input_tokens,
                    output: l.output_tokens,
                    hash_ids: l.hash_ids,
                }
            }
            TraceFormat::Azure => azure_row(line, columns.expect("read above"))
                .map_err(|e| err(lineno, e.col(), e.to_string()))?,
        };
        let names = match format {
            TraceFormat::Mooncake => ("timestamp", "input_length", "output_length"),
            TraceFormat::Azure => ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
            TraceFormat::Jsonl => ("offset_ms", "input_tokens", "output_tokens"),
        };
        if raw.t_ns < 0 {
            return Err(err(
                lineno,
                None,
                format!("`{}` is negative; expected a time >= 0", names.0),
            ));
        }
        if let Some((prev, prev_line)) = last {
            if raw.t_ns < prev {
                return Err(DatasetError {
                    hint: Some("a trace is replayed in order: sort it by time"),
                    ..err(
                        lineno,
                        None,
                        format!(
                            "`{}` goes back in time: {} ms before the request on line {prev_line}",
                            names.0,
                            crate::fmt_number((prev - raw.t_ns) as f64 / 1e6)
                        ),
                    )
                });
            }
        }
        last = Some((raw.t_ns, lineno));
        for (name, v) in [(names.1, raw.input), (names.2, raw.output)] {
            if v < 1 || v > MAX_TOKENS as i64 {
                return Err(err(
                    lineno,
                    None,
                    format!("`{name}` is {v}; expected a length of 1 to {MAX_TOKENS} tokens"),
                ));
            }
        }
        if raw.hash_ids.len() > MAX_TOKENS as usize {
            return Err(err(
                lineno,
                None,
                format!("more than {MAX_TOKENS} `hash_ids`"),
            ));
        }
        out.read += 1;
        let t0 = *first.get_or_insert(raw.t_ns);
        let trace_ns = (raw.t_ns - t0) as u128;
        let start = window.start_ns as u128;
        if trace_ns < start {
            continue;
        }
        if window
            .duration_ns
            .is_some_and(|d| trace_ns - start >= d as u128)
        {
            // Sorted: nothing later is inside either, but the rest is
            // still checked, so a bad file fails whatever the window.
            continue;
        }
        if out.records.len() >= MAX_TRACE_REQUESTS {
            return Err(DatasetError {
                hint: Some("replay a shorter window (`start`, `duration`) or cut the file"),
                ..err(
                    lineno,
                    None,
                    format!("the window holds more than {MAX_TRACE_REQUESTS} requests"),
                )
            });
        }
        let at = (trace_ns - start) as f64 / window.speedup;
        out.records.push(TraceRecord {
            at_ns: at.round().min(u64::MAX as f64) as u64,
            input_tokens: raw.input as u32,
            output_tokens: raw.output as u32,
            hash_ids: raw.hash_ids,
        });
    }
    Ok(out)
}

/// A line that is not the JSON object expected. Shown as serde_json's
/// message without its position, any quoted value cut, and the column.
#[derive(Debug, thiserror::Error)]
#[error("{}", shown(.0))]
struct BadJson(serde_json::Error);

fn shown(e: &serde_json::Error) -> String {
    let what = if e.is_syntax() || e.is_eof() {
        "invalid JSON"
    } else {
        "unexpected JSON"
    };
    let s = e.to_string();
    let s = match s.rfind(" at line ") {
        Some(i) => &s[..i],
        None => &s,
    };
    format!("{what}: {} (column {})", sanitize_message(s), e.column())
}

fn json_line<T: for<'de> Deserialize<'de>>(line: &str) -> Result<T, BadJson> {
    serde_json::from_str(line).map_err(BadJson)
}

/// An Azure trace's header without one of the columns read.
#[derive(Debug, thiserror::Error)]
#[error("the header has no {0} column")]
struct MissingColumn(&'static str);

/// Indices of TIMESTAMP, ContextTokens and GeneratedTokens in the header.
fn azure_columns(header: &str) -> Result<[usize; 3], MissingColumn> {
    let names: Vec<String> = header
        .split(',')
        .map(|c| c.trim().trim_matches('"').to_ascii_lowercase())
        .collect();
    let mut out = [0; 3];
    for (k, want) in ["timestamp", "contexttokens", "generatedtokens"]
        .iter()
        .enumerate()
    {
        out[k] = names.iter().position(|n| n == want).ok_or(MissingColumn(
            ["TIMESTAMP", "ContextTokens", "GeneratedTokens"][k],
        ))?;
    }
    Ok(out)
}

/// Why an Azure trace's row cannot be read; `found` is a short
/// description of what stood there.
#[derive(Debug, thiserror::Error)]
enum BadRow {
    #[error("no {name} field (expected {fields} fields)")]
    Missing { name: &'static str, fields: usize },
    #[error("expected a TIMESTAMP such as 2023-11-16 18:15:46.6805900, found {found}")]
    Timestamp { col: usize, found: String },
    #[error("expected {name} as a whole number, found {found}")]
    Count {
        col: usize,
        name: &'static str,
        found: String,
    },
}

impl BadRow {
    /// The column the problem is at (1-based, in characters), if one.
    fn col(&self) -> Option<usize> {
        match self {
            BadRow::Missing { .. } => None,
            BadRow::Timestamp { col, .. } | BadRow::Count { col, .. } => Some(*col),
        }
    }
}

/// One CSV row.
fn azure_row(line: &str, cols: [usize; 3]) -> Result<Raw, BadRow> {
    let mut fields = Vec::new();
    let mut start = 0;
    for (b, c) in line.char_indices().chain([(line.len(), ',')]) {
        if c == ',' {
            fields.push((start, line[start..b].trim()));
            start = b + c.len_utf8();
        }
    }
    let col = |b: usize| line[..b].chars().count() + 1;
    let field = |k: usize, name: &'static str| {
        fields.get(cols[k]).copied().ok_or(BadRow::Missing {
            name,
            fields: cols.iter().max().unwrap_or(&0) + 1,
        })
    };
    let (b, ts) = field(0, "TIMESTAMP")?;
    let t_ns = parse_datetime(ts.trim_matches('"')).ok_or_else(|| BadRow::Timestamp {
        col: col(b),
        found: describe_token(ts),
    })?;
    let mut n = [0i64; 2];
    for (k, name) in [(1, "ContextTokens"), (2, "GeneratedTokens")] {
        let (b, v) = field(k, name)?;
        n[k - 1] = v
            .trim_matches('"')
            .parse::<i64>()
            .map_err(|_| BadRow::Count {
                col: col(b),
                name,
                found: describe_token(v),
            })?;
    }
    Ok(Raw {
        t_ns,
        input: n[0],
        output: n[1],
        hash_ids: Vec::new(),
    })
}

/// `YYYY-MM-DD[ T]HH:MM:SS[.fff...][Z|+00:00]` (UTC) as ns since 1970.
fn parse_datetime(s: &str) -> Option<i128> {
    let s = s
        .strip_suffix('Z')
        .or_else(|| s.strip_suffix("+00:00"))
        .unwrap_or(s);
    let (date, time) = s.split_once([' ', 'T'])?;
    let mut d = date.split('-');
    let num = |p: Option<&str>, len: usize| -> Option<i64> {
        let p = p?;
        (p.len() == len && p.bytes().all(|b| b.is_ascii_digit())).then(|| p.parse().ok())?
    };
    let (y, m, day) = (num(d.next(), 4)?, num(d.next(), 2)?, num(d.next(), 2)?);
    if d.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let (hms, frac) = match time.split_once('.') {
        Some((a, f)) if !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()) => (a, f),
        Some(_) => return None,
        None => (time, ""),
    };
    let mut t = hms.split(':');
    let (h, mi, sec) = (num(t.next(), 2)?, num(t.next(), 2)?, num(t.next(), 2)?);
    if t.next().is_some() || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut frac_ns: i128 = 0;
    for (k, c) in frac.bytes().take(9).enumerate() {
        frac_ns += (c - b'0') as i128 * 10i128.pow(8 - k as u32);
    }
    let days = days_from_civil(y, m, day) as i128;
    Some(((days * 86_400 + (h * 3600 + mi * 60 + sec) as i128) * 1_000_000_000) + frac_ns)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = (if y >= 0 { y } else { y - 399 }) / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str, f: TraceFormat) -> Vec<TraceRecord> {
        parse(text, f, Window::ALL).unwrap().records
    }

    #[test]
    fn the_three_formats_read_the_same_requests() {
        let m = "{\"timestamp\": 1000, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [1, 2]}\n\
                 {\"timestamp\": 1250, \"input_length\": 20, \"output_length\": 3, \"hash_ids\": [1], \"x\": 0}\n";
        let a = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
                 2023-11-16 23:59:59.9000000,10,2\n2023-11-17 00:00:00.15,20,3\n";
        let j = "{\"offset_ms\": 0, \"input_tokens\": 10, \"output_tokens\": 2, \"hash_ids\": [1, 2]}\n\n\
                 {\"offset_ms\": 250, \"input_tokens\": 20, \"output_tokens\": 3, \"hash_ids\": [1]}\n";
        let (m, a, j) = (
            all(m, TraceFormat::Mooncake),
            all(a, TraceFormat::Azure),
            all(j, TraceFormat::Jsonl),
        );
        assert_eq!(m, j);
        assert_eq!(m[1].at_ns, 250_000_000);
        assert_eq!(m[1].hash_ids, [1]);
        let times: Vec<u64> = a.iter().map(|r| r.at_ns).collect();
        assert_eq!(times, [0, 250_000_000], "across midnight");
        assert_eq!((a[1].input_tokens, a[1].output_tokens), (20, 3));
    }

    #[test]
    fn windows_cut_and_speed_up() {
        let text: String = (0..10)
            .map(|i| {
                format!(
                    "{{\"offset_ms\": {}, \"input_tokens\": 1, \"output_tokens\": 1}}\n",
                    i * 100
                )
            })
            .collect();
        let w = Window {
            start_ns: 200_000_000,
            duration_ns: Some(500_000_000),
            speedup: 2.0,
        };
        let p = parse(&text, TraceFormat::Jsonl, w).unwrap();
        assert_eq!(p.read, 10);
        let times: Vec<u64> = p.records.iter().map(|r| r.at_ns).collect();
        assert_eq!(
            times,
            [0, 50_000_000, 100_000_000, 150_000_000, 200_000_000]
        );
    }

    #[test]
    fn bad_traces_name_the_line() {
        let e = |text: &str, f| {
            let e = parse(text, f, Window::ALL).unwrap_err();
            format!("{}: {}", e.line.unwrap(), e.message)
        };
        let ok = "{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1}\n";
        assert_eq!(
            e(
                &format!("{ok}{{\"timestamp\": 4, \"input_length\": 1, \"output_length\": 1}}"),
                TraceFormat::Mooncake
            ),
            "2: `timestamp` goes back in time: 1 ms before the request on line 1"
        );
        assert_eq!(
            e(
                &format!("{ok}{{\"timestamp\": 6, \"output_length\": 1}}"),
                TraceFormat::Mooncake
            ),
            "2: unexpected JSON: missing field `input_length` (column 36)"
        );
        assert_eq!(
            e(
                "{\"timestamp\": -1, \"input_length\": 1, \"output_length\": 1}",
                TraceFormat::Mooncake
            ),
            "1: `timestamp` is negative; expected a time >= 0"
        );
        assert_eq!(
            e(
                "{\"offset_ms\": 1, \"input_tokens\": 0, \"output_tokens\": 1}",
                TraceFormat::Jsonl
            ),
            "1: `input_tokens` is 0; expected a length of 1 to 1048576 tokens"
        );
        assert_eq!(
            e(
                "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,10,x",
                TraceFormat::Azure
            ),
            "2: expected GeneratedTokens as a whole number, found text of 1 characters"
        );
        assert_eq!(
            e("when,ContextTokens,GeneratedTokens\n", TraceFormat::Azure),
            "1: the header has no TIMESTAMP column"
        );
        assert_eq!(
            e(
                "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,10,1",
                TraceFormat::Azure
            ),
            "2: expected a TIMESTAMP such as 2023-11-16 18:15:46.6805900, found text of 9 characters"
        );
    }

    #[test]
    fn datetimes_are_utc_nanoseconds() {
        assert_eq!(parse_datetime("1970-01-01 00:00:00"), Some(0));
        assert_eq!(
            parse_datetime("1970-01-02T00:00:01.5Z"),
            Some(86_401_500_000_000)
        );
        assert_eq!(
            parse_datetime("2023-11-16 18:15:46.6805900").map(|t| t % 1_000_000_000),
            Some(680_590_000)
        );
        for bad in [
            "2023-13-01 00:00:00",
            "2023-11-16",
            "2023-11-16 18:15",
            "2023-11-16 18:15:46.",
        ] {
            assert_eq!(parse_datetime(bad), None, "{bad}");
        }
    }
}
