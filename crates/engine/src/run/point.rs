//! Running a plan: points grouped by the server they need (each server
//! starts once per group), every run of every point through the engine,
//! then validity, SLOs and cost per point, and the results file rewritten
//! atomically after every point so an interrupted run keeps what finished.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use super::engine::{Interrupt, Live, RunEnv, Sink, run_once};
use super::host::HostProbe;
use super::recorder::Tally;
use super::servers::Server;
use crate::backend::RequestRecord;
use crate::backend::openai::{ClientOptions, OpenAi};
use crate::error::{Error, Result};
use crate::telemetry::gpu::GpuSource;
use crate::telemetry::scrape::HttpMetrics;
use crate::telemetry::session::{self, RunTimes, ScrapePlan, Session};
use infer_bench_results::hist::Hist;
use infer_bench_results::metric::Metric;
use infer_bench_spec::plan::{Plan, Point, PointConfig};
use infer_bench_spec::results::*;
use infer_bench_spec::{Level, Spec, Threshold};

/// How to run.
pub struct RunOptions {
    pub out_dir: PathBuf,
    pub requests_jsonl: bool,
    pub progress: Progress,
    pub partition: Option<String>,
    /// Load sharding: this process is agent K of N.
    pub agent: Option<(u32, u32)>,
    /// With `agent`: the agreed start of the first run (`--start-at`).
    pub start_at: Option<std::time::SystemTime>,
    /// With `agent`: each run's slot in the timetable (`--slot`).
    pub slot: Option<std::time::Duration>,
    /// Fault injection: the client spins this long before each send
    /// (a client made slow on purpose, for tests of the hints).
    pub slow_client: Option<std::time::Duration>,
}

/// How progress is shown on stderr.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A live line per point (stderr is a terminal).
    Live,
    /// One line when each point ends (CI logs).
    Lines,
    Quiet,
}

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
    let gpus = crate::telemetry::gpu::NvmlSource::new();
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
    )
    .map_err(Error::Infra)?;
    let tel = TelemetryEnv {
        config: &spec.telemetry,
        gpus,
        host,
    };
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
            source: spec.source.clone(),
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
    };
    // Tokenizers and datasets are read before any server starts, once per
    // (workload, model): a malformed file stops the run here.
    let materials = super::workload::materials(spec, plan)?;
    results.write(&path)?;
    let requests = if opts.requests_jsonl {
        Some(RequestLog::open(&opts.out_dir.join("requests.jsonl"))?)
    } else {
        None
    };
    let log_dir = opts.out_dir.join("servers");
    let order = groups(plan);
    let timetable = match (opts.agent, opts.start_at) {
        (Some(_), Some(start)) => Some(
            super::agent::Timetable::new(
                order.iter().flatten().map(|&i| &plan.points[i]),
                start,
                opts.slot,
            )
            .map_err(|why| {
                Error::Usage(format!(
                    "with --agent, every run of every point starts at an agreed instant: {why}"
                ))
            })?,
        ),
        _ => None,
    };
    let total = plan.points.len();
    let mut done = 0usize;
    for group in order {
        if interrupt.is_set() {
            break;
        }
        let first = &plan.points[group[0]].config;
        // GPU memory before this group's server starts (memory by phase).
        let before_server = super::preflight::memory_now(first, spec.telemetry.gpu, gpus);
        let started = Instant::now();
        let server = Server::start(first, spec.base_dir(), &log_dir, rt.handle(), &interrupt);
        let mut server = match server {
            Ok(s) => s,
            Err(msg) => {
                if interrupt.is_set() {
                    break;
                }
                eprintln!("error: {}: {msg}", group_name(first));
                for &i in &group {
                    let p = &plan.points[i];
                    push_point(
                        &mut results,
                        failed_point(p, format!("the server could not be started: {msg}")),
                    );
                    done += 1;
                }
                results.write(&path)?;
                continue;
            }
        };
        if opts.progress != Progress::Quiet && !matches!(server, Server::External { .. }) {
            eprintln!(
                "{}: server ready in {:.1}s at {}",
                group_name(first),
                started.elapsed().as_secs_f64(),
                server.base_url()
            );
        }
        let mut dead: Option<String> = None;
        for &i in &group {
            let p = &plan.points[i];
            done += 1;
            if let Some(msg) = &dead {
                push_point(
                    &mut results,
                    failed_point(p, format!("the server died during an earlier point: {msg}")),
                );
                results.write(&path)?;
                continue;
            }
            let label = format!("[{done}/{total}] {}", p.slug);
            let outcome = run_point(
                p,
                materials[i].clone(),
                &mut server,
                rt,
                &interrupt,
                requests.as_ref(),
                opts,
                timetable.as_ref(),
                &label,
                &tel,
                &before_server,
            );
            match outcome {
                PointOutcome::Interrupted => break,
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
                    if let Some(line) = summary_line(&label, &pr) {
                        if opts.progress != Progress::Quiet {
                            eprintln!("{line}");
                        }
                    }
                    push_point(&mut results, *pr);
                }
                PointOutcome::ServerDied(msg, pr) => {
                    eprintln!("error: {}: {msg}", group_name(&p.config));
                    dead = Some(msg);
                    push_point(&mut results, *pr);
                }
            }
            results.write(&path)?;
            if interrupt.is_set() {
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
    results.write(&path)?;
    Ok(results)
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

/// What a point's telemetry needs.
struct TelemetryEnv<'a> {
    config: &'a infer_bench_spec::Telemetry,
    gpus: &'a dyn GpuSource,
    host: &'a dyn HostProbe,
}

impl TelemetryEnv<'_> {
    /// Starts a point's GPU sampling and metrics scraping.
    fn start(&self, cfg: &PointConfig, server: &Server) -> Session {
        let gpu = session::gpu_plan(self.config.gpu, cfg, self.gpus);
        let scrape = server
            .metrics_url(cfg)
            .filter(|_| self.config.server_metrics)
            .and_then(|url| {
                let source = HttpMetrics::new(&url, std::time::Duration::from_secs(2))
                    .map_err(|e| eprintln!("warning: {}: not scraping {url}: {e}", cfg.target.name))
                    .ok()?;
                Some(ScrapePlan {
                    url,
                    source: Box::new(source),
                    interval: self.config.scrape_interval.as_std(),
                })
            });
        Session::start(gpu, self.config.interval.as_std(), scrape)
    }
}

