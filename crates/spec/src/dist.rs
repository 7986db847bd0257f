//! `Dist`: a distribution of token lengths. Written as a number (fixed), a
//! string (`"uniform(64, 256)"`, `"lognormal(median=512, sigma=0.6)"`) or a
//! table (`{ dist = "normal", mean = 512, std = 64 }`).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::de::fmt_number;

/// A distribution of positive integer lengths (tokens).
#[derive(Clone, Debug, PartialEq)]
pub enum Dist {
    Fixed(u32),
    /// Inclusive bounds.
    Uniform {
        min: u32,
        max: u32,
    },
    /// Rounded, then clamped to `[min, max]`.
    Normal {
        mean: f64,
        std: f64,
        min: u32,
        max: u32,
    },
    /// `median * exp(sigma * N(0,1))`, rounded, then clamped.
    LogNormal {
        median: f64,
        sigma: f64,
        min: u32,
        max: u32,
    },
    /// Values drawn with their weights: from a file named in the spec
    /// (resolved when the spec is compiled) or listed inline.
    Empirical(Empirical),
}

/// The source of an empirical distribution.
#[derive(Clone, Debug, PartialEq)]
pub enum Empirical {
    /// A path, relative to the spec; not loaded yet.
    File(String),
    /// `(value, weight)` pairs, weights > 0.
    Values(Vec<(u32, f64)>),
}

/// Upper clamp when none is given.
pub const DEFAULT_MAX: u32 = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseDistError(pub String);

const FORMS: &str = "a number (fixed), \"uniform(min, max)\", \"normal(mean=, std=)\", \"lognormal(median=, sigma=)\", \"empirical(file=PATH)\" or a table with `dist`";

fn bad(found: &str, why: &str) -> ParseDistError {
    ParseDistError(format!(
        "expected a length distribution ({FORMS}); found \"{found}\": {why}"
    ))
}

/// Bounds the wrong way round, whichever way the distribution was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("min ({min}) is greater than max ({max})")]
struct MinAboveMax {
    min: u32,
    max: u32,
}

/// A distribution whose form was understood but whose values are wrong.
fn bad_values(found: &str, why: &str) -> ParseDistError {
    ParseDistError(format!("invalid distribution {found}: {why}"))
}

/// Named arguments of a distribution, before checking.
#[derive(Default, Debug)]
struct Args {
    kind: String,
    positional: Vec<String>,
    named: BTreeMap<String, ArgValue>,
}

#[derive(Debug, Clone)]
enum ArgValue {
    Num(f64),
    Str(String),
    List(Vec<(f64, f64)>),
}

fn allowed_keys(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "fixed" => &["value"],
        "uniform" => &["min", "max"],
        "normal" => &["mean", "std", "min", "max"],
        "lognormal" => &["median", "sigma", "min", "max"],
        "empirical" => &["file", "values", "weights"],
        _ => return None,
    })
}

fn to_len(x: f64, key: &str, found: &str) -> Result<u32, ParseDistError> {
    if x.fract() != 0.0 || !(0.0..=u32::MAX as f64).contains(&x) {
        return Err(bad(
            found,
            &format!(
                "`{key}` must be a whole number of tokens >= 0, got {}",
                fmt_number(x)
            ),
        ));
    }
    Ok(x as u32)
}

