//! The plan as a table or as JSON.

use serde::Serialize;

use super::table::{Align, Table};
use infer_bench_spec::plan::{Plan, PointConfig, estimate_seconds};
use infer_bench_spec::{Level, Spec};

/// Human-friendly seconds: "45s", "12m30s", "2h05m".
pub fn human_seconds(s: f64) -> String {
    let s = s.round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

fn level(p: &PointConfig) -> String {
    match (&p.load.ramp, p.load.level) {
        (Some(r), _) => format!(
            "ramp {}..{} ({} steps)",
            r.levels[0],
            r.levels[r.levels.len() - 1],
            r.levels.len()
        ),
        (None, Level::Concurrency(c)) => format!("concurrency {c}"),
        (None, Level::Rate(r)) => {
            let cap = p
                .load
                .max_concurrency
                .map(|m| format!(" max {m}"))
                .unwrap_or_default();
            format!("{:?} {r}{cap}", p.load.arrival).to_lowercase()
        }
    }
}

fn total_estimate(plan: &Plan) -> (f64, usize) {
    let mut total = 0.0;
    let mut unknown = 0;
    for p in &plan.points {
        match estimate_seconds(&p.config) {
            Some(s) => total += s,
            None => unknown += 1,
        }
    }
    (total, unknown)
}

pub fn table(spec: &Spec, plan: &Plan) -> String {
    let mut t = Table::new(&[
        ("#", Align::Right),
        ("point", Align::Left),
        ("load", Align::Left),
        ("runs", Align::Right),
        ("est.", Align::Right),
    ]);
    for (i, p) in plan.points.iter().enumerate() {
        t.row(vec![
            (i + 1).to_string(),
            p.id.clone(),
            level(&p.config),
            p.config.load.runs.to_string(),
            estimate_seconds(&p.config)
                .map(|e| {
                    let e = human_seconds(e);
                    // A search's probes are counted at their most.
                    match p.config.load.search {
                        Some(_) => format!("up to {e}"),
                        None => e,
                    }
                })
                .unwrap_or_else(|| "?".into()),
        ]);
    }
    let (total, unknown) = total_estimate(plan);
    let mut out = format!(
        "{}: {} point{}\n\n",
        spec.name,
        plan.points.len(),
        if plan.points.len() == 1 { "" } else { "s" }
    );
    out.push_str(&t.render());
    let searches = plan.points.iter().any(|p| p.config.load.search.is_some());
    out.push_str(&format!(
        "\nestimated wall time: {}{}",
        if searches { "up to " } else { "" },
        human_seconds(total)
    ));
    if unknown > 0 {
        out.push_str(&format!(
            " plus {unknown} point(s) that end by request count (their time depends on the server)"
        ));
    }
    out.push_str(" (measurement and warm-up only; server start-up and drain not included)\n");
    out
}

#[derive(Serialize)]
struct JsonPlan<'a> {
    spec: &'a str,
    points: usize,
    estimated_seconds: f64,
    points_without_estimate: usize,
    plan: Vec<JsonPoint<'a>>,
}

#[derive(Serialize)]
struct JsonPoint<'a> {
    id: &'a str,
    slug: &'a str,
    hash: &'a str,
    axes: serde_json::Map<String, serde_json::Value>,
    estimated_seconds: Option<f64>,
    config: &'a PointConfig,
}

/// The plan as JSON: every point's configuration, with URL credentials
/// masked (header values are never serialized).
pub fn json(spec: &Spec, plan: &Plan) -> String {
    let (total, unknown) = total_estimate(plan);
    let doc = JsonPlan {
        spec: &spec.name,
        points: plan.points.len(),
        estimated_seconds: total,
        points_without_estimate: unknown,
        plan: plan
            .points
            .iter()
            .map(|p| JsonPoint {
                id: &p.id,
                slug: &p.slug,
                hash: &p.hash,
                axes: p
                    .axes
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                    .collect(),
                estimated_seconds: estimate_seconds(&p.config),
                config: &p.config,
            })
            .collect(),
    };
    let mut s = serde_json::to_string_pretty(&doc).expect("serializes");
    s.push('\n');
    infer_bench_results::redact::global().text(&s)
}
