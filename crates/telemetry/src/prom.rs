//! A small strict parser of the Prometheus text exposition format
//! (version 0.0.4), as vLLM, SGLang, TGI and llama.cpp serve it on
//! `/metrics`. Like Prometheus itself, it rejects the whole text at the
//! first malformed line, saying which line and why: a half-understood
//! scrape is worse than a failed one, and a failed scrape is recorded, not
//! fatal.
//!
//! Grammar: `# HELP name text`, `# TYPE name type` (counter, gauge,
//! histogram, summary, untyped; at most once per name, before its first
//! sample), other `#` lines are comments, blank lines are skipped, and a
//! sample is `name[{label="value",...}] value [timestamp_ms]`, with names
//! `[a-zA-Z_:][a-zA-Z0-9_:]*`, label names `[a-zA-Z_][a-zA-Z0-9_]*`, label
//! values escaping `\\`, `\"` and `\n`, and values as Go's `ParseFloat`
//! reads them (`NaN`, `+Inf`, `-Inf` included).

use std::collections::BTreeMap;

/// The type a `# TYPE` line declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

impl MetricType {
    fn parse(s: &str) -> Option<MetricType> {
        Some(match s {
            "counter" => MetricType::Counter,
            "gauge" => MetricType::Gauge,
            "histogram" => MetricType::Histogram,
            "summary" => MetricType::Summary,
            "untyped" => MetricType::Untyped,
            _ => return None,
        })
    }
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    /// Label pairs in the order written.
    pub labels: Vec<(String, String)>,
    pub value: f64,
    pub timestamp_ms: Option<i64>,
}

/// A parsed exposition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    pub samples: Vec<Sample>,
    /// Declared types by metric family name.
    pub types: BTreeMap<String, MetricType>,
    pub help: BTreeMap<String, String>,
}

impl Exposition {
    /// Samples of one metric name, every label set.
    pub fn samples_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| s.name == name)
    }

    /// Whether any sample has this name.
    pub fn has(&self, name: &str) -> bool {
        self.samples.iter().any(|s| s.name == name)
    }
}

pub use crate::error::{ParseError, Syntax};

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

fn is_label_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_label_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `s` is a valid metric name.
pub fn valid_metric_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(is_name_start) && c.all(is_name_char)
}

/// The family a sample name belongs to: `x_bucket`, `x_sum`, `x_count`
/// belong to histogram or summary `x` where `x` is declared so.
fn family_of<'a>(name: &'a str, types: &BTreeMap<String, MetricType>) -> &'a str {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if matches!(
                types.get(base),
                Some(MetricType::Histogram | MetricType::Summary)
            ) {
                return base;
            }
        }
    }
    name
}

/// A cursor over one line.
struct Cur<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Cur<'a> {
    fn peek(&self) -> Option<char> {
        self.s[self.i..].chars().next()
    }
    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.i += c.len_utf8();
        Some(c)
    }
    fn skip_blanks(&mut self) -> bool {
        let start = self.i;
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.i += 1;
        }
        self.i > start
    }
    fn take_while(&mut self, f: impl Fn(char) -> bool) -> &'a str {
        let start = self.i;
        while self.peek().is_some_and(&f) {
            self.bump();
        }
        &self.s[start..self.i]
    }
    fn rest(&self) -> &'a str {
        &self.s[self.i..]
    }
}

/// Reads a value as Go's `strconv.ParseFloat` would (what Prometheus uses).
pub fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" => return Some(f64::NAN),
        "+Inf" | "Inf" => return Some(f64::INFINITY),
        "-Inf" => return Some(f64::NEG_INFINITY),
        _ => {}
    }
    // Rust's parser also takes "inf", "infinity" and "nan" in any case;
    // anything alphabetic but the forms above is not a number here.
    if s.chars()
        .any(|c| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
    {
        return None;
    }
    s.parse::<f64>().ok()
}

