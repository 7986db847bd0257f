//! The load engine of a real run: one run of one point. One dispatch loop serves every
//! load mode. A builder thread turns the arrival schedule into requests
//! ahead of their time (bounded by [`LOOKAHEAD`]); a pacer on its own OS
//! thread takes them in order and, for an open loop, waits precisely until
//! each is due (tokio's timer has millisecond granularity). Finished
//! requests go to a recorder thread over a channel: nothing on the tokio
//! workers that stamp arrivals takes a lock to record.
//! Requests then go out through one of two gates: without a concurrency
//! limit, each is spawned the moment it is due; with one (a closed loop's
//! slots, an open loop's cap), a fixed set of slot tasks takes them, each
//! sending its next request the moment its previous one ends, with no
//! thread hand-off in between. A closed loop's request is scheduled at the
//! instant its slot freed; an open loop's at its arrival time, so waiting
//! for a slot counts in its latency. Warm-up requests are sent and
//! excluded; the run drains its in-flight requests before it ends.
//!
//! Conversations fit the same loop: an arrival starts a *session*, and the
//! session is the unit a slot or a spawned task runs. The builder makes its
//! first turn ahead like any request (with every later turn's new message,
//! which depends only on the seed); the task sends it, then builds each
//! later turn from the history (earlier messages and the server's replies,
//! grown in place, never copied) while the think time runs, and sends it
//! at (previous reply's end + think time), which is that turn's scheduled
//! time: its TTFT counts from there. The alarm thread (`alarm.rs`) wakes
//! the task at that instant, so no worker spins waiting for it.
//! A closed loop of concurrency N is therefore N users, each with one
//! conversation at a time. A failed turn ends its session. Request `k` of
//! session `s` has index `s * turns + k`, so warm-up by count, request
//! limits and per-request records count turns.
//!
//! Failures to reach the server are paced: a closed-loop slot whose request
//! could not connect waits before its next one ([`BACKOFF_FIRST`], doubling
//! up to [`BACKOFF_MAX`], reset by any request that reached the server), and
//! a run where nothing has succeeded and nearly every request failed to
//! connect ([`STOP_AFTER`], [`STOP_SHARE_PERCENT`]) stops early and says why
//! ([`RunOutcome::stopped`]).
//!
//! An open loop that cannot keep its rate degrades, never runs away: a
//! request goes out at most [`MAX_LATE`] after its scheduled time, and one
//! the client could not send by then (the pacer or the builder behind, the
//! slots of `max_concurrency` all busy) is counted as not sent
//! (`requests.not_sent`, which makes the point INVALID), as is one due
//! while [`MAX_OPEN_IN_FLIGHT`] requests are in flight (an open loop
//! without `max_concurrency`). The builder does not build a request that
//! is already too late, so a schedule far beyond what the machine can
//! build is skipped through at the pace of its arrival draws. Memory is
//! therefore bounded by what is in flight, never by rate x duration, and
//! the run ends near its duration: a run with requests not sent waits at
//! most [`OVERLOAD_DRAIN`] for those in flight, then counts the rest as
//! unfinished.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinSet;

use super::clock::{pace_until, tighten_timer_slack};
use super::context::{Interrupt, Live, RunEnv, RunOutcome, Sink};
use super::recorder::Recorder;
use super::schedule::{Conversation, Item, Schedule, Window, agent_share, build, new_recorder};
use infer_bench_protocol::{Backend, ErrorClass, Prepared, RequestRecord};
use infer_bench_spec::plan::PointConfig;
use infer_bench_spec::{Level, Load};
use infer_bench_workload::Due;
use infer_bench_workload::arrival::step_at;

/// A closed-loop slot's first wait after a request that could not connect.
pub const BACKOFF_FIRST: Duration = Duration::from_millis(10);
/// The longest such wait (the wait doubles after each one).
pub const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// A run stops early once this many requests have gone out, none has
/// succeeded, and at least [`STOP_SHARE_PERCENT`] of them could not connect.
pub const STOP_AFTER: u64 = 10;
/// See [`STOP_AFTER`].
pub const STOP_SHARE_PERCENT: u64 = 95;

/// Whether a request failed without reaching the server.
fn unreached(rec: &RequestRecord) -> bool {
    matches!(
        rec.failure.as_ref().map(|f| f.class),
        Some(ErrorClass::Connect | ErrorClass::TimeoutConnect)
    )
}

/// A closed loop's slot `i` starts this much after slot `i - 1`: about what
/// one send costs a loaded 2-core machine (16 slots start within 0.6 ms,
/// 256 within 10 ms).
pub const FIRST_WAVE_STEP: Duration = Duration::from_micros(40);

/// The latest an open loop's request goes out after its scheduled time;
/// later, it is not sent (counted in `requests.not_sent`).
pub const MAX_LATE: Duration = Duration::from_secs(1);

/// The most requests an open loop without `max_concurrency` keeps in
/// flight (per process, under load sharding per agent); an arrival due
/// while this many are in flight is not sent. Ten thousand streams is what
/// the built-in simulator serves in-process (`tests/sim.rs`), and what a
/// client's memory, connections and descriptors are sized for.
pub const MAX_OPEN_IN_FLIGHT: usize = 10_000;

/// How long a run whose client could not keep the rate (requests not
/// sent) waits for the requests still in flight after its last send;
/// those still in flight then are aborted and counted as unfinished. A
/// run that kept its rate drains its requests whole (each within its own
/// total timeout).
pub const OVERLOAD_DRAIN: Duration = Duration::from_secs(2);

/// Requests built ahead of their send time, at most.
const LOOKAHEAD: usize = 256;

// LOOKAHEAD_BYTES: bytes of requests built ahead of their send time, at
// most, beyond the requests the gate needs at once (its slots, or the
// first HANDOFF of a loop without one): 256 bodies of a 60 MB prompt
// would be 15 GB (issue 45). Small bodies never reach it. The spec's
// memory budget counts it, so it is defined there.
use infer_bench_spec::budget::LOOKAHEAD_BYTES;

/// The bytes and requests built but not yet sent, shared by the builder
/// thread (which waits while both are over their bounds) and every
/// [`Credit`] (which gives its bytes back when its request goes out or
/// is dropped).
#[derive(Default)]
struct Lookahead {
    state: parking_lot::Mutex<Ahead>,
    freed: parking_lot::Condvar,
}

