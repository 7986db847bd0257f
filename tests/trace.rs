//! Trace replay end to end: a trace of 2,000 requests replayed against the
//! scripted server, whose records say when each request really arrived,
//! how long its prompt was and what it said.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use infer_bench::plan::Plan;
use infer_bench::run::Interrupt;
use infer_bench::run::{RunOptions, run_plan};
use infer_bench::workload::TokenCounter;
use infer_bench_testkit::scripted::{Script, ScriptedServer};

fn tokenizer_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizer/tokenizer.json")
}

/// A small deterministic generator (splitmix64), so the trace is the same
/// on every machine.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// In `lo..hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}

/// One request of the generated trace.
struct Req {
    at_ms: u64,
    input: u32,
    output: u32,
    hash_ids: Vec<u64>,
}

const BLOCK: u32 = 16;
const REQUESTS: usize = 2_000;
const SPEEDUP: f64 = 10.0;

/// 2,000 requests over about 40 s of trace time, in bursts (some at the
/// same millisecond), each with a unique output length (so that the server's
/// record names its request) and prompts that share blocks: one of five
/// "system prompts" of 1 to 5 blocks, then blocks of their own.
fn make_trace() -> Vec<Req> {
    let mut rng = Mix(21);
    let mut t = 1_700_000_000_000u64; // a clock of its own: offsets count from the first
    let mut next_id = 100u64;
    (0..REQUESTS)
        .map(|i| {
            t += match rng.range(0, 10) {
                0 => 0,
                1 => rng.range(60, 120),
                _ => rng.range(5, 30),
            };
            let system = rng.range(0, 6);
            let mut hash_ids: Vec<u64> = (0..system).map(|b| system * 10 + b).collect();
            let own = rng.range(1, 60) as u32;
            let input = system as u32 * BLOCK + own;
            while (hash_ids.len() as u32) < input.div_ceil(BLOCK) {
                hash_ids.push(next_id);
                next_id += 1;
            }
            // Some requests give fewer blocks than their prompt holds.
            if rng.range(0, 5) == 0 {
                hash_ids.truncate(system as usize);
            }
            Req {
                at_ms: t,
                input,
                output: i as u32 + 1,
                hash_ids,
            }
        })
        .collect()
}

fn p99(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() * 99).div_ceil(100) - 1]
}

