//! Raw spec types: a faithful mirror of the TOML file, parsed with serde
//! (`deny_unknown_fields` everywhere) and used to generate the JSON Schema.
//! Nothing outside `spec` sees these; `compile` turns them into the domain
//! types of `spec::model`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Dist, Duration, Percent, Rate, SloExpr, Stat};

/// An infer-bench spec: what to benchmark, against what, and how to judge it.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "infer-bench spec")]
pub struct RawSpec {
    /// The spec's name: letters, digits, `-`, `_`, `.`. Names the default baseline file.
    pub name: String,
    /// What this spec measures, for people.
    #[serde(default)]
    pub description: Option<String>,
    /// Fixes prompt synthesis and arrival schedules: the same seed sends the same requests at the same offsets.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Where requests go, by name.
    #[serde(default)]
    pub targets: BTreeMap<String, RawTarget>,
    /// The models served, by name.
    #[serde(default)]
    pub models: BTreeMap<String, RawModel>,
    /// The requests to send, by name.
    #[serde(default)]
    pub workloads: BTreeMap<String, RawWorkload>,
    /// How requests arrive, how long a point runs, and its timeouts.
    #[serde(default)]
    pub load: RawLoad,
    /// The axes of the test matrix, with GitHub Actions' include/exclude rules.
    #[serde(default)]
    pub matrix: Option<RawMatrix>,
    /// Pass/fail gates on each point's distributions.
    #[serde(default)]
    pub slo: Option<RawSlo>,
    /// Per-request bounds: a request is good if it meets all of them.
    #[serde(default)]
    pub goodput: Option<RawGoodput>,
    /// Prices, for cost per token.
    #[serde(default)]
    pub cost: Option<RawCost>,
    /// GPU and server sampling during each point.
    #[serde(default)]
    pub telemetry: Option<RawTelemetry>,
    /// When a point's measurements count as valid.
    #[serde(default)]
    pub validity: Option<RawValidity>,
    /// How results are judged against the committed baseline.
    #[serde(default)]
    pub regression: Option<RawRegression>,
    /// Quality beside speed: every server answers the same prompts greedily, outside the timed window, and its answers are compared with a reference's.
    #[serde(default)]
    pub quality: Option<RawQuality>,
}

/// The `[quality]` table: the quality phase of each server (target, model, precision).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawQuality {
    /// The precision whose answers every other precision's are compared with, e.g. "bf16": a precision on the matrix. Give this or `reference_target`.
    #[serde(default)]
    pub reference: Option<String>,
    /// The target whose answers every other target's are compared with (same model and precision), e.g. "vllm-bf16": a target on the matrix.
    #[serde(default)]
    pub reference_target: Option<String>,
    /// How many prompts to ask (default 200): a seeded set of the tool's own, the same for every server.
    #[serde(default)]
    #[schemars(range(min = 1, max = 10000))]
    pub prompts: Option<u32>,
    /// The most tokens each answer may have (default 64).
    #[serde(default)]
    #[schemars(range(min = 1, max = 4096))]
    pub max_tokens: Option<u32>,
    /// Alternatives per token to ask for (`top_logprobs`, default 5; 0 asks for none): what the KL divergence is computed from.
    #[serde(default)]
    #[schemars(range(min = 0, max = 20))]
    pub logprobs: Option<u32>,
    /// The request the prompts are sent as (default "chat").
    #[serde(default)]
    pub api: Option<QualityApi>,
    /// Prompts in flight at once (default 8).
    #[serde(default)]
    #[schemars(range(min = 1, max = 256))]
    pub concurrency: Option<u32>,
    /// Prompts of your own instead of the tool's: a JSONL file, relative to the spec, one `{"prompt": "...", "answer": "..."}` per line (`answer`, the expected one, is needed with `scorer`). With it, `prompts` is how many of its first lines to ask (default: all).
    #[serde(default)]
    pub dataset: Option<String>,
    /// Task accuracy: how an answer is scored against the dataset's expected one: "exact", "normalized", "regex" (with `pattern`), "numeric" (with `tolerance`) or "choice" (a multiple-choice letter).
    #[serde(default)]
    pub scorer: Option<String>,
    /// The `regex` scorer's pattern: its first capture group (or whole match) is compared with the expected answer.
    #[serde(default)]
    pub pattern: Option<String>,
    /// The `numeric` scorer's tolerance, relative for large values and absolute near zero (default 1e-6).
    #[serde(default)]
    pub tolerance: Option<f64>,
}

/// The OpenAI request quality prompts are sent as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum QualityApi {
    /// `/chat/completions`: the prompt as one user message.
    #[default]
    Chat,
    /// `/completions`: the prompt as it is.
    Completions,
}

/// The kind of a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    /// Any OpenAI-compatible HTTP server: vLLM, SGLang, TGI, TensorRT-LLM, llama.cpp, Ollama.
    Openai,
    /// The built-in simulator: an in-process server driven by a GPU performance model.
    Sim,
}

