//! GPUs: their inventory and their sampling, behind two traits. A
//! `GpuSource` opens a `GpuSampler` over the GPUs a target names (or says
//! why there is none); a sampler reads every one of its GPUs at once.
//! Three sources: NVML (the library is loaded at run time, so the binary
//! runs on machines without a driver and simply finds no GPU there), a
//! null one (no GPU, with the reason: a simulated target, sampling off),
//! and a scripted one that plays back deterministic readings for tests.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;

use crate::error::{Error, GpuList};
use infer_bench_results::telemetry::GpuDataSource;

/// One GPU's identity.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GpuInfo {
    pub index: u32,
    pub name: String,
    pub uuid: Option<String>,
    pub memory_total_bytes: Option<u64>,
    /// The host the GPU is in, where the source says (dcgm-exporter's
    /// `Hostname` label); `None` for this machine's GPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
}

/// The GPUs of this machine.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Inventory {
    pub driver_version: Option<String>,
    /// CUDA driver API version as NVML reports it (12040 = 12.4).
    pub cuda_version: Option<i32>,
    pub gpus: Vec<GpuInfo>,
}

/// One reading of one GPU; `None` where the device cannot say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuReading {
    /// Percent of the last sample period in which a kernel ran.
    pub utilization_pct: Option<f64>,
    /// Percent of the last sample period in which device memory was read or written.
    pub memory_bandwidth_utilization_pct: Option<f64>,
    pub memory_used_bytes: Option<u64>,
    pub power_w: Option<f64>,
    /// The device's energy counter since the driver loaded, millijoules.
    pub energy_mj: Option<u64>,
    pub sm_clock_mhz: Option<u32>,
    pub memory_clock_mhz: Option<u32>,
    pub temperature_c: Option<u32>,
    /// NVML clock-event (throttle) reason bits.
    pub throttle_reasons: Option<u64>,
    pub pcie_rx_bytes_per_s: Option<f64>,
    pub pcie_tx_bytes_per_s: Option<f64>,
    /// NVLink data throughput, from NVML's cumulative counters between
    /// this reading and the previous one.
    pub nvlink_rx_bytes_per_s: Option<f64>,
    pub nvlink_tx_bytes_per_s: Option<f64>,
    /// The SM clock's maximum, and the application clock it is set to.
    pub sm_clock_max_mhz: Option<u32>,
    pub sm_app_clock_mhz: Option<u32>,
    /// DCGM's profiling activities, ratios 0 to 1 (NVML has none of them).
    pub sm_active: Option<f64>,
    pub sm_occupancy: Option<f64>,
    pub tensor_active: Option<f64>,
    pub dram_active: Option<f64>,
    /// Processes with a compute context on the device.
    pub processes: Vec<ProcessReading>,
}

/// A compute process NVML lists on a GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessReading {
    pub pid: u32,
    pub name: Option<String>,
    pub memory_used_bytes: Option<u64>,
}

/// Reads a fixed set of GPUs.
pub trait GpuSampler: Send {
    /// The GPUs read, in the order of every reading.
    fn devices(&self) -> &[GpuInfo];
    /// One reading per device.
    fn sample(&mut self) -> Vec<GpuReading>;
    /// How the devices are connected, where the source can tell.
    fn topology(&self) -> Option<Topology> {
        None
    }
    /// One reading per device, or why this sample failed (a scrape that
    /// failed; NVML reads never fail as a whole).
    fn try_sample(&mut self) -> Result<Vec<GpuReading>, Error> {
        Ok(self.sample())
    }
    /// Where the readings come from.
    fn source(&self) -> GpuDataSource {
        GpuDataSource::Nvml
    }
    /// The endpoint read, for sources that scrape one.
    fn url(&self) -> Option<&str> {
        None
    }
    /// Something to say about these readings in the results.
    fn note(&self) -> Option<String> {
        None
    }
}

/// How a set of GPUs is connected.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Topology {
    pub devices: Vec<DeviceLinks>,
    /// For each pair (a < b): the closest common ancestor, in NVML's
    /// terms: "nvlink", "internal", "pcie switch", "pcie switches",
    /// "host bridge", "numa node", "system".
    pub pairs: Vec<(u32, u32, String)>,
}

/// One GPU's links.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceLinks {
    pub index: u32,
    pub pcie_gen: Option<u32>,
    pub pcie_width: Option<u32>,
    pub pcie_gen_max: Option<u32>,
    pub pcie_width_max: Option<u32>,
    /// NVLink links that are active, of those the device has.
    pub nvlink_active: Option<u32>,
    pub nvlink_total: Option<u32>,
}

