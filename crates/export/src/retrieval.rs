//! The terminal table of retrieval points (`api = "embeddings"` and
//! `"rerank"`): a request that streams nothing has no TTFT, TPOT or ITL, so
//! its table shows the request latency's percentiles (P50 to P99.9), the
//! requests, inputs or documents and input tokens per second instead.

use infer_bench_spec::raw::Api;
use infer_bench_spec::results::{PointResult, Results};

use crate::table::{Align, Table};
use crate::term::Look;

/// Whether a point's requests are retrieval requests.
pub fn is_retrieval(p: &PointResult) -> bool {
    matches!(p.config.workload.api, Api::Embeddings | Api::Rerank)
}

fn f(x: Option<f64>, digits: usize) -> String {
    match x {
        Some(x) if x.is_finite() => format!("{x:.digits$}"),
        _ => "-".into(),
    }
}

/// The retrieval points' table, or `None` without any.
pub fn table(r: &Results, look: Look) -> Option<String> {
    let points: Vec<&PointResult> = r.points.iter().filter(|p| is_retrieval(p)).collect();
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
        let valid = match (p.status, p.valid) {
            (infer_bench_results::PointStatus::Failed, _) => "FAILED",
            (_, true) => "yes",
            (_, false) => "INVALID",
        };
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
            valid.into(),
        ]);
    }
    let (text, _) = t.render_look(look, &["lat p99.9", "goodput", "err"]);
    Some(format!("retrieval (latency in ms, whole requests)\n{text}"))
}
