//! The OpenAI-compatible request kinds: `/chat/completions` ([`Chat`]) and
//! `/completions` ([`Completions`]), streamed (SSE) or not, against vLLM,
//! SGLang, TGI, TensorRT-LLM, llama.cpp, Ollama or the built-in simulator.
//! Bodies are written from a template laid out once per point, in the
//! dialect the server speaks; answers are read into events, usage
//! (requested with `stream_options.include_usage`) and reasoning.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::http::{HttpBackend, WARM_BODY_BYTES};
use crate::record::ErrorClass;
use crate::{EventInfo, Protocol, Unreadable, Usage};
use infer_bench_spec::Dialect;
use infer_bench_spec::raw::Api;
use infer_bench_workload::{Prompt, Role};

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
    timings: Option<crate::record::ServerTiming>,
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
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallWire<'a>>>,
}

/// One entry of `tool_calls`: a streamed fragment (`index`, the name in
/// the first, the arguments in pieces) or a whole call.
#[derive(Deserialize)]
struct ToolCallWire<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(borrow, default)]
    function: Option<FunctionWire<'a>>,
}

#[derive(Deserialize)]
struct FunctionWire<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
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

pub(crate) fn error_text(v: &serde_json::Value) -> String {
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

/// Keeps the id a response names in `id`, when asked and still unset (the
/// first id a response names is its own).
pub(crate) fn take_id(id: Option<&mut Option<String>>, named: Option<&str>) {
    if let (Some(slot @ None), Some(named)) = (id, named) {
        *slot = Some(clip_id(named));
    }
}

/// The first bytes of a body that did not read, for its failure's detail.
pub(crate) fn shown(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(&data[..data.len().min(120)])
}

/// Why `data` is not the JSON expected, with its first bytes.
pub(crate) fn unreadable(e: serde_json::Error, data: &[u8]) -> Unreadable {
    Unreadable(format!("{e}: {}", shown(data)))
}

/// Interprets one event's data. `reply`, when given, collects the text.
pub fn interpret(
    data: &[u8],
    reply: Option<&mut crate::structured::Reply>,
) -> Result<EventInfo, Unreadable> {
    interpret_into(data, reply, None)
}

/// The most bytes of a response's `id` kept (a request log line is no
/// place for an unbounded string from the server).
pub const MAX_RESPONSE_ID_BYTES: usize = 128;

/// At most [`MAX_RESPONSE_ID_BYTES`] of `id`, cut at a character boundary.
fn clip_id(id: &str) -> String {
    infer_bench_results::outside::clip(id, MAX_RESPONSE_ID_BYTES).to_string()
}

/// [`interpret`], and the event's `id` into `id` when that is given and
/// still empty (the first id a response names is its own).
fn interpret_into(
    data: &[u8],
    reply: Option<&mut crate::structured::Reply>,
    id: Option<&mut Option<String>>,
) -> Result<EventInfo, Unreadable> {
    if data == b"[DONE]" {
        return Ok(EventInfo {
            done: true,
            ..EventInfo::default()
        });
    }
    let chunk: Chunk = serde_json::from_slice(data).map_err(|e| unreadable(e, data))?;
    take_id(id, chunk.id.as_deref());
    let mut info = EventInfo::default();
    if let Some(e) = &chunk.error {
        info.error = Some(error_text(e));
        return Ok(info);
    }
    if chunk.object.as_deref() == Some("error") {
        info.error = Some(chunk.message.as_deref().unwrap_or("error").to_string());
        return Ok(info);
    }
    info.server_timing = chunk.timings;
    info.usage = chunk.usage.map(|u| Usage {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
    });
    let Some(choices) = chunk.choices else {
        return if info.usage.is_some() {
            Ok(info)
        } else {
            Err(Unreadable(
                "an event with neither `choices` nor `usage`".into(),
            ))
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
                if let Some(calls) = &d.tool_calls {
                    info.output = true;
                    other = true;
                    if let Some(r) = reply.as_deref_mut() {
                        for (k, c) in calls.iter().enumerate() {
                            let f = c.function.as_ref();
                            // A whole message's calls carry no index.
                            let index = c.index.or((i == 1).then_some(k as u32));
                            r.tool_call(
                                index,
                                f.and_then(|f| f.name.as_deref()),
                                f.and_then(|f| f.arguments.as_deref()),
                            );
                        }
                    }
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

/// A request body's JSON, laid out once per point. Its keys are in the
/// order a `serde_json::Map` writes them (sorted: the bodies, and the
/// workload fingerprint that hashes them, are what they were when bodies
/// were built as a map), the constant parts (model, stream options,
/// sampling, `extra_body`) written once, with holes for what each prompt
/// fills in; `extra_body` overrides any key, as it did in the map.
#[derive(Debug, Clone)]
pub(crate) struct BodyTemplate {
    parts: Vec<BodyPart>,
    /// The constant parts' bytes.
    fixed: usize,
}

#[derive(Debug, Clone)]
enum BodyPart {
    Json(String),
    Prompt,
    Messages,
    /// Anthropic's `messages`: the prompt's messages less its system ones.
    AnthropicMessages,
    /// Anthropic's `"system":"...",` where the prompt has a system message
    /// (nothing otherwise).
    System,
    MaxTokens,
}

/// One chat message as it goes on the wire (keys sorted, as above).
#[derive(Serialize)]
struct WireMessage<'a> {
    content: &'a str,
    role: Role,
}

/// A prompt's messages: its history, then its text from the user. With
/// `system` false the history's system messages are left out (Anthropic's
/// Messages API takes them in a top-level `system`).
struct Messages<'a> {
    prompt: &'a Prompt,
    system: bool,
}

impl Serialize for Messages<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let p = self.prompt;
        let len = self.system.then_some(p.history.len() + 1);
        let mut seq = s.serialize_seq(len)?;
        for m in p
            .history
            .iter()
            .filter(|m| self.system || m.role != Role::System)
        {
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

/// The prompt's system messages, joined by a blank line (`None` if none).
fn system_text(p: &Prompt) -> Option<String> {
    let mut system = p.history.iter().filter(|m| m.role == Role::System);
    let first = system.next()?;
    let mut text = first.content.clone();
    for m in system {
        text.push_str("\n\n");
        text.push_str(&m.content);
    }
    Some(text)
}

/// The sampling fields Anthropic's Messages API defines; the others go
/// only to a server that named itself (llama.cpp, vLLM ...), in its dialect.
const ANTHROPIC_SAMPLING: &[&str] = &["temperature", "top_p", "top_k"];

impl BodyTemplate {
    pub(crate) fn new(
        api: Api,
        workload: &infer_bench_spec::Workload,
        model: &str,
        dialect: Dialect,
    ) -> BodyTemplate {
        use serde_json::{Value, json};
        enum Slot {
            Value(Value),
            Hole(BodyPart),
        }
        // The keys as the map had them, inserted in the same order (a
        // later insert replaces an earlier one).
        let mut m: std::collections::BTreeMap<String, Slot> = Default::default();
        // Triton's generate names the model in the path; a field that is
        // not one of the model's inputs would reach it as a parameter
        // (which the vLLM backend rejects as an unknown sampling field).
        if api != Api::Generate {
            m.insert("model".into(), Slot::Value(Value::from(model)));
        }
        match api {
            Api::Chat => m.insert("messages".into(), Slot::Hole(BodyPart::Messages)),
            Api::Completions => m.insert("prompt".into(), Slot::Hole(BodyPart::Prompt)),
            Api::Responses => {
                // A benchmark's responses are not kept on the server (the
                // API keeps them by default); `extra_body` may say otherwise.
                m.insert("store".into(), Slot::Value(Value::Bool(false)));
                m.insert("input".into(), Slot::Hole(BodyPart::Messages))
            }
            Api::Messages => m.insert("messages".into(), Slot::Hole(BodyPart::AnthropicMessages)),
            Api::Generate => m.insert("text_input".into(), Slot::Hole(BodyPart::Prompt)),
            // Their bodies are their own (`embeddings`, `rerank`, `kserve`).
            Api::Embeddings | Api::Rerank | Api::Kserve => {
                m.insert("prompt".into(), Slot::Hole(BodyPart::Prompt))
            }
        };
        m.insert(
            workload.max_tokens_field.clone(),
            Slot::Hole(BodyPart::MaxTokens),
        );
        // Triton's generate takes every field under its own name: one the
        // model has no input for goes to it as a request parameter, which
        // Triton never rejects (the dialect is the OpenAI servers').
        let wire_name = |field: &'static str| -> Option<&str> {
            match api {
                Api::Generate => Some(field),
                _ => dialect.wire_name(field),
            }
        };
        if let Some(name) = wire_name("ignore_eos").filter(|_| workload.ignore_eos) {
            m.insert(name.into(), Slot::Value(Value::Bool(true)));
        }
        m.insert("stream".into(), Slot::Value(Value::Bool(workload.stream)));
        // Usage comes with a stream's last event in the Responses and
        // Messages APIs; chat and completions must ask for it.
        if workload.stream && matches!(api, Api::Chat | Api::Completions) {
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
        let strict = matches!(dialect, Dialect::Openai | Dialect::Tgi);
        let sampling = sampling.into_iter().filter_map(|(k, v)| {
            let name = match api {
                Api::Messages if ANTHROPIC_SAMPLING.contains(&k.as_str()) => Some(k.as_str()),
                Api::Messages if strict => None,
                Api::Generate => Some(k.as_str()),
                _ => dialect.wire_name(&k),
            };
            name.map(|n| (n.to_string(), v))
        });
        // Structured output and tools, in the API's (and for completions
        // the dialect's) shape; `extra_body` still has the last word.
        let structured =
            infer_bench_spec::structured::wire_fields(&workload.structured, api, dialect);
        for (k, v) in sampling
            .chain(structured)
            .chain(workload.extra_body.clone())
        {
            m.insert(k, Slot::Value(v));
        }
        fn json<T: Serialize + ?Sized>(v: &T) -> String {
            serde_json::to_string(v).expect("a JSON value serializes")
        }
        let mut parts = Vec::new();
        let mut text = String::from("{");
        if api == Api::Messages {
            parts.push(BodyPart::Json(std::mem::take(&mut text)));
            parts.push(BodyPart::System);
        }
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
    pub(crate) fn write(&self, prompt: &Prompt) -> Vec<u8> {
        let text: usize = prompt.text.len()
            + prompt
                .history
                .iter()
                .map(|m| m.content.len() + 32)
                .sum::<usize>();
        let media = prompt.media.as_deref().map_or(0, |m| m.json_len() + 64);
        let mut out = Vec::with_capacity(self.fixed + text + media + 64);
        for p in &self.parts {
            // Writing JSON into a Vec cannot fail.
            let _ = match p {
                BodyPart::Json(s) => {
                    out.extend_from_slice(s.as_bytes());
                    Ok(())
                }
                BodyPart::Prompt => serde_json::to_writer(&mut out, &prompt.text),
                BodyPart::Messages => match prompt.media.as_deref() {
                    Some(m) => write_messages_with_media(&mut out, prompt, m),
                    None => serde_json::to_writer(
                        &mut out,
                        &Messages {
                            prompt,
                            system: true,
                        },
                    ),
                },
                BodyPart::AnthropicMessages => serde_json::to_writer(
                    &mut out,
                    &Messages {
                        prompt,
                        system: false,
                    },
                ),
                BodyPart::System => match system_text(prompt) {
                    Some(text) => {
                        out.extend_from_slice(b"\"system\":");
                        let r = serde_json::to_writer(&mut out, &text);
                        out.push(b',');
                        r
                    }
                    None => Ok(()),
                },
                BodyPart::MaxTokens => serde_json::to_writer(&mut out, &prompt.output_tokens),
            };
        }
        out
    }
}

/// A prompt's messages whose last user message carries media: its content
/// is a list of parts, the media's leading parts (a dataset row's images),
/// the text, then the other parts, each part's JSON copied as it was laid
/// out before the send time (no JSON is built here). Keys sorted as
/// everywhere in a body.
fn write_messages_with_media(
    out: &mut Vec<u8>,
    prompt: &Prompt,
    media: &infer_bench_workload::Media,
) -> serde_json::Result<()> {
    out.push(b'[');
    for m in &prompt.history {
        serde_json::to_writer(
            &mut *out,
            &WireMessage {
                content: &m.content,
                role: m.role,
            },
        )?;
        out.push(b',');
    }
    out.extend_from_slice(b"{\"content\":[");
    let (before, after) = media.parts.split_at(media.leading.min(media.parts.len()));
    for p in before {
        p.write_to(out);
        out.push(b',');
    }
    out.extend_from_slice(b"{\"text\":");
    serde_json::to_writer(&mut *out, &prompt.text)?;
    out.extend_from_slice(b",\"type\":\"text\"}");
    for p in after {
        out.push(b',');
        p.write_to(out);
    }
    out.extend_from_slice(b"],\"role\":\"user\"}]");
    Ok(())
}

/// The first useful line of an error body (OpenAI-style `error.message`).
pub fn error_body_message(b: &[u8]) -> String {
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

/// The classes an OpenAI-compatible request can fail with.
const FAILURES: &[ErrorClass] = ErrorClass::ALL;

/// `POST {base_url}/chat/completions`: a prompt's history and text as
/// messages.
#[derive(Debug, Clone)]
pub struct Chat {
    body: BodyTemplate,
    stream: bool,
}

/// `POST {base_url}/completions`: a prompt's text as `prompt`.
#[derive(Debug, Clone)]
pub struct Completions {
    body: BodyTemplate,
    stream: bool,
}

impl Chat {
    pub fn new(workload: &infer_bench_spec::Workload, model: &str, dialect: Dialect) -> Chat {
        Chat {
            body: BodyTemplate::new(Api::Chat, workload, model, dialect),
            stream: workload.stream,
        }
    }
}

impl Completions {
    pub fn new(
        workload: &infer_bench_spec::Workload,
        model: &str,
        dialect: Dialect,
    ) -> Completions {
        Completions {
            body: BodyTemplate::new(Api::Completions, workload, model, dialect),
            stream: workload.stream,
        }
    }
}

impl Protocol for Chat {
    fn name(&self) -> &'static str {
        "chat"
    }

    fn path(&self) -> &str {
        "chat/completions"
    }

    fn body(&self, prompt: &Prompt) -> Vec<u8> {
        self.body.write(prompt)
    }

    fn streams(&self) -> bool {
        self.stream
    }

    fn read_event(
        &self,
        data: &[u8],
        reply: Option<&mut crate::structured::Reply>,
        id: Option<&mut Option<String>>,
    ) -> Result<EventInfo, Unreadable> {
        interpret_into(data, reply, id)
    }

    fn failure_classes(&self) -> &'static [ErrorClass] {
        FAILURES
    }
}

impl Protocol for Completions {
    fn name(&self) -> &'static str {
        "completions"
    }

    fn path(&self) -> &str {
        "completions"
    }

    fn body(&self, prompt: &Prompt) -> Vec<u8> {
        self.body.write(prompt)
    }

    fn streams(&self) -> bool {
        self.stream
    }

    fn read_event(
        &self,
        data: &[u8],
        reply: Option<&mut crate::structured::Reply>,
        id: Option<&mut Option<String>>,
    ) -> Result<EventInfo, Unreadable> {
        interpret_into(data, reply, id)
    }

    fn failure_classes(&self) -> &'static [ErrorClass] {
        FAILURES
    }
}

/// Asks the server what it is: the first `owned_by` in
/// `GET {base_url}/models` that names a dialect. `None` when it does not
/// answer, or does not say. The connection stays in the client's pool.
pub async fn identify(client: &HttpBackend) -> Option<Dialect> {
    let body = client.get("models", WARM_BODY_BYTES).await?;
    let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
    v.get("data")?
        .as_array()?
        .iter()
        .filter_map(|m| m.get("owned_by")?.as_str())
        .find_map(Dialect::from_owned_by)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::SseParser;

    fn events(file: &str) -> Vec<EventInfo> {
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
        let mut reply = crate::structured::Reply::default();
        interpret(
            br#"{"choices":[{"delta":{"content":"hi \u00e9"}}]}"#,
            Some(&mut reply),
        )
        .unwrap();
        assert_eq!(reply.text, "hi é");
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
            _ => unreachable!("the map wrote chat and completions"),
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
                media: None,
                items: Vec::new(),
                item_tokens: 0,
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
                media: None,
                items: Vec::new(),
                item_tokens: 0,
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
                let t = BodyTemplate::new(w.api, w, model, Dialect::Vllm);
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
            media: None,
            items: Vec::new(),
            item_tokens: 0,
        };
        let body = |d: Dialect| -> serde_json::Map<String, serde_json::Value> {
            let t = BodyTemplate::new(w.api, &w, "m", d);
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

    #[test]
    fn responses_and_messages_bodies() {
        use infer_bench_workload::Message;
        let prompt = Prompt {
            history: vec![
                Message {
                    role: Role::System,
                    content: "be \"brief\"".into(),
                },
                Message {
                    role: Role::User,
                    content: "hi".into(),
                },
                Message {
                    role: Role::Assistant,
                    content: "hello".into(),
                },
            ],
            text: "and now?".into(),
            input_tokens: 9,
            output_tokens: 5,
            part: 0,
            media: None,
            items: Vec::new(),
            item_tokens: 0,
        };
        let keys = "sampling = { temperature = 0.5, top_k = 4, seed = 7 }";
        let w = workload(&format!("api = \"responses\"\n{keys}"));
        assert_eq!(w.max_tokens_field, "max_output_tokens");
        let body = BodyTemplate::new(w.api, &w, "m", Dialect::Openai).write(&prompt);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model": "m", "input": [
                {"role": "system", "content": "be \"brief\""},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "and now?"}],
                "max_output_tokens": 5, "store": false, "stream": true,
                "temperature": 0.5, "seed": 7})
        );
        let w = workload(&format!("api = \"messages\"\n{keys}"));
        for (dialect, seed) in [(Dialect::Openai, None), (Dialect::LlamaCpp, Some(7))] {
            let body = BodyTemplate::new(w.api, &w, "m", dialect).write(&prompt);
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let mut want = serde_json::json!({"model": "m", "system": "be \"brief\"", "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hello"},
                    {"role": "user", "content": "and now?"}],
                    "max_tokens": 5, "stream": true, "temperature": 0.5, "top_k": 4});
            if let Some(seed) = seed {
                want["seed"] = seed.into();
            }
            assert_eq!(v, want, "{dialect:?}");
        }
        // Without a system message there is no `system` key.
        let plain = Prompt {
            history: Vec::new(),
            ..prompt
        };
        let body = BodyTemplate::new(w.api, &w, "m", Dialect::Openai).write(&plain);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(v.get("system").is_none());
        assert_eq!(v["messages"].as_array().unwrap().len(), 1);
    }
}
