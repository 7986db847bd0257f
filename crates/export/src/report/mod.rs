//! `infer-bench report`: one or more results files rendered as a
//! self-contained HTML page with charts (`html`), Markdown (`markdown`),
//! CSV with one row per point and run (`csv`), or the sweep analysis as
//! JSON (`json`). Everything here is a function from sources (results
//! files, already read and labelled) to text; the sweep analysis itself
//! lives in `infer_bench_judge::analysis`.

pub mod csv;
pub mod html;
pub mod markdown;
mod quality;
pub mod reading;
pub mod time_series;

use std::collections::BTreeMap;

use crate::slo_name;
use infer_bench_judge::analysis::{Analysis, Source};
use infer_bench_results::metric::Metric;
use infer_bench_results::{Environment, PointStatus};
use infer_bench_spec::results::PointResult;

/// The sweep analysis as JSON (`report --format json`).
pub fn json(sources: &[Source]) -> String {
    Analysis::of(sources).to_json()
}

/// `x` with `digits` decimals, or "-" when it is not a number.
pub(crate) fn fmt(x: f64, digits: usize) -> String {
    if x.is_finite() {
        format!("{x:.digits$}")
    } else {
        "-".into()
    }
}

pub(crate) fn fmt_opt(x: Option<f64>, digits: usize) -> String {
    x.map(|v| fmt(v, digits)).unwrap_or_else(|| "-".into())
}

