//! The small, fast OpenAI-compatible server `self-bench` measures the
//! client against, in its own process (`infer-bench scripted-server`):
//! streamed completions whose first token comes `ttft` after the request
//! and every further one `itl` later (absolute deadlines, so lateness does
//! not accumulate), ending with usage and `[DONE]`. Nothing else: no fault
//! scripts and no recorded truth per request, which the test kit's
//! scripted server has.
//!
//! Its writes keep to the script within a fraction of a millisecond, so
//! that a client's measurements can be held to the script itself: tokio's
//! timer fires on the next whole millisecond and its driver's wait rounds
//! up again (up to ~2 ms late), so deadlines are kept by [`Timer`], one
//! thread that sleeps with 1 ns timer slack until the earliest (it never
//! spins). What it actually wrote, when, is kept ([`Truth`]) and reported
//! on request, so a row that fails can say whether the server itself fell
//! behind or the client was off what it wrote.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::{Method, StatusCode};
use infer_bench_sim::http::{self, Request, Response, ServerHandle};
use serde::{Deserialize, Serialize};
use std::sync::{Condvar, Mutex};
use tokio::sync::oneshot;

/// The model id the server answers to.
pub const MODEL: &str = "scripted-model";

/// Output tokens when a request does not say.
const DEFAULT_MAX_TOKENS: u32 = 16;

#[derive(Deserialize)]
struct CompletionRequest {
    #[serde(default)]
    prompt: serde_json::Value,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    stream: bool,
}

/// A deadline waiting in [`Timer`]'s heap, in order of time, then arrival.
struct Due {
    at: Instant,
    seq: u64,
    done: oneshot::Sender<()>,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// Deadlines kept to within tens of microseconds: one thread holds them in
/// a heap and sleeps until the earliest. A new deadline wakes the thread
/// only when it is earlier than every one waiting (rarely: a stream's next
/// token is due an ITL from now, after the other streams'), so a token
/// costs the server one cross-thread wake-up, the timer's, not two.
#[derive(Clone)]
pub struct Timer {
    shared: Arc<TimerShared>,
}

#[derive(Default)]
struct TimerShared {
    state: Mutex<TimerState>,
    wake: Condvar,
}

#[derive(Default)]
struct TimerState {
    heap: BinaryHeap<Reverse<Due>>,
    seq: u64,
}

impl Timer {
    fn start() -> Timer {
        let shared = Arc::new(TimerShared::default());
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("scripted-timer".into())
            .spawn(move || {
                #[cfg(target_os = "linux")]
                // SAFETY: PR_SET_TIMERSLACK takes an integer and affects only this thread.
                unsafe {
                    libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
                }
                let shared = thread_shared;
                let mut due: Vec<oneshot::Sender<()>> = Vec::new();
                let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    let now = Instant::now();
                    while state.heap.peek().is_some_and(|Reverse(d)| d.at <= now) {
                        if let Some(Reverse(d)) = state.heap.pop() {
                            due.push(d.done);
                        }
                    }
                    if !due.is_empty() {
                        drop(state);
                        for done in due.drain(..) {
                            let _ = done.send(());
                        }
                        state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
                        continue;
                    }
                    // With nothing waiting, look now and then whether the
                    // server (every other holder of the timer) is gone.
                    let wait = match state.heap.peek() {
                        Some(Reverse(d)) => d.at.saturating_duration_since(now),
                        None if Arc::strong_count(&shared) == 1 => return,
                        None => Duration::from_millis(200),
                    };
                    state = shared
                        .wake
                        .wait_timeout(state, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            })
            .expect("a thread can be started");
        Timer { shared }
    }

    /// Resolves at `at` (at once if it has passed).
    async fn at(&self, at: Instant) {
        if at <= Instant::now() {
            return;
        }
        let (done, wait) = oneshot::channel();
        {
            let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
            let earliest = state.heap.peek().is_none_or(|Reverse(d)| at < d.at);
            state.seq += 1;
            let seq = state.seq;
            state.heap.push(Reverse(Due { at, seq, done }));
            if earliest {
                self.shared.wake.notify_one();
            }
        }
        let _ = wait.await;
    }
}

/// What the server actually did, in microseconds: each response's TTFT
/// (first write - request received), each gap between its writes, and
/// how late each write was against its deadline; and per response, on
/// the wall clock both processes share, when its request was received and
/// its first event written, so a client's own log joins them by response
/// id. The writes are the moments the events were handed to the
/// connection.
pub struct Truth {
    ttft_us: Mutex<Vec<u32>>,
    itl_us: Mutex<Vec<u32>>,
    late_us: Mutex<Vec<u32>>,
    firsts: Mutex<Vec<First>>,
    /// The monotonic instant and the wall-clock time it was, read together.
    anchor: (Instant, std::time::SystemTime),
}

impl Default for Truth {
    fn default() -> Self {
        Truth {
            ttft_us: Mutex::default(),
            itl_us: Mutex::default(),
            late_us: Mutex::default(),
            firsts: Mutex::default(),
            anchor: (Instant::now(), std::time::SystemTime::now()),
        }
    }
}

/// One response's request received and first event written, Unix ns.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct First {
    /// The number in the response's id (`cmpl-{id}`).
    pub id: u64,
    pub received_unix_ns: i128,
    pub written_unix_ns: i128,
}

/// What [`Truth::take`] reports, ms.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TruthStats {
    /// Content events written.
    pub events: u64,
    pub ttft_p50_ms: f64,
    pub ttft_p99_ms: f64,
    pub itl_p50_ms: f64,
    pub itl_p99_ms: f64,
    /// Writes behind their deadline.
    pub late_p99_ms: f64,
    pub late_max_ms: f64,
    /// Every response's first write, for the join with the client's log.
    #[serde(default)]
    pub firsts: Vec<First>,
}

