//! Hardware and model facts: a catalogue of GPUs (from their vendors' public
//! data sheets), of well-known open model architectures (from their
//! published configs) and of vision and encoder networks (from their
//! papers' and model zoos' tables). The simulator's performance model, spec validation and
//! cost math read these; nothing here computes anything.

use serde::Serialize;

use crate::raw::ModelKind;
use crate::tensor::DataType;

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
    /// Dense FP4 throughput (NVFP4, MXFP4); `None` where the chip has no FP4
    /// tensor cores (FP4 weights are then dequantized: weight-only).
    pub fp4_tflops: Option<f64>,
    pub int8_tops: f64,
    /// Per-GPU bandwidth of the link used for tensor parallelism, GB/s.
    pub interconnect_gbs: f64,
    /// Board power limit (TDP), watts.
    pub tdp_w: f64,
    /// Where the figures come from.
    pub source: &'static str,
}

/// GH200 with 96 GB of HBM3; the 144 GB part differs only in its memory.
const GH200_96GB: Gpu = Gpu {
    id: "gh200-96gb",
    name: "NVIDIA GH200 480GB",
    memory_gb: 96.0,
    bandwidth_gbs: 4000.0,
    bf16_tflops: 989.5,
    fp8_tflops: Some(1979.0),
    fp4_tflops: None,
    int8_tops: 1979.0,
    interconnect_gbs: 900.0,
    tdp_w: 1000.0,
    source: "NVIDIA GH200 Grace Hopper Superchip data sheet, 96 GB HBM3 column (dense); the sheet gives no GPU-to-GPU NVLink figure (H100's 900 GB/s assumed) and power only for the module (450-1,000 W, the maximum taken)",
};

