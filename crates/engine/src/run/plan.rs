//! Running a plan: points grouped by the server
//! they need (each server starts once per group), each point run in turn
//! (`point`) and judged (`assess`), and the results file rewritten
//! atomically after every point so an interrupted run keeps what finished.
//! Everything the run writes or prints passes the run's redactor
//! (`secrets`) first: the results before every write, the request log line
//! by line, and every line on stderr.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use super::assemble::failed_point;
use super::assess::assess;
use super::engine::Interrupt;
use super::host::HostProbe;
use super::options::{Progress, RunOptions};
use super::point::{PointOutcome, TelemetryEnv, run_point};
use super::requests::RequestLog;
use super::servers::Server;
use crate::error::{Error, Result};
use infer_bench_results::redact::{self, Redactor};
use infer_bench_results::{
    AgentInfo, FORMAT, METRICS_VERSION, PointStatus, SpecInfo, ToolInfo, VERSION, now_rfc3339,
};
use infer_bench_spec::Spec;
use infer_bench_spec::plan::{Plan, Point, PointConfig};
use infer_bench_spec::results::{PointResult, Results};
use infer_bench_telemetry::gpu::GpuSource;
use infer_bench_telemetry::session;

/// The results file's path in a run directory.
pub fn results_path(out_dir: &std::path::Path) -> PathBuf {
    out_dir.join("results.json")
}

fn sha256_hex(s: &str) -> String {
    use sha2::{Digest, Sha256};
    infer_bench_spec::hex(&Sha256::digest(s.as_bytes()))
}

/// Runs every point of `plan` and returns the results (also on disk),
/// sampling this machine's GPUs through NVML.
pub fn run_plan(
    spec: &Spec,
    plan: &Plan,
    opts: &RunOptions,
    rt: &tokio::runtime::Runtime,
    interrupt: Arc<Interrupt>,
) -> Result<Results> {
    let gpus = infer_bench_telemetry::gpu::NvmlSource::new();
    run_plan_with(spec, plan, opts, rt, interrupt, &gpus)
}

/// `run_plan` with GPUs from `gpus` (tests pass a scripted source).
pub fn run_plan_with(
    spec: &Spec,
    plan: &Plan,
    opts: &RunOptions,
    rt: &tokio::runtime::Runtime,
    interrupt: Arc<Interrupt>,
    gpus: &dyn GpuSource,
) -> Result<Results> {
    run_plan_on(
        spec,
        plan,
        opts,
        rt,
        interrupt,
        gpus,
        &super::host::ProcHost,
    )
}

