//! Running one point: its client and telemetry, every run of it through
//! the pacer or the virtual-time simulation (with the request log fed as
//! requests finish), their tallies merged and assembled into a
//! `PointResult`, and what this process, the machine and a launched server
//! spent doing it. What a person should see goes to the run's observer.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::agent::Timetable;
use super::assemble::{failed_point, finish_point, memory, mix_results};
use super::context::{Interrupt, Live, RunEnv, RunOutcome, Sink};
use super::host::HostProbe;
use super::observe::{DialectFrom, Event, RunStart};
use super::options::RunOptions;
use super::pacer::run_once;
use super::recorder::Tally;
use super::requests::{LineOptions, RequestLog, RunClock, request_line};
use super::servers::Server;
use crate::error::PointError;
use infer_bench_protocol::{
    Backend, ClientOptions, HttpBackend, Reading, RequestRecord, kserve, openai,
};
use infer_bench_results::telemetry::GpuDataSource;
use infer_bench_results::{
    ClientLoad, PhaseTimeline, PointStatus, Reason, ReasonKind, RunResult, now_rfc3339,
};
use infer_bench_spec::Dialect;
use infer_bench_spec::Level;
use infer_bench_spec::plan::{Point, PointConfig};
use infer_bench_spec::results::PointResult;
use infer_bench_telemetry::gpu::GpuSource;
use infer_bench_telemetry::scrape::HttpMetrics;
use infer_bench_telemetry::session::{self, RunTimes, ScrapePlan, Session};

/// What a point's telemetry needs.
pub(super) struct TelemetryEnv<'a> {
    pub(super) config: &'a infer_bench_spec::Telemetry,
    pub(super) gpus: &'a dyn GpuSource,
    pub(super) host: &'a dyn HostProbe,
}

impl TelemetryEnv<'_> {
    /// Starts a point's GPU sampling and metrics scraping.
    fn start(&self, cfg: &PointConfig, server: &Server, opts: &RunOptions) -> Session {
        let served = server.metrics_url(cfg);
        let sim = match server {
            Server::Sim(_) => served.as_deref().map(session::SimGpus::Served),
            Server::Virtual(_) => Some(session::SimGpus::Virtual),
            _ => None,
        };
        let gpu = session::gpu_plan(self.config.gpu, cfg, self.gpus, sim, served.as_deref());
        let scrape = served
            .clone()
            .filter(|_| self.config.server_metrics)
            .and_then(|url| {
                let timeout = Duration::from_secs(2);
                let source =
                    HttpMetrics::for_target(&url, &cfg.target, &server.base_url(), timeout)
                        .map_err(|e| {
                            opts.observer.event(&Event::NotScraping {
                                target: &cfg.target.name,
                                url: &url,
                                why: &e.to_string(),
                            })
                        })
                        .ok()?;
                Some(ScrapePlan {
                    url,
                    source: Box::new(source),
                    interval: self.config.scrape_interval.as_std(),
                    model: Some(cfg.served_name().to_string()),
                })
            });
        // A dcgm-exporter, and a simulator's modelled GPUs, are scraped like
        // server metrics, on their interval.
        let exported =
            matches!(&gpu, session::GpuPlan::Sample(s) if s.source() == GpuDataSource::Triton);
        let gpu_interval = if cfg.target.gpu_metrics_url.is_some() || sim.is_some() || exported {
            self.config.scrape_interval.as_std()
        } else {
            self.config.interval.as_std()
        };
        Session::start(gpu, gpu_interval, scrape)
    }
}

/// What every point of a plan runs with.
pub(super) struct PlanEnv<'a> {
    pub(super) rt: &'a tokio::runtime::Runtime,
    pub(super) interrupt: &'a Arc<Interrupt>,
    /// The request log, when one is written.
    pub(super) requests: Option<RequestLog>,
    pub(super) opts: &'a RunOptions,
    /// Load sharding: when each run of each point starts.
    pub(super) timetable: Option<Timetable>,
    pub(super) tel: TelemetryEnv<'a>,
}

