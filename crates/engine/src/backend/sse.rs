//! An incremental Server-Sent Events parser, per the WHATWG rules: events
//! split across reads, several events in one read, LF / CRLF / CR line
//! endings (a CRLF split between two reads included), comments, multi-line
//! `data:` fields, `event:` names. It allocates only when an event spans
//! reads or has several data lines, so the common case (one `data:` line per
//! event, whole in one read) is a borrow of the input.

/// The state between reads.
#[derive(Default, Debug)]
pub struct SseParser {
    /// An incomplete line carried over from the previous read.
    partial: Vec<u8>,
    /// Data lines of the current event, joined with '\n'.
    data: Vec<u8>,
    has_data: bool,
    event: Vec<u8>,
    /// The previous read ended with '\r': a leading '\n' now is its pair.
    after_cr: bool,
}

/// One dispatched event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event<'a> {
    /// The `event:` name, empty for the default ("message").
    pub name: &'a [u8],
    pub data: &'a [u8],
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one read; calls `on_event` for every event it completes.
    pub fn feed(&mut self, mut input: &[u8], mut on_event: impl FnMut(Event<'_>)) {
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = input.strip_prefix(b"\n") {
                input = rest;
            }
        }
        while !input.is_empty() {
            let Some(pos) = memchr::memchr2(b'\n', b'\r', input) else {
                self.partial.extend_from_slice(input);
                return;
            };
            let mut next = pos + 1;
            if input[pos] == b'\r' {
                match input.get(pos + 1) {
                    Some(b'\n') => next += 1,
                    None => self.after_cr = true,
                    _ => {}
                }
            }
            if self.partial.is_empty() {
                self.line(&input[..pos], &mut on_event);
            } else {
                self.partial.extend_from_slice(&input[..pos]);
                let line = std::mem::take(&mut self.partial);
                self.line(&line, &mut on_event);
                self.partial = line;
                self.partial.clear();
            }
            input = &input[next..];
        }
    }

    /// The stream ended: an event whose blank line never came is still
    /// dispatched (servers that close without the final blank line are
    /// common; the data is real).
    pub fn finish(&mut self, mut on_event: impl FnMut(Event<'_>)) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line, &mut on_event);
        }
        self.dispatch(&mut on_event);
    }

    fn line(&mut self, line: &[u8], on_event: &mut impl FnMut(Event<'_>)) {
        if line.is_empty() {
            self.dispatch(on_event);
            return;
        }
        if line[0] == b':' {
            return; // a comment (keep-alive)
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            _ => {} // id, retry and unknown fields do not matter here
        }
    }

    fn dispatch(&mut self, on_event: &mut impl FnMut(Event<'_>)) {
        if self.has_data {
            on_event(Event {
                name: &self.event,
                data: &self.data,
            });
        }
        self.data.clear();
        self.event.clear();
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(input: &[u8], cuts: &[usize]) -> Vec<(String, String)> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        let mut last = 0;
        for &c in cuts.iter().chain(std::iter::once(&input.len())) {
            p.feed(&input[last..c], |e| {
                out.push((
                    String::from_utf8_lossy(e.name).into(),
                    String::from_utf8_lossy(e.data).into(),
                ))
            });
            last = c;
        }
        p.finish(|e| {
            out.push((
                String::from_utf8_lossy(e.name).into(),
                String::from_utf8_lossy(e.data).into(),
            ))
        });
        out
    }

    fn datas(input: &[u8], cuts: &[usize]) -> Vec<String> {
        parse_in_pieces(input, cuts)
            .into_iter()
            .map(|e| e.1)
            .collect()
    }

    #[test]
    fn framing() {
        let s = b"data: a\n\ndata: b\n\n";
        assert_eq!(datas(s, &[]), vec!["a", "b"]);
        // Every possible split point gives the same events.
        for cut in 0..s.len() {
            assert_eq!(datas(s, &[cut]), vec!["a", "b"], "cut at {cut}");
        }
        assert_eq!(
            datas(b"data: a\r\n\r\ndata: b\r\n\r\n", &[8]),
            vec!["a", "b"]
        );
        assert_eq!(
            datas(b"data: a\r\n\r\ndata: b\r\n\r\n", &[9]),
            vec!["a", "b"]
        );
        assert_eq!(datas(b"data: a\r\rdata: b\r\r", &[]), vec!["a", "b"]);
        assert_eq!(datas(b": ping\n\ndata: x\n: another\n\n", &[]), vec!["x"]);
        assert_eq!(
            datas(b"data: line1\ndata: line2\n\n", &[3]),
            vec!["line1\nline2"]
        );
        assert_eq!(datas(b"data:nospace\n\n", &[]), vec!["nospace"]);
        assert_eq!(datas(b"data: [DONE]", &[]), vec!["[DONE]"]); // no final blank line
        assert_eq!(datas(b"id: 1\nretry: 5\n\n", &[]), Vec::<String>::new());
        let named = parse_in_pieces(b"event: error\ndata: {}\n\ndata: y\n\n", &[]);
        assert_eq!(
            named,
            vec![("error".into(), "{}".into()), ("".into(), "y".into())]
        );
    }

    #[test]
    fn real_llama_server_streams() {
        for (file, n) in [("completions-stream.sse", 13), ("chat-stream.sse", 15)] {
            let path = format!(
                "{}/../../tests/fixtures/llama-server/{file}",
                env!("CARGO_MANIFEST_DIR")
            );
            let bytes = std::fs::read(&path).unwrap();
            let whole = datas(&bytes, &[]);
            assert_eq!(whole.last().map(String::as_str), Some("[DONE]"), "{file}");
            assert!(whole.len() >= n, "{file}: {} events", whole.len());
            // Byte-at-a-time reads give the same events.
            let cuts: Vec<usize> = (1..bytes.len()).collect();
            assert_eq!(datas(&bytes, &cuts), whole);
        }
    }
}
