//! The recorder: turns finished requests into the statistics of one run,
//! exactly as METRICS.md defines them. Latencies go into HDR histograms
//! (µs); failures are counted by class; fixed-length windows and ramp steps
//! keep statistics of their own. Memory depends on the number of windows
//! and steps, never on the number of requests, and a closed window is kept
//! compact: its histograms encoded (V2 + deflate, a few KB) rather than
//! one live histogram per [`Series`] (sixteen), so an hour of 10 s windows
//! costs a few MB (see this crate's `tests/recorder_memory.rs`).

use infer_bench_results::Outside;
use infer_bench_results::media::MediaTotals;
use std::collections::BTreeMap;
use std::time::Instant;

use crate::error::ShardError;
use infer_bench_protocol::{RequestRecord, TokenSource};
use infer_bench_results::hist::{Hist, Summary, decode, encode, new_hist};
use infer_bench_results::metric::{Kind, Metric};
use infer_bench_results::{
    Counts, InWindow, PhaseTimeline, RunShard, Stats, TallyData, TokenStats, WindowStats,
};
use infer_bench_spec::Goodput;

/// The histograms a tally keeps: the per-request distributions of
/// `Metric::DISTRIBUTIONS` (latencies in µs, token counts), the wait for a
/// slot, and the lengths the client asked for. Each is written under its
/// name, in results and in `TallyData`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Series {
    Ttft,
    TtftFromSend,
    Tpot,
    Itl,
    ItlToken,
    E2e,
    DispatchLag,
    /// From the scheduled instant to a free slot (µs).
    QueueWait,
    InputTokens,
    OutputTokens,
    /// Prompt lengths as the client built them, every request sent.
    RequestedInput,
    /// `max_tokens` of every request sent.
    RequestedOutput,
    /// Opening a new connection for a request (µs): requests that went out
    /// on a connection already open are not recorded.
    Connect,
    /// The client's read delay (µs): how long bytes the kernel held waited
    /// for the engine to stamp them, from the run's probe (`probe.rs`), not
    /// from requests.
    ReadDelay,
    /// From the scheduled instant to the first reasoning event (µs), for
    /// requests that reasoned.
    TtftReasoning,
    /// From the scheduled instant to the first answer event (µs), for
    /// requests that reasoned (otherwise it is TTFT).
    TtftAnswer,
}

impl Series {
    pub const ALL: [Series; 16] = [
        Series::Ttft,
        Series::TtftFromSend,
        Series::Tpot,
        Series::Itl,
        Series::ItlToken,
        Series::E2e,
        Series::DispatchLag,
        Series::QueueWait,
        Series::InputTokens,
        Series::OutputTokens,
        Series::RequestedInput,
        Series::RequestedOutput,
        Series::Connect,
        Series::ReadDelay,
        Series::TtftReasoning,
        Series::TtftAnswer,
    ];

    /// The metric this series records, where it is one.
    pub fn metric(self) -> Option<Metric> {
        Some(match self {
            Series::Ttft => Metric::Ttft,
            Series::TtftFromSend => Metric::TtftFromSend,
            Series::Tpot => Metric::Tpot,
            Series::Itl => Metric::Itl,
            Series::ItlToken => Metric::ItlToken,
            Series::E2e => Metric::E2e,
            Series::DispatchLag => Metric::DispatchLag,
            Series::InputTokens => Metric::InputTokens,
            Series::OutputTokens => Metric::OutputTokens,
            Series::TtftReasoning => Metric::TtftReasoning,
            Series::TtftAnswer => Metric::TtftAnswer,
            Series::QueueWait
            | Series::RequestedInput
            | Series::RequestedOutput
            | Series::Connect
            | Series::ReadDelay => return None,
        })
    }

    /// The name histograms and latency summaries are kept under: the
    /// metric's name where the series is a metric.
    pub fn name(self) -> &'static str {
        match self {
            Series::QueueWait => "queue_wait",
            Series::RequestedInput => "requested_input",
            Series::RequestedOutput => "requested_output",
            Series::Connect => "connect",
            Series::ReadDelay => "read_delay",
            s => s.metric().expect("the other series are metrics").name(),
        }
    }

    /// Whether the series is a latency (µs), summarized in `latency_ms`.
    pub fn is_latency(self) -> bool {
        match self.metric() {
            Some(m) => m.kind() == Kind::Latency,
            None => matches!(
                self,
                Series::QueueWait | Series::Connect | Series::ReadDelay
            ),
        }
    }

    /// The latency series.
    fn latencies() -> impl Iterator<Item = Series> {
        Series::ALL.into_iter().filter(|s| s.is_latency())
    }
}

/// One histogram per series.
#[derive(Clone)]
struct Hists([Hist; Series::ALL.len()]);

impl Default for Hists {
    fn default() -> Self {
        Hists(std::array::from_fn(|_| new_hist()))
    }
}

impl std::ops::Index<Series> for Hists {
    type Output = Hist;
    fn index(&self, s: Series) -> &Hist {
        &self.0[s as usize]
    }
}

impl std::ops::IndexMut<Series> for Hists {
    fn index_mut(&mut self, s: Series) -> &mut Hist {
        &mut self.0[s as usize]
    }
}

fn ns(a: Instant, b: Instant) -> u64 {
    b.saturating_duration_since(a).as_nanos() as u64
}

/// Statistics of one set of requests (a run, a window or a step).
#[derive(Clone, Default)]
pub struct Tally {
    hists: Hists,
    counts: Counts,
    errors: BTreeMap<String, u64>,
    error_examples: BTreeMap<String, Outside>,
    http_status: BTreeMap<String, u64>,
    http_status_examples: BTreeMap<String, Outside>,
    good: u64,
    good_output_total: u64,
    /// Of successful requests: embeddings' inputs, rerank's documents and
    /// their tokens.
    units: UnitTotals,
    input_total: u64,
    output_total: u64,
    sources: BTreeMap<String, u64>,
    /// Reasoning tokens of successful requests, and the requests that
    /// reasoned by the source of their count.
    reasoning_total: u64,
    reasoning_sources: BTreeMap<String, u64>,
    requested_input_sum: u64,
    requested_output_sum: u64,
    reported_input_sum: u64,
    reported_input_n: u64,
    /// Requests whose reported prompt length equals the requested one.
    reported_input_exact: u64,
    in_flight_ns: u128,
    first_send: Option<Instant>,
    last_send: Option<Instant>,
    first_sched: Option<Instant>,
    last_sched: Option<Instant>,
    last_done: Option<Instant>,
    /// The work inside the measurement window, which rates come from: set
    /// on a run's tally (and what runs merge into); `None` for tallies that
    /// split requests by completion, whose rates come from their totals.
    in_window: Option<InWindow>,
    /// Merged from a tally without `in_window` (an older file): rates come
    /// from totals.
    totals_only: bool,
    /// The images and audio of the requests that carried them.
    media: MediaTotals,
    /// The body bytes of successful requests.
    payload: PayloadTotals,
}

use infer_bench_results::{PayloadTotals, UnitTotals};

trait UnitRates {
    fn add(&mut self, u: infer_bench_protocol::Units);
    fn merge(&mut self, o: &UnitTotals);
    fn rate(&self, total: u64, requests_per_s: f64) -> Option<f64>;
}

impl UnitRates for UnitTotals {
    fn add(&mut self, u: infer_bench_protocol::Units) {
        if u == infer_bench_protocol::Units::default() {
            return;
        }
        self.inputs += u.inputs as u64;
        self.documents += u.documents as u64;
        self.document_tokens += u.document_tokens as u64;
        self.requests += 1;
    }

    fn merge(&mut self, o: &UnitTotals) {
        let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        add(&mut self.inputs, o.inputs);
        add(&mut self.documents, o.documents);
        add(&mut self.document_tokens, o.document_tokens);
        add(&mut self.requests, o.requests);
    }

    /// A total per second, at `requests_per_s` successful requests a
    /// second: the request rate times the mean per request.
    fn rate(&self, total: u64, requests_per_s: f64) -> Option<f64> {
        (total > 0 && self.requests > 0)
            .then(|| requests_per_s * total as f64 / self.requests as f64)
    }
}

