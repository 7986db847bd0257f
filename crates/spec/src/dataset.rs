//! The format of prompt datasets, checked once for `validate` and `run`
//! alike: JSONL (one object per line: `{"prompt": "...", "output_tokens":
//! 123}` or `{"messages": [{"role": "user", "content": "..."}], ...}`)
//! and ShareGPT (a JSON array of `{"conversations": [{"from":
//! "human"|"gpt", "value": "..."}]}`, where the first human turn is the
//! prompt and the gpt turn after it gives the output length; also one
//! such object per line). This module parses the text into records;
//! counting their tokens and filtering them by length is the workload's
//! business. Messages name the line (and column) and quote at most a
//! short excerpt of the file.
//!
//! A row of either format may name images (LLaVA / ShareGPT-4V style):
//! `"image": "coco/000000033471.jpg"` or `"images": [...]`, each an
//! http(s) URL (sent as given, never fetched) or the path of an image
//! file relative to the dataset's folder ([`crate::image`] reads those).
//! The images go with the prompt's message, before its text, and the
//! `<image>` placeholders are taken out of that text. Only chat sends
//! them.

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

/// An image a dataset row names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageRef {
    /// An http(s) URL, sent as given (never fetched).
    Url(String),
    /// A local file as the row names it, relative to the dataset's folder:
    /// what [`parse`] gives; [`crate::image::load`] reads it and turns it
    /// into a [`ImageRef::File`].
    Path(String),
    /// The index of a file in what [`crate::image::load`] returned.
    File(usize),
}

/// One usable entry of a dataset, before counting.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The line the entry starts on (1-based), for messages.
    pub line: usize,
    /// Chat: the messages before the last user message.
    pub history: Vec<(Speaker, String)>,
    /// The prompt (completions) or the last user message (chat).
    pub text: String,
    /// The output length the line gives (JSONL).
    pub output_tokens: Option<u32>,
    /// The reply whose length is the output length (ShareGPT).
    pub reply: Option<String>,
    /// The images sent before `text`, in order.
    pub images: Vec<ImageRef>,
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
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    images: Option<Vec<String>>,
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
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    images: Option<Vec<String>>,
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
        DatasetFormat::Sharegpt if text.trim_start().starts_with('{') => {
            // One ShareGPT object per line (JSONL).
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                out.read += 1;
                let entry: ShareGptEntry =
                    serde_json::from_str(line).map_err(|e| DatasetError {
                        line: Some(i + 1),
                        col: Some(e.column()),
                        message: bare(&e),
                        hint: Some(SHAREGPT_SHAPE),
                    })?;
                match sharegpt_record(entry, i + 1, api)? {
                    Some(r) => out.records.push(r),
                    None => out.unusable += 1,
                }
            }
        }
        DatasetFormat::Sharegpt => {
            let all: Vec<ShareGptEntry> = serde_json::from_str(text).map_err(|e| DatasetError {
                line: Some(e.line()),
                col: Some(e.column()),
                message: bare(&e),
                hint: Some(SHAREGPT_SHAPE),
            })?;
            let lines = element_lines(text);
            for (k, entry) in all.into_iter().enumerate() {
                out.read += 1;
                let line = lines.get(k).copied().unwrap_or(1);
                match sharegpt_record(entry, line, api)? {
                    Some(r) => out.records.push(r),
                    None => out.unusable += 1,
                }
            }
        }
    }
    Ok(out)
}

