//! GPU and server resources as text, from a point's telemetry: the
//! per-point table under the run summary (GPU utilization, peak memory,
//! mean power, energy, tokens per joule; the server's KV-cache usage and
//! preemptions) with notes on what was not sampled, and the report of
//! `telemetry-probe`.

use super::table::{Align, Table};
use infer_bench_results::telemetry::{
    GpuDataSource, GpuStats, GpuStatus, PointTelemetry, SeriesStats, ServerHeadline,
};
use infer_bench_spec::results::{PointResult, Results};

const GIB: f64 = (1u64 << 30) as f64;

fn num(x: Option<f64>, digits: usize) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "-".into(),
    }
}

/// Mean GPU utilization over a point's GPUs (each GPU's in-window mean).
fn util_mean(t: &PointTelemetry) -> Option<f64> {
    let v: Vec<f64> = t
        .gpu
        .devices
        .iter()
        .filter_map(|d| d.stats.utilization_pct.map(|s| s.mean))
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The highest memory use of any of a point's GPUs, bytes.
fn memory_peak(t: &PointTelemetry) -> Option<f64> {
    t.gpu
        .devices
        .iter()
        .filter_map(|d| d.stats.memory_used_bytes.map(|s| s.max))
        .reduce(f64::max)
}

/// A GPU column of the telemetry table: its header, its figure for a row
/// (given the row's telemetry where its GPUs were sampled) and its digits.
struct GpuColumn {
    header: &'static str,
    value: fn(&Row, Option<&PointTelemetry>) -> Option<f64>,
    digits: usize,
}

/// The mean over a point's GPUs of each GPU's in-window mean activity, %.
fn activity_pct(
    t: Option<&PointTelemetry>,
    f: fn(&GpuStats) -> Option<SeriesStats>,
) -> Option<f64> {
    t?.gpu
        .device_mean(|s| f(s).map(|x| x.mean))
        .map(|v| v * 100.0)
}

const GPU_COLUMNS: &[GpuColumn] = &[
    GpuColumn {
        header: "GPU util %",
        value: |_, t| t.and_then(util_mean),
        digits: 0,
    },
    GpuColumn {
        header: "SM act %",
        value: |_, t| activity_pct(t, |s| s.sm_active),
        digits: 0,
    },
    GpuColumn {
        header: "tensor %",
        value: |_, t| activity_pct(t, |s| s.tensor_active),
        digits: 0,
    },
    GpuColumn {
        header: "DRAM %",
        value: |_, t| activity_pct(t, |s| s.dram_active),
        digits: 0,
    },
    GpuColumn {
        header: "mem peak GiB",
        value: |_, t| t.and_then(memory_peak).map(|b| b / GIB),
        digits: 1,
    },
    GpuColumn {
        header: "power W",
        value: |_, t| t.and_then(|t| t.gpu.power_w_mean),
        digits: 0,
    },
    GpuColumn {
        header: "energy kJ",
        value: |_, t| t.and_then(|t| t.gpu.energy_j).map(|j| j / 1000.0),
        digits: 2,
    },
    GpuColumn {
        header: "out tok/J",
        value: |r, _| r.output_tokens_per_joule,
        digits: 2,
    },
];

/// A row's telemetry where its GPUs were sampled.
fn sampled<'a>(row: &Row<'a>) -> Option<&'a PointTelemetry> {
    row.telemetry.filter(|t| t.gpu.status.has_readings())
}

/// What the telemetry table needs of a point.
pub struct Row<'a> {
    pub slug: &'a str,
    pub telemetry: Option<&'a PointTelemetry>,
    pub output_tokens_per_joule: Option<f64>,
}

