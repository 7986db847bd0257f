//! The simulator's performance model: how long one engine step takes for a
//! given GPU, GPU count, model shape, precision and batch, and how many
//! tokens of KV cache fit beside the weights. It is a roofline: a step costs
//! the larger of its compute time and its memory-traffic time, plus
//! tensor-parallel communication and a fixed per-step overhead, all scaled by
//! `slowdown`. Pure arithmetic on the catalogue's data-sheet figures
//! (`infer_bench_spec::catalog`): no I/O, no clock, no randomness. The scheduler that
//! decides what goes into a step lives in `super::engine`;
//! `docs/simulator.md` gives every formula, constant and source.

use infer_bench_spec::catalog::{self, Gpu};
use infer_bench_spec::model::{Architecture, DType, SimTarget};

/// Bytes in a GiB. Vendor memory capacities are binary in practice: an
/// "80 GB" H100 carries five 16 GiB HBM3 stacks, so the catalogue's
/// `memory_gb` is read as GiB.
pub const GIB_BYTES: f64 = 1_073_741_824.0;

/// Memory each GPU holds outside weights, activations and KV cache: CUDA
/// context, NCCL buffers, captured CUDA graphs, allocator slack. vLLM logs
/// this as "non-torch memory" plus graph memory, typically 0.5-1.5 GiB.
pub const RUNTIME_RESERVE_BYTES_PER_GPU: f64 = GIB_BYTES;

/// Peak activation memory per batched token per hidden unit, in bytes, for
/// the profiling forward pass vLLM runs at `max_num_batched_tokens` before
/// sizing the KV cache: about a dozen live BF16 values per hidden unit (the
/// gate/up projection of a Llama MLP alone is 7 × hidden wide). For Llama 3.1
/// 8B at 8192 tokens this is 0.75 GiB.
pub const ACTIVATION_BYTES_PER_TOKEN_PER_HIDDEN: f64 = 24.0;

/// Bytes per activation value exchanged by tensor-parallel all-reduces (BF16).
pub const ACTIVATION_VALUE_BYTES: f64 = 2.0;

/// All-reduces per transformer layer under Megatron-style tensor parallelism:
/// one after the attention output projection, one after the MLP.
pub const ALLREDUCES_PER_LAYER: f64 = 2.0;

/// Fixed latency of one all-reduce (launch and synchronisation), seconds.
/// vLLM's custom all-reduce on NVLink takes 5-10 µs for decode-sized messages.
pub const ALLREDUCE_LATENCY_S: f64 = 8e-6;

/// The smallest KV cache the model accepts: one 16-token block.
pub const MIN_KV_CACHE_TOKENS: u64 = 16;

/// One prefill chunk in a step: `chunk_tokens` prompt tokens whose KV is
/// computed now, after `start_context_tokens` already in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefillChunk {
    pub chunk_tokens: u32,
    pub start_context_tokens: u32,
}

/// What one engine step computes. Reused across steps by the engine (clear,
/// then push) so planning a step allocates nothing in steady state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepBatch {
    /// One entry per decoding sequence: the tokens already in its KV cache,
    /// which its one new token attends to (besides itself).
    pub decode_context_tokens: Vec<u32>,
    pub prefill_chunks: Vec<PrefillChunk>,
}

impl StepBatch {
    pub fn clear(&mut self) {
        self.decode_context_tokens.clear();
        self.prefill_chunks.clear();
    }

    /// Tokens pushed through the model in this step (decodes + prefill).
    pub fn tokens(&self) -> u64 {
        self.decode_context_tokens.len() as u64
            + self
                .prefill_chunks
                .iter()
                .map(|c| u64::from(c.chunk_tokens))
                .sum::<u64>()
    }
}

/// The parts of one step's time, seconds. `total_s` =
/// (max(`compute_s`, `memory_s`) + `communication_s` + `overhead_s`) × slowdown.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepCost {
    pub compute_s: f64,
    pub memory_s: f64,
    pub communication_s: f64,
    pub overhead_s: f64,
    pub total_s: f64,
}