/// The line each element of a JSON array (already parsed, so well formed)
/// starts on.
fn element_lines(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let (mut depth, mut line) = (0usize, 1usize);
    let (mut in_string, mut escaped, mut expect) = (false, false, false);
    for b in text.bytes() {
        if b == b'\n' {
            line += 1;
        }
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        if depth == 1 && expect && !b.is_ascii_whitespace() && b != b',' && b != b']' {
            out.push(line);
            expect = false;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth == 1 {
                    expect = true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b',' if depth == 1 => expect = true,
            _ => {}
        }
    }
    out
}

/// Longest path of an image file a row may give, in bytes (Linux's
/// `PATH_MAX`).
pub const MAX_IMAGE_PATH_BYTES: usize = 4096;

/// The images a row names (`image` or `images`), checked: a chat
/// workload, at most [`MAX_IMAGES`](crate::compile::media::MAX_IMAGES),
/// each an http(s) URL or a path.
fn row_images(
    line: usize,
    image: Option<String>,
    images: Option<Vec<String>>,
    api: Api,
) -> Result<Vec<ImageRef>, DatasetError> {
    use crate::compile::media::{MAX_IMAGES, MAX_URL_BYTES};
    let err = |message: String, hint: &'static str| DatasetError {
        line: Some(line),
        col: None,
        message,
        hint: Some(hint),
    };
    let names = match (image, images) {
        (Some(_), Some(_)) => {
            return Err(err(
                "has both `image` and `images`; give one".into(),
                "\"image\": \"path/to/file.jpg\" or \"images\": [\"a.jpg\", \"b.png\"]",
            ));
        }
        (Some(one), None) => vec![one],
        (None, Some(list)) => list,
        (None, None) => return Ok(Vec::new()),
    };
    if names.is_empty() {
        return Ok(Vec::new());
    }
    if api != Api::Chat {
        return Err(err(
            "names images, which only a chat workload sends (as content parts)".into(),
            "set api = \"chat\" in the workload, or use a dataset without images",
        ));
    }
    if names.len() > MAX_IMAGES as usize {
        return Err(err(
            format!(
                "names {} images; a request carries at most {MAX_IMAGES}",
                names.len()
            ),
            "split the row's images",
        ));
    }
    let mut out = Vec::with_capacity(names.len());
    for (k, name) in names.into_iter().enumerate() {
        let n = k + 1;
        let lower = name.get(..8).unwrap_or(&name).to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            if name.len() > MAX_URL_BYTES || name.chars().any(char::is_control) {
                return Err(err(
                    format!(
                        "image {n}: a URL of at most {MAX_URL_BYTES} bytes without control characters is expected"
                    ),
                    "URLs are sent as given",
                ));
            }
            out.push(ImageRef::Url(name));
            continue;
        }
        let scheme = name.split_once(':').map(|(s, _)| s).filter(|s| {
            s.len() > 1
                && s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        });
        if let Some(scheme) = scheme {
            return Err(err(
                format!(
                    "image {n}: a `{}:` address is neither an http(s) URL nor a file's path",
                    excerpt(scheme)
                ),
                "name an image file by its path relative to the dataset's folder, or give an http(s) URL (sent as given, never fetched)",
            ));
        }
        if name.trim().is_empty() || name.contains('\0') {
            return Err(err(
                format!("image {n}: an empty path"),
                "name an image file by its path relative to the dataset's folder",
            ));
        }
        if name.len() > MAX_IMAGE_PATH_BYTES {
            return Err(err(
                format!("image {n}: a path of more than {MAX_IMAGE_PATH_BYTES} bytes"),
                "name an image file by its path relative to the dataset's folder",
            ));
        }
        out.push(ImageRef::Path(name));
    }
    Ok(out)
}

/// A prompt without its `<image>` placeholders, when the row sends images.
fn without_placeholders(text: &str, images: &[ImageRef]) -> String {
    if images.is_empty() || !text.contains(IMAGE_PLACEHOLDER) {
        return text.to_string();
    }
    text.replace(IMAGE_PLACEHOLDER, "").trim().to_string()
}

/// What LLaVA-style datasets write where an image goes in a prompt.
pub const IMAGE_PLACEHOLDER: &str = "<image>";

