//! The simulator's performance model: how long one engine step takes for a
//! given GPU, GPU count, model shape, precision and batch, and how many
//! tokens of KV cache fit beside the weights. It is a roofline: a step costs
//! the larger of its compute time and its memory-traffic time, plus
//! tensor-parallel communication and a fixed per-step overhead, all scaled by
//! `slowdown`. Pure arithmetic on the catalogue's data-sheet figures
//! (`infer_bench_spec::catalog`): no I/O, no clock, no randomness. The scheduler that
//! decides what goes into a step lives in `super::engine`;
//! `docs/simulator.md` gives every formula, constant and source.

use super::profile::{self, EngineConfig};
use crate::error::Error;
use infer_bench_spec::catalog::Gpu;
use infer_bench_spec::model::{Architecture, DType};
use infer_bench_spec::raw::SimMemoryBasis;

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

/// Fixed latency of one all-reduce over NVLink (launch and
/// synchronisation), seconds, before each GPU past the first adds
/// [`ALLREDUCE_HOP_LATENCY_S`]: vLLM's and TensorRT-LLM's custom all-reduce
/// on NVLink takes 5-10 µs for decode-sized messages on 2-8 GPUs, NCCL's
/// ring more as it grows.
pub const ALLREDUCE_LATENCY_S: f64 = 6e-6;

/// Latency each GPU of an NVLink all-reduce past the first adds, seconds.
pub const ALLREDUCE_HOP_LATENCY_S: f64 = 1e-6;

/// The same two over PCIe, where there is no custom all-reduce and NCCL's
/// small-message all-reduce goes through host-mapped memory or the CPU's
/// root complex: 20-50 µs on 2-8 GPUs.
pub const PCIE_ALLREDUCE_LATENCY_S: f64 = 15e-6;
pub const PCIE_ALLREDUCE_HOP_LATENCY_S: f64 = 5e-6;

/// The activation reserve is sized for at most this many tokens in a step:
/// a prefill-first engine with a step budget of a whole context (vLLM V0's
/// `max(max_model_len, 2048)`) still runs its profiling pass in pieces.
pub const ACTIVATION_TOKENS_MAX: u32 = 16_384;

/// Fixed latency of one point-to-point send between pipeline stages.
pub const P2P_LATENCY_S: f64 = 10e-6;

/// Fixed GPU time of one layer of a prefill step, seconds, where the
/// engine runs such steps outside a CUDA graph: each of its kernels pays
/// its launch and its ramp-up and tail (docs/simulator.md, "A floor for
/// small prefills").
pub const PREFILL_LAYER_S: f64 = 80e-6;

/// The smallest KV cache the model accepts: one 16-token block.
pub const MIN_KV_CACHE_TOKENS: u64 = 16;

/// Tokens (in units of a 4096-wide model) at which a step's matrix
/// products reach half their peak efficiency: a small step leaves most of
/// the GPU's multiprocessors without a tile of work (docs/simulator.md,
/// "Efficiency"). It does not grow with the tensor-parallel degree: the
/// small-M kernels split the reduction dimension (split-K, stream-K) to
/// fill the multiprocessors of a narrower shard.
pub const HALF_FILL_TOKENS: f64 = 64.0;

/// How compute and memory time of one kind of kernel combine: the p-norm
/// of the two (p = infinity would be the plain roofline's max).
pub const ROOFLINE_P: f64 = 2.0;

/// One prefill chunk in a step: `chunk_tokens` prompt tokens whose KV is
/// computed now, after `start_context_tokens` already in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefillChunk {
    pub chunk_tokens: u32,
    pub start_context_tokens: u32,
    /// Image tokens of the sequence whose patches the vision encoder runs
    /// in this step (its first chunk's; 0 for text).
    pub encoder_tokens: u32,
}

/// What one engine step computes. Reused across steps by the engine (clear,
/// then push) so planning a step allocates nothing in steady state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepBatch {
    /// One entry per decoding sequence: the tokens already in its KV cache,
    /// which its one new token attends to (besides itself).
    pub decode_context_tokens: Vec<u32>,
    pub prefill_chunks: Vec<PrefillChunk>,
    /// A step of a multi-step run that reuses the previous step's schedule:
    /// no host overhead is paid for it.
    pub reuses_schedule: bool,
}

impl StepBatch {
    pub fn clear(&mut self) {
        self.decode_context_tokens.clear();
        self.prefill_chunks.clear();
        self.reuses_schedule = false;
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

    /// Sequences in the step, decoding or prefilling.
    pub fn sequences(&self) -> usize {
        self.decode_context_tokens.len() + self.prefill_chunks.len()
    }
}

/// The parts of one step's time, seconds. `compute_s` and `memory_s` are
/// the step's matrix-product and attention work at full rate and its bytes
/// at achieved bandwidth, before they are combined; `total_s` = (linear
/// layers + attention + `communication_s` + `overhead_s`) × slowdown, each
/// of the first two the p-norm of its compute and memory time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepCost {
    pub compute_s: f64,
    pub memory_s: f64,
    pub communication_s: f64,
    /// Bytes each GPU sent over its link for `communication_s`.
    pub link_bytes: f64,
    pub overhead_s: f64,
    /// Of `total_s`, the time kernels run on the GPUs: all but the host
    /// overhead.
    pub gpu_s: f64,
    pub total_s: f64,
}

