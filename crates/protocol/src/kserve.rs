//! `api = "kserve"`: the KServe v2 inference protocol over HTTP, which
//! Triton Inference Server, KServe, TorchServe and Seldon serve. Before a
//! point runs, [`handshake`] asks the server whether it and the model are
//! ready and reads the model's metadata (its inputs' and outputs' names,
//! datatypes and shapes; on Triton, its `max_batch_size`), and checks the
//! workload's declared inputs against it, or takes them all from it: a
//! clear error before the run, not a failure per request. Requests are
//! `POST {base_url}/v2/models/{model}[/versions/{v}]/infer`, their tensors
//! written with the binary tensor extension (a JSON header, then the raw
//! bytes; `Inference-Header-Content-Length` says where the header ends) or
//! as JSON numbers. Bodies are built once per point, a few distinct ones
//! (`POOL_BYTES`), and taken in turn, so building a 20 MB request never
//! counts as the client's delay. Every answer's outputs are checked as
//! the metadata says (names, datatypes, shapes with the batch leading,
//! element counts, binary sizes) without keeping them; a mismatch fails
//! the request as `malformed`. [`stats`] reads Triton's per-model
//! statistics (`/v2/models/{model}/stats`), whose difference over a run
//! splits a request's time into queue, compute and the rest.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::record::ErrorClass;
use crate::{EventInfo, Protocol, Unreadable, Usage};
use infer_bench_spec::tensor::{DataType, TensorInput, Tensors};
use infer_bench_workload::Prompt;

/// Bodies built ahead per point hold about this many bytes together (at
/// least two bodies, at most [`POOL_MAX`]).
pub const POOL_BYTES: usize = 64 << 20;
/// Most distinct bodies per point.
pub const POOL_MAX: usize = 16;
/// Most bytes of a metadata, config, readiness or statistics answer read.
pub const META_CAP: usize = 1 << 20;

/// One tensor as the model's metadata declares it: its shape with `-1`
/// where any length goes (on a batching model, the leading batch).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct TensorMeta {
    pub name: String,
    pub datatype: String,
    pub shape: Vec<i64>,
}

/// `GET /v2/models/{model}`: what the model takes and gives.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Metadata {
    pub name: String,
    #[serde(default)]
    pub platform: Option<String>,
    #[serde(default)]
    pub versions: Vec<String>,
    #[serde(default)]
    pub inputs: Vec<TensorMeta>,
    #[serde(default)]
    pub outputs: Vec<TensorMeta>,
}

/// Why a kserve point could not start: said before any request is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KserveError {
    #[error("the server at {url} is not ready: {why}")]
    ServerNotReady { url: String, why: String },
    #[error("model \"{model}\" is not ready on the server: {why}")]
    ModelNotReady { model: String, why: String },
    #[error("the metadata of model \"{model}\" could not be read: {why}")]
    Metadata { model: String, why: String },
    #[error("model \"{model}\" does not take what the workload sends: {why}")]
    Mismatch { model: String, why: String },
}

/// What does not fit, in one sentence: the workload against the model's
/// metadata, an answer against the plan, statistics against their format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Misfit(pub String);

impl From<String> for Misfit {
    fn from(s: String) -> Misfit {
        Misfit(s)
    }
}

impl From<&str> for Misfit {
    fn from(s: &str) -> Misfit {
        Misfit(s.to_string())
    }
}

/// What the server answered a GET: its status and body (up to a cap), or
/// why there was no answer.
pub type Answer = Result<(u16, Vec<u8>), crate::http::NoAnswer>;

/// The path of a model (and version), its name escaped.
pub fn model_path(model: &str, version: Option<&str>) -> String {
    let escape = |s: &str| -> String {
        url::form_urlencoded::byte_serialize(s.as_bytes())
            .collect::<String>()
            .replace('+', "%20")
    };
    match version {
        Some(v) => format!("v2/models/{}/versions/{}", escape(model), escape(v)),
        None => format!("v2/models/{}", escape(model)),
    }
}

