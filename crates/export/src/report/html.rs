//! The report as one self-contained HTML page: an executive summary (what
//! was tested and on what, verdicts, capacity at SLO, the best
//! configuration), charts of throughput, goodput and latency against load
//! for every sweep with SLO thresholds drawn, the Pareto chart of per-user
//! against per-GPU output speed, latency percentile plots decoded from the
//! merged HDR histograms, GPU telemetry over time when the results carry
//! it, every point in a table, the environment fingerprint and the spec.
//!
//! Nothing is fetched: charts are inline SVG (`export::chart`), fonts are
//! the system's, there is no script. A print stylesheet lays it out for
//! paper. All text from results is escaped.

use std::fmt::Write as _;

use super::time_series;
use super::{
    POINT_COLUMNS, best_sentence, environments, fmt_sig, notes, plural, point_cells, servers,
    tested, verdicts,
};
use crate::chart::{self, Axis, Chart, Point, RefLine, Series, Stroke};
use crate::xml::escape;
use infer_bench_judge::analysis::{
    Analysis, Capacity, Knee, LoadKind, Source, Sweep, describe_capacity, describe_knee, expr_text,
    latency_ms, round_sig, slo_lines, threshold_value,
};
use infer_bench_results::metric::Metric;
use infer_bench_results::telemetry::GpuDataSource;

/// Most series in one latency-percentile or telemetry chart.
const MAX_CURVES: usize = 10;

pub(crate) const STYLE: &str = r#"
:root { --fg:#1b1f24; --muted:#57606a; --line:#d8dee4; --bg:#f6f8fa; --card:#ffffff;
  --pass:#1a7f37; --pass-bg:#dafbe1; --fail:#b3261e; --fail-bg:#ffebe9; --warn:#9a6700; --warn-bg:#fff8c5; }
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1400px; margin: 0 auto; padding: 24px 32px 48px; }
header h1 { font-size: 26px; margin: 0 0 4px; }
header p { margin: 0; color: var(--muted); }
nav { margin: 14px 0 0; display: flex; flex-wrap: wrap; gap: 6px 16px; font-size: 13px; }
nav a { color: #0969da; text-decoration: none; }
nav a:hover { text-decoration: underline; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 18px 24px 22px; margin: 18px 0; }
h2 { font-size: 19px; margin: 0 0 12px; }
h3 { font-size: 15px; margin: 18px 0 8px; }
p.lead { margin: 0 0 12px; color: var(--muted); }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 14px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 12px 16px; }
.card.wide { grid-column: 1 / -1; }
.card h3 { margin: 0 0 8px; font-size: 12px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); }
.card .big { font-size: 20px; font-weight: 600; margin: 0 0 4px; }
.card ul { margin: 0; padding-left: 18px; }
.card li { margin: 2px 0; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0; }
dl.kv dt { color: var(--muted); }
dl.kv dd { margin: 0; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(600px, 1fr)); gap: 16px; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 8px; break-inside: avoid; }
figure svg { width: 100%; height: auto; display: block; }
figure svg.radar { max-width: 620px; margin: 0 auto; }
figcaption { color: var(--muted); font-size: 12.5px; padding: 4px 6px 0; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 10px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; vertical-align: top; }
th { background: var(--bg); font-weight: 600; position: sticky; top: 0; }
th.l, td.l { text-align: left; }
td.wrap { white-space: normal; min-width: 16em; }
th { white-space: normal; min-width: 3.5em; }
td.slo { white-space: normal; min-width: 8em; max-width: 22em; text-align: left; }
.card table { font-size: 12.5px; }
.card th, .card td { padding: 3px 6px; }
.badge { display: inline-block; padding: 0 7px; border-radius: 10px; font-size: 12px; font-weight: 600; }
.pass { color: var(--pass); background: var(--pass-bg); }
.fail { color: var(--fail); background: var(--fail-bg); }
.warn { color: var(--warn); background: var(--warn-bg); }
.muted { color: var(--muted); }
ul.notes { margin: 8px 0 0; padding-left: 18px; font-size: 13px; }
pre.spec { max-height: 36em; overflow: auto; background: var(--bg); border: 1px solid var(--line); border-radius: 6px;
  padding: 12px 14px; font: 12.5px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
footer { color: var(--muted); font-size: 12px; text-align: center; margin-top: 24px; }
@page { size: A4; margin: 12mm; }
@media print {
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  body { background: #fff; font-size: 10.5px; }
  main { max-width: none; padding: 0; }
  nav { display: none; }
  section { border: none; padding: 0; margin: 0 0 14px; }
  .charts { grid-template-columns: 1fr 1fr; gap: 8px; }
  figure, .card, tr { break-inside: avoid; }
  h2, h3 { break-after: avoid; }
  th { position: static; }
  .table-wrap { overflow: visible; }
  table { font-size: 8.5px; width: 100%; }
  th, td { padding: 2px 4px; white-space: normal; }
  .badge { font-size: 8.5px; padding: 0 3px; }
  figcaption, p.lead, ul.notes { font-size: 9.5px; }
  pre.spec { max-height: none; overflow: visible; white-space: pre-wrap; }
}
"#;

/// The HTML report.
pub fn render(sources: &[Source]) -> String {
    let a = Analysis::of(sources);
    let mut h = String::with_capacity(256 * 1024);
    let names: Vec<&str> = sources.iter().map(|s| s.label.as_str()).collect();
    let title = format!("Benchmark report: {}", names.join(", "));
    let quality = super::quality::has_section(sources);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"infer-bench {}\">\n<title>{}</title>\n<style>{STYLE}{}</style>\n</head>\n<body>\n<main>\n",
        env!("CARGO_PKG_VERSION"),
        escape(&title),
        if quality { super::quality::STYLE } else { "" }
    );
    let v = verdicts(sources);
    let _ = write!(
        h,
        "<header><h1>{}</h1><p>{} point{} from {} results file{}",
        escape(&title),
        v.points,
        plural(v.points),
        sources.len(),
        plural(sources.len())
    );
    for s in sources {
        let _ = write!(
            h,
            " · {} started {}",
            escape(&s.label),
            escape(&s.results.started_at)
        );
    }
    h.push_str("</p>\n<nav><a href=\"#summary\">Summary</a>");
    let kinds = load_kinds(&a);
    for k in &kinds {
        let _ = write!(
            h,
            "<a href=\"#load-{}\">{} sweeps</a>",
            super::word(k),
            capitalize(&super::word(k))
        );
    }
    let ramps = super::ramps(&a, sources);
    if !ramps.is_empty() {
        h.push_str("<a href=\"#ramps\">Ramp steps</a>");
    }
    let searches = crate::capacity::html(sources);
    if !searches.is_empty() {
        h.push_str("<a href=\"#capacity-search\">Capacity searches</a>");
    }
    let reasoning = super::reasoning_rows(&a, sources);
    if !reasoning.is_empty() {
        h.push_str("<a href=\"#reasoning-answer\">Reasoning</a>");
    }
    if quality {
        h.push_str("<a href=\"#quality\">Quality</a>");
    }
    h.push_str("<a href=\"#pareto\">Pareto</a><a href=\"#latency\">Latency percentiles</a>");
    let tele = telemetry_charts(&a, sources);
    if !tele.is_empty() {
        h.push_str("<a href=\"#telemetry\">GPU telemetry</a>");
    }
    if super::reading::has_section(&a, sources) {
        h.push_str("<a href=\"#reading\">Reading the run</a>");
    }
    h.push_str("<a href=\"#points\">Points</a><a href=\"#environment\">Environment</a><a href=\"#spec\">Spec</a></nav></header>\n");

    summary(&mut h, &a, sources);
    for k in kinds {
        sweep_section(&mut h, &a, sources, k);
    }
    ramp_section(&mut h, &a, sources, &ramps);
    h.push_str(&searches);
    reasoning_section(&mut h, &reasoning);
    retrieval_section(&mut h, &super::retrieval_rows(&a, sources));
    if quality {
        super::quality::section(&mut h, sources, figure);
    }
    pareto_section(&mut h, &a, sources);
    latency_section(&mut h, &a, sources);
    if !tele.is_empty() {
        let modelled = (0..a.points.len()).any(|i| {
            a.point(sources, i)
                .telemetry
                .as_ref()
                .is_some_and(|t| t.gpu.source == Some(GpuDataSource::Sim))
        });
        let _ = write!(
            h,
            "<section id=\"telemetry\"><h2>GPU telemetry</h2><p class=\"lead\">Sampled during each point's measurement; time from the first sample.{}</p><div class=\"charts\">",
            if modelled {
                " The simulator's GPUs are modelled (its roofline and memory model), not measured."
            } else {
                ""
            }
        );
        for (c, caption) in &tele {
            figure(&mut h, c, caption);
        }
        h.push_str("</div></section>\n");
    }
    super::reading::section(&mut h, &a, sources);
    points_section(&mut h, &a, sources);
    environment_section(&mut h, sources);
    spec_section(&mut h, sources);
    let _ = write!(
        h,
        "<footer>Made by infer-bench {} · metric definitions version {} · self-contained: no scripts, no network</footer>\n</main>\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION"),
        sources
            .first()
            .map(|s| s.results.metrics_version)
            .unwrap_or(infer_bench_results::METRICS_VERSION)
    );
    h
}

