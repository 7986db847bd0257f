//! The HTML report's expert reading: the hints and pre-flight findings in
//! the executive summary with a radar chart of the key metrics, and the
//! "Reading the run" section with each mix's workloads, memory by phase,
//! memory growth over concurrency sweeps, and per-GPU breakdowns.

use std::fmt::Write;

use crate::chart;
use crate::xml::escape;
use infer_bench_judge::analysis::{Analysis, Source};
use infer_bench_results::metric::Metric;
use infer_bench_results::telemetry::GpuDataSource;
use infer_bench_spec::Threshold;
use infer_bench_spec::results::PointResult;

const GIB: f64 = (1u64 << 30) as f64;

/// Where a point's GPU figures came from, as the report names it: `nvml`,
/// `dcgm`, or `sim, modelled`; several joined by `+`.
fn gpu_source(p: &PointResult) -> Option<String> {
    let t = p.telemetry.as_ref()?;
    let mut names: Vec<&str> = Vec::new();
    for d in &t.gpu.devices {
        let n = source_name(d.source.or(t.gpu.source));
        if !names.contains(&n) {
            names.push(n);
        }
    }
    (!names.is_empty()).then(|| names.join(" + "))
}

fn source_name(s: Option<GpuDataSource>) -> &'static str {
    match s {
        Some(GpuDataSource::Sim) => "sim, modelled",
        Some(x) => x.name(),
        None => "nvml",
    }
}

/// DCGM's activity fractions (SM, tensor, DRAM) of a point, each the mean
/// over its GPUs of their means over the windows; `None` without any.
fn activity(p: &PointResult) -> Option<[Option<f64>; 3]> {
    let g = &p.telemetry.as_ref()?.gpu;
    let a = [
        g.device_mean(|s| s.sm_active.map(|x| x.mean)),
        g.device_mean(|s| s.tensor_active.map(|x| x.mean)),
        g.device_mean(|s| s.dram_active.map(|x| x.mean)),
    ];
    a.iter().any(Option::is_some).then_some(a)
}

/// A fraction as a percentage cell.
fn frac(x: Option<f64>) -> String {
    opt(x.map(|v| v * 100.0), 0)
}

/// One axis of the radar chart: its name, whether lower is better, and how
/// to read it from a point.
struct RadarAxis {
    name: String,
    lower_better: bool,
    /// A threshold from the points' SLOs on this metric, in its unit.
    slo: Option<f64>,
    values: Vec<Option<f64>>,
}

/// The configurations the radar compares: each sweep's point with the most
/// goodput, or every measured point (at most eight) without sweeps.
/// INVALID points take no part, unless every measured point is INVALID.
fn radar_rows(a: &Analysis) -> Vec<usize> {
    let any_valid = a.points.iter().any(|p| p.measured && p.valid);
    let usable = |i: usize| a.points[i].measured && (a.points[i].valid || !any_valid);
    let mut rows: Vec<usize> = if a.sweeps.is_empty() {
        (0..a.points.len()).filter(|&i| usable(i)).collect()
    } else {
        a.sweeps
            .iter()
            .filter_map(|s| {
                s.rows
                    .iter()
                    .copied()
                    .filter(|&i| usable(i))
                    .max_by(|&x, &y| {
                        a.points[x]
                            .goodput_requests_per_s
                            .total_cmp(&a.points[y].goodput_requests_per_s)
                    })
            })
            .collect()
    };
    rows.truncate(8);
    rows
}

fn slo_of(points: &[&PointResult], metric: &str) -> Option<(String, f64)> {
    points.iter().flat_map(|p| &p.slo).find_map(|s| {
        if s.metric != metric {
            return None;
        }
        let expr = s.expr.parse::<infer_bench_spec::SloExpr>().ok()?;
        let t = match expr.threshold {
            Threshold::Duration(d) => d.as_millis_f64(),
            _ => return None,
        };
        Some((
            expr.stat
                .map(|st| st.name())
                .unwrap_or_else(|| "p50".into()),
            t,
        ))
    })
}

