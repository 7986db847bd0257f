//! The simulator's OpenAI-compatible server: an in-process HTTP server on
//! 127.0.0.1 (port chosen by the OS) whose responses are paced by the
//! continuous-batching `Engine` in real time. The engine runs on its own
//! thread and sleeps each step's modelled duration against an absolute
//! schedule; HTTP runs on a small runtime of its own, so the client under
//! test and the simulated server do not share an executor. It streams SSE
//! exactly as vLLM does (role chunk, content deltas, a usage chunk, `[DONE]`)
//! and exposes `/metrics` in vLLM's metric names, true of the simulation,
//! with its GPUs' modelled activity and memory under dcgm-exporter's names
//! (`gpu.rs`). A vision or encoder network is served over KServe v2
//! instead (`server/tensor.rs`), its one instance paced by `network.rs`.

use crate::error::Error;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hyper::{Method, StatusCode};
use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::answers::{self, Answerer, SimToken};
use super::cluster::Cluster;
use super::engine::{EngineStats, Step};
use super::gpu::GpuModel;
use super::request::{self, Accepted, Setup, Wire, speed_of, text_of};
use crate::http::{self, BodySender, Request, Response};
use infer_bench_results::ServerInfo;
use infer_bench_spec::plan::PointConfig;

enum Cmd {
    Submit {
        id: u64,
        prompt_tokens: u32,
        max_tokens: u32,
        /// Of the prompt, its images' tokens.
        image_tokens: u32,
        tx: mpsc::UnboundedSender<Out>,
    },
    Cancel(u64),
}

/// What the engine thread tells a request.
enum Out {
    Tokens(u32),
    Done,
}

/// Counters the HTTP side reads for `/metrics`.
#[derive(Default)]
struct Shared {
    stats: Mutex<Option<EngineStats>>,
    steps_total: AtomicU64,
    /// How far behind its own schedule the engine thread ran, in µs.
    lag_max_us: AtomicU64,
    lag_sum_us: AtomicU64,
    lag_late_steps: AtomicU64,
    /// The simulated GPUs' modelled activity, with each engine's counters
    /// (for the KV cache each replica holds), and the clock's origin.
    gpu: Mutex<Option<GpuState>>,
}

/// The modelled GPUs, each engine's counters and the clock's origin.
type GpuState = (GpuModel, Vec<EngineStats>, Instant);

/// A running simulator.
pub struct SimServer {
    rt: Option<tokio::runtime::Runtime>,
    handle: Option<http::ServerHandle>,
    engine: Option<std::thread::JoinHandle<()>>,
    cmds: std_mpsc::Sender<Cmd>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    /// Run-to-run speed factor (1 = as modelled), as f64 bits.
    speed: Arc<AtomicU64>,
    noise: f64,
    seed: u64,
    info: ServerInfo,
    /// What the base URL ends with: "/v1" (OpenAI), "" (KServe v2).
    api_root: &'static str,
}

struct Ctx {
    cmds: std_mpsc::Sender<Cmd>,
    next_id: AtomicU64,
    served: Vec<String>,
    max_len: u32,
    shared: Arc<Shared>,
    tokens_per_event: u32,
    request_overhead: Duration,
    answers: Answerer,
}

impl SimServer {
    /// Starts the simulator for a point's target, model and precision.
    pub fn start(cfg: &PointConfig) -> Result<SimServer, Error> {
        SimServer::start_on(cfg, 0)
    }

