//! Capacity searches (`[load] search`) as each output shows them: a line
//! per search under the terminal summary, a table in the Markdown and
//! HTML reports. The answer always comes with its uncertainty: the last
//! passing probe, the first failing one, and how far apart they are.

use std::fmt::Write;

use crate::xml::escape;
use infer_bench_judge::analysis::Source;
use infer_bench_results::search::{SearchProbe, SearchResult};
use infer_bench_spec::results::Results;

/// One line per search, for the terminal summary: `capacity of
/// <slug> (slo): 6.25 req/s (passes at 6.25, fails at 6.5: +4.0%), found
/// in 8 probes`.
pub fn summary_lines(r: &Results) -> Vec<String> {
    r.searches
        .iter()
        .map(|s| {
            format!(
                "capacity of {} ({}, within {}%): {}, {} in {} probe{}",
                s.slug,
                s.target,
                infer_bench_spec::fmt_number(s.precision_pct),
                s.answer(),
                s.outcome.name(),
                s.probes.len(),
                if s.probes.len() == 1 { "" } else { "s" }
            )
        })
        .collect()
}

fn probe_text(p: Option<&SearchProbe>) -> String {
    p.map(|p| format!("{} ({})", infer_bench_spec::fmt_number(p.level), p.id))
        .unwrap_or_else(|| "-".into())
}

/// How wide the bracket is, relative to the last pass: "+4.0%".
fn width(s: &SearchResult) -> String {
    match (&s.last_pass, &s.first_fail) {
        (Some(p), Some(f)) => format!("+{:.1}%", (f.level / p.level - 1.0) * 100.0),
        _ => "-".into(),
    }
}

fn rows(sources: &[Source]) -> Vec<(String, &SearchResult)> {
    sources
        .iter()
        .flat_map(|src| {
            src.results.searches.iter().map(move |s| {
                let name = if sources.len() > 1 {
                    format!("{}: {}", src.label, s.slug)
                } else {
                    s.slug.clone()
                };
                (name, s)
            })
        })
        .collect()
}

/// The Markdown section, empty without searches.
pub fn markdown(sources: &[Source]) -> String {
    let rows = rows(sources);
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "## Capacity searches\n\nThe highest load that met the target: at least the last pass, below the first failure.\n\n| search | target | capacity | last pass | first failure | width | probes | outcome |\n|---|---|---|---|---|--:|--:|---|\n",
    );
    let cell = |s: &str| infer_bench_results::outside::markdown_text(s);
    for (name, s) in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(&name),
            cell(&s.target),
            cell(&s.answer()),
            cell(&probe_text(s.last_pass.as_ref())),
            cell(&probe_text(s.first_fail.as_ref())),
            width(s),
            s.probes.len(),
            s.outcome.name()
        );
    }
    out.push('\n');
    out
}

/// The HTML section, empty without searches.
pub fn html(sources: &[Source]) -> String {
    let rows = rows(sources);
    if rows.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        "<section id=\"capacity-search\"><h2>Capacity searches</h2><p class=\"lead\">The highest load that met the target: at least the last pass, below the first failure. Every probe is also a point below.</p><div class=\"table-wrap\"><table><thead><tr><th class=\"l\">search</th><th class=\"l\">target</th><th class=\"l\">capacity</th><th class=\"l\">last pass</th><th class=\"l\">first failure</th><th>width</th><th class=\"l\">probes</th><th class=\"l\">outcome</th></tr></thead><tbody>",
    );
    for (name, s) in rows {
        let probes: Vec<String> = s
            .probes
            .iter()
            .map(|p| {
                format!(
                    "<span title=\"{}\">{} {}</span>",
                    escape(&p.id),
                    escape(&infer_bench_spec::fmt_number(p.level)),
                    p.verdict.name()
                )
            })
            .collect();
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l wrap\">{}</td><td class=\"l wrap\">{}</td><td class=\"l wrap\">{}</td><td>{}</td><td class=\"l wrap\">{}</td><td class=\"l\">{}</td></tr>",
            escape(&name),
            escape(&s.target),
            escape(&s.answer()),
            escape(&probe_text(s.last_pass.as_ref())),
            escape(&probe_text(s.first_fail.as_ref())),
            width(s),
            probes.join(", "),
            s.outcome.name()
        );
    }
    h.push_str("</tbody></table></div></section>\n");
    h
}
