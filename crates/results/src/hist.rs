//! HDR histograms as the tool keeps them: latencies in microseconds and
//! token counts, 3 significant digits, auto-resizing; summaries in the
//! metric's reporting unit; and the compact text form (V2 + deflate,
//! base64) that results and baselines store, so any percentile can be
//! recomputed later and histograms merge exactly across runs and machines.

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::HistError;

/// A histogram of u64 values (µs for latencies).
pub type Hist = Histogram<u64>;

pub fn new_hist() -> Hist {
    Histogram::new(3).expect("3 significant digits is valid")
}

/// The statistics every distribution reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    pub count: u64,
    pub mean: f64,
    pub std: f64,
    pub min: f64,
    pub max: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    #[serde(rename = "p99.9")]
    pub p999: f64,
}

impl Summary {
    /// Summarizes a histogram, dividing every value by `scale` (1000 turns
    /// µs into ms).
    pub fn of(h: &Hist, scale: f64) -> Summary {
        if h.is_empty() {
            return Summary::default();
        }
        let q = |p: f64| h.value_at_quantile(p) as f64 / scale;
        Summary {
            count: h.len(),
            mean: h.mean() / scale,
            std: h.stdev() / scale,
            min: h.min() as f64 / scale,
            max: h.max() as f64 / scale,
            p50: q(0.50),
            p90: q(0.90),
            p95: q(0.95),
            p99: q(0.99),
            p999: q(0.999),
        }
    }

    /// Whether `stat` is one that a summary stores (what a run keeps):
    /// mean, min, max, std, p50, p90, p95, p99 and p99.9.
    pub fn keeps(stat: &crate::metric::Stat) -> bool {
        use crate::metric::Stat;
        match stat {
            Stat::Percentile(p) => [50.0, 90.0, 95.0, 99.0, 99.9].contains(p),
            _ => true,
        }
    }

    /// A named statistic, if it is one of the stored ones.
    pub fn get(&self, stat: &crate::metric::Stat) -> Option<f64> {
        use crate::metric::Stat;
        if self.count == 0 {
            return None;
        }
        Some(match stat {
            Stat::Mean => self.mean,
            Stat::Min => self.min,
            Stat::Max => self.max,
            Stat::Std => self.std,
            Stat::Percentile(p) => match *p {
                50.0 => self.p50,
                90.0 => self.p90,
                95.0 => self.p95,
                99.0 => self.p99,
                99.9 => self.p999,
                _ => return None,
            },
        })
    }
}

/// Any statistic of a histogram, in the scaled unit.
pub fn stat_of(h: &Hist, stat: &crate::metric::Stat, scale: f64) -> Option<f64> {
    use crate::metric::Stat;
    if h.is_empty() {
        return None;
    }
    Some(match stat {
        Stat::Mean => h.mean() / scale,
        Stat::Min => h.min() as f64 / scale,
        Stat::Max => h.max() as f64 / scale,
        Stat::Std => h.stdev() / scale,
        Stat::Percentile(p) => h.value_at_quantile(p / 100.0) as f64 / scale,
    })
}

/// Histogram -> base64 of its V2+deflate serialization.
pub fn encode(h: &Hist) -> String {
    let mut buf = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut buf)
        .expect("serializing to memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

/// The inverse of `encode`.
pub fn decode(s: &str) -> Result<Hist, HistError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .map_err(HistError::Base64)?;
    let mut h: Hist = Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .map_err(HistError::Histogram)?;
    h.auto(true);
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_summarizes() {
        let mut h = new_hist();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(back, h);
        let s = Summary::of(&h, 1000.0);
        assert_eq!(s.count, 1000);
        assert!((s.p50 - 500.0).abs() <= 0.5, "{}", s.p50);
        assert!((s.p99 - 990.0).abs() <= 1.0, "{}", s.p99);
        assert!(
            (s.max - 1000.0).abs() <= 1.0,
            "3 significant digits: {}",
            s.max
        );
        assert!((s.mean - 500.5).abs() < 0.5);
    }

    #[test]
    fn histograms_merge_exactly() {
        let (mut a, mut b, mut all) = (new_hist(), new_hist(), new_hist());
        for v in 0..500u64 {
            a.record(v).unwrap();
            all.record(v).unwrap();
        }
        for v in 500..2000u64 {
            b.record(v * 7).unwrap();
            all.record(v * 7).unwrap();
        }
        a.add(&b).unwrap();
        assert_eq!(a, all);
    }
}
