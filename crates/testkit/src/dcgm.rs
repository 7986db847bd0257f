//! A fake dcgm-exporter: `GET /metrics` answers with Prometheus text shaped
//! as NVIDIA's dcgm-exporter writes it (`# HELP` and `# TYPE` lines from
//! its default counters and DCP metrics files, every sample labelled
//! `gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`, `Hostname`,
//! `DCGM_FI_DRIVER_VERSION`, and `container`, `namespace`, `pod` where a
//! pod holds the GPU), with values a test scripts per scrape: the `n`-th
//! scrape (from 0) gets `script(n)`, which may also be an HTTP error, a
//! malformed text or a slow answer. Every answer is logged with its
//! number and what it served, so a test can compare the results with
//! exactly what was served.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hyper::{Method, StatusCode};
use parking_lot::Mutex;

use infer_bench_sim::http::{self, Request, Response, ServerHandle};

/// A GPU as the exporter labels it.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeGpu {
    pub gpu: u32,
    pub uuid: String,
    pub model: String,
    pub hostname: String,
    /// The pod holding the GPU (dcgm-exporter's Kubernetes mapping).
    pub pod: Option<String>,
}

impl FakeGpu {
    /// GPU `gpu` of host `hostname`, an H100, with a UUID made from both.
    pub fn h100(hostname: &str, gpu: u32) -> FakeGpu {
        let h = hostname
            .bytes()
            .fold(0u32, |a, b| a.wrapping_mul(31).wrapping_add(b as u32));
        FakeGpu {
            gpu,
            uuid: format!("GPU-{h:08x}-0000-4000-8000-{gpu:012x}"),
            model: "NVIDIA H100 80GB HBM3".into(),
            hostname: hostname.into(),
            pod: None,
        }
    }

    fn labels(&self) -> String {
        let mut s = format!(
            "gpu=\"{}\",UUID=\"{}\",pci_bus_id=\"00000000:{:02X}:00.0\",device=\"nvidia{}\",modelName=\"{}\",Hostname=\"{}\",DCGM_FI_DRIVER_VERSION=\"550.54.15\"",
            self.gpu,
            self.uuid,
            0x18 + self.gpu * 0x11,
            self.gpu,
            self.model,
            self.hostname
        );
        if let Some(pod) = &self.pod {
            s.push_str(&format!(
                ",container=\"vllm\",namespace=\"llm\",pod=\"{pod}\""
            ));
        }
        s
    }
}

/// The fields dcgm-exporter publishes (its `default-counters.csv` and
/// `dcp-metrics-included.csv`): name, type and help text, in its order.
pub const COUNTERS: &[(&str, &str, &str)] = &[
    (
        "DCGM_FI_DEV_SM_CLOCK",
        "gauge",
        "SM clock frequency (in MHz).",
    ),
    (
        "DCGM_FI_DEV_MEM_CLOCK",
        "gauge",
        "Memory clock frequency (in MHz).",
    ),
    (
        "DCGM_FI_DEV_MEMORY_TEMP",
        "gauge",
        "Memory temperature (in C).",
    ),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
    ),
    (
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "counter",
        "Total number of PCIe retries.",
    ),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    (
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "gauge",
        "Memory utilization (in %).",
    ),
    (
        "DCGM_FI_DEV_ENC_UTIL",
        "gauge",
        "Encoder utilization (in %).",
    ),
    (
        "DCGM_FI_DEV_DEC_UTIL",
        "gauge",
        "Decoder utilization (in %).",
    ),
    (
        "DCGM_FI_DEV_XID_ERRORS",
        "gauge",
        "Value of the last XID error encountered.",
    ),
    (
        "DCGM_FI_DEV_FB_FREE",
        "gauge",
        "Framebuffer memory free (in MiB).",
    ),
    (
        "DCGM_FI_DEV_FB_USED",
        "gauge",
        "Framebuffer memory used (in MiB).",
    ),
    (
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "gauge",
        "Current clock throttle reasons.",
    ),
    (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "gauge",
        "Ratio of time the graphics engine is active.",
    ),
    (
        "DCGM_FI_PROF_SM_ACTIVE",
        "gauge",
        "The ratio of cycles an SM has at least 1 warp assigned.",
    ),
    (
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "gauge",
        "The ratio of number of warps resident on an SM.",
    ),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
    ),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
    ),
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
    ),
    (
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "gauge",
        "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second.",
    ),
    (
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "gauge",
        "The rate of data received over NVLink, not including protocol headers, in bytes per second.",
    ),
];

