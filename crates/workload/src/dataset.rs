//! Prompt datasets, loaded once per point before its runs: JSONL (one
//! object per line: `{"prompt": "...", "output_tokens": 123}` or
//! `{"messages": [{"role": "user", "content": "..."}], ...}`) and
//! ShareGPT (a JSON array of `{"conversations": [{"from": "human"|"gpt",
//! "value": "..."}]}`, where the first human turn is the prompt and the gpt
//! turn after it gives the output length). Each entry's input length is
//! counted with the model's tokenizer when there is one, else approximated
//! (see [`approx_tokens`]), then filtered by `min_input_tokens` /
//! `max_input_tokens`. A malformed line is an error naming the file and the
//! line.

use std::path::Path;

use serde::Deserialize;

use super::WorkloadError;
use super::message::{Message, Role};
use super::tokenizer::TokenCounter;
use infer_bench_spec::raw::{Api, DatasetFormat};

/// One usable prompt of a dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Chat: the messages before the last user message.
    pub history: Vec<Message>,
    /// The prompt (completions) or the last user message (chat).
    pub text: String,
    /// Its length in tokens (see [`DatasetPrompts::exact`]).
    pub input_tokens: u32,
    /// The output length the dataset gives, if any.
    pub output_tokens: Option<u32>,
}

/// The usable prompts of a dataset, and what was left out.
#[derive(Debug, Clone)]
pub struct DatasetPrompts {
    pub entries: Vec<Entry>,
    /// Entries read from the file.
    pub read: usize,
    /// Left out by `min_input_tokens` / `max_input_tokens`.
    pub filtered: usize,
    /// Left out because they had no prompt (ShareGPT: no human turn
    /// followed by a gpt turn).
    pub unusable: usize,
    /// Whether lengths were counted with a tokenizer (else approximated).
    pub exact: bool,
}

/// A token count from text alone, without a tokenizer: one token per four
/// bytes (OpenAI's rule of thumb for English), at least one.
pub fn approx_tokens(text: &str) -> u32 {
    (text.len() as u32).div_ceil(4).max(1)
}

/// What to load and how to count.
pub struct Options<'a> {
    pub format: DatasetFormat,
    pub api: Api,
    pub counter: Option<&'a TokenCounter>,
    pub min_input_tokens: Option<u32>,
    pub max_input_tokens: Option<u32>,
    /// Every entry must carry an output length (the workload sets none).
    pub need_output: bool,
}

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

/// serde_json's message without its " at line L column C" suffix.
fn bare(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

struct Counter<'a> {
    counter: Option<&'a TokenCounter>,
    api: Api,
}

impl Counter<'_> {
    /// A prompt's length: with the tokenizer's special tokens for
    /// completions (what the server counts), content only for chat (the
    /// chat template's own tokens are not known here).
    fn prompt(&self, text: &str) -> u32 {
        match self.counter {
            Some(c) => c.count(text, self.api == Api::Completions),
            None => approx_tokens(text),
        }
    }
    /// A reply's length (no special tokens).
    fn reply(&self, text: &str) -> u32 {
        match self.counter {
            Some(c) => c.count(text, false).max(1),
            None => approx_tokens(text),
        }
    }
}

