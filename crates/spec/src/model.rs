//! Domain types of a compiled spec: every reference resolved, every default
//! applied, every unit parsed. Later stages (plan, run, judge) read only
//! these. They serialize, because each point's resolved configuration is
//! written into results and baselines.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::raw::{
    Against, Api, Arrival, DatasetFormat, Dialect, GpuMode, ModelKind, OnEnvMismatch, RawSampling,
    SimAdmission, SimClock, SimMemoryBasis, SimProfile, SimScheduler, TargetKind, TraceFormat,
};
use super::{Dist, Duration, Percent, Rate, SloExpr, Stat};
use infer_bench_results::metric::Metric;

/// A server to send requests to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Target {
    pub name: String,
    pub kind: TargetKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The name of the environment variable holding the key (never the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Extra headers; values are kept out of results (only names are written).
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        serialize_with = "header_names"
    )]
    pub headers: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_url: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls_insecure: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<String>,
    /// The server's dialect as the spec declares it; `None`: asked of the
    /// server when the run starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialect: Option<Dialect>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<Launch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_ids: Option<Vec<String>>,
    /// A dcgm-exporter endpoint read for GPU telemetry instead of NVML.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_metrics_url: Option<String>,
    /// Labels every GPU read from `gpu_metrics_url` must carry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gpu_metrics_match: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim: Option<SimTarget>,
    /// Price of one of this target's GPUs per hour (USD), over `[cost]`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_hour_usd: Option<f64>,
}

fn header_names<S: serde::Serializer>(
    h: &BTreeMap<String, String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(h.keys().map(|k| (k, "<redacted>")))
}

/// How to start and stop a managed server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Launch {
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    pub ready: String,
    pub startup_timeout: Duration,
    pub stop_grace: Duration,
    /// The environment variables `{env.NAME}` may read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_env: Vec<String>,
}

/// The simulator's settings as the spec gives them. `None` is the
/// profile's default, which depends on the model and GPU as well, so the
/// simulator resolves it (`infer_bench_sim::profile`) and records the
/// resolved values with each point's server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SimTarget {
    pub gpu: String,
    pub gpus: u32,
    /// The engine modelled; absent: vllm-0.10 (and in results written
    /// before profiles, the settings below were all given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<SimProfile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<SimScheduler>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_seqs: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_batched_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_fraction: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_fraction_of: Option<SimMemoryBasis>,
    /// Peak achieved fraction of tensor throughput.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_efficiency: Option<f64>,
    /// Achieved fraction of memory bandwidth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_efficiency: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_overhead: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_overhead_per_seq: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_overhead: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_steps: Option<u32>,
    /// Data-parallel replicas (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// Pipeline-parallel stages (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<u32>,
    pub slowdown: f64,
    pub noise: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_tokens: Option<u64>,
    pub tokens_per_event: u32,
    /// Real time (an HTTP server, the real client) or virtual time (a
    /// discrete-event simulation); written only when virtual.
    #[serde(default, skip_serializing_if = "SimClock::is_real")]
    pub clock: SimClock,
    /// How a waiting request is admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<SimAdmission>,
}

impl SimTarget {
    /// Every GPU the deployment uses: tensor × pipeline × data parallel.
    pub fn total_gpus(&self) -> u32 {
        self.gpus
            .saturating_mul(self.pipeline.unwrap_or(1))
            .saturating_mul(self.replicas.unwrap_or(1))
    }
}

/// Number formats of weights and KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    Fp32,
    Bf16,
    Fp16,
    Fp8,
    Int8,
    Int4,
    /// 4-bit floating point with a scale per block (NVFP4: an FP8 scale per
    /// 16 values, 4.5 bits a value; MXFP4: one per 32).
    Fp4,
}

impl DType {
    pub const NAMES: &'static str = "fp32, bf16, fp16, fp8, int8, int4, fp4";