impl<'a> Row<'a> {
    fn of(p: &'a PointResult) -> Row<'a> {
        Row {
            slug: &p.slug,
            telemetry: p.telemetry.as_ref(),
            output_tokens_per_joule: p.cost.as_ref().and_then(|c| c.output_tokens_per_joule),
        }
    }
}

/// The telemetry table of a run (when any point has GPU samples or server
/// metrics) and the notes to print under the summary.
pub fn points(r: &Results) -> (Option<String>, Vec<String>) {
    let rows: Vec<Row> = r.points.iter().map(Row::of).collect();
    table(&rows)
}

/// `points` on plain rows.
pub fn table(rows: &[Row]) -> (Option<String>, Vec<String>) {
    let mut notes = Vec::new();
    let tels = || rows.iter().filter_map(|r| r.telemetry);
    let any_gpu = tels().any(|t| t.gpu.status.has_readings());
    let any_server = tels().any(|t| t.server_metrics.as_ref().is_some_and(|m| m.scrapes_ok > 0));
    // Why GPUs were not sampled, once per distinct reason.
    let mut reasons: Vec<(String, usize)> = Vec::new();
    for t in tels() {
        if t.gpu.status == GpuStatus::Absent {
            let why = t.gpu.note.clone().unwrap_or_else(|| "no GPU".into());
            match reasons.iter_mut().find(|(w, _)| *w == why) {
                Some(x) => x.1 += 1,
                None => reasons.push((why, 1)),
            }
        }
    }
    for (why, n) in reasons {
        notes.push(format!(
            "GPU telemetry was not sampled for {n} point{}: {why}",
            if n == 1 { "" } else { "s" }
        ));
    }
    for row in rows {
        let Some(g) = row.telemetry.map(|t| &t.gpu) else {
            continue;
        };
        if g.status == GpuStatus::Partial {
            notes.push(format!(
                "{}: {} GPU scrape{} of {} failed; the GPU series have gaps there{}",
                row.slug,
                g.scrapes_failed,
                if g.scrapes_failed == 1 { "" } else { "s" },
                g.url.as_deref().unwrap_or("the exporter"),
                g.errors
                    .first()
                    .map(|e| format!(" (e.g. {})", e.message))
                    .unwrap_or_default()
            ));
        }
    }
    for row in rows {
        let Some(m) = row.telemetry.and_then(|t| t.server_metrics.as_ref()) else {
            continue;
        };
        if m.scrapes_failed > 0 {
            notes.push(format!(
                "{}: {} of {} scrapes of {} failed{}",
                row.slug,
                m.scrapes_failed,
                m.scrapes_failed + m.scrapes_ok,
                m.url,
                m.errors
                    .first()
                    .map(|e| format!(" (e.g. {})", e.message))
                    .unwrap_or_default()
            ));
        }
    }
    let modelled = tels()
        .filter(|t| t.gpu.status.has_readings() && t.gpu.source == Some(GpuDataSource::Sim))
        .count();
    if modelled > 0 {
        notes.push(format!(
            "GPU figures of {modelled} point{} are modelled by the simulator (its roofline and memory model), not measured",
            if modelled == 1 { "" } else { "s" }
        ));
    }
    if !any_gpu && !any_server {
        return (None, notes);
    }
    // The GPU columns some point has a figure for (a simulator models no
    // power; NVML gives no SM activity).
    let gpu_cols: Vec<&GpuColumn> = if any_gpu {
        GPU_COLUMNS
            .iter()
            .filter(|c| rows.iter().any(|r| (c.value)(r, sampled(r)).is_some()))
            .collect()
    } else {
        Vec::new()
    };
    // Speculative decoding's columns, where some point's server reported it.
    fn headline_of<'a>(r: &Row<'a>) -> Option<&'a ServerHeadline> {
        r.telemetry
            .and_then(|t| t.server_metrics.as_ref())
            .map(|m| &m.headline)
    }
    let any_spec = rows.iter().any(|r| {
        headline_of(r)
            .is_some_and(|h| h.spec_acceptance_rate.is_some() || h.spec_accept_length.is_some())
    });
    let mut cols: Vec<(&str, Align)> = vec![("point", Align::Left)];
    cols.extend(gpu_cols.iter().map(|c| (c.header, Align::Right)));
    if any_server {
        cols.extend([
            ("running max", Align::Right),
            ("waiting max", Align::Right),
            ("KV mean %", Align::Right),
            ("KV max %", Align::Right),
            ("preempt", Align::Right),
        ]);
    }
    if any_spec {
        cols.extend([("spec acc %", Align::Right), ("acc len", Align::Right)]);
    }
    let mut t = Table::new(&cols);
    for row in rows {
        let tel = row.telemetry;
        let mut cells = vec![row.slug.to_string()];
        cells.extend(
            gpu_cols
                .iter()
                .map(|c| num((c.value)(row, sampled(row)), c.digits)),
        );
        if any_server {
            let h = tel
                .and_then(|t| t.server_metrics.as_ref())
                .map(|m| &m.headline);
            let pct = |s: Option<SeriesStats>, f: fn(&SeriesStats) -> f64| {
                num(s.map(|s| f(&s) * 100.0), 1)
            };
            cells.extend([
                num(h.and_then(|h| h.running).map(|s| s.max), 0),
                num(h.and_then(|h| h.waiting).map(|s| s.max), 0),
                pct(h.and_then(|h| h.kv_cache_usage_ratio), |s| s.mean),
                pct(h.and_then(|h| h.kv_cache_usage_ratio), |s| s.max),
                num(h.and_then(|h| h.preemptions), 0),
            ]);
        }
        if any_spec {
            let h = headline_of(row);
            cells.extend([
                num(h.and_then(|h| h.spec_acceptance_rate).map(|r| r * 100.0), 1),
                num(h.and_then(|h| h.spec_accept_length), 2),
            ]);
        }
        t.row(cells);
    }
    (
        Some(format!(
            "telemetry over the measurement windows\n\n{}",
            t.render()
        )),
        notes,
    )
}

