//! The versioned results format: plain data written by `run`, read by
//! `diff`, `bless`, `report` and `merge`. Its JSON Schema is committed as
//! `schemas/results.schema.json`. Old files stay readable: fields added in
//! later versions have defaults, and `version` says what a file holds.
//!
//! # Reading a results file
//!
//! Depend on this crate to read what `infer-bench run` wrote (the
//! `results.json` of a run directory, or the directory itself) from your
//! own tools: [`Results::read`] checks the format, the version and every
//! histogram, and refuses a damaged or oversized file with a typed
//! [`Error`] naming it. Each point carries its merged statistics
//! ([`Stats`]): latencies in milliseconds by metric name, throughputs,
//! request counts, and whether it is valid.
//!
//! ```
//! use infer_bench_results::Results;
//! # fn main() -> Result<(), infer_bench_results::Error> {
//! # let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results-v5.json");
//! // `path`: results/<spec>-<time>/results.json, or that directory.
//! let (results, file): (Results, _) = Results::read(&path)?;
//! println!("{}: {} points in {}", results.spec.name, results.points.len(), file.display());
//! for point in &results.points {
//!     let stats = &point.merged;
//!     let ttft = &stats.latency_ms["ttft"];
//!     println!(
//!         "{} {:.2} req/s, TTFT p50 {:.1} ms p99 {:.1} ms, {} of {} ok, valid: {}",
//!         point.id, stats.request_throughput, ttft.p50, ttft.p99,
//!         stats.requests.succeeded, stats.requests.sent, point.valid,
//!     );
//! }
//! # assert_eq!(results.points.len(), 1);
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::hist::Summary;
use crate::metric::Stat;
use crate::metric::{Kind, Metric};

pub mod accuracy;
pub mod agreement;
pub mod baseline;
pub mod error;
pub mod exit;
pub mod files;
pub mod finite;
pub mod hist;
pub mod insight;
pub mod media;
pub mod metric;
pub mod outside;
pub mod quality;
pub mod reason;
pub mod redact;
pub mod requests;
pub mod search;
pub mod stages;
pub mod telemetry;

pub use error::{Error, FieldError, FileKind, FormatError, HistError, Result};

pub use insight::{ClientLoad, Finding, Hint, MemoryPhases, MixResult};
pub use outside::Outside;
pub use reason::{Reason, ReasonKind};

pub const FORMAT: &str = "infer-bench-results";
/// Version of this file format. 2: tallies carry the work counted inside
/// their measurement window (`TallyData::in_window`), shards the window's
/// end. 3: `searches`, the answers of capacity searches. Files of versions
/// 1 and 2 are read as they are (with no searches). 4: reasoning tokens
/// (`TokenStats::reasoning_total`, `Stats::reasoning_tokens_per_s`, the
/// `ttft_reasoning` and `ttft_answer` latencies), present only where a
/// server reasoned; files of versions 1 to 3 have none. 5: a point's
/// `invalid_reasons` and `warnings` are reasons (`reason::Reason`: a kind
/// of a closed set, the message, the fix); the strings of files of
/// versions 1 to 4 are read as reasons of kind `other`. A new kind of
/// reason is a new version. 6: a point's `quality` (the `[quality]`
/// phase: agreement with a reference's answers, task accuracy); files of
/// versions 1 to 5 have none.
pub const VERSION: u32 = 6;
/// Version of the metric definitions (METRICS.md) the numbers follow.
/// 2: throughput counts the tokens, requests and time in flight that fall
/// inside the measurement window (by each event's arrival), and a run that
/// ran for its duration has that duration as its window.
pub const METRICS_VERSION: u32 = 2;

/// A results file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "infer-bench results", rename = "Results")]
pub struct Results<C = serde_json::Value> {
    /// Always "infer-bench-results".
    pub format: String,
    pub version: u32,
    pub metrics_version: u32,
    pub tool: ToolInfo,
    pub spec: SpecInfo,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Every selected point finished.
    pub complete: bool,
    /// The run was interrupted (Ctrl-C); finished points are kept.
    #[serde(default)]
    pub interrupted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentInfo>,
    pub environment: Environment,
    pub points: Vec<PointResult<C>>,
    /// Selected points that did not finish (IDs).
    #[serde(default)]
    pub pending: Vec<String>,
    /// Capacity searches (`[load] search`), each with its answer and
    /// probes; their probes are points above. Absent before version 3.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub searches: Vec<search::SearchResult>,
    /// Written by `merge`: the shards this file combines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<MergedInput>,
}

/// One shard a merged results file combines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MergedInput {
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentInfo>,
    /// Points the shard holds.
    pub points: u64,
    pub started_at: String,
}