    pub fn parse(s: &str) -> Option<DType> {
        Some(match s.to_ascii_lowercase().as_str() {
            "fp32" | "f32" => DType::Fp32,
            "bf16" => DType::Bf16,
            "fp16" | "f16" => DType::Fp16,
            "fp8" | "f8" | "fp8_e4m3" => DType::Fp8,
            "int8" | "q8_0" | "w8a8" | "i8" => DType::Int8,
            "int4" | "q4_0" | "awq" | "gptq" | "w4a16" | "i4" => DType::Int4,
            "fp4" | "nvfp4" | "mxfp4" => DType::Fp4,
            _ => return None,
        })
    }

    pub fn bytes(self) -> f64 {
        match self {
            DType::Fp32 => 4.0,
            DType::Bf16 | DType::Fp16 => 2.0,
            DType::Fp8 | DType::Int8 => 1.0,
            DType::Int4 => 0.5,
            // NVFP4: 4 bits and an 8-bit scale per 16 values.
            DType::Fp4 => 0.5625,
        }
    }
}

/// A model, as served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Model {
    pub name: String,
    pub served_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_b: Option<f64>,
    /// The shape, from a preset or the spec (needed by the simulator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<Architecture>,
    /// A vision or encoder network (not a language model): its preset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
}

impl Model {
    /// What kind of model it is.
    pub fn kind(&self) -> ModelKind {
        self.network.as_ref().map_or(ModelKind::Llm, |n| n.kind)
    }
}

/// A network that maps tensors to tensors, served over KServe v2: which
/// preset of the catalogue (`catalog::network`) it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Network {
    pub kind: ModelKind,
    /// `None`: a network of a real server only (the simulator needs one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
}

impl Network {
    /// The catalogue's figures of its preset (`None` without one, or for
    /// a results file from a build that knew a preset this one does not).
    pub fn figures(&self) -> Option<&'static crate::catalog::Network> {
        self.preset.as_deref().and_then(crate::catalog::network)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Architecture {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    pub params_b: f64,
    pub active_params_b: f64,
    pub layers: u32,
    pub hidden: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    /// The longest sequence the model takes (its `max_position_embeddings`);
    /// `None`: the preset's, else 131072. Written only when the spec gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u32>,
    /// Multi-head latent attention: the values cached per token and layer,
    /// shared by all heads (DeepSeek's 576); `None`: K and V per KV head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_latent_dim: Option<u32>,
    /// A vision-language preset's image encoder, which the simulator
    /// charges for every image; `None`: text only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vision: Option<crate::catalog::VisionEncoder>,
}

/// A precision of a model, overrides applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Precision {
    pub name: String,
    /// The model name served at this precision (overrides the model's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<DType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_dtype: Option<DType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arg: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<String>,
}

/// The requests of a point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Workload {
    pub name: String,
    pub api: Api,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<Dist>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<Dist>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_prefix: Option<SharedPrefix>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<Dataset>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Trace>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Conversation>,
    pub ignore_eos: bool,
    pub stream: bool,
    pub max_tokens_field: String,
    #[serde(default, skip_serializing_if = "is_default_sampling")]
    pub sampling: RawSampling,
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// A mixed workload: its parts and their weights (summing to 1). The
    /// fields above are the parts' shared request settings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mix: Vec<MixPart>,
    /// Images in every request's last user message (chat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<crate::media::Images>,
    /// An audio clip in every request's last user message (chat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<crate::media::Audio>,
    /// Embeddings and rerank: what a request carries besides its first
    /// text (`crate::retrieval`); `None` for chat and completions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieval: Option<crate::retrieval::Retrieval>,
    /// Structured output and tools: what every request asks answers to
    /// be, and what they are validated against.
    #[serde(default, skip_serializing_if = "is_unstructured")]
    pub structured: crate::structured::Structured,
}

fn is_unstructured(s: &crate::structured::Structured) -> bool {
    !s.is_set()
}

/// One workload of a mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MixPart {
    pub weight: f64,
    pub workload: Workload,
}