/// One point to run on its group's server.
pub(super) struct PointJob<'a> {
    pub(super) point: &'a Point,
    /// What its prompts are made from, loaded once per plan.
    pub(super) material: Arc<infer_bench_workload::Material>,
    /// Its label in what the observer is told (`[3/12] slug`).
    pub(super) label: &'a str,
    /// The plan's estimated time after this point, for a progress ETA.
    pub(super) after_s: Option<f64>,
    /// GPU memory in use before the group's server started.
    pub(super) before_server: &'a BTreeMap<u32, u64>,
}

/// How running a point ended.
pub(super) enum PointOutcome {
    Done(Box<PointResult>),
    ServerDied(String, Box<PointResult>),
    Interrupted,
}

/// Runs every run of one point on `server` and assembles its result.
pub(super) fn run_point(job: PointJob<'_>, server: &mut Server, env: &PlanEnv<'_>) -> PointOutcome {
    let p = job.point;
    let cfg = &p.config;
    let tel = &env.tel;
    let findings = super::preflight::check(cfg, tel.config.gpu, tel.gpus, tel.host, server.pid());
    for finding in &findings {
        env.opts.observer.event(&Event::Preflight {
            label: job.label,
            finding,
        });
    }
    let client = match Client::open(&job, server, env) {
        Ok(c) => c,
        Err(e) => return PointOutcome::Done(Box::new(failed_point(p, e.to_string()))),
    };
    let fingerprint = super::schedule::workload_fingerprint(&*client.backend, cfg, &job.material);
    let virtual_time = matches!(server, Server::Virtual(_));
    let telemetry = tel.start(cfg, server, env.opts);
    let mut runs = Runs::new(
        telemetry,
        virtual_time,
        LoadMeter::start(tel.host, server.pid()),
    );
    for run in 0..cfg.load.runs {
        match runs.run(run, &job, &client, server, env) {
            Ok(Next::Go) => {}
            Ok(Next::Stop) => break,
            Err(Abandon::Interrupted) => return PointOutcome::Interrupted,
            Err(Abandon::Failed(e)) => {
                return PointOutcome::Done(Box::new(failed_point(p, e.to_string())));
            }
        }
    }
    runs.finish(&job, &client, server, env, fingerprint, findings)
}

/// Why a point's runs are not kept.
enum Abandon {
    /// Ctrl-C.
    Interrupted,
    /// Its run could not be set up (the simulator refused the point).
    Failed(PointError),
}

/// Whether a point's next run goes ahead.
enum Next {
    Go,
    /// The server died or could not be reached: later runs would not reach it.
    Stop,
}

/// A point's client: its backend, the dialect its requests are written
/// in, and the fields that dialect could not carry.
struct Client {
    backend: Arc<HttpBackend>,
    dialect: Dialect,
    from: DialectFrom,
    unsent: Vec<&'static str>,
    conns: Connections,
    /// A kserve point: the model's statistics (Triton's extension).
    stats_path: Option<String>,
}

impl Client {
    /// The model's statistics now, where the server keeps them (`None`
    /// for a point not of kserve, or a server without Triton's extension).
    fn model_stats(&self, rt: &tokio::runtime::Runtime) -> Option<kserve::Stats> {
        let path = self.stats_path.as_ref()?;
        match rt.block_on(self.backend.get_answer(path, kserve::META_CAP)) {
            Ok((200, body)) => kserve::parse_stats(&body, None).ok(),
            _ => None,
        }
    }
}