/// The GPUs the simulator knows.
pub const GPUS: &[Gpu] = &[
    Gpu {
        id: "a100-40gb",
        name: "NVIDIA A100-SXM4-40GB",
        memory_gb: 40.0,
        bandwidth_gbs: 1555.0,
        bf16_tflops: 312.0,
        fp8_tflops: None,
        fp4_tflops: None,
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
        fp4_tflops: None,
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
        fp4_tflops: None,
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
        fp4_tflops: None,
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
        fp4_tflops: None,
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
        fp4_tflops: None,
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
        fp4_tflops: None,
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
        fp4_tflops: None,
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
        fp4_tflops: None,
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
        fp4_tflops: None,
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
        fp4_tflops: None,
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
        fp4_tflops: Some(9000.0),
        int8_tops: 4500.0,
        interconnect_gbs: 1800.0,
        tdp_w: 1000.0,
        source: "NVIDIA Blackwell data sheet, HGX B200 column, per GPU (dense = half the sparsity figures; FP4 18 PFLOPS sparse); NVLink 5 1.8 TB/s",
    },
    Gpu {
        id: "gb200",
        name: "NVIDIA GB200",
        memory_gb: 186.0,
        bandwidth_gbs: 8000.0,
        bf16_tflops: 2500.0,
        fp8_tflops: Some(5000.0),
        fp4_tflops: Some(10000.0),
        int8_tops: 5000.0,
        interconnect_gbs: 1800.0,
        tdp_w: 1200.0,
        source: "NVIDIA Blackwell data sheet, GB200 NVL72 column, per GPU (dense = half the sparsity figures; FP4 20 PFLOPS sparse); NVLink 5 1.8 TB/s; configurable up to 1,200 W",
    },
    GH200_96GB,
    Gpu {
        id: "gh200-144gb",
        name: "NVIDIA GH200 144G HBM3e",
        memory_gb: 144.0,
        bandwidth_gbs: 4900.0,
        source: "NVIDIA GH200 Grace Hopper Superchip data sheet, 144 GB HBM3e column (dense); compute, NVLink and power as for the 96 GB part",
        ..GH200_96GB
    },
    Gpu {
        id: "a10g",
        name: "NVIDIA A10G",
        memory_gb: 24.0,
        bandwidth_gbs: 600.0,
        bf16_tflops: 70.0,
        fp8_tflops: None,
        fp4_tflops: None,
        int8_tops: 140.0,
        interconnect_gbs: 64.0,
        tdp_w: 300.0,
        source: "NVIDIA A10G data sheet for AWS G5 (BF16 70 TFLOPS dense, 140 sparse), as quoted; INT8 taken as twice BF16 (Ampere's ratio) and 300 W from a third-party table; PCIe Gen4 x16",
    },
    Gpu {
        id: "a10",
        name: "NVIDIA A10",
        memory_gb: 24.0,
        bandwidth_gbs: 600.0,
        bf16_tflops: 125.0,
        fp8_tflops: None,
        fp4_tflops: None,
        int8_tops: 250.0,
        interconnect_gbs: 64.0,
        tdp_w: 150.0,
        source: "NVIDIA A10 Tensor Core GPU data sheet (dense); PCIe Gen4 x16",
    },
    Gpu {
        id: "rtx-pro-6000",
        name: "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        memory_gb: 96.0,
        bandwidth_gbs: 1597.0,
        bf16_tflops: 500.0,
        fp8_tflops: Some(1000.0),
        fp4_tflops: Some(2000.0),
        int8_tops: 1000.0,
        interconnect_gbs: 128.0,
        tdp_w: 600.0,
        source: "NVIDIA RTX PRO 6000 Blackwell Server Edition product page (1 / 2 / 4 PFLOPS BF16 / FP8 / FP4, read as sparse as the Workstation data sheet's FP4 footnote says: dense is half); 1,597 GB/s; up to 600 W; PCIe Gen5 x16",
    },
    Gpu {
        id: "mi355x",
        name: "AMD Instinct MI355X",
        memory_gb: 288.0,
        bandwidth_gbs: 8000.0,
        bf16_tflops: 2516.6,
        fp8_tflops: Some(5033.2),
        fp4_tflops: Some(10066.4),
        int8_tops: 5033.2,
        interconnect_gbs: 1075.2,
        tdp_w: 1400.0,
        source: "AMD Instinct MI355X (dense: 2,400 MHz x 256 CUs at CDNA 4's per-CU rates, as AMD's rounded 2.5 / 5 / 10 PFLOPS); 288 GB HBM3E at 8 TB/s; 1,400 W; Infinity Fabric 7 x 153.6 GB/s",
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
    /// The longest sequence it takes (config.json's `max_position_embeddings`).
    pub context_tokens: u32,
    /// Multi-head latent attention (DeepSeek): the values cached per token
    /// and layer (`kv_lora_rank + qk_rope_head_dim`), shared by all heads;
    /// `None`: K and V per KV head.
    pub kv_latent_dim: Option<u32>,
    /// A vision-language model's image encoder; `None`: text only.
    pub vision: Option<VisionEncoder>,
    pub source: &'static str,
}

/// A vision-language model's image encoder (a ViT and the projector that
/// hands its output to the language model), as the simulator charges it:
/// every patch of an image goes through `params_b` billion parameters
/// once, in the step that starts the image's prompt (2 x params FLOPs a
/// patch, at the GPU's BF16 rate, plus reading its weights); its own
/// attention is left out. An image token covers `merge` x `merge`
/// patches.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct VisionEncoder {
    pub params_b: f64,
    /// Patches merged into one image token, per side.
    pub merge: u32,
}

/// Qwen2.5-7B's shape, which Qwen2.5-VL-7B's language model shares.
const QWEN2_5_7B: Arch = Arch {
    id: "qwen2.5-7b",
    params_b: 7.62,
    active_params_b: 7.62,
    layers: 28,
    hidden: 3584,
    heads: 28,
    kv_heads: 4,
    head_dim: 128,
    context_tokens: 32768,
    kv_latent_dim: None,
    vision: None,
    source: "Qwen/Qwen2.5-7B config.json",
};