fn rec_us(h: &mut Hist, ns: u64) {
    // Values round to the nearest microsecond; 0 is kept as 0.
    let _ = h.record((ns + 500) / 1000);
}

/// Per-request derived values, computed once and recorded into every tally
/// that the request belongs to.
struct Derived {
    ttft: Option<u64>,
    ttft_send: Option<u64>,
    e2e: Option<u64>,
    tpot: Option<u64>,
    itl: Vec<u64>,
    itl_token: Vec<(u64, u32)>,
    dispatch: u64,
    queue: u64,
    input: u32,
    output: u32,
    source: TokenSource,
    /// Where the request reasoned: its reasoning tokens and their source.
    reasoning: Option<(u32, TokenSource)>,
    ttft_reasoning: Option<u64>,
    ttft_answer: Option<u64>,
    good: bool,
}

/// `connect_in_latency`: whether time spent opening a connection counts
/// in TTFT and E2E (`[load] cold_connections`); otherwise it is left out,
/// since connections are opened before the run and a request that still
/// had to open one measured the client's pool, not the server.
fn derive(r: &RequestRecord, stream: bool, goodput: &Goodput, connect_in_latency: bool) -> Derived {
    let (output, source) = r.output_tokens();
    let input = r.usage.prompt_tokens.unwrap_or(r.requested_input);
    let mut d = Derived {
        ttft: None,
        ttft_send: None,
        e2e: None,
        tpot: None,
        itl: Vec::new(),
        itl_token: Vec::new(),
        dispatch: ns(r.t_slot, r.t_send),
        queue: ns(r.t_sched, r.t_slot),
        input,
        output,
        source,
        reasoning: None,
        ttft_reasoning: None,
        ttft_answer: None,
        good: false,
    };
    if !r.ok() || r.events.is_empty() {
        return d;
    }
    let connect = if connect_in_latency { 0 } else { r.connect_ns };
    let first = r.events[0].at_ns.saturating_sub(connect);
    let last = r.events[r.events.len() - 1].at_ns.saturating_sub(connect);
    let send_offset = ns(r.t_sched, r.t_send);
    d.e2e = Some(send_offset + last);
    if stream {
        d.ttft = Some(send_offset + first);
        d.ttft_send = Some(first);
        d.reasoning = r.reasoning_tokens();
        if d.reasoning.is_some() {
            let (reasoning, answer) = r.first_reasoning_and_answer();
            let at = |t: u64| send_offset + t.saturating_sub(connect);
            d.ttft_reasoning = reasoning.map(at);
            d.ttft_answer = answer.map(at);
        }
        if output >= 2 {
            d.tpot = Some((last - first) / (output as u64 - 1));
        }
        let per_event = r.tokens_per_event();
        for (i, w) in r.events.windows(2).enumerate() {
            let gap = w[1].at_ns - w[0].at_ns;
            d.itl.push(gap);
            let k = per_event.get(i + 1).copied().unwrap_or(1).max(1);
            d.itl_token.push((gap / k as u64, k));
        }
    }
    let within = |v: Option<u64>, bound: Option<infer_bench_spec::Duration>| match (v, bound) {
        (Some(v), Some(b)) => v <= b.as_nanos(),
        _ => true,
    };
    d.good =
        within(d.ttft, goodput.ttft) && within(d.tpot, goodput.tpot) && within(d.e2e, goodput.e2e);
    d
}

impl Tally {
    fn add(&mut self, r: &RequestRecord, d: &Derived) {
        rec_us(&mut self.hists[Series::DispatchLag], d.dispatch);
        if r.connect_ns > 0 {
            rec_us(&mut self.hists[Series::Connect], r.connect_ns);
        }
        rec_us(&mut self.hists[Series::QueueWait], d.queue);
        self.counts.sent += 1;
        self.counts.resent += r.retries as u64;
        self.requested_input_sum += r.requested_input as u64;
        self.requested_output_sum += r.requested_output as u64;
        if r.media != Default::default() {
            let m = &r.media;
            self.media.merge(&MediaTotals {
                requests: 1,
                images: m.images as u64,
                image_pixels: m.image_pixels,
                image_bytes: m.image_bytes,
                audio_seconds: m.audio_seconds,
                audio_bytes: m.audio_bytes,
                reported_input_sum: r.usage.prompt_tokens.unwrap_or(0) as u64,
                reported_input_n: r.usage.prompt_tokens.is_some() as u64,
                requested_input_sum: r.requested_input as u64,
            });
        }
        let _ = self.hists[Series::RequestedInput].record(r.requested_input as u64);
        let _ = self.hists[Series::RequestedOutput].record(r.requested_output as u64);
        self.first_send = Some(self.first_send.map_or(r.t_send, |t| t.min(r.t_send)));
        self.last_send = Some(self.last_send.map_or(r.t_send, |t| t.max(r.t_send)));
        self.first_sched = Some(self.first_sched.map_or(r.t_sched, |t| t.min(r.t_sched)));
        self.last_sched = Some(self.last_sched.map_or(r.t_sched, |t| t.max(r.t_sched)));
        self.last_done = Some(self.last_done.map_or(r.t_done, |t| t.max(r.t_done)));
        self.in_flight_ns += ns(r.t_send, r.t_done) as u128;
        if let Some(f) = &r.failure {
            self.counts.failed += 1;
            let name = f.class.name().to_string();
            *self.errors.entry(name.clone()).or_default() += 1;
            self.error_examples
                .entry(name)
                .or_insert_with(|| Outside::new(f.detail.chars().take(300).collect::<String>()));
            if let Some(code) = f.status {
                let code = code.to_string();
                *self.http_status.entry(code.clone()).or_default() += 1;
                self.http_status_examples.entry(code).or_insert_with(|| {
                    Outside::new(f.detail.chars().take(300).collect::<String>())
                });
            }
            return;
        }
        self.counts.succeeded += 1;
        self.units.add(r.units);
        if r.payload != infer_bench_protocol::Payload::default() {
            self.payload.merge(&PayloadTotals {
                requests: 1,
                request_bytes: r.payload.sent,
                response_bytes: r.payload.received,
            });
        }
        if d.good {
            self.good += 1;
            self.good_output_total += d.output as u64;
        }
        for (series, v) in [
            (Series::Ttft, d.ttft),
            (Series::TtftFromSend, d.ttft_send),
            (Series::Tpot, d.tpot),
            (Series::TtftReasoning, d.ttft_reasoning),
            (Series::TtftAnswer, d.ttft_answer),
        ] {
            if let Some(v) = v {
                rec_us(&mut self.hists[series], v);
            }
        }
        for gap in &d.itl {
            rec_us(&mut self.hists[Series::Itl], *gap);
        }
        for (per_token, k) in &d.itl_token {
            let _ = self.hists[Series::ItlToken].record_n((per_token + 500) / 1000, *k as u64);
        }
        if let Some(v) = d.e2e {
            rec_us(&mut self.hists[Series::E2e], v);
        }
        let _ = self.hists[Series::InputTokens].record(d.input as u64);
        let _ = self.hists[Series::OutputTokens].record(d.output as u64);
        self.input_total += d.input as u64;
        self.output_total += d.output as u64;
        *self.sources.entry(d.source.name().to_string()).or_default() += 1;
        if let Some((n, source)) = d.reasoning {
            self.reasoning_total += n as u64;
            *self
                .reasoning_sources
                .entry(source.name().to_string())
                .or_default() += 1;
        }
        if let Some(p) = r.usage.prompt_tokens {
            self.reported_input_sum += p as u64;
            self.reported_input_n += 1;
            self.reported_input_exact += (p == r.requested_input) as u64;
        }
    }