impl Client {
    /// The client of a point on `server`: its TLS roots and headers from
    /// the target, its pool sized to the load, and its dialect as the spec
    /// declares it, else as the server names it (`/v1/models`).
    fn open(job: &PointJob<'_>, server: &Server, env: &PlanEnv<'_>) -> Result<Client, PointError> {
        let cfg = &job.point.config;
        let (api_key, ca_cert_pem) = credentials(cfg)?;
        let conns = Connections::of(&cfg.load, env.opts.agent);
        let base_url = server.base_url();
        let options = ClientOptions {
            base_url: &base_url,
            api_key,
            headers: &cfg.target.headers,
            tls_insecure: cfg.target.tls_insecure,
            ca_cert_pem,
            pool_size: conns.idle,
            connect_timeout: cfg.load.timeouts.connect.as_std(),
        };
        let declared = match (cfg.target.dialect, server) {
            (Some(d), _) => Some((d, DialectFrom::Spec)),
            // The simulator takes vLLM's fields.
            (None, Server::Sim(_) | Server::Virtual(_)) => {
                Some((Dialect::Vllm, DialectFrom::Simulator))
            }
            (None, _) => None,
        };
        let rt = env.rt;
        let mut backend = {
            let _guard = rt.enter();
            let protocol = infer_bench_protocol::for_workload(
                &cfg.workload,
                cfg.served_name(),
                declared.map_or(Dialect::Openai, |(d, _)| d),
            );
            let reading = Reading {
                timeouts: cfg.load.timeouts,
                limits: cfg.load.limits,
                keep_reply: cfg.workload.conversation.is_some(),
            };
            let mut backend = HttpBackend::new(&options, protocol, reading)?;
            // Structured output and tools: answers are validated with
            // validators compiled once for the point.
            backend.validate_with(infer_bench_protocol::structured::Checker::of(
                &cfg.workload.structured,
            ));
            backend
        };
        // Undeclared: the server is asked (its connection stays in the pool).
        let (dialect, from) = match declared {
            Some(d) => d,
            None => match rt.block_on(openai::identify(&backend)) {
                Some(d) => {
                    let protocol =
                        infer_bench_protocol::for_workload(&cfg.workload, cfg.served_name(), d);
                    backend.set_protocol(protocol)?;
                    (d, DialectFrom::Server)
                }
                None => (Dialect::Openai, DialectFrom::Default),
            },
        };
        // A tensor workload reads the model's metadata first: its bodies
        // are built from it, and what does not fit is said now.
        let mut stats_path = None;
        if let Some(infer_bench_spec::retrieval::Retrieval::Tensors(t)) = &cfg.workload.retrieval {
            let protocol = {
                let b = &backend;
                rt.block_on(kserve::handshake(
                    |path| async move { b.get_answer(&path, kserve::META_CAP).await },
                    &base_url,
                    t,
                    cfg.served_name(),
                    &cfg.workload,
                    &job.material.tensor_files,
                ))?
            };
            backend.set_protocol(Box::new(protocol))?;
            stats_path = Some(format!(
                "{}/stats",
                kserve::model_path(cfg.served_name(), t.version.as_deref())
            ));
        }
        env.opts.observer.event(&Event::Dialect {
            label: job.label,
            dialect,
            from,
        });
        // Triton's generate sends every field (one that is not a model
        // input reaches the model as a parameter): nothing stays unsent.
        let generate = cfg.workload.api == infer_bench_spec::raw::Api::Generate;
        let unsent = infer_bench_spec::dialect::extra_fields_asked(&cfg.workload)
            .into_iter()
            .map(|(field, _)| field)
            .filter(|f| !generate && dialect.wire_name(f).is_none())
            .collect();
        Ok(Client {
            backend: Arc::new(backend),
            dialect,
            from,
            unsent,
            conns,
            stats_path,
        })
    }
}

/// The target's API key (from the environment variable it names) and CA
/// certificate: what every client of the target is built with.
pub(super) fn credentials(
    cfg: &PointConfig,
) -> Result<(Option<String>, Option<Vec<u8>>), PointError> {
    let api_key = cfg
        .target
        .api_key_env
        .as_ref()
        .and_then(|v| std::env::var(v).ok());
    // The compiler resolved the path against the spec's folder and
    // checked the file; one that changed since fails the point, never
    // silently.
    let ca_cert_pem = match cfg.target.ca_cert.as_ref() {
        Some(path) => Some(
            infer_bench_spec::files::read_regular(
                std::path::Path::new(path),
                infer_bench_spec::files::MAX_CA_CERT_BYTES,
            )
            .map_err(|source| PointError::CaCert {
                path: path.clone(),
                source,
            })?,
        ),
        None => None,
    };
    Ok((api_key, ca_cert_pem))
}