impl Topology {
    /// As environment facts: `gpu<i>.pcie`, `gpu<i>.nvlink` and
    /// `gpu_topology` (each pair's connection).
    pub fn facts(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for d in &self.devices {
            if let (Some(g), Some(w)) = (d.pcie_gen, d.pcie_width) {
                let max = match (d.pcie_gen_max, d.pcie_width_max) {
                    (Some(gm), Some(wm)) if (gm, wm) != (g, w) => format!(" (max gen{gm} x{wm})"),
                    _ => String::new(),
                };
                out.insert(format!("gpu{}.pcie", d.index), format!("gen{g} x{w}{max}"));
            }
            if let (Some(a), Some(t)) = (d.nvlink_active, d.nvlink_total) {
                if t > 0 {
                    out.insert(
                        format!("gpu{}.nvlink", d.index),
                        format!("{a} of {t} links active"),
                    );
                }
            }
        }
        if !self.pairs.is_empty() {
            let pairs: Vec<String> = self
                .pairs
                .iter()
                .map(|(a, b, how)| format!("{a}-{b} {how}"))
                .collect();
            out.insert("gpu_topology".into(), pairs.join(", "));
        }
        out
    }
}

/// Opens samplers over the GPUs a target names.
pub trait GpuSource: Send + Sync {
    /// A sampler over the GPUs `ids` names (indices or UUIDs; all when
    /// `None`), or why there is none.
    fn open(&self, ids: Option<&[String]>) -> Result<Box<dyn GpuSampler>, Error>;
}

/// NVML's clock-event (throttle) reasons: bit and name.
pub const THROTTLE_REASONS: &[(u64, &str)] = &[
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
];

/// The names of the reasons set in `bits`.
pub fn throttle_names(bits: u64) -> Vec<&'static str> {
    THROTTLE_REASONS
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| *n)
        .collect()
}

/// Picks the GPUs `ids` names among `all`: each id is an index ("0") or
/// a UUID ("GPU-8f1c..."), compared without case.
pub fn select(all: &[GpuInfo], ids: Option<&[String]>) -> Result<Vec<GpuInfo>, Error> {
    let Some(ids) = ids else {
        return Ok(all.to_vec());
    };
    let mut out: Vec<GpuInfo> = Vec::new();
    for id in ids {
        let id = id.trim();
        let found = all.iter().find(|g| {
            id.parse::<u32>().is_ok_and(|i| i == g.index)
                || g.uuid
                    .as_deref()
                    .is_some_and(|u| u.eq_ignore_ascii_case(id))
        });
        match found {
            Some(g) if !out.iter().any(|o| o.index == g.index) => out.push(g.clone()),
            Some(_) => {}
            None => {
                let have = all
                    .iter()
                    .map(|g| match &g.uuid {
                        Some(u) => format!("{} ({u})", g.index),
                        None => g.index.to_string(),
                    })
                    .collect();
                return Err(Error::UnknownGpu {
                    id: id.to_string(),
                    have: GpuList(have),
                });
            }
        }
    }
    Ok(out)
}

/// NVML, loaded once per process on first use.
#[derive(Default)]
pub struct NvmlSource {
    nvml: OnceLock<Result<Arc<Nvml>, Arc<NvmlError>>>,
}

impl NvmlSource {
    pub fn new() -> NvmlSource {
        NvmlSource::default()
    }

    fn nvml(&self) -> Result<Arc<Nvml>, Error> {
        self.nvml
            .get_or_init(|| Nvml::init().map(Arc::new).map_err(Arc::new))
            .as_ref()
            .map(Arc::clone)
            .map_err(|e| Error::NvmlUnavailable(e.clone()))
    }
}

/// Loads NVML, or says why it could not.
pub fn nvml() -> Result<Nvml, Error> {
    Nvml::init().map_err(|e| Error::NvmlUnavailable(Arc::new(e)))
}

fn devices_of(nvml: &Nvml) -> Vec<GpuInfo> {
    let count = nvml.device_count().unwrap_or(0);
    (0..count)
        .filter_map(|i| {
            let d = nvml.device_by_index(i).ok()?;
            Some(GpuInfo {
                index: i,
                name: d.name().unwrap_or_else(|_| "unknown".into()),
                uuid: d.uuid().ok(),
                memory_total_bytes: d.memory_info().ok().map(|m| m.total),
                hostname: None,
            })
        })
        .collect()
}

