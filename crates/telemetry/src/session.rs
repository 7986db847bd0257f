//! The telemetry of one point: a GPU sampling thread and a scraping
//! thread, started before the point's first run and stopped after its
//! last, each sampled once more at the edges of every run so the windows
//! are bracketed. `finish` turns what they took into `PointTelemetry` on
//! the point's clock (seconds since `Session::start`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::dcgm::{DcgmSampler, Filter};
use super::error::{Absence, Error};
use super::gpu::{GpuInfo, GpuReading, GpuSampler, GpuSource, THROTTLE_REASONS};
use super::periodic::{Periodic, Timed};
use super::scrape::{self, HttpMetrics, MetricsSource, Values};
use super::series::{self, Span};
use infer_bench_results::telemetry::*;
use infer_bench_spec::plan::PointConfig;
use infer_bench_spec::raw::{Api, GpuMode, TargetKind};

/// What to do about GPUs for a point.
pub enum GpuPlan {
    Sample(Box<dyn GpuSampler>),
    /// A virtual-time simulation models the GPUs and hands its readings
    /// in ([`Session::add_gpu_samples`]).
    Modelled,
    /// Nothing to sample, and why.
    Absent(String),
    Off,
}

/// Where a simulated target's modelled GPUs are read.
#[derive(Debug, Clone, Copy)]
pub enum SimGpus<'a> {
    /// The real-time simulator's `/metrics` at this URL, which serves them
    /// under dcgm-exporter's names.
    Served(&'a str),
    /// A virtual-time run, which models them beside its engines.
    Virtual,
}

/// The GPU plan of a point: nothing for `off`; for a simulated target,
/// its modelled GPUs (`sim` says where they are read); else a sampler
/// over the GPUs the target names: a dcgm-exporter's, NVML's, or where
/// NVML has none, the GPU gauges of a Triton at `served` (the server's
/// metrics endpoint); or "no GPU" with the reason.
pub fn gpu_plan(
    mode: GpuMode,
    cfg: &PointConfig,
    source: &dyn GpuSource,
    sim: Option<SimGpus<'_>>,
    served: Option<&str>,
) -> GpuPlan {
    if mode == GpuMode::Off {
        return GpuPlan::Off;
    }
    if cfg.target.kind == TargetKind::Sim {
        return match sim {
            Some(SimGpus::Virtual) => GpuPlan::Modelled,
            Some(SimGpus::Served(url)) => match sim_sampler(url) {
                Ok(s) => GpuPlan::Sample(Box::new(s)),
                Err(why) => GpuPlan::Absent(format!("the simulator's modelled GPUs: {why}")),
            },
            None => GpuPlan::Absent(SIM_NOT_RUNNING.into()),
        };
    }
    if cfg.target.gpu_metrics_url.is_some() {
        return match dcgm_sampler(cfg, Reach::Wait) {
            Ok(s) => {
                let note = also_in_nvml(s.devices(), source);
                GpuPlan::Sample(Box::new(s.with_note(note)))
            }
            Err(why) => GpuPlan::Absent(why.to_string()),
        };
    }
    match source.open(cfg.target.gpu_ids.as_deref()) {
        Ok(s) => GpuPlan::Sample(s),
        Err(why) => match served.and_then(|url| triton_gpus(cfg, url)) {
            Some(s) => {
                let note = format!(
                    "{why}; the GPUs are read from the server's own gauges (nv_gpu_*) at its metrics endpoint"
                );
                GpuPlan::Sample(Box::new(s.with_note(Some(note))))
            }
            None => GpuPlan::Absent(why.to_string()),
        },
    }
}

/// Whether a point talks to a Triton Inference Server: the KServe v2 or
/// generate protocol, whose servers may publish their GPUs' gauges.
fn speaks_triton(cfg: &PointConfig) -> bool {
    matches!(cfg.workload.api, Api::Kserve | Api::Generate)
}

/// A sampler of the GPU gauges a Triton publishes at `url` (its
/// `/metrics`), over the GPUs the target's `gpu_ids` select; `None` for
/// a point that does not talk to Triton, or where that endpoint lists no
/// Triton GPU (a CPU-only Triton, another server, no answer).
pub fn triton_gpus(cfg: &PointConfig, url: &str) -> Option<DcgmSampler> {
    if !speaks_triton(cfg) {
        return None;
    }
    let t = &cfg.target;
    let base = t.base_url.clone().unwrap_or_default();
    let source = HttpMetrics::for_target(url, t, &base, DCGM_TIMEOUT).ok()?;
    let s = DcgmSampler::open(
        url,
        Box::new(source),
        Filter {
            ids: t.gpu_ids.clone(),
            labels: t.gpu_metrics_match.clone(),
        },
        GpuDataSource::Triton,
    )
    .ok()?;
    (s.source() == GpuDataSource::Triton).then_some(s)
}

/// How long a scrape of a dcgm-exporter may take.
const DCGM_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether a dcgm-exporter must answer when its sampler is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// It must (`telemetry.gpu = "required"`, checked before the run).
    Now,
    /// One that cannot be reached yet is read from its first answer on
    /// ([`DcgmSampler::open_or_wait`]).
    Wait,
}

/// A sampler of the dcgm-exporter a target names in `gpu_metrics_url`,
/// over the GPUs its `gpu_ids` and `gpu_metrics_match` select.
pub fn dcgm_sampler(cfg: &PointConfig, reach: Reach) -> Result<DcgmSampler, Error> {
    let t = &cfg.target;
    let url = t.gpu_metrics_url.as_deref().ok_or(Error::NoGpuMetricsUrl)?;
    // The target's TLS settings apply; its credentials only on its own host.
    let base = t.base_url.clone().unwrap_or_default();
    let source = HttpMetrics::for_target(url, t, &base, DCGM_TIMEOUT)?;
    let open = match reach {
        Reach::Now => DcgmSampler::open,
        Reach::Wait => DcgmSampler::open_or_wait,
    };
    open(
        url,
        Box::new(source),
        Filter {
            ids: t.gpu_ids.clone(),
            labels: t.gpu_metrics_match.clone(),
        },
        GpuDataSource::Dcgm,
    )
}

