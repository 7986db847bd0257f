//! Anthropic's Messages API (`POST {base_url}/messages`), as Anthropic,
//! llama.cpp and the gateways in front of vLLM and SGLang serve it: system
//! messages in a top-level `system`, the rest as `messages`, the key as
//! `x-api-key` with an `anthropic-version`, and a stream of typed events
//! (`message_start` with the input usage, `content_block_delta` with
//! `text_delta`, `thinking_delta` or `input_json_delta`, `message_delta`
//! with the stop reason and output usage, `message_stop`). Thinking is
//! reasoning; the metrics are chat's.
//!
//! The input tokens are `input_tokens` plus the cache's
//! (`cache_read_input_tokens`, `cache_creation_input_tokens`), which
//! Anthropic counts apart: the prompt is all of them.

use std::borrow::Cow;

use serde::Deserialize;

use crate::openai::{BodyTemplate, error_text, take_id, unreadable};
use crate::record::ErrorClass;
use crate::{Auth, EventInfo, Protocol, Unreadable, Usage};
use infer_bench_spec::Dialect;
use infer_bench_spec::raw::Api;
use infer_bench_workload::Prompt;

/// The API version sent with every request (`anthropic-version`).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `POST {base_url}/messages`.
#[derive(Debug, Clone)]
pub struct Messages {
    body: BodyTemplate,
    stream: bool,
}

impl Messages {
    pub fn new(workload: &infer_bench_spec::Workload, model: &str, dialect: Dialect) -> Messages {
        Messages {
            body: BodyTemplate::new(Api::Messages, workload, model, dialect),
            stream: workload.stream,
        }
    }
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<Message<'a>>,
    #[serde(borrow, default)]
    content_block: Option<Block<'a>>,
    #[serde(borrow, default)]
    delta: Option<Block<'a>>,
    #[serde(default)]
    usage: Option<UsageWire>,
    #[serde(default)]
    error: Option<serde_json::Value>,
    /// The content block an event is of.
    #[serde(default)]
    index: Option<u32>,
}

/// A message: in `message_start`, or as a whole answer.
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<Vec<Block<'a>>>,
    #[serde(borrow, default)]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<UsageWire>,
}

/// A content block, or a delta of one.
#[derive(Deserialize)]
struct Block<'a> {
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    partial_json: Option<Cow<'a, str>>,
    /// A `tool_use` block's input (whole answers).
    #[serde(default)]
    input: Option<serde_json::Value>,
    #[serde(borrow, default)]
    stop_reason: Option<Cow<'a, str>>,
    /// A `tool_use` block's tool.
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct UsageWire {
    #[serde(default)]
    input_tokens: Option<u32>,
    #[serde(default)]
    cache_read_input_tokens: Option<u32>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u32>,
    #[serde(default)]
    output_tokens: Option<u32>,
}

impl UsageWire {
    /// The prompt's tokens: uncached, read from and written to the cache.
    fn prompt(&self) -> Option<u32> {
        self.input_tokens.map(|n| {
            n.saturating_add(self.cache_read_input_tokens.unwrap_or(0))
                .saturating_add(self.cache_creation_input_tokens.unwrap_or(0))
        })
    }
}

/// What a block (or delta) carries: (bytes, reasoning), if it is output.
fn block_output<'b>(b: &'b Block<'_>) -> Option<(&'b str, bool)> {
    if let Some(t) = b.thinking.as_deref().filter(|t| !t.is_empty()) {
        return Some((t, true));
    }
    for s in [b.text.as_deref(), b.partial_json.as_deref()]
        .into_iter()
        .flatten()
    {
        if !s.is_empty() {
            return Some((s, false));
        }
    }
    None
}

fn error_of(ev: &Event<'_>) -> String {
    ev.error
        .as_ref()
        .map(error_text)
        .unwrap_or_else(|| "error".into())
}

