//! What a point's results say beyond the headline numbers, as the results
//! file keeps it: the statistics of each workload of a mix, memory by
//! phase of the request timeline, the load generator's own load, the
//! pre-flight findings before the point, and bottleneck hints (each with
//! the numbers behind it, never a verdict). See docs/expert.md.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Stats;

/// One workload of a mixed point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MixResult {
    pub workload: String,
    /// The weight the spec gives it, as a fraction of the mix.
    pub weight: f64,
    /// The fraction of measured requests that were this workload's.
    pub share: f64,
    /// Its requests' statistics (all runs merged); rates are over the
    /// point's whole window, so the parts' throughputs add up.
    pub stats: Stats,
}

/// Memory in each phase of the point, where it was measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryPhases {
    /// Of the request-seconds in flight over the windows, the share in
    /// prefill (sent, no output yet); the rest is decode.
    #[serde(default)]
    pub prefill_share: f64,
    /// Seconds of the windows (in 100 ms intervals) whose prefill share
    /// was above `prefill_share` (prefill-heavy), and the rest.
    #[serde(default)]
    pub prefill_heavy_s: f64,
    #[serde(default)]
    pub decode_heavy_s: f64,
    /// Per sampled GPU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuMemoryPhases>,
    /// The server's KV-cache usage (0 to 1) by phase, from its metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache: Option<PhasePeaks>,
}

/// The highest and mean values seen in each phase.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PhasePeaks {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_peak: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_peak: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_mean: Option<f64>,
}

/// One GPU's memory by phase, bytes (and its activity by phase).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuMemoryPhases {
    pub index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_bytes: Option<u64>,
    /// Before the server of the point's group started (launched servers),
    /// or before the first point of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_server_bytes: Option<u64>,
    /// After the server loaded, before the point's first request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_load_bytes: Option<u64>,
    pub used: PhasePeaks,
    /// DCGM's activity fractions (0 to 1) by phase, where the GPU's
    /// source gave them (a dcgm-exporter, or the simulator's model):
    /// prefill is mostly math (`tensor_active`), decode mostly reading
    /// weights and KV cache (`dram_active`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_active: Option<PhasePeaks>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_active: Option<PhasePeaks>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dram_active: Option<PhasePeaks>,
}

/// How busy the load generator's machine was during the point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClientLoad {
    /// CPU cores on the machine.
    pub cores: u32,
    /// CPU time this process used per second of wall time over the runs
    /// (1.0 = one core busy).
    pub process_cores: f64,
    /// The whole machine's CPU busy fraction over the runs (0 to 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_busy: Option<f64>,
    /// A launched server's CPU per second of wall time (its process tree's
    /// main process), where this machine runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cores: Option<f64>,
}

/// What a pre-flight check found before the point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Finding {
    /// Which check: other_processes, temperature, throttling, clocks,
    /// free_memory, client_cpu.
    pub check: String,
    /// The GPU concerned, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    /// One sentence with the numbers.
    pub message: String,
}

/// A bottleneck hint: a pattern in the numbers that often has one cause.
/// Never a verdict: `message` says what the numbers suggest, `evidence`
/// holds the numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Hint {
    /// client_bound, scheduling_bound, bandwidth_bound, tpot_spread,
    /// throttling, preemptions, gpu_imbalance, ramp_jump, image_tokens.
    pub kind: String,
    pub message: String,
    /// The figures behind it, by name.
    #[serde(default)]
    pub evidence: BTreeMap<String, f64>,
}
