//! Quality prompts: the greedy request that asks a server for its answer
//! and the log-probabilities behind it, and the reading of that answer
//! into a [`results::quality::Answer`](infer_bench_results::quality::Answer).
//!
//! The request is OpenAI's chat or completions, not streamed, decoded
//! greedily (`temperature` 0, `top_p` 1, a fixed `seed`), with
//! `logprobs`/`top_logprobs` when asked for. The answer is read in either
//! shape servers return log-probabilities in: chat's
//! `logprobs.content[{token, logprob, top_logprobs}]` (OpenAI, vLLM,
//! llama.cpp, SGLang) or the legacy completions'
//! `logprobs.{tokens, token_logprobs, top_logprobs}` (OpenAI, vLLM).
//! What is kept is bounded by the constants of `results::quality`.

use std::collections::BTreeMap;

use infer_bench_results::outside::Outside;
use infer_bench_results::quality::{
    Alternative, Answer, MAX_TEXT_BYTES, MAX_TOKEN_BYTES, MAX_TOKENS, MAX_TOP, TokenChoice,
};
use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::Unreadable;

/// The lowest log-probability kept: a lower one, or none (`null`, as some
/// servers write minus infinity), is read as this, a probability of zero
/// for every purpose of the quality metrics.
pub const LOGPROB_FLOOR: f64 = -1000.0;

/// Which OpenAI request a quality prompt is sent as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerApi {
    /// `/chat/completions`: the prompt as one user message.
    Chat,
    /// `/completions`: the prompt as it is.
    Completions,
}

impl AnswerApi {
    /// The path under the target's base URL.
    pub fn path(self) -> &'static str {
        match self {
            AnswerApi::Chat => "chat/completions",
            AnswerApi::Completions => "completions",
        }
    }
}

/// One greedy request for a quality prompt.
#[derive(Debug, Clone)]
pub struct AnswerRequest<'a> {
    pub api: AnswerApi,
    /// The model name the server serves.
    pub model: &'a str,
    pub prompt: &'a str,
    pub max_tokens: u32,
    /// How many alternatives per position to ask for (0: no
    /// log-probabilities); at most [`MAX_TOP`].
    pub top_logprobs: u32,
    pub seed: u64,
}

impl AnswerRequest<'_> {
    /// The JSON body.
    pub fn body(&self) -> Vec<u8> {
        let k = (self.top_logprobs as usize).min(MAX_TOP);
        let mut body = serde_json::json!({
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": 0,
            "top_p": 1,
            "seed": self.seed,
            "stream": false,
        });
        let m = body.as_object_mut().expect("an object");
        match self.api {
            AnswerApi::Chat => {
                m.insert(
                    "messages".into(),
                    serde_json::json!([{"role": "user", "content": self.prompt}]),
                );
                if k > 0 {
                    m.insert("logprobs".into(), true.into());
                    m.insert("top_logprobs".into(), k.into());
                }
            }
            AnswerApi::Completions => {
                m.insert("prompt".into(), self.prompt.into());
                if k > 0 {
                    m.insert("logprobs".into(), k.into());
                }
            }
        }
        serde_json::to_vec(&body).expect("JSON of plain values")
    }
}

#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    choices: Vec<ChoiceWire>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct ChoiceWire {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    message: Option<MessageWire>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    logprobs: Option<LogprobsWire>,
}

#[derive(Deserialize)]
struct MessageWire {
    #[serde(default)]
    content: Option<String>,
}

/// Both shapes in one: chat's `content`, or the legacy lists.
#[derive(Deserialize)]
struct LogprobsWire {
    #[serde(default)]
    content: Option<Vec<ChatTokenWire>>,
    #[serde(default)]
    tokens: Option<Vec<String>>,
    #[serde(default)]
    token_logprobs: Option<Vec<Option<f64>>>,
    #[serde(default)]
    top_logprobs: Option<Vec<Option<LegacyTop>>>,
}

/// One position's alternatives in the legacy shape: token to
/// log-probability.
type LegacyTop = BTreeMap<String, Option<f64>>;

#[derive(Deserialize)]
struct ChatTokenWire {
    #[serde(default)]
    token: String,
    #[serde(default)]
    logprob: Option<f64>,
    #[serde(default)]
    top_logprobs: Vec<AlternativeWire>,
}

