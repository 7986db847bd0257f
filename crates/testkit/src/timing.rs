//! One lock for every test whose assertions are about time (latency
//! accuracy, pacing, dispatch lag): held, such a test has the machine's
//! cores to itself among the tests that take it, whatever the runner.
//! `cargo test` runs one test binary at a time but the tests of a binary on
//! several threads; nextest runs every test in its own process. So the
//! lock is both a mutex (threads of one binary) and an exclusive `flock`
//! on a file in the temporary directory (processes).

use std::fs::File;
use std::sync::{Mutex, MutexGuard};

static THREADS: Mutex<()> = Mutex::new(());

/// Held while a timing test runs; released when dropped.
pub struct Exclusive {
    _file: Option<File>,
    _thread: MutexGuard<'static, ()>,
}

/// Waits until no other timing test runs, in this process or another.
pub fn exclusive() -> Exclusive {
    let thread = THREADS.lock().unwrap_or_else(|e| e.into_inner());
    let path = std::env::temp_dir().join("infer-bench-timing-tests.lock");
    // Without the file (a read-only temporary directory) the tests still
    // run, serialized within their binary only.
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .ok()
        .filter(lock);
    Exclusive {
        _file: file,
        _thread: thread,
    }
}

#[cfg(unix)]
fn lock(f: &File) -> bool {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock on a descriptor this function's caller owns.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        if r == 0 {
            return true;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return false;
        }
    }
}

#[cfg(not(unix))]
fn lock(_: &File) -> bool {
    false
}

/// How late this machine wakes a working thread right now: the 99th
/// percentile of how far `n` sleeps of one millisecond overshoot it, each
/// after a millisecond of work. A timing assertion adds this to its bound,
/// so that what the machine's other work costs (a browser, a parallel
/// build, a CI neighbour) is not charged to the code under test, while a
/// quiet machine keeps the bound tight. The work matters: a thread that
/// only sleeps is woken at once however busy the cores (0.08 ms with two
/// busy loops on two cores), while one that works between its sleeps, as
/// a client and a server do, waits out other tasks' time slices (3.8 ms
/// there). Takes about `2n` ms plus the overshoots.
pub fn wake_lag(n: usize) -> std::time::Duration {
    use std::time::{Duration, Instant};
    let want = Duration::from_millis(1);
    p99((0..n.max(1))
        .map(|_| {
            let busy = Instant::now();
            while busy.elapsed() < want {
                std::hint::spin_loop();
            }
            let t = Instant::now();
            std::thread::sleep(want);
            t.elapsed().saturating_sub(want)
        })
        .collect())
}

/// The nearest-rank 99th percentile of `v` (not empty).
fn p99(mut v: Vec<std::time::Duration>) -> std::time::Duration {
    v.sort();
    v[(v.len() * 99).div_ceil(100).saturating_sub(1)]
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn the_lag_is_the_nearest_rank_p99_of_the_overshoots() {
        let ms = |v: &[u64]| v.iter().map(|&x| Duration::from_millis(x)).collect();
        // 100 values 1..=100: the 99th.
        assert_eq!(
            super::p99(ms(&(1..=100).collect::<Vec<_>>())),
            Duration::from_millis(99)
        );
        // Fewer than 100: the largest.
        assert_eq!(super::p99(ms(&[3, 1, 2])), Duration::from_millis(3));
        assert_eq!(super::p99(ms(&[7])), Duration::from_millis(7));
    }
}