/// What one agent did for a merged point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentShare {
    pub k: u32,
    /// Measured requests it sent, and how many succeeded.
    pub sent: u64,
    pub succeeded: u64,
    /// The latest it began a run after the run's agreed start (ms).
    pub start_late_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_lag_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_lag_p99_ms: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolInfo {
    pub name: String,
    pub version: String,
}

impl ToolInfo {
    pub fn current() -> ToolInfo {
        ToolInfo {
            name: "infer-bench".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SpecInfo {
    pub name: String,
    pub path: String,
    pub sha256: String,
    pub seed: u64,
    /// The spec's text, so a results file explains itself.
    pub source: String,
}

/// Which share of each point's load this process sent (load sharding).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentInfo {
    pub k: u32,
    pub n: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
    /// How long after the agreed start this agent began its first run,
    /// by its own clock (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_offset_ms: Option<f64>,
    /// The length of each run's slot in the timetable, when given (s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_s: Option<f64>,
    /// This machine's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// What the kernel says of this machine's clock.
    #[serde(default)]
    pub clock: ClockStatus,
}

/// What this machine's kernel says of its clock: whether NTP (or PTP)
/// keeps it synchronized, and its estimated and maximum error. Two agents'
/// clocks differ by at most the sum of their maximum errors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClockStatus {
    /// The kernel's clock is marked synchronized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synchronized: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub est_error_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_error_ms: Option<f64>,
}

/// Facts about where a run happened. Identity keys must match for results
/// to be compared; the rest is recorded and shown.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Environment {
    /// GPU model and count, driver and CUDA majors, server family and
    /// major version, client machine class.
    #[serde(default)]
    pub identity: BTreeMap<String, String>,
    /// Everything else: exact versions, clocks, kernel, CPU.
    #[serde(default)]
    pub facts: BTreeMap<String, String>,
}

/// What happened to one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "PointResult")]
pub struct PointResult<C = serde_json::Value> {
    pub id: String,
    pub slug: String,
    pub hash: String,
    pub axes: BTreeMap<String, String>,
    /// The point's resolved configuration: target, model, precision,
    /// workload, load, goodput and seed as the spec compiled them (see
    /// docs/spec.md). Its shape is the spec language's, so this crate
    /// leaves it generic (`serde_json::Value` by default); infer-bench reads
    /// it as its compiled `PointConfig`.
    pub config: C,
    /// complete, or failed (the point could not be measured; see `failure`).
    pub status: PointStatus,
    /// "virtual" when the point ran on the simulator in virtual time (a
    /// discrete-event simulation with an ideal client: no client delay
    /// enters its numbers); absent for a point measured in real time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// VALID points can be baselines; INVALID ones say why.
    pub valid: bool,
    /// Why the point is INVALID (strings before version 5).
    #[serde(default)]
    pub invalid_reasons: Vec<Reason>,
    /// What the point warns of, valid or not (strings before version 5).
    #[serde(default)]
    pub warnings: Vec<Reason>,
    pub runs: Vec<RunResult>,
    /// All runs merged (histograms added, counters summed).
    pub merged: Stats,
    /// The merged histograms, encoded (see `hist::encode`).
    #[serde(default)]
    pub histograms: BTreeMap<String, String>,
    /// Ramp steps, each with its own statistics (all runs merged).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepResult>,
    #[serde(default)]
    pub slo: Vec<SloResult>,
    /// Whether every SLO held; absent without SLOs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_pass: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostResult>,
    /// GPU and server telemetry of the point (see `results::telemetry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<telemetry::PointTelemetry>,
    /// What was sent: the workload's fingerprint and where prompts came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadInfo>,
    /// Conversations: a few statistics per turn (all runs merged).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<TurnResult>,
    /// Merged from load-sharding agents: what each agent did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentShare>,
    /// A mixed workload: each part's statistics (all runs merged).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mix: Vec<MixResult>,
    /// GPU memory and KV-cache usage by phase of the request timeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryPhases>,
    /// The load generator's own load during the point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientLoad>,
    /// What the pre-flight checks found before the point.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preflight: Vec<Finding>,
    /// Patterns in the numbers that suggest a bottleneck (never verdicts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<Hint>,
    /// The server's own account of the requests (Triton's statistics):
    /// queue, compute and the rest of the latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<stages::ServerStages>,
    /// Quality beside speed: how the point's server answered the quality
    /// prompts (`[quality]`), the same for every point of that server.
    /// Absent before version 6 and without `[quality]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<quality::PointQuality>,
}

