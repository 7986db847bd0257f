//! Spec diagnostics: errors that name the file, line and column, the key
//! path, what was found and what was expected, with a hint; and the
//! `Locator` that maps a key path back to its place in the TOML text.

use std::fmt;
use std::ops::Range;

/// One problem with a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub file: String,
    /// 1-based; 0 when the position is unknown.
    pub line: usize,
    pub col: usize,
    /// Dotted key path (`load.duration`, `matrix.include[0].model`); empty for the file.
    pub key: String,
    pub message: String,
    pub hint: Option<String>,
    /// The offending source line and the caret's column and width.
    pub snippet: Option<Snippet>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    pub text: String,
    pub col: usize,
    pub width: usize,
}

/// A spec's error is about text a pull request may have written, read
/// from a file that may not be a spec at all (a link to an env file): what
/// it quotes of the file is short and escaped. Every part of the message
/// passes [`outside`]: the key, the message and each line of the hint,
/// with each quoted value cut to an excerpt ([`crate::files::sanitize_message`]),
/// and the snippet is a window of [`SNIPPET_CHARS`] characters.
fn outside(text: &str) -> String {
    infer_bench_results::outside::terminal(&crate::files::sanitize_message(text)).into_owned()
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error: {}",
            infer_bench_results::outside::terminal(&self.file)
        )?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.col)?;
        }
        if self.key.is_empty() {
            write!(f, ": {}", outside(&self.message))?;
        } else {
            write!(
                f,
                ": {}: {}",
                infer_bench_results::outside::terminal(&self.key),
                outside(&self.message)
            )?;
        }
        if let Some(s) = &self.snippet {
            let gutter = self.line.to_string().len();
            write!(
                f,
                "\n{:gutter$} |\n{} | {}\n{:gutter$} | {}{}",
                "",
                self.line,
                s.text,
                "",
                " ".repeat(s.col.saturating_sub(1)),
                "^".repeat(s.width.max(1)),
            )?;
        }
        if let Some(h) = &self.hint {
            let lines: Vec<String> = h.lines().map(outside).collect();
            write!(f, "\n  hint: {}", lines.join("\n"))?;
        }
        Ok(())
    }
}

/// All problems found in one spec, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecErrors(pub Vec<SpecError>);

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n\n")?;
            }
            e.fmt(f)?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecErrors {}

impl From<SpecError> for SpecErrors {
    fn from(e: SpecError) -> Self {
        SpecErrors(vec![e])
    }
}

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// Parses `a.b[2].c` into segments. Keys are split on `.`, which is fine for
/// our keys; a quoted key with a dot cannot be addressed (the error then
/// points at the nearest table that can).
pub fn parse_path(path: &str) -> Vec<Seg> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let mut rest = part;
        if let Some(i) = rest.find('[') {
            if i > 0 {
                out.push(Seg::Key(rest[..i].to_string()));
            }
            rest = &rest[i..];
            while let Some(r) = rest.strip_prefix('[') {
                let end = r.find(']').unwrap_or(r.len());
                if let Ok(n) = r[..end].parse() {
                    out.push(Seg::Index(n));
                }
                rest = r.get(end + 1..).unwrap_or("");
            }
        } else {
            out.push(Seg::Key(rest.to_string()));
        }
    }
    out
}

/// Maps key paths and byte offsets of one TOML text to positions.
#[derive(Debug, Clone)]
pub struct Locator {
    file: String,
    source: String,
    doc: Option<toml_edit::Document<String>>,
}