/// DeepSeek-V3's shape, which DeepSeek-R1 shares.
const DEEPSEEK_V3: Arch = Arch {
    id: "deepseek-v3",
    params_b: 671.0,
    active_params_b: 36.7,
    layers: 61,
    hidden: 7168,
    heads: 128,
    kv_heads: 128,
    head_dim: 192,
    context_tokens: 163_840,
    kv_latent_dim: Some(576),
    vision: None,
    source: "deepseek-ai/DeepSeek-V3 config.json (61 layers, 3 dense then 58 with 8 of 256 routed experts and a shared one; MLA with kv_lora_rank 512 and qk_rope_head_dim 64: 576 values a token and layer; q/k heads of 128 + 64) and README_WEIGHTS (671B total, 36.7B activated)",
};

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
        context_tokens: 131072,
        kv_latent_dim: None,
        vision: None,
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
        context_tokens: 131072,
        kv_latent_dim: None,
        vision: None,
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
        context_tokens: 131072,
        kv_latent_dim: None,
        vision: None,
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
        context_tokens: 131072,
        kv_latent_dim: None,
        vision: None,
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
        context_tokens: 131072,
        kv_latent_dim: None,
        vision: None,
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
        context_tokens: 32768,
        kv_latent_dim: None,
        vision: None,
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
        context_tokens: 32768,
        kv_latent_dim: None,
        vision: None,
        source: "mistralai/Mixtral-8x7B-v0.1 config.json; Mistral AI's announcement (12.9B active)",
    },
    QWEN2_5_7B,
    Arch {
        id: "qwen2.5-72b",
        params_b: 72.7,
        active_params_b: 72.7,
        layers: 80,
        hidden: 8192,
        heads: 64,
        kv_heads: 8,
        head_dim: 128,
        context_tokens: 32768,
        kv_latent_dim: None,
        vision: None,
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
        context_tokens: 4096,
        kv_latent_dim: None,
        vision: None,
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
        context_tokens: 4096,
        kv_latent_dim: None,
        vision: None,
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
        context_tokens: 4096,
        kv_latent_dim: None,
        vision: None,
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
        context_tokens: 40960,
        kv_latent_dim: None,
        vision: None,
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
        context_tokens: 40960,
        kv_latent_dim: None,
        vision: None,
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
        context_tokens: 40960,
        kv_latent_dim: None,
        vision: None,
        source: "Qwen/Qwen3-30B-A3B config.json and model card (30.5B total, 3.3B activated: 8 of 128 experts)",
    },
    Arch {
        id: "mixtral-8x22b",
        params_b: 141.0,
        active_params_b: 39.0,
        layers: 56,
        hidden: 6144,
        heads: 48,
        kv_heads: 8,
        head_dim: 128,
        context_tokens: 65536,
        kv_latent_dim: None,
        vision: None,
        source: "mistral-community/Mixtral-8x22B-v0.1 config (56 layers, 8 experts, 2 a token); Mistral AI: 39B active of 141B",
    },
    Arch {
        id: "qwen3-235b-a22b",
        params_b: 235.1,
        active_params_b: 22.0,
        layers: 94,
        hidden: 4096,
        heads: 64,
        kv_heads: 4,
        head_dim: 128,
        context_tokens: 40960,
        kv_latent_dim: None,
        vision: None,
        source: "Qwen/Qwen3-235B-A22B config.json and model card (235B total, 22B activated: 8 of 128 experts in every layer)",
    },
    Arch {
        id: "llama-4-scout",
        params_b: 109.0,
        active_params_b: 17.0,
        layers: 48,
        hidden: 5120,
        heads: 40,
        kv_heads: 8,
        head_dim: 128,
        context_tokens: 10_485_760,
        kv_latent_dim: None,
        vision: None,
        source: "meta-llama/Llama-4-Scout-17B-16E config and model card (109B total, 17B activated: 1 of 16 experts and a shared one in every layer)",
    },
    Arch {
        id: "llama-4-maverick",
        params_b: 400.0,
        active_params_b: 17.0,
        layers: 48,
        hidden: 5120,
        heads: 40,
        kv_heads: 8,
        head_dim: 128,
        context_tokens: 1_048_576,
        kv_latent_dim: None,
        vision: None,
        source: "meta-llama/Llama-4-Maverick-17B-128E config and model card (400B total, 17B activated: 1 of 128 experts and a shared one on every other layer)",
    },
    Arch {
        id: "qwen2.5-vl-7b",
        context_tokens: 128_000,
        vision: Some(VisionEncoder {
            params_b: 0.675,
            merge: 2,
        }),
        source: "Qwen/Qwen2.5-VL-7B-Instruct config.json (the language model is Qwen2.5-7B's shape; vision_config: 32 layers of 1280, 14-pixel patches, spatial_merge_size 2, so a token covers 28 x 28 pixels) and the Qwen2.5-VL technical report (a 675M-parameter ViT for every size)",
        ..QWEN2_5_7B
    },
    DEEPSEEK_V3,
    Arch {
        id: "deepseek-r1",
        source: "deepseek-ai/DeepSeek-R1 README: trained from DeepSeek-V3-Base, the same architecture (see deepseek-v3)",
        ..DEEPSEEK_V3
    },
];
/// Looks a model architecture up by its preset id.
pub fn model(id: &str) -> Option<&'static Arch> {
    MODELS.iter().find(|m| m.id == id)
}