/// A vision encoder as a step charges it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Encoder {
    /// FLOPs per image token: 2 × parameters × patches per token.
    flops_per_token: f64,
    /// Its weights, in BF16 whatever the language model's precision (as
    /// vLLM and SGLang leave the encoder unquantized).
    weight_bytes: f64,
}

/// Bytes per encoder parameter: BF16.
const ENCODER_PARAM_BYTES: f64 = 2.0;

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
    /// The weights held: the language model's and its vision encoder's.
    weight_bytes: f64,
    /// The language model's weights, which every step reads.
    llm_weight_bytes: f64,
    /// A vision-language model's image encoder.
    encoder: Option<Encoder>,
    /// Memory kept besides weights and KV cache, over all GPUs of a replica
    /// (runtime reserve and activations).
    reserve_bytes: f64,
    kv_bytes_per_token: f64,
    kv_capacity_tokens: u64,
    /// Achieved GEMM rate of large steps over all GPUs (peak × gpus × efficiency).
    gemm_flops_per_s: f64,
    /// Achieved attention rate over all GPUs (BF16 peak × gpus × efficiency).
    attention_flops_per_s: f64,
    /// Achieved memory bandwidth over all GPUs.
    memory_bytes_per_s: f64,
    /// Per-direction link bandwidth of one GPU (the catalogue's figure is
    /// bidirectional; a ring all-reduce sends and receives at once).
    link_bytes_per_s: f64,
    /// Pipeline stages a step's activations cross.
    pipeline: u32,
    /// Tokens of a step at which its GEMMs reach half their peak rate.
    half_fill_tokens: f64,
    p: f64,
    step_overhead_s: f64,
    step_overhead_per_seq_s: f64,
    /// Fixed GPU time per layer of a step with a prefill.
    prefill_layer_s: f64,
    slowdown: f64,
}

impl PerfModel {
    /// Derives the model and checks that the weights and at least one KV
    /// block fit in the memory `config` gives the server. `kv_cache_tokens`
    /// in the config, when set, replaces the derived KV capacity (it is
    /// trusted: tests use it to force a small cache).
    pub fn new(
        config: &EngineConfig,
        arch: &Architecture,
        weights: DType,
    ) -> Result<PerfModel, Error> {
        validate(config, arch)?;
        let gpu = &config.gpu;
        let model = PerfModel::build(config, arch, weights);
        let name = arch.preset.as_deref().unwrap_or("the model");
        let usable_bytes = usable_bytes(config);
        if model.weight_bytes > usable_bytes {
            return Err(Error::WeightsDoNotFit {
                model: name.to_string(),
                weights_gib: model.weight_bytes / GIB_BYTES,
                params_b: arch.params_b,
                bytes: weights.bytes(),
                dtype: dtype_name(weights),
                gpus: config.gpus,
                gpu: gpu.id,
                memory_gb: gpu.memory_gb,
                fraction: weight_fraction(config),
                usable_gib: usable_bytes / GIB_BYTES,
                fits_on: gpus_needed(config, arch, weights),
            });
        }
        if config.kv_cache_tokens.is_none() && model.kv_capacity_tokens < MIN_KV_CACHE_TOKENS {
            return Err(Error::NoKvRoom {
                model: name.to_string(),
                weights_gib: model.weight_bytes / GIB_BYTES,
                reserve_gib: reserve_bytes(config, arch) / GIB_BYTES,
                usable_gib: usable_bytes / GIB_BYTES,
                gpus: config.gpus,
                gpu: gpu.id,
                fraction: weight_fraction(config),
            });
        }
        if model.kv_capacity_tokens < MIN_KV_CACHE_TOKENS {
            return Err(Error::KvCacheTooSmall {
                tokens: model.kv_capacity_tokens,
                min: MIN_KV_CACHE_TOKENS,
            });
        }
        Ok(model)
    }

    /// [`PerfModel::build`] for tests that price setups which would not fit.
    #[cfg(test)]
    pub(crate) fn build_unchecked(
        config: &EngineConfig,
        arch: &Architecture,
        weights: DType,
    ) -> PerfModel {
        PerfModel::build(config, arch, weights)
    }