/// Embeddings and rerank points, a row each; nothing without any.
fn retrieval_section(h: &mut String, rows: &[Vec<String>]) {
    if rows.is_empty() {
        return;
    }
    h.push_str("<section id=\"retrieval\"><h2>Embeddings and rerank</h2><div class=\"table-wrap\"><table class=\"steps\"><thead><tr><th class=\"l\">point</th>");
    for (k, c) in super::RETRIEVAL_COLUMNS.iter().enumerate() {
        let class = if k == 0 { " class=\"l\"" } else { "" };
        let _ = write!(h, "<th{class}>{}</th>", escape(c));
    }
    h.push_str("</tr></thead><tbody>");
    for row in rows {
        h.push_str("<tr>");
        for (k, c) in row.iter().enumerate() {
            let class = if k <= 1 { " class=\"l\"" } else { "" };
            let _ = write!(h, "<td{class}>{}</td>", escape(c));
        }
        h.push_str("</tr>");
    }
    let _ = writeln!(
        h,
        "</tbody></table></div><p class=\"lead\">{}</p></section>",
        escape(super::RETRIEVAL_NOTE)
    );
}

/// Reasoning against answer, a row per point that reasoned; nothing
/// where none did.
fn reasoning_section(h: &mut String, rows: &[Vec<String>]) {
    if rows.is_empty() {
        return;
    }
    h.push_str("<section id=\"reasoning-answer\"><h2>Reasoning and answer</h2><div class=\"table-wrap\"><table class=\"steps\"><thead><tr><th class=\"l\">point</th>");
    for c in super::REASONING_COLUMNS {
        let class = if *c == "counted from" {
            " class=\"l\""
        } else {
            ""
        };
        let _ = write!(h, "<th{class}>{}</th>", escape(c));
    }
    h.push_str("</tr></thead><tbody>");
    for row in rows {
        h.push_str("<tr>");
        for (k, c) in row.iter().enumerate() {
            let class = if k == 0 || k == 3 { " class=\"l\"" } else { "" };
            let _ = write!(h, "<td{class}>{}</td>", escape(c));
        }
        h.push_str("</tr>");
    }
    let _ = writeln!(
        h,
        "</tbody></table></div><p class=\"lead\">{}</p></section>",
        escape(super::REASONING_NOTE)
    );
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn load_kinds(a: &Analysis) -> Vec<LoadKind> {
    let mut k: Vec<LoadKind> = a.sweeps.iter().map(|s| s.load_kind).collect();
    k.sort();
    k.dedup();
    k
}

fn figure(h: &mut String, c: &Chart, caption: &str) {
    // The page's length so far is a unique, deterministic id.
    let mut c = c.clone();
    c.id = format!("chart{}", h.len());
    h.push_str("<figure>");
    h.push_str(&chart::render(&c));
    if !caption.is_empty() {
        let _ = write!(h, "<figcaption>{}</figcaption>", escape(caption));
    }
    h.push_str("</figure>\n");
}

fn badge(text: &str) -> String {
    let class = if text == "pass" || text == "yes" {
        "pass"
    } else if text.starts_with("FAIL") || text == "FAILED" {
        "fail"
    } else if text == "INVALID" {
        "warn"
    } else {
        return escape(text);
    };
    format!("<span class=\"badge {class}\">{}</span>", escape(text))
}

/// The executive summary: a card each for what was tested, the verdict
/// and capacities, the best configuration and the environment, then the
/// reading's cards.
fn summary(h: &mut String, a: &Analysis, sources: &[Source]) {
    h.push_str("<section id=\"summary\"><h2>Executive summary</h2><div class=\"cards\">");
    tested_card(h, sources);
    verdict_card(h, a, sources);
    best_card(h, a, sources);
    environment_card(h, sources);
    super::reading::summary_cards(h, a, sources);
    h.push_str("</div></section>\n");
}

/// What was tested: the specs' descriptions, targets, models, workloads,
/// loads and SLOs.
fn tested_card(h: &mut String, sources: &[Source]) {
    h.push_str("<div class=\"card\"><h3>What was tested</h3>");
    for s in sources {
        if let Some(d) = &s.description {
            let who = if sources.len() > 1 {
                format!("<span class=\"muted\">{}:</span> ", escape(&s.label))
            } else {
                String::new()
            };
            let _ = write!(h, "<p class=\"big\">{who}{}</p>", escape(d));
        }
    }
    h.push_str("<dl class=\"kv\">");
    for (k, v) in tested(sources) {
        let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(&v));
    }
    h.push_str("</dl></div>");
}

