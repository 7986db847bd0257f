//! Hardware and model facts: a catalogue of GPUs (from their vendors' public
//! data sheets) and of well-known open model architectures (from their
//! published configs). The simulator's performance model, spec validation and
//! cost math read these; nothing here computes anything.

use serde::Serialize;

/// One GPU model's data-sheet figures. Throughputs are dense (no sparsity),
/// in TFLOP/s (TOP/s for int8); memory bandwidth in GB/s (1e9 bytes/s).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Gpu {
    /// Identifier used in specs: "h100-sxm".
    pub id: &'static str,
    /// Marketing name, as NVML or the vendor reports it.
    pub name: &'static str,
    pub memory_gb: f64,
    pub bandwidth_gbs: f64,
    pub bf16_tflops: f64,
    /// Dense FP8 throughput; `None` where the chip has no FP8 tensor cores
    /// (FP8 weights are then dequantized and computed at the BF16 rate).
    pub fp8_tflops: Option<f64>,
    pub int8_tops: f64,
    /// Per-GPU bandwidth of the link used for tensor parallelism, GB/s.
    pub interconnect_gbs: f64,
    /// Board power limit (TDP), watts.
    pub tdp_w: f64,
    /// Where the figures come from.
    pub source: &'static str,
}

/// The GPUs the simulator knows.
pub const GPUS: &[Gpu] = &[
    Gpu {
        id: "a100-40gb",
        name: "NVIDIA A100-SXM4-40GB",
        memory_gb: 40.0,
        bandwidth_gbs: 1555.0,
        bf16_tflops: 312.0,
        fp8_tflops: None,
        int8_tops: 624.0,
        interconnect_gbs: 600.0,
        tdp_w: 400.0,
        source: "NVIDIA A100 Tensor Core GPU data sheet (2021), SXM column",
    },
    Gpu {
        id: "a100-80gb",
        name: "NVIDIA A100-SXM4-80GB",
        memory_gb: 80.0,
        bandwidth_gbs: 2039.0,
        bf16_tflops: 312.0,
        fp8_tflops: None,
        int8_tops: 624.0,
        interconnect_gbs: 600.0,
        tdp_w: 400.0,
        source: "NVIDIA A100 Tensor Core GPU data sheet (2021), 80GB SXM column",
    },
    Gpu {
        id: "h100-sxm",
        name: "NVIDIA H100 80GB HBM3",
        memory_gb: 80.0,
        bandwidth_gbs: 3350.0,
        bf16_tflops: 989.5,
        fp8_tflops: Some(1979.0),
        int8_tops: 1979.0,
        interconnect_gbs: 900.0,
        tdp_w: 700.0,
        source: "NVIDIA H100 Tensor Core GPU data sheet, H100 SXM column (dense = half the sparsity figures)",
    },
    Gpu {
        id: "h100-pcie",
        name: "NVIDIA H100 PCIe",
        memory_gb: 80.0,
        bandwidth_gbs: 2000.0,
        bf16_tflops: 756.0,
        fp8_tflops: Some(1513.0),
        int8_tops: 1513.0,
        interconnect_gbs: 600.0,
        tdp_w: 350.0,
        source: "NVIDIA H100 Tensor Core GPU data sheet, H100 PCIe column (NVLink bridge)",
    },
    Gpu {
        id: "h200",
        name: "NVIDIA H200",
        memory_gb: 141.0,
        bandwidth_gbs: 4800.0,
        bf16_tflops: 989.5,
        fp8_tflops: Some(1979.0),
        int8_tops: 1979.0,
        interconnect_gbs: 900.0,
        tdp_w: 700.0,
        source: "NVIDIA H200 Tensor Core GPU data sheet, H200 SXM column",
    },
    Gpu {
        id: "l40s",
        name: "NVIDIA L40S",
        memory_gb: 48.0,
        bandwidth_gbs: 864.0,
        bf16_tflops: 362.05,
        fp8_tflops: Some(733.0),
        int8_tops: 733.0,
        interconnect_gbs: 64.0,
        tdp_w: 350.0,
        source: "NVIDIA L40S data sheet (dense = half the sparsity figures); PCIe Gen4 x16",
    },
    Gpu {
        id: "rtx-4090",
        name: "NVIDIA GeForce RTX 4090",
        memory_gb: 24.0,
        bandwidth_gbs: 1008.0,
        bf16_tflops: 165.2,
        fp8_tflops: Some(330.3),
        int8_tops: 660.6,
        interconnect_gbs: 64.0,
        tdp_w: 450.0,
        source: "NVIDIA Ada Lovelace architecture whitepaper, GeForce RTX 4090 (FP32 accumulate); PCIe Gen4 x16",
    },
    Gpu {
        id: "mi300x",
        name: "AMD Instinct MI300X",
        memory_gb: 192.0,
        bandwidth_gbs: 5300.0,
        bf16_tflops: 1307.4,
        fp8_tflops: Some(2614.9),
        int8_tops: 2614.9,
        interconnect_gbs: 896.0,
        tdp_w: 750.0,
        source: "AMD Instinct MI300X data sheet (dense); Infinity Fabric 7x128 GB/s",
    },
    Gpu {
        id: "mi325x",
        name: "AMD Instinct MI325X",
        memory_gb: 256.0,
        bandwidth_gbs: 6000.0,
        bf16_tflops: 1307.4,
        fp8_tflops: Some(2614.9),
        int8_tops: 2614.9,
        interconnect_gbs: 896.0,
        tdp_w: 1000.0,
        source: "AMD Instinct MI325X data sheet (dense; the MI300X's compute with HBM3E); Infinity Fabric 7x128 GB/s",
    },
    Gpu {
        id: "h100-nvl",
        name: "NVIDIA H100 NVL",
        memory_gb: 94.0,
        bandwidth_gbs: 3900.0,
        bf16_tflops: 835.5,
        fp8_tflops: Some(1670.5),
        int8_tops: 1670.5,
        interconnect_gbs: 600.0,
        tdp_w: 400.0,
        source: "NVIDIA H100 Tensor Core GPU data sheet, H100 NVL column (dense = half the sparsity figures); NVLink bridge 600 GB/s",
    },
    Gpu {
        id: "l4",
        name: "NVIDIA L4",
        memory_gb: 24.0,
        bandwidth_gbs: 300.0,
        bf16_tflops: 121.0,
        fp8_tflops: Some(242.5),
        int8_tops: 242.5,
        interconnect_gbs: 64.0,
        tdp_w: 72.0,
        source: "NVIDIA L4 Tensor Core GPU data sheet (dense = half the sparsity figures); PCIe Gen4 x16",
    },
    Gpu {
        id: "b200",
        name: "NVIDIA B200",
        memory_gb: 180.0,
        bandwidth_gbs: 7700.0,
        bf16_tflops: 2250.0,
        fp8_tflops: Some(4500.0),
        int8_tops: 4500.0,
        interconnect_gbs: 1800.0,
        tdp_w: 1000.0,
        source: "NVIDIA HGX B200 data sheet, per GPU (system figures / 8; dense = half the sparsity figures); FP4 is not modelled; NVLink 5 1.8 TB/s",
    },
];