fn sharegpt_record(
    entry: ShareGptEntry,
    line: usize,
    api: Api,
) -> Result<Option<Record>, DatasetError> {
    let images = row_images(line, entry.image, entry.images, api)?;
    let turns = entry.conversations;
    let Some(h) = turns
        .iter()
        .position(|t| matches!(t.from.as_str(), "human" | "user"))
    else {
        return Ok(None);
    };
    let Some(reply) = turns[h + 1..]
        .iter()
        .find(|t| !matches!(t.from.as_str(), "system"))
        .filter(|t| matches!(t.from.as_str(), "gpt" | "chatgpt" | "assistant"))
    else {
        return Ok(None);
    };
    let prompt = without_placeholders(&turns[h].value, &images);
    if prompt.trim().is_empty() && images.is_empty() {
        return Ok(None);
    }
    Ok(Some(Record {
        line,
        history: Vec::new(),
        text: prompt,
        output_tokens: None,
        reply: Some(reply.value.clone()),
        images,
    }))
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
    let images = row_images(lineno, l.image, l.images, api)?;
    match (l.prompt, l.messages) {
        (Some(_), Some(_)) => Err(err("has both `prompt` and `messages`; give one".into())),
        (None, None) => Err(err("has neither `prompt` nor `messages`".into())),
        (Some(p), None) => Ok(Record {
            line: lineno,
            history: Vec::new(),
            text: without_placeholders(&p, &images),
            output_tokens: l.output_tokens,
            reply: None,
            images,
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
                line: lineno,
                history,
                text: without_placeholders(&last.1, &images),
                output_tokens: l.output_tokens,
                reply: None,
                images,
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
    fn rows_name_images_by_url_or_path_and_lose_their_placeholders() {
        let text = "[\n  {\"id\": 1, \"image\": \"coco/a.jpg\", \"conversations\": [\n    {\"from\": \"human\", \"value\": \"<image>\\nWhat is \\\"this\\\" [x]?\"},\n    {\"from\": \"gpt\", \"value\": \"A cat.\"}]},\n  {\"images\": [\"https://example.com/b.png\", \"c.png\"],\n   \"conversations\": [{\"from\": \"human\", \"value\": \"Compare <image> and <image>\"}, {\"from\": \"gpt\", \"value\": \"Same.\"}]}\n]";
        let p = parse(text, DatasetFormat::Sharegpt, Api::Chat, false).unwrap();
        assert_eq!(p.records.len(), 2);
        let (a, b) = (&p.records[0], &p.records[1]);
        assert_eq!((a.line, b.line), (2, 5));
        assert_eq!(a.text, "What is \"this\" [x]?");
        assert_eq!(a.images, [ImageRef::Path("coco/a.jpg".into())]);
        assert_eq!(b.text, "Compare  and");
        assert_eq!(
            b.images,
            [
                ImageRef::Url("https://example.com/b.png".into()),
                ImageRef::Path("c.png".into())
            ]
        );
        // The same rows one per line.
        let jsonl = "{\"image\": \"a.png\", \"conversations\": [{\"from\": \"human\", \"value\": \"<image> hi\"}, {\"from\": \"gpt\", \"value\": \"yo\"}]}\n\n{\"conversations\": [{\"from\": \"human\", \"value\": \"<image>\"}, {\"from\": \"gpt\", \"value\": \"yo\"}]}\n";
        let p = parse(jsonl, DatasetFormat::Sharegpt, Api::Chat, false).unwrap();
        assert_eq!(p.records.len(), 2);
        assert_eq!((p.records[0].line, p.records[0].text.as_str()), (1, "hi"));
        // Without images a placeholder is text like any other.
        assert_eq!(
            (p.records[1].line, p.records[1].text.as_str()),
            (3, "<image>")
        );
        // JSONL prompts and messages take them too.
        let p = parse(
            "{\"prompt\": \"<image>\\nDescribe.\", \"image\": \"x.gif\", \"output_tokens\": 3}\n{\"messages\": [{\"role\": \"user\", \"content\": \"Hi <image>\"}], \"images\": [\"y.webp\"]}",
            DatasetFormat::Jsonl,
            Api::Chat,
            false,
        )
        .unwrap();
        assert_eq!(p.records[0].text, "Describe.");
        assert_eq!(p.records[1].text, "Hi");
        assert_eq!(p.records[1].images, [ImageRef::Path("y.webp".into())]);
    }

    #[test]
    fn image_entries_that_are_not_urls_or_paths_are_refused_at_their_line() {
        let row = |img: &str| {
            format!(
                "{{\"prompt\": \"p\", \"output_tokens\": 1}}\n{{\"prompt\": \"p\", \"output_tokens\": 1, {img}}}\n"
            )
        };
        for (img, api, expected) in [
            (
                "\"image\": \"file:///etc/passwd\"",
                Api::Chat,
                "`file:` address",
            ),
            (
                "\"image\": \"data:image/png;base64,AAAA\"",
                Api::Chat,
                "`data:` address",
            ),
            (
                "\"images\": [\"a.png\", \"ftp://h/x.png\"]",
                Api::Chat,
                "image 2: a `ftp:`",
            ),
            (
                "\"image\": \"a.png\", \"images\": []",
                Api::Chat,
                "both `image` and `images`",
            ),
            ("\"image\": \"\"", Api::Chat, "an empty path"),
            (
                "\"image\": \"a.png\"",
                Api::Completions,
                "only a chat workload",
            ),
        ] {
            let e = parse(&row(img), DatasetFormat::Jsonl, api, false).unwrap_err();
            assert_eq!(e.line, Some(2), "{img}");
            assert!(e.message.contains(expected), "{img}: {}", e.message);
            assert!(!e.message.contains("passwd") && !e.message.contains("AAAA"));
        }
        let sharegpt =
            "[{\"conversations\": []},\n\n {\"image\": \"file:x\", \"conversations\": []}]";
        let e = parse(sharegpt, DatasetFormat::Sharegpt, Api::Chat, false).unwrap_err();
        assert_eq!(e.line, Some(3), "{}", e.message);
    }

    #[test]
    fn array_elements_are_found_by_line() {
        assert_eq!(
            element_lines("[\n{\"a\": \"]\\\" {\"},\n\n  [1, {\"b\": [2]}],\n3]"),
            [2, 4, 5]
        );
        assert_eq!(element_lines("[]"), Vec::<usize>::new());
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
