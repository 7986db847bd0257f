//! GPUs read from a dcgm-exporter (NVIDIA's Prometheus exporter of DCGM
//! fields, port 9400 by default) instead of this machine's NVML: the GPUs
//! the server runs on, wherever that is (another pod, another Slurm node),
//! with the profiling fields NVML cannot give (SM activity and occupancy,
//! tensor-pipe and DRAM activity).
//!
//! A `DcgmSampler` is a `GpuSampler` like NVML's: it scrapes the endpoint
//! once when opened to learn which GPUs it lists (by `UUID`, else
//! `Hostname` and `gpu`), keeps those the target selects (`gpu_ids`
//! against the `gpu` and `UUID` labels, `gpu_metrics_match` against any
//! labels), and turns every later scrape into one `GpuReading` per GPU. A
//! failed scrape is an error of that sample (recorded, never fatal); a
//! field the exporter does not publish is `None`, never invented.
//!
//! Units, as dcgm-exporter's default counters give them: utilization in
//! percent, framebuffer in MiB, power in W, energy in mJ since the driver
//! loaded (a counter), clocks in MHz, temperature in °C, PCIe and NVLink in
//! bytes per second, the `DCGM_FI_PROF_*` activities as ratios 0 to 1.
//! Series of MIG instances (a non-empty `GPU_I_ID` label) are skipped: a
//! MIG-enabled GPU is not read here.
//!
//! Triton Inference Server publishes a few GPU gauges of its own on its
//! `/metrics` (`nv_gpu_utilization` as a ratio 0 to 1, memory used and
//! total in bytes, power in W, `nv_energy_consumption` in J since it
//! started), each labelled `gpu_uuid` and in device order. An exposition
//! without any DCGM field is read in that shape, so a Triton that is its
//! own GPU exporter needs no dcgm-exporter beside it (the readings are
//! marked [`GpuDataSource::Triton`]; clocks, temperature and activities
//! are then `None`).

use std::collections::BTreeMap;

use super::error::{Error, GpuList};
use super::gpu::{GpuInfo, GpuReading, GpuSampler};
use super::prom::{self, Exposition};
use super::scrape::MetricsSource;
use infer_bench_results::telemetry::GpuDataSource;
use infer_bench_sim::gpu::MODELLED_HELP;

/// Which of an exporter's GPUs to read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// `gpu` indices or `UUID`s (compared without case); all when `None`.
    pub ids: Option<Vec<String>>,
    /// Labels a GPU's series must carry with exactly these values.
    pub labels: BTreeMap<String, String>,
}

impl Filter {
    fn admits(&self, s: &prom::Sample) -> bool {
        self.labels
            .iter()
            .all(|(k, v)| label(s, k).is_some_and(|x| x == v))
    }
}

/// A DCGM field as dcgm-exporter names it, and what it fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    GpuUtil,
    MemCopyUtil,
    FbUsed,
    FbFree,
    FbReserved,
    Power,
    Energy,
    SmClock,
    MemClock,
    Temp,
    Throttle,
    PcieTx,
    PcieRx,
    NvlinkTx,
    NvlinkRx,
    SmActive,
    SmOccupancy,
    TensorActive,
    DramActive,
    /// Triton: utilization as a ratio 0 to 1.
    TritonUtil,
    /// Triton: memory used, in bytes.
    TritonMemUsed,
    /// Triton: memory in all, in bytes.
    TritonMemTotal,
    /// Triton: energy since it started, in J.
    TritonEnergy,
}

