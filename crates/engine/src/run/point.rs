//! Running one point: its client and telemetry, every run of it through
//! the engine (with the request log fed as requests finish), their tallies
//! merged and assembled into a `PointResult`, and what this process, the
//! machine and a launched server spent doing it. Running a plan and
//! assembling a point's result lived here too: their public items keep
//! their old paths here, which the command line, tests and other crates use.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use super::assemble::{failed_point, finish_point, memory, mix_results};
use super::engine::{Interrupt, Live, RunEnv, Sink, run_once};
use super::host::HostProbe;
use super::options::{Progress, RunOptions};
use super::recorder::Tally;
use super::requests::{LineOptions, RequestLog, RunClock, request_line};
use super::servers::Server;
use infer_bench_protocol::{Backend, RequestRecord};
use infer_bench_protocol::{ClientOptions, HttpBackend, Reading, openai};
use infer_bench_results::{ClientLoad, PhaseTimeline, PointStatus, RunResult, now_rfc3339};
use infer_bench_spec::Dialect;
use infer_bench_spec::Level;
use infer_bench_spec::plan::{Point, PointConfig};
use infer_bench_spec::results::PointResult;
use infer_bench_telemetry::gpu::GpuSource;
use infer_bench_telemetry::scrape::HttpMetrics;
use infer_bench_telemetry::session::{self, RunTimes, ScrapePlan, Session};

// Old paths, used outside the engine.

/// What a point's telemetry needs.
pub(super) struct TelemetryEnv<'a> {
    pub(super) config: &'a infer_bench_spec::Telemetry,
    pub(super) gpus: &'a dyn GpuSource,
    pub(super) host: &'a dyn HostProbe,
}

impl TelemetryEnv<'_> {
    /// Starts a point's GPU sampling and metrics scraping.
    fn start(&self, cfg: &PointConfig, server: &Server) -> Session {
        let served = server.metrics_url(cfg);
        let sim = match server {
            Server::Sim(_) => served.as_deref().map(session::SimGpus::Served),
            Server::Virtual(_) => Some(session::SimGpus::Virtual),
            _ => None,
        };
        let gpu = session::gpu_plan(self.config.gpu, cfg, self.gpus, sim);
        let scrape = served
            .clone()
            .filter(|_| self.config.server_metrics)
            .and_then(|url| {
                let timeout = std::time::Duration::from_secs(2);
                let source =
                    HttpMetrics::for_target(&url, &cfg.target, &server.base_url(), timeout)
                        .map_err(|e| {
                            let r = infer_bench_results::redact::global();
                            eprintln!(
                                "warning: {}: not scraping {}: {}",
                                cfg.target.name,
                                r.text(&url),
                                r.text(&e.to_string())
                            )
                        })
                        .ok()?;
                Some(ScrapePlan {
                    url,
                    source: Box::new(source),
                    interval: self.config.scrape_interval.as_std(),
                })
            });
        // A dcgm-exporter, and a simulator's modelled GPUs, are scraped like
        // server metrics, on their interval.
        let gpu_interval = if cfg.target.gpu_metrics_url.is_some() || sim.is_some() {
            self.config.scrape_interval.as_std()
        } else {
            self.config.interval.as_std()
        };
        Session::start(gpu, gpu_interval, scrape)
    }
}