/// What a point sent, as the client built it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkloadInfo {
    /// SHA-256 over the bodies of the first `fingerprint_requests` requests
    /// of every run (for conversations: first turns, plus later turns' new
    /// messages). Equal for the same spec and seed on every machine.
    pub sha256: String,
    pub fingerprint_requests: u64,
    /// How prompt lengths were counted: "tokenizer" (exact, the model's
    /// tokenizer.json) or "approximate" (one token per word of the built-in
    /// list; datasets: one per four bytes).
    pub lengths: String,
    /// With a tokenizer that did not prove additive over the word list:
    /// every prompt was encoded and corrected as it was built.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub every_prompt_verified: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<DatasetUse>,
}

/// How much of a dataset a point used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DatasetUse {
    /// Entries read from the file.
    pub read: u64,
    /// Entries requests were drawn from.
    pub used: u64,
    /// Left out by min_input_tokens / max_input_tokens.
    pub filtered: u64,
    /// Left out for having no usable prompt.
    pub unusable: u64,
}

/// One turn of a conversation (all sessions and runs merged).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TurnResult {
    /// 1 for the first turn.
    pub turn: u32,
    pub requests: Counts,
    /// Prompt length with the history, as built and as the server counted it.
    pub requested_input_mean: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_input_mean: Option<f64>,
    /// ttft, tpot and e2e in milliseconds; a later turn's TTFT counts from
    /// its scheduled time (the previous reply's end plus the think time).
    #[serde(default)]
    pub latency_ms: BTreeMap<String, Summary>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PointStatus {
    Complete,
    Failed,
}

/// The server a point ran against.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerInfo {
    /// The launch command as run, secrets redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The server's own name for itself (its `Server` header or
    /// `owned_by`): outside text.
    pub name: Option<Outside>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// What its `/version` said: outside text.
    pub version: Option<Outside>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The model its `/v1/models` named: outside text.
    pub model: Option<Outside>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// The dialect requests were written in (`vllm`, `openai`, ...), and
    /// how it was chosen: `spec` (declared), `server` (its `owned_by`) or
    /// `default` (the server did not say: plain OpenAI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialect: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialect_from: Option<String>,
    /// The simulator: the number format of its KV cache (`bf16`, `fp8`,
    /// ...; the precision's `kv_dtype`, default bf16), its capacity in
    /// tokens, and how requests were admitted (`reserve-prompt` or
    /// `reserve-full`). These decide its answers as much as the GPU does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_dtype: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<String>,
    /// The simulator: the engine it modelled (`vllm-0.10`, `trtllm`, ...),
    /// how it formed steps (`chunked` or `prefill-first`) and its batch
    /// limits, defaults resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_seqs: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_batched_tokens: Option<u32>,
}

/// One run of a point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunResult {
    pub run: u32,
    pub started_at: String,
    pub stats: Stats,
    /// Fixed-length windows of the measurement, which stand in for runs
    /// when a point has only one.
    #[serde(default)]
    pub windows: Vec<WindowStats>,
    #[serde(default)]
    pub histograms: BTreeMap<String, String>,
    /// Load sharding (`run --agent K/N`): what this agent recorded, in a
    /// form that adds exactly to the other agents' (see `merge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<RunShard>,
    /// The server's prefix cache reset before this run (`[load]
    /// reset_cache`); absent where none was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_reset: Option<CacheReset>,
}

/// How a reset of the server's prefix cache before a run went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CacheReset {
    pub outcome: CacheResetOutcome,
    /// What was asked, e.g. `POST /reset_prefix_cache` (for llama.cpp, one
    /// `POST /slots/{id}?action=erase` per slot); absent when the dialect
    /// offers no reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// The HTTP status of the (first unsuccessful, else last) answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why it was not done, in words (the server's own answer, clipped:
    /// text from outside, encoded wherever it is written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<outside::Outside>,
    /// llama.cpp: the cached tokens its slots erased.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erased_tokens: Option<u64>,
}

/// The outcome of a prefix-cache reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CacheResetOutcome {
    /// The server answered 2xx.
    Done,
    /// The server does not offer a reset: its dialect has none, or it
    /// answered 404, 405 or 501 (vLLM without VLLM_SERVER_DEV_MODE=1,
    /// llama.cpp without --slot-save-path).
    NotOffered,
    /// The reset was asked for and did not happen (another status, or no
    /// answer): a warning of the point, the run goes on.
    Failed,
}

