//! A standalone check of GPU sampling (the hidden `telemetry-probe`
//! command, run by `scripts/gpu-check` on a machine with a GPU): samples
//! for a few seconds exactly as a point would, with the whole probe as
//! one measurement window.

use std::time::{Duration, Instant};

use super::error::Error;
use super::gpu::GpuSource;
use super::session::{GpuPlan, RunTimes, Session};
use infer_bench_results::telemetry::PointTelemetry;

/// Samples the GPUs `ids` names for `seconds`; `Err` says why there is no GPU.
pub fn probe(
    source: &dyn GpuSource,
    ids: Option<&[String]>,
    seconds: f64,
    interval: Duration,
) -> Result<PointTelemetry, Error> {
    let sampler = source.open(ids)?;
    let mut session = Session::start(GpuPlan::Sample(sampler), interval, None);
    session.mark();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds.max(0.0)));
    let end = Instant::now();
    session.mark();
    session.add_run(RunTimes {
        run: 0,
        start,
        window: Some((start, end)),
    });
    Ok(session.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::{GpuReading, NullSource, Script, ScriptedSource};

    #[test]
    fn probes_what_the_source_gives() {
        let src = ScriptedSource::gpus(
            2,
            Script::Series(vec![vec![
                GpuReading {
                    utilization_pct: Some(55.0),
                    ..Default::default()
                };
                2
            ]]),
        );
        let t = probe(&src, None, 0.1, Duration::from_millis(20)).unwrap();
        assert_eq!(t.gpu.devices.len(), 2);
        assert_eq!(t.gpu.devices[1].stats.utilization_pct.unwrap().mean, 55.0);
        let none = NullSource {
            reason: "no GPU here".into(),
        };
        let e = probe(&none, None, 0.1, Duration::from_millis(20)).unwrap_err();
        assert!(
            matches!(&e, Error::NoGpu(why) if why == "no GPU here"),
            "{e}"
        );
        assert_eq!(e.to_string(), "no GPU here");
    }
}