/// A sampler of the modelled GPUs a real-time simulator serves at `url`
/// (all of them: the simulator is the whole deployment).
fn sim_sampler(url: &str) -> Result<DcgmSampler, Error> {
    let source = HttpMetrics::new(url, DCGM_TIMEOUT)?;
    DcgmSampler::open(url, Box::new(source), Filter::default(), GpuDataSource::Sim)
}

/// Where NVML on this machine sees some of the GPUs a dcgm-exporter
/// lists (the same UUID), says which figures the results keep and why.
fn also_in_nvml(devices: &[GpuInfo], source: &dyn GpuSource) -> Option<String> {
    let local = source.open(None).ok()?;
    let both: Vec<String> = devices
        .iter()
        .filter_map(|d| {
            let u = d.uuid.as_deref()?;
            local
                .devices()
                .iter()
                .any(|l| l.uuid.as_deref().is_some_and(|x| x.eq_ignore_ascii_case(u)))
                .then(|| u.to_string())
        })
        .collect();
    (!both.is_empty()).then(|| {
        format!(
            "{} {} also visible to NVML on this machine; the figures recorded are dcgm-exporter's \
             (the target's gpu_metrics_url), which reads the same driver counters and adds SM, \
             tensor-pipe and DRAM activity; NVML was not sampled",
            both.join(", "),
            if both.len() == 1 { "is" } else { "are" }
        )
    })
}

/// What the telemetry of a simulated target's GPUs says of itself.
pub const MODELLED: &str =
    "modelled by the simulator (its roofline and memory model), not measured";

/// Why a virtual-time point that handed in no readings has no GPU telemetry.
const NO_MODELLED_READINGS: &str = "the simulator's modelled GPUs gave no readings";

/// Why a simulated target without a running simulator has no GPU telemetry.
pub const SIM_NOT_RUNNING: &str =
    "the target is the built-in simulator, whose modelled GPUs are read only while it runs";

/// With `telemetry.gpu = "required"`, checks before the first point that
/// every target of `points` has a GPU to sample; the error
/// ([`Error::Required`]) is one sentence and a hint.
pub fn preflight<'a>(
    mode: GpuMode,
    points: impl IntoIterator<Item = &'a PointConfig>,
    source: &dyn GpuSource,
) -> Result<(), Error> {
    if mode != GpuMode::Required {
        return Ok(());
    }
    let mut checked: Vec<&str> = Vec::new();
    for cfg in points {
        let t = &cfg.target;
        if checked.contains(&t.name.as_str()) {
            continue;
        }
        checked.push(&t.name);
        let absence = if t.kind == TargetKind::Sim {
            Absence::Simulated
        } else if let Some(url) = &t.gpu_metrics_url {
            match dcgm_sampler(cfg, Reach::Now) {
                Ok(_) => continue,
                Err(why) => Absence::Exporter {
                    url: url.clone(),
                    why: Box::new(why),
                },
            }
        } else {
            match source.open(t.gpu_ids.as_deref()) {
                Ok(_) => continue,
                // A Triton that publishes its GPUs' gauges is its own exporter.
                Err(_)
                    if t.metrics_url
                        .as_deref()
                        .and_then(|u| triton_gpus(cfg, u))
                        .is_some() =>
                {
                    continue;
                }
                Err(why @ Error::UnknownGpu { .. }) => Absence::NotHere(Box::new(why)),
                Err(why) => Absence::NoGpu(Box::new(why)),
            }
        };
        return Err(Error::Required {
            target: t.name.clone(),
            absence,
        });
    }
    Ok(())
}

/// What to scrape for a point.
pub struct ScrapePlan {
    pub url: String,
    pub source: Box<dyn MetricsSource>,
    pub interval: Duration,
    /// The model whose per-model series (a Triton's) are the point's.
    pub model: Option<String>,
}

/// When a run happened, on the monotonic clock.
#[derive(Debug, Clone, Copy)]
pub struct RunTimes {
    pub run: u32,
    /// The origin of the run's `sched_ms` in requests.jsonl.
    pub start: Instant,
    /// The measurement window; `None` when nothing was measured.
    pub window: Option<(Instant, Instant)>,
}

/// The scraping thread of a point.
struct Scraping {
    url: String,
    interval: Duration,
    thread: Periodic<Result<Values, Error>>,
}

/// One sample of every GPU, or why it failed.
type GpuSample = Result<Vec<GpuReading>, Error>;

/// What a sampler said of itself once it knew its GPUs: a dcgm-exporter
/// that could not be reached when the point began finds them at its
/// first answer, on the sampling thread.
#[derive(Debug, Clone, Default)]
struct Found {
    devices: Vec<GpuInfo>,
    source: Option<GpuDataSource>,
}

/// The GPU sampling thread, and what its sampler found.
struct GpuThread {
    thread: Periodic<GpuSample>,
    found: std::sync::Arc<std::sync::Mutex<Found>>,
}

/// A point's telemetry while it runs.
pub struct Session {
    origin: Instant,
    gpu_interval: Duration,
    gpu: Option<GpuThread>,
    /// GPU readings taken elsewhere (a virtual-time run's modelled GPUs):
    /// the GPUs and each sample with its instant.
    modelled: Option<(Vec<GpuInfo>, Vec<Timed<GpuSample>>)>,
    gpu_source: GpuDataSource,
    gpu_url: Option<String>,
    gpu_status: GpuStatus,
    gpu_note: Option<String>,
    scrape: Option<Scraping>,
    /// Scrapes taken elsewhere (a virtual-time run's simulated ones): the
    /// URL they stand for, their interval, and each with its instant.
    recorded: Option<Recorded>,
    runs: Vec<RunTimes>,
}