/// A server to send requests to.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTarget {
    pub kind: TargetKind,
    /// openai: the API root, e.g. "http://127.0.0.1:8000/v1". With `launch`, may use "{port}".
    #[serde(default)]
    pub base_url: Option<String>,
    /// openai: the environment variable holding the API key (the key itself never appears in a spec or result).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// openai: extra HTTP headers sent with every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The server's Prometheus endpoint, e.g. "http://127.0.0.1:8000/metrics".
    #[serde(default)]
    pub metrics_url: Option<String>,
    /// openai: accept invalid TLS certificates (self-signed test servers only).
    #[serde(default)]
    pub tls_insecure: Option<bool>,
    /// openai: a PEM file of extra CA certificates to trust.
    #[serde(default)]
    pub ca_cert: Option<String>,
    /// openai: which fields beyond the OpenAI API the server accepts ("openai", "vllm", "sglang", "tgi", "llama.cpp", "trtllm"). Absent: asked of the server (`GET /v1/models`, `owned_by`) when the run starts, and plain "openai" when it does not say.
    #[serde(default)]
    pub dialect: Option<Dialect>,
    /// openai: start and stop the server per (model, precision) group.
    #[serde(default)]
    pub launch: Option<RawLaunch>,
    /// Which GPUs telemetry samples: indices or UUIDs; all when absent.
    /// With `gpu_metrics_url`, matched against dcgm-exporter's `gpu` and
    /// `UUID` labels.
    #[serde(default)]
    pub gpu_ids: Option<Vec<String>>,
    /// openai: a dcgm-exporter's Prometheus endpoint that reads the
    /// server's GPUs, e.g. "http://gpu-node-7:9400/metrics"; GPU telemetry
    /// is then read from it, on the scrape interval, instead of this
    /// machine's NVML.
    #[serde(default)]
    pub gpu_metrics_url: Option<String>,
    /// openai: with `gpu_metrics_url`, only GPUs whose dcgm-exporter series
    /// carry every one of these labels with exactly this value, e.g.
    /// { Hostname = "gpu-node-7", pod = "vllm-0" }.
    #[serde(default)]
    pub gpu_metrics_match: BTreeMap<String, String>,
    /// sim: the simulated GPU (see `infer-bench catalog`), e.g. "h100-sxm".
    #[serde(default)]
    pub gpu: Option<String>,
    /// sim: number of GPUs, tensor-parallel.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub gpus: Option<u32>,
    /// sim: tuning of the performance model and scheduler.
    #[serde(default)]
    pub sim: Option<RawSimTuning>,
    /// Price of one of this target's GPUs per hour, in USD: overrides
    /// `[cost] gpu_hour_usd` for its points (GPUs of different kinds cost
    /// different amounts).
    #[serde(default)]
    pub gpu_hour_usd: Option<f64>,
}

/// How a target's server speaks the OpenAI API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Dialect {
    /// The OpenAI API only: no field it does not define.
    #[serde(rename = "openai")]
    Openai,
    /// vLLM: `ignore_eos`, `top_k`, `min_p`, `repetition_penalty`.
    #[serde(rename = "vllm")]
    Vllm,
    /// SGLang: as vLLM.
    #[serde(rename = "sglang")]
    Sglang,
    /// Hugging Face TGI's OpenAI routes: the OpenAI fields only.
    #[serde(rename = "tgi")]
    Tgi,
    /// llama.cpp's `llama-server`: `ignore_eos`, `top_k`, `min_p`, and
    /// `repeat_penalty` for `repetition_penalty`.
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    /// TensorRT-LLM's `trtllm-serve`: as vLLM.
    #[serde(rename = "trtllm")]
    Trtllm,
    /// Hugging Face text-embeddings-inference: the OpenAI fields, and its
    /// own rerank body (`{query, texts}`).
    #[serde(rename = "tei")]
    Tei,
}

/// Tuning of the simulator's performance model and scheduler.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSimTuning {
    /// "real" (default): an HTTP server in wall-clock time, driven by the real
    /// client. "virtual": a discrete-event simulation with an ideal client,
    /// no sleeping, byte-identical statistics run to run (`run --virtual` sets it
    /// for every simulator target).
    #[serde(default)]
    pub clock: Option<SimClock>,
    /// The serving engine modelled: "vllm-0.10" (default: vLLM's V1 engine),
    /// "vllm-0.6", "vllm-0.5", "sglang" or "trtllm". A profile bundles the
    /// engine's scheduler, its defaults (batch limits, memory, admission, KV
    /// type) and its host overheads; every other key here overrides one of
    /// them (docs/simulator.md lists each profile's values and sources).
    #[serde(default)]
    pub profile: Option<SimProfile>,
    /// "chunked": decodes first, then prefill chunks, in one step (vLLM V1).
    /// "whole-prompt": the same without splitting a prompt across steps
    /// (TensorRT-LLM). "prefill-first": a step with a prefill has no decodes
    /// (vLLM V0 without chunked prefill, SGLang). Default: the profile's.
    #[serde(default)]
    pub scheduler: Option<SimScheduler>,
    /// "reserve-prompt": KV blocks for the prompt at admission, preemption
    /// when they run out (vLLM, SGLang). "reserve-full": blocks for prompt
    /// and output at admission, never a preemption (TensorRT-LLM). Default:
    /// the profile's.
    #[serde(default)]
    pub admission: Option<SimAdmission>,
    /// Most sequences in one batch (vLLM's max_num_seqs, TensorRT-LLM's
    /// max_batch_size). Default: the profile's.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_num_seqs: Option<u32>,
    /// Most tokens in one step, prefill chunks included (max_num_batched_tokens). Default: the profile's.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_batched_tokens: Option<u32>,
    /// Fraction of GPU memory the server may use (gpu_memory_utilization), of
    /// the memory `memory_fraction_of` names. Default: the profile's.
    #[serde(default)]
    pub memory_fraction: Option<f64>,
    /// "total": `memory_fraction` of all GPU memory holds weights,
    /// activations and KV cache (vLLM, SGLang). "free": the KV cache gets
    /// that fraction of what is free after weights and activations
    /// (TensorRT-LLM's kv_cache_free_gpu_mem_fraction). Default: the profile's.
    #[serde(default)]
    pub memory_fraction_of: Option<SimMemoryBasis>,
    /// Achieved fraction of peak tensor throughput by large matrix products;
    /// smaller steps achieve less (docs/simulator.md). Default: the GPU's and
    /// number format's fitted value.
    #[serde(default)]
    pub compute_efficiency: Option<f64>,
    /// Achieved fraction of peak memory bandwidth. Default: the fitted value.
    #[serde(default)]
    pub bandwidth_efficiency: Option<f64>,
    /// Fixed host cost of every step (scheduling, input preparation, kernel
    /// launches) not hidden behind the GPU. Default: the profile's.
    #[serde(default)]
    pub step_overhead: Option<Duration>,
    /// Host cost per sequence in a step, added to `step_overhead`. Default: the profile's.
    #[serde(default)]
    pub step_overhead_per_seq: Option<Duration>,
    /// Time a request spends in the server before the engine sees it, and
    /// after its last token (HTTP, tokenization, detokenization), half each
    /// way. Default: the profile's; "0ms" for an engine without a server.
    #[serde(default)]
    pub request_overhead: Option<Duration>,
    /// Data-parallel copies of the server, each on `gpus` × `pipeline` GPUs
    /// of its own; a request goes to the least loaded. Default 1.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1024))]
    pub replicas: Option<u32>,
    /// Pipeline-parallel stages, each on `gpus` tensor-parallel GPUs: the
    /// layers are split over them and as many micro-batches run at once.
    /// Default 1.
    #[serde(default)]
    #[schemars(range(min = 1, max = 64))]
    pub pipeline: Option<u32>,
    /// Steps run per scheduling decision (vLLM 0.6's --num-scheduler-steps):
    /// the host overhead is paid once per that many steps, and new requests
    /// join only at a scheduling step. Default 1.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub scheduler_steps: Option<u32>,
    /// Multiplies every step time: 1.1 is a server 10% slower. Default 1.
    #[serde(default)]
    pub slowdown: Option<f64>,
    /// Run-to-run noise: each run's speed is scaled by a factor drawn from N(1, noise). Default 0.
    #[serde(default)]
    pub noise: Option<f64>,
    /// Override the KV-cache capacity in tokens (default: derived from memory left after weights).
    #[serde(default)]
    pub kv_cache_tokens: Option<u64>,
    /// Tokens per streamed event (1 = one event per token).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub tokens_per_event: Option<u32>,
}

