//! The serving engines the simulator models, and the settings of one
//! simulated server once every default is applied. A profile
//! (`[targets.X.sim] profile`) bundles what an engine decides besides the
//! GPU: how it forms a step (its scheduler), its batch limits, how much
//! memory it gives the KV cache, how it admits requests, which number
//! format its KV cache takes when the precision names none, and the host
//! time it spends around the GPU's work. Every key of `[targets.X.sim]`
//! overrides one of these. Some defaults depend on the GPU (vLLM's V1
//! limits) or the model (vLLM V0 turns chunked prefill on for contexts over
//! 32K), which is why they are resolved here and not in the spec compiler.
//! Pure: no I/O. `docs/simulator.md` gives every value and its source.

use crate::error::Error;
use crate::perf::PREFILL_LAYER_S;
use infer_bench_spec::catalog::{self, Gpu};
use infer_bench_spec::model::{Architecture, DType, SimTarget};
use infer_bench_spec::raw::{SimAdmission, SimMemoryBasis, SimProfile, SimScheduler};

/// A simulated server's settings, every default resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    pub profile: SimProfile,
    pub gpu: Gpu,
    /// Tensor-parallel GPUs of one pipeline stage.
    pub gpus: u32,
    /// Pipeline stages of one replica (each `gpus` GPUs).
    pub pipeline: u32,
    /// Data-parallel replicas.
    pub replicas: u32,
    pub scheduler: SimScheduler,
    pub max_num_seqs: u32,
    pub max_batched_tokens: u32,
    pub memory_fraction: f64,
    pub memory_fraction_of: SimMemoryBasis,
    pub admission: SimAdmission,
    /// The number format of the KV cache.
    pub kv_dtype: DType,
    /// Tokens per block of the paged KV cache: vLLM's 16, TensorRT-LLM's
    /// 64, SGLang's 1 (token-granular).
    pub kv_block_tokens: u32,
    /// Fixed GPU time per layer of a step that holds a prefill, seconds:
    /// what its eagerly launched kernels cost besides their work (0 where
    /// the engine captures such steps in CUDA graphs).
    pub prefill_layer_s: f64,
    /// Peak achieved fraction of tensor throughput (large steps).
    pub compute_efficiency: f64,
    /// Achieved fraction of memory bandwidth.
    pub bandwidth_efficiency: f64,
    pub step_overhead_s: f64,
    pub step_overhead_per_seq_s: f64,
    pub request_overhead_s: f64,
    pub scheduler_steps: u32,
    pub slowdown: f64,
    pub kv_cache_tokens: Option<u64>,
    pub tokens_per_event: u32,
    /// The model's longest sequence (the engine's `max_model_len` when the
    /// KV cache holds more).
    pub context_tokens: u32,
}

/// Longest context (tokens) at which vLLM V0 leaves chunked prefill off by
/// default (PR #6666: on for `max_model_len` > 32K).
pub const VLLM_V0_CHUNKED_ABOVE: u32 = 32_768;

/// vLLM V0's token budget with chunked prefill on (`max_num_batched_tokens`
/// = 512, "the best balance between ITL and TTFT on A100").
pub const VLLM_V0_CHUNK_TOKENS: u32 = 512;

/// GPUs with at least this much memory (GiB), other than A100s, get vLLM
/// V1's larger defaults (1024 sequences, 8192 tokens a step).
pub const VLLM_V1_LARGE_GPU_GIB: f64 = 70.0;

/// The context length assumed for a model whose shape was written in the
/// spec without one (Llama 3's 131072 is the common case).
pub const DEFAULT_CONTEXT_TOKENS: u32 = 131_072;

/// Fitted peak fraction of the dense 16-bit tensor rate that large matrix
/// products reach (docs/simulator.md, "Fitted constants"); FlashAttention-3
/// reaches 75% on H100, cuBLAS-class GEMMs 70-80%.
pub const COMPUTE_EFFICIENCY_16BIT: f64 = 0.70;

