//! Throughput is the server's, counted where tokens happen: a closed loop
//! whose requests are long against the window reports the tokens the
//! server generated inside the window (its own counter, scraped), not the
//! tokens of the requests that happened to complete in it.

use std::process::Command;

use serde_json::Value;

const SPEC: &str = r#"
name = "long-requests"
seed = 5
[targets.sim]
kind = "sim"
gpu = "h100-sxm"
[models.m]
preset = "llama-3.1-8b"
[workloads.w]
api = "completions"
input_tokens = 64
output_tokens = 128
ignore_eos = true
[load]
concurrency = 1024
warmup = "5s"
duration = "5s"
timeouts = { first_token = "2m", idle = "1m", total = "5m" }
[telemetry]
gpu = "off"
scrape_interval = "50ms"
[validity]
percentile_sample_check = false
min_duration = "1s"
"#;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn output_throughput_equals_what_the_server_generated_in_the_window() {
    let _machine = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let out = dir.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .args(["run", "-q"])
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        o.status.code().is_some_and(|c| c == 0 || c == 1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let point = &r["points"][0];
    let merged = &point["merged"];
    // The window is the duration, though requests of 128 tokens in a batch
    // of 1,024 take seconds and many run past its end.
    assert_eq!(f(&merged["window_s"]), 5.0, "{merged}");
    let client = f(&merged["output_tokens_per_s"]);
    // The server's counter is read between the scrapes that bracket the
    // window (`span_s`, up to a scrape interval wider at each edge: two
    // decode steps of 1,024 tokens, 2% of the count), so the rates over
    // each one's own span are what must agree.
    let metrics = &point["telemetry"]["server_metrics"];
    let server = f(&metrics["headline"]["generation_tokens"]);
    let span = f(&metrics["counters"]["vllm:generation_tokens_total"]["span_s"]);
    assert!(server > 10_000.0, "the server generated {server} tokens");
    assert!(
        (5.0..5.2).contains(&span),
        "scrapes 50 ms apart bracket the window: {span}"
    );
    let server_rate = server / span;
    assert!(
        (client / server_rate - 1.0).abs() < 0.02,
        "client counted {client:.0} output tok/s in the window, the server generated {server_rate:.0} tok/s ({server:.0} tokens over {span:.3} s)"
    );
}