/// One agent's share of one run, kept so that `merge` can add the
/// agents' records exactly and recompute every statistic over their union.
/// Times are nanoseconds from the run's agreed start (`--start-at`), the
/// instant every agent's schedule counts from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunShard {
    /// The agreed start of this run (RFC 3339, milliseconds).
    pub agreed_start: String,
    /// How long after the agreed start this agent began the run, by its
    /// own clock (ms; 0 when it was ready and waited).
    pub start_late_ms: f64,
    /// Start of the measurement window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_start_ns: Option<i64>,
    /// End of the measurement window, when the run ran for its duration
    /// (otherwise the window ends at the last measured completion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_end_ns: Option<i64>,
    /// Length of the windows that stand in for runs (ns).
    pub window_len_ns: u64,
    /// The most requests this agent had in flight at once.
    pub concurrency_max: u64,
    pub tally: TallyData,
    /// Windows by index from the window start.
    #[serde(default)]
    pub windows: BTreeMap<u64, TallyData>,
    /// Ramp steps by index.
    #[serde(default)]
    pub steps: BTreeMap<u32, TallyData>,
    /// Conversation turns by index (0 is the first turn).
    #[serde(default)]
    pub turns: BTreeMap<u32, TallyData>,
    /// The parts of a mixed workload by index.
    #[serde(default)]
    pub parts: BTreeMap<u32, TallyData>,
    /// Time spent in prefill and decode per bucket (see `PhaseTimeline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<PhaseTimeline>,
    /// Where the agreed start lies on this agent's telemetry clock
    /// (seconds since the point began), to place `phases`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry_origin_s: Option<f64>,
}

/// How much of each bucket of a run's time requests spent in prefill
/// (sent, no output yet) and in decode (output streaming), summed over
/// requests in flight: the request timeline, warm-up included, that GPU
/// samples are attributed against.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PhaseTimeline {
    /// Bucket width, ns; bucket 0 starts at the run's start.
    pub bucket_ns: u64,
    /// Request-seconds of prefill per bucket.
    pub prefill_s: Vec<f64>,
    /// Request-seconds of decode per bucket.
    pub decode_s: Vec<f64>,
}

/// The sufficient statistics of a set of requests: histograms (encoded),
/// counters and sums, and the extreme instants, so two sets add exactly.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TallyData {
    /// Encoded histograms by name: the latencies (µs), `input_tokens`,
    /// `output_tokens`, `requested_input`, `requested_output`.
    #[serde(default)]
    pub histograms: BTreeMap<String, String>,
    pub counts: Counts,
    #[serde(default)]
    pub errors: BTreeMap<String, u64>,
    #[serde(default)]
    pub error_examples: BTreeMap<String, Outside>,
    /// Failed requests by HTTP status code (`"404"`, `"503"`): the codes
    /// behind the `status_*` classes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub http_status: BTreeMap<String, u64>,
    /// One example message per HTTP status code.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub http_status_examples: BTreeMap<String, Outside>,
    pub good: u64,
    pub good_output_total: u64,
    pub input_total: u64,
    pub output_total: u64,
    #[serde(default)]
    pub output_source: BTreeMap<String, u64>,
    pub requested_input_sum: u64,
    pub requested_output_sum: u64,
    pub reported_input_sum: u64,
    pub reported_input_n: u64,
    pub reported_input_exact: u64,
    /// Sum over requests of their time in flight (ns).
    pub in_flight_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_send_ns: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_send_ns: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_sched_ns: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sched_ns: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_done_ns: Option<i64>,
    /// Reasoning tokens of successful requests (0 where none reasoned).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_total: u64,
    /// Successful requests that reasoned, by where their reasoning count
    /// came from (usage, token_ids, events).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reasoning_source: BTreeMap<String, u64>,
    /// The work that fell inside the measurement window, which rates are
    /// computed from; absent in files of version 1 and for tallies that
    /// split requests by completion (windows, steps, turns, parts), whose
    /// rates come from their totals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_window: Option<InWindow>,
    /// The images and audio the requests carried; absent without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<media::MediaTotals>,
    /// Of successful embeddings and rerank requests: how many there were,
    /// their inputs, documents and document tokens (absent for other
    /// kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<UnitTotals>,
    /// Of successful requests: how many there were, and their request
    /// and response body bytes (absent where no body crossed a socket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<PayloadTotals>,
}

/// The bodies successful requests sent and received, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PayloadTotals {
    pub requests: u64,
    pub request_bytes: u64,
    pub response_bytes: u64,
}

impl PayloadTotals {
    /// Adds another's totals (saturating).
    pub fn merge(&mut self, o: &PayloadTotals) {
        self.requests = self.requests.saturating_add(o.requests);
        self.request_bytes = self.request_bytes.saturating_add(o.request_bytes);
        self.response_bytes = self.response_bytes.saturating_add(o.response_bytes);
    }

    /// The means per request and the rates at `requests_per_s` successful
    /// requests a second; `None` without a request that carried a body.
    pub fn stats(&self, requests_per_s: f64) -> Option<PayloadStats> {
        (self.requests > 0).then(|| {
            let n = self.requests as f64;
            let (sent, received) = (
                self.request_bytes as f64 / n,
                self.response_bytes as f64 / n,
            );
            PayloadStats {
                request_bytes_mean: sent,
                response_bytes_mean: received,
                request_bytes_per_s: requests_per_s * sent,
                response_bytes_per_s: requests_per_s * received,
            }
        })
    }
}