fn axes(points: &[&PointResult]) -> Vec<RadarAxis> {
    let mut out = Vec::new();
    for (metric, label) in [(Metric::Ttft, "TTFT"), (Metric::Tpot, "TPOT")] {
        let (stat, slo) = match slo_of(points, metric.name()) {
            Some((stat, t)) => (stat, Some(t)),
            None => ("p50".into(), None),
        };
        let st: infer_bench_spec::Stat = stat
            .parse()
            .unwrap_or(infer_bench_spec::Stat::Percentile(50.0));
        out.push(RadarAxis {
            name: format!("{label} {stat}"),
            lower_better: true,
            slo,
            values: points.iter().map(|p| p.value(metric, Some(&st))).collect(),
        });
    }
    out.push(RadarAxis {
        name: "output tok/s".into(),
        lower_better: false,
        slo: None,
        values: points
            .iter()
            .map(|p| Some(p.merged.output_tokens_per_s))
            .collect(),
    });
    out.push(RadarAxis {
        name: "goodput".into(),
        lower_better: false,
        slo: None,
        values: points
            .iter()
            .map(|p| Some(p.merged.goodput_ratio))
            .collect(),
    });
    out.push(RadarAxis {
        name: "$/1M out".into(),
        lower_better: true,
        slo: None,
        values: points
            .iter()
            .map(|p| p.cost.as_ref().and_then(|c| c.usd_per_1m_output_tokens))
            .collect(),
    });
    out.push(RadarAxis {
        name: "J/token".into(),
        lower_better: true,
        slo: None,
        values: points
            .iter()
            .map(|p| {
                p.cost
                    .as_ref()
                    .and_then(|c| c.output_tokens_per_joule)
                    .filter(|t| *t > 0.0)
                    .map(|t| 1.0 / t)
            })
            .collect(),
    });
    // Where DCGM (or the simulator's model) gave SM activity: how much of
    // the GPU the configuration kept busy.
    let modelled = points
        .iter()
        .filter_map(|p| gpu_source(p))
        .any(|s| s.contains("modelled"));
    out.push(RadarAxis {
        name: if modelled {
            "SM active (modelled)".into()
        } else {
            "SM active".into()
        },
        lower_better: false,
        slo: None,
        values: points
            .iter()
            .map(|p| activity(p).and_then(|a| a[0]))
            .collect(),
    });
    out
}

/// A value's distance from the centre, 0 to 1: against the SLO (the
/// threshold sits at 0.5, twice as good reaches the rim) where there is
/// one, else against the best configuration (at the rim).
fn score(axis: &RadarAxis, v: f64) -> f64 {
    let present: Vec<f64> = axis
        .values
        .iter()
        .flatten()
        .copied()
        .filter(|x| *x > 0.0)
        .collect();
    let s = match (axis.slo, axis.lower_better) {
        (Some(t), true) if v > 0.0 => 0.5 * t / v,
        (_, true) => {
            let best = present.iter().copied().fold(f64::INFINITY, f64::min);
            if v > 0.0 { best / v } else { 0.0 }
        }
        (_, false) => {
            let best = present.iter().copied().fold(0.0, f64::max);
            if best > 0.0 { v / best } else { 0.0 }
        }
    };
    s.clamp(0.0, 1.0)
}

