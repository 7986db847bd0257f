//! The telemetry of one point as the results file keeps it: GPU samples
//! (through NVML) and the server's Prometheus metrics, each as summary
//! statistics over the measurement windows and as time series.
//!
//! One clock: every `t_s` is seconds since the point began (the instant
//! before its first run), on the same monotonic clock as requests.
//! `runs[i].start_s` places run `i` on that axis: it is the origin of the
//! run's `sched_ms` in `requests.jsonl`, so a request scheduled at
//! `sched_ms` sits at `runs[i].start_s + sched_ms / 1000`. The run's
//! measurement window is `[window_start_s, window_end_s]` (the same window
//! as `RunResult.stats.window_s`). Summary statistics use only the samples
//! inside the windows of all runs; the series keep everything, warm-up and
//! the gaps between runs included.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// GPU and server telemetry of one point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PointTelemetry {
    /// Each run on the point's clock (seconds since the point began).
    #[serde(default)]
    pub runs: Vec<RunSpan>,
    pub gpu: GpuTelemetry,
    /// The server's Prometheus metrics; absent when there was nothing to
    /// scrape (no `metrics_url`) or `telemetry.server_metrics = false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<ServerMetrics>,
}

/// Where one run lies on the point's clock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunSpan {
    pub run: u32,
    /// When the run began: the origin of its `sched_ms` in requests.jsonl.
    pub start_s: f64,
    /// Start of the measurement window (warm-up ends).
    pub window_start_s: f64,
    /// End of the measurement window (the last measured completion).
    pub window_end_s: f64,
}

/// Mean, percentiles and extremes of a sampled series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SeriesStats {
    /// Samples summarized.
    pub count: u64,
    // The figures come from outside (a server's metrics, NVML): one that
    // was not a finite number is left out when written (see `finite`),
    // and reads back as 0 rather than making the file unreadable.
    #[serde(default)]
    pub mean: f64,
    #[serde(default)]
    pub min: f64,
    /// Nearest-rank percentiles of the samples.
    #[serde(default)]
    pub p50: f64,
    #[serde(default)]
    pub p95: f64,
    #[serde(default)]
    pub max: f64,
}

/// Whether GPUs were sampled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GpuStatus {
    /// At least one GPU was sampled, and every sample was read.
    Sampled,
    /// GPUs were sampled, but some scrapes failed (`scrapes_failed`, the
    /// first few in `errors`): the series have gaps there. A dcgm-exporter
    /// that could not be reached when the point began (a restarting pod)
    /// and answered later is partial, not absent.
    Partial,
    /// No GPU to sample (no NVML, no device, a simulated target); `note` says why.
    #[default]
    Absent,
    /// `telemetry.gpu = "off"`.
    Off,
}

impl GpuStatus {
    /// Whether there are readings (sampled, with or without gaps).
    pub fn has_readings(self) -> bool {
        matches!(self, GpuStatus::Sampled | GpuStatus::Partial)
    }
}

/// The GPUs of one point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuTelemetry {
    pub status: GpuStatus,
    /// Why nothing was sampled, or what was odd, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The sampling interval asked for, seconds.
    #[serde(default)]
    pub interval_s: f64,
    /// Every sampled GPU together, over the measurement windows: energy,
    /// joules (the sum over GPUs and runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// Every sampled GPU together: mean power over the windows, watts
    /// (`energy_j` divided by the windows' total length).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w_mean: Option<f64>,
    #[serde(default)]
    pub devices: Vec<GpuDeviceTelemetry>,
    /// Where the figures came from (absent in files written before
    /// dcgm-exporter was read: NVML).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<GpuDataSource>,
    /// The dcgm-exporter (or simulator) endpoint read, when `source` is
    /// `dcgm` or `sim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Scrapes of `url` that failed (recorded, never fatal); their
    /// samples are missing from the series.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub scrapes_failed: u64,
    /// The first few failed scrapes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ScrapeError>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Where a GPU's figures came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GpuDataSource {
    /// NVML on the machine running the benchmark.
    Nvml,
    /// A dcgm-exporter's Prometheus text (the target's `gpu_metrics_url`).
    Dcgm,
    /// Modelled by the built-in simulator (its roofline and memory
    /// model), not measured.
    Sim,
    /// Triton Inference Server's own GPU gauges (`nv_gpu_*` on its
    /// `/metrics`): utilization, memory, power and energy only.
    Triton,
}

