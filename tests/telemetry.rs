//! End to end telemetry: the real binary against the built-in simulator
//! (whose `/metrics` speaks vLLM's names, and dcgm-exporter's for its
//! modelled GPU), against an OpenAI target served
//! by an in-process simulator (this machine's GPUs through NVML, or their
//! absence), with failing scrapes, with `telemetry.gpu = "required"`; and
//! the library's run loop with scripted GPUs, checking energy, cost and
//! the alignment of samples with the measurement windows.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Instant;

use infer_bench::plan::Plan;
use infer_bench::sim::server::SimServer;
use infer_bench::telemetry::gpu::{GpuReading, Script, ScriptedSource};
use serde_json::Value;

const MODEL_AND_LOAD: &str = r#"
[models.m]
preset = "llama-3.1-8b"
served_name = "m"

[workloads.w]
api = "completions"
input_tokens = 64
output_tokens = 32
ignore_eos = true

[load]
concurrency = 8
duration = "1500ms"
"#;

fn write_spec(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, format!("name = \"{name}\"\nseed = 7\n{body}")).unwrap();
    path
}

fn run(spec: &Path, out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .arg("run")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .output()
        .expect("the binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn results(out: &Path) -> Value {
    let text = std::fs::read_to_string(out.join("results.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    // Every results file matches the committed shape of the format.
    let schema: Value = serde_json::from_str(&infer_bench::results::schema_text()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "results do not match their schema: {errors:?}"
    );
    v
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A simulator started in-process, to stand in for an external server.
fn external_sim(dir: &Path) -> SimServer {
    let spec = write_spec(
        dir,
        "backing",
        &format!("[targets.sim]\nkind = \"sim\"\ngpu = \"h100-sxm\"\n{MODEL_AND_LOAD}"),
    );
    let spec = infer_bench::spec::load(&spec).unwrap();
    let plan = Plan::build(&spec).unwrap();
    SimServer::start(&plan.points[0].config).unwrap()
}

fn openai_target(sim: &SimServer, metrics_url: &str, extra: &str) -> String {
    format!(
        "[targets.ext]\nkind = \"openai\"\nbase_url = \"{}\"\nmetrics_url = \"{metrics_url}\"\n{extra}\n{MODEL_AND_LOAD}",
        sim.base_url()
    )
}

/// The server's counters agree with what the client counted inside the
/// window: output tokens by their arrival, prompt tokens by their
/// request's first output (metrics version 2), against the counters'
/// increase over the same window.
fn check_vllm_metrics(point: &Value, concurrency: f64) {
    let m = &point["telemetry"]["server_metrics"];
    assert_eq!(m["family"], "vllm", "{m}");
    assert_eq!(m["scrapes_failed"], 0, "{m}");
    assert!(m["scrapes_ok"].as_u64().unwrap() >= 5, "{m}");
    let running: Vec<f64> = m["gauges"]["vllm:num_requests_running"]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap_or(0.0))
        .collect();
    // The scrapes see the closed loop's requests running, never more
    // than its concurrency. (Not exactly all of them at some scrape: on a
    // loaded machine, with the tests of this file side by side, a scrape
    // can keep falling between a slot's requests.)
    let max = running.iter().cloned().fold(0.0, f64::max);
    assert!(
        max <= concurrency && max >= concurrency / 2.0,
        "running requests by scrape: {running:?}"
    );
    // The counters' increase covers the scrapes around the window (`span_s`,
    // at least the window): it holds the client's in-window count, and
    // exceeds it by no more than the server makes in the extra span at its
    // mean rate (with room for the rate to vary) and `burst`, as the window
    // ends while requests still run.
    let merged = &point["merged"];
    let window_s = f(&merged["window_s"]);
    let agrees = |counter: &str, rate: &str, burst: f64| {
        let client = f(&merged[rate]) * window_s;
        let c = &m["counters"][counter];
        let (server, span_s) = (f(&c["delta"]), f(&c["span_s"]));
        assert!(client > 0.0 && span_s >= window_s - 1e-6, "{c}");
        let extra = server / span_s * (span_s - window_s);
        assert!(
            server >= client * 0.99 - 1.0
                && server - client <= 1.5 * extra + burst + client * 0.01 + 1.0,
            "{counter}: the server counted {server} over {span_s:.3} s, the client {client} in its {window_s:.3} s window"
        );
        server
    };
    let generated = agrees("vllm:generation_tokens_total", "output_tokens_per_s", 0.0);
    // A prompt is counted whole: by the server when prefill is scheduled,
    // by the client at the first output, so one prompt per slot may fall
    // on either side of the window's end.
    agrees(
        "vllm:prompt_tokens_total",
        "input_tokens_per_s",
        concurrency * 64.0,
    );
    assert_eq!(f(&m["headline"]["generation_tokens"]), generated);
    // Scrape times are on the point's clock, in order, and some fall
    // inside the window the statistics cover.
    let t: Vec<f64> = m["t_s"].as_array().unwrap().iter().map(f).collect();
    assert!(t.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
    let run = &point["telemetry"]["runs"][0];
    let (ws, we) = (f(&run["window_start_s"]), f(&run["window_end_s"]));
    assert!((we - ws - f(&point["merged"]["window_s"])).abs() < 1e-6);
    assert!(
        t[0] <= ws && *t.last().unwrap() >= we,
        "scrapes bracket the window"
    );
    let inside = t.iter().filter(|x| **x >= ws && **x <= we).count() as u64;
    assert_eq!(
        m["gauges"]["vllm:num_requests_running"]["stats"]["count"],
        inside
    );
}

#[test]
fn sim_point_records_the_simulators_metrics_and_its_modelled_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(
        dir.path(),
        "sim",
        &format!(
            "[targets.sim]\nkind = \"sim\"\ngpu = \"h100-sxm\"\n{MODEL_AND_LOAD}\n\
             [cost]\ngpu_hour_usd = 2.5\nkwh_usd = 0.12\n\
             [telemetry]\ninterval = \"100ms\"\nscrape_interval = \"100ms\"\n"
        ),
    );
    let out = dir.path().join("out");
    let o = run(&spec, &out);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{}", text(&o.stderr));
    let r = results(&out);
    let p = &r["points"][0];
    // Its GPU is the simulator's model, read off its /metrics and said
    // to be modelled (tests/dcgm.rs checks the figures).
    let gpu = &p["telemetry"]["gpu"];
    assert_eq!(gpu["status"], "sampled", "{gpu}");
    assert_eq!(gpu["source"], "sim", "{gpu}");
    assert!(gpu["note"].as_str().unwrap().contains("modelled"), "{gpu}");
    assert_eq!(gpu["devices"].as_array().unwrap().len(), 1, "{gpu}");
    assert!(gpu.get("energy_j").is_none(), "{gpu}");
    check_vllm_metrics(p, 8.0);
    // Cost from the price; nothing from energy that was not modelled.
    assert!(f(&p["cost"]["usd_per_1m_output_tokens"]) > 0.0);
    assert!(p["cost"].get("output_tokens_per_joule").is_none());
    assert!(
        stdout.contains("telemetry over the measurement windows"),
        "{stdout}"
    );
    assert!(stdout.contains("running max"), "{stdout}");
    assert!(stdout.contains("SM act %"), "{stdout}");
    assert!(!stdout.contains("power W"), "no power modelled: {stdout}");
    assert!(
        stdout.contains("GPU figures of 1 point are modelled by the simulator"),
        "{stdout}"
    );
}

#[test]
fn openai_target_samples_this_machines_gpus_or_says_there_are_none() {
    let dir = tempfile::tempdir().unwrap();
    let sim = external_sim(dir.path());
    let spec = write_spec(
        dir.path(),
        "ext",
        &format!(
            "{}\n[telemetry]\ngpu = \"auto\"\nscrape_interval = \"100ms\"\n",
            openai_target(&sim, &sim.metrics_url(), "")
        ),
    );
    let out = dir.path().join("out");
    let o = run(&spec, &out);
    let stdout = text(&o.stdout);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let r = results(&out);
    let p = &r["points"][0];
    let gpu = &p["telemetry"]["gpu"];
    if infer_bench::telemetry::gpu::inventory().is_none() {
        assert_eq!(gpu["status"], "absent", "{gpu}");
        let note = gpu["note"].as_str().unwrap();
        assert!(note.starts_with("NVML is not available"), "{note}");
        assert!(
            stdout.contains("GPU telemetry was not sampled for 1 point: NVML is not available"),
            "{stdout}"
        );
    } else {
        assert_eq!(gpu["status"], "sampled", "{gpu}");
        assert!(!gpu["devices"].as_array().unwrap().is_empty());
    }
    check_vllm_metrics(p, 8.0);
}

#[test]
fn failing_scrapes_are_recorded_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let sim = external_sim(dir.path());
    let wrong = format!("{}/no-metrics-here", sim.base_url());
    let spec = write_spec(
        dir.path(),
        "badscrape",
        &format!(
            "{}\n[telemetry]\ngpu = \"off\"\nscrape_interval = \"200ms\"\n",
            openai_target(&sim, &wrong, "")
        ),
    );
    let out = dir.path().join("out");
    let o = run(&spec, &out);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{}", text(&o.stderr));
    let r = results(&out);
    let p = &r["points"][0];
    assert!(p["merged"]["requests"]["succeeded"].as_u64().unwrap() > 0);
    assert_eq!(p["telemetry"]["gpu"]["status"], "off");
    let m = &p["telemetry"]["server_metrics"];
    assert_eq!(m["scrapes_ok"], 0, "{m}");
    assert!(m["scrapes_failed"].as_u64().unwrap() >= 3, "{m}");
    let msg = m["errors"][0]["message"].as_str().unwrap();
    assert!(
        msg.contains("/no-metrics-here") && msg.contains("404"),
        "{msg}"
    );
    assert!(m.get("family").is_none());
    assert!(stdout.contains("scrapes of"), "{stdout}");
}

#[test]
fn required_gpu_telemetry_fails_before_the_first_point_with_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(
        dir.path(),
        "simreq",
        &format!(
            "[targets.sim]\nkind = \"sim\"\ngpu = \"h100-sxm\"\n{MODEL_AND_LOAD}\n[telemetry]\ngpu = \"required\"\n"
        ),
    );
    let out = dir.path().join("out");
    let o = run(&spec, &out);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.starts_with("error: GPU telemetry is required (telemetry.gpu = \"required\"), but target `sim` is the built-in simulator"),
        "{stderr}"
    );
    assert!(stderr.contains("\n  hint: "), "{stderr}");
    assert!(!out.exists(), "nothing ran, so nothing was written");

    if infer_bench::telemetry::gpu::inventory().is_none() {
        // An OpenAI target on this machine, which has no NVIDIA driver.
        let spec = write_spec(
            dir.path(),
            "extreq",
            &format!(
                "[targets.ext]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n{MODEL_AND_LOAD}\n[telemetry]\ngpu = \"required\"\n"
            ),
        );
        let o = run(&spec, &out);
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{stderr}");
        assert!(
            stderr.contains("but target `ext` has no GPU to sample: NVML is not available"),
            "{stderr}"
        );
        assert!(
            stderr.contains("hint: run on a machine with an NVIDIA GPU"),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_eq!(
            stderr.lines().count(),
            2,
            "one sentence and a hint: {stderr}"
        );
        assert!(!out.exists());
    }
}

#[test]
fn telemetry_probe_reports_gpus_or_exits_3() {
    let o = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .args(["telemetry-probe", "--seconds", "0.3"])
        .output()
        .unwrap();
    let stderr = text(&o.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    if infer_bench::telemetry::gpu::inventory().is_none() {
        assert_eq!(o.status.code(), Some(3), "{stderr}");
        assert!(
            stderr.starts_with("error: there is no GPU to probe: NVML is not available"),
            "{stderr}"
        );
        assert!(o.stdout.is_empty());
    } else {
        assert_eq!(o.status.code(), Some(0), "{stderr}");
        assert!(text(&o.stdout).starts_with("GPU telemetry probe"));
    }
}

/// The whole run loop with two scripted GPUs drawing 250 W each (their
/// energy counters rising to match): energy over the windows, tokens per
/// joule and the electricity price follow, and every sample sits on the
/// point's clock where the windows say.
#[test]
fn scripted_gpus_give_energy_cost_and_aligned_series() {
    // Its server-metrics check reads how many requests the simulator had
    // running at each scrape: with this file's other tests beside it on 2
    // cores, a fresh-clone CI run saw 2 of 8 at every scrape.
    let _t = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let sim = external_sim(dir.path());
    let spec = write_spec(
        dir.path(),
        "scripted",
        &format!(
            "{}\n[cost]\ngpu_hour_usd = 2.5\ngpus = 2\nkwh_usd = 0.12\n\
             [telemetry]\ngpu = \"required\"\ninterval = \"50ms\"\nscrape_interval = \"250ms\"\n",
            openai_target(&sim, &sim.metrics_url(), "gpu_ids = [\"0\", \"1\"]")
        ),
    );
    let origin = Instant::now();
    let script = Script::ByTime(Arc::new(move |now: Instant| {
        let s = now.duration_since(origin).as_secs_f64();
        let reading = GpuReading {
            utilization_pct: Some(80.0),
            memory_bandwidth_utilization_pct: Some(40.0),
            memory_used_bytes: Some(40_000_000_000),
            power_w: Some(250.0),
            energy_mj: Some(1_000_000 + (s * 250_000.0) as u64),
            sm_clock_mhz: Some(1980),
            memory_clock_mhz: Some(2619),
            temperature_c: Some(55),
            throttle_reasons: Some(0x4),
            pcie_rx_bytes_per_s: Some(1e6),
            pcie_tx_bytes_per_s: Some(1e6),
            processes: Vec::new(),
            ..Default::default()
        };
        vec![reading.clone(), reading]
    }));
    let gpus = ScriptedSource::gpus(2, script);
    let spec = infer_bench::spec::load(&spec).unwrap();
    let plan = Plan::build(&spec).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let opts = infer_bench::run::RunOptions {
        ..infer_bench::run::RunOptions::new(dir.path().join("out"))
    };
    let r = infer_bench::run::run_plan_with(
        &spec,
        &plan,
        &opts,
        &rt,
        Arc::new(Default::default()),
        &gpus,
    )
    .unwrap();
    let p = &r.points[0];
    let t = p.telemetry.as_ref().unwrap();
    let window_s = p.merged.window_s;
    assert!(window_s > 1.0, "{window_s}");
    let g = &t.gpu;
    assert_eq!(g.devices.len(), 2);
    let energy = g.energy_j.unwrap();
    assert!(
        (energy / (500.0 * window_s) - 1.0).abs() < 0.02,
        "{energy} J over {window_s} s from two 250 W GPUs"
    );
    assert!((g.power_w_mean.unwrap() - 500.0).abs() < 10.0);
    let d = &g.devices[0];
    assert_eq!(d.memory_idle_bytes, Some(40_000_000_000));
    assert_eq!(d.stats.utilization_pct.unwrap().mean, 80.0);
    assert_eq!(d.throttle_reasons["sw_power_cap"], 1.0);
    // Cost: the formulas of docs/telemetry.md over the same window.
    let out = p.merged.tokens.output_total as f64;
    let c = p.cost.as_ref().unwrap();
    assert_eq!(c.gpus, Some(2));
    assert!((c.output_tokens_per_joule.unwrap() - out / energy).abs() < 1e-9);
    let elec = energy / 3.6e6 * 0.12 / (out / 1e6);
    assert!((c.electricity_usd_per_1m_output_tokens.unwrap() - elec).abs() < 1e-12);
    let gpu_usd = 2.5 * 2.0 * window_s / 3600.0;
    assert!((c.usd_per_1m_output_tokens.unwrap() - gpu_usd / (out / 1e6)).abs() < 1e-9);
    // Alignment: the idle sample comes before the run, samples every
    // ~50 ms fill the window, and the last comes after it.
    let run = &t.runs[0];
    let ts = &d.series.t_s;
    assert!(ts.windows(2).all(|w| w[0] <= w[1]));
    assert!(ts[0] <= run.start_s && run.start_s <= run.window_start_s);
    assert!(*ts.last().unwrap() >= run.window_end_s);
    let inside = d.stats.utilization_pct.unwrap().count as f64;
    let expected = window_s / 0.05;
    assert!(
        inside >= expected * 0.6 && inside <= expected + 3.0,
        "{inside} samples in a {window_s} s window at 50 ms"
    );
    // The energy series is the counter since the point began.
    let e = &d.series.energy_j;
    assert_eq!(e[0], Some(0.0));
    let last = e.last().unwrap().unwrap();
    let span = ts.last().unwrap() - ts[0];
    assert!(
        (last / (250.0 * span) - 1.0).abs() < 0.02,
        "{last} J over {span} s"
    );
    check_vllm_metrics(&serde_json::to_value(p).unwrap(), 8.0);
}

/// Speculative decoding read from the server: a scripted server that
/// decodes with drafts of 4 tokens and accepts 2 a step (each event one
/// verification step of 3 tokens) exposes vLLM's `spec_decode` counters;
/// the point's headline gives acceptance 0.5 and 3 tokens a step, exactly
/// the script's truth, and the terminal report shows both in the
/// telemetry table. A server without speculation shows no such columns.
#[test]
fn speculative_decoding_acceptance_is_read_from_the_servers_counters() {
    use infer_bench_testkit::scripted::{Script, ScriptedServer};
    let rt = infer_bench_testkit::runtime();
    let server = rt
        .block_on(ScriptedServer::start(Script {
            ttft: std::time::Duration::from_millis(5),
            itl: std::time::Duration::from_millis(3),
            tokens_per_event: 3,
            spec_draft_tokens: 4,
            ..Script::default()
        }))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(
        dir.path(),
        "spec-decode",
        &format!(
            "[targets.s]\nkind = \"openai\"\nbase_url = \"{}\"\nmetrics_url = \"{}/metrics\"\n\
             [models.m]\nserved_name = \"scripted-model\"\n\
             [workloads.w]\napi = \"chat\"\ninput_tokens = 32\noutput_tokens = 30\n\
             [load]\nconcurrency = 4\nduration = \"1500ms\"\n\
             [telemetry]\ngpu = \"off\"\nscrape_interval = \"200ms\"\n",
            server.base_url(),
            server.base_url().trim_end_matches("/v1")
        ),
    );
    let out = dir.path().join("out");
    let o = run(&spec, &out);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let r = results(&out);
    let h = &r["points"][0]["telemetry"]["server_metrics"]["headline"];
    assert_eq!(f(&h["spec_acceptance_rate"]), 0.5, "{h}");
    assert_eq!(f(&h["spec_accept_length"]), 3.0, "{h}");
    let report = text(&o.stdout);
    let header = report
        .lines()
        .find(|l| l.contains("preempt"))
        .unwrap_or_else(|| panic!("no telemetry table: {report}"));
    assert!(
        header.contains("spec acc %") && header.contains("acc len"),
        "{report}"
    );
    let row = report
        .lines()
        .skip_while(|l| !l.contains("spec acc %"))
        .nth(1)
        .unwrap();
    assert!(row.trim_end().ends_with("50.0     3.00"), "{row:?}");
}
