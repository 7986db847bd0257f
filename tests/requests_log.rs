//! `run --requests`: the request log joins with a server's own logs. The
//! real binary runs against the scripted loopback server, whose records
//! say which response ids it sent and how many content events each had;
//! the log's absolute times are held to the wall clock read around the run.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use infer_bench_testkit::runtime;
use infer_bench_testkit::scripted::{Script, ScriptedServer};

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn spec(base_url: &str, load: &str) -> String {
    format!(
        "name = \"requests-log\"\nseed = 3\n\n[targets.s]\nkind = \"openai\"\nbase_url = \"{base_url}\"\n\n\
         [models.m]\nserved_name = \"scripted-model\"\n\n\
         [workloads.w]\napi = \"completions\"\ninput_tokens = 8\noutput_tokens = 6\n\n[load]\n{load}\n"
    )
}

/// Runs `infer-bench run` with `args` before the spec; returns the log's
/// lines and the wall-clock bounds taken around the process.
fn run(text: &str, args: &[&str]) -> (Vec<serde_json::Value>, u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.toml");
    std::fs::write(&path, text).unwrap();
    let before = unix_ns();
    let out = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .arg("run")
        .args(args)
        .arg(&path)
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg("-q")
        .output()
        .unwrap();
    let after = unix_ns();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = std::fs::read_to_string(dir.path().join("out/requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (lines, before, after)
}

fn ms(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Runs the scripted server (TTFT 5 ms, ITL 2 ms) under a closed loop of
/// two runs with `--requests=events`; returns the lines, the wall-clock
/// bounds around the run, and the server's records: content events by the
/// response id it sent.
fn events_run() -> (Vec<serde_json::Value>, u64, u64, BTreeMap<String, usize>) {
    let rt = runtime();
    let server = rt
        .block_on(ScriptedServer::start(Script {
            ttft: Duration::from_millis(5),
            itl: Duration::from_millis(2),
            ..Script::default()
        }))
        .unwrap();
    let text = spec(
        &server.base_url(),
        "concurrency = 4\nrequests = 12\nruns = 2",
    );
    let (lines, before, after) = run(&text, &["--requests=events"]);
    rt.block_on(server.wait_idle());
    let served = server
        .records()
        .iter()
        .map(|r| (format!("cmpl-scripted-{}", r.seq), r.chunks.len()))
        .collect();
    (lines, before, after, served)
}

#[test]
fn request_lines_carry_unix_times_and_every_event() {
    let _one_at_a_time = infer_bench_testkit::timing::exclusive();
    let (lines, before, after, served) = events_run();
    assert_eq!(lines.len(), 24);
    assert_eq!(served.len(), 24);
    let mut t0s: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for l in &lines {
        assert!(l["error"].is_null(), "{l}");
        let events = l["events"].as_u64().unwrap() as usize;
        assert_eq!(events, 6, "{l}");

        let send = l["send_unix_ns"].as_u64().unwrap();
        let t0 = l["t0_unix_ns"].as_u64().unwrap();
        assert!(before <= t0 && t0 <= send && send <= after, "{l}");
        // The send instant is the run's start plus the line's own offsets.
        let offset_ms = ms(&l["sched_ms"]) + ms(&l["queue_ms"]) + ms(&l["dispatch_lag_ms"]);
        assert!(((send - t0) as f64 / 1e6 - offset_ms).abs() < 0.001, "{l}");
        t0s.entry(l["run"].as_u64().unwrap())
            .or_default()
            .insert(t0);

        let at: Vec<f64> = l["event_ms"]
            .as_array()
            .unwrap_or_else(|| panic!("no event_ms: {l}"))
            .iter()
            .map(ms)
            .collect();
        assert_eq!(at.len(), events, "{l}");
        assert!(at.windows(2).all(|w| w[0] <= w[1]), "{l}");
        // Events are the instants as they happened; TTFT leaves a
        // connect time out, as every latency does.
        let connect = ms(&l["connect_ms"]);
        assert!(connect >= 0.0, "{l}");
        assert!((at[0] - connect - ms(&l["ttft_ms"])).abs() < 0.001, "{l}");
        assert!(at[events - 1] <= ms(&l["done_ms"]), "{l}");
        assert_eq!(l["resends"], 0, "{l}");
    }
    // One t0 per run, and the second run starts after the first.
    assert_eq!(t0s.len(), 2);
    assert!(t0s.values().all(|s| s.len() == 1), "{t0s:?}");
    assert!(t0s[&0].first() < t0s[&1].first());
}

#[test]
fn request_lines_join_the_server_records_by_response_id() {
    let _one_at_a_time = infer_bench_testkit::timing::exclusive();
    let (lines, _, _, served) = events_run();
    let mut ids = BTreeSet::new();
    for l in &lines {
        let id = l["response_id"].as_str().unwrap_or_else(|| panic!("{l}"));
        assert!(ids.insert(id.to_string()), "{id} twice");
        let events = l["events"].as_u64().unwrap() as usize;
        assert_eq!(served.get(id), Some(&events), "{id}: the server's record");
    }
    assert_eq!(ids.len(), served.len(), "every response the server sent");
}

#[test]
fn plain_requests_keeps_its_lines_and_adds_no_events() {
    let _one_at_a_time = infer_bench_testkit::timing::exclusive();
    let rt = runtime();
    let server = rt.block_on(ScriptedServer::start(Script::fast())).unwrap();
    let text = spec(&server.base_url(), "concurrency = 2\nrequests = 4");
    // `--requests` before the spec: the spec is not taken for its value.
    let (lines, before, after) = run(&text, &["--requests"]);
    assert_eq!(lines.len(), 4);
    for l in &lines {
        assert!(l.get("event_ms").is_none(), "{l}");
        let send = l["send_unix_ns"].as_u64().unwrap();
        assert!(before <= send && send <= after, "{l}");
        for key in ["done_ms", "resends", "connect_ms", "ttft_ms", "sched_ms"] {
            assert!(l[key].is_number(), "{key}: {l}");
        }
    }
}
