//! Quality beside speed, as people read it: the per-point `agree` cell of
//! the summary, and the table of each server's quality figures (one row
//! per server: every point of a server shares its quality phase) next to
//! its best throughput, so the trade-off reads at a glance.

use super::table::{Align, Table};
use crate::term::Look;
use infer_bench_results::quality::PointQuality;
use infer_bench_spec::results::{PointResult, Results};

/// Whether any point of the results has quality figures.
pub fn any(r: &Results) -> bool {
    r.points.iter().any(|p| p.quality.is_some())
}

/// A point's `agree` cell: its exact-match agreement with the reference,
/// "ref" for the reference itself; without a reference, its task
/// accuracy; "-" without a figure.
pub fn cell(p: &PointResult) -> String {
    match &p.quality {
        None => "-".into(),
        Some(q) if q.is_reference => "ref".into(),
        Some(q) => match (&q.agreement, &q.accuracy) {
            (Some(a), _) => format!("{:.0}%", a.exact_match * 100.0),
            (None, Some(x)) => format!("{:.0}% right", x.rate * 100.0),
            (None, None) => "-".into(),
        },
    }
}

/// A percentage with one decimal.
fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// One server of a results file (its target, model and precision): its
/// quality figures, and the best output tokens/s of its complete points.
pub(crate) struct Server<'a> {
    /// `target/model/precision`.
    pub name: String,
    pub quality: &'a PointQuality,
    /// `None` when none of its points completed.
    pub best: Option<f64>,
}

/// The servers of the results that have quality figures, in the order
/// their first point appears.
pub(crate) fn servers(r: &Results) -> Vec<Server<'_>> {
    let mut out: Vec<Server<'_>> = Vec::new();
    for p in &r.points {
        let Some(q) = &p.quality else { continue };
        let c = &p.config;
        let mut name = format!("{}/{}", c.target.name, c.model.name);
        if let Some(pr) = &c.precision {
            name.push('/');
            name.push_str(&pr.name);
        }
        let tps = (p.status == infer_bench_results::PointStatus::Complete)
            .then_some(p.merged.output_tokens_per_s);
        match out.iter_mut().find(|s| s.name == name) {
            Some(s) => {
                s.best = match (s.best, tps) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                }
            }
            None => out.push(Server {
                name,
                quality: q,
                best: tps,
            }),
        }
    }
    out
}

/// The quality table and its notes; `None` without quality figures.
pub fn table(r: &Results, look: Look) -> Option<String> {
    let servers = servers(r);
    let first = servers.first()?.quality;
    let accuracy = servers.iter().any(|s| s.quality.accuracy.is_some());
    let mut columns = vec![("server", Align::Left), ("answered", Align::Right)];
    if accuracy {
        columns.extend([("accuracy", Align::Right), ("95% interval", Align::Left)]);
    }
    columns.extend([
        ("agreement", Align::Right),
        ("95% interval", Align::Left),
        ("first diff", Align::Right),
        ("token agr.", Align::Right),
        ("KL mean", Align::Right),
        ("best out tok/s", Align::Right),
        ("phase s", Align::Right),
    ]);
    let mut t = Table::new(&columns);
    let mut notes = Vec::new();
    for s in &servers {
        let (name, q) = (&s.name, s.quality);
        let label = if q.is_reference {
            format!("{name} (reference)")
        } else {
            name.clone()
        };
        let a = q.agreement.as_ref();
        let mut row = vec![label, format!("{}/{}", q.answered, q.prompts)];
        if accuracy {
            let x = q.accuracy.as_ref();
            row.push(x.map_or("-".into(), |x| pct(x.rate)));
            row.push(x.map_or("-".into(), |x| {
                format!("[{:.1}, {:.1}]", x.low * 100.0, x.high * 100.0)
            }));
        }
        row.extend([
            a.map_or("-".into(), |a| pct(a.exact_match)),
            a.map_or("-".into(), |a| {
                format!("[{:.1}, {:.1}]", a.exact_low * 100.0, a.exact_high * 100.0)
            }),
            a.map_or("-".into(), |a| format!("{:.1}", a.first_diff_mean)),
            a.map_or("-".into(), |a| pct(a.token_agreement)),
            a.and_then(|a| a.kl_mean)
                .map_or("-".into(), |k| format!("{k:.4}")),
            format!("{:.0}", s.best.unwrap_or(0.0)),
            format!("{:.1}", q.elapsed_s),
        ]);
        t.row(row);
        if let Some(note) = &q.note {
            notes.push(format!("{name}: {note}"));
        }
        if !q.failures.is_empty() {
            let classes: Vec<String> = q.failures.iter().map(|(c, n)| format!("{c} {n}")).collect();
            let example = q
                .failure_example
                .as_ref()
                .map(|e| format!(" (e.g. {})", e.terminal()))
                .unwrap_or_default();
            notes.push(format!(
                "{name}: quality prompts failed: {}{example}",
                classes.join(", ")
            ));
        }
    }
    let unit = first
        .agreement
        .as_ref()
        .map_or("tokens", |a| a.unit.as_str())
        .trim_end_matches('s')
        .to_string();
    let against = if first.reference.is_empty() {
        String::new()
    } else if servers
        .iter()
        .all(|s| s.quality.reference == first.reference)
    {
        format!(
            " against {}",
            infer_bench_results::outside::terminal(&first.reference)
        )
    } else {
        " against each server's reference".into()
    };
    let scorer = first
        .accuracy
        .as_ref()
        .map(|x| format!("accuracy: answers the {} scorer finds right; ", x.scorer))
        .unwrap_or_default();
    let mut out = format!(
        "quality beside speed: greedy answers to {} prompts{against}, outside the timed window\n({scorer}agreement: answers equal to the reference's; first diff: mean position of the first differing {unit}; KL in nats)\n\n",
        first.prompts,
    );
    out.push_str(&t.render_look(look, &[]).0);
    for n in notes {
        out.push_str(&infer_bench_results::outside::terminal(&n));
        out.push('\n');
    }
    Some(out)
}