/// How running a point ended.
pub(super) enum PointOutcome {
    Done(Box<PointResult>),
    ServerDied(String, Box<PointResult>),
    Interrupted,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn run_point(
    p: &Point,
    material: Arc<infer_bench_workload::Material>,
    server: &mut Server,
    rt: &tokio::runtime::Runtime,
    interrupt: &Arc<Interrupt>,
    requests: Option<&RequestLog>,
    opts: &RunOptions,
    timetable: Option<&super::agent::Timetable>,
    label: &str,
    after_s: Option<f64>,
    tel: &TelemetryEnv<'_>,
    before_server: &BTreeMap<u32, u64>,
) -> PointOutcome {
    let cfg = &p.config;
    let findings = super::preflight::check(cfg, tel.config.gpu, tel.gpus, tel.host, server.pid());
    // Said once, in the summary (which names every point a finding holds
    // for), not also here per point; `-v` says them as they are found.
    if opts.verbose {
        for f in &findings {
            eprintln!("{label}: pre-flight: {}", f.message);
        }
    }
    let api_key = cfg
        .target
        .api_key_env
        .as_ref()
        .and_then(|v| std::env::var(v).ok());
    // The compiler resolved the path against the spec's folder and checked
    // the file; one that changed since fails the point, never silently.
    let ca = match cfg.target.ca_cert.as_ref().map(|path| {
        infer_bench_spec::files::read_regular(
            std::path::Path::new(path),
            infer_bench_spec::files::MAX_CA_CERT_BYTES,
        )
        .map_err(|e| format!("cannot read the CA certificate {path}: {e}"))
    }) {
        Some(Err(e)) => return PointOutcome::Done(Box::new(failed_point(p, e))),
        Some(Ok(pem)) => Some(pem),
        None => None,
    };
    let conns = Connections::of(&cfg.load, opts.agent);
    let base_url = server.base_url();
    let options = ClientOptions {
        base_url: &base_url,
        api_key,
        headers: &cfg.target.headers,
        tls_insecure: cfg.target.tls_insecure,
        ca_cert_pem: ca,
        pool_size: conns.idle,
        connect_timeout: cfg.load.timeouts.connect.as_std(),
    };
    let declared = match (cfg.target.dialect, &server) {
        (Some(d), _) => Some((d, "spec")),
        // The simulator takes vLLM's fields.
        (None, Server::Sim(_) | Server::Virtual(_)) => Some((Dialect::Vllm, "server")),
        (None, _) => None,
    };
    let mut backend = {
        let _guard = rt.enter();
        let protocol = openai::for_workload(
            &cfg.workload,
            cfg.served_name(),
            declared.map_or(Dialect::Openai, |(d, _)| d),
        );
        let reading = Reading {
            timeouts: cfg.load.timeouts,
            limits: cfg.load.limits,
            keep_reply: cfg.workload.conversation.is_some(),
        };
        match HttpBackend::new(&options, protocol, reading) {
            Ok(b) => b,
            Err(e) => return PointOutcome::Done(Box::new(failed_point(p, e.to_string()))),
        }
    };
    // Undeclared: the server is asked (its connection stays in the pool).
    let (dialect, dialect_from) =
        declared.unwrap_or_else(|| match rt.block_on(openai::identify(&backend)) {
            Some(d) => {
                let protocol = openai::for_workload(&cfg.workload, cfg.served_name(), d);
                match backend.set_protocol(protocol) {
                    Ok(()) => (d, "server"),
                    Err(_) => (Dialect::Openai, "default"),
                }
            }
            None => (Dialect::Openai, "default"),
        });
    let backend = Arc::new(backend);
    if opts.verbose {
        let how = match dialect_from {
            "spec" => "declared in the spec",
            "server" if matches!(server, Server::Sim(_) | Server::Virtual(_)) => "the simulator's",
            "server" => "named by the server's /v1/models",
            _ => "the server did not name one",
        };
        eprintln!("{label}: requests in the {dialect} dialect ({how})");
    }
    let unsent: Vec<&str> = infer_bench_spec::dialect::extra_fields_asked(&cfg.workload)
        .into_iter()
        .map(|(field, _)| field)
        .filter(|f| dialect.wire_name(f).is_none())
        .collect();
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
    let mut timelines: Vec<(f64, PhaseTimeline)> = Vec::new();
    let load_start = LoadMeter::start(tel.host, server.pid());
    // Set when a launched server dies: the runs so far are kept.
    let mut died: Option<String> = None;
    // Set when a run stopped early because the server could not be reached.
    let mut stopped: Option<String> = None;
    // Set when connections could not all be opened before a run (said once).
    let mut warm_failed: Option<String> = None;
    let virtual_time = matches!(server, Server::Virtual(_));
    // In virtual time each run's clock starts after the previous run's last
    // simulated instant, so the point's runs (and their telemetry) follow
    // one another on one timeline, as real runs do.
    let mut virtual_next: Option<Instant> = virtual_time.then(|| telemetry.origin());
    let virtual_sampling = virtual_time
        .then(|| super::virtual_time::Sampling {
            every: tel.config.scrape_interval.as_std(),
            metrics: tel.config.server_metrics,
            gpus: tel.config.gpu != infer_bench_spec::raw::GpuMode::Off,
        })
        .filter(|s| s.metrics || s.gpus);
    for run in 0..cfg.load.runs {
        server.begin_run(run);
        // Every run starts with its connections open, none measured; as
        // many as the open-file limit leaves room for (the pool keeps the
        // last run's, which need none).
        let in_process = matches!(server, Server::Sim(_));
        let (warm, room) = match descriptor_room(in_process) {
            _ if virtual_time => (0, None),
            Some(room) if room < conns.warm => (room, Some(room)),
            _ => (conns.warm, None),
        };
        let warming = Instant::now();
        let warmed = if virtual_time {
            Ok(())
        } else {
            rt.block_on(backend.warm(warm))
        };
        if opts.verbose && !virtual_time {
            eprintln!(
                "{label}: run {}: {warm} connections opened before the clock in {:.1} ms{}",
                run + 1,
                warming.elapsed().as_secs_f64() * 1e3,
                warmed
                    .as_ref()
                    .err()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            );
        }
        if let Err(e) = warmed {
            warm_failed.get_or_insert_with(|| format!("run {}: {e}", run + 1));
        }
        if room.is_some() && run == 0 {
            warm_failed.get_or_insert_with(|| {
                format!(
                    "run 1: {warm} of {} connections were opened before the run: the open-file limit ({}) leaves room for no more{}; the run opened the rest as it went, and any it could not open failed as client_limit",
                    conns.warm,
                    open_file_limit().unwrap_or(0),
                    if in_process { " (with the simulator in this process, a connection takes a descriptor at each end)" } else { "" }
                )
            });
        }
        telemetry.mark();
        let live = Arc::new(Live::default());
        let started_at = now_rfc3339();
        let run_start = match virtual_next {
            Some(t) if virtual_time => t,
            _ => Instant::now(),
        };
        let sink: Option<Sink> = requests.map(|log| {
            let tx = log.sender();
            let id = p.id.clone();
            // The run's one reading of the wall clock: every line's Unix
            // times are converted through it.
            let clock = RunClock::new(run_start);
            let line = LineOptions {
                events: opts.request_events,
                connect_in_latency: cfg.load.cold_connections,
            };
            let sink: Sink = Arc::new(move |r: &RequestRecord| {
                let _ = tx.send(request_line(&id, r, &clock, line));
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
            start_at: if virtual_time {
                Some(run_start)
            } else {
                start_at
            },
            material: material.clone(),
            slow_client: opts.slow_client,
        };
        let ticker = (opts.progress == Progress::Live).then(|| {
            super::progress::Ticker::start(label.to_string(), run, cfg, live.clone(), after_s)
        });
        let out = if virtual_time {
            match super::virtual_time::run_once_virtual(
                &*backend,
                cfg,
                &p.hash,
                run,
                &env,
                virtual_sampling,
            ) {
                Ok(v) => {
                    virtual_next = Some(v.ended + std::time::Duration::from_secs(1));
                    if let Some(s) = virtual_sampling.filter(|s| s.metrics) {
                        telemetry.add_scrapes(VIRTUAL_METRICS, s.every, v.scrapes);
                    }
                    if let Some((devices, samples)) = v.gpus {
                        telemetry.add_gpu_samples(devices, samples);
                    }
                    v.outcome
                }
                Err(e) => return PointOutcome::Done(Box::new(failed_point(p, e.to_string()))),
            }
        } else {
            run_once(backend.clone(), cfg, &p.hash, run, &env)
        };
        if let Some(t) = ticker {
            t.stop();
        }
        if out.interrupted {
            return PointOutcome::Interrupted;
        }
        if let Some(why) = &out.stopped {
            // Said once, in the point's failure (its progress line and the
            // summary), not also on a line of its own.
            stopped.get_or_insert_with(|| why.clone());
        }
        let stats = out.recorder.stats();
        if opts.verbose {
            let failures = stats
                .errors
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ");
            eprintln!(
                "{label}: run {}: window {:.2} s, {} sent, {} ok, {} failed{}, {:.2} req/s, {:.0} output tok/s",
                run + 1,
                stats.window_s,
                stats.requests.sent,
                stats.requests.succeeded,
                stats.requests.failed,
                if failures.is_empty() {
                    String::new()
                } else {
                    format!(" ({failures})")
                },
                stats.request_throughput,
                stats.output_tokens_per_s
            );
        }
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
            died = Some(msg.to_string());
            break;
        }
        if stopped.is_some() {
            // A launched server that stopped answering may be on its way
            // out: give it a moment, so that the point says it died (with
            // its log) rather than only that it was unreachable.
            if server.pid().is_some() {
                let until = Instant::now() + std::time::Duration::from_secs(2);
                while died.is_none() && Instant::now() < until {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    died = server.check_alive().err().map(|e| e.to_string());
                }
            }
            break; // the later runs would not reach it either
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
    if virtual_time {
        pr.clock = Some(infer_bench_spec::raw::SimClock::Virtual.name().into());
    }
    if !matches!(server, Server::Sim(_) | Server::Virtual(_)) {
        let info = pr.server.get_or_insert_with(Default::default);
        info.dialect = Some(dialect.name().into());
        info.dialect_from = Some(dialect_from.into());
    }
    if !unsent.is_empty() {
        pr.warnings.push(format!(
            "{} was not sent: the server did not name its dialect (owned_by in its /models), so requests were plain OpenAI; set [targets.{}] dialect if it accepts more{}",
            unsent.join(", "),
            cfg.target.name,
            if unsent.contains(&"ignore_eos") {
                " (without ignore_eos, outputs can end before output_tokens)"
            } else {
                ""
            }
        ));
    }
    pr.warnings.extend(late_starts);
    pr.warnings.extend(warm_failed);
    pr.mix = mix_results(cfg, &parts, merged_window_s, open);
    // In virtual time the client's own load is not the benchmark's: it
    // is the simulation's, and nothing of it enters the numbers.
    pr.client = load_start.finish(tel.host).filter(|_| !virtual_time);
    pr.preflight = findings;
    pr.memory = memory(&pr, &timelines, before_server);
    if let Some(why) = stopped {
        // The server could not be reached: the point is not measured (exit 3).
        pr.status = PointStatus::Failed;
        pr.valid = false;
        pr.failure = Some(match pr.failure.take() {
            Some(f) => format!("{f} ({why})"),
            None => why.clone(),
        });
        pr.invalid_reasons.push(why);
    }
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

/// The connections of a point's client: how many are opened before each
/// run (its slots), and how many the pool keeps open between requests.
///
/// The pool keeps twice the slots. A slot's next request goes out before
/// its previous connection is back in the pool, and its connect waits for
/// that connection (`backend::connect`); when the pool is slower than the
/// wait (a machine with every core busy), the connect goes on in the
/// background into the pool as a spare. Kept, such spares end the churn
/// within the first run; dropped, every run would open them again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connections {
    pub warm: usize,
    pub idle: usize,
}

/// Descriptors kept free when opening connections before a run: for the
/// results, the request log, telemetry and the runtime.
const DESCRIPTOR_RESERVE: usize = 64;

/// This process's open-file limit (the soft one, as raised at the start).
fn open_file_limit() -> Option<u64> {
    // SAFETY: getrlimit on our own process with a struct we own.
    let mut r: libc::rlimit = unsafe { std::mem::zeroed() };
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0).then_some(r.rlim_cur as u64)
}

/// How many more connections this process can open: its open-file limit
/// less the descriptors it holds and [`DESCRIPTOR_RESERVE`]; half that when
/// the server runs in this process (a connection is a descriptor at each
/// end). `None` where the descriptors held cannot be counted.
fn descriptor_room(in_process: bool) -> Option<usize> {
    let held = std::fs::read_dir("/proc/self/fd").ok()?.count();
    let limit = usize::try_from(open_file_limit()?).unwrap_or(usize::MAX);
    let free = limit.saturating_sub(held + DESCRIPTOR_RESERVE);
    Some(if in_process { free / 2 } else { free })
}

/// The most connections opened before a run of an open loop without
/// `max_concurrency` (whose in-flight count is only known as it runs).
pub const MAX_WARM_OPEN: usize = 1024;

impl Connections {
    /// None with `cold_connections`. Otherwise a closed loop's slots (this
    /// agent's share, the largest of a ramp); an open loop's
    /// `max_concurrency`; an open loop without one, what one second of its
    /// highest rate sends (at most [`MAX_WARM_OPEN`]), and a pool that
    /// keeps whatever was once in flight, so that a load above any fixed
    /// pool size does not open and close connections all the time (idle
    /// ones close after 90 s).
    pub fn of(load: &infer_bench_spec::Load, agent: Option<(u32, u32)>) -> Connections {
        let levels = || {
            load.ramp
                .as_ref()
                .map(|r| r.levels.clone())
                .unwrap_or_else(|| vec![load.level])
        };
        let share = |c: u64| super::engine::agent_share(c, agent).max(1) as usize;
        if load.cold_connections {
            // Every request opens its own connection, as the user asked.
            return Connections { warm: 0, idle: 0 };
        }
        match (load.level, load.max_concurrency) {
            (Level::Concurrency(_), _) => {
                let c = levels()
                    .iter()
                    .map(|l| match l {
                        Level::Concurrency(c) => *c,
                        Level::Rate(_) => 0,
                    })
                    .max()
                    .unwrap_or(1);
                let n = share(c.into());
                Connections {
                    warm: n,
                    idle: n.saturating_mul(2),
                }
            }
            (Level::Rate(_), Some(m)) => {
                let n = share(m.into());
                Connections {
                    warm: n,
                    idle: n.saturating_mul(2),
                }
            }
            (Level::Rate(_), None) => {
                let per_s = levels()
                    .iter()
                    .map(|l| match l {
                        Level::Rate(r) => r.as_per_second(),
                        Level::Concurrency(_) => 0.0,
                    })
                    .fold(0.0, f64::max);
                let n = share(per_s.ceil() as u64);
                Connections {
                    warm: n.min(MAX_WARM_OPEN),
                    idle: usize::MAX,
                }
            }
        }
    }
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

    fn finish(self, host: &dyn HostProbe) -> Option<ClientLoad> {
        let wall = self.at.elapsed().as_secs_f64();
        if wall <= 0.0 {
            return None;
        }
        let own = self
            .own
            .zip(host.process_cpu_s(None))
            .map(|(a, b)| (b - a) / wall)?;
        Some(ClientLoad {
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

/// What a virtual-time point's server metrics stand for: the simulated
/// server's `/metrics`, read at simulated instants.
const VIRTUAL_METRICS: &str = "simulated /metrics (virtual time)";

/// An agent that began a run later than this after its agreed start says so.
const LATE_START_MS: f64 = 10.0;

#[cfg(test)]
mod tests {
    use super::*;

    /// The load of a one-point spec with this `[load]`.
    fn load(keys: &str) -> infer_bench_spec::Load {
        let text = format!(
            "name = \"t\"\n[targets.s]\nkind = \"sim\"\ngpu = \"h100-sxm\"\n[models.m]\npreset = \"llama-3.1-8b\"\n[workloads.w]\ninput_tokens = 8\noutput_tokens = 8\n[load]\n{keys}\n"
        );
        let spec = infer_bench_spec::compile("t.toml", &text, std::path::Path::new(".")).unwrap();
        let plan = infer_bench_spec::plan::Plan::build(&spec).unwrap();
        plan.points[0].config.load.clone()
    }

    fn of(keys: &str, agent: Option<(u32, u32)>) -> (usize, usize) {
        let c = Connections::of(&load(keys), agent);
        (c.warm, c.idle)
    }

    #[test]
    fn connections_follow_the_slots() {
        assert_eq!(of("concurrency = 8\nrequests = 10", None), (8, 16));
        // Agent 1 of 2 runs 5 of 9 slots, agent 2 the other 4.
        assert_eq!(of("concurrency = 9\nrequests = 10", Some((1, 2))), (5, 10));
        assert_eq!(of("concurrency = 9\nrequests = 10", Some((2, 2))), (4, 8));
        assert_eq!(
            of(
                "rate = \"50/s\"\nmax_concurrency = 100\nrequests = 10",
                None
            ),
            (100, 200)
        );
        // Uncapped: one second of the rate, a pool that keeps all.
        assert_eq!(of("rate = \"20/s\"\nrequests = 10", None), (20, usize::MAX));
        assert_eq!(of("rate = \"0.5/s\"\nrequests = 10", None), (1, usize::MAX));
        assert_eq!(
            of("rate = \"5000/s\"\nrequests = 10", None),
            (MAX_WARM_OPEN, usize::MAX)
        );
        // Cold: none opened ahead, none kept.
        assert_eq!(
            of(
                "concurrency = 8\nrequests = 10\ncold_connections = true",
                None
            ),
            (0, 0)
        );
        // A ramp: its largest step.
        assert_eq!(
            of(
                "ramp = { from = 2, to = 32, step = 10, every = \"1s\" }",
                None
            ),
            (32, 64)
        );
    }
}
