//! The environment fingerprint collected at run time. Identity keys must
//! match for two results to be compared (GPU model and count, driver and
//! CUDA majors, client machine class); the rest are facts recorded and
//! shown (exact versions, CPU, OS, kernel).

use std::collections::BTreeMap;

use infer_bench_results::Environment;
use infer_bench_spec::plan::Plan;

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn cpu_model() -> Option<String> {
    read("/proc/cpuinfo")?
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

fn os_name() -> Option<String> {
    read("/etc/os-release")?
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
}

fn kernel() -> Option<String> {
    read("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string())
}

/// This machine's host name.
pub fn hostname() -> Option<String> {
    read("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Collects the fingerprint. GPUs come from NVML where present.
pub fn collect(
    _plan: &Plan,
    _handle: &tokio::runtime::Handle,
    gpus: &dyn infer_bench_telemetry::gpu::GpuSource,
) -> Environment {
    let mut identity = BTreeMap::new();
    let mut facts = BTreeMap::new();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    identity.insert(
        "client_class".into(),
        format!("{}-{}cpu", std::env::consts::ARCH, cores),
    );
    let inventory = infer_bench_telemetry::gpu::inventory();
    match &inventory {
        Some(inv) if !inv.gpus.is_empty() => {
            identity.insert("gpu_model".into(), inv.gpus[0].name.clone());
            identity.insert("gpu_count".into(), inv.gpus.len().to_string());
            if let Some(d) = &inv.driver_version {
                identity.insert(
                    "driver_major".into(),
                    d.split('.').next().unwrap_or(d).to_string(),
                );
                facts.insert("driver_version".into(), d.clone());
            }
            if let Some(c) = inv.cuda_version {
                identity.insert("cuda_major".into(), (c / 1000).to_string());
                facts.insert(
                    "cuda_version".into(),
                    format!("{}.{}", c / 1000, (c % 1000) / 10),
                );
            }
        }
        _ => {
            identity.insert("gpu_model".into(), "none".into());
            identity.insert("gpu_count".into(), "0".into());
        }
    }
    if let Some(c) = cpu_model() {
        facts.insert("cpu".into(), c);
    }
    facts.insert("cpus".into(), cores.to_string());
    if let Some(o) = os_name() {
        facts.insert("os".into(), o);
    }
    if let Some(k) = kernel() {
        facts.insert("kernel".into(), k);
    }
    if let Some(h) = hostname() {
        facts.insert("host".into(), h);
    }
    // Multi-GPU topology: PCIe links, NVLink state, which GPUs share a switch.
    if let Some(t) = gpus.open(None).ok().and_then(|s| s.topology()) {
        facts.extend(t.facts());
    }
    facts.insert("tool_version".into(), env!("CARGO_PKG_VERSION").into());
    Environment { identity, facts }
}