struct Recorded {
    url: String,
    interval: Duration,
    scrapes: Vec<(Instant, Result<Values, Error>)>,
}

impl Session {
    /// Starts sampling now; this instant is the point's clock origin.
    pub fn start(gpu: GpuPlan, gpu_interval: Duration, scrape: Option<ScrapePlan>) -> Session {
        let origin = Instant::now();
        let (mut gpu_status, mut gpu_note) = (GpuStatus::Absent, None);
        let (mut gpu_source, mut gpu_url) = (GpuDataSource::Nvml, None);
        let mut modelled = None;
        let gpu = match gpu {
            GpuPlan::Off => {
                gpu_status = GpuStatus::Off;
                None
            }
            GpuPlan::Modelled => {
                gpu_source = GpuDataSource::Sim;
                gpu_note = Some(NO_MODELLED_READINGS.into());
                modelled = Some((Vec::new(), Vec::new()));
                None
            }
            GpuPlan::Absent(why) => {
                gpu_note = Some(why);
                None
            }
            GpuPlan::Sample(mut sampler) => {
                let found = std::sync::Arc::new(std::sync::Mutex::new(Found {
                    devices: sampler.devices().to_vec(),
                    source: None,
                }));
                gpu_source = sampler.source();
                gpu_url = sampler.url().map(str::to_string);
                gpu_note = sampler.note();
                let seen = found.clone();
                let sample = move || {
                    let r = sampler.try_sample();
                    let mut f = seen
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    if f.devices.is_empty() && !sampler.devices().is_empty() {
                        *f = Found {
                            devices: sampler.devices().to_vec(),
                            source: Some(sampler.source()),
                        };
                    }
                    r
                };
                match Periodic::start("gpu-sampler", gpu_interval, sample) {
                    Ok(thread) => {
                        gpu_status = GpuStatus::Sampled;
                        Some(GpuThread { thread, found })
                    }
                    Err(e) => {
                        gpu_note = Some(format!("cannot start the GPU sampling thread: {e}"));
                        None
                    }
                }
            }
        };
        let scrape = scrape.and_then(|s| {
            let (mut source, model) = (s.source, s.model);
            Periodic::start("metrics-scraper", s.interval, move || {
                scrape::scrape_model(source.as_mut(), model.as_deref())
            })
            .ok()
            .map(|thread| Scraping {
                url: s.url,
                interval: s.interval,
                thread,
            })
        });
        Session {
            origin,
            gpu_interval,
            gpu,
            modelled,
            gpu_source,
            gpu_url,
            gpu_status,
            gpu_note,
            scrape,
            recorded: None,
            runs: Vec::new(),
        }
    }

    /// Adds scrapes taken elsewhere, in virtual time: `url` names what they
    /// stand for. Summarized like a scraping thread's.
    pub fn add_scrapes(
        &mut self,
        url: &str,
        interval: Duration,
        scrapes: Vec<(Instant, Result<Values, Error>)>,
    ) {
        self.recorded
            .get_or_insert_with(|| Recorded {
                url: url.to_string(),
                interval,
                scrapes: Vec::new(),
            })
            .scrapes
            .extend(scrapes);
    }

    /// Adds GPU readings taken elsewhere (a virtual-time run's modelled
    /// GPUs, `devices` in the order of every reading). Summarized like a
    /// sampling thread's; ignored unless the plan was `Modelled`.
    pub fn add_gpu_samples(&mut self, devices: Vec<GpuInfo>, samples: Vec<(Instant, GpuSample)>) {
        if let Some((known, all)) = &mut self.modelled {
            if known.is_empty() {
                *known = devices;
            }
            all.extend(samples.into_iter().map(|(at, value)| Timed { at, value }));
        }
    }

    /// Samples and scrapes once more, and waits for both: call just
    /// before a run begins and just after it ends.
    pub fn mark(&self) {
        if let Some(g) = &self.gpu {
            g.thread.sample_now();
        }
        if let Some(s) = &self.scrape {
            s.thread.sample_now();
        }
    }

    /// The point's clock origin.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Records a finished run.
    pub fn add_run(&mut self, run: RunTimes) {
        self.runs.push(run);
    }

