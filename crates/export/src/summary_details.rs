//! The details under the run summary (`summary::table`): what an expert
//! reads beyond the headline numbers, as text: each workload of a mix,
//! memory by phase, and the points' pre-flight findings and bottleneck
//! hints (said once each by the summary's notes).

use super::findings::Findings;
use super::table::{Align, Table};
use infer_bench_spec::results::Results;

const GIB: f64 = (1u64 << 30) as f64;

fn num(x: Option<f64>, digits: usize) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "-".into(),
    }
}

/// The mixed points' parts, one row each; `None` without a mix.
pub fn mix_table(r: &Results, look: crate::term::Look) -> Option<String> {
    let mut t = Table::new(&[
        ("point", Align::Left),
        ("workload", Align::Left),
        ("weight", Align::Right),
        ("share", Align::Right),
        ("ok", Align::Right),
        ("err", Align::Right),
        ("in tok p50", Align::Right),
        ("TTFT p50", Align::Right),
        ("TTFT p99", Align::Right),
        ("TPOT p50", Align::Right),
        ("E2E p50", Align::Right),
        ("out tok/s", Align::Right),
    ]);
    for p in &r.points {
        for m in &p.mix {
            let s = &m.stats;
            let l = |k: &str, p99: bool| {
                s.latency_ms
                    .get(k)
                    .map(|x| format!("{:.1}", if p99 { x.p99 } else { x.p50 }))
                    .unwrap_or_else(|| "-".into())
            };
            t.row(vec![
                p.slug.clone(),
                m.workload.clone(),
                format!("{:.0}%", m.weight * 100.0),
                format!("{:.0}%", m.share * 100.0),
                s.requests.succeeded.to_string(),
                s.requests.failed.to_string(),
                format!("{:.0}", s.tokens.input.p50),
                l("ttft", false),
                l("ttft", true),
                l("tpot", false),
                l("e2e", false),
                format!("{:.0}", s.output_tokens_per_s),
            ]);
        }
    }
    (!t.is_empty()).then(|| {
        let (text, _) = t.render_look(look, &["in tok p50", "E2E p50", "TTFT p99", "weight"]);
        format!("workloads of each mix\n\n{text}")
    })
}

/// Reasoning against answer, one row per point where a request reasoned
/// (`reasoning_content` deltas, or usage's reasoning tokens); `None`
/// otherwise.
pub fn reasoning_table(r: &Results, look: crate::term::Look) -> Option<String> {
    let mut columns = vec![("point", Align::Left)];
    columns.extend(crate::report::REASONING_COLUMNS.iter().map(|&c| {
        let align = if c == "counted from" {
            Align::Left
        } else {
            Align::Right
        };
        (c, align)
    }));
    let mut t = Table::new(&columns);
    for p in &r.points {
        let Some(cells) = crate::report::reasoning_cells(p) else {
            continue;
        };
        let mut row = vec![p.slug.clone()];
        row.extend(cells);
        t.row(row);
    }
    (!t.is_empty()).then(|| {
        let (text, _) = t.render_look(look, &["counted from", "1st answer p99"]);
        format!("reasoning and answer (ms from the scheduled time)\n\n{text}")
    })
}

/// Memory by phase, one row per point that has it; `None` otherwise.
/// Narrow, the columns with nothing in them (GPU memory of a simulator)
/// are left out.
pub fn memory_table(r: &Results, look: crate::term::Look) -> Option<String> {
    let mut t = Table::new(&[
        ("point", Align::Left),
        ("prefill-heavy s", Align::Right),
        ("decode-heavy s", Align::Right),
        ("KV peak prefill %", Align::Right),
        ("KV peak decode %", Align::Right),
        ("GiB before server", Align::Right),
        ("GiB after load", Align::Right),
        ("GiB peak prefill", Align::Right),
        ("GiB peak decode", Align::Right),
    ]);
    for p in &r.points {
        // Prefill and decode are phases of generation only.
        if !p.config.workload.api.generates() {
            continue;
        }
        let Some(m) = &p.memory else { continue };
        let kv = m.kv_cache.as_ref();
        if kv.is_none() && m.gpus.is_empty() {
            continue;
        }
        let gpu_max =
            |f: &dyn Fn(&infer_bench_results::insight::GpuMemoryPhases) -> Option<f64>| {
                m.gpus
                    .iter()
                    .filter_map(f)
                    .reduce(f64::max)
                    .map(|b| b / GIB)
            };
        t.row(vec![
            p.slug.clone(),
            format!("{:.1}", m.prefill_heavy_s),
            format!("{:.1}", m.decode_heavy_s),
            num(kv.and_then(|k| k.prefill_peak).map(|x| x * 100.0), 1),
            num(kv.and_then(|k| k.decode_peak).map(|x| x * 100.0), 1),
            num(gpu_max(&|g| g.before_server_bytes.map(|b| b as f64)), 1),
            num(gpu_max(&|g| g.after_load_bytes.map(|b| b as f64)), 1),
            num(gpu_max(&|g| g.used.prefill_peak), 1),
            num(gpu_max(&|g| g.used.decode_peak), 1),
        ]);
    }
    (!t.is_empty()).then(|| {
        let (text, _) = t.render_look(
            look,
            &[
                "GiB before server",
                "GiB after load",
                "KV peak prefill %",
                "KV peak decode %",
                "GiB peak prefill",
                "GiB peak decode",
            ],
        );
        format!("memory by phase of the request timeline\n\n{text}")
    })
}

/// Every point's pre-flight findings and hints, into `out` (which says
/// each once, with the points it was found at).
pub(crate) fn findings(r: &Results, out: &mut Findings) {
    for p in &r.points {
        for f in &p.preflight {
            let key = format!("{}/{:?}", f.check, f.gpu);
            out.add_keyed(&p.slug, "pre-flight", &key, &f.message);
        }
        for h in &p.hints {
            out.add(&p.slug, "hint", &h.message);
        }
    }
}
