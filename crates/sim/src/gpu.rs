//! The simulated GPUs' modelled telemetry: how busy the roofline says each
//! GPU was, and how much memory the model says it holds, written under
//! dcgm-exporter's metric names so the same sampler reads a simulator as a
//! GPU node. Modelled, not measured: every figure comes from the steps the
//! engines ran ([`Step::gpu_s`], [`Step::compute_s`], [`Step::memory_s`],
//! [`Step::duration`])
//! and from [`PerfModel`]'s memory figures. Pure: the drivers give it the
//! times (real or virtual) at which steps start and end.
//!
//! Activity is averaged, as dcgm-exporter's profiling gauges are, over a
//! trailing window of the driver's clock ending at the scrape: [`WINDOW_S`]
//! for the real-time server, which cannot know how often it is read; the
//! interval between reads for a virtual-time run, which reads at known
//! instants, so its readings tile the run's time. A step counts for its
//! overlap with the window; a step under way counts up to the scrape. Over
//! a step of length `d`, the GPU is "SM active" `gpu_s / d` of it (all but
//! the host's overhead), tensor-active `compute_s / d` and DRAM-active
//! `memory_s / d` (each at most 1). A replica's GPUs run
//! its tensor-parallel shards in step, so they show the same activity; a
//! pipeline's micro-batch engines share the replica's stages, each stage
//! holding one micro-batch at a time, so the replica's activity is the sum
//! of its engines' over the number of stages.

use std::collections::VecDeque;

use super::engine::{EngineStats, Step};
use super::perf::{PerfModel, link_is_pcie};

/// How every HELP line of the modelled series begins, so that a reader of
/// the text (the simulator's own `/metrics` named as a `gpu_metrics_url`)
/// can tell modelled figures from measured ones.
pub const MODELLED_HELP: &str = "Modelled by infer-bench-sim, not measured";

/// The trailing window the real-time server averages activity over, seconds.
pub const WINDOW_S: f64 = 1.0;

const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = 1024.0 * MIB;

/// One step as the window sees it.
#[derive(Debug, Clone, Copy)]
struct Span {
    start_s: f64,
    end_s: f64,
    /// Fractions of the step kernels ran, and the tensor pipes and DRAM
    /// were busy.
    sm: f64,
    tensor: f64,
    dram: f64,
    /// Bytes each GPU sent over its link in the step.
    link_bytes: f64,
}

/// The steps of each engine of a deployment in the trailing window.
#[derive(Debug, Clone)]
pub struct GpuModel {
    spans: Vec<VecDeque<Span>>,
    /// The trailing window activity is averaged over, seconds.
    window_s: f64,
    /// Engines per replica (pipeline stages).
    pipeline: usize,
    /// GPUs per replica (tensor parallel × pipeline stages).
    gpus_per_replica: u32,
    name: String,
    /// Whether the GPUs talk over PCIe rather than NVLink.
    pcie: bool,
    memory_bytes: f64,
    weight_bytes: f64,
    reserve_bytes: f64,
    kv_bytes_per_token: f64,
}

/// A metric family: name, type, HELP text and how a reading gives its value.
type Family = (
    &'static str,
    &'static str,
    &'static str,
    fn(&GpuReading) -> f64,
);

/// One simulated GPU's modelled readings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuReading {
    /// Fraction of the window kernels ran (steps less their host
    /// overhead), 0..=1.
    pub sm_active: f64,
    /// Roofline compute time over the window, 0..=1.
    pub tensor_active: f64,
    /// Roofline memory-traffic time over the window, 0..=1.
    pub dram_active: f64,
    /// Bytes a GPU sent to its tensor-parallel peers (all-reduces) and the
    /// next pipeline stage, per second of the window; it receives as many.
    pub link_tx_bytes_per_s: f64,
    /// Weights, KV cache in use and reserve on this GPU, MiB.
    pub fb_used_mib: f64,
    /// The GPU's memory less `fb_used_mib`, MiB.
    pub fb_free_mib: f64,
}

impl GpuModel {
    /// The GPUs of `engines` engines built on `perf` (`replicas ×
    /// pipeline` of them, as the cluster has), their activity averaged
    /// over a trailing `window_s` seconds.
    pub fn new(perf: &PerfModel, engines: usize, window_s: f64) -> GpuModel {
        let pipeline = perf.pipeline().max(1) as usize;
        GpuModel {
            spans: vec![VecDeque::new(); engines.max(1)],
            window_s: if window_s > 0.0 { window_s } else { WINDOW_S },
            pipeline,
            gpus_per_replica: perf.gpus() * perf.pipeline().max(1),
            name: perf.gpu().name.to_string(),
            pcie: link_is_pcie(perf.gpu()),
            memory_bytes: perf.gpu().memory_gb * GIB,
            weight_bytes: perf.weight_bytes(),
            reserve_bytes: perf.reserve_bytes(),
            kv_bytes_per_token: perf.kv_bytes_per_token(),
        }
    }