#[derive(Deserialize)]
struct AlternativeWire {
    #[serde(default)]
    token: String,
    #[serde(default)]
    logprob: Option<f64>,
}

/// Reads a whole (non-streamed) chat or completions answer: the first
/// choice's text, finish reason and log-probabilities, bounded.
pub fn read(body: &[u8]) -> Result<Answer, Unreadable> {
    let wire: Body = serde_json::from_slice(body)
        .map_err(|e| Unreadable(format!("the answer is not a chat or completions body: {e}")))?;
    if wire.error.is_some() {
        return Err(Unreadable(format!(
            "the server answered with an error: {}",
            crate::openai::error_body_message(body)
        )));
    }
    let Some(choice) = wire.choices.into_iter().next() else {
        return Err(Unreadable("the answer has no choices".into()));
    };
    let text = choice
        .message
        .and_then(|m| m.content)
        .or(choice.text)
        .unwrap_or_default();
    let mut truncated = text.len() > MAX_TEXT_BYTES;
    let text = cut(text, MAX_TEXT_BYTES);
    let mut tokens = Vec::new();
    if let Some(lp) = choice.logprobs {
        if let Some(content) = lp.content {
            truncated |= content.len() > MAX_TOKENS;
            tokens = content
                .into_iter()
                .take(MAX_TOKENS)
                .map(|t| TokenChoice {
                    token: Outside::new(cut(t.token, MAX_TOKEN_BYTES)),
                    logprob: floor(t.logprob),
                    top: ranked(
                        t.top_logprobs
                            .into_iter()
                            .map(|a| (a.token, floor(a.logprob))),
                    ),
                })
                .collect();
        } else if let Some(list) = lp.tokens {
            truncated |= list.len() > MAX_TOKENS;
            let lps = lp.token_logprobs.unwrap_or_default();
            let mut tops = lp.top_logprobs.unwrap_or_default().into_iter();
            tokens = list
                .into_iter()
                .take(MAX_TOKENS)
                .enumerate()
                .map(|(i, token)| TokenChoice {
                    token: Outside::new(cut(token, MAX_TOKEN_BYTES)),
                    logprob: floor(lps.get(i).copied().flatten()),
                    top: ranked(
                        tops.next()
                            .flatten()
                            .unwrap_or_default()
                            .into_iter()
                            .map(|(t, l)| (t, floor(l))),
                    ),
                })
                .collect();
        }
    }
    Ok(Answer {
        text: Outside::new(text),
        tokens,
        finish: choice
            .finish_reason
            .map(|f| Outside::new(cut(f, MAX_TOKEN_BYTES))),
        truncated,
    })
}

/// The alternatives, most likely first (ties in the server's order), at
/// most [`MAX_TOP`].
fn ranked(alternatives: impl Iterator<Item = (String, f64)>) -> Vec<Alternative> {
    let mut all: Vec<Alternative> = alternatives
        .take(4 * MAX_TOP)
        .map(|(token, logprob)| Alternative {
            token: Outside::new(cut(token, MAX_TOKEN_BYTES)),
            logprob,
        })
        .collect();
    all.sort_by(|a, b| b.logprob.total_cmp(&a.logprob));
    all.truncate(MAX_TOP);
    all
}

fn floor(logprob: Option<f64>) -> f64 {
    match logprob {
        Some(l) if l.is_finite() => l.clamp(LOGPROB_FLOOR, 0.0),
        _ => LOGPROB_FLOOR,
    }
}