/// The roofline of one (GPU × count, model, precision) serving setup.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfModel {
    gpu: Gpu,
    gpus: u32,
    weights: DType,
    kv: DType,
    total_params: f64,
    active_params: f64,
    layers: f64,
    hidden: f64,
    /// heads × head_dim: the width of the attention queries.
    q_dim: f64,
    weight_bytes: f64,
    kv_bytes_per_token: f64,
    kv_capacity_tokens: u64,
    /// Achieved GEMM rate over all GPUs (peak × gpus × compute_efficiency).
    gemm_flops_per_s: f64,
    /// Achieved attention rate over all GPUs (BF16 peak × gpus × efficiency).
    attention_flops_per_s: f64,
    /// Achieved memory bandwidth over all GPUs.
    memory_bytes_per_s: f64,
    /// Per-direction link bandwidth of one GPU (the catalogue's figure is
    /// bidirectional; a ring all-reduce sends and receives at once).
    link_bytes_per_s: f64,
    step_overhead_s: f64,
    slowdown: f64,
}

impl PerfModel {
    /// Derives the model and checks that the weights and at least one KV
    /// block fit in `memory_fraction` of the GPUs' memory. `kv_cache_tokens`
    /// in the target, when set, replaces the derived KV capacity (it is
    /// trusted: tests use it to force a small cache).
    pub fn new(
        target: &SimTarget,
        arch: &Architecture,
        weights: DType,
        kv: DType,
    ) -> Result<PerfModel, String> {
        let gpu = catalog::gpu(&target.gpu).ok_or_else(|| {
            let ids: Vec<&str> = catalog::GPUS.iter().map(|g| g.id).collect();
            format!(
                "unknown GPU \"{}\"; the simulator knows: {}",
                target.gpu,
                ids.join(", ")
            )
        })?;
        validate(target, arch)?;
        let model = PerfModel::build(target, arch, gpu, weights, kv);
        let name = arch.preset.as_deref().unwrap_or("the model");
        let usable_bytes = usable_bytes(gpu, target.gpus, target.memory_fraction);
        if model.weight_bytes > usable_bytes {
            let hint = match gpus_needed(target, arch, gpu, weights, kv) {
                Some(n) => format!("use more GPUs (gpus = {n} fits), "),
                None => "use more GPUs, ".to_string(),
            };
            return Err(format!(
                "{name} does not fit: its weights need {:.1} GiB ({} B parameters × {} bytes at {}), but {} × {} ({} GiB each) at memory_fraction {} allow {:.1} GiB; {hint}a smaller number format (fp8, int4) or a GPU with more memory",
                model.weight_bytes / GIB_BYTES,
                arch.params_b,
                weights.bytes(),
                dtype_name(weights),
                target.gpus,
                gpu.id,
                gpu.memory_gb,
                target.memory_fraction,
                usable_bytes / GIB_BYTES,
            ));
        }
        if target.kv_cache_tokens.is_none() && model.kv_capacity_tokens < MIN_KV_CACHE_TOKENS {
            return Err(format!(
                "{name} leaves no room for a KV cache: {:.1} GiB of weights and {:.1} GiB of runtime and activation reserve against {:.1} GiB usable on {} × {} at memory_fraction {}; use more GPUs, a smaller number format, a higher memory_fraction or a smaller max_batched_tokens",
                model.weight_bytes / GIB_BYTES,
                reserve_bytes(target, arch) / GIB_BYTES,
                usable_bytes / GIB_BYTES,
                target.gpus,
                gpu.id,
                target.memory_fraction,
            ));
        }
        if model.kv_capacity_tokens < MIN_KV_CACHE_TOKENS {
            return Err(format!(
                "kv_cache_tokens = {} is below one KV block; expected at least {MIN_KV_CACHE_TOKENS}",
                model.kv_capacity_tokens
            ));
        }
        Ok(model)
    }