/// A value with about three significant digits, for prose.
pub(crate) fn fmt_sig(x: f64) -> String {
    let a = x.abs();
    if !x.is_finite() {
        "-".into()
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// An enum's serde name ("closed", "sim").
pub(crate) fn word<T: serde::Serialize>(t: &T) -> String {
    serde_json::to_value(t)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The SLO cell of a point: "pass", "FAIL (tpot p50 < 10ms)" or "-".
pub(crate) fn slo_text(p: &PointResult) -> String {
    match p.slo_pass {
        None => "-".into(),
        Some(true) => "pass".into(),
        Some(false) => format!(
            "FAIL ({})",
            p.slo
                .iter()
                .filter(|x| !x.pass)
                .map(|x| slo_name(&x.metric, &x.expr))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    }
}

/// The validity cell: "yes", "INVALID" or "FAILED".
pub(crate) fn valid_text(p: &PointResult) -> &'static str {
    match (p.status, p.valid) {
        (PointStatus::Failed, _) => "FAILED",
        (_, true) => "yes",
        (_, false) => "INVALID",
    }
}

/// Header of the points table shared by the HTML and Markdown reports.
pub(crate) const POINT_COLUMNS: &[&str] = &[
    "point",
    "load",
    "ok",
    "err",
    "req/s",
    "out tok/s",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "TPOT p50 ms",
    "TPOT p99 ms",
    "E2E p50 ms",
    "E2E p99 ms",
    "goodput",
    "tok/s/user",
    "tok/s/GPU",
    "$/1M out",
    "SLO",
    "valid",
];

/// One row of the points table, as plain text.
pub(crate) fn point_cells(a: &Analysis, sources: &[Source], row: usize) -> Vec<String> {
    let r = &a.points[row];
    let p = a.point(sources, row);
    let s = &p.merged;
    let ms = |m: Metric, q: f64| fmt_opt(infer_bench_judge::analysis::latency_ms(p, m, q), 1);
    vec![
        r.label.clone(),
        match (r.load_kind, r.load) {
            (Some(k), Some(l)) => k.show(l),
            _ => "ramp".into(),
        },
        s.requests.succeeded.to_string(),
        s.requests.failed.to_string(),
        fmt(s.request_throughput, 2),
        fmt(s.output_tokens_per_s, 0),
        ms(Metric::Ttft, 50.0),
        ms(Metric::Ttft, 99.0),
        ms(Metric::Tpot, 50.0),
        ms(Metric::Tpot, 99.0),
        ms(Metric::E2e, 50.0),
        ms(Metric::E2e, 99.0),
        format!("{}%", fmt(s.goodput_ratio * 100.0, 0)),
        fmt_opt(r.output_tokens_per_s_per_user, 1),
        fmt(r.output_tokens_per_s_per_gpu, 0),
        fmt_opt(r.usd_per_1m_output_tokens, 3),
        slo_text(p),
        valid_text(p).into(),
    ]
}

/// Lines that say what was tested: ("targets", "sim: simulated 1× h100-sxm"), ...
pub(crate) fn tested(sources: &[Source]) -> Vec<(&'static str, String)> {
    let mut targets = Vec::new();
    let mut models = Vec::new();
    let mut precisions = Vec::new();
    let mut workloads = Vec::new();
    let mut loads = Vec::new();
    let push = |v: &mut Vec<String>, s: String| {
        if !v.contains(&s) {
            v.push(s);
        }
    };
    for src in sources {
        for p in &src.results.points {
            let c = &p.config;
            let t = &c.target;
            push(
                &mut targets,
                match (&t.sim, &t.base_url) {
                    (Some(sim), _) => format!(
                        "{} (simulated {}× {}{})",
                        t.name,
                        sim.gpus,
                        sim.gpu,
                        if p.clock.as_deref() == Some("virtual") {
                            ", in virtual time"
                        } else {
                            ""
                        }
                    ),
                    (None, Some(url)) => format!("{} ({})", t.name, url),
                    (None, None) => t.name.clone(),
                },
            );
            push(
                &mut models,
                format!("{} ({})", c.model.name, c.model.served_name),
            );
            if let Some(pr) = &c.precision {
                push(&mut precisions, pr.name.clone());
            }
            let w = &c.workload;
            let lens = match (&w.input_tokens, &w.output_tokens) {
                (Some(i), Some(o)) => format!(": input {i}, output {o}"),
                _ => String::new(),
            };
            push(
                &mut workloads,
                format!("{} ({} API{lens})", w.name, word(&w.api)),
            );
            let l = &c.load;
            let window = match (l.duration, l.requests) {
                (Some(d), _) => format!("{d} each"),
                (None, Some(n)) => format!("{n} requests each"),
                _ => String::new(),
            };
            push(
                &mut loads,
                format!(
                    "{} arrivals, {} run{}, {window}",
                    word(&l.arrival),
                    l.runs,
                    if l.runs == 1 { "" } else { "s" }
                ),
            );
        }
    }
    let mut levels: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for src in sources {
        for p in &src.results.points {
            if let Some((k, l)) = infer_bench_judge::analysis::load_of(p) {
                let e = levels.entry(word(&k)).or_default();
                let s = infer_bench_spec::fmt_number(l);
                if !e.contains(&s) {
                    e.push(s);
                }
            }
        }
    }
    let levels = levels
        .into_iter()
        .map(|(k, mut v)| {
            v.sort_by(|a, b| {
                a.parse::<f64>()
                    .unwrap_or(0.0)
                    .total_cmp(&b.parse::<f64>().unwrap_or(0.0))
            });
            let unit = if k == "rate" { " req/s" } else { "" };
            format!("{k} {}{unit}", v.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ");
    let mut out = vec![
        ("targets", targets.join("; ")),
        ("models", models.join("; ")),
    ];
    if !precisions.is_empty() {
        out.push(("precisions", precisions.join(", ")));
    }
    out.push(("workloads", workloads.join("; ")));
    if !levels.is_empty() {
        out.push(("load levels", levels));
    }
    out.push(("load", loads.join("; ")));
    let slos = slo_list(sources);
    if !slos.is_empty() {
        out.push(("SLOs", slos.join("; ")));
    }
    out
}

/// Every SLO of the sources, once: "tpot p50 < 10ms".
pub(crate) fn slo_list(sources: &[Source]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for src in sources {
        for p in &src.results.points {
            for s in &p.slo {
                let t = slo_name(&s.metric, &s.expr);
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
    }
    out
}

/// Counts behind the verdict line.
#[derive(Debug, Default)]
pub(crate) struct Verdicts {
    pub points: usize,
    pub failed: usize,
    pub invalid: usize,
    pub slo_pass: usize,
    pub slo_fail: usize,
    pub no_slo: usize,
}

pub(crate) fn verdicts(sources: &[Source]) -> Verdicts {
    let mut v = Verdicts::default();
    for p in sources.iter().flat_map(|s| &s.results.points) {
        v.points += 1;
        if p.status == PointStatus::Failed {
            v.failed += 1;
        } else if !p.valid {
            v.invalid += 1;
        }
        match p.slo_pass {
            Some(true) => v.slo_pass += 1,
            Some(false) => v.slo_fail += 1,
            None => v.no_slo += 1,
        }
    }
    v
}

impl Verdicts {
    /// The badge: "no SLOs declared" when no point has one, else "4 / 6
    /// pass" over the points that declare SLOs.
    pub fn badge(&self) -> String {
        let judged = self.slo_pass + self.slo_fail;
        if judged == 0 {
            "no SLOs declared".into()
        } else {
            format!("{} / {judged} pass", self.slo_pass)
        }
    }

    /// "4 of 6 points meet every SLO; 2 fail one or more. 1 point is INVALID."
    pub fn sentence(&self) -> String {
        let mut s = if self.no_slo == self.points {
            format!(
                "{} point{}, no SLOs to judge.",
                self.points,
                plural(self.points)
            )
        } else {
            let mut s = format!(
                "{} of {} point{} meet every SLO",
                self.slo_pass,
                self.points,
                plural(self.points)
            );
            if self.slo_fail > 0 {
                s.push_str(&format!("; {} fail one or more", self.slo_fail));
            }
            if self.no_slo > 0 {
                s.push_str(&format!("; {} have no SLOs", self.no_slo));
            }
            s.push('.');
            s
        };
        if self.failed > 0 {
            s.push_str(&format!(
                " {} point{} could not be measured.",
                self.failed,
                plural(self.failed)
            ));
        }
        if self.invalid > 0 {
            s.push_str(&format!(
                " {} point{} INVALID (see the notes).",
                self.invalid,
                if self.invalid == 1 { " is" } else { "s are" }
            ));
        }
        s
    }
}

pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Distinct environments with the labels of the sources that share each.
pub(crate) fn environments(sources: &[Source]) -> Vec<(Vec<String>, &Environment)> {
    let mut out: Vec<(Vec<String>, &Environment)> = Vec::new();
    for s in sources {
        let env = &s.results.environment;
        match out.iter_mut().find(|(_, e)| *e == env) {
            Some((labels, _)) => labels.push(s.label.clone()),
            None => out.push((vec![s.label.clone()], env)),
        }
    }
    out
}

/// Distinct servers ("name version: model") with how many points ran on each.
pub(crate) fn servers(sources: &[Source]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for p in sources.iter().flat_map(|s| &s.results.points) {
        let Some(sv) = &p.server else { continue };
        // The server's words, as it said them: the report's writers
        // encode the line for their place (Markdown, HTML).
        let mut t = sv
            .name
            .as_ref()
            .map_or("server", |n| n.unencoded())
            .to_string();
        if let Some(v) = &sv.version {
            t.push(' ');
            t.push_str(v.unencoded());
        }
        if let Some(m) = &sv.model {
            t.push_str(": ");
            t.push_str(m.unencoded());
        }
        match out.iter_mut().find(|(s, _)| *s == t) {
            Some((_, n)) => *n += 1,
            None => out.push((t, 1)),
        }
    }
    out
}

/// Notes on points: failures, INVALID reasons, warnings, error classes.
pub(crate) fn notes(a: &Analysis, sources: &[Source]) -> Vec<String> {
    let mut notes = Vec::new();
    for (i, r) in a.points.iter().enumerate() {
        let p = a.point(sources, i);
        if let Some(f) = &p.failure {
            notes.push(format!("{}: {f}", r.label));
        }
        if p.status != PointStatus::Failed {
            for reason in &p.invalid_reasons {
                notes.push(format!("{} is INVALID: {reason}", r.label));
            }
        }
        for w in &p.warnings {
            notes.push(format!("{}: warning: {w}", r.label));
        }
        if !p.merged.errors.is_empty() {
            notes.push(format!(
                "{}: failures by class: {}",
                r.label,
                crate::failures_text(&p.merged)
            ));
        }
    }
    for s in sources {
        if !s.results.pending.is_empty() {
            notes.push(format!(
                "{}: {} point(s) did not run: {}",
                s.label,
                s.results.pending.len(),
                s.results.pending.join(", ")
            ));
        }
    }
    notes
}

/// The best configuration as a sentence.
pub(crate) fn best_sentence(a: &Analysis) -> String {
    match &a.best {
        None => "none: no measured point meets its SLOs".into(),
        Some(b) => format!(
            "{} ({} {}){}",
            b.label,
            fmt_sig(b.value),
            b.basis.describe(),
            if b.from_invalid {
                ", drawn from INVALID points: every measured point is INVALID"
            } else {
                ""
            }
        ),
    }
}

/// A sweep's capacity at SLO as a sentence, saying when it was drawn from
/// INVALID points.
pub(crate) fn capacity_text(s: &infer_bench_judge::analysis::Sweep) -> String {
    let t = infer_bench_judge::analysis::describe_capacity(&s.capacity, s.load_kind);
    if s.from_invalid {
        format!("{t} (drawn from INVALID points: every measured point is INVALID)")
    } else {
        t
    }
}

/// Header of the reasoning table after the point's name (terminal, HTML
/// and Markdown).
pub(crate) const REASONING_COLUMNS: &[&str] = &[
    "reasoning tok",
    "answer tok",
    "counted from",
    "1st reasoning p50",
    "1st answer p50",
    "1st answer p99",
    "reasoning tok/s",
    "answer tok/s",
];

/// A point's reasoning against its answer, as plain text under
/// [`REASONING_COLUMNS`]; `None` where no request reasoned.
pub(crate) fn reasoning_cells(p: &PointResult) -> Option<Vec<String>> {
    let s = &p.merged;
    let (reasoning, answer) = (s.tokens.reasoning_total?, s.tokens.answer_total?);
    let ms = |m: Metric, p99: bool| {
        fmt_opt(
            s.latency_ms
                .get(m.name())
                .map(|x| if p99 { x.p99 } else { x.p50 }),
            1,
        )
    };
    let sources: Vec<&str> = s
        .tokens
        .reasoning_source
        .keys()
        .map(String::as_str)
        .collect();
    Some(vec![
        reasoning.to_string(),
        answer.to_string(),
        sources.join("+"),
        ms(Metric::TtftReasoning, false),
        ms(Metric::TtftAnswer, false),
        ms(Metric::TtftAnswer, true),
        fmt_opt(s.reasoning_tokens_per_s, 0),
        fmt_opt(s.answer_tokens_per_s, 0),
    ])
}

/// The rows of the analysis whose points reasoned, each with the point's
/// label first.
pub(crate) fn reasoning_rows(a: &Analysis, sources: &[Source]) -> Vec<Vec<String>> {
    (0..a.points.len())
        .filter_map(|i| {
            let mut row = vec![a.points[i].label.clone()];
            row.extend(reasoning_cells(a.point(sources, i))?);
            Some(row)
        })
        .collect()
}

/// Header of the retrieval table (embeddings and rerank points), HTML and
/// Markdown.
pub(crate) const RETRIEVAL_COLUMNS: &[&str] = &[
    "kind",
    "req/s",
    "inputs/s",
    "docs/s",
    "in tok/s",
    "latency p50 ms",
    "latency p99 ms",
    "latency p99.9 ms",
    "$/1M inputs",
    "$/1M docs",
    "$/1k req",
];

/// What the retrieval table shows, under it.
pub(crate) const RETRIEVAL_NOTE: &str = "Embeddings, rerank and kserve answers are not streamed: their latency is the whole request's (e2e, from the scheduled send), and they have no TTFT, TPOT or ITL. Input tokens are the server's usage where it reports one. For kserve (tensor) points, inputs/s counts items (batch x inferences/s).";

/// The rows of the analysis's embeddings and rerank points, each with the
/// point's label first.
pub(crate) fn retrieval_rows(a: &Analysis, sources: &[Source]) -> Vec<Vec<String>> {
    (0..a.points.len())
        .filter_map(|i| {
            let p = a.point(sources, i);
            if !crate::retrieval::is_retrieval(p) {
                return None;
            }
            let s = &p.merged;
            let e2e = s.latency_ms.get("e2e");
            let cost = p.cost.as_ref();
            Some(vec![
                a.points[i].label.clone(),
                p.config.workload.api.name().to_string(),
                fmt_opt(Some(s.request_throughput), 2),
                fmt_opt(s.inputs_per_s, 1),
                fmt_opt(s.documents_per_s, 1),
                fmt_opt(Some(s.input_tokens_per_s), 0),
                fmt_opt(e2e.map(|x| x.p50), 1),
                fmt_opt(e2e.map(|x| x.p99), 1),
                fmt_opt(e2e.map(|x| x.p999), 1),
                fmt_opt(cost.and_then(|c| c.usd_per_1m_inputs), 2),
                fmt_opt(cost.and_then(|c| c.usd_per_1m_documents), 2),
                fmt_opt(cost.and_then(|c| c.usd_per_1k_requests), 4),
            ])
        })
        .collect()
}

/// What the reasoning table's times count from, under it.
pub(crate) const REASONING_NOTE: &str = "Times in ms from the scheduled send. The answer begins with the first output event that is not reasoning; reasoning tokens are the server's count where usage gives one, else counted from events.";

/// Header of a ramp's per-step table (HTML and Markdown).
pub(crate) const STEP_COLUMNS: &[&str] = &[
    "step",
    "level",
    "ok",
    "err",
    "req/s",
    "out tok/s",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "TPOT p50 ms",
    "TPOT p99 ms",
    "E2E p50 ms",
    "E2E p99 ms",
    "goodput",
];

/// The load of a ramp's step, from the point's ramp levels.
pub(crate) fn step_load(
    p: &PointResult,
    step: u32,
) -> Option<(infer_bench_judge::analysis::LoadKind, f64)> {
    use infer_bench_judge::analysis::LoadKind;
    use infer_bench_spec::Level;
    let level = p.config.load.ramp.as_ref()?.levels.get(step as usize)?;
    Some(match level {
        Level::Concurrency(c) => (LoadKind::Concurrency, f64::from(*c)),
        Level::Rate(r) => (LoadKind::Rate, r.as_per_second()),
    })
}

/// One row of a ramp's step table, as plain text.
pub(crate) fn step_cells(st: &infer_bench_results::StepResult) -> Vec<String> {
    let s = &st.stats;
    let ms = |m: &str, hi: bool| {
        s.latency_ms
            .get(m)
            .map(|x| fmt(if hi { x.p99 } else { x.p50 }, 1))
            .unwrap_or_else(|| "-".into())
    };
    vec![
        (st.step + 1).to_string(),
        st.level.clone(),
        s.requests.succeeded.to_string(),
        s.requests.failed.to_string(),
        fmt(s.request_throughput, 2),
        fmt(s.output_tokens_per_s, 0),
        ms("ttft", false),
        ms("ttft", true),
        ms("tpot", false),
        ms("tpot", true),
        ms("e2e", false),
        ms("e2e", true),
        format!("{}%", fmt(s.goodput_ratio * 100.0, 0)),
    ]
}

/// The rows of the analysis that are ramps with recorded steps.
pub(crate) fn ramps(a: &Analysis, sources: &[Source]) -> Vec<usize> {
    (0..a.points.len())
        .filter(|&i| !a.point(sources, i).steps.is_empty())
        .collect()
}
