//! What a server answered to a quality prompt, as plain data: the text,
//! and, where the server returned log-probabilities, each generated token
//! with its own and those of the most likely alternatives at its position.
//! The judge's `quality` module compares a precision's answers with a
//! reference's; `protocol::answer` reads them from a server's response.
//!
//! Everything here came from a server, so the text is [`Outside`], and
//! every list is bounded by the reader ([`MAX_TOKENS`], [`MAX_TOP`],
//! [`MAX_TOKEN_BYTES`], [`MAX_TEXT_BYTES`]): a hostile server costs at most
//! that much memory per answer.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::outside::Outside;

/// The most tokens of one answer that are kept (with their
/// log-probabilities); a longer answer is marked `truncated`.
pub const MAX_TOKENS: usize = 4096;
/// The most alternatives kept per token position.
pub const MAX_TOP: usize = 20;
/// The longest token text kept (bytes); a longer one is cut at a
/// character boundary.
pub const MAX_TOKEN_BYTES: usize = 256;
/// The longest answer text kept (bytes).
pub const MAX_TEXT_BYTES: usize = 64 * 1024;

/// One answer to one quality prompt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Answer {
    /// The answer's text (what the server generated, without the prompt).
    pub text: Outside,
    /// The generated tokens with their log-probabilities, in order; empty
    /// when the server returned none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<TokenChoice>,
    /// The server's reason for stopping (`stop`, `length`), where given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish: Option<Outside>,
    /// The text or the token list was longer than what is kept.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// One generated token: its text, its natural log-probability, and the
/// most likely tokens at its position (the server's `top_logprobs`),
/// most likely first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TokenChoice {
    pub token: Outside,
    pub logprob: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top: Vec<Alternative>,
}

/// A token the server considered at a position, with its log-probability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Alternative {
    pub token: Outside,
    pub logprob: f64,
}

/// The most examples of differing answers a point keeps.
pub const MAX_EXAMPLES: usize = 3;
/// The longest prompt or answer text an example keeps (bytes).
pub const MAX_EXAMPLE_BYTES: usize = 2048;

/// What the quality phase found for a point's server (its target, model
/// and precision): how its greedy answers to the quality prompts agree
/// with the reference's, and, with expected answers, how many it got
/// right. Every point of the same server carries the same figures: the
/// phase runs once per server, outside the timed window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PointQuality {
    /// The reference's server, as `target/model/precision`.
    pub reference: String,
    /// This point's server is the reference (its agreement is with itself).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_reference: bool,
    /// SHA-256 of the prompts and the request settings (max_tokens,
    /// logprobs, API, seed): two results compare only with equal ones.
    pub prompt_set: String,
    /// Prompts asked.
    pub prompts: u64,
    /// Prompts answered (the rest failed; see `failures`).
    pub answered: u64,
    /// Failed prompts by error class, with an example message.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub failures: std::collections::BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_example: Option<Outside>,
    /// How long the phase took (wall clock; 0 on the virtual clock), s.
    pub elapsed_s: f64,
    /// Agreement with the reference; absent when it could not be measured
    /// (see `note`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreement: Option<AgreementResult>,
    /// Task accuracy against the prompts' expected answers, where given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<AccuracyResult>,
    /// Why a figure is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The answers that differed from the reference's earliest, side by
    /// side (at most [`MAX_EXAMPLES`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<QualityExample>,
}

impl PointQuality {
    /// The value of a quality metric; `None` for another metric or where
    /// the figure could not be measured.
    pub fn value(&self, metric: crate::metric::Metric) -> Option<f64> {
        use crate::metric::Metric;
        let a = self.agreement.as_ref();
        match metric {
            Metric::Agreement => a.map(|a| a.exact_match),
            Metric::TokenAgreement => a.map(|a| a.token_agreement),
            Metric::FirstDiff => a.map(|a| a.first_diff_mean),
            Metric::KlMean => a.and_then(|a| a.kl_mean),
            Metric::Accuracy => self.accuracy.as_ref().map(|x| x.rate),
            _ => None,
        }
    }
}

/// How a server's answers agree with the reference's (`docs/metrics.md`,
/// "Quality").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgreementResult {
    /// Prompts both answered (pairs compared).
    pub compared: u64,
    /// Pairs whose whole texts are equal.
    pub exact: u64,
    /// `exact / compared` (the `agreement` metric), with its 95% Wilson
    /// interval.
    pub exact_match: f64,
    pub exact_low: f64,
    pub exact_high: f64,
    /// Mean position of the first differing unit (`first_diff`); an equal
    /// answer counts its length. With its standard error over prompts.
    pub first_diff_mean: f64,
    pub first_diff_se: f64,
    /// Equal positions over all positions of the longer answer of each
    /// pair (`token_agreement`).
    pub token_agreement: f64,
    /// "tokens" (the servers' own) or "words" (without token lists).
    pub unit: String,
    /// Next-token distributions compared for KL.
    #[serde(default)]
    pub positions: u64,
    /// Mean KL(reference || this) over those positions, nats (`kl_mean`),
    /// with its standard error over prompts; absent without
    /// log-probabilities on both sides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kl_mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kl_se: Option<f64>,
}

/// Task accuracy: answers scored right against the expected ones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AccuracyResult {
    /// The scorer (`exact`, `normalized`, `regex`, `numeric`, `choice`).
    pub scorer: String,
    pub scored: u64,
    pub correct: u64,
    /// `correct / scored` (the `accuracy` metric), with its 95% Wilson
    /// interval.
    pub rate: f64,
    pub low: f64,
    pub high: f64,
}

/// One prompt whose answer differed from the reference's, side by side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QualityExample {
    /// The prompt's index in the prompt set.
    pub index: u64,
    pub prompt: Outside,
    pub reference: Outside,
    pub answer: Outside,
    /// Position of the first differing unit.
    pub first_diff: u64,
}