    /// The derivation, without the checks: a 70B model on one H100 gets a
    /// zero-token KV cache instead of an error. Inputs must be validated.
    fn build(
        target: &SimTarget,
        arch: &Architecture,
        gpu: &Gpu,
        weights: DType,
        kv: DType,
    ) -> PerfModel {
        let gpus = f64::from(target.gpus);
        let total_params = arch.params_b * 1e9;
        let weight_bytes = total_params * weights.bytes();
        // Tensor parallelism over more GPUs than KV heads replicates heads.
        let stored_kv_heads = f64::from(arch.kv_heads.max(target.gpus));
        let kv_bytes_per_token =
            2.0 * f64::from(arch.layers) * stored_kv_heads * f64::from(arch.head_dim) * kv.bytes();
        let kv_capacity_tokens = match target.kv_cache_tokens {
            Some(t) => t,
            None => {
                let free = usable_bytes(gpu, target.gpus, target.memory_fraction)
                    - weight_bytes
                    - reserve_bytes(target, arch);
                // `as` saturates: a negative budget is zero tokens.
                (free / kv_bytes_per_token).floor() as u64
            }
        };
        let gemm_tflops = match weights {
            DType::Fp8 => gpu.fp8_tflops.unwrap_or(gpu.bf16_tflops),
            DType::Int8 => gpu.int8_tops,
            DType::Fp32 | DType::Bf16 | DType::Fp16 | DType::Int4 => gpu.bf16_tflops,
        };
        PerfModel {
            gpu: *gpu,
            gpus: target.gpus,
            weights,
            kv,
            total_params,
            active_params: arch.active_params_b * 1e9,
            layers: f64::from(arch.layers),
            hidden: f64::from(arch.hidden),
            q_dim: f64::from(arch.heads) * f64::from(arch.head_dim),
            weight_bytes,
            kv_bytes_per_token,
            kv_capacity_tokens,
            gemm_flops_per_s: gemm_tflops * 1e12 * gpus * target.compute_efficiency,
            attention_flops_per_s: gpu.bf16_tflops * 1e12 * gpus * target.compute_efficiency,
            memory_bytes_per_s: gpu.bandwidth_gbs * 1e9 * gpus * target.bandwidth_efficiency,
            link_bytes_per_s: gpu.interconnect_gbs * 1e9 / 2.0,
            step_overhead_s: target.step_overhead.as_secs_f64(),
            slowdown: target.slowdown,
        }
    }

    /// Seconds for one engine step. A step with no tokens takes no time.
    pub fn step_time(&self, batch: &StepBatch) -> f64 {
        self.step_cost(batch).total_s
    }

    /// The parts of [`PerfModel::step_time`].
    pub fn step_cost(&self, batch: &StepBatch) -> StepCost {
        // Tokens through the model, (query, key) pairs attended, and KV
        // tokens read from the cache.
        let mut tokens = 0.0;
        let mut attention_pairs = 0.0;
        let mut kv_read_tokens = 0.0;
        for &context in &batch.decode_context_tokens {
            let c = f64::from(context);
            tokens += 1.0;
            attention_pairs += c + 1.0;
            kv_read_tokens += c;
        }
        for chunk in &batch.prefill_chunks {
            let n = f64::from(chunk.chunk_tokens);
            let s = f64::from(chunk.start_context_tokens);
            tokens += n;
            // Causal: token j of the chunk attends to s + j + 1 keys.
            attention_pairs += n * s + n * (n + 1.0) / 2.0;
            // FlashAttention reads the cached prefix once per chunk.
            kv_read_tokens += s;
        }
        if tokens == 0.0 {
            return StepCost {
                compute_s: 0.0,
                memory_s: 0.0,
                communication_s: 0.0,
                overhead_s: 0.0,
                total_s: 0.0,
            };
        }
        let gemm_flops = 2.0 * self.active_params * tokens;
        // QKᵀ and AV: 2 × q_dim multiply-adds each per (query, key) pair.
        let attention_flops = 4.0 * self.layers * self.q_dim * attention_pairs;
        let compute_s =
            gemm_flops / self.gemm_flops_per_s + attention_flops / self.attention_flops_per_s;
        let kv_bytes = (kv_read_tokens + tokens) * self.kv_bytes_per_token;
        let memory_s = (self.weight_bytes_read(tokens) + kv_bytes) / self.memory_bytes_per_s;
        let communication_s = self.communication_s(tokens);
        let overhead_s = self.step_overhead_s;
        let total_s = (compute_s.max(memory_s) + communication_s + overhead_s) * self.slowdown;
        StepCost {
            compute_s,
            memory_s,
            communication_s,
            overhead_s,
            total_s,
        }
    }

