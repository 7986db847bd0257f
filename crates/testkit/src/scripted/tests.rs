//! Tests of the scripted server: bytes on the wire for every framing option
//! and fault, the recorded truth against a client's own observations, and a
//! concurrency smoke test.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::*;
use crate::wire::{Wire, find, request};

/// From `completions-stream.sse` (llama-server): two content events, the
/// final event with usage (its `timings` object dropped), `[DONE]`.
const LLAMA_COMPLETIONS: &str = r#"data: {"choices":[{"text":" Classic","index":0,"logprobs":null,"finish_reason":null}],"created":1796218489,"model":"tiny","system_fingerprint":"b0-unknown","object":"text_completion","id":"chatcmpl-KU56aUmXKBqthGNSdHMHPFiYRXpE3jzR"}

data: {"choices":[{"text":"two","index":0,"logprobs":null,"finish_reason":null}],"created":1796218489,"model":"tiny","system_fingerprint":"b0-unknown","object":"text_completion","id":"chatcmpl-KU56aUmXKBqthGNSdHMHPFiYRXpE3jzR"}

data: {"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"created":1796218489,"model":"tiny","system_fingerprint":"b0-unknown","object":"text_completion","usage":{"completion_tokens":12,"prompt_tokens":12,"total_tokens":24,"prompt_tokens_details":{"cached_tokens":0}},"id":"chatcmpl-KU56aUmXKBqthGNSdHMHPFiYRXpE3jzR"}

data: [DONE]

"#;

/// From `chat-stream.sse` (llama-server): role, two content events, finish,
/// usage-only event (its `timings` dropped), `[DONE]`.
const LLAMA_CHAT: &str = r#"data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1796218489,"id":"chatcmpl-577oUdJFBjPCt8YnbioJGRwDB5hb9Edd","model":"tiny","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}

data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"ség"}}],"created":1796218489,"id":"chatcmpl-577oUdJFBjPCt8YnbioJGRwDB5hb9Edd","model":"tiny","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}

data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":" дей"}}],"created":1796218489,"id":"chatcmpl-577oUdJFBjPCt8YnbioJGRwDB5hb9Edd","model":"tiny","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}

data: {"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1796218489,"id":"chatcmpl-577oUdJFBjPCt8YnbioJGRwDB5hb9Edd","model":"tiny","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}

data: {"choices":[],"created":1796218489,"id":"chatcmpl-577oUdJFBjPCt8YnbioJGRwDB5hb9Edd","model":"tiny","system_fingerprint":"b0-unknown","object":"chat.completion.chunk","usage":{"completion_tokens":12,"prompt_tokens":22,"total_tokens":34,"prompt_tokens_details":{"cached_tokens":0}}}

data: [DONE]

"#;

/// From `bad-request.http` (llama-server): the body of a 400.
const LLAMA_BAD_REQUEST: &str = r#"{"error":{"code":400,"message":"[json.exception.parse_error.101] parse error at line 1, column 26: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal","type":"invalid_request_error"}}"#;

async fn start(script: Script) -> ScriptedServer {
    ScriptedServer::start(script).await.expect("start")
}

async fn post(server: &ScriptedServer, path: &str, body: &Value) -> Wire {
    request(server.addr(), "POST", path, &body.to_string()).await
}

fn completions(max_tokens: u32, stream: bool, include_usage: bool) -> Value {
    json!({
        "model": "m",
        "prompt": "one two three",
        "max_tokens": max_tokens,
        "stream": stream,
        "stream_options": {"include_usage": include_usage},
    })
}

fn chat(max_tokens: u32, stream: bool, include_usage: bool) -> Value {
    json!({
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "one two three four"}]},
        ],
        "max_completion_tokens": max_tokens,
        "stream": stream,
        "stream_options": {"include_usage": include_usage},
    })
}

/// An SSE body's items: `data:` payloads and comments, in order.
#[derive(Debug, Clone, PartialEq)]
enum Sse {
    Data(String),
    Comment(String),
}

fn sse(body: &str) -> Vec<Sse> {
    let body = body.replace("\r\n", "\n");
    assert!(
        body.is_empty() || body.ends_with("\n\n"),
        "unterminated: {body:?}"
    );
    body.split("\n\n")
        .filter(|block| !block.is_empty())
        .flat_map(|block| block.lines().map(str::to_owned).collect::<Vec<_>>())
        .map(|line| {
            if let Some(data) = line.strip_prefix("data: ") {
                Sse::Data(data.to_owned())
            } else if let Some(comment) = line.strip_prefix(':') {
                Sse::Comment(comment.trim().to_owned())
            } else {
                panic!("not an SSE line: {line:?}")
            }
        })
        .collect()
}

/// The `data:` payloads.
fn data(body: &str) -> Vec<String> {
    sse(body)
        .into_iter()
        .filter_map(|item| match item {
            Sse::Data(d) => Some(d),
            Sse::Comment(_) => None,
        })
        .collect()
}

/// The JSON events (everything but `[DONE]`).
fn events(body: &str) -> Vec<Value> {
    data(body)
        .iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
        .collect()
}

