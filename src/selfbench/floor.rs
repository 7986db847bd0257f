//! The floor `self-bench` holds the client's CPU cost to: the least a
//! streaming benchmark client can do, written plainly with reqwest and
//! serde_json on one thread (a tokio `current_thread` runtime), without the
//! engine. It runs in a process of its own (`infer-bench self-bench-floor`)
//! so that its CPU time (getrusage, every thread of that process, around
//! the load) is measured as the engine's is.
//!
//! It does what any honest client must and nothing more: a closed loop of
//! `streams` slots, each sending its next request when the previous one
//! ends; per response, every read stamped with `Instant::now()` when it
//! returns, every SSE event's JSON parsed, and the stamp of each event that
//! carries text kept (so TTFT and inter-token gaps can be computed, as the
//! engine does). No recording beyond that: no histograms, no windows, no
//! failure classes, no timeouts.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::error::{FloorError, FloorFailure, LengthsError};

/// The floor's load: a closed loop.
#[derive(Debug, Clone)]
pub struct FloorLoad {
    /// The OpenAI base URL, `http://HOST:PORT/v1`.
    pub base_url: String,
    pub streams: u32,
    /// Requests sent first and not measured (their CPU counts).
    pub warmup: u32,
    /// Measured requests.
    pub requests: u32,
    /// Output tokens per request: request `i`'s is spread evenly over
    /// this range (see [`Lengths::of`]).
    pub output_tokens: Lengths,
}

/// Output tokens per request: fixed, or spread over a range so that a
/// closed loop's requests do not all end in the same instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lengths {
    pub min: u32,
    pub max: u32,
}

impl Lengths {
    pub const fn fixed(n: u32) -> Lengths {
        Lengths { min: n, max: n }
    }

    /// As the spec's `output_tokens` value: `100`, or `"uniform(50, 150)"`.
    pub fn toml(self) -> String {
        if self.min == self.max {
            self.min.to_string()
        } else {
            format!("\"uniform({}, {})\"", self.min, self.max)
        }
    }

    /// The mean length.
    pub fn mean(self) -> f64 {
        (f64::from(self.min) + f64::from(self.max)) / 2.0
    }

    /// Request `i`'s length: a fixed pseudo-random spread over the range
    /// (the floor client's stand-in for the engine's seeded draw).
    pub fn of(self, i: u64) -> u32 {
        let span = u64::from(self.max - self.min) + 1;
        let mut x = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        self.min + (x % span) as u32
    }
}

impl std::fmt::Display for Lengths {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.min == self.max {
            write!(f, "{}", self.min)
        } else {
            write!(f, "{}-{}", self.min, self.max)
        }
    }
}

impl std::str::FromStr for Lengths {
    type Err = LengthsError;

    /// `100` or `50-150`.
    fn from_str(s: &str) -> Result<Lengths, LengthsError> {
        let num = |t: &str| {
            t.trim()
                .parse::<u32>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| LengthsError::NotCount(s.to_string()))
        };
        let (min, max) = match s.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(s)?, num(s)?),
        };
        if min > max {
            return Err(LengthsError::Reversed(s.to_string()));
        }
        Ok(Lengths { min, max })
    }
}

/// What the floor measured, printed by its process as one JSON line.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FloorReport {
    pub cpu_s: f64,
    pub wall_s: f64,
    /// Requests sent, warm-up included, and those that failed.
    pub sent: u64,
    pub failed: u64,
    /// Output events received, warm-up included.
    pub events: u64,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub itl_p50_ms: Option<f64>,
    pub itl_p99_ms: Option<f64>,
    /// The first failure's reason, if any failed.
    pub error: Option<String>,
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    prompt: &'a str,
    max_tokens: u32,
    stream: bool,
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    choices: Vec<Choice<'a>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    text: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Default)]
struct Tally {
    events: u64,
    failed: u64,
    error: Option<String>,
    ttft_us: Vec<u64>,
    itl_us: Vec<u64>,
}

