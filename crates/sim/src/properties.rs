//! Property tests over the model (issue 40), in virtual time on the
//! engine or on the cost model directly: no cliffs (throughput continuous
//! in prompt length, output length, concurrency and step budget), fewer
//! weight bytes never slower at batch 1, tensor parallelism sub-linear once
//! its communication is priced, FP8 never slower than BF16. Few cases and
//! short runs: the suite runs on 2 cores.

use proptest::prelude::*;

use crate::engine::tests::{closed_loop, engine_with};
use crate::perf::tests::{arch, sim_target};
use crate::perf::{PerfModel, PrefillChunk, StepBatch};
use crate::profile::{self, EngineConfig};
use infer_bench_spec::model::{DType, SimTarget};
use infer_bench_spec::raw::SimProfile;

/// No step of more than this between neighbours one unit apart.
const STEP: f64 = 1.5;

fn config(p: SimProfile, gpu: &str, gpus: u32, model: &str, w: DType) -> EngineConfig {
    let t = SimTarget {
        profile: Some(p),
        ..sim_target(gpu, gpus)
    };
    profile::resolve(&t, &arch(model), w, None).unwrap()
}

/// Output tokens per second of a closed loop of `clients` on `c`.
fn throughput(c: &EngineConfig, clients: u64, prompt: u32, output: u32) -> f64 {
    let mut e = engine_with(c, "llama-3.1-8b", DType::Fp8);
    closed_loop(&mut e, clients, prompt, output, 30.0).output_tokens_per_s
}

fn close(a: f64, b: f64) -> bool {
    a.max(b) / a.min(b) < STEP
}

fn profiles() -> impl Strategy<Value = SimProfile> {
    prop::sample::select(vec![
        SimProfile::Vllm010,
        SimProfile::Vllm06,
        SimProfile::Sglang,
        SimProfile::Trtllm,
    ])
}

fn formats() -> impl Strategy<Value = DType> {
    prop::sample::select(vec![DType::Bf16, DType::Fp8, DType::Fp4, DType::Int4])
}

fn gpus() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "h100-sxm",
        "h200",
        "b200",
        "a100-80gb",
        "l40s",
        "mi300x",
    ])
}

/// A model on `gpus` × `gpu` priced without the fit check, so that every
/// format and degree can be compared.
fn unchecked(gpu: &str, gpus: u32, model: &str, w: DType) -> PerfModel {
    let c = profile::resolve(&sim_target(gpu, gpus), &arch(model), w, None).unwrap();
    PerfModel::build_unchecked(&c, &arch(model), w)
}

fn decode(batch: usize, context: u32) -> StepBatch {
    StepBatch {
        decode_context_tokens: vec![context; batch],
        ..StepBatch::default()
    }
}

fn prefill(tokens: u32, start: u32) -> StepBatch {
    StepBatch {
        prefill_chunks: vec![PrefillChunk {
            chunk_tokens: tokens,
            start_context_tokens: start,
            encoder_tokens: 0,
        }],
        ..StepBatch::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn throughput_is_continuous_in_prompt_length(p in profiles(), prompt in 64u32..12_000, output in 16u32..256) {
        let c = config(p, "h100-sxm", 1, "llama-3.1-8b", DType::Fp8);
        let (a, b) = (throughput(&c, 32, prompt, output), throughput(&c, 32, prompt + 1, output));
        prop_assert!(close(a, b), "{p:?} prompt {prompt}: {a} vs {b}");
    }

    #[test]
    fn throughput_is_continuous_in_output_length(p in profiles(), prompt in 16u32..4096, output in 1u32..512) {
        let c = config(p, "h100-sxm", 1, "llama-3.1-8b", DType::Fp8);
        let (a, b) = (throughput(&c, 32, prompt, output), throughput(&c, 32, prompt, output + 1));
        prop_assert!(close(a, b), "{p:?} output {output}: {a} vs {b}");
    }

    #[test]
    fn throughput_is_continuous_in_concurrency(p in profiles(), clients in 4u64..256, prompt in 16u32..4096) {
        let c = config(p, "h100-sxm", 1, "llama-3.1-8b", DType::Fp8);
        let (a, b) = (throughput(&c, clients, prompt, 128), throughput(&c, clients + 1, prompt, 128));
        prop_assert!(close(a, b), "{p:?} clients {clients}: {a} vs {b}");
    }

    #[test]
    fn throughput_is_continuous_in_the_step_budget(p in profiles(), budget in 256u32..16_384, prompt in 16u32..12_000) {
        let run = |budget| {
            let c = EngineConfig {
                max_batched_tokens: budget,
                ..config(p, "h100-sxm", 1, "llama-3.1-8b", DType::Fp8)
            };
            throughput(&c, 32, prompt, 128)
        };
        let (a, b) = (run(budget), run(budget + 1));
        prop_assert!(close(a, b), "{p:?} budget {budget} prompt {prompt}: {a} vs {b}");
    }

    #[test]
    fn fewer_weight_bytes_never_decode_slower_at_batch_one(
        gpu in gpus(),
        gpus in prop::sample::select(vec![1u32, 2, 4, 8]),
        model in prop::sample::select(vec!["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b"]),
        context in 0u32..32_768,
    ) {
        let t = |w| unchecked(gpu, gpus, model, w).step_time(&decode(1, context));
        let (fp4, fp8, bf16) = (t(DType::Fp4), t(DType::Fp8), t(DType::Bf16));
        prop_assert!(fp4 <= fp8 && fp8 <= bf16, "{gpu} x{gpus} {model}: {fp4} {fp8} {bf16}");
        prop_assert!(t(DType::Int4) <= fp8, "{gpu} x{gpus} {model}");
    }

    #[test]
    fn tensor_parallel_speed_up_is_sub_linear(
        gpu in gpus(),
        w in formats(),
        batch in 1usize..512,
        chunk in 0u32..8192,
        context in 0u32..8192,
    ) {
        let mut step = decode(batch, context);
        step.prefill_chunks = prefill(chunk, 0).prefill_chunks;
        let one = unchecked(gpu, 1, "llama-3.1-70b", w).step_time(&step);
        for g in [2u32, 4, 8] {
            let many = unchecked(gpu, g, "llama-3.1-70b", w).step_time(&step);
            prop_assert!(one / many < f64::from(g), "{gpu} {w:?} x{g}: {one} / {many}");
        }
    }

    #[test]
    fn fp8_is_never_slower_than_bf16(
        gpu in gpus(),
        gpus in prop::sample::select(vec![1u32, 2, 4, 8]),
        batch in 0usize..512,
        chunk in 0u32..32_768,
        start in 0u32..32_768,
        context in 0u32..32_768,
    ) {
        let mut step = decode(batch, context);
        if chunk > 0 {
            step.prefill_chunks = prefill(chunk, start).prefill_chunks;
        }
        let t = |w| unchecked(gpu, gpus, "llama-3.1-8b", w).step_time(&step);
        prop_assert!(t(DType::Fp8) <= t(DType::Bf16), "{gpu} x{gpus}: {} vs {}", t(DType::Fp8), t(DType::Bf16));
    }
}
