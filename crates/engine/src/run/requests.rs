//! The request log: `requests.jsonl`, one `RequestLine` per finished
//! request (the format is in `infer_bench_results::requests`), filled from
//! the request's record and streamed to disk by a writer thread as runs go.
//! Each line passes the run's redactor on its way out: an error a server
//! sent back may quote the API key.
//!
//! Absolute times come from one [`RunClock`] per run: the run's start on
//! the monotonic clock and a (monotonic, wall) pair read together once,
//! through which every instant of the run is converted to Unix time. The
//! wall clock is never read per request or per event, so a clock step
//! (NTP) during a run cannot reorder its lines.

use std::io::Write;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::error::Result;
use infer_bench_protocol::RequestRecord;
use infer_bench_protocol::record::OutputEvent;
use infer_bench_results::redact::Redactor;
use infer_bench_results::requests::RequestLine;

/// Lines waiting for the writer thread, at most: a disk slower than the
/// requests finish holds the recorder back (and it, the client) instead
/// of queueing lines in memory without end.
pub(super) const LINES_QUEUED: usize = 4096;

/// Per-request records, streamed to disk by a writer thread.
pub struct RequestLog {
    tx: std::sync::mpsc::SyncSender<String>,
    thread: std::thread::JoinHandle<()>,
}

impl RequestLog {
    pub(super) fn open(path: &std::path::Path, redactor: Redactor) -> Result<RequestLog> {
        let file = infer_bench_results::files::create(path)?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<String>(LINES_QUEUED);
        let thread = std::thread::spawn(move || {
            let mut w = std::io::BufWriter::new(file);
            for line in rx {
                let _ = w.write_all(redactor.text_cow(&line).as_bytes());
            }
            let _ = w.flush();
        });
        Ok(RequestLog { tx, thread })
    }
    pub(super) fn sender(&self) -> std::sync::mpsc::SyncSender<String> {
        self.tx.clone()
    }
    pub(super) fn close(self) {
        drop(self.tx);
        let _ = self.thread.join();
    }
}

/// A run's clocks: the instant `sched_ms` counts from, and the anchor that
/// converts monotonic instants to Unix time.
#[derive(Clone, Copy, Debug)]
pub struct RunClock {
    start: Instant,
    anchor: Instant,
    anchor_unix_ns: u64,
}

impl RunClock {
    /// The clock of a run that started at `start`; reads the wall clock
    /// once, beside the monotonic one.
    pub fn new(start: Instant) -> RunClock {
        let anchor = Instant::now();
        let wall = SystemTime::now();
        RunClock {
            start,
            anchor,
            anchor_unix_ns: wall
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0),
        }
    }

    /// `t` as Unix time, nanoseconds.
    pub fn unix_ns(&self, t: Instant) -> u64 {
        if t >= self.anchor {
            self.anchor_unix_ns + (t - self.anchor).as_nanos() as u64
        } else {
            self.anchor_unix_ns
                .saturating_sub((self.anchor - t).as_nanos() as u64)
        }
    }

    /// The run's start as Unix time, nanoseconds.
    pub fn t0_unix_ns(&self) -> u64 {
        self.unix_ns(self.start)
    }
}

/// Nanoseconds as milliseconds to the microsecond (rounded), so that
/// `event_ms` stays short and ordered like the instants it comes from.
fn us_ms(ns: u64) -> f64 {
    (ns.saturating_add(500) / 1000) as f64 / 1e3
}

/// What a run's lines carry.
#[derive(Clone, Copy, Debug, Default)]
pub struct LineOptions {
    /// Every output event's time (`event_ms`; `run --requests=events`).
    pub events: bool,
    /// Connect time counts in `ttft_ms`, `ttft_from_send_ms` and `e2e_ms`
    /// (`[load] cold_connections`); otherwise it is left out of them, as
    /// the recorder leaves it out of the latencies.
    pub connect_in_latency: bool,
}

