//! A long run's memory: the recorder of one run, fed in-process (no
//! sockets) the records of one hour at 100 requests per second with the
//! default 10 s window, must hold less than 20 MB. Every byte the recorder
//! keeps is counted by this test binary's global allocator: what is still
//! allocated after the records are gone and before the recorder is.
//!
//! This file holds one test on purpose: the allocator counts the whole
//! process, and a second test running beside it would be counted too.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use infer_bench_engine::run::parts::Recorder;
use infer_bench_protocol::RequestRecord;
use infer_bench_protocol::record::OutputEvent;
use infer_bench_spec::Goodput;

/// The system allocator, counting the bytes live at any moment.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; the
// counter is only arithmetic on the sizes it is given.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// A deterministic stream of numbers in [0, 1).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Request `i` of a run at 100 requests per second: latencies, lengths and
/// token gaps spread the way a loaded server spreads them, one in fifty
/// failing.
fn request(t0: Instant, i: u64, rng: &mut Lcg) -> RequestRecord {
    let t_sched = t0 + Duration::from_millis(i * 10);
    let mut r = RequestRecord::new(i, 0, 0, false, t_sched);
    r.t_slot = t_sched;
    r.t_send = t_sched + Duration::from_micros((rng.next() * 400.0) as u64);
    r.requested_input = 100 + (rng.next() * 1900.0) as u32;
    r.requested_output = 16 + (rng.next() * 240.0) as u32;
    if i % 50 == 7 {
        r.t_done = r.t_send + Duration::from_millis(3);
        r.fail(infer_bench_protocol::ErrorClass::Status5xx, "HTTP 503");
        return r;
    }
    let ttft_ns = 20_000_000 + (rng.next().powi(3) * 2_000_000_000.0) as u64;
    let mut at = ttft_ns;
    let events = r.requested_output.min(64);
    for _ in 0..events {
        r.events.push(OutputEvent {
            at_ns: at,
            text_bytes: 4,
            token_ids: None,
            reasoning: false,
        });
        at += 5_000_000 + (rng.next() * 60_000_000.0) as u64;
    }
    r.t_done = r.t_send + Duration::from_nanos(at);
    r.usage.prompt_tokens = Some(r.requested_input);
    r.usage.completion_tokens = Some(events);
    r
}

#[test]
fn an_hour_at_100_requests_per_second_keeps_under_20_mb() {
    const REQUESTS: u64 = 360_000;
    const LIMIT: isize = 20 << 20;
    let t0 = Instant::now();
    let before = LIVE.load(Ordering::SeqCst);
    let mut rec = Recorder::new(
        true,
        Goodput::default(),
        true,
        infer_bench_spec::Duration::from_secs(10),
        false,
    );
    rec.set_window_start(t0);
    rec.track_phases(t0);
    let mut rng = Lcg(17);
    for i in 0..REQUESTS {
        let r = request(t0, i, &mut rng);
        rec.note_in_flight(8);
        rec.record(&r);
    }
    let retained = LIVE.load(Ordering::SeqCst) - before;
    eprintln!(
        "recorder after {REQUESTS} requests (1 h at 100/s, 10 s windows): {:.2} MB retained",
        retained as f64 / 1e6
    );
    assert!(
        retained < LIMIT,
        "the recorder holds {retained} bytes after an hour at 100 req/s (limit {LIMIT})"
    );
    // It did record the hour: every window but a partial last one.
    let windows = rec.windows();
    assert!(windows.len() >= 358, "{} windows", windows.len());
    assert_eq!(rec.stats().requests.sent, REQUESTS);
    let in_windows: u64 = windows.iter().map(|w| w.stats.requests.sent).sum();
    assert!(in_windows > REQUESTS * 99 / 100 && in_windows <= REQUESTS);
}
