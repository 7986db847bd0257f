//! What the simulated server makes of one completion request, and what it
//! answers with, as pure functions: the HTTP server (`server.rs`) and the
//! virtual-time driver (the engine crate's `run::virtual_time`) both read a
//! request body through [`read`], so a request counts the same prompt
//! tokens and is refused for the same reasons whichever clock runs it.
//! Also here: the simulator's setup from a point ([`Setup`]), the run's
//! speed factor, and the text the simulated model "generates" when not
//! asked greedily (greedy answers: `answers`).

use crate::error::Error;
use serde::Deserialize;

use super::cluster::Cluster;
use super::engine::Engine;
use super::perf::PerfModel;
use super::profile;
use infer_bench_results::ServerInfo;
use infer_bench_spec::DType;
use infer_bench_spec::plan::PointConfig;

/// Words the simulated model "generates" (text only; counts are what matter).
const WORDS: &[&str] = &[
    "the", "model", "says", "that", "tokens", "flow", "in", "batches", "of", "time", "and",
    "memory",
];

/// Tokens a chat template adds per message, and once per request, roughly
/// as Llama 3's template does (header and end-of-turn tokens).
pub const CHAT_TOKENS_PER_MESSAGE: u32 = 5;
pub const CHAT_TOKENS_PER_REQUEST: u32 = 5;

/// `max_tokens` when a request gives none (vLLM's legacy default).
pub const DEFAULT_MAX_TOKENS: u32 = 16;

/// The API a request came in by: where its prompt and output cap are, and
/// how its answer is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// `/v1/completions`: a `prompt`.
    Completions,
    /// `/v1/chat/completions`: `messages`.
    Chat,
    /// `/v1/responses`: `input` (a string or messages), `max_output_tokens`.
    Responses,
    /// `/v1/messages`: `system` and `messages`, `max_tokens`.
    Messages,
}

impl Wire {
    /// The wire a workload's `api` sends by.
    pub fn of(api: infer_bench_spec::raw::Api) -> Wire {
        use infer_bench_spec::raw::Api;
        match api {
            Api::Completions => Wire::Completions,
            Api::Chat => Wire::Chat,
            Api::Responses => Wire::Responses,
            Api::Messages => Wire::Messages,
            // Embeddings and rerank are read by `server::retrieval::plan`;
            // `validate` refuses tensors in virtual time (the only caller),
            // and Triton's generate on any simulator: their requests never
            // reach this reader.
            Api::Embeddings | Api::Rerank | Api::Kserve | Api::Generate => Wire::Completions,
        }
    }
}

/// A request the simulator takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub model: String,
    pub prompt_tokens: u32,
    pub max_tokens: u32,
    /// Of `prompt_tokens`, its images' ([`image_tokens`] each).
    pub image_tokens: u32,
    pub stream: bool,
    pub include_usage: bool,
    /// Asked for greedily (`temperature` 0): answered by the precision's
    /// [`Answerer`](crate::answers::Answerer).
    pub greedy: Option<Greedy>,
    /// Structured output or a tool call asked for (`crate::structured`).
    pub ask: Option<crate::structured::Ask>,
}

/// A greedy request: its prompt's identity and how many alternatives per
/// token it asked for (`None`: no log-probabilities).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Greedy {
    pub prompt: u64,
    pub top_logprobs: Option<usize>,
}

/// A request the simulator refuses: the HTTP status, message and error type
/// it answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub message: String,
    pub kind: &'static str,
}

fn refuse(status: u16, message: impl Into<String>, kind: &'static str) -> Refusal {
    Refusal {
        status,
        message: message.into(),
        kind,
    }
}

#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    prompt: Option<serde_json::Value>,
    #[serde(default)]
    messages: Option<Vec<Message>>,
    /// The Responses API's input: a string or messages.
    #[serde(default)]
    input: Option<serde_json::Value>,
    /// The Messages API's system prompt.
    #[serde(default)]
    system: Option<serde_json::Value>,
    #[serde(default)]
    max_output_tokens: Option<u32>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    max_completion_tokens: Option<u32>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    temperature: Option<f64>,
    /// Chat: `true`; completions: how many alternatives.
    #[serde(default)]
    logprobs: Option<serde_json::Value>,
    #[serde(default)]
    top_logprobs: Option<u32>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    content: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