fn is_default_sampling(s: &RawSampling) -> bool {
    *s == RawSampling::default()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SharedPrefix {
    pub tokens: u32,
    pub count: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Dataset {
    /// As written in the spec (relative to it).
    pub path: String,
    /// SHA-256 of the file's bytes, so a changed dataset is a changed point.
    pub sha256: String,
    pub format: DatasetFormat,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_input_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_tokens: Option<u32>,
}

/// A replayed trace: the file, the window of it that is replayed and what
/// that window holds (read at compile time).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Trace {
    /// As written in the spec (relative to it).
    pub file: String,
    /// SHA-256 of the file's bytes, so a changed trace is a changed point.
    pub sha256: String,
    pub format: TraceFormat,
    pub speedup: f64,
    pub start: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
    pub block_tokens: u32,
    /// Requests inside the window.
    pub requests: u64,
    /// The last request's send time on the replay's clock.
    pub span: Duration,
}

impl Trace {
    /// The window as the parser takes it.
    pub fn window(&self) -> crate::trace::Window {
        crate::trace::Window {
            start_ns: self.start.as_nanos(),
            duration_ns: self.duration.map(Duration::as_nanos),
            speedup: self.speedup,
        }
    }

    /// The replay's mean arrival rate (requests over the span), per second.
    pub fn mean_rate(&self) -> f64 {
        let s = self.span.as_secs_f64();
        if s > 0.0 {
            (self.requests.saturating_sub(1).max(1)) as f64 / s
        } else {
            crate::limits::MAX_RATE_PER_S
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Conversation {
    pub turns: u32,
    pub think_time: Duration,
}

/// A load level: closed-loop concurrency or open-loop rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Concurrency(u32),
    Rate(Rate),
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Level::Concurrency(c) => write!(f, "c={c}"),
            Level::Rate(r) => write!(f, "rate={r}"),
        }
    }
}

/// Warm-up before the measurement window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Warmup {
    None,
    Time(Duration),
    Requests(u64),
}

/// A capacity search (`[load] search`): the highest level from `from` to
/// `to` whose probe meets `target`, to within `precision`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Search {
    pub over: super::raw::SearchOver,
    /// The first level probed (also the point's `level`).
    pub from: Level,
    /// The highest level probed.
    pub to: Level,
    pub target: SearchTarget,
    /// The search ends when the first failing level is at most this far
    /// above the last passing one.
    pub precision: Percent,
}

/// What a probe of a capacity search must meet to pass. A probe that is
/// INVALID or failed never passes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SearchTarget {
    /// Every `[slo]` gate holds.
    Slo,
    /// At least this share of the measured requests is good (within every
    /// `[goodput]` bound).
    Goodput(Percent),
}

/// Why a search target does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected \"slo\" or \"goodput >= 95%\", found \"{0}\"")]
pub struct ParseSearchTargetError(pub String);

impl std::str::FromStr for SearchTarget {
    type Err = ParseSearchTargetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseSearchTargetError(crate::files::excerpt(s));
        let t = s.trim();
        if t == "slo" {
            return Ok(SearchTarget::Slo);
        }
        let rest = t.strip_prefix("goodput").ok_or_else(err)?.trim_start();
        let pct = rest.strip_prefix(">=").ok_or_else(err)?;
        let p: Percent = pct.parse().map_err(|_| err())?;
        if p.value() > 100.0 {
            return Err(err());
        }
        Ok(SearchTarget::Goodput(p))
    }
}

impl std::fmt::Display for SearchTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SearchTarget::Slo => f.write_str("slo"),
            SearchTarget::Goodput(p) => write!(f, "goodput >= {p}"),
        }
    }
}

impl Serialize for SearchTarget {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SearchTarget {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for SearchTarget {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SearchTarget".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "\"slo\" or \"goodput >= 95%\"."
        })
    }
}

/// A staircase of levels within one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Ramp {
    pub levels: Vec<Level>,
    pub every: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Timeouts {
    pub connect: Duration,
    pub first_token: Duration,
    pub idle: Duration,
    pub total: Duration,
}

/// `[load.limits]`: what one response may cost the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Limits {
    /// Longest SSE line, and largest SSE event, in bytes.
    pub max_line_bytes: u64,
    /// Most bytes of one response body.
    pub max_response_bytes: u64,
    /// Most SSE events in one response.
    pub max_events: u64,
    /// Bytes of an error response read for its message.
    pub max_error_body_bytes: u64,
}