/// The text of one scrape: for each field of [`COUNTERS`] that any GPU
/// has a value for, its `# HELP` and `# TYPE` lines, then one sample per
/// GPU that has it. `values(gpu)` gives a GPU's fields by name.
pub fn exposition(gpus: &[(FakeGpu, Vec<(&str, f64)>)]) -> String {
    let mut s = String::new();
    for (name, kind, help) in COUNTERS {
        let lines: Vec<String> = gpus
            .iter()
            .filter_map(|(g, values)| {
                let v = values.iter().find(|(n, _)| n == name)?.1;
                Some(format!("{name}{{{}}} {}\n", g.labels(), number(v)))
            })
            .collect();
        if lines.is_empty() {
            continue;
        }
        s.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        for l in lines {
            s.push_str(&l);
        }
    }
    s
}

/// A value as dcgm-exporter (Go's `%v`) prints it, back exactly.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:?}")
    }
}

/// One answer of the exporter.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// 200 with this text.
    Text(String),
    /// This HTTP status with a short body.
    Status(u16),
    /// 200 with this text, after a delay.
    Slow(Duration, String),
}

/// A served scrape.
#[derive(Debug, Clone, PartialEq)]
pub struct Served {
    /// Which scrape (from 0).
    pub n: u64,
    /// When the request arrived.
    pub at: Instant,
    pub answer: Answer,
}

type Script = Arc<dyn Fn(u64) -> Answer + Send + Sync>;

/// A running fake exporter. Dropping it closes it.
pub struct DcgmExporter {
    http: ServerHandle,
    log: Arc<Mutex<Vec<Served>>>,
}

impl DcgmExporter {
    /// Binds `127.0.0.1:0` on the current tokio runtime and answers the
    /// `n`-th `GET /metrics` with `script(n)`.
    pub async fn start(
        script: impl Fn(u64) -> Answer + Send + Sync + 'static,
    ) -> io::Result<DcgmExporter> {
        DcgmExporter::start_on(0, script).await
    }

    /// `start` on a given port of 127.0.0.1 (an exporter that comes up
    /// late at an address a spec already names).
    pub async fn start_on(
        port: u16,
        script: impl Fn(u64) -> Answer + Send + Sync + 'static,
    ) -> io::Result<DcgmExporter> {
        let script: Script = Arc::new(script);
        let log = Arc::new(Mutex::new(Vec::new()));
        let count = Arc::new(AtomicU64::new(0));
        let (l, c) = (log.clone(), count.clone());
        let http = http::bind_port(port, move |req: Request| {
            let (script, log, count) = (script.clone(), l.clone(), c.clone());
            async move {
                if req.method != Method::GET || req.path != "/metrics" {
                    return http::error_response(StatusCode::NOT_FOUND, "not found");
                }
                let n = count.fetch_add(1, Ordering::SeqCst);
                let answer = script(n);
                log.lock().push(Served {
                    n,
                    at: Instant::now(),
                    answer: answer.clone(),
                });
                match answer {
                    Answer::Text(t) => text(t),
                    Answer::Status(code) => http::error_response(
                        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                        "scripted failure",
                    ),
                    Answer::Slow(d, t) => {
                        tokio::time::sleep(d).await;
                        text(t)
                    }
                }
            }
        })
        .await?;
        Ok(DcgmExporter { http, log })
    }

    /// `http://127.0.0.1:PORT/metrics`.
    pub fn url(&self) -> String {
        self.http.url("/metrics")
    }

    /// Every scrape answered so far, in order.
    pub fn served(&self) -> Vec<Served> {
        self.log.lock().clone()
    }
}

fn text(t: String) -> Response {
    Response::full(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        t,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_has_help_and_type_lines_and_every_label() {
        let mut b = FakeGpu::h100("node-a", 1);
        b.pod = Some("vllm-0".into());
        let t = exposition(&[
            (
                FakeGpu::h100("node-a", 0),
                vec![("DCGM_FI_DEV_SM_CLOCK", 1980.0)],
            ),
            (
                b,
                vec![
                    ("DCGM_FI_DEV_SM_CLOCK", 1755.0),
                    ("DCGM_FI_PROF_SM_ACTIVE", 0.625),
                ],
            ),
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz)."
        );
        assert_eq!(lines[1], "# TYPE DCGM_FI_DEV_SM_CLOCK gauge");
        assert!(lines[2].starts_with("DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",UUID=\"GPU-"));
        assert!(lines[2].ends_with("DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 1980"));
        assert!(lines[3].contains("pod=\"vllm-0\"} 1755"), "{}", lines[3]);
        assert_eq!(
            lines[4],
            "# HELP DCGM_FI_PROF_SM_ACTIVE The ratio of cycles an SM has at least 1 warp assigned."
        );
        assert!(lines[6].ends_with("} 0.625"));
        assert_eq!(lines.len(), 7, "no lines for fields nobody has");
    }
}