/// Tokens of a prompt as the simulator counts them: one per word, and an
/// image's tokens for an `image_url` part ([`image_tokens`]).
fn words(v: &serde_json::Value) -> u32 {
    match v {
        serde_json::Value::String(s) => s.split_whitespace().count() as u32,
        serde_json::Value::Array(a) => a.iter().map(words).sum(),
        serde_json::Value::Object(o) if o.contains_key("image_url") => images(v),
        serde_json::Value::Object(o) => o.get("text").map(words).unwrap_or(0),
        _ => 0,
    }
}

/// The tokens of a prompt's images: every `image_url` part's.
fn images(v: &serde_json::Value) -> u32 {
    match v {
        serde_json::Value::Array(a) => a.iter().map(images).sum(),
        serde_json::Value::Object(o) => match o.get("image_url") {
            Some(i) => image_tokens(i.get("url").and_then(|u| u.as_str()).unwrap_or("")),
            None => 0,
        },
        _ => 0,
    }
}

/// Pixels a vision model's token covers on each side: 14-pixel patches
/// merged 2 x 2 (Qwen2-VL).
pub const IMAGE_TOKEN_PX: u32 = 28;
/// Tokens of an image the simulator cannot see the size of (a URL it does
/// not fetch): a LLaVA-1.5 image (576).
pub const URL_IMAGE_TOKENS: u32 = 576;

/// The prompt tokens of an image: one per [`IMAGE_TOKEN_PX`] square of a
/// PNG's, JPEG's, WebP's or GIF's size read from its data URL's header
/// (sides rounded up), else [`URL_IMAGE_TOKENS`].
pub fn image_tokens(url: &str) -> u32 {
    let size = url
        .strip_prefix("data:image/")
        .and_then(|r| r.split_once(";base64,"))
        .and_then(|(_, data)| image_size(data));
    match size {
        Some((w, h)) => w
            .div_ceil(IMAGE_TOKEN_PX)
            .saturating_mul(h.div_ceil(IMAGE_TOKEN_PX)),
        None => URL_IMAGE_TOKENS,
    }
}

/// An image's width and height from the start of its base64 (at most 64
/// KiB of it is decoded), read as a dataset's image files are
/// ([`infer_bench_spec::image::header`]).
fn image_size(b64: &str) -> Option<(u32, u32)> {
    use base64::Engine as _;
    let head = &b64.as_bytes()[..b64.len().min(65_536) / 4 * 4];
    let f = base64::engine::general_purpose::STANDARD
        .decode(head)
        .ok()?;
    let h = infer_bench_spec::image::header(&f).ok()?;
    Some((h.width, h.height))
}

/// Tokens of a list of messages with the chat template's.
fn templated(contents: impl Iterator<Item = u32>) -> u32 {
    contents.map(|w| w + CHAT_TOKENS_PER_MESSAGE).sum::<u32>() + CHAT_TOKENS_PER_REQUEST
}