impl Args {
    fn build(mut self, found: &str) -> Result<Dist, ParseDistError> {
        let keys = allowed_keys(&self.kind).ok_or_else(|| {
            bad(found, &format!("unknown distribution `{}`; expected fixed, uniform, normal, lognormal or empirical", self.kind))
        })?;
        // Positional arguments fill the keys in order.
        if self.positional.len() > keys.len() {
            return Err(bad(found, "too many arguments"));
        }
        for (i, p) in std::mem::take(&mut self.positional).into_iter().enumerate() {
            let v = match p.parse::<f64>() {
                Ok(n) => ArgValue::Num(n),
                Err(_) => ArgValue::Str(p),
            };
            if self.named.insert(keys[i].to_string(), v).is_some() {
                return Err(bad(found, &format!("`{}` given twice", keys[i])));
            }
        }
        if let Some(k) = self.named.keys().find(|k| !keys.contains(&k.as_str())) {
            return Err(bad(
                found,
                &format!(
                    "`{k}` is not an argument of {}; expected {}",
                    self.kind,
                    keys.join(", ")
                ),
            ));
        }
        let num =
            |named: &BTreeMap<String, ArgValue>, k: &str| -> Result<Option<f64>, ParseDistError> {
                match named.get(k) {
                    None => Ok(None),
                    Some(ArgValue::Num(n)) if n.is_finite() => Ok(Some(*n)),
                    Some(_) => Err(bad(found, &format!("`{k}` must be a number"))),
                }
            };
        let need = |named: &BTreeMap<String, ArgValue>, k: &str| -> Result<f64, ParseDistError> {
            num(named, k)?.ok_or_else(|| bad(found, &format!("{} needs `{k}`", self.kind)))
        };
        let len = |named: &BTreeMap<String, ArgValue>,
                   k: &str,
                   default: u32|
         -> Result<u32, ParseDistError> {
            num(named, k)?
                .map(|x| to_len(x, k, found))
                .unwrap_or(Ok(default))
        };
        let named = &self.named;
        let dist = match self.kind.as_str() {
            "fixed" => Dist::Fixed(to_len(need(named, "value")?, "value", found)?),
            "uniform" => {
                let min = to_len(need(named, "min")?, "min", found)?;
                let max = to_len(need(named, "max")?, "max", found)?;
                Dist::Uniform { min, max }
            }
            "normal" => {
                let mean = need(named, "mean")?;
                let std = need(named, "std")?;
                if std < 0.0 {
                    return Err(bad(found, "`std` must be >= 0"));
                }
                Dist::Normal {
                    mean,
                    std,
                    min: len(named, "min", 1)?,
                    max: len(named, "max", DEFAULT_MAX)?,
                }
            }
            "lognormal" => {
                let median = need(named, "median")?;
                let sigma = need(named, "sigma")?;
                if median <= 0.0 || sigma < 0.0 {
                    return Err(bad(found, "`median` must be > 0 and `sigma` >= 0"));
                }
                Dist::LogNormal {
                    median,
                    sigma,
                    min: len(named, "min", 1)?,
                    max: len(named, "max", DEFAULT_MAX)?,
                }
            }
            _ => match (named.get("file"), named.get("values")) {
                (Some(ArgValue::Str(f)), None) if !named.contains_key("weights") => {
                    Dist::Empirical(Empirical::File(f.clone()))
                }
                (None, Some(ArgValue::List(v))) => {
                    let weights = match named.get("weights") {
                        None => vec![1.0; v.len()],
                        Some(ArgValue::List(w)) if w.len() == v.len() => {
                            w.iter().map(|x| x.0).collect()
                        }
                        Some(_) => {
                            return Err(bad(found, "`weights` must be a list as long as `values`"));
                        }
                    };
                    let mut pairs = Vec::with_capacity(v.len());
                    for ((val, _), w) in v.iter().zip(weights) {
                        if !(w.is_finite() && w > 0.0) {
                            return Err(bad(found, "weights must be > 0"));
                        }
                        pairs.push((to_len(*val, "values", found)?, w));
                    }
                    if pairs.is_empty() {
                        return Err(bad(found, "`values` is empty"));
                    }
                    Dist::Empirical(Empirical::Values(pairs))
                }
                _ => {
                    return Err(bad(
                        found,
                        "empirical needs either `file` (a path) or `values` (a list)",
                    ));
                }
            },
        };
        dist.check()
            .map_err(|e| bad_values(found, &e.to_string()))?;
        Ok(dist)
    }
}

