//! What a person sees of a run on stderr: the command line's observer of
//! the engine ([`Terminal`]), and the live progress of a run, only when
//! stderr is a terminal (`Progress::Live`; CI logs get one plain line per
//! point instead): one
//! bar per run, drawn by `indicatif`, that says which phase the run is in
//! and its time in that phase (warm-up against the warm-up, the
//! measurement against `duration`: warm-up is never counted against the
//! duration), requests done and failed, in flight, the request rate over
//! the measurement so far (not a one-second rate that reads 0 between
//! completions), and the whole plan's remaining time from its estimate.
//!
//! The message is cut to the terminal's width (`wide_msg`), never wrapped:
//! a wrapped line cannot be redrawn in place.
//!
//! [`Phase`] and [`Status::line`] are pure, so what the bar says is
//! tested without a terminal.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::run::{DialectFrom, Event, Live, Observer};
use infer_bench_results::redact;
use infer_bench_spec::Warmup;
use infer_bench_spec::plan::PointConfig;
use infer_bench_spec::results::PointResult;

/// How progress is shown on stderr.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Progress {
    /// A live bar per run (stderr is a terminal).
    Live,
    /// One line when each point ends (CI logs).
    Lines,
    /// Nothing but errors and warnings.
    Quiet,
}

/// The command line's observer of a run: errors and warnings always,
/// each server's readiness and each point's line unless quiet, a live bar
/// per run on a terminal, and the details of `-v`. Everything it prints
/// is masked with the run's redactor.
pub struct Terminal {
    progress: Progress,
    verbose: bool,
    ticker: Mutex<Option<Ticker>>,
}

impl Terminal {
    pub fn new(progress: Progress, verbose: bool) -> Terminal {
        Terminal {
            progress,
            verbose,
            ticker: Mutex::new(None),
        }
    }

    fn shows_progress(&self) -> bool {
        self.progress != Progress::Quiet
    }
}

/// `s` with the run's secrets masked.
fn red(s: &str) -> String {
    redact::global().text(s)
}

