//! Running a plan: the load engine (one run of one point), the recorder
//! (statistics), the servers points run against (external, simulated,
//! launched), the workload material each point reads once before it
//! runs, and the orchestration of points, runs and results files.

pub mod engine;
pub mod environment;
pub mod launch;
pub mod point;
pub mod progress;
pub mod recorder;
pub mod servers;
pub mod workload;

/// Raises the open-file limit to its hard maximum: every stream is a socket.
pub fn raise_fd_limit() -> u64 {
    // SAFETY: get/setrlimit on our own process with a struct we own.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur as u64
    }
}