    /// `start` on a given port of 127.0.0.1 (0: one the OS picks).
    pub fn start_on(cfg: &PointConfig, port: u16) -> Result<SimServer, Error> {
        if cfg.model.network.is_some() {
            return tensor::start(cfg, port);
        }
        let Setup {
            engine,
            served,
            noise,
            seed,
            info,
            answers,
        } = Setup::of(cfg)?;
        let max_len = engine.max_model_len_tokens();
        let request_overhead = Duration::from_secs_f64(engine.request_overhead_s());
        let tokens_per_event = engine.tokens_per_event();
        let shared = Arc::new(Shared::default());
        *shared.gpu.lock() = Some((
            GpuModel::new(engine.engine(0).perf(), engine.len(), super::gpu::WINDOW_S),
            Vec::new(),
            Instant::now(),
        ));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let speed = Arc::new(AtomicU64::new(1.0f64.to_bits()));
        let (cmds, rx) = std_mpsc::channel::<Cmd>();
        let engine_thread = {
            let shared = shared.clone();
            let stop = stop.clone();
            let speed = speed.clone();
            std::thread::Builder::new()
                .name("sim-engine".into())
                .spawn(move || drive(engine, rx, shared, stop, speed))
                .map_err(Error::Thread)?
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("sim-http")
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        let ctx = Arc::new(Ctx {
            cmds: cmds.clone(),
            next_id: AtomicU64::new(1),
            served,
            max_len,
            shared,
            tokens_per_event,
            request_overhead,
            answers,
        });
        let handle = rt
            .block_on(http::bind_port(port, move |req| {
                let ctx = ctx.clone();
                async move { handle(ctx, req).await }
            }))
            .map_err(Error::Bind)?;
        Ok(SimServer {
            rt: Some(rt),
            handle: Some(handle),
            engine: Some(engine_thread),
            cmds,
            stop,
            speed,
            noise,
            seed,
            info,
            api_root: "/v1",
        })
    }

    pub fn base_url(&self) -> String {
        self.handle
            .as_ref()
            .map(|h| h.url(self.api_root))
            .unwrap_or_default()
    }

    pub fn metrics_url(&self) -> String {
        self.handle
            .as_ref()
            .map(|h| h.url("/metrics"))
            .unwrap_or_default()
    }

    pub fn info(&self) -> ServerInfo {
        self.info.clone()
    }

    /// Draws this run's speed factor from N(1, noise), deterministically
    /// from the spec's seed and the run index.
    pub fn begin_run(&self, run: u32) {
        let factor = speed_of(self.noise, self.seed, run);
        self.speed.store(factor.to_bits(), Ordering::Relaxed);
    }

    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let (Some(rt), Some(h)) = (self.rt.as_ref(), self.handle.take()) {
            rt.block_on(h.shutdown_within(Duration::from_millis(200)));
        }
        if let Some(t) = self.engine.take() {
            let _ = self.cmds.send(Cmd::Cancel(0));
            let _ = t.join();
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_millis(200));
        }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn set_timer_slack() {
    #[cfg(target_os = "linux")]
    // SAFETY: affects only this thread's timer precision.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// The engine thread: admit, step, sleep until a step's end on an absolute
/// schedule, deliver tokens. Each engine of the deployment (a replica, or
/// a pipeline's micro-batch) keeps a schedule of its own; with one engine
/// this is the plain loop.
fn drive(
    mut cluster: Cluster,
    rx: std_mpsc::Receiver<Cmd>,
    shared: Arc<Shared>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    speed: Arc<AtomicU64>,
) {
    set_timer_slack();
    let n = cluster.len();
    let mut streams: HashMap<u64, mpsc::UnboundedSender<Out>> = HashMap::new();
    // Per engine, the end of its previous step: the next one starts there
    // when the engine is busy, so OS jitter does not accumulate; and the
    // step under way, with its end.
    let mut clock: Vec<Option<Instant>> = vec![None; n];
    let mut under_way: Vec<Option<(Instant, Step)>> = (0..n).map(|_| None).collect();
    let apply = |cmd: Cmd,
                 cluster: &mut Cluster,
                 streams: &mut HashMap<u64, mpsc::UnboundedSender<Out>>| match cmd {
        Cmd::Submit {
            id,
            prompt_tokens,
            max_tokens,
            image_tokens,
            tx,
        } => {
            cluster.submit_with_images(id, prompt_tokens, max_tokens, image_tokens);
            streams.insert(id, tx);
        }
        Cmd::Cancel(id) => {
            cluster.cancel(id);
            streams.remove(&id);
        }
    };
    while !stop.load(Ordering::Relaxed) {
        while let Ok(cmd) = rx.try_recv() {
            apply(cmd, &mut cluster, &mut streams);
        }
        // Every idle engine with work starts its next step; the metrics
        // then show what the steps under way hold.
        let factor = f64::from_bits(speed.load(Ordering::Relaxed));
        for i in 0..n {
            if under_way[i].is_some() {
                continue;
            }
            let Some(step) = cluster.step(i) else {
                clock[i] = None;
                continue;
            };
            let now = Instant::now();
            let start = match clock[i] {
                Some(c) if c + Duration::from_millis(2) >= now => c,
                Some(c) => {
                    // Behind schedule: the host, not the model, set this pace.
                    let late = now.duration_since(c).as_micros() as u64;
                    shared.lag_sum_us.fetch_add(late, Ordering::Relaxed);
                    shared.lag_max_us.fetch_max(late, Ordering::Relaxed);
                    shared.lag_late_steps.fetch_add(1, Ordering::Relaxed);
                    now
                }
                None => now,
            };
            let length = Duration::from_secs_f64((step.duration * factor).max(0.0));
            if let Some((gpu, _, origin)) = shared.gpu.lock().as_mut() {
                let at = start.saturating_duration_since(*origin).as_secs_f64();
                gpu.record(i, at, length.as_secs_f64(), &step);
            }
            under_way[i] = Some((start + length, step));
        }
        *shared.stats.lock() = Some(cluster.stats());
        if let Some((_, engines, _)) = shared.gpu.lock().as_mut() {
            engines.clear();
            engines.extend((0..n).map(|i| cluster.engine(i).stats()));
        }
        let Some(end) = under_way.iter().flatten().map(|(e, _)| *e).min() else {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(cmd) => apply(cmd, &mut cluster, &mut streams),
                Err(std_mpsc::RecvTimeoutError::Timeout) => {}
                Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
            }
            continue;
        };
        // An idle engine takes a request that arrives before the others'
        // steps end.
        if under_way.iter().any(Option::is_none) {
            let left = end.saturating_duration_since(Instant::now());
            if left > Duration::from_micros(300) {
                match rx.recv_timeout(left - Duration::from_micros(200)) {
                    Ok(cmd) => {
                        apply(cmd, &mut cluster, &mut streams);
                        continue;
                    }
                    Err(std_mpsc::RecvTimeoutError::Timeout) => {}
                    Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
        }
        wait_until(end, &stop);
        let now = Instant::now();
        for i in 0..n {
            if under_way[i].as_ref().is_none_or(|(e, _)| *e > now) {
                continue;
            }
            let Some((end, step)) = under_way[i].take() else {
                continue;
            };
            clock[i] = Some(end);
            for (id, n) in &step.tokens {
                if let Some(tx) = streams.get(id) {
                    if tx.send(Out::Tokens(*n)).is_err() {
                        cluster.cancel(*id);
                        streams.remove(id);
                    }
                }
            }
            for id in &step.finished {
                if let Some(tx) = streams.remove(id) {
                    let _ = tx.send(Out::Done);
                }
            }
            shared.steps_total.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn error(status: StatusCode, message: &str, kind: &str) -> Response {
    http::error_response_typed(status, message, kind)
}

pub mod retrieval;
mod tensor;

async fn handle(ctx: Arc<Ctx>, req: Request) -> Response {
    match (req.method.clone(), req.path.as_str()) {
        (Method::GET, "/health") => Response::full(StatusCode::OK, "text/plain", ""),
        (Method::GET, "/metrics") => {
            Response::full(StatusCode::OK, "text/plain; version=0.0.4", metrics(&ctx))
        }
        (Method::GET, "/version") => Response::json(
            StatusCode::OK,
            format!("{{\"version\":\"{}\"}}", env!("CARGO_PKG_VERSION")),
        ),
        (Method::GET, "/v1/models") => {
            let data: Vec<serde_json::Value> = ctx
                .served
                .iter()
                .map(|m| serde_json::json!({"id": m, "object": "model", "owned_by": "infer-bench-sim", "max_model_len": ctx.max_len}))
                .collect();
            Response::json(
                StatusCode::OK,
                serde_json::json!({"object": "list", "data": data}).to_string(),
            )
        }
        (Method::POST, "/v1/completions") => complete(ctx, req, Wire::Completions).await,
        (Method::POST, "/v1/chat/completions") => complete(ctx, req, Wire::Chat).await,
        (Method::POST, "/v1/responses") => complete(ctx, req, Wire::Responses).await,
        (Method::POST, "/v1/messages") => complete(ctx, req, Wire::Messages).await,
        (Method::POST, "/v1/embeddings") => retrieval::answer(ctx, req, false).await,
        (Method::POST, "/v1/rerank" | "/rerank") => retrieval::answer(ctx, req, true).await,
        _ => error(
            StatusCode::NOT_FOUND,
            &format!("no route for {} {}", req.method, req.path),
            "not_found_error",
        ),
    }
}

fn metrics(ctx: &Ctx) -> String {
    let s = (*ctx.shared.stats.lock()).unwrap_or_default();
    let model = ctx.served.first().cloned().unwrap_or_default();
    let lag = Lag {
        late_steps: ctx.shared.lag_late_steps.load(Ordering::Relaxed),
        max_s: ctx.shared.lag_max_us.load(Ordering::Relaxed) as f64 / 1e6,
        sum_s: ctx.shared.lag_sum_us.load(Ordering::Relaxed) as f64 / 1e6,
    };
    let mut text = exposition(
        &model,
        &s,
        ctx.shared.steps_total.load(Ordering::Relaxed),
        lag,
    );
    if let Some((gpu, engines, origin)) = ctx.shared.gpu.lock().as_mut() {
        text.push_str(&gpu.exposition(origin.elapsed().as_secs_f64(), engines));
    }
    text
}

/// How far behind its own schedule a real-time simulator ran (zero in
/// virtual time).
#[derive(Debug, Clone, Copy, Default)]
pub struct Lag {
    pub late_steps: u64,
    pub max_s: f64,
    pub sum_s: f64,
}

/// The simulator's `/metrics` text: the engine's counters and gauges in
/// vLLM's metric names, and its own step and lag counters. The HTTP server
/// serves it; a virtual-time run reads the same text at each simulated
/// scrape.
pub fn exposition(model: &str, s: &EngineStats, steps: u64, lag: Lag) -> String {
    // The label's value is the served name, which a spec chooses: escaped
    // as the text format defines, so no name ends its label or its line.
    let l = format!(
        "{{model_name=\"{}\"}}",
        infer_bench_results::outside::prom_label(model)
    );
    let late = lag.late_steps;
    let lag_max = lag.max_s;
    let lag_sum = lag.sum_s;
    format!(
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n\
         # TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{l} {}\n\
         # HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n\
         # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{l} {}\n\
         # HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n\
         # TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{l} {}\n\
         # HELP vllm:gpu_cache_usage_perc GPU KV-cache usage (older name). 1 means 100 percent usage.\n\
         # TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{l} {}\n\
         # HELP vllm:num_preemptions_total Cumulative number of preemptions from the engine.\n\
         # TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total{l} {}\n\
         # HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n\
         # TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{l} {}\n\
         # HELP vllm:generation_tokens_total Number of generation tokens processed.\n\
         # TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{l} {}\n\
         # HELP vllm:request_success_total Count of successfully processed requests.\n\
         # TYPE vllm:request_success_total counter\nvllm:request_success_total{l} {}\n\
         # HELP infer_bench_sim_kv_cache_capacity_tokens KV-cache capacity of the simulated server.\n\
         # TYPE infer_bench_sim_kv_cache_capacity_tokens gauge\ninfer_bench_sim_kv_cache_capacity_tokens{l} {}\n\
         # HELP infer_bench_sim_steps_total Engine steps run.\n\
         # TYPE infer_bench_sim_steps_total counter\ninfer_bench_sim_steps_total{l} {steps}\n\
         # HELP infer_bench_sim_late_steps_total Steps that started more than 2 ms behind the simulator's own schedule.\n\
         # TYPE infer_bench_sim_late_steps_total counter\ninfer_bench_sim_late_steps_total{l} {late}\n\
         # HELP infer_bench_sim_lag_seconds_max Largest delay behind the simulator's own schedule.\n\
         # TYPE infer_bench_sim_lag_seconds_max gauge\ninfer_bench_sim_lag_seconds_max{l} {lag_max}\n\
         # HELP infer_bench_sim_lag_seconds_total Sum of delays behind the simulator's own schedule.\n\
         # TYPE infer_bench_sim_lag_seconds_total counter\ninfer_bench_sim_lag_seconds_total{l} {lag_sum}\n",
        s.running,
        s.waiting,
        s.kv_usage,
        s.kv_usage,
        s.preemptions_total,
        s.prompt_tokens_total,
        s.generation_tokens_total,
        s.requests_finished_total,
        s.kv_capacity_tokens,
    )
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

async fn send(s: &BodySender, b: Bytes) -> bool {
    s.send(b).await.is_ok()
}

async fn complete(ctx: Arc<Ctx>, req: Request, wire: Wire) -> Response {
    let Accepted {
        model,
        prompt_tokens,
        max_tokens,
        image_tokens,
        stream,
        include_usage,
        greedy,
        ask,
    } = match request::read(&req.body, wire, &ctx.served, ctx.max_len) {
        Ok(a) => a,
        Err(r) => {
            let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_REQUEST);
            return error(status, &r.message, r.kind);
        }
    };
    // The server's own time before the engine sees the request (HTTP,
    // tokenization): the profile's request overhead.
    if !ctx.request_overhead.is_zero() {
        tokio::time::sleep(ctx.request_overhead).await;
    }
    let id = ctx.next_id.fetch_add(1, Ordering::Relaxed);
    let (tx, mut rx) = mpsc::unbounded_channel();
    if ctx
        .cmds
        .send(Cmd::Submit {
            id,
            prompt_tokens,
            max_tokens,
            image_tokens,
            tx,
        })
        .is_err()
    {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the simulator is shutting down",
            "ServiceUnavailable",
        );
    }
    let frames = Frames {
        wire,
        id: match wire {
            Wire::Chat => format!("chatcmpl-{id}"),
            Wire::Completions => format!("cmpl-{id}"),
            Wire::Responses => format!("resp_{id}"),
            Wire::Messages => format!("msg_{id}"),
        },
        created: now_unix(),
        model,
        prompt_tokens,
    };
    if !stream {
        let mut n = 0u32;
        while let Some(out) = rx.recv().await {
            match out {
                Out::Tokens(k) => n += k,
                Out::Done => break,
            }
        }
        let mut body = frames.answer(&ctx.answers, greedy, n, id);
        if let Some(ask) = &ask {
            frames.structured_whole(&mut body, ask, n);
        }
        return Response::json(StatusCode::OK, body.to_string());
    }
    let (response, sender) = Response::stream(StatusCode::OK, "text/event-stream; charset=utf-8");
    let cmds = ctx.cmds.clone();
    let per_event = ctx.tokens_per_event;
    // A greedy answer streams its words (log-probabilities are given only
    // in whole answers).
    let mut generation = greedy.map(|g| ctx.answers.generate(g.prompt, 0));
    let structured = ask.map(|a| {
        let text = a.text(max_tokens as usize);
        (a, text)
    });
    tokio::spawn(async move {
        if let Some(first) = frames.prelude() {
            if !send(&sender, first).await {
                let _ = cmds.send(Cmd::Cancel(id));
                return;
            }
        }
        let mut n = 0u32;
        let mut alive = true;
        while let Some(out) = rx.recv().await {
            let k = match out {
                Out::Tokens(k) => k,
                Out::Done => break,
            };
            // The engine may hand several tokens at once; they go out in
            // events of `tokens_per_event`.
            let mut left = k;
            while left > 0 {
                let m = left.min(per_event.max(1));
                let event = match (&structured, &mut generation) {
                    (Some((ask, text)), _) => {
                        let piece: String = (n..n + m)
                            .map(|i| crate::structured::piece(text, i, max_tokens))
                            .collect();
                        frames.structured_delta(ask, &piece, n == 0)
                    }
                    (None, Some(g)) => {
                        frames.delta(&answers::text(g.by_ref().take(m as usize).map(|t| t.word)))
                    }
                    (None, None) => frames.delta(&text_of(m, id + n as u64)),
                };
                n += m;
                left -= m;
                if !send(&sender, event).await {
                    alive = false;
                    break;
                }
            }
            if !alive {
                let _ = cmds.send(Cmd::Cancel(id));
                return;
            }
        }
        for last in frames.end(n, include_usage) {
            if !send(&sender, last).await {
                return;
            }
        }
    });
    response
}

/// A whole (non-streamed) chat or completions answer, as this server
/// would write it after generating all of `max_tokens`, without running
/// the engine: what a quality prompt costs on the virtual clock, where no
/// server runs. The body is the one the HTTP server writes, so the client
/// reads both with one reader. A request the server would refuse is
/// refused in the same words.
pub fn answer_at_once(setup: &Setup, body: &[u8], wire: Wire) -> Result<Vec<u8>, request::Refusal> {
    let max_len = setup.engine.max_model_len_tokens();
    let accepted = request::read(body, wire, &setup.served, max_len)?;
    let frames = Frames {
        wire,
        id: "quality".into(),
        created: 0,
        model: accepted.model,
        prompt_tokens: accepted.prompt_tokens,
    };
    let body = frames.answer(&setup.answers, accepted.greedy, accepted.max_tokens, 0);
    Ok(body.to_string().into_bytes())
}

/// How one request's answer goes on the wire, in the API it came by.
struct Frames {
    wire: Wire,
    id: String,
    created: u64,
    model: String,
    prompt_tokens: u32,
}

impl Frames {
    /// A whole answer of `n` tokens: a greedy request's from `answers`,
    /// with its log-probabilities where it asked for them; any other the
    /// filler text of request `id`.
    fn answer(
        &self,
        answers: &Answerer,
        greedy: Option<request::Greedy>,
        n: u32,
        id: u64,
    ) -> serde_json::Value {
        let Some(g) = greedy else {
            return self.whole(&text_of(n, id), n);
        };
        let tokens = answers.answer(g.prompt, n, g.top_logprobs.unwrap_or(0));
        let mut body = self.whole(&answers::text(tokens.iter().map(|t| t.word)), n);
        if g.top_logprobs.is_some() {
            self.add_logprobs(&mut body, &tokens);
        }
        body
    }

    fn sse(v: &serde_json::Value) -> Bytes {
        Bytes::from(format!("data: {v}\n\n"))
    }

    /// A typed event (Responses, Messages API).
    fn typed(kind: &str, v: &serde_json::Value) -> Bytes {
        Bytes::from(format!("event: {kind}\ndata: {v}\n\n"))
    }

    fn chunk(&self, choice: serde_json::Value) -> serde_json::Value {
        let object = match self.wire {
            Wire::Chat => "chat.completion.chunk",
            _ => "text_completion",
        };
        serde_json::json!({"id": self.id, "object": object, "created": self.created, "model": self.model, "choices": [choice]})
    }

    fn usage(&self, n: u32) -> serde_json::Value {
        let p = self.prompt_tokens;
        serde_json::json!({"prompt_tokens": p, "completion_tokens": n, "total_tokens": p + n})
    }

    fn responses_usage(&self, n: u32) -> serde_json::Value {
        let p = self.prompt_tokens;
        serde_json::json!({"input_tokens": p, "output_tokens": n, "total_tokens": p + n})
    }

    /// What goes before the first token: chat's role-only delta, the
    /// Responses API's `response.created`, the Messages API's
    /// `message_start` (with the input usage) and first block.
    fn prelude(&self) -> Option<Bytes> {
        use serde_json::json;
        match self.wire {
            Wire::Completions => None,
            Wire::Chat => Some(Self::sse(&self.chunk(
                json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}),
            ))),
            Wire::Responses => Some(Self::typed(
                "response.created",
                &json!({"type": "response.created", "response": {"id": self.id, "object": "response", "created_at": self.created, "model": self.model, "status": "in_progress", "output": []}}),
            )),
            Wire::Messages => {
                let mut b = BytesMut::new();
                b.extend_from_slice(&Self::typed(
                    "message_start",
                    &json!({"type": "message_start", "message": {"id": self.id, "type": "message", "role": "assistant", "content": [], "model": self.model, "stop_reason": null, "usage": {"input_tokens": self.prompt_tokens, "output_tokens": 0}}}),
                ));
                b.extend_from_slice(&Self::typed(
                    "content_block_start",
                    &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                ));
                Some(b.freeze())
            }
        }
    }

    /// One event of generated text.
    fn delta(&self, text: &str) -> Bytes {
        use serde_json::json;
        match self.wire {
            Wire::Completions => Self::sse(&self.chunk(
                json!({"index": 0, "text": text, "logprobs": null, "finish_reason": null}),
            )),
            Wire::Chat => Self::sse(&self.chunk(
                json!({"index": 0, "delta": {"content": text}, "logprobs": null, "finish_reason": null}),
            )),
            Wire::Responses => Self::typed(
                "response.output_text.delta",
                &json!({"type": "response.output_text.delta", "item_id": "msg_0", "output_index": 0, "content_index": 0, "delta": text}),
            ),
            Wire::Messages => Self::typed(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            ),
        }
    }

    /// One event of a structured answer: a piece of its JSON text, or of
    /// a tool call's arguments (chat names the tool in the first; the
    /// Responses and Messages APIs open the call's item or block first).
    fn structured_delta(&self, ask: &crate::structured::Ask, piece: &str, first: bool) -> Bytes {
        use serde_json::json;
        let crate::structured::Ask::Tool { name, .. } = ask else {
            return self.delta(piece);
        };
        match self.wire {
            Wire::Chat => {
                let call = if first {
                    json!({"index": 0, "id": "call_0", "type": "function", "function": {"name": name, "arguments": piece}})
                } else {
                    json!({"index": 0, "function": {"arguments": piece}})
                };
                Self::sse(&self.chunk(
                    json!({"index": 0, "delta": {"tool_calls": [call]}, "logprobs": null, "finish_reason": null}),
                ))
            }
            Wire::Responses => {
                let mut b = BytesMut::new();
                if first {
                    b.extend_from_slice(&Self::typed(
                        "response.output_item.added",
                        &json!({"type": "response.output_item.added", "output_index": 0,
                            "item": {"type": "function_call", "id": "fc_0", "call_id": "call_0", "name": name, "arguments": ""}}),
                    ));
                }
                b.extend_from_slice(&Self::typed(
                    "response.function_call_arguments.delta",
                    &json!({"type": "response.function_call_arguments.delta", "item_id": "fc_0", "output_index": 0, "delta": piece}),
                ));
                b.freeze()
            }
            Wire::Messages => {
                let mut b = BytesMut::new();
                if first {
                    b.extend_from_slice(&Self::typed(
                        "content_block_start",
                        &json!({"type": "content_block_start", "index": 1,
                            "content_block": {"type": "tool_use", "id": "toolu_0", "name": name, "input": {}}}),
                    ));
                }
                b.extend_from_slice(&Self::typed(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": piece}}),
                ));
                b.freeze()
            }
            Wire::Completions => self.delta(piece),
        }
    }

    /// A whole answer's output replaced by the structured answer of `n`
    /// tokens: JSON text, or a tool call.
    fn structured_whole(&self, body: &mut serde_json::Value, ask: &crate::structured::Ask, n: u32) {
        use serde_json::json;
        let text = ask.text(n as usize);
        let tool = match ask {
            crate::structured::Ask::Tool { name, .. } => Some(name),
            crate::structured::Ask::Json(_) => None,
        };
        match (self.wire, tool) {
            (Wire::Chat, Some(name)) => {
                body["choices"][0]["message"] = json!({"role": "assistant", "content": null,
                    "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": name, "arguments": text}}]});
                body["choices"][0]["finish_reason"] = "tool_calls".into();
            }
            (Wire::Chat, None) => body["choices"][0]["message"]["content"] = text.into(),
            (Wire::Completions, _) => body["choices"][0]["text"] = text.into(),
            (Wire::Responses, Some(name)) => {
                body["output"] = json!([{"type": "function_call", "id": "fc_0", "call_id": "call_0",
                    "name": name, "arguments": text, "status": "completed"}]);
            }
            (Wire::Responses, None) => body["output"][0]["content"][0]["text"] = text.into(),
            (Wire::Messages, Some(name)) => {
                let input: serde_json::Value =
                    serde_json::from_str(&text).unwrap_or_else(|_| json!({}));
                body["content"] =
                    json!([{"type": "tool_use", "id": "toolu_0", "name": name, "input": input}]);
                body["stop_reason"] = "tool_use".into();
            }
            (Wire::Messages, None) => body["content"][0]["text"] = text.into(),
        }
    }

