//! OpenAI's Responses API (`POST {base_url}/responses`), as OpenAI, vLLM,
//! SGLang and llama.cpp serve it: the prompt's messages as `input`, the cap
//! as `max_output_tokens`, and a stream of typed events
//! (`response.output_text.delta`, `response.reasoning_text.delta` or
//! `response.reasoning_summary_text.delta`, `response.completed` with the
//! usage). Its events feed the same TTFT, ITL, TPOT and reasoning metrics as
//! chat's, so a spec can switch API and change nothing else.
//!
//! A stream ends with `response.completed` (or `response.incomplete`, when
//! `max_output_tokens` cut the answer: a finished answer all the same);
//! there is no `[DONE]`. `response.failed` and `error` events fail the
//! request with the server's message.

use std::borrow::Cow;

use serde::Deserialize;

use crate::openai::{BodyTemplate, error_text, take_id, unreadable};
use crate::record::ErrorClass;
use crate::{EventInfo, Protocol, Unreadable, Usage};
use infer_bench_spec::Dialect;
use infer_bench_spec::raw::Api;
use infer_bench_workload::Prompt;

/// `POST {base_url}/responses`.
#[derive(Debug, Clone)]
pub struct Responses {
    body: BodyTemplate,
    stream: bool,
}

impl Responses {
    pub fn new(workload: &infer_bench_spec::Workload, model: &str, dialect: Dialect) -> Responses {
        Responses {
            body: BodyTemplate::new(Api::Responses, workload, model, dialect),
            stream: workload.stream,
        }
    }
}

/// One streamed event, or a whole response (`object: "response"`).
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    delta: Option<Cow<'a, str>>,
    #[serde(default)]
    response: Option<Whole<'a>>,
    /// An `error` event's message (and OpenAI's error bodies' `error`).
    #[serde(borrow, default)]
    message: Option<Cow<'a, str>>,
    #[serde(default)]
    error: Option<serde_json::Value>,
    /// The server's own timings (llama.cpp, on `response.completed`).
    #[serde(default)]
    timings: Option<crate::record::ServerTiming>,
    /// Which output item an event is of (a function call's arguments).
    #[serde(default)]
    output_index: Option<u32>,
    /// `response.output_item.added`'s item (a function call's name).
    #[serde(borrow, default)]
    item: Option<Item<'a>>,
}

/// A response object: in `response.*` events, or as a whole answer.
#[derive(Deserialize)]
struct Whole<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    status: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<UsageWire>,
    #[serde(default)]
    error: Option<serde_json::Value>,
    #[serde(borrow, default)]
    output: Option<Vec<Item<'a>>>,
}

/// An output item of a whole response.
#[derive(Deserialize)]
struct Item<'a> {
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
    /// A message's parts (`output_text`, `refusal`), or a reasoning item's
    /// text (`reasoning_text`).
    #[serde(borrow, default)]
    content: Option<Vec<Part<'a>>>,
    /// A reasoning item's summary (`summary_text`).
    #[serde(borrow, default)]
    summary: Option<Vec<Part<'a>>>,
    /// A function call's arguments.
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
    /// A function call's name.
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    refusal: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct UsageWire {
    #[serde(default)]
    input_tokens: Option<u32>,
    #[serde(default)]
    output_tokens: Option<u32>,
    #[serde(default)]
    output_tokens_details: Option<Details>,
}

#[derive(Deserialize)]
struct Details {
    #[serde(default)]
    reasoning_tokens: Option<u32>,
}

impl From<UsageWire> for Usage {
    fn from(u: UsageWire) -> Usage {
        Usage {
            prompt_tokens: u.input_tokens,
            completion_tokens: u.output_tokens,
            reasoning_tokens: u.output_tokens_details.and_then(|d| d.reasoning_tokens),
        }
    }
}

/// Text that is output: `bytes` more of it, reasoning or answer.
fn output(
    info: &mut EventInfo,
    text: &str,
    reasoning: bool,
    reply: Option<&mut crate::structured::Reply>,
) {
    if text.is_empty() {
        return;
    }
    info.output = true;
    info.reasoning = reasoning;
    info.text_bytes += text.len() as u32;
    if let (Some(r), false) = (reply, reasoning) {
        r.push_str(text);
    }
}

