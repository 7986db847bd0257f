//! The report's quality section: each server's speed against its quality
//! (best output tokens/s against exact-match agreement with the reference,
//! the trade-off a reader must see at a glance), a table of every quality
//! figure, and the answers that left the reference's earliest, side by
//! side, with the words that differ marked (`similar`'s word diff).
//!
//! Every answer and prompt came from a server or a results file: each
//! piece of text is escaped on its own before it is wrapped in markup.

use std::fmt::Write as _;

use similar::{ChangeTag, TextDiff};

use crate::chart::{self, Axis, Chart, Point, Series, Stroke};
use crate::quality::Server;
use crate::xml::escape;
use infer_bench_judge::analysis::Source;

/// Styles of the section: the two answers side by side, the words that
/// differ marked.
pub(crate) const STYLE: &str = r#"
.answers { display: grid; grid-template-columns: 1fr 1fr; gap: 8px 16px; margin: 6px 0 14px; }
.answers div { border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; background: var(--bg);
  font: 12.5px/1.5 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; white-space: pre-wrap; overflow-wrap: anywhere; }
.answers h4 { margin: 0 0 4px; font: 600 12px/1.4 system-ui, sans-serif; color: var(--muted); }
.answers del { background: var(--fail-bg); color: var(--fail); text-decoration: line-through; }
.answers ins { background: var(--pass-bg); color: var(--pass); text-decoration: none; }
p.prompt { margin: 10px 0 2px; }
"#;

/// The servers of every source (`crate::quality::servers`), named with
/// their source's label when there are several.
fn servers(sources: &[Source]) -> Vec<Server<'_>> {
    sources
        .iter()
        .flat_map(|s| {
            crate::quality::servers(&s.results)
                .into_iter()
                .map(move |mut x| {
                    if sources.len() > 1 {
                        x.name = format!("{}: {}", s.label, x.name);
                    }
                    x
                })
        })
        .collect()
}

