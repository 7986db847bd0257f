//! The request log, `requests.jsonl` (`run --requests`): one JSON object a
//! line for every request sent, warm-up included, in the order requests
//! finish. Times are milliseconds. Fields are declared in alphabetical
//! order, and so written: the order the log has always had.
//!
//! Lines join with a server's own logs by `response_id` (the `id` the
//! server gave the response) and by absolute time: `t0_unix_ns` is the
//! Unix time of the instant `sched_ms` counts from (the same for every
//! line of a run) and `send_unix_ns` that of the request's send, both
//! converted from the monotonic clock through one (monotonic, wall)
//! pair read when the run began. Fields added after the first format
//! (`connect_ms`, `done_ms`, `event_ms`, `reasoning_tokens`, `resends`,
//! `response_id`, `send_unix_ns`, `t0_unix_ns`, `ttft_answer_ms`) are left
//! out when absent, so a log
//! written before them still reads, with them `None`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One finished request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RequestLine {
    /// Bytes of the request's audio file (before base64), where it carried one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_bytes: Option<u64>,
    /// Seconds of the request's audio, where it carried one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_seconds: Option<f64>,
    /// Time spent opening a new connection for this request (TCP and TLS);
    /// 0 when it went out on a connection already open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_ms: Option<f64>,
    /// From a free concurrency slot to the request handed to the HTTP
    /// client: the client's own lateness.
    pub dispatch_lag_ms: f64,
    /// From the scheduled instant to the end of the response (`[DONE]`,
    /// the stream closed, or the failure), to the microsecond.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_ms: Option<f64>,
    /// From the scheduled instant to the last output event; none without
    /// output.
    pub e2e_ms: Option<f64>,
    /// The failure class (`connect`, `status`, `timeout_first_token`...);
    /// none when the request succeeded.
    pub error: Option<String>,
    /// What went wrong, as the client saw it.
    pub error_detail: Option<String>,
    /// Every output event's arrival, from the scheduled instant, to the
    /// microsecond (one per `events`, in order); only with
    /// `run --requests=events`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_ms: Option<Vec<f64>>,
    /// Output events received (stream chunks that carried output).
    pub events: u64,
    /// Bytes of the request's image files (before base64), where it
    /// carried images (0 for URLs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_bytes: Option<u64>,
    /// Pixels of the request's images (0 for URLs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pixels: Option<u64>,
    /// Images the request carried, where it carried any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<u32>,
    /// The request's index in its run's schedule.
    pub index: u64,
    /// The prompt length the server reported (`usage`), if it did.
    pub input_tokens: Option<u32>,
    /// The prompt length the client built.
    pub input_tokens_requested: u32,
    /// Output tokens, counted as `token_source` says.
    pub output_tokens: u32,
    /// `max_tokens` of the request.
    pub output_tokens_requested: u32,
    /// The point's ID.
    pub point: String,
    /// From the scheduled instant to a free concurrency slot.
    pub queue_ms: f64,
    /// Of `output_tokens`, the reasoning tokens, where the request reasoned:
    /// the server's `completion_tokens_details.reasoning_tokens`, else
    /// counted from its reasoning events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u32>,
    /// Times the request was sent again because the server closed a
    /// kept-alive connection as it went out (its TTFT includes the lost
    /// attempt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resends: Option<u32>,
    /// The response's `id` as the server gave it, where it gave one: the
    /// key to the server's own log of the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// The run of the point (0 first).
    pub run: u32,
    /// When the schedule said the request was due, from the run's start.
    pub sched_ms: f64,
    /// When the request was handed to the HTTP client, as Unix time in
    /// nanoseconds (`t0_unix_ns + (sched_ms + queue_ms + dispatch_lag_ms)
    /// * 1e6`, to the nanosecond).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_unix_ns: Option<u64>,
    /// The server's own timings of the request, where it reports them.
    pub server_timing: Option<ServerTiming>,
    /// The ramp step (0 without a ramp).
    pub step: u32,
    /// The instant `sched_ms` counts from (the run's start), as Unix time
    /// in nanoseconds: the same on every line of a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t0_unix_ns: Option<u64>,
    /// Where `output_tokens` came from.
    pub token_source: TokenSource,
    /// From the first output event to the last, per output token after the
    /// first; none with fewer than two output tokens.
    pub tpot_ms: Option<f64>,
    /// From the scheduled instant to the first answer (not reasoning)
    /// event, where the request reasoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_answer_ms: Option<f64>,
    /// From the request handed to the HTTP client to the first output event.
    pub ttft_from_send_ms: Option<f64>,
    /// From the scheduled instant to the first output event; none without
    /// output.
    pub ttft_ms: Option<f64>,
    /// The turn of a conversation (0 first, and without conversations).
    pub turn: u32,
    /// Sent during warm-up: not measured.
    pub warmup: bool,
}

/// Timings a server reports about its own work on a request (llama.cpp's
/// `timings`): an independent view to hold the client's measurements
/// against. Fields in alphabetical order, as the request log writes them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerTiming {
    /// Generation of the predicted tokens, ms.
    #[serde(default)]
    pub predicted_ms: Option<f64>,
    /// Tokens predicted.
    #[serde(default)]
    pub predicted_n: Option<u32>,
    /// Prompt processing, ms.
    #[serde(default)]
    pub prompt_ms: Option<f64>,
    /// Prompt tokens processed.
    #[serde(default)]
    pub prompt_n: Option<u32>,
}

