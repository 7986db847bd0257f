//! Pre-flight checks before each point: what on the target GPUs or the
//! load generator's machine would make the point measure something else
//! than the server (another process on the GPU, a hot or throttled GPU,
//! clocks locked below their maximum, almost no free memory, a busy
//! client machine). Findings are recorded with the point and shown;
//! `run --strict` turns any into a failure (exit 3).

use std::time::Duration;

use super::host::{HostProbe, descends_from};
use infer_bench_results::Finding;
use infer_bench_spec::plan::PointConfig;
use infer_bench_spec::raw::GpuMode;
use infer_bench_spec::raw::TargetKind;
use infer_bench_telemetry::gpu::{GpuSource, throttle_names};

/// A GPU at or above this temperature before a point is named.
pub const HOT_C: u32 = 85;
/// Application clocks below this fraction of the maximum are named.
pub const CLOCK_FRACTION: f64 = 0.95;
/// Free GPU memory below this is named.
pub const MIN_FREE_BYTES: u64 = 1 << 30;
/// The client machine busier than this before a point is named.
pub const CLIENT_BUSY: f64 = 0.5;
/// How long the client machine's CPU is watched before a point.
pub const CPU_SAMPLE: Duration = Duration::from_millis(100);

fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

/// Runs every check for a point. `server_pid`: the launched server's
/// process, whose descendants are not "other" processes.
pub fn check(
    cfg: &PointConfig,
    gpu_mode: GpuMode,
    gpus: &dyn GpuSource,
    host: &dyn HostProbe,
    server_pid: Option<u32>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    // In virtual time nothing of this machine enters the numbers: a busy
    // client machine (the simulation itself, most often) changes nothing.
    if cfg
        .target
        .sim
        .as_ref()
        .is_some_and(|s| s.clock == infer_bench_spec::raw::SimClock::Virtual)
    {
        return out;
    }
    if let (Some(a), Some(b)) = (host.cpu_times(), {
        std::thread::sleep(CPU_SAMPLE);
        host.cpu_times()
    }) {
        if let Some(busy) = a.busy_until(&b).filter(|b| *b > CLIENT_BUSY) {
            out.push(Finding {
                check: "client_cpu".into(),
                gpu: None,
                message: format!(
                    "the load generator's machine was {:.0}% busy just before the point ({} cores): other work may slow the client and inflate its latencies",
                    busy * 100.0,
                    host.cores()
                ),
            });
        }
    }
    // A dcgm-exporter's GPUs may be on another machine: this machine's
    // processes and clocks say nothing of them.
    if cfg.target.kind == TargetKind::Sim
        || gpu_mode == GpuMode::Off
        || cfg.target.gpu_metrics_url.is_some()
    {
        return out;
    }
    let Ok(mut sampler) = gpus.open(cfg.target.gpu_ids.as_deref()) else {
        return out;
    };
    let devices = sampler.devices().to_vec();
    let readings = sampler.sample();
    for (info, r) in devices.iter().zip(&readings) {
        let g = info.index;
        let others: Vec<&infer_bench_telemetry::gpu::ProcessReading> = match server_pid {
            Some(root) => r
                .processes
                .iter()
                .filter(|p| !descends_from(host, p.pid, root))
                .collect(),
            // An external server is itself a process on the GPU: more than
            // one is worth naming.
            None if r.processes.len() > 1 => r.processes.iter().collect(),
            None => Vec::new(),
        };
        if !others.is_empty() {
            let list: Vec<String> = others
                .iter()
                .map(|p| {
                    format!(
                        "{} (pid {}{})",
                        p.name.as_deref().unwrap_or("?"),
                        p.pid,
                        p.memory_used_bytes
                            .map(|b| format!(", {:.1} GiB", gib(b)))
                            .unwrap_or_default()
                    )
                })
                .collect();
            out.push(Finding {
                check: "other_processes".into(),
                gpu: Some(g),
                message: format!(
                    "GPU {g} has {} compute process{} besides the server's: {}; it shares the GPU with what is measured",
                    others.len(),
                    if others.len() == 1 { "" } else { "es" },
                    list.join(", ")
                ),
            });
        }
        if let Some(t) = r.temperature_c.filter(|t| *t >= HOT_C) {
            out.push(Finding {
                check: "temperature".into(),
                gpu: Some(g),
                message: format!("GPU {g} is at {t} °C before the point (named from {HOT_C} °C): it may throttle under load"),
            });
        }
        if let Some(bits) = r.throttle_reasons {
            let active: Vec<&str> = throttle_names(bits)
                .into_iter()
                .filter(|n| !crate::insight::BENIGN_THROTTLE.contains(n))
                .collect();
            if !active.is_empty() {
                out.push(Finding {
                    check: "throttling".into(),
                    gpu: Some(g),
                    message: format!(
                        "GPU {g} is already throttled before the point ({})",
                        active.join(", ")
                    ),
                });
            }
        }
        if let (Some(app), Some(max)) = (r.sm_app_clock_mhz, r.sm_clock_max_mhz) {
            if (app as f64) < CLOCK_FRACTION * max as f64 {
                out.push(Finding {
                    check: "clocks".into(),
                    gpu: Some(g),
                    message: format!("GPU {g}'s application clock is set to {app} MHz, below its {max} MHz maximum (`nvidia-smi -rac` resets it)"),
                });
            }
        }
        if let (Some(total), Some(used)) = (info.memory_total_bytes, r.memory_used_bytes) {
            let free = total.saturating_sub(used);
            if free < MIN_FREE_BYTES {
                out.push(Finding {
                    check: "free_memory".into(),
                    gpu: Some(g),
                    message: format!(
                        "GPU {g} has {:.2} GiB free of {:.0} GiB before the point: a burst of requests may not fit",
                        gib(free),
                        gib(total)
                    ),
                });
            }
        }
    }
    out
}

/// Each GPU's memory used now, for "before the server started".
pub fn memory_now(
    cfg: &PointConfig,
    gpu_mode: GpuMode,
    gpus: &dyn GpuSource,
) -> std::collections::BTreeMap<u32, u64> {
    if cfg.target.kind == TargetKind::Sim || gpu_mode == GpuMode::Off {
        return Default::default();
    }
    let opened: Result<Box<dyn infer_bench_telemetry::gpu::GpuSampler>, _> =
        if cfg.target.gpu_metrics_url.is_some() {
            infer_bench_telemetry::session::dcgm_sampler(
                cfg,
                infer_bench_telemetry::session::Reach::Now,
            )
            .map(|s| Box::new(s) as Box<dyn infer_bench_telemetry::gpu::GpuSampler>)
        } else {
            gpus.open(cfg.target.gpu_ids.as_deref())
        };
    let Ok(mut s) = opened else {
        return Default::default();
    };
    let devices = s.devices().to_vec();
    devices
        .iter()
        .zip(s.sample())
        .filter_map(|(d, r)| Some((d.index, r.memory_used_bytes?)))
        .collect()
}
