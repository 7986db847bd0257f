//! The format of prompt datasets, checked once for `validate` and `run`
//! alike: JSONL (one object per line: `{"prompt": "...", "output_tokens":
//! 123}` or `{"messages": [{"role": "user", "content": "..."}], ...}`)
//! and ShareGPT (a JSON array of `{"conversations": [{"from":
//! "human"|"gpt", "value": "..."}]}`, where the first human turn is the
//! prompt and the gpt turn after it gives the output length). This module
//! parses the text into records; counting their tokens and filtering them
//! by length is the workload's business. Messages name the line (and
//! column) and quote at most a short excerpt of the file.

use serde::Deserialize;

use crate::files::{excerpt, sanitize_message};
use crate::raw::{Api, DatasetFormat};

/// Who says a message of a record's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    System,
    User,
    Assistant,
}

/// One usable entry of a dataset, before counting.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Chat: the messages before the last user message.
    pub history: Vec<(Speaker, String)>,
    /// The prompt (completions) or the last user message (chat).
    pub text: String,
    /// The output length the line gives (JSONL).
    pub output_tokens: Option<u32>,
    /// The reply whose length is the output length (ShareGPT).
    pub reply: Option<String>,
}

/// The records of a dataset.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    pub records: Vec<Record>,
    /// Entries read from the file.
    pub read: usize,
    /// Left out because they had no prompt (ShareGPT: no human turn
    /// followed by a gpt turn).
    pub unusable: usize,
}

/// A problem in a dataset's text: where, what, and what the format is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetError {
    pub line: Option<usize>,
    pub col: Option<usize>,
    pub message: String,
    pub hint: Option<&'static str>,
}

/// The shape of a JSONL line, for hints.
pub const JSONL_SHAPE: &str = "each line is a JSON object such as {\"prompt\": \"...\", \"output_tokens\": 128} or {\"messages\": [{\"role\": \"user\", \"content\": \"...\"}]}";
/// The shape of a ShareGPT file, for hints.
pub const SHAREGPT_SHAPE: &str = "a ShareGPT file is a JSON array of {\"conversations\": [{\"from\": \"human\", \"value\": \"...\"}, {\"from\": \"gpt\", \"value\": \"...\"}]}";

#[derive(Deserialize)]
struct JsonlLine {
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    messages: Option<Vec<WireMessage>>,
    #[serde(default)]
    output_tokens: Option<u32>,
}

#[derive(Deserialize)]
struct WireMessage {
    role: String,
    content: String,
}

#[derive(Deserialize)]
struct ShareGptEntry {
    #[serde(default)]
    conversations: Vec<ShareGptTurn>,
}

#[derive(Deserialize)]
struct ShareGptTurn {
    from: String,
    value: String,
}

/// serde_json's message without its " at line L column C" suffix, with
/// any quoted value cut to an excerpt.
fn bare(e: &serde_json::Error) -> String {
    let s = e.to_string();
    let s = match s.rfind(" at line ") {
        Some(i) => &s[..i],
        None => &s,
    };
    sanitize_message(s)
}

/// Parses a dataset's text. `need_output`: every entry must carry an
/// output length (the workload sets none).
pub fn parse(
    text: &str,
    format: DatasetFormat,
    api: Api,
    need_output: bool,
) -> Result<Parsed, DatasetError> {
    let mut out = Parsed::default();
    match format {
        DatasetFormat::Jsonl => {
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                out.read += 1;
                out.records
                    .push(jsonl_record(i + 1, line, api, need_output)?);
            }
        }
        DatasetFormat::Sharegpt => {
            let all: Vec<ShareGptEntry> = serde_json::from_str(text).map_err(|e| DatasetError {
                line: Some(e.line()),
                col: Some(e.column()),
                message: bare(&e),
                hint: Some(SHAREGPT_SHAPE),
            })?;
            for entry in all {
                out.read += 1;
                match sharegpt_record(entry) {
                    Some(r) => out.records.push(r),
                    None => out.unusable += 1,
                }
            }
        }
    }
    Ok(out)
}

fn sharegpt_record(entry: ShareGptEntry) -> Option<Record> {
    let turns = entry.conversations;
    let h = turns
        .iter()
        .position(|t| matches!(t.from.as_str(), "human" | "user"))?;
    let reply = turns[h + 1..]
        .iter()
        .find(|t| !matches!(t.from.as_str(), "system"))
        .filter(|t| matches!(t.from.as_str(), "gpt" | "chatgpt" | "assistant"))?;
    let prompt = &turns[h].value;
    if prompt.trim().is_empty() {
        return None;
    }
    Some(Record {
        history: Vec::new(),
        text: prompt.clone(),
        output_tokens: None,
        reply: Some(reply.value.clone()),
    })
}