    /// Stops the threads and summarizes.
    pub fn finish(self) -> PointTelemetry {
        let at = |i: Instant| i.saturating_duration_since(self.origin).as_secs_f64();
        let runs: Vec<RunSpan> = self
            .runs
            .iter()
            .map(|r| {
                let start_s = at(r.start);
                let (ws, we) = r
                    .window
                    .map(|(a, b)| (at(a), at(b)))
                    .unwrap_or((start_s, start_s));
                RunSpan {
                    run: r.run,
                    start_s,
                    window_start_s: ws,
                    window_end_s: we,
                }
            })
            .collect();
        let windows: Vec<Span> = runs
            .iter()
            .map(|r| Span {
                start_s: r.window_start_s,
                end_s: r.window_end_s,
            })
            .collect();
        let mut gpu_source = self.gpu_source;
        let mut never_answered = None;
        let sampled = match (self.gpu, self.modelled) {
            (Some(g), _) => {
                let samples = g.thread.stop();
                let found = std::mem::take(
                    &mut *g
                        .found
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner),
                );
                gpu_source = found.source.unwrap_or(gpu_source);
                if found.devices.is_empty() {
                    never_answered = Some(samples);
                    None
                } else {
                    Some((found.devices, samples))
                }
            }
            (None, Some((devices, samples))) if !devices.is_empty() => Some((devices, samples)),
            _ => None,
        };
        let gpu = match sampled {
            Some((devices, samples)) => {
                let ok: Vec<(f64, &Vec<GpuReading>)> = samples
                    .iter()
                    .filter_map(|s| s.value.as_ref().ok().map(|v| (at(s.at), v)))
                    .collect();
                let t_s: Vec<f64> = ok.iter().map(|x| x.0).collect();
                let readings: Vec<&Vec<GpuReading>> = ok.iter().map(|x| x.1).collect();
                let mut g = summarize_gpus(&devices, &t_s, &readings, &windows, self.gpu_interval);
                g.source = Some(gpu_source);
                for d in &mut g.devices {
                    d.source = Some(gpu_source);
                }
                g.url = self.gpu_url;
                g.note = match gpu_source {
                    GpuDataSource::Sim => Some(MODELLED.into()),
                    _ => self.gpu_note,
                };
                let failed: Vec<ScrapeError> = samples
                    .iter()
                    .filter_map(|s| {
                        s.value.as_ref().err().map(|e| ScrapeError {
                            t_s: at(s.at),
                            message: e.to_string(),
                        })
                    })
                    .collect();
                g.scrapes_failed = failed.len() as u64;
                if g.scrapes_failed > 0 {
                    g.status = GpuStatus::Partial;
                }
                g.errors = failed.into_iter().take(5).collect();
                g
            }
            None => GpuTelemetry {
                // A sampler whose exporter never answered: absent, and why.
                status: match never_answered {
                    Some(_) => GpuStatus::Absent,
                    None => self.gpu_status,
                },
                note: match never_answered {
                    Some(samples) => Some(never_answered_note(self.gpu_url.as_deref(), &samples)),
                    None => self.gpu_note,
                },
                interval_s: self.gpu_interval.as_secs_f64(),
                ..Default::default()
            },
        };
        let server_metrics = match (self.scrape, self.recorded) {
            (Some(s), _) => {
                let scrapes: Vec<(f64, Result<Values, Error>)> = s
                    .thread
                    .stop()
                    .into_iter()
                    .map(|x| (at(x.at), x.value))
                    .collect();
                Some(scrape::summarize(
                    &s.url,
                    s.interval.as_secs_f64(),
                    &scrapes,
                    &windows,
                ))
            }
            (None, Some(r)) => {
                let scrapes: Vec<(f64, Result<Values, Error>)> =
                    r.scrapes.into_iter().map(|(t, v)| (at(t), v)).collect();
                Some(scrape::summarize(
                    &r.url,
                    r.interval.as_secs_f64(),
                    &scrapes,
                    &windows,
                ))
            }
            (None, None) => None,
        };
        PointTelemetry {
            runs,
            gpu,
            server_metrics,
        }
    }
}

/// Why a point whose dcgm-exporter never answered has no GPU telemetry:
/// how many scrapes were tried and the last one's error.
fn never_answered_note(url: Option<&str>, samples: &[Timed<GpuSample>]) -> String {
    let last = samples.iter().rev().find_map(|s| s.value.as_ref().err());
    format!(
        "no scrape of {} answered during the point ({} tried){}",
        url.unwrap_or("the exporter"),
        samples.len(),
        last.map(|e| format!("; the last: {e}")).unwrap_or_default()
    )
}

/// The GPU samples of a point as results: `readings[i][d]` is device `d`
/// at `t_s[i]`.
pub fn summarize_gpus(
    devices: &[GpuInfo],
    t_s: &[f64],
    readings: &[&Vec<GpuReading>],
    windows: &[Span],
    interval: Duration,
) -> GpuTelemetry {
    let window_len_s: f64 = windows.iter().map(Span::len_s).sum();
    let out: Vec<GpuDeviceTelemetry> = devices
        .iter()
        .enumerate()
        .map(|(d, info)| {
            let r: Vec<GpuReading> = readings
                .iter()
                .map(|all| all.get(d).cloned().unwrap_or_default())
                .collect();
            device(info, t_s, &r, windows)
        })
        .collect();
    let energy: Option<f64> = out
        .iter()
        .map(|d| d.energy_j)
        .sum::<Option<f64>>()
        .filter(|_| !out.is_empty());
    GpuTelemetry {
        status: GpuStatus::Sampled,
        note: None,
        interval_s: interval.as_secs_f64(),
        energy_j: energy,
        power_w_mean: energy
            .filter(|_| window_len_s > 0.0)
            .map(|e| e / window_len_s),
        devices: out,
        ..Default::default()
    }
}

