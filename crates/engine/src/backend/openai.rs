//! The OpenAI-compatible backend: `/completions` and `/chat/completions`,
//! streamed (SSE) or not, against vLLM, SGLang, TGI, TensorRT-LLM,
//! llama.cpp, Ollama or the built-in simulator. Timestamps are taken when a
//! read returns, before any parsing; a chunk's events all carry its arrival
//! instant. Token counts come from the server's `usage` (requested with
//! `stream_options.include_usage`).
//!
//! Every read is bounded (`[load.limits]`): the longest SSE line, the bytes
//! and events of one response, the part of an error body read for its
//! message. A response that breaks a bound fails its request (`oversized`)
//! and is dropped with its connection; the run goes on. The idle timeout
//! runs between *events*: comments and partial lines do not reset it.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::record::{ErrorClass, Failure, OutputEvent, RequestRecord};
use super::sse::SseParser;
use super::{Backend, Prepared};
use infer_bench_spec::raw::Api;
use infer_bench_spec::{Limits, Timeouts};
use infer_bench_workload::{Prompt, Role};

/// What one streamed event said.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ChunkInfo {
    /// It carries generated output (text, reasoning, tool calls or token ids).
    pub output: bool,
    /// Its output was reasoning only (`reasoning_content` or `reasoning`,
    /// no answer text, tool call or token ids).
    pub reasoning: bool,
    pub text_bytes: u32,
    pub token_ids: Option<u32>,
    pub finished: bool,
    pub usage: Option<super::Usage>,
    pub error: Option<String>,
    pub done: bool,
    /// The server's own timings, where it reports them (llama.cpp).
    pub server_timing: Option<super::record::ServerTiming>,
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<UsageWire>,
    #[serde(default)]
    error: Option<serde_json::Value>,
    #[serde(borrow, default)]
    object: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<Cow<'a, str>>,
    #[serde(default)]
    timings: Option<super::record::ServerTiming>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    message: Option<Delta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    token_ids: Option<Vec<u32>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct UsageWire {
    #[serde(default)]
    prompt_tokens: Option<u32>,
    #[serde(default)]
    completion_tokens: Option<u32>,
    #[serde(default)]
    completion_tokens_details: Option<DetailsWire>,
}

#[derive(Deserialize)]
struct DetailsWire {
    #[serde(default)]
    reasoning_tokens: Option<u32>,
}

fn error_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(o) => o
            .get("message")
            .and_then(|m| m.as_str())
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string()),
        other => other.to_string(),
    }
}

/// Interprets one event's data. `reply`, when given, collects the text.
pub fn interpret(data: &[u8], reply: Option<&mut String>) -> Result<ChunkInfo, String> {
    interpret_into(data, reply, None)
}

/// The most bytes of a response's `id` kept (a request log line is no
/// place for an unbounded string from the server).
pub const MAX_RESPONSE_ID_BYTES: usize = 128;

/// At most [`MAX_RESPONSE_ID_BYTES`] of `id`, cut at a character boundary.
fn clip_id(id: &str) -> String {
    let mut end = id.len().min(MAX_RESPONSE_ID_BYTES);
    while !id.is_char_boundary(end) {
        end -= 1;
    }
    id[..end].to_string()
}

/// [`interpret`], and the event's `id` into `id` when that is given and
/// still empty (the first id a response names is its own).
fn interpret_into(
    data: &[u8],
    reply: Option<&mut String>,
    id: Option<&mut Option<String>>,
) -> Result<ChunkInfo, String> {
    if data == b"[DONE]" {
        return Ok(ChunkInfo {
            done: true,
            ..ChunkInfo::default()
        });
    }
    let chunk: Chunk = serde_json::from_slice(data).map_err(|e| {
        let shown = String::from_utf8_lossy(&data[..data.len().min(120)]).into_owned();
        format!("{e}: {shown}")
    })?;
    if let (Some(slot @ None), Some(named)) = (id, chunk.id.as_deref()) {
        *slot = Some(clip_id(named));
    }
    let mut info = ChunkInfo::default();
    if let Some(e) = &chunk.error {
        info.error = Some(error_text(e));
        return Ok(info);
    }
    if chunk.object.as_deref() == Some("error") {
        info.error = Some(chunk.message.as_deref().unwrap_or("error").to_string());
        return Ok(info);
    }
    info.server_timing = chunk.timings;
    info.usage = chunk.usage.map(|u| super::Usage {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
    });
    let Some(choices) = chunk.choices else {
        return if info.usage.is_some() {
            Ok(info)
        } else {
            Err("an event with neither `choices` nor `usage`".into())
        };
    };
    let mut reply = reply;
    // Reasoning text seen, and output of any other kind seen.
    let (mut thought, mut other) = (false, false);
    for c in &choices {
        let mut texts: [Option<&str>; 5] = [c.text.as_deref(), None, None, None, None];
        for (i, d) in [&c.delta, &c.message].into_iter().enumerate() {
            if let Some(d) = d {
                texts[1 + 2 * i] = d.content.as_deref();
                texts[2 + 2 * i] = d.reasoning_content.as_deref().or(d.reasoning.as_deref());
                if d.tool_calls.is_some() {
                    info.output = true;
                    other = true;
                }
            }
        }
        for (i, s) in texts.into_iter().enumerate() {
            let Some(s) = s.filter(|s| !s.is_empty()) else {
                continue;
            };
            // Slots 2 and 4 hold reasoning, the others answer text.
            if i == 2 || i == 4 {
                thought = true;
            } else {
                other = true;
            }
            info.output = true;
            info.text_bytes += s.len() as u32;
            if let Some(r) = reply.as_deref_mut() {
                r.push_str(s);
            }
        }
        if let Some(ids) = &c.token_ids {
            if !ids.is_empty() {
                info.output = true;
                other = true;
                info.token_ids = Some(info.token_ids.unwrap_or(0) + ids.len() as u32);
            }
        }
        if c.finish_reason.is_some() {
            info.finished = true;
        }
    }
    info.reasoning = thought && !other;
    Ok(info)
}

/// The `Content-Type` of every request body.
const JSON: reqwest::header::HeaderValue =
    reqwest::header::HeaderValue::from_static("application/json");

