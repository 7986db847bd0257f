//! A sampling thread: calls a function at once, then every interval on an
//! absolute schedule (a slow call delays nothing after it; missed ticks
//! are skipped, not bunched), and on demand, so that the edges of each run
//! are sampled exactly. Every value is stamped with the midpoint of its
//! call on the monotonic clock (`Instant`), the clock requests use.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A value and when it was taken.
#[derive(Debug, Clone)]
pub struct Timed<T> {
    pub at: Instant,
    pub value: T,
}

enum Cmd {
    Now(mpsc::Sender<()>),
    Stop,
}

/// A running sampling thread.
pub struct Periodic<T: Send + 'static> {
    tx: mpsc::Sender<Cmd>,
    thread: JoinHandle<Vec<Timed<T>>>,
}

fn take<T>(f: &mut impl FnMut() -> T) -> Timed<T> {
    let before = Instant::now();
    let value = f();
    let after = Instant::now();
    Timed {
        at: before + (after - before) / 2,
        value,
    }
}

impl<T: Send + 'static> Periodic<T> {
    /// Starts the thread; its first sample is taken at once.
    pub fn start(
        name: &str,
        interval: Duration,
        mut f: impl FnMut() -> T + Send + 'static,
    ) -> std::io::Result<Periodic<T>> {
        let interval = interval.max(Duration::from_millis(1));
        let (tx, rx) = mpsc::channel::<Cmd>();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let mut out = vec![take(&mut f)];
                let mut next = Instant::now() + interval;
                loop {
                    let wait = next.saturating_duration_since(Instant::now());
                    match rx.recv_timeout(wait) {
                        Ok(Cmd::Now(done)) => {
                            out.push(take(&mut f));
                            let _ = done.send(());
                        }
                        Ok(Cmd::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            out.push(take(&mut f));
                            next += interval;
                            let now = Instant::now();
                            if next <= now {
                                // Behind (a slow call): skip the missed ticks.
                                let behind = (now - next).as_nanos() / interval.as_nanos();
                                next += interval * (behind as u32 + 1);
                            }
                        }
                    }
                }
                out
            })?;
        Ok(Periodic { tx, thread })
    }

    /// Takes a sample now and waits until it is taken.
    pub fn sample_now(&self) {
        let (done, wait) = mpsc::channel();
        if self.tx.send(Cmd::Now(done)).is_ok() {
            let _ = wait.recv();
        }
    }

    /// Stops the thread and returns every sample, in time order.
    pub fn stop(self) -> Vec<Timed<T>> {
        let _ = self.tx.send(Cmd::Stop);
        self.thread.join().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_at_once_on_schedule_and_on_demand() {
        let start = Instant::now();
        let mut n = 0u32;
        let p = Periodic::start("t", Duration::from_millis(20), move || {
            n += 1;
            n
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(110));
        let before_demand = Instant::now();
        p.sample_now();
        let at_demand = Instant::now();
        let got = p.stop();
        let values: Vec<u32> = got.iter().map(|t| t.value).collect();
        // In order, none lost, every one stamped after the start.
        assert_eq!(values, (1..=values.len() as u32).collect::<Vec<_>>());
        assert!(got.windows(2).all(|w| w[0].at <= w[1].at));
        assert!(got[0].at >= start && got[0].at - start < Duration::from_millis(15));
        // About 110/20 ticks plus the first and the one on demand; a loaded
        // machine may skip ticks, never add them.
        assert!((3..=8).contains(&got.len()), "{} samples", got.len());
        assert!(
            got.iter()
                .any(|t| t.at >= before_demand && t.at <= at_demand),
            "the demanded sample is taken before sample_now returns"
        );
    }
}
