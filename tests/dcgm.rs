//! GPU telemetry from a dcgm-exporter, end to end: the real binary runs an
//! OpenAI target (an in-process simulator) whose `gpu_metrics_url` is a
//! fake dcgm-exporter (crates/testkit) serving known values per scrape,
//! with several GPUs and hosts, fields some GPUs lack, an energy counter
//! that resets, and scrapes that fail (HTTP 500, malformed text, a
//! timeout). The results must hold exactly the served values on the
//! telemetry axis, and statistics over the measurement windows computed
//! here from the served series.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use infer_bench::plan::Plan;
use infer_bench::sim::server::SimServer;
use infer_bench_testkit::dcgm::{Answer, DcgmExporter, FakeGpu, exposition};
use infer_bench_testkit::runtime;
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
concurrency = 4
duration = "4s"
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

/// The HTML report of the run in `out`, written to `html` by the binary.
fn html_report(out: &Path, html: &Path) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .args(["report", out.to_str().unwrap(), "--format", "html", "-o"])
        .arg(html)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    std::fs::read_to_string(html).unwrap()
}

fn results(out: &Path) -> Value {
    let text = std::fs::read_to_string(out.join("results.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let schema: Value = serde_json::from_str(&infer_bench::results::schema_text()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "results do not match their schema: {errors:?}"
    );
    v
}

/// A simulator started in-process, standing in for a remote server.
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

/// The scrape at which the energy counter resets (a driver reload).
const RESET_AT: u64 = 12;

/// The fields GPU `g` of `node-a` (or `node-b`) shows at scrape `n`. The
/// SM clock, `1000 + n`, tells which scrape a recorded sample came from.
/// GPU 1 publishes no profiling fields and no NVLink.
fn fields(g: u32, n: u64) -> Vec<(&'static str, f64)> {
    let nf = n as f64;
    let energy = if n < RESET_AT {
        9_000_000_000.0 + nf * 150_000.0
    } else {
        5_000.0 + (nf - RESET_AT as f64) * 150_000.0
    };
    let mut v = vec![
        ("DCGM_FI_DEV_SM_CLOCK", 1000.0 + nf),
        ("DCGM_FI_DEV_MEM_CLOCK", 2619.0),
        ("DCGM_FI_DEV_MEMORY_TEMP", 50.0),
        ("DCGM_FI_DEV_GPU_TEMP", 60.0 + g as f64 + (n % 3) as f64),
        ("DCGM_FI_DEV_POWER_USAGE", 300.25 + nf + g as f64 * 0.5),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", energy),
        ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 0.0),
        ("DCGM_FI_DEV_GPU_UTIL", ((n * 7 + g as u64) % 101) as f64),
        ("DCGM_FI_DEV_MEM_COPY_UTIL", (n % 50) as f64),
        ("DCGM_FI_DEV_ENC_UTIL", 0.0),
        ("DCGM_FI_DEV_DEC_UTIL", 0.0),
        ("DCGM_FI_DEV_XID_ERRORS", 0.0),
        ("DCGM_FI_DEV_FB_USED", 40_000.0 + nf * 10.0),
        ("DCGM_FI_DEV_FB_FREE", 41_000.0 - nf * 10.0),
        (
            "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
            if n % 2 == 0 { 4.0 } else { 1.0 },
        ),
        ("DCGM_FI_PROF_PCIE_TX_BYTES", 1.5e9 + nf),
        ("DCGM_FI_PROF_PCIE_RX_BYTES", 2.5e8 + nf),
    ];
    if g == 0 {
        v.extend([
            ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.99),
            ("DCGM_FI_PROF_SM_ACTIVE", (n % 20) as f64 / 20.0),
            ("DCGM_FI_PROF_SM_OCCUPANCY", (n % 10) as f64 / 40.0),
            ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", (n % 8) as f64 / 16.0),
            ("DCGM_FI_PROF_DRAM_ACTIVE", 0.5 + (n % 5) as f64 / 10.0),
            ("DCGM_FI_PROF_NVLINK_TX_BYTES", 2e10 + nf),
            ("DCGM_FI_PROF_NVLINK_RX_BYTES", 3e10 + nf),
        ]);
    }
    v
}

fn node_a() -> Vec<FakeGpu> {
    let mut b = FakeGpu::h100("node-a", 1);
    b.pod = Some("vllm-0".into());
    vec![FakeGpu::h100("node-a", 0), b]
}

/// The scrapes that fail: HTTP 500, a malformed text, a timeout.
const FAILS: [u64; 4] = [5, 9, 16, 19];

/// What the exporter answers at scrape `n`: three GPUs on two hosts (a
/// federated endpoint), with a failure every so often.
fn script(n: u64) -> Answer {
    match n {
        5 | 19 => return Answer::Status(500),
        9 => return Answer::Text("DCGM_FI_DEV_SM_CLOCK{gpu=\"0\" 1\n".into()),
        // Past the scraper's 2 s limit.
        16 => return Answer::Slow(Duration::from_millis(2600), "late".into()),
        _ => {}
    }
    let mut gpus: Vec<(FakeGpu, Vec<(&str, f64)>)> = node_a()
        .into_iter()
        .map(|g| {
            let f = fields(g.gpu, n);
            (g, f)
        })
        .collect();
    gpus.push((FakeGpu::h100("node-b", 0), fields(0, n + 1000)));
    let text = exposition(&gpus);
    if n == 20 {
        // Slow, but within the limit: recorded like any other.
        return Answer::Slow(Duration::from_millis(300), text);
    }
    Answer::Text(text)
}