/// Parses an exposition text.
pub fn parse(text: &str) -> Result<Exposition, ParseError> {
    let mut out = Exposition::default();
    // Families that already have samples (a TYPE after them is an error).
    let mut seen: std::collections::BTreeSet<String> = Default::default();
    for (n, raw) in text.split('\n').enumerate() {
        let line_no = n + 1;
        let err = |problem: Syntax| ParseError {
            line: line_no,
            problem,
        };
        let line = raw.trim_end_matches([' ', '\t']);
        let body = line.trim_start_matches([' ', '\t']);
        if body.is_empty() {
            continue;
        }
        if let Some(comment) = body.strip_prefix('#') {
            let mut c = Cur { s: comment, i: 0 };
            c.skip_blanks();
            let keyword = c.take_while(|ch| ch.is_ascii_alphabetic());
            if (keyword != "HELP" && keyword != "TYPE") || !c.skip_blanks() {
                continue; // a plain comment
            }
            let name = c.take_while(|ch| !matches!(ch, ' ' | '\t'));
            if !valid_metric_name(name) {
                return Err(err(Syntax::InvalidName {
                    keyword: keyword.to_string(),
                    name: name.to_string(),
                }));
            }
            c.skip_blanks();
            if keyword == "HELP" {
                let text = unescape_help(c.rest());
                if out.help.insert(name.to_string(), text).is_some() {
                    return Err(err(Syntax::SecondHelp(name.to_string())));
                }
            } else {
                let t = c.rest();
                let Some(ty) = MetricType::parse(t) else {
                    return Err(err(Syntax::UnknownType {
                        ty: t.to_string(),
                        name: name.to_string(),
                    }));
                };
                if out.types.contains_key(name) {
                    return Err(err(Syntax::SecondType(name.to_string())));
                }
                if seen.contains(name) {
                    return Err(err(Syntax::TypeAfterSample(name.to_string())));
                }
                out.types.insert(name.to_string(), ty);
            }
            continue;
        }
        let sample = parse_sample(body).map_err(err)?;
        seen.insert(family_of(&sample.name, &out.types).to_string());
        out.samples.push(sample);
    }
    Ok(out)
}

