//! What one run of a point shares with whoever runs it: Ctrl-C
//! ([`Interrupt`]), the live counters a progress display reads ([`Live`]),
//! where finished requests go besides the recorder ([`Sink`]), what a run
//! needs besides the point ([`RunEnv`]) and what it produced
//! ([`RunOutcome`]). The same for a real run and a virtual one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::recorder::Recorder;
use infer_bench_protocol::RequestRecord;
use infer_bench_workload::Material;

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
    /// What the point's prompts are made from, loaded once per point by
    /// `Material::load` for this point's workload and model.
    pub material: Arc<Material>,
    /// Fault injection: spin this long before each send.
    pub slow_client: Option<Duration>,
}

/// What a run produced.
pub struct RunOutcome {
    pub recorder: Recorder,
    pub interrupted: bool,
    pub started: Instant,
    /// Why the run stopped before its end, if it did (the server could not
    /// be reached).
    pub stopped: Option<String>,
}
