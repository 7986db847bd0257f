//! `self-bench`: whether this client, on this machine, measures truly and
//! what it costs. A scripted OpenAI-compatible server ([`server`]) runs in
//! a separate process (its CPU is not counted) and writes every event on
//! its script to within a fraction of a millisecond; this process runs
//! ordinary points against it through the same engine `run` uses. Each
//! check is a row of one table, with a verdict:
//!
//! - `unpaced`: CPU per SSE event with the server writing as fast as it
//!   can: the best case, nothing to hold;
//! - `paced`: 256 streams at 10 ms ITL, the client's TTFT and ITL held to
//!   the script, and its CPU per event;
//! - `floor`: the same load driven by a minimal one-thread reqwest +
//!   serde_json client ([`floor`]) in a process of its own, its CPU per
//!   event measured the same way, and the ratio of the two (target 1.3x);
//! - `idle`: 1 request/s, this process's CPU over wall time in the middle
//!   of the run: a client that burns CPU while idle shows here;
//! - `streams`, `rate`: ladders of concurrent streams and open-loop rates,
//!   each rung held or not; the first rung that fails above one that held
//!   is the machine's limit, not a failure.
//!
//! A row holds when every request succeeded, the client's TTFT and ITL
//! p50 and p99 are within [`tolerance_ms`] of the script and its dispatch
//! lag p99 is under [`LAG_BUDGET_MS`]. The command fails (exit 1) when a
//! row does not.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod floor;
mod server;

pub use floor::{FloorLoad, FloorReport};

use crate::error::{Error, Result};
use crate::export::table::{Align, Table};
use crate::plan::Plan;
use crate::results::{PointResult, Results};
use crate::run::engine::Interrupt;
use crate::run::{Progress, RunOptions, run_plan};

/// The checks `self-bench` runs, in order (`--only` picks some).
pub const CHECKS: &[&str] = &["unpaced", "paced", "floor", "idle", "streams", "rate"];

/// A check that always fails (the server writes every 20 ms, the check
/// expects 2 ms): for tests of the verdict and the exit status; run only
/// when named.
pub const IMPOSSIBLE: &str = "impossible";

/// The most dispatch lag (p99) a row may show, ms.
pub const LAG_BUDGET_MS: f64 = 1.0;

/// How far the client's TTFT or ITL (p50 and p99) may be from the
/// script: 1 ms, or 1% of the scripted value where that is more.
pub fn tolerance_ms(scripted_ms: f64) -> f64 {
    (scripted_ms * 0.01).max(1.0)
}

/// The target for the client's CPU per event against the floor's.
pub const FLOOR_RATIO_TARGET: f64 = 1.3;

/// The idle check's budget: this process's CPU over wall time at 1
/// request/s, percent of one core.
pub const IDLE_BUDGET_PERCENT: f64 = 0.5;

/// What `self-bench` found: the table, and whether a check failed.
pub struct Report {
    pub text: String,
    pub failed: bool,
}

/// Serves the scripted server until stdin closes; prints its base URL
/// first. A line `stats` on stdin prints how late its writes were since
/// the last such line ([`server::TruthStats`], one JSON line).
pub fn serve_scripted(ttft_ms: u64, itl_ms: u64) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Infra(e.to_string()))?;
    let _guard = rt.enter();
    let truth = Arc::new(server::Truth::default());
    let server = rt
        .block_on(server::start(
            Duration::from_millis(ttft_ms),
            Duration::from_millis(itl_ms),
            truth.clone(),
        ))
        .map_err(|e| Error::Infra(format!("cannot start the scripted server: {e}")))?;
    println!("{}", server.base_url());
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let stdin = std::io::stdin();
    while stdin
        .lock()
        .read_line(&mut line)
        .map(|n| n > 0)
        .unwrap_or(false)
    {
        if line.trim() == "stats" {
            let stats = serde_json::to_string(&truth.take()).expect("serializes");
            println!("{stats}");
            let _ = std::io::stdout().flush();
        }
        line.clear();
    }
    Ok(())
}

/// Runs the floor client (in its own process) and prints its report as
/// one JSON line.
pub fn serve_floor(load: &FloorLoad) -> Result<()> {
    let report = floor::run(load).map_err(Error::Infra)?;
    println!("{}", serde_json::to_string(&report).expect("serializes"));
    Ok(())
}