/// Reads a request's body, come in by `wire`, for a server that serves the
/// names in `served` with room for `max_len` tokens of prompt and output.
pub fn read(body: &[u8], wire: Wire, served: &[String], max_len: u32) -> Result<Accepted, Refusal> {
    // Only a body that names one of their fields is read for them.
    let ask = [
        &b"\"tools\""[..],
        b"\"response_format\"",
        b"\"format\"",
        b"\"structured_outputs\"",
        b"\"json_schema\"",
    ]
    .iter()
    .any(|k| body.windows(k.len()).any(|w| w == *k))
    .then(|| serde_json::from_slice::<serde_json::Value>(body).ok())
    .flatten()
    .and_then(|v| crate::structured::Ask::of(&v));
    let body: Body = serde_json::from_slice(body).map_err(|e| {
        refuse(
            400,
            format!("invalid JSON body: {e}"),
            "invalid_request_error",
        )
    })?;
    let model = body.model.clone().unwrap_or_default();
    if !served.contains(&model) {
        return Err(refuse(
            404,
            format!("The model `{model}` does not exist."),
            "NotFoundError",
        ));
    }
    let required = |key: &str| refuse(400, format!("`{key}` is required"), "invalid_request_error");
    let content = |m: &Message| m.content.as_ref().map(words).unwrap_or(0);
    let prompt_tokens = match wire {
        Wire::Chat | Wire::Messages => {
            let msgs = body.messages.as_deref().unwrap_or(&[]);
            if msgs.is_empty() {
                return Err(required("messages"));
            }
            let system = body.system.as_ref().map(words);
            templated(system.into_iter().chain(msgs.iter().map(content)))
        }
        Wire::Responses => match &body.input {
            Some(serde_json::Value::String(s)) => {
                templated(std::iter::once(s.split_whitespace().count() as u32))
            }
            Some(serde_json::Value::Array(items)) if !items.is_empty() => templated(
                items
                    .iter()
                    .map(|m| m.get("content").map(words).unwrap_or(0)),
            ),
            _ => return Err(required("input")),
        },
        Wire::Completions => match &body.prompt {
            Some(p) => words(p).max(1),
            None => return Err(required("prompt")),
        },
    };
    let image_tokens = match wire {
        Wire::Chat | Wire::Messages => body
            .messages
            .iter()
            .flatten()
            .filter_map(|m| m.content.as_ref())
            .map(images)
            .sum(),
        Wire::Responses => match &body.input {
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .filter_map(|m| m.get("content"))
                .map(images)
                .sum(),
            _ => 0,
        },
        Wire::Completions => 0,
    };
    let max_tokens = match wire {
        Wire::Responses => body.max_output_tokens,
        _ => body.max_completion_tokens.or(body.max_tokens),
    }
    .unwrap_or(DEFAULT_MAX_TOKENS)
    .max(1);
    if prompt_tokens.saturating_add(max_tokens) > max_len {
        return Err(refuse(
            400,
            format!(
                "This model's maximum context length is {max_len} tokens. However, you requested {} tokens ({prompt_tokens} in the messages, {max_tokens} in the completion).",
                prompt_tokens.saturating_add(max_tokens)
            ),
            "BadRequestError",
        ));
    }
    let greedy = (body.temperature == Some(0.0)).then(|| Greedy {
        prompt: prompt_identity(&body),
        top_logprobs: match &body.logprobs {
            Some(serde_json::Value::Bool(true)) => Some(body.top_logprobs.unwrap_or(0) as usize),
            Some(serde_json::Value::Number(k)) => k.as_u64().map(|k| k as usize),
            _ => None,
        },
    });
    Ok(Accepted {
        model,
        prompt_tokens,
        max_tokens,
        image_tokens,
        // The Responses and Messages APIs always report usage.
        include_usage: matches!(wire, Wire::Responses | Wire::Messages)
            || body
                .stream_options
                .and_then(|o| o.include_usage)
                .unwrap_or(false),
        stream: body.stream.unwrap_or(false),
        greedy,
        ask,
    })
}

/// What a greedy answer depends on: the prompt as sent (system prompt,
/// messages' contents, input or prompt), hashed.
fn prompt_identity(body: &Body) -> u64 {
    let mut bytes = Vec::new();
    let mut add = |v: &serde_json::Value| {
        bytes.extend_from_slice(v.to_string().as_bytes());
        bytes.push(0);
    };
    for v in [&body.system, &body.input, &body.prompt]
        .into_iter()
        .flatten()
    {
        add(v);
    }
    for m in body.messages.iter().flatten() {
        if let Some(c) = &m.content {
            add(c);
        }
    }
    crate::answers::prompt_hash(&bytes)
}

/// The text of `n` generated tokens, the `offset`-th onwards of request
/// `id`'s output: one word per token.
pub fn text_of(n: u32, offset: u64) -> String {
    let mut s = String::new();
    for i in 0..n as u64 {
        s.push(' ');
        s.push_str(WORDS[((offset + i) % WORDS.len() as u64) as usize]);
    }
    s
}

/// `text_of(n, offset).len()`, without building it.
pub fn text_bytes(n: u32, offset: u64) -> u32 {
    (0..n as u64)
        .map(|i| 1 + WORDS[((offset + i) % WORDS.len() as u64) as usize].len() as u32)
        .sum()
}

/// What the simulator of one point is: its engine (idle), the names it
/// serves, its run-to-run noise and seed, and how it describes itself.
pub struct Setup {
    /// Its engines: one per data-parallel replica and pipeline micro-batch.
    pub engine: Cluster,
    pub served: Vec<String>,
    pub noise: f64,
    pub seed: u64,
    pub info: ServerInfo,
    /// Its greedy answers (its weights' and KV cache's number formats).
    pub answers: crate::answers::Answerer,
}