/// Runs the load and measures this process's CPU around it.
pub fn run(load: &FloorLoad) -> Result<FloorReport, FloorError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(FloorError::Runtime)?;
    // reqwest is built with rustls and no provider (the engine's choice):
    // it needs one installed, as the engine does, even for http://.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(load.streams as usize)
        .build()
        .map_err(FloorError::Client)?;
    let url = format!("{}/completions", load.base_url.trim_end_matches('/'));
    let total = u64::from(load.warmup) + u64::from(load.requests);
    let next = Rc::new(Cell::new(0u64));
    let tally = Rc::new(RefCell::new(Tally::default()));
    let cpu0 = super::cpu::cpu_seconds();
    let t0 = Instant::now();
    rt.block_on(async {
        let local = tokio::task::LocalSet::new();
        for _ in 0..load.streams {
            let (client, url, next, tally) =
                (client.clone(), url.clone(), next.clone(), tally.clone());
            let (warmup, lengths) = (u64::from(load.warmup), load.output_tokens);
            local.spawn_local(async move {
                loop {
                    let i = next.get();
                    if i >= total {
                        return;
                    }
                    next.set(i + 1);
                    let stamps = one(&client, &url, lengths.of(i)).await;
                    let mut t = tally.borrow_mut();
                    match stamps {
                        Ok((sched, at)) => {
                            t.events += at.len() as u64;
                            if i >= warmup {
                                if let Some(first) = at.first() {
                                    t.ttft_us.push((*first - sched).as_micros() as u64);
                                }
                                for w in at.windows(2) {
                                    t.itl_us.push((w[1] - w[0]).as_micros() as u64);
                                }
                            }
                        }
                        Err(e) => {
                            t.failed += 1;
                            t.error.get_or_insert_with(|| e.to_string());
                        }
                    }
                }
            });
        }
        local.await;
    });
    let wall_s = t0.elapsed().as_secs_f64();
    let cpu_s = super::cpu::cpu_seconds() - cpu0;
    let mut t = tally.take();
    let pct = |v: &mut Vec<u64>, p: f64| {
        v.sort_unstable();
        v.get(((v.len().max(1) - 1) as f64 * p).round() as usize)
            .map(|&us| us as f64 / 1e3)
    };
    Ok(FloorReport {
        cpu_s,
        wall_s,
        sent: total,
        failed: t.failed,
        events: t.events,
        ttft_p50_ms: pct(&mut t.ttft_us, 0.5),
        ttft_p99_ms: pct(&mut t.ttft_us, 0.99),
        itl_p50_ms: pct(&mut t.itl_us, 0.5),
        itl_p99_ms: pct(&mut t.itl_us, 0.99),
        error: t.error,
    })
}

/// One streamed completion: its scheduled instant (the slot freed) and the
/// arrival stamp of every event that carried text; why, if it failed.
async fn one(
    client: &reqwest::Client,
    url: &str,
    tokens: u32,
) -> Result<(Instant, Vec<Instant>), FloorFailure> {
    let sched = Instant::now();
    let body = serde_json::to_vec(&Body {
        model: super::server::MODEL,
        prompt: "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen",
        max_tokens: tokens,
        stream: true,
    })
    .map_err(FloorFailure::Encode)?;
    let mut resp = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(FloorFailure::Send)?;
    if !resp.status().is_success() {
        return Err(FloorFailure::Status(resp.status()));
    }
    let mut at = Vec::with_capacity(tokens as usize);
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut done = false;
    while let Some(bytes) = resp.chunk().await.map_err(FloorFailure::Body)? {
        let now = Instant::now();
        buf.extend_from_slice(&bytes);
        let mut used = 0;
        while let Some(end) = find(&buf[used..], b"\n\n") {
            let event = &buf[used..used + end];
            used += end + 2;
            let Some(data) = event.strip_prefix(b"data: ") else {
                continue;
            };
            if data == b"[DONE]" {
                done = true;
                continue;
            }
            let chunk: Chunk = serde_json::from_slice(data).map_err(FloorFailure::Event)?;
            if chunk
                .choices
                .iter()
                .any(|c| c.text.as_deref().is_some_and(|t| !t.is_empty()))
            {
                at.push(now);
            }
        }
        buf.drain(..used);
    }
    if done {
        Ok((sched, at))
    } else {
        Err(FloorFailure::NoDone)
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::Lengths;

    #[test]
    fn lengths_parse_print_and_spread_over_their_range() {
        let fixed: Lengths = "100".parse().unwrap();
        assert_eq!(fixed, Lengths::fixed(100));
        assert_eq!(
            (fixed.to_string(), fixed.toml()),
            ("100".into(), "100".into())
        );
        let range: Lengths = "50-150".parse().unwrap();
        assert_eq!(range.to_string(), "50-150");
        assert_eq!(range.toml(), "\"uniform(50, 150)\"");
        assert!("150-50".parse::<Lengths>().is_err());
        assert!("0".parse::<Lengths>().is_err());
        assert!("ten".parse::<Lengths>().is_err());
        let drawn: Vec<u32> = (0..10_000).map(|i| range.of(i)).collect();
        assert!(drawn.iter().all(|&n| (50..=150).contains(&n)));
        assert_eq!(
            (drawn.iter().min(), drawn.iter().max()),
            (Some(&50), Some(&150))
        );
        let mean = drawn.iter().map(|&n| f64::from(n)).sum::<f64>() / drawn.len() as f64;
        assert!((mean - range.mean()).abs() < 1.0, "{mean}");
        assert!((0..100).all(|i| fixed.of(i) == 100));
    }
}
