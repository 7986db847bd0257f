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
