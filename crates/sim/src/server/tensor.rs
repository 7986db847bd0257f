//! The simulator as a KServe v2 server (Triton's flavour of it) for a
//! vision or encoder network: readiness (`/v2/health/ready`, `live`,
//! `/v2/models/{m}/ready`), the model's metadata (shapes led by -1, the
//! batch), Triton's `config` (`max_batch_size`) and `stats`, Triton's
//! repository index (`POST /v2/repository/index`: the model under its
//! served name, READY), and `POST /v2/models/{m}[/versions/1]/infer` with tensors as JSON or with
//! the binary tensor extension. Every request is checked as Triton checks
//! it (input names, datatypes, shapes, the batch against
//! `max_batch_size`, element counts and binary sizes) and refused with
//! 400 `{"error": "..."}` saying what does not fit. An admitted request
//! waits for the model's one instance, which an executor thread runs one
//! request's batch at a time, first come first served, each execution as
//! long as [`crate::network`] prices it, slept in real time against an
//! absolute schedule. The answer's outputs have the right shapes and hold
//! zeros: binary ones are slices of one zeroed buffer, never built per
//! request. The statistics are the real counters of what was served.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::header::{CONTENT_LENGTH, HeaderName, HeaderValue};
use hyper::{Method, StatusCode};
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::oneshot;

use super::{Cmd, SimServer};
use crate::error::Error;
use crate::http::{self, Request, Response};
use crate::network::{self, Execution, NetworkCost};
use infer_bench_results::ServerInfo;
use infer_bench_spec::catalog::{self, Network, TensorDecl};
use infer_bench_spec::plan::PointConfig;
use infer_bench_spec::tensor::DataType;

/// The one version the simulator serves.
pub const VERSION: &str = "1";
/// The largest request body read: a batch of 640 px images as JSON text
/// runs to several times the client's 256 MiB of binary tensors' bound.
pub const MAX_BODY_BYTES: usize = 1 << 30;
/// Binary outputs at least this large leave as a chunk of their own (no
/// copy of the zeroed buffer); smaller ones are copied after the header.
const SEPARATE_CHUNK: usize = 256 << 10;

const HEADER_LENGTH: &str = "inference-header-content-length";

/// The network served and its names.
struct Served {
    names: Vec<String>,
    net: &'static Network,
}

/// Triton's per-model counters (nanoseconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub success: (u64, u64),
    pub fail: (u64, u64),
    pub queue: (u64, u64),
    pub compute_input: (u64, u64),
    pub compute_infer: (u64, u64),
    pub compute_output: (u64, u64),
    pub inference_count: u64,
    pub execution_count: u64,
    /// Unix milliseconds of the last inference.
    pub last_inference_ms: u64,
}

struct Ctx {
    served: Served,
    jobs: std_mpsc::Sender<Job>,
    counters: Mutex<Counters>,
    /// Zeros enough for the largest batch's outputs.
    zeros: Bytes,
    /// The modelled GPU, for its dcgm-exporter series in `/metrics`.
    gpu: GpuSeries,
}

/// The one GPU of the simulated instance as dcgm-exporter would show it:
/// busy while the instance computes (`compute_infer`, between two
/// scrapes), its memory the weights and a fixed runtime reserve.
struct GpuSeries {
    name: String,
    used_mib: f64,
    total_mib: f64,
    /// The last scrape's instant and the compute time counted by then (ns).
    last: Mutex<(Instant, u64)>,
}

/// What a runtime (CUDA context, cuDNN/TensorRT workspaces, activations)
/// holds beside a network's weights.
const RUNTIME_RESERVE_MIB: f64 = 1024.0;

/// One admitted request, for the executor.
struct Job {
    arrival: Instant,
    batch: u32,
    input_bytes: u64,
    output_bytes: u64,
    done: oneshot::Sender<Timing>,
}

/// What an execution took, as Triton splits it (nanoseconds).
#[derive(Debug, Clone, Copy, Default)]
struct Timing {
    queue: u64,
    input: u64,
    infer: u64,
    output: u64,
}