fn unescape_help(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\\') => out.push('\\'),
                Some('n') => out.push('\n'),
                // HELP text may escape only backslash and newline; other
                // backslashes are kept as written, as Prometheus does.
                Some(o) => {
                    out.push('\\');
                    out.push(o);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn parse_sample(line: &str) -> Result<Sample, Syntax> {
    let mut c = Cur { s: line, i: 0 };
    if !c.peek().is_some_and(is_name_start) {
        return Err(Syntax::NoName {
            excerpt: clip(line),
        });
    }
    let name = c.take_while(is_name_char).to_string();
    let mut labels = Vec::new();
    let mut blank = c.skip_blanks();
    if c.peek() == Some('{') {
        c.bump();
        loop {
            c.skip_blanks();
            if c.peek() == Some('}') {
                c.bump();
                break;
            }
            if !c.peek().is_some_and(is_label_start) {
                return Err(Syntax::LabelName { name });
            }
            let key = c.take_while(is_label_char).to_string();
            c.skip_blanks();
            if c.bump() != Some('=') {
                return Err(Syntax::NoEquals { key, name });
            }
            c.skip_blanks();
            if c.bump() != Some('"') {
                return Err(Syntax::NoQuote { key, name });
            }
            let mut value = String::new();
            loop {
                match c.bump() {
                    None => {
                        return Err(Syntax::Unclosed { key, name });
                    }
                    Some('"') => break,
                    Some('\\') => match c.bump() {
                        Some('\\') => value.push('\\'),
                        Some('"') => value.push('"'),
                        Some('n') => value.push('\n'),
                        other => {
                            return Err(Syntax::BadEscape {
                                escaped: other,
                                key,
                                name,
                            });
                        }
                    },
                    Some(ch) => value.push(ch),
                }
            }
            if labels.iter().any(|(k, _): &(String, String)| *k == key) {
                return Err(Syntax::DuplicateLabel { key, name });
            }
            labels.push((key, value));
            c.skip_blanks();
            match c.bump() {
                Some(',') => continue,
                Some('}') => break,
                _ => {
                    let key = labels.last().map(|l| l.0.clone()).unwrap_or_default();
                    return Err(Syntax::AfterLabel { key, name });
                }
            }
        }
        blank = c.skip_blanks();
    }
    if !blank {
        return Err(Syntax::NoSpace { name });
    }
    let value_text = c.take_while(|ch| !matches!(ch, ' ' | '\t'));
    let Some(value) = parse_value(value_text) else {
        return Err(Syntax::NotNumber {
            value: value_text.to_string(),
            name,
        });
    };
    c.skip_blanks();
    let ts_text = c.take_while(|ch| !matches!(ch, ' ' | '\t'));
    let timestamp_ms = if ts_text.is_empty() {
        None
    } else {
        match ts_text.parse::<i64>() {
            Ok(ts) => Some(ts),
            Err(_) => {
                return Err(Syntax::NotTimestamp {
                    timestamp: ts_text.to_string(),
                    name,
                });
            }
        }
    };
    c.skip_blanks();
    if !c.rest().is_empty() {
        return Err(Syntax::Trailing {
            excerpt: clip(c.rest()),
            name,
        });
    }
    Ok(Sample {
        name,
        labels,
        value,
        timestamp_ms,
    })
}

fn clip(s: &str) -> String {
    if s.chars().count() > 40 {
        format!("{}...", s.chars().take(40).collect::<String>())
    } else {
        s.to_string()
    }
}

/// Renders an exposition (for tests and fixtures): the inverse of `parse`
/// for texts whose values print back exactly.
#[cfg(test)]
pub fn render(samples: &[Sample]) -> String {
    let mut s = String::new();
    for x in samples {
        s.push_str(&x.name);
        if !x.labels.is_empty() {
            s.push('{');
            let parts: Vec<String> = x
                .labels
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{k}=\"{}\"",
                        v.replace('\\', "\\\\")
                            .replace('"', "\\\"")
                            .replace('\n', "\\n")
                    )
                })
                .collect();
            s.push_str(&parts.join(","));
            s.push('}');
        }
        let v = if x.value.is_nan() {
            "NaN".to_string()
        } else if x.value == f64::INFINITY {
            "+Inf".to_string()
        } else if x.value == f64::NEG_INFINITY {
            "-Inf".to_string()
        } else {
            format!("{:?}", x.value)
        };
        s.push(' ');
        s.push_str(&v);
        if let Some(t) = x.timestamp_ms {
            s.push_str(&format!(" {t}"));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    /// Issue 36, finding 6: a served name with a backslash, a quote or a
    /// line break broke the simulator's exposition, and every scrape of it
    /// failed. Escaped as the text format defines, it parses, and the
    /// label reads back as the name.
    #[test]
    fn a_served_name_of_any_text_survives_the_simulators_exposition() {
        for name in [
            "plain",
            "a\\b",
            "say \"hi\"",
            "two\nlines",
            "x\\\"}\n# TYPE y gauge\ny 1",
        ] {
            let text = infer_bench_sim::server::exposition(
                name,
                &Default::default(),
                3,
                Default::default(),
            );
            let parsed = parse(&text).unwrap_or_else(|e| panic!("{name:?}: {e}\n{text}"));
            let running = parsed
                .samples
                .iter()
                .find(|s| s.name == "vllm:num_requests_running")
                .expect("the running gauge");
            assert_eq!(
                running.labels,
                vec![("model_name".to_string(), name.to_string())]
            );
            assert!(parsed.samples.iter().all(|s| s.name != "y"), "{text}");
        }
    }

    use super::*;
    use proptest::prelude::*;

    fn fixture(path: &str) -> String {
        std::fs::read_to_string(format!(
            "{}/../../tests/fixtures/{path}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn parses_every_form_of_a_sample() {
        let text = "# HELP x_total Things.\\nMore.\n# TYPE x_total counter\n\
                    x_total{a=\"1\",b=\"q\\\"uo\\\\te\\n\"} 3.5e3 1700000000000\n\
                    x_total {a=\"2\",} +Inf\n\
                    # a comment\n\n   \n\
                    y:z NaN\n\
                    y:z{} -Inf\n\
                    w\t-0.25\n";
        let e = parse(text).unwrap();
        assert_eq!(e.samples.len(), 5);
        let s = &e.samples[0];
        assert_eq!(s.name, "x_total");
        assert_eq!(
            s.labels,
            vec![
                ("a".to_string(), "1".to_string()),
                ("b".to_string(), "q\"uo\\te\n".to_string())
            ]
        );
        assert_eq!(s.value, 3500.0);
        assert_eq!(s.timestamp_ms, Some(1_700_000_000_000));
        assert_eq!(e.samples[1].value, f64::INFINITY);
        assert!(e.samples[2].value.is_nan());
        assert_eq!(e.samples[3].value, f64::NEG_INFINITY);
        assert_eq!(e.samples[4].value, -0.25);
        assert_eq!(e.types["x_total"], MetricType::Counter);
        assert_eq!(e.help["x_total"], "Things.\nMore.");
    }

    #[test]
    fn rejects_malformed_lines_with_their_number() {
        let cases = [
            ("a 1\nb{x=\"1\" 2\n", 2, "expected ',' or '}'"),
            ("a one\n", 1, "is not a number"),
            ("9a 1\n", 1, "expected a metric name"),
            ("a{x=1} 1\n", 1, "expected '\"'"),
            ("a{x=\"1\",x=\"2\"} 1\n", 1, "appears twice"),
            ("a{x=\"\\t\"} 1\n", 1, "invalid escape"),
            ("a 1 2 3\n", 1, "unexpected"),
            ("a 1 1.5\n", 1, "timestamp"),
            ("a1\n", 1, "expected a space"),
            ("# TYPE a countr\n", 1, "unknown metric type"),
            ("# TYPE a gauge\n# TYPE a gauge\n", 2, "second # TYPE"),
            ("a 1\n# TYPE a gauge\n", 2, "after its first sample"),
            ("a{x=\"open} 1\n", 1, "not closed"),
            ("a inf\n", 1, "is not a number"),
        ];
        for (text, line, needle) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.problem.to_string().contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn histogram_samples_belong_to_their_family() {
        let text = "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 2\nh_count 1\n";
        assert!(parse(text).is_ok());
        // A TYPE for the family after one of its bucket samples is an error.
        let late = "h_bucket{le=\"1\"} 1\n# TYPE h histogram\n";
        // Without a TYPE first, h_bucket is its own family, so this passes;
        // the rule binds only once the type is known.
        assert!(parse(late).is_ok());
    }

    #[test]
    fn parses_the_recorded_llama_server_metrics() {
        let e = parse(&fixture("llama-server/metrics.prom")).unwrap();
        assert_eq!(
            e.samples_of("llamacpp:tokens_predicted_total")
                .next()
                .unwrap()
                .value,
            32.0
        );
        assert_eq!(
            e.samples_of("llamacpp:prompt_tokens_total")
                .next()
                .unwrap()
                .value,
            36.0
        );
        assert_eq!(e.types["llamacpp:requests_processing"], MetricType::Gauge);
    }

    #[test]
    fn parses_the_vllm_and_sglang_fixtures() {
        for f in [
            "prometheus/vllm.prom",
            "prometheus/sglang.prom",
            "prometheus/tgi.prom",
        ] {
            let e = parse(&fixture(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
            assert!(e.samples.len() > 20, "{f}: {} samples", e.samples.len());
        }
    }

    fn arb_sample() -> impl Strategy<Value = Sample> {
        let name = "[a-zA-Z_:][a-zA-Z0-9_:]{0,12}";
        let label = ("[a-zA-Z_][a-zA-Z0-9_]{0,6}", "[ -~\n\u{e9}\u{4e2d}]{0,8}");
        let value = prop_oneof![
            any::<f64>().prop_filter("finite", |v| v.is_finite()),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            (-1000i64..1000).prop_map(|v| v as f64),
        ];
        (
            name,
            proptest::collection::btree_map(label.0, label.1, 0..4),
            value,
            proptest::option::of(any::<i64>()),
        )
            .prop_map(|(name, labels, value, timestamp_ms)| Sample {
                name,
                labels: labels.into_iter().collect(),
                value,
                timestamp_ms,
            })
    }

    proptest! {
        #[test]
        fn rendered_samples_parse_back(samples in proptest::collection::vec(arb_sample(), 0..12)) {
            let text = render(&samples);
            let e = parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
            prop_assert_eq!(e.samples, samples);
        }

        #[test]
        fn never_panics(text in "[ -~\n\t{}\"\\\\#=,]{0,200}") {
            let _ = parse(&text);
        }
    }

    /// Bytes as a scrape could bring them: anything, as text (the scraper
    /// refuses non-UTF-8, so lossy decoding covers more than it lets in).
    fn arb_text() -> impl Strategy<Value = String> {
        let seeds = prop_oneof![
            Just("x NaN\n".to_string()),
            Just("x{le=\"+Inf\"} +Inf\n".to_string()),
            Just("x -Inf 1\n".to_string()),
            Just("# TYPE x histogram\nx_bucket{le=\"1\"} 1e308\n".to_string()),
            Just("x{a=\"\\".to_string()),
            Just("\u{e9}\u{4e2d} 1\n".to_string()),
        ];
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..300)
                .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
            (seeds, proptest::collection::vec(any::<u8>(), 0..40)).prop_map(|(s, b)| {
                let mut t = s;
                t.push_str(&String::from_utf8_lossy(&b));
                t
            }),
        ]
    }

    /// A scrape of tracked series whose values include everything the
    /// format allows: NaN, infinities, and finite values that add up past
    /// what a float holds.
    fn arb_scrape() -> impl Strategy<Value = String> {
        use crate::scrape::TRACKED;
        let value = prop_oneof![
            Just("NaN".to_string()),
            Just("+Inf".to_string()),
            Just("-Inf".to_string()),
            Just("1.7e308".to_string()),
            Just("-1.7e308".to_string()),
            (-1e6f64..1e6).prop_map(|v| format!("{v}")),
        ];
        let line = (0..TRACKED.len(), 0u8..3, value)
            .prop_map(|(i, label, v)| format!("{}{{engine=\"{label}\"}} {v}\n", TRACKED[i].name));
        proptest::collection::vec(line, 0..30).prop_map(|l| l.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn arbitrary_bytes_never_panic(text in arb_text()) {
            let _ = parse(&text);
        }

        /// Whatever a server's metrics say, what reaches results is finite.
        #[test]
        fn non_finite_values_never_reach_results(scrapes in proptest::collection::vec(arb_scrape(), 1..6)) {
            use crate::scrape::{extract, summarize};
            use crate::series::Span;
            let mut points = Vec::new();
            for (i, text) in scrapes.iter().enumerate() {
                let e = parse(text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
                let values = extract(&e);
                prop_assert!(values.values().all(|v| v.is_finite()), "{values:?}");
                points.push((i as f64, Ok(values)));
            }
            let windows = [Span { start_s: 0.5, end_s: scrapes.len() as f64 }];
            let m = summarize("http://x/metrics", 1.0, &points, &windows);
            let bad = infer_bench_results::finite::non_finite(&m);
            prop_assert!(bad.is_empty(), "non-finite at {:?}", bad.iter().map(|p| p.to_string()).collect::<Vec<_>>());
        }
    }
}