    /// Engine `engine` runs `step` from `start_s` for `duration_s` seconds
    /// of the driver's clock (the step's modelled duration times the run's
    /// speed factor). Steps that ended two windows before it are
    /// forgotten, so an unread model holds a bounded number of them.
    pub fn record(&mut self, engine: usize, start_s: f64, duration_s: f64, step: &Step) {
        let Some(spans) = self.spans.get_mut(engine) else {
            return;
        };
        let stale = start_s - 2.0 * self.window_s;
        while spans.front().is_some_and(|s| s.end_s <= stale) {
            spans.pop_front();
        }
        let fraction = |t: f64| {
            if step.duration > 0.0 {
                (t / step.duration).clamp(0.0, 1.0)
            } else {
                0.0
            }
        };
        spans.push_back(Span {
            start_s,
            end_s: start_s + duration_s.max(0.0),
            sm: fraction(step.gpu_s),
            tensor: fraction(step.compute_s),
            dram: fraction(step.memory_s),
            link_bytes: step.link_bytes.max(0.0),
        });
    }

    /// Every GPU's readings at `now_s`, replica by replica; `engines` holds
    /// each engine's counters (for the KV cache in use). Forgets the steps
    /// that ended before the window.
    pub fn readings(&mut self, now_s: f64, engines: &[EngineStats]) -> Vec<GpuReading> {
        let from = now_s - self.window_s;
        for spans in &mut self.spans {
            while spans.front().is_some_and(|s| s.end_s <= from) {
                spans.pop_front();
            }
        }
        let replicas = self.spans.len().div_ceil(self.pipeline);
        let mut out = Vec::new();
        for r in 0..replicas {
            let (mut busy, mut tensor, mut dram, mut link, mut kv_tokens) =
                (0.0, 0.0, 0.0, 0.0, 0.0);
            for e in r * self.pipeline..((r + 1) * self.pipeline).min(self.spans.len()) {
                for s in &self.spans[e] {
                    let overlap = (s.end_s.min(now_s) - s.start_s.max(from)).max(0.0);
                    busy += overlap * s.sm;
                    tensor += overlap * s.tensor;
                    dram += overlap * s.dram;
                    // A step's bytes spread evenly over its length.
                    let length = s.end_s - s.start_s;
                    if length > 0.0 {
                        link += s.link_bytes * overlap / length;
                    }
                }
                if let Some(st) = engines.get(e) {
                    kv_tokens += st.kv_usage * st.kv_capacity_tokens as f64;
                }
            }
            let per = self.window_s * self.pipeline as f64;
            let gpus = f64::from(self.gpus_per_replica.max(1));
            let used =
                (self.weight_bytes + self.reserve_bytes + kv_tokens * self.kv_bytes_per_token)
                    / gpus;
            let used_mib = (used / MIB).round();
            let total_mib = (self.memory_bytes / MIB).round();
            let reading = GpuReading {
                sm_active: (busy / per).clamp(0.0, 1.0),
                tensor_active: (tensor / per).clamp(0.0, 1.0),
                dram_active: (dram / per).clamp(0.0, 1.0),
                link_tx_bytes_per_s: link / per,
                fb_used_mib: used_mib,
                fb_free_mib: (total_mib - used_mib).max(0.0),
            };
            out.extend((0..self.gpus_per_replica).map(|_| reading));
        }
        out
    }

