//! Sampling token lengths from a `Dist`.

use rand::RngExt;
use rand_distr::{Distribution, Normal};

use infer_bench_spec::{Dist, Empirical};

/// Draws one length. Normal and lognormal draws are rounded, then clamped
/// to the distribution's `[min, max]`; empirical draws pick a value with
/// probability proportional to its weight.
pub fn sample<R: rand::Rng + ?Sized>(d: &Dist, rng: &mut R) -> u32 {
    match d {
        Dist::Fixed(v) => *v,
        Dist::Uniform { min, max } => rng.random_range(*min..=*max),
        Dist::Normal {
            mean,
            std,
            min,
            max,
        } => {
            let x = Normal::new(*mean, *std)
                .map(|n| n.sample(rng))
                .unwrap_or(*mean);
            clamp(x, *min, *max)
        }
        Dist::LogNormal {
            median,
            sigma,
            min,
            max,
        } => {
            let z: f64 = Normal::new(0.0, 1.0).map(|n| n.sample(rng)).unwrap_or(0.0);
            clamp(median * (sigma * z).exp(), *min, *max)
        }
        Dist::Empirical(Empirical::Values(v)) => {
            let total: f64 = v.iter().map(|p| p.1).sum();
            let mut x = rng.random::<f64>() * total;
            for (value, w) in v {
                if x < *w {
                    return *value;
                }
                x -= w;
            }
            v.last().map(|p| p.0).unwrap_or(0)
        }
        // Compilation loads every file; an unloaded one cannot reach here,
        // but a length of zero is the harmless answer if it ever did.
        Dist::Empirical(Empirical::File(_)) => 0,
    }
}

fn clamp(x: f64, min: u32, max: u32) -> u32 {
    if !x.is_finite() {
        return min;
    }
    (x.round().max(min as f64).min(max as f64)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_spec::seed::rng;

    fn mean_of(d: &Dist, n: usize) -> f64 {
        let mut r = rng(1, 0);
        (0..n).map(|_| sample(d, &mut r) as f64).sum::<f64>() / n as f64
    }

    #[test]
    fn distributions_have_their_moments() {
        assert_eq!(mean_of(&Dist::Fixed(7), 10), 7.0);
        let u = mean_of(&Dist::Uniform { min: 10, max: 20 }, 20_000);
        assert!((u - 15.0).abs() < 0.2, "{u}");
        let n = mean_of(
            &Dist::Normal {
                mean: 500.0,
                std: 50.0,
                min: 1,
                max: 10_000,
            },
            20_000,
        );
        assert!((n - 500.0).abs() < 2.0, "{n}");
        // The lognormal's median is its parameter.
        let mut r = rng(2, 0);
        let d = Dist::LogNormal {
            median: 300.0,
            sigma: 0.8,
            min: 1,
            max: 1_000_000,
        };
        let mut xs: Vec<u32> = (0..20_001).map(|_| sample(&d, &mut r)).collect();
        xs.sort_unstable();
        let med = xs[10_000] as f64;
        assert!((med - 300.0).abs() < 10.0, "{med}");
    }

    #[test]
    fn clamps_and_weights() {
        let mut r = rng(3, 0);
        let d = Dist::Normal {
            mean: 0.0,
            std: 100.0,
            min: 5,
            max: 10,
        };
        assert!((0..1000).all(|_| (5..=10).contains(&sample(&d, &mut r))));
        let e = Dist::Empirical(Empirical::Values(vec![(1, 3.0), (100, 1.0)]));
        let ones = (0..40_000).filter(|_| sample(&e, &mut r) == 1).count() as f64 / 40_000.0;
        assert!((ones - 0.75).abs() < 0.01, "{ones}");
    }
}