/// Start the server per group of points that share (target, model, precision).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLaunch {
    /// Program and arguments, no shell. Placeholders: {port}, {host}, {model}, {model.served_name},
    /// {model.weights}, {model.tokenizer}, {precision}, {precision.arg}, {precision.weights},
    /// {env.NAME} (only names listed in `allow_env`).
    pub command: Vec<String>,
    /// Extra environment variables for the server (placeholders allowed).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory of the server (relative to the spec).
    #[serde(default)]
    pub cwd: Option<String>,
    /// HTTP path that answers 200 once the server is ready. Default "/health".
    #[serde(default)]
    pub ready: Option<String>,
    /// How long the server may take to become ready. Default "10m".
    #[serde(default)]
    pub startup_timeout: Option<Duration>,
    /// Time between SIGTERM and SIGKILL when stopping. Default "10s".
    #[serde(default)]
    pub stop_grace: Option<Duration>,
    /// The environment variables `{env.NAME}` placeholders may read; any other
    /// `{env.NAME}` is an error. Default: none.
    #[serde(default)]
    pub allow_env: Vec<String>,
}

/// What kind of model a `[models.*]` table describes: a language model
/// (served over the OpenAI APIs) or a network that maps tensors to tensors
/// (served over KServe v2: a vision model or a text encoder).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// A language model: chat, completions, responses, messages, embeddings, rerank.
    #[default]
    Llm,
    /// An image network (classifier, detector), e.g. ResNet-50, YOLOv8, ViT.
    Vision,
    /// A text encoder taking token ids, e.g. BERT.
    Encoder,
}

impl ModelKind {
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Llm => "llm",
            ModelKind::Vision => "vision",
            ModelKind::Encoder => "encoder",
        }
    }

    /// What it is, with its article: "a vision network".
    pub fn noun(self) -> &'static str {
        match self {
            ModelKind::Llm => "a language model",
            ModelKind::Vision => "a vision network",
            ModelKind::Encoder => "an encoder network",
        }
    }

    /// Whether its requests are tensors (api = "kserve"), not text.
    pub fn takes_tensors(self) -> bool {
        self != ModelKind::Llm
    }
}

/// A served model.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    /// "llm" (default), or "vision" / "encoder" for a network the simulator serves over KServe v2 (its preset: see `infer-bench catalog`). Default: the preset's kind.
    #[serde(default)]
    pub kind: Option<ModelKind>,
    /// The model name the server knows (the `model` field of requests). Default: the table's key.
    #[serde(default)]
    pub served_name: Option<String>,
    /// Path to a Hugging Face tokenizer.json, for exact token counts (relative to the spec).
    #[serde(default)]
    pub tokenizer: Option<String>,
    /// Weights path or hub id, used by launch templates.
    #[serde(default)]
    pub weights: Option<String>,
    /// Parameters in billions (simulator and cost math).
    #[serde(default)]
    pub params_b: Option<f64>,
    /// sim: a known architecture, e.g. "llama-3.1-8b", or network, e.g. "resnet-50" (see `infer-bench catalog`).
    #[serde(default)]
    pub preset: Option<String>,
    /// sim: the architecture, when no preset fits.
    #[serde(default)]
    pub architecture: Option<RawArchitecture>,
    /// Per-precision overrides, by precision name (the matrix's `precision` axis).
    #[serde(default)]
    pub precisions: BTreeMap<String, RawPrecision>,
}

/// A transformer's shape, for the simulator.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawArchitecture {
    #[schemars(range(min = 1))]
    pub layers: u32,
    #[schemars(range(min = 1))]
    pub hidden: u32,
    #[schemars(range(min = 1))]
    pub heads: u32,
    #[schemars(range(min = 1))]
    pub kv_heads: u32,
    #[serde(default)]
    pub head_dim: Option<u32>,
    /// Parameters active per token, in billions (for mixture-of-experts; default: params_b).
    #[serde(default)]
    pub active_params_b: Option<f64>,
    /// The longest sequence the model takes (max_position_embeddings). Default 131072.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub context_tokens: Option<u32>,
    /// Multi-head latent attention (DeepSeek): values cached per token and
    /// layer, shared by all heads (kv_lora_rank + qk_rope_head_dim).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub kv_latent_dim: Option<u32>,
}

/// What a precision changes.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPrecision {
    /// The model name served at this precision.
    #[serde(default)]
    pub served_name: Option<String>,
    /// Weights for this precision (launch templates).
    #[serde(default)]
    pub weights: Option<String>,
    /// A free argument for launch templates, e.g. "fp8" for --quantization.
    #[serde(default)]
    pub arg: Option<String>,
    /// The weights' number format: bf16, fp16, fp8, int8, int4 (default: the precision's name when it is one of these).
    #[serde(default)]
    pub dtype: Option<String>,
    /// The KV cache's number format (default: bf16, or fp8 when dtype is fp8 and kv_fp8 is set).
    #[serde(default)]
    pub kv_dtype: Option<String>,
}

