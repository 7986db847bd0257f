//! The SSE parser on arbitrary bytes: the first byte picks the line bound,
//! the next two a cut point; feeding the rest whole and in two pieces must
//! never panic, never hold more than the bound, and give the same events
//! and the same error.
#![no_main]

use infer_bench_protocol::sse::SseParser;
use libfuzzer_sys::fuzz_target;

type Events = Vec<(Vec<u8>, Vec<u8>)>;

fn parse(input: &[u8], cut: usize, max_line: usize) -> (Events, bool) {
    let mut p = SseParser::with_max_line(max_line);
    let mut out = Vec::new();
    for piece in [&input[..cut], &input[cut..]] {
        if p.feed(piece, |e| out.push((e.name.to_vec(), e.data.to_vec())))
            .is_err()
        {
            return (out, true);
        }
    }
    let failed = p
        .finish(|e| out.push((e.name.to_vec(), e.data.to_vec())))
        .is_err();
    (out, failed)
}

fuzz_target!(|data: &[u8]| {
    let [bound, a, b, rest @ ..] = data else {
        return;
    };
    let max_line = if *bound == 0 {
        usize::MAX
    } else {
        *bound as usize
    };
    let cut = u16::from_le_bytes([*a, *b]) as usize % (rest.len() + 1);
    let whole = parse(rest, 0, max_line);
    let split = parse(rest, cut, max_line);
    assert_eq!(whole, split);
    for (_, d) in &whole.0 {
        assert!(d.len() <= max_line);
    }
});
