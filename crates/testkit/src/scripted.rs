//! A scripted OpenAI-compatible server whose timing is known and recorded.
//!
//! This module owns the loopback server that integration tests of the load
//! engine and benchmarks of the client's own cost run against. A [`Script`]
//! says how it answers (delays, SSE framing, faults); the server records, per
//! request, the truth a client's measurements are compared with: when the
//! request was received, when each content event's write completed and how
//! many tokens it carried, and which fault was applied (see
//! [`ServedRequest`]). Compare against the *recorded* instants, not the
//! scripted delays: tokio's timer fires up to ~1 ms late.
//!
//! # What goes on the wire
//!
//! Endpoints: `POST /v1/completions`, `POST /v1/chat/completions`,
//! `POST /v1/responses` (OpenAI's Responses API), `POST /v1/messages`
//! (Anthropic's Messages API), `POST /v1/embeddings`, `POST /v1/rerank`
//! (see `retrieval`), `GET /v1/models`, `GET /health`, `GET /metrics`. A
//! streamed completion is
//! framed like llama.cpp's `llama-server` and vLLM (compare
//! `/work/shared/fixtures/llama-server/`):
//!
//! - chat with `role_chunk`: a role-only delta (`{"role":"assistant",
//!   "content":""}`) is written as soon as the request is read, before the
//!   TTFT delay; it is not output and is not in the record's chunks;
//! - one event per `tokens_per_event` tokens, the first at
//!   `received + ttft`, then every `itl` (absolute deadlines, so lateness
//!   does not accumulate); chat with `reasoning` sends the first few as
//!   `reasoning_content`;
//! - a finish event (`finish_reason: "length"`: the output is always
//!   `max_tokens` long, as with `ignore_eos`); for completions it carries
//!   `usage` when asked (llama.cpp), for chat a separate usage-only event
//!   with `"choices": []` follows (OpenAI, vLLM, llama.cpp);
//! - `data: [DONE]`.
//!
//! The Responses and Messages APIs are framed as OpenAI and llama.cpp frame
//! them (`event:` lines, typed events): the same content events at the
//! same instants, as `response.output_text.delta` (reasoning:
//! `response.reasoning_text.delta`) after `response.created`, ending with
//! `response.completed` carrying the usage and no `[DONE]`; or as
//! `content_block_delta` (`text_delta`, reasoning `thinking_delta`) after
//! `message_start` (with the input usage), ending with `message_delta`
//! (stop reason, output usage) and `message_stop`. Their usage is always
//! sent (unless `usage` is off), as those APIs do.
//!
//! The response head goes out as soon as the request is read. Each SSE
//! event (comments included) is written as its own socket write (see
//! [`infer_bench_sim::http`]) unless `split_events` says otherwise. A request that
//! is not streamed gets its whole body, head and body in one write, at
//! `received + ttft + itl * (events - 1)`.
//!
//! # The recorded truth
//!
//! All instants are [`std::time::Instant`], the monotonic clock a client in
//! the same process reads. `received` is taken when the request body has
//! been read, just before the handler runs. A content event's instant is
//! taken when the `writev` that carried its last byte returned (hyper's
//! buffer drained into the kernel): on loopback the bytes are already in the
//! client's socket by then, so a client's arrival stamp can precede the
//! record by a few microseconds, and otherwise follows it by the client's
//! own latency. Records are filed when a request ends, however it ends;
//! [`ScriptedServer::wait_idle`] waits for that.

use std::fmt::Write as _;
use std::io;
use std::mem;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::BadRequest;
use bytes::{Bytes, BytesMut};
use hyper::header::{CACHE_CONTROL, CONTENT_LENGTH, HeaderName, HeaderValue, RETRY_AFTER};
use hyper::{Method, StatusCode};
pub use media::{ReceivedMedia, fnv};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use tokio::sync::Notify;

use infer_bench_sim::http::{self, BodyClosed, BodySender, Request, Response, ServerHandle};

/// How the server answers. Plain data: build one, clone it, tweak fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    /// The model id served by `/v1/models` and echoed when a request names
    /// none.
    pub model: String,
    /// From request received to the first content event.
    pub ttft: Duration,
    /// Between content events.
    pub itl: Duration,
    /// Tokens per content event (0 counts as 1); the last event carries the
    /// remainder. Usage still counts tokens.
    pub tokens_per_event: u32,
    /// Output tokens when a request sets neither `max_tokens` nor
    /// `max_completion_tokens`.
    pub default_max_tokens: u32,
    /// Chat: send a role-only delta first, as vLLM and llama.cpp do.
    pub role_chunk: bool,
    /// Honour `stream_options.include_usage` (and report usage in
    /// non-streamed responses); `false` plays a server that never reports
    /// usage.
    pub usage: bool,
    /// Chat: the first few content events (up to 3, or `reasoning_events`,
    /// never all) carry `delta.reasoning_content` instead of `delta.content`.
    pub reasoning: bool,
    /// With `reasoning`: how many leading content events are reasoning
    /// (0: up to 3); never all of them, so the reply has an answer. The
    /// reasoning tokens are these events' tokens, exactly.
    pub reasoning_events: u32,
    /// With `reasoning`: usage carries
    /// `completion_tokens_details.reasoning_tokens`, as vLLM and OpenAI do.
    pub reasoning_usage: bool,
    /// Send `: ping` SSE comments: one halfway through the TTFT wait and one
    /// halfway between content events.
    pub keepalive_comments: bool,
    /// End lines with `\r\n` instead of `\n`.
    pub crlf: bool,
    /// Deliberately misalign writes and events: of every three content
    /// events, one goes out whole; one is split into two writes at an
    /// awkward offset (inside `data:`, after the colon, mid-JSON, between
    /// the line ends), its first part half an ITL early; and one is held
    /// back and written together with the next event in a single write (so
    /// it arrives an ITL late and the two share an instant).
    pub split_events: bool,
    /// What goes wrong, applied to the requests `fault_every` selects.
    pub fault: Fault,
    /// Apply `fault` to every k-th completion request (the k-th, 2k-th, ...
    /// in arrival order); 0 and 1 mean every request.
    pub fault_every: u32,
    /// What `/v1/models` says in `owned_by` (servers name themselves there:
    /// "vllm", "sglang", "llamacpp"). "vllm" by default: the server takes
    /// vLLM's extra fields (and ignores them), so it presents as vLLM.
    pub owned_by: String,
    /// The status a prefix-cache reset (`POST /reset_prefix_cache`, vLLM's,
    /// or `POST /flush_cache`, SGLang's) is answered with: 200 by
    /// default. Every reset is counted ([`ScriptedServer::cache_resets`]).
    pub cache_reset_status: u16,
    /// Answer 422 to a body with a top-level field the OpenAI API does not
    /// define ([`OPENAI_FIELDS`]), as strict servers do (Hugging Face
    /// `transformers serve`).
    pub strict: bool,
    /// Play a server that decodes speculatively with drafts of this many
    /// tokens (0: it does not): each content event is one verification
    /// step, its tokens the accepted draft tokens and the bonus one, and
    /// `/metrics` adds vLLM's `spec_decode` counters, so that the truth is
    /// `tokens_per_event - 1` accepted of `spec_draft_tokens` proposed a step.
    pub spec_draft_tokens: u32,
    /// Keep each request's prompt text in its record
    /// ([`ServedRequest::prompt`]); off by default, so that long runs do
    /// not hold every prompt.
    pub keep_prompts: bool,
    /// Images cost prompt tokens as a vision model's patches do: one per
    /// `image_patch` x `image_patch` pixels (sides rounded up) of each
    /// decoded image; 0 (the default) counts none. URLs count none.
    pub image_patch: u32,
    /// A request that asks for JSON under a schema or offers tools (see
    /// `infer_bench_sim::structured`) is answered with JSON that matches
    /// it, or a call of its first tool (chat: `delta.tool_calls`
    /// fragments, the name in the first); every `invalid_every`-th such
    /// request (0: none) gets an invalid answer instead: JSON cut short,
    /// or a call of a tool it did not offer. Its pieces go out on the
    /// scripted events and tokens; [`ServedRequest::invalid`] records it.
    pub invalid_every: u32,
}

