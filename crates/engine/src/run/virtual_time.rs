//! One run of a point on the simulator in virtual time: a discrete-event
//! simulation of the load engine, an ideal client and the simulated
//! server, with no sleeping, no sockets and no threads. Time jumps from
//! one event to the next (an arrival, the end of an engine step, a
//! conversation's next turn, a ramp step, a deadline), so a saturated
//! point of thousands of streams takes seconds, and the same spec and seed
//! give the same statistics to the byte.
//!
//! What is shared with a real run, so that the two measure the same way:
//! the arrival schedule (`Arrivals`), the prompts and request bodies
//! (`PromptGen`, the backend's `prepare`: the very bodies a real run
//! sends), which requests are warm-up and when the window ends
//! (`engine::Window`), how a conversation's next turn is built
//! (`engine::Conversation`), the slots of a closed loop or a capped open
//! loop (`engine::slots`), the recorder and every statistic; on the server
//! side, how a body is read and refused (`sim::request::read`) and the
//! continuous-batching engine with its step times. What differs is the
//! client: it costs no time. A request is handed to the server the instant
//! it is due, and a token is seen the instant its step ends, so dispatch
//! lag and read delay are zero and nothing of this machine enters the
//! numbers.
//!
//! Ordering at one instant follows the real simulator: a step that ends
//! delivers its tokens and the next step is planned from what was already
//! queued; requests sent in reaction to those tokens (a closed loop's next
//! request) join the step after, as they would arrive while it runs.
//! Events at the same instant run in the order they were scheduled.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::context::{RunEnv, RunOutcome};
use super::recorder::Recorder;
use super::schedule::{Conversation, Item, Schedule, Window, build, new_recorder};
use infer_bench_protocol::http::timeout_failure;
use infer_bench_protocol::record::OutputEvent;
use infer_bench_protocol::{Backend, ErrorClass, Failure, Prepared, RequestRecord};
use infer_bench_sim::cluster::Cluster;
use infer_bench_sim::engine::Step;
use infer_bench_sim::gpu::GpuModel;
use infer_bench_sim::request::{self, Setup};
use infer_bench_sim::server::{Lag, exposition, retrieval};
use infer_bench_spec::plan::PointConfig;
use infer_bench_spec::{Level, Load};
use infer_bench_telemetry::dcgm::{self, Filter};
use infer_bench_telemetry::gpu::{GpuInfo, GpuReading};
use infer_bench_telemetry::prom;
use infer_bench_telemetry::scrape::{self, Values};
use infer_bench_workload::arrival::step_at;

/// A run stops once this many requests in a row were refused without any
/// having been accepted since: a refusal takes no virtual time, so a
/// server that refuses everything would otherwise loop at one instant.
const REFUSED_IN_A_ROW: u64 = 1_000;

/// Something due at an instant of the run.
enum Ev {
    /// An open loop's next arrival.
    Arrival(Box<Item>),
    /// A conversation's next turn, due after the think time.
    Turn(Box<Turn>),
    /// A closed-loop ramp's step `i` starts.
    Ramp(usize),
    /// A request's first-token, idle or total deadline may have passed.
    Deadline(u64),
    /// The simulated server's metrics are read.
    Scrape,
    /// An accepted request reaches the engine, after the server's own time
    /// (the profile's request overhead).
    Submit(u64, Seq),
}

/// A conversation between turns.
struct Turn {
    conversation: Conversation,
    k: usize,
    base: u64,
    prepared: Prepared,
    slot: Option<u32>,
}