/// Readiness and metadata: asks `get` (a GET relative to the base URL)
/// whether the server and the model are ready, reads the model's metadata
/// (and Triton's config, for `max_batch_size`, where the server has it)
/// and builds the protocol that sends `tensors` to it.
pub async fn handshake<F, Fut>(
    get: F,
    base_url: &str,
    tensors: &Tensors,
    model: &str,
    workload: &infer_bench_spec::Workload,
    files: &infer_bench_workload::tensor::Files,
) -> Result<Kserve, KserveError>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Answer>,
{
    let said = |status: u16, body: &[u8]| -> String {
        let msg = crate::openai::error_body_message(body);
        if msg.is_empty() {
            format!("HTTP {status}")
        } else {
            format!("HTTP {status}: {msg}")
        }
    };
    match get("v2/health/ready".into()).await {
        Ok((200, _)) => {}
        Ok((s, b)) => {
            return Err(KserveError::ServerNotReady {
                url: base_url.into(),
                why: format!("GET /v2/health/ready answered {}", said(s, &b)),
            });
        }
        Err(why) => {
            return Err(KserveError::ServerNotReady {
                url: base_url.into(),
                why: format!("GET /v2/health/ready: {why}"),
            });
        }
    }
    let path = model_path(model, tensors.version.as_deref());
    match get(format!("{path}/ready")).await {
        Ok((200, _)) => {}
        Ok((s, b)) => {
            return Err(KserveError::ModelNotReady {
                model: model.into(),
                why: format!("GET /{path}/ready answered {}", said(s, &b)),
            });
        }
        Err(why) => {
            return Err(KserveError::ModelNotReady {
                model: model.into(),
                why: format!("GET /{path}/ready: {why}"),
            });
        }
    }
    let meta = match get(path.clone()).await {
        Ok((200, b)) => {
            serde_json::from_slice::<Metadata>(&b).map_err(|e| KserveError::Metadata {
                model: model.into(),
                why: format!("GET /{path} answered what is not KServe v2 model metadata: {e}"),
            })?
        }
        Ok((s, b)) => {
            return Err(KserveError::Metadata {
                model: model.into(),
                why: format!("GET /{path} answered {}", said(s, &b)),
            });
        }
        Err(why) => {
            return Err(KserveError::Metadata {
                model: model.into(),
                why: format!("GET /{path}: {why}"),
            });
        }
    };
    // Triton's own extension says for certain whether the model batches;
    // another server's metadata is read on its own.
    let max_batch = match get(format!("{path}/config")).await {
        Ok((200, b)) => serde_json::from_slice::<serde_json::Value>(&b)
            .ok()
            .and_then(|v| v.get("max_batch_size").and_then(serde_json::Value::as_u64)),
        _ => None,
    };
    let plan = resolve(tensors, &meta, max_batch).map_err(|why| KserveError::Mismatch {
        model: model.into(),
        why: why.0,
    })?;
    Ok(Kserve::new(plan, tensors, model, workload, files))
}

/// What a point sends and expects once the metadata is read.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub inputs: Vec<TensorInput>,
    /// Whether the batch leads every tensor's shape (a batching model);
    /// if not, a request is one item and shapes are sent as declared.
    pub batching: bool,
    pub batch: u32,
    /// The outputs, shapes with the batch resolved.
    pub outputs: Vec<(String, DataType, Vec<i64>)>,
}

/// Whether a model takes a leading batch dimension, as its metadata and
/// Triton's config say it without a declared input: the config's
/// `max_batch_size` over 0, else every input's shape leading with -1.
pub fn batches(meta: &Metadata, max_batch: Option<u64>) -> bool {
    match max_batch {
        Some(m) => m > 0,
        None => !meta.inputs.is_empty() && meta.inputs.iter().all(|m| m.shape.first() == Some(&-1)),
    }
}