/// Reads one streamed event.
pub fn read_event(
    data: &[u8],
    reply: Option<&mut crate::structured::Reply>,
    id: Option<&mut Option<String>>,
) -> Result<EventInfo, Unreadable> {
    let ev: Event = serde_json::from_slice(data).map_err(|e| unreadable(e, data))?;
    let mut info = EventInfo::default();
    let Some(kind) = ev.kind.as_deref() else {
        return Err(Unreadable(
            "an event without a `type` (expected the Messages API's typed events)".into(),
        ));
    };
    match kind {
        "message_start" => {
            if let Some(m) = &ev.message {
                take_id(id, m.id.as_deref());
                info.usage = m.usage.as_ref().map(|u| Usage {
                    prompt_tokens: u.prompt(),
                    completion_tokens: None,
                    reasoning_tokens: None,
                });
            }
        }
        "content_block_start" | "content_block_delta" => {
            let block = ev.content_block.as_ref().or(ev.delta.as_ref());
            let mut reply = reply;
            if let (Some(r), Some(b)) = (reply.as_deref_mut(), block) {
                if b.kind.as_deref() == Some("tool_use") {
                    r.tool_call(ev.index, b.name.as_deref(), None);
                } else if let Some(j) = &b.partial_json {
                    r.tool_call(ev.index, None, Some(j));
                }
            }
            if let Some((text, reasoning)) = block.and_then(block_output) {
                info.output = true;
                info.reasoning = reasoning;
                info.text_bytes = text.len() as u32;
                let is_text = block.is_some_and(|b| b.text.is_some());
                if let (Some(r), true) = (reply, is_text && !reasoning) {
                    r.push_str(text);
                }
            }
        }
        "message_delta" => {
            if ev.delta.as_ref().is_some_and(|d| d.stop_reason.is_some()) {
                info.finished = true;
            }
            info.usage = ev.usage.as_ref().map(|u| Usage {
                prompt_tokens: u.prompt(),
                completion_tokens: u.output_tokens,
                reasoning_tokens: None,
            });
        }
        "message_stop" => info.done = true,
        "error" => info.error = Some(error_of(&ev)),
        // ping, content_block_stop, and kinds added later.
        _ => {}
    }
    Ok(info)
}

/// Reads a whole (non-streamed) message.
pub fn read_body(
    body: &[u8],
    reply: Option<&mut crate::structured::Reply>,
    id: Option<&mut Option<String>>,
) -> Result<EventInfo, Unreadable> {
    let ev: Event = serde_json::from_slice(body).map_err(|e| unreadable(e, body))?;
    let mut info = EventInfo::default();
    if ev.kind.as_deref() == Some("error") {
        info.error = Some(error_of(&ev));
        return Ok(info);
    }
    let m: Message = serde_json::from_slice(body).map_err(|e| unreadable(e, body))?;
    take_id(id, m.id.as_deref());
    let Some(blocks) = &m.content else {
        return Err(Unreadable("a message without `content`".into()));
    };
    let mut reply = reply;
    let (mut thought, mut other) = (false, false);
    for (k, b) in blocks.iter().enumerate() {
        if let (Some(r), Some("tool_use")) = (reply.as_deref_mut(), b.kind.as_deref()) {
            let input = b.input.as_ref().map(|v| v.to_string());
            r.tool_call(Some(k as u32), b.name.as_deref(), input.as_deref());
        }
        if let Some((text, reasoning)) = block_output(b) {
            info.output = true;
            info.text_bytes += text.len() as u32;
            if reasoning {
                thought = true;
            } else {
                other = true;
                if let Some(r) = reply.as_deref_mut() {
                    r.push_str(text);
                }
            }
        } else if b.kind.as_deref() == Some("tool_use") && b.input.is_some() {
            info.output = true;
            other = true;
        }
    }
    info.reasoning = thought && !other;
    info.finished = m.stop_reason.is_some();
    info.usage = m.usage.as_ref().map(|u| Usage {
        prompt_tokens: u.prompt(),
        completion_tokens: u.output_tokens,
        reasoning_tokens: None,
    });
    Ok(info)
}