/// What an event is, by shape.
fn kind(v: &Value) -> &'static str {
    let choices = v["choices"].as_array().expect("choices");
    let Some(choice) = choices.first() else {
        assert!(v["usage"].is_object());
        return "usage";
    };
    if !choice["finish_reason"].is_null() {
        return if v.get("usage").is_some() {
            "finish+usage"
        } else {
            "finish"
        };
    }
    if choice["delta"].get("role").is_some() {
        return "role";
    }
    if choice["delta"].get("reasoning_content").is_some() {
        return "reasoning";
    }
    "content"
}

/// Kinds with runs of content collapsed, `[DONE]` last if present.
fn shape(body: &str) -> Vec<&'static str> {
    let mut kinds: Vec<&'static str> = events(body).iter().map(kind).collect();
    kinds.dedup();
    if data(body).last().map(String::as_str) == Some("[DONE]") {
        kinds.push("done");
    }
    kinds
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

/// The text generated, reasoning included.
fn text_of(body: &str) -> String {
    events(body)
        .iter()
        .filter_map(|e| {
            let c = e["choices"].get(0)?;
            c["text"]
                .as_str()
                .or_else(|| c["delta"]["content"].as_str())
                .or_else(|| c["delta"]["reasoning_content"].as_str())
                .map(str::to_owned)
        })
        .collect()
}

fn content_events(body: &str) -> usize {
    events(body)
        .iter()
        .filter(|e| matches!(kind(e), "content" | "reasoning"))
        .count()
}

/// Our events, kind by kind, carry the keys llama-server's do (plus
/// OpenAI's `logprobs` on chat choices) and nothing beyond them.
fn assert_same_shape(ours: &str, theirs: &str) {
    assert_eq!(shape(ours), shape(theirs));
    let theirs = events(theirs);
    for e in events(ours) {
        let t = theirs
            .iter()
            .find(|t| kind(t) == kind(&e))
            .expect("same kind in the fixture");
        assert!(keys(&e).is_subset(&keys(t)), "{e} vs {t}");
        assert_eq!(e["object"], t["object"]);
        if let (Some(c), Some(tc)) = (e["choices"].get(0), t["choices"].get(0)) {
            let mut allowed = keys(tc);
            allowed.insert("logprobs".into());
            assert!(keys(tc).is_subset(&keys(c)), "{c} lacks keys of {tc}");
            assert!(keys(c).is_subset(&allowed), "{c} has keys beyond {tc}");
            assert_eq!(keys(&c["delta"]), keys(&tc["delta"]), "{c} vs {tc}");
            assert_eq!(c["finish_reason"], tc["finish_reason"]);
        }
        if let Some(usage) = e.get("usage") {
            let theirs = keys(&t["usage"]);
            assert!(keys(usage).is_subset(&theirs));
            for k in ["prompt_tokens", "completion_tokens", "total_tokens"] {
                assert!(usage[k].is_u64(), "{usage}");
            }
        }
    }
}

