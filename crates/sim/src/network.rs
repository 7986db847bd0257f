//! What one execution of a vision or encoder network takes on a simulated
//! GPU, as Triton runs it: one model instance, which executes one
//! request's batch at a time (requests wait for it in arrival order, their
//! queue time). Pure arithmetic on the catalogue's figures: no I/O, no
//! clock. The server that paces requests by it is `server/tensor.rs`.
//!
//! One execution of `b` items, each phase as Triton's statistics name it:
//!
//! - `compute_input`: the request's input bytes over PCIe,
//!   `input_bytes / PCIE_GBS` (25 GB/s: what a Gen4 x16 link moves in
//!   practice, of its 32 GB/s);
//! - `compute_infer`: `max(b x GFLOPs / (peak x efficiency), weight bytes /
//!   (bandwidth x bandwidth_efficiency)) + overhead` — the network's work
//!   at the GPU's dense tensor rate for the precision, or the weights read
//!   once, whichever is longer, and a fixed 0.5 ms per execution (kernel
//!   launches, framework, the copy-in and -out synchronisation);
//! - `compute_output`: the output bytes back over PCIe.
//!
//! All three times the target's `slowdown` (and the run's noise factor,
//! applied by the server). The peak rate by precision: FP32 runs on TF32
//! tensor cores (half the BF16 rate on every NVIDIA part since Ampere, and
//! on AMD's CDNA 3), FP16/BF16 at the BF16 rate, INT8 at the INT8 rate,
//! FP8 and FP4 at theirs where the chip has them (else the next wider).
//! The efficiencies (the target's `compute_efficiency` overrides them):
//! FP32 0.2, FP16/BF16 0.6, 8 bits and fewer 0.45 — FP32 convolutions in
//! TF32 reach far less of their peak than FP16 ones (the elementwise and
//! normalisation layers stay FP32 and memory-bound), which is what the
//! published ResNet-50 figures show (see the test
//! `resnet50_on_an_a100_is_near_the_published_figures`).

use infer_bench_spec::DType;
use infer_bench_spec::catalog::{Gpu, Network};
use infer_bench_spec::model::SimTarget;

/// Host-to-device and device-to-host bandwidth, GB/s (1e9 bytes/s).
pub const PCIE_GBS: f64 = 25.0;
/// Fixed time of one execution, seconds.
pub const EXECUTION_OVERHEAD_S: f64 = 0.5e-3;
/// Achieved fraction of the TF32 peak by FP32 networks.
pub const EFFICIENCY_FP32: f64 = 0.2;
/// Achieved fraction of the FP16/BF16 peak.
pub const EFFICIENCY_16BIT: f64 = 0.6;
/// Achieved fraction of the INT8/FP8/FP4 peak.
pub const EFFICIENCY_8BIT: f64 = 0.45;
/// Achieved fraction of memory bandwidth reading the weights.
pub const BANDWIDTH_EFFICIENCY: f64 = 0.7;
/// The precision of a network served with none named: FP32, as an ONNX or
/// TorchScript export is.
pub const DEFAULT_DTYPE: DType = DType::Fp32;

/// The dense tensor rate of `gpu` at `dtype`, FLOP/s.
pub fn peak_flops(gpu: &Gpu, dtype: DType) -> f64 {
    let tflops = match dtype {
        DType::Fp32 => gpu.bf16_tflops / 2.0,
        DType::Bf16 | DType::Fp16 => gpu.bf16_tflops,
        DType::Int8 | DType::Int4 => gpu.int8_tops,
        DType::Fp8 => gpu.fp8_tflops.unwrap_or(gpu.bf16_tflops),
        DType::Fp4 => gpu.fp4_tflops.or(gpu.fp8_tflops).unwrap_or(gpu.bf16_tflops),
    };
    tflops * 1e12
}