impl Protocol for Messages {
    fn name(&self) -> &'static str {
        "messages"
    }

    fn path(&self) -> &str {
        "messages"
    }

    fn body(&self, prompt: &Prompt) -> Vec<u8> {
        self.body.write(prompt)
    }

    fn streams(&self) -> bool {
        self.stream
    }

    fn auth(&self) -> Auth {
        Auth::ApiKeyHeader
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        vec![("anthropic-version", ANTHROPIC_VERSION.to_string())]
    }

    fn read_event(
        &self,
        data: &[u8],
        reply: Option<&mut crate::structured::Reply>,
        id: Option<&mut Option<String>>,
    ) -> Result<EventInfo, Unreadable> {
        read_event(data, reply, id)
    }

    fn read_body(
        &self,
        body: &[u8],
        reply: Option<&mut crate::structured::Reply>,
        id: Option<&mut Option<String>>,
    ) -> Result<EventInfo, Unreadable> {
        read_body(body, reply, id)
    }

    fn failure_classes(&self) -> &'static [ErrorClass] {
        ErrorClass::ALL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(data: &str) -> EventInfo {
        read_event(data.as_bytes(), None, None).unwrap()
    }

    /// The events Anthropic and llama.cpp's server (b11434) send, in order.
    #[test]
    fn reads_a_stream_as_servers_send_it() {
        let mut id = None;
        let start = r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"cache_read_input_tokens":4,"input_tokens":8,"output_tokens":0}}}"#;
        let info = read_event(start.as_bytes(), None, Some(&mut id)).unwrap();
        assert!(!info.output);
        assert_eq!(id.as_deref(), Some("msg_1"));
        assert_eq!(
            info.usage.unwrap().prompt_tokens,
            Some(12),
            "cached tokens are prompt tokens"
        );
        assert!(!read(r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#).output);
        let thinking = read(
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
        );
        assert!(thinking.output && thinking.reasoning);
        assert!(!read(r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"}}"#).output);
        assert!(!read(r#"{"type":"content_block_stop","index":0}"#).output);
        assert!(!read(r#"{"type":"ping"}"#).output);
        let mut reply = crate::structured::Reply::default();
        let text = read_event(
            br#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello \u00e9"}}"#,
            Some(&mut reply),
            None,
        )
        .unwrap();
        assert!(text.output && !text.reasoning);
        assert_eq!(text.text_bytes, 8);
        assert_eq!(reply.text, "Hello \u{e9}");
        let tool = read(
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
        );
        assert!(tool.output && !tool.reasoning);
        let end = read(
            r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":15}}"#,
        );
        assert!(end.finished && !end.done);
        assert_eq!(end.usage.unwrap().completion_tokens, Some(15));
        assert!(read(r#"{"type":"message_stop"}"#).done);
    }

    #[test]
    fn errors_and_junk() {
        let e =
            read(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#);
        assert_eq!(e.error.as_deref(), Some("Overloaded"));
        assert!(read_event(b"[DONE]", None, None).is_err());
        assert!(read_event(br#"{"choices":[]}"#, None, None).is_err());
    }

    #[test]
    fn reads_a_whole_message() {
        let body = br#"{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"answer"}],"stop_reason":"max_tokens","usage":{"input_tokens":5,"output_tokens":2}}"#;
        let mut reply = crate::structured::Reply::default();
        let info = read_body(body, Some(&mut reply), None).unwrap();
        assert!(info.output && info.finished && !info.reasoning);
        assert_eq!(info.text_bytes, 7);
        assert_eq!(reply.text, "answer");
        assert_eq!(info.usage.unwrap().completion_tokens, Some(2));
        let err = read_body(
            br#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#,
            None,
            None,
        )
        .unwrap();
        assert_eq!(err.error.as_deref(), Some("bad"));
    }
}