/// How many points pass their SLOs, and each sweep's capacity at SLO.
fn verdict_card(h: &mut String, a: &Analysis, sources: &[Source]) {
    let v = verdicts(sources);
    h.push_str("<div class=\"card\"><h3>Verdict</h3>");
    let class = if v.slo_fail > 0 || v.failed > 0 {
        "fail"
    } else if v.slo_pass > 0 {
        "pass"
    } else {
        "muted"
    };
    let _ = write!(
        h,
        "<p class=\"big\"><span class=\"badge {class}\" id=\"verdict-badge\">{}</span></p><p>{}</p>",
        escape(&v.badge()),
        escape(&v.sentence())
    );
    h.push_str("<h3>Capacity at SLO</h3><ul>");
    if a.sweeps.is_empty() {
        h.push_str("<li class=\"muted\">no load sweeps</li>");
    }
    for s in &a.sweeps {
        let _ = write!(
            h,
            "<li><b>{}</b>: {}{}</li>",
            escape(&s.name),
            escape(&describe_capacity(&s.capacity, s.load_kind)),
            if s.from_invalid {
                " <span class=\"badge warn\">drawn from INVALID points</span>"
            } else {
                ""
            }
        );
    }
    h.push_str("</ul></div>");
}

/// The best configuration with its headline numbers.
fn best_card(h: &mut String, a: &Analysis, sources: &[Source]) {
    h.push_str("<div class=\"card\"><h3>Best configuration</h3>");
    match &a.best {
        Some(b) => {
            let _ = write!(
                h,
                "<p class=\"big\">{}</p><p>{} {}.</p>",
                escape(&b.label),
                escape(&fmt_sig(b.value)),
                escape(b.basis.describe())
            );
            if b.from_invalid {
                h.push_str("<p><span class=\"badge warn\">drawn from INVALID points</span> every measured point is INVALID, so this is the best of untrusted numbers (see the notes).</p>");
            }
            if let Some(i) = a
                .points
                .iter()
                .position(|p| p.source == b.source && p.id == b.point)
            {
                let r = &a.points[i];
                let p = a.point(sources, i);
                let ms = |m: Metric, q: f64| super::fmt_opt(latency_ms(p, m, q), 1);
                let _ = write!(
                    h,
                    "<dl class=\"kv\"><dt>output</dt><dd>{} tok/s ({} per GPU)</dd><dt>per user</dt><dd>{} tok/s</dd><dt>goodput</dt><dd>{} req/s</dd><dt>TTFT p50 / p99</dt><dd>{} / {} ms</dd><dt>TPOT p50 / p99</dt><dd>{} / {} ms</dd><dt>cost</dt><dd>{}</dd></dl>",
                    super::fmt(r.output_tokens_per_s, 0),
                    super::fmt(r.output_tokens_per_s_per_gpu, 0),
                    super::fmt_opt(r.output_tokens_per_s_per_user, 1),
                    super::fmt(r.goodput_requests_per_s, 2),
                    ms(Metric::Ttft, 50.0),
                    ms(Metric::Ttft, 99.0),
                    ms(Metric::Tpot, 50.0),
                    ms(Metric::Tpot, 99.0),
                    r.usd_per_1m_output_tokens
                        .map(|c| format!("${c:.3} per 1M output tokens"))
                        .unwrap_or_else(|| "no [cost] in the spec".into())
                );
            }
        }
        None => {
            let _ = write!(h, "<p>{}</p>", escape(&best_sentence(a)));
        }
    }
    h.push_str("</div>");
}

/// On what it ran: the environments' identity and the servers.
fn environment_card(h: &mut String, sources: &[Source]) {
    h.push_str("<div class=\"card\"><h3>On what</h3><dl class=\"kv\">");
    for (labels, env) in environments(sources) {
        if sources.len() > 1 {
            let _ = write!(h, "<dt>runs</dt><dd>{}</dd>", escape(&labels.join(", ")));
        }
        for (k, v) in &env.identity {
            let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(v));
        }
    }
    for (s, n) in servers(sources) {
        let _ = write!(
            h,
            "<dt>server</dt><dd>{} <span class=\"muted\">({n} point{})</span></dd>",
            escape(&s),
            plural(n)
        );
    }
    h.push_str("</dl></div>");
}

/// Series colour of each sweep: its index among all sweeps.
fn sweep_color(a: &Analysis, s: &Sweep) -> usize {
    a.sweeps
        .iter()
        .position(|x| std::ptr::eq(x, s))
        .unwrap_or(0)
}

fn tip(a: &Analysis, row: usize, what: &str) -> String {
    let r = &a.points[row];
    let slo = match r.slo_pass {
        Some(true) => ", SLOs pass",
        Some(false) => ", SLO FAIL",
        None => "",
    };
    format!("{}: {what}{slo}", r.label)
}

/// A point's marker as validity and SLOs say: open when it fails an SLO,
/// grey and dashed with the reasons on hover when it is INVALID.
fn marked(a: &Analysis, sources: &[Source], row: usize, mut p: Point) -> Point {
    let r = &a.points[row];
    p.hollow = r.slo_pass == Some(false);
    if r.measured && !r.valid {
        let why = &a.point(sources, row).invalid_reasons;
        p.invalid = Some(if why.is_empty() {
            "no reason recorded".into()
        } else {
            infer_bench_results::reason::join(why, "; ")
        });
    }
    p
}

/// What the parts of one load kind's section draw from.
struct SweepView<'a> {
    a: &'a Analysis,
    sources: &'a [Source],
    kind: LoadKind,
    /// The sweeps of this load kind.
    sweeps: Vec<&'a Sweep>,
    /// The sources these charts draw: their SLOs are the ones to show.
    here: Vec<&'a Source>,
    /// The load axis every chart of the section shares.
    xaxis: Axis,
}