impl Limits {
    /// The defaults: 1 MiB lines, 64 MiB responses, a million events, 4 KiB error bodies.
    pub const DEFAULT: Limits = Limits {
        max_line_bytes: 1 << 20,
        max_response_bytes: 64 << 20,
        max_events: 1_000_000,
        max_error_body_bytes: 4096,
    };
    /// The largest value each may take (the compiler rejects more).
    pub const MAX: Limits = Limits {
        max_line_bytes: 1 << 30,
        max_response_bytes: 1 << 40,
        max_events: 100_000_000,
        max_error_body_bytes: 1 << 20,
    };

    /// Whether these are the defaults (then a point's config leaves them out).
    pub fn is_default(&self) -> bool {
        *self == Limits::DEFAULT
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}

/// The load of one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Load {
    pub arrival: Arrival,
    /// Gamma shape (1 for poisson).
    pub burstiness: f64,
    /// The level of a steady point; with a ramp, its first step.
    pub level: Level,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp: Option<Ramp>,
    /// A capacity search: this point stands for the search, and each of
    /// its probes is a point of its own at one level, without `search`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<Search>,
    pub warmup: Warmup,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    pub runs: u32,
    pub window: Duration,
    pub timeouts: Timeouts,
    #[serde(default, skip_serializing_if = "Limits::is_default")]
    pub limits: Limits,
    /// A new connection for every request, none kept alive: connect time
    /// counts in the latencies. Not written when false (configs from
    /// before the key compare unchanged).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cold_connections: bool,
    /// When the server's prefix cache is reset (issue 42). Not written
    /// when `auto` (configs from before the key compare unchanged).
    #[serde(default, skip_serializing_if = "ResetCache::is_auto")]
    pub reset_cache: ResetCache,
}

pub use crate::raw::ResetCache;

/// One SLO gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SloGate {
    #[schemars(with = "String")]
    #[serde(with = "metric_name")]
    pub metric: Metric,
    pub expr: SloExpr,
}

/// Per-request bounds of goodput.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Goodput {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e: Option<Duration>,
}