/// The radar chart as inline SVG; `None` with fewer than two
/// configurations to compare (one polygon says nothing a table does not)
/// or fewer than three axes with data.
pub fn radar(a: &Analysis, sources: &[Source]) -> Option<String> {
    let rows = radar_rows(a);
    if rows.len() < 2 {
        return None;
    }
    let points: Vec<&PointResult> = rows.iter().map(|&i| a.point(sources, i)).collect();
    let axes: Vec<RadarAxis> = axes(&points)
        .into_iter()
        .filter(|ax| ax.values.iter().any(|v| v.is_some_and(|x| x > 0.0)))
        .collect();
    if axes.len() < 3 {
        return None;
    }
    // The legend goes under the chart, one line per configuration.
    let legend_top = 370.0;
    let (w, h, cx, cy, r) = (
        560.0,
        legend_top + 18.0 * rows.len() as f64,
        280.0,
        185.0,
        135.0,
    );
    let n = axes.len() as f64;
    let at = |k: usize, s: f64| {
        let ang = -std::f64::consts::FRAC_PI_2 + k as f64 * std::f64::consts::TAU / n;
        (cx + r * s * ang.cos(), cy + r * s * ang.sin())
    };
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg class=\"chart radar\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"Radar chart of the key metrics\" xmlns=\"http://www.w3.org/2000/svg\">"
    );
    for ring in [0.25, 0.5, 0.75, 1.0] {
        let pts: Vec<String> = (0..axes.len())
            .map(|k| {
                let (x, y) = at(k, ring);
                format!("{x:.1},{y:.1}")
            })
            .collect();
        let style = if ring == 0.5 && axes.iter().any(|a| a.slo.is_some()) {
            format!("stroke=\"{}\" stroke-dasharray=\"4 3\"", chart::SLO_COLOR)
        } else {
            "stroke=\"#d0d0d0\"".to_string()
        };
        let _ = write!(
            svg,
            "<polygon points=\"{}\" fill=\"none\" {style}/>",
            pts.join(" ")
        );
    }
    for (k, ax) in axes.iter().enumerate() {
        let (x, y) = at(k, 1.0);
        let (lx, ly) = at(k, 1.18);
        let anchor = if (lx - cx).abs() < 5.0 {
            "middle"
        } else if lx > cx {
            "start"
        } else {
            "end"
        };
        let _ = write!(
            svg,
            "<line x1=\"{cx}\" y1=\"{cy}\" x2=\"{x:.1}\" y2=\"{y:.1}\" stroke=\"#d0d0d0\"/><text x=\"{lx:.1}\" y=\"{ly:.1}\" font-size=\"12\" text-anchor=\"{anchor}\" dominant-baseline=\"middle\">{}{}</text>",
            escape(&ax.name),
            if ax.slo.is_some() { " (SLO)" } else { "" }
        );
    }
    for (c, &row) in rows.iter().enumerate() {
        let pts: Vec<String> = axes
            .iter()
            .enumerate()
            .map(|(k, ax)| {
                let v = ax.values[c].unwrap_or(0.0);
                let (x, y) = at(k, score(ax, v));
                format!("{x:.1},{y:.1}")
            })
            .collect();
        let color = chart::color(c);
        let tip: Vec<String> = axes
            .iter()
            .map(|ax| match ax.values[c] {
                Some(v) => format!(
                    "{}: {}",
                    ax.name,
                    infer_bench_judge::analysis::round_sig(v, 3)
                ),
                None => format!("{}: -", ax.name),
            })
            .collect();
        let _ = write!(
            svg,
            "<polygon points=\"{}\" fill=\"{color}\" fill-opacity=\"0.12\" stroke=\"{color}\" stroke-width=\"2\"><title>{}: {}</title></polygon>",
            pts.join(" "),
            escape(&a.points[row].label),
            escape(&tip.join(", "))
        );
    }
    for (c, &row) in rows.iter().enumerate() {
        let y = legend_top + 4.0 + c as f64 * 18.0;
        let _ = write!(
            svg,
            "<rect x=\"40\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"56\" y=\"{:.1}\" font-size=\"12\">{}</text>",
            y - 9.0,
            chart::color(c),
            y,
            escape(&a.points[row].label)
        );
    }
    svg.push_str("</svg>");
    Some(svg)
}