    /// Weight bytes read in a step of `tokens` tokens. Dense: all of them.
    /// Mixture-of-experts: each weight is taken to be used by a token with
    /// probability active/total, independently, so a step touches
    /// total × (1 − (1 − active/total)^tokens): the active weights at one
    /// token, nearly all of them once the batch is large.
    fn weight_bytes_read(&self, tokens: f64) -> f64 {
        let unused_fraction = 1.0 - self.active_params / self.total_params;
        self.weight_bytes * (1.0 - unused_fraction.powf(tokens))
    }

    /// Tensor-parallel all-reduces of one step: 2 per layer, each a ring
    /// all-reduce of tokens × hidden BF16 activations in which every GPU
    /// sends 2 × (gpus − 1)/gpus of the message, plus a fixed latency.
    fn communication_s(&self, tokens: f64) -> f64 {
        if self.gpus <= 1 {
            return 0.0;
        }
        let g = f64::from(self.gpus);
        let message_bytes = tokens * self.hidden * ACTIVATION_VALUE_BYTES;
        let sent_bytes = 2.0 * message_bytes * (g - 1.0) / g;
        let per_allreduce_s = sent_bytes / self.link_bytes_per_s + ALLREDUCE_LATENCY_S;
        ALLREDUCES_PER_LAYER * self.layers * per_allreduce_s
    }

    /// KV-cache capacity in tokens (derived, or the `kv_cache_tokens` override).
    pub fn kv_capacity_tokens(&self) -> u64 {
        self.kv_capacity_tokens
    }

    /// KV bytes per token over all GPUs: 2 (K and V) × layers × KV heads ×
    /// head_dim × bytes per KV value.
    pub fn kv_bytes_per_token(&self) -> f64 {
        self.kv_bytes_per_token
    }

    /// Bytes of all weights (total parameters × bytes per parameter).
    pub fn weight_bytes(&self) -> f64 {
        self.weight_bytes
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    pub fn gpus(&self) -> u32 {
        self.gpus
    }

    pub fn weights_dtype(&self) -> DType {
        self.weights
    }

    pub fn kv_dtype(&self) -> DType {
        self.kv
    }
}

fn usable_bytes(gpu: &Gpu, gpus: u32, memory_fraction: f64) -> f64 {
    f64::from(gpus) * gpu.memory_gb * GIB_BYTES * memory_fraction
}

/// Memory kept from the KV cache besides the weights: a fixed runtime
/// reserve per GPU plus the activations of a `max_batched_tokens` forward pass.
fn reserve_bytes(target: &SimTarget, arch: &Architecture) -> f64 {
    f64::from(target.gpus) * RUNTIME_RESERVE_BYTES_PER_GPU
        + f64::from(target.max_batched_tokens)
            * f64::from(arch.hidden)
            * ACTIVATION_BYTES_PER_TOKEN_PER_HIDDEN
}

/// The fewest GPUs (up to 64) on which the weights and one KV block fit.
fn gpus_needed(
    target: &SimTarget,
    arch: &Architecture,
    gpu: &Gpu,
    weights: DType,
    kv: DType,
) -> Option<u32> {
    (target.gpus.saturating_add(1)..=64).find(|&gpus| {
        let t = SimTarget {
            gpus,
            kv_cache_tokens: None,
            ..target.clone()
        };
        PerfModel::build(&t, arch, gpu, weights, kv).kv_capacity_tokens >= MIN_KV_CACHE_TOKENS
    })
}

fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::Fp32 => "fp32",
        DType::Bf16 => "bf16",
        DType::Fp16 => "fp16",
        DType::Fp8 => "fp8",
        DType::Int8 => "int8",
        DType::Int4 => "int4",
    }
}

