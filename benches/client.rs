//! The client's per-event and per-request CPU cost, without a network: the
//! SSE parser and event interpretation on real llama.cpp frames, and the
//! recorder's per-request work. `infer-bench self-bench` measures the whole
//! client against a server in another process.

use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use infer_bench::protocol::openai::interpret;
use infer_bench::protocol::sse::SseParser;

fn stream(events: usize) -> Vec<u8> {
    let mut s = Vec::new();
    for i in 0..events {
        s.extend_from_slice(
            format!(
                "data: {{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1796218489,\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"choices\":[{{\"index\":0,\"text\":\" token{i}\",\"logprobs\":null,\"finish_reason\":null}}]}}\n\n"
            )
            .as_bytes(),
        );
    }
    s.extend_from_slice(b"data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":1000}}\n\ndata: [DONE]\n\n");
    s
}

fn bench(c: &mut Criterion) {
    let body = stream(1000);
    let mut g = c.benchmark_group("client");
    g.throughput(Throughput::Elements(1002));
    // Reads of 1.4 KB, like a socket delivering a few events at a time.
    g.bench_function("sse parse + interpret, per event", |b| {
        b.iter(|| {
            let mut p = SseParser::new();
            let mut outputs = 0;
            for chunk in body.chunks(1400) {
                let _now = Instant::now();
                p.feed(chunk, |e| {
                    if interpret(e.data, None).map(|i| i.output).unwrap_or(false) {
                        outputs += 1;
                    }
                })
                .expect("the bench stream has no oversized line");
            }
            outputs
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
