//! Exporters: the only code that writes to stdout. Each output format is
//! a function from plain data (plans, results, verdicts) to text.

pub mod capacity;
pub mod chart;
mod findings;
pub mod history;
pub mod plan;
pub mod quality;
pub mod report;
pub mod resources;
pub mod retrieval;
pub mod summary;
pub mod summary_details;
pub mod table;
pub mod term;
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

/// Failures as people read them: each class with its count, the HTTP
/// codes behind the `status_*` classes, and one example, e.g.
/// "status_4xx 3 (HTTP 404 2, 422 1), status_5xx 1 (HTTP 503 1) (e.g. HTTP
/// 404: no such model)". Empty without failures.
pub(crate) fn failures_text(s: &infer_bench_results::Stats) -> String {
    let codes = |class: &str| -> Vec<String> {
        let codes: Vec<String> = s
            .http_status
            .iter()
            .filter(|(code, _)| {
                code.parse()
                    .is_ok_and(|c| infer_bench_results::status_class(c) == class)
            })
            .map(|(code, n)| format!("{code} {n}"))
            .collect();
        codes
    };
    let classes: Vec<String> = s
        .errors
        .iter()
        .map(|(class, n)| {
            let codes = codes(class);
            if codes.is_empty() {
                format!("{class} {n}")
            } else {
                format!("{class} {n} (HTTP {})", codes.join(", "))
            }
        })
        .collect();
    let example = s
        .error_examples
        .values()
        .next()
        .map(|e| format!(" (e.g. {})", e.unencoded()))
        .unwrap_or_default();
    if classes.is_empty() {
        String::new()
    } else {
        format!("{}{example}", classes.join(", "))
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error. The text
/// passes the terminal's last guard on its way
/// ([`infer_bench_results::outside::terminal_page`]): colours only if we
/// draw them, no other control character, no line that a CI log reads as
/// a workflow command.
pub fn stdout(text: &str) -> std::io::Result<()> {
    let text = infer_bench_results::outside::terminal_page(text, term::current().color);
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Writes one line to stderr, through the terminal's last guard as
/// [`stdout`] does (stderr gets no colour of ours). Everything the command
/// line says on stderr goes through here.
pub fn stderr_line(text: &str) {
    let text = infer_bench_results::outside::terminal_page(text, false);
    let mut err = std::io::stderr().lock();
    let _ = err
        .write_all(text.as_bytes())
        .and_then(|_| err.write_all(b"\n"));
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
        ("fp4 TFLOP/s", Align::Right),
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
            x.fp4_tflops
                .map(|f| f.to_string())
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    let mut m = Table::new(&[
        ("preset", Align::Left),
        ("params B", Align::Right),
        ("active B", Align::Right),
        ("context", Align::Right),
        ("layers", Align::Right),
        ("hidden", Align::Right),
        ("heads", Align::Right),
        ("kv heads", Align::Right),
        ("head dim", Align::Right),
        ("KV", Align::Left),
        ("vision", Align::Left),
    ]);
    for x in infer_bench_spec::catalog::MODELS {
        m.row(vec![
            x.id.into(),
            format!("{}", x.params_b),
            format!("{}", x.active_params_b),
            x.context_tokens.to_string(),
            x.layers.to_string(),
            x.hidden.to_string(),
            x.heads.to_string(),
            x.kv_heads.to_string(),
            x.head_dim.to_string(),
            match x.kv_latent_dim {
                Some(d) => format!("latent {d}"),
                None => "per head".into(),
            },
            match x.vision {
                Some(v) => format!("{}B {m}x{m}", v.params_b, m = v.merge),
                None => "-".into(),
            },
        ]);
    }
    let mut n = Table::new(&[
        ("preset", Align::Left),
        ("kind", Align::Left),
        ("params M", Align::Right),
        ("GFLOPs/item", Align::Right),
        ("max batch", Align::Right),
        ("inputs", Align::Left),
        ("outputs", Align::Left),
    ]);
    let tensors = |ts: &[infer_bench_spec::catalog::TensorDecl]| {
        ts.iter()
            .map(|t| {
                let dims: Vec<String> = t.shape.iter().map(u64::to_string).collect();
                format!("{} {} [{}]", t.name, t.datatype, dims.join(", "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    for x in infer_bench_spec::catalog::NETWORKS {
        n.row(vec![
            x.id.into(),
            x.kind.name().into(),
            format!("{}", x.params_m),
            format!("{}", x.gflops),
            x.max_batch_size.to_string(),
            tensors(x.inputs),
            tensors(x.outputs),
        ]);
    }
    format!(
        "Simulated GPUs (targets.*.gpu):\n\n{}\nModel presets (models.*.preset; vision: the image encoder's parameters, patches per token):\n\n{}\nNetwork presets (models.*.preset with kind = \"vision\" or \"encoder\", served over KServe v2):\n\n{}",
        g.render(),
        m.render(),
        n.render()
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

    #[test]
    fn failures_read_by_class_with_their_http_codes() {
        let mut s = infer_bench_results::Stats::default();
        assert_eq!(super::failures_text(&s), "");
        for (class, n) in [("status_4xx", 3), ("status_5xx", 1), ("truncated", 2)] {
            s.errors.insert(class.into(), n);
        }
        for (code, n) in [("404", 2), ("422", 1), ("503", 1)] {
            s.http_status.insert(code.into(), n);
        }
        s.error_examples
            .insert("status_4xx".into(), "HTTP 404: no such model".into());
        assert_eq!(
            super::failures_text(&s),
            "status_4xx 3 (HTTP 404 2, 422 1), status_5xx 1 (HTTP 503 1), truncated 2 \
             (e.g. HTTP 404: no such model)"
        );
    }
}