#[test]
fn a_replayed_trace_arrives_on_time_with_its_lengths_and_shared_prefixes() {
    // Its assertions are about time: the machine's cores to itself.
    let _timing = infer_bench_testkit::timing::exclusive();
    let trace = make_trace();
    let dir = tempfile::tempdir().unwrap();
    let lines: String = trace
        .iter()
        .map(|r| {
            format!(
                "{}\n",
                serde_json::json!({"timestamp": r.at_ms, "input_length": r.input,
                    "output_length": r.output, "hash_ids": r.hash_ids, "extra": "ignored"})
            )
        })
        .collect();
    std::fs::write(dir.path().join("trace.jsonl"), lines).unwrap();

    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script {
            ttft: Duration::from_millis(1),
            itl: Duration::ZERO,
            tokens_per_event: 256,
            keep_prompts: true,
            ..Script::default()
        }))
        .unwrap();
    let spec_path = dir.path().join("spec.toml");
    std::fs::write(
        &spec_path,
        format!(
            r#"
name = "replay"
seed = 5
[targets.scripted]
kind = "openai"
base_url = "{}"
[models.m]
served_name = "scripted-model"
tokenizer = "{}"
[workloads.replay]
api = "chat"
trace = {{ file = "trace.jsonl", format = "mooncake", speedup = {SPEEDUP}, block_tokens = {BLOCK} }}
"#,
            server.base_url(),
            tokenizer_path().display()
        ),
    )
    .unwrap();
    let spec = infer_bench::spec::load(&spec_path).unwrap_or_else(|e| panic!("{e}"));
    let plan = Plan::build(&spec).unwrap();
    let point = &plan.points[0].config;
    assert_eq!(point.workload.trace.as_ref().unwrap().requests, 2_000);
    assert_eq!(
        serde_json::to_value(point.load.arrival).unwrap(),
        "trace",
        "a trace workload implies its arrivals"
    );
    let opts = RunOptions {
        ..RunOptions::new(dir.path().join("out"))
    };
    let results = run_plan(&spec, &plan, &opts, &rt, Arc::new(Interrupt::default())).unwrap();
    rt.block_on(server.wait_idle());
    let records = server.records();
    assert_eq!(records.len(), REQUESTS, "the trace ends the run by itself");
    assert_eq!(results.points[0].merged.requests.succeeded, REQUESTS as u64);

    // Each record names its request by its unique output length.
    let by_request: BTreeMap<usize, _> = records
        .iter()
        .map(|r| (r.max_tokens as usize - 1, r))
        .collect();
    assert_eq!(by_request.len(), REQUESTS, "every request once");

    // Arrivals: server-side receive instants against the trace's offsets
    // (divided by the speedup), up to one constant shift (the run's start),
    // taken as the median so that no single request sets it.
    let first = by_request[&0].received;
    let t0 = trace[0].at_ms;
    let mut shifts: Vec<f64> = by_request
        .iter()
        .map(|(i, r)| {
            let got = (r.received - first).as_secs_f64() * 1e3;
            let want = (trace[*i].at_ms - t0) as f64 / SPEEDUP;
            got - want
        })
        .collect();
    let mut sorted = shifts.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    for s in &mut shifts {
        *s = (*s - median).abs();
    }
    let worst = shifts.iter().copied().fold(0.0, f64::max);
    let p99 = p99(shifts);
    // Within 1 ms, plus how late this machine wakes a thread just now
    // (the server's stamps wait for a core too) and how late the client
    // says it sent (its dispatch lag p99, which it reports and a point
    // over budget is INVALID for). On a quiet machine both add tens of
    // microseconds; with two busy loops on two cores, milliseconds: that
    // is the machine's, not the pacer's, error. What the pacer alone
    // keeps is self-bench's to state.
    let lag_ms = infer_bench_testkit::timing::wake_lag(300).as_secs_f64() * 1e3;
    let sent_late_ms = results.points[0].merged.latency_ms["dispatch_lag"].p99;
    eprintln!(
        "arrival error vs the trace: p99 {p99:.3} ms, max {worst:.3} ms; the machine's wake-up lag p99 {lag_ms:.3} ms, the client's dispatch lag p99 {sent_late_ms:.3} ms"
    );
    assert!(
        p99 < 1.0 + lag_ms + sent_late_ms,
        "p99 arrival error {p99:.3} ms (bound 1 ms + the machine's wake-up lag {lag_ms:.3} ms + the client's dispatch lag {sent_late_ms:.3} ms)"
    );

    // Lengths: exactly the trace's, by the tokenizer and at the server.
    let tok = TokenCounter::load(&tokenizer_path()).unwrap();
    for (i, r) in &by_request {
        let want = &trace[*i];
        assert_eq!(r.max_tokens, want.output);
        assert_eq!(
            r.prompt_tokens, want.input,
            "request {i}: words at the server"
        );
        assert_eq!(
            tok.count(&r.prompt, false),
            want.input,
            "request {i}: tokens"
        );
    }

    // Prefixes: requests whose blocks begin alike share the text of those
    // blocks byte for byte (cut to the shorter prompt); different first
    // blocks give different text.
    let words =
        |s: &str, n: usize| -> String { s.split(' ').take(n).collect::<Vec<_>>().join(" ") };
    let mut shared_pairs = 0;
    let mut distinct_pairs = 0;
    let ids: Vec<usize> = by_request.keys().copied().collect();
    for (k, &i) in ids.iter().enumerate().step_by(7) {
        for &j in ids[k + 1..].iter().take(60) {
            let (a, b) = (&trace[i], &trace[j]);
            let common = a
                .hash_ids
                .iter()
                .zip(&b.hash_ids)
                .take_while(|(x, y)| x == y)
                .count() as u32;
            let n = (common * BLOCK).min(a.input).min(b.input) as usize;
            let (pa, pb) = (&by_request[&i].prompt, &by_request[&j].prompt);
            if n > 0 {
                assert_eq!(words(pa, n), words(pb, n), "requests {i} and {j}");
                assert_eq!(
                    pa.as_bytes()[..words(pa, n).len()],
                    pb.as_bytes()[..words(pb, n).len()]
                );
                shared_pairs += 1;
            } else if common == 0 && !a.hash_ids.is_empty() && !b.hash_ids.is_empty() {
                assert_ne!(words(pa, 4), words(pb, 4), "requests {i} and {j}");
                distinct_pairs += 1;
            }
        }
    }
    eprintln!("{shared_pairs} pairs share a prefix, {distinct_pairs} share none");
    assert!(shared_pairs > 1_000 && distinct_pairs > 1_000);
    rt.block_on(server.shutdown());
}

/// A trace is its own arrival process: the same spec sends the same
/// requests at the same offsets, and `requests` or `duration` cut it short.
#[test]
fn a_trace_is_cut_by_the_window_and_the_load() {
    let dir = tempfile::tempdir().unwrap();
    let lines: String = (0..50)
        .map(|i| {
            format!(
                "{{\"offset_ms\": {}, \"input_tokens\": 8, \"output_tokens\": 2}}\n",
                i * 100
            )
        })
        .collect();
    std::fs::write(dir.path().join("t.jsonl"), lines).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script {
            ttft: Duration::from_millis(1),
            itl: Duration::ZERO,
            ..Script::default()
        }))
        .unwrap();
    let spec_path = dir.path().join("spec.toml");
    std::fs::write(
        &spec_path,
        format!(
            r#"
name = "cut"
[targets.scripted]
kind = "openai"
base_url = "{}"
[models.m]
served_name = "scripted-model"
[workloads.replay]
api = "completions"
trace = {{ file = "t.jsonl", format = "jsonl", start = "1s", duration = "3s", speedup = 20 }}
[load]
requests = 25
"#,
            server.base_url()
        ),
    )
    .unwrap();
    let spec = infer_bench::spec::load(&spec_path).unwrap_or_else(|e| panic!("{e}"));
    let t = spec.workloads["replay"].trace.clone().unwrap();
    // Trace time [1 s, 4 s): 30 requests, the last at 2.9 s / 20.
    assert_eq!(t.requests, 30);
    assert_eq!(t.span.as_nanos(), 145_000_000);
    let plan = Plan::build(&spec).unwrap();
    let opts = RunOptions {
        ..RunOptions::new(dir.path().join("out"))
    };
    let results = run_plan(&spec, &plan, &opts, &rt, Arc::new(Interrupt::default())).unwrap();
    rt.block_on(server.wait_idle());
    assert_eq!(server.records().len(), 25, "`requests` ends it first");
    assert_eq!(results.points[0].merged.requests.succeeded, 25);
    rt.block_on(server.shutdown());
}