/// The summary's card of hints and pre-flight findings, and the radar.
pub fn summary_cards(h: &mut String, a: &Analysis, sources: &[Source]) {
    // One line per distinct finding, with the points it concerns.
    let mut found: Vec<(String, Vec<&str>)> = Vec::new();
    for (i, row) in a.points.iter().enumerate() {
        let p = a.point(sources, i);
        let texts = p
            .preflight
            .iter()
            .map(|f| format!("pre-flight: {}", f.message))
            .chain(p.hints.iter().map(|x| x.message.clone()));
        for t in texts {
            match found.iter_mut().find(|(m, _)| *m == t) {
                Some((_, who)) => {
                    if !who.contains(&row.label.as_str()) {
                        who.push(&row.label);
                    }
                }
                None => found.push((t, vec![&row.label])),
            }
        }
    }
    let lines: Vec<String> = found.iter().map(|(t, who)| finding_line(t, who)).collect();
    h.push_str("<div class=\"card\"><h3>Hints</h3>");
    if lines.is_empty() {
        h.push_str("<p class=\"muted\">No pattern in the numbers suggests a bottleneck, and no pre-flight check found anything.</p>");
    } else {
        let shown = lines.len().min(12);
        let _ = write!(h, "<ul class=\"notes\">{}</ul>", lines[..shown].join(""));
        if lines.len() > shown {
            let _ = write!(
                h,
                "<p class=\"muted\">{} more under <a href=\"#reading\">Reading the run</a>.</p>",
                lines.len() - shown
            );
        }
        h.push_str("<p class=\"muted\">Hints are patterns that often have one cause, with the numbers behind them; they are not verdicts.</p>");
    }
    h.push_str("</div>");
    if let Some(svg) = radar(a, sources) {
        let _ = write!(
            h,
            "<div class=\"card wide\"><h3>Key metrics</h3><figure>{svg}<figcaption>One polygon per configuration (each sweep's point with the most goodput; INVALID points take no part). Farther out is better. Latencies with an SLO are scaled so the threshold is the dashed ring and twice as good reaches the rim; other axes against the best configuration, at the rim.</figcaption></figure></div>"
        );
    } else {
        key_metrics_table(h, a, sources);
    }
}

/// A finding and the points it concerns: the point's name before it when
/// there is one, else "(7 points: a, b, c, …)" after it.
fn finding_line(text: &str, who: &[&str]) -> String {
    if let [one] = who {
        return format!("<li><b>{}</b>: {}</li>", escape(one), escape(text));
    }
    let shown: Vec<&str> = who.iter().take(3).copied().collect();
    format!(
        "<li>{} <span class=\"muted\" title=\"{}\">({} points: {}{})</span></li>",
        escape(text),
        escape(&who.join(", ")),
        who.len(),
        escape(&shown.join(", ")),
        if who.len() > shown.len() { ", …" } else { "" }
    )
}

/// With a single configuration, its key metrics as a compact table
/// instead of a radar.
fn key_metrics_table(h: &mut String, a: &Analysis, sources: &[Source]) {
    let rows = radar_rows(a);
    let Some(&row) = rows.first() else { return };
    let p = a.point(sources, row);
    let r = &a.points[row];
    let ms = |m: Metric, q: f64| opt(infer_bench_judge::analysis::latency_ms(p, m, q), 1);
    let _ = write!(
        h,
        "<div class=\"card\" id=\"key-metrics\"><h3>Key metrics</h3><p class=\"muted\">{}: the only configuration, so no radar to compare.</p><table class=\"kv\"><tbody><tr><td class=\"l\">TTFT p50 / p99</td><td>{} / {} ms</td></tr><tr><td class=\"l\">TPOT p50 / p99</td><td>{} / {} ms</td></tr><tr><td class=\"l\">output</td><td>{} tok/s</td></tr><tr><td class=\"l\">goodput</td><td>{}%</td></tr><tr><td class=\"l\">$/1M out</td><td>{}</td></tr>{}</tbody></table></div>",
        escape(&r.label),
        ms(Metric::Ttft, 50.0),
        ms(Metric::Ttft, 99.0),
        ms(Metric::Tpot, 50.0),
        ms(Metric::Tpot, 99.0),
        super::fmt(p.merged.output_tokens_per_s, 0),
        super::fmt(p.merged.goodput_ratio * 100.0, 0),
        opt(r.usd_per_1m_output_tokens, 3),
        match (activity(p), gpu_source(p)) {
            (Some([sm, t, d]), Some(src)) => format!(
                "<tr><td class=\"l\">GPU SM / tensor / DRAM active</td><td>{} / {} / {}% <span class=\"muted\">({})</span></td></tr>",
                frac(sm),
                frac(t),
                frac(d),
                escape(&src)
            ),
            _ => String::new(),
        }
    );
}

fn opt(x: Option<f64>, digits: usize) -> String {
    super::fmt_opt(x, digits)
}

