//! Running a plan: points grouped by the server
//! they need (each server starts once per group), each point run in turn
//! (`point`) and judged (`assess`), and the results file rewritten
//! atomically after every point so an interrupted run keeps what finished.
//! Everything the run writes passes the run's redactor (`secrets`) first:
//! the results before every write, the request log line by line; the
//! redactor is installed process-wide, so that the observer masks what it
//! shows with it too.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use super::assemble::failed_point;
use super::assess::assess;
use super::context::Interrupt;
use super::host::HostProbe;
use super::observe::Event;
use super::options::RunOptions;
use super::point::{PlanEnv, PointJob, PointOutcome, TelemetryEnv, run_point};
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
    // Every secret the spec reaches, masked in whatever this run writes;
    // the process-wide copy serves the observer and the printer of a
    // run's error.
    let redactor = super::secrets::redactor(spec);
    redact::install(redactor.clone());
    warn_tls_insecure(plan, opts);
    // Nothing of the run is written through a link we did not make: an
    // out dir a checkout holds as a link is refused, and so is a link in
    // it where a file of the run goes (before any server starts).
    infer_bench_results::files::create_dir_all(&opts.out_dir)?;
    // One run per folder: taken before anything of the run is written.
    let _lock = super::lock::lock(&opts.out_dir)?;
    check_outputs(plan, opts)?;
    let mut results = new_results(spec, plan, opts, rt, gpus, &redactor);
    // Tokenizers and datasets are read before any server starts, once per
    // (workload, model): a malformed file stops the run here.
    let materials = super::workload::materials(spec, plan)?;
    let path = results_path(&opts.out_dir);
    save(&mut results, &redactor, &path)?;
    let requests = if opts.requests_jsonl {
        Some(RequestLog::open(
            &opts.out_dir.join("requests.jsonl"),
            redactor.clone(),
        )?)
    } else {
        None
    };
    let order = groups(plan);
    let timetable = match (opts.agent, opts.start_at) {
        (Some(_), Some(start)) => Some(super::agent::Timetable::new(
            order.iter().flatten().map(|&i| &plan.points[i]),
            start,
            opts.slot,
        )?),
        _ => None,
    };
    let mut run = PlanRun {
        spec,
        plan,
        path,
        results,
        redactor,
        materials,
        after: time_after(plan, &order),
        log_dir: opts.out_dir.join("servers"),
        done: 0,
        // One agent of several asks: the others would ask the same server
        // the same prompts.
        quality: spec
            .quality
            .as_ref()
            .filter(|_| opts.agent.is_none_or(|(k, _)| k == 1))
            .map(|q| {
                (
                    super::quality::PromptSet::new(q, spec.seed),
                    BTreeMap::new(),
                )
            }),
        env: PlanEnv {
            rt,
            interrupt: &interrupt,
            requests,
            opts,
            timetable,
            tel: TelemetryEnv {
                config: &spec.telemetry,
                gpus,
                host,
            },
        },
    };
    for group in order {
        if interrupt.is_set() {
            break;
        }
        run.group(&group)?;
    }
    run.end()
}

/// A new results file for `plan`: every point pending.
fn new_results(
    spec: &Spec,
    plan: &Plan,
    opts: &RunOptions,
    rt: &tokio::runtime::Runtime,
    gpus: &dyn GpuSource,
    redactor: &Redactor,
) -> Results {
    Results {
        format: FORMAT.into(),
        version: VERSION,
        metrics_version: METRICS_VERSION,
        tool: ToolInfo::current(),
        spec: SpecInfo {
            name: spec.name.clone(),
            path: spec.path.display().to_string(),
            sha256: sha256_hex(&spec.source),
            seed: spec.seed,
            source: redact::spec_source(&spec.source, redactor),
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
    }
}

/// The plan's estimated time left after each point (in the order they
/// run), for a progress display's ETA; `None` where a later point ends by
/// request count.
fn time_after(plan: &Plan, order: &[Vec<usize>]) -> Vec<Option<f64>> {
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
    after
}

/// A plan under way: its results so far, rewritten after every point so
/// an interrupted run keeps what finished, and what every point runs with.
struct PlanRun<'a> {
    spec: &'a Spec,
    plan: &'a Plan,
    path: PathBuf,
    results: Results,
    redactor: Redactor,
    materials: Vec<Arc<infer_bench_workload::Material>>,
    after: Vec<Option<f64>>,
    /// Where launched servers' logs go.
    log_dir: PathBuf,
    /// Points taken so far, for their labels.
    done: usize,
    env: PlanEnv<'a>,
    /// `[quality]`: the prompts, and each server's answers so far.
    quality: Option<(
        super::quality::PromptSet,
        BTreeMap<super::quality::ServerKey, super::quality::Phase>,
    )>,
}