enum PointOutcome {
    Done(Box<PointResult>),
    ServerDied(String, Box<PointResult>),
    Interrupted,
}

#[allow(clippy::too_many_arguments)]
fn run_point(
    p: &Point,
    material: Arc<infer_bench_workload::Material>,
    server: &mut Server,
    rt: &tokio::runtime::Runtime,
    interrupt: &Arc<Interrupt>,
    requests: Option<&RequestLog>,
    opts: &RunOptions,
    timetable: Option<&super::agent::Timetable>,
    label: &str,
    tel: &TelemetryEnv<'_>,
    before_server: &BTreeMap<u32, u64>,
) -> PointOutcome {
    let cfg = &p.config;
    let findings = super::preflight::check(cfg, tel.config.gpu, tel.gpus, tel.host, server.pid());
    for f in &findings {
        if opts.progress != Progress::Quiet {
            eprintln!("{label}: pre-flight: {}", f.message);
        }
    }
    let api_key = cfg
        .target
        .api_key_env
        .as_ref()
        .and_then(|v| std::env::var(v).ok());
    let ca = cfg
        .target
        .ca_cert
        .as_ref()
        .and_then(|path| std::fs::read(path).ok());
    let pool = match cfg.load.level {
        Level::Concurrency(c) => super::engine::agent_share(c as u64, opts.agent).max(1) as usize,
        Level::Rate(_) => cfg.load.max_concurrency.unwrap_or(64) as usize,
    };
    let base_url = server.base_url();
    let options = ClientOptions {
        base_url: &base_url,
        api_key,
        headers: &cfg.target.headers,
        tls_insecure: cfg.target.tls_insecure,
        ca_cert_pem: ca,
        pool_size: pool,
        connect_timeout: cfg.load.timeouts.connect.as_std(),
    };
    let backend = {
        let _guard = rt.enter();
        match OpenAi::new(
            &options,
            &cfg.workload,
            cfg.served_name(),
            cfg.load.timeouts,
        ) {
            Ok(b) => Arc::new(b),
            Err(e) => return PointOutcome::Done(Box::new(failed_point(p, e))),
        }
    };
    let fingerprint = super::engine::workload_fingerprint(&*backend, cfg, &p.hash, &material);
    let open = matches!(cfg.load.level, Level::Rate(_));
    let mut turns: BTreeMap<u32, Tally> = BTreeMap::new();
    let workload = |pr: &mut PointResult, turns: &BTreeMap<u32, Tally>| {
        pr.workload = Some(super::workload::info(&material, fingerprint.clone()));
        pr.turns = super::workload::turn_results(turns, open);
    };
    let mut runs = Vec::new();
    let mut merged = Tally::default();
    let mut steps: BTreeMap<u32, Tally> = BTreeMap::new();
    let mut merged_window_s = 0.0;
    let mut concurrency_max = 0;
    let mut telemetry = tel.start(cfg, server);
    let mut late_starts: Vec<String> = Vec::new();
    let mut parts: BTreeMap<u32, Tally> = BTreeMap::new();
    let mut timelines: Vec<(f64, infer_bench_spec::results::PhaseTimeline)> = Vec::new();
    let load_start = LoadMeter::start(tel.host, server.pid());
    // Set when a launched server dies: the runs so far are kept.
    let mut died: Option<String> = None;
    for run in 0..cfg.load.runs {
        server.begin_run(run);
        telemetry.mark();
        let live = Arc::new(Live::default());
        let started_at = now_rfc3339();
        let run_start = Instant::now();
        let sink: Option<Sink> = requests.map(|log| {
            let tx = log.sender();
            let id = p.id.clone();
            let sink: Sink = Arc::new(move |r: &RequestRecord| {
                let _ = tx.send(request_line(&id, r, run_start));
            });
            sink
        });
        // Load sharding: this run starts at its agreed instant.
        let agreed = timetable.and_then(|t| t.start(&p.id, run));
        let (start_at, late_ms) = match agreed {
            Some(t) => {
                let (at, late) = super::agent::instant_of(t);
                (Some(at), late)
            }
            None => (None, 0.0),
        };
        let env = RunEnv {
            handle: rt.handle().clone(),
            interrupt: interrupt.clone(),
            live: live.clone(),
            sink,
            agent: opts.agent,
            start_at,
            material: material.clone(),
            slow_client: opts.slow_client,
        };
        let ticker = (opts.progress == Progress::Live)
            .then(|| super::progress::Ticker::start(label.to_string(), run, cfg, live.clone()));
        let out = run_once(backend.clone(), cfg, &p.hash, run, &env);
        if let Some(t) = ticker {
            t.stop();
        }
        if out.interrupted {
            return PointOutcome::Interrupted;
        }
        let stats = out.recorder.stats();
        telemetry.mark();
        telemetry.add_run(RunTimes {
            run,
            start: run_start,
            window: out
                .recorder
                .window_start()
                .map(|w| (w, w + std::time::Duration::from_secs_f64(stats.window_s))),
        });
        merged.merge(&out.recorder.run);
        merged_window_s += stats.window_s;
        concurrency_max = concurrency_max.max(stats.concurrency_max);
        for (k, t) in out.recorder.steps() {
            steps.entry(*k).or_default().merge(t);
        }
        for (k, t) in out.recorder.turns().into_iter().flatten() {
            turns.entry(*k).or_default().merge(t);
        }
        for (k, t) in out.recorder.parts().into_iter().flatten() {
            parts.entry(*k).or_default().merge(t);
        }
        let mut phases_origin_s = None;
        if let Some((origin, ph)) = out.recorder.phases() {
            let origin_s = if *origin >= telemetry.origin() {
                origin.duration_since(telemetry.origin()).as_secs_f64()
            } else {
                -telemetry.origin().duration_since(*origin).as_secs_f64()
            };
            phases_origin_s = Some(origin_s);
            timelines.push((origin_s, ph.to_data()));
        }
        let shard = agreed.map(|t| {
            let mut s = out.recorder.shard(
                out.started,
                humantime::format_rfc3339_millis(t).to_string(),
                late_ms,
            );
            s.telemetry_origin_s = phases_origin_s;
            s
        });
        if late_ms > LATE_START_MS {
            late_starts.push(format!(
                "run {} began {late_ms:.0} ms after its agreed start (the previous run overran its slot: give a longer --slot); its first arrivals went out late",
                run + 1
            ));
        }
        runs.push(RunResult {
            run,
            started_at,
            windows: out.recorder.windows(),
            histograms: out.recorder.run.histograms(),
            stats,
            shard,
        });
        if let Err(msg) = server.check_alive() {
            died = Some(msg);
            break;
        }
    }
    let mut pr = finish_point(
        p,
        runs,
        &merged,
        merged_window_s,
        concurrency_max,
        &steps,
        server.info(),
        &server.base_url(),
    );
    pr.telemetry = Some(telemetry.finish());
    workload(&mut pr, &turns);
    pr.warnings.extend(late_starts);
    pr.mix = mix_results(cfg, &parts, merged_window_s, open);
    pr.client = load_start.finish(tel.host);
    pr.preflight = findings;
    pr.memory = memory(&pr, &timelines, before_server);
    match died {
        Some(msg) => {
            pr.status = PointStatus::Failed;
            pr.failure = Some(format!("the server died: {msg}"));
            pr.valid = false;
            pr.invalid_reasons
                .push("the server died during the point".into());
            PointOutcome::ServerDied(msg, Box::new(pr))
        }
        None => PointOutcome::Done(Box::new(pr)),
    }
}