/// The fields read, by the name dcgm-exporter gives them (its
/// `default-counters.csv` and `dcp-metrics-included.csv`).
const FIELDS: &[(&str, Field)] = &[
    ("DCGM_FI_DEV_GPU_UTIL", Field::GpuUtil),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", Field::MemCopyUtil),
    ("DCGM_FI_DEV_FB_USED", Field::FbUsed),
    ("DCGM_FI_DEV_FB_FREE", Field::FbFree),
    ("DCGM_FI_DEV_FB_RESERVED", Field::FbReserved),
    ("DCGM_FI_DEV_POWER_USAGE", Field::Power),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", Field::Energy),
    ("DCGM_FI_DEV_SM_CLOCK", Field::SmClock),
    ("DCGM_FI_DEV_MEM_CLOCK", Field::MemClock),
    ("DCGM_FI_DEV_GPU_TEMP", Field::Temp),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", Field::Throttle),
    // DCGM 3.3 renamed throttle reasons to clock-event reasons.
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", Field::Throttle),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", Field::PcieTx),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", Field::PcieRx),
    ("DCGM_FI_PROF_NVLINK_TX_BYTES", Field::NvlinkTx),
    ("DCGM_FI_PROF_NVLINK_RX_BYTES", Field::NvlinkRx),
    ("DCGM_FI_PROF_SM_ACTIVE", Field::SmActive),
    ("DCGM_FI_PROF_SM_OCCUPANCY", Field::SmOccupancy),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", Field::TensorActive),
    ("DCGM_FI_PROF_DRAM_ACTIVE", Field::DramActive),
];

/// Triton Inference Server's GPU gauges (its metrics documentation), read
/// only from an exposition that has no DCGM field.
const TRITON_FIELDS: &[(&str, Field)] = &[
    ("nv_gpu_utilization", Field::TritonUtil),
    ("nv_gpu_memory_used_bytes", Field::TritonMemUsed),
    ("nv_gpu_memory_total_bytes", Field::TritonMemTotal),
    ("nv_gpu_power_usage", Field::Power),
    ("nv_energy_consumption", Field::TritonEnergy),
];

/// Whether `expo` is Triton's own GPU gauges rather than a dcgm-exporter:
/// it lists a Triton GPU field and no DCGM one.
pub fn triton_shaped(expo: &Exposition) -> bool {
    let has = |table: &[(&str, Field)]| {
        expo.samples
            .iter()
            .any(|s| table.iter().any(|(n, _)| *n == s.name))
    };
    !has(FIELDS) && has(TRITON_FIELDS)
}

const MIB: f64 = 1024.0 * 1024.0;

fn label<'a>(s: &'a prom::Sample, name: &str) -> Option<&'a str> {
    s.labels
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// One GPU as one scrape shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    /// `UUID`, else `Hostname/gpu`: what identifies the GPU across scrapes.
    pub key: String,
    pub info: GpuInfo,
    pub reading: GpuReading,
}

