//! Arrival schedules: one abstraction, a sequence of intended send times,
//! serves every load mode. An open loop (poisson, gamma, constant, or a
//! replayed trace's timestamps) yields pre-determined offsets from the
//! start; a closed loop yields arrivals
//! that are due "as soon as a slot is free" — the engine gates both through
//! the same concurrency limit, so there is a single load loop.

use std::sync::Arc;

use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp1, Gamma};

use infer_bench_spec::raw::Arrival;
use infer_bench_spec::{Level, Load};

use crate::prompt::Material;
use crate::trace::Replay;

/// One arrival.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Due {
    /// 0-based request index within the run (warm-up included).
    pub index: u64,
    /// Intended send time in ns from the run's start; `None` for a closed
    /// loop, where a request is due when a slot frees.
    pub at_ns: Option<u64>,
}

/// The intended send times of one run, generated lazily (memory does not
/// grow with the number of requests) and deterministically from the seed.
pub struct Arrivals {
    open: Option<Open>,
    /// A trace's schedule (instead of `open`): its records' times.
    trace: Option<Arc<Replay>>,
    horizon_ns: u64,
    index: u64,
}

struct Open {
    rng: ChaCha8Rng,
    arrival: Arrival,
    /// Rates per ramp step (one entry for a steady point), per second.
    rates: Vec<f64>,
    step_ns: u64,
    t_ns: f64,
    horizon_ns: u64,
    gamma: Option<Gamma<f64>>,
}

impl Arrivals {
    /// Arrivals for a point's load. `horizon_ns` bounds open-loop
    /// schedules (warm-up plus duration); the engine ends closed loops.
    pub fn new(load: &Load, seed: u64, horizon_ns: u64) -> Arrivals {
        let open = match load.level {
            Level::Concurrency(_) => None,
            Level::Rate(_) => {
                let rates: Vec<f64> = match &load.ramp {
                    Some(r) => r
                        .levels
                        .iter()
                        .map(|l| match l {
                            Level::Rate(r) => r.as_per_second(),
                            Level::Concurrency(c) => *c as f64,
                        })
                        .collect(),
                    None => match load.level {
                        Level::Rate(r) => vec![r.as_per_second()],
                        Level::Concurrency(_) => unreachable!("matched above"),
                    },
                };
                let step_ns = load
                    .ramp
                    .as_ref()
                    .map(|r| r.every.as_nanos())
                    .unwrap_or(u64::MAX);
                let shape = load.burstiness;
                Some(Open {
                    rng: super::seed::rng(seed, 0),
                    arrival: load.arrival,
                    rates,
                    step_ns: step_ns.max(1),
                    t_ns: 0.0,
                    horizon_ns,
                    gamma: Gamma::new(shape, 1.0 / shape).ok(),
                })
            }
        };
        Arrivals {
            open,
            trace: None,
            horizon_ns,
            index: 0,
        }
    }

    /// The arrivals of a point whose prompts come from `material`: a
    /// trace's timestamps when it replays one, else [`Arrivals::new`].
    pub fn of_point(load: &Load, material: &Material, seed: u64, horizon_ns: u64) -> Arrivals {
        match &material.trace {
            Some(t) => Arrivals::replay(t.clone(), horizon_ns),
            None => Arrivals::new(load, seed, horizon_ns),
        }
    }

    /// A trace's requests at their times, up to `horizon_ns`.
    pub fn replay(trace: Arc<Replay>, horizon_ns: u64) -> Arrivals {
        Arrivals {
            open: None,
            trace: Some(trace),
            horizon_ns,
            index: 0,
        }
    }

    /// Whether arrivals are pre-scheduled (open loop).
    pub fn is_open(&self) -> bool {
        self.open.is_some() || self.trace.is_some()
    }
}

impl Open {
    fn rate_at(&self, t_ns: f64) -> f64 {
        let step = (t_ns / self.step_ns as f64) as usize;
        self.rates[step.min(self.rates.len() - 1)]
    }

    /// The next gap in seconds at unit rate (mean 1).
    fn unit_gap(&mut self) -> f64 {
        match self.arrival {
            // A trace is scheduled by `Arrivals::replay`, never here.
            Arrival::Constant | Arrival::Closed | Arrival::Trace => 1.0,
            Arrival::Poisson => Exp1.sample(&mut self.rng),
            Arrival::Gamma => match &self.gamma {
                Some(g) => g.sample(&mut self.rng),
                None => Exp1.sample(&mut self.rng),
            },
        }
    }
}

impl Iterator for Arrivals {
    type Item = Due;