    /// The derivation, without the checks: a 70B model on one H100 gets a
    /// zero-token KV cache instead of an error. Inputs must be validated.
    fn build(config: &EngineConfig, arch: &Architecture, weights: DType) -> PerfModel {
        let gpu = &config.gpu;
        let kv = config.kv_dtype;
        let gpus = f64::from(config.gpus);
        let total_params = arch.params_b * 1e9;
        let llm_weight_bytes = total_params * weights.bytes();
        let encoder = arch.vision.map(|v| Encoder {
            flops_per_token: 2.0 * v.params_b * 1e9 * f64::from(v.merge.max(1)).powi(2),
            weight_bytes: v.params_b * 1e9 * ENCODER_PARAM_BYTES,
        });
        let weight_bytes = llm_weight_bytes + encoder.map_or(0.0, |e| e.weight_bytes);
        let kv_bytes_per_token = kv_values_per_token(arch, config.gpus) * kv.bytes();
        let kv_capacity_tokens = match config.kv_cache_tokens {
            Some(t) => t,
            None => {
                // Each of a pipeline's micro-batch engines has its share of
                // the cache; `as` saturates: a negative budget is zero tokens.
                (kv_budget_bytes(config, arch, weight_bytes)
                    / f64::from(config.pipeline)
                    / kv_bytes_per_token)
                    .floor() as u64
            }
        };
        let gemm_tflops = match weights {
            DType::Fp8 => gpu.fp8_tflops.unwrap_or(gpu.bf16_tflops),
            DType::Int8 => gpu.int8_tops,
            DType::Fp4 => gpu.fp4_tflops.unwrap_or(gpu.bf16_tflops),
            DType::Fp32 | DType::Bf16 | DType::Fp16 | DType::Int4 => gpu.bf16_tflops,
        };
        let e = config.compute_efficiency;
        // Attention runs BF16 kernels whatever the weights: the 16-bit
        // efficiency, scaled as a spec's own `compute_efficiency` scales
        // the default for its format.
        let attention_e = (e * profile::COMPUTE_EFFICIENCY_16BIT
            / profile::default_compute_efficiency(weights, gpu))
        .min(1.0);
        PerfModel {
            gpu: *gpu,
            gpus: config.gpus,
            weights,
            kv,
            total_params,
            active_params: arch.active_params_b * 1e9,
            layers: f64::from(arch.layers),
            hidden: f64::from(arch.hidden),
            q_dim: f64::from(arch.heads) * f64::from(arch.head_dim),
            weight_bytes,
            llm_weight_bytes,
            encoder,
            reserve_bytes: reserve_bytes(config, arch),
            kv_bytes_per_token,
            kv_capacity_tokens,
            gemm_flops_per_s: gemm_tflops * 1e12 * gpus * e,
            attention_flops_per_s: gpu.bf16_tflops * 1e12 * gpus * attention_e,
            memory_bytes_per_s: gpu.bandwidth_gbs * 1e9 * gpus * config.bandwidth_efficiency,
            link_bytes_per_s: gpu.interconnect_gbs * 1e9 / 2.0,
            pipeline: config.pipeline,
            half_fill_tokens: HALF_FILL_TOKENS * 4096.0 / f64::from(arch.hidden),
            p: ROOFLINE_P,
            step_overhead_s: config.step_overhead_s,
            step_overhead_per_seq_s: config.step_overhead_per_seq_s,
            prefill_layer_s: config.prefill_layer_s,
            slowdown: config.slowdown,
        }
    }

    /// Seconds for one engine step. A step with no tokens takes no time.
    pub fn step_time(&self, batch: &StepBatch) -> f64 {
        self.step_cost(batch).total_s
    }

    /// The fraction of their peak rate a step's matrix products reach:
    /// `tokens / (tokens + half_fill)`, where half_fill grows with the
    /// tensor-parallel degree and shrinks with the model's width (each GPU's
    /// share of a layer's output columns is what its multiprocessors split).
    pub fn fill(&self, tokens: f64) -> f64 {
        tokens / (tokens + self.half_fill_tokens)
    }

    /// The parts of [`PerfModel::step_time`].
    pub fn step_cost(&self, batch: &StepBatch) -> StepCost {
        // Tokens through the model, (query, key) pairs attended, and KV
        // tokens read from the cache.
        let mut tokens = 0.0;
        let mut attention_pairs = 0.0;
        let mut kv_read_tokens = 0.0;
        let mut encoder_tokens = 0.0;
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
            encoder_tokens += f64::from(chunk.encoder_tokens);
        }
        if tokens == 0.0 {
            return StepCost {
                compute_s: 0.0,
                memory_s: 0.0,
                communication_s: 0.0,
                link_bytes: 0.0,
                overhead_s: 0.0,
                gpu_s: 0.0,
                total_s: 0.0,
            };
        }
        // Linear layers: GEMMs over the weights.
        let gemm_s =
            2.0 * self.active_params * tokens / (self.gemm_flops_per_s * self.fill(tokens));
        let weights_s = self.weight_bytes_read(tokens) / self.memory_bytes_per_s;
        // Attention: QKᵀ and AV, 2 × q_dim multiply-adds each per (query,
        // key) pair, over the KV cache read and the new KV written.
        let attention_s =
            4.0 * self.layers * self.q_dim * attention_pairs / self.attention_flops_per_s;
        let kv_s = (kv_read_tokens + tokens) * self.kv_bytes_per_token / self.memory_bytes_per_s;
        let (communication_s, link_bytes) = self.communication(tokens);
        let overhead_s = if batch.reuses_schedule {
            0.0
        } else {
            self.step_overhead_s + self.step_overhead_per_seq_s * batch.sequences() as f64
        };
        // The vision encoder: its GEMMs over every patch of the images
        // that start here, at the BF16 rate, and its weights read once.
        let (encoder_s, encoder_bytes_s) = match self.encoder {
            Some(e) if encoder_tokens > 0.0 => (
                e.flops_per_token * encoder_tokens
                    / (self.attention_flops_per_s * self.fill(encoder_tokens)),
                e.weight_bytes / self.memory_bytes_per_s,
            ),
            _ => (0.0, 0.0),
        };
        // A step with a prefill runs outside a CUDA graph: each layer's
        // kernels pay their fixed time on top of their work.
        let fixed_s = if batch.prefill_chunks.is_empty() {
            0.0
        } else {
            self.layers * self.prefill_layer_s
        };
        let work_s = fixed_s
            + pnorm(gemm_s, weights_s, self.p)
            + pnorm(attention_s, kv_s, self.p)
            + pnorm(encoder_s, encoder_bytes_s, self.p);
        let total_s = (work_s + communication_s + overhead_s) * self.slowdown;
        StepCost {
            compute_s: gemm_s + attention_s + encoder_s,
            memory_s: weights_s + kv_s + encoder_bytes_s,
            communication_s,
            link_bytes,
            overhead_s,
            gpu_s: (work_s + communication_s) * self.slowdown,
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
        self.llm_weight_bytes * (1.0 - unused_fraction.powf(tokens))
    }