    /// Adds another tally (runs merged into a point). Counts saturate: a
    /// tally may come from a file (`merge`), and a count near `u64::MAX`
    /// there must not overflow here.
    pub fn merge(&mut self, o: &Tally) {
        for series in Series::ALL {
            let _ = self.hists[series].add(&o.hists[series]);
        }
        let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        add(&mut self.counts.sent, o.counts.sent);
        add(&mut self.counts.succeeded, o.counts.succeeded);
        add(&mut self.counts.failed, o.counts.failed);
        add(&mut self.counts.warmup, o.counts.warmup);
        add(&mut self.counts.unfinished, o.counts.unfinished);
        add(&mut self.counts.resent, o.counts.resent);
        add(&mut self.counts.not_sent, o.counts.not_sent);
        // Counts add; of two examples, the first is kept.
        let counts = |a: &mut BTreeMap<String, u64>, b: &BTreeMap<String, u64>| {
            for (k, v) in b {
                add(a.entry(k.clone()).or_default(), *v);
            }
        };
        let examples = |a: &mut BTreeMap<String, Outside>, b: &BTreeMap<String, Outside>| {
            for (k, v) in b {
                a.entry(k.clone()).or_insert_with(|| v.clone());
            }
        };
        counts(&mut self.errors, &o.errors);
        examples(&mut self.error_examples, &o.error_examples);
        counts(&mut self.http_status, &o.http_status);
        examples(&mut self.http_status_examples, &o.http_status_examples);
        counts(&mut self.sources, &o.sources);
        counts(&mut self.reasoning_sources, &o.reasoning_sources);
        add(&mut self.reasoning_total, o.reasoning_total);
        add(&mut self.good, o.good);
        add(&mut self.good_output_total, o.good_output_total);
        self.units.merge(&o.units);
        self.payload.merge(&o.payload);
        add(&mut self.input_total, o.input_total);
        add(&mut self.output_total, o.output_total);
        add(&mut self.requested_input_sum, o.requested_input_sum);
        add(&mut self.requested_output_sum, o.requested_output_sum);
        add(&mut self.reported_input_sum, o.reported_input_sum);
        add(&mut self.reported_input_n, o.reported_input_n);
        add(&mut self.reported_input_exact, o.reported_input_exact);
        self.in_flight_ns = self.in_flight_ns.saturating_add(o.in_flight_ns);
        self.media.merge(&o.media);
        self.merge_in_window(o.in_window.as_ref(), o.totals_only, o.counts.sent);
    }

    /// Adds another tally's in-window work: a tally with none (an older
    /// file's) makes the sum fall back on totals, unless it sent nothing.
    fn merge_in_window(&mut self, o: Option<&InWindow>, o_totals_only: bool, o_sent: u64) {
        match o {
            Some(w) => self.in_window.get_or_insert_default().add(w),
            None if o_sent > 0 => self.totals_only = true,
            None => {}
        }
        self.totals_only |= o_totals_only;
    }

    /// The work rates are computed from: the in-window counts where the
    /// tally has them, else the totals of the requests it holds.
    fn rate_basis(&self) -> InWindow {
        match self.in_window {
            Some(w) if !self.totals_only => w,
            _ => InWindow {
                requests: self.counts.succeeded,
                good: self.good,
                input_tokens: self.input_total,
                output_tokens: self.output_total,
                good_output_tokens: self.good_output_total,
                in_flight_ns: self.in_flight_ns.min(u64::MAX as u128) as u64,
                reasoning_tokens: self.reasoning_total,
            },
        }
    }

    /// The statistics over a window of `window_s` seconds. `open_rate`:
    /// whether offered and achieved send rates mean something (open loop).
    pub fn stats(&self, window_s: f64, open: bool, concurrency_max: u64) -> Stats {
        let per_s = |x: f64| if window_s > 0.0 { x / window_s } else { 0.0 };
        let n = self.counts.succeeded.saturating_add(self.counts.failed);
        let basis = self.rate_basis();
        let reasoned = !self.reasoning_sources.is_empty();
        let latency_ms = Series::latencies()
            .filter(|s| !self.hists[*s].is_empty())
            .map(|s| (s.name().to_string(), Summary::of(&self.hists[s], 1000.0)))
            .collect();
        let span_rate =
            |first: Option<Instant>, last: Option<Instant>, count: u64| match (first, last) {
                (Some(f), Some(l)) if count >= 2 && l > f => {
                    Some((count - 1) as f64 / l.duration_since(f).as_secs_f64())
                }
                _ => None,
            };
        Stats {
            window_s,
            requests: self.counts.clone(),
            errors: self.errors.clone(),
            error_examples: self.error_examples.clone(),
            http_status: self.http_status.clone(),
            http_status_examples: self.http_status_examples.clone(),
            latency_ms,
            tokens: TokenStats {
                input_total: self.input_total,
                output_total: self.output_total,
                good_output_total: self.good_output_total,
                input: Summary::of(&self.hists[Series::InputTokens], 1.0),
                output: Summary::of(&self.hists[Series::OutputTokens], 1.0),
                output_source: self.sources.clone(),
                reasoning_total: reasoned.then_some(self.reasoning_total),
                answer_total: reasoned
                    .then(|| self.output_total.saturating_sub(self.reasoning_total)),
                reasoning_source: self.reasoning_sources.clone(),
                requested_input_mean: if self.counts.sent > 0 {
                    self.requested_input_sum as f64 / self.counts.sent as f64
                } else {
                    0.0
                },
                reported_input_mean: (self.reported_input_n > 0)
                    .then(|| self.reported_input_sum as f64 / self.reported_input_n as f64),
                requested_output_mean: if self.counts.sent > 0 {
                    self.requested_output_sum as f64 / self.counts.sent as f64
                } else {
                    0.0
                },
                requested_input: Summary::of(&self.hists[Series::RequestedInput], 1.0),
                requested_output: Summary::of(&self.hists[Series::RequestedOutput], 1.0),
                reported_input_exact: (self.reported_input_n > 0)
                    .then(|| self.reported_input_exact as f64 / self.reported_input_n as f64),
            },
            request_throughput: per_s(basis.requests as f64),
            input_tokens_per_s: per_s(basis.input_tokens as f64),
            output_tokens_per_s: per_s(basis.output_tokens as f64),
            reasoning_tokens_per_s: reasoned.then(|| per_s(basis.reasoning_tokens as f64)),
            answer_tokens_per_s: reasoned
                .then(|| per_s(basis.output_tokens.saturating_sub(basis.reasoning_tokens) as f64)),
            total_tokens_per_s: per_s(basis.input_tokens as f64 + basis.output_tokens as f64),
            goodput: per_s(basis.good as f64),
            goodput_ratio: if n > 0 {
                self.good as f64 / n as f64
            } else {
                0.0
            },
            error_rate: if n > 0 {
                self.counts.failed as f64 / n as f64
            } else {
                0.0
            },
            offered_rate: if open {
                span_rate(self.first_sched, self.last_sched, self.counts.sent)
            } else {
                None
            },
            achieved_send_rate: if open {
                span_rate(self.first_send, self.last_send, self.counts.sent)
            } else {
                None
            },
            concurrency_mean: if window_s > 0.0 {
                basis.in_flight_ns as f64 / 1e9 / window_s
            } else {
                0.0
            },
            concurrency_max,
            media: self.media.stats(),
            inputs_per_s: self
                .units
                .rate(self.units.inputs, per_s(basis.requests as f64)),
            documents_per_s: self
                .units
                .rate(self.units.documents, per_s(basis.requests as f64)),
            document_tokens_per_s: self
                .units
                .rate(self.units.document_tokens, per_s(basis.requests as f64)),
            payload: self.payload.stats(per_s(basis.requests as f64)),
        }
    }

    /// Encoded histograms by metric name: the latencies, and the token
    /// counts of successful requests.
    pub fn histograms(&self) -> BTreeMap<String, String> {
        let mut out = self.encoded(Series::latencies());
        // Input and output are recorded together: both or neither.
        if !self.hists[Series::InputTokens].is_empty() {
            for s in [Series::InputTokens, Series::OutputTokens] {
                out.insert(s.name().into(), encode(&self.hists[s]));
            }
        }
        out
    }