/// The inputs to send (as declared, or every input of the metadata) and
/// the outputs to expect, checked against the model's metadata; Err: what
/// does not fit, in one sentence.
pub fn resolve(tensors: &Tensors, meta: &Metadata, max_batch: Option<u64>) -> Result<Plan, Misfit> {
    let shape_of = |s: &[i64]| -> String {
        format!(
            "[{}]",
            s.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
        )
    };
    let dtype = |t: &TensorMeta| -> Result<DataType, Misfit> {
        DataType::parse(&t.datatype).ok_or_else(|| {
            Misfit(format!(
                "its metadata gives tensor \"{}\" the datatype \"{}\", which is not a KServe v2 datatype",
                crate::openai::shown(t.name.as_bytes()),
                crate::openai::shown(t.datatype.as_bytes())
            )
        )})
    };
    // Whether the batch leads: Triton's config says; otherwise a declared
    // input one dimension shorter than its metadata (whose first is -1)
    // says so; otherwise every metadata shape leading with -1.
    let batching = match (max_batch, tensors.inputs.first()) {
        (None, Some(t)) => meta
            .inputs
            .iter()
            .find(|m| m.name == t.name)
            .is_some_and(|m| m.shape.len() == t.shape.len() + 1 && m.shape[0] == -1),
        _ => batches(meta, max_batch),
    };
    if !batching && tensors.batch != 1 {
        return Err(Misfit::from(format!(
            "the model takes no batch dimension (its inputs' shapes are as declared, e.g. {}), so a request carries one item; batch is {}",
            meta.inputs
                .first()
                .map(|m| shape_of(&m.shape))
                .unwrap_or_default(),
            tensors.batch
        )));
    }
    if let Some(m) = max_batch.filter(|m| *m > 0 && u64::from(tensors.batch) > *m) {
        return Err(Misfit::from(format!(
            "batch {} is over the model's max_batch_size ({m})",
            tensors.batch
        )));
    }
    fn per_item(m: &TensorMeta, batching: bool) -> &[i64] {
        if batching && !m.shape.is_empty() {
            &m.shape[1..]
        } else {
            &m.shape
        }
    }
    let mut inputs = Vec::new();
    for t in &tensors.inputs {
        let Some(m) = meta.inputs.iter().find(|m| m.name == t.name) else {
            return Err(Misfit::from(format!(
                "it has no input \"{}\"; its inputs are {}",
                crate::openai::shown(t.name.as_bytes()),
                names(&meta.inputs)
            )));
        };
        let d = dtype(m)?;
        if d != t.datatype {
            return Err(Misfit::from(format!(
                "its input \"{}\" is {d}, and the workload declares {}",
                t.name, t.datatype
            )));
        }
        let want = per_item(m, batching);
        let fits = want.len() == t.shape.len()
            && want
                .iter()
                .zip(&t.shape)
                .all(|(w, s)| *w == -1 || *w == *s as i64);
        if !fits {
            return Err(Misfit::from(format!(
                "its input \"{}\" has shape {} per item{}, and the workload declares {}",
                t.name,
                shape_of(want),
                if batching { " (after the batch)" } else { "" },
                shape_of(&t.shape.iter().map(|d| *d as i64).collect::<Vec<_>>())
            )));
        }
        inputs.push(t.clone());
    }
    // What the workload leaves out is sent as the metadata says, where
    // its shape is fixed.
    for m in &meta.inputs {
        if tensors.inputs.iter().any(|t| t.name == m.name) {
            continue;
        }
        let d = dtype(m)?;
        let want = per_item(m, batching);
        if d == DataType::Bytes {
            return Err(Misfit::from(format!(
                "its input \"{}\" is BYTES (strings): declare it in the workload's `inputs` with a `file` of its elements (lines of text, or a folder of files)",
                crate::openai::shown(m.name.as_bytes())
            )));
        }
        if want.iter().any(|x| *x < 1) {
            return Err(Misfit::from(format!(
                "its input \"{}\" has a variable shape {} per item: declare it in the workload's `inputs`, with the lengths to send",
                crate::openai::shown(m.name.as_bytes()),
                shape_of(want)
            )));
        }
        inputs.push(TensorInput {
            name: m.name.clone(),
            datatype: d,
            shape: want.iter().map(|x| *x as u64).collect(),
            fill: Default::default(),
            file: None,
        });
    }
    if inputs.is_empty() {
        return Err(Misfit::from("its metadata names no inputs"));
    }
    let mut outputs = Vec::new();
    for m in &meta.outputs {
        let d = dtype(m)?;
        let mut shape = m.shape.clone();
        if batching {
            if let Some(first) = shape.first_mut() {
                *first = i64::from(tensors.batch);
            }
        }
        outputs.push((m.name.clone(), d, shape));
    }
    Ok(Plan {
        inputs,
        batching,
        batch: tensors.batch,
        outputs,
    })
}

fn names(ts: &[TensorMeta]) -> String {
    ts.iter()
        .map(|t| format!("\"{}\"", crate::openai::shown(t.name.as_bytes())))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `POST {base_url}/v2/models/{model}/infer`, bodies built ahead.
pub struct Kserve {
    path: String,
    binary: bool,
    plan: Plan,
    /// The JSON header's length (binary), the same for every body.
    header_len: usize,
    bodies: Vec<Bytes>,
    next: AtomicUsize,
}

impl fmt::Debug for Kserve {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kserve")
            .field("path", &self.path)
            .field("binary", &self.binary)
            .field("plan", &self.plan)
            .field("bodies", &self.bodies.len())
            .finish()
    }
}

#[derive(Serialize)]
struct InputWire<'a> {
    name: &'a str,
    datatype: &'static str,
    shape: Vec<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<BinarySize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<Elements<'a>>,
}

#[derive(Serialize)]
struct BinarySize {
    binary_data_size: usize,
}

#[derive(Serialize)]
struct OutputAsk<'a> {
    name: &'a str,
    parameters: BinaryAsk,
}

#[derive(Serialize)]
struct BinaryAsk {
    binary_data: bool,
}

#[derive(Serialize)]
struct RequestWire<'a> {
    inputs: Vec<InputWire<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    outputs: Vec<OutputAsk<'a>>,
    #[serde(flatten)]
    extra: &'a serde_json::Map<String, serde_json::Value>,
}

/// A tensor's bytes written as one flat JSON array of numbers.
struct Elements<'a>(DataType, &'a [u8]);

impl Serialize for Elements<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let n = self.1.len() / self.0.size().unwrap_or(1).max(1);
        let mut seq = s.serialize_seq(Some(n))?;
        for i in 0..n {
            if let Some(v) = infer_bench_workload::tensor::element(self.0, self.1, i) {
                seq.serialize_element(&v)?;
            }
        }
        seq.end()
    }
}

