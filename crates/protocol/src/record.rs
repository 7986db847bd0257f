//! What one request measured: its timeline on the monotonic clock, its
//! output events, its token counts and, if it failed, why.

use std::fmt;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Why a request failed. Each class is counted separately.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The connection could not be made, or it was closed or reset before
    /// any byte of a response came (after the one resend such a request
    /// gets).
    Connect,
    /// The server answered 4xx other than 429: the request was refused
    /// (bad request, auth, unknown model, a field it rejects).
    #[serde(rename = "status_4xx")]
    Status4xx,
    /// The server answered 429: it shed load (rate limit, queue full).
    #[serde(rename = "status_429")]
    Status429,
    /// The server answered 5xx: it failed (or a gateway before it did).
    #[serde(rename = "status_5xx")]
    Status5xx,
    /// The server answered another status that is not success (a redirect
    /// that was not followed, a 1xx).
    Status,
    /// The stream carried an `error` object.
    StreamError,
    /// An event could not be understood.
    Malformed,
    /// The stream ended before completion (no finish reason, no `[DONE]`).
    Truncated,
    /// The stream completed without any output.
    Empty,
    TimeoutConnect,
    TimeoutFirstToken,
    TimeoutIdle,
    TimeoutTotal,
    /// The response broke a `[load.limits]` bound: a line, its bytes or its
    /// events.
    Oversized,
    /// A stream was asked for and the server answered 200 with another
    /// content type (an HTML page, a whole JSON body).
    NotSse,
    /// The client itself ran out of file descriptors (EMFILE, ENFILE) when
    /// opening a connection: its own limit, not the server's, so never
    /// `Connect`; a point with any is INVALID.
    ClientLimit,
    /// The answer broke what the workload asked of it: its text is not
    /// JSON matching `response_format`, a tool call names no declared tool
    /// or its arguments do not match the tool's parameters, or no tool was
    /// called under `tool_choice = "required"`. Its timings are in the
    /// request log; it counts as failed.
    InvalidAnswer,
}

impl ErrorClass {
    pub const ALL: &'static [ErrorClass] = &[
        ErrorClass::Connect,
        ErrorClass::Status4xx,
        ErrorClass::Status429,
        ErrorClass::Status5xx,
        ErrorClass::Status,
        ErrorClass::StreamError,
        ErrorClass::Malformed,
        ErrorClass::Truncated,
        ErrorClass::Empty,
        ErrorClass::TimeoutConnect,
        ErrorClass::TimeoutFirstToken,
        ErrorClass::TimeoutIdle,
        ErrorClass::TimeoutTotal,
        ErrorClass::Oversized,
        ErrorClass::NotSse,
        ErrorClass::ClientLimit,
        ErrorClass::InvalidAnswer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Connect => "connect",
            ErrorClass::Status4xx => "status_4xx",
            ErrorClass::Status429 => "status_429",
            ErrorClass::Status5xx => "status_5xx",
            ErrorClass::Status => "status",
            ErrorClass::StreamError => "stream_error",
            ErrorClass::Malformed => "malformed",
            ErrorClass::Truncated => "truncated",
            ErrorClass::Empty => "empty",
            ErrorClass::TimeoutConnect => "timeout_connect",
            ErrorClass::TimeoutFirstToken => "timeout_first_token",
            ErrorClass::TimeoutIdle => "timeout_idle",
            ErrorClass::TimeoutTotal => "timeout_total",
            ErrorClass::Oversized => "oversized",
            ErrorClass::NotSse => "not_sse",
            ErrorClass::ClientLimit => "client_limit",
            ErrorClass::InvalidAnswer => "invalid_answer",
        }
    }
}

impl ErrorClass {
    /// The class of a response with this HTTP status (not a success).
    pub fn of_status(code: u16) -> ErrorClass {
        let name = infer_bench_results::status_class(code);
        ErrorClass::ALL
            .iter()
            .copied()
            .find(|c| c.name() == name)
            .unwrap_or(ErrorClass::Status)
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed request: its class and a short detail (status code, message).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub class: ErrorClass,
    pub detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

/// Token counts the server reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    /// Of the completion, the reasoning tokens
    /// (`completion_tokens_details.reasoning_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u32>,
}

// The server's timings and where output counts came from are written to
// the request log as they are kept here.
pub use infer_bench_results::requests::{ServerTiming, TokenSource};

/// One output event: when its bytes arrived (ns after `t_send`), how much
/// text it carried, and its token count if the server said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputEvent {
    pub at_ns: u64,
    pub text_bytes: u32,
    pub token_ids: Option<u32>,
    /// It carried reasoning only (no answer text).
    pub reasoning: bool,
}