/// The payload each way: the bodies of successful requests, the client
/// writing the request's and reading the response's (HTTP's headers and
/// chunked framing not counted), per request and per second of the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PayloadStats {
    pub request_bytes_mean: f64,
    pub response_bytes_mean: f64,
    /// Successful requests per second times the mean request body.
    pub request_bytes_per_s: f64,
    pub response_bytes_per_s: f64,
}

/// What successful embeddings and rerank requests counted beside
/// themselves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UnitTotals {
    pub requests: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inputs: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub documents: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub document_tokens: u64,
}

/// What a set of requests did inside a measurement window, counted by
/// when it happened rather than by which request it belonged to: output
/// tokens by their event's arrival, a request's input tokens at its first
/// output, a request at its completion, time in flight clipped to the
/// window. Every request counts here, warm-up included, and only
/// successful requests' tokens and completions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InWindow {
    pub requests: u64,
    pub good: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub good_output_tokens: u64,
    /// Sum over requests of their time in flight inside the window (ns).
    pub in_flight_ns: u64,
    /// Of `output_tokens`, the reasoning tokens.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl InWindow {
    /// Adds another count (saturating: a count may come from a file).
    pub fn add(&mut self, o: &InWindow) {
        for (a, b) in [
            (&mut self.requests, o.requests),
            (&mut self.good, o.good),
            (&mut self.input_tokens, o.input_tokens),
            (&mut self.output_tokens, o.output_tokens),
            (&mut self.good_output_tokens, o.good_output_tokens),
            (&mut self.in_flight_ns, o.in_flight_ns),
            (&mut self.reasoning_tokens, o.reasoning_tokens),
        ] {
            *a = a.saturating_add(b);
        }
    }
}

/// One ramp step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepResult {
    pub step: u32,
    /// The load level: "c=8" or "rate=4/s".
    pub level: String,
    pub stats: Stats,
}

/// The failure class of a response with this HTTP status (not a
/// success), as `errors` names it: `status_429` (load shed), `status_4xx`
/// (refused), `status_5xx` (failed), else `status`.
pub fn status_class(code: u16) -> &'static str {
    match code {
        429 => "status_429",
        400..=499 => "status_4xx",
        500..=599 => "status_5xx",
        _ => "status",
    }
}

/// The statistics of a run, a step, a window or a merged point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Stats {
    /// Length of the measurement window, seconds.
    pub window_s: f64,
    pub requests: Counts,
    /// Failed requests by class.
    #[serde(default)]
    pub errors: BTreeMap<String, u64>,
    /// One example message per failure class.
    #[serde(default)]
    pub error_examples: BTreeMap<String, Outside>,
    /// Failed requests by HTTP status code (`"404"`, `"503"`): the codes
    /// behind the `status_*` classes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub http_status: BTreeMap<String, u64>,
    /// One example message per HTTP status code.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub http_status_examples: BTreeMap<String, Outside>,
    /// Latency distributions in milliseconds, by metric name.
    #[serde(default)]
    pub latency_ms: BTreeMap<String, Summary>,
    pub tokens: TokenStats,
    pub request_throughput: f64,
    pub input_tokens_per_s: f64,
    pub output_tokens_per_s: f64,
    /// Of the output rate, reasoning tokens and answer tokens per second
    /// (window-based, like `output_tokens_per_s`); only where a request
    /// reasoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_tokens_per_s: Option<f64>,
    pub total_tokens_per_s: f64,
    /// Good requests per second (successful and within every goodput bound).
    pub goodput: f64,
    /// Good requests as a fraction of all measured.
    pub goodput_ratio: f64,
    /// Failed requests as a fraction of all measured.
    pub error_rate: f64,
    /// Open loop: the rate the schedule asked for (requests/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_rate: Option<f64>,
    /// Open loop: the rate requests were actually sent at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_send_rate: Option<f64>,
    pub concurrency_mean: f64,
    pub concurrency_max: u64,
    /// The images and audio the requests carried; absent without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<media::MediaStats>,
    /// Embeddings: inputs embedded per second (successful requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs_per_s: Option<f64>,
    /// Rerank: documents scored per second, and their tokens per second
    /// (as built: a rerank server's usage counts query and documents
    /// together).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documents_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_tokens_per_s: Option<f64>,
    /// The request and response bodies of successful requests, in bytes:
    /// per request and per second; absent where no body crossed a socket
    /// (the simulator in virtual time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<PayloadStats>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Counts {
    /// Measured requests sent.
    pub sent: u64,
    pub succeeded: u64,
    pub failed: u64,
    /// Warm-up requests (sent, excluded).
    pub warmup: u64,
    /// Requests still in flight when the run was cut short.
    #[serde(default)]
    pub unfinished: u64,
    /// Requests re-sent once because the server closed a kept-alive
    /// connection just as they went out.
    #[serde(default)]
    pub resent: u64,
    /// Open loop: measured arrivals the client could not send (none goes
    /// out more than a second after its scheduled time, nor, without
    /// `max_concurrency`, while 10,000 are in flight); not in `sent`. A
    /// point with any is INVALID.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_sent: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TokenStats {
    pub input_total: u64,
    pub output_total: u64,
    /// Output tokens of good requests (those within every goodput bound).
    #[serde(default)]
    pub good_output_total: u64,
    /// Per-request input tokens (server-reported where available).
    pub input: Summary,
    pub output: Summary,
    /// Requests whose output count came from each source: usage, token_ids, events.
    #[serde(default)]
    pub output_source: BTreeMap<String, u64>,
    /// Of `output_total`, reasoning tokens and answer tokens; only where a
    /// request reasoned (`reasoning_content` or `reasoning` deltas, or
    /// usage's `completion_tokens_details.reasoning_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_total: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_total: Option<u64>,
    /// Requests that reasoned, by where their reasoning count came from:
    /// usage (the server's count), token_ids or events (counted here).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reasoning_source: BTreeMap<String, u64>,
    /// Mean prompt length asked for, and as the server reported it.
    pub requested_input_mean: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_input_mean: Option<f64>,
    pub requested_output_mean: f64,
    /// Prompt lengths as the client built them, every request sent (the
    /// realized distribution of the workload's `input_tokens`).
    #[serde(default)]
    pub requested_input: Summary,
    /// `max_tokens` of every request sent.
    #[serde(default)]
    pub requested_output: Summary,
    /// Share of requests whose server-reported prompt length equals the
    /// requested one (1.0 with the model's tokenizer on a completions API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_input_exact: Option<f64>,
}