fn jsonl_record(
    lineno: usize,
    line: &str,
    api: Api,
    need_output: bool,
) -> Result<Record, DatasetError> {
    let err = |m: String| DatasetError {
        line: Some(lineno),
        col: None,
        message: m,
        hint: Some(JSONL_SHAPE),
    };
    let l: JsonlLine = serde_json::from_str(line).map_err(|e| {
        let what = if e.is_syntax() || e.is_eof() {
            "invalid JSON"
        } else {
            "unexpected JSON"
        };
        err(format!("{what}: {} (column {})", bare(&e), e.column()))
    })?;
    if need_output && l.output_tokens.is_none() {
        return Err(DatasetError {
            hint: Some("add \"output_tokens\" to every line, or set the workload's output_tokens"),
            ..err("no `output_tokens`, and the workload sets none".into())
        });
    }
    if l.output_tokens == Some(0) {
        return Err(err("`output_tokens` must be at least 1".into()));
    }
    if l.output_tokens
        .is_some_and(|n| n > crate::limits::MAX_TOKENS)
    {
        return Err(err(format!(
            "`output_tokens` must be at most {}",
            crate::limits::MAX_TOKENS
        )));
    }
    match (l.prompt, l.messages) {
        (Some(_), Some(_)) => Err(err("has both `prompt` and `messages`; give one".into())),
        (None, None) => Err(err("has neither `prompt` nor `messages`".into())),
        (Some(p), None) => Ok(Record {
            history: Vec::new(),
            text: p,
            output_tokens: l.output_tokens,
            reply: None,
        }),
        (None, Some(msgs)) => {
            if !api.takes_messages() {
                return Err(DatasetError {
                    hint: Some("set api = \"chat\" in the workload, or use `prompt`"),
                    ..err("`messages` needs a chat workload".into())
                });
            }
            let mut history = Vec::with_capacity(msgs.len());
            for (k, m) in msgs.into_iter().enumerate() {
                let role = match m.role.as_str() {
                    "system" | "developer" => Speaker::System,
                    "user" => Speaker::User,
                    "assistant" => Speaker::Assistant,
                    other => {
                        return Err(err(format!(
                            "message {}: unknown role \"{}\" (expected system, user or assistant)",
                            k + 1,
                            excerpt(other)
                        )));
                    }
                };
                history.push((role, m.content));
            }
            let last = history
                .pop()
                .ok_or_else(|| err("`messages` is empty".into()))?;
            if last.0 != Speaker::User {
                return Err(err("the last message must be the user's".into()));
            }
            Ok(Record {
                history,
                text: last.1,
                output_tokens: l.output_tokens,
                reply: None,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_quote_no_more_than_an_excerpt() {
        let secret = "AWS_SECRET_ACCESS_KEY=abcdefghijklmnopqrstuvwxyz0123456789";
        let text = format!("{{\"prompt\": \"{secret}\", \"output_tokens\": \"{secret}\"}}\n");
        let e = parse(&text, DatasetFormat::Jsonl, Api::Chat, false).unwrap_err();
        assert!(!e.message.contains("0123456789"), "{}", e.message);
        assert_eq!(e.line, Some(1));
        let e = parse(secret, DatasetFormat::Jsonl, Api::Chat, false).unwrap_err();
        assert!(!e.message.contains("abcdefghij"), "{}", e.message);
        let e = parse(
            &format!("{{\"messages\": [{{\"role\": \"{secret}\", \"content\": \"x\"}}]}}"),
            DatasetFormat::Jsonl,
            Api::Chat,
            false,
        )
        .unwrap_err();
        assert!(!e.message.contains("0123456789"), "{}", e.message);
    }

    #[test]
    fn sharegpt_keeps_the_first_exchange() {
        let text = r#"[{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]},
                       {"conversations": [{"from": "gpt", "value": "alone"}]}]"#;
        let p = parse(text, DatasetFormat::Sharegpt, Api::Chat, false).unwrap();
        assert_eq!((p.read, p.records.len(), p.unusable), (2, 1, 1));
        assert_eq!(p.records[0].reply.as_deref(), Some("hello"));
    }
}