/// Rejects settings the formulas cannot use (the spec compiler checks most
/// of them too, but a `SimTarget` can also be built or deserialized directly).
fn validate(target: &SimTarget, arch: &Architecture) -> Result<(), String> {
    if target.gpus == 0 {
        return Err("expected at least 1 GPU, found gpus = 0".into());
    }
    for (name, v) in [
        ("memory_fraction", target.memory_fraction),
        ("compute_efficiency", target.compute_efficiency),
        ("bandwidth_efficiency", target.bandwidth_efficiency),
    ] {
        if !(v > 0.0 && v <= 1.0) {
            return Err(format!("expected {name} in (0, 1], found {v}"));
        }
    }
    if !(target.slowdown > 0.0 && target.slowdown.is_finite()) {
        return Err(format!("expected slowdown > 0, found {}", target.slowdown));
    }
    if !(arch.params_b > 0.0 && arch.params_b.is_finite()) {
        return Err(format!("expected params_b > 0, found {}", arch.params_b));
    }
    if !(arch.active_params_b > 0.0 && arch.active_params_b <= arch.params_b) {
        return Err(format!(
            "expected active_params_b in (0, params_b = {}], found {}",
            arch.params_b, arch.active_params_b
        ));
    }
    for (name, v) in [
        ("layers", arch.layers),
        ("hidden", arch.hidden),
        ("heads", arch.heads),
        ("kv_heads", arch.kv_heads),
        ("head_dim", arch.head_dim),
    ] {
        if v == 0 {
            return Err(format!("expected architecture {name} > 0, found 0"));
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use infer_bench_spec::Duration;

    /// The simulator's defaults (see `RawSimTuning`) on `gpus` × `gpu`.
    pub(crate) fn target(gpu: &str, gpus: u32) -> SimTarget {
        SimTarget {
            gpu: gpu.into(),
            gpus,
            max_num_seqs: 256,
            max_batched_tokens: 8192,
            memory_fraction: 0.9,
            compute_efficiency: 0.6,
            bandwidth_efficiency: 0.75,
            step_overhead: Duration::from_millis(1),
            slowdown: 1.0,
            noise: 0.0,
            kv_cache_tokens: None,
            tokens_per_event: 1,
            clock: Default::default(),
            admission: Default::default(),
        }
    }

    pub(crate) fn arch(id: &str) -> Architecture {
        let a = catalog::model(id).expect("preset exists");
        Architecture {
            preset: Some(a.id.into()),
            params_b: a.params_b,
            active_params_b: a.active_params_b,
            layers: a.layers,
            hidden: a.hidden,
            heads: a.heads,
            kv_heads: a.kv_heads,
            head_dim: a.head_dim,
        }
    }

    fn model(gpu: &str, gpus: u32, id: &str, w: DType) -> PerfModel {
        PerfModel::new(&target(gpu, gpus), &arch(id), w, DType::Bf16).unwrap()
    }

    fn decode(batch: usize, context: u32) -> StepBatch {
        StepBatch {
            decode_context_tokens: vec![context; batch],
            prefill_chunks: vec![],
        }
    }

    fn prefill(tokens: u32) -> StepBatch {
        StepBatch {
            decode_context_tokens: vec![],
            prefill_chunks: vec![PrefillChunk {
                chunk_tokens: tokens,
                start_context_tokens: 0,
            }],
        }
    }

    #[test]
    fn decode_step_time_grows_with_batch_size_and_context() {
        let m = model("h100-sxm", 1, "llama-3.1-8b", DType::Bf16);
        let mut last = 0.0;
        for batch in [1, 8, 32, 128, 256, 512] {
            let t = m.step_time(&decode(batch, 1024));
            assert!(t > last, "batch {batch}: {t} <= {last}");
            last = t;
        }
        let mut last = 0.0;
        for context in [0, 512, 2048, 8192, 32768] {
            let t = m.step_time(&decode(64, context));
            assert!(t > last, "context {context}: {t} <= {last}");
            last = t;
        }
        // Batching is nearly free while memory-bound: 8 sequences cost far
        // less than 8 × one sequence.
        let one = m.step_time(&decode(1, 1024));
        assert!(m.step_time(&decode(8, 1024)) < 1.2 * one);
    }

    #[test]
    fn decode_is_memory_bound_and_long_prefill_compute_bound() {
        let m = model("h100-sxm", 1, "llama-3.1-8b", DType::Bf16);
        let d = m.step_cost(&decode(32, 1024));
        assert!(d.memory_s > 3.0 * d.compute_s, "{d:?}");
        let p = m.step_cost(&prefill(4096));
        assert!(p.compute_s > 3.0 * p.memory_s, "{p:?}");
        // 2 × 8.03e9 × 4096 FLOPs plus causal attention at 60% of 989.5 TFLOP/s.
        let gemm_s = 2.0 * 8.03e9 * 4096.0 / (989.5e12 * 0.6);
        assert!(p.compute_s > gemm_s && p.compute_s < 1.1 * gemm_s, "{p:?}");
        assert_eq!(m.step_time(&StepBatch::default()), 0.0);
    }

    #[test]
    fn kv_cache_capacity_follows_the_memory_budget() {
        let m = model("h100-sxm", 1, "llama-3.1-8b", DType::Bf16);
        // 2 × 32 layers × 8 KV heads × 128 × 2 bytes.
        assert_eq!(m.kv_bytes_per_token(), 131_072.0);
        let free = 80.0 * GIB_BYTES * 0.9
            - 8.03e9 * 2.0
            - GIB_BYTES
            - 8192.0 * 4096.0 * ACTIVATION_BYTES_PER_TOKEN_PER_HIDDEN;
        assert_eq!(m.kv_capacity_tokens(), (free / 131_072.0) as u64);
        // About 453k tokens: the order vLLM reports for this setup.
        assert!((400_000..500_000).contains(&m.kv_capacity_tokens()));
        // An fp8 KV cache holds twice as many tokens.
        let fp8 = PerfModel::new(
            &target("h100-sxm", 1),
            &arch("llama-3.1-8b"),
            DType::Bf16,
            DType::Fp8,
        )
        .unwrap();
        let ratio = fp8.kv_capacity_tokens() as f64 / m.kv_capacity_tokens() as f64;
        assert!((ratio - 2.0).abs() < 1e-4, "{ratio}");
        // The override wins.
        let mut t = target("h100-sxm", 1);
        t.kv_cache_tokens = Some(4096);
        let m = PerfModel::new(&t, &arch("llama-3.1-8b"), DType::Bf16, DType::Bf16).unwrap();
        assert_eq!(m.kv_capacity_tokens(), 4096);
    }

    #[test]
    fn weights_that_do_not_fit_give_a_clear_error() {
        let err = PerfModel::new(
            &target("h100-sxm", 1),
            &arch("llama-3.1-70b"),
            DType::Bf16,
            DType::Bf16,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "llama-3.1-70b does not fit: its weights need 131.5 GiB (70.6 B parameters × 2 bytes at bf16), \
             but 1 × h100-sxm (80 GiB each) at memory_fraction 0.9 allow 72.0 GiB; use more GPUs \
             (gpus = 2 fits), a smaller number format (fp8, int4) or a GPU with more memory"
        );
        // Weights that fit but leave nothing for the KV cache.
        let mut t = target("h100-sxm", 1);
        t.memory_fraction = 0.2;
        let err = PerfModel::new(&t, &arch("llama-3.1-8b"), DType::Bf16, DType::Bf16).unwrap_err();
        assert!(err.contains("leaves no room for a KV cache"), "{err}");
    }

    #[test]
    fn bad_settings_are_errors_not_panics() {
        let a = arch("llama-3.1-8b");
        let mut t = target("h100-sxm", 1);
        t.gpu = "h100".into();
        assert!(
            PerfModel::new(&t, &a, DType::Bf16, DType::Bf16)
                .unwrap_err()
                .starts_with("unknown GPU \"h100\"")
        );
        let cases: Vec<(SimTarget, Architecture)> = vec![
            (
                SimTarget {
                    gpus: 0,
                    ..target("h100-sxm", 1)
                },
                a.clone(),
            ),
            (
                SimTarget {
                    memory_fraction: f64::NAN,
                    ..target("h100-sxm", 1)
                },
                a.clone(),
            ),
            (
                SimTarget {
                    bandwidth_efficiency: 1.5,
                    ..target("h100-sxm", 1)
                },
                a.clone(),
            ),
            (
                SimTarget {
                    compute_efficiency: 0.0,
                    ..target("h100-sxm", 1)
                },
                a.clone(),
            ),
            (
                SimTarget {
                    slowdown: f64::INFINITY,
                    ..target("h100-sxm", 1)
                },
                a.clone(),
            ),
            (
                SimTarget {
                    kv_cache_tokens: Some(0),
                    ..target("h100-sxm", 1)
                },
                a.clone(),
            ),
            (
                target("h100-sxm", 1),
                Architecture {
                    layers: 0,
                    ..a.clone()
                },
            ),
            (
                target("h100-sxm", 1),
                Architecture {
                    kv_heads: 0,
                    ..a.clone()
                },
            ),
            (
                target("h100-sxm", 1),
                Architecture {
                    params_b: -1.0,
                    ..a.clone()
                },
            ),
            (
                target("h100-sxm", 1),
                Architecture {
                    active_params_b: 9.0,
                    ..a.clone()
                },
            ),
        ];
        for (t, a) in cases {
            assert!(
                PerfModel::new(&t, &a, DType::Bf16, DType::Bf16).is_err(),
                "{t:?} {a:?}"
            );
        }
        // Extreme but valid batches give finite times.
        let m = model("h100-sxm", 1, "llama-3.1-8b", DType::Bf16);
        let t = m.step_time(&StepBatch {
            decode_context_tokens: vec![u32::MAX; 4],
            prefill_chunks: vec![PrefillChunk {
                chunk_tokens: u32::MAX,
                start_context_tokens: u32::MAX,
            }],
        });
        assert!(t.is_finite() && t > 0.0);
    }

    #[test]
    fn number_formats_pick_the_matching_rates() {
        let bf16 = model("h100-sxm", 1, "llama-3.1-8b", DType::Bf16);
        let fp8 = model("h100-sxm", 1, "llama-3.1-8b", DType::Fp8);
        let int8 = model("h100-sxm", 1, "llama-3.1-8b", DType::Int8);
        let int4 = model("h100-sxm", 1, "llama-3.1-8b", DType::Int4);
        // Prefill is compute-bound: FP8 and INT8 (W8A8) run at twice the
        // BF16 tensor rate on H100; INT4 is weight-only, so BF16 compute.
        let p = prefill(8192);
        let (tb, t8, ti8, t4) = (
            bf16.step_cost(&p).compute_s,
            fp8.step_cost(&p).compute_s,
            int8.step_cost(&p).compute_s,
            int4.step_cost(&p).compute_s,
        );
        assert!(t8 < 0.6 * tb && ti8 < 0.6 * tb, "{tb} {t8} {ti8}");
        assert_eq!(t4, tb);
        // Decode is memory-bound: weight bytes halve at fp8 and again at int4.
        assert_eq!(int4.weight_bytes(), fp8.weight_bytes() / 2.0);
        let d = decode(1, 512);
        assert!(int4.step_time(&d) < fp8.step_time(&d));
        // A100 has no FP8 tensor cores: fp8 weights compute at the BF16 rate.
        let a100_bf16 = model("a100-80gb", 1, "llama-3.1-8b", DType::Bf16);
        let a100_fp8 = model("a100-80gb", 1, "llama-3.1-8b", DType::Fp8);
        assert_eq!(
            a100_bf16.step_cost(&p).compute_s,
            a100_fp8.step_cost(&p).compute_s
        );
    }

    #[test]
    fn mixture_of_experts_reads_active_weights_at_batch_one() {
        let m = model("h200", 1, "mixtral-8x7b", DType::Bf16);
        let active_bytes = 12.9e9 * 2.0;
        assert!((m.weight_bytes_read(1.0) - active_bytes).abs() < 1.0);
        assert!(m.weight_bytes_read(64.0) > 0.99 * m.weight_bytes());
        // Faster than a dense model of the same total size at batch 1, and
        // the same once the batch touches every expert.
        let dense_arch = Architecture {
            active_params_b: 46.7,
            ..arch("mixtral-8x7b")
        };
        let dense =
            PerfModel::new(&target("h200", 1), &dense_arch, DType::Bf16, DType::Bf16).unwrap();
        let (moe_1, dense_1) = (
            m.step_time(&decode(1, 512)),
            dense.step_time(&decode(1, 512)),
        );
        assert!(moe_1 < 0.5 * dense_1, "{moe_1} vs {dense_1}");
        let (moe_64, dense_64) = (
            m.step_time(&decode(64, 512)),
            dense.step_time(&decode(64, 512)),
        );
        assert!(moe_64 > 0.95 * dense_64, "{moe_64} vs {dense_64}");
    }

    #[test]
    fn tensor_parallel_fits_70b_and_decodes_faster_than_one_gpu_would() {
        let a = arch("llama-3.1-70b");
        assert!(PerfModel::new(&target("h100-sxm", 1), &a, DType::Bf16, DType::Bf16).is_err());
        let two = PerfModel::new(&target("h100-sxm", 2), &a, DType::Bf16, DType::Bf16).unwrap();
        assert!(
            two.kv_capacity_tokens() > 10_000,
            "{}",
            two.kv_capacity_tokens()
        );
        // One H100 with (hypothetically) enough memory: same formulas, no fit check.
        let h100 = catalog::gpu("h100-sxm").unwrap();
        let one = PerfModel::build(&target("h100-sxm", 1), &a, h100, DType::Bf16, DType::Bf16);
        for batch in [1, 16, 64] {
            let (t1, t2) = (
                one.step_time(&decode(batch, 1024)),
                two.step_time(&decode(batch, 1024)),
            );
            // Bandwidth doubles; the all-reduces (160 × ~8 µs) eat part of it.
            assert!(t2 < 0.65 * t1, "batch {batch}: {t2} vs {t1}");
            let c = two.step_cost(&decode(batch, 1024));
            assert!(c.communication_s > 160.0 * ALLREDUCE_LATENCY_S, "{c:?}");
        }
        assert_eq!(one.step_cost(&decode(8, 1024)).communication_s, 0.0);
    }

    /// Published measurement 1 (see docs/simulator.md): J. Musgrave, "vLLM
    /// throughput-latency sweep on NVIDIA A100" (johnmusgrave.com/p/
    /// vllm-throughput-latency-sweep-on): Llama-3.1-8B-Instruct, BF16, one
    /// A100 40GB, vLLM `bench serve`, 1024 input / 128 output tokens: "decode
    /// at one request per time runs at about 75 tokens/sec, roughly 77% of
    /// the GPU's memory-bandwidth ceiling", i.e. a TPOT of about 13.3 ms.
    /// Tolerance: within a factor of 1.25.
    #[test]
    fn batch_one_decode_matches_a_published_a100_measurement() {
        let m = model("a100-40gb", 1, "llama-3.1-8b", DType::Bf16);
        let tpot_s = m.step_time(&decode(1, 1024 + 64));
        let measured_s = 1.0 / 75.0;
        let ratio = tpot_s / measured_s;
        eprintln!("A100 batch-1 TPOT: model {tpot_s} s, measured {measured_s} s, ratio {ratio}");
        assert!(
            (1.0 / 1.25..1.25).contains(&ratio),
            "model {tpot_s} s vs {measured_s} s"
        );
        // The brief's expectation for one H100: 6-8 ms per token at batch 1.
        let h100 = model("h100-sxm", 1, "llama-3.1-8b", DType::Bf16);
        let t = h100.step_time(&decode(1, 1024));
        eprintln!("H100 batch-1 TPOT: model {t} s");
        assert!((0.006..0.008).contains(&t), "{t}");
    }

    /// Published measurement 2 (see docs/simulator.md): NVIDIA NIM LLM
    /// benchmarking guide, "Performance" page (docs.nvidia.com/nim/
    /// benchmarking/llm/1.0.0/performance): Llama-3.3-70b-instruct, NIM
    /// 1.8.0, 2 × H100 80G, fp8, TP2, 5000 input / 500 output tokens,
    /// concurrency 1: TTFT 406.77 ms, ITL 18.58 ms. Llama 3.3 70B has Llama
    /// 3.1 70B's shape. Tolerance: within a factor of 1.25 for both.
    #[test]
    fn tensor_parallel_fp8_matches_a_published_h100_measurement() {
        let m = model("h100-sxm", 2, "llama-3.1-70b", DType::Fp8);
        let ttft_s = m.step_time(&prefill(5000));
        let itl_s = m.step_time(&decode(1, 5250));
        for (what, model_s, measured_s) in [("TTFT", ttft_s, 0.40677), ("ITL", itl_s, 0.01858)] {
            let ratio = model_s / measured_s;
            eprintln!(
                "NIM 70B fp8 TP2 {what}: model {model_s} s, measured {measured_s} s, ratio {ratio}"
            );
            assert!(
                (1.0 / 1.25..1.25).contains(&ratio),
                "{what}: model {model_s} s vs measured {measured_s} s"
            );
        }
    }
}