impl GpuSource for NvmlSource {
    fn open(&self, ids: Option<&[String]>) -> Result<Box<dyn GpuSampler>, Error> {
        let nvml = self.nvml()?;
        let all = devices_of(&nvml);
        if all.is_empty() {
            return Err(Error::NvmlListsNoGpu);
        }
        let devices = select(&all, ids)?;
        Ok(Box::new(NvmlSampler {
            nvml,
            devices,
            names: HashMap::new(),
            nvlink_last: HashMap::new(),
        }))
    }
}

/// Samples GPUs through NVML.
pub struct NvmlSampler {
    nvml: Arc<Nvml>,
    devices: Vec<GpuInfo>,
    /// Process names by pid, read once from /proc.
    names: HashMap<u32, Option<String>>,
    /// The last NVLink counters (KiB tx, KiB rx) and when they were read.
    nvlink_last: HashMap<u32, (Instant, u64, u64)>,
}

/// NVML field IDs of the NVLink data throughput counters (KiB, cumulative).
const NVLINK_TX: u32 = 138;
const NVLINK_RX: u32 = 139;

fn field_u64(v: &nvml_wrapper::struct_wrappers::device::FieldValueSample) -> Option<u64> {
    use nvml_wrapper::enums::device::SampleValue;
    match v.value.as_ref().ok()? {
        SampleValue::U64(x) => Some(*x),
        SampleValue::U32(x) => Some(*x as u64),
        SampleValue::I64(x) => u64::try_from(*x).ok(),
        SampleValue::F64(x) => Some(*x as u64),
    }
}

fn level_name(l: nvml_wrapper::enum_wrappers::device::TopologyLevel) -> &'static str {
    use nvml_wrapper::enum_wrappers::device::TopologyLevel::*;
    match l {
        Internal => "internal",
        Single => "pcie switch",
        Multiple => "pcie switches",
        HostBridge => "host bridge",
        Node => "numa node",
        System => "system",
    }
}