/// Whether the "Reading the run" section has anything to show.
pub fn has_section(a: &Analysis, sources: &[Source]) -> bool {
    a.sweeps.iter().any(|s| !s.memory.is_empty())
        || (0..a.points.len()).any(|i| {
            let p = a.point(sources, i);
            !p.hints.is_empty()
                || !p.preflight.is_empty()
                || !p.mix.is_empty()
                || p.memory.is_some()
                || activity(p).is_some()
        })
}

/// The "Reading the run" section; nothing when no point has anything to show.
pub fn section(h: &mut String, a: &Analysis, sources: &[Source]) {
    if !has_section(a, sources) {
        return;
    }
    let rows: Vec<(usize, &PointResult)> = (0..a.points.len())
        .map(|i| (i, a.point(sources, i)))
        .collect();
    let rows = rows.as_slice();
    let has = |f: &dyn Fn(&PointResult) -> bool| rows.iter().any(|(_, p)| f(p));
    let any_memory = a.sweeps.iter().any(|s| !s.memory.is_empty());
    h.push_str("<section id=\"reading\"><h2>Reading the run</h2>");
    if has(&|p| !p.hints.is_empty() || !p.preflight.is_empty()) {
        hints_table(h, a, rows);
    }
    if has(&|p| !p.mix.is_empty()) {
        mix_table(h, a, rows);
    }
    if has(&|p| {
        p.memory
            .as_ref()
            .is_some_and(|m| m.kv_cache.is_some() || !m.gpus.is_empty())
    }) {
        memory_table(h, a, rows);
    }
    if any_memory {
        memory_growth(h, a);
    }
    if has(&per_gpu_shown) {
        per_gpu_table(h, a, rows);
    }
    h.push_str("</section>\n");
}

/// Hints and pre-flight findings, one row each.
fn hints_table(h: &mut String, a: &Analysis, rows: &[(usize, &PointResult)]) {
    h.push_str("<h3>Hints and pre-flight findings</h3><div class=\"table-wrap\"><table><thead><tr><th class=\"l\">point</th><th class=\"l\">kind</th><th class=\"l\">what the numbers suggest</th><th class=\"l\">numbers</th></tr></thead><tbody>");
    for (i, p) in rows {
        let label = escape(&a.points[*i].label);
        for f in &p.preflight {
            let _ = write!(
                h,
                "<tr><td class=\"l\">{label}</td><td class=\"l\">pre-flight: {}</td><td class=\"l wrap\">{}</td><td></td></tr>",
                escape(&f.check),
                escape(&f.message)
            );
        }
        for x in &p.hints {
            let ev: Vec<String> = x
                .evidence
                .iter()
                .map(|(k, v)| format!("{k} = {v}"))
                .collect();
            let _ = write!(
                h,
                "<tr><td class=\"l\">{label}</td><td class=\"l\">{}</td><td class=\"l wrap\">{}</td><td class=\"l wrap muted\">{}</td></tr>",
                escape(&x.kind),
                escape(&x.message),
                escape(&ev.join(", "))
            );
        }
    }
    h.push_str("</tbody></table></div>");
}

/// The workloads of each mix, one row per part.
fn mix_table(h: &mut String, a: &Analysis, rows: &[(usize, &PointResult)]) {
    h.push_str("<h3>Workloads of each mix</h3><p class=\"lead\">One arrival process, several kinds of traffic: each part's own latencies show how they contend for the KV cache and compute. Rates over the point's whole window.</p><div class=\"table-wrap\"><table><thead><tr><th class=\"l\">point</th><th class=\"l\">workload</th><th>weight</th><th>share</th><th>ok</th><th>err</th><th>in tok p50</th><th>TTFT p50</th><th>TTFT p99</th><th>TPOT p50</th><th>E2E p50</th><th>out tok/s</th></tr></thead><tbody>");
    for (i, p) in rows {
        for m in &p.mix {
            let s = &m.stats;
            let l = |k: &str, q: f64| {
                opt(
                    s.latency_ms
                        .get(k)
                        .map(|x| if q > 90.0 { x.p99 } else { x.p50 }),
                    1,
                )
            };
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{:.0}%</td><td>{:.0}%</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}</td></tr>",
                escape(&a.points[*i].label),
                escape(&m.workload),
                m.weight * 100.0,
                m.share * 100.0,
                s.requests.succeeded,
                s.requests.failed,
                s.tokens.input.p50,
                l("ttft", 50.0),
                l("ttft", 99.0),
                l("tpot", 50.0),
                l("e2e", 50.0),
                s.output_tokens_per_s
            );
        }
    }
    h.push_str("</tbody></table></div>");
}