/// The tool an invalid scripted answer calls (never one offered).
pub const UNDECLARED_TOOL: &str = "not_a_declared_tool";

/// The top-level request fields of OpenAI's completions and chat
/// completions APIs: what a [`Script::strict`] server accepts.
pub const OPENAI_FIELDS: &[&str] = &[
    "model",
    "prompt",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "stream",
    "stream_options",
    "temperature",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "n",
    "stop",
    "logprobs",
    "top_logprobs",
    "logit_bias",
    "user",
    "echo",
    "best_of",
    "suffix",
    "response_format",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
];

/// The top-level request fields of OpenAI's Responses API.
pub const RESPONSES_FIELDS: &[&str] = &[
    "model",
    "input",
    "instructions",
    "max_output_tokens",
    "stream",
    "store",
    "temperature",
    "top_p",
    "reasoning",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "previous_response_id",
    "text",
    "truncation",
    "user",
    "metadata",
];

/// The top-level request fields of Anthropic's Messages API.
pub const MESSAGES_FIELDS: &[&str] = &[
    "model",
    "messages",
    "system",
    "max_tokens",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "metadata",
    "thinking",
    "tools",
    "tool_choice",
];

/// What a [`Script::strict`] server accepts at `endpoint`.
fn endpoint_fields(endpoint: Endpoint) -> &'static [&'static str] {
    match endpoint {
        Endpoint::Completions | Endpoint::ChatCompletions => OPENAI_FIELDS,
        Endpoint::Responses => RESPONSES_FIELDS,
        Endpoint::Messages => MESSAGES_FIELDS,
    }
}

impl Default for Script {
    fn default() -> Self {
        Script {
            model: "scripted-model".to_owned(),
            ttft: Duration::from_millis(10),
            itl: Duration::from_millis(2),
            tokens_per_event: 1,
            default_max_tokens: 16,
            role_chunk: true,
            usage: true,
            reasoning: false,
            reasoning_events: 0,
            reasoning_usage: false,
            keepalive_comments: false,
            crlf: false,
            split_events: false,
            fault: Fault::None,
            fault_every: 0,
            owned_by: "vllm".to_owned(),
            cache_reset_status: 200,
            strict: false,
            spec_draft_tokens: 0,
            keep_prompts: false,
            image_patch: 0,
            invalid_every: 0,
        }
    }
}

impl Script {
    /// No delays at all, for measuring the client's own cost: the server
    /// then writes events as fast as the connection takes them.
    pub fn fast() -> Self {
        Script {
            ttft: Duration::ZERO,
            itl: Duration::ZERO,
            ..Script::default()
        }
    }

    /// The fault request number `seq` (1-based) gets.
    pub fn fault_for(&self, seq: u64) -> Fault {
        let every = u64::from(self.fault_every.max(1));
        if seq % every == 0 {
            self.fault
        } else {
            Fault::None
        }
    }
}

/// A failure to inject. `after_events` counts content events written first
/// (a value past the end means "after the last content event, before the
/// finish event"). For a request that is not streamed, the stream faults
/// become their nearest equivalent, noted on each variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fault {
    /// Everything as scripted.
    #[default]
    None,
    /// `500` with an OpenAI-style error body, at once.
    Http500,
    /// `429` with an error body and `Retry-After: 1`, at once.
    Http429,
    /// The connection is closed without any response. With `fault_every: n`
    /// this refuses every n-th request.
    Refuse,
    /// The connection is closed after `after_events` content events, without
    /// the finish event, `[DONE]` or the chunked terminator. Not streamed:
    /// closed without a response when the response was due.
    DropMidStream { after_events: u32 },
    /// After `after_events` content events, a `data:` line that is not JSON;
    /// the stream then goes on normally. Not streamed: a `200` whose body is
    /// not JSON.
    MalformedEvent { after_events: u32 },
    /// After `after_events` content events, an in-stream error object
    /// (`data: {"error": {...}}`, as vLLM sends) and then `[DONE]`. Not
    /// streamed: a `500` with the error body.
    StreamError { after_events: u32 },
    /// After `after_events` content events, silence for `for_` (no pings
    /// either), then the rest of the stream, shifted by `for_`. Not
    /// streamed: the response comes `for_` late.
    Stall { after_events: u32, for_: Duration },
    /// `200` and then only `data: [DONE]`. Not streamed: a `200` whose
    /// completion has `"choices": []` and zero completion tokens.
    EmptyStream,
    /// All content events, then the body ends cleanly but without the
    /// finish event, usage or `[DONE]`. Not streamed: a `Content-Length` is
    /// promised and half the body sent before the connection closes.
    TruncatedNoDone,
}

impl Fault {
    fn after_events(&self) -> Option<u32> {
        match *self {
            Fault::DropMidStream { after_events }
            | Fault::MalformedEvent { after_events }
            | Fault::StreamError { after_events }
            | Fault::Stall { after_events, .. } => Some(after_events),
            _ => None,
        }
    }
}

/// Which completion endpoint a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Completions,
    ChatCompletions,
    /// OpenAI's Responses API.
    Responses,
    /// Anthropic's Messages API.
    Messages,
}

/// One content event's write, as recorded by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkTruth {
    /// When the write that completed the event returned (bytes in the
    /// kernel). Events written together share it.
    pub at: Instant,
    /// Output tokens the event carried.
    pub tokens: u32,
}

/// What the server knows about one completion request. Records appear in
/// [`ScriptedServer::records`] once the request is over.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedRequest {
    /// 1-based arrival order among completion requests.
    pub seq: u64,
    /// For a retrieval request, `Completions`: see `retrieval`.
    pub endpoint: Endpoint,
    /// An embeddings or rerank request (`None` for completions).
    pub retrieval: Option<Retrieval>,
    /// When the request's body had been read.
    pub received: Instant,
    pub stream: bool,
    /// The model the request named (empty if none).
    pub model: String,
    /// Whitespace-separated words of the prompt (or the number of token ids).
    pub prompt_tokens: u32,
    /// The output length asked for (every request gets exactly this many
    /// unless a fault cuts it short).
    pub max_tokens: u32,
    pub include_usage: bool,
    /// The status sent; 0 when no status line was (refused or dropped).
    pub status: u16,
    /// The fault applied to this request (`Fault::None` if none).
    pub fault: Fault,
    /// When the fault took effect on the wire: the error or malformed event
    /// written, the stall begun, the connection dropped.
    pub fault_at: Option<Instant>,
    /// Content events in order (reasoning included; role-only deltas,
    /// comments, the finish and usage events excluded). A non-streamed
    /// response is one entry: the write of the whole body.
    pub chunks: Vec<ChunkTruth>,
    /// When the response's last write completed (or the connection was
    /// dropped); `None` if it never finished.
    pub finished: Option<Instant>,
    /// The client went away before the response was complete.
    pub client_gone: bool,
    /// The body's top-level field names, sorted.
    pub fields: Vec<String>,
    /// With [`Script::keep_prompts`]: the prompt as sent (completions: a
    /// string `prompt`; chat: the last message's string `content`, or the
    /// text of its text parts), else empty.
    pub prompt: String,
    /// The images and audio of a chat request's content parts, decoded,
    /// in the order sent.
    pub media: Vec<ReceivedMedia>,
    /// The credentials and API version the request carried: the values of
    /// its `authorization`, `x-api-key` and `anthropic-version` headers.
    pub credentials: Credentials,
    /// It asked for structured output or offered tools, and was answered
    /// so ([`Script::invalid_every`]).
    pub structured: bool,
    /// Its structured answer was made invalid on cue.
    pub invalid: bool,
}

/// The headers a request carried its key and API version in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    pub authorization: Option<String>,
    pub x_api_key: Option<String>,
    pub anthropic_version: Option<String>,
}

impl ServedRequest {
    /// True TTFT: first content event written - request received.
    pub fn true_ttft(&self) -> Option<Duration> {
        self.chunks.first().map(|c| c.at - self.received)
    }

    /// True gaps between consecutive content events (per event; two events
    /// written together have a zero gap).
    pub fn true_gaps(&self) -> Vec<Duration> {
        self.chunks.windows(2).map(|w| w[1].at - w[0].at).collect()
    }

    /// True E2E: last content event written - request received.
    pub fn true_e2e(&self) -> Option<Duration> {
        self.chunks.last().map(|c| c.at - self.received)
    }