fn process_name(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

impl GpuSampler for NvmlSampler {
    fn devices(&self) -> &[GpuInfo] {
        &self.devices
    }

    fn topology(&self) -> Option<Topology> {
        let mut t = Topology::default();
        for g in &self.devices {
            let d = self.nvml.device_by_index(g.index).ok()?;
            let mut active = 0;
            let mut total = 0;
            for link in 0..18 {
                match d.link_wrapper_for(link).is_active() {
                    Ok(a) => {
                        total += 1;
                        active += a as u32;
                    }
                    Err(_) => break,
                }
            }
            t.devices.push(DeviceLinks {
                index: g.index,
                pcie_gen: d.current_pcie_link_gen().ok(),
                pcie_width: d.current_pcie_link_width().ok(),
                pcie_gen_max: d.max_pcie_link_gen().ok(),
                pcie_width_max: d.max_pcie_link_width().ok(),
                nvlink_active: Some(active),
                nvlink_total: Some(total),
            });
        }
        for (i, a) in self.devices.iter().enumerate() {
            for b in &self.devices[i + 1..] {
                let (Ok(da), Ok(db)) = (
                    self.nvml.device_by_index(a.index),
                    self.nvml.device_by_index(b.index),
                ) else {
                    continue;
                };
                #[cfg(target_os = "linux")]
                if let Ok(level) = da.topology_common_ancestor(db) {
                    t.pairs
                        .push((a.index, b.index, level_name(level).to_string()));
                }
                #[cfg(not(target_os = "linux"))]
                let _ = (da, db);
            }
        }
        Some(t)
    }

    fn sample(&mut self) -> Vec<GpuReading> {
        let mut out = Vec::with_capacity(self.devices.len());
        for g in &self.devices {
            let Ok(d) = self.nvml.device_by_index(g.index) else {
                out.push(GpuReading::default());
                continue;
            };
            let now = Instant::now();
            let nvlink = d
                .field_values_for(&[
                    nvml_wrapper::structs::device::FieldId(NVLINK_TX),
                    nvml_wrapper::structs::device::FieldId(NVLINK_RX),
                ])
                .ok()
                .and_then(|v| {
                    let tx = field_u64(v.first()?.as_ref().ok()?)?;
                    let rx = field_u64(v.get(1)?.as_ref().ok()?)?;
                    Some((tx, rx))
                });
            let (nvlink_tx, nvlink_rx) = match nvlink {
                Some((tx, rx)) => {
                    let rate = self.nvlink_last.get(&g.index).and_then(|(t0, tx0, rx0)| {
                        let dt = now.duration_since(*t0).as_secs_f64();
                        (dt > 0.0).then(|| {
                            (
                                tx.saturating_sub(*tx0) as f64 * 1024.0 / dt,
                                rx.saturating_sub(*rx0) as f64 * 1024.0 / dt,
                            )
                        })
                    });
                    self.nvlink_last.insert(g.index, (now, tx, rx));
                    (rate.map(|r| r.0), rate.map(|r| r.1))
                }
                None => (None, None),
            };
            let util = d.utilization_rates().ok();
            let processes = d
                .running_compute_processes()
                .unwrap_or_default()
                .into_iter()
                .map(|p| ProcessReading {
                    pid: p.pid,
                    name: self
                        .names
                        .entry(p.pid)
                        .or_insert_with(|| process_name(p.pid))
                        .clone(),
                    memory_used_bytes: match p.used_gpu_memory {
                        UsedGpuMemory::Used(b) => Some(b),
                        UsedGpuMemory::Unavailable => None,
                    },
                })
                .collect();
            out.push(GpuReading {
                utilization_pct: util.as_ref().map(|u| u.gpu as f64),
                memory_bandwidth_utilization_pct: util.as_ref().map(|u| u.memory as f64),
                memory_used_bytes: d.memory_info().ok().map(|m| m.used),
                power_w: d.power_usage().ok().map(|mw| mw as f64 / 1000.0),
                energy_mj: d.total_energy_consumption().ok(),
                sm_clock_mhz: d.clock_info(Clock::SM).ok(),
                memory_clock_mhz: d.clock_info(Clock::Memory).ok(),
                temperature_c: d.temperature(TemperatureSensor::Gpu).ok(),
                throttle_reasons: d.current_throttle_reasons().ok().map(|r| r.bits()),
                // NVML reports KB/s; taken as 1024 bytes.
                pcie_rx_bytes_per_s: d
                    .pcie_throughput(PcieUtilCounter::Receive)
                    .ok()
                    .map(|k| k as f64 * 1024.0),
                pcie_tx_bytes_per_s: d
                    .pcie_throughput(PcieUtilCounter::Send)
                    .ok()
                    .map(|k| k as f64 * 1024.0),
                nvlink_rx_bytes_per_s: nvlink_rx,
                nvlink_tx_bytes_per_s: nvlink_tx,
                sm_clock_max_mhz: d.max_clock_info(Clock::SM).ok(),
                sm_app_clock_mhz: d.applications_clock(Clock::SM).ok(),
                processes,
                ..Default::default()
            });
        }
        out
    }
}

/// A source with no GPU, for a stated reason.
pub struct NullSource {
    pub reason: String,
}

impl GpuSource for NullSource {
    fn open(&self, _ids: Option<&[String]>) -> Result<Box<dyn GpuSampler>, Error> {
        Err(Error::NoGpu(self.reason.clone()))
    }
}

/// What a scripted sampler plays back.
#[derive(Clone)]
pub enum Script {
    /// The n-th call returns the n-th readings (one per device); the last
    /// repeats once the script runs out.
    Series(Vec<Vec<GpuReading>>),
    /// Readings as a function of the instant of the call.
    ByTime(Arc<dyn Fn(Instant) -> Vec<GpuReading> + Send + Sync>),
}

/// Deterministic GPUs for tests.
#[derive(Clone)]
pub struct ScriptedSource {
    pub devices: Vec<GpuInfo>,
    pub script: Script,
    pub topology: Option<Topology>,
}

impl ScriptedSource {
    /// `n` made-up GPUs named "Scripted GPU", 80 GB each.
    pub fn gpus(n: u32, script: Script) -> ScriptedSource {
        ScriptedSource {
            devices: (0..n)
                .map(|i| GpuInfo {
                    index: i,
                    name: "Scripted GPU".into(),
                    uuid: Some(format!("GPU-00000000-0000-0000-0000-00000000000{i}")),
                    memory_total_bytes: Some(80_000_000_000),
                    hostname: None,
                })
                .collect(),
            script,
            topology: None,
        }
    }
}

impl GpuSource for ScriptedSource {
    fn open(&self, ids: Option<&[String]>) -> Result<Box<dyn GpuSampler>, Error> {
        let devices = select(&self.devices, ids)?;
        let positions: Vec<usize> = devices
            .iter()
            .map(|d| {
                self.devices
                    .iter()
                    .position(|x| x.index == d.index)
                    .expect("selected from these")
            })
            .collect();
        Ok(Box::new(ScriptedSampler {
            devices,
            positions,
            script: self.script.clone(),
            calls: 0,
            topology: self.topology.clone(),
        }))
    }
}

/// Plays back a script.
pub struct ScriptedSampler {
    devices: Vec<GpuInfo>,
    /// Where each selected device sits in the script's readings.
    positions: Vec<usize>,
    script: Script,
    calls: usize,
    topology: Option<Topology>,
}

impl GpuSampler for ScriptedSampler {
    fn devices(&self) -> &[GpuInfo] {
        &self.devices
    }

    fn topology(&self) -> Option<Topology> {
        self.topology.clone()
    }

    fn sample(&mut self) -> Vec<GpuReading> {
        let all = match &self.script {
            Script::Series(s) => s
                .get(self.calls)
                .or_else(|| s.last())
                .cloned()
                .unwrap_or_default(),
            Script::ByTime(f) => f(Instant::now()),
        };
        self.calls += 1;
        self.positions
            .iter()
            .map(|&p| all.get(p).cloned().unwrap_or_default())
            .collect()
    }
}

/// The GPUs NVML sees; `None` when NVML cannot be loaded (no driver).
pub fn inventory() -> Option<Inventory> {
    let nvml = nvml().ok()?;
    Some(Inventory {
        driver_version: nvml.sys_driver_version().ok(),
        cuda_version: nvml.sys_cuda_driver_version().ok(),
        gpus: devices_of(&nvml),
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
        match NvmlSource::new().open(None) {
            Ok(mut s) => assert_eq!(s.sample().len(), s.devices().len()),
            Err(why) => assert!(
                matches!(why, Error::NvmlUnavailable(_) | Error::NvmlListsNoGpu),
                "{why}"
            ),
        }
    }

    fn two() -> Vec<GpuInfo> {
        ScriptedSource::gpus(2, Script::Series(vec![])).devices
    }

    #[test]
    fn selection_by_index_or_uuid() {
        let all = two();
        assert_eq!(select(&all, None).unwrap().len(), 2);
        let by_index = select(&all, Some(&["1".to_string()])).unwrap();
        assert_eq!(by_index[0].index, 1);
        let uuid = all[0].uuid.clone().unwrap().to_lowercase();
        let by_uuid = select(&all, Some(&[uuid, "0".into()])).unwrap();
        assert_eq!(by_uuid.len(), 1, "the same GPU twice counts once");
        let err = select(&all, Some(&["7".to_string()])).unwrap_err();
        assert!(
            matches!(&err, Error::UnknownGpu { id, .. } if id == "7"),
            "{err}"
        );
        let err = err.to_string();
        assert!(
            err.contains("\"7\"") && err.contains("it has 0 (GPU-"),
            "{err}"
        );
    }

    #[test]
    fn scripted_sampler_plays_its_series_and_honours_the_selection() {
        let r = |u: f64| GpuReading {
            utilization_pct: Some(u),
            ..Default::default()
        };
        let src = ScriptedSource::gpus(
            2,
            Script::Series(vec![vec![r(1.0), r(2.0)], vec![r(3.0), r(4.0)]]),
        );
        let mut s = src.open(Some(&["1".to_string()])).unwrap();
        assert_eq!(s.devices().len(), 1);
        let got: Vec<f64> = (0..3)
            .map(|_| s.sample()[0].utilization_pct.unwrap())
            .collect();
        assert_eq!(got, vec![2.0, 4.0, 4.0]);
    }

    #[test]
    fn topology_becomes_facts() {
        let t = Topology {
            devices: vec![
                DeviceLinks {
                    index: 0,
                    pcie_gen: Some(5),
                    pcie_width: Some(16),
                    pcie_gen_max: Some(5),
                    pcie_width_max: Some(16),
                    nvlink_active: Some(18),
                    nvlink_total: Some(18),
                },
                DeviceLinks {
                    index: 1,
                    pcie_gen: Some(4),
                    pcie_width: Some(8),
                    pcie_gen_max: Some(5),
                    pcie_width_max: Some(16),
                    nvlink_active: Some(0),
                    nvlink_total: Some(0),
                },
            ],
            pairs: vec![(0, 1, "pcie switch".into())],
        };
        let f = t.facts();
        assert_eq!(f["gpu0.pcie"], "gen5 x16");
        assert_eq!(f["gpu1.pcie"], "gen4 x8 (max gen5 x16)");
        assert_eq!(f["gpu0.nvlink"], "18 of 18 links active");
        assert!(!f.contains_key("gpu1.nvlink"), "no NVLink, no fact");
        assert_eq!(f["gpu_topology"], "0-1 pcie switch");
    }

    #[test]
    fn throttle_bits_have_names() {
        assert_eq!(
            throttle_names(0x4 | 0x40),
            vec!["sw_power_cap", "hw_thermal_slowdown"]
        );
        assert!(throttle_names(0).is_empty());
    }
}