/// One window of a run: a few statistics per metric.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WindowStats {
    pub start_s: f64,
    pub end_s: f64,
    pub stats: Stats,
}

/// One SLO expression judged on a point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SloResult {
    pub metric: String,
    /// The SLO gate, normalized: [statistic] comparison threshold, e.g.
    /// "p99 < 500ms", "mean <= 20ms", "< 1%", "> 20/s".
    #[schemars(pattern(r"^\s*([a-z0-9.]+\s*)?(<=|>=|<|>)\s*\S+\s*$"))]
    pub expr: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    pub pass: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Cost figures, units in the names (formulas in `cost` and docs/telemetry.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CostResult {
    /// GPUs the hourly price applies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_1m_output_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_1m_tokens_at_slo: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_joule: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub electricity_usd_per_1m_output_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub good_requests_per_gpu_usd: Option<f64>,
    /// Embeddings: GPU dollars per million inputs embedded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_1m_inputs: Option<f64>,
    /// Rerank: GPU dollars per million documents scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_1m_documents: Option<f64>,
    /// Embeddings and rerank: GPU dollars per thousand successful requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_1k_requests: Option<f64>,
}

impl Stats {
    /// The value of a metric (and statistic, for distributions), in the
    /// metric's unit: ms for latencies, per second for rates, a fraction
    /// for ratios.
    pub fn value(&self, metric: Metric, stat: Option<&Stat>) -> Option<f64> {
        match metric.kind() {
            Kind::Latency => self
                .latency_ms
                .get(metric.name())
                .and_then(|s| s.get(stat?)),
            Kind::Tokens => {
                let s = if metric == Metric::InputTokens {
                    &self.tokens.input
                } else {
                    &self.tokens.output
                };
                s.get(stat?)
            }
            _ => Some(match metric {
                Metric::RequestThroughput => self.request_throughput,
                Metric::InputTokensPerS => self.input_tokens_per_s,
                Metric::OutputTokensPerS => self.output_tokens_per_s,
                Metric::TotalTokensPerS => self.total_tokens_per_s,
                Metric::Goodput => self.goodput,
                Metric::GoodputRatio => self.goodput_ratio,
                Metric::ErrorRate => self.error_rate,
                Metric::ConcurrencyMean => self.concurrency_mean,
                Metric::AchievedSendRate => self.achieved_send_rate?,
                Metric::InputsPerS => self.inputs_per_s?,
                Metric::DocumentsPerS => self.documents_per_s?,
                Metric::DocumentTokensPerS => self.document_tokens_per_s?,
                _ => return None,
            }),
        }
    }
}

impl<C> PointResult<C> {
    /// Whether the point measured nothing: it failed, or not one of its
    /// requests succeeded. Either is an infrastructure failure (exit 3),
    /// whatever its SLOs say.
    pub fn measured_nothing(&self) -> bool {
        self.status == PointStatus::Failed || self.merged.requests.succeeded == 0
    }

    /// A metric's value for SLOs and reports: stored statistics, or any
    /// percentile recomputed from the merged histogram.
    pub fn value(&self, metric: Metric, stat: Option<&Stat>) -> Option<f64> {
        if metric.is_quality() {
            return self.quality.as_ref()?.value(metric);
        }
        if let Some(v) = self.merged.value(metric, stat) {
            return Some(v);
        }
        let stat = stat?;
        let h = crate::hist::decode(self.histograms.get(metric.name())?).ok()?;
        let scale = if metric.kind() == Kind::Latency {
            1000.0
        } else {
            1.0
        };
        crate::hist::stat_of(&h, stat, scale)
    }
}

pub use files::write_atomic;

impl<C: Serialize + serde::de::DeserializeOwned> Results<C> {
    /// Pretty JSON with a final newline. A non-finite float (which JSON
    /// cannot hold) is left out, never written as `null` (see `finite`).
    pub fn to_json(&self) -> String {
        finite::to_json_pretty(self).expect("results serialize")
    }

    pub fn write(&self, path: &Path) -> crate::error::Result<()> {
        write_atomic(path, self.to_json().as_bytes())
    }

    /// Reads a results file, or `results.json` in a run directory: data
    /// from outside (a pull request's artifacts), so nothing in it is
    /// trusted. A file larger than `MAX_RESULTS_BYTES` is refused before
    /// it is read; a first pass parses it keeping nothing but its
    /// `format`, `version` and how many points it holds (at most
    /// `MAX_RESULTS_POINTS`); the second deserializes its bytes straight
    /// into the typed results (no JSON tree, so memory follows what the
    /// file holds: its bytes and what they hold); then every histogram is
    /// checked within its bounds (`hist::check`). Each refusal names the
    /// file and exits 2.
    pub fn read(path: &Path) -> crate::error::Result<(Results<C>, PathBuf)> {
        use std::io::Read as _;
        let file = if path.is_dir() {
            path.join("results.json")
        } else {
            path.to_path_buf()
        };
        let read_error = |source| crate::error::Error::Read {
            path: file.clone(),
            source,
        };
        let format_error = |problem| crate::error::Error::Format {
            path: file.clone(),
            problem,
        };
        let handle = std::fs::File::open(&file).map_err(read_error)?;
        let bytes = handle.metadata().map_err(read_error)?.len();
        if bytes > MAX_RESULTS_BYTES {
            return Err(format_error(FormatError::TooLarge {
                kind: FileKind::Results,
                bytes,
                limit: MAX_RESULTS_BYTES,
            }));
        }
        // Never more than the limit, should the file grow while it is read.
        let mut text = Vec::with_capacity(bytes as usize);
        handle
            .take(MAX_RESULTS_BYTES)
            .read_to_end(&mut text)
            .map_err(read_error)?;
        let json_error = |e| format_error(FormatError::NotJson(e));
        let head: Head = match serde_json::from_slice(&text) {
            Ok(head) => head,
            Err(e) if e.is_data() => Head::default(),
            Err(e) => return Err(json_error(e)),
        };
        if head.format.as_ref().and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(format_error(FormatError::NotOurs {
                kind: FileKind::Results,
                format: FORMAT,
            }));
        }
        let version = head.version.as_ref().and_then(|v| v.as_u64()).unwrap_or(0);
        if version > VERSION as u64 {
            return Err(format_error(FormatError::Newer {
                kind: FileKind::Results,
                version,
                reads: VERSION,
            }));
        }
        if head.points.0 > MAX_RESULTS_POINTS {
            return Err(format_error(FormatError::TooManyPoints {
                points: head.points.0,
                limit: MAX_RESULTS_POINTS,
            }));
        }
        let invalid = |source| {
            format_error(FormatError::Invalid {
                kind: FileKind::Results,
                source,
            })
        };
        let results: Results<C> = if version < 5 {
            // Reasons were strings before version 5: upgraded in the JSON
            // tree (files of older versions only).
            let mut value: serde_json::Value = serde_json::from_slice(&text).map_err(json_error)?;
            drop(text);
            reason::upgrade(&mut value);
            from_value_at(value).map_err(invalid)?
        } else {
            let mut de = serde_json::Deserializer::from_slice(&text);
            let results = serde_path_to_error::deserialize(&mut de).map_err(|e| {
                invalid(FieldError {
                    path: e.path().to_string(),
                    source: e.into_inner(),
                })
            })?;
            de.end().map_err(json_error)?;
            results
        };
        results.check_histograms().map_err(format_error)?;
        Ok((results, file))
    }

    /// Checks every histogram the file holds (`hist::check`): the first
    /// bad one is an error that names where it is
    /// (`points[2].runs[0].histograms.ttft`).
    fn check_histograms(&self) -> std::result::Result<(), FormatError> {
        fn each(
            at: &dyn Fn() -> String,
            histograms: &BTreeMap<String, String>,
        ) -> std::result::Result<(), FormatError> {
            for (name, text) in histograms {
                crate::hist::check(text).map_err(|source| FormatError::Histogram {
                    at: format!("{}.histograms.{name}", at()),
                    source,
                })?;
            }
            Ok(())
        }
        fn tallies<K: std::fmt::Display>(
            at: &dyn Fn() -> String,
            field: &str,
            map: &BTreeMap<K, TallyData>,
        ) -> std::result::Result<(), FormatError> {
            for (k, t) in map {
                each(&|| format!("{}.{field}.{k}", at()), &t.histograms)?;
            }
            Ok(())
        }
        for (i, p) in self.points.iter().enumerate() {
            let point = || format!("points[{i}]");
            each(&point, &p.histograms)?;
            for (j, r) in p.runs.iter().enumerate() {
                let run = || format!("points[{i}].runs[{j}]");
                each(&run, &r.histograms)?;
                if let Some(shard) = &r.shard {
                    let shard_at = || format!("{}.shard", run());
                    each(&|| format!("{}.tally", shard_at()), &shard.tally.histograms)?;
                    tallies(&shard_at, "windows", &shard.windows)?;
                    tallies(&shard_at, "steps", &shard.steps)?;
                    tallies(&shard_at, "turns", &shard.turns)?;
                    tallies(&shard_at, "parts", &shard.parts)?;
                }
            }
        }
        Ok(())
    }
}

