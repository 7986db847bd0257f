//! The one escaper for markup the exporters write: HTML pages, SVG charts,
//! JUnit XML, and the few HTML tags inside Markdown.

/// Escapes text for HTML and XML 1.0 (the one escaper, shared with
/// outside text: [`infer_bench_results::outside::markup`]).
pub fn escape(s: &str) -> String {
    infer_bench_results::outside::markup(s)
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
