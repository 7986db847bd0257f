//! The request kinds beyond chat and completions, end to end: the real
//! binary sending OpenAI's Responses API (`api = "responses"`) and
//! Anthropic's Messages API (`api = "messages"`) to the scripted loopback
//! server, whose recorded write instants are the truth; to the built-in
//! simulator; and the key each carries. The real llama.cpp server's
//! `/v1/responses` and `/v1/messages` are in `tests/workloads_llama.rs`.

use std::process::Command;
use std::time::Duration;

use infer_bench_testkit::runtime;
use infer_bench_testkit::scripted::{Fault, Script, ScriptedServer, ServedRequest};
use serde_json::Value;

const APIS: [&str; 2] = ["responses", "messages"];

struct Ran {
    results: Value,
    lines: Vec<Value>,
    code: Option<i32>,
    stderr: String,
    records: Vec<ServedRequest>,
}

/// Runs `workload` (keys of `[workloads.w]`) against a scripted server
/// playing `script`, `requests` requests at concurrency 2, after 2 warm-up
/// requests; `target` adds keys to the target and `env` to the process.
fn run(script: Script, workload: &str, requests: u32, target: &str, env: &[(&str, &str)]) -> Ran {
    let rt = runtime();
    let server = rt.block_on(ScriptedServer::start(script)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spec = format!(
        "name = \"apis\"\nseed = 5\n\n[targets.s]\nkind = \"openai\"\nbase_url = \"{}\"\n{target}\n\n\
         [models.m]\nserved_name = \"scripted-model\"\n\n\
         [workloads.w]\n{workload}\n\n\
         [load]\nconcurrency = 2\nrequests = {requests}\nwarmup_requests = 2\n",
        server.base_url()
    );
    let path = dir.path().join("spec.toml");
    std::fs::write(&path, spec).unwrap();
    let out = dir.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .args(["run", "--requests", "-q"])
        .arg(&path)
        .arg("--out")
        .arg(&out)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    rt.block_on(server.wait_idle());
    let results = std::fs::read_to_string(out.join("results.json"))
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    let lines = std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["warmup"] == false)
        .collect();
    let mut records = server.records();
    records.sort_by_key(|r| r.seq);
    Ran {
        results,
        lines,
        code: o.status.code(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        records,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(mut xs: Vec<f64>, p: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let i = ((p / 100.0) * xs.len() as f64).ceil() as usize;
    xs[i.clamp(1, xs.len()) - 1]
}

fn latency(r: &Value, metric: &str, stat: &str) -> f64 {
    r["points"][0]["merged"]["latency_ms"][metric][stat]
        .as_f64()
        .unwrap_or_else(|| panic!("no {metric}.{stat} in {}", r["points"][0]["merged"]))
}

/// Client-measured against server-recorded, within `tol` ms.
fn close(what: &str, measured: f64, truth: f64, tol: f64) {
    assert!(
        (measured - truth).abs() <= tol,
        "{what}: measured {measured:.3} ms, truth {truth:.3} ms, tolerance {tol:.3} ms"
    );
}

/// The tolerance of a timing check: 1 ms in the optimized build (as CI runs
/// the suite), five times that unoptimized.
fn tolerance(ms: f64) -> f64 {
    if cfg!(debug_assertions) { ms * 5.0 } else { ms }
}

/// What this machine's other work added to a run's timings, in ms: how
/// late it wakes a working thread now (the server's writes wait for a
/// core too), and how late the client says it sent and read (its dispatch
/// lag and read delay, p99). Tens of microseconds on a quiet machine;
/// milliseconds beside busy loops, which are not the client's error.
fn machine_ms(r: &Value) -> f64 {
    let lag = infer_bench_testkit::timing::wake_lag(200).as_secs_f64() * 1e3;
    let own = |m: &str| {
        r["points"][0]["merged"]["latency_ms"][m]["p99"]
            .as_f64()
            .unwrap_or(0.0)
    };
    let (sent, read) = (own("dispatch_lag"), own("read_delay"));
    eprintln!(
        "wake-up lag p99 {lag:.3} ms, dispatch lag p99 {sent:.3} ms, read delay p99 {read:.3} ms"
    );
    lag + sent + read
}

#[test]
fn streamed_responses_and_messages_are_timed_against_the_servers_writes() {
    let _one_at_a_time = infer_bench_testkit::timing::exclusive();
    for api in APIS {
        let script = Script {
            ttft: Duration::from_millis(30),
            itl: Duration::from_millis(4),
            reasoning: true,
            reasoning_events: 3,
            reasoning_usage: true,
            ..Script::default()
        };
        let requests = 24;
        let ran = run(
            script,
            &format!("api = \"{api}\"\ninput_tokens = 16\noutput_tokens = 12"),
            requests,
            "",
            &[],
        );
        assert_eq!(ran.code, Some(0), "{api}: {}", ran.stderr);
        let r = &ran.results;
        let merged = &r["points"][0]["merged"];
        assert_eq!(merged["requests"]["succeeded"], requests, "{api}: {merged}");
        assert_eq!(
            merged["tokens"]["output_source"]["usage"], requests,
            "{api}: counts come from usage"
        );
        // Every request went to the API's own path with its own cap.
        let measured: Vec<_> = ran.records.iter().skip(2).collect();
        assert_eq!(measured.len(), requests as usize);
        for rec in &measured {
            assert_eq!(rec.max_tokens, 12, "{api}");
            assert_eq!(rec.status, 200, "{api}");
            assert!(rec.stream, "{api}");
            let cap = if api == "responses" {
                "max_output_tokens"
            } else {
                "max_tokens"
            };
            assert!(
                rec.fields.iter().any(|f| f == cap),
                "{api}: {:?}",
                rec.fields
            );
            assert!(
                !rec.fields.iter().any(|f| f == "stream_options"),
                "{api}: {:?}",
                rec.fields
            );
        }
        // Reasoning: three events of one token each, before the answer.
        // The Responses API reports them in usage; Anthropic's does not, so
        // they are counted from the events.
        assert_eq!(
            merged["tokens"]["reasoning_total"],
            3 * requests,
            "{api}: {merged}"
        );
        let source = if api == "responses" {
            "usage"
        } else {
            "events"
        };
        assert_eq!(
            merged["tokens"]["reasoning_source"][source], requests,
            "{api}: {merged}"
        );
        for l in &ran.lines {
            assert_eq!(l["output_tokens"], 12, "{api}: {l}");
            assert!(l["error"].is_null(), "{api}: {l}");
        }
        // The same metrics as chat's, from the same instants.
        let truth = |f: &dyn Fn(&ServedRequest) -> Vec<f64>, p: f64| {
            percentile(measured.iter().flat_map(|r| f(r)).collect(), p)
        };
        let tol = tolerance(1.0) + machine_ms(r);
        close(
            &format!("{api} TTFT from send p50"),
            latency(r, "ttft_from_send", "p50"),
            truth(&|x| x.true_ttft().map(ms).into_iter().collect(), 50.0),
            tol,
        );
        close(
            &format!("{api} ITL p50"),
            latency(r, "itl", "p50"),
            truth(&|x| x.true_gaps().into_iter().map(ms).collect(), 50.0),
            tol,
        );
        close(
            &format!("{api} TPOT p50"),
            latency(r, "tpot", "p50"),
            truth(&|x| x.true_tpot().map(ms).into_iter().collect(), 50.0),
            tol,
        );
        // Reasoning ends and the answer begins at the fourth content event
        // (timed from the scheduled send, so the dispatch lag adds to it).
        close(
            &format!("{api} answer begins p50"),
            latency(r, "ttft_answer", "p50"),
            truth(
                &|x| {
                    x.chunks
                        .get(3)
                        .map(|c| ms(c.at - x.received))
                        .into_iter()
                        .collect()
                },
                50.0,
            ) + latency(r, "dispatch_lag", "p50"),
            tol,
        );
    }
}

#[test]
fn whole_answers_are_timed_and_counted() {
    let _one_at_a_time = infer_bench_testkit::timing::exclusive();
    for api in APIS {
        let script = Script {
            ttft: Duration::from_millis(20),
            itl: Duration::from_millis(1),
            ..Script::default()
        };
        let requests = 16;
        let ran = run(
            script,
            &format!("api = \"{api}\"\ninput_tokens = 16\noutput_tokens = 9\nstream = false"),
            requests,
            "",
            &[],
        );
        assert_eq!(ran.code, Some(0), "{api}: {}", ran.stderr);
        let merged = &ran.results["points"][0]["merged"];
        assert_eq!(merged["requests"]["succeeded"], requests, "{api}: {merged}");
        assert_eq!(
            merged["tokens"]["output_source"]["usage"], requests,
            "{api}"
        );
        let measured: Vec<_> = ran.records.iter().skip(2).collect();
        assert!(
            measured.iter().all(|r| !r.stream && r.max_tokens == 9),
            "{api}"
        );
        let e2e = percentile(
            measured
                .iter()
                .filter_map(|r| r.true_e2e())
                .map(ms)
                .collect(),
            50.0,
        );
        close(
            &format!("{api} E2E p50"),
            latency(&ran.results, "e2e", "p50"),
            e2e,
            tolerance(1.0) + machine_ms(&ran.results),
        );
        for l in &ran.lines {
            assert_eq!(l["output_tokens"], 9, "{api}: {l}");
            assert!(
                l["response_id"]
                    .as_str()
                    .is_some_and(|id| id.contains("scripted")),
                "{api}: {l}"
            );
        }
    }
}

#[test]
fn each_api_carries_the_key_its_own_way() {
    // One at a time: this file's timing checks need the cores to themselves.
    let _one_at_a_time = infer_bench_testkit::timing::exclusive();
    let env = [("APIS_TEST_KEY", "sk-test-123")];
    let target = "api_key_env = \"APIS_TEST_KEY\"";
    let workload = |api: &str| format!("api = \"{api}\"\ninput_tokens = 8\noutput_tokens = 2");
    let ran = run(Script::fast(), &workload("messages"), 2, target, &env);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    for rec in &ran.records {
        let c = &rec.credentials;
        assert_eq!(c.x_api_key.as_deref(), Some("sk-test-123"));
        assert_eq!(c.anthropic_version.as_deref(), Some("2023-06-01"));
        assert_eq!(
            c.authorization, None,
            "Anthropic's key is not a bearer token"
        );
    }
    let ran = run(Script::fast(), &workload("responses"), 2, target, &env);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    for rec in &ran.records {
        let c = &rec.credentials;
        assert_eq!(c.authorization.as_deref(), Some("Bearer sk-test-123"));
        assert_eq!(
            (c.x_api_key.as_deref(), c.anthropic_version.as_deref()),
            (None, None)
        );
    }
    // The key is never written anywhere.
    assert!(!ran.stderr.contains("sk-test-123"));
}

#[test]
fn a_broken_answer_fails_in_its_class() {
    // One at a time: this file's timing checks need the cores to themselves.
    let _one_at_a_time = infer_bench_testkit::timing::exclusive();
    for api in APIS {
        for (fault, class) in [
            (Fault::StreamError { after_events: 2 }, "stream_error"),
            (Fault::MalformedEvent { after_events: 2 }, "malformed"),
            (Fault::TruncatedNoDone, "truncated"),
            (Fault::EmptyStream, "empty"),
        ] {
            let script = Script {
                fault,
                fault_every: 2,
                ..Script::fast()
            };
            let ran = run(
                script,
                &format!("api = \"{api}\"\ninput_tokens = 8\noutput_tokens = 6"),
                8,
                "",
                &[],
            );
            let merged = &ran.results["points"][0]["merged"];
            let failed = merged["requests"]["failed"].as_u64().unwrap_or(0);
            assert!(failed > 0, "{api} {fault:?}: {merged}\n{}", ran.stderr);
            assert_eq!(
                merged["errors"][class], failed,
                "{api} {fault:?}: every failure is {class}: {}",
                merged["errors"]
            );
            assert!(
                merged["requests"]["succeeded"].as_u64().unwrap() > 0,
                "{api} {fault:?}"
            );
        }
    }
}

#[test]
fn the_simulator_answers_both_apis() {
    // One at a time: this file's timing checks need the cores to themselves.
    let _one_at_a_time = infer_bench_testkit::timing::exclusive();
    for api in APIS {
        for stream in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let spec = format!(
                "name = \"apis-sim\"\nseed = 5\n\n[targets.sim]\nkind = \"sim\"\ngpu = \"h100-sxm\"\n\n\
                 [models.m]\npreset = \"llama-3.1-8b\"\n\n\
                 [workloads.w]\napi = \"{api}\"\ninput_tokens = 64\noutput_tokens = 16\nstream = {stream}\n\n\
                 [load]\nconcurrency = 4\nrequests = 12\n"
            );
            let path = dir.path().join("spec.toml");
            std::fs::write(&path, spec).unwrap();
            let out = dir.path().join("out");
            let o = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
                .args(["run", "-q"])
                .arg(&path)
                .arg("--out")
                .arg(&out)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{api} stream={stream}: {stderr}");
            let r: Value =
                serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap())
                    .unwrap();
            let merged = &r["points"][0]["merged"];
            assert_eq!(merged["requests"]["succeeded"], 12, "{api}: {merged}");
            assert_eq!(
                merged["tokens"]["output_source"]["usage"], 12,
                "{api}: {merged}"
            );
            assert_eq!(merged["tokens"]["output_total"], 12 * 16, "{api}: {merged}");
            if stream {
                assert!(latency(&r, "ttft", "p50") > 0.0, "{api}");
                assert!(latency(&r, "itl", "p50") > 0.0, "{api}");
            }
        }
    }
}

#[test]
fn validate_names_the_cap_each_api_takes() {
    // One at a time: this file's timing checks need the cores to themselves.
    let _one_at_a_time = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let spec = "name = \"caps\"\n\n[targets.sim]\nkind = \"sim\"\ngpu = \"h100-sxm\"\n\n\
        [models.m]\npreset = \"llama-3.1-8b\"\n\n\
        [workloads.w]\napi = \"responses\"\ninput_tokens = 8\noutput_tokens = 8\nmax_tokens_field = \"max_tokens\"\n\n\
        [load]\nconcurrency = 1\nrequests = 1\n";
    let path = dir.path().join("caps.toml");
    std::fs::write(&path, spec).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .arg("validate")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("caps.toml:14:20:"), "file:line: {stderr}");
    assert!(stderr.contains("workloads.w.max_tokens_field"), "{stderr}");
    assert!(
        stderr.contains("expected \"max_output_tokens\" for api = \"responses\""),
        "{stderr}"
    );
}

