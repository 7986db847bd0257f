//! Running a plan: the load engine (one run of one point), the recorder
//! (statistics), the servers points run against (external, simulated,
//! launched), the workload material each point reads once before it
//! runs, and the orchestration: a plan (`plan`), each point of it
//! (`point`), a point's result assembled (`assemble`) and judged
//! (`assess`), and the request log (`requests`).

pub mod agent;
pub mod alarm;
pub mod assemble;
pub mod assess;
pub mod engine;
pub mod environment;
pub mod host;
pub mod launch;
pub mod options;
pub mod plan;
pub mod point;
pub mod preflight;
pub mod probe;
pub mod progress;
pub mod recorder;
pub mod requests;
pub mod secrets;
pub mod servers;
pub mod workload;

pub use assemble::failed_point;
pub use options::{Progress, RunOptions};
pub use plan::{results_path, run_plan, run_plan_on, run_plan_with};

/// Raises the open-file limit as far as the system allows (every stream is
/// a socket; with the simulator in-process, two) and returns it: the soft
/// limit to the hard one, and where permitted the hard one to the kernel's
/// `nr_open`.
pub fn raise_fd_limit() -> u64 {
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0)
        .min(1 << 20);
    // SAFETY: get/setrlimit on our own process with a struct we own.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        if (r.rlim_max as u64) < nr_open {
            let wider = libc::rlimit {
                rlim_cur: nr_open as libc::rlim_t,
                rlim_max: nr_open as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &wider) == 0 {
                return nr_open;
            }
        }
        if r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur as u64
    }
}