    /// The non-empty histograms of `series`, encoded, by name.
    fn encoded(&self, series: impl IntoIterator<Item = Series>) -> BTreeMap<String, String> {
        series
            .into_iter()
            .filter(|s| !self.hists[*s].is_empty())
            .map(|s| (s.name().to_string(), encode(&self.hists[s])))
            .collect()
    }

    pub fn last_done(&self) -> Option<Instant> {
        self.last_done
    }

    /// Live median TTFT (ms) for progress display.
    pub fn ttft_p50_ms(&self) -> Option<f64> {
        let h = &self.hists[Series::Ttft];
        (!h.is_empty()).then(|| h.value_at_quantile(0.5) as f64 / 1000.0)
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    pub fn output_total(&self) -> u64 {
        self.output_total
    }
}

/// Nanoseconds from `base` to `t` (negative when `t` is earlier).
fn offset_ns(base: Instant, t: Instant) -> i64 {
    match t.checked_duration_since(base) {
        Some(d) => d.as_nanos() as i64,
        None => -(base.duration_since(t).as_nanos() as i64),
    }
}

/// Tally data with its instants moved `by` nanoseconds (to another base).
fn shifted(d: &TallyData, by: i64) -> TallyData {
    let mut d = d.clone();
    for t in [
        &mut d.first_send_ns,
        &mut d.last_send_ns,
        &mut d.first_sched_ns,
        &mut d.last_sched_ns,
        &mut d.last_done_ns,
    ] {
        *t = t.map(|ns| ns.saturating_add(by));
    }
    d
}

/// The instant `ns` nanoseconds from `base`.
fn at_offset(base: Instant, ns: i64) -> Instant {
    let d = std::time::Duration::from_nanos(ns.unsigned_abs());
    if ns >= 0 {
        // Offsets come from files: one past what the clock can hold stays
        // at `base` rather than overflowing.
        base.checked_add(d).unwrap_or(base)
    } else {
        base.checked_sub(d).unwrap_or(base)
    }
}

impl Tally {
    /// The tally as plain data, its instants as offsets from `base`.
    pub fn to_data(&self, base: Instant) -> TallyData {
        // The latencies and token counts as `histograms` keeps them, and
        // the requested lengths beside them.
        let mut histograms = self.histograms();
        histograms.extend(self.encoded([Series::RequestedInput, Series::RequestedOutput]));
        let off = |t: Option<Instant>| t.map(|t| offset_ns(base, t));
        TallyData {
            histograms,
            counts: self.counts.clone(),
            errors: self.errors.clone(),
            error_examples: self.error_examples.clone(),
            http_status: self.http_status.clone(),
            http_status_examples: self.http_status_examples.clone(),
            good: self.good,
            good_output_total: self.good_output_total,
            input_total: self.input_total,
            output_total: self.output_total,
            output_source: self.sources.clone(),
            reasoning_total: self.reasoning_total,
            reasoning_source: self.reasoning_sources.clone(),
            requested_input_sum: self.requested_input_sum,
            requested_output_sum: self.requested_output_sum,
            reported_input_sum: self.reported_input_sum,
            reported_input_n: self.reported_input_n,
            reported_input_exact: self.reported_input_exact,
            in_flight_ns: self.in_flight_ns.min(u64::MAX as u128) as u64,
            first_send_ns: off(self.first_send),
            last_send_ns: off(self.last_send),
            first_sched_ns: off(self.first_sched),
            last_sched_ns: off(self.last_sched),
            last_done_ns: off(self.last_done),
            // A sum that fell back on totals says so by having none.
            in_window: self.in_window.filter(|_| !self.totals_only),
            media: (self.media.requests > 0).then_some(self.media),
            units: (self.units.requests > 0).then_some(self.units),
            payload: (self.payload.requests > 0).then_some(self.payload),
        }
    }

    /// The inverse of `to_data`, instants placed relative to `base`.
    pub fn from_data(d: &TallyData, base: Instant) -> Result<Tally, ShardError> {
        let mut hists = Hists::default();
        for s in Series::ALL {
            if let Some(text) = d.histograms.get(s.name()) {
                hists[s] = decode(text).map_err(|source| ShardError::Histogram {
                    series: s.name(),
                    source,
                })?;
            }
        }
        let at = |ns: Option<i64>| ns.map(|ns| at_offset(base, ns));
        Ok(Tally {
            hists,
            counts: d.counts.clone(),
            errors: d.errors.clone(),
            error_examples: d.error_examples.clone(),
            http_status: d.http_status.clone(),
            http_status_examples: d.http_status_examples.clone(),
            good: d.good,
            good_output_total: d.good_output_total,
            units: d.units.unwrap_or_default(),
            input_total: d.input_total,
            output_total: d.output_total,
            sources: d.output_source.clone(),
            reasoning_total: d.reasoning_total,
            reasoning_sources: d.reasoning_source.clone(),
            requested_input_sum: d.requested_input_sum,
            requested_output_sum: d.requested_output_sum,
            reported_input_sum: d.reported_input_sum,
            reported_input_n: d.reported_input_n,
            reported_input_exact: d.reported_input_exact,
            in_flight_ns: d.in_flight_ns as u128,
            first_send: at(d.first_send_ns),
            last_send: at(d.last_send_ns),
            first_sched: at(d.first_sched_ns),
            last_sched: at(d.last_sched_ns),
            last_done: at(d.last_done_ns),
            in_window: d.in_window,
            totals_only: d.in_window.is_none() && d.counts.sent > 0,
            media: d.media.unwrap_or_default(),
            payload: d.payload.unwrap_or_default(),
        })
    }

    /// Adds another tally whose instants are on the same clock, keeping
    /// the earliest and latest instants of both (agents merged).
    pub fn merge_union(&mut self, o: &Tally) {
        self.merge(o);
        let min = |a: Option<Instant>, b: Option<Instant>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let max = |a: Option<Instant>, b: Option<Instant>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.first_send = min(self.first_send, o.first_send);
        self.last_send = max(self.last_send, o.last_send);
        self.first_sched = min(self.first_sched, o.first_sched);
        self.last_sched = max(self.last_sched, o.last_sched);
        self.last_done = max(self.last_done, o.last_done);
    }
}

/// Everything one run records.
pub struct Recorder {
    stream: bool,
    goodput: Goodput,
    open: bool,
    pub run: Tally,
    /// Start of the measurement window, once known.
    window_start: Option<Instant>,
    /// The run's measurement duration, if it has one: the window ends this
    /// long after its start (see `close`).
    duration_ns: Option<u64>,
    /// The run went on until its duration was up (rather than ending by a
    /// request count, an interruption or an early stop).
    ran_full: bool,
    /// Connect time counts in TTFT and E2E (`[load] cold_connections`).
    connect_in_latency: bool,
    /// Warm-up requests that finished before the window's start was known
    /// (warm-up by count): counted into it once it is.
    pending: Vec<RequestRecord>,
    window_len_ns: u64,
    current_window: Option<(u64, Tally)>,
    /// Closed windows by index, as plain data: histograms encoded,
    /// instants as offsets from `base`. Nothing is added to a window once
    /// the next one opens, so they are never decoded while the run goes on.
    windows: Vec<(u64, TallyData)>,
    /// The origin of the closed windows' instants.
    base: Instant,
    steps: BTreeMap<u32, Tally>,
    ramp: bool,
    /// Conversations: per-turn tallies (turn 0 first).
    turns: Option<BTreeMap<u32, Tally>>,
    /// Mixed workloads: per-part tallies.
    parts: Option<BTreeMap<u32, Tally>>,
    /// Time in prefill and decode, from the run's origin (all requests).
    phases: Option<(Instant, Phases)>,
    concurrency_max: u64,
    /// Warm-up requests that answered, and the sum of their E2E latency
    /// (ns): with the measured ones, every request a server counts in its
    /// own statistics (a kserve point's `stages`).
    warmup_e2e: (u64, u128),
}

/// Request time in prefill and in decode per bucket of a run.
#[derive(Debug, Clone, Default)]
pub struct Phases {
    pub prefill_s: Vec<f64>,
    pub decode_s: Vec<f64>,
}

/// Warm-up requests kept, at most, until the window's start is known.
const MAX_PENDING: usize = 10_000;

/// Width of a phase bucket.
pub const PHASE_BUCKET_NS: u64 = 100_000_000;
/// Buckets kept per run (2.8 hours at 100 ms); later time is not attributed.
const MAX_PHASE_BUCKETS: usize = 100_000;

impl Phases {
    /// Adds the interval [a, b) (ns from the origin) to the buckets `v`.
    fn add(v: &mut Vec<f64>, a: u64, b: u64) {
        if b <= a {
            return;
        }
        let first = (a / PHASE_BUCKET_NS) as usize;
        let last = ((b - 1) / PHASE_BUCKET_NS) as usize;
        if first >= MAX_PHASE_BUCKETS {
            return;
        }
        let last = last.min(MAX_PHASE_BUCKETS - 1);
        if v.len() <= last {
            v.resize(last + 1, 0.0);
        }
        for (i, slot) in v.iter_mut().enumerate().take(last + 1).skip(first) {
            let lo = (i as u64 * PHASE_BUCKET_NS).max(a);
            let hi = ((i as u64 + 1) * PHASE_BUCKET_NS).min(b);
            *slot += hi.saturating_sub(lo) as f64 / 1e9;
        }
    }