struct Timed {
    at: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Timed {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Timed {}
impl PartialOrd for Timed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// A request the server has accepted and not finished.
struct Flight {
    rec: RequestRecord,
    send_ns: u64,
    last_event_ns: u64,
    generated: u32,
    prompt_tokens: u32,
    stream: bool,
    include_usage: bool,
    /// What follows the request: its slot, and its conversation's next turn.
    slot: Option<u32>,
    conversation: Option<(Conversation, usize, u64)>,
    /// An embeddings or rerank request: answered whole once all of its
    /// prefill-only sequences are done.
    whole: Option<Whole>,
}

/// A retrieval request in flight: the engine runs one sequence per input
/// (or document), under ids of its own; the answer goes once the last is
/// done.
struct Whole {
    body: String,
    /// Its sequences: the flight's own id and the ones after it.
    seqs: u64,
    left: u64,
}

/// One sequence the server submits to its engine.
#[derive(Debug, Clone, Copy)]
struct Seq {
    prompt: u32,
    max: u32,
    /// Of `prompt`, its images' tokens.
    images: u32,
}

/// What the server took of a request: the sequences it submits and, for
/// a retrieval request, its answer.
struct Taken {
    seqs: Vec<Seq>,
    prompt_tokens: u32,
    stream: bool,
    include_usage: bool,
    answer: Option<String>,
}

/// The whole run: clock, server, client.
struct Sim<'a, B: Backend> {
    backend: &'a B,
    load: &'a Load,
    env: &'a RunEnv,
    run: u32,
    t0: Instant,
    now: u64,
    seq: u64,
    heap: BinaryHeap<Reverse<Timed>>,
    /// Arrivals, turns and ramp steps in the heap: what is left to happen
    /// besides requests in flight.
    pending: u64,
    // The server.
    engine: Cluster,
    speed: f64,
    served: Vec<String>,
    max_len: u32,
    per_event: u32,
    /// The server's own time before the engine sees a request.
    request_overhead_ns: u64,
    wire: infer_bench_sim::request::Wire,
    /// An embeddings (`false`) or rerank (`true`) workload: answered by
    /// the simulator's retrieval endpoints' own reader.
    retrieval: Option<bool>,
    /// A retrieval request's sequences other than its first, by engine id:
    /// the request (flight) they belong to.
    members: HashMap<u64, u64>,
    /// Per engine of the deployment, the step under way and its end.
    busy: Vec<Option<(u64, Step)>>,
    flights: HashMap<u64, Flight>,
    next_id: u64,
    // The client.
    items: Box<dyn Iterator<Item = Item> + 'a>,
    open: bool,
    turns: u32,
    think_ns: u64,
    window: Window,
    recorder: Recorder,
    active: u32,
    /// Closed-loop slots waiting for a ramp to activate them.
    parked: Vec<u32>,
    /// Capped open loop: slots with nothing to send, and arrivals waiting
    /// for a slot.
    idle_slots: VecDeque<u32>,
    queue: VecDeque<Item>,
    in_flight: u64,
    concurrency_max: u64,
    refused_in_a_row: u64,
    accepted: u64,
    stopped: Option<String>,
    // Telemetry: what is read and how often, the served name, what was read.
    sampling: Option<Sampling>,
    model: String,
    steps: u64,
    scrapes: Vec<(Instant, Result<Values, infer_bench_telemetry::Error>)>,
    /// The modelled GPUs, which every step is recorded into, and their
    /// readings.
    gpu: Option<GpuModel>,
    gpu_devices: Vec<GpuInfo>,
    gpu_samples: Vec<(Instant, GpuReadings)>,
}

/// One reading of every modelled GPU, or why there is none.
pub type GpuReadings = Result<Vec<GpuReading>, infer_bench_telemetry::Error>;

/// The modelled GPUs of a run and each reading of them, with its instant.
pub type ModelledGpus = (Vec<GpuInfo>, Vec<(Instant, GpuReadings)>);

/// What a virtual run reads of the simulated server, at one simulated
/// interval: its `/metrics` (as a scraper would) and its modelled GPUs
/// (as a dcgm-exporter sampler would).
#[derive(Debug, Clone, Copy)]
pub struct Sampling {
    pub every: Duration,
    pub metrics: bool,
    pub gpus: bool,
}

/// What a virtual run produced: the run as a real run reports it, the
/// simulated server's metrics as a scraper would have read them, its
/// modelled GPUs (the GPUs and each reading) and the simulated instant
/// the run's last request ended.
pub struct VirtualRun {
    pub outcome: RunOutcome,
    pub scrapes: Vec<(Instant, Result<Values, infer_bench_telemetry::Error>)>,
    pub gpus: Option<ModelledGpus>,
    pub ended: Instant,
}

/// Runs one run of a point on the simulator in virtual time. The run's
/// clock starts at `env.start_at` (else now); with `sampling`, the
/// server's metrics and modelled GPUs are read at that simulated interval.
pub fn run_once_virtual<B: Backend>(
    backend: &B,
    cfg: &PointConfig,
    run: u32,
    env: &RunEnv,
    sampling: Option<Sampling>,
) -> Result<VirtualRun, crate::error::ServerError> {
    let setup = Setup::of(cfg).map_err(crate::error::ServerError::Simulator)?;
    let speed = setup.speed(run);
    let load = &cfg.load;
    let Schedule {
        prompts,
        arrivals,
        open,
        turns,
        limit,
        first_active,
    } = Schedule::of(cfg, run, env);
    let items = arrivals.map(move |d| build(backend, &prompts, d));
    let t0 = env.start_at.unwrap_or_else(Instant::now);
    let window = Window::new(load, t0, env.agent);
    let recorder = new_recorder(cfg, open, turns, t0, window.warmup_end());
    let max_len = setup.engine.max_model_len_tokens();
    let per_event = setup.engine.tokens_per_event();
    let request_overhead_ns = (setup.engine.request_overhead_s() * 1e9).round() as u64;
    let engines = setup.engine.len();
    // Read at known instants, the modelled GPUs average each reading over
    // the interval since the last one, so their readings tile the run.
    let gpu = sampling.filter(|s| s.gpus).map(|s| {
        GpuModel::new(
            setup.engine.engine(0).perf(),
            engines,
            s.every.as_secs_f64().max(1e-3),
        )
    });
    let mut sim = Sim {
        backend,
        load,
        env,
        run,
        t0,
        now: 0,
        seq: 0,
        heap: BinaryHeap::new(),
        pending: 0,
        engine: setup.engine,
        speed,
        served: setup.served,
        max_len,
        per_event,
        request_overhead_ns,
        wire: infer_bench_sim::request::Wire::of(cfg.workload.api),
        retrieval: match cfg.workload.api {
            infer_bench_spec::raw::Api::Embeddings => Some(false),
            infer_bench_spec::raw::Api::Rerank => Some(true),
            _ => None,
        },
        members: HashMap::new(),
        busy: (0..engines).map(|_| None).collect(),
        flights: HashMap::new(),
        next_id: 1,
        items: Box::new(items),
        open,
        turns,
        think_ns: cfg
            .workload
            .conversation
            .as_ref()
            .map(|c| c.think_time.as_nanos())
            .unwrap_or(0),
        window,
        recorder,
        active: first_active,
        parked: Vec::new(),
        idle_slots: VecDeque::new(),
        queue: VecDeque::new(),
        in_flight: 0,
        concurrency_max: 0,
        refused_in_a_row: 0,
        accepted: 0,
        stopped: None,
        sampling,
        model: cfg.served_name().to_string(),
        steps: 0,
        scrapes: Vec::new(),
        gpu,
        gpu_devices: Vec::new(),
        gpu_samples: Vec::new(),
    };
    sim.sample();
    if let Some(every) = sim.scrape_ns() {
        sim.schedule(every, Ev::Scrape);
    }
    sim.start(limit, first_active);
    sim.start_idle();
    let interrupted = sim.run_events();
    sim.sample();
    Ok(sim.finish(interrupted))
}

impl<'a, B: Backend> Sim<'a, B> {
    fn at(&self, ns: u64) -> Instant {
        self.t0 + Duration::from_nanos(ns)
    }