/// Memory by phase, from the point's telemetry and its runs' timelines.
pub fn memory(
    pr: &PointResult,
    timelines: &[(f64, infer_bench_spec::results::PhaseTimeline)],
    before_server: &BTreeMap<u32, u64>,
) -> Option<infer_bench_spec::results::MemoryPhases> {
    let tel = pr.telemetry.as_ref()?;
    let placed: Vec<crate::insight::PlacedTimeline<'_>> = timelines
        .iter()
        .map(|(origin_s, t)| crate::insight::PlacedTimeline {
            origin_s: *origin_s,
            timeline: t,
        })
        .collect();
    crate::insight::memory_phases(tel, &placed, before_server)
}

/// Each part of a mixed workload: its weight, its share of the measured
/// requests and its statistics over the point's window.
pub fn mix_results(
    cfg: &PointConfig,
    parts: &BTreeMap<u32, Tally>,
    window_s: f64,
    open: bool,
) -> Vec<infer_bench_spec::results::MixResult> {
    let total: u64 = parts.values().map(|t| t.counts().sent).sum();
    cfg.workload
        .mix
        .iter()
        .enumerate()
        .map(|(i, part)| {
            let stats = parts
                .get(&(i as u32))
                .map(|t| t.stats(window_s, open, 0))
                .unwrap_or_default();
            infer_bench_spec::results::MixResult {
                workload: part.workload.name.clone(),
                weight: part.weight,
                share: if total > 0 {
                    stats.requests.sent as f64 / total as f64
                } else {
                    0.0
                },
                stats,
            }
        })
        .collect()
}

