//! Hostile servers, end to end: the real binary against
//! `infer_bench_testkit::hostile` servers that never end a line, a body or
//! a stream, drip bytes, ping a stalled stream, or answer a stream request
//! with HTML or JSON, and against a port that refuses connections. Each run
//! completes, every request is counted in its class, memory stays bounded
//! (the child's peak RSS, from `wait4`), idle timeouts fire at the idle
//! limit, and a refused port is not hammered.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use infer_bench_testkit::hostile::{HostileServer, Hostility, STATUS_CYCLE};
use infer_bench_testkit::reset::{ResetServer, Resets};
use infer_bench_testkit::runtime;

/// The most a run against an endless server may cost, in RSS.
const RSS_BOUND_KB: i64 = 64 * 1024;

/// A spec with one openai target at `url`.
fn spec(url: &str, load: &str) -> String {
    format!(
        "name = \"hostile-test\"\nseed = 3\n\n[targets.t]\nkind = \"openai\"\nbase_url = \"{url}\"\n\n[models.m]\nserved_name = \"hostile-model\"\n\n[workloads.w]\napi = \"completions\"\ninput_tokens = 8\noutput_tokens = 6\n\n[load]\n{load}\n"
    )
}

struct Run {
    results: serde_json::Value,
    code: Option<i32>,
    stderr: String,
    /// Peak resident set of the infer-bench process, in KiB.
    max_rss_kb: i64,
    elapsed: Duration,
}

impl Run {
    fn point(&self) -> &serde_json::Value {
        &self.results["points"][0]
    }

    /// The failure classes counted, and their total.
    fn errors(&self) -> (Vec<String>, u64) {
        let errors = self.point()["merged"]["errors"].as_object().unwrap();
        let total = errors.values().map(|v| v.as_u64().unwrap()).sum();
        (errors.keys().cloned().collect(), total)
    }

