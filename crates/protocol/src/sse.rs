//! An incremental Server-Sent Events parser, per the WHATWG rules: events
//! split across reads, several events in one read, LF / CRLF / CR line
//! endings (a CRLF split between two reads included), comments, multi-line
//! `data:` fields, `event:` names. It allocates only when an event spans
//! reads or has several data lines, so the common case (one `data:` line per
//! event, whole in one read) is a borrow of the input.
//!
//! What it holds is bounded: a line longer than the parser's `max_line`, or
//! an event whose data lines together are larger, is an error, whatever the
//! reads it came in (a server that never sends a newline cannot grow the
//! buffer without end). After an error the parser's state is unspecified:
//! the caller stops reading.

/// The state between reads.
#[derive(Debug)]
pub struct SseParser {
    /// An incomplete line carried over from the previous read.
    partial: Vec<u8>,
    /// Data lines of the current event, joined with '\n'.
    data: Vec<u8>,
    has_data: bool,
    event: Vec<u8>,
    /// The previous read ended with '\r': a leading '\n' now is its pair.
    after_cr: bool,
    /// Longest line, and largest event data, in bytes.
    max_line: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        SseParser::with_max_line(usize::MAX)
    }
}

/// A line or an event beyond the parser's bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("an SSE line longer than {limit} bytes")]
    LineTooLong { limit: usize },
    #[error("an SSE event larger than {limit} bytes")]
    EventTooLarge { limit: usize },
}

/// One dispatched event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event<'a> {
    /// The `event:` name, empty for the default ("message").
    pub name: &'a [u8],
    pub data: &'a [u8],
}

impl SseParser {
    /// A parser without a bound (for trusted input, e.g. test fixtures).
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser that refuses lines (and events) longer than `max_line` bytes.
    pub fn with_max_line(max_line: usize) -> Self {
        SseParser {
            partial: Vec::new(),
            data: Vec::new(),
            has_data: false,
            event: Vec::new(),
            after_cr: false,
            max_line,
        }
    }

    /// Feeds one read; calls `on_event` for every event it completes, in
    /// order, up to the line or event that breaks the bound, if any.
    pub fn feed(
        &mut self,
        mut input: &[u8],
        mut on_event: impl FnMut(Event<'_>),
    ) -> Result<(), SseError> {
        if self.after_cr && !input.is_empty() {
            self.after_cr = false;
            if let Some(rest) = input.strip_prefix(b"\n") {
                input = rest;
            }
        }
        while !input.is_empty() {
            let Some(pos) = memchr::memchr2(b'\n', b'\r', input) else {
                if self.partial.len() + input.len() > self.max_line {
                    return Err(SseError::LineTooLong {
                        limit: self.max_line,
                    });
                }
                self.partial.extend_from_slice(input);
                return Ok(());
            };
            if self.partial.len() + pos > self.max_line {
                return Err(SseError::LineTooLong {
                    limit: self.max_line,
                });
            }
            let mut next = pos + 1;
            if input[pos] == b'\r' {
                match input.get(pos + 1) {
                    Some(b'\n') => next += 1,
                    None => self.after_cr = true,
                    _ => {}
                }
            }
            if self.partial.is_empty() {
                self.line(&input[..pos], &mut on_event)?;
            } else {
                self.partial.extend_from_slice(&input[..pos]);
                let line = std::mem::take(&mut self.partial);
                let r = self.line(&line, &mut on_event);
                self.partial = line;
                self.partial.clear();
                r?;
            }
            input = &input[next..];
        }
        Ok(())
    }

    /// The stream ended: an event whose blank line never came is still
    /// dispatched (servers that close without the final blank line are
    /// common; the data is real).
    pub fn finish(&mut self, mut on_event: impl FnMut(Event<'_>)) -> Result<(), SseError> {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line, &mut on_event)?;
        }
        self.dispatch(&mut on_event);
        Ok(())
    }

    fn line(&mut self, line: &[u8], on_event: &mut impl FnMut(Event<'_>)) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch(on_event);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(()); // a comment (keep-alive)
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
                if self.data.len() + usize::from(self.has_data) + value.len() > self.max_line {
                    return Err(SseError::EventTooLarge {
                        limit: self.max_line,
                    });
                }
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
        Ok(())
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
            })
            .unwrap();
            last = c;
        }
        p.finish(|e| {
            out.push((
                String::from_utf8_lossy(e.name).into(),
                String::from_utf8_lossy(e.data).into(),
            ))
        })
        .unwrap();
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
        // An empty read between a CR and its LF does not split the pair.
        assert_eq!(datas(b"data: a\r\ndata: b\r\n\r\n", &[8, 8]), vec!["a\nb"]);
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

    /// Events as (name, data).
    type Events = Vec<(Vec<u8>, Vec<u8>)>;

    /// Feeds `input` cut at `cuts` (sorted, within bounds) to a parser bound
    /// at `max_line`: the events up to the first error, and the error.
    fn bounded(input: &[u8], cuts: &[usize], max_line: usize) -> (Events, Option<SseError>) {
        let mut p = SseParser::with_max_line(max_line);
        let mut out = Vec::new();
        let mut last = 0;
        for &c in cuts.iter().chain(std::iter::once(&input.len())) {
            let r = p.feed(&input[last..c], |e| {
                out.push((e.name.to_vec(), e.data.to_vec()))
            });
            if let Err(e) = r {
                return (out, Some(e));
            }
            last = c;
        }
        let r = p.finish(|e| out.push((e.name.to_vec(), e.data.to_vec())));
        (out, r.err())
    }