/// The GPUs of one exposition that `filter` admits (`ids` aside), in
/// order of host and index, each with its reading.
pub fn read(expo: &Exposition, filter: &Filter) -> Vec<Seen> {
    let mut by_key: BTreeMap<String, Seen> = BTreeMap::new();
    let mut fb: BTreeMap<String, [Option<f64>; 3]> = BTreeMap::new();
    let triton = triton_shaped(expo);
    let table = if triton { TRITON_FIELDS } else { FIELDS };
    // Triton labels its GPUs by UUID only, in device order: a GPU's index
    // is its place among the UUIDs as they first appear.
    let mut order: Vec<String> = Vec::new();
    for s in &expo.samples {
        let Some(field) = table.iter().find(|(n, _)| *n == s.name).map(|x| x.1) else {
            continue;
        };
        if triton
            && let Some(u) = label(s, "gpu_uuid")
            && !order.iter().any(|o| o == u)
        {
            order.push(u.to_string());
        }
        if label(s, "GPU_I_ID").is_some() || !filter.admits(s) {
            continue;
        }
        let gpu = label(s, "gpu");
        let uuid = if triton {
            label(s, "gpu_uuid")
        } else {
            label(s, "UUID")
        };
        let host = label(s, "Hostname");
        let key = match (uuid, gpu) {
            (Some(u), _) => u.to_string(),
            (None, Some(g)) => format!("{}/{g}", host.unwrap_or("")),
            (None, None) => continue,
        };
        let index = match (triton, gpu) {
            (true, _) => order.iter().position(|o| *o == key).unwrap_or(0) as u32,
            (false, g) => g.and_then(|g| g.parse().ok()).unwrap_or(0),
        };
        let seen = by_key.entry(key.clone()).or_insert_with(|| Seen {
            key: key.clone(),
            info: GpuInfo {
                index,
                name: label(s, "modelName").unwrap_or("unknown").to_string(),
                uuid: uuid.map(str::to_string),
                memory_total_bytes: None,
                hostname: host.map(str::to_string),
            },
            reading: GpuReading::default(),
        });
        let v = s.value;
        if !v.is_finite() {
            continue;
        }
        let r = &mut seen.reading;
        let whole = |x: f64| (x >= 0.0).then_some(x.round() as u32);
        match field {
            Field::GpuUtil => r.utilization_pct = Some(v),
            Field::MemCopyUtil => r.memory_bandwidth_utilization_pct = Some(v),
            Field::FbUsed => {
                r.memory_used_bytes = (v >= 0.0).then(|| (v * MIB).round() as u64);
                fb.entry(key).or_default()[0] = Some(v);
            }
            Field::FbFree => fb.entry(key).or_default()[1] = Some(v),
            Field::FbReserved => fb.entry(key).or_default()[2] = Some(v),
            Field::Power => r.power_w = Some(v),
            Field::Energy => r.energy_mj = (v >= 0.0).then(|| v.round() as u64),
            Field::SmClock => r.sm_clock_mhz = whole(v),
            Field::MemClock => r.memory_clock_mhz = whole(v),
            Field::Temp => r.temperature_c = whole(v),
            Field::Throttle => r.throttle_reasons = (v >= 0.0).then_some(v as u64),
            Field::PcieTx => r.pcie_tx_bytes_per_s = Some(v),
            Field::PcieRx => r.pcie_rx_bytes_per_s = Some(v),
            Field::NvlinkTx => r.nvlink_tx_bytes_per_s = Some(v),
            Field::NvlinkRx => r.nvlink_rx_bytes_per_s = Some(v),
            Field::SmActive => r.sm_active = Some(v),
            Field::SmOccupancy => r.sm_occupancy = Some(v),
            Field::TensorActive => r.tensor_active = Some(v),
            Field::DramActive => r.dram_active = Some(v),
            Field::TritonUtil => r.utilization_pct = Some(v * 100.0),
            Field::TritonMemUsed => r.memory_used_bytes = (v >= 0.0).then(|| v.round() as u64),
            Field::TritonMemTotal => {
                seen.info.memory_total_bytes = (v >= 0.0).then(|| v.round() as u64)
            }
            Field::TritonEnergy => r.energy_mj = (v >= 0.0).then(|| (v * 1000.0).round() as u64),
        }
    }
    for (key, [used, free, reserved]) in fb {
        if let (Some(seen), Some(used), Some(free)) = (by_key.get_mut(&key), used, free) {
            let total = used + free + reserved.unwrap_or(0.0);
            seen.info.memory_total_bytes = Some((total * MIB).round() as u64);
        }
    }
    let mut out: Vec<Seen> = by_key.into_values().collect();
    out.sort_by(|a, b| {
        (&a.info.hostname, a.info.index, &a.key).cmp(&(&b.info.hostname, b.info.index, &b.key))
    });
    out
}

/// Whether every DCGM family of `expo` says it is the simulator's model
/// (its HELP lines begin with [`MODELLED_HELP`]), not a measurement.
pub fn modelled(expo: &Exposition) -> bool {
    let mut dcgm = expo
        .help
        .iter()
        .filter(|(name, _)| name.starts_with("DCGM_FI_"))
        .peekable();
    dcgm.peek().is_some() && dcgm.all(|(_, help)| help.starts_with(MODELLED_HELP))
}

fn matches_id(g: &GpuInfo, id: &str) -> bool {
    id.parse::<u32>().is_ok_and(|i| i == g.index)
        || g.uuid
            .as_deref()
            .is_some_and(|u| u.eq_ignore_ascii_case(id))
}

/// Reads the GPUs of a dcgm-exporter.
pub struct DcgmSampler {
    url: String,
    source: Box<dyn MetricsSource>,
    filter: Filter,
    devices: Vec<GpuInfo>,
    keys: Vec<String>,
    data_source: GpuDataSource,
    note: Option<String>,
}

