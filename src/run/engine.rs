//! The load engine: one run of one point. A single dispatch loop serves
//! every load mode: it walks the arrival schedule, waits precisely until
//! each arrival is due (on its own OS thread, so tokio's millisecond timer
//! never delays a send), takes a concurrency slot where the point has a
//! limit, and hands the request to the runtime. A closed loop is the same
//! loop with every arrival due "now" and as many slots as its concurrency:
//! its scheduled time is the moment a slot frees. Warm-up requests are sent
//! and excluded; the run drains its in-flight requests before it ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;

use super::recorder::Recorder;
use crate::backend::{Backend, RequestRecord};
use crate::plan::PointConfig;
use crate::spec::{Level, Warmup};
use crate::workload::arrival::step_at;
use crate::workload::seed::{Purpose, derive};
use crate::workload::{Arrivals, PromptGen};

/// Ctrl-C, shared by everything that waits.
#[derive(Default)]
pub struct Interrupt {
    flag: AtomicBool,
    notify: Notify,
}

impl Interrupt {
    pub fn trigger(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }
    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
    pub async fn wait(&self) {
        let notified = self.notify.notified();
        if self.is_set() {
            return;
        }
        notified.await;
    }
}

/// Live counters for progress display.
#[derive(Default)]
pub struct Live {
    pub done: AtomicU64,
    pub failed: AtomicU64,
    pub in_flight: AtomicU64,
}

/// Where a finished request goes besides the recorder (per-request JSONL).
pub type Sink = Arc<dyn Fn(&RequestRecord) + Send + Sync>;

/// What one run needs besides the point.
pub struct RunEnv {
    pub handle: tokio::runtime::Handle,
    pub interrupt: Arc<Interrupt>,
    pub live: Arc<Live>,
    pub sink: Option<Sink>,
    /// Load sharding: this process sends arrivals with index % n == k - 1.
    pub agent: Option<(u32, u32)>,
    /// Agents start together at this instant.
    pub start_at: Option<Instant>,
}

/// What a run produced.
pub struct RunOutcome {
    pub recorder: Recorder,
    pub interrupted: bool,
    pub started: Instant,
}

