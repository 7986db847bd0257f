//! GPU facts and sampling through NVML. The NVML library is loaded at run
//! time; on a machine without it every function here says "no GPU"
//! instead of failing.

use nvml_wrapper::Nvml;

/// One GPU's identity.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GpuInfo {
    pub index: u32,
    pub name: String,
    pub uuid: Option<String>,
    pub memory_total_bytes: Option<u64>,
}

/// The GPUs of this machine.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Inventory {
    pub driver_version: Option<String>,
    /// CUDA driver API version as NVML reports it (12040 = 12.4).
    pub cuda_version: Option<i32>,
    pub gpus: Vec<GpuInfo>,
}

/// Loads NVML, or says why it could not.
pub fn nvml() -> Result<Nvml, String> {
    Nvml::init().map_err(|e| format!("NVML is not available ({e})"))
}

/// The GPUs NVML sees; `None` when NVML cannot be loaded (no driver).
pub fn inventory() -> Option<Inventory> {
    let nvml = nvml().ok()?;
    let count = nvml.device_count().unwrap_or(0);
    let gpus = (0..count)
        .filter_map(|i| {
            let d = nvml.device_by_index(i).ok()?;
            Some(GpuInfo {
                index: i,
                name: d.name().unwrap_or_else(|_| "unknown".into()),
                uuid: d.uuid().ok(),
                memory_total_bytes: d.memory_info().ok().map(|m| m.total),
            })
        })
        .collect();
    Some(Inventory {
        driver_version: nvml.sys_driver_version().ok(),
        cuda_version: nvml.sys_cuda_driver_version().ok(),
        gpus,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_driver_means_no_gpu_not_a_failure() {
        // On machines without NVML this is None; with it, a list. Either
        // way it must not panic.
        let inv = inventory();
        if let Some(i) = inv {
            assert!(i.gpus.iter().all(|g| !g.name.is_empty()));
        }
    }
}