    /// True TPOT: (last - first content event) / (output tokens - 1).
    pub fn true_tpot(&self) -> Option<Duration> {
        let n = self.output_tokens();
        match (self.chunks.first(), self.chunks.last()) {
            (Some(first), Some(last)) if n >= 2 => Some((last.at - first.at) / (n - 1)),
            _ => None,
        }
    }

    /// Output tokens actually written.
    pub fn output_tokens(&self) -> u32 {
        self.chunks.iter().map(|c| c.tokens).sum()
    }
}

/// A running scripted server. Dropping it closes everything at once.
#[derive(Debug)]
pub struct ScriptedServer {
    http: ServerHandle,
    state: Arc<State>,
}

impl ScriptedServer {
    /// Binds `127.0.0.1:0` and serves `script` on the current tokio runtime.
    pub async fn start(script: Script) -> io::Result<ScriptedServer> {
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let state = Arc::new(State {
            script,
            created,
            seq: AtomicU64::new(0),
            records: Mutex::new(Vec::new()),
            in_flight: AtomicU64::new(0),
            idle: Notify::new(),
            prompt_tokens: AtomicU64::new(0),
            generation_tokens: AtomicU64::new(0),
            steps: AtomicU64::new(0),
            faults: AtomicU64::new(0),
            cache_resets: Mutex::new(Vec::new()),
        });
        let handler_state = state.clone();
        let http = http::bind(move |req| handle(handler_state.clone(), req)).await?;
        Ok(ScriptedServer { http, state })
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        self.http.base_url()
    }

    pub fn addr(&self) -> SocketAddr {
        self.http.addr()
    }

    pub fn script(&self) -> &Script {
        &self.state.script
    }

    /// The finished requests' records, in arrival order. A request whose
    /// last write the client has already read may still be finishing its
    /// record; [`ScriptedServer::wait_idle`] first to be sure.
    pub fn records(&self) -> Vec<ServedRequest> {
        let mut records = self.state.records.lock().clone();
        records.sort_by_key(|r| r.seq);
        records
    }

    /// [`ScriptedServer::records`], drained: a long run (a client-cost
    /// benchmark of millions of events) takes them as it goes instead of
    /// keeping every record (about 24 bytes a content event) to the end.
    pub fn take_records(&self) -> Vec<ServedRequest> {
        let mut records = mem::take(&mut *self.state.records.lock());
        records.sort_by_key(|r| r.seq);
        records
    }

    /// The prefix-cache resets asked for so far, in order.
    pub fn cache_resets(&self) -> Vec<CacheResetCall> {
        self.state.cache_resets.lock().clone()
    }

    /// Completion requests received and not yet recorded.
    pub fn in_flight(&self) -> u64 {
        self.state.in_flight.load(Ordering::SeqCst)
    }