/// A section per load kind: the sweeps' capacity and knee table, then
/// throughput, goodput and latency against load.
fn sweep_section(h: &mut String, a: &Analysis, sources: &[Source], kind: LoadKind) {
    let sweeps: Vec<&Sweep> = a.sweeps.iter().filter(|s| s.load_kind == kind).collect();
    let here: Vec<&Source> = sources
        .iter()
        .filter(|src| sweeps.iter().any(|s| s.source == src.label))
        .collect();
    let loads: Vec<f64> = sweeps
        .iter()
        .flat_map(|s| s.loads.iter().copied())
        .collect();
    let xaxis = Axis::auto(kind.axis_label(), loads.iter().copied(), 8.0);
    let v = SweepView {
        a,
        sources,
        kind,
        sweeps,
        here,
        xaxis,
    };
    let _ = write!(
        h,
        "<section id=\"load-{}\"><h2>Throughput and latency against {}</h2><p class=\"lead\">One line per sweep (points that differ only in {}). Open markers fail an SLO; grey dashed markers are INVALID (hover for why) and take no part in capacity, knee or best point. Hover a marker for its numbers.</p>",
        super::word(&kind),
        escape(&super::word(&kind)),
        escape(&super::word(&kind))
    );
    capacity_table(h, &v);
    h.push_str("<div class=\"charts\" style=\"margin-top:16px\">");
    throughput_figure(h, &v);
    goodput_figure(h, &v);
    for (metric, title) in [
        (Metric::Ttft, "Time to first token"),
        (Metric::Tpot, "Time per output token"),
        (Metric::E2e, "End-to-end latency"),
    ] {
        latency_figure(h, &v, metric, title);
    }
    h.push_str("</div></section>\n");
}

/// The table of a load kind's sweeps: loads, capacity at SLO and the
/// points that bracket it, knee, best point.
fn capacity_table(h: &mut String, v: &SweepView<'_>) {
    let kind = v.kind;
    h.push_str("<div class=\"table-wrap\"><table><thead><tr><th class=\"l\">sweep</th><th class=\"l\">loads</th><th class=\"l\">capacity at SLO</th><th class=\"l\">bracketed by</th><th class=\"l\">knee</th><th class=\"l\">best point (good req per GPU-$)</th></tr></thead><tbody>");
    for s in &v.sweeps {
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l wrap\">{}</td><td class=\"l wrap\">{}</td><td class=\"l wrap\">{}</td><td class=\"l\">{}</td></tr>",
            escape(&s.name),
            escape(
                &s.loads
                    .iter()
                    .map(|l| infer_bench_spec::fmt_number(*l))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            escape(&super::capacity_text(s)),
            bracket_cell(&s.capacity, kind),
            escape(&describe_knee(&s.knee, kind)),
            s.best
                .as_ref()
                .map(|b| format!("{} ({})", escape(&b.label), escape(&fmt_sig(b.value))))
                .unwrap_or_else(|| "-".into())
        );
    }
    h.push_str("</tbody></table></div>");
}

/// The "bracketed by" cell of a capacity (HTML): the loads on either side
/// of it, their point IDs on hover.
fn bracket_cell(c: &Capacity, kind: LoadKind) -> String {
    match c {
        Capacity::Between {
            last_pass,
            first_fail,
            note,
            ..
        } => {
            let mut t = format!(
                "<span title=\"{}\">{} passes</span>, <span title=\"{}\">{} fails</span>",
                escape(&last_pass.point),
                escape(&kind.show(last_pass.load)),
                escape(&first_fail.point),
                escape(&kind.show(first_fail.load))
            );
            if let Some(n) = note {
                let _ = write!(t, "<br><span class=\"muted\">{}</span>", escape(n));
            }
            t
        }
        Capacity::AllPass { highest, .. } => format!(
            "<span title=\"{}\">highest tested: {}</span>",
            escape(&highest.point),
            escape(&kind.show(highest.load))
        ),
        Capacity::NonePass { lowest, .. } => format!(
            "<span title=\"{}\">lowest tested: {}</span>",
            escape(&lowest.point),
            escape(&kind.show(lowest.load))
        ),
        Capacity::NoSlo => "-".into(),
    }
}

/// Output throughput against load, with each sweep's knee and capacity.
fn throughput_figure(h: &mut String, v: &SweepView<'_>) {
    let (a, kind) = (v.a, v.kind);
    let mut c = Chart::new(
        "Output throughput",
        v.xaxis.clone(),
        Axis::linear("output tokens/s"),
    );
    for s in &v.sweeps {
        let col = sweep_color(a, s);
        let knee_id = match &s.knee {
            Knee::At { point, .. } => Some(point.as_str()),
            _ => None,
        };
        let pts = s
            .rows
            .iter()
            .map(|&i| {
                let r = &a.points[i];
                let mut p = Point::new(
                    r.load.unwrap_or(f64::NAN),
                    measured(r, r.output_tokens_per_s),
                )
                .tip(tip(
                    a,
                    i,
                    &format!("{:.0} output tok/s", r.output_tokens_per_s),
                ));
                p = marked(a, v.sources, i, p);
                if knee_id == Some(r.id.as_str()) {
                    p.label = Some("knee".into());
                }
                p
            })
            .collect();
        c.series.push(Series::line(&s.name, col, pts));
        if let Capacity::Between { capacity, .. } = &s.capacity {
            c.lines.push(RefLine {
                value: *capacity,
                label: format!(
                    "capacity ≈ {}{}",
                    kind.show(round_sig(*capacity, 3)),
                    if s.from_invalid {
                        " (from INVALID points)"
                    } else {
                        ""
                    }
                ),
                tip: Some(format!(
                    "{}: {}",
                    s.name,
                    describe_capacity(&s.capacity, kind)
                )),
                vertical: true,
                color: Some(col),
            });
        }
    }
    figure(
        h,
        &c,
        "Dotted verticals: capacity at SLO of each sweep (interpolated). \"knee\": past it, more load buys less than half the initial throughput per unit.",
    );
}