/// The most bytes a results file may have: 2 GiB, checked before it is
/// read. It fits `MAX_RESULTS_POINTS` points of 21 KB each (a point of one
/// run as `run` writes it is 20 to 40 KB), and reading a file this size
/// needs about twice its size in memory (see docs/reports.md).
pub const MAX_RESULTS_BYTES: u64 = 2 << 30;
/// The most points a results file may hold: as many as a spec's plan may
/// have (`infer_bench_spec::limits::MAX_POINTS`).
pub const MAX_RESULTS_POINTS: u64 = 100_000;

/// What `Results::read` looks at before it deserializes a file: its
/// format, version and how many points it holds, parsed keeping nothing
/// else.
#[derive(Default, Deserialize)]
struct Head {
    #[serde(default)]
    format: Option<serde_json::Value>,
    #[serde(default)]
    version: Option<serde_json::Value>,
    #[serde(default)]
    points: Count,
}

/// How many entries an array has, counted without keeping them (anything
/// else counts 0).
#[derive(Default)]
struct Count(u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Count, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
        struct Counter;
        impl<'de> Visitor<'de> for Counter {
            type Value = Count;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("anything")
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<Count, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Count, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Count(0))
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_i64<E>(self, _: i64) -> std::result::Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_u64<E>(self, _: u64) -> std::result::Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_f64<E>(self, _: f64) -> std::result::Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_str<E>(self, _: &str) -> std::result::Result<Count, E> {
                Ok(Count(0))
            }
            fn visit_unit<E>(self) -> std::result::Result<Count, E> {
                Ok(Count(0))
            }
        }
        d.deserialize_any(Counter)
    }
}