    fn record(&mut self, origin: Instant, r: &RequestRecord) {
        let send = ns(origin, r.t_send);
        let done = ns(origin, r.t_done).max(send);
        let first = r
            .events
            .first()
            .map(|e| (send + e.at_ns).min(done))
            .unwrap_or(done);
        Phases::add(&mut self.prefill_s, send, first);
        Phases::add(&mut self.decode_s, first, done);
    }

    /// As results keep it.
    pub fn to_data(&self) -> PhaseTimeline {
        let n = self.prefill_s.len().max(self.decode_s.len());
        let mut p = self.prefill_s.clone();
        let mut d = self.decode_s.clone();
        p.resize(n, 0.0);
        d.resize(n, 0.0);
        PhaseTimeline {
            bucket_ns: PHASE_BUCKET_NS,
            prefill_s: p,
            decode_s: d,
        }
    }

    pub fn from_data(t: &PhaseTimeline) -> Phases {
        Phases {
            prefill_s: t.prefill_s.clone(),
            decode_s: t.decode_s.clone(),
        }
    }

    /// Adds another run's (an agent's share) bucket by bucket.
    pub fn add_all(&mut self, o: &Phases) {
        for (mine, theirs) in [
            (&mut self.prefill_s, &o.prefill_s),
            (&mut self.decode_s, &o.decode_s),
        ] {
            if mine.len() < theirs.len() {
                mine.resize(theirs.len(), 0.0);
            }
            for (a, b) in mine.iter_mut().zip(theirs) {
                *a += b;
            }
        }
    }
}

impl Recorder {
    pub fn new(
        stream: bool,
        goodput: Goodput,
        open: bool,
        window: infer_bench_spec::Duration,
        ramp: bool,
    ) -> Recorder {
        Recorder {
            stream,
            goodput,
            open,
            run: Tally::default(),
            window_start: None,
            duration_ns: None,
            ran_full: false,
            connect_in_latency: false,
            pending: Vec::new(),
            window_len_ns: window.as_nanos().max(1),
            current_window: None,
            windows: Vec::new(),
            base: Instant::now(),
            steps: BTreeMap::new(),
            ramp,
            turns: None,
            parts: None,
            phases: None,
            concurrency_max: 0,
            warmup_e2e: (0, 0),
        }
    }

    /// Keeps a tally per conversation turn as well.
    pub fn track_turns(&mut self) {
        self.turns.get_or_insert_with(BTreeMap::new);
    }

    /// Per-turn tallies (conversations), turn 0 first.
    pub fn turns(&self) -> Option<&BTreeMap<u32, Tally>> {
        self.turns.as_ref()
    }

    /// Keeps a tally per part of a mixed workload as well.
    pub fn track_parts(&mut self) {
        self.parts.get_or_insert_with(BTreeMap::new);
    }

    /// Per-part tallies (mixed workloads).
    pub fn parts(&self) -> Option<&BTreeMap<u32, Tally>> {
        self.parts.as_ref()
    }

    /// Keeps the prefill/decode timeline from `origin` (the run's start).
    pub fn track_phases(&mut self, origin: Instant) {
        self.phases
            .get_or_insert_with(|| (origin, Phases::default()));
    }

    /// The prefill/decode timeline and its origin.
    pub fn phases(&self) -> Option<&(Instant, Phases)> {
        self.phases.as_ref()
    }

    /// Connect time counts in TTFT and E2E (`[load] cold_connections`).
    pub fn keep_connect_in_latency(&mut self) {
        self.connect_in_latency = true;
    }

    /// The run measures for this long from its window's start.
    pub fn set_duration(&mut self, d: std::time::Duration) {
        self.duration_ns = Some(d.as_nanos() as u64);
    }

    pub fn set_window_start(&mut self, t: Instant) {
        if self.window_start.is_some() {
            return;
        }
        self.window_start = Some(t);
        for r in std::mem::take(&mut self.pending) {
            let d = derive(&r, self.stream, &self.goodput, self.connect_in_latency);
            self.count_in_window(&r, &d);
        }
    }

    /// The run is over: `ran_full` when it went on until its duration was
    /// up, so its window is that duration.
    pub fn close(&mut self, ran_full: bool) {
        self.ran_full = ran_full && self.duration_ns.is_some();
    }

    /// The end of the window where it is known before the run ends.
    fn window_end(&self) -> Option<Instant> {
        let start = self.window_start?;
        start.checked_add(std::time::Duration::from_nanos(self.duration_ns?))
    }

    /// Adds what request `r` did inside the window to the run's in-window
    /// counts: output tokens by their event's arrival, input tokens at the
    /// first output (prefill done), the request at its completion, and its
    /// time in flight clipped to the window. Only successful requests'
    /// tokens and completions count; warm-up requests count like any.
    fn count_in_window(&mut self, r: &RequestRecord, d: &Derived) {
        let Some(start) = self.window_start else {
            return;
        };
        let end = self.window_end();
        let inside = |t: Instant| t >= start && end.is_none_or(|e| t < e);
        let w = self.run.in_window.get_or_insert_default();
        let lo = r.t_send.max(start);
        let hi = end.map_or(r.t_done, |e| r.t_done.min(e));
        w.in_flight_ns += ns(lo, hi);
        if !r.ok() {
            return;
        }
        if inside(r.t_done) {
            w.requests += 1;
            if d.good {
                w.good += 1;
                w.good_output_tokens += d.output as u64;
            }
        }
        let first = r.events.first().map_or(r.t_done, |e| {
            r.t_send + std::time::Duration::from_nanos(e.at_ns)
        });
        if inside(first) {
            w.input_tokens += d.input as u64;
        }
        let at = |e: &infer_bench_protocol::record::OutputEvent| {
            r.t_send + std::time::Duration::from_nanos(e.at_ns)
        };
        // Most requests lie wholly inside or outside the window: count
        // them without spreading tokens over events.
        match (r.events.first(), r.events.last()) {
            (Some(f), Some(l)) if inside(at(f)) && inside(at(l)) => {
                w.output_tokens += d.output as u64;
                w.reasoning_tokens += d.reasoning.map_or(0, |(n, _)| n as u64);
            }
            (Some(f), Some(l)) if at(l) < start || end.is_some_and(|e| at(f) >= e) => {}
            _ => {
                // Reasoning tokens by their events' arrival, as counted
                // from events (a count from usage is not placed in time).
                let per_event = r.tokens_per_event();
                let reasoned = d.reasoning.is_some();
                for (e, k) in r.events.iter().zip(per_event) {
                    if inside(at(e)) {
                        w.output_tokens += k as u64;
                        if reasoned && e.reasoning {
                            w.reasoning_tokens += k as u64;
                        }
                    }
                }
            }
        }
    }