/// Goodput against load, with all completed requests/s dotted.
fn goodput_figure(h: &mut String, v: &SweepView<'_>) {
    let (a, sources) = (v.a, v.sources);
    let mut c = Chart::new("Goodput", v.xaxis.clone(), Axis::linear("good requests/s"));
    for s in &v.sweeps {
        let col = sweep_color(a, s);
        let pts = s
            .rows
            .iter()
            .map(|&i| {
                let r = &a.points[i];
                let p = a.point(sources, i);
                let pt = Point::new(
                    r.load.unwrap_or(f64::NAN),
                    measured(r, r.goodput_requests_per_s),
                )
                .tip(tip(
                    a,
                    i,
                    &format!(
                        "{:.2} good req/s of {:.2} ({:.0}%)",
                        r.goodput_requests_per_s,
                        p.merged.request_throughput,
                        p.merged.goodput_ratio * 100.0
                    ),
                ));
                marked(a, sources, i, pt)
            })
            .collect();
        c.series.push(Series::line(&s.name, col, pts));
        let all = s
            .rows
            .iter()
            .map(|&i| {
                let r = &a.points[i];
                let p = a.point(sources, i);
                Point::new(
                    r.load.unwrap_or(f64::NAN),
                    measured(r, p.merged.request_throughput),
                )
            })
            .collect();
        c.series.push(Series {
            name: format!("{} (all requests)", s.name),
            color: col,
            stroke: Stroke::Dotted,
            markers: false,
            points: all,
            in_legend: v.sweeps.len() == 1,
            shade: 1.0,
        });
    }
    figure(
        h,
        &c,
        "Requests/s that succeeded within every [goodput] bound; dotted: all completed requests/s.",
    );
}

/// One latency metric against load: p50, p99 and every percentile an SLO
/// of the `here` sources sets, with the SLO thresholds.
fn latency_figure(h: &mut String, v: &SweepView<'_>, metric: Metric, title: &str) {
    let (a, sources) = (v.a, v.sources);
    let slos = slo_lines(v.here.iter().copied(), metric.name());
    let mut stats: Vec<f64> = vec![50.0, 99.0];
    for (e, _) in &slos {
        if let Some(infer_bench_spec::Stat::Percentile(p)) = e.stat {
            if !stats.contains(&p) {
                stats.push(p);
            }
        }
    }
    let label = format!("{} (ms)", metric.name().to_uppercase());
    // Log when the values and thresholds span a factor of 30 or more.
    let mut values: Vec<f64> = slos
        .iter()
        .map(|(e, _)| threshold_value(&e.threshold))
        .collect();
    for s in &v.sweeps {
        for &i in &s.rows {
            if a.points[i].measured {
                for &q in &stats {
                    values.extend(latency_ms(a.point(sources, i), metric, q));
                }
            }
        }
    }
    let mut c = Chart::new(title, v.xaxis.clone(), Axis::auto(label, values, 30.0));
    for s in &v.sweeps {
        let col = sweep_color(a, s);
        for &q in &stats {
            let pts = s
                .rows
                .iter()
                .map(|&i| {
                    let r = &a.points[i];
                    let v = latency_ms(a.point(sources, i), metric, q).unwrap_or(f64::NAN);
                    let p = Point::new(r.load.unwrap_or(f64::NAN), measured(r, v)).tip(tip(
                        a,
                        i,
                        &format!("p{} {:.1} ms", infer_bench_spec::fmt_number(q), v),
                    ));
                    marked(a, sources, i, p)
                })
                .collect();
            c.series.push(Series {
                name: format!("{} p{}", s.name, infer_bench_spec::fmt_number(q)),
                color: col,
                stroke: match q {
                    50.0 => Stroke::Solid,
                    99.0 => Stroke::Dashed,
                    _ => Stroke::Dotted,
                },
                markers: true,
                points: pts,
                in_legend: true,
                shade: if q == 50.0 { 1.0 } else { 0.6 },
            });
        }
    }
    c.lines.extend(slo_refs(&slos, v.here.len(), metric));
    figure(
        h,
        &c,
        "Solid: p50; dashed and lighter: p99; dotted: a percentile an SLO is set on. Red dash-dot lines: SLO thresholds. A log axis where the values span a factor of 30 or more.",
    );
}

/// Each ramp as the sweep it is: a row per step, and throughput and
/// latencies against the step's load.
fn ramp_section(h: &mut String, a: &Analysis, sources: &[Source], ramps: &[usize]) {
    if ramps.is_empty() {
        return;
    }
    h.push_str("<section id=\"ramps\"><h2>Ramp steps</h2><p class=\"lead\">A ramp climbs through its load levels within one point; each step is measured on its own, so a ramp reads as a sweep. SLOs judge the point as a whole, not each step; the thresholds are drawn for reference.</p>");
    for &i in ramps {
        let r = &a.points[i];
        let p = a.point(sources, i);
        let _ = write!(
            h,
            "<h3>{}</h3><div class=\"table-wrap\"><table class=\"steps\"><thead><tr>",
            escape(&r.label)
        );
        for (k, c) in super::STEP_COLUMNS.iter().enumerate() {
            let class = if k < 2 { " class=\"l\"" } else { "" };
            let _ = write!(h, "<th{class}>{}</th>", escape(c));
        }
        h.push_str("</tr></thead><tbody>");
        for st in &p.steps {
            h.push_str("<tr class=\"step\">");
            for (k, c) in super::step_cells(st).iter().enumerate() {
                let class = if k < 2 { " class=\"l\"" } else { "" };
                let _ = write!(h, "<td{class}>{}</td>", escape(c));
            }
            h.push_str("</tr>");
        }
        h.push_str("</tbody></table></div>");

        let steps: Vec<(f64, &infer_bench_results::StepResult)> = p
            .steps
            .iter()
            .filter_map(|st| Some((super::step_load(p, st.step)?.1, st)))
            .collect();
        let Some(kind) = p
            .steps
            .first()
            .and_then(|st| super::step_load(p, st.step))
            .map(|l| l.0)
        else {
            continue;
        };
        let xaxis = Axis::auto(kind.axis_label(), steps.iter().map(|(l, _)| *l), 8.0);
        let invalid = (r.measured && !r.valid)
            .then(|| infer_bench_results::reason::join(&p.invalid_reasons, "; "));
        let step_point = |load: f64, y: f64, st: &infer_bench_results::StepResult, what: String| {
            let mut pt = Point::new(load, y).tip(format!(
                "{} step {} ({}): {what}",
                r.label,
                st.step + 1,
                st.level
            ));
            pt.invalid = invalid.clone();
            pt
        };
        h.push_str("<div class=\"charts\" style=\"margin-top:12px\">");
        let mut c = Chart::new(
            format!("Output throughput by step: {}", r.label),
            xaxis.clone(),
            Axis::linear("output tokens/s"),
        );
        c.series.push(Series::line(
            "output tokens/s",
            0,
            steps
                .iter()
                .map(|(l, st)| {
                    let y = st.stats.output_tokens_per_s;
                    step_point(*l, y, st, format!("{y:.0} output tok/s"))
                })
                .collect(),
        ));
        figure(h, &c, "One marker per ramp step, at the step's load.");
        let here: Vec<&Source> = vec![&sources[r.source_index]];
        for (metric, title) in [
            (Metric::Ttft, "Time to first token by step"),
            (Metric::Tpot, "Time per output token by step"),
        ] {
            let slos = slo_lines(here.iter().copied(), metric.name());
            let mut values: Vec<f64> = slos
                .iter()
                .map(|(e, _)| threshold_value(&e.threshold))
                .collect();
            let mut series = Vec::new();
            for (q, stroke, shade) in [(50.0, Stroke::Solid, 1.0), (99.0, Stroke::Dashed, 0.6)] {
                let pts: Vec<Point> = steps
                    .iter()
                    .map(|(l, st)| {
                        let y = st
                            .stats
                            .latency_ms
                            .get(metric.name())
                            .map(|x| if q == 50.0 { x.p50 } else { x.p99 })
                            .unwrap_or(f64::NAN);
                        values.push(y);
                        step_point(*l, y, st, format!("p{q} {y:.1} ms"))
                    })
                    .collect();
                series.push(Series {
                    name: format!("p{q}"),
                    color: 0,
                    stroke,
                    markers: true,
                    points: pts,
                    in_legend: true,
                    shade,
                });
            }
            let label = format!("{} (ms)", metric.name().to_uppercase());
            let mut c = Chart::new(
                format!("{title}: {}", r.label),
                xaxis.clone(),
                Axis::auto(label, values, 30.0),
            );
            c.series = series;
            c.lines.extend(slo_refs(&slos, 1, metric));
            figure(
                h,
                &c,
                "Solid: p50; dashed and lighter: p99. Red dash-dot lines: the point's SLO thresholds.",
            );
        }
        h.push_str("</div>");
    }
    h.push_str("</section>\n");
}