impl Observer for Terminal {
    fn event(&self, event: &Event<'_>) {
        match event {
            Event::TlsInsecure { target } => say!(
                "warning: TLS certificate verification is off for target {target} (tls_insecure = true): \
                 anyone between this machine and the server can read and change the traffic, API key included"
            ),
            Event::ServerFailed { group, message } | Event::ServerDied { group, message } => {
                say!("error: {group}: {}", red(message))
            }
            Event::NoWatchdog { message } => say!(
                "warning: cannot start the watchdog that stops the server if infer-bench is killed: {message}"
            ),
            Event::NotScraping { target, url, why } => {
                say!("warning: {target}: not scraping {}: {}", red(url), red(why))
            }
            Event::ServerReady {
                group,
                url,
                after,
                sim,
            } => {
                if !self.shows_progress() {
                    return;
                }
                // What decides a simulator's answers besides its GPU, on a
                // line of its own under the server's.
                let kv = sim
                    .map(|i| {
                        format!(
                            "\n  {} profile, {} scheduler, {} sequences and {} tokens a step; KV cache {}, {} tokens; admission {}",
                            i.profile.as_deref().unwrap_or_default(),
                            i.scheduler.as_deref().unwrap_or_default(),
                            i.max_num_seqs.unwrap_or(0),
                            i.max_batched_tokens.unwrap_or(0),
                            i.kv_dtype.as_deref().unwrap_or_default(),
                            i.kv_cache_tokens.unwrap_or(0),
                            i.admission.as_deref().unwrap_or_default()
                        )
                    })
                    .unwrap_or_default();
                match url {
                    None => say!(
                        "{group}: simulated in virtual time: no server, no sockets, an ideal client{kv}"
                    ),
                    Some(url) => say!(
                        "{group}: server ready in {:.1}s at {}{kv}",
                        after.as_secs_f64(),
                        red(url)
                    ),
                }
            }
            Event::QualityDone {
                group,
                answered,
                prompts,
                elapsed,
            } => {
                if self.shows_progress() || answered < prompts {
                    say!(
                        "{group}: quality prompts answered: {answered} of {prompts} in {:.1}s (outside the timed window)",
                        elapsed.as_secs_f64()
                    );
                }
            }
            Event::Preflight { label, finding } => {
                if self.verbose {
                    say!("{label}: pre-flight: {}", finding.message);
                }
            }
            Event::Dialect {
                label,
                dialect,
                from,
            } => {
                if self.verbose {
                    let how = match from {
                        DialectFrom::Spec => "declared in the spec",
                        DialectFrom::Simulator => "the simulator's",
                        DialectFrom::Server => "named by the server's /v1/models",
                        DialectFrom::Default => "the server did not name one",
                    };
                    say!("{label}: requests in the {dialect} dialect ({how})");
                }
            }
            Event::Warmed {
                label,
                run,
                connections,
                took,
                failed,
            } => {
                if self.verbose {
                    say!(
                        "{label}: run {}: {connections} connections opened before the clock in {:.1} ms{}",
                        run + 1,
                        took.as_secs_f64() * 1e3,
                        failed.map(|e| format!(" ({e})")).unwrap_or_default()
                    );
                }
            }
            Event::RunStarted(start) => {
                if self.progress == Progress::Live {
                    let ticker = Ticker::start(
                        start.label.to_string(),
                        start.run,
                        start.config,
                        start.live.clone(),
                        start.after_s,
                    );
                    if let Some(old) = self.ticker.lock().replace(ticker) {
                        old.stop();
                    }
                }
            }
            Event::RunEnded { label, run, stats } => {
                if let Some(t) = self.ticker.lock().take() {
                    t.stop();
                }
                if let (true, Some(stats)) = (self.verbose, stats) {
                    let failures = stats
                        .errors
                        .iter()
                        .map(|(k, v)| format!("{k} {v}"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    say!(
                        "{label}: run {}: window {:.2} s, {} sent, {} ok, {} failed{}, {:.2} req/s, {:.0} output tok/s",
                        run + 1,
                        stats.window_s,
                        stats.requests.sent,
                        stats.requests.succeeded,
                        stats.requests.failed,
                        if failures.is_empty() {
                            String::new()
                        } else {
                            format!(" ({failures})")
                        },
                        stats.request_throughput,
                        stats.output_tokens_per_s
                    );
                }
            }
            Event::PointDone { label, point } => {
                if self.shows_progress() {
                    say!("{}", red(&summary_line(label, point)));
                }
            }
            Event::SearchDone { label, answer } => {
                if self.shows_progress() {
                    say!(
                        "{label}: capacity ({}, {}): {}",
                        answer.target,
                        answer.outcome.name(),
                        answer.answer()
                    );
                }
            }
        }
    }
}

/// One line per finished point, for logs.
fn summary_line(label: &str, p: &PointResult) -> String {
    let s = &p.merged;
    let ms = |m: &str| {
        s.latency_ms
            .get(m)
            .map(|x| format!("{:.1}", x.p50))
            .unwrap_or_else(|| "-".into())
    };
    let failure = p
        .failure
        .as_ref()
        .map(|f| format!(" ({f})"))
        .unwrap_or_default();
    // A request that generates no text has its own units and no TTFT.
    if !p.config.workload.api.generates() {
        let per_s = |name: &str, x: Option<f64>| {
            x.map(|v| format!(", {v:.1} {name}/s")).unwrap_or_default()
        };
        let items = if p.config.workload.api == crate::spec::raw::Api::Kserve {
            "items"
        } else {
            "inputs"
        };
        return format!(
            "{label}: {} ok, {} failed, {:.2} req/s{}{}, latency p50 {} ms{failure}",
            s.requests.succeeded,
            s.requests.failed,
            s.request_throughput,
            per_s(items, s.inputs_per_s),
            per_s("documents", s.documents_per_s),
            ms("e2e"),
        );
    }
    format!(
        "{label}: {} ok, {} failed, {:.2} req/s, {:.0} out tok/s, TTFT p50 {} ms, TPOT p50 {} ms{failure}",
        s.requests.succeeded,
        s.requests.failed,
        s.request_throughput,
        s.output_tokens_per_s,
        ms("ttft"),
        ms("tpot"),
    )
}

/// What a run is doing, from its elapsed time and its settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Phase {
    /// Sent, not measured: seconds into the warm-up, and its length when
    /// it is a time.
    WarmUp(f64, Option<f64>),
    /// Measured: seconds into the measurement, and `duration` when set.
    Measure(f64, Option<f64>),
    /// After `duration` (the second field): seconds the requests still in
    /// flight have been finishing.
    Drain(f64, f64),
}

/// A run's shape, as the ticker reads it.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub warmup_s: Option<f64>,
    /// Warm-up by request count: measured from the first measured
    /// completion on.
    pub warmup_requests: bool,
    pub duration_s: Option<f64>,
    /// Ends by request count.
    pub requests: Option<u64>,
}