    pub fn window_start(&self) -> Option<Instant> {
        self.window_start
    }

    pub fn note_in_flight(&mut self, n: u64) {
        self.concurrency_max = self.concurrency_max.max(n);
    }

    /// Records one finished request.
    pub fn record(&mut self, r: &RequestRecord) {
        if let Some((origin, p)) = &mut self.phases {
            p.record(*origin, r);
        }
        let d = derive(r, self.stream, &self.goodput, self.connect_in_latency);
        if self.window_start.is_some() {
            self.count_in_window(r, &d);
        } else if r.warmup && self.pending.len() < MAX_PENDING {
            self.pending.push(r.clone());
        }
        if r.warmup {
            self.run.counts.warmup += 1;
            if let Some(e2e) = d.e2e {
                self.warmup_e2e.0 += 1;
                self.warmup_e2e.1 += u128::from(e2e);
            }
            return;
        }
        self.run.add(r, &d);
        if self.ramp {
            self.steps.entry(r.step).or_default().add(r, &d);
        }
        if let Some(turns) = &mut self.turns {
            turns.entry(r.turn).or_default().add(r, &d);
        }
        if let Some(parts) = &mut self.parts {
            parts.entry(r.part).or_default().add(r, &d);
        }
        if let Some(start) = self.window_start {
            let w = ns(start, r.t_done) / self.window_len_ns;
            match &mut self.current_window {
                Some((i, t)) if *i == w => t.add(r, &d),
                // Stragglers from an earlier window count in the current one.
                Some((i, t)) if *i > w => t.add(r, &d),
                _ => {
                    if let Some((i, done)) = self.current_window.take() {
                        self.windows.push((i, done.to_data(self.base)));
                    }
                    let mut t = Tally::default();
                    t.add(r, &d);
                    self.current_window = Some((w, t));
                }
            }
        }
    }

    /// Warm-up requests that answered, and their E2E latencies summed (ms).
    pub fn warmup_e2e(&self) -> (u64, f64) {
        (self.warmup_e2e.0, self.warmup_e2e.1 as f64 / 1e6)
    }

    /// Adds the read delays (µs) the run's probe saw.
    pub fn add_read_delays(&mut self, h: &Hist) {
        let _ = self.run.hists[Series::ReadDelay].add(h);
    }

    /// Counts requests that never finished (run cut short).
    pub fn unfinished(&mut self, n: u64) {
        self.run.counts.unfinished += n;
    }

    /// Counts measured arrivals the client could not send (an open loop
    /// that could not keep its rate).
    pub fn not_sent(&mut self, n: u64) {
        self.run.counts.not_sent += n;
    }

    /// The length of the measurement window: the run's duration when it
    /// ran for all of it, otherwise from its start to the last measured
    /// completion.
    pub fn window_s(&self) -> f64 {
        if let (true, Some(d), Some(_)) = (self.ran_full, self.duration_ns, self.window_start) {
            return d as f64 / 1e9;
        }
        match (self.window_start, self.run.last_done()) {
            (Some(s), Some(e)) if e > s => e.duration_since(s).as_secs_f64(),
            _ => 0.0,
        }
    }

    pub fn stats(&self) -> Stats {
        self.run
            .stats(self.window_s(), self.open, self.concurrency_max)
    }

    /// Full windows only: the partial last window is left out, since a
    /// short tail would add noise, not evidence.
    pub fn windows(&self) -> Vec<WindowStats> {
        let len_s = self.window_len_ns as f64 / 1e9;
        let end = self.window_s();
        let full = |i: u64| (i as f64 + 1.0) * len_s <= end + 1e-9;
        // Closed windows hold data this recorder encoded itself (or merge
        // checked as it read it), so decoding them does not fail.
        let closed = self
            .windows
            .iter()
            .filter(|(i, _)| full(*i))
            .filter_map(|(i, d)| Some((*i, Tally::from_data(d, self.base).ok()?)));
        let current = self
            .current_window
            .iter()
            .filter(|(i, _)| full(*i))
            .map(|(i, t)| (*i, t.clone()));
        closed
            .chain(current)
            .map(|(i, t)| WindowStats {
                start_s: i as f64 * len_s,
                end_s: (i as f64 + 1.0) * len_s,
                stats: t.stats(len_s, self.open, 0),
            })
            .collect()
    }

    /// Per-step tallies (ramp), with the step's length in seconds.
    pub fn steps(&self) -> &BTreeMap<u32, Tally> {
        &self.steps
    }

    /// The most requests in flight at once.
    pub fn concurrency_max(&self) -> u64 {
        self.concurrency_max
    }

    /// This run as one agent's shard, instants from the agreed start `t0`.
    pub fn shard(&self, t0: Instant, agreed_start: String, start_late_ms: f64) -> RunShard {
        let by = offset_ns(t0, self.base);
        let mut windows: BTreeMap<u64, TallyData> = self
            .windows
            .iter()
            .map(|(i, d)| (*i, shifted(d, by)))
            .collect();
        if let Some((i, t)) = &self.current_window {
            windows.insert(*i, t.to_data(t0));
        }
        let data = |m: &BTreeMap<u32, Tally>| m.iter().map(|(k, t)| (*k, t.to_data(t0))).collect();
        RunShard {
            agreed_start,
            start_late_ms,
            window_start_ns: self.window_start.map(|w| offset_ns(t0, w)),
            window_end_ns: self
                .window_end()
                .filter(|_| self.ran_full)
                .map(|e| offset_ns(t0, e)),
            window_len_ns: self.window_len_ns,
            concurrency_max: self.concurrency_max,
            tally: self.run.to_data(t0),
            windows,
            steps: data(&self.steps),
            turns: self.turns.as_ref().map(data).unwrap_or_default(),
            parts: self.parts.as_ref().map(data).unwrap_or_default(),
            phases: self.phases.as_ref().map(|(_, p)| p.to_data()),
            telemetry_origin_s: None,
        }
    }

    /// The recorder of one run as if one process had sent every agent's
    /// share: tallies added, instants on the agreed clock, the window from
    /// the earliest agent's start to the latest completion. The most
    /// requests in flight at once is the sum of the agents' (an upper
    /// bound: their peaks need not coincide).
    pub fn from_shards(
        shards: &[&RunShard],
        stream: bool,
        goodput: Goodput,
        open: bool,
    ) -> Result<Recorder, ShardError> {
        let base = Instant::now();
        let first = shards.first().ok_or(ShardError::NoShards)?;
        let mut r = Recorder {
            stream,
            goodput,
            open,
            run: Tally::default(),
            window_start: None,
            duration_ns: None,
            ran_full: false,
            connect_in_latency: false,
            pending: Vec::new(),
            window_len_ns: first.window_len_ns.max(1),
            current_window: None,
            windows: Vec::new(),
            base,
            steps: BTreeMap::new(),
            ramp: false,
            turns: None,
            parts: None,
            phases: None,
            concurrency_max: 0,
            warmup_e2e: (0, 0),
        };
        let mut windows: BTreeMap<u64, Tally> = BTreeMap::new();
        let mut ends: Option<Instant> = None;
        let mut s_first = true;
        for s in shards {
            if s.window_len_ns != first.window_len_ns {
                return Err(ShardError::WindowLengths);
            }
            r.run.merge_union(&Tally::from_data(&s.tally, base)?);
            if let Some(w) = s.window_start_ns.map(|ns| at_offset(base, ns)) {
                r.window_start = Some(r.window_start.map_or(w, |x| x.min(w)));
            }
            // The window ends at the latest agent's end when every agent
            // ran for its duration.
            ends = match (ends, s.window_end_ns.map(|ns| at_offset(base, ns))) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (None, b) if s_first => b,
                _ => None,
            };
            s_first = false;
            r.concurrency_max = r.concurrency_max.saturating_add(s.concurrency_max);
            for (i, t) in &s.windows {
                windows
                    .entry(*i)
                    .or_default()
                    .merge_union(&Tally::from_data(t, base)?);
            }
            for (i, t) in &s.steps {
                r.ramp = true;
                r.steps
                    .entry(*i)
                    .or_default()
                    .merge_union(&Tally::from_data(t, base)?);
            }
            for (i, t) in &s.turns {
                r.turns
                    .get_or_insert_with(BTreeMap::new)
                    .entry(*i)
                    .or_default()
                    .merge_union(&Tally::from_data(t, base)?);
            }
            for (i, t) in &s.parts {
                r.parts
                    .get_or_insert_with(BTreeMap::new)
                    .entry(*i)
                    .or_default()
                    .merge_union(&Tally::from_data(t, base)?);
            }
            if let Some(p) = &s.phases {
                r.phases
                    .get_or_insert_with(|| (base, Phases::default()))
                    .1
                    .add_all(&Phases::from_data(p));
            }
        }
        if let (Some(start), Some(end)) = (r.window_start, ends) {
            r.duration_ns = Some(end.saturating_duration_since(start).as_nanos() as u64);
            r.ran_full = true;
        }
        r.windows = windows
            .into_iter()
            .map(|(i, t)| (i, t.to_data(base)))
            .collect();
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_protocol::record::OutputEvent;
    use std::time::Duration;