/// One GPU's telemetry from its readings. Long because it is mostly a
/// table: every field of a reading becomes a column, its statistics over
/// the windows and its thinned series; energy, throttle reasons and
/// processes are the only logic, each a few lines.
fn device(info: &GpuInfo, t_s: &[f64], r: &[GpuReading], windows: &[Span]) -> GpuDeviceTelemetry {
    let col =
        |f: &dyn Fn(&GpuReading) -> Option<f64>| -> Vec<Option<f64>> { r.iter().map(f).collect() };
    let util = col(&|x| x.utilization_pct);
    let mem_bw = col(&|x| x.memory_bandwidth_utilization_pct);
    let mem = col(&|x| x.memory_used_bytes.map(|b| b as f64));
    let power = col(&|x| x.power_w);
    let sm = col(&|x| x.sm_clock_mhz.map(f64::from));
    let memclk = col(&|x| x.memory_clock_mhz.map(f64::from));
    let temp = col(&|x| x.temperature_c.map(f64::from));
    let rx = col(&|x| x.pcie_rx_bytes_per_s);
    let tx = col(&|x| x.pcie_tx_bytes_per_s);
    let nv_rx = col(&|x| x.nvlink_rx_bytes_per_s);
    let nv_tx = col(&|x| x.nvlink_tx_bytes_per_s);
    let throttle: Vec<Option<u64>> = r.iter().map(|x| x.throttle_reasons).collect();
    let sm_active = col(&|x| x.sm_active);
    let sm_occupancy = col(&|x| x.sm_occupancy);
    let tensor_active = col(&|x| x.tensor_active);
    let dram_active = col(&|x| x.dram_active);
    // Energy since the first reading: the counter's rises, where a fall
    // (a reset: the driver reloaded, the exporter restarted) counts the
    // new value as the rise, as Prometheus' `increase` does.
    let mut last: Option<u64> = None;
    let mut total_mj: u64 = 0;
    let energy_col: Vec<Option<f64>> = r
        .iter()
        .map(|x| {
            let e = x.energy_mj?;
            if let Some(p) = last {
                total_mj += if e >= p { e - p } else { e };
            }
            last = Some(e);
            Some(total_mj as f64 / 1000.0)
        })
        .collect();
    let stats = |v: &[Option<f64>]| series::window_stats(t_s, v.iter().copied(), windows);

    // Energy over the windows: the counter, interpolated at each edge;
    // failing that, power integrated over time.
    let counter: Vec<(f64, f64)> = t_s
        .iter()
        .zip(&energy_col)
        .filter_map(|(t, e)| e.map(|e| (*t, e)))
        .collect();
    let by_counter: Option<f64> = (!windows.is_empty())
        .then(|| {
            windows
                .iter()
                .map(|w| {
                    Some(
                        series::interpolate(&counter, w.end_s)?
                            - series::interpolate(&counter, w.start_s)?,
                    )
                })
                .sum::<Option<f64>>()
        })
        .flatten();
    let (energy_j, energy_source) = match by_counter {
        Some(e) => (Some(e), Some(EnergySource::Counter)),
        None => {
            let points: Vec<(f64, f64)> = t_s
                .iter()
                .zip(&power)
                .filter_map(|(t, p)| p.map(|p| (*t, p)))
                .collect();
            let total: f64 = windows.iter().map(Span::len_s).sum();
            let (area, covered) = windows.iter().fold((0.0, 0.0), |acc, w| {
                let (a, c) = series::integrate(&points, *w);
                (acc.0 + a, acc.1 + c)
            });
            // Only when the samples cover (nearly) all of the windows.
            if total > 0.0 && covered >= total * 0.99 {
                (Some(area), Some(EnergySource::PowerIntegral))
            } else {
                (None, None)
            }
        }
    };

    let mut throttle_reasons = BTreeMap::new();
    let in_window: Vec<u64> = t_s
        .iter()
        .zip(&throttle)
        .filter(|(t, _)| series::in_windows(windows, **t))
        .filter_map(|(_, b)| *b)
        .collect();
    if !in_window.is_empty() {
        for (bit, name) in THROTTLE_REASONS {
            let n = in_window.iter().filter(|b| *b & bit != 0).count();
            if n > 0 {
                throttle_reasons.insert(name.to_string(), n as f64 / in_window.len() as f64);
            }
        }
    }

    let mut processes: BTreeMap<u32, GpuProcess> = BTreeMap::new();
    for p in r.iter().flat_map(|x| &x.processes) {
        let e = processes.entry(p.pid).or_insert_with(|| GpuProcess {
            pid: p.pid,
            ..Default::default()
        });
        if e.name.is_none() {
            e.name = p.name.clone();
        }
        e.memory_used_bytes_max = e.memory_used_bytes_max.max(p.memory_used_bytes);
    }

    let k = series::thin_factor(t_s.len(), MAX_SERIES_POINTS);
    GpuDeviceTelemetry {
        index: info.index,
        name: info.name.clone(),
        uuid: info.uuid.clone(),
        source: None,
        hostname: info.hostname.clone(),
        memory_total_bytes: info.memory_total_bytes,
        memory_idle_bytes: r.first().and_then(|x| x.memory_used_bytes),
        stats: GpuStats {
            utilization_pct: stats(&util),
            memory_bandwidth_utilization_pct: stats(&mem_bw),
            memory_used_bytes: stats(&mem),
            power_w: stats(&power),
            sm_clock_mhz: stats(&sm),
            memory_clock_mhz: stats(&memclk),
            temperature_c: stats(&temp),
            pcie_rx_bytes_per_s: stats(&rx),
            pcie_tx_bytes_per_s: stats(&tx),
            nvlink_rx_bytes_per_s: stats(&nv_rx),
            nvlink_tx_bytes_per_s: stats(&nv_tx),
            sm_active: stats(&sm_active),
            sm_occupancy: stats(&sm_occupancy),
            tensor_active: stats(&tensor_active),
            dram_active: stats(&dram_active),
            sm_clock_max_mhz: r.iter().find_map(|x| x.sm_clock_max_mhz).map(f64::from),
            sm_app_clock_mhz: r.iter().find_map(|x| x.sm_app_clock_mhz).map(f64::from),
        },
        energy_j,
        energy_source,
        throttle_reasons,
        processes: processes.into_values().collect(),
        series: GpuSeries {
            thinned_by: k as u32,
            t_s: series::thin_times(t_s, k),
            utilization_pct: series::thin(&util, k),
            memory_bandwidth_utilization_pct: series::thin(&mem_bw, k),
            memory_used_bytes: series::thin(&mem, k),
            power_w: series::thin(&power, k),
            energy_j: series::thin(&energy_col, k),
            sm_clock_mhz: series::thin(&sm, k),
            memory_clock_mhz: series::thin(&memclk, k),
            temperature_c: series::thin(&temp, k),
            throttle_reasons: series::thin_bits(&throttle, k),
            pcie_rx_bytes_per_s: series::thin(&rx, k),
            pcie_tx_bytes_per_s: series::thin(&tx, k),
            nvlink_rx_bytes_per_s: present(&nv_rx, k),
            nvlink_tx_bytes_per_s: present(&nv_tx, k),
            sm_active: present(&sm_active, k),
            sm_occupancy: present(&sm_occupancy, k),
            tensor_active: present(&tensor_active, k),
            dram_active: present(&dram_active, k),
        },
    }
}