impl GpuTelemetry {
    /// The mean over the GPUs that have it of a per-GPU figure (e.g. each
    /// GPU's mean SM activity); `None` where none has it.
    pub fn device_mean(&self, f: impl Fn(&GpuStats) -> Option<f64>) -> Option<f64> {
        let v: Vec<f64> = self.devices.iter().filter_map(|d| f(&d.stats)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }
}

impl GpuDataSource {
    pub fn name(self) -> &'static str {
        match self {
            GpuDataSource::Nvml => "nvml",
            GpuDataSource::Dcgm => "dcgm",
            GpuDataSource::Sim => "sim",
            GpuDataSource::Triton => "triton",
        }
    }
}

/// One GPU over one point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuDeviceTelemetry {
    /// NVML's index of the device.
    pub index: u32,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Where this GPU's figures came from (absent in older files: NVML).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<GpuDataSource>,
    /// The host the GPU is in, as dcgm-exporter labels it (`Hostname`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_total_bytes: Option<u64>,
    /// Memory used at the point's first sample, before its first request
    /// (the server loaded and idle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_idle_bytes: Option<u64>,
    /// Statistics over the measurement windows.
    pub stats: GpuStats,
    /// Energy over the measurement windows, joules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_source: Option<EnergySource>,
    /// Clock-event (throttle) reasons: the fraction of in-window samples
    /// in which each was active, by NVML's name in snake case.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub throttle_reasons: BTreeMap<String, f64>,
    /// Compute processes NVML listed on this GPU during the point.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<GpuProcess>,
    pub series: GpuSeries,
}

/// How a GPU's energy was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EnergySource {
    /// NVML's total-energy counter (Volta and newer), interpolated at the
    /// window edges.
    Counter,
    /// Power samples integrated over time (trapezoids): an estimate.
    PowerIntegral,
}

/// Statistics of each sampled quantity over the measurement windows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuStats {
    /// Percent of time a kernel was running (NVML "GPU utilization").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_pct: Option<SeriesStats>,
    /// Percent of time device memory was read or written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bandwidth_utilization_pct: Option<SeriesStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_used_bytes: Option<SeriesStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<SeriesStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<SeriesStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_clock_mhz: Option<SeriesStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<SeriesStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_rx_bytes_per_s: Option<SeriesStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_tx_bytes_per_s: Option<SeriesStats>,
    /// NVLink data received and sent, bytes per second (all links).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_rx_bytes_per_s: Option<SeriesStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlink_tx_bytes_per_s: Option<SeriesStats>,
    /// Fraction of time (0 to 1) at least one warp was resident on an SM,
    /// averaged over all SMs (DCGM `DCGM_FI_PROF_SM_ACTIVE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_active: Option<SeriesStats>,
    /// Resident warps as a fraction (0 to 1) of the most an SM can hold,
    /// averaged over all SMs (DCGM `DCGM_FI_PROF_SM_OCCUPANCY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_occupancy: Option<SeriesStats>,
    /// Fraction of cycles (0 to 1) the tensor pipes were active (DCGM
    /// `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_active: Option<SeriesStats>,
    /// Fraction of cycles (0 to 1) the device-memory interface was busy
    /// sending or receiving data (DCGM `DCGM_FI_PROF_DRAM_ACTIVE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dram_active: Option<SeriesStats>,
    /// The SM clock's maximum and its application-clock setting (MHz), as
    /// read at the point's first sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_max_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_app_clock_mhz: Option<f64>,
}

/// A GPU's samples as columns: `t_s[i]` is when sample `i` was taken;
/// `null` where NVML could not read a quantity. Long series are thinned to
/// at most `MAX_SERIES_POINTS` by averaging consecutive samples
/// (`thinned_by` says how many went into each).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuSeries {
    /// Samples averaged into each point of the series (1: every sample).
    #[serde(default = "one")]
    pub thinned_by: u32,
    pub t_s: Vec<f64>,
    pub utilization_pct: Vec<Option<f64>>,
    pub memory_bandwidth_utilization_pct: Vec<Option<f64>>,
    pub memory_used_bytes: Vec<Option<f64>>,
    pub power_w: Vec<Option<f64>>,
    /// Energy since the point began, joules.
    pub energy_j: Vec<Option<f64>>,
    pub sm_clock_mhz: Vec<Option<f64>>,
    pub memory_clock_mhz: Vec<Option<f64>>,
    pub temperature_c: Vec<Option<f64>>,
    /// NVML's clock-event reason bits (ORed when thinned).
    pub throttle_reasons: Vec<Option<u64>>,
    pub pcie_rx_bytes_per_s: Vec<Option<f64>>,
    pub pcie_tx_bytes_per_s: Vec<Option<f64>>,
    /// NVLink, bytes per second (dcgm-exporter; absent from NVML series).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvlink_rx_bytes_per_s: Vec<Option<f64>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvlink_tx_bytes_per_s: Vec<Option<f64>>,
    /// DCGM's profiling fractions (0 to 1); absent where not read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sm_active: Vec<Option<f64>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sm_occupancy: Vec<Option<f64>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tensor_active: Vec<Option<f64>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dram_active: Vec<Option<f64>>,
}

