//! The report as Markdown: the executive summary, capacity at SLO and
//! knee of every sweep, and the table of points, for pull-request
//! comments, wikis and `$GITHUB_STEP_SUMMARY`. Charts are in the HTML
//! report.

use super::{
    POINT_COLUMNS, best_sentence, environments, notes, point_cells, servers, tested, verdicts,
};
use infer_bench_judge::analysis::{Analysis, Source, describe_knee};

/// Text for a cell, a heading or a line of prose: labels, descriptions,
/// server names and notes quote specs and servers, so every piece is
/// written as the characters it holds
/// ([`infer_bench_results::outside::markdown_text`]): on one line, no
/// Markdown or HTML built from it, no link, no mention.
fn cell(s: &str) -> String {
    infer_bench_results::outside::markdown_text(s)
}

/// A table; columns for which `right` holds are right-aligned.
fn table(out: &mut String, header: &[&str], right: impl Fn(usize) -> bool, rows: &[Vec<String>]) {
    out.push_str("| ");
    out.push_str(
        &header
            .iter()
            .map(|h| cell(h))
            .collect::<Vec<_>>()
            .join(" | "),
    );
    out.push_str(" |\n|");
    for i in 0..header.len() {
        out.push_str(if right(i) { "---:|" } else { "---|" });
    }
    out.push('\n');
    for r in rows {
        out.push_str("| ");
        out.push_str(&r.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | "));
        out.push_str(" |\n");
    }
}

/// The Markdown report.
pub fn render(sources: &[Source]) -> String {
    let a = Analysis::of(sources);
    let mut out = String::new();
    let names: Vec<&str> = sources.iter().map(|s| s.label.as_str()).collect();
    out.push_str(&format!(
        "# Benchmark report: {}\n\n",
        cell(&names.join(", "))
    ));
    let v = verdicts(sources);
    out.push_str(&format!(
        "{} point{} from {} results file{}, by infer-bench {}.\n\n",
        v.points,
        super::plural(v.points),
        sources.len(),
        super::plural(sources.len()),
        sources
            .first()
            .map(|s| s.results.tool.version.as_str())
            .unwrap_or(env!("CARGO_PKG_VERSION"))
    ));

    out.push_str("## Summary\n\n");
    for s in sources {
        if let Some(d) = &s.description {
            out.push_str(&format!("- **{}:** {}\n", cell(&s.label), cell(d)));
        }
    }
    for (k, val) in tested(sources) {
        out.push_str(&format!("- **{k}:** {}\n", cell(&val)));
    }
    for (labels, env) in environments(sources) {
        let who = if sources.len() > 1 {
            format!(" ({})", labels.join(", "))
        } else {
            String::new()
        };
        let id: Vec<String> = env
            .identity
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        out.push_str(&format!(
            "- **environment{who}:** {}\n",
            cell(&id.join(", "))
        ));
    }
    let sv = servers(sources);
    if !sv.is_empty() {
        let list: Vec<String> = sv
            .iter()
            .map(|(s, n)| format!("{s} ({n} point{})", super::plural(*n)))
            .collect();
        out.push_str(&format!("- **servers:** {}\n", cell(&list.join("; "))));
    }
    out.push_str(&format!("- **verdict:** {}\n", v.sentence()));
    out.push_str(&format!(
        "- **best configuration:** {}\n\n",
        cell(&best_sentence(&a))
    ));

    if !a.sweeps.is_empty() {
        out.push_str("## Capacity at SLO and knee, by sweep\n\n");
        let rows: Vec<Vec<String>> = a
            .sweeps
            .iter()
            .map(|s| {
                vec![
                    s.name.clone(),
                    s.loads
                        .iter()
                        .map(|l| s.load_kind.show(*l))
                        .collect::<Vec<_>>()
                        .join(", "),
                    super::capacity_text(s),
                    describe_knee(&s.knee, s.load_kind),
                    s.best
                        .as_ref()
                        .map(|b| format!("{} ({})", b.label, super::fmt_sig(b.value)))
                        .unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        table(
            &mut out,
            &["sweep", "loads", "capacity at SLO", "knee", "best point"],
            |_| false,
            &rows,
        );
        out.push_str(&format!(
            "\nThe knee is the first load after which each extra unit of load adds less than {:.0}% of the throughput per unit the lowest load achieved.\n\n",
            a.knee_fraction * 100.0
        ));
    }

    out.push_str(&crate::capacity::markdown(sources));
    let (header, quality) = super::quality::markdown_table(sources);
    if !quality.is_empty() {
        out.push_str("## Quality beside speed\n\n");
        out.push_str("Each server answered the same prompts greedily, outside the timed window; agreement is the share of answers equal to the reference's, accuracy the share a dataset's scorer finds right, each with its 95% Wilson interval.\n\n");
        table(
            &mut out,
            &header,
            |i| !super::quality::left(header[i]),
            &quality,
        );
        out.push('\n');
    }
    out.push_str("## Points\n\n");
    let rows: Vec<Vec<String>> = (0..a.points.len())
        .map(|i| point_cells(&a, sources, i))
        .collect();
    let n = POINT_COLUMNS.len();
    table(&mut out, POINT_COLUMNS, |i| i >= 2 && i + 2 < n, &rows);
    out.push_str(
        "\nLatencies in ms; goodput as a share of requests; tok/s/user = 1000 / TPOT p50.\n",
    );

    let ramps = super::ramps(&a, sources);
    if !ramps.is_empty() {
        out.push_str("\n## Ramp steps\n\nEach step of a ramp measured on its own; SLOs judge the point as a whole.\n");
        for i in ramps {
            out.push_str(&format!("\n### {}\n\n", cell(&a.points[i].label)));
            let rows: Vec<Vec<String>> = a
                .point(sources, i)
                .steps
                .iter()
                .map(super::step_cells)
                .collect();
            table(&mut out, super::STEP_COLUMNS, |i| i >= 2, &rows);
        }
    }

    let reasoning = super::reasoning_rows(&a, sources);
    if !reasoning.is_empty() {
        out.push_str("\n## Reasoning and answer\n\n");
        let mut header = vec!["point"];
        header.extend(super::REASONING_COLUMNS);
        table(&mut out, &header, |i| i != 0 && i != 3, &reasoning);
        out.push_str(&format!("\n{}\n", super::REASONING_NOTE));
    }

    let retrieval = super::retrieval_rows(&a, sources);
    if !retrieval.is_empty() {
        out.push_str("\n## Embeddings and rerank\n\n");
        let mut header = vec!["point"];
        header.extend(super::RETRIEVAL_COLUMNS);
        table(&mut out, &header, |i| i > 1, &retrieval);
        out.push_str(&format!("\n{}\n", super::RETRIEVAL_NOTE));
    }

    let notes = notes(&a, sources);
    if !notes.is_empty() {
        out.push_str("\n## Notes\n\n");
        for n in notes {
            out.push_str(&format!("- {}\n", cell(&n)));
        }
    }
    out
}