/// The same for 8-bit (FP8, INT8) and FP4 products: low-precision kernels
/// reach a lower share of their doubled peak (DeepGEMM's FP8: up to 69% at
/// M = 4096 on H800).
pub const COMPUTE_EFFICIENCY_8BIT: f64 = 0.55;

/// Fitted achieved fraction of peak memory bandwidth (batch-1 decode
/// measurements: 60% on 2 × H100, 69% and 77% on A100).
pub const BANDWIDTH_EFFICIENCY: f64 = 0.70;

/// SGLang's time from a request's arrival to its scheduler on one GPU:
/// tokenization and the ZMQ hand-off to the scheduler process.
pub const SGLANG_REQUEST_OVERHEAD_S: f64 = 3e-3;

/// vLLM's KV block size.
const VLLM_BLOCK_TOKENS: u32 = crate::engine::KV_BLOCK_TOKENS as u32;

/// What SGLang adds to a request's way in under tensor parallelism: the
/// scheduler broadcasts each round's new requests to every rank as a
/// pickled object over the CPU process group and the ranks synchronise
/// before the batch forms (issue 40's light-load measurement on 4 GPUs:
/// TTFT 30 ms above the model while the per-token time matched).
pub const SGLANG_TP_REQUEST_OVERHEAD_S: f64 = 30e-3;

/// Tokens per KV block: TensorRT-LLM's `tokens_per_block` (trtllm-build's
/// default) and SGLang's `page_size` (1: its radix cache is
/// token-granular); vLLM's 16 is [`crate::engine::KV_BLOCK_TOKENS`].
pub const TRTLLM_TOKENS_PER_BLOCK: u32 = 64;
pub const SGLANG_PAGE_TOKENS: u32 = 1;

/// What a profile sets, before the spec's overrides.
struct Defaults {
    scheduler: SimScheduler,
    max_num_seqs: u32,
    max_batched_tokens: u32,
    memory_fraction: f64,
    memory_fraction_of: SimMemoryBasis,
    admission: SimAdmission,
    step_overhead_s: f64,
    step_overhead_per_seq_s: f64,
    request_overhead_s: f64,
    kv_block_tokens: u32,
    prefill_layer_s: f64,
}

fn defaults(profile: SimProfile, gpu: &Gpu, gpus: u32, context: u32) -> Defaults {
    let v0 = |step_overhead_s, step_overhead_per_seq_s, request_overhead_s| {
        let (scheduler, max_batched_tokens) = if context > VLLM_V0_CHUNKED_ABOVE {
            (SimScheduler::Chunked, VLLM_V0_CHUNK_TOKENS)
        } else {
            (SimScheduler::PrefillFirst, context.max(2048))
        };
        Defaults {
            scheduler,
            max_num_seqs: 256,
            max_batched_tokens,
            memory_fraction: 0.9,
            memory_fraction_of: SimMemoryBasis::Total,
            admission: SimAdmission::ReservePrompt,
            step_overhead_s,
            step_overhead_per_seq_s,
            request_overhead_s,
            kv_block_tokens: VLLM_BLOCK_TOKENS,
            prefill_layer_s: PREFILL_LAYER_S,
        }
    };
    match profile {
        SimProfile::Vllm05 => v0(4.0e-3, 20e-6, 6e-3),
        SimProfile::Vllm06 => v0(2.0e-3, 10e-6, 4e-3),
        SimProfile::Vllm010 => {
            let large = gpu.memory_gb >= VLLM_V1_LARGE_GPU_GIB && !gpu.id.starts_with("a100");
            Defaults {
                scheduler: SimScheduler::Chunked,
                max_num_seqs: if large { 1024 } else { 256 },
                max_batched_tokens: if large { 8192 } else { 2048 },
                memory_fraction: 0.9,
                memory_fraction_of: SimMemoryBasis::Total,
                admission: SimAdmission::ReservePrompt,
                step_overhead_s: 0.5e-3,
                step_overhead_per_seq_s: 2e-6,
                request_overhead_s: 3e-3,
                kv_block_tokens: VLLM_BLOCK_TOKENS,
                // Piecewise CUDA graphs capture mixed steps too.
                prefill_layer_s: 0.0,
            }
        }
        SimProfile::Sglang => Defaults {
            scheduler: SimScheduler::PrefillFirst,
            max_num_seqs: 2048,
            max_batched_tokens: 8192,
            memory_fraction: if gpus >= 4 { 0.85 } else { 0.88 },
            memory_fraction_of: SimMemoryBasis::Total,
            admission: SimAdmission::ReservePrompt,
            step_overhead_s: 0.3e-3,
            step_overhead_per_seq_s: 1e-6,
            request_overhead_s: SGLANG_REQUEST_OVERHEAD_S
                + if gpus > 1 {
                    SGLANG_TP_REQUEST_OVERHEAD_S
                } else {
                    0.0
                },
            kv_block_tokens: SGLANG_PAGE_TOKENS,
            prefill_layer_s: PREFILL_LAYER_S,
        },
        SimProfile::Trtllm => Defaults {
            scheduler: SimScheduler::WholePrompt,
            max_num_seqs: 2048,
            max_batched_tokens: 8192,
            memory_fraction: 0.9,
            memory_fraction_of: SimMemoryBasis::Free,
            admission: SimAdmission::ReserveFull,
            step_overhead_s: 0.3e-3,
            step_overhead_per_seq_s: 1e-6,
            request_overhead_s: 4e-3,
            kv_block_tokens: TRTLLM_TOKENS_PER_BLOCK,
            prefill_layer_s: PREFILL_LAYER_S,
        },
    }
}

