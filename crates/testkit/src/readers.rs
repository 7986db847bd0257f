//! Checks that text a server or a pull request controls reached a reader
//! as text: each output in its own grammar. A terminal or CI log shows no
//! escape and no line that GitHub reads as a workflow command; Markdown,
//! parsed as CommonMark with GitHub's tables, builds no HTML, link or
//! image and, outside code, holds no bare link or mention (GitHub makes
//! those by itself); HTML and XML hold no markup of the outsider's; no CSV
//! field starts a spreadsheet formula. The probes look for the markers of
//! `hostile::INJECTION`.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// What a terminal or a CI log may not be given from outside: an escape
/// sequence, a carriage return that overwrites, a bell, or a line that
/// GitHub reads as a workflow command.
pub fn assert_terminal_safe(what: &str, s: &str) {
    for (i, line) in s.lines().enumerate() {
        assert!(
            !line.trim_start().starts_with("::"),
            "{what}: line {} is a workflow command: {line:?}",
            i + 1
        );
    }
    for bad in ['\u{1b}', '\r', '\u{7}', '\u{9b}'] {
        assert!(!s.contains(bad), "{what}: holds {bad:?}:\n{s}");
    }
}

/// Markdown, parsed as CommonMark with GitHub's tables: no HTML, no link,
/// no image; outside code spans, no text that GitHub turns into a link or
/// a mention by itself (it does so for bare `www.`/`https://` and
/// `@name`); and no line a CI log reads as a workflow command.
pub fn assert_markdown_safe(what: &str, md: &str) {
    assert_terminal_safe(what, md);
    let mut in_code_block = false;
    for event in Parser::new_ext(md, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH) {
        match event {
            Event::Html(h) | Event::InlineHtml(h) => {
                // Our own collapsible blocks are the only HTML we write.
                let ours = [
                    "<details>",
                    "</details>",
                    "<summary>",
                    "</summary>",
                    "<sub>",
                    "</sub>",
                ];
                let rest = ours.iter().fold(h.to_string(), |t, tag| t.replace(tag, ""));
                assert!(
                    !rest.contains('<'),
                    "{what}: HTML from outside: {h:?}\n{md}"
                );
            }
            Event::Start(Tag::Link { dest_url, .. }) => {
                panic!("{what}: a link to {dest_url:?}\n{md}")
            }
            Event::Start(Tag::Image { dest_url, .. }) => {
                panic!("{what}: an image from {dest_url:?}\n{md}")
            }
            Event::Start(Tag::CodeBlock(_)) => in_code_block = true,
            Event::End(TagEnd::CodeBlock) => in_code_block = false,
            Event::Text(t) if !in_code_block => {
                for bad in ["@octocat", "www.evil", "https://evil"] {
                    assert!(
                        !t.contains(bad),
                        "{what}: {bad:?} in text GitHub would link or notify: {t:?}\n{md}"
                    );
                }
            }
            _ => {}
        }
    }
}

/// The injected markup may appear only escaped in HTML and XML.
pub fn assert_markup_safe(what: &str, s: &str) {
    for bad in ["<img", "\u{1b}"] {
        assert!(!s.contains(bad), "{what}: holds {bad:?}");
    }
}

/// No CSV field starts a formula: the text is read as RFC 4180 (quoted
/// fields may hold commas, quotes and line breaks), and no field's value
/// begins with `=`, `+`, `@`, a tab, a carriage return, or a `-` that does
/// not begin a number.
pub fn assert_csv_safe(what: &str, csv: &str) {
    for (row, fields) in csv_records(csv).iter().enumerate() {
        for f in fields {
            let formula = f.starts_with(['=', '+', '@', '\t', '\r'])
                || (f.starts_with('-') && f.parse::<f64>().is_err());
            assert!(
                !formula,
                "{what}: record {} starts a formula: {f:?}",
                row + 1
            );
        }
    }
}

/// The records of an RFC 4180 text, each a list of field values.
fn csv_records(text: &str) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                c => field.push(c),
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            ',' => record.push(std::mem::take(&mut field)),
            '\n' => {
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            c => field.push(c),
        }
    }
    if !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push(record);
    }
    records
}