/// Starts the simulator of a point whose model is a network.
pub(super) fn start(cfg: &PointConfig, port: u16) -> Result<SimServer, Error> {
    let sim = cfg.target.sim.as_ref().ok_or(Error::NoSimSettings)?;
    let net = cfg
        .model
        .network
        .as_ref()
        .and_then(|n| n.figures())
        .ok_or_else(|| Error::NoArchitecture(cfg.model.name.clone()))?;
    let gpu = catalog::gpu(&sim.gpu).ok_or_else(|| Error::UnknownGpu {
        gpu: sim.gpu.clone(),
        known: catalog::GPUS
            .iter()
            .map(|g| g.id)
            .collect::<Vec<_>>()
            .join(", "),
    })?;
    let dtype = cfg
        .precision
        .as_ref()
        .and_then(|p| p.dtype)
        .unwrap_or(network::DEFAULT_DTYPE);
    let cost = NetworkCost::new(net, gpu, dtype, Some(sim));
    let weight_bytes = cost.weight_bytes;
    let mut names = vec![
        cfg.served_name().to_string(),
        cfg.model.served_name.clone(),
        cfg.model.name.clone(),
    ];
    names.dedup();
    let info = ServerInfo {
        name: Some("infer-bench-sim".into()),
        version: Some(env!("CARGO_PKG_VERSION").into()),
        model: Some(
            format!(
                "{} on 1x {} ({:?}, kserve v2, max_batch_size {})",
                net.id, gpu.name, dtype, net.max_batch_size
            )
            .to_lowercase()
            .into(),
        ),
        ..Default::default()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let speed = Arc::new(AtomicU64::new(1.0f64.to_bits()));
    let (jobs, rx) = std_mpsc::channel::<Job>();
    let executor = {
        let (stop, speed) = (stop.clone(), speed.clone());
        std::thread::Builder::new()
            .name("sim-instance".into())
            .spawn(move || execute(cost, rx, stop, speed))
            .map_err(Error::Thread)?
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("sim-http")
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let (_, out_bytes) = NetworkCost::bytes_of(net, net.max_batch_size);
    let ctx = Arc::new(Ctx {
        served: Served { names, net },
        jobs,
        counters: Mutex::new(Counters::default()),
        zeros: Bytes::from(vec![0u8; out_bytes as usize]),
        gpu: GpuSeries {
            name: gpu.name.replace(['"', '\\', '\n'], ""),
            used_mib: (weight_bytes / (1u64 << 20) as f64 + RUNTIME_RESERVE_MIB).round(),
            total_mib: (gpu.memory_gb * 1e9 / (1u64 << 20) as f64).round(),
            last: Mutex::new((Instant::now(), 0)),
        },
    });
    let handle = rt
        .block_on(http::bind_port_with(port, MAX_BODY_BYTES, move |req| {
            let ctx = ctx.clone();
            async move { handle(&ctx, req).await }
        }))
        .map_err(Error::Bind)?;
    // The LLM engine's command channel: nothing listens on it here.
    let (cmds, _) = std_mpsc::channel::<Cmd>();
    Ok(SimServer {
        rt: Some(rt),
        handle: Some(handle),
        engine: Some(executor),
        cmds,
        stop,
        speed,
        noise: sim.noise,
        seed: cfg.seed,
        info,
        api_root: "",
    })
}

/// The model instance: one job at a time, in arrival order. A job starts
/// when it arrived or when the previous one ended, whichever is later
/// (unless the thread fell more than 2 ms behind that schedule: then now),
/// so the host's jitter does not accumulate over a busy period.
fn execute(
    cost: NetworkCost,
    rx: std_mpsc::Receiver<Job>,
    stop: Arc<AtomicBool>,
    speed: Arc<AtomicU64>,
) {
    super::set_timer_slack();
    let mut free_at: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        let job = match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(j) => j,
            Err(std_mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
        };
        let now = Instant::now();
        let mut start = free_at.map_or(job.arrival, |f| f.max(job.arrival));
        if start + Duration::from_millis(2) < now {
            start = now;
        }
        let factor = f64::from_bits(speed.load(Ordering::Relaxed));
        let e: Execution = cost
            .execution(job.batch, job.input_bytes, job.output_bytes)
            .scaled(factor);
        let end = start + Duration::from_secs_f64(e.total_s().max(0.0));
        super::wait_until(end, &stop);
        free_at = Some(end);
        let ns = |s: f64| (s * 1e9) as u64;
        let _ = job.done.send(Timing {
            queue: start.saturating_duration_since(job.arrival).as_nanos() as u64,
            input: ns(e.input_s),
            infer: ns(e.infer_s),
            output: ns(e.output_s),
        });
    }
}

fn error(status: StatusCode, message: &str) -> Response {
    Response::json(status, json!({ "error": message }).to_string())
}

fn bad(message: &str) -> Response {
    error(StatusCode::BAD_REQUEST, message)
}

/// `%XX` escapes decoded (a model name as the client escaped it).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What a `/v2/models/...` path asks of which model and version.
#[derive(Debug, PartialEq, Eq)]
struct ModelPath {
    model: String,
    version: Option<String>,
    /// "" (metadata), "ready", "config", "stats" or "infer".
    what: String,
}

fn model_path(path: &str) -> Option<ModelPath> {
    let rest = path.strip_prefix("/v2/models/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    let (model, version, what) = match parts.as_slice() {
        [m] => (m, None, ""),
        [m, w] => (m, None, *w),
        [m, "versions", v] => (m, Some(*v), ""),
        [m, "versions", v, w] => (m, Some(*v), *w),
        _ => return None,
    };
    Some(ModelPath {
        model: unescape(model),
        version: version.map(unescape),
        what: what.to_string(),
    })
}

async fn handle(ctx: &Ctx, req: Request) -> Response {
    let get = req.method == Method::GET;
    match req.path.as_str() {
        "/v2/health/ready" | "/v2/health/live" | "/health" if get => {
            Response::full(StatusCode::OK, "text/plain", "")
        }
        "/v2" if get => Response::json(
            StatusCode::OK,
            json!({"name": "infer-bench-sim", "version": env!("CARGO_PKG_VERSION"),
                   "extensions": ["classification", "binary_tensor_data", "model_configuration", "model_repository", "statistics"]})
            .to_string(),
        ),
        "/metrics" if get => Response::full(
            StatusCode::OK,
            "text/plain; version=0.0.4",
            metrics(ctx),
        ),
        "/v2/repository/index" if req.method == Method::POST => Response::json(
            StatusCode::OK,
            json!([{"name": ctx.served.names.first(), "version": VERSION, "state": "READY"}])
                .to_string(),
        ),
        "/v2/models/stats" if get => Response::json(StatusCode::OK, stats(ctx).to_string()),
        path => {
            let Some(p) = model_path(path) else {
                return error(
                    StatusCode::NOT_FOUND,
                    &format!("no route for {} {}", req.method, req.path),
                );
            };
            if !ctx.served.names.contains(&p.model) {
                return bad(&format!(
                    "Request for unknown model: '{}' is not found",
                    p.model
                ));
            }
            if let Some(v) = p.version.as_deref().filter(|v| *v != VERSION) {
                return bad(&format!(
                    "Request for unknown model: '{}' version {v} is not found",
                    p.model
                ));
            }
            match (req.method.clone(), p.what.as_str()) {
                (Method::GET, "") => {
                    Response::json(StatusCode::OK, metadata(ctx.served.net, &p.model).to_string())
                }
                (Method::GET, "ready") => Response::full(StatusCode::OK, "text/plain", ""),
                (Method::GET, "config") => {
                    Response::json(StatusCode::OK, config(ctx.served.net, &p.model).to_string())
                }
                (Method::GET, "stats") => Response::json(StatusCode::OK, stats(ctx).to_string()),
                (Method::POST, "infer") => infer(ctx, &req, &p.model).await,
                _ => error(
                    StatusCode::NOT_FOUND,
                    &format!("no route for {} {}", req.method, req.path),
                ),
            }
        }
    }
}

fn shape_json(t: &TensorDecl, batching: bool) -> Vec<i64> {
    let lead = batching.then_some(-1);
    lead.into_iter()
        .chain(t.shape.iter().map(|d| *d as i64))
        .collect()
}

/// `GET /v2/models/{m}`: the batch leads every shape as -1.
fn metadata(net: &Network, name: &str) -> serde_json::Value {
    let tensors = |ts: &[TensorDecl]| -> Vec<serde_json::Value> {
        ts.iter()
            .map(|t| json!({"name": t.name, "datatype": t.datatype.name(), "shape": shape_json(t, true)}))
            .collect()
    };
    json!({
        "name": name,
        "versions": [VERSION],
        "platform": "infer-bench-sim",
        "inputs": tensors(net.inputs),
        "outputs": tensors(net.outputs),
    })
}

/// `GET /v2/models/{m}/config`: Triton's model configuration.
fn config(net: &Network, name: &str) -> serde_json::Value {
    let tensors = |ts: &[TensorDecl]| -> Vec<serde_json::Value> {
        ts.iter()
            .map(|t| json!({"name": t.name, "data_type": format!("TYPE_{}", match t.datatype { DataType::Bytes => "STRING", d => d.name() }), "dims": t.shape}))
            .collect()
    };
    json!({
        "name": name,
        "platform": "infer-bench-sim",
        "backend": "infer-bench-sim",
        "version_policy": {"latest": {"num_versions": 1}},
        "max_batch_size": net.max_batch_size,
        "input": tensors(net.inputs),
        "output": tensors(net.outputs),
        "instance_group": [{"name": name, "kind": "KIND_GPU", "count": 1, "gpus": [0]}],
    })
}

/// `GET /v2/models/{m}/stats`, Triton's shape.
fn stats(ctx: &Ctx) -> serde_json::Value {
    let c = *ctx.counters.lock();
    let d = |(count, ns): (u64, u64)| json!({"count": count, "ns": ns});
    json!({"model_stats": [{
        "name": ctx.served.names.first(),
        "version": VERSION,
        "last_inference": c.last_inference_ms,
        "inference_count": c.inference_count,
        "execution_count": c.execution_count,
        "inference_stats": {
            "success": d(c.success),
            "fail": d(c.fail),
            "queue": d(c.queue),
            "compute_input": d(c.compute_input),
            "compute_infer": d(c.compute_infer),
            "compute_output": d(c.compute_output),
            "cache_hit": d((0, 0)),
            "cache_miss": d((0, 0)),
        },
        "batch_stats": [],
    }]})
}

/// The counters in Triton's Prometheus names, and the modelled GPU in
/// dcgm-exporter's (as the language-model simulator serves them).
fn metrics(ctx: &Ctx) -> String {
    let c = *ctx.counters.lock();
    let busy = {
        let mut last = ctx.gpu.last.lock();
        let now = Instant::now();
        let wall = now.duration_since(last.0).as_nanos() as f64;
        let busy = if wall > 0.0 {
            (c.compute_infer.1.saturating_sub(last.1) as f64 / wall).clamp(0.0, 1.0)
        } else {
            0.0
        };
        *last = (now, c.compute_infer.1);
        busy
    };
    let g = &ctx.gpu;
    let mut dcgm = String::new();
    for (metric, help, value) in [
        (
            "DCGM_FI_PROF_SM_ACTIVE",
            "fraction of the time since the last scrape the instance computed.",
            busy,
        ),
        (
            "DCGM_FI_DEV_GPU_UTIL",
            "GPU utilization (in %).",
            (busy * 100.0).round(),
        ),
        (
            "DCGM_FI_DEV_FB_USED",
            "framebuffer memory used (in MiB): the weights and a runtime reserve.",
            g.used_mib,
        ),
        (
            "DCGM_FI_DEV_FB_FREE",
            "framebuffer memory free (in MiB).",
            (g.total_mib - g.used_mib).max(0.0),
        ),
    ] {
        dcgm.push_str(&format!(
            "# HELP {metric} {}: {help}\n# TYPE {metric} gauge\n{metric}{{gpu=\"0\",UUID=\"SIM-00000000\",device=\"nvidia0\",modelName=\"{}\",Hostname=\"infer-bench-sim\"}} {value}\n",
            crate::gpu::MODELLED_HELP,
            g.name
        ));
    }
    let model = ctx.served.names.first().cloned().unwrap_or_default();
    let l = format!(
        "{{model=\"{}\",version=\"{VERSION}\"}}",
        infer_bench_results::outside::prom_label(&model)
    );
    let mut out = String::new();
    for (name, help, v) in [
        (
            "nv_inference_request_success",
            "Number of successful inference requests, all batch sizes",
            c.success.0,
        ),
        (
            "nv_inference_request_failure",
            "Number of failed inference requests, all batch sizes",
            c.fail.0,
        ),
        (
            "nv_inference_count",
            "Number of inferences performed (does not include cached requests)",
            c.inference_count,
        ),
        (
            "nv_inference_exec_count",
            "Number of model executions performed (does not include cached requests)",
            c.execution_count,
        ),
        (
            "nv_inference_request_duration_us",
            "Cumulative inference request duration in microseconds (includes cached requests)",
            c.success.1 / 1000,
        ),
        (
            "nv_inference_queue_duration_us",
            "Cumulative inference queuing duration in microseconds (includes cached requests)",
            c.queue.1 / 1000,
        ),
        (
            "nv_inference_compute_input_duration_us",
            "Cumulative compute input duration in microseconds (does not include cached requests)",
            c.compute_input.1 / 1000,
        ),
        (
            "nv_inference_compute_infer_duration_us",
            "Cumulative compute inference duration in microseconds (does not include cached requests)",
            c.compute_infer.1 / 1000,
        ),
        (
            "nv_inference_compute_output_duration_us",
            "Cumulative inference compute output duration in microseconds (does not include cached requests)",
            c.compute_output.1 / 1000,
        ),
    ] {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} counter\n{name}{l} {v}\n"
        ));
    }
    out.push_str(&dcgm);
    out
}

