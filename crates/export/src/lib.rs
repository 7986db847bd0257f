//! Exporters: the only code that writes to stdout. Each output format is
//! a function from plain data (plans, results, verdicts) to text.

pub mod chart;
pub mod plan;
pub mod report;
pub mod summary;
pub mod summary_details;
pub mod table;
pub mod telemetry;
pub mod verdict;
pub mod xml;

use std::io::Write;

/// An SLO as people read it, metric first: "tpot p50 < 17.1ms". Every
/// exporter names SLOs with this, so a gate reads the same in every
/// format: durations in milliseconds, the unit latencies are reported in
/// ([`infer_bench_judge::analysis::expr_text`]), not the spec's canonical
/// form ("p50 < 17100us").
pub(crate) fn slo_name(metric: &str, expr: &str) -> String {
    format!("{metric} {}", infer_bench_judge::analysis::expr_text(expr))
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
pub fn stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// The simulator's catalogue as text.
pub fn catalog() -> String {
    use table::{Align, Table};
    let mut g = Table::new(&[
        ("gpu", Align::Left),
        ("name", Align::Left),
        ("memory GB", Align::Right),
        ("GB/s", Align::Right),
        ("bf16 TFLOP/s", Align::Right),
        ("fp8 TFLOP/s", Align::Right),
    ]);
    for x in infer_bench_spec::catalog::GPUS {
        g.row(vec![
            x.id.into(),
            x.name.into(),
            format!("{}", x.memory_gb),
            format!("{}", x.bandwidth_gbs),
            format!("{}", x.bf16_tflops),
            x.fp8_tflops
                .map(|f| f.to_string())
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    let mut m = Table::new(&[
        ("preset", Align::Left),
        ("params B", Align::Right),
        ("layers", Align::Right),
        ("hidden", Align::Right),
        ("heads", Align::Right),
        ("kv heads", Align::Right),
        ("head dim", Align::Right),
    ]);
    for x in infer_bench_spec::catalog::MODELS {
        m.row(vec![
            x.id.into(),
            format!("{}", x.params_b),
            x.layers.to_string(),
            x.hidden.to_string(),
            x.heads.to_string(),
            x.kv_heads.to_string(),
            x.head_dim.to_string(),
        ]);
    }
    format!(
        "Simulated GPUs (targets.*.gpu):\n\n{}\nModel presets (models.*.preset):\n\n{}",
        g.render(),
        m.render()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn slos_read_in_milliseconds_everywhere() {
        assert_eq!(
            super::slo_name("tpot", "p50 < 17100us"),
            "tpot p50 < 17.1ms"
        );
        assert_eq!(super::slo_name("error_rate", "< 1%"), "error_rate < 1%");
        // A stored expression that does not parse is shown as written.
        assert_eq!(super::slo_name("ttft", "p99 < soon"), "ttft p99 < soon");
    }
}