/// `s` cut to at most `max` bytes, at a character boundary.
fn cut(mut s: String, max: usize) -> String {
    let end = infer_bench_results::outside::clip(&s, max).len();
    s.truncate(end);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_logprobs_are_read_ranked_and_floored() {
        let body = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"Hi there"},
            "finish_reason":"length","logprobs":{"content":[
              {"token":"Hi","logprob":-0.1,"bytes":[72,105],"top_logprobs":[
                 {"token":" Hello","logprob":-2.5},{"token":"Hi","logprob":-0.1},{"token":"x","logprob":null}]},
              {"token":" there","logprob":-3000.0,"top_logprobs":[]}]}}]}"#;
        let a = read(body).unwrap();
        assert_eq!(a.text.unencoded(), "Hi there");
        assert_eq!(a.finish.as_ref().unwrap().unencoded(), "length");
        assert_eq!(a.tokens.len(), 2);
        assert_eq!(a.tokens[0].token.unencoded(), "Hi");
        let top: Vec<(&str, f64)> = a.tokens[0]
            .top
            .iter()
            .map(|t| (t.token.unencoded(), t.logprob))
            .collect();
        assert_eq!(
            top,
            vec![("Hi", -0.1), (" Hello", -2.5), ("x", LOGPROB_FLOOR)]
        );
        assert_eq!(a.tokens[1].logprob, LOGPROB_FLOOR);
        assert!(!a.truncated);
    }

    #[test]
    fn legacy_completions_logprobs_are_read() {
        let body = br#"{"choices":[{"text":" a b","finish_reason":"stop","logprobs":{
            "tokens":[" a"," b"],"token_logprobs":[-0.5,null],
            "top_logprobs":[{" a":-0.5," c":-1.5},null],"text_offset":[0,2]}}]}"#;
        let a = read(body).unwrap();
        assert_eq!(a.text.unencoded(), " a b");
        assert_eq!(a.tokens.len(), 2);
        assert_eq!(a.tokens[0].logprob, -0.5);
        assert_eq!(a.tokens[0].top.len(), 2);
        assert_eq!(a.tokens[0].top[0].token.unencoded(), " a");
        assert_eq!(a.tokens[1].logprob, LOGPROB_FLOOR);
        assert!(a.tokens[1].top.is_empty());
    }

    #[test]
    fn a_hostile_answer_is_kept_within_bounds() {
        let long_token = "é".repeat(MAX_TOKEN_BYTES);
        let tokens: Vec<serde_json::Value> = (0..MAX_TOKENS + 10)
            .map(|_| {
                let top: Vec<serde_json::Value> = (0..100)
                    .map(|i| serde_json::json!({"token": long_token, "logprob": -(i as f64)}))
                    .collect();
                serde_json::json!({"token": long_token, "logprob": 0.5, "top_logprobs": top})
            })
            .collect();
        let body = serde_json::json!({"choices": [{"message": {"content": "x".repeat(MAX_TEXT_BYTES + 1)},
            "logprobs": {"content": tokens}}]});
        let a = read(&serde_json::to_vec(&body).unwrap()).unwrap();
        assert!(a.truncated);
        assert_eq!(a.text.unencoded().len(), MAX_TEXT_BYTES);
        assert_eq!(a.tokens.len(), MAX_TOKENS);
        for t in &a.tokens {
            assert!(t.token.unencoded().len() <= MAX_TOKEN_BYTES);
            assert!(t.top.len() <= MAX_TOP);
            // A log-probability above zero is not one: read as certain.
            assert_eq!(t.logprob, 0.0);
        }
    }

    #[test]
    fn errors_and_empty_answers_are_unreadable() {
        assert!(read(br#"{"error":{"message":"no such model"}}"#).is_err());
        assert!(read(br#"{"choices":[]}"#).is_err());
        assert!(read(b"not json").is_err());
    }

    #[test]
    fn the_request_is_greedy_and_asks_for_logprobs() {
        let r = AnswerRequest {
            api: AnswerApi::Chat,
            model: "m",
            prompt: "2+2?",
            max_tokens: 16,
            top_logprobs: 50,
            seed: 7,
        };
        let v: serde_json::Value = serde_json::from_slice(&r.body()).unwrap();
        assert_eq!(v["temperature"], 0);
        assert_eq!(v["seed"], 7);
        assert_eq!(v["logprobs"], true);
        assert_eq!(v["top_logprobs"], MAX_TOP);
        assert_eq!(v["messages"][0]["content"], "2+2?");
        let c = AnswerRequest {
            api: AnswerApi::Completions,
            top_logprobs: 0,
            ..r
        };
        let v: serde_json::Value = serde_json::from_slice(&c.body()).unwrap();
        assert_eq!(v["prompt"], "2+2?");
        assert!(v.get("logprobs").is_none());
        assert_eq!(c.api.path(), "completions");
    }
}