/// The API a workload calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// POST /chat/completions with messages.
    #[default]
    Chat,
    /// POST /completions with a prompt.
    Completions,
    /// POST /responses (OpenAI's Responses API) with the messages as `input`.
    Responses,
    /// POST /messages (Anthropic's Messages API), the key sent as `x-api-key`.
    Messages,
    /// POST /embeddings with `batch` inputs (not streamed).
    Embeddings,
    /// POST /rerank (the target's dialect decides the path and fields): a
    /// query and `documents` documents (not streamed).
    Rerank,
    /// POST /v2/models/{model}/infer (the KServe v2 inference protocol of
    /// Triton, KServe, TorchServe): `batch` items of each input tensor.
    Kserve,
    /// POST /v2/models/{model}/generate_stream (or /generate when not
    /// streamed): Triton's generate extension, the endpoint of its
    /// TensorRT-LLM and vLLM backends, with the prompt as `text_input`.
    Generate,
}

impl Api {
    /// Its name in a spec.
    pub fn name(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Completions => "completions",
            Api::Responses => "responses",
            Api::Messages => "messages",
            Api::Embeddings => "embeddings",
            Api::Rerank => "rerank",
            Api::Kserve => "kserve",
            Api::Generate => "generate",
        }
    }

    /// Whether a request generates text (streamed or not): chat,
    /// completions, Responses, Messages and Triton's generate; not embeddings, rerank or
    /// tensors, whose answers are one body with no TTFT, TPOT or ITL.
    pub fn generates(self) -> bool {
        !matches!(self, Api::Embeddings | Api::Rerank | Api::Kserve)
    }

    /// Whether the simulator in virtual time serves it: generation,
    /// embeddings and rerank; not tensors (KServe v2, Triton's generate).
    pub fn in_virtual_time(self) -> bool {
        !matches!(self, Api::Kserve | Api::Generate)
    }

    /// Whether a request is a list of messages (chat, Responses, Messages):
    /// the server applies the model's chat template, and a workload may be
    /// a conversation or a dataset of messages.
    pub fn takes_messages(self) -> bool {
        matches!(self, Api::Chat | Api::Responses | Api::Messages)
    }

    /// The field that caps a request's output, by default: `max_tokens`,
    /// or the Responses API's `max_output_tokens`.
    pub fn default_max_tokens_field(self) -> &'static str {
        match self {
            Api::Responses => "max_output_tokens",
            _ => "max_tokens",
        }
    }

    /// The fields that may cap a request's output (`max_tokens_field`).
    /// Triton's generate hands each field to the model's input of that
    /// name: TensorRT-LLM's ensemble (and the vLLM backend, which reads the
    /// fields that are not inputs as its sampling parameters) take
    /// `max_tokens`; older ensembles and many python models
    /// `max_new_tokens`.
    pub fn max_tokens_fields(self) -> &'static [&'static str] {
        match self {
            Api::Generate => &["max_tokens", "max_new_tokens"],
            Api::Chat | Api::Completions | Api::Embeddings | Api::Rerank | Api::Kserve => {
                &["max_tokens", "max_completion_tokens"]
            }
            Api::Responses => &["max_output_tokens"],
            Api::Messages => &["max_tokens"],
        }
    }
}