    /// What hostile servers send (see `infer_bench_testkit::hostile`).
    fn hostile_seeds() -> Vec<Vec<u8>> {
        let event = b"data: {\"choices\":[{\"index\":0,\"text\":\"x\"}]}\n\n".to_vec();
        let mut endless_line = b"data: ".to_vec();
        endless_line.extend(std::iter::repeat_n(b'x', 5000));
        vec![
            endless_line,
            event.repeat(50),
            [event.clone(), b": ping\n\n".repeat(20)].concat(),
            [event.clone(), event[..17].to_vec()].concat(),
            b"<!DOCTYPE html>\n<html><body>hi</body></html>\n".to_vec(),
            br#"{"choices":[{"text":"hello","finish_reason":"length"}]}"#.to_vec(),
            b"data: a\r\n\r\ndata: b\r\rdata: c\n\n\r\n".to_vec(),
            b"data: \ndata:\n\n".to_vec(),
        ]
    }

    #[test]
    fn a_line_or_event_beyond_the_bound_is_an_error_however_it_is_cut() {
        let long = [b"data: ".as_slice(), &[b'x'; 100]].concat();
        for cuts in [vec![], vec![3], vec![6, 50], (1..long.len()).collect()] {
            let (events, err) = bounded(&long, &cuts, 64);
            assert!(events.is_empty());
            assert_eq!(err, Some(SseError::LineTooLong { limit: 64 }), "{cuts:?}");
        }
        // A line of exactly the bound is fine.
        let exact = [b"data: ".as_slice(), &[b'x'; 58], b"\n\n"].concat();
        assert_eq!(bounded(&exact, &[10], 64).1, None);
        // Many short data lines make a large event.
        let many = b"data: 0123456789\n".repeat(10);
        assert_eq!(
            bounded(&many, &[], 64).1,
            Some(SseError::EventTooLarge { limit: 64 })
        );
        // Events before the long line are dispatched first.
        let mixed = [b"data: a\n\n".as_slice(), &long].concat();
        let (events, err) = bounded(&mixed, &[], 64);
        assert_eq!(events, vec![(vec![], b"a".to_vec())]);
        assert!(err.is_some());
        // The buffer never grows past the bound.
        let mut p = SseParser::with_max_line(1024);
        let chunk = [b'y'; 512];
        let mut fed = 0;
        while p.feed(&chunk, |_| {}).is_ok() {
            fed += 1;
        }
        assert_eq!(fed, 2);
        assert!(p.partial.capacity() <= 1024);
    }

    /// A valid stream: events with names and several data lines, comments
    /// between, one line ending throughout.
    fn valid_stream() -> impl Strategy<Value = (Vec<u8>, Events)> {
        let text = "[a-zA-Z0-9 {}\":,\\[\\]]{0,20}";
        let event = (
            proptest::option::of("[a-z]{1,8}"),
            proptest::collection::vec(text, 1..4),
            proptest::bool::ANY,
        );
        (
            proptest::collection::vec(event, 0..12),
            prop_oneof![Just("\n"), Just("\r\n"), Just("\r")],
        )
            .prop_map(|(events, eol)| {
                let mut bytes = Vec::new();
                let mut expect = Vec::new();
                for (name, lines, comment) in events {
                    if comment {
                        bytes.extend_from_slice(format!(": ping{eol}").as_bytes());
                    }
                    if let Some(n) = &name {
                        bytes.extend_from_slice(format!("event: {n}{eol}").as_bytes());
                    }
                    for l in &lines {
                        bytes.extend_from_slice(format!("data: {l}{eol}").as_bytes());
                    }
                    bytes.extend_from_slice(eol.as_bytes());
                    expect.push((
                        name.unwrap_or_default().into_bytes(),
                        lines.join("\n").into_bytes(),
                    ));
                }
                (bytes, expect)
            })
    }

    fn cuts_of(len: usize, raw: Vec<usize>) -> Vec<usize> {
        let mut cuts: Vec<usize> = raw.into_iter().map(|c| c % (len + 1)).collect();
        cuts.sort_unstable();
        cuts
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Splitting a valid stream at any byte boundaries yields its events.
        #[test]
        fn any_split_of_a_valid_stream_gives_the_same_events(
            (bytes, expect) in valid_stream(),
            raw in proptest::collection::vec(any::<usize>(), 0..16),
        ) {
            let cuts = cuts_of(bytes.len(), raw);
            let (events, err) = bounded(&bytes, &cuts, 1 << 20);
            prop_assert_eq!(err, None);
            prop_assert_eq!(events, expect);
        }

        /// Garbage, cut anywhere and bound anywhere, never panics, and
        /// gives what the whole input gives: the same events, the same error.
        #[test]
        fn garbage_cut_anywhere_never_panics_and_agrees_with_the_whole(
            seed in prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..400),
                proptest::collection::vec(
                    prop_oneof![Just(b'\n'), Just(b'\r'), Just(b':'), Just(b'd'), Just(b'a'), Just(b' ')],
                    0..200,
                ),
                proptest::sample::select(hostile_seeds()),
            ],
            raw in proptest::collection::vec(any::<usize>(), 0..24),
            max_line in prop_oneof![1usize..64, Just(1usize << 20)],
        ) {
            let cuts = cuts_of(seed.len(), raw);
            let whole = bounded(&seed, &[], max_line);
            let pieces = bounded(&seed, &cuts, max_line);
            prop_assert_eq!(pieces, whole);
            let bytewise: Vec<usize> = (1..seed.len()).collect();
            prop_assert_eq!(bounded(&seed, &bytewise, max_line), bounded(&seed, &[], max_line));
        }
    }
}