    /// The events that end a stream of `n` tokens.
    fn end(&self, n: u32, include_usage: bool) -> Vec<Bytes> {
        use serde_json::json;
        match self.wire {
            Wire::Completions | Wire::Chat => {
                let last = if self.wire == Wire::Chat {
                    json!({"index": 0, "delta": {}, "logprobs": null, "finish_reason": "length"})
                } else {
                    json!({"index": 0, "text": "", "logprobs": null, "finish_reason": "length"})
                };
                let mut out = vec![Self::sse(&self.chunk(last))];
                if include_usage {
                    let mut u = self.chunk(json!(null));
                    u["choices"] = json!([]);
                    u["usage"] = self.usage(n);
                    out.push(Self::sse(&u));
                }
                out.push(Bytes::from_static(b"data: [DONE]\n\n"));
                out
            }
            Wire::Responses => vec![Self::typed(
                "response.completed",
                &json!({"type": "response.completed", "response": {"id": self.id, "object": "response", "created_at": self.created, "model": self.model,
                    "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": [], "usage": self.responses_usage(n)}}),
            )],
            Wire::Messages => vec![
                Self::typed(
                    "content_block_stop",
                    &json!({"type": "content_block_stop", "index": 0}),
                ),
                Self::typed(
                    "message_delta",
                    &json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": null}, "usage": {"output_tokens": n}}),
                ),
                Self::typed("message_stop", &json!({"type": "message_stop"})),
            ],
        }
    }

