//! The one escaper for markup the exporters write: HTML pages, SVG charts,
//! JUnit XML, and the few HTML tags inside Markdown.

/// Escapes text for HTML and XML 1.0, in element content and in
/// attribute values (single- or double-quoted): `&`, `<`, `>`, `"` and
/// `'` become references (`'` as `&#39;`, which HTML 4 reads as well as
/// XML). Characters XML 1.0 cannot carry at all, the control characters
/// other than tab, line feed and carriage return and U+FFFE/U+FFFF, are
/// dropped; HTML does not allow them either.
pub fn escape(s: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape("<a href=\"x\">Tom & 'Jerry'</a>"),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;"
        );
        assert_eq!(escape("p99 < 200ms"), "p99 &lt; 200ms");
        assert_eq!(escape("plain text, 1.5 ms"), "plain text, 1.5 ms");
    }

    #[test]
    fn drops_what_xml_cannot_hold() {
        assert_eq!(
            escape("a<b & \"c\" 'd'>\u{1}\u{7}\u{1b}e\n\tf\r\u{FFFE}\u{FFFF}"),
            "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;e\n\tf\r"
        );
        // Everything else passes through, non-ASCII included.
        assert_eq!(escape("≈ ≥ 1× µs \u{FFFD} 😀"), "≈ ≥ 1× µs \u{FFFD} 😀");
    }
}
