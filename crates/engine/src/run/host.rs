//! The load generator's own machine: how busy its CPUs are, how much CPU
//! this process (and a launched server) used, and whose child a process
//! is. Behind a trait, with the Linux `/proc` implementation and a
//! scripted one for tests.

use std::sync::Mutex;

/// Cumulative CPU time of the whole machine.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    /// Seconds all CPUs spent busy (not idle or waiting for I/O).
    pub busy_s: f64,
    /// Seconds all CPUs existed.
    pub total_s: f64,
}

impl CpuTimes {
    /// The busy fraction between `self` and a later reading.
    pub fn busy_until(&self, later: &CpuTimes) -> Option<f64> {
        let total = later.total_s - self.total_s;
        (total > 0.0).then(|| ((later.busy_s - self.busy_s) / total).clamp(0.0, 1.0))
    }
}

/// What the run reads of its own machine.
pub trait HostProbe: Send + Sync {
    fn cores(&self) -> u32;
    /// The machine's cumulative CPU times.
    fn cpu_times(&self) -> Option<CpuTimes>;
    /// CPU seconds (user + system) a process has used; `None` for this one.
    fn process_cpu_s(&self, pid: Option<u32>) -> Option<f64>;
    /// A process's parent.
    fn parent(&self, pid: u32) -> Option<u32>;
}

/// Linux `/proc`.
pub struct ProcHost;

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// The fields of /proc/PID/stat after the command name.
fn stat_fields(pid: Option<u32>) -> Option<Vec<String>> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/stat"),
        None => "/proc/self/stat".to_string(),
    };
    let text = std::fs::read_to_string(path).ok()?;
    let after = &text[text.rfind(')')? + 1..];
    Some(after.split_whitespace().map(String::from).collect())
}

impl HostProbe for ProcHost {
    fn cores(&self) -> u32 {
        std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1)
    }

    fn cpu_times(&self) -> Option<CpuTimes> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        let line = text.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<f64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        if v.len() < 4 {
            return None;
        }
        let total: f64 = v.iter().take(8).sum();
        let idle = v[3] + v.get(4).copied().unwrap_or(0.0);
        let hz = clock_ticks();
        Some(CpuTimes {
            busy_s: (total - idle) / hz,
            total_s: total / hz,
        })
    }

    fn process_cpu_s(&self, pid: Option<u32>) -> Option<f64> {
        // Fields after the name: state is [0], utime [11], stime [12].
        let f = stat_fields(pid)?;
        let utime: f64 = f.get(11)?.parse().ok()?;
        let stime: f64 = f.get(12)?.parse().ok()?;
        Some((utime + stime) / clock_ticks())
    }

    fn parent(&self, pid: u32) -> Option<u32> {
        stat_fields(Some(pid))?.get(1)?.parse().ok()
    }
}

/// Whether `pid` is `root` or descends from it.
pub fn descends_from(host: &dyn HostProbe, pid: u32, root: u32) -> bool {
    let mut p = pid;
    for _ in 0..64 {
        if p == root {
            return true;
        }
        match host.parent(p) {
            Some(q) if q != p && q != 0 => p = q,
            _ => return false,
        }
    }
    false
}

/// A host that plays back fixed figures (tests).
pub struct ScriptedHost {
    pub cores: u32,
    /// The busy fraction every interval shows.
    pub busy: f64,
    /// CPU seconds this process uses per second of wall time.
    pub process_cores: f64,
    /// (pid, parent) pairs.
    pub parents: Vec<(u32, u32)>,
    start: std::time::Instant,
    calls: Mutex<u64>,
}

impl ScriptedHost {
    pub fn new(cores: u32, busy: f64, process_cores: f64) -> ScriptedHost {
        ScriptedHost {
            cores,
            busy,
            process_cores,
            parents: Vec::new(),
            start: std::time::Instant::now(),
            calls: Mutex::new(0),
        }
    }
}

impl HostProbe for ScriptedHost {
    fn cores(&self) -> u32 {
        self.cores
    }
    fn cpu_times(&self) -> Option<CpuTimes> {
        let t = self.start.elapsed().as_secs_f64() * self.cores as f64;
        *self.calls.lock().ok()? += 1;
        Some(CpuTimes {
            busy_s: t * self.busy,
            total_s: t,
        })
    }
    fn process_cpu_s(&self, pid: Option<u32>) -> Option<f64> {
        pid.is_none()
            .then(|| self.start.elapsed().as_secs_f64() * self.process_cores)
    }
    fn parent(&self, pid: u32) -> Option<u32> {
        self.parents
            .iter()
            .find(|(p, _)| *p == pid)
            .map(|(_, q)| *q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_reads_this_machine() {
        let h = ProcHost;
        assert!(h.cores() >= 1);
        let a = h.cpu_times().expect("/proc/stat");
        let own = h.process_cpu_s(None).expect("/proc/self/stat");
        assert!(own >= 0.0);
        // Burn a little CPU: busy time and this process's time grow.
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(60) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let b = h.cpu_times().unwrap();
        assert!(a.busy_until(&b).is_some_and(|f| f > 0.0));
        assert!(h.process_cpu_s(None).unwrap() >= own);
        let me = std::process::id();
        assert!(descends_from(&h, me, me));
        assert!(descends_from(&h, me, 1) || h.parent(me).is_some());
    }

    #[test]
    fn descent_follows_parents() {
        let mut h = ScriptedHost::new(4, 0.1, 0.5);
        h.parents = vec![(30, 20), (20, 10), (40, 1)];
        assert!(descends_from(&h, 30, 10));
        assert!(!descends_from(&h, 40, 10));
    }
}