impl Kserve {
    /// The protocol of `plan`, its bodies built from a seed of the model
    /// and workload (the same bodies on every run and machine), or from
    /// the items of the inputs' `files` (body `i` takes the `i`-th batch
    /// of items, in turn).
    pub fn new(
        plan: Plan,
        tensors: &Tensors,
        model: &str,
        workload: &infer_bench_spec::Workload,
        files: &infer_bench_workload::tensor::Files,
    ) -> Kserve {
        let path = format!("{}/infer", model_path(model, tensors.version.as_deref()));
        let items = if plan.batching { plan.batch } else { 1 };
        let per_body: usize = plan
            .inputs
            .iter()
            .map(|t| t.elements() as usize * t.datatype.size().unwrap_or(1) * items as usize)
            .sum::<usize>()
            .max(1);
        let mut count = (POOL_BYTES / per_body).clamp(2, POOL_MAX);
        // A file's items: as many bodies as it takes to send each once,
        // within the pool's bound.
        if let Some(file_items) = plan
            .inputs
            .iter()
            .filter_map(|t| t.file.as_ref().map(|f| f.items))
            .max()
        {
            count = count.min(file_items.div_ceil(u64::from(items)).max(1) as usize);
        }
        let seed = seed_of(model, &workload.name);
        let mut header_len = 0;
        let bodies = (0..count)
            .map(|i| {
                let (body, h) = build(
                    &plan,
                    items,
                    tensors.binary,
                    &workload.extra_body,
                    seed.wrapping_add(i as u64),
                    (files, i as u64 * u64::from(items)),
                );
                header_len = h;
                Bytes::from(body)
            })
            .collect();
        Kserve {
            path,
            binary: tensors.binary,
            plan,
            header_len,
            bodies,
            next: AtomicUsize::new(0),
        }
    }

    /// The protocol before the model's metadata is read: its path, and no
    /// bodies (a point sends nothing until [`handshake`] has built them).
    pub fn unresolved(tensors: &Tensors, model: &str) -> Kserve {
        Kserve {
            path: format!("{}/infer", model_path(model, tensors.version.as_deref())),
            binary: tensors.binary,
            plan: Plan {
                inputs: tensors.inputs.clone(),
                batching: true,
                batch: tensors.batch,
                outputs: Vec::new(),
            },
            header_len: 0,
            bodies: Vec::new(),
            next: AtomicUsize::new(0),
        }
    }

    /// What it sends and expects.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Bytes of one request's body.
    pub fn body_len(&self) -> usize {
        self.bodies.first().map_or(0, Bytes::len)
    }
}