/// `run_plan` with GPUs from `gpus` and the machine read through `host`.
pub fn run_plan_on(
    spec: &Spec,
    plan: &Plan,
    opts: &RunOptions,
    rt: &tokio::runtime::Runtime,
    interrupt: Arc<Interrupt>,
    gpus: &dyn GpuSource,
    host: &dyn HostProbe,
) -> Result<Results> {
    session::preflight(
        spec.telemetry.gpu,
        plan.points.iter().map(|p| &p.config),
        gpus,
    )?;
    // Every stream is a socket: allow as many as the system lets us (the
    // command line does it too; a library caller gets it here).
    super::raise_fd_limit();
    if opts.agent.is_some() && plan.points.iter().any(|p| p.config.load.search.is_some()) {
        return Err(Error::SearchWithAgents);
    }
    let tel = TelemetryEnv {
        config: &spec.telemetry,
        gpus,
        host,
    };
    // Every secret the spec reaches, masked in whatever this run writes;
    // the process-wide copy serves the printer of a run's error.
    let redactor = super::secrets::redactor(spec);
    redact::install(redactor.clone());
    let red = |s: &str| redactor.text(s);
    warn_tls_insecure(plan);
    std::fs::create_dir_all(&opts.out_dir).map_err(|e| Error::io(&opts.out_dir, e))?;
    let path = results_path(&opts.out_dir);
    let mut results = Results {
        format: FORMAT.into(),
        version: VERSION,
        metrics_version: METRICS_VERSION,
        tool: ToolInfo::current(),
        spec: SpecInfo {
            name: spec.name.clone(),
            path: spec.path.display().to_string(),
            sha256: sha256_hex(&spec.source),
            seed: spec.seed,
            source: redact::spec_source(&spec.source, &redactor),
        },
        started_at: now_rfc3339(),
        finished_at: None,
        complete: false,
        interrupted: false,
        partition: opts.partition.clone(),
        agent: opts.agent.map(|(k, n)| AgentInfo {
            k,
            n,
            start_at: opts
                .start_at
                .map(|t| humantime::format_rfc3339_millis(t).to_string()),
            start_offset_ms: None,
            slot_s: opts.slot.map(|d| d.as_secs_f64()),
            host: super::environment::hostname(),
            clock: super::agent::clock_status(),
        }),
        environment: super::environment::collect(plan, rt.handle(), gpus),
        points: Vec::new(),
        pending: plan.points.iter().map(|p| p.id.clone()).collect(),
        merged_from: Vec::new(),
        searches: Vec::new(),
    };
    // Tokenizers and datasets are read before any server starts, once per
    // (workload, model): a malformed file stops the run here.
    let materials = super::workload::materials(spec, plan)?;
    save(&mut results, &redactor, &path)?;
    let requests = if opts.requests_jsonl {
        Some(RequestLog::open(
            &opts.out_dir.join("requests.jsonl"),
            redactor.clone(),
        )?)
    } else {
        None
    };
    let log_dir = opts.out_dir.join("servers");
    let order = groups(plan);
    let timetable = match (opts.agent, opts.start_at) {
        (Some(_), Some(start)) => Some(super::agent::Timetable::new(
            order.iter().flatten().map(|&i| &plan.points[i]),
            start,
            opts.slot,
        )?),
        _ => None,
    };
    let total = plan.points.len();
    let mut done = 0usize;
    // The plan's estimated time left after each point (in the order they
    // run), for the progress bar's ETA; `None` where a later point ends
    // by request count.
    let mut after: Vec<Option<f64>> = vec![Some(0.0); plan.points.len()];
    let mut left = Some(0.0);
    for &i in order.iter().flatten().rev() {
        after[i] = left;
        left = left
            .zip(infer_bench_spec::plan::estimate_seconds(
                &plan.points[i].config,
            ))
            .map(|(a, b)| a + b);
    }
    for group in order {
        if interrupt.is_set() {
            break;
        }
        let first = &plan.points[group[0]].config;
        // GPU memory before this group's server starts (memory by phase).
        let before_server = super::preflight::memory_now(first, spec.telemetry.gpu, gpus);
        let started = Instant::now();
        let server = Server::start(first, spec.base_dir(), &log_dir, rt.handle(), &interrupt)
            .map_err(|e| e.to_string());
        let mut server = match server {
            Ok(s) => s,
            Err(msg) => {
                if interrupt.is_set() {
                    break;
                }
                eprintln!("error: {}: {}", group_name(first), red(&msg));
                for &i in &group {
                    let p = &plan.points[i];
                    push_point(
                        &mut results,
                        failed_point(p, format!("the server could not be started: {msg}")),
                    );
                    done += 1;
                }
                save(&mut results, &redactor, &path)?;
                continue;
            }
        };
        if opts.progress != Progress::Quiet && !matches!(server, Server::External { .. }) {
            // What decides a simulator's answers besides its GPU, on a line
            // of its own under the server's.
            let kv = server
                .info()
                .filter(|i| i.kv_dtype.is_some())
                .map(|i| {
                    format!(
                        "\n  {} profile, {} scheduler, {} sequences and {} tokens a step; KV cache {}, {} tokens; admission {}",
                        i.profile.unwrap_or_default(),
                        i.scheduler.unwrap_or_default(),
                        i.max_num_seqs.unwrap_or(0),
                        i.max_batched_tokens.unwrap_or(0),
                        i.kv_dtype.unwrap_or_default(),
                        i.kv_cache_tokens.unwrap_or(0),
                        i.admission.unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            if matches!(server, Server::Virtual(_)) {
                eprintln!(
                    "{}: simulated in virtual time: no server, no sockets, an ideal client{kv}",
                    group_name(first)
                );
            } else {
                eprintln!(
                    "{}: server ready in {:.1}s at {}{kv}",
                    group_name(first),
                    started.elapsed().as_secs_f64(),
                    red(&server.base_url())
                );
            }
        }
        let mut dead: Option<String> = None;
        // Runs one point (a plan's, or a search's probe) on this group's
        // server, judges it, keeps it and rewrites the results file;
        // false when the run is to stop (interrupted).
        let mut measure =
            |p: &Point, i: usize, label: &str, results: &mut Results| -> Result<bool> {
                if let Some(msg) = &dead {
                    push_point(
                        results,
                        failed_point(p, format!("the server died during an earlier point: {msg}")),
                    );
                    save(results, &redactor, &path)?;
                    return Ok(true);
                }
                let outcome = run_point(
                    p,
                    materials[i].clone(),
                    &mut server,
                    rt,
                    &interrupt,
                    requests.as_ref(),
                    opts,
                    timetable.as_ref(),
                    label,
                    after[i],
                    &tel,
                    &before_server,
                );
                match outcome {
                    PointOutcome::Interrupted => return Ok(false),
                    PointOutcome::Done(mut pr) => {
                        assess(spec, &mut pr);
                        if let Some(a) = results.agent.as_mut() {
                            if a.start_offset_ms.is_none() {
                                a.start_offset_ms = pr
                                    .runs
                                    .first()
                                    .and_then(|r| r.shard.as_ref())
                                    .map(|s| s.start_late_ms);
                            }
                        }
                        if let Some(line) = summary_line(label, &pr) {
                            if opts.progress != Progress::Quiet {
                                eprintln!("{}", red(&line));
                            }
                        }
                        push_point(results, *pr);
                    }
                    PointOutcome::ServerDied(msg, pr) => {
                        eprintln!("error: {}: {}", group_name(&p.config), red(&msg));
                        dead = Some(msg);
                        push_point(results, *pr);
                    }
                }
                save(results, &redactor, &path)?;
                Ok(!interrupt.is_set())
            };
        for &i in &group {
            let p = &plan.points[i];
            done += 1;
            let label = format!("[{done}/{total}] {}", p.slug);
            let go_on = match &p.config.load.search {
                None => measure(p, i, &label, &mut results)?,
                Some(search) => {
                    let mut searcher = super::search::Searcher::new(search);
                    let mut go_on = true;
                    while let Some(level) = searcher.next() {
                        let probe = p.probe(level);
                        let n = searcher.probes().len() + 1;
                        let label = format!("{label} probe {n}: {}", probe.slug);
                        go_on = measure(&probe, i, &label, &mut results)?;
                        let Some(pr) = results.points.iter().rev().find(|r| r.id == probe.id)
                        else {
                            break;
                        };
                        searcher.record(
                            &probe.id,
                            level,
                            super::search::verdict(search.target, pr),
                        );
                        let unreachable = pr.status == PointStatus::Failed;
                        let answer = searcher.result(&p.id, &p.slug, false);
                        put_search(&mut results, answer);
                        if !go_on || unreachable {
                            break;
                        }
                    }
                    let finished = go_on && searcher.next().is_none();
                    let answer = searcher.result(&p.id, &p.slug, finished);
                    if opts.progress != Progress::Quiet {
                        eprintln!(
                            "{label}: capacity ({}, {}): {}",
                            answer.target,
                            answer.outcome.name(),
                            answer.answer()
                        );
                    }
                    put_search(&mut results, answer);
                    if finished {
                        results.pending.retain(|id| *id != p.id);
                    }
                    save(&mut results, &redactor, &path)?;
                    go_on
                }
            };
            if !go_on {
                break;
            }
        }
        server.stop(rt.handle());
    }
    if let Some(r) = requests {
        r.close();
    }
    results.interrupted = interrupt.is_set();
    results.complete = results.pending.is_empty();
    results.finished_at = Some(now_rfc3339());
    save(&mut results, &redactor, &path)?;
    Ok(results)
}

/// Redacts the results in memory (so every later reader, the summary and
/// the exporters included, sees them redacted) and rewrites the file.
fn save(results: &mut Results, redactor: &Redactor, path: &std::path::Path) -> Result<()> {
    results.redact(redactor);
    results.write(path)?;
    Ok(())
}

/// Says once, on stderr, which targets are reached without checking
/// their TLS certificates.
fn warn_tls_insecure(plan: &Plan) {
    let mut names: Vec<&str> = plan
        .points
        .iter()
        .filter(|p| p.config.target.tls_insecure)
        .map(|p| p.config.target.name.as_str())
        .collect();
    names.dedup();
    names.sort_unstable();
    names.dedup();
    for name in names {
        eprintln!(
            "warning: TLS certificate verification is off for target {name} (tls_insecure = true): \
             anyone between this machine and the server can read and change the traffic, API key included"
        );
    }
}

/// Keeps a search's answer, replacing the one it had so far.
fn put_search(results: &mut Results, answer: infer_bench_results::search::SearchResult) {
    match results.searches.iter_mut().find(|s| s.id == answer.id) {
        Some(s) => *s = answer,
        None => results.searches.push(answer),
    }
}

fn push_point(results: &mut Results, p: PointResult) {
    results.pending.retain(|id| *id != p.id);
    results.points.push(p);
}

fn group_name(cfg: &PointConfig) -> String {
    let mut s = format!("{}/{}", cfg.target.name, cfg.model.name);
    if let Some(p) = &cfg.precision {
        s.push('/');
        s.push_str(&p.name);
    }
    s
}

/// Points grouped by (target, model, precision), in plan order of first
/// appearance: each group shares one server.
pub fn groups(plan: &Plan) -> Vec<Vec<usize>> {
    let mut keys: Vec<(String, String, Option<String>)> = Vec::new();
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (i, p) in plan.points.iter().enumerate() {
        let c = &p.config;
        let key = (
            c.target.name.clone(),
            c.model.name.clone(),
            c.precision.as_ref().map(|p| p.name.clone()),
        );
        match keys.iter().position(|k| *k == key) {
            Some(g) => out[g].push(i),
            None => {
                keys.push(key);
                out.push(vec![i]);
            }
        }
    }
    out
}

/// One line per finished point, for logs.
fn summary_line(label: &str, p: &PointResult) -> Option<String> {
    let s = &p.merged;
    let ms = |m: &str| {
        s.latency_ms
            .get(m)
            .map(|x| format!("{:.1}", x.p50))
            .unwrap_or_else(|| "-".into())
    };
    Some(format!(
        "{label}: {} ok, {} failed, {:.2} req/s, {:.0} out tok/s, TTFT p50 {} ms, TPOT p50 {} ms{}",
        s.requests.succeeded,
        s.requests.failed,
        s.request_throughput,
        s.output_tokens_per_s,
        ms("ttft"),
        ms("tpot"),
        p.failure
            .as_ref()
            .map(|f| format!(" ({f})"))
            .unwrap_or_default()
    ))
}