async fn only_record(server: &ScriptedServer) -> ServedRequest {
    server.wait_idle().await;
    let mut records = server.records();
    assert_eq!(records.len(), 1, "{records:?}");
    records.remove(0)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// ---------------------------------------------------------------------------
// Framing.

#[tokio::test]
async fn completions_stream_has_llama_server_shape() {
    let server = start(Script::default()).await;
    let wire = post(&server, COMPLETIONS, &completions(12, true, true)).await;
    assert_eq!(wire.status, 200);
    assert!(
        wire.head.contains("content-type: text/event-stream"),
        "{}",
        wire.head
    );
    assert!(wire.head.contains("transfer-encoding: chunked"));
    assert!(wire.head.contains("x-accel-buffering: no"));
    assert!(wire.complete);
    let body = wire.body_str();
    assert_same_shape(&body, LLAMA_COMPLETIONS);
    assert_eq!(shape(&body), ["content", "finish+usage", "done"]);
    assert_eq!(content_events(&body), 12);
    assert_eq!(text_of(&body), token_text_raw(1, 0, 12));
    let last = events(&body).pop().unwrap();
    assert_eq!(
        last["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 12, "total_tokens": 15})
    );
    assert_eq!(last["model"], "m");
    // One write per event.
    assert_eq!(wire.frames.len(), 12 + 2);
    let record = only_record(&server).await;
    assert_eq!(record.chunks.len(), 12);
    assert_eq!(record.output_tokens(), 12);
    assert_eq!(record.prompt_tokens, 3);
    assert_eq!(
        (record.status, record.fault, record.client_gone),
        (200, Fault::None, false)
    );
    assert!(record.finished.unwrap() >= record.chunks[11].at);
}

#[tokio::test]
async fn chat_stream_has_llama_server_shape() {
    let server = start(Script::default()).await;
    let wire = post(&server, CHAT, &chat(12, true, true)).await;
    assert!(wire.complete);
    let body = wire.body_str();
    assert_same_shape(&body, LLAMA_CHAT);
    assert_eq!(shape(&body), ["role", "content", "finish", "usage", "done"]);
    let evs = events(&body);
    assert_eq!(
        evs[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": ""})
    );
    let usage = evs.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 6);
    assert_eq!(usage["usage"]["completion_tokens"], 12);
    assert_eq!(usage["object"], "chat.completion.chunk");
    let record = only_record(&server).await;
    assert_eq!(record.endpoint, Endpoint::ChatCompletions);
    // The role chunk is not output: 12 content chunks, the first after TTFT.
    assert_eq!(record.chunks.len(), 12);
    assert!(record.true_ttft().unwrap() >= ms(10));
    // It went out before the TTFT wait: the first frame came long before
    // the second.
    let gap = wire.frames[1].1 - wire.frames[0].1;
    assert!(gap >= ms(8), "role chunk then {gap:?} of TTFT");
}

#[tokio::test]
async fn usage_only_when_asked_and_scripted() {
    let server = start(Script::fast()).await;
    for body in [completions(4, true, false), chat(4, true, false)] {
        let path = if body.get("prompt").is_some() {
            COMPLETIONS
        } else {
            CHAT
        };
        let wire = post(&server, path, &body).await;
        assert!(!wire.body_str().contains("usage"), "{}", wire.body_str());
    }
    let server = start(Script {
        usage: false,
        ..Script::fast()
    })
    .await;
    for (path, body) in [
        (COMPLETIONS, completions(4, true, true)),
        (CHAT, chat(4, true, true)),
        (COMPLETIONS, completions(4, false, true)),
    ] {
        let wire = post(&server, path, &body).await;
        assert_eq!(wire.status, 200);
        assert!(!wire.body_str().contains("usage"), "{}", wire.body_str());
    }
}

#[tokio::test]
async fn role_chunk_off_and_reasoning_deltas() {
    let server = start(Script {
        role_chunk: false,
        reasoning: true,
        ..Script::fast()
    })
    .await;
    let wire = post(&server, CHAT, &chat(6, true, false)).await;
    let body = wire.body_str();
    let kinds: Vec<_> = events(&body).iter().map(kind).collect();
    assert_eq!(
        kinds,
        [
            "reasoning",
            "reasoning",
            "reasoning",
            "content",
            "content",
            "content",
            "finish"
        ]
    );
    let record = only_record(&server).await;
    assert_eq!(record.chunks.len(), 6, "reasoning is output");
    // Completions have no reasoning field.
    let wire = post(&server, COMPLETIONS, &completions(6, true, false)).await;
    assert_eq!(content_events(&wire.body_str()), 6);
    assert!(!wire.body_str().contains("reasoning"));
}

#[tokio::test]
async fn multi_token_events() {
    let server = start(Script {
        tokens_per_event: 3,
        ..Script::fast()
    })
    .await;
    let wire = post(&server, COMPLETIONS, &completions(10, true, true)).await;
    let body = wire.body_str();
    assert_eq!(content_events(&body), 4);
    assert_eq!(text_of(&body), token_text_raw(1, 0, 10));
    let last = events(&body).pop().unwrap();
    assert_eq!(last["usage"]["completion_tokens"], 10);
    let record = only_record(&server).await;
    let tokens: Vec<u32> = record.chunks.iter().map(|c| c.tokens).collect();
    assert_eq!(tokens, [3, 3, 3, 1]);
    assert_eq!(record.true_gaps().len(), 3);
}

#[tokio::test]
async fn crlf_line_endings() {
    let server = start(Script {
        crlf: true,
        keepalive_comments: true,
        ..Script::fast()
    })
    .await;
    let wire = post(&server, CHAT, &chat(3, true, true)).await;
    let body = wire.body();
    for (i, b) in body.iter().enumerate() {
        if *b == b'\n' {
            assert!(i > 0 && body[i - 1] == b'\r', "bare LF at {i}");
        }
    }
    assert!(wire.body_str().ends_with("data: [DONE]\r\n\r\n"));
    assert_eq!(
        shape(&wire.body_str()),
        ["role", "content", "finish", "usage", "done"]
    );
}

#[tokio::test]
async fn keepalive_comments_between_events() {
    let server = start(Script {
        keepalive_comments: true,
        ttft: ms(20),
        itl: ms(10),
        ..Script::default()
    })
    .await;
    let wire = post(&server, COMPLETIONS, &completions(3, true, false)).await;
    let items = sse(&wire.body_str());
    let pattern: Vec<&str> = items
        .iter()
        .map(|i| match i {
            Sse::Comment(_) => "ping",
            Sse::Data(d) if d == "[DONE]" => "done",
            Sse::Data(_) => "data",
        })
        .collect();
    assert_eq!(
        pattern,
        [
            "ping", "data", "ping", "data", "ping", "data", "data", "done"
        ]
    );
    assert!(items.contains(&Sse::Comment("ping".into())));
    // The first ping arrives well before the first content event: a client
    // that stamps the first byte as TTFT is wrong by half the TTFT.
    assert_eq!(wire.frames[0].0, b": ping\n\n");
    let gap = wire.frames[1].1 - wire.frames[0].1;
    assert!(gap >= ms(5), "{gap:?}");
    let record = only_record(&server).await;
    assert_eq!(record.chunks.len(), 3);
}

#[tokio::test]
async fn split_events_misalign_writes_and_events() {
    let _turn = crate::timing::exclusive();
    let server = start(Script {
        split_events: true,
        ttft: ms(5),
        itl: ms(20),
        ..Script::default()
    })
    .await;
    let wire = post(&server, COMPLETIONS, &completions(7, true, false)).await;
    assert!(wire.complete);
    let body = wire.body_str();
    // Reassembled, it is a normal stream.
    assert_eq!(shape(&body), ["content", "finish", "done"]);
    assert_eq!(content_events(&body), 7);
    assert_eq!(text_of(&body), token_text_raw(1, 0, 7));
    // Writes: e0 | e1[..1] | e1[1..] | e2+e3 | e4[..5] | e4[5..] | e5+e6 |
    // finish | done.
    let frames: Vec<String> = wire
        .frames
        .iter()
        .map(|(f, _)| String::from_utf8(f.clone()).unwrap())
        .collect();
    assert_eq!(frames.len(), 9, "{frames:#?}");
    assert_eq!(frames[1], "d");
    assert!(frames[2].starts_with("ata: {"));
    assert_eq!(frames[3].matches("data: ").count(), 2);
    assert_eq!(frames[4], "data:");
    assert!(frames[5].starts_with(" {"));
    assert_eq!(frames[6].matches("data: ").count(), 2);
    // The first half of a split event arrives about half an ITL early
    // (10 ms), less what a busy machine delays the read of the first half
    // (its wake-up lag, measured now).
    let early = wire.frames[2].1 - wire.frames[1].1;
    let lag = tokio::task::spawn_blocking(|| crate::timing::wake_lag(200))
        .await
        .unwrap();
    assert!(early + lag >= ms(4), "{early:?} (wake-up lag {lag:?})");
    let record = only_record(&server).await;
    assert_eq!(record.chunks.len(), 7);
    // Events written together share an instant.
    assert_eq!(record.chunks[2].at, record.chunks[3].at);
    assert_eq!(record.chunks[5].at, record.chunks[6].at);
    assert_eq!(record.true_gaps()[2], Duration::ZERO);
}

#[test]
fn split_offsets_stay_inside_the_event() {
    for len in [2usize, 3, 10, 11, 200] {
        for nth in 0..8 {
            let at = split_offset(len, nth);
            assert!(at > 0 && at < len, "len {len} nth {nth} -> {at}");
        }
    }
    assert_eq!(split_offset(200, 2) % 2, 1);
}

// ---------------------------------------------------------------------------
// Faults.

fn faulty(fault: Fault) -> Script {
    Script {
        fault,
        ttft: ms(2),
        itl: ms(1),
        ..Script::default()
    }
}

#[tokio::test]
async fn http_error_faults() {
    for (fault, status, kind_) in [
        (Fault::Http500, 500, "server_error"),
        (Fault::Http429, 429, "rate_limit_error"),
    ] {
        let server = start(faulty(fault)).await;
        let wire = post(&server, COMPLETIONS, &completions(5, true, true)).await;
        assert_eq!(wire.status, status);
        assert!(wire.complete);
        assert!(wire.head.contains("content-type: application/json"));
        let v: Value = serde_json::from_slice(&wire.body()).unwrap();
        let theirs: Value = serde_json::from_str(LLAMA_BAD_REQUEST).unwrap();
        assert_eq!(keys(&v["error"]), keys(&theirs["error"]));
        assert_eq!(v["error"]["code"], status);
        assert_eq!(v["error"]["type"], kind_);
        if status == 429 {
            assert!(wire.head.contains("retry-after: 1"));
        }
        let record = only_record(&server).await;
        assert_eq!((record.status, record.fault), (status, fault));
        assert!(record.chunks.is_empty() && record.fault_at.is_some());
    }
}

#[tokio::test]
async fn refuse_closes_without_a_response() {
    let server = start(faulty(Fault::Refuse)).await;
    let wire = post(&server, COMPLETIONS, &completions(5, true, false)).await;
    assert!(
        wire.raw.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&wire.raw)
    );
    let record = only_record(&server).await;
    assert_eq!((record.status, record.fault), (0, Fault::Refuse));
}

#[tokio::test]
async fn drop_mid_stream_closes_without_terminator() {
    for (after, expect) in [(0, 0), (3, 3), (99, 5)] {
        let fault = Fault::DropMidStream {
            after_events: after,
        };
        let server = start(faulty(fault)).await;
        let wire = post(&server, COMPLETIONS, &completions(5, true, true)).await;
        assert_eq!(wire.status, 200);
        assert!(!wire.complete, "no 0-chunk");
        let body = wire.body_str();
        assert_eq!(content_events(&body), expect);
        assert!(!body.contains("[DONE]") && !body.contains("finish_reason\":\"length"));
        let record = only_record(&server).await;
        assert_eq!(record.chunks.len(), expect);
        assert_eq!(record.fault, fault);
        assert!(record.fault_at.is_some());
    }
}

#[tokio::test]
async fn malformed_event_then_the_stream_goes_on() {
    let server = start(faulty(Fault::MalformedEvent { after_events: 2 })).await;
    let wire = post(&server, CHAT, &chat(5, true, false)).await;
    assert!(wire.complete);
    let items = data(&wire.body_str());
    // role, 2 content, the bad one, 3 content, finish, DONE
    assert_eq!(items.len(), 9, "{items:#?}");
    assert!(items[3].starts_with('{'));
    assert!(
        serde_json::from_str::<Value>(&items[3]).is_err(),
        "{}",
        items[3]
    );
    for (i, item) in items.iter().enumerate() {
        if i != 3 && item != "[DONE]" {
            serde_json::from_str::<Value>(item).unwrap();
        }
    }
    let record = only_record(&server).await;
    assert_eq!(record.chunks.len(), 5);
    assert!(record.fault_at.unwrap() >= record.chunks[1].at);
    assert!(record.fault_at.unwrap() <= record.chunks[2].at);
}

#[tokio::test]
async fn stream_error_object_then_done() {
    let server = start(faulty(Fault::StreamError { after_events: 2 })).await;
    let wire = post(&server, COMPLETIONS, &completions(5, true, true)).await;
    assert_eq!(wire.status, 200);
    assert!(wire.complete);
    let items = data(&wire.body_str());
    assert_eq!(items.len(), 4, "{items:#?}");
    let error: Value = serde_json::from_str(&items[2]).unwrap();
    assert_eq!(error["error"]["code"], 500);
    assert!(error["error"]["message"].is_string() && error["error"]["type"].is_string());
    assert!(error.get("choices").is_none());
    assert_eq!(items[3], "[DONE]");
    let record = only_record(&server).await;
    assert_eq!(record.chunks.len(), 2);
}

#[tokio::test]
async fn stall_is_silence_longer_than_the_script() {
    let stall = ms(150);
    let server = start(Script {
        keepalive_comments: true,
        ..faulty(Fault::Stall {
            after_events: 2,
            for_: stall,
        })
    })
    .await;
    let wire = post(&server, COMPLETIONS, &completions(4, true, false)).await;
    assert!(wire.complete);
    assert_eq!(content_events(&wire.body_str()), 4);
    // On the wire: one silence of at least the stall, pings included.
    let longest = wire
        .frames
        .windows(2)
        .map(|w| w[1].1 - w[0].1)
        .max()
        .unwrap();
    assert!(longest >= stall, "{longest:?}");
    let record = only_record(&server).await;
    let gaps = record.true_gaps();
    assert!(gaps[1] >= stall, "{gaps:?}");
    assert!(gaps[0] < stall && gaps[2] < stall, "{gaps:?}");
}

#[tokio::test]
async fn stall_ends_early_when_the_client_leaves() {
    let server = start(faulty(Fault::Stall {
        after_events: 1,
        for_: Duration::from_secs(3600),
    }))
    .await;
    let addr = server.addr();
    let client = tokio::spawn(async move {
        let body = completions(4, true, false).to_string();
        tokio::time::timeout(ms(100), request(addr, "POST", COMPLETIONS, &body)).await
    });
    assert!(client.await.unwrap().is_err(), "the client timed out");
    tokio::time::timeout(Duration::from_secs(5), server.wait_idle())
        .await
        .expect("the stall noticed the client leaving");
    let record = server.records().remove(0);
    assert!(record.client_gone);
    assert_eq!(record.chunks.len(), 1);
}

#[tokio::test]
async fn empty_stream_is_only_done() {
    let server = start(faulty(Fault::EmptyStream)).await;
    let wire = post(&server, CHAT, &chat(5, true, true)).await;
    assert_eq!(wire.status, 200);
    assert!(wire.complete);
    assert_eq!(wire.body_str(), "data: [DONE]\n\n");
    let record = only_record(&server).await;
    assert!(record.chunks.is_empty());
    assert_eq!(record.true_ttft(), None);
}

#[tokio::test]
async fn truncated_stream_ends_without_done_or_finish() {
    let server = start(faulty(Fault::TruncatedNoDone)).await;
    let wire = post(&server, CHAT, &chat(5, true, true)).await;
    assert!(wire.complete, "the body itself ends properly");
    let body = wire.body_str();
    assert_eq!(shape(&body), ["role", "content"]);
    assert_eq!(content_events(&body), 5);
    assert!(!body.contains("[DONE]") && !body.contains("usage"));
    let record = only_record(&server).await;
    assert_eq!(record.chunks.len(), 5);
}

#[tokio::test]
async fn fault_every_picks_every_kth_request() {
    let server = start(Script {
        fault_every: 3,
        ..faulty(Fault::Http500)
    })
    .await;
    let mut statuses = Vec::new();
    for _ in 0..6 {
        statuses.push(
            post(&server, COMPLETIONS, &completions(1, false, false))
                .await
                .status,
        );
    }
    assert_eq!(statuses, [200, 200, 500, 200, 200, 500]);
    server.wait_idle().await;
    let faults: Vec<Fault> = server.take_records().iter().map(|r| r.fault).collect();
    assert_eq!(faults.len(), 6);
    assert_eq!(faults[2], Fault::Http500);
    assert_eq!(faults[0], Fault::None);
    assert!(server.records().is_empty(), "taken");
}

// ---------------------------------------------------------------------------
// Not streamed.

#[tokio::test]
async fn whole_responses_after_the_scripted_time() {
    let server = start(Script {
        ttft: ms(10),
        itl: ms(5),
        reasoning: true,
        ..Script::default()
    })
    .await;
    let wire = post(&server, COMPLETIONS, &completions(4, false, true)).await;
    assert_eq!(wire.status, 200);
    assert!(wire.head.contains("content-length:"));
    assert!(!wire.head.contains("transfer-encoding"));
    let v: Value = serde_json::from_slice(&wire.body()).unwrap();
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["choices"][0]["text"], token_text_raw(1, 0, 4));
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(v["usage"]["completion_tokens"], 4);
    assert_eq!(v["usage"]["prompt_tokens"], 3);
    let record = only_record(&server).await;
    assert_eq!(record.chunks.len(), 1);
    assert_eq!(record.chunks[0].tokens, 4);
    // ttft + itl * (4 - 1) = 25 ms
    let e2e = record.true_e2e().unwrap();
    assert!(e2e >= ms(25) && e2e < ms(60), "{e2e:?}");

    let wire = post(&server, CHAT, &chat(5, false, false)).await;
    let v: Value = serde_json::from_slice(&wire.body()).unwrap();
    assert_eq!(v["object"], "chat.completion");
    let message = &v["choices"][0]["message"];
    assert_eq!(message["role"], "assistant");
    let all = format!(
        "{}{}",
        message["reasoning_content"].as_str().unwrap(),
        message["content"].as_str().unwrap()
    );
    assert_eq!(all, token_text_raw(2, 0, 5));
    assert_eq!(v["usage"]["total_tokens"], 11);
}