/// NaN for points that were not measured (their zeros are not data).
fn measured(r: &infer_bench_judge::analysis::PointRow, v: f64) -> f64 {
    if r.measured { v } else { f64::NAN }
}

fn pareto_section(h: &mut String, a: &Analysis, sources: &[Source]) {
    h.push_str("<section id=\"pareto\"><h2>Interactivity against efficiency</h2><p class=\"lead\">Each point: how fast one user's tokens arrive (1000 / TPOT p50) against how many output tokens each GPU produces. Up and to the right is better; the line joins the Pareto frontier, the points no other point beats on both. Open markers fail an SLO; grey dashed ones are INVALID. A ramp is one point: all its steps together.</p><div class=\"charts\">");
    let xs: Vec<f64> = a
        .points
        .iter()
        .filter_map(|p| p.output_tokens_per_s_per_user)
        .collect();
    let mut c = Chart::new(
        "Output tokens/s per GPU against per user",
        Axis::auto("output tokens/s per user", xs, 20.0),
        Axis::linear("output tokens/s per GPU"),
    );
    let mut groups: Vec<(String, usize, Vec<usize>)> = a
        .sweeps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.clone(), i, s.rows.clone()))
        .collect();
    // A ramp is a sweep within one point: its own group, named so.
    let mut next = a.sweeps.len();
    let mut loose: Vec<usize> = Vec::new();
    for i in (0..a.points.len()).filter(|&i| a.points[i].sweep.is_none()) {
        if a.point(sources, i).steps.is_empty() {
            loose.push(i);
        } else {
            groups.push((format!("ramp {}", a.points[i].label), next, vec![i]));
            next += 1;
        }
    }
    if !loose.is_empty() {
        groups.push(("other points".into(), next, loose));
    }
    let xy = |i: usize| {
        let r = &a.points[i];
        (
            r.output_tokens_per_s_per_user.unwrap_or(f64::NAN),
            measured(r, r.output_tokens_per_s_per_gpu),
        )
    };
    for (name, col, rows) in groups {
        let pts = rows
            .iter()
            .map(|&i| {
                let r = &a.points[i];
                let (x, y) = xy(i);
                let mut p = Point::new(x, y).tip(tip(
                    a,
                    i,
                    &format!("{x:.1} tok/s per user, {y:.0} tok/s per GPU"),
                ));
                p = marked(a, sources, i, p);
                if r.pareto {
                    p.label = match (r.load_kind, r.load) {
                        (Some(k), Some(l)) => Some(k.show(l)),
                        _ => Some("ramp".into()),
                    };
                }
                p
            })
            .collect();
        c.series.push(Series {
            name,
            color: col,
            stroke: Stroke::None,
            markers: true,
            points: pts,
            in_legend: true,
            shade: 1.0,
        });
    }
    let mut frontier: Vec<usize> = (0..a.points.len())
        .filter(|&i| a.points[i].pareto)
        .collect();
    frontier.sort_by(|&p, &q| xy(p).0.total_cmp(&xy(q).0));
    c.series.insert(
        0,
        Series {
            name: "Pareto frontier".into(),
            color: chart::NEUTRAL,
            stroke: Stroke::Solid,
            markers: false,
            points: frontier
                .iter()
                .map(|&i| {
                    let (x, y) = xy(i);
                    Point::new(x, y)
                })
                .collect(),
            in_legend: true,
            shade: 1.0,
        },
    );
    figure(
        h,
        &c,
        "GPUs per point: [cost] gpus of the spec, else the simulator's gpus, else 1. Labels: the load of each frontier point.",
    );
    h.push_str("<div><h3>The frontier</h3><p class=\"lead\">From the most interactive to the most efficient: each step right on the chart trades per-user speed for GPU throughput.</p><div class=\"table-wrap\"><table><thead><tr><th class=\"l\">point</th><th>tok/s/user</th><th>tok/s/GPU</th><th>goodput req/s</th><th>$/1M out</th><th class=\"l\">SLO</th></tr></thead><tbody>");
    for &i in frontier.iter().rev() {
        let r = &a.points[i];
        let slo = match r.slo_pass {
            Some(true) => badge("pass"),
            Some(false) => badge("FAIL"),
            None => "-".into(),
        };
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{slo}</td></tr>",
            escape(&r.label),
            super::fmt_opt(r.output_tokens_per_s_per_user, 1),
            super::fmt(r.output_tokens_per_s_per_gpu, 0),
            super::fmt(r.goodput_requests_per_s, 2),
            super::fmt_opt(r.usd_per_1m_output_tokens, 3)
        );
    }
    if frontier.is_empty() {
        h.push_str("<tr><td class=\"l muted\" colspan=\"6\">no measured point</td></tr>");
    }
    h.push_str("</tbody></table></div></div></div></section>\n");
}