impl Shape {
    pub fn of(cfg: &PointConfig) -> Shape {
        let (warmup_s, warmup_requests) = match cfg.load.warmup {
            Warmup::Time(d) => (Some(d.as_secs_f64()), false),
            Warmup::Requests(_) => (None, true),
            Warmup::None => (None, false),
        };
        Shape {
            warmup_s,
            warmup_requests,
            duration_s: cfg.load.duration.map(|d| d.as_secs_f64()),
            requests: cfg.load.requests,
        }
    }

    /// The phase `elapsed` seconds into the run, `measured_since` seconds
    /// into the run when a warm-up by count ended (first measured request).
    pub fn phase(&self, elapsed: f64, measured_since: Option<f64>) -> Phase {
        let start = match (self.warmup_s, self.warmup_requests) {
            (Some(w), _) => Some(w),
            (None, true) => measured_since,
            (None, false) => Some(0.0),
        };
        match start {
            Some(s) if elapsed >= s => {
                let m = elapsed - s;
                match self.duration_s {
                    Some(d) if m > d => Phase::Drain(m - d, d),
                    d => Phase::Measure(m, d),
                }
            }
            _ => Phase::WarmUp(elapsed, self.warmup_s),
        }
    }

    /// Seconds of the run left, when the plan can say (a run by time).
    pub fn left_s(&self, elapsed: f64) -> Option<f64> {
        let total = self.warmup_s.unwrap_or(0.0) + self.duration_s?;
        Some((total - elapsed).max(0.0))
    }
}

/// What the bar says at one instant.
#[derive(Debug, Clone, Copy)]
pub struct Status {
    pub phase: Phase,
    pub done: u64,
    pub failed: u64,
    pub in_flight: u64,
    /// The plan's time left after this run, when known.
    pub eta_s: Option<f64>,
}

impl Status {
    /// The bar's message, e.g. "measure 1.2s/2s  91 done  0 failed  8 in
    /// flight  75.8 req/s  plan ETA 1m04s".
    pub fn line(&self) -> String {
        let phase = match self.phase {
            Phase::WarmUp(t, Some(w)) => format!("warm-up {t:.1}s/{}", secs(w)),
            Phase::WarmUp(t, None) => format!("warm-up {t:.1}s"),
            Phase::Measure(t, Some(d)) => format!("measure {t:.1}s/{}", secs(d)),
            Phase::Measure(t, None) => format!("measure {t:.1}s"),
            Phase::Drain(t, _) => format!("drain {t:.1}s"),
        };
        let measured = match self.phase {
            Phase::Measure(t, _) => t,
            Phase::Drain(t, d) => t + d,
            Phase::WarmUp(..) => 0.0,
        };
        let rate = if measured > 0.0 {
            format!("{:.1} req/s", self.done as f64 / measured)
        } else {
            "- req/s".into()
        };
        let eta = self
            .eta_s
            .map(|s| format!("  plan ETA {}", clock(s)))
            .unwrap_or_default();
        format!(
            "{phase}  {} done  {} failed  {} in flight  {rate}{eta}",
            self.done, self.failed, self.in_flight
        )
    }
}

/// "2s", "1.5s".
fn secs(s: f64) -> String {
    if s.fract() == 0.0 {
        format!("{s:.0}s")
    } else {
        format!("{s:.1}s")
    }
}