impl DcgmSampler {
    /// Scrapes `url` through `source` once and keeps the GPUs `filter`
    /// selects, or says in one sentence why there is none.
    pub fn open(
        url: &str,
        source: Box<dyn MetricsSource>,
        filter: Filter,
        data_source: GpuDataSource,
    ) -> Result<DcgmSampler, Error> {
        let mut s = DcgmSampler::unopened(url, source, filter, data_source);
        let expo = s.scrape()?;
        s.discover(&expo)?;
        Ok(s)
    }

    /// `open`, except that an exporter that cannot be reached yet (no
    /// answer, a timeout, an HTTP 5xx: a pod that is restarting) gives a
    /// sampler that finds its GPUs at the first scrape that answers; until
    /// then every sample is a gap, recorded with its error. What the
    /// exporter says once it answers (no GPU listed, none matching) is
    /// still an error at once.
    pub fn open_or_wait(
        url: &str,
        source: Box<dyn MetricsSource>,
        filter: Filter,
        data_source: GpuDataSource,
    ) -> Result<DcgmSampler, Error> {
        let mut s = DcgmSampler::unopened(url, source, filter, data_source);
        match s.scrape().and_then(|expo| s.discover(&expo)) {
            Ok(()) => Ok(s),
            Err(e) if e.is_unreachable() => Ok(s),
            Err(e) => Err(e),
        }
    }

    fn unopened(
        url: &str,
        source: Box<dyn MetricsSource>,
        filter: Filter,
        data_source: GpuDataSource,
    ) -> DcgmSampler {
        DcgmSampler {
            url: url.to_string(),
            source,
            filter,
            devices: Vec::new(),
            keys: Vec::new(),
            data_source,
            note: None,
        }
    }

    /// One scrape, parsed.
    fn scrape(&mut self) -> Result<Exposition, Error> {
        let text = self.source.fetch()?;
        prom::parse(&text).map_err(|source| Error::Malformed {
            url: Some(self.url.clone()),
            source,
        })
    }

    /// Whether the GPUs to read are known (the exporter has answered).
    pub fn found(&self) -> bool {
        !self.keys.is_empty()
    }

    /// Chooses the GPUs to read from what the exporter lists.
    fn discover(&mut self, expo: &Exposition) -> Result<(), Error> {
        let (url, filter) = (self.url.as_str(), &self.filter);
        let all = read(expo, &Filter::default());
        let seen: Vec<Seen> = read(expo, filter);
        let listed = |v: &[Seen]| {
            GpuList(
                v.iter()
                    .map(|s| {
                        let host = s
                            .info
                            .hostname
                            .as_deref()
                            .map(|h| format!("{h} "))
                            .unwrap_or_default();
                        format!("{host}gpu {} ({})", s.info.index, s.key)
                    })
                    .collect(),
            )
        };
        if all.is_empty() {
            return Err(Error::ExporterListsNoGpu {
                url: url.to_string(),
            });
        }
        let chosen: Vec<Seen> = match &filter.ids {
            None => seen.clone(),
            Some(ids) => {
                let mut out: Vec<Seen> = Vec::new();
                for id in ids {
                    let id = id.trim();
                    let found: Vec<&Seen> =
                        seen.iter().filter(|s| matches_id(&s.info, id)).collect();
                    if found.is_empty() {
                        return Err(Error::ExporterLacksGpu {
                            url: url.to_string(),
                            id: id.to_string(),
                            with_labels: !filter.labels.is_empty(),
                            listed: listed(&seen),
                        });
                    }
                    for s in found {
                        if !out.iter().any(|o| o.key == s.key) {
                            out.push(s.clone());
                        }
                    }
                }
                out
            }
        };
        if chosen.is_empty() {
            return Err(Error::NoGpuMatches {
                url: url.to_string(),
                labels: filter.labels.clone(),
                listed: listed(&all),
            });
        }
        self.devices = chosen.iter().map(|s| s.info.clone()).collect();
        self.keys = chosen.into_iter().map(|s| s.key).collect();
        // The simulator's figures stay marked modelled, however they are
        // reached (its /metrics named as a gpu_metrics_url).
        if modelled(expo) {
            self.data_source = GpuDataSource::Sim;
        } else if triton_shaped(expo) {
            self.data_source = GpuDataSource::Triton;
        }
        Ok(())
    }

