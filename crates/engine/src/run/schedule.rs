//! What a run of a point sends, and when: the one derivation shared by a
//! real run (`pacer`) and a virtual one (`virtual_time`). Its prompts and
//! arrivals, drawn from the spec's seed and the point's request key, never
//! the point's hash ([`Schedule`]), this agent's share of slots and
//! requests under load sharding, the requests built from prompts
//! ([`build`]), which requests count ([`Window`]), a conversation's next
//! turn ([`Conversation`]), the run's recorder, and the bodies a point's
//! workload fingerprint hashes.

use std::sync::Arc;
use std::time::Instant;

use super::context::RunEnv;
use super::recorder::Recorder;
use infer_bench_protocol::{Backend, Prepared};
use infer_bench_spec::plan::PointConfig;
use infer_bench_spec::seed::{Purpose, derive};
use infer_bench_spec::{Level, Load, Warmup};
use infer_bench_workload::{Arrivals, Due, Material, Message, Prompt, PromptGen, Role};

/// What one run of a point sends and when: its prompts, its arrivals
/// (this agent's share), and its concurrency gate, derived from the
/// point's configuration and seeds alone.
pub(super) struct Schedule {
    pub(super) prompts: PromptGen,
    /// Arrivals in order, only this agent's under load sharding.
    pub(super) arrivals: Box<dyn Iterator<Item = Due> + Send>,
    /// An open loop (arrivals at their times) rather than a closed one.
    pub(super) open: bool,
    /// Turns per session (1 without a conversation).
    pub(super) turns: u32,
    /// Concurrency slots, if any, and how many are active at the start.
    pub(super) limit: Option<u32>,
    pub(super) first_active: u32,
}

impl Schedule {
    /// The schedule of run `run` of the point `cfg`, for the agent `env`
    /// names. Its streams come from the point's request key, never its
    /// hash: a client setting (a timeout) changes neither prompts nor
    /// arrivals.
    pub(super) fn of(cfg: &PointConfig, run: u32, env: &RunEnv) -> Schedule {
        let load = &cfg.load;
        let prompts = prompt_gen(cfg, run, &env.material);
        let arrivals = arrivals(cfg, run, &env.material);
        let open = arrivals.is_open();
        let agent = env.agent;
        let arrivals = arrivals
            .filter(move |d| agent.is_none_or(|(k, n)| d.index % n as u64 == (k - 1) as u64));
        let (limit, first_active) = slots(load, agent);
        Schedule {
            turns: prompts.turns(),
            prompts,
            arrivals: Box::new(arrivals),
            open,
            limit,
            first_active,
        }
    }
}

/// Of `c` slots (or requests) numbered from 0, how many are this agent's:
/// agent K of N takes those whose number is K-1 modulo N. All of them
/// without load sharding.
pub fn agent_share(c: u64, agent: Option<(u32, u32)>) -> u64 {
    match agent {
        Some((k, n)) => (c + n as u64 - k as u64) / n as u64,
        None => c,
    }
}

/// How many of the request indices `lo..hi` are this agent's.
pub(super) fn indices_of_agent(lo: u64, hi: u64, agent: Option<(u32, u32)>) -> u64 {
    agent_share(hi, agent) - agent_share(lo, agent)
}

/// A request ready to go: one request, or the first turn of a session.
pub(super) struct Item {
    pub(super) due: Due,
    pub(super) prepared: Prepared,
    /// A conversation: every turn's prompt (turn 0's is `prepared`).
    pub(super) session: Option<Vec<Prompt>>,
    /// Its share of the bytes built ahead of their send time, given back
    /// when it is sent or dropped (`super::pacer`'s lookahead).
    pub(super) credit: Option<super::pacer::Credit>,
}

impl Item {
    /// Bytes it holds: its body and, for a conversation, every turn's text.
    pub(super) fn bytes(&self) -> u64 {
        let turns: usize = self
            .session
            .iter()
            .flatten()
            .map(|p| p.text.len() + p.history.iter().map(|m| m.content.len()).sum::<usize>())
            .sum();
        (self.prepared.body.len() + turns) as u64
    }
}

/// Builds the request (or session) of arrival `due`: the one place that
/// turns prompts into bodies, shared by the pacer and the fingerprint.
pub(super) fn build<B: Backend>(backend: &B, prompts: &PromptGen, due: Due) -> Item {
    if prompts.turns() > 1 {
        let session = prompts.session(due.index);
        Item {
            due,
            prepared: backend.prepare(&session[0]),
            session: Some(session),
            credit: None,
        }
    } else {
        Item {
            due,
            prepared: backend.prepare(&prompts.prompt(due.index)),
            session: None,
            credit: None,
        }
    }
}

/// Requests per run whose bodies the workload fingerprint covers.
pub const FINGERPRINT_REQUESTS: u64 = 64;

