//! Precise wake-ups for tasks. tokio's timer fires up to a millisecond
//! late, so a task that must act at an exact instant (a conversation's
//! next turn, due at the previous reply's end plus the think time) would
//! otherwise spin on a worker for the last stretch, delaying the arrival
//! stamps of every stream on that worker. Instead it registers the instant
//! here: one thread keeps the instants in a heap, sleeps until the earliest
//! (with 1 ns timer slack) and spins only its last 100 µs, then wakes the
//! task. The thread sleeps while nothing is due.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;

/// An instant some task waits for.
struct Entry {
    at: Instant,
    seq: u64,
    wake: oneshot::Sender<()>,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    /// Reversed: the heap's top is the earliest instant.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Default)]
struct State {
    heap: BinaryHeap<Entry>,
    seq: u64,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

/// The wake-up thread; stopped when dropped.
pub struct Alarms {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Within this of its instant, the thread spins rather than sleeps.
const SPIN: Duration = Duration::from_micros(100);

impl Alarms {
    pub fn start() -> Alarms {
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("alarms".into())
            .spawn(move || serve(&s))
            .expect("a thread can be started");
        Alarms {
            shared,
            thread: Some(thread),
        }
    }

    /// Resolves at `at` (at once if it has passed).
    pub async fn at(&self, at: Instant) {
        if at <= Instant::now() {
            return;
        }
        let (wake, woken) = oneshot::channel();
        {
            let mut st = self.shared.state.lock();
            st.seq += 1;
            let seq = st.seq;
            st.heap.push(Entry { at, seq, wake });
        }
        self.shared.changed.notify_one();
        let _ = woken.await;
    }
}

impl Drop for Alarms {
    fn drop(&mut self) {
        self.shared.state.lock().stop = true;
        self.shared.changed.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(shared: &Shared) {
    super::clock::tighten_timer_slack();
    let mut st = shared.state.lock();
    loop {
        if st.stop {
            return;
        }
        let Some(next) = st.heap.peek().map(|e| e.at) else {
            shared.changed.wait(&mut st);
            continue;
        };
        let now = Instant::now();
        if next > now + 2 * SPIN {
            shared.changed.wait_for(&mut st, next - now - SPIN);
            continue;
        }
        // Due within 200 µs: spin without the lock, then wake every task
        // whose instant has come.
        drop(st);
        while Instant::now() < next {
            std::hint::spin_loop();
        }
        st = shared.state.lock();
        let now = Instant::now();
        while st.heap.peek().is_some_and(|e| e.at <= now) {
            let e = st.heap.pop().expect("peeked");
            let _ = e.wake.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_wake_at_their_instants_in_order() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let alarms = Arc::new(Alarms::start());
        let t0 = Instant::now() + Duration::from_millis(20);
        let offsets = [30u64, 5, 12, 0, 21];
        let woke = rt.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            for ms in offsets {
                let a = alarms.clone();
                tasks.spawn(async move {
                    let at = t0 + Duration::from_millis(ms);
                    a.at(at).await;
                    let now = Instant::now();
                    (ms, now >= at, now.saturating_duration_since(at))
                });
            }
            let mut v = Vec::new();
            while let Some(r) = tasks.join_next().await {
                v.push(r.unwrap());
            }
            v
        });
        assert_eq!(woke.len(), offsets.len());
        for (ms, on_time, late) in woke {
            // Never early; how late depends on the machine, not asserted
            // beyond a bound that only a lost wake-up would break.
            assert!(on_time, "{ms} ms woke early");
            assert!(late < Duration::from_secs(1), "{ms} ms: {late:?}");
        }
        // A passed instant resolves at once; dropping stops the thread.
        rt.block_on(alarms.at(Instant::now() - Duration::from_millis(1)));
        drop(alarms);
    }
}
