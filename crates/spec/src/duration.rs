//! `Duration`: a length of time written with its unit (`"500ms"`, `"2m"`,
//! `"1m30s"`). Parsing, canonical display, serde and JSON Schema live here.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A non-negative length of time, stored in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(u64);

const UNITS: &[(&str, u64)] = &[
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
];

/// The units a duration accepts, for error hints.
pub const DURATION_UNITS: &str = "ns, us, ms, s, m, h";

impl Duration {
    pub const ZERO: Duration = Duration(0);

    pub const fn from_nanos(ns: u64) -> Self {
        Duration(ns)
    }
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms * 1_000_000)
    }
    pub const fn from_secs(s: u64) -> Self {
        Duration(s * 1_000_000_000)
    }
    pub fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    pub fn as_std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0)
    }
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Self {
        Duration(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

/// Why a duration did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected a duration such as \"500ms\", \"60s\" or \"2m\", found \"{0}\"")]
pub struct ParseDurationError(pub String);

fn unit_nanos(unit: &str) -> Option<u64> {
    match unit {
        "µs" => Some(1_000),
        "sec" | "secs" => Some(1_000_000_000),
        "min" | "mins" => Some(60_000_000_000),
        _ => UNITS.iter().find(|(u, _)| *u == unit).map(|(_, n)| *n),
    }
}

impl FromStr for Duration {
    type Err = ParseDurationError;

    /// Accepts one or more `<number><unit>` parts (`"1m30s"`); the number may
    /// have a fractional part (`"1.5s"`). A bare `"0"` is zero.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseDurationError(s.to_string());
        let text = s.trim();
        if text == "0" {
            return Ok(Duration::ZERO);
        }
        if text.is_empty() {
            return Err(err());
        }
        let mut rest = text;
        let mut total: u128 = 0;
        while !rest.is_empty() {
            let num_end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(err)?;
            let (num, after) = rest.split_at(num_end);
            if num.is_empty() || num.matches('.').count() > 1 || num.ends_with('.') {
                return Err(err());
            }
            let unit_end = after
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(after.len());
            let (unit, next) = after.split_at(unit_end);
            let scale = unit_nanos(unit.trim()).ok_or_else(err)? as u128;
            let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
            let int: u128 = int_part.parse().map_err(|_| err())?;
            let mut value = int.checked_mul(scale).ok_or_else(err)?;
            if !frac_part.is_empty() {
                // Exact decimal arithmetic: frac / 10^len * scale, rounded.
                let digits = frac_part.len().min(18) as u32;
                let frac: u128 = frac_part[..digits as usize].parse().map_err(|_| err())?;
                let denom = 10u128.pow(digits);
                value += (frac * scale + denom / 2) / denom;
            }
            total = total.checked_add(value).ok_or_else(err)?;
            rest = next;
        }
        u64::try_from(total).map(Duration).map_err(|_| err())
    }
}

impl fmt::Display for Duration {
    /// The largest unit that divides the value exactly: `"2m"`, `"1500ms"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("0s");
        }
        for (unit, nanos) in UNITS {
            if self.0 % nanos == 0 {
                return write!(f, "{}{}", self.0 / nanos, unit);
            }
        }
        unreachable!("ns divides every value")
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v: Duration =
            crate::de::from_str_visitor(d, "a duration string such as \"500ms\" or \"2m\"")?;
        if v > crate::limits::MAX_DURATION {
            return Err(serde::de::Error::custom(format!(
                "expected a duration of at most {} (30 days), found {v}",
                crate::limits::MAX_DURATION
            )));
        }
        Ok(v)
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "A length of time with its unit: ns, us, ms, s, m, h (\"500ms\", \"60s\", \"2m\", \"1m30s\").",
            "pattern": r"^\s*(0|([0-9]+(\.[0-9]+)?\s*(ns|us|µs|ms|s|sec|secs|m|min|mins|h))+)\s*$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_units() {
        assert_eq!(
            "500ms".parse::<Duration>().unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!("2m".parse::<Duration>().unwrap(), Duration::from_secs(120));
        assert_eq!(
            "1m30s".parse::<Duration>().unwrap(),
            Duration::from_secs(90)
        );
        assert_eq!(
            "1.5s".parse::<Duration>().unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(
            "250us".parse::<Duration>().unwrap(),
            Duration::from_nanos(250_000)
        );
        assert_eq!("0".parse::<Duration>().unwrap(), Duration::ZERO);
        assert_eq!("1h".parse::<Duration>().unwrap(), Duration::from_secs(3600));
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "5", "ms", "5 parsecs", "1..5s", "-1s", "5s x", "1.s"] {
            assert!(bad.parse::<Duration>().is_err(), "{bad:?} should not parse");
        }
        assert_eq!(
            "60 parsecs".parse::<Duration>().unwrap_err().to_string(),
            "expected a duration such as \"500ms\", \"60s\" or \"2m\", found \"60 parsecs\""
        );
    }

    #[test]
    fn displays_in_largest_exact_unit() {
        assert_eq!(Duration::from_secs(120).to_string(), "2m");
        assert_eq!(Duration::from_millis(1500).to_string(), "1500ms");
        assert_eq!(Duration::from_secs(90).to_string(), "90s");
        assert_eq!(Duration::ZERO.to_string(), "0s");
    }

    proptest! {
        #[test]
        fn display_parse_round_trip(ns in 0u64..(u64::MAX / 4)) {
            let d = Duration::from_nanos(ns);
            prop_assert_eq!(d.to_string().parse::<Duration>().unwrap(), d);
        }

        #[test]
        fn parse_display_parse(n in 0u32..100_000, unit in prop::sample::select(vec!["ns", "us", "ms", "s", "m", "h"])) {
            let text = format!("{n}{unit}");
            let d: Duration = text.parse().unwrap();
            prop_assert_eq!(d.to_string().parse::<Duration>().unwrap(), d);
        }
    }
}