impl PlanRun<'_> {
    /// Rewrites the results file (redacted).
    fn save(&mut self) -> Result<()> {
        save(&mut self.results, &self.redactor, &self.path)
    }

    /// Runs one group of points on the server they share: started once,
    /// stopped after its last point.
    fn group(&mut self, group: &[usize]) -> Result<()> {
        let env = &self.env;
        let first = &self.plan.points[group[0]].config;
        let name = group_name(first);
        // GPU memory before this group's server starts (memory by phase).
        let before_server =
            super::preflight::memory_now(first, self.spec.telemetry.gpu, env.tel.gpus);
        let started = Instant::now();
        let server = Server::start(
            first,
            self.spec.dir(),
            &self.log_dir,
            env.rt.handle(),
            env.interrupt,
        )
        .map_err(|e| e.to_string());
        let mut server = match server {
            Ok(s) => s,
            Err(msg) => {
                if env.interrupt.is_set() {
                    return Ok(());
                }
                env.opts.observer.event(&Event::ServerFailed {
                    group: &name,
                    message: &msg,
                });
                for &i in group {
                    let p = &self.plan.points[i];
                    push_point(
                        &mut self.results,
                        failed_point(p, format!("the server could not be started: {msg}")),
                    );
                    self.done += 1;
                }
                return self.save();
            }
        };
        if let Some(message) = server.watchdog_error() {
            env.opts.observer.event(&Event::NoWatchdog { message });
        }
        if !matches!(server, Server::External { .. }) {
            let url = server.base_url();
            let info = server.info();
            env.opts.observer.event(&Event::ServerReady {
                group: &name,
                url: (!matches!(server, Server::Virtual(_))).then_some(url.as_str()),
                after: started.elapsed(),
                sim: info.as_ref().filter(|i| i.kv_dtype.is_some()),
            });
        }
        // Only a server of text generation is asked (an embedder, a
        // reranker or a tensor model has no answers to compare).
        let generates = group.iter().any(|&i| {
            use infer_bench_spec::raw::Api;
            matches!(
                self.plan.points[i].config.workload.api,
                Api::Chat | Api::Completions | Api::Responses | Api::Messages
            )
        });
        if generates {
            self.ask_quality(first, &server, &name);
        }
        let mut dead: Option<String> = None;
        let total = self.plan.points.len();
        for &i in group {
            let p = &self.plan.points[i];
            self.done += 1;
            let label = format!("[{}/{total}] {}", self.done, p.slug);
            let go_on = match &p.config.load.search {
                None => self.measure(p, i, &label, &mut server, &before_server, &mut dead)?,
                Some(search) => {
                    self.search(p, search, i, &label, &mut server, &before_server, &mut dead)?
                }
            };
            if !go_on {
                break;
            }
        }
        server.stop(self.env.rt.handle());
        self.settle_quality();
        self.save()
    }

    /// The server's quality phase, before its points' timed runs.
    fn ask_quality(&mut self, cfg: &PointConfig, server: &Server, name: &str) {
        let (Some(q), Some((set, phases))) = (self.spec.quality.as_ref(), self.quality.as_mut())
        else {
            return;
        };
        if self.env.interrupt.is_set() {
            return;
        }
        let phase = super::quality::ask(q, set, cfg, server, self.env.rt, self.env.interrupt);
        self.env.opts.observer.event(&Event::QualityDone {
            group: name,
            answered: phase.answered(),
            prompts: set.prompts.len() as u64,
            elapsed: std::time::Duration::from_secs_f64(phase.elapsed_s),
        });
        phases.insert(super::quality::key_of(cfg), phase);
    }

    /// Every point's quality figures from the answers so far.
    fn settle_quality(&mut self) {
        if let (Some(q), Some((set, phases))) = (self.spec.quality.as_ref(), self.quality.as_ref())
        {
            super::quality::settle(self.spec, q, set, phases, &mut self.results);
        }
    }

    /// Runs one point (a plan's, or a search's probe) on its group's
    /// server, judges it, keeps it and rewrites the results file; false
    /// when the run is to stop (interrupted). Once the server has died,
    /// the group's later points fail without running.
    #[allow(clippy::too_many_arguments)]
    fn measure(
        &mut self,
        p: &Point,
        i: usize,
        label: &str,
        server: &mut Server,
        before_server: &std::collections::BTreeMap<u32, u64>,
        dead: &mut Option<String>,
    ) -> Result<bool> {
        if let Some(msg) = dead {
            push_point(
                &mut self.results,
                failed_point(p, format!("the server died during an earlier point: {msg}")),
            );
            self.save()?;
            return Ok(true);
        }
        let job = PointJob {
            point: p,
            material: self.materials[i].clone(),
            label,
            after_s: self.after[i],
            before_server,
        };
        let observer = &self.env.opts.observer;
        match run_point(job, server, &self.env) {
            PointOutcome::Interrupted => return Ok(false),
            PointOutcome::Done(mut pr) => {
                assess(self.spec, &mut pr);
                if let Some(a) = self.results.agent.as_mut() {
                    if a.start_offset_ms.is_none() {
                        a.start_offset_ms = pr
                            .runs
                            .first()
                            .and_then(|r| r.shard.as_ref())
                            .map(|s| s.start_late_ms);
                    }
                }
                observer.event(&Event::PointDone { label, point: &pr });
                push_point(&mut self.results, *pr);
            }
            PointOutcome::ServerDied(msg, pr) => {
                observer.event(&Event::ServerDied {
                    group: &group_name(&p.config),
                    message: &msg,
                });
                *dead = Some(msg);
                push_point(&mut self.results, *pr);
            }
        }
        self.save()?;
        Ok(!self.env.interrupt.is_set())
    }

    /// A capacity search: probes at the levels the searcher chooses, each
    /// measured like a point, until it has its answer; false when the run
    /// is to stop.
    #[allow(clippy::too_many_arguments)]
    fn search(
        &mut self,
        p: &Point,
        search: &infer_bench_spec::Search,
        i: usize,
        label: &str,
        server: &mut Server,
        before_server: &std::collections::BTreeMap<u32, u64>,
        dead: &mut Option<String>,
    ) -> Result<bool> {
        let mut searcher = super::search::Searcher::new(search);
        let mut go_on = true;
        while let Some(level) = searcher.next() {
            let probe = p.probe(level);
            let n = searcher.probes().len() + 1;
            let label = format!("{label} probe {n}: {}", probe.slug);
            go_on = self.measure(&probe, i, &label, server, before_server, dead)?;
            let Some(pr) = self.results.points.iter().rev().find(|r| r.id == probe.id) else {
                break;
            };
            searcher.record(&probe.id, level, super::search::verdict(search.target, pr));
            let unreachable = pr.status == PointStatus::Failed;
            let answer = searcher.result(&p.id, &p.slug, false);
            put_search(&mut self.results, answer);
            if !go_on || unreachable {
                break;
            }
        }
        let finished = go_on && searcher.next().is_none();
        let answer = searcher.result(&p.id, &p.slug, finished);
        self.env.opts.observer.event(&Event::SearchDone {
            label,
            answer: &answer,
        });
        put_search(&mut self.results, answer);
        if finished {
            self.results.pending.retain(|id| *id != p.id);
        }
        self.save()?;
        Ok(go_on)
    }

    /// Closes the request log and writes the results a last time.
    fn end(mut self) -> Result<Results> {
        if let Some(r) = self.env.requests.take() {
            r.close();
        }
        self.results.interrupted = self.env.interrupt.is_set();
        self.results.complete = self.results.pending.is_empty();
        self.results.finished_at = Some(now_rfc3339());
        self.save()?;
        Ok(self.results)
    }
}