    fn ns_of(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.t0).as_nanos() as u64
    }

    fn schedule(&mut self, at: u64, ev: Ev) {
        if matches!(ev, Ev::Arrival(_) | Ev::Turn(_) | Ev::Ramp(_)) {
            self.pending += 1;
        }
        self.seq += 1;
        self.heap.push(Reverse(Timed {
            at,
            seq: self.seq,
            ev,
        }));
    }

    /// The slots, the first arrival and a closed loop's ramp.
    fn start(&mut self, limit: Option<u32>, first_active: u32) {
        if self.open {
            if let Some(n) = limit {
                self.idle_slots.extend(0..n);
            }
            if let Some(item) = self.items.next() {
                let at = item.due.at_ns.unwrap_or(0);
                self.schedule(at, Ev::Arrival(Box::new(item)));
            }
        } else {
            for i in 0..limit.unwrap_or(0) {
                if i < first_active {
                    self.slot_free(i, 0);
                } else {
                    self.parked.push(i);
                }
            }
            if let Some(r) = &self.load.ramp {
                let start = self.ns_of(self.window.warmup_end().unwrap_or(self.t0));
                let every = r.every.as_nanos();
                for i in 1..r.levels.len() {
                    self.schedule(start + every * i as u64, Ev::Ramp(i));
                }
            }
        }
    }