/// The KV cache's number format when the precision names none: the
/// activations' 16-bit type ("auto" in vLLM and SGLang: an FP8 checkpoint
/// computes in BF16), except that TensorRT-LLM quantizes the KV cache of an
/// FP8 build to FP8 too.
pub fn default_kv_dtype(profile: SimProfile, weights: DType) -> DType {
    match (profile, weights) {
        (_, DType::Fp16) => DType::Fp16,
        (_, DType::Fp32) => DType::Fp32,
        (SimProfile::Trtllm, DType::Fp8) => DType::Fp8,
        // NVFP4 checkpoints and their engines keep an FP8 KV cache.
        (_, DType::Fp4) => DType::Fp8,
        _ => DType::Bf16,
    }
}

/// Fitted peak compute efficiency by number format: the fraction of the
/// data-sheet dense rate that large GEMMs reach (docs/simulator.md).
/// Weight-only formats (INT4; FP8 or FP4 on a GPU without tensor cores
/// for them) dequantize to 16 bits and compute at the 16-bit rate and
/// efficiency.
pub fn default_compute_efficiency(weights: DType, gpu: &Gpu) -> f64 {
    match weights {
        DType::Int8 => COMPUTE_EFFICIENCY_8BIT,
        DType::Fp8 if gpu.fp8_tflops.is_some() => COMPUTE_EFFICIENCY_8BIT,
        DType::Fp4 if gpu.fp4_tflops.is_some() => COMPUTE_EFFICIENCY_8BIT,
        _ => COMPUTE_EFFICIENCY_16BIT,
    }
}

/// The context length of a model: its preset's, else the default.
pub fn context_tokens(arch: &Architecture) -> u32 {
    arch.context_tokens
        .or_else(|| {
            arch.preset
                .as_deref()
                .and_then(catalog::model)
                .map(|m| m.context_tokens)
        })
        .unwrap_or(DEFAULT_CONTEXT_TOKENS)
}