/// The server process, stopped when dropped.
struct ServerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    base_url: String,
}

impl ServerProcess {
    fn start(ttft_ms: u64, itl_ms: u64) -> Result<ServerProcess> {
        let mut child = Command::new(this_exe()?)
            .args([
                "scripted-server",
                "--ttft-ms",
                &ttft_ms.to_string(),
                "--itl-ms",
                &itl_ms.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Error::Infra(format!("cannot start the scripted server: {e}")))?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| Error::Infra("no stdout from the scripted server".into()))?;
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .map_err(|e| Error::Infra(e.to_string()))?;
        let base_url = line.trim().to_string();
        if !base_url.starts_with("http://") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::Infra(format!(
                "the scripted server did not start: {base_url}"
            )));
        }
        Ok(ServerProcess {
            child,
            stdin,
            stdout,
            base_url,
        })
    }

    /// What the server wrote, when, since the last call.
    fn truth(&mut self) -> server::TruthStats {
        let mut line = String::new();
        let asked = self
            .stdin
            .as_mut()
            .is_some_and(|s| s.write_all(b"stats\n").and_then(|_| s.flush()).is_ok());
        if asked && self.stdout.read_line(&mut line).is_ok() {
            serde_json::from_str(&line).unwrap_or_default()
        } else {
            server::TruthStats::default()
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn this_exe() -> Result<std::path::PathBuf> {
    std::env::current_exe().map_err(|e| Error::Infra(format!("cannot find this executable: {e}")))
}

/// This process's CPU time so far (every thread), seconds.
pub(crate) fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills a plain struct we own.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(u.ru_utime) + tv(u.ru_stime)
    }
}

/// CPU time of each thread of this process so far, ns, by (id, name)
/// (Linux's schedstat; empty elsewhere): where an idle process's CPU goes.
fn thread_cpu_ns() -> std::collections::BTreeMap<(u32, String), u64> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in dir.flatten() {
        let read = |f: &str| std::fs::read_to_string(e.path().join(f)).ok();
        let (Some(stat), Some(name)) = (read("schedstat"), read("comm")) else {
            continue;
        };
        let ns = stat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        let tid = e.file_name().to_string_lossy().parse().unwrap_or(0);
        out.insert((tid, name.trim().to_string()), ns);
    }
    out
}

/// CPU over a window of wall time inside a run, read by a thread that
/// sleeps between its two readings.
struct WindowMeter {
    thread: std::thread::JoinHandle<Window>,
}

struct Window {
    cpu_s: f64,
    wall_s: f64,
    /// The threads that spent the most, with their share of a core (%).
    top: Vec<(String, f64)>,
}

impl WindowMeter {
    fn start(from: Duration, to: Duration) -> WindowMeter {
        let t0 = Instant::now();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(from);
            let (c0, w0, k0) = (cpu_seconds(), Instant::now(), thread_cpu_ns());
            std::thread::sleep((t0 + to).saturating_duration_since(Instant::now()));
            let (c1, wall_s, k1) = (cpu_seconds(), w0.elapsed().as_secs_f64(), thread_cpu_ns());
            let mut top: Vec<(String, f64)> = k1
                .iter()
                .map(|(k, t1)| {
                    let t0 = k0.get(k).copied().unwrap_or(0);
                    (
                        k.1.clone(),
                        (t1 - t0.min(*t1)) as f64 / 1e9 / wall_s * 100.0,
                    )
                })
                .filter(|(_, p)| *p >= 0.005)
                .collect();
            top.sort_by(|a, b| b.1.total_cmp(&a.1));
            top.truncate(4);
            Window {
                cpu_s: c1 - c0,
                wall_s,
                top,
            }
        });
        WindowMeter { thread }
    }

    fn finish(self) -> Option<Window> {
        self.thread.join().ok()
    }
}

struct Measured {
    point: PointResult,
    cpu_s: f64,
}