    /// The event loop; true if interrupted.
    fn run_events(&mut self) -> bool {
        let mut turns_of_loop = 0u32;
        loop {
            turns_of_loop = turns_of_loop.wrapping_add(1);
            if turns_of_loop % 1024 == 0 && self.env.interrupt.is_set() {
                return true;
            }
            // A deadline of a request that has ended is dropped unseen: it
            // must not move the clock.
            while self.heap.peek().is_some_and(
                |Reverse(t)| matches!(t.ev, Ev::Deadline(id) if !self.flights.contains_key(&id)),
            ) {
                self.heap.pop();
            }
            let next_ev = self.heap.peek().map(|Reverse(t)| t.at);
            // The first engine's step to end (the lowest index on a tie).
            let step_end = self
                .busy
                .iter()
                .enumerate()
                .filter_map(|(i, b)| b.as_ref().map(|(t, _)| (*t, i)))
                .min();
            match (step_end, next_ev) {
                (None, None) => return false,
                (Some((s, i)), e) if e.is_none_or(|e| s <= e) => {
                    self.now = s;
                    self.end_step(i);
                }
                _ => {
                    let Some(Reverse(t)) = self.heap.pop() else {
                        return false;
                    };
                    self.now = t.at;
                    if matches!(t.ev, Ev::Arrival(_) | Ev::Turn(_) | Ev::Ramp(_)) {
                        self.pending -= 1;
                    }
                    self.handle(t.ev);
                    // Everything due at this instant goes in before an idle
                    // engine plans its next step.
                    if self.heap.peek().is_some_and(|Reverse(n)| n.at == self.now) {
                        continue;
                    }
                    self.start_idle();
                }
            }
        }
    }

    /// The simulated interval between reads, nanoseconds (at least 1 ms).
    fn scrape_ns(&self) -> Option<u64> {
        self.sampling
            .map(|s| (s.every.as_nanos() as u64).max(1_000_000))
    }

    /// Reads the simulated server's metrics and modelled GPUs now, as its
    /// `/metrics` would answer them (the same text, parsed by the same
    /// scraper and GPU reader as a real-time run's).
    fn sample(&mut self) {
        let Some(sampling) = self.sampling else {
            return;
        };
        let at = self.at(self.now);
        if sampling.metrics {
            let text = exposition(
                &self.model,
                &self.engine.stats(),
                self.steps,
                Lag::default(),
            );
            let values = prom::parse(&text)
                .map(|e| scrape::extract(&e))
                .map_err(|source| infer_bench_telemetry::Error::Malformed { url: None, source });
            self.scrapes.push((at, values));
        }
        if let Some(gpu) = &mut self.gpu {
            let engines: Vec<_> = (0..self.engine.len())
                .map(|i| self.engine.engine(i).stats())
                .collect();
            let text = gpu.exposition(self.now as f64 / 1e9, &engines);
            let seen = prom::parse(&text)
                .map(|e| dcgm::read(&e, &Filter::default()))
                .map_err(infer_bench_telemetry::Error::ModelledMalformed);
            let readings = seen.map(|seen| {
                if self.gpu_devices.is_empty() {
                    self.gpu_devices = seen.iter().map(|s| s.info.clone()).collect();
                }
                seen.into_iter().map(|s| s.reading).collect()
            });
            self.gpu_samples.push((at, readings));
        }
    }