/// The requests to send.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawWorkload {
    /// A mix of other workloads sent together on one arrival process, by
    /// weight, e.g. { chat = 0.7, rag = 0.3 }; a mix has no other keys.
    #[serde(default)]
    pub mix: Option<BTreeMap<String, f64>>,
    /// chat, completions, responses (OpenAI Responses API), messages (Anthropic Messages API), embeddings, rerank or kserve (KServe v2 tensors: Triton, KServe). Default chat.
    #[serde(default)]
    pub api: Option<Api>,
    /// Prompt length in tokens: a number, a string such as "uniform(64, 256)", or a table with `dist`.
    #[serde(default)]
    pub input_tokens: Option<Dist>,
    /// Output length in tokens (max_tokens of each request).
    #[serde(default)]
    pub output_tokens: Option<Dist>,
    /// A prefix shared across requests, to measure prefix caching.
    #[serde(default)]
    pub shared_prefix: Option<RawSharedPrefix>,
    /// Prompts from a file instead of synthesized ones.
    #[serde(default)]
    pub dataset: Option<RawDataset>,
    /// Replay a request trace: arrivals at its timestamps, lengths and shared prefixes from it.
    #[serde(default)]
    pub trace: Option<RawTrace>,
    /// Multi-turn sessions.
    #[serde(default)]
    pub conversation: Option<RawConversation>,
    /// Ask the server to ignore end-of-sequence so every request produces its requested length. Default false.
    #[serde(default)]
    pub ignore_eos: Option<bool>,
    /// Stream the response (SSE). Default true; without streaming only E2E is measured.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Which field carries the output length: max_tokens (default) or max_completion_tokens.
    #[serde(default)]
    pub max_tokens_field: Option<String>,
    /// Sampling parameters sent with every request.
    #[serde(default)]
    pub sampling: Option<RawSampling>,
    /// Extra JSON fields merged into every request body.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, serde_json::Value>>")]
    pub extra_body: Option<BTreeMap<String, toml::Value>>,
    /// Images sent with every request (chat only): { count, width, height, format, detail } or { urls }.
    #[serde(default)]
    pub images: Option<crate::media::RawImages>,
    /// An audio clip sent with every request (chat only): { seconds, format, sample_rate }.
    #[serde(default)]
    pub audio: Option<crate::media::RawAudio>,
    /// Embeddings: inputs per request; kserve: items per request (the tensors' leading dimension). Default 1.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub batch: Option<u32>,
    /// Embeddings: "float" (default) or "base64" (little-endian f32).
    #[serde(default)]
    pub encoding_format: Option<crate::retrieval::EncodingFormat>,
    /// Embeddings: the dimension asked of the server (models that can shorten their vectors).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub dimensions: Option<u32>,
    /// Rerank: documents per request (the query's length is `input_tokens`).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub documents: Option<u32>,
    /// Rerank: each document's length in tokens, a distribution like `input_tokens`.
    #[serde(default)]
    pub document_tokens: Option<Dist>,
    /// Kserve: the input tensors, each { name, datatype, shape (per item), fill }; default: every input the model's metadata names, filled uniform(0, 1).
    #[serde(default)]
    pub inputs: Option<Vec<crate::tensor::RawTensorInput>>,
    /// Kserve: send tensors with the binary tensor extension (default true) or as JSON numbers (false).
    #[serde(default)]
    pub binary: Option<bool>,
    /// Kserve: the model version to call (default: the server's choice).
    #[serde(default)]
    pub model_version: Option<String>,
    /// Structured output: { json_schema = "schema.json" } (a JSON Schema file every answer must match) or { type = "json_object" }. Chat, responses, and completions in the vllm, sglang and llama.cpp dialects.
    #[serde(default)]
    pub response_format: Option<crate::structured::RawResponseFormat>,
    /// Tools the model may call: [{ name, description, parameters }] (parameters a JSON Schema file or an inline table), or a JSON file of OpenAI-shaped tools. Chat, responses and messages.
    #[serde(default)]
    pub tools: Option<crate::structured::RawTools>,
    /// "auto", "required", "none", or the name of a tool the model must call.
    #[serde(default)]
    pub tool_choice: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSharedPrefix {
    /// Length of each prefix in tokens.
    pub tokens: u32,
    /// Number of distinct prefixes; each request uses one of them. Default 1.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub count: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DatasetFormat {
    /// One JSON object per line with `prompt` (and optionally `output_tokens`).
    Jsonl,
    /// ShareGPT conversations: a JSON array of `{conversations: [{from, value}]}`.
    Sharegpt,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDataset {
    /// Path, relative to the spec.
    pub path: String,
    pub format: DatasetFormat,
    /// Skip prompts shorter than this many tokens.
    #[serde(default)]
    pub min_input_tokens: Option<u32>,
    /// Skip prompts longer than this many tokens.
    #[serde(default)]
    pub max_input_tokens: Option<u32>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTrace {
    /// Path, relative to the spec.
    pub file: String,
    /// mooncake, azure or jsonl (see docs/workloads.md).
    pub format: TraceFormat,
    /// Replay this many times faster than the trace's clock. Default 1.
    #[serde(default)]
    pub speedup: Option<f64>,
    /// Where the replay starts, in trace time from its first request. Default "0s".
    #[serde(default)]
    pub start: Option<Duration>,
    /// How much trace time to replay from `start`. Default: to the end.
    #[serde(default)]
    pub duration: Option<Duration>,
    /// Tokens per `hash_ids` block. Default 512 (Mooncake's).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub block_tokens: Option<u32>,
}

/// A trace file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// Mooncake's JSONL: `timestamp` (ms), `input_length`, `output_length`, `hash_ids`.
    Mooncake,
    /// The Azure LLM inference traces' CSV: `TIMESTAMP,ContextTokens,GeneratedTokens`.
    Azure,
    /// infer-bench's JSONL: `offset_ms`, `input_tokens`, `output_tokens`, optional `hash_ids`.
    Jsonl,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawConversation {
    /// Turns per session.
    #[schemars(range(min = 1))]
    pub turns: u32,
    /// Pause between a reply and the next turn. Default "0s".
    #[serde(default)]
    pub think_time: Option<Duration>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawSampling {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetition_penalty: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
}

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// Closed loop: `concurrency` slots, each sends its next request when the last one ends.
    Closed,
    /// Open loop, exponential gaps at `rate`.
    Poisson,
    /// Open loop, gamma-distributed gaps at `rate` with shape `burstiness` (1 = poisson, < 1 burstier).
    Gamma,
    /// Open loop, evenly spaced at `rate`.
    Constant,
    /// Open loop, at the timestamps of the workload's `trace` (implied by a trace workload).
    Trace,
}

/// Load and timing of every point (matrix axes override `concurrency`, `rate`, `max_concurrency`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLoad {
    /// closed, poisson, gamma or constant. Default: closed with `concurrency`, poisson with `rate`.
    #[serde(default)]
    pub arrival: Option<Arrival>,
    /// Gamma shape: 1 is poisson, below 1 burstier, above 1 smoother. Default 1.
    #[serde(default)]
    pub burstiness: Option<f64>,
    /// Closed loop: concurrent requests.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub concurrency: Option<u32>,
    /// Open loop: arrival rate, e.g. "10/s".
    #[serde(default)]
    pub rate: Option<Rate>,
    /// Open loop: most requests in flight; arrivals beyond wait (and the wait counts in their latency).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_concurrency: Option<u32>,
    /// A staircase of load levels within one point, each step reported on its own.
    #[serde(default)]
    pub ramp: Option<RawRamp>,
    /// A capacity search: the highest rate or concurrency that meets a target, found by bracketing then bisection, each probe a point of its own.
    #[serde(default)]
    pub search: Option<RawSearch>,
    /// Warm-up by time: requests sent before this are excluded.
    #[serde(default)]
    pub warmup: Option<Duration>,
    /// Warm-up by count: the first N requests are excluded.
    #[serde(default)]
    pub warmup_requests: Option<u64>,
    /// Length of the measurement window (after warm-up).
    #[serde(default)]
    pub duration: Option<Duration>,
    /// Measured requests per run; with `duration`, whichever ends first.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub requests: Option<u64>,
    /// Independent repeats of each point: the statistical unit of the regression judge. Default 1.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub runs: Option<u32>,
    /// Width of the windows that stand in for runs when there is only one. Default "10s".
    #[serde(default)]
    pub window: Option<Duration>,
    #[serde(default)]
    pub timeouts: Option<RawTimeouts>,
    /// Most a server's response may cost the client; a request that breaks one fails as `oversized`.
    #[serde(default)]
    pub limits: Option<RawLimits>,
    /// Open a new connection for every request and keep none alive, so that connect time (TCP, TLS) counts in TTFT and E2E. Default false: connections are opened before each run and reused.
    #[serde(default)]
    pub cold_connections: Option<bool>,
    /// Reset the server's prefix cache before each run, so a run does not
    /// read the cache an earlier run (or point) filled: "between_runs",
    /// "never", or "auto" (the default: between runs on servers infer-bench
    /// starts, never on an external one, which others may share).
    #[serde(default)]
    pub reset_cache: Option<ResetCache>,
}

/// `[load] reset_cache`: when the server's prefix cache is reset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResetCache {
    /// Between runs on a launched server or the simulator; never on an
    /// external server.
    #[default]
    Auto,
    /// Before every run, on every server.
    BetweenRuns,
    /// Never.
    Never,
}

impl ResetCache {
    pub fn is_auto(&self) -> bool {
        *self == ResetCache::Auto
    }
}

