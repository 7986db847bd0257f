//! Scale-out end to end: load-sharding agents (`run --agent K/N
//! --start-at T`) as separate processes against one scripted server,
//! merged, equal a single process's run (counts exactly, latencies within
//! timer noise); point shards (`--partition`) merged equal the unsharded
//! point set; and merge refuses files that are not shards of one run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use infer_bench_testkit::runtime;
use infer_bench_testkit::scripted::{Script, ScriptedServer};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_infer-bench"))
}

fn read(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("results.json"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    serde_json::from_str(&text).unwrap()
}

fn check(o: &Output, code: i32) -> String {
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(code), "stderr: {stderr}");
    stderr
}

fn start_in(secs: f64) -> String {
    let t = SystemTime::now() + Duration::from_secs_f64(secs);
    humantime::format_rfc3339_millis(t).to_string()
}

/// The test's spec against `url` with the given load.
fn spec(dir: &Path, url: &str, load: &str) -> PathBuf {
    let text = format!(
        r#"name = "scaleout"
seed = 11
[targets.scripted]
kind = "openai"
base_url = "{url}"
[models.m]
served_name = "scripted-model"
[workloads.w]
api = "completions"
input_tokens = "uniform(16, 64)"
output_tokens = 8
ignore_eos = true
[load]
{load}
[validity]
min_requests = 1
min_duration = "100ms"
max_dispatch_lag_p99 = "5ms"
percentile_sample_check = false
"#
    );
    let path = dir.join("spec.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs N agents at once, each in its own process, and returns their out dirs.
fn agents(spec: &Path, dir: &Path, n: u32, extra: &[&str]) -> Vec<PathBuf> {
    let start = start_in(2.0);
    let children: Vec<_> = (1..=n)
        .map(|k| {
            let out = dir.join(format!("agent-{k}"));
            let child = bin()
                .arg("run")
                .arg(spec)
                .args(["--agent", &format!("{k}/{n}"), "--start-at", &start])
                .args(extra)
                .arg("--out")
                .arg(&out)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (out, child)
        })
        .collect();
    children
        .into_iter()
        .map(|(out, child)| {
            let o = child.wait_with_output().unwrap();
            check(&o, 0);
            out
        })
        .collect()
}

fn merge(inputs: &[PathBuf], out: &Path) -> Output {
    bin()
        .arg("merge")
        .args(inputs)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn merged(r: &serde_json::Value) -> &serde_json::Value {
    &r["points"][0]["merged"]
}

fn p50(r: &serde_json::Value, metric: &str) -> f64 {
    merged(r)["latency_ms"][metric]["p50"].as_f64().unwrap()
}

#[test]
fn four_agents_merged_equal_one_process_on_an_open_loop() {
    let _one = infer_bench_testkit::timing::exclusive();
    let rt = runtime();
    let script = Script {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(4),
        ..Script::default()
    };
    let server = rt.block_on(ScriptedServer::start(script)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(
        dir.path(),
        &server.base_url(),
        "arrival = \"poisson\"\nrate = \"40/s\"\nwarmup = \"500ms\"\nduration = \"3s\"",
    );

    let single = dir.path().join("single");
    check(
        &bin()
            .arg("run")
            .arg(&spec)
            .arg("--out")
            .arg(&single)
            .output()
            .unwrap(),
        0,
    );
    let shards = agents(&spec, dir.path(), 4, &[]);
    let out = dir.path().join("merged");
    let stdout = merge(&shards, &out);
    check(&stdout, 0);
    assert!(
        String::from_utf8_lossy(&stdout.stdout).contains("scripted"),
        "merge prints the summary table"
    );

    let (a, b) = (read(&single), read(&out));
    // Exactly the same requests: the union of the agents' shares is the
    // single process's schedule.
    let (ma, mb) = (merged(&a), merged(&b));
    assert_eq!(ma["requests"], mb["requests"], "counts are exact");
    assert!(ma["requests"]["sent"].as_u64().unwrap() > 80);
    assert_eq!(ma["tokens"]["output_total"], mb["tokens"]["output_total"]);
    assert_eq!(ma["tokens"]["input_total"], mb["tokens"]["input_total"]);
    assert_eq!(
        ma["tokens"]["requested_input"],
        mb["tokens"]["requested_input"]
    );
    assert_eq!(
        a["points"][0]["workload"]["sha256"],
        b["points"][0]["workload"]["sha256"]
    );
    // Latencies within timer noise, plus how late either side says it
    // sent (TTFT and E2E count from the scheduled time, so a client that
    // waited for a core adds its wait; on a quiet machine, microseconds);
    // throughput over the union's window.
    let late = |r: &serde_json::Value| {
        merged(r)["latency_ms"]["dispatch_lag"]["p99"]
            .as_f64()
            .unwrap()
    };
    let late_ms = late(&a).max(late(&b));
    for m in ["ttft", "tpot", "e2e"] {
        let (x, y) = (p50(&a, m), p50(&b, m));
        assert!(
            (x - y).abs() < 2.0 + 0.05 * x + late_ms,
            "{m} p50: one process {x} ms, four agents {y} ms (dispatch lag p99 up to {late_ms} ms)"
        );
    }
    let rate = |r: &serde_json::Value, k: &str| merged(r)[k].as_f64().unwrap();
    for k in ["request_throughput", "offered_rate", "achieved_send_rate"] {
        let (x, y) = (rate(&a, k), rate(&b, k));
        assert!(
            (x / y - 1.0).abs() < 0.03,
            "{k}: one process {x}, four agents {y}"
        );
    }
    // The merge says what each agent did.
    let shares = b["points"][0]["agents"].as_array().unwrap();
    assert_eq!(shares.len(), 4);
    let sent: u64 = shares.iter().map(|s| s["sent"].as_u64().unwrap()).sum();
    assert_eq!(sent, mb["requests"]["sent"].as_u64().unwrap());
    for s in shares {
        assert!(s["start_late_ms"].as_f64().unwrap() < 50.0, "{s}");
        assert!(s["dispatch_lag_p99_ms"].as_f64().is_some());
    }
    assert_eq!(b["merged_from"].as_array().unwrap().len(), 4);
    // The merged point is judged on the union: valid when the agents kept
    // to the 5 ms dispatch-lag budget together, else INVALID for exactly
    // that (a busy machine makes four clients late, and the merge must
    // say so rather than pass them).
    let point = &b["points"][0];
    if late(&b) <= 5.0 {
        assert!(
            point["valid"].as_bool().unwrap(),
            "{}",
            point["invalid_reasons"]
        );
    } else {
        assert_eq!(point["valid"], false, "dispatch lag p99 {} ms", late(&b));
        let kinds: Vec<&str> = point["invalid_reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["dispatch_lag"], "{}", point["invalid_reasons"]);
    }
    // The merged file is a results file like any other.
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/schemas/results.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(
        validator.is_valid(&b),
        "the merged file matches the results schema"
    );

    // Without every agent's share, there is no exact merge.
    let three = merge(&shards[..3], &dir.path().join("three"));
    let err = check(&three, 2);
    assert!(err.contains("missing the shares of agent 4/4"), "{err}");
    // One agent's file given twice.
    let twice = merge(
        &[shards[0].clone(), shards[0].clone()],
        &dir.path().join("twice"),
    );
    let err = check(&twice, 2);
    assert!(err.contains("two shares from agent 1/4"), "{err}");
    // An agent's file with a single process's.
    let mixed = merge(
        &[single.clone(), shards[0].clone()],
        &dir.path().join("mixed"),
    );
    let err = check(&mixed, 2);
    assert!(err.contains("not load-sharded"), "{err}");
    eprintln!(
        "open loop: {} requests; TTFT p50 one process {:.2} ms, four agents {:.2} ms",
        ma["requests"]["sent"],
        p50(&a, "ttft"),
        p50(&b, "ttft")
    );
}

#[test]
fn agents_of_a_closed_loop_split_its_slots_and_requests() {
    let _one = infer_bench_testkit::timing::exclusive();
    let rt = runtime();
    let script = Script {
        ttft: Duration::from_millis(15),
        itl: Duration::from_millis(3),
        ..Script::default()
    };
    let server = rt.block_on(ScriptedServer::start(script)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(
        dir.path(),
        &server.base_url(),
        "concurrency = 6\nwarmup_requests = 6\nrequests = 90\nruns = 2",
    );
    // Two runs that end by count: the timetable needs a slot.
    let no_slot = bin()
        .arg("run")
        .arg(&spec)
        .args(["--agent", "1/3", "--start-at", &start_in(5.0)])
        .arg("--out")
        .arg(dir.path().join("no-slot"))
        .output()
        .unwrap();
    let err = check(&no_slot, 2);
    assert!(err.contains("--slot"), "{err}");

    let shards = agents(&spec, dir.path(), 3, &["--slot", "4s"]);
    rt.block_on(server.wait_idle());
    let out = dir.path().join("merged");
    check(&merge(&shards, &out), 0);
    let r = read(&out);
    let p = &r["points"][0];
    assert_eq!(
        p["merged"]["requests"]["sent"], 180,
        "90 measured requests per run"
    );
    assert_eq!(
        p["merged"]["requests"]["warmup"], 12,
        "6 warm-up requests per run"
    );
    assert_eq!(p["merged"]["requests"]["succeeded"], 180);
    for run in p["runs"].as_array().unwrap() {
        assert_eq!(run["stats"]["requests"]["sent"], 90);
    }
    // Never more than the point's 6 slots in flight at the server.
    let recs = server.records();
    assert_eq!(recs.len(), 2 * (90 + 6));
    let mut edges: Vec<(std::time::Instant, i32)> = recs
        .iter()
        .flat_map(|r| [(r.received, 1), (r.finished.unwrap(), -1)])
        .collect();
    edges.sort_by_key(|e| (e.0, e.1));
    let mut now = 0;
    let mut most = 0;
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    assert!(most <= 6, "{most} requests in flight at once");
    assert!(p["merged"]["concurrency_max"].as_u64().unwrap() <= 6);
    // Run 2 of every agent started at its agreed instant, one slot later.
    let starts: Vec<String> = shards
        .iter()
        .map(|s| {
            read(s)["points"][0]["runs"][1]["shard"]["agreed_start"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(starts.windows(2).all(|w| w[0] == w[1]), "{starts:?}");
}

#[test]
fn point_shards_merge_into_the_unsharded_run() {
    // In virtual time: a point's numbers are its own (its seed, its
    // simulated clock), so the shards' merge is the whole run to the byte
    // whatever else the machine does.
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.toml");
    std::fs::write(
        &spec,
        r#"name = "sharded"
seed = 5
[targets.sim]
kind = "sim"
gpu = "h100-sxm"
[targets.sim.sim]
clock = "virtual"
[models.m]
preset = "llama-3.1-8b"
[models.m.precisions.bf16]
[models.m.precisions.fp8]
[workloads.w]
api = "completions"
input_tokens = 128
output_tokens = 16
ignore_eos = true
[load]
warmup_requests = 4
requests = 40
[matrix]
precision = ["bf16", "fp8"]
concurrency = [2, 8]
[validity]
percentile_sample_check = false
"#,
    )
    .unwrap();
    let run = |extra: &[&str], out: &Path| {
        check(
            &bin()
                .arg("run")
                .arg(&spec)
                .args(extra)
                .arg("--out")
                .arg(out)
                .output()
                .unwrap(),
            0,
        );
        out.to_path_buf()
    };
    let whole = run(&[], &dir.path().join("whole"));
    let one = run(&["--partition", "slice:1/2"], &dir.path().join("one"));
    let two = run(&["--partition", "slice:2/2"], &dir.path().join("two"));
    let out = dir.path().join("merged");
    check(&merge(&[two.clone(), one.clone()], &out), 0);
    let (w, m) = (read(&whole), read(&out));
    let ids = |r: &serde_json::Value| -> Vec<String> {
        r["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(&w), ids(&m), "the same points, in plan order");
    assert_eq!(ids(&m).len(), 4);
    assert!(m["complete"].as_bool().unwrap());
    assert!(m["partition"].is_null());
    for (a, b) in w["points"]
        .as_array()
        .unwrap()
        .iter()
        .zip(m["points"].as_array().unwrap())
    {
        assert_eq!(a["config"], b["config"]);
        assert_eq!(a["merged"]["requests"], b["merged"]["requests"]);
        assert_eq!(
            a["merged"]["tokens"]["output_total"],
            b["merged"]["tokens"]["output_total"]
        );
        for key in ["output_tokens_per_s", "latency_ms"] {
            assert_eq!(a["merged"][key], b["merged"][key], "{}: {key}", a["id"]);
        }
    }
    // Half of the shards: merged as incomplete, the other half's points
    // pending, and a failure (exit 3) unless --allow-partial says so.
    let half = dir.path().join("half");
    let err = check(&merge(std::slice::from_ref(&one), &half), 3);
    assert!(err.contains("incomplete"), "{err}");
    let h = read(&half);
    assert_eq!(h["complete"], false);
    let pending: Vec<String> = h["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    assert_eq!(pending, ids(&read(&two)), "slice 2's points are pending");
    assert_eq!(ids(&h), ids(&read(&one)));
    check(
        &bin()
            .args(["merge", "--allow-partial", "--out"])
            .arg(dir.path().join("half2"))
            .arg(&one)
            .output()
            .unwrap(),
        0,
    );
    // Shards of different splits do not add up to the plan.
    let quarter = run(&["--partition", "slice:2/4"], &dir.path().join("quarter"));
    let err = check(&merge(&[one.clone(), quarter], &dir.path().join("q")), 2);
    assert!(err.contains("different splits"), "{err}");
    // Overlapping shards, and shards of another spec, are refused.
    let err = check(
        &merge(&[one.clone(), whole.clone()], &dir.path().join("x")),
        2,
    );
    assert!(err.contains("must not overlap"), "{err}");
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("seed = 5", "seed = 6");
    std::fs::write(&spec, text).unwrap();
    let other = run(&["--partition", "slice:2/2"], &dir.path().join("other"));
    let err = check(&merge(&[one, other], &dir.path().join("y")), 2);
    assert!(err.contains("different specs"), "{err}");
}

#[test]
fn agents_refuse_what_they_cannot_share() {
    let _one = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(
        dir.path(),
        "http://127.0.0.1:9/v1",
        "concurrency = 1\nduration = \"1s\"",
    );
    let run = |extra: &[&str]| {
        bin()
            .arg("run")
            .arg(&spec)
            .args(extra)
            .arg("--out")
            .arg(dir.path().join("o"))
            .output()
            .unwrap()
    };
    // A start already past by this clock.
    let past =
        humantime::format_rfc3339_millis(SystemTime::now() - Duration::from_secs(30)).to_string();
    let err = check(&run(&["--agent", "1/2", "--start-at", &past]), 3);
    assert!(
        err.contains("in the past") && err.contains("clock"),
        "{err}"
    );
    // No agreed start.
    let err = check(&run(&["--agent", "1/2"]), 2);
    assert!(err.contains("--start-at"), "{err}");
    let err = check(&run(&["--agent", "3/2", "--start-at", &start_in(5.0)]), 2);
    assert!(err.contains("K/N"), "{err}");
    // The simulator runs inside each process: nothing to share.
    let sim = dir.path().join("sim.toml");
    std::fs::write(
        &sim,
        "name = \"s\"\n[targets.sim]\nkind = \"sim\"\ngpu = \"l40s\"\n[models.m]\npreset = \"llama-3.1-8b\"\n[workloads.w]\ninput_tokens = 8\noutput_tokens = 8\n[load]\nconcurrency = 1\nduration = \"1s\"\n",
    )
    .unwrap();
    let o = bin()
        .arg("run")
        .arg(&sim)
        .args(["--agent", "1/2", "--start-at", &start_in(5.0)])
        .output()
        .unwrap();
    let err = check(&o, 2);
    assert!(err.contains("sim-server"), "{err}");
}

#[test]
fn agents_share_one_simulator_served_on_its_own() {
    let _one = infer_bench_testkit::timing::exclusive();
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let sim_spec = dir.path().join("sim.toml");
    std::fs::write(
        &sim_spec,
        "name = \"served\"\nseed = 2\n[targets.sim]\nkind = \"sim\"\ngpu = \"h100-sxm\"\n[models.m]\npreset = \"llama-3.1-8b\"\n[workloads.w]\ninput_tokens = 64\noutput_tokens = 16\n[load]\nconcurrency = 4\nduration = \"1s\"\n",
    )
    .unwrap();
    let mut server = bin()
        .arg("sim-server")
        .arg(&sim_spec)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(server.stdout.take().unwrap()).lines();
    let base = lines.next().unwrap().unwrap();
    let metrics = lines.next().unwrap().unwrap();
    assert!(
        base.starts_with("http://127.0.0.1:") && base.ends_with("/v1"),
        "{base}"
    );
    assert!(metrics.ends_with("/metrics"), "{metrics}");
    let text = format!(
        "name = \"via-sim-server\"\nseed = 2\n[targets.served]\nkind = \"openai\"\nbase_url = \"{base}\"\nmetrics_url = \"{metrics}\"\n[models.m]\nserved_name = \"m\"\n[workloads.w]\napi = \"completions\"\ninput_tokens = 64\noutput_tokens = 16\nignore_eos = true\n[load]\nconcurrency = 4\nwarmup = \"300ms\"\nduration = \"1500ms\"\n[validity]\nmin_requests = 1\npercentile_sample_check = false\nmax_dispatch_lag_p99 = \"5ms\"\n"
    );
    let spec = dir.path().join("spec.toml");
    std::fs::write(&spec, text).unwrap();
    let shards = agents(&spec, dir.path(), 2, &[]);
    let out = dir.path().join("merged");
    check(&merge(&shards, &out), 0);
    server.kill().unwrap();
    let _ = server.wait();
    let r = read(&out);
    let m = merged(&r);
    assert!(m["requests"]["succeeded"].as_u64().unwrap() > 10, "{m}");
    assert_eq!(m["requests"]["failed"], 0);
    // Both agents' requests reached the one simulator: its counters saw them all.
    // The first agent's scrapes of the shared server count every agent's
    // tokens, not only its own half.
    let counters = &r["points"][0]["telemetry"]["server_metrics"]["counters"];
    let generated = counters["vllm:generation_tokens_total"]["delta"]
        .as_f64()
        .unwrap();
    let own = r["points"][0]["agents"][0]["succeeded"].as_f64().unwrap() * 16.0;
    assert!(
        generated > 1.5 * own,
        "the server generated {generated} tokens; agent 1 asked for {own}"
    );
}