impl Goodput {
    pub fn is_empty(&self) -> bool {
        self.ttft.is_none() && self.tpot.is_none() && self.e2e.is_none()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Cost {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_hour_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kwh_usd: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Telemetry {
    pub gpu: GpuMode,
    /// GPU sampling interval.
    pub interval: Duration,
    pub server_metrics: bool,
    /// Server metrics scraping interval.
    pub scrape_interval: Duration,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Validity {
    pub min_duration: Duration,
    pub min_requests: u64,
    /// A fixed budget for each run's dispatch lag p99; none: the relative
    /// rule of [`Validity::dispatch_lag_budget`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_dispatch_lag_p99: Option<Duration>,
    pub max_rate_gap: Percent,
    pub percentile_sample_check: bool,
}

/// A client that fell behind its schedule by more than its budget.
#[derive(Debug, Clone, PartialEq)]
pub struct LateClient {
    /// Which percentile of the dispatch lag: "p50" or "p99".
    pub stat: &'static str,
    /// That percentile of the dispatch lag (ms).
    pub lag_ms: f64,
    /// Its budget (ms).
    pub budget_ms: f64,
    /// The rule that set the budget, in words.
    pub rule: String,
}

impl Validity {
    /// The default budget of the dispatch lag's median, as a share of the
    /// median of the latency it distorts (see docs/metrics.md, "The
    /// dispatch-lag budget").
    pub const DISPATCH_LAG_P50_SHARE_PCT: f64 = 5.0;
    /// The default budget of the dispatch lag's p99, as a share of the p99
    /// of the latency it distorts.
    pub const DISPATCH_LAG_P99_SHARE_PCT: f64 = 10.0;
    /// The default budget of the dispatch lag's median is never below
    /// this: a client that keeps up sends within a fraction of it.
    pub const DISPATCH_LAG_P50_FLOOR: Duration = Duration::from_millis(1);
    /// The default budget of the dispatch lag's p99 is never below this:
    /// the scheduler of a saturated 2-core machine preempts the client for
    /// a few milliseconds now and then (up to 5.4 ms in 285 quickstart runs
    /// measured), which lands in the p99 of a short run; a client late on
    /// every request is the median's to catch.
    pub const DISPATCH_LAG_P99_FLOOR: Duration = Duration::from_millis(10);

    /// Whether a run (or a point's merged distributions) with these latency
    /// summaries had a client that fell behind: the first budget exceeded,
    /// if any.
    ///
    /// A set `max_dispatch_lag_p99` is a fixed budget for the lag's p99.
    /// Otherwise each percentile of the lag is held to a share of the same
    /// percentile of what it distorts, the TTFT measured from send (the
    /// server's own time to first token: neither the client's lateness nor
    /// a wait for a free slot raises it; the E2E when requests are not
    /// streamed): the median to `DISPATCH_LAG_P50_SHARE_PCT`, the p99 to
    /// `DISPATCH_LAG_P99_SHARE_PCT`, at least their floors. A
    /// client late on every request moves the median; a busy machine that
    /// preempts the client now and then moves only the tail, which it may
    /// do in proportion to the tail it lands in.
    pub fn late_client(
        &self,
        latency_ms: &BTreeMap<String, infer_bench_results::hist::Summary>,
    ) -> Option<LateClient> {
        self.late_in("dispatch_lag", latency_ms)
    }

    /// The same budget held against the client's read delay (how long the
    /// bytes of a response waited for the client to stamp them): a client
    /// late on the read side distorts TTFT and ITL as much as one late on
    /// the send side.
    pub fn late_reader(
        &self,
        latency_ms: &BTreeMap<String, infer_bench_results::hist::Summary>,
    ) -> Option<LateClient> {
        self.late_in("read_delay", latency_ms)
    }

    fn late_in(
        &self,
        name: &str,
        latency_ms: &BTreeMap<String, infer_bench_results::hist::Summary>,
    ) -> Option<LateClient> {
        let lag = latency_ms.get(name).filter(|s| s.count > 0)?;
        if let Some(fixed) = self.max_dispatch_lag_p99 {
            return (lag.p99 > fixed.as_millis_f64()).then(|| LateClient {
                stat: "p99",
                lag_ms: lag.p99,
                budget_ms: fixed.as_millis_f64(),
                rule: format!("[validity] max_dispatch_lag_p99 = \"{fixed}\""),
            });
        }
        let floor = Self::DISPATCH_LAG_P99_FLOOR.as_millis_f64();
        let set = "[validity] max_dispatch_lag_p99 sets a fixed one";
        let reference = ["ttft_from_send", "e2e"].into_iter().find_map(|name| {
            let s = latency_ms.get(name).filter(|s| s.count > 0)?;
            Some((if name == "e2e" { "E2E" } else { "TTFT" }, s))
        });
        let Some((label, r)) = reference else {
            return (lag.p99 > floor).then(|| LateClient {
                stat: "p99",
                lag_ms: lag.p99,
                budget_ms: floor,
                rule: format!(
                    "the floor {}: no latency to scale it by; {set}",
                    Self::DISPATCH_LAG_P99_FLOOR
                ),
            });
        };
        [
            (
                "p50",
                lag.p50,
                Self::DISPATCH_LAG_P50_SHARE_PCT,
                r.p50,
                Self::DISPATCH_LAG_P50_FLOOR,
            ),
            (
                "p99",
                lag.p99,
                Self::DISPATCH_LAG_P99_SHARE_PCT,
                r.p99,
                Self::DISPATCH_LAG_P99_FLOOR,
            ),
        ]
        .into_iter()
        .find_map(|(stat, lag_ms, share, of, floor)| {
            let budget_ms = (share / 100.0 * of).max(floor.as_millis_f64());
            (lag_ms > budget_ms).then(|| LateClient {
                stat,
                lag_ms,
                budget_ms,
                rule: format!(
                    "{}% of {label} {stat} {of:.1} ms, at least {floor}; {set}",
                    super::de::fmt_number(share),
                ),
            })
        })
    }
}

/// One regression gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Gate {
    #[schemars(with = "String")]
    #[serde(with = "metric_name")]
    pub metric: Metric,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stat: Option<Stat>,
    pub noise: Percent,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Regression {
    pub baseline: String,
    pub gates: Vec<Gate>,
    pub confidence: Percent,
    pub min_runs: u32,
    pub on_env_mismatch: OnEnvMismatch,
    pub confirm: u32,
    /// Points that could not be judged pass instead of failing (exit 4).
    #[serde(default)]
    pub allow_unjudged: bool,
    /// What a point is judged against (left out of pinned rules when it is
    /// the baseline, so rules pinned before it read the same).
    #[serde(default, skip_serializing_if = "Against::is_baseline")]
    pub against: Against,
    /// The history folder for `against = "history"` ("" in pinned rules:
    /// like `baseline`, a place, not a rule).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub history: String,
}

impl Against {
    pub fn is_baseline(&self) -> bool {
        *self == Against::Baseline
    }
}

/// A matrix axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    Target,
    Model,
    Precision,
    Workload,
    Concurrency,
    Rate,
    MaxConcurrency,
    /// Embeddings: inputs per request.
    Batch,
    /// Rerank: documents per request.
    Documents,
    /// A launched server's flags (`crate::server_args`).
    ServerArgs,
}

impl Axis {
    pub const ALL: &'static [Axis] = &[
        Axis::Target,
        Axis::Model,
        Axis::Precision,
        Axis::Workload,
        Axis::Concurrency,
        Axis::Rate,
        Axis::MaxConcurrency,
        Axis::Batch,
        Axis::Documents,
        Axis::ServerArgs,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Axis::Target => "target",
            Axis::Model => "model",
            Axis::Precision => "precision",
            Axis::Workload => "workload",
            Axis::Concurrency => "concurrency",
            Axis::Rate => "rate",
            Axis::MaxConcurrency => "max_concurrency",
            Axis::Batch => "batch",
            Axis::Documents => "documents",
            Axis::ServerArgs => "server_args",
        }
    }
    pub fn from_name(s: &str) -> Option<Axis> {
        Axis::ALL.iter().copied().find(|a| a.name() == s)
    }
}

/// A value on an axis.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AxisValue {
    Name(String),
    Count(u32),
    Rate(Rate),
    ServerArgs(std::sync::Arc<crate::server_args::ServerArgs>),
}