/// The log's line for one finished request, newline-terminated. Its
/// latencies are the recorder's (connect time left out unless
/// `connect_in_latency`); `event_ms` and `done_ms` are the instants as
/// they happened, connect time and all, to match a server's log.
pub(super) fn request_line(
    point: &str,
    r: &RequestRecord,
    clock: &RunClock,
    opts: LineOptions,
) -> String {
    let ms = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64() * 1e3;
    let connect = if opts.connect_in_latency {
        0
    } else {
        r.connect_ns
    };
    let event_ms = |e: &OutputEvent| e.at_ns.saturating_sub(connect) as f64 / 1e6;
    let send_ms = ms(r.t_sched, r.t_send);
    let send_ns = r.t_send.saturating_duration_since(r.t_sched).as_nanos() as u64;
    let (first, last) = (r.events.first(), r.events.last());
    let (out, source) = r.output_tokens();
    let reasoning = r.reasoning_tokens();
    let first_answer = reasoning
        .and_then(|_| r.first_reasoning_and_answer().1)
        .filter(|_| r.ok());
    let line = RequestLine {
        audio_bytes: (r.media.audio_bytes > 0).then_some(r.media.audio_bytes),
        audio_seconds: (r.media.audio_bytes > 0).then_some(r.media.audio_seconds),
        image_bytes: (r.media.images > 0).then_some(r.media.image_bytes),
        image_pixels: (r.media.images > 0).then_some(r.media.image_pixels),
        images: (r.media.images > 0).then_some(r.media.images),
        connect_ms: Some(r.connect_ns as f64 / 1e6),
        dispatch_lag_ms: ms(r.t_slot, r.t_send),
        done_ms: Some(us_ms(
            r.t_done.saturating_duration_since(r.t_sched).as_nanos() as u64,
        )),
        e2e_ms: last.map(|e| event_ms(e) + send_ms),
        error: r.failure.as_ref().map(|f| f.class.name().to_string()),
        error_detail: r.failure.as_ref().map(|f| f.detail.clone()),
        event_ms: opts
            .events
            .then(|| r.events.iter().map(|e| us_ms(send_ns + e.at_ns)).collect()),
        events: r.events.len() as u64,
        index: r.index,
        input_tokens: r.usage.prompt_tokens,
        input_tokens_requested: r.requested_input,
        output_tokens: out,
        output_tokens_requested: r.requested_output,
        point: point.to_string(),
        queue_ms: ms(r.t_sched, r.t_slot),
        reasoning_tokens: reasoning.map(|(n, _)| n),
        resends: Some(r.retries),
        response_id: r.response_id.clone(),
        run: r.run,
        sched_ms: ms(clock.start, r.t_sched),
        send_unix_ns: Some(clock.unix_ns(r.t_send)),
        server_timing: r.server_timing,
        step: r.step,
        t0_unix_ns: Some(clock.t0_unix_ns()),
        token_source: source,
        tpot_ms: match (first, last) {
            (Some(f), Some(l)) if out >= 2 => {
                Some((l.at_ns - f.at_ns) as f64 / 1e6 / (out - 1) as f64)
            }
            _ => None,
        },
        ttft_answer_ms: first_answer.map(|at| at.saturating_sub(connect) as f64 / 1e6 + send_ms),
        ttft_from_send_ms: first.map(event_ms),
        ttft_ms: first.map(|e| event_ms(e) + send_ms),
        turn: r.turn,
        warmup: r.warmup,
    };
    let mut text = serde_json::to_string(&line).expect("serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_protocol::record::OutputEvent;
    use std::time::Duration;

    fn record(start: Instant) -> RequestRecord {
        let t_sched = start + Duration::from_millis(5);
        let mut r = RequestRecord::new(3, 0, 0, false, t_sched);
        r.t_slot = t_sched;
        r.t_send = t_sched + Duration::from_micros(250);
        for at_ns in [40_000_000, 42_000_600, 44_000_000] {
            r.events.push(OutputEvent {
                at_ns,
                text_bytes: 4,
                token_ids: None,
                reasoning: false,
            });
        }
        r.t_done = r.t_send + Duration::from_nanos(44_100_000);
        r.retries = 1;
        r.connect_ns = 1_500_000;
        r.response_id = Some("cmpl-9".into());
        r
    }

    #[test]
    fn a_line_carries_absolute_times_resends_and_the_response_id() {
        let start = Instant::now();
        let clock = RunClock::new(start);
        let r = record(start);
        let line: RequestLine =
            serde_json::from_str(&request_line("p", &r, &clock, LineOptions::default())).unwrap();
        let t0 = line.t0_unix_ns.unwrap();
        assert_eq!(line.send_unix_ns, Some(t0 + 5_250_000));
        assert_eq!(line.done_ms, Some(44.35));
        assert_eq!(line.connect_ms, Some(1.5));
        assert_eq!(line.resends, Some(1));
        assert_eq!(line.response_id.as_deref(), Some("cmpl-9"));
        assert_eq!(line.event_ms, None, "events only when asked");
        // The latencies leave the connect time out, as the recorder does.
        assert_eq!(line.ttft_from_send_ms, Some(38.5));
        assert_eq!(line.ttft_ms, Some(38.75));
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        assert!(t0 <= now && now - t0 < 60_000_000_000, "{t0} against {now}");
    }

    #[test]
    fn events_are_offsets_from_the_scheduled_instant() {
        let start = Instant::now();
        let clock = RunClock::new(start);
        let opts = LineOptions {
            events: true,
            connect_in_latency: true,
        };
        let line: RequestLine =
            serde_json::from_str(&request_line("p", &record(start), &clock, opts)).unwrap();
        // As they happened, connect time and all.
        assert_eq!(line.event_ms, Some(vec![40.25, 42.251, 44.25]));
        // Cold connections: the connect time stays in the latencies.
        assert_eq!(line.ttft_ms, Some(40.25));
        // One clock per run: every line has the same t0.
        let again: RequestLine =
            serde_json::from_str(&request_line("p", &record(start), &clock, opts)).unwrap();
        assert_eq!(again.t0_unix_ns, line.t0_unix_ns);
    }

    #[test]
    fn instants_before_the_anchor_convert_too() {
        let start = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        let clock = RunClock::new(start);
        let anchor_ns = clock.unix_ns(clock.anchor);
        assert!(anchor_ns - clock.t0_unix_ns() >= 2_000_000);
    }
}
