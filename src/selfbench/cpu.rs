//! This process's CPU time: all of it (getrusage), the meter of both the
//! engine's rows and the floor client's, and each thread's (schedstat),
//! where an idle process's CPU goes.

/// This process's CPU time so far (every thread), seconds.
pub(super) fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills a plain struct we own.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(u.ru_utime) + tv(u.ru_stime)
    }
}

/// CPU time of each thread of this process so far, ns, by (id, name)
/// (Linux's schedstat; empty elsewhere): where an idle process's CPU goes.
pub(super) fn thread_cpu_ns() -> std::collections::BTreeMap<(u32, String), u64> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in dir.flatten() {
        let read = |f: &str| std::fs::read_to_string(e.path().join(f)).ok();
        let (Some(stat), Some(name)) = (read("schedstat"), read("comm")) else {
            continue;
        };
        let ns = stat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        let tid = e.file_name().to_string_lossy().parse().unwrap_or(0);
        out.insert((tid, name.trim().to_string()), ns);
    }
    out
}
