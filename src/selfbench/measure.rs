//! How `self-bench` measures: the scripted server and the floor client
//! as child processes, a meter of this process's CPU (`cpu`) for a window
//! inside a run, and one engine point run through the same `run_plan` as
//! `run`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cpu::{cpu_seconds, thread_cpu_ns};
use super::floor::{FloorLoad, FloorReport, Lengths};
use super::server;
use crate::error::{Error, Result, SelfBenchError};
use crate::plan::Plan;
use crate::results::{PointResult, Results};
use crate::run::Interrupt;
use crate::run::{RunOptions, run_plan};

/// The server process, stopped when dropped.
pub(super) struct ServerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    pub(super) base_url: String,
}

impl ServerProcess {
    pub(super) fn start(ttft_ms: u64, itl_ms: u64) -> Result<ServerProcess> {
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
            .map_err(SelfBenchError::ScriptedServer)?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or(SelfBenchError::NoStdout)?;
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .map_err(SelfBenchError::ReadAddress)?;
        let base_url = line.trim().to_string();
        if !base_url.starts_with("http://") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(SelfBenchError::ServerDidNotStart { said: base_url }.into());
        }
        Ok(ServerProcess {
            child,
            stdin,
            stdout,
            base_url,
        })
    }

    /// What the server wrote, when, since the last call.
    pub(super) fn truth(&mut self) -> server::TruthStats {
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
    Ok(std::env::current_exe().map_err(SelfBenchError::CurrentExe)?)
}

/// CPU over a window of wall time inside a run, read by a thread that
/// sleeps between its two readings.
pub(super) struct WindowMeter {
    thread: std::thread::JoinHandle<Window>,
}

pub(super) struct Window {
    pub(super) cpu_s: f64,
    pub(super) wall_s: f64,
    /// The threads that spent the most, with their share of a core (%).
    pub(super) top: Vec<(String, f64)>,
}

impl WindowMeter {
    pub(super) fn start(from: Duration, to: Duration) -> WindowMeter {
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

    pub(super) fn finish(self) -> Option<Window> {
        self.thread.join().ok()
    }
}

pub(super) struct Measured {
    pub(super) point: PointResult,
    pub(super) cpu_s: f64,
    /// The measured requests as the client logged them, for the join
    /// with what the server wrote.
    pub(super) sent: Vec<Sent>,
}

/// One measured request as the client saw it, on the wall clock.
pub(super) struct Sent {
    /// The number in the response's id (`cmpl-{id}`).
    pub(super) id: u64,
    pub(super) send_unix_ns: i128,
    /// When its first output arrived.
    pub(super) first_unix_ns: i128,
}

/// The measured requests of `requests.jsonl` that carry what the join
/// needs.
fn read_sent(path: &std::path::Path) -> Vec<Sent> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str::<infer_bench_results::requests::RequestLine>(l).ok())
        .filter(|r| !r.warmup && r.error.is_none())
        .filter_map(|r| {
            let id = r
                .response_id
                .as_deref()?
                .strip_prefix("cmpl-")?
                .parse()
                .ok()?;
            let send = i128::from(r.send_unix_ns?);
            let ttft_ns = (r.ttft_from_send_ms? * 1e6).round() as i128;
            Some(Sent {
                id,
                send_unix_ns: send,
                first_unix_ns: send + ttft_ns,
            })
        })
        .collect()
}

/// Runs one point of the engine against `base_url`, measuring this
/// process's CPU around it.
pub(super) fn run_point(
    rt: &tokio::runtime::Runtime,
    base_url: &str,
    load: &str,
    output_tokens: Lengths,
) -> Result<Measured> {
    let text = format!(
        "name = \"self-bench\"\nseed = 1\n[targets.s]\nkind = \"openai\"\nbase_url = \"{base_url}\"\n\
         [models.m]\nserved_name = \"{}\"\n\
         [workloads.w]\napi = \"completions\"\ninput_tokens = 16\noutput_tokens = {}\n\
         [load]\n{load}\ntimeouts = {{ connect = \"10s\", first_token = \"60s\", idle = \"30s\", total = \"5m\" }}\n\
         [validity]\npercentile_sample_check = false\n",
        server::MODEL,
        output_tokens.toml()
    );
    let spec = crate::spec::compile("<self-bench>", &text, std::path::Path::new("."))?;
    let plan = Plan::build(&spec)?;
    let dir = tempfile::tempdir().map_err(|e| Error::io(std::env::temp_dir(), e))?;
    let opts = RunOptions {
        // For the join with the server's writes (a few µs per request, on
        // the recorder's thread).
        requests_jsonl: true,
        ..RunOptions::new(dir.path().to_path_buf())
    };
    let cpu0 = cpu_seconds();
    let results: Results = run_plan(&spec, &plan, &opts, rt, Arc::new(Interrupt::default()))?;
    let cpu_s = cpu_seconds() - cpu0;
    let point = results
        .points
        .into_iter()
        .next()
        .ok_or(SelfBenchError::PointDidNotRun)?;
    let sent = read_sent(&dir.path().join("requests.jsonl"));
    Ok(Measured { point, cpu_s, sent })
}

/// Runs the floor client in a process of its own.
pub(super) fn run_floor(load: &FloorLoad) -> Result<FloorReport> {
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
        .map_err(SelfBenchError::FloorStart)?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(
        serde_json::from_str(text.trim()).map_err(|_| SelfBenchError::FloorSilent {
            status: out.status,
            said: text.trim().to_string(),
        })?,
    )
}