/// Runs one point of the engine against `base_url`, measuring this
/// process's CPU around it.
fn run_point(
    rt: &tokio::runtime::Runtime,
    base_url: &str,
    load: &str,
    output_tokens: u32,
) -> Result<Measured> {
    let text = format!(
        "name = \"self-bench\"\nseed = 1\n[targets.s]\nkind = \"openai\"\nbase_url = \"{base_url}\"\n\
         [models.m]\nserved_name = \"{}\"\n\
         [workloads.w]\napi = \"completions\"\ninput_tokens = 16\noutput_tokens = {output_tokens}\n\
         [load]\n{load}\ntimeouts = {{ connect = \"10s\", first_token = \"60s\", idle = \"30s\", total = \"5m\" }}\n\
         [validity]\npercentile_sample_check = false\n",
        server::MODEL
    );
    let spec = crate::spec::compile("<self-bench>", &text, std::path::Path::new("."))?;
    let plan = Plan::build(&spec)?;
    let dir = tempfile::tempdir().map_err(|e| Error::io(std::env::temp_dir(), e))?;
    let opts = RunOptions {
        out_dir: dir.path().to_path_buf(),
        requests_jsonl: false,
        request_events: false,
        progress: Progress::Quiet,
        partition: None,
        agent: None,
        start_at: None,
        slot: None,
        slow_client: None,
    };
    let cpu0 = cpu_seconds();
    let results: Results = run_plan(&spec, &plan, &opts, rt, Arc::new(Interrupt::default()))?;
    let cpu_s = cpu_seconds() - cpu0;
    let point = results
        .points
        .into_iter()
        .next()
        .ok_or_else(|| Error::Infra("the self-bench point did not run".into()))?;
    Ok(Measured { point, cpu_s })
}

/// Runs the floor client in a process of its own.
fn run_floor(load: &FloorLoad) -> Result<FloorReport> {
    let out = Command::new(this_exe()?)
        .args([
            "self-bench-floor",
            "--url",
            &load.base_url,
            "--streams",
            &load.streams.to_string(),
            "--warmup",
            &load.warmup.to_string(),
            "--requests",
            &load.requests.to_string(),
            "--output-tokens",
            &load.output_tokens.to_string(),
        ])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| Error::Infra(format!("cannot start the floor client: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).map_err(|_| {
        Error::Infra(format!(
            "the floor client did not report ({}): {}",
            out.status,
            text.trim()
        ))
    })
}

/// The timing a row's server was scripted with, ms.
#[derive(Clone, Copy)]
struct Script {
    ttft_ms: f64,
    itl_ms: f64,
}

/// How a row came out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Pass,
    Fail,
    /// A ladder's first rung that failed above one that held.
    Limit,
    /// A measurement with nothing to hold.
    Info,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::Limit => "limit",
            Verdict::Info => "-",
        }
    }
}

struct Row {
    check: String,
    load: String,
    ttft: String,
    itl: String,
    lag: String,
    cpu: String,
    verdict: Verdict,
    why: String,
}

fn pair(a: f64, b: f64) -> String {
    if a.is_nan() {
        "-".into()
    } else {
        format!("{a:.2} / {b:.2}")
    }
}

fn summary(p: &PointResult, name: &str) -> (f64, f64) {
    p.merged
        .latency_ms
        .get(name)
        .filter(|s| s.count > 0)
        .map(|s| (s.p50, s.p99))
        .unwrap_or((f64::NAN, f64::NAN))
}

/// Whether `got` is within `tol` of `want` (never for a missing figure).
fn within(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol
}