/// The achieved fraction of [`peak_flops`] at `dtype`.
pub fn default_efficiency(dtype: DType) -> f64 {
    match dtype {
        DType::Fp32 => EFFICIENCY_FP32,
        DType::Bf16 | DType::Fp16 => EFFICIENCY_16BIT,
        DType::Fp8 | DType::Int8 | DType::Int4 | DType::Fp4 => EFFICIENCY_8BIT,
    }
}

/// One execution's phases, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Execution {
    pub input_s: f64,
    pub infer_s: f64,
    pub output_s: f64,
}

impl Execution {
    pub fn total_s(&self) -> f64 {
        self.input_s + self.infer_s + self.output_s
    }

    /// Every phase times `factor` (the run's noise).
    pub fn scaled(&self, factor: f64) -> Execution {
        Execution {
            input_s: self.input_s * factor,
            infer_s: self.infer_s * factor,
            output_s: self.output_s * factor,
        }
    }
}

/// A network on one GPU at one precision: the constants of its executions.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkCost {
    /// FLOPs per item.
    pub flops: f64,
    pub weight_bytes: f64,
    /// FLOP/s achieved.
    pub flops_per_s: f64,
    /// Bytes/s achieved reading the weights.
    pub bytes_per_s: f64,
    pub pcie_bytes_per_s: f64,
    pub overhead_s: f64,
    pub slowdown: f64,
}

impl NetworkCost {
    /// `net` on `gpu` at `dtype`, with the target's overrides
    /// (`compute_efficiency`, `bandwidth_efficiency`, `step_overhead` as the
    /// per-execution overhead, `slowdown`).
    pub fn new(net: &Network, gpu: &Gpu, dtype: DType, sim: Option<&SimTarget>) -> NetworkCost {
        let efficiency = sim
            .and_then(|s| s.compute_efficiency)
            .unwrap_or_else(|| default_efficiency(dtype));
        let bandwidth = sim
            .and_then(|s| s.bandwidth_efficiency)
            .unwrap_or(BANDWIDTH_EFFICIENCY);
        NetworkCost {
            flops: net.gflops * 1e9,
            weight_bytes: net.params_m * 1e6 * dtype.bytes(),
            flops_per_s: peak_flops(gpu, dtype) * efficiency,
            bytes_per_s: gpu.bandwidth_gbs * 1e9 * bandwidth,
            pcie_bytes_per_s: PCIE_GBS * 1e9,
            overhead_s: sim
                .and_then(|s| s.step_overhead)
                .map_or(EXECUTION_OVERHEAD_S, |d| d.as_secs_f64()),
            slowdown: sim.map_or(1.0, |s| s.slowdown),
        }
    }

    /// One execution of `batch` items whose tensors carry `input_bytes`
    /// in and `output_bytes` out.
    pub fn execution(&self, batch: u32, input_bytes: u64, output_bytes: u64) -> Execution {
        let work = f64::from(batch) * self.flops / self.flops_per_s;
        let weights = self.weight_bytes / self.bytes_per_s;
        Execution {
            input_s: input_bytes as f64 / self.pcie_bytes_per_s * self.slowdown,
            infer_s: (work.max(weights) + self.overhead_s) * self.slowdown,
            output_s: output_bytes as f64 / self.pcie_bytes_per_s * self.slowdown,
        }
    }

    /// The bytes of `batch` items of `net`'s inputs and outputs.
    pub fn bytes_of(net: &Network, batch: u32) -> (u64, u64) {
        let sum = |ts: &[infer_bench_spec::catalog::TensorDecl]| -> u64 {
            ts.iter()
                .map(|t| t.shape.iter().product::<u64>() * t.datatype.size().unwrap_or(1) as u64)
                .sum::<u64>()
                * u64::from(batch)
        };
        (sum(net.inputs), sum(net.outputs))
    }