/// Memory by phase of the request timeline, one row per GPU (or per point
/// where no GPU was sampled).
fn memory_table(h: &mut String, a: &Analysis, rows: &[(usize, &PointResult)]) {
    h.push_str("<h3>Memory by phase</h3><p class=\"lead\">Each 100 ms of the measurement is prefill-heavy when more of its in-flight request time was prefill (sent, no output yet) than over the whole point, else decode-heavy; samples are attributed to the interval they fall in.</p><div class=\"table-wrap\"><table><thead><tr><th class=\"l\">point</th><th>prefill share</th><th>prefill-heavy s</th><th>decode-heavy s</th><th>KV peak prefill</th><th>KV peak decode</th><th>GPU</th><th>GiB before server</th><th>GiB after load</th><th>GiB peak prefill</th><th>GiB peak decode</th>");
    // DCGM's activity by phase, where any GPU has it: prefill should
    // be math (tensor), decode memory traffic (DRAM).
    let act = rows.iter().any(|(_, p)| {
        p.memory.as_ref().is_some_and(|m| {
            m.gpus.iter().any(|g| {
                g.sm_active.is_some() || g.tensor_active.is_some() || g.dram_active.is_some()
            })
        })
    });
    h.push_str("<th class=\"l\">source</th>");
    if act {
        h.push_str("<th>SM / tensor / DRAM % prefill</th><th>SM / tensor / DRAM % decode</th>");
    }
    h.push_str("</tr></thead><tbody>");
    for (i, p) in rows {
        let Some(m) = &p.memory else { continue };
        let kv = m.kv_cache.as_ref();
        let pct = |x: Option<f64>| opt(x.map(|v| v * 100.0), 1) + "%";
        let head = format!(
            "<td class=\"l\">{}</td><td>{:.0}%</td><td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}</td>",
            escape(&a.points[*i].label),
            m.prefill_share * 100.0,
            m.prefill_heavy_s,
            m.decode_heavy_s,
            pct(kv.and_then(|k| k.prefill_peak)),
            pct(kv.and_then(|k| k.decode_peak))
        );
        let blank = if act { "<td></td><td></td>" } else { "" };
        if m.gpus.is_empty() {
            let _ = write!(
                h,
                "<tr>{head}<td class=\"muted\">not sampled</td><td></td><td></td><td></td><td></td><td></td>{blank}</tr>"
            );
        }
        let devices = p.telemetry.as_ref().map(|t| (&t.gpu.devices, t.gpu.source));
        for g in &m.gpus {
            let gb = |b: Option<f64>| opt(b.map(|b| b / GIB), 1);
            let source = devices.map(|(ds, top)| {
                source_name(
                    ds.iter()
                        .find(|d| d.index == g.index)
                        .and_then(|d| d.source)
                        .or(top),
                )
            });
            let by_phase = |pick: fn(&infer_bench_results::insight::PhasePeaks) -> Option<f64>| {
                [&g.sm_active, &g.tensor_active, &g.dram_active]
                    .map(|x| frac(x.as_ref().and_then(pick)))
                    .join(" / ")
            };
            let cells = if act {
                format!(
                    "<td>{}</td><td>{}</td>",
                    by_phase(|x| x.prefill_mean),
                    by_phase(|x| x.decode_mean)
                )
            } else {
                String::new()
            };
            let _ = write!(
                h,
                "<tr>{head}<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td>{cells}</tr>",
                g.index,
                gb(g.before_server_bytes.map(|b| b as f64)),
                gb(g.after_load_bytes.map(|b| b as f64)),
                gb(g.used.prefill_peak),
                gb(g.used.decode_peak),
                source.unwrap_or("-")
            );
        }
    }
    h.push_str("</tbody></table></div>");
}