/// Deserializes a file's JSON; the error names the field it concerns
/// (`points[2].merged.window_s: invalid type: null, expected f64`), so a
/// damaged or hand-edited file says where it is damaged.
pub(crate) fn from_value_at<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
) -> std::result::Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| FieldError {
        path: e.path().to_string(),
        source: e.into_inner(),
    })
}

/// The results schema with `C` as the points' configuration, pretty, with
/// a final newline.
pub fn schema_text<C: JsonSchema>() -> String {
    schema_text_of::<Results<C>>("results")
}

/// The draft-07 JSON Schema of a file format, with its `$id`
/// (`https://infer-bench.dev/schemas/<name>.schema.json`): pretty JSON with
/// a final newline, as committed under `schemas/`.
pub fn schema_text_of<T: JsonSchema>(name: &str) -> String {
    let schema = schemars::generate::SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut value = serde_json::to_value(schema).expect("serializes");
    if let Some(obj) = value.as_object_mut() {
        obj.insert(
            "$id".into(),
            format!("https://infer-bench.dev/schemas/{name}.schema.json").into(),
        );
    }
    let mut s = serde_json::to_string_pretty(&value).expect("serializes");
    s.push('\n');
    s
}

/// The JSON value with every object's keys in sorted order, whatever map
/// type `serde_json` was built with: the canonical layout of baselines and
/// of the configuration texts the judge diffs.
pub fn sorted_keys(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sorted_keys(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted_keys).collect()),
        other => other,
    }
}

/// The current UTC time, RFC 3339 to the second.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
