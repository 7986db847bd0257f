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

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

mod checks;
mod cpu;
mod floor;
mod measure;
mod server;

pub use checks::{
    FLOOR_RATIO_TARGET, IDLE_BUDGET_PERCENT, IMPOSSIBLE, LAG_BUDGET_MS, tolerance_ms,
};
pub use floor::{FloorLoad, FloorReport, Lengths};

use crate::error::{Error, Result, SelfBenchError};
use crate::export::table::{Align, Table};

/// The checks `self-bench` runs, in order (`--only` picks some).
pub const CHECKS: &[&str] = &["unpaced", "paced", "floor", "idle", "streams", "rate"];

/// What `self-bench` found: the table, and whether a check failed.
pub struct Report {
    pub text: String,
    pub failed: bool,
}

/// Serves the scripted server until stdin closes; prints its base URL
/// first. A line `stats` on stdin prints how late its writes were since
/// the last such line ([`server::TruthStats`], one JSON line).
///
/// Two worker threads (beside its timer thread). With one, the server fell
/// behind its own script at 256 paced streams (first tokens 11.2-11.4 ms
/// at p99 against 10 ± 1 on a quiet 2-core machine); with two it keeps to
/// it (10.2 ms) while the client's stamps stay within 0.2 ms of its writes.
/// The bursts that once made a second worker take the client's core (256
/// requests read at once when a closed loop's requests ended together)
/// are gone since the paced row's lengths spread over 50-150 tokens.
pub fn serve_scripted(ttft_ms: u64, itl_ms: u64) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let _guard = rt.enter();
    let truth = Arc::new(server::Truth::default());
    let server = rt
        .block_on(server::start(
            Duration::from_millis(ttft_ms),
            Duration::from_millis(itl_ms),
            truth.clone(),
        ))
        .map_err(SelfBenchError::ScriptedServer)?;
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
    let report = floor::run(load).map_err(SelfBenchError::Floor)?;
    println!("{}", serde_json::to_string(&report).expect("serializes"));
    Ok(())
}

/// Runs the checks (`only` empty: all of [`CHECKS`]) and returns the table.
pub fn run(quick: bool, only: &[String]) -> Result<Report> {
    for name in only {
        if !CHECKS.contains(&name.as_str()) && name != IMPOSSIBLE {
            return Err(SelfBenchError::NoSuchCheck {
                name: name.clone(),
                checks: CHECKS,
            }
            .into());
        }
    }
    let wanted = |name: &str| {
        if only.is_empty() {
            name != IMPOSSIBLE
        } else {
            only.iter().any(|o| o == name)
        }
    };
    let sizes = if quick { &checks::QUICK } else { &checks::FULL };
    let fds = crate::run::raise_fd_limit();
    let rt = crate::run::engine_runtime(false).map_err(Error::Runtime)?;
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mut rows = Vec::new();
    if wanted("unpaced") {
        rows.push(checks::unpaced(&rt, sizes)?);
    }
    // The floor's ratio is against the paced row: it shows with it.
    if wanted("paced") || wanted("floor") {
        rows.extend(checks::paced(&rt, sizes, wanted("floor"))?);
    }
    if wanted("idle") {
        rows.push(checks::idle(&rt, sizes)?);
    }
    if wanted("streams") {
        rows.extend(checks::streams(&rt, sizes)?);
    }
    if wanted("rate") {
        rows.extend(checks::rate(&rt, sizes)?);
    }
    if wanted(IMPOSSIBLE) {
        rows.push(checks::impossible(&rt)?);
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
    let failed = rows.iter().any(|r| r.verdict == checks::Verdict::Fail);
    let server_late = rows
        .iter()
        .any(|r| r.verdict == checks::Verdict::ServerLate);
    let impossible = rows.iter().any(|r| r.check == IMPOSSIBLE);
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
        "\nA row passes when every request succeeded, the client's ITL p50 and p99 are within 1 ms of what the server wrote (1% above 100 ms) and the server's within 1 ms of the script, it stamped first tokens within that of the server's writes (p50 and p99, joined by response id), the server wrote them within that of its script, and its dispatch lag p99 is under {LAG_BUDGET_MS} ms.\n\
         `limit`: the first load of a ladder this machine could not hold, above one it held.\n\
         `server late`: the client was within tolerance of what the server wrote, but the server fell behind its own script, so the load was not the one asked for: not a pass.\n\
         Client CPU: this process's (getrusage, all threads) over the events it read, warm-up included; the server's is not counted.\n\
         The floor: a one-thread reqwest + serde_json client in its own process, same load and server, measured the same way.\n\
         Idle: this process's CPU over wall time in the middle of the run (budget {IDLE_BUDGET_PERCENT}% of a core).\n"
    ));
    if impossible {
        out.push_str(
            "`impossible` is held to a script its server does not follow: it always fails.\n",
        );
    }
    out.push_str(if failed {
        "Result: a check failed (exit 1).\n"
    } else if server_late {
        "Result: the client held where it was judged, but the scripted server fell behind its script (exit 1): run again on a quieter machine.\n"
    } else {
        "Result: every check held.\n"
    });
    Ok(Report {
        text: out,
        failed: failed || server_late,
    })
}