#[tokio::test]
async fn whole_response_faults() {
    let script = |fault| Script {
        fault,
        ttft: ms(1),
        itl: Duration::ZERO,
        ..Script::default()
    };
    let server = start(script(Fault::DropMidStream { after_events: 1 })).await;
    let wire = post(&server, COMPLETIONS, &completions(3, false, false)).await;
    assert!(wire.raw.is_empty());

    let server = start(script(Fault::TruncatedNoDone)).await;
    let wire = post(&server, COMPLETIONS, &completions(3, false, false)).await;
    assert_eq!(wire.status, 200);
    assert!(!wire.complete);
    assert!(serde_json::from_slice::<Value>(&wire.body()).is_err());

    let server = start(script(Fault::MalformedEvent { after_events: 0 })).await;
    let wire = post(&server, COMPLETIONS, &completions(3, false, false)).await;
    assert_eq!(wire.status, 200);
    assert!(wire.complete);
    assert!(serde_json::from_slice::<Value>(&wire.body()).is_err());

    let server = start(script(Fault::StreamError { after_events: 0 })).await;
    let wire = post(&server, CHAT, &chat(3, false, false)).await;
    assert_eq!(wire.status, 500);

    let server = start(script(Fault::EmptyStream)).await;
    let wire = post(&server, CHAT, &chat(3, false, false)).await;
    let v: Value = serde_json::from_slice(&wire.body()).unwrap();
    assert_eq!(v["choices"], json!([]));
    assert_eq!(v["usage"]["completion_tokens"], 0);

    let server = start(script(Fault::Stall {
        after_events: 0,
        for_: ms(60),
    }))
    .await;
    post(&server, COMPLETIONS, &completions(3, false, false)).await;
    let record = only_record(&server).await;
    assert!(record.true_e2e().unwrap() >= ms(61));
}