impl Dist {
    /// Range checks shared by every way of writing a distribution.
    fn check(&self) -> Result<(), MinAboveMax> {
        let (min, max) = match self {
            Dist::Uniform { min, max }
            | Dist::Normal { min, max, .. }
            | Dist::LogNormal { min, max, .. } => (*min, *max),
            _ => return Ok(()),
        };
        if min > max {
            return Err(MinAboveMax { min, max });
        }
        Ok(())
    }

    /// The largest length a draw can give (`None` for an unloaded file).
    pub fn upper(&self) -> Option<u32> {
        match self {
            Dist::Fixed(v) => Some(*v),
            Dist::Uniform { max, .. } | Dist::Normal { max, .. } | Dist::LogNormal { max, .. } => {
                Some(*max)
            }
            Dist::Empirical(Empirical::Values(v)) => v.iter().map(|p| p.0).max(),
            Dist::Empirical(Empirical::File(_)) => None,
        }
    }

    /// The mean length, for estimates (clamping ignored).
    pub fn approx_mean(&self) -> f64 {
        match self {
            Dist::Fixed(v) => *v as f64,
            Dist::Uniform { min, max } => (*min as f64 + *max as f64) / 2.0,
            Dist::Normal { mean, min, max, .. } => mean.clamp(*min as f64, *max as f64),
            Dist::LogNormal {
                median,
                sigma,
                min,
                max,
            } => (median * (sigma * sigma / 2.0).exp()).clamp(*min as f64, *max as f64),
            Dist::Empirical(Empirical::Values(v)) => {
                let total: f64 = v.iter().map(|p| p.1).sum();
                v.iter().map(|(x, w)| *x as f64 * w).sum::<f64>() / total
            }
            Dist::Empirical(Empirical::File(_)) => f64::NAN,
        }
    }
}

/// Splits `name(arg, key=value, ...)` into its parts.
fn parse_call(s: &str) -> Result<Args, ParseDistError> {
    let text = s.trim();
    if let Ok(n) = text.parse::<f64>() {
        return Ok(Args {
            kind: "fixed".into(),
            positional: vec![fmt_number(n)],
            ..Args::default()
        });
    }
    let open = text.find('(').ok_or_else(|| bad(s, "no `(`"))?;
    let inner = text[open + 1..]
        .strip_suffix(')')
        .ok_or_else(|| bad(s, "no closing `)`"))?;
    let mut args = Args {
        kind: text[..open].trim().to_string(),
        ..Args::default()
    };
    for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some((k, v)) => {
                let v = v.trim().trim_matches('"');
                let value = v
                    .parse::<f64>()
                    .map(ArgValue::Num)
                    .unwrap_or_else(|_| ArgValue::Str(v.to_string()));
                if args.named.insert(k.trim().to_string(), value).is_some() {
                    return Err(bad(s, &format!("`{}` given twice", k.trim())));
                }
            }
            None if args.named.is_empty() => args.positional.push(part.to_string()),
            None => return Err(bad(s, "positional argument after a named one")),
        }
    }
    Ok(args)
}

impl FromStr for Dist {
    type Err = ParseDistError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_call(s)?.build(s)
    }
}

impl fmt::Display for Dist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = |x: f64| fmt_number(x);
        match self {
            Dist::Fixed(v) => write!(f, "fixed({v})"),
            Dist::Uniform { min, max } => write!(f, "uniform(min={min}, max={max})"),
            Dist::Normal {
                mean,
                std,
                min,
                max,
            } => {
                write!(
                    f,
                    "normal(mean={}, std={}, min={min}, max={max})",
                    n(*mean),
                    n(*std)
                )
            }
            Dist::LogNormal {
                median,
                sigma,
                min,
                max,
            } => {
                write!(
                    f,
                    "lognormal(median={}, sigma={}, min={min}, max={max})",
                    n(*median),
                    n(*sigma)
                )
            }
            Dist::Empirical(Empirical::File(p)) => write!(f, "empirical(file=\"{p}\")"),
            Dist::Empirical(Empirical::Values(v)) => {
                // Inline values have no string form of their own: show a summary.
                write!(f, "empirical({} values)", v.len())
            }
        }
    }
}

