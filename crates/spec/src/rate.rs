//! `Rate`: an arrival rate written with its time unit (`"20/s"`,
//! `"1200/min"`, `"3600/h"`).

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::de::fmt_number;

/// Requests per second; always finite and positive once parsed.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Rate(f64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseRateError {
    #[error("expected a positive rate such as \"20/s\" or \"1200/min\", found \"{0}\"")]
    Syntax(String),
    #[error("expected a rate between 0.000001/s and 1000000/s, found \"{0}\"")]
    OutOfRange(String),
}

impl Rate {
    /// A rate from requests per second; `None` unless finite and positive.
    pub fn per_second(x: f64) -> Option<Rate> {
        (x.is_finite() && x > 0.0).then_some(Rate(x))
    }
    pub fn as_per_second(self) -> f64 {
        self.0
    }
}

impl FromStr for Rate {
    type Err = ParseRateError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseRateError::Syntax(s.to_string());
        let (num, unit) = s.trim().split_once('/').ok_or_else(err)?;
        let n: f64 = num.trim().parse().map_err(|_| err())?;
        let per = match unit.trim() {
            "s" | "sec" => 1.0,
            "min" | "m" => 60.0,
            "h" | "hour" => 3600.0,
            _ => return Err(err()),
        };
        let r = Rate::per_second(n / per).ok_or_else(err)?;
        let (lo, hi) = (crate::limits::MIN_RATE_PER_S, crate::limits::MAX_RATE_PER_S);
        if !(lo..=hi).contains(&r.0) {
            return Err(ParseRateError::OutOfRange(s.to_string()));
        }
        Ok(r)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/s", fmt_number(self.0))
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        super::de::from_str_visitor(d, "a rate string such as \"20/s\" or \"1200/min\"")
    }
}

impl JsonSchema for Rate {
    fn schema_name() -> Cow<'static, str> {
        "Rate".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "Requests per unit of time: \"20/s\", \"1200/min\", \"3600/h\".",
            "pattern": r"^\s*[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?\s*/\s*(s|sec|m|min|h|hour)\s*$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_units() {
        assert_eq!("20/s".parse::<Rate>().unwrap().as_per_second(), 20.0);
        assert_eq!("1200/min".parse::<Rate>().unwrap().as_per_second(), 20.0);
        assert_eq!("3600/h".parse::<Rate>().unwrap().as_per_second(), 1.0);
        assert_eq!("2.5/s".parse::<Rate>().unwrap().as_per_second(), 2.5);
    }

    #[test]
    fn rejects_bad_rates() {
        for bad in [
            "20",
            "0/s",
            "-1/s",
            "x/s",
            "5/day",
            "inf/s",
            "NaN/s",
            "1e300/s",
            "9223372036854775808/s",
            "1e-300/s",
        ] {
            assert!(bad.parse::<Rate>().is_err(), "{bad:?}");
        }
        assert_eq!(
            "20 per second".parse::<Rate>().unwrap_err().to_string(),
            "expected a positive rate such as \"20/s\" or \"1200/min\", found \"20 per second\""
        );
    }

    #[test]
    fn displays_per_second() {
        assert_eq!("1200/min".parse::<Rate>().unwrap().to_string(), "20/s");
        assert_eq!("2.5/s".parse::<Rate>().unwrap().to_string(), "2.5/s");
    }

    proptest! {
        #[test]
        fn round_trip(x in 1e-2f64..1e6, unit in prop::sample::select(vec!["s", "min", "h"])) {
            let r: Rate = format!("{x}/{unit}").parse().unwrap();
            prop_assert_eq!(r.to_string().parse::<Rate>().unwrap(), r);
        }
    }
}