/// A request body's JSON, laid out once per point. Its keys are in the
/// order a `serde_json::Map` writes them (sorted: the bodies, and the
/// workload fingerprint that hashes them, are what they were when bodies
/// were built as a map), the constant parts (model, stream options,
/// sampling, `extra_body`) written once, with holes for what each prompt
/// fills in; `extra_body` overrides any key, as it did in the map.
#[derive(Debug, Clone)]
struct BodyTemplate {
    parts: Vec<BodyPart>,
    /// The constant parts' bytes.
    fixed: usize,
}

#[derive(Debug, Clone)]
enum BodyPart {
    Json(String),
    Prompt,
    Messages,
    MaxTokens,
}

/// One chat message as it goes on the wire (keys sorted, as above).
#[derive(Serialize)]
struct WireMessage<'a> {
    content: &'a str,
    role: Role,
}

/// A prompt's messages: its history, then its text from the user.
struct Messages<'a>(&'a Prompt);

impl Serialize for Messages<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let p = self.0;
        let mut seq = s.serialize_seq(Some(p.history.len() + 1))?;
        for m in &p.history {
            seq.serialize_element(&WireMessage {
                content: &m.content,
                role: m.role,
            })?;
        }
        seq.serialize_element(&WireMessage {
            content: &p.text,
            role: Role::User,
        })?;
        seq.end()
    }
}

impl BodyTemplate {
    fn new(
        workload: &infer_bench_spec::Workload,
        model: &str,
        dialect: infer_bench_spec::Dialect,
    ) -> BodyTemplate {
        use serde_json::{Value, json};
        enum Slot {
            Value(Value),
            Hole(BodyPart),
        }
        // The keys as the map had them, inserted in the same order (a
        // later insert replaces an earlier one).
        let mut m: std::collections::BTreeMap<String, Slot> = Default::default();
        m.insert("model".into(), Slot::Value(Value::from(model)));
        match workload.api {
            Api::Chat => m.insert("messages".into(), Slot::Hole(BodyPart::Messages)),
            Api::Completions => m.insert("prompt".into(), Slot::Hole(BodyPart::Prompt)),
        };
        m.insert(
            workload.max_tokens_field.clone(),
            Slot::Hole(BodyPart::MaxTokens),
        );
        if let Some(name) = dialect
            .wire_name("ignore_eos")
            .filter(|_| workload.ignore_eos)
        {
            m.insert(name.into(), Slot::Value(Value::Bool(true)));
        }
        m.insert("stream".into(), Slot::Value(Value::Bool(workload.stream)));
        if workload.stream {
            m.insert(
                "stream_options".into(),
                Slot::Value(json!({"include_usage": true})),
            );
        }
        let sampling = serde_json::to_value(&workload.sampling)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        // Sampling fields go under the dialect's names, and those it cannot
        // carry stay out; `extra_body` is sent as written.
        let sampling = sampling
            .into_iter()
            .filter_map(|(k, v)| dialect.wire_name(&k).map(|n| (n.to_string(), v)));
        for (k, v) in sampling.chain(workload.extra_body.clone()) {
            m.insert(k, Slot::Value(v));
        }
        fn json<T: Serialize + ?Sized>(v: &T) -> String {
            serde_json::to_string(v).expect("a JSON value serializes")
        }
        let mut parts = Vec::new();
        let mut text = String::from("{");
        for (i, (k, slot)) in m.into_iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(&json(&k));
            text.push(':');
            match slot {
                Slot::Value(v) => text.push_str(&json(&v)),
                Slot::Hole(hole) => {
                    parts.push(BodyPart::Json(std::mem::take(&mut text)));
                    parts.push(hole);
                }
            }
        }
        text.push('}');
        parts.push(BodyPart::Json(text));
        let fixed = parts
            .iter()
            .map(|p| match p {
                BodyPart::Json(s) => s.len(),
                _ => 0,
            })
            .sum();
        BodyTemplate { parts, fixed }
    }

    /// The body of `prompt`'s request.
    fn write(&self, prompt: &Prompt) -> Vec<u8> {
        let text: usize = prompt.text.len()
            + prompt
                .history
                .iter()
                .map(|m| m.content.len() + 32)
                .sum::<usize>();
        let mut out = Vec::with_capacity(self.fixed + text + 64);
        for p in &self.parts {
            // Writing JSON into a Vec cannot fail.
            let _ = match p {
                BodyPart::Json(s) => {
                    out.extend_from_slice(s.as_bytes());
                    Ok(())
                }
                BodyPart::Prompt => serde_json::to_writer(&mut out, &prompt.text),
                BodyPart::Messages => serde_json::to_writer(&mut out, &Messages(prompt)),
                BodyPart::MaxTokens => serde_json::to_writer(&mut out, &prompt.output_tokens),
            };
        }
        out
    }
}

/// The OpenAI-compatible client of one target and point.
pub struct OpenAi {
    client: reqwest::Client,
    /// No pool: every request on a new connection (for resends).
    fresh: reqwest::Client,
    url: reqwest::Url,
    /// `{base_url}/models`: what [`Backend::warm`] asks to open connections.
    models_url: reqwest::Url,
    connect_timeout: Duration,
    /// Connections are kept alive (a pool), so a response's end is read to
    /// give its connection back.
    keep_alive: bool,
    /// Connections on their way back to the pool (`connect`).
    returning: Arc<super::connect::Returning>,
    stream: bool,
    body: BodyTemplate,
    timeouts: Timeouts,
    limits: Limits,
    keep_reply: bool,
}

/// Settings of the HTTP client, from the target.
pub struct ClientOptions<'a> {
    pub base_url: &'a str,
    pub api_key: Option<String>,
    pub headers: &'a std::collections::BTreeMap<String, String>,
    pub tls_insecure: bool,
    pub ca_cert_pem: Option<Vec<u8>>,
    /// Idle connections kept per host; 0 keeps none (every request opens
    /// its own connection).
    pub pool_size: usize,
    pub connect_timeout: Duration,
}

/// A small HTTP client for control requests (readiness, identity, scrapes):
/// no proxies, a per-request timeout.
pub fn control_client(timeout: Duration) -> Result<reqwest::Client, String> {
    install_crypto();
    reqwest::Client::builder()
        .no_proxy()
        .timeout(timeout)
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))
}