fn nums(v: &Value) -> Vec<Option<f64>> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(Value::as_f64)
        .collect()
}

/// Nearest-rank statistics, computed here independently of the tool.
fn expected_stats(mut v: Vec<f64>) -> (u64, f64, f64, f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let rank = |p: f64| v[((p / 100.0 * n as f64).ceil() as usize).clamp(1, n) - 1];
    (
        n as u64,
        v.iter().sum::<f64>() / n as f64,
        v[0],
        rank(50.0),
        rank(95.0),
        v[n - 1],
    )
}

fn check_stats(stats: &Value, expected: Vec<f64>, what: &str) {
    let (count, mean, min, p50, p95, max) = expected_stats(expected);
    assert_eq!(stats["count"].as_u64(), Some(count), "{what}: {stats}");
    for (k, want) in [("min", min), ("p50", p50), ("p95", p95), ("max", max)] {
        assert_eq!(stats[k].as_f64(), Some(want), "{what}.{k}: {stats}");
    }
    let got = stats["mean"].as_f64().unwrap();
    assert!(
        (got - mean).abs() <= mean.abs() * 1e-12,
        "{what}.mean: {got} against {mean}"
    );
}

#[test]
fn dcgm_exporter_readings_are_recorded_exactly_and_summarized_over_the_windows() {
    let _t = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let sim = external_sim(dir.path());
    let rt = runtime();
    let exporter = rt.block_on(DcgmExporter::start(script)).unwrap();
    let spec = write_spec(
        dir.path(),
        "dcgm",
        &format!(
            "[targets.ext]\nkind = \"openai\"\nbase_url = \"{}\"\nmetrics_url = \"{}\"\n\
             gpu_metrics_url = \"{}\"\ngpu_metrics_match = {{ Hostname = \"node-a\" }}\n\
             {MODEL_AND_LOAD}\n[telemetry]\ngpu = \"required\"\nscrape_interval = \"100ms\"\n",
            sim.base_url(),
            sim.metrics_url(),
            exporter.url()
        ),
    );
    let out = dir.path().join("out");
    let o = run(&spec, &out);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let served = exporter.served();
    let r = results(&out);
    let t = &r["points"][0]["telemetry"];
    let g = &t["gpu"];
    // Some scrapes failed (FAILS): sampled, with gaps.
    assert_eq!(g["status"], "partial", "{g}");
    assert_eq!(g["source"], "dcgm");
    assert_eq!(g["url"], exporter.url());
    assert!((g["interval_s"].as_f64().unwrap() - 0.1).abs() < 1e-9);

    // node-b is filtered out; node-a's two GPUs, in index order.
    let devices = g["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2, "{g}");
    let windows: Vec<(f64, f64)> = t["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["window_start_s"].as_f64().unwrap(),
                r["window_end_s"].as_f64().unwrap(),
            )
        })
        .collect();
    let in_window = |t: f64| windows.iter().any(|(a, b)| t >= *a && t <= *b);

    // Which scrapes the session took: from the first recorded to the last.
    let first_n = nums(&devices[0]["series"]["sm_clock_mhz"])[0].unwrap() as u64 - 1000;
    let last_n = nums(&devices[0]["series"]["sm_clock_mhz"])
        .last()
        .unwrap()
        .unwrap() as u64
        - 1000;
    let taken: Vec<u64> = served
        .iter()
        .map(|s| s.n)
        .filter(|n| (first_n..=last_n).contains(n))
        .collect();
    // Failed scrapes: recorded with their reasons, their samples missing.
    // (A failed scrape may also be the session's last: nothing scrapes
    // the exporter after the point.)
    let failed_n: Vec<u64> = served
        .iter()
        .map(|s| s.n)
        .filter(|n| *n >= first_n && FAILS.contains(n))
        .collect();
    assert!(failed_n.len() >= 3, "{failed_n:?} of {taken:?}");
    let errors: Vec<&str> = g["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        g["scrapes_failed"].as_u64(),
        Some(failed_n.len() as u64),
        "{errors:?}"
    );
    assert!(errors.iter().any(|e| e.contains("HTTP 500")), "{errors:?}");
    assert!(errors.iter().any(|e| e.contains("malformed")), "{errors:?}");
    assert!(errors.iter().any(|e| e.contains("timed out")), "{errors:?}");

    for (d, fake) in devices.iter().zip(node_a()) {
        assert_eq!(d["index"], fake.gpu);
        assert_eq!(d["uuid"], fake.uuid.as_str());
        assert_eq!(d["hostname"], "node-a");
        assert_eq!(d["name"], "NVIDIA H100 80GB HBM3");
        assert_eq!(d["source"], "dcgm");
        assert_eq!(d["memory_total_bytes"], 81_000u64 * 1024 * 1024);
        let s = &d["series"];
        assert_eq!(s["thinned_by"], 1);
        let t_s = nums(&s["t_s"]);
        // Which scrape each sample came from, by its SM clock.
        let n_of: Vec<u64> = nums(&s["sm_clock_mhz"])
            .iter()
            .map(|c| c.unwrap() as u64 - 1000)
            .collect();
        assert!(n_of.windows(2).all(|w| w[0] < w[1]), "{n_of:?}");
        // Every good scrape from the first recorded one is there, and
        // no failed one.
        let good: Vec<u64> = taken
            .iter()
            .copied()
            .filter(|n| !FAILS.contains(n))
            .collect();
        assert_eq!(n_of, good, "GPU {}", fake.gpu);
        let served_col = |name: &str, scale: f64| -> Vec<Option<f64>> {
            n_of.iter()
                .map(|n| {
                    fields(fake.gpu, *n)
                        .iter()
                        .find(|(k, _)| *k == name)
                        .map(|(_, v)| v * scale)
                })
                .collect()
        };
        let mib = 1024.0 * 1024.0;
        for (key, name, scale) in [
            ("utilization_pct", "DCGM_FI_DEV_GPU_UTIL", 1.0),
            (
                "memory_bandwidth_utilization_pct",
                "DCGM_FI_DEV_MEM_COPY_UTIL",
                1.0,
            ),
            ("memory_used_bytes", "DCGM_FI_DEV_FB_USED", mib),
            ("power_w", "DCGM_FI_DEV_POWER_USAGE", 1.0),
            ("memory_clock_mhz", "DCGM_FI_DEV_MEM_CLOCK", 1.0),
            ("temperature_c", "DCGM_FI_DEV_GPU_TEMP", 1.0),
            ("pcie_tx_bytes_per_s", "DCGM_FI_PROF_PCIE_TX_BYTES", 1.0),
            ("pcie_rx_bytes_per_s", "DCGM_FI_PROF_PCIE_RX_BYTES", 1.0),
            ("nvlink_tx_bytes_per_s", "DCGM_FI_PROF_NVLINK_TX_BYTES", 1.0),
            ("nvlink_rx_bytes_per_s", "DCGM_FI_PROF_NVLINK_RX_BYTES", 1.0),
            ("sm_active", "DCGM_FI_PROF_SM_ACTIVE", 1.0),
            ("sm_occupancy", "DCGM_FI_PROF_SM_OCCUPANCY", 1.0),
            ("tensor_active", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 1.0),
            ("dram_active", "DCGM_FI_PROF_DRAM_ACTIVE", 1.0),
        ] {
            let want = served_col(name, scale);
            let what = format!("GPU {} {key}", fake.gpu);
            if want.iter().all(Option::is_none) {
                // A field the exporter does not publish is absent, not zero.
                assert!(s.get(key).is_none(), "{what}: {}", s[key]);
                assert!(d["stats"].get(key).is_none(), "{what}");
                continue;
            }
            assert_eq!(nums(&s[key]), want, "{what}");
            let inside: Vec<f64> = t_s
                .iter()
                .zip(&want)
                .filter(|(t, _)| in_window(t.unwrap()))
                .map(|(_, v)| v.unwrap())
                .collect();
            assert!(
                inside.len() >= 10,
                "{what}: {} samples inside",
                inside.len()
            );
            check_stats(&d["stats"][key], inside, &what);
        }
        // Throttle reasons: the fraction of in-window samples with each.
        let reasons = &d["throttle_reasons"];
        let inside: Vec<u64> = t_s
            .iter()
            .zip(&n_of)
            .filter(|(t, _)| in_window(t.unwrap()))
            .map(|(_, n)| *n)
            .collect();
        let even = inside.iter().filter(|n| *n % 2 == 0).count() as f64;
        assert_eq!(
            reasons["sw_power_cap"].as_f64(),
            Some(even / inside.len() as f64),
            "{reasons}"
        );
        // Energy: the counter's increase since the first sample, where the
        // reset counts its new value as the rise.
        let raw: Vec<f64> = served_col("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1.0)
            .into_iter()
            .map(Option::unwrap)
            .collect();
        let mut total = 0.0;
        let mut want = vec![Some(0.0)];
        for w in raw.windows(2) {
            total += if w[1] >= w[0] { w[1] - w[0] } else { w[1] };
            want.push(Some(total / 1000.0));
        }
        assert_eq!(nums(&s["energy_j"]), want, "GPU {} energy", fake.gpu);
        assert!(
            n_of.iter().any(|n| *n < RESET_AT) && n_of.iter().any(|n| *n > RESET_AT + 1),
            "the reset falls inside the recorded series: {n_of:?}"
        );
        assert_eq!(d["energy_source"], "counter");
        let interp = |at: f64| -> f64 {
            let i = t_s.iter().position(|t| t.unwrap() >= at).unwrap();
            let (t1, e1) = (t_s[i].unwrap(), want[i].unwrap());
            if t1 == at || i == 0 {
                return e1;
            }
            let (t0, e0) = (t_s[i - 1].unwrap(), want[i - 1].unwrap());
            e0 + (e1 - e0) * (at - t0) / (t1 - t0)
        };
        let energy: f64 = windows.iter().map(|(a, b)| interp(*b) - interp(*a)).sum();
        let got = d["energy_j"].as_f64().unwrap();
        assert!(
            (got - energy).abs() < 1e-9 * energy.max(1.0),
            "GPU {}: {got} J against {energy} J",
            fake.gpu
        );
        assert!(got > 0.0 && got < 150.0 * 100.0, "{got}");
    }
}