/// A capacity search: probes from `from` up to `to`, doubling until a probe
/// fails, then bisecting until the last pass and the first failure are
/// within `precision` of each other.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSearch {
    /// What is searched: "rate" (open loop) or "concurrency" (closed loop).
    pub over: SearchOver,
    /// The first and lowest level probed: a rate such as "1/s", or a concurrency.
    pub from: RawLevel,
    /// The highest level probed (same kind as `from`).
    pub to: RawLevel,
    /// What a probe must meet to pass: "slo" (every [slo] gate, default) or "goodput >= 95%" (the share of requests within every [goodput] bound).
    #[serde(default)]
    pub target: Option<String>,
    /// When to stop: the first failing level is at most this far above the last passing one. Default "5%".
    #[serde(default)]
    pub precision: Option<Percent>,
}

/// What a capacity search varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SearchOver {
    /// The open-loop arrival rate (requests/s).
    Rate,
    /// The closed-loop concurrency.
    Concurrency,
}

impl SearchOver {
    pub fn name(self) -> &'static str {
        match self {
            SearchOver::Rate => "rate",
            SearchOver::Concurrency => "concurrency",
        }
    }
}

/// A staircase: from `from`, add `step` every `every`, up to `to`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRamp {
    /// First level: a concurrency (closed loop) or a rate such as "2/s" (open loop).
    pub from: RawLevel,
    /// Added at each step (same kind as `from`).
    #[serde(default)]
    pub step: Option<RawLevel>,
    /// Multiplies the level at each step instead of adding (e.g. 2 doubles it).
    #[serde(default)]
    pub factor: Option<f64>,
    /// Length of each step.
    pub every: Duration,
    /// Last level (inclusive).
    pub to: RawLevel,
}

/// A load level: a concurrency (a number) or a rate (a string such as "2/s").
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum RawLevel {
    Concurrency(u32),
    Rate(Rate),
}

impl<'de> Deserialize<'de> for RawLevel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = RawLevel;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a concurrency (a whole number) or a rate such as \"2/s\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RawLevel, E> {
                u32::try_from(v)
                    .ok()
                    .filter(|c| *c > 0)
                    .map(RawLevel::Concurrency)
                    .ok_or_else(|| E::custom(format!("expected a concurrency >= 1, found {v}")))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<RawLevel, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(-1))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawLevel, E> {
                v.parse().map(RawLevel::Rate).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTimeouts {
    /// Connecting to the server. Default "10s".
    #[serde(default)]
    pub connect: Option<Duration>,
    /// From send to the first output. Default "60s".
    #[serde(default)]
    pub first_token: Option<Duration>,
    /// Longest silence between two events of a stream. Default "30s".
    #[serde(default)]
    pub idle: Option<Duration>,
    /// A whole request. Default "10m".
    #[serde(default)]
    pub total: Option<Duration>,
}

/// `[load.limits]`: bounds on what one response may cost the client, in bytes and events.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// Longest SSE line, and largest SSE event (its data lines together), in bytes. Default 1048576 (1 MiB).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1073741824))]
    pub max_line_bytes: Option<u64>,
    /// Most bytes of one response body. Default 67108864 (64 MiB).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1099511627776u64))]
    pub max_response_bytes: Option<u64>,
    /// Most SSE events in one response. Default 1000000.
    #[serde(default)]
    #[schemars(range(min = 1, max = 100000000))]
    pub max_events: Option<u64>,
    /// Bytes of an error response (HTTP status >= 400) read for its message; the rest is not read. Default 4096.
    #[serde(default)]
    #[schemars(range(min = 1, max = 1048576))]
    pub max_error_body_bytes: Option<u64>,
}

/// Matrix axes. Each axis is a list; every combination is a point.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawMatrix {
    #[serde(default)]
    pub target: Option<Vec<String>>,
    #[serde(default)]
    pub model: Option<Vec<String>>,
    #[serde(default)]
    pub precision: Option<Vec<String>>,
    #[serde(default)]
    pub workload: Option<Vec<String>>,
    #[serde(default)]
    pub concurrency: Option<Vec<u32>>,
    #[serde(default)]
    pub rate: Option<Vec<Rate>>,
    #[serde(default)]
    pub max_concurrency: Option<Vec<u32>>,
    /// Embeddings: inputs per request, overriding the workload's `batch`.
    #[serde(default)]
    pub batch: Option<Vec<u32>>,
    /// Rerank: documents per request, overriding the workload's `documents`.
    #[serde(default)]
    pub documents: Option<Vec<u32>>,
    /// A launched server's flags, one table per point: `{ max_num_seqs =
    /// 128 }` becomes `--max-num-seqs 128` (true: the flag alone; false:
    /// left out). Keys `[a-z0-9][a-z0-9_-]*`; values booleans, numbers or
    /// strings; an optional `name` names the entry in point slugs.
    #[serde(default)]
    #[schemars(with = "Option<Vec<BTreeMap<String, serde_json::Value>>>")]
    pub server_args: Option<Vec<BTreeMap<String, toml::Value>>>,
    /// Combinations to remove: an entry removes every combination it matches on all its keys.
    #[serde(default)]
    pub exclude: Vec<RawMatrixEntry>,
    /// Combinations to extend or add, with GitHub Actions' rules.
    #[serde(default)]
    pub include: Vec<RawMatrixEntry>,
}

/// One include/exclude entry.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawMatrixEntry {
    #[serde(default)]
    pub target: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub precision: Option<String>,
    #[serde(default)]
    pub workload: Option<String>,
    #[serde(default)]
    pub concurrency: Option<u32>,
    #[serde(default)]
    pub rate: Option<Rate>,
    #[serde(default)]
    pub max_concurrency: Option<u32>,
    #[serde(default)]
    pub batch: Option<u32>,
    #[serde(default)]
    pub documents: Option<u32>,
}

/// One expression or a list of them.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    /// By hand rather than `untagged`, so the element's own error (with its
    /// position) reaches the user instead of "did not match any variant".
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for V<T> {
            type Value = OneOrMany<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string or a list of strings")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                T::deserialize(serde::de::value::StrDeserializer::<E>::new(v)).map(OneOrMany::One)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(x) = seq.next_element()? {
                    out.push(x);
                }
                Ok(OneOrMany::Many(out))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl<T> OneOrMany<T> {
    pub fn into_vec(self) -> Vec<T> {
        match self {
            OneOrMany::One(x) => vec![x],
            OneOrMany::Many(v) => v,
        }
    }
}