/// Installs the TLS crypto provider once per process (reqwest is built
/// without a default one, so every client must come through here).
fn install_crypto() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Builds the pooled HTTP/1.1 client: keep-alive, no Nagle, no proxies
/// (a benchmark must not be routed through whatever the environment says).
pub fn http_client(o: &ClientOptions) -> Result<reqwest::Client, String> {
    builder(o)?
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// [`http_client`]'s settings, before it is built.
fn builder(o: &ClientOptions) -> Result<reqwest::ClientBuilder, String> {
    install_crypto();
    let mut b = reqwest::Client::builder()
        .http1_only()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(o.pool_size)
        .pool_idle_timeout(Duration::from_secs(90))
        .connect_timeout(o.connect_timeout);
    if o.tls_insecure {
        b = b.tls_danger_accept_invalid_certs(true);
    }
    if let Some(pem) = &o.ca_cert_pem {
        let cert = reqwest::Certificate::from_pem(pem)
            .map_err(|e| format!("invalid CA certificate: {e}"))?;
        b = b.add_root_certificate(cert);
    }
    Ok(b)
}

impl OpenAi {
    pub fn new(
        o: &ClientOptions,
        workload: &infer_bench_spec::Workload,
        model: &str,
        timeouts: Timeouts,
        limits: Limits,
        dialect: infer_bench_spec::Dialect,
    ) -> Result<OpenAi, String> {
        let path = match workload.api {
            Api::Chat => "chat/completions",
            Api::Completions => "completions",
        };
        let base = format!("{}/", o.base_url.trim_end_matches('/'));
        let url = reqwest::Url::parse(&base)
            .and_then(|u| u.join(path))
            .map_err(|e| format!("invalid base_url \"{}\": {e}", o.base_url))?;
        let models_url = reqwest::Url::parse(&base)
            .and_then(|u| u.join("models"))
            .map_err(|e| format!("invalid base_url \"{}\": {e}", o.base_url))?;
        let mut headers = reqwest::header::HeaderMap::new();
        for (k, v) in o.headers {
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("invalid header name \"{k}\""))?;
            let value = reqwest::header::HeaderValue::from_str(v)
                .map_err(|_| format!("invalid value for header \"{k}\""))?;
            headers.insert(name, value);
        }
        if let Some(key) = &o.api_key {
            let mut v = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| "the API key is not a valid header value".to_string())?;
            v.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, v);
        }
        // Every connect is timed and charged to the request that waited
        // for it (`connect`); the target's headers go with every request
        // without a copy per request.
        let returning = Arc::new(super::connect::Returning::default());
        let client = builder(o)?
            .connector_layer(super::connect::ConnectTimer::new(returning.clone()))
            .default_headers(headers.clone())
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        // The resend of a request whose kept-alive connection was lost goes
        // on a connection of its own: from the pool it could take another
        // the server is closing (llama-server closes one after 5 requests).
        let fresh = builder(o)?
            .pool_max_idle_per_host(0)
            .connector_layer(super::connect::ConnectTimer::new(returning.clone()))
            .default_headers(headers)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(OpenAi {
            client,
            fresh,
            url,
            models_url,
            connect_timeout: o.connect_timeout,
            keep_alive: o.pool_size > 0,
            returning,
            stream: workload.stream,
            body: BodyTemplate::new(workload, model, dialect),
            timeouts,
            limits,
            keep_reply: workload.conversation.is_some(),
        })
    }

    /// The JSON body of a request.
    pub fn body(&self, prompt: &Prompt) -> Vec<u8> {
        self.body.write(prompt)
    }

    async fn execute(&self, req: Prepared, rec: &mut RequestRecord) {
        let t = self.timeouts;
        let mut attempt = 0;
        let response = loop {
            let mut request = reqwest::Request::new(reqwest::Method::POST, self.url.clone());
            request
                .headers_mut()
                .insert(reqwest::header::CONTENT_TYPE, JSON);
            *request.body_mut() = Some(req.body.clone().into());
            rec.t_send = Instant::now();
            let total_deadline = rec.t_send + t.total.as_std();
            let first_deadline = (rec.t_send + t.first_token.as_std()).min(total_deadline);
            let client = if attempt == 0 {
                &self.client
            } else {
                &self.fresh
            };
            let sent = super::connect::timed(client.execute(request));
            let sent = tokio::time::timeout_at(first_deadline.into(), sent)
                .await
                .map(|(r, connect_ns)| {
                    rec.connect_ns += connect_ns;
                    r
                });
            match sent {
                Err(_) => {
                    let (class, detail) = if first_deadline == total_deadline {
                        (
                            ErrorClass::TimeoutTotal,
                            format!("no response headers within timeouts.total ({})", t.total),
                        )
                    } else {
                        (
                            ErrorClass::TimeoutFirstToken,
                            format!(
                                "no response headers within timeouts.first_token ({})",
                                t.first_token
                            ),
                        )
                    };
                    return rec.fail(class, detail);
                }
                // A kept-alive connection the server had just closed or
                // reset: no byte of a response came, so the request is sent
                // once more on a fresh connection (counted; TTFT from the
                // scheduled time still includes the lost attempt).
                Ok(Err(e)) if attempt == 0 && lost_before_response(&e) => {
                    attempt += 1;
                    rec.retries += 1;
                    continue;
                }
                Ok(Err(e)) => {
                    let class = if out_of_descriptors(&e) {
                        ErrorClass::ClientLimit
                    } else if e.is_timeout() && e.is_connect() {
                        ErrorClass::TimeoutConnect
                    } else if e.is_connect() || lost_before_response(&e) {
                        ErrorClass::Connect
                    } else {
                        ErrorClass::Truncated
                    };
                    return rec.fail(class, error_chain(&e));
                }
                Ok(Ok(r)) => break r,
            }
        };
        let total_deadline = rec.t_send + t.total.as_std();
        let first_deadline = (rec.t_send + t.first_token.as_std()).min(total_deadline);
        let status = response.status();
        if !status.is_success() {
            // Only the head of an error body is read; the rest goes with
            // the connection (an endless 500 body costs nothing).
            let cap = usize::try_from(self.limits.max_error_body_bytes).unwrap_or(usize::MAX);
            let body = read_capped(response, cap, Instant::now() + Duration::from_secs(5)).await;
            let text = summarize_error_body(&body);
            rec.failure = Some(Failure {
                class: ErrorClass::of_status(status.as_u16()),
                detail: format!(
                    "HTTP {}{}{text}",
                    status.as_u16(),
                    if text.is_empty() { "" } else { ": " }
                ),
                status: Some(status.as_u16()),
            });
            return;
        }
        if self.stream {
            self.read_stream(response, rec, first_deadline, total_deadline)
                .await;
        } else {
            self.read_whole(response, rec, total_deadline).await;
        }
    }

    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        rec: &mut RequestRecord,
        first_deadline: Instant,
        total_deadline: Instant,
    ) {
        if let Some(ct) = response.headers().get(reqwest::header::CONTENT_TYPE) {
            if !is_event_stream(ct.as_bytes()) {
                let ct = ct.as_bytes().escape_ascii().to_string();
                let head = read_capped(response, NOT_SSE_SHOWN, first_deadline).await;
                rec.t_done = Instant::now();
                return rec.fail(
                    ErrorClass::NotSse,
                    format!(
                        "a stream was asked for but the response is {ct:?}, not text/event-stream; it begins \"{}\"",
                        head.escape_ascii()
                    ),
                );
            }
        }
        let limits = self.limits;
        let mut parser =
            SseParser::with_max_line(usize::try_from(limits.max_line_bytes).unwrap_or(usize::MAX));
        let mut finished = false;
        let mut done = false;
        let mut reply = self.keep_reply.then(String::new);
        let mut problem: Option<(ErrorClass, String)> = None;
        let idle = self.timeouts.idle.as_std();
        // The arrival of the last event (not of the last read: comments
        // and partial lines do not count as the stream being alive).
        let mut last_event = rec.t_send;
        let mut events: u64 = 0;
        let mut received: u64 = 0;
        // One timer for the whole stream, moved when its deadline moves
        // (after an event), not a new one for every read.
        let timer = tokio::time::sleep_until(first_deadline.into());
        tokio::pin!(timer);
        loop {
            let deadline = if rec.events.is_empty() {
                first_deadline
            } else {
                (last_event + idle).min(total_deadline)
            };
            let due = tokio::time::Instant::from_std(deadline);
            if timer.deadline() != due {
                timer.as_mut().reset(due);
            }
            let read = tokio::select! {
                biased;
                read = response.chunk() => Ok(read),
                () = &mut timer => Err(()),
            };
            let now = Instant::now();
            let bytes: Bytes = match read {
                Err(_) => {
                    rec.t_done = now;
                    let (class, detail) =
                        self.timed_out(deadline, total_deadline, rec, now, last_event);
                    return rec.fail(class, detail);
                }
                Ok(Err(e)) => {
                    rec.t_done = now;
                    return rec.fail(
                        ErrorClass::Truncated,
                        format!("the stream broke: {}", error_chain(&e)),
                    );
                }
                Ok(Ok(None)) => {
                    let r = parser.finish(|ev| {
                        events += 1;
                        handle_event(
                            ev.data,
                            now,
                            rec,
                            &mut reply,
                            &mut finished,
                            &mut done,
                            &mut problem,
                        )
                    });
                    if let Err(e) = r {
                        problem.get_or_insert((ErrorClass::Oversized, line_limit(e)));
                    }
                    rec.t_done = now;
                    break;
                }
                Ok(Ok(Some(b))) => b,
            };
            received += bytes.len() as u64;
            if received > limits.max_response_bytes {
                rec.t_done = now;
                return rec.fail(
                    ErrorClass::Oversized,
                    format!(
                        "the response is larger than load.limits.max_response_bytes ({} bytes)",
                        limits.max_response_bytes
                    ),
                );
            }
            let before = events;
            let r = parser.feed(&bytes, |ev| {
                events += 1;
                handle_event(
                    ev.data,
                    now,
                    rec,
                    &mut reply,
                    &mut finished,
                    &mut done,
                    &mut problem,
                )
            });
            if events != before {
                last_event = now;
            }
            if let Err(e) = r {
                problem.get_or_insert((ErrorClass::Oversized, line_limit(e)));
            }
            if events > limits.max_events && problem.is_none() && !done {
                problem = Some((
                    ErrorClass::Oversized,
                    format!(
                        "the stream sent more than load.limits.max_events ({}) events",
                        limits.max_events
                    ),
                ));
            }
            if problem.is_some() || done {
                rec.t_done = now;
                if done && problem.is_none() && self.keep_alive {
                    // The body's end (the chunked terminator) is read so
                    // the connection goes back to the pool instead of
                    // closing, on a task of its own: this request is over.
                    let on_its_way = self.returning.start();
                    tokio::spawn(drain_end(response, idle.min(DRAIN_TIME), on_its_way));
                }
                break;
            }
        }
        rec.reply = reply;
        if let Some((class, detail)) = problem {
            return rec.fail(class, detail);
        }
        if rec.events.is_empty() {
            return rec.fail(ErrorClass::Empty, "the stream carried no output");
        }
        if !finished && !done {
            rec.fail(
                ErrorClass::Truncated,
                "the stream ended without a finish reason or [DONE]",
            );
        }
    }

    /// The class and sentence of a stream read that hit `deadline`.
    fn timed_out(
        &self,
        deadline: Instant,
        total_deadline: Instant,
        rec: &RequestRecord,
        now: Instant,
        last_event: Instant,
    ) -> (ErrorClass, String) {
        timeout_failure(
            self.timeouts,
            deadline == total_deadline,
            rec.events.len(),
            now.duration_since(last_event),
        )
    }
}