/// How memory grows over each concurrency sweep, and where it runs out.
fn memory_growth(h: &mut String, a: &Analysis) {
    h.push_str("<h3>Memory growth over concurrency</h3><p class=\"lead\">A straight line through each concurrency sweep's peak memory against its concurrency, and where it would reach its limit. vLLM and SGLang reserve their KV cache up front, so their GPU memory stays flat; their KV-cache usage is what grows.</p><ul>");
    for s in &a.sweeps {
        for m in &s.memory {
            let (per, limit) = if m.what == "kv_cache" {
                (
                    format!("{:.3}% of the KV cache", m.per_request * 100.0),
                    "the KV cache is full".to_string(),
                )
            } else {
                (
                    format!(
                        "{:.1} MiB of {}",
                        m.per_request / (1u64 << 20) as f64,
                        m.what
                    ),
                    format!("{} is out of memory ({:.0} GiB)", m.what, m.limit / GIB),
                )
            };
            let at = match m.runs_out_at {
                Some(c) => format!("{limit} at about {:.0} concurrent requests", c),
                None => "no growth with concurrency".into(),
            };
            let _ = write!(
                h,
                "<li><b>{}</b>: {per} per concurrent request; {at} (fit over {} points, r² {:.2})</li>",
                escape(&s.name),
                m.points,
                m.r2
            );
        }
    }
    h.push_str("</ul>");
}

/// Whether the per-GPU table shows a point: several GPUs, or DCGM's
/// activity fields (which NVML's summary table has no room for).
fn per_gpu_shown(p: &PointResult) -> bool {
    p.telemetry
        .as_ref()
        .is_some_and(|t| t.gpu.devices.len() > 1 || activity(p).is_some())
}

/// One row per GPU of the points [`per_gpu_shown`] picks.
fn per_gpu_table(h: &mut String, a: &Analysis, rows: &[(usize, &PointResult)]) {
    let act = rows.iter().any(|(_, p)| activity(p).is_some());
    h.push_str("<h3>Per GPU</h3><div class=\"table-wrap\"><table><thead><tr><th class=\"l\">point</th><th>GPU</th><th class=\"l\">source</th><th>util %</th><th>mem bw %</th>");
    if act {
        h.push_str("<th>SM active %</th><th>SM occupancy %</th><th>tensor active %</th><th>DRAM active %</th>");
    }
    h.push_str("<th>GiB peak</th><th>W mean</th><th>SM MHz</th><th>PCIe rx/tx MB/s</th><th>NVLink rx/tx GB/s</th></tr></thead><tbody>");
    for (i, p) in rows {
        let Some(t) = p.telemetry.as_ref().filter(|_| per_gpu_shown(p)) else {
            continue;
        };
        for d in &t.gpu.devices {
            let s = &d.stats;
            let cells = if act {
                [s.sm_active, s.sm_occupancy, s.tensor_active, s.dram_active]
                    .map(|x| format!("<td>{}</td>", frac(x.map(|x| x.mean))))
                    .concat()
            } else {
                String::new()
            };
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td>{cells}<td>{}</td><td>{}</td><td>{}</td><td>{} / {}</td><td>{} / {}</td></tr>",
                escape(&a.points[*i].label),
                d.index,
                source_name(d.source.or(t.gpu.source)),
                opt(s.utilization_pct.map(|x| x.mean), 0),
                opt(s.memory_bandwidth_utilization_pct.map(|x| x.mean), 0),
                opt(s.memory_used_bytes.map(|x| x.max / GIB), 1),
                opt(s.power_w.map(|x| x.mean), 0),
                opt(s.sm_clock_mhz.map(|x| x.mean), 0),
                opt(s.pcie_rx_bytes_per_s.map(|x| x.mean / 1e6), 0),
                opt(s.pcie_tx_bytes_per_s.map(|x| x.mean / 1e6), 0),
                opt(s.nvlink_rx_bytes_per_s.map(|x| x.mean / 1e9), 1),
                opt(s.nvlink_tx_bytes_per_s.map(|x| x.mean / 1e9), 1),
            );
        }
    }
    h.push_str("</tbody></table></div>");
}