/// Threshold lines of SLOs; one not set by all `of` sources the chart
/// draws says whose it is.
fn slo_refs(
    slos: &[(infer_bench_spec::SloExpr, Vec<String>)],
    of: usize,
    metric: Metric,
) -> Vec<RefLine> {
    slos.iter()
        .map(|(e, labels)| {
            let whose = if labels.len() < of {
                format!(" ({})", labels.join(", "))
            } else {
                String::new()
            };
            RefLine {
                value: threshold_value(&e.threshold),
                label: format!("SLO {} {}{whose}", metric.name(), expr_text(&e.to_string())),
                tip: None,
                vertical: false,
                color: None,
            }
        })
        .collect()
}

/// Up to `MAX_CURVES` points to draw percentile curves for: the best, then
/// the Pareto frontier, then the rest in order.
fn curve_points(a: &Analysis) -> Vec<usize> {
    let mut pick: Vec<usize> = Vec::new();
    let add = |i: usize, pick: &mut Vec<usize>| {
        if pick.len() < MAX_CURVES && !pick.contains(&i) && a.points[i].measured {
            pick.push(i);
        }
    };
    if let Some(b) = &a.best {
        if let Some(i) = a
            .points
            .iter()
            .position(|p| p.source == b.source && p.id == b.point)
        {
            add(i, &mut pick);
        }
    }
    for i in 0..a.points.len() {
        if a.points[i].pareto {
            add(i, &mut pick);
        }
    }
    for i in 0..a.points.len() {
        add(i, &mut pick);
    }
    pick.sort();
    pick
}

fn latency_section(h: &mut String, a: &Analysis, sources: &[Source]) {
    let pick = curve_points(a);
    let here: Vec<&Source> = sources
        .iter()
        .enumerate()
        .filter(|(k, _)| pick.iter().any(|&i| a.points[i].source_index == *k))
        .map(|(_, s)| s)
        .collect();
    let measured_points = a.points.iter().filter(|p| p.measured).count();
    let _ = write!(
        h,
        "<section id=\"latency\"><h2>Latency percentiles</h2><p class=\"lead\">The whole distribution of each point, decoded from its merged HDR histogram. The percentile axis stretches the tail: 90%, 99% and 99.9% are evenly spaced. Each curve stops where the point has too few requests for a finer percentile.{}</p><div class=\"charts\">",
        if pick.len() < measured_points {
            format!(
                " Showing {} of {measured_points} points: the best configuration and the Pareto frontier first.",
                pick.len()
            )
        } else {
            String::new()
        }
    );
    for (metric, title) in [
        (Metric::Ttft, "TTFT distribution"),
        (Metric::Tpot, "TPOT distribution"),
        (Metric::Itl, "Inter-token latency distribution"),
        (Metric::E2e, "End-to-end latency distribution"),
    ] {
        let mut series = Vec::new();
        // Log scale when the tail dwarfs the body; the bottom 10% of the
        // distribution then falls off the chart rather than squash it.
        let (mut body_lo, mut top) = (f64::INFINITY, 0.0f64);
        for (k, &i) in pick.iter().enumerate() {
            let p = a.point(sources, i);
            let Some(hist) = p
                .histograms
                .get(metric.name())
                .and_then(|e| infer_bench_results::hist::decode(e).ok())
            else {
                continue;
            };
            let pts = percentile_curve(&hist, 1000.0);
            for &(p, y) in &pts {
                top = top.max(y);
                if p >= 10.0 && y > 0.0 {
                    body_lo = body_lo.min(y);
                }
            }
            series.push(Series {
                name: a.points[i].label.clone(),
                color: k,
                stroke: Stroke::Solid,
                markers: false,
                points: pts.into_iter().map(|(x, y)| Point::new(x, y)).collect(),
                in_legend: true,
                shade: 1.0,
            });
        }
        if series.is_empty() {
            continue;
        }
        let label = format!("{} (ms)", metric.name().to_uppercase());
        let refs = slo_refs(
            &slo_lines(here.iter().copied(), metric.name()),
            here.len(),
            metric,
        );
        let y = if body_lo.is_finite() && top / body_lo >= 30.0 {
            // The SLO lines stay in view.
            let (mut lo, mut hi) = (body_lo, top);
            for r in refs.iter().filter(|r| r.value > 0.0) {
                lo = lo.min(r.value);
                hi = hi.max(r.value);
            }
            let mut a = Axis::log(label);
            a.range = Some((lo, hi));
            a
        } else {
            Axis::linear(label)
        };
        let mut c = Chart::new(title, Axis::nines("percentile"), y);
        c.series = series;
        c.lines.extend(refs);
        figure(h, &c, "");
    }
    h.push_str("</div></section>\n");
}

/// (percentile, value / scale) along the nines axis, up to the finest
/// percentile the sample count supports.
pub fn percentile_curve(h: &infer_bench_results::hist::Hist, scale: f64) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    // With n samples, percentiles finer than 1 - 1/n repeat the maximum.
    let top = (h.len() as f64).log10().clamp(1.0, 5.0);
    let steps = (top / 0.05).ceil() as usize;
    (0..=steps)
        .map(|k| {
            let t = (k as f64 * 0.05).min(top);
            let p = 100.0 * (1.0 - 10f64.powf(-t));
            (p, h.value_at_quantile(p / 100.0) as f64 / scale)
        })
        .collect()
}

fn telemetry_charts(a: &Analysis, sources: &[Source]) -> Vec<(Chart, String)> {
    // Through JSON, whatever type results give telemetry: the search for
    // time series does not depend on one layout.
    let points: Vec<(String, serde_json::Value)> = (0..a.points.len())
        .filter_map(|i| {
            let t = serde_json::to_value(&a.point(sources, i).telemetry).ok()?;
            (!t.is_null()).then(|| (a.points[i].label.clone(), t))
        })
        .collect();
    telemetry_charts_of(&points)
}

/// Charts of utilization, memory and power over time, from each point's
/// label and telemetry.
fn telemetry_charts_of(points: &[(String, serde_json::Value)]) -> Vec<(Chart, String)> {
    let mut by_kind: Vec<(time_series::Kind, Vec<Series>)> = time_series::Kind::ALL
        .iter()
        .map(|k| (*k, Vec::new()))
        .collect();
    let mut left_out = 0usize;
    for (label, t) in points {
        for ts in time_series::series(t) {
            let slot = by_kind
                .iter_mut()
                .find(|(k, _)| *k == ts.kind)
                .expect("every kind has a slot");
            if slot.1.len() >= MAX_CURVES {
                left_out += 1;
                continue;
            }
            let n = slot.1.len();
            slot.1.push(Series {
                name: format!("{label} {}", ts.name),
                color: n,
                stroke: Stroke::Solid,
                markers: false,
                points: ts.points.iter().map(|&(x, y)| Point::new(x, y)).collect(),
                in_legend: true,
                shade: 1.0,
            });
        }
    }
    by_kind
        .into_iter()
        .filter(|(_, s)| !s.is_empty())
        .map(|(k, series)| {
            let mut c = Chart::new(k.title(), Axis::linear("time (s)"), Axis::linear(k.axis()));
            c.series = series;
            let caption = if left_out > 0 {
                format!("{left_out} more series not drawn (at most {MAX_CURVES} per chart).")
            } else {
                String::new()
            };
            (c, caption)
        })
        .collect()
}