/// SHA-256 over what the client builds for the first
/// [`FINGERPRINT_REQUESTS`] arrivals of every run of a point, in order:
/// each request's body, and for a conversation each later turn's new
/// message and lengths (the history also holds the server's replies, which
/// are not the client's to fix). Timing never enters it, so the same spec
/// and seed give the same fingerprint on every machine, and a change to
/// prompt synthesis, a dataset or a tokenizer changes it; a client
/// setting outside the request key (a timeout) does not.
pub fn workload_fingerprint<B: Backend>(
    backend: &B,
    cfg: &PointConfig,
    material: &Arc<Material>,
) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for run in 0..cfg.load.runs {
        let prompts = prompt_gen(cfg, run, material);
        for index in 0..FINGERPRINT_REQUESTS {
            let item = build(backend, &prompts, Due { index, at_ns: None });
            h.update((item.prepared.body.len() as u64).to_le_bytes());
            h.update(&item.prepared.body);
            for p in item.session.iter().flatten().skip(1) {
                h.update((p.text.len() as u64).to_le_bytes());
                h.update(p.text.as_bytes());
                h.update(p.input_tokens.to_le_bytes());
                h.update(p.output_tokens.to_le_bytes());
            }
        }
    }
    infer_bench_spec::hex(&h.finalize())
}

/// The arrivals of run `run` of a point, every agent's: a trace's
/// timestamps, or a schedule seeded from the spec's seed and the point's
/// request key (`PointConfig::request_key`), bounded by warm-up plus
/// duration.
pub fn arrivals(cfg: &PointConfig, run: u32, material: &Material) -> Arrivals {
    let load = &cfg.load;
    let warmup_ns = match load.warmup {
        Warmup::Time(d) => d.as_nanos(),
        _ => 0,
    };
    let horizon = load
        .duration
        .map(|d| warmup_ns + d.as_nanos())
        .unwrap_or(u64::MAX);
    let seed = derive(cfg.seed, &cfg.request_key(), run, Purpose::Arrivals);
    Arrivals::of_point(load, material, seed, horizon)
}

/// The prompt generator of one run of a point, seeded from the spec's
/// seed and the point's request key (`PointConfig::request_key`).
pub fn prompt_gen(cfg: &PointConfig, run: u32, material: &Arc<Material>) -> PromptGen {
    let key = cfg.request_key();
    let request_seed = derive(cfg.seed, &key, run, Purpose::Requests);
    let prefix_seed = derive(cfg.seed, &key, 0, Purpose::Prefixes);
    PromptGen::new(&cfg.workload, material.clone(), request_seed, prefix_seed)
}

/// The request bodies of the first `n` arrivals of a run, exactly as the
/// pacer builds them (first turns only, for conversations).
pub fn request_bodies<B: Backend>(
    backend: &B,
    cfg: &PointConfig,
    run: u32,
    material: &Arc<Material>,
    n: u64,
) -> Vec<bytes::Bytes> {
    let prompts = prompt_gen(cfg, run, material);
    (0..n)
        .map(|index| {
            build(backend, &prompts, Due { index, at_ns: None })
                .prepared
                .body
        })
        .collect()
}

/// Which requests count, decided as each is sent: the one set of rules
/// for a real run and a virtual one (`virtual_time.rs`).
pub(super) struct Window {
    warmup_end: Option<Instant>,
    measure_end: Option<Instant>,
    measured: u64,
    ended: bool,
    /// Ended because the request count was reached.
    by_count: bool,
    warmup_count: u64,
    /// Measured requests this process sends at most (its share of the
    /// point's `requests` under load sharding).
    request_limit: Option<u64>,
}

impl Window {
    /// The window of a run of `load` whose clock starts at `t0`.
    pub(super) fn new(load: &Load, t0: Instant, agent: Option<(u32, u32)>) -> Window {
        let warmup_end = match load.warmup {
            Warmup::Time(d) => Some(t0 + d.as_std()),
            Warmup::None => Some(t0),
            Warmup::Requests(_) => None,
        };
        let warmup_count = match load.warmup {
            Warmup::Requests(n) => n,
            _ => 0,
        };
        Window {
            warmup_end,
            measure_end: warmup_end.and_then(|w| load.duration.map(|d| w + d.as_std())),
            measured: 0,
            ended: false,
            by_count: false,
            warmup_count,
            request_limit: load
                .requests
                .map(|n| indices_of_agent(warmup_count, warmup_count + n, agent)),
        }
    }

    /// Admits request `index`, scheduled at `t_sched`: `Some(warm_up)`, or
    /// `None` once the run has ended (by time or count). The second value
    /// is the window's start when this request opened it (warm-up by
    /// count: the first measured request).
    pub(super) fn admit(
        &mut self,
        load: &Load,
        index: u64,
        t_sched: Instant,
    ) -> (Option<bool>, Option<Instant>) {
        if self.ended {
            return (None, None);
        }
        if self.measure_end.is_some_and(|end| t_sched >= end) {
            self.ended = true;
            return (None, None);
        }
        let warmup = match load.warmup {
            Warmup::Requests(_) => index < self.warmup_count,
            _ => self.warmup_end.is_some_and(|end| t_sched < end),
        };
        let mut opened = None;
        if !warmup {
            if self.request_limit.is_some_and(|n| self.measured >= n) {
                self.ended = true;
                self.by_count = true;
                return (None, None);
            }
            if self.warmup_end.is_none() {
                self.warmup_end = Some(t_sched);
                self.measure_end = load.duration.map(|d| t_sched + d.as_std());
                opened = Some(t_sched);
            }
            self.measured += 1;
        }
        (Some(warmup), opened)
    }

