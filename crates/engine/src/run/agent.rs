//! Load sharding (`run --agent K/N --start-at T`): when each run of each
//! point starts on every agent, the checks of the agreed start against the
//! local clock, and what the local clock says of its own accuracy.
//!
//! Every agent computes the same timetable from the same spec and
//! selection: the first run of the first point starts at the agreed
//! instant, and each later run one *slot* after the previous one. A slot
//! is `--slot` when given, else the run's warm-up time plus its duration
//! plus [`DRAIN`]. All of a run's arrival times count from its agreed start,
//! so an agent that begins late sends late, and its dispatch lag shows it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use crate::error::{SlotError, StartError, UnknownLength};
use infer_bench_results::ClockStatus;
use infer_bench_spec::plan::Point;
use infer_bench_spec::{Load, Warmup};

/// Time left after a run's measurement for its last requests to finish,
/// when the slot is derived from the spec.
pub const DRAIN: Duration = Duration::from_secs(10);

/// The agreed start of every (point, run) of a plan.
#[derive(Debug, Clone)]
pub struct Timetable {
    /// Per point ID, per run: the agreed wall-clock start.
    starts: BTreeMap<String, Vec<SystemTime>>,
}

impl Timetable {
    /// The timetable of `points`, in the order they run, starting at
    /// `start`; `slot` overrides the length derived from each point's load.
    pub fn new<'a>(
        points: impl IntoIterator<Item = &'a Point>,
        start: SystemTime,
        slot: Option<Duration>,
    ) -> Result<Timetable, SlotError> {
        let mut at = start;
        let mut starts = BTreeMap::new();
        // The run before this one, whose slot ends where this one starts.
        let mut previous: Option<&Point> = None;
        for p in points {
            let mut runs = Vec::with_capacity(p.config.load.runs as usize);
            for _ in 0..p.config.load.runs {
                if let Some(prev) = previous {
                    at += run_slot(&prev.config.load, slot).map_err(|unknown| SlotError {
                        point: prev.slug.clone(),
                        unknown,
                    })?;
                }
                runs.push(at);
                previous = Some(p);
            }
            starts.insert(p.id.clone(), runs);
        }
        Ok(Timetable { starts })
    }

    /// The agreed start of run `run` of point `id`.
    pub fn start(&self, id: &str, run: u32) -> Option<SystemTime> {
        self.starts.get(id)?.get(run as usize).copied()
    }
}

/// How long one run of a point may take on every agent.
fn run_slot(load: &Load, slot: Option<Duration>) -> Result<Duration, UnknownLength> {
    if let Some(s) = slot {
        return Ok(s);
    }
    let warmup = match load.warmup {
        Warmup::Time(d) => d.as_std(),
        Warmup::None => Duration::ZERO,
        Warmup::Requests(_) => return Err(UnknownLength::WarmupByRequests),
    };
    match load.duration {
        Some(d) => Ok(warmup + d.as_std() + DRAIN),
        None => Err(UnknownLength::EndsByRequests),
    }
}

/// The local instant at wall-clock time `t`, and how far `t` is in the
/// past (ms, 0 when it is still ahead).
pub fn instant_of(t: SystemTime) -> (Instant, f64) {
    let (now_i, now_s) = (Instant::now(), SystemTime::now());
    match t.duration_since(now_s) {
        Ok(ahead) => (now_i + ahead, 0.0),
        Err(e) => {
            let behind = e.duration();
            (
                now_i.checked_sub(behind).unwrap_or(now_i),
                behind.as_secs_f64() * 1e3,
            )
        }
    }
}

/// Parses `--start-at`: RFC 3339 in UTC, e.g. `2026-12-03T10:00:00Z` or
/// with fractional seconds.
pub fn parse_start(s: &str) -> Result<SystemTime, StartError> {
    humantime::parse_rfc3339_weak(s.trim()).map_err(|source| StartError::Unreadable {
        found: s.to_string(),
        source,
    })
}

/// The agreed start checked against this machine's clock: an error when
/// it is already more than `max_skew` in the past (this clock is ahead of
/// the one that chose the start, or the agent began too late), or more
/// than `max_wait` ahead (a clock far behind, or a typo).
pub fn check_start(
    start: SystemTime,
    max_skew: Duration,
    max_wait: Duration,
) -> Result<(), StartError> {
    let now = SystemTime::now();
    match start.duration_since(now) {
        Err(e) if e.duration() > max_skew => Err(StartError::Past {
            start,
            now,
            behind: e.duration(),
            max_skew,
        }),
        Ok(ahead) if ahead > max_wait => Err(StartError::TooFarAhead {
            start,
            now,
            ahead,
            max_wait,
        }),
        _ => Ok(()),
    }
}

/// Reads the kernel's clock discipline state (`adjtimex`, read only).
pub fn clock_status() -> ClockStatus {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: adjtimex with modes = 0 only reads into a struct we own.
        let mut t: libc::timex = unsafe { std::mem::zeroed() };
        let state = unsafe { libc::adjtimex(&mut t) };
        if state < 0 {
            return ClockStatus::default();
        }
        let unsynced = state == libc::TIME_ERROR || (t.status & libc::STA_UNSYNC) != 0;
        ClockStatus {
            synchronized: Some(!unsynced),
            est_error_ms: Some(t.esterror as f64 / 1e3),
            max_error_ms: Some(t.maxerror as f64 / 1e3),
        }
    }
    #[cfg(not(target_os = "linux"))]
    ClockStatus::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_times_parse_and_are_checked_against_the_clock() {
        let t = parse_start("2026-12-03T10:00:00.250Z").unwrap();
        assert_eq!(
            humantime::format_rfc3339_millis(t).to_string(),
            "2026-12-03T10:00:00.250Z"
        );
        let e = parse_start("tomorrow").unwrap_err();
        assert!(matches!(e, StartError::Unreadable { .. }), "{e}");
        assert!(e.to_string().contains("RFC 3339"), "{e}");
        let skew = Duration::from_secs(1);
        let wait = Duration::from_secs(3600);
        let now = SystemTime::now();
        assert!(check_start(now + Duration::from_secs(5), skew, wait).is_ok());
        assert!(check_start(now - Duration::from_millis(200), skew, wait).is_ok());
        let late = check_start(now - Duration::from_secs(5), skew, wait).unwrap_err();
        assert!(matches!(late, StartError::Past { .. }), "{late}");
        let late = late.to_string();
        assert!(
            late.contains("in the past") && late.contains("hint"),
            "{late}"
        );
        assert!(matches!(
            check_start(now + Duration::from_secs(7200), skew, wait),
            Err(StartError::TooFarAhead { .. })
        ));
    }

    #[test]
    fn instants_follow_the_wall_clock() {
        let (i, late) = instant_of(SystemTime::now() + Duration::from_millis(300));
        assert_eq!(late, 0.0);
        let ahead = i.saturating_duration_since(Instant::now()).as_millis();
        assert!((250..=300).contains(&ahead), "{ahead}");
        let (_, late) = instant_of(SystemTime::now() - Duration::from_millis(40));
        assert!(late >= 40.0);
    }
}