    fn request(
        t0: Instant,
        sched_ms: u64,
        send_lag_us: u64,
        events_ms: &[u64],
        usage: Option<u32>,
    ) -> RequestRecord {
        let t_sched = t0 + Duration::from_millis(sched_ms);
        let mut r = RequestRecord::new(0, 0, 0, false, t_sched);
        r.t_send = t_sched + Duration::from_micros(send_lag_us);
        r.events = events_ms
            .iter()
            .map(|ms| OutputEvent {
                at_ns: ms * 1_000_000,
                text_bytes: 4,
                token_ids: None,
                reasoning: false,
            })
            .collect();
        r.t_done = r.t_send + Duration::from_millis(*events_ms.last().unwrap_or(&0));
        r.usage.completion_tokens = usage;
        r.usage.prompt_tokens = Some(10);
        r.requested_input = 10;
        r.requested_output = usage.unwrap_or(0);
        r
    }

    #[test]
    fn series_index_their_histograms_and_name_the_distributions() {
        for (i, s) in Series::ALL.into_iter().enumerate() {
            assert_eq!(s as usize, i, "{s:?} is at its own index");
        }
        let metrics: Vec<Metric> = Series::ALL.into_iter().filter_map(Series::metric).collect();
        assert_eq!(
            metrics,
            Metric::DISTRIBUTIONS,
            "every distribution is recorded"
        );
        let names: Vec<&str> = Series::ALL.into_iter().map(Series::name).collect();
        assert_eq!(
            names,
            [
                "ttft",
                "ttft_from_send",
                "tpot",
                "itl",
                "itl_token",
                "e2e",
                "dispatch_lag",
                "queue_wait",
                "input_tokens",
                "output_tokens",
                "requested_input",
                "requested_output",
                "connect",
                "read_delay",
                "ttft_reasoning",
                "ttft_answer",
            ]
        );
    }

    #[test]
    fn metrics_follow_their_definitions() {
        let t0 = Instant::now();
        let mut rec = Recorder::new(
            true,
            Goodput::default(),
            false,
            infer_bench_spec::Duration::from_secs(10),
            false,
        );
        rec.set_window_start(t0);
        // Sent 1 ms late; first output 100 ms after send; 4 more events 20 ms apart.
        rec.record(&request(t0, 0, 1000, &[100, 120, 140, 160, 180], Some(5)));
        let s = rec.stats();
        let l = |m: &str| s.latency_ms[m];
        assert!(
            (l("ttft").p50 - 101.0).abs() < 0.2,
            "ttft from scheduled time: {:?}",
            l("ttft")
        );
        assert!((l("ttft_from_send").p50 - 100.0).abs() < 0.2);
        assert!((l("e2e").max - 181.0).abs() < 0.2);
        assert!((l("tpot").p50 - 20.0).abs() < 0.05, "(180-100)/(5-1)");
        assert_eq!(l("itl").count, 4);
        assert!((l("dispatch_lag").p50 - 1.0).abs() < 0.01);
        assert_eq!(s.requests.succeeded, 1);
        assert_eq!(s.tokens.output_total, 5);
        // No body crossed a socket: no payload.
        assert_eq!(s.payload, None);
    }

    /// The payload each way: successful requests' bodies, their means,
    /// and the means times the request rate; failures and requests
    /// without a body count in neither; the totals survive a shard's
    /// round trip (`to_data`, `from_data`), which merging relies on.
    #[test]
    fn payload_is_the_successful_requests_bodies() {
        let t0 = Instant::now();
        let mut rec = Recorder::new(
            true,
            Goodput::default(),
            false,
            infer_bench_spec::Duration::from_secs(10),
            false,
        );
        rec.set_window_start(t0);
        for (i, (sent, received)) in [(1000, 300), (3000, 500), (0, 0)].into_iter().enumerate() {
            let mut r = request(t0, 10 * i as u64, 0, &[100, 120], Some(2));
            r.payload = infer_bench_protocol::Payload { sent, received };
            rec.record(&r);
        }
        let mut failed = request(t0, 50, 0, &[100], Some(1));
        failed.payload = infer_bench_protocol::Payload {
            sent: 1_000_000,
            received: 7,
        };
        failed.failure = Some(infer_bench_protocol::record::Failure {
            class: infer_bench_protocol::record::ErrorClass::Status5xx,
            detail: "HTTP 500".into(),
            status: Some(500),
        });
        rec.record(&failed);
        let s = rec.stats();
        let p = s.payload.expect("two requests carried bodies");
        assert_eq!(
            (p.request_bytes_mean, p.response_bytes_mean),
            (2000.0, 400.0)
        );
        assert!((p.request_bytes_per_s - 2000.0 * s.request_throughput).abs() < 1e-9);
        assert!((p.response_bytes_per_s - 400.0 * s.request_throughput).abs() < 1e-9);
        let data = rec.run.to_data(t0);
        assert_eq!(
            data.payload,
            Some(infer_bench_results::PayloadTotals {
                requests: 2,
                request_bytes: 4000,
                response_bytes: 800,
            })
        );
        let back = Tally::from_data(&data, t0).unwrap();
        assert_eq!(back.payload, rec.run.payload);
    }

    /// A request that had to open a connection: the connect time is left
    /// out of TTFT and E2E (and recorded on its own), unless the spec asks
    /// for cold connections.
    #[test]
    fn connect_time_is_kept_out_of_latency_unless_asked_for() {
        let t0 = Instant::now();
        let mut r = request(t0, 0, 0, &[50, 60, 70], Some(3));
        r.connect_ns = 20_000_000;
        let stats = |cold: bool| {
            let mut rec = Recorder::new(
                true,
                Goodput::default(),
                false,
                infer_bench_spec::Duration::from_secs(1),
                false,
            );
            if cold {
                rec.keep_connect_in_latency();
            }
            rec.set_window_start(t0);
            rec.record(&r);
            rec.stats()
        };
        // Within the histograms' resolution.
        let near = |s: &Stats, m: &str, ms: f64| {
            let p50 = s.latency_ms[m].p50;
            assert!((p50 - ms).abs() < 0.1, "{m} p50 {p50} ms, expected {ms}");
        };
        let warm = stats(false);
        near(&warm, "ttft", 30.0);
        near(&warm, "ttft_from_send", 30.0);
        near(&warm, "e2e", 50.0);
        near(&warm, "connect", 20.0);
        near(&warm, "tpot", 10.0);
        let cold = stats(true);
        near(&cold, "ttft", 50.0);
        near(&cold, "e2e", 70.0);
        near(&cold, "connect", 20.0);
    }

