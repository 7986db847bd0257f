//! `Percent`: a percentage written with its sign (`"1%"`, `"0.5%"`).

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::de::fmt_number;

/// A percentage, kept as written (`12.5` for `"12.5%"`); finite and >= 0.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Percent(f64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected a percentage such as \"1%\" or \"0.5%\", found \"{0}\"")]
pub struct ParsePercentError(pub String);

impl Percent {
    pub fn new(pct: f64) -> Option<Percent> {
        (pct.is_finite() && pct >= 0.0).then_some(Percent(pct))
    }
    /// The value as written: 12.5 for 12.5%.
    pub fn value(self) -> f64 {
        self.0
    }
    /// The value as a fraction: 0.125 for 12.5%.
    pub fn fraction(self) -> f64 {
        self.0 / 100.0
    }
}

impl FromStr for Percent {
    type Err = ParsePercentError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParsePercentError(s.to_string());
        let num = s.trim().strip_suffix('%').ok_or_else(err)?;
        let v: f64 = num.trim().parse().map_err(|_| err())?;
        Percent::new(v).ok_or_else(err)
    }
}

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", fmt_number(self.0))
    }
}

impl Serialize for Percent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Percent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        super::de::from_str_visitor(d, "a percentage string such as \"1%\"")
    }
}

impl JsonSchema for Percent {
    fn schema_name() -> Cow<'static, str> {
        "Percent".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "A percentage: \"1%\", \"0.5%\".",
            "pattern": r"^\s*[0-9]+(\.[0-9]+)?\s*%\s*$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses() {
        assert_eq!("1%".parse::<Percent>().unwrap().fraction(), 0.01);
        assert_eq!("12.5%".parse::<Percent>().unwrap().value(), 12.5);
        for bad in ["1", "-1%", "x%", "%"] {
            assert!(bad.parse::<Percent>().is_err(), "{bad:?}");
        }
        assert_eq!(
            "one percent".parse::<Percent>().unwrap_err().to_string(),
            "expected a percentage such as \"1%\" or \"0.5%\", found \"one percent\""
        );
    }

    proptest! {
        #[test]
        fn round_trip(x in 0f64..1e6) {
            let p = Percent::new(x).unwrap();
            prop_assert_eq!(p.to_string().parse::<Percent>().unwrap(), p);
        }
    }
}
