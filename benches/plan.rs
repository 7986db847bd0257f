//! Matrix expansion at scale: a spec of 100,000 points, expanded and every
//! point resolved and hashed (the whole of `Plan::build`), and the
//! expansion rules alone. Target: well under a second for 100,000 points.

use criterion::{Criterion, criterion_group, criterion_main};
use infer_bench::plan::{Plan, expand};

fn spec_text() -> String {
    let mut s = String::from("name = \"big\"\n");
    for t in 0..10 {
        s.push_str(&format!(
            "[targets.t{t}]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:{}/v1\"\n",
            8000 + t
        ));
    }
    for m in 0..10 {
        s.push_str(&format!("[models.m{m}]\n"));
    }
    for w in 0..10 {
        s.push_str(&format!(
            "[workloads.w{w}]\ninput_tokens = {}\noutput_tokens = 64\n",
            100 + w
        ));
    }
    s.push_str("[load]\nduration = \"10s\"\n[matrix]\n");
    let list = |p: &str, n: usize| {
        (0..n)
            .map(|i| format!("\"{p}{i}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    s.push_str(&format!(
        "target = [{}]\nmodel = [{}]\nworkload = [{}]\n",
        list("t", 10),
        list("m", 10),
        list("w", 10)
    ));
    s.push_str(&format!(
        "concurrency = [{}]\n",
        (1..=100)
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    s
}

fn bench(c: &mut Criterion) {
    let text = spec_text();
    let spec = infer_bench::spec::compile("big.toml", &text, std::path::Path::new("."))
        .expect("valid spec");
    assert_eq!(Plan::build(&spec).unwrap().points.len(), 100_000);
    let mut g = c.benchmark_group("matrix");
    g.sample_size(10);
    g.bench_function("plan 100k points (expand, resolve, hash)", |b| {
        b.iter(|| Plan::build(&spec).unwrap().points.len())
    });
    let axes: Vec<(u32, Vec<u32>)> = vec![
        (0, (0..10).collect()),
        (1, (0..10).collect()),
        (2, (0..10).collect()),
        (3, (0..100).collect()),
    ];
    let exclude = vec![vec![(0, 1), (3, 5)]];
    let include = vec![vec![(0, 2), (9, 1)]];
    g.bench_function("expand 100k combinations (rules only)", |b| {
        b.iter(|| expand(&axes, &exclude, &include).len())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
