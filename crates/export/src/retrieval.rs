//! The terminal tables of points whose requests generate no text: the
//! retrieval points (`api = "embeddings"` and `"rerank"`) and the tensor
//! points (`api = "kserve"`). A request that streams nothing has no TTFT,
//! TPOT or ITL, so their tables show the request latency's percentiles
//! (P50 to P99.9) and what a request counts per second instead (inputs,
//! documents and input tokens; items), and for tensors the server's own
//! split of the latency (queue, compute, the rest) where it keeps one.

use infer_bench_spec::raw::Api;
use infer_bench_spec::results::{PointResult, Results};

use crate::table::{Align, Table};
use crate::term::Look;

/// Whether a point's requests generate no text (retrieval or tensors):
/// they have no place in the table of TTFT, TPOT and ITL.
pub fn is_retrieval(p: &PointResult) -> bool {
    !p.config.workload.api.generates()
}

fn f(x: Option<f64>, digits: usize) -> String {
    match x {
        Some(x) if x.is_finite() => format!("{x:.digits$}"),
        _ => "-".into(),
    }
}

/// The retrieval points' table, or `None` without any.
pub fn table(r: &Results, look: Look) -> Option<String> {
    let points: Vec<&PointResult> = r
        .points
        .iter()
        .filter(|p| matches!(p.config.workload.api, Api::Embeddings | Api::Rerank))
        .collect();
    if points.is_empty() {
        return None;
    }
    let mut t = Table::new(&[
        ("point", Align::Left),
        ("kind", Align::Left),
        ("ok", Align::Right),
        ("err", Align::Right),
        ("req/s", Align::Right),
        ("inputs/s", Align::Right),
        ("docs/s", Align::Right),
        ("in tok/s", Align::Right),
        ("lat p50", Align::Right),
        ("lat p99", Align::Right),
        ("lat p99.9", Align::Right),
        ("goodput", Align::Right),
        ("SLO", Align::Left),
        ("valid", Align::Left),
    ]);
    for p in points {
        let s = &p.merged;
        let e2e = s.latency_ms.get("e2e");
        t.row(vec![
            p.slug.clone(),
            match p.config.workload.api {
                Api::Embeddings => "embeddings".into(),
                _ => "rerank".into(),
            },
            s.requests.succeeded.to_string(),
            s.requests.failed.to_string(),
            f(Some(s.request_throughput), 2),
            f(s.inputs_per_s, 1),
            f(s.documents_per_s, 1),
            f(Some(s.input_tokens_per_s), 0),
            f(e2e.map(|x| x.p50), 1),
            f(e2e.map(|x| x.p99), 1),
            f(e2e.map(|x| x.p999), 1),
            format!("{}%", f(Some(s.goodput_ratio * 100.0), 0)),
            crate::report::slo_text(p),
            crate::summary::valid_cell(p).into(),
        ]);
    }
    let (text, hidden) = t.render_look(look, &["lat p99.9", "goodput", "err"]);
    Some(format!(
        "retrieval (latency in ms, whole requests)\n{text}{}",
        crate::summary::fit_note(&hidden)
    ))
}

/// The tensor points' table (`api = "kserve"`), or `None` without any:
/// inferences and items per second, the payload each way (the request and
/// response bodies, MB/s), the latency's percentiles, and the
/// server's mean queue and compute time and the rest of the client's mean
/// latency (the way in and out), where the server keeps statistics.
pub fn tensor_table(r: &Results, look: Look) -> Option<String> {
    let points: Vec<&PointResult> = r
        .points
        .iter()
        .filter(|p| p.config.workload.api == Api::Kserve)
        .collect();
    if points.is_empty() {
        return None;
    }
    let mut t = Table::new(&[
        ("point", Align::Left),
        ("ok", Align::Right),
        ("err", Align::Right),
        ("infer/s", Align::Right),
        ("items/s", Align::Right),
        ("req MB/s", Align::Right),
        ("resp MB/s", Align::Right),
        ("lat p50", Align::Right),
        ("lat p99", Align::Right),
        ("lat p99.9", Align::Right),
        ("queue", Align::Right),
        ("compute", Align::Right),
        ("outside", Align::Right),
        ("goodput", Align::Right),
        ("SLO", Align::Left),
        ("valid", Align::Left),
    ]);
    for p in points {
        let s = &p.merged;
        let e2e = s.latency_ms.get("e2e");
        let st = p.stages.as_ref();
        t.row(vec![
            p.slug.clone(),
            s.requests.succeeded.to_string(),
            s.requests.failed.to_string(),
            f(Some(s.request_throughput), 2),
            f(s.inputs_per_s, 1),
            f(s.payload.map(|x| x.request_bytes_per_s / 1e6), 1),
            f(s.payload.map(|x| x.response_bytes_per_s / 1e6), 2),
            f(e2e.map(|x| x.p50), 2),
            f(e2e.map(|x| x.p99), 2),
            f(e2e.map(|x| x.p999), 2),
            f(st.map(|x| x.queue_ms), 2),
            f(st.map(|x| x.compute_ms()), 2),
            f(st.and_then(|x| x.outside_ms), 2),
            format!("{}%", f(Some(s.goodput_ratio * 100.0), 0)),
            crate::report::slo_text(p),
            crate::summary::valid_cell(p).into(),
        ]);
    }
    let (text, hidden) = t.render_look(
        look,
        &[
            "lat p99.9",
            "goodput",
            "err",
            "resp MB/s",
            "outside",
            "req MB/s",
        ],
    );
    Some(format!(
        "tensors (latency in ms, whole requests; queue, compute: the server's mean per request; outside: the client's mean less the server's; req, resp MB/s: the request and response bodies, 10^6 bytes a second)\n{text}{}",
        crate::summary::fit_note(&hidden)
    ))
}