#[test]
fn an_unreachable_exporter_stops_a_required_run_and_is_noted_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let sim = external_sim(dir.path());
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let body = |mode: &str| {
        format!(
            "[targets.ext]\nkind = \"openai\"\nbase_url = \"{}\"\ngpu_metrics_url = \"{url}\"\n\
             {MODEL_AND_LOAD}\n[telemetry]\ngpu = \"{mode}\"\nscrape_interval = \"100ms\"\n",
            sim.base_url()
        )
        .replace("duration = \"4s\"", "duration = \"300ms\"")
    };
    let spec = write_spec(dir.path(), "req", &body("required"));
    let o = run(&spec, &dir.path().join("out-req"));
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("target `ext` has no GPU to read at") && stderr.contains("cannot connect"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: check that dcgm-exporter serves"),
        "{stderr}"
    );
    let spec = write_spec(dir.path(), "auto", &body("auto"));
    let out = dir.path().join("out-auto");
    let o = run(&spec, &out);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let g = &results(&out)["points"][0]["telemetry"]["gpu"];
    assert_eq!(g["status"], "absent");
    assert!(
        g["note"].as_str().unwrap().contains("cannot connect"),
        "{g}"
    );
}

/// Requests a simulator has running or has finished, from its `/metrics`
/// (0 where it cannot be read).
fn requests_seen(metrics_url: &str) -> u64 {
    use std::io::{Read, Write};
    let rest = metrics_url.trim_start_matches("http://");
    let (addr, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let Ok(mut c) = std::net::TcpStream::connect(addr) else {
        return 0;
    };
    let _ = write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    let mut body = String::new();
    let _ = c.read_to_string(&mut body);
    body.lines()
        .filter(|l| {
            l.starts_with("vllm:num_requests_running")
                || l.starts_with("vllm:request_success_total")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// A dcgm-exporter that cannot be reached when the point begins and comes
/// up 1.5 s later (a restarting pod) is read from its first answer on:
/// the point's GPU telemetry is partial, its gaps counted, not absent.
#[test]
fn an_exporter_that_comes_up_late_is_read_from_its_first_answer() {
    let dir = tempfile::tempdir().unwrap();
    let sim = external_sim(dir.path());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let spec = write_spec(
        dir.path(),
        "late",
        &format!(
            "[targets.ext]\nkind = \"openai\"\nbase_url = \"{}\"\ngpu_metrics_url = \"{url}\"\n\
             {MODEL_AND_LOAD}\n[telemetry]\nscrape_interval = \"100ms\"\n",
            sim.base_url()
        ),
    );
    let out = dir.path().join("out");
    let child = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .arg("run")
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The point's requests reach the server (so its GPU sampler has
    // tried the exporter, before the first run) before the exporter
    // listens; it comes up 1.5 s later.
    let begun = std::time::Instant::now();
    while requests_seen(&sim.metrics_url()) == 0 {
        assert!(
            begun.elapsed() < Duration::from_secs(60),
            "the run never began"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let rt = runtime();
    let exporter = rt
        .block_on(DcgmExporter::start_on(port, |n| {
            Answer::Text(exposition(&[(FakeGpu::h100("node-a", 0), fields(0, n))]))
        }))
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let g = &results(&out)["points"][0]["telemetry"]["gpu"];
    assert!(!exporter.served().is_empty(), "the exporter was never read");
    assert_eq!(g["devices"].as_array().map(Vec::len), Some(1), "{g}");
    assert_eq!(g["status"], "partial", "{g}");
    assert!(g["scrapes_failed"].as_u64().unwrap() >= 1, "{g}");
    assert!(
        g["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot connect")),
        "{g}"
    );
}

/// The bottleneck hints read DCGM's activity fractions: the same load on
/// the same server gets a different reading as the exporter's SM, tensor
/// and DRAM activity change, while NVML's coarse utilization stays at
/// 100% throughout (the busy-looking GPU the activity fields see through).
#[test]
fn the_hints_follow_the_served_sm_tensor_and_dram_activity() {
    let _t = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let sim = external_sim(dir.path());
    let rt = runtime();
    // (case, SM, tensor, DRAM, the hint it must give). dcgm-exporter's
    // default counters publish no SM activity: the last case.
    let cases = [
        ("prefill", Some(0.93), 0.71, 0.35, "compute_bound"),
        ("decode", Some(0.88), 0.12, 0.82, "bandwidth_bound"),
        ("starved", Some(0.06), 0.02, 0.04, "gpu_starved"),
        ("default-counters", None, 0.66, 0.3, "compute_bound"),
    ];
    let reading = ["compute_bound", "bandwidth_bound", "gpu_starved"];
    for (case, sm, tensor, dram, want) in cases {
        let exporter = rt
            .block_on(DcgmExporter::start(move |_| {
                let mut fields = vec![
                    ("DCGM_FI_DEV_GPU_UTIL", 100.0),
                    ("DCGM_FI_DEV_MEM_COPY_UTIL", 90.0),
                    ("DCGM_FI_DEV_FB_USED", 70_000.0),
                    ("DCGM_FI_DEV_FB_FREE", 11_000.0),
                    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", tensor),
                    ("DCGM_FI_PROF_DRAM_ACTIVE", dram),
                ];
                fields.extend(sm.map(|v| ("DCGM_FI_PROF_SM_ACTIVE", v)));
                Answer::Text(exposition(&[(FakeGpu::h100("node-a", 0), fields)]))
            }))
            .unwrap();
        let spec = write_spec(
            dir.path(),
            case,
            &format!(
                "[targets.ext]\nkind = \"openai\"\nbase_url = \"{}\"\ngpu_metrics_url = \"{}\"\n\
                 {MODEL_AND_LOAD}\n[telemetry]\ngpu = \"required\"\nscrape_interval = \"100ms\"\n",
                sim.base_url(),
                exporter.url()
            )
            .replace("duration = \"4s\"", "duration = \"1500ms\""),
        );
        let out = dir.path().join(format!("out-{case}"));
        let o = run(&spec, &out);
        assert_eq!(o.status.code(), Some(0), "{case}: {}", text(&o.stderr));
        let r = results(&out);
        let p = &r["points"][0];
        let stats = &p["telemetry"]["gpu"]["devices"][0]["stats"];
        let close = |got: &Value, want: f64| got.as_f64().is_some_and(|g| (g - want).abs() < 1e-12);
        let phases = &p["memory"]["gpus"][0];
        assert!(
            sm.is_some() || stats.get("sm_active").is_none(),
            "{case}: {stats}"
        );
        let served = [("tensor_active", tensor), ("dram_active", dram)];
        for (key, v) in sm.map(|v| ("sm_active", v)).into_iter().chain(served) {
            assert!(close(&stats[key]["mean"], v), "{case} {key}: {stats}");
            // By phase too: the served value is the same in both.
            for ph in ["prefill_mean", "decode_mean", "prefill_peak", "decode_peak"] {
                let got = &phases[key][ph];
                assert!(
                    got.is_null() || close(got, v),
                    "{case} {key}.{ph}: {phases}"
                );
            }
            assert!(
                !phases[key]["decode_mean"].is_null(),
                "{case} {key}: {phases}"
            );
        }
        let hints = p["hints"].as_array().unwrap();
        let kinds: Vec<&str> = hints.iter().map(|h| h["kind"].as_str().unwrap()).collect();
        // A starved GPU while this machine's CPU was saturated (by other
        // tests beside this one) reads as waiting on that CPU:
        // `scheduling_bound`, which withholds `gpu_starved`. Both
        // readings are right; which one a run gets depends on the machine.
        let want = if want == "gpu_starved" && kinds.contains(&"scheduling_bound") {
            "scheduling_bound"
        } else {
            want
        };
        for k in reading {
            assert_eq!(kinds.contains(&k), k == want, "{case}: {kinds:?}");
        }
        // NVML's coarse figures name no bottleneck when DCGM's are there.
        let h = hints.iter().find(|h| h["kind"] == want).unwrap();
        let ev = &h["evidence"];
        if want == "scheduling_bound" {
            assert_eq!(ev["sm_active"].as_f64(), sm, "{case}: {h}");
            continue;
        }
        assert_eq!(ev["sm_active"].as_f64(), sm, "{case}: {h}");
        assert_eq!(ev["tensor_active"].as_f64(), Some(tensor), "{case}: {h}");
        assert_eq!(ev["dram_active"].as_f64(), Some(dram), "{case}: {h}");
        assert!(ev.get("gpu_utilization_pct").is_none(), "{case}: {h}");
        let msg = h["message"].as_str().unwrap();
        let pct = |v: f64| format!("{:.0}%", v * 100.0);
        assert!(
            msg.contains(&format!(
                "{}tensor {}, DRAM {}",
                sm.map(|v| format!("SM {}, ", pct(v))).unwrap_or_default(),
                pct(tensor),
                pct(dram)
            )),
            "{case}: {msg}"
        );
        if want == "gpu_starved" {
            let q = ev["concurrency_mean"].as_f64().unwrap();
            assert!((1.0..=4.0).contains(&q), "{case}: {h}");
        }
        // The HTML report shows the served activity with its source: the
        // per-GPU table (after NVML-style util and memory-bandwidth
        // columns), memory by phase, and the key-metrics card.
        let html = html_report(&out, &dir.path().join(format!("{case}.html")));
        let pc = |v: f64| format!("{:.0}", v * 100.0);
        let sm_cell = sm.map(pc).unwrap_or_else(|| "-".into());
        let per_gpu = format!(
            "<td>0</td><td class=\"l\">dcgm</td><td>100</td><td>90</td><td>{sm_cell}</td><td>-</td><td>{}</td><td>{}</td>",
            pc(tensor),
            pc(dram)
        );
        assert!(html.contains("<h3>Per GPU</h3>"), "{case}");
        assert!(html.contains(&per_gpu), "{case}: no {per_gpu}");
        let trio = format!("{sm_cell} / {} / {}", pc(tensor), pc(dram));
        let by_phase = format!("<td class=\"l\">dcgm</td><td>{trio}</td><td>{trio}</td>");
        let decode_only = format!("<td class=\"l\">dcgm</td><td>- / - / -</td><td>{trio}</td>");
        assert!(
            html.contains(&by_phase) || html.contains(&decode_only),
            "{case}: memory by phase lacks {trio}"
        );
        let key = format!(
            "GPU SM / tensor / DRAM active</td><td>{trio}% <span class=\"muted\">(dcgm)</span>"
        );
        assert!(html.contains(&key), "{case}: no {key}");
    }
}

/// A simulated deployment (two tensor-parallel GPUs) in virtual time, a
/// prefill-heavy and a decode-heavy point, then one point in real time.
const SIM_GPUS: &str = r#"
[targets.sim]
kind = "sim"
gpu = "h100-sxm"
gpus = 2
[targets.sim.sim]
clock = "virtual"

[models.m]
preset = "llama-3.1-8b"
served_name = "m"

[workloads.prefill]
api = "completions"
input_tokens = 4000
output_tokens = 1
ignore_eos = true

[workloads.decode]
api = "completions"
input_tokens = 1000
output_tokens = 500
ignore_eos = true

[load]
concurrency = 8
warmup = "2s"
duration = "10s"

[matrix]
workload = ["prefill", "decode"]
"#;

/// The modelled memory of one GPU of `spec`'s first point, from the
/// simulator's own model: weights and reserve (bytes), KV bytes per token.
fn modelled_memory(spec: &Path) -> (f64, f64) {
    let spec = infer_bench::spec::load(spec).unwrap();
    let plan = Plan::build(&spec).unwrap();
    let setup = infer_bench::sim::request::Setup::of(&plan.points[0].config).unwrap();
    let perf = setup.engine.engine(0).perf();
    let gpus = 2.0;
    (
        (perf.weight_bytes() + perf.reserve_bytes()) / gpus,
        perf.kv_bytes_per_token() / gpus,
    )
}

#[test]
fn a_sim_run_records_its_modelled_gpus_as_dcgm_exporter_serves_them() {
    const MIB: f64 = 1024.0 * 1024.0;
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path(), "simgpu", SIM_GPUS);
    let out = dir.path().join("virtual");
    let o = run(&spec, &out);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let summary = text(&o.stdout);
    assert!(
        summary.contains(
            "GPU figures of 2 points are modelled by the simulator (its roofline and memory model), not measured"
        ),
        "{summary}"
    );
    let r = results(&out);
    let (idle, kv_per_token) = modelled_memory(&spec);
    let mut activity = Vec::new();
    for p in r["points"].as_array().unwrap() {
        let slug = p["slug"].as_str().unwrap();
        let g = &p["telemetry"]["gpu"];
        assert_eq!(g["status"], "sampled", "{slug}: {g}");
        assert_eq!(g["source"], "sim", "{slug}");
        assert!(g["note"].as_str().unwrap().contains("modelled"), "{slug}");
        let devices = g["devices"].as_array().unwrap();
        assert_eq!(devices.len(), 2, "{slug}: one series per GPU");
        for (i, d) in devices.iter().enumerate() {
            assert_eq!(d["source"], "sim");
            assert_eq!(d["index"], i as u64);
            assert_eq!(d["uuid"], format!("SIM-{i:08}"));
            assert_eq!(d["hostname"], "infer-bench-sim");
            assert_eq!(
                d["memory_total_bytes"],
                80u64 << 30,
                "{slug}: an H100's memory"
            );
            // Activity is a fraction of time, every sample in 0..=1.
            for f in ["sm_active", "tensor_active", "dram_active"] {
                for v in nums(&d["series"][f]).into_iter().flatten() {
                    assert!((0.0..=1.0).contains(&v), "{slug} {f}: {v}");
                }
            }
            // Memory: weights and reserve always; the KV cache on top,
            // at most what the requests in flight hold.
            let used = &d["stats"]["memory_used_bytes"];
            let (min, max) = (used["min"].as_f64().unwrap(), used["max"].as_f64().unwrap());
            let whole_mib = |b: f64| (b / MIB).round() * MIB;
            assert!(min >= whole_mib(idle), "{slug}: {min} < {idle}");
            let per_request = if slug.contains("prefill") {
                4001.0
            } else {
                1500.0
            };
            // Up to a 16-token block of slack per request.
            let kv_max = 8.0 * (per_request + 16.0) * kv_per_token;
            assert!(
                max - whole_mib(idle) <= kv_max + MIB,
                "{slug}: {max} holds more than weights, reserve and {kv_max} of KV"
            );
        }
        // The two GPUs of a tensor-parallel replica step together.
        assert_eq!(devices[0]["stats"], devices[1]["stats"], "{slug}");
        let mean = |f: &str| devices[0]["stats"][f]["mean"].as_f64().unwrap();
        activity.push((
            slug.to_string(),
            mean("sm_active"),
            mean("tensor_active"),
            mean("dram_active"),
        ));
        if slug.contains("decode") {
            // Eight requests of 1000 prompt tokens and up to 500 generated
            // stay in flight: their KV cache is on the GPUs.
            let used = &devices[0]["stats"]["memory_used_bytes"];
            let grown = used["max"].as_f64().unwrap() - idle;
            assert!(
                grown >= 8.0 * 1000.0 * kv_per_token - MIB,
                "{slug}: KV of {grown} bytes"
            );
        }
    }
    let [(_, p_sm, p_tensor, p_dram), (_, d_sm, d_tensor, d_dram)] = &activity[..] else {
        panic!("{activity:?}");
    };
    // A closed loop keeps the engine stepping; the host's share of a step
    // (scheduling, sampling) leaves the GPU idle, and weighs more on short
    // decode steps than on long prefills. Prefill is math, decode is moving
    // weights and KV cache.
    assert!(*p_sm > 0.95, "{activity:?}");
    assert!(*d_sm > 0.8 && d_sm < p_sm, "{activity:?}");
    assert!(p_tensor > p_dram, "{activity:?}");
    assert!(d_dram > d_tensor, "{activity:?}");
    assert!(p_tensor > d_tensor && d_dram > p_dram, "{activity:?}");
    // So the hints read them, and say they are modelled.
    let kinds = |i: usize| -> Vec<String> {
        r["points"][i]["hints"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|h| {
                h["message"]
                    .as_str()
                    .unwrap()
                    .contains("as the simulator modelled it")
            })
            .map(|h| h["kind"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(kinds(0), ["compute_bound"], "{}", r["points"][0]["insight"]);
    assert_eq!(
        kinds(1),
        ["bandwidth_bound"],
        "{}",
        r["points"][1]["insight"]
    );

    // The report shows them as modelled: per GPU, by phase, key metrics.
    let html = html_report(&out, &dir.path().join("sim.html"));
    assert!(html.contains("id=\"telemetry\""));
    assert!(html.contains("<h3>Per GPU</h3>"));
    assert!(html.contains("<td class=\"l\">sim, modelled</td>"));
    assert!(html.contains("SM active (modelled)"), "the radar's axis");
    assert!(html.contains("The simulator's GPUs are modelled"));

    // In real time the same figures come off the simulator's /metrics.
    let real_time = SIM_GPUS
        .replace("clock = \"virtual\"", "clock = \"real\"")
        .replace("warmup = \"2s\"", "warmup = \"1s\"")
        .replace("duration = \"10s\"", "duration = \"2s\"")
        // Answers of 100 tokens (0.7 s each here): requests finish in the
        // 2 s window even when a busy machine slows the simulator down
        // (500-token answers took 3.5 s, past the window, and a loaded
        // run finished none).
        .replace("output_tokens = 500", "output_tokens = 100")
        .replace("[\"prefill\", \"decode\"]", "[\"decode\"]");
    let real = write_spec(dir.path(), "simgpu-real", &real_time);
    let out = dir.path().join("real");
    let o = run(&real, &out);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let r = results(&out);
    let g = &r["points"][0]["telemetry"]["gpu"];
    assert_eq!(g["status"], "sampled", "{g}");
    assert_eq!(g["source"], "sim");
    assert!(g["url"].as_str().unwrap().ends_with("/metrics"), "{g}");
    let d = &g["devices"][0]["stats"];
    assert!(d["sm_active"]["mean"].as_f64().unwrap() > 0.8, "{d}");
    assert!(
        d["dram_active"]["mean"].as_f64().unwrap() > d["tensor_active"]["mean"].as_f64().unwrap(),
        "{d}"
    );
    assert!(d["memory_used_bytes"]["min"].as_f64().unwrap() >= (idle / MIB).round() * MIB);

    // The simulator's /metrics named as a dcgm-exporter (`sim-server`
    // beside an OpenAI target) stays marked modelled: its HELP lines say so.
    let sim = external_sim(dir.path());
    let ext = write_spec(
        dir.path(),
        "simgpu-ext",
        &format!(
            "[targets.ext]\nkind = \"openai\"\nbase_url = \"{}\"\ngpu_metrics_url = \"{}\"\n{MODEL_AND_LOAD}\n[telemetry]\nscrape_interval = \"100ms\"\n",
            sim.base_url(),
            sim.metrics_url()
        )
        .replace("duration = \"4s\"", "duration = \"1s\""),
    );
    let out = dir.path().join("ext");
    let o = run(&ext, &out);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let g = &results(&out)["points"][0]["telemetry"]["gpu"];
    assert_eq!(g["status"], "sampled", "{g}");
    assert_eq!(g["source"], "sim", "{g}");
    assert_eq!(g["devices"][0]["source"], "sim", "{g}");
    assert!(g["note"].as_str().unwrap().contains("modelled"), "{g}");

    // `off` is off, for a simulator too.
    let off = write_spec(
        dir.path(),
        "simgpu-off",
        &format!("{SIM_GPUS}\n[telemetry]\ngpu = \"off\"\n"),
    );
    let out = dir.path().join("off");
    let o = run(&off, &out);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let r = results(&out);
    assert_eq!(r["points"][0]["telemetry"]["gpu"]["status"], "off");
}

/// Triton's GPU gauges as its `/metrics` shows them (its metrics
/// documentation): utilization as a ratio, memory in bytes, power in W,
/// energy in J since it started; GPUs by `gpu_uuid` only, in device
/// order. The `n`-th scrape's utilization is `n % 10 / 10`.
fn triton_metrics(n: u64) -> String {
    let mut s = String::from(
        "# HELP nv_inference_request_success Number of successful inference requests, all batch sizes\n\
         # TYPE nv_inference_request_success counter\n\
         nv_inference_request_success{model=\"classifier\",version=\"1\"} 5\n",
    );
    // (name, help, value of GPU g at scrape n)
    type Gauge = (&'static str, &'static str, fn(u32, u64) -> f64);
    let gauges: [Gauge; 5] = [
        (
            "nv_gpu_utilization",
            "GPU utilization rate [0.0 - 1.0)",
            |_, n| (n % 10) as f64 / 10.0,
        ),
        (
            "nv_gpu_memory_total_bytes",
            "GPU total memory, in bytes",
            |_, _| 85_899_345_920.0,
        ),
        (
            "nv_gpu_memory_used_bytes",
            "GPU used memory, in bytes",
            |g, n| (30_000_000_000 + u64::from(g) * 1_000_000 + n * 1000) as f64,
        ),
        ("nv_gpu_power_usage", "GPU power usage in watts", |g, n| {
            200.5 + f64::from(g) + n as f64
        }),
        (
            "nv_energy_consumption",
            "GPU energy consumption in joules since the Triton Server started",
            |_, n| 1_000.0 + n as f64 * 25.0,
        ),
    ];
    for (name, help, value) in gauges {
        s.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
        // Listed in device order; the UUIDs do not sort that way.
        for (g, uuid) in [
            (0, "GPU-f0000000-0000-0000-0000-000000000000"),
            (1, "GPU-10000000-0000-0000-0000-000000000000"),
        ] {
            s.push_str(&format!("{name}{{gpu_uuid=\"{uuid}\"}} {}\n", value(g, n)));
        }
    }
    s
}

/// A KServe point whose server (a Triton) publishes its GPUs' gauges on
/// its metrics endpoint: where this machine's NVML sees no GPU (as on CI),
/// they are the point's GPU telemetry, marked `triton`, in Triton's units
/// converted; named as a `gpu_metrics_url`, they are read anywhere.
#[test]
fn triton_gpu_gauges_are_the_gpu_telemetry_of_a_kserve_point() {
    let _t = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let backing = write_spec(
        dir.path(),
        "backing",
        "[targets.sim]\nkind = \"sim\"\ngpu = \"a100-80gb\"\n\
         [models.resnet]\nkind = \"vision\"\npreset = \"resnet-50\"\nserved_name = \"classifier\"\n\
         [workloads.classify]\napi = \"kserve\"\n\
         inputs = [{ name = \"images\", datatype = \"FP32\", shape = [3, 224, 224] }]\n\
         [load]\nrequests = 1\nconcurrency = 1\n",
    );
    let spec = infer_bench::spec::load(&backing).unwrap();
    let plan = Plan::build(&spec).unwrap();
    let sim = SimServer::start(&plan.points[0].config).unwrap();
    let rt = runtime();
    let triton = rt
        .block_on(DcgmExporter::start(|n| Answer::Text(triton_metrics(n))))
        .unwrap();
    let nvml_here = infer_bench::telemetry::gpu::inventory().is_some_and(|i| !i.gpus.is_empty());
    for named in [false, true] {
        let gpu_url = if named {
            format!("gpu_metrics_url = \"{}\"\n", triton.url())
        } else {
            String::new()
        };
        let spec = write_spec(
            dir.path(),
            "triton-gpus",
            &format!(
                "[targets.triton]\nkind = \"openai\"\nbase_url = \"{}\"\nmetrics_url = \"{}\"\n{gpu_url}\
                 [models.resnet]\nkind = \"vision\"\nserved_name = \"classifier\"\n\
                 [workloads.classify]\napi = \"kserve\"\n\
                 inputs = [{{ name = \"images\", datatype = \"FP32\", shape = [3, 224, 224] }}]\n\
                 [load]\nconcurrency = 1\nduration = \"2s\"\n\
                 [telemetry]\nscrape_interval = \"100ms\"\n",
                sim.base_url().trim_end_matches("/v1"),
                triton.url()
            ),
        );
        let out = dir.path().join(format!("out-{named}"));
        let o = run(&spec, &out);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let r = results(&out);
        let g = &r["points"][0]["telemetry"]["gpu"];
        if nvml_here && !named {
            // This machine's own GPUs come first; nothing more to check.
            assert_eq!(g["source"], "nvml", "{g}");
            continue;
        }
        assert_eq!(g["source"], "triton", "{g}");
        assert_eq!(g["url"], triton.url(), "{g}");
        if !named {
            let note = g["note"].as_str().unwrap_or_default();
            assert!(note.contains("nv_gpu_*"), "{g}");
        }
        let devices = g["devices"].as_array().unwrap();
        assert_eq!(devices.len(), 2, "{g}");
        for (i, d) in devices.iter().enumerate() {
            // Device order as Triton lists them, not the UUIDs' order.
            assert_eq!(d["index"], i, "{d}");
            let uuid = [
                "GPU-f0000000-0000-0000-0000-000000000000",
                "GPU-10000000-0000-0000-0000-000000000000",
            ][i];
            assert_eq!(d["uuid"], uuid);
            assert_eq!(d["memory_total_bytes"], 85_899_345_920u64);
            let s = &d["series"];
            let util = nums(&s["utilization_pct"]);
            let power = nums(&s["power_w"]);
            let used = nums(&s["memory_used_bytes"]);
            assert!(util.len() >= 5, "{s}");
            for ((u, p), m) in util.iter().zip(&power).zip(&used) {
                // The scrape each sample came from, by its power.
                let n = p.unwrap() - 200.5 - i as f64;
                assert_eq!(n.fract(), 0.0, "{s}");
                assert!(
                    (u.unwrap() - (n as u64 % 10) as f64 * 10.0).abs() < 1e-9,
                    "{s}"
                );
                assert_eq!(
                    m.unwrap(),
                    (30_000_000_000 + i as u64 * 1_000_000 + n as u64 * 1000) as f64
                );
            }
            // Clocks and activities are not Triton's to give.
            assert!(
                s.get("sm_clock_mhz")
                    .is_none_or(|v| nums(v).iter().all(Option::is_none)),
                "{s}"
            );
        }
    }
}