fn one() -> u32 {
    1
}

/// The most points a stored series keeps.
pub const MAX_SERIES_POINTS: usize = 1200;

/// A process with a compute context on a GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuProcess {
    pub pid: u32,
    /// The process's name (Linux `/proc/PID/comm`), where readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The most GPU memory NVML saw it use, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_used_bytes_max: Option<u64>,
}

/// The server families whose metrics are understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ServerFamily {
    Vllm,
    Sglang,
    Tgi,
    Llamacpp,
    /// Triton Inference Server (`nv_inference_*`, port 8002 by default).
    Triton,
}

impl ServerFamily {
    pub fn name(self) -> &'static str {
        match self {
            ServerFamily::Vllm => "vllm",
            ServerFamily::Sglang => "sglang",
            ServerFamily::Tgi => "tgi",
            ServerFamily::Llamacpp => "llamacpp",
            ServerFamily::Triton => "triton",
        }
    }
}

/// The server's Prometheus metrics over one point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerMetrics {
    pub url: String,
    /// Recognized from the metric names; absent when none was recognized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<ServerFamily>,
    /// The scrape interval asked for, seconds.
    pub interval_s: f64,
    pub scrapes_ok: u64,
    pub scrapes_failed: u64,
    /// The first few failed scrapes (a failure is recorded, never fatal).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ScrapeError>,
    /// The figures people look at, whatever the family calls them.
    pub headline: ServerHeadline,
    /// When each successful scrape was taken (the series' common axis).
    pub t_s: Vec<f64>,
    /// Gauges by their Prometheus name: statistics over the windows and
    /// the value at every scrape (label sets combined; see docs/telemetry.md).
    #[serde(default)]
    pub gauges: BTreeMap<String, GaugeSeries>,
    /// Counters by their Prometheus name: the increase over the windows
    /// and the increase since the first scrape at every scrape.
    #[serde(default)]
    pub counters: BTreeMap<String, CounterSeries>,
}

/// A failed scrape.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScrapeError {
    pub t_s: f64,
    pub message: String,
}

/// One gauge over a point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GaugeSeries {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<SeriesStats>,
    /// At each successful scrape (`null`: absent from that scrape).
    pub values: Vec<Option<f64>>,
}

/// One counter over a point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CounterSeries {
    /// The increase over the measurement windows (resets handled), taken
    /// between the last scrape at or before each window's start and the
    /// first at or after its end, summed over runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<f64>,
    /// The time those scrapes span, seconds (at least the windows' length).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_s: Option<f64>,
    /// Increase since the point's first scrape, at each successful scrape.
    pub values: Vec<Option<f64>>,
}

/// A server's headline figures, in one vocabulary across families.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerHeadline {
    /// Requests being processed (vLLM running, SGLang running, TGI batch size, llama.cpp processing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<SeriesStats>,
    /// Requests queued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<SeriesStats>,
    /// KV-cache usage, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_usage_ratio: Option<SeriesStats>,
    /// Preemptions over the windows (vLLM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptions: Option<f64>,
    /// Prompt tokens served from the prefix cache over the windows, as a
    /// fraction of prompt tokens (or the server's own hit-rate gauge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache_hit_ratio: Option<f64>,
    /// Prompt tokens the server counted over the windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<f64>,
    /// Generated tokens the server counted over the windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_tokens: Option<f64>,
    /// Speculative decoding: draft tokens accepted over proposed over the
    /// windows, 0 to 1 (vLLM's counters; SGLang's gauge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_acceptance_rate: Option<f64>,
    /// Speculative decoding: tokens a request gains per verification step,
    /// the bonus token included (1 + accepted per draft: vLLM's "mean
    /// acceptance length"; SGLang's gauge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_accept_length: Option<f64>,
}