fn points_section(h: &mut String, a: &Analysis, sources: &[Source]) {
    h.push_str("<section id=\"points\"><h2>Every point</h2><p class=\"lead\">Latencies in ms. Goodput as a share of requests. tok/s/user = 1000 / TPOT p50; tok/s/GPU = output tok/s / GPUs.</p><div class=\"table-wrap\"><table><thead><tr>");
    for (i, c) in POINT_COLUMNS.iter().enumerate() {
        let class = if i < 2 || i + 2 >= POINT_COLUMNS.len() {
            " class=\"l\""
        } else {
            ""
        };
        let _ = write!(h, "<th{class}>{}</th>", escape(c));
    }
    h.push_str("</tr></thead><tbody>");
    for i in 0..a.points.len() {
        let cells = point_cells(a, sources, i);
        h.push_str("<tr>");
        let n = cells.len();
        for (k, c) in cells.iter().enumerate() {
            if k + 2 == n {
                let _ = write!(h, "<td class=\"slo\">{}</td>", badge(c));
            } else if k + 1 == n {
                let _ = write!(h, "<td class=\"l\">{}</td>", badge(c));
            } else if k < 2 {
                let _ = write!(h, "<td class=\"l\">{}</td>", escape(c));
            } else {
                let _ = write!(h, "<td>{}</td>", escape(c));
            }
        }
        h.push_str("</tr>");
    }
    h.push_str("</tbody></table></div>");
    let notes = notes(a, sources);
    if !notes.is_empty() {
        h.push_str("<h3>Notes</h3><ul class=\"notes\">");
        for n in notes {
            let _ = write!(h, "<li>{}</li>", escape(&n));
        }
        h.push_str("</ul>");
    }
    h.push_str("</section>\n");
}

fn environment_section(h: &mut String, sources: &[Source]) {
    h.push_str("<section id=\"environment\"><h2>Environment fingerprint</h2><p class=\"lead\">Identity keys must match for two results to be compared; facts are recorded for the record.</p><div class=\"cards\">");
    for (labels, env) in environments(sources) {
        let _ = write!(
            h,
            "<div class=\"card\"><h3>{}</h3><dl class=\"kv\">",
            escape(&labels.join(", "))
        );
        for (k, v) in &env.identity {
            let _ = write!(
                h,
                "<dt><b>{}</b></dt><dd><b>{}</b></dd>",
                escape(k),
                escape(v)
            );
        }
        for (k, v) in &env.facts {
            let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(v));
        }
        h.push_str("</dl></div>");
    }
    for s in sources {
        let r = &s.results;
        let _ = write!(
            h,
            "<div class=\"card\"><h3>{} run</h3><dl class=\"kv\"><dt>file</dt><dd>{}</dd><dt>started</dt><dd>{}</dd><dt>finished</dt><dd>{}</dd><dt>complete</dt><dd>{}</dd><dt>tool</dt><dd>{} {}</dd><dt>spec</dt><dd>{} (sha256 {})</dd><dt>seed</dt><dd>{}</dd>",
            escape(&s.label),
            escape(&s.path.display().to_string()),
            escape(&r.started_at),
            escape(r.finished_at.as_deref().unwrap_or("-")),
            if r.complete { "yes" } else { "no" },
            escape(&r.tool.name),
            escape(&r.tool.version),
            escape(&r.spec.path),
            escape(r.spec.sha256.get(..12).unwrap_or(&r.spec.sha256)),
            r.spec.seed
        );
        if let Some(p) = &r.partition {
            let _ = write!(h, "<dt>partition</dt><dd>{}</dd>", escape(p));
        }
        h.push_str("</dl></div>");
    }
    h.push_str("</div></section>\n");
}

fn spec_section(h: &mut String, sources: &[Source]) {
    h.push_str("<section id=\"spec\"><h2>Spec</h2>");
    for s in sources {
        let _ = write!(
            h,
            "<h3>{} <span class=\"muted\">({})</span></h3><pre class=\"spec\">{}</pre>",
            escape(&s.label),
            escape(&s.results.spec.path),
            // Results written before redaction existed may still hold
            // header values and URL credentials: mask what the text shows.
            escape(&infer_bench_results::redact::spec_source(
                &s.results.spec.source,
                infer_bench_results::redact::global()
            ))
        );
    }
    h.push_str("</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn telemetry_time_series_become_charts() {
        let t = serde_json::json!({"gpu": {"devices": [{"index": 0, "series": {
            "t_s": [0.0, 0.1, 0.2],
            "utilization_pct": [35.0, null, 95.0],
            "memory_used_bytes": [4.0e10, 4.1e10, 4.15e10],
            "power_w": [210.0, 330.0, 345.0]
        }}]}});
        let charts =
            telemetry_charts_of(&[("c=8".into(), t), ("c=32".into(), serde_json::Value::Null)]);
        let titles: Vec<&str> = charts.iter().map(|(c, _)| c.title.as_str()).collect();
        assert_eq!(titles, ["GPU utilization", "GPU memory used", "GPU power"]);
        let util = &charts[0].0.series[0];
        assert_eq!(util.name, "c=8 gpu.devices[0].utilization_pct");
        assert!(util.points[1].y.is_nan(), "the missing sample is a gap");
        let svg = chart::render(&charts[2].0);
        assert!(svg.contains("<polyline"));
        assert!(telemetry_charts_of(&[]).is_empty());
    }

    #[test]
    fn percentile_curves_stop_at_the_sample_count() {
        let mut h = infer_bench_results::hist::new_hist();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let c = percentile_curve(&h, 1000.0);
        let (last_p, last_v) = *c.last().unwrap();
        assert!((last_p - 99.9).abs() < 1e-9, "{last_p}");
        // 3 significant digits: within 0.1% of the 999th value.
        assert!((last_v / 999.0 - 1.0).abs() < 2e-3, "{last_v}");
        assert!((c[0].1 - 1.0).abs() < 0.01);
        assert!(c.windows(2).all(|w| w[1].0 > w[0].0 && w[1].1 >= w[0].1));
    }
}