/// A column thinned, or nothing when no sample has it (so files of GPUs
/// without the quantity stay as they were).
fn present(values: &[Option<f64>], k: usize) -> Vec<Option<f64>> {
    if values.iter().all(Option::is_none) {
        Vec::new()
    } else {
        series::thin(values, k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::{GpuSource, ProcessReading, Script, ScriptedSource};
    use std::sync::Arc;

    fn reading(util: f64, mem_gb: u64, power_w: f64, energy_mj: Option<u64>) -> GpuReading {
        GpuReading {
            utilization_pct: Some(util),
            memory_bandwidth_utilization_pct: Some(util / 2.0),
            memory_used_bytes: Some(mem_gb * 1_000_000_000),
            power_w: Some(power_w),
            energy_mj,
            sm_clock_mhz: Some(1980),
            memory_clock_mhz: Some(2619),
            temperature_c: Some(60),
            throttle_reasons: Some(if util > 50.0 { 0x4 } else { 0x1 }),
            pcie_rx_bytes_per_s: Some(1e6),
            pcie_tx_bytes_per_s: Some(2e6),
            nvlink_rx_bytes_per_s: None,
            nvlink_tx_bytes_per_s: None,
            sm_clock_max_mhz: Some(1980),
            sm_app_clock_mhz: Some(1980),
            processes: vec![ProcessReading {
                pid: 42,
                name: Some("vllm".into()),
                memory_used_bytes: Some(mem_gb * 1_000_000_000 - 500_000_000),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn summaries_of_a_known_series_are_hand_computed() {
        // Samples every 0.5 s from 0 to 4 s. Idle (10% util, 20 GB, 100 W)
        // outside the window 1..3 s; busy (90%, 60..70 GB, 300 W) inside.
        // The energy counter rises at the power drawn.
        let t_s: Vec<f64> = (0..=8).map(|i| i as f64 * 0.5).collect();
        let mut energy_mj = 5_000_000u64; // whatever the driver counted before
        let mut rows = Vec::new();
        for (i, t) in t_s.iter().enumerate() {
            let busy = (1.0..=3.0).contains(t);
            if i > 0 {
                let p = if busy { 300.0 } else { 100.0 };
                energy_mj += (p * 0.5 * 1000.0) as u64;
            }
            rows.push(vec![if busy {
                reading(90.0, 60 + i as u64, 300.0, Some(energy_mj))
            } else {
                reading(10.0, 20, 100.0, Some(energy_mj))
            }]);
        }
        let refs: Vec<&Vec<GpuReading>> = rows.iter().collect();
        let devices = ScriptedSource::gpus(1, Script::Series(vec![])).devices;
        let w = [Span {
            start_s: 1.0,
            end_s: 3.0,
        }];
        let g = summarize_gpus(&devices, &t_s, &refs, &w, Duration::from_millis(500));
        let d = &g.devices[0];
        // In the window: samples at 1.0, 1.5, 2.0, 2.5, 3.0 (i = 2..=6).
        let u = d.stats.utilization_pct.unwrap();
        assert_eq!((u.count, u.mean, u.max), (5, 90.0, 90.0));
        let m = d.stats.memory_used_bytes.unwrap();
        assert_eq!(m.max, 66e9);
        assert_eq!(m.mean, 64e9);
        assert_eq!(m.p50, 64e9);
        assert_eq!(m.p95, 66e9);
        assert_eq!(d.memory_idle_bytes, Some(20_000_000_000));
        // Counter from 1.0 to 3.0 s: the rises at 1.5..3.0, 4 x 150 J;
        // the rise into 1.0 s (sample i = 2) was logged at 300 W too.
        assert_eq!(d.energy_source, Some(EnergySource::Counter));
        assert_eq!(d.energy_j, Some(600.0));
        assert_eq!(g.energy_j, Some(600.0));
        assert_eq!(g.power_w_mean, Some(300.0));
        assert_eq!(d.throttle_reasons["sw_power_cap"], 1.0);
        assert!(!d.throttle_reasons.contains_key("gpu_idle"));
        assert_eq!(d.processes[0].pid, 42);
        assert_eq!(d.processes[0].memory_used_bytes_max, Some(65_500_000_000));
        // The series keeps every sample, on the same axis.
        assert_eq!(d.series.t_s, t_s);
        assert_eq!(d.series.energy_j[0], Some(0.0));
        assert_eq!(d.series.energy_j[8], Some(50.0 + 5.0 * 150.0 + 50.0 + 50.0));
    }

    #[test]
    fn without_the_counter_power_is_integrated() {
        let t_s = [0.0, 1.0, 2.0];
        let rows = [
            vec![reading(0.0, 1, 100.0, None)],
            vec![reading(0.0, 1, 200.0, None)],
            vec![reading(0.0, 1, 200.0, None)],
        ];
        let refs: Vec<&Vec<GpuReading>> = rows.iter().collect();
        let devices = ScriptedSource::gpus(1, Script::Series(vec![])).devices;
        let w = [Span {
            start_s: 0.5,
            end_s: 2.0,
        }];
        let g = summarize_gpus(&devices, &t_s, &refs, &w, Duration::from_secs(1));
        let d = &g.devices[0];
        // 0.5..1.0 under the ramp 150..200 W (87.5 J), then 200 W for 1 s.
        assert_eq!(d.energy_source, Some(EnergySource::PowerIntegral));
        assert_eq!(d.energy_j, Some(287.5));
        // A window beyond the samples cannot be integrated.
        let late = [Span {
            start_s: 1.0,
            end_s: 5.0,
        }];
        let g = summarize_gpus(&devices, &t_s, &refs, &late, Duration::from_secs(1));
        assert_eq!(g.devices[0].energy_j, None);
        assert_eq!(g.energy_j, None);
    }

    #[test]
    fn long_series_are_thinned_but_summaries_use_every_sample() {
        let n = MAX_SERIES_POINTS * 2 + 1;
        let t_s: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let rows: Vec<Vec<GpuReading>> = (0..n)
            .map(|i| vec![reading(i as f64, 1, 100.0, None)])
            .collect();
        let refs: Vec<&Vec<GpuReading>> = rows.iter().collect();
        let devices = ScriptedSource::gpus(1, Script::Series(vec![])).devices;
        let w = [Span {
            start_s: 0.0,
            end_s: n as f64,
        }];
        let g = summarize_gpus(&devices, &t_s, &refs, &w, Duration::from_secs(1));
        let d = &g.devices[0];
        assert_eq!(d.series.thinned_by, 3);
        assert!(d.series.t_s.len() <= MAX_SERIES_POINTS);
        assert_eq!(d.series.utilization_pct[0], Some(1.0));
        assert_eq!(d.stats.utilization_pct.unwrap().count, n as u64);
    }

    /// The real threads with a scripted GPU whose utilization steps from
    /// 0 to 100 at a known instant: the samples on the point's clock must
    /// show the step where the window says it is.
    #[test]
    fn samples_align_with_run_windows_on_one_clock() {
        let step_at = Instant::now() + Duration::from_millis(150);
        let script = Script::ByTime(Arc::new(move |now: Instant| {
            let busy = now >= step_at;
            vec![GpuReading {
                utilization_pct: Some(if busy { 100.0 } else { 0.0 }),
                power_w: Some(if busy { 400.0 } else { 100.0 }),
                ..Default::default()
            }]
        }));
        let sampler = ScriptedSource::gpus(1, script).open(None).unwrap();
        let interval = Duration::from_millis(20);
        let mut s = Session::start(GpuPlan::Sample(sampler), interval, None);
        s.mark();
        let start = Instant::now();
        std::thread::sleep(step_at.saturating_duration_since(Instant::now()));
        let window_start = step_at;
        std::thread::sleep(Duration::from_millis(200));
        let window_end = Instant::now();
        s.mark();
        s.add_run(RunTimes {
            run: 0,
            start,
            window: Some((window_start, window_end)),
        });
        let t = s.finish();
        let run = &t.runs[0];
        assert!(run.start_s >= 0.0 && run.window_start_s >= run.start_s);
        assert!((run.window_end_s - run.window_start_s - 0.2).abs() < 0.05);
        let d = &t.gpu.devices[0];
        let u = d.stats.utilization_pct.unwrap();
        // Every sample inside the window was taken after the step.
        assert_eq!((u.min, u.max), (100.0, 100.0), "{:?}", d.series);
        assert!(
            u.count >= 5,
            "{} samples in a 200 ms window at 20 ms",
            u.count
        );
        // And every sample well before the window start, before it.
        for (t, v) in d.series.t_s.iter().zip(&d.series.utilization_pct) {
            if *t < run.window_start_s - 0.002 {
                assert_eq!(
                    *v,
                    Some(0.0),
                    "sample at {t} s, window from {}",
                    run.window_start_s
                );
            }
        }
        assert_eq!(t.gpu.status, GpuStatus::Sampled);
        // 400 W over ~0.2 s, integrated from samples bracketing the window.
        let e = t.gpu.energy_j.unwrap();
        let len = run.window_end_s - run.window_start_s;
        assert!((e / len - 400.0).abs() < 400.0 * 0.15, "{e} J over {len} s");
    }

    fn configs(targets: &str) -> Vec<PointConfig> {
        let src = format!(
            "name = \"t\"\n{targets}\n[models.m]\npreset = \"llama-3.1-8b\"\n\
             [workloads.w]\napi = \"completions\"\ninput_tokens = 8\noutput_tokens = 8\n\
             [load]\nconcurrency = 1\nrequests = 1\n"
        );
        let spec = infer_bench_spec::compile("t.toml", &src, std::path::Path::new(".")).unwrap();
        infer_bench_spec::plan::Plan::build(&spec)
            .unwrap()
            .points
            .into_iter()
            .map(|p| p.config)
            .collect()
    }

    #[test]
    fn required_gpus_are_checked_before_the_first_point() {
        let scripted = ScriptedSource::gpus(2, Script::Series(vec![]));
        let none = crate::gpu::NullSource {
            reason: "NVML is not available (no driver)".into(),
        };
        let real = configs(
            "[targets.a]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\ngpu_ids = [\"1\"]",
        );
        let sim = configs("[targets.s]\nkind = \"sim\"\ngpu = \"h100-sxm\"");
        let typo = configs(
            "[targets.a]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\ngpu_ids = [\"5\"]",
        );
        assert!(preflight(GpuMode::Required, &real, &scripted).is_ok());
        assert!(preflight(GpuMode::Auto, &real, &none).is_ok());
        assert!(preflight(GpuMode::Auto, &sim, &scripted).is_ok());
        let e = preflight(GpuMode::Required, &real, &none).unwrap_err();
        assert!(
            matches!(
                &e,
                Error::Required {
                    absence: Absence::NoGpu(_),
                    ..
                }
            ),
            "{e}"
        );
        let e = e.to_string();
        assert!(
            e.contains("target `a` has no GPU to sample: NVML is not available"),
            "{e}"
        );
        assert!(
            e.contains("\n  hint: run on a machine with an NVIDIA GPU"),
            "{e}"
        );
        let e = preflight(GpuMode::Required, &sim, &scripted).unwrap_err();
        assert!(
            matches!(
                &e,
                Error::Required {
                    absence: Absence::Simulated,
                    ..
                }
            ),
            "{e}"
        );
        let e = e.to_string();
        assert!(
            e.contains("built-in simulator") && e.contains("hint:"),
            "{e}"
        );
        // A gpu_ids that names no GPU here is told apart by its variant,
        // not by the words of its message: the hint is to fix gpu_ids.
        let e = preflight(GpuMode::Required, &typo, &scripted).unwrap_err();
        assert!(
            matches!(
                &e,
                Error::Required { target, absence: Absence::NotHere(why) }
                    if target == "a" && matches!(**why, Error::UnknownGpu { ref id, .. } if id == "5")
            ),
            "{e}"
        );
        let e = e.to_string();
        assert!(
            e.contains("\"5\"") && e.contains("fix targets.a.gpu_ids"),
            "{e}"
        );
        // A source whose reason merely mentions gpu_ids is still no GPU.
        let worded = crate::gpu::NullSource {
            reason: "gpu_ids cannot be read without a driver".into(),
        };
        let e = preflight(GpuMode::Required, &real, &worded).unwrap_err();
        assert!(
            matches!(
                &e,
                Error::Required {
                    absence: Absence::NoGpu(_),
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("hint: run on a machine"), "{e}");
        // Whatever the source, a simulated target's plan is its modelled
        // GPUs (none while it does not run), and off is off.
        assert!(matches!(
            gpu_plan(
                GpuMode::Auto,
                &sim[0],
                &scripted,
                Some(SimGpus::Virtual),
                None
            ),
            GpuPlan::Modelled
        ));
        assert!(
            matches!(gpu_plan(GpuMode::Auto, &sim[0], &scripted, None, None), GpuPlan::Absent(w) if w == SIM_NOT_RUNNING)
        );
        assert!(matches!(
            gpu_plan(
                GpuMode::Off,
                &sim[0],
                &scripted,
                Some(SimGpus::Virtual),
                None
            ),
            GpuPlan::Off
        ));
        assert!(matches!(
            gpu_plan(GpuMode::Off, &real[0], &scripted, None, None),
            GpuPlan::Off
        ));
        match gpu_plan(GpuMode::Auto, &real[0], &scripted, None, None) {
            GpuPlan::Sample(s) => assert_eq!(s.devices()[0].index, 1),
            _ => panic!("expected a sampler over GPU 1"),
        }
    }

    #[test]
    fn absent_and_off_say_so() {
        let s = Session::start(
            GpuPlan::Absent("no NVML".into()),
            Duration::from_millis(100),
            None,
        );
        let t = s.finish();
        assert_eq!(t.gpu.status, GpuStatus::Absent);
        assert_eq!(t.gpu.note.as_deref(), Some("no NVML"));
        assert!(t.gpu.devices.is_empty() && t.server_metrics.is_none());
        let t = Session::start(GpuPlan::Off, Duration::from_millis(100), None).finish();
        assert_eq!(t.gpu.status, GpuStatus::Off);
    }

    /// An exporter that refuses the first `down` fetches (a restarting
    /// pod), then serves one GPU.
    struct LateExporter {
        down: usize,
        calls: usize,
    }

    impl MetricsSource for LateExporter {
        fn fetch(&mut self) -> Result<String, Error> {
            self.calls += 1;
            if self.calls <= self.down {
                return Err(Error::Fetch {
                    url: "http://dcgm:9400/metrics".into(),
                    problem: crate::error::FetchError::Connect,
                });
            }
            Ok(format!(
                "DCGM_FI_DEV_SM_CLOCK{{gpu=\"0\",UUID=\"GPU-aaaa\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-a\"}} {}\n",
                1000 + self.calls
            ))
        }
    }

    fn late(down: usize) -> GpuPlan {
        let s = DcgmSampler::open_or_wait(
            "http://dcgm:9400/metrics",
            Box::new(LateExporter { down, calls: 0 }),
            Filter::default(),
            GpuDataSource::Dcgm,
        )
        .unwrap();
        GpuPlan::Sample(Box::new(s))
    }

    /// Runs a point of `marks` bracketing samples against `plan`.
    fn sampled(plan: GpuPlan, marks: usize) -> PointTelemetry {
        // A long interval: the marks take the samples.
        let mut s = Session::start(plan, Duration::from_secs(3600), None);
        let start = Instant::now();
        for _ in 0..marks {
            s.mark();
        }
        s.add_run(RunTimes {
            run: 0,
            start,
            window: Some((start, Instant::now())),
        });
        s.finish()
    }

    #[test]
    fn an_exporter_that_answers_late_gives_partial_telemetry_with_its_gaps() {
        // Open (1 refused) + the thread's first sample and two marks (2
        // refused, then answers) + three marks that read the GPU.
        let t = sampled(late(3), 6);
        let g = &t.gpu;
        assert_eq!(g.status, GpuStatus::Partial, "{g:?}");
        assert_eq!(g.devices.len(), 1);
        assert_eq!(g.devices[0].uuid.as_deref(), Some("GPU-aaaa"));
        assert_eq!(g.scrapes_failed, 2, "{g:?}");
        assert!(
            g.errors
                .iter()
                .all(|e| e.message.contains("cannot connect"))
        );
        // One that answers from the start is sampled, without gaps.
        let t = sampled(late(0), 3);
        assert_eq!(
            (t.gpu.status, t.gpu.scrapes_failed),
            (GpuStatus::Sampled, 0)
        );
    }

    #[test]
    fn an_exporter_that_never_answers_is_absent_saying_how_often_it_was_tried() {
        let t = sampled(late(usize::MAX), 3);
        let g = &t.gpu;
        assert_eq!(g.status, GpuStatus::Absent);
        assert!(g.devices.is_empty());
        let note = g.note.as_deref().unwrap();
        assert!(
            note.starts_with("no scrape of http://dcgm:9400/metrics answered during the point")
                && note.contains("cannot connect"),
            "{note}"
        );
    }

    #[test]
    fn what_an_answering_exporter_says_is_still_an_error_at_once() {
        let refused = DcgmSampler::open_or_wait(
            "http://dcgm:9400/metrics",
            Box::new(crate::scrape::ScriptedMetrics {
                texts: vec![Ok("# nothing here\n".into())],
                calls: 0,
            }),
            Filter::default(),
            GpuDataSource::Dcgm,
        );
        assert!(matches!(refused, Err(Error::ExporterListsNoGpu { .. })));
    }
}