/// The settings and performance model of a point's simulated server: every
/// default resolved, and the check that the weights and a KV block fit the
/// GPUs. `validate` runs it too (`crate::fit`), so that a model that does
/// not fit is refused before a run starts, in the same words.
pub fn serving(cfg: &PointConfig) -> Result<(profile::EngineConfig, PerfModel), Error> {
    let sim = cfg.target.sim.as_ref().ok_or(Error::NoSimSettings)?;
    let arch = cfg
        .model
        .architecture
        .as_ref()
        .ok_or_else(|| Error::NoArchitecture(cfg.model.name.clone()))?;
    let weights = cfg
        .precision
        .as_ref()
        .and_then(|p| p.dtype)
        .unwrap_or(DType::Bf16);
    let kv = cfg.precision.as_ref().and_then(|p| p.kv_dtype);
    let config = profile::resolve(sim, arch, weights, kv)?;
    let perf = PerfModel::new(&config, arch, weights)?;
    Ok((config, perf))
}

impl Setup {
    /// The simulator of a point's target, model and precision.
    pub fn of(cfg: &PointConfig) -> Result<Setup, Error> {
        let sim = cfg.target.sim.as_ref().ok_or(Error::NoSimSettings)?;
        let (config, perf) = serving(cfg)?;
        let kv = config.kv_dtype;
        let engines = (config.replicas * config.pipeline) as usize;
        let engine = Cluster::new(
            (0..engines)
                .map(|_| Engine::new(perf.clone(), &config))
                .collect(),
        );
        let kv_cache_tokens = engine.stats().kv_capacity_tokens;
        let mut served = vec![
            cfg.served_name().to_string(),
            cfg.model.served_name.clone(),
            cfg.model.name.clone(),
        ];
        served.dedup();
        let gpu = infer_bench_spec::catalog::gpu(&sim.gpu)
            .map(|g| g.name)
            .unwrap_or("?");
        let info = ServerInfo {
            command: None,
            name: Some("infer-bench-sim".into()),
            version: Some(env!("CARGO_PKG_VERSION").into()),
            model: Some(
                format!(
                    "{} on {}x {gpu} ({:?})",
                    cfg.model.name,
                    sim.total_gpus(),
                    perf.weights_dtype()
                )
                .to_lowercase()
                .into(),
            ),
            log: None,
            kv_dtype: Some(format!("{kv:?}").to_lowercase()),
            kv_cache_tokens: Some(kv_cache_tokens),
            admission: Some(config.admission.name().into()),
            profile: Some(config.profile.name().into()),
            scheduler: Some(config.scheduler.name().into()),
            max_num_seqs: Some(config.max_num_seqs),
            max_batched_tokens: Some(config.max_batched_tokens),
            ..Default::default()
        };
        Ok(Setup {
            engine,
            served,
            noise: sim.noise,
            seed: cfg.seed,
            info,
            answers: crate::answers::Answerer::of(perf.weights_dtype(), Some(kv)),
        })
    }

    /// Run `run`'s speed factor: drawn from N(1, noise), clamped to
    /// [0.5, 1.5], deterministically from the seed and the run index; 1
    /// without noise. Every step of the run takes its modelled time times
    /// this.
    pub fn speed(&self, run: u32) -> f64 {
        speed_of(self.noise, self.seed, run)
    }
}