    pub(super) fn ended(&self) -> bool {
        self.ended
    }

    pub(super) fn end(&mut self) {
        self.ended = true;
    }

    pub(super) fn by_count(&self) -> bool {
        self.by_count
    }

    pub(super) fn warmup_end(&self) -> Option<Instant> {
        self.warmup_end
    }

    pub(super) fn measure_end(&self) -> Option<Instant> {
        self.measure_end
    }
}

/// A conversation under way: every turn's new message, and the history
/// that grows in place as turns are answered, never copied. The one place
/// that turns a reply into the next turn's prompt, for a real run and a
/// virtual one.
pub(super) struct Conversation {
    session: Vec<Prompt>,
    history: Vec<Message>,
    /// What the client knows of the history's length: the messages as
    /// built, and each reply as the server counted it.
    history_tokens: u32,
}

impl Conversation {
    pub(super) fn new(mut session: Vec<Prompt>) -> Conversation {
        let history = session
            .first_mut()
            .map(|p| std::mem::take(&mut p.history))
            .unwrap_or_default();
        Conversation {
            session,
            history,
            history_tokens: 0,
        }
    }

    pub(super) fn turns(&self) -> usize {
        self.session.len()
    }

    /// The request of turn `k` (from 1), once turn `k - 1` was answered
    /// with `reply` of `output_tokens` tokens.
    pub(super) fn next<B: Backend + ?Sized>(
        &mut self,
        backend: &B,
        k: usize,
        reply: String,
        output_tokens: u32,
    ) -> Prepared {
        // Each turn's prompt borrows the history for the body and gives it
        // back.
        let before = &mut self.session[k - 1];
        self.history.push(Message {
            role: Role::User,
            content: std::mem::take(&mut before.text),
        });
        self.history.push(Message {
            role: Role::Assistant,
            content: reply,
        });
        self.history_tokens += before.input_tokens + output_tokens;
        let now = &mut self.session[k];
        let prompt = Prompt {
            history: std::mem::take(&mut self.history),
            text: std::mem::take(&mut now.text),
            input_tokens: self.history_tokens + now.input_tokens,
            output_tokens: now.output_tokens,
            part: now.part,
            media: now.media.clone(),
            items: Vec::new(),
            item_tokens: 0,
        };
        let prepared = backend.prepare(&prompt);
        self.history = prompt.history;
        now.text = prompt.text;
        prepared
    }
}

/// The slots of a run: how many concurrency slots there are (a closed
/// loop's largest level, an open loop's `max_concurrency`, none for an
/// open loop without one) and how many are active at the start, this
/// agent's share of each under load sharding.
pub(super) fn slots(load: &Load, agent: Option<(u32, u32)>) -> (Option<u32>, u32) {
    let limit: Option<u32> = match (load.level, load.max_concurrency) {
        (Level::Concurrency(_), _) => Some(
            load.ramp
                .as_ref()
                .map(|r| {
                    r.levels
                        .iter()
                        .map(|l| if let Level::Concurrency(c) = l { *c } else { 0 })
                        .max()
                        .unwrap_or(0)
                })
                .unwrap_or(match load.level {
                    Level::Concurrency(c) => c,
                    _ => 0,
                }),
        ),
        (Level::Rate(_), Some(m)) => Some(m),
        _ => None,
    };
    let first_active = match load.level {
        Level::Concurrency(c) => c,
        _ => limit.unwrap_or(0),
    };
    // Load sharding: this agent runs its share of the slots, so the
    // agents' slots together are the point's.
    let share = |c: u32| agent_share(c as u64, agent) as u32;
    let limit = limit.map(share);
    let first_active = share(first_active);
    (limit, first_active)
}

/// The recorder of a run of `cfg` whose clock starts at `t0` (and whose
/// window starts at `window_start`, where it is known before the first
/// request): the same for a real run and a virtual one.
pub(super) fn new_recorder(
    cfg: &PointConfig,
    open: bool,
    turns: u32,
    t0: Instant,
    window_start: Option<Instant>,
) -> Recorder {
    let load = &cfg.load;
    let mut recorder = Recorder::new(
        cfg.workload.stream,
        cfg.goodput.clone(),
        open,
        load.window,
        load.ramp.is_some(),
    );
    if let Some(d) = load.duration {
        recorder.set_duration(d.as_std());
    }
    if load.cold_connections {
        recorder.keep_connect_in_latency();
    }
    if let Some(w) = window_start {
        recorder.set_window_start(w);
    }
    if turns > 1 {
        recorder.track_turns();
    }
    if !cfg.workload.mix.is_empty() {
        recorder.track_parts();
    }
    recorder.track_phases(t0);
    recorder
}