impl Serialize for Dist {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Dist::Empirical(Empirical::Values(v)) => {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("dist", "empirical")?;
                m.serialize_entry("values", &v.iter().map(|p| p.0).collect::<Vec<_>>())?;
                m.serialize_entry("weights", &v.iter().map(|p| p.1).collect::<Vec<_>>())?;
                m.end()
            }
            other => s.collect_str(other),
        }
    }
}

impl<'de> Deserialize<'de> for Dist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Dist;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a length distribution: {FORMS}")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dist, E> {
                u32::try_from(v)
                    .map(Dist::Fixed)
                    .map_err(|_| E::custom(format!("expected a token count >= 0, found {v}")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dist, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(-1))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Dist, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Dist, A::Error> {
                let mut args = Args::default();
                let mut shown = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value: toml::Value = map.next_value()?;
                    shown.push(format!("{key} = {value}"));
                    if key == "dist" {
                        args.kind = value
                            .as_str()
                            .map(str::to_string)
                            .ok_or_else(|| de::Error::custom("`dist` must be a string"))?;
                        continue;
                    }
                    let v = match value {
                        toml::Value::Integer(i) => ArgValue::Num(i as f64),
                        toml::Value::Float(x) => ArgValue::Num(x),
                        toml::Value::String(s) => ArgValue::Str(s),
                        toml::Value::Array(a) => ArgValue::List(
                            a.iter()
                                .map(|x| {
                                    x.as_float()
                                        .or(x.as_integer().map(|i| i as f64))
                                        .map(|n| (n, 1.0))
                                })
                                .collect::<Option<Vec<_>>>()
                                .ok_or_else(|| {
                                    de::Error::custom(format!("`{key}` must be a list of numbers"))
                                })?,
                        ),
                        other => {
                            return Err(de::Error::custom(format!(
                                "`{key}` has an unexpected {}",
                                other.type_str()
                            )));
                        }
                    };
                    args.named.insert(key, v);
                }
                let found = format!("{{ {} }}", shown.join(", "));
                if args.kind.is_empty() {
                    return Err(de::Error::custom(format!(
                        "the table {found} needs `dist` (fixed, uniform, normal, lognormal or empirical)"
                    )));
                }
                args.build(&found).map_err(de::Error::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for Dist {
    fn schema_name() -> Cow<'static, str> {
        "Dist".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let bound = json_schema!({"type": "integer", "minimum": 0});
        json_schema!({
            "description": "A token-length distribution: a number (fixed), a string such as \"uniform(64, 256)\", or a table with `dist`.",
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": r"^\s*([0-9]+|(fixed|uniform|normal|lognormal|empirical)\s*\(.*\))\s*$"},
                {"type": "object", "additionalProperties": false, "required": ["dist", "value"],
                 "properties": {"dist": {"const": "fixed"}, "value": bound}},
                {"type": "object", "additionalProperties": false, "required": ["dist", "min", "max"],
                 "properties": {"dist": {"const": "uniform"}, "min": bound, "max": bound}},
                {"type": "object", "additionalProperties": false, "required": ["dist", "mean", "std"],
                 "properties": {"dist": {"const": "normal"}, "mean": {"type": "number"}, "std": {"type": "number", "minimum": 0}, "min": bound, "max": bound}},
                {"type": "object", "additionalProperties": false, "required": ["dist", "median", "sigma"],
                 "properties": {"dist": {"const": "lognormal"}, "median": {"type": "number", "exclusiveMinimum": 0}, "sigma": {"type": "number", "minimum": 0}, "min": bound, "max": bound}},
                {"type": "object", "additionalProperties": false, "required": ["dist"],
                 "properties": {"dist": {"const": "empirical"}, "file": {"type": "string"},
                                "values": {"type": "array", "items": bound, "minItems": 1},
                                "weights": {"type": "array", "items": {"type": "number", "exclusiveMinimum": 0}}}}
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_string_forms() {
        assert_eq!("512".parse::<Dist>().unwrap(), Dist::Fixed(512));
        assert_eq!("fixed(512)".parse::<Dist>().unwrap(), Dist::Fixed(512));
        assert_eq!(
            "uniform(64, 256)".parse::<Dist>().unwrap(),
            Dist::Uniform { min: 64, max: 256 }
        );
        assert_eq!(
            "lognormal(median=512, sigma=0.6, min=16, max=4096)"
                .parse::<Dist>()
                .unwrap(),
            Dist::LogNormal {
                median: 512.0,
                sigma: 0.6,
                min: 16,
                max: 4096
            }
        );
        assert_eq!(
            "normal(mean=100, std=10)".parse::<Dist>().unwrap(),
            Dist::Normal {
                mean: 100.0,
                std: 10.0,
                min: 1,
                max: DEFAULT_MAX
            }
        );
        assert_eq!(
            "empirical(file=\"data/lengths.txt\")"
                .parse::<Dist>()
                .unwrap(),
            Dist::Empirical(Empirical::File("data/lengths.txt".into()))
        );
    }

    #[test]
    fn parses_tables() {
        let d: Dist = toml::from_str::<BTreeMap<String, Dist>>(
            "x = { dist = \"uniform\", min = 1, max = 9 }",
        )
        .unwrap()
        .remove("x")
        .unwrap();
        assert_eq!(d, Dist::Uniform { min: 1, max: 9 });
        let d: Dist = toml::from_str::<BTreeMap<String, Dist>>("x = 7")
            .unwrap()
            .remove("x")
            .unwrap();
        assert_eq!(d, Dist::Fixed(7));
        let d: Dist = toml::from_str::<BTreeMap<String, Dist>>(
            "x = { dist = \"empirical\", values = [10, 20], weights = [3, 1] }",
        )
        .unwrap()
        .remove("x")
        .unwrap();
        assert_eq!(
            d,
            Dist::Empirical(Empirical::Values(vec![(10, 3.0), (20, 1.0)]))
        );
    }

    #[test]
    fn explains_errors() {
        assert_eq!(
            "uniform(256, 64)".parse::<Dist>().unwrap_err().to_string(),
            "invalid distribution uniform(256, 64): min (256) is greater than max (64)"
        );
        assert!(
            "gauss(1,2)"
                .parse::<Dist>()
                .unwrap_err()
                .to_string()
                .contains("unknown distribution `gauss`")
        );
        assert!(
            "uniform(min=1)"
                .parse::<Dist>()
                .unwrap_err()
                .to_string()
                .contains("uniform needs `max`")
        );
        assert!(
            "uniform(1.5, 2)"
                .parse::<Dist>()
                .unwrap_err()
                .to_string()
                .contains("whole number")
        );
        assert!(
            "normal(mean=1, sd=2)"
                .parse::<Dist>()
                .unwrap_err()
                .to_string()
                .contains("`sd` is not an argument of normal")
        );
    }

    fn arb_dist() -> impl Strategy<Value = Dist> {
        prop_oneof![
            (0u32..100_000).prop_map(Dist::Fixed),
            (0u32..1000, 0u32..1000).prop_map(|(a, b)| Dist::Uniform {
                min: a.min(b),
                max: a.max(b)
            }),
            (0f64..1e5, 0f64..1e4, 0u32..100, 100u32..1_000_000).prop_map(
                |(mean, std, min, max)| Dist::Normal {
                    mean,
                    std,
                    min,
                    max
                }
            ),
            (1e-3f64..1e5, 0f64..3.0, 0u32..100, 100u32..1_000_000).prop_map(
                |(median, sigma, min, max)| Dist::LogNormal {
                    median,
                    sigma,
                    min,
                    max
                }
            ),
            "[a-z/._]{1,20}".prop_map(|p| Dist::Empirical(Empirical::File(p))),
        ]
    }

    proptest! {
        #[test]
        fn round_trip(d in arb_dist()) {
            prop_assert_eq!(d.to_string().parse::<Dist>().unwrap(), d);
        }
    }
}