/// A node of the TOML tree, whichever way it is written.
#[derive(Clone, Copy)]
enum Node<'a> {
    Item(&'a toml_edit::Item),
    Table(&'a toml_edit::Table),
    Value(&'a toml_edit::Value),
}

impl<'a> Node<'a> {
    fn span(self) -> Option<Range<usize>> {
        match self {
            Node::Item(i) => i.span(),
            Node::Table(t) => t.span(),
            Node::Value(v) => v.span(),
        }
    }

    /// The child at `seg` and the span of its key, if it has one.
    fn child(self, seg: &Seg) -> Option<(Option<Range<usize>>, Node<'a>)> {
        let as_value = |v: &'a toml_edit::Value| Node::Value(v);
        match (seg, self) {
            (Seg::Key(k), Node::Item(toml_edit::Item::Table(t)))
            | (Seg::Key(k), Node::Table(t)) => t
                .get_key_value(k)
                .map(|(key, v)| (key.span(), Node::Item(v))),
            (Seg::Key(k), Node::Item(toml_edit::Item::Value(toml_edit::Value::InlineTable(t))))
            | (Seg::Key(k), Node::Value(toml_edit::Value::InlineTable(t))) => t
                .get_key_value(k)
                .map(|(key, v)| (key.span(), Node::Item(v))),
            (Seg::Index(i), Node::Item(toml_edit::Item::ArrayOfTables(a))) => {
                a.get(*i).map(|t| (None, Node::Table(t)))
            }
            (Seg::Index(i), Node::Item(toml_edit::Item::Value(toml_edit::Value::Array(a))))
            | (Seg::Index(i), Node::Value(toml_edit::Value::Array(a))) => {
                a.get(*i).map(|v| (None, as_value(v)))
            }
            _ => None,
        }
    }

    fn keys(self) -> Vec<String> {
        match self {
            Node::Item(toml_edit::Item::Table(t)) | Node::Table(t) => {
                t.iter().map(|(k, _)| k.to_string()).collect()
            }
            Node::Item(toml_edit::Item::Value(toml_edit::Value::InlineTable(t)))
            | Node::Value(toml_edit::Value::InlineTable(t)) => {
                t.iter().map(|(k, _)| k.to_string()).collect()
            }
            _ => Vec::new(),
        }
    }
}

impl Locator {
    pub fn new(file: &str, source: &str) -> Self {
        Locator {
            file: file.to_string(),
            source: source.to_string(),
            doc: toml_edit::Document::parse(source.to_string()).ok(),
        }
    }

    pub fn file(&self) -> &str {
        &self.file
    }

    /// Walks `path` as far as it goes: the deepest node reached, the span of
    /// the last key seen, and whether the whole path was found.
    fn walk(&self, path: &[Seg]) -> Option<(Node<'_>, Option<Range<usize>>, bool)> {
        let doc = self.doc.as_ref()?;
        let mut node = Node::Item(doc.as_item());
        let mut key_span = None;
        for seg in path {
            match node.child(seg) {
                Some((ks, next)) => {
                    key_span = ks.or_else(|| next.span());
                    node = next;
                }
                None => return Some((node, key_span, false)),
            }
        }
        Some((node, key_span, true))
    }

    /// The span of the value at `path`, or of the deepest parent found.
    pub fn span(&self, path: &[Seg]) -> Option<Range<usize>> {
        let Some((node, key_span, _)) = self.walk(path) else {
            return self.scan(path);
        };
        node.span().or(key_span)
    }

    /// When the text is TOML to the serde parser but not to the editing
    /// one (an integer above i64::MAX): the value of `key = ...` under the
    /// table header of the path's parent, found line by line.
    fn scan(&self, path: &[Seg]) -> Option<Range<usize>> {
        let keys: Vec<&str> = path
            .iter()
            .filter_map(|s| match s {
                Seg::Key(k) => Some(k.as_str()),
                Seg::Index(_) => None,
            })
            .collect();
        let (last, parent) = keys.split_last()?;
        let parent = parent.join(".");
        let mut table = String::new();
        let mut offset = 0;
        let mut fallback = None;
        for line in self.source.split_inclusive('\n') {
            let t = line.trim();
            if let Some(h) = t.strip_prefix('[') {
                table = h.trim_matches(['[', ']', ' ']).to_string();
            } else if let Some((k, _)) = t.split_once('=') {
                if k.trim() == *last {
                    let at = offset + line.find('=').unwrap_or(0) + 1;
                    let at = at + (self.source[at..].len() - self.source[at..].trim_start().len());
                    let span = at..at + 1;
                    if table == parent {
                        return Some(span);
                    }
                    fallback.get_or_insert(span);
                }
            }
            offset += line.len();
        }
        fallback
    }

    /// The span of the key itself (for unknown keys), else of its value.
    pub fn key_span(&self, path: &[Seg]) -> Option<Range<usize>> {
        let Some((node, key_span, found)) = self.walk(path) else {
            return self.scan(path);
        };
        if found {
            key_span.or_else(|| node.span())
        } else {
            node.span().or(key_span)
        }
    }

    /// The keys of the table at `path`, in file order.
    pub fn keys(&self, path: &[Seg]) -> Vec<String> {
        match self.walk(path) {
            Some((node, _, true)) => node.keys(),
            _ => Vec::new(),
        }
    }

    /// An error at a byte span.
    pub fn error_at_span(
        &self,
        span: Option<Range<usize>>,
        key: &str,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> SpecError {
        let (line, col, snippet) = match span {
            Some(r) => {
                let (line, col) = self.line_col(r.start);
                let full = self.source.lines().nth(line - 1).unwrap_or("");
                // The header keeps the column in the file; the caret's is
                // the window's.
                let (text, at) = snippet_window(full, col);
                let start_in_line = text
                    .char_indices()
                    .nth(at - 1)
                    .map(|(b, _)| b)
                    .unwrap_or(text.len());
                let avail = &text[start_in_line..];
                let span_text = self.source.get(r.start..r.end.max(r.start)).unwrap_or("");
                let width = span_text
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .count()
                    .min(avail.chars().count());
                (
                    line,
                    col,
                    Some(Snippet {
                        text,
                        col: at,
                        width: width.clamp(1, 80),
                    }),
                )
            }
            None => (0, 0, None),
        };
        SpecError {
            file: self.file.clone(),
            line,
            col,
            key: key.to_string(),
            message: message.into(),
            hint,
            snippet,
        }
    }

    /// An error about the value at a key path.
    pub fn error(&self, key: &str, message: impl Into<String>, hint: Option<String>) -> SpecError {
        self.error_at_span(self.span(&parse_path(key)), key, message, hint)
    }

    /// An error about a key itself (unknown key, misplaced key).
    pub fn key_error(
        &self,
        key: &str,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> SpecError {
        self.error_at_span(self.key_span(&parse_path(key)), key, message, hint)
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.source.len());
        while !self.source.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &self.source[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        (line, before[line_start..].chars().count() + 1)
    }
}

/// Most characters of a source line a snippet shows: as many as an error
/// may quote of any file ([`crate::files::EXCERPT_CHARS`]).
pub const SNIPPET_CHARS: usize = crate::files::EXCERPT_CHARS;

/// The part of a line around `col` (with `...` where cut) and the caret's
/// column in it; control characters (ESC, CR...) shown as escapes
/// (`\x1b`, `\r`), so a snippet is one short printable line whatever the
/// file holds.
fn snippet_window(line: &str, col: usize) -> (String, usize) {
    let chars: Vec<char> = line.chars().collect();
    let n = chars.len();
    let start = if n <= SNIPPET_CHARS {
        0
    } else {
        col.saturating_sub(1)
            .saturating_sub(SNIPPET_CHARS / 3)
            .min(n - SNIPPET_CHARS)
    };
    let end = n.min(start + SNIPPET_CHARS);
    let mut text = String::new();
    if start > 0 {
        text.push_str("...");
    }
    let mut caret = None;
    let mut buf = [0u8; 4];
    for (i, c) in chars[start..end].iter().enumerate() {
        if start + i + 1 == col {
            caret = Some(text.chars().count() + 1);
        }
        text.push_str(&infer_bench_results::outside::terminal(
            c.encode_utf8(&mut buf),
        ));
    }
    let caret = caret.unwrap_or(text.chars().count() + 1);
    if end < n {
        text.push_str("...");
    }
    (text, caret)
}

/// The closest candidate to `word`, if close enough to be a likely typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// A hint sentence for a likely typo.
pub fn suggestion<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    did_you_mean(word, candidates).map(|c| format!("did you mean `{c}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a terminal or a CI log must never get from a spec's text.
    fn assert_inert(text: &str) {
        assert!(!text.contains('\u{1b}'), "{text:?}");
        assert!(!text.contains('\r'), "{text:?}");
        assert!(!text.contains('\u{7}'), "{text:?}");
        for line in text.lines() {
            assert!(!line.starts_with("::"), "{text:?}");
        }
    }

    #[test]
    fn an_error_quotes_a_short_escaped_excerpt_of_a_line() {
        let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
        let source = format!("FOO=1\nGH_TOKEN={secret}\n");
        let loc = Locator::new("env", &source);
        let e = loc.error_at_span(Some(15..15 + secret.len()), "", "invalid TOML", None);
        let text = e.to_string();
        assert!(text.starts_with("error: env:2:10: invalid TOML"), "{text}");
        assert!(!text.contains(secret), "{text}");
        let quoted = text.lines().nth(2).unwrap();
        assert!(
            quoted.chars().count() <= "2 | ".len() + SNIPPET_CHARS + 6,
            "{quoted}"
        );
        // A token far along a line: the header names its column in the
        // file, the caret its place in the window.
        let long = format!("{} = \"x\"\n", "k".repeat(60));
        let e = Locator::new("s.toml", &long).error_at_span(Some(63..66), "", "bad", None);
        assert!(e.to_string().starts_with("error: s.toml:1:64: bad"), "{e}");
        let s = e.snippet.as_ref().unwrap();
        assert_eq!(s.text.chars().nth(s.col - 1), Some('"'), "{e}");
        // The caret still points at the token.
        let caret = text.lines().nth(3).unwrap();
        let at = caret.find('^').unwrap();
        assert_eq!(&quoted[at..at + 4], "ghp_", "{text}");
    }

    #[test]
    fn controls_in_a_spec_show_as_escapes_everywhere_in_its_error() {
        let value = "\u{1b}]52;c;QUFBQQ==\u{7}\n::error::x\rY";
        let source = format!("name = \"a\"\nserved_name = \"{value}\"\n");
        let loc = Locator::new("spec.toml", &source);
        let e = loc.error_at_span(
            Some(25..26),
            &format!("models.{value}"),
            format!("unknown model \"{value}\""),
            Some(format!("did you mean `{value}`?\nor `\n::warning::y`")),
        );
        let text = e.to_string();
        assert_inert(&text);
        assert!(text.contains("\\x1b]52"), "{text}");
        assert!(text.contains("\\r"), "{text}");
    }

    #[test]
    fn a_snippet_window_keeps_the_caret_on_its_character() {
        let line = format!("{}X{}", "a".repeat(50), "\u{1b}".repeat(50));
        let (text, col) = snippet_window(&line, 51);
        assert_eq!(text.chars().nth(col - 1), Some('X'), "{text}");
        assert!(text.starts_with("..."), "{text}");
        assert!(text.ends_with("..."), "{text}");
        assert!(!text.contains('\u{1b}'));
        assert_eq!(snippet_window("short = 1", 9), ("short = 1".to_string(), 9));
    }
}