/// See [`Setup::speed`].
pub fn speed_of(noise: f64, seed: u64, run: u32) -> f64 {
    if noise > 0.0 {
        use rand_distr::Distribution;
        let mut r = infer_bench_spec::seed::rng(seed ^ 0x5eed_5eed, run as u64);
        let z: f64 = rand_distr::StandardNormal.sample(&mut r);
        (1.0 + noise * z).clamp(0.5, 1.5)
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_cost_a_token_per_28_pixel_square() {
        use base64::Engine as _;
        let mut png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        png.extend_from_slice(&448u32.to_be_bytes());
        png.extend_from_slice(&300u32.to_be_bytes());
        png.extend_from_slice(&[8, 2, 0, 0, 0, 0, 0, 0, 0]);
        let b64 = base64::engine::general_purpose::STANDARD.encode(&png);
        assert_eq!(
            image_tokens(&format!("data:image/png;base64,{b64}")),
            16 * 11
        );
        assert_eq!(image_tokens("https://x/y.png"), URL_IMAGE_TOKENS);
        // A dataset's GIF (a 56 x 29 logical screen).
        let gif =
            base64::engine::general_purpose::STANDARD.encode(b"GIF89a\x38\x00\x1d\x00\x00\x00\x00");
        assert_eq!(image_tokens(&format!("data:image/gif;base64,{gif}")), 2 * 2);
        let body = format!(
            r#"{{"model":"m","messages":[{{"role":"user","content":[{{"type":"text","text":"a b"}},{{"type":"image_url","image_url":{{"url":"data:image/png;base64,{b64}"}}}}]}}]}}"#
        );
        let a = read(body.as_bytes(), Wire::Chat, &["m".to_string()], 100_000).unwrap();
        assert_eq!(
            a.prompt_tokens,
            2 + 176 + CHAT_TOKENS_PER_MESSAGE + CHAT_TOKENS_PER_REQUEST
        );
    }

    fn served() -> Vec<String> {
        vec!["m".into()]
    }

    #[test]
    fn prompts_count_words_and_chat_adds_the_template() {
        let a = read(
            br#"{"model":"m","prompt":"a b c","max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}"#,
            Wire::Completions,
            &served(),
            100,
        )
        .unwrap();
        assert_eq!((a.prompt_tokens, a.max_tokens), (3, 4));
        assert!(a.stream && a.include_usage);
        let c = read(
            br#"{"model":"m","messages":[{"role":"user","content":"a b"},{"role":"assistant","content":"c"}]}"#,
            Wire::Chat,
            &served(),
            100,
        )
        .unwrap();
        assert_eq!(
            c.prompt_tokens,
            3 + 2 * CHAT_TOKENS_PER_MESSAGE + CHAT_TOKENS_PER_REQUEST
        );
        assert_eq!(c.max_tokens, DEFAULT_MAX_TOKENS);
        assert!(!c.stream);
    }

    #[test]
    fn responses_and_messages_count_as_chat_does() {
        let chat = read(
            br#"{"model":"m","messages":[{"role":"system","content":"be kind"},{"role":"user","content":"a b"}]}"#,
            Wire::Chat,
            &served(),
            100,
        )
        .unwrap();
        let messages = read(
            br#"{"model":"m","system":"be kind","messages":[{"role":"user","content":"a b"}],"max_tokens":3}"#,
            Wire::Messages,
            &served(),
            100,
        )
        .unwrap();
        let responses = read(
            br#"{"model":"m","input":[{"role":"system","content":"be kind"},{"role":"user","content":"a b"}],"max_output_tokens":3,"stream":true}"#,
            Wire::Responses,
            &served(),
            100,
        )
        .unwrap();
        assert_eq!(chat.prompt_tokens, messages.prompt_tokens);
        assert_eq!(chat.prompt_tokens, responses.prompt_tokens);
        assert_eq!((messages.max_tokens, responses.max_tokens), (3, 3));
        assert!(responses.include_usage && messages.include_usage && responses.stream);
    }

    #[test]
    fn refusals_say_why_with_vllms_status() {
        let r = |b: &[u8], wire| read(b, wire, &served(), 10).unwrap_err().status;
        assert_eq!(r(b"{", Wire::Completions), 400);
        assert_eq!(r(br#"{"model":"x","prompt":"a"}"#, Wire::Completions), 404);
        assert_eq!(r(br#"{"model":"m"}"#, Wire::Completions), 400);
        assert_eq!(r(br#"{"model":"m","messages":[]}"#, Wire::Chat), 400);
        assert_eq!(r(br#"{"model":"m","input":[]}"#, Wire::Responses), 400);
        assert_eq!(r(br#"{"model":"m","system":"s"}"#, Wire::Messages), 400);
        let long = read(
            br#"{"model":"m","prompt":"a b c","max_tokens":8}"#,
            Wire::Completions,
            &served(),
            10,
        )
        .unwrap_err();
        assert!(
            long.message.contains("maximum context length is 10"),
            "{long:?}"
        );
    }

    #[test]
    fn text_bytes_is_the_length_of_the_text() {
        for (n, off) in [(0, 0), (1, 5), (7, 3), (30, 11)] {
            assert_eq!(text_bytes(n, off) as usize, text_of(n, off).len());
        }
    }
}