/// Lets this thread sleep with microsecond precision (Linux: 1 ns timer slack).
fn tighten_timer_slack() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes an integer and affects only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Waits until `deadline`: sleeps most of the way, spins the last 100 µs.
/// Returns false if interrupted first.
fn pace_until(deadline: Instant, interrupt: &Interrupt) -> bool {
    loop {
        if interrupt.is_set() {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        let left = deadline - now;
        if left > Duration::from_micros(200) {
            std::thread::sleep((left - Duration::from_micros(100)).min(Duration::from_millis(50)));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Runs one run of a point and returns its recorder.
pub fn run_once<B: Backend>(
    backend: Arc<B>,
    cfg: &PointConfig,
    point_hash: &str,
    run: u32,
    env: &RunEnv,
) -> RunOutcome {
    tighten_timer_slack();
    let load = &cfg.load;
    let arrival_seed = derive(cfg.seed, point_hash, run, Purpose::Arrivals);
    let request_seed = derive(cfg.seed, point_hash, run, Purpose::Requests);
    let prefix_seed = derive(cfg.seed, point_hash, 0, Purpose::Prefixes);
    let prompts = PromptGen::new(&cfg.workload, request_seed, prefix_seed);
    let warmup_ns = match load.warmup {
        Warmup::Time(d) => d.as_nanos(),
        _ => 0,
    };
    let horizon = load
        .duration
        .map(|d| warmup_ns + d.as_nanos())
        .unwrap_or(u64::MAX);
    let arrivals = Arrivals::new(load, arrival_seed, horizon);
    let open = arrivals.is_open();
    // Slots: a closed loop's concurrency (its first ramp level), or an open loop's cap.
    let slots: Option<Arc<Semaphore>> = match (load.level, load.max_concurrency) {
        (Level::Concurrency(c), _) => Some(Arc::new(Semaphore::new(c as usize))),
        (Level::Rate(_), Some(m)) => Some(Arc::new(Semaphore::new(m as usize))),
        _ => None,
    };
    let recorder = Arc::new(Mutex::new(Recorder::new(
        cfg.workload.stream,
        cfg.goodput.clone(),
        open,
        load.window,
        load.ramp.is_some(),
    )));
    let live = env.live.clone();
    let interrupt = env.interrupt.clone();
    let mut tasks: JoinSet<()> = JoinSet::new();

    // Start a little ahead so the first arrivals are not already late.
    let t0 = match env.start_at {
        Some(t) => t,
        None => Instant::now() + Duration::from_millis(5),
    };
    let mut warmup_end: Option<Instant> = match load.warmup {
        Warmup::Time(d) => Some(t0 + d.as_std()),
        Warmup::None => Some(t0),
        Warmup::Requests(_) => None,
    };
    let mut measure_end: Option<Instant> =
        warmup_end.and_then(|w| load.duration.map(|d| w + d.as_std()));
    if let Some(w) = warmup_end {
        recorder.lock().set_window_start(w);
    }
    // Closed-loop ramps change the number of slots at each step.
    let ramp_task = match (&load.ramp, &slots) {
        (Some(r), Some(sem)) if !open => {
            let sem = sem.clone();
            let levels = r.levels.clone();
            let every = r.every.as_std();
            let start = warmup_end.unwrap_or(t0);
            Some(env.handle.spawn(async move {
                let mut current = match levels[0] {
                    Level::Concurrency(c) => c as i64,
                    _ => 0,
                };
                for (i, l) in levels.iter().enumerate().skip(1) {
                    tokio::time::sleep_until((start + every * i as u32).into()).await;
                    let next = if let Level::Concurrency(c) = l {
                        *c as i64
                    } else {
                        current
                    };
                    if next > current {
                        sem.add_permits((next - current) as usize);
                    } else if next < current {
                        if let Ok(p) = sem
                            .clone()
                            .acquire_many_owned((current - next) as u32)
                            .await
                        {
                            p.forget();
                        }
                    }
                    current = next;
                }
            }))
        }
        _ => None,
    };

    let mut measured: u64 = 0;
    let mut interrupted = false;
    let warmup_count = match load.warmup {
        Warmup::Requests(n) => n,
        _ => 0,
    };
    for due in arrivals {
        if let Some((k, n)) = env.agent {
            if due.index % n as u64 != (k - 1) as u64 {
                continue;
            }
        }
        let is_warmup_by_count = due.index < warmup_count;
        if !is_warmup_by_count && load.requests.is_some_and(|n| measured >= n) {
            break;
        }
        // Build the request before it is due.
        let prompt = prompts.prompt(due.index);
        let prepared = backend.prepare(&prompt);
        let t_due = match due.at_ns {
            Some(ns) => {
                let t = t0 + Duration::from_nanos(ns);
                if !pace_until(t, &interrupt) {
                    interrupted = true;
                    break;
                }
                t
            }
            None => {
                if !pace_until(t0, &interrupt) {
                    interrupted = true;
                    break;
                }
                Instant::now()
            }
        };
        if measure_end.is_some_and(|end| t_due >= end) {
            break;
        }
        // A slot, if the point has a limit: wait for it, but not past the end.
        let permit = match &slots {
            None => None,
            Some(sem) => {
                let sem = sem.clone();
                let end = measure_end;
                let intr = interrupt.clone();
                let got = env.handle.block_on(async move {
                    tokio::select! {
                        p = sem.acquire_owned() => p.ok(),
                        _ = async { match end { Some(e) => tokio::time::sleep_until(e.into()).await, None => std::future::pending().await } } => None,
                        _ = intr.wait() => None,
                    }
                });
                match got {
                    Some(p) => Some(p),
                    None => {
                        interrupted = interrupt.is_set();
                        break;
                    }
                }
            }
        };
        let t_slot = Instant::now();
        let t_sched = if open { t_due } else { t_slot };
        if measure_end.is_some_and(|end| t_sched >= end) {
            break;
        }
        let warmup = match load.warmup {
            Warmup::Requests(_) => is_warmup_by_count,
            _ => warmup_end.is_some_and(|w| t_sched < w),
        };
        if !warmup {
            if warmup_end.is_none() {
                warmup_end = Some(t_sched);
                measure_end = load.duration.map(|d| t_sched + d.as_std());
                recorder.lock().set_window_start(t_sched);
            }
            measured += 1;
        }
        let step = step_at(
            load,
            t_sched
                .saturating_duration_since(warmup_end.unwrap_or(t0))
                .as_nanos() as u64,
        );
        let mut rec = RequestRecord::new(due.index, run, step, warmup, t_sched);
        rec.t_slot = t_slot;
        let backend = backend.clone();
        let recorder = recorder.clone();
        let live = live.clone();
        let sink = env.sink.clone();
        let in_flight = live.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        if !warmup {
            recorder.lock().note_in_flight(in_flight);
        }
        tasks.spawn_on(
            async move {
                let rec = backend.send(prepared, rec).await;
                live.in_flight.fetch_sub(1, Ordering::Relaxed);
                drop(permit);
                if !rec.warmup {
                    live.done.fetch_add(1, Ordering::Relaxed);
                    if !rec.ok() {
                        live.failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                recorder.lock().record(&rec);
                if let Some(s) = sink {
                    s(&rec);
                }
            },
            &env.handle,
        );
        // Reap finished tasks so memory does not grow with the run.
        while tasks.try_join_next().is_some() {}
    }
    if let Some(t) = ramp_task {
        t.abort();
    }
    // Drain: every request has its own total timeout, so this ends.
    let intr = interrupt.clone();
    let unfinished = env.handle.block_on(async {
        tokio::select! {
            _ = async { while tasks.join_next().await.is_some() {} } => 0,
            _ = intr.wait() => {
                let n = tasks.len() as u64;
                tasks.abort_all();
                n
            }
        }
    });
    interrupted |= interrupt.is_set();
    let mut recorder = Arc::try_unwrap(recorder)
        .map(Mutex::into_inner)
        .unwrap_or_else(|arc| {
            // Aborted tasks may still hold a reference briefly; copy what we have.
            let guard = arc.lock();
            let mut r = Recorder::new(
                cfg.workload.stream,
                cfg.goodput.clone(),
                open,
                load.window,
                load.ramp.is_some(),
            );
            r.run = guard.run.clone();
            if let Some(w) = guard.window_start() {
                r.set_window_start(w);
            }
            r
        });
    recorder.unfinished(unfinished);
    RunOutcome {
        recorder,
        interrupted,
        started: t0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::fake::FakeBackend;
    use crate::spec::raw::{Api, Arrival};
    use crate::spec::{
        Dist, Duration as D, Goodput, Load, Model, Rate, Target, Timeouts, Workload,
    };

    fn config(
        level: Level,
        arrival: Arrival,
        duration_ms: u64,
        requests: Option<u64>,
    ) -> PointConfig {
        let t = D::from_secs(5);
        PointConfig {
            target: Target {
                name: "t".into(),
                kind: crate::spec::raw::TargetKind::Openai,
                base_url: None,
                api_key_env: None,
                headers: Default::default(),
                metrics_url: None,
                tls_insecure: false,
                ca_cert: None,
                launch: None,
                gpu_ids: None,
                sim: None,
            },
            model: Model {
                name: "m".into(),
                served_name: "m".into(),
                tokenizer: None,
                weights: None,
                params_b: None,
                architecture: None,
            },
            precision: None,
            workload: Workload {
                name: "w".into(),
                api: Api::Completions,
                input_tokens: Some(Dist::Fixed(8)),
                output_tokens: Some(Dist::Fixed(4)),
                shared_prefix: None,
                dataset: None,
                conversation: None,
                ignore_eos: true,
                stream: true,
                max_tokens_field: "max_tokens".into(),
                sampling: Default::default(),
                extra_body: Default::default(),
            },
            load: Load {
                arrival,
                burstiness: 1.0,
                level,
                max_concurrency: None,
                ramp: None,
                warmup: Warmup::None,
                duration: (duration_ms > 0).then(|| D::from_millis(duration_ms)),
                requests,
                runs: 1,
                window: D::from_secs(1),
                timeouts: Timeouts {
                    connect: t,
                    first_token: t,
                    idle: t,
                    total: t,
                },
            },
            goodput: Goodput::default(),
            seed: 1,
        }
    }

    fn env(rt: &tokio::runtime::Runtime) -> RunEnv {
        RunEnv {
            handle: rt.handle().clone(),
            interrupt: Arc::new(Interrupt::default()),
            live: Arc::new(Live::default()),
            sink: None,
            agent: None,
            start_at: None,
        }
    }

    #[test]
    fn closed_loop_keeps_its_slots_busy() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let cfg = config(Level::Concurrency(4), Arrival::Closed, 0, Some(40));
        let out = run_once(Arc::new(FakeBackend::default()), &cfg, "h", 0, &env(&rt));
        let s = out.recorder.stats();
        assert_eq!(s.requests.succeeded, 40);
        assert_eq!(s.concurrency_max, 4);
        assert!(s.concurrency_mean > 3.0, "{}", s.concurrency_mean);
        assert!(!out.interrupted);
    }

    #[test]
    fn open_loop_sends_at_the_offered_rate() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let rate = Rate::per_second(200.0).unwrap();
        let cfg = config(Level::Rate(rate), Arrival::Constant, 1000, None);
        let out = run_once(Arc::new(FakeBackend::default()), &cfg, "h", 0, &env(&rt));
        let s = out.recorder.stats();
        assert!(
            (195..=200).contains(&s.requests.sent),
            "{}",
            s.requests.sent
        );
        let achieved = s.achieved_send_rate.unwrap();
        assert!((achieved / 200.0 - 1.0).abs() < 0.01, "achieved {achieved}");
        assert!(
            s.latency_ms["dispatch_lag"].p99 < 1.0,
            "{:?}",
            s.latency_ms["dispatch_lag"]
        );
    }

    #[test]
    fn warmup_requests_are_sent_and_excluded() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let mut cfg = config(Level::Concurrency(2), Arrival::Closed, 0, Some(10));
        cfg.load.warmup = Warmup::Requests(4);
        let out = run_once(Arc::new(FakeBackend::default()), &cfg, "h", 0, &env(&rt));
        let s = out.recorder.stats();
        assert_eq!(s.requests.succeeded, 10);
        assert_eq!(s.requests.warmup, 4);
    }

    #[test]
    fn interruption_stops_the_run_and_counts_what_was_in_flight() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let cfg = config(Level::Concurrency(3), Arrival::Closed, 60_000, None);
        let e = env(&rt);
        let intr = e.interrupt.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            intr.trigger();
        });
        let slow = FakeBackend {
            ttft: Duration::from_secs(30),
            ..FakeBackend::default()
        };
        let started = Instant::now();
        let out = run_once(Arc::new(slow), &cfg, "h", 0, &e);
        assert!(out.interrupted);
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(out.recorder.stats().requests.unfinished, 3);
    }
}