/// A tensor's parameters, as far as the simulator reads them.
#[derive(Debug, Default, Deserialize)]
struct Params {
    #[serde(default)]
    binary_data_size: Option<u64>,
    #[serde(default)]
    binary_data: Option<bool>,
    #[serde(default)]
    binary_data_output: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct InputWire {
    name: String,
    datatype: String,
    shape: Vec<i64>,
    #[serde(default)]
    parameters: Option<Params>,
    #[serde(default)]
    data: Option<infer_bench_spec::tensor::Elements>,
}

#[derive(Debug, Deserialize)]
struct OutputWire {
    name: String,
    #[serde(default)]
    parameters: Option<Params>,
}

#[derive(Debug, Deserialize)]
struct InferWire {
    #[serde(default)]
    id: Option<String>,
    inputs: Vec<InputWire>,
    #[serde(default)]
    outputs: Option<Vec<OutputWire>>,
    #[serde(default)]
    parameters: Option<Params>,
}

/// A request the model takes.
#[derive(Debug, PartialEq)]
struct Admitted {
    id: Option<String>,
    batch: u32,
    input_bytes: u64,
    /// The outputs to answer (index into the network's outputs) and
    /// whether each goes as binary.
    outputs: Vec<(usize, bool)>,
}

fn dims(s: &[i64]) -> String {
    format!(
        "[{}]",
        s.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
    )
}

/// Reads an infer request's body (its JSON header `header_len` bytes long
/// when binary, then the tensors' bytes) against `net`; Err: why it is
/// refused, in Triton's words where Triton has some.
/// Why a request is refused, in Triton's words (the 400's `error`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Refusal(String);

impl From<String> for Refusal {
    fn from(s: String) -> Refusal {
        Refusal(s)
    }
}

impl From<&str> for Refusal {
    fn from(s: &str) -> Refusal {
        Refusal(s.to_string())
    }
}

fn admit(
    net: &Network,
    model: &str,
    body: &[u8],
    header_len: Option<usize>,
) -> Result<Admitted, Refusal> {
    let (header, binary) = match header_len {
        Some(n) if n > body.len() => {
            return Err(Refusal::from(format!(
                "Inference-Header-Content-Length is {n}, and the body holds {} bytes",
                body.len()
            )));
        }
        Some(n) => body.split_at(n),
        None => (body, &[][..]),
    };
    let wire: InferWire = serde_json::from_slice(header)
        .map_err(|e| format!("failed to parse the request JSON buffer: {e}"))?;
    for i in &wire.inputs {
        if !net.inputs.iter().any(|t| t.name == i.name) {
            return Err(Refusal::from(format!(
                "unexpected inference input '{}' for model '{model}'",
                i.name
            )));
        }
        if wire.inputs.iter().filter(|j| j.name == i.name).count() > 1 {
            return Err(Refusal::from(format!(
                "input '{}' is given more than once",
                i.name
            )));
        }
    }
    if wire.inputs.len() != net.inputs.len() {
        return Err(Refusal::from(format!(
            "expected {} inputs but got {} inputs for model '{model}'",
            net.inputs.len(),
            wire.inputs.len()
        )));
    }
    let mut batch: Option<(u32, &str)> = None;
    let mut binary_total = 0u64;
    let mut input_bytes = 0u64;
    for t in net.inputs {
        let Some(i) = wire.inputs.iter().find(|i| i.name == t.name) else {
            return Err(Refusal::from(format!(
                "expected {} inputs but got {} inputs for model '{model}'",
                net.inputs.len(),
                wire.inputs.len()
            )));
        };
        if i.datatype != t.datatype.name() {
            return Err(Refusal::from(format!(
                "inference input '{}' data-type is '{}', but model '{model}' expects '{}'",
                t.name, i.datatype, t.datatype
            )));
        }
        let fits = i.shape.len() == t.shape.len() + 1
            && i.shape[0] >= 1
            && i.shape[1..]
                .iter()
                .zip(t.shape)
                .all(|(a, b)| *a == *b as i64);
        if !fits {
            return Err(Refusal::from(format!(
                "unexpected shape for input '{}' for model '{model}'. Expected {}, got {}",
                t.name,
                dims(&shape_json(t, true)),
                dims(&i.shape)
            )));
        }
        let b = u32::try_from(i.shape[0]).unwrap_or(u32::MAX);
        if b > net.max_batch_size {
            return Err(Refusal::from(format!(
                "inference request batch-size must be <= {} for '{model}'",
                net.max_batch_size
            )));
        }
        match batch {
            Some((other, name)) if other != b => {
                return Err(Refusal::from(format!(
                    "the inputs disagree on the batch: '{name}' has {other}, '{}' has {b}",
                    t.name
                )));
            }
            _ => batch = Some((b, t.name)),
        }
        let elements = u64::from(b) * t.shape.iter().product::<u64>();
        let bytes = elements * t.datatype.size().unwrap_or(1) as u64;
        input_bytes += bytes;
        match (
            i.parameters.as_ref().and_then(|p| p.binary_data_size),
            &i.data,
        ) {
            (Some(size), _) => {
                if size != bytes {
                    return Err(Refusal::from(format!(
                        "input '{}' has binary_data_size {size}; its shape {} of {} is {bytes} bytes",
                        t.name,
                        dims(&i.shape),
                        t.datatype
                    )));
                }
                binary_total += size;
            }
            (None, Some(c)) => {
                if c.0 != elements {
                    return Err(Refusal::from(format!(
                        "unexpected number of elements for input '{}': its shape {} holds {elements}, and its data has {}",
                        t.name,
                        dims(&i.shape),
                        c.0
                    )));
                }
            }
            (None, None) => {
                return Err(Refusal::from(format!(
                    "input '{}' has neither data nor parameters.binary_data_size",
                    t.name
                )));
            }
        }
    }
    if binary_total != binary.len() as u64 {
        return Err(Refusal::from(format!(
            "the inputs' binary_data_size add up to {binary_total} bytes, and {} bytes follow the JSON header",
            binary.len()
        )));
    }
    let all_binary = wire
        .parameters
        .as_ref()
        .and_then(|p| p.binary_data_output)
        .unwrap_or(false);
    let outputs = match &wire.outputs {
        None => (0..net.outputs.len()).map(|k| (k, all_binary)).collect(),
        Some(asked) => {
            let mut v = Vec::new();
            for o in asked {
                let Some(k) = net.outputs.iter().position(|t| t.name == o.name) else {
                    return Err(Refusal::from(format!(
                        "unexpected inference output '{}' for model '{model}'",
                        o.name
                    )));
                };
                let binary = o
                    .parameters
                    .as_ref()
                    .and_then(|p| p.binary_data)
                    .unwrap_or(all_binary);
                v.push((k, binary));
            }
            v
        }
    };
    Ok(Admitted {
        id: wire.id,
        batch: batch.map_or(1, |(b, _)| b),
        input_bytes,
        outputs,
    })
}

/// The answer to an admitted request: its outputs, zeros of the right
/// shapes, binary ones after the JSON header.
fn answer(ctx: &Ctx, model: &str, a: &Admitted) -> Response {
    let net = ctx.served.net;
    let mut binary: Vec<usize> = Vec::new();
    let mut header = String::with_capacity(256);
    header.push('{');
    if let Some(id) = &a.id {
        header.push_str(&format!("\"id\":{},", json!(id)));
    }
    header.push_str(&format!(
        "\"model_name\":{},\"model_version\":\"{VERSION}\",\"outputs\":[",
        json!(model)
    ));
    for (n, (k, bin)) in a.outputs.iter().enumerate() {
        let t = &net.outputs[*k];
        let elements = (u64::from(a.batch) * t.shape.iter().product::<u64>()) as usize;
        let shape: Vec<u64> = std::iter::once(u64::from(a.batch))
            .chain(t.shape.iter().copied())
            .collect();
        if n > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            "{{\"name\":\"{}\",\"datatype\":\"{}\",\"shape\":{}",
            t.name,
            t.datatype,
            json!(shape)
        ));
        if *bin {
            let size = elements * t.datatype.size().unwrap_or(1);
            header.push_str(&format!(
                ",\"parameters\":{{\"binary_data_size\":{size}}}}}"
            ));
            binary.push(size);
        } else {
            header.push_str(",\"data\":[");
            if elements > 0 {
                header.reserve(elements * 2);
                header.push('0');
                for _ in 1..elements {
                    header.push_str(",0");
                }
            }
            header.push_str("]}");
        }
    }
    header.push_str("]}");
    if binary.is_empty() {
        return Response::json(StatusCode::OK, header);
    }
    let header_len = header.len();
    let total: usize = binary.iter().sum();
    let length =
        |n: usize| HeaderValue::from_str(&n.to_string()).expect("a number is a header value");
    let kind = HeaderName::from_static(HEADER_LENGTH);
    if total < SEPARATE_CHUNK {
        let mut body = header.into_bytes();
        body.resize(header_len + total, 0);
        return Response::full(StatusCode::OK, "application/octet-stream", body)
            .header(kind, length(header_len));
    }
    let (response, sender) = Response::stream(StatusCode::OK, "application/octet-stream");
    let zeros = ctx.zeros.clone();
    tokio::spawn(async move {
        if sender.send(Bytes::from(header)).await.is_err() {
            return;
        }
        let mut left = total;
        while left > 0 {
            let n = left.min(zeros.len());
            if sender.send(zeros.slice(..n)).await.is_err() {
                return;
            }
            left -= n;
        }
    });
    response
        .header(kind, length(header_len))
        .header(CONTENT_LENGTH, length(header_len + total))
}