/// Where a request's output token count came from.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server's `usage`.
    Usage,
    /// Token ids in the stream.
    TokenIds,
    /// Counted output events: approximate (an event may carry several tokens).
    Events,
}

impl TokenSource {
    /// The name the results and the log use.
    pub fn name(self) -> &'static str {
        match self {
            TokenSource::Usage => "usage",
            TokenSource::TokenIds => "token_ids",
            TokenSource::Events => "events",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line() -> RequestLine {
        RequestLine {
            audio_bytes: None,
            audio_seconds: None,
            image_bytes: None,
            image_pixels: None,
            images: None,
            connect_ms: None,
            dispatch_lag_ms: 0.25,
            done_ms: None,
            e2e_ms: Some(120.5),
            error: None,
            error_detail: None,
            event_ms: None,
            events: 3,
            index: 7,
            input_tokens: Some(12),
            input_tokens_requested: 10,
            output_tokens: 3,
            output_tokens_requested: 3,
            point: "sim.m.w.c4-0123abcd".into(),
            queue_ms: 0.0,
            reasoning_tokens: None,
            resends: None,
            response_id: None,
            run: 1,
            sched_ms: 5.0,
            send_unix_ns: None,
            server_timing: Some(ServerTiming {
                predicted_ms: Some(80.0),
                predicted_n: Some(3),
                prompt_ms: None,
                prompt_n: Some(12),
            }),
            step: 0,
            t0_unix_ns: None,
            token_source: TokenSource::TokenIds,
            tpot_ms: Some(1.0 / 3.0),
            ttft_answer_ms: None,
            ttft_from_send_ms: Some(40.0),
            ttft_ms: Some(40.25),
            turn: 0,
            warmup: false,
        }
    }

    /// The bytes of a line: keys sorted at every level, absent values as
    /// `null` (the newer fields left out), floats in their shortest
    /// round-trip form. Being the first format's bytes, it is also a line
    /// written before the newer fields, read back with them `None`.
    #[test]
    fn lines_keep_their_bytes() {
        let text = serde_json::to_string(&line()).unwrap();
        assert_eq!(
            text,
            concat!(
                r#"{"dispatch_lag_ms":0.25,"e2e_ms":120.5,"error":null,"error_detail":null,"#,
                r#""events":3,"index":7,"input_tokens":12,"input_tokens_requested":10,"#,
                r#""output_tokens":3,"output_tokens_requested":3,"point":"sim.m.w.c4-0123abcd","#,
                r#""queue_ms":0.0,"run":1,"sched_ms":5.0,"server_timing":{"predicted_ms":80.0,"#,
                r#""predicted_n":3,"prompt_ms":null,"prompt_n":12},"step":0,"#,
                r#""token_source":"token_ids","tpot_ms":0.3333333333333333,"#,
                r#""ttft_from_send_ms":40.0,"ttft_ms":40.25,"turn":0,"warmup":false}"#,
            )
        );
        let back: RequestLine = serde_json::from_str(&text).unwrap();
        assert_eq!(back, line());
    }

    /// A line with every newer field: written in alphabetical order among
    /// the others, and read back whole.
    #[test]
    fn newer_fields_sort_among_the_others_and_round_trip() {
        let full = RequestLine {
            audio_bytes: Some(32044),
            audio_seconds: Some(1.0),
            image_bytes: Some(2_000_000),
            image_pixels: Some(1 << 20),
            images: Some(1),
            connect_ms: Some(0.0),
            done_ms: Some(121.0),
            event_ms: Some(vec![40.25, 80.5, 120.5]),
            reasoning_tokens: Some(2),
            resends: Some(1),
            response_id: Some("cmpl-7".into()),
            send_unix_ns: Some(1_796_218_489_000_250_000),
            t0_unix_ns: Some(1_796_218_489_000_000_000),
            ttft_answer_ms: Some(80.5),
            ..line()
        };
        let text = serde_json::to_string(&full).unwrap();
        // serde_json's map sorts its keys: read their order off the text.
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let at: Vec<usize> = v
            .as_object()
            .unwrap()
            .keys()
            .map(|k| text.find(&format!(r#""{k}":"#)).unwrap())
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert!(text.contains(r#""event_ms":[40.25,80.5,120.5],"events":3"#));
        assert!(text.contains(r#""queue_ms":0.0,"reasoning_tokens":2,"resends":1"#));
        assert!(text.contains(r#""resends":1,"response_id":"cmpl-7","run":1"#));
        assert!(text.contains(r#""tpot_ms":0.3333333333333333,"ttft_answer_ms":80.5,"#));
        assert!(text.contains(r#""step":0,"t0_unix_ns":1796218489000000000,"token_source""#));
        let back: RequestLine = serde_json::from_str(&text).unwrap();
        assert_eq!(back, full);
    }

    #[test]
    fn token_sources_are_named_as_serialized() {
        for s in [
            TokenSource::Usage,
            TokenSource::TokenIds,
            TokenSource::Events,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.name());
        }
    }
}
