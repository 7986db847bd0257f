//! The names of everything a point measures, in one place: what kind of
//! value each metric is, its unit, and which direction is worse. The spec
//! (SLOs, regression gates), the results format and the judge all use these
//! names, so a metric is spelled the same everywhere.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What kind of value a metric is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A per-request latency, kept as a distribution (milliseconds).
    Latency,
    /// A per-request token count, kept as a distribution.
    Tokens,
    /// A rate in requests per second (a point-level scalar).
    RequestRate,
    /// A rate in tokens per second (a point-level scalar).
    TokenRate,
    /// A fraction in [0, 1], written as a percentage in specs.
    Ratio,
    /// A plain number (e.g. mean concurrency).
    Count,
}

/// Every metric, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    Ttft,
    TtftFromSend,
    /// Time to the first reasoning token (`reasoning_content`), where the
    /// server reasons.
    TtftReasoning,
    /// Time to the first answer token after reasoning, where the server
    /// reasons.
    TtftAnswer,
    Tpot,
    Itl,
    ItlToken,
    E2e,
    DispatchLag,
    InputTokens,
    OutputTokens,
    RequestThroughput,
    InputTokensPerS,
    OutputTokensPerS,
    TotalTokensPerS,
    Goodput,
    GoodputRatio,
    ErrorRate,
    ConcurrencyMean,
    AchievedSendRate,
    /// Embeddings: inputs embedded per second (successful requests).
    InputsPerS,
    /// Rerank: documents scored per second (successful requests).
    DocumentsPerS,
    /// Rerank: tokens of the documents scored per second.
    DocumentTokensPerS,
    /// Quality: the share of quality prompts answered exactly as the
    /// reference answered them.
    Agreement,
    /// Quality: the share of answer positions holding the reference's
    /// token.
    TokenAgreement,
    /// Quality: the mean position of the first token that differs from
    /// the reference's answer.
    FirstDiff,
    /// Quality: the mean KL divergence of the reference's next-token
    /// distributions from this server's (nats).
    KlMean,
    /// Quality: the share of prompts answered right (task accuracy).
    Accuracy,
}

impl Metric {
    pub const ALL: &'static [Metric] = &[
        Metric::Ttft,
        Metric::TtftFromSend,
        Metric::TtftReasoning,
        Metric::TtftAnswer,
        Metric::Tpot,
        Metric::Itl,
        Metric::ItlToken,
        Metric::E2e,
        Metric::DispatchLag,
        Metric::InputTokens,
        Metric::OutputTokens,
        Metric::RequestThroughput,
        Metric::InputTokensPerS,
        Metric::OutputTokensPerS,
        Metric::TotalTokensPerS,
        Metric::Goodput,
        Metric::GoodputRatio,
        Metric::ErrorRate,
        Metric::ConcurrencyMean,
        Metric::AchievedSendRate,
        Metric::InputsPerS,
        Metric::DocumentsPerS,
        Metric::DocumentTokensPerS,
        Metric::Agreement,
        Metric::TokenAgreement,
        Metric::FirstDiff,
        Metric::KlMean,
        Metric::Accuracy,
    ];

    /// The quality metrics: one figure per server, from the quality phase
    /// (`[quality]`), not from the timed requests.
    pub const QUALITY: &'static [Metric] = &[
        Metric::Agreement,
        Metric::TokenAgreement,
        Metric::FirstDiff,
        Metric::KlMean,
        Metric::Accuracy,
    ];

    /// The distributions recorded per request, in the order results list them.
    pub const DISTRIBUTIONS: &'static [Metric] = &[
        Metric::Ttft,
        Metric::TtftFromSend,
        Metric::Tpot,
        Metric::Itl,
        Metric::ItlToken,
        Metric::E2e,
        Metric::DispatchLag,
        Metric::InputTokens,
        Metric::OutputTokens,
        Metric::TtftReasoning,
        Metric::TtftAnswer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::TtftFromSend => "ttft_from_send",
            Metric::TtftReasoning => "ttft_reasoning",
            Metric::TtftAnswer => "ttft_answer",
            Metric::Tpot => "tpot",
            Metric::Itl => "itl",
            Metric::ItlToken => "itl_token",
            Metric::E2e => "e2e",
            Metric::DispatchLag => "dispatch_lag",
            Metric::InputTokens => "input_tokens",
            Metric::OutputTokens => "output_tokens",
            Metric::RequestThroughput => "request_throughput",
            Metric::InputTokensPerS => "input_tokens_per_s",
            Metric::OutputTokensPerS => "output_tokens_per_s",
            Metric::TotalTokensPerS => "total_tokens_per_s",
            Metric::Goodput => "goodput",
            Metric::GoodputRatio => "goodput_ratio",
            Metric::ErrorRate => "error_rate",
            Metric::ConcurrencyMean => "concurrency_mean",
            Metric::AchievedSendRate => "achieved_send_rate",
            Metric::InputsPerS => "inputs_per_s",
            Metric::DocumentsPerS => "documents_per_s",
            Metric::DocumentTokensPerS => "document_tokens_per_s",
            Metric::Agreement => "agreement",
            Metric::TokenAgreement => "token_agreement",
            Metric::FirstDiff => "first_diff",
            Metric::KlMean => "kl_mean",
            Metric::Accuracy => "accuracy",
        }
    }

    pub fn kind(self) -> Kind {
        match self {
            Metric::Ttft
            | Metric::TtftFromSend
            | Metric::TtftReasoning
            | Metric::TtftAnswer
            | Metric::Tpot
            | Metric::Itl
            | Metric::ItlToken
            | Metric::E2e
            | Metric::DispatchLag => Kind::Latency,
            Metric::InputTokens | Metric::OutputTokens => Kind::Tokens,
            Metric::RequestThroughput
            | Metric::Goodput
            | Metric::AchievedSendRate
            | Metric::InputsPerS
            | Metric::DocumentsPerS => Kind::RequestRate,
            Metric::InputTokensPerS
            | Metric::OutputTokensPerS
            | Metric::TotalTokensPerS
            | Metric::DocumentTokensPerS => Kind::TokenRate,
            Metric::GoodputRatio
            | Metric::ErrorRate
            | Metric::Agreement
            | Metric::TokenAgreement
            | Metric::Accuracy => Kind::Ratio,
            Metric::ConcurrencyMean | Metric::FirstDiff | Metric::KlMean => Kind::Count,
        }
    }

    /// Whether the metric comes from the quality phase (see [`Metric::QUALITY`]).
    pub fn is_quality(self) -> bool {
        Metric::QUALITY.contains(&self)
    }

    /// Whether the metric is a per-request distribution (needs a statistic).
    pub fn is_distribution(self) -> bool {
        matches!(self.kind(), Kind::Latency | Kind::Tokens)
    }

    /// Whether a larger value is worse (latency, errors) or better
    /// (throughput, goodput). The judge orients every metric so up is worse.
    pub fn higher_is_worse(self) -> bool {
        if self == Metric::FirstDiff {
            return false;
        }
        match self.kind() {
            Kind::Latency | Kind::Count => true,
            Kind::Tokens => false,
            Kind::RequestRate | Kind::TokenRate => false,
            Kind::Ratio => self == Metric::ErrorRate,
        }
    }

    /// The unit values are reported in.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::InputsPerS => return "inputs/s",
            Metric::DocumentsPerS => return "docs/s",
            Metric::FirstDiff => return "tokens",
            Metric::KlMean => return "nats",
            _ => {}
        }
        match self.kind() {
            Kind::Latency => "ms",
            Kind::Tokens => "tokens",
            Kind::RequestRate => "req/s",
            Kind::TokenRate => "tok/s",
            Kind::Ratio => "fraction",
            Kind::Count => "",
        }
    }

    pub fn names() -> impl Iterator<Item = &'static str> {
        Metric::ALL.iter().map(|m| m.name())
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown metric `{0}`")]
pub struct UnknownMetric(pub String);