impl std::fmt::Display for AxisValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AxisValue::Name(s) => f.write_str(s),
            AxisValue::Count(c) => write!(f, "{c}"),
            AxisValue::Rate(r) => write!(f, "{r}"),
            AxisValue::ServerArgs(a) => f.write_str(&a.name),
        }
    }
}

/// A combination of axis values (one matrix entry).
pub type Combo = Vec<(Axis, AxisValue)>;

/// The matrix: ordered axes, excludes, includes; values already checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matrix {
    pub axes: Vec<(Axis, Vec<AxisValue>)>,
    pub exclude: Vec<Combo>,
    pub include: Vec<Combo>,
}

/// Defaults of the `[load]` table that matrix axes may override.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadDefaults {
    pub arrival: Option<Arrival>,
    pub burstiness: f64,
    pub concurrency: Option<u32>,
    pub rate: Option<Rate>,
    pub max_concurrency: Option<u32>,
    pub ramp: Option<super::raw::RawRamp>,
    pub search: Option<Search>,
    pub warmup: Warmup,
    pub duration: Option<Duration>,
    pub requests: Option<u64>,
    pub runs: u32,
    pub window: Duration,
    pub timeouts: Timeouts,
    pub limits: Limits,
    pub cold_connections: bool,
    pub reset_cache: ResetCache,
}