/// A point's runs so far: their results and merged tallies, its telemetry,
/// and what went wrong on the way.
struct Runs {
    telemetry: Session,
    results: Vec<RunResult>,
    merged: Tally,
    merged_window_s: f64,
    concurrency_max: u64,
    steps: BTreeMap<u32, Tally>,
    turns: BTreeMap<u32, Tally>,
    parts: BTreeMap<u32, Tally>,
    timelines: Vec<(f64, PhaseTimeline)>,
    late_starts: Vec<Reason>,
    /// The cache reset before the run under way, kept with its result.
    cache_reset: Option<infer_bench_results::CacheReset>,
    /// Resets that failed (a warning each).
    cache_failed: Vec<Reason>,
    /// Set when connections could not all be opened before a run (said once).
    warm_failed: Option<Reason>,
    /// Set when a run stopped early because the server could not be reached.
    stopped: Option<String>,
    /// Set when a launched server died: the runs so far are kept.
    died: Option<String>,
    virtual_time: bool,
    /// In virtual time each run's clock starts after the previous run's
    /// last simulated instant, so the point's runs (and their telemetry)
    /// follow one another on one timeline, as real runs do.
    virtual_next: Option<Instant>,
    load: LoadMeter,
    /// A kserve point: the model's statistics over the runs, summed.
    model_stats: Option<kserve::Stats>,
    /// Warm-up requests that answered over the runs, and their E2E summed
    /// (ms): the server's statistics count them too.
    warmup_e2e: (u64, f64),
}

impl Runs {
    fn new(telemetry: Session, virtual_time: bool, load: LoadMeter) -> Runs {
        Runs {
            virtual_next: virtual_time.then(|| telemetry.origin()),
            telemetry,
            results: Vec::new(),
            merged: Tally::default(),
            merged_window_s: 0.0,
            concurrency_max: 0,
            steps: BTreeMap::new(),
            turns: BTreeMap::new(),
            parts: BTreeMap::new(),
            timelines: Vec::new(),
            late_starts: Vec::new(),
            cache_reset: None,
            cache_failed: Vec::new(),
            warm_failed: None,
            stopped: None,
            died: None,
            virtual_time,
            load,
            model_stats: None,
            warmup_e2e: (0, 0.0),
        }
    }