    #[test]
    fn multi_token_events_split_itl_per_token() {
        let t0 = Instant::now();
        let mut rec = Recorder::new(
            true,
            Goodput::default(),
            false,
            infer_bench_spec::Duration::from_secs(10),
            false,
        );
        rec.set_window_start(t0);
        // 3 events, 9 tokens: 3 per event (equal text), 30 ms apart.
        rec.record(&request(t0, 0, 0, &[50, 80, 110], Some(9)));
        let s = rec.stats();
        assert_eq!(s.latency_ms["itl"].count, 2);
        assert!((s.latency_ms["itl"].p50 - 30.0).abs() < 0.05);
        assert_eq!(s.latency_ms["itl_token"].count, 6);
        assert!((s.latency_ms["itl_token"].p50 - 10.0).abs() < 0.02);
        // TPOT uses the token count: (110-50)/(9-1) = 7.5 ms.
        assert!((s.latency_ms["tpot"].p50 - 7.5).abs() < 0.01);
    }

    #[test]
    fn failures_are_counted_not_timed_and_goodput_applies_bounds() {
        let t0 = Instant::now();
        let g = Goodput {
            ttft: Some(infer_bench_spec::Duration::from_millis(60)),
            tpot: None,
            e2e: None,
        };
        let mut rec = Recorder::new(
            true,
            g,
            false,
            infer_bench_spec::Duration::from_secs(10),
            false,
        );
        rec.set_window_start(t0);
        rec.record(&request(t0, 0, 0, &[50, 60], Some(2)));
        rec.record(&request(t0, 0, 0, &[70, 80], Some(2)));
        let mut bad = request(t0, 0, 0, &[], None);
        bad.fail(infer_bench_protocol::ErrorClass::Status5xx, "HTTP 500");
        rec.record(&bad);
        let s = rec.stats();
        assert_eq!(s.requests.failed, 1);
        assert_eq!(s.errors["status_5xx"], 1);
        assert_eq!(s.latency_ms["ttft"].count, 2);
        assert!((s.error_rate - 1.0 / 3.0).abs() < 1e-9);
        assert!((s.goodput_ratio - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn shards_add_up_to_the_whole() {
        let t0 = Instant::now();
        let new = || {
            let mut r = Recorder::new(
                true,
                Goodput::default(),
                true,
                infer_bench_spec::Duration::from_secs(1),
                false,
            );
            r.set_window_start(t0);
            r
        };
        let (mut whole, mut a, mut b) = (new(), new(), new());
        for i in 0..40u64 {
            let r = request(t0, i * 50, 100 + i, &[10 + i, 20 + i, 30 + i], Some(3));
            whole.record(&r);
            if i % 2 == 0 {
                a.record(&r)
            } else {
                b.record(&r)
            }
        }
        let sa = a.shard(t0, "t".into(), 0.0);
        let sb = b.shard(t0, "t".into(), 0.0);
        // Through JSON, as merge reads them.
        let sa: RunShard = serde_json::from_str(&serde_json::to_string(&sa).unwrap()).unwrap();
        let merged = Recorder::from_shards(&[&sa, &sb], true, Goodput::default(), true).unwrap();
        let (m, w) = (merged.stats(), whole.stats());
        assert!((m.window_s - w.window_s).abs() < 1e-6);
        assert_eq!(m.requests, w.requests);
        assert_eq!(m.latency_ms, w.latency_ms);
        assert_eq!(m.tokens, w.tokens);
        assert!((m.output_tokens_per_s - w.output_tokens_per_s).abs() < 1e-6);
        assert!((m.offered_rate.unwrap() - w.offered_rate.unwrap()).abs() < 1e-6);
        assert!((m.concurrency_mean - w.concurrency_mean).abs() < 1e-6);
        assert_eq!(merged.windows(), whole.windows());
    }

    #[test]
    fn windows_split_by_completion_time() {
        let t0 = Instant::now();
        let mut rec = Recorder::new(
            true,
            Goodput::default(),
            false,
            infer_bench_spec::Duration::from_secs(1),
            false,
        );
        rec.set_window_start(t0);
        for i in 0..30u64 {
            rec.record(&request(t0, i * 100, 0, &[10, 20], Some(2)));
        }
        // Completions run to 2.92 s: two full windows; the partial third is left out.
        let w = rec.windows();
        assert_eq!(w.len(), 2);
        assert_eq!(
            w.iter().map(|w| w.stats.requests.succeeded).sum::<u64>(),
            20
        );
        assert_eq!(rec.stats().requests.succeeded, 30);
    }

    /// Throughput counts what happened inside the window: a request that
    /// streams across the window's end contributes the tokens that arrived
    /// before it, a warm-up request those that arrived after the start,
    /// and the window of a run that ran its whole duration is that
    /// duration, not the time to the last completion.
    #[test]
    fn throughput_counts_tokens_where_they_arrive() {
        let t0 = Instant::now();
        let mut rec = Recorder::new(
            true,
            Goodput::default(),
            false,
            infer_bench_spec::Duration::from_secs(10),
            false,
        );
        rec.set_duration(Duration::from_secs(1));
        // Warm-up by count: the window's start is learnt later.
        let mut warm = request(t0, 0, 0, &[400, 800, 1200, 1600], Some(4));
        warm.warmup = true;
        rec.record(&warm);
        rec.set_window_start(t0 + Duration::from_millis(1000));
        // Wholly inside: 3 tokens, done inside.
        rec.record(&request(t0, 1100, 0, &[100, 200, 300], Some(3)));
        // Across the end (2 s): events at 1.5, 1.9, 2.3, 2.7 s: 2 inside.
        rec.record(&request(t0, 1400, 0, &[100, 500, 900, 1300], Some(4)));
        rec.close(true);
        let s = rec.stats();
        assert_eq!(s.window_s, 1.0);
        // 1 (warm-up's 1.2 s; its 1.6 s too) -> 2, + 3 + 2.
        assert_eq!(s.output_tokens_per_s, 7.0);
        // Completions inside: the warm-up (1.6 s) and the short one (1.4 s).
        assert_eq!(s.request_throughput, 2.0);
        // Input at the first output: the short one and the long one (1.5 s).
        assert_eq!(s.input_tokens_per_s, 20.0);
        // Per-request statistics are the measured requests', as before.
        assert_eq!(s.requests.succeeded, 2);
        assert_eq!(s.tokens.output_total, 7);
        // In flight inside the window: 0.6 + 0.3 + 0.6 s.
        assert!(
            (s.concurrency_mean - 1.5).abs() < 1e-9,
            "{}",
            s.concurrency_mean
        );

        // Cut short (an interruption, a request count): the window ends at
        // the last measured completion, 2.7 s.
        let mut short = Recorder::new(
            true,
            Goodput::default(),
            false,
            infer_bench_spec::Duration::from_secs(10),
            false,
        );
        short.set_window_start(t0 + Duration::from_millis(1000));
        short.record(&request(t0, 1400, 0, &[100, 500, 900, 1300], Some(4)));
        short.close(false);
        let s = short.stats();
        assert!((s.window_s - 1.7).abs() < 1e-9, "{}", s.window_s);
        assert!((s.output_tokens_per_s - 4.0 / 1.7).abs() < 1e-9);
    }

    /// A tally from a file written before in-window counting (version 1)
    /// keeps its rates from totals, also once merged with a newer one.
    #[test]
    fn tallies_without_in_window_counts_fall_back_on_totals() {
        let t0 = Instant::now();
        let mut rec = Recorder::new(
            true,
            Goodput::default(),
            false,
            infer_bench_spec::Duration::from_secs(10),
            false,
        );
        rec.set_window_start(t0);
        rec.record(&request(t0, 0, 0, &[10, 20], Some(2)));
        let mut old = rec.run.to_data(t0);
        assert!(old.in_window.is_some());
        old.in_window = None;
        let back = Tally::from_data(&old, t0).unwrap();
        assert_eq!(back.rate_basis().output_tokens, 2);
        let mut merged = Tally::default();
        merged.merge(&rec.run);
        merged.merge(&back);
        assert!(merged.to_data(t0).in_window.is_none());
        assert_eq!(merged.stats(1.0, false, 1).output_tokens_per_s, 4.0);
    }
}