/// The class and sentence of a request that ran out of time: past
/// `timeouts.total` (`total`), else before its first event, else idle for
/// `idle_for` after `events` events.
pub fn timeout_failure(
    t: infer_bench_spec::Timeouts,
    total: bool,
    events: usize,
    idle_for: Duration,
) -> (ErrorClass, String) {
    if total {
        (
            ErrorClass::TimeoutTotal,
            format!(
                "the request ran past timeouts.total ({}) with {events} output events",
                t.total,
            ),
        )
    } else if events == 0 {
        (
            ErrorClass::TimeoutFirstToken,
            format!("no output within timeouts.first_token ({})", t.first_token),
        )
    } else {
        (
            ErrorClass::TimeoutIdle,
            format!(
                "no event for {:.3} s (timeouts.idle = {})",
                idle_for.as_secs_f64(),
                t.idle
            ),
        )
    }
}

impl OpenAi {
    async fn read_whole(
        &self,
        response: reqwest::Response,
        rec: &mut RequestRecord,
        total_deadline: Instant,
    ) {
        let max = self.limits.max_response_bytes;
        let body = tokio::time::timeout_at(total_deadline.into(), async {
            let mut response = response;
            let mut body = Vec::new();
            while let Some(b) = response.chunk().await? {
                if (body.len() + b.len()) as u64 > max {
                    return Ok(None);
                }
                body.extend_from_slice(&b);
            }
            Ok::<_, reqwest::Error>(Some(body))
        })
        .await;
        let now = Instant::now();
        rec.t_done = now;
        let bytes = match body {
            Err(_) => {
                return rec.fail(
                    ErrorClass::TimeoutTotal,
                    format!(
                        "the response did not complete within timeouts.total ({})",
                        self.timeouts.total
                    ),
                );
            }
            Ok(Err(e)) => {
                return rec.fail(
                    ErrorClass::Truncated,
                    format!("the response broke: {}", error_chain(&e)),
                );
            }
            Ok(Ok(None)) => {
                return rec.fail(
                    ErrorClass::Oversized,
                    format!(
                        "the response is larger than load.limits.max_response_bytes ({max} bytes)"
                    ),
                );
            }
            Ok(Ok(Some(b))) => b,
        };
        let mut reply = self.keep_reply.then(String::new);
        match interpret_into(&bytes, reply.as_mut(), Some(&mut rec.response_id)) {
            Err(e) => rec.fail(ErrorClass::Malformed, e),
            Ok(info) if info.error.is_some() => {
                rec.fail(ErrorClass::StreamError, info.error.unwrap_or_default())
            }
            Ok(info) => {
                if let Some(u) = info.usage {
                    rec.usage = u;
                }
                rec.server_timing = info.server_timing;
                if !info.output {
                    return rec.fail(ErrorClass::Empty, "the response carried no output");
                }
                rec.events.push(OutputEvent {
                    at_ns: now.duration_since(rec.t_send).as_nanos() as u64,
                    text_bytes: info.text_bytes,
                    token_ids: info.token_ids,
                    reasoning: info.reasoning,
                });
                rec.reply = reply;
            }
        }
    }
}