/// SLO gates: per metric, one expression or a list.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSlo {
    #[serde(default)]
    pub ttft: Option<OneOrMany<SloExpr>>,
    #[serde(default)]
    pub ttft_from_send: Option<OneOrMany<SloExpr>>,
    /// Time to the first reasoning token, where the server reasons.
    #[serde(default)]
    pub ttft_reasoning: Option<OneOrMany<SloExpr>>,
    /// Time to the first answer token after reasoning, where the server
    /// reasons: what a user of a reasoning model waits for.
    #[serde(default)]
    pub ttft_answer: Option<OneOrMany<SloExpr>>,
    #[serde(default)]
    pub tpot: Option<OneOrMany<SloExpr>>,
    #[serde(default)]
    pub itl: Option<OneOrMany<SloExpr>>,
    #[serde(default)]
    pub itl_token: Option<OneOrMany<SloExpr>>,
    #[serde(default)]
    pub e2e: Option<OneOrMany<SloExpr>>,
    #[serde(default)]
    pub dispatch_lag: Option<OneOrMany<SloExpr>>,
    /// Failed requests as a share of all, e.g. "< 1%".
    #[serde(default)]
    pub error_rate: Option<OneOrMany<SloExpr>>,
    /// Good requests as a share of all, e.g. "> 95%".
    #[serde(default)]
    pub goodput_ratio: Option<OneOrMany<SloExpr>>,
    /// Good requests per second, e.g. "> 5/s".
    #[serde(default)]
    pub goodput: Option<OneOrMany<SloExpr>>,
    /// Successful requests per second, e.g. "> 5/s".
    #[serde(default)]
    pub request_throughput: Option<OneOrMany<SloExpr>>,
    /// Output tokens per second, a plain number, e.g. "> 1000".
    #[serde(default)]
    pub output_tokens_per_s: Option<OneOrMany<SloExpr>>,
    /// The whole request's latency (`e2e` under the name embeddings and
    /// rerank know it by), e.g. "p99 < 50ms".
    #[serde(default)]
    pub latency: Option<OneOrMany<SloExpr>>,
    /// Quality (`[quality]`): the share of prompts answered exactly as the reference answered them, e.g. ">= 95%".
    #[serde(default)]
    pub agreement: Option<OneOrMany<SloExpr>>,
    /// Quality: the share of answer positions holding the reference's token, e.g. ">= 98%".
    #[serde(default)]
    pub token_agreement: Option<OneOrMany<SloExpr>>,
    /// Quality: the mean position of the first token that differs from the reference's answer, a plain number, e.g. "> 30".
    #[serde(default)]
    pub first_diff: Option<OneOrMany<SloExpr>>,
    /// Quality: the mean KL divergence of the reference's next-token distributions from this server's, nats, a plain number, e.g. "< 0.02".
    #[serde(default)]
    pub kl_mean: Option<OneOrMany<SloExpr>>,
    /// Quality: the share of the dataset's prompts answered right (`[quality] scorer`), e.g. ">= 70%".
    #[serde(default)]
    pub accuracy: Option<OneOrMany<SloExpr>>,
}

/// Per-request bounds of goodput.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawGoodput {
    #[serde(default)]
    pub ttft: Option<Duration>,
    #[serde(default)]
    pub tpot: Option<Duration>,
    #[serde(default)]
    pub e2e: Option<Duration>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCost {
    /// Price of one GPU for one hour, in US dollars.
    #[serde(default)]
    pub gpu_hour_usd: Option<f64>,
    /// GPUs the price applies to (default: the target's GPU count, else 1).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub gpus: Option<u32>,
    /// Price of electricity per kWh, in US dollars (with measured energy).
    #[serde(default)]
    pub kwh_usd: Option<f64>,
}

/// The clock a simulator target runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum SimClock {
    /// Real time: an in-process HTTP server paced by the wall clock, driven
    /// by the real HTTP client (tests the client itself).
    #[default]
    Real,
    /// Virtual time: a discrete-event simulation of the same load engine
    /// and server, with an ideal client; no sleeping, no sockets, exactly
    /// reproducible, thousands of streams in seconds.
    Virtual,
}

impl SimClock {
    pub fn is_real(&self) -> bool {
        *self == SimClock::Real
    }
    pub fn name(self) -> &'static str {
        match self {
            SimClock::Real => "real",
            SimClock::Virtual => "virtual",
        }
    }
}

/// The serving engine a simulator target models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Default)]
pub enum SimProfile {
    /// vLLM 0.5 (V0 engine): prefill-first scheduling without chunked
    /// prefill, synchronous host work between steps.
    #[serde(rename = "vllm-0.5")]
    Vllm05,
    /// vLLM 0.6 (V0 engine): as 0.5, with the API server in its own process
    /// and output processing overlapped with the next step.
    #[serde(rename = "vllm-0.6")]
    Vllm06,
    /// vLLM 0.8 to 0.10 and later (V1 engine): chunked prefill, decodes first.
    #[default]
    #[serde(rename = "vllm-0.10")]
    Vllm010,
    /// SGLang: chunked prefill in steps of their own, host work overlapped.
    #[serde(rename = "sglang")]
    Sglang,
    /// TensorRT-LLM: in-flight batching, guaranteed-no-evict admission, a C++
    /// runtime with overlapped host work.
    #[serde(rename = "trtllm")]
    Trtllm,
}

impl SimProfile {
    pub const ALL: [SimProfile; 5] = [
        SimProfile::Vllm05,
        SimProfile::Vllm06,
        SimProfile::Vllm010,
        SimProfile::Sglang,
        SimProfile::Trtllm,
    ];
    pub fn name(self) -> &'static str {
        match self {
            SimProfile::Vllm05 => "vllm-0.5",
            SimProfile::Vllm06 => "vllm-0.6",
            SimProfile::Vllm010 => "vllm-0.10",
            SimProfile::Sglang => "sglang",
            SimProfile::Trtllm => "trtllm",
        }
    }
}

