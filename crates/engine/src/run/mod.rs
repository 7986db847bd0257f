//! Running a plan. The orchestration: a plan (`plan`), each point of it
//! (`point`), a point's result assembled (`assemble`) and judged
//! (`assess`); one run of a point on its clock, real (`pacer`, with
//! `clock` and `alarm` for precise waits) or virtual (`virtual_time`), both
//! from one `schedule` and sharing a `context`; the recorder
//! (statistics), the request log (`requests`), the servers points run
//! against (`servers`: external, simulated, `launch`ed), pre-flight checks
//! and the machine (`preflight`, `host`, `probe`, `environment`), load
//! sharding (`agent`), capacity searches (`search`), secrets (`secrets`)
//! and what the run reports as it goes (`observe`).
//!
//! Everything is private behind the face below: what a caller runs, sees
//! and configures.

mod agent;
mod alarm;
pub(crate) mod assemble;
pub(crate) mod assess;
mod cache;
mod clock;
mod context;
mod environment;
#[cfg(test)]
mod fake;
mod host;
mod launch;
mod lock;
mod observe;
mod options;
mod pacer;
mod plan;
mod point;
mod preflight;
mod probe;
mod quality;
pub(crate) mod recorder;
mod requests;
mod schedule;
mod search;
mod secrets;
mod servers;
mod virtual_time;
pub(crate) mod workload;

// The engine's face: running a plan, and what a caller sees of it.
pub use agent::{check_start, parse_start};
pub use assemble::failed_point;
pub use context::{Interrupt, Live, RunEnv, RunOutcome, Sink};
pub use host::{HostProbe, ProcHost, ScriptedHost};
pub use observe::{DialectFrom, Event, Observer, RunStart, Silent};
pub use options::RunOptions;
pub use plan::{results_path, run_plan, run_plan_on, run_plan_with};
pub use preflight::check as preflight;

/// Parts of the load engine that tests outside the crate drive directly:
/// one run of a point on a backend of their own, the connections a
/// point's client keeps, and the bodies, arrivals and fingerprint a
/// point's workload builds.
pub mod parts {
    pub use super::pacer::{MAX_LATE, MAX_OPEN_IN_FLIGHT, OVERLOAD_DRAIN, run_once};
    pub use super::point::{Connections, MAX_WARM_OPEN};
    pub use super::recorder::Recorder;
    pub use super::schedule::{
        FINGERPRINT_REQUESTS, arrivals, request_bodies, workload_fingerprint,
    };
}

/// The runtime the engine's workers run on: one worker per core but one.
/// The client's own threads (pacer, request builder, recorder, alarms, the
/// read-delay probe) and the OS need a core, and on a small machine a
/// second worker costs more than it gives: every wake-up of the other
/// worker is a futex and a context switch. On the 2-core development
/// machine, one worker instead of two took the dispatch lag p99 at 256
/// paced streams from 2.9 ms to 0.06 ms and CPU per SSE event from 1.52x
/// to 1.27x a minimal one-thread client's (`self-bench`).
///
/// With the simulator in-process (`with_sim`), one worker per core: the
/// simulator still runs in wall-clock time, and with one engine worker
/// beside it on 2 cores two back-to-back runs of one spec differed by 8%
/// in TPOT (`tests/sim.rs`), against under 5% with two. The
/// `TOKIO_WORKER_THREADS` environment variable overrides the count.
pub fn engine_runtime(with_sim: bool) -> std::io::Result<tokio::runtime::Runtime> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let spare = if with_sim { 0 } else { 1 };
    let workers = std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(cores.saturating_sub(spare).max(1));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .thread_name("infer-bench")
        .build()
}

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