fn handle_event(
    data: &[u8],
    now: Instant,
    rec: &mut RequestRecord,
    reply: &mut Option<String>,
    finished: &mut bool,
    done: &mut bool,
    problem: &mut Option<(ErrorClass, String)>,
) {
    if problem.is_some() || *done {
        return;
    }
    match interpret_into(data, reply.as_mut(), Some(&mut rec.response_id)) {
        Err(e) => *problem = Some((ErrorClass::Malformed, e)),
        Ok(info) => {
            if let Some(e) = info.error {
                *problem = Some((ErrorClass::StreamError, e));
                return;
            }
            if let Some(u) = info.usage {
                if u.prompt_tokens.is_some() {
                    rec.usage.prompt_tokens = u.prompt_tokens;
                }
                if u.completion_tokens.is_some() {
                    rec.usage.completion_tokens = u.completion_tokens;
                }
                if u.reasoning_tokens.is_some() {
                    rec.usage.reasoning_tokens = u.reasoning_tokens;
                }
            }
            if info.server_timing.is_some() {
                rec.server_timing = info.server_timing;
            }
            if info.output {
                rec.events.push(OutputEvent {
                    at_ns: now.duration_since(rec.t_send).as_nanos() as u64,
                    text_bytes: info.text_bytes,
                    token_ids: info.token_ids,
                    reasoning: info.reasoning,
                });
            }
            *finished |= info.finished;
            *done |= info.done;
        }
    }
}

/// Whether the connection was lost before any response came: hyper's
/// "connection closed before message completed" (the server closed a pooled
/// connection as the request went out; llama.cpp's server closes streaming
/// keep-alive connections after two responses), or a reset or abort of the
/// socket (a proxy or a restarting server). Only called before the
/// response's head, so no byte of a response had come.
fn lost_before_response(e: &reqwest::Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() {
                return true;
            }
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
            ) {
                return true;
            }
        }
        cur = err.source();
    }
    false
}

/// Whether an error comes from this process running out of file
/// descriptors (EMFILE: its own limit; ENFILE: the system's): an
/// `io::Error` with either code anywhere in its chain. Such a request never
/// reached the server, and saying it could not connect would blame it.
fn out_of_descriptors(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(io.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                return true;
            }
            // A custom io::Error's source skips the error it wraps.
            if let Some(inner) = io.get_ref() {
                if out_of_descriptors(inner) {
                    return true;
                }
            }
        }
        cur = err.source();
    }
    false
}

/// Most of a body read after `[DONE]` to give its connection back: a
/// server that keeps talking is left (and its connection closed) after
/// this many bytes or [`DRAIN_TIME`].
const DRAIN_BYTES: usize = 64 * 1024;
const DRAIN_TIME: Duration = Duration::from_secs(1);

/// Reads what is left of a response after `[DONE]`, at most
/// [`DRAIN_BYTES`] and for at most `within`: read to its end, the
/// connection goes back to the pool. It counts in no timing. Until then
/// (and a turn of the scheduler after, for the pool's own task to take the
/// connection back) it is counted `on_its_way`, and a request that would
/// open a connection waits for it (`connect`).
async fn drain_end(
    mut response: reqwest::Response,
    within: Duration,
    on_its_way: super::connect::OnItsWay,
) {
    let _ = tokio::time::timeout(within, async {
        let mut left = DRAIN_BYTES;
        while let Ok(Some(b)) = response.chunk().await {
            left = left.saturating_sub(b.len());
            if left == 0 {
                break;
            }
        }
    })
    .await;
    drop(response);
    tokio::task::yield_now().await;
    drop(on_its_way);
}

/// Bytes of a body that is not an event stream shown in the `not_sse` message.
const NOT_SSE_SHOWN: usize = 80;

/// Whether a `Content-Type` is `text/event-stream` (parameters allowed).
fn is_event_stream(ct: &[u8]) -> bool {
    let essence = ct.split(|&b| b == b';').next().unwrap_or_default();
    essence
        .trim_ascii()
        .eq_ignore_ascii_case(b"text/event-stream")
}

/// The sentence of a line or event over `load.limits.max_line_bytes`.
fn line_limit(e: super::sse::SseError) -> String {
    format!("{e} (load.limits.max_line_bytes)")
}

/// At most `cap` bytes of a response body, read until `deadline`; the
/// response is then dropped, and with it the connection if the body had
/// more (a body never read to its end is never pooled).
async fn read_capped(mut response: reqwest::Response, cap: usize, deadline: Instant) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = tokio::time::timeout_at(deadline.into(), async {
        while out.len() < cap {
            match response.chunk().await {
                Ok(Some(b)) => out.extend_from_slice(&b[..b.len().min(cap - out.len())]),
                _ => break,
            }
        }
    })
    .await;
    out
}