#[derive(Default)]
struct Ahead {
    bytes: u64,
    items: usize,
    /// The pacer is done: the builder stops waiting.
    closed: bool,
}

impl Lookahead {
    /// Waits until a request of `bytes` may be built ahead: fewer than
    /// `min_items` are, or the bytes stay within [`LOOKAHEAD_BYTES`] (or
    /// nothing is ahead). `None` once the pacer is done.
    fn take(self: &Arc<Self>, bytes: u64, min_items: usize) -> Option<Credit> {
        let mut s = self.state.lock();
        while !s.closed
            && s.items >= min_items
            && s.items > 0
            && s.bytes.saturating_add(bytes) > LOOKAHEAD_BYTES
        {
            self.freed.wait(&mut s);
        }
        if s.closed {
            return None;
        }
        s.bytes += bytes;
        s.items += 1;
        Some(Credit {
            lookahead: self.clone(),
            bytes,
        })
    }

    /// Whether the next request of `bytes` would wait ([`Lookahead::take`]).
    fn would_wait(&self, bytes: u64, min_items: usize) -> bool {
        let s = self.state.lock();
        s.items >= min_items && s.items > 0 && s.bytes.saturating_add(bytes) > LOOKAHEAD_BYTES
    }

    fn close(&self) {
        self.state.lock().closed = true;
        self.freed.notify_all();
    }
}

/// One built request's share of the [`Lookahead`].
pub(super) struct Credit {
    lookahead: Arc<Lookahead>,
    bytes: u64,
}

impl Drop for Credit {
    fn drop(&mut self) {
        let mut s = self.lookahead.state.lock();
        s.bytes -= self.bytes;
        s.items -= 1;
        drop(s);
        self.lookahead.freed.notify_all();
    }
}

/// The builder hands requests to the pacer this many at a time, and a
/// closed loop's pacer refills the slots' queue when this many have room:
/// so neither thread is woken once per request (a futex wake-up and a
/// context switch each, on a core the workers need).
const HANDOFF: usize = 16;

/// What the builder hands the pacer for one arrival.
enum Entry {
    /// The request, built.
    Ready(Item),
    /// Not built: already more than [`MAX_LATE`] behind its time when the
    /// builder came to it.
    Late(Due),
}

/// Requests from the builder thread, handed over in batches.
struct Built {
    rx: std::sync::mpsc::Receiver<Vec<Entry>>,
    batch: std::vec::IntoIter<Entry>,
    lookahead: Arc<Lookahead>,
}

impl Drop for Built {
    /// The builder may be waiting for room ahead: let it go.
    fn drop(&mut self) {
        self.lookahead.close();
    }
}

impl Built {
    /// The next request built, waiting for the builder; `None` when it
    /// has built every one.
    fn recv(&mut self) -> Option<Entry> {
        loop {
            if let Some(item) = self.batch.next() {
                return Some(item);
            }
            self.batch = self.rx.recv().ok()?.into_iter();
        }
    }
}

/// What the load engine tells the recorder thread.
enum Note {
    /// A request finished.
    Done(Box<RequestRecord>),
    /// The measurement window starts here (warm-up by count).
    WindowStart(Instant),
    /// The run is over; `true` when it ran for its whole duration.
    Close(bool),
}

/// Finished requests waiting for the recorder thread, at most. A worker
/// that finds the queue full waits for room: a client whose recording
/// cannot keep up with its rate falls behind (counted, INVALID) instead of
/// queueing records without end (at 100,000 requests/s the queue grew by
/// 2.5 MB/s). A record holds its events, so 4,096 is tens of MB at most.
const NOTES_QUEUED: usize = 4096;

/// The recorder on a thread of its own: requests are recorded (and
/// written to the request log) there, so a worker that finishes a request
/// hands its record over without a lock and goes back to reading streams.
struct RecorderThread {
    tx: std::sync::mpsc::SyncSender<Note>,
    thread: std::thread::JoinHandle<Recorder>,
}

impl RecorderThread {
    fn start(mut recorder: Recorder, sink: Option<Sink>) -> RecorderThread {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Note>(NOTES_QUEUED);
        let thread = std::thread::Builder::new()
            .name("recorder".into())
            .spawn(move || {
                // While requests keep finishing, the thread looks every
                // 5 ms instead of sleeping in `recv`: a worker that
                // hands over a record then finds no one to wake (no futex
                // call on the worker, no context switch per request). When
                // a look finds nothing, it sleeps until the next note.
                let mut busy = false;
                loop {
                    let note = match rx.try_recv() {
                        Ok(note) => note,
                        Err(std::sync::mpsc::TryRecvError::Disconnected) => break,
                        Err(std::sync::mpsc::TryRecvError::Empty) if busy => {
                            busy = false;
                            std::thread::sleep(Duration::from_millis(5));
                            continue;
                        }
                        Err(std::sync::mpsc::TryRecvError::Empty) => match rx.recv() {
                            Ok(note) => note,
                            Err(_) => break,
                        },
                    };
                    busy = true;
                    match note {
                        Note::Done(r) => {
                            recorder.record(&r);
                            if let Some(s) = &sink {
                                s(&r);
                            }
                        }
                        Note::WindowStart(t) => recorder.set_window_start(t),
                        Note::Close(full) => {
                            recorder.close(full);
                            break;
                        }
                    }
                }
                recorder
            })
            .expect("a thread can be started");
        RecorderThread { tx, thread }
    }

    /// Closes the run and takes the recorder back.
    fn finish(self, ran_full: bool) -> Recorder {
        let _ = self.tx.send(Note::Close(ran_full));
        drop(self.tx);
        self.thread
            .join()
            .expect("the recorder thread does not panic")
    }
}

/// What a task needs of a request it sent (the record itself went to the
/// recorder).
struct Sent {
    ok: bool,
    unreached: bool,
    t_done: Instant,
    output_tokens: u32,
    reply: Option<String>,
}