/// One tensor a network takes or gives, per item: its shape leaves out the
/// batch dimension that leads it on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TensorDecl {
    pub name: &'static str,
    pub datatype: DataType,
    pub shape: &'static [u64],
}

/// A network that maps tensors to tensors (a vision model, a text
/// encoder), as the simulator serves it over KServe v2: its size, its
/// work per item and its tensors as an ONNX or TorchScript export in
/// Triton names them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Network {
    pub id: &'static str,
    pub kind: ModelKind,
    /// Parameters, in millions.
    pub params_m: f64,
    /// Floating-point operations per item at the input size of `inputs`
    /// (2 per multiply-accumulate), in billions.
    pub gflops: f64,
    pub inputs: &'static [TensorDecl],
    pub outputs: &'static [TensorDecl],
    /// The largest batch one request may carry (Triton's `max_batch_size`).
    pub max_batch_size: u32,
    pub source: &'static str,
}

const IMAGES_224: &[TensorDecl] = &[TensorDecl {
    name: "images",
    datatype: DataType::Fp32,
    shape: &[3, 224, 224],
}];
const IMAGES_640: &[TensorDecl] = &[TensorDecl {
    name: "images",
    datatype: DataType::Fp32,
    shape: &[3, 640, 640],
}];
const PROBS_1000: &[TensorDecl] = &[TensorDecl {
    name: "probs",
    datatype: DataType::Fp32,
    shape: &[1000],
}];
/// YOLOv8's detection head: 4 box coordinates and 80 class scores for
/// each of 8,400 anchors (80² + 40² + 20² at 640 px).
const YOLO_OUTPUT: &[TensorDecl] = &[TensorDecl {
    name: "output0",
    datatype: DataType::Fp32,
    shape: &[84, 8400],
}];
/// 128 token ids and their mask (the sequence length the figures assume).
const TOKENS_128: &[TensorDecl] = &[
    TensorDecl {
        name: "input_ids",
        datatype: DataType::Int64,
        shape: &[128],
    },
    TensorDecl {
        name: "attention_mask",
        datatype: DataType::Int64,
        shape: &[128],
    },
];