/// The sentence of a failed response: its `error.message`, else its status.
fn failure(w: &Whole<'_>) -> String {
    match &w.error {
        Some(e) if !e.is_null() => error_text(e),
        _ => format!(
            "the response ended with status \"{}\"",
            w.status.as_deref().unwrap_or("failed")
        ),
    }
}

/// Reads one streamed event.
pub fn read_event(
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
    let ev: Event = serde_json::from_slice(data).map_err(|e| unreadable(e, data))?;
    let mut info = EventInfo::default();
    let Some(kind) = ev.kind.as_deref() else {
        return Err(Unreadable(
            "an event without a `type` (expected the Responses API's typed events)".into(),
        ));
    };
    if let Some(w) = &ev.response {
        take_id(id, w.id.as_deref());
    }
    match kind {
        "response.output_text.delta" | "response.refusal.delta" => {
            output(&mut info, ev.delta.as_deref().unwrap_or(""), false, reply);
        }
        "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
            output(&mut info, ev.delta.as_deref().unwrap_or(""), true, reply);
        }
        "response.function_call_arguments.delta" => {
            let delta = ev.delta.as_deref().unwrap_or("");
            if let Some(r) = reply {
                r.tool_call(ev.output_index, None, Some(delta));
            }
            output(&mut info, delta, false, None);
        }
        "response.output_item.added" => {
            let call = ev
                .item
                .as_ref()
                .filter(|i| i.kind.as_deref() == Some("function_call"));
            if let (Some(r), Some(item)) = (reply, call) {
                r.tool_call(
                    ev.output_index,
                    item.name.as_deref(),
                    item.arguments.as_deref(),
                );
            }
        }
        "response.completed" | "response.incomplete" => {
            info.finished = true;
            info.done = true;
            info.usage = ev.response.and_then(|w| w.usage).map(Usage::from);
            info.server_timing = ev.timings;
        }
        "response.failed" => {
            info.error = Some(
                ev.response
                    .as_ref()
                    .map(failure)
                    .unwrap_or_else(|| "the response failed".into()),
            );
        }
        "error" => {
            info.error = Some(match (&ev.message, &ev.error) {
                (Some(m), _) => m.to_string(),
                (None, Some(e)) => error_text(e),
                (None, None) => "error".into(),
            });
        }
        // Lifecycle and bookkeeping events (created, in_progress,
        // output_item.added, content_part.done ...) carry no output.
        _ => {}
    }
    Ok(info)
}

/// Reads a whole (non-streamed) response object.
pub fn read_body(
    body: &[u8],
    reply: Option<&mut crate::structured::Reply>,
    id: Option<&mut Option<String>>,
) -> Result<EventInfo, Unreadable> {
    let w: Whole = serde_json::from_slice(body).map_err(|e| unreadable(e, body))?;
    take_id(id, w.id.as_deref());
    let mut info = EventInfo::default();
    match w.status.as_deref() {
        Some("failed" | "cancelled") => {
            info.error = Some(failure(&w));
            return Ok(info);
        }
        _ if w.error.as_ref().is_some_and(|e| !e.is_null()) => {
            info.error = Some(failure(&w));
            return Ok(info);
        }
        _ => {}
    }
    let Some(items) = &w.output else {
        return Err(Unreadable("a response without `output`".into()));
    };
    let mut reply = reply;
    let (mut thought, mut other) = (false, false);
    for (k, item) in items.iter().enumerate() {
        if item.kind.as_deref() == Some("function_call") {
            if let Some(r) = reply.as_deref_mut() {
                r.tool_call(
                    Some(k as u32),
                    item.name.as_deref(),
                    item.arguments.as_deref(),
                );
            }
        }
        let reasoning = item.kind.as_deref() == Some("reasoning");
        let parts = item
            .content
            .iter()
            .flatten()
            .chain(item.summary.iter().flatten());
        for p in parts {
            for text in [p.text.as_deref(), p.refusal.as_deref()]
                .into_iter()
                .flatten()
            {
                if text.is_empty() {
                    continue;
                }
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
            }
        }
        if let Some(args) = item.arguments.as_deref().filter(|a| !a.is_empty()) {
            info.output = true;
            other = true;
            info.text_bytes += args.len() as u32;
        }
    }
    info.reasoning = thought && !other;
    info.finished = true;
    info.usage = w.usage.map(Usage::from);
    Ok(info)
}