/// Why a point did not hold its script (empty when it did): failed
/// requests, TTFT or ITL off the script (with what the server itself
/// wrote, and whose the error was), dispatch lag over budget, an open
/// loop's send rate off its schedule.
fn missed(
    p: &PointResult,
    script: Option<Script>,
    rate: Option<f64>,
    truth: &server::TruthStats,
) -> Vec<String> {
    let mut why = Vec::new();
    let c = &p.merged.requests;
    if c.failed > 0 || c.succeeded == 0 || c.unfinished > 0 {
        let classes: Vec<String> = p
            .merged
            .errors
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        why.push(format!(
            "{} of {} requests failed{}",
            c.failed + c.unfinished,
            c.sent,
            if classes.is_empty() {
                String::new()
            } else {
                format!(" ({})", classes.join(", "))
            }
        ));
    }
    if let Some(s) = script {
        let known = truth.events > 0;
        let (mut off, mut client_off) = (Vec::new(), false);
        for (name, label, want, served) in [
            (
                "ttft",
                "TTFT",
                s.ttft_ms,
                (truth.ttft_p50_ms, truth.ttft_p99_ms),
            ),
            ("itl", "ITL", s.itl_ms, (truth.itl_p50_ms, truth.itl_p99_ms)),
        ] {
            let tol = tolerance_ms(want);
            let (p50, p99) = summary(p, name);
            for (q, got, wrote) in [("p50", p50, served.0), ("p99", p99, served.1)] {
                if !within(got, want, tol) {
                    let mut text = format!("{label} {q} {got:.2} ms, scripted {want} ± {tol}");
                    if known {
                        text.push_str(&format!(" (server wrote {wrote:.2})"));
                        client_off |= !within(got, wrote, tol);
                    }
                    off.push(text);
                }
            }
        }
        if !off.is_empty() {
            why.push(off.join("; "));
            if known {
                why.push(
                    if client_off {
                        "the client was off what the server wrote"
                    } else {
                        "the server fell behind its script; the client was within tolerance of what it wrote"
                    }
                    .into(),
                );
            }
        }
    }
    let (_, lag) = summary(p, "dispatch_lag");
    if (script.is_some() || rate.is_some()) && lag > LAG_BUDGET_MS {
        why.push(format!(
            "dispatch lag p99 {lag:.2} ms over {LAG_BUDGET_MS} ms"
        ));
    }
    if let Some(r) = rate {
        let sent = p.merged.achieved_send_rate.unwrap_or(0.0);
        if (sent / r - 1.0).abs() > 0.01 {
            why.push(format!("sent at {sent:.0}/s of {r:.0}/s"));
        }
    }
    why
}

/// The row of an engine point held to `script`.
fn point_row(
    check: &str,
    load: String,
    m: &Measured,
    events: u64,
    script: Option<Script>,
    rate: Option<f64>,
    truth: server::TruthStats,
) -> Row {
    let why = missed(&m.point, script, rate, &truth);
    let (t50, t99) = summary(&m.point, "ttft");
    let (i50, i99) = summary(&m.point, "itl");
    let (_, lag) = summary(&m.point, "dispatch_lag");
    let verdict = match (script.is_some() || rate.is_some(), why.is_empty()) {
        (_, false) => Verdict::Fail,
        (true, true) => Verdict::Pass,
        (false, true) => Verdict::Info,
    };
    let mut note = why.join("; ");
    if script.is_some() && truth.events > 0 && note.is_empty() {
        note = format!(
            "server wrote TTFT {:.2} / {:.2}, ITL {:.2} / {:.2}",
            truth.ttft_p50_ms, truth.ttft_p99_ms, truth.itl_p50_ms, truth.itl_p99_ms
        );
    }
    Row {
        check: check.into(),
        load,
        ttft: pair(t50, t99),
        itl: pair(i50, i99),
        lag: if lag.is_nan() {
            "-".into()
        } else {
            format!("{lag:.2}")
        },
        cpu: if events > 0 {
            format!("{:.2} us/event", m.cpu_s / events as f64 * 1e6)
        } else {
            "-".into()
        },
        verdict,
        why: note,
    }
}