#[test]
fn conversations_send_the_history_back_by_each_api() {
    // One at a time: this file's timing checks need the cores to themselves.
    let _one_at_a_time = infer_bench_testkit::timing::exclusive();
    for api in APIS {
        let ran = run(
            Script::fast(),
            &format!(
                "api = \"{api}\"\ninput_tokens = 20\noutput_tokens = 8\nconversation = {{ turns = 3, think_time = \"10ms\" }}"
            ),
            6,
            "",
            &[],
        );
        assert_eq!(ran.code, Some(0), "{api}: {}", ran.stderr);
        let merged = &ran.results["points"][0]["merged"];
        assert_eq!(merged["requests"]["succeeded"], 6, "{api}: {merged}");
        // The measured sessions (two users, so two at a time), after the
        // warm-up's: each later turn carries the earlier prompts and the
        // replies the client read from the stream.
        let mut recs: Vec<_> = ran.records.iter().filter(|r| r.status == 200).collect();
        recs.sort_by_key(|r| r.received);
        let lens: Vec<u32> = recs[recs.len() - 6..]
            .iter()
            .map(|r| r.prompt_tokens)
            .collect();
        assert_eq!(
            lens.iter().filter(|&&n| n == 20).count(),
            2,
            "{api}: two first turns: {lens:?}"
        );
        assert_eq!(
            lens.iter().filter(|&&n| n > 40).count(),
            4,
            "{api}: history sent back: {lens:?}"
        );
        assert!(lens.iter().any(|&n| n > 60), "{api}: third turns: {lens:?}");
    }
}