    /// The readings in dcgm-exporter's names, one series per GPU, marked
    /// modelled in each HELP line.
    pub fn exposition(&mut self, now_s: f64, engines: &[EngineStats]) -> String {
        let readings = self.readings(now_s, engines);
        let name = self.name.replace('"', "");
        let (tx, rx) = if self.pcie {
            ("DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES")
        } else {
            (
                "DCGM_FI_PROF_NVLINK_TX_BYTES",
                "DCGM_FI_PROF_NVLINK_RX_BYTES",
            )
        };
        let families: [Family; 9] = [
            (
                "DCGM_FI_PROF_SM_ACTIVE",
                "gauge",
                "fraction of the window kernels ran (engine steps less their host overhead).",
                |r| r.sm_active,
            ),
            (
                "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
                "gauge",
                "roofline compute time (GEMMs, attention) over the window.",
                |r| r.tensor_active,
            ),
            (
                "DCGM_FI_PROF_DRAM_ACTIVE",
                "gauge",
                "roofline memory time (weights, KV cache) over the window.",
                |r| r.dram_active,
            ),
            (
                "DCGM_FI_DEV_GPU_UTIL",
                "gauge",
                "GPU utilization (in %), SM active x 100.",
                |r| (r.sm_active * 100.0).round(),
            ),
            (
                "DCGM_FI_DEV_MEM_COPY_UTIL",
                "gauge",
                "memory utilization (in %), DRAM active x 100.",
                |r| (r.dram_active * 100.0).round(),
            ),
            (
                tx,
                "gauge",
                "bytes per second sent to the other GPUs (tensor-parallel all-reduces, pipeline sends).",
                |r| r.link_tx_bytes_per_s.round(),
            ),
            (
                rx,
                "gauge",
                "bytes per second received from the other GPUs (as many as sent).",
                |r| r.link_tx_bytes_per_s.round(),
            ),
            (
                "DCGM_FI_DEV_FB_USED",
                "gauge",
                "framebuffer memory used (in MiB), weights + KV cache in use + reserve.",
                |r| r.fb_used_mib,
            ),
            (
                "DCGM_FI_DEV_FB_FREE",
                "gauge",
                "framebuffer memory free (in MiB).",
                |r| r.fb_free_mib,
            ),
        ];
        let mut text = String::new();
        for (metric, kind, help, value) in families {
            text.push_str(&format!(
                "# HELP {metric} {MODELLED_HELP}: {help}\n# TYPE {metric} {kind}\n"
            ));
            for (i, r) in readings.iter().enumerate() {
                text.push_str(&format!(
                    "{metric}{{gpu=\"{i}\",UUID=\"SIM-{i:08}\",device=\"nvidia{i}\",modelName=\"{name}\",Hostname=\"infer-bench-sim\"}} {}\n",
                    value(r)
                ));
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::tests::{arch, target};
    use infer_bench_spec::model::DType;

    fn model() -> (PerfModel, GpuModel) {
        let t = target("h100-sxm", 1);
        let perf = PerfModel::new(&t, &arch("llama-3.1-8b"), DType::Bf16).unwrap();
        let gpus = GpuModel::new(&perf, 1, WINDOW_S);
        (perf, gpus)
    }

    fn step(duration: f64, compute_s: f64, memory_s: f64) -> Step {
        Step {
            duration,
            gpu_s: duration,
            compute_s,
            memory_s,
            communication_s: 0.0,
            link_bytes: 0.0,
            tokens: vec![],
            finished: vec![],
            prefill_tokens: 0,
            decode_tokens: 0,
            batch_size: 1,
        }
    }

    #[test]
    fn a_known_step_gives_its_activity_and_memory() {
        let (perf, mut g) = model();
        // 0.5 s of a step with 0.4 s of compute and 0.1 s of memory time,
        // then idle: over the last second, half busy.
        g.record(0, 0.0, 0.5, &step(0.5, 0.4, 0.1));
        let idle = EngineStats::default();
        let r = g.readings(1.0, &[idle]);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].sm_active, 0.5);
        assert!((r[0].tensor_active - 0.4).abs() < 1e-12, "{r:?}");
        assert!((r[0].dram_active - 0.1).abs() < 1e-12, "{r:?}");
        let reserve_weights = ((perf.weight_bytes() + perf.reserve_bytes()) / MIB).round();
        assert_eq!(r[0].fb_used_mib, reserve_weights);
        assert_eq!(
            r[0].fb_used_mib + r[0].fb_free_mib,
            (80.0 * 1024.0f64).round()
        );
        // Half the KV cache in use adds its bytes.
        let half = EngineStats {
            kv_usage: 0.5,
            kv_capacity_tokens: 1000,
            ..EngineStats::default()
        };
        let r = g.readings(1.0, &[half]);
        let want =
            ((perf.weight_bytes() + perf.reserve_bytes() + 500.0 * perf.kv_bytes_per_token())
                / MIB)
                .round();
        assert_eq!(r[0].fb_used_mib, want);
        // A step under way counts up to now; steps out of the window are gone.
        g.record(0, 1.5, 1.0, &step(1.0, 1.0, 0.0));
        let r = g.readings(2.0, &[idle]);
        assert_eq!(r[0].sm_active, 0.5);
        assert_eq!(r[0].tensor_active, 0.5);
        assert_eq!(r[0].dram_active, 0.0);
        assert_eq!(g.spans[0].len(), 1);
        // The host's overhead of a step leaves the GPU idle.
        let (_, mut g) = model();
        let host_bound = Step {
            gpu_s: 0.25,
            ..step(1.0, 0.2, 0.1)
        };
        g.record(0, 0.0, 1.0, &host_bound);
        let r = g.readings(1.0, &[idle]);
        assert_eq!(r[0].sm_active, 0.25);
        assert!((r[0].tensor_active - 0.2).abs() < 1e-12, "{r:?}");
    }

    #[test]
    fn an_unread_model_keeps_only_recent_steps() {
        let (_, mut g) = model();
        // An hour of 10 ms steps that nobody reads (telemetry off).
        for i in 0..360_000 {
            g.record(0, f64::from(i) * 0.01, 0.01, &step(0.01, 0.005, 0.005));
        }
        assert!(g.spans[0].len() <= 201, "{} steps kept", g.spans[0].len());
        // What a reading needs is still there.
        let r = g.readings(3600.0, &[EngineStats::default()]);
        assert_eq!(r[0].sm_active, 1.0);
    }

    #[test]
    fn prefill_moves_tensor_activity_and_decode_dram_activity() {
        // One request alone on the engine, every step recorded; the reading
        // as it ends.
        let alone = |prompt: u32, output: u32| {
            let (perf, mut g) = model();
            let mut e = crate::engine::Engine::new(perf, &target("h100-sxm", 1));
            e.submit(1, prompt, output);
            let mut t = 0.0;
            while let Some(s) = e.step() {
                g.record(0, t, s.duration, &s);
                t += s.duration;
            }
            g.readings(t, &[e.stats()])[0]
        };
        let prefill = alone(8000, 1);
        let decode = alone(10, 400);
        assert!(prefill.tensor_active > prefill.dram_active, "{prefill:?}");
        assert!(decode.dram_active > decode.tensor_active, "{decode:?}");
        assert!(prefill.tensor_active > decode.tensor_active);
        assert!(decode.dram_active > prefill.dram_active);
    }

    #[test]
    fn exposition_has_one_series_per_gpu_under_dcgm_names() {
        let t = target("h100-sxm", 2);
        let perf = PerfModel::new(&t, &arch("llama-3.1-8b"), DType::Bf16).unwrap();
        let mut g = GpuModel::new(&perf, 1, WINDOW_S);
        g.record(0, 0.0, 1.0, &step(1.0, 0.25, 0.75));
        let text = g.exposition(1.0, &[EngineStats::default()]);
        assert!(text.contains(
            "DCGM_FI_PROF_SM_ACTIVE{gpu=\"1\",UUID=\"SIM-00000001\",device=\"nvidia1\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"infer-bench-sim\"} 1\n"
        ), "{text}");
        assert!(
            text.contains("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=\"0\""),
            "{text}"
        );
        assert!(text.contains("} 0.75\n"), "{text}");
        assert!(text.contains("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\""), "{text}");
        assert_eq!(text.matches("Modelled by infer-bench-sim").count(), 9);
        assert!(
            text.contains("DCGM_FI_DEV_MEM_COPY_UTIL{gpu=\"1\""),
            "{text}"
        );
    }

    #[test]
    fn tensor_parallel_steps_show_their_all_reduces_as_link_traffic() {
        // Issue 40: communication must show in the modelled activity. The
        // decode steps of one request over 4 NVLink GPUs send bytes on
        // NVLink; over 2 PCIe GPUs on PCIe; on one GPU nothing.
        let traffic = |gpu: &str, gpus: u32| {
            let t = target(gpu, gpus);
            let perf = PerfModel::new(&t, &arch("llama-3.1-8b"), DType::Bf16).unwrap();
            let mut g = GpuModel::new(&perf, 1, 1000.0);
            let mut e = crate::engine::Engine::new(perf, &t);
            e.submit(1, 100, 50);
            let (mut now, mut comm, mut bytes) = (0.0, 0.0, 0.0);
            while let Some(s) = e.step() {
                g.record(0, now, s.duration, &s);
                now += s.duration;
                comm += s.communication_s;
                bytes += s.link_bytes;
            }
            let r = g.readings(now, &[e.stats()])[0];
            // Over a window longer than the run: the run's bytes per second.
            let want = bytes / 1000.0;
            assert!(
                (r.link_tx_bytes_per_s - want).abs() <= 1e-9 * want.max(1.0),
                "{r:?} {want}"
            );
            (comm, r.link_tx_bytes_per_s, g.exposition(now, &[e.stats()]))
        };
        let (comm, rate, text) = traffic("h100-sxm", 4);
        assert!(comm > 0.0 && rate > 0.0, "{comm} {rate}");
        assert!(
            text.contains("DCGM_FI_PROF_NVLINK_TX_BYTES{gpu=\"3\""),
            "{text}"
        );
        assert!(
            text.contains("DCGM_FI_PROF_NVLINK_RX_BYTES{gpu=\"0\""),
            "{text}"
        );
        let (_, rate, text) = traffic("l40s", 2);
        assert!(rate > 0.0);
        assert!(
            text.contains("DCGM_FI_PROF_PCIE_TX_BYTES{gpu=\"1\""),
            "{text}"
        );
        assert!(!text.contains("NVLINK"), "{text}");
        let (comm, rate, _) = traffic("h100-sxm", 1);
        assert_eq!((comm, rate), (0.0, 0.0));
    }
}