impl Protocol for Responses {
    fn name(&self) -> &'static str {
        "responses"
    }

    fn path(&self) -> &str {
        "responses"
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

    /// The events llama.cpp's server (b11434) and OpenAI send, in order.
    #[test]
    fn reads_a_stream_as_servers_send_it() {
        let mut id = None;
        let created = r#"{"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}"#;
        let info = read_event(created.as_bytes(), None, Some(&mut id)).unwrap();
        assert!(!info.output && !info.finished);
        assert_eq!(id.as_deref(), Some("resp_1"));
        assert!(
            !read(
                r#"{"type":"response.output_item.added","item":{"type":"message","content":[]}}"#
            )
            .output
        );
        assert!(!read(r#"{"type":"response.content_part.added","item_id":"m","part":{"type":"output_text","text":""}}"#).output);
        let thinking =
            read(r#"{"type":"response.reasoning_text.delta","delta":"hmm","item_id":"rs"}"#);
        assert!(thinking.output && thinking.reasoning);
        let summary =
            read(r#"{"type":"response.reasoning_summary_text.delta","delta":"so","item_id":"rs"}"#);
        assert!(summary.output && summary.reasoning);
        let mut reply = crate::structured::Reply::default();
        let text = read_event(
            br#"{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"Hi \"you\""}"#,
            Some(&mut reply),
            None,
        )
        .unwrap();
        assert!(text.output && !text.reasoning);
        assert_eq!(text.text_bytes, 8);
        assert_eq!(reply.text, "Hi \"you\"");
        assert!(!read(r#"{"type":"response.output_text.delta","delta":""}"#).output);
        assert!(
            !read(r#"{"type":"response.output_text.done","text":"Hi"}"#).output,
            "a done event repeats the text"
        );
        let done = read(
            r#"{"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[],"usage":{"input_tokens":12,"output_tokens":9,"total_tokens":21,"output_tokens_details":{"reasoning_tokens":4},"input_tokens_details":{"cached_tokens":0}}}}"#,
        );
        assert!(done.finished && done.done && !done.output);
        let u = done.usage.unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.reasoning_tokens),
            (Some(12), Some(9), Some(4))
        );
        let cut = read(
            r#"{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":3,"output_tokens":5}}}"#,
        );
        assert!(cut.finished && cut.done);
        assert_eq!(cut.usage.unwrap().completion_tokens, Some(5));
    }

    #[test]
    fn failures_carry_the_servers_message() {
        let failed = read(
            r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"out of memory"}}}"#,
        );
        assert_eq!(failed.error.as_deref(), Some("out of memory"));
        let error =
            read(r#"{"type":"error","code":"rate_limit","message":"slow down","param":null}"#);
        assert_eq!(error.error.as_deref(), Some("slow down"));
        assert!(
            read_event(br#"{"choices":[]}"#, None, None).is_err(),
            "a chat chunk is not a Responses event"
        );
        assert!(
            read_event(
                br#"{"type":"response.output_text.delta","delta":"cut"#,
                None,
                None
            )
            .is_err()
        );
    }

    #[test]
    fn reads_a_whole_response() {
        let body = br#"{"id":"resp_9","object":"response","status":"incomplete","output":[
            {"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"think"}]},
            {"type":"message","role":"assistant","content":[{"type":"output_text","text":"answer","annotations":[]}]}],
            "usage":{"input_tokens":7,"output_tokens":3}}"#;
        let mut reply = crate::structured::Reply::default();
        let mut id = None;
        let info = read_body(body, Some(&mut reply), Some(&mut id)).unwrap();
        assert!(info.output && !info.reasoning && info.finished);
        assert_eq!(info.text_bytes, 11);
        assert_eq!(reply.text, "answer");
        assert_eq!(id.as_deref(), Some("resp_9"));
        assert_eq!(info.usage.unwrap().prompt_tokens, Some(7));
        let failed = read_body(
            br#"{"status":"failed","error":{"message":"bad"},"output":[]}"#,
            None,
            None,
        )
        .unwrap();
        assert_eq!(failed.error.as_deref(), Some("bad"));
        assert!(read_body(br#"{"status":"completed"}"#, None, None).is_err());
    }
}