/// Looks a GPU up by its spec id.
pub fn gpu(id: &str) -> Option<&'static Gpu> {
    GPUS.iter().find(|g| g.id == id)
}

/// A transformer's shape.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Arch {
    pub id: &'static str,
    pub params_b: f64,
    /// Parameters used per token (mixture-of-experts: fewer than `params_b`).
    pub active_params_b: f64,
    pub layers: u32,
    pub hidden: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub source: &'static str,
}

/// Well-known open models.
pub const MODELS: &[Arch] = &[
    Arch {
        id: "llama-3.2-1b",
        params_b: 1.24,
        active_params_b: 1.24,
        layers: 16,
        hidden: 2048,
        heads: 32,
        kv_heads: 8,
        head_dim: 64,
        source: "meta-llama/Llama-3.2-1B config.json",
    },
    Arch {
        id: "llama-3.2-3b",
        params_b: 3.21,
        active_params_b: 3.21,
        layers: 28,
        hidden: 3072,
        heads: 24,
        kv_heads: 8,
        head_dim: 128,
        source: "meta-llama/Llama-3.2-3B config.json",
    },
    Arch {
        id: "llama-3.1-8b",
        params_b: 8.03,
        active_params_b: 8.03,
        layers: 32,
        hidden: 4096,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        source: "meta-llama/Llama-3.1-8B config.json",
    },
    Arch {
        id: "llama-3.1-70b",
        params_b: 70.6,
        active_params_b: 70.6,
        layers: 80,
        hidden: 8192,
        heads: 64,
        kv_heads: 8,
        head_dim: 128,
        source: "meta-llama/Llama-3.1-70B config.json",
    },
    Arch {
        id: "llama-3.1-405b",
        params_b: 405.9,
        active_params_b: 405.9,
        layers: 126,
        hidden: 16384,
        heads: 128,
        kv_heads: 8,
        head_dim: 128,
        source: "meta-llama/Llama-3.1-405B config.json",
    },
    Arch {
        id: "mistral-7b",
        params_b: 7.24,
        active_params_b: 7.24,
        layers: 32,
        hidden: 4096,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        source: "mistralai/Mistral-7B-v0.3 config.json",
    },
    Arch {
        id: "mixtral-8x7b",
        params_b: 46.7,
        active_params_b: 12.9,
        layers: 32,
        hidden: 4096,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        source: "mistralai/Mixtral-8x7B-v0.1 config.json; Mistral AI's announcement (12.9B active)",
    },
    Arch {
        id: "qwen2.5-7b",
        params_b: 7.62,
        active_params_b: 7.62,
        layers: 28,
        hidden: 3584,
        heads: 28,
        kv_heads: 4,
        head_dim: 128,
        source: "Qwen/Qwen2.5-7B config.json",
    },
    Arch {
        id: "qwen2.5-72b",
        params_b: 72.7,
        active_params_b: 72.7,
        layers: 80,
        hidden: 8192,
        heads: 64,
        kv_heads: 8,
        head_dim: 128,
        source: "Qwen/Qwen2.5-72B config.json",
    },
    Arch {
        id: "llama-2-7b",
        params_b: 6.74,
        active_params_b: 6.74,
        layers: 32,
        hidden: 4096,
        heads: 32,
        kv_heads: 32,
        head_dim: 128,
        source: "meta-llama/Llama-2-7b-hf config.json (multi-head attention: as many KV heads as heads)",
    },
    Arch {
        id: "llama-2-13b",
        params_b: 13.0,
        active_params_b: 13.0,
        layers: 40,
        hidden: 5120,
        heads: 40,
        kv_heads: 40,
        head_dim: 128,
        source: "meta-llama/Llama-2-13b-hf config.json",
    },
    Arch {
        id: "llama-2-70b",
        params_b: 69.0,
        active_params_b: 69.0,
        layers: 80,
        hidden: 8192,
        heads: 64,
        kv_heads: 8,
        head_dim: 128,
        source: "meta-llama/Llama-2-70b-hf config.json",
    },
    Arch {
        id: "qwen3-8b",
        params_b: 8.19,
        active_params_b: 8.19,
        layers: 36,
        hidden: 4096,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        source: "Qwen/Qwen3-8B config.json",
    },
    Arch {
        id: "qwen3-32b",
        params_b: 32.8,
        active_params_b: 32.8,
        layers: 64,
        hidden: 5120,
        heads: 64,
        kv_heads: 8,
        head_dim: 128,
        source: "Qwen/Qwen3-32B config.json",
    },
    Arch {
        id: "qwen3-30b-a3b",
        params_b: 30.5,
        active_params_b: 3.3,
        layers: 48,
        hidden: 2048,
        heads: 32,
        kv_heads: 4,
        head_dim: 128,
        source: "Qwen/Qwen3-30B-A3B config.json and model card (30.5B total, 3.3B activated: 8 of 128 experts)",
    },
];

/// Looks a model architecture up by its preset id.
pub fn model(id: &str) -> Option<&'static Arch> {
    MODELS.iter().find(|m| m.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_figures_sane() {
        for (i, g) in GPUS.iter().enumerate() {
            assert!(GPUS[i + 1..].iter().all(|o| o.id != g.id));
            assert!(g.memory_gb > 0.0 && g.bandwidth_gbs > 0.0 && g.bf16_tflops > 0.0);
            assert!(g.fp8_tflops.is_none_or(|f| f > g.bf16_tflops));
        }
        for m in MODELS {
            assert!(m.active_params_b <= m.params_b);
            assert_eq!(m.heads % m.kv_heads, 0, "{}", m.id);
        }
        assert_eq!(gpu("h100-sxm").unwrap().memory_gb, 80.0);
        assert!(model("llama-3.1-8b").is_some());
    }
}