/// Refuses a symbolic link where the run writes a file of its own in
/// `opts.out_dir`: the results, the request log, the server logs.
fn check_outputs(plan: &Plan, opts: &RunOptions) -> Result<()> {
    use infer_bench_results::files::check;
    let out = &opts.out_dir;
    check(&results_path(out))?;
    check(&out.join("requests.jsonl"))?;
    let logs = out.join("servers");
    check(&logs)?;
    for p in plan
        .points
        .iter()
        .filter(|p| p.config.target.launch.is_some())
    {
        check(&super::launch::log_path(&logs, &p.config))?;
    }
    Ok(())
}

/// Redacts the results in memory (so every later reader, the summary and
/// the exporters included, sees them redacted) and rewrites the file.
fn save(results: &mut Results, redactor: &Redactor, path: &std::path::Path) -> Result<()> {
    results.redact(redactor);
    results.write(path)?;
    Ok(())
}

/// Tells the observer once which targets are reached without checking
/// their TLS certificates.
fn warn_tls_insecure(plan: &Plan, opts: &RunOptions) {
    let mut names: Vec<&str> = plan
        .points
        .iter()
        .filter(|p| p.config.target.tls_insecure)
        .map(|p| p.config.target.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    for target in names {
        opts.observer.event(&Event::TlsInsecure { target });
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
    if let Some(a) = &cfg.server_args {
        s.push('/');
        s.push_str(&a.name);
    }
    s
}

/// Points grouped by (target, model, precision, server_args), in plan
/// order of first appearance: each group shares one server, so a server
/// is started once per setting of its flags however the matrix orders
/// its axes.
pub fn groups(plan: &Plan) -> Vec<Vec<usize>> {
    type Key = (String, String, Option<String>, Option<String>);
    let mut keys: Vec<Key> = Vec::new();
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (i, p) in plan.points.iter().enumerate() {
        let c = &p.config;
        let key = (
            c.target.name.clone(),
            c.model.name.clone(),
            c.precision.as_ref().map(|p| p.name.clone()),
            c.server_args.as_ref().map(|a| a.name.clone()),
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