/// One request, start to end.
#[derive(Clone, Debug)]
pub struct RequestRecord {
    pub index: u64,
    pub run: u32,
    pub step: u32,
    /// The turn of a conversation (0 for the first, and without one).
    pub turn: u32,
    /// The part of a mixed workload (0 without a mix).
    pub part: u32,
    pub warmup: bool,
    /// When the schedule said the request was due.
    pub t_sched: Instant,
    /// When a concurrency slot was free (== t_sched unless capped).
    pub t_slot: Instant,
    /// When the request was handed to the HTTP client.
    pub t_send: Instant,
    /// Output events in arrival order; the first is `t_first`, the last `t_last`.
    pub events: Vec<OutputEvent>,
    /// End of the response (`[DONE]`, close, or failure).
    pub t_done: Instant,
    pub usage: Usage,
    pub requested_input: u32,
    pub requested_output: u32,
    pub failure: Option<Failure>,
    /// The reply text, kept only when a conversation needs it.
    pub reply: Option<String>,
    /// The server's own timings, if it reported them.
    pub server_timing: Option<ServerTiming>,
    /// Times the request was re-sent because the server closed a kept-alive
    /// connection as it went out.
    pub retries: u32,
    /// Time spent opening a new connection for this request (TCP and TLS),
    /// 0 when it went out on a connection already open.
    pub connect_ns: u64,
    /// The response's `id`, as the server named it (joins with its logs).
    pub response_id: Option<String>,
    /// The images and audio the request carried.
    pub media: infer_bench_workload::MediaSent,
    /// Embeddings: the request's inputs; rerank: its documents and their
    /// tokens (zero for other kinds).
    pub units: crate::Units,
    /// The request's and the response's body bytes.
    pub payload: crate::Payload,
}

impl RequestRecord {
    pub fn new(index: u64, run: u32, step: u32, warmup: bool, t_sched: Instant) -> Self {
        RequestRecord {
            index,
            run,
            step,
            turn: 0,
            part: 0,
            warmup,
            t_sched,
            t_slot: t_sched,
            t_send: t_sched,
            events: Vec::new(),
            t_done: t_sched,
            usage: Usage::default(),
            requested_input: 0,
            requested_output: 0,
            failure: None,
            reply: None,
            server_timing: None,
            retries: 0,
            connect_ns: 0,
            response_id: None,
            media: Default::default(),
            units: crate::Units::default(),
            payload: crate::Payload::default(),
        }
    }

    pub fn ok(&self) -> bool {
        self.failure.is_none()
    }

    pub fn fail(&mut self, class: ErrorClass, detail: impl Into<String>) {
        if self.failure.is_none() {
            self.failure = Some(Failure {
                class,
                detail: detail.into(),
                status: None,
            });
        }
    }

    /// The output token count and where it came from: usage, else token
    /// ids, else the number of output events.
    pub fn output_tokens(&self) -> (u32, TokenSource) {
        if let Some(n) = self.usage.completion_tokens {
            return (n, TokenSource::Usage);
        }
        if !self.events.is_empty() && self.events.iter().all(|e| e.token_ids.is_some()) {
            return (
                self.events.iter().map(|e| e.token_ids.unwrap_or(0)).sum(),
                TokenSource::TokenIds,
            );
        }
        (self.events.len() as u32, TokenSource::Events)
    }

    /// The reasoning tokens, where the request reasoned (a reasoning event
    /// came, or usage counted reasoning tokens): usage's count where the
    /// server gave one, else the tokens of its reasoning events (counted as
    /// `tokens_per_event` spreads them), with its source. Never more than
    /// the output.
    pub fn reasoning_tokens(&self) -> Option<(u32, TokenSource)> {
        let (output, source) = self.output_tokens();
        if let Some(n) = self.usage.reasoning_tokens.filter(|n| *n > 0) {
            return Some((n.min(output), TokenSource::Usage));
        }
        if !self.events.iter().any(|e| e.reasoning) {
            return None;
        }
        let per_event = self.tokens_per_event();
        let n = self
            .events
            .iter()
            .zip(per_event)
            .filter(|(e, _)| e.reasoning)
            .map(|(_, k)| k)
            .sum::<u32>();
        let source = match source {
            TokenSource::TokenIds => TokenSource::TokenIds,
            _ => TokenSource::Events,
        };
        Some((n.min(output), source))
    }