/// Loads and filters a dataset.
pub fn load(path: &Path, o: &Options) -> Result<DatasetPrompts, WorkloadError> {
    let bytes = std::fs::read(path).map_err(|e| WorkloadError::file(path, e.to_string()))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1;
        WorkloadError::line(path, line, "not UTF-8 text")
    })?;
    let count = Counter {
        counter: o.counter,
        api: o.api,
    };
    let mut out = DatasetPrompts {
        entries: Vec::new(),
        read: 0,
        filtered: 0,
        unusable: 0,
        exact: o.counter.is_some(),
    };
    let keep = |out: &mut DatasetPrompts, e: Entry| {
        let n = e.input_tokens;
        if o.min_input_tokens.is_some_and(|m| n < m) || o.max_input_tokens.is_some_and(|m| n > m) {
            out.filtered += 1;
        } else {
            out.entries.push(e);
        }
    };
    match o.format {
        DatasetFormat::Jsonl => {
            for (i, line) in text.lines().enumerate() {
                let lineno = i + 1;
                if line.trim().is_empty() {
                    continue;
                }
                out.read += 1;
                let e = jsonl_entry(path, lineno, line, o, &count)?;
                keep(&mut out, e);
            }
        }
        DatasetFormat::Sharegpt => {
            let all: Vec<ShareGptEntry> = serde_json::from_str(text).map_err(|e| {
                WorkloadError::line(path, e.line(), bare(&e))
                    .at_col(e.column())
                    .with_hint("a ShareGPT file is a JSON array of {\"conversations\": [{\"from\": \"human\", \"value\": \"...\"}, {\"from\": \"gpt\", \"value\": \"...\"}]}")
            })?;
            for entry in all {
                out.read += 1;
                let turns = &entry.conversations;
                let human = turns
                    .iter()
                    .position(|t| matches!(t.from.as_str(), "human" | "user"));
                let Some(h) = human else {
                    out.unusable += 1;
                    continue;
                };
                let reply = turns[h + 1..]
                    .iter()
                    .find(|t| !matches!(t.from.as_str(), "system"))
                    .filter(|t| matches!(t.from.as_str(), "gpt" | "chatgpt" | "assistant"));
                let Some(reply) = reply else {
                    out.unusable += 1;
                    continue;
                };
                let prompt = &turns[h].value;
                if prompt.trim().is_empty() {
                    out.unusable += 1;
                    continue;
                }
                keep(
                    &mut out,
                    Entry {
                        history: Vec::new(),
                        text: prompt.clone(),
                        input_tokens: count.prompt(prompt),
                        output_tokens: Some(count.reply(&reply.value)),
                    },
                );
            }
        }
    }
    if out.entries.is_empty() {
        let bounds = match (o.min_input_tokens, o.max_input_tokens) {
            (Some(a), Some(b)) => format!(" within {a}..={b} input tokens"),
            (Some(a), None) => format!(" of at least {a} input tokens"),
            (None, Some(b)) => format!(" of at most {b} input tokens"),
            (None, None) => String::new(),
        };
        return Err(WorkloadError::file(
            path,
            format!("no usable prompt{bounds} ({} entries read)", out.read),
        )
        .with_hint(if out.filtered > 0 {
            "widen min_input_tokens / max_input_tokens"
        } else {
            "check the file's format (jsonl or sharegpt)"
        }));
    }
    Ok(out)
}

fn jsonl_entry(
    path: &Path,
    lineno: usize,
    line: &str,
    o: &Options,
    count: &Counter,
) -> Result<Entry, WorkloadError> {
    const SHAPE: &str = "each line is a JSON object such as {\"prompt\": \"...\", \"output_tokens\": 128} or {\"messages\": [{\"role\": \"user\", \"content\": \"...\"}]}";
    let err = |m: String| WorkloadError::line(path, lineno, m).with_hint(SHAPE);
    let l: JsonlLine = serde_json::from_str(line).map_err(|e| {
        let what = if e.is_syntax() || e.is_eof() {
            "invalid JSON"
        } else {
            "unexpected JSON"
        };
        err(format!("{what}: {} (column {})", bare(&e), e.column()))
    })?;
    if o.need_output && l.output_tokens.is_none() {
        return Err(WorkloadError::line(
            path,
            lineno,
            "no `output_tokens`, and the workload sets none",
        )
        .with_hint("add \"output_tokens\" to every line, or set the workload's output_tokens"));
    }
    if l.output_tokens == Some(0) {
        return Err(err("`output_tokens` must be at least 1".into()));
    }
    match (l.prompt, l.messages) {
        (Some(_), Some(_)) => Err(err("has both `prompt` and `messages`; give one".into())),
        (None, None) => Err(err("has neither `prompt` nor `messages`".into())),
        (Some(p), None) => Ok(Entry {
            history: Vec::new(),
            input_tokens: count.prompt(&p),
            text: p,
            output_tokens: l.output_tokens,
        }),
        (None, Some(msgs)) => {
            if o.api != Api::Chat {
                return Err(
                    WorkloadError::line(path, lineno, "`messages` needs a chat workload")
                        .with_hint("set api = \"chat\" in the workload, or use `prompt`"),
                );
            }
            let mut history = Vec::with_capacity(msgs.len());
            for (k, m) in msgs.into_iter().enumerate() {
                let role = match m.role.as_str() {
                    "system" | "developer" => Role::System,
                    "user" => Role::User,
                    "assistant" => Role::Assistant,
                    other => {
                        return Err(err(format!(
                            "message {}: unknown role \"{other}\" (expected system, user or assistant)",
                            k + 1
                        )));
                    }
                };
                history.push(Message {
                    role,
                    content: m.content,
                });
            }
            let last = history
                .pop()
                .ok_or_else(|| err("`messages` is empty".into()))?;
            if last.role != Role::User {
                return Err(err("the last message must be the user's".into()));
            }
            let input_tokens = history.iter().map(|m| count.reply(&m.content)).sum::<u32>()
                + count.prompt(&last.content);
            Ok(Entry {
                history,
                text: last.content,
                input_tokens,
                output_tokens: l.output_tokens,
            })
        }
    }
}