impl FromStr for Metric {
    type Err = UnknownMetric;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Metric::ALL
            .iter()
            .copied()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownMetric(s.to_string()))
    }
}

/// Which statistic of a distribution an expression gates.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub enum Stat {
    Mean,
    Min,
    Max,
    Std,
    /// A percentile in (0, 100): `p99` is 99.0, `p99.9` is 99.9.
    Percentile(f64),
}

impl Stat {
    /// The statistic's name as written and as used in results (`p99.9`).
    pub fn name(self) -> String {
        match self {
            Stat::Mean => "mean".into(),
            Stat::Min => "min".into(),
            Stat::Max => "max".into(),
            Stat::Std => "std".into(),
            Stat::Percentile(p) => format!("p{}", fmt_number(p)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "expected a statistic: mean, min, max, std or a percentile such as p50, p99, p99.9; found \"{0}\""
)]
pub struct ParseStatError(pub String);

impl FromStr for Stat {
    type Err = ParseStatError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseStatError(s.to_string());
        match s.trim() {
            "mean" | "avg" => Ok(Stat::Mean),
            "min" => Ok(Stat::Min),
            "max" => Ok(Stat::Max),
            "std" => Ok(Stat::Std),
            "median" => Ok(Stat::Percentile(50.0)),
            other => {
                let p: f64 = other
                    .strip_prefix('p')
                    .ok_or_else(err)?
                    .parse()
                    .map_err(|_| err())?;
                if p > 0.0 && p < 100.0 {
                    Ok(Stat::Percentile(p))
                } else {
                    Err(err())
                }
            }
        }
    }
}

impl fmt::Display for Stat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl Serialize for Stat {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Stat {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_str_visitor(d, "a statistic such as \"p99\" or \"mean\"")
    }
}

impl JsonSchema for Stat {
    fn schema_name() -> Cow<'static, str> {
        "Stat".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "mean, min, max, std, median or a percentile: p50, p90, p99, p99.9.",
            "pattern": r"^(mean|avg|min|max|std|median|p[0-9]+(\.[0-9]+)?)$"
        })
    }
}

/// Deserializes a typed string through its `FromStr`, saying what was
/// expected when the value is not a string.
pub fn from_str_visitor<'de, D, T>(d: D, expecting: &'static str) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: fmt::Display,
{
    struct V<T>(&'static str, PhantomData<T>);
    impl<T> Visitor<'_> for V<T>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            v.parse().map_err(E::custom)
        }
    }
    d.deserialize_str(V(expecting, PhantomData))
}

/// Formats an `f64` for people and for round trips: integral values without
/// a fractional part, others in Rust's shortest round-trip form.
pub fn fmt_number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in Metric::ALL {
            assert_eq!(m.name().parse::<Metric>().unwrap(), *m);
        }
        assert!("latency".parse::<Metric>().is_err());
    }

    #[test]
    fn orientation() {
        assert!(Metric::Ttft.higher_is_worse());
        assert!(Metric::ErrorRate.higher_is_worse());
        assert!(!Metric::OutputTokensPerS.higher_is_worse());
        assert!(!Metric::GoodputRatio.higher_is_worse());
        assert!(!Metric::Agreement.higher_is_worse());
        assert!(!Metric::FirstDiff.higher_is_worse());
        assert!(!Metric::Accuracy.higher_is_worse());
        assert!(Metric::KlMean.higher_is_worse());
        assert!(
            Metric::QUALITY
                .iter()
                .all(|m| m.is_quality() && !m.is_distribution())
        );
    }
}
