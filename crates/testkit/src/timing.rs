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