/// The first useful line of an error body (OpenAI-style `error.message`).
fn summarize_error_body(b: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(b) {
        if let Some(e) = v.get("error") {
            return error_text(e);
        }
        if let Some(m) = v.get("message").and_then(|m| m.as_str()) {
            return m.to_string();
        }
    }
    String::from_utf8_lossy(&b[..b.len().min(200)])
        .trim()
        .to_string()
}

/// An error with its causes, on one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// Most of a `/models` body read while opening connections: read to its
/// end, the connection goes back to the pool; a longer body is dropped with
/// its connection.
const WARM_BODY_BYTES: usize = 256 * 1024;

/// One `GET /models` on a connection of the pool (opened if none is idle),
/// its body read to the end so that the connection stays open.
///
/// Its first poll takes an idle connection or starts a connect; it then
/// waits until all `n` have had theirs (`started` counts them). Until then
/// no `GET` can have finished and given its connection back, so none takes
/// another's: each holds an idle one or has started a connect, and a
/// started connect ends in the pool even if its `GET` is served on a
/// connection that came back first. So `n` of them leave `n` connections.
async fn warm_one(
    client: reqwest::Client,
    url: reqwest::Url,
    started: Arc<tokio::sync::watch::Sender<usize>>,
    n: usize,
) -> Result<(), String> {
    let mut get = std::pin::pin!(client.get(url).send());
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(get.as_mut().poll(cx))).await;
    started.send_modify(|s| *s += 1);
    let sent = match first {
        std::task::Poll::Ready(r) => r,
        std::task::Poll::Pending => {
            let _ = started.subscribe().wait_for(|s| *s >= n).await;
            get.await
        }
    };
    let mut response = sent.map_err(|e| error_chain(&e))?;
    let mut left = WARM_BODY_BYTES;
    while let Some(b) = response.chunk().await.map_err(|e| error_chain(&e))? {
        left = left
            .checked_sub(b.len())
            .ok_or_else(|| format!("its body was over {WARM_BODY_BYTES} bytes"))?;
    }
    Ok(())
}

impl OpenAi {
    /// Asks the server what it is: the first `owned_by` in
    /// `GET {base_url}/models` that names a dialect. `None` when it does
    /// not answer, or does not say.
    pub async fn identify(&self) -> Option<infer_bench_spec::Dialect> {
        let deadline = Instant::now() + self.connect_timeout + Duration::from_secs(5);
        let get = self.client.get(self.models_url.clone()).send();
        let response = tokio::time::timeout_at(deadline.into(), get)
            .await
            .ok()?
            .ok()?;
        if !response.status().is_success() {
            return None;
        }
        let body = read_capped(response, WARM_BODY_BYTES, deadline).await;
        let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
        v.get("data")?
            .as_array()?
            .iter()
            .filter_map(|m| m.get("owned_by")?.as_str())
            .find_map(infer_bench_spec::Dialect::from_owned_by)
    }

    /// Writes bodies in `dialect` from now on.
    pub fn set_dialect(
        &mut self,
        workload: &infer_bench_spec::Workload,
        model: &str,
        dialect: infer_bench_spec::Dialect,
    ) {
        self.body = BodyTemplate::new(workload, model, dialect);
    }
}

impl Backend for OpenAi {
    fn prepare(&self, prompt: &Prompt) -> Prepared {
        Prepared {
            body: Bytes::from(self.body(prompt)),
            input_tokens: prompt.input_tokens,
            output_tokens: prompt.output_tokens,
            part: prompt.part,
        }
    }

    async fn send(&self, req: Prepared, mut rec: RequestRecord) -> RequestRecord {
        rec.requested_input = req.input_tokens;
        rec.requested_output = req.output_tokens;
        rec.part = req.part;
        self.execute(req, &mut rec).await;
        if rec.t_done < rec.t_send {
            rec.t_done = Instant::now();
        }
        rec
    }

