//! `self-bench`: measures the client's own cost, so users know the client
//! is not what limits their benchmark. A scripted OpenAI-compatible server
//! runs in a separate process (its CPU is not counted); this process runs
//! ordinary points against it through the same engine `run` uses, and its
//! own CPU time (getrusage) is divided by the events and requests it
//! handled. The server is [`server`]: paced completions and nothing else.

use std::io::{BufRead, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

mod server;

use crate::error::{Error, Result};
use crate::export::table::{Align, Table};
use crate::plan::Plan;
use crate::results::{PointResult, Results};
use crate::run::engine::Interrupt;
use crate::run::{Progress, RunOptions, run_plan};

/// Serves `ScriptedServer` until stdin closes; prints its base URL first.
pub fn serve_scripted(ttft_ms: u64, itl_ms: u64) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Infra(e.to_string()))?;
    let _guard = rt.enter();
    let server = rt
        .block_on(server::start(
            std::time::Duration::from_millis(ttft_ms),
            std::time::Duration::from_millis(itl_ms),
        ))
        .map_err(|e| Error::Infra(format!("cannot start the scripted server: {e}")))?;
    println!("{}", server.base_url());
    let _ = std::io::stdout().flush();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        while std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map(|n| n > 0)
            .unwrap_or(false)
        {
            line.clear();
        }
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    Ok(())
}

/// The server process, stopped when dropped.
struct ServerProcess {
    child: Child,
    base_url: String,
}

impl ServerProcess {
    fn start(ttft_ms: u64, itl_ms: u64) -> Result<ServerProcess> {
        let exe = std::env::current_exe()
            .map_err(|e| Error::Infra(format!("cannot find this executable: {e}")))?;
        let mut child = Command::new(exe)
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
        let mut line = String::new();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| Error::Infra("no stdout from the scripted server".into()))?;
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| Error::Infra(e.to_string()))?;
        let base_url = line.trim().to_string();
        if !base_url.starts_with("http://") {
            let _ = child.kill();
            return Err(Error::Infra(format!(
                "the scripted server did not start: {base_url}"
            )));
        }
        Ok(ServerProcess { child, base_url })
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// This process's CPU time so far, seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills a plain struct we own.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(u.ru_utime) + tv(u.ru_stime)
    }
}

struct Measured {
    point: PointResult,
    cpu_s: f64,
    wall_s: f64,
}