    /// Tensor-parallel all-reduces of one step: 2 per layer, each a ring
    /// all-reduce of tokens × hidden BF16 activations in which every GPU
    /// sends 2 × (gpus − 1)/gpus of the message, plus a fixed latency.
    /// Under pipeline parallelism, each stage hands the step's activations
    /// to the next: pipeline − 1 point-to-point sends.
    fn communication(&self, tokens: f64) -> (f64, f64) {
        let message_bytes = tokens * self.hidden * ACTIVATION_VALUE_BYTES;
        let stages = f64::from(self.pipeline.max(1)) - 1.0;
        let p2p_s = stages * (message_bytes / self.link_bytes_per_s + P2P_LATENCY_S);
        // A stage's GPUs each send their shard of the activations on.
        let p2p_bytes = stages * message_bytes / f64::from(self.gpus.max(1));
        if self.gpus <= 1 {
            return (p2p_s, p2p_bytes);
        }
        let g = f64::from(self.gpus);
        let sent_bytes = 2.0 * message_bytes * (g - 1.0) / g;
        let per_allreduce_s = sent_bytes / self.link_bytes_per_s + self.allreduce_latency_s();
        let allreduces = ALLREDUCES_PER_LAYER * self.layers;
        (
            allreduces * per_allreduce_s + p2p_s,
            allreduces * sent_bytes + p2p_bytes,
        )
    }

