//! Reading a run like an expert, on scenarios whose answer is known: a mix
//! that saturates the simulator's KV cache, a rate ramp past the server's
//! measured capacity, GPUs throttled and unbalanced (a scripted sampler),
//! a client made slow on purpose, and memory growth over a concurrency
//! sweep against the performance model's KV capacity. Each expected
//! finding must appear in the results, the terminal summary and the HTML
//! report.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use infer_bench::results::Results;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_infer-bench"))
}

/// Runs a spec through the binary; returns (exit code, stdout, results).
fn run(
    dir: &Path,
    name: &str,
    text: &str,
    extra: &[&str],
) -> (Option<i32>, String, Results, PathBuf) {
    let spec = dir.join(format!("{name}.toml"));
    std::fs::write(&spec, text).unwrap();
    let out = dir.join(name);
    let o = bin()
        .arg("run")
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let (r, _) = Results::read(&out)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    (o.status.code(), stdout, r, out)
}

fn html(out: &Path) -> String {
    let page = out.join("report.html");
    let o = bin()
        .arg("report")
        .arg(out)
        .arg("-o")
        .arg(&page)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read_to_string(page).unwrap()
}

#[test]
fn a_mix_that_saturates_the_kv_cache_shows_each_workload_and_the_preemptions() {
    let _one = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    // An L40S with 42% of its memory for the server: weights take 16 GB,
    // the KV cache is left about 4 GB (~30k tokens) for 64 sequences of
    // up to 2,300 tokens.
    let (code, stdout, r, out) = run(
        dir.path(),
        "mix",
        r#"name = "mix-kv"
seed = 4
[targets.sim]
kind = "sim"
gpu = "l40s"
[targets.sim.sim]
memory_fraction = 0.42
[models.m]
preset = "llama-3.1-8b"
[workloads.chat]
input_tokens = "uniform(100, 300)"
output_tokens = 64
ignore_eos = true
[workloads.rag]
input_tokens = 2000
output_tokens = 256
ignore_eos = true
[workloads.mixed]
mix = { chat = 0.7, rag = 0.3 }
[load]
concurrency = 64
warmup = "1s"
duration = "4s"
[matrix]
workload = ["mixed"]
[validity]
percentile_sample_check = false
"#,
        &[],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let p = &r.points[0];
    assert_eq!(p.mix.len(), 2);
    let (chat, rag) = (&p.mix[0], &p.mix[1]);
    assert_eq!(
        (chat.workload.as_str(), rag.workload.as_str()),
        ("chat", "rag")
    );
    assert!((chat.weight - 0.7).abs() < 1e-9);
    assert!(
        (chat.share - 0.7).abs() < 0.2,
        "chat's share of requests {}",
        chat.share
    );
    let sent: u64 = p.mix.iter().map(|m| m.stats.requests.sent).sum();
    assert_eq!(
        sent, p.merged.requests.sent,
        "the parts add up to the point"
    );
    assert!(rag.stats.tokens.input.p50 >= 2000.0 && chat.stats.tokens.input.p50 < 400.0);
    // The KV cache filled and the server preempted: the hint says so.
    let sm = p
        .telemetry
        .as_ref()
        .unwrap()
        .server_metrics
        .as_ref()
        .unwrap();
    assert!(sm.headline.kv_cache_usage_ratio.unwrap().max > 0.95);
    let hint = p
        .hints
        .iter()
        .find(|h| h.kind == "preemptions")
        .unwrap_or_else(|| panic!("{:#?}", p.hints));
    assert!(hint.evidence["preemptions"] > 0.0);
    // Memory by phase: the KV cache peaks in both kinds of interval.
    let m = p.memory.as_ref().unwrap();
    assert!(m.prefill_heavy_s > 0.0 && m.decode_heavy_s > 0.0, "{m:?}");
    assert!(m.kv_cache.as_ref().unwrap().decode_peak.unwrap() > 0.5);
    for want in [
        "workloads of each mix",
        "rag",
        "memory by phase",
        "hint: the server preempted",
    ] {
        assert!(stdout.contains(want), "{want}: {stdout}");
    }
    let page = html(&out);
    for want in [
        "Workloads of each mix",
        "Memory by phase",
        "the KV cache is too small",
        // One configuration: its key metrics as a table, not a radar.
        "id=\"key-metrics\"",
    ] {
        assert!(page.contains(want), "{want} missing from the report");
    }
    assert!(!page.contains("class=\"chart radar\""));
}

#[test]
fn a_rate_ramp_names_the_step_past_the_measured_capacity() {
    let _one = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let head = r#"seed = 5
[targets.sim]
kind = "sim"
gpu = "l40s"
[models.m]
preset = "llama-3.1-8b"
[workloads.w]
api = "completions"
input_tokens = 1024
output_tokens = 32
ignore_eos = true
[validity]
percentile_sample_check = false
"#;
    // The server's capacity: a saturated closed loop.
    let (_, _, cap, _) = run(
        dir.path(),
        "capacity",
        &format!(
            "name = \"capacity\"\n{head}[load]\nconcurrency = 32\nwarmup_requests = 32\nrequests = 96\n"
        ),
        &[],
    );
    let capacity = cap.points[0].merged.request_throughput;
    // The climb: a staircase of rates, doubling every 3 s.
    let (_, stdout, r, out) = run(
        dir.path(),
        "climb",
        &format!(
            "name = \"climb\"\n{head}[load]\narrival = \"constant\"\nramp = {{ from = \"4/s\", factor = 2, every = \"3s\", to = \"32/s\" }}\n"
        ),
        &[],
    );
    let p = &r.points[0];
    let rates: Vec<f64> = p
        .steps
        .iter()
        .map(|s| {
            s.level
                .trim_start_matches("rate=")
                .trim_end_matches("/s")
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(rates, [4.0, 8.0, 16.0, 32.0]);
    let first_over = rates
        .iter()
        .position(|r| *r > capacity)
        .expect("the ramp passes capacity") as f64
        + 1.0;
    let jump = p
        .hints
        .iter()
        .find(|h| h.kind == "ramp_jump" && h.message.starts_with("TTFT"))
        .unwrap_or_else(|| panic!("capacity {capacity:.1}/s; {:#?}", p.hints));
    assert_eq!(
        jump.evidence["step"], first_over,
        "TTFT jumps at the first step past the measured capacity of {capacity:.1} req/s: {}",
        jump.message
    );
    assert!(
        stdout.contains("hint: TTFT p50 rises sharply at ramp step"),
        "{stdout}"
    );
    assert!(html(&out).contains("rises sharply at ramp step"));
    eprintln!("capacity {capacity:.2} req/s; {}", jump.message);
}

/// A scripted server for the GPU scenarios (their target is not simulated).
fn scripted() -> (
    tokio::runtime::Runtime,
    infer_bench_testkit::scripted::ScriptedServer,
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let script = infer_bench_testkit::scripted::Script {
        ttft: Duration::from_millis(10),
        itl: Duration::from_millis(2),
        ..Default::default()
    };
    let s = rt
        .block_on(infer_bench_testkit::scripted::ScriptedServer::start(script))
        .unwrap();
    (rt, s)
}

fn openai_spec(url: &str, extra: &str) -> String {
    format!(
        "name = \"gpus\"\nseed = 1\n[targets.t]\nkind = \"openai\"\nbase_url = \"{url}\"\n[models.m]\nserved_name = \"scripted-model\"\n[workloads.w]\napi = \"completions\"\ninput_tokens = 16\noutput_tokens = 8\nignore_eos = true\n[load]\nconcurrency = 2\nwarmup = \"200ms\"\nduration = \"1200ms\"\n[telemetry]\ninterval = \"50ms\"\n[validity]\nmin_requests = 1\nmin_duration = \"100ms\"\npercentile_sample_check = false\n{extra}"
    )
}

#[test]
fn throttled_and_unbalanced_gpus_are_found_before_and_during_the_point() {
    use infer_bench::telemetry::gpu::{
        DeviceLinks, GpuReading, ProcessReading, Script, ScriptedSource, Topology,
    };
    let _one = infer_bench_testkit::timing::exclusive();
    let (_rt, server) = scripted();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gpus.toml");
    std::fs::write(&path, openai_spec(&server.base_url(), "")).unwrap();
    let hot = GpuReading {
        utilization_pct: Some(96.0),
        memory_bandwidth_utilization_pct: Some(70.0),
        memory_used_bytes: Some(60_000_000_000),
        power_w: Some(690.0),
        sm_clock_mhz: Some(1350),
        sm_clock_max_mhz: Some(1980),
        sm_app_clock_mhz: Some(1400),
        temperature_c: Some(88),
        // sw_power_cap and hw_thermal_slowdown.
        throttle_reasons: Some(0x4 | 0x40),
        processes: vec![
            ProcessReading {
                pid: 4242,
                name: Some("vllm".into()),
                memory_used_bytes: Some(58_000_000_000),
            },
            ProcessReading {
                pid: 4343,
                name: Some("python".into()),
                memory_used_bytes: Some(2_000_000_000),
            },
        ],
        ..Default::default()
    };
    let cool = GpuReading {
        utilization_pct: Some(41.0),
        memory_used_bytes: Some(58_000_000_000),
        temperature_c: Some(55),
        throttle_reasons: Some(0x1),
        sm_clock_max_mhz: Some(1980),
        sm_app_clock_mhz: Some(1980),
        ..Default::default()
    };
    let mut gpus = ScriptedSource::gpus(
        2,
        Script::ByTime(Arc::new(move |_| vec![hot.clone(), cool.clone()])),
    );
    gpus.topology = Some(Topology {
        devices: (0..2)
            .map(|i| DeviceLinks {
                index: i,
                pcie_gen: Some(5),
                pcie_width: Some(16),
                pcie_gen_max: Some(5),
                pcie_width_max: Some(16),
                nvlink_active: Some(18),
                nvlink_total: Some(18),
            })
            .collect(),
        pairs: vec![(0, 1, "pcie switch".into())],
    });
    let spec = infer_bench::spec::load(&path).unwrap();
    let plan = infer_bench::plan::Plan::build(&spec).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let opts = infer_bench::run::RunOptions {
        ..infer_bench::run::RunOptions::new(dir.path().join("out"))
    };
    let host = infer_bench::run::ScriptedHost::new(8, 0.05, 0.1);
    let r = infer_bench::run::run_plan_on(
        &spec,
        &plan,
        &opts,
        &rt,
        Arc::new(Default::default()),
        &gpus,
        &host,
    )
    .unwrap();
    let p = &r.points[0];
    let checks: Vec<&str> = p.preflight.iter().map(|f| f.check.as_str()).collect();
    for want in ["other_processes", "temperature", "throttling", "clocks"] {
        assert!(checks.contains(&want), "{want}: {:#?}", p.preflight);
    }
    assert!(!checks.contains(&"client_cpu"), "the scripted host is idle");
    assert!(
        p.preflight.iter().all(|f| f.gpu == Some(0)),
        "GPU 1 is fine: {:#?}",
        p.preflight
    );
    let throttled = p.hints.iter().find(|h| h.kind == "throttling").unwrap();
    assert!(
        throttled.message.contains("hw_thermal_slowdown")
            && throttled.message.contains("1350 of 1980 MHz"),
        "{}",
        throttled.message
    );
    let uneven = p.hints.iter().find(|h| h.kind == "gpu_imbalance").unwrap();
    assert!(
        uneven.message.contains("GPU 0 96%") && uneven.message.contains("GPU 1 41%"),
        "{}",
        uneven.message
    );
    // The topology is in the fingerprint.
    assert_eq!(r.environment.facts["gpu_topology"], "0-1 pcie switch");
    assert_eq!(r.environment.facts["gpu0.nvlink"], "18 of 18 links active");
    // --strict turns pre-flight findings into an infrastructure failure.
    assert_eq!(infer_bench::app::run_exit_code(&r, true), 3);
    assert_eq!(infer_bench::app::run_exit_code(&r, false), 0);
    let text = infer_bench::export::summary::table(&r);
    assert!(text.contains("pre-flight: GPU 0 is at 88 °C"), "{text}");
    // A busy client machine is a finding of its own.
    let busy = infer_bench::run::ScriptedHost::new(8, 0.9, 0.1);
    let findings = infer_bench::run::preflight(
        &plan.points[0].config,
        Default::default(),
        &gpus,
        &busy,
        None,
    );
    assert!(
        findings
            .iter()
            .any(|f| f.check == "client_cpu" && f.message.contains("90% busy")),
        "{findings:#?}"
    );
    // The report's per-GPU breakdown.
    let dir_out = dir.path().join("out");
    let page = html(&dir_out);
    assert!(page.contains("Per GPU") && page.contains("unevenly busy"));
}

/// A dispatch-lag budget a shared 2-core machine keeps without help (a
/// single scheduler hiccup can take a millisecond or two there).
const SLACK: &str = "max_dispatch_lag_p99 = \"4ms\"\n";

#[test]
fn a_client_made_slow_on_purpose_is_named_as_the_limit() {
    let _one = infer_bench_testkit::timing::exclusive();
    let (_rt, server) = scripted();
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout, r, _) = run(
        dir.path(),
        "slow",
        &openai_spec(&server.base_url(), SLACK),
        &["--slow-client", "8ms"],
    );
    let p = &r.points[0];
    let h = p
        .hints
        .iter()
        .find(|h| h.kind == "client_bound")
        .unwrap_or_else(|| panic!("{:#?}", p.hints));
    assert!(h.evidence["dispatch_lag_p99_ms"] >= 8.0, "{h:?}");
    assert!(
        !p.valid
            && p.invalid_reasons
                .iter()
                .any(|r| r.kind == infer_bench_results::ReasonKind::DispatchLag)
    );
    assert!(
        stdout.contains("hint: the client, not the server, may be limiting"),
        "{stdout}"
    );
    assert_eq!(code, Some(0), "INVALID is not a failure without --strict");
    // The same spec without the slowness: no such hint.
    let (_, _, r, _) = run(
        dir.path(),
        "fast",
        &openai_spec(&server.base_url(), ""),
        &[],
    );
    assert!(
        r.points[0].hints.iter().all(|h| h.kind != "client_bound"),
        "{:#?}",
        r.points[0].hints
    );
}

#[test]
fn memory_growth_over_a_sweep_projects_where_the_kv_cache_fills() {
    let _one = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let text = r#"name = "growth"
seed = 2
[targets.sim]
kind = "sim"
gpu = "l40s"
[models.m]
preset = "llama-3.1-8b"
[workloads.w]
api = "completions"
input_tokens = 1024
output_tokens = 64
ignore_eos = true
[load]
warmup_requests = 16
requests = 48
[matrix]
concurrency = [8, 16, 32]
[validity]
percentile_sample_check = false
"#;
    let (_, _, r, out) = run(dir.path(), "growth", text, &[]);
    let sources = infer_bench::analysis::label_sources(vec![(out.join("results.json"), r.clone())]);
    let a = infer_bench::analysis::Analysis::of(&sources);
    let g = a.sweeps[0]
        .memory
        .iter()
        .find(|m| m.what == "kv_cache")
        .expect("the simulator's KV-cache usage");
    // The model's answer: its KV capacity over the most tokens a sequence
    // holds (1024 + 64), since the peak is what fills the cache.
    let spec = infer_bench::spec::load(&dir.path().join("growth.toml")).unwrap();
    let plan = infer_bench::plan::Plan::build(&spec).unwrap();
    let cfg = &plan.points[0].config;
    let arch = cfg.model.architecture.as_ref().unwrap();
    let engine = infer_bench::sim::profile::resolve(
        cfg.target.sim.as_ref().unwrap(),
        arch,
        infer_bench::spec::DType::Bf16,
        None,
    )
    .unwrap();
    let perf =
        infer_bench::sim::perf::PerfModel::new(&engine, arch, infer_bench::spec::DType::Bf16)
            .unwrap();
    let expected = perf.kv_capacity_tokens() as f64 / 1088.0;
    let got = g.runs_out_at.unwrap();
    assert!(
        (got / expected - 1.0).abs() < 0.15,
        "the KV cache fills at about {got:.0} concurrent requests by the fit; the model says {expected:.0}"
    );
    assert!(g.r2 > 0.9, "{g:?}");
    assert!(html(&out).contains("Memory growth over concurrency"));
    eprintln!(
        "KV cache full at {got:.0} concurrent requests (model: {expected:.0}); {:.3}% per request",
        g.per_request * 100.0
    );
}