fn micros(d: Duration) -> u32 {
    d.as_micros().min(u32::MAX as u128) as u32
}

fn take_sorted(m: &Mutex<Vec<u32>>) -> Vec<u32> {
    let mut v = std::mem::take(&mut *m.lock().unwrap_or_else(|e| e.into_inner()));
    v.sort_unstable();
    v
}

impl Truth {
    fn note(&self, m: &Mutex<Vec<u32>>, d: Duration) {
        m.lock().unwrap_or_else(|e| e.into_inner()).push(micros(d));
    }

    /// `t` on the wall clock, ns since the Unix epoch.
    fn unix_ns(&self, t: Instant) -> i128 {
        let (at, wall) = self.anchor;
        let base = wall
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        if t >= at {
            base + (t - at).as_nanos() as i128
        } else {
            base - (at - t).as_nanos() as i128
        }
    }

    fn note_first(&self, id: u64, received: Instant, written: Instant) {
        let first = First {
            id,
            received_unix_ns: self.unix_ns(received),
            written_unix_ns: self.unix_ns(written),
        };
        self.firsts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(first);
    }

    /// The figures since the last call, and a fresh start.
    pub fn take(&self) -> TruthStats {
        let (ttft, itl, late) = (
            take_sorted(&self.ttft_us),
            take_sorted(&self.itl_us),
            take_sorted(&self.late_us),
        );
        let at = |v: &[u32], p: f64| match v.len() {
            0 => 0.0,
            n => v[((n - 1) as f64 * p).round() as usize] as f64 / 1e3,
        };
        TruthStats {
            events: late.len() as u64,
            ttft_p50_ms: at(&ttft, 0.5),
            ttft_p99_ms: at(&ttft, 0.99),
            itl_p50_ms: at(&itl, 0.5),
            itl_p99_ms: at(&itl, 0.99),
            late_p99_ms: at(&late, 0.99),
            late_max_ms: at(&late, 1.0),
            firsts: std::mem::take(&mut *self.firsts.lock().unwrap_or_else(|e| e.into_inner())),
        }
    }
}

