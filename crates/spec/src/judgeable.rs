//! Whether the points of a plan can be judged against a baseline as the
//! spec is written: a comparison needs `min_runs` replicates a side, which
//! are runs (`[load] runs`), or, when a point has a single run, the windows
//! of its measurement (`[load] window` over `duration`). A spec that cannot
//! give them would have every point INSUFFICIENT, and the gate would judge
//! nothing; `validate` and `run --baseline` say so before any load is sent.

use crate::model::Spec;
use crate::plan::Plan;

/// One sentence per kind of shortfall, naming the points (at most a few)
/// and the setting that fixes it; empty when every point can be judged.
pub fn warnings(spec: &Spec, plan: &Plan) -> Vec<String> {
    let need = spec.regression.min_runs.max(1) as u64;
    let mut few_runs = Vec::new();
    let mut few_windows = Vec::new();
    for p in &plan.points {
        let load = &p.config.load;
        if load.runs >= 2 {
            if (load.runs as u64) < need {
                few_runs.push((p.slug.as_str(), load.runs as u64));
            }
            continue;
        }
        // One run: its windows stand in. Points that end by request count
        // have no known window count; they are left alone.
        let Some(duration) = load.duration else {
            continue;
        };
        let window = load.window.as_secs_f64();
        let windows = if window > 0.0 {
            (duration.as_secs_f64() / window).floor() as u64
        } else {
            0
        };
        if windows < need {
            few_windows.push((p.slug.as_str(), windows, duration, load.window));
        }
    }
    let mut out = Vec::new();
    if let Some((_, runs)) = few_runs.first() {
        out.push(format!(
            "{} cannot be judged against a baseline as written: {runs} runs, and `[regression] min_runs` asks for {need} a side\n  hint: set `[load] runs = {need}` (or more)",
            name(&few_runs.iter().map(|x| x.0).collect::<Vec<_>>()),
        ));
    }
    if let Some((_, windows, duration, window)) = few_windows.first() {
        out.push(format!(
            "{} cannot be judged against a baseline as written: one run of {duration} gives {windows} window(s) of {window}, and `[regression] min_runs` asks for {need} replicates a side\n  hint: set `[load] runs = {need}` (runs are the stronger evidence), or a `[load] window` of at most {}",
            name(&few_windows.iter().map(|x| x.0).collect::<Vec<_>>()),
            at_most_ms(duration.as_nanos() / need),
        ));
    }
    out
}

/// A duration rounded down to whole milliseconds (where it is one or
/// more), as a user would write it: `1333ms`, not `1333333333ns`.
fn at_most_ms(nanos: u64) -> crate::Duration {
    const MS: u64 = 1_000_000;
    crate::Duration::from_nanos(if nanos >= MS { nanos / MS * MS } else { nanos })
}

/// "point a", "3 points (a, b, c)", "8 points (a, b, c, ...)".
fn name(slugs: &[&str]) -> String {
    match slugs {
        [one] => format!("point {one}"),
        many => {
            let shown: Vec<&str> = many.iter().take(3).copied().collect();
            format!(
                "{} points ({}{})",
                many.len(),
                shown.join(", "),
                if many.len() > 3 { ", ..." } else { "" }
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(load: &str) -> Vec<String> {
        let src = format!(
            "name = \"j\"\n[targets.t]\nkind = \"sim\"\ngpu = \"l40s\"\n[models.m]\npreset = \"llama-3.1-8b\"\n[workloads.w]\ninput_tokens = 64\noutput_tokens = 8\n[load]\nconcurrency = 4\n{load}\n"
        );
        let spec = crate::compile("j.toml", &src, std::path::Path::new(".")).expect("valid");
        let plan = Plan::build(&spec).expect("plan");
        warnings(&spec, &plan)
    }

    #[test]
    fn one_short_run_cannot_be_judged_and_says_what_fixes_it() {
        let w = check("duration = \"5s\"");
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("one run of 5s gives 0 window(s) of 10s"),
            "{}",
            w[0]
        );
        assert!(w[0].contains("`[load] runs = 3`"), "{}", w[0]);
        // 5s over 3 windows, as a user would write it.
        assert!(
            w[0].contains("a `[load] window` of at most 1666ms"),
            "{}",
            w[0]
        );
        // And the window it names is one that then judges.
        assert!(check("duration = \"5s\"\nwindow = \"1666ms\"").is_empty());
    }

    #[test]
    fn enough_runs_or_windows_can_be_judged() {
        assert!(check("duration = \"5s\"\nruns = 3").is_empty());
        assert!(check("duration = \"30s\"").is_empty());
        assert!(check("duration = \"5s\"\nwindow = \"1s\"").is_empty());
        assert!(check("requests = 100").is_empty());
    }

    #[test]
    fn two_runs_are_fewer_than_min_runs() {
        let w = check("duration = \"5s\"\nruns = 2");
        assert!(
            w[0].contains("2 runs, and `[regression] min_runs` asks for 3"),
            "{w:?}"
        );
    }
}