/// Whether the report has a quality section.
pub(crate) fn has_section(sources: &[Source]) -> bool {
    sources
        .iter()
        .any(|s| s.results.points.iter().any(|p| p.quality.is_some()))
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// The columns of the quality table; `accuracy` and its interval follow
/// `answered` where a server has task accuracy ([`header`]).
const HEADER: &[&str] = &[
    "server",
    "answered",
    "agreement",
    "95% interval",
    "first diff",
    "token agreement",
    "KL mean (nats)",
    "best out tok/s",
    "phase s",
    "note",
];

/// The columns of the quality table of these servers.
fn header_of(servers: &[Server<'_>]) -> Vec<&'static str> {
    let mut h = HEADER.to_vec();
    if servers.iter().any(|s| s.quality.accuracy.is_some()) {
        h.splice(2..2, ["accuracy", "accuracy interval"]);
    }
    h
}

/// Whether a column holds text (left-aligned).
pub(crate) fn left(name: &str) -> bool {
    matches!(
        name,
        "server" | "95% interval" | "accuracy interval" | "note"
    )
}

/// One row per server, as plain text (each format escapes its cells), in
/// the columns of [`header_of`].
fn rows(servers: &[Server<'_>]) -> Vec<Vec<String>> {
    let accuracy = header_of(servers).contains(&"accuracy");
    servers
        .iter()
        .map(|s| {
            let q = s.quality;
            let a = q.agreement.as_ref();
            let dash = || "-".to_string();
            let mut row = vec![
                format!(
                    "{}{}",
                    s.name,
                    if q.is_reference { " (reference)" } else { "" }
                ),
                format!("{}/{}", q.answered, q.prompts),
            ];
            if accuracy {
                let x = q.accuracy.as_ref();
                row.push(x.map_or_else(dash, |x| pct(x.rate)));
                row.push(x.map_or_else(dash, |x| {
                    format!(
                        "[{:.1}, {:.1}] ({})",
                        x.low * 100.0,
                        x.high * 100.0,
                        x.scorer
                    )
                }));
            }
            row.extend([
                a.map_or_else(dash, |a| pct(a.exact_match)),
                a.map_or_else(dash, |a| {
                    format!("[{:.1}, {:.1}]", a.exact_low * 100.0, a.exact_high * 100.0)
                }),
                a.map_or_else(dash, |a| format!("{:.1} {}", a.first_diff_mean, a.unit)),
                a.map_or_else(dash, |a| pct(a.token_agreement)),
                a.and_then(|a| a.kl_mean)
                    .map_or_else(dash, |k| format!("{k:.4}")),
                s.best.map_or_else(dash, |b| format!("{b:.0}")),
                format!("{:.1}", q.elapsed_s),
                q.note.clone().unwrap_or_default(),
            ]);
            row
        })
        .collect()
}

/// The Markdown report's quality table: its columns and a row per
/// server, plain text; no rows without quality figures.
pub(crate) fn markdown_table(sources: &[Source]) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let servers = servers(sources);
    (header_of(&servers), rows(&servers))
}

/// The section; nothing without quality figures.
pub(crate) fn section(
    h: &mut String,
    sources: &[Source],
    figure: impl Fn(&mut String, &Chart, &str),
) {
    let servers = servers(sources);
    let Some(first) = servers.first() else {
        return;
    };
    let _ = write!(
        h,
        "<section id=\"quality\"><h2>Quality beside speed</h2><p class=\"lead\">Each server answered the same {} prompts greedily, outside the timed window; its answers are compared with the reference's ({}). Agreement: the share of answers equal to the reference's, with its 95% Wilson interval; accuracy, where a dataset holds expected answers: the share its scorer finds right. Up and to the right is better: a precision that moves right but down trades answers for speed.</p><div class=\"charts\">",
        first.quality.prompts,
        if first.quality.reference.is_empty() {
            "none named".to_string()
        } else {
            escape(&first.quality.reference)
        }
    );
    let mut c = Chart::new(
        "Agreement with the reference against best output tokens/s",
        Axis::linear("best output tokens/s of the server's points"),
        Axis {
            range: Some((0.0, 100.0)),
            ..Axis::linear("agreement with the reference (%)")
        },
    );
    for (i, s) in servers.iter().enumerate() {
        let Some(a) = &s.quality.agreement else {
            continue;
        };
        let best = s.best.unwrap_or(f64::NAN);
        let mut p = Point::new(best, a.exact_match * 100.0).tip(format!(
            "{}: agreement {} [{:.1}, {:.1}], {:.0} tok/s",
            s.name,
            pct(a.exact_match),
            a.exact_low * 100.0,
            a.exact_high * 100.0,
            best
        ));
        p.label = Some(s.name.rsplit('/').next().unwrap_or(&s.name).to_string());
        c.series.push(Series {
            name: s.name.clone(),
            color: i % chart::PALETTE.len(),
            stroke: Stroke::None,
            markers: true,
            points: vec![p],
            in_legend: true,
            shade: 1.0,
        });
    }
    if c.has_data() {
        figure(
            h,
            &c,
            "One marker per server (target, model, precision): its agreement and the best output tokens/s of its points.",
        );
    }
    h.push_str("</div><div class=\"table-wrap\"><table><thead><tr>");
    let header = header_of(&servers);
    for name in &header {
        let class = if left(name) { " class=\"l\"" } else { "" };
        let _ = write!(h, "<th{class}>{}</th>", escape(name));
    }
    h.push_str("</tr></thead><tbody>");
    for row in rows(&servers) {
        h.push_str("<tr>");
        for (c, name) in row.iter().zip(&header) {
            let class = match *name {
                "note" => " class=\"l wrap\"",
                _ if left(name) => " class=\"l\"",
                _ => "",
            };
            let _ = write!(h, "<td{class}>{}</td>", escape(c));
        }
        h.push_str("</tr>");
    }
    h.push_str("</tbody></table></div>");
    let with_examples: Vec<&Server<'_>> = servers
        .iter()
        .filter(|s| !s.quality.examples.is_empty())
        .collect();
    if !with_examples.is_empty() {
        h.push_str("<h3>Answers that differ</h3><p class=\"lead\">Per server, the answers that left the reference's earliest: the reference's on the left with the words it lost struck through, the server's on the right with the words it put in their place marked.</p>");
    }
    for s in with_examples {
        let _ = write!(h, "<h3>{}</h3>", escape(&s.name));
        for e in &s.quality.examples {
            let _ = write!(
                h,
                "<p class=\"prompt\"><span class=\"muted\">prompt {} (first difference at {}):</span> {}</p>",
                e.index,
                e.first_diff,
                escape(e.prompt.unencoded())
            );
            let (left, right) = diff(e.reference.unencoded(), e.answer.unencoded());
            let _ = write!(
                h,
                "<div class=\"answers\"><div><h4>reference ({})</h4>{left}</div><div><h4>{}</h4>{right}</div></div>",
                escape(&s.quality.reference),
                escape(&s.name)
            );
        }
    }
    h.push_str("</section>\n");
}

/// The two texts as markup, word by word: what only the reference has in
/// `<del>`, what only the answer has in `<ins>`, each piece escaped.
fn diff(reference: &str, answer: &str) -> (String, String) {
    let (mut left, mut right) = (String::new(), String::new());
    let d = TextDiff::from_words(reference, answer);
    for change in d.iter_all_changes() {
        let text = escape(change.value());
        match change.tag() {
            ChangeTag::Equal => {
                left.push_str(&text);
                right.push_str(&text);
            }
            ChangeTag::Delete => {
                let _ = write!(left, "<del>{text}</del>");
            }
            ChangeTag::Insert => {
                let _ = write!(right, "<ins>{text}</ins>");
            }
        }
    }
    (left, right)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_marks_words_and_escapes_every_piece() {
        let (l, r) = diff("the cat <sat> here", "the dog <sat> here");
        assert_eq!(l, "the <del>cat</del> &lt;sat&gt; here");
        assert_eq!(r, "the <ins>dog</ins> &lt;sat&gt; here");
        let (l, r) = diff("a", "a <script>alert(1)</script>");
        assert!(!l.contains("<script") && !r.contains("<script"), "{r}");
    }
}