/// Starts the server on a port of 127.0.0.1 the OS picks; it runs on the
/// current tokio runtime until the handle is dropped. What it writes,
/// when, goes to `truth`.
pub async fn start(
    ttft: Duration,
    itl: Duration,
    truth: Arc<Truth>,
) -> std::io::Result<ServerHandle> {
    let ids = Arc::new(AtomicU64::new(0));
    let timer = Timer::start();
    http::bind(move |req| {
        let id = ids.fetch_add(1, Ordering::Relaxed);
        answer(req, id, ttft, itl, timer.clone(), truth.clone())
    })
    .await
}

async fn answer(
    req: Request,
    id: u64,
    ttft: Duration,
    itl: Duration,
    timer: Timer,
    truth: Arc<Truth>,
) -> Response {
    match (&req.method, req.path.as_str()) {
        (&Method::GET, "/health") => Response::json(StatusCode::OK, r#"{"status":"ok"}"#),
        (&Method::GET, "/v1/models") => Response::json(
            StatusCode::OK,
            format!(r#"{{"object":"list","data":[{{"id":"{MODEL}","object":"model"}}]}}"#),
        ),
        (&Method::POST, "/v1/completions") => complete(req, id, ttft, itl, timer, truth).await,
        _ => http::error_response(StatusCode::NOT_FOUND, "not found"),
    }
}

async fn complete(
    req: Request,
    id: u64,
    ttft: Duration,
    itl: Duration,
    timer: Timer,
    truth: Arc<Truth>,
) -> Response {
    let Ok(body) = serde_json::from_slice::<CompletionRequest>(&req.body) else {
        return http::error_response(
            StatusCode::BAD_REQUEST,
            "the body is not a completion request",
        );
    };
    let prompt_tokens = match &body.prompt {
        serde_json::Value::String(s) => s.split_whitespace().count(),
        _ => 0,
    };
    let n = body.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS).max(1);
    let usage = format!(
        r#"{{"prompt_tokens":{prompt_tokens},"completion_tokens":{n},"total_tokens":{}}}"#,
        prompt_tokens + n as usize
    );
    let start = req.received;
    if !body.stream {
        timer.at(start + ttft + itl * (n - 1)).await;
        let text = " tok".repeat(n as usize);
        return Response::json(
            StatusCode::OK,
            format!(
                r#"{{"id":"cmpl-{id}","object":"text_completion","model":"{MODEL}","choices":[{{"index":0,"text":"{text}","finish_reason":"length"}}],"usage":{usage}}}"#
            ),
        );
    }
    let (response, tx) = Response::stream(StatusCode::OK, "text/event-stream");
    tokio::spawn(async move {
        let mut previous: Option<Instant> = None;
        for i in 0..n {
            let due = start + ttft + itl * i;
            timer.at(due).await;
            let last = i + 1 == n;
            let finish = if last { r#""length""# } else { "null" };
            let tail = if last {
                format!(r#","usage":{usage}"#)
            } else {
                String::new()
            };
            let event = format!(
                "data: {{\"id\":\"cmpl-{id}\",\"object\":\"text_completion\",\"model\":\"{MODEL}\",\"choices\":[{{\"index\":0,\"text\":\" tok\",\"finish_reason\":{finish}}}]{tail}}}\n\n"
            );
            // The instant the chunk left for the socket, not when it was
            // queued: a queued chunk waits for this server's worker, and
            // that wait is the server's, not the client's.
            let Ok(now) = tx.send_flushed(Bytes::from(event)).await else {
                return;
            };
            match previous {
                None => {
                    truth.note(&truth.ttft_us, now - start);
                    truth.note_first(id, start, now);
                }
                Some(p) => truth.note(&truth.itl_us, now - p),
            }
            truth.note(&truth.late_us, now.saturating_duration_since(due));
            previous = Some(now);
        }
        let _ = tx.send(Bytes::from_static(b"data: [DONE]\n\n")).await;
    });
    response
}
