//! Waiting precisely on an OS thread: the pacer's sleep-then-spin until a
//! send is due, and the timer slack that lets a thread sleep with
//! microsecond precision (the pacer's and the alarm thread's).

use std::time::{Duration, Instant};

use super::context::Interrupt;

/// Lets this thread sleep with microsecond precision (Linux: 1 ns timer slack).
pub(super) fn tighten_timer_slack() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes an integer and affects only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Waits until `deadline`: sleeps most of the way, spins the last 100 µs.
/// Returns false if interrupted first.
pub(super) fn pace_until(deadline: Instant, interrupt: &Interrupt) -> bool {
    loop {
        if interrupt.is_set() {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        let left = deadline - now;
        if left > Duration::from_micros(200) {
            std::thread::sleep((left - Duration::from_micros(100)).min(Duration::from_millis(50)));
        } else {
            std::hint::spin_loop();
        }
    }
}
