//! The live progress line on stderr (only when stderr is a terminal):
//! requests done, failures, in flight, elapsed time and throughput.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::engine::Live;
use infer_bench_spec::plan::PointConfig;

pub struct Ticker {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Ticker {
    pub fn start(label: String, run: u32, cfg: &PointConfig, live: Arc<Live>) -> Ticker {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let runs = cfg.load.runs;
        let planned = cfg.load.duration.map(|d| d.as_secs_f64());
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let mut last_done = 0u64;
            let mut last_t = start;
            let mut rate = 0.0;
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(250));
                let done = live.done.load(Ordering::Relaxed);
                let now = Instant::now();
                let dt = now.duration_since(last_t).as_secs_f64();
                if dt >= 1.0 {
                    rate = (done - last_done) as f64 / dt;
                    last_done = done;
                    last_t = now;
                }
                let elapsed = start.elapsed().as_secs_f64();
                let of = planned.map(|p| format!("/{p:.0}s")).unwrap_or_default();
                let runs_s = if runs > 1 {
                    format!(" run {}/{runs}", run + 1)
                } else {
                    String::new()
                };
                let line = format!(
                    "{label}{runs_s}  {elapsed:.1}s{of}  {done} done  {} failed  {} in flight  {rate:.1} req/s",
                    live.failed.load(Ordering::Relaxed),
                    live.in_flight.load(Ordering::Relaxed),
                );
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r\x1b[2K{line}");
                let _ = err.flush();
            }
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        });
        Ticker { stop, thread }
    }

    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}