/// CPU used by this process, the machine and a launched server over a
/// point's runs.
struct LoadMeter {
    at: Instant,
    host: Option<super::host::CpuTimes>,
    own: Option<f64>,
    server_pid: Option<u32>,
    server: Option<f64>,
}

impl LoadMeter {
    fn start(host: &dyn HostProbe, server_pid: Option<u32>) -> LoadMeter {
        LoadMeter {
            at: Instant::now(),
            host: host.cpu_times(),
            own: host.process_cpu_s(None),
            server_pid,
            server: server_pid.and_then(|p| host.process_cpu_s(Some(p))),
        }
    }

    fn finish(self, host: &dyn HostProbe) -> Option<infer_bench_spec::results::ClientLoad> {
        let wall = self.at.elapsed().as_secs_f64();
        if wall <= 0.0 {
            return None;
        }
        let own = self
            .own
            .zip(host.process_cpu_s(None))
            .map(|(a, b)| (b - a) / wall)?;
        Some(infer_bench_spec::results::ClientLoad {
            cores: host.cores(),
            process_cores: own.max(0.0),
            host_busy: self
                .host
                .zip(host.cpu_times())
                .and_then(|(a, b)| a.busy_until(&b)),
            server_cores: self
                .server
                .zip(self.server_pid.and_then(|p| host.process_cpu_s(Some(p))))
                .map(|(a, b)| ((b - a) / wall).max(0.0)),
        })
    }
}