/// "42s", "7m42s", "1h02m".
pub fn clock(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

pub struct Ticker {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Ticker {
    /// A bar for run `run` of the point `label`; `after_s` is the plan's
    /// estimated time after this point's runs (`None` when some later
    /// point ends by request count).
    pub fn start(
        label: String,
        run: u32,
        cfg: &PointConfig,
        live: Arc<Live>,
        after_s: Option<f64>,
    ) -> Ticker {
        use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let runs = cfg.load.runs;
        let shape = Shape::of(cfg);
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            // Length in milliseconds of a run by time, in requests of a
            // run by count; a spinner otherwise.
            let by_time = shape.left_s(0.0);
            let len = match (by_time, shape.requests) {
                (Some(t), _) => Some((t * 1000.0) as u64),
                (None, Some(n)) => Some(n),
                _ => None,
            };
            let bar = match len {
                Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
                None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
            };
            let template = if len.is_some() {
                "{prefix} [{bar:20}] {wide_msg}"
            } else {
                "{prefix} {spinner} {wide_msg}"
            };
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            let runs_s = if runs > 1 {
                format!(" run {}/{runs}", run + 1)
            } else {
                String::new()
            };
            bar.set_prefix(format!("{label}{runs_s}"));
            let mut measured_since: Option<f64> = None;
            loop {
                let elapsed = start.elapsed().as_secs_f64();
                let done = live.done.load(Ordering::Relaxed);
                if done > 0 && measured_since.is_none() {
                    measured_since = Some(elapsed);
                }
                let phase = shape.phase(elapsed, measured_since);
                let this_point = shape
                    .left_s(elapsed)
                    .map(|left| left + (runs - run - 1) as f64 * shape.left_s(0.0).unwrap_or(0.0));
                let status = Status {
                    phase,
                    done,
                    failed: live.failed.load(Ordering::Relaxed),
                    in_flight: live.in_flight.load(Ordering::Relaxed),
                    eta_s: this_point.zip(after_s).map(|(a, b)| a + b),
                };
                match (by_time, shape.requests) {
                    (Some(_), _) => bar.set_position((elapsed * 1000.0) as u64),
                    (None, Some(_)) => bar.set_position(done),
                    _ => bar.tick(),
                }
                bar.set_message(status.line());
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            bar.finish_and_clear();
        });
        Ticker { stop, thread }
    }

    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: Shape = Shape {
        warmup_s: Some(0.5),
        warmup_requests: false,
        duration_s: Some(20.0),
        requests: None,
    };

    /// Warm-up is its own phase: 21.8 s into a run with 0.5 s of warm-up
    /// and a 20 s duration is 1.3 s of drain, never "21.8s/20s".
    #[test]
    fn each_phase_counts_its_own_time() {
        assert_eq!(SHAPE.phase(0.2, None), Phase::WarmUp(0.2, Some(0.5)));
        assert_eq!(SHAPE.phase(1.5, None), Phase::Measure(1.0, Some(20.0)));
        let Phase::Drain(d, 20.0) = SHAPE.phase(21.8, None) else {
            panic!("{:?}", SHAPE.phase(21.8, None))
        };
        assert!((d - 1.3).abs() < 1e-9, "{d}");
        let drain = Status {
            phase: SHAPE.phase(21.8, None),
            done: 42,
            failed: 1,
            in_flight: 2,
            eta_s: Some(0.0),
        };
        assert_eq!(
            drain.line(),
            "drain 1.3s  42 done  1 failed  2 in flight  2.0 req/s  plan ETA 0s"
        );
        assert_eq!(SHAPE.left_s(0.5), Some(20.0));
        // A warm-up by count ends with the first measured request.
        let by_count = Shape {
            warmup_s: None,
            warmup_requests: true,
            duration_s: None,
            requests: Some(100),
        };
        assert_eq!(by_count.phase(3.0, None), Phase::WarmUp(3.0, None));
        assert_eq!(by_count.phase(3.0, Some(2.0)), Phase::Measure(1.0, None));
        assert_eq!(by_count.left_s(1.0), None);
    }

    /// The rate is over the measurement so far: 8 requests done 4 s into
    /// the measurement at concurrency 1 is 2.0 req/s, not 0.0.
    #[test]
    fn the_line_says_counts_rate_and_plan_eta() {
        let s = Status {
            phase: SHAPE.phase(4.5, None),
            done: 8,
            failed: 0,
            in_flight: 1,
            eta_s: Some(462.0),
        };
        assert_eq!(
            s.line(),
            "measure 4.0s/20s  8 done  0 failed  1 in flight  2.0 req/s  plan ETA 7m42s"
        );
        let warm = Status {
            phase: SHAPE.phase(0.3, None),
            done: 0,
            failed: 0,
            in_flight: 4,
            eta_s: None,
        };
        assert_eq!(
            warm.line(),
            "warm-up 0.3s/0.5s  0 done  0 failed  4 in flight  - req/s"
        );
        assert_eq!(clock(3725.0), "1h02m");
        assert_eq!(clock(42.4), "42s");
    }
}