    /// A greedy answer's log-probabilities, in the shape of its API: chat's
    /// `logprobs.content`, or the legacy completions lists (as vLLM
    /// writes them). The Responses and Messages APIs carry none.
    fn add_logprobs(&self, whole: &mut serde_json::Value, tokens: &[SimToken]) {
        use serde_json::json;
        let token = |w: &str| format!(" {w}");
        let logprobs = match self.wire {
            Wire::Chat => json!({"content": tokens.iter().map(|t| json!({
                "token": token(t.word),
                "logprob": t.logprob,
                "bytes": token(t.word).into_bytes(),
                "top_logprobs": t.top.iter().map(|&(w, l)| json!({"token": token(w), "logprob": l, "bytes": token(w).into_bytes()})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>()}),
            Wire::Completions => {
                let mut offset = 0;
                let offsets: Vec<usize> = tokens
                    .iter()
                    .map(|t| {
                        let at = offset;
                        offset += 1 + t.word.len();
                        at
                    })
                    .collect();
                json!({
                    "tokens": tokens.iter().map(|t| token(t.word)).collect::<Vec<_>>(),
                    "token_logprobs": tokens.iter().map(|t| t.logprob).collect::<Vec<_>>(),
                    "top_logprobs": tokens.iter().map(|t| t.top.iter().map(|&(w, l)| (token(w), json!(l))).collect::<serde_json::Map<_, _>>()).collect::<Vec<_>>(),
                    "text_offset": offsets,
                })
            }
            Wire::Responses | Wire::Messages => return,
        };
        whole["choices"][0]["logprobs"] = logprobs;
    }

    /// A whole (non-streamed) answer of `n` tokens of `text`.
    fn whole(&self, text: &str, n: u32) -> serde_json::Value {
        use serde_json::json;
        match self.wire {
            Wire::Completions | Wire::Chat => {
                let (object, choice) = if self.wire == Wire::Chat {
                    (
                        "chat.completion",
                        json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}),
                    )
                } else {
                    (
                        "text_completion",
                        json!({"index": 0, "text": text, "finish_reason": "length"}),
                    )
                };
                json!({"id": self.id, "object": object, "created": self.created, "model": self.model, "choices": [choice], "usage": self.usage(n)})
            }
            Wire::Responses => {
                json!({"id": self.id, "object": "response", "created_at": self.created, "model": self.model,
                "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
                "output": [{"type": "message", "id": "msg_0", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                "usage": self.responses_usage(n)})
            }
            Wire::Messages => {
                json!({"id": self.id, "type": "message", "role": "assistant", "model": self.model,
                "content": [{"type": "text", "text": text}], "stop_reason": "max_tokens", "stop_sequence": null,
                "usage": {"input_tokens": self.prompt_tokens, "output_tokens": n}})
            }
        }
    }
}

/// Waits until `end` (or until `stop` is set): sleeps while more than
/// 150 us are left, then spins, so a modelled step ends on time to within
/// microseconds rather than a scheduler tick. The engine loop and the
/// tensor server's executor both pace their work with it.
pub(crate) fn wait_until(end: Instant, stop: &std::sync::atomic::AtomicBool) {
    loop {
        let now = Instant::now();
        if now >= end || stop.load(Ordering::Relaxed) {
            return;
        }
        let left = end - now;
        if left > Duration::from_micros(150) {
            std::thread::sleep(left - Duration::from_micros(100));
        } else {
            std::hint::spin_loop();
        }
    }
}