async fn infer(ctx: &Ctx, req: &Request, model: &str) -> Response {
    let arrival = req.received;
    let header_len = match req.headers.get(HEADER_LENGTH) {
        None => None,
        Some(v) => match v.to_str().ok().and_then(|s| s.trim().parse::<usize>().ok()) {
            Some(n) => Some(n),
            None => {
                return fail(
                    ctx,
                    arrival,
                    "Inference-Header-Content-Length is not a number of bytes",
                );
            }
        },
    };
    let admitted = match admit(ctx.served.net, model, &req.body, header_len) {
        Ok(a) => a,
        Err(why) => return fail(ctx, arrival, &why.0),
    };
    let output_bytes: u64 = admitted
        .outputs
        .iter()
        .map(|(k, _)| {
            let t = &ctx.served.net.outputs[*k];
            u64::from(admitted.batch)
                * t.shape.iter().product::<u64>()
                * t.datatype.size().unwrap_or(1) as u64
        })
        .sum();
    let (done, timing) = oneshot::channel();
    let job = Job {
        arrival,
        batch: admitted.batch,
        input_bytes: admitted.input_bytes,
        output_bytes,
        done,
    };
    if ctx.jobs.send(job).is_err() {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the simulator is shutting down",
        );
    }
    let Ok(t) = timing.await else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the simulator is shutting down",
        );
    };
    let response = answer(ctx, model, &admitted);
    let total = arrival.elapsed().as_nanos() as u64;
    let add = |a: &mut (u64, u64), ns: u64| {
        a.0 += 1;
        a.1 += ns;
    };
    let mut c = ctx.counters.lock();
    add(&mut c.success, total);
    add(&mut c.queue, t.queue);
    add(&mut c.compute_input, t.input);
    add(&mut c.compute_infer, t.infer);
    add(&mut c.compute_output, t.output);
    c.inference_count += u64::from(admitted.batch);
    c.execution_count += 1;
    c.last_inference_ms = super::now_unix() * 1000;
    drop(c);
    response
}

