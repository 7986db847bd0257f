//! The caps the compiler puts on a spec's values, in one place (and in the
//! "Limits" section of docs/spec.md). Each bounds what one point may cost
//! the machine that runs it: memory (token lengths, turns, prefixes),
//! time (runs, ramps, durations) or the plan itself (matrix size). A spec
//! beyond a cap is rejected by `validate`, with the key and the cap, so
//! that `run` never meets a value it cannot honour.

use crate::Duration;

/// Longest token length anywhere: a distribution's largest value, a
/// shared prefix, a conversation's mean context at its last turn
/// (no model served today has a longer context).
pub const MAX_TOKENS: u32 = 1 << 20;
/// Most tokens of shared prefixes, all of them together (`tokens` x
/// `count`): they are generated once and kept for the whole point.
pub const MAX_PREFIX_TOKENS: u64 = 1 << 24;
/// Most requests a trace replays (inside its window): each is kept in
/// memory for the whole point.
pub const MAX_TRACE_REQUESTS: usize = 1_000_000;
/// Highest trace `speedup` (and lowest: its inverse).
pub const MAX_SPEEDUP: f64 = 1e6;
/// Most turns of a conversation.
pub const MAX_TURNS: u32 = 1_000;
/// Most runs of a point.
pub const MAX_RUNS: u32 = 1_000;
/// Most measured (or warm-up) requests of one run.
pub const MAX_REQUESTS: u64 = 1_000_000_000;
/// Highest concurrency, `max_concurrency` or ramp level.
pub const MAX_CONCURRENCY: u32 = 100_000;
/// Highest arrival rate, per second.
pub const MAX_RATE_PER_S: f64 = 1e6;
/// Lowest arrival rate, per second (one request in about 11.6 days).
pub const MIN_RATE_PER_S: f64 = 1e-6;
/// Longest duration anywhere in a spec: 30 days.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);
/// Most points of a plan (the product of the axes' lengths, before
/// `exclude`, plus the `include` entries).
pub const MAX_POINTS: u64 = 100_000;
/// Most `include` entries, and most `exclude` entries, of a matrix
/// (GitHub Actions' own limit on a matrix's jobs).
pub const MAX_MATRIX_ENTRIES: usize = 256;
/// Most levels of a ramp, counted before equal levels are merged.
pub const MAX_RAMP_STEPS: usize = 10_000;
/// Highest simulator `slowdown`.
pub const MAX_SLOWDOWN: f64 = 1_000.0;
/// Lowest simulator efficiency or memory fraction (the highest is 1).
pub const MIN_EFFICIENCY: f64 = 0.01;
/// Fewest tokens of a simulator's KV cache: one block.
pub const MIN_KV_CACHE_TOKENS: u64 = 16;
/// Most tokens of a simulator's KV cache.
pub const MAX_KV_CACHE_TOKENS: u64 = 1 << 40;
/// Most GPUs of a simulated target.
pub const MAX_GPUS: u32 = 1_024;
/// Most sequences in a simulator batch, and most tokens per streamed event.
pub const MAX_SIM_COUNT: u32 = 1 << 20;
/// Most tokens of a simulator step (`max_batched_tokens`).
pub const MAX_BATCHED_TOKENS: u32 = 1 << 24;
/// Largest architecture dimension (layers, hidden, heads, kv_heads, head_dim).
pub const MAX_ARCH_DIM: u32 = 1 << 20;
/// Most parameters of a model, in billions.
pub const MAX_PARAMS_B: f64 = 100_000.0;
/// Highest gamma `burstiness`.
pub const MAX_BURSTINESS: f64 = 1_000.0;
/// Highest regression noise band, in percent.
pub const MAX_NOISE_PERCENT: f64 = 1_000.0;
/// Longest name (spec, target, model, precision, workload): names become
/// parts of file names.
pub const MAX_NAME_CHARS: usize = 64;