/// State shared by the pacer and every request of one run.
struct Run<B> {
    backend: Arc<B>,
    load: Load,
    run: u32,
    open: bool,
    t0: Instant,
    window: Mutex<Window>,
    /// To the recorder thread: finished requests and the window's start.
    notes: std::sync::mpsc::SyncSender<Note>,
    /// The most measured requests in flight at once.
    concurrency_max: AtomicU64,
    live: Arc<Live>,
    interrupt: Arc<Interrupt>,
    /// Closed-loop ramps: how many slots are active now.
    active: AtomicU32,
    active_changed: Notify,
    /// Turns per session (1 without a conversation) and the think time.
    turns: u32,
    /// Wakes a closed loop's first wave at `t0`, and a conversation's next
    /// turn at its instant.
    alarms: Option<super::alarm::Alarms>,
    think: Duration,
    slow_client: Option<Duration>,
    /// Requests finished, those that succeeded, those that could not
    /// connect: what the early stop decides on.
    finished: AtomicU64,
    succeeded: AtomicU64,
    unreached: AtomicU64,
    /// Why the run stopped early.
    stopped: Mutex<Option<String>>,
    /// Measured arrivals not sent: the client could not keep the rate.
    not_sent: AtomicU64,
}

impl<B: Backend> Run<B> {
    /// Admits a request scheduled at `t_sched`: whether it is warm-up, or
    /// `None` once the run has ended (by time, count or interruption).
    fn admit(&self, index: u64, t_sched: Instant) -> Option<bool> {
        if self.interrupt.is_set() {
            return None;
        }
        let (warmup, opened) = self.window.lock().admit(&self.load, index, t_sched);
        if let Some(t) = opened {
            let _ = self.notes.send(Note::WindowStart(t));
        }
        warmup
    }

    fn ended(&self) -> bool {
        self.window.lock().ended() || self.interrupt.is_set()
    }

    /// An arrival due at `due` that the client could not send: counted
    /// as not sent when it is measured. False once the run has ended.
    fn not_sent(&self, index: u64, due: Instant) -> bool {
        match self.admit(index * self.turns as u64, due) {
            None => false,
            Some(warmup) => {
                if !warmup {
                    self.not_sent.fetch_add(1, Ordering::Relaxed);
                }
                true
            }
        }
    }

    /// Whether an open loop's request due at `due` is too late to send now.
    fn too_late(&self, due: Instant) -> bool {
        self.open && Instant::now() > due + MAX_LATE
    }

    fn measure_end(&self) -> Option<Instant> {
        self.window.lock().measure_end()
    }

    /// Sends one admitted request (or session) and records it. True if
    /// its (last) request could not connect to the server.
    async fn send(&self, item: Item, warmup: bool, t_sched: Instant, t_slot: Instant) -> bool {
        let Item {
            due,
            prepared,
            session,
            credit,
        } = item;
        // It is no longer ahead of its time: the builder may go on.
        drop(credit);
        let base = due.index * self.turns as u64;
        let mut rec = self
            .send_one(base, 0, prepared, warmup, t_sched, t_slot)
            .await;
        let Some(session) = session else {
            return rec.unreached;
        };
        let mut conversation = Conversation::new(session);
        for k in 1..conversation.turns() {
            if !rec.ok || self.ended() {
                return rec.unreached;
            }
            let reply = rec.reply.take().unwrap_or_default();
            let prepared = conversation.next(&*self.backend, k, reply, rec.output_tokens);
            let due = rec.t_done + self.think;
            if !self.wait_until(due).await {
                return false;
            }
            let index = base + k as u64;
            let Some(warmup) = self.admit(index, due) else {
                return false;
            };
            rec = self
                .send_one(index, k as u32, prepared, warmup, due, due)
                .await;
        }
        rec.unreached
    }