/// A stable seed from the model and workload names (FNV-1a).
fn seed_of(model: &str, workload: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in model.bytes().chain([0]).chain(workload.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// One request body and its JSON header's length (binary; else the
/// body's): `items` items of each input, filled from `seed`, or taken from
/// its file's items from `first` on.
fn build(
    plan: &Plan,
    items: u32,
    binary: bool,
    extra: &serde_json::Map<String, serde_json::Value>,
    seed: u64,
    (files, first): (&infer_bench_workload::tensor::Files, u64),
) -> (Vec<u8>, usize) {
    use infer_bench_workload::tensor::{fill, from_file};
    let data: Vec<Vec<u8>> = plan
        .inputs
        .iter()
        .enumerate()
        .map(|(i, t)| match files.get(&t.name) {
            Some(items_of) if t.file.is_some() => from_file(items_of, first, items),
            _ => fill(t, items, seed.wrapping_mul(31).wrapping_add(i as u64)),
        })
        .collect();
    let inputs = plan
        .inputs
        .iter()
        .zip(&data)
        .map(|(t, d)| InputWire {
            name: &t.name,
            datatype: t.datatype.name(),
            shape: if plan.batching {
                std::iter::once(u64::from(items))
                    .chain(t.shape.iter().copied())
                    .collect()
            } else {
                t.shape.clone()
            },
            parameters: binary.then_some(BinarySize {
                binary_data_size: d.len(),
            }),
            data: (!binary).then_some(Elements(t.datatype, d)),
        })
        .collect();
    let outputs = if binary {
        plan.outputs
            .iter()
            .map(|(name, ..)| OutputAsk {
                name,
                parameters: BinaryAsk { binary_data: true },
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut body = serde_json::to_vec(&RequestWire {
        inputs,
        outputs,
        extra,
    })
    .expect("tensors serialize");
    let header = body.len();
    if binary {
        for d in &data {
            body.extend_from_slice(d);
        }
    }
    (body, header)
}

/// One output of an answer, its data counted and not kept.
#[derive(Deserialize)]
struct OutputWire {
    name: String,
    datatype: String,
    shape: Vec<i64>,
    #[serde(default)]
    parameters: Option<OutputParams>,
    #[serde(default)]
    data: Option<infer_bench_spec::tensor::Elements>,
}

#[derive(Deserialize)]
struct OutputParams {
    #[serde(default)]
    binary_data_size: Option<u64>,
}

#[derive(Deserialize)]
struct AnswerWire {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    outputs: Vec<OutputWire>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

impl Kserve {
    /// Checks an answer's outputs against the plan: Err says the first
    /// thing that does not fit.
    fn check(&self, a: &AnswerWire, binary_bytes: usize) -> Result<(), Misfit> {
        let shape_of = |s: &[i64]| {
            format!(
                "[{}]",
                s.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
            )
        };
        let mut binary_total = 0u64;
        for o in &a.outputs {
            let name = crate::openai::shown(o.name.as_bytes());
            let Some((_, d, want)) = self.plan.outputs.iter().find(|(n, ..)| *n == o.name) else {
                return Err(Misfit::from(format!(
                    "output \"{name}\" is not in the model's metadata"
                )));
            };
            if o.datatype != d.name() {
                return Err(Misfit::from(format!(
                    "output \"{name}\" is {}; the model's metadata says {d}",
                    crate::openai::shown(o.datatype.as_bytes())
                )));
            }
            let fits = o.shape.len() == want.len()
                && want
                    .iter()
                    .zip(&o.shape)
                    .all(|(w, s)| *s >= 0 && (*w == -1 || w == s));
            if !fits {
                return Err(Misfit::from(format!(
                    "output \"{name}\" has shape {}; the model's metadata says {}{}",
                    shape_of(&o.shape),
                    shape_of(want),
                    if self.plan.batching {
                        " (the batch leading)"
                    } else {
                        ""
                    }
                )));
            }
            let elements = o
                .shape
                .iter()
                .try_fold(1u64, |a, s| a.checked_mul(*s as u64))
                .unwrap_or(u64::MAX);
            match (
                o.parameters.as_ref().and_then(|p| p.binary_data_size),
                &o.data,
            ) {
                (Some(size), _) => {
                    if let Some(e) = d.size() {
                        if size != elements.saturating_mul(e as u64) {
                            return Err(Misfit::from(format!(
                                "output \"{name}\" has {size} bytes of binary data; its shape {} of {d} is {} bytes",
                                shape_of(&o.shape),
                                elements.saturating_mul(e as u64)
                            )));
                        }
                    }
                    binary_total = binary_total.saturating_add(size);
                }
                (None, Some(c)) => {
                    if c.0 != elements {
                        return Err(Misfit::from(format!(
                            "output \"{name}\" has {} elements of data; its shape {} holds {elements}",
                            c.0,
                            shape_of(&o.shape)
                        )));
                    }
                }
                (None, None) => {
                    return Err(Misfit::from(format!("output \"{name}\" carries no data")));
                }
            }
        }
        for (n, ..) in &self.plan.outputs {
            if !a.outputs.iter().any(|o| o.name == *n) {
                return Err(Misfit::from(format!(
                    "output \"{}\" of the model's metadata is missing",
                    crate::openai::shown(n.as_bytes())
                )));
            }
        }
        if binary_total != binary_bytes as u64 {
            return Err(Misfit::from(format!(
                "the outputs declare {binary_total} bytes of binary data, and {binary_bytes} follow the JSON header"
            )));
        }
        Ok(())
    }
}

impl Protocol for Kserve {
    fn name(&self) -> &'static str {
        "kserve"
    }

    fn path(&self) -> &str {
        &self.path
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        if self.binary {
            vec![(
                "inference-header-content-length",
                self.header_len.to_string(),
            )]
        } else {
            Vec::new()
        }
    }

    fn content_type(&self) -> &'static str {
        if self.binary {
            "application/octet-stream"
        } else {
            "application/json"
        }
    }

    fn body(&self, prompt: &Prompt) -> Vec<u8> {
        self.body_bytes(prompt).to_vec()
    }

    fn body_bytes(&self, _prompt: &Prompt) -> Bytes {
        if self.bodies.is_empty() {
            return Bytes::new();
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        self.bodies[i % self.bodies.len()].clone()
    }

    fn streams(&self) -> bool {
        false
    }

    fn read_event(
        &self,
        data: &[u8],
        _reply: Option<&mut crate::structured::Reply>,
        id: Option<&mut Option<String>>,
    ) -> Result<EventInfo, Unreadable> {
        // The JSON header ends where its one value does; binary outputs
        // follow it.
        let mut values = serde_json::Deserializer::from_slice(data).into_iter::<AnswerWire>();
        let answer = match values.next() {
            Some(Ok(a)) => a,
            Some(Err(e)) => {
                return Err(Unreadable(format!(
                    "the answer is not a KServe v2 inference response: {e} (it begins {})",
                    crate::openai::shown(data)
                )));
            }
            None => return Err(Unreadable("the answer is empty".into())),
        };
        let rest = data.len() - values.byte_offset();
        if let Some(e) = &answer.error {
            return Ok(EventInfo {
                error: Some(crate::openai::error_text(e)),
                ..EventInfo::default()
            });
        }
        crate::openai::take_id(id, answer.id.as_deref());
        self.check(&answer, rest).map_err(|e| Unreadable(e.0))?;
        Ok(EventInfo {
            output: true,
            finished: true,
            usage: Some(Usage {
                prompt_tokens: Some(0),
                completion_tokens: Some(0),
                reasoning_tokens: None,
            }),
            ..EventInfo::default()
        })
    }

    fn warm_path(&self) -> &str {
        "v2/health/ready"
    }

    fn failure_classes(&self) -> &'static [ErrorClass] {
        ErrorClass::ALL
    }

    fn units(&self, _prompt: &Prompt) -> crate::Units {
        crate::Units {
            inputs: if self.plan.batching {
                self.plan.batch
            } else {
                1
            },
            ..crate::Units::default()
        }
    }
}

/// One model's cumulative statistics (`GET /v2/models/{model}/stats`, a
/// Triton extension): counts and nanoseconds since the server started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub success: Timed,
    pub fail: Timed,
    pub queue: Timed,
    pub compute_input: Timed,
    pub compute_infer: Timed,
    pub compute_output: Timed,
    /// Items inferred (a batch of 8 counts 8).
    pub inferences: u64,
    /// Executions of the model (dynamic batching merges requests into one).
    pub executions: u64,
}

/// A count and the nanoseconds it took together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct Timed {
    #[serde(default)]
    pub count: u64,
    #[serde(default)]
    pub ns: u64,
}

impl Timed {
    fn plus(self, o: Timed) -> Timed {
        Timed {
            count: self.count.saturating_add(o.count),
            ns: self.ns.saturating_add(o.ns),
        }
    }

    /// Mean milliseconds per count (0 with none).
    pub fn mean_ms(self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.ns as f64 / self.count as f64 / 1e6
        }
    }

    fn minus(self, o: Timed) -> Timed {
        Timed {
            count: self.count.saturating_sub(o.count),
            ns: self.ns.saturating_sub(o.ns),
        }
    }
}

impl Stats {
    /// Both together (a point's runs).
    pub fn plus(&self, o: &Stats) -> Stats {
        Stats {
            success: self.success.plus(o.success),
            fail: self.fail.plus(o.fail),
            queue: self.queue.plus(o.queue),
            compute_input: self.compute_input.plus(o.compute_input),
            compute_infer: self.compute_infer.plus(o.compute_infer),
            compute_output: self.compute_output.plus(o.compute_output),
            inferences: self.inferences.saturating_add(o.inferences),
            executions: self.executions.saturating_add(o.executions),
        }
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Stats) -> Stats {
        Stats {
            success: self.success.minus(earlier.success),
            fail: self.fail.minus(earlier.fail),
            queue: self.queue.minus(earlier.queue),
            compute_input: self.compute_input.minus(earlier.compute_input),
            compute_infer: self.compute_infer.minus(earlier.compute_infer),
            compute_output: self.compute_output.minus(earlier.compute_output),
            inferences: self.inferences.saturating_sub(earlier.inferences),
            executions: self.executions.saturating_sub(earlier.executions),
        }
    }
}

/// Reads a stats answer: the first model entry of `model_stats` (of the
/// version asked, or the first). Counts parse as numbers or as strings
/// (Triton writes some 64-bit counts as JSON numbers, proxies as strings).
pub fn parse_stats(body: &[u8], version: Option<&str>) -> Result<Stats, Misfit> {
    #[derive(Deserialize)]
    struct Wire {
        #[serde(default)]
        model_stats: Vec<ModelWire>,
    }
    #[derive(Deserialize)]
    struct ModelWire {
        #[serde(default)]
        version: Option<String>,
        #[serde(default)]
        inference_count: Option<serde_json::Value>,
        #[serde(default)]
        execution_count: Option<serde_json::Value>,
        #[serde(default)]
        inference_stats: Option<InferWire>,
    }
    #[derive(Deserialize, Default)]
    struct InferWire {
        #[serde(default)]
        success: Option<serde_json::Value>,
        #[serde(default)]
        fail: Option<serde_json::Value>,
        #[serde(default)]
        queue: Option<serde_json::Value>,
        #[serde(default)]
        compute_input: Option<serde_json::Value>,
        #[serde(default)]
        compute_infer: Option<serde_json::Value>,
        #[serde(default)]
        compute_output: Option<serde_json::Value>,
    }
    let num = |v: Option<&serde_json::Value>| -> u64 {
        match v {
            Some(serde_json::Value::Number(n)) => n.as_u64().unwrap_or(0),
            Some(serde_json::Value::String(s)) => s.parse().unwrap_or(0),
            _ => 0,
        }
    };
    let dur = |v: &Option<serde_json::Value>| Timed {
        count: num(v.as_ref().and_then(|v| v.get("count"))),
        ns: num(v.as_ref().and_then(|v| v.get("ns"))),
    };
    let w: Wire = serde_json::from_slice(body)
        .map_err(|e| format!("not KServe/Triton model statistics: {e}"))?;
    let m = w
        .model_stats
        .iter()
        .find(|m| version.is_none() || m.version.as_deref() == version)
        .or_else(|| w.model_stats.first())
        .ok_or("the statistics name no model")?;
    let i = m.inference_stats.as_ref();
    let get =
        |f: fn(&InferWire) -> &Option<serde_json::Value>| i.map(|i| dur(f(i))).unwrap_or_default();
    Ok(Stats {
        success: get(|i| &i.success),
        fail: get(|i| &i.fail),
        queue: get(|i| &i.queue),
        compute_input: get(|i| &i.compute_input),
        compute_infer: get(|i| &i.compute_infer),
        compute_output: get(|i| &i.compute_output),
        inferences: num(m.inference_count.as_ref()),
        executions: num(m.execution_count.as_ref()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_spec::tensor::Fill;

    fn meta() -> Metadata {
        serde_json::from_str(
            r#"{"name":"classifier","versions":["1"],"platform":"python",
                "inputs":[{"name":"images","datatype":"FP32","shape":[-1,3,4,4]}],
                "outputs":[{"name":"probs","datatype":"FP32","shape":[-1,10]}]}"#,
        )
        .unwrap()
    }

    fn tensors(batch: u32, shape: Vec<u64>, datatype: DataType, binary: bool) -> Tensors {
        Tensors {
            batch,
            inputs: vec![TensorInput {
                name: "images".into(),
                datatype,
                shape,
                fill: Fill::default(),
                file: None,
            }],
            binary,
            version: None,
        }
    }

    fn workload() -> infer_bench_spec::Workload {
        let text = "name = \"t\"\n[targets.t]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1\"\n[models.m]\nserved_name = \"classifier\"\n[workloads.w]\napi = \"kserve\"\n[load]\nconcurrency = 1\nrequests = 1\n";
        let spec = infer_bench_spec::compile("t.toml", text, std::path::Path::new(".")).unwrap();
        spec.workloads["w"].clone()
    }

    fn prompt() -> Prompt {
        Prompt {
            history: Vec::new(),
            text: String::new(),
            input_tokens: 0,
            output_tokens: 0,
            part: 0,
            media: None,
            items: Vec::new(),
            item_tokens: 0,
        }
    }

    #[test]
    fn declared_inputs_are_checked_against_the_metadata() {
        let m = meta();
        let ok = resolve(
            &tensors(4, vec![3, 4, 4], DataType::Fp32, true),
            &m,
            Some(8),
        )
        .unwrap();
        assert!(ok.batching);
        assert_eq!(
            ok.outputs,
            vec![("probs".into(), DataType::Fp32, vec![4, 10])]
        );
        let shape = resolve(&tensors(4, vec![3, 4, 5], DataType::Fp32, true), &m, None)
            .unwrap_err()
            .0;
        assert!(
            shape.contains("shape [3, 4, 4] per item (after the batch)"),
            "{shape}"
        );
        let dtype = resolve(&tensors(4, vec![3, 4, 4], DataType::Fp16, true), &m, None)
            .unwrap_err()
            .0;
        assert!(
            dtype.contains("is FP32, and the workload declares FP16"),
            "{dtype}"
        );
        let mut named = tensors(1, vec![3, 4, 4], DataType::Fp32, true);
        named.inputs[0].name = "pixels".into();
        let e = resolve(&named, &m, None).unwrap_err().0;
        assert!(
            e.contains("no input \"pixels\"; its inputs are \"images\""),
            "{e}"
        );
        let big = resolve(
            &tensors(64, vec![3, 4, 4], DataType::Fp32, true),
            &m,
            Some(32),
        )
        .unwrap_err()
        .0;
        assert!(
            big.contains("over the model's max_batch_size (32)"),
            "{big}"
        );
        let flat = resolve(
            &tensors(2, vec![3, 4, 4], DataType::Fp32, true),
            &m,
            Some(0),
        )
        .unwrap_err()
        .0;
        assert!(flat.contains("takes no batch dimension"), "{flat}");
    }

    #[test]
    fn inputs_left_out_come_from_the_metadata_where_their_shape_is_fixed() {
        let mut t = tensors(2, vec![], DataType::Fp32, true);
        t.inputs.clear();
        let plan = resolve(&t, &meta(), None).unwrap();
        assert_eq!(plan.inputs[0].shape, vec![3, 4, 4]);
        assert!(plan.batching);
        let mut m = meta();
        m.inputs[0].shape = vec![-1, 3, -1, -1];
        let e = resolve(&t, &m, Some(8)).unwrap_err().0;
        assert!(e.contains("variable shape [3, -1, -1] per item"), "{e}");
    }

    fn answer(outputs: &str) -> Vec<u8> {
        format!(r#"{{"model_name":"classifier","id":"r1","outputs":[{outputs}]}}"#).into_bytes()
    }

    #[test]
    fn binary_bodies_carry_their_header_length_and_answers_are_checked() {
        let t = tensors(2, vec![3, 4, 4], DataType::Fp32, true);
        let plan = resolve(&t, &meta(), Some(8)).unwrap();
        let k = Kserve::new(plan, &t, "classifier", &workload(), &Default::default());
        let body = k.body_bytes(&prompt());
        let n: usize = k.headers()[0].1.parse().unwrap();
        let header: serde_json::Value = serde_json::from_slice(&body[..n]).unwrap();
        assert_eq!(
            header["inputs"][0]["shape"],
            serde_json::json!([2, 3, 4, 4])
        );
        assert_eq!(
            header["inputs"][0]["parameters"]["binary_data_size"],
            2 * 48 * 4
        );
        assert_eq!(body.len() - n, 2 * 48 * 4);
        assert_eq!(header["outputs"][0]["parameters"]["binary_data"], true);
        assert_eq!(k.path(), "v2/models/classifier/infer");
        // A good binary answer, then answers that do not fit.
        let mut good = answer(
            r#"{"name":"probs","datatype":"FP32","shape":[2,10],"parameters":{"binary_data_size":80}}"#,
        );
        good.extend_from_slice(&[0u8; 80]);
        let info = k.read_body(&good, None, None).unwrap();
        assert!(info.output && info.finished);
        let cut = &good[..good.len() - 4];
        assert!(
            k.read_body(cut, None, None)
                .unwrap_err()
                .0
                .contains("76 follow")
        );
        let wrong = answer(
            r#"{"name":"probs","datatype":"FP32","shape":[2,7],"data":[0,0,0,0,0,0,0,0,0,0,0,0,0,0]}"#,
        );
        let e = k.read_body(&wrong, None, None).unwrap_err().0;
        assert!(
            e.contains("shape [2, 7]; the model's metadata says [2, 10]"),
            "{e}"
        );
        let short = answer(r#"{"name":"probs","datatype":"FP32","shape":[2,10],"data":[1,2,3]}"#);
        assert!(
            k.read_body(&short, None, None)
                .unwrap_err()
                .0
                .contains("3 elements")
        );
        let missing = answer("");
        assert!(
            k.read_body(&missing, None, None)
                .unwrap_err()
                .0
                .contains("missing")
        );
        let failed = br#"{"error":"model failed: boom"}"#;
        assert_eq!(
            k.read_body(failed, None, None).unwrap().error.as_deref(),
            Some("model failed: boom")
        );
        assert!(k.read_body(b"<html>", None, None).is_err());
    }

    #[test]
    fn items_from_a_file_are_sent_in_turn() {
        let mut t = tensors(2, vec![3, 4, 4], DataType::Fp32, true);
        t.inputs[0].file = Some(infer_bench_spec::tensor::TensorFile {
            path: "x.raw".into(),
            sha256: String::new(),
            items: 3,
            pictures: None,
            strings: None,
        });
        // Item k: 48 floats of value k.
        let data: Vec<u8> = (0..3u8)
            .flat_map(|k| std::iter::repeat_n(f32::from(k).to_le_bytes(), 48).flatten())
            .collect();
        let files: infer_bench_workload::tensor::Files = [(
            "images".to_string(),
            infer_bench_workload::tensor::FileItems::Sized {
                data: std::sync::Arc::from(data.as_slice()),
                size: 48 * 4,
            },
        )]
        .into();
        let plan = resolve(&t, &meta(), Some(8)).unwrap();
        let k = Kserve::new(plan, &t, "classifier", &workload(), &files);
        let n: usize = k.headers()[0].1.parse().unwrap();
        let first = |b: &Bytes, item: usize| {
            let at = n + item * 48 * 4;
            f32::from_le_bytes(b[at..at + 4].try_into().unwrap())
        };
        // Two bodies cover the three items: (0, 1), then (2, 0).
        let (a, b, c) = (
            k.body_bytes(&prompt()),
            k.body_bytes(&prompt()),
            k.body_bytes(&prompt()),
        );
        assert_eq!((first(&a, 0), first(&a, 1)), (0.0, 1.0));
        assert_eq!((first(&b, 0), first(&b, 1)), (2.0, 0.0));
        assert_eq!(c, a);
    }

    #[test]
    fn json_bodies_write_every_element_as_a_number() {
        let t = tensors(1, vec![3, 4, 4], DataType::Fp32, false);
        let plan = resolve(&t, &meta(), Some(8)).unwrap();
        let k = Kserve::new(plan, &t, "classifier", &workload(), &Default::default());
        assert!(k.headers().is_empty());
        let body: serde_json::Value = serde_json::from_slice(&k.body_bytes(&prompt())).unwrap();
        let data = body["inputs"][0]["data"].as_array().unwrap();
        assert_eq!(data.len(), 48);
        assert!(
            data.iter()
                .all(|x| (0.0..1.0).contains(&x.as_f64().unwrap()))
        );
        assert!(body.get("outputs").is_none());
    }

    #[test]
    fn statistics_subtract_and_parse_both_spellings() {
        let body = br#"{"model_stats":[{"name":"m","version":"1","inference_count":16,"execution_count":"4",
            "inference_stats":{"success":{"count":4,"ns":8000000},"fail":{"count":0,"ns":0},
            "queue":{"count":4,"ns":400000},"compute_input":{"count":4,"ns":40000},
            "compute_infer":{"count":4,"ns":6000000},"compute_output":{"count":4,"ns":40000}}}]}"#;
        let s = parse_stats(body, None).unwrap();
        assert_eq!((s.inferences, s.executions), (16, 4));
        assert_eq!(s.success.mean_ms(), 2.0);
        let d = s.since(&Stats::default());
        assert_eq!(d, s);
        assert_eq!(s.plus(&s).queue.ns, 800_000);
        assert!(parse_stats(b"{}", None).is_err());
    }

    #[test]
    fn model_paths_are_escaped() {
        assert_eq!(
            model_path("a b/c", Some("2")),
            "v2/models/a%20b%2Fc/versions/2"
        );
    }
}