    /// Waits until every completion request received so far is recorded.
    pub async fn wait_idle(&self) {
        loop {
            let notified = self.state.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.state.in_flight.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Stops accepting and lets in-flight responses finish (for up to
    /// [`http::DEFAULT_GRACE`]).
    pub async fn shutdown(self) {
        self.http.shutdown().await
    }
}

#[derive(Debug)]
struct State {
    script: Script,
    created: u64,
    seq: AtomicU64,
    records: Mutex<Vec<ServedRequest>>,
    in_flight: AtomicU64,
    idle: Notify,
    prompt_tokens: AtomicU64,
    generation_tokens: AtomicU64,
    /// Content events of finished requests: verification steps, when the
    /// script decodes speculatively.
    steps: AtomicU64,
    faults: AtomicU64,
    cache_resets: Mutex<Vec<CacheResetCall>>,
}

/// One prefix-cache reset the server was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheResetCall {
    /// `/reset_prefix_cache` or `/flush_cache`.
    pub path: String,
    /// Completion requests received before it.
    pub after_requests: u64,
}

/// Owns a request's record while it is served and files it when dropped,
/// however the request ends (even when hyper drops the handler because the
/// client left).
struct Tracker {
    state: Arc<State>,
    rec: ServedRequest,
}

impl Tracker {
    fn new(state: Arc<State>, seq: u64, endpoint: Endpoint, received: Instant) -> Self {
        state.in_flight.fetch_add(1, Ordering::SeqCst);
        Tracker {
            state,
            rec: ServedRequest {
                seq,
                endpoint,
                retrieval: None,
                received,
                stream: false,
                model: String::new(),
                prompt_tokens: 0,
                max_tokens: 0,
                include_usage: false,
                status: 0,
                fault: Fault::None,
                fault_at: None,
                chunks: Vec::new(),
                finished: None,
                client_gone: false,
                fields: Vec::new(),
                prompt: String::new(),
                credentials: Credentials::default(),
                media: Vec::new(),
                structured: false,
                invalid: false,
            },
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        // Every other field is `Copy`.
        let rec = ServedRequest {
            model: mem::take(&mut self.rec.model),
            chunks: mem::take(&mut self.rec.chunks),
            fields: mem::take(&mut self.rec.fields),
            prompt: mem::take(&mut self.rec.prompt),
            credentials: mem::take(&mut self.rec.credentials),
            media: mem::take(&mut self.rec.media),
            ..self.rec
        };
        self.state
            .generation_tokens
            .fetch_add(u64::from(rec.output_tokens()), Ordering::Relaxed);
        self.state.steps.fetch_add(
            rec.chunks.iter().filter(|c| c.tokens > 0).count() as u64,
            Ordering::Relaxed,
        );
        self.state.records.lock().push(rec);
        self.state.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.state.idle.notify_waiters();
    }
}

// ---------------------------------------------------------------------------
// Routing and the small endpoints.

const COMPLETIONS: &str = "/v1/completions";
const CHAT: &str = "/v1/chat/completions";
const RESPONSES: &str = "/v1/responses";
const MESSAGES: &str = "/v1/messages";

async fn handle(state: Arc<State>, req: Request) -> Response {
    let endpoint = match req.path.as_str() {
        COMPLETIONS => Some(Endpoint::Completions),
        CHAT => Some(Endpoint::ChatCompletions),
        RESPONSES => Some(Endpoint::Responses),
        MESSAGES => Some(Endpoint::Messages),
        _ => None,
    };
    let retrieval = match req.path.as_str() {
        "/v1/embeddings" => Some(Retrieval::Embeddings),
        "/v1/rerank" | "/rerank" => Some(Retrieval::Rerank),
        _ => None,
    };
    if let (&Method::POST, Some(kind)) = (&req.method, retrieval) {
        return retrieval::answer(state, kind, req).await;
    }
    match (&req.method, req.path.as_str(), endpoint) {
        (&Method::POST, _, Some(endpoint)) => completion(state, endpoint, req).await,
        (&Method::GET, "/v1/models", _) => models(&state),
        (&Method::GET, "/health", _) => Response::json(StatusCode::OK, r#"{"status":"ok"}"#),
        (&Method::GET, "/metrics", _) => metrics(&state),
        (&Method::POST, path @ ("/reset_prefix_cache" | "/flush_cache"), _) => {
            state.cache_resets.lock().push(CacheResetCall {
                path: path.to_string(),
                after_requests: state.seq.load(Ordering::SeqCst),
            });
            let status = StatusCode::from_u16(state.script.cache_reset_status)
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            if status.is_success() {
                Response::json(status, "{}")
            } else {
                http::error_response(status, "cache reset refused by the script")
            }
        }
        (_, "/v1/models" | "/health" | "/metrics", _) | (_, _, Some(_)) => {
            http::error_response(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        }
        _ => http::error_response(StatusCode::NOT_FOUND, "File Not Found"),
    }
}

fn models(state: &State) -> Response {
    let body = json!({
        "object": "list",
        "data": [{
            "id": state.script.model,
            "object": "model",
            "created": state.created,
            "owned_by": state.script.owned_by,
        }],
    });
    Response::json(StatusCode::OK, body.to_string())
}

fn metrics(state: &State) -> Response {
    let counters = [
        (
            "requests_total",
            "counter",
            "Completion requests received",
            state.seq.load(Ordering::Relaxed),
        ),
        (
            "requests_running",
            "gauge",
            "Completion requests in flight",
            state.in_flight.load(Ordering::Relaxed),
        ),
        (
            "prompt_tokens_total",
            "counter",
            "Prompt tokens received",
            state.prompt_tokens.load(Ordering::Relaxed),
        ),
        (
            "generation_tokens_total",
            "counter",
            "Output tokens written, counted when a request finishes",
            state.generation_tokens.load(Ordering::Relaxed),
        ),
        (
            "faults_total",
            "counter",
            "Requests a scripted fault was applied to",
            state.faults.load(Ordering::Relaxed),
        ),
    ];
    let mut text = String::new();
    for (name, kind, help, value) in counters {
        let _ = write!(
            text,
            "# HELP scripted:{name} {help}\n# TYPE scripted:{name} {kind}\nscripted:{name} {value}\n"
        );
    }
    let k = u64::from(state.script.spec_draft_tokens);
    if k > 0 {
        let steps = state.steps.load(Ordering::Relaxed);
        let tokens = state.generation_tokens.load(Ordering::Relaxed);
        for (name, value) in [
            ("num_drafts", steps),
            ("num_draft_tokens", steps * k),
            ("num_accepted_tokens", tokens.saturating_sub(steps)),
        ] {
            let _ = write!(
                text,
                "# TYPE vllm:spec_decode_{name} counter\nvllm:spec_decode_{name}_total{{engine=\"0\"}} {value}\n"
            );
        }
    }
    Response::full(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        text,
    )
}

// ---------------------------------------------------------------------------
// Completion requests.

/// What a completion request asks for.
#[derive(Debug, Clone, PartialEq)]
struct Ask {
    fields: Vec<String>,
    model: Option<String>,
    stream: bool,
    include_usage: bool,
    max_tokens: u32,
    prompt_tokens: u32,
    media: Vec<ReceivedMedia>,
}

/// Everything a response needs, fixed when the request is read.
struct Ctx {
    state: Arc<State>,
    endpoint: Endpoint,
    seq: u64,
    max_tokens: u32,
    prompt_tokens: u32,
    include_usage: bool,
    fault: Fault,
    model: String,
    events: Events,
    /// A structured answer: its text (JSON, or a tool call's arguments)
    /// and the tool it calls.
    structured: Option<(String, Option<String>)>,
}

impl Ctx {
    fn script(&self) -> &Script {
        &self.state.script
    }

    fn tokens_per_event(&self) -> u32 {
        self.script().tokens_per_event.max(1)
    }

    fn n_events(&self) -> u32 {
        self.max_tokens.div_ceil(self.tokens_per_event())
    }

    fn usage(&self) -> bool {
        self.script().usage
    }
}

async fn completion(state: Arc<State>, endpoint: Endpoint, req: Request) -> Response {
    let seq = state.seq.fetch_add(1, Ordering::Relaxed) + 1;
    let mut t = Tracker::new(state.clone(), seq, endpoint, req.received);
    let ask = match parse_ask(
        endpoint,
        &req.body,
        state.script.default_max_tokens,
        state.script.image_patch,
    ) {
        Ok(ask) => ask,
        Err(message) => {
            t.rec.status = 400;
            t.rec.finished = Some(Instant::now());
            return http::error_response(StatusCode::BAD_REQUEST, &message.to_string());
        }
    };
    t.rec.fields = ask.fields.clone();
    let header = |name: &str| {
        req.headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    t.rec.credentials = Credentials {
        authorization: header("authorization"),
        x_api_key: header("x-api-key"),
        anthropic_version: header("anthropic-version"),
    };
    t.rec.media = ask.media;
    if state.script.keep_prompts {
        t.rec.prompt = prompt_text(endpoint, &req.body);
    }
    let unknown: Vec<&String> = ask
        .fields
        .iter()
        .filter(|f| !endpoint_fields(endpoint).contains(&f.as_str()))
        .collect();
    if state.script.strict && !unknown.is_empty() {
        t.rec.status = 422;
        t.rec.finished = Some(Instant::now());
        return http::error_response(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("extra fields not permitted: {unknown:?}"),
        );
    }
    state
        .prompt_tokens
        .fetch_add(u64::from(ask.prompt_tokens), Ordering::Relaxed);
    t.rec.stream = ask.stream;
    t.rec.model = ask.model.clone().unwrap_or_default();
    t.rec.prompt_tokens = ask.prompt_tokens;
    t.rec.max_tokens = ask.max_tokens;
    t.rec.include_usage = ask.include_usage;
    let fault = state.script.fault_for(seq);
    t.rec.fault = fault;
    if fault != Fault::None {
        state.faults.fetch_add(1, Ordering::Relaxed);
    }

    let now = Instant::now();
    match fault {
        Fault::Http500 => {
            t.rec.status = 500;
            t.rec.fault_at = Some(now);
            t.rec.finished = Some(now);
            return http::error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "scripted fault: internal server error",
            );
        }
        Fault::Http429 => {
            t.rec.status = 429;
            t.rec.fault_at = Some(now);
            t.rec.finished = Some(now);
            return http::error_response_typed(
                StatusCode::TOO_MANY_REQUESTS,
                "scripted fault: too many requests",
                "rate_limit_error",
            )
            .header(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        Fault::Refuse => {
            t.rec.fault_at = Some(now);
            t.rec.finished = Some(now);
            return Response::drop_connection();
        }
        _ => {}
    }

    let model = ask
        .model
        .clone()
        .unwrap_or_else(|| state.script.model.clone());
    let events = Events::new(endpoint, seq, state.created, &model, state.script.crlf);
    let n_events = ask
        .max_tokens
        .div_ceil(state.script.tokens_per_event.max(1)) as usize;
    let structured = serde_json::from_slice::<Value>(&req.body)
        .ok()
        .and_then(|v| infer_bench_sim::structured::Ask::of(&v))
        .map(|want| {
            let invalid =
                state.script.invalid_every > 0 && seq % u64::from(state.script.invalid_every) == 0;
            t.rec.structured = true;
            t.rec.invalid = invalid;
            let n = n_events;
            let mut text = want.text(n);
            let tool = match want {
                infer_bench_sim::structured::Ask::Tool { .. } if invalid => {
                    Some(UNDECLARED_TOOL.to_string())
                }
                infer_bench_sim::structured::Ask::Tool { name, .. } => Some(name),
                infer_bench_sim::structured::Ask::Json(_) if invalid => {
                    // Cut short: not JSON.
                    text = format!("{{\"cut\": {}", " ".repeat(n));
                    None
                }
                infer_bench_sim::structured::Ask::Json(_) => None,
            };
            (text, tool)
        });
    let ctx = Ctx {
        state,
        endpoint,
        seq,
        max_tokens: ask.max_tokens,
        prompt_tokens: ask.prompt_tokens,
        include_usage: ask.include_usage,
        fault,
        model,
        events,
        structured,
    };
    if ask.stream {
        t.rec.status = 200;
        let (response, tx) = Response::stream(StatusCode::OK, "text/event-stream");
        tokio::spawn(run_stream(t, ctx, tx));
        response
            .header(CACHE_CONTROL, HeaderValue::from_static("no-cache"))
            .header(
                HeaderName::from_static("x-accel-buffering"),
                HeaderValue::from_static("no"),
            )
    } else {
        whole_response(t, ctx).await
    }
}

/// `base + by`, saturating far in the future instead of overflowing.
fn later(base: Instant, by: Duration) -> Instant {
    base.checked_add(by)
        .unwrap_or_else(|| base + Duration::from_secs(100 * 365 * 24 * 3600))
}

fn times(d: Duration, n: u32) -> Duration {
    d.checked_mul(n).unwrap_or(Duration::MAX)
}

/// A response that is not streamed: the whole completion, written at
/// `received + ttft + itl * (events - 1)` in one write.
async fn whole_response(mut t: Tracker, c: Ctx) -> Response {
    let script = c.script();
    let mut due = later(
        t.rec.received,
        script
            .ttft
            .saturating_add(times(script.itl, c.n_events().saturating_sub(1))),
    );
    if let Fault::Stall { for_, .. } = c.fault {
        t.rec.fault_at = Some(due);
        due = later(due, for_);
    }
    // If the client leaves meanwhile, hyper drops this future and the
    // tracker files the record as it stands.
    t.rec.client_gone = true;
    tokio::time::sleep_until(due.into()).await;
    t.rec.client_gone = false;

    let (status, body, content) = match c.fault {
        Fault::DropMidStream { .. } => {
            let now = Instant::now();
            t.rec.fault_at = Some(now);
            t.rec.finished = Some(now);
            return Response::drop_connection();
        }
        Fault::StreamError { .. } => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Bytes::from(error_json().to_string()),
            false,
        ),
        Fault::MalformedEvent { .. } => (StatusCode::OK, c.events.malformed_json(), false),
        Fault::EmptyStream => (StatusCode::OK, whole_body(&c, 0), false),
        _ => (StatusCode::OK, whole_body(&c, c.max_tokens), true),
    };
    t.rec.status = status.as_u16();
    let truncated = c.fault == Fault::TruncatedNoDone;
    let len = body.len();
    let (response, tx) = Response::stream(status, "application/json; charset=utf-8");
    let response = response.header(CONTENT_LENGTH, HeaderValue::from(len));
    let first = if truncated {
        body.slice(..len / 2)
    } else {
        body
    };
    let Ok(flushed) = tx.queue_flushed(first).await else {
        return response;
    };
    if truncated {
        tx.abort().await;
    } else {
        drop(tx);
    }
    let tokens = c.max_tokens;
    tokio::spawn(async move {
        match flushed.await {
            Ok(at) => {
                if content && !truncated {
                    t.rec.chunks.push(ChunkTruth { at, tokens });
                }
                if c.fault != Fault::None && !matches!(c.fault, Fault::Stall { .. }) {
                    t.rec.fault_at = Some(at);
                }
                t.rec.finished = Some(at);
            }
            Err(BodyClosed) => t.rec.client_gone = true,
        }
        drop(t); // files the record
    });
    response
}

fn whole_body(c: &Ctx, tokens: u32) -> Bytes {
    match c.endpoint {
        Endpoint::Responses => return whole_response_body(c, tokens),
        Endpoint::Messages => return whole_message_body(c, tokens),
        Endpoint::Completions | Endpoint::ChatCompletions => {}
    }
    let text = token_text_raw(c.seq, 0, tokens);
    let id = c.events.id.as_str();
    let (choices, object) = match (c.endpoint, tokens) {
        (_, 0) => (json!([]), object_name(c.endpoint, false)),
        (Endpoint::Completions, _) => (
            json!([{"index": 0, "text": c.structured.as_ref().map_or(text, |s| s.0.clone()), "logprobs": null, "finish_reason": "length"}]),
            "text_completion",
        ),
        (Endpoint::Responses | Endpoint::Messages, _) => unreachable!("answered above"),
        (Endpoint::ChatCompletions, _) => {
            let reasoning = reasoning_events(c) * c.tokens_per_event();
            let (thought, answer) = if reasoning > 0 {
                (
                    Value::String(token_text_raw(c.seq, 0, reasoning.min(tokens))),
                    token_text_raw(
                        c.seq,
                        reasoning.min(tokens),
                        tokens.saturating_sub(reasoning),
                    ),
                )
            } else {
                (Value::Null, text)
            };
            let mut message = Map::new();
            message.insert("role".into(), "assistant".into());
            match &c.structured {
                Some((args, Some(name))) => {
                    message.insert("content".into(), Value::Null);
                    message.insert(
                        "tool_calls".into(),
                        json!([{"id": "call_scripted", "type": "function",
                            "function": {"name": name, "arguments": args}}]),
                    );
                }
                Some((text, None)) => {
                    message.insert("content".into(), text.clone().into());
                }
                None => {
                    message.insert("content".into(), answer.into());
                }
            }
            if !thought.is_null() {
                message.insert("reasoning_content".into(), thought);
            }
            (
                json!([{"index": 0, "message": message, "logprobs": null, "finish_reason": "length"}]),
                "chat.completion",
            )
        }
    };
    let mut body = json!({
        "id": id,
        "object": object,
        "created": c.state.created,
        "model": c.model,
        "choices": choices,
    });
    if c.usage() {
        let reasoning = reasoning_tokens(c).map(|r| r.min(tokens));
        body["usage"] = usage_json(c.prompt_tokens, tokens, reasoning);
    }
    Bytes::from(body.to_string())
}

/// A completion's text split into (reasoning, answer) as its events carry it.
fn split_reasoning(c: &Ctx, tokens: u32) -> (String, String) {
    let reasoning = (reasoning_events(c) * c.tokens_per_event()).min(tokens);
    (
        token_text_raw(c.seq, 0, reasoning),
        token_text_raw(c.seq, reasoning, tokens - reasoning),
    )
}

/// A whole Responses API answer: `incomplete` (the output is always
/// `max_output_tokens` long), its reasoning and message items.
fn whole_response_body(c: &Ctx, tokens: u32) -> Bytes {
    let (thought, answer) = split_reasoning(c, tokens);
    let mut output = Vec::new();
    if !thought.is_empty() {
        output.push(
            json!({"type": "reasoning", "id": "rs_scripted", "summary": [],
            "content": [{"type": "reasoning_text", "text": thought}]}),
        );
    }
    if !answer.is_empty() {
        output.push(json!({"type": "message", "id": "msg_scripted", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": answer, "annotations": []}]}));
    }
    let mut body = json!({
        "id": c.events.id,
        "object": "response",
        "created_at": c.state.created,
        "model": c.model,
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": output,
    });
    if c.usage() {
        body["usage"] = responses_usage(
            c.prompt_tokens,
            tokens,
            reasoning_tokens(c).map(|r| r.min(tokens)),
        );
    }
    Bytes::from(body.to_string())
}

/// A whole Messages API answer, stopped at `max_tokens`.
fn whole_message_body(c: &Ctx, tokens: u32) -> Bytes {
    let (thought, answer) = split_reasoning(c, tokens);
    let mut content = Vec::new();
    if !thought.is_empty() {
        content.push(json!({"type": "thinking", "thinking": thought, "signature": "scripted"}));
    }
    if !answer.is_empty() {
        content.push(json!({"type": "text", "text": answer}));
    }
    let mut body = json!({
        "id": c.events.id,
        "type": "message",
        "role": "assistant",
        "model": c.model,
        "content": content,
        "stop_reason": "max_tokens",
        "stop_sequence": null,
    });
    if c.usage() {
        body["usage"] = json!({"input_tokens": c.prompt_tokens, "output_tokens": tokens});
    }
    Bytes::from(body.to_string())
}

fn responses_usage(prompt: u32, completion: u32, reasoning: Option<u32>) -> Value {
    json!({
        "input_tokens": prompt,
        "output_tokens": completion,
        "total_tokens": u64::from(prompt) + u64::from(completion),
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": reasoning.unwrap_or(0)},
    })
}

fn object_name(endpoint: Endpoint, chunk: bool) -> &'static str {
    match (endpoint, chunk) {
        (Endpoint::Completions, _) => "text_completion",
        (Endpoint::ChatCompletions, true) => "chat.completion.chunk",
        (Endpoint::ChatCompletions, false) => "chat.completion",
        (Endpoint::Responses, _) => "response",
        (Endpoint::Messages, _) => "message",
    }
}

/// `reasoning`: the completion's reasoning tokens, reported in
/// `completion_tokens_details` where given.
fn usage_json(prompt: u32, completion: u32, reasoning: Option<u32>) -> Value {
    let mut usage = json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": u64::from(prompt) + u64::from(completion),
    });
    if let Some(r) = reasoning {
        usage["completion_tokens_details"] = json!({"reasoning_tokens": r});
    }
    usage
}

fn error_json() -> Value {
    json!({"error": {
        "message": "scripted fault: error in stream",
        "type": "InternalServerError",
        "param": null,
        "code": 500,
    }})
}

/// Chat with `reasoning`: how many leading content events are reasoning.
fn reasoning_events(c: &Ctx) -> u32 {
    let script = c.script();
    if c.endpoint != Endpoint::Completions && script.reasoning {
        let wanted = match script.reasoning_events {
            0 => 3,
            n => n,
        };
        c.n_events().saturating_sub(1).min(wanted)
    } else {
        0
    }
}

/// The reasoning tokens usage reports (`reasoning_usage`): every reasoning
/// event is whole (never the last event), so `tokens_per_event` each.
fn reasoning_tokens(c: &Ctx) -> Option<u32> {
    (c.script().reasoning && c.script().reasoning_usage)
        .then(|| reasoning_events(c) * c.tokens_per_event())
}

async fn run_stream(mut t: Tracker, c: Ctx, tx: BodySender) {
    if stream_events(&mut t.rec, &c, tx).await.is_err() {
        t.rec.client_gone = true;
    }
}

async fn stream_events(rec: &mut ServedRequest, c: &Ctx, tx: BodySender) -> Result<(), BodyClosed> {
    let script = c.script();
    let ev = &c.events;
    let received = rec.received;
    let mut w = Writer {
        tx,
        rec,
        split: script.split_events,
        itl: script.itl,
        held: None,
        splits: 0,
    };

    if c.fault == Fault::EmptyStream {
        let at = w.write(ev.done(), &[]).await?;
        w.rec.fault_at = Some(at);
        w.rec.finished = Some(at);
        return Ok(());
    }
    match c.endpoint {
        Endpoint::ChatCompletions if script.role_chunk => {
            w.write(ev.role(), &[]).await?;
        }
        Endpoint::Responses | Endpoint::Messages => {
            let prompt = c.usage().then_some(c.prompt_tokens);
            w.write(ev.prelude(prompt), &[]).await?;
        }
        _ => {}
    }

    let tpe = c.tokens_per_event();
    let n_events = c.n_events();
    let reasoning = reasoning_events(c);
    let fault_point = c.fault.after_events().map(|k| k.min(n_events));
    let start = later(received, script.ttft);
    let mut shift = Duration::ZERO;
    for i in 0..=n_events {
        if fault_point == Some(i) {
            w.flush_held().await?;
            match c.fault {
                Fault::DropMidStream { .. } => {
                    let now = Instant::now();
                    w.rec.fault_at = Some(now);
                    w.rec.finished = Some(now);
                    w.tx.abort().await;
                    return Ok(());
                }
                Fault::MalformedEvent { .. } => {
                    let at = w.write(ev.malformed(), &[]).await?;
                    w.rec.fault_at = Some(at);
                }
                Fault::StreamError { .. } => {
                    let at = w.write(ev.error(), &[]).await?;
                    w.rec.fault_at = Some(at);
                    let at = w.write(ev.done(), &[]).await?;
                    w.rec.finished = Some(at);
                    return Ok(());
                }
                Fault::Stall { for_, .. } => {
                    let now = Instant::now();
                    w.rec.fault_at = Some(now);
                    w.wait_until(later(now, for_)).await?;
                    shift = shift.saturating_add(for_);
                }
                _ => {}
            }
        }
        if i == n_events {
            break;
        }
        let deadline = later(start, times(script.itl, i).saturating_add(shift));
        if script.keepalive_comments {
            let ping_at = if i == 0 {
                later(received, (script.ttft / 2).saturating_add(shift))
            } else {
                deadline.checked_sub(script.itl / 2).unwrap_or(deadline)
            };
            w.wait_until(ping_at).await?;
            w.tx.send(ev.ping()).await?;
        }
        let first_token = i.saturating_mul(tpe);
        let tokens = tpe.min(c.max_tokens.saturating_sub(first_token));
        let bytes = match &c.structured {
            Some((answer, tool)) => {
                let piece = infer_bench_sim::structured::piece(answer, i, n_events);
                let escaped = Value::from(piece).to_string();
                let escaped = &escaped[1..escaped.len() - 1];
                match (c.endpoint, tool) {
                    (Endpoint::ChatCompletions, Some(name)) => {
                        ev.tool_call(escaped, (i == 0).then_some(name))
                    }
                    _ => ev.content(escaped, false),
                }
            }
            None => ev.content(
                &token_text_escaped(c.seq, first_token, tokens),
                i < reasoning,
            ),
        };
        w.content(i, bytes, tokens, deadline).await?;
    }
    w.flush_held().await?;

    if c.fault == Fault::TruncatedNoDone {
        let now = Instant::now();
        w.rec.fault_at = Some(now);
        w.rec.finished = w.rec.chunks.last().map(|c| c.at).or(Some(now));
        return Ok(()); // dropping the sender ends the body properly
    }
    let sent = w.rec.output_tokens();
    let usage = (c.include_usage && c.usage()).then_some((
        c.prompt_tokens,
        sent,
        reasoning_tokens(c).map(|r| r.min(sent)),
    ));
    match c.endpoint {
        Endpoint::Completions => {
            w.write(ev.finish(usage), &[]).await?;
        }
        Endpoint::ChatCompletions => {
            w.write(ev.finish(None), &[]).await?;
            if let Some((prompt, completion, reasoning)) = usage {
                w.write(ev.usage(prompt, completion, reasoning), &[])
                    .await?;
            }
        }
        // `response.completed` ends the stream: there is no `[DONE]`.
        Endpoint::Responses => {
            let usage = c.usage().then_some((
                c.prompt_tokens,
                sent,
                reasoning_tokens(c).map(|r| r.min(sent)),
            ));
            let at = w.write(ev.finish(usage), &[]).await?;
            w.rec.finished = Some(at);
            return Ok(());
        }
        Endpoint::Messages => {
            let usage = c.usage().then_some((c.prompt_tokens, sent, None));
            w.write(ev.finish(usage), &[]).await?;
        }
    }
    let at = w.write(ev.done(), &[]).await?;
    w.rec.finished = Some(at);
    Ok(())
}

/// Writes a stream's events, recording when content events hit the socket,
/// and misaligning writes and events when the script says so.
struct Writer<'a> {
    tx: BodySender,
    rec: &'a mut ServedRequest,
    split: bool,
    itl: Duration,
    /// A content event held back to share the next write.
    held: Option<(Bytes, u32, Instant)>,
    /// Events split so far; picks the next split offset.
    splits: usize,
}

impl Writer<'_> {
    /// Sleeps until `deadline`, or fails as soon as the client is gone.
    async fn wait_until(&self, deadline: Instant) -> Result<(), BodyClosed> {
        if Instant::now() < deadline {
            tokio::select! {
                () = tokio::time::sleep_until(deadline.into()) => {}
                () = self.tx.closed() => return Err(BodyClosed),
            }
        }
        if self.tx.is_closed() {
            Err(BodyClosed)
        } else {
            Ok(())
        }
    }

    /// One write; each entry of `tokens` is a content event it completes.
    async fn write(&mut self, bytes: Bytes, tokens: &[u32]) -> Result<Instant, BodyClosed> {
        let at = self.tx.send_flushed(bytes).await?;
        for &tokens in tokens {
            self.rec.chunks.push(ChunkTruth { at, tokens });
        }
        Ok(at)
    }

    async fn content(
        &mut self,
        index: u32,
        bytes: Bytes,
        tokens: u32,
        deadline: Instant,
    ) -> Result<(), BodyClosed> {
        if !self.split {
            self.wait_until(deadline).await?;
            self.write(bytes, &[tokens]).await?;
            return Ok(());
        }
        match index % 3 {
            // Split into two writes, the first half an ITL early.
            1 => {
                self.flush_held().await?;
                let at = split_offset(bytes.len(), self.splits);
                self.splits += 1;
                let early = deadline.checked_sub(self.itl / 2).unwrap_or(deadline);
                self.wait_until(early).await?;
                self.write(bytes.slice(..at), &[]).await?;
                self.wait_until(deadline).await?;
                self.write(bytes.slice(at..), &[tokens]).await?;
            }
            // Held back, written with the next event.
            2 => {
                self.flush_held().await?;
                self.held = Some((bytes, tokens, deadline));
            }
            _ => {
                self.wait_until(deadline).await?;
                match self.held.take() {
                    Some((first, first_tokens, _)) => {
                        let mut both = BytesMut::with_capacity(first.len() + bytes.len());
                        both.extend_from_slice(&first);
                        both.extend_from_slice(&bytes);
                        self.write(both.freeze(), &[first_tokens, tokens]).await?;
                    }
                    None => {
                        self.write(bytes, &[tokens]).await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes a held event on its own, at its own deadline.
    async fn flush_held(&mut self) -> Result<(), BodyClosed> {
        if let Some((bytes, tokens, deadline)) = self.held.take() {
            self.wait_until(deadline).await?;
            self.write(bytes, &[tokens]).await?;
        }
        Ok(())
    }
}

/// Where to split an event of `len` bytes, cycling through awkward places:
/// inside `data:`, right after the colon, mid-JSON (odd), and between the
/// two line ends.
fn split_offset(len: usize, nth: usize) -> usize {
    let at = match nth % 4 {
        0 => 1,
        1 => 5,
        2 => (len / 2) | 1,
        _ => len.saturating_sub(1),
    };
    at.clamp(1, len.saturating_sub(1).max(1))
}

// ---------------------------------------------------------------------------
// SSE events, built by concatenation (cheap per event).

struct Events {
    endpoint: Endpoint,
    id: String,
    /// `data: {"id":...,"object":...,"created":...,"model":...,"choices":[`
    head: String,
    end: &'static str,
}

impl Events {
    fn new(endpoint: Endpoint, seq: u64, created: u64, model: &str, crlf: bool) -> Self {
        let id = match endpoint {
            Endpoint::Completions => format!("cmpl-scripted-{seq}"),
            Endpoint::ChatCompletions => format!("chatcmpl-scripted-{seq}"),
            Endpoint::Responses => format!("resp_scripted_{seq}"),
            Endpoint::Messages => format!("msg_scripted_{seq}"),
        };
        let model = Value::from(model).to_string();
        let head = format!(
            r#"data: {{"id":"{id}","object":"{}","created":{created},"model":{model},"choices":["#,
            object_name(endpoint, true)
        );
        Events {
            endpoint,
            id,
            head,
            end: if crlf { "\r\n\r\n" } else { "\n\n" },
        }
    }

    fn event(&self, parts: &[&str]) -> Bytes {
        let len = self.head.len() + parts.iter().map(|p| p.len()).sum::<usize>() + self.end.len();
        let mut s = String::with_capacity(len);
        s.push_str(&self.head);
        for p in parts {
            s.push_str(p);
        }
        s.push_str(self.end);
        Bytes::from(s)
    }

    /// A typed event (Responses, Messages): `event: KIND` and its data.
    fn typed(&self, kind: &str, parts: &[&str]) -> Bytes {
        let nl = &self.end[..self.end.len() / 2];
        let mut s = String::with_capacity(
            2 * kind.len() + 32 + parts.iter().map(|p| p.len()).sum::<usize>(),
        );
        s.push_str("event: ");
        s.push_str(kind);
        s.push_str(nl);
        s.push_str("data: ");
        for p in parts {
            s.push_str(p);
        }
        s.push_str(self.end);
        Bytes::from(s)
    }

    /// What the Responses and Messages APIs send before any output:
    /// `response.created`, or `message_start` with the input usage.
    fn prelude(&self, prompt_tokens: Option<u32>) -> Bytes {
        let id = &self.id;
        match self.endpoint {
            Endpoint::Responses => self.typed(
                "response.created",
                &[&format!(
                    r#"{{"type":"response.created","response":{{"id":"{id}","object":"response","status":"in_progress","output":[]}}}}"#
                )],
            ),
            _ => {
                let usage = prompt_tokens
                    .map(|p| format!(r#","usage":{{"input_tokens":{p},"output_tokens":0}}"#))
                    .unwrap_or_default();
                self.typed(
                    "message_start",
                    &[&format!(
                        r#"{{"type":"message_start","message":{{"id":"{id}","type":"message","role":"assistant","content":[],"stop_reason":null{usage}}}}}"#
                    )],
                )
            }
        }
    }

    fn content(&self, escaped_text: &str, reasoning: bool) -> Bytes {
        match self.endpoint {
            Endpoint::Responses => {
                let kind = if reasoning {
                    "response.reasoning_text.delta"
                } else {
                    "response.output_text.delta"
                };
                self.typed(
                    kind,
                    &[r#"{"type":""#, kind, r#"","output_index":0,"content_index":0,"delta":""#, escaped_text, r#""}"#],
                )
            }
            Endpoint::Messages => self.typed(
                "content_block_delta",
                &[
                    if reasoning {
                        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":""#
                    } else {
                        r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":""#
                    },
                    escaped_text,
                    r#""}}"#,
                ],
            ),
            Endpoint::Completions => self.event(&[
                r#"{"index":0,"text":""#,
                escaped_text,
                r#"","logprobs":null,"finish_reason":null}]}"#,
            ]),
            Endpoint::ChatCompletions => self.event(&[
                if reasoning {
                    r#"{"index":0,"delta":{"reasoning_content":""#
                } else {
                    r#"{"index":0,"delta":{"content":""#
                },
                escaped_text,
                r#""},"logprobs":null,"finish_reason":null}]}"#,
            ]),
        }
    }

    /// A chat event carrying a piece of a tool call's arguments (and, in
    /// the first, its id and name).
    fn tool_call(&self, escaped_arguments: &str, name: Option<&str>) -> Bytes {
        let head = match name {
            Some(n) => format!(
                r#"{{"index":0,"id":"call_scripted","type":"function","function":{{"name":{},"arguments":""#,
                Value::from(n)
            ),
            None => r#"{"index":0,"function":{"arguments":""#.to_string(),
        };
        self.event(&[
            r#"{"index":0,"delta":{"tool_calls":["#,
            &head,
            escaped_arguments,
            r#""}}]},"logprobs":null,"finish_reason":null}]}"#,
        ])
    }

    fn role(&self) -> Bytes {
        self.event(&[
            r#"{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
        ])
    }

    fn finish(&self, usage: Option<(u32, u32, Option<u32>)>) -> Bytes {
        match self.endpoint {
            Endpoint::Responses => {
                let usage = usage
                    .map(|(p, c, r)| format!(r#","usage":{}"#, responses_usage(p, c, r)))
                    .unwrap_or_default();
                return self.typed(
                    "response.completed",
                    &[&format!(
                        r#"{{"type":"response.completed","response":{{"id":"{}","object":"response","status":"incomplete","incomplete_details":{{"reason":"max_output_tokens"}},"output":[]{usage}}}}}"#,
                        self.id
                    )],
                );
            }
            Endpoint::Messages => {
                let usage = usage
                    .map(|(_, c, _)| format!(r#","usage":{{"output_tokens":{c}}}"#))
                    .unwrap_or_default();
                return self.typed(
                    "message_delta",
                    &[&format!(
                        r#"{{"type":"message_delta","delta":{{"stop_reason":"max_tokens","stop_sequence":null}}{usage}}}"#
                    )],
                );
            }
            Endpoint::Completions | Endpoint::ChatCompletions => {}
        }
        let usage = usage
            .map(|(p, c, r)| format!(r#","usage":{}"#, usage_json(p, c, r)))
            .unwrap_or_default();
        match self.endpoint {
            Endpoint::Completions => self.event(&[
                r#"{"index":0,"text":"","logprobs":null,"finish_reason":"length"}]"#,
                &usage,
                "}",
            ]),
            Endpoint::ChatCompletions => self.event(&[
                r#"{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]"#,
                &usage,
                "}",
            ]),
            Endpoint::Responses | Endpoint::Messages => unreachable!("answered above"),
        }
    }

    fn usage(&self, prompt: u32, completion: u32, reasoning: Option<u32>) -> Bytes {
        let usage = format!(
            r#"],"usage":{}}}"#,
            usage_json(prompt, completion, reasoning)
        );
        // `head` ends inside `"choices":[`; close it empty.
        let mut s = String::with_capacity(self.head.len() + usage.len() + 4);
        s.push_str(&self.head);
        s.push_str(&usage);
        s.push_str(self.end);
        Bytes::from(s)
    }

    /// The stream's end: `[DONE]`, `message_stop`, or for the Responses
    /// API (which has no end marker) a `response.completed` without output.
    fn done(&self) -> Bytes {
        match self.endpoint {
            Endpoint::Responses => self.finish(None),
            Endpoint::Messages => self.typed("message_stop", &[r#"{"type":"message_stop"}"#]),
            _ => Bytes::from(format!("data: [DONE]{}", self.end)),
        }
    }

    fn ping(&self) -> Bytes {
        Bytes::from(format!(": ping{}", self.end))
    }

    /// A `data:` line cut off inside its JSON.
    fn malformed(&self) -> Bytes {
        match self.endpoint {
            Endpoint::Responses => self.typed(
                "response.output_text.delta",
                &[r#"{"type":"response.output_text.delta","delta":"cut off"#],
            ),
            Endpoint::Messages => self.typed(
                "content_block_delta",
                &[r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"cut off"#],
            ),
            _ => self.event(&[r#"{"index":0,"text":"cut off"#]),
        }
    }

    /// A whole-response body cut off inside its JSON.
    fn malformed_json(&self) -> Bytes {
        Bytes::from(format!(
            r#"{{"id":"{}","choices":[{{"index":0,"text":"cut off"#,
            self.id
        ))
    }

    fn error(&self) -> Bytes {
        match self.endpoint {
            Endpoint::Responses => self.typed(
                "error",
                &[r#"{"type":"error","code":"server_error","message":"scripted fault: error in stream","param":null}"#],
            ),
            Endpoint::Messages => self.typed(
                "error",
                &[r#"{"type":"error","error":{"type":"api_error","message":"scripted fault: error in stream"}}"#],
            ),
            _ => Bytes::from(format!("data: {}{}", error_json(), self.end)),
        }
    }
}

/// The output's vocabulary: (text, JSON-escaped text). Deterministic per
/// request and position; includes multi-byte UTF-8 and characters JSON must
/// escape, as real model output does.
const VOCAB: [(&str, &str); 16] = [
    (" the", " the"),
    (" quick", " quick"),
    (" brown", " brown"),
    (" fox", " fox"),
    (" naïve", " naïve"),
    (" jumps", " jumps"),
    (" Straße", " Straße"),
    (",", ","),
    (" 東京", " 東京"),
    ("\n", "\\n"),
    (" over", " over"),
    (" \"quoted\"", " \\\"quoted\\\""),
    (" lazy", " lazy"),
    (" 🚀", " 🚀"),
    (" dogs", " dogs"),
    ("\t.", "\\t."),
];

fn token(seq: u64, position: u32) -> (&'static str, &'static str) {
    let i = (seq.wrapping_mul(7).wrapping_add(u64::from(position)) % VOCAB.len() as u64) as usize;
    VOCAB[i]
}

fn token_text_escaped(seq: u64, from: u32, n: u32) -> String {
    (from..from.saturating_add(n))
        .map(|p| token(seq, p).1)
        .collect()
}

fn token_text_raw(seq: u64, from: u32, n: u32) -> String {
    (from..from.saturating_add(n))
        .map(|p| token(seq, p).0)
        .collect()
}

// ---------------------------------------------------------------------------
// Reading a request.

fn parse_ask(
    endpoint: Endpoint,
    body: &[u8],
    default_max_tokens: u32,
    image_patch: u32,
) -> Result<Ask, BadRequest> {
    let value: Value = serde_json::from_slice(body).map_err(BadRequest::Json)?;
    let Value::Object(obj) = &value else {
        return Err(BadRequest::NotAnObject);
    };
    let model = match obj.get("model") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(field("model", "a string")),
    };
    let stream = opt_bool(obj, "stream")?.unwrap_or(false);
    let include_usage = match obj.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(options)) => opt_bool(options, "include_usage")?.unwrap_or(false),
        Some(_) => return Err(field("stream_options", "an object")),
    };
    let max_tokens = match endpoint {
        Endpoint::Responses => opt_count(obj, "max_output_tokens")?.unwrap_or(default_max_tokens),
        _ => match opt_count(obj, "max_completion_tokens")? {
            Some(n) => n,
            None => opt_count(obj, "max_tokens")?.unwrap_or(default_max_tokens),
        },
    };
    // These APIs always report usage (with their last event).
    let include_usage =
        include_usage || matches!(endpoint, Endpoint::Responses | Endpoint::Messages);
    if max_tokens == 0 {
        return Err(BadRequest::NoTokens);
    }
    let mut prompt_tokens = match endpoint {
        Endpoint::Completions => prompt_words(obj.get("prompt"))?,
        Endpoint::ChatCompletions => message_words(obj.get("messages"))?,
        Endpoint::Responses => match obj.get("input") {
            Some(Value::String(s)) => words(s),
            input => message_words(input)?,
        },
        Endpoint::Messages => {
            let system = match obj.get("system") {
                None | Some(Value::Null) => 0,
                Some(Value::String(s)) => words(s),
                Some(_) => return Err(field("system", "a string")),
            };
            message_words(obj.get("messages"))?.saturating_add(system)
        }
    };
    let media = match endpoint {
        Endpoint::Completions | Endpoint::Responses | Endpoint::Messages => Vec::new(),
        Endpoint::ChatCompletions => media::read(obj.get("messages"))?,
    };
    if image_patch > 0 {
        for m in media.iter().filter(|m| m.is_image()) {
            prompt_tokens += u64::from(m.width.div_ceil(image_patch))
                * u64::from(m.height.div_ceil(image_patch));
        }
    }
    Ok(Ask {
        fields: obj.keys().cloned().collect(),
        model,
        stream,
        include_usage,
        max_tokens,
        prompt_tokens: u32::try_from(prompt_tokens).unwrap_or(u32::MAX),
        media,
    })
}

/// The prompt of a body already accepted by [`parse_ask`]: a string
/// `prompt`, or the last message's string `content` (else empty).
fn prompt_text(endpoint: Endpoint, body: &[u8]) -> String {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let text = match endpoint {
        Endpoint::Completions => value.get("prompt"),
        Endpoint::ChatCompletions | Endpoint::Responses | Endpoint::Messages => value
            .get(if endpoint == Endpoint::Responses {
                "input"
            } else {
                "messages"
            })
            .and_then(Value::as_array)
            .and_then(|m| m.last())
            .and_then(|m| m.get("content")),
    };
    match text {
        // Content parts: their text parts' text, joined by newlines.
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        t => t.and_then(Value::as_str).unwrap_or_default().to_owned(),
    }
}

/// A field of the wrong type.
fn field(key: &str, expected: &'static str) -> BadRequest {
    BadRequest::Field {
        field: key.to_owned(),
        expected,
    }
}

fn opt_bool(obj: &Map<String, Value>, key: &str) -> Result<Option<bool>, BadRequest> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(field(key, "a boolean")),
    }
}

fn opt_count(obj: &Map<String, Value>, key: &str) -> Result<Option<u32>, BadRequest> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| field(key, "a non-negative integer below 2^32")),
    }
}

fn words(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

/// `prompt`: a string, strings, token ids, or arrays of token ids.
fn prompt_words(prompt: Option<&Value>) -> Result<u64, BadRequest> {
    let bad = || field("prompt", "a string, an array of strings or of token ids");
    match prompt {
        None | Some(Value::Null) => Err(BadRequest::NoPrompt),
        Some(Value::String(s)) => Ok(words(s)),
        Some(Value::Array(items)) => items.iter().try_fold(0u64, |n, item| {
            let more = match item {
                Value::String(s) => words(s),
                Value::Number(_) => 1,
                Value::Array(ids) if ids.iter().all(Value::is_number) => ids.len() as u64,
                _ => return Err(bad()),
            };
            Ok(n.saturating_add(more))
        }),
        Some(_) => Err(bad()),
    }
}

/// `messages`: objects whose `content` is a string or an array of parts.
fn message_words(messages: Option<&Value>) -> Result<u64, BadRequest> {
    let Some(Value::Array(messages)) = messages else {
        return Err(BadRequest::NoMessages);
    };
    if messages.is_empty() {
        return Err(BadRequest::EmptyMessages);
    }
    messages.iter().try_fold(0u64, |n, message| {
        let Value::Object(message) = message else {
            return Err(BadRequest::MessageNotAnObject);
        };
        let more = match message.get("content") {
            None | Some(Value::Null) => 0,
            Some(Value::String(s)) => words(s),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .map(words)
                .sum(),
            Some(_) => {
                return Err(BadRequest::Content);
            }
        };
        Ok(n.saturating_add(more))
    })
}

mod media;
mod retrieval;
pub use retrieval::{DEFAULT_DIMENSION, Retrieval};

#[cfg(test)]
mod tests;
