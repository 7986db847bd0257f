//! `SloExpr`: an SLO gate such as `"p99 < 500ms"`, `"mean <= 20ms"`,
//! `"< 1%"` or `"> 20/s"`: an optional statistic, a comparison and a
//! threshold whose unit says what kind of value it is.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::de::fmt_number;
use super::{Duration, Percent, Rate};
pub use infer_bench_results::metric::{ParseStatError, Stat};

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    pub fn symbol(self) -> &'static str {
        match self {
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        }
    }
    /// Whether `value OP threshold` holds.
    pub fn holds(self, value: f64, threshold: f64) -> bool {
        match self {
            Cmp::Lt => value < threshold,
            Cmp::Le => value <= threshold,
            Cmp::Gt => value > threshold,
            Cmp::Ge => value >= threshold,
        }
    }
}

/// The right-hand side of an expression; its unit says its kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Threshold {
    Duration(Duration),
    Percent(Percent),
    Rate(Rate),
    Number(f64),
}

impl Threshold {
    /// A short word for the kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Threshold::Duration(_) => "a duration",
            Threshold::Percent(_) => "a percentage",
            Threshold::Rate(_) => "a rate",
            Threshold::Number(_) => "a plain number",
        }
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Threshold::Duration(d) => d.fmt(f),
            Threshold::Percent(p) => p.fmt(f),
            Threshold::Rate(r) => r.fmt(f),
            Threshold::Number(n) => f.write_str(&fmt_number(*n)),
        }
    }
}

/// One SLO expression.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SloExpr {
    pub stat: Option<Stat>,
    pub cmp: Cmp,
    pub threshold: Threshold,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseSloError {
    #[error(
        "expected an SLO expression such as \"p99 < 500ms\" or \"< 1%\", found \"{0}\": no comparison (<, <=, >, >=)"
    )]
    NoComparison(String),
    #[error("in SLO expression \"{0}\": {1}")]
    Stat(String, ParseStatError),
    #[error(
        "in SLO expression \"{0}\": expected a threshold such as 500ms, 1%, 20/s or 1000, found \"{1}\""
    )]
    Threshold(String, String),
}

fn parse_threshold(t: &str) -> Option<Threshold> {
    if t.ends_with('%') {
        return t.parse().ok().map(Threshold::Percent);
    }
    if t.contains('/') {
        return t.parse().ok().map(Threshold::Rate);
    }
    if let Ok(n) = t.parse::<f64>() {
        return n.is_finite().then_some(Threshold::Number(n));
    }
    t.parse().ok().map(Threshold::Duration)
}

impl FromStr for SloExpr {
    type Err = ParseSloError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        let pos = text
            .find(['<', '>'])
            .ok_or_else(|| ParseSloError::NoComparison(s.to_string()))?;
        let (lhs, rest) = text.split_at(pos);
        let (cmp, rhs) = if let Some(r) = rest.strip_prefix("<=") {
            (Cmp::Le, r)
        } else if let Some(r) = rest.strip_prefix(">=") {
            (Cmp::Ge, r)
        } else if let Some(r) = rest.strip_prefix('<') {
            (Cmp::Lt, r)
        } else {
            (Cmp::Gt, &rest[1..])
        };
        let lhs = lhs.trim();
        let stat = if lhs.is_empty() {
            None
        } else {
            Some(
                lhs.parse()
                    .map_err(|e| ParseSloError::Stat(s.to_string(), e))?,
            )
        };
        let rhs = rhs.trim();
        let threshold = parse_threshold(rhs)
            .ok_or_else(|| ParseSloError::Threshold(s.to_string(), rhs.to_string()))?;
        Ok(SloExpr {
            stat,
            cmp,
            threshold,
        })
    }
}

impl fmt::Display for SloExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(stat) = self.stat {
            write!(f, "{stat} ")?;
        }
        write!(f, "{} {}", self.cmp.symbol(), self.threshold)
    }
}

impl Serialize for SloExpr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SloExpr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        super::de::from_str_visitor(d, "an SLO expression such as \"p99 < 500ms\"")
    }
}