    /// Runs run `run` of the point and keeps what it measured.
    fn run(
        &mut self,
        run: u32,
        job: &PointJob<'_>,
        client: &Client,
        server: &mut Server,
        env: &PlanEnv<'_>,
    ) -> Result<Next, Abandon> {
        let p = job.point;
        let cfg = &p.config;
        server.begin_run(run);
        self.reset_cache(run, cfg, client, server, env);
        if !self.virtual_time {
            self.warm(run, job, client, server, env);
        }
        let stats_before = client.model_stats(env.rt);
        self.telemetry.mark();
        let live = Arc::new(Live::default());
        let started_at = now_rfc3339();
        let run_start = match self.virtual_next {
            Some(t) => t,
            None => Instant::now(),
        };
        // Load sharding: this run starts at its agreed instant.
        let agreed = env.timetable.as_ref().and_then(|t| t.start(&p.id, run));
        let (start_at, late_ms) = match agreed {
            Some(t) => {
                let (at, late) = super::agent::instant_of(t);
                (Some(at), late)
            }
            None => (None, 0.0),
        };
        let run_env = RunEnv {
            handle: env.rt.handle().clone(),
            interrupt: env.interrupt.clone(),
            live: live.clone(),
            sink: env
                .requests
                .as_ref()
                .map(|log| sink(log, p, run_start, env.opts)),
            agent: env.opts.agent,
            start_at: if self.virtual_time {
                Some(run_start)
            } else {
                start_at
            },
            material: job.material.clone(),
            slow_client: env.opts.slow_client,
        };
        env.opts.observer.event(&Event::RunStarted(RunStart {
            label: job.label,
            run,
            config: cfg,
            live,
            after_s: job.after_s,
        }));
        let ended = |stats| {
            env.opts.observer.event(&Event::RunEnded {
                label: job.label,
                run,
                stats,
            })
        };
        let out = match self.run_clock(run, job, client, &run_env, env) {
            Ok(out) => out,
            Err(e) => {
                ended(None);
                return Err(Abandon::Failed(e));
            }
        };
        if let (Some(before), Some(after)) = (stats_before, client.model_stats(env.rt)) {
            let d = after.since(&before);
            let sum = self.model_stats.get_or_insert_with(Default::default);
            *sum = sum.plus(&d);
            let (n, ms) = out.recorder.warmup_e2e();
            self.warmup_e2e.0 += n;
            self.warmup_e2e.1 += ms;
        }
        let stats = out.recorder.stats();
        ended(Some(&stats));
        if out.interrupted {
            return Err(Abandon::Interrupted);
        }
        if let Some(why) = &out.stopped {
            // Said once, in the point's failure (its progress line and the
            // summary), not also on a line of its own.
            self.stopped.get_or_insert_with(|| why.clone());
        }
        self.keep(run, started_at, run_start, &out, stats, agreed, late_ms);
        if let Err(msg) = server.check_alive() {
            self.died = Some(msg.to_string());
            return Ok(Next::Stop);
        }
        if self.stopped.is_some() {
            // A launched server that stopped answering may be on its way
            // out: give it a moment, so that the point says it died (with
            // its log) rather than only that it was unreachable.
            if server.pid().is_some() {
                let until = Instant::now() + Duration::from_secs(2);
                while self.died.is_none() && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(50));
                    self.died = server.check_alive().err().map(|e| e.to_string());
                }
            }
            return Ok(Next::Stop); // the later runs would not reach it either
        }
        Ok(Next::Go)
    }

    /// Resets the server's prefix cache before run `run` where the point's
    /// `reset_cache` asks for it, and keeps how it went for the run's
    /// result; a failed reset is a warning, not the end of the run.
    fn reset_cache(
        &mut self,
        run: u32,
        cfg: &PointConfig,
        client: &Client,
        server: &Server,
        env: &PlanEnv<'_>,
    ) {
        use infer_bench_results::CacheResetOutcome;
        if !super::cache::wanted(cfg.load.reset_cache, server) {
            return;
        }
        let reset = env
            .rt
            .block_on(super::cache::reset(&client.backend, client.dialect));
        if reset.outcome == CacheResetOutcome::Failed {
            self.cache_failed.push(Reason::new(
                ReasonKind::CacheResetFailed,
                format!(
                    "run {}: the server's prefix cache could not be reset ({}{}): the run may have read an earlier run's cache",
                    run + 1,
                    reset.request.as_deref().unwrap_or("no request"),
                    reset
                        .status
                        .map(|s| format!(" answered {s}"))
                        .unwrap_or_else(|| " got no answer".into()),
                ),
            ));
        }
        self.cache_reset = Some(reset);
    }

    /// Opens the run's connections before its clock starts, none
    /// measured: as many as the open-file limit leaves room for (the pool
    /// keeps the last run's, which need none).
    fn warm(
        &mut self,
        run: u32,
        job: &PointJob<'_>,
        client: &Client,
        server: &Server,
        env: &PlanEnv<'_>,
    ) {
        let in_process = matches!(server, Server::Sim(_));
        let wanted = client.conns.warm;
        let (warm, room) = match descriptor_room(in_process) {
            Some(room) if room < wanted => (room, Some(room)),
            _ => (wanted, None),
        };
        let warming = Instant::now();
        let warmed = env.rt.block_on(client.backend.warm(warm));
        env.opts.observer.event(&Event::Warmed {
            label: job.label,
            run,
            connections: warm,
            took: warming.elapsed(),
            failed: warmed.as_ref().err(),
        });
        if let Err(e) = warmed {
            self.warm_failed.get_or_insert_with(|| {
                Reason::new(
                    ReasonKind::ConnectionsNotOpened,
                    format!("run {}: {e}", run + 1),
                )
            });
        }
        if room.is_some() && run == 0 {
            self.warm_failed.get_or_insert_with(|| {
                Reason::new(ReasonKind::ConnectionsNotOpened, format!(
                    "run 1: {warm} of {wanted} connections were opened before the run: the open-file limit ({}) leaves room for no more{}; the run opened the rest as it went, and any it could not open failed as client_limit",
                    open_file_limit().unwrap_or(0),
                    if in_process { " (with the simulator in this process, a connection takes a descriptor at each end)" } else { "" }
                ))
                .with_fix("raise the open-file limit (ulimit -n)")
            });
        }
    }

    /// The run on its clock: real time through the pacer, or virtual time
    /// on the simulator (whose telemetry it samples as it goes).
    fn run_clock(
        &mut self,
        run: u32,
        job: &PointJob<'_>,
        client: &Client,
        run_env: &RunEnv,
        env: &PlanEnv<'_>,
    ) -> Result<RunOutcome, PointError> {
        let p = job.point;
        if !self.virtual_time {
            return Ok(run_once(client.backend.clone(), &p.config, run, run_env));
        }
        let config = env.tel.config;
        let sampling = super::virtual_time::Sampling {
            every: config.scrape_interval.as_std(),
            metrics: config.server_metrics,
            gpus: config.gpu != infer_bench_spec::raw::GpuMode::Off,
        };
        let sampling = Some(sampling).filter(|s| s.metrics || s.gpus);
        let v = super::virtual_time::run_once_virtual(
            &*client.backend,
            &p.config,
            run,
            run_env,
            sampling,
        )?;
        self.virtual_next = Some(v.ended + Duration::from_secs(1));
        if let Some(s) = sampling.filter(|s| s.metrics) {
            self.telemetry
                .add_scrapes(VIRTUAL_METRICS, s.every, v.scrapes);
        }
        if let Some((devices, samples)) = v.gpus {
            self.telemetry.add_gpu_samples(devices, samples);
        }
        Ok(v.outcome)
    }

    /// Keeps what run `run` measured: its result, its tallies merged into
    /// the point's, its phases on the telemetry's timeline.
    #[allow(clippy::too_many_arguments)]
    fn keep(
        &mut self,
        run: u32,
        started_at: String,
        run_start: Instant,
        out: &RunOutcome,
        stats: infer_bench_results::Stats,
        agreed: Option<std::time::SystemTime>,
        late_ms: f64,
    ) {
        self.telemetry.mark();
        self.telemetry.add_run(RunTimes {
            run,
            start: run_start,
            window: out
                .recorder
                .window_start()
                .map(|w| (w, w + Duration::from_secs_f64(stats.window_s))),
        });
        self.merged.merge(&out.recorder.run);
        self.merged_window_s += stats.window_s;
        self.concurrency_max = self.concurrency_max.max(stats.concurrency_max);
        for (k, t) in out.recorder.steps() {
            self.steps.entry(*k).or_default().merge(t);
        }
        for (k, t) in out.recorder.turns().into_iter().flatten() {
            self.turns.entry(*k).or_default().merge(t);
        }
        for (k, t) in out.recorder.parts().into_iter().flatten() {
            self.parts.entry(*k).or_default().merge(t);
        }
        let mut phases_origin_s = None;
        if let Some((origin, ph)) = out.recorder.phases() {
            let zero = self.telemetry.origin();
            let origin_s = if *origin >= zero {
                origin.duration_since(zero).as_secs_f64()
            } else {
                -zero.duration_since(*origin).as_secs_f64()
            };
            phases_origin_s = Some(origin_s);
            self.timelines.push((origin_s, ph.to_data()));
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
            self.late_starts.push(Reason::new(ReasonKind::LateStart, format!(
                "run {} began {late_ms:.0} ms after its agreed start (the previous run overran its slot: give a longer --slot); its first arrivals went out late",
                run + 1
            )).with_fix("a longer --slot"));
        }
        self.results.push(RunResult {
            run,
            started_at,
            windows: out.recorder.windows(),
            histograms: out.recorder.run.histograms(),
            stats,
            shard,
            cache_reset: self.cache_reset.take(),
        });
    }

    /// The point's result from its runs.
    fn finish(
        self,
        job: &PointJob<'_>,
        client: &Client,
        server: &Server,
        env: &PlanEnv<'_>,
        fingerprint: String,
        findings: Vec<infer_bench_results::Finding>,
    ) -> PointOutcome {
        let p = job.point;
        let cfg = &p.config;
        let open = matches!(cfg.load.level, Level::Rate(_));
        let mut pr = finish_point(
            p,
            self.results,
            &self.merged,
            self.merged_window_s,
            self.concurrency_max,
            &self.steps,
            server.info(),
            &server.base_url(),
        );
        pr.stages = self.model_stats.as_ref().and_then(|s| {
            super::assemble::stages(
                s,
                &pr.merged,
                self.warmup_e2e,
                client.stats_path.as_deref().unwrap_or_default(),
            )
        });
        pr.telemetry = Some(self.telemetry.finish());
        pr.workload = Some(super::workload::info(&job.material, fingerprint));
        pr.turns = super::workload::turn_results(&self.turns, open);
        if self.virtual_time {
            pr.clock = Some(infer_bench_spec::raw::SimClock::Virtual.name().into());
        }
        if !matches!(server, Server::Sim(_) | Server::Virtual(_)) {
            let info = pr.server.get_or_insert_with(Default::default);
            info.dialect = Some(client.dialect.name().into());
            info.dialect_from = Some(client.from.name().into());
        }
        if !client.unsent.is_empty() {
            pr.warnings.push(Reason::new(ReasonKind::DialectFieldsNotSent, format!(
                "{} was not sent: the server did not name its dialect (owned_by in its /models), so requests were plain OpenAI; set [targets.{}] dialect if it accepts more{}",
                client.unsent.join(", "),
                cfg.target.name,
                if client.unsent.contains(&"ignore_eos") {
                    " (without ignore_eos, outputs can end before output_tokens)"
                } else {
                    ""
                }
            )).with_fix(format!("set [targets.{}] dialect", cfg.target.name)));
        }
        pr.warnings.extend(self.late_starts);
        pr.warnings.extend(self.cache_failed);
        pr.warnings.extend(self.warm_failed);
        pr.mix = mix_results(cfg, &self.parts, self.merged_window_s, open);
        // In virtual time the client's own load is not the benchmark's: it
        // is the simulation's, and nothing of it enters the numbers.
        pr.client = self
            .load
            .finish(env.tel.host)
            .filter(|_| !self.virtual_time);
        pr.preflight = findings;
        pr.memory = memory(&pr, &self.timelines, job.before_server);
        if let Some(why) = self.stopped {
            // The server could not be reached: the point is not measured (exit 3).
            pr.status = PointStatus::Failed;
            pr.valid = false;
            pr.failure = Some(match pr.failure.take() {
                Some(f) => format!("{f} ({why})"),
                None => why.clone(),
            });
            pr.invalid_reasons
                .push(Reason::new(ReasonKind::ServerUnreachable, why));
        }
        match self.died {
            Some(msg) => {
                pr.status = PointStatus::Failed;
                pr.failure = Some(format!("the server died: {msg}"));
                pr.valid = false;
                pr.invalid_reasons.push(Reason::new(
                    ReasonKind::ServerDied,
                    "the server died during the point",
                ));
                PointOutcome::ServerDied(msg, Box::new(pr))
            }
            None => PointOutcome::Done(Box::new(pr)),
        }
    }
}