/// How the simulator forms a step from running and waiting sequences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SimScheduler {
    /// Running sequences first (a decode or the next prefill chunk each),
    /// then waiting requests, in one step of `max_batched_tokens`.
    #[default]
    Chunked,
    /// As `chunked`, but a prompt is prefilled in one step: it waits for a
    /// step with room for all of it (TensorRT-LLM without chunked context).
    WholePrompt,
    /// While a request waits and fits, steps hold prefills only (whole
    /// prompts, or chunks of `max_batched_tokens`); decodes run in steps of
    /// their own.
    PrefillFirst,
}

impl SimScheduler {
    pub fn is_default(&self) -> bool {
        *self == SimScheduler::Chunked
    }
    pub fn name(self) -> &'static str {
        match self {
            SimScheduler::Chunked => "chunked",
            SimScheduler::WholePrompt => "whole-prompt",
            SimScheduler::PrefillFirst => "prefill-first",
        }
    }
}

/// What `memory_fraction` is a fraction of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum SimMemoryBasis {
    /// All GPU memory: weights, activations and KV cache fit in the fraction.
    #[default]
    Total,
    /// The memory left after weights and activations: the KV cache gets the fraction.
    Free,
}

impl SimMemoryBasis {
    pub fn is_default(&self) -> bool {
        *self == SimMemoryBasis::Total
    }
}

/// How the simulator admits a waiting request into the running batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SimAdmission {
    /// Reserve KV blocks for the prompt only, grow as tokens are generated,
    /// preempt the newest sequence when blocks run out (vLLM's scheduler).
    #[default]
    ReservePrompt,
    /// Reserve blocks for the prompt and every output token up front, so
    /// nothing is ever preempted (TensorRT-LLM's guaranteed-no-evict policy).
    ReserveFull,
}

impl SimAdmission {
    pub fn is_default(&self) -> bool {
        *self == SimAdmission::ReservePrompt
    }
    pub fn name(self) -> &'static str {
        match self {
            SimAdmission::ReservePrompt => "reserve-prompt",
            SimAdmission::ReserveFull => "reserve-full",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum GpuMode {
    /// Sample when NVML is present; record its absence otherwise.
    #[default]
    Auto,
    /// Fail the run (exit code 3) without a GPU.
    Required,
    /// Do not sample.
    Off,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTelemetry {
    #[serde(default)]
    pub gpu: Option<GpuMode>,
    /// GPU sampling interval. Default "100ms".
    #[serde(default)]
    pub interval: Option<Duration>,
    /// How often the server's metrics_url is scraped. Default "500ms"
    /// (a scrape costs the server more than an NVML read costs the driver).
    #[serde(default)]
    pub scrape_interval: Option<Duration>,
    /// Scrape the target's metrics_url. Default true when it is set.
    #[serde(default)]
    pub server_metrics: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawValidity {
    /// Shortest measurement window. Default "0s".
    #[serde(default)]
    pub min_duration: Option<Duration>,
    /// Fewest measured requests. Default 1.
    #[serde(default)]
    pub min_requests: Option<u64>,
    /// A fixed budget for each run's dispatch lag p99 (the client's own
    /// delay before a send); above it the point is INVALID. Unset, the lag's
    /// p50 may be 5% of the run's TTFT p50 measured from send (at least
    /// "1ms") and its p99 10% of the TTFT p99 (at least "10ms"; the E2E when
    /// not streamed).
    #[serde(default)]
    pub max_dispatch_lag_p99: Option<Duration>,
    /// Largest acceptable gap between offered and achieved send rate. Default "1%".
    #[serde(default)]
    pub max_rate_gap: Option<Percent>,
    /// Require enough requests for each percentile SLO to mean something. Default true.
    #[serde(default)]
    pub percentile_sample_check: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum OnEnvMismatch {
    /// Report INCOMPARABLE as a point that could not be judged: it fails
    /// the check (exit 4) unless `allow_unjudged`.
    #[default]
    Unjudged,
    /// Report INCOMPARABLE, do not fail.
    Advisory,
    /// Fail the check as a regression does (exit 1).
    Fail,
    /// Leave such points out of the verdict.
    Skip,
}

/// What the pull-request gate judges a point against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum Against {
    /// The blessed baseline's runs.
    #[default]
    Baseline,
    /// The recent level of main in the history (`infer-bench history`):
    /// each commit since the series' newest change point (at most 20) is a
    /// replicate, so re-blessing cannot hide a regression. A point the
    /// history does not hold comparably (or holds fewer than `min_runs`
    /// commits of) is judged against the baseline, saying so.
    History,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRegression {
    /// Baseline file (relative to the spec's repository root, i.e. the working directory). Default "baselines/<name>.json".
    #[serde(default)]
    pub baseline: Option<String>,
    /// The gates: metric, statistic and noise band.
    #[serde(default)]
    pub metrics: Option<Vec<RawGate>>,
    /// Confidence of the interval on the change. Default "95%".
    #[serde(default)]
    pub confidence: Option<Percent>,
    /// Fewest runs per side for a verdict from runs. Default 3.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub min_runs: Option<u32>,
    #[serde(default)]
    pub on_env_mismatch: Option<OnEnvMismatch>,
    /// Re-run a REGRESSED point this many times; it fails only if it regresses again. Default 0.
    #[serde(default)]
    pub confirm: Option<u32>,
    /// Let points that could not be judged (INSUFFICIENT, INVALID, INCOMPARABLE, drift, missing) pass the check instead of failing it (exit 4). Default false. Like every rule here, the baseline's value counts, not the pull request's.
    #[serde(default)]
    pub allow_unjudged: Option<bool>,
    /// What a point is judged against: "baseline" (the blessed runs, default) or "history" (main's recent level in the history folder; see docs/regression.md, "Watching main"). Pinned with the other rules.
    #[serde(default)]
    pub against: Option<Against>,
    /// The history folder `against = "history"` reads (relative to the repository root). Default "bench-history".
    #[serde(default)]
    pub history: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawGate {
    /// A metric name, e.g. "ttft" or "output_tokens_per_s".
    pub metric: String,
    /// For distributions: the statistic, e.g. "p99". Default p50.
    #[serde(default)]
    pub stat: Option<Stat>,
    /// Changes within this band are noise. Default "5%".
    #[serde(default)]
    pub noise: Option<Percent>,
}