/// Output events a point's requests carried (every request, warm-up
/// included, gets `tokens` events from the scripted server).
fn events_of(p: &PointResult, tokens: u32) -> u64 {
    (p.merged.requests.succeeded + p.merged.requests.warmup) * u64::from(tokens)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Sizes of the checks: quick (about 40 s) or full (about 3 minutes).
struct Sizes {
    unpaced: (u32, u32, u32),
    paced_requests: u32,
    paced_pairs: usize,
    idle_s: u64,
    streams: &'static [u32],
    streams_s: u64,
    rates: &'static [u32],
    rate_s: u64,
}

const QUICK: Sizes = Sizes {
    unpaced: (32, 256, 256),
    paced_requests: 512,
    paced_pairs: 1,
    idle_s: 8,
    streams: &[1000, 2000],
    streams_s: 3,
    rates: &[250, 500, 1000],
    rate_s: 2,
};

const FULL: Sizes = Sizes {
    unpaced: (64, 1024, 1024),
    paced_requests: 1024,
    paced_pairs: 3,
    idle_s: 15,
    streams: &[1000, 2000, 5000, 10000],
    streams_s: 5,
    rates: &[250, 500, 1000, 2000, 4000],
    rate_s: 4,
};

/// The paced load: streams, scripted TTFT and ITL (ms), output tokens.
const PACED: (u32, u64, u64, u32) = (256, 10, 10, 100);

/// Runs the checks (`only` empty: all of [`CHECKS`]) and returns the table.
pub fn run(quick: bool, only: &[String]) -> Result<Report> {
    for name in only {
        if !CHECKS.contains(&name.as_str()) && name != IMPOSSIBLE {
            return Err(Error::Usage(format!(
                "self-bench --only: no check `{name}`; the checks are {}",
                CHECKS.join(", ")
            )));
        }
    }
    let wanted = |name: &str| {
        if only.is_empty() {
            name != IMPOSSIBLE
        } else {
            only.iter().any(|o| o == name)
        }
    };
    let sizes = if quick { &QUICK } else { &FULL };
    let fds = crate::run::raise_fd_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Infra(e.to_string()))?;
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mut rows: Vec<Row> = Vec::new();
    let mut notes: Vec<String> = Vec::new();

    if wanted("unpaced") {
        let mut fast = ServerProcess::start(0, 0)?;
        let (streams, tokens, requests) = sizes.unpaced;
        let m = run_point(
            &rt,
            &fast.base_url,
            &format!("concurrency = {streams}\nrequests = {requests}"),
            tokens,
        )?;
        let events = events_of(&m.point, tokens);
        let mut row = point_row(
            "unpaced",
            format!("{streams} streams x {tokens} tokens, no delays"),
            &m,
            events,
            None,
            None,
            fast.truth(),
        );
        if row.why.is_empty() {
            row.why = format!(
                "best case: {:.0} events per CPU-second, {:.0} us per request",
                events as f64 / m.cpu_s,
                m.cpu_s / m.point.merged.requests.sent.max(1) as f64 * 1e6
            );
        }
        rows.push(row);
    }

    if wanted("paced") || wanted("floor") {
        let (streams, ttft, itl, tokens) = PACED;
        let script = Script {
            ttft_ms: ttft as f64,
            itl_ms: itl as f64,
        };
        let load = format!("{streams} streams, TTFT {ttft} ms, ITL {itl} ms, {tokens} tokens");
        let mut paced = ServerProcess::start(ttft, itl)?;
        let floor_load = FloorLoad {
            base_url: paced.base_url.clone(),
            streams,
            warmup: streams,
            requests: sizes.paced_requests,
            output_tokens: tokens,
        };
        let (mut ours, mut floors) = (Vec::new(), Vec::new());
        let mut first: Option<Row> = None;
        // Later runs that failed: (run, why).
        let mut failed_runs: Vec<(usize, String)> = Vec::new();
        let mut floor_report: Option<FloorReport> = None;
        for pair_i in 0..sizes.paced_pairs {
            {
                let m = run_point(
                    &rt,
                    &paced.base_url,
                    &format!(
                        "concurrency = {streams}\nwarmup_requests = {streams}\nrequests = {}",
                        sizes.paced_requests
                    ),
                    tokens,
                )?;
                let events = events_of(&m.point, tokens);
                ours.push(m.cpu_s / events.max(1) as f64 * 1e6);
                let row = point_row(
                    "paced",
                    load.clone(),
                    &m,
                    events,
                    Some(script),
                    None,
                    paced.truth(),
                );
                if row.verdict == Verdict::Fail && first.is_some() {
                    failed_runs.push((pair_i + 1, row.why.clone()));
                }
                first.get_or_insert(row);
            }
            if wanted("floor") {
                let f = run_floor(&floor_load)?;
                floors.push(f.cpu_s / f.events.max(1) as f64 * 1e6);
                let _ = paced.truth();
                floor_report.get_or_insert(f);
            }
        }
        let ours_us = median(ours);
        if let Some(mut row) = first {
            if sizes.paced_pairs > 1 {
                row.cpu = format!("{ours_us:.2} us/event, median of {}", sizes.paced_pairs);
            }
            if let Some((run, why)) = failed_runs.first() {
                let runs: Vec<String> = failed_runs.iter().map(|(r, _)| r.to_string()).collect();
                if row.verdict == Verdict::Fail {
                    row.why = format!("run 1: {}; runs {} failed too", row.why, runs.join(", "));
                } else {
                    row.verdict = Verdict::Fail;
                    row.why = format!("run {run}: {why} (failed: runs {})", runs.join(", "));
                }
            }
            // The floor's ratio is against this row: it shows with it.
            rows.push(row);
        }
        if let Some(f) = floor_report {
            let floor_us = median(floors);
            let ratio = ours_us / floor_us;
            let mut why = Vec::new();
            if f.failed > 0 {
                why.push(format!(
                    "{} of {} requests failed ({})",
                    f.failed,
                    f.sent,
                    f.error.as_deref().unwrap_or("no reason")
                ));
            }
            if ratio > FLOOR_RATIO_TARGET {
                why.push(format!(
                    "infer-bench spends {ratio:.2}x the floor's CPU per event (target {FLOOR_RATIO_TARGET}x)"
                ));
            }
            let verdict = if why.is_empty() {
                Verdict::Pass
            } else {
                Verdict::Fail
            };
            if why.is_empty() {
                why.push(format!(
                    "infer-bench / floor = {ratio:.2}x (target {FLOOR_RATIO_TARGET}x)"
                ));
            }
            rows.push(Row {
                check: "floor".into(),
                load: "the same, reqwest + serde_json, 1 thread".into(),
                ttft: pair(
                    f.ttft_p50_ms.unwrap_or(f64::NAN),
                    f.ttft_p99_ms.unwrap_or(f64::NAN),
                ),
                itl: pair(
                    f.itl_p50_ms.unwrap_or(f64::NAN),
                    f.itl_p99_ms.unwrap_or(f64::NAN),
                ),
                lag: "-".into(),
                cpu: if sizes.paced_pairs > 1 {
                    format!("{floor_us:.2} us/event, median of {}", sizes.paced_pairs)
                } else {
                    format!("{floor_us:.2} us/event")
                },
                verdict,
                why: why.join("; "),
            });
        }
        drop(paced);
    }

    if wanted("idle") {
        let (ttft, itl, tokens) = (10, 10, 8);
        let mut server = ServerProcess::start(ttft, itl)?;
        let d = sizes.idle_s;
        // Measured from 1.5 s in to 1.5 s before the end: inside the run,
        // away from the point's setup and its results.
        let meter = WindowMeter::start(
            Duration::from_millis(1500),
            Duration::from_millis(d * 1000 - 1500),
        );
        let m = run_point(
            &rt,
            &server.base_url,
            &format!("arrival = \"constant\"\nrate = \"1/s\"\nduration = \"{d}s\""),
            tokens,
        )?;
        let window = meter.finish();
        let script = Script {
            ttft_ms: ttft as f64,
            itl_ms: itl as f64,
        };
        let mut row = point_row(
            "idle",
            format!("1 request/s, {tokens} tokens, {d} s"),
            &m,
            0,
            Some(script),
            None,
            server.truth(),
        );
        if let Some(w) = window {
            let pct = w.cpu_s / w.wall_s * 100.0;
            row.cpu = format!("{pct:.2}% of a core");
            let top: Vec<String> = w
                .top
                .iter()
                .map(|(name, p)| format!("{name} {p:.2}%"))
                .collect();
            let busiest = if top.is_empty() {
                String::new()
            } else {
                format!("; busiest threads: {}", top.join(", "))
            };
            if pct > IDLE_BUDGET_PERCENT {
                row.verdict = Verdict::Fail;
                row.why = format!(
                    "burns {pct:.2}% of a core at 1 request/s (budget {IDLE_BUDGET_PERCENT}%){busiest}; {}",
                    row.why
                );
            } else {
                row.why = format!("{}{busiest}", row.why);
            }
        }
        rows.push(row);
    }

    if wanted("streams") {
        let (ttft, itl, tokens) = (100u64, 250u64, 8u32);
        let script = Script {
            ttft_ms: ttft as f64,
            itl_ms: itl as f64,
        };
        // Arrivals spread evenly at the rate that keeps `n` requests in
        // flight (each lasts TTFT + 7 ITL = 1.85 s): streams open and close
        // all the time, never all at once; the first 2 s are warm-up.
        let each_s = (ttft + itl * u64::from(tokens - 1)) as f64 / 1e3;
        let mut held_any = false;
        for &n in sizes.streams {
            let mut server = ServerProcess::start(ttft, itl)?;
            let rate = (n as f64 / each_s).round();
            let m = run_point(
                &rt,
                &server.base_url,
                &format!(
                    "arrival = \"constant\"\nrate = \"{rate}/s\"\nwarmup = \"2s\"\nduration = \"{}s\"",
                    sizes.streams_s
                ),
                tokens,
            )?;
            let mut row = point_row(
                "streams",
                format!("{n} streams ({rate}/s), TTFT {ttft} ms, ITL {itl} ms, {tokens} tokens"),
                &m,
                0,
                Some(script),
                Some(rate),
                server.truth(),
            );
            row.cpu = format!("{:.0} in flight", m.point.merged.concurrency_mean);
            let failed = row.verdict == Verdict::Fail;
            if failed && held_any {
                row.verdict = Verdict::Limit;
            }
            held_any |= !failed;
            rows.push(row);
            if failed {
                break;
            }
        }
    }

    if wanted("rate") {
        let (ttft, itl, tokens) = (10, 10, 4);
        let script = Script {
            ttft_ms: ttft as f64,
            itl_ms: itl as f64,
        };
        let mut server = ServerProcess::start(ttft, itl)?;
        let mut held_any = false;
        for &r in sizes.rates {
            let m = run_point(
                &rt,
                &server.base_url,
                &format!(
                    "arrival = \"constant\"\nrate = \"{r}/s\"\nduration = \"{}s\"",
                    sizes.rate_s
                ),
                tokens,
            )?;
            let mut row = point_row(
                "rate",
                format!("{r} requests/s, TTFT {ttft} ms, ITL {itl} ms, {tokens} tokens"),
                &m,
                0,
                Some(script),
                Some(r as f64),
                server.truth(),
            );
            let c = &m.point.merged.requests;
            row.cpu = format!(
                "{:.0} us/request",
                m.cpu_s / (c.succeeded + c.warmup).max(1) as f64 * 1e6
            );
            let failed = row.verdict == Verdict::Fail;
            if failed && held_any {
                row.verdict = Verdict::Limit;
            }
            held_any |= !failed;
            rows.push(row);
            if failed {
                break;
            }
        }
    }

    if wanted(IMPOSSIBLE) {
        let mut server = ServerProcess::start(10, 20)?;
        let m = run_point(&rt, &server.base_url, "concurrency = 4\nrequests = 8", 4)?;
        // The server writes every 20 ms; the row expects 2 ms.
        let script = Script {
            ttft_ms: 10.0,
            itl_ms: 2.0,
        };
        let events = events_of(&m.point, 4);
        rows.push(point_row(
            IMPOSSIBLE,
            "4 streams, ITL 20 ms held to 2 ms".into(),
            &m,
            events,
            Some(script),
            None,
            server.truth(),
        ));
        notes.push(
            "`impossible` is held to a script its server does not follow: it always fails.".into(),
        );
    }

    let mut t = Table::new(&[
        ("check", Align::Left),
        ("load", Align::Left),
        ("TTFT p50 / p99 ms", Align::Right),
        ("ITL p50 / p99 ms", Align::Right),
        ("lag p99 ms", Align::Right),
        ("client CPU", Align::Right),
        ("verdict", Align::Left),
        ("why", Align::Left),
    ]);
    let failed = rows.iter().any(|r| r.verdict == Verdict::Fail);
    for r in rows {
        t.row(vec![
            r.check,
            r.load,
            r.ttft,
            r.itl,
            r.lag,
            r.cpu,
            r.verdict.label().into(),
            r.why,
        ]);
    }
    let mut out = format!(
        "infer-bench {} self-bench: the client against a scripted server in another process ({cores} CPUs, open-file limit {fds})\n\n",
        env!("CARGO_PKG_VERSION"),
    );
    out.push_str(&t.render());
    out.push_str(&format!(
        "\nA row passes when every request succeeded, the client's TTFT and ITL p50 and p99 are within 1 ms of the script (1% above 100 ms) and its dispatch lag p99 is under {LAG_BUDGET_MS} ms.\n\
         `limit`: the first load of a ladder this machine could not hold, above one it held.\n\
         Client CPU: this process's (getrusage, all threads) over the events it read, warm-up included; the server's is not counted.\n\
         The floor: a one-thread reqwest + serde_json client in its own process, same load and server, measured the same way.\n\
         Idle: this process's CPU over wall time in the middle of the run (budget {IDLE_BUDGET_PERCENT}% of a core).\n"
    ));
    for n in notes {
        out.push_str(&n);
        out.push('\n');
    }
    out.push_str(if failed {
        "Result: a check failed (exit 1).\n"
    } else {
        "Result: every check held.\n"
    });
    Ok(Report { text: out, failed })
}