fn run_point(
    rt: &tokio::runtime::Runtime,
    base_url: &str,
    load: &str,
    output_tokens: u32,
) -> Result<Measured> {
    let text = format!(
        "name = \"self-bench\"\nseed = 1\n[targets.s]\nkind = \"openai\"\nbase_url = \"{base_url}\"\n\
         [models.m]\nserved_name = \"scripted-model\"\n\
         [workloads.w]\napi = \"completions\"\ninput_tokens = 16\noutput_tokens = {output_tokens}\n\
         [load]\n{load}\ntimeouts = {{ connect = \"10s\", first_token = \"60s\", idle = \"30s\", total = \"5m\" }}\n\
         [validity]\npercentile_sample_check = false\n"
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
    let t0 = Instant::now();
    let results: Results = run_plan(&spec, &plan, &opts, rt, Arc::new(Interrupt::default()))?;
    let wall_s = t0.elapsed().as_secs_f64();
    let cpu_s = cpu_seconds() - cpu0;
    let point = results
        .points
        .into_iter()
        .next()
        .ok_or_else(|| Error::Infra("the self-bench point did not run".into()))?;
    Ok(Measured {
        point,
        cpu_s,
        wall_s,
    })
}

fn lag_p99(p: &PointResult) -> f64 {
    p.merged
        .latency_ms
        .get("dispatch_lag")
        .map(|s| s.p99)
        .unwrap_or(f64::NAN)
}

/// Runs the benchmark and returns its report.
pub fn run(quick: bool) -> Result<String> {
    let fds = crate::run::raise_fd_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Infra(e.to_string()))?;
    let mut out = String::new();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    out.push_str(&format!(
        "infer-bench {} self-bench: the client's own cost ({} CPUs, open-file limit {fds})\n\n",
        env!("CARGO_PKG_VERSION"),
        cores
    ));

    // 1. CPU per event: streams as fast as the server can write them.
    let fast = ServerProcess::start(0, 0)?;
    let (streams, tokens, requests) = if quick {
        (32, 256, 256)
    } else {
        (64, 1024, 1024)
    };
    let m = run_point(
        &rt,
        &fast.base_url,
        &format!("concurrency = {streams}\nrequests = {requests}"),
        tokens,
    )?;
    let events: u64 = m.point.merged.tokens.output_total;
    let reqs = m.point.merged.requests.succeeded;
    let mut t = Table::new(&[
        ("measure", Align::Left),
        ("value", Align::Right),
        ("note", Align::Left),
    ]);
    t.row(vec![
        "client CPU per SSE event".into(),
        format!("{:.2} us", m.cpu_s / events as f64 * 1e6),
        format!("{events} events, {streams} streams, CPU {:.2} s", m.cpu_s),
    ]);
    t.row(vec![
        "events per client CPU-second".into(),
        format!("{:.0}", events as f64 / m.cpu_s),
        format!(
            "one core's worth; wall rate {:.0}/s (server shares the machine)",
            events as f64 / m.wall_s
        ),
    ]);
    t.row(vec![
        "client CPU per request".into(),
        format!("{:.1} us", m.cpu_s / reqs as f64 * 1e6),
        format!("{tokens} tokens each, all included"),
    ]);
    drop(fast);

    // 2. Concurrent streams: many slow streams open at once.
    let slow = ServerProcess::start(100, 250)?;
    let n = if quick { 2_000 } else { 10_000 };
    // The first wave opens the connections (warm-up); the second is measured.
    let m = run_point(
        &rt,
        &slow.base_url,
        &format!("concurrency = {n}\nwarmup_requests = {n}\nrequests = {n}"),
        8,
    )?;
    let ok = m.point.merged.requests.succeeded;
    let itl = m
        .point
        .merged
        .latency_ms
        .get("itl")
        .map(|s| s.p50)
        .unwrap_or(f64::NAN);
    t.row(vec![
        "concurrent streams".into(),
        format!("{ok} of {n}"),
        format!(
            "ITL p50 {itl:.1} ms against 250 ms scripted; dispatch lag p99 {:.2} ms",
            lag_p99(&m.point)
        ),
    ]);
    drop(slow);

    // 3. Highest open-loop request rate with dispatch lag p99 under 1 ms.
    let fast = ServerProcess::start(0, 0)?;
    let rates: &[u32] = if quick {
        &[250, 500, 1000, 2000]
    } else {
        &[500, 1000, 2000, 4000, 8000, 16000]
    };
    let mut best = None;
    let mut notes = Vec::new();
    for &r in rates {
        let m = run_point(
            &rt,
            &fast.base_url,
            &format!(
                "arrival = \"constant\"\nrate = \"{r}/s\"\nduration = \"{}s\"",
                if quick { 2 } else { 4 }
            ),
            4,
        )?;
        let lag = lag_p99(&m.point);
        let achieved = m.point.merged.achieved_send_rate.unwrap_or(0.0);
        notes.push(format!(
            "{r}/s: lag p99 {lag:.3} ms, sent at {achieved:.0}/s"
        ));
        if lag < 1.0 && (achieved / r as f64 - 1.0).abs() < 0.01 {
            best = Some(r);
        } else {
            break;
        }
    }
    t.row(vec![
        "highest request rate, lag p99 < 1 ms".into(),
        best.map(|b| format!("{b}/s"))
            .unwrap_or_else(|| "below the lowest tried".into()),
        notes.join("; "),
    ]);
    out.push_str(&t.render());
    out.push_str("\nThe server runs in its own process; only this process's CPU is counted.\n");
    Ok(out)
}