// ---------------------------------------------------------------------------
// Requests and the small endpoints.

#[tokio::test]
async fn bad_requests_get_openai_errors() {
    let server = start(Script::fast()).await;
    let theirs: Value = serde_json::from_str(LLAMA_BAD_REQUEST).unwrap();
    let cases = [
        (
            COMPLETIONS,
            r#"{"prompt": "I believe the meaning of"#.to_owned(),
        ),
        (COMPLETIONS, "[1, 2]".to_owned()),
        (COMPLETIONS, json!({"max_tokens": 3}).to_string()),
        (
            COMPLETIONS,
            json!({"prompt": "x", "max_tokens": 0}).to_string(),
        ),
        (
            COMPLETIONS,
            json!({"prompt": "x", "max_tokens": -1}).to_string(),
        ),
        (
            COMPLETIONS,
            json!({"prompt": "x", "max_tokens": 1.5}).to_string(),
        ),
        (
            COMPLETIONS,
            json!({"prompt": "x", "stream": "yes"}).to_string(),
        ),
        (COMPLETIONS, json!({"prompt": {"a": 1}}).to_string()),
        (
            COMPLETIONS,
            json!({"prompt": "x", "stream_options": 3}).to_string(),
        ),
        (CHAT, json!({"messages": "hi"}).to_string()),
        (CHAT, json!({"messages": []}).to_string()),
        (
            CHAT,
            json!({"messages": [{"role": "user", "content": 7}]}).to_string(),
        ),
        (CHAT, String::new()),
        (CHAT, "\u{0}\u{ff}".to_owned()),
    ];
    for (path, body) in &cases {
        let wire = request(server.addr(), "POST", path, body).await;
        assert_eq!(wire.status, 400, "{body}");
        let v: Value = serde_json::from_slice(&wire.body()).unwrap();
        assert_eq!(keys(&v), keys(&theirs));
        assert_eq!(keys(&v["error"]), keys(&theirs["error"]));
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert!(!v["error"]["message"].as_str().unwrap().is_empty());
    }
    server.wait_idle().await;
    let records = server.records();
    assert_eq!(records.len(), cases.len());
    assert!(
        records
            .iter()
            .all(|r| r.status == 400 && r.chunks.is_empty())
    );

    let wire = request(server.addr(), "GET", COMPLETIONS, "").await;
    assert_eq!(wire.status, 405);
    let wire = request(server.addr(), "POST", "/v1/audio/speech", "{}").await;
    assert_eq!(wire.status, 404);
    assert_eq!(
        serde_json::from_slice::<Value>(&wire.body()).unwrap()["error"]["code"],
        404
    );
}