/// The networks the simulator serves over KServe v2.
pub const NETWORKS: &[Network] = &[
    Network {
        id: "resnet-50",
        kind: ModelKind::Vision,
        params_m: 25.6,
        gflops: 8.2,
        inputs: IMAGES_224,
        outputs: PROBS_1000,
        max_batch_size: 64,
        source: "torchvision ResNet50_Weights.IMAGENET1K_V1: 25,557,032 parameters, 4.09 GMACs at 224 x 224 (He et al. 2015 give 3.8-4.1 billion multiply-adds)",
    },
    Network {
        id: "yolov8s",
        kind: ModelKind::Vision,
        params_m: 11.2,
        gflops: 28.6,
        inputs: IMAGES_640,
        outputs: YOLO_OUTPUT,
        max_batch_size: 32,
        source: "Ultralytics YOLOv8 README, detection table (COCO, 640 px): 11.2M parameters, 28.6 GFLOPs (Ultralytics counts 2 FLOPs a MAC)",
    },
    Network {
        id: "yolov8m",
        kind: ModelKind::Vision,
        params_m: 25.9,
        gflops: 78.9,
        inputs: IMAGES_640,
        outputs: YOLO_OUTPUT,
        max_batch_size: 32,
        source: "Ultralytics YOLOv8 README, detection table (COCO, 640 px): 25.9M parameters, 78.9 GFLOPs",
    },
    Network {
        id: "yolov8l",
        kind: ModelKind::Vision,
        params_m: 43.7,
        gflops: 165.2,
        inputs: IMAGES_640,
        outputs: YOLO_OUTPUT,
        max_batch_size: 32,
        source: "Ultralytics YOLOv8 README, detection table (COCO, 640 px): 43.7M parameters, 165.2 GFLOPs",
    },
    Network {
        id: "vit-b-16",
        kind: ModelKind::Vision,
        params_m: 86.6,
        gflops: 35.1,
        inputs: IMAGES_224,
        outputs: PROBS_1000,
        max_batch_size: 64,
        source: "torchvision ViT_B_16_Weights.IMAGENET1K_V1: 86,567,656 parameters, 17.56 \"GFLOPS\" at 224 x 224, which (as for ResNet-50's 4.09 there, and DeiT-B's 17.6) count multiply-accumulates: 35.1 GFLOPs; 2 x 86.6M x 197 tokens = 34.1 checks it",
    },
    Network {
        id: "bert-base",
        kind: ModelKind::Encoder,
        params_m: 110.0,
        gflops: 22.4,
        inputs: TOKENS_128,
        outputs: &[TensorDecl {
            name: "last_hidden_state",
            datatype: DataType::Fp32,
            shape: &[128, 768],
        }],
        max_batch_size: 64,
        source: "Devlin et al. 2018 (BERT-base: 110M parameters, 12 layers of 768); at 128 tokens: 2 x 85M encoder parameters x 128 = 21.8 GFLOPs, and 0.6 of attention scores (the 23M of the token embeddings are looked up, not multiplied)",
    },
    Network {
        id: "bert-large",
        kind: ModelKind::Encoder,
        params_m: 340.0,
        gflops: 78.9,
        inputs: TOKENS_128,
        outputs: &[TensorDecl {
            name: "last_hidden_state",
            datatype: DataType::Fp32,
            shape: &[128, 1024],
        }],
        max_batch_size: 64,
        source: "Devlin et al. 2018 (BERT-large: 340M parameters, 24 layers of 1024); at 128 tokens: 2 x 302M encoder parameters x 128 = 77.3 GFLOPs, and 1.6 of attention scores",
    },
];

/// Looks a network up by its preset id.
pub fn network(id: &str) -> Option<&'static Network> {
    NETWORKS.iter().find(|n| n.id == id)
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
            assert!(
                g.fp4_tflops
                    .is_none_or(|f| g.fp8_tflops.is_some_and(|e| f > e))
            );
        }
        for m in MODELS {
            assert!(m.active_params_b <= m.params_b);
            assert_eq!(m.heads % m.kv_heads, 0, "{}", m.id);
        }
        assert_eq!(gpu("h100-sxm").unwrap().memory_gb, 80.0);
        assert!(model("llama-3.1-8b").is_some());
        for (i, n) in NETWORKS.iter().enumerate() {
            assert!(NETWORKS[i + 1..].iter().all(|o| o.id != n.id));
            assert!(
                model(n.id).is_none(),
                "{} is both an LLM and a network",
                n.id
            );
            assert!(n.params_m > 0.0 && n.gflops > 0.0 && n.max_batch_size > 0);
            assert!(n.kind.takes_tensors());
        }
    }
}
