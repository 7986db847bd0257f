//! The hot-path CPU cost of a vision chat request: writing the body of a
//! request with 4 images of 1024x1024 (PNG, as data URLs) once its media
//! were made. Making them (the PNG's compressed rows once per run, each
//! image's own first row and base64 per request) happens before the send
//! time, in the builder; it is measured here too, off the clock, so the
//! two can be compared.

use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use infer_bench::protocol::Protocol;
use infer_bench::protocol::openai::Chat;
use infer_bench::spec::Dialect;
use infer_bench_workload::{Material, PromptGen};

fn workload() -> infer_bench::spec::Workload {
    let text = "name = \"b\"\n[targets.s]\nkind = \"sim\"\ngpu = \"h100-sxm\"\n[models.m]\npreset = \"llama-3.1-8b\"\n[workloads.w]\ninput_tokens = 64\noutput_tokens = 64\nimages = { count = 4, width = 1024, height = 1024, format = \"png\", detail = \"high\" }\n[load]\nconcurrency = 1\nrequests = 1\n";
    let spec = infer_bench::spec::compile("b.toml", text, std::path::Path::new(".")).unwrap();
    let plan = infer_bench::spec::plan::Plan::build(&spec).unwrap();
    (*plan.points[0].config.workload).clone()
}

fn bench(c: &mut Criterion) {
    let w = workload();
    let prompt_gen = PromptGen::new(&w, Arc::new(Material::plain()), 1, 2);
    let chat = Chat::new(&w, "m", Dialect::Vllm);
    // Prepared before the clock, as the builder does.
    let prompts: Vec<_> = (0..64).map(|i| prompt_gen.prompt(i)).collect();
    let bytes = chat.body(&prompts[0]).len() as u64;
    let mut g = c.benchmark_group("media");
    g.throughput(Throughput::Bytes(bytes));
    let mut i = 0;
    g.bench_function("chat body, 4 images 1024x1024 png (hot path)", |b| {
        b.iter(|| {
            i = (i + 1) % prompts.len();
            bytes::Bytes::from(chat.body(&prompts[i]))
        })
    });
    let mut k = 0u64;
    g.bench_function(
        "request media, 4 images 1024x1024 png (builder, off the clock)",
        |b| {
            b.iter(|| {
                k += 1;
                prompt_gen.prompt(k)
            })
        },
    );
    g.sample_size(10);
    g.bench_function("png base 1024x1024 encode (once per run)", |b| {
        b.iter(|| PromptGen::new(&w, Arc::new(Material::plain()), 3, 4))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