    /// Counts a finished request towards the early stop, and stops the run
    /// if nothing has succeeded and nearly everything failed to connect.
    fn note_reach(&self, rec: &RequestRecord) {
        let finished = self.finished.fetch_add(1, Ordering::Relaxed) + 1;
        if rec.ok() {
            self.succeeded.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if !unreached(rec) {
            return;
        }
        let unreached = self.unreached.fetch_add(1, Ordering::Relaxed) + 1;
        if finished >= STOP_AFTER
            && self.succeeded.load(Ordering::Relaxed) == 0
            && unreached * 100 >= finished * STOP_SHARE_PERCENT
        {
            let mut stopped = self.stopped.lock();
            if stopped.is_none() {
                *stopped = Some(format!(
                    "the run stopped early: {unreached} of its first {finished} requests could not connect to the server and none succeeded"
                ));
                self.window.lock().end();
            }
        }
    }

    /// Whether the run went on until its duration was up.
    fn ran_full(&self) -> bool {
        self.load.duration.is_some()
            && !self.window.lock().by_count()
            && !self.interrupt.is_set()
            && self.stopped.lock().is_none()
    }

    /// A slot's wait after a request that could not connect: `d`, cut
    /// short when the run ends (by time, count, early stop or Ctrl-C).
    async fn back_off(&self, d: Duration) {
        let mut until = Instant::now() + d;
        if let Some(end) = self.measure_end() {
            until = until.min(end);
        }
        loop {
            let now = Instant::now();
            if now >= until || self.ended() {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep((until - now).min(Duration::from_millis(50))) => {}
                _ = self.interrupt.wait() => return,
            }
        }
    }

    /// Waits until `due`, woken by the alarm thread at the instant (tokio's
    /// timer fires up to a millisecond late); false if interrupted first.
    async fn wait_until(&self, due: Instant) -> bool {
        let alarm = async {
            match &self.alarms {
                Some(a) => a.at(due).await,
                None => tokio::time::sleep_until(due.into()).await,
            }
        };
        tokio::select! {
            _ = alarm => !self.interrupt.is_set(),
            _ = self.interrupt.wait() => false,
        }
    }

    /// Sends one admitted request, records it and returns its record.
    async fn send_one(
        &self,
        index: u64,
        turn: u32,
        prepared: Prepared,
        warmup: bool,
        t_sched: Instant,
        t_slot: Instant,
    ) -> Sent {
        let warmup_end = self.window.lock().warmup_end().unwrap_or(self.t0);
        let step = step_at(
            &self.load,
            t_sched.saturating_duration_since(warmup_end).as_nanos() as u64,
        );
        let mut rec = RequestRecord::new(index, self.run, step, warmup, t_sched);
        rec.turn = turn;
        rec.t_slot = t_slot;
        if let Some(d) = self.slow_client {
            // A client that spends CPU before every send, on purpose.
            let until = Instant::now() + d;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        let in_flight = self.live.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        if !warmup {
            self.concurrency_max.fetch_max(in_flight, Ordering::Relaxed);
        }
        let mut rec = self.backend.send(prepared, rec).await;
        self.live.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.note_reach(&rec);
        if !rec.warmup {
            self.live.done.fetch_add(1, Ordering::Relaxed);
            if !rec.ok() {
                self.live.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        let sent = Sent {
            ok: rec.ok(),
            unreached: unreached(&rec),
            t_done: rec.t_done,
            output_tokens: rec.output_tokens().0,
            reply: rec.reply.take(),
        };
        let _ = self.notes.send(Note::Done(Box::new(rec)));
        sent
    }

    /// Waits until slot `i` is active (closed-loop ramps); false once the run ends.
    async fn wait_active(&self, i: u32) -> bool {
        loop {
            let changed = self.active_changed.notified();
            if self.ended() {
                return false;
            }
            if i < self.active.load(Ordering::SeqCst) {
                return true;
            }
            tokio::select! {
                _ = changed => {}
                _ = self.interrupt.wait() => return false,
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
    }
}

/// One concurrency slot: takes the next request as soon as its previous
/// one ends, so a closed loop's next send follows without a hand-off.
///
/// A closed loop's first wave is handed out before the clock starts: each
/// slot holds its first request and is woken by the alarm thread at its
/// start, `t0 + i x FIRST_WAVE_STEP`, so the first requests go out like
/// the rest instead of one after another through the shared queue (which
/// made them 1-4 ms late, and light points INVALID). The spread is what a
/// client can do: no machine sends 256 requests in the same microsecond,
/// and streams started together stay in step, every token of every stream
/// arriving in the same instant.
async fn slot<B: Backend>(
    i: u32,
    run: Arc<Run<B>>,
    queue: Arc<tokio::sync::Mutex<mpsc::Receiver<Item>>>,
    mut first: Option<Item>,
) {
    let mut free_since = run.t0;
    let mut backoff = Duration::ZERO;
    if first.is_some() {
        free_since = run.t0 + FIRST_WAVE_STEP * i;
        if !run.wait_until(free_since).await {
            return;
        }
    }
    loop {
        let was_active = i < run.active.load(Ordering::SeqCst);
        if !run.wait_active(i).await {
            return;
        }
        if !was_active {
            free_since = Instant::now();
        }
        if !run.open && run.measure_end().is_some_and(|end| free_since >= end) {
            return;
        }
        let item = match first.take() {
            Some(item) => Some(item),
            None => {
                let mut q = queue.lock().await;
                tokio::select! {
                    item = q.recv() => item,
                    _ = run.interrupt.wait() => None,
                }
            }
        };
        let Some(item) = item else { return };
        let taken = Instant::now();
        let (t_sched, t_slot) = match item.due.at_ns {
            // Open loop: due at its arrival; a slot may have been free
            // earlier (then the wait for the pacer is the client's delay).
            Some(ns) => {
                let due = run.t0 + Duration::from_nanos(ns);
                (due, due.max(free_since).min(taken))
            }
            // Closed loop: due the moment this slot freed.
            None => (free_since, free_since),
        };
        // An open loop's request that waited for a slot past the window's
        // end (and [`MAX_LATE`]) is not sent: the run ends near its duration.
        if run.open && run.measure_end().is_some_and(|end| taken > end + MAX_LATE) {
            if !run.not_sent(item.due.index, t_sched) {
                return;
            }
            continue;
        }
        let Some(warmup) = run.admit(item.due.index * run.turns as u64, t_sched) else {
            return;
        };
        let unreached = run.send(item, warmup, t_sched, t_slot).await;
        // A closed loop does not spin on a server it cannot reach (an open
        // loop's schedule paces it already).
        if unreached && !run.open {
            backoff = (backoff * 2).clamp(BACKOFF_FIRST, BACKOFF_MAX);
            run.back_off(backoff).await;
        } else {
            backoff = Duration::ZERO;
        }
        free_since = Instant::now();
    }
}

/// Runs one run of a point and returns its recorder.
pub fn run_once<B: Backend>(
    backend: Arc<B>,
    cfg: &PointConfig,
    run: u32,
    env: &RunEnv,
) -> RunOutcome {
    tighten_timer_slack();
    let Schedule {
        prompts,
        arrivals,
        open,
        turns,
        limit,
        first_active,
    } = Schedule::of(cfg, run, env);
    let gate = Gate {
        open,
        limit,
        first_active,
        turns,
    };
    // A builder thread turns arrivals into requests ahead of their time
    // (a tokenizer-exact prompt can take milliseconds), so the pacer below
    // only waits and hands over.
    let (built_tx, built_rx) = std::sync::mpsc::sync_channel::<Vec<Entry>>(LOOKAHEAD / HANDOFF);
    let builder_backend = backend.clone();
    // The run's start, once the pacer has set it: an arrival already
    // [`MAX_LATE`] behind is not built.
    let clock = Arc::new(std::sync::OnceLock::<Instant>::new());
    let builder_clock = clock.clone();
    let lookahead = Arc::new(Lookahead::default());
    // As many as the gate takes at once may always be built ahead (the
    // pacer waits for them before the clock starts); more, within
    // LOOKAHEAD_BYTES.
    let min_items = gate
        .limit
        .map(|l| l as usize)
        .unwrap_or(HANDOFF)
        .min(LOOKAHEAD);
    let builder_lookahead = lookahead.clone();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut batch = Vec::with_capacity(HANDOFF);
            for d in arrivals {
                let late = match (builder_clock.get(), d.at_ns) {
                    (Some(t0), Some(ns)) => {
                        Instant::now() > *t0 + Duration::from_nanos(ns) + MAX_LATE
                    }
                    _ => false,
                };
                if late {
                    batch.push(Entry::Late(d));
                } else {
                    let mut item = build(&*builder_backend, &prompts, d);
                    let bytes = item.bytes();
                    // Hand over what is built before waiting for room: the
                    // pacer may be waiting for it.
                    if !batch.is_empty() && builder_lookahead.would_wait(bytes, min_items) {
                        let part = std::mem::replace(&mut batch, Vec::with_capacity(HANDOFF));
                        if built_tx.send(part).is_err() {
                            return;
                        }
                    }
                    let Some(credit) = builder_lookahead.take(bytes, min_items) else {
                        return;
                    };
                    item.credit = Some(credit);
                    batch.push(Entry::Ready(item));
                }
                if batch.len() == HANDOFF {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(HANDOFF));
                    if built_tx.send(full).is_err() {
                        return;
                    }
                }
            }
            if !batch.is_empty() {
                let _ = built_tx.send(batch);
            }
        });
        let mut built = Built {
            rx: built_rx,
            batch: Vec::new().into_iter(),
            lookahead,
        };
        let out = pace(backend, cfg, run, env, gate, &mut built, &clock);
        // The builder may be waiting to hand over one more: let it go.
        drop(built);
        out
    })
}

/// How a run's requests go out: an open or closed loop, its slots (if
/// any) and how many are active at the start, and turns per session.
#[derive(Debug, Clone, Copy)]
struct Gate {
    open: bool,
    limit: Option<u32>,
    first_active: u32,
    turns: u32,
}

/// The run itself, once requests are being built: starts the clock, the
/// recorder thread and the gate, paces the arrivals, drains.
fn pace<B: Backend>(
    backend: Arc<B>,
    cfg: &PointConfig,
    run: u32,
    env: &RunEnv,
    gate: Gate,
    built: &mut Built,
    clock: &std::sync::OnceLock<Instant>,
) -> RunOutcome {
    let load = &cfg.load;
    // The first requests are built before the clock starts (so none is
    // late).
    let mut ahead: VecDeque<Entry> = VecDeque::new();
    let initial = gate.limit.map(|l| l as usize).unwrap_or(16).min(LOOKAHEAD);
    while ahead.len() < initial {
        match built.recv() {
            Some(entry) => ahead.push_back(entry),
            None => break,
        }
    }

    // Start a little ahead so the first arrivals are not already late:
    // 5 ms, and time to start every slot's task.
    let lead = Duration::from_millis(5) + Duration::from_micros(10) * gate.limit.unwrap_or(0);
    let t0 = env.start_at.unwrap_or_else(|| Instant::now() + lead);
    let _ = clock.set(t0);
    let window = Window::new(load, t0, env.agent);
    let warmup_end = window.warmup_end();
    let recorder = new_recorder(cfg, gate.open, gate.turns, t0, warmup_end);
    let recorder = RecorderThread::start(recorder, env.sink.clone());
    let live = env.live.clone();
    let probe = super::probe::ReadProbe::start(&env.handle, move || {
        live.in_flight.load(Ordering::Relaxed) > 0
    });
    let shared = Arc::new(Run {
        backend: backend.clone(),
        load: load.clone(),
        run,
        open: gate.open,
        t0,
        window: Mutex::new(window),
        notes: recorder.tx.clone(),
        concurrency_max: AtomicU64::new(0),
        live: env.live.clone(),
        interrupt: env.interrupt.clone(),
        active: AtomicU32::new(gate.first_active),
        active_changed: Notify::new(),
        slow_client: env.slow_client,
        turns: gate.turns,
        alarms: Some(super::alarm::Alarms::start()),
        think: cfg
            .workload
            .conversation
            .as_ref()
            .map(|c| c.think_time.as_std())
            .unwrap_or_default(),
        finished: AtomicU64::new(0),
        succeeded: AtomicU64::new(0),
        unreached: AtomicU64::new(0),
        stopped: Mutex::new(None),
        not_sent: AtomicU64::new(0),
    });
    let mut tasks: JoinSet<()> = JoinSet::new();
    let queue = gate
        .limit
        .map(|n| start_slots(n, gate, &shared, &mut ahead, &mut tasks, env));
    let ramp = start_ramp(load, gate, &shared, warmup_end.unwrap_or(t0), env);
    dispatch(&shared, ahead, built, queue.as_ref(), &mut tasks, env);
    // No more arrivals: the slots finish what is queued, then stop.
    drop(queue);
    // The ramp task holds a clone of `shared`: aborting only asks it to
    // stop, so wait until it has.
    if let Some(t) = ramp {
        t.abort();
        let _ = env.handle.block_on(t);
    }
    let unfinished = drain(&shared, tasks, env);
    let interrupted = shared.interrupt.is_set();
    let ran_full = shared.ran_full();
    let stopped = shared.stopped.lock().take();
    let not_sent = shared.not_sent.load(Ordering::Relaxed);
    let concurrency_max = shared.concurrency_max.load(Ordering::Relaxed);
    drop(shared);
    // Every request has been handed to the recorder thread (the tasks
    // have all ended): close it and take the recorder back.
    let mut recorder = recorder.finish(ran_full);
    recorder.note_in_flight(concurrency_max);
    if let Some(p) = probe {
        recorder.add_read_delays(&p.finish(&env.handle));
    }
    recorder.unfinished(unfinished);
    recorder.not_sent(not_sent);
    RunOutcome {
        recorder,
        interrupted,
        started: t0,
        stopped,
    }
}

/// The gate of a run with `n` slots: the slot tasks, which take requests
/// from the returned queue. A closed loop's active slots take their first
/// request now, from `ahead`.
fn start_slots<B: Backend>(
    n: u32,
    gate: Gate,
    shared: &Arc<Run<B>>,
    ahead: &mut VecDeque<Entry>,
    tasks: &mut JoinSet<()>,
    env: &RunEnv,
) -> mpsc::Sender<Item> {
    let (tx, rx) = mpsc::channel::<Item>(LOOKAHEAD);
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    for i in 0..n {
        // A closed loop's arrivals have no time, so none is late.
        let first = (!gate.open && i < gate.first_active)
            .then(|| match ahead.pop_front() {
                Some(Entry::Ready(item)) => Some(item),
                _ => None,
            })
            .flatten();
        tasks.spawn_on(slot(i, shared.clone(), rx.clone(), first), &env.handle);
    }
    tx
}

/// A closed-loop ramp's task: it changes the number of active slots at
/// each step, counted from `start` (the end of warm-up).
fn start_ramp<B: Backend>(
    load: &Load,
    gate: Gate,
    shared: &Arc<Run<B>>,
    start: Instant,
    env: &RunEnv,
) -> Option<tokio::task::JoinHandle<()>> {
    let r = load.ramp.as_ref().filter(|_| !gate.open)?;
    let shared = shared.clone();
    let levels = r.levels.clone();
    let every = r.every.as_std();
    let agent = env.agent;
    Some(env.handle.spawn(async move {
        for (i, l) in levels.iter().enumerate().skip(1) {
            tokio::time::sleep_until((start + every * i as u32).into()).await;
            if let Level::Concurrency(c) = l {
                shared
                    .active
                    .store(agent_share(*c as u64, agent) as u32, Ordering::SeqCst);
                shared.active_changed.notify_waiters();
            }
        }
    }))
}

/// The pacer: takes the built requests in order and, at each one's time,
/// hands it to the slots' `queue` or (without slots) spawns it, until the
/// arrivals end, the run's window ends or it is interrupted. An open
/// loop's request it cannot send within [`MAX_LATE`] of its time, or (without
/// slots) while [`MAX_OPEN_IN_FLIGHT`] are in flight, is counted as not sent.
fn dispatch<B: Backend>(
    shared: &Arc<Run<B>>,
    mut ahead: VecDeque<Entry>,
    built: &mut Built,
    queue: Option<&mpsc::Sender<Item>>,
    tasks: &mut JoinSet<()>,
    env: &RunEnv,
) {
    let t0 = shared.t0;
    let at = |d: &Due| d.at_ns.map(|ns| t0 + Duration::from_nanos(ns));
    loop {
        let entry = match ahead.pop_front() {
            Some(entry) => entry,
            None => match built.recv() {
                Some(entry) => entry,
                None => break,
            },
        };
        let item = match entry {
            Entry::Ready(item) => item,
            Entry::Late(d) => {
                if !shared.not_sent(d.index, at(&d).unwrap_or(t0)) {
                    break;
                }
                continue;
            }
        };
        let due = at(&item.due);
        // Nothing goes out before the clock starts; an arrival goes out
        // at its time.
        if !pace_until(due.unwrap_or(t0), &shared.interrupt) || shared.ended() {
            break;
        }
        if let Some(due) = due.filter(|&d| shared.too_late(d)) {
            if !shared.not_sent(item.due.index, due) {
                break;
            }
            continue;
        }
        match queue {
            Some(tx) => {
                match hand_over(shared, tx, item, due, env) {
                    Handed::Queued => {}
                    Handed::Late(index, due) => {
                        if !shared.not_sent(index, due) {
                            break;
                        }
                    }
                    Handed::Gone => shared.window.lock().end(),
                }
                if shared.ended() {
                    break;
                }
            }
            None => {
                // Reap finished tasks so memory does not grow with the run.
                while tasks.try_join_next().is_some() {}
                let due = due.unwrap_or_else(Instant::now);
                if tasks.len() >= MAX_OPEN_IN_FLIGHT {
                    if !shared.not_sent(item.due.index, due) {
                        break;
                    }
                    continue;
                }
                let Some(warmup) = shared.admit(item.due.index * shared.turns as u64, due) else {
                    break;
                };
                let run = shared.clone();
                tasks.spawn_on(
                    async move {
                        run.send(item, warmup, due, due).await;
                    },
                    &env.handle,
                );
            }
        }
    }
}

/// What became of a request handed to the slots.
enum Handed {
    /// It is in the slots' queue.
    Queued,
    /// An open loop's request (its index and time) that found no room
    /// within [`MAX_LATE`] of its time: not sent.
    Late(u64, Instant),
    /// The slots are gone, the run ended or it was interrupted.
    Gone,
}

/// Hands `item` (an open loop's due at `due`) to the slots: without
/// blocking while there is room; when the slots are all busy, waits for
/// one (a closed loop, whose requests are due the moment a slot frees: for
/// room for [`HANDOFF`], so that the pacer is not woken per request; an
/// open loop's, until [`MAX_LATE`] after its time).
fn hand_over<B: Backend>(
    shared: &Arc<Run<B>>,
    tx: &mpsc::Sender<Item>,
    item: Item,
    due: Option<Instant>,
    env: &RunEnv,
) -> Handed {
    match tx.try_send(item) {
        Ok(()) => Handed::Queued,
        Err(mpsc::error::TrySendError::Closed(_)) => Handed::Gone,
        Err(mpsc::error::TrySendError::Full(item)) => {
            let tx = tx.clone();
            let run = shared.clone();
            let open = shared.open;
            let index = item.due.index;
            env.handle.block_on(async move {
                let room = async {
                    if !open {
                        drop(tx.reserve_many(HANDOFF).await);
                    }
                    if tx.send(item).await.is_ok() {
                        Handed::Queued
                    } else {
                        Handed::Gone
                    }
                };
                let ended = async {
                    loop {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        if run.ended() {
                            break;
                        }
                    }
                };
                let late = async {
                    match due.filter(|_| open) {
                        Some(d) => tokio::time::sleep_until((d + MAX_LATE).into()).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    r = room => r,
                    _ = late => Handed::Late(index, due.unwrap_or(run.t0)),
                    _ = run.interrupt.wait() => Handed::Gone,
                    _ = ended => Handed::Gone,
                }
            })
        }
    }
}

/// Waits for every request in flight to end (each has its own total
/// timeout, so this ends); on an interruption, aborts them instead and
/// returns how many were in flight. A run that could not keep its rate
/// (requests not sent) waits at most [`OVERLOAD_DRAIN`], then aborts the
/// rest the same way.
fn drain<B: Backend>(shared: &Arc<Run<B>>, mut tasks: JoinSet<()>, env: &RunEnv) -> u64 {
    let intr = shared.interrupt.clone();
    let overloaded = shared.not_sent.load(Ordering::Relaxed) > 0;
    env.handle.block_on(async {
        let deadline = async {
            if overloaded {
                tokio::time::sleep(OVERLOAD_DRAIN).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            _ = async { while tasks.join_next().await.is_some() {} } => return 0,
            _ = intr.wait() => {}
            _ = deadline => {}
        }
        let n = shared.live.in_flight.load(Ordering::Relaxed);
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        n
    })
}

#[cfg(test)]
mod tests {
    use super::super::fake::FakeBackend;
    use super::super::schedule::indices_of_agent;
    use super::*;
    use infer_bench_spec::Warmup;
    use infer_bench_spec::raw::{Api, Arrival};
    use infer_bench_spec::{
        Dist, Duration as D, Goodput, Load, Model, Rate, Target, Timeouts, Workload,
    };
    use infer_bench_workload::Material;

    fn config(
        level: Level,
        arrival: Arrival,
        duration_ms: u64,
        requests: Option<u64>,
    ) -> PointConfig {
        let t = D::from_secs(5);
        PointConfig {
            target: Arc::new(Target {
                name: "t".into(),
                kind: infer_bench_spec::raw::TargetKind::Openai,
                base_url: None,
                api_key_env: None,
                headers: Default::default(),
                metrics_url: None,
                tls_insecure: false,
                ca_cert: None,
                dialect: None,
                launch: None,
                gpu_ids: None,
                gpu_metrics_url: None,
                gpu_metrics_match: Default::default(),
                sim: None,
                gpu_hour_usd: None,
            }),
            model: Arc::new(Model {
                name: "m".into(),
                served_name: "m".into(),
                tokenizer: None,
                weights: None,
                params_b: None,
                architecture: None,
                network: None,
            }),
            precision: None,
            workload: Arc::new(Workload {
                name: "w".into(),
                api: Api::Completions,
                input_tokens: Some(Dist::Fixed(8)),
                output_tokens: Some(Dist::Fixed(4)),
                shared_prefix: None,
                dataset: None,
                trace: None,
                conversation: None,
                ignore_eos: true,
                stream: true,
                max_tokens_field: "max_tokens".into(),
                sampling: Default::default(),
                extra_body: Default::default(),
                mix: Vec::new(),
                images: None,
                audio: None,
                retrieval: None,
                structured: Default::default(),
            }),
            load: Load {
                arrival,
                burstiness: 1.0,
                level,
                max_concurrency: None,
                ramp: None,
                search: None,
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
                limits: Default::default(),
                cold_connections: false,
                reset_cache: Default::default(),
            },
            goodput: Goodput::default(),
            seed: 1,
            server_args: None,
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
            slow_client: None,
            material: Arc::new(Material::plain()),
        }
    }

    #[test]
    fn agents_split_slots_and_indices_without_overlap() {
        for n in 1..6u32 {
            for c in 0..20u64 {
                let total: u64 = (1..=n).map(|k| agent_share(c, Some((k, n)))).sum();
                assert_eq!(total, c, "{c} over {n}");
                let idx: u64 = (1..=n)
                    .map(|k| indices_of_agent(3, 3 + c, Some((k, n))))
                    .sum();
                assert_eq!(idx, c);
            }
        }
        // Agent 2 of 4 owns indices 1, 5, 9: three of 0..10.
        assert_eq!(indices_of_agent(0, 10, Some((2, 4))), 3);
        assert_eq!(agent_share(7, None), 7);
    }

    #[test]
    fn closed_loop_keeps_its_slots_busy() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let cfg = config(Level::Concurrency(4), Arrival::Closed, 0, Some(40));
        let out = run_once(Arc::new(FakeBackend::default()), &cfg, 0, &env(&rt));
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
        let out = run_once(Arc::new(FakeBackend::default()), &cfg, 0, &env(&rt));
        let s = out.recorder.stats();
        assert!(
            (195..=200).contains(&s.requests.sent),
            "{}",
            s.requests.sent
        );
        let achieved = s.achieved_send_rate.unwrap();
        assert!((achieved / 200.0 - 1.0).abs() < 0.01, "achieved {achieved}");
        // The median send is on time; tails depend on the machine's load and
        // are measured by the client benchmark, not asserted here.
        assert!(
            s.latency_ms["dispatch_lag"].p50 < 1.0,
            "{:?}",
            s.latency_ms["dispatch_lag"]
        );
    }

    #[test]
    fn warmup_requests_are_sent_and_excluded() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let mut cfg = config(Level::Concurrency(2), Arrival::Closed, 0, Some(10));
        cfg.load.warmup = Warmup::Requests(4);
        let out = run_once(Arc::new(FakeBackend::default()), &cfg, 0, &env(&rt));
        let s = out.recorder.stats();
        assert_eq!(s.requests.succeeded, 10);
        assert_eq!(s.requests.warmup, 4);
    }

    #[test]
    fn sessions_run_their_turns_in_order_and_a_failed_turn_ends_its_session() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let mut cfg = config(Level::Concurrency(2), Arrival::Closed, 0, Some(12));
        Arc::make_mut(&mut cfg.workload).api = Api::Chat;
        Arc::make_mut(&mut cfg.workload).conversation = Some(infer_bench_spec::Conversation {
            turns: 3,
            think_time: D::from_millis(20),
        });
        let seen = Arc::new(Mutex::new(Vec::<(u64, u32, bool, Instant, Instant)>::new()));
        let log = seen.clone();
        let mut e = env(&rt);
        e.sink = Some(Arc::new(move |r: &RequestRecord| {
            log.lock()
                .push((r.index, r.turn, r.ok(), r.t_sched, r.t_done))
        }));
        // Request index 4 is turn 1 of session 1: it fails, so turn 2 of
        // that session (index 5) is never sent.
        let backend = FakeBackend {
            fail_every: 5,
            ..FakeBackend::default()
        };
        let out = run_once(Arc::new(backend), &cfg, 0, &e);
        let s = out.recorder.stats();
        assert_eq!(s.requests.sent, 12);
        let seen = seen.lock().clone();
        let indices: std::collections::BTreeSet<u64> = seen.iter().map(|r| r.0).collect();
        assert!(!indices.contains(&5), "{indices:?}");
        assert!(seen.iter().all(|r| r.1 as u64 == r.0 % 3));
        // A later turn is scheduled at the previous turn's end + think time.
        for r in &seen {
            if r.1 > 0 {
                let prev = seen.iter().find(|p| p.0 == r.0 - 1).unwrap();
                assert_eq!(r.3, prev.4 + Duration::from_millis(20));
            }
        }
        let turns = out.recorder.turns().unwrap();
        assert_eq!(turns.len(), 3);
        assert_eq!(
            turns.values().map(|t| t.counts().sent).sum::<u64>(),
            s.requests.sent
        );
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
        let out = run_once(Arc::new(slow), &cfg, 0, &e);
        assert!(out.interrupted);
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(out.recorder.stats().requests.unfinished, 3);
    }