/// A refused request: counted as a failure of the model, answered 400.
fn fail(ctx: &Ctx, arrival: Instant, why: &str) -> Response {
    let mut c = ctx.counters.lock();
    c.fail.0 += 1;
    c.fail.1 += arrival.elapsed().as_nanos() as u64;
    drop(c);
    bad(why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use tokio::io::AsyncWriteExt;

    fn resnet() -> &'static Network {
        catalog::network("resnet-50").unwrap()
    }

    /// A binary request of `batch` images (`bytes` of binary data after a
    /// header that declares `declared` of them) asking for binary probs.
    fn binary_body(batch: i64, declared: usize, bytes: usize) -> (Vec<u8>, usize) {
        let header = json!({
            "inputs": [{"name": "images", "datatype": "FP32", "shape": [batch, 3, 224, 224],
                        "parameters": {"binary_data_size": declared}}],
            "outputs": [{"name": "probs", "parameters": {"binary_data": true}}],
        })
        .to_string();
        let mut body = header.clone().into_bytes();
        body.resize(header.len() + bytes, 0);
        (body, header.len())
    }

    fn json_body(batch: i64, elements: usize) -> Vec<u8> {
        let mut s = format!(
            "{{\"id\":\"r1\",\"inputs\":[{{\"name\":\"images\",\"datatype\":\"FP32\",\"shape\":[{batch},3,224,224],\"data\":["
        );
        s.push_str(&vec!["0.5"; elements].join(","));
        s.push_str("]}]}");
        s.into_bytes()
    }

    #[test]
    fn metadata_leads_with_the_batch_and_config_has_max_batch_size() {
        let m = metadata(resnet(), "classifier");
        assert_eq!(m["name"], "classifier");
        assert_eq!(m["versions"], json!(["1"]));
        assert_eq!(
            m["inputs"],
            json!([{"name": "images", "datatype": "FP32", "shape": [-1, 3, 224, 224]}])
        );
        assert_eq!(
            m["outputs"],
            json!([{"name": "probs", "datatype": "FP32", "shape": [-1, 1000]}])
        );
        let bert = metadata(catalog::network("bert-base").unwrap(), "bert");
        assert_eq!(bert["inputs"][1]["name"], "attention_mask");
        assert_eq!(bert["inputs"][1]["datatype"], "INT64");
        assert_eq!(bert["outputs"][0]["shape"], json!([-1, 128, 768]));
        let c = config(resnet(), "classifier");
        assert_eq!(c["max_batch_size"], 64);
        assert_eq!(c["input"][0]["data_type"], "TYPE_FP32");
        assert_eq!(c["input"][0]["dims"], json!([3, 224, 224]));
    }

    #[test]
    fn requests_are_admitted_as_binary_or_json_and_refused_saying_why() {
        let image = 3 * 224 * 224;
        let (body, h) = binary_body(2, 2 * image * 4, 2 * image * 4);
        let a = admit(resnet(), "m", &body, Some(h)).unwrap();
        assert_eq!((a.batch, a.input_bytes), (2, 2 * image as u64 * 4));
        assert_eq!(a.outputs, vec![(0, true)]);
        let a = admit(resnet(), "m", &json_body(1, image), None).unwrap();
        assert_eq!((a.batch, a.id.as_deref()), (1, Some("r1")));
        assert_eq!(a.outputs, vec![(0, false)]);
        let refused = |body: &[u8], h: Option<usize>| admit(resnet(), "m", body, h).unwrap_err().0;
        // A binary size that is not the shape's, and bytes that are not
        // the sizes'.
        let (body, h) = binary_body(2, image * 4, image * 4);
        assert!(
            refused(&body, Some(h)).contains("binary_data_size 602112"),
            "{}",
            refused(&body, Some(h))
        );
        let (body, h) = binary_body(1, image * 4, image * 4 + 3);
        assert!(refused(&body, Some(h)).contains("follow the JSON header"));
        assert!(refused(&body, Some(body.len() + 1)).contains("Inference-Header-Content-Length"));
        // JSON with the wrong number of elements; not JSON at all.
        assert!(refused(&json_body(1, 7), None).contains("unexpected number of elements"));
        assert!(refused(b"{\"inputs\": [", None).contains("failed to parse"));
        // Names, datatypes, shapes and the batch.
        let one = |name: &str, dt: &str, shape: &str| {
            format!(
                "{{\"inputs\":[{{\"name\":\"{name}\",\"datatype\":\"{dt}\",\"shape\":{shape},\"data\":[1]}}]}}"
            )
        };
        let r = refused(one("pixels", "FP32", "[1,3,224,224]").as_bytes(), None);
        assert_eq!(r, "unexpected inference input 'pixels' for model 'm'");
        let r = refused(one("images", "FP16", "[1,3,224,224]").as_bytes(), None);
        assert_eq!(
            r,
            "inference input 'images' data-type is 'FP16', but model 'm' expects 'FP32'"
        );
        let r = refused(one("images", "FP32", "[1,3,224,200]").as_bytes(), None);
        assert_eq!(
            r,
            "unexpected shape for input 'images' for model 'm'. Expected [-1,3,224,224], got [1,3,224,200]"
        );
        let r = refused(one("images", "FP32", "[3,224,224]").as_bytes(), None);
        assert!(r.starts_with("unexpected shape"), "{r}");
        let r = refused(one("images", "FP32", "[65,3,224,224]").as_bytes(), None);
        assert_eq!(r, "inference request batch-size must be <= 64 for 'm'");
        let bert = catalog::network("bert-base").unwrap();
        let r = admit(
            bert,
            "b",
            one("input_ids", "INT64", "[1,128]").as_bytes(),
            None,
        )
        .unwrap_err()
        .0;
        assert_eq!(r, "expected 2 inputs but got 1 inputs for model 'b'");
        let asked = br#"{"inputs":[{"name":"images","datatype":"FP32","shape":[1,3,224,224],"parameters":{"binary_data_size":602112}}],"outputs":[{"name":"logits"}]}"#;
        let mut body = asked.to_vec();
        body.resize(asked.len() + 602_112, 0);
        let r = refused(&body, Some(asked.len()));
        assert_eq!(r, "unexpected inference output 'logits' for model 'm'");
    }

    fn point(spec: &str) -> PointConfig {
        let spec = infer_bench_spec::compile("t.toml", spec, std::path::Path::new(".")).unwrap();
        let plan = infer_bench_spec::plan::Plan::build(&spec).unwrap();
        plan.points[0].config.clone()
    }

    async fn send(
        addr: SocketAddr,
        path: &str,
        body: &[u8],
        header_len: Option<usize>,
    ) -> infer_bench_testkit::wire::Wire {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let extra = header_len.map_or(String::new(), |h| {
            format!("Inference-Header-Content-Length: {h}\r\n")
        });
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/octet-stream\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(body).await.unwrap();
        infer_bench_testkit::wire::read_response(&mut stream).await
    }

    #[test]
    fn serves_kserve_v2_and_counts_what_it_served() {
        let cfg = point(
            "name = \"t\"\n[targets.sim]\nkind = \"sim\"\ngpu = \"a100-80gb\"\n\
             [models.resnet]\nkind = \"vision\"\npreset = \"resnet-50\"\nserved_name = \"classifier\"\n\
             [workloads.w]\napi = \"kserve\"\nbatch = 4\n[load]\nconcurrency = 1\nrequests = 1\n",
        );
        let server = SimServer::start(&cfg).unwrap();
        let base = server.base_url();
        assert!(!base.ends_with("/v1"), "{base}");
        let addr: SocketAddr = base.trim_start_matches("http://").parse().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            use infer_bench_testkit::wire::request;
            assert_eq!(
                request(addr, "GET", "/v2/health/ready", "").await.status,
                200
            );
            assert_eq!(
                request(addr, "GET", "/v2/health/live", "").await.status,
                200
            );
            assert_eq!(
                request(addr, "GET", "/v2/models/classifier/ready", "")
                    .await
                    .status,
                200
            );
            assert_eq!(
                request(addr, "GET", "/v2/models/classifier/versions/1/ready", "")
                    .await
                    .status,
                200
            );
            // Triton's repository index: the model, ready, under its name.
            let index = request(addr, "POST", "/v2/repository/index", r#"{"ready":true}"#).await;
            assert_eq!(index.status, 200);
            assert_eq!(
                serde_json::from_slice::<serde_json::Value>(&index.body()).unwrap(),
                json!([{"name": "classifier", "version": "1", "state": "READY"}])
            );
            let unknown = request(addr, "GET", "/v2/models/x/ready", "").await;
            assert_eq!(unknown.status, 400);
            assert_eq!(
                serde_json::from_slice::<serde_json::Value>(&unknown.body()).unwrap(),
                json!({"error": "Request for unknown model: 'x' is not found"})
            );
            let meta: serde_json::Value = serde_json::from_slice(
                &request(addr, "GET", "/v2/models/classifier", "")
                    .await
                    .body(),
            )
            .unwrap();
            assert_eq!(meta["inputs"][0]["shape"], json!([-1, 3, 224, 224]));
            let config: serde_json::Value = serde_json::from_slice(
                &request(addr, "GET", "/v2/models/classifier/config", "")
                    .await
                    .body(),
            )
            .unwrap();
            assert_eq!(config["max_batch_size"], 64);

            // Binary in, binary out: the header's length, then 4 x 1000 floats.
            let image = 3 * 224 * 224 * 4;
            let (body, h) = binary_body(4, 4 * image, 4 * image);
            let w = send(addr, "/v2/models/classifier/infer", &body, Some(h)).await;
            assert_eq!(w.status, 200, "{}", w.body_str());
            let header_len: usize = w
                .head
                .lines()
                .find_map(|l| l.strip_prefix("inference-header-content-length: "))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            let out = w.body();
            let header: serde_json::Value = serde_json::from_slice(&out[..header_len]).unwrap();
            assert_eq!(header["model_name"], "classifier");
            assert_eq!(header["outputs"][0]["shape"], json!([4, 1000]));
            assert_eq!(
                header["outputs"][0]["parameters"]["binary_data_size"],
                16_000
            );
            assert_eq!(out.len() - header_len, 16_000);

            // JSON in, JSON out.
            let w = send(
                addr,
                "/v2/models/classifier/versions/1/infer",
                &json_body(1, image / 4),
                None,
            )
            .await;
            assert_eq!(w.status, 200);
            let answer: serde_json::Value = serde_json::from_slice(&w.body()).unwrap();
            assert_eq!(answer["id"], "r1");
            assert_eq!(answer["outputs"][0]["shape"], json!([1, 1000]));
            assert_eq!(answer["outputs"][0]["data"].as_array().unwrap().len(), 1000);

            // A malformed body: 400 with what does not fit.
            let w = send(addr, "/v2/models/classifier/infer", &json_body(1, 5), None).await;
            assert_eq!(w.status, 400);
            let e: serde_json::Value = serde_json::from_slice(&w.body()).unwrap();
            assert!(
                e["error"]
                    .as_str()
                    .unwrap()
                    .contains("unexpected number of elements"),
                "{e}"
            );

            let stats: serde_json::Value = serde_json::from_slice(
                &request(addr, "GET", "/v2/models/classifier/stats", "")
                    .await
                    .body(),
            )
            .unwrap();
            let m = &stats["model_stats"][0];
            let s = &m["inference_stats"];
            let n = |v: &serde_json::Value| v.as_u64().unwrap();
            assert_eq!(m["name"], "classifier");
            assert_eq!((n(&m["inference_count"]), n(&m["execution_count"])), (5, 2));
            assert_eq!((n(&s["success"]["count"]), n(&s["fail"]["count"])), (2, 1));
            for k in ["queue", "compute_input", "compute_infer", "compute_output"] {
                assert_eq!(n(&s[k]["count"]), 2, "{k}");
            }
            let parts: u64 = ["queue", "compute_input", "compute_infer", "compute_output"]
                .iter()
                .map(|k| n(&s[*k]["ns"]))
                .sum();
            assert!(parts <= n(&s["success"]["ns"]), "{stats}");
            // Each execution at least its overhead; batch 4 costs more than batch 1.
            assert!(n(&s["compute_infer"]["ns"]) >= 2 * 500_000);
            let metrics = request(addr, "GET", "/metrics", "").await.body_str();
            assert!(
                metrics.contains("nv_inference_count{model=\"classifier\",version=\"1\"} 5"),
                "{metrics}"
            );
        });
        server.stop();
    }
}
