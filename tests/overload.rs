//! High rates degrade, never run away: the real binary against the
//! built-in simulator (in real time: virtual time has no dispatch) at rates
//! no client can send. An open loop that cannot keep its rate counts what
//! it could not send and is INVALID, in memory bounded by what is in
//! flight (not by rate x duration), and Ctrl-C is honoured however busy
//! the engine is.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A spec with the simulator as its target and `rate` for `duration`.
fn spec(rate: &str, duration: &str) -> String {
    format!(
        r#"
name = "overload"
seed = 1
[targets.sim]
kind = "sim"
gpu = "l40s"
[models.m]
preset = "llama-3.1-8b"
[workloads.w]
api = "completions"
input_tokens = 16
output_tokens = 4
ignore_eos = true
[load]
rate = "{rate}"
duration = "{duration}"
timeouts = {{ connect = "5s", first_token = "10s", idle = "10s", total = "10s" }}
[validity]
percentile_sample_check = false
"#
    )
}

/// The address space the 1,000,000/s run may use. A run of this spec at
/// 1,000/s fits in a quarter of it (it passed under 512 MiB); on main,
/// before the fix, the run at 1,000,000/s grew past it within seconds and
/// aborted on a failed allocation (SIGABRT). `MALLOC_ARENA_MAX=2` keeps
/// glibc from reserving 64 MiB of address space per thread arena, so the
/// cap measures what the run allocates on any number of cores.
const ADDRESS_SPACE: u64 = 2 << 30;

/// Reads the results file of a run whose output folder is `out`.
fn results(out: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join("results.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_million_a_second_is_invalid_with_requests_not_sent_in_bounded_memory() {
    let _machine = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.toml");
    std::fs::write(&path, spec("1000000/s", "2s")).unwrap();
    let out = dir.path().join("out");
    let o = Command::new("prlimit")
        .arg(format!("--as={ADDRESS_SPACE}"))
        .arg(env!("CARGO_BIN_EXE_infer-bench"))
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(&out)
        .env("MALLOC_ARENA_MAX", "2")
        .output()
        .expect("prlimit (util-linux) runs");
    let stderr = String::from_utf8_lossy(&o.stderr);
    // Exit 0: the run finished and wrote its results; the point is
    // INVALID, which fails a run only with --strict. Not a signal.
    assert_eq!(o.status.code(), Some(0), "{:?}\n{stderr}", o.status);
    let r = results(&out);
    let p = &r["points"][0];
    assert_eq!(p["valid"], false, "{p:#}");
    let requests = &p["merged"]["requests"];
    let not_sent = requests["not_sent"].as_u64().unwrap_or(0);
    let sent = requests["sent"].as_u64().unwrap();
    assert!(not_sent > 0, "{requests}");
    assert!(sent > 0, "{requests}");
    // What was not sent is what the schedule asked for and the client
    // could not send: together no more than the arrivals of two seconds.
    assert!(sent + not_sent <= 2_000_000, "{requests}");
    let reasons = p["invalid_reasons"].as_array().unwrap();
    let reason = reasons
        .iter()
        .find(|r| {
            r["message"]
                .as_str()
                .is_some_and(|m| m.contains("could not keep the rate"))
        })
        .unwrap_or_else(|| panic!("{reasons:#?}"));
    assert_eq!(reason["kind"], "dispatch_lag");
    assert!(
        reason["message"]
            .as_str()
            .unwrap()
            .contains(&format!("{not_sent} of its arrivals were not sent")),
        "{reason}"
    );
}

/// Starts a run of `spec` at `rate` for a minute, its stderr read on a
/// thread of its own; returns once the simulator is serving (the signal
/// handlers are registered before it starts).
fn start(dir: &Path, rate: &str) -> Child {
    let path = dir.join("spec.toml");
    std::fs::write(&path, spec(rate, "60s")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(dir.join("out"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("infer-bench: {line}");
            if line.contains("server ready") {
                let _ = ready_tx.send(());
            }
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the simulator starts");
    // Let the pacer fall behind and the requests pile up: before the fix,
    // five seconds of 100,000/s left the engine's workers spinning in the
    // connection pool and both Ctrl-Cs unheard.
    std::thread::sleep(Duration::from_secs(5));
    child
}

fn interrupt(child: &Child) {
    // SAFETY: kill with a pid of our own child, not yet reaped.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0);
}

/// Waits for `child` to exit, at most `watchdog`; its exit code (`None`
/// for a signal). Kills it and fails past the watchdog.
fn exit_within(child: &mut Child, watchdog: Duration) -> Option<i32> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if started.elapsed() > watchdog {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running {watchdog:?} after the interruption");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Exit code 130: interrupted (docs/regression.md).
const EXIT_INTERRUPTED: i32 = 130;

/// Far longer than finishing up takes (it aborts what is in flight), far
/// shorter than the minute the run was asked for.
const WATCHDOG: Duration = Duration::from_secs(30);

#[test]
fn one_ctrl_c_at_a_hundred_thousand_a_second_finishes_up_and_keeps_the_results() {
    let _machine = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let mut child = start(dir.path(), "100000/s");
    interrupt(&child);
    assert_eq!(exit_within(&mut child, WATCHDOG), Some(EXIT_INTERRUPTED));
    let r = results(&dir.path().join("out"));
    assert_eq!(r["interrupted"], true, "{r:#}");
    assert_eq!(r["complete"], false);
}

#[test]
fn a_second_ctrl_c_at_a_hundred_thousand_a_second_quits_at_once() {
    let _machine = infer_bench_testkit::timing::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let mut child = start(dir.path(), "100000/s");
    interrupt(&child);
    std::thread::sleep(Duration::from_millis(100));
    interrupt(&child);
    assert_eq!(exit_within(&mut child, WATCHDOG), Some(EXIT_INTERRUPTED));
}