    /// A closed-loop ramp that runs out of requests before its last step:
    /// its step task is stopped, and the recorder comes back whole, steps
    /// and phases included (it used to lose them whenever the stopped task
    /// still held a reference).
    #[test]
    fn a_ramp_cut_short_keeps_its_steps() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let mut cfg = config(Level::Concurrency(2), Arrival::Closed, 0, Some(30));
        cfg.load.ramp = Some(infer_bench_spec::Ramp {
            levels: vec![
                Level::Concurrency(2),
                Level::Concurrency(4),
                Level::Concurrency(8),
            ],
            every: D::from_secs(60),
        });
        for _ in 0..10 {
            let out = run_once(Arc::new(FakeBackend::default()), &cfg, 0, &env(&rt));
            assert_eq!(out.recorder.stats().requests.succeeded, 30);
            assert_eq!(out.recorder.steps().len(), 1, "the first step is kept");
            assert!(
                out.recorder.phases().is_some(),
                "the phase timeline is kept"
            );
        }
    }

    /// An open loop far beyond what can be in flight: the arrivals that
    /// came while [`MAX_OPEN_IN_FLIGHT`] were in flight are counted as not
    /// sent, never queued, and every arrival is either sent or not.
    #[test]
    fn an_open_loop_beyond_its_most_in_flight_counts_the_rest_as_not_sent() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let rate = Rate::per_second(100_000.0).unwrap();
        let cfg = config(Level::Rate(rate), Arrival::Constant, 300, None);
        let slow = FakeBackend {
            ttft: Duration::from_millis(500),
            ..FakeBackend::default()
        };
        let out = run_once(Arc::new(slow), &cfg, 0, &env(&rt));
        let s = out.recorder.stats();
        let r = &s.requests;
        assert!(r.not_sent > 0, "{r:?}");
        assert!(r.sent + r.unfinished <= MAX_OPEN_IN_FLIGHT as u64, "{r:?}");
        assert!(s.concurrency_max <= MAX_OPEN_IN_FLIGHT as u64);
        // 300 ms at 100,000/s: 30,000 arrivals, each sent or not.
        assert_eq!(r.sent + r.unfinished + r.not_sent, 30_000, "{r:?}");
    }

    /// A run that could not keep its rate drains for [`OVERLOAD_DRAIN`],
    /// not for as long as its requests in flight would take.
    #[test]
    fn an_overloaded_run_drains_with_a_deadline() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let rate = Rate::per_second(100_000.0).unwrap();
        let cfg = config(Level::Rate(rate), Arrival::Constant, 200, None);
        let stuck = FakeBackend {
            ttft: Duration::from_secs(60),
            ..FakeBackend::default()
        };
        let started = Instant::now();
        let out = run_once(Arc::new(stuck), &cfg, 0, &env(&rt));
        // Its requests would take a minute each.
        assert!(started.elapsed() < Duration::from_secs(30));
        let r = &out.recorder.stats().requests;
        assert!(r.not_sent > 0, "{r:?}");
        assert_eq!(r.sent, 0, "{r:?}");
        assert_eq!(r.unfinished + r.not_sent, 20_000, "{r:?}");
    }

    fn failing(class: infer_bench_protocol::ErrorClass) -> Arc<FakeBackend> {
        Arc::new(FakeBackend {
            ttft: Duration::ZERO,
            fail_every: 1,
            fail_class: class,
            ..FakeBackend::default()
        })
    }

    #[test]
    fn a_slot_that_cannot_connect_backs_off() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let cfg = config(Level::Concurrency(1), Arrival::Closed, 1000, None);
        let started = Instant::now();
        let out = run_once(
            failing(infer_bench_protocol::ErrorClass::Connect),
            &cfg,
            0,
            &env(&rt),
        );
        let sent = out.recorder.stats().requests.sent;
        // Waits of 10, 20, 40 ... 640 ms: 7 sends in the second, not thousands.
        assert!((5..STOP_AFTER).contains(&sent), "{sent} sent");
        assert!(out.stopped.is_none(), "fewer than {STOP_AFTER} requests");
        assert!(started.elapsed() < Duration::from_millis(1500));
    }

    #[test]
    fn a_run_that_reaches_nothing_stops_early_and_says_why() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let cfg = config(Level::Concurrency(4), Arrival::Closed, 30_000, None);
        let started = Instant::now();
        let out = run_once(
            failing(infer_bench_protocol::ErrorClass::TimeoutConnect),
            &cfg,
            0,
            &env(&rt),
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let s = out.recorder.stats();
        assert!(
            (STOP_AFTER..STOP_AFTER + 8).contains(&s.requests.sent),
            "{}",
            s.requests.sent
        );
        let why = out.stopped.unwrap();
        assert!(
            why.starts_with("the run stopped early: ")
                && why.ends_with("could not connect to the server and none succeeded"),
            "{why}"
        );
    }

    #[test]
    fn failures_that_reached_the_server_are_not_paced_or_stopped() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let cfg = config(Level::Concurrency(1), Arrival::Closed, 300, None);
        let out = run_once(
            failing(infer_bench_protocol::ErrorClass::Status5xx),
            &cfg,
            0,
            &env(&rt),
        );
        let sent = out.recorder.stats().requests.sent;
        assert!(sent > 100, "{sent} sent");
        assert!(out.stopped.is_none());
    }

    #[test]
    fn records_wait_for_room_when_the_recorder_falls_behind_and_none_is_lost() {
        // A request log whose disk stalls: the recorder thread blocks in
        // its sink, so finished requests queue for it. They may queue up
        // to NOTES_QUEUED (plus the one in its hands), never without end;
        // the worker that finds no room waits, and once the disk moves
        // again every record is recorded.
        let (stall_tx, stall_rx) = std::sync::mpsc::channel::<()>();
        let stall = Mutex::new(stall_rx);
        let logged = Arc::new(AtomicU64::new(0));
        let counted = logged.clone();
        let sink: Sink = Arc::new(move |_| {
            if counted.fetch_add(1, Ordering::Relaxed) == 0 {
                let _ = stall.lock().recv();
            }
        });
        let recorder = Recorder::new(true, Goodput::default(), false, D::from_secs(1), false);
        let thread = RecorderThread::start(recorder, Some(sink));
        let total = NOTES_QUEUED as u64 + 100;
        let handed = Arc::new(AtomicU64::new(0));
        let (tx, counter) = (thread.tx.clone(), handed.clone());
        let worker = std::thread::spawn(move || {
            for i in 0..total {
                let r = RequestRecord::new(i, 0, 0, false, Instant::now());
                tx.send(Note::Done(Box::new(r))).unwrap();
                counter.fetch_add(1, Ordering::Relaxed);
            }
        });
        // The worker fills the queue, then waits: what it handed over stops
        // at the bound however long it is given.
        let mut last = u64::MAX;
        while handed.load(Ordering::Relaxed) != last {
            last = handed.load(Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            last <= NOTES_QUEUED as u64 + 1,
            "{last} records handed over with the recorder stalled"
        );
        assert!(last < total);
        stall_tx.send(()).unwrap();
        worker.join().unwrap();
        let recorder = thread.finish(true);
        assert_eq!(logged.load(Ordering::Relaxed), total, "every record logged");
        assert_eq!(
            recorder.stats().requests.sent,
            total,
            "every record counted"
        );
    }
}
