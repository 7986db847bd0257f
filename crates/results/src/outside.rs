//! Text that others control, and its encoders. A server's error body, a
//! header, a model id, a launched server's log, a metrics label, a value
//! from a pull request's spec: whoever wrote it may have written terminal
//! escapes (OSC 52 writes the reader's clipboard), line breaks that forge
//! a CI log's workflow commands (`::error`, `::add-mask::`), Markdown and
//! HTML (`<img onerror>`, links, `@mentions` that notify people) or
//! spreadsheet formulas.
//!
//! Such text is an [`Outside`]: it has no `Display`, so it reaches no
//! writer unencoded. Each place we write has its encoder, here: the
//! terminal and CI logs ([`terminal`]), Markdown prose and table cells
//! ([`markdown_code`], [`markdown_cell`]), HTML and XML ([`markup`]), CSV
//! ([`csv`]) and the Prometheus text format ([`prom_label`]). JSON needs
//! none of its own: serde's string escaping is the encoding there, and an
//! `Outside` serializes as the plain string it holds.

use std::borrow::Cow;
use std::fmt::Write as _;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Text from outside: written only through an encoder for its destination.
#[derive(
    Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct Outside(String);

impl Outside {
    pub fn new(s: impl Into<String>) -> Outside {
        Outside(s.into())
    }

    /// The text as it came, to compute with (compare, search, redact,
    /// measure): never to write. A writer takes one of the encoders.
    pub fn unencoded(&self) -> &str {
        &self.0
    }

    /// Takes the text as it came (to redact it, or to store it again as
    /// outside text).
    pub fn into_unencoded(self) -> String {
        self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// For a terminal or a CI log: see [`terminal`].
    pub fn terminal(&self) -> Cow<'_, str> {
        terminal(&self.0)
    }

    /// As a Markdown code span in prose: see [`markdown_code`].
    pub fn markdown_code(&self) -> String {
        markdown_code(&self.0)
    }

    /// As a Markdown code span in a table cell: see [`markdown_cell`].
    pub fn markdown_cell(&self) -> String {
        markdown_cell(&self.0)
    }

    /// For HTML or XML content and attributes: see [`markup`].
    pub fn markup(&self) -> String {
        markup(&self.0)
    }

    /// As one CSV field: see [`csv`].
    pub fn csv(&self) -> Cow<'_, str> {
        csv(&self.0)
    }
}

impl std::fmt::Debug for Outside {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Debug escapes every control character, as a terminal needs.
        write!(f, "Outside({:?})", self.0)
    }
}

impl From<String> for Outside {
    fn from(s: String) -> Outside {
        Outside(s)
    }
}

impl From<&str> for Outside {
    fn from(s: &str) -> Outside {
        Outside(s.to_string())
    }
}

/// Whether `c` must not reach a terminal as it is: the C0 controls (a tab
/// is kept), DEL, the C1 controls, and the characters that reorder text
/// (bidirectional overrides and isolates, which make a line read other
/// than it is).
fn hidden(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{a}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        | '\u{2028}' | '\u{2029}')
}