/// Every setting of `target`'s simulator for a model of shape `arch` with
/// `weights` (and the precision's `kv`, if it names one).
pub fn resolve(
    target: &SimTarget,
    arch: &Architecture,
    weights: DType,
    kv: Option<DType>,
) -> Result<EngineConfig, Error> {
    let gpu = catalog::gpu(&target.gpu).ok_or_else(|| Error::UnknownGpu {
        gpu: target.gpu.clone(),
        known: catalog::GPUS
            .iter()
            .map(|g| g.id)
            .collect::<Vec<_>>()
            .join(", "),
    })?;
    let profile = target.profile.unwrap_or_default();
    let context = context_tokens(arch);
    let d = defaults(profile, gpu, target.gpus, context);
    let secs =
        |o: Option<infer_bench_spec::Duration>, d: f64| o.map(|v| v.as_secs_f64()).unwrap_or(d);
    Ok(EngineConfig {
        profile,
        gpu: *gpu,
        gpus: target.gpus,
        pipeline: target.pipeline.unwrap_or(1).max(1),
        replicas: target.replicas.unwrap_or(1).max(1),
        scheduler: target.scheduler.unwrap_or(d.scheduler),
        max_num_seqs: target.max_num_seqs.unwrap_or(d.max_num_seqs),
        max_batched_tokens: target.max_batched_tokens.unwrap_or(d.max_batched_tokens),
        memory_fraction: target.memory_fraction.unwrap_or(d.memory_fraction),
        memory_fraction_of: target.memory_fraction_of.unwrap_or(d.memory_fraction_of),
        admission: target.admission.unwrap_or(d.admission),
        kv_dtype: kv.unwrap_or_else(|| default_kv_dtype(profile, weights)),
        kv_block_tokens: d.kv_block_tokens,
        prefill_layer_s: d.prefill_layer_s,
        compute_efficiency: target
            .compute_efficiency
            .unwrap_or_else(|| default_compute_efficiency(weights, gpu)),
        bandwidth_efficiency: target.bandwidth_efficiency.unwrap_or(BANDWIDTH_EFFICIENCY),
        step_overhead_s: secs(target.step_overhead, d.step_overhead_s),
        step_overhead_per_seq_s: secs(target.step_overhead_per_seq, d.step_overhead_per_seq_s),
        request_overhead_s: secs(target.request_overhead, d.request_overhead_s),
        scheduler_steps: target.scheduler_steps.unwrap_or(1).max(1),
        slowdown: target.slowdown,
        kv_cache_tokens: target.kv_cache_tokens,
        tokens_per_event: target.tokens_per_event.max(1),
        context_tokens: context,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::tests::{arch, sim_target};

    fn with(profile: SimProfile, gpu: &str, model: &str, weights: DType) -> EngineConfig {
        let t = SimTarget {
            profile: Some(profile),
            ..sim_target(gpu, 1)
        };
        resolve(&t, &arch(model), weights, None).unwrap()
    }

    #[test]
    fn profiles_set_the_engines_documented_defaults() {
        // vLLM V1: larger limits on big GPUs other than the A100.
        let v1 = with(SimProfile::Vllm010, "h100-sxm", "llama-3.1-8b", DType::Bf16);
        assert_eq!((v1.max_num_seqs, v1.max_batched_tokens), (1024, 8192));
        assert_eq!(v1.scheduler, SimScheduler::Chunked);
        let a100 = with(
            SimProfile::Vllm010,
            "a100-80gb",
            "llama-3.1-8b",
            DType::Bf16,
        );
        assert_eq!((a100.max_num_seqs, a100.max_batched_tokens), (256, 2048));
        // vLLM V0: chunked prefill of 512 for contexts over 32K, else whole
        // prompts first with a budget of the context.
        let long = with(SimProfile::Vllm06, "h100-sxm", "llama-3.1-8b", DType::Bf16);
        assert_eq!(
            (long.scheduler, long.max_batched_tokens),
            (SimScheduler::Chunked, 512)
        );
        let short = with(SimProfile::Vllm05, "h100-sxm", "llama-2-7b", DType::Bf16);
        assert_eq!(
            (short.scheduler, short.max_batched_tokens),
            (SimScheduler::PrefillFirst, 4096)
        );
        // TensorRT-LLM: whole prompts, no eviction, KV fraction of the
        // free memory, and an FP8 build's KV cache in FP8.
        let trt = with(SimProfile::Trtllm, "h100-sxm", "llama-3.1-8b", DType::Fp8);
        assert_eq!(trt.scheduler, SimScheduler::WholePrompt);
        assert_eq!(trt.admission, SimAdmission::ReserveFull);
        assert_eq!(trt.memory_fraction_of, SimMemoryBasis::Free);
        assert_eq!(trt.kv_dtype, DType::Fp8);
        // vLLM computes an FP8 checkpoint in BF16: its KV cache is BF16.
        let fp8 = with(SimProfile::Vllm010, "h100-sxm", "llama-3.1-8b", DType::Fp8);
        assert_eq!(fp8.kv_dtype, DType::Bf16);
        assert_eq!(fp8.compute_efficiency, COMPUTE_EFFICIENCY_8BIT);
        let sg = with(SimProfile::Sglang, "h100-sxm", "llama-3.1-8b", DType::Bf16);
        assert_eq!(sg.scheduler, SimScheduler::PrefillFirst);
        assert_eq!(sg.memory_fraction, 0.88);
    }

    #[test]
    fn fp4_gets_an_fp8_kv_cache_and_weight_only_formats_the_16bit_efficiency() {
        // NVFP4 deployments keep an FP8 KV cache, whatever the engine.
        for p in [SimProfile::Vllm010, SimProfile::Sglang, SimProfile::Trtllm] {
            assert_eq!(
                with(p, "b200", "llama-3.1-8b", DType::Fp4).kv_dtype,
                DType::Fp8
            );
        }
        // Without FP4 (or FP8) tensor cores the weights are dequantized and
        // the products run at the 16-bit rate, at the 16-bit efficiency.
        let eff = |gpu, w| with(SimProfile::Vllm010, gpu, "llama-3.1-8b", w).compute_efficiency;
        assert_eq!(eff("h100-sxm", DType::Fp4), COMPUTE_EFFICIENCY_16BIT);
        assert_eq!(eff("a100-80gb", DType::Fp8), COMPUTE_EFFICIENCY_16BIT);
        assert_eq!(eff("h100-sxm", DType::Int4), COMPUTE_EFFICIENCY_16BIT);
        assert_eq!(eff("b200", DType::Fp4), COMPUTE_EFFICIENCY_8BIT);
        assert_eq!(eff("h100-sxm", DType::Fp8), COMPUTE_EFFICIENCY_8BIT);
    }

    #[test]
    fn sglang_pays_its_request_hand_off_across_tensor_parallel_ranks() {
        // Issue 40: SGLang's TTFT at light load on 4 GPUs was ~30 ms short
        // while its per-token time was right.
        let sg = |gpus| {
            let t = SimTarget {
                profile: Some(SimProfile::Sglang),
                ..sim_target("h100-sxm", gpus)
            };
            resolve(&t, &arch("llama-3.1-70b"), DType::Bf16, None)
                .unwrap()
                .request_overhead_s
        };
        assert_eq!(sg(1), SGLANG_REQUEST_OVERHEAD_S);
        assert!((sg(4) - sg(1) - 0.030).abs() < 1e-9, "{} {}", sg(1), sg(4));
    }

    #[test]
    fn the_spec_overrides_the_profile() {
        let t = SimTarget {
            profile: Some(SimProfile::Trtllm),
            max_num_seqs: Some(64),
            admission: Some(SimAdmission::ReservePrompt),
            scheduler: Some(SimScheduler::PrefillFirst),
            step_overhead: Some(infer_bench_spec::Duration::from_millis(3)),
            ..sim_target("h100-sxm", 1)
        };
        let c = resolve(&t, &arch("llama-3.1-8b"), DType::Fp8, Some(DType::Bf16)).unwrap();
        assert_eq!(c.max_num_seqs, 64);
        assert_eq!(c.admission, SimAdmission::ReservePrompt);
        assert_eq!(c.scheduler, SimScheduler::PrefillFirst);
        assert_eq!(c.step_overhead_s, 0.003);
        assert_eq!(c.kv_dtype, DType::Bf16);
        // The default profile is vLLM's V1 engine.
        let d = resolve(
            &sim_target("h100-sxm", 1),
            &arch("llama-3.1-8b"),
            DType::Bf16,
            None,
        );
        assert_eq!(d.unwrap().profile, SimProfile::Vllm010);
    }
}