    /// Adds a note to the telemetry this sampler produces.
    pub fn with_note(mut self, note: Option<String>) -> DcgmSampler {
        self.note = note;
        self
    }
}

impl GpuSampler for DcgmSampler {
    fn devices(&self) -> &[GpuInfo] {
        &self.devices
    }

    fn sample(&mut self) -> Vec<GpuReading> {
        self.try_sample()
            .unwrap_or_else(|_| vec![GpuReading::default(); self.devices.len()])
    }

    fn try_sample(&mut self) -> Result<Vec<GpuReading>, Error> {
        let expo = self.scrape()?;
        if !self.found() {
            self.discover(&expo)?;
        }
        let mut seen: BTreeMap<String, GpuReading> = read(&expo, &self.filter)
            .into_iter()
            .map(|s| (s.key, s.reading))
            .collect();
        if self.keys.iter().all(|k| !seen.contains_key(k)) {
            return Err(Error::GpusGone {
                url: self.url.clone(),
            });
        }
        Ok(self
            .keys
            .iter()
            .map(|k| seen.remove(k).unwrap_or_default())
            .collect())
    }

    fn source(&self) -> GpuDataSource {
        self.data_source
    }

    fn url(&self) -> Option<&str> {
        Some(&self.url)
    }

    fn note(&self) -> Option<String> {
        self.note.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scrape::ScriptedMetrics;

    /// Triton's own GPU gauges, as a Triton 2.x on two GPUs writes them,
    /// beside its inference counters.
    const TRITON: &str = r#"# HELP nv_inference_count Number of inferences performed
# TYPE nv_inference_count counter
nv_inference_count{model="resnet",version="1"} 64
# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-ffff"} 0.25
nv_gpu_utilization{gpu_uuid="GPU-0000"} 0
# HELP nv_gpu_memory_total_bytes GPU total memory, in bytes
# TYPE nv_gpu_memory_total_bytes gauge
nv_gpu_memory_total_bytes{gpu_uuid="GPU-ffff"} 42949672960
nv_gpu_memory_total_bytes{gpu_uuid="GPU-0000"} 42949672960
# HELP nv_gpu_memory_used_bytes GPU used memory, in bytes
# TYPE nv_gpu_memory_used_bytes gauge
nv_gpu_memory_used_bytes{gpu_uuid="GPU-ffff"} 33763098624
# HELP nv_gpu_power_usage GPU power usage in watts
# TYPE nv_gpu_power_usage gauge
nv_gpu_power_usage{gpu_uuid="GPU-ffff"} 51.091
# HELP nv_energy_consumption GPU energy consumption in joules since the Triton Server started
# TYPE nv_energy_consumption counter
nv_energy_consumption{gpu_uuid="GPU-ffff"} 3594017.4
"#;

    #[test]
    fn a_tritons_own_gpu_gauges_are_read_in_its_units_and_device_order() {
        let expo = prom::parse(TRITON).unwrap();
        assert!(triton_shaped(&expo));
        let seen = read(&expo, &Filter::default());
        assert_eq!(seen.len(), 2);
        // Device order is the order Triton lists them in, not the UUIDs'.
        assert_eq!(seen[0].key, "GPU-ffff");
        assert_eq!(seen[0].info.index, 0);
        assert_eq!(seen[1].info.index, 1);
        assert_eq!(seen[0].info.uuid.as_deref(), Some("GPU-ffff"));
        assert_eq!(seen[0].info.memory_total_bytes, Some(42_949_672_960));
        let r = &seen[0].reading;
        assert_eq!(r.utilization_pct, Some(25.0));
        assert_eq!(r.memory_used_bytes, Some(33_763_098_624));
        assert_eq!(r.power_w, Some(51.091));
        assert_eq!(r.energy_mj, Some(3_594_017_400));
        assert_eq!(r.sm_clock_mhz, None);
        assert_eq!(seen[1].reading.utilization_pct, Some(0.0));
        assert_eq!(seen[1].reading.power_w, None);
        // A sampler over it says where its figures came from.
        let s = DcgmSampler::open(
            "http://triton:8002/metrics",
            Box::new(ScriptedMetrics {
                texts: vec![Ok(TRITON.into())],
                calls: 0,
            }),
            Filter {
                ids: Some(vec!["1".into()]),
                labels: BTreeMap::new(),
            },
            GpuDataSource::Dcgm,
        )
        .unwrap();
        assert_eq!(s.source(), GpuDataSource::Triton);
        assert_eq!(s.devices().len(), 1);
        assert_eq!(s.devices()[0].uuid.as_deref(), Some("GPU-0000"));
        // A dcgm-exporter's text is never read as Triton's, even beside
        // Triton's gauges (a Prometheus that federates both).
        let both = prom::parse(&format!("{TWO}{TRITON}")).unwrap();
        assert!(!triton_shaped(&both));
        assert!(
            read(&both, &Filter::default())
                .iter()
                .all(|s| s.key != "GPU-ffff")
        );
        // A CPU-only Triton lists no GPU: nothing to read.
        let cpu = prom::parse(
            TRITON
                .lines()
                .take(3)
                .collect::<Vec<_>>()
                .join("\n")
                .as_str(),
        )
        .unwrap();
        assert!(!triton_shaped(&cpu));
        assert!(read(&cpu, &Filter::default()).is_empty());
    }

    const TWO: &str = r#"# HELP DCGM_FI_DEV_SM_CLOCK SM frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15"} 1980
DCGM_FI_DEV_SM_CLOCK{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15",pod="vllm-0",namespace="llm",container="vllm"} 1755
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-aaaa",Hostname="node-a",modelName="NVIDIA H100 80GB HBM3"} 1000
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-bbbb",Hostname="node-a",modelName="NVIDIA H100 80GB HBM3",pod="vllm-0"} 70000
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-aaaa",Hostname="node-a",modelName="NVIDIA H100 80GB HBM3"} 80000
DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-bbbb",Hostname="node-a",modelName="NVIDIA H100 80GB HBM3",pod="vllm-0"} 11000
# HELP DCGM_FI_PROF_SM_ACTIVE The ratio of cycles an SM has at least 1 warp assigned.
# TYPE DCGM_FI_PROF_SM_ACTIVE gauge
DCGM_FI_PROF_SM_ACTIVE{gpu="1",UUID="GPU-bbbb",Hostname="node-a",modelName="NVIDIA H100 80GB HBM3",pod="vllm-0"} 0.625
DCGM_FI_PROF_SM_ACTIVE{gpu="1",UUID="GPU-bbbb",Hostname="node-a",GPU_I_ID="3",GPU_I_PROFILE="1g.10gb"} 0.99
"#;

    fn sampler(
        texts: Vec<Result<String, &'static str>>,
        filter: Filter,
    ) -> Result<DcgmSampler, Error> {
        DcgmSampler::open(
            "http://node-a:9400/metrics",
            Box::new(ScriptedMetrics { texts, calls: 0 }),
            filter,
            GpuDataSource::Dcgm,
        )
    }

    #[test]
    fn every_gpu_with_its_identity_units_and_total_memory() {
        let e = prom::parse(TWO).unwrap();
        let seen = read(&e, &Filter::default());
        assert_eq!(seen.len(), 2);
        let (a, b) = (&seen[0], &seen[1]);
        assert_eq!(a.info.index, 0);
        assert_eq!(a.info.uuid.as_deref(), Some("GPU-aaaa"));
        assert_eq!(a.info.hostname.as_deref(), Some("node-a"));
        assert_eq!(a.info.name, "NVIDIA H100 80GB HBM3");
        assert_eq!(a.info.memory_total_bytes, Some(81000 * 1024 * 1024));
        assert_eq!(a.reading.sm_clock_mhz, Some(1980));
        assert_eq!(a.reading.memory_used_bytes, Some(1000 * 1024 * 1024));
        // Absent fields stay absent; the MIG instance's series is skipped.
        assert_eq!(a.reading.sm_active, None);
        assert_eq!(b.reading.sm_active, Some(0.625));
        assert_eq!(a.reading.power_w, None);
    }

    #[test]
    fn gpus_are_picked_by_index_uuid_or_labels() {
        let t = || vec![Ok(TWO.to_string())];
        let by_id = sampler(
            t(),
            Filter {
                ids: Some(vec!["gpu-BBBB".into()]),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(by_id.devices().len(), 1);
        assert_eq!(by_id.devices()[0].index, 1);
        let by_pod = sampler(
            t(),
            Filter {
                ids: None,
                labels: [("pod".to_string(), "vllm-0".to_string())].into(),
            },
        )
        .unwrap();
        assert_eq!(by_pod.devices()[0].uuid.as_deref(), Some("GPU-bbbb"));
        let e = sampler(
            t(),
            Filter {
                ids: Some(vec!["7".into()]),
                ..Default::default()
            },
        )
        .err()
        .unwrap();
        assert!(
            matches!(&e, Error::ExporterLacksGpu { id, .. } if id == "7"),
            "{e}"
        );
        let e = e.to_string();
        assert!(
            e.contains("\"7\"") && e.contains("node-a gpu 0 (GPU-aaaa)"),
            "{e}"
        );
        let e = sampler(
            t(),
            Filter {
                ids: None,
                labels: [("Hostname".to_string(), "node-z".to_string())].into(),
            },
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("Hostname=\"node-z\""), "{e}");
        let e = sampler(vec![Err("GET x: cannot connect")], Filter::default())
            .err()
            .unwrap();
        assert_eq!(e.to_string(), "GET x: cannot connect");
        let e = sampler(vec![Ok("up 1\n".into())], Filter::default())
            .err()
            .unwrap();
        assert!(matches!(e, Error::ExporterListsNoGpu { .. }), "{e}");
        assert!(e.to_string().contains("lists no GPU"), "{e}");
    }

    #[test]
    fn the_simulators_modelled_series_are_read_as_modelled() {
        let exporter = prom::parse(TWO).unwrap();
        assert!(!modelled(&exporter));
        let text = format!(
            "# HELP DCGM_FI_PROF_SM_ACTIVE {MODELLED_HELP}: kernels.\n# TYPE DCGM_FI_PROF_SM_ACTIVE gauge\n\
             DCGM_FI_PROF_SM_ACTIVE{{gpu=\"0\",UUID=\"SIM-00000000\"}} 0.5\n\
             # HELP vllm:num_requests_running Requests running.\n# TYPE vllm:num_requests_running gauge\n\
             vllm:num_requests_running 3\n"
        );
        assert!(modelled(&prom::parse(&text).unwrap()));
        let s = sampler(vec![Ok(text.clone())], Filter::default()).unwrap();
        assert_eq!(s.source(), GpuDataSource::Sim, "whatever the caller named");
        // One measured family among them: not the simulator's.
        let mixed = format!(
            "{text}# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n# TYPE DCGM_FI_DEV_FB_USED gauge\n\
             DCGM_FI_DEV_FB_USED{{gpu=\"0\",UUID=\"SIM-00000000\"}} 100\n"
        );
        assert!(!modelled(&prom::parse(&mixed).unwrap()));
    }

    #[test]
    fn a_failed_or_malformed_scrape_is_an_error_of_that_sample() {
        let mut s = sampler(
            vec![
                Ok(TWO.to_string()),
                Ok(TWO.to_string()),
                Err("GET x: timed out"),
                Ok("DCGM_FI_DEV_SM_CLOCK{gpu=\"0\" 5\n".into()),
                Ok("DCGM_FI_DEV_SM_CLOCK{gpu=\"9\",UUID=\"GPU-zzzz\"} 5\n".into()),
            ],
            Filter::default(),
        )
        .unwrap();
        let r = s.try_sample().unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].sm_clock_mhz, Some(1755));
        assert_eq!(s.try_sample().unwrap_err().to_string(), "GET x: timed out");
        let e = s.try_sample().unwrap_err();
        assert!(matches!(e, Error::Malformed { .. }), "{e}");
        let e = e.to_string();
        assert!(e.contains("malformed") && e.contains("line 1"), "{e}");
        let e = s.try_sample().unwrap_err();
        assert!(matches!(e, Error::GpusGone { .. }), "{e}");
        assert!(e.to_string().contains("none of the GPUs"), "{e}");
    }
}