/// Writes `c` visibly: `\n`, `\r`, `\x1b`, `\u{202e}`.
fn show(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// `s` cut to at most `max` bytes at a character boundary (the one cut
/// every bounded reader of outside text uses).
pub fn clip(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// For a terminal or a CI log, on one line: every control character,
/// ESC and the C1 controls included, and every character that reorders
/// text is shown as an escape (`\x1b`, `\n`, `\r`, `\u{202e}`), so no
/// escape sequence runs, no carriage return overwrites, and no line break
/// starts a line of its own; and text that begins with `::` begins with
/// `\x3a:`, so it cannot be read as a GitHub workflow command wherever it
/// is placed. Borrowed when there is nothing to change.
pub fn terminal(s: &str) -> Cow<'_, str> {
    if !s.chars().any(hidden) && !s.starts_with("::") {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut rest = s;
    if let Some(after) = s.strip_prefix(':').filter(|a| a.starts_with(':')) {
        out.push_str("\\x3a");
        rest = after;
    }
    for c in rest.chars() {
        if hidden(c) {
            show(c, &mut out);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A page we composed for a terminal or a CI log, checked as it is
/// written: the last guard behind the encoders, for text that holds
/// outside text we did not encode. Line breaks and tabs are kept; every
/// other control character is shown as an escape, ESC included unless it
/// begins a colour (SGR: `ESC [ digits and ; m`) and `keep_colour` is set;
/// and a line that begins with `::` begins with `\x3a:`, so nothing we
/// print is read as a GitHub workflow command. Borrowed when there is
/// nothing to change.
pub fn terminal_page(s: &str, keep_colour: bool) -> Cow<'_, str> {
    let clean = !s.starts_with("::")
        && !s.contains("\n::")
        && !s.chars().any(|c| c != '\n' && c != '\t' && hidden(c));
    if clean {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for (i, line) in s.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mut rest = line;
        if let Some(after) = line.strip_prefix(':').filter(|a| a.starts_with(':')) {
            out.push_str("\\x3a");
            rest = after;
        }
        let mut chars = rest.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            if c == '\u{1b}' && keep_colour {
                if let Some(len) = sgr_len(&rest[at..]) {
                    out.push_str(&rest[at..at + len]);
                    while chars.peek().is_some_and(|&(k, _)| k < at + len) {
                        chars.next();
                    }
                    continue;
                }
            }
            if c != '\t' && hidden(c) {
                show(c, &mut out);
            } else {
                out.push(c);
            }
        }
    }
    Cow::Owned(out)
}

/// The length of the colour sequence (`ESC [ 0-9 ; ... m`) that `s`
/// begins with, if it begins with one.
fn sgr_len(s: &str) -> Option<usize> {
    let body = s.strip_prefix("\u{1b}[")?;
    let params = body
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b';')
        .count();
    (body.as_bytes().get(params) == Some(&b'm')).then_some(2 + params + 1)
}

/// Text for Markdown prose or a table cell that reads as the characters
/// it holds, and still reads as prose in the raw file. Escaped with a
/// backslash: every character that opens or closes an inline construct of
/// CommonMark or GitHub (`\\`, `` ` ``, `*`, `_`, `~`, `[`, `]`, `<`, `>`,
/// `&`, `|`, `$`), so no emphasis, code, link, image, HTML, entity, table
/// column or math is built from it; and a first character that would
/// start a block (`#`, `-`, `+` or an ordered list's `1.`, before a
/// blank). Control
/// characters are shown as escapes ([`terminal`]). The forms GitHub links
/// without any punctuation (`@name`, `#123`, `://`, `www.`) are broken with
/// a word joiner (U+2060), which shows nothing.
pub fn markdown_text(s: &str) -> String {
    let s = terminal(s);
    let mut out = String::with_capacity(s.len() + 16);
    // A block marker counts only when a blank or the end follows it.
    let marker_at = |k: usize| matches!(s.as_bytes().get(k + 1), None | Some(b' ' | b'\t'));
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let ordered =
        digits > 0 && matches!(s.as_bytes().get(digits), Some(b'.' | b')')) && marker_at(digits);
    let mut ws = 0;
    for (i, c) in s.char_indices() {
        ws = if c.eq_ignore_ascii_case(&'w') {
            ws + 1
        } else {
            0
        };
        let opens = matches!(
            c,
            '\\' | '`' | '*' | '_' | '~' | '[' | ']' | '<' | '>' | '&' | '|' | '$'
        );
        let starts = i == 0 && matches!(c, '#' | '-' | '+') && marker_at(0);
        if opens || starts || (ordered && i == digits) {
            out.push('\\');
        }
        out.push(c);
        if matches!(c, '@' | '#') || ws == 3 || (c == ':' && s[i..].starts_with("://")) {
            out.push('\u{2060}');
        }
    }
    out
}

/// The text as a Markdown code span, for prose: inside a code span
/// Markdown builds nothing (no emphasis, link, image, autolink, HTML or
/// mention), so the reader sees the characters as they came. Control
/// characters are shown as escapes ([`terminal`]), the fence is longer
/// than any run of backticks inside, and a space pads text that begins or
/// ends with a backtick. Empty text is an empty pair of quotes.
pub fn markdown_code(s: &str) -> String {
    code_span(&terminal(s), false)
}

/// [`markdown_code`] for a GFM table cell: a `|` inside is escaped as
/// `\|`, which the table reads as part of the cell (GFM removes the
/// backslash, in code spans too) instead of a column's end.
pub fn markdown_cell(s: &str) -> String {
    code_span(&terminal(s), true)
}

fn code_span(s: &str, cell: bool) -> String {
    if s.is_empty() {
        return "\"\"".into();
    }
    let mut longest = 0;
    let mut run = 0;
    for c in s.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') || (s.starts_with(' ') && s.ends_with(' '))
    {
        " "
    } else {
        ""
    };
    let body: Cow<str> = if cell && s.contains('|') {
        Cow::Owned(s.replace('|', "\\|"))
    } else {
        Cow::Borrowed(s)
    };
    format!("{fence}{pad}{body}{pad}{fence}")
}

/// Escapes text for HTML and XML 1.0, in element content and in
/// attribute values (single- or double-quoted): `&`, `<`, `>`, `"` and
/// `'` become references (`'` as `&#39;`, which HTML 4 reads as well as
/// XML). Characters XML 1.0 cannot carry at all, the control characters
/// other than tab, line feed and carriage return and U+FFFE/U+FFFF, are
/// dropped; HTML does not allow them either.
pub fn markup(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => {}
            '\u{FFFE}' | '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

/// One CSV field (RFC 4180), made inert for spreadsheets (OWASP's rule
/// against CSV injection): a field that begins with `=`, `+`, `-`, `@`, a
/// tab or a carriage return is prefixed with `'`, so no formula runs;
/// then a field with a comma, a quote or a line break is quoted, its
/// quotes doubled.
pub fn csv(s: &str) -> Cow<'_, str> {
    let formula = s.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let quote = s.contains([',', '"', '\n', '\r']);
    if !formula && !quote {
        return Cow::Borrowed(s);
    }
    let inner: Cow<str> = if formula {
        Cow::Owned(format!("'{s}"))
    } else {
        Cow::Borrowed(s)
    };
    if quote || inner.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", inner.replace('"', "\"\"")))
    } else {
        inner
    }
}

/// A label value in the Prometheus text exposition format: backslash,
/// double quote and line feed escaped as the format defines (`\\`, `\"`,
/// `\n`), so no value ends its label or its line.
pub fn prom_label(s: &str) -> Cow<'_, str> {
    if !s.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 4);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn clip_cuts_at_a_character_boundary() {
        assert_eq!(super::clip("héllo", 2), "h");
        assert_eq!(super::clip("héllo", 3), "hé");
        assert_eq!(super::clip("abc", 10), "abc");
    }

    #[test]
    fn a_page_keeps_our_lines_and_colours_and_nothing_else() {
        let page = "ok \u{1b}[31mred\u{1b}[0m\n::error::x\n\tok\u{1b}]52;c;QQ==\u{7}\r";
        assert_eq!(
            terminal_page(page, true),
            "ok \u{1b}[31mred\u{1b}[0m\n\\x3a:error::x\n\tok\\x1b]52;c;QQ==\\x07\\r"
        );
        assert_eq!(
            terminal_page(page, false),
            "ok \\x1b[31mred\\x1b[0m\n\\x3a:error::x\n\tok\\x1b]52;c;QQ==\\x07\\r"
        );
        assert!(matches!(
            terminal_page("plain\nlines", false),
            Cow::Borrowed(_)
        ));
        // A colour cut short is not a colour.
        assert_eq!(terminal_page("\u{1b}[31", true), "\\x1b[31");
    }

    #[test]
    fn markdown_text_builds_nothing_and_notifies_no_one() {
        assert_eq!(
            markdown_text("a_b *c* 0.5 req/s"),
            "a\\_b \\*c\\* 0.5 req/s"
        );
        assert_eq!(markdown_text("<img src=x>"), "\\<img src=x\\>");
        assert_eq!(
            markdown_text("![p](x) [l](javascript:y)"),
            "!\\[p\\](x) \\[l\\](javascript:y)"
        );
        assert_eq!(
            markdown_text("@octocat #12"),
            "@\u{2060}octocat #\u{2060}12"
        );
        assert_eq!(
            markdown_text("see https://x.io or www.x.io"),
            "see https:\u{2060}//x.io or www\u{2060}.x.io"
        );
        assert_eq!(markdown_text("# title"), "\\#\u{2060} title");
        assert_eq!(markdown_text("- item"), "\\- item");
        assert_eq!(markdown_text("12. item"), "12\\. item");
        assert_eq!(markdown_text("two\nlines\u{1b}"), "two\\\\nlines\\\\x1b");
    }

    use super::*;

    #[test]
    fn terminal_shows_controls_and_keeps_text() {
        assert_eq!(terminal("plain text, 1.5 ms"), "plain text, 1.5 ms");
        assert!(matches!(terminal("tab\tkept"), Cow::Borrowed(_)));
        assert_eq!(
            terminal("a\u{1b}]52;c;aGk=\u{7}b"),
            "a\\x1b]52;c;aGk=\\x07b",
            "OSC 52 (the clipboard) does not run"
        );
        assert_eq!(terminal("ok\rFAIL"), "ok\\rFAIL");
        assert_eq!(terminal("x\n::error::forged"), "x\\n::error::forged");
        assert_eq!(terminal("::add-mask::x"), "\\x3a:add-mask::x");
        assert_eq!(terminal("\u{9b}2J"), "\\u{9b}2J", "C1 CSI");
        assert_eq!(terminal("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(terminal("\u{7f}"), "\\x7f");
        assert_eq!(terminal("µs ≥ 😀"), "µs ≥ 😀");
    }

    #[test]
    fn markdown_builds_nothing_from_outside_text() {
        assert_eq!(
            markdown_code("<img src=x onerror=alert(1)>"),
            "`<img src=x onerror=alert(1)>`"
        );
        assert_eq!(markdown_code("a `b` c"), "``a `b` c``");
        assert_eq!(markdown_code("`x`"), "`` `x` ``");
        assert_eq!(markdown_code(""), "\"\"");
        assert_eq!(markdown_code("l1\nl2"), "`l1\\nl2`");
        assert_eq!(markdown_cell("a|b"), "`a\\|b`");
        assert_eq!(markdown_code("a|b"), "`a|b`");
    }

    #[test]
    fn csv_neutralizes_formulas_and_quotes() {
        assert_eq!(csv("plain"), "plain");
        assert_eq!(csv("=1+2"), "'=1+2");
        assert_eq!(csv("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv("-2+3"), "'-2+3");
        assert_eq!(csv("a,b"), "\"a,b\"");
        assert_eq!(csv("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(
            csv("=HYPERLINK(\"x\",\"y\")"),
            "\"'=HYPERLINK(\"\"x\"\",\"\"y\"\")\""
        );
    }

    #[test]
    fn prom_label_values_end_nothing() {
        assert_eq!(prom_label("llama"), "llama");
        assert_eq!(prom_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn outside_text_serializes_as_a_plain_string() {
        let o = Outside::from("x\u{1b}y");
        assert_eq!(serde_json::to_string(&o).unwrap(), "\"x\\u001by\"");
        let back: Outside = serde_json::from_str("\"x\\u001by\"").unwrap();
        assert_eq!(back, o);
        assert_eq!(format!("{o:?}"), "Outside(\"x\\u{1b}y\")");
    }
}