    fn start_step(&mut self, i: usize) {
        if let Some(step) = self.engine.step(i) {
            self.steps += 1;
            let ns = (step.duration * self.speed * 1e9).max(0.0).round() as u64;
            if let Some(gpu) = &mut self.gpu {
                gpu.record(i, self.now as f64 / 1e9, ns as f64 / 1e9, &step);
            }
            self.busy[i] = Some((self.now + ns, step));
        }
    }

    /// Every idle engine with work starts its next step.
    fn start_idle(&mut self) {
        for i in 0..self.busy.len() {
            if self.busy[i].is_none() {
                self.start_step(i);
            }
        }
    }

    /// Engine `i`'s step ends: its tokens arrive, its next step is planned,
    /// then the finished requests end (and their slots send again).
    fn end_step(&mut self, i: usize) {
        let Some((_, step)) = self.busy[i].take() else {
            return;
        };
        for &(id, n) in &step.tokens {
            let per_event = self.per_event.max(1);
            let now = self.now;
            let Some(f) = self.flights.get_mut(&id).filter(|f| f.whole.is_none()) else {
                continue;
            };
            let mut left = n;
            while left > 0 {
                let m = left.min(per_event);
                if f.stream {
                    f.rec.events.push(OutputEvent {
                        at_ns: now - f.send_ns,
                        text_bytes: request::text_bytes(m, id + f.generated as u64),
                        token_ids: None,
                        reasoning: false,
                    });
                }
                f.generated += m;
                left -= m;
            }
            f.last_event_ns = now;
        }
        self.start_step(i);
        for id in &step.finished {
            let owner = self.members.remove(id).unwrap_or(*id);
            let done = self
                .flights
                .get_mut(&owner)
                .is_some_and(|f| match &mut f.whole {
                    Some(w) => {
                        w.left -= 1;
                        w.left == 0
                    }
                    None => true,
                });
            if let Some(f) = done.then(|| self.flights.remove(&owner)).flatten() {
                self.answered(owner, f);
            }
        }
        // An engine left idle takes what the finished requests' slots sent.
        self.start_idle();
    }