/// A compiled spec.
#[derive(Debug, Clone)]
pub struct Spec {
    pub name: String,
    pub description: Option<String>,
    pub seed: u64,
    /// Path of the spec file as given.
    pub path: std::path::PathBuf,
    /// The file's text, kept for diagnostics and written into results.
    pub source: String,
    pub targets: BTreeMap<String, Target>,
    pub models: BTreeMap<String, (Model, BTreeMap<String, Precision>)>,
    pub workloads: BTreeMap<String, Workload>,
    pub load: LoadDefaults,
    pub matrix: Matrix,
    pub slo: Vec<SloGate>,
    pub goodput: Goodput,
    pub cost: Cost,
    pub telemetry: Telemetry,
    pub validity: Validity,
    pub regression: Regression,
    /// The quality phase (`[quality]`), if asked for.
    pub quality: Option<Quality>,
    pub(crate) locator: super::diag::Locator,
    /// The sizes of the files it names (`crate::budget`).
    pub(crate) sizes: crate::budget::Sizes,
}

/// The `[quality]` table, compiled: what each server's quality phase asks
/// and whose answers it is compared with.
#[derive(Debug, Clone, PartialEq)]
pub struct Quality {
    /// Whose answers the others' are compared with; `None` with a
    /// scored dataset only (accuracy without agreement).
    pub reference: Option<QualityReference>,
    /// How many prompts are asked (of the dataset's, its first).
    pub prompts: u32,
    pub max_tokens: u32,
    pub logprobs: u32,
    pub api: super::raw::QualityApi,
    pub concurrency: u32,
    /// The prompts of a dataset, read and checked.
    pub dataset: Option<QualityDataset>,
    /// How answers are scored against the dataset's expected ones.
    pub scorer: Option<QualityScorer>,
}

/// A quality dataset, read: its prompts with their expected answers.
#[derive(Debug, Clone, PartialEq)]
pub struct QualityDataset {
    /// As the spec wrote it.
    pub path: String,
    pub sha256: String,
    pub items: Vec<QualityItem>,
}

/// One prompt of a quality dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct QualityItem {
    pub prompt: String,
    pub answer: Option<String>,
}

/// A scorer as the spec names it (checked: `results::accuracy::Scorer::new`
/// builds it).
#[derive(Debug, Clone, PartialEq)]
pub struct QualityScorer {
    pub name: String,
    pub pattern: Option<String>,
    pub tolerance: Option<f64>,
}

/// Whose answers are the reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QualityReference {
    /// This precision of the same target and model.
    Precision(String),
    /// This target with the same model and precision.
    Target(String),
}

/// A metric as its name (`Metric` itself has no serde impls).
mod metric_name {
    use infer_bench_results::metric::Metric;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &Metric, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(m.name())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Metric, D::Error> {
        // "a string" is what `String`'s own visitor expects: same messages.
        crate::de::from_str_visitor(d, "a string")
    }
}

/// Which metrics may carry an SLO, for messages.
pub fn slo_metric_names() -> Vec<&'static str> {
    vec![
        "ttft",
        "ttft_from_send",
        "ttft_reasoning",
        "ttft_answer",
        "tpot",
        "itl",
        "itl_token",
        "e2e",
        "dispatch_lag",
        "error_rate",
        "goodput_ratio",
        "goodput",
        "request_throughput",
        "output_tokens_per_s",
        "agreement",
        "token_agreement",
        "first_diff",
        "kl_mean",
        "accuracy",
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gate's metric is a name: its errors say so, for a wrong name and
    /// for a value that is not a string.
    #[test]
    fn metric_names_deserialize_with_their_messages() {
        let gate = |metric: &str| {
            serde_json::from_str::<Gate>(&format!(r#"{{"metric": {metric}, "noise": "5%"}}"#))
                .map_err(|e| e.to_string())
        };
        assert_eq!(gate(r#""ttft""#).unwrap().metric, Metric::Ttft);
        assert_eq!(
            gate(r#""latency""#).unwrap_err(),
            "unknown metric `latency` at line 1 column 20"
        );
        assert_eq!(
            gate("5").unwrap_err(),
            "invalid type: integer `5`, expected a string at line 1 column 12"
        );
        let json = serde_json::to_string(&gate(r#""e2e""#).unwrap()).unwrap();
        assert_eq!(json, r#"{"metric":"e2e","noise":"5%"}"#);
    }
}