/// The report of `telemetry-probe`: one row per GPU.
pub fn probe(t: &PointTelemetry) -> String {
    let mut table = Table::new(&[
        ("gpu", Align::Right),
        ("name", Align::Left),
        ("util %", Align::Right),
        ("util max", Align::Right),
        ("mem bw %", Align::Right),
        ("mem idle GiB", Align::Right),
        ("mem peak GiB", Align::Right),
        ("power W", Align::Right),
        ("power max", Align::Right),
        ("energy J", Align::Right),
        ("SM MHz", Align::Right),
        ("mem MHz", Align::Right),
        ("temp C", Align::Right),
        ("PCIe rx MB/s", Align::Right),
        ("PCIe tx MB/s", Align::Right),
    ]);
    let mut notes = Vec::new();
    for d in &t.gpu.devices {
        let s = &d.stats;
        let f = |x: Option<SeriesStats>, pick: fn(&SeriesStats) -> f64, scale: f64, digits| {
            num(x.map(|s| pick(&s) / scale), digits)
        };
        table.row(vec![
            d.index.to_string(),
            d.name.clone(),
            f(s.utilization_pct, |s| s.mean, 1.0, 1),
            f(s.utilization_pct, |s| s.max, 1.0, 0),
            f(s.memory_bandwidth_utilization_pct, |s| s.mean, 1.0, 1),
            num(d.memory_idle_bytes.map(|b| b as f64 / GIB), 2),
            f(s.memory_used_bytes, |s| s.max, GIB, 2),
            f(s.power_w, |s| s.mean, 1.0, 1),
            f(s.power_w, |s| s.max, 1.0, 1),
            num(d.energy_j, 1),
            f(s.sm_clock_mhz, |s| s.mean, 1.0, 0),
            f(s.memory_clock_mhz, |s| s.mean, 1.0, 0),
            f(s.temperature_c, |s| s.max, 1.0, 0),
            f(s.pcie_rx_bytes_per_s, |s| s.mean, 1e6, 1),
            f(s.pcie_tx_bytes_per_s, |s| s.mean, 1e6, 1),
        ]);
        let samples = s.utilization_pct.map(|u| u.count).unwrap_or(0);
        let mut line = format!(
            "gpu {}: {samples} samples in the window{}",
            d.index,
            d.energy_source
                .map(|e| format!(
                    "; energy from the {}",
                    match e {
                        infer_bench_results::telemetry::EnergySource::Counter =>
                            "NVML energy counter",
                        infer_bench_results::telemetry::EnergySource::PowerIntegral =>
                            "integral of power samples",
                    }
                ))
                .unwrap_or_default()
        );
        if !d.throttle_reasons.is_empty() {
            let r: Vec<String> = d
                .throttle_reasons
                .iter()
                .map(|(k, v)| format!("{k} {:.0}%", v * 100.0))
                .collect();
            line.push_str(&format!("; clock-event reasons: {}", r.join(", ")));
        }
        for p in &d.processes {
            line.push_str(&format!(
                "; process {} ({}) {} GiB",
                p.pid,
                p.name.as_deref().unwrap_or("?"),
                num(p.memory_used_bytes_max.map(|b| b as f64 / GIB), 2)
            ));
        }
        notes.push(line);
    }
    let window = t
        .runs
        .first()
        .map(|r| r.window_end_s - r.window_start_s)
        .unwrap_or(0.0);
    let mut out = format!(
        "GPU telemetry probe: {:.1} s at {:.0} ms\n\n{}\n",
        window,
        t.gpu.interval_s * 1000.0,
        table.render()
    );
    for n in notes {
        out.push_str(&n);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use infer_bench_results::telemetry::*;

    fn stats(mean: f64, max: f64) -> Option<SeriesStats> {
        Some(SeriesStats {
            count: 10,
            mean,
            min: 0.0,
            p50: mean,
            p95: max,
            max,
        })
    }

    fn gpu_telemetry() -> PointTelemetry {
        PointTelemetry {
            runs: vec![RunSpan {
                run: 0,
                start_s: 0.0,
                window_start_s: 0.5,
                window_end_s: 5.5,
            }],
            gpu: GpuTelemetry {
                status: GpuStatus::Sampled,
                interval_s: 0.1,
                energy_j: Some(3500.0),
                power_w_mean: Some(700.0),
                devices: vec![GpuDeviceTelemetry {
                    index: 0,
                    name: "NVIDIA H200".into(),
                    memory_idle_bytes: Some(2 * (1 << 30)),
                    stats: GpuStats {
                        utilization_pct: stats(97.0, 100.0),
                        memory_used_bytes: stats(120.0 * GIB, 125.5 * GIB),
                        power_w: stats(700.0, 712.0),
                        ..Default::default()
                    },
                    energy_j: Some(3500.0),
                    energy_source: Some(EnergySource::Counter),
                    throttle_reasons: [("sw_power_cap".to_string(), 0.25)].into(),
                    ..Default::default()
                }],
                ..Default::default()
            },
            server_metrics: None,
        }
    }

    /// A table's header line as its column names.
    fn header(line: &str) -> Vec<&str> {
        line.split("  ")
            .filter(|c| !c.is_empty())
            .map(str::trim)
            .collect()
    }

    #[test]
    fn summary_table_and_notes() {
        let gpu = gpu_telemetry();
        let mut scraped = PointTelemetry::default();
        scraped.gpu.note = Some("NVML is not available (no driver)".into());
        scraped.server_metrics = Some(ServerMetrics {
            url: "http://h/metrics".into(),
            scrapes_ok: 9,
            scrapes_failed: 1,
            errors: vec![ScrapeError {
                t_s: 1.0,
                message: "GET http://h/metrics: timed out".into(),
            }],
            headline: ServerHeadline {
                running: stats(20.0, 32.0),
                waiting: stats(1.0, 4.0),
                kv_cache_usage_ratio: stats(0.61, 0.704),
                preemptions: Some(3.0),
                ..Default::default()
            },
            ..Default::default()
        });
        let rows = [
            Row {
                slug: "a.c32",
                telemetry: Some(&gpu),
                output_tokens_per_joule: Some(4.0212),
            },
            Row {
                slug: "b.c32",
                telemetry: Some(&scraped),
                output_tokens_per_joule: None,
            },
        ];
        let (text, notes) = table(&rows);
        let text = text.unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "telemetry over the measurement windows");
        let header = header(lines[2]);
        assert_eq!(
            header,
            [
                "point",
                "GPU util %",
                "mem peak GiB",
                "power W",
                "energy kJ",
                "out tok/J",
                "running max",
                "waiting max",
                "KV mean %",
                "KV max %",
                "preempt"
            ]
        );
        let a: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(
            a,
            [
                "a.c32", "97", "125.5", "700", "3.50", "4.02", "-", "-", "-", "-", "-"
            ]
        );
        let b: Vec<&str> = lines[4].split_whitespace().collect();
        assert_eq!(
            b,
            [
                "b.c32", "-", "-", "-", "-", "-", "32", "4", "61.0", "70.4", "3"
            ]
        );
        assert_eq!(
            notes,
            [
                "GPU telemetry was not sampled for 1 point: NVML is not available (no driver)",
                "b.c32: 1 of 10 scrapes of http://h/metrics failed (e.g. GET http://h/metrics: timed out)"
            ]
        );
        // Nothing sampled, nothing scraped: no table, only the note.
        let mut bare = PointTelemetry::default();
        bare.gpu.note = Some("off the grid".into());
        let (t, notes) = table(&[Row {
            slug: "c",
            telemetry: Some(&bare),
            output_tokens_per_joule: None,
        }]);
        assert!(t.is_none());
        assert_eq!(notes.len(), 1);
    }

    #[test]
    fn speculative_decoding_gets_its_columns_where_a_server_reported_it() {
        let scraped = |headline: ServerHeadline| PointTelemetry {
            server_metrics: Some(ServerMetrics {
                url: "http://h/metrics".into(),
                scrapes_ok: 3,
                headline,
                ..Default::default()
            }),
            ..Default::default()
        };
        let spec = scraped(ServerHeadline {
            spec_acceptance_rate: Some(0.625),
            spec_accept_length: Some(3.5),
            ..Default::default()
        });
        let plain = scraped(ServerHeadline::default());
        let rows = [
            Row {
                slug: "draft.c8",
                telemetry: Some(&spec),
                output_tokens_per_joule: None,
            },
            Row {
                slug: "plain.c8",
                telemetry: Some(&plain),
                output_tokens_per_joule: None,
            },
        ];
        let text = table(&rows).0.unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            header(lines[2]).ends_with(&["preempt", "spec acc %", "acc len"]),
            "{text}"
        );
        let row = |i: usize| lines[i].split_whitespace().collect::<Vec<_>>();
        assert_eq!(row(3)[row(3).len() - 2..], ["62.5", "3.50"]);
        assert_eq!(row(4)[row(4).len() - 2..], ["-", "-"]);
    }

    #[test]
    fn modelled_gpus_show_their_activity_no_power_and_say_they_are_modelled() {
        let mut sim = gpu_telemetry();
        sim.gpu.source = Some(GpuDataSource::Sim);
        sim.gpu.energy_j = None;
        sim.gpu.power_w_mean = None;
        let d = &mut sim.gpu.devices[0];
        d.stats.power_w = None;
        d.stats.sm_active = stats(0.9, 1.0);
        d.stats.tensor_active = stats(0.314, 0.5);
        d.stats.dram_active = stats(0.756, 0.9);
        let (text, notes) = table(&[Row {
            slug: "sim.c8",
            telemetry: Some(&sim),
            output_tokens_per_joule: None,
        }]);
        let text = text.unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let header = header(lines[2]);
        assert_eq!(
            header,
            [
                "point",
                "GPU util %",
                "SM act %",
                "tensor %",
                "DRAM %",
                "mem peak GiB"
            ]
        );
        let row: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(row, ["sim.c8", "97", "90", "31", "76", "125.5"]);
        assert_eq!(
            notes,
            [
                "GPU figures of 1 point are modelled by the simulator (its roofline and memory model), not measured"
            ]
        );
    }

    #[test]
    fn probe_report_shows_what_was_sampled() {
        let text = probe(&gpu_telemetry());
        assert!(text.contains("NVIDIA H200"), "{text}");
        assert!(text.contains("125.50"), "{text}");
        assert!(text.contains("3500.0"), "{text}");
        assert!(text.contains("sw_power_cap 25%"), "{text}");
        assert!(text.contains("NVML energy counter"), "{text}");
        assert!(
            text.starts_with("GPU telemetry probe: 5.0 s at 100 ms"),
            "{text}"
        );
    }
}