/// Where a run's finished requests go besides the recorder: the request
/// log, each line's Unix times converted through the run's one reading of
/// the wall clock.
fn sink(log: &RequestLog, p: &Point, run_start: Instant, opts: &RunOptions) -> Sink {
    let tx = log.sender();
    let id = p.id.clone();
    let clock = RunClock::new(run_start);
    let line = LineOptions {
        events: opts.request_events,
        connect_in_latency: p.config.load.cold_connections,
    };
    Arc::new(move |r: &RequestRecord| {
        let _ = tx.send(request_line(&id, r, &clock, line));
    })
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
    /// keeps whatever was once in flight, up to the most such a loop keeps
    /// in flight (`MAX_OPEN_IN_FLIGHT`), so that a load above any smaller
    /// pool size does not open and close connections all the time (idle
    /// ones close after 90 s).
    pub fn of(load: &infer_bench_spec::Load, agent: Option<(u32, u32)>) -> Connections {
        let levels = || {
            load.ramp
                .as_ref()
                .map(|r| r.levels.clone())
                .unwrap_or_else(|| vec![load.level])
        };
        let share = |c: u64| super::schedule::agent_share(c, agent).max(1) as usize;
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
                    idle: super::pacer::MAX_OPEN_IN_FLIGHT,
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
        // Uncapped: one second of the rate, a pool that keeps what may be in flight.
        assert_eq!(
            of("rate = \"20/s\"\nrequests = 10", None),
            (20, crate::run::parts::MAX_OPEN_IN_FLIGHT)
        );
        assert_eq!(
            of("rate = \"0.5/s\"\nrequests = 10", None),
            (1, crate::run::parts::MAX_OPEN_IN_FLIGHT)
        );
        assert_eq!(
            of("rate = \"5000/s\"\nrequests = 10", None),
            (MAX_WARM_OPEN, crate::run::parts::MAX_OPEN_IN_FLIGHT)
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