    /// A request the server finished: the response is complete.
    fn answered(&mut self, id: u64, mut f: Flight) {
        let now = self.now;
        f.rec.t_done = self.at(now);
        if let Some(w) = f.whole.take() {
            self.backend
                .read_answer(w.body.as_bytes(), &mut f.rec, self.at(now));
            return self.complete(f.rec, f.slot, f.conversation);
        }
        use infer_bench_sim::request::Wire;
        f.rec.response_id = Some(match self.wire {
            Wire::Chat => format!("chatcmpl-{id}"),
            Wire::Completions => format!("cmpl-{id}"),
            Wire::Responses => format!("resp_{id}"),
            Wire::Messages => format!("msg_{id}"),
        });
        if !f.stream || f.include_usage {
            f.rec.usage.prompt_tokens = Some(f.prompt_tokens);
            f.rec.usage.completion_tokens = Some(f.generated);
        }
        if f.generated == 0 {
            f.rec
                .fail(ErrorClass::Empty, "the stream completed without any output");
        } else if !f.stream {
            f.rec.events.push(OutputEvent {
                at_ns: now - f.send_ns,
                text_bytes: request::text_bytes(f.generated, id),
                token_ids: None,
                reasoning: false,
            });
        }
        if f.conversation.is_some() && f.rec.ok() {
            f.rec.reply = Some(request::text_of(f.generated, id));
        }
        self.complete(f.rec, f.slot, f.conversation);
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrival(item) => self.arrival(*item),
            Ev::Turn(turn) => self.turn(*turn),
            Ev::Ramp(i) => self.ramp(i),
            Ev::Deadline(id) => self.deadline(id),
            // A request that timed out before it got here is not submitted.
            Ev::Submit(id, seq) => {
                let owner = self.members.get(&id).copied().unwrap_or(id);
                if self.flights.contains_key(&owner) {
                    self.engine
                        .submit_with_images(id, seq.prompt, seq.max, seq.images);
                }
            }
            Ev::Scrape => {
                self.sample();
                // Read on while anything is left to happen.
                let more = self.pending > 0
                    || self.busy.iter().any(Option::is_some)
                    || !self.flights.is_empty();
                if let (true, Some(every)) = (more, self.scrape_ns()) {
                    self.schedule(self.now + every, Ev::Scrape);
                }
            }
        }
    }

    fn arrival(&mut self, item: Item) {
        if self.window.ended() {
            return;
        }
        let due = item.due.at_ns.unwrap_or(self.now);
        if !self.capped() {
            // Uncapped: sent at its time.
            let index = item.due.index * self.turns as u64;
            let Some(warmup) = self.admit(index, due) else {
                return;
            };
            self.send(item, warmup, due, due, None);
        } else {
            self.queue.push_back(item);
            if let Some(i) = self.idle_slots.pop_front() {
                self.slot_free(i, self.now);
            }
        }
        if !self.window.ended() {
            if let Some(next) = self.items.next() {
                let at = next.due.at_ns.unwrap_or(self.now);
                self.schedule(at, Ev::Arrival(Box::new(next)));
            }
        }
    }

    /// Whether an open loop goes through slots (`max_concurrency`).
    fn capped(&self) -> bool {
        self.open && self.load.max_concurrency.is_some()
    }

    /// Slot `i` is free since `free_since`: it takes its next request.
    fn slot_free(&mut self, i: u32, free_since: u64) {
        if self.window.ended() {
            return;
        }
        if !self.open {
            if i >= self.active {
                self.parked.push(i);
                return;
            }
            let end = self.window.measure_end().map(|e| self.ns_of(e));
            if end.is_some_and(|end| free_since >= end) {
                return;
            }
            let Some(item) = self.items.next() else {
                return;
            };
            let index = item.due.index * self.turns as u64;
            let Some(warmup) = self.admit(index, free_since) else {
                return;
            };
            self.send(item, warmup, free_since, free_since, Some(i));
            return;
        }
        let Some(item) = self.queue.pop_front() else {
            self.idle_slots.push_back(i);
            return;
        };
        let due = item.due.at_ns.unwrap_or(self.now);
        let t_slot = due.max(free_since).min(self.now);
        let index = item.due.index * self.turns as u64;
        let Some(warmup) = self.admit(index, due) else {
            return;
        };
        self.send(item, warmup, due, t_slot, Some(i));
    }

    fn admit(&mut self, index: u64, t_sched: u64) -> Option<bool> {
        let (warmup, opened) = self.window.admit(self.load, index, self.at(t_sched));
        if let Some(t) = opened {
            self.recorder.set_window_start(t);
        }
        warmup
    }

    fn send(&mut self, item: Item, warmup: bool, t_sched: u64, t_slot: u64, slot: Option<u32>) {
        let base = item.due.index * self.turns as u64;
        let conversation = item.session.map(|s| (Conversation::new(s), 0usize, base));
        self.send_one(
            base,
            0,
            item.prepared,
            warmup,
            t_sched,
            t_slot,
            slot,
            conversation,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn send_one(
        &mut self,
        index: u64,
        turn: u32,
        prepared: Prepared,
        warmup: bool,
        t_sched: u64,
        t_slot: u64,
        slot: Option<u32>,
        conversation: Option<(Conversation, usize, u64)>,
    ) {
        let warmup_end = self.ns_of(self.window.warmup_end().unwrap_or(self.t0));
        let step = step_at(self.load, t_sched.saturating_sub(warmup_end));
        let mut rec = RequestRecord::new(index, self.run, step, warmup, self.at(t_sched));
        rec.turn = turn;
        rec.t_slot = self.at(t_slot);
        rec.t_send = self.at(self.now);
        rec.t_done = rec.t_send;
        rec.requested_input = prepared.input_tokens;
        rec.requested_output = prepared.output_tokens;
        rec.part = prepared.part;
        rec.media = prepared.media;
        rec.units = prepared.units;
        self.in_flight += 1;
        self.env.live.in_flight.fetch_add(1, Ordering::Relaxed);
        if !warmup {
            self.concurrency_max = self.concurrency_max.max(self.in_flight);
        }
        let taken = match self.retrieval {
            Some(rerank) => retrieval::plan(
                &prepared.body,
                &self.served,
                self.max_len,
                rerank,
                self.next_id,
            )
            .map(|p| Taken {
                prompt_tokens: p.lengths.iter().sum(),
                seqs: p
                    .lengths
                    .iter()
                    .map(|&n| Seq {
                        prompt: n,
                        max: 1,
                        images: 0,
                    })
                    .collect(),
                stream: false,
                include_usage: true,
                answer: Some(p.body),
            }),
            None => request::read(&prepared.body, self.wire, &self.served, self.max_len).map(|a| {
                Taken {
                    seqs: vec![Seq {
                        prompt: a.prompt_tokens,
                        max: a.max_tokens,
                        images: a.image_tokens,
                    }],
                    prompt_tokens: a.prompt_tokens,
                    stream: a.stream,
                    include_usage: a.include_usage,
                    answer: None,
                }
            }),
        };
        match taken {
            Err(r) => {
                rec.failure = Some(Failure {
                    class: ErrorClass::of_status(r.status),
                    detail: format!("HTTP {}: {}", r.status, r.message),
                    status: Some(r.status),
                });
                self.refused_in_a_row += 1;
                if self.accepted == 0 && self.refused_in_a_row >= REFUSED_IN_A_ROW {
                    self.stopped.get_or_insert_with(|| {
                        format!(
                            "the run stopped early: the simulator refused all of its first {REFUSED_IN_A_ROW} requests ({})",
                            rec.failure.as_ref().map(|f| f.detail.as_str()).unwrap_or("")
                        )
                    });
                    self.window.end();
                }
                self.complete(rec, slot, conversation);
            }
            Ok(a) => {
                self.refused_in_a_row = 0;
                self.accepted += 1;
                let id = self.next_id;
                self.next_id += a.seqs.len() as u64;
                for (k, &seq) in a.seqs.iter().enumerate() {
                    let sid = id + k as u64;
                    if sid != id {
                        self.members.insert(sid, id);
                    }
                    if self.request_overhead_ns == 0 {
                        self.engine
                            .submit_with_images(sid, seq.prompt, seq.max, seq.images);
                    } else {
                        self.schedule(self.now + self.request_overhead_ns, Ev::Submit(sid, seq));
                    }
                }
                let whole = a.answer.map(|body| Whole {
                    body,
                    seqs: a.seqs.len() as u64,
                    left: a.seqs.len() as u64,
                });
                let first = self.first_deadline(self.now);
                self.schedule(first, Ev::Deadline(id));
                self.flights.insert(
                    id,
                    Flight {
                        rec,
                        send_ns: self.now,
                        last_event_ns: self.now,
                        generated: 0,
                        prompt_tokens: a.prompt_tokens,
                        stream: a.stream,
                        include_usage: a.include_usage,
                        slot,
                        conversation,
                        whole,
                    },
                );
            }
        }
    }

    fn first_deadline(&self, send_ns: u64) -> u64 {
        let t = self.load.timeouts;
        (send_ns + t.first_token.as_nanos()).min(send_ns + t.total.as_nanos())
    }

    /// The deadline a request in flight has now.
    fn deadline_of(&self, f: &Flight) -> (u64, bool) {
        let t = self.load.timeouts;
        let total = f.send_ns + t.total.as_nanos();
        let d = if f.rec.events.is_empty() && f.generated == 0 {
            self.first_deadline(f.send_ns)
        } else if f.stream {
            (f.last_event_ns + t.idle.as_nanos()).min(total)
        } else {
            total
        };
        (d, d == total)
    }

    fn deadline(&mut self, id: u64) {
        let Some(f) = self.flights.get(&id) else {
            return;
        };
        let (d, total) = self.deadline_of(f);
        if d > self.now {
            self.schedule(d, Ev::Deadline(id));
            return;
        }
        let Some(mut f) = self.flights.remove(&id) else {
            return;
        };
        match &f.whole {
            Some(w) => {
                for m in id..id + w.seqs {
                    self.engine.cancel(m);
                    self.members.remove(&m);
                }
            }
            None => self.engine.cancel(id),
        }
        let (class, detail) = timeout_failure(
            self.load.timeouts,
            total,
            f.rec.events.len(),
            Duration::from_nanos(self.now - f.last_event_ns),
        );
        f.rec.t_done = self.at(self.now);
        f.rec.fail(class, detail);
        self.complete(f.rec, f.slot, f.conversation);
    }

    /// A request ended (answered, refused or timed out): it is recorded,
    /// then its conversation's next turn is scheduled or its slot freed.
    fn complete(
        &mut self,
        mut rec: RequestRecord,
        slot: Option<u32>,
        conversation: Option<(Conversation, usize, u64)>,
    ) {
        self.in_flight -= 1;
        let live = &self.env.live;
        live.in_flight.fetch_sub(1, Ordering::Relaxed);
        if !rec.warmup {
            live.done.fetch_add(1, Ordering::Relaxed);
            if !rec.ok() {
                live.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        let ok = rec.ok();
        let done = self.ns_of(rec.t_done);
        let output_tokens = rec.output_tokens().0;
        let reply = rec.reply.take();
        self.recorder.record(&rec);
        if let Some(sink) = &self.env.sink {
            sink(&rec);
        }
        if let Some((mut conversation, k, base)) = conversation {
            if ok && !self.window.ended() && k + 1 < conversation.turns() {
                let prepared = conversation.next(
                    self.backend,
                    k + 1,
                    reply.unwrap_or_default(),
                    output_tokens,
                );
                let turn = Turn {
                    conversation,
                    k: k + 1,
                    base,
                    prepared,
                    slot,
                };
                self.schedule(done + self.think_ns, Ev::Turn(Box::new(turn)));
                return;
            }
        }
        if let Some(i) = slot {
            self.slot_free(i, done);
        }
    }

    fn turn(&mut self, t: Turn) {
        let index = t.base + t.k as u64;
        let Some(warmup) = self.admit(index, self.now) else {
            if let Some(i) = t.slot {
                self.slot_free(i, self.now);
            }
            return;
        };
        let now = self.now;
        self.send_one(
            index,
            t.k as u32,
            t.prepared,
            warmup,
            now,
            now,
            t.slot,
            Some((t.conversation, t.k, t.base)),
        );
    }

    fn ramp(&mut self, i: usize) {
        let Some(Level::Concurrency(c)) = self.load.ramp.as_ref().and_then(|r| r.levels.get(i))
        else {
            return;
        };
        self.active = super::schedule::agent_share(*c as u64, self.env.agent) as u32;
        let active = self.active;
        let mut woken: Vec<u32> = Vec::new();
        self.parked.retain(|&s| {
            if s < active {
                woken.push(s);
                false
            } else {
                true
            }
        });
        woken.sort_unstable();
        for s in woken {
            self.slot_free(s, self.now);
        }
    }

    fn finish(mut self, interrupted: bool) -> VirtualRun {
        let unfinished = if interrupted {
            self.flights.len() as u64
        } else {
            0
        };
        let ran_full = self.load.duration.is_some()
            && !self.window.by_count()
            && !interrupted
            && self.stopped.is_none();
        self.recorder.close(ran_full);
        self.recorder.note_in_flight(self.concurrency_max);
        self.recorder.unfinished(unfinished);
        let ended = self.at(self.now);
        VirtualRun {
            outcome: RunOutcome {
                recorder: self.recorder,
                interrupted,
                started: self.t0,
                stopped: self.stopped,
            },
            scrapes: self.scrapes,
            gpus: (!self.gpu_devices.is_empty()).then_some((self.gpu_devices, self.gpu_samples)),
            ended,
        }
    }
}