    /// The fixed latency of one all-reduce over this setup's GPUs: a base
    /// and a hop per GPU past the first, higher over PCIe than NVLink.
    pub fn allreduce_latency_s(&self) -> f64 {
        let hops = f64::from(self.gpus.max(1)) - 1.0;
        if link_is_pcie(&self.gpu) {
            PCIE_ALLREDUCE_LATENCY_S + PCIE_ALLREDUCE_HOP_LATENCY_S * hops
        } else {
            ALLREDUCE_LATENCY_S + ALLREDUCE_HOP_LATENCY_S * hops
        }
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

    /// Bytes kept besides weights and KV cache over all GPUs of a replica:
    /// the runtime reserve per GPU and a forward pass's activations.
    pub fn reserve_bytes(&self) -> f64 {
        self.reserve_bytes
    }

    /// Pipeline stages of a replica.
    pub fn pipeline(&self) -> u32 {
        self.pipeline
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

/// Whether a GPU's tensor-parallel link is PCIe (the catalogue's
/// `interconnect_gbs` of at most [`PCIE_LINK_MAX_GBS`]: a PCIe 4.0 or 5.0
/// x16 slot) rather than NVLink or Infinity Fabric.
pub fn link_is_pcie(gpu: &Gpu) -> bool {
    gpu.interconnect_gbs <= PCIE_LINK_MAX_GBS
}

/// The fastest link, GB/s bidirectional, read as PCIe: PCIe 5.0 x16.
pub const PCIE_LINK_MAX_GBS: f64 = 128.0;

/// KV-cache values per token over all GPUs. K and V per KV head per layer;
/// tensor parallelism over more GPUs than KV heads replicates heads. Under
/// multi-head latent attention the latent is shared by all heads, and
/// every tensor-parallel GPU holds all of it (vLLM's and SGLang's MLA).
fn kv_values_per_token(arch: &Architecture, gpus: u32) -> f64 {
    let layers = f64::from(arch.layers);
    match arch.kv_latent_dim {
        Some(latent) => layers * f64::from(latent) * f64::from(gpus),
        None => 2.0 * layers * f64::from(arch.kv_heads.max(gpus)) * f64::from(arch.head_dim),
    }
}

/// The p-norm of two times: the larger alone as p grows, their sum at p = 1.
fn pnorm(a: f64, b: f64, p: f64) -> f64 {
    if !p.is_finite() {
        return a.max(b);
    }
    let m = a.max(b);
    if m == 0.0 {
        return 0.0;
    }
    m * ((a / m).powf(p) + (b / m).powf(p)).powf(1.0 / p)
}

/// The fraction of memory weights may take: `memory_fraction` of all of it
/// ("total"), or all of it ("free": the fraction applies to the KV cache).
fn weight_fraction(config: &EngineConfig) -> f64 {
    match config.memory_fraction_of {
        SimMemoryBasis::Total => config.memory_fraction,
        SimMemoryBasis::Free => 1.0,
    }
}

/// Memory of one replica (all its pipeline stages) the server may fill.
fn usable_bytes(config: &EngineConfig) -> f64 {
    f64::from(config.gpus * config.pipeline)
        * config.gpu.memory_gb
        * GIB_BYTES
        * weight_fraction(config)
}

/// Bytes left for the KV cache: `memory_fraction` of all memory less the
/// weights and reserve (vLLM, SGLang), or `memory_fraction` of what the
/// weights and reserve leave free (TensorRT-LLM).
fn kv_budget_bytes(config: &EngineConfig, arch: &Architecture, weight_bytes: f64) -> f64 {
    let free = usable_bytes(config) - weight_bytes - reserve_bytes(config, arch);
    match config.memory_fraction_of {
        SimMemoryBasis::Total => free,
        SimMemoryBasis::Free => free * config.memory_fraction,
    }
}

/// Memory kept from the KV cache besides the weights: a fixed runtime
/// reserve per GPU plus the activations of a `max_batched_tokens` forward pass.
fn reserve_bytes(config: &EngineConfig, arch: &Architecture) -> f64 {
    f64::from(config.gpus * config.pipeline) * RUNTIME_RESERVE_BYTES_PER_GPU
        + f64::from(config.max_batched_tokens.min(ACTIVATION_TOKENS_MAX))
            * f64::from(arch.hidden)
            * ACTIVATION_BYTES_PER_TOKEN_PER_HIDDEN
}

/// The fewest GPUs (up to 64) on which the weights and one KV block fit.
fn gpus_needed(config: &EngineConfig, arch: &Architecture, weights: DType) -> Option<u32> {
    (config.gpus.saturating_add(1)..=64).find(|&gpus| {
        // One more GPU of tensor parallelism per stage.
        let c = EngineConfig {
            gpus,
            kv_cache_tokens: None,
            ..config.clone()
        };
        PerfModel::build(&c, arch, weights).kv_capacity_tokens >= MIN_KV_CACHE_TOKENS
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
        DType::Fp4 => "fp4",
    }
}

/// Rejects settings the formulas cannot use (the spec compiler checks most
/// of them too, but a config can also be built or deserialized directly).
fn validate(config: &EngineConfig, arch: &Architecture) -> Result<(), Error> {
    if config.gpus == 0 {
        return Err(Error::setting("gpus", ">= 1", 0));
    }
    for (name, v) in [
        ("memory_fraction", config.memory_fraction),
        ("compute_efficiency", config.compute_efficiency),
        ("bandwidth_efficiency", config.bandwidth_efficiency),
    ] {
        if !(v > 0.0 && v <= 1.0) {
            return Err(Error::setting(name, "in (0, 1]", v));
        }
    }
    if !(config.slowdown > 0.0 && config.slowdown.is_finite()) {
        return Err(Error::setting("slowdown", "> 0", config.slowdown));
    }
    for (name, v) in [
        ("step_overhead", config.step_overhead_s),
        ("step_overhead_per_seq", config.step_overhead_per_seq_s),
        ("request_overhead", config.request_overhead_s),
    ] {
        if !(v >= 0.0 && v.is_finite()) {
            return Err(Error::setting(name, ">= 0", v));
        }
    }
    if !(arch.params_b > 0.0 && arch.params_b.is_finite()) {
        return Err(Error::setting("params_b", "> 0", arch.params_b));
    }
    if !(arch.active_params_b > 0.0 && arch.active_params_b <= arch.params_b) {
        return Err(Error::setting(
            "active_params_b",
            format!("in (0, params_b = {}]", arch.params_b),
            arch.active_params_b,
        ));
    }
    for (name, v) in [
        ("architecture layers", arch.layers),
        ("architecture hidden", arch.hidden),
        ("architecture heads", arch.heads),
        ("architecture kv_heads", arch.kv_heads),
        ("architecture head_dim", arch.head_dim),
    ] {
        if v == 0 {
            return Err(Error::setting(name, "> 0", 0));
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::profile;
    use infer_bench_spec::catalog;
    use infer_bench_spec::model::SimTarget;

    /// A spec's simulator target on `gpus` × `gpu`, nothing set.
    pub(crate) fn sim_target(gpu: &str, gpus: u32) -> SimTarget {
        SimTarget {
            gpu: gpu.into(),
            gpus,
            profile: None,
            scheduler: None,
            max_num_seqs: None,
            max_batched_tokens: None,
            memory_fraction: None,
            memory_fraction_of: None,
            compute_efficiency: None,
            bandwidth_efficiency: None,
            step_overhead: None,
            step_overhead_per_seq: None,
            request_overhead: None,
            scheduler_steps: None,
            replicas: None,
            pipeline: None,
            slowdown: 1.0,
            noise: 0.0,
            kv_cache_tokens: None,
            tokens_per_event: 1,
            clock: Default::default(),
            admission: None,
        }
    }

    /// The default profile's settings on `gpus` × `gpu` for Llama 3.1 8B in
    /// BF16 with a BF16 KV cache.
    pub(crate) fn target(gpu: &str, gpus: u32) -> EngineConfig {
        profile::resolve(
            &sim_target(gpu, gpus),
            &arch("llama-3.1-8b"),
            DType::Bf16,
            Some(DType::Bf16),
        )
        .unwrap()
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
            context_tokens: None,
            kv_latent_dim: a.kv_latent_dim,
            vision: a.vision,
        }
    }

    fn model(gpu: &str, gpus: u32, id: &str, w: DType) -> PerfModel {
        PerfModel::new(&target(gpu, gpus), &arch(id), w).unwrap()
    }

    fn decode(batch: usize, context: u32) -> StepBatch {
        StepBatch {
            decode_context_tokens: vec![context; batch],
            prefill_chunks: vec![],
            reuses_schedule: false,
        }
    }

    fn prefill(tokens: u32) -> StepBatch {
        StepBatch {
            decode_context_tokens: vec![],
            prefill_chunks: vec![PrefillChunk {
                chunk_tokens: tokens,
                start_context_tokens: 0,
                encoder_tokens: 0,
            }],
            reuses_schedule: false,
        }
    }

    #[test]
    fn a_vision_encoder_costs_its_patches_once_at_the_bf16_rate() {
        // Qwen2.5-VL-7B: a 1024 x 1024 image is 37 x 37 = 1369 tokens of
        // 2 x 2 patches of the 675M-parameter encoder.
        let m = model("h100-sxm", 1, "qwen2.5-vl-7b", DType::Fp8);
        let text = prefill(2048);
        let mut image = prefill(2048);
        image.prefill_chunks[0].encoder_tokens = 1369;
        let (t, i) = (m.step_cost(&text), m.step_cost(&image));
        let flops = 2.0 * 0.675e9 * 4.0 * 1369.0;
        let rate = m.attention_flops_per_s * m.fill(1369.0);
        assert!(
            ((i.compute_s - t.compute_s) / (flops / rate) - 1.0).abs() < 1e-9,
            "{} vs {}",
            i.compute_s - t.compute_s,
            flops / rate
        );
        assert!((i.memory_s - t.memory_s - 0.675e9 * 2.0 / m.memory_bytes_per_s).abs() < 1e-12);
        // The encoder's weights are held (in BF16, whatever the language
        // model's precision) but a text step never reads them.
        let llm = model("h100-sxm", 1, "qwen2.5-7b", DType::Fp8);
        assert_eq!(m.weight_bytes(), llm.weight_bytes() + 0.675e9 * 2.0);
        assert_eq!(m.step_cost(&decode(8, 512)), llm.step_cost(&decode(8, 512)));
        // A text-only model charges nothing for image tokens.
        let mut no_encoder = prefill(2048);
        no_encoder.prefill_chunks[0].encoder_tokens = 1369;
        assert_eq!(llm.step_cost(&no_encoder), llm.step_cost(&prefill(2048)));
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
        // 2 × 8.03e9 × 4096 FLOPs at 70% of 989.5 TFLOP/s, as if 64 tokens
        // more (the step's unfilled tiles), plus causal attention.
        let gemm_s = 2.0 * 8.03e9 * (4096.0 + HALF_FILL_TOKENS) / (989.5e12 * 0.7);
        assert!(p.compute_s > gemm_s && p.compute_s < 1.1 * gemm_s, "{p:?}");
        // Compute and memory combine as a 2-norm: the larger, a little more.
        let w = pnorm(p.compute_s, p.memory_s, ROOFLINE_P);
        assert!(w > p.compute_s && w < 1.05 * p.compute_s, "{p:?}");
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
            &EngineConfig {
                kv_dtype: DType::Fp8,
                ..target("h100-sxm", 1)
            },
            &arch("llama-3.1-8b"),
            DType::Bf16,
        )
        .unwrap();
        let ratio = fp8.kv_capacity_tokens() as f64 / m.kv_capacity_tokens() as f64;
        assert!((ratio - 2.0).abs() < 1e-4, "{ratio}");
        // The override wins.
        let mut t = target("h100-sxm", 1);
        t.kv_cache_tokens = Some(4096);
        let m = PerfModel::new(&t, &arch("llama-3.1-8b"), DType::Bf16).unwrap();
        assert_eq!(m.kv_capacity_tokens(), 4096);
    }

    #[test]
    fn weights_that_do_not_fit_give_a_clear_error() {
        let err = PerfModel::new(&target("h100-sxm", 1), &arch("llama-3.1-70b"), DType::Bf16)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "llama-3.1-70b does not fit: its weights need 131.5 GiB (70.6 B parameters × 2 bytes at bf16), \
             but 1 × h100-sxm (80 GiB each) at memory_fraction 0.9 allow 72.0 GiB; use more GPUs \
             (gpus = 2 fits), a smaller number format (fp8, int4) or a GPU with more memory"
        );
        // Weights that fit but leave nothing for the KV cache.
        let mut t = target("h100-sxm", 1);
        t.memory_fraction = 0.2;
        let err = PerfModel::new(&t, &arch("llama-3.1-8b"), DType::Bf16).unwrap_err();
        assert!(matches!(err, Error::NoKvRoom { .. }), "{err}");
    }

    #[test]
    fn bad_settings_are_errors_not_panics() {
        let a = arch("llama-3.1-8b");
        let err = profile::resolve(&sim_target("h100", 1), &a, DType::Bf16, None).unwrap_err();
        assert!(
            matches!(&err, Error::UnknownGpu { gpu, .. } if gpu == "h100"),
            "{err}"
        );
        assert!(err.to_string().starts_with("unknown GPU \"h100\""), "{err}");
        let cases: Vec<(EngineConfig, Architecture)> = vec![
            (
                EngineConfig {
                    gpus: 0,
                    ..target("h100-sxm", 1)
                },
                a.clone(),
            ),
            (
                EngineConfig {
                    memory_fraction: f64::NAN,
                    ..target("h100-sxm", 1)
                },
                a.clone(),
            ),
            (
                EngineConfig {
                    bandwidth_efficiency: 1.5,
                    ..target("h100-sxm", 1)
                },
                a.clone(),
            ),
            (
                EngineConfig {
                    compute_efficiency: 0.0,
                    ..target("h100-sxm", 1)
                },
                a.clone(),
            ),
            (
                EngineConfig {
                    slowdown: f64::INFINITY,
                    ..target("h100-sxm", 1)
                },
                a.clone(),
            ),
            (
                EngineConfig {
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
            assert!(PerfModel::new(&t, &a, DType::Bf16).is_err(), "{t:?} {a:?}");
        }
        // Extreme but valid batches give finite times.
        let m = model("h100-sxm", 1, "llama-3.1-8b", DType::Bf16);
        let t = m.step_time(&StepBatch {
            decode_context_tokens: vec![u32::MAX; 4],
            prefill_chunks: vec![PrefillChunk {
                chunk_tokens: u32::MAX,
                start_context_tokens: u32::MAX,
                encoder_tokens: 0,
            }],
            reuses_schedule: false,
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
        // nearly the same once the batch touches every expert (it reads the
        // same bytes; only its smaller compute sets it apart).
        let dense_arch = Architecture {
            active_params_b: 46.7,
            ..arch("mixtral-8x7b")
        };
        let dense = PerfModel::new(&target("h200", 1), &dense_arch, DType::Bf16).unwrap();
        let (moe_1, dense_1) = (
            m.step_time(&decode(1, 512)),
            dense.step_time(&decode(1, 512)),
        );
        assert!(moe_1 < 0.5 * dense_1, "{moe_1} vs {dense_1}");
        let (moe_64, dense_64) = (
            m.step_time(&decode(64, 512)),
            dense.step_time(&decode(64, 512)),
        );
        assert!(
            moe_64 > 0.8 * dense_64 && moe_64 < dense_64,
            "{moe_64} vs {dense_64}"
        );
    }

    #[test]
    fn tensor_parallel_fits_70b_and_decodes_faster_than_one_gpu_would() {
        let a = arch("llama-3.1-70b");
        assert!(PerfModel::new(&target("h100-sxm", 1), &a, DType::Bf16).is_err());
        let two = PerfModel::new(&target("h100-sxm", 2), &a, DType::Bf16).unwrap();
        assert!(
            two.kv_capacity_tokens() > 10_000,
            "{}",
            two.kv_capacity_tokens()
        );
        // One H100 with (hypothetically) enough memory: same formulas, no fit check.
        let one = PerfModel::build(&target("h100-sxm", 1), &a, DType::Bf16);
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

    // The checks against published measurements of real servers are the
    // calibration table: tests/calibration.rs over tests/specs/calibration.

    #[test]
    fn fp4_runs_at_the_fp4_rate_where_there_is_one_and_mla_caches_a_latent() {
        // B200: FP4 weights at twice the FP8 tensor rate, 4.5 bits each.
        let fp8 = model("b200", 1, "llama-3.1-70b", DType::Fp8);
        let fp4 = model("b200", 1, "llama-3.1-70b", DType::Fp4);
        let p = prefill(8192);
        assert!(fp4.step_cost(&p).compute_s < 0.6 * fp8.step_cost(&p).compute_s);
        assert_eq!(fp4.weight_bytes(), fp8.weight_bytes() * 0.5625);
        // H100 has no FP4 tensor cores: weight-only, at the BF16 rate.
        let h100 = model("h100-sxm", 1, "llama-3.1-8b", DType::Fp4);
        let bf16 = model("h100-sxm", 1, "llama-3.1-8b", DType::Bf16);
        assert_eq!(h100.step_cost(&p).compute_s, bf16.step_cost(&p).compute_s);
        // DeepSeek-V3's MLA: 576 values a token and layer, held whole by
        // each of 8 GPUs, against 2 x 128 heads x 192 without it.
        let ds = PerfModel::new(&target("h200", 8), &arch("deepseek-v3"), DType::Fp8).unwrap();
        assert_eq!(ds.kv_bytes_per_token(), 61.0 * 576.0 * 8.0 * 2.0);
        assert!(
            ds.kv_capacity_tokens() > 100_000,
            "{}",
            ds.kv_capacity_tokens()
        );
        // A mixture of experts decodes at its active parameters' pace.
        let t1 = ds.step_time(&decode(1, 1024));
        let dense = Architecture {
            active_params_b: 671.0,
            ..arch("deepseek-v3")
        };
        let d = PerfModel::new(&target("h200", 8), &dense, DType::Fp8).unwrap();
        assert!(t1 < 0.3 * d.step_time(&decode(1, 1024)));
    }

    /// A model with `config`'s settings but no fit check (a 70B model in
    /// BF16 on one GPU is priced as if it fitted).
    fn unchecked(gpu: &str, gpus: u32, id: &str, w: DType) -> PerfModel {
        let c = profile::resolve(&sim_target(gpu, gpus), &arch(id), w, None).unwrap();
        PerfModel::build(&c, &arch(id), w)
    }

    #[test]
    fn batch_one_decode_is_memory_bound_at_every_tensor_parallel_degree() {
        // Issue 40: Llama 3.1 70B on H100 at batch 1, FP4 was slower than
        // FP8 on 4 and 8 GPUs (11.0 vs 10.2, 10.2 vs 7.2 ms), since a
        // one-token step at TP 8 was priced like 257 tokens of compute and
        // weight-only FP4 computed at the 8-bit efficiency.
        let d = decode(1, 1024);
        for gpus in [1, 2, 4, 8] {
            let t = |w| unchecked("h100-sxm", gpus, "llama-3.1-70b", w).step_time(&d);
            let (fp4, fp8, bf16) = (t(DType::Fp4), t(DType::Fp8), t(DType::Bf16));
            assert!(fp4 < fp8 && fp8 < bf16, "TP {gpus}: {fp4} {fp8} {bf16}");
            // One token's matrix products hide under the weights' read.
            let c = unchecked("h100-sxm", gpus, "llama-3.1-70b", DType::Fp8).step_cost(&d);
            assert!(c.compute_s < 0.25 * c.memory_s, "TP {gpus}: {c:?}");
        }
        let fp4 = |gpus| unchecked("h100-sxm", gpus, "llama-3.1-70b", DType::Fp4).step_time(&d);
        assert!(
            fp4(8) < fp4(4) && fp4(4) < fp4(2),
            "{} {} {}",
            fp4(2),
            fp4(4),
            fp4(8)
        );
    }

    #[test]
    fn all_reduce_latency_grows_with_the_gpus_and_is_higher_over_pcie() {
        // A one-token step's all-reduces are latency-bound: a ring of 8
        // GPUs waits on more hops than one of 2, and PCIe more than NVLink.
        let comm = |gpu: &str, gpus: u32| {
            unchecked(gpu, gpus, "llama-3.1-8b", DType::Bf16)
                .step_cost(&decode(1, 512))
                .communication_s
        };
        assert_eq!(comm("h100-sxm", 1), 0.0);
        assert!(comm("h100-sxm", 8) > 1.3 * comm("h100-sxm", 2));
        assert!(comm("l40s", 2) > 2.0 * comm("h100-sxm", 2));
        // The bytes a GPU sends are reported with the time.
        let c = unchecked("h100-sxm", 4, "llama-3.1-8b", DType::Bf16).step_cost(&decode(64, 512));
        // 64 tokens × 4096 × 2 bytes, 2 × 3/4 of it sent, 2 × 32 times.
        assert_eq!(c.link_bytes, 64.0 * 4096.0 * 2.0 * 1.5 * 64.0);
        assert!(link_is_pcie(catalog::gpu("l40s").unwrap()));
        assert!(!link_is_pcie(catalog::gpu("h100-pcie").unwrap()));
    }

    #[test]
    fn a_small_prefill_pays_a_fixed_time_per_layer() {
        // Issue 40: a 128-token FP8 prefill of Llama 2 70B on 4 H100s came
        // out at half TensorRT-LLM's published 19.6 ms: launches and the
        // fixed time of each layer's kernels were missing. A prefill step
        // is not captured in a CUDA graph; a decode step is.
        let trtllm = SimTarget {
            profile: Some(infer_bench_spec::raw::SimProfile::Trtllm),
            ..sim_target("h100-sxm", 4)
        };
        let c = profile::resolve(&trtllm, &arch("llama-2-70b"), DType::Fp8, None).unwrap();
        let m = PerfModel::new(&c, &arch("llama-2-70b"), DType::Fp8).unwrap();
        let (p1, d1) = (m.step_cost(&prefill(1)), m.step_cost(&decode(1, 0)));
        let floor = 80.0 * PREFILL_LAYER_S;
        assert!(
            (p1.total_s - d1.total_s - floor).abs() < 0.1 * floor,
            "{p1:?} vs {d1:?}"
        );
        assert!(m.step_time(&prefill(128)) > 1.5 * m.step_time(&decode(1, 0)));
        // vLLM V1 captures mixed steps in piecewise CUDA graphs: no floor.
        let v1 = model("h100-sxm", 4, "llama-2-70b", DType::Fp8);
        assert_eq!(v1.step_time(&prefill(1)), v1.step_time(&decode(1, 0)));
    }
}