    /// When the first reasoning event and the first answer event came (ns
    /// after `t_send`), where they did.
    pub fn first_reasoning_and_answer(&self) -> (Option<u64>, Option<u64>) {
        let first = |reasoning: bool| {
            self.events
                .iter()
                .find(|e| e.reasoning == reasoning)
                .map(|e| e.at_ns)
        };
        (first(true), first(false))
    }

    /// Tokens per output event: exact from token ids; one each when the
    /// counts agree; otherwise spread in proportion to each event's text
    /// (an approximation, documented in METRICS.md).
    pub fn tokens_per_event(&self) -> Vec<u32> {
        let n_events = self.events.len();
        if n_events == 0 {
            return Vec::new();
        }
        if self.events.iter().all(|e| e.token_ids.is_some()) {
            return self
                .events
                .iter()
                .map(|e| e.token_ids.unwrap_or(0))
                .collect();
        }
        let (total, _) = self.output_tokens();
        if total as usize == n_events || total == 0 {
            return vec![1; n_events];
        }
        let text: u64 = self.events.iter().map(|e| e.text_bytes as u64).sum();
        if text == 0 || (total as usize) < n_events {
            return vec![1; n_events];
        }
        // Largest-remainder apportionment, at least one token per event.
        let extra = total as u64 - n_events as u64;
        let mut out: Vec<u32> = Vec::with_capacity(n_events);
        let mut rems: Vec<(u64, usize)> = Vec::with_capacity(n_events);
        let mut assigned = 0u64;
        for (i, e) in self.events.iter().enumerate() {
            let share = extra * e.text_bytes as u64;
            out.push(1 + (share / text) as u32);
            assigned += share / text;
            rems.push((share % text, i));
        }
        rems.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, i) in rems.into_iter().take((extra - assigned) as usize) {
            out[i] += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(events: &[(u32, Option<u32>)], usage: Option<u32>) -> RequestRecord {
        let mut r = RequestRecord::new(0, 0, 0, false, Instant::now());
        r.events = events
            .iter()
            .enumerate()
            .map(|(i, (b, t))| OutputEvent {
                at_ns: i as u64,
                text_bytes: *b,
                token_ids: *t,
                reasoning: false,
            })
            .collect();
        r.usage.completion_tokens = usage;
        r
    }

    #[test]
    fn token_counts_prefer_usage_then_ids_then_events() {
        assert_eq!(
            rec(&[(3, None), (3, None)], Some(2)).output_tokens(),
            (2, TokenSource::Usage)
        );
        assert_eq!(
            rec(&[(3, Some(2)), (3, Some(3))], None).output_tokens(),
            (5, TokenSource::TokenIds)
        );
        assert_eq!(
            rec(&[(3, None), (3, None)], None).output_tokens(),
            (2, TokenSource::Events)
        );
    }

    #[test]
    fn tokens_spread_over_events() {
        assert_eq!(
            rec(&[(3, None), (3, None)], Some(2)).tokens_per_event(),
            vec![1, 1]
        );
        assert_eq!(
            rec(&[(1, Some(2)), (1, Some(3))], Some(5)).tokens_per_event(),
            vec![2, 3]
        );
        // 6 tokens over 3 events with text 1:1:4 bytes: 3 extra split 0.5/0.5/2.
        let t = rec(&[(1, None), (1, None), (4, None)], Some(6)).tokens_per_event();
        assert_eq!(t.iter().sum::<u32>(), 6);
        assert_eq!(t, vec![2, 1, 3]);
    }

    #[test]
    fn http_status_codes_fall_in_their_classes() {
        for (code, class) in [
            (400, ErrorClass::Status4xx),
            (401, ErrorClass::Status4xx),
            (404, ErrorClass::Status4xx),
            (422, ErrorClass::Status4xx),
            (429, ErrorClass::Status429),
            (500, ErrorClass::Status5xx),
            (503, ErrorClass::Status5xx),
            (302, ErrorClass::Status),
        ] {
            assert_eq!(ErrorClass::of_status(code), class, "HTTP {code}");
            // The name is what results.json keeps and what serde writes.
            assert_eq!(
                serde_json::to_value(class).unwrap(),
                serde_json::json!(class.name())
            );
        }
    }
}