    /// Items per second of one instance kept busy with batches of `batch`.
    pub fn items_per_s(&self, net: &Network, batch: u32) -> f64 {
        let (i, o) = Self::bytes_of(net, batch);
        f64::from(batch) / self.execution(batch, i, o).total_s()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_spec::catalog;

    fn cost(net: &str, gpu: &str, dtype: DType) -> (NetworkCost, &'static Network) {
        let n = catalog::network(net).unwrap();
        (
            NetworkCost::new(n, catalog::gpu(gpu).unwrap(), dtype, None),
            n,
        )
    }

    #[test]
    fn resnet50_on_an_a100_is_near_the_published_figures() {
        // NVIDIA's Deep Learning Examples (ResNet-50 v1.5, PyTorch, DGX
        // A100 80GB, inference in TF32) and Triton's perf_analyzer figures
        // for its ONNX/TF32 model give roughly 2,000-3,000 images/s at
        // batch 1-8; batch 1 is the fixed overhead's (0.5 ms) more than
        // the network's. The model: 2,860 images/s at batch 8, 1,270 at 1.
        let (c, n) = cost("resnet-50", "a100-80gb", DType::Fp32);
        let b8 = c.items_per_s(n, 8);
        assert!((2_000.0..3_000.0).contains(&b8), "{b8}");
        let b1 = c.items_per_s(n, 1);
        assert!((1_000.0..2_000.0).contains(&b1), "{b1}");
        // TensorRT at large batch: NVIDIA's inference performance pages
        // (and MLPerf Inference offline results, ~30-38k a GPU for INT8)
        // give 20k+ images/s in FP16/INT8. They measure the GPU's work,
        // not the copy of FP32 images over PCIe (trtexec --noDataTransfers,
        // MLPerf's preprocessed INT8 inputs): compared without it, the
        // model gives 19.4k in FP16 and 27.0k in INT8 at batch 64 (Triton's
        // max_batch_size here).
        let compute_only = |c: &NetworkCost, b: u32| f64::from(b) / c.execution(b, 0, 0).total_s();
        let (fp16, _) = cost("resnet-50", "a100-80gb", DType::Fp16);
        let (int8, _) = cost("resnet-50", "a100-80gb", DType::Int8);
        let f = compute_only(&fp16, 64);
        let i = compute_only(&int8, 64);
        assert!((15_000.0..30_000.0).contains(&f), "{f}");
        assert!((20_000.0..40_000.0).contains(&i), "{i}");
        // Served with its FP32 inputs over PCIe, the copy takes its share.
        let served = int8.items_per_s(n, 64);
        assert!(served < i && served > 10_000.0, "{served}");
    }

    #[test]
    fn cost_grows_with_batch_and_throughput_with_it() {
        for id in ["resnet-50", "yolov8m", "vit-b-16", "bert-base"] {
            let (c, n) = cost(id, "h100-sxm", DType::Fp16);
            let mut last = (0.0, 0.0);
            for b in [1, 2, 8, 32] {
                let (i, o) = NetworkCost::bytes_of(n, b);
                let e = c.execution(b, i, o);
                let per_s = c.items_per_s(n, b);
                assert!(e.total_s() > last.0 && per_s > last.1, "{id} batch {b}");
                assert!(e.input_s > 0.0 && e.output_s > 0.0 && e.infer_s > c.overhead_s);
                last = (e.total_s(), per_s);
            }
        }
    }

    #[test]
    fn faster_gpus_and_narrower_numbers_are_faster() {
        let (l4, n) = cost("yolov8l", "l4", DType::Fp16);
        let (h100, _) = cost("yolov8l", "h100-sxm", DType::Fp16);
        let (h100_32, _) = cost("yolov8l", "h100-sxm", DType::Fp32);
        assert!(l4.items_per_s(n, 8) < h100.items_per_s(n, 8));
        assert!(h100_32.items_per_s(n, 8) < h100.items_per_s(n, 8));
        // TF32 is half the BF16 rate.
        let g = catalog::gpu("a100-80gb").unwrap();
        assert_eq!(peak_flops(g, DType::Fp32), 156e12);
    }
}
