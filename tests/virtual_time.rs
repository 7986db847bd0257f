//! The simulator in virtual time, end to end through the command line:
//! statistics identical to the byte from run to run, the same numbers as
//! the simulator in real time, every load mode (closed and open loops, a
//! cap, ramps, conversations, mixes), deadlines and refusals in simulated
//! time, and thousands of streams without a socket.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn write(dir: &Path, spec: &str) -> PathBuf {
    let path = dir.join("spec.toml");
    std::fs::write(&path, spec).unwrap();
    path
}

fn infer_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs `spec` with `extra` arguments; the results and the process output.
fn run_with(spec: &str, extra: &[&str]) -> (Value, Output) {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), spec);
    let out = dir.path().join("out");
    let mut args = vec![
        "run",
        path.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--requests",
    ];
    args.extend_from_slice(extra);
    let o = infer_bench(&args);
    let results = std::fs::read_to_string(out.join("results.json"))
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    let mut results: Value = serde_json::from_str(&results).unwrap();
    let lines: Vec<Value> = std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    results["requests"] = Value::Array(lines);
    (results, o)
}

fn run(spec: &str) -> Value {
    let (r, o) = run_with(spec, &[]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    r
}

fn spec(load: &str, workload: &str) -> String {
    format!(
        r#"
name = "virtual"
seed = 11
[targets.sim]
kind = "sim"
gpu = "h100-sxm"
[targets.sim.sim]
clock = "virtual"
[models.m]
preset = "llama-3.1-8b"
[workloads.w]
api = "chat"
ignore_eos = true
{workload}
[load]
{load}
[validity]
percentile_sample_check = false
"#
    )
}

const TOKENS: &str = "input_tokens = \"uniform(64, 512)\"\noutput_tokens = \"uniform(16, 128)\"";

fn point(r: &Value) -> &Value {
    &r["points"][0]
}

/// The share of a real-time point's time its simulator spent behind its
/// own schedule, as it reports it (`infer_bench_sim_lag_seconds_total`
/// over the scrape span; 0 in virtual time): a busy machine's cost, which
/// real-time numbers carry and virtual-time ones cannot.
fn time_lost(p: &Value) -> f64 {
    let lag = &p["telemetry"]["server_metrics"]["counters"]["infer_bench_sim_lag_seconds_total"];
    match (lag["delta"].as_f64(), lag["span_s"].as_f64()) {
        (Some(lost), Some(span)) if span > 0.0 => lost / span,
        _ => 0.0,
    }
}

fn stat(p: &Value, path: &[&str]) -> f64 {
    let mut v = &p["merged"];
    for k in path {
        v = &v[*k];
    }
    v.as_f64()
        .unwrap_or_else(|| panic!("{path:?} in {}", p["merged"]))
}

#[test]
fn two_runs_of_one_spec_give_byte_identical_statistics() {
    for load in [
        "concurrency = 64\nwarmup = \"2s\"\nduration = \"10s\"\nruns = 2",
        "rate = \"40/s\"\narrival = \"poisson\"\nduration = \"10s\"",
    ] {
        let s = spec(load, TOKENS);
        let (a, b) = (run(&s), run(&s));
        let (pa, pb) = (point(&a), point(&b));
        assert_eq!(pa["clock"], "virtual");
        assert_eq!(pa["valid"], true, "{}", pa["invalid_reasons"]);
        assert!(stat(pa, &["requests", "succeeded"]) > 100.0, "{load}");
        for key in ["merged", "histograms", "steps"] {
            assert_eq!(
                serde_json::to_string(&pa[key]).unwrap(),
                serde_json::to_string(&pb[key]).unwrap(),
                "{load}: {key}"
            );
        }
        for (ra, rb) in pa["runs"]
            .as_array()
            .unwrap()
            .iter()
            .zip(pb["runs"].as_array().unwrap())
        {
            assert_eq!(ra["stats"], rb["stats"], "{load}");
        }
        // The simulated server's metrics, read at simulated instants: the
        // same on both runs, and the closed loop's 64 streams all running.
        let metrics = &pa["telemetry"]["server_metrics"];
        assert_eq!(metrics, &pb["telemetry"]["server_metrics"], "{load}");
        assert!(
            metrics["url"].as_str().unwrap().contains("virtual time"),
            "{metrics}"
        );
        if load.starts_with("concurrency") {
            let running = serde_json::to_string(metrics).unwrap();
            assert!(running.contains("num_requests_running"), "{running}");
        }
        // An ideal client: no dispatch lag, and no client load to report.
        assert_eq!(stat(pa, &["latency_ms", "dispatch_lag", "max"]), 0.0);
        assert!(pa.get("client").is_none());
        // Nor a pre-flight on the machine's load: nothing of it counts.
        assert!(pa.get("preflight").is_none());
    }
}

#[test]
fn the_same_numbers_as_the_simulator_in_real_time() {
    // The real-time simulator carries this machine's scheduling jitter.
    let _machine = infer_bench_testkit::timing::exclusive();
    // Lengths that vary: with fixed ones a closed loop's streams stay in
    // step, and then the virtual client's requests (due at one instant)
    // enter one engine step together where the real client's, microseconds
    // apart, split over two.
    let s = spec(
        "concurrency = 16\nwarmup = \"1s\"\nduration = \"4s\"",
        "input_tokens = \"uniform(128, 384)\"\noutput_tokens = \"uniform(32, 96)\"",
    );
    let simulated = run(&s);
    let real = run(&s.replace("clock = \"virtual\"", "clock = \"real\""));
    let (v, r) = (point(&simulated), point(&real));
    assert!(r.get("clock").is_none(), "a real-time point says nothing");
    // Within 5%, plus the share of its time the real-time simulator
    // says it fell behind its own schedule (6% with two busy loops on
    // two cores; nothing on a quiet machine).
    let lost = time_lost(r);
    for (path, tolerance) in [
        (&["output_tokens_per_s"][..], 0.05),
        (&["latency_ms", "tpot", "p50"], 0.05),
        (&["latency_ms", "e2e", "p50"], 0.05),
    ] {
        let (x, y) = (stat(v, path), stat(r, path));
        assert!(
            (x / y - 1.0).abs() < tolerance + lost,
            "{path:?}: virtual {x}, real {y} (tolerance {tolerance} + the simulator's time lost {lost:.3})"
        );
    }
    // TTFT is a few steps: the real client adds its own fraction of a
    // millisecond and the steps' alignment differs.
    let (x, y) = (
        stat(v, &["latency_ms", "ttft", "p50"]),
        stat(r, &["latency_ms", "ttft", "p50"]),
    );
    assert!(
        (x - y).abs() < 3.0 + 0.1 * y,
        "TTFT p50: virtual {x}, real {y}"
    );
}

/// A retrieval spec: an embedder and a reranker on one simulator, in
/// virtual time unless `clock` says otherwise.
fn retrieval_spec(clock: &str) -> String {
    format!(
        r#"
name = "virtual-retrieval"
seed = 5
[targets.sim]
kind = "sim"
gpu = "l40s"
[targets.sim.sim]
clock = "{clock}"
[models.m]
preset = "llama-3.1-8b"
[workloads.embed]
api = "embeddings"
input_tokens = "uniform(64, 256)"
batch = 8
[workloads.rerank]
api = "rerank"
input_tokens = 32
documents = 16
document_tokens = "uniform(128, 384)"
[matrix]
workload = ["embed", "rerank"]
[load]
concurrency = 8
warmup = "1s"
duration = "4s"
[validity]
percentile_sample_check = false
"#
    )
}

#[test]
fn embeddings_and_rerank_run_in_virtual_time_as_in_real_time() {
    let _machine = infer_bench_testkit::timing::exclusive();
    let s = retrieval_spec("virtual");
    let (a, b) = (run(&s), run(&s));
    let real = run(&retrieval_spec("real"));
    for i in 0..2 {
        let (pa, pb, pr) = (&a["points"][i], &b["points"][i], &real["points"][i]);
        let kind = if pa["id"].as_str().unwrap_or_default().contains(".embed.") {
            "embeddings"
        } else {
            "rerank"
        };
        assert_eq!(pa["clock"], "virtual", "{kind}");
        assert_eq!(pa["valid"], true, "{kind}: {}", pa["invalid_reasons"]);
        assert_eq!(stat(pa, &["requests", "failed"]), 0.0, "{kind}");
        // Exactly reproducible.
        for key in ["merged", "histograms"] {
            assert_eq!(
                serde_json::to_string(&pa[key]).unwrap(),
                serde_json::to_string(&pb[key]).unwrap(),
                "{kind}: {key}"
            );
        }
        // What each request counts beside itself, and the server's own
        // token count, read from the simulator's answer by the client's
        // reader: 8 inputs per embeddings request, 16 documents per rerank.
        let (per, unit) = match kind {
            "embeddings" => (8.0, "inputs_per_s"),
            _ => (16.0, "documents_per_s"),
        };
        let rate = stat(pa, &["request_throughput"]);
        assert!(
            (stat(pa, &[unit]) / (per * rate) - 1.0).abs() < 1e-6,
            "{kind}: {unit} {} at {rate} requests/s",
            stat(pa, &[unit])
        );
        let lines: Vec<&Value> = a["requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["point"] == pa["id"] && l["warmup"] == false)
            .collect();
        assert!(lines.len() >= 10, "{kind}: {} requests", lines.len());
        for l in &lines {
            let asked = l["input_tokens_requested"].as_f64().unwrap();
            let counted = l["input_tokens"].as_f64().unwrap();
            assert!(counted >= asked, "{kind}: {l}");
        }
        // The same latency as the simulator in real time, within 5% plus
        // the share of its time the real-time simulator fell behind.
        let lost = time_lost(pr);
        for path in [&["latency_ms", "e2e", "p50"][..], &["request_throughput"]] {
            let (v, r) = (stat(pa, path), stat(pr, path));
            assert!(
                (v / r - 1.0).abs() < 0.05 + lost,
                "{kind} {path:?}: virtual {v}, real {r} (time lost {lost:.3})"
            );
        }
    }
}

#[test]
fn images_are_counted_in_virtual_time() {
    // What a request sends beside its text reaches its line and the
    // point's figures in virtual time as in real time (they were zero).
    let r = run(&spec(
        "concurrency = 4\nrequests = 20",
        "input_tokens = 64\noutput_tokens = 16\nimages = { count = 2, width = 300, height = 200 }",
    ));
    let lines = r["requests"].as_array().unwrap();
    assert_eq!(lines.len(), 20);
    for l in lines {
        assert_eq!(l["images"], 2, "{l}");
        assert_eq!(l["image_pixels"], 120_000, "{l}");
        assert!(l["image_bytes"].as_u64().unwrap() > 10_000, "{l}");
        // The simulator counts ceil(300/28) x ceil(200/28) = 88 tokens an
        // image, on top of the text and the chat template.
        assert!(l["input_tokens"].as_u64().unwrap() >= 64 + 2 * 88, "{l}");
    }
    assert!(
        point(&r)["hints"]
            .to_string()
            .contains("each 300x200 image cost about"),
        "{}",
        point(&r)["hints"]
    );
}

#[test]
fn a_vision_language_preset_pays_for_its_encoder_in_ttft_only() {
    // The same requests (two 1024 x 1024 images each) to Qwen2.5-VL-7B and
    // to Qwen2.5-7B, the same language model without the encoder: the
    // encoder runs once per request, in its first step.
    let ttft_tpot = |preset: &str| {
        let r = run(&spec(
            "concurrency = 1\nrequests = 8",
            "input_tokens = 64\noutput_tokens = 32\nimages = { count = 2, width = 1024, height = 1024 }",
        )
        .replace("llama-3.1-8b", preset));
        let p = point(&r);
        (
            stat(p, &["latency_ms", "ttft", "p50"]),
            stat(p, &["latency_ms", "tpot", "p50"]),
        )
    };
    let (vl, text) = (ttft_tpot("qwen2.5-vl-7b"), ttft_tpot("qwen2.5-7b"));
    // 2 x 1369 tokens of 4 patches through 675M parameters: 14.8 TFLOPs,
    // about 20 ms at an H100's BF16 rate as the simulator achieves it.
    assert!(vl.0 > text.0 + 10.0, "TTFT {} vs {}", vl.0, text.0);
    assert!(
        (vl.1 / text.1 - 1.0).abs() < 0.01,
        "TPOT {} vs {}",
        vl.1,
        text.1
    );
}

#[test]
fn every_load_mode_runs_in_virtual_time() {
    // Open loop: every arrival of the schedule is sent, none late.
    let r = run(&spec("rate = \"20/s\"\nduration = \"30s\"", TOKENS));
    let p = point(&r);
    let sent = stat(p, &["requests", "sent"]);
    assert!((540.0..=660.0).contains(&sent), "20/s for 30 s sent {sent}");
    for line in r["requests"].as_array().unwrap() {
        assert_eq!(line["dispatch_lag_ms"], 0.0);
        assert_eq!(line["queue_ms"], 0.0);
    }

    // A cap below the offered load: requests queue for a slot, and the
    // wait counts in their latency.
    let r = run(&spec(
        "rate = \"200/s\"\nmax_concurrency = 8\nduration = \"5s\"",
        TOKENS,
    ));
    let p = point(&r);
    assert_eq!(stat(p, &["concurrency_max"]), 8.0);
    let queued = r["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["queue_ms"].as_f64().unwrap() > 100.0)
        .count();
    assert!(queued > 10, "{queued} requests waited for a slot");

    // A closed-loop ramp: one step per level, each holding its concurrency.
    let r = run(&spec(
        "ramp = { from = 4, to = 64, step = 20, every = \"5s\" }",
        TOKENS,
    ));
    let steps = point(&r)["steps"].as_array().unwrap().clone();
    assert_eq!(steps.len(), 4);
    let mut last = 0.0;
    for s in &steps {
        let c = s["stats"]["concurrency_mean"].as_f64().unwrap();
        assert!(c > last, "ramp steps: {steps:?}");
        last = c;
    }
    assert!((last / 64.0 - 1.0).abs() < 0.1, "the last step held {last}");

    // Conversations: later turns carry the history, so their prompts grow.
    let r = run(&spec(
        "concurrency = 8\nduration = \"20s\"",
        "input_tokens = 64\noutput_tokens = 32\nconversation = { turns = 3, think_time = \"1s\" }",
    ));
    let p = point(&r);
    let turns = p["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 3, "{turns:?}");
    let prompt = |turn: u64| {
        r["requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["turn"] == turn && l["error"].is_null())
            .map(|l| l["input_tokens"].as_f64().unwrap())
            .fold(0.0, f64::max)
    };
    assert!(prompt(2) > prompt(1) && prompt(1) > prompt(0) + 32.0);
    // Each later turn goes out one think time after the previous reply.
    let first = r["requests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["turn"] == 1)
        .unwrap();
    assert!(first["sched_ms"].as_f64().unwrap() > 1000.0);
}

#[test]
fn deadlines_and_refusals_happen_in_virtual_time() {
    // Outputs far longer than the total timeout: every request times out,
    // at exactly its deadline (and a point where nothing succeeded exits 3).
    let (r, o) = run_with(
        &spec(
            "concurrency = 4\nrequests = 8\ntimeouts = { total = \"200ms\" }",
            "input_tokens = 64\noutput_tokens = 4000",
        ),
        &[],
    );
    assert_eq!(o.status.code(), Some(3));
    let p = point(&r);
    assert_eq!(p["merged"]["errors"]["timeout_total"], 8, "{}", p["merged"]);
    for line in r["requests"].as_array().unwrap() {
        assert_eq!(line["error"], "timeout_total");
        let done = line["done_ms"].as_f64().unwrap();
        assert!((done - 200.0).abs() < 1e-6, "{line}");
    }

    // A prompt beyond the model's context is refused as vLLM refuses it,
    // and a run in which every request is refused stops instead of
    // spinning at one instant.
    let (r, o) = run_with(
        &spec(
            "concurrency = 4\nduration = \"10s\"",
            "input_tokens = 5000\noutput_tokens = 16",
        )
        .replace(
            "clock = \"virtual\"",
            "clock = \"virtual\"\nkv_cache_tokens = 4096",
        ),
        &[],
    );
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let p = point(&r);
    assert!(p["merged"]["errors"]["status_4xx"].as_u64().unwrap() > 0);
    assert!(
        p["failure"]
            .as_str()
            .unwrap()
            .contains("refused all of its first"),
        "{}",
        p["failure"]
    );
}

#[test]
fn run_virtual_puts_every_simulator_target_on_the_virtual_clock() {
    let s = spec("concurrency = 8\nrequests = 40", TOKENS).replace("clock = \"virtual\"", "");
    let (r, o) = run_with(&s, &["--virtual"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(point(&r)["clock"], "virtual");
    assert_eq!(point(&r)["config"]["target"]["sim"]["clock"], "virtual");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("simulated in virtual time"), "{stderr}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("simulated in virtual time"), "{stdout}");

    // A spec without a simulator target has nothing to simulate.
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "name = \"x\"\n[targets.api]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n[models.m]\n[workloads.w]\ninput_tokens = 8\noutput_tokens = 8\n[load]\nconcurrency = 1\nrequests = 1\n",
    );
    let o = infer_bench(&["run", path.to_str().unwrap(), "--virtual"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("--virtual sets the clock of simulator targets"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // Tensors (the README's vision spec) are not simulated in virtual
    // time: the flag is refused before anything runs, as `clock =
    // "virtual"` is by validate. It used to fail every point at run time
    // with "model `resnet` has no architecture for the simulator".
    let dir = tempfile::tempdir().unwrap();
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/specs/vision-triton.toml");
    let out = dir.path().join("out");
    let o = infer_bench(&[
        "run",
        spec,
        "--only",
        "sim.*",
        "--virtual",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("sends workload \"classify.b1\" (kserve)")
            && stderr.contains("not tensors"),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing ran");
}

#[test]
fn thousands_of_streams_without_a_socket() {
    // 2,048 streams against 256 sequences: the queue is what is measured.
    let r = run(&spec(
        "concurrency = 2048\nwarmup = \"20s\"\nduration = \"60s\"\ntimeouts = { first_token = \"10m\", idle = \"10m\", total = \"1h\" }",
        TOKENS,
    ));
    let p = point(&r);
    assert_eq!(stat(p, &["concurrency_max"]), 2048.0);
    assert_eq!(stat(p, &["requests", "failed"]), 0.0);
    // Little's law holds in the simulation: in flight = throughput x latency.
    let throughput = stat(p, &["request_throughput"]);
    let e2e_mean = stat(p, &["latency_ms", "e2e", "mean"]) / 1e3;
    let little = throughput * e2e_mean;
    assert!(
        (little / 2048.0 - 1.0).abs() < 0.1,
        "{throughput} req/s x {e2e_mean} s = {little}"
    );
}

#[test]
fn the_kv_cache_and_admission_are_recorded_and_decide_preemption() {
    // A KV cache of 8,192 tokens, 32 streams of up to 600 tokens each:
    // reserving only the prompt admits more and preempts; reserving the
    // whole sequence admits fewer and never preempts.
    let base = spec(
        "concurrency = 32\nduration = \"20s\"",
        "input_tokens = 200\noutput_tokens = 400",
    )
    .replace(
        "clock = \"virtual\"",
        "clock = \"virtual\"\nkv_cache_tokens = 8192",
    );
    let preemptions = |r: &Value| {
        point(r)["telemetry"]["server_metrics"]["headline"]["preemptions"]
            .as_f64()
            .unwrap()
    };
    let prompt = run(&base);
    let server = &point(&prompt)["server"];
    assert_eq!(server["kv_dtype"], "bf16");
    assert_eq!(server["kv_cache_tokens"], 8192);
    assert_eq!(server["admission"], "reserve-prompt");
    assert!(preemptions(&prompt) > 0.0);

    let full = run(&base.replace(
        "kv_cache_tokens = 8192",
        "kv_cache_tokens = 8192\nadmission = \"reserve-full\"",
    ));
    assert_eq!(point(&full)["server"]["admission"], "reserve-full");
    assert_eq!(preemptions(&full), 0.0);
    let running = |r: &Value| {
        point(r)["telemetry"]["server_metrics"]["headline"]["running"]["max"]
            .as_f64()
            .unwrap()
    };
    // 8,192 tokens hold 13 whole sequences of 600 (38 blocks each).
    assert_eq!(running(&full), 13.0);
    assert!(running(&prompt) > 13.0);
}

/// A simulator spec on H100s with `sim` extra settings and `gpus`.
fn deployment(model: &str, gpus: u32, sim: &str, load: &str) -> String {
    format!(
        r#"
name = "deployment"
seed = 3
[targets.t]
kind = "sim"
gpu = "h100-sxm"
gpus = {gpus}
gpu_hour_usd = 2.0
sim = {{ clock = "virtual", max_num_seqs = 64{sim} }}
[models.m]
preset = "{model}"
[workloads.w]
api = "completions"
ignore_eos = true
{TOKENS}
[load]
{load}
[validity]
percentile_sample_check = false
"#
    )
}

#[test]
fn replicas_multiply_what_a_saturated_server_serves_and_what_it_costs() {
    let load = "concurrency = 256\nwarmup = \"5s\"\nduration = \"30s\"";
    let one = run(&deployment("llama-3.1-8b", 1, "", load));
    let two = run(&deployment("llama-3.1-8b", 1, ", replicas = 2", load));
    let (a, b) = (point(&one), point(&two));
    let ratio = stat(b, &["output_tokens_per_s"]) / stat(a, &["output_tokens_per_s"]);
    assert!((1.95..2.05).contains(&ratio), "{ratio}");
    // Each replica runs its own 64 sequences and has its own KV cache.
    assert_eq!(
        b["server"]["kv_cache_tokens"].as_u64().unwrap(),
        2 * a["server"]["kv_cache_tokens"].as_u64().unwrap()
    );
    let running = &b["telemetry"]["server_metrics"]["gauges"]["vllm:num_requests_running"];
    assert_eq!(running["stats"]["max"], 128.0, "{running}");
    // Twice the GPUs at twice the throughput: the same cost per token.
    assert_eq!(b["cost"]["gpus"], 2);
    let (ca, cb) = (
        a["cost"]["usd_per_1m_output_tokens"].as_f64().unwrap(),
        b["cost"]["usd_per_1m_output_tokens"].as_f64().unwrap(),
    );
    assert!((cb / ca - 1.0).abs() < 0.03, "{ca} then {cb}");
    assert!(b["server"]["model"].as_str().unwrap().contains("2x"));
}

#[test]
fn a_pipeline_fits_what_one_gpu_cannot_and_runs_a_micro_batch_per_stage() {
    let c1 = "concurrency = 1\nwarmup_requests = 1\nrequests = 4";
    // Llama 3.1 70B in BF16 (131.5 GiB) on one H100 does not fit ...
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &deployment("llama-3.1-70b", 1, "", c1));
    let out = dir.path().join("out");
    let r = infer_bench(&[
        "run",
        path.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    // ... which `run` says before it starts, as `validate` does (exit 2).
    assert_eq!(r.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("does not fit"),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    // ... over two pipeline stages it does.
    let pp = run(&deployment("llama-3.1-70b", 1, ", pipeline = 2", c1));
    let tp = run(&deployment("llama-3.1-70b", 2, "", c1));
    // One sequence goes through both stages in turn, each reading half the
    // weights at one GPU's bandwidth: about twice tensor parallelism's
    // time per token, which reads both halves at once.
    let ratio = stat(point(&pp), &["latency_ms", "tpot", "p50"])
        / stat(point(&tp), &["latency_ms", "tpot", "p50"]);
    assert!((1.6..2.2).contains(&ratio), "{ratio}");
    // Two micro-batches in flight: twice the sequences of one engine.
    let busy = run(&deployment(
        "llama-3.1-70b",
        1,
        ", pipeline = 2, max_num_seqs = 8",
        "concurrency = 32\nwarmup = \"5s\"\nduration = \"20s\"",
    )
    .replace("max_num_seqs = 64, ", ""));
    let running =
        &point(&busy)["telemetry"]["server_metrics"]["gauges"]["vllm:num_requests_running"];
    assert_eq!(running["stats"]["max"], 16.0, "{running}");
    assert_eq!(point(&busy)["cost"]["gpus"], 2);
}

#[test]
fn replicas_in_real_time_give_virtual_times_numbers() {
    let _machine = infer_bench_testkit::timing::exclusive();
    // Two replicas of 8 sequences each, both saturated: the real-time
    // server keeps a step schedule per replica.
    let s = deployment(
        "llama-3.1-8b",
        1,
        ", replicas = 2, max_num_seqs = 8",
        "concurrency = 32\nwarmup = \"1s\"\nduration = \"4s\"",
    )
    .replace("max_num_seqs = 64, ", "")
    .replace(
        "input_tokens = \"uniform(64, 512)\"",
        "input_tokens = \"uniform(128, 384)\"",
    );
    let simulated = run(&s);
    let real = run(&s.replace("clock = \"virtual\"", "clock = \"real\""));
    // Within 5%, plus the share of its time the real-time simulator says
    // it fell behind (a busy machine's, not the model's).
    let lost = time_lost(point(&real));
    for path in [
        &["output_tokens_per_s"][..],
        &["latency_ms", "tpot", "p50"],
        &["latency_ms", "e2e", "p50"],
    ] {
        let (x, y) = (stat(point(&simulated), path), stat(point(&real), path));
        assert!(
            (x / y - 1.0).abs() < 0.05 + lost,
            "{path:?}: virtual {x}, real {y} (tolerance 0.05 + the simulator's time lost {lost:.3})"
        );
    }
}
