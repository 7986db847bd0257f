//! The client's read delay: how long after the kernel holds a response's
//! bytes the engine gets round to stamping them. Dispatch lag measures the
//! client's lateness on the send side; this measures it on the read side,
//! where a busy runtime (a worker parsing another stream, a task that does
//! not yield) delays every arrival stamp on its worker. The estimate is
//! taken the way a response is read: a thread writes its send instant into
//! a socket every few milliseconds, and a task on the run's runtime reads
//! it and stamps the arrival, exactly as the backend stamps a chunk. The
//! difference is what a chunk arriving at that moment would have waited.
//! It probes only while requests are in flight (when there are arrivals to
//! delay): an idle client wakes for it 20 times a second, not 200.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use infer_bench_results::hist::{Hist, new_hist};
use tokio::io::AsyncReadExt;

/// How often the probe writes while requests are in flight.
pub const PROBE_EVERY: Duration = Duration::from_millis(5);
/// How often it looks whether requests are in flight when none are.
const IDLE_EVERY: Duration = Duration::from_millis(50);

/// A running probe; `finish` stops it and returns the delays (µs).
pub struct ReadProbe {
    stop: Arc<AtomicBool>,
    writer: std::thread::JoinHandle<()>,
    reader: tokio::task::JoinHandle<Hist>,
}

impl ReadProbe {
    /// Starts probing the runtime of `handle` whenever `busy` says requests
    /// are in flight; `None` where a socket pair cannot be had (the run
    /// goes on without the estimate).
    pub fn start(
        handle: &tokio::runtime::Handle,
        busy: impl Fn() -> bool + Send + 'static,
    ) -> Option<ReadProbe> {
        let (mut tx, rx) = std::os::unix::net::UnixStream::pair().ok()?;
        rx.set_nonblocking(true).ok()?;
        let rx = {
            let _guard = handle.enter();
            tokio::net::UnixStream::from_std(rx).ok()?
        };
        let origin = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let writer = std::thread::Builder::new()
            .name("read-probe".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    if !busy() {
                        std::thread::sleep(IDLE_EVERY);
                        continue;
                    }
                    std::thread::sleep(PROBE_EVERY);
                    let sent = origin.elapsed().as_nanos() as u64;
                    if tx.write_all(&sent.to_le_bytes()).is_err() {
                        return;
                    }
                }
            })
            .ok()?;
        let reader = handle.spawn(async move {
            let mut rx = rx;
            let mut h = new_hist();
            let mut buf = [0u8; 8];
            while rx.read_exact(&mut buf).await.is_ok() {
                let now = origin.elapsed().as_nanos() as u64;
                let sent = u64::from_le_bytes(buf);
                let _ = h.record((now.saturating_sub(sent) + 500) / 1000);
            }
            h
        });
        Some(ReadProbe {
            stop,
            writer,
            reader,
        })
    }

    /// Stops the probe and returns the delays it saw, in µs.
    pub fn finish(self, handle: &tokio::runtime::Handle) -> Hist {
        self.stop.store(true, Ordering::Relaxed);
        // The writer's end closes when it returns: the reader then ends.
        let _ = self.writer.join();
        handle.block_on(self.reader).unwrap_or_else(|_| new_hist())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_runtime_reads_promptly_and_a_blocked_one_is_seen() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let probe = ReadProbe::start(rt.handle(), || true).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // A task that holds the only worker for 60 ms: the probe's reads
        // wait behind it, as a chunk's stamp would.
        rt.block_on(async {
            tokio::spawn(async { std::thread::sleep(Duration::from_millis(60)) })
                .await
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(50));
        let h = probe.finish(rt.handle());
        assert!(h.len() >= 20, "{} samples", h.len());
        // The blocked stretch shows in the tail (at least 40 ms late), and
        // most samples are not in it.
        assert!(h.max() >= 40_000, "max {} us", h.max());
        assert!(h.value_at_quantile(0.5) < 40_000);
    }
}