    fn next(&mut self) -> Option<Due> {
        let index = self.index;
        if let Some(t) = &self.trace {
            let r = t.records.get(index as usize)?;
            if r.at_ns >= self.horizon_ns {
                return None;
            }
            self.index += 1;
            return Some(Due {
                index,
                at_ns: Some(r.at_ns),
            });
        }
        let at_ns = match &mut self.open {
            None => None,
            Some(o) => {
                // The first arrival is at time zero; later ones follow gaps
                // drawn at the rate in force when the previous one arrived.
                if index > 0 {
                    let gap_s = o.unit_gap() / o.rate_at(o.t_ns);
                    o.t_ns += gap_s * 1e9;
                }
                let t = o.t_ns.round() as u64;
                if t >= o.horizon_ns {
                    return None;
                }
                Some(t)
            }
        };
        self.index += 1;
        Some(Due { index, at_ns })
    }
}

/// The ramp step in force at `t_ns` (0 for a steady point).
pub fn step_at(load: &Load, t_ns: u64) -> u32 {
    match &load.ramp {
        Some(r) => ((t_ns / r.every.as_nanos().max(1)) as usize).min(r.levels.len() - 1) as u32,
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_spec::{Duration, Ramp, Rate, Timeouts, Warmup};

    fn load(arrival: Arrival, level: Level, burstiness: f64) -> Load {
        let t = Duration::from_secs(1);
        Load {
            arrival,
            burstiness,
            level,
            max_concurrency: None,
            ramp: None,
            search: None,
            warmup: Warmup::None,
            duration: Some(Duration::from_secs(100)),
            requests: None,
            runs: 1,
            window: t,
            timeouts: Timeouts {
                connect: t,
                first_token: t,
                idle: t,
                total: t,
            },
            limits: Default::default(),
            cold_connections: false,
            reset_cache: Default::default(),
        }
    }

    fn gaps(l: &Load, horizon_s: u64) -> Vec<f64> {
        let times: Vec<u64> = Arrivals::new(l, 9, horizon_s * 1_000_000_000)
            .map(|d| d.at_ns.unwrap())
            .collect();
        times
            .windows(2)
            .map(|w| (w[1] - w[0]) as f64 / 1e9)
            .collect()
    }

    fn cv(xs: &[f64]) -> (f64, f64) {
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64;
        (m, v.sqrt() / m)
    }

    #[test]
    fn open_loops_have_the_right_rate_and_shape() {
        let r = Level::Rate(Rate::per_second(100.0).unwrap());
        let (m, c) = cv(&gaps(&load(Arrival::Constant, r, 1.0), 100));
        assert!((m - 0.01).abs() < 1e-9 && c < 1e-6);
        let (m, c) = cv(&gaps(&load(Arrival::Poisson, r, 1.0), 200));
        assert!((m - 0.01).abs() < 0.0003, "mean gap {m}");
        assert!((c - 1.0).abs() < 0.03, "poisson cv {c}");
        // Gamma with shape k has cv 1/sqrt(k): 0.25 gives cv 2 (burstier).
        let (m, c) = cv(&gaps(&load(Arrival::Gamma, r, 0.25), 400));
        assert!((m - 0.01).abs() < 0.0005, "mean gap {m}");
        assert!((c - 2.0).abs() < 0.1, "gamma cv {c}");
    }

    #[test]
    fn schedules_are_deterministic_and_bounded() {
        let l = load(
            Arrival::Poisson,
            Level::Rate(Rate::per_second(50.0).unwrap()),
            1.0,
        );
        let a: Vec<Due> = Arrivals::new(&l, 1, 2_000_000_000).collect();
        let b: Vec<Due> = Arrivals::new(&l, 1, 2_000_000_000).collect();
        assert_eq!(a, b);
        assert!(a.iter().all(|d| d.at_ns.unwrap() < 2_000_000_000));
        assert_eq!(a[0].at_ns, Some(0));
        let c: Vec<Due> = Arrivals::new(&l, 2, 2_000_000_000).collect();
        assert_ne!(a, c);
    }

    #[test]
    fn closed_loops_are_due_when_a_slot_frees() {
        let l = load(Arrival::Closed, Level::Concurrency(4), 1.0);
        let a: Vec<Due> = Arrivals::new(&l, 1, 0).take(3).collect();
        assert_eq!(
            a.iter().map(|d| d.at_ns).collect::<Vec<_>>(),
            vec![None, None, None]
        );
        assert_eq!(a[2].index, 2);
    }

    #[test]
    fn ramps_raise_the_rate_per_step() {
        let mut l = load(
            Arrival::Constant,
            Level::Rate(Rate::per_second(10.0).unwrap()),
            1.0,
        );
        l.ramp = Some(Ramp {
            levels: vec![
                Level::Rate(Rate::per_second(10.0).unwrap()),
                Level::Rate(Rate::per_second(20.0).unwrap()),
            ],
            every: Duration::from_secs(1),
        });
        let times: Vec<u64> = Arrivals::new(&l, 1, 2_000_000_000)
            .map(|d| d.at_ns.unwrap())
            .collect();
        let first = times.iter().filter(|t| **t < 1_000_000_000).count();
        let second = times.len() - first;
        assert_eq!(first, 10);
        assert_eq!(second, 20);
        assert_eq!(step_at(&l, 1_500_000_000), 1);
        assert_eq!(step_at(&l, 9_000_000_000), 1);
    }
}