#[test]
fn prompt_tokens_are_words_or_ids() {
    let ask = |endpoint, body: Value| parse_ask(endpoint, body.to_string().as_bytes(), 16, 0);
    let c = Endpoint::Completions;
    assert_eq!(
        ask(c, json!({"prompt": "  a b\tc\nd "}))
            .unwrap()
            .prompt_tokens,
        4
    );
    assert_eq!(
        ask(c, json!({"prompt": ["a b", "c"]}))
            .unwrap()
            .prompt_tokens,
        3
    );
    assert_eq!(
        ask(c, json!({"prompt": [1, 2, 3]})).unwrap().prompt_tokens,
        3
    );
    assert_eq!(
        ask(c, json!({"prompt": [[1, 2], [3]]}))
            .unwrap()
            .prompt_tokens,
        3
    );
    let parsed = ask(c, json!({"prompt": "a", "model": "x"})).unwrap();
    assert_eq!(parsed.max_tokens, 16);
    assert!(!parsed.stream && !parsed.include_usage);
    assert_eq!(parsed.model.as_deref(), Some("x"));
    let chat_ask = ask(
        Endpoint::ChatCompletions,
        json!({
            "messages": [
                {"role": "system", "content": "a b"},
                {"role": "assistant", "content": null},
                {"role": "user", "content": [{"type": "text", "text": "c d e"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
            ],
            "max_tokens": 5,
            "max_completion_tokens": 7,
        }),
    )
    .unwrap();
    assert_eq!(chat_ask.prompt_tokens, 5);
    assert_eq!(chat_ask.max_tokens, 7, "max_completion_tokens wins");
    assert_eq!(chat_ask.media[0].url.as_deref(), Some("https://x/y.png"));
    // An image part without its URL, or with a data URL that does not
    // decode, is refused.
    for part in [
        json!({"type": "image_url"}),
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}),
        json!({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}),
    ] {
        let body = json!({"messages": [{"role": "user", "content": [part]}]});
        assert!(matches!(
            ask(Endpoint::ChatCompletions, body),
            Err(BadRequest::Media(_))
        ));
    }
}

#[test]
fn vocabulary_escapes_are_right() {
    for (raw, escaped) in VOCAB {
        let parsed: String = serde_json::from_str(&format!("\"{escaped}\"")).unwrap();
        assert_eq!(parsed, raw);
    }
}

#[tokio::test]
async fn models_health_and_metrics() {
    let server = start(Script::fast()).await;
    let wire = request(server.addr(), "GET", "/v1/models", "").await;
    let v: Value = serde_json::from_slice(&wire.body()).unwrap();
    assert_eq!(v["object"], "list");
    assert_eq!(v["data"][0]["id"], "scripted-model");
    assert_eq!(v["data"][0]["object"], "model");
    let wire = request(server.addr(), "GET", "/health", "").await;
    assert_eq!(
        (wire.status, wire.body_str()),
        (200, r#"{"status":"ok"}"#.to_owned())
    );

    post(&server, COMPLETIONS, &completions(5, true, false)).await;
    server.wait_idle().await;
    let wire = request(server.addr(), "GET", "/metrics", "").await;
    assert!(
        wire.head
            .contains("content-type: text/plain; version=0.0.4")
    );
    let text = wire.body_str();
    for line in [
        "scripted:requests_total 1",
        "scripted:requests_running 0",
        "scripted:prompt_tokens_total 3",
        "scripted:generation_tokens_total 5",
        "scripted:faults_total 0",
        "# TYPE scripted:requests_total counter",
        "# TYPE scripted:requests_running gauge",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let name = line.split(' ').next().unwrap();
        assert!(text.contains(&format!("# HELP {name} ")), "{name}");
    }
}

// ---------------------------------------------------------------------------
// Truth and load.

/// `|a - b| <= tolerance`, or why not.
fn near(what: &str, a: Duration, b: Duration, tolerance: Duration) -> Result<(), String> {
    let off = a.abs_diff(b);
    if off <= tolerance {
        Ok(())
    } else {
        Err(format!("{what}: {a:?}, expected {b:?} +- {tolerance:?}"))
    }
}

/// One request against ttft 50 ms, itl 10 ms, 5 tokens: the record is
/// within 2 ms of the script, and the client saw each content event within
/// 2 ms of its recorded write, each plus `lag` (the machine's wake-up lag:
/// the server's writes and the client's reads wait for a core).
async fn truth_check(lag: Duration) -> Result<(), String> {
    let server = start(Script {
        ttft: ms(50),
        itl: ms(10),
        ..Script::default()
    })
    .await;
    let wire = post(&server, COMPLETIONS, &completions(5, true, false)).await;
    assert!(wire.complete);
    let record = only_record(&server).await;
    let tolerance = ms(2) + lag;
    let ttft = record.true_ttft().unwrap();
    if ttft < ms(50) {
        return Err(format!("TTFT {ttft:?} before its deadline"));
    }
    near("TTFT", ttft, ms(50), tolerance)?;
    let gaps = record.true_gaps();
    assert_eq!(gaps.len(), 4);
    for gap in gaps {
        near("gap", gap, ms(10), tolerance)?;
    }
    near("E2E", record.true_e2e().unwrap(), ms(90), tolerance)?;
    near("TPOT", record.true_tpot().unwrap(), ms(10), tolerance)?;
    // The client's arrival instants (same clock) agree with the record.
    assert_eq!(wire.frames.len(), 5 + 2);
    for (chunk, (frame, arrived)) in record.chunks.iter().zip(&wire.frames) {
        assert!(find(frame, b"\"text\"").is_some());
        near(
            "arrival vs write",
            arrived.duration_since(record.received),
            chunk.at - record.received,
            tolerance,
        )?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_truth_matches_the_script_and_the_client() {
    let _turn = crate::timing::exclusive();
    // Two cores shared with every other test: a scheduling hiccup can make
    // one run late, so one clean run out of three is required, and the
    // bounds widen by how late this machine wakes a working thread now
    // (tens of microseconds when quiet, milliseconds beside busy loops).
    let lag = tokio::task::spawn_blocking(|| crate::timing::wake_lag(200))
        .await
        .unwrap();
    let mut failures = Vec::new();
    for _ in 0..3 {
        match truth_check(lag).await {
            Ok(()) => return,
            Err(e) => failures.push(e),
        }
    }
    panic!("three runs off the script (wake-up lag {lag:?}): {failures:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_concurrent_streams() {
    let _turn = crate::timing::exclusive();
    const N: usize = 2000;
    let server = start(Script {
        ttft: ms(50),
        itl: ms(5),
        ..Script::default()
    })
    .await;
    let addr = server.addr();
    let body = chat(8, true, true).to_string();
    let clients: Vec<_> = (0..N)
        .map(|_| {
            let body = body.clone();
            tokio::spawn(async move { request(addr, "POST", CHAT, &body).await })
        })
        .collect();
    for client in clients {
        let wire = client.await.unwrap();
        assert!(wire.complete, "{}", String::from_utf8_lossy(&wire.raw));
        let body = wire.body_str();
        assert_eq!(content_events(&body), 8);
        assert!(body.ends_with("data: [DONE]\n\n"));
    }
    server.wait_idle().await;
    let records = server.records();
    assert_eq!(records.len(), N);
    assert!(
        records
            .iter()
            .all(|r| r.chunks.len() == 8 && !r.client_gone)
    );
    let seqs: BTreeSet<u64> = records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs.len(), N);
    server.shutdown().await;
}

/// Thousands of streams open at once, tens of thousands of events a second.
/// Both ends in one process need two descriptors a stream: run with a
/// descriptor limit above `2 * streams` (the default 9,000 fits 20,000).
/// `SCRIPTED_STREAMS=N cargo test --lib ten_thousand -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "heavy: thousands of sockets; run by hand"]
async fn ten_thousand_concurrent_streams() {
    let n: usize = std::env::var("SCRIPTED_STREAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9_000);
    let (ttft, itl, tokens) = (Duration::from_secs(3), ms(250), 12u32);
    let server = start(Script {
        ttft,
        itl,
        ..Script::default()
    })
    .await;
    let addr = server.addr();
    let body = completions(tokens, true, true).to_string();
    let began = Instant::now();
    let mut clients = Vec::with_capacity(n);
    // Ramp up over about a second, as a load generator would: a burst of
    // thousands of SYNs at once overflows the kernel's accept queue.
    for i in 0..n {
        let body = body.clone();
        clients.push(tokio::spawn(async move {
            request(addr, "POST", COMPLETIONS, &body).await
        }));
        if i % 500 == 499 {
            tokio::time::sleep(ms(50)).await;
        }
    }
    let mut all_open = None;
    while began.elapsed() < ttft {
        if server.in_flight() as usize == n {
            all_open = Some(began.elapsed());
            break;
        }
        tokio::time::sleep(ms(20)).await;
    }
    for client in clients {
        let wire = client.await.unwrap();
        assert!(wire.complete);
        assert_eq!(content_events(&wire.body_str()), tokens as usize);
    }
    let elapsed = began.elapsed();
    server.wait_idle().await;
    let mut late: Vec<Duration> = server
        .records()
        .iter()
        .flat_map(|r| {
            r.chunks
                .iter()
                .enumerate()
                .map(move |(i, c)| (c.at - r.received).saturating_sub(ttft + itl * i as u32))
        })
        .collect();
    late.sort();
    let rate = (n as f64) * f64::from(tokens) / (itl.as_secs_f64() * f64::from(tokens - 1));
    eprintln!(
        "{n} streams all open after {all_open:?}, done in {elapsed:?}, about {rate:.0} events/s; \
         event lateness vs script p50 {:?} p99 {:?} max {:?}",
        late[late.len() / 2],
        late[late.len() * 99 / 100],
        late[late.len() - 1],
    );
    assert!(all_open.is_some(), "all {n} streams open at once");
}

/// The server's cost per event with `Script::fast()`, client included.
/// `cargo test --release --lib fast_script_event_rate -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check; run by hand"]
async fn fast_script_event_rate() {
    let server = start(Script::fast()).await;
    let addr = server.addr();
    let (streams, tokens) = (200usize, 2000u32);
    let body = completions(tokens, true, false).to_string();
    let began = Instant::now();
    let clients: Vec<_> = (0..streams)
        .map(|_| {
            let body = body.clone();
            tokio::spawn(async move { request(addr, "POST", COMPLETIONS, &body).await })
        })
        .collect();
    for client in clients {
        assert!(client.await.unwrap().complete);
    }
    let elapsed = began.elapsed();
    let events = streams as f64 * f64::from(tokens);
    eprintln!(
        "{events} events over {streams} streams in {elapsed:?}: {:.0} events/s",
        events / elapsed.as_secs_f64()
    );
}