    /// `n` concurrent `GET {base_url}/models` (any status will do): each
    /// holds a connection of the pool until its body is read, so together
    /// they leave `n` connections open, idle, in the pool; connections a
    /// previous run left there are reused, not reopened.
    async fn warm(&self, n: usize) -> Result<(), String> {
        if n == 0 {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + self.connect_timeout;
        let started = Arc::new(tokio::sync::watch::Sender::new(0usize));
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..n {
            let one = warm_one(
                self.client.clone(),
                self.models_url.clone(),
                started.clone(),
                n,
            );
            set.spawn(async move {
                tokio::time::timeout_at(deadline, one)
                    .await
                    .unwrap_or_else(|_| Err("no answer within timeouts.connect".into()))
            });
        }
        let mut failed = 0usize;
        let mut example = None;
        while let Some(r) = set.join_next().await {
            if let Err(e) = r.map_err(|e| e.to_string()).and_then(|r| r) {
                failed += 1;
                example.get_or_insert(e);
            }
        }
        match example {
            None => Ok(()),
            Some(e) => Err(format!(
                "{failed} of {n} connections could not be opened before the run (GET {}: {e}); the run opened the rest as it went",
                self.models_url.path()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_spec::Dialect;

    fn events(file: &str) -> Vec<ChunkInfo> {
        let path = format!(
            "{}/../../tests/fixtures/llama-server/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(path).unwrap();
        let mut p = SseParser::new();
        let mut out = Vec::new();
        p.feed(&bytes, |e| out.push(interpret(e.data, None).unwrap()))
            .unwrap();
        p.finish(|e| out.push(interpret(e.data, None).unwrap()))
            .unwrap();
        out
    }

    #[test]
    fn llama_server_completions_stream() {
        let ev = events("completions-stream.sse");
        let outputs = ev.iter().filter(|e| e.output).count();
        assert_eq!(outputs, 12);
        assert!(ev.iter().any(|e| e.finished));
        let usage = ev.iter().find_map(|e| e.usage).unwrap();
        assert_eq!(usage.completion_tokens, Some(12));
        assert!(ev.last().unwrap().done);
    }

    #[test]
    fn llama_server_chat_stream_role_chunk_is_not_output() {
        let ev = events("chat-stream.sse");
        assert!(!ev[0].output, "the role-only delta is not output");
        assert_eq!(
            ev.iter().filter(|e| e.output).count() as u32,
            ev.iter()
                .find_map(|e| e.usage)
                .unwrap()
                .completion_tokens
                .unwrap()
        );
    }

    #[test]
    fn interprets_the_forms_servers_send() {
        let reasoning = br#"{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}"#;
        assert!(interpret(reasoning, None).unwrap().output);
        assert!(interpret(reasoning, None).unwrap().reasoning);
        let thought = br#"{"choices":[{"index":0,"delta":{"reasoning":"hmm"}}]}"#;
        assert!(interpret(thought, None).unwrap().reasoning);
        // Reasoning and answer in one event is answer: the answer began.
        let both = br#"{"choices":[{"index":0,"delta":{"reasoning_content":"a","content":"b"}}]}"#;
        assert!(!interpret(both, None).unwrap().reasoning);
        let answer = br#"{"choices":[{"index":0,"delta":{"content":"b"}}]}"#;
        assert!(!interpret(answer, None).unwrap().reasoning);
        let details = br#"{"choices":[],"usage":{"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":4}}}"#;
        let u = interpret(details, None).unwrap().usage.unwrap();
        assert_eq!(
            (u.completion_tokens, u.reasoning_tokens),
            (Some(9), Some(4))
        );
        let empty = br#"{"choices":[{"index":0,"delta":{"content":""}}]}"#;
        assert!(!interpret(empty, None).unwrap().output);
        let usage_only = br#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}"#;
        let u = interpret(usage_only, None).unwrap();
        assert!(!u.output);
        assert_eq!(u.usage.unwrap().completion_tokens, Some(7));
        let err =
            br#"{"error":{"message":"out of memory","type":"InternalServerError","code":500}}"#;
        assert_eq!(
            interpret(err, None).unwrap().error.as_deref(),
            Some("out of memory")
        );
        let tgi = br#"{"error":"Input validation error","error_type":"validation"}"#;
        assert_eq!(
            interpret(tgi, None).unwrap().error.as_deref(),
            Some("Input validation error")
        );
        let ids = br#"{"choices":[{"index":0,"text":"ab","token_ids":[1,2]}]}"#;
        assert_eq!(interpret(ids, None).unwrap().token_ids, Some(2));
        assert!(interpret(b"{not json", None).is_err());
        assert!(interpret(b"{}", None).is_err());
        let mut reply = String::new();
        interpret(
            br#"{"choices":[{"delta":{"content":"hi \u00e9"}}]}"#,
            Some(&mut reply),
        )
        .unwrap();
        assert_eq!(reply, "hi é");
    }

    #[test]
    fn the_first_id_a_response_names_is_kept_clipped() {
        let mut id = None;
        let chunk = br#"{"id":"chatcmpl-1","choices":[{"delta":{"content":"a"}}]}"#;
        interpret_into(chunk, None, Some(&mut id)).unwrap();
        assert_eq!(id.as_deref(), Some("chatcmpl-1"));
        let later = br#"{"id":"chatcmpl-2","choices":[{"delta":{"content":"b"}}]}"#;
        interpret_into(later, None, Some(&mut id)).unwrap();
        assert_eq!(id.as_deref(), Some("chatcmpl-1"), "the first is kept");
        // A chunk without one leaves it unset; [DONE] too.
        let mut none = None;
        interpret_into(br#"{"choices":[]}"#, None, Some(&mut none)).unwrap();
        interpret_into(b"[DONE]", None, Some(&mut none)).unwrap();
        assert_eq!(none, None);
        // Escapes decoded; at most 128 bytes, cut at a character boundary.
        let mut id = None;
        let long = format!(r#"{{"id":"\u00e9{}","choices":[]}}"#, "\u{e9}".repeat(100));
        interpret_into(long.as_bytes(), None, Some(&mut id)).unwrap();
        let id = id.unwrap();
        assert_eq!(id.len(), 128);
        assert!(id.chars().all(|c| c == '\u{e9}'));
        let mut id = None;
        let odd = format!(r#"{{"id":"x{}","choices":[]}}"#, "\u{e9}".repeat(100));
        interpret_into(odd.as_bytes(), None, Some(&mut id)).unwrap();
        assert_eq!(id.unwrap().len(), 127, "not inside a two-byte character");
        // An error object's id is the response's too.
        let mut id = None;
        let err = br#"{"id":"e-1","error":{"message":"no"}}"#;
        assert!(
            interpret_into(err, None, Some(&mut id))
                .unwrap()
                .error
                .is_some()
        );
        assert_eq!(id.as_deref(), Some("e-1"));
    }

    #[test]
    fn non_stream_completion() {
        let path = format!(
            "{}/../../tests/fixtures/llama-server/completions-nonstream.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let info = interpret(&std::fs::read(path).unwrap(), None).unwrap();
        assert!(info.output && info.finished);
        assert_eq!(info.usage.unwrap().completion_tokens, Some(8));
    }

    /// An error that wraps another, as hyper and reqwest wrap a connect's.
    #[derive(Debug)]
    struct Wrapped(&'static str, Box<dyn std::error::Error + Send + Sync>);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&*self.1)
        }
    }

    #[test]
    fn running_out_of_descriptors_is_found_anywhere_in_the_chain() {
        let os = |code| Box::new(std::io::Error::from_raw_os_error(code));
        let chain = |code| {
            Wrapped(
                "client error (Connect)",
                Box::new(Wrapped("tcp open error", os(code))),
            )
        };
        assert!(out_of_descriptors(&chain(libc::EMFILE)));
        assert!(out_of_descriptors(&chain(libc::ENFILE)));
        assert!(!out_of_descriptors(&chain(libc::ECONNREFUSED)));
        assert!(!out_of_descriptors(&chain(libc::ETIMEDOUT)));
        // Inside a custom io::Error, whose source() skips what it wraps.
        let custom = std::io::Error::other(std::io::Error::from_raw_os_error(libc::EMFILE));
        assert!(out_of_descriptors(&Wrapped("dns error", Box::new(custom))));
        let plain = std::io::Error::other("too many open files");
        assert!(!out_of_descriptors(&plain));
        assert_eq!(ErrorClass::ClientLimit.name(), "client_limit");
    }

    /// The body as it was built before the template: a `serde_json` map
    /// (sorted keys), the prompt cloned into it. Kept to hold the template
    /// to the same bytes: the workload fingerprint hashes them, and
    /// committed baselines record it.
    fn body_via_map(w: &infer_bench_spec::Workload, model: &str, prompt: &Prompt) -> Vec<u8> {
        use serde_json::{Value, json};
        let mut extra = serde_json::to_value(&w.sampling)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        extra.extend(w.extra_body.clone());
        let mut m = serde_json::Map::new();
        m.insert("model".into(), Value::String(model.to_string()));
        match w.api {
            Api::Chat => {
                let mut messages: Vec<Value> = prompt
                    .history
                    .iter()
                    .map(|m| json!({"role": m.role, "content": m.content}))
                    .collect();
                messages.push(json!({"role": "user", "content": prompt.text}));
                m.insert("messages".into(), Value::Array(messages));
            }
            Api::Completions => {
                m.insert("prompt".into(), Value::String(prompt.text.clone()));
            }
        }
        m.insert(
            w.max_tokens_field.clone(),
            Value::from(prompt.output_tokens),
        );
        if w.ignore_eos {
            m.insert("ignore_eos".into(), Value::Bool(true));
        }
        m.insert("stream".into(), Value::Bool(w.stream));
        if w.stream {
            m.insert("stream_options".into(), json!({"include_usage": true}));
        }
        for (k, v) in &extra {
            m.insert(k.clone(), v.clone());
        }
        serde_json::to_vec(&Value::Object(m)).unwrap()
    }

    /// The workload of a one-point spec with this `[workloads.w]`.
    fn workload(keys: &str) -> infer_bench_spec::Workload {
        let text = format!(
            "name = \"t\"\n[targets.s]\nkind = \"sim\"\ngpu = \"h100-sxm\"\n[models.m]\npreset = \"llama-3.1-8b\"\n[workloads.w]\ninput_tokens = 8\noutput_tokens = 8\n{keys}\n[load]\nconcurrency = 1\nrequests = 1\n"
        );
        let spec = infer_bench_spec::compile("t.toml", &text, std::path::Path::new(".")).unwrap();
        let plan = infer_bench_spec::plan::Plan::build(&spec).unwrap();
        (*plan.points[0].config.workload).clone()
    }

    #[test]
    fn bodies_are_byte_for_byte_what_the_map_wrote() {
        use infer_bench_workload::Message;
        let tricky = "say \"hi\"\n\t\\ caf\u{e9} \u{1f680} \u{1} </script>".to_string();
        let prompts = [
            Prompt {
                history: Vec::new(),
                text: "plain words".into(),
                input_tokens: 2,
                output_tokens: 7,
                part: 0,
            },
            Prompt {
                history: vec![
                    Message {
                        role: Role::System,
                        content: "be brief".into(),
                    },
                    Message {
                        role: Role::User,
                        content: tricky.clone(),
                    },
                    Message {
                        role: Role::Assistant,
                        content: String::new(),
                    },
                ],
                text: tricky,
                input_tokens: 30,
                output_tokens: u32::MAX,
                part: 1,
            },
        ];
        let mut workloads = vec![
            workload("api = \"chat\""),
            workload("api = \"completions\""),
            workload("api = \"chat\"\nstream = false\nignore_eos = true"),
            workload(
                "api = \"completions\"\nmax_tokens_field = \"max_completion_tokens\"\nsampling = { temperature = 0.7, top_p = 0.95, top_k = 40, min_p = 0.05, presence_penalty = -0.5, frequency_penalty = 1e-3, repetition_penalty = 1.1, seed = 7 }",
            ),
            workload(
                "api = \"chat\"\nsampling = { temperature = 0.0 }\nextra_body = { zzz = [1, 2.5, \"x\"], aaa = { b = true, a = \"\\u00e9\" }, \"key \\\"quoted\\\"\" = 1, chat_template_kwargs = { enable_thinking = false } }",
            ),
        ];
        // extra_body over the fields the client sets itself, and over the
        // sampling: the map let it replace them.
        let mut over = workload("api = \"chat\"\nsampling = { temperature = 0.5, seed = 1 }");
        for (k, v) in [
            ("model", serde_json::json!("other")),
            ("stream", serde_json::json!(false)),
            ("max_tokens", serde_json::json!(3)),
            ("messages", serde_json::json!([])),
            ("temperature", serde_json::json!(1.25)),
            ("stream_options", serde_json::Value::Null),
        ] {
            over.extra_body.insert(k.into(), v);
        }
        workloads.push(over);
        let mut prompt_over = workload("api = \"completions\"");
        prompt_over
            .extra_body
            .insert("prompt".into(), serde_json::json!("fixed"));
        workloads.push(prompt_over);
        for w in &workloads {
            for model in ["m", "org/Model-\"7B\""] {
                // vLLM's dialect carries every field the map wrote.
                let t = BodyTemplate::new(w, model, Dialect::Vllm);
                for p in &prompts {
                    let new = t.write(p);
                    let old = body_via_map(w, model, p);
                    assert_eq!(
                        String::from_utf8_lossy(&new),
                        String::from_utf8_lossy(&old),
                        "{w:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn each_dialect_gets_only_the_fields_it_carries() {
        let w = workload(
            "api = \"completions\"\nignore_eos = true\nsampling = { temperature = 0.5, top_k = 40, min_p = 0.05, repetition_penalty = 1.1 }",
        );
        let prompt = Prompt {
            history: Vec::new(),
            text: "hi".into(),
            input_tokens: 1,
            output_tokens: 4,
            part: 0,
        };
        let body = |d: Dialect| -> serde_json::Map<String, serde_json::Value> {
            let t = BodyTemplate::new(&w, "m", d);
            serde_json::from_slice(&t.write(&prompt)).unwrap()
        };
        let keys = |d: Dialect| -> Vec<String> {
            let mut k: Vec<String> = body(d).keys().cloned().collect();
            k.retain(|k| {
                !matches!(
                    k.as_str(),
                    "model" | "prompt" | "max_tokens" | "stream" | "stream_options"
                )
            });
            k
        };
        for d in [Dialect::Openai, Dialect::Tgi] {
            assert_eq!(keys(d), vec!["temperature"], "{d}");
        }
        for d in [Dialect::Vllm, Dialect::Sglang, Dialect::Trtllm] {
            assert_eq!(
                keys(d),
                vec![
                    "ignore_eos",
                    "min_p",
                    "repetition_penalty",
                    "temperature",
                    "top_k"
                ],
                "{d}"
            );
        }
        assert_eq!(
            keys(Dialect::LlamaCpp),
            vec![
                "ignore_eos",
                "min_p",
                "repeat_penalty",
                "temperature",
                "top_k"
            ]
        );
        assert_eq!(
            body(Dialect::LlamaCpp)["repeat_penalty"],
            serde_json::json!(1.1)
        );
    }
}