impl JsonSchema for SloExpr {
    fn schema_name() -> Cow<'static, str> {
        "SloExpr".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "An SLO gate: [statistic] comparison threshold, e.g. \"p99 < 500ms\", \"mean <= 20ms\", \"< 1%\", \"> 20/s\".",
            "pattern": r"^\s*([a-z0-9.]+\s*)?(<=|>=|<|>)\s*\S+\s*$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_forms() {
        let e: SloExpr = "p99 < 500ms".parse().unwrap();
        assert_eq!(e.stat, Some(Stat::Percentile(99.0)));
        assert_eq!(e.cmp, Cmp::Lt);
        assert_eq!(e.threshold, Threshold::Duration(Duration::from_millis(500)));
        let e: SloExpr = "< 1%".parse().unwrap();
        assert_eq!(e.stat, None);
        assert_eq!(e.threshold, Threshold::Percent(Percent::new(1.0).unwrap()));
        let e: SloExpr = "p99.9<=2s".parse().unwrap();
        assert_eq!(e.stat, Some(Stat::Percentile(99.9)));
        assert_eq!(e.cmp, Cmp::Le);
        let e: SloExpr = ">= 20/s".parse().unwrap();
        assert_eq!(
            e.threshold,
            Threshold::Rate(Rate::per_second(20.0).unwrap())
        );
        let e: SloExpr = "mean > 1000".parse().unwrap();
        assert_eq!(e.threshold, Threshold::Number(1000.0));
    }

    #[test]
    fn errors_say_what_was_expected() {
        assert_eq!(
            "p99 500ms".parse::<SloExpr>().unwrap_err().to_string(),
            "expected an SLO expression such as \"p99 < 500ms\" or \"< 1%\", found \"p99 500ms\": no comparison (<, <=, >, >=)"
        );
        assert_eq!(
            "q99 < 5ms".parse::<SloExpr>().unwrap_err().to_string(),
            "in SLO expression \"q99 < 5ms\": expected a statistic: mean, min, max, std or a percentile such as p50, p99, p99.9; found \"q99\""
        );
        assert_eq!(
            "p99 < 5 lightyears"
                .parse::<SloExpr>()
                .unwrap_err()
                .to_string(),
            "in SLO expression \"p99 < 5 lightyears\": expected a threshold such as 500ms, 1%, 20/s or 1000, found \"5 lightyears\""
        );
        assert!("p100 < 5ms".parse::<SloExpr>().is_err());
    }

    #[test]
    fn cmp_holds() {
        assert!(Cmp::Lt.holds(1.0, 2.0));
        assert!(!Cmp::Lt.holds(2.0, 2.0));
        assert!(Cmp::Le.holds(2.0, 2.0));
        assert!(Cmp::Gt.holds(3.0, 2.0));
        assert!(Cmp::Ge.holds(2.0, 2.0));
    }

    fn arb_expr() -> impl Strategy<Value = SloExpr> {
        let stat = prop_oneof![
            Just(None),
            Just(Some(Stat::Mean)),
            Just(Some(Stat::Max)),
            (1u32..999).prop_map(|p| Some(Stat::Percentile(p as f64 / 10.0))),
        ];
        let cmp = prop_oneof![Just(Cmp::Lt), Just(Cmp::Le), Just(Cmp::Gt), Just(Cmp::Ge)];
        let threshold = prop_oneof![
            (0u64..10_000_000_000).prop_map(|n| Threshold::Duration(Duration::from_nanos(n))),
            (0f64..100.0).prop_map(|p| Threshold::Percent(Percent::new(p).unwrap())),
            (0.001f64..1e6).prop_map(|r| Threshold::Rate(Rate::per_second(r).unwrap())),
            (-1e6f64..1e6).prop_map(Threshold::Number),
        ];
        (stat, cmp, threshold).prop_map(|(stat, cmp, threshold)| SloExpr {
            stat,
            cmp,
            threshold,
        })
    }

    proptest! {
        #[test]
        fn round_trip(e in arb_expr()) {
            prop_assert_eq!(e.to_string().parse::<SloExpr>().unwrap(), e);
        }
    }
}