/// A point that could not be measured at all.
pub fn failed_point(p: &Point, failure: String) -> PointResult {
    PointResult {
        id: p.id.clone(),
        slug: p.slug.clone(),
        hash: p.hash.clone(),
        axes: p.axes.iter().cloned().collect(),
        config: p.config.clone(),
        status: PointStatus::Failed,
        failure: Some(failure),
        valid: false,
        invalid_reasons: vec!["the point could not be measured".into()],
        warnings: Vec::new(),
        runs: Vec::new(),
        merged: Stats::default(),
        histograms: BTreeMap::new(),
        steps: Vec::new(),
        slo: Vec::new(),
        slo_pass: None,
        server: None,
        cost: None,
        telemetry: None,
        workload: None,
        turns: Vec::new(),
        agents: Vec::new(),
        mix: Vec::new(),
        memory: None,
        client: None,
        preflight: Vec::new(),
        hints: Vec::new(),
    }
}

/// A measured point from its runs and their tallies merged: the merged
/// statistics, ramp steps, and whether the target was unreachable.
#[allow(clippy::too_many_arguments)]
pub fn finish_point(
    p: &Point,
    runs: Vec<RunResult>,
    merged: &Tally,
    window_s: f64,
    concurrency_max: u64,
    steps: &BTreeMap<u32, Tally>,
    server: Option<ServerInfo>,
    base_url: &str,
) -> PointResult {
    let cfg = &p.config;
    let open = matches!(cfg.load.level, Level::Rate(_));
    let mut stats = merged.stats(window_s, open, concurrency_max);
    // Offered and achieved rates are per run; the merged figures are their means.
    if open && !runs.is_empty() {
        let mean = |f: &dyn Fn(&Stats) -> Option<f64>| {
            let v: Vec<f64> = runs.iter().filter_map(|r| f(&r.stats)).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        stats.offered_rate = mean(&|s| s.offered_rate);
        stats.achieved_send_rate = mean(&|s| s.achieved_send_rate);
    }
    let step_len_s = cfg
        .load
        .ramp
        .as_ref()
        .map(|r| r.every.as_secs_f64() * cfg.load.runs as f64)
        .unwrap_or(0.0);
    let steps = steps
        .iter()
        .map(|(k, t)| StepResult {
            step: *k,
            level: cfg
                .load
                .ramp
                .as_ref()
                .and_then(|r| r.levels.get(*k as usize))
                .map(|l| l.to_string())
                .unwrap_or_default(),
            stats: t.stats(step_len_s, open, 0),
        })
        .collect();
    let mut pr = PointResult {
        id: p.id.clone(),
        slug: p.slug.clone(),
        hash: p.hash.clone(),
        axes: p.axes.iter().cloned().collect(),
        config: cfg.clone(),
        status: PointStatus::Complete,
        failure: None,
        valid: true,
        invalid_reasons: Vec::new(),
        warnings: Vec::new(),
        histograms: merged.histograms(),
        merged: stats,
        runs,
        steps,
        slo: Vec::new(),
        slo_pass: None,
        server,
        cost: None,
        telemetry: None,
        workload: None,
        turns: Vec::new(),
        agents: Vec::new(),
        mix: Vec::new(),
        memory: None,
        client: None,
        preflight: Vec::new(),
        hints: Vec::new(),
    };
    if pr.merged.requests.succeeded == 0 && pr.merged.requests.failed > 0 {
        let connect_only = pr
            .merged
            .errors
            .keys()
            .all(|k| k == "connect" || k == "timeout_connect");
        if connect_only {
            pr.status = PointStatus::Failed;
            let example = pr
                .merged
                .error_examples
                .values()
                .next()
                .cloned()
                .unwrap_or_default();
            pr.failure = Some(format!(
                "the target is unreachable at {base_url}: {example}"
            ));
        }
    }
    pr
}

/// An agent that began a run later than this after its agreed start says so.
const LATE_START_MS: f64 = 10.0;

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

/// Per-request records, streamed to disk by a writer thread.
pub struct RequestLog {
    tx: std::sync::mpsc::Sender<String>,
    thread: std::thread::JoinHandle<()>,
}

impl RequestLog {
    fn open(path: &std::path::Path) -> Result<RequestLog> {
        let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let thread = std::thread::spawn(move || {
            let mut w = std::io::BufWriter::new(file);
            for line in rx {
                let _ = w.write_all(line.as_bytes());
            }
            let _ = w.flush();
        });
        Ok(RequestLog { tx, thread })
    }
    fn sender(&self) -> std::sync::mpsc::Sender<String> {
        self.tx.clone()
    }
    fn close(self) {
        drop(self.tx);
        let _ = self.thread.join();
    }
}

fn request_line(point: &str, r: &RequestRecord, run_start: Instant) -> String {
    let ms = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64() * 1e3;
    let first = r
        .events
        .first()
        .map(|e| e.at_ns as f64 / 1e6 + ms(r.t_sched, r.t_send));
    let last = r
        .events
        .last()
        .map(|e| e.at_ns as f64 / 1e6 + ms(r.t_sched, r.t_send));
    let (out, source) = r.output_tokens();
    let mut line = serde_json::to_string(&serde_json::json!({
        "point": point,
        "run": r.run,
        "index": r.index,
        "turn": r.turn,
        "warmup": r.warmup,
        "step": r.step,
        "sched_ms": ms(run_start, r.t_sched),
        "queue_ms": ms(r.t_sched, r.t_slot),
        "dispatch_lag_ms": ms(r.t_slot, r.t_send),
        "ttft_ms": first,
        "e2e_ms": last,
        "events": r.events.len(),
        "input_tokens_requested": r.requested_input,
        "input_tokens": r.usage.prompt_tokens,
        "output_tokens_requested": r.requested_output,
        "output_tokens": out,
        "token_source": source,
        "error": r.failure.as_ref().map(|f| f.class.name()),
        "error_detail": r.failure.as_ref().map(|f| f.detail.as_str()),
        "ttft_from_send_ms": r.events.first().map(|e| e.at_ns as f64 / 1e6),
        "tpot_ms": match (r.events.first(), r.events.last()) {
            (Some(f), Some(l)) if out >= 2 => Some((l.at_ns - f.at_ns) as f64 / 1e6 / (out - 1) as f64),
            _ => None,
        },
        "server_timing": r.server_timing,
    }))
    .expect("serializes");
    line.push('\n');
    line
}

/// Judges validity, SLOs and cost of a finished point.
pub fn assess(spec: &Spec, pr: &mut PointResult) {
    if pr.status == PointStatus::Failed {
        return;
    }
    let v = &spec.validity;
    let cfg = &pr.config;
    let mut reasons = Vec::new();
    let mut warnings = Vec::new();
    for r in &pr.runs {
        let s = &r.stats;
        let tag = if pr.runs.len() > 1 {
            format!("run {}: ", r.run + 1)
        } else {
            String::new()
        };
        if s.window_s < v.min_duration.as_secs_f64() {
            reasons.push(format!(
                "{tag}the measurement window was {:.1}s, below the minimum {}",
                s.window_s, v.min_duration
            ));
        }
        let n = s.requests.succeeded + s.requests.failed;
        if n < v.min_requests {
            reasons.push(format!(
                "{tag}{n} requests measured, below the minimum {}",
                v.min_requests
            ));
        }
        if let (Some(off), Some(ach)) = (s.offered_rate, s.achieved_send_rate) {
            let gap = (ach / off - 1.0).abs();
            if gap > v.max_rate_gap.fraction() {
                reasons.push(format!("{tag}requests were sent at {ach:.2}/s against {off:.2}/s offered ({:.1}% apart; the limit is {})", gap * 100.0, v.max_rate_gap));
            }
        }
        if let Some(lag) = s.latency_ms.get("dispatch_lag") {
            if lag.p99 > v.max_dispatch_lag_p99.as_millis_f64() {
                reasons.push(format!(
                    "{tag}the client itself was late: dispatch lag p99 {:.3} ms is above the {} budget",
                    lag.p99, v.max_dispatch_lag_p99
                ));
            }
        }
        if s.requests.unfinished > 0 {
            reasons.push(format!(
                "{tag}{} requests did not finish",
                s.requests.unfinished
            ));
        }
    }
    if pr.merged.requests.succeeded == 0 {
        reasons.push("no request succeeded".into());
    }
    if v.percentile_sample_check {
        for gate in &spec.slo {
            if let Some(infer_bench_spec::Stat::Percentile(p)) = gate.expr.stat {
                let need = samples_for_percentile(p);
                let have = pr
                    .merged
                    .latency_ms
                    .get(gate.metric.name())
                    .map(|s| s.count)
                    .unwrap_or(0);
                if have < need {
                    reasons.push(format!(
                        "{} of {} needs at least {need} samples to mean something (MLPerf's early-stopping bound); this point has {have}",
                        gate.expr.stat.map(|s| s.name()).unwrap_or_default(),
                        gate.metric
                    ));
                }
            }
        }
    }
    let t = &pr.merged.tokens;
    if let Some(rep) = t.reported_input_mean {
        if t.requested_input_mean > 0.0 {
            let dev = rep / t.requested_input_mean - 1.0;
            if dev.abs() > 0.05 {
                warnings.push(format!(
                    "prompts averaged {rep:.0} tokens as the server counts them against {:.0} requested ({:+.0}%){}",
                    t.requested_input_mean,
                    dev * 100.0,
                    if cfg.workload.api == infer_bench_spec::raw::Api::Chat { "; the chat template adds tokens" } else { "" }
                ));
            }
        }
    }
    if cfg.workload.ignore_eos && pr.merged.requests.succeeded > 0 {
        let asked = t.requested_output_mean;
        let got = t.output.mean;
        if asked > 0.0 && got < asked * 0.95 {
            warnings.push(format!("outputs averaged {got:.0} tokens against {asked:.0} requested: the server may not honour ignore_eos"));
        }
    }
    if pr.merged.requests.resent > 0 {
        warnings.push(format!(
            "{} request(s) were re-sent once because the server closed a kept-alive connection as they went out (their TTFT counts the lost attempt)",
            pr.merged.requests.resent
        ));
    }
    if t.output_source.contains_key("events") {
        warnings.push("some output token counts were counted from events (the server sent no usage): approximate".into());
    }
    pr.valid = reasons.is_empty();
    pr.invalid_reasons = reasons;
    pr.warnings.extend(warnings);
    pr.slo = spec
        .slo
        .iter()
        .map(|g| {
            let value = pr.value(g.metric, g.expr.stat.as_ref());
            let threshold = match g.expr.threshold {
                Threshold::Duration(d) => d.as_millis_f64(),
                Threshold::Percent(p) => p.fraction(),
                Threshold::Rate(r) => r.as_per_second(),
                Threshold::Number(n) => n,
            };
            let pass = value.is_some_and(|v| g.expr.cmp.holds(v, threshold));
            SloResult {
                metric: g.metric.name().to_string(),
                expr: g.expr.to_string(),
                value,
                pass,
                note: value.is_none().then(|| "no data".to_string()),
            }
        })
        .collect();
    pr.slo_pass = (!pr.slo.is_empty()).then(|| pr.slo.iter().all(|s| s.pass));
    pr.hints = crate::insight::hints(pr, &spec.validity);
    let energy_j = pr.telemetry.as_ref().and_then(|t| t.gpu.energy_j);
    let gpus = crate::cost::gpus(&spec.cost, &pr.config);
    pr.cost = crate::cost::compute(&spec.cost, gpus, &pr.merged, energy_j);
}

/// Requests needed before a percentile means something: the smallest n
/// with p^n <= 1% (zero violations in n draws rule out a true rate above
/// 1-p with 99% confidence; MLPerf's early-stopping rule gives 459 for p99).
pub fn samples_for_percentile(p: f64) -> u64 {
    let q = p / 100.0;
    if q <= 0.0 || q >= 1.0 {
        return 1;
    }
    ((0.01f64).ln() / q.ln()).ceil() as u64
}

/// The histogram of a metric in a point, decoded.
pub fn point_hist(pr: &PointResult, metric: Metric) -> Option<Hist> {
    infer_bench_results::hist::decode(pr.histograms.get(metric.name())?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_sample_bounds_match_mlperf() {
        assert_eq!(samples_for_percentile(99.0), 459);
        assert_eq!(samples_for_percentile(50.0), 7);
        assert_eq!(samples_for_percentile(90.0), 44);
        assert_eq!(samples_for_percentile(99.9), 4603);
    }
}
