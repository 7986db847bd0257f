//! Prompt datasets, loaded once per point before its runs: JSONL (one
//! object per line: `{"prompt": "...", "output_tokens": 123}` or
//! `{"messages": [{"role": "user", "content": "..."}], ...}`) and
//! ShareGPT (a JSON array of `{"conversations": [{"from": "human"|"gpt",
//! "value": "..."}]}`, where the first human turn is the prompt and the gpt
//! turn after it gives the output length). Each entry's input length is
//! counted with the model's tokenizer when there is one, else approximated
//! (see [`approx_tokens`]), then filtered by `min_input_tokens` /
//! `max_input_tokens`. A malformed line is an error naming the file and the
//! line. The image files rows name are read and base64'd here, once, before
//! any run (see [`crate::media::DatasetImages`]).

use std::path::Path;
use std::sync::Arc;

use super::WorkloadError;
use super::media::{DatasetImages, Media};
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
    /// The images the row names, laid out to be sent before `text`.
    pub media: Option<Arc<Media>>,
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
    /// The spec's repository (see `infer_bench_spec::files::repository`):
    /// image files inside it are not read through a link leading out.
    pub repo: &'a Path,
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

/// Loads and filters a dataset: a regular file of at most
/// [`MAX_DATASET_BYTES`](infer_bench_spec::files::MAX_DATASET_BYTES),
/// parsed by the spec's own checker (so `validate` refuses what this
/// would), then counted and filtered.
pub fn load(path: &Path, o: &Options) -> Result<DatasetPrompts, WorkloadError> {
    use infer_bench_spec::dataset::{self as format, Speaker};
    use infer_bench_spec::files::{self, TextError};
    let text = files::read_text(path, files::MAX_DATASET_BYTES).map_err(|e| match e {
        TextError::Read(e) => WorkloadError::file(path, e.to_string()),
        TextError::NotUtf8 { line, col } => {
            WorkloadError::line(path, line, "not UTF-8 text").at_col(col)
        }
    })?;
    let positioned = |e: format::DatasetError| WorkloadError {
        path: path.display().to_string(),
        line: e.line,
        col: e.col,
        message: e.message,
        hint: e.hint.map(str::to_string),
    };
    let mut parsed = format::parse(&text, o.format, o.api, o.need_output).map_err(positioned)?;
    drop(text);
    let dir = path.parent().unwrap_or(Path::new("."));
    let files = infer_bench_spec::image::load(&mut parsed.records, dir, o.repo, true)
        .map_err(positioned)?;
    let images = DatasetImages::new(files);
    let count = Counter {
        counter: o.counter,
        api: o.api,
    };
    let mut out = DatasetPrompts {
        entries: Vec::new(),
        read: parsed.read,
        filtered: 0,
        unusable: parsed.unusable,
        exact: o.counter.is_some(),
    };
    for r in parsed.records {
        let history: Vec<Message> = r
            .history
            .into_iter()
            .map(|(who, content)| Message {
                role: match who {
                    Speaker::System => Role::System,
                    Speaker::User => Role::User,
                    Speaker::Assistant => Role::Assistant,
                },
                content,
            })
            .collect();
        let input_tokens =
            history.iter().map(|m| count.reply(&m.content)).sum::<u32>() + count.prompt(&r.text);
        let e = Entry {
            media: images.media(&r.images).map(Arc::new),
            history,
            input_tokens,
            output_tokens: r.output_tokens.or(r.reply.map(|t| count.reply(&t))),
            text: r.text,
        };
        let n = e.input_tokens;
        if o.min_input_tokens.is_some_and(|m| n < m) || o.max_input_tokens.is_some_and(|m| n > m) {
            out.filtered += 1;
        } else {
            out.entries.push(e);
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