    /// The example message of a failure class.
    fn example(&self, class: &str) -> String {
        self.point()["merged"]["error_examples"][class]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// Runs the binary on `text` and reaps it with `wait4`, which gives this
/// child's own peak RSS (other tests' children do not mix in).
fn run_spec(text: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.toml");
    std::fs::write(&path, text).unwrap();
    let stderr_path = dir.path().join("stderr.txt");
    let started = Instant::now();
    // Reaped below by wait4, which `Child::wait` cannot stand in for.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(dir.path().join("out"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our own child's, not yet reaped; both pointers are valid.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as libc::pid_t, "wait4");
    let elapsed = started.elapsed();
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let results = std::fs::read_to_string(dir.path().join("out/results.json"))
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(serde_json::Value::Null);
    Run {
        results,
        code,
        stderr,
        max_rss_kb: usage.ru_maxrss,
        elapsed,
    }
}

/// Runs `requests` requests, one at a time, against a `mode` server with
/// the default limits; timeouts short enough that a client which ignored
/// its bounds would show it in time rather than hang for 10 minutes.
fn against(mode: Hostility, requests: u32, idle: &str) -> (Run, u64) {
    let rt = runtime();
    let server = rt.block_on(HostileServer::start(mode)).unwrap();
    let text = spec(
        &server.base_url(),
        &format!(
            "concurrency = 1\nrequests = {requests}\ntimeouts = {{ connect = \"2s\", first_token = \"5s\", idle = \"{idle}\", total = \"30s\" }}"
        ),
    );
    let run = run_spec(&text);
    eprintln!(
        "{mode:?}: exit {:?}, {:.2} s, peak RSS {} KiB, errors {:?}",
        run.code,
        run.elapsed.as_secs_f64(),
        run.max_rss_kb,
        run.errors()
    );
    (run, server.requests())
}

/// Every request failed in `class`, the run completed with exit 3 (nothing
/// succeeded), and the point is in the results.
fn all_failed_as(run: &Run, class: &str, requests: u64) {
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    let (classes, total) = run.errors();
    assert_eq!(classes, vec![class.to_string()], "{}", run.stderr);
    assert_eq!(total, requests);
    assert_eq!(run.point()["merged"]["requests"]["succeeded"], 0);
}

#[test]
fn an_endless_line_is_oversized_and_memory_stays_bounded() {
    let _t = infer_bench_testkit::timing::exclusive();
    let (run, served) = against(Hostility::EndlessLine, 3, "5s");
    all_failed_as(&run, "oversized", 3);
    assert_eq!(served, 3);
    let example = run.example("oversized");
    assert!(
        example.contains("line longer than 1048576 bytes")
            && example.contains("load.limits.max_line_bytes"),
        "{example}"
    );
    assert!(run.max_rss_kb < RSS_BOUND_KB, "{} KiB", run.max_rss_kb);
    assert!(run.elapsed < Duration::from_secs(20), "{:?}", run.elapsed);
}

#[test]
fn an_endless_error_body_is_read_only_in_part() {
    let _t = infer_bench_testkit::timing::exclusive();
    let (run, served) = against(Hostility::EndlessErrorBody, 3, "5s");
    all_failed_as(&run, "status_5xx", 3);
    assert_eq!(served, 3);
    let example = run.example("status_5xx");
    assert!(
        example.starts_with("HTTP 500: Internal Server Error"),
        "{example}"
    );
    assert!(example.len() < 400, "the message is short: {example}");
    assert!(run.max_rss_kb < RSS_BOUND_KB, "{} KiB", run.max_rss_kb);
    // Not seconds of reading per request.
    assert!(run.elapsed < Duration::from_secs(10), "{:?}", run.elapsed);
}

#[test]
fn an_endless_stream_of_events_is_oversized_and_memory_stays_bounded() {
    let _t = infer_bench_testkit::timing::exclusive();
    let (run, served) = against(Hostility::EndlessEvents, 2, "5s");
    all_failed_as(&run, "oversized", 2);
    assert_eq!(served, 2);
    let example = run.example("oversized");
    assert!(
        example.contains("load.limits.max_response_bytes")
            || example.contains("load.limits.max_events"),
        "{example}"
    );
    assert!(run.max_rss_kb < RSS_BOUND_KB, "{} KiB", run.max_rss_kb);
    assert!(run.elapsed < Duration::from_secs(25), "{:?}", run.elapsed);
}

/// The seconds in an idle timeout's message, `no event for X s (...)`.
fn idle_seconds(example: &str) -> f64 {
    let rest = example.strip_prefix("no event for ").expect(example);
    rest.split(' ').next().unwrap().parse().expect(example)
}

/// A server that sends one event and then drips or pings: each request
/// fails as `timeout_idle` at the idle limit, not at the total timeout.
fn idles_out(mode: Hostility) {
    let _t = infer_bench_testkit::timing::exclusive();
    let idle = 1.0;
    let (run, served) = against(mode, 2, "1s");
    all_failed_as(&run, "timeout_idle", 2);
    assert_eq!(served, 2);
    let example = run.example("timeout_idle");
    assert!(example.ends_with("(timeouts.idle = 1s)"), "{example}");
    let waited = idle_seconds(&example);
    assert!(
        (idle..3.0 * idle).contains(&waited),
        "{waited} s against idle {idle} s"
    );
    // Two requests, each about one idle period: far below the total (30 s).
    assert!(
        run.elapsed < Duration::from_secs_f64(2.0 * 3.0 * idle + 2.0),
        "{:?}",
        run.elapsed
    );
}

#[test]
fn a_drip_times_out_idle_at_the_idle_limit() {
    idles_out(Hostility::Drip {
        every: Duration::from_millis(100),
    });
}

#[test]
fn keepalive_pings_do_not_hide_a_stalled_stream() {
    idles_out(Hostility::Pings {
        every: Duration::from_millis(100),
    });
}

#[test]
fn an_html_page_is_not_sse_and_says_what_came_back() {
    let (run, _) = against(Hostility::Html, 2, "5s");
    all_failed_as(&run, "not_sse", 2);
    let example = run.example("not_sse");
    assert!(
        example.contains("\"text/html; charset=utf-8\"")
            && example.contains("not text/event-stream")
            && example.contains("it begins \"<!DOCTYPE html>\\n<html>"),
        "{example}"
    );
}

#[test]
fn a_whole_json_body_to_a_stream_request_is_not_sse() {
    let (run, _) = against(Hostility::Json, 2, "5s");
    all_failed_as(&run, "not_sse", 2);
    let example = run.example("not_sse");
    assert!(
        example.contains("application/json") && example.contains("{\\\"id\\\":\\\"cmpl-1\\\""),
        "{example}"
    );
}

#[test]
fn a_closed_loop_against_a_refused_port_backs_off_and_stops_early() {
    let _t = infer_bench_testkit::timing::exclusive();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let text = spec(
        &format!("http://127.0.0.1:{closed}/v1"),
        "concurrency = 4\nduration = \"30s\"",
    );
    let run = run_spec(&text);
    let sent = run.point()["merged"]["requests"]["sent"].as_u64().unwrap();
    eprintln!(
        "refused: exit {:?}, {:.2} s, {sent} requests sent",
        run.code,
        run.elapsed.as_secs_f64()
    );
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(
        run.stderr.contains("the run stopped early: ")
            && run
                .stderr
                .contains("requests could not connect to the server and none succeeded"),
        "{}",
        run.stderr
    );
    assert!(sent <= 16, "{sent} requests sent");
    assert!(run.elapsed < Duration::from_secs(10), "{:?}", run.elapsed);
    let p = run.point();
    assert_eq!(p["status"], "failed");
    let failure = p["failure"].as_str().unwrap();
    assert!(
        failure.contains("unreachable") && failure.contains("the run stopped early"),
        "{failure}"
    );
    let (classes, _) = run.errors();
    assert_eq!(classes, vec!["connect".to_string()]);
}

#[test]
fn limits_are_knobs_and_only_set_ones_are_recorded() {
    let rt = runtime();
    let server = rt
        .block_on(HostileServer::start(Hostility::EndlessEvents))
        .unwrap();
    let load = "concurrency = 1\nrequests = 2\ntimeouts = { total = \"30s\" }";
    let custom = run_spec(&spec(
        &server.base_url(),
        &format!("{load}\n\n[load.limits]\nmax_events = 100"),
    ));
    all_failed_as(&custom, "oversized", 2);
    assert_eq!(
        custom.example("oversized"),
        "the stream sent more than load.limits.max_events (100) events"
    );
    let limits = &custom.point()["config"]["load"]["limits"];
    assert_eq!(limits["max_events"], 100);
    assert_eq!(limits["max_line_bytes"], 1 << 20);
    // The defaults leave the config as it was before the table existed.
    let html = rt.block_on(HostileServer::start(Hostility::Html)).unwrap();
    let default = run_spec(&spec(&html.base_url(), load));
    let config = default.point()["config"]["load"].as_object().unwrap();
    assert!(!config.contains_key("limits"), "{config:?}");
}

#[test]
fn a_whole_json_body_is_fine_when_no_stream_was_asked_for() {
    let rt = runtime();
    let server = rt.block_on(HostileServer::start(Hostility::Json)).unwrap();
    let text = spec(&server.base_url(), "concurrency = 1\nrequests = 2").replace(
        "api = \"completions\"",
        "api = \"completions\"\nstream = false",
    );
    let run = run_spec(&text);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.point()["merged"]["requests"]["succeeded"], 2);
}

#[test]
fn http_errors_are_counted_by_class_and_by_code() {
    let (run, served) = against(Hostility::StatusCycle, 14, "5s");
    assert_eq!(run.code, Some(3), "nothing succeeded: {}", run.stderr);
    assert_eq!(served, 14);
    let m = &run.point()["merged"];
    assert_eq!(
        m["errors"],
        serde_json::json!({"status_4xx": 8, "status_429": 2, "status_5xx": 4}),
        "400, 401, 404, 422 refuse; 429 sheds load; 500, 503 fail"
    );
    for code in STATUS_CYCLE {
        let code = code.to_string();
        assert_eq!(m["http_status"][&code], 2, "HTTP {code}: {m}");
        let example = m["http_status_examples"][&code].as_str().unwrap();
        assert!(
            example.starts_with(&format!("HTTP {code}: ")) && example.contains("scripted HTTP"),
            "{example}"
        );
    }
    assert!(
        run.example("status_429").starts_with("HTTP 429"),
        "{}",
        run.example("status_429")
    );
}

/// Runs `requests` requests, one at a time, against a reset server.
fn against_resets(mode: Resets, requests: u32) -> (Run, ResetServer) {
    let server = ResetServer::start(mode).unwrap();
    let text = spec(
        &server.base_url(),
        &format!(
            "concurrency = 1\nrequests = {requests}\ntimeouts = {{ connect = \"2s\", first_token = \"5s\", idle = \"5s\", total = \"30s\" }}"
        ),
    );
    let text = text.replace("hostile-model", "reset-model");
    (run_spec(&text), server)
}

#[test]
fn a_kept_alive_connection_reset_before_any_byte_is_sent_again() {
    let (run, server) = against_resets(Resets::SecondOnConnection, 6);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let m = &run.point()["merged"];
    assert_eq!(m["requests"]["succeeded"], 6, "{m}");
    assert_eq!(m["requests"]["failed"], 0, "{m}");
    // Every request after the first met a pooled connection the server
    // then reset, and was sent once more on a fresh one.
    let resent = m["requests"]["resent"].as_u64().unwrap();
    assert_eq!(resent, server.resets(), "{m}");
    assert!(resent >= 1, "the pool reused a connection: {m}");
    assert_eq!(server.answered(), 6);
}

#[test]
fn a_reset_before_any_byte_is_a_connect_failure_not_truncated() {
    let (run, server) = against_resets(Resets::Always, 3);
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    let (classes, total) = run.errors();
    assert_eq!(classes, vec!["connect".to_string()], "{}", run.stderr);
    // A closed loop that cannot reach its server may stop early.
    assert!((1..=3).contains(&total), "{total}");
    // Each failed request was tried twice: once, and once more.
    assert_eq!(server.resets(), 2 * total, "{}", run.stderr);
    assert_eq!(server.answered(), 0);
    let example = run.example("connect");
    assert!(example.to_lowercase().contains("reset"), "{example}");
}

/// The quality phase against hostile servers: an endless line and an
/// endless error body answer every quality prompt. Each prompt is read
/// only up to its bound and counted in its class, the run completes within
/// the memory bound, and the server's agreement with the reference (the
/// simulator in virtual time) is 0%: prompts it failed count as answers
/// different from the reference's, never as no evidence.
#[test]
fn quality_prompts_against_endless_answers_are_bounded_and_count_against_the_server() {
    for (mode, class) in [
        (Hostility::EndlessLine, "too_large"),
        (Hostility::EndlessErrorBody, "status_500"),
    ] {
        let rt = runtime();
        let server = rt.block_on(HostileServer::start(mode)).unwrap();
        let text = format!(
            "name = \"hostile-quality\"\nseed = 3\n\n[targets.t]\nkind = \"openai\"\nbase_url = \"{}\"\n\n\
             [targets.ref]\nkind = \"sim\"\ngpu = \"h100-sxm\"\nsim = {{ clock = \"virtual\" }}\n\n\
             [models.m]\npreset = \"llama-3.1-8b\"\nserved_name = \"hostile-model\"\n\n\
             [workloads.w]\napi = \"completions\"\ninput_tokens = 8\noutput_tokens = 6\n\n\
             [load]\nconcurrency = 1\nrequests = 2\ntimeouts = {{ connect = \"2s\", first_token = \"5s\", idle = \"2s\", total = \"20s\" }}\n\n\
             [matrix]\ntarget = [\"ref\", \"t\"]\n\n\
             [quality]\nreference_target = \"ref\"\nprompts = 20\nmax_tokens = 16\nconcurrency = 4\n",
            server.base_url()
        );
        let run = run_spec(&text);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        assert!(
            run.max_rss_kb < RSS_BOUND_KB,
            "{mode:?}: peak RSS {} KiB",
            run.max_rss_kb
        );
        let t = run.results["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["config"]["target"]["name"] == "t")
            .unwrap();
        let q = &t["quality"];
        assert_eq!(q["answered"], 0, "{mode:?}: {q}");
        assert_eq!(q["failures"][class], 20, "{mode:?}: {q}");
        assert!(q["failure_example"].as_str().is_some(), "{q}");
        assert_eq!(q["agreement"]["compared"], 20, "{q}");
        assert_eq!(q["agreement"]["exact_match"], 0.0, "{q}");
    }
}
